"""Fuzz throughput: kernel graphs fully checked per second per core on each backend, at a stated graph size.

  python bench/fuzz_throughput.py [--n 64] [--batch B] [--backends cpu,llvm,python,nv,amd] [--spec 2] [--no-all]

What is timed is a campaign's own worker (`python -m fuzz.campaign.worker`, started as fuzz/campaign/run.py starts it:
the same config, environment (SPEC, TRACK_MATCH_STATS=1) and job messages), fed batches of `--batch` inputs (default:
the campaign's). A case is "fully checked" as the worker checks it (fuzz/campaign/levels.py KernelLevel.check): generate
from bytes, kernel_spec, the pyrender round trip, the reference run with its ULP bounds, then on the backend: lower
(get_program, whose program_spec check runs at SPEC>=1 and every UOp built is checked at SPEC=2; the lowered program's
round trip at SPEC=2), compile (one shared object per batch on cpu, one MCJIT engine per batch on llvm), run, and
compare every buffer within the budget; plus the worker's own work (step notes to the parent, rule-hit coverage).

"Per core" divides by the CPU time of the worker and of its children (the C compiler, ptxas, the linker), read from
/proc (the worker's own threads to the nanosecond, its children in clock ticks), so other load on the machine does not
count. The first batch (imports, caches, toolchain start-up) is not timed.
Stage shares come from the worker's step notes as the parent receives them (time until the next note).

Lines: `harness` is the worker with no backend (generate + spec + round trip + reference): no backend can go faster;
each backend alone; `all` is every backend that ran in one worker, as a campaign over all of them checks a graph (the
reference run is shared). Rates are printed as ratios to the harness and to the goal of 50 graphs/s per core.
"""
import argparse, os, random, selectors, sys, tempfile, time

GOAL = 50.0
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
from fuzz.campaign.run import CampaignConfig, Worker, worker_env, FRESH_BYTES  # noqa: E402

