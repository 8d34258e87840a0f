"""bench/models.py's per-kernel profile (the goal's check reads it): kernels that share a display name stay apart."""
import os, sys
import numpy as np
from tinygrad import Tensor, TinyJit

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
from models import profile_step  # noqa: E402

def test_two_kernels_with_one_display_name_keep_their_own_entries():
  # two elementwise kernels over the same shape, each its own program: the same name, different code
  a = Tensor(np.arange(4096, dtype=np.float32)).realize()
  @TinyJit
  def step():
    b = (a + 1.0).contiguous().realize()
    return ((b * 3.0).exp2().contiguous()).realize()
  for _ in range(3): step()
  per = profile_step(step)
  names = [k.split("~")[0] for k in per]
  assert len(per) == 2 and len(set(names)) == 1 and sorted(per) == sorted([names[0], names[0] + "~2"]), list(per)
  assert all(v[2] == 1 for v in per.values()), per
  # the same keys in another step (launch order is the same): profile_best merges steps by key
  assert sorted(profile_step(step)) == sorted(per)
