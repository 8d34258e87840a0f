"""Fuzz throughput: kernel ASTs fully checked per second per core on each backend, at a stated graph size.

  python bench/fuzz_throughput.py [--n 64] [--batch 16] [--backends cpu,llvm,python,nv,amd] [--spec 2]

"Fully checked" is what a campaign's worker does with a case (fuzz/levels.py KernelLevel.check): generate it from
bytes, kernel_spec, the pyrender round trip, the reference run with its ULP bounds, then on the backend: lower
(get_program, whose program_spec check runs at SPEC>=1 and every UOp built is checked at SPEC=2), compile (one shared
object per batch on cpu), run, and compare every buffer within the budget. Each backend runs in a fresh process;
"per core" divides by the CPU time of that process and its children (the C compiler, ptxas, the linker), so other load
on the machine does not count. The stage shares come from the worker's step notes (time until the next step).

The reference line, measured in the same run, is the harness alone (generate + spec + round trip + reference): no
backend can go faster than it; each backend's rate is printed as a ratio to it and to the goal of 50/s per core.
"""
import argparse, json, os, subprocess, sys, time

GOAL = 50.0
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

def worker(backend: str, n: int, batch: int) -> dict:
  """Runs in the child: n cases from fixed seeds, checked in batches; returns counts and times."""
  import random
  from fuzz.levels import KernelLevel
  from fuzz.backends import open_backends
  lvl = KernelLevel()
  bk = {}
  if backend != "reference":
    bk, missing = open_backends([backend])
    if missing: return {"backend": backend, "missing": missing[backend]}
  datas = [random.Random(i).randbytes(2048) for i in range(n + batch)]
  # NOTE: one warm-up batch (imports, caches, toolchain start-up) is not timed
  lvl.check([lvl.generate(d) for d in datas[n:]], bk)
  stages: dict[str, float] = {}
  last = [time.perf_counter(), "generate"]
  def note(i: int, b: str, s: str) -> None:
    t = time.perf_counter()
    stages[last[1]] = stages.get(last[1], 0.0) + t - last[0]
    last[0], last[1] = t, s
  t0, c0 = time.perf_counter(), os.times()
  nodes, fails = 0, 0
  for b0 in range(0, n, batch):
    note(0, "", "generate")
    cases = [lvl.generate(d) for d in datas[b0:b0 + batch]]
    nodes += sum(lvl.size(c) for c in cases)
    if backend == "reference":
      for i, c in enumerate(cases):
        note(i, "reference", "prepare")
        lvl.prepare(c)
    else: fails += sum(bool(f) for f in lvl.check(cases, bk, note))
  note(0, "", "end")
  c1 = os.times()
  cpu = (c1.user - c0.user) + (c1.system - c0.system) + (c1.children_user - c0.children_user) + \
    (c1.children_system - c0.children_system)
  desc = next(iter(bk.values())).describe() if bk else "generate + spec + round trip + reference"
  return {"backend": backend, "n": n, "nodes": nodes / n, "cpu": cpu, "wall": time.perf_counter() - t0,
          "stages": stages, "failing": fails, "describe": desc}

def run(backend: str, n: int, batch: int, spec: int) -> dict:
  env = {**os.environ, "SPEC": str(spec), "IGNORE_OOB": "1", "PYTHONPATH": REPO}
  code = f"import sys, json; sys.path.insert(0, {HERE!r}); import fuzz_throughput as b; " \
         f"print(json.dumps(b.worker({backend!r}, {n}, {batch})))"
  out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=REPO)
  if out.returncode != 0: return {"backend": backend, "missing": f"the run failed: {out.stderr[-2000:]}"}
  return json.loads(out.stdout.strip().splitlines()[-1])

def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--n", type=int, default=64, help="cases per backend")
  ap.add_argument("--batch", type=int, default=16)
  ap.add_argument("--backends", default="cpu,llvm,python,nv,amd")
  ap.add_argument("--spec", type=int, default=2)
  a = ap.parse_args()
  ref = run("reference", a.n, a.batch, a.spec)
  ref_rate = ref["n"] / ref["cpu"]
  print(f"kernel ASTs from fuzz.strategies.build_kernel (default KernelConfig), {ref['nodes']:.0f} nodes on average; "
        f"SPEC={a.spec}, batches of {a.batch}; rates per core = cases / CPU seconds (process + children)\n")
  print(f"{'backend':10s} {'cases/s/core':>13s} {'vs harness':>10s} {'vs goal 50':>10s} {'failing':>8s}  stages (share "
        "of time)")
  print(f"{'harness':10s} {ref_rate:13.1f} {1.0:10.2f} {ref_rate / GOAL:10.2f} {'':>8s}  {ref['describe']}")
  for b in a.backends.split(","):
    r = run(b, a.n, a.batch, a.spec)
    if "missing" in r:
      print(f"{b:10s} not run: {r['missing']}")
      continue
    rate = r["n"] / r["cpu"]
    tot = sum(r["stages"].values()) or 1.0
    top = sorted(r["stages"].items(), key=lambda kv: -kv[1])
    st = ", ".join(f"{k} {v / tot:.0%}" for k, v in top if v / tot >= 0.02)
    print(f"{b:10s} {rate:13.1f} {rate / ref_rate:10.2f} {rate / GOAL:10.2f} {r['failing']:8d}  {st}")

if __name__ == "__main__": main()
