"""The kernel-AST generator behind `fuzz.strategies.build_kernel` (use that public name; this module is internal).

A kernel is drawn top-down from a `Chooser`: output ranges (sizes biased to 0, 1, primes and tile sizes +-1, some
ended by a DEFINE_VAR), one to `max_stores` stores (each over a subset of the ranges, sometimes masked), and for each
store an ALU tree of a drawn dtype over every dtype the IR has (bool, int8..uint64, float16, bfloat16, fp8e4m3,
fp8e5m2, float32, float64): loads through affine, flipped, shifted-and-masked (padded), constant (broadcast) and
data-dependent (gather) indices, constants with edge values, casts and bitcasts between dtypes, comparisons, sums
compared with constants (wrapping ones in narrow unsigned dtypes), integer index arithmetic (loop indices times small
coefficients plus a constant, divided or taken modulo constants: never-positive sums too), WHERE, MULACC, THREEFRY,
transcendentals, REDUCE ADD/MUL/MAX over new reduce ranges, one-hot select sums (a gather as the Tensor front end
writes it), local BUFFERIZEs, and now and then an operand that is the
one before it (one node used twice). Masks include window coordinates (`r + w + s`, a padded convolution's) and
triangular store masks (`r + k*r2 < d`). `directed_config` weighs the op tables towards what a rewrite rule's pattern
is made of (the rule-guided scheduler's directed inputs).

Every kernel passes `kernel_spec` and every access is in bounds by construction (a buffer is a row-major view whose
axes each index with a coordinate in [0, extent), or masked where it might not be), so the z3 bounds proof
(IGNORE_OOB=0) holds too. Buffers are numbered outputs first; range ids 0.. in order of creation.
"""
from __future__ import annotations
import dataclasses, functools, math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence
from tinygrad.uop import Ops, AxisType
from tinygrad.uop.ops import UOp
from tinygrad.dtype import DType, dtypes
from tinygrad.runtime import targets as registry
if TYPE_CHECKING: from fuzz.gen.choosers import Chooser

ALL_DTYPES: tuple[DType, ...] = (dtypes.bool, dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32,
                                 dtypes.uint32, dtypes.int64, dtypes.uint64, dtypes.float16, dtypes.bfloat16,
                                 dtypes.fp8e4m3, dtypes.fp8e5m2, dtypes.float32, dtypes.float64)
# range sizes biased to the edges: one, primes, powers of two +-1; tile sizes (a local/group dimension) +-1 are rarer
EDGE_SIZES = (1, 1, 2, 3, 4, 5, 7, 8, 9, 13, 15, 16, 17)
TILE_SIZES = (31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257)

# op name -> weight, per kind of dtype; "load" and "const" are leaves, the rest build trees
FLOAT_OPS = {"load": 8, "const": 3, "range": 1, "add": 4, "sub": 2, "mul": 4, "max": 2, "neg": 1, "fdiv": 2, "recip": 1,
             "sqrt": 1, "exp2": 1, "log2": 1, "sin": 1, "trunc": 1, "mulacc": 1, "where": 2, "cast": 3, "bitcast": 1,
             "reduce": 3, "pow": 1, "bufferize": 1, "selectsum": 1}
INT_OPS = {"load": 8, "const": 3, "range": 2, "add": 4, "sub": 2, "mul": 3, "max": 2, "neg": 1, "idiv": 2, "mod": 2,
           "shl": 1, "shr": 1, "and": 1, "or": 1, "xor": 1, "mulacc": 1, "where": 2, "cast": 3, "bitcast": 1,
           "reduce": 3, "threefry": 1, "bufferize": 1, "affine": 5, "selectsum": 1}
BOOL_OPS = {"load": 6, "const": 2, "cmp": 6, "cmpsum": 3, "and": 2, "or": 2, "xor": 1, "add": 1, "mul": 1, "max": 1,
            "where": 1, "cast": 2, "bitcast": 1, "reduce": 1}
# integer index arithmetic in ALU code: coefficients of loop indices (their signs are drawn per sum) and divisors
AFFINE_COEFS = (1, 1, 1, 2, 3, 4)
AFFINE_DIVISORS = (2, 2, 3, 4, 4, 5, 8, 16, -2, -3)

