"""PYTHON backend: program text, dtype semantics of every op against independent references, threefry, the device."""
import math, pickle, struct
import numpy as np
import pytest
from tinygrad.uop import Ops, AxisType
from tinygrad.uop.ops import UOp
from tinygrad.dtype import dtypes, AddrSpace, to_np_dtype, float_to_bf16, bf16_to_float, float_to_fp8, fp8_to_float
from tinygrad.helpers import Context
from tinygrad.device import Device, Buffer, CompileError
from tinygrad.runtime.ops_python import PythonRenderer, PythonCompiler, PythonProgram, EmulatedKernelError, parse_program
from tinygrad.uop.semantics import threefry2x32

i32 = dtypes.int32
N = 64

def c(v, dt=i32) -> UOp: return UOp.const(dt, v)

def compile_run(uops: list[UOp], *bufs: np.ndarray, lsz=(1, 1, 1)) -> None:
  PythonProgram("k", PythonCompiler().compile(PythonRenderer().render(uops)))(*bufs, local_size=lsz)

def elementwise(op: Ops, in_dts, out_dt, n: int = N) -> list[UOp]:
  """out[i] = op(in0[i], in1[i], ...) with i = lidx0: a program of 5 + 3 * len(in_dts) lines."""
  lid = UOp.special(c(n), "lidx0", dtype=i32)
  out = UOp(Ops.DEFINE_GLOBAL, out_dt.ptr(n), arg=0)
  ins = [UOp(Ops.DEFINE_GLOBAL, dt.ptr(n), arg=k + 1) for k, dt in enumerate(in_dts)]
  loads = [b.index(lid).load() for b in ins]
  val = loads[0].cast(out_dt) if op is Ops.CAST else loads[0].bitcast(out_dt) if op is Ops.BITCAST else UOp(op, out_dt, tuple(loads))
  st = out.index(lid).store(val)
  return list(UOp.sink(st).toposort())[:-1]

def run_elementwise(op: Ops, out_dt, *arrays: np.ndarray, in_dts=None) -> np.ndarray:
  in_dts = in_dts or [out_dt] * len(arrays)
  out = np.zeros(len(arrays[0]), to_np_dtype(out_dt))
  compile_run(elementwise(op, in_dts, out_dt, len(out)), out, *arrays, lsz=(len(out), 1, 1))
  return out

# ---- program text ----

def test_render_parse_roundtrip_keeps_every_field():
  uops = elementwise(Ops.ADD, [dtypes.float32] * 2, dtypes.float32)
  r = UOp.range(c(4), 3, AxisType.REDUCE, dtype=i32)
  extra = [c(math.inf, dtypes.float32), c(-0.0, dtypes.float64), c(math.nan, dtypes.half), c(2**64 - 1, dtypes.uint64), c(True, dtypes.bool), c(4), r,
           UOp(Ops.DEFINE_LOCAL, dtypes.half.ptr(8, AddrSpace.LOCAL), arg=0), UOp(Ops.DEFINE_REG, dtypes.float32.vec(4).ptr(2, AddrSpace.REG), arg=1)]
  uops = extra + uops
  lines = parse_program(PythonRenderer().render(uops))
  assert len(lines) == len(uops)
  pos = {u: i for i, u in enumerate(uops)}
  for ln, u in zip(lines, uops):
    assert ln.op is u.op and ln.dtype is u.dtype and ln.src == tuple(pos[s] for s in u.src)
    if isinstance(u.arg, float) and math.isnan(u.arg): assert math.isnan(ln.arg)
    else: assert ln.arg == u.arg and type(ln.arg) is type(u.arg)
  assert math.copysign(1.0, lines[1].arg) == -1.0 and lines[6].arg == (3, AxisType.REDUCE)

