"""Renderer base (what a target supports: the contract codegen reads) and ProgramSpec (a rendered kernel with what a
runtime needs to launch it).

The contract: every property codegen reads from a renderer is a typed attribute or method declared on `Renderer` below,
with its meaning; codegen reads nothing else (tests/codegen/test_renderer_contract.py records every read). A renderer
sets the class attributes that describe its target, or instance attributes in `__init__` where they depend on how the
device was opened (the CPU's thread count, the emulated GPU of PYTHON)."""
from __future__ import annotations
import hashlib
from dataclasses import dataclass, field
from typing import Any, ClassVar
from tinygrad.uop import Ops, GroupOp
from tinygrad.uop.ops import UOp, PatternMatcher
from tinygrad.uop.symbolic import simplify
from tinygrad.uop.sint import sint, ssimplify, infer
from tinygrad.dtype import DType, PtrDType, AddrSpace, dtypes
from tinygrad.renderer.tensor_cores import TensorCore

# ---- what a target has ----

@dataclass(frozen=True)
class Vectors:
  """The vector types of one scalar dtype on a target."""
  widths: tuple[int, ...]             # lane counts of its vector types (loads, stores, VECTORIZE, GEP), widest first
  ops: frozenset[Ops] = frozenset()   # ALU ops (and CAST) the target computes lane-wise on those types

def _canon(v: Any) -> str:
  """A repr that does not depend on hash order (sets, dict order), so an identity is the same in every process."""
  if isinstance(v, (set, frozenset)): return "{" + ", ".join(sorted(_canon(x) for x in v)) + "}"
  if isinstance(v, dict): return "{" + ", ".join(sorted(f"{_canon(k)}: {_canon(x)}" for k, x in v.items())) + "}"
  if isinstance(v, (list, tuple)): return "(" + ", ".join(_canon(x) for x in v) + ")"
  if isinstance(v, Vectors): return f"Vectors({_canon(v.widths)}, {_canon(v.ops)})"
  return repr(v)

class Renderer:
  """What a target supports, and `render(uops, name) -> source`. Codegen reads exactly the attributes and methods
  declared here (docs/ir.md section 4); a subclass sets them for its target and implements `render`."""
  # ---- the target ----
  device: str = ""                          # the device its programs run on: "CPU", "PYTHON", "NV", "AMD"
  arch: str = ""                            # the architecture it renders for ("sm_90", "gfx1100"; "" for a generic one)
  # ---- parallelism ----
  has_local: bool = False                   # workgroups: LOCAL axes become local ids (lidxN), DEFINE_LOCAL exists
  has_shared: bool = False                  # memory shared by a workgroup (GROUP/GROUPTOP reduce through it)
  has_threads: bool = False                 # CPU THREAD axes: one SPECIAL core_id, the runtime calls the kernel per id
  threads: int = 1                          # the most CPU threads a THREAD axis may use (1 without has_threads)
  global_max: tuple[int, ...] | None = None  # launch grid limit per dimension; None: no grid, GLOBAL axes stay loops
  local_max: tuple[int, ...] | None = None  # workgroup size limit per dimension (has_local)
  local_max_total: int = 0                  # the most threads in one workgroup (the product of the local sizes)
  shared_max: int = 0                       # bytes of shared (DEFINE_LOCAL) memory per workgroup
  wave: int = 32                            # threads that execute together (warp 32; wavefront 64 on CDNA, 32 RDNA)
  # ---- what it computes natively ----
  vectors: dict[DType, Vectors] = {}        # scalar dtype -> its vector types; absent: that dtype is scalar only
  tensor_cores: tuple[TensorCore, ...] = ()  # the matrix instructions the TC opt may use; none by default
  code_for_op: dict[Ops, Any] = {}          # the scalar ops it renders (the default `supports_op` reads this)
  extra_matcher: PatternMatcher | None = None  # rules run last, right before linearizing ("final renderer rules")
  # lanes of a vector load with a gate each (a padded axis' lanes) become one masked vector load, so padding an upcast
  # axis keeps its loads vector; without it they are scalar gated loads
  masked_loads: bool = False
  # a CPU target's vector registers (16 on AVX2, 32 on AVX-512): the heuristics size register tiles by them; 0 where the
  # renderer does not pick its vectors (the C path, whose compiler does)
  vector_registers: int = 0
  # the int dtypes (8 to 32 bits) whose IDIV/MOD by a constant codegen lowers to a multiply and shifts (magic numbers,
  # decompositions.pm_fast_divmod; proved by z3 in fuzz/ledger/codegen.py): where division is slow (a GPU has no
  # integer divider) or where the target's own lowering of it is wrong
  div_by_multiply: tuple[DType, ...] = ()
  # the attributes that make up `identity` (a subclass whose output depends on more state adds its names)
  IDENTITY: ClassVar[tuple[str, ...]] = ("device", "arch", "has_local", "has_shared", "has_threads", "threads",
                                         "global_max", "local_max", "local_max_total", "shared_max", "wave",
                                         "vectors", "tensor_cores", "div_by_multiply", "masked_loads")

  def supports_op(self, op: Ops, dtype: DType) -> bool:
    """Whether the target computes `op` on `dtype` natively; codegen decomposes the rest (exp2/log2/sin into
    polynomials, MULACC, THREEFRY) and packs vector lanes into an op only where this holds for the vector dtype."""
    if dtype.count == 1: return op in self.code_for_op
    vec = self.vectors.get(dtype.scalar())
    return vec is not None and dtype.count in vec.widths and op in vec.ops

  def vector_widths(self, dtype: DType) -> tuple[int, ...]:
    """The lane counts of `dtype`'s vector types, widest first (empty: scalar only)."""
    vec = self.vectors.get(dtype.scalar())
    return vec.widths if vec is not None else ()

  def acc_widths(self, dtype: DType) -> tuple[int, ...]:
    """Lane counts of the vector accumulators the renderer itself packs a reduce's upcast lanes into, widest first (the
    widest fills one vector register); empty where it leaves that to a compiler (the C path) or has none. The CPU
    heuristics size register tiles and pack panels (OptOps.PACK) by it."""
    return ()

  def render(self, uops: list[UOp], name: str = "kernel") -> str:
    """The source of the linear program `uops` (docs/ir.md section 3) as a function called `name`."""
    raise NotImplementedError(f"{type(self).__name__} cannot render")

  @property
  def identity(self) -> str:
    """What decides this renderer's output, as a string that is the same in every process: its class, device, arch,
    thread count and a digest of every other contract value. Part of every cache key (compile cache, BEAM) and of the
    records process replay keeps: two renderers with the same identity render the same kernel the same way."""
    cls = type(self)
    vals = {k: getattr(self, k) for k in cls.IDENTITY}
    digest = hashlib.sha256(_canon(vals).encode()).hexdigest()[:16]
    name = f"{cls.__module__}.{cls.__qualname__}"
    return f"{name}(device={self.device}, arch={self.arch}, threads={self.threads}, {digest})"

  def __reduce__(self) -> tuple[Any, ...]: return (type(self), ())

