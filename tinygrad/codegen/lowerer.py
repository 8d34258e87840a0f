"""Lowering the kernel AST towards the program form: masked indexes into gates, grid ranges into SPECIAL, REDUCE into
accumulators (DEFINE_REG + loops), and ENDs that close exactly one range each."""
from __future__ import annotations
from dataclasses import dataclass, field
from typing import Any
from tinygrad.uop import Ops, GroupOp, AxisType
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, identity_element, graph_rewrite
from tinygrad.uop.symbolic import symbolic
from tinygrad.dtype import dtypes, Invalid, AddrSpace
from tinygrad.renderer import Renderer
from tinygrad.helpers import prod
from tinygrad.codegen.grid import launch_axes, plan_for, plan_specials, GLOBAL_TYPES, LOCAL_TYPES
from tinygrad.codegen.expander import lanes
from tinygrad.codegen.opt import fills_as_lanes

# ---- masked (Invalid) indexes into gated INDEX ----

INV = UPat.const(dtypes.index, Invalid)
def _masked(c: str = "c", x: str = "x") -> UPat: return UPat(Ops.WHERE, src=(UPat.var(c), UPat.var(x), INV))
def push_invalid(alu: UOp, c: UOp, x: UOp, y: UOp) -> UOp:
  return c.where(x.alu(alu.op, y) if alu.src[0].op is Ops.WHERE else y.alu(alu.op, x), UOp.invalid())
def gate_index(buf: UOp, c: UOp, x: UOp) -> UOp: return UOp(Ops.INDEX, buf.dtype, (buf, x, c))
def never_index(buf: UOp) -> UOp: return gate_index(buf, UOp.const(dtypes.bool, False), UOp.const(dtypes.index, 0))
def ungate_index(buf: UOp, x: UOp) -> UOp: return UOp(Ops.INDEX, buf.dtype, (buf, x))
def load_alt_zero(ld: UOp, idx: UOp) -> UOp: return ld.replace(src=(idx, ld.const_like(0)))
GATED = UPat(Ops.INDEX, src=(UPat(), UPat(), UPat()), name="idx")

pm_lower_invalid = PatternMatcher([
  # an Invalid under index math moves up to the INDEX: (c ? x : Invalid) op y -> c ? (x op y) : Invalid
  (UPat(GroupOp.Binary, dtypes.index, src=(_masked(), UPat.var("y")), name="alu"), push_invalid),
  (UPat(GroupOp.Binary, dtypes.index, src=(UPat.var("y"), _masked()), name="alu"), push_invalid),
  # nested masks combine their conditions
  (UPat(Ops.WHERE, src=(UPat.var("c0"), _masked("c1", "x"), INV)), lambda c0, c1, x: (c0 & c1).where(x, UOp.invalid())),
  # the mask of an index becomes the gate of the INDEX (third source)
  (UPat(Ops.INDEX, src=(UPat.var("buf"), _masked())), gate_index),
  (UPat(Ops.INDEX, src=(UPat.var("buf"), INV)), never_index),
  # constant gates: always true drops the gate, always false reads the alternative
  (UPat(Ops.INDEX, src=(UPat.var("buf"), UPat.var("x"), UPat.const(dtypes.bool, True))), ungate_index),
  (UPat(Ops.LOAD, src=(UPat(Ops.INDEX, src=(UPat(), UPat(), UPat.const(dtypes.bool, False))), UPat.var("alt"))),
   lambda alt: alt),
  # a gated load reads 0 where the gate is false
  (UPat(Ops.LOAD, src=(GATED,), name="ld"), load_alt_zero),
])

# ---- RANGEs with a grid AxisType into SPECIAL ----

def _retype(r: UOp, at: AxisType) -> UOp: return r.replace(arg=(*r.arg[:-1], at))

@dataclass
class GridCtx:
  """pm_grid's context: what each range becomes (a SPECIAL, an index expression over SPECIALs, or a loop), the local
  axes' expressions and sizes innermost first (the workgroup's linear thread id), and counters for new defines and
  ranges."""
  specials: dict[UOp, UOp]
  locals: list[tuple[UOp, int]]
  next_range: int
  nlocal: int = 0
  def local_id(self, subs: dict[UOp, UOp] | None = None) -> UOp:
    """The workgroup's linear thread id (the inner axis fastest), with the axes' expressions in `subs` replaced."""
    lid = UOp.const(dtypes.index, 0)
    for e, n in reversed(self.locals): lid = lid * n + (subs or {}).get(e, e)
    return lid

