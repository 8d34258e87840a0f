"""The cases where LLVM's rules are stricter than C's (poison, immediate UB) and the IR defines a value: each guarded,
each value checked against numpy, the PYTHON backend's interpreter (the oracle) or the C backend."""
import re, subprocess, sys
import numpy as np
import pytest
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp
from tinygrad.dtype import dtypes, to_np_dtype
from tests.llvm.conftest import llvm_parts

def dg(i, dt, n): return UOp(Ops.DEFINE_GLOBAL, dt.ptr(n), arg=i)

def binary(run_kernel, dt, out_dt, a, b, fn):
  n = len(a)
  out, x, y = dg(0, out_dt, n), dg(1, dt, n), dg(2, dt, n)
  r = UOp.range(n, 0)
  ast = UOp.sink(out.index(r).store(fn(x.index(r).load(), y.index(r).load())).end(r))
  bufs = [np.zeros(n, to_np_dtype(out_dt)), np.ascontiguousarray(a), np.ascontiguousarray(b)]
  prg = run_kernel(ast, bufs)
  return bufs[0], prg

def test_max_propagates_nan_and_orders_signed_zeros_like_c(run_kernel):
  a = np.array([np.nan, 1.0, np.nan, -0.0, 0.0, -np.inf, np.inf, 2.0], np.float32)
  b = np.array([1.0, np.nan, np.nan, 0.0, -0.0, np.inf, 5.0, -3.0], np.float32)
  got, prg = binary(run_kernel, dtypes.float32, dtypes.float32, a, b, lambda x, y: x.maximum(y))
  # C's `a > b || a != a ? a : b`: a NaN on either side wins; max(-0.0, +0.0) is +0.0 and max(+0.0, -0.0) is -0.0
  want = np.array([np.nan, np.nan, np.nan, 0.0, -0.0, np.inf, np.inf, 2.0], np.float32)
  np.testing.assert_array_equal(got.view(np.uint32) & 0x7FFFFFFF != 0x7FC00000, want.view(np.uint32) & 0x7FFFFFFF != 0x7FC00000)
  np.testing.assert_array_equal(np.signbit(got[~np.isnan(got)]), np.signbit(want[~np.isnan(want)]))
  np.testing.assert_array_equal(got, want)

def test_fast_math_flags_are_contract_only(run_kernel):
  a = np.linspace(-2, 2, 16, dtype=np.float32)
  _, prg = binary(run_kernel, dtypes.float32, dtypes.float32, a, a + 1,
                  lambda x, y: (x * y + x / y - x.maximum(y)).sqrt().exp2() + (-x).reciprocal())
  for flag in ("fast", "nnan", "ninf", "nsz", "reassoc", "arcp", "afn"):
    assert f" {flag} " not in prg.src, f"fast-math flag {flag} would change NaN/Inf/-0.0 results"
  assert " contract " in prg.src

def test_half_arithmetic_is_not_contracted(run_kernel):
  h = np.random.default_rng(0).standard_normal(32).astype(np.float16)
  got, prg = binary(run_kernel, dtypes.float16, dtypes.float16, h, h, lambda x, y: x * y + x)
  np.testing.assert_array_equal(got, h * h + h)
  assert "llvm.fma" not in prg.src and "contract" not in prg.src

