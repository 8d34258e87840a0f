"""The default opts on GPU targets (tinygrad/codegen/heuristic.py): a kernel on NV or AMD uses the launch grid,
workgroups, group reductions and upcasts a GPU needs; a reduction or a matmul is not one thread per output with a serial
loop. The opts are read from the renderer objects (no device needed); the chosen programs compile with the real
toolchains (NVRTC + ptxas, llvmlite + LLD) and compute the right values on the PYTHON backend."""
import numpy as np
import pytest
from tinygrad import Tensor
from tinygrad.codegen import get_program
from tinygrad.codegen.heuristic import GPU_TARGET_THREADS
from tinygrad.codegen.opt import Opt, OptOps
from tinygrad.device import Buffer, Device
from tinygrad.dtype import PtrDType
from tinygrad.helpers import prod
from tinygrad.renderer.cuda import CUDARenderer
from tinygrad.renderer.llvmir import AMDLLVMRenderer
from tinygrad.runtime.ops_python import PythonRenderer
from tinygrad.uop import Ops

U, L, G, GT, R = OptOps.UPCAST, OptOps.LOCAL, OptOps.GROUP, OptOps.GROUPTOP, OptOps.UNROLL
RENDERERS = {"sm_90": lambda: CUDARenderer("sm_90"), "gfx1100": lambda: AMDLLVMRenderer("gfx1100"),
             "gfx942": lambda: AMDLLVMRenderer("gfx942")}

def _f32(*shape): return Tensor(np.zeros(shape, np.float32))
def _one_sum(t: Tensor) -> Tensor:
  # NOTE: one reduce kernel, as a GPU device schedules it: on the CPU device (where these ASTs are scheduled) a sum this
  # big to one element is split into partial sums (tensor.FULL_SUM_SPLIT_MIN)
  import tinygrad.tensor as tensor_mod
  was, tensor_mod.FULL_SUM_SPLIT_MIN = tensor_mod.FULL_SUM_SPLIT_MIN, 1 << 62
  try: return t.sum()
  finally: tensor_mod.FULL_SUM_SPLIT_MIN = was
SHAPES = {
  "elementwise": lambda: _f32(4096, 4096) + _f32(4096, 4096),
  "sum_long_axis": lambda: _f32(4096, 4096).sum(1),
  "sum_all": lambda: _one_sum(_f32(1 << 22)),
  "sum_strided": lambda: _f32(4096, 4096).sum(0),
  "matmul_512": lambda: _f32(512, 512) @ _f32(512, 512),
  "gemv": lambda: _f32(1, 4096) @ _f32(4096, 4096),
  "thin_matmul": lambda: _f32(8192, 1024) @ _f32(1024, 16),
}

def _ast(name): return SHAPES[name]().schedule()[-1].ast
def _threads(p) -> int: return int(prod(p.global_size) * prod(p.local_size or [1]))
def _block(p) -> int: return int(prod(p.local_size or [1]))
def _smem(p) -> int:
  return sum(u.dtype.nbytes() for u in p.uops if u.op is Ops.DEFINE_LOCAL and isinstance(u.dtype, PtrDType))
def _ops(p) -> list: return [o.op for o in p.applied_opts]

# ---- the opts chosen on sm_90 (pinned: a change here is a deliberate change of the GPU heuristics) ----

@pytest.mark.parametrize("name,opts", [
  ("elementwise", [Opt(U, 1, 4), Opt(L, 1, 64), Opt(L, 0, 4)]),
  ("sum_long_axis", [Opt(G, 0, 32), Opt(R, 0, 4), Opt(L, 0, 8)]),
  ("sum_all", [Opt(G, 0, 256), Opt(R, 0, 4)]),
  ("sum_strided", [Opt(U, 0, 4), Opt(GT, 0, 8), Opt(R, 0, 4), Opt(L, 0, 8)]),
  ("matmul_512", [Opt(U, 1, 4), Opt(U, 0, 4), Opt(R, 0, 4), Opt(L, 1, 32), Opt(L, 0, 4)]),
  ("gemv", [Opt(U, 0, 4), Opt(GT, 0, 8), Opt(R, 0, 4), Opt(L, 0, 8)]),
  ("thin_matmul", [Opt(U, 1, 4), Opt(U, 0, 4), Opt(GT, 0, 4), Opt(R, 0, 4), Opt(L, 1, 4), Opt(L, 0, 8)]),
])
def test_opts_chosen_on_sm_90(name, opts):
  assert list(get_program(_ast(name), CUDARenderer("sm_90")).applied_opts) == opts

