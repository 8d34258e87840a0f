"""The driver every atheris target shares: `main(level, argv)`.

A target is libFuzzer-compatible (atheris): `python fuzz/targets/symbolic_target.py [libFuzzer flags] [corpus dirs]`,
with `-runs=N`, `-max_total_time=S`, `-fork=J`/`-jobs=J` and corpus directories as libFuzzer reads them. An input is
the bytes a campaign level (fuzz/campaign/levels.py) builds its case from (BytesChooser), so a corpus is interchangeable
with `python -m fuzz run`'s DIR/corpus/<level>/. A case the level's oracles reject raises `FuzzFinding`: libFuzzer
writes the input as a crash artifact (crash-<sha1>), which `python fuzz/targets/<level>_target.py crash-<sha1>` replays.

Feedback, besides the line coverage of tinygrad/ (atheris.instrument_imports, every module the level's check path
imports): each rewrite rule that matches (TRACK_MATCH_STATS) drives a coverage counter of its own, once per match up
to 128 per input, so an input that makes a rule fire for the first time, or more often than before (libFuzzer buckets
the counts), is kept, even where that rule's line was already covered by another pass.

Options of this driver (taken out of argv before libFuzzer sees it):
  --backends=python,cpu   kernel and tensor levels: the backends to check on (fuzz/campaign/backends.py; default python)
  --setup=module:function call it first (a planted bug, e.g. tests.fuzz.planted:range_bound_off_by_one)
  --mutant=NAME           plant one bug of fuzz/measure/mutants.py; a case counts as a finding ("kill") only if it fails
                          with the mutant and passes without it (each failing case is checked again with the rule
                          restored)
  --stop-at-kill          with --mutant: write the stats and exit at the first kill (the mutation score's runs)
  --stats=FILE            write the rules hit, inputs run and findings as JSON to FILE.<pid> every few seconds
  --unguided              no atheris: random inputs (the baseline of `python -m fuzz compare`); stops at
                          -runs=N or -max_total_time=S like libFuzzer
  --no-instrument         atheris without line coverage of tinygrad (rule counters only)
  --scheduled             no atheris: the rule-guided scheduler of fuzz/campaign/scheduler.py (rare-rule energy,
                          mutations at choice boundaries, a bandit share of fresh inputs); corpus directories are run
                          first and the first one gets every input that joins the corpus; stops like --unguided
With --unguided and --scheduled, libFuzzer's -artifact_prefix=P writes a failing input as Pcrash-<sha1> too, once per
distinct set of failures (the loop goes on past a finding).
"""
from __future__ import annotations
import hashlib, importlib, json, os, random, sys, time
from typing import Any, Callable

# bytes of a random input per level (the level reads what it needs; past the end it reads zeros)
INPUT_BYTES = {"symbolic": 256, "kernel": 2048, "tensor": 1024}
# NOTE: libFuzzer ends the process with exit() (no atexit): the stats file is rewritten every second, and on the
# last of -runs=N
STATS_EVERY = 1.0

class FuzzFinding(AssertionError):
  """The level's oracles rejected the case built from this input (the message lists each failure)."""


class RuleHits:
  """The rules that matched so far and how often, from tinygrad.uop.ops.match_stats (TRACK_MATCH_STATS=1)."""
  def __init__(self) -> None:
    self.seen: dict[tuple[str, str], int] = {}
    self.hit: dict[str, int] = {}
    # rules attempted at least once (a node with the op at the top of the rule's pattern came up)
    self.tried: set[str] = set()
  def new_matches(self) -> dict[str, int]:
    """rule -> matches since the last call."""
    from tinygrad.uop.ops import match_stats
    from fuzz.campaign.scheduler import rule_key
    out: dict[str, int] = {}
    for p, rules in match_stats.items():
      for r, st in rules.items():
        if st[1] and (p, r) not in self.seen:
          self.tried.add(rule_key(r))
          self.seen[(p, r)] = 0
        m = int(st[0])
        if m > (prev := self.seen.get((p, r), 0)):
          k = rule_key(r)
          out[k] = out.get(k, 0) + m - prev
          self.seen[(p, r)] = m
    for k, n in out.items(): self.hit[k] = self.hit.get(k, 0) + n
    return out