@pytest.mark.parametrize("dt", [dtypes.int32, dtypes.int64, dtypes.int8])
def test_signed_division_truncates_and_wraps(run_kernel, dt):
  npdt = to_np_dtype(dt)
  lo = np.iinfo(npdt).min
  a = np.array([7, -7, 7, -7, lo, lo, 100, -100, lo, 5], npdt)
  b = np.array([2, 2, -2, -2, -1, 1, 7, 7, 3, -1], npdt)
  q, prg = binary(run_kernel, dt, dt, a, b, lambda x, y: x // y)
  m, _ = binary(run_kernel, dt, dt, a, b, lambda x, y: x % y)
  # truncation toward zero; INT_MIN / -1 wraps to INT_MIN and INT_MIN % -1 is 0 (LLVM: immediate UB, x86: SIGFPE)
  np.testing.assert_array_equal(q, [3, -3, -3, 3, lo, lo, 14, -14, -(-int(lo) // 3), -5])
  np.testing.assert_array_equal(m, a - q * b)
  assert "icmp eq" in prg.src, "a divisor that may be -1 or 0 is guarded"

def test_division_by_zero_reads_zero_and_the_dividend(run_kernel):
  # DIV_BY_ZERO in tinygrad/renderer/llvmir.py: x // 0 reads 0 and x % 0 reads x (LLVM: immediate UB, x86: SIGFPE)
  a = np.array([7, -7, 0, 2**31 - 1, -2**31], np.int32)
  b = np.zeros(5, np.int32)
  q, _ = binary(run_kernel, dtypes.int32, dtypes.int32, a, b, lambda x, y: x // y)
  m, _ = binary(run_kernel, dtypes.int32, dtypes.int32, a, b, lambda x, y: x % y)
  np.testing.assert_array_equal(q, [0, 0, 0, 0, 0])
  np.testing.assert_array_equal(m, a)

def test_unsigned_division_by_zero_is_guarded(run_kernel):
  a, b = np.array([7, 2**32 - 1, 9], np.uint32), np.array([0, 2, 0], np.uint32)
  q, prg = binary(run_kernel, dtypes.uint32, dtypes.uint32, a, b, lambda x, y: x // y)
  np.testing.assert_array_equal(q, [0, (2**32 - 1) // 2, 0])
  assert "udiv" in prg.src

def test_division_by_a_constant_is_not_guarded():
  from tinygrad.codegen import get_program
  out, x = dg(0, dtypes.int32, 8), dg(1, dtypes.int32, 8)
  r = UOp.range(8, 0)
  ast = UOp.sink(out.index(r).store(x.index(r).load() // 7).end(r))
  src = get_program(ast, llvm_parts()[0]).src
  assert "select" not in src

def test_int_min_divided_by_minus_one_in_a_tensor_program():
  # a subprocess: a regression would kill the process with SIGFPE
  prog = ("import numpy as np\nfrom tinygrad import Tensor\n"
          "x = Tensor(np.array([-2**31, 7, -7, -2**31], np.int32)); y = Tensor(np.array([-1, -1, 2, 3], np.int32))\n"
          "print(x.idiv(y).tolist(), (x % y).tolist())\n")
  res = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=300,
                       env={**__import__("os").environ, "CPU_LLVM": "1", "DEV": "CPU"})
  assert res.returncode == 0, res.stderr[-2000:]
  # NOTE: Tensor's % is Python's modulo (the sign of the divisor)
  assert res.stdout.strip() == "[-2147483648, -7, -3, -715827882] [0, 0, 1, 1]"

def test_integer_arithmetic_wraps(run_kernel):
  a = np.array([2**31 - 1, -2**31, 123456789, -5], np.int32)
  b = np.array([1, -1, 1000, 2**30], np.int32)
  s, _ = binary(run_kernel, dtypes.int32, dtypes.int32, a, b, lambda x, y: x + y)
  p, prg = binary(run_kernel, dtypes.int32, dtypes.int32, a, b, lambda x, y: x * y)
  with np.errstate(over="ignore"):
    np.testing.assert_array_equal(s, a + b)
    np.testing.assert_array_equal(p, a * b)
  assert " nsw" not in prg.src and " nuw" not in prg.src

@pytest.mark.parametrize("dt", [dtypes.int32, dtypes.uint32, dtypes.int64])
def test_shift_amounts_are_taken_modulo_the_width(run_kernel, dt):
  # docs/ir.md section 5 (LLVM: an amount outside [0, width) is poison): the amount modulo the width
  npdt = to_np_dtype(dt)
  bits = np.dtype(npdt).itemsize * 8
  a = np.array([1, -8 if dt is not dtypes.uint32 else 8, 5, 3, 12345], npdt)
  b = np.array([bits, bits + 1, bits + 3, 1, 3], npdt)
  left, prg = binary(run_kernel, dt, dt, a, b, lambda x, y: x << y)
  right, _ = binary(run_kernel, dt, dt, a, b, lambda x, y: x >> y)
  np.testing.assert_array_equal(left, [1, a[1] << 1, 5 << 3, 6, 12345 << 3])
  np.testing.assert_array_equal(right, [1, a[1] >> 1, 5 >> 3, 1, 12345 >> 3])
  assert f"and {'i32' if bits == 32 else 'i64'}" in prg.src, "an amount that may leave the width is masked"

@pytest.mark.parametrize("dt", [dtypes.int32, dtypes.uint8, dtypes.int64, dtypes.int8, dtypes.uint32])
def test_float_to_int_saturates_and_nan_is_zero(run_kernel, dt):
  info = np.iinfo(to_np_dtype(dt))
  x = np.array([np.nan, np.inf, -np.inf, 3e20, -3e20, 2.9, -2.9, 100.5, -0.0], np.float32)
  n = len(x)
  out, a = dg(0, dt, n), dg(1, dtypes.float32, n)
  r = UOp.range(n, 0)
  bufs = [np.zeros(n, to_np_dtype(dt)), x]
  prg = run_kernel(UOp.sink(out.index(r).store(a.index(r).load().cast(dt)).end(r)), bufs)
  want = [0, info.max, info.min, info.max, info.min, 2, max(-2, info.min), min(100, info.max), 0]
  np.testing.assert_array_equal(bufs[0], np.array(want).astype(to_np_dtype(dt)))
  assert ".sat." in prg.src

def test_bool_is_a_byte_in_memory(run_kernel):
  n = 8
  out, a, b = dg(0, dtypes.bool, n), dg(1, dtypes.float32, n), dg(2, dtypes.bool, n)
  r = UOp.range(n, 0)
  x = np.array([1, -1, 0, np.nan, -0.0, 3, 0.5, -np.inf], np.float32)
  flags = np.array([1, 0, 1, 1, 0, 0, 1, 1], np.bool_)
  ast = UOp.sink(out.index(r).store(a.index(r).load().cast(dtypes.bool) ^ b.index(r).load()).end(r))
  bufs = [np.zeros(n, np.bool_), x, flags]
  prg = run_kernel(ast, bufs)
  # NOTE: NaN is true as a bool (NaN != 0), as in C
  np.testing.assert_array_equal(bufs[0], (x != 0) ^ flags)
  # NOTE: scalar or packed into vectors (the CPU packs bool lanes: <N x i8> in memory, <N x i1> in registers)
  for pat in (r"load (<\d+ x )?i8", r"store (<\d+ x )?i8", r"icmp ne (<\d+ x )?i8"): assert re.search(pat, prg.src), pat
