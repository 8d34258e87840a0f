"""A lazy tensor keeps the value it was built from when the buffer it reads is overwritten by a later ASSIGN (it is
realized before the overwrite); a pure view of the buffer aliases it and sees the write, as a torch view does."""
import numpy as np
from tinygrad import Tensor, nn

def test_read_between_two_assigns_keeps_its_value():
  a = Tensor([0.0]).realize()
  a.assign(a + 1)
  x = a * 1
  a.assign(a + 1)
  y = a * 1
  np.testing.assert_equal(y.numpy(), [2.0])
  np.testing.assert_equal(x.numpy(), [1.0])
  np.testing.assert_equal(a.numpy(), [2.0])

def test_read_before_assign_of_realized_buffer_keeps_its_value():
  b = Tensor([10.0, 20.0]).realize()
  z = b.sum()
  b.assign(b + 1).realize()
  assert z.item() == 30.0
  np.testing.assert_equal(b.numpy(), [11.0, 21.0])

def test_loss_after_optimizer_step_is_the_loss_of_the_old_weights():
  Tensor.manual_seed(0)
  layer = nn.Linear(3, 2)
  opt = nn.optim.SGD(nn.state.get_parameters(layer), lr=0.5)
  x = Tensor.ones(4, 3)
  with Tensor.train():
    loss = layer(x).sum()
    before = layer(x).sum().numpy()
    loss.backward()
    opt.step()
  np.testing.assert_allclose(loss.item(), before, rtol=1e-6)
  assert abs(layer(x).sum().item() - float(before)) > 1.0

def test_view_of_overwritten_buffer_sees_the_write():
  x = Tensor.zeros(4).contiguous().realize()
  v = x[1:3]
  x.assign(Tensor([1.0, 2.0, 3.0, 4.0])).realize()
  np.testing.assert_equal(v.numpy(), [2.0, 3.0])
