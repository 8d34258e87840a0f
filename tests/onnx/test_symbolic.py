"""Named (symbolic) dims bound to variables: graphs built with onnx.helper whose shape math runs on a symbolic batch
(Shape -> Gather -> Concat -> Reshape, ConstantOfShape, Expand, a Slice along the batch, a size used as data), under
TinyJit across batch sizes with nothing compiled after the first call, against onnxruntime; a graph that needs a
concrete size binds per call and says why; bounds. docs/onnx.md."""
import numpy as np
import pytest
import onnxruntime as ort
from onnx import helper, TensorProto, numpy_helper
from tinygrad import TinyJit
from tinygrad.helpers import Context
from tinygrad.uop import hooks
from tinygrad.nn.onnx import OnnxRunner, OnnxError

def _model(nodes, inputs, outputs, inits=()) -> bytes:
  g = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(np.array(v), k) for k, v in inits])
  return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=8).SerializeToString()

def _shape_math() -> bytes:
  """x (N, 4, 6) -> y = reshape(x, (N, 24)) * ones(N, 1) + sum over the batch, z = x[1:] along the batch, w = expand
  of a row to (N, 4, 6) + x, m = x / N (the size as a float value)."""
  f = TensorProto.FLOAT
  nodes = [
    helper.make_node("Shape", ["x"], ["s"]),
    helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
    helper.make_node("Concat", ["n", "c24"], ["shape2"], axis=0),
    helper.make_node("Reshape", ["x", "shape2"], ["y2"]),
    helper.make_node("Concat", ["n", "one"], ["shape_n1"], axis=0),
    helper.make_node("ConstantOfShape", ["shape_n1"], ["ones"], value=numpy_helper.from_array(np.ones(1, np.float32))),
    helper.make_node("Mul", ["y2", "ones"], ["y3"]),
    helper.make_node("ReduceSum", ["y2", "zero"], ["tot"], keepdims=1),
    helper.make_node("Add", ["y3", "tot"], ["y"]),
    helper.make_node("Slice", ["x", "one", "big", "zero"], ["z"]),
    helper.make_node("Slice", ["s", "one", "big"], ["rest"]),
    helper.make_node("Concat", ["n", "rest"], ["shape3"], axis=0),
    helper.make_node("Expand", ["row", "shape3"], ["rows"]),
    helper.make_node("Add", ["rows", "x"], ["w"]),
    helper.make_node("Cast", ["n"], ["nf"], to=f),
    helper.make_node("Div", ["x", "nf"], ["m"]),
  ]
  inits = [("zero", np.array([0], np.int64)), ("one", np.array([1], np.int64)), ("c24", np.array([24], np.int64)),
           ("big", np.array([2 ** 62], np.int64)), ("row", np.arange(6, dtype=np.float32))]
  outs = [helper.make_tensor_value_info(o, f, None) for o in ("y", "z", "w", "m")]
  return _model(nodes, [helper.make_tensor_value_info("x", f, ["N", 4, 6])], outs, inits)

def _ort(model: bytes, feeds: dict) -> list[np.ndarray]:
  return ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)

def _x(n: int, seed: int = 0) -> np.ndarray: return np.random.default_rng(seed + n).standard_normal((n, 4, 6), np.float32)

# NOTE: on another device than the CPU, shape values are computed on the CPU and the symbolic data on the device
@pytest.mark.parametrize("device", [None, "PYTHON"])
def test_shape_math_on_a_symbolic_batch_under_jit_compiles_once(device):
  model = _shape_math()
  with Context(EMULATE="NV" if device else ""):
    runner = OnnxRunner(model, device=device)
    jit = TinyJit(lambda x: list(runner({"x": x}).values()))
    got: list = []
    fn = hooks.register("compiled", lambda ast, spec, r: got.append(spec.name))
    try:
      for k, n in enumerate((3, 5, 3, 1)):
        del got[:]
        outs = jit(runner.bind(x=_x(n))["x"])
        if k >= 1: assert got == [], f"batch {n} (call {k}) compiled {got}"
        for o, r in zip(outs, _ort(model, {"x": _x(n)})):
          np.testing.assert_allclose(o.reshape(r.shape).numpy(), r, rtol=1e-5, atol=1e-5)
    finally: hooks.unregister("compiled", fn)
  assert runner.concrete_reason is None and jit.captured is not None

