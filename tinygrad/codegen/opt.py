"""Kernel optimisations: `Opt`s rewrite the RANGEs of a kernel AST (split a range, change its AxisType).

Axis numbering (what `Opt.axis` means):
- UPCAST, LOCAL, THREAD, PADTO, SWAP count among the *output axes*: RANGEs of AxisType LOOP or GLOBAL, sorted by id.
- UNROLL, GROUP, GROUPTOP count among the *reduce axes*: RANGEs of AxisType REDUCE, sorted by id.
A split keeps the original RANGE (same id and AxisType, smaller end) and adds a new one, so these lists are stable
while opts are applied one after another: `Opt(UPCAST, 0, 4)` then `Opt(UPCAST, 0, 4)` upcasts axis 0 twice. The
exception: an opt over the whole axis (arg 0, or arg == size) changes the axis' type, so it leaves its list.

Splits (N the axis size, amt the Opt's arg, 0 meaning the whole axis):
- UPCAST/UNROLL/LOCAL/GROUP: r -> r' * amt + new  (new is the inner, contiguous part: vector lanes, local threads)
- THREAD/GROUPTOP:           r -> new * (N // amt) + r'  (new is the outer part: each thread/group gets a block; THREAD
                             in a cut kernel splits each of its store loops so, _thread_pieces)

CUT (CPU targets, first opt only, no axis or arg): every store loop whose body compares its range against constants (the
masks of cat and pad) becomes several branch-free loops (cutting.py). Each piece gets fresh ranges, so the opts after it
name the pieces' axes. Being an opt, a cut is chosen (heuristics, BEAM) and recorded like any other: the applied opts
of a program rebuild it exactly, and explicit opts without CUT leave the loops whole.

PACK (any target; axis which of `packable_loads`, arg None/0 or PACK_OPERAND): the load's panel (its index over the
reduce and lane ranges) is copied into a contiguous per-thread buffer (a local BUFFERIZE over fresh LOOP ranges) that
the load then reads. PACK_OPERAND: the panel of the load's operand (the load and its fused elementwise ops,
`pack_operand`), computed in the fill, in the input's order.

TC (GPU targets with tensor cores, first opt only; arg the instruction's name, axis which (m, n, k) candidate): the
kernel's matmul-like reduce computed by a tensor core (apply_tc; docs/ir.md "Tensor cores"). Its lanes are a WARP range
(lidx0); the tile axes keep their ids with sizes divided by the tile, so later UPCAST/LOCAL opts name them as before.
"""
from __future__ import annotations
from dataclasses import dataclass, field
from typing import Any
from tinygrad.uop import Ops, GroupOp, AxisType, FastEnum
from tinygrad.uop.ops import UOp
from tinygrad.uop.symbolic import simplify
from tinygrad.dtype import DType, dtypes
from tinygrad.helpers import prod, round_up, to_function_name
from tinygrad.renderer import Renderer
from tinygrad.renderer.tensor_cores import TensorCore, Layout
from tinygrad.codegen.cutting import cut_store_ranges
from tinygrad.codegen.grid import LOCAL_TYPES, grid_plan, plan_for

class OptOps(FastEnum):
  TC = 1; UPCAST = 2; UNROLL = 3; LOCAL = 4; THREAD = 5; GROUP = 6; GROUPTOP = 7; NOLOCALS = 8; PADTO = 9; SWAP = 10
  CUT = 11; KBLOCK = 12; PACK = 13

@dataclass(frozen=True)
class Opt:
  op: OptOps
  axis: int | None = None
  arg: Any = None
  def __repr__(self) -> str: return f"Opt(op={self.op!r}, axis={self.axis!r}, arg={self.arg!r})"
  def to_json(self) -> list[Any]:
    """[OptOps name, axis, arg]: the one form every record and reproducer stores an opt in."""
    return [self.op.name, self.axis, self.arg]
  @staticmethod
  def from_json(x: Any) -> Opt:
    """The opt of `to_json`'s form. Raises UnknownOptError for an OptOps name this version lacks, ValueError for
    anything else that is not that form (axis an int or null; arg an int, a string (a tensor core's name) or null)."""
    if not (isinstance(x, list) and len(x) == 3 and isinstance(x[0], str)):
      raise ValueError(f"opt {str(x)[:80]}: not [OptOps name, axis, arg]")
    op, axis, arg = x
    if op not in OptOps.__members__: raise UnknownOptError(f"opt {op[:40]!r} does not exist in this version")
    if not (axis is None or type(axis) is int) or not (arg is None or type(arg) in (int, str)):
      raise ValueError(f"opt {op}: axis must be an int or null and arg an int, a string or null, not {axis!r}, {arg!r}")
    return Opt(OptOps.__members__[op], axis, arg)

class UnknownOptError(ValueError):
  """A stored opt names an OptOps this version does not have."""

class KernelOptError(Exception):
  """An Opt that does not fit this kernel or this target. Heuristics and BEAM catch it and try something else."""

@dataclass(frozen=True)
class KernelInfo:
  """The SINK's arg: the kernel's name, the opts asked for (None-free tuple; used instead of heuristics when given) and
  the opts that were applied."""
  name: str = ""
  opts: tuple[Opt, ...] = field(default_factory=tuple)
  applied_opts: tuple[Opt, ...] = field(default_factory=tuple)

def kernel_name(ast: UOp) -> str:
  """`r_4_16` (has a reduce) / `E_64`: the range sizes in layout order; a KernelInfo name wins. Deterministic."""
  if isinstance(ast.arg, KernelInfo) and ast.arg.name: return to_function_name(ast.arg.name)
  topo = ast.toposort()
  rngs = sorted([u for u in topo if u.op is Ops.RANGE], key=lambda r: (r.arg[-1], r.arg[0]))
  sizes = [str(r.src[0].arg) if r.src[0].op is Ops.CONST else r.src[0].arg[0] if r.src[0].op is Ops.DEFINE_VAR else "s"
           for r in rngs]
  reduces = (AxisType.REDUCE, AxisType.GROUP_REDUCE, AxisType.UNROLL)
  kind = "r" if any(u.op is Ops.REDUCE or (u.op is Ops.RANGE and u.arg[-1] in reduces) for u in topo) else "E"
  return to_function_name("_".join([kind, *(sizes or ["1"])]))

