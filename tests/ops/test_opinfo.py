"""torch's OpInfo sample inputs through our Tensor API, forward and backward, per (op, dtype): see tests/ops/opinfo.
The default suite runs every op in float32 and a fixed sixth of the other (op, dtype) cases (by a hash of the case);
the rest are marked slow and run with the targets' runs in `make test-ops-targets`."""
import zlib
import pytest
from tests.ops.opinfo.driver import adapters, cases, opinfos, run_op

_OPS = opinfos()
_ADS = adapters()

def _in_default_slice(name: str, dtype) -> bool:
  return str(dtype) == "torch.float32" or zlib.crc32(f"{name}-{dtype}".encode()) % 6 == 0

@pytest.mark.parametrize("name,dtype", [pytest.param(n, d, marks=() if _in_default_slice(n, d) else pytest.mark.slow)
                                        for n, d in cases()], ids=lambda v: str(v).replace("torch.", ""))
def test_opinfo(name, dtype):
  r = run_op(_OPS[name], _ADS[name], dtype)
  assert not r.failed, f"{len(r.failed)} of {r.passed + len(r.failed)} samples failed:\n" + \
    "\n".join(f"  {s}\n    {e}" for s, e in r.failed[:5])
  assert r.passed, f"no sample ran (skipped: {dict(r.skipped)})"
