"""The numeric oracle: a kernel's outputs on a device against the reference executor, within a budget in ULPs per op
and dtype, propagated through the kernel (a running error bound), never a loose rtol.

`BudgetRef` runs the reference (fuzz/oracles/kernel_ref.py, the semantics table) and, next to every value, an absolute
error
bound: how far a correct target's value may be from the table's. A correct target computes every IEEE op exactly as
the table does (ADD, SUB, MUL, FDIV, SQRT, RECIPROCAL, TRUNC, MAX, comparisons, casts, integer ops: budget 0), with
these documented freedoms (docs/ir.md section 5), each a budget of the op that takes it:

  - contraction: ADD/SUB with a MUL operand (and an ADD REDUCE of a MUL) may be one fused multiply-add:
    half an ulp of the product (float16/32/64)
  - tensor cores: an ADD REDUCE of CAST(MUL) may multiply exactly (the TC opt): half an ulp of each product in the
    MUL's dtype
  - EXP2, LOG2, SIN, POW are approximations: TRANSCENDENTAL_ULPS[dtype] ulps of the result (SIN also 2 ulps of 1.0,
    for its argument reduction; |x| > 2**16 leaves SIN unchecked)
  - a float ADD/MUL REDUCE may be reassociated by opts: 2(n-1)u * sum|x| (ADD), (1+u)**(2n) relative (MUL), plus
    the underflow of a partial product and unchecked where one may overflow (`BudgetRef.mul_reduce_bound`)

and an error already present in an operand is propagated exactly (interval bounds: ADD adds errors, MUL
|a|eb + |b|ea + ea*eb, monotonic functions at the ends of the interval, ...), plus one ulp of the result whenever
the bound is not zero (a nearby value may round to the neighbour). Where a bound says nothing (a comparison or a
float->int cast whose answer the error could flip, a NaN or overflow an error could cause, a bitcast of an inexact or
NaN value) the element is unchecked: its bound is inf, and integer/bool values depending on it are too.

So where every operand is exact and no freedom applies, the bound is 0 and the device must match bit for bit (NaN
matching NaN, infinities exactly, -0.0 == 0.0); `compare_with_budget` names the first element outside its bound.
Buffers the kernel does not store to, and elements a masked store skips, must keep their contents exactly.
"""
from __future__ import annotations
from typing import Any, Mapping
import numpy as np
from tinygrad.uop import Ops, GroupOp, semantics
from tinygrad.uop.ops import UOp
from tinygrad.dtype import DType, PtrDType, dtypes, to_np_dtype, from_storage_np, InvalidType
from fuzz.oracles.kernel_ref import KernelRef, KernelRefError

# mantissa bits stored, smallest normal exponent, largest finite value
FLOAT_FORMAT: dict[DType, tuple[int, int, float]] = {
  dtypes.float16: (10, -14, 65504.0), dtypes.bfloat16: (7, -126, 3.3895313892515355e38),
  dtypes.fp8e4m3: (3, -6, 448.0), dtypes.fp8e5m2: (2, -14, 57344.0),
  dtypes.float32: (23, -126, 3.4028234663852886e38), dtypes.float64: (52, -1022, 1.7976931348623157e308)}
# the budget of the approximate ops, in ulps of the result; float16/bfloat16/fp8 compute them in float32 and round
TRANSCENDENTAL_ULPS: dict[DType, float] = {dtypes.float16: 1, dtypes.bfloat16: 1, dtypes.fp8e4m3: 1,
                                           dtypes.fp8e5m2: 1, dtypes.float32: 8, dtypes.float64: 2.0 ** 23}
TRANSCENDENTAL = (Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.POW)
# the dtypes whose MUL+ADD a target may contract into one fused multiply-add
CONTRACTIBLE = (dtypes.float16, dtypes.float32, dtypes.float64)
SIN_ARG_LIMIT = 2.0 ** 16
# NOTE: the bounds are computed in float64; this margin covers their own rounding
SAFETY = 1.0 + 2.0 ** -20
INF = np.inf

def unit_roundoff(dt: DType) -> float: return 2.0 ** -(FLOAT_FORMAT[dt.scalar()][0] + 1)

