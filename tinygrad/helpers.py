"""Env flags as context variables, and small pure helpers. Every flag the project reads is declared here, once."""
from __future__ import annotations
import os, functools, contextlib, importlib.util, re, sys, hashlib, sqlite3, pickle, tempfile, time
from typing import Any, Callable, Iterable, TypeVar, Sequence

T = TypeVar("T")

# ---- env flags ----

class FlagError(ValueError):
  """An env flag set to a value it does not allow: names the flag, the value and what is allowed."""

class Allowed:
  """What a flag accepts: `read` turns its env text into the value (None: not allowed), `text` says what is allowed
  (errors and docs/env_vars.md print it), `bad_samples` are texts it refuses (the flag table test tries them)."""
  text = ""
  def read(self, raw: str) -> Any: raise NotImplementedError
  def bad_samples(self) -> tuple[str, ...]: return ()

class Ints(Allowed):
  """An integer from lo to hi (decimal, optionally signed)."""
  def __init__(self, lo: int, hi: int):
    self.lo, self.hi = lo, hi
    self.text = f"an integer from {lo} to {hi}"
  def read(self, raw: str) -> int | None:
    if re.fullmatch(r"\s*[-+]?[0-9]{1,19}\s*", raw) is None: return None
    return v if self.lo <= (v := int(raw)) <= self.hi else None
  def bad_samples(self) -> tuple[str, ...]: return ("abc", "", "1.5", str(self.lo - 1), str(self.hi + 1))

class Matching(Allowed):
  """Text that matches a regular expression as a whole (`what` says it in words)."""
  def __init__(self, pattern: str, what: str, bad: tuple[str, ...]):
    self.pattern, self.text, self.bad = re.compile(pattern), what, bad
  def read(self, raw: str) -> str | None: return raw if self.pattern.fullmatch(raw) else None
  def bad_samples(self) -> tuple[str, ...]: return self.bad

class AnyText(Allowed):
  """Free text (a path, a command line, an id) on one line: control characters are refused."""
  def __init__(self, what: str): self.text = f"{what} (any text without control characters)"
  def read(self, raw: str) -> str | None: return None if re.search(r"[\x00-\x1f\x7f]", raw) else raw
  def bad_samples(self) -> tuple[str, ...]: return ("a\nb", "\x1b[31m")

class ContextVar:
  """A flag read once from the environment, overridable in-process with `Context`. `allowed` says which values it takes:
  a value outside it raises FlagError when the flag is declared (at import). `codegen=True` marks a flag that changes
  generated code (which kernels, opts or source text come out): see `codegen_flags`. `schedule=True` marks a flag that
  changes how a tensor graph is split into kernels: see `schedule_flags`."""
  _registry: dict[str, ContextVar] = {}
  # flag name -> callbacks run after `Context` changes that flag (the harness re-registers its checkpoints for SPEC=...)
  watchers: dict[str, list[Callable[[], None]]] = {}
  __slots__ = ("key", "value", "default", "doc", "codegen", "schedule", "allowed")
  def __init__(self, key: str, default: Any, doc: str = "", *, allowed: Allowed, codegen: bool = False,
               schedule: bool = False):
    if key in ContextVar._registry: raise RuntimeError(f"flag {key} declared twice")
    self.key, self.default, self.doc, self.codegen, self.allowed = key, default, doc, codegen, allowed
    self.schedule = schedule
    raw = os.environ.get(key)
    self.value = default if raw is None else self.parse(raw)
    ContextVar._registry[key] = self
  @staticmethod
  def declared() -> dict[str, ContextVar]:
    """Every flag declared so far, by name (a copy)."""
    return dict(ContextVar._registry)
  def parse(self, raw: str) -> Any:
    """The value of this flag set to the text `raw`, as the environment would set it; FlagError if not allowed."""
    if not isinstance(raw, str) or (v := self.allowed.read(raw)) is None:
      raise FlagError(f"{self.key}={raw!r} is not allowed; allowed: {self.allowed.text} ({self.key}: {self.doc})")
    return v
  def __bool__(self) -> bool: return bool(self.value)
  def __ge__(self, x: Any) -> bool: return self.value >= x
  def __gt__(self, x: Any) -> bool: return self.value > x
  def __lt__(self, x: Any) -> bool: return self.value < x
  def __le__(self, x: Any) -> bool: return self.value <= x
  def __eq__(self, x: Any) -> bool: return self.value == x  # type: ignore[override]
  def __hash__(self) -> int: return hash(self.key)
  def __int__(self) -> int: return int(self.value)
  def __repr__(self) -> str: return f"{self.key}={self.value!r}"

