"""The ULP-budget oracle (fuzz/oracles/budget.py): exact where the IR is exact, the documented freedoms and no more, and it
catches a planted off-by-one in an index and a planted wrong rounding in a half conversion."""
import numpy as np
import pytest
from tinygrad.uop import Ops, AxisType
from tinygrad.uop.ops import UOp
from tinygrad.dtype import dtypes, DType
from tinygrad.renderer.cstyle import CRenderer
from fuzz.oracles.budget import run_budget_ref, compare_with_budget, buffer_dtypes, ulp
from fuzz.campaign.backends import KernelItem, CBackend, PythonBackend
from fuzz.oracles.differential import kernel_inputs, storage_of

def g(i: int, dt: DType, n: int) -> UOp: return UOp(Ops.DEFINE_GLOBAL, dt.ptr(n), arg=i)

def item(ast: UOp, inputs=None, seed=0) -> KernelItem:
  inputs = inputs if inputs is not None else kernel_inputs(ast, seed, p_edge=0.0)
  return KernelItem(ast, {}, [], inputs, run_budget_ref(ast, inputs), buffer_dtypes(ast), seed)

def check(backend, it: KernelItem):
  return backend.check_kernels([it])[0]

def copy_kernel(n=64):
  i = UOp.range(n, 0)
  return UOp.sink(g(0, dtypes.float32, n).index(i).store(g(1, dtypes.float32, n + 1).index(i).load() * 2.0).end(i))

def half_cast_kernel(n=256):
  i = UOp.range(n, 0)
  return UOp.sink(g(0, dtypes.float16, n).index(i).store(g(1, dtypes.float32, n).index(i).load().cast(dtypes.float16))
                  .end(i))

def test_exact_kernels_pass_on_cpu_and_python():
  for ast in (copy_kernel(), half_cast_kernel()):
    it = item(ast)
    assert check(CBackend(), it) is None and check(PythonBackend(), it) is None

def test_an_off_by_one_in_an_index_is_caught(monkeypatch):
  orig = CRenderer._ptr
  def ptr(self, st, idx):
    p = orig(self, st, idx)
    # the planted bug: loads from buffer 1 read one element further on
    return p[:-1] + "+1)" if idx.src[0].op is Ops.DEFINE_GLOBAL and idx.src[0].arg == 1 else p
  monkeypatch.setattr(CRenderer, "_ptr", ptr)
  f = check(CBackend(), item(copy_kernel()))
  assert f is not None and f.stage == "compare" and f.kind == "value mismatch", f

def test_a_wrong_rounding_in_a_half_conversion_is_caught(monkeypatch):
  orig = CRenderer.render_cast
  def render_cast(self, x, src, dt):
    if dt.scalar() is not dtypes.float16 or src.scalar() is not dtypes.float32: return orig(self, x, src, dt)
    # the planted bug: float -> half rounds toward zero instead of to nearest even
    return (f"({{ float f_ = ({x}); _Float16 h_ = (_Float16)f_; float b_ = (float)h_; if ((b_ > f_ && f_ > 0) || "
            f"(b_ < f_ && f_ < 0)) {{ unsigned short u_; __builtin_memcpy(&u_, &h_, 2); u_ -= 1; "
            f"__builtin_memcpy(&h_, &u_, 2); }} h_; }})")
  monkeypatch.setattr(CRenderer, "render_cast", render_cast)
  f = check(CBackend(), item(half_cast_kernel()))
  assert f is not None and f.kind == "value mismatch" and "bound 0" in f.message, f

def test_one_ulp_off_in_a_plain_add_is_flagged():
  n = 32
  i = UOp.range(n, 0)
  a, b = g(1, dtypes.float32, n).index(i).load(), g(2, dtypes.float32, n).index(i).load()
  ast = UOp.sink(g(0, dtypes.float32, n).index(i).store(a + b).end(i))
  it = item(ast)
  got = {k: v.copy() for k, v in it.ref.bufs.items()}
  assert compare_with_budget(it.ref, got, it.dtypes) is None
  got[0][7] = np.nextafter(got[0][7], np.float32(np.inf))
  assert "value mismatch" in (compare_with_budget(it.ref, got, it.dtypes) or "")

