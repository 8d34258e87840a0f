#!/usr/bin/env python3
"""atheris target: the exec-free pyrender reader (`spec.roundtrip.eval_pyrender`) on hostile text.

  python fuzz/targets/pyrender_target.py [libFuzzer flags] [corpus dirs]   e.g. -max_total_time=30 -seed=1 corpus/

An input's bytes are read as UTF-8 (bad bytes replaced) and given to eval_pyrender. A finding (raised, so libFuzzer
writes the input as a crash artifact, which `python fuzz/targets/pyrender_target.py crash-<sha1>` replays) is:
  - any exception other than PyrenderSyntaxError, the reader's documented error class (a MemoryError under the
    memory cap included);
  - a read that takes more than the time cap (CPU seconds, --time-cap);
  - a file opened for writing, a process started (subprocess, os.system, os.exec*, os.spawn*, os.posix_spawn,
    os.fork), a library loaded (ctypes), or code compiled or executed (compile, exec), seen by an audit hook;
  - a graph that reads but does not round-trip (`check_roundtrip` of what was read).
The process runs under a memory cap (RLIMIT_AS: its address space after start-up plus --memory-mb), and libFuzzer's
own -rss_limit_mb and -timeout back the caps up. An empty first corpus directory is seeded with printed graphs (kernel
ASTs, linear programs, a tensor graph with a kernel function) and hostile texts; fuzz/targets/pyrender.dict holds the
grammar's tokens (`-dict=`).

Own options (taken out of argv before libFuzzer sees it): --memory-mb=N (default 1024), --time-cap=S (default 2).
"""
from __future__ import annotations
import hashlib, os, resource, signal, sys
from typing import Any

# NOTE: run as a script, the repository root is not on sys.path (an installed package, as ClusterFuzzLite builds it,
# needs no help)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

DICT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pyrender.dict")
# audit events that are findings while an input is read
_PROCESS_EVENTS = ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
                   "pty.spawn")
