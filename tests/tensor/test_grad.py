"""Gradients of the Tensor ops against central finite differences of the numpy function (float64), through the real
realize path."""
import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.gradient import compute_gradient

rng = np.random.default_rng(1)

def numeric_grad(f, xs, w, eps=1e-6):
  grads = []
  for i, x in enumerate(xs):
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
      hi, lo = [a.copy() for a in xs], [a.copy() for a in xs]
      hi[i][idx] += eps
      lo[i][idx] -= eps
      g[idx] = ((f(*hi) * w).sum() - (f(*lo) * w).sum()) / (2 * eps)
    grads.append(g)
  return grads

def check_grad(tfn, nfn, *shapes, lo=-2.0, hi=2.0, atol=2e-3, rtol=2e-3, xs=None):
  xs = xs if xs is not None else [rng.uniform(lo, hi, size=s) for s in shapes]
  ts = [Tensor(x.astype(np.float32), requires_grad=True) for x in xs]
  out = tfn(*ts)
  w = rng.uniform(-1, 1, size=out.shape)
  (out * Tensor(w.astype(np.float32))).sum().backward()
  for t, g in zip(ts, numeric_grad(nfn, [x.astype(np.float64) for x in xs], w)):
    assert t.grad is not None and t.grad.shape == t.shape
    np.testing.assert_allclose(t.grad.numpy(), g, atol=atol, rtol=rtol)

UNARY = [
  ("exp", Tensor.exp, np.exp, (-2, 2)), ("log", Tensor.log, np.log, (0.5, 3)), ("sqrt", Tensor.sqrt, np.sqrt, (0.5, 3)),
  ("sin", Tensor.sin, np.sin, (-3, 3)), ("cos", Tensor.cos, np.cos, (-3, 3)), ("tan", Tensor.tan, np.tan, (-1, 1)),
  ("reciprocal", Tensor.reciprocal, np.reciprocal, (0.5, 3)), ("sigmoid", Tensor.sigmoid, lambda x: 1 / (1 + np.exp(-x)), (-3, 3)),
  ("tanh", Tensor.tanh, np.tanh, (-2, 2)), ("relu", Tensor.relu, lambda x: np.maximum(x, 0), (-2, 2)),
  ("abs", Tensor.abs, np.abs, (-2, 2)), ("silu", Tensor.silu, lambda x: x / (1 + np.exp(-x)), (-3, 3)),
  ("softplus", Tensor.softplus, lambda x: np.log1p(np.exp(x)), (-3, 3)), ("rsqrt", Tensor.rsqrt, lambda x: x ** -0.5, (0.5, 3)),
  ("gelu", Tensor.gelu, lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))), (-3, 3)),
  ("pow3", lambda t: t ** 3, lambda x: x ** 3, (-2, 2)), ("powf", lambda t: t ** 1.5, lambda x: x ** 1.5, (0.5, 2)),
  ("clamp", lambda t: t.clamp(-0.5, 0.7), lambda x: np.clip(x, -0.5, 0.7), (-2, 2)),
]

@pytest.mark.parametrize("name,tfn,nfn,r", UNARY, ids=[u[0] for u in UNARY])
def test_unary_grad(name, tfn, nfn, r):
  check_grad(tfn, nfn, (3, 4), lo=r[0], hi=r[1])

BINARY = [
  ("add", lambda a, b: a + b, lambda a, b: a + b), ("sub", lambda a, b: a - b, lambda a, b: a - b),
  ("mul", lambda a, b: a * b, lambda a, b: a * b), ("div", lambda a, b: a / (b.abs() + 1), lambda a, b: a / (np.abs(b) + 1)),
  ("maximum", Tensor.maximum, np.maximum), ("minimum", Tensor.minimum, np.minimum),
  ("pow", lambda a, b: (a.abs() + 0.5) ** b, lambda a, b: (np.abs(a) + 0.5) ** b),
  ("where", lambda a, b: (a > b).where(a * 2, b * b), lambda a, b: np.where(a > b, a * 2, b * b)),
]

@pytest.mark.parametrize("name,tfn,nfn", BINARY, ids=[b[0] for b in BINARY])
def test_binary_broadcast_grad(name, tfn, nfn):
  check_grad(tfn, nfn, (3, 4), (1, 4))

@pytest.mark.parametrize("name,tfn,nfn", [
  ("sum", lambda t: t.sum(1), lambda x: x.sum(1)), ("sum_keep", lambda t: t.sum((0, 2), keepdim=True), lambda x: x.sum((0, 2), keepdims=True)),
  ("max", lambda t: t.max(1), lambda x: x.max(1)), ("min", lambda t: t.min(), lambda x: x.min()),
  ("prod", lambda t: t.prod(2), lambda x: x.prod(2)), ("mean", lambda t: t.mean(0), lambda x: x.mean(0)),
  ("var", lambda t: t.var(1), lambda x: x.var(1, ddof=1)), ("std", lambda t: t.std(), lambda x: x.std(ddof=1)),
  ("softmax", lambda t: t.softmax(-1), lambda x: np.exp(x) / np.exp(x).sum(-1, keepdims=True)),
  ("log_softmax", lambda t: t.log_softmax(1), lambda x: x - np.log(np.exp(x).sum(1, keepdims=True))),
  ("logsumexp", lambda t: t.logsumexp(2), lambda x: np.log(np.exp(x).sum(2))),
  ("cumsum", lambda t: t.cumsum(1), lambda x: np.cumsum(x, 1)),
  ("layernorm", lambda t: t.layernorm(), lambda x: (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)),
])
def test_reduce_grad(name, tfn, nfn):
  check_grad(tfn, nfn, (2, 3, 4))