def test_contraction_is_within_budget_and_the_budget_is_tight():
  # a*b+c may be one fused multiply-add on the CPU (gcc contracts at -O2 where the machine has FMA)
  n = 512
  i = UOp.range(n, 0)
  a, b, c = (g(k, dtypes.float32, n).index(i).load() for k in (1, 2, 3))
  ast = UOp.sink(g(0, dtypes.float32, n).index(i).store(a * b + c).end(i))
  it = item(ast, seed=3)
  assert check(CBackend(), it) is None
  bound = it.ref.buf_err[0]
  v = it.ref.bufs[0].astype(np.float64)
  prod = (it.inputs[1].astype(np.float64) * it.inputs[2]).astype(np.float32)
  # half an ulp of the product, one ulp of the result, nothing more (and the margin for the bound's own rounding)
  assert np.all(bound <= (0.5 * ulp(prod, dtypes.float32) + ulp(v, dtypes.float32)) * (1 + 2 ** -19))
  assert np.all(bound > 0)

@pytest.mark.parametrize("op", [Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT])
def test_transcendentals_within_their_budget_and_not_beyond(op):
  n = 256
  i = UOp.range(n, 0)
  x = g(1, dtypes.float32, n).index(i).load()
  src = UOp(Ops.MAX, dtypes.float32, (x, UOp.const(dtypes.float32, 1e-3))) if op in (Ops.LOG2, Ops.SQRT) else x
  ast = UOp.sink(g(0, dtypes.float32, n).index(i).store(UOp(op, dtypes.float32, (src,))).end(i))
  it = item(ast, inputs={1: storage_of(np.random.default_rng(1).uniform(-20, 20, n), dtypes.float32),
                         0: np.zeros(n, np.float32)})
  assert check(CBackend(), it) is None and check(PythonBackend(), it) is None
  got = {k: v.copy() for k, v in it.ref.bufs.items()}
  # 64 ulps off: beyond every documented budget (float32 transcendentals: 8 ulps; SQRT is exact)
  got[0][5] = got[0][5] + np.float32(64) * np.spacing(np.abs(got[0][5]))
  assert compare_with_budget(it.ref, got, it.dtypes) is not None

def test_nan_and_inf_must_match_exactly():
  n = 4
  i = UOp.range(n, 0)
  ast = UOp.sink(g(0, dtypes.float32, n).index(i).store(g(1, dtypes.float32, n).index(i).load() * 2.0).end(i))
  it = item(ast, inputs={1: np.array([np.nan, np.inf, -np.inf, 1.0], np.float32), 0: np.zeros(n, np.float32)})
  for k, bad in ((0, 1.0), (1, 3e38), (2, np.inf), (3, np.nan)):
    got = {b: v.copy() for b, v in it.ref.bufs.items()}
    got[0][k] = bad
    assert compare_with_budget(it.ref, got, it.dtypes) is not None, k

def test_a_bitcast_of_a_computed_nan_is_unchecked_and_only_there():
  # sqrt of a negative is a NaN whose sign IEEE 754 leaves open (x86: -NaN, CUDA: +NaN); its bits through a float
  # bitcast are unchecked, while the bitcast of an ordinary square root must match bit for bit
  n = 2
  x = g(1, dtypes.float32, n).index(UOp.range(n, 0)).load()
  i = x.src[0].src[1]
  ast = UOp.sink(g(0, dtypes.int32, n).index(i).store(x.sqrt().bitcast(dtypes.int32)).end(i))
  it = item(ast, inputs={1: np.array([-4.0, 4.0], np.float32), 0: np.zeros(n, np.int32)})
  assert np.isinf(it.ref.buf_err[0][0]) and it.ref.buf_err[0][1] == 0
  # float -> float: the NaN's bits become a bfloat16 number (a bitcast to the same dtype folds away)
  h = g(1, dtypes.float16, n).index(i).load()
  ast = UOp.sink(g(0, dtypes.bfloat16, n).index(i).store(h.sqrt().bitcast(dtypes.bfloat16)).end(i))
  it = item(ast, inputs={1: np.array([-4.0, 4.0], np.float16), 0: np.zeros(n, np.uint16)})
  assert np.isinf(it.ref.buf_err[0][0]) and it.ref.buf_err[0][1] == 0
  got = {b: v.copy() for b, v in it.ref.bufs.items()}
  got[0][0] ^= 0x8000
  assert compare_with_budget(it.ref, got, it.dtypes) is None
  got[0][1] += 1
  assert compare_with_budget(it.ref, got, it.dtypes) is not None

