"""The LLVM renderers' final rewrites (their extra_matcher): scalar accumulators packed into vector accumulators, lanes
of one op into vector ops and vector loads, a*b+c into MULACC. They rewrite UOps, not text, so they are codegen's;
renderer/llvmir.py builds them for each target with `llvm_matcher(renderer)`."""
from __future__ import annotations
from dataclasses import dataclass
from typing import Any, Callable
from tinygrad.uop import Ops, GroupOp
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, lanes_alike
from tinygrad.dtype import DType, PtrDType, AddrSpace, dtypes
from tinygrad.renderer.llvm_helpers import fmf
from tinygrad.renderer import Renderer
from tinygrad.helpers import DEVECTORIZE

# ---- vector accumulators ----
# Codegen expands UPCAST lanes into one scalar accumulator per lane. Here the accumulators of one loop whose updates
# have the same shape are packed, `width` lanes at a time, into one vector accumulator (a `<16 x float>` in a register
# on AVX-512): the update becomes one vector op on VECTORIZEs of the lanes' operands, which the rules below turn into
# vector loads (consecutive addresses), splats (one value for every lane) and vector ALU ops, down to one FMA.


@dataclass(frozen=True)
class _Acc:
  """One scalar accumulator as pm_reduce builds it (codegen/lowerer.py lower_reduce)."""
  define: UOp        # DEFINE_REG(dt.ptr(1, REG))
  op: Ops            # ADD, MUL or MAX
  init: UOp          # STORE(INDEX(define or AFTER(define, *outer ranges), 0), identity)
  loop_after: UOp    # AFTER(define, init, *reduce ranges): the accumulator inside its loop
  update: UOp        # STORE(INDEX(loop_after, 0), op(LOAD(INDEX(loop_after, 0)), x))
  x: UOp             # what each iteration combines in
  final: UOp         # LOAD(INDEX(AFTER(define, END), 0)): the result after the loop

def _users(sink: UOp) -> dict[UOp, list[UOp]]:
  users: dict[UOp, list[UOp]] = {}
  for u in sink.toposort():
    for s in u.src: users.setdefault(s, []).append(u)
  return users

def _only(users: dict[UOp, list[UOp]], u: UOp, op: Ops) -> UOp | None:
  us = users.get(u, [])
  return us[0] if len(us) == 1 and us[0].op is op else None

def match_acc(d: UOp, users: dict[UOp, list[UOp]]) -> _Acc | None:
  """The accumulator pattern of pm_reduce, exactly; anything else is None (and left alone)."""
  afters = [a for a in users.get(d, []) if a.op is Ops.AFTER]
  loop = [a for a in afters if len(a.src) > 2 and a.src[1].op is Ops.STORE and
          all(r.op is Ops.RANGE for r in a.src[2:])]
  if len(loop) != 1: return None
  la, init = loop[0], loop[0].src[1]
  if init.src[1].op is not Ops.CONST or init.src[0].op is not Ops.INDEX: return None
  if (idx := _only(users, la, Ops.INDEX)) is None or len(idx.src) != 2: return None
  lds = [x for x in users.get(idx, []) if x.op is Ops.LOAD]
  sts = [x for x in users.get(idx, []) if x.op is Ops.STORE]
  if len(lds) != 1 or len(sts) != 1 or len(users[idx]) != 2 or len(users.get(lds[0], [])) != 1: return None
  upd = sts[0].src[1]
  # NOTE: an ADD of a product may have been fused already (the rules run on the sources before the SINK)
  if upd.op is Ops.MULACC and upd.src[2] is lds[0] and lds[0] not in upd.src[:2]:
    op, x = Ops.ADD, upd.src[0] * upd.src[1]
  elif upd.op in (Ops.ADD, Ops.MUL, Ops.MAX) and len(upd.src) == 2 and lds[0] in upd.src:
    op, x = upd.op, (upd.src[1] if upd.src[0] is lds[0] else upd.src[0])
  else: return None
  fins = [a for a in afters if a is not la and len(a.src) == 2 and a.src[1].op is Ops.END]
  if len(fins) != 1 or (fidx := _only(users, fins[0], Ops.INDEX)) is None or len(fidx.src) != 2: return None
  if (fld := _only(users, fidx, Ops.LOAD)) is None: return None
  return _Acc(d, op, init, la, sts[0], x, fld)

