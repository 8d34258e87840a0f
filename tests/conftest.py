import os, pytest
from hypothesis import settings, HealthCheck

# the `ci` profile: derandomized and bounded, so a run is reproducible and fits the suite's time budget
settings.register_profile("ci", derandomize=True, deadline=None, max_examples=200, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("dev", deadline=None, max_examples=100)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

def pytest_collection_modifyitems(config, items):
  # NOTE: slow sweeps have make targets of their own (-m slow); the default suite skips them with the reason
  if "slow" not in (config.getoption("-m") or ""):
    slow = pytest.mark.skip(reason="slow: runs with -m slow (make test-nv, make test-semantics-sweep, make test-deep-chains, make test-llvm-matmul, make test-symbolic)")
    for it in items:
      if "slow" in it.keywords: it.add_marker(slow)
  # NOTE: GPU tests run only where a real GPU answers; everywhere else they skip with the reason
  from tinygrad.helpers import getenv
  if getenv("RUN_GPU_TESTS", 0): return
  skip = pytest.mark.skip(reason="needs a real GPU (set RUN_GPU_TESTS=1 on a GPU host)")
  for it in items:
    if "gpu" in it.keywords: it.add_marker(skip)
