import ctypes, os, subprocess, tempfile, hashlib
import numpy as np
import pytest
from tinygrad.codegen import get_program
from tinygrad.renderer.cstyle import CRenderer

_LIBS: dict[str, ctypes.CDLL] = {}

def compile_c(src: str) -> ctypes.CDLL:
  """gcc straight to a shared object (the tests do not depend on the runtime's compiler)."""
  key = hashlib.sha256(src.encode()).hexdigest()
  if key in _LIBS: return _LIBS[key]
  # the directory goes when the library is loaded (its mapping stays): a suite run leaves nothing in /tmp
  with tempfile.TemporaryDirectory(prefix="tg-codegen-test-") as d:
    cpath, sopath = os.path.join(d, "k.c"), os.path.join(d, "k.so")
    with open(cpath, "w") as f: f.write(src)
    res = subprocess.run(["cc", "-shared", "-O2", "-fPIC", "-Werror=implicit-function-declaration", "-o", sopath, cpath],
                         capture_output=True, text=True)
    if res.returncode != 0: raise RuntimeError(f"cc failed:\n{res.stderr}\n{src}")
    _LIBS[key] = lib = ctypes.CDLL(sopath)
  return lib

def run_program(prg, bufs: list[np.ndarray], var_vals: dict | None = None) -> None:
  lib = compile_c(prg.src)
  fxn = getattr(lib, prg.name)
  fxn.restype = None
  vals = [int((var_vals or {})[n]) for n in prg.var_names]
  args = [ctypes.c_void_p(b.ctypes.data) for b in bufs] + [ctypes.c_int32(v) for v in vals]
  gs, _ = prg.launch_dims(var_vals or {})
  for core in range(gs[0]): fxn(*args, ctypes.c_int32(core))

@pytest.fixture
def run_kernel():
  def f(ast, bufs, var_vals=None, opts=None, renderer=None):
    prg = get_program(ast, renderer or CRenderer(threads=4), opts)
    run_program(prg, bufs, var_vals)
    return prg
  return f
