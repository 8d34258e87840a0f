"""Expansion of UPCAST/UNROLL ranges: the closing END or REDUCE is replaced by one copy of its body per lane, and lanes
that line up (consecutive addresses, the same op) are packed back into vector ops (VECTORIZE/GEP, vector LOAD/STORE)."""
from __future__ import annotations
import itertools, functools
from dataclasses import dataclass
from typing import Any
from tinygrad.uop import Ops, AxisType
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, lanes_alike
from tinygrad.dtype import PtrDType, AddrSpace
from tinygrad.renderer import Renderer

EXPAND_AXES = (AxisType.UPCAST, AxisType.UNROLL)

def _is_expand(r: UOp) -> bool: return r.op is Ops.RANGE and r.arg[-1] in EXPAND_AXES

def lanes(x: UOp, rngs: list[UOp]) -> list[UOp]:
  """One copy of x per point of the expanded ranges (last range fastest), each range replaced by its constant."""
  for r in rngs:
    if r.src[0].op is not Ops.CONST: raise ValueError(f"expander: UPCAST/UNROLL range {r.arg} needs a constant size")
  pts = itertools.product(*[range(r.src[0].arg) for r in rngs])
  # NOTE: one walk for all the lanes (x.substitute once per lane walked all of x each time): only the nodes that depend
  # on an expanded range are rebuilt per lane, sources first; the rest is the same node in every lane. The nodes made
  # and their order are substitute's
  rset = set(rngs)
  dep: set[UOp] = set()
  order = []
  for u in x.toposort(gate=lambda u: u not in rset):
    if u in rset or any(s in dep for s in u.src):
      dep.add(u)
      order.append(u)
  out = []
  for pt in pts:
    new = {r: r.const_like(i) for r, i in zip(rngs, pt)}
    for u in order:
      if u not in new: new[u] = UOp(u.op, u.dtype, tuple([new.get(s, s) for s in u.src]), u.arg, u.tag)
    out.append(new.get(x, x))
  return out

def expand_end(e: UOp) -> UOp | None:
  ex = [r for r in e.src[1:] if _is_expand(r)]
  if not ex: return None
  return UOp.group(*lanes(e.src[0], ex)).end(*[r for r in e.src[1:] if not _is_expand(r)])

def expand_reduce(red: UOp) -> UOp | None:
  ex = [r for r in red.src[1:] if _is_expand(r)]
  if not ex: return None
  rest = [r for r in red.src[1:] if not _is_expand(r)]
  # NOTE: one accumulator per lane: independent chains in the loop (ILP, SIMD), combined once after it
  parts = [x.reduce(*rest, arg=red.arg) for x in lanes(red.src[0], ex)] if rest else lanes(red.src[0], ex)
  return functools.reduce(lambda a, b: a.alu(red.arg, b), parts)

pm_expand = PatternMatcher([
  (UPat(Ops.END, name="e"), expand_end),
  (UPat(Ops.REDUCE, name="red"), expand_reduce),
])

# ---- packing lanes into vectors (runs on the program form, after index lowering) ----

def _offset(idx: UOp, base: UOp) -> Any:
  """idx - base as a constant when it is structurally base + c (or both constants)."""
  if idx is base: return 0
  if idx.op is Ops.CONST and base.op is Ops.CONST: return idx.arg - base.arg
  if idx.op is Ops.ADD and idx.src[1].op is Ops.CONST:
    if idx.src[0] is base: return idx.src[1].arg
    if base.op is Ops.ADD and base.src[1].op is Ops.CONST and idx.src[0] is base.src[0]:
      return idx.src[1].arg - base.src[1].arg
  if base.op is Ops.ADD and base.src[1].op is Ops.CONST and base.src[0] is idx: return -base.src[1].arg
  return None

def _consecutive(idxs: list[UOp]) -> bool:
  return all(_offset(ix, idxs[0]) == i for i, ix in enumerate(idxs))

