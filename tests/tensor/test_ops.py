"""Forward ops of the Tensor front end against numpy, through the real Tensor.numpy() path (schedule, codegen, CPU)."""

import numpy as np
import pytest
from tinygrad import Tensor, dtypes

rng = np.random.default_rng(0)

def close(t: Tensor, ref, atol=1e-5, rtol=1e-5):
  out = t.numpy()
  ref = np.asarray(ref)
  assert out.shape == ref.shape, f"shape {out.shape} != numpy {ref.shape}"
  np.testing.assert_allclose(out.astype(np.float64) if out.dtype != np.bool_ else out, ref.astype(np.float64) if ref.dtype != np.bool_ else ref,
                             atol=atol, rtol=rtol, equal_nan=True)

def f32(*shape, lo=-2.0, hi=2.0): return rng.uniform(lo, hi, size=shape).astype(np.float32)

# ---- elementwise ----

UNARY = [
  ("neg", lambda t: -t, np.negative, (-3, 3)), ("abs", Tensor.abs, np.abs, (-3, 3)), ("sign", Tensor.sign, np.sign, (-3, 3)),
  ("exp", Tensor.exp, np.exp, (-3, 3)), ("exp2", Tensor.exp2, np.exp2, (-3, 3)), ("log", Tensor.log, np.log, (0.1, 5)),
  ("log2", Tensor.log2, np.log2, (0.1, 5)), ("sqrt", Tensor.sqrt, np.sqrt, (0, 5)), ("rsqrt", Tensor.rsqrt, lambda x: 1 / np.sqrt(x), (0.1, 5)),
  ("sin", Tensor.sin, np.sin, (-6, 6)), ("cos", Tensor.cos, np.cos, (-6, 6)), ("tan", Tensor.tan, np.tan, (-1.2, 1.2)),
  ("reciprocal", Tensor.reciprocal, np.reciprocal, (0.5, 3)), ("floor", Tensor.floor, np.floor, (-5, 5)),
  ("ceil", Tensor.ceil, np.ceil, (-5, 5)), ("trunc", Tensor.trunc, np.trunc, (-5, 5)),
  ("relu", Tensor.relu, lambda x: np.maximum(x, 0), (-3, 3)), ("sigmoid", Tensor.sigmoid, lambda x: 1 / (1 + np.exp(-x)), (-5, 5)),
  ("tanh", Tensor.tanh, np.tanh, (-4, 4)), ("silu", Tensor.silu, lambda x: x / (1 + np.exp(-x)), (-4, 4)),
  ("gelu", Tensor.gelu, lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))), (-4, 4)),
  ("softplus", Tensor.softplus, lambda x: np.log1p(np.exp(x)), (-20, 20)), ("square", Tensor.square, np.square, (-3, 3)),
]

@pytest.mark.parametrize("name,fn,ref,rng_", UNARY, ids=[u[0] for u in UNARY])
def test_unary_matches_numpy_float32(name, fn, ref, rng_):
  x = f32(3, 5, lo=rng_[0], hi=rng_[1])
  close(fn(Tensor(x)), ref(x.astype(np.float64)), atol=2e-5, rtol=2e-5)

def test_round_is_half_to_even():
  x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49, -0.51, 3.7], dtype=np.float32)
  close(Tensor(x).round(), np.round(x))

def test_unary_half():
  x = f32(4, 4, lo=0.1, hi=3).astype(np.float16)
  for fn, ref in [(Tensor.exp, np.exp), (Tensor.sqrt, np.sqrt), (Tensor.log, np.log)]:
    out = fn(Tensor(x))
    assert out.dtype is dtypes.float16
    close(out, ref(x.astype(np.float32)), atol=1e-2, rtol=1e-2)

BINARY = [("add", lambda a, b: a + b), ("sub", lambda a, b: a - b), ("mul", lambda a, b: a * b), ("div", lambda a, b: a / b),
          ("max", np.maximum), ("min", np.minimum)]

@pytest.mark.parametrize("name,op", BINARY, ids=[b[0] for b in BINARY])
def test_binary_broadcast_float32(name, op):
  a, b = f32(2, 3, 4), f32(3, 1, lo=0.5, hi=2)
  tfn = {"max": Tensor.maximum, "min": Tensor.minimum}.get(name, op)
  close(tfn(Tensor(a), Tensor(b)), op(a.astype(np.float64), b.astype(np.float64)))
  close(tfn(Tensor(a), 1.5), op(a.astype(np.float64), 1.5))

