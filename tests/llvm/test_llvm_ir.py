"""The LLVM IR the renderer writes: declared target, SSA loops, gated loads that never touch memory out of bounds,
vector accumulators with explicit vector FMAs in the matmul `Tensor @` schedules, verifier errors that show the IR lines
they name, and the JIT's lifetime and cache key."""
import ctypes, os, re, subprocess, sys, textwrap
import numpy as np
import pytest
from tinygrad import Tensor
from tinygrad.codegen import get_program
from tinygrad.device import CompileError, DeviceOpenError
from tinygrad.dtype import dtypes
from tinygrad.helpers import Context
from tinygrad.uop import Ops, AxisType
from tinygrad.uop.ops import UOp
from tinygrad.renderer.llvmir import CPULLVMRenderer
from tests.llvm.conftest import llvm_parts, run_program

def dg(i, dt, n): return UOp(Ops.DEFINE_GLOBAL, dt.ptr(n), arg=i)

def matmul_items(n=256, m=None, k=None):
  m, k = m or n, k or n
  a, b = Tensor(np.ones((m, k), np.float32)), Tensor(np.ones((k, n), np.float32))
  return (a @ b).schedule()

def test_module_declares_target_and_intrinsics():
  ren = llvm_parts()[0]
  out, a = dg(0, dtypes.float32, 16), dg(1, dtypes.float32, 16)
  r = UOp.range(16, 0)
  src = get_program(UOp.sink(out.index(r).store(a.index(r).load().sqrt()).end(r)), ren).src
  assert f'target triple = "{ren.triple}"' in src and f'target datalayout = "{ren.datalayout}"' in src
  for fn in set(re.findall(r"call [^@]*(@llvm\.[\w.]+)\(", src)): assert re.search(rf"declare .*{re.escape(fn)}\(", src), fn
  assert "ptr %data0" in src and "i32 %core_id" in src, "opaque pointers; core_id last as in C"

def test_loops_are_ssa_with_a_phi_per_range():
  out, a = dg(0, dtypes.float32, 64), dg(1, dtypes.float32, 64)
  r0, r1 = UOp.range(8, 0), UOp.range(8, 1)
  ast = UOp.sink(out.index(r0 * 8 + r1).store(a.index(r1 * 8 + r0).load()).end(r0, r1))
  with Context(NOOPT=1): prg = get_program(ast, llvm_parts()[0])
  assert len(re.findall(r"= phi i32 \[ 0, %\w+ \], \[ %v\d+, %\w+ \]", prg.src)) == 2
  assert "alloca" not in prg.src
  x = np.arange(64, dtype=np.float32)
  out_np = np.zeros(64, np.float32)
  run_program(prg, [out_np, x])
  np.testing.assert_array_equal(out_np, x.reshape(8, 8).T.reshape(-1))

def test_symbolic_loop_bound_is_a_parameter(run_kernel):
  n = UOp.variable("n", 1, 32)
  out, a = dg(0, dtypes.int32, 32), dg(1, dtypes.int32, 32)
  r = UOp.range(n, 0)
  ast = UOp.sink(out.index(r).store(a.index(r).load() * 3).end(r))
  bufs = [np.full(32, -1, np.int32), np.arange(32, dtype=np.int32)]
  with Context(NOOPT=1): prg = run_kernel(ast, bufs, var_vals={"n": 11})
  np.testing.assert_array_equal(bufs[0], np.where(np.arange(32) < 11, np.arange(32) * 3, -1))
  assert "i32 %n" in prg.src

@pytest.mark.parametrize("n,mod,step,off", [(17, 4, 1, 0), (33, 8, 1, 1), (131, 4, 1, 0), (131, 16, 2, 1),
                                             (257, 32, 1, 0), (65, 64, 1, 1)])
def test_loop_over_a_power_of_two_modulus_of_its_index_is_right(run_kernel, n, mod, step, off):
  # LLVM 22's loop vectorizer widened x[b + r % 4] past the modulus, reading consecutive elements as if r % 4 were r
  # (tests/fuzz/llvm22_vectorized_mod_of_index.ll): a loop whose index some integer MOD or AND computes from carries
  # llvm.loop.vectorize.enable = false; the row loop of this sum takes r from the modulus, the store loop too
  out, a = dg(0, dtypes.int32, 15), dg(1, dtypes.int32, 256)
  i, r = UOp.range(15, 0), UOp.range(n, 1, AxisType.REDUCE)
  ast = UOp.sink(out.index(i).store(a.index((i % 4) * 64 + (r * step + off) % mod).load().reduce(r, arg=Ops.ADD)).end(i))
  x = np.random.default_rng(n * mod).integers(-1000, 1000, 256).astype(np.int32)
  bufs = [np.zeros(15, np.int32), x]
  prg = run_kernel(ast, bufs)
  want = [x[(k % 4) * 64 + (np.arange(n) * step + off) % mod].sum() for k in range(15)]
  np.testing.assert_array_equal(bufs[0], want)
  assert len(re.findall(r"br label %loop\d+, !llvm.loop !\d+", prg.src)) == 2
  assert '!{!"llvm.loop.vectorize.enable", i1 false}' in prg.src