def test_render_rejects_a_source_that_is_not_an_earlier_line():
  uops = elementwise(Ops.ADD, [dtypes.float32] * 2, dtypes.float32)
  with pytest.raises(ValueError, match=r"line 0 \(STORE\) uses sources \['INDEX', 'ADD'\] that are not earlier lines"):
    PythonRenderer().render(uops[-1:] + uops[:-1])

def test_compile_rejects_unbalanced_blocks_and_bad_text():
  r = UOp.range(c(4), 0, dtype=i32)
  with pytest.raises(CompileError, match="never closed"):
    PythonProgram("k", PythonCompiler().compile(PythonRenderer().render([c(4), r])))
  with pytest.raises(CompileError, match="cannot parse"): PythonCompiler().compile("[0, \"NOT_AN_OP\", \"int32\", [], null]")

def test_wmma_of_an_unknown_tensor_core_is_reported():
  uops = [UOp(Ops.WMMA, dtypes.float32.vec(8), arg=("mma.m99",))]
  with pytest.raises(EmulatedKernelError, match="unknown tensor core 'mma.m99'"): compile_run(uops)

# ---- integer arithmetic: bitwise equal to C semantics computed with Python ints ----

def wrap(v: int, dt) -> int:
  bits = 8 * dt.itemsize
  v &= (1 << bits) - 1
  return v - (1 << bits) if dt in dtypes.sints and v >> (bits - 1) else v

def c_div(a: int, b: int) -> int: return abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)

INT_REF = {
  Ops.ADD: lambda a, b, dt: wrap(a + b, dt), Ops.SUB: lambda a, b, dt: wrap(a - b, dt), Ops.MUL: lambda a, b, dt: wrap(a * b, dt),
  Ops.IDIV: lambda a, b, dt: wrap(c_div(a, b), dt), Ops.MOD: lambda a, b, dt: wrap(a - c_div(a, b) * b, dt),
  Ops.MAX: lambda a, b, dt: max(a, b), Ops.XOR: lambda a, b, dt: wrap(a ^ b, dt), Ops.OR: lambda a, b, dt: wrap(a | b, dt),
  Ops.AND: lambda a, b, dt: wrap(a & b, dt), Ops.SHL: lambda a, b, dt: wrap(a << b, dt), Ops.SHR: lambda a, b, dt: wrap(a >> b, dt),
  Ops.CMPLT: lambda a, b, dt: a < b, Ops.CMPNE: lambda a, b, dt: a != b, Ops.CMPEQ: lambda a, b, dt: a == b,
}

def int_inputs(dt, op: Ops, seed: int) -> tuple[np.ndarray, np.ndarray]:
  lo, hi = dtypes.min(dt), dtypes.max(dt)
  rs = np.random.default_rng(seed)
  edge = [lo, hi, 0, 1, -1 if lo < 0 else 2, lo + 1, hi - 1, 7]
  a = np.array(edge + [int(x) for x in rs.integers(lo, hi, N - len(edge), endpoint=True, dtype=np.int64 if hi < 2**63 else np.uint64)], dtype=object)
  b = np.array([int(x) for x in rs.integers(lo, hi, N, endpoint=True, dtype=np.int64 if hi < 2**63 else np.uint64)], dtype=object)
  b[:8] = [3, -3 if lo < 0 else 3, 5, 1, 2, 7, hi, lo]
  if op in (Ops.SHL, Ops.SHR): b = b % (8 * dt.itemsize)
  if op in (Ops.IDIV, Ops.MOD):
    b[b == 0] = 1
    if lo < 0: b[(a == lo) & (b == -1)] = 1  # INT_MIN / -1 overflows: undefined in C
  return a, b

