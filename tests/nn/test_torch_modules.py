"""The modules torch users reach for first, against torch 2.13's with the same weights: Sequential (state-dict names,
indexing), the activations and Dropout as modules, MultiheadAttention (attn_mask, key_padding_mask, batch_first,
kdim/vdim, add_bias_kv, add_zero_attn, the returned weights, gradients of every parameter) and Embedding(padding_idx)
over several optimizer steps."""
import numpy as np
import pytest
import torch
from tinygrad import Tensor, nn
from tinygrad.nn.state import get_state_dict, load_state_dict
from tests.nn.torch_ref import check_layer, rand

def _load_from_torch(ours, theirs):
  load_state_dict(ours, {k: Tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
  for t in get_state_dict(ours).values(): t.requires_grad = True

def test_sequential_names_indexing_and_forward_match_torch():
  theirs = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3), torch.nn.Tanh())
  ours = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3), nn.Tanh())
  assert sorted(get_state_dict(ours)) == sorted(theirs.state_dict()) == ["0.bias", "0.weight", "2.bias", "2.weight"]
  _load_from_torch(ours, theirs)
  x = rand(5, 4)
  np.testing.assert_allclose(ours(Tensor(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(), atol=1e-6)
  assert len(ours) == 4 and isinstance(ours[1], nn.ReLU) and [type(m) for m in ours][2] is nn.Linear
  head = ours[:2]
  np.testing.assert_allclose(head(Tensor(x)).numpy(), theirs[:2](torch.tensor(x)).detach().numpy(), atol=1e-6)
  named = nn.Sequential({"fc": nn.Linear(2, 2), "act": Tensor.relu})
  assert sorted(get_state_dict(named)) == ["fc.bias", "fc.weight"]
  with pytest.raises(TypeError, match="not callable"): nn.Sequential(nn.Linear(2, 2), 3)

ACTS = [("ReLU", {}), ("ReLU6", {}), ("SiLU", {}), ("Sigmoid", {}), ("Tanh", {}), ("Mish", {}), ("Hardswish", {}),
        ("Hardsigmoid", {}), ("Softsign", {}), ("LogSigmoid", {}), ("SELU", {}), ("GELU", {}),
        ("GELU", {"approximate": "tanh"}), ("LeakyReLU", {"negative_slope": 0.2}), ("ELU", {"alpha": 0.7}),
        ("CELU", {"alpha": 1.3}), ("Hardtanh", {"min_val": -0.5, "max_val": 0.8}),
        ("Softplus", {"beta": 2.0, "threshold": 3.0}), ("Softmax", {"dim": 1}), ("LogSoftmax", {"dim": -1}),
        ("Identity", {}), ("Flatten", {}), ("PReLU", {}), ("PReLU", {"num_parameters": 3, "init": 0.1})]

@pytest.mark.parametrize("name,kw", ACTS, ids=[f"{n}{'_' + '_'.join(map(str, kw.values())) if kw else ''}" for n, kw in ACTS])
def test_activation_modules_match_torch(name, kw):
  # NOTE: the input reaches +-6, so saturating ends (Hardtanh, ReLU6, Softplus's threshold) are on both sides
  x = rand(2, 3, 4, seed=3, low=-6, high=6)
  # NOTE: the gradients of the functions themselves are checked in tests/ops; a module with a parameter gets its own
  check_layer(getattr(nn, name)(**kw), getattr(torch.nn, name)(**kw), [x], grad=name == "PReLU")

def test_dropout_module_follows_training_mode_as_torch():
  x = np.ones((200, 50), dtype=np.float32)
  d = nn.Dropout(0.3)
  with Tensor.test(): np.testing.assert_array_equal(d(Tensor(x)).numpy(), x)
  Tensor.manual_seed(0)
  with Tensor.train(): y = d(Tensor(x)).numpy()
  kept = y != 0
  # as torch: the kept ones scaled by 1/(1-p), about 1-p of them kept
  np.testing.assert_allclose(y[kept], 1 / 0.7, rtol=1e-6)
  assert abs(kept.mean() - 0.7) < 0.02
  np.testing.assert_array_equal(torch.nn.Dropout(0.3).eval()(torch.tensor(x)).numpy(), x)

# NOTE: the backward runs in the cases marked grad (every parameter and input), the others compare the forward
MHA_CASES = {
  "plain": (dict(), dict()),
  "batch_first_masks": (dict(batch_first=True), dict(attn_mask="bool2d", key_padding_mask="bool")),
  "float_masks_per_head_weights": (dict(), dict(attn_mask="float3d", key_padding_mask="float", average_attn_weights=False)),
  "kdim_vdim_no_bias": (dict(kdim=3, vdim=5, bias=False), dict(attn_mask="bool2d")),
  "bias_kv_zero_attn": (dict(add_bias_kv=True, add_zero_attn=True), dict(key_padding_mask="bool", attn_mask="float3d",
                                                                        grad=True)),
  "no_weights": (dict(batch_first=True), dict(need_weights=False)),
  "unbatched": (dict(), dict(attn_mask="bool2d", unbatched=True)),
}

@pytest.mark.parametrize("case", sorted(MHA_CASES))
def test_multihead_attention_matches_torch(case):
  ctor, call = MHA_CASES[case]
  E, H, N, L, S = 8, 2, 3, 4, 5
  torch.manual_seed(0)
  theirs = torch.nn.MultiheadAttention(E, H, **ctor)
  ours = nn.MultiheadAttention(E, H, **ctor)
  if ctor.get("bias", True):
    with torch.no_grad():  # torch starts the biases at 0: make them count
      theirs.in_proj_bias.uniform_(-0.5, 0.5)
      theirs.out_proj.bias.uniform_(-0.5, 0.5)
  _load_from_torch(ours, theirs)
  bf, unb = ctor.get("batch_first", False), call.get("unbatched", False)
  shape = (lambda n, d: (n, d)) if unb else (lambda n, d: (N, n, d) if bf else (n, N, d))
  q, k, v = rand(*shape(L, E), seed=1), rand(*shape(S, ctor.get("kdim", E)), seed=2), rand(*shape(S, ctor.get("vdim", E)), seed=3)
  rng = np.random.default_rng(4)
  masks: dict = {}
  if call.get("attn_mask") == "bool2d": masks["attn_mask"] = np.triu(np.ones((L, S), bool), 2)
  if call.get("attn_mask") == "float3d": masks["attn_mask"] = rng.uniform(-2, 0, (N * H, L, S)).astype(np.float32)
  if call.get("key_padding_mask") == "bool": masks["key_padding_mask"] = np.array([[0, 0, 0, 0, 1], [0, 1, 0, 0, 1], [0] * 5], bool)
  if call.get("key_padding_mask") == "float": masks["key_padding_mask"] = rng.uniform(-1, 0, (N, S)).astype(np.float32)
  extra = {k: call[k] for k in ("need_weights", "average_attn_weights") if k in call}
  tq, tk, tv = (Tensor(a, requires_grad=True) for a in (q, k, v))
  rq, rk, rv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
  out, w = ours(tq, tk, tv, **{n: Tensor(m) for n, m in masks.items()}, **extra)
  rout, rw = theirs(rq, rk, rv, **{n: torch.tensor(m) for n, m in masks.items()}, **extra)
  np.testing.assert_allclose(out.numpy(), rout.detach().numpy(), atol=2e-5, rtol=1e-4)
  assert (w is None) == (rw is None)
  if w is not None: np.testing.assert_allclose(w.numpy(), rw.detach().numpy(), atol=2e-6)
  if not call.get("grad"): return
  up = rand(*rout.shape, seed=5)
  (out * Tensor(up)).sum().backward()
  (rout * torch.tensor(up)).sum().backward()
  for a, b, name in ((tq, rq, "query"), (tk, rk, "key"), (tv, rv, "value")):
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), atol=5e-5, rtol=1e-3, err_msg=name)
  ours_sd, theirs_p = get_state_dict(ours), dict(theirs.named_parameters())
  assert sorted(ours_sd) == sorted(theirs_p)
  for name, p in theirs_p.items():
    np.testing.assert_allclose(ours_sd[name].grad.numpy(), p.grad.numpy(), atol=5e-5, rtol=1e-3, err_msg=name)

