"""Every distinct kernel AST a pytest run builds, captured for the NV sweeps.

As a pytest plugin (`-p tests.nv.kernel_capture --nv-capture=PATH`) it records each kernel AST at the `kernel_ast`
checkpoint (before codegen, so device-independent) and writes them, as pyrender text separated by a marker line, to
PATH at the end of the session (atomically). `capture_kernels(test_paths)` runs pytest in a subprocess with the plugin
and returns the ASTs (read back with spec's eval_pyrender, which runs no code).
"""
from __future__ import annotations
import os, subprocess, sys, tempfile
from typing import Any
from tinygrad.uop import hooks
from tinygrad.uop.ops import UOp

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEP = "\n# ---- kernel ----\n"
_seen: dict[UOp, None] = {}

def _record(ast: UOp) -> None:
  from tinygrad.engine.realize import is_transfer
  # NOTE: a copy between devices is a kernel without codegen (the engine moves its bytes): nothing to render for NV
  if not is_transfer(ast): _seen[ast] = None

def pytest_addoption(parser: Any) -> None:
  parser.addoption("--nv-capture", default=None, help="write every kernel AST of the run to this file (pyrender text)")

def pytest_configure(config: Any) -> None:
  if config.getoption("--nv-capture"): hooks.register("kernel_ast", _record)

def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
  path = session.config.getoption("--nv-capture")
  if not path: return
  from tinygrad.uop.pyrender import pyrender
  from tinygrad.helpers import atomic_write
  atomic_write(path, SEP.join(pyrender(a) for a in _seen))

def load_kernels(path: str) -> list[UOp]:
  from spec.roundtrip import eval_pyrender
  with open(path) as f: text = f.read()
  out = []
  for chunk in text.split(SEP):
    if not chunk.strip(): continue
    u = eval_pyrender(chunk)
    assert isinstance(u, UOp)
    out.append(u)
  return out

def capture_kernels(test_paths: list[str], out: str | None = None, extra_env: dict[str, str] | None = None) -> list[UOp]:
  """Run pytest on `test_paths` with the capture plugin; the kernels. CPU with SPEC=0 and NOOPT=1: the ASTs are
  captured before codegen, so neither changes them, and both make the run cheaper."""
  tmp = None
  if out is None:
    fd, tmp = tempfile.mkstemp(prefix="tg-nv-kernels-", suffix=".py")
    os.close(fd)
    out = tmp
  try:
    env = {**os.environ, "SPEC": "0", "NOOPT": "1", "DEV": "CPU", "PYTHONPATH": ROOT, **(extra_env or {})}
    env.pop("COMPILE_ONLY", None)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.nv.kernel_capture",
           f"--nv-capture={out}", *test_paths]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    # NOTE: a failing test (exit 1) is that suite's business and its kernels still count; anything else is not a capture
    if proc.returncode not in (0, 1) or not os.path.exists(out) or not os.path.getsize(out):
      raise RuntimeError(f"capturing kernels: {' '.join(cmd)} failed (exit {proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return load_kernels(out)
  finally:
    if tmp is not None and os.path.exists(tmp): os.unlink(tmp)