def ulp(x: np.ndarray, dt: DType) -> np.ndarray:
  """The spacing of dt's values at |x| (the subnormal spacing near 0; inf at inf/NaN)."""
  mant, emin, _ = FLOAT_FORMAT[dt.scalar()]
  ax = np.abs(np.asarray(x, np.float64))
  _, e = np.frexp(ax)
  exp = np.maximum(e.astype(np.int64) - 1, emin)
  out = np.ldexp(1.0, (exp - mant).astype(np.int64))
  return np.where(np.isfinite(ax), out, INF)

def _f64(v: np.ndarray) -> np.ndarray:
  with np.errstate(all="ignore"): return np.asarray(v).astype(np.float64)

def _is_mul(u: UOp) -> bool:
  """A product the target may contract into the op that uses it: a MUL, its negation, or a WHERE whose condition has
  one value (codegen folds it to the branch it picks, and the C compiler then contracts `0.001 - x*r` into an fma)."""
  if u.op is Ops.WHERE and u.src[0].vmin == u.src[0].vmax: return _is_mul(u.src[1] if u.src[0].vmin else u.src[2])
  return u.op is Ops.MUL or (u.op is Ops.NEG and _is_mul(u.src[0]))

class BudgetRef(KernelRef):
  """The reference run of a kernel with an error bound next to every value (`err`, float64 arrays shaped like the
  values; inf = unchecked) and per buffer (`buf_err`: the bound of what each element holds after the kernel)."""
  def __init__(self, ast: UOp, bufs: Mapping[int, np.ndarray], var_vals: Mapping[str, int] | None = None):
    super().__init__(ast, bufs, var_vals)
    self.err: dict[UOp, np.ndarray] = {}
    self.buf_err: dict[int, np.ndarray] = {n: np.zeros(a.size) for n, a in bufs.items()}

  def run(self) -> None:
    for u in self.ast.toposort():
      if u not in self.vals:
        if u.op is Ops.STORE: self.record_store(u)
        self.vals[u] = self.eval(u)
      # NOTE: range ends (and their DEFINE_VARs) were evaluated when the reference opened; they still need a bound
      if self.vals[u] is not None and u not in self.err: self.err[u] = self.error(u)

  def e(self, u: UOp) -> np.ndarray: return self.err[u]

  # ---- stores and loads ----
  def record_store(self, st: UOp) -> None:
    buf, off, valid = self.index(st.src[0])
    if buf.op is not Ops.DEFINE_GLOBAL or buf.arg not in self.buf_err: return
    off, valid, e = np.broadcast_arrays(off, valid, self.e(st.src[1]))
    be = self.buf_err[buf.arg]
    if off[valid].size and (off[valid].min() < 0 or off[valid].max() >= be.size): return  # the store raises
    be[off[valid]] = e[valid]

  def load_error(self, u: UOp) -> np.ndarray:
    buf, off, valid = self.index(u.src[0])
    if buf.op is Ops.BUFFERIZE:
      return self.load_bufferize(buf, off, valid, np.zeros(()), value=self.e(buf.src[0]))
    be = self.buf_err[buf.arg]
    # NOTE: an empty buffer is only read under a gate that is never true
    if be.size == 0: return np.zeros(np.broadcast_shapes(np.shape(off), np.shape(valid)))
    return np.where(valid, be[np.where(valid, off, 0)], 0.0)

  # ---- the bound of one node ----
  def error(self, u: UOp) -> np.ndarray:
    op, dt = u.op, u.dtype.scalar()
    v = self.vals[u]
    zero = np.zeros(np.shape(v))
    if op in (Ops.CONST, Ops.DEFINE_VAR, Ops.RANGE, Ops.BIND) or isinstance(u.arg, InvalidType): return zero
    if op is Ops.LOAD: return self.load_error(u)
    if op is Ops.REDUCE: return self.reduce_error(u)
    if not dtypes.is_float(dt): return self.exact_error(u, zero)
    srcs = [s for s in u.src if self.vals.get(s) is not None]
    if op is Ops.CAST or op is Ops.BITCAST: return self.finish(u, self.conversion_error(u), 0.0)
    return self.finish(u, self.propagate(u, [self.vals[s] for s in srcs], [self.e(s) for s in srcs]),
                       self.op_budget(u))

  def exact_error(self, u: UOp, zero: np.ndarray) -> np.ndarray:
    """Ints and bools are exact, or unchecked (inf) where an operand's error could change them."""
    op, srcs = u.op, u.src
    if op in GroupOp.Comparison and dtypes.is_float(srcs[0].dtype.scalar()): return self.compare_error(u)
    if op is Ops.CAST and dtypes.is_float(srcs[0].dtype.scalar()): return self.float_to_int_error(u)
    if op is Ops.BITCAST and dtypes.is_float(srcs[0].dtype.scalar()):
      a, ea = _f64(self.vals[srcs[0]]), self.e(srcs[0])
      return np.where((ea > 0) | np.isnan(a), INF, 0.0) + zero
    if op is Ops.WHERE:
      c, x, y = srcs
      ec, ex, ey = self.e(c), self.e(x), self.e(y)
      pick = np.where(self.vals[c], ex, ey)
      same = (self.vals[x] == self.vals[y]) & (ex == 0) & (ey == 0)
      return np.where(ec > 0, np.where(same, 0.0, INF), pick) + zero
    es = [self.e(s) for s in srcs if s in self.err]
    # NOTE: operands without error (the common case: index math) give an exact result, `zero`, without broadcasting
    if not any(x.any() for x in es): return zero
    return np.where(np.maximum.reduce([np.broadcast_to(x, zero.shape) for x in es]) > 0, INF, 0.0)

  def compare_error(self, u: UOp) -> np.ndarray:
    a, b = (_f64(self.vals[s]) for s in u.src)
    ea, eb = (self.e(s) for s in u.src)
    tot = ea + eb
    with np.errstate(invalid="ignore"):
      if u.op is Ops.CMPLT: sure = (a + ea < b - eb) | (a - ea >= b + eb)
      else: sure = np.abs(a - b) > tot
    return np.where((tot == 0) | (sure & ~np.isnan(a) & ~np.isnan(b)), 0.0, INF)

  def float_to_int_error(self, u: UOp) -> np.ndarray:
    s, dt = u.src[0], u.dtype
    a, ea = _f64(self.vals[s]), self.e(s)
    if dt.scalar() is dtypes.bool:
      with np.errstate(invalid="ignore"): sure = (np.abs(a) > ea) | (ea == 0)
      return np.where(sure, 0.0, INF)
    # NOTE: inf - inf (an unchecked inf operand) is NaN here on purpose: the bound is then inf below, not a warning
    with np.errstate(invalid="ignore"):
      lo = semantics.exec_cast(a - ea, dtypes.float64, dt)
      hi = semantics.exec_cast(a + ea, dtypes.float64, dt)
    return np.where((ea == 0) | ((lo == hi) & ~np.isnan(a) & np.isfinite(ea)), 0.0, INF)

  def conversion_error(self, u: UOp) -> np.ndarray:
    """CAST/BITCAST into a float: the source's error carried over (a narrowing cast's rounding is in finish)."""
    s = u.src[0]
    es = self.e(s)
    # NOTE: the sign and payload of a NaN an op produces are not specified (IEEE 754 6.3): x86 sqrt of a negative
    # gives -NaN, CUDA a positive canonical one; a bitcast shows those bits, so a NaN source leaves it unchecked
    if u.op is Ops.BITCAST: return np.where((es > 0) | np.isnan(_f64(self.vals[s])), INF, 0.0)
    return es if dtypes.is_float(s.dtype.scalar()) else np.where(es > 0, INF, 0.0)

  def propagate(self, u: UOp, vals: list[np.ndarray], errs: list[np.ndarray]) -> np.ndarray:
    """How far the exact result may move when each operand moves within its error (interval arithmetic)."""
    op = u.op
    a = _f64(vals[-3]) if op in (Ops.WHERE, Ops.MULACC) else _f64(vals[0])
    ea = errs[-3] if op in (Ops.WHERE, Ops.MULACC) else errs[0]
    if all(not np.any(e) for e in errs): return np.zeros(np.shape(self.vals[u]))
    with np.errstate(all="ignore"):
      if op in (Ops.ADD, Ops.SUB): return errs[0] + errs[1]
      # NOTE: sin moves by at most 2 wherever its finite argument moves; an unchecked (inf) argument may be inf or NaN
      # on the target (a MUL REDUCE that overflows in another order), and sin of that is NaN: unchecked too
      if op in (Ops.NEG, Ops.SIN): return np.where(np.isinf(ea), INF, np.minimum(ea, 2.0)) if op is Ops.SIN else ea
      if op is Ops.MAX: return np.maximum(errs[0], errs[1])
      if op is Ops.MUL:
        b, eb = _f64(vals[1]), errs[1]
        return np.abs(a) * eb + np.abs(b) * ea + ea * eb
      if op is Ops.MULACC:
        b, eb, ec = _f64(vals[1]), errs[1], errs[2]
        return np.abs(a) * eb + np.abs(b) * ea + ea * eb + ec
      if op in (Ops.FDIV, Ops.RECIPROCAL):
        num, en = (a, ea) if op is Ops.FDIV else (np.ones_like(a), np.zeros_like(ea))
        b, eb = (_f64(vals[1]), errs[1]) if op is Ops.FDIV else (a, ea)
        bound = (np.abs(num) * eb + np.abs(b) * en) / (np.abs(b) * (np.abs(b) - eb))
        return np.where(eb >= np.abs(b), INF, bound)
      if op is Ops.WHERE:
        c, x, y = vals
        ec, ex, ey = errs
        both = np.maximum(ex, ey) + np.abs(_f64(x) - _f64(y))
        return np.where(ec > 0, np.where(np.isnan(both), INF, both), np.where(c, ex, ey))
      if op in (Ops.SQRT, Ops.EXP2, Ops.LOG2, Ops.TRUNC):
        f = {Ops.SQRT: np.sqrt, Ops.EXP2: np.exp2, Ops.LOG2: np.log2, Ops.TRUNC: np.trunc}[op]
        lo, hi, mid = f(a - ea), f(a + ea), f(a)
        bound = np.maximum(np.abs(hi - mid), np.abs(mid - lo))
        # NOTE: an interval reaching a domain edge (sqrt/log2 of <= 0) may be NaN or -inf on one side only
        edge = (a - ea <= 0) & (ea > 0) if op in (Ops.SQRT, Ops.LOG2) else np.zeros(np.shape(a), bool)
        return np.where(edge | np.isnan(bound), INF, bound)
      if op is Ops.POW:
        b, eb = _f64(vals[1]), errs[1]
        corners = [np.power(a + sa * ea, b + sb * eb) for sa in (-1, 1) for sb in (-1, 1)]
        mid = np.power(a, b)
        bound = np.maximum.reduce([np.abs(c - mid) for c in corners])
        return np.where((a - ea <= 0) | np.isnan(bound), INF, bound)
    raise KernelRefError(f"budget: no error rule for {op} on floats")

  def op_budget(self, u: UOp) -> np.ndarray | float:
    """The op's own freedom (contraction, approximation), in absolute terms."""
    op, dt = u.op, u.dtype.scalar()
    v = _f64(self.vals[u])
    if op in TRANSCENDENTAL:
      b = TRANSCENDENTAL_ULPS[dt] * ulp(v, dt)
      if op is Ops.SIN:
        x = _f64(self.vals[u.src[0]])
        # NOTE: near a zero of sin an absolute error of the argument reduction shows: two ulps of 1.0
        b = np.where(np.abs(x) > SIN_ARG_LIMIT, INF, b + 2 * ulp(np.ones_like(x), dt))
      return b
    if op in (Ops.ADD, Ops.SUB) and dt in CONTRACTIBLE:
      return sum((0.5 * ulp(_f64(self.vals[s]), dt) for s in u.src if _is_mul(s)), start=np.zeros(np.shape(v)))
    return 0.0

  def finish(self, u: UOp, prop: np.ndarray, budget: np.ndarray | float) -> np.ndarray:
    """prop + budget + one ulp of the result where that is not zero; inf where overflow or a non-finite result is
    within reach of the bound."""
    dt = u.dtype.scalar()
    v = _f64(self.vals[u])
    tot = np.asarray(prop + budget, np.float64)
    with np.errstate(all="ignore"):
      # NOTE: a NaN bound (0 * inf of an unchecked operand) says nothing: unchecked
      tot = np.where(np.isnan(tot), INF, tot)
      tot = np.where(tot > 0, (tot + ulp(v, dt)) * SAFETY, 0.0)
      maxf = FLOAT_FORMAT[dt][2]
      reach = (tot > 0) & (~np.isfinite(v) | (np.abs(v) + tot >= maxf))
      # NOTE: an input that is NaN or inf (exactly) gives the same special value on every target
      return np.where(reach | np.isnan(tot), INF, tot)

  def reduce_error(self, u: UOp) -> np.ndarray:
    rngs = sorted(u.src[1:], key=lambda r: r.arg)
    v, e = self._full(self.ev(u.src[0]), rngs), self._full(self.e(u.src[0]), rngs)
    v, e = np.broadcast_arrays(_f64(v), e)
    axes = tuple(self.axis[r] for r in rngs)
    dt, n = u.dtype.scalar(), int(np.prod([self.size[r] for r in rngs]))
    if not dtypes.is_float(dt): return np.where(np.max(e, axis=axes, keepdims=True, initial=0.0) > 0, INF, 0.0)
    uu = unit_roundoff(dt)
    with np.errstate(all="ignore"):
      if u.arg is Ops.MAX: return self.finish(u, np.max(e, axis=axes, keepdims=True, initial=0.0), 0.0)
      if u.arg is Ops.ADD:
        prop = np.sum(e, axis=axes, keepdims=True)
        budget = 2 * max(n - 1, 0) * uu * np.sum(np.abs(v), axis=axes, keepdims=True)
        if _is_mul(u.src[0]) and dt in CONTRACTIBLE:
          budget = budget + np.sum(0.5 * ulp(v, dt), axis=axes, keepdims=True)
        if u.src[0].op is Ops.CAST and _is_mul(m := u.src[0].src[0]) and dtypes.is_float(m.dtype):
          # NOTE: a tensor core multiplies exactly (docs/ir.md, "Tensor cores"): the product's rounding to its own
          # (half, bfloat16, fp8) dtype before the cast may be skipped
          p = np.broadcast_to(_f64(self._full(self.ev(m), rngs)), v.shape)
          budget = budget + np.sum(0.5 * ulp(p, m.dtype.scalar()), axis=axes, keepdims=True)
        # NOTE: every partial sum of any order is at most sum(|x|+e) grown by the rounding: where that may reach the
        # largest finite value, some order overflows (inf, or inf - inf = NaN) though the sum in order is finite
        reach = np.sum(np.abs(v) + e, axis=axes, keepdims=True) * (1 + 2 * n * uu)
        return np.where(reach >= FLOAT_FORMAT[dt][2], INF, self.finish(u, prop, budget))
      return self.finish(u, self.mul_reduce_bound(v, e, axes, n, dt), 0.0)

  @staticmethod
  def mul_reduce_bound(v: np.ndarray, e: np.ndarray, axes: tuple[int, ...], n: int, dt: DType) -> np.ndarray:
    """How far a float MUL REDUCE of n factors (values v, errors e) computed in any order may be from the exact product
    of v. Every step is fl(x*y) = x*y*(1+d) + h with |d| <= u and |h| <= eta (gradual underflow: h is not 0 only where
    |x*y| is below the smallest normal), and every partial product is the product of a subset of the factors:
      - rounding: the intervals' product grown by (1+u)**(2n) - 1 (n roundings of the reference, n of the target);
      - underflow: an h made at one step reaches the result times the product of the factors not yet multiplied in,
        a subset product, at most M = prod max(|x|+e, 1), grown by at most (1+u)**n; at most n steps make one, so
        n*eta*M*(1+u)**n. It can only happen when the smallest partial product, at least
        prod min(max(|x|-e, 0), 1) / (1+u)**n, is below the smallest normal;
      - overflow: a computed partial product is at most M*(1+u)**n; where that may reach the largest finite value some
        order overflows (inf, or inf * 0 = NaN with a zero factor): unchecked.
    eta is the whole spacing of the subnormals (not half): bfloat16 and fp8 round the float32 product a second time."""
    mant, emin, maxf = FLOAT_FORMAT[dt]
    mag, lo = np.abs(v) + e, np.maximum(np.abs(v) - e, 0.0)
    # NOTE: the growth (1+u)**(2n) - 1 through expm1/log1p: in float64, 1 + u (u = 2**-53) rounds to exactly 1. The
    # reference rounds n times in its order and the target n times in another: 2n against the reference's value; a
    # partial product of the target alone is off its exact value by at most (1+u)**n (g1)
    growth = float(np.expm1(2 * n * np.log1p(unit_roundoff(dt))))
    g1 = float(np.exp(n * np.log1p(unit_roundoff(dt))))
    pm = np.prod(mag, axis=axes, keepdims=True)
    bound = (pm - np.abs(np.prod(v, axis=axes, keepdims=True))) + pm * growth
    big = np.prod(np.maximum(mag, 1.0), axis=axes, keepdims=True) * g1
    # NOTE: an exact zero factor makes the result an exact zero in every order (unless a partial product overflows)
    zero = np.any(mag == 0, axis=axes, keepdims=True)
    small = np.prod(np.where(mag > 0, np.minimum(lo, 1.0), 1.0), axis=axes, keepdims=True) / g1
    eta = 2.0 ** (emin - mant)
    bound = bound + np.where(~zero & (small < 2.0 ** emin), n * eta * big, 0.0)
    return np.where(np.isnan(bound) | (big >= maxf), INF, bound)

