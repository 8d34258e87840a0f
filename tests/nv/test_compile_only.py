"""COMPILE_ONLY=1: realize() schedules, lowers and compiles every kernel with the real toolchain and runs nothing; NV
opens without a driver; reading a result raises NotComputedError; BEAM refuses; DEBUG=2 reports each kernel."""
import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.device import Device, NotComputedError, CompileOnlyAllocator
from tinygrad.helpers import Context
from tinygrad.runtime.support import cuda_driver
from tinygrad.runtime.support.cuda_toolchain import NVCompiler

@pytest.fixture
def no_driver(monkeypatch):
  # NOTE: as on a laptop or a CI runner: no libcuda to load
  monkeypatch.setattr(cuda_driver, "LIBCUDA_NAMES", ("libcuda-that-does-not-exist.so.1",))

def test_nv_opens_without_a_driver_and_compiles(no_driver, capsys):
  with Context(COMPILE_ONLY=1, DEBUG=2):
    dev = Device["NV"]
    assert dev.arch == "sm_90" and isinstance(dev.allocator, CompileOnlyAllocator) and isinstance(dev.compiler, NVCompiler)
    a = Tensor(np.arange(256, dtype=np.float32).reshape(16, 16), device="NV")
    out = ((a @ a).relu() + a.cast(dtypes.half).exp2().cast(dtypes.float32)).sum(1)
    out.realize()
    (a.max(0) - a.mean()).realize()
  lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("*** NV")]
  assert len(lines) >= 2
  for ln in lines: assert "compiled sm_90 regs" in ln and "spills" in ln and "smem" in ln and "grid [" in ln and "block [" in ln
  assert dev.compiler.compiles + dev.compiler.cache_hits >= len(lines)

def test_reading_a_result_says_nothing_ran(no_driver):
  with Context(COMPILE_ONLY=1):
    a = Tensor([1.0, 2.0, 3.0], device="NV")
    b = (a * 2).realize()
    with pytest.raises(NotComputedError, match=r"holds no values: COMPILE_ONLY=1 compiled kernel \w+ that writes it.*Nothing ran"):
      b.numpy()
    with pytest.raises(NotComputedError): b.tolist()
    # the input was copied in, not computed: it reads back
    np.testing.assert_array_equal(a.numpy(), [1, 2, 3])

def test_not_computed_follows_copies_and_in_place_updates(no_driver):
  with Context(COMPILE_ONLY=1):
    a = Tensor([1.0, 2.0], device="NV")
    a += 1
    a.realize()
    with pytest.raises(NotComputedError): a.numpy()
    with pytest.raises(NotComputedError): a.to("CPU").numpy()

def test_whole_model_compiles_for_another_arch(no_driver, capsys):
  from tinygrad.nn import Linear
  with Context(COMPILE_ONLY=1, NV_ARCH="sm_80", DEBUG=2, DEV="NV"):
    Tensor.manual_seed(0)
    l1, l2 = Linear(32, 64), Linear(64, 10)
    loss = l2(l1(Tensor.randn(8, 32)).relu()).log_softmax().mean()
    loss.backward()
    Tensor.realize(loss, l1.weight.grad, l2.bias.grad)
  out = capsys.readouterr().out
  assert "compiled sm_80" in out and "compiled sm_90" not in out

def test_beam_under_compile_only_says_it_needs_a_device(no_driver):
  with Context(COMPILE_ONLY=1, BEAM=2):
    with pytest.raises(RuntimeError, match="BEAM=2 times candidate kernels on the device.*COMPILE_ONLY=1 runs nothing"):
      (Tensor([1.0, 2.0], device="NV") + 1).realize()

def test_compile_only_is_generic_cpu_too():
  with Context(COMPILE_ONLY=1):
    t = (Tensor([1.0, 2.0], device="CPU") * 3).realize()
    with pytest.raises(NotComputedError): t.numpy()
  np.testing.assert_array_equal((Tensor([1.0, 2.0], device="CPU") * 4).numpy(), [4, 8])