@dataclass(frozen=True)
class VectorizeCtx:
  """pm_vectorize's context: the target (its vector widths and vector ops) and the DEVECTORIZE level: 0 packs loads,
  stores and ALU ops, 1 loads and stores only (the ALU stays one op per lane)."""
  renderer: Renderer
  level: int

def _scalar_store(ctx: VectorizeCtx, s: UOp) -> bool:
  if s.op is not Ops.STORE or len(s.src[0].src) != 2 or s.src[1].dtype.count != 1: return False
  idt = s.src[0].dtype
  # NOTE: registers hold accumulators (one element each, never packed here) and packed panels (many: their lanes pack)
  return isinstance(idt, PtrDType) and (idt.addrspace is not AddrSpace.REG or idt.size > 1) and \
    bool(ctx.renderer.vector_widths(idt.base))

def pack_stores(ctx: VectorizeCtx, g: UOp) -> UOp | None:
  """GROUP of scalar STOREs to consecutive addresses of one buffer -> one vector STORE per run (the widest widths of
  the target first)."""
  sts = [s for s in g.src if _scalar_store(ctx, s)]
  if len(sts) < 2: return None
  rest = [s for s in g.src if s not in sts]
  out: list[UOp] = []
  i, changed = 0, False
  while i < len(sts):
    for w in ctx.renderer.vector_widths(sts[i].src[1].dtype):
      run = sts[i:i + w]
      if len(run) == w and all(s.src[0].src[0] is run[0].src[0].src[0] for s in run) and \
         _consecutive([s.src[0].src[1] for s in run]):
        buf, idx0 = run[0].src[0].src[0], run[0].src[0].src[1]
        out.append(UOp(Ops.INDEX, buf.dtype.vec(w), (buf, idx0)).store(UOp.vectorize(*[s.src[1] for s in run])))
        i, changed = i + w, True
        break
    else:
      out.append(sts[i])
      i += 1
  return UOp.group(*out, *rest) if changed else None

def vectorize_alu(ctx: VectorizeCtx, v: UOp) -> UOp | None:
  """VECTORIZE of the same ALU op in every lane -> the ALU op on VECTORIZEs of the operands (DEVECTORIZE=0, and only
  ops the target computes on those vector dtypes)."""
  s0, n = v.src[0], len(v.src)
  if ctx.level != 0 or s0.dtype.count != 1 or not ctx.renderer.supports_op(s0.op, s0.dtype.vec(n)): return None
  if not all(x.dtype.count == 1 and n in ctx.renderer.vector_widths(x.dtype) for x in s0.src): return None
  if not lanes_alike(v.src): return None
  operands = tuple(UOp.vectorize(*[s.src[j] for s in v.src]) for j in range(len(s0.src)))
  return UOp(s0.op, s0.dtype.vec(n), operands, s0.arg)

def vectorize_load(ctx: VectorizeCtx, v: UOp) -> UOp | None:
  """VECTORIZE of scalar LOADs of consecutive addresses of one buffer -> one vector LOAD (of a width the target has)."""
  lds = v.src
  if any(ld.op is not Ops.LOAD or len(ld.src) != 1 or len(ld.src[0].src) != 2 for ld in lds): return None
  buf = lds[0].src[0].src[0]
  if not isinstance(buf.dtype, PtrDType) or buf.dtype.addrspace is AddrSpace.REG: return None
  if len(lds) not in ctx.renderer.vector_widths(lds[0].dtype): return None
  if any(ld.src[0].src[0] is not buf for ld in lds) or not _consecutive([ld.src[0].src[1] for ld in lds]): return None
  return UOp(Ops.INDEX, buf.dtype.vec(len(lds)), (buf, lds[0].src[0].src[1])).load(dtype=lds[0].dtype.vec(len(lds)))

pm_vectorize = PatternMatcher([
  (UPat(Ops.GROUP, name="g"), pack_stores),
  (UPat(Ops.VECTORIZE, name="v"), vectorize_load),
  (UPat(Ops.VECTORIZE, name="v"), vectorize_alu),
])

