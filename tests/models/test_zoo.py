"""The model zoo (tinygrad/models) against its twins written with torch.nn (tests/models/twins.py): torch makes the
weights (normalisation parameters and running statistics drawn at random too, so loading them matters), our
`load_state_dict` takes torch's state dict with its keys unchanged, and both run one training step in training mode:
the forward, the gradients of the inputs and of every parameter for a random cotangent, then one optimizer step (SGD
with momentum for the CNNs and the LSTM, AdamW for the transformers), after which every state-dict entry (parameters,
BatchNorm running statistics and num_batches_tracked) must agree. The transformers also run a float16 forward.

Tolerances (docs/models.md), as the largest difference allowed over the largest magnitude of torch's tensor:
float32 forward 1e-5, gradients 1e-4, weights after the step 1e-5; float16 forward 1e-2 (torch runs float32 on the
same half-rounded weights and inputs)."""
import numpy as np
import pytest
import torch
from tinygrad import Tensor, dtypes
from tinygrad.nn.optim import SGD, AdamW
from tinygrad.nn.state import get_state_dict, load_state_dict
from tinygrad.models import resnet18, BertEncoderLayer, GPT2Block, UNet, LSTMLanguageModel
from tests.models import twins

TOL = {"float32": {"forward": 1e-5, "grad": 1e-4, "step": 1e-5}, "float16": {"forward": 1e-2}}

def _close(ours: np.ndarray, ref: np.ndarray, tol: float, what: str) -> None:
  ref = np.asarray(ref, dtype=np.float64)
  assert ours.shape == ref.shape, f"{what}: shape {ours.shape}, torch {ref.shape}"
  scale = max(float(np.abs(ref).max()) if ref.size else 0.0, 1e-6)
  np.testing.assert_allclose(ours.astype(np.float64), ref, atol=tol * scale, rtol=0, err_msg=what)

def _randomize_norms(m: torch.nn.Module, seed: int) -> None:
  g = torch.Generator().manual_seed(seed)
  with torch.no_grad():
    # NOTE: parameters torch starts at zero (MultiheadAttention's in_proj_bias) drawn too, so no compared tensor is ~0
    for p in m.parameters():
      if not p.any(): p.copy_(torch.rand(p.shape, generator=g) - 0.5)
    for mod in m.modules():
      if isinstance(mod, (torch.nn.BatchNorm2d, torch.nn.GroupNorm, torch.nn.LayerNorm)):
        mod.weight.copy_(torch.rand(mod.weight.shape, generator=g) + 0.5)
        mod.bias.copy_(torch.rand(mod.bias.shape, generator=g) - 0.5)
      if isinstance(mod, torch.nn.BatchNorm2d):
        mod.running_mean.copy_(torch.rand(mod.running_mean.shape, generator=g) - 0.5)
        mod.running_var.copy_(torch.rand(mod.running_var.shape, generator=g) + 0.5)
        mod.num_batches_tracked.fill_(3)

