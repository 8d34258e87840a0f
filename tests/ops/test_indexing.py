"""Indexing against torch (and numpy where the two differ): reads with ints, slices, None, Ellipsis, lists, tensors and
bool masks, forward and backward; writes (setitem, index_put with accumulate); masked_select, nonzero, gather."""
import warnings
import numpy as np
import pytest
import torch
from tinygrad import Tensor, dtypes
from tests.ops.helpers import check, raises_like_torch, kernels

warnings.filterwarnings("ignore", message="Using a non-tuple sequence")

def _ti(v): return torch.tensor(v)
def _ty(v): return Tensor(np.asarray(v, dtype=np.int32))

# (torch index, our index): the same value in each library; patterns where numpy and torch agree
READS = [
  ("list", lambda m: [0, 2]), ("tuple_in_tuple", lambda m: ((0, 1),)), ("two_lists", lambda m: ([0, 1], [2, 0])),
  ("separated_by_slice", lambda m: ([0, 1], slice(None), [1, 3])), ("after_slice", lambda m: (slice(None), [0, 2], [3, 1])),
  ("with_none_between", lambda m: ([0, 1], None, [1, 2])), ("none_first", lambda m: (None, [0, 1], ..., [1, 2])),
  ("ellipsis_last_axis", lambda m: (..., [-1, 0])), ("negative", lambda m: ([-1, -3],)),
  ("broadcast_2d", lambda m: (m([[0], [1]]), m([1, 2, 0]))), ("int_adjacent", lambda m: (1, m([0, 2]), m([1, 3]))),
  ("tensor_and_slices", lambda m: (slice(None), m([2, 0, 2]), slice(1, 3))), ("step_slice", lambda m: (slice(None, None, 2), [1])),
  ("bool_scalar", lambda m: True), ("false_scalar", lambda m: (False, 0)), ("bool_scalar_with_list", lambda m: ([0, 1], True)),
  ("empty_list", lambda m: []), ("list_of_lists", lambda m: [[0, 1], [1, 0]]), ("bool_list", lambda m: (slice(None), [True, False, True, True])),
  ("zero_d_tensor", lambda m: m(1)),
]

@pytest.mark.parametrize("name,idx", READS, ids=[r[0] for r in READS])
def test_getitem_matches_torch(name, idx):
  check([(3, 4, 5, 6)], lambda x: x[idx(_ti)], lambda x: x[idx(_ty)])

@pytest.mark.parametrize("dtype", ["float16", "int32", "bool"])
def test_getitem_dtypes_match_torch(dtype):
  check([(4, 5)], lambda x: x[_ti([[0, 3], [1, 1]]), _ti([4, 0])], lambda x: x[_ty([[0, 3], [1, 1]]), _ty([4, 0])],
        dtype=dtype, low=-9, high=9)

@pytest.mark.parametrize("shape", [(0, 3), (1, 3), (3, 1)])
def test_getitem_empty_and_size_one_axes(shape):
  check([shape], lambda x: x[:, [0, 0]] if shape[1] else x[[]], lambda x: x[:, [0, 0]] if shape[1] else x[[]])
  check([shape], lambda x: x[torch.tensor([], dtype=torch.long)], lambda x: x[Tensor.zeros(0, dtype=dtypes.int32)])

def test_getitem_list_of_tensors_is_a_tuple_index():
  # NOTE: torch's rule (a list holding tensors or sequences indexes several axes); numpy would build one array
  check([(3, 4, 5)], lambda x: x[[_ti([0, 2]), _ti([1, 3])]], lambda x: x[[_ty([0, 2]), _ty([1, 3])]])
  check([(3, 4, 5)], lambda x: x[[_ti([0, 2])]], lambda x: x[[_ty([0, 2])]])

def test_getitem_tensors_inside_a_list_stack_into_one_index():
  a = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
  got = Tensor(a)[1, [Tensor(2), Tensor(0)]].numpy()
  np.testing.assert_equal(got, a[1, [2, 0]])

def test_getitem_int_next_to_index_arrays_follows_numpy():
  # NOTE: numpy counts the int as an index array (so the arrays are not adjacent and their dims go first); torch would
  # give shape (4, 2) here
  a = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
  np.testing.assert_equal(Tensor(a)[0, :, [1, 3]].numpy(), a[0, :, [1, 3]])

BOOL_MASKS = [("full", (3, 4), None), ("leading", (3,), None), ("middle_axis", (4,), 1)]

@pytest.mark.parametrize("name,mshape,axis", BOOL_MASKS, ids=[b[0] for b in BOOL_MASKS])
def test_getitem_bool_mask_matches_torch(name, mshape, axis):
  m = np.random.default_rng(3).integers(0, 2, size=mshape).astype(bool)
  tidx = (slice(None),) * (axis or 0) + (torch.tensor(m),)
  ours = (slice(None),) * (axis or 0) + (Tensor(m),)
  check([(3, 4, 2)], lambda x: x[tidx], lambda x: x[ours])