def test_loops_without_a_modulus_keep_the_vectorizer():
  out, a = dg(0, dtypes.float32, 64), dg(1, dtypes.float32, 64 * 40)
  i, r = UOp.range(64, 0), UOp.range(40, 1, AxisType.REDUCE)
  ast = UOp.sink(out.index(i).store(a.index(i * 40 + r).load().reduce(r, arg=Ops.ADD)).end(i))
  with Context(NOOPT=1): src = get_program(ast, llvm_parts()[0]).src
  assert "llvm.loop" not in src

def test_no_vectorize_metadata_numbers_after_the_module_flags():
  # AMD's module has its code object version as module flag !0: the loops' nodes come after it, and the module parses
  # (AMD lowers a MOD by a constant to a multiply and shifts: the index is an AND here)
  from tinygrad.renderer.llvmir import AMDLLVMRenderer
  from tinygrad.runtime.support.compiler_llvm import parse_and_verify
  out, a = dg(0, dtypes.int32, 16), dg(1, dtypes.int32, 64)
  r = UOp.range(37, 0, AxisType.REDUCE)
  ast = UOp.sink(out.index(UOp.const(dtypes.index, 0)).store(a.index((r * 3) & 7).load().reduce(r, arg=Ops.ADD)))
  with Context(NOOPT=1): src = get_program(ast, AMDLLVMRenderer()).src
  assert "!0 = !{i32 1, !\"amdhsa_code_object_version\"" in src
  assert '!1 = !{!"llvm.loop.vectorize.enable", i1 false}' in src and "!llvm.loop !2" in src
  parse_and_verify(src, "AMD")

GUARD_PAGES = textwrap.dedent('''
  import ctypes, mmap, numpy as np
  from tinygrad.uop import Ops
  from tinygrad.uop.ops import UOp
  from tinygrad.dtype import dtypes
  from tinygrad.helpers import Context
  from tinygrad.codegen import get_program
  from tests.llvm.conftest import llvm_parts, run_program
  libc = ctypes.CDLL(None)
  PAGE = mmap.PAGESIZE
  mem = mmap.mmap(-1, 3 * PAGE)
  base = ctypes.addressof(ctypes.c_char.from_buffer(mem))
  # pages: [guard | data | guard]; the input is the last 6 floats of the middle page
  libc.mprotect(ctypes.c_void_p(base), PAGE, 0)
  libc.mprotect(ctypes.c_void_p(base + 2 * PAGE), PAGE, 0)
  x = np.frombuffer(mem, np.float32, 6, 2 * PAGE - 24)
  x[:] = np.arange(1, 7, dtype=np.float32)
  out = np.zeros(10, np.float32)
  r = UOp.range(10, 0)
  a = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(6), arg=1)
  ast = UOp.sink(UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(10), arg=0).index(r).store(
    a.index((r - 2).valid((r < 8) & (r < 2).logical_not())).load()).end(r))
  # NOTE: explicit (empty) opts: the CPU's loop cutting would split the pad into branch-free loops without a gate
  prg = get_program(ast, llvm_parts()[0], opts=[])
  assert "select i1" in prg.src
  run_program(prg, [out, x])
  print(out.tolist())
  # and at the start of a page: a negative index would touch the guard page before it
  y = np.frombuffer(mem, np.float32, 6, PAGE)
  y[:] = np.arange(1, 7, dtype=np.float32)
  run_program(prg, [out, y])
  print(out.tolist())
''')

def test_gated_load_never_reads_out_of_bounds():
  # a subprocess: a load out of bounds hits a guard page and kills it with SIGSEGV
  res = subprocess.run([sys.executable, "-c", GUARD_PAGES], capture_output=True, text=True, timeout=300, cwd=os.getcwd())
  assert res.returncode == 0, f"exit {res.returncode}: {res.stderr[-2000:]}"
  want = str([0.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 0.0, 0.0])
  assert res.stdout.split() == want.split() * 2 or res.stdout.strip().splitlines() == [want, want]

MASKED_GUARD_PAGE = textwrap.dedent('''
  import ctypes, mmap, re, numpy as np
  from tinygrad.uop import Ops, AxisType
  from tinygrad.uop.ops import UOp
  from tinygrad.dtype import dtypes
  from tinygrad.codegen import get_program
  from tinygrad.codegen.opt import Opt, OptOps
  from tests.llvm.conftest import llvm_parts, run_program
  libc = ctypes.CDLL(None)
  PAGE = mmap.PAGESIZE
  mem = mmap.mmap(-1, 2 * PAGE)
  base = ctypes.addressof(ctypes.c_char.from_buffer(mem))
  libc.mprotect(ctypes.c_void_p(base + PAGE), PAGE, 0)
  # out[j] = sum_k a[k] * b[k, j] with b (4 x 29) the last 116 floats before the guard page: padding j to 32 gives the
  # last row's lanes 29..31 addresses on the guard page, which a masked load must not touch
  K, N = 4, 29
  b = np.frombuffer(mem, np.float32, K * N, PAGE - 4 * K * N)
  b[:] = np.arange(1, K * N + 1, dtype=np.float32)
  a, out = np.arange(1, K + 1, dtype=np.float32), np.zeros(N, np.float32)
  j, k = UOp.range(N, 0), UOp.range(K, 1, AxisType.REDUCE)
  g = [UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(n), arg=i) for i, n in enumerate((N, K, K * N))]
  acc = (g[1].index(k).load() * g[2].index(k * N + j).load()).reduce(k, arg=Ops.ADD)
  ast = UOp.sink(g[0].index(j).store(acc).end(j))
  prg = get_program(ast, llvm_parts()[0], opts=[Opt(OptOps.PADTO, 0, 16), Opt(OptOps.UPCAST, 0, 16)])
  assert re.search(r"@llvm\\.masked\\.load\\.v\\d+f32", prg.src), prg.src
  run_program(prg, [out, a, b])
  assert out.tolist() == (a @ b.reshape(K, N)).tolist(), (out, a @ b.reshape(K, N))
  print("ok")
''')

