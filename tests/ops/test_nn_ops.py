"""nn ops against torch, forward and backward: conv_transpose (1d/2d/3d), N-d pooling (ceil_mode, count_include_pad,
return_indices, max_unpool), interpolate, scaled_dot_product_attention, einsum, std_mean/var_mean; init helpers by
their bounds and statistics; the kernel counts the issue asks for."""
import math
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from tinygrad import Tensor
from tinygrad.uop import Ops
from tests.ops.helpers import check, raises_like_torch, kernels

# ---- conv_transpose ----

CONVT = [(1, 2, 1, 0, 3, 1), (2, 2, 1, 1, 1, 1), (2, 3, 2, 1, 2, 2), (3, 2, 0, 1, 1, 2)]

@pytest.mark.parametrize("nd,stride,padding,output_padding,dilation,groups", CONVT)
def test_conv_transpose_matches_torch(nd, stride, padding, output_padding, dilation, groups):
  sp, ks = (5, 4, 3)[:nd], (3, 2, 2)[:nd]
  tfn = getattr(F, f"conv_transpose{nd}d")
  check([(2, 4, *sp), (4, 3, *ks), (3 * groups,)],
        lambda x, w, b: tfn(x, w, b, stride, padding, output_padding, groups, dilation),
        lambda x, w, b: x.conv_transpose2d(w, b, groups, stride, dilation, padding, output_padding),
        atol=1e-4, rtol=1e-4, grad_atol=1e-3)

def test_conv_transpose_half_and_size_one():
  check([(1, 2, 1, 1), (2, 3, 3, 3)], lambda x, w: F.conv_transpose2d(x, w, stride=2),
        lambda x, w: x.conv_transpose2d(w, stride=2), dtype="float16", atol=1e-2, rtol=1e-2, grad_atol=5e-2)

@pytest.mark.parametrize("k,stride,padding,output_padding", [(2, 2, 0, 0), (3, 2, 1, 1), (1, 2, 0, 1), (4, 3, 2, 2),
                                                               (5, 2, 2, 0)])
def test_strided_conv_transpose_by_phases_matches_torch(k, stride, padding, output_padding):
  # one stride-1 conv per output phase (Tensor._conv_transpose_by_phase), a kernel narrower than the stride too (its
  # phases with no tap are zeros), differentiated as the adjoint of the strided conv
  check([(2, 4, 5, 6), (4, 3, k, k), (3,)],
        lambda x, w, b: F.conv_transpose2d(x, w, b, stride, padding, output_padding),
        lambda x, w, b: x.conv_transpose2d(w, b, stride=stride, padding=padding, output_padding=output_padding),
        atol=1e-4, rtol=1e-4, grad_atol=1e-3)

def test_strided_conv_transpose_multiplies_no_zeros():
  # the input spread out with zeros made 3/4 of a stride-2 2-d transposed conv's products multiply them (gated loads):
  # N * Cout * 16 * 16 outputs * Cin * 3 * 3 taps = 55,296 multiply-adds here. By phases, 4 stride-1 convs (2x2, 2x1,
  # 1x2 and 1x1 taps) and the copy that interleaves them: each phase over 9 x 9 positions (17 = padding + 16 outputs
  # need 9 per axis; the 9th is one phase's only), 17,496, against the 13,824 products of the input's 8 x 8
  x, w = Tensor.rand(2, 3, 8, 8).realize(), Tensor.rand(3, 4, 3, 3).realize()
  out = x.conv_transpose2d(w, stride=2, padding=1, output_padding=1)
  sched = [si for si in out.schedule() if si.ast.op is Ops.SINK]
  assert len(sched) == 5
  def macs(ast) -> int:
    if not any(u.op is Ops.REDUCE for u in ast.toposort()): return 0
    return math.prod(u.src[0].arg for u in ast.toposort() if u.op is Ops.RANGE)
  assert sum(macs(si.ast) for si in sched) == 2 * 4 * 9 * 9 * 3 * (4 + 2 + 2 + 1)

