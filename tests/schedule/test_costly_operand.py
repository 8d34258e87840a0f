"""Where a costly elementwise operand of a matmul is computed: an expression with a transcendental op (a gelu, a
layernorm) or COSTLY_ALU float ops (an affine normalisation) read through a broadcast at least RECOMPUTE_BROADCAST times
over is stored by its own kernel instead of being recomputed for every output column; cheap work (a scale), the
decoding of narrow data (a quantized weight's dequantization) and a small broadcast (a gelu feeding a few output
columns) stay fused; an attention's probabilities, read once per value of a head, are stored in a training step (the
backward reads them too) and in inference (the exp2 calls out of the matmul's loop). Values against torch and numpy."""
import importlib.util
import numpy as np
import pytest
import torch
from tinygrad import Tensor, dtypes
from tinygrad.uop import Ops
from tinygrad.schedule.rangeify import RECOMPUTE_BROADCAST, RECOMPUTE_SHARED

def kernels(t: Tensor) -> list[tuple[int, set[Ops]]]:
  """(the size of the buffer it writes, the ops it computes) of each kernel the schedule of t runs."""
  return [(si.bufs[0].size, {u.op for u in si.ast.toposort()}) for si in t.schedule() if si.ast.op is Ops.SINK]

def rand(seed: int, *shape: int) -> np.ndarray: return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)

def test_gelu_and_layernorm_operands_are_stored_once_not_recomputed_per_column():
  # NOTE: 48 features, so that the operand's kernel (16 x 48) and the matmul's (16 x RECOMPUTE_BROADCAST) differ in size
  x, w = rand(0, 16, 48), rand(1, RECOMPUTE_BROADCAST, 48)
  for f, tf in ((lambda t: t.gelu(), lambda t: torch.nn.functional.gelu(t, approximate="tanh")),
                (lambda t: t.layernorm(), lambda t: torch.nn.functional.layer_norm(t, (48,), eps=1e-5))):
    out = f(Tensor(x)) @ Tensor(w).T
    ks = kernels(out)
    # the matmul kernel (the 16 x 128 output) evaluates no transcendental itself; one kernel before it did
    (mm,) = [ops for size, ops in ks if size == 16 * RECOMPUTE_BROADCAST]
    assert not mm & {Ops.EXP2, Ops.SQRT}, mm
    assert any(ops & {Ops.EXP2, Ops.SQRT} for size, ops in ks if size == 16 * 48), ks
    np.testing.assert_allclose(out.numpy(), (tf(torch.from_numpy(x)) @ torch.from_numpy(w).T).numpy(), rtol=1e-4,
                               atol=1e-4)

