"""Kernel counts of the fusion targets through the Tensor front end, and their values computed by evaluating the
scheduled ASTs with the kernel evaluator (so these check the scheduler, independent of codegen)."""
import numpy as np
import pytest
from tinygrad import Tensor
from fuzz.oracles.kernel_ref import eval_schedule

def schedule_and_eval(t: Tensor):
  # NOTE: schedule() leaves the tensor lazy; the tensor is the output (buffer 0) of the last kernel
  items = t.schedule()
  arrays = eval_schedule(items)
  return len(items), arrays[items[-1].bufs[0]].reshape(t.shape), items

rng = np.random.default_rng(0)
A, B, C = (rng.standard_normal((8, 8)).astype(np.float32) for _ in range(3))
X = rng.standard_normal((2, 3, 7, 7)).astype(np.float32)
W = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)

def _softmax(x):
  e = np.exp(x - x.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)

def _conv(x, w, pad):
  x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
  oh, ow = x.shape[2] - w.shape[2] + 1, x.shape[3] - w.shape[3] + 1
  return sum(np.einsum("nchw,oc->nohw", x[:, :, i:i+oh, j:j+ow], w[:, :, i, j]) for i in range(w.shape[2]) for j in range(w.shape[3]))

CASES = {
  "sum_of_add": (lambda a, b, c: (a + b).sum(), lambda: (A + B).sum(), 1),
  "matmul_add_relu": (lambda a, b, c: (a @ b + c).relu(), lambda: np.maximum(A @ B + C, 0), 1),
  "transpose_contiguous": (lambda a, b, c: a.T.contiguous(), lambda: A.T, 1),
  "arange": (lambda a, b, c: Tensor.arange(10), lambda: np.arange(10), 1),
  "cat": (lambda a, b, c: a.cat(b, c), lambda: np.concatenate([A, B, C]), 1),
  "softmax": (lambda a, b, c: a.softmax(-1), lambda: _softmax(A), 3),
  "conv2d": (lambda a, b, c: Tensor(X).conv2d(Tensor(W), padding=1), lambda: _conv(X, W, 1), 1),
}

@pytest.mark.parametrize("name", list(CASES))
def test_fusion_target(name):
  build, ref, max_kernels = CASES[name]
  n, out, items = schedule_and_eval(build(Tensor(A), Tensor(B), Tensor(C)))
  assert n <= max_kernels, f"{name}: {n} kernels, want at most {max_kernels}"
  if name == "arange": assert len(items[0].bufs) == 1, "arange must read no buffer"
  np.testing.assert_allclose(out, ref(), rtol=1e-4, atol=1e-4)