@pytest.mark.parametrize("dt", dtypes.ints, ids=str)
@pytest.mark.parametrize("op", list(INT_REF), ids=lambda o: o.name)
def test_integer_binary_ops_bitwise_equal_to_c(dt, op):
  a, b = int_inputs(dt, op, seed=op.value * 31 + dt.itemsize)
  out_dt = dtypes.bool if op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ) else dt
  npdt = to_np_dtype(dt)
  got = run_elementwise(op, out_dt, a.astype(npdt), b.astype(npdt), in_dts=[dt, dt])
  ref = np.array([INT_REF[op](int(x), int(y), dt) for x, y in zip(a, b)], dtype=object).astype(to_np_dtype(out_dt))
  np.testing.assert_array_equal(got, ref)

@pytest.mark.parametrize("dt", dtypes.ints, ids=str)
def test_integer_neg_and_where_wrap(dt):
  a, _ = int_inputs(dt, Ops.NEG, seed=5)
  npdt = to_np_dtype(dt)
  got = run_elementwise(Ops.NEG, dt, a.astype(npdt))
  np.testing.assert_array_equal(got, np.array([wrap(-int(x), dt) for x in a], dtype=object).astype(npdt))

# ---- floats: against float64 arithmetic rounded once to the format (exact for + - * / and sqrt at these widths) ----

def round_to(x: float, dt) -> float:
  if dt is dtypes.bfloat16: return bf16_to_float(float_to_bf16(x))
  if dt in dtypes.fp8s: return fp8_to_float(float_to_fp8(x, dt), dt)
  with np.errstate(over="ignore"): return float(np.array(x, dtype=to_np_dtype(dt)))

def to_bits(vals, dt) -> np.ndarray:
  if dt is dtypes.bfloat16: return np.array([float_to_bf16(v) for v in vals], np.uint16)
  if dt in dtypes.fp8s: return np.array([float_to_fp8(v, dt) for v in vals], np.uint8)
  return np.array(vals, to_np_dtype(dt))

def from_bits(arr: np.ndarray, dt) -> list[float]:
  if dt is dtypes.bfloat16: return [bf16_to_float(int(x)) for x in arr]
  if dt in dtypes.fp8s: return [fp8_to_float(int(x), dt) for x in arr]
  return [float(x) for x in arr]

FLOAT_REF = {Ops.ADD: lambda a, b: a + b, Ops.SUB: lambda a, b: a - b, Ops.MUL: lambda a, b: a * b,
             Ops.FDIV: lambda a, b: a / b if b != 0 else math.copysign(math.inf, a) * math.copysign(1, b) if a != 0 else math.nan,
             Ops.MAX: max}

def float_inputs(dt, seed: int) -> tuple[list[float], list[float]]:
  rs = np.random.default_rng(seed)
  a = [round_to(float(x), dt) for x in rs.normal(0, 4, N)]
  b = [round_to(float(x), dt) for x in rs.normal(0, 4, N)]
  a[:6], b[:6] = [1.0, -2.5, 0.0, 3.0, 0.5, -0.0], [3.0, 0.0, 0.0, -0.0, 0.25, 2.0]
  return a, b

def same_float(x: float, y: float) -> bool: return (math.isnan(x) and math.isnan(y)) or (x == y and math.copysign(1, x) == math.copysign(1, y))

@pytest.mark.parametrize("dt", dtypes.floats, ids=str)
@pytest.mark.parametrize("op", list(FLOAT_REF), ids=lambda o: o.name)
def test_float_binary_ops_round_once_to_the_format(dt, op):
  a, b = float_inputs(dt, seed=op.value + 100 * dt.itemsize)
  got = from_bits(run_elementwise(op, dt, to_bits(a, dt), to_bits(b, dt)), dt)
  for x, y, g in zip(a, b, got):
    ref = round_to(FLOAT_REF[op](x, y), dt)
    assert same_float(g, ref) or (op is Ops.MAX and g == ref), f"{op} {dt}: {x} {y} -> {g}, expected {ref}"