def test_conv_transpose_errors_match_torch():
  raises_like_torch(RuntimeError, lambda: F.conv_transpose2d(torch.zeros(1, 3, 4, 4), torch.zeros(2, 2, 3, 3)),
                    lambda: Tensor.zeros(1, 3, 4, 4).conv_transpose2d(Tensor.zeros(2, 2, 3, 3)))
  raises_like_torch(RuntimeError, lambda: F.conv_transpose2d(torch.zeros(1, 2, 4, 4), torch.zeros(2, 2, 3, 3), output_padding=1),
                    lambda: Tensor.zeros(1, 2, 4, 4).conv_transpose2d(Tensor.zeros(2, 2, 3, 3), output_padding=1))

# ---- pooling ----

POOLS = [(2, None, 0, False), (3, 2, 1, True), (2, 3, 0, True)]

@pytest.mark.parametrize("k,s,p,ceil", POOLS + [(3, 1, 1, True)])
def test_max_pool2d_matches_torch(k, s, p, ceil):
  check([(2, 2, 7, 6)], lambda x: F.max_pool2d(x, k, s, p, ceil_mode=ceil), lambda x: x.max_pool2d(k, s, 1, p, ceil_mode=ceil))

@pytest.mark.parametrize("k,s,p,ceil", POOLS)
@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avg_pool2d_matches_torch(k, s, p, ceil, count_include_pad):
  check([(2, 2, 7, 6)], lambda x: F.avg_pool2d(x, k, s, p, ceil_mode=ceil, count_include_pad=count_include_pad),
        lambda x: x.avg_pool2d(k, s, p, ceil_mode=ceil, count_include_pad=count_include_pad))

def test_pool_1d_3d_dilation_and_divisor_match_torch():
  check([(2, 3, 9)], lambda x: F.max_pool1d(x, 3, 2, 1, ceil_mode=True), lambda x: x.max_pool1d(3, 2, 1, 1, ceil_mode=True))
  check([(2, 3, 9)], lambda x: F.avg_pool1d(x, 4, 3, 2, ceil_mode=True, count_include_pad=False),
        lambda x: x.avg_pool1d(4, 3, 2, ceil_mode=True, count_include_pad=False))
  check([(1, 2, 5, 4, 5)], lambda x: F.max_pool3d(x, 2, ceil_mode=True), lambda x: x.max_pool3d(2, ceil_mode=True))
  check([(1, 2, 5, 4, 5)], lambda x: F.avg_pool3d(x, 3, 2, 1), lambda x: x.avg_pool3d(3, 2, 1))
  check([(1, 2, 8, 8)], lambda x: F.max_pool2d(x, 3, 2, 1, dilation=2), lambda x: x.max_pool2d(3, 2, 2, 1))
  check([(1, 2, 6, 6)], lambda x: F.avg_pool2d(x, 3, 2, 1, divisor_override=4), lambda x: x.avg_pool2d(3, 2, 1, divisor_override=4))

def test_pool_dtypes_and_size_one():
  check([(1, 2, 5, 5)], lambda x: F.max_pool2d(x, 2, ceil_mode=True), lambda x: x.max_pool2d(2, ceil_mode=True), dtype="float16")
  check([(1, 2, 5, 5)], lambda x: F.avg_pool2d(x, 2), lambda x: x.avg_pool2d(2), dtype="float16")
  check([(1, 2, 5, 5)], lambda x: F.max_pool2d(x, 2), lambda x: x.max_pool2d(2), dtype="int32", low=-9, high=9)
  check([(0, 1, 1, 1)], lambda x: F.max_pool2d(x, 1), lambda x: x.max_pool2d(1))