def test_masked_vector_load_never_reads_past_the_end():
  res = subprocess.run([sys.executable, "-c", MASKED_GUARD_PAGE], capture_output=True, text=True, timeout=300,
                       cwd=os.getcwd())
  assert res.returncode == 0 and res.stdout.strip() == "ok", f"exit {res.returncode}: {res.stderr[-2000:]}"

def test_gated_load_reads_through_a_safe_index():
  out, a = dg(0, dtypes.float32, 10), dg(1, dtypes.float32, 6)
  r = UOp.range(10, 0)
  ast = UOp.sink(out.index(r).store(a.index((r - 2).valid((r < 8) & (r < 2).logical_not())).load()).end(r))
  src = get_program(ast, llvm_parts()[0], opts=[]).src
  sel = re.search(r"(%v\d+) = select i1 %v\d+, i32 %v\d+, i32 0", src)
  assert sel is not None, "the gated index is replaced by 0 where the gate is false"
  assert re.search(rf"getelementptr inbounds float, ptr %data1, i32 {sel.group(1)}\b", src)

@pytest.mark.parametrize("bits,lanes", [(512, 16), (256, 8)])
def test_matmul_keeps_vector_accumulators_with_vector_fmas(bits, lanes):
  ren = CPULLVMRenderer("x86_64-unknown-linux-gnu", llvm_parts()[0].datalayout, bits, 2)
  prgs = [get_program(si.ast, ren) for si in matmul_items(256)]
  src = prgs[-1].src
  # NOTE: MULACC is fused by definition (docs/ir.md section 5): llvm.fma, never fmuladd (which may round twice)
  fmas = re.findall(rf"call <{lanes} x float> @llvm\.fma\.v{lanes}f32", src)
  assert len(fmas) >= 8, f"expected explicit <{lanes} x float> FMAs, found {len(fmas)}"
  assert re.search(rf"alloca \[1 x <{lanes} x float>\]", src), "vector accumulators"
  # the reduce loop body (from its phi to its back edge) holds no scalar float math left to LLVM's vectorizers
  inner = _inner_reduce_loop(src)
  assert "@llvm.fma." in inner and not re.search(r"= f(mul|add) contract float ", inner)

def test_matmul_through_the_llvm_path_is_correct(run_kernel):
  rng = np.random.default_rng(0)
  a, b = rng.standard_normal((96, 64), dtype=np.float32), rng.standard_normal((64, 128), dtype=np.float32)
  items = (Tensor(a) @ Tensor(b)).schedule()
  out = np.zeros((96, 128), np.float32)
  for si in items:
    bufs = [out.reshape(-1) if i == 0 else (a if si.bufs[i].size == a.size else b).reshape(-1) for i in range(len(si.bufs))]
    run_kernel(si.ast, bufs)
  np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)

def _inner_reduce_loop(src: str) -> str:
  """The body of the innermost loop that holds an FMA (from its phi to its back edge; loops nest, so each label is
  searched from its own position)."""
  bodies = [m.group(2) for lab in re.finditer(r"\n(loop\d+):\n", src)
            if (m := re.compile(rf"\n({lab.group(1)}):\n(.*?)br label %{lab.group(1)}\n", re.S).search(src, lab.start()))]
  return min((body for body in bodies if "@llvm.fma." in body), key=len)

def assert_vector_fma_loop(src: str, lanes: int, at_least: int) -> None:
  inner = _inner_reduce_loop(src)
  fmas = re.findall(rf"call <{lanes} x float> @llvm\.fma\.v{lanes}f32", inner)
  assert len(fmas) >= at_least, f"expected {at_least} <{lanes} x float> FMAs in the reduce loop, found {len(fmas)}"
  assert not re.search(r"call float @llvm\.fma\.f32|= f(mul|add) contract float ", inner), "scalar float math left"