@dataclass
class KernelConfig:
  """Knobs of the kernel generator. `max_points` bounds the loop iterations of one store (the PYTHON interpreter and
  the reference run every one); TILE_SIZES are drawn only where they fit."""
  max_depth: int = 4
  max_stores: int = 3
  max_out_dims: int = 3
  max_reduce_dims: int = 2
  max_points: int = 2048
  dtypes: tuple[DType, ...] = ALL_DTYPES
  p_var: float = 0.15         # a range ended by a DEFINE_VAR
  p_tile: float = 0.1         # a range of a tile size +-1
  p_zero: float = 0.03        # a range of size 0 (the kernel does nothing)
  p_masked_store: float = 0.1
  p_gather: float = 0.08      # a load through an index read from another buffer
  p_window: float = 0.15      # a shifted coordinate that is a sum of two ranges (a convolution's window)
  p_sum_mask: float = 0.3     # a masked store whose condition compares a sum of ranges (a triangular mask)
  p_repeat: float = 0.02      # an operand that is the one before it (x*x, x-x, c ? a : a): one node used twice
  p_opts: float = 0.7         # random candidate opts (random_opts)
  p_gpu_opts: float = 0.9     # of the rest: a GPU target's default opts (gpu_opts), else None (each target's own)
  # rewrite-rule patterns (UPats) an expression is built from one time in 1/p_pattern (`instance`): a directed
  # config's, for a rule the plain generator's shapes do not reach
  patterns: tuple[Any, ...] = ()
  p_pattern: float = 0.0
  float_ops: dict[str, int] = field(default_factory=lambda: dict(FLOAT_OPS))
  int_ops: dict[str, int] = field(default_factory=lambda: dict(INT_OPS))
  bool_ops: dict[str, int] = field(default_factory=lambda: dict(BOOL_OPS))

@dataclass(frozen=True)
class KernelCase:
  """One generated kernel: the AST, the DEFINE_VAR values to run it with, candidate opts (each target applies those
  that fit it, in order; None lets the target's heuristics choose) and the seed of its input data."""
  ast: UOp
  var_vals: dict[str, int]
  opts: tuple[Any, ...] | None = None
  seed: int = 0

@dataclass
class _Buf:
  num: int
  dtype: DType
  extents: tuple[int, ...]
  node: UOp

