"""Edge semantics a torch user meets, each against torch 2.13: stack/cat of a list, reshape with None, interpolate of
int tensors, sigmoid and friends at +-1000 (values and gradients), 0.0 ** negative, cat of 0-d tensors, replicate and
circular padding up to torch's limits, batchnorm over several axes; and the torch method names a torch user calls
(aliases and small compositions), each compared with torch's."""
import math
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from tinygrad import Tensor, dtypes
from tests.ops.helpers import check_op

def _eq(ours, ref, atol=1e-6, what=""):
  ref = ref.detach()
  assert ours.shape == tuple(ref.shape), f"{what}: shape {ours.shape}, torch {tuple(ref.shape)}"
  np.testing.assert_allclose(ours.numpy().astype(np.float64), ref.double().numpy(), atol=atol, rtol=1e-6, equal_nan=True,
                             err_msg=what)

def test_stack_and_cat_take_a_list_or_tuple():
  a, b = np.arange(6, dtype=np.float32).reshape(2, 3), np.ones((2, 3), np.float32)
  ta, tb, ra, rb = Tensor(a), Tensor(b), torch.tensor(a), torch.tensor(b)
  _eq(Tensor.stack([ta, tb], dim=1), torch.stack([ra, rb], dim=1), what="stack(list)")
  _eq(Tensor.stack((ta, tb)), torch.stack((ra, rb)), what="stack(tuple)")
  _eq(Tensor.cat([ta, tb], dim=1), torch.cat([ra, rb], dim=1), what="cat(list)")
  _eq(Tensor.cat((ta, tb, ta)), torch.cat((ra, rb, ra)), what="cat(tuple)")
  _eq(ta.cat(tb, dim=-1), torch.cat([ra, rb], dim=-1), what="a.cat(b)")
  _eq(ta.stack(tb, ta, dim=-1), torch.stack([ra, rb, ra], dim=-1), what="a.stack(b, a)")
  _eq(Tensor.stack(ta, tb, dim=1), torch.stack([ra, rb], dim=1), what="Tensor.stack(a, b)")
  _eq(Tensor.cat([Tensor([1, 2])], dim=0), torch.cat([torch.tensor([1, 2])], dim=0), what="cat of one")
  for bad in (lambda L: L.cat([]), lambda L: L.stack([])):
    with pytest.raises(Exception) as ref: bad(torch)
    with pytest.raises(ref.type): bad(Tensor)
  with pytest.raises(RuntimeError, match="0-d tensors cannot be concatenated"): Tensor.cat([Tensor(1.0), Tensor(2.0)])
  with pytest.raises(RuntimeError): torch.cat([torch.tensor(1.0), torch.tensor(2.0)])

def test_reshape_with_none_keeps_that_size():
  t = Tensor.arange(24).reshape(2, 3, 4)
  assert t.reshape(None, 12).shape == (2, 12) and t.reshape(None, -1, 2).shape == (2, 6, 2)
  assert t.reshape(None, None, 4).shape == (2, 3, 4) and t.reshape((None, 3, 2, 2)).shape == (2, 3, 2, 2)
  np.testing.assert_array_equal(t.reshape(None, 12).numpy(), np.arange(24).reshape(2, 12))
  with pytest.raises(RuntimeError, match="a None keeps the size"): t.reshape(6, 2, 2, None)

@pytest.mark.parametrize("mode,size,kw", [("bilinear", (3, 5), {}), ("bilinear", (5, 3), {"align_corners": True}),
                                          ("nearest", (5, 3), {}), ("nearest-exact", (3, 7), {})])
def test_interpolate_uint8_computes_in_float_and_rounds_as_torch(mode, size, kw):
  x = np.random.default_rng(0).integers(0, 256, size=(2, 3, 4, 4)).astype(np.uint8)
  ours = Tensor(x).interpolate(size=size, mode=mode, **kw)
  ref = F.interpolate(torch.tensor(x), size=size, mode=mode, **kw)
  assert ours.dtype is dtypes.uint8
  # NOTE: torch's uint8 bilinear rounds each pass in fixed point; where the exact value is within its weights'
  # rounding of a half, ours may land one off
  diff = np.abs(ours.numpy().astype(int) - ref.numpy().astype(int))
  assert diff.max() <= 1 and (diff > 0).mean() < 0.07, f"{(diff > 0).sum()} of {diff.size} values differ"