@functools.cache
def getenv(key: str, default: Any = 0) -> Any:
  """Read an env var once, typed like `default`. Prefer a declared ContextVar for anything that changes behaviour."""
  raw = os.environ.get(key)
  if raw is None or isinstance(default, str): return default if raw is None else raw
  try: return type(default)(raw)
  except ValueError: raise FlagError(f"{key}={raw!r} is not allowed; allowed: a {type(default).__name__}") from None

class Context(contextlib.ContextDecorator):
  """`with Context(DEBUG=2): ...` or `@Context(SPEC=0)`: override flags for a block, restored on exit. The values come
  from code, not from the environment: they are not checked against `allowed` (tests reach the errors downstream)."""
  def __init__(self, **kwargs: Any):
    unknown = [k for k in kwargs if k not in ContextVar._registry]
    if unknown: raise KeyError(f"Context: unknown flag(s) {unknown}; declared flags: {sorted(ContextVar._registry)}")
    self.kwargs = kwargs
    self.old: list[dict[str, Any]] = []
  def __enter__(self) -> Context:
    self.old.append({k: ContextVar._registry[k].value for k in self.kwargs})
    for k, v in self.kwargs.items(): ContextVar._registry[k].value = v
    Context._notify(self.kwargs)
    return self
  def __exit__(self, *exc: object) -> None:
    old = self.old.pop()
    for k, v in old.items(): ContextVar._registry[k].value = v
    Context._notify(old)
  @staticmethod
  def _notify(keys: Iterable[str]) -> None:
    for fn in dict.fromkeys(fn for k in keys for fn in ContextVar.watchers.get(k, ())): fn()

# the devices a program can run on; `NV=1` etc. are the short forms of `DEV=NV` (tinygrad/device.py opens them)
DEVICES = ("CPU", "PYTHON", "NV", "AMD")
_OFF_ON = Ints(0, 1)
_DEV_RE = rf"(?i)(({'|'.join(DEVICES)})(:[0-9]+)?)?"

DEBUG = ContextVar("DEBUG", 0, "verbosity: 2 one line per kernel, 3 failing graphs printed, 4 kernel source, 5 uops "
                   "(6 and 7 print what 5 does)", allowed=Ints(0, 7))
SPEC = ContextVar("SPEC", 1, "verification level: 0 off, 1 stage boundaries, 2 every UOp + round trip of sinks, "
                             "3 round trip of every UOp", allowed=Ints(0, 3))
IGNORE_OOB = ContextVar("IGNORE_OOB", 1, "1 skips the z3 proof that every LOAD/STORE index is in bounds; 0 runs it",
                        allowed=_OFF_ON)
NOOPT = ContextVar("NOOPT", 0, "1 disables kernel optimisations (heuristics and BEAM)", allowed=_OFF_ON, codegen=True)
BEAM = ContextVar("BEAM", 0, "beam width of the kernel optimisation search; 0 uses hand-coded heuristics",
                  allowed=Ints(0, 256), codegen=True)
DEVECTORIZE = ContextVar("DEVECTORIZE", 0, "0 packs lanes into the target's vector loads, stores and ALU ops; 1 vector "
                         "loads and stores only (ALU one op per lane); 2 no vectors at all", allowed=Ints(0, 2),
                         codegen=True)
TC = ContextVar("TC", 1, "1 lets the heuristics compute matmul-like reduces on the target's tensor cores (OptOps.TC) "
                "where the dtypes match; 0 never", allowed=_OFF_ON, codegen=True)
WINO = ContextVar("WINO", 2, "convolutions with 3-wide kernels, stride 1, no dilation, by Winograd's F(4, 3) (tensor "
                 "graph: fewer multiplies, float32 transforms): 0 never, 1 every one, 2 those on the CPU big enough "
                 "to be faster there (measured)", allowed=Ints(0, 2))
TRANSCENDENTAL = ContextVar("TRANSCENDENTAL", 1, "1 decomposes exp2/log2/sin where the target lacks them, 2 always, "
                            "0 never (a target without them cannot render them then)", allowed=Ints(0, 2),
                            codegen=True)
CAPTURE_PROCESS_REPLAY = ContextVar("CAPTURE_PROCESS_REPLAY", 0, "1 records every schedule and every compiled kernel "
                                    "into the replay database (replay/, loaded as the `tinygrad.plugins` entry point)",
                                    allowed=_OFF_ON)
