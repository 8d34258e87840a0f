"""The kernel AST reference executor (fuzz/oracles/kernel_ref.py) against the compiled CPU kernel and the PYTHON backend, on
every dtype: masked and Invalid indices, reductions, several stores, local BUFFERIZE, DEFINE_VAR, casts and bitcasts."""
import numpy as np
import pytest
from tinygrad.uop import Ops, AxisType
from tinygrad.uop.ops import UOp
from tinygrad.dtype import DType, dtypes, to_np_dtype, from_storage_np
from fuzz.oracles.kernel_ref import run_kernel, KernelRefError, KernelRef
from fuzz.oracles.differential import run_ast_on, random_inputs, compare_outputs, storage_of, kernel_buffers

ALL = [dtypes.bool, *dtypes.ints, *dtypes.floats]

def g(i: int, dt: DType, n: int) -> UOp: return UOp(Ops.DEFINE_GLOBAL, dt.ptr(n), arg=i)

def agree(ast: UOp, inputs: dict[int, np.ndarray], outs: dict[int, DType], var_vals=None, devices=("CPU", "PYTHON")):
  """The reference's outputs equal each device's: integers and bools exactly, floats within the dtype's tolerance."""
  ref = {n: inputs[n].copy() if n in inputs else np.zeros(p.size, to_np_dtype(p.base)) for n, p in kernel_buffers(ast).items()}
  run_kernel(ast, ref, var_vals)
  for dev in devices:
    got = run_ast_on(dev, ast, inputs, var_vals, opts=[])
    for n, dt in outs.items():
      assert (msg := compare_outputs(got[n], ref[n], dt)) is None, f"{dev} buffer {n} ({dt}): {msg}"
  return ref

def padded_elementwise(dt: DType, n: int = 12) -> tuple[UOp, dict[int, DType]]:
  """out0 = where(a < b, a, b*b) (a shifted by 2 with zero padding); out1 = max(a, b); out2 = a as float32;
  out3 = a bitcast to the int of its size; out4 = NOT a valid read (a fully masked load)."""
  i = UOp.range(n, 0)
  a = g(5, dt, n).index((i - 2).valid(i >= 2)).load()
  b = g(6, dt, n).index(i).load()
  int_of = {1: dtypes.uint8, 2: dtypes.int16, 4: dtypes.int32, 8: dtypes.uint64}[dt.itemsize]
  outs = {0: dt, 1: dt, 2: dtypes.float32, 3: int_of, 4: dt}
  vals = [(a < b).where(a, b * b), a.maximum(b), a.cast(dtypes.float32), a.bitcast(int_of) if dt is not dtypes.bool
          else a.cast(int_of), g(7, dt, n).index(i.valid(i < 0)).load()]
  return UOp.sink(*[g(k, outs[k], n).index(i).store(v).end(i) for k, v in enumerate(vals)]), outs

@pytest.mark.parametrize("dt", ALL, ids=str)
def test_elementwise_matches_cpu_and_python(dt: DType):
  ast, outs = padded_elementwise(dt)
  inputs = random_inputs(ast, seed=dt.priority)
  ref = agree(ast, inputs, outs)
  # the padded (masked) reads and the never-valid read are 0
  assert not ref[4].any() and not ref[2][:2].any() and ref[2][2:].tolist() == from_storage_np(inputs[5][:-2], dt).astype(np.float32).tolist()

@pytest.mark.parametrize("dt", [dtypes.int8, dtypes.uint8, dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.bool],
                         ids=str)
@pytest.mark.parametrize("op", [Ops.ADD, Ops.MUL, Ops.MAX])
def test_integer_reductions_wrap_like_the_devices(dt: DType, op: Ops):
  m, k = 6, 40
  i, r = UOp.range(m, 0), UOp.range(k, 1, AxisType.REDUCE)
  ast = UOp.sink(g(0, dt, m).index(i).store(g(1, dt, m * k).index(i * k + r).load().reduce(r, arg=op)).end(i))
  rs = np.random.default_rng(1)
  x = (rs.integers(0, 2, m * k) if dt is dtypes.bool else rs.integers(-100 if dt in dtypes.sints else 0, 120, m * k))
  ref = agree(ast, {1: x.astype(to_np_dtype(dt))}, {0: dt})
  assert ref[0].dtype == to_np_dtype(dt)

