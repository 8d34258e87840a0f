"""The cost of the replay capture: kernels lowered to programs and tensor programs scheduled (bench/spec_overhead.py's
workload), timed without and with `replay.capture` recording, each in a fresh process into a fresh database, printed
as a ratio to the run without, in wall time and in the process's CPU time (steadier on a shared machine; it leaves out
waits on the disk). The configurations take turns (best of --repeat) so load on the machine hits both alike.

  python bench/replay_overhead.py [--n 200] [--repeat 3] [--spec 0]
"""
import argparse, os, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

def run_once(capture: bool, n: int, spec: int) -> tuple[float, float]:
  """(wall seconds, CPU seconds of the process) of the workload."""
  with tempfile.TemporaryDirectory(prefix="replay-bench-") as d:
    start = f"from replay import capture; capture.start({os.path.join(d, 'r.db')!r}, 'bench', targets=[]); " \
      if capture else ""
    code = (f"import sys, time; sys.path[:0] = [{HERE!r}, {ROOT!r}]; import spec_overhead as b; {start}"
            f"st, ct = time.perf_counter(), time.process_time(); b.kernels({n}); b.tensors({n}); "
            f"print(time.perf_counter() - st, time.process_time() - ct)")
    env = {k: v for k, v in os.environ.items() if k not in ("CAPTURE_PROCESS_REPLAY", "REPLAY_DB", "REPLAY_RUN")}
    out = subprocess.run([sys.executable, "-c", code], env={**env, "SPEC": str(spec)}, cwd=ROOT, capture_output=True,
                         text=True)
  if out.returncode != 0: raise RuntimeError(f"capture={capture} run failed:\n{out.stderr[-3000:]}")
  wall, cpu = out.stdout.strip().splitlines()[-1].split()
  return float(wall), float(cpu)

if __name__ == "__main__":
  ap = argparse.ArgumentParser()
  ap.add_argument("--n", type=int, default=200, help="kernels lowered and tensor programs scheduled")
  ap.add_argument("--repeat", type=int, default=3)
  ap.add_argument("--spec", type=int, default=0, help="SPEC level of both runs")
  args = ap.parse_args()
  best = {(cap, i): float("inf") for cap in (False, True) for i in (0, 1)}
  for _ in range(args.repeat):
    for cap in (False, True):
      for i, t in enumerate(run_once(cap, args.n, args.spec)): best[(cap, i)] = min(best[(cap, i)], t)
  print(f"workload: {args.n} kernels lowered, {args.n} tensor programs scheduled, SPEC={args.spec}")
  print(f"{'no capture':12s} {best[(False, 0)] * 1e3:8.1f} ms wall, {best[(False, 1)] * 1e3:8.1f} ms CPU (reference)")
  wall, cpu = best[(True, 0)] / best[(False, 0)], best[(True, 1)] / best[(False, 1)]
  print(f"{'capture':12s} {wall:8.2f}x wall    {cpu:8.2f}x CPU")
