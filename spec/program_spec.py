"""program_spec: the linear program after linearize + line_rewrite (docs/ir.md section 3).

No dtypes.index and no Invalid remain; END closes exactly one range; gates live on INDEX (third source) and gated stores
have become IF/STORE/ENDIF.
"""
from __future__ import annotations
from tinygrad.uop import Ops, GroupOp
from tinygrad.uop.ops import UOp, UPat
from tinygrad.dtype import PtrDType, AddrSpace, dtypes
from tinygrad.renderer.tensor_cores import TENSOR_CORES
from spec.shared_spec import Rule, Spec, shared_rules, fail, var_ok, range_arg_ok, has_index, elem_dtype, is_intlike

def wmma_ok(x: UOp, a: UOp, b: UOp, c: UOp) -> bool:
  if not (isinstance(x.arg, tuple) and len(x.arg) == 1 and x.arg[0] in TENSOR_CORES):
    return fail(f"WMMA arg {x.arg!r} must be (name,) of a tensor core in tinygrad/renderer/tensor_cores.py")
  tc = TENSOR_CORES[x.arg[0]]
  ea, eb, ec = tc.elements_per_thread
  want = (tc.dtype_in.vec(ea), tc.dtype_in.vec(eb), tc.dtype_out.vec(ec), tc.dtype_out.vec(ec))
  if (a.dtype, b.dtype, c.dtype, x.dtype) == want: return True
  got = (a.dtype, b.dtype, c.dtype, x.dtype)
  return fail(f"WMMA {tc.name}: A, B, C, D are {got}; the instruction takes {want}")

SPECIAL_NAMES = frozenset({"gidx0", "gidx1", "gidx2", "lidx0", "lidx1", "lidx2", "core_id"})
INT_IDX = (dtypes.int32, dtypes.int64)

def define_ok(x: UOp, space: AddrSpace) -> bool:
  if not (isinstance(x.dtype, PtrDType) and x.dtype.addrspace is space and x.dtype.v == 1):
    return fail(f"{x.op} dtype {x.dtype} must be a {space} pointer")
  return (type(x.arg) is int and x.arg >= 0) or fail(f"{x.op} arg {x.arg!r} must be its number (int >= 0)")

def buffer_of(b: UOp) -> UOp:
  while b.op is Ops.AFTER: b = b.src[0]
  return b

def index_ok(x: UOp, b: UOp, i: UOp) -> bool:
  if buffer_of(b).op not in GroupOp.Defines or not isinstance(b.dtype, PtrDType):
    return fail(f"INDEX of {b.op}: the buffer must be a DEFINE_GLOBAL/LOCAL/REG (or an AFTER of one)")
  if not is_intlike(i.dtype): return fail(f"INDEX offset is {i.dtype}, must be int32 or int64")
  # a vector access indexes a pointer vector of the buffer's pointer type
  if x.dtype == b.dtype or x.dtype == b.dtype.vec(x.dtype.vcount): return True
  return fail(f"INDEX dtype {x.dtype} does not point into {b.dtype}")

def gated_index_ok(x: UOp, b: UOp, i: UOp, g: UOp) -> bool:
  # a bool gate, or a gate per lane of a vector access (a masked load): lane j reads element i+j only where lane j holds
  if g.dtype == dtypes.bool: return index_ok(x, b, i)
  if g.dtype != dtypes.bool.vec(x.dtype.vcount) or i.dtype.count != 1:
    return fail(f"INDEX gate {g.dtype} on {x.dtype}: a gate is bool, or a per-lane gate bool.vec(n) on a vector INDEX "
                "of n elements with a scalar offset")
  return index_ok(x, b, i)

def load_ok(x: UOp, i: UOp) -> bool:
  if len(i.src) == 3: return fail("LOAD through a gated INDEX needs the alternative value: LOAD(INDEX, alt)")
  return x.dtype == elem_dtype(i.dtype) or fail(f"LOAD of {x.dtype} through {i.dtype} (reads {elem_dtype(i.dtype)})")

def gated_load_ok(x: UOp, i: UOp, alt: UOp) -> bool:
  if len(i.src) != 3: return fail("LOAD(INDEX, alt) needs a gated INDEX(buf, idx, gate)")
  if x.dtype != elem_dtype(i.dtype): return fail(f"LOAD of {x.dtype} through {i.dtype} (reads {elem_dtype(i.dtype)})")
  return alt.dtype == x.dtype or fail(f"LOAD alternative is {alt.dtype}, must be {x.dtype}")