# ---- limits ----

MAX_UPCAST = 16        # one UPCAST/UNROLL opt
MAX_UPCAST_TOTAL = 512  # product of all UPCAST and UNROLL sizes (vector lanes and registers per thread)

def max_threads(renderer: Renderer) -> int:
  """How many CPU threads a THREAD axis may use on this renderer (its `threads`; never this machine's core count, so
  the same kernel gets the same opts on every machine that has the same renderer)."""
  return renderer.threads if renderer.has_threads else 1

# ---- axes ----

OUTPUT_TYPES = (AxisType.LOOP, AxisType.GLOBAL)

def all_ranges(ast: UOp) -> list[UOp]:
  """Every RANGE of the kernel opts may change, in loop order: by AxisType, then id. Not the ranges a local BUFFERIZE
  closes: they are the loop that fills its per-thread buffer, whatever the grid (found by fuzz: one made GLOBAL filled
  only its thread's slot)."""
  topo = ast.toposort()
  fill = {r for u in topo if u.op is Ops.BUFFERIZE for r in u.src[1:]}
  return sorted([u for u in topo if u.op is Ops.RANGE and u not in fill], key=lambda r: (r.arg[-1], r.arg[0]))
def output_axes(ast: UOp) -> list[UOp]: return sorted(axes_of(ast, *OUTPUT_TYPES), key=lambda r: r.arg[0])
def reduce_axes(ast: UOp) -> list[UOp]: return sorted(axes_of(ast, AxisType.REDUCE), key=lambda r: r.arg[0])
def axes_of(ast: UOp, *types: AxisType) -> list[UOp]: return [r for r in all_ranges(ast) if r.arg[-1] in types]
def axis_size(r: UOp) -> int | None:
  """The constant size of a RANGE, or None when symbolic."""
  return r.src[0].arg if r.src[0].op is Ops.CONST and isinstance(r.src[0].arg, int) else None

def replace_ranges(ast: UOp, mapping: dict[UOp, tuple[UOp, tuple[UOp, ...]]]) -> UOp:
  """Substitute each RANGE r of `mapping` by its expression, and in END/REDUCE (which close ranges) by its RANGEs."""
  new: dict[UOp, UOp] = {}
  for u in ast.toposort():
    if u in mapping: new[u] = mapping[u][0]; continue
    if u.op in (Ops.END, Ops.REDUCE):
      closed: list[UOp] = []
      for s in u.src[1:]: closed.extend(mapping[s][1] if s in mapping else (new[s],))
      nsrc = (new[u.src[0]], *closed)
    else: nsrc = tuple(new[s] for s in u.src)
    new[u] = u if len(nsrc) == len(u.src) and all(a is b for a, b in zip(nsrc, u.src)) else u.replace(src=nsrc)
  return new[ast]

def _next_id(ast: UOp) -> int: return max((u.arg[0] for u in ast.toposort() if u.op is Ops.RANGE), default=-1) + 1
def _retype(r: UOp, at: AxisType) -> UOp: return r.replace(arg=(*r.arg[:-1], at))

