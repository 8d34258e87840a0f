"""Reductions, scans and contractions at the inputs torch's OpInfo samples found wrong: zeros in a product's gradient,
nan in max/argmax, a 0-d argmax with a dim, softmax's dtype, logsumexp of unsigned ints, std's gradient at a constant
input, a fractional correction, and a float16 matmul whose products cancel."""
import importlib.util, math
import numpy as np
import pytest
import torch
from tinygrad import Tensor, dtypes
from tinygrad.helpers import Context
from tests.ops.helpers import check_op, check_raises
from tests.llvm_device import llvm_cpu_device, c_cpu_device

# ---- prod and cumprod: the gradient is the product of the other elements, also where some are zero ----

@pytest.mark.parametrize("vals", [[[[2.0, 3.0, 4.0], [0.5, -1.0, 2.0]]],   # no zero
                                  [[[2.0, 0.0, 4.0], [0.5, -1.0, 2.0]]],   # one zero in a row
                                  [[[0.0, 0.0, 4.0], [0.0, 3.0, 0.0]]]])   # two zeros in a row
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_prod_gradient_with_zeros_matches_torch(vals, axis):
  check_op(None, lambda x: x.prod() if axis is None else x.prod(axis), vals=vals)

def test_prod_gradient_of_zero_scalar_is_one():
  x = Tensor(0.0, requires_grad=True)
  (g,) = x.prod().gradient(x)
  assert g.item() == 1.0

def test_cumprod_gradient_with_zeros_matches_torch():
  check_op(None, lambda x: x.cumprod(1), vals=[[[2.0, 0.0, 3.0, 0.0, 4.0], [1.0, 2.0, 0.0, 5.0, -1.0]]])

# ---- scans: one window reduce where its n*n work is small, else blocks of a power of two and their totals' scan ----

@pytest.mark.parametrize("device", ["C", "LLVM", "PYTHON"])
def test_scans_by_window_and_by_blocks_match_torch(device):
  from tinygrad.device import Device
  from tinygrad.tensor import _scan_by_window
  if device == "LLVM" and importlib.util.find_spec("llvmlite") is None:
    pytest.skip("the LLVM path needs llvmlite (the llvm extra)")
  # (4, 40) is one window; (64, 33) blocks of 8, the last one padded; (8, 100) blocks of 16; (2, 1030) blocks of 64
  # whose own scans are blocks again
  assert _scan_by_window((4, 40), 40)
  assert not any(_scan_by_window(s, s[1]) for s in ((64, 33), (8, 100), (2, 1030)))
  dev = {"C": c_cpu_device, "LLVM": llvm_cpu_device}[device]() if device != "PYTHON" else "PYTHON"
  Device.DEFAULT = dev
  try:
    with Context(SPEC=2):
      # (the window's form is in the OpInfo samples)
      check_op([(64, 33)], lambda x: torch.cumsum(x, 1), lambda x: x.cumsum(1))
      check_op([(33, 64)], lambda x: torch.cummax(x, 0).values, lambda x: x.cummax(0))
      check_op([(8, 100)], lambda x: torch.logcumsumexp(x, 1), lambda x: x.logcumsumexp(1))
      # ints exactly (the ranks of a mask, as ONNX's ops take them)
      check_op([(2, 1030)], lambda x: torch.cumsum(x, 1, dtype=torch.int32), lambda x: x.cumsum(1), dtype="int32",
               low=-3, high=3, any_int_width=True)
  finally: Device.DEFAULT = None

def test_a_long_scan_is_not_a_window_over_the_whole_axis():
  # a window over n = 4096 is 4096 adds an element (97 ms for (1024, 1024) on 2 threads, torch 0.6); blocks of 64 whose
  # scans are blocks of 8 again: a few dozen
  from tinygrad.codegen import get_program
  from tinygrad.device import Device
  x = Tensor.ones(16, 4096).contiguous().realize()
  ops = sum(get_program(si.ast, Device[x.device].renderer, []).estimates.ops for si in x.cumsum(1).schedule())
  assert ops < 16 * 4096 * 64, ops
  # the gradient is the reverse scan of the upstream gradient: the same kernels as the forward scan (through the
  # blocks' graph it was 6, one a cut kernel of scalar loops taking 8.3 of 10.5 ms at (1024, 1024))
  x.requires_grad = True
  up = Tensor.ones(16, 4096).contiguous().realize()
  assert len(x.cumsum(1).gradient(x, gradient=up)[0].schedule()) == len(x.cumsum(1).schedule())
  # the arange of the counters keeps its one window of ones: folded to a closed form, no kernel of its own
  assert len(Tensor.arange(1000).schedule()) == 1

# ---- max, min, argmax, argmin with nan; argmax of a 0-d tensor ----

def test_max_gradient_goes_to_the_nan_as_torch():
  check_op(None, lambda x: x.max(), vals=[[1.0, math.nan, 3.0]])
  check_op(None, lambda x: x.min(), vals=[[1.0, math.nan, 3.0]])

