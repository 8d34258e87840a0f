"""The driver of the checkpoint-reader targets (fuzz/targets/load_*_target.py): `main(fmt, argv)` fuzzes safe_load,
torch_load or gguf_load with atheris on the raw bytes of a file.

    python fuzz/targets/load_torch_target.py -max_total_time=60 corpus/ fuzz/targets/seeds/load_torch
    python fuzz/targets/load_common.py --seconds 30        # every reader in parallel, a summary line each

An input is a whole file. It is a finding (libFuzzer writes the input as crash-<sha1>, timeout-<sha1> or oom-<sha1>):
- any exception other than CheckpointError, the readers' one documented error class (MemoryError at the memory cap
  included);
- any run past the time cap (libFuzzer's -timeout, default here 5 s) or the memory cap (RLIMIT_AS, --mem-mb above
  what the process has mapped at the start, default 2048, and libFuzzer's -rss_limit_mb to match);
- while the reader runs: any file opened for writing, process started or library loaded (an audit hook,
  sys.addaudithook, on open, subprocess.Popen, os.system, os.exec*, os.posix_spawn, os.fork and ctypes.dlopen; the
  hook also refuses the operation, so a finding never does the thing).
Each tensor a reader returns is realized on the PYTHON device, whose interpreter checks every access of every kernel:
a view or a dequantization that reads outside its buffer is a finding too (--no-realize skips it).

Options of this driver (taken out of argv before libFuzzer sees it):
  --mem-mb=N      the address space a run may add (RLIMIT_AS; not set under AddressSanitizer, which reserves terabytes)
  --no-realize    only load; do not realize the tensors
  --setup=module:function  call it first (a planted misbehaving reader, e.g. tests.nn.planted_loaders:writes_a_file)
  --keep-going    do not stop at a finding: write each distinct one (exception type and the line that raised it) as
                  <artifact_prefix>crash-<sha1> with its traceback in crash-<sha1>.txt, count it, and go on (a long
                  run then reports every kind it met, not the first); caps still stop the run
"""
from __future__ import annotations
import hashlib, importlib, json, os, re, resource, shutil, subprocess, sys, tempfile, time, traceback
from typing import Any, Callable

# format -> (module, reader)
LOADERS = {"safetensors": ("tinygrad.nn.state", "safe_load"), "torch": ("tinygrad.nn.state", "torch_load"),
           "gguf": ("tinygrad.nn.gguf", "gguf_load")}
HERE = os.path.dirname(os.path.abspath(__file__))
SEEDS = os.path.join(HERE, "seeds")
DEFAULT_MEM_MB, DEFAULT_TIMEOUT_S = 2048, 5
# audit events that start a process or load a library (open is checked by its mode)
_EXEC_EVENTS = {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
                "os.startfile", "ctypes.dlopen", "pty.spawn"}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

class LoaderFinding(AssertionError):
  """The reader did something a file must never make it do (the message says what)."""

class Audit:
  """An audit hook (sys.addaudithook) that, while `active`, records and refuses opening a file for writing, starting a
  process and loading a library."""
  def __init__(self) -> None:
    self.active, self.events = False, list[str]()
  def __call__(self, event: str, args: tuple[Any, ...]) -> None:
    if not self.active: return
    if event == "open":
      mode, flags = args[1], args[2] if len(args) > 2 else 0
      by_mode = isinstance(mode, str) and any(c in mode for c in "wax+")
      if not (by_mode or (isinstance(flags, int) and flags & _WRITE_FLAGS)): return
    elif event not in _EXEC_EVENTS: return
    self.events.append(f"{event}{args!r}"[:300])
    raise PermissionError(f"the checkpoint reader tried {event} while reading an untrusted file")

def cap_memory(mb: int) -> str:
  """RLIMIT_AS at what the process has mapped now plus mb MiB; under AddressSanitizer (its shadow memory is a huge
  reservation) only libFuzzer's RSS limit applies."""
  if "ASAN_OPTIONS" in os.environ or "libasan" in open("/proc/self/maps").read():
    return f"RSS {mb} MiB (libFuzzer -rss_limit_mb; RLIMIT_AS not set under AddressSanitizer)"
  with open("/proc/self/status") as f: mapped = next(int(ln.split()[1]) * 1024 for ln in f if ln.startswith("VmSize:"))
  resource.setrlimit(resource.RLIMIT_AS, (mapped + (mb << 20), resource.getrlimit(resource.RLIMIT_AS)[1]))
  return f"RLIMIT_AS {mapped >> 20} + {mb} MiB"