def _values(a: np.ndarray, dt: DType) -> np.ndarray:
  a = np.asarray(a)
  return from_storage_np(a, dt) if a.dtype == np.dtype(to_np_dtype(dt)) else a

def compare_with_budget(ref: BudgetRef, got: Mapping[int, np.ndarray], dtypes_of: Mapping[int, DType]) -> str | None:
  """None when every buffer of `got` is within its bound of the reference's, else what differs first: the buffer,
  its dtype, the element, both values and the bound (ints and bools: exactly equal where checked)."""
  for n in sorted(dtypes_of):
    dt = dtypes_of[n]
    if n not in got or n not in ref.bufs: continue
    want, have = _values(ref.bufs[n], dt).ravel(), _values(got[n], dt).ravel()
    if want.shape != have.shape: return f"buffer {n} ({dt}): {have.size} elements, the reference has {want.size}"
    bound = ref.buf_err[n]
    checked = np.isfinite(bound)
    if dtypes.is_float(dt):
      w, h = _f64(want), _f64(have)
      with np.errstate(invalid="ignore"):
        ok = (np.isnan(w) & np.isnan(h)) | (w == h) | (np.abs(w - h) <= bound)
      ok &= np.isnan(w) == np.isnan(h)
    else: ok = want == have
    if (bad := np.flatnonzero(checked & ~ok)).size:
      i = int(bad[0])
      kind = mismatch_kind(want[i], have[i], dt)
      return (f"{kind}: buffer {n} ({dt}): {bad.size} of {int(checked.sum())} checked elements outside the budget; "
              f"first at [{i}]: got {have[i]!r}, reference {want[i]!r}, bound {bound[i]:.3g}")
  return None