@pytest.mark.parametrize("bits,lanes,rows,cols", [(512, 16, 8, 32), (256, 8, 4, 16)])
def test_1024_matmul_packs_b_and_runs_vector_fmas(bits, lanes, rows, cols):
  # the kernel `Tensor @` schedules for 1024^3 with default heuristics: B's panel (its rows are 4 KiB apart) is packed
  # into a contiguous buffer (PACK, no KBLOCK needed: packed rows do not alias in the cache) and the inner loop is
  # `rows` x `cols` vector FMAs whose B operands are vector loads of that buffer (an alloca): 8x32 on AVX-512 (16 of its
  # 32 registers accumulate; 48 lanes only where 48 divides the axis, unpadded), 4x16 with 256-bit vectors (8 of AVX2's
  # 16; 6 rows do not divide 1024)
  from tinygrad.codegen.opt import OptOps
  ren = CPULLVMRenderer("x86_64-unknown-linux-gnu", llvm_parts()[0].datalayout, bits, 2)
  p = get_program(matmul_items(1024)[-1].ast, ren)
  ops = [o.op for o in p.applied_opts]
  assert OptOps.PACK in ops and OptOps.KBLOCK not in ops, p.applied_opts
  assert_vector_fma_loop(p.src, lanes, rows * cols // lanes)
  panel = re.search(rf"(%acc\d+) = alloca \[{1024 * cols} x float\], align 64", p.src)
  assert panel, f"a 1024 x {cols} float panel on a cache line"
  loads = re.findall(rf"= load <{lanes} x float>, ptr (%p\d+)", _inner_reduce_loop(p.src))
  geps = dict(re.findall(r"(%p\d+) = getelementptr inbounds float, ptr (%\w+),", p.src))
  assert sum(geps.get(x) == panel.group(1) for x in loads) == cols // lanes, "B's lanes read from the packed panel"

def test_padded_1023_matmul_inner_loop_is_vector_fmas():
  # 1023 is padded to 1024 on both output axes; the padded lanes' gated loads are masked vector loads, so the inner loop
  # is vector FMAs as 1024's is (it was scalar FMAs on gated scalar loads). With PACK (the default) the masked loads
  # fill the packed panel; without it they are in the inner loop
  from tinygrad.codegen.opt import OptOps
  ren = CPULLVMRenderer("x86_64-unknown-linux-gnu", llvm_parts()[0].datalayout, 512, 2)
  ast = matmul_items(1023)[-1].ast
  p = get_program(ast, ren)
  ops = [o.op for o in p.applied_opts]
  assert ops.count(OptOps.PADTO) == 2 and OptOps.PACK in ops, p.applied_opts
  assert_vector_fma_loop(p.src, 16, 16)
  # the panel of B (data2) is copied through vector loads, masked where its lanes are padded; a loop of gated scalar
  # copies was a select of the index per element, which LLVM made a gather of each row
  geps = dict(re.findall(r"(%p\d+) = getelementptr (?:inbounds )?float, ptr (%\w+),", p.src))
  access = r"= (load [^,]+, ptr|call <\d+ x float> @llvm\.masked\.load[^(]*\(ptr align \d+) (%p\d+)"
  from_b = [m for m in re.finditer(access, p.src) if geps.get(m.group(2)) == "%data2"]
  assert from_b and all("<" in m.group(1) for m in from_b), [m.group(0) for m in from_b]
  assert any("masked.load" in m.group(1) for m in from_b) and "gather" not in p.src
  unpacked = get_program(ast, ren, [o for o in p.applied_opts if o.op is not OptOps.PACK])
  assert_vector_fma_loop(unpacked.src, 16, 16)
  assert re.search(r"call <16 x float> @llvm\.masked\.load\.v16f32\.p0\(ptr align 4 %p\d+, <16 x i1> %v\d+,",
                   _inner_reduce_loop(unpacked.src))

def test_odd_sized_matmul_is_padded_and_blocked(run_kernel):
  # 255x257 @ 257x257: no vector width divides 257 or 255, so the output axes are padded (PADTO) and then blocked as a
  # multiple-of-16 matmul would be, not left as one loop nest without opts; the padded lanes read through masked vector
  # loads (test_masked_vector_load_never_reads_past_the_end: they touch nothing past the end); the values
  # are right
  from tinygrad.codegen.opt import OptOps
  rng = np.random.default_rng(0)
  a, b = rng.standard_normal((255, 257), dtype=np.float32), rng.standard_normal((257, 257), dtype=np.float32)
  items = (Tensor(a) @ Tensor(b)).schedule()
  ren = CPULLVMRenderer("x86_64-unknown-linux-gnu", llvm_parts()[0].datalayout, 512, 2)
  p = get_program(items[-1].ast, ren)
  ops = [o.op for o in p.applied_opts]
  assert ops.count(OptOps.PADTO) == 2 and ops.count(OptOps.UPCAST) >= 2, p.applied_opts
  assert_vector_fma_loop(p.src, 16, 16)
  out = np.zeros((255, 257), np.float32)
  for si in items:
    bufs = [out.reshape(-1) if i == 0 else (a if si.bufs[i].size == a.size else b).reshape(-1) for i in range(len(si.bufs))]
    run_kernel(si.ast, bufs)
  np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)