def test_cheap_operands_and_small_broadcasts_stay_fused():
  x, w = rand(2, 16, 64), rand(3, RECOMPUTE_BROADCAST, 64)
  # a scaled operand: one kernel
  assert len(kernels((Tensor(x) * 2) @ Tensor(w).T)) == 1
  # a Q8_0-like weight dequantized in the matmul (int8 * float16 scale): the weight is never stored as float32
  q = np.random.default_rng(4).integers(-127, 128, (RECOMPUTE_BROADCAST, 2, 32)).astype(np.int8)
  sc = np.random.default_rng(5).random((RECOMPUTE_BROADCAST, 2, 1)).astype(np.float16)
  deq = (Tensor(q).cast(dtypes.float32) * Tensor(sc).cast(dtypes.float32)).reshape(RECOMPUTE_BROADCAST, 64)
  # NOTE: read by RECOMPUTE_BROADCAST rows of x, so it is broadcast often enough: its int8 and float16 reads keep it fused
  xr = rand(7, RECOMPUTE_BROADCAST, 64)
  out = Tensor(xr) @ deq.T
  assert len(kernels(out)) == 1
  wf = (q.astype(np.float32) * sc.astype(np.float32)).reshape(-1, 64)
  # NOTE: float32 sums of 64 products in any order (the lanes' order is the host's vector width): within 64 ulps of the
  # sum of the products' magnitudes (an output near 0 from terms near 100 differs by 1e-4 between orders)
  bound = 64 * np.finfo(np.float32).eps * (np.abs(xr) @ np.abs(wf).T)
  assert np.all(np.abs(out.numpy() - xr.astype(np.float64) @ wf.T.astype(np.float64)) <= bound)
  # a gelu broadcast fewer times over than RECOMPUTE_SHARED stays in the matmul's kernel (its exp calls are few next
  # to the products: 32 outputs a row)
  small = Tensor(x).gelu() @ Tensor(rand(6, RECOMPUTE_SHARED // 2, 64)).T
  assert len(kernels(small)) == 1

def test_a_gelu_read_by_a_few_dozen_output_columns_is_stored_with_its_exps_in_its_own_kernel():
  # broadcast RECOMPUTE_SHARED times over (below RECOMPUTE_BROADCAST): its exp2 calls would clobber the matmul's register
  # tile in every reduce step, so it is stored (_broadcast_calls); its exps, read only inside its own kernel, stay in it
  x, w = rand(20, 16, 48), rand(21, RECOMPUTE_SHARED, 48)
  out = Tensor(x).gelu() @ Tensor(w).T
  ks = kernels(out)
  assert len(ks) == 2, ks
  (mm,) = [ops for size, ops in ks if size == 16 * RECOMPUTE_SHARED]
  assert Ops.EXP2 not in mm, mm
  ref = torch.nn.functional.gelu(torch.from_numpy(x), approximate="tanh") @ torch.from_numpy(w).T
  np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-4, atol=1e-4)

def test_an_affine_normalisation_with_stored_statistics_is_stored_once():
  # (x - mean) * rstd * g + b with mean and rstd already buffers (a batchnorm's running statistics): four float ALU
  # ops per element, no transcendental left, recomputed per output column if fused: stored
  x, w = rand(8, 16, 64), rand(9, RECOMPUTE_BROADCAST, 64)
  m, s, g, b = rand(10, 64), np.abs(rand(11, 64)) + 0.5, rand(12, 64), rand(13, 64)
  norm = (Tensor(x) - Tensor(m)) * Tensor(s) * Tensor(g) + Tensor(b)
  out = norm @ Tensor(w).T
  assert len(kernels(out)) == 2, kernels(out)
  np.testing.assert_allclose(out.numpy(), (((x - m) * s * g + b) @ w.T), rtol=1e-4, atol=1e-4)
  # one op less (x * s + b) stays fused
  assert len(kernels((Tensor(x) * Tensor(s) + Tensor(b)) @ Tensor(w).T)) == 1

def test_a_conv_input_read_by_its_windows_and_output_channels_is_stored_once():
  # a batchnorm + relu fused into a 3x3 conv's input: each pixel is read by 9 windows x cout channels (9 x 32 = 288
  # times over, though the output channels' own broadcast is only 32): stored by its own kernel, not recomputed
  x, w = rand(14, 2, 8, 6, 6), rand(15, 32, 8, 3, 3)
  m, s, g, b = rand(16, 8, 1, 1), np.abs(rand(17, 8, 1, 1)) + 0.5, rand(18, 8, 1, 1), rand(19, 8, 1, 1)
  act = ((Tensor(x) - Tensor(m)) * Tensor(s) * Tensor(g) + Tensor(b)).relu()
  out = act.conv2d(Tensor(w), padding=1)
  ks = kernels(out)
  assert len(ks) == 2, ks
  ref = torch.nn.functional.conv2d(torch.from_numpy(np.maximum((x - m) * s * g + b, 0)), torch.from_numpy(w), padding=1)
  np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-4, atol=1e-4)
  # with 4 output channels (36 reads per pixel) it stays fused
  assert len(kernels(act.conv2d(Tensor(w[:4]), padding=1))) == 1

