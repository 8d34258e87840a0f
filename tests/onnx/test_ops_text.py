"""TfIdfVectorizer (the suite has TF mode only) and ai.onnx.ml TreeEnsemble beyond the suite's examples, against
onnx.reference."""
import numpy as np
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
import pytest
from tinygrad.nn.onnx import OnnxRunner

@pytest.mark.parametrize("mode,lo,hi,skip", [("TFIDF", 1, 3, 2), ("IDF", 2, 3, 1), ("TF", 1, 1, 3), ("TFIDF", 3, 3, 0)])
def test_tfidf(mode, lo, hi, skip):
  rng = np.random.default_rng(lo * 10 + skip)
  x = rng.integers(0, 5, (3, 13)).astype(np.int32)
  pool = [1, 3, 4, 0, 1, 2, 3, 4, 4, 3, 1, 2, 1, 4, 4, 4]  # 4 unigrams, 3 bigrams, 2 trigrams
  attrs = dict(mode=mode, min_gram_length=lo, max_gram_length=hi, max_skip_count=skip, pool_int64s=pool,
               ngram_counts=[0, 4, 10], ngram_indexes=[8, 0, 3, 1, 5, 2, 4, 7, 6],
               weights=[0.5, 1.5, 2.0, 1.0, 3.0, 0.25, 1.25, 2.5, 0.75])
  node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], **attrs)
  g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.INT32, None)],
                        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
  m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 9)])
  got = list(OnnxRunner(m.SerializeToString())({"x": x}).values())[0].numpy()
  want = ReferenceEvaluator(m).run(None, {"x": x})[0]
  assert got.shape == want.shape == (3, 9)
  np.testing.assert_allclose(got, want, rtol=1e-6)
  for row in range(3):  # a 1-d input is one row
    got1 = list(OnnxRunner(m.SerializeToString())({"x": x[row]}).values())[0].numpy()
    np.testing.assert_allclose(got1, want[row], rtol=1e-6)

@pytest.mark.parametrize("agg", [0, 1, 2, 3])
def test_tree_ensemble(agg):
  # tree 0 (nodes 0-2): x1 < 0.5 ? (x0 >= 1 ? leaf0 : leaf1) : (x2 == 2 ? leaf2 : leaf3); NaN at node 0 goes true
  # tree 1 (nodes 3-4): x0 in {1, 3} ? leaf4 : (x2 != 2 ? leaf7 : leaf6); tree 2 (node 5): the single leaf 5 (the
  # reference reads a one-leaf tree's leaf at its node's index, not at the leaf id: the test keeps the two equal)
  attrs = dict(nodes_featureids=[1, 0, 2, 0, 2, 0], nodes_truenodeids=[1, 0, 2, 4, 7, 5],
               nodes_falsenodeids=[2, 1, 3, 4, 6, 5], nodes_trueleafs=[0, 1, 1, 1, 1, 1],
               nodes_falseleafs=[0, 1, 1, 0, 1, 1], nodes_missing_value_tracks_true=[1, 0, 0, 0, 1, 0],
               leaf_targetids=[0, 1, 2, 0, 1, 2, 0, 1], tree_roots=[0, 3, 5], n_targets=3, aggregate_function=agg,
               nodes_modes=helper.make_tensor("m", TensorProto.UINT8, [6], [1, 2, 4, 6, 5, 0]),
               nodes_splits=helper.make_tensor("s", TensorProto.FLOAT, [6], [0.5, 1.0, 2.0, 0.0, 2.0, 0.0]),
               leaf_weights=helper.make_tensor("w", TensorProto.FLOAT, [8], [1.5, -2, 3, 4, 5.5, -6, 7, 0.25]),
               membership_values=helper.make_tensor("v", TensorProto.FLOAT, [3], [1.0, 3.0, np.nan]))
  node = helper.make_node("TreeEnsemble", ["x"], ["y"], domain="ai.onnx.ml", **attrs)
  g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
  m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("ai.onnx.ml", 5)])
  x = np.array([[1, 0, 2], [0, 0, 2], [3, 1, 2], [0, 1, 5], [np.nan, np.nan, np.nan], [1, 0.5, 2], [2, -1, np.nan]],
               np.float32)
  got = list(OnnxRunner(m.SerializeToString())({"x": x}).values())[0].numpy()
  want = ReferenceEvaluator(m).run(None, {"x": x})[0]
  np.testing.assert_allclose(got, want, rtol=1e-6)
