"""Random whole tensor programs through the public `Tensor` API, run on CPU and PYTHON and checked against numpy.

A program is a list of steps `vN = <expr>`, each kept twice: as Tensor code and as the same computation in numpy. The
builder tracks, for every value, its shape, dtype, a bound on its magnitude and a bound on its rounding error, and
draws only steps whose result is well defined and stable: no float->int cast of an inexact value, no comparison of
inexact floats, no integer overflow, no NaN from a domain error. So any difference beyond the error bound is a bug of
the compiler (or of the front end), never of the numerics.

`build_tensor_program(ch)` draws one from a `fuzz.strategies.Chooser`; `tensor_programs()` is the hypothesis strategy;
`check_program(prog)` runs it and raises `ProgramMismatch` (with a runnable reproducer, `prog.source()`) on the first
difference. `python -m fuzz.gen.tensor_programs -n 1000 --seed 0` runs a seeded loop outside pytest.

One program in four is sharded: its inputs are placed on SHARD_DEVICES devices of the device it runs on (each split on
an axis whose size the device count divides, or replicated), so every step runs through the multi-device pass
(tinygrad/schedule/multi.py) while the numpy twin is the same program on one array.
"""
from __future__ import annotations
import functools, math, re, sys
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence
import numpy as np
from hypothesis import strategies as st
from tinygrad.dtype import DType, dtypes
from fuzz.gen.choosers import Chooser, DrawChooser, RandomChooser
from fuzz.oracles.differential import compare_outputs, TOLERANCE

class ProgramMismatch(AssertionError):
  """A tensor program gave a different result (or raised) on a device, compared with numpy."""

# ---- values and programs ----

DTYPES = (dtypes.float32, dtypes.float16, dtypes.int32, dtypes.bool)
NP_DTYPE = {dtypes.float32: "np.float32", dtypes.float16: "np.float16", dtypes.int32: "np.int32",
            dtypes.bool: "np.bool_"}
TG_DTYPE = {dtypes.float32: "dtypes.float32", dtypes.float16: "dtypes.float16", dtypes.int32: "dtypes.int32",
            dtypes.bool: "dtypes.bool"}
# unit roundoff of each float dtype
EPS = {dtypes.float32: 2.0 ** -24, dtypes.float16: 2.0 ** -11}
# sizes biased to the edges: empty, one, primes, tile sizes +-1
EDGE_SIZES = (0, 1, 1, 2, 3, 4, 5, 7, 8, 9, 13, 15, 16, 17)
MAX_NUMEL = 300        # the PYTHON interpreter runs every element in Python
# CPU-only runs: sizes and element counts where the heuristics upcast, unroll and split into THREADs
BIG_SIZES = EDGE_SIZES + (31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257)
BIG_NUMEL = 1 << 17
SHARD_DEVICES = 2      # the devices a sharded program's inputs are placed on
INT_MAX = 2 ** 31      # int32 arithmetic wraps (two's complement, as numpy): any int op is allowed, bounds saturate
FLOAT_LIMIT = {dtypes.float32: 1e6, dtypes.float16: 2e3}

@dataclass(frozen=True)
class Val:
  """What the builder knows about a value: shape, dtype, |value| <= bound, |computed - exact| <= err."""
  shape: tuple[int, ...]
  dtype: DType
  bound: float
  err: float = 0.0
  @property
  def numel(self) -> int: return math.prod(self.shape)
  @property
  def exact(self) -> bool: return self.err == 0.0

@dataclass
class TensorProgram:
  """Values v0, v1, ... in order of definition: each an input (a numpy array) or a step (Tensor code, numpy code) over
  earlier values; `outputs` are realized together."""
  defs: list[np.ndarray | tuple[str, str]] = field(default_factory=list)
  vals: list[Val] = field(default_factory=list)
  outputs: list[int] = field(default_factory=list)
  # a sharded program: input number -> its split axis (None: replicated); an input not named is replicated
  shard: dict[int, int | None] | None = None

  def placement(self, device: str, devices: Sequence[str] | None = None) -> str | tuple[str, ...]:
    """Where the program runs: `device`, or for a sharded program the device set (`devices`, else shard_devices)."""
    return device if self.shard is None else tuple(devices or shard_devices(device))

  def source(self, device: str = "CPU", devices: Sequence[str] | None = None) -> str:
    """A runnable reproducer: the Tensor program, with its inputs, on `device` (a sharded one on `devices`)."""
    where = self.placement(device, devices)
    lines = ["import numpy as np", "from tinygrad import Tensor", "from tinygrad.dtype import dtypes",
             f"DEVICE = {where!r}"] + TG_HELPERS.strip().splitlines()
    for i, d in enumerate(self.defs):
      if isinstance(d, np.ndarray):
        arr = f"np.array({d.ravel().tolist()!r}, dtype={NP_DTYPE[_dtype_of(d)]}).reshape({d.shape})"
        lines.append(f"v{i} = Tensor({arr}, device=DEVICE)" if self.shard is None else
                     f"v{i} = Tensor({arr}, device=DEVICE[0]).shard(DEVICE, {self.shard.get(i)!r})")
      else: lines.append(f"v{i} = {d[0]}")
    outs = ", ".join(f"v{o}" for o in self.outputs)
    lines.append(f"Tensor.realize({outs})" if len(self.outputs) > 1 else f"v{self.outputs[0]}.realize()")
    lines += [f"print(v{o}.numpy())" for o in self.outputs]
    return "\n".join(lines)
  def __repr__(self) -> str: return "TensorProgram(\n" + self.source() + "\n)"

def shard_devices(device: str, n: int = SHARD_DEVICES) -> tuple[str, ...]:
  """n devices of `device`'s backend for a sharded program: `device` itself, then indices 1.. of its backend."""
  base = device.split(":")[0]
  return (device,) + tuple(f"{base}:{i}" for i in range(1, n))

def _dtype_of(a: np.ndarray) -> DType:
  return {np.dtype(np.float32): dtypes.float32, np.dtype(np.float16): dtypes.float16, np.dtype(np.int32): dtypes.int32,
          np.dtype(np.bool_): dtypes.bool}[a.dtype]

# ---- numpy side: the semantics the Tensor API documents ----

def _np_reduce(op: str, x: np.ndarray, axis: tuple[int, ...] | None, keepdim: bool) -> np.ndarray:
  if op == "sum":
    if x.dtype == np.float16: return np.asarray(np.sum(x, axis=axis, keepdims=keepdim, dtype=np.float32), np.float16)
    return np.asarray(np.sum(x, axis=axis, keepdims=keepdim, dtype=np.int32 if x.dtype.kind in "ib" else x.dtype))
  if op == "prod":
    if x.dtype == np.float16: return np.prod(x, axis=axis, keepdims=keepdim, dtype=np.float32).astype(np.float16)
    return np.prod(x, axis=axis, keepdims=keepdim, dtype=np.int32 if x.dtype.kind in "ib" else x.dtype)
  if op in ("max", "min"):
    # NOTE: an empty reduction is the identity (Tensor._reduce): -inf / +inf, the int extremes, False / True
    big = True if x.dtype == np.bool_ else np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).max
    small = False if x.dtype == np.bool_ else -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    f, init = (np.max, small) if op == "max" else (np.min, big)
    return np.asarray(f(x, axis=axis, keepdims=keepdim, initial=init)).astype(x.dtype)
  if op == "mean":
    n = math.prod(x.shape[a] for a in (range(x.ndim) if axis is None else axis))
    # NOTE: Tensor.mean divides in the accumulator dtype (float32), then casts back (a half sum may overflow)
    xf = x if x.dtype.kind == "f" else x.astype(np.float32)
    s = np.sum(xf, axis=axis, keepdims=keepdim, dtype=np.float32)
    with np.errstate(all="ignore"): return np.asarray(s * np.float32(1 / n if n else math.nan)).astype(xf.dtype)
  raise ValueError(op)

def _np_floordiv(x: np.ndarray, y: Any) -> np.ndarray:
  with np.errstate(all="ignore"): return np.floor_divide(x, y)

def _np_mod(x: np.ndarray, y: Any) -> np.ndarray:
  with np.errstate(all="ignore"): return np.mod(x, y)