def proc_cpu(pid: int) -> float:
  """CPU seconds of process `pid` (every thread, from schedstat: nanoseconds, where /proc/PID/stat counts 10 ms ticks)
  and of the children it has waited for (the C compiler, ptxas: cutime + cstime)."""
  try:
    with open(f"/proc/{pid}/stat") as f: stat = f.read()
    own = 0
    for t in os.listdir(f"/proc/{pid}/task"):
      with open(f"/proc/{pid}/task/{t}/schedstat") as f: own += int(f.read().split()[0])
  except OSError as e: raise SystemExit(f"fuzz_throughput: cannot read /proc/{pid} ({e}); this bench needs Linux")
  fields = stat[stat.rindex(")") + 2:].split()
  return own / 1e9 + (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")

def measure(backends: list[str], n: int, batch: int, spec: int) -> dict:
  """Run n cases (fixed seeds) through one campaign worker on `backends`; counts, CPU time, stage times."""
  with tempfile.TemporaryDirectory(prefix="fuzz-throughput-") as d:
    cfg = CampaignConfig(out=d, backends=tuple(backends), batch=batch, spec=spec)
    # NOTE: no restart after max_jobs_per_worker jobs (a campaign's worker restarts every 100 jobs: ~1 s of imports)
    config = {"level": "kernel", "backends": backends, "setup": None, "max_jobs": 0, "validate_bounds": False}
    w = Worker(0, config, worker_env(cfg), os.path.join(d, "worker.log"))
    sel = selectors.DefaultSelector()
    sel.register(w.fd, selectors.EVENT_READ)
    stages: dict[str, float] = {}
    last = [time.perf_counter(), "start"]
    def until(kind: str) -> dict:
      while True:
        sel.select(600)
        msgs, alive = w.read()
        t = time.perf_counter()
        for m in msgs:
          if m["t"] == "note":
            key = "prepare" if m["backend"] == "reference" else m["stage"]
            stages[last[1]] = stages.get(last[1], 0.0) + t - last[0]
            last[0], last[1] = t, key
          if m["t"] == kind: return m
        if not alive:
          w.proc.wait()
          with open(os.path.join(d, "worker.log")) as f: log = f.read()[-3000:]
          raise RuntimeError(f"the worker died ({w.death()}):\n{log}")
    try:
      ready = until("ready")
      if not ready["backends"] and backends:
        return {"missing": "; ".join(f"{k}: {v}" for k, v in ready["missing"].items())}
      datas = [random.Random(i).randbytes(FRESH_BYTES["kernel"]) for i in range(n + batch)]
      w.send({"job": 0, "op": "check", "inputs": [x.hex() for x in datas[n:]]})
      until("result")
      stages.clear()
      c0, t0 = proc_cpu(w.proc.pid), time.perf_counter()
      last[:] = [t0, "generate"]
      sizes: list[int] = []
      failing = 0
      for j, b0 in enumerate(range(0, n, batch)):
        w.send({"job": j + 1, "op": "check", "inputs": [x.hex() for x in datas[b0:min(n, b0 + batch)]]})
        res = until("result")["results"]
        t = time.perf_counter()
        stages[last[1]] = stages.get(last[1], 0.0) + t - last[0]
        last[:] = [t, "generate"]
        sizes += [r["size"] for r in res]
        failing += sum(bool(r["failures"]) for r in res)
      cpu, wall = proc_cpu(w.proc.pid) - c0, time.perf_counter() - t0
    finally: w.kill()
  stages.pop("start", None)
  return {"backends": list(ready["backends"]), "missing": ready["missing"], "n": n, "cpu": cpu, "wall": wall,
          "nodes": sum(sizes) / max(1, len(sizes)), "min": min(sizes), "max": max(sizes), "stages": stages,
          "failing": failing, "describe": ready["backends"]}

def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--n", type=int, default=64, help="cases per line")
  ap.add_argument("--batch", type=int, default=CampaignConfig.batch, help="cases per job (campaign's --batch)")
  ap.add_argument("--backends", default="cpu,llvm,python,nv,amd")
  ap.add_argument("--spec", type=int, default=2)
  ap.add_argument("--no-all", action="store_true", help="skip the line of every backend in one worker")
  a = ap.parse_args()
  ref = measure([], a.n, a.batch, a.spec)
  ref_rate = ref["n"] / ref["cpu"]
  print(f"kernel graphs from fuzz.strategies.build_kernel (default KernelConfig): {ref['nodes']:.0f} nodes on average "
        f"({ref['min']}..{ref['max']}); SPEC={a.spec}, batches of {a.batch}, {a.n} graphs per line; a campaign worker "
        "(fuzz.campaign.worker); graphs/s/core = graphs / CPU seconds of the worker and its children\n")
  print(f"{'backend':10s} {'graphs/s/core':>13s} {'vs harness':>10s} {'vs goal 50':>10s} {'failing':>8s}  "
        "stages (share of wall time)")
  def line(name: str, r: dict) -> None:
    rate = r["n"] / r["cpu"]
    tot = sum(r["stages"].values()) or 1.0
    top = sorted(r["stages"].items(), key=lambda kv: -kv[1])
    st = ", ".join(f"{k} {v / tot:.0%}" for k, v in top if v / tot >= 0.02)
    print(f"{name:10s} {rate:13.1f} {rate / ref_rate:10.2f} {rate / GOAL:10.2f} {r['failing']:8d}  {st}", flush=True)
  line("harness", ref)
  ran = []
  for b in a.backends.split(","):
    r = measure([b], a.n, a.batch, a.spec)
    if r["missing"] and not r.get("backends"):
      print(f"{b:10s} not run: {r['missing'] if isinstance(r['missing'], str) else r['missing'].get(b)}")
      continue
    ran.append(b)
    line(b, r)
  if len(ran) > 1 and not a.no_all: line("all", measure(ran, a.n, a.batch, a.spec))
  if len(ran) > 1 and not a.no_all:
    print(f"\n'all' = {'+'.join(ran)} in one worker: each graph generated and its reference run once")

if __name__ == "__main__": main()
