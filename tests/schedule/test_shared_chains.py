"""A shared elementwise expression that reads many buffers is stored once (rangeify.RECOMPUTE_CHAIN), not recomputed
by each kernel that reads it: a residual stream, x + f1 + f2 + ..., read by every layer's layernorm and by the next
residual add, was recomputed from all earlier layers' outputs in each of them (a 12-layer forward's last layernorm read
25 buffers). The number of buffers any kernel reads no longer grows with the depth; the values are numpy's."""
import numpy as np
from tinygrad import Tensor
from tinygrad.uop import Ops
from tinygrad.schedule.rangeify import RECOMPUTE_CHAIN

def reads(t: Tensor) -> list[int]:
  """How many buffers each kernel of t's schedule reads (its DEFINE_GLOBALs but the output)."""
  return [sum(1 for u in si.ast.toposort() if u.op is Ops.DEFINE_GLOBAL) - 1
          for si in t.schedule() if si.ast.op is Ops.SINK]

def rand(seed: int, *shape: int) -> np.ndarray: return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)

def np_layernorm(x: np.ndarray) -> np.ndarray:
  x = x.astype(np.float64)
  return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)

def test_a_residual_stream_is_stored_so_no_kernel_reads_every_layer():
  x, ws = rand(0, 32, 64), [rand(1 + i, 64, 64) * 0.1 for i in range(12)]
  h, ref = Tensor(x), x.astype(np.float64)
  for w in ws:
    # the layer's output is a buffer (a matmul); the residual add, read by the next layernorm and the next add, is not
    h = h + h.layernorm() @ Tensor(w)
    ref = ref + np_layernorm(ref) @ w
  out = h.layernorm()
  n = reads(out)
  # NOTE: fused, the last layernorm's kernels read all 13 (x and 12 layer outputs); stored, a residual is one read and
  # at most RECOMPUTE_CHAIN - 1 buffers of its size are fused into any kernel (with the statistics, a few more)
  assert max(n) <= RECOMPUTE_CHAIN + 2, n
  np.testing.assert_allclose(out.numpy(), np_layernorm(ref), rtol=1e-3, atol=1e-3)

def test_short_or_unshared_expressions_stay_fused():
  a, b, c, d = (Tensor(rand(10 + i, 16, 64)) for i in range(4))
  # read by two kernels (a sum and an elementwise use of it), but only 3 buffers: recomputed
  s = a + b + c
  out = s * s.sum(-1, keepdim=True)
  assert len(reads(out)) == 2, reads(out)
  # 4 buffers, read by one node only: one kernel
  assert len(reads(((a + b + c + d) * 2).relu())) == 1
  # 4 buffers read by two kernels: stored once
  s4 = a + b + c + d
  out4 = s4 * s4.sum(-1, keepdim=True)
  assert len(reads(out4)) == 3, reads(out4)
  an, bn, cn, dn = (rand(10 + i, 16, 64) for i in range(4))
  ref = an + bn + cn + dn
  np.testing.assert_allclose(out4.numpy(), ref * ref.sum(-1, keepdims=True), rtol=1e-5, atol=1e-4)
  # a broadcast bias does not count as one of the buffers: x + w1 + bias1 + bias2 + bias3 read by two kernels is fused
  bias = [Tensor(rand(20 + i, 64)) for i in range(3)]
  sb = a + b + bias[0] + bias[1] + bias[2]
  assert len(reads(sb * sb.sum(-1, keepdim=True))) == 2