def test_an_uncertain_comparison_is_not_checked():
  # exp2 has a budget; comparing its result with a value it is within one budget of can go either way
  n = 1
  x = g(1, dtypes.float32, 1).index(UOp.const(dtypes.index, 0)).load()
  e = UOp(Ops.EXP2, dtypes.float32, (x,))
  ast = UOp.sink(g(0, dtypes.bool, n).index(UOp.const(dtypes.index, 0)).store(e < UOp.const(dtypes.float32, 8.0)))
  it = item(ast, inputs={1: np.array([3.0], np.float32), 0: np.zeros(1, np.bool_)})
  assert np.isinf(it.ref.buf_err[0][0])
  got = {b: v.copy() for b, v in it.ref.bufs.items()}
  got[0][0] = not got[0][0]
  assert compare_with_budget(it.ref, got, it.dtypes) is None

@pytest.mark.parametrize("dt", [dtypes.float64, dtypes.float32])
def test_a_reordered_mul_reduce_is_within_budget_in_every_float(dt):
  # a MUL REDUCE may be reassociated; the budget's growth (1+u)**(2n) was computed as a power in float64, where 1 + u
  # is exactly 1 for float64's u: the float64 budget was 0 and a one-ulp reordering (x**16 by squaring) a finding
  n = 16
  ast = UOp.sink(g(0, dt, 1).index(UOp.const(dtypes.index, 0)).store(
    g(1, dt, 1).index(UOp.const(dtypes.index, 0)).load().reduce(UOp.range(n, 1, AxisType.REDUCE), arg=Ops.MUL)))
  it = item(ast)
  got = {k: v.copy() for k, v in it.ref.bufs.items()}
  assert compare_with_budget(it.ref, got, it.dtypes) is None
  got[0][0] = np.nextafter(got[0][0], got[0].dtype.type(np.inf))
  assert compare_with_budget(it.ref, got, it.dtypes) is None, "one ulp of a 16-step product is within its budget"
  got[0][0] = got[0][0] * (1 + 1e-3)
  assert "value mismatch" in (compare_with_budget(it.ref, got, it.dtypes) or ""), "and 1e-3 relative is not"

# ---- MUL REDUCE in another order: overflow and underflow of a partial product ----

def product_kernel(dt: DType, n: int):
  r = UOp.range(n, 1, AxisType.REDUCE)
  return UOp.sink(g(0, dt, 1).index(UOp.const(dtypes.index, 0)).store(g(1, dt, n).index(r).load().reduce(r, arg=Ops.MUL)))

def values(storage: np.ndarray, dt: DType) -> np.ndarray:
  from tinygrad.dtype import from_storage_np
  return from_storage_np(storage, dt).astype(np.float64)

def round_to(x: np.ndarray, dt: DType) -> np.ndarray:
  with np.errstate(all="ignore"): return values(storage_of(np.asarray(x, np.float64), dt), dt)

def product_in_order(vals: np.ndarray, dt: DType, rs: np.random.Generator) -> float:
  """The product as a target computing it in some order does: a random tree of pairwise products, each rounded to dt
  (float16/bfloat16 products of two values are exact in float32, so one rounding of the float32 product is the op)."""
  parts = [float(x) for x in round_to(vals, dt)]
  while len(parts) > 1:
    i, j = sorted(rs.choice(len(parts), 2, replace=False))
    with np.errstate(all="ignore"): p = float(round_to(np.float32(parts[i]) * np.float32(parts[j]), dt))
    parts = [x for k, x in enumerate(parts) if k not in (i, j)] + [p]
  return parts[0]

