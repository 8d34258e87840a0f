"""Measured comparisons of guided and unguided fuzzing, each mode run as the target of its level (fuzz/targets/) in a
process of its own, side by side in the same run so all see the same machine load. Modes: `guided` (the rule-guided
scheduler of fuzz/campaign/scheduler.py), `unguided` (fresh random bytes: the same generator and checks), `atheris`
(libFuzzer fed by the line coverage of tinygrad and a counter per rewrite rule) and `rules` (libFuzzer fed by the rule
counters only).

  compare_rules(level, seconds)       rewrite rules hit (TRACK_MATCH_STATS) after `seconds`, guided vs unguided
  mutation_score(levels, seconds)     per planted bug of fuzz/measure/mutants.py and per level, whether each mode kills
                                      it within `seconds` (and when): the share each (level, mode) finds

`python -m fuzz compare` and `python -m fuzz mutants` print both; docs/fuzz.md has numbers measured with them. compare
keeps each mode's work directory and turns its failing inputs into reduced reproducers (`keep_findings`), so a bug one
mode found is not lost with the comparison."""
from __future__ import annotations
import contextlib, glob, json, os, random, subprocess, sys, tempfile, time
from dataclasses import dataclass, field
from typing import Any, Sequence
from fuzz.campaign.run import Campaign, CampaignConfig, LevelRun

FUZZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGETS = os.path.join(FUZZ, "targets")
MODES = ("guided", "unguided")
# NOTE: what each mode is: the module docstring
ALL_MODES = ("guided", "unguided", "atheris", "rules")
SEEDS = 32
# seconds since start at which compare also reports the rules each mode had hit (a guided run can reach a level's
# saturation sooner without ending higher)
CURVE = (15, 30, 60, 120, 300)

@dataclass
class TargetRun:
  level: str
  mode: str
  seconds: float
  stats: dict[str, Any] = field(default_factory=dict)
  returncode: int | None = None
  log: str = ""
  workdir: str = ""
  artifacts: list[bytes] = field(default_factory=list)  # the failing inputs (crash artifacts), read before cleanup
  # the failing directed cases (directed-<sha1>.json: a level state, as their bytes build another case)
  states: list[dict[str, Any]] = field(default_factory=list)
  def last_rule_at(self) -> tuple[float, int]:
    """(seconds, inputs) when the run hit its last new rule (the first of its samples with its final count)."""
    samples = self.stats.get("samples", [])
    final = samples[-1][2] if samples else 0
    return next(((s, i) for s, i, n in samples if n == final), (0.0, 0))
  def rules_at(self, t: float) -> int:
    """Rules hit by time t (from the run's samples; the last sample at or before t)."""
    best = 0
    for s, _, n in self.stats.get("samples", []):
      if s <= t: best = n
    return best

def _command(level: str, mode: str, seconds: float, stats: str, workdir: str, backends: str,
             extra: Sequence[str]) -> list[str]:
  script = os.path.join(TARGETS, f"{level}_target.py")
  cmd = [sys.executable, script, f"--stats={stats}", f"--backends={backends}", f"-max_total_time={int(seconds)}",
         *extra]
  if mode not in ALL_MODES: raise ValueError(f"unknown mode {mode!r}; one of {', '.join(ALL_MODES)}")
  # NOTE: every mode writes its failing inputs as crash artifacts into the work directory, never into the repository
  art = f"-artifact_prefix={workdir}{os.sep}"
  if mode == "unguided": return [*cmd, "--unguided", art]
  # NOTE: "guided": our rule-guided scheduler (fuzz/campaign/scheduler.py), which starts from nothing: its first inputs
  # are fresh random ones, like the unguided run's
  if mode == "guided": return [*cmd, "--scheduled", art]
  # NOTE: "rules": atheris fed by the rule counters only (no line coverage of tinygrad: no instrumentation cost)
  if mode == "rules": cmd.append("--no-instrument")
  corpus = os.path.join(workdir, "corpus")
  os.makedirs(corpus, exist_ok=True)
  # NOTE: a seed corpus of random inputs of the level's size (what the unguided run draws from): libFuzzer grows
  # inputs from a few bytes, and a level reads zeros past the end, so an empty corpus starts with near-empty cases
  from fuzz.targets.common import INPUT_BYTES
  rng = random.Random(0)
  for i in range(SEEDS):
    with open(os.path.join(corpus, f"seed{i:03d}"), "wb") as f: f.write(rng.randbytes(INPUT_BYTES[level]))
  return [*cmd, art, "-print_final_stats=0", corpus]

