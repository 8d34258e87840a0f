"""Allreduce (naive and ring, forced by ALLREDUCE or chosen by size), allgather and reduce-scatter as scheduled kernels
and COPY nodes; the per-device counters; spec's checks of the multi-device graphs. References: numpy."""
import numpy as np
import pytest
from tinygrad import Tensor
from tinygrad.uop import Ops, hooks
from tinygrad.helpers import Context, GlobalCounters
from tinygrad.schedule.multi import allreduce_variant, RING_MIN_BYTES, MultiDeviceError

rng = np.random.default_rng(1)
def devs(n): return tuple(f"CPU:{i}" for i in range(n))

class CopyNodes:
  """Counts the COPY nodes of the per-device graphs the scheduler makes."""
  def __init__(self): self.n = 0
  def __call__(self, sink): self.n += sum(1 for u in sink.toposort() if u.op is Ops.COPY)
  def __enter__(self):
    hooks.device_graph.append(self)
    return self
  def __exit__(self, *a): hooks.device_graph.remove(self)

def sharded(x, n, axis):
  return Tensor(x).shard(devs(n), axis).realize()

@pytest.mark.parametrize("variant", ["naive", "ring"])
@pytest.mark.parametrize("n,size", [(2, 8), (3, 7), (3, 2), (4, 10), (4, 3)])
def test_allreduce_variants_agree_with_numpy_whatever_the_chunking(variant, n, size):
  x = rng.standard_normal((n * 2, size)).astype(np.float32)
  t = sharded(x, n, 0)
  with Context(ALLREDUCE=variant), CopyNodes() as c:
    GlobalCounters.reset()
    out = t.sum(0).contiguous().realize()
  assert out.uop.op is Ops.MULTI and out.uop.arg[:2] == (None, None)
  for sh in out.uop.src:  # every device holds the whole reduced tensor
    np.testing.assert_allclose(Tensor(sh).numpy(), x.sum(0), rtol=1e-5, atol=1e-5)
  chunks = [len(p) for p in np.array_split(np.arange(size), n)]
  full = sum(1 for k in chunks if k)
  # naive: every device copies every other device's partial; ring: each non-empty chunk goes N-1 hops to be reduced and
  # N-1 hops to be gathered
  want = n * (n - 1) if variant == "naive" else 2 * full * (n - 1)
  assert c.n == want and GlobalCounters.copy_count == want
  nbytes = size * 4
  per_copy = nbytes if variant == "naive" else None
  if per_copy is not None: assert GlobalCounters.copy_bytes == want * per_copy
  else: assert GlobalCounters.copy_bytes == 2 * (n - 1) * nbytes  # each chunk's bytes, 2(N-1) times

def test_allreduce_variant_is_chosen_by_size_and_the_flag_is_checked():
  assert allreduce_variant(RING_MIN_BYTES, 2) == "naive"  # two devices: the ring moves as much in more steps
  assert allreduce_variant(RING_MIN_BYTES - 1, 4) == "naive"
  assert allreduce_variant(RING_MIN_BYTES, 4) == "ring"
  with Context(ALLREDUCE="ring"): assert allreduce_variant(4, 2) == "ring"
  with Context(ALLREDUCE="naive"): assert allreduce_variant(1 << 30, 8) == "naive"
  with Context(ALLREDUCE="tree"):
    with pytest.raises(MultiDeviceError, match="ALLREDUCE='tree'"): allreduce_variant(4, 2)

@pytest.mark.parametrize("op", ["max", "min", "prod"])
def test_allreduce_of_other_ops(op):
  x = (rng.standard_normal((6, 5)) * 0.3 + 1).astype(np.float32)
  for variant in ("naive", "ring"):
    with Context(ALLREDUCE=variant):
      np.testing.assert_allclose(getattr(sharded(x, 3, 0), op)(0).numpy(), getattr(np, op)(x, 0), rtol=1e-5)

@pytest.mark.parametrize("n", [2, 3])
def test_allgather_copies_each_piece_to_every_other_device(n):
  x = rng.standard_normal((7, 3)).astype(np.float32)
  t = sharded(x, n, 0)
  with CopyNodes() as c:
    GlobalCounters.reset()
    rep = t.shard(devs(n)).realize()  # split -> replicated: an allgather
  assert rep.uop.arg[:2] == (None, None) and c.n == n * (n - 1) and GlobalCounters.copy_count == n * (n - 1)
  for sh in rep.uop.src: np.testing.assert_equal(Tensor(sh).numpy(), x)

