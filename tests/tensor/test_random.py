"""The counter-based generator: same seed, same numbers; distributions in range; the graph matches the numpy threefry."""
import numpy as np
from tinygrad import Tensor, dtypes
from fuzz.oracles.tensor_ref import eval_tensor_graph, threefry2x32

def test_same_seed_same_numbers():
  Tensor.manual_seed(42)
  a = Tensor.rand(3, 4).numpy()
  b = Tensor.rand(3, 4).numpy()
  Tensor.manual_seed(42)
  np.testing.assert_array_equal(Tensor.rand(3, 4).numpy(), a)
  np.testing.assert_array_equal(Tensor.rand(3, 4).numpy(), b)
  assert not np.array_equal(a, b), "consecutive draws must differ"
  Tensor.manual_seed(43)
  assert not np.array_equal(Tensor.rand(3, 4).numpy(), a), "another seed must give other numbers"

def test_rand_matches_threefry_reference():
  Tensor.manual_seed(7)
  out = Tensor.rand(16).numpy()
  bits = threefry2x32(np.arange(16, dtype=np.uint64), np.full(16, 7, dtype=np.uint64)) & np.uint64(0xFFFFFFFF)
  ref = (bits.astype(np.uint32) >> np.uint32(8)).astype(np.float32) * np.float32(2.0 ** -24)
  np.testing.assert_array_equal(out, ref)

def test_threefry_known_answer():
  # Random123 known-answer vector for threefry2x32_20: counter (0, 0), key (0, 0) -> (0x6b200159, 0x99ba4efe)
  out = int(threefry2x32(np.array([0], dtype=np.uint64), np.array([0], dtype=np.uint64))[0])
  assert (out & 0xFFFFFFFF, out >> 32) == (0x6b200159, 0x99ba4efe)

def test_reference_and_compiler_agree_on_random_graph():
  Tensor.manual_seed(3)
  t = Tensor.randn(64)
  ref = eval_tensor_graph(t.uop)
  np.testing.assert_allclose(t.numpy(), ref, atol=1e-5)

def test_distributions():
  Tensor.manual_seed(0)
  u = Tensor.rand(4000).numpy()
  assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.03
  n = Tensor.randn(4000).numpy()
  assert abs(n.mean()) < 0.08 and abs(n.std() - 1) < 0.08
  r = Tensor.randint(2000, low=-3, high=5).numpy()
  assert r.dtype == np.int32 and r.min() == -3 and r.max() == 4
  un = Tensor.uniform(1000, low=2.0, high=3.0).numpy()
  assert un.min() >= 2.0 and un.max() < 3.0
  h = Tensor.rand(100, dtype=dtypes.half)
  assert h.dtype is dtypes.half and (h.numpy() < 1).all()
  no = Tensor.normal(3000, mean=5.0, std=0.5).numpy()
  assert abs(no.mean() - 5) < 0.05 and abs(no.std() - 0.5) < 0.05

def test_same_numbers_on_cpu_and_python_backends():
  import pytest
  from tinygrad.device import Device, DeviceOpenError
  try: Device["PYTHON"]
  except DeviceOpenError as e: pytest.skip(str(e))
  Tensor.manual_seed(11)
  cpu = Tensor.rand(8, device="CPU").numpy()
  Tensor.manual_seed(11)
  np.testing.assert_array_equal(Tensor.rand(8, device="PYTHON").numpy(), cpu)

def test_draws_realized_in_any_order_get_their_own_numbers():
  Tensor.manual_seed(5)
  a, b = Tensor.rand(6), Tensor.rand(6)
  bn, an = b.numpy(), a.numpy()
  Tensor.manual_seed(5)
  np.testing.assert_array_equal(Tensor.rand(6).numpy(), an)
  np.testing.assert_array_equal(Tensor.rand(6).numpy(), bn)
  assert not np.array_equal(an, bn)

def test_seed_and_counter_are_not_kernel_constants():
  # NOTE: the state lives in a device buffer, so a second draw of the same shape reuses the compiled programs (a seed
  # or counter baked into a kernel would make every draw a new program)
  from tinygrad import hooks
  Tensor.manual_seed(1)
  first = Tensor.rand(5).numpy()
  compiled: list = []
  fn = hooks.register("compiled", lambda *a: compiled.append(a))
  try:
    second = Tensor.rand(5).numpy()
    Tensor.manual_seed(2)
    third = Tensor.rand(5).numpy()
  finally: hooks.unregister("compiled", fn)
  assert compiled == [], "no new program for another draw or another seed"
  assert len({first.tobytes(), second.tobytes(), third.tobytes()}) == 3
