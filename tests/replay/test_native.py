"""Changed CPU and CPU_LLVM kernels are run natively (compiled for the host, in a forked child) on random inputs."""
import pytest
from tinygrad import Tensor
from tinygrad.codegen import get_program
from tinygrad.helpers import Context
from replay import compare
from replay.targets import target_renderer
from tests.replay.helpers import kernels

def _program(target, t):
  (ast,) = kernels(t)
  with Context(CPU_LLVM=int(target == "CPU_LLVM")): return get_program(ast, target_renderer(target, None))

@pytest.mark.parametrize("target", ["CPU", "CPU_LLVM"])
def test_native_run_agrees_on_the_same_program_and_shows_a_different_one(target):
  p = _program(target, (Tensor.arange(24).float().reshape(4, 6) * 2).sum(1))
  q = _program(target, (Tensor.arange(24).float().reshape(4, 6) * 3).sum(1))
  same = compare.run_both_native(target, (p.name, p.src, list(p.uops)), (p.name, p.src, list(p.uops)))
  assert same is not None and not same.differs and f"natively on {target}" in same.detail, same
  other = compare.run_both_native(target, (p.name, p.src, list(p.uops)), (q.name, q.src, list(q.uops)))
  assert other is not None and other.differs and "buffer data0[" in other.detail, other

def test_source_that_does_not_compile_falls_back_with_the_reason():
  p = _program("CPU", Tensor.arange(6).float() + 1)
  assert compare.run_both_native("CPU", (p.name, p.src, list(p.uops)), (p.name, "not C", list(p.uops))) is None
  assert "could not compile both for CPU" in compare.native_skip
