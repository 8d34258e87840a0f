"""The NV sweeps over the kernels of tests/tensor (captured once per run by running that suite on CPU with the capture
plugin, tests/nv/kernel_capture.py):
- every kernel rendered for sm_90, compiled by NVRTC and assembled by ptxas (batched; a failing batch is retried kernel
  by kernel so each error names its kernel): every 3rd kernel and every one with half, bfloat16 or fp8 here, all of
  them in the slow-marked test (`make test-nv`);
- a slice of them (every 16th kernel, and every one with half, bfloat16 or fp8) for sm_80 and sm_89 too;
- the rendered CUDA run on the host (C++ with our shim) against the C backend: every 8th kernel here, all of them in
  the slow-marked test (`make test-nv`)."""
import fcntl, os, time
import pytest
from tinygrad.codegen import get_program
from tinygrad.renderer.cuda import CUDARenderer
from tinygrad.runtime.support.cuda_toolchain import NVCompiler, rename_kernel
from tests.nv.kernel_capture import capture_kernels, load_kernels
from tests.nv.hostdiff import diff_asts

# NOTE: the capture runs tests/tensor once (about a minute on a quiet machine with a cold compile cache) and the full
# sm_90 sweep renders and compiles every kernel; on a loaded machine both take several times longer than usual
pytestmark = pytest.mark.timeout(1800)

@pytest.fixture(scope="session")
def tensor_suite_kernels(tmp_path_factory):
  # NOTE: xdist workers share one capture per run: a file in the run's temp dir (the parent of each worker's), under a lock
  base = tmp_path_factory.getbasetemp()
  root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
  path = root / "nv_tensor_suite_kernels.txt"
  with open(root / "nv_tensor_suite_kernels.lock", "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    if not path.exists():
      st = time.perf_counter()
      capture_kernels(["tests/tensor"], out=str(path))
      print(f"\ncaptured the kernels of tests/tensor in {time.perf_counter() - st:.1f} s")
  kernels = load_kernels(str(path))
  # NOTE: a capture that silently found nothing would make every sweep below pass vacuously
  assert len(kernels) > 200, f"only {len(kernels)} kernels captured from tests/tensor"
  return kernels

def _sources(asts, arch):
  ren = CUDARenderer(arch)
  return [rename_kernel((p := get_program(a, ren)).src, f"k{i}_{p.name}") for i, a in enumerate(asts)]

def _check(asts, arch):
  st = time.perf_counter()
  srcs = _sources(asts, arch)
  t_render = time.perf_counter() - st
  errs = NVCompiler(arch).verify(srcs)
  print(f"\n{arch}: {len(srcs)} kernels rendered in {t_render:.1f} s, NVRTC + ptxas in {time.perf_counter() - st - t_render:.1f} s")
  failed = [e for e in errs if e is not None]
  assert not failed, f"{len(failed)} of {len(srcs)} kernels failed for {arch}; the first:\n{failed[0][:6000]}"

def _slice(kernels: list, every: int) -> list:
  wide = [a for a in kernels if any(d in str(a) for d in ("float16", "bfloat16", "fp8"))]
  return list(dict.fromkeys(kernels[::every] + wide))

def test_tensor_suite_slice_compiles_for_sm90(tensor_suite_kernels):
  _check(_slice(tensor_suite_kernels, 3), "sm_90")

@pytest.mark.slow
def test_every_tensor_suite_kernel_compiles_for_sm90(tensor_suite_kernels):
  _check(tensor_suite_kernels, "sm_90")

@pytest.mark.parametrize("arch", ["sm_80", "sm_89"])
def test_tensor_suite_slice_compiles_for_other_archs(tensor_suite_kernels, arch):
  _check(_slice(tensor_suite_kernels, 16), arch)

def _diff(asts):
  rep = diff_asts(asts)
  print(f"\nhost CUDA vs C: {rep.checked} kernels checked in {rep.seconds:.1f} s, {len(rep.refused)} left out "
        f"(shared memory, barriers or tensor cores)")
  assert rep.checked > len(asts) // 2, f"only {rep.checked} of {len(asts)} kernels could run on the host shim: {rep.refused}"
  assert not rep.mismatches, f"{len(rep.mismatches)} kernels differ; the first:\n{rep.mismatches[0][:8000]}"

def test_rendered_cuda_matches_c_backend_slice(tensor_suite_kernels):
  _diff(tensor_suite_kernels[::8])

@pytest.mark.slow
def test_rendered_cuda_matches_c_backend_all(tensor_suite_kernels):
  _diff(tensor_suite_kernels)
