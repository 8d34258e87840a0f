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

def test_a_matmul_counts_two_flops_per_multiply_add_on_every_cpu_path():
  # a fused multiply-add (MULACC, vector FMAs on LLVM) is a multiply and an add: the GFLOPS printed for a kernel are
  # comparable with 2*M*K*N/t, whatever the renderer fused or vectorized
  import importlib.util
  from tinygrad.codegen import get_program
  from tinygrad.uop import Ops
  from tests.llvm_device import c_cpu_device, llvm_cpu_device
  from tinygrad.device import Device
  m, k, n = 64, 96, 48
  devs = [c_cpu_device()] + ([llvm_cpu_device()] if importlib.util.find_spec("llvmlite") else [])
  for dev in devs:
    a, b = Tensor.ones(m, k, device=dev).contiguous().realize(), Tensor.ones(k, n, device=dev).contiguous().realize()
    ast = (a @ b).schedule()[-1].ast
    for opts in (None, []):
      p = get_program(ast, Device[dev].renderer, opts)
      if opts is None and dev != devs[0]: assert any(u.op is Ops.MULACC for u in p.uops), p.src
      # without opts exactly 2*M*K*N; with them a few more (the partial sums of an unrolled reduce, added at its end)
      ops = p.estimates.ops
      assert (ops == 2 * m * k * n) if opts == [] else (2 * m * k * n <= ops <= 2 * m * k * n + 4 * m * n), (dev, opts, ops)
