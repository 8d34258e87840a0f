"""Symbolic shapes on the default device (make test runs this file on PYTHON, the CPU's LLVM path and the emulated GPUs):
ops over bound variables against numpy at several bindings, the variable's edges included, with one set of kernels
for every binding, and a jitted KV-cache decode step. docs/symbolic.md."""
import math
import numpy as np
import pytest
from tinygrad import Tensor, TinyJit, Variable, hooks
from tinygrad.uop.sint import bound_value

# NOTE: the multi-device sweep runs these replicated only: a symbolic size on a split axis is refused (docs/multi.md)
pytestmark = pytest.mark.single_device("slices, reshapes and sums of symbolic size over a split axis are refused with "
                                       "a MultiDeviceError", split_only=True)

rng = np.random.default_rng(0)
N = 6
NA = rng.standard_normal((N, 4)).astype(np.float32)
NB = rng.standard_normal((4, N)).astype(np.float32)
NC = rng.standard_normal((N, N)).astype(np.float32)

def _softmax(x):
  e = np.exp(x - x.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)

# name: (tensor program of a bound variable v and the inputs, numpy of n)
CASES = {
  "elementwise": (lambda v, a, b, c: (a[:v] * 2 + 1).exp2(), lambda n: np.exp2(NA[:n] * 2 + 1)),
  "sum_along": (lambda v, a, b, c: a[:v].sum(0), lambda n: NA[:n].sum(0)),
  "max_over": (lambda v, a, b, c: a[:v].max(1), lambda n: NA[:n].max(1)),
  "mean_var": (lambda v, a, b, c: a[:v].mean(0) + a[:v].var(0, correction=0), lambda n: NA[:n].mean(0) + NA[:n].var(0)),
  "matmul_inner": (lambda v, a, b, c: b[:, :v] @ a[:v], lambda n: NB[:, :n] @ NA[:n]),
  "matmul_outer": (lambda v, a, b, c: a[:v] @ b, lambda n: NA[:n] @ NB),
  "softmax": (lambda v, a, b, c: c[:v, :v].softmax(-1), lambda n: _softmax(NC[:n, :n])),
  "cat_along": (lambda v, a, b, c: a[:v].cat(a[:2] * 3, dim=0), lambda n: np.concatenate([NA[:n], NA[:2] * 3])),
  "pad_permute": (lambda v, a, b, c: a[:v].pad(((1, 2), None)).permute(1, 0).contiguous(),
                  lambda n: np.pad(NA[:n], ((1, 2), (0, 0))).T),
  "broadcast_expand": (lambda v, a, b, c: a[:v, :1].expand(v, 4) * a[0], lambda n: NA[:n, :1] * NA[0]),
  "reshape": (lambda v, a, b, c: a[:v].reshape(v * 4).reshape(v, 2, 2).sum(2), lambda n: NA[:n].reshape(n, 2, 2).sum(2)),
  "window": (lambda v, a, b, c: c[v - 1:v] + c[v - 1], lambda n: NC[n - 1:n] + NC[n - 1]),
  "creation": (lambda v, a, b, c: Tensor.ones(v, 3) * Tensor.arange(v).reshape(v, 1), lambda n: np.ones((n, 3)) *
               np.arange(n).reshape(n, 1)),
  "cumsum": (lambda v, a, b, c: a[:v].cumsum(0), lambda n: NA[:n].cumsum(0)),
  "index_int_ends": (lambda v, a, b, c: a[:v][0] + a[:v][-1], lambda n: NA[0] + NA[n - 1]),
  "index_arrays": (lambda v, a, b, c: a[:v][Tensor([0, -1])] + a[:v][[0, 0]],
                   lambda n: NA[[0, n - 1]] + NA[[0, 0]]),
  "gather_strided": (lambda v, a, b, c: a[:v, ::2].gather(0, Tensor([[0, 0]])) + a[:v, 1::2].sum(0),
                     lambda n: NA[:1, ::2] + NA[:n, 1::2].sum(0)),
  "argmax": (lambda v, a, b, c: a[:v].argmax(0) + c[:v, :v].argmin(1, keepdim=True),
             lambda n: NA[:n].argmax(0) + NC[:n, :n].argmin(1)[:, None]),
  "size_as_value": (lambda v, a, b, c: a[:v] * v + (v + 1), lambda n: NA[:n] * n + (n + 1)),
}

def _concrete(t: Tensor) -> np.ndarray:
  return t.reshape(tuple(bound_value(s) for s in t.shape)).numpy()

