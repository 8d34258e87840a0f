"""Rules legal at every stage: constants, ALU typing, casts, vectors, and the structure ops (SINK, GROUP).

A spec is a PatternMatcher whose rules return True for a legal node, False (or raise RuleFailure) for an illegal one,
and None when they do not apply; the first verdict that is not None decides, and a node no rule decides is illegal.
"""
from __future__ import annotations
import math
from typing import Any, Callable, NoReturn, Sequence
from tinygrad.uop import Ops, GroupOp, AxisType
from tinygrad.uop.ops import UOp, UPat, PatternMatcher
from tinygrad.dtype import DType, PtrDType, dtypes, InvalidType

Rule = tuple[UPat, Callable[..., Any]]

class RuleFailure(Exception):
  """Raised by a spec rule to reject a node with a reason; type_verify puts the reason in its SpecError."""

def fail(reason: str) -> NoReturn:
  raise RuleFailure(reason)

# ---- dtype helpers ----

def is_value(dt: DType) -> bool:
  """A dtype a value can have: not void, not a pointer."""
  return dt is not dtypes.void and not isinstance(dt, PtrDType)

def is_intlike(dt: DType) -> bool: return is_value(dt) and dtypes.is_int(dt)
def is_bool(dt: DType) -> bool: return is_value(dt) and dt.scalar() is dtypes.bool
def is_float(dt: DType) -> bool: return is_value(dt) and dtypes.is_float(dt)
def has_index(dt: DType) -> bool: return (dt.base if isinstance(dt, PtrDType) else dt.scalar()) is dtypes.index
def is_invalid(u: UOp) -> bool: return u.op is Ops.CONST and isinstance(u.arg, InvalidType)
def is_masked(u: UOp) -> bool: return u.op is Ops.WHERE and len(u.src) == 3 and is_invalid(u.src[2])

def elem_dtype(ptr: DType) -> DType:
  """What a LOAD through an INDEX of this pointer dtype reads (a vector when the pointer is a pointer vector)."""
  if not isinstance(ptr, PtrDType): return ptr
  return ptr.base.vec(ptr.v) if ptr.v > 1 and ptr.base.count == 1 else ptr.base

def bool_like(dt: DType) -> DType: return dtypes.bool.vec(dt.count) if dt.count > 1 else dtypes.bool

# ---- constants ----

def const_ok(dt: DType, v: Any) -> bool:
  """The Python type of a constant matches its dtype (bool, int, float) and as_const keeps its value (representable)."""
  if not is_value(dt): return fail(f"a constant of dtype {dt} (constants are values, not void or pointers)")
  if isinstance(v, InvalidType): return dt is dtypes.index or fail("Invalid is an index constant")
  sc = dt.scalar()
  want: type = bool if sc is dtypes.bool else int if dtypes.is_int(sc) else float
  if type(v) is not want: return fail(f"{type(v).__name__} {v!r} in a {sc} constant (needs a Python {want.__name__})")
  kept = dtypes.as_const(v, sc)
  if isinstance(v, float) and math.isnan(v): return math.isnan(kept)
  return bool(kept == v) or fail(f"value {v!r} is not representable in {sc} (it would become {kept!r})")

def vconst_ok(x: UOp) -> bool:
  if not isinstance(x.arg, tuple) or len(x.arg) != x.dtype.count or x.dtype.count < 2:
    return fail(f"VCONST arg must be a tuple of {x.dtype.count} values for dtype {x.dtype}, one per lane")
  return all(const_ok(x.dtype.scalar(), v) for v in x.arg)

# ---- ALU ----

def same_dtypes(x: UOp) -> bool:
  """Every source has the node's dtype (the rule of every ALU op but comparisons and WHERE)."""
  if not is_value(x.dtype): return fail(f"ALU result dtype {x.dtype} must be a value dtype")
  return all(s.dtype == x.dtype for s in x.src) or fail(f"sources {[s.dtype for s in x.src]} are not all {x.dtype}")

def cmp_ok(x: UOp, a: UOp, b: UOp) -> bool:
  if a.dtype != b.dtype or not is_value(a.dtype): return fail(f"comparison of {a.dtype} with {b.dtype}")
  return x.dtype == bool_like(a.dtype) or fail(f"comparison gives {x.dtype}, must give {bool_like(a.dtype)}")

def where_ok(x: UOp, c: UOp, t: UOp, f: UOp) -> bool:
  if c.dtype not in (dtypes.bool, bool_like(x.dtype)): return fail(f"WHERE condition is {c.dtype}, must be bool")
  if t.dtype == f.dtype == x.dtype and is_value(x.dtype): return True
  return fail(f"WHERE branches {t.dtype}, {f.dtype} must both be {x.dtype}")

def int_only(x: UOp) -> bool:
  return same_dtypes(x) and (is_intlike(x.dtype) or fail(f"{x.op} is integer only, got {x.dtype}"))
def int_or_bool(x: UOp) -> bool:
  return same_dtypes(x) and (is_intlike(x.dtype) or is_bool(x.dtype) or fail(f"{x.op} of {x.dtype} (ints, bools)"))
def float_only(x: UOp) -> bool:
  return same_dtypes(x) and (is_float(x.dtype) or fail(f"{x.op} is float only, got {x.dtype}"))

# ---- casts and vectors ----

def cast_ok(x: UOp, s: UOp) -> bool:
  if not is_value(x.dtype) or not is_value(s.dtype): return fail(f"CAST from {s.dtype} to {x.dtype} (not value dtypes)")
  return x.dtype.count == s.dtype.count or fail(f"CAST changes the vector width ({s.dtype} to {x.dtype})")

