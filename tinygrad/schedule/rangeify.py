"""Rangeify: the tensor graph -> the kernel graph.

Movement ops disappear: each becomes index arithmetic on RANGEs. A value that must be stored (a sink output, CONTIGUOUS,
COPY, ASSIGN, or a reduce the cost rules say is cheaper stored than recomputed) becomes a KERNEL that writes a new
BUFFER; everything else is fused into the kernel that consumes it ("index lowering": the value of a node is computed by
walking the graph down from the stored node with a list of index expressions, one per dimension).

The pipeline, in order:
  strip_tensor_graph   DETACH dropped, CONTIGUOUS of an already contiguous buffer dropped
  find_realizes        which nodes get a buffer (forced ones + the reduce cost rules)
  build_kernel         one KERNEL per realized node, in dependency order; its AST is section 2 of docs/ir.md
"""
from __future__ import annotations
import itertools, sys
from dataclasses import dataclass, field
from typing import Any
from tinygrad.uop import Ops, GroupOp, AxisType
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite, graph_rewrite_map, Metadata
from tinygrad.dtype import dtypes, Invalid
from tinygrad.helpers import prod, dedup

# ---- index math ----
# NOTE: these fold the easy cases at construction (x+0, x*1, a split index merged back), so kernels stay readable even
# before the symbolic simplifier runs; anything harder is left to tinygrad.uop.symbolic.

def _c(v: int) -> UOp: return UOp.const(dtypes.index, v)

def _terms(u: UOp) -> tuple[list[tuple[UOp, int]], int]:
  """u as sum(coef * node) + const."""
  if u.op is Ops.CONST: return [], u.arg
  if u.op is Ops.ADD:
    (t0, c0), (t1, c1) = _terms(u.src[0]), _terms(u.src[1])
    return t0 + t1, c0 + c1
  if u.op is Ops.MUL and u.src[1].op is Ops.CONST:
    t, c = _terms(u.src[0])
    return [(n, k * u.src[1].arg) for n, k in t], c * u.src[1].arg
  return [(u, 1)], 0

def _from_terms(terms: list[tuple[UOp, int]], const: int) -> UOp:
  ret: UOp | None = None
  for n, k in terms:
    if k == 0: continue
    t = n if k == 1 else n * _c(k)
    ret = t if ret is None else ret + t
  if ret is None: return _c(const)
  return ret if const == 0 else ret + _c(const)

def idx_add(a: UOp, b: UOp | int) -> UOp:
  b = _c(b) if isinstance(b, int) else b
  ta, ca = _terms(a)
  tb, cb = _terms(b)
  return _from_terms(ta + tb, ca + cb)

def idx_mul(a: UOp, k: int) -> UOp:
  t, c = _terms(a)
  return _from_terms([(n, m * k) for n, m in t], c * k)