def split_range(ast: UOp, r: UOp, amt: int, new_type: AxisType, top: bool = False) -> UOp:
  """Split RANGE r (size N) into a kept part of size N // amt and a new RANGE of size amt and AxisType new_type."""
  size = axis_size(r)
  if size is None: raise KernelOptError(f"range {r.arg} has a symbolic size; only constant sizes can be split")
  if amt == size: return replace_ranges(ast, {r: (nr := _retype(r, new_type), (nr,))})
  if amt <= 1 or size % amt != 0: raise KernelOptError(f"range {r.arg} of size {size} cannot be split by {amt}")
  kept = r.replace(src=(UOp.const(r.dtype, size // amt),))
  new = UOp.range(amt, _next_id(ast), new_type, dtype=r.dtype)
  if top: return replace_ranges(ast, {r: (new * (size // amt) + kept, (new, kept))})
  return replace_ranges(ast, {r: (kept * amt + new, (kept, new))})

def _thread_pieces(ast: UOp, amt: int) -> UOp:
  """THREAD in a kernel of several store loops with ranges of their own (CUT's pieces): each other loop is split across
  the same `amt` threads too, on its outermost LOOP axis that amt divides (its THREAD range lowers to the same core_id).
  Every thread ran every loop that THREAD did not split, all of it: the same values stored twice. Measured alone (AVX2,
  2 threads): the max-pool gradient's phases over 32 x 64 x 64 x 64 (9 pieces, 1 threaded) 18.8-24.5 ms -> 10.1. A loop
  with no such axis of its own (one another store loop shares: splitting it there would give that loop a second THREAD
  range on the one core_id) is still run by every thread."""
  while True:
    ends = [u for u in ast.toposort() if u.op is Ops.END and u.src[0].op is Ops.STORE]
    for e in ends:
      if any(r.op is Ops.RANGE and r.arg[-1] is AxisType.THREAD for r in e.src[1:]): continue
      others = [o for o in ends if o is not e]
      own = [r for r in e.src[1:] if r.op is Ops.RANGE and r.arg[-1] is AxisType.LOOP and
             (n := axis_size(r) or 0) >= amt and n % amt == 0 and
             not any(r in o.src[0]._ranges or r in o.src[1:] for o in others)]
      if own:
        ast = split_range(ast, min(own, key=lambda r: r.arg[0]), amt, AxisType.THREAD, top=True)
        break
    else: return ast

# ---- checks ----

def _pick(axes: list[UOp], opt: Opt, kind: str) -> UOp:
  if not isinstance(opt.axis, int) or not 0 <= opt.axis < len(axes):
    raise KernelOptError(f"{opt}: axis {opt.axis} out of range; the kernel has {len(axes)} {kind} axes")
  return axes[opt.axis]

def _amount(r: UOp, opt: Opt) -> int:
  size = axis_size(r)
  if size is None: raise KernelOptError(f"{opt}: axis {r.arg} has a symbolic size")
  if size == 0: raise KernelOptError(f"{opt}: axis {r.arg} is empty")
  if not isinstance(opt.arg, int) or opt.arg < 0: raise KernelOptError(f"{opt}: arg must be an int >= 0 (0: all)")
  amt = size if opt.arg == 0 else opt.arg
  if size % amt != 0: raise KernelOptError(f"{opt}: {amt} does not divide axis {r.arg[0]} of size {size}")
  if amt <= 1: raise KernelOptError(f"{opt}: splitting by {amt} does nothing")
  return amt

def _symbolic_amount(r: UOp, opt: Opt) -> int:
  if not isinstance(opt.arg, int) or opt.arg < 2: raise KernelOptError(f"{opt}: a symbolic axis splits by an int >= 2")
  if r.src[0].vmin < 1: raise KernelOptError(f"{opt}: symbolic axis {r.arg} may be empty")
  if opt.arg > r.src[0].vmax: raise KernelOptError(f"{opt}: {opt.arg} is over the axis' maximum {r.src[0].vmax}")
  return opt.arg

def _check(cond: bool, msg: str) -> None:
  if not cond: raise KernelOptError(msg)

def _upcast_total(ast: UOp) -> int:
  return int(prod(axis_size(r) or 1 for r in axes_of(ast, AxisType.UPCAST, AxisType.UNROLL)))

def _uses_nonconst_int_div(ast: UOp) -> bool:
  return any(u.op in (Ops.IDIV, Ops.MOD) and u.dtype is not dtypes.index and u.src[1].op is not Ops.CONST
             for u in ast.toposort())

def pad_range(ast: UOp, r: UOp, amt: int) -> UOp:
  """Grow RANGE r to a multiple of amt and mask every INDEX that uses it: extra iterations load 0 and store nothing."""
  size = axis_size(r)
  assert size is not None
  nr = r.replace(src=(UOp.const(r.dtype, round_up(size, amt)),))
  ast = replace_ranges(ast, {r: (nr, (nr,))})
  return mask_range_uses(ast, (nr,), nr < size)

def split_symbolic(ast: UOp, r: UOp, amt: int, new_type: AxisType) -> UOp:
  """Split RANGE r of symbolic size n into ceil(n / amt) blocks of amt (the new, inner RANGE of AxisType new_type):
  r -> kept * amt + new, every INDEX that uses them masked to kept * amt + new < n."""
  n = r.src[0]
  kept = r.replace(src=(simplify((n + (amt - 1)) // amt),))
  new = UOp.range(amt, _next_id(ast), new_type, dtype=r.dtype)
  ast = replace_ranges(ast, {r: (kept * amt + new, (kept, new))})
  return mask_range_uses(ast, (kept, new), kept * amt + new < n)

def mask_range_uses(ast: UOp, rngs: tuple[UOp, ...], valid: UOp) -> UOp:
  """Every INDEX that uses one of `rngs` (or sits under a loop of them) masked by `valid`: the iterations where it is
  False load 0 and store nothing."""
  # NOTE: a store inside the loop whose address does not depend on r (folded to a constant) must not run in the extra
  # iterations either (found by fuzz: it stored what the padded, zero-loaded lanes computed)
  inside = {s.src[0] for e in ast.toposort() if e.op is Ops.END and any(r in e.src[1:] for r in rngs)
            for s in e.src[0].toposort() if s.op is Ops.STORE}
  # NOTE: bottom up, so an index that reads a loaded value (a gather) is built from the masked load (found by fuzz: a
  # substitution kept the unmasked load inside the gather's index, which read past the end in the extra iterations)
  new: dict[UOp, UOp] = {}
  for u in ast.toposort():
    src = tuple(new[s] for s in u.src)
    nu = u if src == u.src else u.replace(src=src)
    if u.op is Ops.INDEX and len(u.src) == 2 and (any(r in u.src[1]._ranges for r in rngs) or u in inside):
      idx = nu.src[1]
      cond = (idx.get_valid() & valid) if idx.is_masked() else valid
      nu = nu.replace(src=(nu.src[0], cond.where(idx.get_idx(), UOp.invalid())))
    new[u] = nu
  return new[ast]

# ---- apply ----

def apply_opt(ast: UOp, opt: Opt, renderer: Renderer, applied: tuple[Opt, ...] = ()) -> UOp:
  """Apply one Opt to a kernel AST (a SINK), or raise KernelOptError saying why it does not fit."""
  has_local, has_threads = renderer.has_local, renderer.has_threads
  nolocals = any(o.op is OptOps.NOLOCALS for o in applied)
  op = opt.op
  if op is OptOps.TC: return apply_tc(ast, opt, renderer, applied)
  if any(o.op is OptOps.TC for o in applied):
    # NOTE: the WARP range must stay lidx0 and the WMMA accumulator a vector chain: no group reduce, no unrolled K
    _check(op not in (OptOps.GROUP, OptOps.GROUPTOP, OptOps.UNROLL, OptOps.PADTO, OptOps.NOLOCALS),
           f"{opt}: not allowed after a TC opt")
  if op is OptOps.CUT: return cut_kernel(ast, opt, renderer, applied)
  if op is OptOps.KBLOCK: return kblock_reduce(ast, opt, renderer)
  if op is OptOps.PACK: return pack_load(ast, opt)
  if op is OptOps.NOLOCALS:
    _check(has_local, f"{opt}: the renderer has no locals")
    _check(not nolocals and not axes_of(ast, AxisType.LOCAL, AxisType.GROUP_REDUCE), f"{opt}: locals already in use")
    return ast
  if op in (OptOps.UPCAST, OptOps.LOCAL, OptOps.THREAD, OptOps.PADTO, OptOps.SWAP):
    r = _pick(output_axes(ast), opt, "output")
  else: r = _pick(reduce_axes(ast), opt, "reduce")
  if op is OptOps.SWAP:
    other = _pick(output_axes(ast), Opt(op, opt.arg, None), "output")
    _check(other is not r, f"{opt}: cannot swap an axis with itself")
    return replace_ranges(ast, {r: (a := r.replace(arg=(other.arg[0], *r.arg[1:])), (a,)),
                                other: (b := other.replace(arg=(r.arg[0], *other.arg[1:])), (b,))})
  if op is OptOps.PADTO:
    size = axis_size(r)
    _check(size is not None, f"{opt}: axis {r.arg} has a symbolic size")
    _check(isinstance(opt.arg, int) and opt.arg > 1, f"{opt}: arg must be an int > 1")
    assert size is not None
    _check(size % opt.arg != 0, f"{opt}: axis of size {size} is already a multiple of {opt.arg}")
    _check(round_up(size, opt.arg) <= 2 * size, f"{opt}: padding {size} to {round_up(size, opt.arg)} doubles the work")
    _check(not _uses_nonconst_int_div(ast), f"{opt}: the kernel divides by loaded ints; padded lanes could divide by 0")
    return pad_range(ast, r, opt.arg)
  # NOTE: only LOCAL splits a symbolic axis (padded to a multiple of the workgroup, split_symbolic); every other opt
  # needs a constant size (no upcast or unroll of a symbolic axis)
  amt = _amount(r, opt) if op is not OptOps.LOCAL or axis_size(r) is not None else _symbolic_amount(r, opt)
  if op in (OptOps.UPCAST, OptOps.UNROLL):
    _check(amt <= MAX_UPCAST, f"{opt}: upcast of {amt} is over the limit of {MAX_UPCAST}")
    total = _upcast_total(ast) * amt
    _check(total <= MAX_UPCAST_TOTAL, f"{opt}: total upcast {total} is over the limit of {MAX_UPCAST_TOTAL}")
    return split_range(ast, r, amt, AxisType.UPCAST if op is OptOps.UPCAST else AxisType.UNROLL)
  if op is OptOps.THREAD:
    _check(has_threads, f"{opt}: the renderer has no CPU threads")
    _check(not axes_of(ast, AxisType.THREAD), f"{opt}: the kernel already has a THREAD axis (only one is allowed)")
    _check(amt <= max_threads(renderer), f"{opt}: {amt} threads > {max_threads(renderer)} available")
    return _thread_pieces(split_range(ast, r, amt, AxisType.THREAD, top=True), amt)
  # LOCAL, GROUP, GROUPTOP need workgroups
  _check(has_local, f"{opt}: the renderer has no local (workgroup) threads")
  _check(not nolocals, f"{opt}: NOLOCALS was applied")
  nlocal = prod(axis_size(x) or 1 for x in axes_of(ast, AxisType.LOCAL, AxisType.WARP, AxisType.GROUP_REDUCE))
  _check(nlocal * amt <= renderer.local_max_total,
         f"{opt}: {nlocal * amt} local threads are more than the {renderer.local_max_total} of a workgroup")
  if op is OptOps.LOCAL:
    # NOTE: a symbolic axis is padded to a multiple of the workgroup, its extra threads masked
    if axis_size(r) is None: return check_workgroup(split_symbolic(ast, r, amt, AxisType.LOCAL), opt, renderer)
    return check_workgroup(split_range(ast, r, amt, AxisType.LOCAL), opt, renderer)
  _check(renderer.has_shared, f"{opt}: the renderer has no shared memory for a group reduce")
  _check(not axes_of(ast, AxisType.GROUP_REDUCE), f"{opt}: the kernel already has a group reduce")
  red_bytes = max((u.dtype.itemsize for u in ast.toposort() if u.op is Ops.REDUCE), default=4)
  need = nlocal * amt * red_bytes * _upcast_total(ast)
  smax = renderer.shared_max
  _check(need <= smax, f"{opt}: needs {need} bytes of shared memory, the target has {smax}")
  return check_workgroup(split_range(ast, r, amt, AxisType.GROUP_REDUCE, top=op is OptOps.GROUPTOP), opt, renderer)

def check_workgroup(ast: UOp, opt: Opt, renderer: Renderer) -> UOp:
  """`ast` (with `opt` applied) if its local axes fit the renderer's workgroup dimensions, merged where there are more
  axes than dimensions (grid.py), else KernelOptError naming the limits."""
  axes, plan = grid_plan(ast, LOCAL_TYPES, renderer.local_max)
  sizes = [int(x.src[0].vmax) for x in axes]
  _check(plan is not None, f"{opt}: local axes of sizes {sizes} (innermost first) fit no workgroup of dimensions "
                           f"{renderer.local_max} (local_max)")
  return ast

# ---- tensor cores ----

def _strip_cast(x: UOp, din: DType) -> UOp | None:
  """The operand of a product as the tensor core reads it: x itself or under a widening CAST, of dtype `din`."""
  if x.op is Ops.CAST and x.src[0].dtype == din: return x.src[0]
  return x if x.dtype == din else None

def tc_candidates(ast: UOp, tc: TensorCore) -> list[tuple[UOp, UOp, UOp, UOp, UOp, UOp]]:
  """(reduce, A operand, B operand, m, n, k) for every way `tc` computes this kernel's one ADD reduce of a product:
  REDUCE(ADD, [CAST](MUL(a, b))) or REDUCE(ADD, MUL(CAST(a), CAST(b))) with a, b of tc.dtype_in and the REDUCE of
  tc.dtype_out; m an output axis only A reads, n one only B reads, k a reduce axis both read (innermost first)."""
  reds = [u for u in ast.toposort() if u.op is Ops.REDUCE]
  if len(reds) != 1 or reds[0].arg is not Ops.ADD or reds[0].dtype != tc.dtype_out: return []
  red, body = reds[0], reds[0].src[0]
  if body.op is Ops.CAST and body.src[0].op is Ops.MUL and body.src[0].dtype == tc.dtype_in: mul = body.src[0]
  elif body.op is Ops.MUL: mul = body
  else: return []
  ops = [_strip_cast(s, tc.dtype_in) for s in mul.src]
  if ops[0] is None or ops[1] is None or (mul is body and mul.dtype != tc.dtype_out and mul.src[0].op is not Ops.CAST):
    return []
  outs = [r for r in output_axes(ast) if axis_size(r) is not None]
  ret = []
  for a, b in ((ops[0], ops[1]), (ops[1], ops[0])):
    ms = [r for r in reversed(outs) if r in a._ranges and r not in b._ranges]
    ns = [r for r in reversed(outs) if r in b._ranges and r not in a._ranges]
    ks = [r for r in reversed(red.src[1:]) if r in a._ranges and r in b._ranges and axis_size(r) is not None]
    ret += [(red, a, b, m, n, k) for m in ms for n in ns for k in ks]
  return ret

def _load_or_cast(x: UOp) -> bool:
  while x.op is Ops.CAST: x = x.src[0]
  return x.op is Ops.LOAD

def _bits_index(x: UOp, weights: tuple[int, ...]) -> UOp:
  """sum of weights[b] * bit b of x (x a lane id), as index math: runs of bits with doubling weights become one
  `(x // 2**b) % 2**len * w` term."""
  ret = UOp.const(dtypes.index, 0)
  b = 0
  while b < len(weights):
    if weights[b] == 0: b += 1; continue
    e = b + 1
    while e < len(weights) and weights[e] == weights[e - 1] * 2: e += 1
    t = x // (1 << b) if b else x
    if e < len(weights): t = t % (1 << (e - b))
    ret, b = ret + t * weights[b], e
  return ret

def _elem_const(weights: tuple[int, ...], e: int) -> int: return sum(w for b, w in enumerate(weights) if e >> b & 1)

def apply_tc(ast: UOp, opt: Opt, renderer: Renderer, applied: tuple[Opt, ...]) -> UOp:
  """OptOps.TC: the kernel's matmul-like reduce computed by the tensor core named `opt.arg` (one of the renderer's),
  axis = which (m, n, k) candidate (tc_candidates order). Axes that are not multiples of the tile are padded (loads
  read 0 past the end, stores are masked). Each warp of `threads` lanes (a WARP range, lidx0) computes one M x N tile:
  lane l loads the A, B elements and stores the C elements the layout gives it; the reduce becomes a WMMA chain over
  K / tile K steps (a vector accumulator of the lane's C elements)."""
  tcs = [t for t in renderer.tensor_cores if t.name == opt.arg]
  _check(bool(tcs), f"{opt}: {opt.arg!r} is not one of the renderer's tensor cores "
                    f"{[t.name for t in renderer.tensor_cores]}")
  _check(renderer.has_local and renderer.global_max is not None, f"{opt}: tensor cores need a GPU grid with locals")
  _check(not applied, f"{opt}: TC must be the first opt")
  tc = tcs[0]
  cands = tc_candidates(ast, tc)
  _check(bool(cands), f"{opt}: no ADD reduce of a product of {tc.dtype_in} into {tc.dtype_out} in this kernel")
  _check(isinstance(opt.axis, int) and 0 <= opt.axis < len(cands), f"{opt}: axis must be in [0, {len(cands)})")
  assert isinstance(opt.axis, int)
  red, a, b, m, n, k = cands[opt.axis]
  (M, N, K), ids = tc.dims, (m.arg[0], n.arg[0], k.arg[0])
  if any((axis_size(r) or 0) % d for r, d in ((m, M), (n, N), (k, K))):
    # NOTE: padded iterations read 0 only where an operand is a load, possibly cast (0 * x == 0 then)
    _check(all(_load_or_cast(x) for x in (a, b)), f"{opt}: padding to the tile needs operands that are (cast) loads")
    _check(not _uses_nonconst_int_div(ast), f"{opt}: the kernel divides by loaded ints; padded lanes could divide by 0")
    for r, d in ((m, M), (n, N), (k, K)):
      cur = next(x for x in all_ranges(ast) if x.arg[0] == r.arg[0])
      if (axis_size(cur) or 0) % d: ast = pad_range(ast, cur, d)
    red, a, b, m, n, k = next(c for c in tc_candidates(ast, tc) if (c[3].arg[0], c[4].arg[0], c[5].arg[0]) == ids)
  lane = UOp.range(tc.threads, _next_id(ast), AxisType.WARP)
  def outer(r: UOp, d: int) -> UOp: return r.replace(src=(UOp.const(r.dtype, (axis_size(r) or 0) // d),))
  mo, no, ko = outer(m, M), outer(n, N), outer(k, K)
  la, lb, lc = tc.layout_a, tc.layout_b, tc.layout_c
  def at(lay: Layout, e: int) -> tuple[UOp, UOp]:
    return (_bits_index(lane, lay.lane_row) + _elem_const(lay.elem_row, e),
            _bits_index(lane, lay.lane_col) + _elem_const(lay.elem_col, e))
  ea, eb, ec = tc.elements_per_thread
  afrag = [a.substitute({m: mo * M + r, k: ko * K + c}) for r, c in (at(la, e) for e in range(ea))]
  bfrag = [b.substitute({k: ko * K + r, n: no * N + c}) for r, c in (at(lb, e) for e in range(eb))]
  vout = tc.dtype_out.vec(ec)
  wmma = UOp(Ops.WMMA, vout, (UOp.vectorize(*afrag), UOp.vectorize(*bfrag), UOp.const(vout, 0)), arg=(tc.name,))
  new_red = UOp(Ops.REDUCE, vout, (wmma, *[ko if r is k else r for r in red.src[1:]]), arg=Ops.ADD)
  ends = [u for u in ast.toposort() if u.op is Ops.END and m in u.src[1:] and n in u.src[1:]]
  _check(len(ends) == 1, f"{opt}: the output axes must be closed by one END (found {len(ends)})")
  end = ends[0]
  lanes = [end.src[0].substitute({red: new_red.gep(e), m: mo * M + r, n: no * N + c})
           for e, (r, c) in enumerate(at(lc, e) for e in range(ec))]
  new_end = UOp.group(*lanes).end(*[mo if r is m else no if r is n else r for r in end.src[1:]], lane)
  ret = ast.substitute({end: new_end})
  left = set(ret.toposort()) & {m, n, k, red}
  _check(not left, f"{opt}: the reduce or its axes are used outside the store it feeds; not a plain matmul")
  return check_workgroup(ret, opt, renderer)

def kblock_reduce(ast: UOp, opt: Opt, renderer: Renderer) -> UOp:
  """OptOps.KBLOCK: cache blocking of a reduce. Reduce axis `opt.axis` (size K) splits into a KBLOCK range of K / arg
  blocks, the outermost loop of the kernel, and a reduce of `arg` steps inside the output loops (arg 1: a block per
  step of the axis, with the other reduce axes inside). Each block adds its partial sums to the output buffer (the
  first block stores them), so the part of each input one block reads stays in cache while every output tile reuses
  it. The kernel must be one STORE of an ADD REDUCE into a global buffer it does not otherwise read, on a target whose
  output loops stay loops in one thread (the CPU: a THREAD axis splits the outputs, never the blocks)."""
  _check(renderer.has_threads and not renderer.has_local and renderer.global_max is None,
         f"{opt}: KBLOCK needs a CPU target (output loops that no grid or workgroup runs in parallel)")
  _check(not axes_of(ast, AxisType.KBLOCK), f"{opt}: the kernel already has a KBLOCK axis")
  r = _pick(reduce_axes(ast), opt, "reduce")
  size = axis_size(r)
  _check(size is not None and isinstance(opt.arg, int) and 1 <= opt.arg < size and size % opt.arg == 0,
         f"{opt}: arg must be an int in [1, {size}) that divides the reduce axis of size {size}")
  assert size is not None and isinstance(opt.arg, int)
  stores = [u for u in ast.toposort() if u.op is Ops.STORE]
  _check(len(stores) == 1, f"{opt}: the kernel must have one STORE (it has {len(stores)})")
  st = stores[0]
  idx, red = st.src[0], st.src[1]
  _check(idx.op is Ops.INDEX and idx.src[0].op is Ops.DEFINE_GLOBAL and len(idx.src) == 2,
         f"{opt}: the STORE must write a global buffer through a plain INDEX")
  _check(red.op is Ops.REDUCE and red.arg is Ops.ADD and r in red.src[1:] and red.dtype == idx.src[0].dtype.base,
         f"{opt}: the stored value must be the ADD REDUCE over the axis itself, in the buffer's dtype")
  out = idx.src[0]
  _check(not any(u.op is Ops.INDEX and u.src[0] is out and u is not idx for u in ast.toposort()),
         f"{opt}: the kernel reads its output buffer, which the partial sums stored there would change")
  _check(all(u.op is not Ops.STORE or u is st for u in red.toposort()), f"{opt}: a STORE inside the reduce")
  amt = opt.arg
  ko = UOp.range(size // amt, _next_id(ast), AxisType.KBLOCK, dtype=r.dtype)
  ki = r.replace(src=(UOp.const(r.dtype, amt),))
  new_red = replace_ranges(red, {r: (ko * amt + ki, (ki,))})
  # NOTE: block 0 reads nothing (the output is not initialized): the gated load reads 0 there
  i = idx.src[1]
  first = ko.const_like(0) < ko
  prev = out.index((i.get_valid() & first if i.is_masked() else first).where(i.get_idx(), UOp.invalid())).load()
  new_st = idx.store(new_red + prev)
  ends = [u for u in ast.toposort() if u.op is Ops.END and u.src[0] is st]
  if not ends: return ast.substitute({st: new_st.end(ko)})
  _check(len(ends) == 1, f"{opt}: the STORE must be closed by one END (found {len(ends)})")
  return ast.substitute({ends[0]: new_st.end(ko, *ends[0].src[1:])})

# ---- PACK: a panel of an input copied to a contiguous per-thread buffer ----

# one packed panel: a per-thread (stack) buffer that stays in L2 while it is reused (a 2048 x 48 float panel is 384 KiB:
# measured faster packed whole than cache blocked by 512 or 1024 first, on a 2 MiB L2)
PACK_MAX_BYTES = 512 * 1024
PANEL_AXES = (AxisType.REDUCE, AxisType.UNROLL, AxisType.UPCAST)

def index_stride(idx: UOp, r: UOp) -> int | None:
  """How far index `idx` moves when range `r` steps by one (every range at 0), None when that is not a constant."""
  rngs = [u for u in idx.toposort() if u.op is Ops.RANGE]
  if r not in rngs: return 0
  at0 = {x: x.const_like(0) for x in rngs}
  d = simplify(idx.substitute({**at0, r: r.const_like(1)}) - idx.substitute(at0))
  return d.arg if d.op is Ops.CONST and isinstance(d.arg, int) else None

def packable_loads(ast: UOp) -> list[UOp]:
  """The loads OptOps.PACK may stage (its axis indexes this list, in toposort order): LOADs of a global buffer the
  kernel never stores to, through an INDEX that uses a reduce range (REDUCE or UNROLL), outside any local BUFFERIZE."""
  topo = ast.toposort()
  stored = {u.src[0].src[0] for u in topo if u.op is Ops.STORE and u.src[0].op is Ops.INDEX}
  inside = {x for u in topo if u.op is Ops.BUFFERIZE for x in u.src[0].toposort()}
  return [u for u in topo if u.op is Ops.LOAD and u.src[0].op is Ops.INDEX and u.src[0].src[0].op is Ops.DEFINE_GLOBAL
          and u.src[0].src[0] not in stored and u not in inside
          and any(r.arg[-1] in (AxisType.REDUCE, AxisType.UNROLL) for r in u.src[0].src[1]._ranges)]

def panel_ranges(ld: UOp, stored_order: bool = False) -> list[UOp]:
  """The ranges of a load's index that a PACK copies over (reduce and vector-lane ranges), in the packed buffer's
  order: the reduce ranges outermost, then by stride in the input, largest first (so the innermost lanes are contiguous
  for each reduce step, also where the input is read along the reduce: W of x @ W^T), then by id. `stored_order`: by
  stride in the input only, largest first (the input's own order: its contiguous range innermost, so the fill copies
  whole rows)."""
  idx = ld.src[0].src[1]
  rs = [r for r in idx._ranges if r.arg[-1] in PANEL_AXES]
  flat = idx.get_idx()
  return sorted(rs, key=lambda r: (not stored_order and r.arg[-1] is not AxisType.REDUCE,
                                   -(st if (st := index_stride(flat, r)) is not None else 1 << 62), r.arg[0]))

# a panel row's contiguous run of the input at least this long, apart from the next row's, is filled run by run
FILL_RUN_BYTES = 4096

def fill_run(ld: UOp, so: list[UOp]) -> list[UOp]:
  """The ranges a PACK of load `ld` fills as one run each time, outermost first, where its panel's rows are separate
  runs of the input of FILL_RUN_BYTES or more; [] elsewhere. A run: the input's innermost ranges (in `panel_ranges`
  stored_order) that are reduce ranges of one contiguous stretch of it, the innermost read unit-stride (a row of W of
  x @ W^T; a filter's input channels x 3 x 3 taps), the range outside them stepping past its end (W cut by KBLOCK: 48
  runs of 1024 floats, 12 KiB apart). Filled in the panel's order, every step read one element of each of the 48 runs,
  48 streams the hardware prefetcher did not follow (the D768 block's (768, 3072) product 46.2 -> 28.3 ms filled run by
  run); where the rows are adjacent (whole rows of W: one run) or the runs short, the panel's order was as fast or
  faster. `so`: the load's `panel_ranges` in stored_order."""
  flat = ld.src[0].src[1].get_idx()
  run: list[UOp] = []
  length = 1
  for r in reversed(so):
    if r.arg[-1] not in (AxisType.REDUCE, AxisType.UNROLL) or index_stride(flat, r) != length or \
       (size := axis_size(r)) is None: break
    run.insert(0, r)
    length *= size
  if not run or len(run) == len(so) or length * ld.dtype.itemsize < FILL_RUN_BYTES: return []
  return run if (st := index_stride(flat, so[-len(run) - 1])) is not None and st > length else []

def fills_as_lanes(value: UOp, r: UOp) -> bool:
  """Do the loads of `value` read range r unit-stride or not at all, one of them unit-stride? Then a fill of `value`
  along r goes as vector lanes (lowerer.fill_lanes), its ops as vector ops."""
  strides = [index_stride(u.src[0].src[1].get_idx(), r) for u in value.toposort() if u.op is Ops.LOAD]
  return all(st in (0, 1) for st in strides) and 1 in strides

# PACK's arg: what the panel holds and in which order
PACK_LOAD, PACK_OPERAND = 0, 1

def pack_operand(ast: UOp, ld: UOp) -> UOp:
  """The value of load `ld` as its product reads it: the load with the elementwise ops fused around it that read only
  ranges the load reads (a bias add, a scale, a gelu of the operand), up to the first op that reads another range (the
  product with the other operand) or that something else also reads. Their other loads are of global buffers the
  kernel never stores to."""
  users: dict[UOp, list[UOp]] = {}
  for u in ast.toposort():
    for s in u.src: users.setdefault(s, []).append(u)
  own = set(ld._ranges)
  stored = {u.src[0].src[0] for u in ast.toposort() if u.op is Ops.STORE and u.src[0].op is Ops.INDEX}
  def pure(x: UOp) -> bool:
    return all(u.op not in (Ops.REDUCE, Ops.BUFFERIZE, Ops.DEFINE_REG) and
               (u.op is not Ops.LOAD or (u.src[0].op is Ops.INDEX and u.src[0].src[0].op is Ops.DEFINE_GLOBAL and
                                         u.src[0].src[0] not in stored)) for u in x.toposort())
  cur = ld
  while len(ps := users.get(cur, [])) == 1 and (p := ps[0]).op in GroupOp.Elementwise and p.dtype.count == 1 and \
        set(p._ranges) <= own and pure(p):
    cur = p
  return cur

def pack_load(ast: UOp, opt: Opt) -> UOp:
  """OptOps.PACK: axis = which of `packable_loads`. The load's panel (its index over the reduce and lane ranges, for
  the current values of the outer ranges) is copied into a per-thread contiguous buffer (a local BUFFERIZE over fresh
  LOOP ranges, row-major in `panel_ranges` order), and the load reads that buffer instead. Codegen fills the buffer in
  the innermost loop the panel depends on, so every iteration of the output loops it does not depend on (a matmul's
  rows, for B's panel) reads it unit-stride from cache, not with the input's stride. Masked (padded) elements are copied
  as 0, which is what the masked load read. Where `fill_run` finds runs, the fill's loops go in the input's order,
  each of the panel's rows (a separate run of the input) copied in turn by one loop, into the same layout.
  arg PACK_OPERAND (1): the panel holds the load's operand (`pack_operand`: with its fused elementwise ops computed in
  the fill, not once per reduce step in the product's loop), in the input's own order (`panel_ranges` stored_order: the
  fill reads whole rows, as lanes). For an operand the product reads one element of per row and step (the rows of a
  register tile, A of A @ B): each step then splats a stored value, not one computed in scalar ops."""
  lds = packable_loads(ast)
  ld = _pick(lds, opt, "packable load")
  _check(opt.arg in (None, PACK_LOAD, PACK_OPERAND),
         f"{opt}: PACK's arg is {PACK_LOAD} (the load's panel) or {PACK_OPERAND} (its operand's, in the input's order)")
  operand = opt.arg == PACK_OPERAND
  rs = panel_ranges(ld, stored_order=operand)
  value = pack_operand(ast, ld) if operand else ld
  sizes = [axis_size(r) for r in rs]
  _check(all(s is not None for s in sizes), f"{opt}: the panel has a range of symbolic size")
  n = prod(s or 0 for s in sizes)
  _check(n * value.dtype.itemsize <= PACK_MAX_BYTES,
         f"{opt}: a panel of {n} x {value.dtype.itemsize} bytes is over PACK's limit of {PACK_MAX_BYTES} bytes")
  outs = [r for r in output_axes(ast) if (axis_size(r) or 0) > 1]
  _check(any(r not in ld.src[0].src[1]._ranges for r in outs),
         f"{opt}: the load depends on every output axis, so no output loop reuses its panel")
  nid = _next_id(ast)
  so = rs if operand else panel_ranges(ld, stored_order=True)
  run = [] if operand else fill_run(ld, so)
  k = rs.index(run[0]) if run else 0
  if run and rs[k:k + len(run)] == run:
    # NOTE: the fill's loops nest by range id (lowerer.range_key) and the buffer's layout follows its ranges' order: the
    # run's ranges become one loop, the innermost (the highest id), at their place in the layout (the same offsets), the
    # others nest in the input's order
    outer = [r for r in so if r not in run]
    run_sizes = sizes[k:k + len(run)]
    f = UOp.range(prod(s or 0 for s in run_sizes), nid + len(outer), AxisType.LOOP, dtype=run[-1].dtype)
    at, inner = {}, 1
    for i in reversed(range(len(run))):
      q = f // inner if inner > 1 else f
      at[run[i]] = q % (run_sizes[i] or 1) if i else q
      inner *= run_sizes[i] or 1
    at.update({r: UOp.range(axis_size(r) or 0, nid + outer.index(r), AxisType.LOOP, dtype=r.dtype) for r in outer})
    fill = [at[r] for r in rs[:k]] + [f] + [at[r] for r in rs[k + len(run):]]
  else:
    fill = [UOp.range(s or 0, nid + i, AxisType.LOOP, dtype=r.dtype) for i, (r, s) in enumerate(zip(rs, sizes))]
    at = dict(zip(rs, fill))
  # NOTE: an operand's innermost range of more than 64 (a long reduce along its rows) is filled in runs of 16, so that
  # each run goes as lanes (lowerer.fill_lanes)
  if operand and (last := sizes[-1] or 0) > 64 and last % 16 == 0:
    fill[-1:] = [UOp.range(last // 16, nid + len(rs) - 1, AxisType.LOOP, dtype=rs[-1].dtype),
                 UOp.range(16, nid + len(rs), AxisType.LOOP, dtype=rs[-1].dtype)]
    at[rs[-1]] = fill[-2] * 16 + fill[-1]
  flat = UOp.const(dtypes.index, 0)
  for r, s in zip(rs, sizes): flat = flat * s + r
  bz = UOp(Ops.BUFFERIZE, value.dtype, (value.substitute(at), *fill))
  return ast.substitute({value: UOp(Ops.INDEX, value.dtype.ptr(n), (bz, flat)).load()})

def cut_kernel(ast: UOp, opt: Opt, renderer: Renderer, applied: tuple[Opt, ...]) -> UOp:
  _check(renderer.has_threads, f"{opt}: store loops are cut on CPU targets only (has_threads)")
  _check(not applied, f"{opt}: CUT must be the first opt (it gives the output axes the later opts name)")
  _check(opt.axis is None and opt.arg is None, f"{opt}: CUT takes no axis and no arg")
  cut = cut_store_ranges(ast)
  _check(cut is not ast, f"{opt}: no store loop compares its range against a constant (or past MAX_PIECES): no cut")
  # NOTE: a cut kernel is named by its shape before the cut (one name per kernel, not one per piece)
  info = ast.arg if isinstance(ast.arg, KernelInfo) else KernelInfo()
  return cut.replace(arg=KernelInfo(info.name or kernel_name(ast), info.opts, info.applied_opts))

def assign_grid(ast: UOp, renderer: Renderer) -> UOp:
  """On a target with a launch grid (GPU-style: global_max set, no CPU threads), up to one output axis per grid
  dimension becomes GLOBAL: the innermost ones, as many as grid.py can place within the grid's limits (merging two
  into one dimension where one is over its own dimension's limit); the rest stay loops. A kernel that already has
  GLOBAL axes is left as it is."""
  gm = renderer.global_max
  if not gm or renderer.has_threads or axes_of(ast, AxisType.GLOBAL): return ast
  loops = [r for r in output_axes(ast) if r.arg[-1] is AxisType.LOOP]
  # NOTE: an axis that may be empty stays a loop (of no iterations): a grid dimension of 0 is no launch a runtime
  # accepts; a symbolic one takes the grid where it fits at its maximum (its size is resolved at each launch)
  chosen = [r for r in loops[-len(gm):] if r.src[0].vmin >= 1]
  while chosen and plan_for(list(reversed(chosen)), gm) is None: chosen.pop(0)
  return replace_ranges(ast, {r: (g := _retype(r, AxisType.GLOBAL), (g,)) for r in chosen}) if chosen else ast

def apply_opts(ast: UOp, opts: tuple[Opt, ...] | list[Opt], renderer: Renderer) -> UOp:
  """Apply `opts` in order (raising KernelOptError on the first that does not fit), put the output axes on the launch
  grid where the target has one, and record the applied opts in the SINK's KernelInfo."""
  if ast.op is not Ops.SINK: raise KernelOptError(f"apply_opts: expected a kernel AST (SINK), got {ast.op}")
  info = ast.arg if isinstance(ast.arg, KernelInfo) else KernelInfo()
  applied = tuple(info.applied_opts)
  for opt in opts:
    if not isinstance(opt, Opt): raise KernelOptError(f"apply_opts: {opt!r} is not an Opt")
    ast = apply_opt(ast, opt, renderer, applied)
    applied += (opt,)
  ast = assign_grid(ast, renderer)
  # NOTE: the name comes from the AST as it is now: CUT names a cut kernel by its shape before the cut
  return ast.replace(arg=KernelInfo(ast.arg.name if isinstance(ast.arg, KernelInfo) else info.name, info.opts, applied))
