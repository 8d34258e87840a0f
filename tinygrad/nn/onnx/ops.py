"""The ONNX op table: each op of the default domain as Tensor ops, one function per op (or per family), registered with
the first opset whose semantics it implements. Versions differ inside a function by `c.opset` (attributes that became
inputs, changed defaults); an op used at an opset below its first version is an OnnxError naming the node."""
from __future__ import annotations
import itertools, math
from typing import Any, Callable, Sequence
import numpy as np
from tinygrad.tensor import Tensor, broadcast_shape
from tinygrad.uop.ops import UOp
from tinygrad.uop.sint import shape_eq, all_concrete, vmax, vmin
from tinygrad.dtype import DType, dtypes
from tinygrad.helpers import prod, flatten
from tinygrad.nn.onnx.proto import OnnxError, Graph, Node, Function, tensor_to_numpy
from tinygrad.nn.onnx.call import Call, Scope, DTYPES, to_dtype, MAX_OPSET, SymbolicUnsupported

OPS: dict[str, tuple[int, Callable[[Call], Any]]] = {}  # op -> (first opset implemented, function)

def op(*names: str, since: int = 1) -> Callable:
  def deco(fn: Callable[[Call], Any]) -> Callable[[Call], Any]:
    for n in names: OPS[n] = (since, fn)
    return fn
  return deco

# ---- running a node ----

def check_graph(g: Graph, opsets: dict[str, int], functions: dict[tuple[str, str], Function], src: str) -> None:
  """Every node's op is known at the model's opset (before anything runs), subgraphs included."""
  for n in g.nodes:
    if (n.domain, n.op) not in functions: _lookup(n, opsets, src)
    for v in n.attrs.values():
      for sub in (v if isinstance(v, list) else [v]):
        if isinstance(sub, Graph): check_graph(sub, opsets, functions, src)

DOMAINS = ("", "ai.onnx.preview.training", "ai.onnx.preview", "ai.onnx.ml")

def _lookup(n: Node, opsets: dict[str, int], src: str) -> tuple[int, Callable[[Call], Any]]:
  if n.domain not in DOMAINS:
    raise OnnxError(f"{src}: {n.label()}: domain {n.domain!r} (opset {opsets.get(n.domain)}) is not supported")
  opset = opsets.get(n.domain, MAX_OPSET if n.domain == "" else 1)
  key = n.op if n.domain == "" else f"{n.domain}:{n.op}"
  if key not in OPS: raise OnnxError(f"{src}: {n.label()}: unknown op {n.op!r} at opset {opset}")
  since, fn = OPS[key]
  if opset < since:
    raise OnnxError(f"{src}: {n.label()}: op {n.op} at opset {opset} is not supported (this runner has it from opset "
                    f"{since})")
  return since, fn

def run_node(runner: Any, scope: Scope, n: Node) -> None:
  names = list(n.inputs)
  inputs: list[Any] = []
  for nm in names:
    if not nm: inputs.append(None); continue
    try: inputs.append(scope.get(nm))
    except KeyError:
      raise OnnxError(f"{runner.model.src}: {n.label()}: input {nm!r} is not defined before it") from None
  opset = scope.opsets.get(n.domain, MAX_OPSET)
  # NOTE: a small node computed from shapes and constants only runs on the CPU (shape values are read on the host: a
  # GPU round trip each, and impossible under COMPILE_ONLY); the others (weights folded from constants too) run on the
  # runner's device
  static = n.op not in _NOT_STATIC and all(scope.is_static(nm) for nm in names if nm) or n.op in ("Shape", "Size")
  if runner._bound and _symbolic_inputs(scope, names, inputs):
    # NOTE: only small values of concrete shape (a shape vector, its pieces) are computed on the host
    small_host = all(v is None or isinstance(v, Tensor) and all_concrete(v.shape) and v.numel() <= HOST_NUMEL
                     for v in inputs)
    if static and n.op in HOST_EVAL and (small_host or n.op in ("Shape", "Size")):
      # NOTE: a value the host cannot hold (a size cast to float) is computed as a tensor, its sizes kernel variables
      try: return _host_eval(runner, scope, n, names, inputs, opset)
      except SymbolicUnsupported:
        if n.op not in SYMBOLIC_OK: raise
    if n.op not in SYMBOLIC_OK or n.domain:
      shapes = [v.shape if isinstance(v, Tensor) else type(v).__name__ for v in inputs]
      raise SymbolicUnsupported(f"{n.label()}: op {n.op} at opset {opset} takes symbolic sizes (inputs {shapes}) and "
                                "is not among the ops that handle them")
  small = all(not isinstance(v, Tensor) or vmax(v.numel()) <= HOST_NUMEL for v in inputs)
  dev = runner.device
  on_cpu = dev is not None and dev.split(":")[0] != "CPU" and static and small
  outs = _run_op(runner, scope, n, names, inputs, opset, "CPU" if on_cpu else dev)
  # NOTE: a value of symbolic shape (zeros expanded to the batch) is data, not a shape: it is computed on the runner's
  # device (a tensor of symbolic shape does not move between devices)
  if on_cpu and any(isinstance(v, Tensor) and not all_concrete(v.shape) for v in outs):
    outs = _run_op(runner, scope, n, names, inputs, opset, dev)
  for name, v in zip(n.outputs, outs):
    if not name: continue
    scope.values[name], scope.static_ok[name] = v, static

def _run_op(runner: Any, scope: Scope, n: Node, names: list[str], inputs: list[Any], opset: int,
            dev: str | None) -> tuple:
  if dev is not None and runner.device is not None and runner.device.split(":")[0] != "CPU":
    inputs = [runner.cpu_initializer(nm) if dev == "CPU" and runner.is_initializer(nm) else _to(v, dev)
              for nm, v in zip(names, inputs)]
  c = Call(runner, n, inputs, names, opset, scope, dev)
  if (f := runner.model.functions.get((n.domain, n.op))) is not None: return tuple(runner.run_function(f, c))
  _, fn = _lookup(n, scope.opsets, runner.model.src)
  try: outs = fn(c)
  except SymbolicUnsupported as e:
    raise SymbolicUnsupported(f"{n.label()} at opset {opset}: {e}" if n.label() not in str(e) else str(e)) from e
  except OnnxError: raise
  except Exception as e:
    raise OnnxError(f"{runner.model.src}: {n.label()} at opset {opset}: {type(e).__name__}: {e}") from e
  # NOTE: an op returns one value or a tuple of outputs; a list is one value (a sequence)
  return outs if isinstance(outs, tuple) else (outs,)

HOST_NUMEL = 4096  # a shape computation's tensors are this small; a constant folded from weights is not

# ---- symbolic (named) dims ----
# NOTE: with a model's named dims bound to variables, a node whose inputs have symbolic sizes runs only if its op is
# known to handle them: Python decides on sizes (comparisons, ranges, numpy), and a symbolic size there could decide
# wrongly for another binding without an error. Any other op makes the runner bind the dims per call.

def _symbolic_inputs(scope: Scope, names: list[str], inputs: list[Any]) -> bool:
  ts = [t for v in inputs for t in (v if isinstance(v, list) else [v]) if isinstance(t, Tensor)]
  return any(not all_concrete(t.shape) for t in ts) or any(scope.sym_of(nm) is not None for nm in names if nm)

SYMBOLIC_OK = {
  # elementwise (broadcasting checks symbolic sizes)
  "Add", "Sub", "Mul", "Div", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor",
  "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitShift", "Pow", "Mod", "Identity", "IsInf", "LeakyRelu", "Elu", "Celu",
  "Selu", "ThresholdedRelu", "HardSigmoid", "HardSwish", "Shrink", "Gelu", "Swish", "Clip", "Where", "Sum", "Max",
  "Min", "Mean", "Cast", "CastLike", "QuantizeLinear", "DequantizeLinear",
  # movement and indexing
  "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Concat", "Slice", "Expand", "Gather", "ConstantOfShape",
  # reductions, matmul, conv and pooling over concrete spatial sizes, normalization, recurrences over a concrete length
  "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare",
  "ReduceLogSum", "ReduceLogSumExp", "Softmax", "LogSoftmax", "MatMul", "Gemm", "Conv", "ConvTranspose", "MaxPool",
  "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "BatchNormalization", "InstanceNormalization",
  "LayerNormalization", "RMSNormalization", "LSTM", "GRU", "RNN", "Resize",
}

def _host_eval(runner: Any, scope: Scope, n: Node, names: list[str], inputs: list[Any], opset: int) -> None:
  """A shape computation with symbolic sizes, done on the host over object arrays of ints and sizes: the values stay
  symbolic (a Reshape then gets the symbolic shape); their tensors take the sizes as kernel variables."""
  c = Call(runner, n, inputs, names, opset, scope, runner.device)
  arrs: list[np.ndarray | None] = []
  for i, nm in enumerate(names):
    if not nm or n.op in ("Shape", "Size"): arrs.append(None); continue
    sym = scope.sym_of(nm)
    arrs.append(sym if sym is not None else _obj(np.array(c.static(i), dtype=object)))
  try: out, dt = HOST_EVAL[n.op](c, arrs)
  except SymbolicUnsupported: raise
  except Exception as e:
    raise SymbolicUnsupported(f"{n.label()}: {n.op} of symbolic sizes on the host: {type(e).__name__}: {e}") from e
  name = n.outputs[0]
  if not name: return
  if not isinstance(out, np.ndarray):  # numpy gives a 0-d result (a Gather of a scalar index) as the element
    arr = np.empty((), dtype=object)
    arr[()] = out
    out = arr
  scope.values[name], scope.static_ok[name] = _host_tensor(out, dt, c.device), True
  if any(isinstance(x, UOp) for x in out.reshape(-1)): scope.sym[name] = out

def _obj(a: np.ndarray) -> np.ndarray:
  out = np.empty(a.shape, dtype=object)
  out.reshape(-1)[:] = [x.item() if isinstance(x, np.generic) else x for x in a.reshape(-1)]
  return out

def _host_tensor(arr: np.ndarray, dt: DType, device: str | None) -> Tensor:
  flat = list(arr.reshape(-1))
  base = Tensor(np.array([0 if isinstance(x, UOp) else x for x in flat], dtype=np.int64).reshape(arr.shape),
                device=device).cast(dt)
  for i, x in enumerate(flat):
    if not isinstance(x, UOp): continue
    hot = np.zeros(len(flat), dtype=np.int64)
    hot[i] = 1
    base = base + (Tensor(hot.reshape(arr.shape), device=device) * x).cast(dt)
  return base

def _needs_int(x: Any, what: str) -> int:
  if isinstance(x, UOp): raise SymbolicUnsupported(f"{what} is the symbolic size {x}; it needs a concrete value")
  return int(x)

def _he_shape(c: Call, a: list) -> tuple:
  s = c.t(0).shape
  k = len(s)
  start, end = c.attr("start", 0), c.attr("end", k)
  start, end = max(0, min(k, start + k if start < 0 else start)), max(0, min(k, end + k if end < 0 else end))
  return _objarr(list(s[start:end])), dtypes.int64

def _objarr(vals: list) -> np.ndarray:
  out = np.empty(len(vals), dtype=object)
  out[:] = vals
  return out

def _he_slice(c: Call, a: list) -> tuple:
  x = a[0]
  starts: list | None
  ends: list | None
  if c.opset < 10: starts, ends, axes, steps = list(c.attr("starts")), list(c.attr("ends")), c.attr("axes"), None
  else: starts, ends, axes, steps = (list(a[i].reshape(-1)) if i < len(a) and a[i] is not None else None
                                     for i in range(1, 5))
  assert starts is not None and ends is not None
  idx: list[Any] = [slice(None)] * x.ndim
  for j, (s, e) in enumerate(zip(starts, ends)):
    ax = _axis(_needs_int(axes[j], "a Slice axis") if axes is not None else j, x.ndim)
    st = _needs_int(steps[j], "a Slice step") if steps is not None else 1
    lim = 2 ** 62
    s, e = _needs_int(s, "a Slice start"), _needs_int(e, "a Slice end")
    idx[ax] = slice(max(-lim, min(lim, s)), max(-lim, min(lim, e)), st)
  return x[tuple(idx)], _he_dtype(c)

def _he_dtype(c: Call) -> DType: return c.t(0).dtype

def _he_gather(c: Call, a: list) -> tuple:
  idx = np.array([_needs_int(v, "a Gather index") for v in a[1].reshape(-1)], dtype=np.int64).reshape(a[1].shape)
  return np.take(a[0], idx, axis=_axis(c.attr("axis", 0), a[0].ndim)), _he_dtype(c)

def _he_concat(c: Call, a: list) -> tuple:
  xs = [x for x in a if x is not None]
  return np.concatenate(xs, axis=_axis(c.attr("axis", 1 if c.opset < 4 else 0), xs[0].ndim)), _he_dtype(c)

def _he_axes(c: Call, a: list) -> list[int] | None:
  if c.opset < 13: return list(c.attr("axes")) if c.attr("axes") is not None else None
  return [_needs_int(v, "an axis") for v in a[1].reshape(-1)] if len(a) > 1 and a[1] is not None else None

def _he_unsqueeze(c: Call, a: list) -> tuple:
  x, axes = a[0], _he_axes(c, a) or []
  k = x.ndim + len(axes)
  shape = list(x.shape)
  for ax in sorted(_axis(v, k) for v in axes): shape.insert(ax, 1)
  return x.reshape(shape), _he_dtype(c)

def _he_squeeze(c: Call, a: list) -> tuple:
  x, axes = a[0], _he_axes(c, a)
  axes = [_axis(v, x.ndim) for v in axes] if axes is not None else [i for i, s in enumerate(x.shape) if s == 1]
  return x.reshape([s for i, s in enumerate(x.shape) if i not in axes]), _he_dtype(c)

def _he_reshape(c: Call, a: list) -> tuple:
  shape = [_needs_int(v, "a Reshape of a host value") for v in a[1].reshape(-1)] if c.opset >= 5 else c.attr("shape")
  shape = [a[0].shape[i] if s == 0 and not c.attr("allowzero", 0) else s for i, s in enumerate(shape)]
  return a[0].reshape(shape), _he_dtype(c)

def _he_cast(c: Call, a: list) -> tuple:
  dt = to_dtype(c.attr("to"), c.node.label())
  if not dtypes.is_int(dt) or dt.itemsize < 4:
    raise SymbolicUnsupported(f"{c.node.label()}: a cast of symbolic sizes to {dt}")
  return a[0], dt

def _he_binary(fn: Callable[[Any, Any], Any], nonneg: bool = False) -> Callable[[Call, list], tuple]:
  def run(c: Call, a: list) -> tuple:
    if not dtypes.is_int(c.t(0).dtype): raise SymbolicUnsupported(f"{c.node.label()}: arithmetic on symbolic sizes "
                                                                   f"in {c.t(0).dtype}")
    # NOTE: Div truncates, a size's // floors: the same for operands >= 0
    if nonneg and any(vmin(v) < 0 for x in a for v in x.reshape(-1)):
      raise SymbolicUnsupported(f"{c.node.label()}: division of symbolic sizes with a negative operand")
    return np.vectorize(fn, otypes=[object])(a[0], a[1]), _he_dtype(c)
  return run