def test_padding_a_vector_axis_follows_masked_loads():
  # 1000 = 8 * 125: the C path (gated loads are scalar there) blocks 8x8 unpadded; the LLVM path, whose masked loads keep
  # a padded axis vector, pads the contiguous axis to 1024 and blocks it by 32 (then THREAD splits the 32 blocks)
  from tinygrad.codegen.opt import OptOps
  from tinygrad.renderer.cstyle import CRenderer
  ast = matmul_items(1000)[-1].ast
  c = get_program(ast, CRenderer(threads=2))
  assert OptOps.PADTO not in [o.op for o in c.applied_opts] and OptOps.UPCAST in [o.op for o in c.applied_opts]
  ren = CPULLVMRenderer("x86_64-unknown-linux-gnu", llvm_parts()[0].datalayout, 512, 2)
  p = get_program(ast, ren)
  ops = [o.op for o in p.applied_opts]
  assert ops[0] is OptOps.PADTO and OptOps.THREAD in ops, p.applied_opts
  assert_vector_fma_loop(p.src, 16, 16)

def corrupt(src: str, old: str, new: str) -> str:
  assert old in src
  return src.replace(old, new, 1)

def test_parse_error_names_the_ir_line():
  out, a = dg(0, dtypes.float32, 16), dg(1, dtypes.float32, 16)
  r = UOp.range(16, 0)
  with Context(NOOPT=1): src = get_program(UOp.sink(out.index(r).store(a.index(r).load() + 1.0).end(r)), llvm_parts()[0]).src
  bad = corrupt(src, "fadd contract float", "fadd contract double")
  with pytest.raises(CompileError) as e: llvm_parts()[1].compile(bad)
  msg = str(e.value)
  assert "the IR lines it names" in msg and re.search(r">>\s*\d+ \| .*fadd contract double", msg)

def test_verifier_error_names_the_instructions():
  out, a = dg(0, dtypes.float32, 16), dg(1, dtypes.float32, 16)
  r = UOp.range(16, 0)
  with Context(NOOPT=1): src = get_program(UOp.sink(out.index(r).store(a.index(r).load() * 2.0).end(r)), llvm_parts()[0]).src
  # a use before its definition parses, but the verifier rejects it
  lines = src.splitlines()
  i = next(i for i, line in enumerate(lines) if "= load float" in line)
  j = next(j for j, line in enumerate(lines) if "fmul" in line)
  lines[i], lines[j] = lines[j], lines[i]
  with pytest.raises(CompileError) as e: llvm_parts()[1].compile("\n".join(lines))
  msg = str(e.value)
  assert "does not dominate" in msg and re.search(r">>\s*\d+ \| .*fmul", msg) and re.search(r">>\s*\d+ \| .*= load float", msg)

def test_compile_cache_key_names_llvm_and_the_cpu():
  from tinygrad.runtime.support.compiler_llvm import host_target
  key = llvm_parts()[1].cachekey
  h = host_target()
  assert "LLVM 22" in key and h.cpu in key and h.features in key and h.triple in key

# (lane type, stored type) pairs the AVX-512 code generator stores as truncating masked stores
TRUNC_STORES = [("i32", "i16"), ("i32", "i8"), ("i16", "i8"), ("i64", "i32"), ("i64", "i16"), ("i64", "i8")]
NP_INT = {"i8": np.uint8, "i16": np.uint16, "i32": np.uint32, "i64": np.uint64}

def test_a_one_lane_masked_store_writes_that_lane_only():
  # LLVM 22 on AVX-512 stores a truncating masked store's one enabled lane at the wide lane's width, over the elements
  # after it (tests/fuzz/llvm22_one_lane_trunc_store.ll). Every such store, with wide lanes full of ones, into
  # buffers of a sentinel: only the lane's own element may change. On a host without AVX-512 this is the plain case
  from tinygrad.runtime.targets import load_shared, host_function
  cases = [(w, src, dst, k) for w in (4, 8, 16) for src, dst in TRUNC_STORES for k in (0, 1, w - 1)]
  fns = []
  for i, (w, src, dst, k) in enumerate(cases):
    mask = ", ".join(f"i1 {'true' if j == k else 'false'}" for j in range(w))
    fns.append(f"""define void @f{i}(ptr %p, ptr %v) {{
  %w = load <{w} x {src}>, ptr %v, align 1
  %t = trunc <{w} x {src}> %w to <{w} x {dst}>
  call void @llvm.masked.store.v{w}{dst}.p0(<{w} x {dst}> %t, ptr align 1 %p, <{w} x i1> <{mask}>)
  ret void
}}""")
  decls = {f"declare void @llvm.masked.store.v{w}{dst}.p0(<{w} x {dst}>, ptr, <{w} x i1>)" for w, _, dst, _ in cases}
  lib = load_shared(llvm_parts()[1].compile("\n".join(fns + sorted(decls))), "one-lane stores")
  for i, (w, src, dst, k) in enumerate(cases):
    wide = np.full(w, np.iinfo(NP_INT[src]).max, NP_INT[src])
    out = np.full(8 * w + 8, 0x5A, np.uint8)
    host_function(lib, f"f{i}")(out.ctypes.data_as(ctypes.c_void_p), wide.ctypes.data_as(ctypes.c_void_p))
    want = np.full(8 * w + 8, 0x5A, np.uint8)
    size = np.dtype(NP_INT[dst]).itemsize
    want[k * size:(k + 1) * size] = 0xFF
    assert out.tolist() == want.tolist(), f"<{w} x {src}> -> {dst}, lane {k}: {out.tolist()}"

