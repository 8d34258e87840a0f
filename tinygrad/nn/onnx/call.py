"""What an op sees: Call (one node being run: inputs, attributes, opset, host reads, subgraphs) and Scope (the values of
a graph run), and the ONNX <-> our dtype table. Shared by the runner and the op table."""
from __future__ import annotations
import contextlib
from typing import Any, Sequence
import numpy as np
from tinygrad.tensor import Tensor
from tinygrad.dtype import DType, dtypes
from tinygrad.helpers import Context
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp
from tinygrad.nn.onnx.proto import OnnxError, Graph, Node, type_name

MIN_OPSET, MAX_OPSET = 1, 28  # the default domain's versions this runner knows (28: the newest onnx 1.23 defines)

# onnx TensorProto.DataType -> our dtype
DTYPES: dict[int, DType] = {1: dtypes.float32, 2: dtypes.uint8, 3: dtypes.int8, 4: dtypes.uint16, 5: dtypes.int16,
                            6: dtypes.int32, 7: dtypes.int64, 9: dtypes.bool, 10: dtypes.float16, 11: dtypes.float64,
                            12: dtypes.uint32, 13: dtypes.uint64, 16: dtypes.bfloat16, 17: dtypes.fp8e4m3,
                            19: dtypes.fp8e5m2}
ONNX_OF: dict[DType, int] = {v: k for k, v in DTYPES.items()}

def to_dtype(code: int, where: str) -> DType:
  if code not in DTYPES: raise OnnxError(f"{where}: data type {type_name(code)} is not supported")
  return DTYPES[code]

def numpy_to_tensor(arr: np.ndarray, code: int, where: str, device: str | None = None) -> Tensor:
  dt = to_dtype(code, where)
  if dt in (dtypes.bfloat16, dtypes.fp8e4m3, dtypes.fp8e5m2):
    bits = arr if arr.dtype.kind == "u" else arr.view(np.uint16 if dt is dtypes.bfloat16 else np.uint8)
    return Tensor._from_storage(np.array(bits, order="C"), dt, device)
  return Tensor(np.array(arr, order="C"), device=device, dtype=dt)

Value = Any  # Tensor | list[Tensor] | None

class SymbolicUnsupported(OnnxError):
  """A node that cannot run with a named dim bound to a variable: the runner binds that model's dims per call."""

def flat_host(v: Any) -> list:
  """A host value (a nested list of numbers and symbolic sizes) flattened in row-major order."""
  if isinstance(v, (list, tuple)): return [y for x in v for y in flat_host(x)]
  return [v]

class Call:
  """One node being run: its inputs, attributes and opset, and access to host values and subgraphs."""
  def __init__(self, runner: Any, node: Node, inputs: list[Value], names: list[str], opset: int, scope: Scope,
               device: str | None = None):
    self.runner, self.node, self.inputs, self.names, self.opset, self.scope = runner, node, inputs, names, opset, scope
    self.device = device  # where the op's own new tensors go
  def __len__(self) -> int: return len(self.inputs)
  def attr(self, name: str, default: Any = None) -> Any: return self.node.attrs.get(name, default)
  def has(self, i: int) -> bool: return i < len(self.inputs) and self.inputs[i] is not None
  def t(self, i: int) -> Tensor:
    if not self.has(i): raise self.error(f"input {i} is required")
    v = self.inputs[i]
    if not isinstance(v, Tensor): raise self.error(f"input {i} is a {type(v).__name__}, not a tensor")
    return v
  def opt(self, i: int) -> Tensor | None: return self.t(i) if self.has(i) else None
  def static(self, i: int) -> list | None:
    """The values of input i on the host (a nested list), None when the input is absent."""
    if not self.has(i): return None
    self.t(i)
    # NOTE: read where it was computed (a shape value on the CPU), not the copy moved to this op's device
    name = self.names[i]
    src = self.runner.cpu_initializer(name) if self.runner.is_initializer(name) else self.scope.get(name)
    return self.scope.host(name, src)
  def scalar(self, i: int) -> Any:
    """The single value of input i (a 0-d or one-element tensor) as a Python number."""
    v = flat_host(self.static(i))
    if len(v) != 1: raise self.error(f"input {i} must hold one value, it has {len(v)}")
    return np.array(self._concrete(i, v)[0]).item()
  def ints(self, i: int) -> list[int] | None:
    """The values of input i as a flat list of ints (axes, counts: a symbolic size there is refused)."""
    v = self.static(i)
    return None if v is None else [int(x) for x in self._concrete(i, flat_host(v))]
  def sizes(self, i: int) -> list | None:
    """The values of input i as a flat list of sizes (a shape, slice bounds): a size computed from a symbolic dim stays
    a UOp, for ops that take symbolic sizes."""
    v = self.static(i)
    return None if v is None else [x if isinstance(x, UOp) else int(x) for x in flat_host(v)]
  def _concrete(self, i: int, v: list) -> list:
    if any(isinstance(x, UOp) for x in v):
      raise SymbolicUnsupported(f"{self.node.label()}: input {i} holds the symbolic sizes {v}; it needs concrete "
                                "values")
    return v
  def error(self, what: str) -> OnnxError:
    return OnnxError(f"{self.node.label()} at opset {self.opset}: {what}")
  def subgraph(self, g: Graph, inputs: Sequence[Value]) -> list[Value]:
    return self.runner.run_graph(g, list(inputs), self.scope, self.opset_map())
  def opset_map(self) -> dict[str, int]: return self.scope.opsets

class Scope:
  """The values of one graph run (and, through `parent`, those of the graphs around it)."""
  def __init__(self, runner: Any, parent: Scope | None, opsets: dict[str, int]):
    self.runner, self.parent, self.opsets = runner, parent, opsets
    self.values: dict[str, Value] = {}
    self.static_ok: dict[str, bool] = {}  # value -> computed from shapes and constants only
    self.sym: dict[str, np.ndarray] = {}  # value -> its host value (object array) where it holds symbolic sizes
  def get(self, name: str) -> Value:
    s: Scope | None = self
    while s is not None:
      if name in s.values: return s.values[name]
      s = s.parent
    raise KeyError(name)
  def is_static(self, name: str) -> bool:
    s: Scope | None = self
    while s is not None:
      if name in s.static_ok: return s.static_ok[name]
      s = s.parent
    return False
  def sym_of(self, name: str) -> np.ndarray | None:
    s: Scope | None = self
    while s is not None:
      if name in s.values: return s.sym.get(name)
      s = s.parent
    return None
  def host(self, name: str, t: Tensor) -> list:
    runner = self.runner
    if name in runner._const_host: return runner._const_host[name]
    if (arr := self.sym_of(name)) is not None: return arr.tolist()
    # NOTE: a value read on the host is baked into the graph: one that depends on a bound dim would be wrong for the
    # next binding (a TinyJit replay), so the model binds its dims per call instead
    if runner._bound and (bound := [u.src[0].arg[0] for u in t.uop.toposort() if u.op is Ops.BIND]):
      raise SymbolicUnsupported(f"{name!r} is read on the host and depends on the symbolic dims {sorted(set(bound))}")
    static, key = self.is_static(name), (runner._signature, name)
    if static and key in runner._host_cache: return runner._host_cache[key]
    # NOTE: shape values are computed on the CPU even under COMPILE_ONLY=1, which compiles the model's device kernels
    on_cpu = t.device.split(":")[0] == "CPU"
    with Context(COMPILE_ONLY=0) if on_cpu else contextlib.nullcontext(): ret = t.numpy().tolist()
    if static: runner._host_cache[key] = ret
    return ret

