"""Rangeify: the tensor graph -> the kernel graph (docs/ir.md sections 1 and 2), as a sequence of named graph_rewrites.

Movement ops disappear: each becomes index arithmetic on RANGEs. A value that must be stored (a sink output, CONTIGUOUS,
COPY, ASSIGN, or a reduce the cost rules say is cheaper stored than recomputed) becomes a KERNEL that writes a BUFFER;
everything else is fused into the kernel that reads it.

The value of tensor node `x` at an index is the node `INDEX(x, *idx)`: one index expression per dimension of x, each
possibly masked (`valid.where(i, Invalid)`: positions a PAD made invalid; every dimension carries the same mask). The
whole lowering is pushing that node down the graph, one rule per kind of op: movement ops map the indices (a PAD also
masks the value), an elementwise op distributes, a REDUCE_AXIS opens REDUCE ranges, a BUFFER or a stored node becomes
a LOAD at the flat index. The index math is plain UOp arithmetic; the symbolic rules (tinygrad.uop.symbolic) simplify
it where an index is split (so split and merged axes cancel as they are built) and, in full, in each finished kernel.

`rangeify(sink)`, pass by pass:
  strip tensor graph    DETACH dropped, CONTIGUOUS of an already contiguous buffer dropped
  find_realizes         which nodes get a buffer (the forced ones + the reduce cost rules); an analysis, not a rewrite
  push indices          each stored node is AFTER(BUFFER, END(STORE(INDEX(DEFINE_GLOBAL, lin), INDEX(x, *ranges))));
                        every INDEX(x, *idx) is pushed down to LOADs, REDUCEs and constants (a stored node reached on
                        the way is read from its buffer, and its own store made the same way)
  simplify kernels,     symbolic, never-valid loads and closed-form integer sums folded; then each store becomes
  stores to KERNELs     KERNEL(buffers, arg=renumbered AST) and AFTER(BUFFER, KERNEL) stands for its result

Until the last pass every buffer is one schedule-wide `DEFINE_GLOBAL(arg=n)` (n indexes RangeifyContext.leaves), a
buffer written by a kernel is read through `AFTER(DEFINE_GLOBAL, store)`, and each kernel's STORE carries its kernel
number as its tag; the last pass renumbers every kernel's buffers and ranges 0.. by first appearance and drops the tag.
"""
from __future__ import annotations
import functools, math
from dataclasses import dataclass, field
from typing import Any, Callable
from tinygrad.uop import Ops, GroupOp, AxisType
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite, graph_rewrite_map, Metadata, identity_element
from tinygrad.uop.symbolic import symbolic, split_sum, build_sum, split_uop
from tinygrad.uop import hooks
from tinygrad.uop.sint import sint, as_uop, sym_prod, sym_eq, vmax
from tinygrad.dtype import dtypes, Invalid, PtrDType
from tinygrad.helpers import prod, dedup, all_int
from tinygrad.schedule.multi import has_multi, lower_multi, multi_becomes

# ---- index math: UOp arithmetic; the symbolic rules simplify it where an index is split, and in each kernel ----

@functools.lru_cache(maxsize=4096)
def _c(v: int) -> UOp: return UOp.const(dtypes.index, v)

# NOTE: a bound on the local rewrite loop; the rules terminate long before it, and the kernels' full simplification
# pass finishes whatever is left
SIMP_STEPS = 64

def simp(u: UOp) -> UOp:
  """`u` with the symbolic rules applied at its top until none matches. The sum and div/mod rules flatten the sums
  below it themselves, so a split index (a div or mod of a merged one) simplifies as it is built."""
  for _ in range(SIMP_STEPS):
    if (r := symbolic.rewrite(u)) is None: return u
    u = r
  return u

def unmask(idx: tuple[UOp, ...]) -> tuple[UOp | None, list[UOp]]:
  """The common mask of the indices (None: all valid) and the indices without it. A bare Invalid has mask False."""
  valid: UOp | None = None
  raw: list[UOp] = []
  for i in idx:
    if i.is_masked(): v, i = i.src[0], i.src[1]
    elif i.op is Ops.CONST and i.arg is Invalid: v, i = UOp.const(dtypes.bool, False), _c(0)
    else: v = None
    if v is not None and v is not valid: valid = v if valid is None else simp(valid & v)
    raw.append(i)
  return valid, raw

def mask(valid: UOp | None, idx: list[UOp] | tuple[UOp, ...]) -> tuple[UOp, ...]:
  """`valid.where(i, Invalid)` for each index (a valid that is a constant folds: every index, or every one Invalid)."""
  if valid is None: return tuple(idx)
  if valid.op is Ops.CONST: return tuple(idx) if valid.arg else (UOp.invalid(),) * len(idx)
  # NOTE: i is an unmasked index and valid a condition, so no symbolic rule applies to the WHERE itself
  return tuple(i.valid(valid) for i in idx)

def _strides(shape: tuple[sint, ...]) -> list[sint]:
  """Row-major strides; a symbolic shape's are products of its sizes (an int shape keeps its historical form)."""
  if all_int(shape):
    ret, stride = [], prod(shape)
    for s in shape:
      stride //= max(s, 1)
      ret.append(stride)
    return ret
  return [sym_prod(shape[k + 1:]) for k in range(len(shape))]

def linear_index(idx: tuple[UOp, ...] | list[UOp], shape: tuple[sint, ...]) -> UOp:
  """The row-major flat offset of `idx` in a contiguous buffer of `shape` (masked by the indices' mask)."""
  valid, raw = unmask(tuple(idx))
  terms: list[UOp] = []
  # NOTE: outermost axis first, so the ranges are numbered in axis order by first appearance
  for i, s, stride in zip(raw, shape, _strides(tuple(shape))):
    if (isinstance(s, UOp) or s != 1) and not (i.op is Ops.CONST and i.arg == 0):
      terms.append(i if _is_one(stride) else i * as_uop(stride))
  if not terms: return mask(valid, [_c(0)])[0]
  ret = terms[0]
  for t in terms[1:]: ret = ret + t
  return mask(valid, [ret])[0]

def _is_one(x: sint) -> bool: return not isinstance(x, UOp) and x == 1

def _symbolic_groups(out_ax: list[int], out_shape: tuple[sint, ...], in_ax: list[int],
                     in_shape: tuple[sint, ...]) -> list[tuple[list[int], list[int]]]:
  """Groups of axes of equal product (provably, for every value of the variables): cut where the running products of
  the two sides are equal."""
  groups: list[tuple[list[int], list[int]]] = []
  oi = ii = 0
  while oi < len(out_ax) or ii < len(in_ax):
    og: list[int] = []
    ig: list[int] = []
    found = False
    for o in range(oi, len(out_ax)):
      og.append(out_ax[o])
      op_ = sym_prod(out_shape[a] for a in og)
      ig = []
      for i in range(ii, len(in_ax)):
        ig.append(in_ax[i])
        if sym_eq(op_, sym_prod(in_shape[a] for a in ig)): found = True; break
      if found: break
    if not found: og, ig = out_ax[oi:], in_ax[ii:]
    groups.append((og, ig))
    oi, ii = oi + len(og), ii + len(ig)
  return groups

