"""The ONNX backend test suite shipped in the pinned onnx wheel (onnx.backend.test.BackendTest), run through
tests/onnx/backend.py: node, simple, pytorch-converted and pytorch-operator (the `real` models are downloaded at test
time: not run). The default run takes a fixed slice (about one node test in eight, chosen by a hash of its name, and
every simple, pytorch-operator and every fourth pytorch-converted model); `-m slow` (make test-onnx) runs them all.
Excluded tests (tests/onnx/exclusions.py, each with its reason) run as strict xfails."""
import hashlib, unittest, warnings
import pytest
import onnx.backend.test
from tests.onnx.backend import TinygradBackend
from tests.onnx.exclusions import exclusion

with warnings.catch_warnings():
  warnings.simplefilter("ignore")
  _suite = onnx.backend.test.BackendTest(TinygradBackend, __name__)

CATEGORIES = {"OnnxBackendNodeModelTest": "node", "OnnxBackendSimpleModelTest": "simple",
              "OnnxBackendPyTorchConvertedModelTest": "pytorch-converted",
              "OnnxBackendPyTorchOperatorModelTest": "pytorch-operator"}
_SLICE = {"node": 8, "simple": 1, "pytorch-converted": 4, "pytorch-operator": 1}

def cases() -> list[tuple[str, type, str]]:
  """(category, unittest class, test name) of every CPU test of the four categories."""
  return [(CATEGORIES[cname], cls, name) for cname, cls in _suite.test_cases.items() if cname in CATEGORIES
          for name in sorted(dir(cls)) if name.startswith("test_") and name.endswith("_cpu")]

def run_case(cls: type, name: str) -> str | None:
  """None when the test passes; else why not (a skip or a supports_device refusal is a failure too)."""
  r = unittest.TestResult()
  cls(name).run(r)
  if r.wasSuccessful() and not r.skipped: return None
  if r.skipped: return f"skipped: {r.skipped[0][1]}"
  return (r.errors or r.failures)[0][1]

def _in_slice(cat: str, name: str) -> bool:
  return int(hashlib.sha1(name.encode()).hexdigest(), 16) % _SLICE[cat] == 0

def _params():
  for cat, cls, name in cases():
    marks = [] if _in_slice(cat, name) else [pytest.mark.slow]
    if (why := exclusion(name)) is not None: marks.append(pytest.mark.xfail(strict=True, reason=why))
    yield pytest.param(cls, name, id=f"{cat}:{name}", marks=marks)

@pytest.mark.parametrize("cls,name", list(_params()))
def test_backend(cls, name):
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    err = run_case(cls, name)
  assert err is None, err
