"""Fuzz campaigns: `python -m fuzz run --minutes N [--levels symbolic,kernel,tensor] [--backends ...] --out DIR`.

The parent process hands batches of inputs to J worker processes (fuzz/campaign/worker.py) and collects what they find:

  levels    every level by default, each an equal share of the workers' time: the next job goes to the level whose
            jobs took the fewest worker-seconds (pick_level), and a job aims at JOB_SECONDS (batch_size)

  inputs    bytes from the persistent corpus in DIR/corpus/<level>/, mutated at the generator's choice boundaries
            and picked by the rarity of what they reached (fuzz/campaign/scheduler.py), or fresh random bytes; a
            generator reads them through BytesChooser, so a mutation is a nearby case. The features of a case are the
            rewrite rules it made match and how often (TRACK_MATCH_STATS, per case in the workers); an input with a
            feature no earlier input had joins the corpus, trimmed to the bytes the generator read.
            On the kernel and symbolic levels a share of the fresh inputs is directed (`directed`): the generator
            weighs up, and now and then builds outright, the pattern of a rule tried but never matched; a directed
            case's mutations are built the same way, and it is kept in memory (the corpus directory holds inputs
            of the plain generator, which rebuilds other cases from them).
  findings  every Failure a worker reports, and every worker that dies (a crash: the signal) or stops announcing
            progress for `step_timeout` seconds (a hang: killed), is a finding under its Signature
            (fuzz/campaign/findings.py); the worker is restarted and the campaign goes on. A SIGKILL (from outside: the
            OOM killer, a user) is a resource finding near the memory cap or when it recurs on the case run alone, else
            a worker loss (worker_died); a worker resident past the memory cap is killed, a resource finding. The case
            of a new signature is written at once as a reproducer (DIR/findings/<id>.json) and then reduced
            (fuzz/campaign/reduce.py), its candidates checked in the workers too, so a crashing candidate is an answer
            and not the end; the reduced case replaces the original in the file. The same signature found again only
            counts.
  progress  one line every few seconds: cases (per level), rate, rewrite rules matched of those tried, corpus,
            findings per backend, reductions, worker restarts.
  record    DIR/campaign.json (configuration, backends and why any is unavailable, totals) and DIR/stats.json (a
            sample every few seconds), both rewritten atomically; `python -m fuzz report DIR` renders them.

The public API for other tools (the planted-bug experiments, atheris drivers): `CampaignConfig`, `run_campaign(cfg)
-> CampaignSummary`, `repro(path) -> ReproResult`, and `WorkerPool` to check cases in crash-isolated processes.
"""
from __future__ import annotations
import json, os, random, selectors, signal, subprocess, sys, time
from dataclasses import dataclass, field, asdict
from typing import Any, Sequence
from tinygrad.helpers import atomic_write
from fuzz.campaign.backends import BACKENDS, DEFAULT_BACKENDS, Failure, REPO
from fuzz.campaign.findings import (Signature, Finding, write_finding, load_findings, read_reproducer, read_case,
                                    replay_flags, now)
from fuzz.campaign.reduce import Reduction
from fuzz.campaign.scheduler import Scheduler, Director, recorder_marks, rule_key
from fuzz.campaign.levels import DirectedLevels, SEED_TAG
from fuzz.seeds import read_seeds

# bytes of a fresh input per level (a generator reads what it needs; past the end it reads zeros)
FRESH_BYTES = {"kernel": 2048, "symbolic": 256, "tensor": 1024}
# worker-seconds a fuzz job aims at (Campaign.batch_size)
JOB_SECONDS = 15.0

# every level, in the order a campaign takes its first jobs; which kind of change each catches: docs/fuzz.md
LEVEL_NAMES = ("symbolic", "kernel", "tensor")

@dataclass
class CampaignConfig:
  out: str
  minutes: float = 1.0
  backends: tuple[str, ...] = DEFAULT_BACKENDS
  jobs: int = 1
  # the levels fuzzed, each an equal share of the workers' time (Campaign.pick_level)
  levels: tuple[str, ...] = LEVEL_NAMES
  seed: int = 0
  batch: int = 16
  step_timeout: float = 120.0     # seconds a worker may go without announcing a step before it counts as hung
  reduce: bool = True
  reduce_checks: int = 300        # candidate checks per finding
  reduce_grace: float = 120.0     # seconds past the deadline to finish reductions in flight
  spec: int = 2                   # SPEC of the workers (2: every UOp checked at construction, round trips)
  bounds: bool = False            # the z3 proof that every access is in bounds (IGNORE_OOB=0), kernels and programs
  setup: str | None = None        # module:function called in every worker first (planted bugs)
  max_cases: int | None = None    # stop after this many cases (tests)
  max_jobs_per_worker: int = 100
  # a worker's resident memory cap (MB): one past it is killed and its case is a resource finding; None: the physical
  # memory shared by the workers and the parent (default_memory_mb)
  memory_mb: int | None = None
  progress: bool = True
  mutate: float = 0.5             # share of inputs mutated from the corpus (when it has entries)
  # kernel and symbolic levels: a share of the fresh inputs (a bandit between 20% and 80% over which kind reaches new
  # rules) is built by a generator directed at a rule tried but never matched yet (fuzz/campaign/scheduler.py Director)
  directed: bool = True
  # kernel level: a directory of seed kernels (fuzz/seeds.py; `python -m fuzz seeds`): each runs once as it is (half
  # the inputs until all have), then its mutations (fuzz/gen/seeded.py) join the corpus as mutations of the bytes do
  seeds: str | None = None
  env: dict[str, str] = field(default_factory=dict)

