import pytest

def pytest_addoption(parser):
  parser.addoption("--tensor-ref", action="store_true", default=False,
                   help="evaluate Tensor.numpy() with the numpy reference (fuzz.oracles.tensor_ref) instead of the compiler: separates "
                        "front-end bugs from scheduler/codegen bugs")
  parser.addoption("--shard", default="",
                   help="N:AXIS (AXIS a number, or none): run every test with its tensors on CPU:0..CPU:N-1, each tensor "
                        "made from data split on AXIS (replicated when it has no such axis, or with none), every other "
                        "tensor replicated; the numpy references stay as they are (tests/multi/test_sweep.py)")
  parser.addoption("--shard-slice", action="store_true", default=False,
                   help="with --shard: one case of each test (the first of its parameters), the slice make test runs")

@pytest.fixture(autouse=True)
def _tensor_ref(request, monkeypatch):
  if not request.config.getoption("--tensor-ref"): return
  from tinygrad.tensor import Tensor
  from fuzz.oracles.tensor_ref import eval_tensor_graph
  monkeypatch.setattr(Tensor, "numpy", lambda self: eval_tensor_graph(self.uop))

def pytest_collection_modifyitems(config, items):
  if not (config.getoption("--shard") and config.getoption("--shard-slice")): return
  seen, keep, drop = set(), [], []
  for it in items:
    key = (it.fspath, getattr(it, "originalname", it.name))
    (drop if key in seen else keep).append(it)
    seen.add(key)
  config.hook.pytest_deselected(items=drop)
  items[:] = keep

@pytest.fixture(autouse=True)
def _sharded(request, monkeypatch):
  if not (spec := request.config.getoption("--shard")): return
  from tests.multi.sweep import shard_everything, parse
  if (mark := request.node.get_closest_marker("single_device")) is not None:
    # NOTE: split_only=True: the test still runs where the sweep replicates its data
    if not (mark.kwargs.get("split_only") and parse(spec)[1] is None): pytest.skip(f"single device: {mark.args[0]}")
  shard_everything(monkeypatch, spec)
