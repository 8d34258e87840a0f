"""Quantized ops against onnx.reference.ReferenceEvaluator (bit-exact) and onnxruntime (within 1: its requantization
rounds differently), one single-node model per case with random data."""
import numpy as np
import pytest
import onnx, onnx.reference
import onnxruntime as ort
from onnx import helper, numpy_helper, TensorProto
from tinygrad.nn.onnx import OnnxRunner

NP2ONNX = {np.float32: TensorProto.FLOAT, np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8,
           np.int32: TensorProto.INT32, np.float16: TensorProto.FLOAT16}

def _model(op, feeds, consts, opset, attrs=None, out_type=None, nout=1):
  ins = [helper.make_tensor_value_info(k, NP2ONNX[v.dtype.type], v.shape) for k, v in feeds.items()]
  inits = [numpy_helper.from_array(v, k) for k, v in consts.items()]
  names = list(feeds) + list(consts)
  outs = [helper.make_tensor_value_info(f"y{i}", TensorProto.UNDEFINED, None) for i in range(nout)]
  node = helper.make_node(op, [n if n is not None else "" for n in attrs.pop("_inputs", names)] if attrs else names,
                          [f"y{i}" for i in range(nout)], **(attrs or {}))
  g = helper.make_graph([node], "q", ins, outs, initializer=inits)
  return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)

def _check(model, feeds, ort_tol=1):
  ref = onnx.reference.ReferenceEvaluator(model).run(None, feeds)
  ours = [v.numpy() for v in OnnxRunner(model.SerializeToString())(feeds).values()]
  for o, r in zip(ours, ref):
    assert o.dtype == r.dtype and o.shape == r.shape
    np.testing.assert_array_equal(o, r)  # bit-exact against the reference
  for vi, r in zip(model.graph.output, ref): vi.type.tensor_type.elem_type = helper.np_dtype_to_tensor_dtype(r.dtype)
  sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
  for o, r in zip(ours, sess.run(None, feeds)):
    assert o.dtype == r.dtype and o.shape == r.shape
    if np.issubdtype(o.dtype, np.integer): assert np.abs(o.astype(np.int64) - r.astype(np.int64)).max() <= ort_tol
    else: np.testing.assert_allclose(o, r, rtol=1e-6, atol=1e-6)
  return ours

rng = np.random.default_rng(0)

@pytest.fixture(autouse=True)
def _seeded():
  # each test draws the same data whatever ran before it (xdist spreads them over workers)
  global rng
  rng = np.random.default_rng(0)

@pytest.mark.parametrize("zp_dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("per_axis", [False, True])
def test_quantize_linear(zp_dtype, per_axis):
  x = (rng.standard_normal((2, 4, 5)) * 400).astype(np.float32)
  x[0, 0, :3] = [0.5, 1.5, -2.5]  # ties: round half to even
  scale = (rng.random(4) * 0.5 + 0.1).astype(np.float32) if per_axis else np.array(0.25, np.float32)
  zp = (rng.integers(0, 20, 4) if per_axis else np.array(7)).astype(zp_dtype)
  out = _check(_model("QuantizeLinear", {"x": x}, {"s": scale, "zp": zp}, 19, {"axis": 1}), {"x": x})
  assert out[0].min() == np.iinfo(zp_dtype).min and out[0].max() == np.iinfo(zp_dtype).max  # it saturates

def test_quantize_linear_blocked():
  x = (rng.standard_normal((3, 8)) * 10).astype(np.float32)
  scale = (rng.random((3, 2)) + 0.1).astype(np.float32)
  zp = rng.integers(-5, 5, (3, 2)).astype(np.int8)
  _check(_model("QuantizeLinear", {"x": x}, {"s": scale, "zp": zp}, 21, {"axis": 1, "block_size": 4}), {"x": x})

@pytest.mark.parametrize("dt", [np.uint8, np.int8, np.int32])
def test_dequantize_linear(dt):
  info = np.iinfo(dt)
  x = rng.integers(max(info.min, -1000), min(info.max, 1000), (3, 4, 2)).astype(dt)
  consts = {"s": (rng.random(4) + 0.01).astype(np.float32)}
  if dt is not np.int32: consts["zp"] = rng.integers(0, 9, 4).astype(dt)
  else: consts["s"] = np.array(0.37, np.float32)
  _check(_model("DequantizeLinear", {"x": x}, consts, 19, {"axis": 1}), {"x": x})

def test_dynamic_quantize_linear():
  x = (rng.standard_normal((5, 7)) * 3 + 1).astype(np.float32)
  _check(_model("DynamicQuantizeLinear", {"x": x}, {}, 11, nout=3), {"x": x})

def test_matmul_integer():
  a = rng.integers(0, 255, (3, 5, 6)).astype(np.uint8)
  b = rng.integers(-64, 64, (6, 4)).astype(np.int8)  # 7-bit: see test_qlinear_conv
  consts = {"azp": np.array(12, np.uint8), "bzp": rng.integers(-3, 3, 4).astype(np.int8)}
  _check(_model("MatMulInteger", {"a": a, "b": b}, consts, 10), {"a": a, "b": b})

def test_qlinear_matmul():
  a = rng.integers(0, 255, (4, 6)).astype(np.uint8)
  b = rng.integers(0, 255, (6, 3)).astype(np.uint8)
  consts = {"as": np.array(0.02, np.float32), "azp": np.array(120, np.uint8), "bs": np.array(0.03, np.float32),
            "bzp": np.array(130, np.uint8), "ys": np.array(0.5, np.float32), "yzp": np.array(100, np.uint8)}
  feeds = {"a": a, "b": b}
  m = _model("QLinearMatMul", feeds, consts, 10, {"_inputs": ["a", "as", "azp", "b", "bs", "bzp", "ys", "yzp"]})
  _check(m, feeds)

@pytest.mark.parametrize("per_channel", [False, True])
def test_qlinear_conv(per_channel):
  x = rng.integers(0, 255, (1, 3, 7, 7)).astype(np.uint8)
  # NOTE: 7-bit weights: onnxruntime's x86 u8s8 kernels add pairs of products in saturating int16, so with full-range
  # weights it differs from the exact sum (its quantizer's reduce_range exists for this)
  w = rng.integers(-64, 64, (4, 3, 3, 3)).astype(np.int8)
  ws = (rng.random(4) * 0.01 + 0.001).astype(np.float32) if per_channel else np.array(0.004, np.float32)
  consts = {"w": w, "xs": np.array(0.05, np.float32), "xzp": np.array(128, np.uint8), "ws": ws,
            "wzp": np.zeros(4 if per_channel else (), np.int8), "ys": np.array(0.2, np.float32),
            "yzp": np.array(90, np.uint8), "b": rng.integers(-500, 500, 4).astype(np.int32)}
  feeds = {"x": x}
  m = _model("QLinearConv", feeds, consts, 10, {"_inputs": ["x", "xs", "xzp", "w", "ws", "wzp", "ys", "yzp", "b"],
                                                "pads": [1, 1, 1, 1], "strides": [2, 1]})
  _check(m, feeds)

def test_conv_integer():
  x = rng.integers(0, 255, (1, 2, 5, 5)).astype(np.uint8)
  w = rng.integers(0, 255, (3, 2, 2, 2)).astype(np.uint8)
  consts = {"w": w, "xzp": np.array(100, np.uint8), "wzp": np.array(3, np.uint8)}
  m = _model("ConvInteger", {"x": x}, consts, 10, {"_inputs": ["x", "w", "xzp", "wzp"], "pads": [1, 0, 1, 0]})
  _check(m, {"x": x})