def test_one_lane_stores_are_rewritten_and_others_kept():
  from tinygrad.runtime.support.compiler_llvm import scalar_one_lane_stores
  one = ("  tail call void @llvm.masked.store.v4i16.p0(<4 x i16> %t, ptr align 8 %q, <4 x i1> <i1 false, i1 false, "
         "i1 true, i1 false>), !alias.scope !5, !noalias !2")
  two = "  call void @llvm.masked.store.v4i16.p0(<4 x i16> %t, ptr align 8 %q, <4 x i1> <i1 true, i1 false, i1 true, i1 false>)"
  var = "  call void @llvm.masked.store.v4i16.p0(<4 x i16> %t, ptr align 8 %q, <4 x i1> %m)"
  out = scalar_one_lane_stores("\n".join([one, two, var]))
  lines = out.split("\n")
  assert lines[0] == "  %tg.mst0.e = extractelement <4 x i16> %t, i64 2"
  assert lines[1] == "  %tg.mst0.p = getelementptr i16, ptr %q, i64 2"
  # lane 2 of an 8-aligned vector of i16 is 4-aligned; the call's alias metadata stays on the store
  assert lines[2] == "  store i16 %tg.mst0.e, ptr %tg.mst0.p, align 4, !alias.scope !5, !noalias !2"
  assert lines[3:] == [two, var]

JIT_CHURN = textwrap.dedent('''
  import gc, numpy as np
  from tinygrad.uop import Ops
  from tinygrad.uop.ops import UOp
  from tinygrad.dtype import dtypes
  from tinygrad.codegen import get_program
  from tests.llvm.conftest import llvm_parts, run_program
  ren = llvm_parts()[0]
  for i in range(40):
    out, a = UOp(Ops.DEFINE_GLOBAL, dtypes.int32.ptr(8), arg=0), UOp(Ops.DEFINE_GLOBAL, dtypes.int32.ptr(8), arg=1)
    r = UOp.range(8, 0)
    prg = get_program(UOp.sink(out.index(r).store(a.index(r).load() + i).end(r)), ren)
    o = np.zeros(8, np.int32)
    run_program(prg, [o, np.arange(8, dtype=np.int32)])
    assert o.tolist() == list(range(i, i + 8)), o
    gc.collect()
  print("ok")
''')

def test_programs_of_one_name_load_and_run_apart():
  # a subprocess: 40 programs with the same kernel name, each its own shared object, each running its own code (a
  # loader that resolved the name to an earlier program's code would compute the wrong sums)
  env = {**os.environ, "SPEC": "0", "IGNORE_OOB": "1"}  # NOTE: about loading, not the specs (checked elsewhere)
  res = subprocess.run([sys.executable, "-c", JIT_CHURN], capture_output=True, text=True, timeout=300, cwd=os.getcwd(),
                       env=env)
  assert res.returncode == 0 and res.stdout.strip() == "ok", f"exit {res.returncode}: {res.stderr[-2000:]}"

def test_cpu_device_with_cpu_llvm_runs_tensors():
  from tinygrad.runtime.ops_cpu import CPUDevice
  from tinygrad.runtime.support.compiler_llvm import LLVMCompiler
  with Context(CPU_LLVM=1): dev = CPUDevice("CPU")
  assert isinstance(dev.renderer, CPULLVMRenderer) and isinstance(dev.compiler, LLVMCompiler)
  with Context(CPU_LLVM=0): assert not isinstance(CPUDevice("CPU").renderer, CPULLVMRenderer)

def test_compile_gives_a_shared_object_that_needs_libm():
  from tinygrad.runtime.support.compiler_llvm import LLVMCompiler
  src = get_program(UOp.sink(UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(4), arg=0).index(r := UOp.range(4, 0)).store(
    UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(4), arg=1).index(r).load().exp2()).end(r)), llvm_parts()[0]).src
  lib = LLVMCompiler().compile(src)
  # ELF, type ET_DYN (3): a shared object the dynamic loader maps whole, not a relocatable object for a JIT
  assert lib[:4] == b"\x7fELF" and int.from_bytes(lib[16:18], "little") == 3
  assert b"libm.so" in lib

def test_a_bad_object_is_a_link_error_naming_the_linker():
  from tinygrad.runtime.support.compiler_llvm import link_shared, host_linker
  with pytest.raises(CompileError, match=r"linking kernel k failed .*ld") as e: link_shared([b"not an object"], "kernel k")
  assert host_linker() in str(e.value)

def test_missing_llvmlite_is_a_clear_error(monkeypatch):
  from tinygrad.runtime.support import compiler_llvm
  monkeypatch.setattr(compiler_llvm, "_llvm", None)
  monkeypatch.setitem(sys.modules, "llvmlite.binding", None)
  with pytest.raises(DeviceOpenError, match=r"llvmlite is not installed.*pip install"): compiler_llvm.llvm()

