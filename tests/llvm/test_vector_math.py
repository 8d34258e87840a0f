"""float32 exp2, log2 and sin on the CPU's LLVM path through glibc's vector math library (renderer/llvmir.py, LIBMVEC):
the calls the renderer writes for every lane count, their values against numpy in float64 (special values included),
and one value's bits the same in a vector kernel and a scalar one (max's gradient compares a recomputed value with the
stored maximum)."""
import ctypes
import numpy as np
import pytest
from tinygrad import Tensor, Device
from tinygrad.codegen import get_program
from tinygrad.dtype import dtypes
from tinygrad.helpers import Context
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp
from tinygrad.renderer.llvmir import CPULLVMRenderer, LIBMVEC, _State, _libmvec
from tests.llvm.conftest import llvm_parts, run_program

def _host():
  from tinygrad.runtime.support.compiler_llvm import host_target
  return host_target()

needs_libmvec = pytest.mark.skipif(not _host().vector_math, reason="the host has no AVX2+FMA or no glibc libmvec 2.35+")
OPS = {Ops.EXP2: (lambda u: u.exp2(), np.exp2), Ops.LOG2: (lambda u: u.log2(), np.log2), Ops.SIN: (lambda u: u.sin(), np.sin)}

def ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
  """Distance in float32 steps (0 where both are NaN; huge where one is)."""
  def order(a):
    i = a.view(np.int32).astype(np.int64)
    return np.where(i < 0, -(2**31) - i, i)
  both_nan = np.isnan(got) & np.isnan(want)
  d = np.abs(order(got) - order(want))
  return np.where(both_nan, 0, np.where(np.isnan(got) | np.isnan(want), 2**40, d))

def inputs(op: Ops) -> np.ndarray:
  rng = np.random.default_rng(int(op.value))
  special = [-np.inf, np.inf, np.nan, -0.0, 0.0, 1.0, -1.0, 1e-45, -1e-45, 1e-40, 3.4e38, -3.4e38]
  spread = {Ops.EXP2: [-149.5, -150.0, -126.0, -125.9, 127.99, 128.0, 0.5, -0.5],
            Ops.LOG2: [2.0**-149, 2.0**-126, 0.99999994, 1.0000001, 3.0e38], Ops.SIN: [3.14159265, 1e6, 1e30, 105414.35]}[op]
  scale = {Ops.EXP2: 60, Ops.LOG2: 1e6, Ops.SIN: 1e4}[op]
  body = rng.standard_normal(4000) * scale
  if op is Ops.LOG2: body = np.abs(body)
  return np.concatenate([special, spread, body, rng.standard_normal(4000)]).astype(np.float32)

def unary(run_kernel, op: Ops, x: np.ndarray, renderer=None):
  n = x.size
  out, a = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(n), arg=0), UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(n), arg=1)
  r = UOp.range(n, 0)
  got = np.full(n, 7.0, np.float32)
  prg = run_kernel(UOp.sink(out.index(r).store(OPS[op][0](a.index(r).load())).end(r)), [got, x], renderer=renderer)
  return got, prg

def test_renderer_identity_holds_vector_math():
  h = _host()
  on, off = (CPULLVMRenderer(h.triple, h.datalayout, h.vector_bits, 2, vm) for vm in (True, False))
  assert on.identity != off.identity, "a program with libmvec calls and one without must not share a cache entry"
  assert off.vectors[dtypes.float32].ops.isdisjoint(LIBMVEC) and set(LIBMVEC) <= on.vectors[dtypes.float32].ops
  import pickle
  assert pickle.loads(pickle.dumps(on)).identity == on.identity

@pytest.mark.parametrize("op", list(LIBMVEC))
def test_without_vector_math_the_c_library_computes_each_lane(run_kernel, op):
  h = _host()
  off = CPULLVMRenderer(h.triple, h.datalayout, h.vector_bits, 2, False)
  x = inputs(op)[:64]
  got, prg = unary(run_kernel, op, x, off)
  assert "_ZGV" not in prg.src and f"@llvm.{ {Ops.EXP2: 'exp2', Ops.LOG2: 'log2', Ops.SIN: 'sin'}[op]}.f32" in prg.src
  with np.errstate(all="ignore"): assert ulps(got, OPS[op][1](x.astype(np.float64)).astype(np.float32)).max() <= 1

@needs_libmvec
@pytest.mark.parametrize("op", list(LIBMVEC))
def test_values_against_numpy_in_float64(run_kernel, op):
  x = inputs(op)
  got, prg = unary(run_kernel, op, x)
  assert f"call <8 x float> @{LIBMVEC[op]}(" in prg.src and "@llvm.exp2" not in prg.src and "@llvm.sin" not in prg.src
  with np.errstate(all="ignore"): want = OPS[op][1](x.astype(np.float64)).astype(np.float32)
  err = ulps(got, want)
  # glibc's AVX2 functions: exp2 within 1 ulp of the correctly rounded result, log2 and sin within 2 (an exhaustive
  # sweep of every float measured that); the special values exactly (NaN for NaN, log2 of a negative, sin of inf)
  assert err.max() <= (1 if op is Ops.EXP2 else 2), (x[err.argmax()], got[err.argmax()], want[err.argmax()])
  special = ~np.isfinite(x) | (x == 0) | ~np.isfinite(want) | (want == 0)
  np.testing.assert_array_equal(got[special], want[special])
  np.testing.assert_array_equal(np.signbit(got[special & ~np.isnan(got)]), np.signbit(want[special & ~np.isnan(want)]))

