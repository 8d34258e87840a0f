"""The CUDA renderer: signature, grid mapping, shared memory and barriers, vectors only where aligned, per-arch limits,
and what the text means (run on the host with the shim: NaN-correct max, conversions that round once, fp8 saturation)."""
import math
import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp
from tinygrad.dtype import AddrSpace
from tinygrad.codegen import get_program
from tinygrad.codegen.linearize import line_rewrite
from tinygrad.codegen.opt import Opt, OptOps
from tinygrad.renderer.cuda import CUDARenderer, NVLimitError, NV_ARCHS, known_pow2, vector_access_aligned
from tinygrad.runtime.support.cuda_host import HostLibrary, build_host_library
from tinygrad.runtime.support.cuda_toolchain import NVCompiler, NVBinary

i32, f32 = dtypes.int32, dtypes.float32

# ---- hand-built programs (docs/ir.md section 3) ----

def linear(*roots):
  placed = {}
  for r in roots:
    for u in r.toposort(): placed.setdefault(u, None)
  return line_rewrite(list(placed))
def gbuf(n, i, dt=f32): return UOp(Ops.DEFINE_GLOBAL, dt.ptr(n), arg=i)
def c(v, dt=i32): return UOp.const(dt, v)
def special(n, name): return UOp.special(c(n), name, dtype=i32)
def render(uops, arch="sm_90", name="k"): return CUDARenderer(arch).render(uops, name=name)

def run_host(src, bufs, gsz=(1, 1, 1), lsz=(1, 1, 1), vals=()):
  HostLibrary(build_host_library([src])).run("k", [b.ctypes.data for b in bufs], vals, gsz, lsz)

def unary_program(src_dt, dst_dt, fn, n=8):
  """out[i] = fn(in[i]) over one block of n threads."""
  out, a = gbuf(n, 0, dst_dt), gbuf(n, 1, src_dt)
  lid = special(n, "lidx0")
  return linear(out.index(lid).store(fn(a.index(lid).load())))

# ---- the kernel line ----

def test_signature_buffers_by_number_then_vars_by_name():
  b0, b1 = gbuf(16, 0), gbuf(16, 1)
  vb, va = UOp.variable("b", 1, 16, dtypes.int32), UOp.variable("a", 1, 16, dtypes.int32)
  i = special(16, "lidx0")
  st = b0.index(i).store(b1.index(i).load() + (va + vb).cast(f32))
  src = render(linear(vb, va, b1, b0, st))
  assert 'extern "C" __global__ void __launch_bounds__(16) k(float* data0, float* data1, int a, int b) {' in src

def test_grid_ids_map_to_block_and_thread_xyz():
  out = gbuf(2 * 3 * 4 * 5 * 2 * 2, 0, i32)
  g0, g1, g2 = special(2, "gidx0"), special(3, "gidx1"), special(2, "gidx2")
  l0, l1 = special(4, "lidx0"), special(5, "lidx1")
  i = ((((g2 * c(3) + g1) * c(2) + g0) * c(5) + l1) * c(4) + l0)
  src = render(linear(out.index(i).store(c(1))))
  for s, expect in (("gidx0", "blockIdx.x"), ("gidx1", "blockIdx.y"), ("gidx2", "blockIdx.z"), ("lidx0", "threadIdx.x"),
                    ("lidx1", "threadIdx.y")):
    assert f"((int){expect})" in src, s
  assert "__launch_bounds__(20)" in src

def test_innermost_axis_is_blockidx_x_through_codegen():
  # the lowerer numbers grid axes innermost first: the contiguous axis of a (3, 1000) elementwise kernel is gidx0 -> x
  si = (Tensor.ones(3, 1000).contiguous() + 1).schedule()[-1]
  p = get_program(si.ast, CUDARenderer(), opts=[])
  assert p.global_size[0] == 1000 and p.global_size[1] == 3
  assert "blockIdx.x" in p.src and "blockIdx.y" in p.src

def test_group_reduce_uses_shared_memory_and_syncthreads():
  si = Tensor.ones(4096).contiguous().sum().schedule()[-1]
  p = get_program(si.ast, CUDARenderer(), opts=[Opt(OptOps.GROUPTOP, 0, 64)])
  assert "__shared__ __align__(16) float smem0[64];" in p.src and "__syncthreads();" in p.src
  assert "__launch_bounds__(64)" in p.src and p.local_size == [64, 1, 1]
  b = NVBinary.unpack(NVCompiler("sm_90").compile(p.src))
  assert b.report.smem == 256