def test_cummax_gradient_with_nan_is_finite_as_torch():
  check_op(None, lambda x: torch.cummax(x, 0).values, lambda x: x.cummax(0), vals=[[1.0, math.nan, 3.0]])

@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_argmax_argmin_pick_the_first_nan_as_torch(op):
  check_op(None, lambda x: getattr(x, op)(), vals=[[1.0, math.nan, 3.0, math.nan]], any_int_width=True)
  check_op(None, lambda x: getattr(x, op)(1), lambda x: getattr(x, op)(1),
           vals=[[[1.0, 2.0, math.nan], [4.0, 0.0, 2.0]]], any_int_width=True)

@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("dim,keepdim", [(0, False), (-1, True)])
def test_argmax_argmin_of_a_0d_tensor_with_a_dim(op, dim, keepdim):
  check_op(None, lambda x: getattr(x, op)(dim, keepdim=keepdim), lambda x: getattr(x, op)(dim, keepdim=keepdim),
           vals=[3.5], any_int_width=True)
  with pytest.raises(IndexError): getattr(Tensor(3.5), op)(1)

# ---- softmax and log_softmax with dtype, logsumexp of unsigned ints ----

@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", ["float16", "int32"])
def test_softmax_dtype_casts_the_input_first_as_torch(op, dtype):
  out = check_op([(3, 5)], lambda x: getattr(x, op)(1, dtype=torch.float64),
                 lambda x: getattr(x, op)(1, dtype=dtypes.float64), dtype=dtype, grad=False)
  assert out[0].dtype is dtypes.float64
  check_op([(3, 5)], lambda x: getattr(x, op)(0, dtype=torch.float32), lambda x: getattr(x, op)(0, dtype="float32"))

def test_logsumexp_of_uint8_does_not_wrap():
  check_op(None, lambda x: x.logsumexp(1), vals=[[[3, 200, 7], [0, 1, 255]]], dtype="uint8")

# ---- std, var ----

@pytest.mark.parametrize("axis", [None, 0, 1])
def test_std_gradient_at_a_constant_input_is_zero_as_torch(axis):
  check_op(None, lambda x: x.std() if axis is None else x.std(axis), vals=[[[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]]])
  check_op(None, lambda x: x.std(1), vals=[[[2.0, 2.0, 2.0], [1.0, 2.0, 4.0]]])

@pytest.mark.parametrize("correction", [0.5, 1.3, 2.5])
def test_var_std_take_a_fractional_correction(correction):
  check_op([(4, 3)], lambda x: x.var(0, correction=correction))
  check_op([(4, 3)], lambda x: x.std(1, correction=correction))

# ---- matmul in float16 ----

def test_float16_matmul_multiplies_in_the_accumulator_dtype():
  # NOTE: (1 + 2**-10)**2 rounded to half loses its 2**-20, which is the whole of the dot product here
  a = np.array([[1 + 2**-10, -1.0]], np.float16)
  b = np.array([[1 + 2**-10], [1 + 2**-9]], np.float16)
  want = float(np.float64(a[0, 0]) * np.float64(b[0, 0]) - np.float64(b[1, 0]))
  assert want == 2**-20
  got = (Tensor(a) @ Tensor(b)).numpy()
  assert got.dtype == np.float16 and got[0, 0] == np.float16(want)
  assert torch.tensor(a).matmul(torch.tensor(b)).item() == got[0, 0]

def test_float16_batched_matmul_matches_torch():
  check_op([(4, 5, 10), (4, 10, 5)], torch.bmm, Tensor.matmul, dtype="float16", low=-9, high=9)

# ---- tinygrad's keywords: dot/matmul dtype and reverse, topk sorted_ ----

def test_matmul_dtype_accumulates_and_returns_in_it():
  a = Tensor([[100, 100]], dtype=dtypes.int8)
  b = Tensor([[2], [2]], dtype=dtypes.int8)
  assert (a @ b).dtype is dtypes.int8 and (a @ b).item() == 400 - 512  # wraps in int8, as torch
  out = a.matmul(b, dtype=dtypes.int32)
  assert out.dtype is dtypes.int32 and out.item() == 400
  assert a.dot(b, dtype="float32").dtype is dtypes.float32 and a.dot(b, dtype="float32").item() == 400.0

def test_matmul_reverse_multiplies_from_the_left():
  check_op([(2, 3), (4, 2)], lambda x, w: w @ x, lambda x, w: x.matmul(w, reverse=True))

def test_topk_takes_tinygrads_sorted_keyword():
  check_op([(3, 6)], lambda x: torch.topk(x, 2, 1, largest=False), lambda x: x.topk(2, 1, largest=False, sorted_=True),
           any_int_width=True)

@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_argmax_argmin_of_an_empty_axis_is_an_index_error(op):
  check_raises(IndexError, lambda: getattr(torch.zeros(0, 3), op)(0), lambda: getattr(Tensor.zeros(0, 3), op)(0), "empty")
  check_raises(IndexError, lambda: getattr(torch.zeros(0, 3), op)(), lambda: getattr(Tensor.zeros(0, 3), op)(), "empty")

