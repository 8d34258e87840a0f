"""Random kernel ASTs (fuzz.strategies.build_kernel: every dtype, masked/padded/gather loads, reduces, several stores,
DEFINE_VAR sizes) with random opts, lowered for the CPU (C, one shared object for the batch) and for the PYTHON
interpreter, against the reference executor of the unlowered AST within the ULP budget (fuzz/oracles/budget.py)."""
import pytest
from tinygrad.dtype import dtypes
from fuzz.strategies import build_kernel, RandomChooser, KernelConfig
from fuzz.campaign.levels import KernelLevel
from fuzz.campaign.backends import open_backends

BATCH = 8

@pytest.fixture(scope="module")
def backends():
  ok, missing = open_backends(["cpu", "python"])
  assert not missing, missing
  return ok

@pytest.mark.parametrize("batch", range(4))
def test_random_kernels_match_reference(batch, backends):
  cases = [build_kernel(RandomChooser(batch * BATCH + i)) for i in range(BATCH)]
  for case, fails in zip(cases, KernelLevel().check(cases, backends)):
    assert not fails, "\n".join(f"{f.backend} {f.stage}: {f.message[:2000]}" for f in fails) + \
      f"\n---- kernel (opts {case.opts}, vars {case.var_vals}) ----\n{KernelLevel().text(case)}"

def test_small_float_kernels_with_many_opts(backends):
  # small float32 kernels: the opts fit more often, so UPCAST/UNROLL/THREAD/PADTO are exercised on every batch
  cfg = KernelConfig(dtypes=(dtypes.float32,), max_points=256, p_opts=1.0)
  cases = [build_kernel(RandomChooser(1000 + i), cfg) for i in range(BATCH)]
  for case, fails in zip(cases, KernelLevel().check(cases, backends)):
    assert not fails, "\n".join(f"{f.backend} {f.stage}: {f.message[:2000]}" for f in fails) + \
      f"\n---- kernel (opts {case.opts}) ----\n{KernelLevel().text(case)}"
