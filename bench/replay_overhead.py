"""The cost of the replay capture: kernels lowered to programs and tensor programs scheduled (bench/spec_overhead.py's
workload), timed without and with `replay.capture` recording, each in a fresh process into a fresh database, printed
as a ratio to the run without. The configurations take turns (best of --repeat) so load on the machine hits both alike.

  python bench/replay_overhead.py [--n 200] [--repeat 3] [--spec 0]
"""
import argparse, os, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

def run_once(capture: bool, n: int, spec: int) -> float:
  with tempfile.TemporaryDirectory(prefix="replay-bench-") as d:
    start = f"from replay import capture; capture.start({os.path.join(d, 'r.db')!r}, 'bench', targets=[]); " \
      if capture else ""
    code = (f"import sys, time; sys.path[:0] = [{HERE!r}, {ROOT!r}]; import spec_overhead as b; {start}"
            f"st = time.perf_counter(); b.kernels({n}); b.tensors({n}); print(time.perf_counter() - st)")
    env = {k: v for k, v in os.environ.items() if k not in ("CAPTURE_PROCESS_REPLAY", "REPLAY_DB", "REPLAY_RUN")}
    out = subprocess.run([sys.executable, "-c", code], env={**env, "SPEC": str(spec)}, cwd=ROOT, capture_output=True,
                         text=True)
  if out.returncode != 0: raise RuntimeError(f"capture={capture} run failed:\n{out.stderr[-3000:]}")
  return float(out.stdout.strip().splitlines()[-1])

if __name__ == "__main__":
  ap = argparse.ArgumentParser()
  ap.add_argument("--n", type=int, default=200, help="kernels lowered and tensor programs scheduled")
  ap.add_argument("--repeat", type=int, default=3)
  ap.add_argument("--spec", type=int, default=0, help="SPEC level of both runs")
  args = ap.parse_args()
  best = {False: float("inf"), True: float("inf")}
  for _ in range(args.repeat):
    for cap in (False, True): best[cap] = min(best[cap], run_once(cap, args.n, args.spec))
  print(f"workload: {args.n} kernels lowered, {args.n} tensor programs scheduled, SPEC={args.spec}")
  print(f"{'no capture':12s} {best[False] * 1e3:8.1f} ms (reference)")
  print(f"{'capture':12s} {best[True] / best[False]:8.2f}x")
