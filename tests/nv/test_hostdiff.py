"""The host diff (rendered CUDA as C++ vs the C backend) finds what a wrong renderer gets wrong: each mutant below
breaks one rule the CUDA renderer follows, and the diff must report it on ordinary tensor kernels."""
import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.uop import Ops
from tinygrad.renderer.cuda import CUDARenderer
from tests.nv.hostdiff import diff_asts, random_values

def _asts(*ts):
  return [si.ast for t in ts for si in t.schedule()]

def _kernels():
  # NOTE: inputs are buffers, so the kernels read the diff's random data (NaN, inf, values past the fp8 range)
  a, b = Tensor(np.zeros((64, 8), np.float32)), Tensor(np.zeros((64, 8), np.float32))
  return _asts(a.maximum(b), (a * 70).cast(dtypes.fp8e4m3), (a * 1e4).cast(dtypes.fp8e5m2), a.cast(dtypes.half) * 3)

class NaNDroppingMax(CUDARenderer):
  def render_expr(self, u, r):
    if u.op is Ops.MAX: return f"fmaxf({r[u.src[0]]}, {r[u.src[1]]})"
    return super().render_expr(u, r)

class NonSaturatingE4M3(CUDARenderer):
  def render_prefix(self, uops): return [ln.replace("__NV_SATFINITE", "__NV_NOSAT") for ln in super().render_prefix(uops)]

class HalfThroughInt(CUDARenderer):
  def render_cast(self, x, src, dt):
    if dt is dtypes.float16 and src is dtypes.float32: return f"__int2half_rn((int)({x}))"
    return super().render_cast(x, src, dt)

def test_correct_renderer_agrees():
  rep = diff_asts(_kernels())
  assert rep.checked >= 4 and not rep.mismatches, rep.mismatches[:1]

@pytest.mark.parametrize("mutant", [NaNDroppingMax, NonSaturatingE4M3, HalfThroughInt], ids=lambda m: m.__name__)
def test_wrong_renderer_is_caught(mutant):
  rep = diff_asts(_kernels(), renderer=mutant("sm_90"))
  assert rep.mismatches, f"{mutant.__name__} went unnoticed"
  assert "CUDA on the host gives" in rep.mismatches[0] and "the C backend" in rep.mismatches[0]

def test_random_values_include_specials_and_no_zero_ints():
  rng = np.random.default_rng(0)
  f = random_values(dtypes.float32, 4000, rng)
  assert np.isnan(f).any() and np.isinf(f).any() and (np.abs(f) > 448).any()
  for dt in (dtypes.int8, dtypes.int32, dtypes.uint64): assert (random_values(dt, 4000, rng) != 0).all()