@pytest.mark.parametrize("dt", dtypes.floats, ids=str)
def test_float_comparisons(dt):
  a, b = float_inputs(dt, seed=9)
  a[6], b[6] = math.nan, 1.0
  for op, fn in ((Ops.CMPLT, lambda x, y: x < y), (Ops.CMPNE, lambda x, y: x != y), (Ops.CMPEQ, lambda x, y: x == y)):
    got = run_elementwise(op, dtypes.bool, to_bits(a, dt), to_bits(b, dt), in_dts=[dt, dt])
    assert got.tolist() == [fn(x, y) for x, y in zip(a, b)], op

@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64], ids=str)
def test_float_unary_ops(dt):
  a = [round_to(x, dt) for x in np.linspace(0.1, 9.0, N)]
  exact = {Ops.SQRT: math.sqrt, Ops.NEG: lambda x: -x, Ops.TRUNC: math.trunc, Ops.RECIPROCAL: lambda x: 1 / x}
  for op, fn in exact.items():
    got = from_bits(run_elementwise(op, dt, to_bits(a, dt)), dt)
    assert got == [round_to(fn(x), dt) for x in a], op
  approx = {Ops.EXP2: lambda x: 2.0 ** x, Ops.LOG2: math.log2, Ops.SIN: math.sin}
  for op, fn in approx.items():
    got = from_bits(run_elementwise(op, dt, to_bits(a, dt)), dt)
    ulp = {dtypes.float16: 2**-10, dtypes.bfloat16: 2**-7, dtypes.float32: 2**-23, dtypes.float64: 2**-52}[dt]
    np.testing.assert_allclose(got, [fn(x) for x in a], rtol=2 * ulp, atol=ulp, err_msg=str(op))

def test_where_and_mulacc():
  a, b, d = np.arange(N, dtype=np.float32), np.full(N, 0.5, np.float32), np.full(N, -1.0, np.float32)
  np.testing.assert_array_equal(run_elementwise(Ops.MULACC, dtypes.float32, a, b, d), a * 0.5 - 1)
  cond = (np.arange(N) % 3 == 0)
  got = run_elementwise(Ops.WHERE, dtypes.float32, cond, a, d, in_dts=[dtypes.bool, dtypes.float32, dtypes.float32])
  np.testing.assert_array_equal(got, np.where(cond, a, d))

# ---- casts and bitcasts ----

def test_cast_float_to_int_truncates_toward_zero():
  x = np.array([-2.7, -0.5, 0.5, 2.7, 100.9, -100.9] * 11, np.float32)[:N]
  np.testing.assert_array_equal(run_elementwise(Ops.CAST, i32, x, in_dts=[dtypes.float32]), [math.trunc(float(v)) for v in x])

def test_cast_int_wraps_and_bool_is_nonzero():
  x = np.array([300, -1, 255, 256, 0, 2**31 - 1, -2**31, 7] * 8, np.int32)
  np.testing.assert_array_equal(run_elementwise(Ops.CAST, dtypes.uint8, x, in_dts=[i32]), [int(v) & 0xFF for v in x])
  np.testing.assert_array_equal(run_elementwise(Ops.CAST, dtypes.int8, x, in_dts=[i32]), [wrap(int(v), dtypes.int8) for v in x])
  f = np.array([0.0, -0.0, math.nan, 0.1, -3.0, math.inf, 1e-30, 0.0] * 8, np.float32)
  np.testing.assert_array_equal(run_elementwise(Ops.CAST, dtypes.bool, f, in_dts=[dtypes.float32]), [v != 0 for v in f])

@pytest.mark.parametrize("dt", [dtypes.bfloat16, dtypes.fp8e4m3, dtypes.fp8e5m2, dtypes.float16], ids=str)
def test_cast_float32_to_low_precision_rounds_as_the_format_defines(dt):
  rs = np.random.default_rng(3)
  x = np.concatenate([rs.normal(0, 100, N - 8), [1000.0, -1e6, 1e-9, 65519.0, 65520.0, math.inf, -math.inf, math.nan]]).astype(np.float32)
  got = run_elementwise(Ops.CAST, dt, x, in_dts=[dtypes.float32])
  assert [same_float(g, round_to(float(v), dt)) for g, v in zip(from_bits(got, dt), x)] == [True] * N
  if dt is dtypes.fp8e4m3: assert fp8_to_float(int(got[N - 8]), dt) == 448.0  # e4m3 saturates
  if dt is dtypes.fp8e5m2: assert fp8_to_float(int(got[N - 7]), dt) == -math.inf

