"""The one semantics table (tinygrad/uop/semantics.py) against the CUDA renderer's text, compiled on the host as C++ with
the CUDA shim (tinygrad/runtime/support/cuda_host.py): the cases of the C cross-check (tests/uop/
test_semantics_crosscheck.py), every kernel rendered by CUDARenderer and all of them built in one compile. This checks
what the text means (guards, casts, conversions); a GPU run (make test-gpu) checks what the hardware does with it."""
import functools
import numpy as np
import pytest
from tinygrad.codegen import get_program
from tinygrad.dtype import DType
from tinygrad.renderer.cuda import CUDARenderer
from tinygrad.runtime.support.cuda_host import HostLibrary, build_host_library, host_refusal
from tinygrad.runtime.support.cuda_toolchain import rename_kernel
from tests.uop.test_semantics_crosscheck import DTYPES, Case, c_results, cases_of, check_outputs

@functools.cache
def cuda_host() -> tuple[HostLibrary, dict[str, object]]:
  cases, _ = c_results()
  ren = CUDARenderer("sm_90")
  prgs = {c.name: get_program(c.ast, ren, opts=[]) for c in cases}
  refused = {n: why for n, p in prgs.items() if (why := host_refusal(p.src)) is not None}
  assert not refused, f"the host shim cannot run: {refused}"
  return HostLibrary(build_host_library([rename_kernel(p.src, n) for n, p in prgs.items()])), prgs

def run(c: Case) -> list[np.ndarray]:
  lib, prgs = cuda_host()
  p = prgs[c.name]
  bufs = c.buffers()
  gs, ls = p.launch_dims({})
  lib.run(c.name, [bufs[i].ctypes.data for i in p.globals], [], gs, ls or [1, 1, 1])
  return c.outputs(bufs)

@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_table_matches_cuda_text_on_the_host(dt: DType):
  errors = [e for c in cases_of(dt) for e in check_outputs(c, run(c))]
  assert not errors, "\n".join(errors)