def _np_cast(x: np.ndarray, to: Any) -> np.ndarray:
  with np.errstate(all="ignore"): return (x != 0) if to is np.bool_ else np.asarray(x).astype(to)

def _np_pad(x: np.ndarray, pads: Sequence[tuple[int, int]], value: Any) -> np.ndarray:
  return np.pad(x, pads, constant_values=value)

def _np_relu(x: np.ndarray) -> np.ndarray:
  # NOTE: <= 0, not > 0: torch's relu passes a NaN through (a mean over no elements is one)
  return np.where(x <= 0, 0, x)

def _np_sigmoid(x: np.ndarray) -> np.ndarray:
  with np.errstate(all="ignore"): return (1 / (1 + np.exp(-x))).astype(x.dtype)

def _np_softmax(x: np.ndarray, axis: int) -> np.ndarray:
  if x.size == 0: return x
  with np.errstate(all="ignore"):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).astype(x.dtype)

def _np_setitem(x: np.ndarray, idx: Any, v: Any) -> np.ndarray:
  x = x.copy()
  x[idx] = v
  return x

# helpers of the Tensor side, defined the same way in the reproducer
# NOTE: the copy is an assign into a new empty buffer, not clone(): two clones of one value alias today (see
# tests/tensor/test_clone_aliasing.py), which would make every later write look like a miscompile
TG_HELPERS = """
def _setitem(t, idx, v):
  c = Tensor.empty(*t.shape, dtype=t.dtype, device=t.device)
  c.assign(t)
  c[idx] = v
  return c
def _grad(f, x, w):
  t = x.detach().clone()
  t.requires_grad = True
  return f(t).gradient(t, gradient=w)[0]
def _ix(values, shape):
  return Tensor(np.array(values, dtype=np.int32).reshape(shape), device=DEVICE)
"""

# ---- the newer API ops: their reference is torch (CPU), run on the numpy values in float64 ----

GRAD_OPS = ("roll", "tril", "triu", "gather", "scatter", "pad", "avg_pool2d", "conv2d", "einsum", "interpolate",
            "conv_transpose2d", "logsumexp")

def _torch_fn(src: str) -> Callable[..., Any]:
  """`lambda a, b, ...: <src>` with torch in scope. The text comes from this module's op table, never from a file."""
  import torch
  return eval(f"lambda a=None, b=None, c=None: {src}", {"torch": torch, "F": torch.nn.functional})

def _to_torch(x: Any) -> Any:
  import torch
  a = np.asarray(x)
  if a.dtype.kind == "f": return torch.from_numpy(a.astype(np.float64))
  if a.dtype == np.bool_: return torch.from_numpy(a.copy())
  return torch.from_numpy(a.astype(np.int64))

def _np_torch(src: str, out: Any, *args: Any) -> np.ndarray:
  """The value of torch `src` on the arrays `args` (as a, b, c), cast to numpy dtype `out`."""
  r = _torch_fn(src)(*[_to_torch(a) for a in args])
  with np.errstate(all="ignore"): return np.asarray(r.detach().numpy()).astype(out)

def _np_torch_grad(src: str, out: Any, x: Any, w: Any, *rest: Any) -> np.ndarray:
  """d sum(f(x) * w) / dx for f = torch `src` (x as a, the rest as b, c), in float64, cast to `out`."""
  import torch
  t = _to_torch(x).requires_grad_(True)
  y = _torch_fn(src)(t, *[_to_torch(a) for a in rest])
  g, = torch.autograd.grad(y, t, grad_outputs=_to_torch(w).to(y.dtype), allow_unused=True)
  return (np.zeros(np.shape(x)) if g is None else g.numpy()).astype(out)

NP_NAMESPACE: dict[str, Any] = {"np": np, "_setitem": _np_setitem, "_softmax": _np_softmax, "_reduce": _np_reduce,
                                "_floordiv": _np_floordiv, "_mod": _np_mod, "_cast": _np_cast, "_pad": _np_pad,
                                "_sigmoid": _np_sigmoid, "_relu": _np_relu, "_torch": _np_torch,
                                "_torch_grad": _np_torch_grad}

# ---- the builder ----

