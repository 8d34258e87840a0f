"""Gradient contributions that are alike broadcast products are summed as one product of their stacked operands
(gradient._sum_contributions): the weight of a recurrence unrolled over T steps got T products dG_t^T H_t, summed in one
kernel that read 2T inputs and reduced only over the batch; stacked, it is one matmul over steps x batch. And an
embedding's weight gradient is a plain matmul of a stored one-hot (Tensor.embedding). The gradients are torch's."""
import numpy as np
import pytest
import torch
from tinygrad import Tensor, nn
from tinygrad.uop import Ops
import tinygrad.gradient as gradient
import tinygrad.tensor as tensor_mod

def _reduce_kernels(sched: list) -> list:
  return [si.ast for si in sched if si.ast.op is Ops.SINK and any(u.op is Ops.REDUCE for u in si.ast.toposort())]

def _reduce_size(ast) -> int:
  return int(np.prod([u.src[0].arg for u in ast.toposort() if u.op is Ops.RANGE and u.arg[-1].name == "REDUCE"]))

def _reduces(sched: list) -> list[int]:
  """The length of every reduce in the schedule (the product of its ranges' sizes)."""
  return [int(np.prod([r.src[0].arg for r in red.src[1:]])) for ast in _reduce_kernels(sched) for red in ast.toposort()
          if red.op is Ops.REDUCE]

def recurrence(steps: int, batch: int, n: int, k: int):
  """h_t = tanh(x_t + h_{t-1} @ W^T)[:, :k] over `steps` steps, loss sum(h_T * g): W's gradient (its schedule and value)
  and torch's."""
  rng = np.random.default_rng(0)
  wn = (rng.standard_normal((n, k)) * 0.1).astype(np.float32)
  xs = [rng.standard_normal((batch, n)).astype(np.float32) for _ in range(steps)]
  h0, g = rng.standard_normal((batch, k)).astype(np.float32), rng.standard_normal((batch, k)).astype(np.float32)
  w, h = Tensor(wn, requires_grad=True), Tensor(h0)
  for x in xs: h = (Tensor(x) + h.matmul(w.T))[:, :k].tanh()
  (h * Tensor(g)).sum().backward()
  assert w.grad is not None
  tw, th = torch.tensor(wn, requires_grad=True), torch.tensor(h0)
  for x in xs: th = (torch.tensor(x) + th @ tw.T)[:, :k].tanh()
  (th * torch.tensor(g)).sum().backward()
  assert tw.grad is not None
  return w.grad.schedule(), w.grad, tw.grad.numpy()

def test_a_recurrent_weight_gradient_is_one_matmul_over_steps_and_batch():
  steps, batch, n, k = 8, 16, 512, 96
  assert batch * n * k >= gradient.STACK_MIN_ELEMENTS and steps >= gradient.STACK_MIN_PRODUCTS
  sched, got, ref = recurrence(steps, batch, n, k)
  # NOTE: summed, the gradient's kernel reduced over the batch (16) and read every step's two operands; stacked, one
  # kernel reduces over the steps and the batch together (the stack's reduce merged with the weight's own)
  assert any(_reduce_size(ast) == steps * batch for ast in _reduce_kernels(sched)), \
    [_reduce_size(a) for a in _reduce_kernels(sched)]
  np.testing.assert_allclose(got.numpy(), ref, rtol=1e-4, atol=1e-4)

def test_more_products_than_a_stack_takes_are_several_stacks(monkeypatch):
  # NOTE: a stack's cat is branch-free up to CUT's 32 pieces: 8 products at most 4 a stack are 2 stacks of 4, each one
  # reduce over its 4 steps x the batch (the scheduler puts both in one kernel)
  monkeypatch.setattr(gradient, "STACK_MAX_PRODUCTS", 4)
  steps, batch, n, k = 8, 16, 512, 96
  sched, got, ref = recurrence(steps, batch, n, k)
  assert _reduces(sched).count(4 * batch) == 2 and steps * batch not in _reduces(sched), _reduces(sched)
  np.testing.assert_allclose(got.numpy(), ref, rtol=1e-4, atol=1e-4)

