"""The names a tinygrad user's code and test suites import, and the small Tensor methods tinygrad has beyond torch's
(rearrange, randperm, requires_grad_, the cast shorthands): each checked for what it does, not only that it exists."""
import numpy as np
import pytest
import torch
from tinygrad import Tensor, dtypes

def test_top_level_exports_import():
  import tinygrad
  from tinygrad import Tensor, Device, TinyJit, GlobalCounters, Variable, dtypes, Context, getenv, UOp, nn  # noqa: F401
  for name in tinygrad.__all__: assert getattr(tinygrad, name) is not None, name
  v = Variable("i", 1, 10)
  assert v.bind(3).src[1].arg == 3

def test_helpers_facts_and_timing(capsys):
  from tinygrad.helpers import CI, OSX, Timing, temp
  import os
  assert isinstance(CI, bool) and isinstance(OSX, bool)
  assert os.path.dirname(temp("x.bin")) and temp("x.bin").endswith("x.bin")
  with Timing("blk: ", on_exit=lambda ns: f" ({ns} ns)") as t: sum(range(1000))
  out = capsys.readouterr().out
  assert out.startswith("blk: ") and "ms" in out and f"({t.ns} ns)" in out and t.ns > 0
  with Timing("quiet", enabled=False): pass
  assert capsys.readouterr().out == ""

def test_is_dtype_supported_and_np_dtype_helpers():
  from tinygrad.device import is_dtype_supported
  from tinygrad.tensor import _to_np_dtype, _from_np_dtype
  assert all(is_dtype_supported(d) for d in (dtypes.float32, dtypes.bfloat16, dtypes.fp8e4m3, dtypes.int64, dtypes.bool))
  assert not is_dtype_supported(dtypes.float32.vec(4)) and not is_dtype_supported(dtypes.index)
  with pytest.raises(ValueError, match="unknown device"): is_dtype_supported(dtypes.float32, "TPU")
  for d in (dtypes.float32, dtypes.float16, dtypes.int8, dtypes.uint16, dtypes.bool, dtypes.bfloat16):
    assert Tensor([1], dtype=d).numpy().dtype == _to_np_dtype(d), d
  assert _from_np_dtype(np.int16) == dtypes.int16

@pytest.mark.parametrize("formula,sizes,ref", [
  ("b (h w) c -> b c h w", {"h": 4}, lambda a: a.reshape(2, 4, 3, 3).transpose(0, 3, 1, 2)),
  ("b n c -> (b n) c", {}, lambda a: a.reshape(24, 3)),
  ("b ... -> (... b)", {}, lambda a: a.transpose(1, 2, 0).reshape(-1)),
  ("... c -> c ...", {}, lambda a: a.transpose(2, 0, 1)),
  ("b n c -> c 1 b () n", {}, lambda a: a.transpose(2, 0, 1)[:, None, :, None, :]),
  ("b (h w) c -> (w c) b h", {"w": 6}, lambda a: a.reshape(2, 2, 6, 3).transpose(2, 3, 0, 1).reshape(18, 2, 2)),
])
def test_rearrange_matches_numpy(formula, sizes, ref):
  a = np.arange(2 * 12 * 3, dtype=np.float32).reshape(2, 12, 3)
  np.testing.assert_array_equal(Tensor(a).rearrange(formula, **sizes).numpy(), ref(a))

def test_rearrange_gradient_and_unit_axes():
  a = np.random.default_rng(0).standard_normal((2, 6)).astype(np.float32)
  x = Tensor(a, requires_grad=True)
  y = x.rearrange("b (h w) -> w 1 h b", h=2)
  assert y.shape == (3, 1, 2, 2)
  (y * Tensor(np.arange(12, dtype=np.float32).reshape(3, 1, 2, 2))).sum().backward()
  np.testing.assert_array_equal(x.grad.numpy(), np.arange(12, dtype=np.float32).reshape(3, 2, 2).transpose(2, 1, 0).reshape(2, 6))
  assert Tensor.ones(1, 3).rearrange("1 c -> c").shape == (3,)

@pytest.mark.parametrize("formula,sizes,msg", [
  ("b n -> b n", {}, "left side has 2 axes"), ("b n c -> b n", {}, "different axes"),
  ("b (h w) c -> b h w c", {}, "give the sizes"), ("b (h w) c -> b h w c", {"h": 5}, "not divisible"),
  ("a a c -> a c", {}, "repeats"), ("b n c -> b n c", {"z": 2}, "not in it"), ("b n c", {}, "'->'"),
  ("(b ...) -> b", {}, "'...'"), ("b (n c -> b n c", {}, "unbalanced"), ("1 n c -> n c", {}, "size 1, the axis 2"),
])
def test_rearrange_bad_formula_names_the_problem(formula, sizes, msg):
  with pytest.raises(ValueError, match=msg): Tensor.ones(2, 12, 3).rearrange(formula, **sizes)

def test_randperm_is_a_permutation_on_device():
  Tensor.manual_seed(3)
  p = Tensor.randperm(50)
  assert p.dtype == dtypes.int32 and p.shape == (50,)
  v = p.numpy()
  assert sorted(v.tolist()) == list(range(50)) and v.tolist() != list(range(50))
  assert Tensor.randperm(7, dtype="int64").dtype == dtypes.int64 and Tensor.randperm(0).shape == (0,)
  with pytest.raises(TypeError): Tensor.randperm(4, dtype=dtypes.float32)
  with pytest.raises(ValueError): Tensor.randperm(-1)

def test_requires_grad_and_cast_shorthands_match_torch():
  x = Tensor([1.0, -2.0, 3.5]).requires_grad_()
  assert x.requires_grad is True and x.requires_grad_(False).requires_grad is False
  x.requires_grad_()
  (x * x).sum().backward()
  np.testing.assert_array_equal(x.grad.numpy(), [2.0, -4.0, 7.0])
  t = torch.tensor([1.0, -2.0, 3.5, 300.0])
  for name, dt in (("bfloat16", dtypes.bfloat16), ("short", dtypes.int16), ("char", dtypes.int8), ("byte", dtypes.uint8)):
    ours = getattr(Tensor(t.numpy()), name)()
    assert ours.dtype == dt
    if name != "byte" and name != "char":  # NOTE: 300 and -2 out of int8/uint8 range: torch's result is platform-defined
      np.testing.assert_array_equal(ours.numpy(), getattr(t, name)().float().numpy())