def _run_on(dev, items):
  for si in items:
    p = get_program(si.ast, dev.renderer)
    prg = dev.runtime(p.name, dev.compiler.compile_cached(p.src, p.renderer))
    gs, ls = p.launch_dims({})
    prg(*[si.bufs[i].ensure_allocated()._buf for i in p.globals], global_size=gs, local_size=ls)
    yield p

# (batch, M, K, N): one element, primes, a padded square (masked loads), and shapes whose B rows are a multiple of a page
# apart with enough work for the heuristics' KBLOCK (one a batch, one with M not a multiple of any block)
# NOTE: the big ones (seconds each: SPEC=2 proves every access of kernels with 256 accumulators) run in
# `make test-llvm-matmul`
SLOW = pytest.mark.slow
ODD_SHAPES = [(1, 1, 1, 1), (1, 1, 7, 1), (1, 7, 13, 5), (1, 31, 37, 41), (1, 17, 1024, 1024), (2, 16, 512, 1024),
              pytest.param((1, 1023, 1023, 1023), marks=SLOW), pytest.param((1, 64, 1024, 2048), marks=SLOW),
              pytest.param((3, 64, 2048, 1024), marks=SLOW), pytest.param((1, 32, 4096, 1024), marks=SLOW)]

@pytest.mark.parametrize("shape", ODD_SHAPES)
def test_matmul_with_default_heuristics_matches_numpy_on_both_cpu_paths(shape):
  from tinygrad.codegen.opt import OptOps, PACK_MAX_BYTES
  from tinygrad.runtime.ops_cpu import CPUDevice
  bs, m, k, n = shape
  rng = np.random.default_rng(1)
  a = rng.standard_normal((bs, m, k) if bs > 1 else (m, k), dtype=np.float32)
  b = rng.standard_normal((bs, k, n) if bs > 1 else (k, n), dtype=np.float32)
  ta, tb = Tensor(a).realize(), Tensor(b).realize()
  items = (ta @ tb).schedule()
  ref = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
  with Context(CPU_LLVM=0): c = CPUDevice("CPU")
  with Context(CPU_LLVM=1): ll = CPUDevice("CPU")
  # the C path cache blocks B whose rows are a page apart (KBLOCK); the LLVM path packs B's panel (PACK) of every big
  # matmul, cache blocked first only where the panel (K rows of 48 floats on AVX-512, 32 else) is over PACK's limit
  big = bs * m * k * n >= 1 << 24
  cols = 48 if ll.renderer.acc_widths(dtypes.float32)[:1] == (16,) else 32
  kblocked = {c: k % 256 == 0 and k > 256 and n * 4 % 4096 == 0 and big, ll: big and k * cols * 4 > PACK_MAX_BYTES}
  for dev in (c, ll):
    progs = list(_run_on(dev, items))
    got = items[-1].bufs[0].numpy().reshape(ref.shape)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.sqrt(k), err_msg=type(dev.renderer).__name__)
    ops = [o.op for o in progs[-1].applied_opts]
    assert (OptOps.KBLOCK in ops) == kblocked[dev], progs[-1].applied_opts
    assert (OptOps.PACK in ops) == (dev is ll and big), progs[-1].applied_opts

def test_llvm_vectorize_alu_packs_casts_only_from_one_source_dtype():
  # the LLVM final rules pack lanes with the same check as codegen's pm_vectorize (uop.ops.lanes_alike): one lane's CAST
  # of a float64 LOAD among CASTs of float32 values stays a VECTORIZE of scalar lanes (packing it built a float32 vector
  # operand holding a float64, which the spec refuses)
  from tinygrad.renderer.llvmir import CPULLVMRenderer
  from tinygrad.codegen.llvm_vectorize import vectorize_alu
  a = UOp.variable("a", 0, 10, dtypes.int32).cast(dtypes.float32)
  b = UOp(Ops.DEFINE_GLOBAL, dtypes.float64.ptr(4), arg=0).index(UOp.const(dtypes.index, 0)).load()
  def lanes(l1: UOp) -> UOp: return UOp.vectorize((a * 2.0).cast(dtypes.int32), l1, (a * 3.0).cast(dtypes.int32))
  ren = CPULLVMRenderer(vector_bits=512)
  assert vectorize_alu(ren, lanes(b.cast(dtypes.int32))) is None
  packed = vectorize_alu(ren, lanes((a * 5.0).cast(dtypes.int32)))
  assert packed is not None and packed.dtype == dtypes.int32.vec(3) and packed.src[0].dtype == dtypes.float32.vec(3)