def _split_offset(idx: UOp) -> tuple[UOp | None, int]:
  """idx as (base, constant offset)."""
  if idx.op is Ops.CONST: return None, int(idx.arg)
  if idx.op is Ops.ADD and idx.src[1].op is Ops.CONST: return idx.src[0], int(idx.src[1].arg)
  return idx, 0

def lane_shape(x: UOp, loads: list[UOp], table: dict[Any, int], memo: dict[UOp, int] | None = None) -> int:
  """The op tree of x with each plain load as (buffer, index without its constant offset) and constants as their dtype,
  as a number (equal numbers: equal shapes; `table` interns the shapes): lanes of the same shape differ only in load
  offsets and constants. The loads are appended to `loads` in the order a depth-first walk first reaches them."""
  memo = {} if memo is None else memo
  if (m := memo.get(x)) is not None: return m
  # NOTE: a gated load has the shape of a plain one: lanes that differ only in their gates become one masked load
  if _plain_or_gated_load(x):
    loads.append(x)
    key: Any = ("LOAD", x.dtype, x.src[0].src[0], _split_offset(x.src[0].src[1])[0])
  elif x.op in (Ops.CONST, Ops.VCONST): key = ("CONST", x.dtype)
  elif x.op in GroupOp.ALU or x.op in (Ops.CAST, Ops.BITCAST):
    key = (x.op, x.dtype, x.arg, tuple(lane_shape(s, loads, table, memo) for s in x.src))
  else: key = ("LEAF", x)
  memo[x] = ret = table.setdefault(key, len(table))
  return ret

def group_lanes(accs: list[_Acc], width: int, table: dict[Any, int]) -> list[list[_Acc]]:
  """Runs of `width` accumulators (one shape) whose loads, position by position, read the same address in every lane or
  consecutive addresses from lane to lane. A lane goes into at most one run; lanes left over stay scalar."""
  offs: dict[tuple[int, ...], _Acc] = {}
  for a in accs:
    loads: list[UOp] = []
    lane_shape(a.x, loads, table)
    offs[tuple(_split_offset(ld.src[0].src[1])[1] for ld in loads)] = a
  if len(offs) != len(accs) or len({len(o) for o in offs}) != 1 or not next(iter(offs)): return []
  def run_of(seed: tuple[int, ...], d: tuple[int, ...]) -> list[tuple[int, ...]]:
    return [tuple(a + k * s for a, s in zip(seed, d)) for k in range(width)]
  def tiling(d: tuple[int, ...]) -> list[list[tuple[int, ...]]] | None:
    """The runs along step d, seeded in order, where they take every lane; None where they do not."""
    seen: set[tuple[int, ...]] = set()
    runs = []
    for seed in sorted(offs):
      if seed in seen: continue
      run = run_of(seed, d)
      if not all(o in offs and o not in seen for o in run): return None
      seen.update(run)
      runs.append(run)
    return runs
  # the steps one lane is away from another by (each load position moves by 0 or 1)
  first = min(offs)
  gaps = (tuple(y - x for x, y in zip(first, o)) for o in offs if o != first)
  steps = sorted({d for d in gaps if all(x in (0, 1) for x in d)}, key=lambda d: (-sum(d), d))
  # NOTE: first one step whose runs take every lane, the one that moves the most loads: in a register tile over a
  # packed panel, the lanes along the diagonal (both loads one element on) form runs too, and taking those first left
  # the others in pieces (a conv's 8 x 8 x 4 tile over 8 pixel lanes: 2 vectors of 8 lanes, the rest 4, 2 and 1 wide,
  # 4x slower than 32 vectors of 8)
  if (whole := next((t for d in steps if (t := tiling(d)) is not None), None)) is not None:
    return [[offs[o] for o in run] for run in whole]
  taken: set[tuple[int, ...]] = set()
  out = []
  for seed in sorted(offs):
    if seed in taken: continue
    # the steps another lane is away by; prefer steps that move more loads
    diffs = [tuple(b - a for a, b in zip(seed, o)) for o in offs if o not in taken and o != seed]
    for d in sorted({d for d in diffs if all(x in (0, 1) for x in d)}, key=lambda d: (-sum(d), d)):
      run = run_of(seed, d)
      if all(o in offs and o not in taken for o in run):
        out.append([offs[o] for o in run])
        taken.update(run)
        break
  return out