class Counters:
  """One atheris coverage counter per rule: a rule's matches in an input bump its counter (libFuzzer buckets them)."""
  def __init__(self, atheris: Any, n: int = 2048):
    self.atheris = atheris
    self.free = [atheris._reserve_counter() for _ in range(n)]
    self.ids: dict[str, int] = {}
  def feed(self, matches: dict[str, int]) -> None:
    for k, n in matches.items():
      if (cid := self.ids.get(k)) is None:
        if not self.free: continue
        cid = self.ids[k] = self.free.pop()
      for _ in range(min(n, 128)): self.atheris._trace_branch(cid)

class Stats:
  def __init__(self, path: str | None, mode: str, level: str):
    self.path = f"{path}.{os.getpid()}" if path else None
    self.mode, self.level, self.start = mode, level, time.monotonic()
    self.inputs, self.findings = 0, 0
    self.first_finding: float | None = None
    self.mutant: str | None = None
    self.kills, self.background = 0, 0
    self.first_kill: float | None = None
    self.messages: list[str] = []
    self.samples: list[tuple[float, int, int]] = []
    self.last = 0.0
  def note(self, hits: RuleHits, force: bool = False) -> None:
    now = time.monotonic() - self.start
    if not force and now - self.last < STATS_EVERY: return
    self.last = now
    self.samples.append((round(now, 1), self.inputs, len(hits.hit)))
    if self.path is None: return
    from tinygrad.helpers import atomic_write
    atomic_write(self.path, json.dumps({"mode": self.mode, "level": self.level, "seconds": round(now, 1),
                                        "inputs": self.inputs, "rules": sorted(hits.hit), "samples": self.samples,
                                        "findings": self.findings, "first_finding": self.first_finding,
                                        "mutant": self.mutant, "kills": self.kills, "first_kill": self.first_kill,
                                        "background": self.background, "messages": self.messages[:20]}))

def _opt(argv: list[str], name: str) -> str | None:
  for a in argv:
    if a.startswith(f"--{name}="): return a.split("=", 1)[1]
    if a == f"--{name}": return ""
  return None

def _lib_opt(argv: list[str], name: str) -> float | None:
  for a in argv:
    if a.startswith(f"-{name}="): return float(a.split("=", 1)[1])
  return None

class LevelCheck:
  """check(data) -> the failures of the case the level builds from data (empty: every oracle agreed); `marks` and
  `used` say where the last case's choices started and how many bytes it read, `case` is that case (for the
  scheduler's mutations and features)."""
  def __init__(self, level_name: str, backends: list[str]):
    from fuzz.campaign.levels import LEVELS
    from fuzz.campaign.backends import open_backends
    self.level = LEVELS[level_name]()
    self.backends, missing = open_backends(backends) if level_name != "symbolic" else ({}, {})
    for n, why in missing.items(): print(f"backend {n} not run: {why}", file=sys.stderr)
    self.marks: list[int] = []
    self.used = 0
    self.case: Any = None
  def __call__(self, data: bytes) -> list[Any]:
    from fuzz.campaign.backends import failure_from
    from fuzz.campaign.scheduler import ChoiceRecorder
    ch = ChoiceRecorder(data)
    self.case = None
    try: self.case = case = self.level.from_chooser(ch)
    except Exception as e: return [failure_from(e, "generate", "generator")]
    finally: self.marks, self.used = ch.marks, ch.used
    return self.level.check([case], self.backends)[0]