def test_interpolate_other_int_dtypes_follow_the_float_result():
  # torch has no int32 kernels; the reference is its float result rounded half away from zero
  x = np.array([[[-7, 0, 3, 10, -2]]], dtype=np.int32)
  ref = F.interpolate(torch.tensor(x, dtype=torch.float64), size=8, mode="linear").numpy()
  want = np.sign(ref) * np.floor(np.abs(ref) + 0.5)
  got = Tensor(x).interpolate(size=8, mode="linear")
  assert got.dtype is dtypes.int32
  np.testing.assert_array_equal(got.numpy(), want.astype(np.int32))

EXTREME = ["sigmoid", "logsigmoid", "softplus", "tanh", "silu", "gelu", "mish", "elu", "celu", "selu", "hardswish",
           "hardsigmoid", "softsign", "relu6", "hardtanh", "leaky_relu", "erf", "atan"]
TORCH_NAME = {"logsigmoid": F.logsigmoid, "softplus": F.softplus, "silu": F.silu, "gelu": lambda x: F.gelu(x, approximate="tanh"),
              "mish": F.mish, "elu": F.elu, "celu": F.celu, "selu": F.selu, "hardswish": F.hardswish,
              "hardsigmoid": F.hardsigmoid, "softsign": F.softsign, "relu6": F.relu6, "hardtanh": F.hardtanh,
              "leaky_relu": F.leaky_relu}

@pytest.mark.parametrize("name", EXTREME)
def test_activations_at_extreme_inputs_have_no_nan(name):
  vals = [[-1000.0, -100.0, -30.0, 0.0, 30.0, 100.0, 1000.0]]
  ref = TORCH_NAME[name] if name in TORCH_NAME else getattr(torch, name)
  check_op(None, ref, lambda x: getattr(x, name)(), vals=vals,
           atol=1e-6, grad_atol=1e-6)

@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_activations_at_extreme_inputs_in_16_bit_floats_have_no_nan(dt):
  tdt = {"float16": torch.float16, "bfloat16": torch.bfloat16}[dt]
  for name in ("sigmoid", "softplus", "tanh", "gelu", "mish"):
    x = Tensor([-1000.0, -100.0, 0.0, 100.0, 1000.0], dtype=getattr(dtypes, dt), requires_grad=True)
    y = getattr(x, name)()
    g = y.gradient(x, gradient=Tensor.ones(5, dtype=y.dtype))[0]
    r = torch.tensor([-1000.0, -100.0, 0.0, 100.0, 1000.0], dtype=tdt, requires_grad=True)
    ry = TORCH_NAME[name](r) if name in TORCH_NAME else getattr(torch, name)(r)
    ry.sum().backward()
    assert not np.isnan(y.float().numpy()).any() and not np.isnan(g.float().numpy()).any(), name
    np.testing.assert_allclose(y.float().numpy(), ry.float().detach().numpy(), atol=2e-2, rtol=2e-2, err_msg=name)
    np.testing.assert_allclose(g.float().numpy(), r.grad.float().numpy(), atol=2e-2, rtol=2e-2, err_msg=name)

def test_zero_to_negative_powers_is_inf_as_torch():
  for base in ([0.0, -0.0, 2.0], [0.0]):
    for e in (-1, -2, -0.5, -1.5, -3.0):
      _eq(Tensor(base) ** e, torch.tensor(base) ** e, what=f"{base} ** {e}")
      _eq(e ** Tensor([0.0, 2.0]), e ** torch.tensor([0.0, 2.0]), what=f"{e} ** tensor")
  _eq(0.0 ** Tensor([-1.0, 0.0, 2.0]), 0.0 ** torch.tensor([-1.0, 0.0, 2.0]), what="0.0 ** tensor")
  _eq(Tensor([0.0]).pow(Tensor([-2.0])), torch.tensor([0.0]).pow(torch.tensor([-2.0])), what="pow(tensor, tensor)")