def test_a_max_pool_window_gradient_is_stored_before_its_col2im():
  # the autograd gradient of a max over 4x4 stride-2 windows of relu(affine(x)) (max_pool2d's values, padded with the
  # least float rather than -inf: not its graph, whose node carries its own gradient rule; 16 taps, past the windows
  # that Tensor._pool differentiates by phases itself): per window element the recomputed pool input, the equality test
  # with the window's maximum and the share (RECOMPUTE_WINDOW) are one stored kernel over the windows (2 x 4 x 8 x 8 x
  # 16 values), and the col2im sum over the view's copies only loads them (fused, no other kernel of the windows' size
  # exists). max_pool2d's own rule (3x3 here) gathers at each input position instead: no kernel of the windows' size
  x, m, s = rand(20, 2, 4, 16, 16), rand(21, 4, 1, 1), np.abs(rand(22, 4, 1, 1)) + 0.5
  w = rand(23, 2, 4, 8, 8)
  for own_rule, k in ((False, 4), (True, 3)):
    tx = torch.from_numpy(x).requires_grad_()
    tout = torch.nn.functional.max_pool2d(((tx - torch.from_numpy(m)) * torch.from_numpy(s)).relu(), k, 2, 1)
    tout.backward(torch.from_numpy(w))
    xt = Tensor(x, requires_grad=True)
    act = ((xt - Tensor(m)) * Tensor(s)).relu()
    out = act.max_pool2d(k, 2, padding=1) if own_rule else \
      act.pad(((0, 0), (0, 0), (1, 1), (1, 1)), value=-3.0e38)._pool((k, k), 2).max((-2, -1))
    (g,) = out.gradient(xt, gradient=Tensor(w))
    ks = kernels(g)
    assert any(size == 2 * 4 * 8 * 8 * k * k for size, _ in ks) != own_rule, ks
    if not own_rule: assert [ops for size, ops in ks if size == 2 * 4 * 8 * 8 * k * k and Ops.CMPEQ in ops], ks
    np.testing.assert_allclose(g.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-5)

def test_small_windows_gather_their_gradient_by_phases():
  # the windows of a conv (3x3 at strides 1 and 2, 1x1 at stride 2, dilated) and of an average pool: their gradient
  # is one elementwise kernel over the input placing each tap's slice by pads (autograd's fold of the windows' copies
  # was a reduce over them, with division and modulo in its index), and matches torch's
  def folds(t: Tensor) -> int:
    return sum(1 for si in t.schedule() if si.ast.op is Ops.SINK and si.bufs[0].size == t.numel() and
               any(u.op is Ops.REDUCE for u in si.ast.toposort()))
  x, w3, w1 = rand(50, 2, 3, 11, 11), rand(51, 4, 3, 3, 3), rand(52, 4, 3, 1, 1)
  for stride, dil, wt in ((1, 1, w3), (2, 1, w3), (2, 2, w3), (2, 1, w1)):
    tx = torch.from_numpy(x).requires_grad_()
    torch.nn.functional.conv2d(tx, torch.from_numpy(wt), stride=stride, dilation=dil, padding=1).square().sum().backward()
    xt = Tensor(x, requires_grad=True)
    (g,) = xt.conv2d(Tensor(wt), stride=stride, dilation=dil, padding=1).square().sum().gradient(xt)
    assert folds(g) == 0, (stride, dil)
    np.testing.assert_allclose(g.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-4)
  tx = torch.from_numpy(x).requires_grad_()
  torch.nn.functional.avg_pool2d(tx, 3, 2, 1).square().sum().backward()
  xt = Tensor(x, requires_grad=True)
  (g,) = xt.avg_pool2d(3, 2, 1).square().sum().gradient(xt)
  assert folds(g) == 0
  np.testing.assert_allclose(g.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-5)

