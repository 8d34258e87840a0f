"""TinyJit with symbolic shapes: a capture replays with new bindings of its variables (bound-variable arguments and the
symbolic sizes of tensor arguments) and the inputs' buffers of each call, compiling nothing; a KV-cache decode counts
the same work at two cache capacities; what still raises. docs/symbolic.md, docs/jit.md."""
import math
import numpy as np
import pytest
from tinygrad import Tensor, TinyJit, Variable, Device, hooks
from tinygrad.engine.jit import JitError
from tinygrad.helpers import GlobalCounters
from tinygrad.uop.sint import bound_value

rng = np.random.default_rng(0)
def _rand(*shape): return rng.standard_normal(shape).astype(np.float32)

class _Compiles:
  """Programs compiled (the `compiled` checkpoint) and compiler invocations while active."""
  def __enter__(self):
    self.programs: list = []
    self.fn = hooks.register("compiled", lambda *a: self.programs.append(a))
    self.comp = Device[Device.DEFAULT].compiler
    self.c0 = self.comp.compiles + self.comp.cache_hits
    return self
  def __exit__(self, *exc):
    hooks.unregister("compiled", self.fn)
    self.compiles = self.comp.compiles + self.comp.cache_hits - self.c0

def _np(t: Tensor) -> np.ndarray: return t.reshape(tuple(bound_value(s) for s in t.shape)).numpy()

def test_input_of_varying_batch_replays_with_each_calls_buffer():
  w = Tensor(_rand(4, 3)).realize()
  f = TinyJit(lambda x: (x @ w).relu().softmax(-1) * x.mean(0, keepdim=True).sum())
  b = Variable("b", 1, 16)
  for k, n in enumerate((3, 5, 16, 1, 7)):
    nx = _rand(n, 4)
    with _Compiles() as c: out = f(Tensor(nx).reshape(b.bind(n), 4))
    assert out.shape[0] is b.bind(n) and out.shape[1] == 3
    if k >= 2: assert (c.programs, c.compiles) == ([], 0), f"call {k} (batch {n}) compiled"
    e = np.exp(np.maximum(nx @ w.numpy(), 0))
    ref = e / e.sum(-1, keepdims=True) * nx.mean(0).sum()
    np.testing.assert_allclose(_np(out), ref, rtol=1e-5, atol=1e-6)

def test_bound_variable_argument_sets_the_replays_values():
  x = Tensor(_rand(10, 6)).realize()
  @TinyJit
  def f(n, scale): return x[:n].sum(0) * scale + x[n - 1]
  var = Variable("n", 1, 10)
  for k, n in enumerate((4, 2, 10, 1, 6)):
    s = float(n) / 3
    with _Compiles() as c: out = f(var.bind(n), Tensor([s]))
    if k >= 2: assert c.programs == []
    np.testing.assert_allclose(out.numpy(), x.numpy()[:n].sum(0) * s + x.numpy()[n - 1], rtol=1e-5, atol=1e-6)

def test_returned_symbolic_view_and_argument_take_the_calls_binding():
  @TinyJit
  def f(x): return x * 2, x
  b = Variable("b", 1, 8)
  for n in (2, 3, 8, 5):
    nx = _rand(n, 2)
    doubled, same = f(Tensor(nx).reshape(b.bind(n), 2))
    assert bound_value(doubled.shape[0]) == n and bound_value(same.shape[0]) == n
    np.testing.assert_allclose(_np(doubled), nx * 2)
    np.testing.assert_allclose(_np(same), nx)

def _decode(cap: int, steps: int, nw: list[np.ndarray], xs: np.ndarray) -> list[tuple[int, int, int]]:
  """A jitted single-head attention decode step over a KV cache of `cap` rows; (programs compiled, ops, bytes) per
  step, and each step's output checked against numpy."""
  D = nw[0].shape[0]
  wq, wk, wv = (Tensor(w).realize() for w in nw)
  ck, cv = Tensor.zeros(1, cap, D).contiguous().realize(), Tensor.zeros(1, cap, D).contiguous().realize()
  @TinyJit
  def step(x, pos):
    ck[:, pos:pos + 1].assign(x @ wk).realize()
    cv[:, pos:pos + 1].assign(x @ wv).realize()
    att = ((x @ wq) @ ck[:, :pos + 1].transpose(1, 2)) * (1 / math.sqrt(D))
    return (att.softmax(-1) @ cv[:, :pos + 1]).realize()
  var, ret = Variable("pos", 0, cap - 1), []
  for p in range(steps):
    GlobalCounters.reset()
    with _Compiles() as c: out = step(Tensor(xs[p]), var.bind(p))
    ret.append((len(c.programs) + c.compiles, GlobalCounters.global_ops, GlobalCounters.global_mem))
    q, K, V = xs[p][0] @ nw[0], xs[:p + 1, 0, 0] @ nw[1], xs[:p + 1, 0, 0] @ nw[2]
    a = q @ K.T / math.sqrt(D)
    e = np.exp(a - a.max())
    np.testing.assert_allclose(out.numpy().reshape(1, D), (e / e.sum()) @ V, rtol=1e-4, atol=1e-5)
  return ret