REPLAY_DB = ContextVar("REPLAY_DB", "", "path of the replay database; empty uses ~/.cache/tinygrad/replay.db",
                       allowed=AnyText("a path"))
REPLAY_RUN = ContextVar("REPLAY_RUN", "", "run id the replay capture files records under; empty: one per pytest-xdist "
                        "session, else a new one per top-level process (its child processes inherit it)",
                        allowed=AnyText("a run id"))
REPLAY_TARGETS = ContextVar("REPLAY_TARGETS", "", "comma list of targets (NV, AMD, CPU_LLVM) the replay capture also "
                            "renders each kernel for, compile-only",
                            allowed=Matching(r"(?i)\s*((NV|AMD|CPU_LLVM)\s*(,\s*(NV|AMD|CPU_LLVM)\s*)*)?",
                                             "a comma list of NV, AMD, CPU_LLVM", ("GPU", "NV,,AMD", "NV;AMD")))
HCQ_VISIBLE_DEVICES = ContextVar("HCQ_VISIBLE_DEVICES", "",
                                 "comma list of 0-based GPU ids the NV and AMD backends may open",
                                 allowed=Matching(r"([0-9]+(,[0-9]+)*)?", "a comma list of 0-based GPU ids",
                                                  ("a", "0,", "-1", "0;1")))
DEV = ContextVar("DEV", "", "default device (CPU, PYTHON, NV, AMD); NV=1 etc. also select one",
                 allowed=Matching(_DEV_RE, f"empty or one of {', '.join(DEVICES)}, optionally with :n (NV:1)",
                                  ("GPU", "CPU:x", "CPU,NV")))
HOST_DEVICES = ContextVar("HOST_DEVICES", 8, "how many CPU and PYTHON devices a process may open: CPU:0..N-1 and "
                          "PYTHON:0..N-1 (CPU:0 is CPU), each with its own memory and threads", allowed=Ints(1, 1024))
ALLREDUCE = ContextVar("ALLREDUCE", "", "allreduce of a multi-device tensor: naive (every device copies every "
                       "partial) or ring (reduce-scatter, then allgather, in chunks); empty chooses by size",
                       allowed=Matching(r"(?i)(naive|ring)?", "empty, naive or ring", ("tree", "naive,ring")),
                       schedule=True)
SCHEDULE_CACHE = ContextVar("SCHEDULE_CACHE", 1, "1 keeps the kernel graphs of the last tensor graphs scheduled and "
                            "reuses one for the same graph under the same flags and scheduler code (an eager loop "
                            "schedules the same graph every step); 0 schedules every graph afresh (the fuzz campaign's "
                            "workers, whose rule coverage counts what each case fires)", allowed=Ints(0, 1))
TRACK_MATCH_STATS = ContextVar("TRACK_MATCH_STATS", 0,
                               "1 records per-pass, per-rule match counts and time; 2 prints them at exit",
                               allowed=Ints(0, 2))
EMULATE = ContextVar("EMULATE", "", "PYTHON backend: emulate the limits of NV or AMD",
                     allowed=Matching(r"(?i)(NV|AMD|AMD_GFX[0-9A-F]+)?", "empty, NV, AMD or AMD_GFX<arch> (the "
                                      "archs the PYTHON device emulates are checked when it opens)", ("CUDA", "NV1")),
                     codegen=True)
CPU_THREADS = ContextVar("CPU_THREADS", 0, "threads for THREAD axes on CPU; 0 uses every core", allowed=Ints(0, 4096),
                         codegen=True)
CC = ContextVar("CC", "", "C compiler for the CPU backend; empty finds cc, clang or gcc",
                allowed=AnyText("a compiler command"))
CACHELEVEL = ContextVar("CACHELEVEL", 2, "0 disables the sqlite caches (compile cache, BEAM results)",
                        allowed=Ints(0, 2))
CACHEDB = ContextVar("CACHEDB", "", "path of the sqlite cache; empty uses ~/.cache/tinygrad/cache.db",
                     allowed=AnyText("a path"))
COMPILE_ONLY = ContextVar("COMPILE_ONLY", 0, "1: realize() schedules, lowers and compiles every kernel with the real "
                          "toolchain and runs nothing; reading such a tensor raises (NV and AMD open without a GPU)",
                          allowed=_OFF_ON)
NV_ARCH = ContextVar("NV_ARCH", "", "NV target architecture (sm_80, sm_89, sm_90); empty: the device's, else sm_90",
                     allowed=Matching(r"(sm_[0-9]+)?", "empty or sm_<number> (the archs the CUDA renderer knows are "
                                      "checked when NV opens)", ("90", "sm90", "compute_90")), codegen=True)