def run_side_by_side(level: str, seconds: float, backends: str = "python", extra: Sequence[str] = (),
                     modes: Sequence[str] = MODES, workdir: str | None = None) -> dict[str, TargetRun]:
  """Both modes of one level at once, each for `seconds` (plus its start-up), with their stats read back. Each mode
  works in `workdir/<mode>/work` (stats, log, corpus, crash artifacts), kept; without a workdir, in a temporary one."""
  with contextlib.ExitStack() as stack:
    tmp = workdir if workdir is not None else stack.enter_context(tempfile.TemporaryDirectory(prefix="fuzz-guidance-"))
    procs = {}
    for mode in modes:
      wd = os.path.join(tmp, mode, "work")
      os.makedirs(wd)
      cmd = _command(level, mode, seconds, os.path.join(wd, "stats"), wd, backends, extra)
      log = open(os.path.join(wd, "log.txt"), "w")
      env = {**os.environ, "PYTHONPATH": os.path.dirname(FUZZ)}
      procs[mode] = (subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env), log, wd)
    out = {}
    # NOTE: a run that outlives its budget by far (a hang in the compiler) is stopped: its stats so far still count
    deadline = time.monotonic() + seconds + 120
    for mode, (p, log, wd) in procs.items():
      try: rc = p.wait(timeout=max(1.0, deadline - time.monotonic()))
      except subprocess.TimeoutExpired:
        p.kill()
        rc = p.wait()
      log.close()
      run = TargetRun(level, mode, seconds, returncode=rc, workdir=wd)
      files = sorted(glob.glob(os.path.join(wd, "stats.*")), key=os.path.getmtime)
      # NOTE: libFuzzer's -fork/-jobs children write a file each; without them there is one
      for f in files:
        with open(f) as fh: st = json.load(fh)
        run.stats = st if not run.stats else _merge(run.stats, st)
      with open(os.path.join(wd, "log.txt")) as fh: run.log = fh.read()[-4000:]
      # NOTE: libFuzzer names an input that crashed, timed out or ran out of memory so; our loops write crash- only
      arts = sorted(a for k in ("crash", "timeout", "oom") for a in glob.glob(os.path.join(wd, f"{k}-*")))
      for a in arts:
        with open(a, "rb") as fh: run.artifacts.append(fh.read())
      for a in sorted(glob.glob(os.path.join(wd, "directed-*.json"))):
        with open(a) as fh: run.states.append(json.load(fh)["state"])
      out[mode] = run
  return out

def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
  m = dict(a)
  m["rules"] = sorted(set(a.get("rules", [])) | set(b.get("rules", [])))
  for k in ("inputs", "findings", "kills", "background"): m[k] = a.get(k, 0) + b.get(k, 0)
  firsts = [x for x in (a.get("first_kill"), b.get("first_kill")) if x is not None]
  m["first_kill"] = min(firsts) if firsts else None
  return m

# ---- rules hit ----

class InputsCampaign(Campaign):
  """A campaign over a fixed list of inputs (one batch) and of level states (another), then the reductions of what
  they found."""
  def __init__(self, cfg: CampaignConfig, inputs: list[bytes], states: Sequence[dict[str, Any]] = ()):
    super().__init__(cfg)
    self.inputs, self.states, self.not_again = inputs, list(states), 0
  def next_input(self, run: LevelRun) -> tuple[bytes, str | None, bool]:
    return (self.inputs.pop(0) if self.inputs else b""), None, False
  def fuzz_job(self) -> dict[str, Any]:
    if self.inputs or not self.states: return super().fuzz_job()
    states, self.states = self.states, []
    n = len(states)
    return {"op": "check_state", "level": self.cfg.levels[0], "states": states, "backends": None,
            "_inputs": [b""] * n, "_directed": [False] * n}
  def add_corpus(self, run: LevelRun, data: bytes) -> None: pass
  def handle_result(self, job: dict[str, Any], results: list[dict[str, Any]]) -> None:
    if job.get("_reduce") is None: self.not_again += sum(not r["failures"] for r in results)
    super().handle_result(job, results)

