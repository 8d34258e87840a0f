"""Every tinygrad.nn layer against torch's layer of the same name, weights copied across: forward, gradients of the
inputs and of every parameter, float32 and (where torch users run it) float16; shapes and fan conventions of the
default initialisation; the errors torch raises for bad configurations."""
import math
import numpy as np
import pytest
import torch
from tinygrad import Tensor, dtypes, nn
from tinygrad.tensor import ArgumentError
from tinygrad.nn.state import get_state_dict
from tests.nn.torch_ref import check_layer, rand

# ---- Linear, Embedding ----

@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_linear_matches_torch(dtype):
  check_layer(nn.Linear(5, 3), torch.nn.Linear(5, 3), [rand(2, 4, 5)], dtype)

def test_linear_without_bias_matches_torch():
  lin = nn.Linear(4, 6, bias=False)
  assert lin.bias is None
  check_layer(lin, torch.nn.Linear(4, 6, bias=False), [rand(3, 4)])

def test_linear_wrong_input_size_is_a_clear_error():
  with pytest.raises(ValueError, match=r"last axis of the input \(2, 3\) must be 4"): nn.Linear(4, 2)(Tensor.ones(2, 3))

@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_embedding_matches_torch_with_weight_gradient(dtype):
  idx = np.array([[0, 3, 3, 6], [2, 1, 0, 6]], dtype=np.int32)
  check_layer(nn.Embedding(7, 5), torch.nn.Embedding(7, 5), [idx], dtype, int_inputs=(0,))

def test_embedding_padding_idx_row_is_zero_and_gets_no_gradient():
  emb = nn.Embedding(6, 3, padding_idx=-2)
  assert emb.padding_idx == 4
  np.testing.assert_array_equal(emb.weight.numpy()[4], 0)
  idx = np.array([[4, 1, 4, 0]], dtype=np.int32)
  check_layer(emb, torch.nn.Embedding(6, 3, padding_idx=4), [idx], int_inputs=(0,))

def test_embedding_rejects_float_indices():
  with pytest.raises(TypeError, match="indices must be an int tensor"): nn.Embedding(4, 2)(Tensor([1.0]))

# ---- convolutions ----

CONV_CASES = [  # (nsp, kwargs, input spatial)
  (1, dict(kernel_size=3, padding="same", dilation=2), (9,)),
  (1, dict(kernel_size=4, padding="same"), (7,)),     # even kernel: torch puts the odd pad element after
  (1, dict(kernel_size=3, stride=2, padding=1, groups=2, bias=False), (8,)),
  (2, dict(kernel_size=3, padding="valid", dilation=(1, 2)), (7, 8)),
  (2, dict(kernel_size=(2, 3), padding="same", dilation=(2, 1)), (6, 5)),
  (2, dict(kernel_size=3, stride=(2, 1), padding=(1, 0), groups=2), (7, 6)),
  (3, dict(kernel_size=2, padding="same"), (3, 4, 3)),
  (3, dict(kernel_size=(1, 2, 3), stride=2, padding=1), (4, 5, 5)),
]

@pytest.mark.parametrize("nsp,kw,spatial", CONV_CASES)
def test_conv_matches_torch(nsp, kw, spatial):
  ours = [nn.Conv1d, nn.Conv2d, nn.Conv3d][nsp - 1](4, 6, **kw)
  theirs = [torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d][nsp - 1](4, 6, **kw)
  out = check_layer(ours, theirs, [rand(2, 4, *spatial)])
  if kw.get("padding") == "same": assert out[0].shape[2:] == spatial

@pytest.mark.parametrize("mode,nsp,kw", [("reflect", 2, dict(padding=1)), ("replicate", 1, dict(padding="same")),
                                         ("circular", 2, dict(padding=(2, 1), stride=2)), ("reflect", 3, dict(padding=1))])
def test_conv_padding_modes_match_torch(mode, nsp, kw):
  ours = [nn.Conv1d, nn.Conv2d, nn.Conv3d][nsp - 1](2, 3, 3, padding_mode=mode, **kw)
  theirs = [torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d][nsp - 1](2, 3, 3, padding_mode=mode, **kw)
  check_layer(ours, theirs, [rand(2, 2, *([5] * nsp))])

def test_conv2d_float16_matches_torch():
  check_layer(nn.Conv2d(3, 4, 3, padding=1), torch.nn.Conv2d(3, 4, 3, padding=1), [rand(2, 3, 5, 5)], "float16")