# ---- what every GPU target gets ----

@pytest.mark.parametrize("arch", RENDERERS)
def test_elementwise_uses_grid_workgroups_and_vectors(arch):
  ren = RENDERERS[arch]()
  p = get_program(_ast("elementwise"), ren)
  assert U in _ops(p) and len(p.global_size) >= 2 and prod(p.global_size) >= 1024
  assert _block(p) >= 2 * ren.wave and _block(p) % ren.wave == 0 and _threads(p) == 4096 * 4096 // 4

@pytest.mark.parametrize("arch", RENDERERS)
def test_reduce_over_a_long_contiguous_axis_is_a_group_reduce(arch):
  # 4096 outputs of a 4096-long contiguous reduce: a group of at least a wave per output reads whole cache lines
  ren = RENDERERS[arch]()
  p = get_program(_ast("sum_long_axis"), ren)
  group = next(o.arg for o in p.applied_opts if o.op is G)
  assert group >= ren.wave and _threads(p) >= GPU_TARGET_THREADS and _block(p) % ren.wave == 0
  assert 0 < _smem(p) <= ren.shared_max

@pytest.mark.parametrize("arch", RENDERERS)
def test_full_reduce_spreads_over_a_workgroup(arch):
  ren = RENDERERS[arch]()
  p = get_program(_ast("sum_all"), ren)
  assert Opt(G, 0, 256) in p.applied_opts and _block(p) == 256 and 0 < _smem(p) <= ren.shared_max

@pytest.mark.parametrize("arch", RENDERERS)
@pytest.mark.parametrize("name", ["sum_strided", "gemv", "thin_matmul"])
def test_few_outputs_with_a_strided_reduce_group_at_the_top(arch, name):
  # the reduce reads with a stride: each thread of the group a block of it, the output axis' threads coalescing
  ren = RENDERERS[arch]()
  p = get_program(_ast(name), ren)
  assert GT in _ops(p) and L in _ops(p) and U in _ops(p)
  assert _threads(p) >= GPU_TARGET_THREADS // 4 and 0 < _smem(p) <= ren.shared_max

@pytest.mark.parametrize("arch", RENDERERS)
def test_matmul_is_register_blocked_over_a_full_grid(arch):
  ren = RENDERERS[arch]()
  p = get_program(_ast("matmul_512"), ren)
  ups = [o.arg for o in p.applied_opts if o.op is U]
  # 4x4 outputs per thread (each loaded value used 4 times), workgroups a multiple of the wave, >= 128 blocks
  assert sorted(ups) == [4, 4] and G not in _ops(p) and GT not in _ops(p)
  assert _block(p) % ren.wave == 0 and prod(p.global_size) >= 128 and _threads(p) * 16 == 512 * 512

@pytest.mark.parametrize("arch", RENDERERS)
@pytest.mark.parametrize("name", list(SHAPES))
def test_shared_memory_and_workgroup_within_the_arch_limits(arch, name):
  ren = RENDERERS[arch]()
  p = get_program(_ast(name), ren)
  assert _smem(p) <= ren.shared_max and _block(p) <= ren.local_max_total
  assert all(g <= m for g, m in zip(p.global_size, ren.global_max))

def test_wave64_sizes_workgroups_in_wavefronts():
  p = get_program(_ast("sum_long_axis"), AMDLLVMRenderer("gfx942"))
  assert Opt(G, 0, 64) in p.applied_opts and _block(p) % 64 == 0

# ---- the chosen programs compile and compute the right values ----

def test_chosen_programs_compile_with_nvrtc_and_ptxas():
  from tinygrad.runtime.support.cuda_toolchain import NVBinary, NVCompiler
  comp = NVCompiler("sm_90")
  for name in SHAPES:
    b = NVBinary.unpack(comp.compile(get_program(_ast(name), CUDARenderer("sm_90")).src))
    assert b.cubin[:4] == b"\x7fELF", name