def test_max_pool_return_indices_and_unpool_match_torch():
  check([(2, 2, 7, 6)], lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True, return_indices=True),
        lambda x: x.max_pool2d(3, 2, 1, 1, ceil_mode=True, return_indices=True))
  check([(2, 2, 6, 6)], lambda x: F.max_unpool2d(*F.max_pool2d(x, 2, return_indices=True), 2),
        lambda x: Tensor.max_unpool2d(*x.max_pool2d(2, return_indices=True), 2))
  # overlapping windows: one input can be the max of two windows
  check([(1, 2, 7, 7)], lambda x: F.max_unpool2d(*F.max_pool2d(x, 3, 2, return_indices=True), 3, 2),
        lambda x: Tensor.max_unpool2d(*x.max_pool2d(3, 2, return_indices=True), 3, 2))
  check([(1, 2, 8)], lambda x: F.max_unpool1d(*F.max_pool1d(x, 2, return_indices=True), 2, output_size=(9,)),
        lambda x: Tensor.max_unpool2d(*x.max_pool1d(2, return_indices=True), (2,), output_size=(9,)))

def test_pool_errors_match_torch():
  raises_like_torch(RuntimeError, lambda: F.max_pool2d(torch.zeros(1, 1, 4, 4), 2, padding=2),
                    lambda: Tensor.zeros(1, 1, 4, 4).max_pool2d(2, padding=2))
  raises_like_torch(RuntimeError, lambda: F.avg_pool2d(torch.zeros(1, 1, 2, 2), 3),
                    lambda: Tensor.zeros(1, 1, 2, 2).avg_pool2d(3))

def test_pool_kernel_counts():
  x = Tensor.rand(2, 3, 16, 16).realize()
  assert kernels(x.max_pool2d(3, 2, 1, 1, ceil_mode=True)) == 1
  assert kernels(x.avg_pool2d(3, 2, 1, ceil_mode=True, count_include_pad=False)) == 1
  assert kernels(*x.max_pool2d(2, return_indices=True)) == 2

# ---- interpolate ----

# NOTE: 14 -> 20 is where float32 source indices differ from exact ones (torch's float32 rule must be followed)
INTERP = [("nearest", 2, dict(size=(7, 5))), ("nearest", 1, dict(size=20)), ("nearest", 2, dict(scale_factor=0.7)),
          ("nearest-exact", 2, dict(scale_factor=1.5)), ("nearest-exact", 1, dict(size=13)), ("linear", 1, dict(size=13)),
          ("bilinear", 2, dict(scale_factor=0.5)), ("bilinear", 2, dict(size=(20, 3))),
          # NOTE: 25 s of compiling at SPEC=2 (CUT + bounds proofs); the OpInfo trilinear case is in the default suite
          pytest.param("trilinear", 3, dict(scale_factor=2.0), marks=pytest.mark.slow)]

@pytest.mark.parametrize("mode,nd,kw", INTERP)
def test_interpolate_matches_torch(mode, nd, kw):
  sp = (14, 6, 5)[:nd]
  check([(2, 2, *sp)], lambda x: F.interpolate(x, mode=mode, **kw), lambda x: x.interpolate(mode=mode, **kw), rtol=1e-4)

@pytest.mark.parametrize("mode,kw", [("linear", dict(size=9)), ("linear", dict(scale_factor=2.0)), ("linear", dict(size=4))])
def test_interpolate_align_corners_matches_torch(mode, kw):
  check([(2, 2, 6)], lambda x: F.interpolate(x, mode=mode, align_corners=True, **kw),
        lambda x: x.interpolate(mode=mode, align_corners=True, **kw), rtol=1e-4)

def test_interpolate_dtypes_and_recompute_scale():
  check([(1, 2, 5, 4)], lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"),
        lambda x: x.interpolate(scale_factor=2, mode="bilinear"), dtype="float16")
  check([(1, 2, 5, 4)], lambda x: F.interpolate(x, scale_factor=3), lambda x: x.interpolate(scale_factor=3), dtype="uint8",
        low=0, high=9)
  check([(1, 2, 7)], lambda x: F.interpolate(x, scale_factor=1.7, mode="linear", recompute_scale_factor=True),
        lambda x: x.interpolate(scale_factor=1.7, mode="linear", recompute_scale_factor=True), rtol=1e-4)
  check([(0, 2, 3)], lambda x: F.interpolate(x, size=5), lambda x: x.interpolate(size=5))

