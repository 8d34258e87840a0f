"""Benchmark: a data-parallel MLP training step (batch split over CPU:0 and CPU:1, weights replicated, gradients
allreduced; CPU_THREADS=1) against the same step on one device with CPU_THREADS=2, same batch, both under TinyJit and
measured in the same run (each configuration in its own process, since CPU_THREADS is read per process).

  python bench/multi_dp.py [--batch 256] [--steps 20]

Prints the median step time of each, their ratio (two devices / one device), and the allreduce's share of the
two-device step: the median time of the same allreduces alone (the gradients' sizes, jitted) over the step's.
"""
from __future__ import annotations
import argparse, json, os, subprocess, sys, time

def run(cfg: str, batch: int, steps: int) -> dict:
  import numpy as np
  from tinygrad import Tensor, TinyJit, nn
  from tinygrad.nn.state import get_parameters
  devs = ("CPU:0", "CPU:1") if cfg == "dp" else None
  Tensor.manual_seed(0)
  l1, l2, l3 = nn.Linear(256, 512), nn.Linear(512, 512), nn.Linear(512, 10)
  params = get_parameters([l1, l2, l3])
  if devs:
    for p in params: p.shard_(devs)
  opt = nn.optim.SGD(params, lr=0.01)
  @TinyJit
  def step(x: Tensor, y: Tensor) -> Tensor:
    opt.zero_grad()
    loss = l3(l2(l1(x).relu()).relu()).sparse_categorical_crossentropy(y)
    loss.backward()
    opt.step()
    return loss.realize()
  rng = np.random.default_rng(0)
  x = Tensor(rng.standard_normal((batch, 256)).astype(np.float32))
  y = Tensor(rng.integers(0, 10, batch).astype(np.int32))
  if devs: x, y = x.shard(devs, 0), y.shard(devs, 0)
  x, y = x.realize(), y.realize()
  def timed(fn) -> float:
    ts = []
    for i in range(steps + 3):
      st = time.perf_counter()
      fn()
      if i >= 3: ts.append(time.perf_counter() - st)
    return sorted(ts)[len(ts) // 2]
  with Tensor.train():
    out = {"step_s": timed(lambda: step(x, y).numpy())}
  if devs:
    # the allreduces of the step alone: one partial per parameter, summed over the devices
    parts = [Tensor.ones(2, *p.shape).contiguous().shard(devs, 0).realize() for p in params]
    @TinyJit
    def allreduce(*ts: Tensor) -> list[Tensor]: return [t.sum(0).realize() for t in ts]
    out["allreduce_s"] = timed(lambda: [t.numpy() for t in allreduce(*parts)[:1]])
  return out

def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--batch", type=int, default=256)
  ap.add_argument("--steps", type=int, default=20)
  ap.add_argument("--child", choices=["dp", "one"])
  args = ap.parse_args()
  if args.child:
    print(json.dumps(run(args.child, args.batch, args.steps)))
    return
  res = {}
  for cfg, threads in (("one", "2"), ("dp", "1")):
    env = {**os.environ, "CPU_THREADS": threads}
    cmd = [sys.executable, __file__, "--child", cfg, "--batch", str(args.batch), "--steps", str(args.steps)]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    res[cfg] = json.loads(r.stdout.strip().splitlines()[-1])
  one, dp = res["one"]["step_s"], res["dp"]["step_s"]
  print(f"one device, 2 threads: {one * 1e3:8.2f} ms/step")
  print(f"CPU:0+CPU:1, 1 thread: {dp * 1e3:8.2f} ms/step")
  print(f"ratio (two devices / one device): {dp / one:.2f}")
  print(f"allreduce share of the two-device step: {res['dp']['allreduce_s'] / dp:.0%}")

if __name__ == "__main__":
  main()