@pytest.fixture
def amd_linker():
  from tinygrad.device import DeviceOpenError
  from tinygrad.runtime.support.compiler_amd import find_linker
  try: return find_linker()
  except DeviceOpenError as e: pytest.skip(str(e))

@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
def test_chosen_programs_compile_for_amd(arch, amd_linker):
  from tinygrad.runtime.support.compiler_amd import AMDCompiler
  from tests.amd.checks import check_code_object
  comp = AMDCompiler(arch)
  for name in ("sum_long_axis", "sum_strided", "matmul_512", "thin_matmul"):
    p = get_program(_ast(name), AMDLLVMRenderer(arch))
    info = check_code_object(comp.compile(p.src), p, arch)
    assert info.lds >= _smem(p) > 0 or name == "matmul_512", name

SMALL = {  # the same kinds of kernel, small enough for the interpreter, shapes that still group and block
  "sum_long_axis": ((64, 1024), lambda a: a.sum(1), lambda a: a.sum(1)),
  "sum_strided": ((512, 64), lambda a: a.sum(0), lambda a: a.sum(0)),
  "matmul": ((64, 64), lambda a: a @ a.T, lambda a: a @ a.T),
  "gemv": ((256, 128), lambda a: a[:1] @ a.reshape(128, 256), lambda a: a[:1] @ a.reshape(128, 256)),
  "thin": ((256, 128), lambda a: a @ a[:16].T, lambda a: a @ a[:16].T),
}

@pytest.mark.parametrize("arch", ["sm_90", "gfx942"])
@pytest.mark.parametrize("name", list(SMALL))
def test_chosen_opts_compute_the_right_values_on_python(arch, name):
  # the GPU target's own opts for each kernel, rendered for the PYTHON backend and executed there
  shape, fn, ref = SMALL[name]
  x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
  xt = Tensor(x).realize()
  t = fn(xt)
  sched = t.schedule()
  ren, py = RENDERERS[arch](), PythonRenderer("AMD" if arch.startswith("gfx") else "NV")
  dev = Device["PYTHON"]
  # NOTE: the input's buffer gets x, every other one starts as zeros (earlier kernels of the schedule fill them)
  bufs: dict = {}
  def on_python(src: Buffer) -> Buffer:
    if src not in bufs:
      data = x if src.is_allocated() else np.zeros(src.size, np.float32)
      bufs[src] = Buffer("PYTHON", src.size, src.dtype).ensure_allocated().copyin(np.ascontiguousarray(data).data)
    return bufs[src]
  for si in sched:
    p = get_program(si.ast, ren)
    pp = get_program(si.ast, py, opts=p.applied_opts)
    assert pp.applied_opts == p.applied_opts and pp.global_size == p.global_size and pp.local_size == p.local_size
    args = [on_python(si.bufs[i])._buf for i in pp.globals]
    dev.runtime(pp.name, dev.compiler.compile(pp.src))(*args, global_size=pp.global_size, local_size=pp.local_size)
  out = np.frombuffer(bufs[sched[-1].bufs[0]].as_buffer(), np.float32).reshape(t.shape)
  np.testing.assert_allclose(out, ref(x), rtol=1e-4, atol=1e-4)

def test_small_kernels_on_python_still_group_and_block():
  # the interpreter-sized kernels above exercise the same opts as the big ones (else their values prove little)
  assert G in _ops(get_program(SMALL_AST("sum_long_axis"), CUDARenderer("sm_90")))
  assert GT in _ops(get_program(SMALL_AST("sum_strided"), CUDARenderer("sm_90")))
  assert GT in _ops(get_program(SMALL_AST("gemv"), CUDARenderer("sm_90")))
  assert [o.arg for o in get_program(SMALL_AST("matmul"), CUDARenderer("sm_90")).applied_opts if o.op is U] == [4, 4]

def SMALL_AST(name):
  shape, fn, _ = SMALL[name]
  return fn(Tensor(np.zeros(shape, np.float32)).realize()).schedule()[-1].ast