class _KernelBuilder:
  def __init__(self, ch: Chooser, cfg: KernelConfig):
    self.ch, self.cfg = ch, cfg
    self.next_range, self.next_buf = 0, 0
    self.inputs: list[_Buf] = []
    self.var_vals: dict[str, int] = {}
    self.index_dtypes = [d for d in (dtypes.int8, dtypes.int32, dtypes.uint16, dtypes.int64) if d in cfg.dtypes]

  # ---- helpers ----
  def coin(self, p: float) -> bool: return self.ch.integer(0, 9999) < int(p * 10000)
  def weighted(self, weights: dict[str, int]) -> str:
    total = sum(weights.values())
    k = self.ch.integer(0, total - 1)
    for name, w in weights.items():
      if k < w: return name
      k -= w
    raise AssertionError("unreachable")

  def size(self, room: int) -> int:
    """A range size <= room (room >= 1), biased to the edges."""
    if self.coin(self.cfg.p_zero): return 0
    if self.coin(self.cfg.p_tile) and (fits := [s for s in TILE_SIZES if s <= room]): return self.ch.choice(fits)
    fits = [s for s in EDGE_SIZES if s <= room]
    return self.ch.choice(fits) if fits else 1

  def new_range(self, room: int, kind: AxisType) -> UOp:
    n = self.size(room)
    rid = self.next_range
    self.next_range += 1
    if n >= 2 and self.coin(self.cfg.p_var):
      name = f"n{rid}"
      lo = self.ch.integer(1, n)
      self.var_vals[name] = self.ch.integer(lo, n)
      return UOp.range(UOp.variable(name, lo, n), rid, kind)
    return UOp.range(n, rid, kind)

  @staticmethod
  def extent(r: UOp) -> int:
    """The most iterations a range can run (a DEFINE_VAR end: its upper bound)."""
    return int(r.src[0].vmax)

  def const(self, dt: DType) -> UOp:
    if dt is dtypes.bool: return UOp.const(dt, bool(self.ch.integer(0, 1)))
    if dtypes.is_int(dt):
      lo, hi = int(dtypes.min(dt)), int(dtypes.max(dt))
      edge = [0, 1, 2, 3, 7, lo, hi, hi // 2 + 1] + ([] if lo == 0 else [-1, -2, lo + 1])
      v = self.ch.choice(edge) if self.coin(0.5) else self.ch.integer(max(lo, -20), min(hi, 20))
      return UOp.const(dt, v)
    edge_f = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 3.0, -2.5, 0.1, 1e-3, 100.0, float("inf"), float("-inf"), float("nan")]
    f = self.ch.choice(edge_f) if self.coin(0.6) else self.ch.integer(-64, 64) / 8
    return UOp.const(dt, f)

  # ---- indices ----
  def coordinate(self, extent: int, ranges: Sequence[UOp]) -> tuple[UOp, UOp | None]:
    """An index expression in [0, extent) where its mask (if any) holds: (index, mask or None)."""
    fits = [r for r in ranges if self.extent(r) <= extent]
    k = self.ch.integer(0, 9)
    if not fits or k == 0: return UOp.const(dtypes.index, self.ch.integer(0, max(extent - 1, 0))), None
    r = self.ch.choice(fits)
    e = self.extent(r)
    if k <= 4: return r, None
    if k == 5: return (UOp.const(dtypes.index, e - 1) - r if e > 0 else r), None   # a flip
    if k == 6 and e >= 2:                                                          # r // 2, r % m
      m = self.ch.integer(2, max(2, min(e, 5)))
      return (r // m if self.coin(0.5) else r % m), None
    # shifted by s: valid where 0 <= r + s < extent (zero padding on either side); sometimes the position in a window
    # too, r + w + s as a padded convolution reads, so the mask compares a sum of ranges with a constant
    s = self.ch.integer(-3, 3) or 1
    w = [x for x in ranges if x is not r and self.extent(x) >= 2]
    if w and self.coin(self.cfg.p_window):
      wr = self.ch.choice(w)
      pos, e = r + wr, e + self.extent(wr) - 1
    else: pos = r
    idx = pos + s
    lo_ok, hi_ok = (pos < -s).logical_not() if s < 0 else None, (pos < extent - s) if e + s > extent else None
    mask = lo_ok if hi_ok is None else hi_ok if lo_ok is None else lo_ok & hi_ok
    return idx, mask

  def buffer_index(self, extents: Sequence[int], ranges: Sequence[UOp]) -> UOp:
    """A flat row-major index into a buffer of these extents, masked when a coordinate might leave its axis."""
    idx: UOp | None = None
    masks: list[UOp] = []
    stride = 1
    for ext in reversed(extents):
      c, m = self.coordinate(ext, ranges)
      term = c * stride if stride != 1 else c
      idx = term if idx is None else term + idx
      stride *= max(ext, 1)
      if m is not None: masks.append(m)
    if idx is None: idx = UOp.const(dtypes.index, 0)
    if not masks: return idx
    cond = masks[0]
    for m in masks[1:]: cond = cond & m
    return idx.valid(cond)

  def new_buffer(self, dt: DType, extents: tuple[int, ...]) -> _Buf:
    num = self.next_buf
    self.next_buf += 1
    size = math.prod(max(1, e) for e in extents)
    return _Buf(num, dt, extents, UOp(Ops.DEFINE_GLOBAL, dt.ptr(size), arg=num))

  def load(self, dt: DType, ranges: Sequence[UOp], depth: int) -> UOp:
    same = [b for b in self.inputs if b.dtype is dt]
    if same and self.coin(0.35): buf = self.ch.choice(same)
    else:
      # a view over some of the ranges in scope, permuted, sometimes with an extra axis (broadcast or padding)
      axes = [self.extent(r) for r in ranges if self.coin(0.7)]
      for i in range(len(axes) - 1, 0, -1):
        j = self.ch.integer(0, i)
        axes[i], axes[j] = axes[j], axes[i]
      if self.coin(0.2): axes.insert(self.ch.integer(0, len(axes)), self.ch.integer(1, 4))
      buf = self.new_buffer(dt, tuple(axes))
      self.inputs.append(buf)
    if depth > 0 and self.index_dtypes and self.coin(self.cfg.p_gather):
      return buf.node.index(self.gather_index(buf, ranges, depth)).load()
    return buf.node.index(self.buffer_index(buf.extents, ranges)).load()

  def gather_index(self, buf: _Buf, ranges: Sequence[UOp], depth: int) -> UOp:
    """An index read from data: an int expression cast to index, valid where it is inside the buffer."""
    dt = self.ch.choice(self.index_dtypes)
    v = self.expr(dt, depth - 1, ranges).cast(dtypes.index)
    size = math.prod(max(1, e) for e in buf.extents)
    return v.valid((v < 0).logical_not() & (v < size))

  # ---- values ----
  def ops_for(self, dt: DType) -> dict[str, int]:
    # NOTE: without bool in the config, conditions are comparisons of the config's dtypes (no bool buffers)
    if dt is dtypes.bool: return self.cfg.bool_ops if dt in self.cfg.dtypes else {"cmp": 3, "cmpsum": 1, "const": 1}
    return self.cfg.int_ops if dtypes.is_int(dt) else self.cfg.float_ops

  def other_dtype(self, dt: DType, same_size: bool = False) -> DType | None:
    cands = [d for d in self.cfg.dtypes if d is not dt and (not same_size or d.itemsize == dt.itemsize)]
    if same_size and dt.itemsize != 1: cands = [d for d in cands if d is not dtypes.bool]
    return self.ch.choice(cands) if cands else None

  def expr(self, dt: DType, depth: int, ranges: Sequence[UOp]) -> UOp:
    if depth <= 0: return self.leaf(dt, ranges, depth)
    if self.cfg.patterns and self.coin(self.cfg.p_pattern):
      pat = self.ch.choice(self.cfg.patterns)
      if (got := self.instance(pat, dt, depth, ranges)) is not None: return got
      # a pattern of another dtype (a bool one under a float store): built in its dtype and cast
      if pat.dtype is not None and (fits := [d for d in pat.dtype if d in self.cfg.dtypes and d is not dt]):
        if (got := self.instance(pat, self.ch.choice(fits), depth - 1, ranges)) is not None: return got.cast(dt)
    return self.named_op(self.weighted(self.ops_for(dt)), dt, depth, ranges)

  def named_op(self, op: str, dt: DType, depth: int, ranges: Sequence[UOp]) -> UOp:
    """A tree of dt whose top is the generator op `op` (a name of the op tables)."""
    sub = depth - 1
    if op == "load": return self.load(dt, ranges, depth)
    if op == "const": return self.const(dt)
    if op == "range": return self.range_value(dt, ranges)
    if op == "cmp":
      src_dt = self.ch.choice(self.cfg.dtypes)
      a = self.expr(src_dt, sub, ranges)
      b = a if self.coin(self.cfg.p_repeat) else self.expr(src_dt, sub, ranges)
      return UOp(self.ch.choice([Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ]), dtypes.bool, (a, b))
    if op == "cmpsum": return self.cmp_sum(sub, ranges)
    if op == "affine": return self.affine(dt, ranges)
    if op == "where":
      c, x = self.expr(dtypes.bool, sub, ranges), self.expr(dt, sub, ranges)
      return UOp(Ops.WHERE, dt, (c, x, x if self.coin(self.cfg.p_repeat) else self.expr(dt, sub, ranges)))
    if op == "cast":
      if (src := self.other_dtype(dt)) is None: return self.leaf(dt, ranges, depth)
      return self.expr(src, sub, ranges).cast(dt)
    if op == "bitcast":
      if (src := self.other_dtype(dt, same_size=True)) is None: return self.leaf(dt, ranges, depth)
      return self.expr(src, sub, ranges).bitcast(dt)
    if op == "reduce": return self.reduce(dt, sub, ranges)
    if op == "selectsum": return self.select_sum(dt, sub, ranges)
    if op == "bufferize": return self.bufferize(dt, sub, ranges)
    if op == "threefry":
      if dt is not dtypes.uint64: return self.leaf(dt, ranges, depth)
      return UOp(Ops.THREEFRY, dt, (self.expr(dt, sub, ranges), self.expr(dt, sub, ranges)))
    if op == "mulacc":
      return UOp(Ops.MULACC, dt, tuple(self.expr(dt, sub, ranges) for _ in range(3)))
    unary = {"neg": Ops.NEG, "recip": Ops.RECIPROCAL, "sqrt": Ops.SQRT, "exp2": Ops.EXP2, "log2": Ops.LOG2,
             "sin": Ops.SIN, "trunc": Ops.TRUNC}
    if op in unary: return UOp(unary[op], dt, (self.expr(dt, sub, ranges),))
    binary = {"add": Ops.ADD, "sub": Ops.SUB, "mul": Ops.MUL, "max": Ops.MAX, "fdiv": Ops.FDIV, "pow": Ops.POW,
              "idiv": Ops.IDIV, "mod": Ops.MOD, "shl": Ops.SHL, "shr": Ops.SHR, "and": Ops.AND, "or": Ops.OR,
              "xor": Ops.XOR}
    a = self.expr(dt, sub, ranges)
    b = a if self.coin(self.cfg.p_repeat) else self.expr(dt, sub, ranges)
    return UOp(binary[op], dt, (a, b))

  # ---- a rule's pattern, built ----
  def instance(self, p: Any, dt: DType, depth: int, ranges: Sequence[UOp]) -> UOp | None:
    """A tree of dt that rewrite-rule pattern `p` (a UPat) matches (fuzz/gen/patterns.py), its free variables drawn as
    usual; None where the pattern cannot give dt or what it gives is not kernel_spec."""
    from spec import why_illegal, kernel_spec
    from fuzz.gen.patterns import PatternBuilder, COMPARISONS
    def can(op: Ops, d: DType) -> bool:
      return op in COMPARISONS or any(self.ops_for(d).get(n, 0) > 0 for n in OP_NAMES.get(op, ()))
    def other(op: Ops, d: DType, depth: int) -> UOp | None:
      # an op the pattern names without the shape of its sources (a LOAD, a REDUCE): the generator's own, if it has one
      names = [n for n in OP_NAMES.get(op, ()) if self.ops_for(d).get(n, 0) > 0]
      return self.named_op(names[0], d, depth, ranges) if names else None
    pb = PatternBuilder(self.ch, lambda d, k: self.expr(d, k, ranges), self.const, can,
                        lambda u: why_illegal(u, kernel_spec) is None, self.cfg.dtypes, other)
    return pb.build(p, dt, depth)

  def leaf(self, dt: DType, ranges: Sequence[UOp], depth: int) -> UOp:
    k = self.ch.integer(0, 5)
    if k == 0 or (dt not in self.cfg.dtypes and not ranges): return self.const(dt)
    if dt not in self.cfg.dtypes:
      return self.range_value(self.ch.choice(self.cfg.dtypes), ranges) < self.ch.integer(0, 4)
    if k == 1 and dt is not dtypes.bool and ranges: return self.range_value(dt, ranges)
    return self.load(dt, ranges, depth)

  def affine(self, dt: DType, ranges: Sequence[UOp]) -> UOp:
    """Integer index arithmetic as ALU code computes it: loop indices of dt times small coefficients plus a constant,
    and then one time in two divided by a constant or the remainder taken. The signs are drawn as a whole: a sum that
    is never negative, one that is never positive (truncation and floor differ there), or either; in an unsigned dtype
    a negative coefficient or constant wraps, and a constant near the top makes the sum wrap too."""
    if not ranges: return self.const(dt)
    d = self.ch.choice(AFFINE_DIVISORS) if self.coin(0.5) else 0
    if d < 0 and dtypes.is_unsigned(dt): d = -d
    # 0: never negative, 1: never positive (half the time under a division: truncation and floor differ there),
    # 2: either
    sign = self.ch.choice((0, 1, 1, 2)) if d else self.ch.integer(0, 2)
    def signed(v: int) -> int: return -v if sign == 1 or (sign == 2 and self.coin(0.5)) else v
    def term() -> UOp:
      # NOTE: a coefficient that is a multiple of the divisor one time in two: x = d*A + B, the split the division
      # rules make (as a split or upcast loop index is)
      k = signed(abs(d) * self.ch.choice((1, 2)) if d and self.coin(0.5) else self.ch.choice(AFFINE_COEFS))
      t = self.range_value(dt, ranges)
      if k == 1: return t
      # NOTE: in an unsigned dtype a negative coefficient is its value modulo 2**bits (the IR's integers wrap)
      return t * (k if k > 0 or not dtypes.is_unsigned(dt) else int(dtypes.max(dt)) + 1 + k)
    x = term()
    if self.coin(0.4): x = x + term()
    k = signed(self.ch.integer(0, 20))
    # NOTE: under a division, a constant that is not a multiple of the divisor (one that is divides out exactly)
    if d and k % d == 0: k += 1
    if dtypes.is_unsigned(dt) and self.coin(0.3): k = int(dtypes.max(dt)) - self.ch.integer(0, 15)
    if k != 0: x = x + k if k > 0 or not dtypes.is_unsigned(dt) else x - (-k)
    if not d: return x
    if self.coin(0.5):
      # NOTE: one time in four a second division, as a loop index split twice computes it: (x//a)//b
      return x // d // self.ch.choice((2, 3, 4)) if self.coin(0.25) else x // d
    # one time in four a second remainder by a divisor of the first, (x%a)%b: the remainder of a split index
    return x % d % self.ch.choice([v for v in (2, 3, 4) if d % v == 0] or [abs(d)]) if self.coin(0.25) else x % d

  def cmp_sum(self, depth: int, ranges: Sequence[UOp]) -> UOp:
    """A sum compared with a constant, `x + k < d` (or != / ==), over an integer dtype, one time in two a narrow
    unsigned one with k near its top, so the sum wraps and is not `x < d - k`: x is index arithmetic, a loaded value
    or a smaller tree."""
    ints = [d for d in self.cfg.dtypes if dtypes.is_int(d)]
    if not ints: return self.const(dtypes.bool)
    narrow = [d for d in ints if d in (dtypes.uint8, dtypes.uint16)]
    dt = self.ch.choice(narrow) if narrow and self.coin(0.5) else self.ch.choice(ints)
    sel = self.ch.integer(0, 2)
    x = self.affine(dt, ranges) if sel == 0 else self.load(dt, ranges, depth) if sel == 1 else \
      self.expr(dt, depth, ranges)
    wrap = dtypes.is_unsigned(dt) and self.coin(0.5)
    x = x + (UOp.const(dt, int(dtypes.max(dt)) - self.ch.integer(0, 40)) if wrap else self.const(dt))
    return UOp(self.ch.choice([Ops.CMPLT, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ]), dtypes.bool, (x, self.const(dt)))

  def range_value(self, dt: DType, ranges: Sequence[UOp]) -> UOp:
    """A loop index (or a DEFINE_VAR) as a value of dt."""
    if not ranges or dt is dtypes.bool: return self.const(dt)
    r = self.ch.choice(ranges)
    v = r.src[0] if r.src[0].op is Ops.DEFINE_VAR and self.coin(0.3) else r
    return v.cast(dt)

  def reduce(self, dt: DType, depth: int, ranges: Sequence[UOp]) -> UOp:
    outer = math.prod(max(1, self.extent(r)) for r in ranges)
    room = max(1, self.cfg.max_points // outer)
    rrs: list[UOp] = []
    for _ in range(self.ch.integer(1, self.cfg.max_reduce_dims)):
      if room < 2 and rrs: break
      r = self.new_range(room, AxisType.REDUCE)
      room = max(1, room // max(1, self.extent(r)))
      rrs.append(r)
    val = self.expr(dt, depth, [*ranges, *rrs])
    return val.reduce(*rrs, arg=self.ch.choice([Ops.ADD, Ops.MUL, Ops.MAX]))

  def select_sum(self, dt: DType, depth: int, ranges: Sequence[UOp]) -> UOp:
    """A gather as the Tensor front end writes it (an embedding, an advanced index): a sum over a new reduce range r of
    `where(x == r + c, g(r), 0)`, x an int that does not depend on r, r + c as the front end's arange is (index math
    cast to x's dtype: r itself, or split as (r // k) * k + r % k), one time in three with a second condition over r.
    Codegen collapses the sum to g(x - c) (tinygrad/codegen/gather.py); the reference sums it."""
    ints = [d for d in self.cfg.dtypes if d is not dtypes.bool and dtypes.is_int(d)]
    if dt is dtypes.bool or not ints: return self.reduce(dt, depth, ranges)
    outer = math.prod(max(1, self.extent(r)) for r in ranges)
    r = self.new_range(max(1, self.cfg.max_points // outer), AxisType.REDUCE)
    xdt = self.ch.choice(ints)
    x = self.load(xdt, ranges, depth) if self.coin(0.6) else self.expr(xdt, depth, ranges)
    k = self.ch.choice((2, 3, 7))
    v = r // k * k + r % k if self.coin(0.3) else r
    c = self.ch.choice((0, 0, 0, 1, 2, -1, -3))
    e = (v + c if c else v).cast(xdt)
    cond = UOp(Ops.CMPEQ, dtypes.bool, (x, e) if self.coin(0.5) else (e, x))
    if self.coin(0.33): cond = cond & self.expr(dtypes.bool, depth, [*ranges, r])
    g = self.expr(dt, depth, [*ranges, r])
    return UOp(Ops.WHERE, dt, (cond, g, UOp.const(dt, 0))).reduce(r, arg=Ops.ADD)

  def bufferize(self, dt: DType, depth: int, ranges: Sequence[UOp]) -> UOp:
    """A value materialised per thread over a new small range (a local BUFFERIZE), read back at some offset."""
    n = self.ch.integer(1, 8)
    r = UOp.range(n, self.next_range, AxisType.LOOP)
    self.next_range += 1
    bz = UOp(Ops.BUFFERIZE, dt, (self.expr(dt, depth, [*ranges, r]), r))
    idx, mask = self.coordinate(n, ranges)
    return UOp(Ops.INDEX, dt.ptr(n), (bz, idx.valid(mask) if mask is not None else idx)).load()

  # ---- the kernel ----
  def build(self) -> tuple[UOp, dict[str, int]]:
    cfg = self.cfg
    outs: list[UOp] = []
    room = cfg.max_points
    for _ in range(self.ch.integer(0, cfg.max_out_dims)):
      r = self.new_range(max(1, room), AxisType.LOOP)
      room = max(1, room // max(1, self.extent(r)))
      outs.append(r)
    n_stores = self.ch.integer(1, cfg.max_stores)
    # NOTE: outputs are numbered first (docs/ir.md section 2); their buffers are made before any input
    plans = []
    for _ in range(n_stores):
      rs = [r for r in outs if self.coin(0.8)] or outs[:1]
      dt = self.ch.choice(cfg.dtypes)
      plans.append((rs, dt, self.new_buffer(dt, tuple(self.extent(r) for r in rs))))
    stores = []
    for rs, dt, buf in plans:
      val = self.expr(dt, cfg.max_depth, rs)
      idx: UOp = UOp.const(dtypes.index, 0)
      stride = 1
      for i, r in enumerate(reversed(rs)):
        term = r * stride if stride != 1 else r
        idx = term if i == 0 else term + idx
        stride *= max(1, self.extent(r))
      if rs and self.coin(cfg.p_masked_store):
        r = self.ch.choice(rs)
        if len(rs) >= 2 and self.coin(cfg.p_sum_mask):
          # a triangular (causal) mask: r + k*r2 < bound, a comparison of a sum of ranges with a constant
          r2 = self.ch.choice([x for x in rs if x is not r])
          k = self.ch.choice([1, 1, 2, 3])
          top = self.extent(r) + k * self.extent(r2)
          idx = idx.valid((r + r2 * k if k != 1 else r + r2) < self.ch.integer(0, max(1, top)))
        else: idx = idx.valid(r < self.ch.integer(0, max(1, self.extent(r))))
      st = buf.node.index(idx).store(val)
      stores.append(st.end(*rs) if rs else st)
    return UOp.sink(*stores), dict(self.var_vals)

# the GPU targets whose default opts (their heuristics') a case may carry to every backend
GPU_ARCHS = (registry.NV_DEFAULT_ARCH, *registry.AMD_ARCHS)

@functools.lru_cache(maxsize=None)
def gpu_renderer(arch: str) -> Any:
  """The renderer of a GPU_ARCHS arch (one per process)."""
  return registry.renderer("AMD" if arch in registry.AMD_ARCHS else "NV", arch)

def gpu_opts(ch: Chooser, ast: UOp) -> tuple[Any, ...]:
  """Candidate opts: what the default heuristics of a GPU target (NV sm_90 or an AMD arch, drawn) choose for this
  kernel; two times in three with their workgroup replaced by more local axes (`grid_stress_opts`). Every backend
  keeps those that fit it: the PYTHON interpreter runs a GPU's opts with values checked, NV and AMD get each other's."""
  from tinygrad.codegen.program import prepare_kernel
  from tinygrad.codegen.heuristic import hand_coded_optimizations
  from tinygrad.codegen.opt import apply_opts, OptOps
  ren, prepared = gpu_renderer(ch.choice(GPU_ARCHS)), prepare_kernel(ast)
  opts = list(hand_coded_optimizations(prepared, ren))
  if not ch.integer(0, 2): return tuple(opts)
  # NOTE: the heuristics' own workgroup (their LOCALs come last) is replaced, and one time in two their upcasts of
  # output axes go too: both use up the output axes
  drop = (OptOps.LOCAL,) if ch.integer(0, 1) else (OptOps.LOCAL, OptOps.UPCAST)
  base = [o for o in opts if o.op not in drop]
  return tuple(base + grid_stress_opts(ch, apply_opts(prepared, base, ren)))

def grid_stress_opts(ch: Chooser, ast: UOp) -> list[Any]:
  """For a kernel with some opts applied: a group reduce (two times in three) and LOCALs on every output axis, innermost
  first, one per prime factor of its size (at most three): more local axes than a workgroup's three dimensions wherever
  the sizes allow (the lowering merges them), as BEAM or a user may ask."""
  from tinygrad.codegen.opt import Opt, OptOps, output_axes, reduce_axes, axis_size
  opts = []
  reds = [i for i, r in enumerate(reduce_axes(ast)) if (axis_size(r) or 0) >= 4]
  if reds and ch.integer(0, 2):
    red = ch.choice(reds)
    size = axis_size(reduce_axes(ast)[red]) or 0
    if (amts := [a for a in (2, 4, 8, 16) if size % a == 0 and size > a]):
      opts.append(Opt(ch.choice([OptOps.GROUP, OptOps.GROUPTOP]), red, ch.choice(amts)))
  # NOTE: innermost first, so a LOCAL over a whole axis (which retypes it) does not renumber the axes still to come;
  # a split keeps its axis (smaller), so the next LOCAL on it adds one more local axis
  for i, r in reversed(list(enumerate(output_axes(ast)))):
    size, n = axis_size(r) or 0, 0
    while size >= 2 and n < 3:
      f = next(d for d in range(2, size + 1) if size % d == 0)
      if f > 64: break
      opts.append(Opt(OptOps.LOCAL, i, 0 if f == size else f))
      size, n = size // f, n + 1
  return opts

def random_opts(ch: Chooser, ast: UOp, n_max: int = 4) -> tuple[Any, ...]:
  """Candidate opts for a kernel: each target keeps those that fit it, in order (see
  fuzz.campaign.backends.fit_opts)."""
  from tinygrad.codegen.opt import Opt, OptOps, PACK_OPERAND
  n_out = len([u for u in ast.toposort() if u.op is Ops.RANGE and u.arg[-1] is AxisType.LOOP])
  n_red = len([u for u in ast.toposort() if u.op is Ops.RANGE and u.arg[-1] is AxisType.REDUCE])
  out_ops = [OptOps.UPCAST, OptOps.LOCAL, OptOps.THREAD, OptOps.PADTO, OptOps.UPCAST, OptOps.SWAP]
  # NOTE: KBLOCK (CPU cache blocking of a reduce) and PACK (a reused load's panel staged in a per-thread buffer; its
  # axis picks a load, its arg the load's panel or its operand's, PACK_OPERAND) make iterations depend on each other
  # through memory: the campaign must reach them too
  red_ops = [OptOps.UNROLL, OptOps.GROUP, OptOps.GROUPTOP, OptOps.UNROLL, OptOps.KBLOCK, OptOps.PACK]
  # NOTE: CUT (the CPU's cut of store loops compared against constants) must be the first opt; other targets drop it
  opts = [Opt(OptOps.CUT)] if n_out and ch.integer(0, 3) == 0 else []
  for _ in range(ch.integer(0, n_max)):
    if n_red and (not n_out or ch.integer(0, 2) == 0): op, axis = ch.choice(red_ops), ch.integer(0, n_red - 1)
    elif n_out: op, axis = ch.choice(out_ops), ch.integer(0, n_out - 1)
    else: break
    if op is OptOps.PACK:
      opts.append(Opt(op, ch.integer(0, 2), ch.choice([None, PACK_OPERAND])))
      continue
    # NOTE: KBLOCK also by 1 (a block per step of the axis)
    args = {OptOps.PADTO: [2, 4, 8, 16, 32], OptOps.KBLOCK: [1, 2, 3, 4, 8, 16]}.get(op, [0, 2, 3, 4, 8, 16])
    arg = ch.integer(0, n_out - 1) if op is OptOps.SWAP else ch.choice(args)
    opts.append(Opt(op, axis, arg))
  return tuple(opts)

# the generator's op names that build each Op (what `directed_config` weighs up for a rule whose pattern has the Op)
OP_NAMES: dict[Ops, tuple[str, ...]] = {
  Ops.ADD: ("add", "affine", "cmpsum"), Ops.SUB: ("sub",), Ops.MUL: ("mul", "affine"), Ops.MAX: ("max",),
  Ops.NEG: ("neg",), Ops.FDIV: ("fdiv",), Ops.RECIPROCAL: ("recip",), Ops.SQRT: ("sqrt",), Ops.EXP2: ("exp2",),
  Ops.LOG2: ("log2",), Ops.SIN: ("sin",), Ops.TRUNC: ("trunc",), Ops.MULACC: ("mulacc",), Ops.WHERE: ("where",),
  Ops.CAST: ("cast",), Ops.BITCAST: ("bitcast",), Ops.REDUCE: ("reduce", "selectsum"), Ops.POW: ("pow",),
  Ops.BUFFERIZE: ("bufferize",), Ops.IDIV: ("idiv", "affine"), Ops.MOD: ("mod", "affine"), Ops.SHL: ("shl",),
  Ops.SHR: ("shr",), Ops.AND: ("and",), Ops.OR: ("or",), Ops.XOR: ("xor",), Ops.THREEFRY: ("threefry",),
  Ops.CMPLT: ("cmp", "cmpsum"), Ops.CMPNE: ("cmp", "cmpsum"), Ops.CMPEQ: ("cmp", "cmpsum"), Ops.CONST: ("const",),
  Ops.LOAD: ("load",), Ops.RANGE: ("range",)}

def directed_config(cfg: KernelConfig, ops: frozenset[Ops] | set[Ops], dts: Sequence[DType] = (), repeat: bool = False,
                    boost: int = 6, patterns: Sequence[Any] = (), p_pattern: float = 0.25) -> KernelConfig:
  """`cfg` with the weight of every generator op that builds one of `ops` multiplied by `boost` (in the float, int
  and bool tables alike), and each of `dts` that cfg draws from drawn `boost` times as often: kernels made of what a
  rule's pattern is made of; `repeat` (the pattern binds one name twice: `x // x`, `c ? (c ? a : _) : b`) makes an
  operand the one before it a quarter of the time. Every op and dtype keeps its weight > 0, so the directed generator
  draws the same kernels as `cfg`, in other proportions."""
  names = {n for o in ops for n in OP_NAMES.get(o, ())}
  def up(t: dict[str, int]) -> dict[str, int]: return {k: w * boost if k in names else w for k, w in t.items()}
  more = tuple(d for d in dict.fromkeys(dts) if d in cfg.dtypes) * (boost - 1)
  return dataclasses.replace(cfg, float_ops=up(cfg.float_ops), int_ops=up(cfg.int_ops), bool_ops=up(cfg.bool_ops),
                             dtypes=cfg.dtypes + more, p_repeat=max(cfg.p_repeat, 0.25) if repeat else cfg.p_repeat,
                             patterns=tuple(patterns), p_pattern=p_pattern if patterns else 0.0)

def build_kernel(ch: Chooser, cfg: KernelConfig | None = None) -> KernelCase:
  """A random kernel AST that passes kernel_spec, with its DEFINE_VAR values, candidate opts and an input seed."""
  cfg = cfg or KernelConfig()
  b = _KernelBuilder(ch, cfg)
  ast, var_vals = b.build()
  # NOTE: a case without random opts draws its input seed first: its data does not depend on the GPU opts drawn after
  if b.coin(cfg.p_opts): return KernelCase(ast, var_vals, random_opts(ch, ast), ch.integer(0, 2**31 - 1))
  seed = ch.integer(0, 2**31 - 1)
  return KernelCase(ast, var_vals, gpu_opts(ch, ast) if b.coin(cfg.p_gpu_opts) else None, seed)

__all__ = ["ALL_DTYPES", "EDGE_SIZES", "TILE_SIZES", "KernelConfig", "KernelCase", "build_kernel", "random_opts",
           "gpu_opts", "gpu_renderer", "grid_stress_opts", "GPU_ARCHS",
           "OP_NAMES", "directed_config"]
