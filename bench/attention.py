"""Causal scaled dot-product attention on the CPU at long sequences: ours by blocks of query rows (the default from
SDPA_ROWS_MIN rows on), ours over the whole score matrix (the path below it, forced here), and torch's
scaled_dot_product_attention (2 threads), measured in the same run, forward alone and forward with backward.

  python bench/attention.py [--lengths 512,1024,2048] [--heads 12] [--head-dim 64] [--steps 3]

Batch 1. Ours runs under TinyJit; every time is the best of --steps calls after two warm-ups (one captures). Each of our
configurations runs in a process of its own, whose first call, before any other and without TinyJit, gives its peak
of allocated memory (GlobalCounters.mem_peak: the inputs, the outputs and the gradients included).
"""
from __future__ import annotations
import argparse, json, os, subprocess, sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np
from timing import best_of  # noqa: E402

def ours(length: int, heads: int, dim: int, whole: bool, grad: bool) -> tuple[float, int]:
  """(seconds of the best jitted call, peak bytes of the first call)."""
  import tinygrad.tensor as tt
  from tinygrad import Tensor, TinyJit
  from tinygrad.helpers import GlobalCounters
  if whole: tt.SDPA_ROWS_MIN = 1 << 62
  rng = np.random.default_rng(0)
  q, k, v, g = (Tensor(rng.standard_normal((1, heads, length, dim)).astype(np.float32), requires_grad=grad).realize()
                for _ in range(4))
  def fn() -> list[Tensor]:
    for t in (q, k, v): t.grad = None
    o = q.scaled_dot_product_attention(k, v, is_causal=True)
    if not grad: return [o.realize()]
    (o * g).sum().backward()
    return [t.grad.realize() for t in (q, k, v) if t.grad is not None]
  GlobalCounters.reset()
  [t.numpy() for t in fn()]
  peak = GlobalCounters.mem_peak
  step = TinyJit(fn)
  for _ in range(2): [t.numpy() for t in step()]
  return best_of(lambda: [t.numpy() for t in step()], ARGS.steps), peak

def theirs(length: int, heads: int, dim: int, grad: bool) -> float:
  import torch
  torch.set_num_threads(2)
  rng = np.random.default_rng(0)
  q, k, v, g = (torch.tensor(rng.standard_normal((1, heads, length, dim)).astype(np.float32), requires_grad=grad)
                for _ in range(4))
  def step() -> None:
    for t in (q, k, v): t.grad = None
    o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    if grad: (o * g).sum().backward()
  if not grad:
    with torch.no_grad():
      for _ in range(2): step()
      return best_of(step, ARGS.steps)
  for _ in range(2): step()
  return best_of(step, ARGS.steps)

def child(spec: str) -> dict:
  """One of our configurations in a process of its own: its time and its peak memory."""
  out = subprocess.run([sys.executable, __file__, "--child", spec, "--steps", str(ARGS.steps)], capture_output=True,
                       text=True, check=False)
  if out.returncode != 0: raise RuntimeError(f"bench/attention.py: {spec} failed:\n{out.stderr[-2000:]}")
  return json.loads(out.stdout.strip().splitlines()[-1])

def main() -> int:
  if ARGS.child:
    length, heads, dim, whole, grad = (int(x) for x in ARGS.child.split(","))
    s, peak = ours(length, heads, dim, bool(whole), bool(grad))
    print(json.dumps({"s": s, "peak": peak}))
    return 0
  print(f"causal attention, batch 1, {ARGS.heads} heads of {ARGS.head_dim}; torch 2 threads; best of {ARGS.steps}")
  print("| length | pass | torch ms | ours whole ms | ours by rows ms | by rows / torch | by rows / whole | "
        "peak whole MB | peak by rows MB |")
  print("|---|---|---|---|---|---|---|---|---|")
  for length in (int(x) for x in ARGS.lengths.split(",")):
    for grad in (0, 1):
      whole = child(f"{length},{ARGS.heads},{ARGS.head_dim},1,{grad}")
      rows = child(f"{length},{ARGS.heads},{ARGS.head_dim},0,{grad}")
      t = theirs(length, ARGS.heads, ARGS.head_dim, bool(grad))
      print(f"| {length} | {'fwd+bwd' if grad else 'fwd'} | {t * 1e3:.1f} | {whole['s'] * 1e3:.1f} | "
            f"{rows['s'] * 1e3:.1f} | {rows['s'] / t:.2f}x | {rows['s'] / whole['s']:.2f}x | "
            f"{whole['peak'] / 2**20:.0f} | {rows['peak'] / 2**20:.0f} |", flush=True)
  return 0

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--lengths", default="512,1024,2048", help="comma-separated sequence lengths (query rows = keys)")
ap.add_argument("--heads", type=int, default=12)
ap.add_argument("--head-dim", type=int, default=64)
ap.add_argument("--steps", type=int, default=3, help="timed calls per configuration")
ap.add_argument("--child", default="", help=argparse.SUPPRESS)
ARGS = ap.parse_args()

if __name__ == "__main__": sys.exit(main())