CUDA_PATH = ContextVar("CUDA_PATH", "", "NV: root of a system CUDA toolkit, searched for NVRTC, the headers and ptxas "
                       "after the pip wheels (then /usr/local/cuda)", allowed=AnyText("a path"))
AMD_ARCH = ContextVar("AMD_ARCH", "", "AMD target architecture (gfx942, gfx1100, gfx1201); empty: the device's, "
                      "else gfx1100", allowed=Matching(r"(gfx[0-9a-f]+)?", "empty or gfx<arch> (the archs the AMD "
                                                       "backend knows are checked when it opens)", ("942", "GFX942x")),
                      codegen=True)
# NOTE: the LLVM path runs model steps 2.4-14x faster than C (docs/perf.md): it is the default where llvmlite is
# installed (the `llvm` extra), found without importing it; without it the CPU compiles C
CPU_LLVM = ContextVar("CPU_LLVM", int(importlib.util.find_spec("llvmlite") is not None),
                      "1 compiles CPU kernels as LLVM IR with llvmlite, linked into a shared object (the fast path "
                      "for models, docs/perf.md; the default where llvmlite is installed), 0 as C with the system C "
                      "compiler (the default without llvmlite)", allowed=_OFF_ON, codegen=True)
AMD_LD = ContextVar("AMD_LD", "", "AMD: the ld.lld (LLD 15+) that links code objects, a path or a command line; empty "
                    "uses the ziglang package's `zig ld.lld`", allowed=AnyText("a path or a command line"))
REWRITE_STEP_LIMIT = ContextVar("REWRITE_STEP_LIMIT", 0, "max rewrite steps in one graph_rewrite before it is declared "
                                "non-terminating; 0 = automatic", allowed=Ints(0, 2**62))

VIZ = ContextVar("VIZ", 0, "1 records every graph_rewrite step and every kernel's passes into a trace "
                "(docs/viz.md) and serves the viewer at exit", allowed=_OFF_ON)
PROFILE = ContextVar("PROFILE", 0, "1 records every kernel launch (device, time, FLOPs, bytes) into the VIZ trace and "
                     "serves the viewer at exit; launches wait for their kernel so the time is the kernel's",
                     allowed=_OFF_ON)
VIZ_PORT = ContextVar("VIZ_PORT", 8000, "port the viewer listens on at 127.0.0.1; 0 picks a free one",
                      allowed=Ints(0, 65535))
VIZ_BROWSER = ContextVar("VIZ_BROWSER", 1, "1 opens the viewer in a browser at exit; 0 only prints its address",
                         allowed=_OFF_ON)
VIZ_SERVE = ContextVar("VIZ_SERVE", 1, "1 serves the viewer at exit of a VIZ=1 or PROFILE=1 run until interrupted; 0 "
                       "only writes the trace and prints the command that opens it", allowed=_OFF_ON)
VIZ_TRACE = ContextVar("VIZ_TRACE", "", "path of the trace VIZ=1 writes (JSON lines); empty: a new file in the temp "
                       "directory", allowed=AnyText("a path"))
VIZ_MAX_MB = ContextVar("VIZ_MAX_MB", 512, "size cap of the VIZ trace in MiB: recording stops there and the trace says "
                        "so", allowed=Ints(1, 1 << 20))

def device_shorthand() -> str:
  """The device `NV=1`, `AMD=1`, `PYTHON=1` or `CPU=1` selects ("" for none). Each is 0 or 1, at most one is 1, and it
  agrees with DEV when both are set: FlagError otherwise (checked at import)."""
  on = []
  for d in DEVICES:
    if (raw := os.environ.get(d)) is None: continue
    if _OFF_ON.read(raw) is None: raise FlagError(f"{d}={raw!r} is not allowed; allowed: 0 or 1 ({d}=1 is DEV={d})")
    if int(raw) == 1: on.append(d)
  if len(on) > 1:
    both = " and ".join(f"{d}=1" for d in on)
    raise FlagError(f"{both} select {len(on)} devices; allowed: one of them, or DEV=<name>")
  if on and DEV.value and DEV.value.split(":")[0].upper() != on[0]:
    raise FlagError(f"DEV={DEV.value!r} and {on[0]}=1 select different devices; allowed: one of them, or both the same")
  return on[0] if on else ""

DEVICE_SHORTHAND = device_shorthand()

