"""Backend-suite examples the suite's own comparison cannot check (exclusions.py says why), compared here against the
suite's expected outputs element by element."""
import warnings
import numpy as np
from onnx.backend.test.case.node import _NodeTestCases
with warnings.catch_warnings():
  warnings.simplefilter("ignore")
  import onnx.backend.test.case.node.loop  # noqa: F401
from tests.onnx.backend import TinygradBackend

def _case(name: str):
  # importing a node module of the suite (done above) runs its export functions, which register their cases
  return next(tc for tc in _NodeTestCases if tc.name == name)

def test_loop16_seq_none():
  # the suite recurses into a sequence's elements as if each were an output list: len() of the 0-d first one raises
  tc = _case("test_loop16_seq_none")
  for ins, want in tc.data_sets:
    got = TinygradBackend.prepare(tc.model).run(ins)
    assert len(got) == len(want) == 1 and isinstance(got[0], list) and len(got[0]) == len(want[0])
    for g, w in zip(got[0], want[0]):
      assert g.shape == w.shape and g.dtype == w.dtype
      np.testing.assert_allclose(g, w, rtol=tc.rtol, atol=tc.atol)
