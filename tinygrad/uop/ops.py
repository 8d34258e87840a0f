"""UOp (the one IR node, hash-consed), UPat / PatternMatcher (the one rewrite mechanism) and graph_rewrite."""
from __future__ import annotations
import atexit, weakref, functools, itertools, inspect, math, struct, time, types, collections
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence
from tinygrad.uop import Ops, GroupOp, AxisType
from tinygrad.uop import hooks
from tinygrad.uop.mathtraits import MathTrait
from tinygrad.uop.semantics import shift_amount
from tinygrad.dtype import DType, PtrDType, dtypes, Invalid, InvalidType, ConstType, AddrSpace
from tinygrad.helpers import TRACK_MATCH_STATS, REWRITE_STEP_LIMIT, prod, all_int, cdiv, cmod, argfix

# ---- metadata (kept beside the node, never in its hash key) ----

@dataclass(frozen=True)
class Metadata:
  name: str
  caller: str = ""
  backward: bool = False
  def __repr__(self) -> str: return self.name + (" bw" if self.backward else "")

all_metadata: weakref.WeakKeyDictionary[UOp, tuple[Metadata, ...]] = weakref.WeakKeyDictionary()

# ---- UOp ----

class recursive_property(functools.cached_property):
  """A cached property defined recursively over sources, computed without Python recursion: uncached sources are filled
  in bottom-up first, so a 100k-deep graph costs no stack."""
  def __get__(self, instance: Any, owner: Any = None) -> Any:
    if instance is None: return self
    d = instance.__dict__
    if (name := self.attrname) in d: return d[name]
    if any(name not in s.__dict__ for s in instance.src):
      for u in instance.toposort(gate=lambda x: name not in x.__dict__):
        if u is not instance and name not in u.__dict__: u.__dict__[name] = self.func(u)
    d[name] = ret = self.func(instance)
    return ret

def argkey(a: Any) -> Any:
  # NOTE: 0.0 == -0.0 and nan != nan, so floats key by their bits; True == 1, so scalars key with their type
  t = type(a)
  if t is float: return (float, struct.pack("<d", a))
  if t is tuple: return tuple(argkey(x) for x in a)
  if t is bool or t is int: return (t, a)
  return a

class UOpMetaClass(type):
  ucache: dict[tuple, weakref.ReferenceType[UOp]] = {}
  def __call__(cls, op: Ops, dtype: DType = dtypes.void, src: tuple[UOp, ...] = (), arg: Any = None,
               tag: Any = None) -> UOp:
    if type(src) is not tuple: src = tuple(src)
    key = (op, dtype, src, None if arg is None else argkey(arg), tag)
    if (wret := UOpMetaClass.ucache.get(key)) is not None and (ret := wret()) is not None: return ret
    created: UOp = super().__call__(op, dtype, src, arg, tag)
    UOpMetaClass.ucache[key] = weakref.ref(created)
    if hooks.uop_created:
      for fn in hooks.uop_created: fn(created)
    return created

