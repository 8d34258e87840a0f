"""GlobalCounters: run_schedule counts each kernel launch with its ProgramSpec estimates; reset() zeroes the launch
counters (the memory counters are tested with the allocator, tests/runtime/test_device.py)."""
import numpy as np
from tinygrad import Tensor, Context
from tinygrad.helpers import GlobalCounters
from tinygrad.engine.realize import get_runner

def test_counts_follow_the_estimates_of_the_kernels_run():
  a, b = Tensor(np.arange(16, dtype=np.float32)).realize(), Tensor(np.ones((16, 16), np.float32)).realize()
  out = (a + 1) * 2 + (b @ a)
  sched = out.schedule()
  runners = [get_runner(si.bufs[0].device, si.ast) for si in sched]
  GlobalCounters.reset()
  out.realize()
  assert GlobalCounters.kernel_count == len(sched) > 0
  assert GlobalCounters.global_ops == sum(r.ops for r in runners) > 0
  assert GlobalCounters.global_mem == sum(r.mem for r in runners) > 0
  np.testing.assert_allclose(out.numpy(), (np.arange(16) + 1) * 2 + np.ones((16, 16)) @ np.arange(16))

def test_reset_zeroes_and_time_is_summed_when_timed(capsys):
  Tensor([1.0, 2.0]).add(1).realize()
  GlobalCounters.reset()
  assert (GlobalCounters.kernel_count, GlobalCounters.global_ops, GlobalCounters.global_mem,
          GlobalCounters.time_sum_s) == (0, 0, 0, 0.0)
  with Context(DEBUG=2): Tensor([1.0, 2.0, 3.0]).mul(3).realize()
  assert GlobalCounters.kernel_count == 1 and GlobalCounters.time_sum_s > 0
  assert "tm" in capsys.readouterr().out

def test_realized_tensor_launches_nothing():
  t = Tensor([1.0]).realize()
  GlobalCounters.reset()
  t.realize()
  assert GlobalCounters.kernel_count == 0
