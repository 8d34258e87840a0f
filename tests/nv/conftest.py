import pytest
from tinygrad import Tensor
from tinygrad.device import Device
from tinygrad.engine import realize
from tinygrad.runtime import ops_nv

def _forget_nv() -> None:
  for k in [k for k in Device._opened if k.split(":")[0] == "NV"]: del Device._opened[k]
  for k in [k for k in realize._runner_cache if k[0].split(":")[0] == "NV"]: del realize._runner_cache[k]
  # NOTE: the random-number state lives in a buffer per device; one made on a device that is gone would be read by the
  # next device of that name
  for k in [k for k in Tensor._rng_states if k.split(":")[0] == "NV"]: del Tensor._rng_states[k]
  ops_nv.open_driver.cache_clear()

@pytest.fixture(autouse=True)
def fresh_nv_device():
  # NOTE: an NV device opened under COMPILE_ONLY, a fake driver or another NV_ARCH (and the kernels compiled for it)
  # must not leak into the next test
  _forget_nv()
  yield
  _forget_nv()