class UOp(MathTrait, metaclass=UOpMetaClass):
  """One node of the graph at every stage. Immutable and hash-consed: equal nodes are the same object."""
  __slots__ = ("op", "dtype", "src", "arg", "tag", "__weakref__", "__dict__")
  op: Ops
  dtype: DType
  src: tuple[UOp, ...]
  arg: Any
  tag: Any
  def __init__(self, op: Ops, dtype: DType = dtypes.void, src: tuple[UOp, ...] = (), arg: Any = None, tag: Any = None):
    sa = object.__setattr__
    sa(self, "op", op); sa(self, "dtype", dtype); sa(self, "src", src); sa(self, "arg", arg); sa(self, "tag", tag)
  def __setattr__(self, k: str, v: Any) -> None:
    raise AttributeError(f"UOp is immutable (tried to set {k}); use .replace()")
  def __del__(self) -> None:
    try:
      key = (self.op, self.dtype, self.src, None if self.arg is None else argkey(self.arg), self.tag)
      # NOTE: __del__ runs before CPython clears weakrefs, so the entry still points at self here
      if (r := UOpMetaClass.ucache.get(key)) is not None and (r() is None or r() is self): del UOpMetaClass.ucache[key]
    except (AttributeError, TypeError, KeyError): pass
  def __reduce__(self) -> tuple: return (UOp, (self.op, self.dtype, self.src, self.arg, self.tag))
  def replace(self, **kwargs: Any) -> UOp:
    new = (kwargs.pop("op", self.op), kwargs.pop("dtype", self.dtype), kwargs.pop("src", self.src),
           kwargs.pop("arg", self.arg), kwargs.pop("tag", self.tag))
    if kwargs: raise TypeError(f"replace: unknown field(s) {list(kwargs)}")
    return UOp(*new)
  def rtag(self, tag: Any = True) -> UOp: return self.replace(tag=tag)
  def __repr__(self) -> str: return _short_repr(self, 3)
  def __bool__(self) -> bool: return True

  # ---- graph walking ----
  def toposort(self, gate: Callable[[UOp], bool] | None = None) -> dict[UOp, None]:
    """Every node reachable from self, sources before users (a new dict each call). `gate(node)` False stops the walk
    below that node."""
    ret: dict[UOp, None]
    if gate is not None and not gate(self): return {self: None}
    # NOTE: a SINK's full walk is kept (a kernel's AST is walked by the spec, the reference, the oracles and the opts
    # many times); without the SINK itself, so the node does not hold a reference to itself
    if gate is None and self.op is Ops.SINK and (hit := self.__dict__.get("_toposort")) is not None:
      (ret := dict.fromkeys(hit))[self] = None
      return ret
    ret = {}
    # NOTE: a stack of (node, iterator over its sources): each source is taken when its turn comes, so a node is pushed
    # once, not once per user; post-order, sources in order (the order every caller relies on); gate called once a node
    stack: list[tuple[UOp, Iterator[UOp]]] = [(self, iter(self.src))]
    while stack:
      node, it = stack[-1]
      for s in it:
        if s in ret: continue
        stack.append((s, iter(s.src) if gate is None or gate(s) else iter(())))
        break
      else:
        stack.pop()
        ret[node] = None
    if gate is None and self.op is Ops.SINK: self.__dict__["_toposort"] = tuple(ret)[:-1]
    return ret
  def substitute(self, dvars: dict[UOp, UOp], name: str | None = None) -> UOp:
    """Replace nodes by identity (no pattern matching), rebuilding every user above them."""
    if not dvars: return self
    new: dict[UOp, UOp] = {}
    # NOTE: a replaced node is replaced whole, so the walk does not go below it
    for u in self.toposort(gate=lambda x: x not in dvars):
      if u in dvars: new[u] = dvars[u]; continue
      nsrc = tuple(new[s] for s in u.src)
      new[u] = u if all(a is b for a, b in zip(nsrc, u.src)) else u.replace(src=nsrc)
    return new[self]
  @property
  def metadata(self) -> tuple[Metadata, ...]: return all_metadata.get(self, ())
  def set_metadata(self, md: tuple[Metadata, ...]) -> UOp:
    all_metadata[self] = md
    return self

  # ---- constructors ----
  def _binary(self, op: Ops, x: Any, reverse: bool = False) -> Any:
    # NOTE: an operand of another MathTrait (a Tensor) takes the operator: `pos + t` is the Tensor's reflected add
    if isinstance(x, MathTrait) and not isinstance(x, UOp): return NotImplemented
    return super()._binary(op, x, reverse)
  def alu(self, op: Ops, *src: UOp) -> UOp:
    out_dtype = (self, *src)[-1].dtype
    if op in GroupOp.Comparison: out_dtype = dtypes.bool.vec(out_dtype.count) if out_dtype.count > 1 else dtypes.bool
    elif op is Ops.WHERE: out_dtype = src[-1].dtype
    return UOp(op, out_dtype, (self, *src))
  def const_like(self, b: Any) -> UOp:
    return UOp.const(self.dtype.base if isinstance(self.dtype, PtrDType) else self.dtype, b)
  @staticmethod
  def const(dtype: DType, b: Any) -> UOp:
    if isinstance(b, UOp): return b
    if isinstance(b, tuple) and len(b) == 1: b = b[0]
    if isinstance(b, tuple):
      if len(b) != dtype.count:
        raise ValueError(f"VCONST of {len(b)} values needs a vector dtype of that width, got {dtype}")
      return UOp(Ops.VCONST, dtype, arg=dtypes.as_const(b, dtype))
    return UOp(Ops.CONST, dtype, arg=dtypes.as_const(b, dtype))
  @staticmethod
  def invalid() -> UOp: return UOp(Ops.CONST, dtypes.index, arg=Invalid)
  @staticmethod
  def variable(name: str, min_val: ConstType, max_val: ConstType, dtype: DType = dtypes.index) -> UOp:
    if not min_val <= max_val: raise ValueError(f"variable {name!r}: min {min_val} > max {max_val}")
    return UOp(Ops.DEFINE_VAR, dtype, arg=(name, min_val, max_val))
  @staticmethod
  def range(end: int | UOp, *arg: Any, dtype: DType = dtypes.index) -> UOp:
    """RANGE(end, arg=(id, ..., AxisType)): a loop variable 0 <= r < end. The AxisType defaults to LOOP."""
    if not arg or not isinstance(arg[-1], AxisType): arg = (*arg, AxisType.LOOP)
    return UOp(Ops.RANGE, dtype, (UOp.const(dtype, end) if not isinstance(end, UOp) else end,), arg)
  @staticmethod
  def special(end: int | UOp, name: str, dtype: DType = dtypes.index) -> UOp:
    return UOp(Ops.SPECIAL, dtype, (UOp.const(dtype, end) if not isinstance(end, UOp) else end,), name)
  @staticmethod
  def sink(*srcs: UOp, arg: Any = None) -> UOp: return UOp(Ops.SINK, dtypes.void, srcs, arg)
  @staticmethod
  def group(*srcs: UOp) -> UOp: return UOp(Ops.GROUP, dtypes.void, srcs)
  def index(self, *idx: UOp) -> UOp: return UOp(Ops.INDEX, self.dtype, (self, *idx))
  def load(self, *src: UOp, dtype: DType | None = None) -> UOp:
    if dtype is None: dtype = self.dtype.base if isinstance(self.dtype, PtrDType) else self.dtype
    return UOp(Ops.LOAD, dtype, (self, *src))
  def store(self, val: Any, *src: UOp) -> UOp:
    return UOp(Ops.STORE, dtypes.void, (self, self.ufix(val) if not isinstance(val, UOp) else val, *src))
  def end(self, *ranges: UOp) -> UOp: return UOp(Ops.END, dtypes.void, (self, *ranges)) if ranges else self
  def after(self, *deps: UOp) -> UOp: return UOp(Ops.AFTER, self.dtype, (self, *deps))
  def reduce(self, *ranges: UOp, arg: Ops = Ops.ADD) -> UOp: return UOp(Ops.REDUCE, self.dtype, (self, *ranges), arg)
  def cast(self, dtype: DType) -> UOp: return self if self.dtype is dtype else UOp(Ops.CAST, dtype, (self,))
  def bitcast(self, dtype: DType) -> UOp: return self if self.dtype is dtype else UOp(Ops.BITCAST, dtype, (self,))
  def gep(self, i: int | tuple[int, ...]) -> UOp:
    idx = (i,) if isinstance(i, int) else tuple(i)
    if self.dtype.vcount == len(idx) and idx == tuple(range(len(idx))): return self
    return UOp(Ops.GEP, self.dtype.scalar().vec(len(idx)) if len(idx) > 1 else self.dtype.scalar(), (self,), idx)
  @staticmethod
  def vectorize(*srcs: UOp) -> UOp:
    if len(srcs) == 1: return srcs[0]
    return UOp(Ops.VECTORIZE, srcs[0].dtype.vec(len(srcs)), srcs)
  def broadcast(self, n: int) -> UOp: return self if n == 1 else UOp.vectorize(*([self] * n))
  def bind(self, val: int) -> UOp:
    if self.op is not Ops.DEFINE_VAR: raise TypeError(f"bind: only a DEFINE_VAR can be bound, not {self.op}")
    if not self.arg[1] <= val <= self.arg[2]:
      raise ValueError(f"bind: {val} is outside {self.arg[0]}'s bounds [{self.arg[1]}, {self.arg[2]}]")
    return UOp(Ops.BIND, self.dtype, (self, self.const_like(val)))
  def valid(self, cond: UOp) -> UOp:
    """`cond.where(self, Invalid)`: a masked index."""
    return cond.where(self, UOp.invalid())
  def get_idx(self) -> UOp: return self.src[1] if self.is_masked() else self
  def get_valid(self) -> UOp: return self.src[0] if self.is_masked() else UOp.const(dtypes.bool, True)
  def is_masked(self) -> bool:
    return self.op is Ops.WHERE and self.src[2].op is Ops.CONST and self.src[2].arg is Invalid

  # ---- tensor-graph sugar: movement and reduction (sizes are ints or symbolic index UOps, tinygrad/uop/sint.py) ----
  def reshape(self, shape: tuple[Any, ...]) -> UOp:
    shape = tuple(shape)
    if self.shape is not None:
      if not all_int(self.shape + shape): _sint().check_reshape(self.shape, shape)
      elif prod(self.shape) != prod(shape):
        raise ValueError(f"reshape: cannot reshape {self.shape} ({prod(self.shape)} elements) to {shape} "
                         f"({prod(shape)} elements)")
    return self if self.shape == shape else UOp(Ops.RESHAPE, self.dtype, (self,), shape)
  def permute(self, order: tuple[int, ...]) -> UOp:
    order = tuple(order)
    if self.shape is not None and sorted(order) != list(range(len(self.shape))):
      raise ValueError(f"permute: {order} is not a permutation of the {len(self.shape)} axes of {self.shape}")
    return self if order == tuple(range(len(order))) else UOp(Ops.PERMUTE, self.dtype, (self,), order)
  def expand(self, shape: tuple[Any, ...]) -> UOp:
    shape = tuple(shape)
    if self.shape is not None and not _sint_expand_ok(self.shape, shape):
      raise ValueError(f"expand: cannot expand {_sint_text(self.shape)} to {_sint_text(shape)} (only size-1 axes "
                       "expand)")
    return self if self.shape == shape else UOp(Ops.EXPAND, self.dtype, (self,), shape)
  def pad(self, arg: tuple[tuple[Any, Any], ...]) -> UOp:
    arg = tuple((_size_arg(b), _size_arg(e)) for b, e in arg)
    if any(_lo(b) < 0 or _lo(e) < 0 for b, e in arg):
      raise ValueError(f"pad: negative padding {_sint_text(arg)} (for some value of its variables); use shrink")
    if self.shape is not None and len(arg) != len(self.shape):
      raise ValueError(f"pad: {len(arg)} pairs for {len(self.shape)} axes of {self.shape}")
    return self if all(_is_int(b, 0) and _is_int(e, 0) for b, e in arg) else UOp(Ops.PAD, self.dtype, (self,), arg)
  def shrink(self, arg: tuple[tuple[Any, Any], ...]) -> UOp:
    arg = tuple((_size_arg(b), _size_arg(e)) for b, e in arg)
    if self.shape is None: return UOp(Ops.SHRINK, self.dtype, (self,), arg)
    if all_int(self.shape) and all(type(b) is int and type(e) is int for b, e in arg):
      if len(arg) != len(self.shape) or any(not 0 <= b <= e <= s for (b, e), s in zip(arg, self.shape)):
        raise ValueError(f"shrink: {arg} does not fit shape {self.shape}")
      if arg == tuple((0, s) for s in self.shape): return self
    else:
      if len(arg) != len(self.shape) or not _sint().shrink_fits(arg, self.shape):
        raise ValueError(f"shrink: {_sint_text(arg)} does not fit shape {_sint_text(self.shape)} for every value of "
                         "its variables (a symbolic bound must stay inside the axis for the variable's whole range)")
      if all(_is_int(b, 0) and _sint().sym_eq(e, s) for (b, e), s in zip(arg, self.shape)): return self
    return UOp(Ops.SHRINK, self.dtype, (self,), arg)
  def flip(self, arg: tuple[bool, ...]) -> UOp:
    arg = tuple(bool(x) for x in arg)
    if self.shape is not None and len(arg) != len(self.shape):
      raise ValueError(f"flip: {len(arg)} flags for {len(self.shape)} axes")
    return self if not any(arg) else UOp(Ops.FLIP, self.dtype, (self,), arg)
  def r(self, op: Ops, axis: tuple[int, ...]) -> UOp:
    axis = tuple(sorted(set(axis)))
    return self if not axis else UOp(Ops.REDUCE_AXIS, self.dtype, (self,), (op, axis))
  def contiguous(self) -> UOp: return UOp(Ops.CONTIGUOUS, self.dtype, (self,))
  def detach(self) -> UOp: return UOp(Ops.DETACH, self.dtype, (self,))

  @recursive_property
  def shape(self) -> tuple[Any, ...] | None:
    """The tensor-graph shape, or None for nodes that have none (kernel and program nodes)."""
    return _shape(self)
  @property
  def size(self) -> Any:
    if self.shape is None: return 1
    return prod(self.shape) if all_int(self.shape) else _sint().sym_prod(self.shape)
  @recursive_property
  def device(self) -> str | tuple[str, ...] | None:
    if self.op is Ops.DEVICE: return self.arg
    if self.op is Ops.BUFFER: return self.src[1].arg
    # NOTE: a COPY lives on its target device (or devices), not on its source's
    if self.op is Ops.COPY: return self.src[1].arg
    if self.op is Ops.MULTI: return tuple(s.device for s in self.src)
    for s in self.src:
      if (d := s.device) is not None: return d
    return None

  # ---- ranges and bounds ----
  @recursive_property
  def _ranges(self) -> frozenset[UOp]:
    if self.op is Ops.RANGE: return frozenset({self}) | self.src[0]._ranges
    if self.op in (Ops.END, Ops.REDUCE): return self.src[0]._ranges.difference(*(s._ranges for s in self.src[1:]))
    if not self.src: return frozenset()
    return frozenset().union(*(s._ranges for s in self.src))
  @property
  def ranges(self) -> list[UOp]:
    """The RANGEs open at this node (used and not closed by an END or REDUCE below it), ordered by their arg."""
    return sorted(self._ranges, key=lambda r: r.arg)
  @property
  def vmin(self) -> Any: return self._min_max[0]
  @property
  def vmax(self) -> Any: return self._min_max[1]
  @recursive_property
  def _min_max(self) -> tuple[Any, Any]: return _min_max(self)
  def const_arg(self) -> Any:
    if self.op is not Ops.CONST: raise ValueError(f"const_arg of {self.op}")
    return self.arg
  def divides(self, v: int) -> UOp | None:
    """self // v if v divides self exactly (structurally), else None."""
    if v == 1: return self
    if self.op is Ops.CONST and isinstance(self.arg, int):
      return self.const_like(self.arg // v) if self.arg % v == 0 else None
    if self.op is Ops.ADD:
      if (d0 := self.src[0].divides(v)) is not None and (d1 := self.src[1].divides(v)) is not None: return d0 + d1
      return None
    if self.op is Ops.MUL:
      if (d0 := self.src[0].divides(v)) is not None: return d0 * self.src[1]
      if (d1 := self.src[1].divides(v)) is not None: return self.src[0] * d1
    return None

def _short_repr(u: UOp, depth: int) -> str:
  srcs = ", ".join(_short_repr(s, depth - 1) for s in u.src) if depth > 0 else "..." if u.src else ""
  tag = f", tag={u.tag!r}" if u.tag is not None else ""
  return f"UOp({u.op}, {u.dtype!r}, arg={u.arg!r}{tag}, src=({srcs}))"

# ---- shapes of tensor-graph nodes ----

# NOTE: symbolic sizes are simplified by the symbolic rules, which are built from this module, so the helpers
# (tinygrad.uop.sint) register themselves here when imported (`import tinygrad` does it) and this module imports neither
sint_helpers: list[types.ModuleType] = []
def _sint() -> types.ModuleType:
  if not sint_helpers: raise RuntimeError("a symbolic size needs tinygrad.uop.sint: import tinygrad (or it) first")
  return sint_helpers[0]

def _is_int(x: Any, v: int) -> bool: return not isinstance(x, UOp) and x == v
def _size_arg(x: Any) -> Any: return x if isinstance(x, UOp) else int(x)
def _lo(x: Any) -> Any: return x.vmin if isinstance(x, UOp) else x
def _sint_text(x: Any) -> str:
  if isinstance(x, UOp): return _sint().render_sint(x)
  if isinstance(x, tuple): return "(" + ", ".join(_sint_text(y) for y in x) + ("," if len(x) == 1 else "") + ")"
  return repr(x)

def _sint_expand_ok(old: tuple[Any, ...], new: tuple[Any, ...]) -> bool:
  if len(old) != len(new): return False
  if all_int(old + new): return all(s == n or s == 1 for s, n in zip(old, new))
  return all(_is_int(s, 1) or _sint().sym_eq(s, n) for s, n in zip(old, new))

def _shape(u: UOp) -> tuple[Any, ...] | None:
  op = u.op
  if op is Ops.BUFFER: return (u.arg,)
  if op is Ops.BUFFER_VIEW: return (u.arg[0],)
  if op is Ops.CONST: return () if u.src else None
  if op in (Ops.RESHAPE, Ops.EXPAND): return u.arg
  if op is Ops.PERMUTE: return None if (ps := u.src[0].shape) is None else tuple(ps[i] for i in u.arg)
  if op is Ops.PAD:
    if (ps := u.src[0].shape) is None: return None
    ret = tuple(s + b + e for s, (b, e) in zip(ps, u.arg))
    return ret if all_int(ret) else tuple(_sint().ssimplify(s) for s in ret)
  if op is Ops.SHRINK:
    ret = tuple(e - b for b, e in u.arg)
    return ret if all_int(ret) else tuple(_sint().ssimplify(s) for s in ret)
  if op is Ops.FLIP: return u.src[0].shape
  if op is Ops.MULTI: return _multi_shape(u)
  if op is Ops.REDUCE_AXIS:
    return None if (ps := u.src[0].shape) is None else tuple(1 if i in u.arg[1] else s for i, s in enumerate(ps))
  if op in (Ops.DEFINE_VAR, Ops.BIND): return () if op is Ops.BIND or u.src else None
  if op in GroupOp.Elementwise or op in (Ops.CONTIGUOUS, Ops.DETACH, Ops.COPY, Ops.ASSIGN, Ops.AFTER):
    for s in u.src[1:] if op is Ops.WHERE else u.src:
      if (sh := s.shape) is not None: return sh
  return None

def _multi_shape(u: UOp) -> tuple[int, ...] | None:
  """MULTI(*shards, arg=(axis, bounds, op)): the shards' shape, with the split axis as long as the bounds' union."""
  if not u.src or (sh := u.src[0].shape) is None: return None
  if not isinstance(u.arg, tuple) or len(u.arg) != 3 or u.arg[0] is None: return sh
  axis, bounds = u.arg[0], u.arg[1]
  if not isinstance(axis, int) or not 0 <= axis < len(sh) or not isinstance(bounds, tuple) or not bounds: return None
  return tuple(max(e for _, e in bounds) if i == axis else s for i, s in enumerate(sh))

# ---- value bounds ----

def _min_max(u: UOp) -> tuple[Any, Any]:
  op, src = u.op, u.src
  dmin, dmax = dtypes.min(u.dtype), dtypes.max(u.dtype)
  if u.dtype.count > 1 or isinstance(u.dtype, PtrDType) or u.dtype is dtypes.void: return dmin, dmax
  # NOTE: a NaN constant bounds nothing (min/max with NaN are order-dependent): a where() with a NaN branch folded
  # `where(c, nan, x) < 0` to False
  if op is Ops.CONST: return (dmin, dmax) if isinstance(u.arg, InvalidType) or _any_nan(u.arg) else (u.arg, u.arg)
  if op is Ops.DEFINE_VAR: return u.arg[1], u.arg[2]
  if op is Ops.RANGE: return 0, max(0, src[0].vmax - 1)
  if op is Ops.SPECIAL: return 0, max(0, src[0].vmax - 1)
  if op is Ops.BIND: return src[0].vmin, src[0].vmax
  # NOTE: NEG of a bool is the identity (bool arithmetic is C's: -1 != 0), as tinygrad/uop/semantics.py defines it
  if op is Ops.NEG and u.dtype is dtypes.bool: return src[0].vmin, src[0].vmax
  # NOTE: -MIN wraps to MIN in a fixed-width int, so a range that reaches MIN has unknown bounds
  if op is Ops.NEG and not dtypes.is_unsigned(u.dtype): return _clamp(-src[0].vmax, -src[0].vmin, dmin, dmax)
  if op is Ops.CAST:
    if dtypes.is_int(u.dtype) or u.dtype is dtypes.bool:
      if dtypes.is_float(src[0].dtype): return dmin, dmax
      lo, hi = src[0].vmin, src[0].vmax
      return (lo, hi) if dmin <= lo and hi <= dmax else (dmin, dmax)
    if dtypes.is_float(u.dtype):
      # NOTE: a conversion into a float rounds to its format (to nearest: monotone, so the rounded bounds bound it), and
      # may round past the source's bound: 248 is 256 in fp8e4m3, 2**24 + 1 is 2**24 in float32
      lo, hi = dtypes.as_const(src[0].vmin, u.dtype), dtypes.as_const(src[0].vmax, u.dtype)
      return (dmin, dmax) if _any_nan(lo, hi) else (lo, hi)
    return src[0].vmin, src[0].vmax
  if op is Ops.WHERE:
    c = src[0]
    if c.vmin == c.vmax: return (src[1].vmin, src[1].vmax) if c.vmin else (src[2].vmin, src[2].vmax)
    if src[2].op is Ops.CONST and isinstance(src[2].arg, InvalidType): return src[1].vmin, src[1].vmax
    return min(src[1].vmin, src[2].vmin), max(src[1].vmax, src[2].vmax)
  if len(src) != 2 or op not in GroupOp.Binary: return dmin, dmax
  (a0, a1), (b0, b1) = src[0]._min_max, src[1]._min_max
  if any(isinstance(x, InvalidType) for x in (a0, a1, b0, b1)): return dmin, dmax
  # NOTE: float bounds can be infinite: inf - inf and 0 * inf are NaN, which bounds nothing
  if op is Ops.ADD:
    return (dmin, dmax) if _any_nan(a0 + b0, a1 + b1) else _clamp(a0 + b0, a1 + b1, dmin, dmax)
  if op is Ops.MUL:
    corners = [a0 * b0, a0 * b1, a1 * b0, a1 * b1]
    return (dmin, dmax) if _any_nan(*corners) else _clamp(min(corners), max(corners), dmin, dmax)
  if op is Ops.MAX: return max(a0, b0), max(a1, b1)
  # NOTE: float bounds bound the values that are not NaN (a load, 0 * x, inf - inf may be NaN), and a comparison with a
  # NaN is False (!= is True): unless both sides are constants, a float comparison may also give that answer
  if op in GroupOp.Comparison:
    nan = dtypes.is_float(src[0].dtype) and not all(s.op is Ops.CONST for s in src)
    if op is Ops.CMPLT: return bool(a1 < b0) and not nan, bool(a0 < b1)
    if op is Ops.CMPNE: return bool(a1 < b0 or b1 < a0), nan or not (a0 == a1 == b0 == b1)
    return a0 == a1 == b0 == b1 and not nan, not (a1 < b0 or b1 < a0)
  if not dtypes.is_int(u.dtype) and u.dtype is not dtypes.bool: return dmin, dmax
  if op is Ops.IDIV and (b0 > 0 or b1 < 0):
    qs = [cdiv(a0, b0), cdiv(a0, b1), cdiv(a1, b0), cdiv(a1, b1)]
    # NOTE: INT_MIN // -1 overflows (it wraps on every target), so a quotient outside the dtype means unknown bounds
    return _clamp(min(qs), max(qs), dmin, dmax)
  if op is Ops.MOD and (b0 > 0 or b1 < 0):
    m = max(abs(b0), abs(b1)) - 1
    if a0 >= 0 and b0 == b1 and b0 > 0 and a0 // b0 == a1 // b0: return a0 % b0, a1 % b0
    return (max(-m, a0) if a0 < 0 else 0), (min(m, a1) if a1 > 0 else 0)
  if u.dtype is dtypes.bool:
    if op is Ops.AND: return bool(a0 and b0), bool(a1 and b1)
    if op is Ops.OR: return bool(a0 or b0), bool(a1 or b1)
    if op is Ops.XOR and a0 == a1 and b0 == b1: return a0 != b0, a0 != b0
    return False, True
  if op is Ops.AND and a0 >= 0 and b0 >= 0: return 0, min(a1, b1)
  # NOTE: the amount is taken modulo the width (semantics.shift_amount)
  if op is Ops.SHL and b0 == b1: return _clamp(a0 << (k := shift_amount(u.dtype, b0)), a1 << k, dmin, dmax)
  if op is Ops.SHR and b0 == b1: return a0 >> (k := shift_amount(u.dtype, b0)), a1 >> k
  return dmin, dmax

def _any_nan(*xs: Any) -> bool: return any(isinstance(x, float) and x != x for x in xs)

def _clamp(lo: Any, hi: Any, dmin: Any, dmax: Any) -> tuple[Any, Any]:
  # NOTE: an integer op that can overflow has unknown bounds (it wraps), so fall back to the dtype's range
  if isinstance(lo, int) and isinstance(hi, int) and (lo < dmin or hi > dmax): return dmin, dmax
  return lo, hi

# ---- UPat ----

class UPat(MathTrait):
  """A pattern: ops (a set), dtypes, sources (tuple = in order, list = any permutation, UPat = every source), arg,
  and a capture name."""
  __slots__ = ("op", "dtype", "arg", "name", "_src", "src_kind", "allow_any_len", "early_reject", "location")
  def __init__(self, op: Ops | tuple[Ops, ...] | set[Ops] | frozenset[Ops] | None = None,
               dtype: DType | tuple[DType, ...] | None = None, src: tuple[UPat, ...] | list[UPat] | UPat | None = None,
               arg: Any = None, name: str | None = None, allow_any_len: bool = False, location: str | None = None):
    self.op: frozenset[Ops] | None = None if op is None else frozenset((op,) if isinstance(op, Ops) else op)
    self.dtype: tuple[DType, ...] | None = \
      None if dtype is None else (dtype,) if isinstance(dtype, DType) else tuple(dtype)
    self.arg, self.name, self.allow_any_len = arg, name, allow_any_len
    self._src: list[tuple[UPat, ...]] | UPat | None
    if src is None: self._src, self.src_kind = None, "none"
    elif isinstance(src, UPat): self._src, self.src_kind = src, "repeat"
    elif isinstance(src, list):
      # every distinct ordering of the sources; a commutative op's operands may come in either order
      self._src, self.src_kind = list(dict.fromkeys(itertools.permutations(src))), "tuple"
    else: self._src, self.src_kind = [tuple(src)], "tuple"
    first = self._src[0] if isinstance(self._src, list) else ()
    self.early_reject = frozenset(next(iter(p.op)) for p in first if p.op is not None and len(p.op) == 1)
    if location is None:
      fr = inspect.currentframe()
      while fr is not None and fr.f_code.co_filename == __file__: fr = fr.f_back
      location = f"{fr.f_code.co_filename.split('/')[-1]}:{fr.f_lineno}" if fr is not None else "?"
    self.location = location

  @property
  def src(self) -> Any: return self._src
  @staticmethod
  def var(name: str | None = None, dtype: DType | tuple[DType, ...] | None = None) -> UPat:
    return UPat(dtype=dtype, name=name)
  @staticmethod
  def cvar(name: str | None = None, dtype: DType | tuple[DType, ...] | None = None, vec: bool = True) -> UPat:
    return UPat((Ops.CONST, Ops.VCONST) if vec else Ops.CONST, dtype, name=name)
  @staticmethod
  def const(dtype: DType | tuple[DType, ...] | None, b: ConstType | InvalidType) -> UPat:
    return UPat(Ops.CONST, dtype, arg=b)
  @staticmethod
  def any(*pats: UPat) -> UPat: return UPatAny(*pats)
  def named(self, name: str) -> UPat:
    ret = UPat.__new__(type(self))
    for k in UPat.__slots__: object.__setattr__(ret, k, getattr(self, k))
    if isinstance(self, UPatAny) and isinstance(ret, UPatAny): ret.alts = self.alts
    ret.name = name
    return ret

  # pattern sugar mirrors the UOp constructors
  def alu(self, op: Ops, *src: UPat) -> UPat:
    asrc = (self, *src)
    return UPat(op, dtypes.bool if op in GroupOp.Comparison else None,
                list(asrc) if op in GroupOp.Commutative else asrc)
  def const_like(self, b: Any) -> UPat: return UPat.const(self.dtype, b)
  def cast(self, dtype: DType | None = None, name: str | None = None) -> UPat:
    return UPat(Ops.CAST, dtype, (self,), name=name)
  def bitcast(self, dtype: DType | None = None) -> UPat: return UPat(Ops.BITCAST, dtype, (self,))
  def index(self, *idx: UPat, name: str | None = None) -> UPat: return UPat(Ops.INDEX, None, (self, *idx), name=name)
  def load(self, *src: UPat, name: str | None = None) -> UPat: return UPat(Ops.LOAD, None, (self, *src), name=name)
  def store(self, *src: UPat, name: str | None = None) -> UPat:
    return UPat(Ops.STORE, dtypes.void, (self, *src), name=name)
  def gep(self, i: tuple[int, ...] | None = None, name: str | None = None) -> UPat:
    return UPat(Ops.GEP, None, (self,), i, name)
  def reduce(self, *src: UPat, arg: Any = None, name: str | None = None) -> UPat:
    return UPat(Ops.REDUCE, None, (self, *src), arg, name, allow_any_len=not src)

  def match(self, uop: UOp, store: dict[str, UOp]) -> list[dict[str, UOp]]:
    if self.op is not None and uop.op not in self.op: return []
    if self.dtype is not None and uop.dtype not in self.dtype and uop.dtype.scalar() not in self.dtype: return []
    if self.arg is not None and self.arg is not uop.arg and not _arg_eq(self.arg, uop.arg): return []
    if self.name is not None:
      if (prev := store.get(self.name)) is None: store = {**store, self.name: uop}
      elif prev is not uop: return []
    if self._src is None: return [store]
    # NOTE: one store in hand is the common case: its matches are the next stores as they are (no list rebuilt)
    if isinstance(self._src, UPat):
      stores = [store]
      for s in uop.src:
        stores = self._src.match(s, stores[0]) if len(stores) == 1 else \
          [ns for st in stores for ns in self._src.match(s, st)]
        if not stores: return []
      return stores
    res: list[dict[str, UOp]] = []
    for alt in self._src:
      if len(uop.src) != len(alt) and not (self.allow_any_len and len(uop.src) >= len(alt)): continue
      stores = [store]
      for p, s in zip(alt, uop.src):
        stores = p.match(s, stores[0]) if len(stores) == 1 else [ns for st in stores for ns in p.match(s, st)]
        if not stores: break
      res.extend(stores)
    return res
  def __repr__(self) -> str:
    ops = "None" if self.op is None else "{" + ", ".join(str(o) for o in sorted(self.op)) + "}"
    return f"UPat({ops}, arg={self.arg!r}, name={self.name!r}, src={self._src!r})"

def _arg_eq(a: Any, b: Any) -> bool:
  if type(a) is float and type(b) is float and math.isnan(a): return math.isnan(b)
  try: return bool(a == b)
  except (TypeError, ValueError): return False

class UPatAny(UPat):
  """Matches if any of its alternatives matches."""
  __slots__ = ("alts",)
  def __init__(self, *pats: UPat):
    ops = frozenset().union(*(p.op for p in pats if p.op is not None)) if all(p.op is not None for p in pats) else None
    super().__init__(ops, location=pats[0].location)
    self.alts = pats
  def match(self, uop: UOp, store: dict[str, UOp]) -> list[dict[str, UOp]]:
    ret = [ns for p in self.alts for ns in p.match(uop, store)]
    if self.name is not None:
      ret = [({**s, self.name: uop} if s.get(self.name) is None else s) for s in ret if s.get(self.name, uop) is uop]
    return ret

# ---- PatternMatcher ----

@dataclass
class Rule:
  pat: UPat
  fn: Callable[..., Any]
  has_ctx: bool
  index: int
  @functools.cached_property
  def label(self) -> str:
    """describe(), once: the key of the rule's TRACK_MATCH_STATS entry, looked up on every attempt."""
    return self.describe()
  def describe(self) -> str:
    code = getattr(self.fn, "__code__", None)
    where = f"{code.co_filename.split('/')[-1]}:{code.co_firstlineno}" if code is not None else self.pat.location
    return f"rule #{self.index} {getattr(self.fn, '__name__', '?')} ({where})"

def _takes_ctx(fn: Callable[..., Any]) -> bool:
  """Whether a rule's function names a `ctx` parameter. NOTE: memoized per function: matchers built per kernel (`a + b`
  in codegen) would otherwise inspect the signature of every rule of both again, for every kernel."""
  try: return _ctx_memo[fn]
  except (KeyError, TypeError): pass
  try: ret = "ctx" in inspect.signature(fn).parameters
  except (TypeError, ValueError): ret = False
  try: _ctx_memo[fn] = ret
  except TypeError: pass  # NOTE: an unhashable callable is inspected every time
  return ret
_ctx_memo: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()

# NOTE: a dict keeps insertion order, so live_matchers() lists the oldest first
_live_matchers: weakref.WeakKeyDictionary[PatternMatcher, None] = weakref.WeakKeyDictionary()

def live_matchers() -> list[PatternMatcher]:
  """Every PatternMatcher alive, in the order they were made: a tool that changes rules in place finds them here."""
  return list(_live_matchers)

class PatternMatcher:
  """Rules indexed by op. A rule's function gets the captures as keyword args (and `ctx` if it names it)
  and returns a new UOp or None."""
  def __init__(self, patterns: Sequence[tuple[UPat, Callable[..., Any]]]):
    self.patterns = list(patterns)
    _live_matchers[self] = None
    self.rules: list[Rule] = []
    self.pdict: dict[Ops, list[tuple[UPat, Callable[..., Any], frozenset[Ops], bool, int]]] = {}
    for i, (p, fn) in enumerate(self.patterns):
      if p.op is None:
        raise ValueError(f"PatternMatcher: rule #{i} at {p.location} needs an op at the top of its pattern")
      has_ctx = _takes_ctx(fn)
      self.rules.append(Rule(p, fn, has_ctx, i))
      for o in p.op: self.pdict.setdefault(o, []).append((p, fn, p.early_reject, has_ctx, i))
  def __add__(self, more: PatternMatcher) -> PatternMatcher:
    # NOTE: a sum is kept per pair of operands as their rules are now: codegen adds `symbolic + pm_expand` for every
    # kernel, and a new matcher each time also described each rule again for TRACK_MATCH_STATS. An operand given other
    # rules in place (__init__ again) has a new `patterns` list, so its sum is made again
    sums: weakref.WeakKeyDictionary[PatternMatcher, tuple[list[Any], list[Any], PatternMatcher]] = \
      self.__dict__.setdefault("_sums", weakref.WeakKeyDictionary())
    if (hit := sums.get(more)) is not None and hit[0] is self.patterns and hit[1] is more.patterns: return hit[2]
    ret = PatternMatcher(self.patterns + more.patterns)
    sums[more] = (self.patterns, more.patterns, ret)
    return ret
  def __len__(self) -> int: return len(self.patterns)
  def rewrite(self, uop: UOp, ctx: Any = None) -> UOp | None: return self._rewrite(uop, ctx)[0]
  def _rewrite(self, uop: UOp, ctx: Any) -> tuple[UOp | None, int]:
    rules = self.pdict.get(uop.op)
    if rules is None: return None, -1
    # NOTE: the sources' ops only once a rule needs them (most have no early reject)
    ler: set[Ops] | None = None
    for p, fn, er, has_ctx, i in rules:
      if er:
        if ler is None: ler = {u.op for u in uop.src}
        if not er <= ler: continue
      for m in p.match(uop, {}):
        if (ret := fn(ctx=ctx, **m) if has_ctx else fn(**m)) is not None and ret is not uop: return ret, i
    return None, -1
  def _rewrite_tracked(self, uop: UOp, ctx: Any, stats: dict[str, list[float]],
                       rows: dict[int, list[float]] | None = None) -> tuple[UOp | None, int]:
    """_rewrite, counting each rule's matches, attempts and seconds in `stats` (its row cached in `rows` by index)."""
    if (rules := self.pdict.get(uop.op)) is None: return None, -1
    ler = {u.op for u in uop.src}
    if rows is None: rows = {}
    # NOTE: one clock read per attempt: each rule's time runs from the end of the previous attempt to the end of its own
    st = time.perf_counter()
    for p, fn, er, has_ctx, i in rules:
      ret = None
      if er <= ler:
        for m in p.match(uop, {}):
          if (ret := fn(ctx=ctx, **m) if has_ctx else fn(**m)) is not None and ret is not uop: break
          ret = None
      if (rs := rows.get(i)) is None: rs = rows[i] = stats.setdefault(self.rules[i].label, [0, 0, 0.0])
      rs[0] += ret is not None
      rs[1] += 1
      rs[2] += (now := time.perf_counter()) - st
      st = now
      if ret is not None: return ret, i
    return None, -1

# per pass name, per rule: [matches, attempts, seconds]
match_stats: dict[str, dict[str, list[float]]] = {}

def print_match_stats() -> None:
  for pname, rules in sorted(match_stats.items()):
    print(f"pass {pname}")
    for rname, (m, a, t) in sorted(rules.items(), key=lambda kv: -kv[1][2]):
      print(f"  {int(m):8d} / {int(a):8d}  {t*1e3:9.2f} ms  {rname}")

if int(TRACK_MATCH_STATS.value) >= 2: atexit.register(print_match_stats)

# ---- graph_rewrite ----

class RewriteNotConverging(RuntimeError):
  """A graph_rewrite that would never finish: a cycle of rewrites, growth without end, or a livelock."""

class _Rewriter:
  def __init__(self, pm: PatternMatcher, ctx: Any, name: str, bottom_up: bool, n_nodes: int | UOp):
    self.pm, self.ctx, self.name, self.bottom_up = pm, ctx, name, bottom_up
    self.replace: dict[UOp, UOp] = {}
    self.on_stack: set[UOp] = set()
    self.steps = 0
    # NOTE: n_nodes may be the root, counted only once the steps pass 100_000 (the least limit): a walk of the whole
    # graph per graph_rewrite, for a limit that almost never matters, is not paid up front
    self.fixed_limit = int(REWRITE_STEP_LIMIT.value)
    self.limit: int = self.fixed_limit or (max(100_000, 100 * n_nodes) if isinstance(n_nodes, int) else 100_000)
    self.hits: collections.Counter[int] = collections.Counter()
    self.n_nodes = n_nodes
    self.stats = match_stats.setdefault(name, {}) if TRACK_MATCH_STATS else None
    self.rows: dict[int, list[float]] = {}  # rule index -> its row of self.stats

  def apply(self, u: UOp) -> UOp | None:
    ret, ri = self.pm._rewrite(u, self.ctx) if self.stats is None else \
      self.pm._rewrite_tracked(u, self.ctx, self.stats, self.rows)
    if ret is None: return None
    if not isinstance(ret, UOp):
      raise TypeError(f"graph_rewrite {self.name!r}: {self.pm.rules[ri].describe()} returned {type(ret).__name__}, "
                      "not a UOp")
    self.steps += 1
    self.hits[ri] += 1
    self.last_rule = ri
    if self.steps > self.limit and not self.fixed_limit and not isinstance(self.n_nodes, int):
      self.n_nodes = len(self.n_nodes.toposort())
      self.limit = max(self.limit, 100 * self.n_nodes)
    if self.steps > self.limit:
      top = ", ".join(f"{self.pm.rules[i].describe()} x{n}" for i, n in self.hits.most_common(3))
      raise RewriteNotConverging(f"graph_rewrite {self.name!r} did not converge: {self.steps} rule applications "
                                 f"on a graph of {self.n_nodes} nodes (growth without end, or a livelock). "
                                 f"Rules that fired most: {top}. "
                                 "Raise REWRITE_STEP_LIMIT if the graph is really this large.")
    return ret

  def cycle(self, node: UOp, ri: int) -> RewriteNotConverging:
    return RewriteNotConverging(f"graph_rewrite {self.name!r}: {self.pm.rules[ri].describe()} rewrote a node "
                                "into a graph that contains a node still being rewritten (a cycle of rewrites, "
                                f"or growth without end). The node: {_short_repr(node, 1)}")

  def finish(self, n: UOp, final: UOp, *others: UOp) -> None:
    self.replace[n] = final
    self.replace.setdefault(final, final)
    self.on_stack.discard(n)
    for o in others: self.on_stack.discard(o)

  def run(self, root: UOp) -> UOp:
    if hooks.rewrite_start:
      for fn in hooks.rewrite_start: fn(self, root)
    replace, on_stack, pdict, apply = self.replace, self.on_stack, self.pm.pdict, self.apply
    # (original node, stage, node being worked on, node to release from on_stack when done)
    stack: list[tuple[UOp, int, UOp, UOp]] = [(root, 0, root, root)]
    while stack:
      n, stage, x, extra = stack.pop()
      if stage == 0:
        if n in replace: continue
        if n in on_stack: raise self.cycle(n, getattr(self, "last_rule", -1))
        on_stack.add(n)
        if self.bottom_up:
          seen = {n}
          while (ret := apply(x)) is not None:
            if ret in seen or ret in on_stack: raise self.cycle(ret, self.last_rule)
            if ret in replace: break
            seen.add(ret)
            x = ret
          if ret is not None:
            self.finish(n, replace[ret], x)
            continue
          on_stack.add(x)
        # NOTE: a node whose sources are all done goes on to stage 1 at once (pushing it and popping it straight back
        # is the same order of work)
        if (todo := [(s, 0, s, s) for s in reversed(x.src) if s not in replace]):
          stack.append((n, 1, x, x))
          stack.extend(todo)
          continue
        stage, extra = 1, x
      if stage == 1:
        nsrc = tuple([replace[s] for s in x.src])
        # NOTE: UOp compares by identity (no __eq__), so tuple equality is "every source is the same node"
        cur = x if nsrc == x.src else x.replace(src=nsrc)
        if cur is not x and cur in replace:
          self.finish(n, replace[cur], x)
          continue
        if self.bottom_up:
          # a rebuilt node is matched again from the top, like a fresh node
          # NOTE: x may be what n was rewritten to at the top, so it leaves on_stack too
          if cur is x: self.finish(n, x, x)
          else: stack.extend([(n, 2, cur, x), (cur, 0, cur, cur)])
          continue
        # NOTE: an op without rules in the matcher is not an attempt (apply would return None without counting)
        if cur.op not in pdict or (ret := apply(cur)) is None:
          # NOTE: finish(n, cur) inline: the path most nodes take
          replace[n] = cur
          replace.setdefault(cur, cur)
          on_stack.discard(n)
          continue
        if ret in replace:
          self.finish(n, replace[ret], cur)
          continue
        if ret in on_stack or ret is cur: raise self.cycle(ret, self.last_rule)
        on_stack.add(cur)
        stack.extend([(n, 2, ret, cur), (ret, 0, ret, ret)])
      else:
        self.finish(n, replace[x], extra)
    return replace[root]

def graph_rewrite(sink: UOp, pm: PatternMatcher, ctx: Any = None, bottom_up: bool = False,
                  name: str | None = None) -> UOp:
  """Rewrite the whole graph under `sink` to a fixed point of `pm`, memoized. Sources are rewritten before their users
  unless `bottom_up` (then each node is rewritten before its sources).
  A non-terminating rewrite raises RewriteNotConverging."""
  pname = name or "unnamed"
  rw = _Rewriter(pm, ctx, pname, bottom_up, sink)
  out = rw.run(sink)
  if hooks.rewrite_done:
    for fn in hooks.rewrite_done: fn(pname, sink, out)
  return out

def graph_rewrite_map(sink: UOp, pm: PatternMatcher, ctx: Any = None, bottom_up: bool = False,
                      name: str | None = None) -> dict[UOp, UOp]:
  """Like graph_rewrite, but returns what every node of the input graph became."""
  pname = name or "unnamed"
  topo = sink.toposort()
  rw = _Rewriter(pm, ctx, pname, bottom_up, len(topo))
  out = rw.run(sink)
  if hooks.rewrite_done:
    for fn in hooks.rewrite_done: fn(pname, sink, out)
  return {u: rw.replace.get(u, u) for u in topo}

# ---- consumers ----

def lanes_alike(lanes: Sequence[UOp]) -> bool:
  """Every lane is lane 0's op with its arg, dtype and operand dtypes: the lanes are one vector op of VECTORIZEs of
  their operands. NOTE: the operand dtypes too: a CAST's source dtype is not implied by its own (one lane can cast a
  float64 LOAD where the others cast a float32 ALU result once a lane's arithmetic folded away)."""
  s0 = lanes[0]
  return all(s.op is s0.op and s.arg == s0.arg and s.dtype is s0.dtype and len(s.src) == len(s0.src) and
             all(x.dtype == y.dtype for x, y in zip(s.src, s0.src)) for s in lanes)

def consumer_map(root: UOp) -> dict[UOp, list[UOp]]:
  """For every node under root, the nodes that use it (in toposort order)."""
  ret: dict[UOp, list[UOp]] = {}
  for u in root.toposort():
    ret.setdefault(u, [])
    for s in u.src: ret.setdefault(s, []).append(u)
  return ret

def sint_to_uop(x: int | UOp, dtype: DType = dtypes.index) -> UOp:
  return UOp.const(dtype, x) if isinstance(x, int) else x

def identity_element(op: Ops, dt: DType) -> Any:
  """The value a REDUCE with `op` starts from (and the value of a reduce over nothing)."""
  if op is Ops.ADD: return 0
  if op is Ops.MUL: return 1
  if op is Ops.MAX: return dtypes.min(dt)
  raise NotImplementedError(f"REDUCE with {op} has no identity element")

__all__ = ["UOp", "UPat", "PatternMatcher", "graph_rewrite", "graph_rewrite_map", "Ops", "GroupOp", "AxisType",
           "RewriteNotConverging", "Metadata", "consumer_map", "identity_element", "match_stats", "live_matchers",
           "argkey", "dtypes", "DType", "PtrDType", "AddrSpace", "Invalid", "argfix", "all_int", "cmod", "Iterator"]
