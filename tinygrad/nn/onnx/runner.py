"""OnnxRunner: an ONNX model run as Tensor ops.

Values are Tensors (tensors), lists of Tensors (sequences) and None (an absent optional). An op that needs an input's
values on the host (a Reshape's shape, a Slice's starts, a TopK's k) reads them with `Call.static`: values computed only
from shapes and constants are cached per input signature, so a TinyJit capture (which cannot read the host) finds them
there; anything else is realized (data-dependent shapes: NonZero, Compress, Loop trip counts)."""
from __future__ import annotations
import os, re
from typing import Any, cast
import numpy as np
from tinygrad.tensor import Tensor
from tinygrad.dtype import dtypes
from tinygrad.uop.ops import UOp
from tinygrad.uop.sint import all_concrete, bound_value, unbind_sint
from tinygrad.nn.onnx.proto import OnnxError, Model, Graph, Node, Function, ValueInfo, load_model, tensor_to_numpy
from tinygrad.nn.onnx.proto import type_name
from tinygrad.nn.onnx.call import MIN_OPSET, MAX_OPSET, ONNX_OF, Call, Scope, Value, numpy_to_tensor
from tinygrad.nn.onnx.call import SymbolicUnsupported
from tinygrad.nn.onnx.ops import check_graph, run_node

class OnnxRunner:
  """Run an ONNX model: `OnnxRunner(path | bytes | uint8 Tensor)(feeds)` -> {output name: Tensor}.

  feeds: {input name: numpy array | Tensor | list (a sequence) | None}, or keyword arguments. Named (symbolic) dims of
  the inputs take the sizes of the feeds; a feed whose rank, fixed dims or dtype contradicts the model is an
  OnnxError.

  Symbolic dims: `runner.bind(feeds)` gives the feeds with each named dim bound to this runner's variable (1 to
  `dim_max.get(name, DIM_MAX)`); fed those (a TinyJit's inputs), the graph's shapes are symbolic and one capture serves
  every size. A model with a node that needs a concrete size raises then, naming it. With symbolic=True concrete feeds
  are bound to the variables too (the outputs come back at the fed sizes); a model that cannot be falls back to
  binding per call and `concrete_reason` says why."""
  def __init__(self, model: str | os.PathLike | bytes | Tensor, device: str | None = None, symbolic: bool = False,
               dim_max: dict[str, int] | None = None):
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
    self.symbolic, self.dim_max = symbolic, dict(dim_max or {})
    bad = [(k, v) for k, v in self.dim_max.items() if not isinstance(v, int) or v < 1]
    if bad: raise OnnxError(f"OnnxRunner: dim_max needs ints >= 1, got {bad}")
    self.concrete_reason: str | None = None  # why the named dims are bound per call (None: they are symbolic)
    self._vars: dict[str, UOp] = {}
    self._bound: dict[str, UOp] = {}  # this call's named dim -> its bound variable
    self._graph_concrete = False  # a node of the graph needs concrete sizes: concrete feeds bind per call from now on
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
    given = any(isinstance(a, Tensor) and not all_concrete(a.shape) for a in args)
    if given or (self.symbolic and not self._graph_concrete):
      why: str | None = None
      # NOTE: a size above its bound is the caller's error (raise dim_max), not a reason to bind per call
      try: sym_args, internal = self._bind_args(args, given)
      except SymbolicUnsupported as e: sym_args, internal, why = args, None, str(e)
      try:
        if internal is not None: return self._run(sym_args, set(feeds), realize, internal)
      except SymbolicUnsupported as e: why, self._graph_concrete = str(e), not given
      except OnnxError as e: why, self._graph_concrete = f"{e} (with the named dims {sorted(self._bound)} symbolic)", \
        not given
      finally: self._bound = {}
      # NOTE: the caller bound the dims (a TinyJit input): binding them per call here would be baked into its capture
      if given: raise OnnxError(f"{self.model.src}: this model cannot run with symbolic dims: {why}; feed concrete "
                                "sizes (one TinyJit capture per size)")
      if why is not None: self.concrete_reason = why
    return self._run(args, set(feeds), realize, False)

  def bind(self, feeds: dict[str, Any] | None = None, **kw: Any) -> dict[str, Value]:
    """The feeds as Tensors whose named dims are bound to this runner's variables: the input of a TinyJit-ed call,
    whose capture then serves every size of those dims (within their bounds)."""
    feeds = {**(feeds or {}), **kw}
    vis = {v.name: v for v in self.model.graph.inputs}
    unknown = set(feeds) - set(vis)
    if unknown: raise OnnxError(f"{self.model.src}: feeds {sorted(unknown)} are not inputs of the model")
    sizes: dict[str, int] = {}
    out: dict[str, Value] = {}
    for name, v in feeds.items():
      vi, t = vis[name], self._feed(vis[name], v)
      if not isinstance(t, Tensor) or vi.shape is None: out[name] = t; continue
      for d, n in zip(vi.shape, t.shape):
        if isinstance(d, str) and d:
          if isinstance(n, UOp): raise OnnxError(f"input {name!r}: the feed is already symbolic ({t.shape})")
          if sizes.setdefault(d, n) != n: raise OnnxError(f"named dim {d!r} is {sizes[d]} in one input, {n} in "
                                                          f"input {name!r}")
          self._check_size(name, d, n)
      out[name] = t.reshape(tuple(self._var(d).bind(cast(int, n)) if isinstance(d, str) and d else n
                                  for d, n in zip(vi.shape, t.shape)))
    return out

  def _var(self, dim: str) -> UOp:
    if dim not in self._vars:
      # NOTE: a variable's name is a kernel parameter: a C identifier, unique per dim name
      base = "d_" + re.sub(r"\W", "_", dim)
      name, k = base, 1
      while any(v.arg[0] == name for v in self._vars.values()): name, k = f"{base}_{k}", k + 1
      self._vars[dim] = UOp.variable(name, 1, self.dim_max.get(dim, DIM_MAX))
    return self._vars[dim]

  def _check_size(self, name: str, dim: str, n: int) -> None:
    hi = self.dim_max.get(dim, DIM_MAX)
    if n > hi: raise OnnxError(f"input {name!r}: named dim {dim!r} is {n}, above its bound {hi} (raise it with "
                               f"OnnxRunner(..., dim_max={{{dim!r}: {n}}}))")
    if n < 1: raise SymbolicUnsupported(f"input {name!r}: named dim {dim!r} is {n}; a variable is at least 1")

  def _bind_args(self, args: list[Value], given: bool) -> tuple[list[Value], bool | None]:
    """The args with their named dims bound: (args, True) when bound here, (args, False) when the caller bound them,
    (args, None) when the model has no named dim to bind."""
    self._bound = {}
    if given:
      for vi, a in zip(self.model.graph.inputs, args):
        if not isinstance(a, Tensor) or vi.shape is None: continue
        for d, n in zip(vi.shape, a.shape):
          if not isinstance(n, UOp): continue
          if not isinstance(d, str) or not d:
            raise OnnxError(f"input {vi.name!r}: a symbolic size {n} at a dim the model does not name ({vi.shape})")
          if d in self._bound and self._bound[d] is not n:
            raise OnnxError(f"named dim {d!r} is bound to two different sizes in the feeds")
          self._bound[d] = n
      return args, False
    sizes: dict[str, int] = {}
    out: list[Value] = []
    for vi, a in zip(self.model.graph.inputs, args):
      if not isinstance(a, Tensor) or vi.shape is None or not any(isinstance(d, str) and d for d in vi.shape):
        out.append(a); continue
      shape: list[Any] = []
      for d, n in zip(vi.shape, a.shape):
        if isinstance(d, str) and d:
          n = cast(int, n)  # the feeds are concrete here (given is False)
          if sizes.setdefault(d, n) != n:
            raise SymbolicUnsupported(f"named dim {d!r} has the sizes {sizes[d]} and {n} in the feeds")
          self._check_size(vi.name, d, n)
          shape.append(self._bound.setdefault(d, self._var(d).bind(n)))
        else: shape.append(n)
      out.append(a.reshape(tuple(shape)))
    return out, (True if self._bound else None)

  def _run(self, args: list[Value], fed: set[str], realize: bool, concrete_out: bool) -> dict[str, Value]:
    self._signature, self._fed = tuple(_sig(a) for a in args), fed
    outs = self.run_graph(self.model.graph, args, None, self.model.opsets, top=True)
    # NOTE: bound here from concrete feeds, the outputs go back to the bound sizes, as the caller fed them
    if concrete_out: outs = [_concrete(o) for o in outs]
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

