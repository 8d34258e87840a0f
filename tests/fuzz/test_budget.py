"""The ULP-budget oracle (fuzz/budget.py): exact where the IR is exact, the documented freedoms and no more, and it
catches a planted off-by-one in an index and a planted wrong rounding in a half conversion."""
import numpy as np
import pytest
from tinygrad.uop import Ops, AxisType
from tinygrad.uop.ops import UOp
from tinygrad.dtype import dtypes, DType
from tinygrad.renderer.cstyle import CRenderer
from fuzz.budget import run_budget_ref, compare_with_budget, buffer_dtypes, ulp
from fuzz.backends import KernelItem, CBackend, PythonBackend
from fuzz.oracles import kernel_inputs, storage_of

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
