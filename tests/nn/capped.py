"""Run a snippet that loads a hostile checkpoint in a child process with an address-space cap (RLIMIT_AS, counted from
what the child has mapped once tinygrad is imported) and a wall-clock cap, and report how it ended and the peak of
traced memory (tracemalloc: Python objects, numpy arrays and tinygrad's host buffers).

    r = run_capped("from tinygrad.nn.state import torch_load\\nt = torch_load(PATH)", path, mem_mb=512, seconds=20)
    r.status in ("ok", "error", "timeout", "killed"); r.error_type, r.error_mro, r.message, r.peak, r.result

The snippet sees PATH (the file) and may set `result` to anything JSON can hold. A hang or a blow-up in the loader
stops at a cap, so a test of the unfixed loader fails fast instead of taking the machine down."""
from __future__ import annotations
import json, os, subprocess, sys
from dataclasses import dataclass, field
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_CHILD = r'''
import json, resource, sys, tracemalloc
import numpy, tinygrad, tinygrad.nn.state
def _mapped():
  with open("/proc/self/status") as f:
    return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:"))
cap = _mapped() + int(sys.argv[2]) * (1 << 20)
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
ns = {"PATH": sys.argv[1], "result": None}
out = {}
tracemalloc.start()
try:
  exec(compile(sys.stdin.read(), "<snippet>", "exec"), ns)
  out = {"status": "ok", "result": ns["result"]}
except BaseException as e:
  out = {"status": "error", "error_type": type(e).__name__, "error_mro": [c.__name__ for c in type(e).__mro__],
         "message": str(e)[:4000]}
out["peak"] = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
ns.clear()
print("\n@@RESULT@@" + json.dumps(out, default=repr))
'''

@dataclass
class Capped:
  status: str
  error_type: str | None = None
  error_mro: list[str] = field(default_factory=list)
  message: str = ""
  peak: int = 0
  result: Any = None
  output: str = ""
  def __str__(self) -> str:
    return f"{self.status} {self.error_type or ''}: {self.message[:300]} (peak {self.peak / 2**20:.1f} MiB)"

def run_capped(snippet: str, path: Any, mem_mb: int = 1024, seconds: float = 30, env: dict[str, str] | None = None,
               pythonpath: str = REPO) -> Capped:
  """Run `snippet` in a child with at most `mem_mb` MiB more address space and `seconds` of wall time."""
  # NOTE: kernels (reading back a few elements) run on the PYTHON interpreter: no C compiler in the capped child
  cenv = {**os.environ, "PYTHONPATH": pythonpath, "DEV": "PYTHON", **(env or {})}
  try:
    p = subprocess.run([sys.executable, "-c", _CHILD, str(path), str(mem_mb)], input=snippet, capture_output=True,
                       text=True, timeout=seconds, env=cenv, cwd=pythonpath)
  except subprocess.TimeoutExpired as e:
    return Capped("timeout", message=f"still running after {seconds} s", output=str(e.stdout or "")[-2000:])
  if "@@RESULT@@" not in p.stdout:
    return Capped("killed", message=f"exit {p.returncode}", output=(p.stdout + p.stderr)[-4000:])
  r = json.loads(p.stdout.rsplit("@@RESULT@@", 1)[1])
  return Capped(output=(p.stdout.rsplit("@@RESULT@@", 1)[0] + p.stderr)[-4000:], **r)