def _place(axes: list[UOp], limits: tuple[int, ...] | None, kind: str, movable: set[AxisType],
           total: int | None = None) -> dict[UOp, UOp]:
  """Grid axes (innermost first) -> their index expressions over the launch dimensions `{kind}0..` (grid.py plans
  where each goes), at most `total` threads in all. Where no plan fits, the outermost axes of a `movable` AxisType
  become loops until one does."""
  axes, ret = list(axes), {}
  while (plan := plan_for(axes, limits)) is None or (total is not None and prod(r.src[0].vmax for r in axes) > total):
    out = next((r for r in reversed(axes) if r.arg[-1] in movable), None)
    if out is None:
      sizes = [int(r.src[0].vmax) for r in axes]
      raise ValueError(f"grid lowering: {kind} axes of sizes {sizes} (innermost first) fit no launch dimensions of "
                       f"limits {limits} (at most {total} threads); the opts asked for more than the target has")
    axes.remove(out)
    ret[out] = _retype(out, AxisType.LOOP)
  return {**ret, **dict(zip(axes, plan_specials(axes, plan, kind)))}

def grid_specials(sink: UOp, renderer: Renderer) -> GridCtx:
  """What each GLOBAL/LOCAL/THREAD/GROUP_REDUCE range becomes: an index expression over SPECIALs where the target has
  a grid (or CPU threads), placed within its launch limits by grid.py, else a plain loop."""
  ret: dict[UOp, UOp] = {}
  rngs = sorted([u for u in sink.toposort() if u.op is Ops.RANGE], key=lambda r: (r.arg[-1], r.arg[0]))
  has_grid, has_local = renderer.global_max is not None, renderer.has_local
  gl, lc = launch_axes(rngs, GLOBAL_TYPES), launch_axes(rngs, LOCAL_TYPES) if has_local else []
  if has_grid:
    # NOTE: a GLOBAL or LOCAL axis that fits nowhere runs as a loop in each thread; WARP lanes and a group reduce cannot
    ret.update(_place(gl, renderer.global_max, "gidx", {AxisType.GLOBAL}))
    ret.update(_place(lc, renderer.local_max, "lidx", {AxisType.LOCAL}, renderer.local_max_total))
  for r in rngs:
    at = r.arg[-1]
    if r in ret: continue
    if at is AxisType.THREAD and renderer.has_threads: ret[r] = UOp(Ops.SPECIAL, r.dtype, r.src, "core_id")
    elif at is AxisType.WARP:
      raise ValueError(f"grid lowering: WARP range {r.arg} (tensor core lanes) needs a target with a grid and locals")
    elif at in (AxisType.THREAD, AxisType.GLOBAL, AxisType.LOCAL): ret[r] = _retype(r, AxisType.LOOP)
    # NOTE: without local memory a GROUP_REDUCE range is reduced by one thread, as a plain loop
    elif at is AxisType.GROUP_REDUCE: ret[r] = _retype(r, AxisType.REDUCE)
  # NOTE: THREAD ranges of one size (one per store loop of a cut kernel) are one SPECIAL: the same core_id
  if len({s for s in ret.values() if s.op is Ops.SPECIAL and s.arg == "core_id"}) > 1:
    raise ValueError("grid lowering: THREAD axes of different sizes in one kernel; the CPU runtime has a single "
                     "core_id")
  lids = [(ret[r], int(r.src[0].vmax)) for r in lc if ret[r].op is not Ops.RANGE]
  return GridCtx(ret, lids, max((r.arg[0] for r in rngs if isinstance(r.arg[0], int)), default=-1) + 1)

def drop_closed_specials(e: UOp) -> UOp | None:
  if all(s.op is Ops.RANGE for s in e.src[1:]): return None
  return e.src[0].end(*[s for s in e.src[1:] if s.op is Ops.RANGE])

