"""A representative slice of the shape, indexing and nn ops of tests/ops (which compare with torch), checked here against
numpy so the per-target sweeps over tests/tensor exercise them too. Small shapes: these run on every target."""
import numpy as np
from tinygrad import Tensor

rng = np.random.default_rng(11)

def f32(*shape): return rng.uniform(-2, 2, size=shape).astype(np.float32)

def test_sort_and_topk_stable_against_numpy():
  a = rng.integers(0, 3, size=(3, 7)).astype(np.float32)
  v, i = Tensor(a).sort(-1)
  np.testing.assert_equal(i.numpy(), np.argsort(a, axis=-1, kind="stable"))
  np.testing.assert_equal(v.numpy(), np.sort(a, axis=-1))
  v, i = Tensor(a).topk(2, -1)
  ref = np.argsort(-a, axis=-1, kind="stable")[:, :2]
  np.testing.assert_equal(i.numpy(), ref)
  np.testing.assert_equal(v.numpy(), np.take_along_axis(a, ref, -1))

def test_sort_gradient_routes_to_the_sorted_elements():
  a = f32(5)
  x = Tensor(a, requires_grad=True)
  up = np.arange(5, dtype=np.float32)
  g = x.sort()[0].gradient(x, gradient=Tensor(up))[0].numpy()
  np.testing.assert_equal(g[np.argsort(a, kind="stable")], up)

def test_advanced_and_mask_indexing_against_numpy():
  a = f32(3, 4, 5)
  np.testing.assert_equal(Tensor(a)[[0, 2], :, [1, 4]].numpy(), a[[0, 2], :, [1, 4]])
  np.testing.assert_equal(Tensor(a)[:, [[0], [3]], [1, 2]].numpy(), a[:, [[0], [3]], [1, 2]])
  m = a[..., 0] > 0
  np.testing.assert_equal(Tensor(a)[Tensor(m)].numpy(), a[m])

def test_index_writes_against_numpy():
  a = f32(3, 4)
  x = Tensor(a).contiguous()
  x[[0, 2], [1, 3]] = Tensor([5.0, 6.0])
  x[Tensor(a < -1.0)] = 0.0
  b = a.copy()
  b[[0, 2], [1, 3]] = [5.0, 6.0]
  b[a < -1.0] = 0.0
  np.testing.assert_equal(x.numpy(), b)
  acc = Tensor.zeros(4).index_put((Tensor([0, 0, 3]),), Tensor([1.0, 2.0, 3.0]), accumulate=True)
  np.testing.assert_equal(acc.numpy(), [3.0, 0.0, 0.0, 3.0])

def test_scatter_reduce_against_numpy():
  a, src, idx = f32(4), f32(6), np.array([0, 2, 0, 3, 3, 3])
  ref = a.copy()
  np.maximum.at(ref, idx, src)
  np.testing.assert_allclose(Tensor(a).scatter_reduce(0, Tensor(idx.astype(np.int32)), Tensor(src), "amax").numpy(), ref)
  ref = a.copy()
  np.add.at(ref, idx, src)
  np.testing.assert_allclose(Tensor(a).scatter_reduce(0, Tensor(idx.astype(np.int32)), Tensor(src), "sum").numpy(), ref,
                             rtol=1e-6)

def test_shape_ops_against_numpy():
  a = f32(4, 5)
  np.testing.assert_equal(Tensor(a).tril(1).numpy(), np.tril(a, 1))
  np.testing.assert_equal(Tensor(a).diagonal(1).numpy(), np.diagonal(a, 1))
  np.testing.assert_equal(Tensor(a).roll(2, 1).numpy(), np.roll(a, 2, 1))
  np.testing.assert_equal(Tensor(a).pad(((1, 2), (2, 0)), mode="reflect").numpy(), np.pad(a, ((1, 2), (2, 0)), "reflect"))
  np.testing.assert_equal(Tensor(a).pad(((0, 1), (3, 1)), mode="circular").numpy(), np.pad(a, ((0, 1), (3, 1)), "wrap"))
  np.testing.assert_equal(Tensor(a).repeat_interleave(2, 0).numpy(), np.repeat(a, 2, 0))

def test_einsum_against_numpy():
  a, b = f32(2, 3, 4), f32(2, 4, 3)
  for eq in ("bij,bjk->bik", "bii->bi", "bij,bji->b", "...j,...j"):
    ops = (a, a) if eq.startswith("...") else (a, b) if "," in eq else (a[:, :3, :3],)
    np.testing.assert_allclose(Tensor.einsum(eq, *[Tensor(o) for o in ops]).numpy(), np.einsum(eq, *ops), rtol=1e-5,
                               atol=1e-5)

def test_conv_transpose_is_the_adjoint_of_conv2d():
  # <conv(x, w), y> == <x, conv_transpose(y, w)>: the defining property, no reference library needed
  x, w, y = f32(1, 2, 6, 5), f32(3, 2, 3, 3), f32(1, 3, 3, 3)
  lhs = (Tensor(x).conv2d(Tensor(w), stride=2, padding=1) * Tensor(y)).sum().item()
  rhs = (Tensor(x) * Tensor(y).conv_transpose2d(Tensor(w), stride=2, padding=1, output_padding=(1, 0))).sum().item()
  assert abs(lhs - rhs) < 1e-4 * max(1.0, abs(lhs))

def test_interpolate_and_pool_against_numpy():
  a = f32(1, 2, 3, 4)
  np.testing.assert_equal(Tensor(a).interpolate(scale_factor=2).numpy(), a.repeat(2, 2).repeat(2, 3))
  # align_corners bilinear onto a 5x7 grid is exact on the input grid points
  up = Tensor(a).interpolate(size=(5, 7), mode="bilinear", align_corners=True).numpy()
  np.testing.assert_allclose(up[..., ::2, ::2], a, rtol=1e-6, atol=1e-6)
  v, i = Tensor(a).max_pool2d(2, return_indices=True, ceil_mode=True)
  flat = a.reshape(1, 2, -1)
  np.testing.assert_equal(np.take_along_axis(flat, i.numpy().reshape(1, 2, -1), -1).reshape(v.shape), v.numpy())

def test_sdpa_against_numpy():
  q, k, v = f32(2, 3, 4), f32(2, 5, 4), f32(2, 5, 2)
  s = q @ k.transpose(0, 2, 1) / 2.0
  s = np.where(np.tril(np.ones((3, 5), bool)), s, -np.inf)
  w = np.exp(s - s.max(-1, keepdims=True))
  ref = (w / w.sum(-1, keepdims=True)) @ v
  np.testing.assert_allclose(Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), is_causal=True).numpy(), ref,
                             rtol=1e-5, atol=1e-5)
