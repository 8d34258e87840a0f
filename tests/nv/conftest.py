import pytest
from tinygrad.device import Device
from tinygrad.runtime import ops_nv

def _forget_nv() -> None:
  for k in [k for k in Device._opened if k.split(":")[0] == "NV"]: del Device._opened[k]
  ops_nv.open_driver.cache_clear()

@pytest.fixture(autouse=True)
def fresh_nv_device():
  # NOTE: an NV device opened under COMPILE_ONLY, a fake driver or another NV_ARCH must not leak into the next test
  _forget_nv()
  yield
  _forget_nv()
