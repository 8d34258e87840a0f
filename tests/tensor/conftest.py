import pytest

def pytest_addoption(parser):
  parser.addoption("--tensor-ref", action="store_true", default=False,
                   help="evaluate Tensor.numpy() with the numpy reference (fuzz.oracles.tensor_ref) instead of the compiler: separates "
                        "front-end bugs from scheduler/codegen bugs")

@pytest.fixture(autouse=True)
def _tensor_ref(request, monkeypatch):
  if not request.config.getoption("--tensor-ref"): return
  from tinygrad.tensor import Tensor
  from fuzz.oracles.tensor_ref import eval_tensor_graph
  monkeypatch.setattr(Tensor, "numpy", lambda self: eval_tensor_graph(self.uop))