def mismatch_kind(want: Any, have: Any, dt: DType) -> str:
  """A short class of difference for a finding's signature: nan, inf, value (floats), int or bool."""
  if dt is dtypes.bool: return "bool mismatch"
  if not dtypes.is_float(dt): return "int mismatch"
  w, h = float(want), float(have)
  if np.isnan(w) != np.isnan(h): return "nan mismatch"
  if np.isinf(w) or np.isinf(h): return "inf mismatch"
  return "value mismatch"

def run_budget_ref(ast: UOp, bufs: Mapping[int, np.ndarray], var_vals: Mapping[str, int] | None = None) -> BudgetRef:
  """Run the reference with error bounds on copies of `bufs` (storage arrays by buffer number)."""
  ref = BudgetRef(ast, {n: np.array(a, copy=True) for n, a in bufs.items()}, var_vals)
  ref.run()
  return ref

def buffer_dtypes(ast: UOp) -> dict[int, DType]:
  return {u.arg: u.dtype.base for u in ast.toposort() if u.op is Ops.DEFINE_GLOBAL and isinstance(u.dtype, PtrDType)}

__all__ = ["BudgetRef", "run_budget_ref", "compare_with_budget", "mismatch_kind", "ulp", "unit_roundoff",
           "FLOAT_FORMAT", "TRANSCENDENTAL_ULPS", "CONTRACTIBLE", "buffer_dtypes"]
