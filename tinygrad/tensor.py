"""Tensor: the lazy, numpy-like front end. Every op builds the tensor graph of docs/ir.md section 1; nothing runs until
realize(), numpy(), item() or tolist().

Contract with the scheduler: realize() hands a SINK of the tensors' graphs to `create_schedule_with_vars`, runs the
items, and swaps every tensor's graph for what `becomes` says it is now (a BUFFER reshaped to the tensor's shape), so
later ops read the buffer. `assign()` on a realized tensor builds `ASSIGN(buffer view, value)`.
"""
from __future__ import annotations
import math, weakref, functools, contextlib, itertools
from typing import Any, Callable, Iterator, NamedTuple, Sequence, cast
import numpy as np
from tinygrad.uop import Ops, GroupOp
from tinygrad.uop.ops import UOp
from tinygrad.uop.mathtraits import MathTrait
from tinygrad.uop.sint import sint, all_concrete, ssimplify, sym_prod, sym_eq, sym_le, vmax, vmin, bound_value
from tinygrad.uop.sint import render_shape, render_sint, variables, shape_eq
from tinygrad.dtype import DType, dtypes, least_upper_dtype, least_upper_float, sum_acc_dtype, to_np_dtype
from tinygrad.dtype import from_np_dtype, to_dtype, DTypeLike, PtrDType
from tinygrad.dtype import to_storage_np, from_storage_np, ConstType
from tinygrad.helpers import prod, argfix, make_tuple, ceildiv, flatten, all_int, WINO
from tinygrad.gradient import compute_gradient, custom_gradient, substitute
from tinygrad.schedule.multi import MultiDeviceError, check_assign_target, is_multi_device, multi, split_bounds
from tinygrad.schedule.multi import check_layout, layout_of

# ---- graph building helpers (UOp level) ----

def _device_uop(device: str | tuple[str, ...]) -> UOp: return UOp(Ops.DEVICE, arg=device)

def _const_uop(val: ConstType, dtype: DType, device: str, shape: tuple[sint, ...] = ()) -> UOp:
  """CONST with a DEVICE source (shape ()), broadcast to `shape` with reshape+expand as the tensor spec asks."""
  c = UOp(Ops.CONST, dtype, (_device_uop(device),), dtypes.as_const(val, dtype))
  return c.reshape((1,) * len(shape)).expand(shape) if shape else c

def _tensor_dtype(dtype: DTypeLike) -> DType:
  """The dtype a tensor holds, from a DType or its name (`"uint8"`): a scalar value dtype (not index, void, a vector or
  a pointer, which only exist inside kernels)."""
  dt = to_dtype(dtype)
  if isinstance(dt, PtrDType) or dt.count != 1 or dt in (dtypes.index, dtypes.void):
    raise DTypeError(f"a tensor cannot hold {dt}: use a scalar dtype such as dtypes.float32 or dtypes.int32")
  return dt

def _to_np_dtype(dtype: DType) -> type:
  """The numpy type of `Tensor.numpy()` for a tensor of `dtype` (float32 for bfloat16 and the fp8s)."""
  return np.float32 if dtype in dtypes.fp8s or dtype is dtypes.bfloat16 else to_np_dtype(dtype)
_from_np_dtype = from_np_dtype

def _canon_device(device: str | tuple[str, ...] | list[str] | None) -> str:
  from tinygrad.device import Device
  if isinstance(device, (tuple, list)): return cast(str, _canon_devices(device, "device"))
  return Device.DEFAULT if device is None else Device.canonicalize(device)

def _canon_devices(devices: Any, op: str) -> tuple[str, ...]:
  """A set of devices (for a tensor on several): a non-empty tuple of distinct device names, canonical."""
  from tinygrad.device import Device
  if isinstance(devices, str) or not isinstance(devices, (tuple, list)) or not devices:
    raise MultiDeviceError(f"{op}: devices must be a non-empty tuple of device names like ('CPU:0', 'CPU:1'), got "
                           f"{devices!r}")
  devs = tuple(Device.canonicalize(d) for d in devices)
  if len(set(devs)) != len(devs): raise MultiDeviceError(f"{op}: a device is named twice in {tuple(devices)}")
  return devs

def _buffer_uop(arr: np.ndarray, dtype: DType, device: str, raw: bool = False) -> UOp:
  """A BUFFER UOp holding a copy of `arr` (allocated and registered with tinygrad.device), reshaped to arr's shape.
  With raw, arr already holds the storage (bfloat16/fp8 bit patterns). On a set of devices: a MULTI of such a buffer
  on each device (replicated)."""
  from tinygrad.device import Buffer, set_buffer, next_unique
  if is_multi_device(device):
    return multi([_buffer_uop(arr, dtype, d, raw) for d in cast(tuple, device)], None, None)
  data = (np.ascontiguousarray(arr) if raw else np.ascontiguousarray(to_storage_np(arr, dtype))).reshape(-1)
  u = UOp(Ops.BUFFER, dtype, (UOp(Ops.UNIQUE, arg=next_unique()), _device_uop(device)), data.size)
  buf = Buffer(device, data.size, dtype).allocate()
  if data.size: buf.copyin(memoryview(data.view(np.uint8).tobytes()))
  set_buffer(u, buf)
  return u.reshape(arr.shape)

def _new_buffer_uop(size: int, dtype: DType, device: str, shape: tuple[int, ...] | None = None) -> UOp:
  """A new (unallocated) BUFFER of `size` elements (viewed in `shape` when given); on a set of devices a MULTI of one
  per device (replicated)."""
  from tinygrad.device import next_unique
  if is_multi_device(device):
    return multi([_new_buffer_uop(size, dtype, d, shape) for d in cast(tuple, device)], None, None)
  u = UOp(Ops.BUFFER, dtype, (UOp(Ops.UNIQUE, arg=next_unique()), _device_uop(device)), size)
  return u if shape is None else u.reshape(shape)

def base_buffer(u: UOp) -> UOp | None:
  """The BUFFER under a realized tensor's uop (BUFFER or RESHAPE(BUFFER); of a symbolic size, the RESHAPE of the
  prefix SHRINK(BUFFER, ((0, n),)) of a buffer of the maximum size), else None. A tensor on several devices is
  realized when its uop is a MULTI of such buffers: that MULTI."""
  top = u
  while u.op is Ops.RESHAPE: u = u.src[0]
  if u.op is Ops.MULTI:
    # NOTE: as on one device, a concrete view of shards of a symbolic size is read by a kernel
    if all_concrete(top.shape or ()) and not all_concrete(u.shape or ()): return None
    return u if all(base_buffer(s) is not None for s in u.src) else None
  # NOTE: a concrete view of such a prefix (its reshape to the bound sizes) is not the buffer: it is read by a kernel
  if u.op is Ops.SHRINK and len(u.arg) == 1 and _is_int(u.arg[0][0], 0) and isinstance(u.arg[0][1], UOp) and \
     not all_concrete(top.shape or ()):
    u = u.src[0]
  return u if u.op in (Ops.BUFFER, Ops.BUFFER_VIEW) else None

def _is_view_of_buffer(u: UOp) -> bool:
  while u.op in GroupOp.Movement: u = u.src[0]
  if u.op is Ops.MULTI: return all(_is_view_of_buffer(s) for s in u.src)
  return u.op in (Ops.BUFFER, Ops.BUFFER_VIEW)

def _contiguous_under_reshapes(u: UOp) -> UOp | None:
  """The CONTIGUOUS that u reshapes (through reshapes only, of concrete shapes), else None."""
  c = u
  while c.op is Ops.RESHAPE and all_concrete(c.shape): c = c.src[0]
  return c if c is not u and c.op is Ops.CONTIGUOUS and all_concrete(c.shape) else None

def _view_base(u: UOp) -> UOp:
  while u.op in GroupOp.Movement or u.op is Ops.ASSIGN: u = u.src[0]
  return u

def _is_writable_view(u: UOp) -> bool:
  """A view of a realized buffer where each element is one element of the buffer (no EXPAND): assigning to it writes
  through to the buffer, as a torch view does."""
  while u.op in GroupOp.Movement and u.op is not Ops.EXPAND: u = u.src[0]
  if u.op is Ops.MULTI: return all(_is_writable_view(s) for s in u.src)
  return u.op in (Ops.BUFFER, Ops.BUFFER_VIEW)

def broadcast_shape(*shapes: tuple[sint, ...], op: str = "broadcast") -> tuple[sint, ...]:
  """numpy broadcasting: align right, size-1 axes stretch; anything else is an error naming every shape and the op.
  A symbolic size broadcasts only with 1 and with sizes provably equal to it."""
  nd = max((len(s) for s in shapes), default=0)
  padded = [(1,) * (nd - len(s)) + tuple(s) for s in shapes]
  out: list[sint] = []
  for sizes in zip(*padded):
    big: list[sint] = []
    for sz in sizes:
      if (isinstance(sz, UOp) or sz != 1) and not any(sym_eq(sz, b) for b in big): big.append(sz)
    if len(big) > 1:
      shown = " and ".join(render_shape(s) for s in shapes)
      raise ShapeMismatchError(f"{op}: shapes {shown} do not broadcast (numpy rules"
                               f"{'; symbolic sizes must be provably equal' if not all_concrete(big) else ''})")
    out.append(big[0] if big else 1)
  return tuple(out)

class ArgumentError(RuntimeError, ValueError):
  """An argument value an op does not take (a bad mode, size, step or combination): a RuntimeError, as torch raises
  for invalid arguments, and a ValueError, as numpy and Python raise."""

class ShapeMismatchError(ArgumentError):
  """Operand shapes that do not fit an op: a RuntimeError, as torch raises, and a ValueError, as numpy does."""

class DTypeError(NotImplementedError, TypeError):
  """An op given a dtype it is not defined for (bitwise ops on floats, a float index): torch's NotImplementedError (a
  RuntimeError), and the TypeError numpy and Python raise."""

class UnsupportedError(NotImplementedError, ValueError):
  """A mode or an input form an op does not implement (an unknown pad mode, interpolate of a 2-d input): torch's
  NotImplementedError (a RuntimeError), and a ValueError."""

class ValuesIndices(NamedTuple):
  """(values, indices) of a reduction along one axis that also says where (torch's torch.return_types.max, sort, ...);
  the indices are int32."""
  values: Tensor
  indices: Tensor

_AXIS_DEFAULT: Any = object()

def _axis_or_dim(axis: Any, dim: Any, op: str, default: Any = None) -> Any:
  """tinygrad's `axis` or torch's `dim` keyword, whichever was given (both is an error)."""
  if dim is None: return default if axis is _AXIS_DEFAULT else axis
  if axis is not _AXIS_DEFAULT and axis is not None: raise ArgumentError(f"{op}: give axis or dim, not both")
  return dim

def _check_size(shape: tuple[Any, ...], dtype: DType, op: str) -> None:
  """Refuse, where it is made, a shape whose byte size (so also its element count) int64 cannot hold: every index and
  loop bound of its kernels would wrap. A symbolic size counts at its maximum, where its buffer is allocated."""
  shape = tuple(vmax(s) if isinstance(s, UOp) else s for s in shape)
  if not all(isinstance(s, int) for s in shape): return
  if (nbytes := prod(shape) * dtype.itemsize) > 2**63 - 1:
    raise ShapeMismatchError(f"{op}: shape {shape} holds {prod(shape)} elements of {dtype} ({nbytes} bytes), more than "
                             "2**63 - 1: an int64 index cannot address it")

def _zero_of(dt: DType) -> ConstType: return False if dt is dtypes.bool else 0

def _bound_or(x: sint) -> Any: return v if (v := bound_value(x)) is not None else render_sint(x)

def _size_ok(x: Any) -> bool:
  """A size a shape may hold: an int >= 0, or an index UOp whose variables are all bound and whose least value >= 0."""
  if isinstance(x, UOp):
    return x.dtype is dtypes.index and x.vmin >= 0 and all(v.op is Ops.BIND for v in variables(x))
  return isinstance(x, int) and not isinstance(x, bool) and x >= 0

def _is_int(x: Any, v: int) -> bool: return not isinstance(x, UOp) and x == v
def _int(x: sint, op: str) -> int:
  """A size an op needs concrete (a loop count, a kernel size, a split on the host); a symbolic one raises."""
  if not isinstance(x, UOp): return x
  raise ArgumentError(f"{op} needs a concrete size, got the symbolic size {render_sint(x)} (docs/symbolic.md)")

def _sym_arg(x: Any, op: str) -> sint:
  """A size or offset argument: an int, or an index UOp of bound variables (simplified)."""
  if not isinstance(x, UOp): return int(x)
  if x.dtype is not dtypes.index or any(v.op is not Ops.BIND for v in variables(x)):
    raise ArgumentError(f"{op}: a symbolic argument must be an index UOp of bound variables (Variable(...).bind(n)), "
                        f"got {x!r}")
  return ssimplify(x)

def _max_shape(shape: tuple[sint, ...]) -> tuple[int, ...]: return tuple(vmax(x) for x in shape)
def _shrink_to(t: Tensor, shape: tuple[sint, ...]) -> Tensor:
  """A tensor of the maximum of a symbolic shape, viewed at that shape (its prefix along every axis)."""
  return t if all_concrete(shape) else t._new(t.uop.shrink(tuple((0, x) for x in shape)))

# ops Tensor.alu computes in a float dtype (ints and bools promote first, as torch)
_FLOAT_MATH = {Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIPROCAL}
_OP_NAMES = {Ops.ADD: "add", Ops.MUL: "mul", Ops.CMPLT: "<", Ops.CMPNE: "!=", Ops.CMPEQ: "==", Ops.AND: "&",
             Ops.OR: "|", Ops.XOR: "^", Ops.SHL: "<<", Ops.SHR: ">>", Ops.MAX: "maximum",
             Ops.IDIV: "idiv", Ops.MOD: "mod"}

def _check_alu_dtype(op: Ops, dt: DType, name: str) -> None:
  """Bit ops need ints or bools, shifts and C division ints: anything else is a TypeError (as torch), before a graph
  the spec rejects is built."""
  if op in (Ops.AND, Ops.OR, Ops.XOR) and not (dtypes.is_int(dt) or dt is dtypes.bool):
    raise DTypeError(f"{name}: bitwise ops need int or bool tensors, got {dt}")
  if op in (Ops.SHL, Ops.SHR, Ops.IDIV, Ops.MOD) and not dtypes.is_int(dt):
    raise DTypeError(f"{name}: needs int tensors, got {dt}")

# ---- constants of the composed math ops ----
_LN2 = math.log(2)
_TAN_PI_8 = math.tan(math.pi / 8)
_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772, 1.0507009873554805
# NOTE: least-squares fits on Chebyshev nodes (made with numpy against math.atan / math.erf / math.erfc):
# atan(t)/t in t*t on [0, tan(pi/8)]; erf(x)/x in x*x on [0, 1]; erfc(x)*exp(x*x) in t = 1/(1 + x/2) on [1, 6]
_ATAN_POLY = (0.9999999999913558, -0.3333333242537805, 0.19999902365205088, -0.14282002668352278, 0.11044824122188332,
              -0.08477533576867552, 0.04747229696866687)
_ERF_POLY = (1.1283791670822982, -0.37612638590411307, 0.11283784110779607, -0.026865517350975747,
             0.005221261158396359, -0.0008487261862935355, 0.0001128812581853663, -9.728251461480198e-06)
_ERFC_POLY = (9.386284789889961e-06, 0.281850338338329, 0.2849319212959384, 0.22753175865074762, 0.26132097787777253,
              -0.16807663510999177, 0.49690842598042834, -0.6970036089643497, 0.3979778414274138,
              -0.0854783846759463)
# NOTE: scaled_dot_product_attention over at least SDPA_ROWS_MIN query rows and keys runs by blocks of query rows
# (Tensor._sdpa_by_rows): SDPA_ROWS_BLOCK rows from 2 * SDPA_ROWS_MIN rows on, half as many below. Measured on the
# AVX2 host (2 threads, 12 heads of 64, causal, TinyJit), whole matrix -> by rows: forward 512 rows 12.9 -> 8.8 ms,
# 1024 52.7 -> 32.2, 2048 217 -> 126; 256 rows 3.2 -> 3.7 (by 128), so shorter stays whole
SDPA_ROWS_MIN, SDPA_ROWS_BLOCK = 512, 256
_SIGNED_OF_SIZE = {1: dtypes.int8, 2: dtypes.int16, 4: dtypes.int32, 8: dtypes.int64}

def _with_gradient(out: Tensor, inputs: tuple[Tensor, ...],
                   rule: Callable[..., tuple[Tensor | None, ...]]) -> Tensor:
  """out, differentiated by rule(upstream, out, *inputs) (one gradient per input, or None) instead of through the
  graph that computes it (see gradient.custom_gradient)."""
  def uop_rule(ctx: UOp, ret: UOp, srcs: tuple[UOp, ...]) -> tuple[UOp | None, ...]:
    return tuple(None if g is None else g.uop for g in rule(Tensor(ctx), Tensor(ret), *(Tensor(s) for s in srcs)))
  custom_gradient(out.uop, tuple(t.uop for t in inputs), uop_rule)
  # NOTE: out may come from its inputs through ops that do not pass requires_grad on (a bitcast, an int compare); marked
  # as their result, it keeps its lazy graph (and so this rule) when it is realized before the gradient is asked
  if not Tensor.no_grad and any(t.requires_grad for t in inputs): out.requires_grad = out._nonleaf = True
  return out

# The weight gradient of an embedding is one-hot^T @ dY: with the one-hot's compare fused into that matmul (its rows the
# vocabulary, each reduce step comparing a token against 8 of them) the LLVM path ran it as scalar code; stored first
# (vocab x tokens, float), it is a plain matmul. Measured (2 threads, AMD Zen 5, LLVM): a 2000 x 256 table's gradient
# over 16 x 32 tokens 29.6 ms fused, 1.3 ms stored. Up to this many one-hot elements (64 MiB of float32); a bigger
# one-hot (GPT-2's 50257-token vocabulary over 1024 tokens: 206 MB) stays fused
EMBEDDING_STORED_ONE_HOT_MAX = 1 << 24
# advanced indexing (x[idx], x[i, j]) differentiates as segment sums (Tensor._segment_sums) where its select's gradient
# (a compare of each index with every position of the indexed axes, for each element of the others) is over this many
# compares and the other axes are not one element. Measured (LLVM path, 2 threads, TinyJit, AMD Zen 2), forward and
# gradient, select -> segment sums: a (5000, 256) table over 1024 indices 316 -> 2.0 ms (torch 1.2)
ADVANCED_INDEX_SEGMENT_WORK = 1 << 24
# segment sums (Tensor._segment_sums) find the ends of the runs by a compare of every index with every end up to this
# many compares, and above it by a binary search of the sorted indices (Tensor.searchsorted: log2(indices) steps, a
# kernel each). Measured (LLVM path, 2 threads, AMD Zen 4, TinyJit; the whole segment sums, ends x indices, rows of R),
# compares -> search: 5000 x 1024 (R 64) 0.77 -> 0.95 ms, 32000 x 512 (256) 3.39 -> 3.83; and two sorts of the indices
# and the ends together (the search's predecessor above 2^26 compares) -> search: 50257 x 2048 (768) 26.2 -> 22.3,
# 50257 x 8192 (768) 49.7 -> 37.3, 100000 x 4096 (64) 11.7 -> 5.6
SEGMENT_ENDS_MAX_COMPARES = 1 << 24
# a sum or mean scatter whose index is one 1-d index broadcast over the other axes (_shared_scatter_index), and an
# accumulating index_put of rows (_rows_index), run as segment sums above this many one-hot compares (index elements x
# targets). Measured (LLVM path, 2 threads, AMD Zen 4, TinyJit; scatter_add of E rows of D into N and its gradient),
# one-hot -> segment sums: N 64, E 256, D 16 (2^18) 0.115 -> 0.196 ms; 256, 256, 8 (2^19) 0.126 -> 0.101; 128, 512,
# 16 (2^20) 0.229 -> 0.148; 256, 512, 32 (2^22) 1.04 -> 0.22; 1000, 2000, 64 19.9 -> 1.14; 2000, 8000, 64 156 -> 5.3
# (torch 0.65)
SCATTER_SEGMENT_WORK = 1 << 19
# on a CPU device, a sum of this many elements or more to one element runs as FULL_SUM_PARTS partial sums over rows
# padded to a multiple of 64, stored, then their sum (Tensor._reduce). Measured (LLVM path, 2 threads, TinyJit, AMD
# Zen 2), one kernel -> two (torch): 2^20 0.146 -> 0.164 ms (0.074), (1000, 1001) 0.31 -> 0.16 (0.07), 2^21 0.233 ->
# 0.218 (0.128), 2^22 0.84 -> 0.44 (0.36), (2001, 2003) 3.85 -> 0.35 (0.30), 2^24 4.2 -> 2.3 (2.6), 8192^2 15.6 -> 6.1
# (8.2)
FULL_SUM_SPLIT_MIN, FULL_SUM_PARTS = 1 << 21, 64

# Winograd's minimal filtering F(4, 3) (Lavin & Gray): 4 outputs of a 3-tap correlation from a 6-wide tile,
# y = AT @ ((G @ g) * (BT @ d)), with the interpolation points 0, 1, -1, 2, -2 and infinity
WINO_MIN_MACS, WINO_MIN_PIXELS, WINO_MIN_CHANNELS = 1 << 27, 512, 16  # WINO=2's rule (Tensor._winograd_pays)
# a conv's input gradient through its windows (up to 9 taps, more than 1) stored pixels-first (_windows_gradient)
CONV_GRAD_PIXELS_FIRST = True
# a direct conv over at most this many output pixels takes its weight gradient as a matmul of its windows stored
# pixels-first (Tensor._im2col_weight_gradient, _conv_gradients)
CONV_IM2COL_WGRAD_PIXELS = 16
# a direct conv on the CPU's LLVM path reads its input padded and stored, not through the padding's gates
# (Tensor._padding_stored)
CONV_PADDING_STORED, CONV_PADDING_STORED_MIN_MACS = True, 1 << 20
# an inclusive scan (cumsum, cumprod, cummax, logcumsumexp) along an axis of n is one window reduce, every element
# reducing the n up to it (n*n work), up to this n or where the whole window's work is this small; else a scan inside
# blocks of a power of two about sqrt(n) combined with a scan of the blocks' totals. Measured (LLVM path, 2 threads,
# TinyJit, AMD Zen 2): cumsum over the last axis of (1024, n) as a window / blocked, n = 16: 0.13 / 0.09 ms, 64: 0.61 /
# 0.15, 256: 7.1 / 0.48, 1024: 97 / 0.62 (torch 0.59), 2048: 423 / 1.09; of (1, n), n = 64: 0.073 / 0.084, 1024: 0.18
# / 0.10. Blocks of sqrt(n) rounded up to an integer instead (23 for 512, 46 for 2048): 3.5 and 10.7 ms
SCAN_WINDOW_MAX, SCAN_WINDOW_WORK = 8, 1 << 16

def _scan_by_window(shape: tuple[sint, ...], n: int) -> bool:
  return n <= SCAN_WINDOW_MAX or (all_int(shape) and prod(cast(tuple[int, ...], shape)) * n <= SCAN_WINDOW_WORK)

# topk (k of n) ranks blocks of at least this many elements, each of 4k or more (a power of two), where n holds two or
# more of them. Measured (LLVM path, 2 threads, TinyJit, AMD Zen 2; the kernels' time, torch in brackets): (64, 4096)
# with k = 8 ranked whole 176 ms, by blocks of 32 3.9 (0.26), of 64 4.9, of 128 8.3; (1, 50257) k = 40 565 -> 3.1 ms
# (0.12); (8, 32000) k = 50 1834 -> 20 (0.29); blocks of 2k the same, of 8k 1.5x slower
TOPK_BLOCK_MIN = 32

def _topk_block(k: int) -> int: return max(TOPK_BLOCK_MIN, 1 << max(4 * k - 1, 0).bit_length())

# sort and argsort (and kthvalue, median) of elements of at most 32 bits rank every element against its whole row in
# one reduce where rows * n * n is at most SORT_RANK_MAX_WORK, and run a bitonic network over packed keys above it
# (Tensor._bitonic_sort: n log2(n)**2 / 4 compare-exchanges in log2(n) * (log2(n) + 1) / 2 kernels). Measured (LLVM
# path, 2 threads, TinyJit, AMD Zen 2), rank -> network: (64, 32) 0.17 -> 0.18 ms, (1, 512) 0.24 -> 0.33, (64, 64)
# 0.28 -> 0.24, (8, 256) 0.40 -> 0.31, (1, 1024) 0.66 -> 0.41, (4096, 32) 4.5 -> 0.72, (1, 4096) 12.1 -> 0.63 (torch
# 0.25), (64, 1024) 42.3 -> 1.96 (torch 1.74)
SORT_RANK_MAX_WORK = 1 << 19
_U32 = 0xFFFFFFFF

def _sorts_by_keys(dtype: DType) -> bool:
  """A dtype whose values (and a position) pack into Tensor._sort_keys's uint64 keys."""
  return dtype.itemsize <= 4 and (dtypes.is_float(dtype) or dtypes.is_int(dtype) or dtype is dtypes.bool)

def _scan_block(n: int) -> int:
  """A blocked scan's block: the power of two at or above sqrt(n)."""
  return 1 << math.isqrt(n - 1).bit_length()

_WINO_BT = ((4, 0, -5, 0, 1, 0), (0, -4, -4, 1, 1, 0), (0, 4, -4, -1, 1, 0), (0, -2, -1, 2, 1, 0),
            (0, 2, -1, -2, 1, 0), (0, 4, 0, -5, 0, 1))
_WINO_G = ((1 / 4, 0, 0), (-1 / 6, -1 / 6, -1 / 6), (-1 / 6, 1 / 6, -1 / 6), (1 / 24, 1 / 12, 1 / 6),
           (1 / 24, -1 / 12, 1 / 6), (0, 0, 1))
_WINO_AT = ((1, 1, 1, 1, 1, 0), (0, 1, -1, 2, -2, 0), (0, 1, 1, 4, 4, 0), (0, 1, -1, 8, -8, 1))

def _exact_products_in(dt: DType, acc: DType) -> bool:
  """Whether products of dt are taken in the accumulator acc: half/bfloat16/fp8 products are exact in float32 (as torch
  and the tensor cores compute them), where multiplying in dt first would round every one before the sum."""
  return dtypes.is_float(dt) and acc.itemsize > dt.itemsize

def _winograd_kron(m: tuple[tuple[float, ...], ...], n: int) -> np.ndarray:
  """The n-fold Kronecker product of the matrix m: m applied along each of n axes at once, as one matrix."""
  k = np.array(m, dtype=np.float64)
  out: np.ndarray = k
  for _ in range(n - 1): out = np.kron(out, k)
  return out.astype(np.float32)

# (matrix, n, transpose, device) -> its Kronecker power as a Tensor: one buffer per constant, so that the same transform
# of the same tensor is the same graph (the weight gradient's input transform of x is the forward's, computed once)
_winograd_consts: dict[tuple[Any, ...], Tensor] = {}

def _winograd_lmat(t: Tensor, m: tuple[tuple[float, ...], ...], n: int, transpose: bool = False) -> Tensor:
  """K @ t along t's first axis, with K the n-fold Kronecker product of m (or its transpose): a matmul-shaped reduce
  whose constant operand is broadcast along every other axis of t, so its rows reuse t's vector loads."""
  key = (m, n, transpose, t.device)
  if (kt := _winograd_consts.get(key)) is None:
    k = _winograd_kron(m, n)
    _winograd_consts[key] = kt = Tensor(np.ascontiguousarray(k.T) if transpose else k, device=t.device)
  rest = t.shape[1:]
  km = kt.reshape(*kt.shape, *([1] * len(rest)))
  return (km * t.reshape(1, *t.shape)).sum(1)

def _winograd_layout(x: Tensor, nsp: int, tail: list[tuple[int, int]]) -> Tensor:
  """(N, C, *spatial) -> (N, *spatial, C) in float32, stored (the channels contiguous: the transforms' lanes), then
  padded (or cropped, where negative) by tail on the spatial axes."""
  xh = x.cast(dtypes.float32).permute(0, *range(2, 2 + nsp), 1).contiguous()
  return xh.pad([(0, 0)] + tail + [(0, 0)])

def _winograd_input(x: Tensor, nsp: int, pads: list[tuple[int, int]], tiles: tuple[int, ...], groups: int) -> Tensor:
  """x (N, Cin, *spatial), padded by pads, as Winograd's transformed tiles: (6**nsp, groups, N * prod(tiles),
  Cin/groups), the tile position outermost, so that the products are one batched matmul per position and group."""
  bs, cin, sp = x.shape[0], x.shape[1], x.int_shape("conv2d")[2:]
  xh = _winograd_layout(x, nsp, [(b, 4 * n + 2 - s - b) for n, s, (b, _) in zip(tiles, sp, pads)])
  # NOTE: the overlapping 6-wide tiles every 4 (their last 2 are the next one's first), tile position outermost
  d = xh.permute(0, nsp + 1, *range(1, nsp + 1))._pool((6,) * nsp, 4, op="conv2d")       # (N, Cin, *tiles, *6)
  d = d.permute(*(2 + nsp + k for k in range(nsp)), 0, *(2 + k for k in range(nsp)), 1)
  d = d.reshape(6 ** nsp, bs * prod(tiles), cin)
  v = _winograd_lmat(d, _WINO_BT, nsp).reshape(6 ** nsp, bs * prod(tiles), groups, cin // groups)
  return v.permute(0, 2, 1, 3).contiguous()

def _winograd_output_tiles(dy: Tensor, nsp: int, tiles: tuple[int, ...]) -> Tensor:
  """dy (N, Cout, *out) as 4-wide tiles: (4**nsp, N * prod(tiles), Cout), the position in the tile outermost."""
  bs, cout, osp = dy.shape[0], dy.shape[1], dy.int_shape("conv2d")[2:]
  dh = _winograd_layout(dy, nsp, [(0, 4 * n - o) for n, o in zip(tiles, osp)])
  dh = dh.reshape(bs, *(a for n in tiles for a in (n, 4)), cout)
  return dh.permute(*(2 + 2 * k for k in range(nsp)), 0, *(1 + 2 * k for k in range(nsp)), 2 * nsp + 1) \
           .reshape(4 ** nsp, bs * prod(tiles), cout)

def _winograd_forward(x: Tensor, weight: Tensor, groups: int, pads: list[tuple[int, int]]) -> Tensor:
  """Stride-1, undilated correlation of x (N, Cin, *spatial), padded by pads, with weight (Cout, Cin/groups, 3, ...)
  by F(4, 3) on every spatial axis, in float32. Every step is matmul-shaped: the input transform (36 x 36 constants
  @ the tiles, in 2-D), the filter transform (36 x 9 @ the filters), the products (per tile position and group, tiles
  x Cin/groups @ Cin/groups x Cout/groups) and the output transform (16 x 36 @ the products)."""
  nsp, bs = weight.ndim - 2, x.shape[0]
  cout, cin_g = weight.int_shape("conv2d")[:2]
  out_sp = tuple(s + b + a - 2 for s, (b, a) in zip(x.int_shape("conv2d")[2:], pads))
  tiles = tuple(ceildiv(o, 4) for o in out_sp)
  v = _winograd_input(x, nsp, pads, tiles, groups)                                        # (P, g, T, cin_g)
  # NOTE: the filters are stored taps outermost, output channels contiguous first: read in place, the transform's lanes
  # (output channels) gathered 9 x Cin apart. Measured alone (AVX2, 2 threads, 512 x 512 x 3 x 3): 9.2 ms in place,
  # 5.8 with the copy
  wk = weight.cast(dtypes.float32).reshape(groups, cout // groups, cin_g, 3 ** nsp).permute(3, 0, 2, 1).contiguous()
  u = _winograd_lmat(wk, _WINO_G, nsp).contiguous()                                         # (P, g, cin_g, cout_g)
  m = (v @ u).permute(0, 2, 1, 3).reshape(6 ** nsp, bs * prod(tiles), cout)                  # (P, T, Cout)
  y = _winograd_lmat(m, _WINO_AT, nsp).contiguous().reshape(*(4,) * nsp, bs, *tiles, cout)
  # NOTE: each tile axis interleaved with its 4 outputs, then the padding tiles' extra outputs cut
  y = y.permute(nsp, 2 * nsp + 1, *(a for k in range(nsp) for a in (nsp + 1 + k, k)))
  # NOTE: stored in (N, C, *spatial) order: a consumer reading the tiles' order instead (a batchnorm's per-channel
  # sums, a max-pool's gradient) walked it with strides
  y = y.reshape(bs, cout, *(4 * n for n in tiles)).shrink(((0, bs), (0, cout), *((0, o) for o in out_sp)))
  return y.contiguous()

def _winograd_weight_grad(x: Tensor, dy: Tensor, wshape: tuple[int, ...], groups: int,
                          pads: list[tuple[int, int]]) -> Tensor:
  """The weight gradient of _winograd_forward, in float32: y = AT (U * V) A per tile, so dU = sum over the tiles of
  V * (A dY AT), one matmul per tile position and group (Cin/groups x tiles @ tiles x Cout/groups), and dW = GT dU G."""
  nsp, cout = len(wshape) - 2, wshape[0]
  tiles = tuple(ceildiv(o, 4) for o in dy.int_shape("conv2d")[2:])
  v = _winograd_input(x, nsp, pads, tiles, groups)                                          # (P, g, T, cin_g)
  dm = _winograd_lmat(_winograd_output_tiles(dy, nsp, tiles), _WINO_AT, nsp, transpose=True)   # (P, T, Cout)
  dm = dm.reshape(6 ** nsp, dm.shape[1], groups, cout // groups).permute(0, 2, 1, 3)       # (P, g, T, cout_g)
  du = v.transpose(-1, -2) @ dm                                                               # (P, g, cin_g, cout_g)
  dw = _winograd_lmat(du, _WINO_G, nsp, transpose=True)                                     # (3**nsp, g, cin_g, cout_g)
  return dw.permute(1, 3, 2, 0).reshape(wshape)

def _transposed_filters(w: Tensor, groups: int) -> Tensor:
  """Filters (A, B/groups, *k) as those of the transposed convolution, (B, A/groups, *k) spatially flipped: a conv's
  input gradient, conv_transpose2d."""
  a, bg, k = w.shape[0], w.shape[1], w.shape[2:]
  w = w.reshape(groups, a // groups, bg, *k).transpose(1, 2).reshape(groups * bg, a // groups, *k)
  return w.flip(tuple(range(2, w.ndim)))

def _winograd_conv(x: Tensor, weight: Tensor, groups: int, pads: list[tuple[int, int]]) -> Tensor:
  """_winograd_forward in x's dtype, differentiated by Winograd too: the input gradient is the correlation of dy
  (padded by 2 - pads) with the flipped, transposed filters, itself by F(4, 3) (no fold of overlapping tiles), the
  weight gradient _winograd_weight_grad."""
  out = _winograd_forward(x, weight, groups, pads).cast(x.dtype)
  def rule(dy: Tensor, _out: Tensor, x_: Tensor, w_: Tensor) -> tuple[Tensor, Tensor]:
    dx = _winograd_conv(dy, _transposed_filters(w_, groups), groups, [(2 - b, 2 - a) for b, a in pads]).cast(x_.dtype)
    return dx, _winograd_weight_grad(x_, dy, w_.int_shape("conv2d"), groups, pads).cast(w_.dtype)
  return _with_gradient(out, (x, weight), rule)

def _placed_by_phase(t: Tensor, lead: int, offs: tuple[int, ...], s_: tuple[int, ...], d_: tuple[int, ...],
                     befores: Sequence[int], outs: Sequence[int], qs: Sequence[int]) -> Tensor:
  """The values t (..., *o) of windows' tap offs placed at the input positions they read, each spatial axis of the input
  split into (i // stride, i % stride) with q = ceil(i / stride): window o of tap k reads i = o * s + k * d - before =
  s * (o + sh) + r, so t's axis is shifted by sh at phase r, by pads alone (no modular index math): (..., q1, s1,
  ...)"""
  for j, (k, s, d, b, o, q) in enumerate(zip(offs, s_, d_, befores, outs, qs)):
    ax = lead + 2 * j
    sh, r = divmod(k * d - b, s)
    t = t.pad([(0, 0)] * ax + [(sh, q - o - sh)] + [(0, 0)] * (t.ndim - ax - 1))
    t = t.unsqueeze(ax + 1).pad([(0, 0)] * (ax + 1) + [(r, s - 1 - r)] + [(0, 0)] * (t.ndim - ax - 1))
  return t

def _max_pool_gradient(g: Tensor, ret: Tensor, x: Tensor, k_: tuple[int, ...], s_: tuple[int, ...],
                       d_: tuple[int, ...], full: list[tuple[int, int]]) -> Tensor:
  """The gradient of a max pool (ret = win.max over its windows) as the reduce's rule gives it, each window's g shared
  equally by the positions holding its maximum (or its nans), gathered at each input position rather than folded back.
  Each spatial axis of x is split into (i // stride, i % stride): the windows reading an input position with kernel
  offset k then have its phase i % stride fixed, and are a shift of the output's axis, so for each offset the windows'
  maximum and share of g are placed by pads alone (no modular index math) and compared with x there. One elementwise
  kernel over x with the phases outermost (each phase's positions contiguous: vector lanes) and a copy interleaving
  them; autograd through the windows stored every window's candidates (9x the output for 3x3) and folded them back in
  a reduce. Measured alone (AVX2, 2 threads, 3x3 stride 2 over 32x64x64x64): 46.8 ms -> 34.6 (the phases innermost,
  their stores 2 apart: 43.8); ResNet-18's step at batch 32 over 128x128 1006.6 -> 980.0 ms."""
  n = len(k_)
  lead = x.ndim - n
  sizes, outs = x.int_shape("max_pool2d", n), ret.int_shape("max_pool2d", n)
  # NOTE: the maxima of each window counted tap by tap, each tap a strided view of x (padded with -inf), not from the
  # forward's windows: one view shared by the forward's max and this count was stored whole by the scheduler (9 values
  # an input position for 3x3, then read by both)
  xp = x.pad([(0, 0)] * lead + full, value=-math.inf)
  def tap(offs: tuple[int, ...]) -> Tensor:
    t = xp
    for j, (k, s, d, o) in enumerate(zip(offs, s_, d_, outs)):
      ax, start = lead + j, k * d
      after: list[tuple[int, int] | None] = [None] * (t.ndim - ax - 1)
      if (more := start + s * o - t.shape[ax]) > 0:
        t = t.pad([(0, 0)] * ax + [(0, more)] + [(0, 0)] * len(after), value=-math.inf)
      before: list[tuple[int, int] | None] = [None] * ax
      t = t.shrink(before + [(start, start + s * o)] + after)
      t = t.reshape(*t.shape[:ax], o, s, *t.shape[ax + 1:]).shrink(before + [None, (0, 1)] + after)
      t = t.reshape(*t.shape[:ax], o, *t.shape[ax + 2:])
    return t
  count: Tensor | None = None
  for offs in itertools.product(*(range(k) for k in k_)):
    v = tap(offs)
    h = ((v == ret) | ((v != v) & (ret != ret))).cast(g.dtype)
    count = h if count is None else count + h
  assert count is not None
  # NOTE: stored: each of the k^2 placed views below reads it (fused, the count's k^2 taps were recomputed k^2 times)
  share = (g / count).contiguous()
  qs = [ceildiv(i, s) for i, s in zip(sizes, s_)]
  split = (*x.shape[:lead], *flatten((q, s) for q, s in zip(qs, s_)))
  xq = x.pad([(0, 0)] * lead + [(0, q * s - i) for q, s, i in zip(qs, s_, sizes)]).reshape(split)
  befores = [b for b, _ in full]
  def placed(t: Tensor, offs: tuple[int, ...]) -> Tensor:
    return _placed_by_phase(t, lead, offs, s_, d_, befores, outs, qs)
  # NOTE: computed with the phases outermost (each phase's positions contiguous), then interleaved by a copy
  pm = list(range(lead)) + [lead + 2 * j + 1 for j in range(n)] + [lead + 2 * j for j in range(n)]
  inv = [pm.index(a) for a in range(len(pm))]
  dx: Tensor | None = None
  xp = xq.permute(pm)
  for offs in itertools.product(*(range(k) for k in k_)):
    m, h = placed(ret, offs).permute(pm), placed(share, offs).permute(pm)
    term = ((xp == m) | ((xp != xp) & (m != m))).where(h, 0)
    dx = term if dx is None else dx + term
  assert dx is not None
  dx = dx.contiguous().permute(inv).reshape(*x.shape[:lead], *(q * s for q, s in zip(qs, s_)))
  return dx.shrink(tuple((0, v) for v in x.shape[:lead]) + tuple((0, i) for i in sizes))

def _windows_gradient(g: Tensor, sizes: list[int], k_: tuple[int, ...], s_: tuple[int, ...],
                      d_: tuple[int, ...], pixels_first: bool = False) -> Tensor:
  """The gradient of sliding windows, strided or not (Tensor._pool: (..., *i) -> (..., *o, *k)), against their upstream
  gradient g, gathered by phases rather than folded back: each spatial axis of the input is split into (i // stride, i %
  stride), and the window element at output o and tap k, which reads i = o * s + k * d, lands at phase (k * d) % s,
  shifted by (k * d) // s. So every tap's slice of g is placed by pads alone (no modular index math), and the taps of a
  phase are summed there: one elementwise kernel over the input. Autograd through the windows' movement ops folded them
  back in a reduce with division and modulo in its index (ResNet-18's 3x3 stride-2 convs' input gradient at 2-7
  GFLOPS).

  pixels_first (a conv's windows, g = (N, C, *o, *k) the sum over output channels of dy times the filters): g is stored
  as (N, *o, C x taps) first, so that its kernel is a matmul, dy^T (N x pixels, Cout) @ the filters (Cout, C x taps),
  whose lanes and store both run along the filters' contiguous rows. In g's own order the channel lanes read the filters
  and stored 9 elements apart (PACK copying the panel), and each (pixel, tap) was a matmul of its own."""
  n = len(k_)
  lead = g.ndim - 2 * n
  if pixels_first:
    # NOTE: measured (2 threads, LLVM, AMD Zen 5; both versions built in one process and alternated): ResNet-18 b8
    # 64x64's step 41.5 -> 38.5 ms (its 3x3 convs' products 11.5 -> 8.3 ms, the 512-channel ones over 2x2 pixels 3.4 ->
    # 3.9 of it); at b32 128x128 its stride-2 3x3 convs' products (the others are Winograd's) 13.1 -> 9.2 ms. A 3x3
    # conv's forward and both gradients at batch 8: 512 channels over 2x2 pixels 2.89 -> 3.01 ms, 256 over 4x4 1.39
    # -> 1.01, 128 over 8x8 1.09 -> 0.85, 64 over 16x16 1.05 -> 0.90; with AVX2's renderer 0.94, 0.79, 0.94, 0.94x
    perm = [0, *range(lead, lead + n), *range(1, lead), *range(lead + n, lead + 2 * n)]
    gp = g.permute(perm)
    gp = gp.reshape(*gp.shape[:1 + n], -1).contiguous().reshape(gp.shape)
    g = gp.permute([perm.index(i) for i in range(len(perm))])
  outs = list(g.int_shape("pool")[lead:lead + n])
  qs = [ceildiv(i, s) for i, s in zip(sizes, s_)]
  dx: Tensor | None = None
  for offs in itertools.product(*(range(k) for k in k_)):
    t = g.shrink([None] * (lead + n) + [(k, k + 1) for k in offs]).reshape(*g.shape[:lead + n])
    t = _placed_by_phase(t, lead, offs, s_, d_, [0] * n, outs, qs)
    dx = t if dx is None else dx + t
  assert dx is not None
  # NOTE: stored, as autograd's fold (a reduce) was: fused, a batchnorm's backward after it recomputed the k^2 taps
  # (with the max-pool's gradient between them) in each of its per-channel sums (ResNet-18 b8's stem: 0.8 -> 2.0 ms)
  dx = dx.reshape(*g.shape[:lead], *(q * s for q, s in zip(qs, s_)))
  return dx.shrink([None] * lead + [(0, i) for i in sizes]).contiguous()

def _conv_gradients(g: Tensor, xw: Tensor, ww: Tensor, groups: int) -> tuple[Tensor, Tensor]:
  """The gradients of a direct conv's product (Tensor.conv2d: the windows xw (N, Cin, *o, *k) times the filters ww
  (Cout, Cin/groups, *k), summed over Cin/groups x taps; g its upstream gradient, (N, groups, Cout/groups, 1, *o,
  1...)): the windows' as autograd forms it (the sum over each group's output channels of g times the filters), and the
  filters' as a matmul of g^T (Cout, N x pixels) with the windows stored pixels-first, (N x pixels, Cin x taps), kept in
  that (Cout, Cin x taps) shape (the filters' shape is a reshape of its buffer): its lanes and store run along the taps
  and input channels, contiguous in both. Autograd's sum over N x pixels of g times the windows read the windows in
  place (gated at the padding), its lanes on the output channels, stored 9 x Cin apart. Measured (AVX-512, 2 threads,
  LLVM; a 3x3 conv's weight gradient at batch 8, both alternated in one process): 512 channels over 2x2 pixels 0.84 ->
  0.40 ms (the windows' copy 0.06 of it), 256 over 4x4 0.93 -> 0.79; over 8x8 and 16x16 autograd's was faster (0.41
  against 0.58, 0.42 against 0.75: the copy grows with the pixels), so only over few pixels
  (Tensor._im2col_weight_gradient)."""
  nsp = (xw.ndim - 2) // 2
  bs, o, k = xw.shape[0], xw.shape[2:2 + nsp], xw.shape[2 + nsp:]
  cout, cin_g = ww.shape[:2]
  rcout, npix, ntap = cout // groups, prod(o), prod(k)
  dy = g.reshape(bs, groups, rcout, 1, *o, *([1] * nsp))
  gx = (dy * ww.reshape(1, groups, rcout, cin_g, *([1] * nsp), *k).cast(g.dtype)).sum(2)
  cols = xw.permute(0, *range(2, 2 + nsp), 1, *range(2 + nsp, 2 + 2 * nsp)).reshape(bs * npix, groups, cin_g * ntap)
  cols = cols.cast(g.dtype).contiguous()
  dyt = dy.reshape(bs, groups, rcout, npix).permute(0, 3, 1, 2).reshape(bs * npix, groups, rcout, 1)
  dw = (dyt * cols.reshape(bs * npix, groups, 1, cin_g * ntap)).sum(0)
  return gx.reshape(xw.shape).cast(xw.dtype), dw.contiguous().reshape(ww.shape).cast(ww.dtype)

def _pow_gradient(ctx: Tensor, ret: Tensor, x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
  """torch's gradients of x**y: y * x**(y-1) (0 where y == 0), and x**y * log(x) (0 where x == 0 and y >= 0); exact at a
  zero base, where the composed exp2(y * log2|x|) has 0 * inf."""
  gx = (y == 0).where(0, y * x.pow(y - 1))
  gy = ((x == 0) & (y >= 0)).where(0, ret * x.log())
  return ctx * gx, ctx * gy

def _bce_gradient(ctx: Tensor, ret: Tensor, p: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
  """torch's gradients of binary cross-entropy: (p - y) / max(p (1 - p), 1e-12), and log(1 - p) - log(p)."""
  gp = (p - y) / (p * (1 - p)).maximum(1e-12)
  gy = (1 - p).log() - p.log()
  return ctx * gp, ctx * gy

# every Tensor's number in the order they were made (its `_seq`)
_tensor_seq = itertools.count()

class CreationOrderedTensors:
  """A weak set of Tensors that iterates in the order they were made (their `_seq`), not by address as a WeakSet does.
  Every walk over the live tensors (backward's targets, the optimizer's pending writes, the readers of an overwritten
  buffer, the jit's pending assigns, the realized graphs' rewiring) then builds its graph and its new tensors in one
  order from step to step: in address order the same step's graph came with its outputs in another order each time and
  the scheduler's cache missed it. A member leaves when it is collected."""
  __slots__ = ("_members", "_last", "_in_order", "__weakref__")
  def __init__(self) -> None:
    self._members: weakref.WeakValueDictionary[int, Tensor] = weakref.WeakValueDictionary()
    # NOTE: the dict keeps insertion order, which is creation order while every member added is newer than the last
    # (all_tensors: each Tensor as it is made); only an older one added later (backward_roots) needs a sort
    self._last, self._in_order = -1, True
  def add(self, t: Tensor) -> None:
    if t._seq in self._members: return
    if t._seq < self._last: self._in_order = False
    self._last = max(self._last, t._seq)
    self._members[t._seq] = t
  def discard(self, t: Tensor) -> None:
    if self._members.get(t._seq) is t: del self._members[t._seq]
  def clear(self) -> None:
    self._members.clear()
    self._last, self._in_order = -1, True
  def __contains__(self, t: object) -> bool: return isinstance(t, Tensor) and self._members.get(t._seq) is t
  def __len__(self) -> int: return len(self._members)
  def __iter__(self) -> Iterator[Tensor]:
    # NOTE: a snapshot (members may be collected while the caller walks it)
    return iter(list(self._members.values()) if self._in_order else [t for _, t in sorted(self._members.items())])

all_tensors = CreationOrderedTensors()

def _wide_index(idx: Tensor) -> Tensor:
  """An int index in a dtype that holds any axis length too (int8/16 and their unsigned -> int32, uint32 -> int64), so
  it compares with one and adds one without overflow."""
  if idx.dtype in (dtypes.int32, dtypes.int64, dtypes.uint64): return idx
  return idx.cast(dtypes.int64 if idx.dtype is dtypes.uint32 else dtypes.int32)

# outputs backward() ran from: an optimizer step realizes them with its update, so a loss read after the step still
# holds the value from before the parameters changed
backward_roots = CreationOrderedTensors()
# the realized view of a tensor that required grad -> the lazy graph that computed it, for as long as a graph reads it,
# so autograd can look through values realized in the middle of a forward pass (even once their Tensor is gone)
_realized_graphs: weakref.WeakKeyDictionary[UOp, UOp] = weakref.WeakKeyDictionary()

# ---- Tensor ----

class _CastSugar:
  __slots__ = ()
  # NOTE: in a base class, so that `int`, `float` and `bool` in Tensor's annotations still name the builtins
  def cast(self, dtype: DTypeLike) -> Tensor: raise NotImplementedError
  def float(self) -> Tensor: return self.cast(dtypes.float32)
  def half(self) -> Tensor: return self.cast(dtypes.float16)
  def int(self) -> Tensor: return self.cast(dtypes.int32)
  def bool(self) -> Tensor: return self.cast(dtypes.bool)
  def long(self) -> Tensor: return self.cast(dtypes.int64)
  def double(self) -> Tensor: return self.cast(dtypes.float64)
  def bfloat16(self) -> Tensor: return self.cast(dtypes.bfloat16)
  def short(self) -> Tensor: return self.cast(dtypes.int16)
  def char(self) -> Tensor: return self.cast(dtypes.int8)
  def byte(self) -> Tensor: return self.cast(dtypes.uint8)

class _TrainingMode(contextlib.ContextDecorator):
  """Sets `Tensor.training` to `mode` for a `with` block or a decorated function's call, and restores the previous mode
  on the way out (also on an exception). Entries stack, so nesting, reuse and recursion restore the right mode."""
  def __init__(self, mode: bool): self.mode, self.prev = bool(mode), cast(list[bool], [])
  def __enter__(self) -> _TrainingMode:
    self.prev.append(Tensor.training)
    Tensor.training = self.mode
    return self
  def __exit__(self, *exc: Any) -> None: Tensor.training = self.prev.pop()

class _NoGrad:
  """`Tensor.no_grad`: gradient tracking off for a `with Tensor.no_grad():` block (or `with Tensor.no_grad:`) or for
  every call of a function decorated `@Tensor.no_grad()` (or `@Tensor.no_grad`), as torch.no_grad. Inside, ops on
  tensors that require grad give tensors that do not, cut off from autograd (backward() reaches no tensor through
  them). Blocks nest; `bool(Tensor.no_grad)` says whether one is active, so code that sets `Tensor.no_grad = True`
  (tinygrad's flag) works too."""
  def __init__(self) -> None: self.depth = 0
  def __bool__(self) -> bool: return self.depth > 0
  def __enter__(self) -> _NoGrad:
    self.depth += 1
    return self
  def __exit__(self, *exc: Any) -> None: self.depth -= 1
  def __call__(self, fn: Callable[..., Any] | None = None) -> Any:
    if fn is None: return self
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
      with self: return fn(*args, **kwargs)
    return wrapper

class Tensor(_CastSugar, MathTrait):
  """A lazy n-d array: `.uop` is its tensor graph, `.requires_grad` marks it for backward(), `.grad` receives the
  gradient."""
  __slots__ = ("uop", "requires_grad", "grad", "_graph", "_nonleaf", "_seq", "__weakref__")
  # NOTE: the training mode: dropout draws masks and BatchNorm uses batch statistics only while it is True, and an
  # optimizer's step() refuses to run without it. Set it directly, or for a block with Tensor.train() / Tensor.test()
  training: bool = False
  no_grad: Any = _NoGrad()
  _seed: int = 0
  _rng_states: dict[str, Tensor] = {}

  @staticmethod
  def train(mode: Any = True) -> Any:
    """Training mode for a `with Tensor.train():` block, or for every call of a function decorated `@Tensor.train()`
    (or `@Tensor.train`); `Tensor.train(False)` is evaluation mode. The previous mode comes back on exit."""
    # NOTE: `@Tensor.train` without a call hands over the function itself
    return _TrainingMode(True)(mode) if callable(mode) else _TrainingMode(bool(mode))
  @staticmethod
  def test(mode: Any = True) -> Any:
    """Evaluation mode (Tensor.training False) for a `with` block or a decorated function; Tensor.test(False) is
    training mode."""
    return _TrainingMode(False)(mode) if callable(mode) else _TrainingMode(not mode)

  def __init__(self, data: Any, device: str | tuple[str, ...] | None = None, dtype: DTypeLike | None = None,
               requires_grad: bool | None = None):
    dtype = None if dtype is None else _tensor_dtype(dtype)
    if isinstance(data, Tensor): data = data.uop
    if isinstance(data, UOp):
      uop = data if dtype is None or data.dtype is dtype else data.cast(dtype)
    elif isinstance(data, (bool, int, float)) and not isinstance(data, np.generic):
      uop = _const_uop(data, dtype or dtypes.from_py(data), _canon_device(device))
    else:
      if isinstance(data, (list, tuple)):
        dt = dtype or dtypes.from_py(data)
        npdt = _to_np_dtype(dt)
        arr: np.ndarray = np.array(data, dtype=npdt)
      elif isinstance(data, (np.ndarray, np.generic)):
        arr = np.asarray(data)
        dt = dtype or from_np_dtype(arr.dtype)
      else:
        raise TypeError(f"Tensor: cannot make a tensor from {type(data).__name__}; use a list, a scalar, a numpy array "
                        "or a UOp")
      uop = _buffer_uop(arr, dt, _canon_device(device))
    self.uop: UOp = uop
    self.requires_grad: bool | None = requires_grad
    self.grad: Tensor | None = None
    self._graph: UOp | None = None  # the lazy graph before realize, kept when autograd may still need it
    # made by an op on tensors that require grad (torch's non-leaf); a leaf (a parameter, even one an optimizer assigned
    # a lazy update to) is a gradient target, never looked through
    self._nonleaf = False
    self._seq = next(_tensor_seq)
    all_tensors.add(self)

  def __hash__(self) -> int: return id(self)
  def __repr__(self) -> str:
    shape = self.shape if all_concrete(self.shape) else render_shape(self.shape)
    return f"<Tensor {shape} {self.dtype} on {self.device}{' grad' if self.requires_grad else ''}>"
  def __len__(self) -> int:
    if not self.shape: raise TypeError("len() of a 0-d tensor")
    if isinstance(n := self.shape[0], UOp):
      raise TypeError(f"len() of a tensor of symbolic shape {render_shape(self.shape)}: use t.shape[0]")
    return n
  # NOTE: the Python conversions realize a one-element tensor and read it, as torch's
  def __bool__(self) -> bool:
    if self.numel() != 1:
      raise ArgumentError(f"the truth value of a Tensor of shape {self.shape} is ambiguous; use .any() or .all()")
    return bool(self.item())
  def __float__(self) -> float: return float(self._scalar_item("float"))
  def __int__(self) -> int: return int(self._scalar_item("int"))
  def __index__(self) -> int:
    if not (dtypes.is_int(self.dtype) or self.dtype is dtypes.bool) or self.numel() != 1:
      raise TypeError(f"only int tensors of one element can be an index, got {self.dtype} of shape {self.shape}")
    return int(self.item())
  def _scalar_item(self, op: str) -> ConstType:
    if self.numel() != 1:
      raise ArgumentError(f"{op}(): only a tensor of one element converts to a Python scalar, got shape {self.shape}")
    return self.item()

  @property
  def shape(self) -> tuple[sint, ...]:
    """The sizes of the axes: ints, and index UOps of bound variables where an axis is symbolic (docs/symbolic.md)."""
    return cast(tuple[sint, ...], self.uop.shape)
  @property
  def dtype(self) -> DType: return self.uop.dtype
  @property
  def device(self) -> str: return cast(str, self.uop.device)
  @property
  def ndim(self) -> int: return len(self.shape)
  def numel(self) -> sint: return int(prod(self.shape)) if all_concrete(self.shape) else sym_prod(self.shape)
  def element_size(self) -> int: return self.dtype.itemsize
  def nbytes(self) -> sint: return ssimplify(self.numel() * self.dtype.itemsize)
  def is_floating_point(self) -> bool: return dtypes.is_float(self.dtype)
  def size(self, dim: int | None = None) -> sint | tuple[sint, ...]:
    return self.shape if dim is None else self.shape[self._axis(dim)]

  def _new(self, u: UOp, *others: Tensor) -> Tensor:
    if not (self.requires_grad or any(o.requires_grad for o in others)): return Tensor(u)
    # NOTE: under no_grad the result is detached, so a later backward() does not reach the inputs through it
    if Tensor.no_grad: return Tensor(u.detach())
    ret = Tensor(u)
    ret.requires_grad = ret._nonleaf = True
    return ret

  # ---- realize ----
  def schedule_with_vars(self, *others: Tensor, apply: bool = False) -> tuple[list[Any], dict[str, int]]:
    """The kernels that realize self and `others` (not run) and the values of their variables. With `apply` (what
    realize does) each tensor's uop (and that of every live tensor whose graph used a realized node) becomes its output
    buffer, so the caller must run the schedule; without it the tensors are left untouched."""
    from tinygrad.engine.schedule import create_schedule_with_vars
    todo: list[Tensor] = []
    for t in dict.fromkeys((self, *others)):
      if base_buffer(t.uop) is not None: continue
      # NOTE: an empty tensor needs no kernel: it becomes an empty buffer at once
      if all_concrete(t.shape) and t.numel() == 0:
        if apply: _apply_becomes({t.uop: _new_buffer_uop(0, t.dtype, t.device, cast(tuple[int, ...], t.shape))})
      else: todo.append(t)
    if not todo: return [], {}
    if apply: todo += _readers_of_overwritten(todo)
    # NOTE: a bare view of a buffer (a permute, a shrink) is not a kernel by itself: ask for a contiguous copy of it.
    # A reshape of a CONTIGUOUS is that CONTIGUOUS's buffer, reshaped (a realized tensor may be RESHAPE(BUFFER)): asked
    # for as itself, it was copied into a buffer of its own (a weight gradient stored as a (Cout, Cin x 9) matmul,
    # realized as the filters' (Cout, Cin, 3, 3) by the optimizer: 9.4 MB copied a step)
    outs = {t.uop: t.uop.contiguous() if _is_view_of_buffer(t.uop) else _contiguous_under_reshapes(t.uop) or t.uop
            for t in todo}
    items, becomes, var_vals = create_schedule_with_vars(UOp.sink(*dict.fromkeys(outs.values())))
    if apply:
      _apply_becomes({**becomes, **{u: becomes[o] if o.shape == u.shape else becomes[o].reshape(u.shape)
                                    for u, o in outs.items() if o is not u and o in becomes}})
    return items, var_vals
  def schedule(self, *others: Tensor) -> list[Any]:
    """The kernels that would realize self and `others`, without running them; the tensors stay lazy, so a later
    realize() or numpy() still computes them."""
    return self.schedule_with_vars(*others)[0]

  def realize(self, *others: Tensor) -> Tensor:
    """Run every kernel self and `others` need; returns self."""
    sched, var_vals = self.schedule_with_vars(*others, apply=True)
    if sched:
      from tinygrad.engine.realize import run_schedule
      run_schedule(sched, var_vals)
    return self

  def numpy(self) -> np.ndarray:
    """A copy of the values as a numpy array (bfloat16 and fp8 come back as float32)."""
    from tinygrad.device import buffer_of
    from tinygrad.engine.realize import is_capturing
    shape = self.int_shape("numpy()/item()/tolist()")
    if is_capturing():
      raise RuntimeError(f"numpy()/item()/tolist() of {self!r} inside a function TinyJit is capturing: a replay does "
                         "not run the function, so it cannot read values on the host; return the tensor instead")
    self.realize()
    b = base_buffer(self.uop)
    if b is None: raise RuntimeError(f"numpy: {self!r} did not realize to a buffer")
    if b.op is Ops.MULTI: return _multi_numpy(b, self.dtype).reshape(cast(tuple[int, ...], self.shape))
    buf = buffer_of(b)
    if not buf.is_allocated(): buf.allocate()
    return from_storage_np(buf.numpy(), self.dtype).reshape(shape)
  def tolist(self) -> Any: return self.numpy().tolist()
  def item(self) -> ConstType:
    if self.numel() != 1:
      raise ArgumentError(f"item: only a tensor of one element has an item, this one has shape {self.shape}")
    return cast(ConstType, self.numpy().reshape(-1)[0].item())
  def data(self) -> np.ndarray: return self.numpy()
  def int_shape(self, op: str, last: int | None = None) -> tuple[int, ...]:
    """The shape (with `last`, its last `last` sizes only), for an op that needs concrete sizes; a symbolic size among
    them raises naming `op` and the bound sizes."""
    sizes = self.shape if last is None else self.shape[len(self.shape) - last:]
    if all_concrete(sizes): return cast(tuple[int, ...], sizes)
    sym = ", ".join(render_sint(x) for x in sizes if isinstance(x, UOp))
    conc = tuple(vmax(x) if not isinstance(x, UOp) else _bound_or(x) for x in self.shape)
    raise ArgumentError(f"{op} of a tensor of symbolic shape {render_shape(self.shape)} needs concrete sizes "
                        f"(symbolic: {sym}); reshape it to the bound sizes first, e.g. .reshape{conc}")

  def contiguous(self) -> Tensor:
    """This tensor stored in a buffer of its own; in backward its gradient is stored there too (so a recurrence stored
    step by step in the forward is not recomputed whole inside each of its gradient kernels)."""
    return self._new(self.uop.contiguous(), )
  def detach(self) -> Tensor: return Tensor(self.uop.detach())
  def requires_grad_(self, requires_grad: bool = True) -> Tensor:
    """Marks this tensor (in place) as one backward() computes a gradient for; returns it."""
    self.requires_grad = requires_grad
    return self
  def clone(self) -> Tensor:
    """A copy in a new buffer (CONTIGUOUS of a buffer is that buffer, so a realized tensor is copied explicitly)."""
    from tinygrad.device import next_unique
    # NOTE: hash-consing would make two clones of one value the same node (one buffer, so a write through one shows in
    # the other); a unique tag gives each clone an identity, and so a buffer, of its own
    tag = ("clone", next_unique())
    base = self.uop
    while base.op in (Ops.RESHAPE, Ops.DETACH, Ops.CONTIGUOUS): base = base.src[0]
    if base.op in (Ops.BUFFER, Ops.BUFFER_VIEW):
      return self._new(UOp(Ops.COPY, self.dtype, (self.uop, _device_uop(self.device)), tag=tag))
    return self._new(UOp(Ops.CONTIGUOUS, self.dtype, (self.uop,), tag=tag))
  def to(self, device: str | tuple[str, ...] | None) -> Tensor:
    dev = _canon_device(device)
    if dev == self.device: return self
    return self._new(UOp(Ops.COPY, self.dtype, (self.uop, _device_uop(dev))))

  def assign(self, x: Any) -> Tensor:
    """Write x into self (broadcast and cast to self's shape and dtype). On a realized tensor this is an ASSIGN to its
    buffer, run at the next realize; on a lazy one it just replaces the graph."""
    x = x if isinstance(x, Tensor) else Tensor(x, device=self.device, dtype=self.dtype)
    if x.shape != self.shape: x = x._broadcast_to(self.shape, "assign")
    if x.dtype is not self.dtype: x = x.cast(self.dtype)
    if base_buffer(self.uop) is None and self.uop.op is not Ops.ASSIGN and not _is_writable_view(self.uop):
      self.uop = x.uop
      return self
    check_assign_target(self.uop)
    self.uop = UOp(Ops.ASSIGN, self.dtype, (self.uop, x.uop))
    self._graph = None
    return self

  def replace(self, x: Tensor) -> Tensor:
    if x.shape != self.shape: raise ArgumentError(f"replace: shape {x.shape} != {self.shape}")
    self.uop = x.uop
    return self

  # ---- construction ----
  @staticmethod
  def _from_storage(bits: np.ndarray, dtype: DType, device: str | None = None) -> Tensor:
    """A tensor whose buffer holds `bits` as they are (the storage of dtype: bit patterns for bfloat16 and fp8)."""
    return Tensor(_buffer_uop(bits, dtype, _canon_device(device), raw=True))
  @staticmethod
  def _shape_arg(shape: tuple[Any, ...]) -> tuple[sint, ...]:
    s = argfix(*shape)
    if not all(_size_ok(x) for x in s):
      raise ShapeMismatchError(f"shape must be non-negative ints (or index UOps of bound variables, "
                               f"Variable(...).bind(n)), got {s}")
    return tuple(ssimplify(x) for x in s)
  @staticmethod
  def empty(*shape: Any, device: str | None = None, dtype: DTypeLike | None = None, **kw: Any) -> Tensor:
    """An uninitialized tensor. Of a symbolic shape: a buffer of the shape's maximum, viewed at the shape."""
    s, dt, dev = Tensor._shape_arg(shape), _tensor_dtype(dtype or dtypes.default_float), _canon_device(device)
    _check_size(s, dt, "empty")
    if not all_concrete(s):
      buf = _new_buffer_uop(prod(_max_shape(s)), dt, dev)
      return Tensor(buf.shrink(((0, sym_prod(s)),)).reshape(s), **kw)
    return Tensor(_new_buffer_uop(prod(s), dt, dev, cast(tuple[int, ...], s)), **kw)
  @staticmethod
  def full(shape: tuple[sint, ...] | sint, fill_value: ConstType, device: str | tuple[str, ...] | None = None,
           dtype: DTypeLike | None = None, **kw: Any) -> Tensor:
    s = Tensor._shape_arg((shape,) if isinstance(shape, (int, UOp)) else tuple(shape))
    dt = _tensor_dtype(dtype) if dtype is not None else dtypes.from_py(fill_value)
    _check_size(s, dt, "full")
    return Tensor(_const_uop(fill_value, dt, _canon_device(device), s), **kw)
  @staticmethod
  def zeros(*shape: Any, **kw: Any) -> Tensor:
    return Tensor.full(argfix(*shape), 0.0, **{"dtype": dtypes.default_float, **kw})
  @staticmethod
  def ones(*shape: Any, **kw: Any) -> Tensor:
    return Tensor.full(argfix(*shape), 1.0, **{"dtype": dtypes.default_float, **kw})
  def full_like(self, fill_value: ConstType, **kw: Any) -> Tensor:
    return self._like(Tensor.full(self.shape, fill_value, **{"dtype": self.dtype, "device": self.device, **kw}), kw)
  def zeros_like(self, **kw: Any) -> Tensor: return self.full_like(0, **kw)
  def ones_like(self, **kw: Any) -> Tensor: return self.full_like(1, **kw)
  def empty_like(self, **kw: Any) -> Tensor:
    return self._like(Tensor.empty(self.shape, **{"dtype": self.dtype, "device": self.device, **kw}), kw)
  def rand_like(self, **kw: Any) -> Tensor:
    if (per_shard := self._draw_per_shard(Tensor.rand, kw)) is not None: return per_shard
    return Tensor.rand(self.shape, **{"dtype": self.dtype, "device": self.device, **kw})
  def randn_like(self, **kw: Any) -> Tensor:
    if (per_shard := self._draw_per_shard(Tensor.randn, kw)) is not None: return per_shard
    return Tensor.randn(self.shape, **{"dtype": self.dtype, "device": self.device, **kw})

  @staticmethod
  def _arange_index(n: sint, device: str | tuple[str, ...] | None) -> Tensor:
    """int32 0..n-1 from constants only: a cumsum of ones for n <= 1024, above that a 2-d split i = a*b + c of two
    smaller ones. The scheduler folds the cumsum's window sum to a closed form (rangeify.fold_int_sum), so it costs no
    loop and fuses into its consumers."""
    if isinstance(n, UOp): return _shrink_to(Tensor._arange_index(vmax(n), device), (n,))
    if n == 0: return Tensor.zeros(0, dtype=dtypes.int32, device=device)
    if n <= 1024: return Tensor.ones(n, device=device, dtype=dtypes.int32)._window_scan("sum", 0) - 1
    # NOTE: a square split (a == b), so both parts are the one cumsum: two different ones are two padded views, which
    # the scheduler takes for a concatenation and stores where a broadcast reads it 128 times or more
    # (rangeify._store_broadcast_source), and a stored arange hides the compare a gather's select is collapsed by
    a = b = math.isqrt(n - 1) + 1
    hi = Tensor._arange_index(a, device) * b
    return (hi.reshape(a, 1) + Tensor._arange_index(b, device).reshape(1, b)).flatten().shrink(((0, n),))
  @staticmethod
  def arange(start: sint | float, stop: sint | float | None = None, step: int | float = 1,
             device: str | tuple[str, ...] | None = None, dtype: DTypeLike | None = None, **kw: Any) -> Tensor:
    if stop is None: start, stop = 0, start
    if step == 0: raise ArgumentError("arange: step must not be zero")
    if isinstance(stop, UOp) or isinstance(start, UOp) or isinstance(step, UOp):
      return Tensor._arange_symbolic(start, stop, step, device, dtype, **kw)
    if not all(math.isfinite(v) for v in (start, stop, step)):
      raise ArgumentError(f"arange: start, stop and step must be finite, got {start}, {stop}, {step}")
    is_float = any(isinstance(v, float) for v in (start, stop, step))
    dt = _tensor_dtype(dtype) if dtype is not None else dtypes.default_float if is_float else dtypes.default_int
    n = max(0, math.ceil((stop - start) / step))
    if dtypes.is_float(dt):
      idx = Tensor._arange_index(n, device)
      return Tensor((idx.cast(dt) * step + start).uop if n else _const_uop(0, dt, _canon_device(device), (0,)), **kw)
    # NOTE: as torch, an int dtype steps from start by step, both truncated, and int64 also counts the elements with
    # truncated values (C division); the values are made in a wide int and wrap into a narrow or unsigned dtype
    start, step = int(start), int(step)
    if dt is dtypes.int64 and step != 0:
      span = int(stop) - start + step - (1 if step > 0 else -1)
      n = max(0, abs(span) // abs(step) if (span >= 0) == (step > 0) else 0)
    acc = dt if dt in (dtypes.int32, dtypes.int64) else dtypes.int64 if dt.itemsize >= 4 else dtypes.int32
    v = Tensor._arange_index(n, device).cast(acc) * step + start
    return Tensor(v.cast(dt).uop if n else _const_uop(0, dt, _canon_device(device), (0,)), **kw)
  @staticmethod
  def _arange_symbolic(start: Any, stop: Any, step: Any, device: str | tuple[str, ...] | None, dtype: DTypeLike | None,
                       **kw: Any) -> Tensor:
    """arange to a symbolic stop: the arange to the stop's maximum, viewed at the symbolic length."""
    if isinstance(start, UOp) or isinstance(step, UOp) or not isinstance(start, int) or not isinstance(step, int) or \
       step <= 0 or not _size_ok(stop):
      raise ArgumentError(f"arange: a symbolic stop needs int start and a positive int step, got start={start!r}, "
                          f"stop={render_sint(stop)}, step={step!r}")
    n = ssimplify((stop - start + step - 1) // step)
    if vmin(n) < 0:
      raise ArgumentError(f"arange: {render_sint(stop)} can be below start {start} for some value of its variables")
    full = Tensor.arange(start, start + vmax(n) * step, step, device=device, dtype=dtype)
    return Tensor(_shrink_to(full, (n,)).uop, **kw)
  @staticmethod
  def linspace(start: float, stop: float, steps: int, device: str | None = None, dtype: DTypeLike | None = None,
               **kw: Any) -> Tensor:
    """steps evenly spaced values from start to stop, both included. As torch: the first half steps up from start, the
    second half down from stop (so stop is exact), in float32 (float64 for float64 and int dtypes, whose start and
    stop are truncated first)."""
    if not isinstance(steps, (int, np.integer)): raise TypeError(f"linspace: steps must be an int, got {steps!r}")
    steps = int(steps)
    if steps < 0: raise ArgumentError(f"linspace: steps must be >= 0, got {steps}")
    dt = _tensor_dtype(dtype or dtypes.default_float)
    if dt is dtypes.bool: raise DTypeError("linspace: a bool dtype has no evenly spaced values (torch raises too)")
    if not dtypes.is_float(dt): start, stop = int(start), int(stop)
    if steps == 1: return Tensor.full((1,), start, device=device, dtype=dt, **kw)
    acc = dtypes.float32 if dt in (dtypes.float16, dtypes.bfloat16, dtypes.float32) + dtypes.fp8s else dtypes.float64
    t = Tensor._arange_index(steps, device).cast(acc)
    step = (stop - start) / max(steps - 1, 1)
    v = (t < steps // 2).where(t * step + start, stop - (steps - 1 - t) * step)
    return Tensor(v.cast(dt).uop, **kw)
  @staticmethod
  def eye(n: int, m: int | None = None, device: str | None = None, dtype: DTypeLike | None = None, **kw: Any) -> Tensor:
    m = n if m is None else m
    e = Tensor._arange_index(n, device).reshape(n, 1) == Tensor._arange_index(m, device).reshape(1, m)
    return Tensor(e.cast(_tensor_dtype(dtype or dtypes.default_float)).uop, **kw)

  # ---- random (counter-based threefry: the same seed gives the same numbers everywhere) ----
  # The generator's state lives on the device, one buffer per device: uint64 [key, counter], key = the seed. A draw of n
  # numbers reads the state lazily (so threefry fuses into the consumer) and at once replaces it by a *fresh* buffer
  # holding [key, counter + n] (one tiny kernel). Nothing ever writes a state buffer a lazy draw may still read, so
  # draws realized in any order get their own numbers; and no seed or counter is a constant of a kernel, so a TinyJit
  # replay (which swaps the current state in and writes the advanced state back) draws new numbers every time.
  @staticmethod
  def manual_seed(seed: int = 0) -> None:
    """Restart every device's stream from `seed` (a device used later starts from it too)."""
    from tinygrad.engine.realize import is_capturing
    if is_capturing():
      raise RuntimeError("manual_seed inside a function TinyJit is capturing: a replay would not re-seed; call "
                         "Tensor.manual_seed outside the jitted function")
    Tensor._seed = int(seed)
    Tensor._rng_states = {dev: Tensor._rng_start(dev) for dev in Tensor._rng_states}
  @staticmethod
  def _rng_start(dev: str) -> Tensor:
    # NOTE: device n of a backend (CPU:n) draws its own stream, the key's high half xor n; device 0 has the seed's
    n = int(dev.partition(":")[2] or 0)
    key = (Tensor._seed ^ (n << 32)) & 0xFFFFFFFFFFFFFFFF
    return Tensor(_buffer_uop(np.array([key, 0], dtype=np.uint64), dtypes.uint64, dev))
  @staticmethod
  def _rng_state(dev: str) -> Tensor:
    """The current generator state of `dev` (a realized uint64 [key, counter]), created from the seed on first use."""
    if (st := Tensor._rng_states.get(dev)) is None: st = Tensor._rng_states[dev] = Tensor._rng_start(dev)
    return st
  @staticmethod
  def _random_bits(n: int, device: str | None) -> Tensor:
    """n uint32 values: low halves of threefry2x32(counter, key), counters consecutive across calls on a device. On a
    set of devices: drawn on the first and copied to the others (replicated: one tensor, the same numbers on each)."""
    dev = _canon_device(device)
    if is_multi_device(dev): return Tensor._random_bits(n, cast(tuple, dev)[0]).to(dev)
    st = Tensor._rng_state(dev)
    key = st.shrink(((0, 1),)).expand(n)
    ctr = Tensor._arange_index(n, dev).cast(dtypes.uint64) + st.shrink(((1, 2),)).expand(n)
    # NOTE: the increment comes from a buffer, not a constant, so every draw size shares one compiled kernel
    step = Tensor(_buffer_uop(np.array([0, n], dtype=np.uint64), dtypes.uint64, dev))
    Tensor._rng_states[dev] = (st + step).realize()
    bits = Tensor(ctr.uop.alu(Ops.THREEFRY, key.uop))
    return (bits & 0xFFFFFFFF).cast(dtypes.uint32)
  @staticmethod
  def rand(*shape: Any, device: str | None = None, dtype: DTypeLike | None = None, **kw: Any) -> Tensor:
    """Uniform in [0, 1): the top mantissa-many bits of a random uint32, scaled exactly (so never 1.0, in any float
    dtype)."""
    s, dt = Tensor._shape_arg(shape), _tensor_dtype(dtype or dtypes.default_float)
    if not dtypes.is_float(dt): raise DTypeError(f"rand: dtype must be a float type, got {dt}")
    # NOTE: a symbolic shape draws its maximum and is viewed at its binding, so every binding draws as many numbers
    if not all_concrete(s):
      return Tensor(_shrink_to(Tensor.rand(_max_shape(s), device=device, dtype=dt), s).uop, **kw)
    if prod(s) == 0: return Tensor.zeros(s, device=device, dtype=dt, **kw)
    mbits = min(dtypes.finfo(dt)[1] + 1, 32)
    ct = dtypes.float64 if dt is dtypes.float64 else dtypes.float32
    u = (Tensor._random_bits(prod(s), device) >> (32 - mbits)).cast(ct) * (2.0 ** -mbits)
    return Tensor(u.cast(dt).reshape(s).uop, **kw)
  @staticmethod
  def randn(*shape: Any, device: str | None = None, dtype: DTypeLike | None = None, **kw: Any) -> Tensor:
    """Standard normal by Box-Muller from two uniform draws."""
    s, dt = Tensor._shape_arg(shape), _tensor_dtype(dtype or dtypes.default_float)
    u = Tensor.rand(2, *s, device=device, dtype=dtypes.float32)
    z = ((1 - u[0]).log() * -2).sqrt() * (u[1] * (2 * math.pi)).cos()
    return Tensor(z.cast(dt).uop, **kw)
  @staticmethod
  def randint(*shape: Any, low: int = 0, high: int = 10, device: str | None = None, dtype: DTypeLike | None = None,
              **kw: Any) -> Tensor:
    if high <= low: raise ArgumentError(f"randint: high ({high}) must be greater than low ({low})")
    dt = _tensor_dtype(dtype or dtypes.int32)
    r = (Tensor.rand(*shape, device=device, dtype=dtypes.float64) * (high - low)).floor().cast(dtypes.int64)
    return Tensor((r.minimum(high - low - 1) + low).cast(dt).uop, **kw)
  @staticmethod
  def randperm(n: int, device: str | None = None, dtype: DTypeLike = dtypes.int32, **kw: Any) -> Tensor:
    """A random permutation of 0..n-1: the stable argsort of n uniform draws (ties, at one in 2^24 per pair, keep
    the lower index first, so the result is always a permutation)."""
    if not isinstance(n, int) or n < 0: raise ArgumentError(f"randperm: n must be a non-negative int, got {n!r}")
    dt = _tensor_dtype(dtype)
    if dtypes.is_float(dt) or dt is dtypes.bool: raise DTypeError(f"randperm: dtype must be an int type, got {dt}")
    if n == 0: return Tensor.zeros(0, device=device, dtype=dt, **kw)
    return Tensor(Tensor.rand(n, device=device).argsort().cast(dt).uop, **kw)
  def multinomial(self, num_samples: int = 1, replacement: bool = False) -> Tensor:
    """int32 category indices drawn from each row of weights (a 1-d tensor is one row; rows need not sum to 1): shape
    (num_samples,) or (rows, num_samples), on the device from tensor ops (torch's indices are int64).
    With replacement each draw is independent: a uniform u in [0, 1) against the row's cumulative weights divided by
    their total, the index being how many of them are <= u. Without replacement an exponential race: the num_samples
    smallest E_k / w_k (E_k ~ Exp(1) independent), in that order, which is the law of drawing one category at a time
    in proportion to the weight left; zero-weight categories come only after every positive one.
    The weights are not checked (that would read them on the host): negative, nan or all-zero rows give undefined (but
    in-range) indices."""
    if self.ndim not in (1, 2):
      raise ShapeMismatchError(f"multinomial: needs a 1-d or 2-d tensor of weights, got shape {self.shape}")
    if not dtypes.is_float(self.dtype): raise DTypeError(f"multinomial: weights must be floats, got {self.dtype}")
    if num_samples < 1: raise ArgumentError(f"multinomial: num_samples must be at least 1, got {num_samples}")
    w = (self if self.ndim == 2 else self.reshape(1, -1)).cast(dtypes.float64 if self.dtype is dtypes.float64 else
                                                               dtypes.float32)
    rows, n = w.int_shape("multinomial")
    if n == 0: raise ShapeMismatchError(f"multinomial: no categories to draw from (weights of shape {self.shape})")
    if not replacement and num_samples > n:
      raise ShapeMismatchError(f"multinomial: cannot draw {num_samples} samples without replacement from {n} "
                               "categories (pass replacement=True, or at most as many samples as categories)")
    if rows == 0: out = Tensor.zeros(0, num_samples, dtype=dtypes.int32, device=self.device)
    elif replacement:
      cs = w.cumsum(1)
      cdf = cs / cs[:, n - 1:]
      u = Tensor.rand(rows, num_samples, 1, device=self.device, dtype=w.dtype)
      # NOTE: cdf's last entry is exactly 1 > u for a valid row; the clamp keeps a bad row's index in range
      out = (cdf.reshape(rows, 1, n) <= u).sum(2).minimum(n - 1).cast(dtypes.int32)
    else:
      e = -(1 - Tensor.rand(rows, n, device=self.device, dtype=w.dtype)).log()
      out = (w > 0).where(e / w, math.inf).topk(num_samples, 1, largest=False)[1]
    return (out if self.ndim == 2 else out.reshape(num_samples)).detach()
  @staticmethod
  def uniform(*shape: Any, low: float = 0.0, high: float = 1.0, dtype: DTypeLike | None = None, **kw: Any) -> Tensor:
    dt = _tensor_dtype(dtype or dtypes.default_float)
    r = Tensor.rand(*shape, dtype=dt, device=kw.pop("device", None))
    return Tensor((r * (high - low) + low).cast(dt).uop, **kw)
  @staticmethod
  def normal(*shape: Any, mean: float = 0.0, std: float = 1.0, dtype: DTypeLike | None = None, **kw: Any) -> Tensor:
    dt = _tensor_dtype(dtype or dtypes.default_float)
    return Tensor((Tensor.randn(*shape, dtype=dt, device=kw.pop("device", None)) * std + mean).cast(dt).uop, **kw)
  @staticmethod
  def scaled_uniform(*shape: Any, **kw: Any) -> Tensor:
    scale: float = float(prod(argfix(*shape))) ** -0.5
    return Tensor.uniform(*shape, low=-1.0, high=1.0, **kw) * scale
  @staticmethod
  def kaiming_uniform(*shape: Any, a: float = 0.01, **kw: Any) -> Tensor:
    bound = math.sqrt(3.0) * math.sqrt(2.0 / (1 + a ** 2)) / math.sqrt(prod(argfix(*shape)[1:]))
    return Tensor.uniform(*shape, low=-bound, high=bound, **kw)

  # ---- axes and broadcasting ----
  def _axis(self, a: int, nd: int | None = None) -> int:
    nd = self.ndim if nd is None else nd
    if not -max(nd, 1) <= a < max(nd, 1):
      raise IndexError(f"axis {a} is out of range for a tensor of shape {self.shape}")
    return a + nd if a < 0 else a
  def _axes(self, axis: int | Sequence[int] | None) -> tuple[int, ...]:
    if axis is None: return tuple(range(self.ndim))
    ax = tuple(self._axis(a) for a in ((axis,) if isinstance(axis, int) else axis))
    if len(set(ax)) != len(ax): raise RuntimeError(f"axis {axis} repeats an axis (tensor of shape {self.shape})")
    if self.ndim == 0: return ()
    return tuple(sorted(ax))

  def _broadcast_to(self, shape: tuple[sint, ...], op: str = "broadcast_to") -> Tensor:
    if self.shape == shape: return self
    if len(self.shape) > len(shape) or not shape_eq(broadcast_shape(self.shape, shape, op=op), shape):
      raise ShapeMismatchError(f"{op}: cannot broadcast shape {render_shape(self.shape)} to {render_shape(shape)}")
    _check_size(shape, self.dtype, op)
    x = self.reshape((1,) * (len(shape) - self.ndim) + self.shape)
    return x._new(x.uop.expand(shape))
  def expand_as(self, x: Tensor) -> Tensor: return self._broadcast_to(x.shape)
  def broadcast_to(self, shape: tuple[int, ...]) -> Tensor: return self._broadcast_to(tuple(shape))

  def _scalar_dtype(self, y: Tensor | ConstType) -> DType:
    # NOTE: a Python scalar takes the tensor's dtype when it is of the same kind (float into float, int into int), as
    # numpy does
    if dtypes.is_float(self.dtype) and isinstance(y, (int, float)): return self.dtype
    if dtypes.is_int(self.dtype) and isinstance(y, int) and not isinstance(y, bool):
      # NOTE: as numpy does, a Python int that does not fit the tensor's int dtype is an error, never a silent wrap
      if not dtypes.min(self.dtype) <= y <= dtypes.max(self.dtype):
        raise OverflowError(f"Python int {y} does not fit {self.dtype} (range {dtypes.min(self.dtype)}.."
                            f"{dtypes.max(self.dtype)}); cast the tensor first, e.g. .cast(dtypes.int64)")
      return self.dtype
    if self.dtype is dtypes.bool and isinstance(y, bool): return self.dtype
    return dtypes.from_py(y)
  def _scalar_operand(self, y: Any, op: str) -> Tensor:
    """A Python (or numpy) scalar as a 0-d constant of the dtype it takes next to self (see _scalar_dtype)."""
    if isinstance(y, np.generic) and y.ndim == 0: y = y.item()
    # NOTE: a symbolic int (an index UOp of bound variables) is its value at the binding, a kernel input
    if isinstance(y, UOp):
      dt = self.dtype if dtypes.is_float(self.dtype) or dtypes.is_int(self.dtype) else dtypes.default_int
      return Tensor._sint_value(_sym_arg(y, op), dt, self.device)
    if not isinstance(y, (bool, int, float)):
      raise TypeError(f"{op}: unsupported operand type {type(y).__name__} (use a Tensor or a Python scalar)")
    return Tensor(_const_uop(y, self._scalar_dtype(y), self.device))
  def _operands(self, y: Tensor | ConstType, op: str, reverse: bool = False,
                match_dtype: bool = True) -> tuple[Tensor, Tensor]:
    """Both operands with one shape and (if match_dtype) one dtype: numpy broadcasting, least_upper_dtype promotion."""
    if not isinstance(y, Tensor): y = self._scalar_operand(y, op)
    x = self
    if reverse: x, y = y, x
    if x.device != y.device:
      raise ArgumentError(f"{op}: operands are on different devices ({x.device} and {y.device}); move one with .to()")
    if match_dtype and x.dtype is not y.dtype:
      dt = least_upper_dtype(x.dtype, y.dtype)
      x, y = x.cast(dt), y.cast(dt)
    if x.shape != y.shape:
      shape = broadcast_shape(x.shape, y.shape, op=op)
      x, y = x._broadcast_to(shape, op), y._broadcast_to(shape, op)
    return x, y
  def _binop(self, op: Ops, y: Tensor | ConstType, name: str, reverse: bool = False) -> Tensor:
    x, y = self._operands(y, name, reverse)
    _check_alu_dtype(op, x.dtype, name)
    return x._new(x.uop.alu(op, y.uop), y)
  # MathTrait: the operators (`+`, `<`, `&`, ...) build their op through these three
  def ufix(self, x: Any) -> Tensor: return x if isinstance(x, Tensor) else self._scalar_operand(x, "op")
  def const_like(self, b: Any) -> Tensor: return self._const(b)
  def alu(self, op: Ops, *src: Any) -> Tensor:
    """`op` on tensors: numpy broadcasting and least_upper_dtype promotion of the operands; float math (EXP2, LOG2,
    SIN, SQRT, RECIPROCAL) promotes ints and bools to a float first; bit ops, shifts and integer division check the
    dtype (TypeError, as torch)."""
    if op is Ops.WHERE: return self.where(*src)
    if len(src) > 1: raise ArgumentError(f"alu: {op} with {len(src) + 1} operands is not an elementwise tensor op")
    if src: return self._binop(op, src[0], _OP_NAMES.get(op, op.name.lower()))
    x = self._float() if op in _FLOAT_MATH else self
    _check_alu_dtype(op, x.dtype, _OP_NAMES.get(op, op.name.lower()))
    return x._new(x.uop.alu(op))
  def _const(self, v: ConstType, dtype: DType | None = None) -> Tensor:
    return Tensor(_const_uop(v, dtype or self.dtype, self.device, self.shape))

  # ---- elementwise: arithmetic ----
  def _both_bool(self, y: Tensor | ConstType) -> bool:
    return self.dtype is dtypes.bool and (y.dtype is dtypes.bool if isinstance(y, Tensor) else isinstance(y, bool))
  def add(self, y: Tensor | ConstType, reverse: bool = False) -> Tensor:
    if self._both_bool(y): return self._binop(Ops.OR, y, "add", reverse)
    return self._binop(Ops.ADD, y, "add", reverse)
  def mul(self, y: Tensor | ConstType, reverse: bool = False) -> Tensor:
    if self._both_bool(y): return self._binop(Ops.AND, y, "mul", reverse)
    return self._binop(Ops.MUL, y, "mul", reverse)
  def neg(self) -> Tensor:
    if self.dtype is dtypes.bool:
      raise DTypeError("neg: negating a bool tensor is not supported; use logical_not() or ~")
    # NOTE: for unsigned ints, -x wraps as C does: x * (2**bits - 1)
    return self * (dtypes.max(self.dtype) if dtypes.is_unsigned(self.dtype) else -1)
  def sub(self, y: Tensor | ConstType, reverse: bool = False) -> Tensor:
    x, y = self._operands(y, "sub", reverse)
    if x.dtype is dtypes.bool: raise DTypeError("sub: subtracting bool tensors is not supported; use ^ or logical ops")
    return x + (-y)
  def div(self, y: Tensor | ConstType, reverse: bool = False, rounding_mode: str | None = None) -> Tensor:
    """True division (ints promote to float), the IEEE quotient (rounded once, as torch's); rounding_mode "trunc" or
    "floor" as torch."""
    if rounding_mode == "floor": return self.floordiv(y, reverse)
    x, y = self._operands(y, "div", reverse)
    if rounding_mode == "trunc": return x.idiv(y) if dtypes.is_int(x.dtype) else x._fdiv(y).trunc()
    if rounding_mode is not None:
      raise ArgumentError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
    dt = least_upper_float(x.dtype)
    return x.cast(dt)._fdiv(y.cast(dt))
  # NOTE: FDIV, not x * (1/y): the reciprocal rounds first, so the product can be an ulp off, and trunc or floor of a
  # quotient that is an integer (7/7, 0.3/0.1) then falls to the one below
  def _fdiv(self, y: Tensor) -> Tensor: return self._new(self.uop.alu(Ops.FDIV, y.uop), y)
  def _int_divmod(self, op: Ops, y: Tensor, divisor_nonzero: bool) -> Tensor:
    # NOTE: integer division by zero traps in C; like numpy, a zero divisor gives 0 instead of killing the process
    if divisor_nonzero: return self._new(self.uop.alu(op, y.uop), y)
    zero = y == 0
    safe = zero.where(1, y)
    return zero.where(0, self._new(self.uop.alu(op, safe.uop), safe))
  def idiv(self, y: Tensor | ConstType, reverse: bool = False) -> Tensor:
    """C division: integer quotient truncated toward zero (0 where the divisor is 0)."""
    nz = not reverse and isinstance(y, int) and y != 0
    x, y = self._operands(y, "idiv", reverse)
    if not dtypes.is_int(x.dtype): raise DTypeError(f"idiv: integer division needs int tensors, got {x.dtype}")
    return x._int_divmod(Ops.IDIV, y, nz)
  def floordiv(self, y: Tensor | ConstType, reverse: bool = False) -> Tensor:
    """Python's //: rounds toward minus infinity (floats: floor(x / y); ints: 0 where the divisor is 0, as numpy)."""
    nz = not reverse and isinstance(y, int) and y != 0
    x, y = self._operands(y, "floordiv", reverse)
    if not dtypes.is_int(x.dtype): return x._floordiv_float(y)
    q = x._int_divmod(Ops.IDIV, y, nz)
    if dtypes.is_unsigned(x.dtype): return q
    # NOTE: C truncates; the floor is one less when the division is inexact and the operands have opposite signs
    fix = (q * y).ne(x) & ((x < 0) ^ (y < 0))
    if not nz: fix = fix & y.ne(0)
    return fix.where(q - 1, q)
  def mod(self, y: Tensor | ConstType, reverse: bool = False) -> Tensor:
    """Python's %: the result takes the sign of the divisor (ints: 0 where the divisor is 0, as numpy)."""
    nz = not reverse and isinstance(y, int) and y != 0
    x, y = self._operands(y, "mod", reverse)
    if not dtypes.is_int(x.dtype):
      # NOTE: the gradient is torch's: 1, and -(x // y)
      xf, yf = x._float(), y._float()
      r = xf._in_float32_binary(yf, lambda a, b: a._fmod_float(b)._fmod_to_remainder(b))
      return _with_gradient(r, (xf, yf), lambda ctx, ret, a, b: (ctx, -ctx * a._floordiv_float(b)))
    r = x._int_divmod(Ops.MOD, y, nz)
    if dtypes.is_unsigned(x.dtype): return r
    return (r.ne(0) & ((r < 0) ^ (y < 0))).where(r + y, r)
  def _in_float32_binary(self, y: Tensor, fn: Callable[[Tensor, Tensor], Tensor]) -> Tensor:
    """fn(self, y) for two float tensors of one dtype, 16-bit and 8-bit floats through float32 (as torch computes)."""
    if self.dtype.itemsize >= 4: return fn(self, y)
    return fn(self.cast(dtypes.float32), y.cast(dtypes.float32)).cast(self.dtype)
  def _fmod_float(self, y: Tensor) -> Tensor:
    """C's fmod(self, y) for float32/float64 tensors of one shape, exact (nan for y = 0 or an infinite self, self for
    an infinite y). Each step takes q = trunc(r / y') times y' off r with one fused multiply-add, exactly (the result
    is representable), where y' is y, or y * 2**k where r / y overflows: r stays x modulo y and loses mant - 1 bits
    of quotient a step, so the steps cover the whole exponent range; a last step puts the sign of x back."""
    e, m = dtypes.finfo(self.dtype)
    bad = self.isinf() | self.isnan() | y.isnan() | (y == 0)
    ay = (bad | y.isinf()).where(1.0, y.abs())
    r = (bad | y.isinf()).where(0.0, self)
    s = 2.0 ** (2 ** (e - 2))
    for _ in range(math.ceil((2 ** e + m) / (m - 1))):
      ys = (r / ay).isinf().where((r / (ay * s)).isinf().where(ay * s * s, ay * s), ay)
      q = (r / ys).trunc()
      r = r._new(q.neg().uop.alu(Ops.MULACC, ys.uop, r.uop), ys, r)
    r = (r.ne(0) & ((r < 0) ^ (self < 0))).where(r + (self < 0).where(-ay, ay), r)
    return bad.where(math.nan, y.isinf().where(self, r))
  def _fmod_to_remainder(self, y: Tensor) -> Tensor:
    """Python's x % y from m = fmod(x, y): m + y where m is nonzero and its sign differs from y's (exact: the true
    result is representable)."""
    return (self.ne(0) & ((self < 0) ^ (y < 0))).where(self + y, self)
  def _floordiv_float(self, y: Tensor) -> Tensor:
    """floor(x / y) as torch computes it for floats, from the exact fmod: (x - fmod) / y, one less where fmod and y
    differ in sign, rounded to the nearest integer (so a quotient that rounds up to an integer, 1 // 0.1, is 9 not
    10); x / y where y is 0 (16-bit floats through float32)."""
    def f(a: Tensor, b: Tensor) -> Tensor:
      m = a._fmod_float(b)
      d = (a - m) / b
      d = (m.ne(0) & ((b < 0) ^ (m < 0))).where(d - 1, d)
      fl = d.floor()
      fl = (d - fl > 0.5).where(fl + 1, fl)
      return (b == 0).where(a / b, d.ne(0).where(fl, (a / b).signbit().where(-0.0, 0.0)))
    return self._in_float32_binary(y, f)
  def pow(self, y: Tensor | ConstType, reverse: bool = False) -> Tensor:
    # NOTE: bools raise to a power as ints (torch)
    if self.dtype is dtypes.bool and ((isinstance(y, int) and not isinstance(y, bool)) or
                                      (isinstance(y, Tensor) and dtypes.is_int(y.dtype))):
      return self.cast(dtypes.default_int).pow(y, reverse)
    # NOTE: an int tensor to a positive int power multiplies at any size, so it wraps as numpy's does
    if not reverse and isinstance(y, int) and not isinstance(y, bool) and (abs(y) <= 64 or
                                                                          (dtypes.is_int(self.dtype) and y > 0)):
      # NOTE: small integer exponents multiply (exact for ints, and what numpy users expect from x**2)
      if y == 0: return self.ones_like()
      acc, base, e = None, self, abs(y)
      while e:
        if e & 1: acc = base if acc is None else acc * base
        base, e = base * base, e >> 1
      assert acc is not None
      if y > 0: return acc
      if not dtypes.is_float(self.dtype): return self._int_pow_negative(self._const(y & 1, dtypes.bool))
      # NOTE: through the product the gradient at a zero base is 0 * inf; y * x**(y-1) is torch's (an infinity)
      return _with_gradient(acc.reciprocal(), (self,), lambda ctx, ret, x: (ctx * x.pow(y - 1) * y,))
    # NOTE: as torch, x ** 0.5 is sqrt(x) and x ** -0.5 is rsqrt(x), so -0.0 gives -0.0 and -inf (IEEE pow gives +)
    if not reverse and isinstance(y, float) and abs(y) == 0.5 and dtypes.is_float(self.dtype):
      return self.sqrt() if y > 0 else self.rsqrt()
    x, y = self._operands(y, "pow", reverse)
    if dtypes.is_int(x.dtype): return x._int_pow(y)
    dt = least_upper_float(x.dtype)
    xf, yf = x.cast(dt), y.cast(dt)
    mag = (yf * xf.abs().log2()).exp2()
    # NOTE: a negative base is defined only for integer exponents: odd ones flip the sign, others give nan
    y_int = yf.trunc() == yf
    y_odd = y_int & ((yf * 0.5).trunc() != yf * 0.5)
    ret = (xf < 0).where(y_int.where(y_odd.where(-mag, mag), xf._const(math.nan)), mag)
    # NOTE: -0.0 to an odd integer power keeps its sign: -0.0 ** -1 is -inf, -0.0 ** 3 is -0.0 (IEEE pow, as torch)
    ret = ((xf == 0) & y_odd & xf.signbit()).where(-mag, ret)
    ret = ((yf == 0) | (xf == 1)).where(1.0, ret)
    if not dtypes.is_float(x.dtype): return ret.round().cast(x.dtype)
    return _with_gradient(ret, (xf, yf), _pow_gradient)
  def _int_pow(self, y: Tensor) -> Tensor:
    """self ** y for int tensors of one dtype and shape: exact, by squaring over every bit of the exponent, so a result
    that overflows wraps as C's (and torch's) integer multiply does; negative exponents as _int_pow_negative."""
    signed = not dtypes.is_unsigned(y.dtype)
    e = (y < 0).where(0, y) if signed else y
    acc, base = self.ones_like(), self
    for i in range(8 * y.dtype.itemsize - int(signed)):
      acc = (e & (1 << i)).ne(0).where(acc * base, acc)
      base = base * base
    return (y < 0).where(self._int_pow_negative((y & 1).ne(0)), acc) if signed else acc
  def _int_pow_negative(self, odd: Tensor) -> Tensor:
    """self ** y for an int tensor and a negative int exponent y (odd: where y is odd): 1/self**|y| truncated, so 1 for
    a base of 1, +-1 for -1 and 0 for every other base (0 too, as torch's tensor pow)."""
    one, zero = self._const(1), self._const(0)
    if dtypes.is_unsigned(self.dtype): return (self == 1).where(one, zero)
    return (self == 1).where(one, (self == -1).where(odd.where(self._const(-1), one), zero))

  # NOTE: the other operators come from MathTrait through the named methods above; `//` is numpy's floor division
  # here, where the IR's (and MathTrait's) is C's truncating IDIV
  def __floordiv__(self, y: Tensor | ConstType) -> Tensor: return self.floordiv(y)
  def __rfloordiv__(self, y: Tensor | ConstType) -> Tensor: return self.floordiv(y, True)
  def __abs__(self) -> Tensor: return self.abs()
  def __matmul__(self, y: Tensor) -> Tensor: return self.matmul(y)
  def __rmatmul__(self, y: Tensor) -> Tensor:
    return Tensor(y).matmul(self) if not isinstance(y, Tensor) else y.matmul(self)
  def __iadd__(self, y: Any) -> Tensor: return self.assign(self + y)
  def __isub__(self, y: Any) -> Tensor: return self.assign(self - y)
  def __imul__(self, y: Any) -> Tensor: return self.assign(self * y)
  def __itruediv__(self, y: Any) -> Tensor: return self.assign(self / y)

  # ---- elementwise: comparisons, logic, bits ----
  # NOTE: <, >, <=, >=, &, |, ^ and eq/ne/bitwise_and/... come from MathTrait (through alu, which checks the dtypes);
  # unlike UOp's, a Tensor's == and != build comparisons, as numpy's and torch's do
  def __eq__(self, y: Tensor | ConstType) -> Tensor: return self.eq(y)  # type: ignore[override]
  def __ne__(self, y: Tensor | ConstType) -> Tensor: return self.ne(y)  # type: ignore[override]
  # NOTE: MathTrait's x <= y is not (x > y), which is True for a NaN: for floats it is (x < y) | (x == y), as torch's
  def le(self, y: Tensor | ConstType) -> Tensor:
    x, yy = self._operands(y, "<=")
    return (x < yy) | (x == yy) if dtypes.is_float(x.dtype) else (x > yy).logical_not()
  def ge(self, y: Tensor | ConstType) -> Tensor:
    x, yy = self._operands(y, ">=")
    return (x > yy) | (x == yy) if dtypes.is_float(x.dtype) else (x < yy).logical_not()
  def logical_not(self) -> Tensor: return self.cast(dtypes.bool)._binop(Ops.CMPNE, True, "logical_not")
  def logical_and(self, y: Tensor) -> Tensor:
    return self.cast(dtypes.bool) & (y.cast(dtypes.bool) if isinstance(y, Tensor) else bool(y))
  def logical_or(self, y: Tensor) -> Tensor:
    return self.cast(dtypes.bool) | (y.cast(dtypes.bool) if isinstance(y, Tensor) else bool(y))
  def logical_xor(self, y: Tensor) -> Tensor:
    return self.cast(dtypes.bool) ^ (y.cast(dtypes.bool) if isinstance(y, Tensor) else bool(y))
  def bitwise_not(self) -> Tensor:
    if self.dtype is dtypes.bool: return self.logical_not()
    if not dtypes.is_int(self.dtype): raise DTypeError(f"~: needs an int or bool tensor, got {self.dtype}")
    return self ^ -1 if not dtypes.is_unsigned(self.dtype) else self ^ int(dtypes.max(self.dtype))
  def __invert__(self) -> Tensor: return self.bitwise_not()
  def xor(self, y: Tensor | ConstType, reverse: bool = False) -> Tensor:
    """tinygrad's name for bitwise_xor (`^`): int and bool tensors only, a TypeError on floats."""
    return self.bitwise_xor(y, reverse)
  def _shift(self, op: Ops, y: Tensor | ConstType, name: str, reverse: bool = False) -> Tensor:
    """x << y or x >> y as torch: an amount out of [0, width) shifts every bit out (0, or the sign for >> of a signed
    int), where the IR's SHL/SHR take it modulo the width."""
    # NOTE: the shift amount takes the shifted value's dtype (it does not promote it, as torch)
    if reverse: return self.ufix(y)._shift(op, self, name)
    if not dtypes.is_int(self.dtype): raise DTypeError(f"{name}: shifts need an int tensor, got {self.dtype}")
    if isinstance(y, Tensor) and not dtypes.is_int(y.dtype):
      raise DTypeError(f"{name}: the shift amount must be an int tensor, got {y.dtype}")
    width = 8 * self.dtype.itemsize
    # NOTE: a Python amount is checked here; out of range it is the shift by width - 1 of >>, or 0
    if not isinstance(y, Tensor) and not 0 <= int(y) < width:
      if op is Ops.SHR and not dtypes.is_unsigned(self.dtype): return self._shift(op, width - 1, name)
      return self.const_like(0)._broadcast_to(self.shape)
    yy = y.cast(self.dtype) if isinstance(y, Tensor) else Tensor(_const_uop(int(y), self.dtype, self.device))
    x, yy = self._operands(yy, name)
    ret = x._new(x.uop.alu(op, yy.uop), yy)
    if not isinstance(y, Tensor): return ret
    # NOTE: the amount is compared in y's own dtype: cast to a narrower self it could wrap into range
    out = (y < 0) | (y >= width) if not dtypes.is_unsigned(y.dtype) else y >= width
    fill = x._shift(op, width - 1, name) if op is Ops.SHR and not dtypes.is_unsigned(x.dtype) else x.const_like(0)
    return out.where(fill, ret)
  def lshift(self, y: Tensor | ConstType, reverse: bool = False) -> Tensor:
    return self._shift(Ops.SHL, y, "<<", reverse)
  def rshift(self, y: Tensor | ConstType, reverse: bool = False) -> Tensor:
    return self._shift(Ops.SHR, y, ">>", reverse)

  def minimum(self, y: Tensor | ConstType) -> Tensor:
    x, y = self._operands(y, "minimum")
    if dtypes.is_float(x.dtype): return -((-x).maximum(-y))
    return (x < y).where(x, y)
  def where(self, x: Tensor | ConstType, y: Tensor | ConstType) -> Tensor:
    """self (as bool) selects x, else y; all three broadcast together."""
    if not isinstance(x, Tensor) and not isinstance(y, Tensor):
      dt = least_upper_dtype(dtypes.from_py(x), dtypes.from_py(y))
      x, y = Tensor(_const_uop(x, dt, self.device)), Tensor(_const_uop(y, dt, self.device))
    elif not isinstance(x, Tensor):
      x = Tensor(_const_uop(x, cast(Tensor, y)._scalar_dtype(x), self.device))
    elif not isinstance(y, Tensor): y = Tensor(_const_uop(y, x._scalar_dtype(y), self.device))
    x, y = x._operands(y, "where")
    if self.device != x.device:
      raise ArgumentError(f"where: the condition is on {self.device}, the values on {x.device}; move one with .to()")
    c = self.cast(dtypes.bool)
    shape = broadcast_shape(c.shape, x.shape, op="where")
    c, x, y = c._broadcast_to(shape, "where"), x._broadcast_to(shape, "where"), y._broadcast_to(shape, "where")
    return x._new(c.uop.alu(Ops.WHERE, x.uop, y.uop), y)
  def masked_fill(self, mask: Tensor, value: Tensor | ConstType) -> Tensor:
    """self where mask is False, value where it is True (mask broadcasts with self); the result keeps self's dtype, as
    torch.masked_fill (a bool tensor filled with 10 holds True)."""
    v = value.cast(self.dtype) if isinstance(value, Tensor) else Tensor(_const_uop(value, self.dtype, self.device))
    if v.ndim: raise ShapeMismatchError(f"masked_fill: value must be a scalar or a 0-d tensor, got shape {v.shape}")
    return mask.where(v, self)

  def cast(self, dtype: DTypeLike) -> Tensor:
    dt = _tensor_dtype(dtype)
    return self if self.dtype is dt else self._new(self.uop.cast(dt))
  def bitcast(self, dtype: DTypeLike) -> Tensor:
    dtype = _tensor_dtype(dtype)
    if dtype.itemsize != self.dtype.itemsize:
      raise ArgumentError(f"bitcast: {self.dtype} ({self.dtype.itemsize} bytes) and {dtype} ({dtype.itemsize} bytes) "
                          "differ in size")
    return self if self.dtype is dtype else Tensor(self.uop.bitcast(dtype))

  # ---- elementwise: math (composed from EXP2, LOG2, SIN, SQRT, RECIPROCAL, TRUNC) ----
  def _float(self) -> Tensor: return self.cast(least_upper_float(self.dtype))
  # NOTE: exp2, log2, sin, sqrt and reciprocal come from MathTrait (alu promotes ints to float)
  def exp(self) -> Tensor: return (self._float() * (1 / math.log(2))).exp2()
  def log(self) -> Tensor: return self.log2() * math.log(2)
  def rsqrt(self) -> Tensor: return self.sqrt().reciprocal()
  def cos(self) -> Tensor:
    # NOTE: 1 - 2*sin(x/2)**2, not sin(pi/2 - x): x/2 is exact, where pi/2 - x rounds away the low bits of a large x
    s = (self._float() * 0.5).sin()
    return 1 - 2 * s * s
  def tan(self) -> Tensor:
    """2 sin(x)**2 / sin(2x) (= sin(x)/cos(x)): near a pole cos(x) is small, and computed from x it keeps only an
    absolute accuracy (relative 2e-4 at |tan x| ~ 6000), where sin(2x) is accurate relative to its size (2x is exact
    and SIN reduces its argument). sin(x)/cos(x) where |x| < 1/2 (no pole, and no 0/0 at 0) and where 2x overflows.
    The gradient is torch's, 1 + tan(x)**2."""
    def f(x: Tensor) -> Tensor:
      # NOTE: 2x overflows from 2**emax on (the top binade)
      quot = (x.abs() < 0.5) | (x.abs() >= 2.0 ** (2 ** (dtypes.finfo(x.dtype)[0] - 1) - 1))
      s = x.sin()
      return quot.where(s / x.cos(), 2 * s * s / quot.where(1, x * 2).sin())
    xf = self._float()
    out = xf._in_float32(f)
    return _with_gradient(out, (xf,), lambda ctx, ret, x: (ctx * (1 + ret * ret),))
  def _horner(self, coeffs: Sequence[float]) -> Tensor:
    """coeffs[0] + x*(coeffs[1] + x*(...)), in self's dtype."""
    acc = self * coeffs[-1] + coeffs[-2]
    for c in reversed(coeffs[:-2]): acc = acc * self + c
    return acc
  def _odd_fold(self) -> tuple[Tensor, Tensor]:
    """(x < 0, |x|) for an odd function f(x) = sign(x) f(|x|); unlike abs(), |x| has the gradient 1 at 0."""
    neg = self < 0
    return neg, neg.where(-self, self)
  def _in_float32(self, fn: Callable[[Tensor], Tensor]) -> Tensor:
    """fn on self promoted to float (16-bit and 8-bit floats through float32, as torch computes them), back in the
    promoted dtype."""
    x = self._float()
    if x.dtype.itemsize >= 4: return fn(x)
    return fn(x.cast(dtypes.float32)).cast(x.dtype)
  def expm1(self) -> Tensor:
    """exp(x) - 1, accurate near 0 (a Taylor polynomial for |x| <= 0.5)."""
    def f(x: Tensor) -> Tensor:
      small = x.abs() <= 0.5
      xs = small.where(x, 0)
      p = xs * xs._horner([1, 1 / 2, 1 / 6, 1 / 24, 1 / 120, 1 / 720, 1 / 5040, 1 / 40320, 1 / 362880, 1 / 3628800])
      return small.where(p, x.exp() - 1)
    return self._in_float32(f)
  def log1p(self) -> Tensor:
    """log(1 + x), accurate near 0 (for |x| <= 0.5 the series of 2*atanh(s), s = x/(2+x))."""
    def f(x: Tensor) -> Tensor:
      small = x.abs() <= 0.5
      xs = small.where(x, 0)
      sx = xs / (xs + 2)
      p = sx * (sx * sx)._horner([2, 2 / 3, 2 / 5, 2 / 7, 2 / 9, 2 / 11, 2 / 13, 2 / 15])
      # NOTE: the other branch gets a harmless input (1) wherever it is not taken, so its gradient stays finite
      return small.where(p, small.where(1, x).add(1).log())
    return self._in_float32(f)
  def sinh(self) -> Tensor:
    def f(x: Tensor) -> Tensor:
      small = x.abs() < 1
      xs = small.where(x, 0)
      p = xs * (xs * xs)._horner([1, 1 / 6, 1 / 120, 1 / 5040, 1 / 362880, 1 / 39916800])
      # NOTE: e**(x - ln2) is e**x / 2 without the overflow of e**x near the top of the range
      return small.where(p, (x - _LN2).exp() - (-x - _LN2).exp())
    return self._in_float32(f)
  def cosh(self) -> Tensor:
    xf = self._float()
    out = xf._in_float32(lambda x: (x - _LN2).exp() + (-x - _LN2).exp())
    # NOTE: the composed gradient e**(x-ln2) - e**(-x-ln2) cancels near 0; sinh does not
    return _with_gradient(out, (xf,), lambda ctx, ret, x: (ctx * x.sinh(),))
  def atan(self) -> Tensor:
    """Range reduction to |t| <= tan(pi/8) (atan(x) = pi/2 - atan(1/x), atan(r) = pi/4 + atan((r-1)/(r+1))), then a
    polynomial fitted to atan(t)/t in t*t (relative error 2e-11)."""
    def f(x: Tensor) -> Tensor:
      neg, ax = x._odd_fold()
      big = ax > 1
      r = big.where(big.where(ax, 1).reciprocal(), ax)
      mid = r > _TAN_PI_8
      t = mid.where((r - 1) / (r + 1), r)
      a = t * (t * t)._horner(_ATAN_POLY)
      a = big.where(math.pi / 2 - mid.where(a + math.pi / 4, a), mid.where(a + math.pi / 4, a))
      return neg.where(-a, a)
    return self._in_float32(f)
  def asin(self) -> Tensor:
    # NOTE: asin(x) = 2 atan(x / (1 + sqrt(1 - x*x))): no division by zero at |x| = 1, accurate near it. The gradient
    # is torch's, 1/sqrt((1 - x)(1 + x)) (inf at +-1, where the composed one is nan)
    xf = self._float()
    out = xf._in_float32(lambda x: (x / (((1 - x) * (1 + x)).sqrt() + 1)).atan() * 2)
    return _with_gradient(out, (xf,), lambda ctx, ret, x: (ctx * ((1 - x) * (1 + x)).rsqrt(),))
  def acos(self) -> Tensor:
    # NOTE: acos(x) = 2 atan(sqrt((1 - x) / (1 + x))): accurate near 1, where pi/2 - asin(x) cancels
    xf = self._float()
    out = xf._in_float32(lambda x: ((1 - x) / (1 + x)).sqrt().atan() * 2)
    return _with_gradient(out, (xf,), lambda ctx, ret, x: (-ctx * ((1 - x) * (1 + x)).rsqrt(),))
  def asinh(self) -> Tensor:
    def f(x: Tensor) -> Tensor:
      neg, ax = x._odd_fold()
      # NOTE: above 2**12, sqrt(x*x + 1) is x to float32 precision, and x*x would overflow further up
      huge = ax > 4096
      xs = huge.where(1, ax)
      a = huge.where(huge.where(ax, 2).log() + _LN2, (xs + xs * xs / ((xs * xs + 1).sqrt() + 1)).log1p())
      return neg.where(-a, a)
    return self._in_float32(f)
  def acosh(self) -> Tensor:
    def f(x: Tensor) -> Tensor:
      huge = x > 4096
      xs = huge.where(2, x)
      # NOTE: log1p(t) with t = (x - 1) + sqrt((x - 1)(x + 1)) keeps its precision near 1, where acosh is small
      a = huge.where(huge.where(x, 2).log() + _LN2, ((xs - 1) + ((xs - 1) * (xs + 1)).sqrt()).log1p())
      # NOTE: below 1 the formula's log1p(-1) would give -inf; acosh is nan there
      return (x < 1).where(math.nan, a)
    # NOTE: torch's gradient 1/sqrt(x*x - 1): inf at +-1, where the composed one is nan
    xf = self._float()
    return _with_gradient(xf._in_float32(f), (xf,), lambda ctx, ret, x: (ctx * (x * x - 1).rsqrt(),))
  def atanh(self) -> Tensor:
    def f(x: Tensor) -> Tensor:
      neg, ax = x._odd_fold()
      a = (ax * 2 / (1 - ax)).log1p() * 0.5
      return neg.where(-a, a)
    # NOTE: torch's gradient 1/((1 - x)(1 + x)): inf at +-1 and 0 at +-inf, where the composed one is nan
    xf = self._float()
    return _with_gradient(xf._in_float32(f), (xf,), lambda ctx, ret, x: (ctx * ((1 - x) * (1 + x)).reciprocal(),))
  def erf(self) -> Tensor:
    """Polynomials fitted to erf(x)/x in x*x for |x| < 1 and to erfc(x)*exp(x*x) in 1/(1 + x/2) for 1 <= |x| <= 6
    (relative error below 1e-10); the gradient is exact, 2/sqrt(pi) * exp(-x*x)."""
    def f(x: Tensor) -> Tensor:
      neg, ax = x._odd_fold()
      small = ax < 1
      xs = small.where(ax, 0)
      xl = small.where(2, ax.minimum(6))
      tail = 1 - (-xl * xl).exp() * (xl * 0.5 + 1).reciprocal()._horner(_ERFC_POLY)
      a = small.where(xs * (xs * xs)._horner(_ERF_POLY), tail)
      return x.isnan().where(x, neg.where(-a, a))
    xf = self._float()
    out = xf._in_float32(f)
    return _with_gradient(out, (xf,), lambda ctx, ret, x: (ctx * (-x * x).exp() * (2 / math.sqrt(math.pi)),))
  def erfc(self) -> Tensor: return 1 - self.erf()
  def trunc(self) -> Tensor: return self if not dtypes.is_float(self.dtype) else self._new(self.uop.alu(Ops.TRUNC))
  def floor(self) -> Tensor:
    if not dtypes.is_float(self.dtype): return self
    t = self.trunc()
    return (self < t).where(t - 1, t)
  def ceil(self) -> Tensor:
    if not dtypes.is_float(self.dtype): return self
    t = self.trunc()
    return (self > t).where(t + 1, t)
  def round(self, decimals: int = 0) -> Tensor:
    """Round half to even, as numpy; to `decimals` decimal places as torch does it (x * 10**decimals rounded, divided
    back; a negative `decimals` rounds to tens, hundreds, ...), 16-bit floats through float32."""
    if not dtypes.is_float(self.dtype): return self
    if decimals:
      # NOTE: 10**-d is not exact in binary, so a negative d divides by 10**|d| where torch does (no extra rounding)
      if decimals > 0: return self._in_float32(lambda x: (x * 10.0 ** decimals).round() / 10.0 ** decimals)
      return self._in_float32(lambda x: (x / 10.0 ** -decimals).round() * 10.0 ** -decimals)
    # NOTE: the value is compared with t +- 0.5 (exact below 2**mantissa, and above it every value is an integer) rather
    # than its fraction self - t taken: a target may contract a product's subtraction into one FMA (docs/ir.md), which
    # sees the unrounded product (1.2345 * 1000 is 1234.5 rounded, 1234.50005 fused: a tie becomes "round away")
    t = self.trunc()
    neg = self < 0
    step = neg.where(-1.0, 1.0).cast(self.dtype)
    edge = t + step * 0.5
    t_odd = (t * 0.5).trunc() != t * 0.5
    exact = t.abs() < 2.0 ** dtypes.finfo(self.dtype)[1]
    away = exact & (neg.where(self < edge, self > edge) | ((self == edge) & t_odd))
    return away.where(t + step, t)
  def abs(self) -> Tensor:
    if dtypes.is_unsigned(self.dtype) or self.dtype is dtypes.bool: return self
    # NOTE: x*0 + 0 where x is neither < 0 nor > 0: +0 for +-0 and nan for nan, with the gradient 0 at 0 (as torch);
    # x*x would give the same values but a gradient 0 * 2x = nan at x = +-inf, where that branch is not taken
    return (self < 0).where(-self, (self > 0).where(self, self * 0 + 0))
  def sign(self) -> Tensor:
    if self.dtype is dtypes.bool: return self
    if dtypes.is_unsigned(self.dtype): return (self > 0).cast(self.dtype)
    # NOTE: nan is neither > 0 nor < 0, so its sign is 0 (torch's; numpy's is nan)
    return (self > 0).where(1, (self < 0).where(-1, 0)).cast(self.dtype)
  # ---- activations ----
  # NOTE: every branch of a where() gets an input that keeps it finite where it is not taken: the gradient of the
  # branch not taken is 0 * (its derivative), which is nan if that derivative overflowed
  def relu(self) -> Tensor:
    # NOTE: <= 0, not > 0: a NaN passes through with its gradient (torch's)
    return (self <= 0).where(0, self)
  def relu6(self) -> Tensor: return self.hardtanh(0, 6)
  def hardtanh(self, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """x clamped to [min_val, max_val]; the gradient is 1 strictly inside, 0 at and beyond the ends (as torch). An int
    tensor stays int, its bounds truncated toward zero (as torch)."""
    if dtypes.is_int(self.dtype): min_val, max_val = int(min_val), int(max_val)
    return (self <= min_val).where(min_val, (self >= max_val).where(max_val, self))
  def leakyrelu(self, neg_slope: float = 0.01) -> Tensor: return self.leaky_relu(neg_slope)
  def leaky_relu(self, neg_slope: float = 0.01) -> Tensor: return (self > 0).where(self, self * neg_slope)
  # NOTE: elu and celu take the negative branch where x <= 0, so a NaN goes the identity's way, with its gradient
  def elu(self, alpha: float = 1.0) -> Tensor:
    neg = self <= 0
    return neg.where(neg.where(self, 0).expm1() * alpha, self)
  def celu(self, alpha: float = 1.0) -> Tensor:
    neg = self <= 0
    return neg.where((neg.where(self, 0) * (1 / alpha)).expm1() * alpha, self)
  def selu(self) -> Tensor: return self.elu(_SELU_ALPHA) * _SELU_SCALE
  def sigmoid(self) -> Tensor:
    """1/(1 + e**-x) for x >= 0, e**x/(1 + e**x) below: e**-|x| never overflows, so values and gradients stay finite.
    The gradient, sigmoid(x) sigmoid(-x), is e**-|x| / (1 + e**-|x|)**2: no cancellation in 1 - sigmoid(x) near 1
    (torch's form), and no graph of the select's gradient to build."""
    x = self._float()
    neg, ax = x._odd_fold()
    z = (-ax).exp()
    r = (z + 1).reciprocal()
    # NOTE: the rule recomputes its terms from its input: one that holds the forward's tensors keeps them (and the
    # buffers they are realized into) alive as long as the output's graph is (an LLM's decode held 1.1 MB more)
    def rule(ctx: Tensor, _ret: Tensor, xi: Tensor) -> tuple[Tensor]:
      zi = (-xi.abs()).exp()
      return (ctx * (zi / ((zi + 1) * (zi + 1))),)
    return _with_gradient(neg.where(z * r, r), (x,), rule)
  def logsigmoid(self) -> Tensor:
    x = self._float()
    return x.minimum(0) - (-x.abs()).exp().log1p()
  def hardsigmoid(self) -> Tensor:
    """relu6(x + 3) / 6, with torch's gradient: 1/6 strictly inside (-3, 3), else 0."""
    x = self._float()
    return (x <= -3).where(0, (x >= 3).where(1, x * (1 / 6) + 0.5))
  def hardswish(self) -> Tensor:
    """x * relu6(x + 3) / 6, with torch's gradient (x/3 + 1/2 strictly inside (-3, 3), 0 at -3, 1 at 3)."""
    x = self._float()
    lo, hi = x <= -3, x >= 3
    # NOTE: the middle branch sees 0 where it is not taken, so its gradient stays finite at +-inf
    xm = (lo | hi).where(0, x)
    return lo.where(0, hi.where(x, xm * (xm + 3) * (1 / 6)))
  def softsign(self) -> Tensor: return self / (self.abs() + 1)
  def tanh(self) -> Tensor:
    """-expm1(-2|x|) / (2 + expm1(-2|x|)) with the sign of x: no cancellation near 0, no overflow at large |x|. The
    gradient is torch's, (1 - tanh(x)) (1 + tanh(x)), from the output: differentiated through its ~30 ops, a backward
    graph several times the size (each op another node to build in an eager step, and more ALU in its kernels)."""
    def f(x: Tensor) -> Tensor:
      neg, ax = x._odd_fold()
      e = (ax * -2).expm1()
      t = -e / (e + 2)
      return neg.where(-t, t)
    xf = self._float()
    return _with_gradient(xf._in_float32(f), (xf,), lambda ctx, ret, x: (ctx * ((1 - ret) * (1 + ret)),))
  def gelu(self, approximate: str = "tanh") -> Tensor:
    """approximate="tanh" (the default here): x * sigmoid(2 sqrt(2/pi) (x + 0.044715 x**3)); "none": x * Phi(x) with
    erf, torch's default."""
    x = self._float()
    if approximate == "none": return x * ((x * (1 / math.sqrt(2))).erf() + 1) * 0.5
    if approximate != "tanh": raise ArgumentError(f"gelu: approximate must be 'tanh' or 'none', got {approximate!r}")
    # NOTE: 16-bit floats in float32 (as torch): x**3 overflows a half at |x| > 40, and its gradient is then inf * 0
    return x._in_float32(lambda v: v * ((v + v * v * v * 0.044715) * (2 * math.sqrt(2 / math.pi))).sigmoid())
  def quick_gelu(self) -> Tensor: return self * (self * 1.702).sigmoid()
  def silu(self) -> Tensor: return self * self.sigmoid()
  def swish(self) -> Tensor: return self.silu()
  def softplus(self, beta: float = 1.0, threshold: float | None = None) -> Tensor:
    """log(1 + e**(beta x)) / beta as max(x, 0) + log1p(e**-|x|): exact at both ends, gradient sigmoid(beta x). With a
    threshold (torch's keyword), x itself (gradient 1) where beta x > threshold."""
    x = self._float() * beta
    ret = (x.maximum(0) + (-x.abs()).exp().log1p()) * (1 / beta)
    return ret if threshold is None else (x > threshold).where(self._float(), ret)
  def mish(self) -> Tensor: return self * self.softplus().tanh()
  def square(self) -> Tensor:
    # NOTE: a bool squares as an int (torch), not as bool * bool (which is logical and)
    return self.cast(dtypes.default_int).square() if self.dtype is dtypes.bool else self * self
  def clamp(self, min_: ConstType | Tensor | None = None, max_: ConstType | Tensor | None = None, *,
            min: ConstType | Tensor | None = None, max: ConstType | Tensor | None = None) -> Tensor:
    """Elements below min_ raised to it, above max_ lowered to it (scalars or tensors that broadcast); torch's keywords
    min= and max= are the same bounds. A nan stays nan."""
    if min is not None: min_ = min
    if max is not None: max_ = max
    if min_ is None and max_ is None: raise ArgumentError("clamp: give at least one of min and max")
    ret = self
    if min_ is not None: ret = (ret < min_).where(min_, ret)
    if max_ is not None: ret = (ret > max_).where(max_, ret)
    return ret
  def clip(self, min_: ConstType | Tensor | None = None, max_: ConstType | Tensor | None = None, *,
           min: ConstType | Tensor | None = None, max: ConstType | Tensor | None = None) -> Tensor:
    return self.clamp(min_, max_, min=min, max=max)
  def clamp_min(self, min: ConstType | Tensor) -> Tensor: return self.clamp(min_=min)
  def clamp_max(self, max: ConstType | Tensor) -> Tensor: return self.clamp(max_=max)
  def isnan(self) -> Tensor: return self != self
  def isinf(self, detect_positive: bool = True, detect_negative: bool = True) -> Tensor:
    if not dtypes.is_float(self.dtype): return self._const(False, dtypes.bool)
    pos, neg = self == math.inf, self == -math.inf
    if detect_positive and detect_negative: return pos | neg
    return pos if detect_positive else neg if detect_negative else self._const(False, dtypes.bool)
  def isfinite(self) -> Tensor:
    if not dtypes.is_float(self.dtype): return self._const(True, dtypes.bool)
    # NOTE: compared, not (self - self) == 0: a product's x - x may be contracted into an FMA, which is its rounding
    # error, not 0 (docs/ir.md); nan fails both comparisons
    return (self < math.inf) & (self > -math.inf)
  def nan_to_num(self, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None) -> Tensor:
    """nan, +inf and -inf replaced by the given values (torch.nan_to_num); the infinities default to the dtype's
    largest and smallest finite values. The gradient passes through the finite elements and is 0 at replaced ones.
    Int and bool tensors have nothing to replace and come back unchanged."""
    if not dtypes.is_float(self.dtype): return self
    e, m = dtypes.finfo(self.dtype)
    big = float(dtypes.max(self.dtype)) if self.dtype is dtypes.fp8e4m3 else (2 - 2.0 ** -m) * 2.0 ** (2 ** (e - 1) - 1)
    pos, neg = big if posinf is None else posinf, -big if neginf is None else neginf
    return self.isnan().where(nan, self.isinf(True, False).where(pos, self.isinf(False, True).where(neg, self)))
  def isclose(self, other: Tensor | ConstType, rtol: float = 1e-05, atol: float = 1e-08,
              equal_nan: bool = False) -> Tensor:
    """|self - other| <= atol + rtol * |other| elementwise (equal infinities are close, nan is close to nan only with
    equal_nan), as torch.isclose."""
    x, y = self._operands(other, "isclose")
    if x.dtype is dtypes.bool: return x == y
    xf, yf = x._float(), y._float()
    ret = (x == y) | (xf.isfinite() & yf.isfinite() & ((xf - yf).abs() <= atol + rtol * yf.abs()))
    return ret | (xf.isnan() & yf.isnan()) if equal_nan else ret
  def signbit(self) -> Tensor:
    """True where the sign bit is set: -0.0 and negative nans included (read from the bits)."""
    if dtypes.is_unsigned(self.dtype) or self.dtype is dtypes.bool: return self._const(False, dtypes.bool)
    if not dtypes.is_float(self.dtype): return self < 0
    return self.bitcast(_SIGNED_OF_SIZE[self.dtype.itemsize]) < 0
  def copysign(self, other: Tensor | ConstType) -> Tensor:
    """|self| with the sign bit of other (the gradient goes to self only, 0 at self == 0, as torch)."""
    x, y = self._operands(other, "copysign")
    x, y = x._float(), y._float()
    return y.signbit().where(-x.abs(), x.abs())
  def logaddexp(self, other: Tensor | ConstType) -> Tensor:
    """log(e**x + e**y) = max(x, y) + log1p(e**-|x - y|); equal operands (both infinities included) give x + ln2."""
    x, y = self._operands(other, "logaddexp")
    x, y = x._float(), y._float()
    tie = x == y
    d = tie.where(0, x - y)
    return tie.where(x * 0.5 + y * 0.5 + _LN2, x.maximum(y) + (-d.abs()).exp().log1p())
  def lerp(self, end: Tensor, weight: Tensor | ConstType) -> Tensor: return self + (end - self) * weight

  # ---- movement ----
  def reshape(self, shape: Any, *args: sint) -> Tensor:
    """The same elements in a new shape; one size may be -1 (inferred) and a None keeps the size of that axis."""
    s = argfix(shape, *args)
    if any(x is None for x in s):
      if any(x is None and k >= self.ndim for k, x in enumerate(s)):
        raise ArgumentError(f"reshape: a None keeps the size of the axis at its position, {s} has one past the "
                            f"{self.ndim} axes of {self.shape}")
      s = tuple(self.shape[k] if x is None else x for k, x in enumerate(s))
    if not all_concrete(s + self.shape): return self._reshape_symbolic(s)
    if sum(1 for x in s if x == -1) > 1: raise ArgumentError(f"reshape: at most one -1 in {s}")
    if -1 in s:
      known = prod(x for x in s if x != -1)
      if known == 0 or self.numel() % known: raise ArgumentError(f"reshape: cannot reshape {self.shape} to {s}")
      s = tuple(self.numel() // known if x == -1 else x for x in s)
    if any(not isinstance(x, int) or x < 0 for x in s): raise ArgumentError(f"reshape: bad shape {s}")
    if prod(s) != self.numel():
      raise ArgumentError(f"reshape: cannot reshape {self.shape} ({self.numel()} elements) to {s}")
    return self if s == self.shape else self._new(self.uop.reshape(s))
  def _reshape_symbolic(self, s: tuple[Any, ...]) -> Tensor:
    """reshape where a size is symbolic: equal sizes for every value of the variables, or, between a concrete and a
    symbolic shape, at the bindings (a tensor of the bound size given a symbolic shape: a TinyJit input of varying
    batch, docs/symbolic.md)."""
    if sum(1 for x in s if _is_int(x, -1)) > 1: raise ArgumentError(f"reshape: at most one -1 in {render_shape(s)}")
    if any(_is_int(x, -1) for x in s):
      known = sym_prod(x for x in s if not _is_int(x, -1))
      inferred = ssimplify(self.numel() // known) if isinstance(known, UOp) or known != 0 else 0
      if not sym_eq(ssimplify(inferred * known), self.numel()):
        raise ArgumentError(f"reshape: cannot infer the -1 of {render_shape(s)} from {render_shape(self.shape)}")
      s = tuple(inferred if _is_int(x, -1) else x for x in s)
    if not all(_size_ok(x) for x in s): raise ArgumentError(f"reshape: bad shape {render_shape(s)}")
    s = tuple(ssimplify(x) for x in s)
    try: u = self.uop.reshape(s)
    except ValueError as e: raise ArgumentError(str(e)) from None
    return self if u is self.uop else self._new(u)
  def view(self, shape: Any, *args: int) -> Tensor: return self.reshape(shape, *args)
  def permute(self, order: Any, *args: int) -> Tensor:
    o = tuple(self._axis(a) for a in argfix(order, *args))
    if sorted(o) != list(range(self.ndim)):
      # NOTE: torch raises RuntimeError for a wrong number of axes or a repeated one
      raise RuntimeError(f"permute: {o} is not a permutation of the axes of {self.shape}")
    return self if o == tuple(range(self.ndim)) else self._new(self.uop.permute(o))
  def transpose(self, dim0: int = 1, dim1: int = 0) -> Tensor:
    order = list(range(self.ndim))
    a, b = self._axis(dim0), self._axis(dim1)
    # NOTE: a 0-d tensor takes axis 0 or -1 (as torch) and has nothing to swap
    if self.ndim == 0: return self
    order[a], order[b] = order[b], order[a]
    return self.permute(order)
  @property
  def T(self) -> Tensor: return self.permute(tuple(range(self.ndim))[::-1])
  def rearrange(self, formula: str, **sizes: int) -> Tensor:
    """einops-style reshape and transpose in one: `x.rearrange("b (h w) c -> b c h w", h=4)`. Each side lists axes by
    name; `(a b)` is one axis of size a*b, `...` the axes not named, `1` (or `()`) a size-1 axis. Both sides name the
    same axes; one unknown size per group is worked out from the shape, the others come from `sizes`."""
    def bad(msg: str) -> ArgumentError: return ArgumentError(f"rearrange {formula!r}: {msg}")
    def parse(side: str, where: str) -> list[list[str]]:
      groups: list[list[str]] = []
      cur: list[str] | None = None
      for tok in side.replace("(", " ( ").replace(")", " ) ").split():
        if tok == "(":
          if cur is not None: raise bad(f"nested parentheses on the {where}")
          cur = []
        elif tok == ")":
          if cur is None: raise bad(f"unbalanced ')' on the {where}")
          groups.append(cur)
          cur = None
        elif tok != "1" and tok != "..." and not tok.isidentifier():
          raise bad(f"bad axis name {tok!r} on the {where}")
        elif cur is not None: cur.append(tok)
        else: groups.append([tok])
      if cur is not None: raise bad(f"unbalanced '(' on the {where}")
      return groups
    if formula.count("->") != 1: raise bad("needs exactly one '->'")
    lhs, rhs = (parse(x, w) for x, w in zip(formula.split("->"), ("left", "right")))
    def names(gs: list[list[str]]) -> list[str]: return [n for g in gs for n in g if n != "1"]
    for gs, w in ((lhs, "left"), (rhs, "right")):
      if len(set(ns := names(gs))) != len(ns): raise bad(f"an axis repeats on the {w}")
      if sum(g.count("...") for g in gs) > 1 or (w == "left" and any("..." in g and g != ["..."] for g in gs)):
        raise bad(f"'...' at most once on the {w} (and not inside parentheses on the left)")
    if set(names(lhs)) != set(names(rhs)):
      raise bad(f"the sides name different axes: {sorted(set(names(lhs)) ^ set(names(rhs)))}")
    if unknown := sorted(set(sizes) - set(names(lhs))): raise bad(f"sizes for {unknown} not in it")
    n_ell = self.ndim - (len(lhs) - 1) if ["..."] in lhs else 0
    if len(lhs) - (["..."] in lhs) > self.ndim or (["..."] not in lhs and len(lhs) != self.ndim):
      raise bad(f"the left side has {len(lhs)} axes, the tensor {self.ndim} ({self.shape})")
    ell = [f"...{i}" for i in range(n_ell)]
    size: dict[str, int] = dict(sizes)
    flat_lhs: list[str] = []
    dims = iter(self.int_shape("rearrange"))
    for g in lhs:
      if g == ["..."]:
        for e in ell: size[e] = next(dims)
        flat_lhs += ell
        continue
      d = next(dims)
      known = prod(size[n] for n in g if n != "1" and n in size)
      free = [n for n in g if n != "1" and n not in size]
      if len(free) > 1: raise bad(f"can't split {d} into {g}: give the sizes of {free[1:]}")
      if free:
        if known == 0 or d % known: raise bad(f"axis of size {d} is not divisible by {known}")
        size[free[0]] = d // known
      elif known != d: raise bad(f"group {g} has size {known}, the axis {d}")
      flat_lhs += [n for n in g if n != "1"]
    def expand(g: list[str]) -> list[str]: return [n2 for n in g if n != "1" for n2 in (ell if n == "..." else [n])]
    flat_rhs = [n for g in rhs for n in expand(g)]
    x = self.reshape(tuple(size[n] for n in flat_lhs)).permute(tuple(flat_lhs.index(n) for n in flat_rhs))
    out = [d for g in rhs for d in ([size[e] for e in ell] if g == ["..."] else [prod(size[n] for n in expand(g))])]
    return x.reshape(tuple(out))
  def expand(self, shape: Any, *args: sint) -> Tensor:
    s = argfix(shape, *args)
    nd = len(s)
    base = (1,) * (nd - self.ndim) + self.shape
    s = tuple(b if x == -1 else x for x, b in zip(s, base))
    return self._broadcast_to(s, "expand")
  def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    if self.ndim == 0: return self.reshape(1)
    a, b = self._axis(start_dim), self._axis(end_dim)
    return self.reshape(self.shape[:a] + (prod(self.shape[a:b + 1]),) + self.shape[b + 1:])
  def unflatten(self, dim: int, sizes: tuple[int, ...]) -> Tensor:
    d = self._axis(dim)
    return self.reshape(self.shape[:d] + tuple(sizes) + self.shape[d + 1:])
  def squeeze(self, dim: int | Sequence[int] | None = None) -> Tensor:
    """Drop size-1 axes: all of them, or those of dim (an axis or a sequence of axes) that have size 1."""
    if dim is None: return self.reshape(tuple(s for s in self.shape if s != 1))
    ds = self._axes(dim)
    return self.reshape(tuple(s for k, s in enumerate(self.shape) if not (k in ds and s == 1)))
  def unsqueeze(self, dim: int) -> Tensor:
    d = self._axis(dim, self.ndim + 1)
    return self.reshape(self.shape[:d] + (1,) + self.shape[d:])
  def shrink(self, arg: Sequence[tuple[sint, sint] | None]) -> Tensor:
    """Keep [begin, end) of each axis (None: all of it). A symbolic bound must stay inside the axis for every value of
    its variables."""
    if len(arg) != self.ndim: raise ArgumentError(f"shrink: {len(arg)} ranges for the {self.ndim} axes of {self.shape}")
    a = tuple((0, s) if r is None else (_sym_arg(r[0], "shrink"), _sym_arg(r[1], "shrink"))
              for r, s in zip(arg, self.shape))
    if not all_concrete(flatten(a) + list(self.shape)):
      try: u = self.uop.shrink(a)
      except ValueError as e: raise ArgumentError(str(e)) from None
      return self if u is self.uop else self._new(u)
    if any(not 0 <= b <= e <= s for (b, e), s in zip(a, self.shape)):
      raise ArgumentError(f"shrink: {a} does not fit shape {self.shape}")
    return self if a == tuple((0, s) for s in self.shape) else self._new(self.uop.shrink(a))
  def pad(self, padding: Sequence[Any], value: ConstType = 0.0, mode: str = "constant") -> Tensor:
    """Per-axis (before, after) pairs (None = no pad), or torch's flat form (last axis first). Negative amounts
    shrink. mode "constant" fills with value; "reflect", "replicate" and "circular" fill from the tensor's own edges,
    as torch (movement ops only)."""
    if mode not in ("constant", "reflect", "replicate", "circular"):
      raise UnsupportedError(f"pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', got {mode!r}")
    if mode != "constant" and value != 0:
      raise ArgumentError(f"pad: a fill value only goes with mode 'constant', got value={value!r} with mode {mode!r}")
    if all(isinstance(p, (int, UOp)) for p in padding):
      if len(padding) % 2 or len(padding) // 2 > self.ndim:
        raise ArgumentError(f"pad: flat padding {tuple(padding)} for shape {self.shape}")
      flat = [_sym_arg(p, "pad") for p in padding]
      pairs = [(0, 0)] * (self.ndim - len(flat) // 2) + [(flat[i], flat[i + 1]) for i in range(len(flat) - 2, -1, -2)]
    else: pairs = [(0, 0) if p is None else (_sym_arg(p[0], "pad"), _sym_arg(p[1], "pad")) for p in padding]
    if len(pairs) != self.ndim: raise ArgumentError(f"pad: {len(pairs)} pairs for the {self.ndim} axes of {self.shape}")
    if not all_concrete(flatten(pairs)): return self._pad_symbolic(pairs, value, mode)
    pos = tuple((max(b, 0), max(e, 0)) for b, e in cast(list[tuple[int, int]], pairs))
    if mode in ("reflect", "replicate") and any(p != (0, 0) for p in pos):
      # NOTE: as torch, reflect and replicate take the edges of the whole tensor, then negative amounts crop the result
      # (circular crops first, then wraps the cropped tensor)
      x = self._pad_edges(pos, mode)
      return x.shrink([(-min(b, 0), s + min(e, 0)) for (b, e), s in zip(pairs, x.shape)])
    x = self.shrink([(-min(b, 0), s + min(e, 0)) for (b, e), s in zip(pairs, self.shape)])
    if all(p == (0, 0) for p in pos): return x
    if mode == "circular": return x._pad_edges(pos, mode)
    _check_size(tuple(s + b + e for s, (b, e) in zip(x.shape, pos)), self.dtype, "pad")
    ret = x._new(x.uop.pad(pos))
    if value == 0: return ret
    inside = Tensor(_const_uop(True, dtypes.bool, self.device, x.shape).pad(pos))
    # NOTE: the fill takes the tensor's dtype (as torch: an int tensor padded with 1.5 holds 1)
    return inside.where(ret, Tensor(_const_uop(value, self.dtype, self.device)))
  def _pad_symbolic(self, pairs: list[tuple[sint, sint]], value: ConstType, mode: str) -> Tensor:
    """pad by symbolic amounts: "constant" mode, amounts >= 0 for every value of their variables."""
    if mode != "constant":
      raise UnsupportedError(f"pad: symbolic amounts {render_shape(tuple(flatten(pairs)))} need mode 'constant'")
    if any(vmin(x) < 0 for x in flatten(pairs)):
      raise ArgumentError(f"pad: symbolic amounts {render_shape(tuple(flatten(pairs)))} must be >= 0 for every value "
                          "of their variables (shrink for a crop)")
    pos = tuple(pairs)
    ret = self._new(self.uop.pad(pos))
    if value == 0: return ret
    inside = Tensor(_const_uop(True, dtypes.bool, self.device, self.shape).pad(pos))
    return inside.where(ret, Tensor(_const_uop(value, self.dtype, self.device)))
  def flip(self, axis: int | Sequence[int] = _AXIS_DEFAULT, *args: int, dims: int | Sequence[int] | None = None,
           dim: int | Sequence[int] | None = None) -> Tensor:
    """Reverse the order along axis (one or several; torch's keyword is dims)."""
    axis = _axis_or_dim(axis, dims if dims is not None else dim, "flip")
    if axis is None: raise ArgumentError("flip: give the axes to flip")
    axl = [self._axis(a) for a in argfix(axis, *args)]
    if len(set(axl)) != len(axl): raise RuntimeError(f"flip: axis {argfix(axis, *args)} repeats an axis")
    ax = set(axl)
    return self._new(self.uop.flip(tuple(i in ax for i in range(self.ndim)))) if ax else self
  def repeat(self, repeats: Any, *args: int) -> Tensor:
    r = argfix(repeats, *args)
    if len(r) < self.ndim: raise ArgumentError(f"repeat: {len(r)} repeats for the {self.ndim} axes of {self.shape}")
    base = (1,) * (len(r) - self.ndim) + self.shape
    x = self.reshape(base).reshape(flatten((1, s) for s in base)).expand(flatten(zip(r, base)))
    return x.reshape(tuple(a * b for a, b in zip(r, base)))
  def cat(self, *args: Tensor, dim: int = 0) -> Tensor:
    """Join tensors along dim; their dtypes promote together. As torch, a 1-d empty tensor (shape (0,)) joins any cat
    as nothing, whatever the others' rank."""
    # NOTE: Tensor.cat([a, b]) (torch's form) passes the list as self
    ts = [*self, *args] if isinstance(self, (list, tuple)) else [self, *args]
    if not ts: raise ArgumentError("cat: needs at least one tensor")
    if any(not isinstance(t, Tensor) for t in ts):
      raise TypeError(f"cat: takes tensors, got {[type(t).__name__ for t in ts]}")
    self = ts[0]
    if any(t.ndim == 0 for t in ts):
      raise ShapeMismatchError("cat: 0-d tensors cannot be concatenated; use Tensor.stack or reshape(1) first")
    dt = least_upper_dtype(*(t.dtype for t in ts))
    ts = [t for t in ts if t.shape != (0,)] or [self]
    x = ts[0]
    if x.shape == (0,): return x.cast(dt)
    d = x._axis(dim)
    for t in ts[1:]:
      if t.ndim != x.ndim or any(not sym_eq(a, b) for i, (a, b) in enumerate(zip(t.shape, x.shape)) if i != d):
        raise ShapeMismatchError(f"cat: shapes {render_shape(x.shape)} and {render_shape(t.shape)} differ outside axis "
                                 f"{d}")
    ts = [t.cast(dt) for t in ts]
    total, off, ret = sum(t.shape[d] for t in ts), cast(sint, 0), None
    for t in ts:
      p = t.pad([(off, total - off - t.shape[d]) if i == d else (0, 0) for i in range(x.ndim)])
      ret = p if ret is None else (ret | p if dt is dtypes.bool else ret + p)
      off += t.shape[d]
    assert ret is not None
    return ret
  def stack(self: Tensor | Sequence[Tensor], *ts: Tensor, dim: int = 0) -> Tensor:
    """`a.stack(b, c)`, `Tensor.stack(a, b, c)` and torch's `Tensor.stack([a, b, c])`: the tensors along a new axis."""
    tl = [*self, *ts] if isinstance(self, (list, tuple)) else [cast(Tensor, self), *ts]
    if not tl: raise ArgumentError("stack: needs at least one tensor")
    return tl[0].unsqueeze(dim).cat(*[t.unsqueeze(dim) for t in tl[1:]], dim=dim)
  def split(self, sizes: int | Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
    d = self._axis(dim)
    n = _int(self.shape[d], "split")
    sz = [min(sizes, n - i) for i in range(0, n, sizes)] if isinstance(sizes, int) else list(sizes)
    if isinstance(sizes, int) and sizes <= 0: raise ArgumentError(f"split: size must be positive, got {sizes}")
    if sum(sz) != n: raise ArgumentError(f"split: sizes {sz} do not add up to {n} (axis {d} of {self.shape})")
    offs = [sum(sz[:i]) for i in range(len(sz))]
    return tuple(self.shrink([(o, o + s) if i == d else None for i in range(self.ndim)]) for o, s in zip(offs, sz))
  def chunk(self, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    if chunks <= 0: raise ArgumentError(f"chunk: chunks must be positive, got {chunks}")
    n = _int(self.shape[self._axis(dim)], "chunk")
    return self.split(max(1, ceildiv(n, chunks)), dim) if n else (self,)

  # ---- indexing ----
  def _index_entries(self, indices: Any) -> list[Any]:
    """The index as a list of entries: int, slice, None, Ellipsis, bool, Tensor (int or bool) or numpy array (int or
    bool). A top-level list is a tuple of indices when it holds a sequence, a tensor, a slice, None or an Ellipsis
    (torch's rule, so x[[a, b]] is x[a, b]; numpy would make one array of it), else it is one index array."""
    if isinstance(indices, tuple): raw = list(indices)
    elif isinstance(indices, list) and any(isinstance(i, (list, tuple, Tensor, np.ndarray, slice)) or i is None or
                                           i is Ellipsis for i in indices): raw = list(indices)
    else: raw = [indices]
    return [self._index_entry(i) for i in raw]
  def _index_entry(self, i: Any) -> Any:
    if i is None or i is Ellipsis or isinstance(i, (slice, bool)): return i
    if isinstance(i, UOp): return _sym_arg(i, "index")
    if isinstance(i, np.bool_): return bool(i)
    if isinstance(i, (int, np.integer)): return int(i)
    if isinstance(i, Tensor):
      if not (dtypes.is_int(i.dtype) or i.dtype is dtypes.bool):
        raise IndexError(f"tensors used as indices must be int or bool tensors, got {i.dtype} (shape {i.shape})")
      return i
    if isinstance(i, (list, tuple)) and Tensor._holds_tensor(i):
      # NOTE: tensors inside a list are one index array, their values stacked (as numpy makes an array of the list)
      parts = [self._index_entry(e) if isinstance(e, (list, tuple, Tensor)) else Tensor(e, device=self.device)
               for e in i]
      if not parts: return np.zeros((0,), np.int64)
      bool_ = all(p.dtype is dtypes.bool for p in parts)
      return Tensor.stack(*[p.cast(dtypes.bool if bool_ else dtypes.int32) for p in parts])
    if isinstance(i, (list, tuple, np.ndarray)):
      arr = np.asarray(i)
      if arr.size == 0 and arr.dtype != np.bool_: arr = arr.astype(np.int64)
      if arr.dtype == np.bool_ or np.issubdtype(arr.dtype, np.integer): return arr
      raise IndexError(f"index arrays must hold ints or bools, got {arr.dtype} values in {i!r}")
    raise IndexError(f"index {i!r} of type {type(i).__name__} is not supported: use ints, slices, None, ..., lists or "
                     "int/bool tensors")
  @staticmethod
  def _holds_tensor(x: Any) -> bool:
    return isinstance(x, Tensor) or (isinstance(x, (list, tuple)) and any(Tensor._holds_tensor(e) for e in x))
  @staticmethod
  def _index_consumes(i: Any) -> int:
    """How many axes of the indexed tensor an index entry covers."""
    if i is None or i is Ellipsis or isinstance(i, bool): return 0
    if isinstance(i, (Tensor, np.ndarray)) and i.dtype in (dtypes.bool, np.bool_): return i.ndim
    return 1
  def _index_tensor(self, i: Any, n: sint, d: int) -> Tensor:
    """An int index (Python int, numpy array or tensor) into axis d of size n as an int tensor. Host values are checked
    against the size here; a tensor's values are not known before it runs (an out-of-range one selects nothing)."""
    if isinstance(i, Tensor): return i
    arr = np.asarray(i, dtype=np.int64)
    if isinstance(n, UOp):
      # NOTE: the kernel serves every binding: a host index must be in range at the axis' least size
      if arr.size and (arr.min() < 0 or arr.max() >= vmin(n)):
        raise IndexError(f"index {arr.min() if arr.min() < 0 else arr.max()} into axis {d} of symbolic size "
                         f"{render_sint(n)}: a host index must be in [0, {vmin(n)}) for every value of the variables")
      return Tensor(_const_uop(int(arr), dtypes.int32, self.device)) if arr.ndim == 0 else \
        Tensor(arr.astype(np.int32), device=self.device)
    if arr.size and (arr.min() < -n or arr.max() >= n):
      bad = int(arr.min()) if arr.min() < -n else int(arr.max())
      raise IndexError(f"index {bad} is out of bounds for axis {d} with size {n} (shape {self.shape})")
    arr = np.where(arr < 0, arr + n, arr).astype(np.int32)
    if arr.ndim == 0: return Tensor(_const_uop(int(arr), dtypes.int32, self.device))
    return Tensor(arr, device=self.device)
  def __getitem__(self, indices: Any) -> Tensor:
    """numpy indexing: ints, slices, None, ..., index arrays (lists, numpy arrays, int tensors) and bool masks. Index
    arrays broadcast together; their dims replace the indexed axes when those are adjacent in the index, else they go
    first (numpy's rule, ints next to index arrays counting as index arrays). A bool mask tensor selects as many
    elements as it holds True values, which only its data tells: it is read back to the host (one sync; the result
    still has gradients). Everything else stays lazy."""
    idx = self._index_entries(indices)
    if sum(i is Ellipsis for i in idx) > 1: raise IndexError("an index can only have a single ellipsis ('...')")
    n_real = sum(self._index_consumes(i) for i in idx)
    if n_real > self.ndim: raise IndexError(f"too many indices for tensor of shape {self.shape}: {n_real} were indexed")
    if any(i is Ellipsis for i in idx):
      e = next(k for k, i in enumerate(idx) if i is Ellipsis)
      idx = idx[:e] + [slice(None)] * (self.ndim - n_real) + idx[e + 1:]
    else: idx = idx + [slice(None)] * (self.ndim - n_real)
    # a bool mask over k axes is the k int arrays of its nonzero positions (numpy)
    flat: list[Any] = []
    d = 0
    for i in idx:
      if isinstance(i, (Tensor, np.ndarray)) and i.dtype in (dtypes.bool, np.bool_):
        if i.ndim == 0: flat.append(bool(i.item())); continue
        if tuple(i.shape) != self.shape[d:d + i.ndim]:
          raise IndexError(f"the shape {tuple(i.shape)} of the boolean mask does not match the shape "
                           f"{self.shape[d:d + i.ndim]} of axes {d}..{d + i.ndim - 1} of the tensor {self.shape}")
        flat.extend(np.nonzero(i if isinstance(i, np.ndarray) else i.numpy()))
        d += i.ndim
      else:
        flat.append(i)
        d += self._index_consumes(i)
    has_adv = any(isinstance(i, (Tensor, np.ndarray, bool)) for i in flat)
    # basic indexing: shrink, flip and stride per axis
    shrinks: list[tuple[sint, sint]] = []
    flips: list[bool] = []
    strides: list[int] = []
    new_shape: list[sint] = []
    adv: list[tuple[int, Tensor, sint]] = []
    d = 0
    for i in flat:
      if i is None: new_shape.append(1); continue
      if isinstance(i, bool):
        # NOTE: a 0-d bool mask adds an axis of size 1, picked by [0] (True) or by nothing (False), as numpy
        adv.append((len(new_shape), Tensor(np.zeros(1 if i else 0, np.int32), device=self.device), 1))
        new_shape.append(1)
        continue
      n = self.shape[d]
      if isinstance(i, slice) and any(isinstance(v, UOp) for v in (i.start, i.stop, i.step, n)):
        lo, hi = self._sym_slice(i, n, d)
        shrinks.append((lo, hi)); flips.append(False); strides.append(1); new_shape.append(ssimplify(hi - lo))
      elif isinstance(i, UOp):
        if has_adv: raise IndexError(f"a symbolic index ({render_sint(i)}) next to index arrays is not supported")
        shrinks.append((i, i + 1)); flips.append(False); strides.append(1)
      elif isinstance(i, slice):
        start, stop, step = i.indices(cast(int, n))
        cnt = len(range(start, stop, step))
        if cnt == 0: shrinks.append((0, 0)); flips.append(False); strides.append(1)
        elif step > 0: shrinks.append((start, start + (cnt - 1) * step + 1)); flips.append(False); strides.append(step)
        else: shrinks.append((start + (cnt - 1) * step, start + 1)); flips.append(True); strides.append(-step)
        new_shape.append(cnt)
      elif isinstance(i, int) and not has_adv:
        # NOTE: on a symbolic axis the index must be in range for every value of the variables
        if not (vmin(n) > i if i >= 0 else vmin(n) >= -i):
          least = f" (its least value {vmin(n)}: a kernel serves every binding)" if isinstance(n, UOp) else ""
          raise IndexError(f"index {i} is out of bounds for axis {d} with size {render_sint(n)}{least} (shape "
                           f"{render_shape(self.shape)})")
        at: sint = i + n if i < 0 else i
        shrinks.append((at, at + 1)); flips.append(False); strides.append(1)
      else:
        # NOTE: next to index arrays, ints are index arrays too (numpy), which decides where the result dims go (torch
        # selects by the ints first, which differs where an int sits across a slice from the arrays: x[1, :, a, b])
        shrinks.append((0, n)); flips.append(False); strides.append(1)
        adv.append((len(new_shape), self._index_tensor(i, n, d), n)); new_shape.append(n)
      d += 1
    x = self.shrink(shrinks).flip([k for k, f in enumerate(flips) if f])
    if any(s > 1 for s in strides):
      # NOTE: a step other than 1 is on a concrete axis (a symbolic slice has step 1)
      cells = [m if s == 1 else ceildiv(_int(m, "a strided slice"), s) for m, s in zip(x.shape, strides)]
      x = x.pad([(0, 0) if s == 1 else (0, c * s - m) for c, m, s in zip(cells, x.shape, strides)])
      x = x.reshape(flatten((c, s) for c, s in zip(cells, strides)))
      x = x.shrink(flatten(((0, c), (0, 1)) for c in cells))
    x = x.reshape(tuple(new_shape))
    return x._advanced_index(adv) if adv else x

  def _sym_slice(self, i: slice, n: sint, d: int) -> tuple[sint, sint]:
    """A slice of axis d (size n) where a bound or the size is symbolic: step 1, bounds inside the axis for every value
    of the variables (a negative int counts from the end, as in Python; nothing is clipped)."""
    if i.step not in (None, 1):
      raise IndexError(f"a slice with a symbolic bound or axis takes step 1, got {i} on axis {d} of "
                       f"{render_shape(self.shape)}")
    def bound(v: Any, default: sint) -> sint:
      if v is None: return default
      v = _sym_arg(v, "index")
      return ssimplify(n + v) if not isinstance(v, UOp) and v < 0 else v
    b, e = bound(i.start, 0), bound(i.stop, n)
    if not (vmin(b) >= 0 and sym_le(b, e) and sym_le(e, n)):
      raise IndexError(f"slice [{render_sint(b)}:{render_sint(e)}] of axis {d} (size {render_sint(n)}) of "
                       f"{render_shape(self.shape)} does not stay inside the axis for every value of its variables "
                       "(symbolic slices are not clipped)")
    return b, e
  def _advanced_index(self, adv: list[tuple[int, Tensor, sint]]) -> Tensor:
    """numpy advanced indexing by one-hot compare and sum (which codegen turns into loads of the picked elements:
    codegen/gather.py): the index tensors broadcast together; their dims replace the indexed axes in place when those
    are adjacent, else they go first."""
    dims = [a[0] for a in adv]
    # NOTE: a narrow index (int8, uint16) widened first: `i + n` with an axis longer than its dtype would not fit
    idxs = [(w < 0).where(w + n, w) if not dtypes.is_unsigned(i.dtype) else w
            for _, i, n in adv for w in (_wide_index(i),)]
    bshape = broadcast_shape(*(i.shape for i in idxs), op="index")
    rest = [k for k in range(self.ndim) if k not in dims]
    xp = self.permute(rest + dims)
    rshape, nshape = tuple(self.shape[k] for k in rest), tuple(self.shape[k] for k in dims)
    # NOTE: several index tensors are one row-major index into the indexed axes flattened (-1 where any is out of its
    # range), compared with one arange: a single select over one range, which codegen loads directly (a mask of one
    # compare per axis, their AND over every combination, was stored by the scheduler and summed over all of them)
    # NOTE: in int64 where an index is 64-bit (cast to int32, 2^32 + 5 would wrap to 5 and pick it) or the axes'
    # product is over int32
    wide = dtypes.int64 if not all_int(nshape) or prod(cast(tuple[int, ...], nshape)) > dtypes.max(dtypes.int32) or \
      any(i.dtype.itemsize > 4 for i in idxs) else dtypes.int32
    flat: Tensor | None = None
    ok: Tensor | None = None
    for i, n in zip(idxs, nshape):
      ib = i._broadcast_to(bshape, "index").cast(wide)
      inside = (ib >= 0) & (ib < n)
      flat = ib if flat is None else flat * n + ib
      ok = inside if ok is None else ok & inside
    assert flat is not None and ok is not None
    total = prod(nshape)
    flat = ok.where(flat, -1)
    ar = Tensor._arange_index(total, self.device).cast(wide)
    xe = xp.reshape(rshape + (1,) * len(bshape) + (total,))
    mask = flat.reshape((1,) * len(rshape) + bshape + (1,)) == ar.reshape((1,) * (len(rshape) + len(bshape)) + (total,))
    out = mask.where(xe, 0).sum(-1).cast(self.dtype)
    rb = rshape + bshape
    if dtypes.is_float(self.dtype) and all_int(rb + nshape) and total < dtypes.max(dtypes.int32) and \
       (rows := prod(cast(tuple[int, ...], rshape))) > 1 and rows * prod(bshape) * total > ADVANCED_INDEX_SEGMENT_WORK:
      # the gradient as the segment sums of the upstream rows by their flat index, not the select's (a compare of each
      # index with every position, for each element of the rest)
      nr, big = len(rshape), prod(cast(tuple[int, ...], bshape))
      fi = flat.reshape(big)
      def rule(up: Tensor, _ret: Tensor, x: Tensor) -> tuple[Tensor]:
        v = up.permute(list(range(nr, len(rb))) + list(range(nr))).reshape(big, rows)
        return (Tensor._segment_sums(fi, v, cast(int, total)).cast(x.dtype).permute(1, 0).reshape(x.shape),)
      out = _with_gradient(out, (xp,), rule)
    # the index dims go where the indexed axes were when those are adjacent, else first (numpy's rule)
    p = dims[0] if dims == list(range(dims[0], dims[0] + len(dims))) else 0
    nb = len(bshape)
    return out.permute(list(range(p)) + list(range(len(rshape), len(rshape) + nb)) + list(range(p, len(rshape))))

  def __setitem__(self, indices: Any, v: Any) -> None:
    """x[idx] = v: the selected elements take v (broadcast to the selection); x is updated in place and realized."""
    entries = self._index_entries(indices)
    basic = not any(isinstance(i, (Tensor, np.ndarray, bool)) for i in entries)
    on_buffer = base_buffer(self.uop) is not None or _is_writable_view(self.uop)
    if basic and (on_buffer or not (self.requires_grad or (isinstance(v, Tensor) and v.requires_grad))):
      # NOTE: slices, ints, None and ... select a view of the buffer: write v through it (an ASSIGN), no one-hot
      if not on_buffer: self.realize()
      if self._setitem_per_shard(entries, v): return
      view = self[indices]
      vt = v if isinstance(v, Tensor) else Tensor(v, device=self.device, dtype=self.dtype)
      view.assign(vt.cast(self.dtype)._broadcast_to(view.shape, "setitem")).realize()
      return
    if (m := self._leading_mask(entries)) is not None and self._fits_mask_value(m, v):
      # NOTE: a mask write of a value that broadcasts to the unmasked axes is a where: no sync, no one-hot
      mm = m.reshape(m.shape + (1,) * (self.ndim - m.ndim))
      vt = v.cast(self.dtype) if isinstance(v, Tensor) else v
      self.assign(mm.where(vt, self)).realize()
      return
    self.assign(self._index_write(indices, v, accumulate=False)).realize()
  def _setitem_per_shard(self, entries: list[Any], v: Any) -> bool:
    """A basic-index write into a realized tensor split over several devices, done on each device that holds some of
    the selected rows (its part of v copied there); False for any other tensor (the graph writes through the view)."""
    m = self.uop
    if m.op is not Ops.MULTI or m.arg[0] is None or any(base_buffer(sh) is None for sh in m.src): return False
    axis, bounds = m.arg[0], m.arg[1]
    if any(e is True or e is False for e in entries): return False
    # the entries, one per axis of self (None adds an axis of the view), Ellipsis expanded
    n_axes = sum(1 for e in entries if e is not None and e is not Ellipsis)
    if n_axes > self.ndim: raise IndexError(f"too many indices for a tensor of shape {self.shape}: {len(entries)}")
    if Ellipsis in entries:
      k = entries.index(Ellipsis)
      entries = entries[:k] + [slice(None)] * (self.ndim - n_axes) + [e for e in entries[k + 1:] if e is not Ellipsis]
    else: entries = entries + [slice(None)] * (self.ndim - n_axes)
    dim, vdim, at = 0, 0, -1
    for k, e in enumerate(entries):
      if e is None: vdim += 1; continue
      if dim == axis: at = k; break
      dim, vdim = dim + 1, vdim + (0 if isinstance(e, int) else 1)
    size, e = self.shape[axis], entries[at]
    if isinstance(e, int):
      if not -size <= e < size: raise IndexError(f"index {e} is out of bounds for axis {axis} with size {size}")
      picked: list[int] = [e % size]
    else: picked = list(range(*e.indices(size)))
    view_shape = self[tuple(entries)].shape
    vt = v if isinstance(v, Tensor) else Tensor(v, device=self.device, dtype=self.dtype)
    vt = vt.cast(self.dtype)._broadcast_to(view_shape, "setitem")
    # NOTE: the devices write one after another: a value that may read self is stored first
    if isinstance(v, Tensor): vt = vt.clone().realize()
    for sh, (b, end) in zip(m.src, bounds):
      js = [j for j, p in enumerate(picked) if b <= p < end]
      if not js: continue
      local: Any = picked[js[0]] - b
      part = vt
      if not isinstance(e, int):
        step = cast(slice, e).indices(size)[2]
        stop = picked[js[-1]] - b + (1 if step > 0 else -1)
        local = slice(local, None if stop < 0 else stop, step)
        part = vt[(slice(None),) * vdim + (slice(js[0], js[-1] + 1),)]
      shard = Tensor(sh)
      shard[tuple(entries[:at] + [local] + entries[at + 1:])] = part.to(cast(str, sh.device))
    return True
  def _leading_mask(self, entries: list[Any]) -> Tensor | None:
    """The bool mask tensor of an index that is one mask over the leading axes (x[mask] or x[mask, ...]), else None."""
    if entries and entries[-1] is Ellipsis: entries = entries[:-1]
    if len(entries) != 1 or not isinstance(m := entries[0], Tensor) or m.dtype is not dtypes.bool: return None
    return m if m.ndim and m.shape == self.shape[:m.ndim] else None
  def _fits_mask_value(self, m: Tensor, v: Any) -> bool:
    if not isinstance(v, Tensor): return isinstance(v, (bool, int, float))
    rest = self.shape[m.ndim:]
    return v.ndim <= len(rest) and all(a in (1, b) for a, b in zip(v.shape[::-1], rest[::-1]))
  def _rows_index(self, indices: Any) -> Tensor | None:
    """The rows an index write names, wrapped (a negative index counts from the end), where its indices are one 1-d int
    tensor over the first axis (x[idx], or x[idx, :, ...]) of a float tensor of 32 bits or less on one device, and a
    one-hot compare of every index with every row, for each element of the rest, is over SCATTER_SEGMENT_WORK."""
    idx = indices[0] if isinstance(indices, tuple) and indices else indices
    rest = indices[1:] if isinstance(indices, tuple) else ()
    if not isinstance(idx, Tensor) or idx.ndim != 1 or not dtypes.is_int(idx.dtype) or self.ndim == 0: return None
    if any(not (isinstance(r, slice) and r == slice(None)) for r in rest): return None
    if not self._segments_pay(idx.shape[0] * prod(self.shape[1:]), 0): return None
    n, wide = cast(int, self.shape[0]), _wide_index(idx)
    return wide if dtypes.is_unsigned(idx.dtype) else (wide < 0).where(wide + n, wide)
  def _index_write(self, indices: Any, v: Any, accumulate: bool) -> Tensor:
    """self with the elements self[indices] replaced by v (accumulate: v added to them, repeats adding up), lazily: a
    one-hot compare of the written positions with every position."""
    n = self.numel()
    pos = Tensor._arange_index(n, self.device).reshape(self.shape)[indices]
    vt = v if isinstance(v, Tensor) else Tensor(v, device=self.device, dtype=self.dtype)
    if vt.ndim > pos.ndim or any(a not in (1, b) for a, b in zip(vt.shape[::-1], pos.shape[::-1])):
      raise ShapeMismatchError(f"index write: a value of shape {vt.shape} cannot be broadcast to the indexed shape "
                               f"{pos.shape} (tensor {self.shape})")
    vt = vt.cast(self.dtype)._broadcast_to(pos.shape, "setitem")
    if accumulate and (rows := self._rows_index(indices)) is not None:
      # one index tensor of rows (index_put's accumulate): their segment sums, not the one-hot's compares of every
      # written element with every element
      return self._scatter_by_segments(0, rows, vt, "sum", True)
    k = pos.numel()
    hit = pos.flatten().unsqueeze(-1) == Tensor._arange_index(n, self.device).unsqueeze(0)  # (k, n)
    if accumulate:
      add = hit.where(vt.flatten().unsqueeze(-1), _zero_of(self.dtype)).sum(0).cast(self.dtype).reshape(self.shape)
      return self | add if self.dtype is dtypes.bool else self + add
    # NOTE: where an index repeats (x[[0, 0]] = v) the last write wins, as numpy: 1 + the last writer, 0 for none
    last = hit.where(Tensor._arange_index(k, self.device).unsqueeze(-1) + 1, 0).max(0)
    pick = (last - 1).unsqueeze(0) == Tensor._arange_index(k, self.device).unsqueeze(-1)
    full = pick.where(vt.flatten().unsqueeze(-1), _zero_of(self.dtype)).sum(0).cast(self.dtype)
    # NOTE: as torch, the gradient reaches every write to a position (the values' gradient is the output's, indexed)
    if dtypes.is_float(self.dtype):
      full = full.detach() + hit.where(vt.flatten()._zero_with_grad().unsqueeze(-1), 0).sum(0)
    full = full.reshape(self.shape)
    return (last > 0).reshape(self.shape).where(full, self)
  def index_put(self, indices: Sequence[Tensor | None], values: Tensor | ConstType, accumulate: bool = False) -> Tensor:
    """torch's index_put: a new tensor, self with self[indices] = values (a None index is a full slice); with accumulate
    the values add up, repeated indices included. Lazy and differentiable in self and values."""
    idx = tuple(slice(None) if i is None else i for i in indices)
    return self._index_write(idx, values, accumulate)
  def index_put_(self, indices: Sequence[Tensor | None], values: Tensor | ConstType,
                 accumulate: bool = False) -> Tensor:
    """index_put in place (self is assigned the result)."""
    return self.assign(self.index_put(indices, values, accumulate))

  def gather(self, dim: int, index: Tensor) -> Tensor:
    """out[..i..] = self[..index[..i..]..] along dim (torch.gather). As torch, an empty index of any rank gives an empty
    result of its shape, and a 0-d input takes a 0-d or 1-d index (as a 1-element axis). Lazy: an index out of range
    selects nothing (a 0) rather than raising as torch does, which would need the index read back."""
    d = self._axis(dim)
    if not dtypes.is_int(index.dtype): raise DTypeError(f"gather: index must be an int tensor, got {index.dtype}")
    # NOTE: the empty result is a view of self, so a gradient asked of self is its zeros
    if index.numel() == 0: return self.flatten().shrink([(0, 0)]).reshape(index.shape)
    if self.ndim == 0 and index.ndim <= 1: return self.reshape(1).gather(0, index.flatten()).reshape(index.shape)
    if index.ndim != self.ndim:
      raise ShapeMismatchError(f"gather: index {index.shape} and input {self.shape} need the same number of dims")
    if any(a > b for k, (a, b) in enumerate(zip(index.shape, self.shape)) if k != d):
      raise ShapeMismatchError(f"gather: index {index.shape} is larger than input {self.shape} outside axis {d}")
    n = self.shape[d]
    x = self.shrink([None if k == d else (0, s) for k, s in enumerate(index.shape)])
    xt = x.unsqueeze(-1).transpose(d, -1)._broadcast_to(index.shape + (n,), "gather")
    mask = index.unsqueeze(-1) == Tensor._arange_index(n, self.device)
    return mask.where(xt, 0).sum(-1).cast(self.dtype)
  def take_along_dim(self, indices: Tensor, dim: int | None = None) -> Tensor:
    """torch.take_along_dim: gather along dim, with self and indices broadcast against each other in the other axes;
    without dim, both are flattened first (and go to gather as they are). Along a dim, a negative index counts from the
    end, unlike gather's (as torch). Lazy, as gather."""
    if dim is None: return self.flatten().gather(0, indices.flatten())
    d = self._axis(dim)
    if not dtypes.is_int(indices.dtype): raise DTypeError(f"take_along_dim: indices must be ints, got {indices.dtype}")
    if not dtypes.is_unsigned(indices.dtype):
      indices = (indices < 0).where(indices + (self.shape[d] if self.ndim else 1), indices)
    if indices.ndim != self.ndim:
      raise ShapeMismatchError(f"take_along_dim: indices {indices.shape} and input {self.shape} need as many dims")
    rest = broadcast_shape(*(tuple(1 if k == d else n for k, n in enumerate(t.shape)) for t in (self, indices)),
                           op="take_along_dim")
    x = self._broadcast_to(rest[:d] + (self.shape[d],) + rest[d + 1:], "take_along_dim")
    return x.gather(d, indices._broadcast_to(rest[:d] + (indices.shape[d],) + rest[d + 1:], "take_along_dim"))
  def one_hot(self, num_classes: int = -1) -> Tensor:
    """int32 one-hot vectors along a new last axis. num_classes=-1 takes max + 1 of the values, which only the data
    tells: it is read back to the host (one sync)."""
    if not dtypes.is_int(self.dtype): raise DTypeError(f"one_hot: needs int class indices, got {self.dtype}")
    if num_classes == -1: num_classes = int(self.max().item()) + 1 if self.numel() else 0
    if num_classes < 0: raise ArgumentError(f"one_hot: num_classes must be -1 or >= 0, got {num_classes}")
    return (self.unsqueeze(-1) == Tensor._arange_index(num_classes, self.device)).cast(dtypes.int32)

  # ---- shape and indexing ----
  def _pad_edges(self, pads: Sequence[tuple[int, int]], mode: str) -> Tensor:
    """Padding taken from the tensor itself, axis by axis: the mirror image without the edge element (reflect), the edge
    element repeated (replicate), or the other end (circular)."""
    x = self
    for d, (b, e) in enumerate(pads):
      if b == e == 0: continue
      n = _int(x.shape[d], f"pad mode {mode!r}")
      # NOTE: as torch: reflect pads less than the axis size, circular at most the size, replicate any amount
      limit = n - 1 if mode == "reflect" else n if mode == "circular" else max(b, e)
      if max(b, e) > limit or n == 0:
        raise ShapeMismatchError(f"pad: {mode} padding ({b}, {e}) of axis {d} needs amounts below {limit + 1} (the "
                                 f"axis has size {n}, shape {self.shape})")
      def part(lo: int, hi: int, t: Tensor = x, ax: int = d) -> Tensor:
        return t.shrink([(lo, hi) if k == ax else None for k in range(t.ndim)])
      if mode == "reflect": lo, hi = part(1, b + 1).flip(d), part(n - 1 - e, n - 1).flip(d)
      elif mode == "circular": lo, hi = part(n - b, n), part(0, e)
      else:
        lo = part(0, 1).expand(*x.shape[:d], b, *x.shape[d + 1:])
        hi = part(n - 1, n).expand(*x.shape[:d], e, *x.shape[d + 1:])
      x = lo.cat(x, hi, dim=d)
    return x
  def _tri(self, diagonal: int, upper: bool, op: str) -> Tensor:
    if self.ndim < 2: raise ShapeMismatchError(f"{op}: needs a tensor of at least 2 dims, got shape {self.shape}")
    r, c = self.shape[-2:]
    # NOTE: column - row of each element, compared with the diagonal: constants only, fused into the where
    off = Tensor._arange_index(c, self.device).reshape(1, c) - Tensor._arange_index(r, self.device).reshape(r, 1)
    keep = (off >= diagonal) if upper else (off <= diagonal)
    return keep.where(self, _zero_of(self.dtype))
  def triu(self, diagonal: int = 0) -> Tensor:
    """The upper triangle of the last two axes (elements with column - row >= diagonal), zeros elsewhere."""
    return self._tri(diagonal, True, "triu")
  def tril(self, diagonal: int = 0) -> Tensor:
    """The lower triangle of the last two axes (elements with column - row <= diagonal), zeros elsewhere."""
    return self._tri(diagonal, False, "tril")
  def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The diagonal of the (dim1, dim2) planes as a new last axis (torch.diagonal); offset > 0 is above the main one.
    Movement ops only: a view, with the gradient of one."""
    a, b = self._axis(dim1), self._axis(dim2)
    if a == b: raise ShapeMismatchError(f"diagonal: dim1 and dim2 are the same axis {a} (shape {self.shape})")
    rest = [k for k in range(self.ndim) if k not in (a, b)]
    x = self.permute(rest + [a, b])
    n, m = x.shape[-2:]
    lead = [None] * len(rest)
    x = x.shrink(lead + [(0, n), (min(offset, m), m)] if offset >= 0 else lead + [(min(-offset, n), n), (0, m)])
    n, m = x.shape[-2:]
    ln = min(n, m)
    if ln == 0: return x.reshape(*x.shape[:-2], 0)
    # NOTE: row i of an (ln, m) block starts at i*m; reading rows of length m+1 puts element (i, i) at column 0
    x = x.shrink(lead + [(0, ln), (0, m)]).reshape(*x.shape[:-2], ln * m).pad(lead + [(0, ln)])
    return x.reshape(*x.shape[:-1], ln, m + 1)[..., 0]
  def diag(self, diagonal: int = 0) -> Tensor:
    """torch.diag: a 1-d tensor becomes a square matrix with it on the given diagonal; a 2-d one gives that diagonal."""
    if self.ndim == 2: return self.diagonal(diagonal)
    if self.ndim != 1: raise ShapeMismatchError(f"diag: needs a 1-d or 2-d tensor, got shape {self.shape}")
    n, k = self.shape[0], abs(diagonal)
    # NOTE: rows of length n+1 holding one value then n zeros, read back as rows of length n: value i lands at (i, i)
    sq = self.reshape(n, 1).pad([(0, 0), (0, n)]).flatten().shrink([(0, n * n)]).reshape(n, n)
    return sq.pad([(0, k), (k, 0)] if diagonal >= 0 else [(k, 0), (0, k)])
  def trace(self) -> Tensor:
    """The sum of the main diagonal of a 2-d tensor (torch.trace: ints sum in a wide int, as sum)."""
    if self.ndim != 2: raise ShapeMismatchError(f"trace: needs a 2-d tensor, got shape {self.shape}")
    return self.diagonal().sum()
  def roll(self, shifts: int | Sequence[int], dims: int | Sequence[int] | None = None) -> Tensor:
    """Rotate elements along dims by shifts (torch.roll); without dims the flattened tensor rolls."""
    if dims is None: return self.flatten().roll(shifts, 0).reshape(self.shape)
    sh, ds = make_tuple(shifts, 1), make_tuple(dims, 1)
    if len(sh) != len(ds): raise ShapeMismatchError(f"roll: {len(sh)} shifts for {len(ds)} dims")
    x = self
    for s, dim in zip(sh, ds):
      d = x._axis(dim)
      n = _int(x.shape[d], "roll")
      if n == 0 or s % n == 0: continue
      s %= n
      def part(b: int, e: int) -> Tensor: return x.shrink([(b, e) if k == d else None for k in range(x.ndim)])
      x = part(n - s, n).cat(part(0, n - s), dim=d)
    return x
  def repeat_interleave(self, repeats: int | Sequence[int] | Tensor, dim: int | None = None,
                        output_size: int | None = None) -> Tensor:
    """Each element repeated along dim (the flattened tensor without dim), as torch.repeat_interleave. With per-element
    repeats (a list or an int tensor) the output length is their sum: a tensor's sum is read back (one sync) unless
    output_size gives it. output_size is checked against host repeats; with a repeats tensor it is trusted (as the
    point of it is not to read the tensor back): positions past the true sum hold zeros, a short one cuts."""
    if dim is None: return self.flatten().repeat_interleave(repeats, 0, output_size)
    d = self._axis(dim)
    n = self.shape[d]
    if isinstance(repeats, int):
      if repeats < 0: raise ArgumentError(f"repeat_interleave: repeats must be >= 0, got {repeats}")
      if output_size is not None and output_size != n * repeats:
        raise ArgumentError(f"repeat_interleave: output_size {output_size} != {n} elements * {repeats} repeats")
      x = self.unsqueeze(d + 1)
      x = x.expand(*x.shape[:d + 1], repeats, *x.shape[d + 2:])
      return x.reshape(*self.shape[:d], n * repeats, *self.shape[d + 1:])
    rt = repeats if isinstance(repeats, Tensor) else Tensor(list(repeats), device=self.device, dtype=dtypes.int32)
    if rt.ndim == 0 or rt.shape == (1,): return self.repeat_interleave(int(rt.item()), d, output_size)
    if rt.shape != (n,):
      raise ShapeMismatchError(f"repeat_interleave: {rt.shape} repeats for axis {d} of size {n} (shape {self.shape})")
    if not dtypes.is_int(rt.dtype): raise DTypeError(f"repeat_interleave: repeats must be ints, got {rt.dtype}")
    if isinstance(repeats, Tensor): total = output_size if output_size is not None else int(rt.sum().item())
    elif output_size is not None and output_size != (total := sum(repeats)):
      raise ArgumentError(f"repeat_interleave: output_size {output_size} != the sum {total} of repeats {list(repeats)}")
    else: total = sum(repeats)
    # output j reads element #{i : cumsum(repeats)[i] <= j}
    ends = rt.cast(dtypes.int32).cumsum()
    src = (ends.reshape(1, n) <= Tensor._arange_index(total, self.device).reshape(total, 1)).sum(-1)
    return self[(slice(None),) * d + (src,)]
  def meshgrid(self, *args: Tensor, indexing: str = "ij") -> tuple[Tensor, ...]:
    """Coordinate grids from 1-d (or 0-d) tensors, "ij" (matrix) or "xy" (Cartesian: the first two axes swapped)."""
    if indexing not in ("ij", "xy"): raise ArgumentError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    ts = [self, *args]
    if any(t.ndim > 1 for t in ts):
      raise ShapeMismatchError(f"meshgrid: needs 0-d or 1-d tensors, got shapes {[t.shape for t in ts]}")
    sizes = [t.numel() for t in ts]
    if indexing == "xy" and len(ts) > 1: sizes[0], sizes[1] = sizes[1], sizes[0]
    out = []
    for k, t in enumerate(ts):
      ax = {0: 1, 1: 0}.get(k, k) if indexing == "xy" and len(ts) > 1 else k
      out.append(t.reshape([-1 if j == ax else 1 for j in range(len(ts))])._broadcast_to(tuple(sizes), "meshgrid"))
    return tuple(out)
  def unfold(self, dimension: int, size: int, step: int) -> Tensor:
    """All windows of `size` elements, `step` apart, along dimension: that axis becomes the window count and a new
    last axis holds each window (torch.Tensor.unfold). Movement ops only."""
    # NOTE: a 0-d tensor unfolds as a 1-element axis and gives the window itself (torch): shape (size,)
    if self.ndim == 0: return self.reshape(1).unfold(dimension, size, step).reshape(size)
    d = self._axis(dimension)
    n = self.shape[d]
    if step <= 0: raise ArgumentError(f"unfold: step must be positive, got {step}")
    if not 0 <= size <= n:
      raise ShapeMismatchError(f"unfold: size {size} does not fit axis {d} of size {n} (shape {self.shape})")
    if size == 0:
      return Tensor.zeros(*self.shape[:d], n // step + 1, *self.shape[d + 1:], 0, dtype=self.dtype, device=self.device)
    return self.transpose(d, -1)._pool((size,), step, op="unfold").transpose(d, -2)
  def nonzero(self, as_tuple: bool = False) -> Tensor | tuple[Tensor, ...]:
    """The indices of the nonzero elements (int32, row-major order): (count, ndim), or one 1-d tensor per axis. The
    count depends on the data: the tensor is read back to the host (one sync), and the result has no gradient."""
    if self.ndim == 0:
      return Tensor.zeros(int(self.item() != 0), 0, dtype=dtypes.int32, device=self.device) if not as_tuple else ()
    cols = [Tensor(c.astype(np.int32), device=self.device) for c in np.nonzero(self.numpy())]
    return tuple(cols) if as_tuple else Tensor.stack(*cols, dim=1)
  def unique(self, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False,
             dim: int | None = None) -> Any:
    """The distinct values (dim None: of all elements, 1-d) or the distinct slices along dim, in ascending order, as
    torch.unique; with return_inverse also where each element (slice) went, with return_counts how often each
    occurs (both int32). Realizes self and works on the host: the output's size depends on the values. nan values
    stay distinct (as torch). The result is sorted whether or not `sorted` is asked for (torch's CPU does the same)."""
    a = self.numpy()
    ax = None if dim is None else self._axis(dim)
    vals, inv, cnt = np.unique(a, return_inverse=True, return_counts=True, axis=ax, equal_nan=False)
    inv = inv.reshape(a.shape if ax is None else (a.shape[ax],))
    out = Tensor(vals, device=self.device).cast(self.dtype)
    extra = ([Tensor(inv.astype(np.int32), device=self.device)] if return_inverse else []) + \
      ([Tensor(cnt.astype(np.int32), device=self.device)] if return_counts else [])
    return (out, *extra) if extra else out
  def masked_select(self, mask: Tensor) -> Tensor:
    """The elements where mask (broadcast with self) is True, as a 1-d tensor in row-major order. Its length depends on
    the data: the mask is read back to the host (one sync); the gradient flows to the selected elements."""
    if mask.dtype is not dtypes.bool: raise DTypeError(f"masked_select: mask must be a bool tensor, got {mask.dtype}")
    shape = broadcast_shape(self.shape, mask.shape, op="masked_select")
    x, m = self._broadcast_to(shape, "masked_select"), mask._broadcast_to(shape, "masked_select")
    if not shape: return x.reshape(1)[m.reshape(1)]
    return x[m]
  def _scatter_target(self, dim: int, index: Tensor, src: Tensor | ConstType, op: str) -> tuple[int, Tensor, Tensor]:
    """Checked scatter operands: the axis, and index and src (cast to self's dtype) padded to self's shape outside it
    (pad index -1: it matches no position)."""
    d = self._axis(dim)
    if not dtypes.is_int(index.dtype): raise DTypeError(f"{op}: index must be an int tensor, got {index.dtype}")
    if index.ndim != self.ndim and not (index.ndim <= 1 and self.ndim <= 1):
      raise ShapeMismatchError(f"{op}: index {index.shape} and self {self.shape} need the same number of dims")
    index = index.reshape(index.shape if self.ndim else (index.numel(),))
    s = self.reshape(self.shape if self.ndim else (1,))
    st = src.cast(self.dtype) if isinstance(src, Tensor) else Tensor.full(index.shape, src, dtype=self.dtype,
                                                                          device=self.device)
    if st.ndim == 0: st = st.reshape((1,) * index.ndim)._broadcast_to(index.shape, op)
    if st.ndim != index.ndim or any(a > b for a, b in zip(index.shape, st.shape)):
      raise ShapeMismatchError(f"{op}: index {index.shape} must not be larger than src {st.shape} in any axis")
    if any(a > b for k, (a, b) in enumerate(zip(index.shape, s.shape)) if k != d):
      raise ShapeMismatchError(f"{op}: index {index.shape} must not be larger than self {self.shape} outside axis {d}")
    st = st.shrink([(0, a) for a in index.shape])
    pads = [(0, 0) if k == d else (0, b - a) for k, (a, b) in enumerate(zip(index.shape, s.shape))]
    return d, index.pad(pads, value=-1), st.pad(pads)
  def _scatter(self, dim: int, index: Tensor, src: Tensor | ConstType, reduce: str | None, include_self: bool,
               op: str) -> Tensor:
    d, idx, src_t = self._scatter_target(dim, index, src, op)
    x = self.reshape(self.shape if self.ndim else (1,))
    n, m = x.shape[d], idx.shape[d]
    if reduce in ("sum", "mean") and (shared := self._shared_scatter_index(d, index)) is not None:
      return x._scatter_by_segments(d, shared, src_t, reduce, include_self).reshape(self.shape)
    # everything with the scattered axis last: hit[..., t, j] = index[..., j] == t
    xl, il, sl = x.transpose(d, -1), idx.transpose(d, -1), src_t.transpose(d, -1)
    hit = il.unsqueeze(-2) == Tensor._arange_index(n, self.device).reshape(n, 1)
    vals = sl.unsqueeze(-2)._broadcast_to(hit.shape, op)
    cnt = hit.sum(-1)
    if reduce is None:
      # NOTE: repeated targets: the last write wins (torch leaves it unspecified)
      j = Tensor._arange_index(m, self.device) + 1
      last = hit.where(j, 0).max(-1, keepdim=True)
      got = (hit & (j == last)).where(vals, _zero_of(self.dtype)).sum(-1).cast(self.dtype)
      # NOTE: as torch, the gradient reaches every write to a position (src's gradient is a gather of the output's)
      if dtypes.is_float(self.dtype): got = got.detach() + hit.where(vals._zero_with_grad(), 0).sum(-1)
      out = (cnt > 0).where(got, xl)
    elif reduce in ("sum", "mean"):
      tot = hit.where(vals, _zero_of(self.dtype)).sum(-1).cast(self.dtype)
      if include_self: tot, cnt = xl + tot, cnt + 1
      if reduce == "sum": out = tot if include_self else (cnt > 0).where(tot, xl)
      else:
        safe = cnt.maximum(1).cast(self.dtype)
        mean = tot.floordiv(safe) if dtypes.is_int(self.dtype) else tot / safe
        out = (cnt > 0).where(mean, xl)
    elif reduce in ("prod", "amax", "amin"):
      ident: ConstType = {"prod": 1, "amax": -math.inf, "amin": math.inf}[reduce]
      if not dtypes.is_float(self.dtype) and reduce != "prod":
        ident = dtypes.min(self.dtype) if reduce == "amax" else dtypes.max(self.dtype)
      if include_self:
        # NOTE: self joins the reduction as one more value, so ties between self and src share the gradient evenly
        hit = hit.cat(Tensor.full(hit.shape[:-1] + (1,), True, device=self.device), dim=-1)
        vals = vals.cat(xl.unsqueeze(-1), dim=-1)
      v = hit.where(vals, ident)
      red = v.prod(-1).cast(self.dtype) if reduce == "prod" else v.max(-1) if reduce == "amax" else v.min(-1)
      out = red if include_self else (cnt > 0).where(red, xl)
    else: raise ArgumentError(f"{op}: reduce must be one of 'sum', 'prod', 'mean', 'amax', 'amin', got {reduce!r}")
    return out.transpose(d, -1).reshape(self.shape)
  def _shared_scatter_index(self, d: int, index: Tensor) -> Tensor | None:
    """The 1-d index along axis d where a sum or mean scatter's index is that one broadcast over the other axes (an
    expand of it, as `idx.unsqueeze(1).expand_as(src)` makes: a graph's scatter of messages to its nodes, index_add)
    and the one-hot compare of every target with every source, for each element of the other axes, is over
    SCATTER_SEGMENT_WORK; else None."""
    if index.uop.op is not Ops.EXPAND or any(a != b for k, (a, b) in enumerate(zip(index.shape, self.shape)) if k != d):
      return None
    if any(s != 1 for k, s in enumerate(index.uop.src[0].shape) if k != d): return None
    if not self._segments_pay(prod(index.shape), d): return None
    return _wide_index(Tensor(index.uop.src[0]).reshape(-1))
  def _segments_pay(self, index_elements: sint, d: int) -> bool:
    """Whether a sum scatter of index_elements index elements into self's axis d runs as segment sums
    (_scatter_by_segments): floats of 32 bits or less (the sums add in float64) on one device, concrete shapes, and
    over SCATTER_SEGMENT_WORK one-hot compares (index elements x positions of the axis)."""
    if not isinstance(self.device, str) or not dtypes.is_float(self.dtype) or self.dtype.itemsize > 4: return False
    if not all_int(self.shape) or not isinstance(index_elements, int): return False
    return index_elements * cast(int, self.shape[d]) > SCATTER_SEGMENT_WORK
  def _scatter_by_segments(self, d: int, idx: Tensor, src: Tensor, reduce: str, include_self: bool) -> Tensor:
    """A sum or mean scatter along axis d of src (self's shape outside d) by one 1-d index shared by every element of
    the other axes: the segment sums of src's rows (Tensor._segment_sums) and their counts, with the gradient of
    each source the upstream one at its target (a gather of rows, not the one-hot's compares)."""
    n, m = cast(int, self.shape[d]), idx.shape[0]
    xl, sl = self.transpose(d, 0), src.transpose(d, 0)
    rest = xl.shape[1:]
    rows, ones = prod(cast(tuple[int, ...], rest)), (1,) * len(rest)
    vals = sl.reshape(m, rows)
    # the counts (a column of ones summed alongside) where a mean or a scatter that leaves unnamed targets needs them
    counted = reduce == "mean" or not include_self
    if counted: vals = vals.cat(Tensor.ones(m, 1, dtype=vals.dtype, device=self.device), dim=1)
    seg = Tensor._segment_sums(idx, vals, n)
    tot = seg[:, :rows].cast(self.dtype).reshape(n, *rest)
    # NOTE: the counts stored apart: the gradient's rule holds them, and as a view of the sums they would hold those
    cnt = seg[:, rows:].cast(self.dtype).reshape(n, *ones).contiguous() if counted else None
    # the factor each target's sum is taken with: 1 for a sum, 1 / the count for a mean (self counted if included)
    scale = None if cnt is None or reduce == "sum" else 1 / (cnt + 1) if include_self else 1 / cnt.maximum(1)
    out = xl + tot if include_self else tot
    if scale is not None: out = out * scale
    hit = None if include_self else cast(Tensor, cnt) > 0
    if hit is not None: out = hit.where(out, xl)
    ok = (idx >= 0) & (idx < n)
    at = ok.where(idx, 0).cast(dtypes.int32)
    def rule(up: Tensor, _out: Tensor, x_: Tensor, s_: Tensor) -> tuple[Tensor, Tensor]:
      per = up if scale is None else up * scale
      dx = per if hit is None else hit.where(0, up)
      # each source's gradient: its target's (scaled) upstream gradient, a gather of rows; none outside the targets
      ds = ok.reshape(m, *ones).where(per.reshape(n, rows)[at].reshape(m, *rest), 0)
      return dx.cast(x_.dtype), ds.cast(s_.dtype)
    return _with_gradient(out, (xl, sl), rule).transpose(d, 0)
  def index_add(self, dim: int, index: Tensor, source: Tensor, alpha: ConstType = 1) -> Tensor:
    """torch.index_add: self with source's slices along dim added (times alpha) at the positions index (1-d ints)
    names, repeated positions adding up. A scatter_add of index broadcast over source's other axes (segment sums
    where that is much work); an index outside the axis adds nothing (torch raises)."""
    d = self._axis(dim)
    if index.ndim > 1 or not dtypes.is_int(index.dtype):
      raise ArgumentError(f"index_add: index must be a 0-d or 1-d int tensor, got {index.shape} {index.dtype}")
    idx = index.reshape(-1)
    want = tuple(idx.shape[0] if k == d else s for k, s in enumerate(self.shape)) if self.ndim else idx.shape
    if source.shape != want:
      raise ShapeMismatchError(f"index_add: source {source.shape} must be self's shape with dim {d} the index's length "
                               f"{idx.shape[0]}: {want}")
    src = source if alpha == 1 else source * alpha
    if self.ndim == 0: return self.reshape(1).index_add(0, idx, src.reshape(-1)).reshape(())
    view = tuple(-1 if k == d else 1 for k in range(self.ndim))
    return self.scatter_add(d, idx.reshape(view).expand(want), src)
  def scatter(self, dim: int, index: Tensor, src: Tensor | ConstType, reduce: str | None = None) -> Tensor:
    """torch.scatter: self with self[..index[..j..]..] = src[..j..] along dim (a scalar src fills). reduce "add" or
    "multiply" combines instead of replacing. Lazy (a one-hot compare of index with each position, so an index out of
    range writes nothing rather than raising as torch does); differentiable in self and src."""
    red = {None: None, "add": "sum", "multiply": "prod"}
    if reduce not in red: raise ArgumentError(f"scatter: reduce must be None, 'add' or 'multiply', got {reduce!r}")
    return self._scatter(dim, index, src, red[reduce], True, "scatter")
  def scatter_reduce(self, dim: int, index: Tensor, src: Tensor, reduce: str, include_self: bool = True) -> Tensor:
    """torch.scatter_reduce: the src values scattered onto each position along dim combine by reduce ("sum", "prod",
    "mean", "amax", "amin"), with self's value too when include_self; positions no index names keep self. Ints take the
    floor of a mean, as torch. Lazy; differentiable in self and src."""
    return self._scatter(dim, index, src, reduce, include_self, "scatter_reduce")
  def scatter_add(self, dim: int, index: Tensor, src: Tensor) -> Tensor:
    return self._scatter(dim, index, src, "sum", True, "scatter_add")
  def _zero_with_grad(self) -> Tensor:
    """Zeros (for finite values) that pass the gradient on to self: `y.detach() + x._zero_with_grad()` is y in value
    with x's gradient."""
    d = self - self.detach()
    return (d == 0).where(d, 0)
  def _sort_rank(self, descending: bool) -> Tensor:
    """The stable sorted position of each element along the last axis: a count of the elements that go before it
    (n*n compares in one reduce kernel). nan sorts above every number, as torch."""
    n = self.shape[-1]
    a, b = self.unsqueeze(-1), self.unsqueeze(-2)  # a: element i, b: element j (reduced over)
    if dtypes.is_float(self.dtype):
      an, bn = a.isnan(), b.isnan()
      lt = (b < a) | (an & bn.logical_not())
      gt = (b > a) | (bn & an.logical_not())
      eq = (b == a) | (an & bn)
    else: lt, gt, eq = b < a, b > a, b == a
    earlier = Tensor._arange_index(n, self.device).reshape(1, n) < Tensor._arange_index(n, self.device).reshape(n, 1)
    return ((gt if descending else lt) | (eq & earlier)).sum(-1)
  def _take_ranked(self, rank: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """The elements of ranks 0..k-1 along the last axis, and their positions."""
    n = self.shape[-1]
    pick = rank.unsqueeze(-2) == Tensor._arange_index(k, self.device).reshape(k, 1)  # (..., k, n)
    vals = pick.where(self.unsqueeze(-2), _zero_of(self.dtype)).sum(-1).cast(self.dtype)
    pos = pick.where(Tensor._arange_index(n, self.device), 0).sum(-1).cast(dtypes.int32)
    return vals, pos
  def _sorts_by_network(self) -> bool:
    """Whether sort (of this stored tensor, along its last axis) runs the bitonic network over packed keys rather than
    the rank count (SORT_RANK_MAX_WORK)."""
    n = self.shape[-1]
    return isinstance(n, int) and n > 1 and all_int(self.shape) and _sorts_by_keys(self.dtype) and \
      prod(cast(tuple[int, ...], self.shape)) * n > SORT_RANK_MAX_WORK
  def _sort_keys(self, descending: bool) -> Tensor:
    """uint64 keys whose ascending order is sort's order along the last axis. The high word is the value as an
    unsigned int in the same order (a float's sign flips it, or its other bits where negative; nan above every number,
    -0.0 as 0.0; descending, its complement), the low word the position times 2 plus 1 for a -0.0 (which the order so
    ignores, and the value keeps). No two keys are equal, so a network that is not stable sorts equal values stably."""
    n = _int(self.shape[-1], "sort")
    low = Tensor._arange_index(n, self.device).cast(dtypes.uint32) << 1
    if dtypes.is_float(self.dtype):
      f = self.cast(dtypes.float32)
      bits = f.bitcast(dtypes.uint32)
      negz = bits == 0x80000000
      bits = f.isnan().where(0x7FC00000, negz.where(0, bits)).cast(dtypes.uint32)
      u = (bits >= 0x80000000).where(bits ^ _U32, bits | 0x80000000).cast(dtypes.uint32)
      low = low | negz.cast(dtypes.uint32)
    elif dtypes.is_unsigned(self.dtype) or self.dtype is dtypes.bool: u = self.cast(dtypes.uint32)
    else: u = self.cast(dtypes.int32).bitcast(dtypes.uint32) ^ 0x80000000
    if descending: u = u ^ _U32
    return (u.cast(dtypes.uint64) << 32) | low.cast(dtypes.uint64)
  @staticmethod
  def _from_sort_keys(keys: Tensor, dtype: DType, descending: bool) -> tuple[Tensor, Tensor]:
    """The values (in dtype) and int32 positions that _sort_keys packed."""
    u, low = (keys >> 32).cast(dtypes.uint32), (keys & _U32).cast(dtypes.uint32)
    if descending: u = u ^ _U32
    if dtypes.is_float(dtype):
      bits = (u >= 0x80000000).where(u & 0x7FFFFFFF, u ^ _U32).cast(dtypes.uint32)
      bits = (low & 1).cast(dtypes.bool).where(0x80000000, bits).cast(dtypes.uint32)
      vals = bits.bitcast(dtypes.float32).cast(dtype)
    elif dtypes.is_unsigned(dtype) or dtype is dtypes.bool: vals = u.cast(dtype)
    else: vals = (u ^ 0x80000000).bitcast(dtypes.int32).cast(dtype)
    return vals, (low >> 1).cast(dtypes.int32)
  def _bitonic_sort(self) -> Tensor:
    """The uint64 keys along the last axis (ints, all shapes concrete) in ascending order, by a bitonic network: padded
    to a power of two with the greatest key, blocks of 2, 4, .. merged, each merge's first step comparing a block's
    first half with its second half reversed (so every block sorts ascending and no step needs a direction), each of
    its other steps the halves of half as big blocks (_bitonic_halves). Every step is one stored kernel: two steps
    fused in one kernel recompute the first (each output reads 4 keys) and measured slower ((64, 1024): 3.0 -> 4.6
    ms)."""
    *rows, n = cast(tuple[int, ...], self.shape)
    x = self._pad_keys(size := 1 << (n - 1).bit_length()).contiguous()
    block = 2
    while block <= size:
      # the first step compares each key with the one at the mirrored place in its block
      x = x._bitonic_halves(block, x.reshape(*rows, size // block, 2, block // 2).flip((-2, -1)))
      block *= 2
    return x[..., :n]
  def _pad_keys(self, size: int) -> Tensor:
    """The uint64 keys along the last axis padded to `size` with the greatest key. NOTE: stored before the padding:
    padded, the positions' arange in the keys (above 1024, a split of two) was not folded to a closed form and was
    summed in a loop (6025 keys: 7.5 ms; a topk of (4, 100000): 108 ms)"""
    n = cast(int, self.shape[-1])
    return self.contiguous().pad([(0, 0)] * (self.ndim - 1) + [(0, size - n)], value=(1 << 64) - 1) if size != n \
      else self
  def _bitonic_halves(self, block: int, other: Tensor | None = None) -> Tensor:
    """Keys (..., size) whose blocks of `block` are each bitonic, sorted ascending by the steps of a bitonic merge:
    each key against the one at the same place in the other half of its block, then of half as big blocks, the lower
    half keeping the smaller key. `other`: the first step's partners (..., size // block, 2, block // 2) in place of
    the other half's."""
    *rows, size = self.shape
    lower = Tensor._arange_index(2, self.device).reshape(2, 1) == 0
    x, half = self, block // 2
    while half:
      y = x.reshape(*rows, size // (2 * half), 2, half)
      o = y.flip(-2) if other is None else other
      x = ((y < o) == lower).where(y, o).reshape(*rows, size).contiguous()
      half, other = half // 2, None
    return x
  def _network_topk(self, k: int, largest: bool) -> tuple[Tensor, Tensor]:
    """topk (k > 1) along the last axis of a stored tensor by bitonic networks over _sort_keys: every block of K keys
    (the power of two at or above k) sorted, then rounds that halve the blocks: of each pair, the K least of the first
    block against the second reversed (a bitonic block, sorted by a merge's halves). The values are gathered at the
    positions (their gradient: the gather's)."""
    *rows, n = cast(tuple[int, ...], self.shape)
    kk, size = 1 << (k - 1).bit_length(), 1 << (n - 1).bit_length()
    keys = self._sort_keys(largest)._pad_keys(size).reshape(*rows, size // kk, kk)._bitonic_sort()
    while (nb := keys.shape[-2]) > 1:
      y = keys.reshape(*rows, nb // 2, 2, kk)
      a, b = y[..., 0, :], y[..., 1, :].flip(-1)
      keys = (a < b).where(a, b)._bitonic_halves(kk)
    _, pos = Tensor._from_sort_keys(keys.reshape(*rows, kk)[..., :k], self.dtype, largest)
    return self.gather(-1, pos), pos
  def _network_sort(self, descending: bool) -> tuple[Tensor, Tensor]:
    """sort along the last axis of a stored tensor by the bitonic network over _sort_keys. The values' gradient is
    the upstream one put back at the positions: sorted by (position, its bits) the same way."""
    vals, pos = Tensor._from_sort_keys(self._sort_keys(descending)._bitonic_sort(), self.dtype, descending)
    if not dtypes.is_float(self.dtype): return vals, pos
    def rule(up: Tensor, _ret: Tensor, x: Tensor) -> tuple[Tensor]:
      bits = up.cast(dtypes.float32).bitcast(dtypes.uint32).cast(dtypes.uint64)
      keys = ((pos.cast(dtypes.uint32).cast(dtypes.uint64) << 32) | bits)._bitonic_sort()
      return ((keys & _U32).cast(dtypes.uint32).bitcast(dtypes.float32).cast(x.dtype),)
    return _with_gradient(vals, (self,), rule), pos
  def sort(self, dim: int = -1, descending: bool = False, stable: bool = True) -> ValuesIndices:
    """(values, int32 indices) sorted along dim, ties in their original order (always stable) and nan last (first when
    descending), as torch. A comparison count (rank) for a small sort, a bitonic network over packed keys for a big one
    of values of 32 bits or less (SORT_RANK_MAX_WORK); the values have a gradient."""
    if self.ndim == 0: return ValuesIndices(self, Tensor(_const_uop(0, dtypes.int32, self.device)))
    d = self._axis(dim)
    # NOTE: the ops that compare each element with every other (sort, topk, the ranked picks, mode) compare a stored
    # copy (contiguous: none is made for a realized contiguous tensor). Fused lazily, an element is computed once per
    # place it is read, and where the compiler folds one place to a constant (an unrolled reduce over a closed form:
    # linspace) and evaluates the other at run time (an FMA, another order) the two can differ in the last bit: an
    # element then ranks above itself, two share a rank and one rank is empty
    x = self.transpose(d, -1).contiguous()
    if x._sorts_by_network(): vals, pos = x._network_sort(descending)
    else: vals, pos = x._take_ranked(x._sort_rank(descending), _int(x.shape[-1], "sort"))
    return ValuesIndices(vals.transpose(d, -1), pos.transpose(d, -1))
  def argsort(self, dim: int = -1, descending: bool = False, stable: bool = True) -> Tensor:
    """int32 positions that sort self along dim (stable, as sort)."""
    return self.sort(dim, descending)[1]
  def searchsorted(self, values: Tensor | ConstType, out_int32: bool = False, right: bool = False,
                   side: str | None = None, sorter: Tensor | None = None) -> Tensor:
    """torch.searchsorted with self the sorted sequence: for each value, the index where it would be inserted along the
    last axis to keep it sorted, the first such (right=False, side="left": the count of elements less than it) or the
    last (right=True, side="right": less or equal). self 1-d searches for values of any shape; else values (..., k) are
    searched in the row of self (..., m) with the same leading axes. sorter: the int positions that sort each row
    (argsort's). int64 (out_int32: int32). A binary search of the midpoints (the same probes as torch's, so a nan in
    the sequence gives torch's answer too): bit_length(m) steps, each a gathered load per value."""
    if side is not None:
      if side not in ("left", "right"):
        raise ArgumentError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
      if right and side == "left": raise ArgumentError("searchsorted: side='left' and right=True contradict each other")
      right = side == "right"
    if self.ndim == 0: raise ShapeMismatchError("searchsorted: the sorted sequence must have at least one dimension")
    seq = self.detach()
    if sorter is not None:
      if sorter.shape != self.shape or not dtypes.is_int(sorter.dtype):
        raise ShapeMismatchError(f"searchsorted: sorter must be ints of the sequence's shape {self.shape}, got "
                                 f"{sorter.shape} {sorter.dtype}")
      seq = seq.gather(-1, sorter)
    v = (values if isinstance(values, Tensor) else self._scalar_operand(values, "searchsorted")).detach()
    if self.ndim > 1 and (v.ndim != self.ndim or v.shape[:-1] != self.shape[:-1]):
      raise ShapeMismatchError(f"searchsorted: values {v.shape} need the sequence's leading axes {self.shape[:-1]} "
                               "(or a 1-d sequence)")
    if seq.dtype is not v.dtype:
      dt = least_upper_dtype(seq.dtype, v.dtype)
      seq, v = seq.cast(dt), v.cast(dt)
    m = _int(self.shape[-1], "searchsorted")
    out_dt = dtypes.int32 if out_int32 else dtypes.int64
    if m == 0 or v.numel() == 0: return Tensor.zeros(*v.shape, dtype=out_dt, device=self.device)
    rows, vals = (seq.reshape(1, m), v.reshape(1, -1)) if self.ndim == 1 else (seq, v)
    # NOTE: torch's predicates: a step right unless the probe is >= (>, for right) the value, so a nan probe steps right
    def go(probe: Tensor) -> Tensor: return (probe > vals if right else probe >= vals).logical_not()
    if not dtypes.is_float(seq.dtype):
      # no nan: the predicate holds on a prefix of the row, whose length is found by steps of the powers of two below
      # m (one int state a value, one kernel a step)
      pos = vals.zeros_like(dtype=dtypes.int32)
      for b in reversed(range(m.bit_length())):
        nxt = pos + (1 << b)
        pos = ((nxt <= m) & go(rows.gather(-1, (nxt - 1).minimum(m - 1)))).where(nxt, pos)
      return pos.reshape(v.shape).cast(out_dt)
    start = vals.zeros_like(dtype=dtypes.int32)
    end = start + m
    for _ in range(m.bit_length()):
      mid = start + ((end - start) >> 1)
      g, live = go(rows.gather(-1, mid.minimum(m - 1))), start < end
      start, end = (live & g).where(mid + 1, start), (live & g.logical_not()).where(mid, end)
    return start.reshape(v.shape).cast(out_dt)
  def bucketize(self, boundaries: Tensor, out_int32: bool = False, right: bool = False) -> Tensor:
    """torch.bucketize: for each element of self, the index of its bucket among the sorted 1-d boundaries
    (boundaries.searchsorted(self, right=right))."""
    if boundaries.ndim != 1: raise ShapeMismatchError(f"bucketize: boundaries must be 1-d, got {boundaries.shape}")
    return boundaries.searchsorted(self, out_int32=out_int32, right=right)
  def topk(self, k: int, dim: int = -1, largest: bool = True, sorted: bool = True,
           sorted_: bool = True) -> ValuesIndices:
    """The k largest (or smallest) elements along dim and their int32 positions, in sorted order; among equal values
    the earlier position comes first (torch leaves the order of ties unspecified). sorted (torch's name) and sorted_
    (tinygrad's) are accepted; the result is sorted either way, which an unsorted request allows."""
    if self.ndim == 0:
      if k != 1: raise ArgumentError(f"topk: k={k} is out of range for a 0-d tensor")
      return ValuesIndices(self, Tensor(_const_uop(0, dtypes.int32, self.device)))
    d = self._axis(dim)
    if not 0 <= k <= self.shape[d]:
      raise ArgumentError(f"topk: k={k} is out of range for axis {d} of size {self.shape[d]} (shape {self.shape})")
    x = self.transpose(d, -1).contiguous()  # NOTE: stored: see sort
    vals, pos = x._topk_last(k, largest)
    return ValuesIndices(vals.transpose(d, -1), pos.transpose(d, -1))
  def _topk_last(self, k: int, largest: bool) -> tuple[Tensor, Tensor]:
    """topk along the last axis of a stored tensor: the rank of every element among all n (n*n compares), or where n
    holds 2 blocks or more (_topk_block), the top k of each block and then the top k of those candidates (n*B + the
    candidates' own topk), or where those ranks are more than SORT_RANK_MAX_WORK compares, bitonic networks
    (_network_topk). The candidates keep the order of the positions they came from (block by block, each block's in
    rank order), so ties still go to the earlier position."""
    n, b = self.shape[-1], _topk_block(k)
    if not isinstance(n, int) or not (dtypes.is_float(self.dtype) or dtypes.is_int(self.dtype)):
      return self._take_ranked(self._sort_rank(largest), k)
    if k == 1 and n > 1:
      # the first position of the max: argmax takes the first nan, as the rank does. Of the min: the first one equal to
      # the least number (nan is above them all; argmin would take it), or where every element is nan the first. The
      # value is gathered from there, so the gradient goes to that one position (a max's is shared among ties)
      if largest: at = self.argmax(-1, keepdim=True)
      elif not dtypes.is_float(self.dtype): at = self.argmin(-1, keepdim=True)
      else: at = (self == self.isnan().where(math.inf, self).min(-1, keepdim=True)).argmax(-1, keepdim=True)
      at = at.cast(dtypes.int32)
      return self.gather(-1, at), at
    if n < 2 * b: return self._take_ranked(self._sort_rank(largest), k)
    # NOTE: where the blocks' ranks would take more than SORT_RANK_MAX_WORK compares, the bitonic networks: (64, 4096)
    # k = 8 4.2 -> 1.2 ms, (1, 50257) k = 40 3.3 -> 1.5, (8, 32000) k = 50 20.8 -> 2.8, (64, 1024) k = 100 10.2 -> 1.4
    # (LLVM path, 2 threads, AMD Zen 2); (64, 256) k = 4 0.25 -> 0.23 and (1, 4096) k = 16 0.35 both ways
    if _sorts_by_keys(self.dtype) and all_int(self.shape) and \
       prod(cast(tuple[int, ...], self.shape)) * b > SORT_RANK_MAX_WORK: return self._network_topk(k, largest)
    nb = ceildiv(n, b)
    # NOTE: the padding ranks after every element (ties go to the earlier position, and it is last): -inf or the
    # least int when largest, else nan (which sorts above every number) or the greatest int
    pad: ConstType = (-math.inf if largest else math.nan) if dtypes.is_float(self.dtype) else \
      dtypes.min(self.dtype) if largest else dtypes.max(self.dtype)
    xb = self.pad([(0, 0)] * (self.ndim - 1) + [(0, nb * b - n)], value=pad).reshape(*self.shape[:-1], nb, b)
    bv, bp = xb._take_ranked(xb._sort_rank(largest), k)
    at = bp + Tensor._arange_index(nb, self.device).reshape(nb, 1) * b
    vals, got = bv.reshape(*self.shape[:-1], nb * k).contiguous()._topk_last(k, largest)
    return vals, at.reshape(*self.shape[:-1], nb * k).gather(-1, got)
  def _ranked_at(self, dim: int, keepdim: bool, op: str, rank: Callable[[Tensor], Tensor]) -> ValuesIndices:
    """The element of sorted rank rank(x) (a tensor of one rank per row, x the rows along the last axis) along dim and
    its position: the building block of kthvalue, median and mode."""
    if self.ndim == 0: return ValuesIndices(self, Tensor(_const_uop(0, dtypes.int32, self.device)))
    d = self._axis(dim)
    if self.shape[d] == 0: raise IndexError(f"{op}: axis {d} of {self.shape} is empty: there is no element to return")
    x = self.transpose(d, -1).contiguous()  # NOTE: stored: see sort
    # the element at that rank: of the sorted row where sort runs its network, else of the ranks' one-hot
    at = Tensor._arange_index(x.shape[-1], x.device)
    if x._sorts_by_network(): (src, at), r = x._network_sort(False), at
    else: src, r = x, x._sort_rank(False)
    pick = r == rank(x).unsqueeze(-1)
    vals = pick.where(src, _zero_of(x.dtype)).sum(-1, keepdim=True).cast(x.dtype).transpose(d, -1)
    pos = pick.where(at, 0).sum(-1, keepdim=True).cast(dtypes.int32)
    pos = pos.transpose(d, -1)
    return ValuesIndices(vals, pos) if keepdim else ValuesIndices(vals.squeeze(d), pos.squeeze(d))
  def kthvalue(self, k: int, dim: int = -1, keepdim: bool = False) -> ValuesIndices:
    """The k-th smallest element (k from 1) along dim and its int32 position, as torch.kthvalue (among equal values
    the earlier position, where torch leaves it unspecified)."""
    n = self.shape[self._axis(dim)] if self.ndim else 1
    if not 1 <= k <= n: raise ArgumentError(f"kthvalue: k={k} is out of range for axis {dim} of size {n} (shape "
                                            f"{self.shape})")
    return self._ranked_at(dim, keepdim, "kthvalue", lambda x: x._const(k - 1, dtypes.int32)[..., 0])
  def median(self, axis: int | None = None, keepdim: bool = False, *, dim: int | None = None) -> Any:
    """The lower median (element (n-1)//2 in sorted order), nan where the values hold a nan (as torch.median). axis
    None is the median of all elements; with torch's `dim=` the result is (values, indices) as torch's, the indices
    of a nan its first position."""
    if dim is None and axis is None: return self.flatten().median(0)
    d = self._axis(cast(int, axis if dim is None else dim))
    if self.ndim == 0: res = self._ranked_at(d, keepdim, "median", lambda x: x)
    else:
      n = _int(self.shape[d], "median")
      res = self._ranked_at(d, keepdim, "median", lambda x: x._const((n - 1) // 2, dtypes.int32)[..., 0])
      if dtypes.is_float(self.dtype):
        nan = self.isnan()
        has, first = nan.any(d, keepdim), nan.argmax(d, keepdim)
        res = ValuesIndices(has.where(math.nan, res.values), has.where(first, res.indices))
    return res if dim is not None else res.values
  def nanmedian(self, axis: int | None = None, keepdim: bool = False, *, dim: int | None = None) -> Any:
    """The lower median of the values that are not nan (nan where all are), as torch.nanmedian; dim= gives (values,
    indices) as median."""
    if dim is None and axis is None: return self.flatten().nanmedian(0)
    d = self._axis(cast(int, axis if dim is None else dim))
    if not dtypes.is_float(self.dtype) or self.ndim == 0: return self.median(axis, keepdim, dim=dim)
    res = self._ranked_at(d, keepdim, "nanmedian",
                          lambda x: ((x.isnan().logical_not().sum(-1).cast(dtypes.int32) - 1) // 2).maximum(0))
    return res if dim is not None else res.values
  def mode(self, dim: int = -1, keepdim: bool = False) -> ValuesIndices:
    """The most frequent value along dim (the smallest of the most frequent ones) and its last position, as
    torch.mode; n*n compares in one reduce."""
    if self.ndim == 0: return ValuesIndices(self, Tensor(_const_uop(0, dtypes.int32, self.device)))
    d = self._axis(dim)
    if self.shape[d] == 0: raise IndexError(f"mode: axis {d} of {self.shape} is empty: there is no element to return")
    x = self.contiguous()  # NOTE: stored: see sort
    cnt = (x.unsqueeze(d + 1) == x.unsqueeze(d)).sum(d + 1)  # cnt[i]: how often element i occurs
    best = cnt == cnt.max(d, keepdim=True)
    big = math.inf if dtypes.is_float(self.dtype) else dtypes.max(self.dtype)
    vals = best.where(x, big).min(d, keepdim=True)
    n = self.shape[d]
    at = Tensor._arange_index(n, self.device).reshape((n,) + (1,) * (self.ndim - d - 1))
    pos = (x == vals).where(at, -1).max(d, keepdim=True).cast(dtypes.int32)
    return ValuesIndices(vals, pos) if keepdim else ValuesIndices(vals.squeeze(d), pos.squeeze(d))

  # ---- reductions ----
  def _reduce(self, op: Ops, axis: int | Sequence[int] | None, keepdim: bool) -> Tensor:
    axes = self._axes(axis)
    if op is Ops.ADD and axes and self._concrete_on_cpu() and \
       (n := prod(cast(tuple[int, ...], self.shape))) >= max(FULL_SUM_SPLIT_MIN, 2 * FULL_SUM_PARTS) and \
       prod(cast(int, s) for k, s in enumerate(self.shape) if k not in axes) == 1:
      # NOTE: a sum to one element on the CPU (where it was measured; a GPU's heuristics spread it over a workgroup)
      # in two kernels: FULL_SUM_PARTS partial sums (an output axis the heuristics thread) over rows of a multiple of
      # 64 (an odd row length was not vectorized: (2001, 2003) 3.9 ms by rows of 2003), stored, then their sum. In one
      # kernel its one output has no axis for threads
      m = ceildiv(ceildiv(n, FULL_SUM_PARTS), 64) * 64
      parts = self.reshape(n).pad(((0, m * FULL_SUM_PARTS - n),)).reshape(FULL_SUM_PARTS, m)._reduce(op, 1, False)
      ret = parts.contiguous()._reduce(op, 0, False).reshape((1,) * self.ndim)
    # NOTE: a reduction over an empty axis is its identity (the kernel's reduce loop runs zero times)
    else: ret = self._new(self.uop.r(op, axes)) if axes else self
    return ret if keepdim else ret.reshape(tuple(s for k, s in enumerate(self.shape) if k not in axes))
  def sum(self, axis: int | Sequence[int] | None = _AXIS_DEFAULT, keepdim: bool = False,
          dtype: DTypeLike | None = None, *, dim: int | Sequence[int] | None = None,
          acc_dtype: DTypeLike | None = None) -> Tensor:
    """The sum over axis (tinygrad) or dim (torch), all axes when neither is given; dtype (a DType or its name, e.g.
    "float32"; acc_dtype is tinygrad's older name) is the accumulator and the result's dtype."""
    axis = _axis_or_dim(axis, dim, "sum")
    if acc_dtype is not None: dtype = acc_dtype
    acc = _tensor_dtype(dtype) if dtype is not None else sum_acc_dtype(self.dtype)
    ret = self.cast(acc)._reduce(Ops.ADD, axis, keepdim)
    # NOTE: floats accumulate wide and come back in their own dtype; ints keep the wide accumulator (as numpy)
    return ret.cast(self.dtype) if dtype is None and dtypes.is_float(self.dtype) else ret
  def prod(self, axis: int | Sequence[int] | None = _AXIS_DEFAULT, keepdim: bool = False,
           dtype: DTypeLike | None = None, *, dim: int | Sequence[int] | None = None,
           acc_dtype: DTypeLike | None = None) -> Tensor:
    axis = _axis_or_dim(axis, dim, "prod")
    if acc_dtype is not None: dtype = acc_dtype
    acc = _tensor_dtype(dtype) if dtype is not None else sum_acc_dtype(self.dtype)
    ret = self.cast(acc)._reduce(Ops.MUL, axis, keepdim)
    return ret.cast(self.dtype) if dtype is None and dtypes.is_float(self.dtype) else ret
  def _inverse(self) -> Tensor:
    # an order-reversing bijection of the dtype: min(x) = inv(max(inv(x)))
    if dtypes.is_float(self.dtype): return -self
    return ~self
  def max(self, axis: int | Sequence[int] | None = _AXIS_DEFAULT, keepdim: bool = False, *,
          dim: int | Sequence[int] | None = None) -> Any:
    """The maximum over axis (a tensor), or with torch's `dim=` (one axis) torch's (values, indices), the indices the
    first position of the maximum (a nan wins)."""
    if dim is not None and axis is _AXIS_DEFAULT and isinstance(dim, int):
      return ValuesIndices(self.max(dim, keepdim), self.argmax(dim, keepdim))
    return self._reduce(Ops.MAX, _axis_or_dim(axis, dim, "max"), keepdim)
  def min(self, axis: int | Sequence[int] | None = _AXIS_DEFAULT, keepdim: bool = False, *,
          dim: int | Sequence[int] | None = None) -> Any:
    """The minimum over axis; with `dim=` torch's (values, indices), as max."""
    if dim is not None and axis is _AXIS_DEFAULT and isinstance(dim, int):
      return ValuesIndices(self.min(dim, keepdim), self.argmin(dim, keepdim))
    return self._inverse().max(_axis_or_dim(axis, dim, "min"), keepdim)._inverse()
  def amax(self, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    """torch.amax: the maximum over dim (one axis or several), no indices."""
    return self.max(dim, keepdim)
  def amin(self, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    """torch.amin: the minimum over dim (one axis or several), no indices."""
    return self.min(dim, keepdim)
  def aminmax(self, *, dim: int | None = None, keepdim: bool = False) -> tuple[Tensor, Tensor]:
    """(min, max) over dim (all elements when None), as torch.aminmax."""
    return self.min(dim, keepdim), self.max(dim, keepdim)
  def nansum(self, axis: int | Sequence[int] | None = _AXIS_DEFAULT, keepdim: bool = False,
             dtype: DTypeLike | None = None,
             *, dim: int | Sequence[int] | None = None) -> Tensor:
    """The sum with nan counted as 0 (torch.nansum)."""
    x = self.isnan().where(0, self) if dtypes.is_float(self.dtype) else self
    return x.sum(_axis_or_dim(axis, dim, "nansum"), keepdim, dtype)
  def nanmean(self, axis: int | Sequence[int] | None = _AXIS_DEFAULT, keepdim: bool = False, *,
              dim: int | Sequence[int] | None = None) -> Tensor:
    """The mean of the elements that are not nan (torch.nanmean): nan where there are none."""
    axis = _axis_or_dim(axis, dim, "nanmean")
    x = self._float()
    ok = x.isnan().logical_not()
    return ok.where(x, 0).sum(axis, keepdim) / ok.sum(axis, keepdim).cast(x.dtype)
  def count_nonzero(self, dim: int | Sequence[int] | None = None) -> Tensor:
    """How many elements are not zero over dim (all when None), int32 (torch's is int64)."""
    return (self != 0).sum(dim).cast(dtypes.int32)
  def mean(self, axis: int | Sequence[int] | None = _AXIS_DEFAULT, keepdim: bool = False, *,
           dim: int | Sequence[int] | None = None) -> Tensor:
    axis = _axis_or_dim(axis, dim, "mean")
    x = self._float()
    n = self._count(axis)
    # NOTE: divided in the accumulator dtype, so a half sum that overflows stays out of it; a true division (not a
    # multiply by 1/n) so that the mean of equal elements is exactly that element (and their var exactly 0)
    s = x.sum(axis, keepdim, dtype=sum_acc_dtype(x.dtype))
    if isinstance(n, UOp): return s.alu(Ops.FDIV, Tensor._sint_value(n, s.dtype, s.device)).cast(x.dtype)
    return (s.alu(Ops.FDIV, n) if n else s * math.nan).cast(x.dtype)
  def _count(self, axis: Any) -> sint:
    """How many elements a reduction over axis takes (symbolic where an axis is)."""
    return sym_prod(self.shape[a] for a in self._axes(axis))
  @staticmethod
  def _sint_value(x: sint, dtype: DType, device: str) -> Tensor:
    """The value of a size at its variables' bindings as a 0-d tensor: the bound variables are inputs of the kernel
    (a replay with other bindings computes with the new values)."""
    if not isinstance(x, UOp): return Tensor(_const_uop(x, dtype, device))
    if x.op is Ops.CONST: return Tensor(_const_uop(x.arg, dtype, device))
    if x.op is Ops.BIND:
      # NOTE: the ADD of a device constant gives the variable's value a device (a BIND is not on any)
      val = UOp(Ops.ADD, dtypes.int32, (_const_uop(0, dtypes.int32, device), x.cast(dtypes.int32)))
      return Tensor(val).cast(dtype)
    # NOTE: sizes are >= 0, where truncating and flooring division agree
    ops: dict[Ops, Callable[[Tensor, Tensor], Tensor]] = {
      Ops.ADD: Tensor.add, Ops.MUL: Tensor.mul, Ops.IDIV: Tensor.idiv, Ops.MOD: Tensor.mod, Ops.MAX: Tensor.maximum}
    if x.op not in ops: raise ArgumentError(f"the value of the size {render_sint(x)} cannot be computed as a tensor")
    a, b = (Tensor._sint_value(s, dtypes.int32, device) for s in x.src)
    return ops[x.op](a, b).cast(dtype)
  def var(self, axis: int | Sequence[int] | None = _AXIS_DEFAULT, keepdim: bool = False, correction: float = 1, *,
          dim: int | Sequence[int] | None = None,
          unbiased: bool | None = None) -> Tensor:
    """sum((x - mean)**2) / max(0, N - correction), as torch: N <= correction divides by zero (inf, or nan for 0/0).
    The gradient is torch's, 2(x - mean)/(N - correction): +-inf at N == correction, finite below. torch's older
    `unbiased` flag is correction 1 (True) or 0 (False)."""
    axis = _axis_or_dim(axis, dim, "var")
    if unbiased is not None: correction = int(unbiased)
    x = self._float()
    n = self._count(axis)
    if isinstance(n, UOp): return x._var_symbolic(axis, keepdim, correction, n)
    m = x.mean(axis, keepdim=True)
    # NOTE: with the divisor at 0 or below, through the mean the gradient would be inf - inf; analytically the mean's
    # part is 0, so it is left out
    if n - correction <= 0: m = m.detach()
    d = x - m
    sq = d.square().sum(axis, keepdim, dtype=sum_acc_dtype(x.dtype))
    # NOTE: the corrected two-pass form: sum(d)**2/N takes out the rounding error of the mean, which is otherwise all
    # of the var when the spread is small next to the mean (N = 1e4 values 1e4 +- 1e-3: 6e-4 relative error, not 5e-8)
    if n - correction > 0:
      sq = sq - d.sum(axis, keepdim, dtype=sum_acc_dtype(x.dtype)).square().alu(Ops.FDIV, n)
      # never below 0 (it is not in exact arithmetic: sum(d)**2 <= N sum(d**2)), or std would be nan
      sq = (sq < 0).detach().where(0.0, sq)
      return sq.alu(Ops.FDIV, float(n - correction)).cast(x.dtype)
    if n - correction == 0: return (sq / 0.0).cast(x.dtype)
    # the value divides by 0, the gradient by the negative N - correction
    v = sq / float(n - correction)
    return (v - v.detach() + (sq / 0.0).detach()).cast(x.dtype)
  def _var_symbolic(self, axis: Any, keepdim: bool, correction: float, n: UOp) -> Tensor:
    """var over a symbolic count n: the corrected two-pass form divided by max(0, n - correction), as torch (a count at
    or below the correction divides by 0: inf, or nan for 0/0)."""
    acc = sum_acc_dtype(self.dtype)
    d = self - self.mean(axis, keepdim=True)
    nt = Tensor._sint_value(n, acc, self.device)
    sq = d.square().sum(axis, keepdim, dtype=acc) - d.sum(axis, keepdim, dtype=acc).square().alu(Ops.FDIV, nt)
    sq = (sq < 0).detach().where(0.0, sq)
    return sq.alu(Ops.FDIV, (nt - correction).maximum(0)).cast(self.dtype)
  def std(self, axis: int | Sequence[int] | None = _AXIS_DEFAULT, keepdim: bool = False, correction: float = 1, *,
          dim: int | Sequence[int] | None = None,
          unbiased: bool | None = None) -> Tensor:
    """sqrt(var), with torch's gradient 0 (not 0 * inf) where the std is 0 (all elements equal)."""
    v = self.var(_axis_or_dim(axis, dim, "std"), keepdim, correction, unbiased=unbiased)
    zero = (v == 0).detach()
    return zero.where(0.0, zero.where(1.0, v).sqrt()).cast(v.dtype)
  def any(self, axis: int | Sequence[int] | None = _AXIS_DEFAULT, keepdim: bool = False, *,
          dim: int | Sequence[int] | None = None) -> Tensor:
    # NOTE: over an empty axis this is the max's identity, False
    return self.cast(dtypes.bool).max(_axis_or_dim(axis, dim, "any"), keepdim)
  def all(self, axis: int | Sequence[int] | None = _AXIS_DEFAULT, keepdim: bool = False, *,
          dim: int | Sequence[int] | None = None) -> Tensor:
    return self.logical_not().any(_axis_or_dim(axis, dim, "all"), keepdim).logical_not()
  def _argext(self, axis: int | None, keepdim: bool, largest: bool) -> Tensor:
    if axis is None: return self.flatten()._argext(0, False, largest).reshape((1,) * self.ndim if keepdim else ())
    a = self._axis(axis)
    # NOTE: a 0-d tensor is its own only element (axis 0 or -1, as torch): position 0, shape ()
    if self.ndim == 0: return Tensor(_const_uop(0, dtypes.int32, self.device))
    n = self.shape[a]
    # NOTE: IndexError, as torch raises it: an empty axis has no position to return
    if _is_int(n, 0):
      raise IndexError(f"argmax/argmin: axis {a} of {self.shape} is empty: there is no position to return")
    x = self if largest else self._inverse()
    m = x.max(a, keepdim=True)
    # NOTE: the first position wins: weight hits by n - position and take the largest weight
    rev = (Tensor._sint_value(n, dtypes.int32, self.device) - Tensor._arange_index(n, self.device))
    rev = rev.reshape((n,) + (1,) * (self.ndim - a - 1))
    # a nan is both the max and the min (it propagates through them): its first position wins, as torch
    eq = (x == m) | (x.isnan() & m.isnan()) if dtypes.is_float(x.dtype) else x == m
    hit = eq.where(rev, 0)
    return (Tensor._sint_value(n, dtypes.int32, self.device) - hit.max(a, keepdim)).cast(dtypes.int32)
  def argmax(self, axis: int | None = _AXIS_DEFAULT, keepdim: bool = False, *, dim: int | None = None) -> Tensor:
    return self._argext(_axis_or_dim(axis, dim, "argmax"), keepdim, True)
  def argmin(self, axis: int | None = _AXIS_DEFAULT, keepdim: bool = False, *, dim: int | None = None) -> Tensor:
    return self._argext(_axis_or_dim(axis, dim, "argmin"), keepdim, False)
  def logsumexp(self, axis: int | Sequence[int] | None = _AXIS_DEFAULT, keepdim: bool = False, *,
                dim: int | Sequence[int] | None = None) -> Tensor:
    axis = _axis_or_dim(axis, dim, "logsumexp")
    # NOTE: in a float from the start: x - max in an unsigned dtype wraps around
    x = self._float()
    m = x.max(axis, keepdim=True).detach()
    m = m.isinf().where(0, m)
    ret = (x - m).exp().sum(axis, keepdim=True).log() + m
    return ret if keepdim else ret.reshape(tuple(s for k, s in enumerate(self.shape) if k not in self._axes(axis)))
  def softmax(self, axis: int = _AXIS_DEFAULT, dtype: DTypeLike | None = None, *, dim: int | None = None) -> Tensor:
    """exp(x) / sum(exp(x)) along axis (or torch's dim; -1 when neither is given); with dtype the input is cast to it
    first (as torch), else to a float."""
    axis = _axis_or_dim(axis, dim, "softmax", -1)
    if dtype is not None and not dtypes.is_float(_tensor_dtype(dtype)):
      raise DTypeError(f"softmax: dtype must be a float type, got {dtype}")
    x = self.cast(_tensor_dtype(dtype)) if dtype is not None else self._float()
    e = (x - x.max(axis, keepdim=True).detach()).exp()
    return e / e.sum(axis, keepdim=True)
  def log_softmax(self, axis: int = _AXIS_DEFAULT, dtype: DTypeLike | None = None, *, dim: int | None = None) -> Tensor:
    """x - logsumexp(x) along axis (or dim, -1 when neither is given); with dtype the input is cast to it first (as
    torch), else to a float."""
    axis = _axis_or_dim(axis, dim, "log_softmax", -1)
    if dtype is not None and not dtypes.is_float(_tensor_dtype(dtype)):
      raise DTypeError(f"log_softmax: dtype must be a float type, got {dtype}")
    x = self.cast(_tensor_dtype(dtype)) if dtype is not None else self._float()
    x = x - x.max(axis, keepdim=True).detach()
    return x - x.exp().sum(axis, keepdim=True).log()
  def _cumulative(self, axis: int, op: str) -> Tensor:
    """Inclusive scan along axis with op "sum", "prod", "max" or "logsumexp": a window reduce (n*n work) where that
    work is small (_scan_by_window), else a scan inside blocks of about sqrt(n) combined with a scan of the block
    totals, each by the same rule (n*log(n) work or so)."""
    if self.ndim == 0: return self.reshape(1)._cumulative(0, op).reshape(())
    a = self._axis(axis)
    n = self.shape[a]
    low = -math.inf if dtypes.is_float(self.dtype) else dtypes.min(self.dtype)
    ident: ConstType = {"sum": 0, "prod": 1}.get(op, low)
    if isinstance(n, UOp): return self._cumulative_symbolic(a, op, n, ident)
    if n == 0:
      return self if op == "max" or dtypes.is_float(self.dtype) else self.cast(sum_acc_dtype(self.dtype))
    x, keep = self.transpose(a, -1), [(0, 0)] * (self.ndim - 1)
    if _scan_by_window(self.shape, n): return x._window_scan(op, ident).transpose(a, -1)
    b = _scan_block(n)
    nb = ceildiv(n, b)
    inner = x.pad(keep + [(0, nb * b - n)], value=ident).reshape(*x.shape[:-1], nb, b)._cumulative(-1, op)
    # the scan of the totals of the blocks before each block (the identity before the first)
    tot = inner[..., -1].shrink([None] * (self.ndim - 1) + [(0, nb - 1)]).pad(keep + [(1, 0)], value=ident)
    before = tot._cumulative(-1, op).unsqueeze(-1)
    out = inner + before if op == "sum" else inner * before if op == "prod" else \
      inner.logaddexp(before) if op == "logsumexp" else inner.maximum(before)
    return out.reshape(*x.shape[:-1], nb * b).shrink([None] * (self.ndim - 1) + [(0, n)]).transpose(a, -1)
  def _window_scan(self, op: str, ident: ConstType) -> Tensor:
    """The inclusive scan along the last axis as one window reduce: element i reduces the n elements up to it."""
    n = _int(self.shape[-1], "scan")
    return getattr(self.pad([(0, 0)] * (self.ndim - 1) + [(n - 1, 0)], value=ident)._pool((n,)), op)(-1)
  def _cumulative_symbolic(self, a: int, op: str, n: UOp, ident: ConstType) -> Tensor:
    """The scan along a symbolic axis: element i reduces the elements j <= i of the axis (n*n work, as the window)."""
    x = self.transpose(a, -1)
    idx = Tensor.arange(n, device=self.device, dtype=dtypes.int32)
    keep = idx.reshape(n, 1) >= idx.reshape(1, n)
    win = keep.where(x.unsqueeze(-2), ident)
    return getattr(win, op)(-1).transpose(a, -1)
  def cumsum(self, axis: int = _AXIS_DEFAULT, *, dim: int | None = None, dtype: DTypeLike | None = None) -> Tensor:
    """The running sum along axis (or torch's dim; 0 when neither is given), in dtype when given."""
    x = self.cast(_tensor_dtype(dtype)) if dtype is not None else self
    out = x._cumulative(ax := _axis_or_dim(axis, dim, "cumsum", 0), "sum")
    if x.ndim == 0 or out.uop is x.uop or not dtypes.is_float(out.dtype): return out
    # NOTE: the gradient is the reverse running sum of the upstream one, a scan as fast as this one; through the
    # blocks' graph it was the windows' backward, a cut kernel of scalar loops (cumsum over (1024, 1024) with its
    # gradient 10.5 ms, 8.3 of them that kernel)
    if not isinstance(x.shape[a := x._axis(ax)], int): return out
    return _with_gradient(out, (x,), lambda up, ret, xi: (up.flip(a)._cumulative(a, "sum").flip(a).cast(xi.dtype),))
  def logcumsumexp(self, axis: int = _AXIS_DEFAULT, *, dim: int | None = None) -> Tensor:
    """log(cumsum(exp(x))) along axis, never through the exp of a large prefix: the scan of _cumulative by logsumexp
    (each prefix window's, or the blocks' combined with their totals' scan by logaddexp)."""
    axis = _axis_or_dim(axis, dim, "logcumsumexp", 0)
    x = self._float()
    if x.ndim == 0: return x
    a = x._axis(axis)
    if _int(x.shape[a], "logcumsumexp") == 0: return x
    return x._cumulative(a, "logsumexp")
  def cumprod(self, axis: int = _AXIS_DEFAULT, *, dim: int | None = None, dtype: DTypeLike | None = None) -> Tensor:
    x = self.cast(_tensor_dtype(dtype)) if dtype is not None else self
    return x._cumulative(_axis_or_dim(axis, dim, "cumprod", 0), "prod")
  def _cum_index(self, d: int, vals: Tensor) -> Tensor:
    """The position torch.cummax/cummin gives with the running extremes vals along axis d: the last position up to
    each one that holds the running value (a nan's, once one was seen)."""
    if self.ndim == 0: return Tensor(_const_uop(0, dtypes.int32, self.device))
    n = self.shape[d]
    at = Tensor._arange_index(n, self.device).reshape((n,) + (1,) * (self.ndim - d - 1))
    hit = (self == vals) | (self.isnan() & vals.isnan()) if dtypes.is_float(self.dtype) else self == vals
    return hit.where(at, -1).cast(dtypes.int32)._cumulative(d, "max")
  def cummax(self, axis: int = _AXIS_DEFAULT, *, dim: int | None = None) -> Any:
    """The running maximum along axis (0 by default); with torch's `dim=`, torch's (values, indices)."""
    vals = self._cumulative(_axis_or_dim(axis, dim, "cummax", 0), "max")
    return vals if dim is None else ValuesIndices(vals, self._cum_index(self._axis(dim), vals))
  def cummin(self, axis: int = _AXIS_DEFAULT, *, dim: int | None = None) -> Any:
    """The running minimum along axis (0 by default); with torch's `dim=`, torch's (values, indices)."""
    vals = self._inverse()._cumulative(_axis_or_dim(axis, dim, "cummin", 0), "max")._inverse()
    return vals if dim is None else ValuesIndices(vals, self._cum_index(self._axis(dim), vals))

  # ---- windows, linear algebra, nn ----
  def _pool(self, k_: tuple[int, ...], stride: int | tuple[int, ...] = 1,
            dilation: int | tuple[int, ...] = 1, op: str = "pool", product: bool = False) -> Tensor:
    """Sliding windows over the last len(k_) axes from movement ops only: (..., *i) -> (..., *o, *k). product: the
    windows are (N, C, *o, *k), multiplied by filters and summed over output channels (a conv): their gradient is
    stored pixels-first (_windows_gradient)."""
    nk = len(k_)
    if self.ndim < nk: raise ArgumentError(f"{op}: kernel {k_} has more axes than the input {self.shape}")
    s_, d_ = make_tuple(stride, nk), make_tuple(dilation, nk)
    if any(v <= 0 for v in (*k_, *s_, *d_)):
      raise ArgumentError(f"{op}: kernel {k_}, stride {s_} and dilation {d_} must be positive (input {self.shape})")
    noop, i_ = self.shape[:-nk], self.int_shape(op, nk)
    o1_ = [i - d * (k - 1) for i, k, d in zip(i_, k_, d_)]
    if any(o <= 0 for o in o1_):
      raise ArgumentError(f"{op}: kernel {k_} (dilation {d_}) does not fit the (padded) spatial size {i_} of the input "
                          f"{self.shape}")
    o_ = [(o1 - 1) // s + 1 for o1, s in zip(o1_, s_)]
    nn = [None] * len(noop)
    # NOTE: k copies of a row of length i, read with row length i+d, shift each copy by d: row j is x[j*d : j*d + o1]
    r_ = [ceildiv(k * (i + d), i) for i, k, d in zip(i_, k_, d_)]
    x = self.reshape(noop + tuple(flatten((1, i) for i in i_))).expand(noop + tuple(flatten(zip(r_, i_))))
    x = x.reshape(noop + tuple(r * i for r, i in zip(r_, i_)))
    x = x.shrink(nn + [(0, k * (i + d)) for k, i, d in zip(k_, i_, d_)])
    x = x.reshape(noop + tuple(flatten((k, i + d) for k, i, d in zip(k_, i_, d_))))
    x = x.shrink(nn + flatten(((0, k), (0, o1)) for k, o1 in zip(k_, o1_)))
    if any(s > 1 for s in s_):
      x = x.pad([(0, 0)] * len(noop) + flatten(((0, 0), (0, o * s - o1)) for o, s, o1 in zip(o_, s_, o1_)))
      x = x.reshape(noop + tuple(flatten((k, o, s) for k, o, s in zip(k_, o_, s_))))
      x = x.shrink(nn + flatten(((0, k), (0, o), (0, 1)) for k, o in zip(k_, o_)))
      x = x.reshape(noop + tuple(flatten((k, o) for k, o in zip(k_, o_))))
    n = len(noop)
    ret = x.permute(list(range(n)) + [n + 2 * j + 1 for j in range(nk)] + [n + 2 * j for j in range(nk)])
    # NOTE: windows of up to 9 taps (a conv's 3x3 and 1x1, strided or not; an average pool) are differentiated by
    # phases (_windows_gradient), not by their movement ops. Measured (AVX-512, 2 threads, ResNet-18 b8 64x64's step,
    # each kernel's best of 5): its convs' input-gradient folds 3.1-3.4 ms -> 1.1-1.2 (the 3x3 stride-2 ones alone
    # 1.0-1.1 ms of it before). Longer windows (a cumulative op's n taps) keep autograd's fold: one view a tap
    if all_concrete(self.shape) and prod(k_) <= 9:
      pixels_first = product and prod(k_) > 1 and CONV_GRAD_PIXELS_FIRST
      ret = _with_gradient(ret, (self,), lambda g, _r, _x: (_windows_gradient(g, list(i_), k_, s_, d_, pixels_first),))
    return ret

  def dot(self, w: Tensor, dtype: DTypeLike | None = None) -> Tensor:
    """numpy matmul semantics: 1-d operands are vectors, leading axes broadcast as batch axes. With dtype the products
    and their sum are taken in it and the result has it (tinygrad's); else the operands' promoted dtype."""
    # NOTE: shape errors are RuntimeError, as torch raises them (and ValueError, as numpy: ShapeMismatchError is both)
    if self.ndim == 0 or w.ndim == 0:
      raise ShapeMismatchError(f"matmul: scalars are not allowed, got shapes {self.shape} and {w.shape}")
    x, ww = self, w
    if not sym_eq(x.shape[-1], ww.shape[-2] if ww.ndim > 1 else ww.shape[0]):
      inner = ww.shape[-2] if ww.ndim > 1 else ww.shape[0]
      raise ShapeMismatchError(f"matmul: shapes {render_shape(self.shape)} and {render_shape(w.shape)} do not match "
                               f"(inner sizes {render_sint(x.shape[-1])} and {render_sint(inner)})")
    if x.ndim > 2 or ww.ndim > 2:
      try: broadcast_shape(x.shape[:-2], ww.shape[:-2], op=f"matmul of {x.shape} and {ww.shape}")
      except ValueError as e: raise ShapeMismatchError(str(e)) from None
    xs = x.reshape(x.shape[:-1] + (1,) + x.shape[-1:]) if x.ndim > 1 else x.reshape(1, 1, x.shape[0])
    wt = ww.transpose(-1, -2) if ww.ndim > 1 else ww.reshape(1, ww.shape[0])
    wt = wt.reshape(wt.shape[:-2] + (1,) + wt.shape[-2:])
    a, b = xs._operands(wt, "matmul")
    dt = a.dtype
    acc = _tensor_dtype(dtype) if dtype is not None else sum_acc_dtype(dt)
    # NOTE: a dtype given is where the products are taken too (tinygrad's), and the result's dtype
    if dtype is not None or _exact_products_in(dt, acc): a, b = a.cast(acc), b.cast(acc)
    out = (a * b).sum(-1, dtype=acc)
    # NOTE: unlike sum, matmul keeps the operands' dtype (ints wrap), as numpy and torch do
    if dtype is None: out = out.cast(dt)
    if w.ndim == 1: out = out.reshape(out.shape[:-1])
    if self.ndim == 1: out = out.reshape(out.shape[:-2] + out.shape[-1:]) if w.ndim > 1 else out.reshape(out.shape[:-1])
    return out
  def matmul(self, w: Tensor, reverse: bool = False, dtype: DTypeLike | None = None) -> Tensor:
    """self @ w (w @ self with reverse), as dot."""
    return w.dot(self, dtype) if reverse else self.dot(w, dtype)
  def outer(self, w: Tensor) -> Tensor:
    """The outer product of two 1-d tensors: out[i, j] = self[i] * w[j] (torch.outer, dtypes promoted as *)."""
    if self.ndim != 1 or w.ndim != 1:
      raise ShapeMismatchError(f"outer: needs two 1-d tensors, got shapes {self.shape} and {w.shape}")
    return self.reshape(-1, 1) * w.reshape(1, -1)
  def linear(self, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """x @ weight + bias with weight of shape (in, out) (a 1-d weight scales elementwise)."""
    x = self * weight if weight.ndim == 1 else self.dot(weight)
    return x + bias if bias is not None else x

  def _pad2d(self, padding: int | Sequence[int], n: int, value: ConstType = 0.0, op: str = "pad2d") -> Tensor:
    return self.pad([(0, 0)] * (self.ndim - n) + Tensor._pool_pairs(padding, n, op), value=value)
  def pad2d(self, padding: Sequence[int], value: ConstType = 0.0) -> Tensor:
    """Pad the last len(padding)//2 axes with torch's flat (left, right, top, bottom, ...) amounts (negative crops)."""
    return self.pad(tuple(padding), value=value)
  def _concrete_on_cpu(self) -> bool:
    """On one CPU device, of a concrete shape: where the conv rules below were measured."""
    return isinstance(self.device, str) and self.device.split(":")[0] == "CPU" and all_concrete(self.shape)
  def _winograd_pays(self, weight: Tensor, groups: int, pads: list[tuple[int, int]]) -> bool:
    """WINO=2: whether F(4, 3) beats the direct sum for this stride-1 3-wide convolution, by the rule measured on the
    CPU (bench/winograd.py: a step of forward and both gradients under TinyJit, AVX2, 2 threads; Winograd / direct,
    batch x channels x pixels). It pays where the multiplies it saves outweigh its transforms (~20 kernels where the
    direct sum takes 4) and the filter transform's 4x bigger weights, read once per batch: at 2^27 multiply-adds of the
    direct sum and 512 output pixels over the batch it won at every shape measured (32x64x32x32 0.59, 32x512x4x4 0.53,
    8x256x8x8 0.44-0.69, 16x64x16x16 0.50-0.62, 8x64x32x32 0.51-0.58); under 2^27 it lost or tied (8x64x16x16 0.92-1.82,
    8x128x8x8 0.77-1.19, 8x256x4x4 1.21-1.25), at 256 pixels it tied (16x256x4x4 0.64-1.08, 4x512x8x8 0.98, 16x512x4x4
    0.88), at 128 it lost (8x512x4x4 0.86-1.45). Outputs filling under half of the 4-wide tiles lost at any size
    (8x512x2x2 2.64). Not measured, so never taken: under 16 channels a group (the products are no longer a matmul;
    depthwise convs), 1-d and 3-d convolutions (6 and 216 tile positions: other trade-offs), and other devices."""
    if not self._concrete_on_cpu(): return False
    if (nsp := weight.ndim - 2) != 2: return False
    cout, cin_g = weight.int_shape("conv2d")[:2]
    if cin_g < WINO_MIN_CHANNELS or cout // groups < WINO_MIN_CHANNELS: return False
    outs = [s + b + a - 2 for s, (b, a) in zip(self.int_shape("conv2d")[2:], pads)]
    if any(o <= 0 for o in outs) or 2 * prod(outs) < prod(4 * ceildiv(o, 4) for o in outs): return False
    pixels = self.int_shape("conv2d")[0] * prod(outs)
    return pixels >= WINO_MIN_PIXELS and pixels * cout * cin_g * 3 ** nsp >= WINO_MIN_MACS
  def _padding_stored(self, pads: list[tuple[int, int]], macs: sint) -> bool:
    """Whether a direct conv of `macs` multiply-adds reads its input padded and stored (one copy of it,
    CONV_PADDING_STORED) rather than through the padding: on the CPU compiled through LLVM, where it pads and takes
    CONV_PADDING_STORED_MIN_MACS multiply-adds or more (under that, about 10 us of work, the copy's launch costs
    about what the gates do). Through the padding, every load of the windows, in the forward and in the weight
    gradient, is gated by its bounds on each spatial axis. Measured (AVX2, 2 threads, LLVM; a conv's forward and
    gradients under TinyJit, alone): ResNet-18's stem at batch 32, 128x128, 66.1 -> 49.5 ms (its forward 25.8 ->
    17.9, its weight gradient 35.2 -> 25.7, the copy 1.0); a 3-channel 3x3 conv at batch 8, 64x64, 4.8 -> 3.2; 256
    channels over 4x4 pixels 5.2 -> 4.7; a depthwise 3x3 over 64 channels 7.7 -> 7.3. In the steps (one run of each,
    every kernel's best of 3): ResNet-18 b8 91.8 -> 83.7 ms, b32 629.9 -> 582.3. On the C path (CPU_LLVM=0) its
    kernels took other opts and ResNet-18 b8's step went 303 -> 510 ms: there the windows read through the padding."""
    if not CONV_PADDING_STORED or not any(b > 0 or a > 0 for b, a in pads) or not self._concrete_on_cpu(): return False
    if not isinstance(macs, int) or macs < CONV_PADDING_STORED_MIN_MACS: return False
    from tinygrad.device import Device
    return bool(getattr(Device[self.device], "llvm", False))
  def _im2col_weight_gradient(self, hw: tuple[int, ...], rcout: int) -> bool:
    """Whether a direct conv over these windows (self: (N, Cin, *o, *k)) takes its weight gradient from the windows
    stored pixels-first (_conv_gradients): on the CPU, over at most CONV_IM2COL_WGRAD_PIXELS output pixels, with more
    than one tap and more than one output channel a group."""
    if not self._concrete_on_cpu(): return False
    return prod(hw) > 1 and rcout > 1 and prod(self.int_shape("conv2d")[2:2 + len(hw)]) <= CONV_IM2COL_WGRAD_PIXELS
  def conv2d(self, weight: Tensor, bias: Tensor | None = None, groups: int = 1, stride: int | tuple[int, ...] = 1,
             dilation: int | tuple[int, ...] = 1, padding: int | Sequence[int] | str = 0) -> Tensor:
    """Convolution (cross-correlation, as torch) of (N, Cin, *spatial) with (Cout, Cin/groups, *kernel). padding: an
    int, one per spatial axis, torch's flat pairs, or 'valid' / 'same' (stride 1; the odd element after, as torch)."""
    if isinstance(padding, str):
      nsp_, dil_ = weight.ndim - 2, make_tuple(dilation, max(weight.ndim - 2, 1))
      if padding not in ("valid", "same"): raise ArgumentError(f"conv2d: padding must be 'valid' or 'same', got "
                                                               f"{padding!r}")
      if padding == "same" and any(s != 1 for s in make_tuple(stride, max(nsp_, 1))):
        raise ArgumentError(f"conv2d: padding='same' needs stride 1, got {stride}")
      tot = [d * (k - 1) for k, d in zip(weight.shape[2:], dil_)] if padding == "same" else [0] * nsp_
      x = self.pad([(0, 0), (0, 0)] + [(t // 2, t - t // 2) for t in tot])
      return x.conv2d(weight, bias, groups, stride, dilation, 0)
    if self.ndim != weight.ndim or self.ndim < 3:
      raise ArgumentError(f"conv2d: input {self.shape} and weight {weight.shape} need the same number of dims, at "
                          "least 3 ((N, Cin, *spatial) and (Cout, Cin/groups, *kernel))")
    (bs, cin), hw = self.shape[:2], weight.int_shape("conv2d")[2:]
    cout, cin_g = weight.int_shape("conv2d")[:2]
    if self.ndim != weight.ndim or cin != cin_g * groups or cout % groups:
      raise ArgumentError(f"conv2d: input {self.shape} and weight {weight.shape} do not match with groups={groups} "
                          f"(input channels {cin} must equal {cin_g} * {groups}, and the {cout} output channels must "
                          "divide by groups)")
    nsp = len(hw)
    unit = (1,) * nsp
    if WINO and all(k == 3 for k in hw) and make_tuple(stride, nsp) == unit and make_tuple(dilation, nsp) == unit:
      pads = self._pool_pairs(padding, nsp, "conv2d")
      if WINO.value == 1 or self._winograd_pays(weight, groups, pads):
        out = _winograd_conv(self, weight, groups, pads)
        return out if bias is None else out + bias.reshape(1, -1, *([1] * nsp))
    # NOTE: (N, Cin, *o, *k); their gradient a matmul only where each group has more than one output channel (a
    # depthwise conv's has no sum over them: an elementwise product, left as it was)
    rcout = cout // groups
    xin = self._pad2d(padding, nsp, op="conv2d")
    win = xin._pool(tuple(hw), stride, dilation, op="conv2d", product=rcout > 1)
    oyx = win.shape[2:2 + nsp]
    if self._padding_stored(self._pool_pairs(padding, nsp, "conv2d"), bs * cout * cin_g * sym_prod(oyx) * prod(hw)):
      win = xin.contiguous()._pool(tuple(hw), stride, dilation, op="conv2d", product=rcout > 1)
    x = win.reshape(bs, groups, 1, cin_g, *oyx, *hw).expand(bs, groups, rcout, cin_g, *oyx, *hw)
    w = weight.reshape(1, groups, rcout, cin_g, *([1] * nsp), *hw)
    red = tuple([3] + [4 + nsp + j for j in range(nsp)])
    dt = least_upper_dtype(x.dtype, weight.dtype)
    # NOTE: the tensor-core match takes REDUCE(MUL(CAST(a), CAST(b))) too
    exact = _exact_products_in(dt, acc := sum_acc_dtype(dt))
    out = (x.cast(acc) * w.cast(acc)).sum(red, keepdim=True, dtype=acc) if exact else (x * w).sum(red, keepdim=True)
    if win._im2col_weight_gradient(hw, rcout):
      out = _with_gradient(out, (win, weight), lambda g, _r, xw, ww: _conv_gradients(g, xw, ww, groups))
    if exact: out = out.cast(dt)
    out = out.reshape(bs, cout, *oyx)
    return out if bias is None else out + bias.reshape(1, -1, *([1] * nsp))
  def avg_pool2d(self, kernel_size: int | tuple[int, ...] = (2, 2), stride: int | tuple[int, ...] | None = None,
                 padding: int | Sequence[int] = 0, ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override: int | None = None) -> Tensor:
    """Average pooling over the last len(kernel_size) axes (an int kernel: 2), as torch's avg_pool1d/2d/3d: ceil_mode
    adds partial windows at the end; the divisor counts padding (count_include_pad) but never the ceil extra."""
    x = self._float()
    win, k_, s_, full, outs = x._pool_windows(kernel_size, stride, 1, padding, ceil_mode, 0, "avg_pool2d")
    n = len(k_)
    total = win.sum(tuple(range(-n, 0)))
    if divisor_override is not None: return total * (1 / divisor_override)
    if count_include_pad and all((o - 1) * s + k <= i + b + a for o, s, k, i, (b, a) in
                                 zip(outs, s_, k_, self.shape[-n:], Tensor._pool_pairs(padding, n, "avg_pool2d"))):
      return total * (1 / float(prod(k_)))
    # the divisor of each window: per axis, how much of [start, start + k) lies in the counted range (closed form)
    div: Tensor | None = None
    for ax, (o, s, k, i, (b, _), (pb, pa)) in enumerate(zip(outs, s_, k_, self.shape[-n:], full,
                                                           Tensor._pool_pairs(padding, n, "avg_pool2d"))):
      lo, hi = (-pb, i + pa) if count_include_pad else (0, i)
      start = Tensor._arange_index(o, self.device) * s - b
      cnt = ((start + k).minimum(hi) - start.maximum(lo)).maximum(0).reshape([-1 if j == ax else 1 for j in range(n)])
      div = cnt if div is None else div * cnt
    assert div is not None
    return total / div.cast(total.dtype)
  def max_pool2d(self, kernel_size: int | tuple[int, ...] = (2, 2), stride: int | tuple[int, ...] | None = None,
                 dilation: int | tuple[int, ...] = 1, padding: int | Sequence[int] = 0, ceil_mode: bool = False,
                 return_indices: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    """Max pooling over the last len(kernel_size) axes (an int kernel: 2), as torch's max_pool1d/2d/3d. return_indices
    also gives, per window, the int32 flat position (over the spatial axes) of its first maximum, for max_unpool2d."""
    low = -math.inf if dtypes.is_float(self.dtype) else dtypes.min(self.dtype)
    # NOTE: an input that a gradient will read is stored first (where it is computed, a batchnorm and a relu before the
    # pool, the max recomputed it in every window), and the gradient counts the windows' maxima tap by tap
    # (_max_pool_gradient): the forward's max and that count read one view of the padded windows, which the scheduler
    # stored whole (k^2 values an input position: 9 for 3x3). Measured (AVX-512, 2 threads, ResNet-18 b32 128x128's
    # stem: conv, batchnorm, relu, pool and a 1x1 conv, one SGD step, each kernel's best of 5): the pool's kernels 61-73
    # ms (the stored windows 13-20, their max and count 33-34, the gradient's phases 14-19) -> 24-31 (the input stored
    # with the next kernel 5-6, the max 4-6, the count 4-6, the phases 10-13); the step's kernels 127-156 -> 66-86 ms
    src = self.contiguous() if dtypes.is_float(self.dtype) and self.requires_grad else self
    win, k_, s_, full, outs = src._pool_windows(kernel_size, stride, dilation, padding, ceil_mode, low, "max_pool2d")
    n = len(k_)
    out = win.max(tuple(range(-n, 0)))
    if dtypes.is_float(self.dtype):
      d_ = make_tuple(dilation, n)
      out = _with_gradient(out, (src,), lambda g, ret, x: (_max_pool_gradient(g, ret, x, k_, s_, d_, full),))
    if not return_indices: return out
    sp = self.shape[-n:]
    # NOTE: flat positions grow along each window, so the first maximum is the one with the least position
    pos = Tensor._arange_index(prod(sp), self.device).reshape(sp).pad(full, value=-1)
    pos = pos._pool(k_, s_, make_tuple(dilation, n))
    hit = (win == out.reshape(*out.shape, *([1] * n))) & (pos >= 0)
    idx = hit.where(pos, prod(sp)).min(tuple(range(-n, 0)))
    return out, idx.cast(dtypes.int32)

  # ---- nn ops ----
  @staticmethod
  def _pool_pairs(padding: int | Sequence[int], n: int, op: str) -> list[tuple[int, int]]:
    """(before, after) padding of n spatial axes from an int, one int for every axis (an int or a 1-tuple, as torch),
    n ints, or 2n ints in torch's flat order (last axis first)."""
    if isinstance(padding, int): return [(padding, padding)] * n
    if len(padding) == 1: return [(padding[0], padding[0])] * n
    if len(padding) == n: return [(p, p) for p in padding]
    if len(padding) == 2 * n: return [(padding[2 * i], padding[2 * i + 1]) for i in range(n)][::-1]
    raise ArgumentError(f"{op}: padding {padding} does not fit {n} spatial axes")
  def _pool_geometry(self, k_: tuple[int, ...], s_: tuple[int, ...], d_: tuple[int, ...], pads: list[tuple[int, int]],
                     ceil_mode: bool, op: str) -> tuple[list[int], list[tuple[int, int]]]:
    """Output sizes of a pooling window over the last len(k_) axes, and the padding that makes _pool produce exactly
    them: ceil_mode adds windows that start inside the input or its left padding (torch's rule) by padding the end."""
    if self.ndim < len(k_): raise ShapeMismatchError(f"{op}: kernel {k_} has more axes than the input {self.shape}")
    outs, full = [], []
    for i, k, s, dl, (b, a) in zip(self.int_shape(op, len(k_)), k_, s_, d_, pads):
      if k <= 0 or s <= 0 or dl <= 0:
        raise ArgumentError(f"{op}: kernel {k_}, stride {s_} and dilation {d_} must be positive (input {self.shape})")
      eff = dl * (k - 1) + 1
      # NOTE: torch's limit on its symmetric padding; the 2n-int form (any amounts per side) is ours and unchecked
      if a == b and a * 2 > eff:
        raise ShapeMismatchError(f"{op}: padding {pads} should be at most half of the (dilated) kernel {k_}")
      span = i + b + a - eff
      if span < 0:
        raise ShapeMismatchError(f"{op}: kernel {k_} (dilation {d_}) does not fit the padded spatial size "
                                 f"{tuple(self.shape[-len(k_):])} of the input {self.shape}")
      o = (ceildiv(span, s) if ceil_mode else span // s) + 1
      if ceil_mode and (o - 1) * s >= i + b: o -= 1
      outs.append(o)
      full.append((b, a + max(0, (o - 1) * s + eff - (i + b + a))))
    return outs, full
  def _pool_windows(self, kernel_size: int | tuple[int, ...], stride: int | tuple[int, ...] | None,
                    dilation: int | tuple[int, ...], padding: int | Sequence[int], ceil_mode: bool, value: ConstType,
                    op: str) -> tuple[Tensor, tuple[int, ...], tuple[int, ...], list[tuple[int, int]], list[int]]:
    """The padded windows (..., *o, *k) of a pooling op, with its kernel, stride, padding (with the ceil extra) and
    output sizes."""
    k_ = make_tuple(kernel_size, 2) if isinstance(kernel_size, int) else tuple(kernel_size)
    n = len(k_)
    s_ = k_ if stride is None or (not isinstance(stride, int) and len(stride) == 0) else make_tuple(stride, n)
    d_ = make_tuple(dilation, n)
    outs, full = self._pool_geometry(k_, s_, d_, Tensor._pool_pairs(padding, n, op), ceil_mode, op)
    win = self.pad([(0, 0)] * (self.ndim - n) + full, value=value)._pool(k_, s_, d_, op=op)
    return win, k_, s_, full, outs
  def max_unpool2d(self, indices: Tensor, kernel_size: int | tuple[int, ...] = (2, 2),
                   stride: int | tuple[int, ...] | None = None, padding: int | Sequence[int] = 0,
                   output_size: Sequence[int] | None = None) -> Tensor:
    """The inverse of max_pool2d(return_indices=True): zeros of the unpooled size with each value at its index."""
    k_ = make_tuple(kernel_size, 2) if isinstance(kernel_size, int) else tuple(kernel_size)
    n = len(k_)
    s_ = k_ if stride is None else make_tuple(stride, n)
    pads = Tensor._pool_pairs(padding, n, "max_unpool2d")
    if indices.shape != self.shape:
      raise ShapeMismatchError(f"max_unpool2d: indices {indices.shape} must have the shape of the input {self.shape}")
    sp = [(o - 1) * s - b - a + k for o, s, k, (b, a) in zip(self.int_shape("max_unpool2d")[-n:], s_, k_, pads)]
    if output_size is not None: sp = list(output_size)[-n:]
    lead = self.shape[:-n]
    flat = Tensor.zeros(*lead, prod(sp), dtype=self.dtype, device=self.device)
    out = flat.scatter(-1, indices.reshape(*lead, -1), self.reshape(*lead, -1))
    return out.reshape(*lead, *sp)
  def avg_pool1d(self, kernel_size: int = 2, stride: int | None = None, padding: int = 0, ceil_mode: bool = False,
                 count_include_pad: bool = True) -> Tensor:
    return self.avg_pool2d((kernel_size,), stride, padding, ceil_mode, count_include_pad)
  def avg_pool3d(self, kernel_size: int | tuple[int, ...] = 2, stride: int | tuple[int, ...] | None = None,
                 padding: int | Sequence[int] = 0, ceil_mode: bool = False, count_include_pad: bool = True) -> Tensor:
    return self.avg_pool2d(make_tuple(kernel_size, 3), stride, padding, ceil_mode, count_include_pad)
  def max_pool1d(self, kernel_size: int = 2, stride: int | None = None, dilation: int = 1, padding: int = 0,
                 ceil_mode: bool = False, return_indices: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    return self.max_pool2d((kernel_size,), stride, dilation, padding, ceil_mode, return_indices)
  def max_pool3d(self, kernel_size: int | tuple[int, ...] = 2, stride: int | tuple[int, ...] | None = None,
                 dilation: int | tuple[int, ...] = 1, padding: int | Sequence[int] = 0, ceil_mode: bool = False,
                 return_indices: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    return self.max_pool2d(make_tuple(kernel_size, 3), stride, dilation, padding, ceil_mode, return_indices)
  def conv_transpose2d(self, weight: Tensor, bias: Tensor | None = None, groups: int = 1,
                       stride: int | tuple[int, ...] = 1, dilation: int | tuple[int, ...] = 1,
                       padding: int | tuple[int, ...] = 0, output_padding: int | tuple[int, ...] = 0) -> Tensor:
    """Transposed convolution of (N, Cin, *spatial) with (Cin, Cout/groups, *kernel), any number of spatial axes
    (torch's conv_transpose1d/2d/3d). Strided and undilated (concrete shapes): one stride-1 conv per output phase
    (_conv_transpose_by_phase), no product with a zero. Otherwise the input spread out by stride (zeros between),
    padded by dilation*(k-1) - padding (plus output_padding at the end), then a conv2d with the flipped kernel: movement
    ops and one conv, one kernel."""
    if self.ndim != weight.ndim or self.ndim < 3:
      raise ShapeMismatchError(f"conv_transpose2d: input {self.shape} and weight {weight.shape} need the same number "
                               "of dims, at least 3 ((N, Cin, *spatial) and (Cin, Cout/groups, *kernel))")
    cin, k_ = weight.shape[0], weight.shape[2:]
    n = len(k_)
    if self.shape[1] != cin or cin % groups:
      raise ShapeMismatchError(f"conv_transpose2d: input {self.shape} and weight {weight.shape} do not match with "
                               f"groups={groups} (the input's {self.shape[1]} channels must equal the weight's first "
                               "axis, and divide by groups)")
    s_, d_, p_ = make_tuple(stride, n), make_tuple(dilation, n), make_tuple(padding, n)
    op_ = make_tuple(output_padding, n)
    if any(o >= max(s, d) for o, s, d in zip(op_, s_, d_)):
      raise ShapeMismatchError(f"conv_transpose2d: output_padding {op_} must be smaller than stride {s_} or dilation "
                               f"{d_}")
    if any(s > 1 for s in s_) and all(d == 1 for d in d_) and all_concrete(self.shape) and all_concrete(weight.shape):
      return self._conv_transpose_by_phase(weight, bias, groups, s_, p_, op_)
    x, sp = self, self.shape[2:]
    if any(s > 1 for s in s_):
      # NOTE: each element followed by s-1 zeros (pad a new axis of size 1 to s, merge it), the trailing zeros cut
      x = x.reshape(*self.shape[:2], *flatten((i, 1) for i in sp))
      x = x.pad([(0, 0)] * 2 + flatten(((0, 0), (0, s - 1)) for s in s_))
      x = x.reshape(*self.shape[:2], *[i * s for i, s in zip(sp, s_)])
      x = x.shrink([None, None] + [(0, (i - 1) * s + 1) if i else (0, 0) for i, s in zip(sp, s_)])
    x = x.pad([(0, 0)] * 2 + [(d * (k - 1) - p, d * (k - 1) - p + o) for k, d, p, o in zip(k_, d_, p_, op_)])
    return x.conv2d(_transposed_filters(weight, groups), bias, groups=groups, dilation=d_)
  def _conv_transpose_by_phase(self, weight: Tensor, bias: Tensor | None, groups: int, s_: tuple[int, ...],
                               p_: tuple[int, ...], op_: tuple[int, ...]) -> Tensor:
    """conv_transpose2d with a stride over 1 (undilated) as one stride-1 conv per output phase: the outputs o with
    (o + padding) % s == r along an axis take only the taps r, r + s, ... of the kernel, read at the input positions
    (o + padding) // s - j. Spread out with zeros between its elements instead, the input made (s**n - 1) / s**n of a
    conv's products multiply zeros, each read through a gated load with index division (a UNet's 2x2 stride-2
    upsampling: 3/4 of them). Each phase's conv is a plain conv (a matmul for a kernel as wide as the stride), and the
    phases are interleaved by movement ops; a phase with no tap (a kernel narrower than the stride) is zeros."""
    n, sp, k_ = len(s_), self.int_shape("conv_transpose2d")[2:], weight.int_shape("conv_transpose2d")[2:]
    wt = _transposed_filters(weight, groups)                                    # (Cout, Cin/groups, *k), flipped
    outs = [(i - 1) * s - 2 * p + k + o for i, s, p, k, o in zip(sp, s_, p_, k_, op_)]
    # NOTE: q positions per phase: every output (o + padding < q * s) and at least the input's (no negative pad)
    qs = [max(i, ceildiv(p + o, s)) for i, s, p, o in zip(sp, s_, p_, outs)]
    ys: list[Tensor] = []
    for r in itertools.product(*(range(s) for s in s_)):
      taps = [ceildiv(k - ri, s) if ri < k else 0 for k, ri, s in zip(k_, r, s_)]
      if 0 in taps:
        # NOTE: phase (0, ..., 0) comes first and always has a tap (k >= 1): its conv gives the shape and dtype
        ys.append(ys[0].zeros_like())
        continue
      # NOTE: phase r's taps r + s*j, flipped: those of the flipped kernel at k-1-r-s*(taps-1), every s-th on
      starts = [k - 1 - ri - s * (t - 1) for k, ri, s, t in zip(k_, r, s_, taps)]
      w_r = wt[(slice(None), slice(None), *(slice(a, a + s * (t - 1) + 1, s) for a, s, t in zip(starts, s_, taps)))]
      xp = self.pad([(0, 0)] * 2 + [(t - 1, q - i) for t, q, i in zip(taps, qs, sp)])
      ys.append(xp.conv2d(w_r, groups=groups))                                  # (N, Cout, *qs)
    y = Tensor.stack(*ys).reshape(*s_, *ys[0].shape)
    y = y.permute(n, n + 1, *flatten((n + 2 + j, j) for j in range(n))).reshape(*ys[0].shape[:2],
                                                                              *(q * s for q, s in zip(qs, s_)))
    y = y.shrink([None, None] + [(p, p + o) for p, o in zip(p_, outs)])
    # NOTE: differentiated as the adjoint of the strided conv it is: the input's gradient is that conv of dy (torch's
    # conv_transpose2d backward), the weight's that conv's weight gradient against the input. Through the phases,
    # the input's gradient summed s**n products of strided reads of dy in one reduce (UNet's 2x2 upsampling: 8-12
    # GFLOPS, 11-16 ms of its step for two)
    def rule(dy: Tensor, _out: Tensor, x_: Tensor, w_: Tensor) -> tuple[Tensor, Tensor]:
      dx = dy.conv2d(w_, stride=s_, padding=p_, groups=groups)
      # NOTE: dy and x detached: upstream of this rule they may depend on the weight themselves (a loss of y**2)
      dw = dy.detach().conv2d(w_, stride=s_, padding=p_, groups=groups).gradient(w_, gradient=x_.detach())[0]
      return dx, dw
    y = _with_gradient(y, (self, weight), rule)
    return y if bias is None else y + bias.reshape(1, -1, *([1] * n))
  def conv_transpose(self, weight: Tensor, bias: Tensor | None = None, groups: int = 1,
                     stride: int | tuple[int, ...] = 1, dilation: int | tuple[int, ...] = 1,
                     padding: int | tuple[int, ...] = 0, output_padding: int | tuple[int, ...] = 0) -> Tensor:
    return self.conv_transpose2d(weight, bias, groups, stride, dilation, padding, output_padding)
  def _resize_axis(self, ax: int, out: int, mode: str, align_corners: bool, sf: float | None) -> Tensor:
    """self resized along axis ax to `out` elements with torch's source-index rule for mode. When the sources repeat
    with a short period (src[o + q] = src[o] + p, as integer and simple rational scales give) the result is q strided
    views of self (movement ops, fused into one kernel); otherwise a (out, n) weight matrix is summed against self."""
    n = _int(self.shape[ax], "interpolate")
    # NOTE: the source positions in torch's arithmetic (float32, float64 for float64 input), computed on the host
    f32: Any = np.float64 if self.dtype is dtypes.float64 else np.float32
    o: Any = np.arange(out)
    scale: Any
    linear = mode == "linear"
    if not linear:
      scale = np.float32(1.0 / sf) if sf else np.float32(n) / np.float32(out)
      if out == n: src = o
      elif out == 2 * n and mode == "nearest": src = o >> 1
      elif mode == "nearest": src = np.floor(o.astype(np.float32) * scale)
      else: src = np.floor((o.astype(np.float64) + 0.5) * np.float64(scale)).astype(np.float32)
      i0, lam = np.minimum(src.astype(np.int64), n - 1), np.zeros(out, np.float32)
    else:
      if align_corners: scale = f32(n - 1) / f32(out - 1) if out > 1 else f32(0)
      else: scale = f32(1.0 / sf) if sf else f32(n) / f32(out)
      # NOTE: sources below 0 are not clamped here: the padded edge repeats element 0, which gives the same value
      srcf = (o.astype(f32) * scale) if align_corners else ((o.astype(f32) + f32(0.5)) * scale - f32(0.5))
      i0 = np.floor(srcf).astype(np.int64)
      lam = np.clip(srcf - i0.astype(f32), 0, 1).astype(f32)
    for q in range(1, min(out, 16) + 1):
      p = int(i0[q] - i0[0]) if q < out else 0
      if p < 0 or not np.array_equal(i0[q:], i0[:-q] + p) or not np.allclose(lam[q:], lam[:-q], rtol=0, atol=1e-6):
        continue
      # NOTE: each distinct phase is a view joined by a pad (a branch of the kernel): many make kernels slow to compile,
      # so only short periods take this path (integer up- and downscaling, 1.5x nearest); nearest with one start for
      # every phase (integer upscaling) is a plain expand
      if q <= (2 if linear else 4) or (not linear and len(set(i0[:q].tolist())) == 1):
        return self._resize_views(ax, out, q, p, i0[:q].tolist(), lam[:q].tolist(), linear)
      break
    return self._resize_matrix(ax, out, mode, align_corners, float(scale))
  def _resize_views(self, ax: int, out: int, q: int, p: int, starts: list[int], lams: list[float],
                    linear: bool) -> Tensor:
    """out[q*j + r] = self[starts[r] + p*j] (linear: blended with the next element by lams[r]). For linear the axis is
    padded with its edge elements, so sources -1 and n read the edges, as torch's clamping does."""
    nj = ceildiv(out, q)
    def along(t: Tensor, k: int, b: int, e: int) -> Tensor: return t.shrink([(b, e) if j == k else None
                                                                               for j in range(t.ndim)])
    x = self.pad([(1, 1) if j == ax else (0, 0) for j in range(self.ndim)], mode="replicate") if linear else self
    off = 1 if linear else 0
    # NOTE: room for every view (start + p*nj elements, one more for the blend); the rest only feeds outputs >= out
    need = max(starts) + off + max(p, 1) * nj + 1
    x = x.pad([(0, max(0, need - x.shape[ax])) if j == ax else (0, 0) for j in range(x.ndim)])
    def view(a: int) -> Tensor:
      """elements a, a+p, ..., a+p*(nj-1) of the axis: rows of length p, column 0 (p == 0: element a, repeated)"""
      if p == 0:
        v = along(x, ax, a, a + 1)
        return v.expand(*[nj if j == ax else s for j, s in enumerate(v.shape)])
      v = along(x, ax, a, a + p * nj)
      v = along(v.reshape(*v.shape[:ax], nj, p, *v.shape[ax + 1:]), ax + 1, 0, 1)
      return v.reshape(*v.shape[:ax], nj, *v.shape[ax + 2:])
    if not linear and len(set(starts)) == 1:
      v = view(starts[0]).unsqueeze(ax + 1)
      y = v.expand(*[q if j == ax + 1 else s for j, s in enumerate(v.shape)])
      return along(y.reshape(*y.shape[:ax], nj * q, *y.shape[ax + 2:]), ax, 0, out)
    parts = []
    for a, lam in zip(starts, lams):
      v = view(a + off)
      if linear and lam != 0: v = v * (1 - lam) + view(a + off + 1) * lam
      parts.append(v.unsqueeze(ax + 1))
    y = parts[0].cat(*parts[1:], dim=ax + 1)
    return along(y.reshape(*y.shape[:ax], nj * q, *y.shape[ax + 2:]), ax, 0, out)
  def _resize_matrix(self, ax: int, out: int, mode: str, align_corners: bool, scale: float) -> Tensor:
    """The general resize: per output, the source index (and weight) from arange constants in float32, as torch
    computes it, and a sum over the axis (one reduce kernel per resized axis)."""
    n = _int(self.shape[ax], "interpolate")
    o = Tensor._arange_index(out, self.device).cast(dtypes.float32)
    i = Tensor._arange_index(n, self.device).reshape(1, n)
    x = self.transpose(ax, -1).unsqueeze(-2)  # (..., 1, n)
    if mode != "linear":
      src = (o * scale).floor() if mode == "nearest" else ((o + 0.5) * scale).floor()
      hit = src.cast(dtypes.int32).minimum(n - 1).reshape(out, 1) == i
      return hit.where(x, _zero_of(self.dtype)).sum(-1).cast(self.dtype).transpose(ax, -1)
    srcf = (o * scale) if align_corners else ((o + 0.5) * scale - 0.5).maximum(0)
    i0 = srcf.cast(dtypes.int32)
    lam = (srcf - i0.cast(dtypes.float32)).clamp(0, 1).reshape(out, 1)
    i1 = (i0 < n - 1).where(i0 + 1, i0).reshape(out, 1)
    w = (i0.reshape(out, 1) == i).where(1 - lam, 0) + (i1 == i).where(lam, 0)
    return (x * w.cast(x.dtype)).sum(-1).transpose(ax, -1)
  def interpolate(self, size: int | Sequence[int] | None = None, scale_factor: float | Sequence[float] | None = None,
                  mode: str = "nearest", align_corners: bool | None = None,
                  recompute_scale_factor: bool | None = None) -> Tensor:
    """Resize the spatial axes of (N, C, *spatial) as torch.nn.functional.interpolate: mode "nearest", "nearest-exact",
    "linear", "bilinear" or "trilinear" (linear in each axis; align_corners maps the corner pixels' centres onto each
    other), to `size` or by `scale_factor`. One elementwise kernel when each axis' source pattern repeats with a short
    period (integer and simple ratios), else one reduce kernel per resized axis."""
    modes = {"nearest": None, "nearest-exact": None, "linear": 1, "bilinear": 2, "trilinear": 3}
    if mode not in modes:
      raise UnsupportedError(f"interpolate: mode {mode!r} is not supported, use one of {list(modes)}")
    if self.ndim < 3: raise UnsupportedError(f"interpolate: needs an (N, C, *spatial) input, got shape {self.shape}")
    n = self.ndim - 2
    if (want := modes[mode]) is not None and want != n and mode != "linear":
      raise UnsupportedError(f"interpolate: got a {self.ndim}-d input, but {mode} mode needs {want + 2}-d input")
    if modes[mode] is None and align_corners is not None:
      raise ArgumentError("interpolate: align_corners can only be set with the linear modes (linear, bilinear, "
                          "trilinear)")
    if (size is None) == (scale_factor is None):
      raise ArgumentError("interpolate: give exactly one of size and scale_factor")
    if size is not None:
      outs = list(make_tuple(size, n)) if isinstance(size, int) else list(size)
      if len(outs) != n: raise ArgumentError(f"interpolate: size {size} for {n} spatial axes of {self.shape}")
      sfs: list[float | None] = [None] * n
    else:
      sf = [float(scale_factor)] * n if isinstance(scale_factor, (int, float)) else \
        [float(v) for v in cast(Sequence[float], scale_factor)]
      if len(sf) != n:
        raise ArgumentError(f"interpolate: scale_factor {scale_factor} for {n} spatial axes of {self.shape}")
      outs = [int(math.floor(i * f)) for i, f in zip(self.int_shape("interpolate")[2:], sf)]
      sfs = [None if recompute_scale_factor else f for f in sf]
    if any(o <= 0 for o in outs) or any(i <= 0 for i in self.shape[2:]):
      raise ArgumentError(f"interpolate: input spatial sizes {self.shape[2:]} and output sizes {tuple(outs)} must "
                          "be > 0")
    # NOTE: int and bool inputs interpolate in float32 one axis at a time, the last first, each pass rounded to the
    # nearest integer (halves away from zero), as torch's separable uint8 kernels (torch has no other int kernels)
    as_int = modes[mode] is not None and not dtypes.is_float(self.dtype)
    x = self.cast(dtypes.float32) if as_int else self
    acc = dtypes.float32 if x.dtype in (dtypes.float16, dtypes.bfloat16) else x.dtype
    x = x.cast(acc)
    for k, (o, f) in reversed(list(enumerate(zip(outs, sfs)))) if as_int else enumerate(zip(outs, sfs)):
      x = x._resize_axis(2 + k, o, "linear" if modes[mode] is not None else mode, bool(align_corners), f)
      if as_int: x = x.sign() * (x.abs() + 0.5).floor()
    return x.cast(self.dtype)
  def scaled_dot_product_attention(self, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
                                   dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
                                   enable_gqa: bool = False) -> Tensor:
    """softmax(self @ key^T * scale + mask) @ value, as torch: a bool attn_mask keeps the True positions, a float one is
    added; is_causal keeps key positions <= query positions; a row with nothing kept gives zeros. dropout_p drops
    attention weights (always, as torch's functional does). enable_gqa repeats key/value heads to the query's. From
    SDPA_ROWS_MIN query rows and keys on (no dropout, query, key and value of one batch shape, one device) it runs by
    blocks of query rows and never holds the whole score matrix (_sdpa_by_rows)."""
    if self.ndim < 2 or key.ndim < 2 or value.ndim < 2 or self.shape[-1] != key.shape[-1] or \
       key.shape[-2] != value.shape[-2]:
      raise ShapeMismatchError(f"scaled_dot_product_attention: query {self.shape}, key {key.shape} and value "
                               f"{value.shape} do not fit (..., L, E), (..., S, E), (..., S, Ev)")
    if is_causal and attn_mask is not None:
      raise RuntimeError("scaled_dot_product_attention: give is_causal or an attn_mask, not both")
    if enable_gqa and self.ndim >= 3 and key.shape[-3] != self.shape[-3]:
      if self.shape[-3] % key.shape[-3]:
        raise ShapeMismatchError(f"scaled_dot_product_attention: {self.shape[-3]} query heads do not divide by "
                                 f"{key.shape[-3]} key/value heads")
      r = _int(self.shape[-3], "grouped-query attention") // _int(key.shape[-3], "grouped-query attention")
      key, value = key.repeat_interleave(r, -3), value.repeat_interleave(r, -3)
    ln, sn = self.shape[-2], key.shape[-2]
    out_dt, q = value.dtype, self
    if dtypes.is_float(out_dt) and out_dt.itemsize < 4:
      # NOTE: half/bfloat16 attention computed in float32 and rounded once, as torch's kernels do: the softmax of
      # half-precision scores (each product rounded) moves the weights by far more than a half ulp
      q, key, value = q.cast(dtypes.float32), key.cast(dtypes.float32), value.cast(dtypes.float32)
    head = _int(self.shape[-1], "scaled_dot_product_attention")
    sc = 1 / math.sqrt(head) if scale is None else scale
    if dropout_p == 0 and all(isinstance(n, int) for n in (ln, sn)) and min(ln, sn) >= SDPA_ROWS_MIN and \
       q.shape[:-2] == key.shape[:-2] == value.shape[:-2] and not isinstance(self.device, tuple) and \
       (attn_mask is None or attn_mask.dtype is dtypes.bool or not attn_mask.requires_grad):
      return q._sdpa_by_rows(key, value, sc, is_causal, attn_mask).cast(out_dt)
    qk = q.matmul(key.transpose(-2, -1)) * sc
    keep: Tensor | None = None
    if is_causal: keep = Tensor.ones(ln, sn, dtype=dtypes.bool, device=self.device).tril()
    if attn_mask is not None:
      if attn_mask.dtype is dtypes.bool: keep = attn_mask
      else: qk = qk + attn_mask.cast(qk.dtype)
    if keep is not None: qk = keep.where(qk, -math.inf)
    m = qk.max(-1, keepdim=True).detach()
    e = (qk - m.isinf().where(0, m)).exp()
    s = e.sum(-1, keepdim=True)
    w = e / (s == 0).where(1, s)
    if dropout_p >= 1: w = w * 0
    elif dropout_p > 0: w = (Tensor.rand(*w.shape, device=self.device) >= dropout_p).where(w, 0) * (1 / (1 - dropout_p))
    return w.cast(value.dtype).matmul(value).cast(out_dt)
  def _sdpa_by_rows(self, key: Tensor, value: Tensor, scale: float, causal: bool, mask: Tensor | None) -> Tensor:
    """scaled_dot_product_attention by blocks of query rows (FlashAttention's order, Dao et al. 2022, with a block's
    softmax taken whole): a block's scores cover only the keys its rows can see (under is_causal the first b for rows
    below b, half the work skipped over the whole), and its scores, exps and probabilities live only while the block
    is computed. The gradient recomputes them from each row's log-sum-exp instead of keeping them from the forward, so
    a training step keeps O(L) per head between forward and backward, not the O(L x S) probabilities."""
    ln, sn = _int(self.shape[-2], "attention"), _int(key.shape[-2], "attention")
    rows = SDPA_ROWS_BLOCK if ln >= 2 * SDPA_ROWS_MIN else SDPA_ROWS_BLOCK // 2
    blocks = [(a, min(a + rows, ln), min(sn, a + rows) if causal else sn) for a in range(0, ln, rows)]
    if mask is not None and mask.ndim < 2: mask = mask.reshape(*(1,) * (2 - mask.ndim), *mask.shape)
    def part(m: Tensor, a: int, b: int, e: int) -> Tensor:
      return m[..., slice(a, b) if m.shape[-2] != 1 else slice(None), slice(0, e) if m.shape[-1] != 1 else slice(None)]
    def scores(q: Tensor, k: Tensor, a: int, b: int, e: int) -> Tensor:
      s = q[..., a:b, :].matmul(k[..., :e, :].transpose(-2, -1)) * scale
      if mask is not None and mask.dtype is not dtypes.bool: s = s + part(mask, a, b, e).cast(s.dtype)
      keep = Tensor.ones(b - a, e, dtype=dtypes.bool, device=self.device).tril(a) if causal else \
        part(mask, a, b, e) if mask is not None and mask.dtype is dtypes.bool else None
      return s if keep is None else keep.where(s, -math.inf)
    outs, lses = [], []
    for a, b, e in blocks:
      s = scores(self, key, a, b, e)
      m = s.max(-1, keepdim=True)
      m = m.isinf().where(0, m)
      p = (s - m).exp()
      total = p.sum(-1, keepdim=True)
      empty = total == 0
      outs.append((p / empty.where(1, total)).matmul(value[..., :e, :]))
      # NOTE: a row that sees no key gives zeros, as the whole-matrix path; its log-sum-exp 0 keeps its exps 0
      lses.append(empty.where(0, m + total.log()))
    out = outs[0].cat(*outs[1:], dim=-2)
    def rule(do: Tensor, o: Tensor, q: Tensor, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor, Tensor]:
      d = (do * o).sum(-1, keepdim=True)
      dq: list[Tensor] = []
      dk = dv = None
      for (a, b, e), lse in zip(blocks, lses):
        p, doi = (scores(q, k, a, b, e) - lse).exp(), do[..., a:b, :]
        ds = p * (doi.matmul(v[..., :e, :].transpose(-2, -1)) - d[..., a:b, :])
        dq.append(ds.matmul(k[..., :e, :]) * scale)
        pad = ((0, 0),) * (q.ndim - 2) + ((0, sn - e), (0, 0))
        dki = (ds.transpose(-2, -1).matmul(q[..., a:b, :]) * scale).pad(pad)
        dvi = p.transpose(-2, -1).matmul(doi).pad(pad)
        dk, dv = (dki, dvi) if dk is None or dv is None else (dk + dki, dv + dvi)
      assert dk is not None and dv is not None
      return dq[0].cat(*dq[1:], dim=-2), dk, dv
    return _with_gradient(out, (self, key, value), rule)
  @staticmethod
  def einsum(formula: str | Tensor, *operands: Any, dtype: DType | None = None) -> Tensor:
    """Einstein summation as torch.einsum: letters a-zA-Z name axes, "..." the broadcast axes, a letter repeated in one
    operand takes its diagonal, letters missing from the output (implicit output: the letters used once, sorted, after
    "...") are summed. Sizes of one letter must match or be 1 (broadcast). Operands contract pairwise, left to right,
    each pair a multiply-and-sum (one kernel, like a matmul). torch's sublist form works too:
    einsum(a, [0, 1], b, [1, 2], [0, 2])."""
    if not isinstance(formula, str):
      args = [formula, *operands]
      def letters(sub: Sequence[Any]) -> str:
        if any(c is not Ellipsis and not (isinstance(c, int) and 0 <= c < 52) for c in sub):
          raise RuntimeError(f"einsum: sublist {list(sub)} must hold ints in [0, 52) and Ellipsis")
        # NOTE: 0..25 -> A..Z, 26..51 -> a..z keeps the ints' order in the implicit output's sorting
        return "".join("..." if c is Ellipsis else chr(ord("A") + c) if c < 26 else chr(ord("a") + c - 26) for c in sub)
      subs = [letters(s) for s in args[1::2]]
      rhs = f"->{letters(args[-1])}" if len(args) % 2 else ""
      return Tensor.einsum(",".join(subs[:len(args) // 2]) + rhs, *args[0:len(args) - len(args) % 2:2], dtype=dtype)
    ts = list(operands[0]) if len(operands) == 1 and isinstance(operands[0], (list, tuple)) else list(operands)
    xs = cast(list[Tensor], ts)
    eq = formula.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    specs = lhs.split(",")
    if len(specs) != len(xs):
      raise RuntimeError(f"einsum: the equation {formula!r} names {len(specs)} operands, {len(xs)} were given")
    for k, ch in enumerate(eq):
      if not (ch.isascii() and ch.isalpha()) and ch not in ",.->":
        raise RuntimeError(f"einsum: invalid subscript {ch!r} at index {k} of {formula!r}; subscripts are a-zA-Z")
    # each operand's subscripts as a list of labels; the axes under "..." get labels 0, 1, ... counted from the right
    labels: list[list[str | int]] = []
    ell = 0
    for k, (sp, x) in enumerate(zip(specs, xs)):
      if sp.count("...") > 1 or sp.replace("...", "").count("."):
        raise RuntimeError(f"einsum: operand {k} has a malformed ellipsis in {sp!r}")
      pre, has_ell, post = sp.partition("...")
      n_ell = x.ndim - len(pre) - len(post)
      if (n_ell != 0 and not has_ell) or n_ell < 0:
        raise RuntimeError(f"einsum: operand {k} has {len(pre) + len(post)} subscripts ({sp!r}) but {x.ndim} dims "
                           f"(shape {x.shape})")
      ell = max(ell, n_ell)
      labels.append([*pre, *range(n_ell - 1, -1, -1), *post])
    if arrow:
      if rhs.count("...") > 1 or rhs.replace("...", "").count("."):
        raise RuntimeError(f"einsum: malformed output {rhs!r}")
      pre, has_ell, post = rhs.partition("...")
      out: list[str | int] = [*pre, *(range(ell - 1, -1, -1) if has_ell else []), *post]
      for c in [*pre, *post]:
        if not any(c in lb for lb in labels):
          raise RuntimeError(f"einsum: output subscript {c} does not appear in any operand of {formula!r}")
        if [*pre, *post].count(c) > 1: raise RuntimeError(f"einsum: output subscript {c} appears more than once")
    else:
      counts: dict[str, int] = {}
      for lb in labels:
        for c in lb:
          if isinstance(c, str): counts[c] = counts.get(c, 0) + 1
      out = [*range(ell - 1, -1, -1), *sorted(c for c, m in counts.items() if m == 1)]
    # a repeated letter within an operand: its diagonal
    for k, (lb, x) in enumerate(zip(labels, xs)):
      while dup := next((c for c in lb if lb.count(c) > 1), None):
        i, j = lb.index(dup), lb.index(dup, lb.index(dup) + 1)
        if x.shape[i] != x.shape[j]:
          raise RuntimeError(f"einsum: subscript {dup} is repeated for operand {k} with sizes {x.shape[i]} != "
                             f"{x.shape[j]}")
        x = x.diagonal(0, i, j)
        lb = [c for m, c in enumerate(lb) if m not in (i, j)] + [dup]
      labels[k], xs[k] = lb, x
    # one size per label: equal, or 1 (broadcast)
    size: dict[str | int, int] = {}
    for k, (lb, x) in enumerate(zip(labels, xs)):
      for c, s in zip(lb, x.int_shape("einsum")):
        if size.get(c, 1) not in (1, s) and s != 1:
          what = f"subscript {c}" if isinstance(c, str) else "an ellipsis axis"
          raise RuntimeError(f"einsum: {what} has size {s} for operand {k} (shape {x.shape}), which does not broadcast "
                             f"with the size {size[c]} seen before")
        size[c] = s if s != 1 else size.get(c, 1)
    dt = dtype or least_upper_dtype(*(x.dtype for x in xs))
    order = list(dict.fromkeys([c for lb in labels for c in lb]))
    def full(x: Tensor, lb: list[str | int]) -> Tensor:
      """x with its axes in `order`, size 1 for the labels it lacks"""
      perm = sorted(range(len(lb)), key=lambda m: order.index(lb[m]))
      xp = x.cast(dt).permute(perm) if perm else x.cast(dt)
      have = [lb[m] for m in perm]
      return xp.reshape([xp.shape[have.index(c)] if c in have else 1 for c in order])
    acc, acc_lb = full(xs[0], labels[0]), set(labels[0])
    for k in range(1, len(xs)):
      nxt = full(xs[k], labels[k])
      later = set(out).union(*[set(lb) for lb in labels[k + 1:]])
      # NOTE: labels neither in the output nor in a later operand are summed with this pair (a matmul-like kernel)
      acc_lb |= set(labels[k])
      red = tuple(m for m, c in enumerate(order) if c in acc_lb and c not in later)
      acc = acc._broadcast_to(broadcast_shape(acc.shape, nxt.shape), "einsum") * nxt
      if red: acc = acc.sum(red, keepdim=True, dtype=sum_acc_dtype(dt)).cast(dt)
    red = tuple(m for m, c in enumerate(order) if c not in out)
    if red: acc = acc.sum(red, keepdim=True, dtype=sum_acc_dtype(dt)).cast(dt)
    acc = acc.reshape([acc.shape[m] for m, c in enumerate(order) if c in out]) if order else acc
    kept = [c for c in order if c in out]
    res = acc.permute([kept.index(c) for c in out]) if out else acc.reshape(())
    return res
  def var_mean(self, axis: int | Sequence[int] | None = _AXIS_DEFAULT, keepdim: bool = False, correction: float = 1,
               *, dim: int | Sequence[int] | None = None, unbiased: bool | None = None) -> tuple[Tensor, Tensor]:
    """(var, mean) over axis, as torch.var_mean."""
    axis = _axis_or_dim(axis, dim, "var_mean")
    return self.var(axis, keepdim, correction, unbiased=unbiased), self.mean(axis, keepdim)
  def std_mean(self, axis: int | Sequence[int] | None = _AXIS_DEFAULT, keepdim: bool = False, correction: float = 1,
               *, dim: int | Sequence[int] | None = None, unbiased: bool | None = None) -> tuple[Tensor, Tensor]:
    """(std, mean) over axis, as torch.std_mean."""
    axis = _axis_or_dim(axis, dim, "std_mean")
    return self.std(axis, keepdim, correction, unbiased=unbiased), self.mean(axis, keepdim)
  @staticmethod
  def _fans(shape: tuple[int, ...], op: str) -> tuple[int, int]:
    """torch's fans of a weight (out, in, *kernel): fan_in = in * prod(kernel), fan_out = out * prod(kernel)."""
    if len(shape) < 2: raise ArgumentError(f"{op}: fan in and fan out need a shape of at least 2 dims, got {shape}")
    rf = prod(shape[2:])
    return shape[1] * rf, shape[0] * rf
  @staticmethod
  def _gain(nonlinearity: str, a: float) -> float:
    """torch.nn.init.calculate_gain."""
    gains = {"linear": 1.0, "conv1d": 1.0, "conv2d": 1.0, "conv3d": 1.0, "sigmoid": 1.0, "tanh": 5 / 3,
             "relu": math.sqrt(2.0), "leaky_relu": math.sqrt(2.0 / (1 + a * a)), "selu": 0.75}
    if nonlinearity not in gains:
      raise ArgumentError(f"unsupported nonlinearity {nonlinearity!r}, use one of {list(gains)}")
    return gains[nonlinearity]
  @staticmethod
  def kaiming_normal(*shape: Any, a: float = 0.01, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                     **kw: Any) -> Tensor:
    """Normal with std gain / sqrt(fan) (torch.nn.init.kaiming_normal_; a is leaky_relu's negative slope)."""
    s = argfix(*shape)
    if mode not in ("fan_in", "fan_out"):
      raise ArgumentError(f"kaiming_normal: mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan = Tensor._fans(s, "kaiming_normal")[0 if mode == "fan_in" else 1]
    return Tensor.normal(*s, mean=0.0, std=Tensor._gain(nonlinearity, a) / math.sqrt(fan), **kw)
  @staticmethod
  def glorot_uniform(*shape: Any, gain: float = 1.0, **kw: Any) -> Tensor:
    """Uniform in +-gain * sqrt(6 / (fan_in + fan_out)) (Glorot/Xavier; torch.nn.init.xavier_uniform_)."""
    s = argfix(*shape)
    fi, fo = Tensor._fans(s, "glorot_uniform")
    bound = gain * math.sqrt(6.0 / (fi + fo))
    return Tensor.uniform(*s, low=-bound, high=bound, **kw)
  @staticmethod
  def xavier_uniform(*shape: Any, gain: float = 1.0, **kw: Any) -> Tensor:
    return Tensor.glorot_uniform(*shape, gain=gain, **kw)
  @staticmethod
  def xavier_normal(*shape: Any, gain: float = 1.0, **kw: Any) -> Tensor:
    """Normal with std gain * sqrt(2 / (fan_in + fan_out)) (torch.nn.init.xavier_normal_)."""
    s = argfix(*shape)
    fi, fo = Tensor._fans(s, "xavier_normal")
    return Tensor.normal(*s, mean=0.0, std=gain * math.sqrt(2.0 / (fi + fo)), **kw)
  def layernorm(self, axis: int | Sequence[int] = _AXIS_DEFAULT, eps: float = 1e-5, *,
                dim: int | Sequence[int] | None = None) -> Tensor:
    """(x - mean) / sqrt(var + eps) over axis (or dim; -1 when neither is given), no scale or shift."""
    axis = _axis_or_dim(axis, dim, "layernorm", -1)
    x = self._float()
    y = x - x.mean(axis, keepdim=True)
    return y * (y.square().mean(axis, keepdim=True) + eps).rsqrt()
  def batchnorm(self, weight: Tensor | None, bias: Tensor | None, mean: Tensor, invstd: Tensor,
                axis: int | Sequence[int] = _AXIS_DEFAULT, *, dim: int | Sequence[int] | None = None) -> Tensor:
    """(x - mean) * invstd * weight + bias, the statistics along `axis` (or dim; the channels, 1 by default): one axis
    (1-d statistics) or several (statistics shaped as those axes of x, in order)."""
    axes = self._axes(_axis_or_dim(axis, dim, "batchnorm", 1))
    shape = tuple(self.shape[k] if k in axes else 1 for k in range(self.ndim))
    x = (self - mean.reshape(shape)) * invstd.reshape(shape)
    if weight is not None: x = x * weight.reshape(shape)
    return x + bias.reshape(shape) if bias is not None else x
  def dropout(self, p: float = 0.5) -> Tensor:
    """In training (Tensor.training), each element zeroed with probability p and the rest scaled by 1/(1-p): as torch,
    the input times that mask (a NaN stays NaN), so p=1 gives self * 0."""
    if not 0 <= p <= 1: raise ArgumentError(f"dropout: probability p must be between 0 and 1, got {p}")
    if not Tensor.training or p == 0: return self
    if p == 1: return self * 0
    return self * (self.rand_like(dtype=dtypes.default_float) >= p).cast(self.dtype) * (1 / (1 - p))
  def embedding(self, weight: Tensor) -> Tensor:
    """Rows of `weight` (vocab, dim) picked by the int indices in self (a zero row for an index outside the table)."""
    if not dtypes.is_int(self.dtype): raise DTypeError(f"embedding: indices must be an int tensor, got {self.dtype}")
    # NOTE: a select summed over the rows, not a one-hot product: codegen collapses it to a load of the picked row
    # (codegen/gather.py), where a product would also sum 0 * the other rows (NaN where one holds an inf)
    mask = self.unsqueeze(-1).unsqueeze(-1) == Tensor._arange_index(weight.shape[0], self.device).unsqueeze(-1)
    out = mask.where(weight, 0).sum(-2).cast(weight.dtype)
    vocab, n = weight.shape[0], prod(self.shape)
    if not isinstance(vocab, int) or not isinstance(n, int) or n == 0: return out
    if vocab * n > EMBEDDING_STORED_ONE_HOT_MAX:
      return _with_gradient(out, (weight,), self._embedding_segment_rule(vocab))
    idx = self.reshape(1, n)
    def rule(dy: Tensor, _out: Tensor, w: Tensor) -> tuple[Tensor]:
      oht = (idx == Tensor._arange_index(vocab, idx.device).reshape(vocab, 1)).cast(dy.dtype).contiguous()
      return ((oht @ dy.reshape(n, dy.shape[-1])).cast(w.dtype),)
    return _with_gradient(out, (weight,), rule)
  def _embedding_segment_rule(self, vocab: int) -> Callable[..., tuple[Tensor]]:
    """The weight gradient of an embedding whose one-hot is too big to store: the segment sums (_segment_sums) of the
    upstream rows by their indices. GPT-2's 50257 rows, 768 wide, over 2048 tokens: 25.7 s as the forward's select's
    gradient (vocab*n*dim compares fused into its products), 22 ms (torch's backward 33 ms)."""
    n = prod(self.shape)
    idx = self.reshape(n)
    return lambda dy, _out, w: (Tensor._segment_sums(idx, dy.reshape(n, dy.shape[-1]), vocab).cast(w.dtype),)
  @staticmethod
  def _segment_sums(idx: Tensor, vals: Tensor, total: int) -> Tensor:
    """out[t] = the sum of the rows vals[j] (vals (n, R)) whose idx[j] (an int (n,)) is t, for t in [0, total); an
    index outside it is in no sum. The rows in the order of their indices (a stable sort), their running sum
    (float64: a row's sum is the difference of two prefixes, whose rounding grows with them), and each sum the
    difference of the prefixes at the ends of its run, found by a binary search of the sorted indices (searchsorted).
    The sort's work (its network's n log2(n)**2 / 4 compare-exchanges, or n*n ranked) + total*log2(n) loads for the
    ends + total*R loads for the sums, where a one-hot's compares fused into the sums are total*n*R. Float64 (out's
    dtype)."""
    # NOTE: the indices sorted as int32 (which sort packs into its network's keys; an int64 would be ranked, n*n
    # compares), each outside the targets clipped to -1 or total: still in no run, and ties keep their order. Targets of
    # 2^29 or more keep the indices as they are
    narrow = total < 1 << 29
    key = (idx.minimum(total) if dtypes.is_unsigned(idx.dtype) else idx.clip(-1, total)).cast(dtypes.int32) \
      if narrow else idx
    skey, perm = key.sort()
    csum = vals[perm].cast(dtypes.float64).cumsum(0).pad(((1, 0), (0, 0))).contiguous()
    # ends[t]: the count of indices below t, for t in [0, total]: one compare of each index with each end where that is
    # little work, else a binary search of the sorted indices (a kernel a step, a load a step and end)
    at = Tensor._arange_index(total + 1, idx.device)
    if idx.shape[0] * total <= SEGMENT_ENDS_MAX_COMPARES: ends = (idx.reshape(1, -1) <= (at - 1).reshape(-1, 1)).sum(1)
    else: ends = skey.contiguous().searchsorted(at, out_int32=True).contiguous()
    return csum[ends[1:]] - csum[ends[:-1]]
  # ---- losses (torch's definitions; reduction "mean", "sum" or "none") ----
  @staticmethod
  def _reduce_loss(loss: Tensor, reduction: str, name: str, divisor: Tensor | None = None) -> Tensor:
    if reduction == "none": return loss
    if reduction == "sum": return loss.sum()
    if reduction == "mean": return loss.mean() if divisor is None else loss.sum() / divisor
    raise ArgumentError(f"{name}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
  def _picked(self, y: Tensor, weight: Tensor | None, ignore_index: int, name: str) -> tuple[Tensor, Tensor]:
    """(-self[y] * w[y], w[y]) per target, 0 where y == ignore_index or out of range: self (N, C, d1, ...) or (C,)
    with the classes on axis 1 (0 for 1-d), y integer class indices (N, d1, ...) or ()."""
    c_ax = 1 if self.ndim >= 2 else 0
    want = self.shape[:c_ax] + self.shape[c_ax + 1:]
    if y.shape != want or not dtypes.is_int(y.dtype):
      raise ArgumentError(f"{name}: input {self.shape} needs integer class indices of shape {want} (classes on "
                          f"axis {c_ax}), got {y.shape} {y.dtype}")
    along = [-1 if k == c_ax else 1 for k in range(self.ndim)]
    hit = y.unsqueeze(c_ax) == Tensor._arange_index(self.shape[c_ax], self.device).reshape(along)
    w = Tensor.ones(self.shape[c_ax], device=self.device, dtype=self.dtype) if weight is None else \
      weight.cast(self.dtype)
    wy = (y != ignore_index).where(hit.where(w.reshape(along), 0).sum(c_ax), 0)
    return -hit.where(self, 0).sum(c_ax) * wy, wy
  def nll_loss(self, y: Tensor, weight: Tensor | None = None, ignore_index: int = -100,
               reduction: str = "mean") -> Tensor:
    """-self[y] for log-probabilities self (N, C, d1, ...) or (C,) and class indices y (N, d1, ...) or (); with weight
    (C,) each term is scaled by weight[y] and "mean" divides by the sum of those weights; y == ignore_index counts
    nowhere."""
    loss, wy = self._picked(y, weight, ignore_index, "nll_loss")
    return Tensor._reduce_loss(loss, reduction, "nll_loss", wy.sum())
  def cross_entropy(self, y: Tensor, reduction: str = "mean", label_smoothing: float = 0.0, ignore_index: int = -100,
                    weight: Tensor | None = None) -> Tensor:
    """Logits self (N, C, d1, ...) or (C,), classes on axis 1 (0 for 1-d), as torch: against integer class indices y
    (N, d1, ...) (ignore_index, weight; "mean" divides by the weight of the counted targets), or against class
    probabilities y of self's shape ("mean" divides by the number of targets). label_smoothing mixes in the uniform
    distribution."""
    c_ax = 1 if self.ndim >= 2 else 0
    ncls, want = self.shape[c_ax], self.shape[:c_ax] + self.shape[c_ax + 1:]
    probs = y.shape == self.shape and dtypes.is_float(y.dtype)
    if not probs and y.shape != want:
      raise ArgumentError(f"cross_entropy: logits {self.shape} need class indices of shape {want} or probabilities of "
                          f"shape {self.shape}, got {y.shape} {y.dtype}")
    logp = self.log_softmax(c_ax)
    wlogp = logp if weight is None else logp * weight.reshape([-1 if k == c_ax else 1 for k in range(self.ndim)])
    if probs:
      target = y * (1 - label_smoothing) + label_smoothing / ncls if label_smoothing else y
      return Tensor._reduce_loss(-(wlogp * target).sum(c_ax), reduction, "cross_entropy")
    loss, wy = logp._picked(y, weight, ignore_index, "cross_entropy")
    if label_smoothing:
      smooth = (y != ignore_index).where(-wlogp.sum(c_ax) * (1 / ncls), 0)
      loss = loss * (1 - label_smoothing) + smooth * label_smoothing
    return Tensor._reduce_loss(loss, reduction, "cross_entropy", wy.sum())
  def sparse_categorical_crossentropy(self, y: Tensor, label_smoothing: float = 0.0, ignore_index: int = -1,
                                      reduction: str = "mean") -> Tensor:
    """cross_entropy with the classes on the last axis (logits (..., C), indices (...)), ignoring y == ignore_index."""
    x = self if self.ndim <= 2 else self.permute(0, self.ndim - 1, *range(1, self.ndim - 1))
    return x.cross_entropy(y, reduction, label_smoothing, ignore_index)
  def binary_crossentropy(self, y: Tensor, reduction: str = "mean") -> Tensor:
    """-(y log p + (1 - y) log(1 - p)) for probabilities p = self, each log clamped at -100, with torch's gradients
    (finite at p = 0 and 1)."""
    p, yf = self._float()._operands(y, "binary_crossentropy")
    lp, l1p = p.log().maximum(-100), (1 - p).log().maximum(-100)
    loss = _with_gradient(-(yf * lp + (1 - yf) * l1p), (p, yf), _bce_gradient)
    return Tensor._reduce_loss(loss, reduction, "binary_crossentropy")
  def binary_crossentropy_logits(self, y: Tensor, reduction: str = "mean", pos_weight: Tensor | None = None) -> Tensor:
    """binary_crossentropy of sigmoid(self) from the logits: (1 - y) x + (1 + (pos_weight - 1) y) softplus(-x), exact
    at any x."""
    x = self._float()
    sp = (-x).softplus()
    loss = (1 - y) * x + (sp if pos_weight is None else (1 + (pos_weight - 1) * y) * sp)
    return Tensor._reduce_loss(loss, reduction, "binary_crossentropy_logits")

  # ---- autograd ----
  def _grad_graph(self) -> tuple[UOp, dict[UOp, UOp]]:
    """self's graph for autograd, and where each realized intermediate went in it. A realized intermediate (the buffer
    of a non-leaf tensor, whose lazy graph reads a tensor requiring grad) is swapped back for the graph that made it,
    so gradients flow through values realized on the way (a print in the middle of a forward pass must not cut the
    parameters off)."""
    root = self._graph if self._graph is not None else self.uop
    if not (kept := dict(list(_realized_graphs.items()))): return root, {}
    grad_uops = {t.uop for t in list(all_tensors) if t.requires_grad}
    reads = {u: set(g.toposort()) for u, g in kept.items()}
    live: dict[UOp, UOp] = {}
    # NOTE: live = reads a tensor requiring grad, directly or through another live one (to a fixed point)
    while new := {u: kept[u] for u, r in reads.items() if u not in live and (r & grad_uops or r & live.keys())}:
      live.update(new)
    where: dict[UOp, UOp] = {}
    while subs := {u: g for u in root.toposort() if (g := live.get(u)) is not None}:
      root = substitute(root, subs)
      where = {**{u: substitute(v, subs) for u, v in where.items()}, **subs}
      live = {u: g for u, g in live.items() if u not in subs}
    return root, where
  def gradient(self, *targets: Tensor, gradient: Tensor | None = None) -> list[Tensor]:
    """d(self)/d(target) for each target; self must be a scalar unless `gradient` (d(loss)/d(self)) is given."""
    if gradient is None:
      if self.numel() != 1:
        raise ArgumentError(f"gradient: implicit gradients need a scalar output, this one has shape {self.shape}")
      if not dtypes.is_float(self.dtype): raise DTypeError(f"gradient: needs a float output, got {self.dtype}")
      gradient = self.ones_like()
    if gradient.shape != self.shape:
      raise ArgumentError(f"gradient: the output gradient {gradient.shape} must have shape {self.shape}")
    root, where = self._grad_graph()
    tu = [where.get(t.uop, t.uop) for t in targets]
    grads = compute_gradient(root, gradient.cast(self.dtype).uop, set(tu))
    return [Tensor(grads[u]) if u in grads else t.zeros_like() for t, u in zip(targets, tu)]
  def backward(self, gradient: Tensor | None = None) -> Tensor:
    """Fill .grad of every tensor with requires_grad=True that self depends on (added to an existing .grad)."""
    root, where = self._grad_graph()
    nodes = root.toposort(gate=lambda u: u.op is not Ops.DETACH)
    targets = [t for t in list(all_tensors) if t.requires_grad and where.get(t.uop, t.uop) in nodes]
    if not targets: raise RuntimeError("backward: no tensor with requires_grad=True contributes to this tensor")
    for t, g in zip(targets, self.gradient(*targets, gradient=gradient)):
      if g.shape != t.shape: raise RuntimeError(f"backward: gradient shape {g.shape} != tensor shape {t.shape}")
      t.grad = g if t.grad is None else (t.grad + g)
    backward_roots.add(self)
    return self

  # ---- torch's names: aliases and small compositions of the ops above ----
  def absolute(self) -> Tensor: return self.abs()
  def negative(self) -> Tensor: return self.neg()
  def positive(self) -> Tensor: return self
  def multiply(self, y: Tensor | ConstType) -> Tensor: return self.mul(y)
  def subtract(self, y: Tensor | ConstType,
               alpha: ConstType = 1) -> Tensor: return self.sub(y * alpha if alpha != 1 else y)
  def divide(self, y: Tensor | ConstType, rounding_mode: str | None = None) -> Tensor:
    return self.div(y, rounding_mode=rounding_mode)
  def true_divide(self, y: Tensor | ConstType) -> Tensor: return self.div(y)
  def floor_divide(self, y: Tensor | ConstType) -> Tensor: return self.floordiv(y)
  def remainder(self, y: Tensor | ConstType) -> Tensor: return self.mod(y)
  def fmod(self, y: Tensor | ConstType) -> Tensor:
    """C's fmod: the remainder of the division truncated toward zero, with the sign of self (torch.fmod); ints give 0
    for a zero divisor, as numpy."""
    nz = isinstance(y, int) and y != 0
    x, yy = self._operands(y, "fmod")
    if dtypes.is_int(x.dtype): return x._int_divmod(Ops.MOD, yy, nz)
    xf, yf = x._float(), yy._float()
    r = xf._in_float32_binary(yf, lambda a, b: a._fmod_float(b))
    return _with_gradient(r, (xf, yf), lambda ctx, ret, a, b: (ctx, -ctx * (a / b).trunc()))
  def greater(self, y: Tensor | ConstType) -> Tensor: return self > y
  def greater_equal(self, y: Tensor | ConstType) -> Tensor: return self.ge(y)
  def less(self, y: Tensor | ConstType) -> Tensor: return self < y
  def less_equal(self, y: Tensor | ConstType) -> Tensor: return self.le(y)
  def not_equal(self, y: Tensor | ConstType) -> Tensor: return self.ne(y)
  def arcsin(self) -> Tensor: return self.asin()
  def arccos(self) -> Tensor: return self.acos()
  def arctan(self) -> Tensor: return self.atan()
  def arcsinh(self) -> Tensor: return self.asinh()
  def arccosh(self) -> Tensor: return self.acosh()
  def arctanh(self) -> Tensor: return self.atanh()
  def fix(self) -> Tensor: return self.trunc()
  def sgn(self) -> Tensor: return self.sign()
  def log10(self) -> Tensor: return self.log2() * (1 / math.log2(10))
  def logaddexp2(self, other: Tensor | ConstType) -> Tensor:
    """log2(2**self + 2**other) without overflow (torch.logaddexp2)."""
    o = other if isinstance(other, Tensor) else self._scalar_operand(other, "logaddexp2")
    return (self._float() * _LN2).logaddexp(o._float() * _LN2) / _LN2
  def frac(self) -> Tensor: return self - self.trunc()
  def deg2rad(self) -> Tensor: return self._float() * (math.pi / 180)
  def rad2deg(self) -> Tensor: return self._float() * (180 / math.pi)
  def hypot(self, other: Tensor | ConstType) -> Tensor:
    """sqrt(self**2 + other**2), scaled by the larger magnitude so it neither overflows nor underflows early."""
    x, y = self._operands(other, "hypot")
    a, b = x._float().abs(), y._float().abs()
    big, small = a.maximum(b), a.minimum(b)
    safe = (big == 0).where(1.0, big)
    r = big * (1 + (small / safe).square()).sqrt()
    return (big.isinf()).where(math.inf, r)
  def atan2(self, other: Tensor | ConstType) -> Tensor:
    """The angle of the point (other, self) in (-pi, pi], as torch.atan2(self, other): signed zeros and infinities as
    IEEE atan2."""
    y, x = self._operands(other, "atan2")
    y, x = y._float(), x._float()
    a = (y / x).atan()
    left = (x < 0) | ((x == 0) & x.signbit())
    pi = y.signbit().where(-math.pi, math.pi)
    r = left.where(a + pi, a)
    r = ((x == 0) & (y == 0)).where(left.where(pi, y), r)
    both_inf = y.isinf() & x.isinf()
    return both_inf.where(y.sign() * (x > 0).where(math.pi / 4, 3 * math.pi / 4), r)
  def arctan2(self, other: Tensor | ConstType) -> Tensor: return self.atan2(other)
  def xlogy(self, other: Tensor | ConstType) -> Tensor:
    """self * log(other), 0 where self is 0 (unless other is nan), as torch.xlogy."""
    x, y = self._operands(other, "xlogy")
    x, y = x._float(), y._float()
    return ((x == 0) & y.isnan().logical_not()).where(0.0, x * y.log())
  def logit(self, eps: float | None = None) -> Tensor:
    """log(p / (1 - p)), p clamped to [eps, 1 - eps] when eps is given (torch.logit)."""
    p = self._float()
    if eps is not None: p = p.clamp(eps, 1 - eps)
    return (p / (1 - p)).log()
  def sinc(self) -> Tensor:
    """sin(pi x) / (pi x), 1 at 0 (torch.sinc)."""
    x = self._float()
    px = x * math.pi
    return (x == 0).where(1.0, px.sin() / (x == 0).where(1.0, px))
  def heaviside(self, values: Tensor | ConstType) -> Tensor:
    """0 below zero, 1 above, `values` at zero (torch.heaviside)."""
    x, v = self._operands(values, "heaviside")
    return (x == 0).where(v, (x > 0).cast(x.dtype))
  def float_power(self, exponent: Tensor | ConstType) -> Tensor:
    """self ** exponent in float64 (torch.float_power)."""
    e = exponent.cast(dtypes.float64) if isinstance(exponent, Tensor) else exponent
    return self.cast(dtypes.float64).pow(e)
  def isposinf(self) -> Tensor: return self.isinf(detect_negative=False)
  def isneginf(self) -> Tensor: return self.isinf(detect_positive=False)
  def allclose(self, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    """Whether every element isclose (realizes and reads one bool)."""
    return bool(self.isclose(other, rtol, atol, equal_nan).all().item())
  def equal(self, other: Tensor) -> bool:
    """Same shape and the same values (realizes and reads one bool; torch.equal)."""
    return self.shape == other.shape and bool((self == other).all().item())
  def addcmul(self, tensor1: Tensor, tensor2: Tensor, value: ConstType = 1) -> Tensor:
    return self + tensor1 * tensor2 * value
  def addcdiv(self, tensor1: Tensor, tensor2: Tensor, value: ConstType = 1) -> Tensor:
    return self + tensor1 / tensor2 * value
  def mm(self, mat2: Tensor) -> Tensor:
    if self.ndim != 2 or mat2.ndim != 2: raise ShapeMismatchError(f"mm: needs two 2-d tensors, got {self.shape} and "
                                                                  f"{mat2.shape}")
    return self.matmul(mat2)
  def bmm(self, mat2: Tensor) -> Tensor:
    if self.ndim != 3 or mat2.ndim != 3 or self.shape[0] != mat2.shape[0]:
      raise ShapeMismatchError(f"bmm: needs two 3-d tensors with one batch size, got {self.shape} and {mat2.shape}")
    return self.matmul(mat2)
  def mv(self, vec: Tensor) -> Tensor:
    if self.ndim != 2 or vec.ndim != 1: raise ShapeMismatchError(f"mv: needs a 2-d and a 1-d tensor, got "
                                                                 f"{self.shape} and {vec.shape}")
    return self.matmul(vec)
  def inner(self, other: Tensor) -> Tensor:
    """The sum over the last axes of self and other of their products, all pairs of the other axes (torch.inner)."""
    if self.ndim == 0 or other.ndim == 0: return self * other
    return self.matmul(other.transpose(-1, -2) if other.ndim > 1 else other)
  def addmm(self, mat1: Tensor, mat2: Tensor, beta: ConstType = 1, alpha: ConstType = 1) -> Tensor:
    """beta * self + alpha * (mat1 @ mat2) (torch.addmm)."""
    return self * beta + mat1.mm(mat2) * alpha
  def t(self) -> Tensor:
    """The transpose of a tensor of at most 2 axes (torch.Tensor.t)."""
    if self.ndim > 2: raise ShapeMismatchError(f"t: needs at most 2 dims, got shape {self.shape}; use transpose or mT")
    return self.transpose(0, 1) if self.ndim == 2 else self
  @property
  def mT(self) -> Tensor: return self.transpose(-1, -2)
  def swapaxes(self, axis0: int, axis1: int) -> Tensor: return self.transpose(axis0, axis1)
  def swapdims(self, dim0: int, dim1: int) -> Tensor: return self.transpose(dim0, dim1)
  def movedim(self, source: int | Sequence[int], destination: int | Sequence[int]) -> Tensor:
    """Axes source moved to positions destination, the others in their order (torch.movedim)."""
    src = [self._axis(a) for a in make_tuple(source, 1)]
    dst = [self._axis(a) for a in make_tuple(destination, 1)]
    if len(src) != len(dst) or len(set(src)) != len(src) or len(set(dst)) != len(dst):
      raise ArgumentError(f"movedim: source {source} and destination {destination} must be as many distinct axes")
    rest = iter([a for a in range(self.ndim) if a not in src])
    where = dict(zip(dst, src))
    return self.permute([where[k] if k in where else next(rest) for k in range(self.ndim)])
  def moveaxis(self, source: int | Sequence[int], destination: int | Sequence[int]) -> Tensor:
    return self.movedim(source, destination)
  def ravel(self) -> Tensor: return self.flatten()
  def tile(self, dims: Sequence[int]) -> Tensor:
    """self repeated dims times along each axis; fewer dims than axes repeat the last ones (torch.tile)."""
    d = tuple(dims)
    return self.repeat((1,) * (self.ndim - len(d)) + d)
  def narrow(self, dim: int, start: int, length: int) -> Tensor:
    """length elements from start along dim (a view; torch.narrow)."""
    d = self._axis(dim)
    n = self.shape[d]
    b = start + n if start < 0 else start
    if not 0 <= b <= n or length < 0 or b + length > n:
      raise ArgumentError(f"narrow: start {start} + length {length} does not fit axis {d} of size {n}")
    return self.shrink([(b, b + length) if k == d else None for k in range(self.ndim)])
  def select(self, dim: int, index: int) -> Tensor:
    """The slice at index along dim, that axis removed (torch.select)."""
    d = self._axis(dim)
    n = _int(self.shape[d], "select")
    if not -n <= index < n: raise IndexError(f"select: index {index} is out of range for axis {d} of size {n}")
    return self.narrow(d, index % n, 1).squeeze(d)
  def index_select(self, dim: int, index: Tensor) -> Tensor:
    """The slices at the positions of the 1-d int tensor index along dim (torch.index_select)."""
    if index.ndim > 1: raise ShapeMismatchError(f"index_select: index must be 1-d, got shape {index.shape}")
    d = self._axis(dim)
    return self[(slice(None),) * d + (index.reshape(-1),)]
  def unbind(self, dim: int = 0) -> tuple[Tensor, ...]:
    """Every slice along dim, that axis removed (torch.unbind)."""
    d = self._axis(dim)
    return tuple(self.select(d, i) for i in range(_int(self.shape[d], "unbind")))
  def tensor_split(self, indices_or_sections: int | Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
    """n nearly equal parts (the first n % size one longer), or the parts between the given indices "
      "(torch.tensor_split)."""
    d = self._axis(dim)
    n = self.shape[d]
    if isinstance(indices_or_sections, int):
      k = indices_or_sections
      if k <= 0: raise ArgumentError(f"tensor_split: the number of sections must be positive, got {k}")
      cuts = [i * (n // k) + min(i, n % k) for i in range(1, k)]
    else: cuts = [min(max(c + n if c < 0 else c, 0), n) for c in indices_or_sections]
    bounds = list(zip([0, *cuts], [*cuts, n]))
    return tuple(self.shrink([(b, max(b, e)) if j == d else None for j in range(self.ndim)]) for b, e in bounds)
  def fliplr(self) -> Tensor: return self.flip(1)
  def flipud(self) -> Tensor: return self.flip(0)
  def rot90(self, k: int = 1, dims: Sequence[int] = (0, 1)) -> Tensor:
    """Rotated by 90 degrees k times in the plane of dims, from the first axis toward the second (torch.rot90)."""
    a, b = (self._axis(d) for d in dims)
    if a == b: raise ArgumentError(f"rot90: dims {tuple(dims)} must be two different axes")
    k %= 4
    if k == 0: return self
    if k == 2: return self.flip((a, b))
    return self.flip(b).transpose(a, b) if k == 1 else self.transpose(a, b).flip(b)
  def diff(self, n: int = 1, dim: int = -1, prepend: Tensor | None = None, append: Tensor | None = None) -> Tensor:
    """The n-th forward difference along dim, after joining prepend and append (torch.diff); bools give xor."""
    d = self._axis(dim)
    x = Tensor.cat(*[t for t in (prepend, self, append) if t is not None], dim=d)
    for _ in range(n):
      m = _int(x.shape[d], "diff")
      hi, lo = x.narrow(d, 1, max(m - 1, 0)), x.narrow(d, 0, max(m - 1, 0))
      x = hi ^ lo if x.dtype is dtypes.bool else hi - lo
    return x
  def cross(self, other: Tensor, dim: int | None = None) -> Tensor:
    """The cross product of 3-vectors along dim (the first axis of size 3 when None, as torch.cross did), broadcast."""
    x, y = self._operands(other, "cross")
    d = x._axis(dim) if dim is not None else next((k for k, s in enumerate(x.shape) if s == 3), -1)
    if d < 0 or x.shape[d] != 3: raise ShapeMismatchError(f"cross: axis {dim} of {x.shape} must have size 3")
    a0, a1, a2 = (x.select(d, i) for i in range(3))
    b0, b1, b2 = (y.select(d, i) for i in range(3))
    return Tensor.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], dim=d)
  def norm(self, p: float | str | None = "fro", dim: int | Sequence[int] | None = None,
           keepdim: bool = False) -> Tensor:
    """The p-norm over dim (all elements when None): p a number (inf, -inf, 0 counts nonzeros) or 'fro' (2), as
    torch.norm on vectors and flattened axes."""
    x = self._float().abs()
    q = 2.0 if p in ("fro", None) else p
    if not isinstance(q, (int, float)): raise ArgumentError(f"norm: p must be a number or 'fro', got {p!r}")
    if q == math.inf: return x.max(dim, keepdim)
    if q == -math.inf: return x.min(dim, keepdim)
    if q == 0: return (x != 0).sum(dim, keepdim).cast(x.dtype)
    if q == 1: return x.sum(dim, keepdim)
    if q == 2: return x.square().sum(dim, keepdim).sqrt()
    return x.pow(q).sum(dim, keepdim).pow(1 / q)
  def dist(self, other: Tensor, p: float = 2) -> Tensor: return (self - other).norm(p)
  def cpu(self) -> Tensor: return self.to("CPU")
  def dim(self) -> int: return self.ndim
  def ndimension(self) -> int: return self.ndim
  def nelement(self) -> sint: return self.numel()
  def reshape_as(self, other: Tensor) -> Tensor: return self.reshape(other.shape)
  def view_as(self, other: Tensor) -> Tensor: return self.reshape(other.shape)
  def type_as(self, other: Tensor) -> Tensor: return self.cast(other.dtype)
  def new_zeros(self, *size: Any, dtype: DTypeLike | None = None) -> Tensor:
    return Tensor.zeros(*size, dtype=dtype or self.dtype, device=self.device)
  def new_ones(self, *size: Any, dtype: DTypeLike | None = None) -> Tensor:
    return Tensor.ones(*size, dtype=dtype or self.dtype, device=self.device)
  def new_full(self, size: Sequence[int], fill_value: ConstType, dtype: DTypeLike | None = None) -> Tensor:
    return Tensor.full(tuple(size), fill_value, dtype=dtype or self.dtype, device=self.device)
  def new_empty(self, *size: Any, dtype: DTypeLike | None = None) -> Tensor:
    return Tensor.empty(*size, dtype=dtype or self.dtype, device=self.device)
  def new_tensor(self, data: Any, dtype: DTypeLike | None = None) -> Tensor:
    return Tensor(data, dtype=dtype or self.dtype, device=self.device)

  # ---- functional sugar ----
  def sequential(self, ll: list[Callable[[Tensor], Tensor]]) -> Tensor:
    return functools.reduce(lambda x, f: f(x), ll, self)
  def __iter__(self) -> Any:
    if not self.shape: raise TypeError("iteration over a 0-d tensor")
    return (self[i] for i in range(len(self)))

  # ---- several devices (tinygrad/schedule/multi.py; docs/multi.md) ----
  def shard(self, devices: tuple[str, ...] | list[str], axis: int | None = None) -> Tensor:
    """This tensor on several devices: split along `axis` into len(devices) parts as torch.tensor_split cuts them (the
    first size % n parts one row longer; with fewer rows than devices the last parts are empty), device i holding
    part i; or whole on every device (axis None: replicated). Ops on it run on every device at once; data moves only
    where an op needs another device's part (docs/multi.md)."""
    devs = _canon_devices(devices, "shard")
    if axis is None: return self._place(devs, None, None)
    if self.ndim == 0: raise MultiDeviceError(f"shard: a 0-d tensor has no axis {axis} to split; use axis=None")
    a = self._axis(axis)
    if not isinstance(size := self.shape[a], int):
      raise MultiDeviceError(f"shard: axis {a} has the symbolic size {render_sint(size)}; only a concrete axis splits")
    return self._place(devs, a, split_bounds(size, len(devs)))
  def shard_(self, devices: tuple[str, ...] | list[str], axis: int | None = None) -> Tensor:
    """shard in place (a parameter keeps its identity for its optimizer and TinyJit); a realized tensor stays
    realized, and its .grad is sharded the same way."""
    return self._replace_with(self.shard(devices, axis), lambda g: g.shard(devices, axis))
  def to_(self, device: str | tuple[str, ...] | None) -> Tensor:
    """Move to `device` (one device, or a set: replicated) in place; a realized tensor stays realized, and its .grad
    moves too."""
    return self._replace_with(self.to(device), lambda g: g.to(device))
  def _replace_with(self, new: Tensor, grad_fn: Callable[[Tensor], Tensor]) -> Tensor:
    realized = base_buffer(self.uop) is not None
    self.uop = new.uop
    if self.grad is not None: self.grad.uop = grad_fn(self.grad).uop
    if realized: self.realize(*([self.grad] if self.grad is not None else []))
    return self
  def _place(self, devs: tuple[str, ...], axis: int | None, bounds: tuple[tuple[int, int], ...] | None) -> Tensor:
    """This tensor laid out on devs, split on axis by bounds (None: replicated)."""
    from tinygrad.device import Device
    if not all_concrete(self.shape):
      raise MultiDeviceError(f"shard: a tensor of symbolic shape {render_shape(self.shape)} cannot be placed on "
                             "several devices; bind its sizes first")
    check_layout(cast(tuple[int, ...], self.shape), devs, axis, bounds, "shard")
    # NOTE: each device opens now, so an unknown device index is an error here, not at the first realize
    for d in devs: Device[d]  # noqa: B018
    return self._new(UOp(Ops.COPY, self.dtype, (self.uop, _device_uop(devs)), None if axis is None else (axis, bounds)))
  def _onto(self, other: Tensor) -> Tensor:
    """self moved where `other` is: to its device, or onto its devices split as it is (each device gets its part)."""
    if (lay := other._layout()) is None: return self.to(other.device)
    return self._place(*lay)
  def _layout(self) -> tuple[tuple[str, ...], int | None, tuple[tuple[int, int], ...] | None] | None:
    """(devices, split axis or None, bounds) of a tensor on several devices, None on one device."""
    return layout_of(self.uop)
  def _like(self, t: Tensor, kw: dict[str, Any]) -> Tensor:
    """t (made like self on self's devices) split as self is, unless a device was asked for."""
    if "device" in kw or not is_multi_device(self.device) or (lay := self._layout()) is None or lay[1] is None: return t
    return t._place(*lay)
  def _draw_per_shard(self, draw: Callable[..., Tensor], kw: dict[str, Any]) -> Tensor | None:
    """For a split tensor: random numbers in its layout, each device drawing its own part from its own stream (so no
    copy, and different numbers on each part); None for a tensor on one device or replicated."""
    if "device" in kw or not is_multi_device(self.device) or (lay := self._layout()) is None or lay[1] is None:
      return None
    devs, axis, bounds = lay
    assert bounds is not None and axis is not None
    dt = kw.get("dtype", self.dtype)
    parts = [draw(*(b[1] - b[0] if k == axis else s for k, s in enumerate(self.shape)), device=d, dtype=dt)
             for d, b in zip(devs, bounds)]
    return Tensor(multi([p.uop for p in parts], axis, bounds), requires_grad=kw.get("requires_grad"))

def _multi_numpy(m: UOp, dtype: DType) -> np.ndarray:
  """The values of a realized tensor on several devices: each device's shard read back and put in its place."""
  from tinygrad.device import buffer_of
  axis, bounds, _ = m.arg
  parts = []
  for sh in m.src:
    buf = buffer_of(cast(UOp, base_buffer(sh)))
    if not buf.is_allocated(): buf.allocate()
    parts.append(from_storage_np(buf.numpy(), dtype).reshape(sh.shape))
  if axis is None: return parts[0]
  out = np.empty(cast(tuple, m.shape), dtype=parts[0].dtype)
  for p, (b, e) in zip(parts, bounds): out[(slice(None),) * axis + (slice(b, e),)] = p
  return out

def _readers_of_overwritten(todo: list[Tensor]) -> list[Tensor]:
  """Live lazy tensors that read a buffer (or a pending ASSIGN to it) which this realize overwrites with an ASSIGN.
  They are realized in the same schedule, which orders their kernels before the overwrite: realized later, they would
  read the buffer's new contents instead of the value it held when they were built (`loss.backward(); opt.step();
  loss.item()` must give the loss of the old weights)."""
  overwritten: set[UOp] = set()
  for u in UOp.sink(*[t.uop for t in todo]).toposort():
    if u.op is not Ops.ASSIGN: continue
    tgt = u.src[0]
    while tgt.op in GroupOp.Movement: tgt = tgt.src[0]
    overwritten.add(tgt)
  if not overwritten: return []
  have = set(todo)
  # NOTE: a pure view of a buffer (a slice, a transpose) aliases it, as a torch view does: it sees the write
  cands = [t for t in list(all_tensors) if t not in have and t.uop.op is not Ops.ASSIGN and
           not _is_view_of_buffer(t.uop) and t.numel() != 0]
  if not cands: return []
  # NOTE: a reader through an ASSIGN reads its written value, which stays valid: the walk stops at ASSIGNs (a pending
  # ASSIGN that is itself overwritten is in `overwritten`, so it still counts); a pending write is realized as a write.
  # One walk of all the candidates' graphs together (each node once), not one of each candidate's: an eager LSTM step
  # has hundreds of live lazy tensors over one graph (0.56 s of its 1.4 s, walked one by one)
  old: dict[UOp, bool] = {}
  for u in UOp.sink(*[t.uop for t in cands]).toposort(gate=lambda n: n.op is not Ops.ASSIGN):
    old[u] = u in overwritten or (u.op is not Ops.ASSIGN and any(old.get(x, False) for x in u.src))
  return [t for t in cands if old[t.uop]]

def _apply_becomes(becomes: dict[UOp, UOp]) -> None:
  """Point every live tensor at the buffers its graph was realized into. Tensors that autograd may still differentiate
  keep their lazy graph in `_graph`."""
  if not becomes: return
  # NOTE: an ASSIGN overwrote its buffer: the lazy graph recorded for the old contents no longer describes it
  if written := {_view_base(u.src[0]) for u in becomes if u.op is Ops.ASSIGN}:
    for k in [k for k in list(_realized_graphs.keys()) if _view_base(k) in written]: _realized_graphs.pop(k, None)
  for t in list(all_tensors):
    if base_buffer(t.uop) is not None: continue
    if (new := becomes.get(t.uop)) is not None:
      if t.requires_grad and t.uop.op is not Ops.ASSIGN:
        if t._graph is None: t._graph = t.uop
        if t._nonleaf: _realized_graphs[new] = t.uop
      t.uop = new
    elif t.uop.op is not Ops.CONST and any(u in becomes for u in t.uop.toposort()):
      t.uop = substitute(t.uop, becomes)

__all__ = ["Tensor", "broadcast_shape", "ShapeMismatchError", "base_buffer", "all_tensors", "backward_roots",
           "CreationOrderedTensors"]