def test_concrete_feeds_bound_symbolically_reuse_the_model_kernels():
  model = _shape_math()
  runner = OnnxRunner(model, symbolic=True)
  got: list = []
  fn = hooks.register("compiled", lambda ast, spec, r: got.append(spec.name))
  try:
    for k, n in enumerate((2, 4)):
      del got[:]
      outs = list(runner({"x": _x(n)}).values())
      # the outputs come back at the fed sizes
      for o, r in zip(outs, _ort(model, {"x": _x(n)})):
        assert o.shape == r.shape
        np.testing.assert_allclose(o.numpy(), r, rtol=1e-5, atol=1e-5)
      # NOTE: the reduce over the batch is symbolic and serves both sizes; what meets the outputs is fused into their
      # copies to the fed (concrete) sizes, compiled per size
      if k: assert len(got) <= len(outs), got
  finally: hooks.unregister("compiled", fn)
  assert runner.concrete_reason is None

def _needs_concrete(kind: str) -> bytes:
  """Graphs on x (N, 1) whose result depends on N in a way one kernel cannot serve: a Range of length N (read on the
  host), the first two rows (clipped to N), a Squeeze without axes (drops N when it is 1)."""
  f = TensorProto.FLOAT
  if kind == "Range":
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "z"], ["n"], axis=0),
             helper.make_node("Range", ["z", "n", "o"], ["r"]), helper.make_node("Cast", ["r"], ["rf"], to=f),
             helper.make_node("Unsqueeze", ["rf", "o1"], ["r2"]), helper.make_node("Add", ["x", "r2"], ["y"])]
  elif kind == "Slice": nodes = [helper.make_node("Slice", ["x", "z1", "two1", "z1"], ["y"])]
  else: nodes = [helper.make_node("Squeeze", ["x"], ["y"])]
  inits = [("z", np.array(0, np.int64)), ("o", np.array(1, np.int64)), ("o1", np.array([1], np.int64)),
           ("z1", np.array([0], np.int64)), ("two1", np.array([2], np.int64))]
  used = {i for n in nodes for i in n.input}
  return _model(nodes, [helper.make_tensor_value_info("x", f, ["N", 1])], [helper.make_tensor_value_info("y", f, None)],
                [(k, v) for k, v in inits if k in used])

@pytest.mark.parametrize("kind", ["Range", "Slice", "Squeeze"])
def test_a_model_that_needs_a_concrete_size_binds_per_call_and_says_why(kind):
  model = _needs_concrete(kind)
  runner = OnnxRunner(model, symbolic=True)
  for n in (1, 3):
    x = np.arange(n, dtype=np.float32).reshape(n, 1) * 0.5
    got, ref = runner({"x": x})["y"].numpy(), _ort(model, {"x": x})[0]
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref)
  assert runner.concrete_reason is not None and kind in runner.concrete_reason, runner.concrete_reason
  # fed bound dims (a TinyJit input), it cannot bind per call: an error naming the node, never a wrong capture
  with pytest.raises(OnnxError, match=rf"cannot run with symbolic dims.*{kind}"):
    OnnxRunner(model)(OnnxRunner(model).bind(x=np.ones((3, 1), np.float32)))

def test_by_default_concrete_feeds_bind_per_call():
  plain = OnnxRunner(_shape_math())
  np.testing.assert_allclose(plain({"x": _x(2)})["w"].numpy(), _ort(_shape_math(), {"x": _x(2)})[2], rtol=1e-5)
  assert plain.concrete_reason is None and not plain._graph_concrete

def test_named_dim_bounds():
  runner = OnnxRunner(_shape_math(), symbolic=True, dim_max={"N": 4})
  assert runner({"x": _x(4)})["y"].shape == (4, 24)
  with pytest.raises(OnnxError, match=r"input 'x': named dim 'N' is 5, above its bound 4.*dim_max"):
    runner({"x": _x(5)})
  with pytest.raises(OnnxError, match=r"named dim 'N' is 5, above its bound 4"):
    runner.bind(x=_x(5))
  with pytest.raises(OnnxError, match="dim_max needs ints >= 1"):
    OnnxRunner(_shape_math(), dim_max={"N": 0})
  # a bound variable at a dim the model fixes is refused
  t = OnnxRunner(_shape_math()).bind(x=_x(3))["x"]
  with pytest.raises(OnnxError, match="the model wants shape"):
    OnnxRunner(_shape_math())({"x": t.permute(1, 0, 2)})