@pytest.mark.parametrize("mode,pads", [("replicate", (4, 4)), ("replicate", (0, 7, 5, 1)), ("replicate", (-1, 5)),
                                       ("circular", (3, 3)), ("circular", (2, 3, 1, 2)), ("circular", (-1, 2)),
                                       ("reflect", (2, 1, 1, 0))])
def test_edge_padding_up_to_torchs_limits(mode, pads):
  x = np.arange(2 * 2 * 2 * 3, dtype=np.float32).reshape(2, 2, 2, 3) if len(pads) == 4 else \
    np.arange(2 * 2 * 3, dtype=np.float32).reshape(2, 2, 3)
  check_op(None, lambda a: F.pad(a, pads, mode=mode), lambda a: a.pad(pads, mode=mode), vals=[x])

def test_batchnorm_over_a_tuple_of_axes():
  x = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
  st = [np.random.default_rng(i).uniform(0.5, 1.5, (3, 5)).astype(np.float32) for i in range(4)]
  ours = Tensor(x).batchnorm(*(Tensor(s) for s in (st[0], st[1], st[2], st[3])), axis=(1, 3))
  r = [torch.tensor(s).reshape(1, 3, 1, 5) for s in st]
  _eq(ours, (torch.tensor(x) - r[2]) * r[3] * r[0] + r[1], atol=1e-5, what="batchnorm axis=(1, 3)")
  # one axis as before, as torch's batch_norm
  s1 = [Tensor(s[:, 0]) for s in st]
  ref = F.batch_norm(torch.tensor(x), torch.tensor(st[2][:, 0]), 1 / torch.tensor(st[3][:, 0]) ** 2, torch.tensor(st[0][:, 0]),
                     torch.tensor(st[1][:, 0]), eps=0.0)
  _eq(Tensor(x).batchnorm(s1[0], s1[1], s1[2], s1[3]), ref, atol=1e-5, what="batchnorm axis=1")

