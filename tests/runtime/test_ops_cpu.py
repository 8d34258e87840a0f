import numpy as np
import pytest
from tinygrad.device import Device, Buffer, CompileError, DeviceOpenError
from tinygrad.dtype import dtypes
from tinygrad.helpers import Context
from tinygrad.runtime.support.compiler_cpu import CCompiler, CFLAGS
# NOTE: cpu() is the C CPU device (these tests hand it C source): "CPU" where it compiles C, else a CPU:k under CPU_LLVM=0
from tests.llvm_device import c_cpu_device as cpu

ADD_SRC = """
void add(float* restrict d0, const float* restrict d1, const float* restrict d2, int n, int core_id) {
  for (int i = 0; i < n; i++) d0[i] = d1[i] + d2[i];
}"""

def _buf(arr):
  from tinygrad.dtype import from_np_dtype
  return Buffer(cpu(), arr.size, from_np_dtype(arr.dtype)).copyin(memoryview(np.ascontiguousarray(arr)))

@pytest.fixture
def cachedb(tmp_path):
  with Context(CACHEDB=str(tmp_path / "cache.db"), CACHELEVEL=2): yield

def test_hand_written_kernel_runs():
  dev = Device[cpu()]
  a, b = np.random.default_rng(0).standard_normal((2, 100)).astype(np.float32)
  out = Buffer(cpu(), 100, dtypes.float32).allocate()
  prg = dev.runtime("add", dev.compiler.compile_cached(ADD_SRC))
  assert prg(out._buf, _buf(a)._buf, _buf(b)._buf, vals=(100,)) is None
  np.testing.assert_array_equal(out.numpy(), a + b)

def test_wait_returns_seconds():
  dev = Device[cpu()]
  out, a = Buffer(cpu(), 8, dtypes.float32).allocate(), _buf(np.ones(8, np.float32))
  t = dev.runtime("add", dev.compiler.compile_cached(ADD_SRC))(out._buf, a._buf, a._buf, vals=(8,), wait=True)
  assert isinstance(t, float) and 0 < t < 10
  assert out.numpy().tolist() == [2.0] * 8

def test_var_vals_bound_in_order():
  src = "void lin(int* restrict d0, int a, int b, int core_id) { d0[0] = a * 10 + b; }"
  dev = Device[cpu()]
  out = Buffer(cpu(), 1, dtypes.int32).allocate()
  dev.runtime("lin", dev.compiler.compile_cached(src))(out._buf, vals=(3, 4))
  assert out.numpy()[0] == 34

def test_compile_cache_hits_on_second_compile(cachedb):
  src = ADD_SRC + "\n// cache test\n"
  c1 = CCompiler()
  lib1 = c1.compile_cached(src)
  assert (c1.compiles, c1.cache_hits) == (1, 0)
  # a fresh compiler (as in a new process) finds it in sqlite
  c2 = CCompiler()
  lib2 = c2.compile_cached(src)
  assert (c2.compiles, c2.cache_hits) == (0, 1) and lib1 == lib2

def test_compile_cache_key_includes_flags(cachedb):
  src = ADD_SRC + "\n// flags test\n"
  CCompiler().compile_cached(src)
  c = CCompiler(flags=CFLAGS + ("-DSOMETHING",))
  c.compile_cached(src)
  assert (c.compiles, c.cache_hits) == (1, 0)

def test_compile_cache_off_at_cachelevel_0(tmp_path):
  with Context(CACHEDB=str(tmp_path / "c.db"), CACHELEVEL=0):
    c = CCompiler()
    c.compile_cached(ADD_SRC); c.compile_cached(ADD_SRC)
    assert (c.compiles, c.cache_hits) == (2, 0)

def test_compile_error_shows_numbered_source_and_compiler_output():
  src = "void bad(float* d0, int core_id) {\n  d0[0] = undefined_name;\n}"
  with pytest.raises(CompileError) as e: Device[cpu()].compiler.compile(src)
  msg = str(e.value)
  assert "undefined_name" in msg and "error" in msg.lower()
  assert "   2 |   d0[0] = undefined_name;" in msg

def test_missing_compiler_is_a_clear_error():
  with Context(CC="no-such-c-compiler-xyz"):
    with pytest.raises(DeviceOpenError, match="no-such-c-compiler-xyz"): CCompiler()

def test_missing_function_name():
  dev = Device[cpu()]
  with pytest.raises(RuntimeError, match="no function 'nope'"): dev.runtime("nope", dev.compiler.compile_cached(ADD_SRC))