def test_interpolate_errors_match_torch():
  x, t = Tensor.zeros(1, 1, 4, 4), torch.zeros(1, 1, 4, 4)
  raises_like_torch(ValueError, lambda: F.interpolate(t, size=2, align_corners=True), lambda: x.interpolate(size=2, align_corners=True))
  raises_like_torch(NotImplementedError, lambda: F.interpolate(t, size=2, mode="trilinear"),
                    lambda: x.interpolate(size=2, mode="trilinear"))
  raises_like_torch(ValueError, lambda: F.interpolate(t), lambda: x.interpolate())

def test_interpolate_kernel_counts():
  x = Tensor.rand(2, 3, 16, 16).realize()
  # integer and 2x scales are strided views: one elementwise kernel, as a conv2d is one kernel
  assert kernels(x.interpolate(scale_factor=2)) == 1
  assert kernels(x.interpolate(scale_factor=2, mode="bilinear")) == 1
  assert kernels(x.interpolate(scale_factor=0.5, mode="bilinear")) == 1
  # other ratios: a weight matrix per axis, one reduce kernel each
  assert kernels(x.interpolate(size=(20, 13), mode="bilinear")) == 2

# ---- scaled_dot_product_attention ----

Q, K, V = (2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 5)

def _sdpa(**kw): return (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **kw),
                         lambda q, k, v: q.scaled_dot_product_attention(k, v, **kw))

@pytest.mark.parametrize("kw", [{}, {"is_causal": True}, {"scale": 0.3}], ids=["plain", "causal", "scale"])
def test_sdpa_matches_torch(kw):
  check([Q, K, V], *_sdpa(**kw))

def test_sdpa_masks_match_torch():
  check([Q, K, V, (4, 6)], lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
        lambda q, k, v, m: q.scaled_dot_product_attention(k, v, attn_mask=m))
  m = np.random.default_rng(2).random((4, 6)) > 0.5
  m[1] = False  # a row with nothing kept: zeros, as torch
  check([Q, K, V], lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=torch.tensor(m)),
        lambda q, k, v: q.scaled_dot_product_attention(k, v, attn_mask=Tensor(m)))

def test_sdpa_gqa_and_half_match_torch():
  check([(2, 4, 4, 8), (2, 2, 6, 8), (2, 2, 6, 5)], *_sdpa(enable_gqa=True))
  check([(1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4)], *_sdpa(is_causal=True), dtype="float16")

def test_sdpa_dropout_drops_and_rescales():
  Tensor.manual_seed(0)
  q = Tensor.ones(1, 1, 64, 4)
  assert (q.scaled_dot_product_attention(q, q, dropout_p=1.0).numpy() == 0).all()
  out = q.scaled_dot_product_attention(q, Tensor.ones(1, 1, 64, 4), dropout_p=0.5).numpy()
  # each output is 2 * (the kept share of uniform weights): mean 1, and not all equal
  assert abs(out.mean() - 1.0) < 0.1 and out.std() > 0.05

# NOTE: the path by blocks of query rows (Tensor._sdpa_by_rows) at test sizes: from 8 rows and keys on, blocks of 4
# rows below 16 and 8 from 16 on, so the shapes below have a short last block
@pytest.fixture
def rows_path(monkeypatch):
  import tinygrad.tensor as tt
  monkeypatch.setattr(tt, "SDPA_ROWS_MIN", 8)
  monkeypatch.setattr(tt, "SDPA_ROWS_BLOCK", 8)

@pytest.mark.parametrize("shapes", [((2, 3, 19, 8), (2, 3, 19, 8), (2, 3, 19, 5)),
                                    ((1, 2, 13, 4), (1, 2, 21, 4), (1, 2, 21, 6)),
                                    ((1, 2, 21, 4), (1, 2, 13, 4), (1, 2, 13, 6))], ids=["square", "wide", "tall"])
@pytest.mark.parametrize("kw", [{}, {"is_causal": True}, {"scale": 0.3}], ids=["plain", "causal", "scale"])
def test_sdpa_by_rows_matches_torch(rows_path, shapes, kw):
  check(list(shapes), *_sdpa(**kw))

