"""The OpInfo harness (tests/ops/opinfo) on the GPU targets' exact programs and on the CPU's LLVM path: the PYTHON
device emulating NV, AMD_GFX1100, AMD_GFX1201 and AMD_GFX942 (each target's renderer, heuristics and grid, run on the
interpreter), and CPU_LLVM=1. A slice here, each target with other ops (convolutions, pooling, matmul, reductions,
scans, indexing); the whole harness on each target is `make test-ops-targets`."""
import pytest
import torch
from tinygrad.device import Device
from tinygrad.helpers import Context
from tinygrad.uop import hooks
from tests.ops.opinfo.driver import adapters, opinfos, run_op
from tests.llvm_device import llvm_cpu_device

_OPS, _ADS = opinfos(), adapters()
# target -> (device, the flags it opens and runs under)
TARGETS = {"NV": ("PYTHON", {"EMULATE": "NV"}), "AMD_GFX1100": ("PYTHON", {"EMULATE": "AMD_GFX1100"}),
           "AMD_GFX1201": ("PYTHON", {"EMULATE": "AMD_GFX1201"}), "AMD_GFX942": ("PYTHON", {"EMULATE": "AMD_GFX942"}),
           "LLVM": ("", {})}
SLICE = {"NV": ["nn.functional.conv2d", "softmax"], "AMD_GFX1100": ["nn.functional.avg_pool2d", "cumsum"],
         "AMD_GFX1201": ["matmul", "nn.functional.layer_norm"], "AMD_GFX942": ["nn.functional.conv2d", "sum"],
         "LLVM": ["nn.functional.max_pool2d", "gather"]}

@pytest.fixture
def on_target(request):
  dev, flags = TARGETS[request.param]
  # NOTE: the LLVM path is a CPU device of its own opened under CPU_LLVM=1 (not the default CPU, whose runner cache
  # other tests of this worker fill: its kernels would not be compiled again, so no renderer would be seen)
  if request.param == "LLVM": dev = llvm_cpu_device(own=True)
  with Context(**flags):
    if request.param == "LLVM": assert type(Device[dev].renderer).__name__ == "CPULLVMRenderer"
    # NOTE: reset to None (follow DEV=), not to the value read before: that would pin the default for later tests
    Device.DEFAULT = dev
    try: yield dev
    finally: Device.DEFAULT = None

@pytest.mark.parametrize("on_target,name", [(t, n) for t, ns in SLICE.items() for n in ns], indirect=["on_target"])
def test_opinfo_slice_on_target(on_target, name):
  renderers: set[str] = set()
  def seen(ast, spec, renderer): renderers.add(renderer.identity)
  hooks.register("compiled", seen)
  try: r = run_op(_OPS[name], _ADS[name], torch.float32)
  finally: hooks.unregister("compiled", seen)
  # the kernels were compiled with the target's renderer (an emulation's arch is in its identity), and only with it
  assert renderers == {Device[on_target].renderer.identity}, renderers
  assert not r.failed, f"{len(r.failed)} of {r.passed + len(r.failed)} samples failed on {on_target}:\n" + \
    "\n".join(f"  {s}\n    {e}" for s, e in r.failed[:5])
  assert r.passed, f"no sample ran (skipped: {dict(r.skipped)})"