def make_check(fmt: str, audit: Audit, realize: bool) -> Callable[[bytes], None]:
  """check(data): load data with the reader of fmt (and realize what it returns); raise on a finding."""
  from tinygrad import Tensor
  from tinygrad.nn.state import CheckpointError
  mod, name = LOADERS[fmt]
  load, device = getattr(importlib.import_module(mod), name), "PYTHON" if realize else None
  def tensors(obj: Any, depth: int = 0) -> list[Tensor]:
    if isinstance(obj, Tensor): return [obj]
    if depth > 80 or not isinstance(obj, (dict, list, tuple)): return []
    return [t for v in (obj.values() if isinstance(obj, dict) else obj) for t in tensors(v, depth + 1)]
  def read(data: bytes) -> None:
    out = load(data, device=device)
    # NOTE: a view or dequantization reading outside its buffer is an EmulatedKernelError on PYTHON; a huge (but lazy,
    # expanded) tensor is read at its first element only
    if realize and (ts := [t.reshape(-1)[:1] if t.numel() > 4096 else t for t in tensors(out)]): Tensor.realize(*ts)
  return lambda data: audited(audit, name, lambda: read(data), CheckpointError)

def audited(audit: Audit, what: str, fn: Callable[[], Any], allowed: type[Exception]) -> None:
  """fn() with the audit hook active: an `allowed` exception is the reader's documented refusal; anything the hook saw
  is a LoaderFinding (whatever fn raised then: the hook's refusal, a PermissionError, surfaces there unless the reader
  wrapped it in its own error class); any other exception goes up as the finding it is."""
  audit.events.clear()
  audit.active = True
  try: fn()
  except allowed: pass
  except Exception as e:
    if audit.events: raise LoaderFinding(f"{what} did what no file may make it do: {audit.events}") from e
    raise
  finally: audit.active = False
  if audit.events: raise LoaderFinding(f"{what} did what no file may make it do: {audit.events}")

def keep_going(check: Callable[[bytes], None], prefix: str) -> Callable[[bytes], None]:
  """check, with each finding written once per signature (exception type, the innermost frame that raised it) and
  counted on stderr instead of ending the run."""
  seen: set[str] = set()
  def run(data: bytes) -> None:
    try: check(data)
    except Exception as e:
      tb = traceback.extract_tb(e.__traceback__)
      sig = f"{type(e).__name__} at {tb[-1].filename}:{tb[-1].lineno}" if tb else type(e).__name__
      if sig in seen: return
      seen.add(sig)
      name = f"{prefix}crash-{hashlib.sha1(data).hexdigest()}"
      with open(name, "wb") as f: f.write(data)
      with open(name + ".txt", "w") as f: f.write(sig + "\n" + "".join(traceback.format_exception(e)))
      print(f"FINDING {len(seen)}: {sig}: {str(e)[:300]} -> {name}", file=sys.stderr)
  return run

def _opt(argv: list[str], name: str) -> str | None:
  for a in argv:
    if a.startswith(f"--{name}="): return a.split("=", 1)[1]
    if a == f"--{name}": return ""
  return None

