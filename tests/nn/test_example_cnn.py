"""examples/cnn.py with a small step count: a CNN with BatchNorm, Adam and a TinyJit-captured step learns (the loss
falls) and the replayed steps match what the function computes."""
from examples.cnn import train

def test_cnn_example_loss_falls_with_a_jitted_step():
  r = train(steps=12, batch=16, verbose=False)
  assert r["last_loss"] < 0.8 * r["first_loss"], r
  assert r["accuracy"] > 0.4, r  # 4 classes: better than chance after 12 small steps