@pytest.mark.parametrize("src,dst", [(dtypes.float32, i32), (dtypes.half, dtypes.int16), (i32, dtypes.float32),
                                     (dtypes.bfloat16, dtypes.uint16), (dtypes.uint8, dtypes.fp8e4m3), (dtypes.float64, dtypes.uint64)], ids=str)
def test_bitcast_keeps_the_bits(src, dst):
  rs = np.random.default_rng(4)
  raw = rs.integers(0, 256, N * src.itemsize, dtype=np.uint8)
  if src.itemsize == 4 and dtypes.is_float(src): raw.view(np.uint32)[:2] = [0x7FC00001, 0xFF800000]  # a NaN payload, -inf
  got = run_elementwise(Ops.BITCAST, dst, raw.view(to_np_dtype(src)), in_dts=[src])
  np.testing.assert_array_equal(got.view(np.uint8), raw)

# ---- threefry ----

@pytest.mark.parametrize("ctr,key,out", [((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
                                         ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
                                         ((0x243F6A88, 0x85A308D3), (0x13198A2E, 0x03707344), (0xC4923A9C, 0x483DF7A0))])
def test_threefry_matches_random123_known_answers(ctr, key, out):
  x, k = ctr[1] << 32 | ctr[0], key[1] << 32 | key[0]
  assert int(threefry2x32(np.array([x], np.uint64), np.array([k], np.uint64))[0]) == out[1] << 32 | out[0]

def test_threefry_op_in_a_program_matches_the_codegen_reference():
  dec = pytest.importorskip("tinygrad.codegen.decompositions")
  rs = np.random.default_rng(5)
  x, k = rs.integers(0, 2**64, N, dtype=np.uint64, endpoint=False), rs.integers(0, 2**64, N, dtype=np.uint64)
  got = run_elementwise(Ops.THREEFRY, dtypes.uint64, x, k)
  assert got.tolist() == [dec.threefry2x32(int(a), int(b)) for a, b in zip(x, k)]

# ---- the device ----

def test_device_runs_a_program_through_buffers():
  dev = Device["PYTHON"]
  assert isinstance(dev.renderer, PythonRenderer) and dev.renderer.has_local and not dev.renderer.has_threads
  uops = elementwise(Ops.ADD, [dtypes.float32] * 2, dtypes.float32, 16)
  lib = dev.compiler.compile_cached(dev.renderer.render(uops))
  prg = dev.runtime("add16", lib)
  a, b = np.arange(16, dtype=np.float32), np.ones(16, np.float32) * 3
  bufs = [Buffer("PYTHON", 16, dtypes.float32).allocate()] + [Buffer("PYTHON", 16, dtypes.float32).copyin(memoryview(x)) for x in (a, b)]
  t = prg(*[x._buf for x in bufs], global_size=(1, 1, 1), local_size=(16, 1, 1), wait=True)
  assert isinstance(t, float) and t >= 0
  np.testing.assert_array_equal(bufs[0].numpy(), a + b)

def test_program_on_a_buffer_view_is_bounded_by_the_view():
  base = Buffer("PYTHON", 32, dtypes.float32).allocate()
  view = base.view(16, dtypes.float32, 8 * 4)
  uops = elementwise(Ops.ADD, [dtypes.float32] * 2, dtypes.float32, 17)
  a = np.zeros(17, np.float32)
  with pytest.raises(EmulatedKernelError, match=r"STORE of global buffer 0 \(size 16\) at index 16"):
    compile_run(uops, view.ensure_allocated()._buf, a, a, lsz=(17, 1, 1))

def test_renderer_limits_follow_emulate_and_pickle():
  r = PythonRenderer()
  with Context(EMULATE="AMD"): assert r.shared_max == 65536 and r.local_max[2] == 1024
  with Context(EMULATE="NV"): assert r.shared_max == 49152 and r.local_max[2] == 64
  fixed = pickle.loads(pickle.dumps(PythonRenderer("NV")))
  assert fixed.shared_max == 49152 and fixed.device == "PYTHON"
  with pytest.raises(ValueError, match="EMULATE='TPU' is not a known target"): PythonRenderer("TPU")

def test_half_values_stay_half():
  # 2048 + 1 is not representable in half: each op rounds
  got = run_elementwise(Ops.ADD, dtypes.half, np.full(N, 2048, np.float16), np.ones(N, np.float16))
  assert (got == 2048).all() and struct.pack("<e", float(got[0])) == struct.pack("<e", 2048.0)

# ---- fuzz/oracles: the comparison ----

def test_compare_outputs_integers_must_be_equal():
  from fuzz.oracles.differential import compare_outputs
  a = np.arange(10, dtype=np.int32)
  assert compare_outputs(a, a.copy(), i32) is None
  b = a.copy(); b[7] += 1
  assert compare_outputs(a, b, i32) == "1 of 10 elements differ; first at [7]: np.int32(7) vs np.int32(8)"

def test_compare_outputs_float_tolerance_follows_dtype():
  from fuzz.oracles.differential import compare_outputs
  a = np.linspace(1, 2, 16, dtype=np.float32)
  assert compare_outputs(a, a * np.float32(1 + 2e-5), dtypes.float32) is None
  assert "differ beyond rtol=0.0001" in compare_outputs(a, a * np.float32(1 + 1e-3), dtypes.float32)
  h = a.astype(np.float16)
  assert compare_outputs(h, (a * np.float32(1 + 2e-3)).astype(np.float16), dtypes.float16) is None
  assert compare_outputs(a.astype(np.float64), a.astype(np.float64) * (1 + 1e-6), dtypes.float64) is not None

def test_compare_outputs_nan_and_inf_must_match():
  from fuzz.oracles.differential import compare_outputs
  a = np.array([1.0, np.nan, np.inf, -np.inf], np.float32)
  assert compare_outputs(a, a.copy(), dtypes.float32) is None
  assert "NaN on one side only" in compare_outputs(a, np.array([1.0, 0.0, np.inf, -np.inf], np.float32), dtypes.float32)
  assert "Inf differs" in compare_outputs(a, np.array([1.0, np.nan, -np.inf, -np.inf], np.float32), dtypes.float32)
  assert "Inf differs" in compare_outputs(a, np.array([1.0, np.nan, 3e38, -np.inf], np.float32), dtypes.float32)

def test_compare_outputs_decodes_bfloat16_and_fp8_bits():
  from fuzz.oracles.differential import compare_outputs
  bits = np.array([float_to_bf16(x) for x in (1.0, 2.0, 3.0)], np.uint16)
  near = np.array([float_to_bf16(x) for x in (1.0, 2.0, 3.0078125)], np.uint16)  # one bf16 ulp at 3.0 is 2**-6
  assert compare_outputs(bits, near, dtypes.bfloat16) is None
  assert compare_outputs(bits, bits + 64, dtypes.bfloat16) is not None  # a different exponent range entirely
  f8 = np.array([float_to_fp8(x, dtypes.fp8e4m3) for x in (1.0, -2.0, 448.0)], np.uint8)
  assert compare_outputs(f8, f8.copy(), dtypes.fp8e4m3) is None
  assert "differ" in compare_outputs(f8, f8 ^ np.uint8(0x80), dtypes.fp8e4m3)