def test_float_sum_folds_in_loop_order():
  # the reference sums sequentially, as the unoptimized loop does: float32 rounding after every step
  k = 1000
  r = UOp.range(k, 0, AxisType.REDUCE)
  ast = UOp.sink(g(0, dtypes.float32, 1).index(UOp.const(dtypes.index, 0)).store(g(1, dtypes.float32, k).index(r).load().reduce(r)))
  x = np.random.default_rng(2).random(k, dtype=np.float32) * 1000
  out = np.zeros(1, np.float32)
  run_kernel(ast, [out, x])
  assert out[0] == np.cumsum(x, dtype=np.float32)[-1]

def test_max_reduction_propagates_nan_and_starts_from_the_minimum():
  k = 5
  r = UOp.range(k, 0, AxisType.REDUCE)
  ast = UOp.sink(g(0, dtypes.float32, 1).index(UOp.const(dtypes.index, 0)).store(g(1, dtypes.float32, k).index(r).load().reduce(r, arg=Ops.MAX)))
  for x, want in (([1.0, np.nan, 3.0, -1.0, 0.5], np.nan), ([-np.inf] * 5, -np.inf), ([-2.0, -7.0, -1.5, -9.0, -3.0], -1.5)):
    out = np.zeros(1, np.float32)
    run_kernel(ast, [out, np.array(x, np.float32)])
    assert (np.isnan(want) and np.isnan(out[0])) or out[0] == want

def test_low_precision_dtypes_round_as_the_devices():
  # bfloat16 and fp8 buffers hold bits; the arithmetic happens in float32 and rounds to the format
  for dt in (dtypes.bfloat16, dtypes.fp8e4m3, dtypes.fp8e5m2, dtypes.float16):
    n = 16
    i = UOp.range(n, 0)
    a, b = g(1, dt, n).index(i).load(), g(2, dt, n).index(i).load()
    ast = UOp.sink(g(0, dt, n).index(i).store(a * b + a).end(i))
    inputs = {1: storage_of(np.linspace(-300, 300, n), dt), 2: storage_of(np.linspace(-2, 3, n), dt)}
    ref = {0: np.zeros(n, to_np_dtype(dt)), **{k: v.copy() for k, v in inputs.items()}}
    run_kernel(ast, ref)
    got = run_ast_on("PYTHON", ast, inputs, opts=[])
    np.testing.assert_array_equal(got[0], ref[0], err_msg=str(dt))

def test_local_bufferize_and_define_var():
  f32 = dtypes.float32
  n = UOp.variable("n", 1, 8)
  i, j, k = UOp.range(n, 0), UOp.range(4, 1), UOp.range(4, 2)
  bz = UOp(Ops.BUFFERIZE, f32, (g(1, f32, 8 * 4).index(i * 4 + k).load() * 2.0, k))
  ast = UOp.sink(g(0, f32, 8 * 4).index(i * 4 + j).store(UOp(Ops.INDEX, f32.ptr(4), (bz, (j + 1) % 4)).load()).end(i, j))
  x = np.arange(32, dtype=np.float32)
  out = np.zeros(32, np.float32)
  run_kernel(ast, [out, x], {"n": 3})
  np.testing.assert_array_equal(out[:12].reshape(3, 4), np.roll(x[:12].reshape(3, 4) * 2, -1, axis=1))
  assert not out[12:].any()