def keep_findings(level: str, inputs: Sequence[bytes], out: str, backends: str = "python", setup: str | None = None,
                  reduce_checks: int = 300, reduce_seconds: float = 300.0,
                  states: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
  """The failing inputs (bytes) and directed cases (level `states`) of a mode as reproducers in `out/findings/`
  (fuzz/campaign/findings.py, as a campaign writes them): each is checked again in a campaign worker (crash-isolated),
  its failures become signatures, each new signature's case is reduced (fuzz/campaign/reduce.py). Returns the findings
  (id, signature, count, sizes, path) and how many did not fail again."""
  if not inputs and not states: return {"findings": [], "not_again": 0}
  # NOTE: the batches go out at the start, so a minute is enough; the reductions then have reduce_grace seconds
  cfg = CampaignConfig(out=out, minutes=1.0, backends=tuple(b for b in backends.split(",") if b), levels=(level,),
                       batch=max(1, len(inputs)), max_cases=len(inputs) + len(states), setup=setup, progress=False,
                       directed=False, reduce_checks=reduce_checks, reduce_grace=reduce_seconds)
  camp = InputsCampaign(cfg, list(inputs), states)
  summ = camp.run()
  found = [{"id": f.signature.id, "signature": str(f.signature), "count": f.count, "size": f.size,
            "original_size": f.original_size, "reduced": f.reduced,
            "path": os.path.join(out, "findings", f"{f.signature.id}.json")}
           for f in sorted(summ.findings.values(), key=lambda f: -f.count)]
  return {"findings": found, "not_again": camp.not_again}

def compare_rules(level: str, seconds: float, backends: str = "python", modes: Sequence[str] = MODES,
                  out: str | None = None, setup: str | None = None, reduce_checks: int = 300) -> dict[str, Any]:
  """Rules hit per mode, all modes side by side; counted at the same time since each run's start (start-up
  included): the time of the shortest run's last sample. With `out`, each mode works in `out/<level>/<mode>/` and its
  findings are kept there as reproducers (`out/<level>/<mode>/findings/<id>.json`, see keep_findings); `setup`
  (module:function) is called first in every target and worker (a planted bug)."""
  workdir = None
  if out is not None:
    workdir = os.path.join(out, level)
    if os.path.exists(workdir) and os.listdir(workdir):
      raise FileExistsError(f"fuzz compare: {workdir} already holds a comparison; give a fresh --out directory")
    os.makedirs(workdir, exist_ok=True)
  extra = [f"--setup={setup}"] if setup else []
  runs = run_side_by_side(level, seconds, backends, extra=extra, modes=modes, workdir=workdir)
  for r in runs.values():
    if not r.stats: raise RuntimeError(f"{level} {r.mode}: the target wrote no stats (exit {r.returncode}):\n{r.log}")
  kept: dict[str, dict[str, Any]] = {}
  if workdir is not None:
    for m, r in runs.items():
      try: kept[m] = keep_findings(level, r.artifacts, os.path.join(workdir, m), backends, setup, reduce_checks,
                                   states=r.states)
      except Exception as e:
        # NOTE: the comparison's numbers stand without the reproducers; the error says why they are missing
        kept[m] = {"findings": [], "not_again": 0, "error": f"{type(e).__name__}: {e}"}
  t = min(r.stats["seconds"] for r in runs.values())
  sets = {m: set(r.stats["rules"]) for m, r in runs.items()}
  union = set().union(*sets.values())
  return {"level": level, "seconds": seconds, "at": t, "backends": backends, "out": workdir,
          "modes": {m: {"rules_at": r.rules_at(t), "rules": len(sets[m]), "inputs": r.stats["inputs"],
                        "curve": {c: r.rules_at(c) for c in CURVE if c < t},
                        "last_rule_at": r.last_rule_at(), "findings": r.stats.get("findings", 0),
                        "messages": r.stats.get("messages", [])[:3], "artifacts": len(r.artifacts) + len(r.states),
                        "kept": kept.get(m), "missed": sorted(union - sets[m])} for m, r in runs.items()}}

def format_compare(r: dict[str, Any]) -> str:
  ms = r["modes"]
  lines = [f"{r['level']} level, {r['seconds']:.0f} s per mode side by side, backends {r['backends']}:",
           f"  rules hit at {r['at']:.0f} s: " + ", ".join(f"{m} {v['rules_at']}" for m, v in ms.items()),
           "  at the end: " + ", ".join(f"{m} {v['rules']} rules / {v['inputs']} inputs" for m, v in ms.items())]
  if any(v.get("curve") for v in ms.values()):
    lines.append("  rules hit by: " + "; ".join(f"{c:.0f} s " + ", ".join(f"{m} {v['curve'][c]}" for m, v in ms.items())
                                              for c in next(iter(ms.values()))["curve"]))
  lines.append("  last new rule at: " + ", ".join(f"{m} {v['last_rule_at'][0]:.0f} s ({v['last_rule_at'][1]} inputs)"
                                                 for m, v in ms.items()))
  lines += [f"  {m} missed ({len(v['missed'])}): {', '.join(v['missed']) or '-'}" for m, v in ms.items()]
  # NOTE: a finding here is a failure of the unmutated compiler (a bug), not a planted one
  lines += [f"  {m}: {v['findings']} findings: {'; '.join(v['messages'])}" for m, v in ms.items() if v["findings"]]
  for m, v in ms.items():
    if (k := v.get("kept")) is None: continue
    if k.get("error"): lines.append(f"  {m}: {v['artifacts']} failing inputs, NOT kept: {k['error']}")
    elif v["artifacts"]:
      again = f", {k['not_again']} did not fail again" if k["not_again"] else ""
      lines.append(f"  {m}: {v['artifacts']} failing inputs kept (one per distinct set of failures) -> "
                   f"{len(k['findings'])} reproducers{again}")
    lines += [f"    [{f['id']}] x{f['count']} {f['signature']} (size {f['original_size']} -> {f['size']}): {f['path']}"
              for f in k["findings"]]
  if r.get("out"): lines.append(f"  work directories and reproducers: {r['out']}")
  return "\n".join(lines)

# ---- mutation score ----

def mutation_score(levels: Sequence[str], seconds: float, mutants: Sequence[str] | None = None,
                   backends: str = "python", progress: Any = None) -> dict[str, Any]:
  """For each mutant and level, both modes side by side for `seconds`; a mode kills the mutant when a case fails with
  it and passes without it (fuzz/targets/common.py MutantCheck)."""
  from fuzz.measure.mutants import MUTANTS
  names = list(mutants or MUTANTS)
  rows = []
  for name in names:
    for level in levels:
      runs = run_side_by_side(level, seconds, backends, extra=[f"--mutant={name}", "--stop-at-kill"])
      row: dict[str, Any] = {"mutant": name, "kind": MUTANTS[name].kind, "level": level}
      for mode, r in runs.items():
        if not r.stats: raise RuntimeError(f"{name} {level} {mode}: no stats (exit {r.returncode}):\n{r.log}")
        row[mode] = {"killed": r.stats.get("kills", 0) > 0, "at": r.stats.get("first_kill"),
                     "inputs": r.stats.get("inputs", 0), "background": r.stats.get("background", 0)}
      rows.append(row)
      if progress: progress(format_row(row))
  share = {f"{lv}/{m}": sum(r[m]["killed"] for r in rows if r["level"] == lv) / len(names)
           for lv in levels for m in MODES}
  return {"seconds": seconds, "backends": backends, "rows": rows, "share": share}

def format_row(r: dict[str, Any]) -> str:
  def cell(c: dict[str, Any]) -> str:
    return f"killed at {c['at']:.1f}s ({c['inputs']} inputs)" if c["killed"] else f"missed ({c['inputs']} inputs)"
  return f"  {r['mutant']:20s} {r['level']:9s} guided: {cell(r['guided']):32s} unguided: {cell(r['unguided'])}"

def format_score(s: dict[str, Any]) -> str:
  lines = [f"mutation score, {s['seconds']:.0f} s per (mutant, level, mode), backends {s['backends']}:"]
  lines += [format_row(r) for r in s["rows"]]
  lines += [f"  share killed {k}: {v:.0%}" for k, v in s["share"].items()]
  return "\n".join(lines)

__all__ = ["TargetRun", "run_side_by_side", "compare_rules", "format_compare", "keep_findings", "mutation_score",
           "format_score"]