def test_sdpa_by_rows_masks_match_torch(rows_path):
  check([(2, 3, 19, 8), (2, 3, 17, 8), (2, 3, 17, 5), (19, 17)],
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
        lambda q, k, v, m: q.scaled_dot_product_attention(k, v, attn_mask=m))
  check([(2, 3, 19, 8), (2, 3, 17, 8), (2, 3, 17, 5), (2, 1, 1, 17)],
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
        lambda q, k, v, m: q.scaled_dot_product_attention(k, v, attn_mask=m))
  m = np.random.default_rng(2).random((19, 17)) > 0.5
  m[9] = False  # a row with nothing kept: zeros, as torch, and no nan in the gradients
  check([(2, 3, 19, 8), (2, 3, 17, 8), (2, 3, 17, 5)],
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=torch.tensor(m)),
        lambda q, k, v: q.scaled_dot_product_attention(k, v, attn_mask=Tensor(m)))
  check([(1, 2, 16, 4), (1, 2, 16, 4), (1, 2, 16, 4)], *_sdpa(is_causal=True), dtype="float16")

@pytest.mark.parametrize("dev", ["C", "LLVM", "PYTHON"])
def test_sdpa_by_rows_on_every_cpu_path_under_spec2(rows_path, dev):
  """Forward and gradients of the causal path by rows (a fully masked row in a bool mask's) against torch, under SPEC=2
  on the C and LLVM paths and interpreted on PYTHON."""
  from tinygrad.helpers import Context
  from tests.llvm_device import llvm_cpu_device, c_cpu_device
  device = {"C": c_cpu_device, "LLVM": llvm_cpu_device}.get(dev, lambda: "PYTHON")()
  rng = np.random.default_rng(5)
  qn, kn, vn, gn = (rng.standard_normal((1, 2, 17, 4)).astype(np.float32) for _ in range(4))
  keep = np.tril(np.ones((17, 17), bool))
  keep[3] = False
  for kw, tkw in (({"is_causal": True}, {"is_causal": True}), ({"attn_mask": Tensor(keep, device=device)},
                                                               {"attn_mask": torch.tensor(keep)})):
    tq, tk, tv = (torch.tensor(x, requires_grad=True) for x in (qn, kn, vn))
    ref = F.scaled_dot_product_attention(tq, tk, tv, **tkw)
    ref = torch.nan_to_num(ref, 0.0)  # torch's masked row may be nan; ours is zeros
    (ref * torch.tensor(gn)).sum().backward()
    with Context(SPEC=2):
      q, k, v = (Tensor(x, device=device, requires_grad=True) for x in (qn, kn, vn))
      out = q.scaled_dot_product_attention(k, v, **kw)
      (out * Tensor(gn, device=device)).sum().backward()
      np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), atol=1e-5, rtol=1e-4)
      for ours, theirs in ((q, tq), (k, tk), (v, tv)):
        assert ours.grad is not None and theirs.grad is not None
        np.testing.assert_allclose(ours.grad.numpy(), torch.nan_to_num(theirs.grad, 0.0).numpy(), atol=1e-4, rtol=1e-3)

def _largest_buffer(*ts: Tensor) -> int:
  from tinygrad.engine.schedule import create_schedule
  from tinygrad.uop.ops import UOp
  sched = create_schedule(UOp.sink(*(t.uop for t in ts)))
  return max(b.size for si in sched for b in si.bufs)

def test_sdpa_by_rows_never_holds_the_whole_score_matrix(monkeypatch):
  """A block's scores cover its rows only, and the backward recomputes them: no buffer of a head's L x S scores (nor
  the probabilities, nor their gradient) in the forward or in the step with its gradients; the whole-matrix path has
  them."""
  rng = np.random.default_rng(0)
  def step(rows: bool):
    import tinygrad.tensor as tt
    monkeypatch.setattr(tt, "SDPA_ROWS_MIN", 8 if rows else 1 << 30)
    monkeypatch.setattr(tt, "SDPA_ROWS_BLOCK", 8)
    q, k, v = (Tensor(rng.standard_normal((1, 2, 64, 4)).astype(np.float32), requires_grad=True) for _ in range(3))
    o = q.scaled_dot_product_attention(k, v, is_causal=True)
    fwd = _largest_buffer(o)
    o.square().sum().backward()
    return fwd, _largest_buffer(o, *(t.grad for t in (q, k, v)))
  whole = 2 * 64 * 64
  assert step(False) >= (whole, whole)
  fwd, both = step(True)
  assert fwd < whole // 4 and both < whole // 4, (fwd, both)