def pack_accumulators(ren: Renderer, sink: UOp) -> UOp | None:
  """SINK rule: scalar accumulators of one loop whose updates have one shape become vector accumulators of
  `ren.acc_widths(dtype)` lanes; their results are read back lane by lane (GEP) after the loop."""
  users = _users(sink)
  accs = [a for d in users if d.op is Ops.DEFINE_REG and isinstance(d.dtype, PtrDType) and d.dtype.size == 1
          and d.dtype.base.count == 1 and _vec_ok(ren, d.dtype.base)
          and (a := match_acc(d, users)) is not None]
  classes: dict[Any, list[_Acc]] = {}
  table: dict[Any, int] = {}
  for a in accs:
    key = (a.op, a.define.dtype, a.init.src[0].src[0].src[1:], a.init.src[1], a.loop_after.src[2:],
           a.final.src[0].src[0].src[1], lane_shape(a.x, [], table))
    classes.setdefault(key, []).append(a)
  nreg = max((u.arg for u in users if u.op is Ops.DEFINE_REG), default=-1) + 1
  upd_subs: dict[UOp, UOp] = {}
  finals: list[tuple[UOp, UOp, UOp, int]] = []  # (old final load, vector define, old END, lane)
  lanes_of: dict[UOp, list[_Acc]] = {}
  for members in classes.values():
    dt = members[0].define.dtype.base  # type: ignore[attr-defined]
    for width in ren.acc_widths(dt):
      for lanes in group_lanes([m for m in members if m.update not in upd_subs], width, table):
        acc, upd = _vector_acc(lanes, dt.vec(width), nreg)
        nreg += 1
        lanes_of[upd] = lanes
        upd_subs.update({a.update: upd for a in lanes})
        finals += [(a.final, acc, a.final.src[0].src[0].src[1], i) for i, a in enumerate(lanes)]
  if not upd_subs: return None
  # the updates live in the GROUP under the innermost END of their loop: the vector updates replace the scalar ones
  group_subs = {g: UOp.group(*[s for s in g.src if s not in upd_subs],
                             *_operand_major(list(dict.fromkeys(upd_subs[s] for s in g.src if s in upd_subs)), lanes_of,
                                            ren.vector_registers))
                for g in users if g.op is Ops.GROUP and any(s in upd_subs for s in g.src)}
  # NOTE: hash-consing makes each rebuilt END here the same node as the one sink.substitute rebuilds
  zero = UOp.const(dtypes.int32, 0)
  new_end = {e: e.substitute(group_subs) for e in {end for _, _, end, _ in finals}}
  fin_subs = {old: acc.after(new_end[end]).index(zero).load().gep(lane) for old, acc, end, lane in finals}
  return sink.substitute({**group_subs, **fin_subs})

def _operand_major(upds: list[UOp], lanes_of: dict[UOp, list[_Acc]], registers: int) -> list[UOp]:
  """The vector updates of one loop body in the order that keeps the fewest operands live: a register tile's updates
  are an outer product of its operands (a matmul's 2 vector loads of a 16-lane panel row by its 6 rows' splats), and
  walking the operand position with the most distinct values outermost leaves only the other position's few values live
  across it. In the other order (the codegen's lane order where the lanes' axis comes first) all 6 splats stay live
  across both vectors: with 12 accumulators that is 19 of AVX2's 16 registers, and LLVM kept accumulators on the stack.
  Measured alone (2 threads, AVX2): the D768 block's (3072, 768) weight gradient 89.6 -> 47 ms. The order is unchanged
  where the updates differ in shape, where the codegen's order already fits in the `registers`, and where the
  accumulators and the live operands would not fit anyway (a tile whose reduce calls a transcendental keeps its
  accumulators in memory across the call: there GPT-2's probabilities x V ran slower reordered, 5.0 -> 6.7 ms)."""
  if len(upds) < 3 or not registers: return upds
  keys: list[list[Any]] = []
  for u in upds:
    per_lane = []
    for a in lanes_of[u]:
      loads: list[UOp] = []
      lane_shape(a.x, loads, {})
      per_lane.append(loads)
    if len({len(ls) for ls in per_lane}) != 1: return upds
    # a position's key: its one load where every lane reads the same (a splat), else its first lane's load
    keys.append([col[0] if len(set(col)) == 1 else ("vec", col[0]) for col in zip(*per_lane)])
  if len({len(k) for k in keys}) != 1 or len(keys[0]) < 2: return upds
  def live(order: list[int]) -> int:
    # accumulators plus the most operand values live at once (each from its first use to its last)
    span: dict[Any, list[int]] = {}
    for t, i in enumerate(order):
      for p, k in enumerate(keys[i]): span.setdefault((p, k), [t, t])[1] = t
    return len(upds) + max(sum(a <= t <= b for a, b in span.values()) for t in range(len(order)))
  pos = max(range(len(keys[0])), key=lambda p: (len({k[p] for k in keys}), -p))
  rank = {k: i for i, k in enumerate(dict.fromkeys(k[pos] for k in keys))}
  order = sorted(range(len(upds)), key=lambda i: (rank[keys[i][pos]], i))
  # NOTE: only where the codegen's order would not fit and this one does: where both fit, LLVM's own schedule of the
  # codegen's order was as fast or faster (a ResNet-18 conv's 16 x 4 tile: 1.16 ms, 1.44 reordered)
  if live(list(range(len(upds)))) <= registers or live(order) > registers: return upds
  return [upds[i] for i in order]