# ---- vectors only where aligned ----

def test_known_pow2_from_index_structure():
  g = special(64, "gidx0")
  assert known_pow2(g * c(4)) == 2 and known_pow2(g * c(4) + c(8)) == 2 and known_pow2(g * c(4) + c(2)) == 1
  assert known_pow2(g) == 0 and known_pow2(c(0)) >= 30 and known_pow2((g << c(3)) + c(16)) == 3
  assert known_pow2(g * c(12) + c(8)) == 2

def _vec_copy(offset: int):
  out, a = gbuf(260, 0), gbuf(260, 1)
  i = special(64, "gidx0") * c(4) + c(offset)
  v = UOp(Ops.INDEX, a.dtype.vec(4), (a, i)).load(dtype=f32.vec(4))
  return linear(UOp(Ops.INDEX, out.dtype.vec(4), (out, special(64, "gidx0") * c(4))).store(v)), i

def test_vector_access_only_where_proven_aligned():
  uops, _ = _vec_copy(0)
  src = render(uops)
  assert "*((tg_float4*)(data1+" in src and "*((tg_float4*)(data0+" in src
  assert src.startswith("// tinygrad-nv align: data0=16 data1=16\n")
  uops, _ = _vec_copy(1)
  src = render(uops)
  # the load at 4*g+1 is split into elements, the store at 4*g stays a vector
  assert "(tg_float4*)(data1" not in src and "tg_float4{{(data1+" in src and "*((tg_float4*)(data0+" in src
  assert src.startswith("// tinygrad-nv align: data0=16\n")

@pytest.mark.parametrize("offset", [0, 1, 2])
def test_vector_copy_runs_on_host_at_any_offset(offset):
  uops, _ = _vec_copy(offset)
  src = render(uops)
  A, O = np.arange(260, dtype=np.float32), np.zeros(260, np.float32)
  run_host(src, [O, A], gsz=(64, 1, 1))
  np.testing.assert_array_equal(O[:256], A[offset:offset + 256])
  assert NVBinary.unpack(NVCompiler("sm_90").compile(src)).cubin[:4] == b"\x7fELF"

@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.half], ids=str)
def test_tensor_slice_at_an_odd_offset_loads_elements_and_stores_vectors(dt):
  # `x[1:] * 2` upcast by the heuristics: the load starts one element past an aligned address (4g+1, never a multiple
  # of the vector's alignment), so it goes element by element; the store at 4g is a vector
  x = Tensor(np.arange(4097).astype(dt.fmt))
  p = get_program((x[1:] * 2).schedule()[-1].ast, CUDARenderer("sm_90"))
  assert any(o.op is OptOps.UPCAST for o in p.applied_opts), p.applied_opts
  vec = CUDARenderer("sm_90").vector_name(dt.vec(4))
  assert f"*(({vec}*)(data0+" in p.src and f"(({vec}*)(data1" not in p.src, p.src
  assert p.src.startswith("// tinygrad-nv align: data0=") and "data1=" not in p.src.splitlines()[0]
  inp, out = np.arange(4097).astype(dt.fmt), np.zeros(4096, dt.fmt)
  gs, ls = p.launch_dims({})
  HostLibrary(build_host_library([p.src])).run(p.name, [out.ctypes.data, inp.ctypes.data], [], gs, ls or [1, 1, 1])
  np.testing.assert_array_equal(out, inp[1:] * 2)

def test_local_buffer_vector_access_is_aligned_and_reg_is_not():
  lb = UOp(Ops.DEFINE_LOCAL, f32.ptr(64, AddrSpace.LOCAL), arg=0)
  rg = UOp(Ops.DEFINE_REG, f32.ptr(64, AddrSpace.REG), arg=0)
  i = special(16, "lidx0") * c(4)
  assert vector_access_aligned(UOp(Ops.INDEX, lb.dtype.vec(4), (lb, i)))
  assert not vector_access_aligned(UOp(Ops.INDEX, rg.dtype.vec(4), (rg, i)))
  assert not vector_access_aligned(UOp(Ops.INDEX, lb.dtype.vec(4), (lb, i + c(2))))