F64_TO_F16 = textwrap.dedent('''
  import numpy as np
  from tinygrad import Tensor, dtypes
  rng = np.random.default_rng(0)
  h = rng.integers(0, 0x7BFF, 4000, dtype=np.uint16).view(np.float16)
  lo, hi = h.astype(np.float64), np.nextafter(h, np.float16(np.inf)).astype(np.float64)
  mid = (lo + hi) / 2
  # half ties, just off them (double -> float -> half would round those twice), specials, and wide random doubles
  x = np.concatenate([mid, np.nextafter(mid, np.inf), np.nextafter(mid, -np.inf), -mid, lo, [np.inf, -np.inf, np.nan,
                      0.0, -0.0, 1e300, -1e300, 1e-300, 65519.99, 65520.0, 2.0**-25, 2.0**-25 * (1 + 2**-40)],
                      rng.standard_normal(2000) * 10.0 ** rng.integers(-9, 6, 2000)])
  got = Tensor(x, device="CPU").cast(dtypes.float16).numpy()
  want = x.astype(np.float16)
  bad = np.flatnonzero(got.view(np.uint16) != want.view(np.uint16))
  assert len(bad) == 0, [(x[i], got[i], want[i]) for i in bad[:5]]
  print("ok")
''')

def test_f64_to_f16_rounds_once_without_a_libcall():
  # a fresh process (one that has not loaded libgcc_s, where __truncdfhf2 lives): the cast must not call out for it
  env = {**os.environ, "CPU_LLVM": "1", "DEV": "CPU"}
  res = subprocess.run([sys.executable, "-c", F64_TO_F16], capture_output=True, text=True, timeout=300, cwd=os.getcwd(),
                       env=env)
  assert res.returncode == 0 and res.stdout.strip() == "ok", f"exit {res.returncode}: {res.stderr[-2000:]}"

def test_a_register_tile_over_a_packed_panel_keeps_whole_vector_accumulators():
  # a 3x3 conv over 8x8 pixels: 8 pixel lanes (x) by 8 output channels by 4 rows (batch), the weights packed. Along the
  # tile's diagonal both loads step by one element (x, then the packed channels), and grouping lanes along it first
  # left 2 vectors of 8 and the rest in 4-, 2- and 1-wide pieces (4x slower at batch 32); every accumulator is a whole
  # <8 x float> now, and the reduce loop is vector FMAs
  from tinygrad.codegen.opt import Opt, OptOps
  x, w = Tensor.empty(8, 64, 8, 8), Tensor.empty(64, 64, 3, 3)
  ast = [si.ast for si in x.conv2d(w, padding=1).schedule() if si.ast.op is Ops.SINK][-1]
  ren = CPULLVMRenderer("x86_64-unknown-linux-gnu", llvm_parts()[0].datalayout, 512, 2)
  opts = [Opt(OptOps.UPCAST, 3, 8), Opt(OptOps.UPCAST, 1, 8), Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.PACK, 1, None)]
  src = get_program(ast, ren, opts=opts).src
  accs = re.findall(r"alloca \[1 x ([^\]]+)\]", src)
  assert accs == ["<8 x float>"] * 32, sorted(set(accs))
  assert_vector_fma_loop(src, 8, 32)

def _transpose_ast(shape, step=1):
  x = Tensor.empty(*shape)
  src = x[..., ::step] if step > 1 else x
  return src.permute(0, 2, 3, 1).contiguous().schedule()[-1].ast

@pytest.mark.parametrize("bits,lanes", [(512, 8), (256, 8)])
def test_a_transposed_tile_reads_its_rows_as_vectors(bits, lanes, run_kernel):
  # NCHW -> NHWC: the heuristics' tile stores along C and loads along W. Every row of W the tile reads whole is one
  # vector load (the store vectors built by shuffles), where each element was a scalar load and an insertelement. The
  # tile is 8 x 8 on AVX-512 too (heuristic.TRANSPOSE_MAX_ROWS), its rows read as 8-lane vectors: every vector they
  # feed is 8 lanes, half the widest (llvm_vectorize.row_loads)
  ren = CPULLVMRenderer("x86_64-unknown-linux-gnu", llvm_parts()[0].datalayout, bits, 2)
  ast = _transpose_ast((2, 32, 4, 64))
  src = get_program(ast, ren).src
  assert re.search(rf"load <{lanes} x float>, ptr %p\d+", src) and not re.search(r"= load float, ", src)
  if bits == llvm_parts()[0].vector_bits:
    x = np.random.default_rng(0).standard_normal((2, 32, 4, 64), dtype=np.float32)
    out = np.zeros(x.size, np.float32)
    run_kernel(ast, [out, x.reshape(-1)])
    np.testing.assert_array_equal(out.reshape(2, 4, 64, 32), x.transpose(0, 2, 3, 1))

def test_rows_a_tile_reads_in_part_stay_scalar_loads(run_kernel):
  # every other element of W: no run of consecutive elements is read whole, so none is read as a vector (that would
  # read elements the kernel never reads, past the end of the buffer for the last row)
  ast = _transpose_ast((2, 32, 4, 64), step=2)
  p = get_program(ast, llvm_parts()[0])
  assert not re.search(r"load <\d+ x float>", p.src)
  x = np.random.default_rng(1).standard_normal((2, 32, 4, 64), dtype=np.float32)
  out = np.zeros(x.size // 2, np.float32)
  run_kernel(ast, [out, x.reshape(-1)])
  np.testing.assert_array_equal(out.reshape(2, 4, 32, 32), x[..., ::2].transpose(0, 2, 3, 1))