def main(fmt: str, argv: list[str]) -> None:
  """Run the target for fmt under atheris (never returns: libFuzzer exits)."""
  own = [a for a in argv[1:] if a.startswith("--")]
  # NOTE: libFuzzer's -fork/-jobs start each child from argv[0] as a shell command line: this interpreter and the
  # script, with our own options (a PyInstaller binary, as ClusterFuzzLite builds it, is its own interpreter)
  prog = argv[0] if getattr(sys, "frozen", False) else f"{sys.executable} {os.path.abspath(argv[0])}"
  lib = [f"{prog} {' '.join(own)}".strip()] + [a for a in argv[1:] if not a.startswith("--")]
  mem = int(_opt(own, "mem-mb") or DEFAULT_MEM_MB)
  # NOTE: the sqlite compile cache is a file write; nothing here compiles (PYTHON interprets), keep it off anyway
  os.environ["CACHELEVEL"] = "0"
  import atheris
  with atheris.instrument_imports(include=["tinygrad.nn.state", "tinygrad.nn.gguf"]):
    import tinygrad.nn.state, tinygrad.nn.gguf  # noqa: F401
  if (setup := _opt(own, "setup")):
    mod, _, fn = setup.partition(":")
    getattr(importlib.import_module(mod), fn)()
  audit = Audit()
  check = make_check(fmt, audit, _opt(own, "no-realize") is None)
  # NOTE: the first loads open the devices (the CPU compiler is probed with a process): done before the hook arms
  for name in sorted(os.listdir(os.path.join(SEEDS, f"load_{fmt}"))):
    with open(os.path.join(SEEDS, f"load_{fmt}", name), "rb") as f: check(f.read())
  if _opt(own, "keep-going") is not None:
    check = keep_going(check, next((a.split("=", 1)[1] for a in lib if a.startswith("-artifact_prefix=")), "./"))
  print(f"load_{fmt}: memory cap {cap_memory(mem)}", file=sys.stderr)
  sys.addaudithook(audit)
  if not any(a.startswith("-timeout=") for a in lib): lib.append(f"-timeout={DEFAULT_TIMEOUT_S}")
  if not any(a.startswith("-rss_limit_mb=") for a in lib): lib.append(f"-rss_limit_mb={mem + 1024}")
  atheris.Setup(lib, check)
  atheris.Fuzz()

# ---- every reader at once (make fuzz-loaders) ----

def run_all(seconds: int, out: str, jobs: list[str], extra: list[str]) -> int:
  """Fuzz each reader for `seconds` in parallel (corpus: a copy of its seeds), print the inputs each ran and what it
  found; artifacts go to out/. Returns the number of findings."""
  os.makedirs(out, exist_ok=True)
  procs = {}
  with tempfile.TemporaryDirectory() as td:
    for fmt in jobs:
      corpus = shutil.copytree(os.path.join(SEEDS, f"load_{fmt}"), os.path.join(td, fmt))
      log = open(os.path.join(out, f"load_{fmt}.log"), "w")
      cmd = [sys.executable, os.path.join(HERE, f"load_{fmt}_target.py"), f"-max_total_time={seconds}",
             f"-artifact_prefix={os.path.join(out, f'load_{fmt}-')}", "-print_final_stats=1", *extra, corpus]
      procs[fmt] = (subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), log, corpus)
    found = 0
    for fmt, (p, log, corpus) in procs.items():
      p.wait(timeout=seconds + 300)
      log.close()
      with open(os.path.join(out, f"load_{fmt}.log")) as f: text = f.read()
      runs = re.findall(r"Done (\d+) runs", text) or re.findall(r"stat::number_of_executed_units: (\d+)", text)
      arts = sorted(a for a in os.listdir(out) if a.startswith(f"load_{fmt}-") and not a.endswith(".txt"))
      found += len(arts) + (p.returncode != 0 and not arts)
      summary = {"target": f"load_{fmt}", "seconds": seconds, "inputs": int(runs[-1]) if runs else None,
                 "corpus": len(os.listdir(corpus)), "exit": p.returncode, "findings": arts}
      print(json.dumps(summary))
      if p.returncode != 0: print(text[-3000:], file=sys.stderr)
  return found

if __name__ == "__main__":
  import argparse
  ap = argparse.ArgumentParser(description="fuzz safe_load, torch_load and gguf_load in parallel")
  ap.add_argument("--seconds", type=int, default=30)
  ap.add_argument("--out", default=os.path.join(tempfile.gettempdir(), f"fuzz-loaders-{int(time.time())}"))
  ap.add_argument("--targets", default=",".join(LOADERS))
  args, rest = ap.parse_known_args()
  sys.exit(1 if run_all(args.seconds, args.out, args.targets.split(","), rest) else 0)
