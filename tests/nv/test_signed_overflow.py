"""Signed integer overflow on NV: NVRTC has no -fwrapv, so the CUDA text itself must wrap (docs/ir.md section 5).
Kernels fed int32/int64/uint16 inputs at and next to MIN/MAX run through the host diff (the rendered CUDA built as
C++ without -fwrapv against the C backend), and once more built so that any signed overflow in the CUDA text traps
(in a subprocess: a trap is SIGILL). A renderer that leaves the arithmetic plain must trap, or the check proves
nothing. Index math whose bounds are proven stays plain."""
import signal, subprocess, sys
import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.codegen import get_program
from tinygrad.renderer.cuda import CUDARenderer
from tests.nv.hostdiff import diff_asts

def _asts(*ts):
  return [si.ast for t in ts for si in t.schedule()]

def overflow_kernels():
  a, b, c = (Tensor(np.zeros((8, 16), np.int32)) for _ in range(3))
  la, lb = Tensor(np.zeros(32, np.int64)), Tensor(np.zeros(32, np.int64))
  ua, ub = Tensor(np.zeros(32, np.uint16)), Tensor(np.zeros(32, np.uint16))
  return _asts(a + b, a - b, a * b, -a, a * b + c, a * 3 + 7, a.sum(axis=1), (a * b).sum(axis=0), (a + 1) < a,
               la * lb + la, -la, ua * ub)

class PlainSignedArithmetic(CUDARenderer):
  """The renderer before the fix: signed arithmetic as plain C++ operators (relies on -fwrapv, which NVRTC lacks)."""
  def render_wrapping(self, u, r):
    return self.code_for_op[u.op](*[r[s] for s in u.src], u.dtype)

def run_trapping(mutant: bool) -> None:
  """Entry point of the subprocess: every kernel run with the trapping build; dies (SIGILL) on a signed overflow.
  NOTE: values are compared in-process (test_overflowing_ints_agree_with_c_backend): this build has no -fwrapv, and
  g++ 12 miscompiles some well-defined code without it (cuda_host.HOST_CXXFLAGS)."""
  ren = PlainSignedArithmetic("sm_90") if mutant else CUDARenderer("sm_90")
  rep = diff_asts(overflow_kernels(), renderer=ren, wide_ints=True, trap_ub=True)
  if rep.checked != 12 or rep.refused: sys.exit(f"checked {rep.checked}, refused {rep.refused}")

def _subprocess(mutant: bool) -> subprocess.CompletedProcess:
  code = f"from tests.nv.test_signed_overflow import run_trapping; run_trapping({mutant})"
  return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)

def test_overflowing_ints_agree_with_c_backend():
  rep = diff_asts(overflow_kernels(), wide_ints=True)
  assert rep.checked == 12 and not rep.refused, rep.refused
  assert not rep.mismatches, rep.mismatches[0]

def test_no_signed_overflow_in_cuda_text():
  p = _subprocess(mutant=False)
  assert p.returncode == 0, f"rc {p.returncode}: {p.stderr[-3000:]}"

def test_plain_signed_arithmetic_traps():
  # NOTE: the check above can fail: the same kernels with plain operators overflow, and the trapping build catches it
  p = _subprocess(mutant=True)
  assert p.returncode == -signal.SIGILL, f"rc {p.returncode}: {p.stderr[-3000:]}"

@pytest.mark.parametrize("dt", [dtypes.int32, dtypes.int64], ids=str)
def test_overflowing_ops_go_through_unsigned(dt):
  a, b = Tensor(np.zeros(16, dt.fmt)), Tensor(np.zeros(16, dt.fmt))
  ut = "unsigned long long" if dt is dtypes.int64 else "unsigned int"
  for t in (a + b, a - b, a * b):
    src = get_program(t.schedule()[-1].ast, CUDARenderer("sm_90")).src
    assert f"({ut})(val" in src, src

def test_proven_index_math_stays_plain():
  # NOTE: float kernels whose only integer arithmetic is index math (grid, locals, loops, upcasts): every bound is
  # known, so no cast to unsigned anywhere
  x, w = Tensor(np.zeros((64, 96), np.float32)), Tensor(np.zeros((96, 48), np.float32))
  for ast in _asts(x @ w, x.sum(axis=0), x.permute(1, 0).contiguous() + 1, x[::2, 3:40].exp2()):
    src = get_program(ast, CUDARenderer("sm_90")).src
    assert "unsigned" not in src, src
  # an int32 sum of arange: the index math is plain; only the accumulator updates (an accumulator's bounds are the
  # dtype's) wrap
  src = get_program(_asts(Tensor.arange(1000).reshape(10, 100).sum(1))[-1], CUDARenderer("sm_90")).src
  wrapped = [ln for ln in src.splitlines() if "unsigned" in ln]
  assert wrapped and all("(unsigned int)(val" in ln for ln in wrapped), src

def test_wrapping_text_compiles_with_nvrtc():
  from tinygrad.runtime.support.cuda_toolchain import NVBinary, NVCompiler
  for ast in overflow_kernels():
    src = get_program(ast, CUDARenderer("sm_90")).src
    assert NVBinary.unpack(NVCompiler("sm_90").compile(src)).cubin[:4] == b"\x7fELF"