# ---- program ----

def _sym_size(x: UOp, var_vals: dict[str, int]) -> int:
  if x.op is Ops.CONST: return int(x.arg)
  if x.op is Ops.DEFINE_VAR: return var_vals[x.arg[0]]
  bound = x.substitute({v: v.const_like(var_vals[v.arg[0]]) for v in x.toposort() if v.op is Ops.DEFINE_VAR})
  return int(simplify(bound).arg)

def _index_size(u: UOp) -> sint:
  """A loop or grid size of the linear program as a size over dtypes.index variables (the program's are int32)."""
  if u.op is Ops.CONST: return int(u.arg)
  new: dict[UOp, UOp] = {}
  for x in u.toposort():
    if x.op is Ops.DEFINE_VAR: new[x] = UOp.variable(x.arg[0], x.arg[1], x.arg[2])
    elif x.op is Ops.CONST: new[x] = UOp.const(dtypes.index, x.arg)
    elif x.op is Ops.CAST: new[x] = new[x.src[0]]
    elif x.op in GroupOp.ALU: new[x] = UOp(x.op, dtypes.index, tuple(new[s] for s in x.src), x.arg)
    else: raise ValueError(f"a loop size of {x.op} is not index arithmetic: {u!r}")
  return ssimplify(new[u])

@dataclass(frozen=True)
class Estimates:
  """Work of one launch: ALU ops and bytes moved through global memory, summed over every thread of the grid and every
  loop iteration; a size that depends on a variable (`sint`) is counted at the launch's values (`at(var_vals)`). A
  fused multiply-add (MULACC) is two ops, a multiply and an add, as in the usual flop count: the same matmul has the
  same ops whether or not the renderer fuses it."""
  ops: sint = 0
  mem: sint = 0
  lds: sint = 0
  def at(self, var_vals: dict[str, int]) -> tuple[int, int]:
    """(ops, mem) with the variables at these values."""
    return infer(self.ops, var_vals), infer(self.mem, var_vals)
  @staticmethod
  def from_uops(uops: list[UOp]) -> Estimates:
    # NOTE: index math (the integer ALU feeding INDEX offsets and gates) is not counted as work
    idx_math: set[UOp] = set()
    todo = [s for u in uops if u.op is Ops.INDEX for s in u.src[1:]]
    while todo:
      if (x := todo.pop()) in idx_math or x.op not in GroupOp.ALU: continue
      idx_math.add(x)
      todo.extend(x.src)
    # NOTE: every thread of the grid (gidx, lidx, the CPU's core_id) runs the body once
    threads: dict[str, sint] = {u.arg: _index_size(u.src[0]) for u in uops if u.op is Ops.SPECIAL}
    mult: sint = 1
    for t in threads.values(): mult = mult * t
    stack: list[sint] = []
    ops: sint = 0
    mem: sint = 0
    for u in uops:
      if u.op is Ops.RANGE:
        stack.append(mult)
        mult = mult * _index_size(u.src[0])
      elif u.op is Ops.END: mult = stack.pop()
      elif u.op in GroupOp.ALU and u.op is not Ops.WHERE and u not in idx_math:
        ops = ops + mult * u.dtype.count * (2 if u.op is Ops.MULACC else 1)
      elif u.op in (Ops.LOAD, Ops.STORE):
        idx = u.src[0]
        if isinstance(idx.dtype, PtrDType) and idx.dtype.addrspace is AddrSpace.GLOBAL:
          mem = mem + mult * (idx.dtype.base.itemsize * idx.dtype.v)
    ops, mem = ssimplify(ops), ssimplify(mem)
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
  """A rendered kernel: its source, the kernel AST it came from, the linear program, launch sizes, parameters, the opts
  that were applied and the identity of the renderer that made it (`get_program(ast, renderer, applied_opts)` with a
  renderer of that identity gives back `src`)."""
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
  renderer: str = ""

  @staticmethod
  def from_uops(name: str, src: str, renderer: Renderer, ast: UOp, uops: list[UOp],
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
    return ProgramSpec(name, src, renderer.device, ast, uops, gsz, lsz, dvars, dglobals, ins, outs,
                       Estimates.from_uops(uops), applied_opts, renderer.identity)

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
