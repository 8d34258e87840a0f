"""On the CPU the LLVM renderer packs an elementwise kernel's compares and selects (with <N x i1> masks), shifts, integer
divisions and bitcasts into vector ops, as it packs its arithmetic. Each case runs with the default heuristics (the
elementwise lanes a whole vector register wide), is checked against numpy on edge values (NaN, signed zeros,
infinities, negative quotients, INT_MIN) and its IR is checked to hold the vector form."""
import re
import numpy as np
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp
from tinygrad.dtype import DType, dtypes, to_np_dtype, from_np_dtype

N = 64

def dg(i: int, dt: DType) -> UOp: return UOp(Ops.DEFINE_GLOBAL, dt.ptr(N), arg=i)

def run(run_kernel, out_dt: DType, fn, *arrays: np.ndarray) -> tuple[np.ndarray, str]:
  r = UOp.range(N, 0)
  loads = [dg(i + 1, from_np_dtype(a.dtype)).index(r).load() for i, a in enumerate(arrays)]
  ast = UOp.sink(dg(0, out_dt).index(r).store(fn(*loads)).end(r))
  bufs = [np.zeros(N, to_np_dtype(out_dt)), *[np.ascontiguousarray(a) for a in arrays]]
  prg = run_kernel(ast, bufs)
  return bufs[0], prg.src

def vec(pattern: str, src: str) -> bool: return re.search(pattern.replace("<N x", r"<\d+ x"), src) is not None

def floats(seed: int) -> np.ndarray:
  x = np.random.default_rng(seed).standard_normal(N).astype(np.float32)
  x[:8] = [np.nan, -0.0, 0.0, np.inf, -np.inf, 1.0, -1.0, np.nan]
  return x

def test_float_compare_and_select_are_vector_ops(run_kernel):
  a, b = floats(0), floats(1)
  b[8:12] = a[8:12]  # equal lanes
  got, src = run(run_kernel, dtypes.float32, lambda x, y: (x < y).where(x * 2.0, y * 3.0) + x.eq(y).where(x.const_like(1.0), x.const_like(0.0)), a, b)
  with np.errstate(invalid="ignore"):
    want = np.where(a < b, a * 2, b * 3) + np.where(a == b, 1, 0)
  np.testing.assert_array_equal(got, want.astype(np.float32))
  np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
  assert vec(r"fcmp olt <N x float>", src) and vec(r"select <N x i1> .*, <N x float>", src), src

def test_bool_lanes_are_stored_as_bytes(run_kernel):
  a, b = floats(2), floats(3)
  got, src = run(run_kernel, dtypes.bool, lambda x, y: (x < y) ^ x.ne(y), a, b)
  with np.errstate(invalid="ignore"):
    np.testing.assert_array_equal(got, (a < b) ^ (a != b))
  assert vec(r"fcmp une <N x float>", src) and vec(r"xor <N x i1>", src) and vec(r"store <N x i8>", src), src

def test_integer_division_and_shifts_are_vector_ops(run_kernel):
  rng = np.random.default_rng(4)
  a = rng.integers(-2**31, 2**31, N, dtype=np.int64).astype(np.int32)
  a[:4] = [-2**31, 2**31 - 1, -7, 7]
  d = rng.integers(1, 100, N).astype(np.int32) * rng.choice(np.array([-1, 1], np.int32), N)
  s = rng.integers(0, 32, N).astype(np.int32)
  fn = lambda x, y, z: (x // y) + (x % y) * 3 + (x << z) + (x >> z)  # noqa: E731
  got, src = run(run_kernel, dtypes.int32, fn, a, d, s)
  q = np.abs(a.astype(np.int64)) // np.abs(d) * np.sign(a.astype(np.int64)) * np.sign(d)  # C: toward zero
  m = a.astype(np.int64) - q * d
  want = (q + m * 3 + (a.astype(np.int64) << s) + (a.astype(np.int64) >> s)).astype(np.int64)
  np.testing.assert_array_equal(got, ((want + 2**31) % 2**32 - 2**31).astype(np.int32))
  assert vec(r"sdiv <N x i32>", src) and vec(r"srem <N x i32>", src) and vec(r"shl <N x i32>", src), src
  assert vec(r"ashr <N x i32>", src), src

def test_bitcast_is_a_vector_op(run_kernel):
  a = floats(5)
  got, src = run(run_kernel, dtypes.int32, lambda x: x.bitcast(dtypes.int32) & 0x7FFFFFFF, a)
  np.testing.assert_array_equal(got, a.view(np.int32) & 0x7FFFFFFF)
  assert vec(r"bitcast <N x float> .* to <N x i32>", src), src

def test_gated_bool_lanes_are_one_masked_byte_load(run_kernel):
  # out[i, j] = (i + j < 5 and b[i, j]) ? 2 : 5: the 4 lanes of j, each with its own gate, one masked vector load
  from tinygrad.codegen.opt import Opt, OptOps
  out, b = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(16), arg=0), UOp(Ops.DEFINE_GLOBAL, dtypes.bool.ptr(16), arg=1)
  i, j = UOp.range(4, 0), UOp.range(4, 1)
  val = b.index((i + j < 5).where(i * 4 + j, UOp.invalid())).load()
  ast = UOp.sink(out.index(i * 4 + j).store(val.where(UOp.const(dtypes.float32, 2.0), UOp.const(dtypes.float32, 5.0)))
                 .end(i, j))
  flags = np.random.default_rng(6).integers(0, 2, 16).astype(np.bool_)
  bufs = [np.zeros(16, np.float32), flags]
  prg = run_kernel(ast, bufs, opts=[Opt(OptOps.UPCAST, 1, 4)])
  gate = np.add.outer(np.arange(4), np.arange(4)) < 5
  np.testing.assert_array_equal(bufs[0], np.where(gate & flags.reshape(4, 4), 2.0, 5.0).reshape(16))
  assert "llvm.masked.load.v4i8" in prg.src and vec(r"icmp ne <N x i8>", prg.src), prg.src
