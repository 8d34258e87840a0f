"""Multi-device tensors: one logical tensor held by several devices, and the pass that lowers a graph of them to one
graph per device whose only transfers are COPY nodes (docs/multi.md).

In the tensor graph (docs/ir.md section 1):
  DEVICE(arg=("CPU", "CPU:1"))   a set of devices (a tuple of device names, distinct)
  MULTI(*shards, arg=(axis, bounds, op))
                                 one tensor on several devices: shards[i] (a node of the graph of device i) holds
      axis None, bounds None:      the whole tensor, on every device (replicated)
      axis a, bounds ((b0, e0), ...): rows [b_i, e_i) of axis a (the intervals partition the axis, in any order; an
                                   interval may be empty)
      op ADD|MUL|MAX (axis None): a partial: the tensor is op over the shards. Only this pass makes one (a reduce over
                                   the split axis), and it never leaves the pass: an allreduce (or a reduce-scatter
                                   into a split layout) resolves it
  COPY(x, DEVICE(devices), arg=(axis, bounds) | None)
                                 x placed on the devices, split like a MULTI (None: replicated); `Tensor.shard`
  CONST(DEVICE(devices))         a constant on every device
Every other op of the tensor graph takes the logical tensors as they are: shapes are the whole tensor's.

`lower_multi(sink)` rewrites the graph bottom-up (the named pass "multi: per-device graphs"): each op on MULTI sources
becomes a MULTI of the op on each shard, its arg following the split axis (a permute moves it, a shrink, pad or flip
moves the bounds, a reshape keeps it where the rows of a shard stay whole). Where a shard needs data another device
holds, the pass says so with COPY nodes of the piece it needs (and nothing else moves data):
  - operands split differently (or one split and one replicated) are brought to the first split operand's layout: a
    replicated operand is shrunk on each device (no copy), a split one is resharded (a COPY per piece);
  - a reduce over the split axis leaves a partial, which an allreduce resolves: naive (each device copies every other
    device's partial and reduces them in device order) or ring (a reduce-scatter around the ring in N chunks, then an
    allgather around it), chosen by size (`allreduce_variant`); a partial placed into a split layout is a
    reduce-scatter, into one device a reduce;
  - a reshape that cannot keep whole rows on each device, or an expand of the split axis, gathers the tensor on every
    device first (an allgather, N-1 COPYs per device), and the result is replicated;
  - a COPY to one device gathers the pieces there; a COPY to a set of devices reshards.
Each piece that moves is one COPY of a contiguous region (rangeify stores a strided piece before it moves), and the
scheduler makes each COPY between devices a transfer kernel (docs/ir.md section 2).
"""
from __future__ import annotations
from typing import Any, Sequence
from tinygrad.uop import Ops, GroupOp
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite_map
from tinygrad.dtype import dtypes
from tinygrad.helpers import ALLREDUCE, prod
from tinygrad.uop.sint import all_concrete, render_shape, render_sint, sint

Bounds = tuple[tuple[int, int], ...]
Box = tuple[tuple[int, int], ...]

class MultiDeviceError(ValueError):
  """A multi-device graph that cannot be lowered, or bad input to Tensor.shard: the message names what and where."""

# NOTE: a ring allreduce moves 2(N-1)/N of the partial per device where the naive one moves N-1 times it, at twice the
# transfers (and N-1 small add kernels per chunk): with 3 or more devices, from this many bytes per partial on, it is
# the ring
RING_MIN_BYTES = 1 << 16

# ---- layouts ----

def split_bounds(size: int, n: int) -> Bounds:
  """`size` rows in n parts as torch.tensor_split cuts them: the first size % n parts one row longer."""
  q, r = divmod(size, n)
  out, start = [], 0
  for i in range(n):
    end = start + q + (1 if i < r else 0)
    out.append((start, end))
    start = end
  return tuple(out)

def is_multi_device(device: Any) -> bool: return isinstance(device, tuple)

def _is_partition(bounds: Bounds, size: int) -> bool:
  """Every interval in [0, size], and the non-empty ones tile it."""
  if any(not 0 <= b <= e <= size for b, e in bounds): return False
  pos = 0
  for b, e in sorted((b, e) for b, e in bounds if e > b):
    if b != pos: return False
    pos = e
  return pos == size