def codegen_flags() -> tuple[tuple[str, Any], ...]:
  """The current value of every flag that changes generated code (declared with codegen=True), sorted by name. Every
  cache key (compile cache, BEAM results) and every replay record includes it."""
  return tuple((k, v.value) for k, v in sorted(ContextVar._registry.items()) if v.codegen)

def schedule_flags() -> tuple[tuple[str, Any], ...]:
  """The current value of every flag that changes which kernels a tensor graph becomes (declared with schedule=True),
  sorted by name. Every replay schedule record includes it."""
  return tuple((k, v.value) for k, v in sorted(ContextVar._registry.items()) if v.schedule)

# ---- facts about the environment (not flags: nothing in the compiler changes with them) ----

# NOTE: exported for test suites that skip slow cases on CI machines (tinygrad's tests import it); CI systems set CI
CI: bool = os.getenv("CI", "") != ""
OSX: bool = sys.platform == "darwin"

def file_stem(name: str, limit: int = 64) -> str:
  """`name` (a kernel's) as a file name part: a long one (a kernel with hundreds of axes) is cut and made unique by a
  hash, since file names stop at 255 bytes."""
  if len(name) <= limit: return name
  return f"{name[:limit - 13]}-{hashlib.sha256(name.encode()).hexdigest()[:12]}"

def temp(name: str) -> str:
  """A path named `name` in the system's temporary directory."""
  return os.path.join(tempfile.gettempdir(), name)

class Timing(contextlib.ContextDecorator):
  """`with Timing("load: "):` prints how long the block took, `load: 12.34 ms`; `on_exit(ns)` appends its string;
  `enabled=False` prints nothing. The elapsed nanoseconds stay in `.ns` after the block."""
  def __init__(self, prefix: str = "", on_exit: Callable[[int], str] | None = None, enabled: bool = True):
    self.prefix, self.on_exit, self.enabled, self.ns = prefix, on_exit, enabled, 0
  def __enter__(self) -> Timing:
    self.st = time.perf_counter_ns()
    return self
  def __exit__(self, *exc: Any) -> None:
    self.ns = time.perf_counter_ns() - self.st
    if self.enabled: print(f"{self.prefix}{self.ns * 1e-6:6.2f} ms" + (self.on_exit(self.ns) if self.on_exit else ""))

# ---- counters ----

class GlobalCounters:
  """What ran since the last `reset()`: compiled kernels launched (`kernel_count`; a copy between devices is not a
  kernel), their FLOPs (`global_ops`) and bytes moved through global memory (`global_mem`, copies included) from the
  ProgramSpec estimates, and the seconds the kernels took (`time_sum_s`, summed only where a launch was timed:
  DEBUG>=2). Per device (the device of a kernel's output buffer): `device_kernels`, `device_ops`, `device_mem` (kernels
  only); copies between devices: `copy_count`, `copy_bytes`. `run_schedule` and TinyJit replays count every launch.
  `mem_used` is the bytes the allocators hold now (live buffers and the freed ones an LRU allocator keeps for reuse;
  memory a buffer wraps without allocating it, a memory-mapped file, is not counted) and is never reset; `mem_peak` is
  its maximum since the last `reset()`."""
  kernel_count: int = 0
  global_ops: int = 0
  global_mem: int = 0
  time_sum_s: float = 0.0
  device_kernels: dict[str, int] = {}
  device_ops: dict[str, int] = {}
  device_mem: dict[str, int] = {}
  copy_count: int = 0
  copy_bytes: int = 0
  mem_used: int = 0
  mem_peak: int = 0
  @staticmethod
  def reset() -> None:
    GlobalCounters.kernel_count, GlobalCounters.global_ops, GlobalCounters.global_mem = 0, 0, 0
    GlobalCounters.time_sum_s = 0.0
    GlobalCounters.device_kernels, GlobalCounters.device_ops, GlobalCounters.device_mem = {}, {}, {}
    GlobalCounters.copy_count, GlobalCounters.copy_bytes = 0, 0
    GlobalCounters.mem_peak = GlobalCounters.mem_used

# ---- small pure helpers ----

def prod(x: Iterable[Any], start: Any = 1) -> Any:
  return functools.reduce(lambda a, b: a * b, x, start)
