"""Program records: what it takes to compile a kernel again in another process and get the same program.

A record holds the kernel AST as the scheduler made it (pyrender text), the renderer's identity, the codegen flags
(helpers.codegen_flags), the applied opts, and the result (name, source). `recompile` compiles it again from an AST the
caller rebuilt from the text: tinygrad never evaluates text itself, the harness does it safely (spec.eval_pyrender), so
a record from an untrusted file cannot run code. Process replay stores these records; the determinism test
(tests/codegen/test_determinism.py) captures every program of tests/tensor as records and recompiles them.
"""
from __future__ import annotations
import json
from dataclasses import dataclass, asdict
from typing import Any
from tinygrad.uop.ops import UOp
from tinygrad.uop.pyrender import pyrender
from tinygrad.helpers import Context, codegen_flags
from tinygrad.renderer import Renderer, ProgramSpec
from tinygrad.codegen.opt import Opt, OptOps
from tinygrad.codegen import get_program

def _tuples(x: Any) -> Any: return tuple(_tuples(v) for v in x) if isinstance(x, (list, tuple)) else x

@dataclass(frozen=True)
class ProgramRecord:
  ast: str                                # pyrender text of the kernel AST given to get_program
  device: str
  renderer: str                           # Renderer.identity
  flags: tuple[tuple[str, Any], ...]      # codegen_flags() at compile time
  opts: tuple[tuple[str, Any, Any], ...]  # the applied opts as (OptOps name, axis, arg)
  name: str
  src: str

  def key(self) -> tuple[str, str, tuple[tuple[str, Any], ...], tuple[tuple[str, Any, Any], ...]]:
    """The inputs of the compile: two records with the same key must have the same name and source."""
    return (self.ast, self.renderer, self.flags, self.opts)
  def applied_opts(self) -> tuple[Opt, ...]:
    try: return tuple(Opt(OptOps[op], axis, arg) for op, axis, arg in self.opts)
    except KeyError as e: raise ValueError(f"program record of {self.name}: unknown opt {e}") from e
  def to_json(self) -> str:
    """One line of JSON (a JSON-lines file holds one record per line)."""
    return json.dumps(asdict(self), separators=(",", ":"))
  @staticmethod
  def from_json(line: str) -> ProgramRecord:
    d = json.loads(line)
    missing = [k for k in ProgramRecord.__dataclass_fields__ if k not in d]
    if missing: raise ValueError(f"program record: fields {missing} missing in {line[:120]!r}")
    return ProgramRecord(d["ast"], d["device"], d["renderer"], _tuples(d["flags"]), _tuples(d["opts"]), d["name"],
                         d["src"])

def record_program(ast: UOp, p: ProgramSpec) -> ProgramRecord:
  """The record of program `p`, compiled from kernel AST `ast` under the current codegen flags."""
  opts = tuple((o.op.name, o.axis, o.arg) for o in p.applied_opts)
  return ProgramRecord(pyrender(ast), p.device, p.renderer, codegen_flags(), opts, p.name, p.src)

def recompile(rec: ProgramRecord, ast: UOp, renderer: Renderer) -> ProgramSpec:
  """Compile the recorded kernel again, under the recorded codegen flags and with the recorded opts. `ast` is the kernel
  rebuilt from `rec.ast`; `renderer` must have the recorded identity (checked under the recorded flags, which some
  renderers follow, e.g. EMULATE)."""
  with Context(**dict(rec.flags)):
    if renderer.identity != rec.renderer:
      raise ValueError(f"recompile {rec.name}: the renderer is {renderer.identity}, the record's {rec.renderer}")
    return get_program(ast, renderer, rec.applied_opts())
