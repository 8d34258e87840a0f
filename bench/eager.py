"""Eager training steps (no TinyJit: every step schedules its graphs again) with the scheduler's kernel graph cache on
and off (SCHEDULE_CACHE), alternated in one run, against torch's eager step (2 threads). The models are
bench/models.py's: ResNet-18 b8 64x64, the D256 GPT-2 block, the LSTM language model. Each side's best of --rounds
steps after two warm steps (and one warm step after each switch of the cache).

  python bench/eager.py [--rounds 3] [--only resnet,block,lstm]
"""
from __future__ import annotations
import argparse, os, sys, time
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch
from tinygrad import Tensor
from tinygrad.helpers import Context
from models import (resnet18, TResNet18, GPT2Block, TBlock, resnet_loss, torch_resnet_loss, lstm_model, TLSTM, lm_loss,
                    torch_lm_loss, torch_train_step, ours_train_step, LSTM_VOCAB, LSTM_TOKENS)

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--rounds", type=int, default=3)
  ap.add_argument("--only", default="resnet,block,lstm")
  a = ap.parse_args()
  torch.set_num_threads(2)
  rows = {"resnet": ("resnet18 b8 64x64", lambda: ours_train_step(resnet18(num_classes=10), resnet_loss, jit=False),
                     lambda: torch_train_step(TResNet18(), torch_resnet_loss), (8, 3, 64, 64)),
          "block": ("block D256 H4", lambda: ours_train_step(GPT2Block(256, 4), resnet_loss, jit=False),
                    lambda: torch_train_step(TBlock(256, 4), torch_resnet_loss), (8, 128, 256)),
          "lstm": ("lstm b16 T32", lambda: ours_train_step(lstm_model(), lm_loss, jit=False),
                   lambda: torch_train_step(TLSTM(LSTM_VOCAB, 256, 256, 1), torch_lm_loss), None)}
  print(f"torch {torch.__version__} with {torch.get_num_threads()} threads; ours eager (no TinyJit), best of "
        f"{a.rounds}")
  print("| workload | cache off ms | cache on ms | torch ms | on / off | on / torch |\n|---|---|---|---|---|---|")
  for key in a.only.split(","):
    name, ours, theirs, shape = rows[key]
    step, tstep = ours(), theirs()
    if shape is None:
      x = Tensor.randint(16, LSTM_TOKENS, high=LSTM_VOCAB).realize()
      tx = torch.randint(0, LSTM_VOCAB, (16, LSTM_TOKENS))
    else: x, tx = Tensor.randn(*shape).realize(), torch.randn(*shape)
    for _ in range(2): step(x)
    times: dict[int, list[float]] = {0: [], 1: []}
    for _ in range(a.rounds):
      for cache in (0, 1):
        with Context(SCHEDULE_CACHE=cache):
          step(x)
          st = time.perf_counter()
          step(x)
          times[cache].append(time.perf_counter() - st)
    for _ in range(2): tstep(tx)
    tt = []
    for _ in range(a.rounds):
      st = time.perf_counter()
      tstep(tx)
      tt.append(time.perf_counter() - st)
    off, on, tb = min(times[0]) * 1e3, min(times[1]) * 1e3, min(tt) * 1e3
    print(f"| {name} | {off:.1f} | {on:.1f} | {tb:.1f} | {on / off:.2f}x | {on / tb:.1f}x |")

if __name__ == "__main__": main()
