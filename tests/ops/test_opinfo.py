"""torch's OpInfo sample inputs through our Tensor API, forward and backward, per (op, dtype): see tests/ops/opinfo."""
import pytest
from tests.ops.opinfo.driver import adapters, cases, opinfos, run_op

_OPS = opinfos()
_ADS = adapters()

@pytest.mark.parametrize("name,dtype", cases(), ids=lambda v: str(v).replace("torch.", ""))
def test_opinfo(name, dtype):
  r = run_op(_OPS[name], _ADS[name], dtype)
  assert not r.failed, f"{len(r.failed)} of {r.passed + len(r.failed)} samples failed:\n" + \
    "\n".join(f"  {s}\n    {e}" for s, e in r.failed[:5])
  assert r.passed, f"no sample ran (skipped: {dict(r.skipped)})"