# ---- limits ----

def test_grid_over_the_limit_is_a_clear_error():
  out = gbuf(70000 * 2, 0)
  i = special(70000, "gidx1") * c(2) + special(2, "gidx0")
  with pytest.raises(NVLimitError, match=r"gidx1 \(blockIdx.y\) is 70000 blocks, over the limit 65535"): render(linear(out.index(i).store(c(1.0, f32))))

def test_block_over_the_limit_is_a_clear_error():
  out = gbuf(4096, 0)
  with pytest.raises(NVLimitError, match=r"lidx0 \(threadIdx.x\) is 2048 threads, over the limit 1024"):
    render(linear(out.index(special(2048, "lidx0")).store(c(1.0, f32))))
  i = special(64, "lidx1") * c(32) + special(32, "lidx0")
  with pytest.raises(NVLimitError, match="2048 threads per block, over the limit 1024"): render(linear(out.index(i).store(c(1.0, f32))))

def test_shared_memory_over_the_limit_is_a_clear_error():
  lb = UOp(Ops.DEFINE_LOCAL, f32.ptr(16384, AddrSpace.LOCAL), arg=0)
  out = gbuf(16, 0)
  lid = special(16, "lidx0")
  st = lb.index(lid).store(c(1.0, f32))
  fin = out.index(lid).store(lb.after(UOp(Ops.BARRIER, src=(st,))).index(lid).load())
  with pytest.raises(NVLimitError, match="65536 bytes of shared memory.*49152-byte limit.*sm_80"): render(linear(fin), "sm_80")
  assert NV_ARCHS["sm_90"].shared_optin > NV_ARCHS["sm_80"].shared_optin > NV_ARCHS["sm_89"].shared_optin

# ---- what the text means, run on the host ----

def test_max_propagates_nan():
  out, a, b = gbuf(4, 0), gbuf(4, 1), gbuf(4, 2)
  lid = special(4, "lidx0")
  src = render(linear(out.index(lid).store(a.index(lid).load().maximum(b.index(lid).load()))))
  A = np.array([np.nan, 1, -np.inf, 2], np.float32)
  B = np.array([1, np.nan, 3, np.nan], np.float32)
  O = np.zeros(4, np.float32)
  run_host(src, [O, A, B], lsz=(4, 1, 1))
  np.testing.assert_array_equal(O, np.maximum(A, B))

def test_double_to_half_rounds_once():
  x = 1 + 2**-11 + 2**-30   # through float it rounds to 1 + 2**-11, a tie that rounds to 1.0; directly it is 1 + 2**-10
  src = render(unary_program(dtypes.float64, dtypes.float16, lambda v: v.cast(dtypes.float16), 1))
  assert "__double2half(" in src
  O, A = np.zeros(1, np.float16), np.array([x], np.float64)
  run_host(src, [O, A], lsz=(1, 1, 1))
  assert O[0] == np.float16(1 + 2**-10) == np.array([x]).astype(np.float16)[0]

def test_int64_to_bfloat16_goes_through_float32():
  # docs/ir.md section 5: into bfloat16 every conversion goes through float32 (as C, LLVM and the semantics table do)
  x = 2**24 + 2**16 + 1   # to float: 2**24 + 2**16, a tie that rounds to 2**24 in bfloat16 (directly: 2**24 + 2**17)
  src = render(unary_program(dtypes.int64, dtypes.bfloat16, lambda v: v.cast(dtypes.bfloat16), 1))
  assert "__float2bfloat16_rn((float)(" in src
  O, A = np.zeros(1, np.uint16), np.array([x], np.int64)
  run_host(src, [O, A], lsz=(1, 1, 1))
  assert (O.astype(np.uint32) << 16).view(np.float32)[0] == 2**24