def check_layout(shape: tuple[int, ...], devices: tuple[str, ...], axis: int | None, bounds: Bounds | None,
                 what: str) -> None:
  """Raise MultiDeviceError unless (axis, bounds) split `shape` over `devices`."""
  if axis is None:
    if bounds is not None: raise MultiDeviceError(f"{what}: bounds {bounds} given without an axis to split")
    return
  if not isinstance(axis, int) or not 0 <= axis < len(shape):
    raise MultiDeviceError(f"{what}: axis {axis} is not an axis of shape {shape}")
  if bounds is None or len(bounds) != len(devices) or not _is_partition(bounds, shape[axis]):
    raise MultiDeviceError(f"{what}: bounds {bounds} do not split axis {axis} (size {shape[axis]}) over "
                           f"{len(devices)} devices {devices}")

def local_shape(shape: tuple[int, ...], axis: int | None, b: tuple[int, int] | None) -> tuple[int, ...]:
  if axis is None or b is None: return shape
  return tuple(b[1] - b[0] if k == axis else s for k, s in enumerate(shape))

def _box(shape: tuple[int, ...], axis: int | None, b: tuple[int, int] | None) -> Box:
  return tuple(b if k == axis and b is not None else (0, s) for k, s in enumerate(shape))

def _empty(box: Box) -> bool: return any(e <= b for b, e in box)

# ---- building per-device nodes ----

def _dev(d: str | tuple[str, ...]) -> UOp: return UOp(Ops.DEVICE, arg=d)

def multi(shards: Sequence[UOp], axis: int | None, bounds: Bounds | None, op: Ops | None = None) -> UOp:
  return UOp(Ops.MULTI, shards[0].dtype, tuple(shards), (axis, bounds, op))

def devices_of(m: UOp) -> tuple[str, ...]: return tuple(s.device for s in m.src)

def copy_to(x: UOp, dev: str) -> UOp:
  """x on `dev`: x itself when it is there, else a COPY (the only way data moves between devices)."""
  if x.device == dev: return x
  if not all(isinstance(v, int) for v in x.shape):
    raise MultiDeviceError(f"moving a tensor of symbolic shape {render_shape(x.shape)} from {x.device} to {dev} (a "
                           "gather, reshard or allreduce) is not supported; bind its sizes first")
  # NOTE: a strided view is stored on its own device first, in a node of its own: the view itself may be an ASSIGN's
  # target in the same graph, and the copy must read the values from before the write
  src = x.contiguous() if _is_view(x) and not _is_base_view(x) else x
  return UOp(Ops.COPY, x.dtype, (src, _dev(dev)))

def const(v: Any, dtype: Any, dev: str, shape: tuple[int, ...]) -> UOp:
  c = UOp(Ops.CONST, dtype, (_dev(dev),), dtypes.as_const(v, dtype))
  return c.reshape((1,) * len(shape)).expand(shape) if shape else c

def _local(box: Box, origin: Box) -> Box:
  """`box` (whole-tensor coordinates) in the coordinates of a shard that starts at origin's lower corner."""
  return tuple((b - o, e - o) for (b, e), (o, _) in zip(box, origin))

def assemble(pieces: list[tuple[int, UOp]], axis: int, shape: tuple[int, ...], dtype: Any, dev: str) -> UOp:
  """The tensor of `shape` on dev made of pieces (offset along axis, node on dev) that tile it along axis: each piece
  padded into place and picked by a mask (a WHERE, so every value keeps its bits, -0.0 and NaNs too)."""
  if not pieces: return const(0, dtype, dev, shape)
  acc: UOp | None = None
  for off, p in pieces:
    pad = tuple((off, shape[k] - off - p.shape[k]) if k == axis else (0, 0) for k in range(len(shape)))
    pp = p.pad(pad)
    if acc is None: acc = pp; continue
    inside = const(True, dtypes.bool, dev, p.shape).pad(pad)
    acc = inside.where(pp, acc)
  assert acc is not None
  return acc

