"""The rule-guided input scheduler: which bytes a guided run tries next, from what earlier inputs made the compiler do.

Feedback is cheap on purpose: the rewrite rules an input made match and how often (TRACK_MATCH_STATS counters the
matcher keeps anyway), no line tracing. Measured on these generators, tracing every line of tinygrad costs half the
inputs and steers no better than the rule counters (docs/fuzz.md), so the guidance here lives in the scheduling:

  features   per input: each rule that matched, and (rule, count bucket) with AFL's buckets 1, 2, 3, 4-7, 8-15,
             16-31, 32-127, 128+; and what the case is made of: each (op, dtype it computes on), casts as (from, to)
             (`shape_features`); an input with a feature no earlier input had joins the corpus (trimmed to the bytes
             its case read), and so does one that reaches a rare rule feature for under half the cost of the seed
             that holds it now
  energy     AFL's favored seeds with entropic rarity: each rule feature's favored seed is the cheapest that reaches
             it; a seed is picked in proportion to the rarity of its rules (sum of 1/hits; count buckets and shapes
             weigh `shape_weight` as much), over the square root of how often it was picked, times how much cheaper
             than the average input it ran (1/8..8), and a seed favored for nothing gets a tenth. Measured on the
             kernel level, 9 corpus entries in 10 joined for a new shape, and weighing them like rules sent the
             mutations to big, slow seeds (mutated cases were half again as large as fresh ones)
  mutations  structure-aware: a generator reads each choice from a run of bytes (BytesChooser), and the scheduler
             knows where each choice starts (`ChoiceRecorder`), so it changes one choice or a few (most often: the
             case keeps its size), keeps a prefix of choices and draws the rest anew, splices two seeds at choice
             boundaries, inserts or deletes a choice, repeats a run of choices right after itself (a subtree built
             twice is one node: `x op x`, a condition tested twice), or flips bytes anywhere
  fresh      fresh random inputs, exactly what the unguided baseline draws, are still tried: the share is a two-armed
             bandit over how often fresh and mutated inputs reached a new rule lately (between 30% and 90%), so a
             corpus that stops paying gives the time back to random generation
  directed   (`Director`, used by the kernel target) a share of the fresh inputs aims at a rule that was tried but
             never matched: the generator weighs up the ops and dtypes its pattern names (`rule_ops`) and now and
             then builds an expression from the pattern itself (`rule_patterns`): its ops, constants and repeated
             names, what random trees almost never put together (`c ? false : true`, `x // x`)

The scheduler is the same for every level: `Scheduler(fresh_bytes, marks_of)` where marks_of(data) rebuilds the case
only to learn its choice boundaries (no checking)."""
from __future__ import annotations
import bisect, random
from dataclasses import dataclass, field
from typing import Any, Callable
from tinygrad.uop import Ops, GroupOp
from tinygrad.uop.ops import UOp
from tinygrad.dtype import DType
from fuzz.gen.choosers import BytesChooser

# AFL's hit-count buckets: a count is kept as the bucket it falls in
BUCKETS = (1, 2, 3, 4, 8, 16, 32, 128)

def bucket(n: int) -> int:
  """The bucket index of a hit count n >= 1."""
  return bisect.bisect_right(BUCKETS, n) - 1

def features(rules: dict[str, int]) -> set[str]:
  """An input's features from its rule matches (rule -> count): each rule, and each rule with its count's bucket."""
  out: set[str] = set()
  for r, n in rules.items():
    if n <= 0: continue
    out.add(r)
    out.add(f"{r}#{bucket(n)}")
  return out

def shape_features(root: Any) -> set[str]:
  """What a case is made of, as features: each op with the dtype it computes on (a CAST or BITCAST: from and to), so
  a case that puts a known rule to work on a dtype no case had (an unsigned compare, a cast to fp8) counts as new."""
  if not isinstance(root, UOp): return set()
  def name(u: UOp) -> str: return str(u.dtype.scalar()).removeprefix("dtypes.")
  out: set[str] = set()
  for u in root.toposort():
    if u.op in (Ops.CAST, Ops.BITCAST): out.add(f"{u.op.name}:{name(u.src[0])}->{name(u)}")
    elif u.op in GroupOp.ALU or u.op in (Ops.REDUCE, Ops.LOAD, Ops.STORE):
      out.add(f"{u.op.name}:{name(u.src[-1] if u.op is Ops.STORE else u.src[0] if u.src else u)}")
  return out