def test_getitem_errors_match_torch():
  t, x = torch.zeros(3, 4), Tensor.zeros(3, 4)
  raises_like_torch(IndexError, lambda: t[[0, 3]], lambda: x[[0, 3]])
  raises_like_torch(IndexError, lambda: t[0, 0, 0], lambda: x[0, 0, 0])
  raises_like_torch(IndexError, lambda: t[torch.tensor([True, False])], lambda: x[Tensor([True, False])])
  raises_like_torch(IndexError, lambda: t[torch.tensor([0.0])], lambda: x[Tensor([0.0])])
  raises_like_torch(IndexError, lambda: t[1.5], lambda: x[1.5])
  # NOTE: torch takes two ellipses; numpy does not, and neither do we
  with pytest.raises(IndexError, match="single ellipsis"): x[..., ...]

@pytest.mark.parametrize("name,idx", READS, ids=[r[0] for r in READS])
def test_getitem_gradient_as_segment_sums_matches_torch(name, idx, monkeypatch):
  # every read here with an index tensor and more than one element in its other axes differentiates as segment sums
  import tinygrad.tensor as tensor_mod
  monkeypatch.setattr(tensor_mod, "ADVANCED_INDEX_SEGMENT_WORK", 0)
  check([(3, 4, 5, 6)], lambda x: x[idx(_ti)], lambda x: x[idx(_ty)])

@pytest.mark.parametrize("device", ["C", "LLVM", "PYTHON"])
def test_getitem_segment_sums_take_repeats_wraps_and_nothing_outside(device, monkeypatch):
  import importlib.util
  import tinygrad.tensor as tensor_mod
  from tinygrad.helpers import Context
  from tests.llvm_device import llvm_cpu_device, c_cpu_device
  if device == "LLVM" and importlib.util.find_spec("llvmlite") is None: pytest.skip("the LLVM path needs llvmlite")
  dev = {"C": c_cpu_device, "LLVM": llvm_cpu_device}[device]() if device != "PYTHON" else "PYTHON"
  monkeypatch.setattr(tensor_mod, "ADVANCED_INDEX_SEGMENT_WORK", 0)
  used: list[int] = []
  seg = Tensor._segment_sums
  monkeypatch.setattr(Tensor, "_segment_sums", staticmethod(lambda i, v, t: used.append(t) or seg(i, v, t)))
  rng = np.random.default_rng(2)
  xn = rng.standard_normal((7, 3, 4)).astype(np.float32)
  # rows and columns picked many times over, negative ones wrapped; as int64, 2**33 + 1 and 3 - 2**32 are outside the
  # axes (a zero, as a read outside gives, and no gradient) though their low 32 bits are inside
  a, b = rng.integers(-7, 7, (5, 6)).astype(np.int64), rng.integers(-4, 4, (5, 6)).astype(np.int64)
  a[0, 0], b[1, 2] = 2**33 + 1, 3 - 2**32
  up = rng.standard_normal((5, 6, 3)).astype(np.float32)
  inside = (a >= -7) & (a < 7) & (b >= -4) & (b < 4)
  want = np.zeros((7, 3, 4), np.float64)
  np.add.at(want, (a[inside] % 7, slice(None), b[inside] % 4), up[inside].astype(np.float64))
  want_fwd = np.where(inside[..., None], xn[a % 7, :, b % 4], 0)
  # the runs' ends by a compare of every index with every end, and by a binary search of the sorted indices
  for ends_max in (1 << 62, 0):
    monkeypatch.setattr(tensor_mod, "SEGMENT_ENDS_MAX_COMPARES", ends_max)
    with Context(SPEC=2):
      x = Tensor(xn, device=dev, requires_grad=True)
      out = x[Tensor(a, device=dev), :, Tensor(b, device=dev)]
      out.backward(Tensor(up, device=dev))
      np.testing.assert_array_equal(out.numpy(), want_fwd)
      np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-6, atol=1e-6)
  assert used == [28, 28]

def test_getitem_gradient_work_is_segment_sums_not_the_selects():
  # a (5000, 64) table over 1024 indices: the select's gradient compares each index with every row for each column
  # (5000 * 1024 * 64); the segment sums, 1024 * 5000 compares for the runs' ends (counted with their sums), the sort
  # and the loads
  from tinygrad.codegen import get_program
  from tinygrad.device import Device
  w = Tensor.rand(5000, 64, requires_grad=True).realize()
  idx = Tensor.randint(1024, high=5000).realize()
  g, = w[idx].gradient(w, gradient=Tensor.rand(1024, 64).realize())
  ops = sum(get_program(si.ast, Device[w.device].renderer, []).estimates.ops for si in Tensor.schedule(g))
  assert ops < 5000 * 1024 * 16, ops

def test_getitem_advanced_is_one_kernel():
  x = Tensor.rand(4, 5, 6).realize()
  assert kernels(x[[0, 1], :, [2, 3]]) == 1

