"""Benchmark: dequantizing GGUF weights on the device (tinygrad.nn.state.ggml_data_to_tensor, one kernel per tensor)
against ggml's own numpy dequantizer (gguf.quants.dequantize, the test reference), on the same bytes, same run.

  python bench/gguf_dequant.py [--rows 4096] [--cols 4096] [--repeat 3] [--types Q4_0,Q8_0,Q4_K,Q6_K,MXFP4]

Prints, per type, the best time of each and their ratio (reference / ours: above 1 is faster than numpy). Ours is the
second and later runs (the first compiles the kernel); the data is already on the device, as after gguf_load.
"""
from __future__ import annotations
import argparse
import numpy as np
from timing import best_of

def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--rows", type=int, default=4096)
  ap.add_argument("--cols", type=int, default=4096)
  ap.add_argument("--repeat", type=int, default=3)
  ap.add_argument("--types", default="Q4_0,Q8_0,Q4_K,Q6_K,MXFP4")
  args = ap.parse_args()
  import gguf
  from tinygrad import Tensor
  from tinygrad.nn.gguf import GGML_TYPES, ggml_data_to_tensor
  by_name = {v[0]: k for k, v in GGML_TYPES.items()}
  rng, n = np.random.default_rng(0), args.rows * args.cols
  for name in args.types.split(","):
    t = by_name[name]
    _, block, block_bytes = GGML_TYPES[t]
    raw = rng.integers(0, 256, size=(n // block, block_bytes), dtype=np.uint8)
    src = Tensor(raw.reshape(-1)).realize()
    ggml_data_to_tensor(src, n, t).realize()  # compile once
    ours = best_of(lambda: ggml_data_to_tensor(src, n, t).realize(), args.repeat)
    with np.errstate(all="ignore"):  # random scale bytes include inf and nan
      ref = best_of(lambda: gguf.quants.dequantize(raw, gguf.GGMLQuantizationType(t)), args.repeat)
    print(f"{name:6s} {args.rows}x{args.cols}: ours {ours * 1e3:8.1f} ms  gguf numpy {ref * 1e3:8.1f} ms  "
          f"ratio {ref / ours:5.2f}x")

if __name__ == "__main__": main()
