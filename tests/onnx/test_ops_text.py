"""TfIdfVectorizer beyond the backend suite's examples (which are TF mode only), against onnx.reference."""
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