class ChoiceRecorder(BytesChooser):
  """A BytesChooser that remembers where each choice started reading (its `marks`), for structure-aware mutation."""
  def __init__(self, data: bytes):
    super().__init__(data)
    self.marks: list[int] = []
  def integer(self, lo: int, hi: int) -> int:
    if hi > lo and self.pos < len(self.data): self.marks.append(self.pos)
    return super().integer(lo, hi)

@dataclass
class Seed:
  data: bytes
  marks: list[int]
  feats: frozenset[str]
  cost: float = 0.0
  picks: int = 0
  finds: int = 0
  shape: frozenset[str] = frozenset()
  # what the caller built the case with (a directed generator config): a mutation of the seed is built with it too
  tag: Any = None

@dataclass
class Arm:
  """A bandit arm: recent tries and finds, decayed so the share follows what pays now."""
  tries: float = 1.0
  finds: float = 1.0
  def note(self, found: bool, decay: float = 0.995) -> None:
    self.tries, self.finds = self.tries * decay + 1, self.finds * decay + found
  @property
  def rate(self) -> float: return self.finds / self.tries

@dataclass
class Scheduler:
  """next() -> the input to run; feedback(input, rules, ...) after it ran. `marks_of(data)` gives a seed's choice
  boundaries when the caller has not recorded them."""
  fresh_bytes: int
  marks_of: Callable[[bytes], list[int]]
  rng: random.Random = field(default_factory=lambda: random.Random(0))
  fresh_min: float = 0.3
  fresh_max: float = 0.9
  # how much a rare shape feature counts towards a seed's energy next to a rare rule (shapes are many: every op with
  # every dtype, every cast pair; measured on the kernel level they made 9 of 10 corpus entries and drew the
  # mutations to seeds that were merely big)
  shape_weight: float = 0.1
  # a rule feature hit by at most this many inputs is rare: an input that reaches it for less than half the cost of
  # its cheapest holder joins the corpus too, so the mutations of a rare rule's seeds drift to small, fast ones
  rare: int = 64
  corpus: list[Seed] = field(default_factory=list)
  hits: dict[str, int] = field(default_factory=dict)
  top: dict[str, int] = field(default_factory=dict)
  fresh: Arm = field(default_factory=Arm)
  mutated: Arm = field(default_factory=Arm)
  inputs: int = 0
  cost: float = 0.0
  _weights: list[float] = field(default_factory=list)
  _stale: int = 0
  _origin: dict[bytes, int] = field(default_factory=dict)

  # ---- what to run next ----
  def fresh_share(self) -> float:
    if not self.corpus: return 1.0
    f, m = self.fresh.rate, self.mutated.rate
    return min(self.fresh_max, max(self.fresh_min, f / (f + m)))

  def next(self) -> bytes:
    """The next input: fresh random bytes or a mutation of a seed (remembered until `feedback` is called for it)."""
    if not self.corpus or self.rng.random() < self.fresh_share():
      data = self.rng.randbytes(self.fresh_bytes)
      self._origin[data] = -1
      return data
    i = self.pick()
    s = self.corpus[i]
    s.picks += 1
    data = self.mutate(s, self.corpus[self.rng.randrange(len(self.corpus))])
    self._origin[data] = i
    return data

  def pick(self) -> int:
    """A seed index, by energy (AFL's favored seeds with entropic rarity): the rarity of its rule features (sum of
    1/hits; shape features count `shape_weight` as much), times how much faster than the average input it ran (1/8..8),
    over the square root of how often it was picked; a seed that is the cheapest holder of none of its features is
    not favored and gets a tenth."""
    if self._stale <= 0 or len(self._weights) != len(self.corpus):
      avg = self.cost / max(1, self.inputs)
      fav = set(self.top.values())
      def energy(i: int, s: Seed) -> float:
        rare = sum(1.0 / self.hits.get(f, 1) * (1.0 if "#" not in f else self.shape_weight) for f in s.feats)
        rare += self.shape_weight * sum(1.0 / self.hits.get(f, 1) for f in s.shape)
        speed = min(8.0, max(0.125, avg / s.cost)) if s.cost > 0 and avg > 0 else 1.0
        return (0.01 + rare) * (1 + s.finds) / (1 + s.picks) ** 0.5 * speed * (1.0 if i in fav else 0.1)
      self._weights = [energy(i, s) for i, s in enumerate(self.corpus)]
      self._stale = 32
    self._stale -= 1
    return self.rng.choices(range(len(self.corpus)), weights=self._weights)[0]

  def origin(self, data: bytes) -> Seed | None:
    """The seed `data` (from `next`) is a mutation of; None for a fresh input."""
    i = self._origin.get(data, -1)
    return self.corpus[i] if 0 <= i < len(self.corpus) else None

  # ---- feedback ----
  def feedback(self, data: bytes, rules: dict[str, int], used: int | None = None,
               marks: list[int] | Callable[[], list[int]] | None = None,
               shape: set[str] | frozenset[str] = frozenset(), cost: float = 0.0, tag: Any = None) -> bool:
    """Record what `data` made the compiler do (rule -> matches; `used`: bytes its case read; `marks`: where its
    choices started, if known, or a function giving them when the input joins the corpus; `shape`: shape_features of
    its case; `cost`: seconds it took); True when it joined the corpus: it had a feature no earlier input had, or it
    reached a rare rule feature for under half what that feature's cheapest seed costs."""
    self.inputs += 1
    self.cost += cost
    origin = self._origin.pop(data, -1)
    # NOTE: an input never fed back (its worker crashed) must not keep its entry forever
    if len(self._origin) > 4096: self._origin.clear()
    fs = features(rules)
    new = {f for f in fs if f not in self.hits}
    new_shape = {f for f in shape if f not in self.hits}
    for f in (*fs, *shape): self.hits[f] = self.hits.get(f, 0) + 1
    # NOTE: the bandit counts new rules only: a new count bucket or shape is cheap to find and says little about
    # reaching new rules, which is what the corpus is for
    new_rule = any("#" not in f for f in new)
    (self.fresh if origin < 0 else self.mutated).note(new_rule)
    cheaper = {f for f in fs - new if self.hits[f] <= self.rare and cost > 0 and f in self.top
               and cost < 0.5 * self.corpus[self.top[f]].cost}
    if not (new or new_shape or cheaper): return False
    if new_rule and 0 <= origin < len(self.corpus): self.corpus[origin].finds += 1
    self.add(data[:max(used, 1)] if used is not None else data, fs, marks, shape, cost, tag)
    return True

  def add(self, data: bytes, fs: set[str] | frozenset[str] = frozenset(),
          marks: list[int] | Callable[[], list[int]] | None = None,
          shape: set[str] | frozenset[str] = frozenset(), cost: float = 0.0, tag: Any = None) -> None:
    """A seed (also for loading a corpus directory, features unknown); it becomes the favored seed of each of its rule
    features that it reaches cheaper than the one before."""
    i = len(self.corpus)
    got = marks() if callable(marks) else marks if marks is not None else self.marks_of(data)
    self.corpus.append(Seed(data, got, frozenset(fs), cost,
                            shape=frozenset(shape), tag=tag))
    for f in fs:
      if (j := self.top.get(f)) is None or (cost > 0 and cost < self.corpus[j].cost): self.top[f] = i
    self._stale = 0

  # ---- structure-aware mutation ----
  def mutate(self, s: Seed, other: Seed) -> bytes:
    """One of the operators below, by weight; past the result's end, some random bytes."""
    op = self.rng.choices(MUTATIONS, weights=[w for _, w in MUTATIONS])[0][0]
    b = getattr(self, op)(s, other)
    # NOTE: past a seed's end a generator reads zeros (every choice its first option); random bytes there instead
    # let a mutation that makes the case read further draw the rest like a fresh input
    return b + self.rng.randbytes(max(0, self.fresh_bytes - len(b)) // 4)

  def _spans(self, s: Seed) -> list[tuple[int, int]]:
    """(start, end) of each choice of the seed (the last one runs to the end of its bytes)."""
    marks = [m for m in s.marks if m < len(s.data)] or [0]
    return [(lo, marks[i + 1] if i + 1 < len(marks) else max(lo + 1, len(s.data))) for i, lo in enumerate(marks)]

  def change_choices(self, s: Seed, other: Seed) -> bytes:
    """New bytes for one choice (two times in three) or for two to four."""
    b, spans = bytearray(s.data), self._spans(s)
    for _ in range(1 if self.rng.random() < 2 / 3 else self.rng.randint(2, 4)):
      lo, hi = self.rng.choice(spans)
      b[lo:hi] = self.rng.randbytes(hi - lo)
    return bytes(b)

  def redraw_tail(self, s: Seed, other: Seed) -> bytes:
    """The seed's choices up to one, then fresh bytes: the case keeps its start and grows a new rest."""
    lo, _ = self.rng.choice(self._spans(s))
    return s.data[:lo] + self.rng.randbytes(max(16, self.fresh_bytes - lo))

  def splice(self, s: Seed, other: Seed) -> bytes:
    """The seed's choices up to one, then the other seed's from one of its choices on."""
    lo, _ = self.rng.choice(self._spans(s))
    olo, _ = self.rng.choice(self._spans(other))
    return s.data[:lo] + other.data[olo:]

  def insert_choice(self, s: Seed, other: Seed) -> bytes:
    """A choice's bytes (a copy of one of the seed's, or new) inserted at a choice boundary."""
    spans = self._spans(s)
    lo, hi = self.rng.choice(spans)
    at, _ = self.rng.choice(spans)
    chunk = s.data[lo:hi] if self.rng.random() < 0.5 else self.rng.randbytes(hi - lo)
    return s.data[:at] + chunk + s.data[at:]

  def repeat_choices(self, s: Seed, other: Seed) -> bytes:
    """A run of one to 24 consecutive choices repeated right after itself: where the run built a subtree, the next
    one the generator builds in the same place is the same subtree, and hash-consing makes it the same node, so the
    case gets `x op x`, `c ? a : a`, a condition tested twice: what the rules for repeated operands need, and what
    random bytes almost never give."""
    spans = self._spans(s)
    i = self.rng.randrange(len(spans))
    j = min(len(spans), i + self.rng.randint(1, 24)) - 1
    lo, hi = spans[i][0], spans[j][1]
    return s.data[:hi] + s.data[lo:hi] + s.data[hi:]

  def delete_choice(self, s: Seed, other: Seed) -> bytes:
    lo, hi = self.rng.choice(self._spans(s))
    return s.data[:lo] + s.data[hi:]

  def flip_bytes(self, s: Seed, other: Seed) -> bytes:
    """One to four bytes anywhere set or bit-flipped (not structure-aware: the fallback)."""
    b = bytearray(s.data or b"\0")
    for _ in range(self.rng.randint(1, 4)):
      i = self.rng.randrange(len(b))
      if self.rng.random() < 0.5: b[i] = self.rng.randrange(256)
      else: b[i] ^= 1 << self.rng.randrange(8)
    return bytes(b)

# operator name, weight
# NOTE: weighted to keep a case's size: changing choices in place first, deleting one as often as inserting one
MUTATIONS: tuple[tuple[str, int], ...] = (("change_choices", 5), ("redraw_tail", 1), ("splice", 1),
                                          ("insert_choice", 1), ("repeat_choices", 2), ("delete_choice", 2),
                                          ("flip_bytes", 1))

# ---- directed generation: fresh inputs made of what the rules not reached yet are made of ----

def pattern_parts(p: Any) -> tuple[frozenset[Ops], frozenset[DType], bool]:
  """Every Op and every DType a UPat names, at any depth (its alternatives and sources; an op set of more than four,
  a whole GroupOp, says little about the rule and is left out), and whether it binds one name twice (`x // x`)."""
  ops: set[Ops] = set()
  dts: set[DType] = set()
  names: list[str] = []
  stack = [p]
  while stack:
    u = stack.pop()
    if u.op is not None and len(u.op) <= 4: ops |= u.op
    if u.dtype is not None and len(u.dtype) <= 4: dts |= {d.scalar() for d in u.dtype}
    if u.name is not None: names.append(u.name)
    stack.extend(getattr(u, "alts", ()))
    src = u.src
    # NOTE: a list of sources holds every ordering of one tuple (commutative ops): the first is the pattern
    if isinstance(src, list): stack.extend(src[0])
    elif src is not None: stack.append(src)
  return frozenset(ops), frozenset(dts), len(names) != len(set(names))

def pattern_ops(p: Any) -> frozenset[Ops]: return pattern_parts(p)[0]

Aim = tuple[frozenset[Ops], frozenset[DType], bool]

def rule_key(rule: str) -> str:
  """The key a rule's hits are counted by: 'rule #12 fold_sum (symbolic.py:200)' -> 'fold_sum (symbolic.py:200)', so
  one rule counts once, whatever matcher it is in (sym alone, sym + pm_expand, ...)."""
  return rule.split(" ", 2)[2] if rule.startswith("rule #") else rule

# the packages whose modules hold the rewrite rules a kernel goes through (symbolic, codegen's passes, the renderers')
RULE_PACKAGES = ("tinygrad.uop", "tinygrad.codegen", "tinygrad.renderer")

# the matchers a renderer makes for itself (llvm_matcher: its extra_matcher), made by import_rule_tables and kept
# alive here: live_matchers holds matchers weakly
_RENDERER_MATCHERS: list[Any] = []

def import_rule_tables() -> None:
  """Import every module of RULE_PACKAGES, and make the matchers the LLVM renderers make per instance, so rule_ops and
  rule_patterns see every rule a case may try, in every process alike. A process that has lowered nothing yet (a
  campaign's parent, a worker's first job) has not imported the renderers nor built one: its rules would be fewer
  than those of a process that has, and a worker would not know a rule the parent directed it at."""
  import importlib, pkgutil
  for name in RULE_PACKAGES:
    pkg = importlib.import_module(name)
    for m in pkgutil.iter_modules(pkg.__path__): importlib.import_module(f"{name}.{m.name}")
  if not _RENDERER_MATCHERS:
    from tinygrad.renderer.llvmir import CPULLVMRenderer, AMDLLVMRenderer
    # NOTE: the rules that exist only for some targets: vector accumulators (wide vector registers), batched libmvec
    # calls (vector_math); no llvmlite is needed to build a renderer
    rens = (CPULLVMRenderer(vector_bits=512, vector_math=True), CPULLVMRenderer(vector_bits=256), AMDLLVMRenderer())
    _RENDERER_MATCHERS.extend(ren.extra_matcher for ren in rens)

def rule_ops(key: Callable[[str], str]) -> dict[str, Aim]:
  """rule key -> the Ops and DTypes its pattern names and whether it binds a name twice, for every rule of every
  PatternMatcher alive (`key` maps a rule's TRACK_MATCH_STATS label to the key the rule hits are counted by)."""
  from tinygrad.uop.ops import live_matchers
  out: dict[str, Aim] = {}
  for pm in live_matchers():
    for r in pm.rules:
      ops, dts, rep = pattern_parts(r.pat)
      o0, d0, r0 = out.get(key(r.label), (frozenset(), frozenset(), False))
      out[key(r.label)] = (o0 | ops, d0 | dts, r0 or rep)
  return out

def rule_patterns(key: Callable[[str], str]) -> dict[str, tuple[Any, ...]]:
  """rule key -> its patterns (UPats; one rule may sit in several PatternMatchers), for every PatternMatcher alive:
  what a directed generator builds outright (fuzz/gen/kernels.py `instance`)."""
  from tinygrad.uop.ops import live_matchers
  out: dict[str, dict[int, Any]] = {}
  for pm in live_matchers():
    for r in pm.rules: out.setdefault(key(r.label), {})[id(r.pat)] = r.pat
  return {k: tuple(v.values()) for k, v in out.items()}

@dataclass
class Director:
  """Picks, for a directed fresh input, a rule that was tried (its pattern's top op came up) but never matched, and
  gives the Ops and DTypes of its pattern and whether it repeats an operand: the level weighs those up. A rule
  gets fewer tries the more directed inputs it already had (1/(1 + tries)), so one the generator cannot reach stops
  taking the time; the share of fresh inputs that are directed is a bandit (between `lo` and `hi`) over which kind
  reached a new rule."""
  ops: dict[str, Aim]
  rng: random.Random
  lo: float = 0.2
  hi: float = 0.8
  tries: dict[str, int] = field(default_factory=dict)
  directed: Arm = field(default_factory=Arm)
  plain: Arm = field(default_factory=Arm)
  def share(self) -> float:
    d, p = self.directed.rate, self.plain.rate
    return min(self.hi, max(self.lo, d / (d + p)))
  def pick(self, tried: set[str], hit: set[str] | dict[str, int]) -> tuple[str, Aim] | None:
    """(rule, the Ops and DTypes of its pattern) to direct the next fresh input at, or None (no unreached rule whose
    pattern names an op)."""
    # NOTE: sorted: a set of strings iterates in an order PYTHONHASHSEED changes, and a campaign's stream must not
    cands = [r for r in sorted(tried) if r not in hit and r in self.ops and self.ops[r][0]]
    if not cands: return None
    r = self.rng.choices(cands, weights=[1.0 / (1 + self.tries.get(c, 0)) for c in cands])[0]
    self.tries[r] = self.tries.get(r, 0) + 1
    return r, self.ops[r]
  def note(self, directed: bool, new_rule: bool) -> None: (self.directed if directed else self.plain).note(new_rule)

def recorder_marks(build: Callable[[BytesChooser], object]) -> Callable[[bytes], list[int]]:
  """marks_of for a level: rebuild the case from the bytes with a ChoiceRecorder (a case that fails to build: no
  marks, and mutations fall back to bytes)."""
  def marks_of(data: bytes) -> list[int]:
    ch = ChoiceRecorder(data)
    try: build(ch)
    except Exception: pass
    return ch.marks
  return marks_of

__all__ = ["Scheduler", "Seed", "ChoiceRecorder", "features", "shape_features", "bucket", "recorder_marks", "BUCKETS",
           "MUTATIONS", "Director", "Aim", "pattern_parts", "pattern_ops", "rule_ops", "rule_patterns", "rule_key",
           "import_rule_tables", "RULE_PACKAGES"]
