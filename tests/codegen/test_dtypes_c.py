"""Casts, bitcasts and arithmetic of every dtype through the C renderer, against numpy and tinygrad/dtype.py's exact
conversions (bfloat16 and fp8 are stored as bits)."""
import numpy as np
import pytest
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp
from tinygrad.dtype import dtypes, to_np_dtype, float_to_bf16_np, bf16_to_float_np, float_to_fp8_np, fp8_to_float_np
from tinygrad.codegen.decompositions import threefry2x32

def dg(i, dt, n): return UOp(Ops.DEFINE_GLOBAL, dt.ptr(n), arg=i)
rng = np.random.default_rng(1)

def unary_kernel(src_dt, dst_dt, n, fn):
  out, a = dg(0, dst_dt, n), dg(1, src_dt, n)
  r = UOp.range(n, 0)
  return UOp.sink(out.index(r).store(fn(a.index(r).load())).end(r))

def run_unary(run_kernel, src_dt, dst_dt, x, fn):
  bufs = [np.zeros(len(x), to_np_dtype(dst_dt)), np.ascontiguousarray(x)]
  run_kernel(unary_kernel(src_dt, dst_dt, len(x), fn), bufs)
  return bufs[0]

def special_floats(n=200):
  x = np.concatenate([rng.standard_normal(n).astype(np.float32) * 10.0 ** rng.integers(-8, 6, n),
                      np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 448.0, 464.0, 480.0, 500.0, 57344.0, 61439.0, 61440.0, 1e-3, 2.0**-10,
                                2.0**-9, 1.5 * 2.0**-9, 2.0**-17, 3 * 2.0**-17, 1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8], np.float32)])
  return x.astype(np.float32)

def test_float_to_bfloat16_rounds_like_dtype_py(run_kernel):
  x = special_floats()
  got = run_unary(run_kernel, dtypes.float32, dtypes.bfloat16, x, lambda v: v.cast(dtypes.bfloat16))
  np.testing.assert_array_equal(got, float_to_bf16_np(x))

@pytest.mark.parametrize("dt", [dtypes.fp8e4m3, dtypes.fp8e5m2])
def test_float_to_fp8_rounds_like_dtype_py(run_kernel, dt):
  x = special_floats()
  got = run_unary(run_kernel, dtypes.float32, dt, x, lambda v: v.cast(dt))
  np.testing.assert_array_equal(got, float_to_fp8_np(x, dt))

@pytest.mark.parametrize("dt", [dtypes.fp8e4m3, dtypes.fp8e5m2])
def test_fp8_to_float_every_code(run_kernel, dt):
  codes = np.arange(256, dtype=np.uint8)
  got = run_unary(run_kernel, dt, dtypes.float32, codes, lambda v: v.cast(dtypes.float32))
  np.testing.assert_array_equal(got, fp8_to_float_np(codes, dt))

def test_bfloat16_to_float_and_half(run_kernel):
  codes = rng.integers(0, 2**16, 500).astype(np.uint16)
  got = run_unary(run_kernel, dtypes.bfloat16, dtypes.float32, codes, lambda v: v.cast(dtypes.float32))
  np.testing.assert_array_equal(got, bf16_to_float_np(codes))

def test_half_casts_and_arithmetic(run_kernel):
  x = special_floats()
  got = run_unary(run_kernel, dtypes.float32, dtypes.float16, x, lambda v: v.cast(dtypes.float16))
  with np.errstate(over="ignore"): exp = x.astype(np.float16)
  np.testing.assert_array_equal(got.view(np.uint16), exp.view(np.uint16))
  h = rng.standard_normal(64).astype(np.float16)
  got = run_unary(run_kernel, dtypes.float16, dtypes.float16, h, lambda v: v * v + v)
  np.testing.assert_array_equal(got, h * h + h)

def test_bfloat16_arithmetic_goes_through_float(run_kernel):
  a = float_to_bf16_np(rng.standard_normal(64).astype(np.float32))
  got = run_unary(run_kernel, dtypes.bfloat16, dtypes.bfloat16, a, lambda v: v * v + v.const_like(1.0))
  # every bfloat16 op rounds its result to bfloat16
  f = bf16_to_float_np(a)
  sq = bf16_to_float_np(float_to_bf16_np(f * f))
  np.testing.assert_array_equal(got, float_to_bf16_np(sq + np.float32(1.0)))

@pytest.mark.parametrize("src,dst", [(dtypes.float32, dtypes.int32), (dtypes.int32, dtypes.float32), (dtypes.float64, dtypes.int64),
                                     (dtypes.int8, dtypes.float32), (dtypes.uint8, dtypes.int32), (dtypes.int32, dtypes.int8),
                                     (dtypes.float32, dtypes.bool), (dtypes.bool, dtypes.float32), (dtypes.float32, dtypes.float64),
                                     (dtypes.uint32, dtypes.uint64), (dtypes.int64, dtypes.int16)])
def test_native_casts_match_numpy(run_kernel, src, dst):
  if dtypes.is_float(src): x = (rng.standard_normal(100) * 100).astype(to_np_dtype(src))
  elif src is dtypes.bool: x = rng.integers(0, 2, 100).astype(np.bool_)
  else: x = rng.integers(max(-1000, dtypes.min(src)), min(1000, dtypes.max(src)), 100).astype(to_np_dtype(src))
  if dst is dtypes.bool: x[::7] = 0
  got = run_unary(run_kernel, src, dst, x, lambda v: v.cast(dst))
  # C truncates float->int toward zero, as numpy's astype does
  np.testing.assert_array_equal(got, x.astype(to_np_dtype(dst)))