def _vector_acc(lanes: list[_Acc], vdt: DType, nreg: int) -> tuple[UOp, UOp]:
  """A vector accumulator for `lanes`: (its DEFINE_REG, its update STORE)."""
  a0 = lanes[0]
  acc = UOp(Ops.DEFINE_REG, vdt.ptr(1, AddrSpace.REG), arg=nreg)
  init_idx = a0.init.src[0]
  init_at = acc.after(*init_idx.src[0].src[1:]) if init_idx.src[0].op is Ops.AFTER else acc
  init = init_at.index(init_idx.src[1]).store(UOp.const(vdt, a0.init.src[1].arg))
  idx = acc.after(init, *a0.loop_after.src[2:]).index(init_idx.src[1])
  return acc, idx.store(idx.load().alu(a0.op, UOp.vectorize(*[a.x for a in lanes])))

# ---- scalar calls batched ----
# The transcendentals a target computes as calls on vectors of lanes (the CPU's libmvec functions: one call for 8 lanes
# costs what one for a scalar does) are worth packing even where their lanes are not lanes of one op: the exps of a
# softmax sum's unrolled steps, of the rows of a register tile over its keys (each row's exp shared by its lanes).

TRANSCENDENTAL_CALLS = (Ops.EXP2, Ops.LOG2, Ops.SIN)

def batched_calls(ren: Renderer) -> tuple[Ops, ...]:
  """The float32 transcendentals `ren` computes on vectors (the CPU with `vector_math`): pack_calls batches them."""
  vec = ren.vectors.get(dtypes.float32)
  return tuple(op for op in TRANSCENDENTAL_CALLS if vec is not None and op in vec.ops)

def pack_calls(ops: tuple[Ops, ...], sink: UOp) -> UOp | None:
  """SINK rule: scalar float32 `ops` in the same loops (the same open ranges), none computed from another, become one
  op on a VECTORIZE of their arguments, up to 8 lanes, each read back by a GEP."""
  groups: dict[tuple[Ops, frozenset[UOp]], list[UOp]] = {}
  for u in sink.toposort():
    if u.op in ops and u.dtype == dtypes.float32: groups.setdefault((u.op, u._ranges), []).append(u)
  subs: dict[UOp, UOp] = {}
  def flush(run: list[UOp]) -> None:
    if len(run) < 2: return
    v = UOp(run[0].op, dtypes.float32.vec(len(run)), (UOp.vectorize(*[m.src[0] for m in run]),), run[0].arg)
    subs.update({m: v.gep(i) for i, m in enumerate(run)})
  for members in groups.values():
    run: list[UOp] = []
    for u in members:
      if len(run) == 8 or (run and not u.toposort().keys().isdisjoint(run)):
        flush(run)
        run = []
      run.append(u)
    flush(run)
  return sink.substitute(subs) if subs else None

# ---- rows of a transposed tile read as vectors ----

def _scalar_global_load(x: UOp) -> bool:
  """LOAD(INDEX(buf, idx)) of one element of a global buffer, ungated."""
  return _plain_or_gated_load(x) and len(x.src) == 1 and x.dtype.count == 1 and \
    isinstance(bt := x.src[0].src[0].dtype, PtrDType) and bt.addrspace is AddrSpace.GLOBAL and bt.base.count == 1