def test_a_training_step_through_a_max_pool_does_not_store_its_windows():
  # ResNet's stem: conv -> batchnorm (batch statistics) -> relu -> 3x3 stride-2 max pool, in one SGD step. The pool's
  # forward max and its gradient's maxima count read the same padded windows of the computed input, which were stored
  # whole (9 values an input position, then read by both). The input is stored and the count reads it tap by tap: no
  # kernel of the step writes the windows (nor the conv's: the layer after the pool is 1x1). The parameters after the
  # step are torch's
  from tinygrad.nn import BatchNorm2d, Conv2d
  from tinygrad.nn.optim import SGD
  from tinygrad.uop import hooks
  x, w1, w2 = rand(40, 2, 3, 32, 32), rand(41, 8, 3, 7, 7) * 0.1, rand(42, 4, 8, 1, 1)
  c1, bn, c2 = Conv2d(3, 8, 7, 2, 3, bias=False), BatchNorm2d(8), Conv2d(8, 4, 1, bias=False)
  c1.weight, c2.weight = Tensor(w1), Tensor(w2)
  opt = SGD([c1.weight, bn.weight, bn.bias, c2.weight], lr=0.1)
  sizes: list[int] = []
  def launched(runner, bufs, start, seconds) -> None: sizes.append(bufs[0].size)
  hooks.launched.append(launched)
  try:
    with Tensor.train():
      opt.zero_grad()
      c2(bn(c1(Tensor(x))).relu().max_pool2d(3, 2, padding=1)).square().mean().backward()
      opt.step()
  finally: hooks.launched.remove(launched)
  assert sizes and 2 * 8 * 8 * 8 * 9 not in sizes, sizes
  t1, t2 = torch.from_numpy(w1).requires_grad_(), torch.from_numpy(w2).requires_grad_()
  tbn = torch.nn.BatchNorm2d(8)
  tout = torch.nn.functional.conv2d(torch.nn.functional.max_pool2d(tbn(torch.nn.functional.conv2d(
    torch.from_numpy(x), t1, stride=2, padding=3)).relu(), 3, 2, 1), t2).square().mean()
  tout.backward()
  for ours, ref in ((c1.weight, t1), (bn.weight, tbn.weight), (bn.bias, tbn.bias), (c2.weight, t2)):
    assert ref.grad is not None
    np.testing.assert_allclose(ours.numpy(), (ref - 0.1 * ref.grad).detach().numpy(), rtol=1e-4, atol=1e-5)

def test_attention_probabilities_are_stored_so_no_matmul_calls_exp2_in_inference_or_training():
  # causal attention, B=2 H=2 T=16, a head of 64 values: probabilities x V reads exp(score - max) / sum 64 times over
  # (RECOMPUTE_SHARED), and the backward's dQ and dK matmuls read the scores' gradient (which holds them) as often. In
  # inference the probabilities are stored (_broadcast_calls: an exp2 call in the matmul's loop clobbers its register
  # tile), and so are the exps, which the softmax's sum reads too: one kernel computes them, elementwise. In a training
  # step the backward reads the probabilities too: stored, as is the scores' gradient, and no matmul computes an exp2
  q, k, v, w = (rand(24 + i, 2, 2, 16, 64) for i in range(4))
  def sched(*ts: Tensor) -> list[tuple[int, set[Ops]]]:
    return [(si.bufs[0].size, {u.op for u in si.ast.toposort()}) for si in Tensor.schedule(*ts) if si.ast.op is Ops.SINK]
  def matmuls_with_exp(ks: list[tuple[int, set[Ops]]]) -> int:
    return sum(1 for size, ops in ks if size == 2 * 2 * 16 * 64 and Ops.EXP2 in ops and ops & {Ops.REDUCE_AXIS, Ops.REDUCE})
  out = Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), is_causal=True)
  ks = sched(out)
  assert matmuls_with_exp(ks) == 0, ks
  (exps,) = [(size, ops) for size, ops in ks if Ops.EXP2 in ops]
  assert exps[0] == 2 * 2 * 16 * 16 and not exps[1] & {Ops.REDUCE_AXIS, Ops.REDUCE}, ks
  ref = torch.nn.functional.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q, k, v)), is_causal=True)
  np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-5, atol=1e-5)
  tq, tk, tv = (Tensor(a, requires_grad=True) for a in (q, k, v))
  out = tq.scaled_dot_product_attention(tk, tv, is_causal=True)
  grads = out.gradient(tq, tk, tv, gradient=Tensor(w))
  ks = sched(out, *grads)
  assert matmuls_with_exp(ks) == 0, ks
  assert any(size == 2 * 2 * 16 * 16 and Ops.EXP2 in ops and not ops & {Ops.REDUCE_AXIS, Ops.REDUCE} for size, ops in ks)
  rq, rk, rv = (torch.from_numpy(a).requires_grad_() for a in (q, k, v))
  rout = torch.nn.functional.scaled_dot_product_attention(rq, rk, rv, is_causal=True)
  rout.backward(torch.from_numpy(w))
  np.testing.assert_allclose(out.numpy(), rout.detach().numpy(), rtol=1e-5, atol=1e-5)
  for g, r in zip(grads, (rq, rk, rv)):
    assert r.grad is not None
    np.testing.assert_allclose(g.numpy(), r.grad.numpy(), rtol=1e-4, atol=1e-4)