def lower_group_reduce(ctx: GridCtx, red: UOp) -> UOp | None:
  """REDUCE over local ids (GROUP_REDUCE): each thread reduces its part, stores it to local memory, BARRIER, then
  reduces the workgroup's parts. Inside an enclosing loop (where reusing the local buffer could race) every thread
  reduces the whole range instead."""
  local_exprs = {e for e, _ in ctx.locals}
  grp = [s for s in red.src[1:] if s in local_exprs]
  if not grp: return None
  rest = [s for s in red.src[1:] if s not in local_exprs]
  sizes = dict(ctx.locals)
  news = [UOp.range(sizes[g], ctx.next_range + i, AxisType.REDUCE) for i, g in enumerate(grp)]
  ctx.next_range += len(grp)
  if red.src[0]._ranges.difference(*(r._ranges for r in rest)):
    return red.src[0].substitute(dict(zip(grp, news))).reduce(*rest, *news, arg=red.arg)
  partial = red.src[0].reduce(*rest, arg=red.arg) if rest else red.src[0]
  size = prod(n for _, n in ctx.locals)
  buf = UOp(Ops.DEFINE_LOCAL, red.dtype.ptr(size, AddrSpace.LOCAL), arg=ctx.nlocal)
  ctx.nlocal += 1
  bar = UOp(Ops.BARRIER, dtypes.void, (buf.index(ctx.local_id()).store(partial),))
  return buf.after(bar).index(ctx.local_id(dict(zip(grp, news)))).load().reduce(*news, arg=red.arg)

pm_grid = PatternMatcher([
  (UPat(Ops.RANGE, name="r"), lambda ctx, r: ctx.specials.get(r)),
  (UPat(Ops.END, name="e"), drop_closed_specials),
  (UPat(Ops.REDUCE, name="red"), lower_group_reduce),
])

# ---- REDUCE into accumulators ----

@dataclass
class ReduceCtx:
  nreg: int = 0
  buffers: dict[UOp, UOp] = field(default_factory=dict)

def range_key(r: UOp) -> tuple[Any, ...]: return (r.arg[-1], r.arg[0])

def combine(op: Ops, a: UOp, b: UOp) -> UOp: return a.alu(op, b)

def lower_reduce(ctx: ReduceCtx, red: UOp) -> UOp:
  x, rs = red.src[0], sorted(red.src[1:], key=range_key)
  if not rs: return x
  acc = UOp(Ops.DEFINE_REG, red.dtype.ptr(1, AddrSpace.REG), arg=ctx.nreg)
  ctx.nreg += 1
  # NOTE: the init depends on the ranges open at the REDUCE, so it is redone for every output element
  outer = sorted(red._ranges, key=range_key)
  zero = UOp.const(dtypes.index, 0)
  init = (acc.after(*outer) if outer else acc).index(zero).store(red.const_like(identity_element(red.arg, red.dtype)))
  idx = acc.after(init, *rs).index(zero)
  # NOTE: acc + WMMA(a, b, 0) is the tensor core's own accumulate: WMMA(a, b, acc)
  if red.arg is Ops.ADD and x.op is Ops.WMMA and x.src[2].op is Ops.CONST and x.src[2].arg == 0:
    body = idx.store(x.replace(src=(x.src[0], x.src[1], idx.load())))
  else: body = idx.store(combine(red.arg, idx.load(), x))
  for r in reversed(rs): body = body.end(r)
  return acc.after(body).index(zero).load()

# the longest innermost fill loop copied as lanes (a 48-lane register tile's panel row is 3 runs of 16)
FILL_LANES_MAX = 64

def fill_lanes(value: UOp, rngs: list[UOp]) -> UOp | None:
  """The fill range of a local BUFFERIZE copied as lanes: the innermost one (the buffer's contiguous axis), where the
  value is a load that reads it unit-stride (a packed panel's rows), or elementwise ops of loads that read it
  unit-stride or not at all (a packed operand's rows plus a bias). Its lanes pack into vector loads (masked where the
  panel is padded), vector ops and vector stores; as a loop of gated scalar copies, LLVM made a gather of every row."""
  if not rngs: return None
  lds = [u for u in value.toposort() if u.op is Ops.LOAD]
  # NOTE: only loads of a global buffer (a panel of an input): a load from another local buffer, computed in the fill's
  # loop from the lane's range, would be computed once with every lane's stores into it (the last lane's won)
  if not lds or any(u.src[0].op is not Ops.INDEX or u.src[0].src[0].op is not Ops.DEFINE_GLOBAL for u in lds):
    return None
  r = rngs[-1]
  if not 2 <= r.src[0].arg <= FILL_LANES_MAX: return None
  return r if fills_as_lanes(value, r) else None

