"""Scan at opset 8 (batched, with sequence_lens and reverse directions) against a NumPy loop over the spec's
pseudo-code."""
import numpy as np
from onnx import TensorProto, helper
from tinygrad.nn.onnx import OnnxRunner

def test_scan8_lens_and_directions():
  # body: state += fwd_t * 2 + rev_t; output the new state and fwd_t
  f = TensorProto.FLOAT
  body = helper.make_graph(
    [helper.make_node("Mul", ["a", "two"], ["a2"]), helper.make_node("Add", ["a2", "r"], ["ar"]),
     helper.make_node("Add", ["s", "ar"], ["s_out"]), helper.make_node("Identity", ["a"], ["a_out"]),
     helper.make_node("Identity", ["s_out"], ["acc"])], "body",
    [helper.make_tensor_value_info(n, f, [3]) for n in ("s", "a", "r")],
    [helper.make_tensor_value_info(n, f, [3]) for n in ("s_out", "acc", "a_out")],
    [helper.make_tensor("two", f, [], [2.0])])
  node = helper.make_node("Scan", ["lens", "s0", "x", "x"], ["s_fin", "accs", "as"], body=body, num_scan_inputs=2,
                          directions=[0, 1])
  g = helper.make_graph([node], "g", [helper.make_tensor_value_info("lens", TensorProto.INT64, [2]),
                                      helper.make_tensor_value_info("s0", f, [2, 3]),
                                      helper.make_tensor_value_info("x", f, [2, 4, 3])],
                        [helper.make_tensor_value_info(n, f, None) for n in ("s_fin", "accs", "as")])
  m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 8)])
  rng = np.random.default_rng(0)
  feeds = {"lens": np.array([4, 2], np.int64), "s0": rng.standard_normal((2, 3)).astype(np.float32),
           "x": rng.standard_normal((2, 4, 3)).astype(np.float32)}
  got = [v.numpy() for v in OnnxRunner(m.SerializeToString())(feeds).values()]
  fin, accs, fwd = np.zeros((2, 3)), np.zeros((2, 4, 3)), np.zeros((2, 4, 3))
  for b in range(2):
    s, n = feeds["s0"][b].astype(np.float64), feeds["lens"][b]
    for t in range(n):
      s = s + feeds["x"][b, t] * 2 + feeds["x"][b, n - 1 - t]
      accs[b, t], fwd[b, t] = s, feeds["x"][b, t]
    fin[b] = s
  # the steps past a batch element's length are unspecified by the spec; this runner writes zeros there
  for g_, w in zip(got, (fin, accs, fwd)): np.testing.assert_allclose(g_, w, rtol=1e-5, atol=1e-5)
