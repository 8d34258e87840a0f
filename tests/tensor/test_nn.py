"""nn layers, optimizers (against numpy implementations of the update rules) and state dicts."""
import numpy as np
import pytest
from tinygrad import Tensor, dtypes, nn
from tinygrad.nn.optim import SGD, Adam, AdamW
from tinygrad.nn.state import get_state_dict, get_parameters, load_state_dict, safe_save, safe_load

rng = np.random.default_rng(2)

def test_linear_matches_numpy_and_shapes():
  lin = nn.Linear(4, 3)
  x = rng.uniform(-1, 1, size=(5, 4)).astype(np.float32)
  w, b = lin.weight.numpy(), lin.bias.numpy()
  assert w.shape == (3, 4) and b.shape == (3,) and np.abs(w).max() <= 0.5
  np.testing.assert_allclose(lin(Tensor(x)).numpy(), x @ w.T + b, atol=1e-5)

def test_conv2d_layer_shape_and_embedding():
  conv = nn.Conv2d(3, 4, 3, padding=1, stride=2)
  assert conv(Tensor.ones(2, 3, 8, 8)).shape == (2, 4, 4, 4)
  emb = nn.Embedding(7, 3)
  idx = np.array([[0, 6, 2]], dtype=np.int32)
  np.testing.assert_allclose(emb(Tensor(idx)).numpy(), emb.weight.numpy()[idx], atol=1e-6)

def test_layernorm_and_batchnorm_layers():
  ln = nn.LayerNorm(4)
  x = rng.uniform(-1, 1, size=(2, 4)).astype(np.float32)
  ref = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
  np.testing.assert_allclose(ln(Tensor(x)).numpy(), ref, atol=1e-5)
  bn = nn.BatchNorm(3)
  bn.running_mean, bn.running_var = Tensor([1.0, 2.0, 3.0]), Tensor([4.0, 1.0, 0.25])
  xi = rng.uniform(-1, 1, size=(2, 3, 2, 2)).astype(np.float32)
  m, v = np.array([1, 2, 3.0]).reshape(1, 3, 1, 1), np.array([4, 1, 0.25]).reshape(1, 3, 1, 1)
  np.testing.assert_allclose(bn(Tensor(xi)).numpy(), (xi - m) / np.sqrt(v + 1e-5), atol=1e-5)

def _quadratic_problem():
  w0 = rng.uniform(-1, 1, size=(3,)).astype(np.float32)
  target = np.array([0.5, -1.0, 2.0], dtype=np.float32)
  return w0, target

def test_sgd_momentum_matches_numpy():
  w0, target = _quadratic_problem()
  w = Tensor(w0.copy(), requires_grad=True)
  opt = SGD([w], lr=0.1, momentum=0.9, weight_decay=0.01)
  ref, buf = w0.astype(np.float64), np.zeros(3)
  for _ in range(4):
    opt.zero_grad()
    ((w - Tensor(target)) ** 2).sum().backward()
    with Tensor.train(): opt.step()
    g = 2 * (ref - target) + 0.01 * ref
    buf = 0.9 * buf + g
    ref = ref - 0.1 * buf
  np.testing.assert_allclose(w.numpy(), ref, atol=1e-5)

@pytest.mark.parametrize("wd", [0.0, 0.1])
def test_adamw_matches_numpy(wd):
  w0, target = _quadratic_problem()
  w = Tensor(w0.copy(), requires_grad=True)
  opt = AdamW([w], lr=0.05, weight_decay=wd) if wd else Adam([w], lr=0.05)
  ref, m, v = w0.astype(np.float64), np.zeros(3), np.zeros(3)
  for t in range(1, 5):
    opt.zero_grad()
    ((w - Tensor(target)) ** 2).sum().backward()
    with Tensor.train(): opt.step()
    g = 2 * (ref - target)
    m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
    up = (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8) + wd * ref
    ref = ref - 0.05 * up
  np.testing.assert_allclose(w.numpy(), ref, atol=1e-5)

def test_optimizer_needs_grads():
  w = Tensor([1.0], requires_grad=True)
  with Tensor.train(), pytest.raises(RuntimeError, match="backward"): SGD([w]).step()

class TinyNet:
  def __init__(self):
    self.l1, self.l2 = nn.Linear(2, 3), nn.Linear(3, 1)
    self.layers = [nn.LayerNorm(3)]

def test_state_dict_load_and_safetensors(tmp_path):
  net = TinyNet()
  sd = get_state_dict(net)
  assert set(sd) == {"l1.weight", "l1.bias", "l2.weight", "l2.bias", "layers.0.weight", "layers.0.bias"}
  assert len(get_parameters(net)) == 6
  fn = str(tmp_path / "net.safetensors")
  safe_save(sd, fn)
  loaded = safe_load(fn)
  for k, t in sd.items():
    assert loaded[k].dtype is t.dtype
    np.testing.assert_array_equal(loaded[k].numpy(), t.numpy())
  other = TinyNet()
  load_state_dict(other, loaded)
  np.testing.assert_array_equal(other.l1.weight.numpy(), net.l1.weight.numpy())
  with pytest.raises(KeyError, match="missing"): load_state_dict(other, {"l1.weight": loaded["l1.weight"]})

def test_safetensors_header_format(tmp_path):
  fn = str(tmp_path / "x.safetensors")
  safe_save({"a": Tensor([[1, 2], [3, 4]], dtype=dtypes.int16), "b": Tensor([1.5], dtype=dtypes.bfloat16)}, fn)
  raw = open(fn, "rb").read()
  n = int.from_bytes(raw[:8], "little")
  import json
  header = json.loads(raw[8:8 + n])
  assert header["a"] == {"dtype": "I16", "shape": [2, 2], "data_offsets": [0, 8]}
  assert header["b"]["dtype"] == "BF16"
  assert np.frombuffer(raw[8 + n:8 + n + 8], dtype=np.int16).tolist() == [1, 2, 3, 4]
  assert safe_load(fn)["b"].numpy().tolist() == [1.5]

def test_loss_read_after_step_keeps_its_value():
  w = Tensor([1.0, 2.0], requires_grad=True)
  opt = SGD([w], lr=0.1)
  loss = (w * w).sum()
  loss.backward()
  with Tensor.train(): opt.step()
  assert loss.item() == 5.0, "the loss must be computed from the parameters before the update"
  np.testing.assert_allclose(w.numpy(), [0.8, 1.6], atol=1e-6)
