"""Program records: what it takes to compile a kernel again in another process and get the same program.

A record (KernelRecord, versioned by KERNEL_RECORD_SCHEMA) holds the kernel AST as the scheduler made it (pyrender
text), the renderer's identity, the codegen flags (helpers.codegen_flags), the applied opts, and the result (name,
source, linear program, launch sizes and buffers). `recompile` compiles it again from an AST the caller rebuilt from
the text: tinygrad never evaluates text itself, the harness does it safely (spec.eval_pyrender), so a record from an
untrusted file cannot run code. Process replay stores these records; the determinism test
(tests/codegen/test_determinism.py) captures every program of tests/tensor as records and recompiles them.
"""
from __future__ import annotations
from dataclasses import dataclass
from typing import Any, ClassVar
from tinygrad.uop.ops import UOp
from tinygrad.uop.pyrender import pyrender, pyrender_list
from tinygrad.helpers import Context, codegen_flags
from tinygrad.renderer import Renderer, ProgramSpec
from tinygrad.codegen.opt import Opt
from tinygrad.codegen import get_program

# 2: the record names its schema (`schema`). 1: records written before that, the same fields otherwise (read as 1)
KERNEL_RECORD_SCHEMA = 2

class RecordFormatError(ValueError):
  """A kernel record that is not one this version reads: a field missing or of another type, or a newer schema."""

def _size(x: Any) -> Any: return x if isinstance(x, int) else pyrender(x)

def _typed(v: Any, want: Any) -> bool: return isinstance(v, want) and not (isinstance(v, bool) and bool not in want)

@dataclass(frozen=True)
class KernelRecord:
  """One compiled kernel: its inputs (INPUTS: what get_program was given) and what came out. JSON lists are held as
  tuples; opts in Opt.to_json's form (Opt.from_json reads them back in `applied_opts`), so that a record naming an opt
  this version lacks still reads and says so when its opts are asked for."""
  ast: str                                  # pyrender text of the kernel AST given to get_program
  renderer: str                             # Renderer.identity
  device: str
  flags: tuple[tuple[Any, ...], ...]        # codegen_flags() at compile time: (name, value)
  opts: tuple[tuple[Any, ...], ...]         # the applied opts, each Opt.to_json()
  name: str
  src: str
  uops: str                                 # pyrender text of the linear program
  global_size: tuple[Any, ...]              # ints, or pyrender text of a symbolic size
  local_size: tuple[Any, ...] | None
  globals: tuple[Any, ...]
  ins: tuple[Any, ...]
  outs: tuple[Any, ...]
  vars: tuple[Any, ...]                     # DEFINE_VAR names
  chosen: bool | None = None                # get_program chose the opts (None: not known, an older record)
  compile: dict[str, Any] | None = None     # the target toolchain's compile-only result (replay --targets NV,AMD)
  schema: int = KERNEL_RECORD_SCHEMA

  INPUTS: ClassVar[tuple[str, ...]] = ("ast", "renderer", "device", "flags", "opts")
  # field -> the JSON types it may have
  JSON_TYPES: ClassVar[dict[str, Any]] = {
    "ast": (str,), "renderer": (str,), "device": (str,), "flags": (list,), "opts": (list,), "name": (str,),
    "src": (str,), "uops": (str,), "global_size": (list,), "local_size": (list, type(None)), "globals": (list,),
    "ins": (list,), "outs": (list,), "vars": (list,), "chosen": (bool,), "compile": (dict,), "schema": (int,)}
  OPTIONAL: ClassVar[tuple[str, ...]] = ("chosen", "compile", "schema")

  def key(self) -> tuple[Any, ...]:
    """The inputs of the compile: two records with the same key must have the same name and source."""
    return (self.ast, self.renderer, self.device, self.flags, self.opts)
  def applied_opts(self) -> tuple[Opt, ...]:
    """The opts as Opts. Raises UnknownOptError for an OptOps this version lacks, ValueError for a malformed one."""
    return tuple(Opt.from_json(list(o)) for o in self.opts)
  def to_json(self) -> dict[str, Any]:
    """A JSON object (tuples as lists; `chosen` and `compile` only when known)."""
    d: dict[str, Any] = {
      "ast": self.ast, "renderer": self.renderer, "device": self.device, "flags": [list(f) for f in self.flags],
      "opts": [list(o) for o in self.opts], "name": self.name, "src": self.src, "uops": self.uops,
      "global_size": list(self.global_size), "local_size": None if self.local_size is None else list(self.local_size),
      "globals": list(self.globals), "ins": list(self.ins), "outs": list(self.outs), "vars": list(self.vars),
      "schema": self.schema}
    if self.chosen is not None: d["chosen"] = self.chosen
    if self.compile is not None: d["compile"] = self.compile
    return d
  @staticmethod
  def from_json(d: Any) -> KernelRecord:
    """The record of a JSON object `to_json` wrote, of this schema or an older one. Raises RecordFormatError naming
    the field that is missing or mistyped, or the schema this version does not read."""
    if not isinstance(d, dict): raise RecordFormatError(f"a kernel record is a JSON object, not a {type(d).__name__}")
    for k, want in KernelRecord.JSON_TYPES.items():
      if k not in d:
        if k in KernelRecord.OPTIONAL: continue
        raise RecordFormatError(f"field {k!r} is missing")
      if not _typed(d[k], want): raise RecordFormatError(f"field {k!r} is a {type(d[k]).__name__}")
    if (schema := d.get("schema", 1)) > KERNEL_RECORD_SCHEMA or schema < 1:
      raise RecordFormatError(f"schema {schema}: this version reads kernel records of schema 1 to "
                              f"{KERNEL_RECORD_SCHEMA}")
    def tup(v: Any) -> Any: return tuple(tup(x) for x in v) if isinstance(v, list) else v
    vals = {k: tup(d[k]) for k in KernelRecord.JSON_TYPES if k in d}
    return KernelRecord(**{**vals, "schema": schema})

def record_program(ast: UOp, p: ProgramSpec, chosen: bool | None = None) -> KernelRecord:
  """The record of program `p`, compiled from kernel AST `ast` under the current codegen flags (`chosen`: whether
  get_program chose the opts, when the caller knows)."""
  return KernelRecord(pyrender(ast), p.renderer, p.device, tuple(codegen_flags()),
                      tuple(tuple(o.to_json()) for o in p.applied_opts), p.name, p.src, pyrender_list(list(p.uops)),
                      tuple(_size(x) for x in p.global_size),
                      None if p.local_size is None else tuple(_size(x) for x in p.local_size), tuple(p.globals),
                      tuple(p.ins), tuple(p.outs), tuple(str(v.arg[0]) for v in p.vars), chosen)

def recompile(rec: KernelRecord, ast: UOp, renderer: Renderer) -> ProgramSpec:
  """Compile the recorded kernel again, under the recorded codegen flags and with the recorded opts. `ast` is the kernel
  rebuilt from `rec.ast`; `renderer` must have the recorded identity (checked under the recorded flags, which some
  renderers follow, e.g. EMULATE)."""
  with Context(**dict(rec.flags)):
    if renderer.identity != rec.renderer:
      raise ValueError(f"recompile {rec.name}: the renderer is {renderer.identity}, the record's {rec.renderer}")
    return get_program(ast, renderer, rec.applied_opts())