class MutantCheck:
  """check(data) with a planted mutant: a failing case is checked again without it, and counts as a kill only if it
  then passes (the failures of a kill, else none; `background` counts cases that fail either way)."""
  def __init__(self, check: Callable[[bytes], list[Any]], name: str, stats: Stats, stop: bool):
    from fuzz.measure.mutants import apply_mutant
    self.inner, self.stats, self.stop = check, stats, stop
    self.mutant = apply_mutant(name)
    stats.mutant = name
  def __call__(self, data: bytes) -> list[Any]:
    fails = self.inner(data)
    if not fails: return fails
    self.mutant.revert()
    try: without = self.inner(data)
    finally: self.mutant.apply()
    if without:
      self.stats.background += 1
      return []
    self.stats.kills += 1
    if self.stats.first_kill is None: self.stats.first_kill = round(time.monotonic() - self.stats.start, 1)
    return fails

# our loops go on past a finding (libFuzzer stops at its first): at most this many artifacts per run
MAX_ARTIFACTS = 50

def _first_of_kind(fails: list[Any], written: set[frozenset[tuple[str, ...]]]) -> bool:
  """True (and remembered in `written`) the first time this set of failures (stage, kind, site, backend) comes up,
  while fewer than MAX_ARTIFACTS were written."""
  key = frozenset((f.stage, f.kind, f.site, f.backend) for f in fails)
  if key in written or len(written) >= MAX_ARTIFACTS: return False
  written.add(key)
  return True

def write_artifact(prefix: str, data: bytes, fails: list[Any], written: set[frozenset[tuple[str, ...]]]) -> None:
  """As libFuzzer does at a crash: the input as `<prefix>crash-<sha1>`, here once per distinct set of failures (stage,
  kind, site, backend), so `python -m fuzz compare` can turn each into a reproducer."""
  if not _first_of_kind(fails, written): return
  from tinygrad.helpers import atomic_write
  atomic_write(f"{prefix}crash-{hashlib.sha1(data).hexdigest()}", data)

def write_state(prefix: str, state: dict[str, Any], fails: list[Any], written: set[frozenset[tuple[str, ...]]]) -> None:
  """A failing case that no input bytes rebuild (a directed one) as `<prefix>directed-<sha1>.json`: the level's state
  (for a kernel: pyrender text, var_vals, opts, input seed; `Level.from_state` reads it back) and the failures, once
  per distinct set of failures as `write_artifact` does."""
  if not _first_of_kind(fails, written): return
  from tinygrad.helpers import atomic_write
  text = json.dumps({"state": state, "failures": [f"[{f.stage}/{f.backend}] {f.kind} at {f.site}: {f.message[:2000]}"
                                                  for f in fails]}, indent=1)
  atomic_write(f"{prefix}directed-{hashlib.sha1(text.encode()).hexdigest()}.json", text)

def run_setup(spec: str | None) -> None:
  if not spec: return
  mod, _, fn = spec.partition(":")
  if not fn: raise ValueError(f"--setup={spec!r} must be module:function")
  getattr(importlib.import_module(mod), fn)()