# ---- writes ----

def _write(t, idx, v):
  t = t.clone()
  t[idx] = v
  return t

WRITES = [("two_lists", lambda m: (m([0, 2]), m([1, 3])), 7.0), ("list_rows", lambda m: m([2, 0]), 5.0),
          ("slice_and_list", lambda m: (slice(None), m([3, 0])), -1.0), ("repeated", lambda m: (m([1, 1]), m([2, 2])), 3.0)]

@pytest.mark.parametrize("name,idx,v", WRITES, ids=[w[0] for w in WRITES])
def test_setitem_advanced_matches_torch(name, idx, v):
  check([(3, 4)], lambda x: _write(x, idx(_ti), v), lambda x: _write(x, idx(_ty), v))

def test_setitem_tensor_value_and_gradient_matches_torch():
  check([(3, 4), (2,)], lambda x, v: _write(x, (_ti([0, 2]), _ti([1, 3])), v),
        lambda x, v: _write(x, (_ty([0, 2]), _ty([1, 3])), v))

def test_setitem_repeated_index_last_write_wins_as_numpy():
  a = np.zeros(4, np.float32)
  a[[1, 1, 3]] = [5.0, 6.0, 7.0]
  x = Tensor.zeros(4).contiguous()
  x[[1, 1, 3]] = Tensor([5.0, 6.0, 7.0])
  np.testing.assert_equal(x.numpy(), a)

@pytest.mark.parametrize("value", ["scalar", "per_selected", "row_broadcast"])
def test_setitem_bool_mask_matches_torch(value):
  m = np.array([True, False, True])
  v = {"scalar": 2.5, "per_selected": torch.arange(8.0).reshape(2, 4), "row_broadcast": torch.arange(4.0)}[value]
  vt = v if isinstance(v, float) else Tensor(v.numpy())
  check([(3, 4)], lambda x: _write(x, torch.tensor(m), v), lambda x: _write(x, Tensor(m), vt))

def test_setitem_bool_mask_with_scalar_needs_no_sync():
  x = Tensor.zeros(3, 4).contiguous().realize()
  m = Tensor.rand(3, 4) > 0.5
  x[m] = 1.0
  # one where over the buffer: the mask was not read back
  assert x.uop.op.name in ("BUFFER", "RESHAPE")

def test_setitem_value_shape_mismatch_is_a_runtime_error():
  raises_like_torch(RuntimeError, lambda: _write(torch.zeros(3, 4), ([0, 1],), torch.ones(3)),
                    lambda: _write(Tensor.zeros(3, 4), ([0, 1],), Tensor.ones(3)))

@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_matches_torch(accumulate):
  idx = ([0, 2, 0], [1, 3, 1])
  check([(3, 4), (3,)], lambda x, v: x.index_put(tuple(_ti(i) for i in idx), v, accumulate=accumulate),
        lambda x, v: x.index_put(tuple(_ty(i) for i in idx), v, accumulate=accumulate))

def test_index_put_accumulate_int32_matches_torch():
  idx = (_ti([0, 0, 1]),)
  check([(3, 2), (3, 2)], lambda x, v: x.index_put(idx, v, accumulate=True),
        lambda x, v: x.index_put((_ty([0, 0, 1]),), v, accumulate=True), dtype="int32", low=-5, high=5)

# ---- masks, gather ----

@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
def test_masked_select_matches_torch(dtype):
  check([(3, 4)], lambda x: x.masked_select(x > 0), dtype=dtype, low=-5, high=5)
  m = torch.tensor([True, False, True, True])
  check([(3, 4)], lambda x: x.masked_select(m), lambda x: x.masked_select(Tensor(m.numpy())), dtype=dtype, low=-5, high=5)

def test_masked_select_needs_a_bool_mask():
  with pytest.raises(TypeError, match="masked_select"): Tensor.ones(3).masked_select(Tensor([1, 0, 1]))

def test_nonzero_matches_torch():
  check([(3, 4)], lambda x: x.nonzero(), dtype="int32", low=-1, high=1)
  check([(3, 4)], lambda x: x.nonzero(as_tuple=True), dtype="int32", low=-1, high=1)

def test_gather_matches_torch():
  idx = np.random.default_rng(1).integers(0, 5, size=(3, 4))
  check([(3, 5)], lambda x: x.gather(1, torch.tensor(idx)), lambda x: x.gather(1, Tensor(idx.astype(np.int32))))
  check([(3, 5)], lambda x: x.gather(1, torch.tensor(idx)), lambda x: x.gather(1, Tensor(idx.astype(np.int32))),
        dtype="int32", low=-9, high=9)

def test_gather_errors_match_torch():
  raises_like_torch(RuntimeError, lambda: torch.zeros(3, 4).gather(1, torch.zeros(3, dtype=torch.long)),
                    lambda: Tensor.zeros(3, 4).gather(1, Tensor.zeros(3, dtype=dtypes.int32)))