@pytest.mark.parametrize("name,tfn,nfn", [
  ("reshape", lambda t: t.reshape(4, 6), lambda x: x.reshape(4, 6)), ("permute", lambda t: t.permute(2, 0, 1), lambda x: x.transpose(2, 0, 1)),
  ("expand", lambda t: t[:, :1].expand(2, 5, 4), lambda x: np.broadcast_to(x[:, :1], (2, 5, 4))),
  ("pad", lambda t: t.pad(((1, 2), None, (0, 1))), lambda x: np.pad(x, ((1, 2), (0, 0), (0, 1)))),
  ("shrink_flip", lambda t: t[1:, ::-2, 1:3], lambda x: x[1:, ::-2, 1:3]),
  ("cat", lambda t: t.cat(t * 2, dim=2), lambda x: np.concatenate([x, x * 2], 2)),
  ("getitem_tensor", lambda t: t[Tensor(np.array([1, 0, 1], dtype=np.int32))], lambda x: x[np.array([1, 0, 1])]),
  ("gather", lambda t: t.gather(2, Tensor(np.array([[[0, 3], [1, 1], [2, 0]]] * 2, dtype=np.int32))),
   lambda x: np.take_along_axis(x, np.array([[[0, 3], [1, 1], [2, 0]]] * 2), 2)),
])
def test_movement_grad(name, tfn, nfn):
  check_grad(tfn, nfn, (2, 3, 4))

def test_matmul_conv_pool_grad():
  check_grad(lambda a, b: a @ b, lambda a, b: a @ b, (2, 3, 4), (4, 5))
  def conv_np(x, w):
    out = np.zeros((1, 2, 3, 3))
    for i in range(3):
      for j in range(3): out[:, :, i, j] = np.einsum("nchw,ochw->no", x[:, :, i:i + 2, j:j + 2], w)
    return out
  check_grad(lambda x, w: x.conv2d(w), conv_np, (1, 2, 4, 4), (2, 2, 2, 2))
  check_grad(lambda x: x.max_pool2d(2), lambda x: x.reshape(1, 1, 2, 2, 2, 2).max((3, 5)), (1, 1, 4, 4))
  check_grad(lambda x: x.avg_pool2d(2), lambda x: x.reshape(1, 1, 2, 2, 2, 2).mean((3, 5)), (1, 1, 4, 4))

def test_cross_entropy_grad_analytic():
  logits = rng.uniform(-2, 2, size=(4, 5)).astype(np.float32)
  y = np.array([0, 4, 2, 2])
  t = Tensor(logits, requires_grad=True)
  t.cross_entropy(Tensor(y.astype(np.int32))).backward()
  p = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
  np.testing.assert_allclose(t.grad.numpy(), (p - np.eye(5)[y]) / 4, atol=1e-6)

def test_max_ties_split_the_gradient():
  t = Tensor([3.0, 1.0, 3.0], requires_grad=True)
  t.max().backward()
  np.testing.assert_allclose(t.grad.numpy(), [0.5, 0.0, 0.5])

def test_gradient_api_and_detach():
  x, y = Tensor([2.0, 3.0], requires_grad=True), Tensor([5.0, 7.0], requires_grad=True)
  loss = (x * y + x.detach() * 10).sum()
  gx, gy = loss.gradient(x, y)
  np.testing.assert_allclose(gx.numpy(), [5.0, 7.0])
  np.testing.assert_allclose(gy.numpy(), [2.0, 3.0])
  z = Tensor([1.0, 1.0], requires_grad=True)
  (gz,) = loss.gradient(z)
  np.testing.assert_allclose(gz.numpy(), [0.0, 0.0])
  with pytest.raises(ValueError, match="scalar"): (x * y).gradient(x)

def test_backward_accumulates_and_survives_realize():
  x = Tensor([1.0, 2.0], requires_grad=True)
  loss = (x * x).sum()
  assert loss.item() == 5.0
  loss.backward()
  np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])
  (x * 3).sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), [5.0, 7.0])

def test_half_grad_dtype():
  x = Tensor(np.array([0.5, 1.5], dtype=np.float16), requires_grad=True)
  (x * x).sum().backward()
  assert x.grad.dtype is dtypes.half
  np.testing.assert_allclose(x.grad.numpy(), [1.0, 3.0])

def test_compute_gradient_direct():
  a = Tensor([1.0, 2.0, 3.0])
  out = (a * a).sum()
  g = compute_gradient(out.uop, Tensor(1.0).uop, {a.uop})
  np.testing.assert_allclose(Tensor(g[a.uop]).numpy(), [2.0, 4.0, 6.0])
