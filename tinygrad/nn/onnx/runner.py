"""OnnxRunner: an ONNX model run as Tensor ops.

Values are Tensors (tensors), lists of Tensors (sequences) and None (an absent optional). An op that needs an input's
values on the host (a Reshape's shape, a Slice's starts, a TopK's k) reads them with `Call.static`: values computed only
from shapes and constants are cached per input signature, so a TinyJit capture (which cannot read the host) finds them
there; anything else is realized (data-dependent shapes: NonZero, Compress, Loop trip counts)."""
from __future__ import annotations
import os
from typing import Any
import numpy as np
from tinygrad.tensor import Tensor
from tinygrad.dtype import dtypes
from tinygrad.nn.onnx.proto import OnnxError, Model, Graph, Node, Function, ValueInfo, load_model, tensor_to_numpy
from tinygrad.nn.onnx.proto import type_name
from tinygrad.nn.onnx.call import MIN_OPSET, MAX_OPSET, ONNX_OF, Call, Scope, Value, numpy_to_tensor
from tinygrad.nn.onnx.ops import check_graph, run_node

class OnnxRunner:
  """Run an ONNX model: `OnnxRunner(path | bytes | uint8 Tensor)(feeds)` -> {output name: Tensor}.

  feeds: {input name: numpy array | Tensor | list (a sequence) | None}, or keyword arguments. Named (symbolic) dims of
  the inputs take the sizes of the feeds; a feed whose rank, fixed dims or dtype contradicts the model is an
  OnnxError."""
  def __init__(self, model: str | os.PathLike | bytes | Tensor, device: str | None = None):
    if isinstance(model, Tensor):
      if model.dtype is not dtypes.uint8 or model.ndim != 1:
        raise OnnxError("OnnxRunner: a Tensor model must be 1-d uint8")
      data, src, base = model.numpy().tobytes(), "<uint8 tensor>", None
    elif isinstance(model, (bytes, bytearray, memoryview)):
      data, src, base = bytes(model), f"<{len(model)} bytes>", None
    else:
      path = os.fspath(model)
      with open(path, "rb") as f: data = f.read()
      src, base = path, os.path.dirname(os.path.abspath(path))
    self.model: Model = load_model(data, src, base)
    self.device = device
    op_opset = self.model.opsets.get("")
    if op_opset is not None and not MIN_OPSET <= op_opset <= MAX_OPSET:
      raise OnnxError(f"{src}: the model imports opset {op_opset} of the default domain; this runner supports "
                      f"{MIN_OPSET} to {MAX_OPSET}")
    self._const_host: dict[str, list] = {}
    self._cpu_inits: dict[str, Tensor] = {}
    self._fed: set[str] = set()
    self._host_cache: dict[Any, list] = {}
    self._signature: Any = None
    check_graph(self.model.graph, self.model.opsets, self.model.functions, src)
    self.initializers: dict[str, Tensor] = {n: self._tensor(t, f"{src}: initializer")
                                            for n, t in self.model.graph.initializers.items()}
    for n, sp in self.model.graph.sparse_initializers.items():
      self.initializers[n] = self.sparse_tensor(sp, f"{src}: sparse initializer")
    init = set(self.initializers)
    self.inputs: list[ValueInfo] = [v for v in self.model.graph.inputs if v.name not in init]
    self.outputs: list[ValueInfo] = list(self.model.graph.outputs)

  def _tensor(self, t: Any, where: str) -> Tensor:
    arr, code = tensor_to_numpy(t, self.model.base_dir, where)
    ret = numpy_to_tensor(arr, code, where, self.device)
    # NOTE: small integer constants are kept on the host too: they are shapes, axes and indices ops read there
    if t.name and arr.dtype.kind in "iub" and arr.size <= 64: self._const_host[t.name] = arr.tolist()
    return ret
  def tensor_of(self, t: Any, where: str) -> Tensor: return self._tensor(t, where)
  def is_initializer(self, name: str) -> bool: return name in self.initializers and name not in self._fed
  def cpu_initializer(self, name: str) -> Tensor:
    """An initializer decoded again onto the CPU, for shape computations when the model runs on another device."""
    if name not in self._cpu_inits:
      t = self.model.graph.initializers.get(name)
      if t is None: return self.initializers[name].to("CPU")
      arr, code = tensor_to_numpy(t, self.model.base_dir, f"{self.model.src}: initializer")
      self._cpu_inits[name] = numpy_to_tensor(arr, code, f"initializer {name!r}", "CPU")
    return self._cpu_inits[name]
  def sparse_tensor(self, sp: Any, where: str) -> Tensor:
    if sp.values is None or sp.indices is None: raise OnnxError(f"{where}: a sparse tensor needs values and indices")
    vals, code = tensor_to_numpy(sp.values, self.model.base_dir, where)
    idx, _ = tensor_to_numpy(sp.indices, self.model.base_dir, where)
    dims = tuple(sp.dims)
    if any(d < 0 for d in dims): raise OnnxError(f"{where}: negative dimension in {dims}")
    n = int(np.prod(dims)) if dims else 1
    if n > 16 * (vals.size + idx.size) + 1024:
      raise OnnxError(f"{where}: a sparse tensor of shape {dims} is larger than its {vals.size} values justify")
    flat = idx.reshape(-1).astype(np.int64) if idx.ndim == 1 else np.ravel_multi_index(idx.T.astype(np.int64), dims)
    if vals.ndim != 1 or flat.size != vals.size or (flat.size and (flat.min() < 0 or flat.max() >= n)):
      raise OnnxError(f"{where}: sparse indices {idx.shape} do not fit values {vals.shape} in shape {dims}")
    dense = np.zeros(n, dtype=vals.dtype)
    dense[flat] = vals
    return numpy_to_tensor(dense.reshape(dims), code, where, self.device)

  def __call__(self, feeds: dict[str, Any] | None = None, realize: bool = True, **kw: Any) -> dict[str, Value]:
    feeds = {**(feeds or {}), **kw}
    unknown = set(feeds) - {v.name for v in self.model.graph.inputs}
    if unknown: raise OnnxError(f"{self.model.src}: feeds {sorted(unknown)} are not inputs of the model "
                                f"(inputs: {[v.name for v in self.inputs]})")
    args: list[Value] = []
    for vi in self.model.graph.inputs:
      if vi.name in feeds: args.append(self._feed(vi, feeds[vi.name]))
      elif vi.name in self.initializers: args.append(self.initializers[vi.name])
      elif vi.kind == "optional": args.append(None)
      else: raise OnnxError(f"{self.model.src}: input {vi.name!r} has no feed")
    self._signature, self._fed = tuple(_sig(a) for a in args), set(feeds)
    outs = self.run_graph(self.model.graph, args, None, self.model.opsets, top=True)
    # NOTE: the outputs are realized in one schedule: realized one by one, the graph they share would run once each
    flat = [t for o in outs for t in (o if isinstance(o, list) else [o]) if isinstance(t, Tensor)]
    if realize and flat: flat[0].realize(*flat[1:])
    return {vi.name: o for vi, o in zip(self.outputs, outs)}

  def _feed(self, vi: ValueInfo, v: Any) -> Value:
    if v is None or isinstance(v, list) and vi.kind.startswith(("sequence", "optional(sequence")):
      return self._seq_feed(vi, v)
    if not isinstance(v, Tensor):
      arr = np.asarray(v)
      if arr.dtype == object or arr.dtype.kind in "USc":
        raise OnnxError(f"input {vi.name!r}: {arr.dtype} is not supported")
      code = _numpy_code(arr)
      v = numpy_to_tensor(arr, code, f"input {vi.name!r}", self.device)
    if vi.kind == "tensor" and vi.elem and ONNX_OF.get(v.dtype) != vi.elem:
      raise OnnxError(f"input {vi.name!r}: the model wants {type_name(vi.elem)}, the feed is {v.dtype}")
    if vi.kind == "tensor" and vi.shape is not None:
      if len(vi.shape) != v.ndim: raise OnnxError(f"input {vi.name!r}: the model wants rank {len(vi.shape)} "
                                                  f"{vi.shape}, the feed has shape {v.shape}")
      bad = [(d, s) for d, s in zip(vi.shape, v.shape) if isinstance(d, int) and d > 0 and d != s]
      if bad: raise OnnxError(f"input {vi.name!r}: the model wants shape {vi.shape}, the feed has {v.shape}")
    return v
  def _seq_feed(self, vi: ValueInfo, v: Any) -> Value:
    if v is None: return None
    return [x if isinstance(x, Tensor) else numpy_to_tensor(np.asarray(x), _numpy_code(np.asarray(x)),
                                                            f"input {vi.name!r}", self.device) for x in v]

  def run_graph(self, g: Graph, args: list[Value], parent: Scope | None, opsets: dict[str, int],
                top: bool = False) -> list[Value]:
    scope = Scope(self, parent, opsets)
    if top:
      for nm, t in self.initializers.items(): scope.values[nm], scope.static_ok[nm] = t, True
    else:
      for nm, tp in g.initializers.items():
        scope.values[nm], scope.static_ok[nm] = self._tensor(tp, f"subgraph {g.name!r} initializer"), True
    formal = list(g.inputs)
    if len(args) > len(formal):
      raise OnnxError(f"graph {g.name!r}: {len(args)} inputs given, it takes {len(formal)}")
    for vi, a in zip(formal, args):
      scope.values[vi.name], scope.static_ok[vi.name] = a, top and self.is_initializer(vi.name)
    for node in g.nodes: run_node(self, scope, node)
    try: return [scope.get(o.name) for o in g.outputs]
    except KeyError as e: raise OnnxError(f"graph {g.name!r}: output {e.args[0]!r} is never computed") from None

  def run_function(self, f: Function, call: Call) -> list[Value]:
    scope = Scope(self, None, {**call.scope.opsets, **f.opsets})
    for name, v in zip(f.inputs, call.inputs): scope.values[name] = v
    for name, v in zip(f.inputs, call.names): scope.static_ok[name] = call.scope.is_static(v) if v else False
    attrs = {**f.attr_defaults, **{k: v for k, v in call.node.attrs.items()}}
    for n in f.nodes:
      bound = {k: attrs[r] for k, r in n.refs.items() if r in attrs}
      run_node(self, scope, Node(n.op, n.domain, n.inputs, n.outputs, n.name, {**n.attrs, **bound}))
    return [scope.values.get(o) for o in f.outputs]

def _sig(a: Value) -> Any:
  if isinstance(a, Tensor): return (a.shape, a.dtype)
  if isinstance(a, list): return tuple(_sig(x) for x in a)
  return None

def _numpy_code(arr: np.ndarray) -> int:
  name = arr.dtype.name
  table = {"float32": 1, "uint8": 2, "int8": 3, "uint16": 4, "int16": 5, "int32": 6, "int64": 7, "bool": 9,
           "float16": 10, "float64": 11, "uint32": 12, "uint64": 13, "bfloat16": 16, "float8_e4m3fn": 17,
           "float8_e5m2": 19}
  if name not in table: raise OnnxError(f"a feed of numpy dtype {name} is not supported")
  return table[name]