def test_fp8_conversions_saturate_e4m3_and_overflow_e5m2():
  vals = np.array([1000.0, -1000.0, 448.0, 464.0, 0.1, np.inf, 1e-9, np.nan], np.float32)
  for dt, ref in ((dtypes.fp8e4m3, [448, -448, 448, 448, 0.1015625, 448, 0, np.nan]),
                  (dtypes.fp8e5m2, [1024, -1024, 448, 448, 0.09375, np.inf, 0, np.nan])):
    src = render(unary_program(f32, f32, lambda v: v.cast(dt).cast(f32), 8))
    O = np.zeros(8, np.float32)
    run_host(src, [O, vals], lsz=(8, 1, 1))
    np.testing.assert_array_equal(O, np.array(ref, np.float32), err_msg=str(dt))

def test_e5m2_overflow_rounds_to_inf():
  vals = np.array([57344.0, 61439.0, 61440.0, 1e6], np.float32)
  src = render(unary_program(f32, f32, lambda v: v.cast(dtypes.fp8e5m2).cast(f32), 4))
  O = np.zeros(4, np.float32)
  run_host(src, [O, vals], lsz=(4, 1, 1))
  np.testing.assert_array_equal(O, np.array([57344, 57344, np.inf, np.inf], np.float32))

def test_half_arithmetic_rounds_every_op():
  # (a*b) rounded to half, then + c: a*b = 1 + 2**-9 + 2**-20 rounds to 1 + 2**-9 before the add
  out, a = gbuf(1, 0, dtypes.float16), gbuf(3, 1, dtypes.float16)
  z = c(0)
  v = a.index(z).load() * a.index(c(1)).load() + a.index(c(2)).load()
  src = render(linear(out.index(z).store(v)))
  O, A = np.zeros(1, np.float16), np.array([1 + 2**-10, 1 + 2**-10, -1], np.float16)
  run_host(src, [O, A])
  assert O[0] == (A[0] * A[1]) + A[2] == np.float16(2**-9)

def test_constants_of_narrow_floats_are_bits():
  src = render(unary_program(dtypes.float16, dtypes.float16, lambda v: v * c(0.1, dtypes.float16), 2))
  assert f"__ushort_as_half({int(np.float16(0.1).view(np.uint16)):#06x}u)" in src
  src = render(unary_program(f32, dtypes.bfloat16, lambda v: v.cast(dtypes.bfloat16).maximum(c(math.inf, dtypes.bfloat16)), 2))
  assert "__ushort_as_bfloat16(0x7f80u)" in src
  src = render(unary_program(f32, f32, lambda v: v + c(-math.inf, f32), 2))
  assert "-__int_as_float(0x7f800000)" in src

def test_int_min_div_minus_one_wraps():
  out, a, b = gbuf(4, 0, i32), gbuf(4, 1, i32), gbuf(4, 2, i32)
  lid = special(4, "lidx0")
  src = render(linear(out.index(lid).store(a.index(lid).load() // b.index(lid).load())))
  A, B, O = np.array([-2**31, 7, -7, 5], np.int32), np.array([-1, -1, 2, 3], np.int32), np.zeros(4, np.int32)
  run_host(src, [O, A, B], lsz=(4, 1, 1))
  np.testing.assert_array_equal(O, [-2**31, -7, -3, 1])

def test_bitcast_renders_and_runs():
  src = render(unary_program(f32, dtypes.uint32, lambda v: v.bitcast(dtypes.uint32), 2))
  assert "tg_bitcast<unsigned int>(" in src
  O, A = np.zeros(2, np.uint32), np.array([1.0, -2.5], np.float32)
  run_host(src, [O, A], lsz=(2, 1, 1))
  np.testing.assert_array_equal(O, A.view(np.uint32))
  assert NVBinary.unpack(NVCompiler("sm_90").compile(src)).cubin[:4] == b"\x7fELF"

def test_renderer_pickles_with_its_arch():
  import pickle
  r = pickle.loads(pickle.dumps(CUDARenderer("sm_89")))
  assert r.arch == "sm_89" and r.shared_max == NV_ARCHS["sm_89"].shared_max and r.local_max == (1024, 1024, 64)

def test_renderer_axis_types_reach_the_grid():
  si = (Tensor.ones(64, 64).contiguous() * 2).schedule()[-1]
  p = get_program(si.ast, CUDARenderer(), opts=[Opt(OptOps.LOCAL, 1, 16)])
  assert p.local_size == [16, 1, 1] and "__launch_bounds__(16)" in p.src and "threadIdx.x" in p.src