def _split_multiple(a: UOp, k: int) -> tuple[list[tuple[UOp, int]], UOp] | None:
  """a = k*q + rest with 0 <= rest < k and a >= 0: returns (terms of q, rest), else None."""
  if a.vmin < 0: return None
  t, c = _terms(a)
  q = [(n, m // k) for n, m in t if m % k == 0]
  rest = _from_terms([(n, m) for n, m in t if m % k != 0], c % k)
  q_c = c // k
  if rest.vmin < 0 or rest.vmax >= k or any(n.vmin < 0 for n, _ in q): return None
  return q + ([(_c(1), q_c)] if q_c else []), rest

def idx_div(a: UOp, k: int) -> UOp:
  if k == 1: return a
  if a.op is Ops.CONST: return _c(a.arg // k) if a.arg >= 0 else a // _c(k)
  if 0 <= a.vmin and a.vmax < k: return _c(0)
  if (s := _split_multiple(a, k)) is not None: return _from_terms(*_merge_const(s[0]))
  return a // _c(k)

def idx_mod(a: UOp, k: int) -> UOp:
  if k == 1: return _c(0)
  if a.op is Ops.CONST and a.arg >= 0: return _c(a.arg % k)
  if 0 <= a.vmin and a.vmax < k: return a
  if (s := _split_multiple(a, k)) is not None: return s[1]
  return a % _c(k)

def _merge_const(terms: list[tuple[UOp, int]]) -> tuple[list[tuple[UOp, int]], int]:
  const = sum(m for n, m in terms if n.op is Ops.CONST and n.arg == 1)
  return [(n, m) for n, m in terms if not (n.op is Ops.CONST and n.arg == 1)], const

def linear_index(idx: tuple[UOp, ...], shape: tuple[int, ...]) -> UOp:
  """The row-major flat offset of `idx` in a contiguous buffer of `shape`."""
  ret, stride = _c(0), prod(shape)
  # NOTE: outermost axis first, so the ranges are numbered in axis order by first appearance
  for i, s in zip(idx, shape):
    stride //= max(s, 1)
    if s != 1: ret = idx_add(ret, idx_mul(i, stride))
  return ret

def reshape_index(idx: tuple[UOp, ...], out_shape: tuple[int, ...], in_shape: tuple[int, ...]) -> tuple[UOp, ...]:
  """Indices into `in_shape` of the element at `idx` of its reshape to `out_shape`. Axes are matched in groups of equal
  product, so a merge or a split of axes costs one div/mod per axis of its group, never a whole-tensor flatten."""
  # NOTE: an empty tensor has no element to read: some index here runs over a size-0 range (or is masked off by a pad),
  # so any in-range index will do, and the grouping below would divide by the 0 size
  if prod(in_shape) == 0: return tuple(_c(0) for _ in in_shape)
  out_ax = [i for i, s in enumerate(out_shape) if s != 1]
  in_ax = [i for i, s in enumerate(in_shape) if s != 1]
  ret: list[UOp] = [_c(0)] * len(in_shape)
  oi = ii = 0
  while oi < len(out_ax) or ii < len(in_ax):
    og, ig = [out_ax[oi]], [in_ax[ii]]
    oi, ii = oi + 1, ii + 1
    op_, ip_ = out_shape[og[0]], in_shape[ig[0]]
    while op_ != ip_:
      if op_ < ip_: og.append(out_ax[oi]); op_ *= out_shape[out_ax[oi]]; oi += 1
      else: ig.append(in_ax[ii]); ip_ *= in_shape[in_ax[ii]]; ii += 1
    lin = linear_index(tuple(idx[a] for a in og), tuple(out_shape[a] for a in og))
    stride = ip_
    for n, a in enumerate(ig):
      stride //= in_shape[a]
      q = idx_div(lin, stride)
      ret[a] = q if n == 0 else idx_mod(q, in_shape[a])
  return tuple(ret)

def shape_of(u: UOp) -> tuple[int, ...]:
  if (sh := u.shape) is None: raise ValueError(f"rangeify: {u.op} ({u.dtype}) has no shape; not a tensor-graph node")
  return sh

def _and(a: UOp | None, b: UOp | None) -> UOp | None:
  if a is None or (a.op is Ops.CONST and a.arg is True): return b
  if b is None or (b.op is Ops.CONST and b.arg is True): return a
  return a & b

# ---- step 1: strip the tensor graph ----

def _is_buffer_view(u: UOp) -> bool:
  """A contiguous view of a realized buffer: BUFFER or BUFFER_VIEW under zero or more RESHAPEs."""
  while u.op is Ops.RESHAPE: u = u.src[0]
  return u.op in (Ops.BUFFER, Ops.BUFFER_VIEW)

pm_strip_tensor_graph = PatternMatcher([
  (UPat(Ops.DETACH, name="x"), lambda x: x.src[0]),
  # NOTE: a buffer is already contiguous, so CONTIGUOUS of it stores nothing
  (UPat(Ops.CONTIGUOUS, name="x"), lambda x: x.src[0] if _is_buffer_view(x.src[0]) else None),
])

# ---- step 2: which nodes get a buffer ----

def _is_broadcast(e: UOp) -> bool: return any(s == 1 and n != 1 for s, n in zip(shape_of(e.src[0]), e.arg))

def _fused_reduces(root: UOp, realizes: dict[UOp, None], start: tuple[UOp, ...]) -> list[UOp]:
  """The REDUCE_AXIS nodes a kernel starting at `start` computes, not crossing a realized node (other than root)."""
  found: list[UOp] = []
  def gate(u: UOp) -> bool:
    if u is not root and (u in realizes or u.op in (Ops.BUFFER, Ops.BUFFER_VIEW)): return False
    if u.op is Ops.REDUCE_AXIS and u is not root: found.append(u)
    return True
  for s in start: s.toposort(gate)
  return found

def _kernel_inputs(r: UOp) -> tuple[UOp, ...]:
  if r.op is Ops.ASSIGN: return (r.src[1],)
  if r.op in (Ops.CONTIGUOUS, Ops.COPY): return (r.src[0],)
  return (r,)

def find_realizes(sink: UOp) -> dict[UOp, None]:
  """The nodes that are stored to a buffer, in dependency order. Forced: the sink's outputs (unless already a buffer),
  CONTIGUOUS, COPY (and its source), ASSIGN. Cost rules, to a fixed point: a REDUCE_AXIS read through a broadcasting
  EXPAND would be recomputed per broadcast element, and one read by two kernels would be computed twice: both stored,
  unless it is a reduce of constants that folds to a closed form (an arange), which costs nothing to recompute."""
  topo = sink.toposort()
  realizes: dict[UOp, None] = {}
  for s in sink.src:
    if not _is_buffer_view(s): realizes[s] = None
  for u in topo:
    if u.op in (Ops.CONTIGUOUS, Ops.ASSIGN, Ops.COPY): realizes[u] = None
    if u.op is Ops.COPY and not _is_buffer_view(u.src[0]): realizes[u.src[0]] = None
  expands = [u for u in topo if u.op is Ops.EXPAND and _is_broadcast(u)]
  free: dict[UOp, bool] = {}
  def store(r: UOp) -> bool:
    if r in realizes: return False
    if (f := free.get(r)) is None: f = free[r] = _folds_to_closed_form(r)
    return not f
  changed = True
  while changed:
    changed = False
    for e in expands:
      for r in _fused_reduces(e, realizes, (e.src[0],)):
        if store(r): realizes[r] = None; changed = True
    users: dict[UOp, int] = {}
    for root in list(realizes):
      for r in dedup(_fused_reduces(root, realizes, _kernel_inputs(root))): users[r] = users.get(r, 0) + 1
    for r, n in users.items():
      if n > 1 and store(r): realizes[r] = None; changed = True
  return {u: None for u in topo if u in realizes}

def _folds_to_closed_form(r: UOp) -> bool:
  """A REDUCE_AXIS of constants only (the cumsum of ones under arange) whose kernel simplifies to no loop at all: as
  cheap to recompute in each consumer as to load, so the cost rules leave it fused (argmax, eye, one_hot, gather)."""
  if any(u.op in (Ops.BUFFER, Ops.BUFFER_VIEW, Ops.BIND, Ops.DEFINE_VAR, Ops.COPY, Ops.ASSIGN, Ops.CONTIGUOUS)
         for u in r.toposort()): return False
  kb = KernelBuilder(RangeifyContext({}), r)
  _, idx = output_ranges(kb, shape_of(r))
  return all(u.op is not Ops.REDUCE for u in simplify_kernel(kb.lower(r, idx, None)).toposort())

# ---- step 3: kernels ----

def _new_buffer(dtype: Any, size: int, device: str) -> UOp:
  from tinygrad.device import next_unique
  return UOp(Ops.BUFFER, dtype, (UOp(Ops.UNIQUE, arg=next_unique()), UOp(Ops.DEVICE, arg=device)), arg=size)

@dataclass
class RangeifyContext:
  realizes: dict[UOp, None]
  # tensor node -> the kernel-graph node holding its value (BUFFER, BUFFER_VIEW or AFTER(buffer, kernel))
  stored: dict[UOp, UOp] = field(default_factory=dict)
  var_vals: dict[UOp, int] = field(default_factory=dict)
  range_ids: Any = field(default_factory=itertools.count)

class KernelBuilder:
  """Lowers the value of one kernel: tensor nodes at index expressions -> kernel-AST nodes."""
  def __init__(self, ctx: RangeifyContext, root: UOp):
    self.ctx, self.root = ctx, root
    self.bufs: dict[UOp, UOp] = {}   # kernel-graph buffer node -> its DEFINE_GLOBAL (numbered in first-use order)
    self.memo: dict[tuple[UOp, tuple[UOp, ...], UOp | None], UOp] = {}
    self.metadata: dict[Metadata, None] = {}
    self.overrides: dict[UOp, UOp] = {}

  def define(self, node: UOp) -> UOp:
    if (dg := self.bufs.get(node)) is None:
      base = _base_buffer(node)
      size = base.arg[0] if base.op is Ops.BUFFER_VIEW else base.arg
      dg = self.bufs[node] = UOp(Ops.DEFINE_GLOBAL, node.dtype.ptr(size), arg=len(self.bufs))
    return dg

  def new_range(self, size: int, axis_type: AxisType) -> UOp:
    return UOp.range(size, next(self.ctx.range_ids), axis_type)

  def load(self, node: UOp, lin: UOp, valid: UOp | None) -> UOp:
    dg = self.define(node)
    return UOp(Ops.INDEX, dg.dtype, (dg, lin if valid is None else lin.valid(valid))).load()

  def lower(self, u: UOp, idx: tuple[UOp, ...], valid: UOp | None) -> UOp:
    key = (u, idx, valid)
    if (ret := self.memo.get(key)) is None: ret = self.memo[key] = self._lower(u, idx, valid)
    return ret

  def _lower(self, u: UOp, idx: tuple[UOp, ...], valid: UOp | None) -> UOp:
    for md in u.metadata: self.metadata[md] = None
    if u is not self.root and (u in self.ctx.stored or u.op in (Ops.BUFFER, Ops.BUFFER_VIEW)):
      node = self.overrides.get(u, self.ctx.stored.get(u, u))
      if node.op is Ops.AFTER and u.op is Ops.ASSIGN:
        # reading an assigned tensor reads its target view of the buffer, after the assign's kernel ran
        sub = KernelBuilder(self.ctx, u)
        sub.bufs, sub.metadata = self.bufs, self.metadata
        sub.overrides = {**self.overrides, _base_of_view(u.src[0]): node}
        return sub.lower(u.src[0], idx, valid)
      return self.load(node, linear_index(idx, shape_of(u)), valid)
    src = u.src[0] if u.src else u
    if u.op is Ops.RESHAPE: return self.lower(src, reshape_index(idx, shape_of(u), shape_of(src)), valid)
    if u.op is Ops.PERMUTE:
      pidx = [_c(0)] * len(idx)
      for i, a in enumerate(u.arg): pidx[a] = idx[i]
      return self.lower(src, tuple(pidx), valid)
    if u.op is Ops.EXPAND:
      return self.lower(src, tuple(_c(0) if s == 1 else i for i, s in zip(idx, shape_of(src))), valid)
    if u.op is Ops.SHRINK: return self.lower(src, tuple(idx_add(i, b) for i, (b, _) in zip(idx, u.arg)), valid)
    if u.op is Ops.FLIP:
      fidx = tuple(idx_add(idx_mul(i, -1), s-1) if f else i for i, s, f in zip(idx, shape_of(src), u.arg))
      return self.lower(src, fidx, valid)
    if u.op is Ops.PAD: return self._lower_pad(u, idx, valid)
    if u.op is Ops.REDUCE_AXIS: return self._lower_reduce(u, idx, valid)
    if u.op is Ops.CONST: return UOp.const(u.dtype, u.arg)
    # NOTE: a kernel's DEFINE_VAR has no sources; the bound value travels beside the schedule in var_vals
    if u.op is Ops.BIND:
      var = u.src[0].replace(src=())
      if self.ctx.var_vals.setdefault(var, u.src[1].arg) != u.src[1].arg:
        raise ValueError(f"rangeify: variable {var.arg[0]!r} bound to both {self.ctx.var_vals[var]} and {u.src[1].arg}")
      return var
    if u.op is Ops.DEFINE_VAR: return u.replace(src=())
    if u.op in (Ops.CONTIGUOUS, Ops.DETACH): return self.lower(src, idx, valid)
    if u.op in GroupOp.Elementwise: return UOp(u.op, u.dtype, tuple(self.lower(s, idx, valid) for s in u.src), u.arg)
    raise NotImplementedError(f"rangeify: cannot lower {u.op} (dtype {u.dtype}, shape {u.shape}) inside a kernel")

  def _lower_pad(self, u: UOp, idx: tuple[UOp, ...], valid: UOp | None) -> UOp:
    cond: UOp | None = None
    sidx: list[UOp] = []
    for i, s, (b, e) in zip(idx, shape_of(u.src[0]), u.arg):
      if b != 0: cond = _and(cond, _c(b - 1) < i)
      if e != 0: cond = _and(cond, i < _c(b + s))
      sidx.append(idx_add(i, -b))
    val = self.lower(u.src[0], tuple(sidx), _and(valid, cond))
    # NOTE: a load under this mask already reads 0 outside it; anything computed must be masked to 0 explicitly
    if cond is None or val.op is Ops.LOAD or (val.op is Ops.CONST and val.arg == 0): return val
    return cond.where(val, val.const_like(0))

  def _lower_reduce(self, u: UOp, idx: tuple[UOp, ...], valid: UOp | None) -> UOp:
    op, axes = u.arg
    if any(shape_of(u.src[0])[a] == 0 for a in axes):
      # NOTE: a reduce over an empty axis is its identity; folding it here keeps loads of the empty input (a size-0
      # buffer) out of the kernel, where only the zero-trip loop around them would keep them in bounds
      from tinygrad.codegen.lowerer import identity_element
      return UOp.const(u.dtype, identity_element(op, u.dtype))
    ridx, ranges = list(idx), []
    for a in axes:
      s = shape_of(u.src[0])[a]
      if s == 1: ridx[a] = _c(0)
      else: ranges.append(rng := self.new_range(s, AxisType.REDUCE)); ridx[a] = rng
    val = self.lower(u.src[0], tuple(ridx), valid)
    if not ranges: return val
    return UOp(Ops.REDUCE, u.dtype, (val, *ranges), op)

def _base_of_view(u: UOp) -> UOp:
  while u.op in GroupOp.Movement: u = u.src[0]
  return u

def _base_buffer(u: UOp) -> UOp:
  while u.op is Ops.AFTER: u = u.src[0]
  return u

def output_ranges(kb: KernelBuilder, shape: tuple[int, ...]) -> tuple[list[UOp], tuple[UOp, ...]]:
  ranges = [kb.new_range(s, AxisType.LOOP) for s in shape if s != 1]
  it = iter(ranges)
  return ranges, tuple(_c(0) if s == 1 else next(it) for s in shape)

def renumber(ast: UOp) -> tuple[UOp, dict[int, int]]:
  """RANGE ids and DEFINE_GLOBAL numbers 0.. in order of first appearance. Returns (AST, {old -> new buffer number})."""
  # NOTE: ranges and buffers are renumbered so identical kernels are identical UOps (and so cache and dedupe)
  topo = ast.toposort()
  dgs = [u for u in topo if u.op is Ops.DEFINE_GLOBAL]
  rngs = [u for u in topo if u.op is Ops.RANGE]
  subs = {u: u.replace(arg=i) for i, u in enumerate(dgs)}
  subs.update({r: r.replace(arg=(i, *r.arg[1:])) for i, r in enumerate(rngs)})
  return ast.substitute(subs, name="renumber"), {u.arg: i for i, u in enumerate(dgs)}

# NOTE: a masked index whose mask folded to False is a bare Invalid (a pad or cat of an empty tensor); kernel_spec
# allows Invalid only as the false branch of a mask, and the load reads 0 anyway, so it becomes the constant 0
pm_fold_never_load = PatternMatcher([
  (UPat(Ops.LOAD, src=(UPat(Ops.INDEX, src=(UPat(), UPat.const(dtypes.index, Invalid))),), name="ld"),
   lambda ld: ld.const_like(0)),
])

# ---- closed forms of integer sums over one range ----
# NOTE: integer addition wraps the same way however it is grouped, so these are exact; float sums are left alone

def _split_range(x: UOp, r: UOp) -> tuple[int, UOp] | None:
  """x (index math) as k*r + rest with rest free of r, else None."""
  terms, c = _terms(x)
  k = sum(m for n, m in terms if n is r)
  rest = [(n, m) for n, m in terms if n is not r]
  if any(r in n.toposort() for n, _ in rest): return None
  return k, _from_terms(rest, c)

def _range_bounds(cond: UOp, r: UOp, lo: UOp, hi: UOp) -> tuple[UOp, UOp] | None:
  """The r in [lo, hi) where cond (an AND of `a < b` linear in r with coefficient +-1) holds: the new (lo, hi)."""
  if cond.op is Ops.AND:
    if (b := _range_bounds(cond.src[0], r, lo, hi)) is None: return None
    return _range_bounds(cond.src[1], r, *b)
  if cond.op is not Ops.CMPLT or cond.src[0].dtype is not dtypes.index: return None
  if (sp := _split_range(idx_add(cond.src[0], idx_mul(cond.src[1], -1)), r)) is None: return None
  k, rest = sp  # cond: k*r + rest < 0
  if k == 1: return lo, hi.minimum(idx_mul(rest, -1))
  if k == -1: return lo.maximum(idx_add(rest, 1)), hi
  return None

def fold_int_sum(red: UOp) -> UOp | None:
  """REDUCE(ADD) of an int value over its last range: n*v for v free of the range, and a count of the range's values
  for `cond.where(v, 0)` with cond a window of the range (what arange, eye and one_hot lower to)."""
  if red.arg is not Ops.ADD or not dtypes.is_int(red.dtype): return None
  val, r = red.src[0], red.src[-1]
  if r.src[0].op is not Ops.CONST: return None
  if r not in val.toposort(): cnt, v = _c(r.src[0].arg), val
  elif val.op is Ops.WHERE and val.src[2].op is Ops.CONST and val.src[2].arg == 0 and r not in val.src[1].toposort():
    if (b := _range_bounds(val.src[0], r, _c(0), _c(r.src[0].arg))) is None: return None
    cnt, v = (b[1] - b[0]).maximum(_c(0)), val.src[1]
  else: return None
  ret = cnt.cast(red.dtype) * v
  return ret if len(red.src) == 2 else UOp(Ops.REDUCE, red.dtype, (ret, *red.src[1:-1]), red.arg)

pm_fold_int_sum = PatternMatcher([(UPat(Ops.REDUCE, name="red"), fold_int_sum)])

def simplify_kernel(ast: UOp) -> UOp:
  try: from tinygrad.uop.symbolic import symbolic
  except ImportError: return graph_rewrite(ast, pm_fold_never_load, name="rangeify: fold never-valid loads")
  return graph_rewrite(ast, symbolic + pm_fold_never_load + pm_fold_int_sum, name="rangeify: simplify index math")

def finish_kernel(kb: KernelBuilder, store: UOp, ranges: list[UOp]) -> UOp:
  """SINK(END(store, ranges)) -> a KERNEL over the buffers, with the AST renumbered; returns the KERNEL."""
  ast, order = renumber(simplify_kernel(UOp.sink(store.end(*ranges))))
  by_num = {dg.arg: node for node, dg in kb.bufs.items()}
  srcs = tuple(by_num[old] for old, _ in sorted(order.items(), key=lambda kv: kv[1]))
  return UOp(Ops.KERNEL, dtypes.void, srcs, arg=ast).set_metadata(tuple(kb.metadata))

def _device_of(u: UOp) -> str:
  """The device of a tensor node: the first found depth-first (a COPY's is its target). Iterative: graphs are deep."""
  dev: Any = None
  stack, seen = [u], set()
  while stack and dev is None:
    x = stack.pop()
    if x in seen: continue
    seen.add(x)
    if x.op is Ops.DEVICE: dev = x.arg
    elif x.op is Ops.COPY: dev = x.src[1].arg
    else: stack.extend(reversed(x.src))
  if not isinstance(dev, str): raise ValueError(f"rangeify: {u.op} of shape {u.shape} needs one device, got {dev!r}")
  return dev

def build_kernel(ctx: RangeifyContext, r: UOp) -> UOp:
  """The kernel-graph node that holds the value of realized tensor node `r` once its kernel ran."""
  if r.op is Ops.COPY: return build_copy(ctx, r)
  if r.op is Ops.ASSIGN: return build_assign(ctx, r)
  buf = _new_buffer(r.dtype, prod(shape_of(r)), _device_of(r))
  if prod(shape_of(r)) == 0: return buf
  kb = KernelBuilder(ctx, r)
  out = kb.define(buf)
  ranges, idx = output_ranges(kb, shape_of(r))
  value = kb.lower(r.src[0] if r.op is Ops.CONTIGUOUS else r, idx, None)
  store = UOp(Ops.INDEX, out.dtype, (out, linear_index(idx, shape_of(r)))).store(value)
  return buf.after(finish_kernel(kb, store, ranges))

def build_copy(ctx: RangeifyContext, r: UOp) -> UOp:
  """COPY to another device: a kernel whose AST is a flat copy (one load, one store). The engine runs it as a buffer
  copy when the two buffers are on different devices (no compiled kernel spans devices)."""
  buf = _new_buffer(r.dtype, prod(shape_of(r)), r.src[1].arg)
  if prod(shape_of(r)) == 0: return buf
  kb = KernelBuilder(ctx, r)
  out = kb.define(buf)
  ranges, (idx,) = output_ranges(kb, (prod(shape_of(r)),))
  kb.metadata.update(dict.fromkeys(r.metadata))
  src = kb.load(ctx.stored.get(r.src[0], _base_of_view(r.src[0])), idx, None)
  store = UOp(Ops.INDEX, out.dtype, (out, idx)).store(src)
  return buf.after(finish_kernel(kb, store, ranges))

def build_assign(ctx: RangeifyContext, r: UOp) -> UOp:
  target, value = r.src
  base = _base_of_view(target)
  if base.op not in (Ops.BUFFER, Ops.BUFFER_VIEW, Ops.ASSIGN):
    raise ValueError(f"rangeify: ASSIGN target must be a view of a buffer, not {base.op} (under {target.op})")
  out_node = ctx.stored.get(base, base)
  if prod(shape_of(r)) == 0: return out_node
  kb = KernelBuilder(ctx, r)
  kb.overrides[base] = out_node
  kb.define(out_node)
  ranges, idx = output_ranges(kb, shape_of(r))
  tload = kb.lower(target, idx, None)
  if tload.op is not Ops.LOAD:
    raise ValueError(f"rangeify: ASSIGN target {target.op} of shape {target.shape} is not a plain view of a buffer")
  val = kb.lower(value, idx, None)
  reads = [u for u in val.toposort() if u.op is Ops.INDEX and u.src[0] is tload.src[0].src[0] and u is not tload.src[0]]
  if reads:
    # the value reads the target at other positions than it writes: compute it into a buffer first
    tmp = build_kernel(ctx, UOp(Ops.CONTIGUOUS, value.dtype, (value,)))
    val = kb.load(tmp, linear_index(idx, shape_of(r)), None)
  return _base_buffer(out_node).after(finish_kernel(kb, tload.src[0].store(val), ranges))

# ---- the driver ----

def rangeify(sink: UOp) -> tuple[UOp, dict[UOp, UOp], dict[UOp, int]]:
  """Tensor graph SINK -> (kernel graph SINK, becomes, var_vals).

  The kernel graph is a SINK over the AFTER(buffer, KERNEL) nodes of the outputs (KERNEL srcs are BUFFERs or AFTERs,
  so a walk from the sink reaches every kernel). `becomes` maps each original sink output (and each ASSIGN) to what
  replaces it once the kernels ran: its BUFFER reshaped to its shape (an ASSIGN becomes its target view). `var_vals`
  are the values of the BIND variables the kernels use."""
  # NOTE: lowering recurses along the graph; a long lazy chain (an unrealized loop) is deeper than the default limit
  if sys.getrecursionlimit() < (need := 4 * len(sink.toposort()) + 1000): sys.setrecursionlimit(need)
  tmap = graph_rewrite_map(sink, pm_strip_tensor_graph, name="rangeify: strip tensor graph")
  tsink = tmap[sink]
  ctx = RangeifyContext(find_realizes(tsink))
  for r in ctx.realizes: ctx.stored[r] = build_kernel(ctx, r)
  outs = dedup(ctx.stored[s] for s in tsink.src if s in ctx.stored)
  becomes: dict[UOp, UOp] = {}
  for orig in sink.toposort():
    t = tmap.get(orig, orig)
    if t in ctx.stored and (orig in sink.src or orig.op is Ops.ASSIGN): becomes[orig] = _realized_view(ctx, t)
    # an output that was already a buffer under DETACH/CONTIGUOUS becomes that buffer
    elif orig in sink.src and t is not orig and _is_buffer_view(t): becomes[orig] = t
  return UOp.sink(*outs), becomes, ctx.var_vals

def _realized_view(ctx: RangeifyContext, t: UOp) -> UOp:
  if t.op is Ops.ASSIGN:
    target = t.src[0]
    base = _base_of_view(target)
    return target if base.op is not Ops.ASSIGN else target.substitute({base: _realized_view(ctx, base)})
  return _base_buffer(ctx.stored[t]).reshape(shape_of(t))

__all__ = ["rangeify", "find_realizes", "reshape_index", "linear_index", "idx_add", "idx_mul", "idx_div", "idx_mod",
           "renumber"]
