"""A campaign's worker process: `python -m fuzz.campaign.worker '<config json>'`, one JSON message per line.

It checks cases in its own process so that a crash (a segfault in compiled code) or a hang costs only the worker: the
parent (fuzz/campaign/run.py) sees its pipe close or its time run out, records a finding for the case and step the
worker last announced, and starts a new worker.

Config (argv[1]): {"levels": [names] (or "level": name), "backends": [names], "setup": "module:function" or null,
"max_jobs": n, "validate_bounds": bool, "seeds": directory of kernel seeds or null}. The `setup` hook is imported and
called once at start (planted-bug experiments patch the compiler there); it comes from the campaign's command line,
never from a reproducer file.

To the parent (on the original stdout; the worker's own stdout is redirected to stderr, so stray prints cannot break
the protocol):
  {"t": "ready", "backends": {name: description}, "missing": {name: why}}
  {"t": "note", "job": id, "item": i, "backend": b, "stage": s}      before each step of each case
  {"t": "result", "job": id, "results": [per case: {"failures": [...], "rules": [...], "attempted": [...],
                                                    "hits": {rule: matches}, "size": n, "used": bytes read,
                                                    "state": {...} or null}]}
  ("rules"/"attempted": 'pass::rule' names new to this worker process; "hits": every match during the case's steps,
  by rule key (fuzz/campaign/scheduler.py rule_key): the scheduler's features)
  {"t": "bye"} after max_jobs jobs (the parent starts a fresh worker: memory held by loaded kernels is returned)
From the parent (stdin): {"job": id, "op": "check", "level": name, "inputs": [hex bytes], "tags": [rule or null]
(optional: the rule each input's generator is directed at, or "seed:NAME", the kernel seed it mutates;
fuzz/campaign/levels.py DirectedLevels)} or {"job": id, "op":
"check_state", "level": name, "states": [level states], "backends": [names] or null}. A job without "level" is of
the first level of the config.
"""
from __future__ import annotations
import dataclasses, gc, importlib, json, os, sys, traceback
from typing import Any, TextIO
from tinygrad.uop.ops import match_stats

class Coverage:
  """Attributes newly matched/tried rules to the case whose step was running when they first fired, and every match to
  the case whose step was running when it happened (`hits`: per case, rule key -> matches)."""
  def __init__(self) -> None:
    from fuzz.campaign.scheduler import rule_key
    self.rule_key = rule_key
    # pass -> rules seen matched / tried so far (rule names, not 'pass::rule' strings: a flush formats only new ones)
    self.matched: dict[str, set[str]] = {}
    self.tried: dict[str, set[str]] = {}
    self.current = -1
    self.new: dict[int, tuple[list[str], list[str]]] = {}
    # each rule's match count at the last flush, and per case what matched while its steps ran
    self.seen: dict[int, int] = {}
    self.hits: dict[int, dict[str, int]] = {}
    self.flush()
  def flush(self) -> None:
    nm, nt = [], []
    h = self.hits.setdefault(self.current, {}) if self.current >= 0 else None
    seen = self.seen
    for p, rules in match_stats.items():
      for r, st in rules.items():
        # NOTE: the row (a list, kept for the process's life) is the rule's identity in match_stats
        if (m := int(st[0])) > (prev := seen.get(id(st), 0)):
          seen[id(st)] = m
          if h is not None:
            k = self.rule_key(r)
            h[k] = h.get(k, 0) + m - prev
      sm, stried = self.matched.setdefault(p, set()), self.tried.setdefault(p, set())
      if len(sm) == len(rules): continue  # NOTE: every rule of the pass matched already (sm is a subset of rules)
      for r, st in rules.items():
        if st[1] > 0 and r not in stried:
          stried.add(r)
          nt.append(f"{p}::{r}")
        if st[0] > 0 and r not in sm:
          sm.add(r)
          nm.append(f"{p}::{r}")
    if (nm or nt) and self.current >= 0:
      a, b = self.new.setdefault(self.current, ([], []))
      a.extend(sorted(nm))
      b.extend(sorted(nt))
  def at(self, i: int) -> None:
    # NOTE: what fired since the last flush belongs to the current case either way when the next step is its own too
    if i == self.current: return
    self.flush()
    self.current = i

def run_setup(spec: str | None) -> None:
  if not spec: return
  mod, _, fn = spec.partition(":")
  if not fn: raise ValueError(f"setup {spec!r} must be module:function")
  getattr(importlib.import_module(mod), fn)()

USAGE = "usage: python -m fuzz.campaign.worker '<config json>' (started by a campaign, fuzz/campaign/run.py)"

