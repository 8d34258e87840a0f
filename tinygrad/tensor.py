"""Tensor: the lazy, numpy-like front end. Every op builds the tensor graph of docs/ir.md section 1; nothing runs until
realize(), numpy(), item() or tolist().

Contract with the scheduler: realize() hands a SINK of the tensors' graphs to `create_schedule_with_vars`, runs the
items, and swaps every tensor's graph for what `becomes` says it is now (a BUFFER reshaped to the tensor's shape), so
later ops read the buffer. `assign()` on a realized tensor builds `ASSIGN(buffer view, value)`.
"""
from __future__ import annotations
import math, weakref, functools
from typing import Any, Callable, Sequence, cast
import numpy as np
from tinygrad.uop import Ops, GroupOp
from tinygrad.uop.ops import UOp
from tinygrad.dtype import DType, dtypes, least_upper_dtype, least_upper_float, sum_acc_dtype, to_np_dtype
from tinygrad.dtype import from_np_dtype
from tinygrad.dtype import to_storage_np, from_storage_np, ConstType
from tinygrad.helpers import prod, argfix, make_tuple, ceildiv, flatten
from tinygrad.gradient import compute_gradient

# ---- graph building helpers (UOp level) ----

def _device_uop(device: str) -> UOp: return UOp(Ops.DEVICE, arg=device)

def _const_uop(val: ConstType, dtype: DType, device: str, shape: tuple[int, ...] = ()) -> UOp:
  """CONST with a DEVICE source (shape ()), broadcast to `shape` with reshape+expand as the tensor spec asks."""
  c = UOp(Ops.CONST, dtype, (_device_uop(device),), dtypes.as_const(val, dtype))
  return c.reshape((1,) * len(shape)).expand(shape) if shape else c

def _canon_device(device: str | None) -> str:
  from tinygrad.device import Device
  return Device.DEFAULT if device is None else Device.canonicalize(device)

def _buffer_uop(arr: np.ndarray, dtype: DType, device: str, raw: bool = False) -> UOp:
  """A BUFFER UOp holding a copy of `arr` (allocated and registered with tinygrad.device), reshaped to arr's shape.
  With raw, arr already holds the storage (bfloat16/fp8 bit patterns)."""
  from tinygrad.device import Buffer, set_buffer, next_unique
  data = (np.ascontiguousarray(arr) if raw else np.ascontiguousarray(to_storage_np(arr, dtype))).reshape(-1)
  u = UOp(Ops.BUFFER, dtype, (UOp(Ops.UNIQUE, arg=next_unique()), _device_uop(device)), data.size)
  buf = Buffer(device, data.size, dtype).allocate()
  if data.size: buf.copyin(memoryview(data.view(np.uint8).tobytes()))
  set_buffer(u, buf)
  return u.reshape(arr.shape)

def _new_buffer_uop(size: int, dtype: DType, device: str) -> UOp:
  from tinygrad.device import next_unique
  return UOp(Ops.BUFFER, dtype, (UOp(Ops.UNIQUE, arg=next_unique()), _device_uop(device)), size)

def _base_buffer(u: UOp) -> UOp | None:
  """The BUFFER under a realized tensor's uop (BUFFER or RESHAPE(BUFFER)), else None."""
  while u.op is Ops.RESHAPE: u = u.src[0]
  return u if u.op in (Ops.BUFFER, Ops.BUFFER_VIEW) else None

def _is_view_of_buffer(u: UOp) -> bool:
  while u.op in GroupOp.Movement: u = u.src[0]
  return u.op in (Ops.BUFFER, Ops.BUFFER_VIEW)

def _view_base(u: UOp) -> UOp:
  while u.op in GroupOp.Movement or u.op is Ops.ASSIGN: u = u.src[0]
  return u

def _is_writable_view(u: UOp) -> bool:
  """A view of a realized buffer where each element is one element of the buffer (no EXPAND): assigning to it writes
  through to the buffer, as a torch view does."""
  while u.op in GroupOp.Movement and u.op is not Ops.EXPAND: u = u.src[0]
  return u.op in (Ops.BUFFER, Ops.BUFFER_VIEW)

def broadcast_shape(*shapes: tuple[int, ...], op: str = "broadcast") -> tuple[int, ...]:
  """numpy broadcasting: align right, size-1 axes stretch; anything else is an error naming every shape and the op."""
  nd = max((len(s) for s in shapes), default=0)
  padded = [(1,) * (nd - len(s)) + tuple(s) for s in shapes]
  out = []
  for sizes in zip(*padded):
    big = {s for s in sizes if s != 1}
    if len(big) > 1:
      raise ValueError(f"{op}: shapes {' and '.join(str(tuple(s)) for s in shapes)} do not broadcast (numpy rules)")
    out.append(big.pop() if big else 1)
  return tuple(out)

_all_tensors: weakref.WeakSet[Tensor] = weakref.WeakSet()
# outputs backward() ran from: an optimizer step realizes them with its update, so a loss read after the step still
# holds the value from before the parameters changed
_backward_roots: weakref.WeakSet[Tensor] = weakref.WeakSet()
# the realized view of a tensor that required grad -> the lazy graph that computed it, for as long as a graph reads it,
# so autograd can look through values realized in the middle of a forward pass (even once their Tensor is gone)
_realized_graphs: weakref.WeakKeyDictionary[UOp, UOp] = weakref.WeakKeyDictionary()

# ---- Tensor ----

class _CastSugar:
  __slots__ = ()
  # NOTE: in a base class, so that `int`, `float` and `bool` in Tensor's annotations still name the builtins
  def cast(self, dtype: DType) -> Tensor: raise NotImplementedError
  def float(self) -> Tensor: return self.cast(dtypes.float32)
  def half(self) -> Tensor: return self.cast(dtypes.float16)
  def int(self) -> Tensor: return self.cast(dtypes.int32)
  def bool(self) -> Tensor: return self.cast(dtypes.bool)
  def long(self) -> Tensor: return self.cast(dtypes.int64)
  def double(self) -> Tensor: return self.cast(dtypes.float64)