def test_a_concatenation_read_by_a_matmul_is_stored_once():
  # the gradient of a fused qkv projection is the cat of dq, dk and dv (three padded views summed): read by the
  # matmuls of dX and dW as a broadcast operand, each element was three gated loads and their masks' index math per
  # output column; stored, it is one load. A GPT-2 block's step (D=768 H=12, LLVM path, with the stored gradient): its
  # dX kernel 49.7 -> 12.9 ms, the step 320 -> 271 ms
  a, b_, c = rand(30, 16, 48), rand(31, 16, 48), rand(32, 16, 48)
  w = rand(33, 144, RECOMPUTE_BROADCAST)
  out = Tensor(a).cat(Tensor(b_), Tensor(c), dim=1) @ Tensor(w)
  ks = kernels(out)
  assert len(ks) == 2 and any(size == 16 * 144 and Ops.REDUCE not in ops for size, ops in ks), ks
  np.testing.assert_allclose(out.numpy(), np.concatenate([a, b_, c], 1) @ w, rtol=1e-4, atol=1e-4)
  # read fewer times over: fused
  assert len(kernels(Tensor(a).cat(Tensor(b_), Tensor(c), dim=1) @ Tensor(w[:, :32]))) == 1

@pytest.mark.parametrize("path", ["C", *(["LLVM"] if importlib.util.find_spec("llvmlite") else []), "PYTHON"])
def test_stored_probabilities_and_gelu_match_torch_on_every_cpu_path(path):
  # the kernels _broadcast_calls makes (the exps, the probabilities, a batched matmul over them; a stored gelu) on the C
  # path, the LLVM path and the PYTHON interpreter, under SPEC=2
  from tests.llvm_device import llvm_cpu_device, c_cpu_device
  from tinygrad.helpers import Context
  dev = {"C": c_cpu_device, "LLVM": llvm_cpu_device, "PYTHON": lambda: "PYTHON"}[path]()
  q, k, v = (rand(40 + i, 1, 2, 16, 64) for i in range(3))
  x, w = rand(43, 8, 48), rand(44, RECOMPUTE_SHARED, 48)
  with Context(SPEC=2):
    att = Tensor(q, device=dev).scaled_dot_product_attention(Tensor(k, device=dev), Tensor(v, device=dev),
                                                             is_causal=True)
    g = Tensor(x, device=dev).gelu() @ Tensor(w, device=dev).T
    got_att, got_g = att.numpy(), g.numpy()
  ref = torch.nn.functional.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q, k, v)), is_causal=True)
  np.testing.assert_allclose(got_att, ref.numpy(), rtol=1e-5, atol=1e-5)
  rg = torch.nn.functional.gelu(torch.from_numpy(x), approximate="tanh") @ torch.from_numpy(w).T
  np.testing.assert_allclose(got_g, rg.numpy(), rtol=1e-4, atol=1e-4)