def store_ok(x: UOp, i: UOp, v: UOp) -> bool:
  if len(i.src) == 3: return fail("gated STORE in a program: line_rewrite turns it into IF/STORE/ENDIF")
  if x.dtype is not dtypes.void: return fail(f"STORE is void, got {x.dtype}")
  return v.dtype == elem_dtype(i.dtype) or fail(f"STORE of {v.dtype} through {i.dtype} (needs {elem_dtype(i.dtype)})")

def after_ok(x: UOp, d: UOp) -> bool:
  if buffer_of(d).op not in GroupOp.Defines: return fail(f"AFTER orders memory: its first source is {d.op}")
  return x.dtype == d.dtype or fail(f"AFTER has dtype {x.dtype}, must be its define's {d.dtype}")

def no_index(x: UOp) -> None:
  if has_index(x.dtype): fail("index math must be lowered in programs")

program_reject: list[Rule] = [
  # index math was lowered to int32/int64: no dtypes.index (and so no Invalid) survives into a program
  (UPat(GroupOp.All, name="x"), no_index),
]

program_rules: list[Rule] = [
  (UPat(Ops.DEFINE_GLOBAL, src=(), name="x"), lambda x: define_ok(x, AddrSpace.GLOBAL)),
  (UPat(Ops.DEFINE_LOCAL, src=(), name="x"), lambda x: define_ok(x, AddrSpace.LOCAL)),
  (UPat(Ops.DEFINE_REG, src=(), name="x"), lambda x: define_ok(x, AddrSpace.REG)),
  (UPat(Ops.DEFINE_VAR, INT_IDX, src=(), name="x"), var_ok),
  # SPECIAL: a grid id (gidxN, lidxN) or the CPU thread id (core_id); src is its extent
  (UPat(Ops.SPECIAL, dtypes.int32, src=(UPat(dtype=dtypes.int32),), name="x"),
   lambda x: x.arg in SPECIAL_NAMES or fail(f"SPECIAL arg {x.arg!r} must be one of {sorted(SPECIAL_NAMES)}")),
  (UPat(Ops.RANGE, INT_IDX, src=(UPat(name="e"),), name="x"),
   lambda x, e: range_arg_ok(x) and (e.dtype == x.dtype or fail(f"RANGE of {x.dtype} has an end of {e.dtype}"))),
  # END closes exactly one range in a program; its value is the last side effect inside the loop
  (UPat(Ops.END, dtypes.void, src=(UPat(dtype=dtypes.void), UPat(Ops.RANGE))), lambda: True),
  (UPat(Ops.INDEX, src=(UPat(name="b"), UPat(name="i")), name="x"), index_ok),
  (UPat(Ops.INDEX, src=(UPat(name="b"), UPat(name="i"), UPat(name="g")), name="x"), gated_index_ok),
  (UPat(Ops.LOAD, src=(UPat(Ops.INDEX, name="i"),), name="x"), load_ok),
  (UPat(Ops.LOAD, src=(UPat(Ops.INDEX, name="i"), UPat(name="alt")), name="x"), gated_load_ok),
  (UPat(Ops.STORE, src=(UPat(Ops.INDEX, name="i"), UPat(name="v")), name="x"), store_ok),
  (UPat(Ops.IF, dtypes.void, src=(UPat(dtype=dtypes.bool),)), lambda: True),
  (UPat(Ops.ENDIF, dtypes.void, src=(UPat(Ops.IF),)), lambda: True),
  # BARRIER orders exactly one side effect (the STORE or GROUP of stores it waits for)
  (UPat(Ops.BARRIER, dtypes.void, src=(UPat(dtype=dtypes.void),)), lambda: True),
  (UPat(Ops.AFTER, src=(UPat(name="d"),), allow_any_len=True, name="x"), after_ok),
  # WMMA(a, b, acc): arg = (tensor core name,); fragments of the table's dtypes and sizes, the result the accumulator's
  (UPat(Ops.WMMA, src=(UPat(name="a"), UPat(name="b"), UPat(name="c")), name="x"), wmma_ok),
]

program_spec = Spec("program", program_reject + program_rules + shared_rules)
