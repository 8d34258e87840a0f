"""kernel_spec: a kernel's AST as rangeify hands it to codegen (docs/ir.md section 2).

SINK(arg=KernelInfo|None) of END(STORE(INDEX(DEFINE_GLOBAL, idx), value), *ranges); index math in dtypes.index; a masked
index is `cond.where(idx, Invalid)` and appears only as an INDEX's index.
"""
from __future__ import annotations
from tinygrad.uop import Ops, GroupOp, AxisType
from tinygrad.uop.ops import UOp, UPat
from tinygrad.dtype import PtrDType, AddrSpace, dtypes
from spec.shared_spec import Rule, Spec, shared_rules, fail, var_ok, range_arg_ok, is_invalid, is_masked, elem_dtype

REDUCE_AXES = (AxisType.REDUCE, AxisType.GROUP_REDUCE, AxisType.UNROLL)

def no_invalid_src(x: UOp) -> bool | None:
  """Invalid (bare, or a masked index) is a source only of a WHERE's false branch or an INDEX's index."""
  for i, s in enumerate(x.src):
    if not (is_invalid(s) or is_masked(s)): continue
    if x.op is Ops.WHERE and i == 2 and is_invalid(s): continue
    if x.op is Ops.INDEX and i == 1 and is_masked(s): continue
    what = "Invalid" if is_invalid(s) else "a masked index"
    return fail(f"src[{i}] is {what}: Invalid is legal only as cond.where(idx, Invalid) directly under an INDEX")
  return None

def sink_ok(x: UOp) -> bool:
  if x.arg is not None and type(x.arg).__name__ != "KernelInfo": return fail(f"kernel SINK arg {x.arg!r}")
  if all(s.op in (Ops.END, Ops.STORE, Ops.GROUP) for s in x.src): return True
  return fail(f"kernel SINK sources must be END/STORE, got {[s.op for s in x.src]}")

def define_global_ok(x: UOp) -> bool:
  if not (isinstance(x.dtype, PtrDType) and x.dtype.addrspace is AddrSpace.GLOBAL and x.dtype.v == 1):
    return fail(f"DEFINE_GLOBAL dtype {x.dtype} must be a global pointer")
  return (type(x.arg) is int and x.arg >= 0) or fail(f"DEFINE_GLOBAL arg {x.arg!r} is not a buffer number (int >= 0)")

def index_ok(x: UOp, b: UOp) -> bool:
  if b.op is Ops.BUFFERIZE: return True
  if x.dtype == b.dtype and isinstance(b.dtype, PtrDType): return True
  return fail(f"INDEX dtype {x.dtype} must be its buffer's pointer dtype {b.dtype}")

def load_ok(x: UOp, i: UOp) -> bool:
  return x.dtype == elem_dtype(i.dtype) or fail(f"LOAD of {x.dtype} through {i.dtype} (reads {elem_dtype(i.dtype)})")

def store_ok(x: UOp, i: UOp, v: UOp) -> bool:
  if x.dtype is not dtypes.void: return fail(f"STORE is void, got {x.dtype}")
  return v.dtype == elem_dtype(i.dtype) or fail(f"STORE of {v.dtype} through {i.dtype} (needs {elem_dtype(i.dtype)})")

def end_ok(x: UOp, v: UOp) -> bool:
  if x.dtype is not dtypes.void or v.dtype is not dtypes.void: return fail("END and the value it closes over are void")
  if len(x.src) >= 2 and all(r.op is Ops.RANGE for r in x.src[1:]): return True
  return fail("END(value, *ranges) closes at least one RANGE")

def reduce_ok(x: UOp, v: UOp) -> bool:
  if x.arg not in (Ops.ADD, Ops.MUL, Ops.MAX) or x.dtype != v.dtype: return fail(f"REDUCE {x.arg!r} to {x.dtype}")
  rngs = x.src[1:]
  if rngs and all(r.op is Ops.RANGE and r.arg[-1] in REDUCE_AXES for r in rngs): return True
  return fail(f"REDUCE closes reduce RANGEs, got {[(r.op, r.arg) for r in rngs]}")

def bufferize_ok(x: UOp) -> bool:
  if all(r.op is Ops.RANGE and r.src[0].op is Ops.CONST for r in x.src[1:]): return True
  return fail("BUFFERIZE(value, *ranges) closes ranges of constant size")

kernel_reject: list[Rule] = [
  (UPat(GroupOp.All, name="x"), no_invalid_src),
]

kernel_rules: list[Rule] = [
  (UPat(Ops.SINK, dtypes.void, name="x"), sink_ok),
  (UPat(Ops.DEFINE_GLOBAL, src=(), name="x"), define_global_ok),
  (UPat(Ops.DEFINE_VAR, dtypes.index, src=(), name="x"), var_ok),
  (UPat(Ops.RANGE, dtypes.index, src=(UPat(dtype=dtypes.index),), name="x"), range_arg_ok),
  # END may close several ranges at once in a kernel; codegen splits it into one END per range
  (UPat(Ops.END, src=(UPat(name="v"),), allow_any_len=True, name="x"), end_ok),
  # every LOAD/STORE goes through an INDEX of a flat, index-typed offset (possibly masked)
  (UPat(Ops.INDEX, src=(UPat((Ops.DEFINE_GLOBAL, Ops.BUFFERIZE), name="b"), UPat(dtype=dtypes.index)), name="x"),
   index_ok),
  (UPat(Ops.LOAD, src=(UPat(Ops.INDEX, name="i"),), name="x"), load_ok),
  (UPat(Ops.STORE, src=(UPat(Ops.INDEX, name="i"), UPat(name="v")), name="x"), store_ok),
  (UPat(Ops.REDUCE, src=(UPat(name="v"),), allow_any_len=True, name="x"), reduce_ok),
  # a local BUFFERIZE: the value, materialised per thread over the constant-size ranges that follow it
  (UPat(Ops.BUFFERIZE, src=(UPat(),), allow_any_len=True, name="x"), bufferize_ok),
]

kernel_spec = Spec("kernel", kernel_reject + kernel_rules + shared_rules)
