"""Training on several devices under TinyJit equals training on one (rtol 1e-5 after 5 steps): data-parallel (batch
split, weights replicated, gradients allreduced) and model-parallel (weights split); optimizer state, state dicts and
BatchNorm on sharded parameters. References: the same training on one device, and torch for BatchNorm."""
import numpy as np
import pytest
import torch
from tinygrad import Tensor, TinyJit, nn
from tinygrad.nn.state import get_parameters, get_state_dict, load_state_dict

D2, D3 = ("CPU:0", "CPU:1"), ("CPU:0", "CPU:1", "CPU:2")

class MLP:
  def __init__(self):
    self.l1, self.l2 = nn.Linear(6, 8), nn.Linear(8, 3)
  def __call__(self, x): return self.l2(self.l1(x).relu())

def train(shard, steps=5, opt_cls=nn.optim.Adam):
  Tensor.manual_seed(3)
  model = MLP()
  rng = np.random.default_rng(2)
  xs = [rng.standard_normal((12, 6)).astype(np.float32) for _ in range(steps)]
  ys = [rng.integers(0, 3, 12).astype(np.int32) for _ in range(steps)]
  if shard: shard(model)
  opt = opt_cls(get_parameters(model), lr=0.01)
  @TinyJit
  def step(x, y):
    opt.zero_grad()
    loss = model(x).sparse_categorical_crossentropy(y)
    loss.backward()
    opt.step()
    return loss.realize()
  with Tensor.train():
    for x, y in zip(xs, ys):
      tx, ty = Tensor(x), Tensor(y)
      if shard: tx, ty = tx.shard(shard.devs, 0), ty.shard(shard.devs, 0)
      step(tx.realize(), ty.realize())
  assert step.cnt >= 3  # replays ran
  return model, opt

def data_parallel(devs):
  def f(model):
    for p in get_parameters(model): p.shard_(devs)
  f.devs = devs
  return f

def model_parallel(devs):
  def f(model):
    model.l1.weight.shard_(devs, 0); model.l1.bias.shard_(devs, 0)  # output features split
    model.l2.weight.shard_(devs, 1); model.l2.bias.shard_(devs)      # input features split: partial sums, allreduced
  f.devs = devs
  return f

_ref: list = []
def reference():
  if not _ref: _ref.append(train(None)[0])
  return _ref[0]

# NOTE: each case compiles every kernel of a training step on each device: make test runs two, -m slow all four
@pytest.mark.parametrize("how,devs", [("data", D2), ("model", D3),
                                      pytest.param("data", D3, marks=pytest.mark.slow),
                                      pytest.param("model", D2, marks=pytest.mark.slow)])
def test_training_on_several_devices_equals_one_device(how, devs):
  ref = reference()
  got, opt = train((data_parallel if how == "data" else model_parallel)(devs))
  for (k, a), b in zip(get_state_dict(ref).items(), get_state_dict(got).values()):
    np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
  # the optimizer state lives where its parameter lives, split as it is
  for p, m in zip(opt.params, opt.m):
    assert m.device == p.device and (m.uop.arg[:2] if m.uop.op.name == "MULTI" else None) == \
      (p.uop.arg[:2] if p.uop.op.name == "MULTI" else None)

def test_state_dict_loads_onto_sharded_parameters():
  src = MLP()
  dst = MLP()
  model_parallel(D3)(dst)
  load_state_dict(dst, get_state_dict(src))
  assert dst.l1.weight.device == tuple(Tensor(0).shard(D3).device)
  assert [s.shape for s in dst.l1.weight.uop.src] == [(3, 6), (3, 6), (2, 6)]  # each device got its part only
  for k, v in get_state_dict(src).items(): np.testing.assert_equal(get_state_dict(dst)[k].numpy(), v.numpy())

def test_batchnorm_synced_equals_torch_on_the_whole_batch_and_unsynced_each_part():
  rng = np.random.default_rng(4)
  x = rng.standard_normal((8, 3, 4)).astype(np.float32)
  bn = nn.BatchNorm(3)
  for p in (bn.weight, bn.bias, bn.running_mean, bn.running_var): p.shard_(D2)
  tb = torch.nn.BatchNorm1d(3)
  with Tensor.train():
    out = bn(Tensor(x).shard(D2, 0)).numpy()
  np.testing.assert_allclose(out, tb(torch.tensor(x)).detach().numpy(), rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(bn.running_mean.numpy(), tb.running_mean.numpy(), rtol=1e-5, atol=1e-6)
  ub = nn.UnsyncedBatchNorm(3, num_devices=2)
  ub.weight.shard_(D2); ub.bias.shard_(D2); ub.running_mean.shard_(D2, 0); ub.running_var.shard_(D2, 0)
  with Tensor.train():
    out = ub(Tensor(x).shard(D2, 0)).numpy()
  for i in range(2):
    ti = torch.nn.BatchNorm1d(3)
    np.testing.assert_allclose(out[4 * i:4 * i + 4], ti(torch.tensor(x[4 * i:4 * i + 4])).detach().numpy(), rtol=1e-4,
                               atol=1e-5)
    np.testing.assert_allclose(ub.running_var.numpy()[i], ti.running_var.numpy(), rtol=1e-5, atol=1e-6)