@needs_libmvec
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 8, 16, 24, 32])
def test_every_lane_count_calls_the_8_lane_function(n):
  # a function `void f(ptr out, ptr in)` computing exp2 of n lanes as one value, built by the renderer's own helper
  st = _State()
  t = f"<{n} x float>" if n > 1 else "float"
  st.emit(f"%x = load {t}, ptr %in, align 4")
  r = _libmvec(st, LIBMVEC[Ops.EXP2], "%x", n)
  st.emit(f"store {t} {r}, ptr %out, align 4")
  h = _host()
  src = "\n".join([f'target datalayout = "{h.datalayout}"', f'target triple = "{h.triple}"',
                   "define void @f(ptr %out, ptr %in) {", "entry:", *st.lines, "  ret void", "}", *st.decls.values()])
  from tinygrad.runtime.targets import load_host
  fxn, _lib = load_host("CPU_LLVM", "f", llvm_parts()[1].compile(src))
  x = np.linspace(-20, 20, n).astype(np.float32)
  out = np.zeros(n, np.float32)
  fxn.restype, fxn.argtypes = None, None
  fxn(ctypes.c_void_p(out.ctypes.data), ctypes.c_void_p(x.ctypes.data))
  assert src.count(f"call <8 x float> @{LIBMVEC[Ops.EXP2]}") == (n + 7) // 8
  # each lane as the 8-lane function computes it alone (a splat of it): the lanes are independent
  one = np.array([_scalar_exp2(v) for v in x], np.float32)
  np.testing.assert_array_equal(out, one)
  assert ulps(out, np.exp2(x.astype(np.float64)).astype(np.float32)).max() <= 1

def _scalar_exp2(v: float) -> np.float32:
  got = np.zeros(1, np.float32)
  out, a = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(1), arg=0), UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(1), arg=1)
  prg = get_program(UOp.sink(out.index(UOp.const(dtypes.index, 0)).store(a.index(UOp.const(dtypes.index, 0)).load().exp2())),
                    llvm_parts()[0])
  run_program(prg, [got, np.array([v], np.float32)])
  return got[0]

@needs_libmvec
def test_a_value_has_the_same_bits_in_a_vector_kernel_and_a_scalar_one():
  if Device.DEFAULT != "CPU" or not isinstance(Device["CPU"].renderer, CPULLVMRenderer): pytest.skip("the CPU runs C")
  # 0.2-1.3% of floats get other bits from glibc's scalar exp2f, log2f, sinf or another libmvec variant
  x = np.random.default_rng(3).standard_normal((256, 96)).astype(np.float32) * 30
  for f in (lambda t: t.exp2(), lambda t: t.abs().log2(), lambda t: t.sin()):
    with Context(NOOPT=0): vec = f(Tensor(x)).numpy()  # elementwise, upcast: 8 lanes a call
    with Context(NOOPT=1): one = f(Tensor(x)).numpy()  # one lane a call
    np.testing.assert_array_equal(vec.view(np.uint32), one.view(np.uint32))
  # max's gradient compares exp2 recomputed in the backward kernel with the stored maximum: it finds its element
  t = Tensor(x, requires_grad=True)
  t.exp2().max().backward()
  g = t.grad.numpy()
  assert (g != 0).sum() == 1 and g.flat[x.argmax()] == pytest.approx(np.log(2) * np.exp2(x.max().astype(np.float64)), rel=1e-6)

def _pv_kernel(x: np.ndarray, y: np.ndarray):
  # out[r, d] = sum_k exp2(x[r, k]) * y[k, d]: a softmax x V; a register tile of rows x lanes computes each row's exp
  # once per key, a scalar shared by the row's lanes
  from tinygrad.uop import Ops as O
  (ast,) = [si.ast for si in (Tensor(x).exp2() @ Tensor(y)).schedule() if si.ast.op is O.SINK]
  return ast

@needs_libmvec
def test_the_rows_scalar_exps_are_one_call():
  from tinygrad.codegen.opt import Opt, OptOps
  rng = np.random.default_rng(4)
  x, y = (rng.standard_normal((16, 64)) * 4).astype(np.float32), rng.standard_normal((64, 32)).astype(np.float32)
  x[:, 40:] = -np.inf  # a causal mask's scores: exp2 is 0 there, without glibc's slow path
  ast = _pv_kernel(x, y)
  h = _host()
  opts = [Opt(OptOps.UPCAST, 1, 8), Opt(OptOps.UPCAST, 0, 4)]
  for vm, want in ((True, f"call <8 x float> @{LIBMVEC[Ops.EXP2]}"), (False, "call contract float @llvm.exp2.f32")):
    ren = CPULLVMRenderer(h.triple, h.datalayout, h.vector_bits, 1, vm)
    prg = get_program(ast, ren, opts)
    # the 4 rows' exps of one key: one call of 4 lanes with vector_math, 4 calls of exp2f without
    assert prg.src.count(want) == (1 if vm else 4), prg.src
    out = np.zeros((16, 32), np.float32)
    bufs = {0: out}
    for u in prg.uops:
      if u.op is Ops.DEFINE_GLOBAL and u.arg != 0: bufs[u.arg] = x if u.dtype.size == x.size else y
    run_program(prg, [bufs[i] for i in sorted(bufs)])
    np.testing.assert_allclose(out, np.exp2(x.astype(np.float64)) @ y, rtol=2e-5, atol=1e-4)

@needs_libmvec
def test_an_exp_of_an_exp_is_not_batched_with_it():
  x = np.linspace(-3, 3, 64, dtype=np.float32)
  t = Tensor(x)
  # one lane a step (NOOPT): exp2(x) and exp2(exp2(x)) are scalars in one loop, the second computed from the first
  with Context(NOOPT=1): got = (t.exp2() * 3 + t.exp2().exp2()).sin().numpy()
  want = np.sin(np.exp2(x.astype(np.float64)) * 3 + np.exp2(np.exp2(x.astype(np.float64))))
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