def test_nan_semantics_hold():
  # no -ffast-math: x != x for NaN, and isnan survives optimisation
  src = "void nan_check(int* restrict d0, const float* restrict d1, int core_id) { d0[0] = d1[0] != d1[0]; d0[1] = d1[0] == d1[0]; }"
  dev = Device[cpu()]
  out = Buffer(cpu(), 2, dtypes.int32).allocate()
  dev.runtime("nan_check", dev.compiler.compile_cached(src))(out._buf, _buf(np.array([np.nan], np.float32))._buf)
  assert out.numpy().tolist() == [1, 0]

def test_threads_cover_every_core_id():
  src = "void ids(int* restrict d0, int core_id) { d0[core_id] = core_id + 1; }"
  dev = Device[cpu()]
  n = 16
  out = _buf(np.zeros(n, np.int32))
  dev.runtime("ids", dev.compiler.compile_cached(src))(out._buf, global_size=(n, 1, 1))
  assert out.numpy().tolist() == list(range(1, n + 1))

def test_threads_run_concurrently():
  # every call waits (up to 5 s) until all calls have started: possible only if they really run at the same time
  src = """
#include <time.h>
static int arrived = 0;
void meet(int* restrict d0, int n, int core_id) {
  __atomic_add_fetch(&arrived, 1, __ATOMIC_SEQ_CST);
  struct timespec st, now; clock_gettime(CLOCK_MONOTONIC, &st);
  do { clock_gettime(CLOCK_MONOTONIC, &now); } while (__atomic_load_n(&arrived, __ATOMIC_SEQ_CST) < n && now.tv_sec - st.tv_sec < 5);
  d0[core_id] = __atomic_load_n(&arrived, __ATOMIC_SEQ_CST);
}"""
  dev = Device[cpu()]
  n = min(dev.threads, 4)
  if n < 2: pytest.skip("needs at least 2 CPU threads")
  out = _buf(np.zeros(n, np.int32))
  t = dev.runtime("meet", dev.compiler.compile_cached(src))(out._buf, global_size=(n, 1, 1), vals=(n,), wait=True)
  assert out.numpy().tolist() == [n] * n and t < 5

def test_local_size_rejected_on_cpu():
  dev = Device[cpu()]
  out, a = Buffer(cpu(), 4, dtypes.float32).allocate(), _buf(np.ones(4, np.float32))
  prg = dev.runtime("add", dev.compiler.compile_cached(ADD_SRC))
  with pytest.raises(ValueError, match="local_size"): prg(out._buf, a._buf, a._buf, local_size=(2, 1, 1), vals=(4,))

def test_views_passed_as_pointers():
  dev = Device[cpu()]
  base = _buf(np.zeros(8, np.float32))
  v = base.view(4, dtypes.float32, 16).ensure_allocated()
  a = _buf(np.arange(4, dtype=np.float32))
  dev.runtime("add", dev.compiler.compile_cached(ADD_SRC))(v._buf, a._buf, a._buf, vals=(4,))
  assert base.numpy().tolist() == [0, 0, 0, 0, 0, 2, 4, 6]

def test_signed_overflow_wraps_like_python_and_numpy():
  # found by fuzz/gen/tensor_programs.py: without -fwrapv the C compiler folded (x+1) > x to true and (x*2)/2 to x at
  # INT_MAX, while the PYTHON backend, numpy and the simplifier's constant folding wrap
  from tinygrad import Tensor
  vals = np.array([2**31 - 1, 5, -2**31], np.int32)
  with np.errstate(over="ignore"): want_gt, want_div = (vals + 1) > vals, (vals * 2) // 2
  for dev in (cpu(), "CPU", "PYTHON"):
    x = Tensor(vals, device=dev)
    np.testing.assert_array_equal(((x + 1) > x).numpy(), want_gt)
    np.testing.assert_array_equal(((x * 2) // 2).numpy(), want_div)

def test_a_kernel_name_longer_than_a_file_name_compiles_and_runs():
  # a kernel of hundreds of axes has a name of hundreds of bytes; the shared object's temp file (and ptxas's files on
  # NV) are named after it and failed with ENAMETOOLONG. Its function keeps the full name.
  import numpy as np
  from tinygrad.uop import Ops
  from tinygrad.uop.ops import UOp
  from tinygrad.dtype import dtypes
  from tinygrad.codegen.opt import KernelInfo
  from tinygrad.helpers import file_stem
  from fuzz.oracles.differential import run_ast_on
  name = "r_" + "_".join(["2"] * 200)
  i = UOp.range(4, 0)
  g = [UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(4), arg=k) for k in range(2)]
  ast = UOp.sink(g[0].index(i).store(g[1].index(i).load() * 2.0).end(i), arg=KernelInfo(name=name))
  out = run_ast_on(cpu(), ast, {1: np.arange(4, dtype=np.float32)}, opts=[])
  np.testing.assert_array_equal(out[0], [0, 2, 4, 6])
  assert len(file_stem(name)) == 64 and file_stem(name) != file_stem(name[:-1] + "3") and file_stem("E_4") == "E_4"