def gather_region(m: UOp, box: Box, dev: str) -> UOp:
  """The region `box` of the (not partial) MULTI m, on dev: from the shard on dev where that holds it, else COPYs of
  the pieces of it the other shards hold."""
  axis, bounds, _ = m.arg
  devs = devices_of(m)
  shape = tuple(e - b for b, e in box)
  if axis is None:
    i = devs.index(dev) if dev in devs else 0
    return copy_to(m.src[i].shrink(box), dev)
  if not all(isinstance(v, int) for r in box for v in r):
    raise MultiDeviceError(f"gathering a tensor of symbolic shape {render_shape(m.shape)} split on axis {axis} over "
                           f"{devs} onto {dev} is not supported; bind its sizes first")
  pieces: list[tuple[int, UOp]] = []
  lo, hi = box[axis]
  for i, (b, e) in enumerate(bounds):
    plo, phi = max(b, lo), min(e, hi)
    if phi <= plo or _empty(box): continue
    part = tuple((plo, phi) if k == axis else r for k, r in enumerate(box))
    origin = tuple((b, e) if k == axis else (0, 0) for k in range(len(box)))
    pieces.append((plo - lo, copy_to(m.src[i].shrink(_local(part, origin)), dev)))
  if len(pieces) == 1 and pieces[0][1].shape == shape: return pieces[0][1]
  return assemble(sorted(pieces, key=lambda p: p[0]), axis, shape, m.dtype, dev)

def reshard(m: UOp, devices: tuple[str, ...], axis: int | None, bounds: Bounds | None) -> UOp:
  """m laid out on `devices` as (axis, bounds): a replicated m is shrunk where it is (no copy); otherwise each device
  takes its region from the shards that hold it. A partial m is reduce-scattered (or allreduced, into a replicated
  layout) on its own devices."""
  if m.arg[2] is not None:
    if devices == devices_of(m): return reduce_scatter(m, axis, bounds)
    m = resolve(m)
  if m.arg[:2] == (axis, bounds) and devices_of(m) == devices: return m
  shape = m.shape
  return multi([gather_region(m, _box(shape, axis, bounds[j] if bounds else None), d) for j, d in enumerate(devices)],
               axis, bounds)

def gather(m: UOp, dev: str) -> UOp:
  """The whole tensor on one device (a partial: reduced there)."""
  if m.arg[2] is not None: return _reduce_onto(m.src, m.arg[2], dev, _box(m.shape, None, None))
  return gather_region(m, _box(m.shape, None, None), dev)

# ---- collectives: every device's share, as per-device nodes ----

def allreduce_variant(nbytes: int, n: int) -> str:
  """ALLREDUCE=naive|ring forces one; empty: the ring for 3 or more devices and partials of RING_MIN_BYTES or more."""
  v = str(ALLREDUCE.value).strip().lower()
  if v in ("naive", "ring"): return v
  if v: raise MultiDeviceError(f"ALLREDUCE={ALLREDUCE.value!r}: must be naive, ring, or empty (chosen by size)")
  return "ring" if n > 2 and nbytes >= RING_MIN_BYTES else "naive"

def _reduce_onto(shards: Sequence[UOp], op: Ops, dev: str, box: Box) -> UOp:
  """op over every shard's region `box`, on dev, in device order on every device (so each computes the same bits)."""
  terms = [copy_to(s.shrink(box), dev) for s in shards]
  acc = terms[0]
  for t in terms[1:]: acc = acc.alu(op, t)
  return acc

def ring_reduce_scatter(shards: Sequence[UOp], op: Ops, boxes: Sequence[Box]) -> list[UOp]:
  """Chunk c (region boxes[c]) reduced onto device c around the ring: it starts on device c+1, and each device adds
  its own part to what it receives and passes it on, N-1 hops. An empty chunk moves nothing."""
  n, out = len(shards), []
  for c, box in enumerate(boxes):
    k = (c + 1) % n
    acc = shards[k].shrink(box)
    if not _empty(box):
      for step in range(2, n + 1):
        k = (c + step) % n
        acc = copy_to(acc, shards[k].device).alu(op, shards[k].shrink(box))
    else: acc = shards[c].shrink(box)
    out.append(acc)
  return out