_CODE_EVENTS = ("compile", "exec", "ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC

class ParserFinding(AssertionError):
  """The reader did something it must not on this input (the message says what)."""

class TimeCapExceeded(ParserFinding):
  """The read passed the time cap."""

class Guard:
  """The audit hook and the time cap around one read: `violations` lists what the read did that it must not."""
  def __init__(self, time_cap: float):
    self.time_cap, self.armed = time_cap, False
    self.violations: list[str] = []
    sys.addaudithook(self.hook)
    signal.signal(signal.SIGVTALRM, self.on_time_cap)
  def hook(self, event: str, args: tuple[Any, ...]) -> None:
    if not self.armed: return
    what = None
    if event == "open" and len(args) >= 3 and _writes(args[1], args[2]): what = f"opened {args[0]!r} for writing"
    elif event in _PROCESS_EVENTS: what = f"started a process ({event})"
    elif event in _CODE_EVENTS: what = f"compiled, ran or loaded code ({event})"
    if what is None: return
    self.violations.append(what)
    # NOTE: raising stops the operation itself; the read may swallow the exception, `violations` still holds it
    raise ParserFinding(what)
  def on_time_cap(self, signum: int, frame: Any) -> None:
    if self.armed: raise TimeCapExceeded(f"the read took more than {self.time_cap} CPU seconds")
  def __enter__(self) -> Guard:
    self.violations.clear()
    self.armed = True
    signal.setitimer(signal.ITIMER_VIRTUAL, self.time_cap)
    return self
  def __exit__(self, *exc: object) -> None:
    signal.setitimer(signal.ITIMER_VIRTUAL, 0)
    self.armed = False

def _writes(mode: Any, flags: Any) -> bool:
  if isinstance(mode, str) and any(c in mode for c in "wax+"): return True
  return isinstance(flags, int) and flags >= 0 and bool(flags & _WRITE_FLAGS)

def check_one(data: bytes, guard: Guard) -> None:
  """Read one input under the guard; raise ParserFinding (or the reader's unexpected exception) for a finding."""
  from spec.roundtrip import eval_pyrender, check_roundtrip, PyrenderSyntaxError
  text = data.decode("utf-8", "replace")
  with guard:
    try:
      got = eval_pyrender(text)
      check_roundtrip(got)
    except PyrenderSyntaxError: pass
  if guard.violations: raise ParserFinding("; ".join(guard.violations))

def seeds() -> list[bytes]:
  """Printed graphs of the shapes the reader takes (kernel ASTs, index expressions, a linear program, kernel
  functions), and texts it must refuse."""
  from tinygrad.uop.pyrender import pyrender
  from fuzz.strategies import build_kernel, build_index_expression, RandomChooser
  asts = [build_kernel(RandomChooser(i)).ast for i in range(12)]
  out = [pyrender(a) for a in asts] + [pyrender(list(asts[0].toposort()))]
  out += [pyrender(build_index_expression(RandomChooser(i))[0]) for i in range(6)]
  out += ["def k0():\n  c0 = UOp.variable('a', 0, 9)\n  ast = c0 + c0\n  return ast\n\nast = UOp.sink(arg=k0())\n",
          "ast = UOp(Ops.SINK, dtypes.void, (), (1, 2.5, 'x', None, True, float('nan'), dtypes.float_from_bits(1)))\n",
          "ast = __import__('os').system('true')\n", f"ast = UOp.const(dtypes.int64, {2**128})\n"]
  return [s.encode() for s in out]

def _opt(argv: list[str], name: str, default: float) -> float:
  return next((float(a.split("=", 1)[1]) for a in argv if a.startswith(f"--{name}=")), default)

def _address_space() -> int:
  with open("/proc/self/statm") as f: return int(f.read().split()[0]) * resource.getpagesize()

def main(argv: list[str]) -> None:
  import atheris
  own = [a for a in argv[1:] if a.startswith("--")]
  lib = [argv[0]] + [a for a in argv[1:] if not a.startswith("--")]
  memory_mb, time_cap = int(_opt(own, "memory-mb", 1024)), _opt(own, "time-cap", 2.0)
  # NOTE: line coverage of the reader and what it builds with; every module a read may import lazily is imported now,
  # inside the block (a read that imports is a finding: it execs code)
  with atheris.instrument_imports(include=["spec", "tinygrad.uop", "tinygrad.dtype", "tinygrad.codegen.opt"]):
    from spec.roundtrip import eval_pyrender, PyrenderSyntaxError, _load_lazy_classes
    _load_lazy_classes()
  corpus = next((a for a in lib[1:] if not a.startswith("-") and os.path.isdir(a)), None)
  fresh = corpus if corpus is not None and not os.listdir(corpus) else None
  for s in seeds():
    try: eval_pyrender(s.decode())
    except PyrenderSyntaxError: pass
    if fresh is not None:
      with open(os.path.join(fresh, hashlib.sha1(s).hexdigest()), "wb") as f: f.write(s)
  cap = _address_space() + memory_mb * 2**20
  resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
  if not any(a.startswith("-rss_limit_mb=") for a in lib): lib.append(f"-rss_limit_mb={memory_mb + 1024}")
  if not any(a.startswith("-timeout=") for a in lib): lib.append(f"-timeout={int(time_cap * 10) + 1}")
  if not any(a.startswith("-dict=") for a in lib) and os.path.exists(DICT): lib.append(f"-dict={DICT}")
  if not any(a.startswith("-max_len=") for a in lib): lib.append("-max_len=4096")
  print(f"pyrender target: memory cap {memory_mb} MB over {cap // 2**20 - memory_mb} MB at start, time cap {time_cap} "
        "CPU s per input", file=sys.stderr, flush=True)
  guard = Guard(time_cap)
  atheris.Setup(lib, lambda data: check_one(data, guard))
  atheris.Fuzz()

if __name__ == "__main__": main(sys.argv)