def test_few_or_small_products_are_summed_as_before():
  for steps, batch, n, k in ((gradient.STACK_MIN_PRODUCTS - 1, 16, 512, 128), (6, 2, 16, 8)):
    sched, got, ref = recurrence(steps, batch, n, k)
    assert not any(_reduce_size(ast) == steps * batch for ast in _reduce_kernels(sched))
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-4, atol=1e-4)

def test_stacking_off_gives_the_same_gradient(monkeypatch):
  steps, batch, n, k = 5, 16, 512, 96
  _, on, ref = recurrence(steps, batch, n, k)
  monkeypatch.setattr(gradient, "STACK_MIN_PRODUCTS", 1 << 30)
  sched, off, _ = recurrence(steps, batch, n, k)
  assert not any(_reduce_size(ast) == steps * batch for ast in _reduce_kernels(sched))
  np.testing.assert_allclose(on.numpy(), off.numpy(), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(on.numpy(), ref, rtol=1e-4, atol=1e-4)

def test_an_lstm_matches_torch():
  # NOTE: nn.LSTM over 4 steps: its weight_hh's gradient is 4 products of 16 x 256 x 64 (2^16) elements, stacked
  rng = np.random.default_rng(1)
  xn = rng.standard_normal((4, 16, 32)).astype(np.float32)
  assert 16 * 256 * 64 >= gradient.STACK_MIN_ELEMENTS and 4 >= gradient.STACK_MIN_PRODUCTS
  ours, theirs = nn.LSTM(32, 64), torch.nn.LSTM(32, 64)
  for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
    setattr(ours, name, Tensor(getattr(theirs, name).detach().numpy(), requires_grad=True))
  out, _ = ours(Tensor(xn))
  out.square().sum().backward()
  tout, _ = theirs(torch.tensor(xn))
  tout.square().sum().backward()
  for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
    np.testing.assert_allclose(getattr(ours, name).grad.numpy(), getattr(theirs, name).grad.numpy(), rtol=2e-4,
                               atol=2e-4, err_msg=name)

def embedding_grad(vocab: int, dim: int, shape: tuple[int, ...], padding_idx: int | None = None):
  rng = np.random.default_rng(2)
  idx = rng.integers(0, vocab, shape).astype(np.int32)
  wn, g = rng.standard_normal((vocab, dim)).astype(np.float32), rng.standard_normal((*shape, dim)).astype(np.float32)
  emb = nn.Embedding(vocab, dim, padding_idx=padding_idx)
  emb.weight = Tensor(wn, requires_grad=True)
  (emb(Tensor(idx)) * Tensor(g)).sum().backward()
  assert emb.weight.grad is not None
  temb = torch.nn.Embedding(vocab, dim, padding_idx=padding_idx)
  temb.weight = torch.nn.Parameter(torch.tensor(wn))
  (temb(torch.tensor(idx.astype(np.int64))) * torch.tensor(g)).sum().backward()
  return emb.weight.grad.schedule(), emb.weight.grad, temb.weight.grad.numpy()

def _compares_in_reduce(sched: list) -> int:
  """Kernels that compare inside a reduce's body (a one-hot computed in the matmul; the padding row's select after it
  does not count)."""
  return sum(1 for ast in _reduce_kernels(sched)
             if any(r.op is Ops.REDUCE and any(u.op is Ops.CMPEQ for u in r.src[0].toposort()) for r in ast.toposort()))

@pytest.mark.parametrize("padding_idx", [None, 3])
def test_an_embedding_gradient_is_a_matmul_of_a_stored_one_hot(padding_idx):
  sched, got, ref = embedding_grad(300, 64, (4, 8), padding_idx)
  # NOTE: the one-hot's compare is in the kernel that stores it, not in the matmul's reduce
  assert _compares_in_reduce(sched) == 0
  np.testing.assert_allclose(got.numpy(), ref, rtol=1e-5, atol=1e-5)

@pytest.mark.parametrize("padding_idx", [None, 3])
def test_a_one_hot_too_big_to_store_is_segment_sums(monkeypatch, padding_idx):
  # fused into the product, the one-hot's compares were vocab x tokens x dim (GPT-2's 50257-row table over 2048 tokens:
  # 25.7 s); as segment sums, tokens x tokens (the sort) + vocab x tokens (the runs' ends) + vocab x dim (the loads)
  from tinygrad.codegen import get_program
  from tinygrad.device import Device
  monkeypatch.setattr(tensor_mod, "EMBEDDING_STORED_ONE_HOT_MAX", 300 * 32 - 1)
  sched, got, ref = embedding_grad(300, 64, (4, 8), padding_idx)
  ops = sum(get_program(si.ast, Device[got.device].renderer, []).estimates.ops for si in sched)
  assert ops < 300 * 32 * 64, ops
  np.testing.assert_allclose(got.numpy(), ref, rtol=1e-5, atol=1e-5)

def test_segment_sums_find_the_ends_of_many_runs_by_a_search():
  # 20000 rows over 4096 indices: a compare of every index with every end is 82M compares (249M ops in all, estimated);
  # by a binary search of the 4096 sorted indices for the 20001 ends, 13 steps of a load and a compare each
  from tinygrad.codegen import get_program
  from tinygrad.device import Device
  idx = Tensor.randint(4096, high=20000).realize()
  seg = Tensor._segment_sums(idx, Tensor.rand(4096, 8).realize(), 20000)
  ops = sum(get_program(si.ast, Device[idx.device].renderer, []).estimates.ops for si in Tensor.schedule(seg))
  assert ops < 20000 * 4096 // 4, ops

@pytest.mark.parametrize("device", ["C", "LLVM", "PYTHON"])
def test_segment_sums_take_repeated_indices_and_none_outside_the_table(monkeypatch, device):
  import importlib.util
  from tinygrad.helpers import Context
  from tests.llvm_device import llvm_cpu_device, c_cpu_device
  if device == "LLVM" and importlib.util.find_spec("llvmlite") is None: pytest.skip("the LLVM path needs llvmlite")
  dev = {"C": c_cpu_device, "LLVM": llvm_cpu_device}[device]() if device != "PYTHON" else "PYTHON"
  monkeypatch.setattr(tensor_mod, "EMBEDDING_STORED_ONE_HOT_MAX", 0)
  monkeypatch.setattr(tensor_mod, "SORT_RANK_MAX_WORK", 0)  # the indices' sort by its network
  rng = np.random.default_rng(4)
  # few rows, so most are repeated; -1, 40 and 57 are outside the table (a zero row, no gradient), and as int64 so are
  # 2**33 + 3 and 5 - 2**32 (3 and 5 in their low 32 bits: sorted as int32, they must not wrap into the table)
  idx = rng.integers(0, 9, (3, 11)).astype(np.int64)
  idx[0, 2], idx[1, 5], idx[2, 0] = -1, 40, 57
  wn, g = rng.standard_normal((40, 24)).astype(np.float32), rng.standard_normal((3, 11, 24)).astype(np.float32)
  idx64 = idx.copy()
  idx64[0, 3], idx64[1, 0] = 2**33 + 3, 5 - 2**32
  idxu = np.where(idx < 0, 7, idx).astype(np.uint32)
  idxu[2, 4] = 2**32 - 3  # outside, and 2u + 2 would wrap in int32
  # the runs' ends by a compare of every index with every end, and by a binary search of the sorted indices
  for ends_max in (1 << 62, 0):
    monkeypatch.setattr(tensor_mod, "SEGMENT_ENDS_MAX_COMPARES", ends_max)
    for ix in (idx.astype(np.int32), idx64, idxu):
      want = np.zeros((40, 24), np.float64)
      keep = (ix.astype(np.int64) >= 0) & (ix < 40)
      np.add.at(want, ix[keep].astype(np.int64), g[keep].astype(np.float64))
      with Context(SPEC=2):
        w = Tensor(wn, device=dev, requires_grad=True)
        got, = Tensor(ix, device=dev).embedding(w).gradient(w, gradient=Tensor(g, device=dev))
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6, err_msg=f"{ix.dtype} {ends_max}")