def test_conv_unbatched_input_matches_torch():
  check_layer(nn.Conv1d(2, 3, 3, padding="same"), torch.nn.Conv1d(2, 3, 3, padding="same"), [rand(2, 6)])

def test_conv_bad_padding_is_a_clear_error():
  with pytest.raises(ValueError, match="invalid padding string 'full'"): nn.Conv2d(2, 2, 3, padding="full")
  with pytest.raises(ValueError, match="padding='same' is not supported for strided convolutions"):
    nn.Conv1d(2, 2, 3, stride=2, padding="same")
  with pytest.raises(ValueError, match="must divide by groups 3"): nn.Conv2d(4, 6, 3, groups=3)
  with pytest.raises(ValueError, match="expected a 4-d"): nn.Conv2d(2, 2, 3)(Tensor.ones(1, 2, 5, 5, 5))
  with pytest.raises(ValueError, match="padding_mode must be one of"): nn.Conv2d(2, 2, 3, padding_mode="mirror")
  with pytest.raises(ValueError, match="only padding_mode 'zeros'"): nn.ConvTranspose2d(2, 2, 3, padding_mode="reflect")

CONVT_CASES = [  # (nsp, kwargs, input spatial)
  (1, dict(kernel_size=3, stride=2, padding=1, output_padding=1), (5,)),
  (1, dict(kernel_size=4, dilation=2, groups=2, bias=False), (4,)),
  (2, dict(kernel_size=3, stride=2, padding=1, output_padding=1), (3, 4)),
  (2, dict(kernel_size=(2, 3), stride=(1, 2), padding=(0, 1), dilation=(2, 1), groups=2), (4, 3)),
  (2, dict(kernel_size=3, padding=2), (5, 5)),   # padding larger than the kernel reach: the input is cropped
  (3, dict(kernel_size=2, stride=2), (2, 3, 2)),
  (3, dict(kernel_size=(3, 1, 2), stride=(2, 1, 1), padding=(1, 0, 0), output_padding=(1, 0, 0)), (2, 2, 3)),
]

@pytest.mark.parametrize("nsp,kw,spatial", CONVT_CASES)
def test_conv_transpose_matches_torch(nsp, kw, spatial):
  ours = [nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d][nsp - 1](4, 6, **kw)
  theirs = [torch.nn.ConvTranspose1d, torch.nn.ConvTranspose2d, torch.nn.ConvTranspose3d][nsp - 1](4, 6, **kw)
  check_layer(ours, theirs, [rand(2, 4, *spatial)])

def test_conv_transpose_output_size_matches_torch():
  x = rand(1, 2, 4, 4)
  check_layer(nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1), torch.nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1),
              [x], call=lambda m, x: m(x, output_size=(8, 8)))
  with pytest.raises(ValueError, match="output_size"): nn.ConvTranspose2d(2, 3, 3, stride=2)(Tensor(x), output_size=(20, 20))

def test_conv_transpose_float16_matches_torch():
  check_layer(nn.ConvTranspose2d(3, 2, 3, stride=2), torch.nn.ConvTranspose2d(3, 2, 3, stride=2), [rand(1, 3, 3, 3)],
              "float16")

def test_conv_transpose_bad_output_padding_is_a_clear_error():
  with pytest.raises(ValueError, match="output_padding"): nn.ConvTranspose2d(2, 2, 3, stride=2, output_padding=2)

# ---- default initialisation: shapes and torch's fan conventions ----

def _bound_ok(t: Tensor, bound: float) -> bool:
  v = t.numpy()
  # NOTE: uniform in +-bound: inside it and (with 24+ samples, all but certainly) reaching past half of it on both sides
  return bool(np.abs(v).max() <= bound and (v.size < 24 or (v.max() > bound / 2 and v.min() < -bound / 2)))