# NOTE: make test runs this file on every backend; the default run takes a slice at the variable's two edges, the rest
# (and a middle binding) run with -m slow (make test-symbolic)
SLICE = ("softmax", "matmul_inner", "cat_along", "index_arrays", "cumsum", "reshape")
PARAMS = [pytest.param(name, bindings, marks=[] if name in SLICE and len(bindings) == 2 else [pytest.mark.slow],
                       id=f"{name}-at{len(bindings)}")
          for name in CASES for bindings in ((1, N), (3, 1, N)) if name in SLICE or len(bindings) == 3]

@pytest.mark.parametrize("name,bindings", PARAMS)
def test_symbolic_op_matches_numpy_and_compiles_once(name, bindings):
  f, ref = CASES[name]
  a, b, c = Tensor(NA).realize(), Tensor(NB).realize(), Tensor(NC).realize()
  var = Variable("n", 1, N)
  programs: list = []
  for k, n in enumerate(bindings):
    fn = hooks.register("compiled", lambda *args: programs.append(args))
    try: out = f(var.bind(n), a, b, c).realize()
    finally: hooks.unregister("compiled", fn)
    np.testing.assert_allclose(_concrete(out), ref(n), rtol=1e-4, atol=1e-5)
    # the kernels of the first binding serve the others
    if k == 0: first = len(programs)
    else: assert len(programs) == first, f"{name} at n={n} compiled {len(programs) - first} more programs"

def test_kv_cache_decode_step_replays_every_position():
  D, cap = 8, 8
  nw = [rng.standard_normal((D, D)).astype(np.float32) * 0.5 for _ in range(3)]
  wq, wk, wv = (Tensor(w).realize() for w in nw)
  ck, cv = Tensor.zeros(1, cap, D).contiguous().realize(), Tensor.zeros(1, cap, D).contiguous().realize()
  @TinyJit
  def step(x, pos):
    ck[:, pos:pos + 1].assign(x @ wk).realize()
    cv[:, pos:pos + 1].assign(x @ wv).realize()
    att = ((x @ wq) @ ck[:, :pos + 1].transpose(1, 2)) * (1 / math.sqrt(D))
    return att.softmax(-1) @ cv[:, :pos + 1]
  keys, vals = [], []
  var = Variable("pos", 0, cap - 1)
  for p in range(4):
    nx = rng.standard_normal((1, 1, D)).astype(np.float32)
    programs: list = []
    fn = hooks.register("compiled", lambda *args: programs.append(args))
    try: out = step(Tensor(nx), var.bind(p)).numpy()
    finally: hooks.unregister("compiled", fn)
    if p >= 2: assert programs == [], f"step {p} compiled {len(programs)} programs"
    keys.append(nx[0] @ nw[1]); vals.append(nx[0] @ nw[2])
    att = (nx[0] @ nw[0]) @ np.concatenate(keys).T / math.sqrt(D)
    np.testing.assert_allclose(out.reshape(1, D), _softmax(att) @ np.concatenate(vals), rtol=1e-4, atol=1e-5)

def test_conv_and_pooling_over_a_symbolic_batch_match_torch_and_compile_once():
  import torch
  import torch.nn.functional as F
  nx = rng.standard_normal((5, 2, 9, 9)).astype(np.float32)
  nw, nt = rng.standard_normal((4, 2, 3, 3)).astype(np.float32), rng.standard_normal((2, 3, 2, 2)).astype(np.float32)
  x, w, wt = Tensor(nx).realize(), Tensor(nw).realize(), Tensor(nt).realize()
  var = Variable("b", 1, 5)
  programs: list = []
  for k, n in enumerate((2, 5, 1)):
    v = var.bind(n)
    xs = x[:v]
    outs = [xs.conv2d(w, padding=1, stride=2), xs.max_pool2d(3, stride=2, ceil_mode=True),
            xs.avg_pool2d(2, padding=1, count_include_pad=False), xs.conv_transpose2d(wt, stride=2)]
    fn = hooks.register("compiled", lambda *args: programs.append(args))
    try: Tensor.realize(*outs)
    finally: hooks.unregister("compiled", fn)
    got = [_concrete(o) for o in outs]
    tx = torch.from_numpy(nx[:n])
    refs = [F.conv2d(tx, torch.from_numpy(nw), padding=1, stride=2), F.max_pool2d(tx, 3, 2, ceil_mode=True),
            F.avg_pool2d(tx, 2, padding=1, count_include_pad=False), F.conv_transpose2d(tx, torch.from_numpy(nt), stride=2)]
    for g, r in zip(got, refs): np.testing.assert_allclose(g, r.numpy(), rtol=1e-4, atol=1e-5)
    # the kernels of the first binding serve the others
    if k == 0: first = len(programs)
    else: assert len(programs) == first, f"batch {n} compiled {len(programs) - first} more programs"
  # a symbolic spatial size still needs concrete sizes, naming the op
  with pytest.raises(Exception, match=r"conv2d .*symbolic"):
    x[:, :, :var.bind(4)].conv2d(w)