class _Builder:
  def __init__(self, ch: Chooser, max_steps: int = 8, dtypes_: Sequence[DType] = DTYPES, big: bool = False,
               max_numel: int | None = None):
    self.ch, self.prog, self.max_steps, self.dtypes = ch, TensorProgram(), max_steps, tuple(dtypes_)
    self.sizes: tuple[int, ...] = BIG_SIZES if big else EDGE_SIZES
    self.max_numel = BIG_NUMEL if big else MAX_NUMEL
    if max_numel is not None: self.max_numel = max_numel
    self.rng = np.random.default_rng(ch.integer(0, 2 ** 31))

  # -- helpers --
  def coin(self, n: int = 2) -> bool: return self.ch.integer(0, n - 1) == 0
  def name(self, i: int) -> str: return f"v{i}"
  def add(self, tg: str, npc: str, val: Val) -> int:
    # NOTE: bounds stay >= 1 so products of bounds only grow (and logs of them are defined); int32 bounds saturate
    bound = min(val.bound, INT_MAX) if val.dtype is dtypes.int32 else val.bound
    val = Val(val.shape, val.dtype, max(bound, 1.0), val.err)
    self.prog.defs.append((tg, npc))
    self.prog.vals.append(val)
    return len(self.prog.vals) - 1

  def shape(self, nd: int | None = None) -> tuple[int, ...]:
    nd = self.ch.integer(0, 4) if nd is None else nd
    s = [self.ch.choice(self.sizes) for _ in range(nd)]
    while math.prod(s) > self.max_numel: s[s.index(max(s))] //= 2
    return tuple(s)

  def input(self, shape: tuple[int, ...], dt: DType) -> int:
    """A new input of this shape and dtype: small values, sometimes integers (exact through sums), edge values."""
    kind, n = self.ch.integer(0, 3), math.prod(shape)
    if dt is dtypes.bool: a: np.ndarray = self.rng.integers(0, 2, n).astype(np.bool_)
    elif dt is dtypes.int32:
      hi = self.ch.choice([2, 10, 100, 1000, 2 ** 31 - 1])
      a = self.rng.integers(-hi - (hi > 1000), hi + 1, n).astype(np.int32)
      if self.coin(4) and n: a[self.rng.integers(0, n)] = self.ch.choice([-2 ** 31, 2 ** 31 - 1, -1])
    elif kind == 0: a = self.rng.integers(-8, 9, n).astype(np.float64)
    elif kind == 1: a = self.rng.choice(np.array([0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.0, 0.25, 3.0, -4.0]), n)
    else: a = self.rng.uniform(-4, 4, n)
    if dt in EPS: a = a.astype(np.float32 if dt is dtypes.float32 else np.float16)
    a = a.reshape(shape)
    bound = float(np.abs(a.astype(np.float64)).max()) if a.size and dt is not dtypes.bool else 1.0
    self.prog.defs.append(a)
    self.prog.vals.append(Val(shape, dt, max(bound, 1.0)))
    return len(self.prog.vals) - 1

  def pick(self, pred: Callable[[Val], bool] = lambda v: True) -> int | None:
    ok = [i for i, v in enumerate(self.prog.vals) if pred(v)]
    if not ok: return None
    # NOTE: prefer recent values so programs are chains, not forests of inputs
    return ok[-1] if self.coin(2) else self.ch.choice(ok)

  def broadcast_partner(self, v: Val, dt: DType) -> tuple[str, str, Val]:
    """A second operand for v: an existing value, a new input of a broadcastable shape, or a Python scalar."""
    k = self.ch.integer(0, 3)
    if k == 0:
      if dt is dtypes.bool: c: Any = bool(self.coin())
      elif dt is dtypes.int32: c = self.ch.integer(-9, 9)
      else: c = self.ch.choice([0.5, -1.0, 2.0, 3.0, -0.25, 0.0])
      npc = repr(c) if dt is dtypes.bool else f"{NP_DTYPE[dt]}({c!r})"
      return repr(c), npc, Val((), dt, max(abs(float(c)), 1.0))
    if k == 1 and (j := self.pick(lambda w: w.dtype is dt and _fits(w.shape, v.shape, self.max_numel))) is not None:
      return self.name(j), self.name(j), self.prog.vals[j]
    shape = list(v.shape[self.ch.integer(0, len(v.shape)):] if self.coin(3) else v.shape)
    for d in range(len(shape)):
      if self.coin(3): shape[d] = 1
    j = self.input(tuple(shape), dt)
    return self.name(j), self.name(j), self.prog.vals[j]

  # -- steps: each returns False when it does not apply to the value it drew --
  def step(self) -> bool:
    kinds: list[Callable[[], bool]] = [self.unary, self.binary, self.binary, self.compare, self.where, self.cast,
                                       self.reduce, self.reduce, self.movement, self.movement, self.movement,
                                       self.cat, self.getitem, self.setitem, self.composite, self.materialize,
                                       self.source, self.api, self.api, self.grad, self.grad]
    return self.ch.choice(kinds)()

  def unary(self) -> bool:
    i = self.pick(lambda v: v.dtype is not dtypes.bool)
    if i is None: return False
    v, x = self.prog.vals[i], self.name(i)
    if v.dtype is dtypes.int32:
      iops = [("-{x}", "-{x}", v.bound), ("{x}.abs()", "np.abs({x})", v.bound), ("~{x}", "~{x}", v.bound + 1),
              ("{x} >> 2", "{x} >> 2", v.bound), ("{x} * {x}", "{x} * {x}", v.bound ** 2),
              ("{x} << 3", "{x} << 3", v.bound * 8), ("{x} >> 31", "{x} >> 31", 1.0)]
      tg, npc, b = self.ch.choice(iops)
      self.add(tg.format(x=x), npc.format(x=x), Val(v.shape, v.dtype, b))
      return True
    eps, B, E = EPS[v.dtype], v.bound, v.err
    # (tensor, numpy, bound, error): the error is the input's error times the op's Lipschitz constant plus its rounding
    ops: list[tuple[str, str, float, float]] = [
      ("-{x}", "-{x}", B, E), ("{x}.abs()", "np.abs({x})", B, E),
      ("{x}.relu()", "_relu({x})", B, E),
      ("({x}.abs() + 1).sqrt()", "np.sqrt(np.abs({x}) + 1)", math.sqrt(B + 1), E / 2 + 4 * eps * (B + 2)),
      ("({x}.abs() + 1).log2()", "np.log2(np.abs({x}) + 1)", math.log2(B + 1) + 1, 1.5 * E + 8 * eps * (B + 2)),
      ("({x}.abs() + 1).reciprocal()", "1 / (np.abs({x}) + 1)", 1.0, E + 4 * eps * (B + 1)),
      ("{x}.sigmoid()", "_sigmoid({x})", 1.0, E / 4 + 8 * eps * (B + 1)),
    ]
    if B < 64: ops.append(("{x}.sin()", "np.sin({x})", 1.0, E + 16 * eps * (B + 1)))
    if B < 10: ops.append(("{x}.exp2()", "np.exp2({x})", 2 ** B, 2 ** B * (E + 8 * eps * (B + 1))))
    if B * B < FLOAT_LIMIT[v.dtype]: ops.append(("{x} * {x}", "{x} * {x}", B * B, 2 * B * E + 4 * eps * B * B))
    if v.exact:
      ops += [("{x}.floor()", "np.floor({x})", B + 1, 0.0), ("{x}.ceil()", "np.ceil({x})", B + 1, 0.0),
              ("{x}.trunc()", "np.trunc({x})", B, 0.0), ("{x}.round()", "np.round({x})", B + 1, 0.0)]
    tg, npc, b, e = self.ch.choice(ops)
    self.add(tg.format(x=x), npc.format(x=x), Val(v.shape, v.dtype, b, e))
    return True

  def binary(self) -> bool:
    i = self.pick()
    if i is None: return False
    v = self.prog.vals[i]
    y_tg, y_np, w = self.broadcast_partner(v, v.dtype)
    shape = _broadcast(v.shape, w.shape)
    if shape is None or math.prod(shape) > self.max_numel: return False
    # operands (tensor code, numpy code, bound, error, is a tensor); a scalar goes left sometimes (reflected operators)
    x, y = (self.name(i), self.name(i), v.bound, v.err, True), (y_tg, y_np, w.bound, w.err, y_tg.startswith("v"))
    if self.coin(4): x, y = y, x
    dt, (B1, E1, B2, E2) = v.dtype, (x[2], x[3], y[2], y[3])
    if dt is dtypes.bool:
      ops: list[tuple[str, str, float, float]] = [
        ("{x} & {y}", "{x} & {y}", 1, 0), ("{x} | {y}", "{x} | {y}", 1, 0), ("{x} ^ {y}", "{x} ^ {y}", 1, 0),
        ("{x} + {y}", "{x} | {y}", 1, 0), ("{x} * {y}", "{x} & {y}", 1, 0)]
    elif dt is dtypes.int32:
      ops = [("{x} + {y}", "{x} + {y}", B1 + B2, 0), ("{x} - {y}", "{x} - {y}", B1 + B2, 0),
             ("{x}.maximum({y})", "np.maximum({x}, {y})", max(B1, B2), 0),
             ("{x}.minimum({y})", "np.minimum({x}, {y})", max(B1, B2), 0),
             ("{x} // {y}", "_floordiv({x}, {y})", B1, 0), ("{x} % {y}", "_mod({x}, {y})", B2, 0),
             ("{x} & {y}", "{x} & {y}", max(B1, B2), 0), ("{x} | {y}", "{x} | {y}", 2 * max(B1, B2), 0),
             ("{x} ^ {y}", "{x} ^ {y}", 2 * max(B1, B2), 0)]
      ops.append(("{x} * {y}", "{x} * {y}", B1 * B2, 0))
    else:
      eps = EPS[dt]
      div = "{x} / ({y}.abs() + 1)" if y[4] else "{x} / (abs({y}) + 1)"
      ops = [("{x} + {y}", "{x} + {y}", B1 + B2, E1 + E2 + eps * (B1 + B2)),
             ("{x} - {y}", "{x} - {y}", B1 + B2, E1 + E2 + eps * (B1 + B2)),
             ("{x}.maximum({y})", "np.maximum({x}, {y})", max(B1, B2), max(E1, E2)),
             ("{x}.minimum({y})", "np.minimum({x}, {y})", max(B1, B2), max(E1, E2)),
             (div, "{x} / (np.abs({y}) + 1)", B1, E1 + B1 * E2 + 4 * eps * (B1 + 1) * (B2 + 1))]
      if B1 * B2 < FLOAT_LIMIT[dt]:
        ops.append(("{x} * {y}", "{x} * {y}", B1 * B2, E1 * B2 + E2 * B1 + 2 * eps * B1 * B2))
    tg, npc, b, e = self.ch.choice(ops)
    # NOTE: methods (maximum, //, ...) need a Tensor on the left; a Python scalar there only works with operators
    if not x[4] and tg.startswith("{x}."): return False
    self.add(tg.format(x=x[0], y=y[0]), npc.format(x=x[1], y=y[1]), Val(shape, dt, b, e))
    return True

  def compare(self) -> bool:
    i = self.pick(lambda v: v.exact)
    if i is None: return False
    v, x = self.prog.vals[i], self.name(i)
    y_tg, y_np, w = self.broadcast_partner(v, v.dtype)
    shape = _broadcast(v.shape, w.shape)
    if shape is None or not w.exact or math.prod(shape) > self.max_numel: return False
    ops = ["<", ">", "==", "!="] + (["<=", ">="] if v.dtype is not dtypes.bool else [])
    op = self.ch.choice(ops)
    self.add(f"({x} {op} {y_tg})", f"({x} {op} {y_np})", Val(shape, dtypes.bool, 1.0))
    return True

  def where(self) -> bool:
    c = self.pick(lambda v: v.dtype is dtypes.bool)
    if c is None: return False
    cv = self.prog.vals[c]
    dt = self.ch.choice([d for d in self.dtypes])
    a_tg, a_np, a = self.broadcast_partner(cv, dt)
    b_tg, b_np, b = self.broadcast_partner(cv, dt)
    shape = _broadcast(cv.shape, a.shape, b.shape)
    if shape is None or math.prod(shape) > self.max_numel: return False
    if not a_tg.startswith("v") and not b_tg.startswith("v"):
      a_tg = f"Tensor({a_tg}, dtype={TG_DTYPE[dt]}, device=DEVICE)"
    wrap = f"{NP_DTYPE[dt]}" if dt is not dtypes.bool else "np.bool_"
    self.add(f"{self.name(c)}.where({a_tg}, {b_tg})", f"np.where({self.name(c)}, {a_np}, {b_np}).astype({wrap})",
             Val(shape, dt, max(a.bound, b.bound), max(a.err, b.err)))
    return True

  def cast(self) -> bool:
    i = self.pick()
    if i is None: return False
    v, x = self.prog.vals[i], self.name(i)
    to = self.ch.choice([d for d in self.dtypes if d is not v.dtype])
    src_tg, src_np, B = x, x, v.bound
    if dtypes.is_float(v.dtype) and not dtypes.is_float(to):
      if not v.exact: return False
      if to is dtypes.int32 and B > 1000:
        # NOTE: a float out of int range is undefined in C; clip first
        src_tg, src_np, B = f"{x}.clip(-1000, 1000)", f"np.clip({x}, -1000, 1000)", 1000.0
    if to is dtypes.float16 and B > 60000: return False
    if to is dtypes.bool: b, e = 1.0, 0.0
    elif to is dtypes.int32: b, e = (B, 0.0)
    else: b, e = B, (v.err + EPS[to] * B if v.dtype is not dtypes.bool else 0.0)
    self.add(f"{src_tg}.cast({TG_DTYPE[to]})", f"_cast({src_np}, {NP_DTYPE[to]})", Val(v.shape, to, b, e))
    return True

  def axes(self, v: Val) -> tuple[str, tuple[int, ...] | None]:
    if not v.shape or self.coin(4): return "None", None
    if self.coin(2):
      a = self.ch.integer(0, len(v.shape) - 1)
      return (str(a - len(v.shape)) if self.coin() else str(a)), (a,)
    ax = tuple(sorted({self.ch.integer(0, len(v.shape) - 1) for _ in range(self.ch.integer(1, len(v.shape)))}))
    return repr(ax), ax

  def reduce(self) -> bool:
    i = self.pick()
    if i is None: return False
    v, x = self.prog.vals[i], self.name(i)
    ax_src, ax = self.axes(v)
    keep = self.coin()
    n = math.prod(v.shape[a] for a in (range(len(v.shape)) if ax is None else ax))
    shape = tuple(1 if ax is None or d in ax else s for d, s in enumerate(v.shape)) if keep else \
      tuple(s for d, s in enumerate(v.shape) if ax is not None and d not in ax)
    ops = ["max", "min"]
    if v.dtype is not dtypes.bool or self.coin(): ops += ["sum", "sum"]
    if v.dtype is not dtypes.bool: ops.append("mean")
    limit = math.inf if v.dtype is dtypes.int32 else FLOAT_LIMIT.get(v.dtype, 2.0)
    if v.dtype is dtypes.bool or n * math.log(v.bound) < math.log(limit): ops.append("prod")
    op = self.ch.choice(ops)
    dt = v.dtype if op not in ("sum", "prod") or v.dtype is not dtypes.bool else dtypes.int32
    if op == "mean" and not dtypes.is_float(dt): dt = dtypes.float32
    # NOTE: max/min of nothing is -inf/+inf for floats (the identity)
    if op in ("max", "min"): b, e = (v.bound if n or not dtypes.is_float(dt) else math.inf), v.err
    elif op == "prod":
      b = 1.0 if v.dtype is dtypes.bool else INT_MAX if v.dtype is dtypes.int32 else v.bound ** n
      e = n * b * (v.err + 2 * EPS.get(dt, 0.0))
    else:
      b = n * v.bound
      # NOTE: float sums accumulate in float32 (half too), then round to their dtype
      e = n * v.err + 2 * n * EPS[dtypes.float32] * b + (EPS[dt] * b if dt is dtypes.float16 else 0.0)
      if op == "mean":
        if dtypes.is_float(dt) and b > FLOAT_LIMIT[dtypes.float32]: return False
        # NOTE: the mean of nothing is NaN; an infinite bound keeps NaN away from the steps that need finite values
        b, e = (v.bound if n else math.inf), (e / n if n else 0.0) + 4 * EPS[dt] * v.bound
    if dtypes.is_float(dt) and math.isfinite(b) and b > FLOAT_LIMIT[dt]: return False
    if not dtypes.is_float(dt): e = 0.0
    self.add(f"{x}.{op}({ax_src}, keepdim={keep})", f"_reduce({op!r}, {x}, {ax!r}, {keep})", Val(shape, dt, b, e))
    return True

  def movement(self) -> bool:
    i = self.pick()
    if i is None: return False
    v, x = self.prog.vals[i], self.name(i)
    k = self.ch.integer(0, 5)
    nd = len(v.shape)
    if k == 0:
      shape = self.factor(v.numel, v.shape)
      self.add(f"{x}.reshape({shape})", f"{x}.reshape({shape})", Val(shape, v.dtype, v.bound, v.err))
    elif k == 1 and nd >= 2:
      order = list(range(nd))
      for a in range(nd - 1, 0, -1):
        b = self.ch.integer(0, a)
        order[a], order[b] = order[b], order[a]
      shape = tuple(v.shape[o] for o in order)
      self.add(f"{x}.permute({tuple(order)})", f"np.transpose({x}, {tuple(order)})",
               Val(shape, v.dtype, v.bound, v.err))
    elif k == 2:
      # expand: size-1 axes grow, sometimes a new leading axis
      lead = (self.ch.choice(self.sizes[:8]),) if self.coin(3) or not v.shape else ()
      shape = lead + tuple(self.ch.choice(self.sizes[:10]) if s == 1 and self.coin() else s for s in v.shape)
      if math.prod(shape) > self.max_numel or shape == v.shape: return False
      self.add(f"{x}.expand({shape})", f"np.broadcast_to({x}, {shape})", Val(shape, v.dtype, v.bound, v.err))
    elif k == 3 and nd:
      pads = tuple((self.ch.integer(0, 3), self.ch.integer(0, 3)) if self.coin() else (0, 0) for _ in v.shape)
      shape = tuple(s + a + b for s, (a, b) in zip(v.shape, pads))
      if math.prod(shape) > self.max_numel: return False
      val: Any = {dtypes.bool: True, dtypes.int32: self.ch.integer(-3, 3)}.get(v.dtype,
                                                                              self.ch.choice([0.0, 1.5, -2.0]))
      if self.coin(): val = {dtypes.bool: False, dtypes.int32: 0}.get(v.dtype, 0.0)
      bound = max(v.bound, abs(float(val)))
      self.add(f"{x}.pad({pads}, value={val!r})", f"_pad({x}, {pads}, {val!r})", Val(shape, v.dtype, bound, v.err))
    elif k == 4 and nd:
      arg = []
      for s in v.shape:
        a = self.ch.integer(0, s)
        arg.append((a, self.ch.integer(a, s)))
      shape = tuple(b - a for a, b in arg)
      sl = ", ".join(f"{a}:{b}" for a, b in arg)
      self.add(f"{x}.shrink({tuple(arg)})", f"{x}[{sl}]", Val(shape, v.dtype, v.bound, v.err))
    elif k == 5 and nd:
      ax = sorted({self.ch.integer(0, nd - 1) for _ in range(self.ch.integer(1, nd))})
      self.add(f"{x}.flip({tuple(ax)})", f"np.flip({x}, {tuple(ax)})", Val(v.shape, v.dtype, v.bound, v.err))
    else: return False
    return True

  def source(self) -> bool:
    """A tensor made from constants alone: full, arange (int or float), linspace, eye."""
    k, dt = self.ch.integer(0, 3), self.ch.choice(self.dtypes)
    big = self.max_numel > MAX_NUMEL
    if k == 0:
      shape = self.shape()
      c: Any = {dtypes.bool: self.coin(), dtypes.int32: self.ch.integer(-5, 5)}.get(dt,
                                                                                     self.ch.choice([0.0, 1.5, -3.0]))
      self.add(f"Tensor.full({shape}, {c!r}, dtype={TG_DTYPE[dt]}, device=DEVICE)",
               f"np.full({shape}, {c!r}, dtype={NP_DTYPE[dt]})", Val(shape, dt, abs(float(c))))
    elif k == 1:
      start, step = self.ch.integer(-20, 20), self.ch.choice([1, 1, 2, 3, -1, -7])
      n = self.ch.choice(self.sizes) + (self.ch.choice([0, 1000, 1024, 1025, 3000]) if big and self.coin(3) else 0)
      if self.coin(3) and dtypes.float32 in self.dtypes:
        a, st_ = float(start) / 2, step / 2
        self.add(f"Tensor.arange({a!r}, {a + n * st_!r}, {st_!r}, device=DEVICE)",
                 f"np.arange({n}, dtype=np.float32) * np.float32({st_!r}) + np.float32({a!r})",
                 Val((n,), dtypes.float32, abs(a) + abs(n * st_), 4 * EPS[dtypes.float32] * (abs(a) + abs(n * st_))))
      else:
        self.add(f"Tensor.arange({start}, {start + n * step}, {step}, device=DEVICE)",
                 f"np.arange({start}, {start + n * step}, {step}, dtype=np.int32)",
                 Val((n,), dtypes.int32, abs(start) + abs(n * step)))
    elif k == 2 and dtypes.float32 in self.dtypes:
      a, b, n = self.ch.integer(-4, 4), self.ch.integer(-4, 4), self.ch.choice(self.sizes)
      self.add(f"Tensor.linspace({a}, {b}, {n}, device=DEVICE)", f"np.linspace({a}, {b}, {n}, dtype=np.float32)",
               Val((n,), dtypes.float32, 4.0, 8 * EPS[dtypes.float32] * 4))
    elif k == 3:
      n, m = self.ch.choice(self.sizes), self.ch.choice(self.sizes)
      if n * m > self.max_numel: return False
      self.add(f"Tensor.eye({n}, {m}, dtype={TG_DTYPE[dt]}, device=DEVICE)", f"np.eye({n}, {m}, dtype={NP_DTYPE[dt]})",
               Val((n, m), dt, 1.0))
    else: return False
    return True

  def materialize(self) -> bool:
    """contiguous() or realize() in the middle of a program: later steps read a buffer instead of fusing."""
    i = self.pick()
    if i is None: return False
    v, x = self.prog.vals[i], self.name(i)
    self.add(f"{x}.{self.ch.choice(['contiguous', 'realize'])}()", x, v)
    return True

  def composite(self) -> bool:
    """Front-end compositions that stress the scheduler: matmul, cumsum, argmax/argmin, softmax."""
    i = self.pick(lambda v: len(v.shape) > 0)
    if i is None: return False
    v, x = self.prog.vals[i], self.name(i)
    k, nd, dt = self.ch.integer(0, 3), len(v.shape), v.dtype
    if k == 0 and dtypes.is_float(dt):
      m = self.ch.choice(self.sizes[:10])
      shape = v.shape[:-1] + (m,)
      if math.prod(shape) > self.max_numel: return False
      j = self.input((v.shape[-1], m), dt)
      w, n = self.prog.vals[j], v.shape[-1]
      b = max(n, 1) * v.bound * w.bound
      if b > FLOAT_LIMIT[dt]: return False
      e = n * (v.err * w.bound + 2 * EPS[dt] * v.bound * w.bound) + EPS[dt] * b
      # NOTE: numpy's half matmul accumulates in half; the Tensor API sums half in float32, so compare in float32
      npc = f"({x}.astype(np.float32) @ {self.name(j)}.astype(np.float32)).astype({NP_DTYPE[dt]})"
      self.add(f"{x} @ {self.name(j)}", npc, Val(shape, dt, b, e))
    elif k == 1 and dt is not dtypes.bool:
      a = self.ch.integer(0, nd - 1)
      n = v.shape[a]
      b = n * v.bound
      if dt is not dtypes.int32 and b > FLOAT_LIMIT[dt]: return False
      e = 0.0 if dt is dtypes.int32 else n * v.err + 2 * n * EPS[dt] * b + EPS[dt] * b
      npc = f"np.cumsum({x}, axis={a}, dtype=np.float32).astype({NP_DTYPE[dt]})" if dtypes.is_float(dt) else \
        f"np.cumsum({x}, axis={a}, dtype=np.int32)"
      self.add(f"{x}.cumsum({a})", npc, Val(v.shape, dt, b, e))
    elif k == 2 and v.exact and dt is not dtypes.bool:
      a = self.ch.integer(0, nd - 1)
      if v.shape[a] == 0: return False
      f = self.ch.choice(["argmax", "argmin"])
      shape = v.shape[:a] + v.shape[a + 1:]
      self.add(f"{x}.{f}({a})", f"np.{f}({x}, axis={a}).astype(np.int32)", Val(shape, dtypes.int32, v.shape[a]))
    elif k == 3 and dtypes.is_float(dt) and v.bound < 30:
      a = self.ch.integer(0, nd - 1)
      e = 2 * v.err + 32 * EPS[dt] * (v.bound + 1)
      npc = f"_softmax({x}, {a})"
      self.add(f"{x}.softmax({a})", npc, Val(v.shape, dt, 1.0, e))
    else: return False
    return True

  # -- the newer API ops against torch (API_OPS, below the builder) --
  def api_op(self, v: Val, x: str) -> ApiStep | None:
    """One op of API_OPS, drawn, on value v (named x); None when the drawn op does not apply to v."""
    op = API_OPS[self.ch.integer(0, len(API_OPS) - 1)]
    # NOTE: torch's pooling, convolutions, padding modes and interpolation refuse empty axes
    if op.nonempty and 0 in v.shape: return None
    d = self.ch.integer(0, len(v.shape) - 1) if v.shape else 0
    return op.build(self, v, x, d) if op.applies(v, d) else None

  def api(self) -> bool:
    """A newer API op (sort, topk, cummax, roll, tril/triu, gather, scatter, pad modes, pooling, conv2d, einsum,
    interpolate, conv_transpose2d, logsumexp) against torch."""
    i = self.pick(lambda v: len(v.shape) > 0)
    if i is None: return False
    v = self.prog.vals[i]
    step = self.api_op(v, self.name(i))
    if step is None: return False
    args = ", ".join([self.name(i), *step.extra])
    self.add(step.tg, f"_torch({step.torch!r}, {NP_DTYPE[step.dtype]}, {args})",
             Val(step.shape, step.dtype, step.bound, step.err))
    return True

  def grad(self) -> bool:
    """The gradient of sum(f(x) * w) with respect to x, for a newer API op f (or a composite), against torch."""
    i = self.pick(lambda v: len(v.shape) > 0 and v.dtype is dtypes.float32 and v.exact)
    if i is None: return False
    v = self.prog.vals[i]
    step = self.api_op(v, "t")
    if step is None: return False
    dt = step.dtype
    # NOTE: ops whose gradient depends on which of equal values wins (sort, topk, cummax, max_pool) are left out: torch
    # does not promise tinygrad's tie order
    if dt is not dtypes.float32 or not any(f".{n}(" in step.tg for n in GRAD_OPS): return False
    w = self.input(step.shape, dtypes.float32)
    wv = self.prog.vals[w]
    n = max(1, math.prod(step.shape))
    # NOTE: the gradient sums w (times the op's derivative) over every output an input feeds: a bound of that sum
    gb = n * wv.bound * max(step.bound, 1.0)
    ge = n * (wv.bound * step.err + 4 * EPS[dt] * wv.bound * max(step.bound, 1.0)) + EPS[dt] * gb
    if gb > FLOAT_LIMIT[dt]: return False
    args = ", ".join([self.name(i), self.name(w), *step.extra])
    self.add(f"_grad(lambda t: {step.tg}, {self.name(i)}, {self.name(w)})",
             f"_torch_grad({step.torch!r}, np.float32, {args})", Val(v.shape, dtypes.float32, gb, ge))
    return True

  def factor(self, n: int, like: tuple[int, ...]) -> tuple[int, ...]:
    """A random shape with n elements (0 elements: some axis 0), up to 4 axes."""
    if n == 0:
      s = list(self.shape(self.ch.integer(1, 4)))
      s[self.ch.integer(0, len(s) - 1)] = 0
      return tuple(s)
    dims: list[int] = []
    rest = n
    for p in (2, 3, 5, 7, 11, 13, 17):
      while rest % p == 0:
        dims.append(p)
        rest //= p
    if rest > 1: dims.append(rest)
    out = [1] * self.ch.integer(1, 4)
    for d in dims: out[self.ch.integer(0, len(out) - 1)] *= d
    if self.coin(3): out.insert(self.ch.integer(0, len(out)), 1)
    return tuple(out)

  def cat(self) -> bool:
    i = self.pick(lambda v: len(v.shape) > 0)
    if i is None: return False
    v, x = self.prog.vals[i], self.name(i)
    d = self.ch.integer(0, len(v.shape) - 1)
    others = []
    for _ in range(self.ch.integer(1, 2)):
      shape = v.shape[:d] + (self.ch.choice(self.sizes[:9]),) + v.shape[d + 1:]
      j = self.pick(functools.partial(_same, shape, v.dtype)) if self.coin() else None
      others.append(j if j is not None else self.input(shape, v.dtype))
    shape = v.shape[:d] + (v.shape[d] + sum(self.prog.vals[j].shape[d] for j in others),) + v.shape[d + 1:]
    if math.prod(shape) > self.max_numel: return False
    ws = [self.prog.vals[j] for j in others]
    names = ", ".join(self.name(j) for j in others)
    self.add(f"{x}.cat({names}, dim={d})", f"np.concatenate(({x}, {names}), axis={d})",
             Val(shape, v.dtype, max([v.bound] + [w.bound for w in ws]), max([v.err] + [w.err for w in ws])))
    return True

  def index_src(self, shape: tuple[int, ...]) -> str:
    """An index for a tensor of this shape: ints, slices (steps, negative steps, out of range ends), ..., and at most
    one list of ints (an advanced index, numpy semantics)."""
    idx: list[str] = []
    adv = self.ch.integer(0, len(shape) - 1) if self.coin(4) else -1
    for d, s in enumerate(shape):
      k = self.ch.integer(0, 3)
      if d == adv and s > 0: idx.append(repr([self.ch.integer(-s, s - 1) for _ in range(self.ch.integer(1, 5))]))
      elif k == 0 and s > 0: idx.append(str(self.ch.integer(-s, s - 1)))
      elif k == 1: idx.append(":")
      else:
        a, b = self.ch.integer(-s - 1, s + 1), self.ch.integer(-s - 1, s + 1)
        st_ = self.ch.choice([1, 2, 3, -1, -2])
        idx.append(f"{a if self.coin(4) else ''}:{b if self.coin(4) else ''}:{st_}")
    if len(idx) > 1 and idx[0] == ":" and self.coin(4): idx[0] = "..."
    return ", ".join(idx)

  def getitem(self) -> bool:
    i = self.pick(lambda v: len(v.shape) > 0)
    if i is None: return False
    v, x = self.prog.vals[i], self.name(i)
    src = self.index_src(v.shape)
    shape = np.zeros(v.shape)[eval(f"np.s_[{src}]")].shape
    self.add(f"{x}[{src}]", f"{x}[{src}]", Val(tuple(shape), v.dtype, v.bound, v.err))
    return True

  def setitem(self) -> bool:
    """x[idx] = value on a clone of x (the Tensor API writes in place and realizes; numpy on a copy)."""
    i = self.pick(lambda v: len(v.shape) > 0)
    if i is None: return False
    v, x = self.prog.vals[i], self.name(i)
    src = self.index_src(v.shape)
    sel = np.zeros(v.shape)[eval(f"np.s_[{src}]")].shape
    if (m := re.search(r"\[([^\]]*)\]", src)) is not None:
      # NOTE: a repeated advanced index writes twice; which write wins is not numpy's promise
      pos = [int(t) % v.shape[src[:m.start()].count(",")] for t in m.group(1).split(",")]
      if len(set(pos)) < len(pos): return False
    y_tg, y_np, w = self.broadcast_partner(Val(sel, v.dtype, v.bound), v.dtype)
    if _broadcast(w.shape, sel) != sel: return False
    self.add(f"_setitem({x}, np.s_[{src}], {y_tg})", f"_setitem({x}, np.s_[{src}], {y_np})",
             Val(v.shape, v.dtype, max(v.bound, w.bound), max(v.err, w.err)))
    return True

  def build(self) -> TensorProgram:
    self.input(self.shape(), self.ch.choice(self.dtypes))
    todo, done, tries = self.ch.integer(1, self.max_steps), 0, 0
    while done < todo and tries < 4 * self.max_steps:
      tries += 1
      n = len(self.prog.defs)
      if self.step(): done += 1
      # NOTE: a step that gave up may have added inputs already; drop them so every input is used by the program
      else: del self.prog.defs[n:], self.prog.vals[n:]
    # every step nothing else uses is an output (so no step is dead code), sometimes one more that is used
    steps = [i for i, d in enumerate(self.prog.defs) if isinstance(d, tuple)]
    used = {int(m) for d in self.prog.defs if isinstance(d, tuple) for m in re.findall(r"\bv(\d+)\b", d[0])}
    outs = {i for i in steps if i not in used} or {len(self.prog.defs) - 1}
    if steps and self.coin(3): outs.add(self.ch.choice(steps))
    self.prog.outputs = sorted(outs)
    self.shard_inputs()
    return self.prog

  def shard_inputs(self) -> None:
    """One program in four (drawn last, so the steps are the same either way; a chooser past its end draws one
    device): each input, three times in four, split on one of its axes (half the time one whose size SHARD_DEVICES
    divides, when it has one; else any, so uneven and empty shards come too), else replicated."""
    if self.ch.integer(0, 3) != 3: return
    shard: dict[int, int | None] = {}
    for i, d in enumerate(self.prog.defs):
      if not isinstance(d, np.ndarray): continue
      if not d.ndim or not self.ch.integer(0, 3): shard[i] = None; continue
      even = [a for a, n in enumerate(d.shape) if n and n % SHARD_DEVICES == 0]
      shard[i] = self.ch.choice(even) if even and self.coin() else self.ch.integer(0, d.ndim - 1)
    self.prog.shard = shard