def test_default_init_shapes_and_fans_as_torch():
  Tensor.manual_seed(3)
  cases = [(nn.Linear(20, 30), torch.nn.Linear(20, 30), 1 / math.sqrt(20)),
           (nn.Conv2d(4, 32, (3, 2), groups=2), torch.nn.Conv2d(4, 32, (3, 2), groups=2), 1 / math.sqrt(2 * 6)),
           (nn.ConvTranspose2d(4, 32, 3, groups=2), torch.nn.ConvTranspose2d(4, 32, 3, groups=2), 1 / math.sqrt(16 * 9)),
           (nn.ConvTranspose1d(6, 3, 5), torch.nn.ConvTranspose1d(6, 3, 5), 1 / math.sqrt(3 * 5)),
           (nn.LSTMCell(5, 7), torch.nn.LSTMCell(5, 7), 1 / math.sqrt(7))]
  for ours, theirs, bound in cases:
    for name, p in theirs.named_parameters():
      t = getattr(ours, name)
      assert t.shape == tuple(p.shape) and t.requires_grad, f"{type(ours).__name__}.{name}"
      # torch's own init reaches at most the same bound
      assert p.detach().abs().max().item() <= bound + 1e-7
      assert _bound_ok(t, bound), f"{type(ours).__name__}.{name}: not uniform in +-{bound}"
  w = nn.Embedding(50, 40).weight.numpy()
  assert abs(w.mean()) < 0.05 and abs(w.std() - 1) < 0.05, "Embedding starts N(0, 1) as torch"
  for norm in (nn.BatchNorm(3), nn.LayerNorm(3), nn.GroupNorm(1, 3), nn.RMSNorm(3)):
    np.testing.assert_array_equal(norm.weight.numpy(), 1)

# ---- normalisations ----

def _bn_pair(cls_ours, cls_theirs, c, **kw):
  return cls_ours(c, **kw), cls_theirs(c, **kw)

@pytest.mark.parametrize("shape,ours_cls,theirs_cls", [
  ((4, 3), nn.BatchNorm1d, torch.nn.BatchNorm1d), ((3, 3, 5), nn.BatchNorm1d, torch.nn.BatchNorm1d),
  ((2, 3, 4, 3), nn.BatchNorm2d, torch.nn.BatchNorm2d), ((2, 3, 2, 3, 2), nn.BatchNorm3d, torch.nn.BatchNorm3d)])
def test_batchnorm_training_matches_torch_and_updates_running_stats(shape, ours_cls, theirs_cls):
  ours, theirs = _bn_pair(ours_cls, theirs_cls, 3, momentum=0.3)
  theirs.train()
  with Tensor.train():
    check_layer(ours, theirs, [rand(*shape, low=-2, high=3)])
  np.testing.assert_allclose(ours.running_mean.numpy(), theirs.running_mean.numpy(), atol=1e-6)
  np.testing.assert_allclose(ours.running_var.numpy(), theirs.running_var.numpy(), atol=1e-6)
  assert ours.num_batches_tracked.numpy() == 1 and ours.num_batches_tracked.shape == ()

def test_batchnorm_eval_uses_running_stats_as_torch():
  ours, theirs = _bn_pair(nn.BatchNorm2d, torch.nn.BatchNorm2d, 3)
  with torch.no_grad():
    theirs.running_mean.copy_(torch.tensor([0.5, -1.0, 2.0]))
    theirs.running_var.copy_(torch.tensor([2.0, 0.5, 1.5]))
    theirs.weight.copy_(torch.tensor([1.5, -0.5, 2.0]))
  theirs.eval()
  with Tensor.test():
    check_layer(ours, theirs, [rand(2, 3, 3, 3)])

def test_batchnorm_momentum_none_is_a_cumulative_average_as_torch():
  ours, theirs = _bn_pair(nn.BatchNorm1d, torch.nn.BatchNorm1d, 2, momentum=None)
  theirs.train()
  xs = [rand(5, 2, seed=s, low=s, high=s + 2) for s in range(3)]
  with Tensor.train():
    for x in xs:
      ours(Tensor(x)).realize()
      theirs(torch.tensor(x))
  np.testing.assert_allclose(ours.running_mean.numpy(), theirs.running_mean.numpy(), atol=1e-6)
  np.testing.assert_allclose(ours.running_var.numpy(), theirs.running_var.numpy(), atol=1e-6)
  assert ours.num_batches_tracked.numpy() == 3

@pytest.mark.parametrize("training", [True, False])
def test_batchnorm_without_running_stats_or_affine_matches_torch(training):
  ours, theirs = _bn_pair(nn.BatchNorm, torch.nn.BatchNorm2d, 3, affine=False, track_running_stats=False)
  assert ours.running_mean is None and ours.weight is None
  theirs.train(training)
  with Tensor.train(training):
    check_layer(ours, theirs, [rand(2, 3, 2, 2)])

def test_batchnorm_float16_matches_torch():
  ours, theirs = _bn_pair(nn.BatchNorm2d, torch.nn.BatchNorm2d, 3)
  with Tensor.train():
    check_layer(ours, theirs, [rand(2, 3, 3, 3)], "float16")

