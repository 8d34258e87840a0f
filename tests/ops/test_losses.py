"""Losses against torch.nn.functional, forward and backward: every reduction, class indices with ignore_index and
weight, probabilities, label smoothing, spatial (N, C, d) inputs, and edge probabilities and logits."""
import math
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from tinygrad import Tensor
from tests.ops.helpers import check_op

REDUCTIONS = ["mean", "sum", "none"]
rng = np.random.default_rng(7)

def targets(shape, ncls, ignore=None):
  y = rng.integers(0, ncls, size=shape)
  if ignore is not None and y.size: y.reshape(-1)[::3] = ignore
  return torch.tensor(y), Tensor(y.astype(np.int32))

@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("smoothing", [0.0, 0.25])
def test_cross_entropy_class_indices(reduction, smoothing):
  yt, yT = targets((6,), 5)
  check_op([(6, 5)], lambda x: F.cross_entropy(x, yt, reduction=reduction, label_smoothing=smoothing),
           lambda x: x.cross_entropy(yT, reduction=reduction, label_smoothing=smoothing))

@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy_ignore_index_and_weight(reduction, smoothing):
  yt, yT = targets((7,), 4, ignore=-100)
  w = rng.uniform(0.2, 2.0, 4).astype(np.float32)
  check_op([(7, 4)], lambda x: F.cross_entropy(x, yt, reduction=reduction, label_smoothing=smoothing),
           lambda x: x.cross_entropy(yT, reduction=reduction, label_smoothing=smoothing))
  check_op([(7, 4)], lambda x: F.cross_entropy(x, yt, weight=torch.tensor(w), reduction=reduction, label_smoothing=smoothing),
           lambda x: x.cross_entropy(yT, reduction=reduction, label_smoothing=smoothing, weight=Tensor(w)))
  yt2, yT2 = targets((7,), 4, ignore=2)
  check_op([(7, 4)], lambda x: F.cross_entropy(x, yt2, ignore_index=2, reduction=reduction),
           lambda x: x.cross_entropy(yT2, ignore_index=2, reduction=reduction))

@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_spatial_and_1d(reduction):
  yt, yT = targets((2, 3, 2), 4, ignore=-100)
  check_op([(2, 4, 3, 2)], lambda x: F.cross_entropy(x, yt, reduction=reduction, label_smoothing=0.2),
           lambda x: x.cross_entropy(yT, reduction=reduction, label_smoothing=0.2))
  check_op([(5,)], lambda x: F.cross_entropy(x, torch.tensor(3), reduction=reduction),
           lambda x: x.cross_entropy(Tensor(3), reduction=reduction))

@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("smoothing", [0.0, 0.3])
def test_cross_entropy_probabilities(reduction, smoothing):
  check_op([(4, 5), (4, 5)], lambda x, p: F.cross_entropy(x, p.softmax(1), reduction=reduction, label_smoothing=smoothing),
           lambda x, p: x.cross_entropy(p.softmax(1), reduction=reduction, label_smoothing=smoothing))
  w = torch.tensor([0.5, 1.0, 2.0, 1.5, 0.1])
  check_op([(2, 5, 3), (2, 5, 3)], lambda x, p: F.cross_entropy(x, p.softmax(1), weight=w, reduction=reduction),
           lambda x, p: x.cross_entropy(p.softmax(1), weight=Tensor(w.numpy()), reduction=reduction))

def test_cross_entropy_float16_and_size1():
  yt, yT = targets((4,), 3)
  check_op([(4, 3)], lambda x: F.cross_entropy(x, yt), lambda x: x.cross_entropy(yT), dtype="float16", atol=2e-2)
  check_op([(1, 1)], lambda x: F.cross_entropy(x, torch.tensor([0])), lambda x: x.cross_entropy(Tensor([0])))

def test_cross_entropy_empty_batch_and_all_ignored():
  check_op([(0, 3)], lambda x: F.cross_entropy(x, torch.zeros(0, dtype=torch.int64)),
           lambda x: x.cross_entropy(Tensor.zeros(0, dtype="int32")))
  check_op([(2, 3)], lambda x: F.cross_entropy(x, torch.tensor([-100, -100]), reduction="sum"),
           lambda x: x.cross_entropy(Tensor([-100, -100]), reduction="sum"))
  out = Tensor.ones(2, 3).cross_entropy(Tensor([-100, -100]))
  assert math.isnan(out.item()) and math.isnan(F.cross_entropy(torch.ones(2, 3), torch.tensor([-100, -100])).item())