@pytest.mark.parametrize("dt", [np.int32, np.int8, np.int64, np.uint8])
def test_int_arithmetic_matches_numpy(dt):
  lo = 0 if np.dtype(dt).kind == "u" else -20
  a = rng.integers(lo, 20, size=(4, 5)).astype(dt)
  b = rng.integers(1, 7, size=(4, 5)).astype(dt)
  if np.dtype(dt).kind != "u": b = b * np.where(rng.integers(0, 2, size=(4, 5)) == 0, 1, -1).astype(dt)
  ta, tb = Tensor(a), Tensor(b)
  for t, r in [(ta + tb, a + b), (ta * tb, a * b), (ta - tb, a - b), (ta // tb, a // b), (ta % tb, a % b),
               (ta.maximum(tb), np.maximum(a, b)), (ta.minimum(tb), np.minimum(a, b)), (ta & tb, a & b), (ta | tb, a | b),
               (ta ^ tb, a ^ b), (~ta, ~a), (ta < tb, a < b), (ta == tb, a == b), (ta != tb, a != b), (ta >= tb, a >= b)]:
    out = t.numpy()
    assert out.dtype == r.dtype or t.dtype is dtypes.bool, f"dtype {out.dtype} != numpy {r.dtype}"
    np.testing.assert_array_equal(out, r)

def test_floordiv_mod_python_semantics_scalar():
  a = np.array([-7, -6, -1, 0, 1, 6, 7], dtype=np.int32)
  np.testing.assert_array_equal((Tensor(a) // 3).numpy(), a // 3)
  np.testing.assert_array_equal((Tensor(a) % 3).numpy(), a % 3)
  np.testing.assert_array_equal((Tensor(a) // -3).numpy(), a // -3)
  np.testing.assert_array_equal((Tensor(a) % -3).numpy(), a % -3)
  x = np.array([-7.5, -1.0, 2.5, 7.25], dtype=np.float32)
  close(Tensor(x) // 2, x // 2)
  close(Tensor(x) % 2, x % 2)

def test_shifts():
  a = np.array([1, 2, 3, 100, -8], dtype=np.int32)
  np.testing.assert_array_equal((Tensor(a) << 3).numpy(), a << 3)
  np.testing.assert_array_equal((Tensor(a) >> 1).numpy(), a >> 1)
  u = np.array([1, 255, 128], dtype=np.uint8)
  np.testing.assert_array_equal((Tensor(u) << 1).numpy(), u << 1)

def test_pow_cases():
  x = np.array([-2.0, -0.5, 0.0, 0.5, 2.0, 3.0], dtype=np.float32)
  for e in [2, 3, -1, 0, 0.5, 2.5, -2.0]:
    with np.errstate(all="ignore"): ref = np.power(x.astype(np.float64), e)
    close(Tensor(x) ** e, ref, atol=1e-4, rtol=1e-4)
  y = np.array([2.0, 3.0, 0.0, -1.0, 1.5, 2.0], dtype=np.float32)
  with np.errstate(all="ignore"): ref = np.power(x.astype(np.float64), y)
  close(Tensor(x) ** Tensor(y), ref, atol=1e-4, rtol=1e-4)
  close(2 ** Tensor(y), 2.0 ** y, rtol=1e-5)
  np.testing.assert_array_equal((Tensor(np.array([2, 3, -2], dtype=np.int32)) ** 3).numpy(), np.array([8, 27, -8]))

def test_promotion_and_scalars():
  i, f, b = Tensor([1, 2, 3]), Tensor([1.5, 2.5, 3.5]), Tensor([True, False, True])
  assert (i + f).dtype is dtypes.float32 and (i + 1).dtype is dtypes.int32 and (i + 1.5).dtype is dtypes.float32
  assert (b + 1).dtype is dtypes.int32 and (i / 2).dtype is dtypes.float32
  assert (Tensor([1], dtype=dtypes.int8) + Tensor([1], dtype=dtypes.int16)).dtype is dtypes.int16
  assert (Tensor([1.0], dtype=dtypes.half) * 2.0).dtype is dtypes.half
  close(i / 2, np.array([0.5, 1.0, 1.5]))
  close(1 - f, 1 - np.array([1.5, 2.5, 3.5]))
  np.testing.assert_array_equal((b & Tensor([True, True, False])).numpy(), [True, False, False])
  np.testing.assert_array_equal(b.logical_not().numpy(), [False, True, False])

def test_where_clamp_cast_bitcast():
  x = f32(3, 4)
  close((Tensor(x) > 0).where(Tensor(x), 0.0), np.where(x > 0, x, 0))
  close(Tensor(x).clamp(-0.5, 0.5), np.clip(x, -0.5, 0.5))
  close(Tensor(x).clip(0.1, None), np.clip(x, 0.1, None))
  np.testing.assert_array_equal(Tensor(x).cast(dtypes.int32).numpy(), x.astype(np.int32))
  np.testing.assert_array_equal(Tensor(x).bitcast(dtypes.uint32).numpy(), x.view(np.uint32))
  np.testing.assert_array_equal(Tensor(x).cast(dtypes.half).numpy(), x.astype(np.float16))
  with pytest.raises(ValueError, match="differ in size"): Tensor(x).bitcast(dtypes.int16)

def test_broadcast_error_names_shapes_and_op():
  with pytest.raises(ValueError, match=r"add: shapes \(2, 3\) and \(4,\) do not broadcast"): Tensor.ones(2, 3) + Tensor.ones(4)
  with pytest.raises(RuntimeError, match=r"matmul: shapes \(2, 3\) and \(4, 5\)"): Tensor.ones(2, 3) @ Tensor.ones(4, 5)

# ---- construction ----

def test_constructors():
  close(Tensor.zeros(2, 3), np.zeros((2, 3)))
  close(Tensor.ones((2, 3), dtype=dtypes.int32), np.ones((2, 3)))
  close(Tensor.full((2, 2), 7.5), np.full((2, 2), 7.5))
  close(Tensor.arange(5), np.arange(5))
  close(Tensor.arange(2, 11, 3), np.arange(2, 11, 3))
  close(Tensor.arange(5, 0, -2), np.arange(5, 0, -2))
  close(Tensor.arange(0.0, 1.0, 0.25), np.arange(0.0, 1.0, 0.25))
  close(Tensor.arange(1000), np.arange(1000))
  close(Tensor.linspace(-1, 1, 7), np.linspace(-1, 1, 7), atol=1e-6)
  close(Tensor.eye(3, 4), np.eye(3, 4))
  close(Tensor.ones(2, 3).zeros_like(), np.zeros((2, 3)))
  assert Tensor.empty(2, 3).shape == (2, 3)
  assert Tensor(3.5).item() == 3.5 and Tensor(3).item() == 3 and Tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
  assert Tensor(np.arange(6, dtype=np.int16).reshape(2, 3)).dtype is dtypes.int16

def test_empty_and_size1_dims():
  e = Tensor.ones(0, 3)
  assert e.numpy().shape == (0, 3)
  assert (e + 1).numpy().shape == (0, 3)
  close(e.sum(0), np.zeros(3))
  close(e.sum(1), np.zeros(0))
  x = f32(1, 3, 1)
  close(Tensor(x).sum(), x.sum())
  close(Tensor(x).squeeze(), x.squeeze())
  y = f32(2, 1, 4)
  close(Tensor(x) * Tensor(y).sum(0, keepdim=True), x * y.sum(0, keepdims=True))

# ---- reductions ----

@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2)])
def test_reductions(axis):
  x = f32(3, 4, 5)
  t = Tensor(x)
  close(t.sum(axis), x.sum(axis), atol=1e-4)
  close(t.max(axis), x.max(axis))
  close(t.min(axis), x.min(axis))
  close(t.mean(axis), x.mean(axis), atol=1e-5)
  close(t.prod(axis), x.astype(np.float64).prod(axis), rtol=1e-4, atol=1e-5)
  close(t.var(axis), x.astype(np.float64).var(axis, ddof=1), rtol=1e-4, atol=1e-5)
  close(t.std(axis, correction=0), x.astype(np.float64).std(axis), rtol=1e-4, atol=1e-5)
  close(t.sum(axis, keepdim=True), x.sum(axis, keepdims=True), atol=1e-4)
  close((t > 0).any(axis), (x > 0).any(axis))
  close((t > -1.9).all(axis), (x > -1.9).all(axis))

def test_int_reductions_and_arg():
  a = rng.integers(-50, 50, size=(4, 6)).astype(np.int32)
  np.testing.assert_array_equal(Tensor(a).sum(1).numpy(), a.sum(1))
  np.testing.assert_array_equal(Tensor(a).max(0).numpy(), a.max(0))
  np.testing.assert_array_equal(Tensor(a).min(0).numpy(), a.min(0))
  u = rng.integers(0, 200, size=(5,)).astype(np.uint8)
  np.testing.assert_array_equal(Tensor(u).min().numpy(), u.min())
  assert Tensor(u).sum().item() == int(u.sum())
  x = np.array([[1, 5, 5, 2], [7, 0, 7, 7]], dtype=np.float32)
  np.testing.assert_array_equal(Tensor(x).argmax(1).numpy(), x.argmax(1))
  np.testing.assert_array_equal(Tensor(x).argmin(1).numpy(), x.argmin(1))
  assert Tensor(x).argmax().item() == x.argmax()

def test_softmax_family_and_cumsum():
  x = f32(3, 6, lo=-5, hi=5)
  e = np.exp(x - x.max(-1, keepdims=True))
  close(Tensor(x).softmax(-1), e / e.sum(-1, keepdims=True), atol=1e-6)
  close(Tensor(x).log_softmax(-1), np.log(e / e.sum(-1, keepdims=True)), atol=1e-5)
  close(Tensor(x).logsumexp(1), np.log(np.exp(x.astype(np.float64)).sum(1)), atol=1e-5)
  close(Tensor(x).cumsum(1), np.cumsum(x, 1), atol=1e-5)
  close(Tensor(x).cumsum(0), np.cumsum(x, 0), atol=1e-5)
  np.testing.assert_array_equal(Tensor(np.arange(5, dtype=np.int32)).cumsum().numpy(), np.cumsum(np.arange(5)))

# ---- movement ----

def test_movement():
  x = f32(2, 3, 4)
  t = Tensor(x)
  close(t.reshape(4, -1), x.reshape(4, -1))
  close(t.permute(2, 0, 1), x.transpose(2, 0, 1))
  close(t.transpose(0, 2), x.swapaxes(0, 2))
  close(t.reshape(6, 4).T, x.reshape(6, 4).T)
  close(t[:, :1].expand(2, 5, 4), np.broadcast_to(x[:, :1], (2, 5, 4)))
  close(t.flatten(), x.flatten())
  close(t.flatten(1), x.reshape(2, 12))
  close(t.unsqueeze(1), x[:, None])
  close(t.unsqueeze(-1), x[..., None])
  close(t.pad(((1, 0), None, (2, 1))), np.pad(x, ((1, 0), (0, 0), (2, 1))))
  close(t.pad((1, 2), value=-3.0), np.pad(x, ((0, 0), (0, 0), (1, 2)), constant_values=-3.0))
  close(t.shrink(((0, 1), (1, 3), None)), x[0:1, 1:3])
  close(t.flip(0, 2), x[::-1, :, ::-1])
  close(t.repeat(2, 1, 3), np.tile(x, (2, 1, 3)))
  y = f32(2, 2, 4)
  close(t.cat(Tensor(y), dim=1), np.concatenate([x, y], 1))
  close(Tensor.stack(t, t * 2, dim=1), np.stack([x, x * 2], 1))
  parts = t.split([1, 2], dim=1)
  close(parts[1], x[:, 1:3])
  assert [c.shape for c in t.chunk(2, dim=2)] == [(2, 3, 2), (2, 3, 2)]
  with pytest.raises(ValueError, match="reshape"): t.reshape(5, -1)

@pytest.mark.parametrize("idx", [
  1, -1, (0, 1), slice(None, None, 2), (slice(None), slice(None, None, -1)), (Ellipsis, 2), (None, 0, slice(1, 3)),
  (slice(3, 0, -2), None, slice(1, None, 3)), (slice(5, 10),), (0, Ellipsis, None), (slice(-2, None), -3, slice(None, -1)),
])
def test_getitem_basic(idx):
  x = f32(4, 5, 6)
  close(Tensor(x)[idx], x[idx])

@pytest.mark.parametrize("idx", [
  lambda: (np.array([2, 0, 3]),), lambda: (slice(None), np.array([[1, 0], [4, -1]])), lambda: (np.array([1, 3]), np.array([0, 4])),
  lambda: (np.array([1, 3]), slice(1, 3), np.array([0, 5])), lambda: (0, slice(None), np.array([2, 3])),
  lambda: (slice(None), np.array([1, 2]), np.array([3, 4])),
])
def test_getitem_advanced(idx):
  x = f32(4, 5, 6)
  i = idx()
  ti = tuple(Tensor(v.astype(np.int32)) if isinstance(v, np.ndarray) else v for v in i)
  close(Tensor(x)[ti], x[i])

def test_getitem_errors():
  with pytest.raises(IndexError, match="out of bounds"): Tensor.ones(3, 4)[3]
  with pytest.raises(IndexError, match="too many"): Tensor.ones(3)[0, 0]

def test_setitem_on_realized_tensor():
  x = np.arange(12, dtype=np.float32).reshape(3, 4)
  t = Tensor(x.copy())
  t[1] = 5.0
  t[:, 2] = Tensor([7.0, 8.0, 9.0])
  x[1] = 5.0
  x[:, 2] = [7.0, 8.0, 9.0]
  close(t, x)

def test_gather_matches_take_along_axis():
  x = f32(3, 5)
  idx = rng.integers(0, 5, size=(3, 4)).astype(np.int32)
  close(Tensor(x).gather(1, Tensor(idx)), np.take_along_axis(x, idx, 1))
  idx0 = rng.integers(0, 3, size=(2, 5)).astype(np.int32)
  close(Tensor(x).gather(0, Tensor(idx0)), np.take_along_axis(x, idx0, 0))

# ---- linear algebra and nn functions ----

@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 5)), ((4,), (4, 2)), ((3, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (4, 5)),
                                   ((2, 1, 3, 4), (5, 4, 2)), ((1, 4), (4, 1))])