def test_batchnorm_state_dict_names_and_rank_errors():
  from tinygrad.nn.state import get_state_dict
  sd = get_state_dict(nn.BatchNorm2d(4))
  ref = torch.nn.BatchNorm2d(4).state_dict()
  assert {k: v.shape for k, v in sd.items()} == {k: tuple(v.shape) for k, v in ref.items()}
  assert sd["num_batches_tracked"].dtype is dtypes.int64
  with pytest.raises(ValueError, match="expected a 4-d input"): nn.BatchNorm2d(4)(Tensor.ones(2, 4, 3))
  with pytest.raises(ValueError, match=r"must be \(N, 4, ...\)"): nn.BatchNorm(4)(Tensor.ones(2, 3, 3))
  with Tensor.train(), pytest.raises(ValueError, match="more than 1 value per channel"):
    nn.BatchNorm1d(4)(Tensor.ones(1, 4))

@pytest.mark.parametrize("shape,ns,kw", [((2, 3, 4), (4,), {}), ((2, 3, 4), (3, 4), dict(elementwise_affine=False)),
                                         ((3, 2, 5), (5,), dict(bias=False, eps=1e-3))])
def test_layernorm_matches_torch(shape, ns, kw):
  check_layer(nn.LayerNorm(ns, **kw), torch.nn.LayerNorm(ns, **kw), [rand(*shape, low=-3, high=2)])

def test_layernorm_float16_matches_torch():
  check_layer(nn.LayerNorm(6), torch.nn.LayerNorm(6), [rand(3, 6)], "float16")

class _TorchLayerNorm2d(torch.nn.LayerNorm):
  def forward(self, x): return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)

def test_layernorm2d_is_torch_layernorm_over_channels():
  check_layer(nn.LayerNorm2d(3), _TorchLayerNorm2d(3), [rand(2, 3, 4, 2)])

@pytest.mark.parametrize("groups,shape,affine", [(2, (2, 4, 3, 3), True), (1, (3, 6, 5), True), (6, (2, 6, 2), False)])
def test_groupnorm_matches_torch(groups, shape, affine):
  check_layer(nn.GroupNorm(groups, shape[1], affine=affine), torch.nn.GroupNorm(groups, shape[1], affine=affine),
              [rand(*shape, low=-1, high=3)])

def test_groupnorm_bad_groups_is_a_clear_error():
  with pytest.raises(ValueError, match="must divide by num_groups"): nn.GroupNorm(4, 6)

@pytest.mark.parametrize("cls,shape,kw", [
  ("InstanceNorm1d", (2, 3, 5), {}), ("InstanceNorm2d", (2, 3, 3, 4), dict(affine=True)),
  ("InstanceNorm3d", (1, 3, 2, 3, 2), dict(affine=True)), ("InstanceNorm2d", (3, 3, 4), {})])  # last: unbatched
def test_instancenorm_matches_torch(cls, shape, kw):
  check_layer(getattr(nn, cls)(3, **kw), getattr(torch.nn, cls)(3, **kw), [rand(*shape, low=-1, high=2)])

def test_instancenorm_affine_defaults():
  # torch's names have torch's default (no affine); the generic any-rank InstanceNorm has affine parameters
  assert nn.InstanceNorm2d(3).weight is None and nn.InstanceNorm(3).weight is not None
  check_layer(nn.InstanceNorm(3), torch.nn.InstanceNorm1d(3, affine=True), [rand(2, 3, 4)])

def test_instancenorm_running_stats_match_torch():
  ours, theirs = nn.InstanceNorm2d(3, track_running_stats=True), torch.nn.InstanceNorm2d(3, track_running_stats=True)
  x = rand(2, 3, 3, 3, low=0, high=2)
  with Tensor.train():
    check_layer(ours, theirs, [x])
  np.testing.assert_allclose(ours.running_mean.numpy(), theirs.running_mean.numpy(), atol=1e-6)
  np.testing.assert_allclose(ours.running_var.numpy(), theirs.running_var.numpy(), atol=1e-6)
  theirs.eval()
  with Tensor.test():
    check_layer(ours, theirs, [x * 2])

@pytest.mark.parametrize("ns,kw,dtype", [(5, {}, "float32"), ((2, 5), dict(eps=1e-3), "float32"),
                                         (5, dict(elementwise_affine=False), "float32"), (5, {}, "float16")])
def test_rmsnorm_matches_torch(ns, kw, dtype):
  check_layer(nn.RMSNorm(ns, **kw), torch.nn.RMSNorm(ns, **kw), [rand(3, 2, 5)], dtype)

# ---- recurrent ----