@dataclass
class CampaignSummary:
  cases: int = 0
  seconds: float = 0.0
  findings: dict[str, Finding] = field(default_factory=dict)
  rules_matched: int = 0
  rules_tried: int = 0
  corpus: int = 0
  crashes: int = 0
  hangs: int = 0
  restarts: int = 0
  directed: int = 0               # cases built by a generator directed at a rule (fresh directed ones and mutations)
  seeded: int = 0                 # kernel cases grown from a seed kernel (the seed itself and its mutations)
  losses: int = 0                 # workers killed from outside (SIGKILL) whose case then ran alone without it
  backends: dict[str, str] = field(default_factory=dict)
  missing: dict[str, str] = field(default_factory=dict)
  levels: dict[str, tuple[int, float]] = field(default_factory=dict)  # level -> (cases, worker-seconds)
  out: str = ""                   # the campaign directory (its findings/ and the report)
  def __str__(self) -> str:
    rate = self.cases / self.seconds if self.seconds else 0.0
    lines = [f"{self.cases} cases in {self.seconds:.0f}s ({rate:.1f}/s), rewrite rules matched {self.rules_matched} "
             f"of {self.rules_tried} tried, corpus {self.corpus}, {len(self.findings)} findings, {self.crashes} "
             f"crashes, {self.hangs} hangs, {self.restarts} worker restarts, {self.losses} worker losses (killed from "
             f"outside, not again when the case was rerun), {self.directed} directed cases"
             + (f", {self.seeded} seeded cases" if self.seeded else "")]
    if len(self.levels) > 1:
      lines.append("  levels: " + ", ".join(f"{n} {c} cases in {t:.0f} worker-s" for n, (c, t) in self.levels.items()))
    lines += [f"  not run: {n}: {why}" for n, why in self.missing.items()]
    fdir = os.path.join(self.out, "findings")
    for f in sorted(self.findings.values(), key=lambda f: -f.count):
      lines.append(f"  [{f.signature.id}] x{f.count} {f.signature} (size {f.original_size} -> {f.size}): "
                   f"{os.path.join(fdir, f.signature.id + '.json')}")
    if self.out: lines.append(f"report: python -m fuzz report {self.out}")
    return "\n".join(lines)

def is_seed(tag: str | None) -> bool: return tag is not None and tag.startswith(SEED_TAG)

# ---- worker processes ----

def default_memory_mb(jobs: int) -> int:
  """A worker's memory cap: the physical memory shared by the workers and the parent."""
  return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / (jobs + 1) / 2**20)

def resident_mb(pid: int) -> tuple[float, float]:
  """(resident memory now, the most it has been since the process's exec) of a live process in MB (VmRSS, VmHWM of
  /proc/PID/status), zeros when they cannot be read."""
  vals: dict[str, float] = {}
  try:
    with open(f"/proc/{pid}/status") as f:
      for line in f:
        if line.startswith(("VmRSS:", "VmHWM:")): vals[line[:5]] = int(line.split()[1]) / 1024
  except (OSError, ValueError, IndexError): pass
  return vals.get("VmRSS", 0.0), vals.get("VmHWM", 0.0)