def ring_allgather(pieces: Sequence[UOp], devs: tuple[str, ...]) -> list[list[UOp]]:
  """have[j][c]: piece c (on device c) on device j, passed around the ring c -> c+1 -> ... (N-1 hops)."""
  n = len(pieces)
  have: list[list[UOp]] = [[pieces[j]] * n for j in range(n)]
  for c, p in enumerate(pieces):
    have[c][c] = p
    for step in range(1, n):
      k = (c + step) % n
      p = copy_to(p, devs[k]) if p.size else const(0, p.dtype, devs[k], p.shape)
      have[k][c] = p
  return have

def allreduce(m: UOp) -> UOp:
  """The partial m resolved: every device gets op over the shards (replicated)."""
  shards, op, devs = m.src, m.arg[2], devices_of(m)
  shape = m.shape
  if len(shards) == 1: return multi(shards, None, None)
  if not all(isinstance(v, int) for v in shape):
    raise MultiDeviceError(f"allreduce of partial sums of symbolic shape {render_shape(shape)} over {devs} is not "
                           "supported; bind its sizes first")
  if allreduce_variant(prod(shape) * m.dtype.itemsize, len(shards)) == "naive":
    return multi([_reduce_onto(shards, op, d, _box(shape, None, None)) for d in devs], None, None)
  n_el = prod(shape)
  chunks = split_bounds(n_el, len(shards))
  flat = [s.reshape((n_el,)) for s in shards]
  red = ring_reduce_scatter(flat, op, [(c,) for c in chunks])
  have = ring_allgather(red, devs)
  out = [assemble([(b, have[j][c]) for c, (b, e) in enumerate(chunks) if e > b], 0, (n_el,), m.dtype, d)
         for j, d in enumerate(devs)]
  return multi([o.reshape(shape) for o in out], None, None)

def reduce_scatter(m: UOp, axis: int | None, bounds: Bounds | None) -> UOp:
  """The partial m reduced into the layout (axis, bounds) on its devices: device j gets op over the shards of its
  region only (naive: copied straight to it; ring: around the ring). Into a replicated layout this is the allreduce."""
  if axis is None or bounds is None: return allreduce(m)
  shards, op, devs = m.src, m.arg[2], devices_of(m)
  boxes = [_box(m.shape, axis, b) for b in bounds]
  if allreduce_variant(prod(m.shape) * m.dtype.itemsize, len(shards)) == "naive":
    return multi([_reduce_onto(shards, op, d, boxes[j]) for j, d in enumerate(devs)], axis, bounds)
  return multi(ring_reduce_scatter(shards, op, boxes), axis, bounds)

def resolve(m: UOp) -> UOp:
  """A partial MULTI allreduced; any other node as it is."""
  return allreduce(m) if m.op is Ops.MULTI and m.arg[2] is not None else m

# ---- the rules: each op on MULTI sources ----

def _md(x: UOp, u: UOp) -> UOp: return u.set_metadata(x.metadata) if x.metadata else u

def lower_const(x: UOp, d: UOp) -> UOp | None:
  if not is_multi_device(d.arg): return None
  return multi([UOp(Ops.CONST, x.dtype, (_dev(dv),), x.arg) for dv in d.arg], None, None)

def reject_multi_buffer(x: UOp, d: UOp) -> UOp | None:
  if not is_multi_device(d.arg): return None
  raise MultiDeviceError(f"a BUFFER on the device set {d.arg}: a tensor on several devices is a MULTI of one buffer "
                         "per device")

def _layout_of(srcs: Sequence[UOp]) -> tuple[int | None, Bounds | None]:
  """The layout an op over srcs takes: the first split source's, else replicated."""
  for s in srcs:
    if s.op is Ops.MULTI and s.arg[0] is not None: return s.arg[0], s.arg[1]
  return None, None

def _to_layout(s: UOp, devs: tuple[str, ...], axis: int | None, bounds: Bounds | None) -> tuple[UOp, ...]:
  """s's shards in the layout (a source on no device, a bound variable, is the same node on every device)."""
  if s.op is not Ops.MULTI:
    shape = s.shape or ()
    return tuple(s.shrink(_box(shape, axis, bounds[j] if bounds else None)) if shape else s for j in range(len(devs)))
  return reshard(s, devs, axis, bounds).src