def test_compile_only_runner_runs_later_without_compile_only():
  from tinygrad.engine.realize import get_runner
  si = (Tensor([1.0, 2.0], device="CPU") * 5).schedule()[-1]
  with Context(COMPILE_ONLY=1):
    r = get_runner("CPU", si.ast)
    with pytest.raises(RuntimeError, match="COMPILE_ONLY=1 compiles kernels and never runs them"): r(list(si.bufs), {})
  np.testing.assert_array_equal((Tensor([1.0, 2.0], device="CPU") * 5).numpy(), [5, 10])

def test_nv_compile_only_program_checks_and_refuses_to_run(no_driver):
  with Context(COMPILE_ONLY=1):
    dev = Device["NV"]
    from tinygrad.codegen import get_program
    p = get_program((Tensor.ones(8, device="NV").contiguous() + 1).schedule()[-1].ast, dev.renderer)
    prg = dev.runtime(p.name, dev.compiler.compile(p.src))
    with pytest.raises(RuntimeError, match=f"COMPILE_ONLY=1: kernel {p.name} was compiled for sm_90; nothing is loaded"):
      prg(0, 0, global_size=(1, 1, 1))
    with pytest.raises(RuntimeError, match="the PTX has no entry"): dev.runtime("other_name", dev.compiler.compile(p.src))

def test_compile_error_on_nv_names_the_kernel(no_driver, monkeypatch):
  from tinygrad.renderer.cuda import CUDARenderer
  monkeypatch.setattr(CUDARenderer, "render_barrier", lambda self: "this is not CUDA;")
  with Context(COMPILE_ONLY=1):
    with pytest.raises(RuntimeError, match="run_schedule: item .* failed: CompileError: NVRTC .* could not compile"):
      Tensor.ones(4096, device="NV").contiguous().sum().realize()

def test_beam_search_under_compile_only_refuses_before_its_cache(no_driver, tmp_path):
  from tinygrad.codegen.search import BeamNeedsDeviceError, beam_search
  from tinygrad.renderer.cuda import CUDARenderer
  ast = (Tensor(np.zeros((16, 16), np.float32)) @ Tensor(np.zeros((16, 16), np.float32))).schedule()[-1].ast
  with Context(COMPILE_ONLY=1, CACHEDB=str(tmp_path / "c.db")):
    with pytest.raises(BeamNeedsDeviceError, match="BEAM=2 times candidate kernels.*COMPILE_ONLY=1 runs nothing"):
      beam_search(ast, CUDARenderer("sm_90"), 2)

def test_beam_without_a_device_says_it_needs_one(no_driver, monkeypatch, tmp_path):
  from tinygrad.codegen import get_program
  from tinygrad.codegen.search import BeamNeedsDeviceError
  from tinygrad.renderer.cuda import CUDARenderer
  monkeypatch.delitem(Device._opened, "NV", raising=False)
  ast = (Tensor(np.zeros((16, 16), np.float32)) @ Tensor(np.zeros((16, 16), np.float32))).schedule()[-1].ast
  with Context(BEAM=1, CACHEDB=str(tmp_path / "c.db")):
    with pytest.raises(BeamNeedsDeviceError, match="BEAM=1 times candidate kernels on the device NV, which does not open "
                                                   "here: .*libcuda.*Unset BEAM"):
      get_program(ast, CUDARenderer("sm_90"))
  assert "NV" not in Device._opened

def test_beam_on_a_compile_only_device_refuses(no_driver, monkeypatch, tmp_path):
  from tinygrad.codegen import get_program
  from tinygrad.codegen.search import BeamNeedsDeviceError
  from tinygrad.renderer.cuda import CUDARenderer
  monkeypatch.delitem(Device._opened, "NV", raising=False)
  ast = (Tensor(np.zeros((16, 16), np.float32)) @ Tensor(np.zeros((16, 16), np.float32))).schedule()[-1].ast
  try:
    with Context(COMPILE_ONLY=1): Device["NV"]
    with Context(BEAM=1, CACHEDB=str(tmp_path / "c.db")):
      with pytest.raises(BeamNeedsDeviceError, match="opened under COMPILE_ONLY=1"): get_program(ast, CUDARenderer("sm_90"))
  finally: Device._opened.pop("NV", None)