def test_var_is_accurate_when_the_spread_is_small_next_to_the_mean():
  # NOTE: the float32 mean of 1e4 + 1e-3 * noise is off by more than the spread; the var must not carry that error
  x = torch.randn(3, 10000, generator=torch.Generator().manual_seed(0)) * 1e-3 + 1e4
  want = x.double().var(1).numpy()
  got = Tensor(x.numpy()).var(1).numpy()
  np.testing.assert_allclose(got, want, rtol=1e-5)
  assert (Tensor(np.full((2, 7), 0.1, np.float32)).std(1).numpy() == 0).all()

# ---- the compare-everything ops (sort, topk, kthvalue, median, mode) on an input fused lazily ----

@pytest.mark.parametrize("device", ["C", "LLVM"])
@pytest.mark.parametrize("n", [8, 16, 33])
def test_sort_of_a_lazily_computed_input_is_a_permutation_of_it(device, n):
  # fuzz finding 1c056b6edf78 (campaign seed 30): Tensor.linspace(2, -2, 8).sort() gave 0.0 and 1.142857 among its
  # values: each element was compared with the others' linspace values folded to constants (an unrolled reduce) and
  # with its own computed at run time, one bit apart, so two elements took one rank and the other rank stayed empty.
  # The compare-everything ops store their input once now. The reference: torch on the stored input's values
  if device == "LLVM" and importlib.util.find_spec("llvmlite") is None:
    pytest.skip("the LLVM path needs llvmlite (the llvm extra)")
  dev = llvm_cpu_device() if device == "LLVM" else c_cpu_device()
  with Context(SPEC=2): _check_lazy_sorts(dev, n)

def _check_lazy_sorts(dev: str, n: int) -> None:
  # each op gets a fresh lazy linspace (a realized one is a buffer already); the reference reads another one's values
  def lazy() -> Tensor: return Tensor.linspace(2, -2, n, device=dev)
  stored = torch.from_numpy(lazy().numpy())
  vals, idx = lazy().sort()
  tv, ti = torch.sort(stored, stable=True)
  np.testing.assert_array_equal(vals.numpy(), tv.numpy())
  np.testing.assert_array_equal(idx.numpy(), ti.numpy())
  np.testing.assert_array_equal(lazy().topk(3)[0].numpy(), torch.topk(stored, 3)[0].numpy())
  np.testing.assert_array_equal(lazy().kthvalue(2)[0].numpy(), torch.kthvalue(stored, 2)[0].numpy())
  np.testing.assert_array_equal(lazy().median().numpy(), stored.median().numpy())
  # mode counts equal elements: the linspace's values rounded to 3 levels, fused into the compares
  def levels() -> Tensor: return (lazy() * 0.6).round()
  np.testing.assert_array_equal(levels().mode()[0].numpy(), torch.mode(torch.from_numpy(levels().numpy()))[0].numpy())

# ---- a sum to one element in two kernels: partial sums over padded rows, then their sum ----

@pytest.mark.parametrize("device", ["C", "LLVM"])
def test_a_full_sum_by_partial_sums_matches_numpy_and_torch(device, monkeypatch):
  # NOTE: on the CPU only, where it was measured (the PYTHON device and the GPUs keep one kernel; replay and the fuzz
  # run these kernels on PYTHON too)
  import tinygrad.tensor as tensor_mod
  if device == "LLVM" and importlib.util.find_spec("llvmlite") is None: pytest.skip("the LLVM path needs llvmlite")
  dev = {"C": c_cpu_device, "LLVM": llvm_cpu_device}[device]()
  monkeypatch.setattr(tensor_mod, "FULL_SUM_SPLIT_MIN", 1)
  rng = np.random.default_rng(5)
  # odd sizes (the rows padded with zeros), a size of whole rows, ints (exact), keepdim, a sum over every axis named
  a = rng.standard_normal((37, 61)).astype(np.float32)
  b = rng.standard_normal((4, 8, 64)).astype(np.float32)
  i = rng.integers(-1000, 1000, (129, 3)).astype(np.int32)
  with Context(SPEC=2):
    for x, kw in ((a, {}), (b, {}), (b, {"axis": (0, 1, 2), "keepdim": True}), (a, {"keepdim": True})):
      got = Tensor(x, device=dev).sum(**kw)
      sched = got.schedule()
      assert len(sched) == 2, len(sched)
      want = x.astype(np.float64).sum(axis=kw.get("axis"), keepdims=kw.get("keepdim", False))
      assert got.shape == want.shape
      np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-4)
    assert Tensor(i, device=dev).sum().item() == int(i.astype(np.int64).sum())
    # the gradient is the upstream broadcast, as one sum's; mean divides the same sum
    x, xt = Tensor(a, device=dev, requires_grad=True), torch.tensor(a, requires_grad=True)
    (x.mean() * 3).backward()
    (xt.mean() * 3).backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-6)