def main(level_name: str, argv: list[str]) -> None:
  """Run the target: atheris (default), --scheduled or --unguided; never returns when atheris runs (libFuzzer
  exits)."""
  own = [a for a in argv[1:] if a.startswith("--")]
  # NOTE: libFuzzer's -fork/-jobs start each child as a shell command line from argv[0] (own options kept): this
  # interpreter and the script, so a child needs neither an executable bit nor `python3` on PATH to be this venv's
  # (a PyInstaller binary, as ClusterFuzzLite builds a target, is its own interpreter)
  prog = argv[0] if getattr(sys, "frozen", False) else f"{sys.executable} {os.path.abspath(argv[0])}"
  lib = [f"{prog} {' '.join(own)}".strip()]
  lib += [a for a in argv[1:] if not a.startswith("--")]
  backends = (_opt(own, "backends") or "python").split(",")
  mode = "unguided" if _opt(own, "unguided") is not None else "scheduled" if _opt(own, "scheduled") is not None \
    else "atheris"
  stats = Stats(_opt(own, "stats"), mode, level_name)
  # NOTE: set before tinygrad is imported (its flags are read at import); nothing above imports it. SCHEDULE_CACHE=0:
  # an input whose graph was scheduled before would fire none of the scheduler's rules (its coverage)
  os.environ["TRACK_MATCH_STATS"] = "1"
  os.environ["SCHEDULE_CACHE"] = "0"
  if mode != "atheris":
    return unguided(level_name, backends, lib, stats, _opt(own, "setup"), _opt(own, "mutant"),
                    _opt(own, "stop-at-kill") is not None, scheduled=mode == "scheduled")
  import atheris
  hits = RuleHits()
  check: Callable[[bytes], list[Any]]
  if _opt(own, "no-instrument") is None:
    # NOTE: the first input runs inside the block, so every module the check path imports lazily is instrumented too
    with atheris.instrument_imports(include=["tinygrad"]):
      check = LevelCheck(level_name, backends)
      check(b"")
  else:
    check = LevelCheck(level_name, backends)
    check(b"")
  # NOTE: a planted bug patches the imported (instrumented) modules
  run_setup(_opt(own, "setup"))
  if (mut := _opt(own, "mutant")): check = MutantCheck(check, mut, stats, _opt(own, "stop-at-kill") is not None)
  hits.new_matches()
  counters = Counters(atheris)
  last_run = _lib_opt(lib, "runs")
  def test_one_input(data: bytes) -> None:
    fails = check(data)
    counters.feed(hits.new_matches())
    stats.inputs += 1
    stats.note(hits, force=stats.inputs == last_run)
    if fails:
      stats.findings += 1
      if stats.first_finding is None: stats.first_finding = round(time.monotonic() - stats.start, 1)
      stats.messages.append(f"[{fails[0].stage}/{fails[0].backend}] {fails[0].kind} at {fails[0].site}")
      stats.note(hits, force=True)
      # NOTE: libFuzzer exits at a crash anyway; a mutation run stops without writing a crash artifact
      if isinstance(check, MutantCheck) and check.stop: os._exit(0)
      raise FuzzFinding("\n".join(f"[{f.stage}/{f.backend}] {f.kind} at {f.site}: {f.message[:2000]}" for f in fails))
  # NOTE: a case reads its choices from the input's bytes: libFuzzer's default of growing inputs from 4 bytes spends
  # thousands of runs on near-empty cases, so inputs start at the size a level reads (unless the flags say otherwise)
  if _lib_opt(lib, "max_len") is None: lib.append(f"-max_len={INPUT_BYTES[level_name]}")
  if _lib_opt(lib, "len_control") is None: lib.append("-len_control=0")
  atheris.Setup(lib, test_one_input)
  atheris.Fuzz()