# ---- the newer API ops: one named step each, against torch ----

@dataclass(frozen=True)
class ApiStep:
  """An API op applied to a value: tinygrad code (over the value's name), torch code (over a, and b for the extra
  operand), and the result's shape, dtype, magnitude bound and error bound; `extra` names operands it added."""
  tg: str
  torch: str
  shape: tuple[int, ...]
  dtype: DType
  bound: float
  err: float
  extra: tuple[str, ...] = ()

def _api_sort(bld: _Builder, v: Val, x: str, d: int) -> ApiStep | None:
  desc = bld.coin()
  return ApiStep(f"{x}.sort({d}, descending={desc})[0]", f"a.sort({d}, descending={desc})[0]", v.shape, v.dtype,
                 v.bound, v.err)

def _api_topk(bld: _Builder, v: Val, x: str, d: int) -> ApiStep | None:
  kk, big = bld.ch.integer(1, v.shape[d]), bld.coin()
  return ApiStep(f"{x}.topk({kk}, {d}, largest={big})[0]", f"a.topk({kk}, {d}, largest={big})[0]",
                 v.shape[:d] + (kk,) + v.shape[d + 1:], v.dtype, v.bound, v.err)

def _api_cummax(bld: _Builder, v: Val, x: str, d: int) -> ApiStep | None:
  return ApiStep(f"{x}.cummax({d})", f"a.cummax({d})[0]", v.shape, v.dtype, v.bound, v.err)