def test_multihead_attention_errors_as_torch():
  mha = nn.MultiheadAttention(8, 2)
  x = Tensor.ones(4, 3, 8)
  with pytest.raises(RuntimeError, match="give attn_mask"): mha(x, x, x, is_causal=True)
  with pytest.raises(RuntimeError, match="attn_mask of shape"): mha(x, x, x, attn_mask=Tensor.ones(3, 3))
  with pytest.raises(RuntimeError, match="must end in 8"): mha(x, Tensor.ones(4, 3, 5), Tensor.ones(4, 3, 5))

def test_embedding_padding_idx_matches_torch_over_sgd_steps():
  torch.manual_seed(0)
  theirs = torch.nn.Embedding(6, 4, padding_idx=2)
  ours = nn.Embedding(6, 4, padding_idx=2)
  assert np.all(ours.weight.numpy()[2] == 0)
  _load_from_torch(ours, theirs)
  topt, opt = torch.optim.SGD(theirs.parameters(), lr=0.5, momentum=0.9), nn.optim.SGD([ours.weight], lr=0.5, momentum=0.9)
  idx = np.array([[0, 2, 5, 2], [1, 3, 2, 4]])
  tgt = rand(2, 4, 4, seed=7)
  with Tensor.train():
    for _ in range(2):
      opt.zero_grad()
      ((ours(Tensor(idx)) - Tensor(tgt)) ** 2).sum().backward()
      opt.step()
      topt.zero_grad()
      ((theirs(torch.tensor(idx)) - torch.tensor(tgt)) ** 2).sum().backward()
      topt.step()
  np.testing.assert_allclose(ours.weight.numpy(), theirs.weight.detach().numpy(), atol=1e-5)
  assert np.all(ours.weight.numpy()[2] == 0), "the padding row got no update"