@pytest.mark.parametrize("dt", [dtypes.bfloat16, dtypes.float16, dtypes.float32, dtypes.fp8e4m3, dtypes.fp8e5m2])
def test_mul_reduce_in_any_order_is_within_its_bound(dt):
  # the bound is derived for every order (fl(x*y) = x*y(1+d) + h); products of factors spanning the whole range, some
  # pairs overflowing, some underflowing, in 40 random orders each: every result is within the bound (or unchecked)
  from fuzz.oracles.budget import FLOAT_FORMAT
  mant, emin, maxf = FLOAT_FORMAT[dt]
  rs = np.random.default_rng(0)
  n, checked = (6 if dt.itemsize == 1 else 12), 0
  ast = product_kernel(dt, n)
  for trial in range(60):
    scale = rs.choice([1.0, 2.0 ** (emin // 3), 2.0 ** -(emin // 3)], n, p=[0.6, 0.2, 0.2])
    vals = round_to(rs.normal(0, 2, n) * scale, dt)
    it = item(ast, inputs={1: storage_of(vals, dt), 0: storage_of(np.zeros(1), dt)})
    bound = it.ref.buf_err[0][0]
    want = float(values(it.ref.bufs[0], dt)[0])
    if not np.isfinite(bound): continue
    checked += 1
    for _ in range(40):
      got = product_in_order(vals, dt, rs)
      assert got == want or abs(got - want) <= bound, (trial, vals, got, want, bound)
  assert checked >= 15, checked

def test_mul_reduce_that_may_overflow_in_another_order_is_unchecked_and_only_there():
  # finding 904efb65a89e: 0 * max * max * tiny * tiny is 0 in order, but a grouped reduce multiplied max * max first
  # (inf) and then the masked 0 (inf * 0 = NaN). The overflow check took the product of all nonzero factors (~1e-3),
  # not the largest partial product (max * max)
  dt, big, tiny = dtypes.bfloat16, 3.3895313892515355e38, 9.183549615799121e-41
  ast = product_kernel(dt, 5)
  it = item(ast, inputs={1: storage_of(np.array([0.0, big, big, tiny, tiny]), dt), 0: storage_of(np.zeros(1), dt)})
  assert np.isinf(it.ref.buf_err[0][0])
  # the same shape where no order overflows: the masked zero makes the result exactly 0 in every order, so a NaN (what
  # the wrong order gives) or any other value is a finding
  it = item(ast, inputs={1: storage_of(np.array([0.0, 3.0, 3.0, 0.5, 0.5]), dt), 0: storage_of(np.zeros(1), dt)})
  assert it.ref.buf_err[0][0] == 0
  for bad in (np.nan, 1.0, np.inf):
    got = {k: v.copy() for k, v in it.ref.bufs.items()}
    got[0] = storage_of(np.array([bad]), dt)
    assert compare_with_budget(it.ref, got, it.dtypes) is not None, bad

def test_mul_reduce_that_may_underflow_in_another_order_has_a_derived_bound_that_still_catches():
  # finding 3f7615b8e14d: 16 bfloat16 factors, one of them ~1e-39 and one ~3e37; in order the result is 1.16e-12, with
  # UNROLL 4 the tiny factor met small ones first and the partial product underflowed to 0. The bound now holds the
  # underflow: n * eta * prod max(|x|, 1), with eta the subnormal spacing
  from fuzz.campaign.levels import KernelLevel
  dt = dtypes.bfloat16
  vals = values(storage_of(np.array([1.0, 2.21875, -3.90625, 2.328125, 1.0, 3.3895313892515355e38, 1.3671875, -5.0,
                                     -1.234375, -3.6875, -7.0, -0.63671875, -1.1754943508222875e-38, 1.5390625,
                                     0.333984375, -2.015625]), dt), dt)
  case = KernelLevel().from_state({"graph": """
c0 = UOp.range(16, 0, AxisType.REDUCE)
c1 = UOp(Ops.DEFINE_GLOBAL, dtypes.bfloat16.ptr(16), arg=4).index(c0).load()
c2 = UOp(Ops.FDIV, dtypes.bfloat16, (c1, UOp.const(dtypes.bfloat16, 0.10009765625).reciprocal()))
c3 = UOp(Ops.DEFINE_GLOBAL, dtypes.bfloat16.ptr(1), arg=1).index(UOp.const(dtypes.index, 0)).store(c2.reduce(c0, arg=Ops.MUL))
ast = UOp.sink(c3)
""", "opts": [["UNROLL", 0, 4]], "var_vals": {}, "seed": 0})
  def ref_of(v):
    it = item(case.ast, inputs={4: storage_of(v, dt), 1: storage_of(np.zeros(1), dt)})
    return it, it.ref.buf_err[1][0], float(values(it.ref.bufs[1], dt)[0])
  it, bound, want = ref_of(vals)
  assert 1e-12 < abs(want) < 2e-12 and np.isfinite(bound) and bound < 0.1, (want, bound)
  got = {k: v.copy() for k, v in it.ref.bufs.items()}
  got[1] = storage_of(np.array([0.0]), dt)
  assert compare_with_budget(it.ref, got, it.dtypes) is None, "the underflowed order is within the bound"
  for bad in (np.nan, 1.0, -1.0, np.inf):
    got[1] = storage_of(np.array([bad]), dt)
    assert compare_with_budget(it.ref, got, it.dtypes) is not None, bad
  # the same kernel where no partial product can underflow: the bound is the rounding alone ((1+u)**32 - 1, 13% in
  # bfloat16), so a 50% error is caught
  it, bound, want = ref_of(np.abs(vals).clip(0.5, 2.0) * 10)
  assert bound < 0.2 * abs(want), (want, bound)
  got = {k: v.copy() for k, v in it.ref.bufs.items()}
  got[1] = storage_of(np.array([want * 1.5]), dt)
  assert "value mismatch" in (compare_with_budget(it.ref, got, it.dtypes) or "")

def test_add_reduce_that_may_overflow_in_another_order_is_unchecked_and_only_there():
  # max - max + 0.5max + 0.4max is 0.9max in order, but (max + 0.5max) overflows first in another order
  dt = dtypes.float32
  mx = float(np.finfo(np.float32).max)
  r = UOp.range(4, 1, AxisType.REDUCE)
  ast = UOp.sink(g(0, dt, 1).index(UOp.const(dtypes.index, 0)).store(g(1, dt, 4).index(r).load().reduce(r, arg=Ops.ADD)))
  it = item(ast, inputs={1: np.array([mx, -mx, 0.5 * mx, 0.4 * mx], np.float32), 0: np.zeros(1, np.float32)})
  assert np.isinf(it.ref.buf_err[0][0])
  # the same shape with values whose partial sums cannot overflow: a NaN, an inf or a 1e-3 relative error is caught
  it = item(ast, inputs={1: np.array([1e30, -1e30, 5e29, 4e29], np.float32), 0: np.zeros(1, np.float32)})
  want = float(it.ref.bufs[0][0])
  assert np.isfinite(it.ref.buf_err[0][0])
  for bad in (np.nan, np.inf, want * (1 + 1e-3)):
    got = {k: v.copy() for k, v in it.ref.bufs.items()}
    got[0][0] = bad
    assert compare_with_budget(it.ref, got, it.dtypes) is not None, bad

@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16, dtypes.fp8e4m3])
def test_tensor_core_exact_products_are_within_budget(dt):
  # an ADD REDUCE of CAST(MUL) in a low-precision dtype: a tensor core multiplies exactly, without rounding each product
  # to dt first (docs/ir.md, "Tensor cores"); the budget allows it (a tensor-level campaign flagged fp16 matmuls on nv
  # and amd before it did), and no more than half an ulp of each product beyond the reordered sum's
  m, k = 16, 24
  i, r = UOp.range(m, 0), UOp.range(k, 1, AxisType.REDUCE)
  a, b = g(1, dt, m * k).index(i * k + r).load(), g(2, dt, k).index(r).load()
  ast = UOp.sink(g(0, dtypes.float32, m).index(i).store((a * b).cast(dtypes.float32).reduce(r, arg=Ops.ADD)).end(i))
  it = item(ast, seed=5)
  va = values(it.inputs[1], dt).astype(np.float64).reshape(m, k)
  vb = values(it.inputs[2], dt).astype(np.float64)
  exact = (va * vb).sum(axis=1)  # exact products, summed in float64: what a tensor core approaches
  ref, bound = it.ref.bufs[0].astype(np.float64), it.ref.buf_err[0]
  assert np.all(np.abs(exact - ref) <= bound), np.max(np.abs(exact - ref) - bound)
  prods = round_to(va * vb, dt)
  rounding = np.sum(0.5 * ulp(prods, dt), axis=1) + 2 * (k - 1) * 2.0 ** -24 * np.sum(np.abs(prods), axis=1)
  assert np.all(bound <= (rounding + ulp(ref.astype(np.float32), dtypes.float32)) * (1 + 2 ** -19) + 1e-30)