def _check_devices(x: UOp, srcs: Sequence[UOp]) -> tuple[str, ...]:
  multis = [s for s in srcs if s.op is Ops.MULTI]
  devs = devices_of(multis[0])
  for s in srcs:
    d = devices_of(s) if s.op is Ops.MULTI else s.device
    if d is not None and d != devs:
      raise MultiDeviceError(f"{x.op}: operands on different devices, {devs} and {d}: put both on one device set "
                             "(Tensor.shard, or .to() to gather onto one device)")
  return devs

def lower_elementwise(x: UOp) -> UOp | None:
  if not any(s.op is Ops.MULTI for s in x.src): return None
  devs = _check_devices(x, x.src)
  srcs = [resolve(s) for s in x.src]
  axis, bounds = _layout_of(srcs)
  per_src = [_to_layout(s, devs, axis, bounds) for s in srcs]
  return multi([_md(x, UOp(x.op, x.dtype, tuple(p[j] for p in per_src), x.arg)) for j in range(len(devs))],
               axis, bounds)

def reshape_layout(old: tuple[int, ...], new: tuple[int, ...], axis: int, bounds: Bounds) -> tuple[int, Bounds] | None:
  """Where the split axis goes in a reshape: the axis b of `new` with the same axes before it (in elements) whose rows
  each shard's boundaries fall on, so every shard reshapes on its own. None when there is no such axis."""
  pre, post = prod(old[:axis]), prod(old[axis + 1:])
  if pre == 0 or post == 0: return None
  cands = [b for b in range(len(new)) if prod(new[:b]) == pre]
  for b in sorted(cands, key=lambda b: new[b] == 1):
    pn = prod(new[b + 1:])
    if pn == 0 or new[b] * pn != old[axis] * post: continue
    if all(lo * post % pn == 0 and hi * post % pn == 0 for lo, hi in bounds):
      return b, tuple((lo * post // pn, hi * post // pn) for lo, hi in bounds)
  return None

def reshape_keeping_split(old: tuple[sint, ...], new: tuple[sint, ...], axis: int) -> int | None:
  """The axis of `new` that is the split axis untouched (its concrete size, the same concrete number of elements before
  it): a reshape of symbolic sizes that only regroups the other axes keeps the bounds as they are. None if there is
  none."""
  pre, size = old[:axis], old[axis]
  if not isinstance(size, int) or size == 0 or not all_concrete(pre): return None
  for b in range(len(new)):
    if not all_concrete(new[:b + 1]): return None
    if prod(new[:b]) == prod(pre) and new[b] == size: return b
  return None

def _pad_layout(size: int, bounds: Bounds, before: int, after: int) -> tuple[Bounds, list[tuple[int, int]]]:
  """New bounds of an axis padded by (before, after), and each shard's own padding: the shard that holds row 0 takes
  `before`, the one that holds the last row `after` (shard 0 both when the axis is empty)."""
  n = len(bounds)
  def holder(at_start: bool) -> int:
    hits = [i for i, (b, e) in enumerate(bounds) if (b == 0 if at_start else e == size)]
    full = [i for i in hits if bounds[i][1] > bounds[i][0]]
    return (full or hits or [0])[0] if size else 0
  first, last = holder(True), holder(False)
  new, pads = [], []
  for i, (b, e) in enumerate(bounds):
    nb = 0 if i == first else b + before
    ne = e + before + (after if i == last else 0)
    new.append((nb, max(nb, ne)))
    pads.append((before if i == first else 0, after if i == last else 0))
  assert len(new) == n
  return tuple(new), pads

def _symbolic_on_axis(x: UOp, axis: int) -> bool:
  """A movement op whose argument on the split axis (any size of a reshape) is symbolic: no bounds can follow it."""
  if x.op is Ops.RESHAPE: return not all(isinstance(v, int) for v in (*x.arg, *x.src[0].shape))
  if x.op in (Ops.SHRINK, Ops.PAD): return not all(isinstance(v, int) for v in x.arg[axis])
  if x.op is Ops.EXPAND: return not isinstance(x.arg[axis], int)
  return False

def lower_movement(x: UOp, m: UOp) -> UOp:
  axis, bounds, op = m.arg
  devs = devices_of(m)
  if axis is None:
    return multi([_md(x, UOp(x.op, x.dtype, (s,), x.arg)) for s in m.src], None, None, op)
  shape = m.shape
  # NOTE: a reshape of symbolic sizes runs on each shard when the split axis itself is left as it is
  if x.op is Ops.RESHAPE and not all_concrete((*x.arg, *shape)) and \
      (nax := reshape_keeping_split(shape, x.arg, axis)) is not None:
    return multi([_md(x, s.reshape(local_shape(x.arg, nax, b))) for s, b in zip(m.src, bounds)], nax, bounds)
  if _symbolic_on_axis(x, axis):
    arg = render_shape(x.arg) if x.op in (Ops.RESHAPE, Ops.EXPAND) else \
      "(" + ", ".join(f"({render_sint(b)}, {render_sint(e)})" for b, e in x.arg) + ")"
    raise MultiDeviceError(f"{x.op.name} {arg} of a tensor of shape {render_shape(shape)} split on axis {axis} over "
                           f"{devs}: a symbolic size on the split axis (or in a reshape) has no per-device bounds; "
                           "bind its sizes first")
  if x.op is Ops.PERMUTE:
    return multi([_md(x, s.permute(x.arg)) for s in m.src], x.arg.index(axis), bounds)
  if x.op is Ops.FLIP:
    size = shape[axis]
    nb = tuple((size - e, size - b) for b, e in bounds) if x.arg[axis] else bounds
    return multi([_md(x, s.flip(x.arg)) for s in m.src], axis, nb)
  if x.op is Ops.SHRINK:
    lo, hi = x.arg[axis]
    def clip(v: int) -> int: return min(max(v, lo), hi)
    def keep(b: int, e: int) -> tuple[int, int]:
      """The rows shard [b, e) keeps, in its own coordinates: its overlap with [lo, hi), empty when there is none."""
      start = min(max(lo, b), e)
      return start - b, max(min(hi, e), start) - b
    shards = [_md(x, s.shrink(tuple(keep(b, e) if k == axis else r for k, r in enumerate(x.arg))))
              for s, (b, e) in zip(m.src, bounds)]
    return multi(shards, axis, tuple((clip(b) - lo, clip(e) - lo) for b, e in bounds))
  if x.op is Ops.PAD:
    nb, pads = _pad_layout(shape[axis], bounds, *x.arg[axis])
    return multi([_md(x, s.pad(tuple(pads[i] if k == axis else p for k, p in enumerate(x.arg))))
                  for i, s in enumerate(m.src)], axis, nb)
  if x.op is Ops.EXPAND and x.arg[axis] == shape[axis]:
    return multi([_md(x, s.expand(local_shape(x.arg, axis, b))) for s, b in zip(m.src, bounds)], axis, bounds)
  if x.op is Ops.RESHAPE and (lay := reshape_layout(shape, x.arg, axis, bounds)) is not None:
    nax, nbounds = lay
    return multi([_md(x, s.reshape(local_shape(x.arg, nax, b))) for s, b in zip(m.src, nbounds)], nax, nbounds)
  # NOTE: the rows of a shard do not stay whole (or the split axis itself is expanded): gathered on every device
  return _gathered_then(x, m, devs)

def _gathered_then(x: UOp, m: UOp, devs: tuple[str, ...]) -> UOp:
  """The movement op x on every device's whole copy of m (an allgather first): the result is replicated."""
  rep = reshard(m, devs, None, None)
  return multi([_md(x, UOp(x.op, x.dtype, (s,), x.arg)) for s in rep.src], None, None)

def lower_reduce(x: UOp, m: UOp) -> UOp:
  rop, axes = x.arg
  if m.arg[2] is not None and m.arg[2] is not rop: m = resolve(m)
  axis, bounds, op = m.arg
  shards = [_md(x, s.r(rop, axes)) for s in m.src]
  # NOTE: a reduce over the split axis leaves each device a part of the answer: a partial, resolved by whoever reads it
  if axis is not None and axis in axes: return multi(shards, None, None, rop)
  return multi(shards, axis, bounds, op)

def lower_per_shard(x: UOp, m: UOp) -> UOp:
  m = resolve(m)
  # NOTE: a clone (a tagged CONTIGUOUS) of a shard that is a buffer copies it, as Tensor.clone does on one device
  def one(s: UOp) -> UOp:
    if x.op is Ops.CONTIGUOUS and x.tag is not None and _is_base_view(s):
      return UOp(Ops.COPY, s.dtype, (s, _dev(s.device)), tag=x.tag)
    return UOp(x.op, x.dtype, (s,), x.arg, x.tag)
  return multi([_md(x, one(s)) for s in m.src], m.arg[0], m.arg[1])

def lower_copy(x: UOp, s: UOp, d: UOp) -> UOp | None:
  if not is_multi_device(d.arg):
    return gather(s, d.arg) if s.op is Ops.MULTI else None
  devs: tuple[str, ...] = d.arg
  axis, bounds = x.arg if x.arg is not None else (None, None)
  if s.op is Ops.MULTI: return reshard(s, devs, axis, bounds)
  if s.device is None or is_multi_device(s.device):
    raise MultiDeviceError(f"COPY onto {devs} of a {s.op} that is on no one device ({s.device})")
  shape = s.shape or ()
  return multi([copy_to(s.shrink(_box(shape, axis, bounds[j] if bounds else None)) if shape else s, dv)
                for j, dv in enumerate(devs)], axis, bounds)

def _check_targets(t: UOp) -> None:
  for ts in t.src:
    if not _is_target(ts):
      raise MultiDeviceError(f"ASSIGN to a view of a tensor on {devices_of(t)} that no device holds as a view of its "
                             f"own buffer ({ts.op} on {ts.device}): the view moves rows between devices; assign to the "
                             "whole tensor, or index it so that each device's rows stay whole")

def check_assign_target(u: UOp) -> None:
  """Raise MultiDeviceError (when the ASSIGN is made, not at the realize) unless every device can write its part of
  the view u of a tensor on several devices through a view of its own buffer."""
  if not is_multi_device(u.device) or u.op is Ops.MULTI: return
  lu = graph_rewrite_map(UOp.sink(u), pm_multi, name="multi: assign target")[u]
  if lu.op is Ops.MULTI: _check_targets(lu)

def lower_assign(x: UOp, t: UOp, v: UOp) -> UOp | None:
  if t.op is not Ops.MULTI:
    if v.op is Ops.MULTI:
      raise MultiDeviceError(f"ASSIGN of a tensor on {devices_of(v)} to one on {t.device}: move the value with .to()")
    return None
  devs = _check_devices(x, (t, v))
  axis, bounds, _ = t.arg
  _check_targets(t)
  vs = _to_layout(resolve(v), devs, axis, bounds)
  return multi([_md(x, UOp(Ops.ASSIGN, x.dtype, (ts, vv))) for ts, vv in zip(t.src, vs)], axis, bounds)

pm_multi = PatternMatcher([
  (UPat(Ops.CONST, src=(UPat(Ops.DEVICE, name="d"),), name="x"), lower_const),
  (UPat(Ops.BUFFER, src=(UPat(), UPat(Ops.DEVICE, name="d")), name="x"), reject_multi_buffer),
  (UPat(GroupOp.Elementwise, name="x"), lower_elementwise),
  (UPat(GroupOp.Movement, src=(UPat(Ops.MULTI, name="m"),), name="x"), lower_movement),
  (UPat(Ops.REDUCE_AXIS, src=(UPat(Ops.MULTI, name="m"),), name="x"), lower_reduce),
  (UPat((Ops.CONTIGUOUS, Ops.DETACH), src=(UPat(Ops.MULTI, name="m"),), name="x"), lower_per_shard),
  (UPat(Ops.COPY, src=(UPat(name="s"), UPat(Ops.DEVICE, name="d")), name="x"), lower_copy),
  (UPat(Ops.ASSIGN, src=(UPat(name="t"), UPat(name="v")), name="x"), lower_assign),
])

# ---- the driver ----

def has_multi(sink: UOp) -> bool:
  return any(u.op is Ops.MULTI or (u.op is Ops.DEVICE and is_multi_device(u.arg)) for u in sink.toposort())

def _is_base_view(u: UOp) -> bool:
  while u.op is Ops.RESHAPE: u = u.src[0]
  return u.op in (Ops.BUFFER, Ops.BUFFER_VIEW)

def _is_target(u: UOp) -> bool:
  """A node an ASSIGN can write through: a view (no expand) of a buffer, or of an earlier ASSIGN to one."""
  while u.op in GroupOp.Movement and u.op is not Ops.EXPAND or u.op is Ops.ASSIGN: u = u.src[0]
  return u.op in (Ops.BUFFER, Ops.BUFFER_VIEW)

def _is_view(u: UOp) -> bool:
  while u.op in GroupOp.Movement: u = u.src[0]
  return u.op in (Ops.BUFFER, Ops.BUFFER_VIEW)

def lower_multi(sink: UOp) -> tuple[UOp, dict[UOp, UOp]]:
  """The tensor graph `sink` with every multi-device node lowered: (the SINK of per-device outputs, {each source and
  each ASSIGN of sink that became a MULTI: that MULTI}). A graph without one comes back as it is."""
  if not has_multi(sink): return sink, {}
  lowered = graph_rewrite_map(sink, pm_multi, name="multi: per-device graphs")
  multis: dict[UOp, UOp] = {}
  outs: list[UOp] = []
  for u in dict.fromkeys((*sink.src, *[a for a in lowered if a.op is Ops.ASSIGN])):
    if (lu := lowered[u]).op is not Ops.MULTI:
      if u in sink.src: outs.append(lu)
      # NOTE: an output on one device computed from tensors on several (a gather) stands for the node it came from
      if lu is not u: multis[u] = lu
      continue
    multis[u] = lu = resolve(lu)
    # NOTE: every shard of an ASSIGN is an output, so each device writes even where no output reads its shard; a view of
    # a buffer is not a kernel by itself, so such a shard is stored (a shard that is its buffer is not)
    outs.extend(s.contiguous() if _is_view(s) and not _is_base_view(s) else s for s in lu.src)
  return UOp.sink(*dict.fromkeys(outs)), multis

def multi_becomes(multis: dict[UOp, UOp], becomes: dict[UOp, UOp]) -> dict[UOp, UOp]:
  """What each lowered MULTI's node stands for once the per-device schedule ran: the MULTI of what its shards became."""
  def shard(s: UOp) -> UOp:
    if (b := becomes.get(s)) is not None: return b
    if (b := becomes.get(s.contiguous())) is not None: return b
    if _is_base_view(s): return s
    raise RuntimeError(f"multi: a shard ({s.op}, shape {s.shape}) on {s.device} was not realized by the schedule")
  return {u: multi([shard(s) for s in m.src], m.arg[0], m.arg[1]) if m.op is Ops.MULTI else shard(m)
          for u, m in multis.items()}

def layout_of(u: UOp) -> tuple[tuple[str, ...], int | None, Bounds | None] | None:
  """(devices, axis, bounds) of tensor node u once lowered (a partial reads as replicated), None on one device."""
  if not is_multi_device(u.device): return None
  if u.op is not Ops.MULTI:
    # NOTE: the pass is pure; lowering u alone gives the layout its schedule will give it
    u = graph_rewrite_map(UOp.sink(u), pm_multi, name="multi: layout")[u]
  axis, bounds, op = u.arg
  return devices_of(u), (None if op is not None else axis), (None if op is not None else bounds)

__all__ = ["MultiDeviceError", "check_assign_target",
           "split_bounds", "check_layout", "local_shape", "lower_multi", "multi_becomes",
           "layout_of", "allreduce", "reduce_scatter", "reshard", "gather", "allreduce_variant", "ring_reduce_scatter",
           "ring_allgather", "RING_MIN_BYTES", "is_multi_device", "multi"]