def all_same(items: Sequence[Any]) -> bool: return all(x == items[0] for x in items)
def all_int(t: Iterable[Any]) -> bool: return all(isinstance(s, int) for s in t)
def dedup(x: Iterable[T]) -> list[T]: return list(dict.fromkeys(x))
def flatten(x: Iterable[Iterable[T]]) -> list[T]: return [i for s in x for i in s]
def argsort(x: Sequence[Any]) -> list[int]: return sorted(range(len(x)), key=x.__getitem__)
def argfix(*x: Any) -> tuple[Any, ...]:
  """Accept f(1, 2) and f((1, 2)) alike."""
  return tuple(x[0]) if x and isinstance(x[0], (tuple, list)) else tuple(x)
def make_tuple(x: int | Sequence[int], cnt: int) -> tuple[int, ...]:
  return (x,) * cnt if isinstance(x, int) else tuple(x)
def ceildiv(num: int, amt: int) -> int: return -(-num // amt)
def round_up(num: int, amt: int) -> int: return ceildiv(num, amt) * amt
def cdiv(x: int, y: int) -> int:
  """Integer division truncating toward zero, as C does; x/0 = 0 as the IR defines it (tinygrad/uop/semantics.py)."""
  return abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1) if y != 0 else 0
def cmod(x: int, y: int) -> int:
  """Remainder with the sign of the dividend, as C does; x%0 = x as the IR defines it (x == cdiv(x,y)*y + cmod(x,y))."""
  return x - cdiv(x, y) * y if y != 0 else x
def partition(itr: Iterable[T], fn: Callable[[T], bool]) -> tuple[list[T], list[T]]:
  a: list[T] = []
  b: list[T] = []
  for s in itr: (a if fn(s) else b).append(s)
  return a, b
def unwrap(x: T | None) -> T:
  assert x is not None
  return x
def merge_dicts(ds: Iterable[dict[Any, Any]]) -> dict[Any, Any]:
  out: dict[Any, Any] = {}
  for d in ds:
    for k, v in d.items():
      if k in out and out[k] != v: raise ValueError(f"merge_dicts: key {k!r} has two values {out[k]!r} and {v!r}")
      out[k] = v
  return out
def colored(st: str, color: str | None, background: bool = False) -> str:
  if color is None or not sys.stdout.isatty(): return st
  colors = ["black", "red", "green", "yellow", "blue", "magenta", "cyan", "white"]
  return f"\u001b[{10*background + 60*(color.upper() == color) + 30 + colors.index(color.lower())}m{st}\u001b[0m"
def to_function_name(s: str) -> str: return "".join(c if c.isalnum() or c == "_" else f"{ord(c):02X}" for c in s)

# ---- atomic files ----

def atomic_write(path: str, data: bytes | str, mode: int | None = None) -> None:
  """Write to a temporary file beside `path` and rename it, so a reader never sees a half-written file. The file is
  private (0600, mkstemp's) unless `mode` (e.g. 0o644) is given."""
  d = os.path.dirname(os.path.abspath(path))
  os.makedirs(d, exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=os.path.basename(path))
  try:
    with os.fdopen(fd, "wb") as f: f.write(data.encode() if isinstance(data, str) else data)
    if mode is not None: os.chmod(tmp, mode)
    os.replace(tmp, path)
  except BaseException:
    with contextlib.suppress(FileNotFoundError): os.unlink(tmp)
    raise

# ---- sqlite cache (compile cache, BEAM results) ----

def cache_path() -> str:
  return CACHEDB.value or os.path.join(os.path.expanduser(os.environ.get("XDG_CACHE_HOME", "~/.cache")), "tinygrad",
                                       "cache.db")

_db_conns: dict[str, sqlite3.Connection] = {}
def _db(table: str) -> sqlite3.Connection:
  path = cache_path()
  if (conn := _db_conns.get(path)) is None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    conn = sqlite3.connect(path, timeout=60, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    _db_conns[path] = conn
  conn.execute(f"CREATE TABLE IF NOT EXISTS '{table}' (key TEXT PRIMARY KEY, val BLOB)")
  return conn

def diskcache_get(table: str, key: Any) -> Any:
  if CACHELEVEL.value == 0: return None
  k = hashlib.sha256(pickle.dumps(key)).hexdigest()
  row = _db(table).execute(f"SELECT val FROM '{table}' WHERE key=?", (k,)).fetchone()
  return pickle.loads(row[0]) if row is not None else None

def diskcache_put(table: str, key: Any, val: Any) -> Any:
  if CACHELEVEL.value == 0: return val
  k = hashlib.sha256(pickle.dumps(key)).hexdigest()
  _db(table).execute(f"INSERT OR REPLACE INTO '{table}' (key, val) VALUES (?, ?)", (k, pickle.dumps(val)))
  return val