def worker_env(cfg: CampaignConfig) -> dict[str, str]:
  env = dict(os.environ)
  # NOTE: SCHEDULE_CACHE=0: a case scheduled from the kernel graph cache would fire none of the scheduler's rules, so
  # its coverage (and the corpus it grows) would depend on which graphs came before it
  env.update({"SPEC": str(cfg.spec), "IGNORE_OOB": "0" if cfg.bounds else "1", "TRACK_MATCH_STATS": "1",
              "SCHEDULE_CACHE": "0",
              "PYTHONPATH": REPO + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")})
  env.update(cfg.env)
  return env

class Worker:
  """One worker process and the job it is running."""
  def __init__(self, idx: int, config: dict[str, Any], env: dict[str, str], log: str):
    self.idx, self.buf = idx, b""
    self.logf = open(log, "ab")
    self.proc = subprocess.Popen([sys.executable, "-m", "fuzz.campaign.worker", json.dumps(config)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.logf, env=env, cwd=REPO,
                                 start_new_session=True)
    self.job: dict[str, Any] | None = None
    self.ready, self.last_beat = False, time.monotonic()
    self.note: tuple[int, str, str] | None = None
    self.info: dict[str, Any] = {}
    self.pending: dict[str, Any] | None = None  # a job to send once this worker is ready (its predecessor's)
    self.peak_mb = 0.0  # the most resident memory seen since the exec (VmHWM, polled while busy)
  @property
  def fd(self) -> int:
    assert self.proc.stdout is not None
    return self.proc.stdout.fileno()
  def send(self, job: dict[str, Any]) -> None:
    assert self.proc.stdin is not None
    self.job, self.note, self.last_beat = job, None, time.monotonic()
    # NOTE: a worker retiring (its bye not read yet) has closed its end: the job stays its own, and the pool hands it
    # to the worker that replaces it
    try:
      self.proc.stdin.write((json.dumps({k: v for k, v in job.items() if not k.startswith("_")}) + "\n").encode())
      self.proc.stdin.flush()
    except BrokenPipeError: pass
  def read(self) -> tuple[list[dict[str, Any]], bool]:
    """(messages, still alive)."""
    try: chunk = os.read(self.fd, 1 << 20)
    except OSError: chunk = b""
    self.buf += chunk
    msgs = []
    while b"\n" in self.buf:
      line, self.buf = self.buf.split(b"\n", 1)
      try: msgs.append(json.loads(line))
      except json.JSONDecodeError: continue
    self.last_beat = time.monotonic()
    return msgs, bool(chunk)
  def kill(self) -> None:
    try: os.killpg(self.proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError): pass
    self.proc.wait()
    self.close()
  def close(self) -> None:
    for f in (self.proc.stdin, self.proc.stdout):
      try:
        if f is not None: f.close()
      except OSError: pass
    self.logf.close()
  def reap(self) -> int:
    """Wait for the process to end; its exit status (negative: the signal)."""
    # NOTE: not wait4's ru_maxrss for the peak: Linux counts in it the parent's resident memory at the fork (vfork) and
    # exec that started the worker, so a worker started by a big process (a long pytest run) would look past the cap
    return self.proc.wait()
  def death(self) -> str:
    rc = self.reap()
    if rc < 0:
      try: return f"crash:{signal.Signals(-rc).name}"
      except ValueError: return f"crash:signal {-rc}"
    return f"crash:exit {rc}"

class WorkerPool:
  """Worker processes checking cases of some levels (each job names its level) on some backends; restarts any that
  die. `step_timeout` seconds without a message from a busy worker kill it as hung; a busy worker resident past
  `memory_mb` is killed too."""
  def __init__(self, n: int, levels: Sequence[str], backends: Sequence[str], env: dict[str, str], logdir: str,
               setup: str | None = None, max_jobs: int = 100, step_timeout: float = 120.0, bounds: bool = False,
               memory_mb: int | None = None, seeds: str | None = None):
    self.config = {"levels": list(levels), "backends": list(backends), "setup": setup, "max_jobs": max_jobs,
                   "validate_bounds": bounds, "seeds": seeds}
    self.env, self.logdir, self.step_timeout = env, logdir, step_timeout
    self.memory_mb = memory_mb if memory_mb is not None else default_memory_mb(n)
    os.makedirs(logdir, exist_ok=True)
    self.sel = selectors.DefaultSelector()
    self.workers: list[Worker] = []
    self.restarts, self.next_job = 0, 0
    self.describe: dict[str, str] = {}
    self.missing: dict[str, str] = {}
    for i in range(n): self.workers.append(self.start(i))

  def start(self, i: int) -> Worker:
    w = Worker(i, self.config, self.env, os.path.join(self.logdir, f"worker{i}.log"))
    self.sel.register(w.fd, selectors.EVENT_READ, w)
    return w

  def restart(self, w: Worker, kill: bool) -> Worker:
    self.sel.unregister(w.fd)
    if kill: w.kill()
    else:
      w.proc.wait()
      w.close()
    self.restarts += 1
    nw = self.start(w.idx)
    self.workers[w.idx] = nw
    return nw

  def idle(self) -> list[Worker]: return [w for w in self.workers if w.ready and w.job is None]

  def submit(self, w: Worker, job: dict[str, Any]) -> None:
    job["job"], job["_t0"] = self.next_job, time.monotonic()
    self.next_job += 1
    w.send(job)

  def poll(self, timeout: float) -> list[tuple[Worker, str, Any]]:
    """Events: (worker, "result", msg), (worker, "died", (job, note, why, peak MB)), (worker, "hung", (job, note)),
    (worker, "memory", (job, note, peak MB)): killed past the memory cap."""
    events: list[tuple[Worker, str, Any]] = []
    for key, _ in self.sel.select(timeout):
      w: Worker = key.data
      msgs, alive = w.read()
      for m in msgs:
        if m["t"] == "ready":
          w.ready = True
          self.describe.update(m["backends"])
          self.missing.update(m["missing"])
          if (carried := w.pending) is not None:
            w.pending = None
            w.send(carried)
        elif m["t"] == "note": w.note = (m["item"], m["backend"], m["stage"])
        elif m["t"] == "result":
          job, w.job = w.job, None
          events.append((w, "result", (job, m["results"])))
        elif m["t"] == "bye":
          # NOTE: a job sent after the worker's last result, before its bye was read, was never run: the restarted
          # worker runs it (else its cases, or a reduction waiting on it, were lost)
          lost = w.job
          self.restart(w, kill=False).pending = lost
          alive = True
      if not alive and self.workers[w.idx] is w:
        why = w.death()
        job, note = w.job, w.note
        self.restart(w, kill=False)
        events.append((w, "died", (job, note, why, w.peak_mb)))
    t = time.monotonic()
    for w in list(self.workers):
      if w.job is None: continue
      mb, peak = resident_mb(w.proc.pid)
      if mb > self.memory_mb:
        job, note = w.job, w.note
        self.restart(w, kill=True)
        events.append((w, "memory", (job, note, mb)))
        continue
      w.peak_mb = max(w.peak_mb, peak)
      if t - w.last_beat > self.step_timeout:
        job, note = w.job, w.note
        self.restart(w, kill=True)
        events.append((w, "hung", (job, note)))
    return events

  def wait_ready(self, timeout: float = 300.0) -> None:
    end = time.monotonic() + timeout
    while not all(w.ready for w in self.workers):
      if time.monotonic() > end: raise RuntimeError(f"fuzz workers did not start in {timeout:.0f}s; see {self.logdir}")
      for w, kind, what in self.poll(0.5):
        if kind == "died":
          raise RuntimeError(f"a fuzz worker died while starting ({what[2]}); see {self.logdir}/worker{w.idx}.log")

  def close(self) -> None:
    for w in self.workers:
      try: self.sel.unregister(w.fd)
      except (KeyError, ValueError): pass
      w.kill()

# ---- signatures ----

def signatures_of(level: str, failures: list[Failure], checked: Sequence[str]) -> list[tuple[Signature, list[Failure]]]:
  """Failures of one case as signatures: the same failure on every backend checked (more than one) is one, "all"."""
  groups: dict[tuple[str, str, str], list[Failure]] = {}
  for f in failures: groups.setdefault((f.stage, f.kind, f.site), []).append(f)
  out = []
  for (stage, kind, site), fs in groups.items():
    bks = sorted({f.backend for f in fs})
    if len(checked) > 1 and set(bks) == set(checked): out.append((Signature(level, stage, kind, site, "all"), fs))
    else: out.extend((Signature(level, stage, kind, site, f.backend), [f]) for f in fs)
  return out

# ---- the campaign ----

class LevelRun:
  """What a campaign keeps per level: its input scheduler and corpus directory, its director (kernel, symbolic), the
  rules its cases tried and hit (by key), and the worker-seconds its jobs took (its time slice, Campaign.pick_level)."""
  def __init__(self, name: str, cfg: CampaignConfig, corpus_dir: str, rng: random.Random):
    from fuzz.campaign.levels import LEVELS
    self.name, self.corpus_dir = name, corpus_dir
    self.level = LEVELS[name]()
    os.makedirs(corpus_dir, exist_ok=True)
    # NOTE: the workers report every rule each case made match and how often (its features, as the guided targets
    # count them); the fresh share is fixed by cfg.mutate
    share = 1.0 - cfg.mutate
    self.sched = Scheduler(FRESH_BYTES.get(name, 1024), recorder_marks(self.level.from_chooser), rng,
                           fresh_min=share, fresh_max=share)
    for f in sorted(os.listdir(corpus_dir)):
      with open(os.path.join(corpus_dir, f), "rb") as fh: self.sched.add(fh.read())
    # directed inputs: the rules tried and matched by their hit key
    self.tried_keys: set[str] = set()
    self.hit_keys: set[str] = set()
    # a case tagged with a rule (a directed input) is built with that rule's level, in the workers and here alike
    # kernel seeds (fuzz/seeds.py): each is run once as it is (tag SEED_TAG + name, from `pending`: half the inputs
    # until every seed ran), and joins the corpus with its features as any input does; its mutations are built from it
    # (SeededKernelLevel)
    seeds = read_seeds(cfg.seeds) if cfg.seeds and name == "kernel" else {}
    self.pending: list[str] = [SEED_TAG + n for n in seeds]
    self.directed = DirectedLevels(self.level, cfg.bounds, seeds)
    self.director: Director | None = None
    if name in ("kernel", "symbolic") and cfg.directed:
      self.director = Director(self.directed.ops(), random.Random(rng.random()))
    self.seconds, self.cases, self.jobs = 0.0, 0, 0

class Campaign:
  def __init__(self, cfg: CampaignConfig):
    self.cfg, self.rng = cfg, random.Random(cfg.seed)
    self.dirs = {k: os.path.join(cfg.out, k) for k in ("corpus", "findings", "logs")}
    for d in self.dirs.values(): os.makedirs(d, exist_ok=True)
    self.runs = {lv: LevelRun(lv, cfg, os.path.join(self.dirs["corpus"], lv), self.rng) for lv in cfg.levels}
    self.findings = {k: f for k, f in load_findings(self.dirs["findings"]).items() if f.signature.level in self.runs}
    self.summary = CampaignSummary(findings=self.findings, out=cfg.out)
    # the rules matched and tried, as 'pass::rule', over every level
    self.matched: set[str] = set()
    self.tried: set[str] = set()
    self.reductions: dict[str, Reduction] = {}
    self.reruns: list[dict[str, Any]] = []  # jobs whose worker was killed from outside, to run again (worker_died)
    self.timeline: list[dict[str, Any]] = []
    self.per_backend: dict[str, int] = {}
    self.env = worker_env(cfg)
    self.started = time.time()  # when fuzzing began (wall clock, as findings' first_seen)

  # ---- inputs ----
  def pick_level(self) -> LevelRun:
    """The level whose jobs have taken the least worker time so far (finished, and in flight until now): each level
    gets an equal slice of the campaign's time, whatever its cases cost."""
    now = time.monotonic()
    spent = {n: r.seconds for n, r in self.runs.items()}
    for w in self.pool.workers:
      if w.job is not None and w.job.get("level") in spent: spent[w.job["level"]] += now - w.job.get("_t0", now)
    return self.runs[min(spent, key=lambda n: (spent[n], n))]

  def next_input(self, run: LevelRun) -> tuple[bytes, str | None, bool]:
    """(bytes, the rule its generator is directed at or None, whether this input is a fresh directed one): a
    mutation is built as its seed was; a fresh input, one time in director.share(), is directed."""
    # NOTE: seeds not run yet take every input until the corpus has one, then half: a short campaign on many seeds
    # mutates those already run too
    if run.pending and (not run.sched.corpus or self.rng.random() < 0.5): return b"", run.pending.pop(0), False
    data = run.sched.next()
    if (parent := run.sched.origin(data)) is not None and is_seed(parent.tag): return data, parent.tag, False
    if run.director is None: return data, None, False
    if (parent := run.sched.origin(data)) is not None: return data, parent.tag, False
    if self.rng.random() < run.director.share() and (aim := run.director.pick(run.tried_keys, run.hit_keys)):
      return data, aim[0], True
    return data, None, False

  def add_corpus(self, run: LevelRun, data: bytes) -> None:
    import hashlib
    path = os.path.join(run.corpus_dir, hashlib.sha1(data).hexdigest()[:16] + ".bin")
    if not os.path.exists(path): atomic_write(path, data)

  # ---- findings ----
  def record(self, sig: Signature, fs: list[Failure], state: dict[str, Any] | None, size: int, data: bytes) -> None:
    t = now()
    if (f := self.findings.get(sig.id)) is not None:
      f.count, f.last_seen = f.count + 1, t
      if sig.id not in self.reductions: write_finding(self.dirs["findings"], f)
      return
    if state is None or "error" in state: state = {"error": "the case could not be recorded", "input": data.hex()}
    # NOTE: a failure before any backend names its checker (generator, pyrender, reference, z3, schedule): its repro
    # runs on no backend
    bks = sorted({x.backend for x in fs} & set(BACKENDS)) if sig.backend != "all" else list(self.pool.describe)
    f = Finding(sig, state, state, fs[0].message, bks, size, size, 1, t, t, data.hex(), self.cfg.seed,
                env={k: self.env[k] for k in replay_flags() if k in self.env},
                setup=self.cfg.setup)
    self.findings[sig.id] = f
    write_finding(self.dirs["findings"], f)
    if self.cfg.reduce and "error" not in state:
      level = self.runs[sig.level].level
      try: case = level.from_state(state)
      except Exception: return
      self.reductions[sig.id] = Reduction(level, case, level.valid, self.cfg.reduce_checks)

  def finish_reduction(self, sid: str) -> None:
    r = self.reductions.pop(sid)
    f = self.findings[sid]
    level = self.runs[f.signature.level].level
    f.state, f.size, f.reduced = level.state(r.current), level.size(r.current), True
    if r.message: f.message = r.message
    write_finding(self.dirs["findings"], f)

  def worker_died(self, job: dict[str, Any], note: tuple[int, str, str] | None, why: str, peak_mb: float) -> None:
    """A worker that died on `job`. A SIGKILL came from outside (the parent's kills are hangs and memory): near the
    memory cap it is a resource finding; otherwise the case runs again alone, and only a kill that recurs there is a
    resource finding (a real blow-up, the kernel's OOM killer); one that does not recur is a worker loss, counted."""
    if why != "crash:SIGKILL": return self.crash_failure(job, note, why)
    item, backend, stage = note if note is not None else (0, "worker", "start")
    cap = self.pool.memory_mb
    if peak_mb >= 0.9 * cap:
      return self.crash_failure(job, note, "resource:memory", f"the worker was killed (SIGKILL) in {stage} on "
                                f"{backend} at {peak_mb:.0f} MB resident, near the memory cap of {cap} MB: a resource "
                                "blow-up")
    if job.get("_rerun"):
      return self.crash_failure(job, note, "resource:SIGKILL", f"the worker was killed (SIGKILL) in {stage} on "
                                f"{backend} again when the case was run alone (peak {peak_mb:.0f} MB): a resource "
                                "blow-up")
    self.reruns.append(self.rerun_job(job, item))

  def memory_failure(self, job: dict[str, Any], note: tuple[int, str, str] | None, mb: float) -> None:
    _, backend, stage = note if note is not None else (0, "worker", "start")
    self.crash_failure(job, note, "resource:memory", f"the worker passed the memory cap of {self.pool.memory_mb} MB "
                       f"({mb:.0f} MB resident) in {stage} on {backend}, and was killed: a resource blow-up")

  def rerun_job(self, job: dict[str, Any], item: int) -> dict[str, Any]:
    """`job` again, marked as a rerun: a reduction's whole batch, or the one fuzz case that was running."""
    if job.get("_reduce") is not None:
      return {**{k: v for k, v in job.items() if k != "job"}, "_rerun": True}
    data = job["_inputs"][item] if item < len(job["_inputs"]) else b""
    out = {"op": "check", "level": job["level"], "inputs": [data.hex()], "_inputs": [data], "_rerun": True,
           "_directed": [job["_directed"][item] if item < len(job["_directed"]) else False]}
    if job.get("tags"): out["tags"] = [job["tags"][item] if item < len(job["tags"]) else None]
    return out

  def crash_failure(self, job: dict[str, Any], note: tuple[int, str, str] | None, kind: str,
                    message: str | None = None) -> None:
    item, backend, stage = note if note is not None else (0, "worker", "start")
    run = self.runs[job["level"]]
    if job.get("_reduce") is not None:
      self.answer_reduction(job, [], crashed=(item, Signature(run.name, stage, kind, "", backend)))
      return
    run.seconds += time.monotonic() - job.get("_t0", time.monotonic())
    data = job["_inputs"][item] if item < len(job["_inputs"]) else b""
    tag = job["tags"][item] if item < len(job.get("tags", ())) else None
    try:
      case = run.directed.get(tag).generate(data)
      state, size = run.level.state(case), run.level.size(case)
    except Exception: state, size = None, 0
    self.summary.crashes += kind.startswith("crash")
    self.summary.hangs += kind == "hang"
    f = Failure(stage, kind, "", backend, message or f"the worker {'hung' if kind == 'hang' else 'died'} ({kind}) in "
                f"{stage} on {backend}")
    self.record(Signature(run.name, stage, kind, "", backend), [f], state, size, data if tag is None else b"")

  # ---- reductions ----
  def reduce_job(self) -> dict[str, Any] | None:
    for sid, r in list(self.reductions.items()):
      if r.busy: continue
      batch = r.next_batch(max(1, self.cfg.batch // 2))
      if not batch:
        self.finish_reduction(sid)
        continue
      r.busy = True
      sig = self.findings[sid].signature
      b = sig.backend
      # NOTE: a failure of every backend needs every backend again; one of a device, that device; the others none
      names = None if b == "all" else [b] if b in self.pool.describe else []
      return {"op": "check_state", "level": sig.level, "states": [r.level.state(c) for c in batch],
              "backends": names, "_reduce": sid, "_batch": batch}
    return None

  def checked(self, job: dict[str, Any]) -> list[str]:
    names = job.get("backends")
    return list(self.pool.describe) if names is None else list(names)

  def answer_reduction(self, job: dict[str, Any], results: list[dict[str, Any]],
                       crashed: tuple[int, Signature] | None = None) -> None:
    sid = job["_reduce"]
    if (r := self.reductions.get(sid)) is None: return
    r.busy = False
    want = self.findings[sid].signature
    ok, msgs = [], []
    for i, res in enumerate(results):
      fs = [Failure(**d) for d in res["failures"]]
      hit = [g for s, g in signatures_of(want.level, fs, self.checked(job)) if s == want]
      ok.append(bool(hit))
      msgs.append(hit[0][0].message if hit else "")
    if crashed is not None:
      i, sig = crashed
      ok, msgs = [False] * len(job["_batch"]), [""] * len(job["_batch"])
      if i < len(ok): ok[i], msgs[i] = sig == want, f"the worker died ({sig.kind}) in {sig.stage} on {sig.backend}"
    if (k := r.answer(job["_batch"], ok)) is not None: r.message = msgs[k]

  # ---- the loop ----
  def handle_result(self, job: dict[str, Any], results: list[dict[str, Any]]) -> None:
    # NOTE: a rerun that came back: the kill it follows did not recur, a worker loss
    self.summary.losses += bool(job.get("_rerun"))
    if job.get("_reduce") is not None:
      self.answer_reduction(job, results)
      return
    run = self.runs[job["level"]]
    run.seconds += time.monotonic() - job.get("_t0", time.monotonic())
    checked = self.checked(job)
    tags = job.get("tags") or [None] * len(job["_inputs"])
    for data, tag, fresh, res in zip(job["_inputs"], tags, job["_directed"], results):
      self.summary.cases += 1
      run.cases += 1
      self.summary.directed += tag is not None and not is_seed(tag)
      self.summary.seeded += is_seed(tag)
      self.matched |= set(res["rules"])
      self.tried |= set(res["attempted"])
      keys = set(res["hits"])
      if run.director is not None and run.sched.origin(data) is None and not is_seed(tag):
        run.director.note(fresh, bool(keys - run.hit_keys))
      run.hit_keys |= keys
      run.tried_keys |= {rule_key(r.split("::", 1)[-1]) for r in res["attempted"]}
      # NOTE: a seeded input's choice boundaries are its seed level's (the plain generator's would be other choices)
      marks = (lambda t=tag, d=data: recorder_marks(run.directed.get(t).from_chooser)(d)) if is_seed(tag) else None
      if run.sched.feedback(data, res["hits"], res["used"], marks, tag=tag) and tag is None:
        self.add_corpus(run, data[:max(res["used"], 1)])
      fs = [Failure(**d) for d in res["failures"]]
      # NOTE: a directed case's bytes build another case under the plain generator: its state is the reproducer
      kept = data[:max(res["used"], 1)] if tag is None else b""
      for sig, group in signatures_of(run.name, fs, checked):
        self.per_backend[sig.backend] = self.per_backend.get(sig.backend, 0) + 1
        self.record(sig, group, res["state"], res["size"], kept)

  def fuzz_job(self) -> dict[str, Any]:
    run = self.pick_level()
    n = self.batch_size(run)
    if (left := self.cases_left()) is not None: n = max(1, min(n, left))
    picks = [self.next_input(run) for _ in range(n)]
    job = {"op": "check", "level": run.name, "inputs": [d.hex() for d, _, _ in picks],
           "_inputs": [d for d, _, _ in picks], "_directed": [f for _, _, f in picks]}
    # NOTE: a tensor program is checked on one backend, each in turn: its front end and scheduler are the same on
    # every backend (the kernel level checks every backend's codegen on each case), and a case costs ~1/n as much
    if run.name == "tensor" and len(self.pool.describe) > 1:
      names = sorted(self.pool.describe)
      job["backends"] = [names[run.jobs % len(names)]]
    run.jobs += 1
    if any(t is not None for _, t, _ in picks): job["tags"] = [t for _, t, _ in picks]
    return job

  def cases_left(self) -> int | None:
    """Cases the --max-cases budget leaves after those done and in flight (None: no budget); a budget is exact."""
    if self.cfg.max_cases is None: return None
    flying = sum(len(w.job.get("_inputs", ())) for w in self.pool.workers
                 if w.job is not None and w.job.get("op") == "check")
    return self.cfg.max_cases - self.summary.cases - flying

  def batch_size(self, run: LevelRun) -> int:
    """Cases in a job of `run`'s level: --batch, fewer where a case is slow, so that a job takes about JOB_SECONDS
    (the levels' time slices stay even, and the campaign stops near its deadline); 2 until a job of the level ended."""
    if not run.cases: return min(self.cfg.batch, 2)
    return max(1, min(self.cfg.batch, round(JOB_SECONDS * run.cases / max(run.seconds, 1e-3))))

  def progress(self, start: float, final: bool = False) -> None:
    el = time.monotonic() - start
    s = self.summary
    s.seconds, s.rules_matched, s.rules_tried = el, len(self.matched), len(self.tried)
    s.corpus = sum(len(r.sched.corpus) for r in self.runs.values())
    s.levels = {n: (r.cases, round(r.seconds, 1)) for n, r in self.runs.items()}
    per = ", ".join(f"{b} {n}" for b, n in sorted(self.per_backend.items()))
    lv = ", ".join(f"{n} {c}" for n, (c, _) in s.levels.items()) if len(s.levels) > 1 else ""
    line = (f"[{int(el) // 60:02d}:{int(el) % 60:02d}] {s.cases} cases ({s.cases / max(el, 1e-9):.1f}/s"
            f"{f'; {lv}' if lv else ''}), rewrite rules matched {s.rules_matched} of {s.rules_tried} tried, corpus "
            f"{s.corpus}, findings {len(self.findings)}{f' ({per})' if per else ''}, reducing {len(self.reductions)}, "
            f"worker restarts {self.pool.restarts}")
    self.timeline.append({"t": round(el, 2), "cases": s.cases, "rules": s.rules_matched, "tried": s.rules_tried,
                          "corpus": s.corpus, "findings": len(self.findings), "crashes": s.crashes,
                          "hangs": s.hangs, "restarts": self.pool.restarts,
                          "levels": {n: c for n, (c, _) in s.levels.items()}})
    if self.cfg.progress: print(line, file=sys.stderr, flush=True)
    atomic_write(os.path.join(self.cfg.out, "stats.json"), json.dumps(self.timeline) + "\n")
    self.write_meta(final)

  def write_meta(self, final: bool) -> None:
    s = self.summary
    meta = {"config": {k: v for k, v in asdict(self.cfg).items()}, "started": self.started,
            "backends": self.pool.describe, "missing": self.pool.missing, "final": final, "cases": s.cases,
            "seconds": round(s.seconds, 2),
            "rules_matched": sorted(self.matched), "rules_tried": len(self.tried), "corpus": s.corpus,
            "crashes": s.crashes, "hangs": s.hangs, "restarts": self.pool.restarts, "directed": s.directed,
            "losses": s.losses, "memory_mb": self.pool.memory_mb, "findings_by_backend": self.per_backend,
            "levels": {n: {"cases": c, "seconds": t} for n, (c, t) in s.levels.items()}}
    atomic_write(os.path.join(self.cfg.out, "campaign.json"), json.dumps(meta, indent=1) + "\n")

  def run(self) -> CampaignSummary:
    cfg = self.cfg
    self.pool = WorkerPool(cfg.jobs, cfg.levels, cfg.backends, self.env, self.dirs["logs"], cfg.setup,
                           cfg.max_jobs_per_worker, cfg.step_timeout, cfg.bounds, cfg.memory_mb,
                           cfg.seeds if "kernel" in cfg.levels else None)
    try:
      self.pool.wait_ready()
      s = self.summary
      s.backends, s.missing = dict(self.pool.describe), dict(self.pool.missing)
      if cfg.progress:
        for n, d in s.backends.items(): print(f"backend {d}", file=sys.stderr)
        for n, why in s.missing.items(): print(f"backend {n}: NOT RUN: {why}", file=sys.stderr)
      start, self.started = time.monotonic(), time.time()
      deadline, last = start + cfg.minutes * 60, 0.0
      while True:
        t = time.monotonic()
        fuzzing = t < deadline and ((left := self.cases_left()) is None or left > 0)
        busy = any(w.job is not None for w in self.pool.workers)
        if not fuzzing and not busy and not self.reruns and (not self.reductions or t > deadline + cfg.reduce_grace):
          break
        for w in self.pool.idle():
          job = self.reruns.pop(0) if self.reruns else None
          if job is None and self.reductions and t < deadline + cfg.reduce_grace: job = self.reduce_job()
          if job is None and fuzzing: job = self.fuzz_job()
          if job is None: break
          self.pool.submit(w, job)
        for w, kind, what in self.pool.poll(0.2):
          if kind == "result": self.handle_result(*what)
          elif kind == "died" and what[0] is not None: self.worker_died(*what)
          elif kind == "hung" and what[0] is not None: self.crash_failure(what[0], what[1], "hang")
          elif kind == "memory" and what[0] is not None: self.memory_failure(*what)
        if time.monotonic() - last > 5.0:
          last = time.monotonic()
          self.progress(start)
      for sid in list(self.reductions): self.finish_reduction(sid)
      s.restarts = self.pool.restarts
      self.progress(start, final=True)
    finally: self.pool.close()
    return self.summary

def run_campaign(cfg: CampaignConfig) -> CampaignSummary:
  """Run one campaign (see the module docstring); returns its summary. DIR keeps the corpus and findings."""
  return Campaign(cfg).run()

# ---- repro: one finding checked again ----

@dataclass
class ReproResult:
  reproduced: bool
  signature: Signature
  got: list[Signature]
  messages: list[str]
  def __str__(self) -> str:
    head = f"{'REPRODUCED' if self.reproduced else 'not reproduced'}: {self.signature}"
    return "\n".join([head, *[f"  got {g}" for g in self.got], *[f"  {m[:2000]}" for m in self.messages]])

def repro(path: str, backends: Sequence[str] | None = None, setup: str | None = None,
          timeout: float = 300.0, memory_mb: int | None = None) -> ReproResult:
  """Check a reproducer's case again, in a worker process (a crash or hang is an answer); reproduced when the same
  signature comes back. The file's flags (SPEC, IGNORE_OOB and the codegen flags, checked by read_reproducer) are
  applied; its `setup` is not run unless passed. ReproducerError when the file holds no readable case (read here
  first, without running anything). The case runs alone: a SIGKILL of its worker is `resource:SIGKILL`, passing
  `memory_mb` (default: default_memory_mb(1)) is `resource:memory`."""
  f = read_reproducer(path)
  read_case(path, f)
  sig = f.signature
  # NOTE: files written before the campaign kept only real backends may name a checker (z3, generator, ...)
  names = list(backends) if backends else [b for b in f.backends if b in BACKENDS]
  cfg = CampaignConfig(out="", levels=(sig.level,), backends=tuple(names), setup=setup, progress=False,
                       env={k: v for k, v in f.env.items() if k not in ("SPEC", "IGNORE_OOB")})
  cfg.spec = int(f.env.get("SPEC", "2"))
  cfg.bounds = f.env.get("IGNORE_OOB", "1") == "0"
  import tempfile
  with tempfile.TemporaryDirectory(prefix="fuzz-repro-") as logs:
    pool = WorkerPool(1, [sig.level], names, worker_env(cfg), logs, setup, 0, timeout, cfg.bounds, memory_mb)
    try:
      pool.wait_ready()
      pool.submit(pool.workers[0], {"op": "check_state", "level": sig.level, "states": [f.state], "backends": names})
      got: list[Signature] = []
      msgs: list[str] = []
      end = time.monotonic() + timeout + 60
      while time.monotonic() < end:
        evs = pool.poll(0.5)
        if not evs: continue
        _, kind, what = evs[0]
        if kind == "result":
          fs = [Failure(**d) for d in what[1][0]["failures"]]
          got = [s for s, _ in signatures_of(sig.level, fs, names)]
          msgs = [x.message for x in fs]
        else:
          item, backend, stage = what[1] if what[1] is not None else (0, "worker", "start")
          kind_s = {"hung": "hang", "memory": "resource:memory"}.get(kind) or \
            ("resource:SIGKILL" if what[2] == "crash:SIGKILL" else what[2])
          got, msgs = [Signature(sig.level, stage, kind_s, "", backend)], [f"the worker {kind} in {stage} on {backend}"]
        break
    finally: pool.close()
  return ReproResult(sig in got, sig, got, msgs)

__all__ = ["CampaignConfig", "CampaignSummary", "run_campaign", "Campaign", "WorkerPool", "repro", "ReproResult",
           "LEVEL_NAMES", "signatures_of", "default_memory_mb"]
