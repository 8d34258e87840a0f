"""conv2d forward and backward on every GPU target (issue 31: their kernels had four local axes for three workgroup
dimensions, and no GPU target compiled them). Each shape: compiled for sm_80/89/90 (NVRTC + ptxas) and gfx942/1100/1201
(llvmlite + LLD, code object checked), with the default opts of each target keeping one workgroup dimension per local
axis (the lowering never has to merge them); realized with DEV=NV COMPILE_ONLY=1; and its values under each GPU
emulation (DEV=PYTHON EMULATE=...) and on CPU against torch. The default suite runs a diagonal: each shape on one arch
of each vendor and under one emulation, every arch and emulation on some shape; the rest is slow-marked
(`make test-ops-targets` runs all of it).

Each shape has two programs: the report's (the gradients of y.sum()) and one with a random cotangent; their kernels
differ (the report's four shapes failed with the first, only the last with the second)."""
import functools
import numpy as np
import pytest
import torch
from tinygrad import Tensor
from tinygrad.codegen import get_program
from tinygrad.codegen.opt import apply_opts
from tinygrad.codegen.program import prepare_kernel
from tinygrad.helpers import Context
from tinygrad.renderer.cuda import CUDARenderer
from tinygrad.renderer.llvmir import AMDLLVMRenderer
from tinygrad.uop import Ops

# (input, weight, groups): the shapes of issue 31
SHAPES = [((1, 8, 18, 18), (32, 8, 3, 3), 1), ((1, 16, 18, 18), (16, 16, 3, 3), 1), ((2, 16, 12, 12), (32, 16, 3, 3), 1),
          ((2, 32, 12, 12), (16, 16, 5, 5), 2)]
IDS = ["c8x32k3", "c16x16k3", "b2c16x32k3", "b2c32g2k5"]
NV_ARCHS, AMD_ARCHS = ["sm_80", "sm_89", "sm_90"], ["gfx942", "gfx1100", "gfx1201"]
EMULATE = ["NV", "AMD_GFX1100", "AMD_GFX1201", "AMD_GFX942"]

def _data(k: int):
  xs, ws, g = SHAPES[k]
  rng = np.random.default_rng(k)
  return rng.standard_normal(xs).astype(np.float32), rng.standard_normal(ws).astype(np.float32), g

def _conv(k: int, device: str, cot: bool) -> list[Tensor]:
  """y = conv2d(x, w) and the gradients of y.sum() (the report's program), or of sum(y * c) for a random cotangent c
  (a rule that mixes up elements shows), lazily."""
  xn, wn, g = _data(k)
  x, w = Tensor(xn, device=device, requires_grad=True), Tensor(wn, device=device, requires_grad=True)
  y = x.conv2d(w, groups=g)
  loss = (y * Tensor(_cotangent(k, y.shape), device=device)).sum() if cot else y.sum()
  return [y, *loss.gradient(x, w)]

def _cotangent(k: int, shape) -> np.ndarray:
  return np.random.default_rng(100 + k).standard_normal(shape).astype(np.float32)

@functools.lru_cache(None)
def _torch(k: int, cot: bool) -> list[np.ndarray]:
  xn, wn, g = _data(k)
  x, w = torch.tensor(xn, requires_grad=True), torch.tensor(wn, requires_grad=True)
  y = torch.nn.functional.conv2d(x, w, groups=g)
  loss = (y * torch.tensor(_cotangent(k, tuple(y.shape)))).sum() if cot else y.sum()
  return [t.detach().numpy() for t in (y, *torch.autograd.grad(loss, [x, w]))]

@functools.lru_cache(None)
def _asts(k: int) -> tuple:
  """The kernels of both programs (the report's and the cotangent's), each once."""
  asts: dict = {}
  for cot in (False, True):
    outs = _conv(k, "CPU", cot)
    asts.update((si.ast, None) for si in outs[0].schedule(*outs[1:]) if si.ast.op is Ops.SINK)
  return tuple(asts)

def _check(got: list[np.ndarray], k: int, cot: bool, where: str) -> None:
  for name, a, b in zip(("y", "dx", "dw"), got, _torch(k, cot)):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-3, err_msg=f"{where}: {name} of {IDS[k]}")

