"""Renderer base (what a target supports) and ProgramSpec (a rendered kernel with what a runtime needs to launch it)."""
from __future__ import annotations
from dataclasses import dataclass, field
from typing import Any
from tinygrad.uop import Ops, GroupOp
from tinygrad.uop.ops import UOp
from tinygrad.uop.symbolic import simplify
from tinygrad.dtype import PtrDType, AddrSpace

class Renderer:
  """What a target supports, and `render(uops) -> source`. Codegen reads these attributes to decide what to lower."""
  device: str = ""
  suffix: str = ""
  has_local: bool = False        # GPU-style local (workgroup) ids and DEFINE_LOCAL
  has_shared: bool = False       # shared memory for GROUP_REDUCE
  has_threads: bool = False      # CPU THREAD axes (the runtime calls the kernel once per core_id)
  global_max: tuple[int, ...] | None = None  # None: no launch grid, GLOBAL/LOCAL ranges become plain loops
  local_max: tuple[int, ...] | None = None
  shared_max: int = 0
  supports_float4: bool = False  # vector loads/stores/ALU through VECTORIZE
  vector_ops: set[Ops] = set()    # ALU ops codegen may pack into vector ops
  no_vector_dtypes: tuple[Any, ...] = ()  # scalar dtypes never packed into vectors
  tensor_cores: list[Any] = []
  # integer division is slow on the target: codegen turns IDIV/MOD by a constant into a multiply and shifts
  slow_int_div: bool = False
  # ops the target renders natively; codegen decomposes the rest (decompositions.py)
  code_for_op: dict[Ops, Any] = {}
  def supports_op(self, op: Ops, dtype: Any = None) -> bool:
    """Whether the target renders `op` natively (codegen decomposes the rest, e.g. exp2/log2/sin into polynomials)."""
    return op in self.code_for_op
  def render(self, uops: list[UOp], name: str = "kernel") -> str:
    raise NotImplementedError(f"{type(self).__name__} cannot render")
  def __reduce__(self) -> tuple[Any, ...]: return (type(self), ())

# ---- program ----

def _sym_size(x: UOp, var_vals: dict[str, int]) -> int:
  if x.op is Ops.CONST: return int(x.arg)
  if x.op is Ops.DEFINE_VAR: return var_vals[x.arg[0]]
  bound = x.substitute({v: v.const_like(var_vals[v.arg[0]]) for v in x.toposort() if v.op is Ops.DEFINE_VAR})
  return int(simplify(bound).arg)

@dataclass(frozen=True)
class Estimates:
  """Work of one launch: ALU ops and bytes moved through global memory (symbolic loops count at their max)."""
  ops: int = 0
  mem: int = 0
  lds: int = 0
  @staticmethod
  def from_uops(uops: list[UOp]) -> Estimates:
    # NOTE: index math (the integer ALU feeding INDEX offsets and gates) is not counted as work
    idx_math: set[UOp] = set()
    todo = [s for u in uops if u.op is Ops.INDEX for s in u.src[1:]]
    while todo:
      if (x := todo.pop()) in idx_math or x.op not in GroupOp.ALU: continue
      idx_math.add(x)
      todo.extend(x.src)
    mult, stack, ops, mem = 1, [], 0, 0
    for u in uops:
      if u.op is Ops.RANGE:
        stack.append(mult)
        mult *= max(int(u.src[0].vmax), 0)
      elif u.op is Ops.END: mult = stack.pop()
      elif u.op in GroupOp.ALU and u.op is not Ops.WHERE and u not in idx_math: ops += mult * u.dtype.count
      elif u.op in (Ops.LOAD, Ops.STORE):
        idx = u.src[0]
        if isinstance(idx.dtype, PtrDType) and idx.dtype.addrspace is AddrSpace.GLOBAL:
          mem += mult * idx.dtype.base.itemsize * idx.dtype.v
    return Estimates(ops, mem, mem)

def _bufs_under(uops: list[UOp], op: Ops) -> tuple[int, ...]:
  # NOTE: ins/outs come from the buffer directly under each LOAD/STORE's INDEX, not from a whole-subgraph search
  ret = set()
  for u in uops:
    if u.op is not op or u.src[0].op is not Ops.INDEX: continue
    buf = u.src[0].src[0]
    while buf.op is Ops.AFTER: buf = buf.src[0]
    if buf.op is Ops.DEFINE_GLOBAL: ret.add(buf.arg)
  return tuple(sorted(ret))

@dataclass
class ProgramSpec:
  name: str
  src: str
  device: str
  ast: UOp
  uops: list[UOp] = field(default_factory=list)
  global_size: list[int | UOp] = field(default_factory=lambda: [1, 1, 1])
  local_size: list[int | UOp] | None = None
  vars: list[UOp] = field(default_factory=list)
  globals: list[int] = field(default_factory=list)
  ins: tuple[int, ...] = ()
  outs: tuple[int, ...] = ()
  estimates: Estimates = field(default_factory=Estimates)
  applied_opts: tuple[Any, ...] = ()

  @staticmethod
  def from_uops(name: str, src: str, device: str, ast: UOp, uops: list[UOp],
                applied_opts: tuple[Any, ...] = ()) -> ProgramSpec:
    gsz: list[int | UOp] = [1, 1, 1]
    lsz: list[int | UOp] | None = None
    for u in uops:
      if u.op is not Ops.SPECIAL: continue
      sz = u.src[0].arg if u.src[0].op is Ops.CONST else u.src[0]
      if u.arg == "core_id": gsz[0] = sz
      elif u.arg.startswith("gidx"): gsz[int(u.arg[-1])] = sz
      elif u.arg.startswith("lidx"):
        if lsz is None: lsz = [1, 1, 1]
        lsz[int(u.arg[-1])] = sz
    dvars = sorted([u for u in uops if u.op is Ops.DEFINE_VAR], key=lambda v: v.arg[0])
    dglobals = sorted(u.arg for u in uops if u.op is Ops.DEFINE_GLOBAL)
    ins, outs = _bufs_under(uops, Ops.LOAD), _bufs_under(uops, Ops.STORE)
    return ProgramSpec(name, src, device, ast, uops, gsz, lsz, dvars, dglobals, ins, outs, Estimates.from_uops(uops),
                       applied_opts)

  @property
  def var_names(self) -> list[str]: return [v.arg[0] for v in self.vars]
  def launch_dims(self, var_vals: dict[Any, int] | None = None) -> tuple[list[int], list[int] | None]:
    """(global_size, local_size) with symbolic sizes resolved; var_vals is keyed by variable name or DEFINE_VAR UOp."""
    vv = {(k.arg[0] if isinstance(k, UOp) else k): int(v) for k, v in (var_vals or {}).items()}
    missing = [n for n in self.var_names if n not in vv]
    if missing and any(isinstance(s, UOp) for s in self.global_size + (self.local_size or [])):
      raise KeyError(f"launch_dims of {self.name}: no value bound for variable(s) {missing}")
    gs = [s if isinstance(s, int) else _sym_size(s, vv) for s in self.global_size]
    ls = None if self.local_size is None else [s if isinstance(s, int) else _sym_size(s, vv) for s in self.local_size]
    return gs, ls
