"""full_spec: every node that may ever exist at any stage, checked on every UOp at construction under SPEC=2.

It is the union of the level specs plus the forms that exist only inside rewrites (codegen's intermediate nodes). A
node is legal if ANY rule accepts it: each rule's False or RuleFailure becomes "not this rule" (None), so a rule of one
level never vetoes a node another level allows. Typing is still enforced: no rule accepts an ill-typed ALU.
"""
from __future__ import annotations
import functools
from typing import Any, Callable
from tinygrad.uop import Ops, GroupOp
from tinygrad.uop.ops import UOp, UPat
from tinygrad.dtype import PtrDType, dtypes
from tinygrad.uop.semantics import FLOAT_ONLY
from spec.shared_spec import Rule, Spec, shared_rules, fail, var_ok, range_arg_ok, is_intlike, elem_dtype, is_value
from spec.tensor_spec import tensor_rules
from spec.kernel_spec import kernel_rules
from spec.program_spec import program_rules, SPECIAL_NAMES

def lenient(fn: Callable[..., Any]) -> Callable[..., Any]:
  """The rule's True stays True; False, a RuleFailure or any crash become None (let another rule decide)."""
  @functools.wraps(fn)
  def any_rule(**kw: Any) -> bool | None:
    # NOTE: a rule that crashes on a malformed node (a bad arg) has not accepted it either
    try: return True if fn(**kw) is True else None
    except Exception: return None
  return any_rule

def any_len_index_ok(x: UOp) -> bool:
  """INDEX(buf, *idx[, gate]) while codegen works: integer or index offsets, the last source may be a bool gate."""
  b = x.src[0] if x.src else None
  if b is None or len(x.src) < 2: return fail("INDEX(buffer, *idx)")
  if b.op is Ops.BUFFERIZE: return True
  if not (isinstance(b.dtype, PtrDType) and isinstance(x.dtype, PtrDType) and x.dtype.base == b.dtype.base):
    return fail(f"INDEX of {x.dtype} into {b.dtype}")
  return all(is_intlike(s.dtype) or s.dtype.scalar() is dtypes.bool for s in x.src[1:]) or fail("INDEX offsets")

def value_index_ok(x: UOp) -> bool:
  """rangeify: INDEX(tensor node, *idx) is the node's value at one index expression per dimension (not a pointer)."""
  if not x.src or isinstance(x.dtype, PtrDType) or x.dtype != x.src[0].dtype: return False
  sh = x.src[0].shape
  return sh is not None and len(x.src) == len(sh) + 1 and all(s.dtype is dtypes.index for s in x.src[1:])

INDEX_INTS = (dtypes.index, dtypes.int32, dtypes.int64)

def index_mix_ok(x: UOp) -> bool:
  """While index lowering runs, a node may mix index, int32 and int64 (an index node over lowered sources, an int32 node
  over int64 ones): the rewrite rebuilds a node over its new sources before it retypes the node itself. Only these three
  dtypes mix; the vector widths and every other typing rule hold."""
  vals = x.src[1:] if x.op is Ops.WHERE else x.src
  if x.op is Ops.WHERE and x.src[0].dtype.scalar() is not dtypes.bool: return False
  if x.op in FLOAT_ONLY: return False
  if not all(s.dtype.scalar() in INDEX_INTS and s.dtype.count == x.dtype.count for s in vals): return False
  if x.op in GroupOp.Comparison: return x.dtype.scalar() is dtypes.bool
  return x.dtype.scalar() in INDEX_INTS

def int_srcs(x: UOp) -> bool: return all(is_intlike(s.dtype) for s in x.src[1:])
def reduce_ok(x: UOp, v: UOp) -> bool:
  return x.dtype == v.dtype and x.arg in (Ops.ADD, Ops.MUL, Ops.MAX) and int_srcs(x)

full_only_rules: list[Rule] = [
  # codegen: grid ids and loops exist in dtypes.index before index lowering (and mix with int32/int64 during it)
  (UPat(Ops.SPECIAL, src=(UPat(name="e"),), name="x"),
   lambda x, e: is_intlike(x.dtype) and is_intlike(e.dtype) and x.arg in SPECIAL_NAMES),
  (UPat(Ops.RANGE, src=(UPat(name="e"),), name="x"),
   lambda x, e: is_intlike(x.dtype) and is_intlike(e.dtype) and range_arg_ok(x)),
  (UPat(GroupOp.ALU, name="x"), index_mix_ok),
  # the symbolic engine's tests (and fuzzers) also make float variables: DEFINE_VAR("f", 0, 1, dtypes.float)
  (UPat(Ops.DEFINE_VAR, src=(), name="x"), lambda x: is_value(x.dtype) and x.dtype.count == 1 and var_ok(x)),
  # rewrites may leave non-RANGE index sources in END/REDUCE for a moment (a size-1 range folded to 0)
  (UPat(Ops.END, dtypes.void, src=(UPat(),), allow_any_len=True, name="x"), int_srcs),
  (UPat(Ops.REDUCE, src=(UPat(name="v"),), allow_any_len=True, name="x"), reduce_ok),
  (UPat(Ops.INDEX, name="x"), any_len_index_ok),
  (UPat(Ops.INDEX, name="x"), value_index_ok),
  (UPat(Ops.LOAD, src=(UPat(Ops.INDEX, name="i"),), allow_any_len=True, name="x"),
   lambda x, i: x.dtype == elem_dtype(i.dtype)),
  (UPat(Ops.STORE, dtypes.void, src=(UPat(Ops.INDEX, name="i"), UPat(name="v"))),
   lambda i, v: v.dtype == elem_dtype(i.dtype)),
  (UPat(Ops.BUFFERIZE, name="x"), lambda x: len(x.src) >= 1),
  (UPat(Ops.AFTER, src=(UPat(name="d"),), allow_any_len=True, name="x"), lambda x, d: x.dtype == d.dtype),
  (UPat(Ops.BARRIER, dtypes.void), lambda: True),
  (UPat(Ops.IF, dtypes.void, src=(UPat(dtype=dtypes.bool),), allow_any_len=True), lambda: True),
  (UPat(Ops.WMMA, name="x"), lambda x: is_value(x.dtype)),
]

# NOTE: the cheap shared rules come first: this matcher runs on every UOp ever built under SPEC=2
full_spec = Spec("full", [(p, lenient(fn)) for p, fn in shared_rules + kernel_rules + program_rules + tensor_rules +
                            full_only_rules])