HOST_EVAL: dict[str, Callable[[Call, list], tuple]] = {
  "Shape": _he_shape, "Size": lambda c, a: (_objarr([c.t(0).numel()]).reshape(()), dtypes.int64),
  "Slice": _he_slice, "Gather": _he_gather, "Concat": _he_concat, "Unsqueeze": _he_unsqueeze,
  "Squeeze": _he_squeeze, "Reshape": _he_reshape, "Identity": lambda c, a: (a[0], _he_dtype(c)), "Cast": _he_cast,
  "Add": _he_binary(lambda x, y: x + y), "Sub": _he_binary(lambda x, y: x - y),
  "Mul": _he_binary(lambda x, y: x * y), "Div": _he_binary(lambda x, y: x // y, nonneg=True),
}

def _to(v: Any, dev: str) -> Any:
  if isinstance(v, list): return [_to(x, dev) for x in v]
  return v.to(dev) if isinstance(v, Tensor) and v.device != dev else v

_NOT_STATIC = {"RandomUniform", "RandomNormal", "RandomUniformLike", "RandomNormalLike", "Bernoulli", "Multinomial",
               "Loop", "If", "Scan", "SequenceMap"}

# ---- helpers ----

def _axis(a: int, n: int, c: Call | None = None) -> int:
  if not -n <= a < max(n, 1) and c is not None: raise c.error(f"axis {a} is out of range for rank {n}")
  return a + n if a < 0 else a

def _const(v: Any, dt: DType, like: Tensor) -> Tensor: return Tensor.full((), v, dtype=dt, device=like.device)

def _float_like(x: Tensor) -> Tensor: return x if dtypes.is_float(x.dtype) else x.cast(dtypes.float32)

def _broadcast(*ts: Tensor) -> list[Tensor]:
  shape = broadcast_shape(*(t.shape for t in ts), op="ONNX broadcast")
  return [t if shape_eq(t.shape, shape) else t.reshape((1,) * (len(shape) - t.ndim) + t.shape).expand(shape)
          for t in ts]

def _legacy_bcast(c: Call, a: Tensor, b: Tensor) -> Tensor:
  # NOTE: before opset 7 a binary op broadcast only with broadcast=1, b's axes aligned at `axis` of a
  if c.opset >= 7 or not c.attr("broadcast", 0) or c.attr("axis") is None: return b
  ax = _axis(c.attr("axis"), a.ndim)
  return b.reshape((1,) * ax + b.shape + (1,) * (a.ndim - ax - b.ndim))

# ---- elementwise ----

def _binary(fn: Callable[[Tensor, Tensor], Tensor]) -> Callable[[Call], Tensor]:
  def run(c: Call) -> Tensor:
    a, b = c.t(0), c.t(1)
    return fn(a, _legacy_bcast(c, a, b))
  return run

def _div(a: Tensor, b: Tensor) -> Tensor:
  if dtypes.is_float(a.dtype): return a / b
  # NOTE: integer Div truncates toward zero (as C); a zero divisor is undefined in ONNX
  return a.div(b, rounding_mode="trunc")

op("Add")(_binary(lambda a, b: a + b))
op("Sub")(_binary(lambda a, b: a - b))
op("Mul")(_binary(lambda a, b: a * b))
op("Div")(_binary(_div))
op("Equal")(_binary(lambda a, b: a == b))
op("Less")(_binary(lambda a, b: a < b))
op("Greater")(_binary(lambda a, b: a > b))
op("LessOrEqual")(_binary(lambda a, b: a <= b))
op("GreaterOrEqual")(_binary(lambda a, b: a >= b))
op("And")(_binary(lambda a, b: a & b))
op("Or")(_binary(lambda a, b: a | b))
op("Xor")(_binary(lambda a, b: a ^ b))
op("BitwiseAnd")(_binary(lambda a, b: a & b))
op("BitwiseOr")(_binary(lambda a, b: a | b))
op("BitwiseXor")(_binary(lambda a, b: a ^ b))

@op("BitShift")
def _bitshift(c: Call) -> Tensor:
  a, b = c.t(0), c.t(1)
  return a.lshift(b) if c.attr("direction") == "LEFT" else a.rshift(b)

@op("Pow")
def _pow(c: Call) -> Tensor:
  a, b = c.t(0), c.t(1)
  b = _legacy_bcast(c, a, b)
  if a.dtype is b.dtype: return a.pow(b)
  if dtypes.is_float(a.dtype): return a.pow(b.cast(a.dtype))
  # NOTE: an integer base with a float exponent: computed in float64, rounded back to the base's integer type
  return a.cast(dtypes.float64).pow(b.cast(dtypes.float64)).round().cast(a.dtype)

@op("Mod")
def _mod(c: Call) -> Tensor:
  a, b = c.t(0), c.t(1)
  if not c.attr("fmod", 0): return a.mod(b)
  # C fmod: the remainder takes the sign of the dividend
  r = a.abs().mod(b.abs())
  return (a < 0).where(-r, r).cast(a.dtype)

def _unary(fn: Callable[[Tensor], Tensor]) -> Callable[[Call], Tensor]: return lambda c: fn(c.t(0))

def _exp(x: Tensor) -> Tensor:
  # a 16-bit float's exp goes through float32 and rounds once: exp2(x * log2 e) with the product rounded to 16 bits is
  # off by several ulps (the reference computes 16-bit math in float32)
  return x.cast(dtypes.float32).exp().cast(x.dtype) if x.dtype in (dtypes.float16, dtypes.bfloat16) else x.exp()

def _softmax(x: Tensor, ax: int) -> Tensor:
  if x.dtype not in (dtypes.float16, dtypes.bfloat16): return x.softmax(ax)
  e = _exp(x - x.max(ax, keepdim=True))
  return e / e.sum(ax, keepdim=True)

_UNARY: dict[str, Callable[[Tensor], Tensor]] = {
  "Abs": lambda x: x.abs(), "Neg": lambda x: -x, "Exp": _exp, "Log": lambda x: x.log(),
  "Sqrt": lambda x: x.sqrt(), "Reciprocal": lambda x: x.reciprocal(), "Floor": lambda x: x.floor(),
  "Ceil": lambda x: x.ceil(), "Sin": lambda x: x.sin(), "Cos": lambda x: x.cos(), "Tan": lambda x: x.tan(),
  "Asin": lambda x: x.asin(), "Acos": lambda x: x.acos(), "Atan": lambda x: x.atan(), "Sinh": lambda x: x.sinh(),
  "Cosh": lambda x: x.cosh(), "Asinh": lambda x: x.asinh(), "Acosh": lambda x: x.acosh(), "Atanh": lambda x: x.atanh(),
  "Sigmoid": lambda x: x.sigmoid(), "Tanh": lambda x: x.tanh(), "Relu": lambda x: x.relu(), "Erf": lambda x: x.erf(),
  "Sign": lambda x: x.sign(), "Softsign": lambda x: x.softsign(), "Softplus": lambda x: x.softplus(),
  "IsNaN": lambda x: x.isnan(), "Not": lambda x: x.logical_not(), "BitwiseNot": lambda x: x.bitwise_not(),
  "Round": lambda x: x.round(), "Mish": lambda x: x * x.softplus().tanh(),
}
for _n, _f in _UNARY.items(): op(_n)(_unary(_f))
SYMBOLIC_OK.update(_UNARY)

@op("Identity")
def _identity(c: Call) -> Any: return c.inputs[0]

@op("IsInf")
def _isinf(c: Call) -> Tensor:
  return c.t(0).isinf(bool(c.attr("detect_positive", 1)), bool(c.attr("detect_negative", 1)))

@op("LeakyRelu")
def _leaky(c: Call) -> Tensor: return c.t(0).leaky_relu(c.attr("alpha", 0.01))
@op("Elu")
def _elu(c: Call) -> Tensor:
  x, a = c.t(0), c.attr("alpha", 1.0)
  return (x > 0).where(x, (x.exp() - 1) * a)
@op("Celu")
def _celu(c: Call) -> Tensor:
  x, a = c.t(0), c.attr("alpha", 1.0)
  return x.maximum(0) + ((x / a).exp() - 1).minimum(0) * a
@op("Selu")
def _selu(c: Call) -> Tensor:
  x, a, g = c.t(0), c.attr("alpha", 1.67326319217681884765625), c.attr("gamma", 1.05070102214813232421875)
  return (x > 0).where(x * g, (x.exp() * a - a) * g)
@op("ThresholdedRelu")
def _threlu(c: Call) -> Tensor:
  x = c.t(0)
  return (x > c.attr("alpha", 1.0)).where(x, 0)
@op("HardSigmoid")
def _hsig(c: Call) -> Tensor:
  x = c.t(0)
  return (x * c.attr("alpha", 0.2) + c.attr("beta", 0.5)).clip(0, 1)
@op("HardSwish")
def _hswish(c: Call) -> Tensor:
  x = c.t(0)
  return x * (x * (1 / 6) + 0.5).clip(0, 1)
@op("Shrink")
def _shrink(c: Call) -> Tensor:
  x, lambd, bias = c.t(0), c.attr("lambd", 0.5), c.attr("bias", 0.0)
  return (x < -lambd).where(x + bias, (x > lambd).where(x - bias, 0)).cast(x.dtype)
@op("PRelu")
def _prelu(c: Call) -> Tensor:
  x, s = c.t(0), c.t(1)
  if c.opset < 7 and s.ndim == 1 and x.ndim > 1 and s.shape[0] == x.shape[1]: s = s.reshape(-1, *([1] * (x.ndim - 2)))
  return (x < 0).where(x * s, x)
@op("Gelu", since=20)
def _gelu(c: Call) -> Tensor:
  x = c.t(0)
  if c.attr("approximate", "none") == "tanh": return x.gelu("tanh")
  return x * 0.5 * (1 + (x * (1 / math.sqrt(2))).erf())
@op("Swish", since=24)
def _swish(c: Call) -> Tensor:
  x = c.t(0)
  return x * (x * c.attr("alpha", 1.0)).sigmoid()

@op("Clip")
def _clip(c: Call) -> Tensor:
  x = c.t(0)
  lo, hi = (c.attr("min"), c.attr("max")) if c.opset < 11 else (c.opt(1), c.opt(2))
  if lo is not None: x = x.maximum(lo.cast(x.dtype) if isinstance(lo, Tensor) else lo)
  if hi is not None: x = x.minimum(hi.cast(x.dtype) if isinstance(hi, Tensor) else hi)
  return x

@op("Where")
def _where(c: Call) -> Tensor: return c.t(0).where(c.t(1), c.t(2))

def _variadic(fn: Callable[[Tensor, Tensor], Tensor]) -> Callable[[Call], Tensor]:
  def run(c: Call) -> Tensor:
    ts = [c.t(i) for i in range(len(c)) if c.has(i)]
    out = ts[0]
    for t in ts[1:]: out = fn(out, t)
    return out
  return run
op("Sum")(_variadic(lambda a, b: a + b))
op("Max")(_variadic(lambda a, b: _nan_prop(a, b, a.maximum(b))))
op("Min")(_variadic(lambda a, b: _nan_prop(a, b, a.minimum(b))))

def _nan_prop(a: Tensor, b: Tensor, r: Tensor) -> Tensor:
  if not dtypes.is_float(r.dtype): return r
  return a.isnan().where(a, b.isnan().where(b, r))

@op("Mean")
def _mean(c: Call) -> Tensor:
  ts = [c.t(i) for i in range(len(c)) if c.has(i)]
  out = ts[0]
  for t in ts[1:]: out = out + t
  return out / len(ts)

# ---- casts ----

def _cast_to(x: Tensor, dt: DType, saturate: bool = True) -> Tensor:
  if x.dtype is dt: return x
  if dt in (dtypes.fp8e4m3, dtypes.fp8e5m2) and dtypes.is_float(x.dtype):
    mx = float(dtypes.max(dt)) if dt is dtypes.fp8e4m3 else 57344.0
    # saturate: anything beyond the largest finite value (infinities too) becomes it; NaN stays NaN. Without it,
    # E4M3FN (no infinity) overflows to NaN past the rounding midpoint 464, E5M2 to infinity
    if saturate: x = (x.abs() > mx).where(x.sign() * mx, x)
    elif dt is dtypes.fp8e4m3: x = (x.abs() >= 464.0).where(math.nan, x)
  return x.cast(dt)

@op("Cast")
def _cast(c: Call) -> Tensor:
  return _cast_to(c.t(0), to_dtype(c.attr("to"), c.node.label()), bool(c.attr("saturate", 1)))
@op("CastLike", since=15)
def _castlike(c: Call) -> Tensor: return _cast_to(c.t(0), c.t(1).dtype, bool(c.attr("saturate", 1)))
@op("BitCast", since=26)
def _bitcast(c: Call) -> Tensor:
  x, dt = c.t(0), to_dtype(c.attr("to"), c.node.label())
  if dt.itemsize != x.dtype.itemsize: raise c.error(f"BitCast from {x.dtype} to {dt}: sizes differ")
  return x.bitcast(dt)

# ---- constants and shapes ----

@op("Constant")
def _constant(c: Call) -> Tensor:
  a = c.node.attrs
  if "value" in a: return c.runner.tensor_of(a["value"], c.node.label())
  if "sparse_value" in a: return c.runner.sparse_tensor(a["sparse_value"], c.node.label())
  dev = c.device
  if "value_float" in a: return Tensor(np.array(a["value_float"], np.float32), device=dev)
  if "value_floats" in a: return Tensor(np.array(a["value_floats"], np.float32).reshape(-1), device=dev)
  if "value_int" in a: return Tensor(np.array(a["value_int"], np.int64), device=dev)
  if "value_ints" in a: return Tensor(np.array(a["value_ints"], np.int64).reshape(-1), device=dev)
  raise c.error(f"Constant with attributes {sorted(a)} is not supported (string constants have no device dtype)")

def _shape_tensor(vals: Sequence[int], c: Call) -> Tensor:
  return Tensor(np.array(list(vals), dtype=np.int64).reshape(-1), device=c.device)

@op("Shape")
def _shape(c: Call) -> Tensor:
  s = c.t(0).int_shape("ONNX Shape")
  n = len(s)
  start, end = c.attr("start", 0), c.attr("end", n)
  start, end = max(0, min(n, start + n if start < 0 else start)), max(0, min(n, end + n if end < 0 else end))
  return _shape_tensor(s[start:end], c)
@op("Size")
def _size(c: Call) -> Tensor: return Tensor(np.array(c.t(0).numel(), np.int64), device=c.device)

@op("ConstantOfShape")
def _cos(c: Call) -> Tensor:
  shape = c.sizes(0) or []
  val = c.attr("value")
  if val is None: return Tensor.zeros(*shape, dtype=dtypes.float32, device=c.device)
  t = c.runner.tensor_of(val, c.node.label())
  return t.reshape(()).expand(tuple(shape)) if shape else t.reshape(())

@op("EyeLike")
def _eyelike(c: Call) -> Tensor:
  x, k = c.t(0), c.attr("k", 0)
  dt = to_dtype(c.attr("dtype"), c.node.label()) if c.attr("dtype") is not None else x.dtype
  n, m = x.shape
  r = Tensor.arange(n, device=x.device).reshape(n, 1)
  cc = Tensor.arange(m, device=x.device).reshape(1, m)
  return (cc - r == k).cast(dt)

@op("Range", since=11)
def _range(c: Call) -> Tensor:
  start, limit, delta = (c.scalar(i) for i in range(3))
  dt = c.t(0).dtype
  n = max(int(math.ceil((limit - start) / delta)), 0)
  return (Tensor.arange(n, device=c.t(0).device).cast(dt) * delta + start).cast(dt) if n else \
    Tensor.zeros(0, dtype=dt, device=c.t(0).device)

# ---- movement ----

@op("Reshape")
def _reshape(c: Call) -> Tensor:
  x = c.t(0)
  shape = list(c.attr("shape", [])) if c.opset < 5 else c.sizes(1) or []
  allowzero = c.attr("allowzero", 0)
  shape = [x.shape[i] if s == 0 and not allowzero else s for i, s in enumerate(shape)]
  if -1 in shape and not all_concrete(list(x.shape) + shape): shape = _infer_symbolic(x.shape, shape, c)
  return x.reshape(shape)

def _infer_symbolic(have: Sequence[Any], want: list, c: Call) -> list:
  """The -1 of a reshape with symbolic sizes: the input's symbolic factors the others do not take, times the quotient
  of the concrete ones."""
  rest = list(s for s in have if isinstance(s, UOp))
  for s in want:
    if not isinstance(s, UOp): continue
    hit = next((i for i, r in enumerate(rest) if r is s), None)
    if hit is None: raise SymbolicUnsupported(f"{c.node.label()}: Reshape of {have} to {want}: the -1 is not a "
                                              "product of the input's sizes")
    rest.pop(hit)
  num = prod(s for s in have if not isinstance(s, UOp))
  den = prod(s for s in want if not isinstance(s, UOp) and s != -1)
  if den == 0 or num % den:
    raise SymbolicUnsupported(f"{c.node.label()}: Reshape of {have} to {want}: the -1 is not a whole multiple of the "
                              "symbolic sizes")
  return [prod(rest) * (num // den) if s is not None and not isinstance(s, UOp) and s == -1 else s for s in want]

@op("Flatten")
def _flatten(c: Call) -> Tensor:
  x = c.t(0)
  ax = _axis(c.attr("axis", 1), x.ndim) if x.ndim else 0
  return x.reshape(prod(x.shape[:ax]), prod(x.shape[ax:]))

def _axes_arg(c: Call, i: int) -> list[int] | None:
  return (list(c.attr("axes")) if c.attr("axes") is not None else None) if c.opset < 13 else c.ints(i)

@op("Squeeze")
def _squeeze(c: Call) -> Tensor:
  x = c.t(0)
  axes = _axes_arg(c, 1)
  # NOTE: a symbolic size may be bound to 1: whether to drop it would differ per binding
  if axes is None: return x.reshape([s for s in x.int_shape("ONNX Squeeze without axes") if s != 1])
  axes = [_axis(a, x.ndim) for a in axes]
  return x.reshape([s for i, s in enumerate(x.shape) if i not in axes])

@op("Unsqueeze")
def _unsqueeze(c: Call) -> Tensor:
  x = c.t(0)
  axes = _axes_arg(c, 1) or []
  n = x.ndim + len(axes)
  axes = sorted(_axis(a, n) for a in axes)
  shape = list(x.shape)
  for a in axes: shape.insert(a, 1)
  return x.reshape(shape)

@op("Transpose")
def _transpose(c: Call) -> Tensor:
  x = c.t(0)
  perm = c.attr("perm") or list(range(x.ndim))[::-1]
  return x.permute([_axis(p, x.ndim) for p in perm])

@op("Concat")
def _concat(c: Call) -> Tensor:
  ts = [c.t(i) for i in range(len(c)) if c.has(i)]
  ax = _axis(c.attr("axis", 1 if c.opset < 4 else 0), ts[0].ndim)
  return ts[0].cat(*ts[1:], dim=ax) if len(ts) > 1 else ts[0]

@op("Split")
def _split(c: Call) -> tuple[Tensor, ...]:
  x = c.t(0)
  ax = _axis(c.attr("axis", 0), x.ndim)
  split = (c.attr("split") if c.opset < 13 else c.ints(1)) if c.opset >= 2 or c.attr("split") is not None else None
  if split is None and c.opset < 13 and len(c) > 1 and c.has(1): split = c.ints(1)
  nout = len(c.node.outputs)
  if not split:
    num = c.attr("num_outputs", nout)
    n = x.shape[ax]
    size = -(-n // num)
    split = [size] * (n // size) + ([n % size] if n % size else [])
    if len(split) < num: split += [0] * (num - len(split))
  return tuple(x.split(list(split), dim=ax))

def _slice(x: Tensor, starts: list[int], ends: list[int], axes: list[int] | None, steps: list[int] | None) -> Tensor:
  axes = [_axis(a, x.ndim) for a in (axes if axes is not None else range(len(starts)))]
  steps = steps or [1] * len(starts)
  idx: list[Any] = [slice(None)] * x.ndim
  for a, s, e, st in zip(axes, starts, ends, steps):
    n = x.shape[a]
    if isinstance(n, UOp) or isinstance(s, UOp) or isinstance(e, UOp):
      idx[a] = _symbolic_bounds(n, s, e, st)
      continue
    if st == 0: raise ValueError("Slice step 0")
    s, e = (s + n if s < 0 else s), (e + n if e < 0 else e)
    if st > 0: s, e = max(0, min(n, s)), max(0, min(n, e))
    else: s, e = max(-1, min(n - 1, s)), max(-1, min(n - 1, e))
    idx[a] = (s, e, st)
  out = x
  for a, sl in enumerate(idx):
    if isinstance(sl, slice): continue
    s, e, st = sl
    if st is None:
      out = out.shrink([(s, e) if i == a else None for i in range(out.ndim)])
      continue
    if st > 0:
      cnt = max(0, -(-(e - s) // st))
      out = _take_strided(out, a, s, st, cnt)
    else:
      cnt = max(0, -(-(s - e) // -st))
      out = _take_strided(out.flip(a), a, out.shape[a] - 1 - s, -st, cnt)
  return out

def _symbolic_bounds(n: Any, s: Any, e: Any, st: Any) -> tuple[Any, Any, None]:
  """A Slice of step 1 where the axis or a bound is symbolic, as (start, end, None): negative ints count from the
  end, an end at or past the axis' largest size is the end; what stays must fit the axis for every binding (shrink
  checks)."""
  if st != 1: raise SymbolicUnsupported(f"a Slice of step {st} along an axis of symbolic size {n}")
  if isinstance(s, int): s = max(0, s) if s >= 0 else n + s if -s <= vmin(n) else None
  if isinstance(e, int): e = n if e >= vmax(n) else e if e >= 0 else n + e if -e <= vmin(n) else None
  if s is None or e is None or isinstance(s, int) and s > vmin(n) or isinstance(e, int) and e > vmin(n):
    raise SymbolicUnsupported(f"a Slice whose clipping to the axis of symbolic size {n} depends on the binding")
  return s, e, None

def _take_strided(x: Tensor, a: int, start: int, step: int, cnt: int) -> Tensor:
  if cnt == 0: return x.shrink([(0, 0) if i == a else None for i in range(x.ndim)])
  x = x.shrink([(start, min(x.shape[a], start + (cnt - 1) * step + 1)) if i == a else None for i in range(x.ndim)])
  if step == 1: return x
  n = x.shape[a]
  x = x.pad([(0, cnt * step - n) if i == a else None for i in range(x.ndim)])
  x = x.reshape(x.shape[:a] + (cnt, step) + x.shape[a + 1:])
  x = x.shrink([(0, 1) if i == a + 1 else None for i in range(x.ndim)])
  return x.reshape(x.shape[:a] + (cnt,) + x.shape[a + 2:])

@op("Slice")
def _slice_op(c: Call) -> Tensor:
  x = c.t(0)
  if c.opset < 10: return _slice(x, list(c.attr("starts")), list(c.attr("ends")), c.attr("axes"), None)
  starts, ends = c.sizes(1), c.sizes(2)
  assert starts is not None and ends is not None
  return _slice(x, starts, ends, c.ints(3), c.ints(4))

@op("Expand", since=8)
def _expand(c: Call) -> Tensor:
  x, shape = c.t(0), c.sizes(1)
  assert shape is not None
  out = broadcast_shape(x.shape, tuple(shape), op="ONNX Expand")
  return x.reshape((1,) * (len(out) - x.ndim) + x.shape).expand(out)

@op("Tile")
def _tile(c: Call) -> Tensor:
  x = c.t(0)
  reps = c.ints(1)
  assert reps is not None
  return x.repeat(reps) if x.ndim else x

@op("Pad")
def _pad(c: Call) -> Tensor:
  x = c.t(0)
  mode = c.attr("mode", "constant")
  if c.opset < 11: pads, value, axes = list(c.attr("pads", c.attr("paddings", []))), c.attr("value", 0.0), None
  else:
    pads = c.ints(1) or []
    value = c.static(2) if c.has(2) else 0
    value = np.array(value).reshape(-1)[0].item() if value is not None else 0
    axes = c.ints(3) if c.opset >= 18 else None
  axes = [_axis(a, x.ndim) for a in axes] if axes is not None else list(range(x.ndim))
  k = len(axes)
  pairs: list[tuple[int, int]] = [(0, 0)] * x.ndim
  for i, a in enumerate(axes): pairs[a] = (pads[i], pads[i + k])
  if mode == "constant": return x.pad(pairs, value=value)
  if mode == "edge": return x.pad(pairs, mode="replicate")
  if mode == "reflect": return x.pad(pairs, mode="reflect")
  if mode == "wrap": return x.pad(pairs, mode="circular")
  raise c.error(f"Pad mode {mode!r} is not known")

@op("DepthToSpace")
def _d2s(c: Call) -> Tensor:
  x, b = c.t(0), c.attr("blocksize")
  n, ch, h, w = x.shape
  if (mode := c.attr("mode", "DCR")) not in ("DCR", "CRD"): raise c.error(f"mode must be DCR or CRD, it is {mode!r}")
  if mode == "DCR":
    return x.reshape(n, b, b, ch // (b * b), h, w).permute(0, 3, 4, 1, 5, 2).reshape(n, ch // (b * b), h * b, w * b)
  return x.reshape(n, ch // (b * b), b, b, h, w).permute(0, 1, 4, 2, 5, 3).reshape(n, ch // (b * b), h * b, w * b)

@op("SpaceToDepth")
def _s2d(c: Call) -> Tensor:
  x, b = c.t(0), c.attr("blocksize")
  n, ch, h, w = x.shape
  mode = c.attr("mode", "DCR")
  if mode not in ("DCR", "CRD"): raise c.error(f"mode must be DCR or CRD, it is {mode!r}")
  # DCR: the block offset is the outer part of the new channel; CRD (opset 28): the old channel is
  order = (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4)
  return x.reshape(n, ch, h // b, b, w // b, b).permute(*order).reshape(n, ch * b * b, h // b, w // b)

@op("Trilu", since=14)
def _trilu(c: Call) -> Tensor:
  x = c.t(0)
  k = int(c.ints(1)[0]) if c.has(1) else 0  # type: ignore[index]
  return x.triu(k) if c.attr("upper", 1) else x.tril(k)

# ---- indexing ----

def _wrap_index(idx: Tensor, n: int) -> Tensor:
  idx = idx.cast(dtypes.int64) if idx.dtype is not dtypes.int64 else idx
  return (idx < 0).where(idx + n, idx)

@op("Gather")
def _gather(c: Call) -> Tensor:
  x, idx = c.t(0), c.t(1)
  ax = _axis(c.attr("axis", 0), x.ndim)
  idx = _wrap_index(idx, x.shape[ax])  # type: ignore[arg-type]  # a symbolic size adds as a kernel variable
  flat = idx.reshape(-1)
  # out[pre, i, post] = x[pre, idx[i], post]
  xx = x.permute([ax] + [i for i in range(x.ndim) if i != ax])
  g = _take_rows(xx, flat)  # (len(idx), *others)
  g = g.reshape(idx.shape + xx.shape[1:])
  k = idx.ndim
  order = list(range(k, k + ax)) + list(range(k)) + list(range(k + ax, g.ndim))
  return g.permute(order)

def _take_rows(x: Tensor, idx: Tensor) -> Tensor:
  """x[idx] along axis 0 for a 1-d int index (a one-hot compare fused into a sum; an index out of range gives 0)."""
  n = x.shape[0]
  if idx.shape[0] == 0 or n == 0: return Tensor.zeros(idx.shape[0], *x.shape[1:], dtype=x.dtype, device=x.device)
  hit = idx.reshape(-1, 1) == Tensor.arange(n, device=x.device).cast(idx.dtype).reshape(1, n)
  rest = x.shape[1:]
  hx = hit.reshape(idx.shape[0], n, *([1] * len(rest)))
  xe = x.reshape(1, n, *rest)
  if x.dtype is dtypes.bool: return (hx & xe).any(1)
  # NOTE: a where, not a product: 0 * inf would be nan in the rows not picked
  return hx.where(xe, _const(0, x.dtype, x)).sum(1).cast(x.dtype)

@op("GatherElements")
def _gather_el(c: Call) -> Tensor:
  x, idx = c.t(0), c.t(1)
  ax = _axis(c.attr("axis", 0), x.ndim)
  return x.gather(ax, _wrap_index(idx, x.int_shape("ONNX GatherElements")[ax]))

@op("GatherND")
def _gather_nd(c: Call) -> Tensor:
  x, idx = c.t(0), c.t(1)
  b = c.attr("batch_dims", 0)
  k = idx.int_shape("ONNX GatherND")[-1]
  bshape = x.shape[:b]
  nb = prod(bshape)
  rest = x.shape[b + k:]
  xs = x.reshape(nb, prod(x.shape[b:b + k]), *rest)
  idx = idx.cast(dtypes.int64)
  flat = None
  for j in range(k):
    n = x.shape[b + j]
    ij = idx[..., j]
    ij = (ij < 0).where(ij + n, ij)
    flat = ij if flat is None else flat * n + ij
  assert flat is not None
  mid = idx.shape[b:-1]
  flat = flat.reshape(nb, prod(mid))
  out = [_take_rows(xs[i], flat[i]) for i in range(nb)]
  res = Tensor.stack(*out) if out else Tensor.zeros(0, prod(mid), *rest, dtype=x.dtype)
  return res.reshape(*bshape, *mid, *rest)

def _scatter_elements(x: Tensor, ax: int, idx: Tensor, upd: Tensor, red: str) -> Tensor:
  idx = _wrap_index(idx, x.int_shape("ONNX ScatterElements")[ax])
  if red == "none": return x.scatter(ax, idx, upd)
  m = {"add": "sum", "mul": "prod", "max": "amax", "min": "amin"}[red]
  return x.scatter_reduce(ax, idx, upd, m, include_self=True)

@op("ScatterElements", "Scatter")
def _scatter_el(c: Call) -> Tensor:
  x, idx, upd = c.t(0), c.t(1), c.t(2)
  return _scatter_elements(x, _axis(c.attr("axis", 0), x.ndim), idx, upd, c.attr("reduction", "none"))

@op("ScatterND")
def _scatter_nd(c: Call) -> Tensor:
  x, idx, upd = c.t(0), c.t(1), c.t(2)
  k = idx.int_shape("ONNX ScatterND")[-1]
  red = c.attr("reduction", "none")
  lead = x.shape[:k]
  rest = x.shape[k:]
  n = prod(lead)
  idx = idx.cast(dtypes.int64)
  flat = None
  for j in range(k):
    ij = idx[..., j]
    ij = (ij < 0).where(ij + lead[j], ij)
    flat = ij if flat is None else flat * lead[j] + ij
  assert flat is not None
  flat = flat.reshape(-1)
  m = flat.shape[0]
  upd = upd.reshape(m, *rest)
  xs = x.reshape(n, *rest)
  # ScatterND: the updates are applied in order; later writes to the same row win (none), or combine (reductions)
  hit = (flat.reshape(m, 1) == Tensor.arange(n, device=x.device).cast(dtypes.int64).reshape(1, n))  # (m, n)
  hx = hit.reshape(m, n, *([1] * len(rest)))
  ue = upd.reshape(m, 1, *rest)
  any_hit = hit.any(0).reshape(n, *([1] * len(rest)))
  if red == "none":
    last = (hit.cast(dtypes.int32) * Tensor.arange(1, m + 1, device=x.device).reshape(m, 1)).max(0)  # (n,)
    sel = hit & (Tensor.arange(1, m + 1, device=x.device).reshape(m, 1) == last.reshape(1, n))
    v = sel.reshape(m, n, *([1] * len(rest))).where(ue, _const(0, x.dtype, x)).sum(0).cast(x.dtype)
    return any_hit.where(v, xs).reshape(x.shape)
  if red == "add": v = hx.where(ue, _const(0, x.dtype, x)).sum(0).cast(x.dtype); return (xs + v).reshape(x.shape)
  if red == "mul": v = hx.where(ue, _const(1, x.dtype, x)).prod(0).cast(x.dtype); return (xs * v).reshape(x.shape)
  low, high = (dtypes.min(x.dtype), dtypes.max(x.dtype))
  if red == "max": return any_hit.where(xs.maximum(hx.where(ue, _const(low, x.dtype, x)).max(0)), xs).reshape(x.shape)
  if red == "min": return any_hit.where(xs.minimum(hx.where(ue, _const(high, x.dtype, x)).min(0)), xs).reshape(x.shape)
  raise c.error(f"reduction {red!r}")

@op("OneHot", since=9)
def _onehot(c: Call) -> Tensor:
  idx, depth_v, values = c.t(0), c.static(1), c.t(2)
  depth = int(np.array(depth_v).reshape(-1)[0])
  ax = c.attr("axis", -1)
  ax = ax + idx.ndim + 1 if ax < 0 else ax
  idx = idx.cast(dtypes.int64) if not dtypes.is_float(idx.dtype) else idx.cast(dtypes.int64)
  idx = (idx < 0).where(idx + depth, idx)
  shape = [1] * (idx.ndim + 1)
  shape[ax] = depth
  rng = Tensor.arange(depth, device=idx.device).cast(dtypes.int64).reshape(shape)
  hit = idx.unsqueeze(ax) == rng
  return hit.where(values[1], values[0])

@op("Compress", since=9)
def _compress(c: Call) -> Tensor:
  x, cond = c.t(0), c.t(1)
  ax = c.attr("axis")
  if ax is None: x, ax = x.reshape(-1), 0
  ax = _axis(ax, x.ndim)
  n = min(cond.shape[0], x.shape[ax])
  cond = cond[:n].cast(dtypes.bool)
  pos = _nonzero_1d(cond, c)
  return _gather_axis(x, ax, pos)

def _gather_axis(x: Tensor, ax: int, idx: Tensor) -> Tensor:
  xx = x.permute([ax] + [i for i in range(x.ndim) if i != ax])
  g = _take_rows(xx, idx)
  return g.permute(list(range(1, ax + 1)) + [0] + list(range(ax + 1, g.ndim)))

def _nonzero_1d(m: Tensor, c: Call) -> Tensor:
  """The positions of the True elements of a 1-d bool tensor, in order (their count is read to the host)."""
  n = m.shape[0]
  cnt = int(m.cast(dtypes.int32).sum().item())
  if cnt == 0: return Tensor.zeros(0, dtype=dtypes.int64, device=m.device)
  rank = m.cast(dtypes.int32).cumsum(0) - 1  # the output slot of each True element
  slots = Tensor.arange(cnt, device=m.device).reshape(cnt, 1)
  hit = (rank.reshape(1, n) == slots) & m.reshape(1, n)
  return (hit.cast(dtypes.int64) * Tensor.arange(n, device=m.device).cast(dtypes.int64).reshape(1, n)).sum(1)

@op("NonZero", since=9)
def _nonzero(c: Call) -> Tensor:
  x = c.t(0)
  shape = x.int_shape("ONNX NonZero") if x.ndim else (1,)
  flat = _nonzero_1d((x != 0).reshape(-1), c)
  cols, rem = [], flat
  for i in range(len(shape) - 1, -1, -1):
    cols.append(rem.mod(shape[i]) if i else rem)
    rem = rem.div(shape[i], rounding_mode="floor")
  if not x.ndim: return flat.reshape(0, -1).cast(dtypes.int64)
  return Tensor.stack(*cols[::-1])

# ---- reductions ----

def _reduce_axes(c: Call, x: Tensor, attr_until: int) -> tuple[list[int] | None, bool]:
  axes = (list(c.attr("axes")) if c.attr("axes") is not None else None) if c.opset < attr_until else c.ints(1)
  noop = c.attr("noop_with_empty_axes", 0)
  if not axes: return (None if not noop else []), bool(noop)
  return [_axis(a, x.ndim) for a in axes], bool(noop)

def _reducer(fn: Callable[[Tensor, tuple[int, ...], bool], Tensor], attr_until: int = 18,
             post: Callable[[Tensor], Tensor] | None = None) -> Callable[[Call], Tensor]:
  def run(c: Call) -> Tensor:
    x = c.t(0)
    axes, noop = _reduce_axes(c, x, attr_until)
    keep = bool(c.attr("keepdims", 1))
    if axes == [] and noop: return post(x) if post else x
    ax = tuple(range(x.ndim)) if axes is None else tuple(axes)
    return fn(x, ax, keep)
  return run

def _rmax(x: Tensor, ax: tuple[int, ...], keep: bool) -> Tensor:
  if any(x.shape[a] == 0 for a in ax):
    shape = tuple(1 if i in ax else s for i, s in enumerate(x.shape)) if keep else \
      tuple(s for i, s in enumerate(x.shape) if i not in ax)
    return Tensor.full(shape, dtypes.min(x.dtype) if x.dtype is not dtypes.bool else False, dtype=x.dtype)
  return x.max(ax, keepdim=keep)
def _rmin(x: Tensor, ax: tuple[int, ...], keep: bool) -> Tensor:
  if any(x.shape[a] == 0 for a in ax):
    shape = tuple(1 if i in ax else s for i, s in enumerate(x.shape)) if keep else \
      tuple(s for i, s in enumerate(x.shape) if i not in ax)
    return Tensor.full(shape, dtypes.max(x.dtype) if x.dtype is not dtypes.bool else True, dtype=x.dtype)
  return x.min(ax, keepdim=keep)

op("ReduceSum")(_reducer(lambda x, a, k: x.sum(a, keepdim=k).cast(x.dtype), 13))
op("ReduceMean")(_reducer(lambda x, a, k: x.mean(a, keepdim=k).cast(x.dtype)))
op("ReduceMax")(_reducer(_rmax))
op("ReduceMin")(_reducer(_rmin))
op("ReduceProd")(_reducer(lambda x, a, k: x.prod(a, keepdim=k).cast(x.dtype)))
op("ReduceL1")(_reducer(lambda x, a, k: x.abs().sum(a, keepdim=k).cast(x.dtype), post=lambda x: x.abs()))
op("ReduceL2")(_reducer(lambda x, a, k: (x * x).sum(a, keepdim=k).sqrt().cast(x.dtype), post=lambda x: x.abs()))
op("ReduceSumSquare")(_reducer(lambda x, a, k: (x * x).sum(a, keepdim=k).cast(x.dtype), post=lambda x: x * x))
op("ReduceLogSum")(_reducer(lambda x, a, k: x.sum(a, keepdim=k).log(), post=lambda x: x.log()))
op("ReduceLogSumExp")(_reducer(lambda x, a, k: _logsumexp(x, a, k), post=lambda x: x))

def _logsumexp(x: Tensor, a: tuple[int, ...], k: bool) -> Tensor:
  if any(x.shape[i] == 0 for i in a): return x.exp().sum(a, keepdim=k).log()
  return x.logsumexp(a, keepdim=k).cast(x.dtype)

def _argext(c: Call, largest: bool) -> Tensor:
  x = c.t(0)
  ax, keep = _axis(c.attr("axis", 0), x.ndim), bool(c.attr("keepdims", 1))
  if c.attr("select_last_index", 0):
    r = x.flip(ax)._argext(ax, keep, largest).cast(dtypes.int64)
    return (x.int_shape("ONNX ArgMax/ArgMin")[ax] - 1) - r
  return x._argext(ax, keep, largest).cast(dtypes.int64)
op("ArgMax")(lambda c: _argext(c, True))
op("ArgMin")(lambda c: _argext(c, False))

def _cum(c: Call, kind: str) -> Tensor:
  x = c.t(0)
  ax = _axis(int(c.scalar(1)), x.ndim)
  if c.attr("reverse", 0): x = x.flip(ax)
  y = x.cumsum(ax) if kind == "sum" else x.cumprod(ax)
  if c.attr("exclusive", 0):
    ident = 0 if kind == "sum" else 1
    y = y.shrink([(0, s - 1) if i == ax else None for i, s in enumerate(y.shape)]).pad(
      [(1, 0) if i == ax else None for i in range(y.ndim)], value=ident)
  if c.attr("reverse", 0): y = y.flip(ax)
  return y.cast(x.dtype)
op("CumSum", since=11)(lambda c: _cum(c, "sum"))
op("CumProd", since=26)(lambda c: _cum(c, "prod"))

@op("TopK")
def _topk(c: Call) -> tuple[Tensor, Tensor]:
  x = c.t(0)
  k = c.attr("k") if c.opset < 10 else int(c.scalar(1))
  ax = _axis(c.attr("axis", -1), x.ndim)
  largest = bool(c.attr("largest", 1))
  v, i = x.topk(k, dim=ax, largest=largest)
  return v, i.cast(dtypes.int64)

# ---- softmax family ----

def _coerced(c: Call, fn: Callable[[Tensor, int], Tensor]) -> Tensor:
  x = c.t(0)
  if c.opset >= 13: return fn(x, _axis(c.attr("axis", -1), x.ndim))
  ax = _axis(c.attr("axis", 1), x.ndim)
  return fn(x.reshape(prod(x.shape[:ax]), prod(x.shape[ax:])), 1).reshape(x.shape)

op("Softmax")(lambda c: _coerced(c, _softmax))
op("LogSoftmax")(lambda c: _coerced(c, lambda x, a: x.log_softmax(a)))
op("Hardmax")(lambda c: _coerced(c, lambda x, a: (x._argext(a, True, True) ==
                                                Tensor.arange(x.shape[a], device=x.device).reshape(
                                                  [-1 if i == a else 1 for i in range(x.ndim)])).cast(x.dtype)))

# ---- matmul, conv, pooling ----

@op("MatMul")
def _matmul(c: Call) -> Tensor: return c.t(0).matmul(c.t(1))

@op("Gemm")
def _gemm(c: Call) -> Tensor:
  a, b = c.t(0), c.t(1)
  if c.attr("transA", 0): a = a.T
  if c.attr("transB", 0): b = b.T
  y = a.matmul(b)
  alpha, beta = c.attr("alpha", 1.0), c.attr("beta", 1.0)
  if alpha != 1.0: y = y * alpha
  if c.has(2):
    cc = c.t(2)
    y = y + (cc * beta if beta != 1.0 else cc)
  return y.cast(a.dtype)

def _conv_pads(c: Call, spatial: Sequence[int], k: Sequence[int], s: Sequence[int],
               d: Sequence[int]) -> list[tuple[int, int]]:
  n = len(spatial)
  auto = c.attr("auto_pad", "NOTSET")
  if auto in ("SAME_UPPER", "SAME_LOWER"):
    out = []
    for i in range(n):
      o = -(-spatial[i] // s[i])
      tot = max(0, (o - 1) * s[i] + (k[i] - 1) * d[i] + 1 - spatial[i])
      small = tot // 2
      out.append((small, tot - small) if auto == "SAME_UPPER" else (tot - small, small))
    return out
  if auto == "VALID": return [(0, 0)] * n
  p = c.attr("pads") or [0] * (2 * n)
  return [(p[i], p[i + n]) for i in range(n)]

@op("Conv")
def _conv(c: Call) -> Tensor:
  x, w, b = c.t(0), c.t(1), c.opt(2)
  return _conv_core(c, x, w, b)

def _conv_core(c: Call, x: Tensor, w: Tensor, b: Tensor | None) -> Tensor:
  n = w.ndim - 2
  k = c.attr("kernel_shape") or w.int_shape("ONNX Conv")[2:]
  s, d = c.attr("strides") or [1] * n, c.attr("dilations") or [1] * n
  pads = _conv_pads(c, x.int_shape("ONNX Conv", n), k, s, d)
  xp = x.pad([(0, 0), (0, 0)] + pads)
  return xp.conv2d(w, b, groups=c.attr("group", 1), stride=tuple(s), dilation=tuple(d))

@op("ConvTranspose")
def _convt(c: Call) -> Tensor:
  x, w, b = c.t(0), c.t(1), c.opt(2)
  n = w.ndim - 2
  k = c.attr("kernel_shape") or w.int_shape("ONNX ConvTranspose")[2:]
  s, d = c.attr("strides") or [1] * n, c.attr("dilations") or [1] * n
  op_ = c.attr("output_padding") or [0] * n
  sp = x.int_shape("ONNX ConvTranspose", n)
  full = [(sp[i] - 1) * s[i] + (k[i] - 1) * d[i] + 1 for i in range(n)]
  auto = c.attr("auto_pad", "NOTSET")
  if c.attr("output_shape") is not None or auto in ("SAME_UPPER", "SAME_LOWER"):
    outs = list(c.attr("output_shape"))[-n:] if c.attr("output_shape") is not None else [sp[i] * s[i] for i in range(n)]
    pads = []
    for i in range(n):
      tot = full[i] + op_[i] - outs[i]
      if auto == "SAME_UPPER": pads.append((tot // 2, tot - tot // 2))
      else: pads.append((tot - tot // 2, tot // 2))
  elif auto == "VALID": pads = [(0, 0)] * n
  else:
    p = c.attr("pads") or [0] * (2 * n)
    pads = [(p[i], p[i + n]) for i in range(n)]
  y = x.conv_transpose2d(w, None, groups=c.attr("group", 1), stride=tuple(s), dilation=tuple(d))
  # the full output, extended by output_padding (zeros), cropped by the pads (a negative pad extends)
  ext = [(0, 0), (0, 0)] + [(-pads[i][0], op_[i] - pads[i][1]) for i in range(n)]
  y = y.pad(ext)
  return y if b is None else y + b.reshape(1, -1, *([1] * n))

def _pool_args(c: Call, x: Tensor) -> tuple[list[int], list[int], list[int], list[tuple[int, int]]]:
  k = list(c.attr("kernel_shape"))
  n = len(k)
  s, d = list(c.attr("strides") or [1] * n), list(c.attr("dilations") or [1] * n)
  return k, s, d, _conv_pads(c, x.int_shape("ONNX pooling", n), k, s, d)

def _flat_pads(pads: list[tuple[int, int]]) -> list[int]: return flatten([list(p) for p in pads[::-1]])

def _pool_out(i: int, k: int, s: int, d: int, b: int, e: int, ceil: bool) -> int:
  num = i + b + e - d * (k - 1) - 1
  o = (-(-num // s) if ceil else num // s) + 1
  # NOTE: as the ONNX reference, a last window that would start inside the end padding is dropped
  if ceil and (o - 1) * s >= i + b: o -= 1
  return o

@op("MaxPool")
def _maxpool(c: Call) -> Any:
  x = c.t(0)
  k, s, d, pads = _pool_args(c, x)
  n = len(k)
  ceil = bool(c.attr("ceil_mode", 0))
  low = -math.inf if dtypes.is_float(x.dtype) else dtypes.min(x.dtype)
  outs = [_pool_out(x.int_shape("ONNX pooling", n)[i], k[i], s[i], d[i], *pads[i], ceil) for i in range(n)]
  # pad so exactly `outs` windows fit: the pads, then more at the end for ceil mode windows
  ext = [(pads[i][0], max(0, (outs[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1 - x.shape[2 + i] - pads[i][0]))
         for i in range(n)]
  xp = x.pad([(0, 0), (0, 0)] + ext, value=low)
  win = xp._pool(tuple(k), tuple(s), tuple(d))
  win = win.shrink([None, None] + [(0, o) for o in outs] + [None] * n)
  out = win.max(tuple(range(-n, 0)))
  if len(c.node.outputs) < 2 or not c.node.outputs[1]: return out
  x.int_shape("ONNX MaxPool indices")
  sp = x.shape[2:]
  # indices: flat positions in the (N, C, *spatial) input (row-major, or column-major for storage_order=1)
  if c.attr("storage_order", 0):
    strides = [prod(sp[:i]) for i in range(n)]
  else: strides = [prod(sp[i + 1:]) for i in range(n)]
  pos = None
  for i in range(n):
    a = Tensor.arange(sp[i], device=x.device).cast(dtypes.int64) * strides[i]
    a = a.reshape([-1 if j == i else 1 for j in range(n)])
    pos = a if pos is None else pos + a
  assert pos is not None
  pos = pos.pad(ext, value=-1)._pool(tuple(k), tuple(s), tuple(d)).shrink([(0, o) for o in outs] + [None] * n)
  hit = (win == out.reshape(*out.shape, *([1] * n))) & (pos >= 0)
  big = prod(sp) + 1
  idx = hit.where(pos.reshape(1, 1, *pos.shape), big).min(tuple(range(-n, 0)))
  base = Tensor.arange(x.shape[0] * x.shape[1], device=x.device).cast(dtypes.int64).reshape(x.shape[0], x.shape[1],
                                                                                               *([1] * n)) * prod(sp)
  return out, idx + base

@op("AveragePool")
def _avgpool(c: Call) -> Tensor:
  x = c.t(0)
  k, s, d, pads = _pool_args(c, x)
  n = len(k)
  ceil = bool(c.attr("ceil_mode", 0))
  cip = bool(c.attr("count_include_pad", 0))
  outs = [_pool_out(x.int_shape("ONNX pooling", n)[i], k[i], s[i], d[i], *pads[i], ceil) for i in range(n)]
  ext = [(pads[i][0], max(0, (outs[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1 - x.shape[2 + i] - pads[i][0]))
         for i in range(n)]
  xp = _float_like(x).pad([(0, 0), (0, 0)] + ext)
  win = xp._pool(tuple(k), tuple(s), tuple(d)).shrink([None, None] + [(0, o) for o in outs] + [None] * n)
  total = win.sum(tuple(range(-n, 0)))
  # the divisor per window: positions inside the input (and inside the pads with count_include_pad)
  ones = Tensor.ones(*x.shape[2:], device=x.device)
  cnt_src = ones.pad([(pads[i][0], pads[i][1]) for i in range(n)], value=1.0 if cip else 0.0) if cip else ones.pad(
    [(pads[i][0], pads[i][1]) for i in range(n)])
  extra = [(0, max(0, ext[i][1] - pads[i][1])) for i in range(n)]
  cnt_src = cnt_src.pad(extra)
  cnt = cnt_src._pool(tuple(k), tuple(s), tuple(d)).shrink([(0, o) for o in outs] + [None] * n).sum(tuple(range(-n, 0)))
  return (total / cnt).cast(x.dtype)

@op("LpPool")
def _lppool(c: Call) -> Tensor:
  x = c.t(0)
  k, s, d, pads = _pool_args(c, x)
  n, p = len(k), c.attr("p", 2)
  ceil = bool(c.attr("ceil_mode", 0))
  outs = [_pool_out(x.int_shape("ONNX pooling", n)[i], k[i], s[i], d[i], *pads[i], ceil) for i in range(n)]
  ext = [(pads[i][0], max(0, (outs[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1 - x.shape[2 + i] - pads[i][0]))
         for i in range(n)]
  win = x.abs().pow(p).pad([(0, 0), (0, 0)] + ext)._pool(tuple(k), tuple(s), tuple(d))
  return win.shrink([None, None] + [(0, o) for o in outs] + [None] * n).sum(tuple(range(-n, 0))).pow(1.0 / p)

@op("GlobalAveragePool")
def _gap(c: Call) -> Tensor:
  x = c.t(0)
  return x.mean(tuple(range(2, x.ndim)), keepdim=True).cast(x.dtype)
@op("GlobalMaxPool")
def _gmp(c: Call) -> Tensor:
  x = c.t(0)
  return x.max(tuple(range(2, x.ndim)), keepdim=True)
@op("GlobalLpPool")
def _glp(c: Call) -> Tensor:
  x, p = c.t(0), c.attr("p", 2)
  return x.abs().pow(p).sum(tuple(range(2, x.ndim)), keepdim=True).pow(1.0 / p)

@op("MaxUnpool")
def _maxunpool(c: Call) -> Tensor:
  x, idx = c.t(0), c.t(1)
  k = c.attr("kernel_shape")
  n = len(k)
  s, p = c.attr("strides") or [1] * n, c.attr("pads") or [0] * (2 * n)
  inferred = [(x.shape[2 + i] - 1) * s[i] + k[i] - p[i] - p[i + n] for i in range(n)]
  total = x.shape[0] * x.shape[1] * prod(inferred)
  flat = Tensor.zeros(total, dtype=x.dtype, device=x.device)
  flat = flat.scatter(0, idx.reshape(-1).cast(dtypes.int64), x.reshape(-1))
  y = flat.reshape(x.shape[0], x.shape[1], *inferred)
  if not c.has(2): return y
  # the indices address the inferred shape; an output_shape only appends zeros at the end of each spatial dim
  want = c.ints(2)
  assert want is not None
  if len(want) != 2 + n or list(want[:2]) != list(x.shape[:2]) or any(w < i for w, i in zip(want[2:], inferred)):
    raise c.error(f"output_shape {want} must be {list(x.shape[:2])} then spatial sizes >= {inferred}")
  return y.pad([(0, 0), (0, 0)] + [(0, w - i) for w, i in zip(want[2:], inferred)])

# ---- normalization ----

@op("BatchNormalization")
def _batchnorm(c: Call) -> Any:
  x, scale, bias, mean, var = (c.t(i) for i in range(5))
  eps, mom = c.attr("epsilon", 1e-5), c.attr("momentum", 0.9)
  shape = (1, -1) + (1,) * (x.ndim - 2)
  training = c.attr("training_mode", 0) if c.opset >= 14 else 0
  if training:
    ax = tuple(i for i in range(x.ndim) if i != 1)
    bm, bv = x.mean(ax), x.var(ax, correction=0)
    y = (x - bm.reshape(shape)) * (bv.reshape(shape) + eps).rsqrt() * scale.reshape(shape) + bias.reshape(shape)
    return y.cast(x.dtype), (mean * mom + bm * (1 - mom)).cast(mean.dtype), (var * mom + bv * (1 - mom)).cast(var.dtype)
  y = (x - mean.reshape(shape)) * (var.reshape(shape) + eps).rsqrt() * scale.reshape(shape) + bias.reshape(shape)
  return y.cast(x.dtype)

@op("InstanceNormalization")
def _instnorm(c: Call) -> Tensor:
  x, scale, bias = c.t(0), c.t(1), c.t(2)
  ax = tuple(range(2, x.ndim))
  xf = _float_like(x).cast(dtypes.float32) if x.dtype is dtypes.float16 else x
  m, v = xf.mean(ax, keepdim=True), xf.var(ax, keepdim=True, correction=0)
  shape = (1, -1) + (1,) * (x.ndim - 2)
  return ((xf - m) * (v + c.attr("epsilon", 1e-5)).rsqrt() * scale.reshape(shape) + bias.reshape(shape)).cast(x.dtype)

def _stash(c: Call, x: Tensor) -> Tensor:
  return x.cast(dtypes.float32) if c.attr("stash_type", 1) == 1 and x.dtype is not dtypes.float64 else x

@op("LayerNormalization", since=17)
def _layernorm(c: Call) -> Any:
  x, scale, bias = c.t(0), c.t(1), c.opt(2)
  ax0 = _axis(c.attr("axis", -1), x.ndim)
  ax = tuple(range(ax0, x.ndim))
  xf = _stash(c, x)
  m = xf.mean(ax, keepdim=True)
  v = ((xf - m) * (xf - m)).mean(ax, keepdim=True)
  inv = (v + c.attr("epsilon", 1e-5)).rsqrt()
  y = ((xf - m) * inv).cast(x.dtype) * scale
  if bias is not None: y = y + bias
  return y, m.cast(xf.dtype), inv

@op("RMSNormalization", since=23)
def _rmsnorm(c: Call) -> Tensor:
  x, scale = c.t(0), c.t(1)
  ax0 = _axis(c.attr("axis", -1), x.ndim)
  ax = tuple(range(ax0, x.ndim))
  xf = _stash(c, x)
  inv = ((xf * xf).mean(ax, keepdim=True) + c.attr("epsilon", 1e-5)).rsqrt()
  return (xf * inv).cast(x.dtype) * scale

@op("GroupNormalization", since=18)
def _groupnorm(c: Call) -> Tensor:
  x, scale, bias = c.t(0), c.t(1), c.t(2)
  g = c.attr("num_groups")
  n, ch = x.shape[:2]
  xf = _stash(c, x)
  xg = xf.reshape(n, g, -1)
  m, v = xg.mean(-1, keepdim=True), xg.var(-1, keepdim=True, correction=0)
  y = ((xg - m) * (v + c.attr("epsilon", 1e-5)).rsqrt()).reshape(x.shape).cast(x.dtype)
  shape = (1, -1) + (1,) * (x.ndim - 2)
  if c.opset < 21 and scale.shape[0] == g and g != ch:
    scale, bias = scale.reshape(g, 1).expand(g, ch // g).reshape(ch), bias.reshape(g, 1).expand(g, ch // g).reshape(ch)
  return y * scale.reshape(shape) + bias.reshape(shape)

@op("LpNormalization")
def _lpnorm(c: Call) -> Tensor:
  x = c.t(0)
  ax, p = _axis(c.attr("axis", -1), x.ndim), c.attr("p", 2)
  nrm = x.abs().sum(ax, keepdim=True) if p == 1 else (x * x).sum(ax, keepdim=True).sqrt()
  return (nrm == 0).where(0, x / nrm).cast(x.dtype)

@op("MeanVarianceNormalization")
def _mvn(c: Call) -> Tensor:
  x = c.t(0)
  ax = tuple(_axis(a, x.ndim) for a in (c.attr("axes") or [0, 2, 3]))
  m = x.mean(ax, keepdim=True)
  v = ((x - m) * (x - m)).mean(ax, keepdim=True)
  return (x - m) / (v.sqrt() + 1e-9)

@op("LRN")
def _lrn(c: Call) -> Tensor:
  x = c.t(0)
  size, alpha, beta, bias = c.attr("size"), c.attr("alpha", 1e-4), c.attr("beta", 0.75), c.attr("bias", 1.0)
  sq = x * x
  lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
  sqp = sq.pad([(0, 0), (lo, hi)] + [(0, 0)] * (x.ndim - 2))
  win = sum(sqp.shrink([None, (i, i + x.shape[1])] + [None] * (x.ndim - 2)) for i in range(size))
  return x / (win * (alpha / size) + bias).pow(beta)

# ---- losses ----

def _nll(c: Call, logp: Tensor, tgt: Tensor, w: Tensor | None) -> Tensor:
  red, ign = c.attr("reduction", "mean"), c.attr("ignore_index")
  tgt = tgt.cast(dtypes.int64)
  valid = tgt != ign if ign is not None else None
  t_safe = valid.where(tgt, 0) if valid is not None else tgt
  picked = logp.gather(1, t_safe.unsqueeze(1)).squeeze(1)
  wt = _take_rows(w, t_safe.reshape(-1)).reshape(t_safe.shape) if w is not None else None
  if valid is not None: wt = valid.cast(logp.dtype) if wt is None else valid.where(wt, 0)
  loss = -picked if wt is None else -picked * wt
  if red == "none": return loss
  if red == "sum": return loss.sum()
  if wt is None: return loss.mean()
  return loss.sum() / wt.sum()

@op("NegativeLogLikelihoodLoss", since=12)
def _nll_op(c: Call) -> Tensor: return _nll(c, c.t(0), c.t(1), c.opt(2)).cast(c.t(0).dtype)

@op("SoftmaxCrossEntropyLoss", since=12)
def _sce(c: Call) -> Any:
  x = c.t(0)
  logp = x.log_softmax(1)
  loss = _nll(c, logp, c.t(1), c.opt(2)).cast(x.dtype)
  return (loss, logp) if len(c.node.outputs) > 1 else loss

# ---- dropout, random ----

@op("Dropout")
def _dropout(c: Call) -> Any:
  x = c.t(0)
  training = c.static(2) if c.opset >= 12 and c.has(2) else False
  ratio = c.static(1) if c.opset >= 12 and c.has(1) else c.attr("ratio", 0.5)
  if training and float(np.array(ratio).reshape(-1)[0]) > 0:
    raise c.error("Dropout in training mode draws random numbers no reference can match")
  mask = Tensor.ones(*x.shape, dtype=dtypes.bool, device=x.device)
  return (x, mask) if len(c.node.outputs) > 1 else x

# ---- einsum, misc math ----

@op("Einsum", since=12)
def _einsum(c: Call) -> Tensor:
  ts = [c.t(i) for i in range(len(c))]
  return Tensor.einsum(c.attr("equation").replace(" ", ""), *ts).cast(ts[0].dtype)

@op("Det", since=11)
def _det(c: Call) -> Tensor:
  x = c.t(0)
  n = x.int_shape("ONNX Det")[-1]
  a = x.reshape(-1, n, n).cast(dtypes.float64)
  # Gaussian elimination with partial pivoting, unrolled over the (static) size
  det = Tensor.ones(a.shape[0], dtype=dtypes.float64, device=x.device)
  for k in range(n):
    col = a[:, k:, k].abs()
    p = col.argmax(1) + k
    rows = Tensor.arange(n, device=x.device).reshape(1, n)
    is_k, is_p = rows == k, rows == p.reshape(-1, 1)
    swap = (p != k)
    rowk = (is_k.reshape(-1, n, 1) * a).sum(1)
    rowp = (is_p.reshape(-1, n, 1) * a).sum(1)
    a = is_k.reshape(-1, n, 1).where(rowp.reshape(-1, 1, n), is_p.reshape(-1, n, 1).where(rowk.reshape(-1, 1, n), a))
    piv = a[:, k, k]
    det = det * piv * swap.where(-1.0, 1.0)
    safe = (piv == 0).where(1.0, piv)
    f = a[:, :, k] / safe.reshape(-1, 1)
    below = (Tensor.arange(n, device=x.device) > k).reshape(1, n, 1)
    a = below.where(a - f.reshape(-1, n, 1) * a[:, k, :].reshape(-1, 1, n), a)
  return det.cast(x.dtype).reshape(x.shape[:-2])

@op("CenterCropPad", since=18)
def _ccp(c: Call) -> Tensor:
  x, shape = c.t(0), c.ints(1)
  assert shape is not None
  axes = [_axis(a, x.ndim) for a in (c.attr("axes") or range(x.ndim))]
  for a, s in zip(axes, shape):
    n = x.shape[a]
    if s < n:
      b = (n - s) // 2
      x = x.shrink([(b, b + s) if i == a else None for i in range(x.ndim)])
    elif s > n:
      b = (s - n) // 2
      x = x.pad([(b, s - n - b) if i == a else (0, 0) for i in range(x.ndim)])
  return x

@op("ReverseSequence", since=10)
def _revseq(c: Call) -> Tensor:
  x, lens = c.t(0), c.t(1).cast(dtypes.int64)
  ba, ta = c.attr("batch_axis", 1), c.attr("time_axis", 0)
  T = x.shape[ta]
  t = Tensor.arange(T, device=x.device).cast(dtypes.int64)
  shape_t = [T if i == ta else 1 for i in range(x.ndim)]
  shape_b = [x.shape[ba] if i == ba else 1 for i in range(x.ndim)]
  L = lens.reshape(shape_b)
  tt = t.reshape(shape_t)
  src = (tt < L).where(L - 1 - tt, tt)
  src = src.expand(x.shape)
  return x.gather(ta, src)

# ---- windows and spectral ----

def _window(c: Call, a0: float, a1: float, a2: float = 0.0) -> Tensor:
  size = int(c.scalar(0))
  dt = to_dtype(c.attr("output_datatype", 1), c.node.label())
  N = size if not c.attr("periodic", 1) else size + 1
  n = Tensor.arange(size, device=c.device).cast(dtypes.float64)
  w = a0 - (n * (2 * math.pi / (N - 1))).cos() * a1 + (n * (4 * math.pi / (N - 1))).cos() * a2
  return w.cast(dt)
op("HannWindow", since=17)(lambda c: _window(c, 0.5, 0.5))
op("HammingWindow", since=17)(lambda c: _window(c, 25 / 46, 21 / 46))
op("BlackmanWindow", since=17)(lambda c: _window(c, 0.42, 0.5, 0.08))

# ---- sequences and optionals ----

@op("SequenceConstruct", since=11)
def _seqc(c: Call) -> list: return [c.t(i) for i in range(len(c))]
@op("SequenceEmpty", since=11)
def _seqe(c: Call) -> list: return []
@op("SequenceLength", since=11)
def _seql(c: Call) -> Tensor: return Tensor(np.array(len(c.inputs[0]), np.int64), device=c.device)
@op("SequenceAt", since=11)
def _seqat(c: Call) -> Tensor:
  seq = c.inputs[0]
  return seq[int(c.scalar(1))]
@op("SequenceInsert", since=11)
def _seqins(c: Call) -> list:
  seq = list(c.inputs[0])
  pos = int(c.scalar(2)) if c.has(2) else len(seq)
  if pos < 0: pos += len(seq)
  seq.insert(pos, c.t(1))
  return seq
@op("SequenceErase", since=11)
def _seqerase(c: Call) -> list:
  seq = list(c.inputs[0])
  pos = int(c.scalar(1)) if c.has(1) else -1
  del seq[pos]
  return seq
@op("ConcatFromSequence", since=11)
def _cfs(c: Call) -> Tensor:
  seq = c.inputs[0]
  ax = c.attr("axis")
  if c.attr("new_axis", 0): return Tensor.stack(*seq, dim=_axis(ax, seq[0].ndim + 1))
  return seq[0].cat(*seq[1:], dim=_axis(ax, seq[0].ndim))
@op("SplitToSequence", since=11)
def _s2s(c: Call) -> list:
  x = c.t(0)
  ax = _axis(c.attr("axis", 0), x.ndim)
  if not c.has(1):
    parts = x.split(1, dim=ax)
    return [p.squeeze(ax) for p in parts] if c.attr("keepdims", 1) == 0 else list(parts)
  sp = c.ints(1)
  assert sp is not None
  if c.t(1).ndim == 0: return list(x.split(sp[0], dim=ax))
  return list(x.split(sp, dim=ax))
@op("Optional", since=15)
def _optional(c: Call) -> Any: return c.inputs[0] if c.inputs else None
@op("OptionalHasElement", since=15)
def _opthas(c: Call) -> Tensor:
  return Tensor(np.array(bool(c.inputs) and c.inputs[0] is not None), device=c.device)
@op("OptionalGetElement", since=15)
def _optget(c: Call) -> Any:
  if c.inputs[0] is None: raise c.error("the optional has no element")
  return c.inputs[0]

# ---- control flow ----

@op("If")
def _if(c: Call) -> tuple:
  cond = bool(c.scalar(0))
  return tuple(c.subgraph(c.attr("then_branch") if cond else c.attr("else_branch"), []))

@op("Loop")
def _loop(c: Call) -> tuple:
  body: Graph = c.attr("body")
  M = int(c.scalar(0)) if c.has(0) else None
  cond = bool(c.scalar(1)) if c.has(1) else True
  state = list(c.inputs[2:])
  nstate = len(state)
  scans: list[list[Tensor]] = []
  i = 0
  while (M is None or i < M) and cond:
    it = Tensor(np.array(i, np.int64), device=c.device)
    outs = c.subgraph(body, [it, Tensor(np.array(cond)), *state])
    cond_t, state, sc = outs[0], outs[1:1 + nstate], outs[1 + nstate:]
    if not scans: scans = [[] for _ in sc]
    for lst, v in zip(scans, sc): lst.append(v)
    cond = bool(cond_t.numpy().reshape(-1)[0]) if isinstance(cond_t, Tensor) else True
    state = [s.realize() if isinstance(s, Tensor) else s for s in state]
    i += 1
  nscan = len(c.node.outputs) - nstate
  res: list[Any] = list(state)
  for j in range(nscan):
    if j < len(scans) and scans[j]: res.append(Tensor.stack(*scans[j]))
    else:
      so = body.outputs[1 + nstate + j]
      res.append(Tensor.zeros(0, dtype=DTYPES.get(so.elem, dtypes.float32), device=c.device))
  return tuple(res)

@op("Scan", since=8)
def _scan(c: Call) -> tuple:
  body: Graph = c.attr("body")
  ns = c.attr("num_scan_inputs")
  if c.opset < 9: return _scan8(c, body, ns)
  state = list(c.inputs[:len(c.inputs) - ns])
  xs = [c.t(len(state) + j) for j in range(ns)]
  in_axes = c.attr("scan_input_axes") or [0] * ns
  in_dirs = c.attr("scan_input_directions") or [0] * ns
  nout = len(c.node.outputs) - len(state)
  out_axes = c.attr("scan_output_axes") or [0] * nout
  out_dirs = c.attr("scan_output_directions") or [0] * nout
  in_axes = [_axis(a, x.ndim) for a, x in zip(in_axes, xs)]
  T = xs[0].shape[in_axes[0]] if xs else 0
  outs: list[list[Tensor]] = [[] for _ in range(nout)]
  for t in range(T):
    sl = []
    for x, a, dr in zip(xs, in_axes, in_dirs):
      ti = T - 1 - t if dr else t
      sl.append(x.shrink([(ti, ti + 1) if i == a else None for i in range(x.ndim)]).squeeze(a))
    r = c.subgraph(body, [*state, *sl])
    state = r[:len(state)]
    for lst, v in zip(outs, r[len(state):]): lst.append(v)
  res: list[Any] = list(state)
  for j in range(nout):
    seq = outs[j][::-1] if out_dirs[j] else outs[j]
    st = Tensor.stack(*seq, dim=0)
    a = _axis(out_axes[j], st.ndim)
    if a: st = st.permute(list(range(1, a + 1)) + [0] + list(range(a + 1, st.ndim)))
    res.append(st)
  return tuple(res)

def _scan8(c: Call, body: Graph, ns: int) -> tuple:
  """Scan-8: axis 0 of every state and scan input is a batch run one element at a time, axis 1 of a scan input is the
  sequence; an optional sequence_lens (input 0) stops each batch element early, its scan outputs padded with zeros."""
  nstate = len(c.inputs) - 1 - ns
  if nstate < 0: raise c.error(f"{len(c.inputs)} inputs cannot hold sequence_lens and {ns} scan inputs")
  init, xs = [c.t(1 + i) for i in range(nstate)], [c.t(1 + nstate + j) for j in range(ns)]
  dirs = c.attr("directions") or [0] * ns
  if not xs: raise c.error("Scan-8 needs at least one scan input (it gives the batch size)")
  B, T = xs[0].int_shape("ONNX Scan")[:2]
  if any(x.ndim < 2 or x.shape[:2] != (B, T) for x in xs) or any(s.shape[0] != B for s in init):
    raise c.error(f"every scan input must be [batch {B}, sequence {T}, ...] and every state [batch {B}, ...]")
  lens = c.ints(0) if c.has(0) else [T] * B
  assert lens is not None
  if len(lens) != B or any(not 0 <= n <= T for n in lens):
    raise c.error(f"sequence_lens {lens} must be {B} values <= {T}")
  if B == 0: raise c.error("Scan-8 with a batch of 0")
  finals: list[list[Tensor]] = [[] for _ in range(nstate)]
  outs: list[list[list[Tensor]]] = []  # [batch][output][step]
  for b in range(B):
    state: list[Any] = [s[b] for s in init]
    steps: list[list[Tensor]] = []
    for t in range(lens[b]):
      r = c.subgraph(body, [*state, *[x[b, lens[b] - 1 - t if dr else t] for x, dr in zip(xs, dirs)]])
      state = r[:nstate]
      if not steps: steps = [[] for _ in r[nstate:]]
      for lst, v in zip(steps, r[nstate:]): lst.append(v)
    for lst, v in zip(finals, state): lst.append(v)
    outs.append(steps)
  nout = len(c.node.outputs) - nstate
  res: list[Any] = [Tensor.stack(*f) for f in finals]
  for j in range(nout):
    elem = next((o[j][0] for o in outs if o and o[j]), None)
    if elem is None:
      if T: raise c.error(f"scan output {j} has no element in any batch, so its shape is unknown")
      res.append(Tensor.zeros(B, 0, dtype=xs[0].dtype, device=c.device))
      continue
    pad = Tensor.zeros(*elem.shape, dtype=elem.dtype, device=elem.device)
    rows = [Tensor.stack(*((o[j] if o else []) + [pad] * (T - lens[b]))) for b, o in enumerate(outs)]
    res.append(Tensor.stack(*rows))
  return tuple(res)

@op("SequenceMap", since=17)
def _seqmap(c: Call) -> tuple:
  body: Graph = c.attr("body")
  seq = c.inputs[0]
  rest = c.inputs[1:]
  n = len(seq)
  outs: list[list[Tensor]] = [[] for _ in c.node.outputs]
  for i in range(n):
    args = [seq[i]] + [r[i] if isinstance(r, list) else r for r in rest]
    r = c.subgraph(body, args)
    for lst, v in zip(outs, r): lst.append(v)
  return tuple(outs)

# ---- quantization ----
# NOTE: the arithmetic follows the ONNX definitions step by step (x / scale in the inputs' dtype, round half to even,
# integer add of the zero point, saturation), so the results are those of onnx.reference bit for bit

_QRANGE = {dtypes.uint8: (0, 255), dtypes.int8: (-128, 127), dtypes.uint16: (0, 65535), dtypes.int16: (-32768, 32767)}

def _per_axis(p: Tensor, x: Tensor, axis: int, block: int) -> Tensor:
  """A scale or zero point (scalar, 1-d along axis, or blocked along axis) broadcastable against x."""
  if p.ndim == 0 or p.numel() == 1 and p.ndim <= 1: return p.reshape(())
  ax = _axis(axis, x.ndim)
  if block:
    p = p.repeat_interleave(block, dim=ax)
    return p.shrink([(0, x.shape[ax]) if i == ax else None for i in range(p.ndim)])
  return p.reshape([-1 if i == ax else 1 for i in range(x.ndim)])

@op("QuantizeLinear", since=10)
def _quantize(c: Call) -> Tensor:
  x, scale, zp = c.t(0), c.t(1), c.opt(2)
  axis, block = c.attr("axis", 1), c.attr("block_size", 0)
  if zp is not None: dt = zp.dtype
  elif c.attr("output_dtype"): dt = to_dtype(c.attr("output_dtype"), c.node.label())
  else: dt = dtypes.uint8
  s = _per_axis(scale, x, axis, block)
  if c.attr("precision"):
    pdt = to_dtype(c.attr("precision"), c.node.label())
    q = x.cast(pdt) / s.cast(pdt)
  else:
    pdt = x.dtype if x.dtype.itemsize >= s.dtype.itemsize else s.dtype
    q = x.cast(pdt) / s.cast(pdt)
  if dt in (dtypes.fp8e4m3, dtypes.fp8e5m2):
    if zp is not None: q = q + _per_axis(zp, x, axis, block).cast(q.dtype)
    return _cast_to(q.cast(dtypes.float32), dt, bool(c.attr("saturate", 1)))
  if dt not in _QRANGE: raise c.error(f"QuantizeLinear to {dt} is not supported")
  qi = q.round().cast(dtypes.int32)
  if zp is not None: qi = qi + _per_axis(zp, x, axis, block).cast(dtypes.int32)
  lo, hi = _QRANGE[dt]
  return qi.clip(lo, hi).cast(dt)

@op("DequantizeLinear", since=10)
def _dequantize(c: Call) -> Tensor:
  x, scale, zp = c.t(0), c.t(1), c.opt(2)
  axis, block = c.attr("axis", 1), c.attr("block_size", 0)
  dx = x.cast(dtypes.float32)
  if zp is not None and x.dtype not in (dtypes.fp8e4m3, dtypes.fp8e5m2):
    dx = dx - _per_axis(zp, x, axis, block).cast(dtypes.float32)
  y = dx * _per_axis(scale, x, axis, block).cast(dtypes.float32)
  out = to_dtype(c.attr("output_dtype"), c.node.label()) if c.attr("output_dtype") else scale.dtype
  return y.cast(out)

@op("DynamicQuantizeLinear", since=11)
def _dynq(c: Call) -> tuple[Tensor, Tensor, Tensor]:
  x = c.t(0).cast(dtypes.float32)
  mx, mn = x.max().maximum(0), x.min().minimum(0)
  scale = (mx == mn).where(1.0, mx - mn) / 255.0
  zp = (0.0 - mn / scale).clip(0, 255).round()
  y = ((x / scale).round() + zp).clip(0, 255).cast(dtypes.uint8)
  return y, scale.cast(c.t(0).dtype), zp.cast(dtypes.uint8)

def _zp_sub(x: Tensor, zp: Tensor | None, row_axis: int | None) -> Tensor:
  xi = x.cast(dtypes.int32)
  if zp is None: return xi
  z = zp.cast(dtypes.int32)
  # NOTE: a 1-d zero point of A is per row (M), of B per column (N)
  if z.ndim == 1 and z.shape[0] != 1 and row_axis is not None:
    z = z.reshape([-1 if i == row_axis % x.ndim else 1 for i in range(x.ndim)])
  return xi - z

@op("MatMulInteger", since=10)
def _mmint(c: Call) -> Tensor:
  a, b = c.t(0), c.t(1)
  return _zp_sub(a, c.opt(2), -2).matmul(_zp_sub(b, c.opt(3), -1)).cast(dtypes.int32)

@op("QLinearMatMul", since=10)
def _qlmm(c: Call) -> Tensor:
  a, a_s, a_zp, b, b_s, b_zp, y_s, y_zp = (c.opt(i) for i in range(8))
  assert a is not None and b is not None and a_s is not None and b_s is not None and y_s is not None
  acc = _zp_sub(a, a_zp, -2).matmul(_zp_sub(b, b_zp, -1)).cast(dtypes.int32)
  return _requantize(c, acc, a_s, b_s, y_s, y_zp, a.dtype)

def _requantize(c: Call, acc: Tensor, a_s: Tensor, b_s: Tensor, y_s: Tensor, y_zp: Tensor | None, a_dt: DType,
                shape: Any = None) -> Tensor:
  # NOTE: the int32 accumulator times a float32 scale is taken in float64 (numpy's promotion of int32 with float32)
  m = (a_s.cast(dtypes.float32) * b_s.cast(dtypes.float32) / y_s.cast(dtypes.float32))
  if shape is not None: m = m.reshape(shape)
  d = acc.cast(dtypes.float64) * m.cast(dtypes.float64)
  dt = y_zp.dtype if y_zp is not None else a_dt
  if y_zp is not None: d = d + y_zp.cast(dtypes.float64)
  lo, hi = _QRANGE[dt]
  return d.round().clip(lo, hi).cast(dt)

@op("ConvInteger", since=10)
def _convint(c: Call) -> Tensor:
  x, w = c.t(0), c.t(1)
  xi = x.cast(dtypes.int32) - (c.t(2).cast(dtypes.int32).reshape(()) if c.has(2) else 0)
  wi = _zp_w(w, c.opt(3))
  return _conv_int(c, xi, wi)

def _zp_w(w: Tensor, zp: Tensor | None) -> Tensor:
  wi = w.cast(dtypes.int32)
  if zp is None: return wi
  z = zp.cast(dtypes.int32)
  return wi - (z.reshape(()) if z.numel() == 1 else z.reshape(-1, *([1] * (w.ndim - 1))))

def _conv_int(c: Call, xi: Tensor, wi: Tensor) -> Tensor:
  n = wi.ndim - 2
  k = c.attr("kernel_shape") or wi.int_shape("ONNX ConvInteger")[2:]
  s, d = c.attr("strides") or [1] * n, c.attr("dilations") or [1] * n
  pads = _conv_pads(c, xi.int_shape("ONNX ConvInteger")[2:], k, s, d)
  # NOTE: padding is applied after the zero point is subtracted: padded positions hold the zero point's value 0
  return xi.pad([(0, 0), (0, 0)] + pads).conv2d(wi, None, groups=c.attr("group", 1), stride=tuple(s),
                                                   dilation=tuple(d)).cast(dtypes.int32)

@op("QLinearConv", since=10)
def _qlconv(c: Call) -> Tensor:
  x, x_s, x_zp, w, w_s, w_zp, y_s, y_zp, b = (c.opt(i) for i in range(9))
  assert x is not None and w is not None and x_s is not None and w_s is not None and y_s is not None
  xi = x.cast(dtypes.int32) - (x_zp.cast(dtypes.int32).reshape(()) if x_zp is not None else 0)
  acc = _conv_int(c, xi, _zp_w(w, w_zp))
  if b is not None: acc = acc + b.cast(dtypes.int32).reshape(1, -1, *([1] * (acc.ndim - 2)))
  shape = (1, -1) + (1,) * (acc.ndim - 2) if w_s.numel() > 1 else None
  return _requantize(c, acc, x_s, w_s, y_s, y_zp, x.dtype, shape)

# ---- recurrent layers (unrolled over the static sequence length) ----

_ACT_ARGS = {"Affine": 2, "LeakyRelu": 1, "ThresholdedRelu": 1, "ScaledTanh": 2, "HardSigmoid": 2, "Elu": 1}

def _activation(name: str, a: float | None, b: float | None) -> Callable[[Tensor], Tensor]:
  lname = name.lower()
  if lname == "sigmoid": return lambda x: x.sigmoid()
  if lname == "tanh": return lambda x: x.tanh()
  if lname == "relu": return lambda x: x.relu()
  if lname == "affine": return lambda x: x * a + b
  if lname == "leakyrelu": return lambda x: x.leaky_relu(0.01 if a is None else a)
  if lname == "thresholdedrelu": return lambda x: (x > (1.0 if a is None else a)).where(x, 0)
  if lname == "scaledtanh": return lambda x: (x * b).tanh() * a
  if lname == "hardsigmoid": return lambda x: (x * (0.2 if a is None else a) + (0.5 if b is None else b)).clip(0, 1)
  if lname == "elu": return lambda x: (x > 0).where(x, (x.exp() - 1) * (1.0 if a is None else a))
  if lname == "softsign": return lambda x: x.softsign()
  if lname == "softplus": return lambda x: x.softplus()
  raise OnnxError(f"recurrent activation {name!r} is not known")

def _activations(c: Call, defaults: list[str], ndir: int) -> list[Callable[[Tensor], Tensor]]:
  names = list(c.attr("activations") or defaults * ndir)
  alphas, betas = list(c.attr("activation_alpha") or []), list(c.attr("activation_beta") or [])
  out = []
  for nm in names:
    k = _ACT_ARGS.get(nm, 0)
    a = alphas.pop(0) if k >= 1 and alphas else None
    b = betas.pop(0) if k >= 2 and betas else None
    out.append(_activation(nm, a, b))
  return out

def _rnn_common(c: Call, gates: int) -> tuple:
  x, w, r = c.t(0), c.t(1), c.t(2)
  layout = c.attr("layout", 0)
  if layout: x = x.permute(1, 0, 2)
  T, B = x.shape[0], x.shape[1]
  ndir, H = w.shape[0], c.attr("hidden_size") or r.shape[-1]
  bias = c.opt(3)
  if bias is None: bias = Tensor.zeros(ndir, 2 * gates * H, dtype=x.dtype, device=x.device)
  lens = c.opt(4)
  h0 = c.opt(5)
  if h0 is not None and layout: h0 = h0.permute(1, 0, 2)
  if h0 is None: h0 = Tensor.zeros(ndir, B, H, dtype=x.dtype, device=x.device)
  return x, w, r, bias, lens, h0, T, B, ndir, H, layout

def _rnn_outputs(c: Call, ys: list[list[Any]], hs: list[Tensor], cs: list[Tensor] | None, layout: int) -> tuple:
  y = Tensor.stack(*[Tensor.stack(*yd) for yd in ys], dim=1)  # (T, ndir, B, H)
  yh = Tensor.stack(*hs)
  yc = Tensor.stack(*cs) if cs is not None else None
  if layout:
    y, yh = y.permute(2, 0, 1, 3), yh.permute(1, 0, 2)
    if yc is not None: yc = yc.permute(1, 0, 2)
  return (y, yh) if yc is None else (y, yh, yc)

def _directions(c: Call, ndir: int) -> list[bool]:
  d = c.attr("direction", "forward")
  return [False, True] if d == "bidirectional" else [d == "reverse"] * ndir

def _step_mask(lens: Tensor | None, t: int, B: int) -> Tensor | None:
  return None if lens is None else (lens.cast(dtypes.int64) > t).reshape(B, 1)

@op("RNN")
def _rnn(c: Call) -> tuple:
  x, w, r, bias, lens, h0, T, B, ndir, H, layout = _rnn_common(c, 1)
  acts = _activations(c, ["Tanh"], ndir)
  clip = c.attr("clip")
  ys, hs = [], []
  for d, rev in enumerate(_directions(c, ndir)):
    h, out = h0[d], list[Any]([None] * T)
    xw = x.matmul(w[d].T) + bias[d, :H] + bias[d, H:]
    for step in range(T):
      t = T - 1 - step if rev else step
      g = xw[t] + h.matmul(r[d].T)
      if clip is not None: g = g.clip(-clip, clip)
      hn = acts[d](g)
      m = _step_mask(lens, t, B)
      out[t] = hn if m is None else m.where(hn, 0)
      h = (hn if m is None else m.where(hn, h)).contiguous()
    ys.append(out)
    hs.append(h)
  return _rnn_outputs(c, ys, hs, None, layout)

@op("GRU")
def _gru(c: Call) -> tuple:
  x, w, r, bias, lens, h0, T, B, ndir, H, layout = _rnn_common(c, 3)
  acts = _activations(c, ["Sigmoid", "Tanh"], ndir)
  clip, lbr = c.attr("clip"), c.attr("linear_before_reset", 0)
  cl = (lambda v: v.clip(-clip, clip)) if clip is not None else (lambda v: v)
  ys, hs = [], []
  for d, rev in enumerate(_directions(c, ndir)):
    f, g = acts[2 * d], acts[2 * d + 1]
    h, out = h0[d], list[Any]([None] * T)
    wz, wr, wh = w[d, :H], w[d, H:2 * H], w[d, 2 * H:]
    rz, rr, rh = r[d, :H], r[d, H:2 * H], r[d, 2 * H:]
    bwz, bwr, bwh = bias[d, :H], bias[d, H:2 * H], bias[d, 2 * H:3 * H]
    brz, brr, brh = bias[d, 3 * H:4 * H], bias[d, 4 * H:5 * H], bias[d, 5 * H:]
    for step in range(T):
      t = T - 1 - step if rev else step
      xt = x[t]
      z = f(cl(xt.matmul(wz.T) + h.matmul(rz.T) + bwz + brz))
      rt = f(cl(xt.matmul(wr.T) + h.matmul(rr.T) + bwr + brr))
      if lbr: hh = g(cl(xt.matmul(wh.T) + rt * (h.matmul(rh.T) + brh) + bwh))
      else: hh = g(cl(xt.matmul(wh.T) + (rt * h).matmul(rh.T) + brh + bwh))
      hn = (1 - z) * hh + z * h
      m = _step_mask(lens, t, B)
      out[t] = hn if m is None else m.where(hn, 0)
      h = (hn if m is None else m.where(hn, h)).contiguous()
    ys.append(out)
    hs.append(h)
  return _rnn_outputs(c, ys, hs, None, layout)

@op("LSTM")
def _lstm(c: Call) -> tuple:
  x, w, r, bias, lens, h0, T, B, ndir, H, layout = _rnn_common(c, 4)
  c0 = c.opt(6)
  if c0 is not None and layout: c0 = c0.permute(1, 0, 2)
  if c0 is None: c0 = Tensor.zeros(ndir, B, H, dtype=x.dtype, device=x.device)
  p = c.opt(7)
  acts = _activations(c, ["Sigmoid", "Tanh", "Tanh"], ndir)
  clip, coupled = c.attr("clip"), c.attr("input_forget", 0)
  cl = (lambda v: v.clip(-clip, clip)) if clip is not None else (lambda v: v)
  ys, hs, cs = [], [], []
  for d, rev in enumerate(_directions(c, ndir)):
    f, g, hact = acts[3 * d], acts[3 * d + 1], acts[3 * d + 2]
    h, cell, out = h0[d], c0[d], list[Any]([None] * T)
    # the input projection of every step at once; only the recurrent part runs step by step
    xw = x.matmul(w[d].T) + bias[d, :4 * H] + bias[d, 4 * H:]  # (T, B, 4H): i, o, f, c
    pi, po, pf = (p[d, :H], p[d, H:2 * H], p[d, 2 * H:]) if p is not None else (None, None, None)
    for step in range(T):
      t = T - 1 - step if rev else step
      gates = xw[t] + h.matmul(r[d].T)
      gi, go, gf, gc = (gates[:, k * H:(k + 1) * H] for k in range(4))
      if pi is not None: gi, gf = gi + pi * cell, gf + pf * cell
      it = f(cl(gi))
      ft = 1 - it if coupled else f(cl(gf))
      ct = g(cl(gc))
      cn = ft * cell + it * ct
      if po is not None: go = go + po * cn
      ot = f(cl(go))
      hn = ot * hact(cn)
      m = _step_mask(lens, t, B)
      out[t] = hn if m is None else m.where(hn, 0)
      # NOTE: the state is stored each step: fused, every step would recompute the whole history
      h = (hn if m is None else m.where(hn, h)).contiguous()
      cell = (cn if m is None else m.where(cn, cell)).contiguous()
    ys.append(out)
    hs.append(h)
    cs.append(cell)
  return _rnn_outputs(c, ys, hs, cs, layout)

# ---- Resize / Upsample: per axis, each output position reads a few taps of the input with weights computed on the
# host from the sizes alone (never from the data), then one gather per tap ----

def _coord(mode: str, o: int, n: int, m: int, scale: float, roi: tuple[float, float] | None) -> float:
  # NOTE: the resized length in these formulas is n * scale, a float when scales are given (m when sizes are)
  mf = n * scale
  if mode == "half_pixel": return (o + 0.5) / scale - 0.5
  if mode == "half_pixel_symmetric":
    adj = m / mf
    return n / 2 * (1 - adj) + (o + 0.5) / scale - 0.5
  if mode == "pytorch_half_pixel": return (o + 0.5) / scale - 0.5 if m > 1 else 0.0
  if mode == "align_corners": return 0.0 if m == 1 else o * (n - 1) / (mf - 1)
  if mode == "asymmetric": return o / scale
  if mode == "tf_crop_and_resize":
    assert roi is not None
    s, e = roi
    return s * (n - 1) + o * (e - s) * (n - 1) / (mf - 1) if m > 1 else 0.5 * (s + e) * (n - 1)
  raise OnnxError(f"Resize: coordinate_transformation_mode {mode!r} is not known")

def _nearest(x: float, mode: str) -> int:
  if mode == "floor": return math.floor(x)
  if mode == "ceil": return math.ceil(x)
  f = math.floor(x)
  if x - f == 0.5: return f if mode == "round_prefer_floor" else f + 1
  return round(x)

def _cubic(s: float, a: float) -> float:
  s = abs(s)
  if s <= 1: return ((a + 2) * s - (a + 3)) * s * s + 1
  if s < 2: return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a
  return 0.0

def _taps(c: Call, n: int, m: int, scale: float, roi: tuple[float, float] | None, upsample: bool) -> tuple:
  mode = c.attr("mode", "nearest")
  ctm = "asymmetric" if upsample or c.opset < 11 else c.attr("coordinate_transformation_mode", "half_pixel")
  nmode = "floor" if upsample else c.attr("nearest_mode", "round_prefer_floor") if c.opset >= 11 else \
    "round_prefer_floor"
  a, excl = c.attr("cubic_coeff_a", -0.75), c.attr("exclude_outside", 0)
  anti = c.attr("antialias", 0) and scale < 1 and mode in ("linear", "cubic")
  taps: list[list[tuple[int, float]]] = []
  valid: list[bool] = []
  for o in range(m):
    x = _coord(ctm, o, n, m, scale, roi)
    valid.append(ctm != "tf_crop_and_resize" or -1e-9 <= x <= n - 1 + 1e-9)
    if mode == "nearest": raw = [(_nearest(x, nmode), 1.0)]
    elif mode in ("linear", "bilinear", "trilinear"):
      if anti:
        sup = 1 / scale
        raw = [(j, max(0.0, 1 - abs(j - x) * scale)) for j in range(math.floor(x - sup), math.ceil(x + sup) + 1)]
      else:
        x0 = math.floor(x)
        raw = [(x0, 1 - (x - x0)), (x0 + 1, x - x0)]
    elif mode == "cubic":
      if anti:
        sup = 2 / scale
        raw = [(j, _cubic((j - x) * scale, a)) for j in range(math.floor(x - sup), math.ceil(x + sup) + 1)]
      else:
        x0 = math.floor(x)
        raw = [(x0 + k, _cubic(x - (x0 + k), a)) for k in (-1, 0, 1, 2)]
    else: raise c.error(f"Resize mode {mode!r} is not known")
    if excl or anti:
      kept = [(j, w) for j, w in raw if 0 <= j < n] if excl else raw
      tot = sum(w for _, w in kept)
      raw = [(j, w / tot) for j, w in kept] if tot else kept
    taps.append([(min(max(j, 0), n - 1), w) for j, w in raw if w != 0.0] or [(0, 0.0)])
  return taps, valid

def _resize_axis(x: Tensor, ax: int, taps: list[list[tuple[int, float]]], valid: list[bool], ext: float) -> Tensor:
  m, K = len(taps), max(len(t) for t in taps)
  out: Tensor | None = None
  shape = [m if i == ax else 1 for i in range(x.ndim)]
  for k in range(K):
    idx = [t[k][0] if k < len(t) else 0 for t in taps]
    w = [t[k][1] if k < len(t) else 0.0 for t in taps]
    g = _gather_axis(x, ax, Tensor(np.array(idx, np.int64), device=x.device))
    if K == 1 and all(v == 1.0 for v in w): term = g
    else: term = g * Tensor(np.array(w, np.float64), device=x.device).reshape(shape).cast(x.dtype)
    out = term if out is None else out + term
  assert out is not None
  if not all(valid):
    vm = Tensor(np.array(valid), device=x.device).reshape(shape)
    out = vm.where(out, ext)
  return out

def _resize(c: Call, upsample: bool) -> Tensor:
  x = c.t(0)
  xf = x if dtypes.is_float(x.dtype) else x.cast(dtypes.float32)
  roi: list[float] | None = None
  scales: list[float] | None = None
  sizes: list[int] | None = None
  if upsample: scales = list(c.attr("scales")) if c.opset < 9 else [float(v) for v in np.array(c.static(1)).reshape(-1)]
  elif c.opset < 11: scales = [float(v) for v in np.array(c.static(1)).reshape(-1)]
  else:
    if c.has(1) and c.t(1).numel(): roi = [float(v) for v in np.array(c.static(1)).reshape(-1)]
    if c.has(2) and c.t(2).numel(): scales = [float(v) for v in np.array(c.static(2)).reshape(-1)]
    if c.has(3) and c.t(3).numel(): sizes = c.sizes(3)
  axes = [_axis(a, x.ndim) for a in (c.attr("axes") or range(x.ndim))]
  # NOTE: an axis of symbolic size (a batch) may only be kept as it is: scale 1 or its own size, no crop
  keep = [isinstance(x.shape[a], UOp) for a in axes]
  if any(keep):
    crop = c.attr("coordinate_transformation_mode") == "tf_crop_and_resize"
    same = [(sizes[i] is x.shape[a]) if sizes is not None else scales is not None and float(scales[i]) == 1.0
            for i, a in enumerate(axes)]
    stretch = c.attr("keep_aspect_ratio_policy", "stretch") == "stretch"
    if crop or any(k and not sm for k, sm in zip(keep, same)) or (sizes is not None and not stretch):
      raise SymbolicUnsupported(f"{c.node.label()}: Resize of an axis of symbolic size")
    if roi is not None and len(roi) == 2 * len(axes):
      roi = [r for i, r in enumerate(roi[:len(axes)]) if not keep[i]] + [r for i, r in enumerate(roi[len(axes):])
                                                                         if not keep[i]]
    elif roi is not None: raise SymbolicUnsupported(f"{c.node.label()}: Resize with a roi over a symbolic axis")
    if scales is not None: scales = [v for v, k in zip(scales, keep) if not k]
    if sizes is not None: sizes = [v for v, k in zip(sizes, keep) if not k]
    axes = [a for a, k in zip(axes, keep) if not k]
  ins = [int(x.shape[a]) for a in axes]  # type: ignore[arg-type]  # the symbolic axes are left out above
  if sizes is not None:
    pol = c.attr("keep_aspect_ratio_policy", "stretch")
    ratios = [s / n for s, n in zip(sizes, ins)]
    if pol != "stretch":
      r = min(ratios) if pol == "not_larger" else max(ratios)
      ratios = [r] * len(ins)
      sizes = [int(math.floor(r * n + 0.5)) for n in ins]
    scl = ratios
    outs = list(sizes)
  elif scales is not None:
    scl, outs = scales, [int(math.floor(n * s)) for n, s in zip(ins, scales)]
  else: raise c.error("Resize needs scales or sizes")
  ext = c.attr("extrapolation_value", 0.0)
  y = xf
  for i, (a, n, m, s) in enumerate(zip(axes, ins, outs, scl)):
    crop = roi is not None and c.attr("coordinate_transformation_mode") == "tf_crop_and_resize"
    if n == m and s == 1.0 and not crop: continue
    span = (roi[i], roi[i + len(axes)]) if roi is not None and len(roi) == 2 * len(axes) else \
      (roi[a], roi[a + x.ndim]) if roi is not None else None
    taps, valid = _taps(c, n, m, s, span, upsample)
    y = _resize_axis(y, a, taps, valid, ext)
  return y if y.dtype is x.dtype else y.round().clip(dtypes.min(x.dtype), dtypes.max(x.dtype)).cast(x.dtype) \
    if c.attr("mode", "nearest") != "nearest" else y.cast(x.dtype)

op("Resize", since=10)(lambda c: _resize(c, False))
op("Upsample", since=7)(lambda c: _resize(c, True))

# ---- attention ----

def _heads(t: Tensor, n: int | None) -> Tensor:
  if t.ndim == 4: return t
  if not n: raise OnnxError("Attention: a 3-d input needs q_num_heads/kv_num_heads")
  b, s, h = t.shape
  return t.reshape(b, s, n, h // n).permute(0, 2, 1, 3)

@op("Attention", since=23)
def _attention(c: Call) -> tuple:
  q3 = c.t(0).ndim == 3
  q, k, v = _heads(c.t(0), c.attr("q_num_heads")), _heads(c.t(1), c.attr("kv_num_heads")), \
    _heads(c.t(2), c.attr("kv_num_heads"))
  mask, pk, pv, nonpad = c.opt(3), c.opt(4), c.opt(5), c.opt(6)
  if pk is not None: k = pk.cat(k, dim=2)
  if pv is not None: v = pv.cat(v, dim=2)
  present_k, present_v = k, v
  B, Hq, Sq = q.shape[:3]
  D = q.int_shape("ONNX Attention")[3]
  Hkv, Skv = k.shape[1], k.shape[2]
  if Hq != Hkv:
    rep = Hq // Hkv
    k = k.reshape(B, Hkv, 1, Skv, D).expand(B, Hkv, rep, Skv, D).reshape(B, Hq, Skv, D)
    v = v.reshape(B, Hkv, 1, Skv, v.shape[-1]).expand(B, Hkv, rep, Skv, v.shape[-1]).reshape(B, Hq, Skv, v.shape[-1])
  scale = c.attr("scale")
  scale = 1 / math.sqrt(D) if scale is None else scale
  sq = math.sqrt(scale)
  qk = (q * sq).matmul((k * sq).transpose(-1, -2))
  raw = qk
  softcap = c.attr("softcap", 0.0)
  if softcap and softcap > 0: qk = (qk / softcap).tanh() * softcap
  capped = qk
  # the allowed (query, key) pairs: causal frontier, sliding window, padding; a bool mask intersects them
  if pk is not None: offset: Any = pk.shape[2]
  elif nonpad is not None: offset = (nonpad.cast(dtypes.int64) - Sq).reshape(B, 1, 1, 1)
  else: offset = 0
  qi = Tensor.arange(Sq, device=q.device).cast(dtypes.int64).reshape(1, 1, Sq, 1)
  kj = Tensor.arange(Skv, device=q.device).cast(dtypes.int64).reshape(1, 1, 1, Skv)
  pos = qi + offset
  allowed: Tensor | None = None
  def both(m: Tensor) -> Tensor: return m if allowed is None else allowed & m
  if c.attr("is_causal", 0): allowed = both(kj <= pos)
  lw, rw = c.attr("left_window_size", -1), c.attr("right_window_size", -1)
  if lw is not None and lw >= 0: allowed = both(kj >= pos - lw)
  if rw is not None and rw >= 0: allowed = both(kj <= pos + rw)
  if nonpad is not None: allowed = both(kj < nonpad.cast(dtypes.int64).reshape(B, 1, 1, 1))
  bias: Tensor | None = None
  if mask is not None:
    if mask.shape[-1] < Skv:
      fill = False if mask.dtype is dtypes.bool else -math.inf
      mask = mask.pad([(0, 0)] * (mask.ndim - 1) + [(0, Skv - mask.shape[-1])], value=fill)
    if mask.dtype is dtypes.bool: allowed = both(mask)
    else: bias = mask.cast(qk.dtype)
  if bias is not None: qk = qk + bias
  if allowed is not None: qk = allowed.where(qk, -math.inf)
  with_bias = qk
  sp = c.attr("softmax_precision")
  qs = qk.cast(to_dtype(sp, c.node.label())) if sp else qk
  mx = qs.max(-1, keepdim=True)
  dead = mx == -math.inf
  e = _exp(qs - dead.where(0, mx))
  p = e / dead.where(1, e.sum(-1, keepdim=True))
  p = p.cast(qk.dtype)
  y = p.matmul(v)
  if q3: y = y.permute(0, 2, 1, 3).reshape(B, Sq, -1)
  mode = c.attr("qk_matmul_output_mode", 0)
  qko = {0: raw, 1: capped, 2: with_bias, 3: p}.get(mode, raw)
  return y, present_k, present_v, qko

@op("ai.onnx.preview:FlexAttention")
def _flexattention(c: Call) -> Tensor:
  q, k, v = c.t(0), c.t(1), c.t(2)
  if q.ndim != 4 or k.ndim != 4 or v.ndim != 4: raise c.error(f"Q, K, V must be 4-d: {q.shape}, {k.shape}, {v.shape}")
  B, Hq, L, E = q.int_shape("ONNX FlexAttention")
  _, Hkv, S, Ek = k.int_shape("ONNX FlexAttention")
  if v.shape[1:3] != (Hkv, S) or Ek != E or Hkv < 1 or Hq % Hkv:
    raise c.error(f"K {k.shape} and V {v.shape} must share heads and length, Q {q.shape} must share the head size and "
                  "have a multiple of K's heads")
  if Hq != Hkv:  # query head h reads K/V head h // (Hq/Hkv)
    rep = Hq // Hkv
    k = k.reshape(B, Hkv, 1, S, E).expand(B, Hkv, rep, S, E).reshape(B, Hq, S, E)
    v = v.reshape(B, Hkv, 1, S, v.shape[3]).expand(B, Hkv, rep, S, v.shape[3]).reshape(B, Hq, S, v.shape[3])
  scale = c.attr("scale")
  sq = math.sqrt(float(np.float32(1 / math.sqrt(E) if scale is None else scale)))
  scores = (q * sq).matmul((k * sq).transpose(-1, -2))
  sp = c.attr("softmax_precision")
  # the softmax (and the modifiers' tensors) are float32 for a 16-bit input unless softmax_precision says otherwise
  cdt = to_dtype(sp, c.node.label()) if sp else (dtypes.float64 if q.dtype is dtypes.float64 else dtypes.float32)
  scores = scores.cast(cdt)
  def modify(name: str, t: Tensor) -> Tensor:
    if (g := c.attr(name)) is None: return t
    outs = c.subgraph(g, [t])
    if len(outs) != 1 or not isinstance(outs[0], Tensor) or outs[0].shape != t.shape:
      raise c.error(f"{name} must return one tensor of shape {t.shape}")
    return outs[0].cast(cdt)
  scores = modify("score_mod", scores)
  e = _exp(scores - scores.max(-1, keepdim=True))
  probs = modify("prob_mod", e / e.sum(-1, keepdim=True))
  return probs.matmul(v.cast(cdt)).cast(v.dtype)

@op("RotaryEmbedding", since=23)
def _rotary(c: Call) -> Tensor:
  x, cos_c, sin_c, pos = c.t(0), c.t(1), c.t(2), c.opt(3)
  interleaved, nh = c.attr("interleaved", 0), c.attr("num_heads", 0)
  rot = c.attr("rotary_embedding_dim", 0)
  x4 = x.ndim == 4
  if x4: xb = x.permute(0, 2, 1, 3)  # (B, S, H, D)
  else:
    b, s, hid = x.shape
    if not nh: raise c.error("a 3-d input needs num_heads")
    xb = x.reshape(b, s, nh, hid // nh)
  D = xb.shape[-1]
  rot = rot or D
  if pos is not None:
    cos_c, sin_c = _gather_axis(cos_c, 0, pos.reshape(-1)).reshape(*pos.shape, -1), \
      _gather_axis(sin_c, 0, pos.reshape(-1)).reshape(*pos.shape, -1)
  cos_c, sin_c = cos_c[..., :rot // 2].unsqueeze(2), sin_c[..., :rot // 2].unsqueeze(2)  # (B, S, 1, rot/2)
  xr, rest = xb[..., :rot], xb[..., rot:]
  if interleaved:
    x1, x2 = xr.reshape(*xr.shape[:-1], rot // 2, 2)[..., 0], xr.reshape(*xr.shape[:-1], rot // 2, 2)[..., 1]
  else: x1, x2 = xr[..., :rot // 2], xr[..., rot // 2:]
  r1, r2 = x1 * cos_c - x2 * sin_c, x2 * cos_c + x1 * sin_c
  out = Tensor.stack(r1, r2, dim=-1).reshape(*xr.shape) if interleaved else r1.cat(r2, dim=-1)
  if rot < D: out = out.cat(rest, dim=-1)
  return out.permute(0, 2, 1, 3) if x4 else out.reshape(x.shape)

@op("AffineGrid", since=20)
def _affine_grid(c: Call) -> Tensor:
  theta, size = c.t(0), c.ints(1)
  assert size is not None
  ac = c.attr("align_corners", 0)
  N, sp = size[0], size[2:]
  def lin(n: int) -> Tensor:
    if n == 1: return Tensor.zeros(1, dtype=theta.dtype, device=theta.device)
    a = Tensor.arange(n, device=theta.device).cast(theta.dtype)
    return a * (2 / (n - 1)) - 1 if ac else (a * 2 + 1) / n - 1
  if len(sp) == 2:
    H, W = sp
    ys, xs = lin(H).reshape(H, 1).expand(H, W), lin(W).reshape(1, W).expand(H, W)
    base = Tensor.stack(xs, ys, Tensor.ones(H, W, dtype=theta.dtype, device=theta.device), dim=-1).reshape(1, H * W, 3)
    return base.matmul(theta.transpose(1, 2)).reshape(N, H, W, 2)
  Dd, H, W = sp
  zs = lin(Dd).reshape(Dd, 1, 1).expand(Dd, H, W)
  ys = lin(H).reshape(1, H, 1).expand(Dd, H, W)
  xs = lin(W).reshape(1, 1, W).expand(Dd, H, W)
  base = Tensor.stack(xs, ys, zs, Tensor.ones(Dd, H, W, dtype=theta.dtype, device=theta.device), dim=-1)
  return base.reshape(1, -1, 4).matmul(theta.transpose(1, 2)).reshape(N, Dd, H, W, 3)

# ---- ai.onnx.preview.training: one optimizer step (inputs R, T, then the tensors in groups) ----

def _groups(c: Call, k: int) -> tuple[Tensor, Tensor, list[list[Tensor]]]:
  r, t = c.t(0), c.t(1)
  rest = [c.t(i) for i in range(2, len(c))]
  n = len(rest) // k
  return r, t, [rest[j * n:(j + 1) * n] for j in range(k)]

@op("ai.onnx.preview.training:Adagrad")
def _adagrad(c: Call) -> tuple:
  r, t, (xs, gs, hs) = _groups(c, 3)
  decay, eps, norm = c.attr("decay_factor", 0.0), c.attr("epsilon", 0.0), c.attr("norm_coefficient", 0.0)
  rr = r / (t.cast(r.dtype) * decay + 1)
  xo, ho = [], []
  for x, g, h in zip(xs, gs, hs):
    gr = x * norm + g
    hn = h + gr * gr
    xo.append((x - rr * gr / (hn.sqrt() + eps)).cast(x.dtype))
    ho.append(hn.cast(h.dtype))
  return (*xo, *ho)

@op("ai.onnx.preview.training:Momentum")
def _momentum(c: Call) -> tuple:
  r, t, (xs, gs, vs) = _groups(c, 3)
  alpha, beta, norm = c.attr("alpha"), c.attr("beta"), c.attr("norm_coefficient")
  nesterov = c.attr("mode", "standard") == "nesterov"
  badj = (t > 0).where(beta, 1.0)
  xo, vo = [], []
  for x, g, v in zip(xs, gs, vs):
    gr = x * norm + g
    vn = v * alpha + gr * badj.cast(x.dtype)
    xo.append((x - r * (gr + vn * alpha) if nesterov else x - r * vn).cast(x.dtype))
    vo.append(vn.cast(v.dtype))
  return (*xo, *vo)

@op("ai.onnx.preview.training:Adam")
def _adam(c: Call) -> tuple:
  r, t, (xs, gs, vs, hs) = _groups(c, 4)
  alpha, beta, eps = c.attr("alpha", 0.9), c.attr("beta", 0.999), c.attr("epsilon", 1e-6)
  norm, post = c.attr("norm_coefficient", 0.0), c.attr("norm_coefficient_post", 0.0)
  tf = t.cast(dtypes.float64)
  radj = (t > 0).where(r.cast(dtypes.float64) * (1 - beta ** tf).sqrt() / (1 - alpha ** tf), r.cast(dtypes.float64))
  xo, vo, ho = [], [], []
  for x, g, v, h in zip(xs, gs, vs, hs):
    gr = x * norm + g
    vn = v * alpha + gr * (1 - alpha)
    hn = h * beta + gr * gr * (1 - beta)
    xn = x - radj.cast(x.dtype) * (vn / (hn.sqrt() + eps))
    xo.append((xn * (1 - post)).cast(x.dtype))
    vo.append(vn.cast(v.dtype))
    ho.append(hn.cast(h.dtype))
  return (*xo, *vo, *ho)

# ---- ai.onnx.ml: the numeric ops ----

def _attr_array(c: Call, name: str) -> np.ndarray | None:
  """A tensor attribute's values on the host (a model's tree structure, not data)."""
  t = c.attr(name)
  return None if t is None else tensor_to_numpy(t, c.runner.model.base_dir, f"{c.node.label()} {name}")[0].reshape(-1)

def _tree_depth(root: int, tid: list, fid: list, tleaf: list, fleaf: list, where: str) -> int:
  """The most interior nodes on a path from root; a cycle or an index out of range is refused."""
  best, stack = 0, [(root, 1)]
  while stack:
    n, d = stack.pop()
    if not 0 <= n < len(tid) or d > len(tid): raise OnnxError(f"{where}: node {n} is out of range or on a cycle")
    best = max(best, d)
    stack += [(nxt, d + 1) for nxt, leaf in ((tid[n], tleaf[n]), (fid[n], fleaf[n])) if not leaf]
  return best

@op("ai.onnx.ml:TreeEnsemble", since=5)
def _tree_ensemble(c: Call) -> Tensor:
  x = _float_like(c.t(0))
  if x.ndim != 2: raise c.error(f"X must be [N, F], it is {x.shape}")
  N, F = x.int_shape("ONNX TreeEnsemble")
  feat, tid, fid = c.attr("nodes_featureids"), c.attr("nodes_truenodeids"), c.attr("nodes_falsenodeids")
  tleaf, fleaf, roots = c.attr("nodes_trueleafs"), c.attr("nodes_falseleafs"), c.attr("tree_roots")
  ltgt, nt = c.attr("leaf_targetids"), c.attr("n_targets")
  modes, splits, lw = _attr_array(c, "nodes_modes"), _attr_array(c, "nodes_splits"), _attr_array(c, "leaf_weights")
  if any(v is None for v in (feat, tid, fid, tleaf, fleaf, roots, ltgt, nt, modes, splits, lw)):
    raise c.error("a required attribute is missing")
  assert modes is not None and splits is not None and lw is not None
  M, L = len(feat), len(ltgt)
  if any(len(a) != M for a in (tid, fid, tleaf, fleaf, modes, splits)) or len(lw) != L or not roots:
    raise c.error("the nodes_* attributes (and the leaf_* ones) must have one length, and tree_roots must not be empty")
  miss = c.attr("nodes_missing_value_tracks_true") or [0] * M
  if (agg := c.attr("aggregate_function", 1)) not in (0, 1, 2, 3): raise c.error(f"aggregate_function {agg}")
  if (post := c.attr("post_transform", 0)) not in (0, 1, 2, 3):
    raise c.error(f"post_transform {post} (PROBIT needs an inverse erf the library does not have)" if post == 4 else
                  f"unknown post_transform {post}")
  if any(not 0 <= f < F for f in feat) or any(not 0 <= t < nt for t in ltgt) or any(m not in range(7) for m in modes):
    raise c.error(f"a feature id >= {F}, a target id >= {nt} or an unknown node mode")
  # the sets of BRANCH_MEMBER nodes, in node order, each ended by a NaN in membership_values
  sets: dict[int, list[float]] = {}
  mva = _attr_array(c, "membership_values")
  mv = [] if mva is None else mva.tolist()
  for n in (i for i in range(M) if modes[i] == 6):
    if not any(math.isnan(v) for v in mv): raise c.error("membership_values lacks a NaN-ended set per member node")
    end = next(i for i, v in enumerate(mv) if math.isnan(v))
    sets[n], mv = mv[:end], mv[end + 1:]
  depth = max(_tree_depth(r, tid, fid, tleaf, fleaf, c.node.label()) for r in roots)
  dev, T, K = x.device, len(roots), max([len(v) for v in sets.values()] + [1])
  def table(vals: Any, dt: DType) -> Tensor: return Tensor(np.array(vals).reshape(len(vals), -1), device=dev).cast(dt)
  i64 = dtypes.int64
  t_feat, t_mode, t_split = table(feat, i64), table(modes, i64), table(splits, x.dtype)
  t_next = table([[t, f, tl, fl, m] for t, f, tl, fl, m in zip(tid, fid, tleaf, fleaf, miss)], i64)
  t_set = table([sets.get(i, []) + [math.nan] * (K - len(sets.get(i, []))) for i in range(M)], x.dtype)
  # a root whose both branches are the same leaf is a one-leaf tree
  single = [bool(tleaf[r] and fleaf[r] and tid[r] == fid[r]) for r in roots]
  cur = Tensor(np.array(roots, np.int64), device=dev).reshape(1, T).expand(N, T)
  done = Tensor(np.array(single), device=dev).reshape(1, T).expand(N, T)
  leaf = Tensor(np.array([tid[r] for r in roots], np.int64), device=dev).reshape(1, T).expand(N, T)
  fpos = Tensor.arange(F, device=dev).cast(i64).reshape(1, 1, F)
  for _ in range(depth):
    flat = cur.reshape(-1)
    f, md, sp = (_take_rows(t, flat).reshape(N, T) for t in (t_feat, t_mode, t_split))
    nxt, members = _take_rows(t_next, flat).reshape(N, T, 5), _take_rows(t_set, flat).reshape(N, T, K)
    xv = (f.unsqueeze(-1) == fpos).where(x.reshape(N, 1, F), 0.0).sum(-1)
    cmp = [xv <= sp, xv < sp, xv >= sp, xv > sp, xv == sp, xv != sp, (xv.unsqueeze(-1) == members).any(-1)]
    cond = cmp[6]
    for m in range(6): cond = (md == m).where(cmp[m], cond)
    cond = cond | (xv.isnan() & (nxt[..., 4] != 0))
    to, to_leaf = cond.where(nxt[..., 0], nxt[..., 1]), cond.where(nxt[..., 2], nxt[..., 3]) != 0
    leaf = (~done & to_leaf).where(to, leaf)
    done, cur = done | to_leaf, (done | to_leaf).where(cur, to)
  w = _take_rows(table(lw, x.dtype), leaf.reshape(-1)).reshape(N, T, 1)
  tgt = _take_rows(table(ltgt, i64), leaf.reshape(-1)).reshape(N, T, 1)
  hot = tgt == Tensor.arange(nt, device=dev).cast(i64).reshape(1, 1, nt)
  big = {dtypes.float16: 65504.0, dtypes.float64: 1.7976931348623157e308}.get(x.dtype, 3.4028234663852886e38)
  if agg in (0, 1): y = hot.where(w, 0.0).sum(1) / (T if agg == 0 else 1)
  elif agg == 2: y = hot.where(w, big).min(1)
  else: y = hot.where(w, -big).max(1)
  if post == 1: y = y.softmax(-1)
  elif post == 2: y = y.sigmoid()
  elif post == 3:  # softmax over the nonzero scores, zeros stay zero
    nz = y != 0
    e = nz.where((y - nz.where(y, -math.inf).max(-1, keepdim=True)).exp(), 0.0)
    y = e / e.sum(-1, keepdim=True).maximum(1e-30)
  return y.cast(x.dtype)

@op("ai.onnx.ml:Binarizer")
def _binarizer(c: Call) -> Tensor:
  x = c.t(0)
  return (x > c.attr("threshold", 0.0)).cast(x.dtype)

@op("ai.onnx.ml:ArrayFeatureExtractor")
def _afe(c: Call) -> Tensor:
  x, idx = c.t(0), c.t(1)
  return _gather_axis(x, x.ndim - 1, _wrap_index(idx.reshape(-1), x.int_shape("ONNX ArrayFeatureExtractor")[-1]))

# ---- newer fused ops ----

@op("SwiGLU", since=28)
def _swiglu(c: Call) -> Tensor:
  a, b = c.t(0), c.t(1)
  return a * (a * c.attr("alpha", 1.0)).sigmoid() * b

@op("CausalConvWithState", since=27)
def _causal_conv(c: Call) -> tuple[Tensor, Tensor]:
  x, w, bias, past = c.t(0), c.t(1), c.opt(2), c.opt(3)
  B, C, L = x.int_shape("ONNX CausalConvWithState")
  k = w.shape[-1]
  if past is None: past = Tensor.zeros(B, C, k - 1, dtype=x.dtype, device=x.device)
  full = past.cat(x, dim=2) if k > 1 else x
  y = full.conv2d(w, bias, groups=C)
  if c.attr("activation", "none") in ("silu", "swish"): y = y * y.sigmoid()
  state = full.shrink([None, None, (full.shape[2] - (k - 1), full.shape[2])])
  return y.cast(x.dtype), state

@op("TensorScatter", since=24)
def _tensor_scatter(c: Call) -> Tensor:
  past, upd, wi = c.t(0), c.t(1), c.opt(2)
  ax = _axis(c.attr("axis", -2), past.ndim)
  M, S, B = past.int_shape("ONNX TensorScatter")[ax], upd.shape[ax], past.shape[0]
  start = wi.cast(dtypes.int64) if wi is not None else Tensor.zeros(B, dtype=dtypes.int64, device=past.device)
  # for every cache position m: which update position s lands there (m - start, wrapped in circular mode)
  m = Tensor.arange(M, device=past.device).cast(dtypes.int64).reshape(1, M)
  s = m - start.reshape(B, 1)
  if c.attr("mode", "linear") == "circular": s = s.mod(M)
  hit = (s >= 0) & (s < S)  # (B, M)
  sidx = hit.where(s, 0)
  shape = [B] + [1] * (past.ndim - 1)
  shape[ax] = M
  idx = sidx.reshape(shape).expand(*past.shape[:ax], M, *past.shape[ax + 1:])
  gathered = upd.gather(ax, idx.shrink([(0, upd.shape[i]) if i != ax else None for i in range(past.ndim)])) \
    if all(upd.shape[i] == past.shape[i] for i in range(past.ndim) if i != ax) else upd.gather(ax, idx)
  return hit.reshape(shape).where(gathered, past)

@op("LinearAttention", since=27)
def _linear_attention(c: Call) -> tuple[Tensor, Tensor]:
  q, k, v = c.t(0), c.t(1), c.t(2)
  past, decay, beta = c.opt(3), c.opt(4), c.opt(5)
  hq, hkv = c.attr("q_num_heads"), c.attr("kv_num_heads")
  rule = c.attr("update_rule", "gated_delta")
  B, T, _ = q.int_shape("ONNX LinearAttention")
  dk, dv = q.shape[-1] // hq, v.shape[-1] // hkv
  scale = c.attr("scale", 0.0) or 1 / math.sqrt(dk)
  f32 = dtypes.float32 if q.dtype is not dtypes.float64 else q.dtype
  qh = q.reshape(B, T, hq, dk).cast(f32)
  kh, vh = k.reshape(B, T, hkv, dk).cast(f32), v.reshape(B, T, hkv, dv).cast(f32)
  S = past.cast(f32) if past is not None else Tensor.zeros(B, hkv, dk, dv, dtype=f32, device=q.device)
  rep = hq // hkv
  outs = []
  for t in range(T):
    kt, vt = kh[:, t], vh[:, t]  # (B, hkv, dk), (B, hkv, dv)
    if rule in ("gated", "gated_delta"):
      assert decay is not None
      g = decay[:, t].cast(f32)
      g = g.reshape(B, hkv, dk, 1) if g.shape[-1] == hkv * dk else g.reshape(B, hkv, 1, 1)
      S = S * g.exp()
    if rule in ("delta", "gated_delta"):
      assert beta is not None
      bt = beta[:, t].cast(f32)
      bt = bt.reshape(B, -1, 1).expand(B, hkv, 1) if bt.shape[-1] in (1, hkv) else bt.reshape(B, hkv, 1)
      pred = (S * kt.reshape(B, hkv, dk, 1)).sum(2)  # S^T k: (B, hkv, dv)
      S = S + kt.reshape(B, hkv, dk, 1) * ((vt - pred) * bt).reshape(B, hkv, 1, dv)
    else: S = S + kt.reshape(B, hkv, dk, 1) * vt.reshape(B, hkv, 1, dv)
    Sq = S.reshape(B, hkv, 1, dk, dv).expand(B, hkv, rep, dk, dv).reshape(B, hq, dk, dv)
    outs.append((qh[:, t].reshape(B, hq, dk, 1) * Sq).sum(2) * scale)  # (B, hq, dv)
  y = Tensor.stack(*outs, dim=1).reshape(B, T, hq * dv)
  return y.cast(q.dtype), S.cast(past.dtype if past is not None else q.dtype)

# ---- spectral ----

@op("DFT", since=17)
def _dft(c: Call) -> Tensor:
  x = c.t(0)
  if c.opset >= 20:
    ax = int(c.scalar(2)) if c.has(2) else -2
    n_len = int(c.scalar(1)) if c.has(1) else None
  else: ax, n_len = c.attr("axis", 1), int(c.scalar(1)) if c.has(1) else None
  ax = _axis(ax, x.ndim)
  inverse, onesided = c.attr("inverse", 0), c.attr("onesided", 0)
  xf = x.cast(dtypes.float64)
  re, im = (xf[..., 0], xf[..., 1]) if x.shape[-1] == 2 else (xf[..., 0], None)
  n_in = x.int_shape("ONNX DFT")[ax]
  # an inverse of a one-sided spectrum (irfft) reads N//2+1 bins and writes N real samples, N = 2*(bins-1) by default
  irfft = bool(inverse and onesided)
  N = n_len or (2 * (n_in - 1) if irfft else n_in)
  if N < 1: raise c.error(f"the DFT length must be positive, it is {N}")
  def fit(t: Tensor, L: int) -> Tensor:
    n = t.shape[ax]
    if L < n: return t.shrink([(0, L) if i == ax else None for i in range(t.ndim)])
    return t.pad([(0, L - n) if i == ax else (0, 0) for i in range(t.ndim)]) if L > n else t
  L = N // 2 + 1 if irfft else N
  re = fit(re, L).transpose(ax, -1)
  im = fit(im, L).transpose(ax, -1) if im is not None else None
  if irfft:
    # x[n] = (1/N) sum_k w_k (Re X_k cos(2 pi k n/N) - Im X_k sin(2 pi k n/N)): the bins 1..ceil(N/2)-1 stand for their
    # conjugate twins too (w=2); the DC bin and, for an even N, the Nyquist bin count once, their imaginary parts drop
    nk = np.outer(np.arange(L), np.arange(N)) * (2 * np.pi / N)
    w = np.full((L, 1), 2.0)
    w[0] = 1.0
    if N % 2 == 0: w[-1] = 1.0
    sin = np.sin(nk) * w
    sin[0] = 0.0
    if N % 2 == 0: sin[-1] = 0.0
    out_r = re.matmul(Tensor(np.cos(nk) * w / N, device=x.device))
    if im is not None: out_r = out_r - im.matmul(Tensor(sin / N, device=x.device))
    return out_r.transpose(ax, -1).unsqueeze(-1).cast(x.dtype)
  out_re, out_im = _dft_last(re, im, N, N // 2 + 1 if onesided else N, bool(inverse))
  out = Tensor.stack(out_re.transpose(ax, -1), out_im.transpose(ax, -1), dim=-1)
  return out.cast(x.dtype)

def _dft_last(re: Tensor, im: Tensor | None, N: int, K: int, inverse: bool) -> tuple[Tensor, Tensor]:
  """The first K bins of the N-point DFT (or inverse DFT, scaled by 1/N) along the last axis, as (real, imaginary)."""
  kn = np.outer(np.arange(N), np.arange(K)) * (2 * np.pi / N)
  cos, sin = Tensor(np.cos(kn), device=re.device), Tensor(np.sin(kn), device=re.device)
  sgn = 1.0 if inverse else -1.0
  out_re = re.matmul(cos) - (im.matmul(sin) * sgn if im is not None else 0)
  out_im = re.matmul(sin) * sgn + (im.matmul(cos) if im is not None else 0)
  return (out_re / N, out_im / N) if inverse else (out_re, out_im)

@op("STFT", since=17)
def _stft(c: Call) -> Tensor:
  x, win = c.t(0), c.opt(2)
  if x.ndim != 3 or x.shape[2] not in (1, 2): raise c.error(f"signal must be [batch, length, 1 or 2], it is {x.shape}")
  S = x.int_shape("ONNX STFT")[1]
  step = int(c.scalar(1))
  if win is not None and win.ndim != 1: raise c.error(f"window must be 1-d, it is {win.shape}")
  L = int(c.scalar(3)) if c.has(3) else (win.int_shape("ONNX STFT")[0] if win is not None else S)
  if win is not None and win.shape[0] != L: raise c.error(f"window length {win.shape[0]} != frame_length {L}")
  if step < 1 or not 1 <= L <= S: raise c.error(f"frame_step {step} and frame_length {L} do not fit the signal ({S})")
  # [batch, frames, 1|2, frame_length]: the frames start every `step` samples, a partial last frame is dropped
  frames = x.cast(dtypes.float64).unfold(1, L, step)
  if win is not None: frames = frames * win.cast(dtypes.float64)
  re, im = frames[:, :, 0], (frames[:, :, 1] if x.shape[2] == 2 else None)
  out_re, out_im = _dft_last(re, im, L, L // 2 + 1 if c.attr("onesided", 1) else L, False)
  return Tensor.stack(out_re, out_im, dim=-1).cast(x.dtype)

@op("MelWeightMatrix", since=17)
def _melweight(c: Call) -> Tensor:
  M, dft, sr = int(c.scalar(0)), int(c.scalar(1)), int(c.scalar(2))
  if M < 1 or dft < 1 or sr < 1: raise c.error(f"num_mel_bins {M}, dft_length {dft}, sample_rate {sr} must be positive")
  f64 = dtypes.float64
  def mel(hz: Tensor) -> Tensor: return (hz.cast(f64) / 700).log1p() * (2595 / math.log(10))
  lo, hi = mel(c.t(3)), mel(c.t(4))
  # M+2 band edges evenly spaced in mel from the lower edge (step (hi-lo)/(M+2)), each floored to a spectrogram bin
  edges_mel = Tensor.arange(M + 2, device=c.device).cast(f64) * ((hi - lo) / (M + 2)) + lo
  edges_hz = (edges_mel * (math.log(10) / 2595)).expm1() * 700
  b = ((edges_hz * (dft + 1)) / sr).floor().cast(dtypes.int64)
  left, center, right = b[:M].reshape(1, M), b[1:M + 1].reshape(1, M), b[2:].reshape(1, M)
  j = Tensor.arange(dft // 2 + 1, device=c.device).cast(dtypes.int64).reshape(-1, 1)
  # triangles peaking at 1 on the center bin: rising over [left, center], falling over [center, right)
  up = (j - left).cast(f64) / (center - left).maximum(1).cast(f64)
  down = (right - j).cast(f64) / (right - center).maximum(1).cast(f64)
  w = ((j >= left) & (j <= center)).where(up, 0.0)
  w = (center == left).where((j == center).where(1.0, w), w)
  w = ((j >= center) & (j < right)).where(down, w)
  return w.cast(to_dtype(c.attr("output_datatype", 1), c.node.label()))

def _roi_axis(start: Tensor, bin_sz: Tensor, grid: Tensor, P: int, G: int, n: int) -> tuple[Tensor, Tensor]:
  """Bilinear weights of RoiAlign's samples along one axis onto its n positions, [rois, P, G, n] for the low and the
  high neighbour: sample g of bin p sits at start + p*bin + (g+0.5)*bin/grid; a sample past the grid or outside
  [-1, n] weighs nothing, one past the last position clamps to it."""
  dev, R = start.device, start.shape[0]
  p = Tensor.arange(P, device=dev).cast(dtypes.float64).reshape(1, P, 1)
  g = Tensor.arange(G, device=dev).cast(dtypes.float64).reshape(1, 1, G)
  gr = grid.cast(dtypes.float64).reshape(R, 1, 1)
  s = start.reshape(R, 1, 1) + p * bin_sz.reshape(R, 1, 1) + (g + 0.5) * bin_sz.reshape(R, 1, 1) / gr.maximum(1)
  ok = (g < gr) & (s >= -1.0) & (s <= n)
  s = s.maximum(0)
  lo = s.floor().minimum(n - 1)
  s = (lo >= n - 1).where(lo, s)
  frac = s - lo
  hi = (lo + 1).minimum(n - 1)
  pos = Tensor.arange(n, device=dev).cast(dtypes.float64).reshape(1, 1, 1, n)
  def onto(at: Tensor, w: Tensor) -> Tensor:
    return ((at.unsqueeze(-1) == pos) & ok.unsqueeze(-1)).where(w.unsqueeze(-1), 0.0)
  return onto(lo, 1 - frac), onto(hi, frac)

@op("RoiAlign", since=10)
def _roialign(c: Call) -> Tensor:
  x, rois, bidx = c.t(0), c.t(1), c.t(2)
  if x.ndim != 4 or rois.ndim != 2 or rois.shape[1] != 4 or bidx.ndim != 1 or bidx.shape[0] != rois.shape[0]:
    raise c.error(f"X must be 4-d, rois [R, 4], batch_indices [R]: got {x.shape}, {rois.shape}, {bidx.shape}")
  N, C, H, W = x.int_shape("ONNX RoiAlign")
  R = rois.shape[0]
  PH, PW, sr = c.attr("output_height", 1), c.attr("output_width", 1), c.attr("sampling_ratio", 0)
  mode, scale = c.attr("mode", "avg"), c.attr("spatial_scale", 1.0)
  if mode not in ("avg", "max"): raise c.error(f"mode must be avg or max, it is {mode!r}")
  ctm = c.attr("coordinate_transformation_mode", "half_pixel" if c.opset >= 16 else "output_half_pixel")
  if ctm not in ("half_pixel", "output_half_pixel"): raise c.error(f"unknown coordinate_transformation_mode {ctm!r}")
  if R == 0: return Tensor.zeros(0, C, PH, PW, dtype=x.dtype, device=x.device)
  half = ctm == "half_pixel"
  box = _float_like(rois) * scale - (0.5 if half else 0.0)
  sw, sh, ew, eh = box[:, 0], box[:, 1], box[:, 2], box[:, 3]
  rw, rh = (ew - sw, eh - sh) if half else ((ew - sw).maximum(1.0), (eh - sh).maximum(1.0))
  # NOTE: the box and bin sizes in the rois' own dtype: a bin of 8.0000001 (float64) would take 9 samples, not 8
  bh, bw = rh / PH, rw / PW
  sw, sh, bh, bw = sw.cast(dtypes.float64), sh.cast(dtypes.float64), bh.cast(dtypes.float64), bw.cast(dtypes.float64)
  # sampling_ratio 0: each ROI takes ceil(bin size) samples per bin and axis, so the sample counts are read back
  if sr > 0: gh = gw = Tensor.full((R,), sr, dtype=dtypes.int64, device=x.device)
  else: gh, gw = bh.ceil().cast(dtypes.int64).maximum(0), bw.ceil().cast(dtypes.int64).maximum(0)
  Gh, Gw = (sr, sr) if sr > 0 else (max(int(gh.max().item()), 1), max(int(gw.max().item()), 1))
  ylo, yhi = _roi_axis(sh, bh, gh, PH, Gh, H)
  xlo, xhi = _roi_axis(sw, bw, gw, PW, Gw, W)
  xr = _take_rows(x.cast(dtypes.float64), bidx.cast(dtypes.int64))  # [R, C, H, W]
  if mode == "avg":
    ay, ax = (ylo + yhi).sum(2), (xlo + xhi).sum(2)  # [R, P, n]
    out = ay.unsqueeze(1).matmul(xr).matmul(ax.unsqueeze(1).transpose(-1, -2))
    return (out / (gh * gw).maximum(1).cast(dtypes.float64).reshape(R, 1, 1, 1)).cast(x.dtype)
  # max: the largest weighted corner of any sample (each corner's value times its bilinear weight)
  def corner(wy: Tensor, wx: Tensor) -> Tensor:
    v = wy.reshape(R, 1, PH * Gh, H).matmul(xr).matmul(wx.reshape(R, 1, PW * Gw, W).transpose(-1, -2))
    return v.reshape(R, C, PH, Gh, PW, Gw)
  v = corner(ylo, xlo).maximum(corner(ylo, xhi)).maximum(corner(yhi, xlo)).maximum(corner(yhi, xhi))
  iy = Tensor.arange(Gh, device=x.device).reshape(1, 1, 1, Gh, 1, 1) < gh.reshape(R, 1, 1, 1, 1, 1)
  ix = Tensor.arange(Gw, device=x.device).reshape(1, 1, 1, 1, 1, Gw) < gw.reshape(R, 1, 1, 1, 1, 1)
  m = (iy & ix).where(v, -math.inf).max((3, 5))
  return (m == -math.inf).where(0.0, m).cast(x.dtype)

@op("DeformConv", since=19)
def _deformconv(c: Call) -> Tensor:
  x, w, off, bias, mask = c.t(0), c.t(1), c.t(2), c.opt(3), c.opt(4)
  d = x.ndim - 2
  if d < 1 or w.ndim != x.ndim or off.ndim != x.ndim: raise c.error(f"X, W, offset must share a rank >= 3: {x.shape}, "
                                                                    f"{w.shape}, {off.shape}")
  N, C, *sp = x.int_shape("ONNX DeformConv")
  OC, Cg, *ks = w.int_shape("ONNX DeformConv")
  k = list(c.attr("kernel_shape") or ks)
  group, og = c.attr("group", 1), c.attr("offset_group", 1)
  st, dil = c.attr("strides") or [1] * d, c.attr("dilations") or [1] * d
  pads = c.attr("pads") or [0] * (2 * d)
  out = list(off.int_shape("ONNX DeformConv")[2:])
  K, O, S = prod(k), prod(out), prod(sp)
  if k != ks or C != Cg * group or OC % group or C % og: raise c.error(f"X {x.shape}, W {w.shape}, kernel_shape {k}, "
                                                                      f"group {group}, offset_group {og} disagree")
  if off.shape[:2] != (N, og * K * d): raise c.error(f"offset must be [{N}, {og * K * d}, ...], it is {off.shape}")
  want = [(sp[a] + pads[a] + pads[a + d] - (k[a] - 1) * dil[a] - 1) // st[a] + 1 for a in range(d)]
  if out != want: raise c.error(f"offset's output dims {out} differ from the convolution's {want}")
  if mask is not None and mask.shape != (N, og * K, *out): raise c.error(f"mask must be {(N, og * K, *out)}")
  dt = x.dtype if x.dtype in (dtypes.float32, dtypes.float64) else dtypes.float32
  offr = off.cast(dt).reshape(N, og, K, d, O)
  # each (kernel tap, output position) samples X at its regular position plus its offset, bilinearly with zeros outside;
  # the weights onto the input grid are a product of one weight vector per spatial axis
  kk, oo = np.indices(k).reshape(d, K), np.indices(out).reshape(d, O)
  wt: Tensor | None = None
  for a in range(d):
    base = (-pads[a] + st[a] * oo[a]).reshape(1, O) + (dil[a] * kk[a]).reshape(K, 1)
    pa = Tensor(base.astype(np.float64), device=x.device).cast(dt).reshape(1, 1, K, O) + offr[:, :, :, a]
    lo = pa.floor()
    fr = (pa - lo).unsqueeze(-1)
    lo = lo.unsqueeze(-1)
    pos = Tensor.arange(sp[a], device=x.device).cast(dt).reshape(1, 1, 1, 1, sp[a])
    wa = (lo == pos).where(1 - fr, 0.0) + (lo + 1 == pos).where(fr, 0.0)  # [N, og, K, O, n_a]
    wt = wa if wt is None else wt.unsqueeze(-1) * wa.reshape(N, og, K, O, *([1] * a), sp[a])
  assert wt is not None
  wt = wt.reshape(N, og, K, O, S)
  if mask is not None: wt = wt * mask.cast(dt).reshape(N, og, K, O, 1)
  xg = x.cast(dt).reshape(N, og, C // og, S).transpose(-1, -2)  # [N, og, S, C/og]
  cols = wt.reshape(N, og, K * O, S).matmul(xg).reshape(N, og, K, O, C // og).permute(0, 1, 4, 2, 3)
  cols = cols.reshape(N, group, Cg * K, O)
  y = w.cast(dt).reshape(1, group, OC // group, Cg * K).matmul(cols).reshape(N, OC, *out)
  if bias is not None: y = y + bias.cast(dt).reshape(1, OC, *([1] * d))
  return y.cast(x.dtype)

@op("TfIdfVectorizer", since=9)
def _tfidf(c: Call) -> Tensor:
  x = c.t(0)
  if c.attr("pool_strings") is not None: raise c.error("pool_strings: the library has no string dtype")
  if x.ndim not in (1, 2) or not dtypes.is_int(x.dtype): raise c.error(f"X must be a 1-d or 2-d int tensor: {x.shape}")
  pool, starts, idxs = c.attr("pool_int64s") or [], c.attr("ngram_counts") or [], c.attr("ngram_indexes") or []
  lo, hi, skip = c.attr("min_gram_length"), c.attr("max_gram_length"), c.attr("max_skip_count")
  mode = c.attr("mode")
  if mode not in ("TF", "IDF", "TFIDF") or lo is None or hi is None or skip is None or not 1 <= lo <= hi or skip < 0:
    raise c.error(f"mode {mode!r}, min/max_gram_length {lo}/{hi}, max_skip_count {skip} are required and valid")
  # the pool: n-grams of size n from index starts[n-1] to starts[n] (or the end), listed in the order of ngram_indexes
  grams: list[tuple[int, ...]] = []
  for n, st in enumerate(starts, 1):
    end = starts[n] if n < len(starts) else len(pool)
    if st > end or (end - st) % n: raise c.error(f"ngram_counts {starts} do not cut pool_int64s into {n}-grams")
    grams += [tuple(pool[i:i + n]) for i in range(st, end, n)]
  if len(idxs) != len(grams) or any(i < 0 for i in idxs):
    raise c.error(f"ngram_indexes has {len(idxs)} entries for {len(grams)} pooled n-grams")
  size = max(idxs) + 1 if idxs else 0
  # NOTE: a weight scales an output coordinate (weights[ngram_indexes[i]] for the i-th n-gram), as onnxruntime and the
  # onnx reference do; with the identity ngram_indexes that is the spec's "i-th n-gram"
  w = c.attr("weights") or [1.0] * size
  if len(w) < size: raise c.error(f"weights has {len(w)} entries for {size} output coordinates")
  xb = (x if x.ndim == 2 else x.reshape(1, -1)).cast(dtypes.int64)
  R, C = xb.shape
  counts = Tensor.zeros(R, len(grams), device=x.device)
  for n in range(lo, min(hi, len(starts)) + 1):
    sel = [i for i, g in enumerate(grams) if len(g) == n]
    if not sel: continue
    P = Tensor(np.array([grams[i] for i in sel], np.int64).reshape(len(sel), n), device=x.device)
    hot = Tensor(np.eye(len(grams), dtype=np.float32)[sel], device=x.device)  # [this size's grams, all grams]
    # an n-gram takes every d-th token, d = 1 .. max_skip_count+1 (a unigram is counted once)
    for d in range(1, (skip + 2) if n > 1 else 2):
      span = C - (n - 1) * d
      if span <= 0: break
      hit = Tensor.ones(R, span, len(sel), dtype=dtypes.bool, device=x.device)
      for j in range(n): hit = hit & (xb[:, j * d:j * d + span].unsqueeze(-1) == P[:, j].reshape(1, 1, -1))
      counts = counts + hit.cast(dtypes.float32).sum(1).matmul(hot)
  y = counts.matmul(Tensor(np.eye(size, dtype=np.float32)[idxs].reshape(len(grams), size), device=x.device))
  if mode == "IDF": y = y.minimum(1)
  if mode != "TF": y = y * Tensor(np.array(w[:size], np.float32), device=x.device)
  return y if x.ndim == 2 else y.reshape(-1)

@op("Col2Im", since=18)
def _col2im(c: Call) -> Tensor:
  x, img, blk = c.t(0), c.ints(1), c.ints(2)
  assert img is not None and blk is not None
  n = len(img)
  d, s = c.attr("dilations") or [1] * n, c.attr("strides") or [1] * n
  p = c.attr("pads") or [0] * (2 * n)
  N, CK, L = x.shape
  C = CK // prod(blk)
  padded = [img[i] + p[i] + p[i + n] for i in range(n)]
  outs = [(padded[i] - d[i] * (blk[i] - 1) - 1) // s[i] + 1 for i in range(n)]
  # col2im is the adjoint of the sliding-window view: the gradient of <windows(z), cols> with respect to z
  z = Tensor.zeros(N, C, *padded, dtype=dtypes.float32, device=x.device, requires_grad=True)
  win = z._pool(tuple(blk), tuple(s), tuple(d))  # (N, C, *outs, *blk)
  cols = x.cast(dtypes.float32).reshape(N, C, *blk, *outs).permute(0, 1, *range(2 + n, 2 + 2 * n), *range(2, 2 + n))
  g = (win * cols).sum().gradient(z)[0]
  return g.shrink([None, None] + [(p[i], p[i] + img[i]) for i in range(n)]).cast(x.dtype)

# ---- GridSample ----

def _gs_unnormalize(g: Tensor, size: int, align: bool) -> Tensor:
  return (g + 1) / 2 * (size - 1) if align else ((g + 1) * size - 1) / 2

def _gs_reflect(x: Tensor, lo: float, hi: float) -> Tensor:
  rng = hi - lo
  if rng <= 0: return x * 0 + lo
  dx = (x - lo).abs()
  flips = (dx / rng).floor()
  extra = dx - flips * rng
  even = (flips.mod(2) == 0)
  return even.where(extra + lo, hi - extra)

@op("GridSample", since=16)
def _gridsample(c: Call) -> Tensor:
  x, grid = c.t(0), c.t(1)
  mode = {"bilinear": "linear", "bicubic": "cubic"}.get(c.attr("mode", "linear" if c.opset >= 20 else "bilinear"),
                                                       c.attr("mode", "linear"))
  pad, align = c.attr("padding_mode", "zeros"), bool(c.attr("align_corners", 0))
  N, C = x.shape[:2]
  sp = x.int_shape("ONNX GridSample")[2:]
  nd = len(sp)
  out_sp = grid.shape[1:-1]
  P = prod(out_sp)
  g = grid.cast(dtypes.float32).reshape(N, P, nd)
  # grid's last axis is (x, y[, z]): the innermost spatial axis first
  coords = []
  for i in range(nd):
    size = sp[nd - 1 - i]
    u = _gs_unnormalize(g[..., i], size, align)
    if pad == "border": u = u.clip(0, size - 1)
    elif pad == "reflection":
      u = _gs_reflect(u, 0, size - 1) if align else _gs_reflect(u, -0.5, size - 0.5).clip(0, size - 1)
    coords.append(u)
  coords = coords[::-1]  # now in spatial axis order
  xf = x.cast(dtypes.float32).reshape(N, C, prod(sp))
  def tap(idx: list[Tensor]) -> Tensor:
    inside: Tensor | None = None
    flat: Tensor | None = None
    for i, (ii, size) in enumerate(zip(idx, sp)):
      ok = (ii >= 0) & (ii < size)
      inside = ok if inside is None else inside & ok
      cl = ii.clip(0, size - 1).cast(dtypes.int64)
      flat = cl if flat is None else flat * size + cl
    assert flat is not None and inside is not None
    v = xf.gather(2, flat.reshape(N, 1, P).expand(N, C, P))
    return inside.reshape(N, 1, P).where(v, 0.0) if pad == "zeros" else v
  if mode == "nearest":
    out = tap([u.round() for u in coords])
  else:
    lo = [u.floor() for u in coords]
    fr = [u - l for u, l in zip(coords, lo)]
    offs = [0, 1] if mode == "linear" else [-1, 0, 1, 2]
    def weights(f: Tensor) -> list[Tensor]:
      if mode == "linear": return [1 - f, f]
      a = -0.75
      def k1(t: Tensor) -> Tensor: return ((a + 2) * t - (a + 3)) * t * t + 1
      def k2(t: Tensor) -> Tensor: return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
      return [k2(f + 1), k1(f), k1(1 - f), k2(2 - f)]
    ws = [weights(f) for f in fr]
    out = None
    for combo in itertools.product(range(len(offs)), repeat=nd):
      idx = [lo[i] + offs[j] for i, j in enumerate(combo)]
      if mode == "cubic" and pad == "border": idx = [ii.clip(0, sp[i] - 1) for i, ii in enumerate(idx)]
      if mode == "cubic" and pad == "reflection":
        idx = [(_gs_reflect(ii, 0, sp[i] - 1) if align else _gs_reflect(ii, -0.5, sp[i] - 0.5)).round()
               for i, ii in enumerate(idx)]
      w = None
      for i, j in enumerate(combo): w = ws[i][j] if w is None else w * ws[i][j]
      assert w is not None
      term = tap(idx) * w.reshape(N, 1, P)
      out = term if out is None else out + term
  assert out is not None
  return out.reshape(N, C, *out_sp).cast(x.dtype)

# ---- data-dependent outputs: the count is read to the host, everything else stays Tensor ops ----

def _select_slots(onehot_rank: Tensor, cnt: int, vals: Tensor) -> Tensor:
  """out[s] = vals[i] where rank[i] == s (each slot hit once); onehot_rank: (n,) int ranks, -1 for not selected."""
  n = onehot_rank.shape[0]
  hit = onehot_rank.reshape(1, n) == Tensor.arange(cnt, device=vals.device).reshape(cnt, 1).cast(onehot_rank.dtype)
  shape = (cnt, n) + (1,) * (vals.ndim - 1)
  return hit.reshape(shape).where(vals.reshape(1, *vals.shape), _const(0, vals.dtype, vals)).sum(1).cast(vals.dtype)

@op("Unique", since=11)
def _unique(c: Call) -> tuple:
  x = c.t(0)
  ax = c.attr("axis")
  srt = c.attr("sorted", 1)
  a0 = _axis(ax, x.ndim) if ax is not None else 0
  xs = x.reshape(-1, 1) if ax is None else x.permute([a0] + [i for i in range(x.ndim) if i != a0])
  n = xs.shape[0]
  flat = xs.reshape(n, -1)
  a, b = flat.reshape(n, 1, -1), flat.reshape(1, n, -1)
  eq = (a == b).all(-1)  # (n, n): slice i equals slice j
  earlier = Tensor.arange(n, device=x.device).reshape(1, n) < Tensor.arange(n, device=x.device).reshape(n, 1)
  first = ((eq & earlier).any(1)).logical_not()  # no earlier equal slice
  cnt = int(first.cast(dtypes.int32).sum().item())
  if srt:
    # lexicographic less-than of slices: the first differing element decides
    m = flat.shape[1]
    eqk, ltk = (a == b).cast(dtypes.int32), (a < b)
    prefix = eqk.cumprod(2).pad([(0, 0), (0, 0), (1, 0)], value=1)[:, :, :m].cast(dtypes.bool) if m > 1 else \
      Tensor.ones(n, n, 1, dtype=dtypes.bool, device=x.device)
    less = (ltk & prefix).any(2)  # less[i, j]: slice i < slice j
    rank_all = (less.transpose(0, 1) & first.reshape(1, n)).cast(dtypes.int32).sum(1)  # firsts smaller than slice i
  else: rank_all = (first.cast(dtypes.int32).cumsum(0) - 1)
  # a slice's slot is that of its first occurrence
  firsts_idx = (eq & first.reshape(1, n)).cast(dtypes.int32) * Tensor.arange(n, device=x.device).reshape(1, n)
  first_of = firsts_idx.sum(1)  # (n,): index of the first equal slice
  slot = _take_rows(rank_all, first_of)
  rank_first = first.where(rank_all, -1)
  idx = _select_slots(rank_first, cnt, Tensor.arange(n, device=x.device).cast(dtypes.int64))
  y = _select_slots(rank_first, cnt, xs)
  counts = _select_slots(rank_first, cnt, eq.cast(dtypes.int64).sum(1))
  if ax is not None:
    a0 = _axis(ax, x.ndim)
    y = y.permute(list(range(1, a0 + 1)) + [0] + list(range(a0 + 1, y.ndim)))
  else: y = y.reshape(cnt)
  return y, idx, slot.cast(dtypes.int64), counts

@op("NonMaxSuppression", since=10)
def _nms(c: Call) -> Tensor:
  boxes, scores = c.t(0), c.t(1)
  max_out = int(c.scalar(2)) if c.has(2) else 0
  iou_thr = float(c.scalar(3)) if c.has(3) else 0.0
  score_thr = float(c.scalar(4)) if c.has(4) else None
  B, C, N = scores.int_shape("ONNX NonMaxSuppression")
  bx = boxes.cast(dtypes.float32)
  if c.attr("center_point_box", 0):
    xc, yc, w, h = bx[..., 0], bx[..., 1], bx[..., 2], bx[..., 3]
    y1, x1, y2, x2 = yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2
  else:
    y1, x1, y2, x2 = (bx[..., 0].minimum(bx[..., 2]), bx[..., 1].minimum(bx[..., 3]),
                      bx[..., 0].maximum(bx[..., 2]), bx[..., 1].maximum(bx[..., 3]))
  area = (y2 - y1) * (x2 - x1)  # (B, N)
  iy = (y2.reshape(B, N, 1).minimum(y2.reshape(B, 1, N)) - y1.reshape(B, N, 1).maximum(y1.reshape(B, 1, N))).maximum(0)
  ix = (x2.reshape(B, N, 1).minimum(x2.reshape(B, 1, N)) - x1.reshape(B, N, 1).maximum(x1.reshape(B, 1, N))).maximum(0)
  inter = iy * ix
  union = area.reshape(B, N, 1) + area.reshape(B, 1, N) - inter
  iou = (union > 0).where(inter / union, 0.0)  # (B, N, N)
  sc = scores.cast(dtypes.float32)
  # boxes by descending score (ties: lower index first)
  order = sc.argsort(-1, descending=True).cast(dtypes.int64)  # (B, C, N)
  kept: list[tuple[Tensor, Tensor]] = []
  for k in range(N):
    ik = order[..., k]  # (B, C)
    s_k = sc.gather(2, ik.reshape(B, C, 1)).reshape(B, C)
    ok = s_k > score_thr if score_thr is not None else Tensor.ones(B, C, dtype=dtypes.bool, device=sc.device)
    iou_k = iou.reshape(B, 1, N, N).expand(B, C, N, N).gather(2, ik.reshape(B, C, 1, 1).expand(B, C, 1, N))
    iou_k = iou_k.reshape(B, C, N)
    for j, (ij, kj) in enumerate(kept):
      ok = ok & (kj & (iou_k.gather(2, ij.reshape(B, C, 1)).reshape(B, C) > iou_thr)).logical_not()
    n_prev = sum(kj.cast(dtypes.int32) for _, kj in kept) if kept else None
    if n_prev is not None: ok = ok & (n_prev < max_out)
    kept.append((ik, ok))
  if not kept or max_out == 0: return Tensor.zeros(0, 3, dtype=dtypes.int64, device=sc.device)
  keep = Tensor.stack(*[k for _, k in kept], dim=-1)  # (B, C, N) in score order
  idxs = Tensor.stack(*[i for i, _ in kept], dim=-1)
  flat_keep = keep.reshape(-1)
  cnt = int(flat_keep.cast(dtypes.int32).sum().item())
  rank = flat_keep.where(flat_keep.cast(dtypes.int32).cumsum(0) - 1, -1)
  bb = Tensor.arange(B, device=sc.device).reshape(B, 1, 1).expand(B, C, N).reshape(-1).cast(dtypes.int64)
  cc = Tensor.arange(C, device=sc.device).reshape(1, C, 1).expand(B, C, N).reshape(-1).cast(dtypes.int64)
  trip = Tensor.stack(bb, cc, idxs.reshape(-1), dim=1)
  return _select_slots(rank, cnt, trip)

@op("ai.onnx.preview.training:Gradient")
def _gradient(c: Call) -> tuple:
  # the gradients of the graph value y with respect to the values xs, by our autograd over the lazy graph
  xs = [c.scope.get(n) for n in c.attr("xs")]
  y = c.scope.get(c.attr("y"))
  grads = y.sum().gradient(*xs)
  return tuple(g.cast(x.dtype) for g, x in zip(grads, xs))