def test_kv_cache_decode_counts_the_same_work_at_two_capacities():
  nw = [_rand(16, 16) * 0.3 for _ in range(3)]
  xs = _rand(6, 1, 1, 16)
  small, big = _decode(256, 6, nw, xs), _decode(4096, 6, nw, xs)
  # no kernel is compiled after the second token, and each step's work follows the position, not the capacity
  assert all(s[0] == 0 for s in small[2:]) and all(b[0] == 0 for b in big[2:])
  assert [s[1:] for s in small] == [b[1:] for b in big]
  assert small[5][1] > small[2][1] > 0 and small[5][2] > small[2][2] > 0

def test_what_still_raises():
  f = TinyJit(lambda x: x + 1)
  b = Variable("b", 1, 8)
  for n in (2, 3): f(Tensor(_rand(n, 4)).reshape(b.bind(n), 4))
  # a concrete size that changes, another variable, the same name with other bounds
  with pytest.raises(JitError, match=r"argument 'x' is a Tensor \(b, 5\) .*captured as a Tensor \(b, 4\) "):
    f(Tensor(_rand(2, 5)).reshape(b.bind(2), 5))
  with pytest.raises(JitError, match="captured as a Tensor"): f(Tensor(_rand(2, 4)))
  with pytest.raises(JitError, match=r"b in \[1, 9\], but it was captured as a Tensor \(b, 4\) .*b in \[1, 8\]"):
    f(Tensor(_rand(2, 4)).reshape(Variable("b", 1, 9).bind(2), 4))
  g = TinyJit(lambda x, n: x[:n].sum())
  x = Tensor(_rand(8)).realize()
  for n in (2, 3): g(x, Variable("n", 1, 8).bind(n))
  with pytest.raises(JitError, match=r"argument 'n' is variable 'n' in \[1, 7\] but was variable 'n' in \[1, 8\]"):
    g(x, Variable("n", 1, 7).bind(2))
  with pytest.raises(ValueError, match="outside n's bounds"): Variable("n", 1, 8).bind(9)

def test_chunked_multihead_attention_at_start_pos_replays_without_compiling():
  # an LLM prefill chunk of T tokens at start_pos: a table row window (RoPE-style), the KV-cache write, attention over
  # the cache prefix with a causal mask whose diagonal is symbolic; one capture serves every start_pos
  H, D, MAX, T = 2, 4, 16, 3
  nw = [_rand(H * D, H * D) * 0.3 for _ in range(3)]
  nf = _rand(MAX, D)
  wq, wk, wv, freqs = (Tensor(a).realize() for a in (*nw, nf))
  ck, cv = Tensor.zeros(1, MAX, H, D).contiguous().realize(), Tensor.zeros(1, MAX, H, D).contiguous().realize()
  @TinyJit
  def chunk(x, sp):
    q = (x @ wq).reshape(1, T, H, D) * freqs[sp:sp + T].reshape(1, T, 1, D)
    ck[:, sp:sp + T].assign((x @ wk).reshape(1, T, H, D)).realize()
    cv[:, sp:sp + T].assign((x @ wv).reshape(1, T, H, D)).realize()
    s = q.transpose(1, 2) @ ck[:, :sp + T].permute(0, 2, 3, 1) / math.sqrt(D)
    mask = Tensor.full((1, 1, T, sp + T), float("-inf")).triu(sp + 1)
    return ((s + mask).softmax(-1) @ cv[:, :sp + T].transpose(1, 2)).transpose(1, 2).reshape(1, T, H * D)
  start_pos, keys, vals = Variable("start_pos", 0, MAX - T), [], []
  for k, p in enumerate((0, 3, 6, 9, 13)):
    x = _rand(1, T, H * D)
    with _Compiles() as c: out = chunk(Tensor(x), start_pos.bind(p)).numpy()
    if k >= 1: assert (c.programs, c.compiles) == ([], 0), f"start_pos {p} compiled"
    keys.append((x[0] @ nw[1]).reshape(T, H, D)); vals.append((x[0] @ nw[2]).reshape(T, H, D))
    # the cache rows are the chunks written so far, in position order (p = 13 overwrites nothing it reads)
    pos = np.concatenate([np.arange(q, q + T) for q in (0, 3, 6, 9, 13)[:k + 1]])
    K, V = np.zeros((MAX, H, D), np.float32), np.zeros((MAX, H, D), np.float32)
    K[pos], V[pos] = np.concatenate(keys), np.concatenate(vals)
    q = (x[0] @ nw[0]).reshape(T, H, D) * nf[p:p + T].reshape(T, 1, D)
    s = np.einsum("thd,shd->hts", q, K[:p + T]) / math.sqrt(D) + np.triu(np.full((T, p + T), -np.inf), p + 1)
    e = np.exp(s - s.max(-1, keepdims=True))
    ref = np.einsum("hts,shd->thd", e / e.sum(-1, keepdims=True), V[:p + T]).reshape(1, T, H * D)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)