A = np.random.default_rng(3).uniform(-3, 3, (3, 4)).astype(np.float32)
B = np.random.default_rng(4).uniform(0.5, 3, (3, 4)).astype(np.float32)
# (name, torch call, our call or None for the same spelling)
NAMES = [
  ("absolute", lambda a, b: a.absolute()), ("negative", lambda a, b: a.negative()), ("positive", lambda a, b: a.positive()),
  ("multiply", lambda a, b: a.multiply(b)), ("subtract", lambda a, b: a.subtract(b, alpha=2)),
  ("divide", lambda a, b: a.divide(b, rounding_mode="floor")), ("true_divide", lambda a, b: a.true_divide(b)),
  ("floor_divide", lambda a, b: a.floor_divide(b)), ("remainder", lambda a, b: a.remainder(-b)),
  ("fmod", lambda a, b: a.fmod(-b)), ("greater", lambda a, b: a.greater(b)), ("greater_equal", lambda a, b: a.greater_equal(b)),
  ("less", lambda a, b: a.less(b)), ("less_equal", lambda a, b: a.less_equal(b)), ("not_equal", lambda a, b: a.not_equal(b)),
  ("arcsin", lambda a, b: (a / 4).arcsin()), ("arccos", lambda a, b: (a / 4).arccos()), ("arctan", lambda a, b: a.arctan()),
  ("arcsinh", lambda a, b: a.arcsinh()), ("arccosh", lambda a, b: (b + 1).arccosh()), ("arctanh", lambda a, b: (a / 4).arctanh()),
  ("fix", lambda a, b: a.fix()), ("sgn", lambda a, b: a.sgn()), ("log10", lambda a, b: b.log10()),
  ("logaddexp2", lambda a, b: a.logaddexp2(b * 40)), ("frac", lambda a, b: a.frac()), ("deg2rad", lambda a, b: a.deg2rad()),
  ("rad2deg", lambda a, b: a.rad2deg()), ("hypot", lambda a, b: a.hypot(b)), ("atan2", lambda a, b: a.atan2(a.flip(0))),
  ("arctan2", lambda a, b: b.arctan2(a)), ("xlogy", lambda a, b: a.xlogy(b)), ("logit", lambda a, b: (b / 4).logit(eps=0.1)),
  ("sinc", lambda a, b: a.sinc()), ("heaviside", lambda a, b: a.heaviside(b)),
  ("float_power", lambda a, b: b.float_power(a)), ("addcmul", lambda a, b: a.addcmul(b, a, value=0.5)),
  ("addcdiv", lambda a, b: a.addcdiv(a, b, value=-2)), ("mm", lambda a, b: a.mm(b.T)), ("bmm", lambda a, b: a[None].bmm(b.T[None])),
  ("mv", lambda a, b: a.mv(b[0])), ("inner", lambda a, b: a.inner(b)), ("addmm", lambda a, b: b[:, :3].addmm(a, b.T, beta=0.5, alpha=2)),
  ("t", lambda a, b: a.t()), ("mT", lambda a, b: a[None].mT), ("swapaxes", lambda a, b: a.swapaxes(0, 1)),
  ("swapdims", lambda a, b: a[None].swapdims(0, 2)), ("movedim", lambda a, b: a.reshape(3, 2, 2).movedim(0, -1)),
  ("moveaxis", lambda a, b: a.reshape(3, 2, 2).moveaxis((0, 1), (2, 0))), ("ravel", lambda a, b: a.ravel()),
  ("tile", lambda a, b: a.tile((2,))), ("tile_2d", lambda a, b: a.tile((2, 1, 3))), ("narrow", lambda a, b: a.narrow(1, -3, 2)),
  ("select", lambda a, b: a.select(1, -1)), ("index_select", lambda a, b: a.index_select(1, b[0].long() if isinstance(b, torch.Tensor) else b[0].cast(dtypes.int32))),
  ("unbind", lambda a, b: a.unbind(1)), ("tensor_split", lambda a, b: a.tensor_split(3, dim=1)),
  ("tensor_split_idx", lambda a, b: a.tensor_split([1, -1, 9], dim=1)), ("fliplr", lambda a, b: a.fliplr()),
  ("flipud", lambda a, b: a.flipud()), ("rot90", lambda a, b: a.rot90()), ("rot90_k3", lambda a, b: a.rot90(3, (1, 0))),
  ("rot90_k2", lambda a, b: a.rot90(2)), ("diff", lambda a, b: a.diff()), ("diff_n2", lambda a, b: a.diff(n=2, dim=0, prepend=b[:1])),
  ("cross", lambda a, b: a.cross(b, dim=0)), ("norm", lambda a, b: a.norm()), ("norm_dim", lambda a, b: a.norm(dim=1, keepdim=True)),
  ("norm_p1", lambda a, b: a.norm(p=1, dim=0)), ("norm_inf", lambda a, b: a.norm(p=math.inf)), ("norm_p3", lambda a, b: a.norm(p=3)),
  ("dist", lambda a, b: a.dist(b, p=2)), ("reshape_as", lambda a, b: a.reshape_as(b.reshape(4, 3))),
  ("view_as", lambda a, b: a.view_as(b.reshape(12))), ("isposinf", lambda a, b: (a / (a > 0)).isposinf()),
  ("isneginf", lambda a, b: (a / (a > 0)).isneginf()),
]

@pytest.mark.parametrize("fn", [n[1] for n in NAMES], ids=[n[0] for n in NAMES])
def test_torch_method_names_match_torch(fn):
  ours, ref = fn(Tensor(A), Tensor(B)), fn(torch.tensor(A), torch.tensor(B))
  if isinstance(ref, tuple):
    assert len(ours) == len(ref)
    for k, (a, b) in enumerate(zip(ours, ref)): _eq(a, b, atol=1e-5, what=f"output {k}")
  else: _eq(ours, ref, atol=1e-5)