def test_matmul_shapes(sa, sb):
  a, b = f32(*sa), f32(*sb)
  close(Tensor(a) @ Tensor(b), a.astype(np.float64) @ b.astype(np.float64), atol=1e-4)

def test_matmul_int_and_half():
  a, b = rng.integers(-5, 5, size=(3, 4)).astype(np.int32), rng.integers(-5, 5, size=(4, 2)).astype(np.int32)
  np.testing.assert_array_equal((Tensor(a) @ Tensor(b)).numpy(), a @ b)
  h, g = f32(4, 8).astype(np.float16), f32(8, 3).astype(np.float16)
  out = Tensor(h) @ Tensor(g)
  assert out.dtype is dtypes.half
  close(out, h.astype(np.float32) @ g.astype(np.float32), atol=2e-2, rtol=2e-2)

@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16])
def test_half_matmul_products_are_not_rounded_before_the_sum(dt):
  # values on a 1/8 grid: every product and partial sum is exact in float32, so the float32-accumulated matmul is the
  # exact sum rounded once to dt (as torch and the tensor cores compute it). Rounding each product to dt first (the
  # matmul did) is off by several ulps
  a = (rng.integers(-31, 32, size=(5, 8)) / 8).astype(np.float32)
  b = (rng.integers(-31, 32, size=(8, 6)) / 8).astype(np.float32) + 1 / 64
  want = Tensor(a.astype(np.float64) @ b.astype(np.float64), dtype=dtypes.float32).cast(dt).numpy()
  out = Tensor(a).cast(dt) @ Tensor(b).cast(dt)
  assert out.dtype is dt
  np.testing.assert_array_equal(out.numpy(), want)

