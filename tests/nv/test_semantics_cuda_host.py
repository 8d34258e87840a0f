"""The one semantics table (tinygrad/uop/semantics.py) against the CUDA renderer's text, compiled on the host as C++ with
the CUDA shim (tinygrad/runtime/support/cuda_host.py): the cases of the C cross-check (tests/uop/
test_semantics_crosscheck.py), every kernel rendered by CUDARenderer and all of them built in one compile. This checks
what the text means (guards, casts, conversions); a GPU run (make test-gpu) checks what the hardware does with it."""
import functools, subprocess, sys
import numpy as np
import pytest
from tinygrad.codegen import get_program
from tinygrad.dtype import DType
from tinygrad.renderer.cuda import CUDARenderer
from tinygrad.runtime.support.cuda_host import HostLibrary, build_host_library, host_refusal
from tinygrad.runtime.support.cuda_toolchain import rename_kernel
from tests.uop.test_semantics_crosscheck import DTYPES, Case, c_results, cases_of, check_outputs

@functools.cache
def cuda_host(trap_ub: bool = False) -> tuple[HostLibrary, dict[str, object]]:
  cases, _ = c_results()
  ren = CUDARenderer("sm_90")
  prgs = {c.name: get_program(c.ast, ren, opts=[]) for c in cases}
  refused = {n: why for n, p in prgs.items() if (why := host_refusal(p.src)) is not None}
  assert not refused, f"the host shim cannot run: {refused}"
  return HostLibrary(build_host_library([rename_kernel(p.src, n) for n, p in prgs.items()], trap_ub=trap_ub)), prgs

def run(c: Case, trap_ub: bool = False) -> list[np.ndarray]:
  lib, prgs = cuda_host(trap_ub)
  p = prgs[c.name]
  bufs = c.buffers()
  gs, ls = p.launch_dims({})
  lib.run(c.name, [bufs[i].ctypes.data for i in p.globals], [], gs, ls or [1, 1, 1])
  return c.outputs(bufs)

@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_table_matches_cuda_text_on_the_host(dt: DType):
  errors = [e for c in cases_of(dt) for e in check_outputs(c, run(c))]
  assert not errors, "\n".join(errors)

def run_all_trapping() -> None:
  """Entry point of the subprocess below: every case on the build where a signed overflow traps (SIGILL)."""
  for dt in DTYPES:
    for c in cases_of(dt): run(c, trap_ub=True)

def test_table_edge_cases_have_no_signed_overflow_in_cuda_text():
  # NOTE: NVRTC has no -fwrapv: the edge values (MIN, MAX, -1) of every op must not overflow a signed type in the text
  code = "from tests.nv.test_semantics_cuda_host import run_all_trapping; run_all_trapping()"
  p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
  assert p.returncode == 0, f"rc {p.returncode} (-4: a signed overflow trapped): {p.stderr[-3000:]}"