def test_sdpa_errors_match_torch():
  q, t = Tensor.zeros(1, 2, 4), torch.zeros(1, 2, 4)
  raises_like_torch(RuntimeError, lambda: F.scaled_dot_product_attention(t, t, t, attn_mask=torch.ones(2, 2, dtype=torch.bool),
                                                                        is_causal=True),
                    lambda: q.scaled_dot_product_attention(q, q, attn_mask=Tensor.ones(2, 2).bool(), is_causal=True))
  raises_like_torch(RuntimeError, lambda: F.scaled_dot_product_attention(t, torch.zeros(1, 2, 5), t),
                    lambda: q.scaled_dot_product_attention(Tensor.zeros(1, 2, 5), q))

# ---- einsum ----

EINSUMS = [("ij,jk->ik", [(3, 4), (4, 5)]), ("ij,jk", [(3, 4), (4, 5)]), ("ii->i", [(3, 3)]), ("ii", [(3, 3)]),
           ("i,i", [(3,), (3,)]), ("ba", [(2, 3)]), ("...a,b...->...ab", [(2, 3), (4, 2)]), ("...ij->ij", [(2, 3, 4)]),
           ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("ij,j->i", [(3, 4), (1,)]), ("i,j,k->ijk", [(2,), (3,), (4,)]),
           ("ab,bc,cd->ad", [(2, 3), (3, 4), (4, 5)]), ("iij->j", [(3, 3, 4)]), ("iji->j", [(3, 4, 3)]),
           ("b h q d, b h k d -> b h q k", [(2, 3, 4, 5), (2, 3, 6, 5)]), ("i->", [(4,)]), (",->", [(), ()]),
           ("i,->i", [(3,), ()]), ("ij->", [(0, 3)]), ("Ab,bC->CA", [(2, 3), (3, 4)])]

@pytest.mark.parametrize("eq,shapes", EINSUMS, ids=[e[0] for e in EINSUMS])
def test_einsum_matches_torch(eq, shapes):
  check(shapes, lambda *a: torch.einsum(eq, *a), lambda *a: Tensor.einsum(eq, *a), atol=1e-5, rtol=1e-5)

@pytest.mark.parametrize("dtype", ["float16", "int32"])
def test_einsum_dtypes_match_torch(dtype):
  check([(3, 4), (4, 5)], lambda a, b: torch.einsum("ij,jk->ik", a, b), lambda a, b: Tensor.einsum("ij,jk->ik", a, b),
        dtype=dtype, low=-4, high=4, atol=2e-2, rtol=1e-2)

BAD_EINSUMS = [("ij,jk->ik", [(2, 3), (4, 5)], "size"), ("ij->ijk", [(2, 3)], "does not appear"), ("ijk", [(2, 3)], "dims"),
               ("ij,jk", [(2, 3)], "operands"), ("i1", [(2, 3)], "invalid subscript"), ("ij->ii", [(2, 3)], "more than once"),
               ("ii", [(2, 3)], "repeated")]

@pytest.mark.parametrize("eq,shapes,msg", BAD_EINSUMS, ids=[b[0] + b[2] for b in BAD_EINSUMS])
def test_einsum_errors_match_torch(eq, shapes, msg):
  raises_like_torch(RuntimeError, lambda: torch.einsum(eq, *[torch.zeros(s) for s in shapes]),
                    lambda: Tensor.einsum(eq, *[Tensor.zeros(*s) for s in shapes]))
  with pytest.raises(RuntimeError, match=msg): Tensor.einsum(eq, *[Tensor.zeros(*s) for s in shapes])