def test_cross_entropy_shape_errors():
  with pytest.raises(ValueError, match=r"cross_entropy: logits \(2, 4, 3\) need class indices of shape \(2, 3\)"):
    Tensor.ones(2, 4, 3).cross_entropy(Tensor.zeros(2, 4, dtype="int32"))
  with pytest.raises(ValueError, match="reduction must be 'mean', 'sum' or 'none'"):
    Tensor.ones(2, 3).cross_entropy(Tensor([0, 1]), reduction="avg")

@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss(reduction):
  yt, yT = targets((2, 3), 4, ignore=-100)
  w = rng.uniform(0.2, 2.0, 4).astype(np.float32)
  check_op([(2, 4, 3)], lambda x: F.nll_loss(x.log_softmax(1), yt, reduction=reduction),
           lambda x: x.log_softmax(1).nll_loss(yT, reduction=reduction))
  check_op([(2, 4, 3)], lambda x: F.nll_loss(x, yt, weight=torch.tensor(w), reduction=reduction),
           lambda x: x.nll_loss(yT, weight=Tensor(w), reduction=reduction))
  yt1, yT1 = targets((5,), 4, ignore=1)
  check_op([(5, 4)], lambda x: F.nll_loss(x, yt1, ignore_index=1, reduction=reduction),
           lambda x: x.nll_loss(yT1, ignore_index=1, reduction=reduction))

@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_sparse_categorical_crossentropy(reduction, smoothing):
  # classes on the last axis; y == ignore_index (default -1) counts nowhere
  yt, yT = targets((2, 3), 5, ignore=-1)
  ref = lambda x: F.cross_entropy(x.permute(0, 2, 1), yt, ignore_index=-1, reduction=reduction, label_smoothing=smoothing)
  check_op([(2, 3, 5)], ref, lambda x: x.sparse_categorical_crossentropy(yT, label_smoothing=smoothing, reduction=reduction))
  yt2, yT2 = targets((4,), 5, ignore=3)
  check_op([(4, 5)], lambda x: F.cross_entropy(x, yt2, ignore_index=3, reduction=reduction),
           lambda x: x.sparse_categorical_crossentropy(yT2, ignore_index=3, reduction=reduction))

@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_crossentropy(reduction):
  check_op([(3, 4), (3, 4)], lambda x, y: F.binary_cross_entropy(x.sigmoid(), y.sigmoid(), reduction=reduction),
           lambda x, y: x.sigmoid().binary_crossentropy(y.sigmoid(), reduction=reduction))
  # probabilities at 0 and 1: the logs clamp at -100 and the gradient stays finite (torch's formulas)
  check_op(None, lambda p, y: F.binary_cross_entropy(p, y, reduction=reduction),
           lambda p, y: p.binary_crossentropy(y, reduction=reduction), vals=[[0.0, 1.0, 0.0, 1.0, 0.3], [0.0, 1.0, 1.0, 0.0, 0.7]])

@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_crossentropy_logits(reduction):
  check_op([(3, 4), (3, 4)], lambda x, y: F.binary_cross_entropy_with_logits(x, y.sigmoid(), reduction=reduction),
           lambda x, y: x.binary_crossentropy_logits(y.sigmoid(), reduction=reduction), low=-5, high=5)
  pw = torch.tensor([0.5, 1.0, 3.0, 2.0])
  check_op([(3, 4), (3, 4)], lambda x, y: F.binary_cross_entropy_with_logits(x, y.sigmoid(), reduction=reduction, pos_weight=pw),
           lambda x, y: x.binary_crossentropy_logits(y.sigmoid(), reduction=reduction, pos_weight=Tensor(pw.numpy())))
  # extreme logits: exact, finite
  check_op(None, lambda x, y: F.binary_cross_entropy_with_logits(x, y, reduction=reduction),
           lambda x, y: x.binary_crossentropy_logits(y, reduction=reduction),
           vals=[[-1e4, 1e4, -100.0, 100.0, 0.0], [1.0, 0.0, 0.0, 1.0, 0.5]])

def test_losses_take_size1_and_empty():
  check_op([(1,), (1,)], lambda x, y: F.binary_cross_entropy_with_logits(x, y.sigmoid()),
           lambda x, y: x.binary_crossentropy_logits(y.sigmoid()))
  check_op([(0,), (0,)], lambda x, y: F.binary_cross_entropy_with_logits(x, y, reduction="sum"),
           lambda x, y: x.binary_crossentropy_logits(y, reduction="sum"))