def _symbolic_reshape_index(raw: list[UOp], out_shape: tuple[sint, ...], in_shape: tuple[sint, ...]) -> list[UOp]:
  out_ax = [i for i, s in enumerate(out_shape) if not _is_one(s)]
  in_ax = [i for i, s in enumerate(in_shape) if not _is_one(s)]
  ret: list[UOp] = [_c(0)] * len(in_shape)
  for og, ig in _symbolic_groups(out_ax, out_shape, in_ax, in_shape):
    lin = linear_index([raw[a] for a in og], tuple(out_shape[a] for a in og))
    if len(ig) > 1 and lin.op is Ops.ADD: lin = simp(lin)
    strides = _strides(tuple(in_shape[a] for a in ig))
    for n, (a, stride) in enumerate(zip(ig, strides)):
      q = simp(lin // as_uop(stride)) if not _is_one(stride) else lin
      ret[a] = q if n == 0 else simp(q % as_uop(in_shape[a]))
  return ret

def reshape_index(idx: tuple[UOp, ...] | list[UOp], out_shape: tuple[sint, ...],
                  in_shape: tuple[sint, ...]) -> tuple[UOp, ...]:
  """Indices into `in_shape` of the element at `idx` of its reshape to `out_shape`. Axes are matched in groups of equal
  product, so a merge or a split of axes costs one div/mod per axis of its group, never a whole-tensor flatten."""
  valid, raw = unmask(tuple(idx))
  if not all_int(out_shape + in_shape):
    keep_out, keep_in = [s for s in out_shape if not _is_one(s)], [s for s in in_shape if not _is_one(s)]
    if len(keep_out) == len(keep_in) and all(sym_eq(a, b) for a, b in zip(keep_out, keep_in)):
      it = iter(r for r, s in zip(raw, out_shape) if not _is_one(s))
      return mask(valid, [_c(0) if _is_one(s) else next(it) for s in in_shape])
    return mask(valid, _symbolic_reshape_index(raw, out_shape, in_shape))
  # NOTE: an empty tensor has no element to read: some index here runs over a size-0 range (or is masked off by a pad),
  # so any in-range index will do, and the grouping below would divide by the 0 size
  if prod(in_shape) == 0: return mask(valid, [_c(0)] * len(in_shape))
  # NOTE: the common reshape only adds or drops size-1 axes: the indices carry over
  if [s for s in out_shape if s != 1] == [s for s in in_shape if s != 1]:
    it = iter(r for r, s in zip(raw, out_shape) if s != 1)
    return mask(valid, [_c(0) if s == 1 else next(it) for s in in_shape])
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
    lin = linear_index([raw[a] for a in og], tuple(out_shape[a] for a in og))
    # NOTE: a sum about to be split is simplified first (the symbolic sum rule flattens it and merges a split index
    # back), so the div and mod of it simplify and index math stays small along long chains of views
    if len(ig) > 1 and lin.op is Ops.ADD: lin = simp(lin)
    stride = ip_
    for n, a in enumerate(ig):
      stride //= in_shape[a]
      q = simp(lin // _c(stride)) if stride != 1 else lin
      ret[a] = q if n == 0 else simp(q % _c(in_shape[a]))
  return mask(valid, ret)

def shape_of(u: UOp) -> tuple[sint, ...]:
  if (sh := u.shape) is None: raise ValueError(f"rangeify: {u.op} ({u.dtype}) has no shape; not a tensor-graph node")
  return sh

def vindex(x: UOp, idx: tuple[UOp, ...] | list[UOp]) -> UOp:
  """The value of tensor node x at one index expression per dimension."""
  return UOp(Ops.INDEX, x.dtype, (x, *idx))

def is_vindex(i: UOp) -> bool: return i.op is Ops.INDEX and not isinstance(i.dtype, PtrDType)

def _is_buffer_view(u: UOp) -> bool:
  """A contiguous view of a realized buffer: BUFFER or BUFFER_VIEW under zero or more RESHAPEs."""
  while u.op is Ops.RESHAPE: u = u.src[0]
  return u.op in (Ops.BUFFER, Ops.BUFFER_VIEW)

def base_of_view(u: UOp) -> UOp:
  while u.op in GroupOp.Movement: u = u.src[0]
  return u

# ---- pass: strip the tensor graph ----

pm_strip_tensor_graph = PatternMatcher([
  (UPat(Ops.DETACH, name="x"), lambda x: x.src[0]),
  # NOTE: a buffer is already contiguous, so CONTIGUOUS of it stores nothing
  (UPat(Ops.CONTIGUOUS, name="x"), lambda x: x.src[0] if _is_buffer_view(x.src[0]) else None),
])

# ---- analysis: which nodes get a buffer ----

def _size(shape: tuple[sint, ...]) -> int: return int(prod(vmax(n) for n in shape))

def _is_broadcast(e: UOp) -> bool: return any(s == 1 and n != 1 for s, n in zip(shape_of(e.src[0]), e.arg))

def _kernel_region(root: UOp, realizes: dict[UOp, None], start: tuple[UOp, ...]) -> list[UOp]:
  """The nodes a kernel starting at `start` computes (not crossing a realized node other than root, or a buffer)."""
  found: list[UOp] = []
  def gate(u: UOp) -> bool:
    if u is not root and (u in realizes or u.op in (Ops.BUFFER, Ops.BUFFER_VIEW)): return False
    found.append(u)
    return True
  for s in start: s.toposort(gate)
  return found

def _fused_reduces(root: UOp, realizes: dict[UOp, None], start: tuple[UOp, ...]) -> list[UOp]:
  """The REDUCE_AXIS nodes a kernel starting at `start` computes, not crossing a realized node (other than root)."""
  return [u for u in _kernel_region(root, realizes, start) if u.op is Ops.REDUCE_AXIS and u is not root]

def _kernel_inputs(r: UOp) -> tuple[UOp, ...]:
  if r.op is Ops.ASSIGN: return (r.src[1],)
  if r.op in (Ops.CONTIGUOUS, Ops.COPY): return (r.src[0],)
  return (r,)

# NOTE: a costly elementwise expression (_store_broadcast_source: a gelu, a layernorm's or batchnorm's output) read
# through a broadcasting EXPAND at least this many times over is stored instead of recomputed per broadcast element:
# fused into a matmul's or a conv's operand it was recomputed for every output column tile (measured on the LLVM path:
# the gelu-fed and layernorm-fed projections of a GPT-2 block ran at 8-12 GFLOPS, the plain matmuls of the same step at
# 50-220; bench/models.py --quick: ResNet-18's step 750 -> 380 ms, the block's 300 -> 74 ms, two GPT-2 blocks' forward
# 426 -> 122 ms). The decoding of narrower or integer data (a quantized weight's dequantization) stays fused, so
# weights stay quantized in memory and are dequantized in the kernel that reads them.
RECOMPUTE_BROADCAST = 128
# NOTE: read RECOMPUTE_SHARED times over (and less than RECOMPUTE_BROADCAST) by a broadcast and read by some other node
# too (directly or through views), it is stored as well: in a training step an attention's probabilities, read once per
# value of a head (64) by the probabilities x V matmul, which called exp2 per (query, key) and column tile, and read
# again by the backward; and the scores' gradient (which recomputed them), read by the dQ and dK matmuls. Measured on a
# GPT-2 block's step (D=256 H=4, LLVM path, alternating runs): 52.6-54.9 ms fused, 50.0-51.1 with the probabilities
# stored; later, 40.6-41.5 -> 36.1-37.5 ms with the scores' gradient stored too. Read by the broadcast alone (the same
# attention in inference, a per-channel statistic of a small image) it stays fused, unless it calls a transcendental
# (_broadcast_calls: the inference attention's probabilities are stored for that)
RECOMPUTE_SHARED = 64
COSTLY_ALU = 4
TRANSCENDENTAL_OPS = (Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT)

def _broadcast_factor(e: UOp, b: UOp | None = None) -> int:
  """How many times over a broadcasting EXPAND reads each element of its source (a symbolic size counts its maximum).
  With `b` (the base its view chain starts from): at least the elements of `e` per element of `b`, which also counts
  the chain's other EXPANDs (a conv's input: its sliding windows read each pixel kh x kw times, then the output
  channels' EXPAND reads each window cout times)."""
  own = int(prod(vmax(n) for s, n in zip(shape_of(e.src[0]), e.arg) if vmax(s) == 1 and vmax(n) != 1))
  if b is None or not (base := int(prod(vmax(n) for n in shape_of(b)))): return own
  return max(own, int(prod(vmax(n) for n in e.arg)) // base)

def _store_broadcast_source(e: UOp, b: UOp, region: list[UOp], shared: bool) -> bool:
  """Is the source `b` of the broadcasting EXPAND `e` cheaper stored than recomputed per broadcast element? Where the
  kernel computing it (up to stored nodes and buffers) evaluates THREEFRY; or where `e` broadcasts it at least
  RECOMPUTE_BROADCAST times (RECOMPUTE_SHARED where `shared`: something else reads it too) and it is a
  costly elementwise node: a transcendental op, or at least COSTLY_ALU ALU ops on float32/float64 (and bool) values only
  (a layernorm's or batchnorm's affine normalisation with its statistics stored), or a concatenation (two or more padded
  views: a fused qkv projection's gradient, the cat of dq, dk and dv, whose every element was three gated loads with
  their masks' index math; a GPT-2 block's step, D=768 H=12, LLVM path: its dX kernel 49.7 -> 12.9 ms, the step 320 ->
  271 ms). A region that reads narrower or integer data (a quantized weight's decoding) is not stored for its ALU
  ops. `region`: the nodes of b's kernel (_kernel_region)."""
  if any(u.op is Ops.THREEFRY for u in region): return True
  if b.op not in GroupOp.Elementwise or _broadcast_factor(e, b) < (RECOMPUTE_SHARED if shared else RECOMPUTE_BROADCAST):
    return False
  return _costly_region(region) or sum(1 for u in region if u.op is Ops.PAD) >= 2

# NOTE: the transcendentals a CPU computes as calls (libm's or libmvec's exp2, log2, sin). A call clobbers every vector
# register: fused into a matmul's operand, it keeps the register tile's accumulators in memory across each call
CALL_OPS = tuple(op for op in TRANSCENDENTAL_OPS if op is not Ops.SQRT)

def _broadcast_calls(e: UOp, b: UOp, region: list[UOp], realizes: dict[UOp, None],
                     readers: dict[UOp, list[UOp]]) -> list[UOp]:
  """What to store where `b`, the source of the broadcasting EXPAND `e`, calls a transcendental (CALL_OPS) and `e` reads
  it RECOMPUTE_SHARED times over or more, but _store_broadcast_source keeps it fused (an attention's probabilities x V
  in inference: each probability read once per value of a head, 64; a gelu under a projection to 64-127 outputs): `b`
  itself, so the matmul's register tile stays in registers across the reduce, and the calls in its kernel that a node
  outside it reads too (the softmax's exps, which its sum reads), so they are computed once. Measured on AVX2 (2
  threads): a layer of GPT-2's forward at T=256, its attention kernels after the scores alone, round robin: 6.23-6.85
  ms fused (probabilities x V 3.43), 4.93-5.16 with the probabilities stored (x V 1.31-1.44; the sum still computes its
  exps), 5.01 with only the exps stored (x V 2.37: a division by the sum per (query, key) in its loop), 4.42-4.43 with
  both; gelu(x) @ W^T, x 1024 x 768, TinyJit: 64 outputs 5.2-5.5 -> 1.9-2.2 ms, 96 outputs 6.4-7.0 -> 2.3-3.0."""
  if b.op not in GroupOp.Elementwise or _broadcast_factor(e, b) < RECOMPUTE_SHARED: return []
  calls = [u for u in region if u.op in CALL_OPS and u not in realizes]
  if not calls: return []
  inside = set(region)
  return [b, *(u for u in calls if u is not b and any(r not in inside for r in readers.get(u, [])))]

def _costly_region(region: list[UOp]) -> bool:
  """A transcendental op, or at least COSTLY_ALU ALU ops on float32/float64 (and bool) values only."""
  if any(u.op in TRANSCENDENTAL_OPS for u in region): return True
  wide = all(u.dtype.scalar() in (dtypes.float32, dtypes.float64, dtypes.bool) for u in region
             if u.op in GroupOp.ALU or u.op in (Ops.BUFFER, Ops.BUFFER_VIEW, Ops.CAST, Ops.BITCAST))
  return wide and sum(1 for u in region if u.op in GroupOp.ALU) >= COSTLY_ALU

# NOTE: a costly elementwise expression a reduce reads through a padded view chain this many times per element or more
# is stored: the gradient of a sliding-window view (a max-pool's, as col2im) sums, for each input pixel, every copy of
# the windows' expand, 16 for a 3x3 stride-2 pool, of which 1 to 4 are windows of that pixel; fused, the window
# gradient (the recomputed pool input, the equality test with the maximum, the share) was evaluated for all 16 with
# their index arithmetic (ResNet-18's stem: 27 ms of a 146 ms step), stored it is one masked load each
RECOMPUTE_WINDOW = 4

def _padded_window_sources(r: UOp, realizes: dict[UOp, None]) -> list[UOp]:
  """The costly elementwise nodes the reduce `r` reads through a view chain with a PAD and no EXPAND, with at least
  RECOMPUTE_WINDOW of its input's elements per element of theirs."""
  n_in = int(prod(vmax(n) for n in shape_of(r.src[0])))
  ops: dict[UOp, set[Ops]] = {}
  for u in _kernel_region(r, realizes, (r.src[0],)):
    if u.op in GroupOp.Movement and (b := base_of_view(u)) not in realizes: ops.setdefault(b, set()).add(u.op)
  # NOTE: with no EXPAND in the chain each element of the source is read once where the view is not padding; an
  # EXPAND is a real reuse (a conv's input read by its windows and output channels: _store_broadcast_source's rule)
  return [b for b, seen in ops.items() if Ops.PAD in seen and Ops.EXPAND not in seen and b.op in GroupOp.Elementwise
          and not _is_buffer_view(b)
          and n_in >= RECOMPUTE_WINDOW * max(1, int(prod(vmax(n) for n in shape_of(b))))
          and _costly_region(_kernel_region(b, realizes, (b,)))]

def find_realizes(sink: UOp) -> dict[UOp, None]:
  """The nodes that are stored to a buffer, in dependency order. Forced: the sink's outputs (unless already a buffer),
  CONTIGUOUS, COPY (and its source), ASSIGN. Cost rules, to a fixed point: a REDUCE_AXIS read through a broadcasting
  EXPAND would be recomputed per broadcast element, and one read by two kernels would be computed twice: both stored,
  unless it is a reduce of constants that folds to a closed form (an arange), which costs nothing to recompute; so is
  one read through a PAD, which would run its loop for the padding too (a concatenation of matmuls). Random
  numbers (THREEFRY, tens of integer ops per element) read through a broadcasting EXPAND are stored too: a matmul of
  `Tensor.randn` inputs would otherwise draw every input element once per output column; elementwise uses (dropout)
  stay fused. So is a costly elementwise expression (a transcendental op, COSTLY_ALU float ALU ops, or a concatenation)
  read through an EXPAND that broadcasts it at least RECOMPUTE_BROADCAST times (a gelu or a layernorm fused into a
  matmul's operand), or RECOMPUTE_SHARED times where another node reads it too (a training step's attention) or where it
  calls a transcendental (an inference attention's probabilities, with the exps its softmax's sum reads:
  _broadcast_calls); and an elementwise node computed more than once whose expression reads RECOMPUTE_CHAIN buffers or
  more (a residual stream: _store_shared_chains), or whose expression calls a transcendental and has
  RECOMPUTE_CALLS_MIN elements or more (a SiLU's derivative under a GroupNorm's backward: _store_shared_calls)."""
  topo = sink.toposort()
  realizes: dict[UOp, None] = {}
  for s in sink.src:
    if not _is_buffer_view(s): realizes[s] = None
  for u in topo:
    if u.op in (Ops.CONTIGUOUS, Ops.ASSIGN, Ops.COPY): realizes[u] = None
    if u.op is Ops.COPY and not _is_buffer_view(u.src[0]): realizes[u.src[0]] = None
  expands = [u for u in topo if u.op is Ops.EXPAND and _is_broadcast(u)]
  # NOTE: a reduce read through a PAD (a piece of a concatenation, a slice's gradient) is evaluated, loop and all, for
  # every element of the padded view and selected away outside its piece: the cat of two 256x256 matmuls fused into one
  # kernel ran both reduces for all 512 rows, without a register tile (6.0 ms against 0.76 for one matmul kernel)
  pads = [u for u in topo if u.op is Ops.PAD and _size(shape_of(u)) > _size(shape_of(u.src[0]))]
  # the nodes (not views) that read each node, directly or through views of it
  readers: dict[UOp, list[UOp]] = {}
  for u in topo:
    if u.op in GroupOp.Movement: continue
    for s in dict.fromkeys(base_of_view(x) if x.op in GroupOp.Movement else x for x in u.src):
      readers.setdefault(s, []).append(u)
  reduces = [u for u in topo if u.op is Ops.REDUCE_AXIS]
  free: dict[UOp, bool] = {}
  def store(r: UOp) -> bool:
    if r in realizes: return False
    if (f := free.get(r)) is None: f = free[r] = folds_to_closed_form(r)
    return not f
  changed = True
  while changed:
    changed = False
    for e in expands:
      for r in _fused_reduces(e, realizes, (e.src[0],)):
        if store(r): realizes[r] = None; changed = True
      b = base_of_view(e.src[0])
      if b not in realizes and not _is_buffer_view(b):
        region = _kernel_region(b, realizes, (b,))
        if _store_broadcast_source(e, b, region, len(readers.get(b, ())) > 1): realizes[b] = None; changed = True
        else:
          for t in _broadcast_calls(e, b, region, realizes, readers): realizes[t] = None; changed = True
    for u in pads:
      for r in _fused_reduces(u, realizes, (u.src[0],)):
        if store(r): realizes[r] = None; changed = True
    for r in reduces:
      for b in _padded_window_sources(r, realizes):
        if b not in realizes: realizes[b] = None; changed = True
    # each stored node's kernel: the nodes it computes
    regions = {root: _kernel_region(root, realizes, _kernel_inputs(root)) for root in list(realizes)}
    users: dict[UOp, int] = {}
    for root, region in regions.items():
      for r in dedup(u for u in region if u.op is Ops.REDUCE_AXIS and u is not root): users[r] = users.get(r, 0) + 1
    for r, n in users.items():
      if n > 1 and store(r): realizes[r] = None; changed = True
    if not changed: changed = _store_shared_chains(topo, realizes, readers, regions)
    if not changed: changed = _store_shared_calls(topo, realizes, readers, regions)
    # NOTE: last, when the reduces the rules above store already cut the fused expressions short
    if not changed: changed = _limit_fused_reads(topo, realizes)
  return {u: None for u in topo if u in realizes}

# NOTE: an elementwise node computed more than once (by two kernels, or by a reduce's loop and another) whose fused
# expression reads this many buffers (not through a broadcast) is stored. An expression that grows with the model's
# depth (a residual stream, x + attn + mlp + attn + ..., read by each layer's layernorm statistics, its normalisation
# and the next residual add) was recomputed from every earlier layer's outputs in every one of them: a 12-layer GPT-2
# forward's last layernorm read 25 buffers, its statistics kernels took 1.3 ms each against 0.05 for the first layer's
# (AVX2, 2 threads). Stored, each layer's residual is one read. Counting: stored it costs a store and one read per
# reader, fused a re-read of every buffer per reading kernel
RECOMPUTE_CHAIN = 4

def _store_shared_chains(topo: dict[UOp, None], realizes: dict[UOp, None], readers: dict[UOp, list[UOp]],
                         regions: dict[UOp, list[UOp]]) -> bool:
  """Store (in dependency order) each elementwise node computed more than once (in two kernels, or in a reduce's loop
  and another) whose fused expression, up to stored nodes, reads RECOMPUTE_CHAIN or more distinct buffers other than
  through a broadcast (a bias is not one); True if it stored any. `regions`: each stored node's kernel (its nodes), as
  find_realizes has them for `realizes` as it stands."""
  added = False
  # NOTE: only where it is computed more than once: in the kernels of two stored nodes, or read by a reduce and by
  # another node (the reduce's loop and the other's each compute it). A relu's compare and select read their input in
  # one loop of one kernel: computed once there
  kernels_of: dict[UOp, int] = {}
  for region in regions.values():
    for x in region: kernels_of[x] = kernels_of.get(x, 0) + 1
  by_reduce = {base_of_view(s) if s.op in GroupOp.Movement else s
               for u in topo if u.op is Ops.REDUCE_AXIS for s in u.src}
  # NOTE: per node, some of the buffers its region reads element for element (topo positions), at most
  # 2 * RECOMPUTE_CHAIN of them (enough to decide): a stored node or a buffer is one, itself; a broadcasting EXPAND
  # reads each element of its source many times over from cache (a bias, a statistic), so none of them counts
  big: dict[UOp, frozenset[int]] = {}
  for k, u in enumerate(topo):
    if u in realizes or u.op in (Ops.BUFFER, Ops.BUFFER_VIEW):
      big[u] = frozenset((k,))
      continue
    if u.op is Ops.EXPAND and _is_broadcast(u):
      big[u] = frozenset()
      continue
    got = sorted({x for s in u.src for x in big.get(s, ())})
    big[u] = frozenset(got[:2 * RECOMPUTE_CHAIN])
    again = kernels_of.get(u, 0) >= 2 or (u in by_reduce and len(readers.get(u, ())) >= 2)
    if u.op in GroupOp.Elementwise and again and len(got) >= RECOMPUTE_CHAIN and not _is_buffer_view(u):
      realizes[u] = None
      big[u], added = frozenset((k,)), True
  return added

# NOTE: an elementwise node of at least RECOMPUTE_CALLS_MIN elements whose fused expression (up to stored nodes) calls a
# transcendental (CALL_OPS), computed in two kernels or more and read by nodes of two kernels or more, is stored: each
# of them called it again for every element. A GroupNorm's backward through a SiLU reads the SiLU's derivative (an exp2
# and a reciprocal of the normalised input, recomputed from the conv's output and the group statistics) in its two group
# sums, the scale's and the shift's sums and the input gradient; a first conv's weight gradient (3 input channels, a
# broadcast of 27, under RECOMPUTE_SHARED) called it 27 times per element. Measured on the LLVM path (2 threads, AMD Zen
# 5, both schedules built in one process and alternated): tinygrad/models/unet.py's SGD step (base 32, depth 3, 8
# groups, batch 8 of 64x64) 341-391 ms -> 145-171 ms (torch: 118); a GPT-2 block's step (D256, D768), a BERT layer's
# (D768), GPT-2's forward and ResNet-18's step the same within the noise. Under the size (an LSTM's 16 x 256 gates, 16
# steps) it stays fused: stored, each gate was a launch of its own (118 -> 421 launches, 34.7 -> 37.2 ms)
RECOMPUTE_CALLS_MIN = 1 << 16

def _store_shared_calls(topo: dict[UOp, None], realizes: dict[UOp, None], readers: dict[UOp, list[UOp]],
                        regions: dict[UOp, list[UOp]]) -> bool:
  """Store each elementwise node of RECOMPUTE_CALLS_MIN elements or more whose expression up to stored nodes calls a
  transcendental (CALL_OPS), that the kernels of `regions` (each stored node's nodes) compute two times or more and
  whose readers are in two kernels or more; True if it stored any. One pass from the graph's end: a node stored, the
  nodes of its expression are computed in its kernel instead of its readers' (the kernels it was in no longer count
  for them)."""
  kernels: dict[UOp, set[UOp]] = {}
  for root, region in regions.items():
    for x in region: kernels.setdefault(x, set()).add(root)
  added = False
  for u in reversed(list(topo)):
    if u in realizes or u.op not in GroupOp.Elementwise or _is_buffer_view(u) or len(kernels.get(u, ())) < 2: continue
    if _size(shape_of(u)) < RECOMPUTE_CALLS_MIN: continue
    rk: set[UOp] = set()
    for r in readers.get(u, []): rk |= {r} if r in realizes else kernels.get(r, set())
    if len(rk) < 2: continue
    region = _kernel_region(u, realizes, (u,))
    if not any(x.op in CALL_OPS for x in region): continue
    realizes[u] = None
    added = True
    gone = kernels[u]
    for x in region: kernels[x] = (kernels.get(x, set()) - gone) | {u}
  return added

# NOTE: the distinct reads (a buffer element at one index expression) one element of a fused expression may make before
# an elementwise node of it is stored instead: cats of sums of slices, nested (a stencil applied d times), read 8**d
# elements per output element and take 8**d index pushes to lower; a stored node is one read for its readers. Reads
# through the same views are one (x used 20 times by a polynomial is one read), so only the index-changing paths count
MAX_FUSED_READS = 512

def _fusable(u: UOp) -> bool: return u.op in GroupOp.Elementwise or u.op is Ops.REDUCE_AXIS

def _fused_reads(topo: dict[UOp, None], realizes: dict[UOp, None]) -> tuple[dict[UOp, frozenset[int]], UOp | None]:
  """Each node's distinct reads when fused, and the first fusable node with more than MAX_FUSED_READS (or None)."""
  # NOTE: a read is named by ints only (topo positions hashed along its path): the same nodes are stored on every run
  reads: dict[UOp, frozenset[int]] = {}
  for k, u in enumerate(topo):
    if u.op in (Ops.BUFFER, Ops.BUFFER_VIEW): reads[u] = frozenset((k,))
    elif not u.src: reads[u] = frozenset()
    elif u.op in GroupOp.Movement or u.op is Ops.REDUCE_AXIS:
      # NOTE: a view (or a reduce's loop) changes the index: each path through it is a new read
      reads[u] = frozenset(hash((k, p)) for s in u.src for p in reads[s])
    else: reads[u] = frozenset().union(*(reads[s] for s in u.src))
    if u in realizes: reads[u] = frozenset((k,))
    elif len(reads[u]) > MAX_FUSED_READS and _fusable(u): return reads, u
  return reads, None

def _limit_fused_reads(topo: dict[UOp, None], realizes: dict[UOp, None]) -> bool:
  """Store nodes until no fused expression reads more than MAX_FUSED_READS distinct (buffer, view path) pairs; True if
  it stored any. Where one does, the node stored is the biggest one it reads through a view (the previous stencil
  step's whole result, not each of the slices of it), else the node itself."""
  added = False
  while True:
    reads, over = _fused_reads(topo, realizes)
    if over is None: return added
    best: UOp | None = None
    seen: set[UOp] = set()
    todo = [over]
    while todo:
      if (x := todo.pop()) in seen or x in realizes: continue
      seen.add(x)
      if x.op in GroupOp.Movement:
        b = x
        while b.op in GroupOp.Movement and b.src: b = b.src[0]
        bigger = best is None or len(reads[b]) > len(reads[best])
        if b not in realizes and _fusable(b) and len(reads[b]) > 1 and bigger: best = b
        continue
      if x is over or x.op in GroupOp.Elementwise: todo.extend(x.src)
    realizes[over if best is None else best] = None
    added = True

NOT_CONST = (Ops.BUFFER, Ops.BUFFER_VIEW, Ops.BIND, Ops.DEFINE_VAR, Ops.COPY, Ops.ASSIGN, Ops.CONTIGUOUS)

def folds_to_closed_form(r: UOp) -> bool:
  """A REDUCE_AXIS of constants only (the cumsum of ones under arange) whose kernel simplifies to no loop at all: as
  cheap to recompute in each consumer as to load, so the cost rules leave it fused (argmax, eye, one_hot, gather)."""
  # NOTE: only pm_fold_int_sum takes a REDUCE out of a kernel: any other reduce over more than one element stays a loop
  if not (r.arg[0] is Ops.ADD and dtypes.is_int(r.dtype)) and any(vmax(shape_of(r.src[0])[a]) > 1 for a in r.arg[1]):
    return False
  if any(u.op in NOT_CONST for u in r.toposort()): return False
  lowered = lower_kernels(UOp.sink(r), RangeifyContext({r: None}))
  return all(u.op is not Ops.REDUCE for u in lowered.toposort())

# ---- the context the passes share ----

@dataclass
class RangeifyContext:
  realizes: dict[UOp, None]
  next_buffer: int = 0                                          # the LUNIQUE number of the next new buffer
  leaves: list[UOp] = field(default_factory=list)               # DEFINE_GLOBAL arg -> its BUFFER / BUFFER_VIEW
  dgs: dict[UOp, UOp] = field(default_factory=dict)             # BUFFER / BUFFER_VIEW -> its DEFINE_GLOBAL
  n_ranges: int = 0
  var_vals: dict[UOp, int] = field(default_factory=dict)
  metadata: list[tuple[Metadata, ...]] = field(default_factory=list)  # kernel number -> metadata
  assigns: set[int] = field(default_factory=set)                # kernel numbers that write into an existing buffer
  kernels: dict[UOp, UOp] = field(default_factory=dict)         # store (END/STORE) -> its KERNEL
  stored: dict[UOp, UOp] = field(default_factory=dict)          # realized node -> its buffer after its store

  def leaf(self, x: UOp) -> UOp:
    """The realized node x as its BUFFER after the store that computes it (x's store is made once, when first asked)."""
    if (ret := self.stored.get(x)) is None: ret = self.stored[x] = store_realized(self, x)
    return ret

  def dg(self, leaf: UOp) -> UOp:
    if (d := self.dgs.get(leaf)) is None:
      size = leaf.arg[0] if leaf.op is Ops.BUFFER_VIEW else leaf.arg
      d = self.dgs[leaf] = UOp(Ops.DEFINE_GLOBAL, leaf.dtype.ptr(size), arg=len(self.leaves))
      self.leaves.append(leaf)
    return d

  def new_range(self, size: sint, axis_type: AxisType) -> UOp:
    self.n_ranges += 1
    return UOp.range(size, self.n_ranges - 1, axis_type)

  def output_ranges(self, shape: tuple[sint, ...]) -> tuple[list[UOp], tuple[UOp, ...]]:
    ranges = [self.new_range(s, AxisType.LOOP) for s in shape if not _is_one(s)]
    it = iter(ranges)
    return ranges, tuple(_c(0) if _is_one(s) else next(it) for s in shape)

  def new_buffer(self, dtype: Any, size: sint, device: Any) -> UOp:
    """A new buffer of `size` elements; a symbolic size gets the buffer of its maximum (docs/symbolic.md)."""
    if not isinstance(device, str): raise ValueError(f"rangeify: a buffer needs one device, got {device!r}")
    size = vmax(size)
    self.next_buffer += 1
    return UOp(Ops.BUFFER, dtype, (UOp(Ops.LUNIQUE, arg=self.next_buffer - 1), UOp(Ops.DEVICE, arg=device)), size)

  def new_kernel(self, metadata: tuple[Metadata, ...], assign: bool = False) -> int:
    self.metadata.append(metadata)
    if assign: self.assigns.add(len(self.metadata) - 1)
    return len(self.metadata) - 1

def _is_zero(x: sint) -> bool: return not isinstance(x, UOp) and x == 0

def tagged_store(idx: UOp, value: UOp, kernel: int) -> UOp: return UOp(Ops.STORE, dtypes.void, (idx, value), tag=kernel)

# ---- stores of realized nodes (made by the push pass, when a realized node is first reached) ----

def _fused_metadata(ctx: RangeifyContext, x: UOp) -> tuple[Metadata, ...]:
  """The metadata of the nodes a kernel for x computes (down to, and including, the stored nodes it reads)."""
  md: dict[Metadata, None] = {}
  for u in x.toposort(gate=lambda u: u is x or (u not in ctx.realizes and u.op not in (Ops.BUFFER, Ops.BUFFER_VIEW))):
    md.update(dict.fromkeys(u.metadata))
  return tuple(md)

def retarget(view: UOp, leaf: UOp) -> UOp:
  """`view` (movement ops over a buffer, or over an ASSIGN of a view of one) with its buffer replaced by `leaf`."""
  chain: list[tuple[UOp, UOp]] = []
  while (b := base_of_view(view)).op is Ops.ASSIGN:
    chain.append((view, b))
    view = b.src[0]
  ret = view.substitute({base_of_view(view): leaf})
  for outer, asg in reversed(chain): ret = outer.substitute({asg: ret})
  return ret

def store_assign(ctx: RangeifyContext, x: UOp) -> UOp:
  target, value = x.src
  buf = base_of_view(target)
  while buf.op is Ops.ASSIGN: buf = base_of_view(buf.src[0])
  if buf.op not in (Ops.BUFFER, Ops.BUFFER_VIEW):
    raise ValueError(f"rangeify: ASSIGN target must be a view of a buffer, not {buf.op} (under {target.op})")
  shape = shape_of(x)
  if _is_zero(sym_prod(shape)): return target
  k = ctx.new_kernel(_fused_metadata(ctx, x), assign=True)
  ranges, idx = ctx.output_ranges(shape)
  # NOTE: the STORE's index is the target view at the output index; pushing it down yields the buffer offset
  st = tagged_store(vindex(target, idx), vindex(value, idx), k).end(*ranges)
  return retarget(target, buf.after(st))

def store_realized(ctx: RangeifyContext, x: UOp) -> UOp:
  """A realized node -> its BUFFER after the STORE that computes it, viewed in x's shape."""
  if x.op is Ops.ASSIGN: return store_assign(ctx, x)
  shape = shape_of(x)
  n = sym_prod(shape)
  buf = ctx.new_buffer(x.dtype, n, x.device)
  if _is_zero(n): return buf.reshape(shape)
  if x.op is Ops.COPY and x.src[0].device != x.device: return store_transfer(ctx, x, buf)
  value = x.src[0] if x.op in (Ops.CONTIGUOUS, Ops.COPY) else x
  # NOTE: a COPY is a flat copy (one range, one load, one store): the engine runs it as a buffer copy across devices
  kshape = (n,) if x.op is Ops.COPY else shape
  k = ctx.new_kernel(x.metadata if x.op is Ops.COPY else _fused_metadata(ctx, x))
  ranges, idx = ctx.output_ranges(kshape)
  # NOTE: x's own value is pushed one step here: an INDEX of x itself would load from this very store
  val = vindex(value.reshape(kshape), idx) if value is not x else push_once(ctx, vindex(x, idx))
  st = tagged_store(ctx.dg(buf).index(linear_index(idx, kshape)), val, k).end(*ranges)
  # NOTE: a symbolic size's buffer is the maximum's; the value is its first n elements
  done = buf.after(st)
  return (done if not isinstance(n, UOp) else done.shrink(((0, n),))).reshape(shape)


def transfer_ast(dtype: Any, size: int, src_device: str, dst_device: str) -> UOp:
  """The AST of a copy between devices: SINK(COPY(DEFINE_GLOBAL 0 (on dst), DEFINE_GLOBAL 1 (on src))), the devices in
  the COPY's arg; no codegen, the engine moves the bytes (docs/ir.md section 2)."""
  dgs = tuple(UOp(Ops.DEFINE_GLOBAL, dtype.ptr(size), arg=i) for i in range(2))
  return UOp.sink(UOp(Ops.COPY, dtypes.void, dgs, arg=(src_device, dst_device)))

def store_transfer(ctx: RangeifyContext, x: UOp, buf: UOp) -> UOp:
  """A COPY between devices -> its BUFFER after a transfer KERNEL that reads the whole source buffer (a source that is
  not one, a strided view, is stored contiguous on its own device first)."""
  src, shape = x.src[0], shape_of(x)
  def whole(v: UOp) -> UOp:
    while v.op is Ops.RESHAPE: v = v.src[0]
    return v
  view = whole(ctx.leaf(src) if src in ctx.realizes else src)
  if view.op not in (Ops.BUFFER, Ops.BUFFER_VIEW, Ops.AFTER) or view.size != prod(shape) or view.dtype != x.dtype:
    ctx.realizes[tmp := src.contiguous()] = None
    view = whole(ctx.leaf(tmp))
  kernel = UOp(Ops.KERNEL, dtypes.void, (buf, view), arg=transfer_ast(x.dtype, prod(shape), src.device, x.device))
  return buf.after(kernel.set_metadata(x.metadata)).reshape(shape)

# ---- pass: push indices ----

# movement ops as index maps: the unmasked indices of a view -> those of its source
def _permute(raw: list[UOp], x: UOp) -> list[UOp]:
  ret = [_c(0)] * len(x.arg)
  for k, a in enumerate(x.arg): ret[a] = raw[k]
  return ret
def _expand(raw: list[UOp], x: UOp) -> list[UOp]:
  return [_c(0) if s == 1 else r for r, s in zip(raw, shape_of(x.src[0]))]
def _shrink(raw: list[UOp], x: UOp) -> list[UOp]: return [r + _c(b) if b else r for r, (b, _) in zip(raw, x.arg)]
def _flip(raw: list[UOp], x: UOp) -> list[UOp]:
  return [r * _c(-1) + _c(s - 1) if f else r for r, s, f in zip(raw, shape_of(x.src[0]), x.arg)]
def _reshape(raw: list[UOp], x: UOp) -> list[UOp]: return list(reshape_index(raw, shape_of(x), shape_of(x.src[0])))

MOVE = {Ops.RESHAPE: _reshape, Ops.PERMUTE: _permute, Ops.EXPAND: _expand, Ops.SHRINK: _shrink, Ops.FLIP: _flip}

def _pad(raw: list[UOp], x: UOp) -> tuple[UOp | None, list[UOp]]:
  """The PAD x at raw indices: (the condition of being inside its source, or None; the indices into the source)."""
  cond: UOp | None = None
  for r, s, (b, e) in zip(raw, shape_of(x.src[0]), x.arg):
    for c in ([_c(b - 1) < r] if b else []) + ([r < _c(b + s)] if e else []): cond = c if cond is None else cond & c
  return cond, [r + _c(-b) if b else r for r, (b, _) in zip(raw, x.arg)]

def view_index(ctx: RangeifyContext, x: UOp, idx: tuple[UOp, ...]) -> tuple[UOp, tuple[UOp, ...], list[UOp]]:
  """Follow the movement ops from x down with the index: (the first node that is not one, the masked index into it,
  the conditions of the PADs passed, outermost first). A PAD masks the index with its condition; a stored node below x
  is its buffer (through the view of it that the store left)."""
  valid, raw = unmask(idx)
  conds: list[UOp] = []
  while x.op in GroupOp.Movement:
    if x.op is Ops.PAD:
      cond, raw = _pad(raw, x)
      if cond is not None: conds.append(cond); valid = cond if valid is None else valid & cond
    else: raw = MOVE[x.op](raw, x)
    x = x.src[0]
    if x in ctx.realizes: x = ctx.leaf(x)
  return x, mask(valid, raw), conds

def push_movement(ctx: RangeifyContext, i: UOp, x: UOp) -> UOp:
  base, idx, conds = view_index(ctx, x, i.src[1:])
  ret = vindex(base, idx)
  # NOTE: a masked LOAD reads 0 outside the mask, but a computed value must be masked to 0 explicitly
  for c in reversed(conds): ret = c.where(ret, ret.const_like(0))
  return ret

def push_reduce(ctx: RangeifyContext, i: UOp, x: UOp) -> UOp:
  op, axes = x.arg
  src_shape = shape_of(x.src[0])
  # NOTE: a reduce over an empty axis is its identity; folding it here keeps loads of the empty input (a size-0
  # buffer) out of the kernel, where only the zero-trip loop around them would keep them in bounds
  if any(src_shape[a] == 0 for a in axes): return UOp.const(x.dtype, identity_element(op, x.dtype))
  valid, raw = unmask(i.src[1:])
  ranges: list[UOp] = []
  for a in axes:
    if src_shape[a] == 1: raw[a] = _c(0)
    else: ranges.append(rng := ctx.new_range(src_shape[a], AxisType.REDUCE)); raw[a] = rng
  val = vindex(x.src[0], mask(valid, raw))
  return UOp(Ops.REDUCE, x.dtype, (val, *ranges), op) if ranges else val

def push_elementwise(ctx: RangeifyContext, i: UOp, x: UOp) -> UOp:
  return UOp(x.op, x.dtype, tuple(vindex(s, i.src[1:]) for s in x.src), x.arg)

def bind_var(ctx: RangeifyContext, x: UOp) -> UOp:
  # NOTE: a kernel's DEFINE_VAR has no sources; the bound value travels beside the schedule in var_vals
  var = x.src[0].replace(src=())
  if ctx.var_vals.setdefault(var, x.src[1].arg) != x.src[1].arg:
    raise ValueError(f"rangeify: variable {var.arg[0]!r} bound to both {ctx.var_vals[var]} and {x.src[1].arg}")
  return var

def store_to_target(ctx: RangeifyContext, s: UOp, t: UOp, v: UOp) -> UOp | None:
  """An assign's STORE through the target view at the output index -> a STORE at the buffer offset."""
  if not is_vindex(t): return None
  # NOTE: a PAD in the view (a strided slice) masks the store: the positions it made up are not written
  view = t.src[0]
  leaf, (idx,), _ = view_index(ctx, ctx.leaf(view) if view in ctx.realizes else view, t.src[1:])
  return tagged_store(buffer_version(ctx, leaf).index(idx), v, s.tag)

def buffer_version(ctx: RangeifyContext, leaf: UOp) -> UOp:
  """BUFFER -> its DEFINE_GLOBAL; AFTER(BUFFER, store) -> AFTER(DEFINE_GLOBAL, store)."""
  if leaf.op is Ops.AFTER: return ctx.dg(leaf.src[0]).after(*leaf.src[1:])
  return ctx.dg(leaf)

def load(ctx: RangeifyContext, i: UOp, x: UOp) -> UOp:
  """A buffer (or a stored node: its buffer after the store that writes it) is a LOAD at the flat index."""
  return buffer_version(ctx, x).index(i.src[1]).load()

# how INDEX(x, *idx) is pushed down through x, one entry per kind of op
PUSH_INDEX: dict[Ops, Callable[[RangeifyContext, UOp, UOp], UOp]] = {
  # movement ops map the index (a chain of them at once); a PAD masks it and the value
  **dict.fromkeys(GroupOp.Movement, push_movement),
  Ops.REDUCE_AXIS: push_reduce,
  **dict.fromkeys(GroupOp.Elementwise, push_elementwise),
  Ops.CONST: lambda ctx, i, x: UOp.const(x.dtype, x.arg),
  Ops.BIND: lambda ctx, i, x: bind_var(ctx, x),
  Ops.DEFINE_VAR: lambda ctx, i, x: x.replace(src=()),
  Ops.BUFFER: load, Ops.BUFFER_VIEW: load, Ops.AFTER: load,
}

def push_once(ctx: RangeifyContext, i: UOp) -> UOp:
  x = i.src[0]
  if (fn := PUSH_INDEX.get(x.op)) is None:
    raise NotImplementedError(f"rangeify: cannot lower {x.op} (dtype {x.dtype}, shape {x.shape}) inside a kernel")
  return fn(ctx, i, x)

def push_index(ctx: RangeifyContext, i: UOp) -> UOp | None:
  # NOTE: an INDEX of a pointer is already a memory access: INDEX(DEFINE_GLOBAL, offset)
  if isinstance(i.dtype, PtrDType): return None
  # a stored node is read from its buffer; the first read makes its store
  if (x := i.src[0]) in ctx.realizes: return vindex(ctx.leaf(x), i.src[1:])
  return push_once(ctx, i)

# NOTE: runs top-down (bottom_up=True): an INDEX is pushed all the way before anything below it is visited, so the
# tensor graph itself is never rewritten (each rule sees the very nodes find_realizes chose), and the symbolic rules,
# which are not for tensor nodes, never see it
pm_push_indices = PatternMatcher([
  (UPat(Ops.INDEX, name="i"), push_index),
  (UPat(Ops.STORE, src=(UPat(Ops.INDEX, name="t"), UPat(name="v")), name="s"), store_to_target),
])

# ---- pass: simplify kernels ----

# NOTE: a masked index whose mask folded to False is a bare Invalid (a pad or cat of an empty tensor); kernel_spec
# allows Invalid only as the false branch of a mask, and the load reads 0 anyway, so it becomes the constant 0
pm_fold_never_load = PatternMatcher([
  (UPat(Ops.LOAD, src=(UPat(Ops.INDEX, src=(UPat(), UPat.const(dtypes.index, Invalid))),), name="ld"),
   lambda ld: ld.const_like(0)),
])

def drop_masked_where(c: UOp, ld: UOp, z: UOp) -> UOp | None:
  """`c.where(LOAD, 0)` -> the LOAD when its index is masked by c (and maybe more): a masked LOAD reads 0 already."""
  if z.arg != 0 or (isinstance(z.arg, float) and math.copysign(1.0, z.arg) < 0): return None
  if not (idx := ld.src[0].src[1]).is_masked(): return None
  gate = set(split_uop(idx.src[0], Ops.AND))
  return ld if all(t in gate for t in split_uop(c, Ops.AND)) else None

pm_drop_masked_where = PatternMatcher([
  (UPat(Ops.WHERE, src=(UPat(name="c"), UPat(Ops.LOAD, src=(UPat(Ops.INDEX),), name="ld"), UPat(Ops.CONST, name="z"))),
   drop_masked_where),
])

# ---- closed forms of integer sums over one range ----
# NOTE: integer addition wraps the same way however it is grouped, so these are exact; float sums are left alone

def _split_range(x: UOp, r: UOp) -> tuple[int, UOp] | None:
  """x (index math) as k*r + rest with rest free of r, else None."""
  terms, c = split_sum(x)
  k = terms.pop(r, 0)
  if any(r in t.toposort() for t in terms): return None
  return k, build_sum(terms, c, dtypes.index)

def _range_bounds(cond: UOp, r: UOp, lo: UOp, hi: UOp) -> tuple[UOp, UOp] | None:
  """The r in [lo, hi) where cond (an AND of `a < b` linear in r with coefficient +-1) holds: the new (lo, hi)."""
  for c in split_uop(cond, Ops.AND):
    if c.op is not Ops.CMPLT or c.src[0].dtype is not dtypes.index: return None
    if (sp := _split_range(c.src[0] - c.src[1], r)) is None: return None
    k, rest = sp  # c: k*r + rest < 0
    if k == 1: hi = hi.minimum(rest * -1)
    elif k == -1: lo = lo.maximum(rest + 1)
    else: return None
  return lo, hi

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

pm_simplify_kernels = symbolic + pm_fold_never_load + pm_drop_masked_where + pm_fold_int_sum

def lower_kernels(tsink: UOp, ctx: RangeifyContext, to_kernels: bool = False) -> UOp:
  """The kernels of the realized nodes of `tsink`: index pushdown and simplification (and, with to_kernels, each store
  made a KERNEL)."""
  # each realized output is its BUFFER after the store that computes it:
  #   AFTER(BUFFER, END(STORE(INDEX(DEFINE_GLOBAL, lin), INDEX(node, *ranges)), *ranges))
  root = UOp.sink(*[ctx.leaf(s) if s in ctx.realizes else s for s in tsink.src])
  # INDEX(node, *idx) pushed down through movement, elementwise and reduce ops to LOADs of buffers; a realized node
  # reached on the way is read from its buffer (and its store made the same way)
  g = graph_rewrite(root, pm_push_indices, ctx=ctx, bottom_up=True, name="rangeify: push indices")
  if not to_kernels: return graph_rewrite(g, pm_simplify_kernels, name="rangeify: simplify kernels")
  # index math simplified (never-valid loads, masks a load already has and closed-form integer sums folded); each store,
  # once simplified, becomes a KERNEL with a renumbered AST, and AFTER(BUFFER, KERNEL) is the buffer once it ran
  return graph_rewrite(g, pm_simplify_to_kernels, ctx=ctx, name="rangeify: simplify kernels, stores to KERNELs")

# ---- pass: stores to kernels ----

def _out_version(store: UOp) -> UOp: return store.src[0].src[0]

def _base_dg(v: UOp) -> UOp:
  while v.op is Ops.AFTER: v = v.src[0]
  return v

def split_assign_hazard(ctx: RangeifyContext, store: UOp, ranges: tuple[UOp, ...]) -> UOp | None:
  """An assign whose value reads its target buffer at other places than it writes: the value goes to a temporary
  buffer first (a kernel of its own), and the assign copies it. Returns the new top of the assign's store, or None."""
  out, val = store.src
  target = _base_dg(out.src[0])
  reads = [u for u in val.toposort(lambda u: u.op is not Ops.AFTER) if u.op is Ops.INDEX and u is not out]
  if not any(_base_dg(u.src[0]) is target for u in reads): return None
  leaf = ctx.leaves[target.arg]
  shape = tuple(r.src[0].arg if r.src[0].op is Ops.CONST else r.src[0] for r in ranges)
  tmp = ctx.dg(ctx.new_buffer(val.dtype, sym_prod(shape), leaf.device))
  lin = linear_index(ranges, shape)
  k = ctx.new_kernel(ctx.metadata[store.tag])
  st_tmp = tagged_store(tmp.index(lin), val, k).end(*ranges)
  return tagged_store(out, tmp.after(kernel_of(ctx, st_tmp)).index(lin).load(), store.tag).end(*ranges)

def kernel_of(ctx: RangeifyContext, st: UOp) -> UOp:
  """The KERNEL of a store: its AST with the buffers and ranges renumbered 0.. by first appearance (the output first),
  over the kernel-graph nodes of those buffers (BUFFER, or AFTER(BUFFER, KERNEL) for one an earlier kernel wrote)."""
  if (k := ctx.kernels.get(st)) is not None: return k
  store, ranges = (st.src[0], st.src[1:]) if st.op is Ops.END else (st, ())
  if store.tag in ctx.assigns and (split := split_assign_hazard(ctx, store, ranges)) is not None:
    k = ctx.kernels[st] = kernel_of(ctx, split)
    return k
  # NOTE: the walk stops at the buffers: below an AFTER are earlier kernels, not this one
  topo = st.toposort(lambda u: u.op is not Ops.AFTER)
  versions = dedup([_out_version(store)] + [u.src[0] for u in topo if u.op is Ops.INDEX])
  # NOTE: ranges and buffers are renumbered so identical kernels are identical UOps (and so cache and dedupe)
  subs = {v: UOp(Ops.DEFINE_GLOBAL, _base_dg(v).dtype, arg=n) for n, v in enumerate(versions)}
  subs.update({r: r.replace(arg=(n, *r.arg[1:])) for n, r in enumerate(u for u in topo if u.op is Ops.RANGE)})
  body = st.substitute(subs)
  # the kernel number tag is bookkeeping of this pass, not part of the kernel
  if body.op is Ops.END: body = body.replace(src=(body.src[0].replace(tag=None), *body.src[1:]))
  else: body = body.replace(tag=None)
  ast = UOp.sink(body)
  srcs = tuple(ctx.leaves[v.arg] if v.op is Ops.DEFINE_GLOBAL else ctx.leaves[_base_dg(v).arg].after(*v.src[1:])
               for v in versions)
  k = ctx.kernels[st] = UOp(Ops.KERNEL, dtypes.void, srcs, arg=ast).set_metadata(ctx.metadata[store.tag])
  return k

pm_stores_to_kernels = PatternMatcher([
  (UPat(Ops.AFTER, src=(UPat(name="b"), UPat((Ops.END, Ops.STORE), name="st"))),
   lambda ctx, b, st: b.after(kernel_of(ctx, st))),
])

# NOTE: one walk: graph_rewrite rewrites a node's sources first, so a store is simplified when its AFTER is reached
pm_simplify_to_kernels = pm_simplify_kernels + pm_stores_to_kernels

# ---- the driver ----

def rangeify(sink: UOp, first_new: int = 0) -> tuple[UOp, dict[UOp, UOp], dict[UOp, int]]:
  """Tensor graph SINK -> (kernel graph SINK, becomes, var_vals).

  The kernel graph is a SINK over the AFTER(buffer, KERNEL) nodes of the outputs (KERNEL srcs are BUFFERs or AFTERs,
  so a walk from the sink reaches every kernel). `becomes` maps each original sink output (and each ASSIGN) to what
  replaces it once the kernels ran: its BUFFER reshaped to its shape (an ASSIGN becomes its target view). `var_vals`
  are the values of the BIND variables the kernels use. New buffers are BUFFER(LUNIQUE(n)), numbered after the
  LUNIQUE buffers of the input graph (and from first_new on)."""
  # tensors on several devices: one graph per device, data moved only by COPY nodes (tinygrad/schedule/multi.py)
  if has_multi(sink):
    dsink, multis = lower_multi(sink)
    if hooks.device_graph:
      for fn in hooks.device_graph: fn(dsink)
    # NOTE: new buffers are numbered after every buffer of the caller's graph, also those no device graph reads
    named = 1 + max((u.arg for u in sink.toposort() if u.op is Ops.LUNIQUE), default=-1)
    ksink, dbecomes, var_vals = rangeify(dsink, named)
    return ksink, {**dbecomes, **multi_becomes(multis, dbecomes)}, var_vals
  # DETACH dropped, CONTIGUOUS of an already contiguous buffer dropped
  tmap = graph_rewrite_map(sink, pm_strip_tensor_graph, name="rangeify: strip tensor graph")
  tsink = tmap[sink]
  first_new = max(first_new, 1 + max((u.arg for u in tsink.toposort() if u.op is Ops.LUNIQUE), default=-1))
  ctx = RangeifyContext(find_realizes(tsink), next_buffer=first_new)
  # stores, index pushdown, simplification, KERNELs
  ksink = lower_kernels(tsink, ctx, to_kernels=True)
  outs = dedup(base_of_view(k) for t, k in zip(tsink.src, ksink.src) if t in ctx.realizes)
  becomes: dict[UOp, UOp] = {}
  for orig in sink.toposort():
    t = tmap.get(orig, orig)
    if t in ctx.realizes and (orig in sink.src or orig.op is Ops.ASSIGN): becomes[orig] = strip_after(ctx.leaf(t))
    # an output that was already a buffer under DETACH/CONTIGUOUS becomes that buffer
    elif orig in sink.src and t is not orig and _is_buffer_view(t): becomes[orig] = t
  return UOp.sink(*outs), becomes, ctx.var_vals

def strip_after(view: UOp) -> UOp:
  """A view of stored buffers as the Tensor front end holds it: every AFTER(buffer, ...) is just the buffer."""
  return view.substitute({u: u.src[0] for u in view.toposort(lambda u: u.op is not Ops.AFTER) if u.op is Ops.AFTER})

__all__ = ["rangeify", "find_realizes", "reshape_index", "linear_index", "lower_kernels", "fold_int_sum",
           "RangeifyContext"]