def lower_bufferize(ctx: ReduceCtx, idx: UOp, bz: UOp) -> UOp:
  """INDEX(BUFFERIZE(value, *ranges), i): the value is stored over its ranges into a per-thread buffer (row-major in the
  order of the ranges), then read at the flat offset i. The innermost range is copied as lanes where `fill_lanes`
  says so."""
  rngs = list(bz.src[1:])
  if not all(r.src[0].op is Ops.CONST for r in rngs): raise ValueError("local BUFFERIZE needs constant-size ranges")
  size = 1
  for r in rngs: size *= r.src[0].arg
  buf = ctx.buffers.get(bz)
  if buf is None:
    reg = UOp(Ops.DEFINE_REG, bz.src[0].dtype.ptr(size, AddrSpace.REG), arg=ctx.nreg)
    ctx.nreg += 1
    flat = UOp.const(dtypes.index, 0)
    for r in rngs: flat = flat * r.src[0] + r
    st = reg.index(flat).store(bz.src[0])
    loops = rngs
    if (lane := fill_lanes(bz.src[0], rngs)) is not None:
      # NOTE: simplified here as the expander's lanes are (index + constant offset: what packs into vectors)
      st = graph_rewrite(UOp.group(*lanes(st, [lane])), symbolic, name="fill lanes")
      loops = [r for r in rngs if r is not lane]
    for r in reversed(sorted(loops, key=range_key)): st = st.end(r)
    ctx.buffers[bz] = buf = reg.after(st)
  return buf.index(*idx.src[1:])

pm_reduce = PatternMatcher([
  (UPat(Ops.REDUCE, name="red"), lower_reduce),
  (UPat(Ops.INDEX, src=(UPat(Ops.BUFFERIZE, name="bz"),), allow_any_len=True, name="idx"), lower_bufferize),
])

# ---- ENDs: one range each, one END per range ----

def split_end(e: UOp) -> UOp | None:
  if len(e.src) <= 2: return None
  rs = sorted(e.src[1:], key=range_key)
  ret = e.src[0]
  for r in reversed(rs): ret = ret.end(r)
  return ret

def flatten_group(g: UOp) -> UOp | None:
  if not any(s.op is Ops.GROUP for s in g.src): return None
  return UOp.group(*[y for s in g.src for y in (s.src if s.op is Ops.GROUP else (s,))])

def drop_unused_end(e: UOp) -> UOp | None:
  # NOTE: a loop whose body does not use its range repeats the same stores: once is the same (accumulator updates
  # always use their range through AFTER, so this never drops a reduce), but only if it runs at least once (found by
  # fuzz: a loop of 0 iterations stored once)
  if len(e.src) != 2 or e.src[1] in e.src[0]._ranges or e.src[1].op is not Ops.RANGE: return None
  return e.src[0] if e.src[1].src[0].vmin >= 1 else None

pm_split_ends = PatternMatcher([
  (UPat(Ops.END, name="e"), split_end),
  (UPat(Ops.END, name="e"), drop_unused_end),
  (UPat(Ops.GROUP, name="g"), flatten_group),
])

def merge_ends(sink: UOp) -> UOp:
  """ENDs closing the same RANGE in the same loop nest (sibling reduces, expanded lanes, stores over one loop) become
  one END over a GROUP of their values. ENDs of one RANGE in different loop nests get fresh copies of the range."""
  next_id = max((u.arg[0] for u in sink.toposort() if u.op is Ops.RANGE and isinstance(u.arg[0], int)), default=-1) + 1
  for _ in range(1000):
    by_range: dict[UOp, dict[frozenset[UOp], list[UOp]]] = {}
    for u in sink.toposort():
      if u.op is Ops.END: by_range.setdefault(u.src[1], {}).setdefault(u._ranges, []).append(u)
    subs: dict[UOp, UOp] = {}
    for r, nests in by_range.items():
      for n, es in enumerate(nests.values()):
        if n == 0 and len(es) == 1: continue
        nr = r if n == 0 else r.replace(arg=(next_id, *r.arg[1:]))
        next_id += n != 0
        body = UOp.group(*[e.src[0] for e in es]) if len(es) > 1 else es[0].src[0]
        inner = body.toposort()
        if any(e in inner for e in es):
          raise ValueError(f"merge_ends: two loops over range {r.arg} depend on each other; use distinct ranges")
        merged = (body if nr is r else body.substitute({r: nr})).end(nr)
        subs.update({e: merged for e in es})
    if not subs: return sink
    sink = sink.substitute(subs)
  raise RuntimeError("merge_ends did not converge")