def _pad_mask(n: int, t: int) -> np.ndarray:
  m = np.zeros((n, t), dtype=bool)
  m[-1, t - t // 3:] = True
  return m

# name: (torch twin, ours, inputs(rng) as numpy arrays, how each is called, optimizer)
CASES = {
  "resnet18": (lambda: twins.ResNet18(10, 4), lambda: resnet18(num_classes=10, width=4),
               lambda rng: [rng.standard_normal((2, 3, 64, 64))], None, "sgd"),
  "bert": (lambda: twins.bert_layer(16, 2, 32), lambda: BertEncoderLayer(16, 2, 32, dropout=0.0),
           lambda rng: [rng.standard_normal((2, 6, 16)), _pad_mask(2, 6)],
           lambda m, x, mask: m(x, src_key_padding_mask=mask), "adamw"),
  "gpt2": (lambda: twins.GPT2Block(16, 2), lambda: GPT2Block(16, 2), lambda rng: [rng.standard_normal((2, 6, 16))],
           None, "adamw"),
  "unet": (lambda: twins.UNet(3, 2, 4, 2, 2), lambda: UNet(3, 2, base=4, depth=2, groups=2),
           lambda rng: [rng.standard_normal((1, 3, 16, 16))], None, "sgd"),
  "lstm": (lambda: twins.LSTMLanguageModel(16, 8, 8, 1), lambda: LSTMLanguageModel(16, 8, 8, nlayers=1),
           lambda rng: [rng.integers(0, 16, (2, 2))], lambda m, tok: m(tok)[0], "sgd"),
  "lstm_2layers": (lambda: twins.LSTMLanguageModel(16, 8, 8, 2), lambda: LSTMLanguageModel(16, 8, 8, nlayers=2),
                   lambda rng: [rng.integers(0, 16, (2, 3))], lambda m, tok: m(tok)[0], "sgd"),
}

def _make(name: str):
  make_twin, make_ours, make_inputs, call, opt = CASES[name]
  torch.manual_seed(0)
  twin = make_twin()
  _randomize_norms(twin, 1)
  ours = make_ours()
  sd = twin.state_dict()
  assert sorted(get_state_dict(ours)) == sorted(sd), "the zoo model's state-dict keys are not torch's"
  load_state_dict(ours, {k: Tensor(v.numpy()) for k, v in sd.items()})
  xs = make_inputs(np.random.default_rng(2))
  return twin, ours, [x.astype(np.float32) if x.dtype.kind == "f" else x for x in xs], call or (lambda m, *a: m(*a)), opt

def _to_torch(x: np.ndarray, grad: bool) -> torch.Tensor:
  if x.dtype.kind == "f": return torch.tensor(x, requires_grad=grad)
  return torch.tensor(x.astype(np.int64) if x.dtype.kind in "iu" else x)

def _to_ours(x: np.ndarray, grad: bool) -> Tensor:
  return Tensor(x, requires_grad=True) if x.dtype.kind == "f" and grad else Tensor(x)

# NOTE: compile time dominates (ResNet-18's step is about 500 kernels, the unrolled LSTM's kernels are big): the default
# suite runs every model's forward and backward (the LSTM LM with one layer over two tokens) and GPT-2's AdamW step;
# every other step, and the two-layer LSTM LM, under -m slow (make test-models-slow)
DEFAULT = [n for n in CASES if n != "lstm_2layers"]
STEP_DEFAULT = ["gpt2"]

@pytest.mark.parametrize("name", DEFAULT)
def test_zoo_forward_backward_matches_torch(name): _check_training(name, step=name in STEP_DEFAULT)

@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name", [n for n in CASES if n not in STEP_DEFAULT])
def test_zoo_slow_training_step_matches_torch(name): _check_training(name, step=True)

def _check_training(name: str, step: bool) -> None:
  """Training mode: the forward, the gradients of the float inputs and of every parameter for a random cotangent, the
  running statistics after the forward, and with `step` every state-dict entry after one optimizer step."""
  twin, ours, xs, call, opt_name = _make(name)
  tol = TOL["float32"]
  rx, tx = [_to_torch(x, True) for x in xs], [_to_ours(x, True) for x in xs]
  params = dict(twin.named_parameters())
  own = get_state_dict(ours)
  mine = [own[k] for k in params]
  if opt_name == "sgd":
    opt_t = torch.optim.SGD(params.values(), lr=0.1, momentum=0.9)
    opt = SGD(mine, lr=0.1, momentum=0.9)
  else:
    # NOTE: eps 1e-3, not 1e-8: the key projection's bias gets a gradient that is 0 in exact arithmetic (softmax
    # ignores a shift shared by a row's scores), so both hold rounding noise there, which Adam with a tiny eps
    # normalizes into +-lr; a larger eps keeps the update a function of the gradient's value
    opt_t = torch.optim.AdamW(params.values(), lr=1e-2, weight_decay=0.1, eps=1e-3)
    opt = AdamW(mine, lr=1e-2, weight_decay=0.1, eps=1e-3)
  twin.train()
  with Tensor.train():
    out = call(ours, *tx)
    ref = call(twin, *rx)
    cot = np.random.default_rng(3).standard_normal(tuple(ref.shape)).astype(np.float32)
    opt.zero_grad()
    (out * Tensor(cot)).sum().backward()
    (ref * torch.tensor(cot)).sum().backward()
    for k in params: assert own[k].grad is not None, f"{name}: parameter {k} got no gradient"
    # NOTE: one schedule for the output, every gradient and the running statistics: realized one at a time, each would
    # schedule again the forward (and backward) it depends on
    Tensor.realize(out, *[a.grad for a in tx if a.grad is not None], *[own[k].grad for k in params], *own.values())
    _close(out.numpy(), ref.detach().numpy(), tol["forward"], f"{name}: forward")
    for i, (a, b) in enumerate(zip(tx, rx)):
      if b.grad is None: continue
      assert a.grad is not None, f"{name}: input {i} got no gradient"
      _close(a.grad.numpy(), b.grad.numpy(), tol["grad"], f"{name}: gradient of input {i}")
    for k, p in params.items(): _close(own[k].grad.numpy(), p.grad.numpy(), tol["grad"], f"{name}: gradient of {k}")
    # NOTE: BatchNorm's running statistics after one training forward (unbiased variance, momentum 0.1, count 4)
    for k, v in twin.state_dict().items():
      if "running" in k or "num_batches" in k: _close(own[k].numpy(), v.numpy(), tol["step"], f"{name}: {k}")
    if not step: return
    opt.step()
    opt_t.step()
  for k, v in twin.state_dict().items():
    _close(own[k].numpy(), v.numpy(), tol["step"], f"{name}: {k} after the {opt_name} step")

def test_zoo_float16_forward_matches_torch(): _check_float16("gpt2")

@pytest.mark.slow
def test_zoo_slow_float16_forward_matches_torch(): _check_float16("bert")

def _check_float16(name: str) -> None:
  twin, ours, xs, call, _ = _make(name)
  for k, t in get_state_dict(ours).items():
    if dtypes.is_float(t.dtype): t.replace(t.cast(dtypes.float16).realize())
  with torch.no_grad():
    for t in twin.state_dict().values():
      if t.is_floating_point(): t.copy_(t.half().float())
  half = [x.astype(np.float16) if x.dtype.kind == "f" else x for x in xs]
  twin.eval()
  out = call(ours, *[Tensor(x) for x in half])
  assert out.dtype is dtypes.float16
  with torch.no_grad(): ref = call(twin, *[_to_torch(x.astype(np.float32) if x.dtype.kind == "f" else x, False)
                                           for x in half])
  _close(out.numpy(), ref.numpy(), TOL["float16"]["forward"], f"{name}: float16 forward")

def test_zoo_rejects_a_state_dict_of_another_layout():
  twin = twins.GPT2Block(16, 2)
  sd = {k.replace("c_attn", "qkv"): Tensor(v.numpy()) for k, v in twin.state_dict().items()}
  with pytest.raises(KeyError, match="qkv"): load_state_dict(GPT2Block(16, 2), sd)