def test_bitcast_float_int(run_kernel):
  x = special_floats()
  got = run_unary(run_kernel, dtypes.float32, dtypes.int32, x, lambda v: v.bitcast(dtypes.int32))
  np.testing.assert_array_equal(got, x.view(np.int32))

def test_int_division_truncates_like_c(run_kernel):
  x = rng.integers(-100, 100, 64).astype(np.int32)
  q = run_unary(run_kernel, dtypes.int32, dtypes.int32, x, lambda v: (v // 7) * 1000 + v % 7)
  tq = np.trunc(x / 7).astype(np.int32)
  np.testing.assert_array_equal(q, tq * 1000 + (x - tq * 7))

def test_max_where_comparisons(run_kernel):
  x = special_floats()
  got = run_unary(run_kernel, dtypes.float32, dtypes.float32, x, lambda v: (v < 1.0).where(v.maximum(v.const_like(0.5)), v * 2))
  exp = np.where(x < 1.0, np.maximum(x, np.float32(0.5)), x * 2)
  np.testing.assert_array_equal(got, exp)

def test_transcendentals_native(run_kernel):
  x = rng.random(64).astype(np.float32) * 4 + 0.1
  got = run_unary(run_kernel, dtypes.float32, dtypes.float32, x, lambda v: v.exp2() + v.log2() + v.sin() + v.sqrt())
  np.testing.assert_allclose(got, np.exp2(x) + np.log2(x) + np.sin(x) + np.sqrt(x), rtol=1e-5)

def test_threefry_matches_reference(run_kernel):
  x = rng.integers(0, 2**63, 40, dtype=np.uint64)
  key = 0x1234_5678_9ABC_DEF0
  got = run_unary(run_kernel, dtypes.uint64, dtypes.uint64, x, lambda v: v.threefry(v.const_like(key)))
  np.testing.assert_array_equal(got, np.array([threefry2x32(int(v), key) for v in x], np.uint64))

def test_threefry_reference_known_answer():
  # Random123's published known-answer vector for threefry2x32_20: ctr=(0,0), key=(0,0) -> (0x6b200159, 0x99ba4efe)
  assert threefry2x32(0, 0) == 0x99ba4efe << 32 | 0x6b200159

@pytest.mark.parametrize("op,npf,lo,hi", [(Ops.EXP2, np.exp2, -140.0, 127.0), (Ops.LOG2, np.log2, 1e-30, 1e30), (Ops.SIN, np.sin, -200.0, 200.0)])
def test_transcendental_polynomials_match_numpy(run_kernel, op, npf, lo, hi):
  from tinygrad.helpers import Context
  x = rng.uniform(lo, hi, 300).astype(np.float32) if op is not Ops.LOG2 else np.exp(rng.uniform(np.log(lo), np.log(hi), 300)).astype(np.float32)
  x = np.concatenate([x, np.array([0.0, -0.0, 1.0, 0.5, np.inf, -np.inf, np.nan, 1e-40, -3.0], np.float32)])
  with Context(TRANSCENDENTAL=2): got = run_unary(run_kernel, dtypes.float32, dtypes.float32, x, lambda v: v.alu(op))
  with np.errstate(all="ignore"): exp = npf(x.astype(np.float64)).astype(np.float32)
  np.testing.assert_array_equal(np.isnan(got), np.isnan(exp))
  ok = ~np.isnan(exp)
  # NOTE: subnormal exp2 results keep fewer bits (atol of a few subnormal ulps)
  np.testing.assert_allclose(got[ok], exp[ok], rtol=3e-6, atol=2e-6 if op is Ops.SIN else 1e-44)

@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.float64, dtypes.int32, dtypes.uint8, dtypes.int64, dtypes.bfloat16, dtypes.bool])
def test_upcast_vectors_of_every_dtype(run_kernel, dt):
  from tinygrad.codegen.opt import Opt, OptOps
  n = 32
  out, a, b = dg(0, dt, n), dg(1, dt, n), dg(2, dt, n)
  r = UOp.range(n, 0)
  x, y = a.index(r).load(), b.index(r).load()
  val = (x | y) if dt is dtypes.bool else x * y + x
  ast = UOp.sink(out.index(r).store(val).end(r))
  npdt = to_np_dtype(dt)
  if dt is dtypes.bfloat16: xs = [float_to_bf16_np(rng.standard_normal(n).astype(np.float32)) for _ in range(2)]
  elif dt is dtypes.bool: xs = [rng.integers(0, 2, n).astype(np.bool_) for _ in range(2)]
  else: xs = [rng.integers(0, 10, n).astype(npdt) for _ in range(2)]
  bufs = [np.zeros(n, npdt), *xs]
  prg = run_kernel(ast, bufs, opts=[Opt(OptOps.UPCAST, 0, 4)])
  if dt is dtypes.bool: exp = xs[0] | xs[1]
  elif dt is dtypes.bfloat16:
    f0, f1 = bf16_to_float_np(xs[0]), bf16_to_float_np(xs[1])
    exp = float_to_bf16_np(bf16_to_float_np(float_to_bf16_np(f0 * f1)) + f0)
  else: exp = xs[0] * xs[1] + xs[0]
  np.testing.assert_array_equal(bufs[0], exp)
  assert ("4 __attribute__" in prg.src) == (dt not in (dtypes.bfloat16, dtypes.bool))