def conv2d_ref(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
  x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (padding, padding), (padding, padding)))
  n, cin, h, wd = x.shape
  cout, cin_g, kh, kw = w.shape
  oh, ow = (h - dilation * (kh - 1) - 1) // stride + 1, (wd - dilation * (kw - 1) - 1) // stride + 1
  out = np.zeros((n, cout, oh, ow))
  for o in range(cout):
    g = o // (cout // groups)
    for i in range(oh):
      for j in range(ow):
        patch = x[:, g * cin_g:(g + 1) * cin_g, i * stride:i * stride + dilation * (kh - 1) + 1:dilation,
                  j * stride:j * stride + dilation * (kw - 1) + 1:dilation]
        out[:, o, i, j] = (patch * w[o]).sum((1, 2, 3))
  return out + (b.reshape(1, -1, 1, 1) if b is not None else 0)

@pytest.mark.parametrize("stride,padding,dilation,groups", [(1, 0, 1, 1), (2, 1, 1, 1), (1, 2, 2, 1), (2, 0, 1, 2), (3, 1, 2, 2)])
def test_conv2d(stride, padding, dilation, groups):
  x, w, b = f32(2, 4, 7, 8), f32(6, 4 // groups, 3, 2), f32(6)
  close(Tensor(x).conv2d(Tensor(w), Tensor(b), groups=groups, stride=stride, padding=padding, dilation=dilation),
        conv2d_ref(x, w, b, stride, padding, dilation, groups), atol=1e-4)

def test_conv2d_channel_mismatch_error():
  with pytest.raises(ValueError, match="conv2d"): Tensor.ones(1, 3, 5, 5).conv2d(Tensor.ones(2, 4, 3, 3))

def test_pools():
  x = f32(2, 3, 6, 7)
  ref_max = np.stack([np.stack([x[:, :, 2*i:2*i+2, 2*j:2*j+2].max((2, 3)) for j in range(3)], -1) for i in range(3)], -2)
  close(Tensor(x).max_pool2d(2), ref_max)
  ref_avg = np.stack([np.stack([x[:, :, 2*i:2*i+3, 2*j:2*j+3].mean((2, 3)) for j in range(3)], -1) for i in range(2)], -2)
  close(Tensor(x).avg_pool2d(3, stride=2), ref_avg, atol=1e-6)

def test_layernorm_batchnorm_embedding_cross_entropy():
  x = f32(3, 5)
  ref = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
  close(Tensor(x).layernorm(), ref, atol=1e-5)
  xi = f32(2, 3, 4, 4)
  m, v, w, b = f32(3), f32(3, lo=0.5, hi=2), f32(3), f32(3)
  r = lambda a: a.reshape(1, 3, 1, 1)
  close(Tensor(xi).batchnorm(Tensor(w), Tensor(b), Tensor(m), Tensor(1 / np.sqrt(v))), (xi - r(m)) / np.sqrt(r(v)) * r(w) + r(b), atol=1e-5)
  table, idx = f32(10, 4), np.array([[1, 9], [0, 1]], dtype=np.int32)
  close(Tensor(idx).embedding(Tensor(table)), table[idx])
  logits, y = f32(4, 6), np.array([0, 5, 2, 2], dtype=np.int32)
  lp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  close(Tensor(logits).cross_entropy(Tensor(y)), -lp[np.arange(4), y].mean(), atol=1e-5)
  close(Tensor(logits).cross_entropy(Tensor(y), reduction="none"), -lp[np.arange(4), y], atol=1e-5)

def test_int_division_by_zero_gives_zero_not_a_crash():
  a, b = np.array([7, -7, 3, 0], dtype=np.int32), np.array([0, 2, 0, 0], dtype=np.int32)
  np.testing.assert_array_equal((Tensor(a) // Tensor(b)).numpy(), [0, -4, 0, 0])
  np.testing.assert_array_equal((Tensor(a) % Tensor(b)).numpy(), [0, 1, 0, 0])
  np.testing.assert_array_equal(Tensor(a).idiv(Tensor(b)).numpy(), [0, -3, 0, 0])
  np.testing.assert_array_equal((Tensor(a) // 0).numpy(), [0, 0, 0, 0])

def test_setitem_with_steps_and_tensor_index():
  x = np.zeros((4, 5), dtype=np.int32)
  t = Tensor(x.copy())
  t[::2, 1::2] = 3
  t[Tensor(np.array([3], dtype=np.int32))] = Tensor(np.arange(5, dtype=np.int32))
  x[::2, 1::2] = 3
  x[np.array([3])] = np.arange(5)
  np.testing.assert_array_equal(t.numpy(), x)

def test_empty_reductions_matmul_and_indexing():
  np.testing.assert_array_equal((Tensor.ones(3, 0) @ Tensor.ones(0, 2)).numpy(), np.zeros((3, 2)))
  assert (Tensor.ones(0, 4) @ Tensor.ones(4, 2)).numpy().shape == (0, 2)
  assert Tensor.ones(0, 4).cumsum(1).numpy().shape == (0, 4)
  np.testing.assert_array_equal(Tensor.ones(0, 3).max(0).numpy(), np.full(3, -np.inf))
  np.testing.assert_array_equal(Tensor.ones(0, 3, dtype=dtypes.int32).prod(0).numpy(), np.ones(3))
  assert np.isnan(Tensor.ones(2, 0).mean().item())
  assert Tensor.ones(2, 3)[Tensor(np.zeros(0, dtype=np.int32))].numpy().shape == (0, 3)
  x = Tensor(np.zeros((0, 3), dtype=np.float32), requires_grad=True)
  (g,) = (x * 2).sum().gradient(x)
  assert g.numpy().shape == (0, 3)
