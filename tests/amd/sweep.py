"""Every kernel that tests/tensor compiles, compiled again for each AMD architecture, and each code object checked
(tests/amd/checks.py): `make test-amd-sweep`. Prints counts and time per architecture; exits 1 on any failure.

  CPU_LLVM=1 python -m tests.amd.sweep [--archs gfx942,gfx1100,gfx1201] [--tests tests/tensor] [--limit N]
"""
from __future__ import annotations
import argparse, sys, time
import pytest
from tinygrad.uop import hooks
from tinygrad.helpers import Context

class Capture:
  """A pytest plugin: every kernel AST the run compiles, in first-seen order."""
  def __init__(self) -> None: self.asts: dict = {}
  def pytest_sessionstart(self, session) -> None: hooks.register("compiled", self.on_compiled)
  def on_compiled(self, ast, spec, opts) -> None: self.asts.setdefault(ast, None)

def compile_all(asts: list, arch: str) -> tuple[int, list[str], float]:
  from tinygrad.codegen import get_program
  from tinygrad.renderer.llvmir import AMDLLVMRenderer
  from tinygrad.runtime.support.compiler_amd import AMDCompiler
  from tests.amd.checks import check_code_object
  ren, comp = AMDLLVMRenderer(arch), AMDCompiler(arch)
  fails, st = [], time.perf_counter()
  with Context(CACHELEVEL=0):
    for i, ast in enumerate(asts):
      try:
        prg = get_program(ast, ren)
        check_code_object(comp.compile(prg.src), prg, arch)
      except Exception as e: fails.append(f"{arch} kernel {i}: {type(e).__name__}: {str(e).splitlines()[0][:300]}")
  return len(asts), fails, time.perf_counter() - st

def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--archs", default="gfx942,gfx1100,gfx1201")
  ap.add_argument("--tests", default="tests/tensor")
  ap.add_argument("--limit", type=int, default=0, help="compile only the first N kernels (0: all)")
  args = ap.parse_args()
  cap = Capture()
  st = time.perf_counter()
  rc = pytest.main([args.tests, "-q", "-p", "no:cacheprovider", "-x", "--no-header"], plugins=[cap])
  if rc != 0: print(f"tests failed while capturing kernels (exit {rc})"); return 1
  asts = list(cap.asts)[:args.limit or None]
  print(f"captured {len(cap.asts)} kernels from {args.tests} in {time.perf_counter() - st:.1f} s; compiling {len(asts)}")
  bad = []
  for arch in args.archs.split(","):
    n, fails, dt = compile_all(asts, arch)
    print(f"{arch}: {n - len(fails)}/{n} kernels compiled and checked in {dt:.1f} s ({dt / max(n, 1) * 1e3:.0f} ms/kernel)")
    bad += fails
  for f in bad: print("FAILED", f)
  return 1 if bad else 0

if __name__ == "__main__":
  sys.exit(main())