class Tensor(_CastSugar):
  """A lazy n-d array: `.uop` is its tensor graph, `.requires_grad` marks it for backward(), `.grad` receives the
  gradient."""
  __slots__ = ("uop", "requires_grad", "grad", "_graph", "_nonleaf", "__weakref__")
  training: bool = False
  _seed: int = 0
  _rng_states: dict[str, Tensor] = {}

  def __init__(self, data: Any, device: str | None = None, dtype: DType | None = None,
               requires_grad: bool | None = None):
    if isinstance(data, Tensor): data = data.uop
    if isinstance(data, UOp):
      uop = data if dtype is None or data.dtype is dtype else data.cast(dtype)
    elif isinstance(data, (bool, int, float)) and not isinstance(data, np.generic):
      uop = _const_uop(data, dtype or dtypes.from_py(data), _canon_device(device))
    else:
      if isinstance(data, (list, tuple)):
        dt = dtype or dtypes.from_py(data)
        npdt = np.float32 if dt in dtypes.fp8s or dt is dtypes.bfloat16 else to_np_dtype(dt)
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
    _all_tensors.add(self)

  def __hash__(self) -> int: return id(self)
  def __repr__(self) -> str:
    return f"<Tensor {self.shape} {self.dtype} on {self.device}{' grad' if self.requires_grad else ''}>"
  def __len__(self) -> int:
    if not self.shape: raise TypeError("len() of a 0-d tensor")
    return self.shape[0]
  def __bool__(self) -> bool: raise TypeError("the truth value of a Tensor is ambiguous; use .item(), .any() or .all()")

  @property
  def shape(self) -> tuple[int, ...]: return cast(tuple[int, ...], self.uop.shape)
  @property
  def dtype(self) -> DType: return self.uop.dtype
  @property
  def device(self) -> str: return cast(str, self.uop.device)
  @property
  def ndim(self) -> int: return len(self.shape)
  def numel(self) -> int: return int(prod(self.shape))
  def element_size(self) -> int: return self.dtype.itemsize
  def nbytes(self) -> int: return self.numel() * self.dtype.itemsize
  def is_floating_point(self) -> bool: return dtypes.is_float(self.dtype)
  def size(self, dim: int | None = None) -> int | tuple[int, ...]:
    return self.shape if dim is None else self.shape[self._axis(dim)]

  def _new(self, u: UOp, *others: Tensor) -> Tensor:
    ret = Tensor(u)
    if self.requires_grad or any(o.requires_grad for o in others):
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
      if _base_buffer(t.uop) is not None: continue
      # NOTE: an empty tensor needs no kernel: it becomes an empty buffer at once
      if t.numel() == 0:
        if apply: _apply_becomes({t.uop: _new_buffer_uop(0, t.dtype, t.device).reshape(t.shape)})
      else: todo.append(t)
    if not todo: return [], {}
    # NOTE: a bare view of a buffer (a permute, a shrink) is not a kernel by itself: ask for a contiguous copy of it
    outs = {t.uop: t.uop.contiguous() if _is_view_of_buffer(t.uop) else t.uop for t in todo}
    items, becomes, var_vals = create_schedule_with_vars(UOp.sink(*dict.fromkeys(outs.values())))
    if apply: _apply_becomes({**becomes, **{u: becomes[o] for u, o in outs.items() if o is not u and o in becomes}})
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
    if is_capturing():
      raise RuntimeError(f"numpy()/item()/tolist() of {self!r} inside a function TinyJit is capturing: a replay does "
                         "not run the function, so it cannot read values on the host; return the tensor instead")
    self.realize()
    b = _base_buffer(self.uop)
    if b is None: raise RuntimeError(f"numpy: {self!r} did not realize to a buffer")
    buf = buffer_of(b)
    if not buf.is_allocated(): buf.allocate()
    return from_storage_np(buf.numpy(), self.dtype).reshape(self.shape)
  def tolist(self) -> Any: return self.numpy().tolist()
  def item(self) -> ConstType:
    if self.numel() != 1:
      raise ValueError(f"item: only a tensor of one element has an item, this one has shape {self.shape}")
    return cast(ConstType, self.numpy().reshape(-1)[0].item())
  def data(self) -> np.ndarray: return self.numpy()

  def contiguous(self) -> Tensor: return self._new(self.uop.contiguous(), )
  def detach(self) -> Tensor: return Tensor(self.uop.detach())
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
  def to(self, device: str | None) -> Tensor:
    dev = _canon_device(device)
    if dev == self.device: return self
    return self._new(UOp(Ops.COPY, self.dtype, (self.uop, _device_uop(dev))))

  def assign(self, x: Any) -> Tensor:
    """Write x into self (broadcast and cast to self's shape and dtype). On a realized tensor this is an ASSIGN to its
    buffer, run at the next realize; on a lazy one it just replaces the graph."""
    x = x if isinstance(x, Tensor) else Tensor(x, device=self.device, dtype=self.dtype)
    if x.shape != self.shape: x = x._broadcast_to(self.shape, "assign")
    if x.dtype is not self.dtype: x = x.cast(self.dtype)
    if _base_buffer(self.uop) is None and self.uop.op is not Ops.ASSIGN and not _is_writable_view(self.uop):
      self.uop = x.uop
      return self
    self.uop = UOp(Ops.ASSIGN, self.dtype, (self.uop, x.uop))
    self._graph = None
    return self

  def replace(self, x: Tensor) -> Tensor:
    if x.shape != self.shape: raise ValueError(f"replace: shape {x.shape} != {self.shape}")
    self.uop = x.uop
    return self

  # ---- construction ----
  @staticmethod
  def _from_storage(bits: np.ndarray, dtype: DType, device: str | None = None) -> Tensor:
    """A tensor whose buffer holds `bits` as they are (the storage of dtype: bit patterns for bfloat16 and fp8)."""
    return Tensor(_buffer_uop(bits, dtype, _canon_device(device), raw=True))
  @staticmethod
  def _shape_arg(shape: tuple[Any, ...]) -> tuple[int, ...]:
    s = argfix(*shape)
    if not all(isinstance(x, int) and x >= 0 for x in s): raise ValueError(f"shape must be non-negative ints, got {s}")
    return s
  @staticmethod
  def empty(*shape: Any, device: str | None = None, dtype: DType | None = None, **kw: Any) -> Tensor:
    s, dt, dev = Tensor._shape_arg(shape), dtype or dtypes.default_float, _canon_device(device)
    return Tensor(_new_buffer_uop(prod(s), dt, dev).reshape(s), **kw)
  @staticmethod
  def full(shape: tuple[int, ...] | int, fill_value: ConstType, device: str | None = None, dtype: DType | None = None,
           **kw: Any) -> Tensor:
    s, dt = Tensor._shape_arg((shape,) if isinstance(shape, int) else tuple(shape)), dtype or dtypes.from_py(fill_value)
    return Tensor(_const_uop(fill_value, dt, _canon_device(device), s), **kw)
  @staticmethod
  def zeros(*shape: Any, **kw: Any) -> Tensor:
    return Tensor.full(argfix(*shape), 0.0, **{"dtype": dtypes.default_float, **kw})
  @staticmethod
  def ones(*shape: Any, **kw: Any) -> Tensor:
    return Tensor.full(argfix(*shape), 1.0, **{"dtype": dtypes.default_float, **kw})
  def full_like(self, fill_value: ConstType, **kw: Any) -> Tensor:
    return Tensor.full(self.shape, fill_value, **{"dtype": self.dtype, "device": self.device, **kw})
  def zeros_like(self, **kw: Any) -> Tensor: return self.full_like(0, **kw)
  def ones_like(self, **kw: Any) -> Tensor: return self.full_like(1, **kw)
  def empty_like(self, **kw: Any) -> Tensor:
    return Tensor.empty(self.shape, **{"dtype": self.dtype, "device": self.device, **kw})
  def rand_like(self, **kw: Any) -> Tensor:
    return Tensor.rand(self.shape, **{"dtype": self.dtype, "device": self.device, **kw})
  def randn_like(self, **kw: Any) -> Tensor:
    return Tensor.randn(self.shape, **{"dtype": self.dtype, "device": self.device, **kw})

  @staticmethod
  def _arange_index(n: int, device: str | None) -> Tensor:
    """int32 0..n-1 from constants only: a cumsum of ones for n <= 1024, above that a 2-d split i = a*b + c of two
    smaller ones. The scheduler folds the cumsum's window sum to a closed form (rangeify.fold_int_sum), so it costs no
    loop and fuses into its consumers."""
    if n == 0: return Tensor.zeros(0, dtype=dtypes.int32, device=device)
    if n <= 1024: return Tensor.ones(n, device=device, dtype=dtypes.int32).cumsum() - 1
    b = math.isqrt(n - 1) + 1
    a = ceildiv(n, b)
    hi = Tensor._arange_index(a, device) * b
    return (hi.reshape(a, 1) + Tensor._arange_index(b, device).reshape(1, b)).flatten().shrink(((0, n),))
  @staticmethod
  def arange(start: int | float, stop: int | float | None = None, step: int | float = 1, device: str | None = None,
             dtype: DType | None = None, **kw: Any) -> Tensor:
    if stop is None: start, stop = 0, start
    if step == 0: raise ValueError("arange: step must not be zero")
    is_float = any(isinstance(v, float) for v in (start, stop, step))
    dt = dtype or (dtypes.default_float if is_float else dtypes.default_int)
    n = max(0, math.ceil((stop - start) / step))
    idx = Tensor._arange_index(n, device)
    return Tensor((idx.cast(dt) * step + start).uop if n else _const_uop(0, dt, _canon_device(device), (0,)), **kw)
  @staticmethod
  def linspace(start: float, stop: float, steps: int, device: str | None = None, dtype: DType | None = None,
               **kw: Any) -> Tensor:
    if steps < 0: raise ValueError(f"linspace: steps must be >= 0, got {steps}")
    dt = dtype or dtypes.default_float
    if steps == 1: return Tensor.full((1,), start, device=device, dtype=dt, **kw)
    t = Tensor._arange_index(steps, device).cast(dtypes.float32 if dt is not dtypes.float64 else dt)
    return Tensor((t * ((stop - start) / max(steps - 1, 1)) + start).cast(dt).uop, **kw)
  @staticmethod
  def eye(n: int, m: int | None = None, device: str | None = None, dtype: DType | None = None, **kw: Any) -> Tensor:
    m = n if m is None else m
    e = Tensor._arange_index(n, device).reshape(n, 1) == Tensor._arange_index(m, device).reshape(1, m)
    return Tensor(e.cast(dtype or dtypes.default_float).uop, **kw)

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
    return Tensor(_buffer_uop(np.array([Tensor._seed & 0xFFFFFFFFFFFFFFFF, 0], dtype=np.uint64), dtypes.uint64, dev))
  @staticmethod
  def _rng_state(dev: str) -> Tensor:
    """The current generator state of `dev` (a realized uint64 [key, counter]), created from the seed on first use."""
    if (st := Tensor._rng_states.get(dev)) is None: st = Tensor._rng_states[dev] = Tensor._rng_start(dev)
    return st
  @staticmethod
  def _random_bits(n: int, device: str | None) -> Tensor:
    """n uint32 values: low halves of threefry2x32(counter, key), counters consecutive across calls on a device."""
    dev = _canon_device(device)
    st = Tensor._rng_state(dev)
    key = st.shrink(((0, 1),)).expand(n)
    ctr = Tensor._arange_index(n, dev).cast(dtypes.uint64) + st.shrink(((1, 2),)).expand(n)
    # NOTE: the increment comes from a buffer, not a constant, so every draw size shares one compiled kernel
    step = Tensor(_buffer_uop(np.array([0, n], dtype=np.uint64), dtypes.uint64, dev))
    Tensor._rng_states[dev] = (st + step).realize()
    bits = Tensor(ctr.uop.alu(Ops.THREEFRY, key.uop))
    return (bits & 0xFFFFFFFF).cast(dtypes.uint32)
  @staticmethod
  def rand(*shape: Any, device: str | None = None, dtype: DType | None = None, **kw: Any) -> Tensor:
    """Uniform in [0, 1): the top mantissa-many bits of a random uint32, scaled exactly (so never 1.0, in any float
    dtype)."""
    s, dt = Tensor._shape_arg(shape), dtype or dtypes.default_float
    if not dtypes.is_float(dt): raise TypeError(f"rand: dtype must be a float type, got {dt}")
    if prod(s) == 0: return Tensor.zeros(s, device=device, dtype=dt, **kw)
    mbits = min(dtypes.finfo(dt)[1] + 1, 32)
    ct = dtypes.float64 if dt is dtypes.float64 else dtypes.float32
    u = (Tensor._random_bits(prod(s), device) >> (32 - mbits)).cast(ct) * (2.0 ** -mbits)
    return Tensor(u.cast(dt).reshape(s).uop, **kw)
  @staticmethod
  def randn(*shape: Any, device: str | None = None, dtype: DType | None = None, **kw: Any) -> Tensor:
    """Standard normal by Box-Muller from two uniform draws."""
    s, dt = Tensor._shape_arg(shape), dtype or dtypes.default_float
    u = Tensor.rand(2, *s, device=device, dtype=dtypes.float32)
    z = ((1 - u[0]).log() * -2).sqrt() * (u[1] * (2 * math.pi)).cos()
    return Tensor(z.cast(dt).uop, **kw)
  @staticmethod
  def randint(*shape: Any, low: int = 0, high: int = 10, device: str | None = None, dtype: DType | None = None,
              **kw: Any) -> Tensor:
    if high <= low: raise ValueError(f"randint: high ({high}) must be greater than low ({low})")
    dt = dtype or dtypes.int32
    r = (Tensor.rand(*shape, device=device, dtype=dtypes.float64) * (high - low)).floor().cast(dtypes.int64)
    return Tensor((r.minimum(high - low - 1) + low).cast(dt).uop, **kw)
  @staticmethod
  def uniform(*shape: Any, low: float = 0.0, high: float = 1.0, dtype: DType | None = None, **kw: Any) -> Tensor:
    dt = dtype or dtypes.default_float
    r = Tensor.rand(*shape, dtype=dt, device=kw.pop("device", None))
    return Tensor((r * (high - low) + low).cast(dt).uop, **kw)
  @staticmethod
  def normal(*shape: Any, mean: float = 0.0, std: float = 1.0, dtype: DType | None = None, **kw: Any) -> Tensor:
    dt = dtype or dtypes.default_float
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
    if self.ndim == 0: return ()
    return tuple(sorted(set(ax)))

  def _broadcast_to(self, shape: tuple[int, ...], op: str = "broadcast_to") -> Tensor:
    if self.shape == shape: return self
    if len(self.shape) > len(shape) or broadcast_shape(self.shape, shape, op=op) != shape:
      raise ValueError(f"{op}: cannot broadcast shape {self.shape} to {shape}")
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
  def _operands(self, y: Tensor | ConstType, op: str, reverse: bool = False,
                match_dtype: bool = True) -> tuple[Tensor, Tensor]:
    """Both operands with one shape and (if match_dtype) one dtype: numpy broadcasting, least_upper_dtype promotion."""
    if not isinstance(y, Tensor):
      if not isinstance(y, (bool, int, float)): raise TypeError(f"{op}: unsupported operand type {type(y).__name__}")
      y = Tensor(_const_uop(y, self._scalar_dtype(y), self.device))
    x = self
    if reverse: x, y = y, x
    if x.device != y.device:
      raise ValueError(f"{op}: operands are on different devices ({x.device} and {y.device}); move one with .to()")
    if match_dtype and x.dtype is not y.dtype:
      dt = least_upper_dtype(x.dtype, y.dtype)
      x, y = x.cast(dt), y.cast(dt)
    if x.shape != y.shape:
      shape = broadcast_shape(x.shape, y.shape, op=op)
      x, y = x._broadcast_to(shape, op), y._broadcast_to(shape, op)
    return x, y
  def _binop(self, op: Ops, y: Tensor | ConstType, name: str, reverse: bool = False) -> Tensor:
    x, y = self._operands(y, name, reverse)
    return x._new(x.uop.alu(op, y.uop), y)
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
      raise TypeError("neg: negating a bool tensor is not supported; use logical_not() or ~")
    # NOTE: for unsigned ints, -x wraps as C does: x * (2**bits - 1)
    return self * (dtypes.max(self.dtype) if dtypes.is_unsigned(self.dtype) else -1)
  def sub(self, y: Tensor | ConstType, reverse: bool = False) -> Tensor:
    x, y = self._operands(y, "sub", reverse)
    if x.dtype is dtypes.bool: raise TypeError("sub: subtracting bool tensors is not supported; use ^ or logical ops")
    return x + (-y)
  def div(self, y: Tensor | ConstType, reverse: bool = False, rounding_mode: str | None = None) -> Tensor:
    """True division (ints promote to float); rounding_mode "trunc" or "floor" as torch."""
    if rounding_mode == "floor": return self.floordiv(y, reverse)
    x, y = self._operands(y, "div", reverse)
    if rounding_mode == "trunc":
      return x.idiv(y) if dtypes.is_int(x.dtype) else (x * y.reciprocal()).trunc()
    if rounding_mode is not None:
      raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
    dt = least_upper_float(x.dtype)
    x, y = x.cast(dt), y.cast(dt)
    return x * y.reciprocal()
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
    if not dtypes.is_int(x.dtype): raise TypeError(f"idiv: integer division needs int tensors, got {x.dtype}")
    return x._int_divmod(Ops.IDIV, y, nz)
  def floordiv(self, y: Tensor | ConstType, reverse: bool = False) -> Tensor:
    """Python's //: rounds toward minus infinity (floats: floor(x / y); ints: 0 where the divisor is 0, as numpy)."""
    nz = not reverse and isinstance(y, int) and y != 0
    x, y = self._operands(y, "floordiv", reverse)
    if not dtypes.is_int(x.dtype): return x.div(y).floor()
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
    if not dtypes.is_int(x.dtype): return x - (x / y).floor() * y
    r = x._int_divmod(Ops.MOD, y, nz)
    if dtypes.is_unsigned(x.dtype): return r
    return (r.ne(0) & ((r < 0) ^ (y < 0))).where(r + y, r)
  def pow(self, y: Tensor | ConstType, reverse: bool = False) -> Tensor:
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
      return acc.reciprocal() if y < 0 else acc
    x, y = self._operands(y, "pow", reverse)
    dt = least_upper_float(x.dtype)
    xf, yf = x.cast(dt), y.cast(dt)
    mag = (yf * xf.abs().log2()).exp2()
    # NOTE: a negative base is defined only for integer exponents: odd ones flip the sign, others give nan
    y_int = yf.trunc() == yf
    y_odd = y_int & ((yf * 0.5).trunc() != yf * 0.5)
    ret = (xf < 0).where(y_int.where(y_odd.where(-mag, mag), xf._const(math.nan)), mag)
    ret = (yf == 0).where(1.0, ret)
    return ret if dtypes.is_float(x.dtype) else ret.round().cast(x.dtype)

  def __add__(self, y: Tensor | ConstType) -> Tensor: return self.add(y)
  def __mul__(self, y: Tensor | ConstType) -> Tensor: return self.mul(y)
  def __sub__(self, y: Tensor | ConstType) -> Tensor: return self.sub(y)
  def __truediv__(self, y: Tensor | ConstType) -> Tensor: return self.div(y)
  def __floordiv__(self, y: Tensor | ConstType) -> Tensor: return self.floordiv(y)
  def __mod__(self, y: Tensor | ConstType) -> Tensor: return self.mod(y)
  def __pow__(self, y: Tensor | ConstType) -> Tensor: return self.pow(y)
  def __radd__(self, y: Tensor | ConstType) -> Tensor: return self.add(y, True)
  def __rmul__(self, y: Tensor | ConstType) -> Tensor: return self.mul(y, True)
  def __rsub__(self, y: Tensor | ConstType) -> Tensor: return self.sub(y, True)
  def __rtruediv__(self, y: Tensor | ConstType) -> Tensor: return self.div(y, True)
  def __rfloordiv__(self, y: Tensor | ConstType) -> Tensor: return self.floordiv(y, True)
  def __rmod__(self, y: Tensor | ConstType) -> Tensor: return self.mod(y, True)
  def __rpow__(self, y: Tensor | ConstType) -> Tensor: return self.pow(y, True)
  def __neg__(self) -> Tensor: return self.neg()
  def __abs__(self) -> Tensor: return self.abs()
  def __matmul__(self, y: Tensor) -> Tensor: return self.matmul(y)
  def __rmatmul__(self, y: Tensor) -> Tensor:
    return Tensor(y).matmul(self) if not isinstance(y, Tensor) else y.matmul(self)
  def __iadd__(self, y: Tensor | ConstType) -> Tensor: return self.assign(self + y)
  def __isub__(self, y: Tensor | ConstType) -> Tensor: return self.assign(self - y)
  def __imul__(self, y: Tensor | ConstType) -> Tensor: return self.assign(self * y)
  def __itruediv__(self, y: Tensor | ConstType) -> Tensor: return self.assign(self / y)

  # ---- elementwise: comparisons, logic, bits ----
  def __lt__(self, y: Tensor | ConstType) -> Tensor: return self._binop(Ops.CMPLT, y, "<")
  def __gt__(self, y: Tensor | ConstType) -> Tensor: return self._binop(Ops.CMPLT, y, ">", reverse=True)
  def __ge__(self, y: Tensor | ConstType) -> Tensor: return (self < y).logical_not()
  def __le__(self, y: Tensor | ConstType) -> Tensor: return (self > y).logical_not()
  def __eq__(self, y: Tensor | ConstType) -> Tensor: return self._binop(Ops.CMPEQ, y, "==")  # type: ignore[override]
  def __ne__(self, y: Tensor | ConstType) -> Tensor: return self._binop(Ops.CMPNE, y, "!=")  # type: ignore[override]
  def eq(self, y: Tensor | ConstType) -> Tensor: return self == y
  def ne(self, y: Tensor | ConstType) -> Tensor: return self != y
  def _bitop(self, op: Ops, y: Tensor | ConstType, name: str, reverse: bool = False) -> Tensor:
    x, yy = self._operands(y, name, reverse)
    if not (dtypes.is_int(x.dtype) or x.dtype is dtypes.bool):
      raise TypeError(f"{name}: needs int or bool tensors, got {x.dtype}")
    return x._new(x.uop.alu(op, yy.uop), yy)
  def bitwise_and(self, y: Tensor | ConstType) -> Tensor: return self._bitop(Ops.AND, y, "&")
  def bitwise_or(self, y: Tensor | ConstType) -> Tensor: return self._bitop(Ops.OR, y, "|")
  def bitwise_xor(self, y: Tensor | ConstType) -> Tensor: return self._bitop(Ops.XOR, y, "^")
  def __and__(self, y: Tensor | ConstType) -> Tensor: return self.bitwise_and(y)
  def __or__(self, y: Tensor | ConstType) -> Tensor: return self.bitwise_or(y)
  def __xor__(self, y: Tensor | ConstType) -> Tensor: return self.bitwise_xor(y)
  def __rand__(self, y: Tensor | ConstType) -> Tensor: return self._bitop(Ops.AND, y, "&", True)
  def __ror__(self, y: Tensor | ConstType) -> Tensor: return self._bitop(Ops.OR, y, "|", True)
  def __rxor__(self, y: Tensor | ConstType) -> Tensor: return self._bitop(Ops.XOR, y, "^", True)
  def logical_not(self) -> Tensor: return self.cast(dtypes.bool)._binop(Ops.CMPNE, True, "logical_not")
  def logical_and(self, y: Tensor) -> Tensor:
    return self.cast(dtypes.bool) & (y.cast(dtypes.bool) if isinstance(y, Tensor) else bool(y))
  def logical_or(self, y: Tensor) -> Tensor:
    return self.cast(dtypes.bool) | (y.cast(dtypes.bool) if isinstance(y, Tensor) else bool(y))
  def logical_xor(self, y: Tensor) -> Tensor:
    return self.cast(dtypes.bool) ^ (y.cast(dtypes.bool) if isinstance(y, Tensor) else bool(y))
  def bitwise_not(self) -> Tensor:
    if self.dtype is dtypes.bool: return self.logical_not()
    if not dtypes.is_int(self.dtype): raise TypeError(f"~: needs an int or bool tensor, got {self.dtype}")
    return self ^ -1 if not dtypes.is_unsigned(self.dtype) else self ^ int(dtypes.max(self.dtype))
  def __invert__(self) -> Tensor: return self.bitwise_not()
  def _shift(self, op: Ops, y: Tensor | ConstType, name: str) -> Tensor:
    if not dtypes.is_int(self.dtype): raise TypeError(f"{name}: shifts need an int tensor, got {self.dtype}")
    yy = y.cast(self.dtype) if isinstance(y, Tensor) else Tensor(_const_uop(int(y), self.dtype, self.device))
    x, yy = self._operands(yy, name)
    return x._new(x.uop.alu(op, yy.uop), yy)
  def lshift(self, y: Tensor | ConstType) -> Tensor: return self._shift(Ops.SHL, y, "<<")
  def rshift(self, y: Tensor | ConstType) -> Tensor: return self._shift(Ops.SHR, y, ">>")
  def __lshift__(self, y: Tensor | ConstType) -> Tensor: return self.lshift(y)
  def __rshift__(self, y: Tensor | ConstType) -> Tensor: return self.rshift(y)

  def maximum(self, y: Tensor | ConstType) -> Tensor: return self._binop(Ops.MAX, y, "maximum")
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
      raise ValueError(f"where: the condition is on {self.device}, the values on {x.device}; move one with .to()")
    c = self.cast(dtypes.bool)
    shape = broadcast_shape(c.shape, x.shape, op="where")
    c, x, y = c._broadcast_to(shape, "where"), x._broadcast_to(shape, "where"), y._broadcast_to(shape, "where")
    return x._new(c.uop.alu(Ops.WHERE, x.uop, y.uop), y)
  def masked_fill(self, mask: Tensor, value: ConstType) -> Tensor: return mask.where(value, self)

  def cast(self, dtype: DType) -> Tensor: return self if self.dtype is dtype else self._new(self.uop.cast(dtype))
  def bitcast(self, dtype: DType) -> Tensor:
    if dtype.itemsize != self.dtype.itemsize:
      raise ValueError(f"bitcast: {self.dtype} ({self.dtype.itemsize} bytes) and {dtype} ({dtype.itemsize} bytes) "
                       "differ in size")
    return self if self.dtype is dtype else Tensor(self.uop.bitcast(dtype))

  # ---- elementwise: math (composed from EXP2, LOG2, SIN, SQRT, RECIPROCAL, TRUNC) ----
  def _float(self) -> Tensor: return self.cast(least_upper_float(self.dtype))
  def _unary(self, op: Ops) -> Tensor:
    x = self._float()
    return x._new(x.uop.alu(op))
  def exp2(self) -> Tensor: return self._unary(Ops.EXP2)
  def log2(self) -> Tensor: return self._unary(Ops.LOG2)
  def sin(self) -> Tensor: return self._unary(Ops.SIN)
  def sqrt(self) -> Tensor: return self._unary(Ops.SQRT)
  def reciprocal(self) -> Tensor: return self._unary(Ops.RECIPROCAL)
  def exp(self) -> Tensor: return (self._float() * (1 / math.log(2))).exp2()
  def log(self) -> Tensor: return self.log2() * math.log(2)
  def rsqrt(self) -> Tensor: return self.sqrt().reciprocal()
  def cos(self) -> Tensor: return (math.pi / 2 - self._float()).sin()
  def tan(self) -> Tensor: return self.sin() / self.cos()
  def trunc(self) -> Tensor: return self if not dtypes.is_float(self.dtype) else self._new(self.uop.alu(Ops.TRUNC))
  def floor(self) -> Tensor:
    if not dtypes.is_float(self.dtype): return self
    t = self.trunc()
    return (self < t).where(t - 1, t)
  def ceil(self) -> Tensor:
    if not dtypes.is_float(self.dtype): return self
    t = self.trunc()
    return (self > t).where(t + 1, t)
  def round(self) -> Tensor:
    """Round half to even, as numpy."""
    if not dtypes.is_float(self.dtype): return self
    t = self.trunc()
    frac, step = self - t, (self < 0).where(-1.0, 1.0).cast(self.dtype)
    t_odd = (t * 0.5).trunc() != t * 0.5
    away = (frac.abs() > 0.5) | ((frac.abs() == 0.5) & t_odd)
    return away.where(t + step, t)
  def abs(self) -> Tensor:
    if dtypes.is_unsigned(self.dtype) or self.dtype is dtypes.bool: return self
    # NOTE: x*x where x is neither < 0 nor > 0: +0 for +-0 and nan for nan, with the gradient 0 at 0 (as torch)
    return (self < 0).where(-self, (self > 0).where(self, self * self))
  def sign(self) -> Tensor:
    if self.dtype is dtypes.bool: return self
    if dtypes.is_unsigned(self.dtype): return (self > 0).cast(self.dtype)
    ret = (self > 0).where(1, (self < 0).where(-1, 0)).cast(self.dtype)
    return (self != self).where(self, ret) if dtypes.is_float(self.dtype) else ret
  def relu(self) -> Tensor: return (self > 0).where(self, 0)
  def relu6(self) -> Tensor: return self.relu().minimum(6)
  def leaky_relu(self, neg_slope: float = 0.01) -> Tensor: return (self > 0).where(self, self * neg_slope)
  def elu(self, alpha: float = 1.0) -> Tensor: return (self > 0).where(self, (self.exp() - 1) * alpha)
  def sigmoid(self) -> Tensor: return ((-self._float()).exp() + 1).reciprocal()
  def tanh(self) -> Tensor: return (self._float() * 2).sigmoid() * 2 - 1
  def gelu(self) -> Tensor:
    """The tanh approximation (torch's approximate="tanh")."""
    x = self._float()
    return x * 0.5 * ((x + x * x * x * 0.044715) * math.sqrt(2 / math.pi)).tanh().add(1)
  def quick_gelu(self) -> Tensor: return self * (self * 1.702).sigmoid()
  def silu(self) -> Tensor: return self * self.sigmoid()
  def swish(self) -> Tensor: return self.silu()
  def softplus(self, beta: float = 1.0) -> Tensor:
    x = self._float() * beta
    return (x.relu() + ((-x.abs()).exp() + 1).log()) * (1 / beta)
  def mish(self) -> Tensor: return self * self.softplus().tanh()
  def square(self) -> Tensor: return self * self
  def clamp(self, min_: ConstType | None = None, max_: ConstType | None = None) -> Tensor:
    if min_ is None and max_ is None: raise ValueError("clamp: give at least one of min_ and max_")
    ret = self
    if min_ is not None: ret = (ret < min_).where(min_, ret)
    if max_ is not None: ret = (ret > max_).where(max_, ret)
    return ret
  def clip(self, min_: ConstType | None = None, max_: ConstType | None = None) -> Tensor: return self.clamp(min_, max_)
  def isnan(self) -> Tensor: return self != self
  def isinf(self) -> Tensor:
    return (self == math.inf) | (self == -math.inf) if dtypes.is_float(self.dtype) else self._const(False, dtypes.bool)
  def lerp(self, end: Tensor, weight: Tensor | ConstType) -> Tensor: return self + (end - self) * weight

  # ---- movement ----
  def reshape(self, shape: Any, *args: int) -> Tensor:
    s = argfix(shape, *args)
    if sum(1 for x in s if x == -1) > 1: raise ValueError(f"reshape: at most one -1 in {s}")
    if -1 in s:
      known = prod(x for x in s if x != -1)
      if known == 0 or self.numel() % known: raise ValueError(f"reshape: cannot reshape {self.shape} to {s}")
      s = tuple(self.numel() // known if x == -1 else x for x in s)
    if any(not isinstance(x, int) or x < 0 for x in s): raise ValueError(f"reshape: bad shape {s}")
    if prod(s) != self.numel():
      raise ValueError(f"reshape: cannot reshape {self.shape} ({self.numel()} elements) to {s}")
    return self if s == self.shape else self._new(self.uop.reshape(s))
  def view(self, shape: Any, *args: int) -> Tensor: return self.reshape(shape, *args)
  def permute(self, order: Any, *args: int) -> Tensor:
    o = tuple(self._axis(a) for a in argfix(order, *args))
    if sorted(o) != list(range(self.ndim)):
      raise ValueError(f"permute: {o} is not a permutation of the axes of {self.shape}")
    return self if o == tuple(range(self.ndim)) else self._new(self.uop.permute(o))
  def transpose(self, dim0: int = 1, dim1: int = 0) -> Tensor:
    order = list(range(self.ndim))
    a, b = self._axis(dim0), self._axis(dim1)
    order[a], order[b] = order[b], order[a]
    return self.permute(order)
  @property
  def T(self) -> Tensor: return self.permute(tuple(range(self.ndim))[::-1])
  def expand(self, shape: Any, *args: int) -> Tensor:
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
  def squeeze(self, dim: int | None = None) -> Tensor:
    if dim is None: return self.reshape(tuple(s for s in self.shape if s != 1))
    if self.ndim == 0: return self
    d = self._axis(dim)
    return self if self.shape[d] != 1 else self.reshape(self.shape[:d] + self.shape[d + 1:])
  def unsqueeze(self, dim: int) -> Tensor:
    d = self._axis(dim, self.ndim + 1)
    return self.reshape(self.shape[:d] + (1,) + self.shape[d:])
  def shrink(self, arg: Sequence[tuple[int, int] | None]) -> Tensor:
    if len(arg) != self.ndim: raise ValueError(f"shrink: {len(arg)} ranges for the {self.ndim} axes of {self.shape}")
    a = tuple((0, s) if r is None else (int(r[0]), int(r[1])) for r, s in zip(arg, self.shape))
    if any(not 0 <= b <= e <= s for (b, e), s in zip(a, self.shape)):
      raise ValueError(f"shrink: {a} does not fit shape {self.shape}")
    return self if a == tuple((0, s) for s in self.shape) else self._new(self.uop.shrink(a))
  def pad(self, padding: Sequence[Any], value: ConstType = 0.0) -> Tensor:
    """Per-axis (before, after) pairs (None = no pad), or torch's flat form (last axis first). Negative amounts
    shrink."""
    if all(isinstance(p, int) for p in padding):
      if len(padding) % 2 or len(padding) // 2 > self.ndim:
        raise ValueError(f"pad: flat padding {tuple(padding)} for shape {self.shape}")
      flat = list(padding)
      pairs = [(0, 0)] * (self.ndim - len(flat) // 2) + [(flat[i], flat[i + 1]) for i in range(len(flat) - 2, -1, -2)]
    else: pairs = [(0, 0) if p is None else (int(p[0]), int(p[1])) for p in padding]
    if len(pairs) != self.ndim: raise ValueError(f"pad: {len(pairs)} pairs for the {self.ndim} axes of {self.shape}")
    x = self.shrink([(-min(b, 0), s + min(e, 0)) for (b, e), s in zip(pairs, self.shape)])
    pos = tuple((max(b, 0), max(e, 0)) for b, e in pairs)
    if all(p == (0, 0) for p in pos): return x
    ret = x._new(x.uop.pad(pos))
    if value == 0: return ret
    inside = Tensor(_const_uop(True, dtypes.bool, self.device, x.shape).pad(pos))
    return inside.where(ret, value)
  def flip(self, axis: int | Sequence[int], *args: int) -> Tensor:
    ax = {self._axis(a) for a in argfix(axis, *args)}
    return self._new(self.uop.flip(tuple(i in ax for i in range(self.ndim)))) if ax else self
  def repeat(self, repeats: Any, *args: int) -> Tensor:
    r = argfix(repeats, *args)
    if len(r) < self.ndim: raise ValueError(f"repeat: {len(r)} repeats for the {self.ndim} axes of {self.shape}")
    base = (1,) * (len(r) - self.ndim) + self.shape
    x = self.reshape(base).reshape(flatten((1, s) for s in base)).expand(flatten(zip(r, base)))
    return x.reshape(tuple(a * b for a, b in zip(r, base)))
  def cat(self, *args: Tensor, dim: int = 0) -> Tensor:
    ts = [self, *args]
    if self.ndim == 0: raise ValueError("cat: 0-d tensors cannot be concatenated; use Tensor.stack or reshape(1) first")
    d = self._axis(dim)
    for t in args:
      if t.ndim != self.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, self.shape)) if i != d):
        raise ValueError(f"cat: shapes {self.shape} and {t.shape} differ outside axis {d}")
    dt = least_upper_dtype(*(t.dtype for t in ts))
    ts = [t.cast(dt) for t in ts]
    total, off, ret = sum(t.shape[d] for t in ts), 0, None
    for t in ts:
      p = t.pad([(off, total - off - t.shape[d]) if i == d else (0, 0) for i in range(self.ndim)])
      ret = p if ret is None else (ret | p if dt is dtypes.bool else ret + p)
      off += t.shape[d]
    assert ret is not None
    return ret
  @staticmethod
  def stack(*ts: Tensor, dim: int = 0) -> Tensor:
    tl = list(ts[0]) if len(ts) == 1 and isinstance(ts[0], (list, tuple)) else list(ts)
    return tl[0].unsqueeze(dim).cat(*[t.unsqueeze(dim) for t in tl[1:]], dim=dim)
  def split(self, sizes: int | Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
    d = self._axis(dim)
    n = self.shape[d]
    sz = [min(sizes, n - i) for i in range(0, n, sizes)] if isinstance(sizes, int) else list(sizes)
    if isinstance(sizes, int) and sizes <= 0: raise ValueError(f"split: size must be positive, got {sizes}")
    if sum(sz) != n: raise ValueError(f"split: sizes {sz} do not add up to {n} (axis {d} of {self.shape})")
    offs = [sum(sz[:i]) for i in range(len(sz))]
    return tuple(self.shrink([(o, o + s) if i == d else None for i in range(self.ndim)]) for o, s in zip(offs, sz))
  def chunk(self, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    if chunks <= 0: raise ValueError(f"chunk: chunks must be positive, got {chunks}")
    n = self.shape[self._axis(dim)]
    return self.split(max(1, ceildiv(n, chunks)), dim) if n else (self,)

  # ---- indexing ----
  def __getitem__(self, indices: Any) -> Tensor:
    idx = list(indices) if isinstance(indices, tuple) else [indices]
    idx = [Tensor(i, device=self.device) if isinstance(i, (list, np.ndarray)) else i for i in idx]
    for i in idx:
      if not (i is None or i is Ellipsis or isinstance(i, (int, slice, Tensor))) or isinstance(i, float):
        raise IndexError(f"index {i!r} of type {type(i).__name__} is not supported (ints, slices, None, ..., tensors)")
      # NOTE: a boolean mask selects a data-dependent number of elements, which a lazy shape cannot express
      if isinstance(i, bool) or (isinstance(i, Tensor) and i.dtype is dtypes.bool):
        raise IndexError(f"boolean mask indexing of a tensor of shape {self.shape} is not supported (the result's "
                         "shape depends on the data); use mask.where(x, 0) or integer indices")
    if sum(i is Ellipsis for i in idx) > 1: raise IndexError("an index can only have a single ellipsis ('...')")
    n_real = sum(i is not None and i is not Ellipsis for i in idx)
    if n_real > self.ndim: raise IndexError(f"too many indices for tensor of shape {self.shape}: {n_real} were indexed")
    if any(i is Ellipsis for i in idx):
      e = next(k for k, i in enumerate(idx) if i is Ellipsis)
      idx = idx[:e] + [slice(None)] * (self.ndim - n_real) + idx[e + 1:]
    else: idx = idx + [slice(None)] * (self.ndim - n_real)
    has_tensor = any(isinstance(i, Tensor) for i in idx)
    if has_tensor:
      # NOTE: next to tensor indices, ints are advanced indices too (numpy), which decides where the result dims go
      idx = [Tensor(i, device=self.device, dtype=dtypes.int32) if isinstance(i, int) and not isinstance(i, bool) else i
             for i in idx]
    # basic indexing: shrink, flip and stride per axis
    shrinks, flips, strides, new_shape, adv = [], [], [], [], []
    d = 0
    for i in idx:
      if i is None: new_shape.append(1); continue
      n = self.shape[d]
      if isinstance(i, int):
        if not -n <= i < n:
          raise IndexError(f"index {i} is out of bounds for axis {d} with size {n} (shape {self.shape})")
        i = i + n if i < 0 else i
        shrinks.append((i, i + 1)); flips.append(False); strides.append(1)
      elif isinstance(i, slice):
        start, stop, step = i.indices(n)
        cnt = len(range(start, stop, step))
        if cnt == 0: shrinks.append((0, 0)); flips.append(False); strides.append(1)
        elif step > 0: shrinks.append((start, start + (cnt - 1) * step + 1)); flips.append(False); strides.append(step)
        else: shrinks.append((start + (cnt - 1) * step, start + 1)); flips.append(True); strides.append(-step)
        new_shape.append(cnt)
      else:
        if not dtypes.is_int(i.dtype):
          raise IndexError(f"tensor index must be an int tensor, got {i.dtype}")
        shrinks.append((0, n)); flips.append(False); strides.append(1)
        adv.append((len(new_shape), i, n)); new_shape.append(n)
      d += 1
    x = self.shrink(shrinks).flip([k for k, f in enumerate(flips) if f])
    if any(s > 1 for s in strides):
      sizes = x.shape
      x = x.pad([(0, ceildiv(m, s) * s - m) for m, s in zip(sizes, strides)])
      x = x.reshape(flatten((ceildiv(m, s), s) for m, s in zip(sizes, strides)))
      x = x.shrink(flatten(((0, ceildiv(m, s)), (0, 1)) for m, s in zip(sizes, strides)))
    x = x.reshape(tuple(new_shape))
    return x._advanced_index(adv) if adv else x

  def _advanced_index(self, adv: list[tuple[int, Tensor, int]]) -> Tensor:
    """numpy advanced indexing by one-hot compare and sum: the index tensors broadcast together; their dims replace the
    indexed axes in place when those are adjacent, else they go first."""
    dims = [a[0] for a in adv]
    idxs = [(i < 0).where(i + n, i) if not dtypes.is_unsigned(i.dtype) else i for _, i, n in adv]
    bshape = broadcast_shape(*(i.shape for i in idxs), op="index")
    rest = [k for k in range(self.ndim) if k not in dims]
    xp = self.permute(rest + dims)
    rshape, nshape = tuple(self.shape[k] for k in rest), tuple(self.shape[k] for k in dims)
    mask: Tensor | None = None
    for j, (i, n) in enumerate(zip(idxs, nshape)):
      one = [1] * len(nshape)
      one[j] = n
      ar = Tensor._arange_index(n, self.device).reshape((1,) * len(bshape) + tuple(one))
      m = i._broadcast_to(bshape, "index").cast(dtypes.int32).reshape(bshape + (1,) * len(nshape)) == ar
      mask = m if mask is None else mask & m
    assert mask is not None
    xe = xp.reshape(rshape + (1,) * len(bshape) + nshape)
    mask = mask.reshape((1,) * len(rshape) + bshape + nshape)
    nk = len(nshape)
    picked = mask.where(xe, 0)
    out = picked.sum(tuple(range(-nk, 0))).cast(self.dtype)
    # the index dims go where the indexed axes were when those are adjacent, else first (numpy's rule)
    p = dims[0] if dims == list(range(dims[0], dims[0] + len(dims))) else 0
    nb = len(bshape)
    return out.permute(list(range(p)) + list(range(len(rshape), len(rshape) + nb)) + list(range(p, len(rshape))))

  def __setitem__(self, indices: Any, v: Any) -> None:
    """x[idx] = v: the selected elements take v (broadcast); x is updated in place and realized."""
    basic = not any(isinstance(i, (Tensor, list, np.ndarray)) for i in (indices if isinstance(indices, tuple) else
                                                                        (indices,)))
    on_buffer = _base_buffer(self.uop) is not None or _is_writable_view(self.uop)
    if basic and (on_buffer or not (self.requires_grad or (isinstance(v, Tensor) and v.requires_grad))):
      # NOTE: slices, ints, None and ... select a view of the buffer: write v through it (an ASSIGN), no one-hot
      if not on_buffer: self.realize()
      view = self[indices]
      vt = v if isinstance(v, Tensor) else Tensor(v, device=self.device, dtype=self.dtype)
      view.assign(vt.cast(self.dtype)._broadcast_to(view.shape, "setitem")).realize()
      return
    # advanced indices (or a lazy tensor autograd must see through): a one-hot select of the written positions
    n = self.numel()
    pos = Tensor._arange_index(n, self.device).reshape(self.shape)[indices]
    vt = v if isinstance(v, Tensor) else Tensor(v, device=self.device, dtype=self.dtype)
    vt = vt.cast(self.dtype)._broadcast_to(pos.shape, "setitem")
    k = pos.numel()
    hit = pos.flatten().unsqueeze(-1) == Tensor._arange_index(n, self.device).unsqueeze(0)  # (k, n)
    # NOTE: where an index repeats (x[[0, 0]] = v) the last write wins, as numpy: 1 + the last writer, 0 for none
    last = hit.where(Tensor._arange_index(k, self.device).unsqueeze(-1) + 1, 0).max(0)
    pick = (last - 1).unsqueeze(0) == Tensor._arange_index(k, self.device).unsqueeze(-1)
    full = pick.where(vt.flatten().unsqueeze(-1), 0).sum(0).cast(self.dtype).reshape(self.shape)
    self.assign((last > 0).reshape(self.shape).where(full, self)).realize()

  def gather(self, dim: int, index: Tensor) -> Tensor:
    """out[..i..] = self[..index[..i..]..] along dim (torch.gather)."""
    d = self._axis(dim)
    if index.ndim != self.ndim:
      raise ValueError(f"gather: index {index.shape} and input {self.shape} need the same number of dims")
    if any(a > b for k, (a, b) in enumerate(zip(index.shape, self.shape)) if k != d):
      raise ValueError(f"gather: index {index.shape} is larger than input {self.shape} outside axis {d}")
    n = self.shape[d]
    x = self.shrink([None if k == d else (0, s) for k, s in enumerate(index.shape)])
    xt = x.unsqueeze(-1).transpose(d, -1)._broadcast_to(index.shape + (n,), "gather")
    mask = index.unsqueeze(-1) == Tensor._arange_index(n, self.device)
    return mask.where(xt, 0).sum(-1).cast(self.dtype)
  def one_hot(self, num_classes: int) -> Tensor:
    return (self.unsqueeze(-1) == Tensor._arange_index(num_classes, self.device)).cast(dtypes.int32)

  # ---- reductions ----
  def _reduce(self, op: Ops, axis: int | Sequence[int] | None, keepdim: bool) -> Tensor:
    axes = self._axes(axis)
    # NOTE: a reduction over an empty axis is its identity (the kernel's reduce loop runs zero times)
    ret = self._new(self.uop.r(op, axes)) if axes else self
    return ret if keepdim else ret.reshape(tuple(s for k, s in enumerate(self.shape) if k not in axes))
  def sum(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, dtype: DType | None = None) -> Tensor:
    acc = dtype or sum_acc_dtype(self.dtype)
    ret = self.cast(acc)._reduce(Ops.ADD, axis, keepdim)
    # NOTE: floats accumulate wide and come back in their own dtype; ints keep the wide accumulator (as numpy)
    return ret.cast(self.dtype) if dtype is None and dtypes.is_float(self.dtype) else ret
  def prod(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, dtype: DType | None = None) -> Tensor:
    acc = dtype or sum_acc_dtype(self.dtype)
    ret = self.cast(acc)._reduce(Ops.MUL, axis, keepdim)
    return ret.cast(self.dtype) if dtype is None and dtypes.is_float(self.dtype) else ret
  def _inverse(self) -> Tensor:
    # an order-reversing bijection of the dtype: min(x) = inv(max(inv(x)))
    if dtypes.is_float(self.dtype): return -self
    return ~self
  def max(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    return self._reduce(Ops.MAX, axis, keepdim)
  def min(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    return self._inverse().max(axis, keepdim)._inverse()
  def mean(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    x = self._float()
    n = prod(self.shape[a] for a in self._axes(axis))
    # NOTE: divided in the accumulator dtype, so a half sum that overflows (or a 1/n that underflows) stays out of it
    s = x.sum(axis, keepdim, dtype=sum_acc_dtype(x.dtype))
    return (s * (1 / n) if n else s * math.nan).cast(x.dtype)
  def var(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, correction: int = 1) -> Tensor:
    x = self._float()
    n = prod(self.shape[a] for a in self._axes(axis))
    sq = (x - x.mean(axis, keepdim=True)).square().sum(axis, keepdim, dtype=sum_acc_dtype(x.dtype))
    return (sq * (1 / (n - correction)) if n - correction > 0 else sq * math.nan).cast(x.dtype)
  def std(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, correction: int = 1) -> Tensor:
    return self.var(axis, keepdim, correction).sqrt()
  def any(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    # NOTE: over an empty axis this is the max's identity, False
    return self.cast(dtypes.bool).max(axis, keepdim)
  def all(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    return self.logical_not().any(axis, keepdim).logical_not()
  def _argext(self, axis: int | None, keepdim: bool, largest: bool) -> Tensor:
    if axis is None: return self.flatten()._argext(0, False, largest).reshape((1,) * self.ndim if keepdim else ())
    a = self._axis(axis)
    n = self.shape[a]
    if n == 0: raise ValueError(f"argmax/argmin: axis {a} of {self.shape} is empty")
    x = self if largest else self._inverse()
    m = x.max(a, keepdim=True)
    # NOTE: the first position wins: weight hits by n - position and take the largest weight
    rev = (n - Tensor._arange_index(n, self.device)).reshape((n,) + (1,) * (self.ndim - a - 1))
    hit = (x == m).where(rev, 0)
    return (n - hit.max(a, keepdim)).cast(dtypes.int32)
  def argmax(self, axis: int | None = None, keepdim: bool = False) -> Tensor: return self._argext(axis, keepdim, True)
  def argmin(self, axis: int | None = None, keepdim: bool = False) -> Tensor: return self._argext(axis, keepdim, False)
  def logsumexp(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    m = self.max(axis, keepdim=True).detach()
    m = m.isinf().where(0, m)
    ret = (self - m).exp().sum(axis, keepdim=True).log() + m
    return ret if keepdim else ret.reshape(tuple(s for k, s in enumerate(self.shape) if k not in self._axes(axis)))
  def softmax(self, axis: int = -1) -> Tensor:
    e = (self._float() - self.max(axis, keepdim=True).detach()).exp()
    return e / e.sum(axis, keepdim=True)
  def log_softmax(self, axis: int = -1) -> Tensor:
    x = self._float() - self.max(axis, keepdim=True).detach()
    return x - x.exp().sum(axis, keepdim=True).log()
  def _cumulative(self, axis: int, op: str) -> Tensor:
    """Inclusive scan along axis with op "sum", "prod" or "max": a window reduce (n*n work) up to 2048 elements, above
    that a scan inside blocks of about sqrt(n) combined with a scan of the block totals (n*sqrt(n) work)."""
    if self.ndim == 0: return self.reshape(1)._cumulative(0, op).reshape(())
    a = self._axis(axis)
    n = self.shape[a]
    low = -math.inf if dtypes.is_float(self.dtype) else dtypes.min(self.dtype)
    ident: ConstType = {"sum": 0, "prod": 1}.get(op, low)
    if n == 0:
      return self if op == "max" or dtypes.is_float(self.dtype) else self.cast(sum_acc_dtype(self.dtype))
    x, keep = self.transpose(a, -1), [(0, 0)] * (self.ndim - 1)
    if n <= 2048:
      win = x.pad(keep + [(n - 1, 0)], value=ident)._pool((n,))
      return getattr(win, op)(-1).transpose(a, -1)
    b = math.isqrt(n - 1) + 1
    nb = ceildiv(n, b)
    inner = x.pad(keep + [(0, nb * b - n)], value=ident).reshape(*x.shape[:-1], nb, b)._cumulative(-1, op)
    # the scan of the totals of the blocks before each block (the identity before the first)
    tot = inner[..., -1].shrink([None] * (self.ndim - 1) + [(0, nb - 1)]).pad(keep + [(1, 0)], value=ident)
    before = tot._cumulative(-1, op).unsqueeze(-1)
    out = inner + before if op == "sum" else inner * before if op == "prod" else inner.maximum(before)
    return out.reshape(*x.shape[:-1], nb * b).shrink([None] * (self.ndim - 1) + [(0, n)]).transpose(a, -1)
  def cumsum(self, axis: int = 0) -> Tensor: return self._cumulative(axis, "sum")
  def cumprod(self, axis: int = 0) -> Tensor: return self._cumulative(axis, "prod")
  def cummax(self, axis: int = 0) -> Tensor: return self._cumulative(axis, "max")

  # ---- windows, linear algebra, nn ----
  def _pool(self, k_: tuple[int, ...], stride: int | tuple[int, ...] = 1,
            dilation: int | tuple[int, ...] = 1, op: str = "pool") -> Tensor:
    """Sliding windows over the last len(k_) axes from movement ops only: (..., *i) -> (..., *o, *k)."""
    nk = len(k_)
    if self.ndim < nk: raise ValueError(f"{op}: kernel {k_} has more axes than the input {self.shape}")
    s_, d_ = make_tuple(stride, nk), make_tuple(dilation, nk)
    if any(v <= 0 for v in (*k_, *s_, *d_)):
      raise ValueError(f"{op}: kernel {k_}, stride {s_} and dilation {d_} must be positive (input {self.shape})")
    noop, i_ = self.shape[:-nk], self.shape[-nk:]
    o1_ = [i - d * (k - 1) for i, k, d in zip(i_, k_, d_)]
    if any(o <= 0 for o in o1_):
      raise ValueError(f"{op}: kernel {k_} (dilation {d_}) does not fit the (padded) spatial size {i_} of the input "
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
    return x.permute(list(range(n)) + [n + 2 * j + 1 for j in range(nk)] + [n + 2 * j for j in range(nk)])

  def dot(self, w: Tensor) -> Tensor:
    """numpy matmul semantics: 1-d operands are vectors, leading axes broadcast as batch axes."""
    if self.ndim == 0 or w.ndim == 0:
      raise ValueError(f"matmul: scalars are not allowed, got shapes {self.shape} and {w.shape}")
    x, ww = self, w
    if x.shape[-1] != (ww.shape[-2] if ww.ndim > 1 else ww.shape[0]):
      raise ValueError(f"matmul: shapes {self.shape} and {w.shape} do not match (inner sizes {x.shape[-1]} and "
                       f"{ww.shape[-2] if ww.ndim > 1 else ww.shape[0]})")
    if x.ndim > 2 or ww.ndim > 2: broadcast_shape(x.shape[:-2], ww.shape[:-2], op=f"matmul of {x.shape} and {ww.shape}")
    xs = x.reshape(x.shape[:-1] + (1,) + x.shape[-1:]) if x.ndim > 1 else x.reshape(1, 1, x.shape[0])
    wt = ww.transpose(-1, -2) if ww.ndim > 1 else ww.reshape(1, ww.shape[0])
    wt = wt.reshape(wt.shape[:-2] + (1,) + wt.shape[-2:])
    a, b = xs._operands(wt, "matmul")
    out = (a * b).sum(-1, dtype=sum_acc_dtype(a.dtype))
    # NOTE: unlike sum, matmul keeps the operands' dtype (ints wrap), as numpy and torch do
    out = out.cast(a.dtype)
    if w.ndim == 1: out = out.reshape(out.shape[:-1])
    if self.ndim == 1: out = out.reshape(out.shape[:-2] + out.shape[-1:]) if w.ndim > 1 else out.reshape(out.shape[:-1])
    return out
  def matmul(self, w: Tensor) -> Tensor: return self.dot(w)
  def linear(self, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """x @ weight + bias with weight of shape (in, out) (a 1-d weight scales elementwise)."""
    x = self * weight if weight.ndim == 1 else self.dot(weight)
    return x + bias if bias is not None else x

  def _pad2d(self, padding: int | Sequence[int], n: int, value: ConstType = 0.0) -> Tensor:
    if isinstance(padding, int): pairs = [(padding, padding)] * n
    elif len(padding) == n: pairs = [(p, p) for p in padding]
    elif len(padding) == 2 * n: pairs = [(padding[2 * i], padding[2 * i + 1]) for i in range(n)][::-1]
    else: raise ValueError(f"padding {padding} does not fit {n} spatial axes")
    return self.pad([(0, 0)] * (self.ndim - n) + pairs, value=value)
  def conv2d(self, weight: Tensor, bias: Tensor | None = None, groups: int = 1, stride: int | tuple[int, ...] = 1,
             dilation: int | tuple[int, ...] = 1, padding: int | Sequence[int] = 0) -> Tensor:
    """Convolution (cross-correlation, as torch) of (N, Cin, *spatial) with (Cout, Cin/groups, *kernel)."""
    if self.ndim != weight.ndim or self.ndim < 3:
      raise ValueError(f"conv2d: input {self.shape} and weight {weight.shape} need the same number of dims, at least 3 "
                       "((N, Cin, *spatial) and (Cout, Cin/groups, *kernel))")
    (bs, cin), hw = self.shape[:2], weight.shape[2:]
    cout, cin_g = weight.shape[:2]
    if self.ndim != weight.ndim or cin != cin_g * groups or cout % groups:
      raise ValueError(f"conv2d: input {self.shape} and weight {weight.shape} do not match with groups={groups} "
                       f"(input channels {cin} must equal {cin_g} * {groups}, and the {cout} output channels must "
                       "divide by groups)")
    nsp = len(hw)
    x = self._pad2d(padding, nsp)._pool(tuple(hw), stride, dilation, op="conv2d")  # (N, Cin, *o, *k)
    oyx = x.shape[2:2 + nsp]
    rcout = cout // groups
    x = x.reshape(bs, groups, 1, cin_g, *oyx, *hw).expand(bs, groups, rcout, cin_g, *oyx, *hw)
    w = weight.reshape(1, groups, rcout, cin_g, *([1] * nsp), *hw)
    red = tuple([3] + [4 + nsp + j for j in range(nsp)])
    out = (x * w).sum(red, keepdim=True).reshape(bs, cout, *oyx)
    return out if bias is None else out + bias.reshape(1, -1, *([1] * nsp))
  def avg_pool2d(self, kernel_size: int | tuple[int, ...] = (2, 2), stride: int | tuple[int, ...] | None = None,
                 padding: int | Sequence[int] = 0, count_include_pad: bool = True) -> Tensor:
    k = make_tuple(kernel_size, 2)
    s = k if stride is None else stride
    x = self._float()
    win = x._pad2d(padding, 2)._pool(k, s, op="avg_pool2d")
    total = win.sum((-2, -1))
    if count_include_pad: return total * (1 / float(prod(k)))
    ones = Tensor.ones(*x.shape[-2:], device=self.device)._pad2d(padding, 2)._pool(k, s).sum((-2, -1))
    return total / ones
  def max_pool2d(self, kernel_size: int | tuple[int, ...] = (2, 2), stride: int | tuple[int, ...] | None = None,
                 dilation: int | tuple[int, ...] = 1, padding: int | Sequence[int] = 0) -> Tensor:
    k = make_tuple(kernel_size, 2)
    low = -math.inf if dtypes.is_float(self.dtype) else dtypes.min(self.dtype)
    win = self._pad2d(padding, 2, value=low)._pool(k, k if stride is None else stride, dilation, "max_pool2d")
    return win.max((-2, -1))
  def layernorm(self, axis: int | Sequence[int] = -1, eps: float = 1e-5) -> Tensor:
    x = self._float()
    y = x - x.mean(axis, keepdim=True)
    return y * (y.square().mean(axis, keepdim=True) + eps).rsqrt()
  def batchnorm(self, weight: Tensor | None, bias: Tensor | None, mean: Tensor, invstd: Tensor,
                axis: int = 1) -> Tensor:
    """(x - mean) * invstd * weight + bias, the 1-d statistics along `axis` (channels)."""
    a = self._axis(axis)
    shape = tuple(-1 if k == a else 1 for k in range(self.ndim))
    x = (self - mean.reshape(shape)) * invstd.reshape(shape)
    if weight is not None: x = x * weight.reshape(shape)
    return x + bias.reshape(shape) if bias is not None else x
  def dropout(self, p: float = 0.5) -> Tensor:
    if not Tensor.training or p == 0: return self
    return (Tensor.rand(*self.shape, device=self.device) >= p).where(self, 0) * (1 / (1 - p))
  def embedding(self, weight: Tensor) -> Tensor:
    """Rows of `weight` (vocab, dim) picked by the int indices in self, via a one-hot matmul (so it has a gradient)."""
    if not dtypes.is_int(self.dtype): raise TypeError(f"embedding: indices must be an int tensor, got {self.dtype}")
    oh = (self.unsqueeze(-1) == Tensor._arange_index(weight.shape[0], self.device)).cast(weight.dtype)
    return oh @ weight
  def cross_entropy(self, y: Tensor, reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
    """Logits self (N, C) (or (C,)) against integer class indices y (N,), or against probabilities of self's shape."""
    if not (y.shape == self.shape and dtypes.is_float(y.dtype)) and y.shape != self.shape[:-1]:
      raise ValueError(f"cross_entropy: logits {self.shape} need class indices of shape {self.shape[:-1]} or "
                       f"probabilities of shape {self.shape}, got {y.shape} {y.dtype}")
    logp = self.log_softmax(-1)
    if y.shape == self.shape and dtypes.is_float(y.dtype): target = y
    else: target = (y.unsqueeze(-1) == Tensor._arange_index(self.shape[-1], self.device)).cast(logp.dtype)
    if label_smoothing: target = target * (1 - label_smoothing) + label_smoothing / self.shape[-1]
    loss = -(logp * target).sum(-1)
    if reduction == "none": return loss
    if reduction == "sum": return loss.sum()
    if reduction == "mean": return loss.mean()
    raise ValueError(f"cross_entropy: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
  def sparse_categorical_crossentropy(self, y: Tensor, label_smoothing: float = 0.0) -> Tensor:
    return self.cross_entropy(y, label_smoothing=label_smoothing)
  def binary_crossentropy_logits(self, y: Tensor) -> Tensor:
    return (self.relu() - self * y + ((-self.abs()).exp() + 1).log()).mean()

  # ---- autograd ----
  def _grad_graph(self) -> tuple[UOp, dict[UOp, UOp]]:
    """self's graph for autograd, and where each realized intermediate went in it. A realized intermediate (the buffer
    of a non-leaf tensor, whose lazy graph reads a tensor requiring grad) is swapped back for the graph that made it,
    so gradients flow through values realized on the way (a print in the middle of a forward pass must not cut the
    parameters off)."""
    root = self._graph if self._graph is not None else self.uop
    if not (kept := dict(list(_realized_graphs.items()))): return root, {}
    grad_uops = {t.uop for t in list(_all_tensors) if t.requires_grad}
    reads = {u: set(g.toposort()) for u, g in kept.items()}
    live: dict[UOp, UOp] = {}
    # NOTE: live = reads a tensor requiring grad, directly or through another live one (to a fixed point)
    while new := {u: kept[u] for u, r in reads.items() if u not in live and (r & grad_uops or r & live.keys())}:
      live.update(new)
    where: dict[UOp, UOp] = {}
    while subs := {u: g for u in root.toposort() if (g := live.get(u)) is not None}:
      root = root.substitute(subs)
      where = {**{u: v.substitute(subs) for u, v in where.items()}, **subs}
      live = {u: g for u, g in live.items() if u not in subs}
    return root, where
  def gradient(self, *targets: Tensor, gradient: Tensor | None = None) -> list[Tensor]:
    """d(self)/d(target) for each target; self must be a scalar unless `gradient` (d(loss)/d(self)) is given."""
    if gradient is None:
      if self.numel() != 1:
        raise ValueError(f"gradient: implicit gradients need a scalar output, this one has shape {self.shape}")
      if not dtypes.is_float(self.dtype): raise TypeError(f"gradient: needs a float output, got {self.dtype}")
      gradient = self.ones_like()
    if gradient.shape != self.shape:
      raise ValueError(f"gradient: the output gradient {gradient.shape} must have shape {self.shape}")
    root, where = self._grad_graph()
    tu = [where.get(t.uop, t.uop) for t in targets]
    grads = compute_gradient(root, gradient.cast(self.dtype).uop, set(tu))
    return [Tensor(grads[u]) if u in grads else t.zeros_like() for t, u in zip(targets, tu)]
  def backward(self, gradient: Tensor | None = None) -> Tensor:
    """Fill .grad of every tensor with requires_grad=True that self depends on (added to an existing .grad)."""
    root, where = self._grad_graph()
    nodes = root.toposort(gate=lambda u: u.op is not Ops.DETACH)
    targets = [t for t in list(_all_tensors) if t.requires_grad and where.get(t.uop, t.uop) in nodes]
    if not targets: raise RuntimeError("backward: no tensor with requires_grad=True contributes to this tensor")
    for t, g in zip(targets, self.gradient(*targets, gradient=gradient)):
      if g.shape != t.shape: raise RuntimeError(f"backward: gradient shape {g.shape} != tensor shape {t.shape}")
      t.grad = g if t.grad is None else (t.grad + g)
    _backward_roots.add(self)
    return self

  # ---- functional sugar ----
  def sequential(self, ll: list[Callable[[Tensor], Tensor]]) -> Tensor:
    return functools.reduce(lambda x, f: f(x), ll, self)
  def __iter__(self) -> Any:
    if not self.shape: raise TypeError("iteration over a 0-d tensor")
    return (self[i] for i in range(self.shape[0]))

def _apply_becomes(becomes: dict[UOp, UOp]) -> None:
  """Point every live tensor at the buffers its graph was realized into. Tensors that autograd may still differentiate
  keep their lazy graph in `_graph`."""
  if not becomes: return
  # NOTE: an ASSIGN overwrote its buffer: the lazy graph recorded for the old contents no longer describes it
  if written := {_view_base(u.src[0]) for u in becomes if u.op is Ops.ASSIGN}:
    for k in [k for k in list(_realized_graphs.keys()) if _view_base(k) in written]: _realized_graphs.pop(k, None)
  for t in list(_all_tensors):
    if _base_buffer(t.uop) is not None: continue
    if (new := becomes.get(t.uop)) is not None:
      if t.requires_grad and t.uop.op is not Ops.ASSIGN:
        if t._graph is None: t._graph = t.uop
        if t._nonleaf: _realized_graphs[new] = t.uop
      t.uop = new
    elif t.uop.op is not Ops.CONST and any(u in becomes for u in t.uop.toposort()):
      t.uop = t.uop.substitute(becomes)

__all__ = ["Tensor", "broadcast_shape"]