def test_lstmcell_matches_torch_with_state():
  x, h, c = rand(3, 4), rand(3, 5, seed=1), rand(3, 5, seed=2)
  check_layer(nn.LSTMCell(4, 5), torch.nn.LSTMCell(4, 5), [x, h, c], call=lambda m, x, h, c: m(x, (h, c)))

def test_lstmcell_matches_torch_without_state_and_unbatched():
  check_layer(nn.LSTMCell(3, 2, bias=False), torch.nn.LSTMCell(3, 2, bias=False), [rand(4, 3)])
  check_layer(nn.LSTMCell(3, 2), torch.nn.LSTMCell(3, 2), [rand(3)])

def _lstm_flat(m, x, *hc):
  out, (h, c) = m(x, tuple(hc) if hc else None)
  return out, h, c

# NOTE: the unrolled recurrence's kernels are slow to compile (a case takes 15-55 s of CPU): the default suite checks the
# bidirectional batch_first one without bias, the others run under -m slow (make test-models-slow)
@pytest.mark.parametrize("kw,shape", [(dict(bias=False, batch_first=True, bidirectional=True), (2, 2, 4))],
                         ids=["nobias_bf_bidir"])
def test_lstm_matches_torch(kw, shape):
  check_layer(nn.LSTM(4, 3, **kw), torch.nn.LSTM(4, 3, **kw), [rand(*shape)], call=_lstm_flat)

@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("kw,shape", [(dict(num_layers=2), (3, 2, 4)), (dict(batch_first=True), (2, 3, 4)),
                                      (dict(num_layers=2, bidirectional=True), (2, 2, 4)),
                                      (dict(num_layers=2), (3, 4))],
                         ids=["2layers", "batch_first", "bidirectional", "unbatched"])
def test_lstm_slow_matches_torch(kw, shape):
  check_layer(nn.LSTM(4, 3, **kw), torch.nn.LSTM(4, 3, **kw), [rand(*shape)], call=_lstm_flat)

@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_lstm_matches_torch_with_state_and_float16():
  dirs = 2
  x, h, c = rand(2, 2, 3), rand(dirs, 2, 5, seed=1), rand(dirs, 2, 5, seed=2)
  kw = dict(num_layers=1, bidirectional=True)
  check_layer(nn.LSTM(3, 5, **kw), torch.nn.LSTM(3, 5, **kw), [x, h, c], call=_lstm_flat)
  check_layer(nn.LSTM(3, 5, **kw), torch.nn.LSTM(3, 5, **kw), [x, h, c], "float16", call=_lstm_flat)

def test_lstm_state_dict_keys_and_bad_shapes():
  theirs = torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True)
  assert sorted(get_state_dict(nn.LSTM(3, 4, num_layers=2, bidirectional=True))) == sorted(theirs.state_dict())
  with pytest.raises(ArgumentError, match="input"): nn.LSTM(3, 4)(Tensor.zeros(2, 2, 5))
  with pytest.raises(ArgumentError, match="states"): nn.LSTM(3, 4)(Tensor.zeros(2, 2, 3), (Tensor.zeros(1, 3, 4),) * 2)
  with pytest.raises(ArgumentError, match="proj_size"): nn.LSTM(3, 4, proj_size=2)

# ---- training mode ----

def test_train_and_test_are_context_managers_and_decorators():
  assert Tensor.training is False
  with Tensor.train():
    assert Tensor.training is True
    with Tensor.test(): assert Tensor.training is False
    assert Tensor.training is True
  assert Tensor.training is False
  @Tensor.train()
  def inside(): return Tensor.training
  @Tensor.train
  def bare(): return Tensor.training
  assert inside() is True and bare() is True and Tensor.training is False
  with pytest.raises(KeyError), Tensor.train(): raise KeyError("the mode comes back after an exception")
  assert Tensor.training is False

def test_dropout_and_batchnorm_follow_the_training_mode():
  x = Tensor(rand(64, 4, low=1, high=2))
  bn = nn.BatchNorm1d(4)
  with Tensor.test():
    np.testing.assert_array_equal(x.dropout(0.5).numpy(), x.numpy())
    np.testing.assert_allclose(bn(x).numpy(), x.numpy() / np.sqrt(1 + 1e-5), rtol=1e-6)
  with Tensor.train():
    d = x.dropout(0.5).numpy()
    assert 0.3 < (d == 0).mean() < 0.7
    np.testing.assert_allclose(d[d != 0], x.numpy()[d != 0] * 2, rtol=1e-6)
    np.testing.assert_allclose(bn(x).numpy().mean(0), 0, atol=1e-5)
