"""Edge cases of the shape, indexing and creation ops that torch's OpInfo samples found (tests/ops/opinfo/shape.py), one
regression test each, against torch: 0-d tensors, empty index tensors, torch's legacy empty cat, dtypes kept by fills,
int dtypes of arange and linspace."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from tinygrad import Tensor, dtypes
from tests.ops.helpers import check, raises_like_torch

def test_transpose_0d_same_axis():
  check(None, lambda x: x.transpose(0, 0), vals=[3.0])
  check(None, lambda x: x.transpose(-1, 0), vals=[3.0])

def test_transpose_0d_axis_out_of_range_is_an_index_error():
  raises_like_torch(IndexError, lambda: torch.tensor(3.0).transpose(0, 1), lambda: Tensor(3.0).transpose(0, 1))

@pytest.mark.parametrize("size,step", [(1, 1), (1, 3), (0, 1)])
def test_unfold_0d_gives_the_window(size, step):
  check(None, lambda x: x.unfold(0, size, step), vals=[3.0])

@pytest.mark.parametrize("dims", [(), (1,), (-1,), (1, 3), (1, 2), (0, 1, 2, 3)])
def test_squeeze_several_dims(dims):
  check([(5, 1, 5, 1)], lambda x: x.squeeze(dims))

def test_squeeze_0d_and_repeated_dims():
  check(None, lambda x: x.squeeze((0,)), vals=[2.0])
  raises_like_torch(RuntimeError, lambda: torch.zeros(1, 2).squeeze((0, 0)), lambda: Tensor.zeros(1, 2).squeeze((0, 0)))

@pytest.mark.parametrize("xshape,ishape", [((5,), (2, 0)), ((5,), (0,)), ((2, 3), (0,)), ((2, 3), (4, 0, 1))])
def test_gather_empty_index_of_any_rank(xshape, ishape):
  idx = np.zeros(ishape, np.int64)
  check([xshape], lambda x: x.gather(0, torch.tensor(idx)), lambda x: x.gather(0, Tensor(idx)))

@pytest.mark.parametrize("idx", [[0, 0, 0], 0, [0]])
def test_gather_0d_input(idx):
  check(None, lambda x: x.gather(0, torch.tensor(idx)), lambda x: x.gather(0, Tensor(idx)), vals=[2.5])

def test_gather_0d_input_2d_index_is_an_error():
  raises_like_torch(RuntimeError, lambda: torch.tensor(1.0).gather(0, torch.zeros(1, 1, dtype=torch.long)),
                    lambda: Tensor(1.0).gather(0, Tensor.zeros(1, 1, dtype=dtypes.int32)))

@pytest.mark.parametrize("shapes,dim", [([(0,), (5, 5)], 1), ([(2, 3), (0,), (4, 3)], 0), ([(0,), (0,)], 0),
                                        ([(3,), (0,)], 0)])
def test_cat_skips_legacy_empty_1d(shapes, dim):
  check(shapes, lambda *xs: torch.cat(xs, dim), lambda *xs: xs[0].cat(*xs[1:], dim=dim))

def test_cat_legacy_empty_still_promotes():
  out = Tensor.zeros(0, dtype=dtypes.int32).cat(Tensor.ones(2, 3), dim=1)
  assert out.dtype == dtypes.float32 and out.shape == (2, 3)

@pytest.mark.parametrize("dtype", ["bool", "int32", "float16"])
def test_masked_fill_keeps_dtype(dtype):
  m = np.array([[True, False, True]])
  check([(2, 3)], lambda x: x.masked_fill(torch.tensor(m), 10), lambda x: x.masked_fill(Tensor(m), 10), dtype=dtype)
  check([(2, 3)], lambda x: x.masked_fill(torch.tensor(m), torch.tensor(0.5)),
        lambda x: x.masked_fill(Tensor(m), Tensor(0.5)), dtype=dtype)

def test_masked_fill_broadcasts_mask_and_grads_value():
  m = np.array([[True], [False]])
  check([(3,), ()], lambda x, v: x.masked_fill(torch.tensor(m), v), lambda x, v: x.masked_fill(Tensor(m), v))

@pytest.mark.parametrize("dtype", ["int32", "bool"])
def test_pad_constant_fill_keeps_dtype(dtype):
  check([(2, 3)], lambda x: F.pad(x, (1, 2, 0, 1), value=1.7), lambda x: x.pad((1, 2, 0, 1), value=1.7), dtype=dtype)

@pytest.mark.parametrize("args", [(0.0, -8.000001, -4.0), (0.5, 5, 1.5), (-0.5, 5, 1.3), (0, 5, 0.5), (0.9, -3, -1.5)])
def test_arange_int_dtype_float_args(args):
  want = torch.arange(*args, dtype=torch.int32)
  got = Tensor.arange(*args, dtype=dtypes.int32)
  assert got.dtype == dtypes.int32
  np.testing.assert_array_equal(got.numpy(), want.numpy())

@pytest.mark.parametrize("args", [(4.3, -3, 50), (3, 10, 7), (10, 3, 7), (-4.9, 0.2, 6), (0, 100000007, 3), (-2.0, 4.3, 50)])
def test_linspace_int_dtype(args):
  np.testing.assert_array_equal(Tensor.linspace(*args, dtype=dtypes.int32).numpy(),
                                torch.linspace(*args, dtype=torch.int32).numpy())

@pytest.mark.parametrize("args", [(0.0, 1.0, 7), (-3.3, 7.1, 50), (1e4, -2.5, 33)])
def test_linspace_float_ends_exact(args):
  got, want = Tensor.linspace(*args).numpy(), torch.linspace(*args).numpy()
  np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
  assert got[0] == np.float32(args[0]) and got[-1] == np.float32(args[1])

def test_repeat_interleave_output_size():
  r = np.array([1, 0, 2, 3])
  check([(4, 2)], lambda x: x.repeat_interleave(torch.tensor(r), 0, output_size=6),
        lambda x: x.repeat_interleave(Tensor(r), 0, output_size=6))
  check([(4, 2)], lambda x: x.repeat_interleave(2, 1, output_size=4), lambda x: x.repeat_interleave(2, 1, output_size=4))
  with pytest.raises(ValueError, match="output_size"): Tensor.ones(4).repeat_interleave([1, 0, 2, 3], 0, output_size=5)
  with pytest.raises(ValueError, match="output_size"): Tensor.ones(4).repeat_interleave(2, 0, output_size=5)

@pytest.mark.parametrize("dtype", ["int64", "uint8", "int16"])
@pytest.mark.parametrize("args", [(0.0, -8.000001, -4.0), (1.0, 5.000001, 2.0), (-1, 2, 2), (2, -3, -1), (0.5, 5, 1.5)])
def test_arange_narrow_and_wide_int_dtypes(dtype, args):
  want = torch.arange(*args, dtype=getattr(torch, dtype))
  got = Tensor.arange(*args, dtype=getattr(dtypes, dtype))
  assert got.dtype == getattr(dtypes, dtype)
  np.testing.assert_array_equal(got.numpy(), want.numpy())

def test_arange_non_finite_is_a_clear_error():
  with pytest.raises(ValueError, match="finite"): Tensor.arange(0, float("inf"), 2)

def test_cat_mismatch_is_a_runtime_error():
  raises_like_torch(RuntimeError, lambda: torch.cat([torch.zeros(5, 1, 10), torch.zeros(5, 1, 1)], 1),
                    lambda: Tensor.zeros(5, 1, 10).cat(Tensor.zeros(5, 1, 1), dim=1))
  raises_like_torch(RuntimeError, lambda: torch.cat([torch.zeros(20, 1), torch.zeros(20, 1, 1)]),
                    lambda: Tensor.zeros(20, 1).cat(Tensor.zeros(20, 1, 1)))
  raises_like_torch(RuntimeError, lambda: torch.cat([torch.tensor(1.0), torch.tensor(2.0)]),
                    lambda: Tensor(1.0).cat(Tensor(2.0)))

def test_negative_size_is_a_runtime_error():
  raises_like_torch(RuntimeError, lambda: torch.eye(-1), lambda: Tensor.eye(-1))
  raises_like_torch(RuntimeError, lambda: torch.zeros(2, -3), lambda: Tensor.zeros(2, -3))

def test_linspace_steps_must_be_an_int():
  raises_like_torch(TypeError, lambda: torch.linspace(0, 3, 1.0), lambda: Tensor.linspace(0, 3, 1.0))
  assert Tensor.linspace(0, 3, np.int64(4)).shape == (4,)

@pytest.mark.parametrize("xshape,idx,dim", [((3, 4), [[0, -1, 2]], 1), ((1, 4), [[1], [-2], [3]], 1),
                                            ((3, 4), [[2, 11], [0, 1]], None), ((2, 3, 4), [[[-1]], [[0]]], 0)])
def test_take_along_dim_broadcasts_and_wraps(xshape, idx, dim):
  i = np.array(idx)
  check([xshape], lambda x: torch.take_along_dim(x, torch.tensor(i), dim), lambda x: x.take_along_dim(Tensor(i), dim))

def test_take_along_dim_rank_mismatch_is_a_runtime_error():
  raises_like_torch(RuntimeError, lambda: torch.take_along_dim(torch.zeros(3, 4), torch.zeros(4, dtype=torch.long), 1),
                    lambda: Tensor.zeros(3, 4).take_along_dim(Tensor.zeros(4, dtype=dtypes.int32), 1))
