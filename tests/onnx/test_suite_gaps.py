"""Backend-suite examples the suite's own comparison cannot check (exclusions.py says why), compared here against the
suite's expected outputs element by element."""
import warnings
import numpy as np
from typing import Callable
from onnx.backend.test.case.node import _NodeTestCases
from onnx.backend.test.case.node.loop import Loop
from tests.onnx.backend import TinygradBackend

def _case(export: Callable[[], None], name: str):
  """The suite's test case `name`, made by running only the export function that makes it (not the whole loader)."""
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    export()
  return next(tc for tc in _NodeTestCases if tc.name == name)

def test_loop16_seq_none():
  # the suite recurses into a sequence's elements as if each were an output list: len() of the 0-d first one raises
  tc = _case(Loop.export_loop_16_none, "test_loop16_seq_none")
  for ins, want in tc.data_sets:
    got = TinygradBackend.prepare(tc.model).run(ins)
    assert len(got) == len(want) == 1 and isinstance(got[0], list) and len(got[0]) == len(want[0])
    for g, w in zip(got[0], want[0]):
      assert g.shape == w.shape and g.dtype == w.dtype
      np.testing.assert_allclose(g, w, rtol=tc.rtol, atol=tc.atol)