def row_loads(ren: Renderer, sink: UOp) -> UOp | None:
  """SINK rule: scalar loads that feed vectors (VECTORIZE lanes: a store's or an op's) and read, between them, every
  element of a run of `width` consecutive elements of one buffer (at one base index) become one vector load of the run
  and a lane (GEP) each. A transposed tile (its lanes along the store's axis, its loads contiguous along another: NCHW
  to NHWC) then reads its input as whole vectors and builds its store vectors by shuffles, where it read every element
  alone and inserted it. Only runs the kernel reads whole, so no element it would not read is read; only where a
  buffer's loads at one base hold two runs or more (a tile, not a stray run); not where a load may sit under an IF.
  `width` is the widest vector of the renderer's (16 float32 lanes on AVX-512, 8 on AVX2): runs of 8 and 4 as well
  changed 39 of a UNet step's kernels for 1% of their time, one of them 2x slower."""
  topo = sink.toposort()
  if any(u.op is Ops.IF for u in topo): return None
  # each load fed into vectors, and the widest vector it feeds
  fed: dict[UOp, int] = {}
  for u in topo:
    if u.op is not Ops.VECTORIZE: continue
    for s in u.src:
      if _scalar_global_load(s): fed[s] = max(fed.get(s, 0), len(u.src))
  groups: dict[tuple[UOp, UOp | None, DType], dict[int, UOp]] = {}
  feeds: dict[tuple[UOp, UOp | None, DType], int] = {}
  for ld, n in fed.items():
    if not _vec_ok(ren, ld.dtype) or not ren.acc_widths(ld.dtype): continue
    base, off = _split_offset(ld.src[0].src[1])
    groups.setdefault(key := (ld.src[0].src[0], base, ld.dtype), {})[off] = ld
    feeds[key] = max(feeds.get(key, 0), n)
  subs: dict[UOp, UOp] = {}
  for (buf, base, dt), offs in groups.items():
    # NOTE: runs of half the widest where every vector the loads feed is that narrow (an 8 x 8 transposed tile on
    # AVX-512: its 8-lane store vectors from rows of 8); runs of 8 everywhere changed many kernels for 1% (above)
    ws = ren.acc_widths(dt)
    width = ws[1] if len(ws) > 1 and feeds[(buf, base, dt)] == ws[1] == ws[0] // 2 else ws[0]
    if len(offs) < 2 * width: continue
    taken: set[int] = set()
    for start in sorted(offs):
      if start in taken or not all(start + j in offs and start + j not in taken for j in range(width)): continue
      idx = offs[start].src[0].src[1]
      vec = _vector_load(buf, idx, dt, width)
      subs.update({offs[start + j]: vec.gep(j) for j in range(width)})
      taken.update(range(start, start + width))
  return sink.substitute(subs) if subs else None

# ---- lanes into vector ops (any width: the target legalizes what its registers do not hold) ----

def _vec_ok(ren: Renderer, dt: DType) -> bool: return dt.scalar() in ren.vectors

def vectorize_alu(ren: Renderer, v: UOp) -> UOp | None:
  """VECTORIZE of one ALU op in every lane -> the op on VECTORIZEs of its operands (any width)."""
  s0 = v.src[0]
  if s0.dtype.count != 1 or all(s is s0 for s in v.src): return None
  if not _vec_ok(ren, s0.dtype) or s0.op not in ren.vectors[s0.dtype.scalar()].ops: return None
  if not all(_vec_ok(ren, x.dtype) and x.dtype.count == 1 for x in s0.src): return None
  if not lanes_alike(v.src): return None
  operands = tuple(UOp.vectorize(*[s.src[j] for s in v.src]) for j in range(len(s0.src)))
  return UOp(s0.op, s0.dtype.vec(len(v.src)), operands, s0.arg)

def _plain_or_gated_load(x: UOp) -> bool:
  """LOAD(INDEX(buf, idx)) or LOAD(INDEX(buf, idx, gate), alt) with a scalar gate."""
  if x.op is not Ops.LOAD or x.src[0].op is not Ops.INDEX or len(x.src) != len(x.src[0].src) - 1: return False
  return len(x.src) == 1 or (len(x.src) == 2 and x.src[0].src[2].dtype.count == 1)

def _vector_load(buf: UOp, idx: UOp, dt: DType, width: int) -> UOp:
  """One load of `width` consecutive elements of buf from idx on."""
  return UOp(Ops.INDEX, buf.dtype.vec(width), (buf, idx)).load(dtype=dt.vec(width))