def _api_roll(bld: _Builder, v: Val, x: str, d: int) -> ApiStep | None:
  sft = bld.ch.integer(-4, 4)
  return ApiStep(f"{x}.roll({sft}, {d})", f"a.roll({sft}, {d})", v.shape, v.dtype, v.bound, v.err)

def _api_tril_triu(bld: _Builder, v: Val, x: str, d: int) -> ApiStep | None:
  dg, f = bld.ch.integer(-2, 2), bld.ch.choice(["tril", "triu"])
  return ApiStep(f"{x}.{f}({dg})", f"a.{f}({dg})", v.shape, v.dtype, v.bound, v.err)

def _api_gather(bld: _Builder, v: Val, x: str, d: int) -> ApiStep | None:
  """Indices anywhere in the axis, of a drawn length along it."""
  sh, n = v.shape, bld.ch.integer(0, 4)
  ish = sh[:d] + (n,) + sh[d + 1:]
  idx = [bld.ch.integer(0, sh[d] - 1) for _ in range(math.prod(ish))]
  return ApiStep(f"{x}.gather({d}, _ix({idx}, {ish}))", f"a.gather({d}, torch.tensor({idx}).reshape({ish}))", ish,
                 v.dtype, v.bound, v.err)

def _api_scatter(bld: _Builder, v: Val, x: str, d: int) -> ApiStep | None:
  """A scalar at distinct positions of each line along d."""
  sh, n = v.shape, bld.ch.integer(1, v.shape[d])
  ish = sh[:d] + (n,) + sh[d + 1:]
  rows = [list(bld.rng.permutation(sh[d])[:n]) for _ in range(math.prod(ish) // max(n, 1))]
  pos = np.moveaxis(np.array(rows, dtype=np.int64).reshape(*(s_ for i, s_ in enumerate(ish) if i != d), n), -1, d)
  c = bld.ch.integer(-3, 3)
  lst = pos.ravel().tolist()
  return ApiStep(f"{x}.scatter({d}, _ix({lst}, {ish}), {c})",
                 f"a.scatter({d}, torch.tensor({lst}).reshape({ish}), {c})", sh, v.dtype, max(v.bound, abs(c)), v.err)

def _api_pad_mode(bld: _Builder, v: Val, x: str, d: int) -> ApiStep | None:
  sh = v.shape
  mode = bld.ch.choice(["reflect", "replicate", "circular", "constant"])
  lim = min(sh[-1], sh[-2]) - 1
  pads = [bld.ch.integer(0, max(0, lim)) for _ in range(4)]
  shape = sh[:-2] + (sh[-2] + pads[2] + pads[3], sh[-1] + pads[0] + pads[1])
  if math.prod(shape) > bld.max_numel: return None
  return ApiStep(f"{x}.pad({tuple(pads)}, mode={mode!r})", f"F.pad(a, {tuple(pads)}, mode={mode!r})", shape, v.dtype,
                 v.bound, v.err)

def _api_pool2d(bld: _Builder, v: Val, x: str, d: int) -> ApiStep | None:
  ks, st_ = bld.ch.integer(1, 2), bld.ch.integer(1, 2)
  f = bld.ch.choice(["max_pool2d", "avg_pool2d"])
  out = tuple((s_ - ks) // st_ + 1 for s_ in v.shape[-2:])
  e = v.err if f == "max_pool2d" else v.err + 4 * EPS.get(v.dtype, 0.0) * v.bound * ks * ks
  return ApiStep(f"{x}.{f}({ks}, {st_})", f"F.{f}(a, {ks}, {st_})", v.shape[:-2] + out, v.dtype, v.bound, e)

def _contraction(bld: _Builder, v: Val, w: int, n: int, out: tuple[int, ...], tg: str, th: str) -> ApiStep | None:
  """A sum of n products of v and the new input w: its bound and rounding error; None past the size or value limits."""
  wv, eps = bld.prog.vals[w], EPS.get(v.dtype, 0.0)
  b = max(n, 1) * v.bound * wv.bound
  if math.prod(out) > bld.max_numel or b > FLOAT_LIMIT[v.dtype]: return None
  return ApiStep(tg, th, out, v.dtype, b, n * (v.err * wv.bound + 2 * eps * v.bound * wv.bound) + eps * b,
                 (bld.name(w),))

def _api_conv2d(bld: _Builder, v: Val, x: str, d: int) -> ApiStep | None:
  sh = v.shape
  cout, ks, pad = bld.ch.integer(1, 3), bld.ch.integer(1, 3), bld.ch.integer(0, 1)
  if any(s_ + 2 * pad < ks for s_ in sh[-2:]): return None
  w = bld.input((cout, sh[1], ks, ks), v.dtype)
  out = (sh[0], cout) + tuple(s_ + 2 * pad - ks + 1 for s_ in sh[-2:])
  return _contraction(bld, v, w, sh[1] * ks * ks, out, f"{x}.conv2d({bld.name(w)}, padding={pad})",
                      f"F.conv2d(a, b, padding={pad})")

def _api_einsum(bld: _Builder, v: Val, x: str, d: int) -> ApiStep | None:
  sh = v.shape
  m = bld.ch.choice(bld.sizes[:8])
  w = bld.input((sh[1], m), v.dtype)
  f = bld.ch.choice(["ij,jk->ik", "ij,jk->ki", "ij,jk->i"])
  out = {"ij,jk->ik": (sh[0], m), "ij,jk->ki": (m, sh[0]), "ij,jk->i": (sh[0],)}[f]
  return _contraction(bld, v, w, sh[1] * (m if f == "ij,jk->i" else 1), out,
                      f"Tensor.einsum({f!r}, {x}, {bld.name(w)})", f"torch.einsum({f!r}, a, b)")

def _api_interpolate(bld: _Builder, v: Val, x: str, d: int) -> ApiStep | None:
  size = tuple(bld.ch.integer(1, 6) for _ in range(len(v.shape) - 2))
  out = v.shape[:2] + size
  if math.prod(out) > bld.max_numel: return None
  return ApiStep(f"{x}.interpolate(size={size}, mode='nearest')", f"F.interpolate(a, size={size}, mode='nearest')",
                 out, v.dtype, v.bound, v.err)

def _api_conv_transpose2d(bld: _Builder, v: Val, x: str, d: int) -> ApiStep | None:
  sh = v.shape
  cout, ks, st_ = bld.ch.integer(1, 2), bld.ch.integer(1, 3), bld.ch.integer(1, 2)
  w = bld.input((sh[1], cout, ks, ks), v.dtype)
  out = (sh[0], cout) + tuple((s_ - 1) * st_ + ks for s_ in sh[-2:])
  return _contraction(bld, v, w, sh[1] * ks * ks, out, f"{x}.conv_transpose2d({bld.name(w)}, stride={st_})",
                      f"F.conv_transpose2d(a, b, stride={st_})")

def _api_logsumexp(bld: _Builder, v: Val, x: str, d: int) -> ApiStep | None:
  lg = math.log(max(v.shape[d], 1))
  return ApiStep(f"{x}.logsumexp({d})", f"a.logsumexp({d})", v.shape[:d] + v.shape[d + 1:], v.dtype, v.bound + lg + 1,
                 v.err + 8 * EPS.get(v.dtype, 0.0) * (v.bound + lg + 2))

@dataclass(frozen=True)
class ApiOp:
  """A named API op: `applies(v, d)` says whether it is defined on value v along axis d (checked before it draws
  anything), `build` draws its arguments; `nonempty`: torch refuses it on a value with an empty axis."""
  name: str
  applies: Callable[[Val, int], bool]
  build: Callable[[_Builder, Val, str, int], ApiStep | None]
  nonempty: bool = False

def _not_bool(v: Val) -> bool: return v.dtype is not dtypes.bool
def _image(v: Val) -> bool: return len(v.shape) in (3, 4) and all(s_ >= 2 for s_ in v.shape[-2:])

# NOTE: the order is the draw order (a program's bytes pick an index): append, never reorder
API_OPS: tuple[ApiOp, ...] = (
  ApiOp("sort", lambda v, d: bool(v.shape) and _not_bool(v), _api_sort),
  ApiOp("topk", lambda v, d: bool(v.shape) and v.shape[d] > 0 and _not_bool(v), _api_topk),
  ApiOp("cummax", lambda v, d: bool(v.shape) and _not_bool(v), _api_cummax),
  ApiOp("roll", lambda v, d: bool(v.shape), _api_roll),
  ApiOp("tril_triu", lambda v, d: len(v.shape) >= 2, _api_tril_triu),
  ApiOp("gather", lambda v, d: bool(v.shape) and v.shape[d] > 0, _api_gather),
  ApiOp("scatter", lambda v, d: bool(v.shape) and v.shape[d] > 0 and _not_bool(v), _api_scatter),
  ApiOp("pad_mode", lambda v, d: _image(v) and _not_bool(v), _api_pad_mode, nonempty=True),
  ApiOp("pool2d", lambda v, d: _image(v) and dtypes.is_float(v.dtype), _api_pool2d, nonempty=True),
  ApiOp("conv2d", lambda v, d: len(v.shape) == 4 and dtypes.is_float(v.dtype), _api_conv2d, nonempty=True),
  ApiOp("einsum", lambda v, d: len(v.shape) == 2 and dtypes.is_float(v.dtype), _api_einsum, nonempty=True),
  ApiOp("interpolate", lambda v, d: len(v.shape) in (3, 4) and dtypes.is_float(v.dtype), _api_interpolate,
        nonempty=True),
  ApiOp("conv_transpose2d", lambda v, d: len(v.shape) == 4 and dtypes.is_float(v.dtype), _api_conv_transpose2d,
        nonempty=True),
  ApiOp("logsumexp", lambda v, d: bool(v.shape) and dtypes.is_float(v.dtype) and v.bound < 30, _api_logsumexp),
)

def _same(shape: tuple[int, ...], dt: DType, w: Val) -> bool: return w.shape == shape and w.dtype is dt

def _fits(a: tuple[int, ...], b: tuple[int, ...], max_numel: int) -> bool:
  """a and b broadcast together to a shape of at most max_numel elements."""
  return (s := _broadcast(a, b)) is not None and math.prod(s) <= max_numel

def _broadcast(*shapes: tuple[int, ...]) -> tuple[int, ...] | None:
  nd = max(len(s) for s in shapes)
  out = []
  for d in range(nd):
    sz = {s[len(s) - nd + d] for s in shapes if len(s) - nd + d >= 0} - {1}
    if len(sz) > 1: return None
    out.append(sz.pop() if sz else 1)
  return tuple(out)

# ---- running and checking ----

def build_tensor_program(ch: Chooser, max_steps: int = 8, dtypes_: Sequence[DType] = DTYPES,
                         big: bool = False, max_numel: int | None = None) -> TensorProgram:
  """One random program. big=True draws sizes up to 257 and up to BIG_NUMEL elements (for CPU-only runs);
  max_numel overrides the element limit."""
  return _Builder(ch, max_steps, dtypes_, big, max_numel).build()

def tensor_programs(max_steps: int = 8, dtypes_: Sequence[DType] = DTYPES,
                    big: bool = False) -> st.SearchStrategy[TensorProgram]:
  """Hypothesis strategy of random tensor programs (shrinks towards fewer steps and smaller shapes)."""
  @st.composite
  def strat(draw: Callable[[st.SearchStrategy[Any]], Any]) -> TensorProgram:
    return build_tensor_program(DrawChooser(draw), max_steps, dtypes_, big)
  return strat()

def run_numpy(prog: TensorProgram) -> list[np.ndarray]:
  env: dict[str, Any] = dict(NP_NAMESPACE)
  for i, d in enumerate(prog.defs):
    with np.errstate(all="ignore"): env[f"v{i}"] = d if isinstance(d, np.ndarray) else np.asarray(eval(d[1], env))
  return [env[f"v{o}"] for o in prog.outputs]

def run_tensor_lazy(prog: TensorProgram, device: str, devices: Sequence[str] | None = None) -> list[Any]:
  """The program's outputs as Tensors on `device` (a sharded program's on `devices`, else shard_devices(device)), not
  realized (steps that realize on purpose have run)."""
  from tinygrad import Tensor
  where = prog.placement(device, devices)
  env: dict[str, Any] = {"Tensor": Tensor, "dtypes": dtypes, "DEVICE": where, "np": np}
  exec(TG_HELPERS, env)
  for i, d in enumerate(prog.defs):
    if not isinstance(d, np.ndarray): env[f"v{i}"] = eval(d[0], env)
    elif prog.shard is None: env[f"v{i}"] = Tensor(d.copy(), device=device)
    else: env[f"v{i}"] = Tensor(d.copy(), device=where[0]).shard(where, prog.shard.get(i))
  return [env[f"v{o}"] for o in prog.outputs]

def run_tensor(prog: TensorProgram, device: str, devices: Sequence[str] | None = None) -> list[Any]:
  """The program's outputs as realized Tensors on `device` (a sharded program's on `devices`)."""
  from tinygrad import Tensor
  outs = run_tensor_lazy(prog, device, devices)
  Tensor.realize(*outs)
  return outs

def check_program(prog: TensorProgram, devices: Sequence[str] = ("CPU", "PYTHON"),
                  shard_sets: Mapping[str, Sequence[str]] | None = None) -> None:
  """Run `prog` on every device and compare every output with numpy: dtype, shape, values (within the error bound the
  builder tracked, NaN/Inf matched), and that it is where it was placed. A sharded program runs on
  `shard_sets[device]` (default shard_devices(device)); numpy runs it as the one program it stands for. Raises
  ProgramMismatch with a reproducer."""
  from tinygrad.device import Device
  ref = run_numpy(prog)
  for dev in devices:
    devs = (shard_sets or {}).get(dev)
    where = prog.placement(dev, devs)
    want_dev = where if isinstance(where, str) else tuple(Device.canonicalize(d) for d in where)
    try: outs = run_tensor(prog, dev, devs)
    except Exception as e:
      raise ProgramMismatch(f"{where}: raised {type(e).__name__}: {e}\n---- program ----\n{prog.source(dev, devs)}") \
        from e
    for o, t, want in zip(prog.outputs, outs, ref):
      v = prog.vals[o]
      msg = None
      if t.device != want_dev: msg = f"on device {t.device}, expected {want_dev}"
      elif t.dtype is not v.dtype: msg = f"dtype {t.dtype}, expected {v.dtype}"
      elif t.shape != v.shape or want.shape != v.shape:
        msg = f"shape {t.shape} (numpy {want.shape}), expected {v.shape}"
      else:
        got = t.numpy()
        rt, at = TOLERANCE.get(v.dtype, (0.0, 0.0))
        msg = compare_outputs(got, want, v.dtype, rtol=rt, atol=max(at, 2 * v.err)) if dtypes.is_float(v.dtype) else \
          compare_outputs(got, want.astype(got.dtype), v.dtype)
      if msg is not None:
        raise ProgramMismatch(f"{where}: output v{o}: {msg}\n---- program ----\n{prog.source(dev, devs)}")

# ---- a seeded loop outside pytest ----

def main(argv: list[str] | None = None) -> int:
  import argparse, time, traceback
  ap = argparse.ArgumentParser(prog="python -m fuzz.gen.tensor_programs")
  ap.add_argument("-n", type=int, default=200)
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--steps", type=int, default=8)
  ap.add_argument("--devices", default="CPU,PYTHON")
  ap.add_argument("--keep-going", action="store_true")
  ap.add_argument("--big", action="store_true", help="large shapes (threads, upcasts); use with --devices CPU")
  ap.add_argument("--max-numel", type=int, default=None, help="element limit of every value (default 300, big 2**17)")
  a = ap.parse_args(argv)
  fails, st_ = 0, time.perf_counter()
  for k in range(a.n):
    prog = build_tensor_program(RandomChooser(a.seed + k), a.steps, big=a.big, max_numel=a.max_numel)
    try: check_program(prog, a.devices.split(","))
    except Exception as e:
      fails += 1
      print(f"==== seed {a.seed + k} ====")
      print(str(e) if isinstance(e, ProgramMismatch) else traceback.format_exc())
      if not a.keep_going: break
  print(f"{a.n} programs, {fails} failures, {time.perf_counter() - st_:.1f}s")
  return 1 if fails else 0

if __name__ == "__main__": sys.exit(main())