def test_einsum_matmul_is_one_kernel():
  a, b = Tensor.rand(8, 16).realize(), Tensor.rand(16, 4).realize()
  assert kernels(Tensor.einsum("ij,jk->ik", a, b)) == 1

# ---- statistics, init ----

def test_std_mean_var_mean_match_torch():
  check([(3, 4)], lambda x: torch.std_mean(x, 1), lambda x: x.std_mean(1))
  check([(3, 4)], lambda x: torch.var_mean(x, 0, correction=0, keepdim=True), lambda x: x.var_mean(0, True, 0))
  check([(2, 3)], lambda x: torch.var_mean(x), lambda x: x.var_mean())

@pytest.mark.parametrize("shape", [(64, 32), (16, 8, 3, 3)])
def test_init_helpers_follow_torch_fans(shape):
  Tensor.manual_seed(1)
  fan_in, fan_out = shape[1] * math.prod(shape[2:]), shape[0] * math.prod(shape[2:])
  g = Tensor.glorot_uniform(*shape).numpy()
  bound = math.sqrt(6 / (fan_in + fan_out))
  assert g.shape == shape and np.abs(g).max() <= bound and np.abs(g).max() > 0.9 * bound
  xn = Tensor.xavier_normal(*shape, gain=2.0).numpy()
  assert abs(xn.std() / (2.0 * math.sqrt(2 / (fan_in + fan_out))) - 1) < 0.1
  kn = Tensor.kaiming_normal(*shape, a=0.0, mode="fan_out", nonlinearity="relu").numpy()
  assert abs(kn.std() / math.sqrt(2 / fan_out) - 1) < 0.1
  ku = Tensor.xavier_uniform(*shape, gain=0.5).numpy()
  assert np.abs(ku).max() <= 0.5 * bound

def test_init_helpers_need_two_dims():
  with pytest.raises(ValueError, match="fan"): Tensor.glorot_uniform(5)
  with pytest.raises(ValueError, match="nonlinearity"): Tensor.kaiming_normal(3, 3, nonlinearity="swish")

def test_einsum_sublist_form_matches_torch():
  check([(3, 4), (4, 5)], lambda a, b: torch.einsum(a, [0, 1], b, [1, 2], [0, 2]),
        lambda a, b: Tensor.einsum(a, [0, 1], b, [1, 2], [0, 2]))
  check([(2, 3, 4)], lambda a: torch.einsum(a, [Ellipsis, 30, 3]), lambda a: Tensor.einsum(a, [Ellipsis, 30, 3]))

# ---- regressions found by torch's OpInfo samples (tests/ops/opinfo/nn.py) ----

def test_pool_and_conv_one_tuple_padding_pads_every_axis():
  # torch reads padding=(p,) as p on every spatial axis
  check([(1, 2, 5, 5)], lambda x: F.avg_pool2d(x, (3, 3), 1, (1,)), lambda x: x.avg_pool2d((3, 3), 1, (1,)))
  check([(1, 2, 5, 5)], lambda x: F.max_pool2d(x, (3, 3), 1, (1,)), lambda x: x.max_pool2d((3, 3), 1, padding=(1,)))
  check([(1, 2, 5, 5), (3, 2, 3, 3)], lambda x, w: F.conv2d(x, w, padding=(1,)), lambda x, w: x.conv2d(w, padding=(1,)))

def test_half_conv_sums_exact_products():
  # inputs in [-9, 9] (torch's sample range): each half product rounded alone is off by up to 0.03; torch (and tensor
  # cores) multiply in float32 and round the sum once
  check([(2, 4, 6, 6), (8, 1, 3, 3)], lambda x, w: F.conv2d(x, w, groups=4), lambda x, w: x.conv2d(w, groups=4),
        dtype="float16", low=-9, high=9, grad=False)

def test_half_sdpa_matches_torch_at_large_scores():
  check([(4, 4, 3, 8), (4, 4, 6, 8), (4, 4, 6, 8)], *_sdpa(), dtype="float16", low=-9, high=9, grad=False)