def bitcast_ok(x: UOp, s: UOp) -> bool:
  if not is_value(x.dtype) or not is_value(s.dtype): return fail(f"BITCAST from {s.dtype} to {x.dtype} (not values)")
  return x.dtype.itemsize == s.dtype.itemsize or fail(f"BITCAST from size {s.dtype.itemsize} to {x.dtype.itemsize}")

def vectorize_ok(x: UOp) -> bool:
  if len(x.src) < 2: return fail(f"VECTORIZE of {len(x.src)} sources (needs at least 2)")
  s0 = x.src[0].dtype
  if any(s.dtype != s0 for s in x.src) or s0.vcount != 1: return fail(f"VECTORIZE of {[s.dtype for s in x.src]}")
  return x.dtype == s0.vec(len(x.src)) or fail(f"VECTORIZE of {len(x.src)} x {s0} must have dtype {s0.vec(len(x.src))}")

def gep_ok(x: UOp, s: UOp) -> bool:
  if not isinstance(x.arg, tuple) or not x.arg or any(type(i) is not int or not 0 <= i < s.dtype.vcount for i in x.arg):
    return fail(f"GEP arg {x.arg!r} must be a non-empty tuple of lanes in [0, {s.dtype.vcount})")
  want = s.dtype.scalar().vec(len(x.arg)) if len(x.arg) > 1 else s.dtype.scalar()
  return x.dtype == want or fail(f"GEP of {len(x.arg)} lanes of {s.dtype} must have dtype {want}")

# ---- helpers the levels share ----

def var_ok(x: UOp) -> bool:
  """DEFINE_VAR arg = (name, lo, hi) with int bounds lo <= hi."""
  a = x.arg
  if not (isinstance(a, tuple) and len(a) == 3 and isinstance(a[0], str) and type(a[1]) is int and type(a[2]) is int):
    return fail(f"DEFINE_VAR arg {a!r} must be (name: str, lo: int, hi: int)")
  return a[1] <= a[2] or fail(f"DEFINE_VAR {a[0]!r} has lo {a[1]} > hi {a[2]}")

def range_arg_ok(x: UOp) -> bool:
  """RANGE arg = (id: int, ..., AxisType)."""
  a = x.arg
  if isinstance(a, tuple) and len(a) >= 2 and type(a[0]) is int and isinstance(a[-1], AxisType): return True
  return fail(f"RANGE arg {a!r} must be (id: int, ..., AxisType)")

shared_rules: list[Rule] = [
  # structure: SINK and GROUP are void and collect side effects
  (UPat(Ops.SINK, dtypes.void), lambda: True),
  (UPat(Ops.GROUP, dtypes.void), lambda: True),
  # constants: the Python type of the value matches the dtype, and the value is representable in it
  (UPat(Ops.CONST, src=(), name="x"), lambda x: const_ok(x.dtype, x.arg)),
  (UPat(Ops.VCONST, src=(), name="x"), vconst_ok),
  # ALU: comparisons give bool; WHERE's condition is bool and its branches match; IDIV/MOD/shifts integer only
  (UPat(GroupOp.Comparison, src=(UPat(name="a"), UPat(name="b")), name="x"), cmp_ok),
  (UPat(Ops.WHERE, src=(UPat(name="c"), UPat(name="t"), UPat(name="f")), name="x"), where_ok),
  (UPat((Ops.IDIV, Ops.MOD, Ops.SHL, Ops.SHR), src=(UPat(), UPat()), name="x"), int_only),
  (UPat((Ops.AND, Ops.OR, Ops.XOR), src=(UPat(), UPat()), name="x"), int_or_bool),
  (UPat(Ops.FDIV, src=(UPat(), UPat()), name="x"), float_only),
  # THREEFRY is the counter-based generator: uint64 in, uint64 out
  (UPat(Ops.THREEFRY, dtypes.uint64, src=(UPat(), UPat()), name="x"), same_dtypes),
  (UPat((Ops.ADD, Ops.SUB, Ops.MUL, Ops.MAX), src=(UPat(), UPat()), name="x"), same_dtypes),
  # the transcendental and rounding ops have no integer meaning (tinygrad/uop/semantics.py defines them on floats)
  (UPat(Ops.POW, src=(UPat(), UPat()), name="x"), float_only),
  (UPat(Ops.NEG, src=(UPat(),), name="x"), same_dtypes),
  (UPat(GroupOp.Unary - {Ops.NEG}, src=(UPat(),), name="x"), float_only),
  (UPat(Ops.MULACC, src=(UPat(), UPat(), UPat()), name="x"), same_dtypes),
  (UPat(Ops.CAST, src=(UPat(name="s"),), name="x"), cast_ok),
  (UPat(Ops.BITCAST, src=(UPat(name="s"),), name="x"), bitcast_ok),
  # vectors: VECTORIZE builds a vector of n equal-typed scalars; GEP takes lanes (arg: tuple of lane numbers)
  (UPat(Ops.VECTORIZE, name="x"), vectorize_ok),
  (UPat(Ops.GEP, src=(UPat(name="s"),), name="x"), gep_ok),
]

class Spec(PatternMatcher):
  """A spec: its rules and the name of the stage it describes ("tensor", "kernel", ...), which error messages show."""
  def __init__(self, name: str, patterns: Sequence[tuple[UPat, Callable[..., Any]]]):
    super().__init__(patterns)
    self.name = name

shared_spec = Spec("shared", shared_rules)