def _diag(archs, k: int, arch: str) -> tuple:
  # NOTE: the default suite compiles shape k for one arch of each vendor (every arch gets a shape); the rest is slow
  return () if archs.index(arch) == k % len(archs) else (pytest.mark.slow,)

def _no_merge(ren, ast, opts) -> None:
  # the heuristics' opts need neither a merge nor a split of local or global axes: the lowering rescues nothing
  from tinygrad.codegen.grid import LOCAL_TYPES, GLOBAL_TYPES, grid_plan, is_identity
  opted = apply_opts(prepare_kernel(ast), opts, ren)
  for types, limits in ((LOCAL_TYPES, ren.local_max), (GLOBAL_TYPES, ren.global_max)):
    axes, plan = grid_plan(opted, types, limits)
    assert plan is not None and is_identity(plan), (ren.arch, [int(x.src[0].arg) for x in axes], opts)

@pytest.mark.parametrize("arch,k", [pytest.param(a, k, id=f"{a}-{IDS[k]}", marks=_diag(NV_ARCHS, k, a))
                                    for a in NV_ARCHS for k in range(len(SHAPES))])
def test_conv_fwd_bwd_compiles_for_nv_with_one_dimension_per_axis(arch, k):
  from tinygrad.runtime.support.cuda_toolchain import NVCompiler, rename_kernel
  ren, srcs = CUDARenderer(arch), []
  for i, a in enumerate(_asts(k)):
    p = get_program(a, ren)
    _no_merge(ren, a, p.applied_opts)
    srcs.append(rename_kernel(p.src, f"k{i}_{p.name}"))
  errs = [e for e in NVCompiler(arch).verify(srcs) if e is not None]
  assert not errs, errs[0][:3000]

@pytest.mark.parametrize("arch,k", [pytest.param(a, k, id=f"{a}-{IDS[k]}", marks=_diag(AMD_ARCHS, k, a))
                                    for a in AMD_ARCHS for k in range(len(SHAPES))])
def test_conv_fwd_bwd_compiles_for_amd_with_one_dimension_per_axis(arch, k):
  from tinygrad.runtime.support.compiler_amd import AMDCompiler, find_linker
  from tests.amd.checks import check_code_object
  find_linker()
  ren, comp = AMDLLVMRenderer(arch), AMDCompiler(arch)
  for a in _asts(k):
    p = get_program(a, ren)
    _no_merge(ren, a, p.applied_opts)
    check_code_object(comp.compile(p.src), p, arch)

@pytest.mark.parametrize("k", [pytest.param(k, id=IDS[k], marks=() if k == 0 else pytest.mark.slow)
                               for k in range(len(SHAPES))])
def test_conv_fwd_bwd_realizes_with_compile_only_on_nv(monkeypatch, k):
  # the path of the report: DEV=NV COMPILE_ONLY=1 realize() (no driver needed)
  from tinygrad.runtime.support import cuda_driver
  monkeypatch.setattr(cuda_driver, "LIBCUDA_NAMES", ("libcuda-that-does-not-exist.so.1",))
  with Context(COMPILE_ONLY=1): Tensor.realize(*_conv(k, "NV", cot=False))

@pytest.mark.parametrize("k,cot", [pytest.param(k, cot, id=f"{IDS[k]}-{'cot' if cot else 'sum'}",
                                                marks=() if k == 0 and not cot else pytest.mark.slow)
                                   for k in range(len(SHAPES)) for cot in (False, True)])
def test_conv_fwd_bwd_values_on_cpu(k, cot):
  _check([t.numpy() for t in _conv(k, "CPU", cot)], k, cot, "CPU")

_CASES = [pytest.param(emu, k, cot, id=f"{emu}-{IDS[k]}-{'cot' if cot else 'sum'}",
                       marks=() if i == k and not cot else pytest.mark.slow)
          for i, emu in enumerate(EMULATE) for k in range(len(SHAPES)) for cot in (False, True)]

@pytest.mark.parametrize("emu,k,cot", _CASES)
def test_conv_fwd_bwd_values_under_emulation(emu, k, cot):
  # the target renderer's exact programs (its opts, its grid) run on the interpreter
  with Context(EMULATE=emu):
    _check([t.numpy() for t in _conv(k, "PYTHON", cot)], k, cot, f"PYTHON EMULATE={emu}")
