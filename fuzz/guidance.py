"""Measured comparisons of guided and unguided fuzzing, each mode run as the target of its level (fuzz/targets/) in a
process of its own, side by side in the same run so all see the same machine load. Modes: `guided` (the rule-guided
scheduler of fuzz/scheduler.py), `unguided` (fresh random bytes: the same generator and checks), `atheris` (libFuzzer
fed by the line coverage of tinygrad and a counter per rewrite rule) and `rules` (libFuzzer fed by the rule counters
only).

  compare_rules(level, seconds)       rewrite rules hit (TRACK_MATCH_STATS) after `seconds`, guided vs unguided
  mutation_score(levels, seconds)     per planted bug of fuzz/mutants.py and per level, whether each mode kills it
                                      within `seconds` (and when): the share each (level, mode) finds

`python -m fuzz compare` and `python -m fuzz mutants` print both; docs/fuzz.md has numbers measured with them."""
from __future__ import annotations
import glob, json, os, random, subprocess, sys, tempfile, time
from dataclasses import dataclass, field
from typing import Any, Sequence

TARGETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "targets")
MODES = ("guided", "unguided")
# guided: fuzz/scheduler.py (rule counters, rare-rule energy, mutations at choice boundaries); atheris: libFuzzer fed by
# the line coverage of tinygrad and the rule counters; rules: libFuzzer fed by the rule counters only
ALL_MODES = ("guided", "unguided", "atheris", "rules")
SEEDS = 32

@dataclass
class TargetRun:
  level: str
  mode: str
  seconds: float
  stats: dict[str, Any] = field(default_factory=dict)
  returncode: int | None = None
  log: str = ""
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
  if mode == "unguided": return [*cmd, "--unguided"]
  # NOTE: "guided": our rule-guided scheduler (fuzz/scheduler.py), which starts from nothing: its first inputs are
  # fresh random ones, like the unguided run's
  if mode == "guided": return [*cmd, "--scheduled"]
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
  # NOTE: crash artifacts go to the work directory, never into the repository
  return [*cmd, f"-artifact_prefix={workdir}/", "-print_final_stats=0", corpus]

def run_side_by_side(level: str, seconds: float, backends: str = "python", extra: Sequence[str] = (),
                     modes: Sequence[str] = MODES) -> dict[str, TargetRun]:
  """Both modes of one level at once, each for `seconds` (plus its start-up), with their stats read back."""
  with tempfile.TemporaryDirectory(prefix="fuzz-guidance-") as tmp:
    procs = {}
    for mode in modes:
      wd = os.path.join(tmp, mode)
      os.makedirs(wd)
      cmd = _command(level, mode, seconds, os.path.join(wd, "stats"), wd, backends, extra)
      log = open(os.path.join(wd, "log.txt"), "w")
      env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}
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
      run = TargetRun(level, mode, seconds, returncode=rc)
      files = sorted(glob.glob(os.path.join(wd, "stats.*")), key=os.path.getmtime)
      # NOTE: libFuzzer's -fork/-jobs children write a file each; without them there is one
      for f in files:
        with open(f) as fh: st = json.load(fh)
        run.stats = st if not run.stats else _merge(run.stats, st)
      with open(os.path.join(wd, "log.txt")) as fh: run.log = fh.read()[-4000:]
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

def compare_rules(level: str, seconds: float, backends: str = "python",
                  modes: Sequence[str] = MODES) -> dict[str, Any]:
  """Rules hit per mode, all modes side by side; counted at the same time since each run's start (start-up
  included): the time of the shortest run's last sample."""
  runs = run_side_by_side(level, seconds, backends, modes=modes)
  for r in runs.values():
    if not r.stats: raise RuntimeError(f"{level} {r.mode}: the target wrote no stats (exit {r.returncode}):\n{r.log}")
  t = min(r.stats["seconds"] for r in runs.values())
  sets = {m: set(r.stats["rules"]) for m, r in runs.items()}
  union = set().union(*sets.values())
  return {"level": level, "seconds": seconds, "at": t, "backends": backends,
          "modes": {m: {"rules_at": r.rules_at(t), "rules": len(sets[m]), "inputs": r.stats["inputs"],
                        "last_rule_at": r.last_rule_at(), "findings": r.stats.get("findings", 0),
                        "messages": r.stats.get("messages", [])[:3],
                        "missed": sorted(union - sets[m])} for m, r in runs.items()}}

def format_compare(r: dict[str, Any]) -> str:
  ms = r["modes"]
  lines = [f"{r['level']} level, {r['seconds']:.0f} s per mode side by side, backends {r['backends']}:",
           f"  rules hit at {r['at']:.0f} s: " + ", ".join(f"{m} {v['rules_at']}" for m, v in ms.items()),
           "  at the end: " + ", ".join(f"{m} {v['rules']} rules / {v['inputs']} inputs" for m, v in ms.items())]
  lines.append("  last new rule at: " + ", ".join(f"{m} {v['last_rule_at'][0]:.0f} s ({v['last_rule_at'][1]} inputs)"
                                                 for m, v in ms.items()))
  lines += [f"  {m} missed ({len(v['missed'])}): {', '.join(v['missed']) or '-'}" for m, v in ms.items()]
  # NOTE: a finding here is a failure of the unmutated compiler (a bug), not a planted one
  lines += [f"  {m}: {v['findings']} findings: {'; '.join(v['messages'])}" for m, v in ms.items() if v["findings"]]
  return "\n".join(lines)

# ---- mutation score ----

def mutation_score(levels: Sequence[str], seconds: float, mutants: Sequence[str] | None = None,
                   backends: str = "python", progress: Any = None) -> dict[str, Any]:
  """For each mutant and level, both modes side by side for `seconds`; a mode kills the mutant when a case fails with
  it and passes without it (fuzz/targets/common.py MutantCheck)."""
  from fuzz.mutants import MUTANTS
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

__all__ = ["TargetRun", "run_side_by_side", "compare_rules", "format_compare", "mutation_score", "format_score"]