def test_atan2_signed_zeros_and_infinities_as_torch():
  v = [0.0, -0.0, 1.0, -1.0, math.inf, -math.inf]
  y, x = np.array([[a for a in v for _ in v]], np.float32), np.array([[b for _ in v for b in v]], np.float32)
  ours, ref = Tensor(y).atan2(Tensor(x)).numpy(), torch.tensor(y).atan2(torch.tensor(x)).numpy()
  np.testing.assert_allclose(ours, ref, atol=1e-6)
  np.testing.assert_array_equal(np.signbit(ours), np.signbit(ref))

def test_gradients_of_the_compositions_match_torch():
  check_op([(2, 3), (2, 3)], lambda a, b: a.hypot(b) + a.atan2(b) + a.cross(b, dim=1) * a.norm(dim=0, keepdim=True),
           low=0.3, high=2)

def test_host_predicates_and_constructors_match_torch():
  a, r = Tensor(A), torch.tensor(A)
  assert a.allclose(a + 1e-7) == r.allclose(r + 1e-7) is True and a.allclose(a + 1) == r.allclose(r + 1) is False
  assert a.equal(Tensor(A)) and not a.equal(a + 1) and not a.equal(a[:2]) and r.equal(torch.tensor(A))
  assert a.dim() == r.dim() == 2 and a.ndimension() == 2 and a.nelement() == r.nelement() == 12
  i = Tensor([1, 2])
  assert i.new_zeros(2, 3).dtype is dtypes.int32 and i.new_ones((2,)).shape == (2,) and i.new_empty(4).dtype is dtypes.int32
  np.testing.assert_array_equal(i.new_full((2, 2), 7).numpy(), torch.tensor([1, 2]).new_full((2, 2), 7).numpy())
  np.testing.assert_array_equal(i.new_tensor([3.7]).numpy(), torch.tensor([1, 2], dtype=torch.int32).new_tensor([3.7]).numpy())
  assert a.type_as(i).dtype is dtypes.int32 and a.cpu().device == "CPU" and np.array_equal(a.cpu().numpy(), A)
  with pytest.raises(RuntimeError): r.narrow(1, 3, 2)
  with pytest.raises(RuntimeError, match="narrow"): a.narrow(1, 3, 2)
  with pytest.raises(RuntimeError): torch.ones(2, 2, 2).t()
  with pytest.raises(RuntimeError, match="at most 2 dims"): Tensor.ones(2, 2, 2).t()

def test_tinygrad_spellings_and_conv_padding_strings_match_torch():
  x = np.random.default_rng(5).standard_normal((1, 2, 5, 6)).astype(np.float32)
  w = np.random.default_rng(6).standard_normal((3, 2, 3, 2)).astype(np.float32)
  for pad, kw in (("same", {}), ("same", {"dilation": (2, 1)}), ("valid", {"stride": 2})):
    _eq(Tensor(x).conv2d(Tensor(w), padding=pad, **kw), F.conv2d(torch.tensor(x), torch.tensor(w), padding=pad, **kw),
        atol=1e-5, what=f"conv2d padding={pad} {kw}")
  with pytest.raises(RuntimeError): F.conv2d(torch.tensor(x), torch.tensor(w), padding="same", stride=2)
  with pytest.raises(RuntimeError, match="needs stride 1"): Tensor(x).conv2d(Tensor(w), padding="same", stride=2)
  _eq(Tensor(x).pad2d((1, 2, -1, 0), value=3.0), F.pad(torch.tensor(x), (1, 2, -1, 0), value=3.0), what="pad2d")
  _eq(Tensor(A).leakyrelu(0.2), F.leaky_relu(torch.tensor(A), 0.2), what="leakyrelu")
  _eq(Tensor([[1, 2], [3, 4]]).sum(acc_dtype=dtypes.float32), torch.tensor([[1, 2], [3, 4]]).sum(dtype=torch.float32),
      what="sum(acc_dtype=)")
  assert Tensor([1, 2], dtype=dtypes.int8).prod(acc_dtype="int64").dtype is dtypes.int64
  with pytest.raises(RuntimeError): torch.linspace(5, 10, 3, dtype=torch.bool)
  with pytest.raises(RuntimeError, match="bool"): Tensor.linspace(5, 10, 3, dtype="bool")
