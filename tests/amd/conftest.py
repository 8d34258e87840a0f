import pytest

@pytest.fixture(scope="session")
def linker():
  """The LLD command the AMD compiler links with; the tests that link skip, saying why, where there is none."""
  from tinygrad.device import DeviceOpenError
  from tinygrad.runtime.support.compiler_amd import find_linker
  try: return find_linker()
  except DeviceOpenError as e: pytest.skip(str(e))