def unguided(level_name: str, backends: list[str], lib: list[str], stats: Stats, setup: str | None,
             mutant: str | None = None, stop: bool = False, scheduled: bool = False) -> None:
  """Our own loop until -runs or -max_total_time (one of them is needed); findings are counted, not raised.
  Unguided: fresh random inputs only. `scheduled`: the rule-guided scheduler (fuzz/campaign/scheduler.py) picks each
  input; corpus directories are run first, and each input that joins its corpus is written to the first one."""
  runs, secs = _lib_opt(lib, "runs"), _lib_opt(lib, "max_total_time")
  if runs is None and secs is None: raise SystemExit(f"--{stats.mode} needs -runs=N or -max_total_time=S")
  seed = _lib_opt(lib, "seed")
  rng = random.Random(int(seed) if seed is not None else 0)
  hits = RuleHits()
  base = LevelCheck(level_name, backends)
  base(b"")
  run_setup(setup)
  check: Callable[[bytes], list[Any]] = MutantCheck(base, mutant, stats, stop) if mutant else base
  hits.new_matches()
  sched, dirs, pending = None, [a for a in lib[1:] if not a.startswith("-") and os.path.isdir(a)], []
  prefix = next((a.split("=", 1)[1] for a in lib[1:] if a.startswith("-artifact_prefix=")), None)
  written: set[frozenset[tuple[str, ...]]] = set()
  director, plain_level = None, base.level
  if scheduled:
    from fuzz.campaign.scheduler import Scheduler, Director, recorder_marks, shape_features
    from fuzz.campaign.levels import DirectedLevels
    sched = Scheduler(INPUT_BYTES[level_name], recorder_marks(base.level.from_chooser), rng)
    # NOTE: directed generation: the kernel and symbolic generators build a rule's pattern (fuzz/gen/patterns.py)
    if level_name in ("kernel", "symbolic"):
      by_tag = DirectedLevels(plain_level)
      director = Director(by_tag.ops(), random.Random(rng.random()))
    for d in dirs:
      for name in sorted(os.listdir(d)):
        with open(os.path.join(d, name), "rb") as fh: pending.append(fh.read())
  while (runs is None or stats.inputs < runs) and (secs is None or time.monotonic() - stats.start < secs):
    data = pending.pop() if pending else sched.next() if sched is not None else rng.randbytes(INPUT_BYTES[level_name])
    # the generator config the case is built with: a mutation's is its seed's; a fresh input's, one time in
    # director.share(), is directed at a rule tried but not matched yet (the tag: that rule)
    parent = sched.origin(data) if sched is not None else None
    tag, directed = None, False
    if director is not None:
      if parent is not None: tag = parent.tag
      elif rng.random() < director.share() and (aim := director.pick(hits.tried, hits.hit)) is not None:
        tag, directed = aim[0], True
      base.level = by_tag.get(tag)
    t0 = time.perf_counter()
    fails = check(data)
    cost = time.perf_counter() - t0
    new = hits.new_matches()
    if director is not None and parent is None:
      director.note(directed, any(hits.hit[r] == n for r, n in new.items()))
    shape = shape_features(getattr(base.case, "ast", base.case)) if sched is not None else set()
    # NOTE: a corpus directory holds inputs of the level's own generator: a directed case is kept in memory only
    joined = sched is not None and sched.feedback(data, new, base.used, base.marks, shape, cost, tag)
    if joined and dirs and tag is None:
      from tinygrad.helpers import atomic_write
      kept = data[:max(base.used, 1)]
      atomic_write(os.path.join(dirs[0], hashlib.sha1(kept).hexdigest()), kept)
    stats.inputs += 1
    if fails:
      stats.findings += 1
      if stats.first_finding is None: stats.first_finding = round(time.monotonic() - stats.start, 1)
      stats.messages.append(f"[{fails[0].stage}/{fails[0].backend}] {fails[0].kind} at {fails[0].site}")
      # NOTE: a directed case's bytes build another case under the level's own generator, so it gets no crash-
      # artifact (one would replay as a different case); the case itself is kept as the level's state instead
      if tag is not None:
        stats.messages[-1] += " (a directed case: kept as directed-<sha1>.json)"
        if prefix is not None and base.case is not None:
          write_state(prefix, base.level.state(base.case), fails, written)
      elif prefix is not None: write_artifact(prefix, data, fails, written)
      if isinstance(check, MutantCheck) and check.stop: break
    stats.note(hits)
  stats.note(hits, force=True)
  extra = f", corpus {len(sched.corpus)}, fresh share {sched.fresh_share():.2f}" if sched is not None else ""
  if director is not None: extra += f", directed share {director.share():.2f}, aimed at {len(director.tries)} rules"
  print(f"{stats.mode} {level_name}: {stats.inputs} inputs, {len(hits.hit)} rules hit, {stats.findings} findings"
        f"{extra}")