def main(argv: list[str]) -> int:
  if len(argv) != 1 or argv[0] in ("-h", "--help"):
    print(USAGE + "\n\n" + (__doc__ or "").split("\n\nTo the parent")[0])
    return 0 if argv and argv[0] in ("-h", "--help") else 2
  try: cfg = json.loads(argv[0])
  except json.JSONDecodeError as e:
    print(f"fuzz.campaign.worker: the config is not JSON ({e}); {USAGE}", file=sys.stderr)
    return 2
  if not isinstance(cfg, dict):
    print(f"fuzz.campaign.worker: the config must be a JSON object, not {type(cfg).__name__}; {USAGE}", file=sys.stderr)
    return 2
  out: TextIO = os.fdopen(os.dup(1), "w", buffering=1)
  os.dup2(2, 1)
  def send(msg: dict[str, Any]) -> None: out.write(json.dumps(msg) + "\n")
  run_setup(cfg.get("setup"))
  from fuzz.campaign.levels import LEVELS, KernelLevel, DirectedLevels
  from fuzz.campaign.backends import open_backends, Failure, failure_from
  from fuzz.gen.choosers import BytesChooser
  from fuzz.seeds import read_seeds
  bounds = bool(cfg.get("validate_bounds"))
  level_names = cfg.get("levels") or [cfg["level"]]
  levels = {n: KernelLevel(validate_bounds=bounds) if n == "kernel" else LEVELS[n]() for n in level_names}
  backends, missing = open_backends(cfg["backends"])
  # NOTE: what is alive now (the imported modules, the rule tables, the toolchains) lives as long as the worker, so it
  # leaves the collector's generations: full collections walked all of it again and again (~10% of a case's CPU time).
  gc.freeze()
  # NOTE: a case makes and drops ~10^5 short-lived containers (match stores, rebuilt sources, parsed pyrender text),
  # nearly all freed by reference counting: at the default 700 allocations per young collection the collector ran ~3
  # times per case for almost nothing (~0.4 ms of a ~10 ms case); cyclic garbage waits a little longer instead
  gc.set_threshold(10_000, 10, 10)
  send({"t": "ready", "backends": {n: b.describe() for n, b in backends.items()}, "missing": missing})
  cov = Coverage()
  jobs = 0
  # NOTE: the parent's Campaign builds a tagged input with the same levels (fuzz/campaign/levels.py DirectedLevels)
  # NOTE: the kernel level's seeds (fuzz/seeds.py), read here with the same checked reader as in the parent
  seeds = read_seeds(cfg["seeds"]) if cfg.get("seeds") and "kernel" in levels else {}
  directed = {n: DirectedLevels(lv, bounds, seeds if n == "kernel" else None) for n, lv in levels.items()}
  for line in sys.stdin:
    job = json.loads(line)
    jid = job["job"]
    name = job.get("level", level_names[0])
    level = levels[name]
    cases: list[Any] = []
    fails: dict[int, list[Failure]] = {}
    used: list[int] = []
    if job["op"] == "check":
      tags = job.get("tags") or [None] * len(job["inputs"])
      for i, h in enumerate(job["inputs"]):
        cov.at(i)
        ch = BytesChooser(bytes.fromhex(h))
        try: cases.append(directed[name].get(tags[i]).from_chooser(ch))
        except Exception as e:
          cases.append(None)
          fails[i] = [failure_from(e, "generate", "generator")]
        used.append(ch.used)
    else:
      for i, st in enumerate(job["states"]):
        try: cases.append(level.from_state(st))
        except Exception as e:
          cases.append(None)
          fails[i] = [failure_from(e, "reproducer", "reader")]
        used.append(0)
    names = job.get("backends")
    bk = backends if names is None else {n: backends[n] for n in names if n in backends}
    def note(i: int, b: str, s: str) -> None:
      idx = live[i] if 0 <= i < len(live) else i
      cov.at(idx)
      send({"t": "note", "job": jid, "item": idx, "backend": b, "stage": s})
    live = [i for i, c in enumerate(cases) if c is not None]
    try: res = level.check([cases[i] for i in live], bk, note)
    except Exception as e:
      traceback.print_exc()
      res = [[failure_from(e, "harness", "harness")] for _ in live]
    cov.flush()
    for i, r in zip(live, res): fails.setdefault(i, []).extend(r)
    results = []
    for i, c in enumerate(cases):
      fs = fails.get(i, [])
      nm, nt = cov.new.get(i, ([], []))
      st = None
      if fs and c is not None:
        try: st = level.state(c)
        except Exception as e: st = {"error": f"could not record the case: {e}"}
      results.append({"failures": [dataclasses.asdict(f) for f in fs], "rules": nm, "attempted": nt,
                      "hits": cov.hits.get(i, {}),
                      "size": level.size(c) if c is not None else 0, "used": used[i], "state": st})
    cov.new.clear()
    cov.hits.clear()
    send({"t": "result", "job": jid, "results": results})
    jobs += 1
    if cfg.get("max_jobs") and jobs >= cfg["max_jobs"]:
      send({"t": "bye"})
      break
  return 0

if __name__ == "__main__": sys.exit(main(sys.argv[1:]))