def test_dropout_p_one_zeroes_and_bad_p_raises():
  x = Tensor([1.0, float("nan"), -2.0])
  with Tensor.train():
    got = x.dropout(1.0).numpy()
    assert np.array_equal(got[[0, 2]], [0.0, 0.0]) and np.isnan(got[1])  # input * 0, as torch (NaN stays NaN)
    assert x.dropout(0.0).numpy()[0] == 1.0
    for p in (-0.1, 1.5):
      with pytest.raises(ValueError, match="between 0 and 1"): x.dropout(p)

def test_group_norm_empty_batch():
  from tinygrad import nn
  out = nn.GroupNorm(1, 2)(Tensor.zeros(0, 2))
  assert out.shape == (0, 2) and out.numpy().shape == (0, 2)

# ---- max_pool2d's gradient rule: gathered at each input position ----

def _windows_max(x: Tensor, k: tuple[int, ...], s: tuple[int, ...], d: tuple[int, ...],
                 pads: list[tuple[int, int]]) -> Tensor:
  """max_pool2d's values (the max over the padded windows) without its gradient rule: autograd through the windows.
  NOTE: padded with the least float, not -inf: the same graph as max_pool2d's would be the same node, which carries
  its rule"""
  n = len(k)
  return x.pad([(0, 0)] * (x.ndim - n) + pads, value=-3.0e38)._pool(k, s, d).max(tuple(range(-n, 0)))

@pytest.mark.parametrize("shape,k,s,d,pad,ceil", [
  ((2, 3, 9, 9), (3, 3), (2, 2), (1, 1), 1, False), ((1, 2, 8, 7), (2, 3), (2, 1), (1, 1), 0, False),
  ((1, 2, 10, 11), (3, 3), (2, 3), (2, 1), (1, 0), False), ((2, 2, 11), (3,), (2,), (1,), 1, True),
  ((1, 1, 5, 6, 7), (2, 2, 3), (1, 2, 2), (1, 1, 1), 1, False), ((1, 2, 6, 6), (2, 2), (3, 3), (1, 1), 0, False),
  ((1, 2, 9, 9), (3, 3), (2, 2), (1, 1), 1, True),
])
def test_max_pool_gradient_rule_matches_autograd_through_the_windows(shape, k, s, d, pad, ceil):
  # ties (values from 4 levels, relu'd zeros) share a window's gradient equally, as the max reduce's rule does; a nan
  # takes it where its window's maximum is nan; ceil_mode's extra windows, dilation, 1-d and 3-d, stride over kernel
  rng = np.random.default_rng(11)
  x = np.maximum(rng.integers(-2, 2, shape), 0).astype(np.float32)
  x.flat[5] = np.nan
  n = len(k)
  xt = Tensor(x, requires_grad=True)
  out = xt.max_pool2d(k, s, d, pad, ceil_mode=ceil)
  up = Tensor(rng.standard_normal(out.shape).astype(np.float32))
  (ours,) = out.gradient(xt, gradient=up)
  pairs = Tensor._pool_pairs(pad, n, "max_pool2d")
  _, full = xt._pool_geometry(k, s, d, pairs, ceil, "max_pool2d")
  (ref,) = _windows_max(xt, k, s, d, full).gradient(xt, gradient=up)
  np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-6, atol=1e-6)

def test_max_pool_gradient_matches_torch_without_ties():
  rng = np.random.default_rng(12)
  x = rng.standard_normal((2, 3, 17, 16)).astype(np.float32)
  tx = torch.tensor(x, requires_grad=True)
  tout = F.max_pool2d(tx, 3, 2, 1)
  up = rng.standard_normal(tout.shape).astype(np.float32)
  tout.backward(torch.tensor(up))
  xt = Tensor(x, requires_grad=True)
  (xt.max_pool2d(3, 2, padding=1) * Tensor(up)).sum().backward()
  assert xt.grad is not None and tx.grad is not None
  np.testing.assert_allclose(xt.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-6)