def vectorize_load(ren: Renderer, v: UOp) -> UOp | None:
  """VECTORIZE of loads of consecutive elements of one buffer -> one vector load; where some lanes are gated (a padded
  axis' lanes), a masked vector load with a gate per lane (true where the lane's load has none)."""
  lds = v.src
  if not all(_plain_or_gated_load(ld) for ld in lds): return None
  buf = lds[0].src[0].src[0]
  if not isinstance(buf.dtype, PtrDType) or buf.dtype.base.count != 1 or not _vec_ok(ren, lds[0].dtype): return None
  base, off = _split_offset(lds[0].src[0].src[1])
  for i, ld in enumerate(lds):
    if ld.src[0].src[0] is not buf or _split_offset(ld.src[0].src[1]) != (base, off + i): return None
  vdt = lds[0].dtype.vec(len(lds))
  # NOTE: a gate that folded to true (a padded panel's lanes short of the padding) reads as a plain lane
  if all(len(ld.src) == 1 or (ld.src[0].src[2].op is Ops.CONST and ld.src[0].src[2].arg is True) for ld in lds):
    return _vector_load(buf, lds[0].src[0].src[1], lds[0].dtype, len(lds))
  gate = UOp.vectorize(*[ld.src[0].src[2] if len(ld.src) == 2 else UOp.const(dtypes.bool, True) for ld in lds])
  alt = UOp.vectorize(*[ld.src[1] if len(ld.src) == 2 else ld.const_like(0) for ld in lds])
  return UOp(Ops.INDEX, buf.dtype.vec(len(lds)), (buf, lds[0].src[0].src[1], gate)).load(alt, dtype=vdt)

def fold_vectorize(v: UOp) -> UOp | None:
  """VECTORIZE of constants -> a vector constant; of lanes of one vector -> a GEP (the vector itself when in order)."""
  if all(s.op is Ops.CONST for s in v.src): return UOp.const(v.dtype, tuple(s.arg for s in v.src))
  s0 = v.src[0]
  if s0.op is Ops.GEP and len(s0.arg) == 1 and all(s.op is Ops.GEP and s.src[0] is s0.src[0] and len(s.arg) == 1
                                                    for s in v.src):
    return s0.src[0].gep(tuple(s.arg[0] for s in v.src))
  return None

def fuse_mulacc(m: UOp, c: UOp) -> UOp | None:
  """a*b+c on float32/float64 -> MULACC (fused, as gcc contracts it on the C path: the one freedom a target keeps,
  docs/ir.md section 5)."""
  return UOp(Ops.MULACC, c.dtype, (*m.src, c)) if fmf(c.dtype) else None

def llvm_matcher(ren: Renderer) -> PatternMatcher:
  """The final renderer rules: vector accumulators (where the target has vector registers), lanes into vector ops,
  a*b+c into MULACC. DEVECTORIZE (read as each kernel is rewritten) holds here as in codegen: at 1 only loads become
  vectors, at 2 nothing does."""
  rules: list[tuple[UPat, Callable[..., Any]]] = [
    (UPat(Ops.VECTORIZE, name="v"), fold_vectorize),
    (UPat(Ops.VECTORIZE, name="v"), lambda v: vectorize_load(ren, v) if DEVECTORIZE < 2 else None),
    (UPat(Ops.VECTORIZE, name="v"), lambda v: vectorize_alu(ren, v) if DEVECTORIZE < 1 else None),
    (UPat(Ops.ADD, src=[UPat(Ops.MUL, name="m"), UPat.var("c")]), fuse_mulacc),
  ]
  if ren.acc_widths(dtypes.float32):
    rules.insert(0, (UPat(Ops.SINK, name="sink"),
                     lambda sink: pack_accumulators(ren, sink) if DEVECTORIZE < 1 else None))
    rules.insert(0, (UPat(Ops.SINK, name="sink"), lambda sink: row_loads(ren, sink) if DEVECTORIZE < 1 else None))
  if calls := batched_calls(ren):
    rules.insert(0, (UPat(Ops.SINK, name="sink"), lambda sink: pack_calls(calls, sink) if DEVECTORIZE < 1 else None))
  return PatternMatcher(rules)

__all__ = ["pack_accumulators", "batched_calls", "pack_calls", "vectorize_alu", "vectorize_load", "fold_vectorize",
           "llvm_matcher"]