@pytest.mark.parametrize("variant", ["naive", "ring"])
def test_reduce_scatter_leaves_each_device_its_rows_of_the_sum(variant):
  n, x, w = 3, rng.standard_normal((5, 6)).astype(np.float32), rng.standard_normal((6, 7)).astype(np.float32)
  with Context(ALLREDUCE=variant), CopyNodes() as c:
    # the contracted axis split: each device holds a partial product; placed split on axis 1, a reduce-scatter
    out = (Tensor(x).shard(devs(n), 1) @ Tensor(w).shard(devs(n), 0)).shard(devs(n), 1).realize()
  assert out.uop.op is Ops.MULTI and out.uop.arg[0] == 1
  assert [s.shape for s in out.uop.src] == [(5, 3), (5, 2), (5, 2)]
  np.testing.assert_allclose(out.numpy(), x @ w, rtol=1e-5, atol=1e-5)
  # each device receives only the other devices' parts of its own rows: N-1 copies per device, never the whole partial
  assert c.n == n * (n - 1) + 2 * (n - 1)  # + the COPYs of x's and w's host data to the other devices

def test_each_device_moves_about_a_nth_of_the_bytes_and_no_hidden_gather():
  x = rng.standard_normal((512, 256)).astype(np.float32)
  single = Tensor(x).realize()
  GlobalCounters.reset()
  (single * 2 + 1).sum(1).realize()
  one_mem = GlobalCounters.global_mem
  for n in (2, 4):
    t = sharded(x, n, 0)
    GlobalCounters.reset()
    (t * 2 + 1).sum(1).realize()
    assert GlobalCounters.copy_count == 0  # a reduce not over the split axis moves nothing
    assert set(GlobalCounters.device_mem) == set(Tensor(1).shard(devs(n)).device)
    for dev, mem in GlobalCounters.device_mem.items(): assert abs(mem - one_mem / n) <= 0.05 * one_mem / n, (dev, mem)
    GlobalCounters.reset()
    t.sum().realize()  # over the split axis: the partials (one float each) move, nothing else
    assert GlobalCounters.copy_bytes == n * (n - 1) * 4

def test_spec_checks_the_multi_device_graphs():
  from spec.verify import type_verify, SpecError
  from spec.tensor_spec import tensor_spec, device_spec
  from tinygrad.uop.ops import UOp
  from tinygrad.dtype import dtypes
  a = Tensor.ones(4).contiguous().realize().uop
  good = UOp(Ops.MULTI, dtypes.float, (a.shrink(((0, 2),)), UOp(Ops.COPY, dtypes.float, (a.shrink(((2, 4),)),
                                                                                            UOp(Ops.DEVICE, arg="CPU:1")))),
             (0, ((0, 2), (2, 4)), None))
  type_verify(UOp.sink(good), tensor_spec, "tensor")
  with pytest.raises(SpecError, match="MULTI in a per-device graph"): type_verify(UOp.sink(good), device_spec, "device")
  # (under SPEC=2 the node is refused as it is made, else by the check of the graph)
  with pytest.raises(SpecError, match="do not tile|Ops.MULTI"):
    type_verify(UOp.sink(good.replace(arg=(0, ((0, 1), (2, 4)), None))), tensor_spec, "tensor")
  with pytest.raises(SpecError, match="all different|Ops.MULTI"):
    type_verify(UOp.sink(good.replace(src=(good.src[0], good.src[0]))), tensor_spec, "tensor")
  other = UOp(Ops.COPY, dtypes.float, (a, UOp(Ops.DEVICE, arg="CPU:1")))
  with pytest.raises(SpecError, match="different devices"): type_verify(UOp.sink(a + other), tensor_spec, "tensor")

def test_spec_sees_every_multi_device_schedule():
  from tinygrad.helpers import SPEC
  if not SPEC.value: pytest.skip("SPEC=0: no checks registered")
  seen = []
  hooks.device_graph.append(seen.append)
  try: sharded(rng.standard_normal((6, 4)).astype(np.float32), 3, 0).sum(0).realize()
  finally: hooks.device_graph.remove(seen.append)
  assert seen and all(u.op is not Ops.MULTI for u in seen[-1].toposort())