def test_several_stores_and_an_int_wrap():
  i = UOp.range(4, 0)
  a = g(2, dtypes.int8, 4).index(i).load()
  ast = UOp.sink(g(0, dtypes.int8, 4).index(i).store(a * 3).end(i), g(1, dtypes.int8, 4).index(i).store(a // 0).end(i))
  x = np.array([100, -128, 7, -1], np.int8)
  outs = [np.zeros(4, np.int8), np.ones(4, np.int8), x]
  run_kernel(ast, outs)
  assert outs[0].tolist() == [44, -128, 21, -3] and outs[1].tolist() == [0, 0, 0, 0]

def test_out_of_bounds_access_is_reported():
  i = UOp.range(8, 0)
  ast = UOp.sink(g(0, dtypes.float32, 8).index(i).store(g(1, dtypes.float32, 8).index(i + 1).load()).end(i))
  with pytest.raises(KernelRefError, match=r"LOAD of Ops.DEFINE_GLOBAL 1 \(size 8\) at index 8 when r0=7"):
    run_kernel(ast, [np.zeros(8, np.float32), np.zeros(8, np.float32)])

def test_values_arrays_are_converted():
  # a float64 array for a float32 buffer is read and written as values (rounded to float32 on the way in)
  i = UOp.range(2, 0)
  ast = UOp.sink(g(0, dtypes.float32, 2).index(i).store(g(1, dtypes.float32, 2).index(i).load() + 0.0).end(i))
  out, x = np.zeros(2), np.array([0.1, 1e40])
  run_kernel(ast, {0: out, 1: x})
  assert out[0] == float(np.float32(0.1)) and out[1] == np.inf
  assert isinstance(KernelRef(ast, {0: out, 1: x}), KernelRef)

def test_gated_load_from_an_empty_buffer_reads_nothing():
  # cat of an empty tensor: its load is gated off everywhere and its buffer has no element (found by a tensor-level
  # campaign: the reference indexed element 0 of the empty array before applying the gate)
  n = 5
  i = UOp.range(n, 0)
  empty = g(2, dtypes.float32, 0).index(i.valid(i < 0)).load()
  ast = UOp.sink(g(0, dtypes.float32, n).index(i).store(g(1, dtypes.float32, n).index(i).load() + empty).end(i))
  x = np.arange(n, dtype=np.float32)
  ref = agree(ast, {1: x, 2: np.zeros(0, np.float32)}, {0: dtypes.float32})
  np.testing.assert_array_equal(ref[0], x)

def test_error_bounds_of_a_gated_load_from_an_empty_buffer():
  from fuzz.oracles.budget import run_budget_ref
  n = 4
  i = UOp.range(n, 0)
  empty = g(2, dtypes.float32, 0).index(i.valid(i < 0)).load()
  ast = UOp.sink(g(0, dtypes.float32, n).index(i).store((g(1, dtypes.float32, n).index(i).load() + empty).alu(Ops.EXP2)).end(i))
  bufs = {0: np.zeros(n, np.float32), 1: np.linspace(-1, 1, n, dtype=np.float32), 2: np.zeros(0, np.float32)}
  ref = run_budget_ref(ast, bufs)
  assert ref.buf_err[0].shape == (n,) and np.isfinite(ref.buf_err[0]).all()
  np.testing.assert_allclose(ref.bufs[0], np.exp2(bufs[1]), rtol=1e-6)

def test_tensor_level_checks_scheduled_kernels_with_no_kernel_backend(monkeypatch):
  # a finding of the scheduled kernels' reference names no backend: its repro and reduction run on none, so the tensor
  # level must check the scheduled kernels then too (it did only next to an nv/amd backend: such findings never
  # reproduced). A reference that fails on every kernel must show up with no backend at all.
  from fuzz.campaign.levels import TensorLevel
  lv = TensorLevel()
  case = lv.generate(bytes(range(64)))
  assert case.program.outputs
  def broken(*a, **k): raise KernelRefError("planted")
  import fuzz.oracles.budget
  monkeypatch.setattr(fuzz.oracles.budget, "run_budget_ref", broken)
  fails = lv.check([case], {})[0]
  assert any("planted" in f.message and f.stage == "tensor-reference" for f in fails), fails