DIM_MAX = 64  # a named dim's default bound: buffers of a symbolic size are allocated at the bound

def _concrete(v: Value) -> Value:
  if isinstance(v, list): return [_concrete(x) for x in v]
  if not isinstance(v, Tensor) or all_concrete(v.shape): return v
  sizes = [bound_value(s) if isinstance(s, UOp) else s for s in v.shape]
  if any(s is None for s in sizes): raise OnnxError(f"an output of shape {v.shape} has an unbound size")
  return v.reshape(tuple(sizes))

def _sig(a: Value) -> Any:
  # NOTE: a size bound to a variable keys by the variable: host values are cached for every binding (one that depends
  # on the binding is never read on the host, see Scope.host)
  if isinstance(a, Tensor): return (tuple(unbind_sint(s) for s in a.shape), a.dtype)
  if isinstance(a, list): return tuple(_sig(x) for x in a)
  return None

def _numpy_code(arr: np.ndarray) -> int:
  name = arr.dtype.name
  table = {"float32": 1, "uint8": 2, "int8": 3, "uint16": 4, "int16": 5, "int32": 6, "int64": 7, "bool": 9,
           "float16": 10, "float64": 11, "uint32": 12, "uint64": 13, "bfloat16": 16, "float8_e4m3fn": 17,
           "float8_e5m2": 19}
  if name not in table: raise OnnxError(f"a feed of numpy dtype {name} is not supported")
  return table[name]

