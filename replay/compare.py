"""Comparing an old program with a new one: renamed only, same semantics (proved by z3), or changed (shown by running).

  renamed         the linear programs are equal up to the strings in args (SPECIAL and DEFINE_VAR names, the kernel
                  name) and the sources are equal up to a one-to-one renaming of generated identifiers
  same semantics  the programs' skeletons (every node that is not integer/bool index math: loads, stores, loops, float
                  arithmetic, ...) line up one to one with equal ops, dtypes and args, and every pair of index
                  expressions fed to them is proved equal by z3 (spec/smt.py) for all values of the loops, thread ids,
                  variables and loaded values. An `unknown` or a timeout is not a proof: the kernel is "changed".
  changed         anything else; `run_both` runs both on the same inputs (`input_sets`: random and boundary values
                  of the captured shapes): the old program is its recorded linear program interpreted on the PYTHON
                  backend (a record's source is never compiled: the database is untrusted), the new one natively for
                  CPU and CPU_LLVM (`run_native`, in a forked child), else interpreted too; the interpreter checks
                  every access, so a bad index is an error, not a crash. The outputs agree within
                  fuzz/oracles/budget.py's ULP budget or differ (`compare_outputs`, naming the first element). A run
                  that agrees does not make a kernel the same: it only fails to show the change. A kernel whose
                  recorded program is too big to interpret, and which the code checked out now builds again as it
                  was recorded (the diff's captured opts gave it unchanged), runs that rebuilt program natively as
                  the old side (`run_rebuilt`).
"""
from __future__ import annotations
import math, os, re
from dataclasses import dataclass
from typing import Any, Sequence, cast
import numpy as np
from tinygrad.uop import Ops, GroupOp
from tinygrad.uop.ops import UOp
from tinygrad.dtype import PtrDType, dtypes, to_np_dtype
from fuzz.oracles.differential import MAX_KERNEL_ELEMENTS

# ---- renamed ----

def _arg_eq(a: Any, b: Any, m: dict[str, str], inv: dict[str, str]) -> bool:
  """Args equal, with strings matched through one bijection (old -> new) grown as it goes."""
  if isinstance(a, str) and isinstance(b, str):
    if m.setdefault(a, b) != b or inv.setdefault(b, a) != a: return False
    return True
  if isinstance(a, tuple) and isinstance(b, tuple):
    return len(a) == len(b) and all(_arg_eq(x, y, m, inv) for x, y in zip(a, b))
  if type(a) is not type(b): return False
  if hasattr(a, "__dataclass_fields__") and hasattr(b, "__dataclass_fields__"):
    return all(_arg_eq(getattr(a, f), getattr(b, f), m, inv) for f in a.__dataclass_fields__)
  return bool(a == b) or (isinstance(a, float) and a != a and b != b)

def uops_rename_equal(a: Sequence[UOp], b: Sequence[UOp]) -> bool:
  if len(a) != len(b): return False
  pa = {u: i for i, u in enumerate(a)}
  pb = {u: i for i, u in enumerate(b)}
  m: dict[str, str] = {}
  inv: dict[str, str] = {}
  for x, y in zip(a, b):
    if x.op is not y.op or x.dtype != y.dtype or len(x.src) != len(y.src): return False
    if any(pa.get(s, -1) != pb.get(t, -2) for s, t in zip(x.src, y.src)): return False
    if not _arg_eq(x.arg, y.arg, m, inv): return False
  return True

_TOKEN = re.compile(r"[%@]?[A-Za-z_][A-Za-z_0-9.$]*|\d[\w.]*|\S")
# NOTE: words a target language gives meaning to (types, keywords, instructions) are never renamed: a renaming may only
# touch names the renderer made up, which carry a digit or an underscore-joined suffix, or an LLVM %/@ sigil
_FIXED = re.compile(r"^(u?int\d*(_t)?|float\d*|half\d*|double\d*|bool|_Bool|char\d*|short\d*|long\d*|u?char\d*|"
                    r"unsigned|signed|void|const|restrict|__\w+|[iuf]\d+|v\d+[iuf]\d+|bf16|bfloat\d*|_Float\d+|"
                    r"[A-Za-z]+\d*x\d+)$")

def _renamable(tok: str) -> bool:
  if tok[0] in "%@": return True
  return bool(re.match(r"[A-Za-z_]", tok)) and bool(re.search(r"\d|_", tok)) and not _FIXED.match(tok)

def source_rename_equal(a: str, b: str) -> bool:
  """The two sources are the same token for token, up to a one-to-one renaming of generated names."""
  ta, tb = _TOKEN.findall(a), _TOKEN.findall(b)
  if len(ta) != len(tb): return False
  m: dict[str, str] = {}
  inv: dict[str, str] = {}
  for x, y in zip(ta, tb):
    if x == y and not _renamable(x):
      continue
    if not (_renamable(x) and _renamable(y)): return False
    if m.setdefault(x, y) != y or inv.setdefault(y, x) != x: return False
  return True

# ---- same semantics ----

def is_expr(u: UOp) -> bool:
  """Index math: a scalar integer, index or bool value computed by ALU ops, casts and constants."""
  if u.op not in GroupOp.ALU and u.op not in (Ops.CONST, Ops.CAST, Ops.BITCAST): return False
  dt = u.dtype
  return not isinstance(dt, PtrDType) and dt.count == 1 and (dt is dtypes.index or dt is dtypes.bool or
                                                           dtypes.is_int(dt))

@dataclass(frozen=True)
class Proof:
  verdict: str   # "proved", "differs" (a counterexample), "unknown" (z3 gave up or timed out), "structure"
  detail: str

# ---- the skeleton as a DAG: independent nodes may be reordered ----
# NOTE: a node of the skeleton is pure (its value is a function of its sources), a LOAD (a function of its sources and
# of the memory written before it), or an effect (a store, a loop or block boundary, a barrier, a definition), whose
# place in the program is its meaning. Two skeletons are the same DAG when they pair up node for node with equal
# structural keys: op, dtype, arg (strings abstracted, matched one to one later), the keys of their skeleton sources, an
# effect's ordinal among the effects, and a LOAD's epoch (how many effects came before it). Pure nodes may then sit
# anywhere; effects are in the same order; every LOAD sees the same stores and sits in the same block.
PURE = GroupOp.ALU | {Ops.CONST, Ops.VCONST, Ops.CAST, Ops.BITCAST, Ops.GEP, Ops.VECTORIZE, Ops.INDEX, Ops.WMMA}

def _arg_key(a: Any) -> Any:
  if isinstance(a, str): return "S"
  if isinstance(a, tuple): return tuple(_arg_key(x) for x in a)
  if hasattr(a, "__dataclass_fields__"): return (type(a).__name__, tuple(_arg_key(getattr(a, f)) for f in
                                                                          a.__dataclass_fields__))
  return ("nan",) if isinstance(a, float) and a != a else (type(a).__name__, repr(a))

def _dag_keys(skel: Sequence[UOp], table: dict[Any, int], strict: bool) -> list[int]:
  ids: dict[UOp, int] = {}
  effects = 0
  for u in skel:
    if u.op in PURE: place: int | tuple[str, int] = -1
    elif u.op is Ops.LOAD: place = ("epoch", effects)
    else:
      place = effects
      effects += 1
    # NOTE: strict: an index-math source is keyed by itself (hash-consed: the same expression is the same node)
    k = (u.op, u.dtype, _arg_key(u.arg), tuple(ids.get(s, s if strict else -1) for s in u.src), place)
    ids[u] = table.setdefault(k, len(table))
  return [ids[u] for u in skel]

def pair_as_dag(so: Sequence[UOp], sn: Sequence[UOp]) -> list[UOp] | None:
  """The new skeleton reordered to pair with the old one node for node (`sn` permuted), or None when they are not the
  same DAG. Nodes of one key pair in program order; keys first hold the index math itself (a pure reordering pairs
  every node with its twin), then only its place (the index math may differ too: z3 decides)."""
  for strict in (True, False):
    table: dict[Any, int] = {}
    ko, kn = _dag_keys(so, table, strict), _dag_keys(sn, table, strict)
    groups: dict[int, list[UOp]] = {}
    for k, u in zip(kn, sn): groups.setdefault(k, []).append(u)
    out: list[UOp] = []
    for k in ko:
      if not (g := groups.get(k)): break
      out.append(g.pop(0))
    else: return out
  return None

def prove_same(old: Sequence[UOp], new: Sequence[UOp], timeout_ms: int = 10_000) -> Proof:
  """Whether the two linear programs compute the same thing: skeletons equal (in order, else as DAGs: independent nodes
  reordered), index math proved equal by z3."""
  so, sn = [u for u in old if not is_expr(u)], [u for u in new if not is_expr(u)]
  if len(so) != len(sn):
    return Proof("structure", f"{len(so)} non-index nodes before, {len(sn)} after (loads, stores, loops, float math)")
  first = _prove(so, sn, timeout_ms)
  if first.verdict != "structure" or (dag := pair_as_dag(so, sn)) is None or dag == sn: return first
  moved = sum(a is not b for a, b in zip(dag, sn))
  second = _prove(so, dag, timeout_ms)
  if second.verdict == "structure": return first
  return Proof(second.verdict, f"with {moved} independent node(s) reordered: {second.detail}")

def _prove(so: Sequence[UOp], sn: Sequence[UOp], timeout_ms: int) -> Proof:
  po, pn = {u: i for i, u in enumerate(so)}, {u: i for i, u in enumerate(sn)}
  m: dict[str, str] = {}
  inv: dict[str, str] = {}
  goals: list[tuple[UOp, UOp, int]] = []
  for i, (x, y) in enumerate(zip(so, sn)):
    where = f"node {i} ({x.op.name})"
    if x.op is not y.op or x.dtype != y.dtype or len(x.src) != len(y.src):
      return Proof("structure", f"{where}: {x.op.name} {x.dtype} with {len(x.src)} sources became "
                                f"{y.op.name} {y.dtype} with {len(y.src)}")
    if not _arg_eq(x.arg, y.arg, m, inv): return Proof("structure", f"{where}: arg {x.arg!r} became {y.arg!r}")
    for s, t in zip(x.src, y.src):
      if is_expr(s) and is_expr(t): goals.append((s, t, i))
      elif is_expr(s) or is_expr(t) or po.get(s, -1) != pn.get(t, -2):
        return Proof("structure", f"{where}: a source {s.op.name} became {t.op.name}")
  goals = [(s, t, i) for s, t, i in goals if s is not t]
  if not goals: return Proof("proved", "the skeletons are equal and so is every index expression")
  import z3
  from spec import smt
  from spec.smt import Translator, NotModeled
  tr = Translator()
  def translate(root: UOp) -> Any:
    # NOTE: Translator.translate walks below nodes it knows already; this stops there (a seeded load's sources are
    # never translated, they may be effects without a sort)
    for u in root.toposort(gate=lambda x: (x, 0) not in tr.cache):
      if (u, 0) not in tr.cache:
        if u.dtype.count != 1: raise NotModeled(f"z3 translation: a vector {u.op.name} feeds index math")
        tr.cache[(u, 0)] = tr._one(u, 0)
    return tr.cache[(root, 0)]
  def seed(u: UOp) -> Any:
    # NOTE: a loop or thread id is bounded by its end, a variable by its range; any other non-index node (a load, a
    # float cast to int) is a free value: nothing is assumed about it, so a proof holds for every value it could take
    if (u, 0) in tr.cache: return tr.cache[(u, 0)]
    if u.dtype.count != 1: raise NotModeled(f"z3 translation: a vector {u.op.name} feeds index math")
    if u.op in (Ops.RANGE, Ops.SPECIAL):
      end = seed(u.src[0]) if u.src[0] in po else translate(u.src[0])
      name = f"r{u.arg[0]}" if u.op is Ops.RANGE else str(u.arg)
      tr.cache[(u, 0)] = (tr._bounded(u, name, smt.zero(u.dtype), None, end[0]), True)
    elif u.op is Ops.DEFINE_VAR: tr.cache[(u, 0)] = tr._one(u, 0)
    else: tr.cache[(u, 0)] = (tr.fresh(u, u.op.name.lower()), True)
    return tr.cache[(u, 0)]
  try:
    for s, t, _ in goals:
      for leaf in [u for u in s.toposort(gate=lambda u: u not in po) if u in po]: seed(leaf)
      # a node of the new program's skeleton stands for the value of its partner in the old one
      for leaf in [u for u in t.toposort(gate=lambda u: u not in pn) if u in pn]:
        if (leaf, 0) not in tr.cache: tr.cache[(leaf, 0)] = seed(so[pn[leaf]])
    diffs = []
    for s, t, _ in goals:
      (a, av), (b, bv) = translate(s), translate(t)
      av, bv = z3.BoolVal(av) if isinstance(av, bool) else av, z3.BoolVal(bv) if isinstance(bv, bool) else bv
      diffs.append(z3.Or(av != bv, z3.And(av, a != b)))
  except (NotModeled, z3.Z3Exception) as e: return Proof("unknown", f"z3 translation: {e}")
  solver = z3.Solver()
  solver.set("timeout", timeout_ms)
  solver.add(*tr.constraints)
  solver.add(z3.Or(*diffs))
  r = solver.check()
  if r == z3.unsat: return Proof("proved", f"{len(goals)} index expression(s) proved equal by z3")
  if r == z3.sat:
    model = solver.model()
    bad = next(((s, t, i) for (s, t, i), d in zip(goals, diffs) if z3.is_true(model.eval(d, model_completion=True))),
               goals[0])
    vals = ", ".join(f"{k}={v}" for k, v in list(tr.model(model).items())[:8])
    return Proof("differs", f"node {bad[2]} ({so[bad[2]].op.name}): an index expression differs, e.g. at {vals}")
  return Proof("unknown", f"z3 could not decide within {timeout_ms} ms ({solver.reason_unknown()}): not proved")

# ---- running both ----
# NOTE: a replay database is untrusted data: a text a record carries (its source) is never compiled, loaded or run. The
# old program's outputs come from interpreting its recorded linear program (parsed exec-free) on PYTHON; the new one is
# what the code checked out now made from the record's inputs, run natively on CPU/CPU_LLVM when every string in it is
# a plain identifier (`unsafe_string`: the renderer writes strings of the record's AST, e.g. variable names, into the
# source), else interpreted too.

@dataclass(frozen=True)
class RunResult:
  outputs: str   # "differ", "agree" or "not run"
  detail: str
  max_ulp: float = 0.0  # agree: the largest distance in ulps of any checked element
  @property
  def differs(self) -> bool: return self.outputs == "differ"

class _Target:
  def __init__(self, device: str, identity: str): self.device, self.identity = device, identity

def _spec(name: str, uops: list[UOp]) -> Any:
  from tinygrad.renderer import ProgramSpec
  return ProgramSpec.from_uops(name, "", _Target("PYTHON", ""), uops[-1], uops)  # type: ignore[arg-type]

def _globals(uops: Sequence[UOp]) -> dict[int, PtrDType]:
  return {int(u.arg): u.dtype for u in uops if u.op is Ops.DEFINE_GLOBAL and isinstance(u.dtype, PtrDType)}

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")

def unsafe_string(name: str, uops: Sequence[UOp]) -> str | None:
  """The first string in the program (its name, any arg) that is not a plain identifier, else None. Only a program
  without one is compiled: a string of the record's AST (a variable's name) is written into the source as it is."""
  def walk(a: Any) -> str | None:
    if isinstance(a, str): return None if _IDENT.match(a) else a
    if isinstance(a, tuple): return next((w for x in a if (w := walk(x)) is not None), None)
    if hasattr(a, "__dataclass_fields__"): return walk(tuple(getattr(a, f) for f in a.__dataclass_fields__))
    return None
  return walk(name) if walk(name) is not None else next((w for u in uops if (w := walk(u.arg)) is not None), None)

@dataclass(frozen=True)
class InputSet:
  name: str
  bufs: dict[int, np.ndarray]
  var_vals: dict[str, int]

def random_inputs(uops: Sequence[UOp], seed: int) -> dict[int, np.ndarray]:
  """One array per DEFINE_GLOBAL: floats uniform in [-2, 2), ints small and non-negative (they may be indices)."""
  rng = np.random.default_rng(seed)
  ret: dict[int, np.ndarray] = {}
  for num, pt in sorted(_globals(uops).items()):
    base, n = pt.base.scalar(), max(int(pt.size), 1)
    npdt = np.dtype(to_np_dtype(base))
    if dtypes.is_float(base) and npdt.kind == "f": arr = rng.uniform(-2, 2, n).astype(npdt)
    elif base is dtypes.bool: arr = rng.integers(0, 2, n).astype(npdt)
    elif npdt.kind == "f" or npdt.kind in "iu": arr = rng.integers(0, 4, n).astype(npdt)
    else: arr = rng.integers(0, 256, n * npdt.itemsize).astype(np.uint8).view(npdt)
    ret[num] = arr
  return ret

def boundary_inputs(uops: Sequence[UOp], seed: int, ints: bool) -> dict[int, np.ndarray]:
  """Every float buffer holds the special values of its dtype (0, -0, +-inf, NaN, the largest finite value, the
  smallest normal and subnormal, +-1) each once first (as many as fit, in a random order), then half its other elements
  are special values too, the rest as `random_inputs`; with `ints`, int buffers likewise get their extremes (0, +-1, the
  smallest and largest value), else small non-negative values (they may be indices)."""
  from fuzz.oracles.budget import FLOAT_FORMAT
  from tinygrad.dtype import to_storage_np
  rng = np.random.default_rng(seed)
  ret = random_inputs(uops, seed)
  for num, pt in sorted(_globals(uops).items()):
    base, n = pt.base.scalar(), max(int(pt.size), 1)
    npdt = np.dtype(to_np_dtype(base))
    pick = rng.random(n) < 0.5
    def mix(special: np.ndarray, rest: np.ndarray) -> np.ndarray:
      out = np.where(pick, special[rng.integers(0, len(special), n)], rest)
      k = min(n, len(special))
      out[:k] = special[rng.permutation(len(special))[:k]]
      return out
    if dtypes.is_float(base) and base in FLOAT_FORMAT:
      mant, emin, maxf = FLOAT_FORMAT[base]
      special = np.array([0.0, -0.0, math.inf, -math.inf, math.nan, maxf, -maxf, 2.0 ** emin, -2.0 ** emin,
                          2.0 ** (emin - mant), 1.0, -1.0])
      vals = from_storage(ret[num], base).astype(np.float64)
      with np.errstate(all="ignore"):
        ret[num] = to_storage_np(mix(special, vals), base)
    elif ints and npdt.kind in "iu":
      ii = np.iinfo(cast(Any, npdt))
      special = np.array([0, 1, int(ii.max), int(ii.min), int(ii.max) - 1] + ([-1] if npdt.kind == "i" else []),
                         dtype=npdt)
      ret[num] = mix(special, ret[num]).astype(npdt)
  return ret

def from_storage(a: np.ndarray, dt: Any) -> np.ndarray:
  from tinygrad.dtype import from_storage_np
  return from_storage_np(a, dt) if a.dtype == np.dtype(to_np_dtype(dt)) else a

def _var_vals(old: Sequence[UOp], seed: int, at: str = "random") -> dict[str, int]:
  """Values of the variables: random for one seed, in range and at most 16 above the lower bound; or at that lower
  bound ("low") or at the top of that window ("high")."""
  rng = np.random.default_rng(seed + 1000)
  ret: dict[str, int] = {}
  for u in old:
    if u.op is not Ops.DEFINE_VAR: continue
    lo, hi = int(u.arg[1]), min(int(u.arg[2]), int(u.arg[1]) + 16)
    ret[str(u.arg[0])] = lo if at == "low" else hi if at == "high" else int(rng.integers(lo, hi + 1))
  return ret

def input_sets(old: Sequence[UOp]) -> list[InputSet]:
  """The inputs both programs run on, in the order they are tried: the captured buffers' shapes (the old program's
  DEFINE_GLOBALs), with random values, with boundary values (floats, then ints too), with random values again."""
  return [InputSet("random inputs, seed 0", random_inputs(old, 0), _var_vals(old, 0)),
          InputSet("boundary floats (0, -0, inf, NaN, extremes)", boundary_inputs(old, 2, False),
                   _var_vals(old, 2, "low")),
          InputSet("boundary floats and ints (the int dtypes' extremes)", boundary_inputs(old, 3, True),
                   _var_vals(old, 3, "high")),
          InputSet("random inputs, seed 1", random_inputs(old, 1), _var_vals(old, 1))]

def run_program(name: str, uops: list[UOp], bufs: dict[int, np.ndarray], var_vals: dict[str, int],
                emulate: str) -> dict[int, np.ndarray]:
  """Run a linear program on the PYTHON interpreter on copies of `bufs`; returns the buffers after the run."""
  from tinygrad.runtime.ops_python import PythonProgram, render_program
  from tinygrad.helpers import Context
  p = _spec(name, uops)
  out = {k: v.copy() for k, v in bufs.items()}
  with Context(EMULATE=emulate):
    gs, ls = p.launch_dims(var_vals)
    prg = PythonProgram(name, render_program(uops).encode())
    prg(*[out[k].view(np.uint8) for k in sorted(out)], global_size=gs, local_size=ls or (1, 1, 1),
        vals=[var_vals[n] for n in p.var_names])
  return out

# the most lane-steps (threads x executed lines) one interpreted run may take; a bigger kernel is not run (the report
# says so) rather than stall the diff (the interpreter runs a serial loop at about 50k lines a second). The old program
# runs on as many input sets as fit in KERNEL_STEPS in all (at least the first)
MAX_STEPS = 1_000_000
KERNEL_STEPS = 2_000_000
# the most elements the buffers of one kernel may hold in all for it to be run (the fuzz oracles' cap): a record names
# its buffers' sizes, and its inputs are made before anything runs (a record of a 2^32-element buffer asked numpy for
# 32 GiB; a hostile one can name any size). A bigger kernel is not run, and the report says so
MAX_ELEMENTS = MAX_KERNEL_ELEMENTS

def elements(uops: Sequence[UOp]) -> int:
  """The elements of every buffer a program names (DEFINE_GLOBAL), in all."""
  return sum(max(int(pt.size), 1) for pt in _globals(uops).values())

def steps(uops: Sequence[UOp], launch: int) -> int:
  """Threads x lines executed, loops counted at their largest extent."""
  mult, total = 1, 0
  stack: list[int] = []
  for u in uops:
    total += mult
    if u.op is Ops.RANGE:
      stack.append(mult)
      mult *= max(int(u.src[0].vmax), 1)
    elif u.op is Ops.END and stack: mult = stack.pop()
  return total * launch

def _steps(name: str, uops: list[UOp], var_vals: dict[str, int]) -> int:
  gs, ls = _spec(name, uops).launch_dims(var_vals)
  return steps(uops, math.prod(gs) * math.prod(ls or [1]))

def _too_big(which: str, name: str, uops: list[UOp], var_vals: dict[str, int]) -> RunResult | None:
  if (n := _steps(name, uops, var_vals)) <= MAX_STEPS: return None
  return RunResult("not run", f"not run: the {which} program takes about {n:.2e} interpreted steps "
                              f"(over {MAX_STEPS:.0e})")

# ---- what a PYTHON run and a native run share ----

def _buffers_differ(old: Sequence[UOp], new: Sequence[UOp]) -> RunResult | None:
  """A change shown without running: the two programs take different buffers."""
  go, gn = _globals(old), _globals(new)
  if {k: (v.base, v.size) for k, v in go.items()} == {k: (v.base, v.size) for k, v in gn.items()}: return None
  return RunResult("differ", f"the buffers differ: {sorted(go.items())} before, {sorted(gn.items())} after")

def _written(old: Sequence[UOp], new: Sequence[UOp]) -> list[int]:
  """The buffers either program stores to (all of them when neither stores to a global directly)."""
  return sorted({int(u.src[0].src[0].arg) for u in [*old, *new] if u.op is Ops.STORE and u.src[0].op is Ops.INDEX
                 and u.src[0].src[0].op is Ops.DEFINE_GLOBAL} or set(_globals(old)))

# ---- outputs compared within the ULP budget of fuzz/oracles/budget.py ----

# the most elements (the product of the AST's range extents) the budget reference evaluates; a bigger kernel's outputs
# are compared exactly (the detail says so)
REF_MAX_ELEMENTS = 1 << 21

@dataclass(frozen=True)
class Agreement:
  ok: bool
  detail: str
  max_ulp: float = 0.0

def _budget(ast: UOp | None, s: InputSet) -> tuple[Any, str]:
  """The budget reference (fuzz.oracles.budget.BudgetRef) of the kernel on this input set, or None and why there is
  none."""
  if ast is None: return None, "no kernel AST"
  ranges = [u for u in ast.toposort() if u.op is Ops.RANGE]
  if (n := math.prod(max(int(r.src[0].vmax) + 1, 1) for r in ranges)) > REF_MAX_ELEMENTS:
    return None, f"the reference would evaluate {n:.1e} elements (over {REF_MAX_ELEMENTS:.0e})"
  from fuzz.oracles.budget import run_budget_ref
  from fuzz.oracles.kernel_ref import KernelRefError
  try: return run_budget_ref(ast, s.bufs, s.var_vals), ""
  except (KernelRefError, ValueError, TypeError, IndexError, KeyError, OverflowError, ZeroDivisionError) as e:
    return None, f"the reference could not run it: {type(e).__name__}: {str(e)[:160]}"

def compare_outputs(ast: UOp | None, s: InputSet, old: dict[int, np.ndarray], new: dict[int, np.ndarray],
                    written: Sequence[int], dts: dict[int, PtrDType]) -> Agreement:
  """Old and new agree where every checked element is within twice the budget of fuzz/oracles/budget.py (each may be
  that far from the reference: reassociation, contraction, approximations) of the other, NaN matching NaN; ints exactly.
  Where the budget reference cannot run the kernel, exactly (the detail says why)."""
  if all(np.array_equal(old[k], new[k], equal_nan=old[k].dtype.kind == "f") for k in written):
    return Agreement(True, "")
  from fuzz.oracles.budget import ulp, FLOAT_FORMAT
  ref, why = _budget(ast, s)
  worst = 0.0
  for k in written:
    dt = dts[k].base.scalar()
    o, n = from_storage(old[k], dt).ravel(), from_storage(new[k], dt).ravel()
    bound = np.asarray(ref.buf_err[k], np.float64).ravel() if ref is not None and k in ref.buf_err else np.zeros(o.size)
    if dtypes.is_float(dt) and dt in FLOAT_FORMAT:
      with np.errstate(all="ignore"):
        o64, n64 = o.astype(np.float64), n.astype(np.float64)
        same = (o64 == n64) | (np.isnan(o64) & np.isnan(n64))
        dist = np.where(same, 0.0, np.abs(o64 - n64) / ulp(np.maximum(np.abs(o64), np.abs(n64)), dt))
        dist = np.where(np.isnan(dist), np.inf, dist)
        ok = same | ((np.abs(o64 - n64) <= 2 * bound) & (np.isnan(o64) == np.isnan(n64))) | np.isinf(bound)
        checked = np.isfinite(bound)
      worst = max(worst, float(np.max(dist[checked & ok], initial=0.0)))
    else:
      ok, dist = (o == n) | np.isinf(bound), np.zeros(o.size)
    if (bad := np.flatnonzero(~ok)).size:
      i = int(bad[0])
      if not dtypes.is_float(dt): how = "exactly (ints)"
      elif ref is None: how = f"exactly: no ULP budget ({why})"
      else: how = f"{dist[i]:.3g} ulp, budget {2 * bound[i] / float(ulp(np.abs(o64[i]), dt)):.3g} ulp"
      return Agreement(False, f"buffer data{k}[{i}]: old {o[i].item()!r}, new {n[i].item()!r} ({how}); {bad.size} of "
                              f"{o.size} elements differ")
  note = "" if ref is not None else f" (compared exactly: no ULP budget, {why})"
  return Agreement(True, note, worst)

# ---- running both: the old program interpreted, the new one natively where it can be ----

NATIVE = ("CPU", "CPU_LLVM")
NATIVE_TIMEOUT = 60.0  # seconds the new program may run natively, all input sets together
native_skip = ""

def _load_native(target: str, name: str, src: str) -> Any:
  """Compile `src`, a program the code checked out now generated, for the host: (the kernel as a ctypes function, what
  keeps its code alive). Fires the audit event `replay.compile` (target, source) first."""
  import sys
  from tinygrad.runtime import targets as registry
  sys.audit("replay.compile", target, src)
  return registry.load_host(target, name, registry.compiler(target).compile(src))

def _run_native(fxn: Any, uops: Sequence[UOp], name: str, bufs: dict[int, np.ndarray],
                var_vals: dict[str, int]) -> dict[int, np.ndarray]:
  from tinygrad.runtime import targets as registry
  p = _spec(name, list(uops))
  gs, ls = p.launch_dims(var_vals)
  out = {k: np.ascontiguousarray(v.copy()) for k, v in bufs.items()}
  # NOTE: THREAD axes: the kernel runs once per core id (serially here: the result does not depend on the order)
  registry.launch_host(fxn, [out[k].ctypes.data for k in sorted(out)], [var_vals[n] for n in p.var_names],
                       registry.host_cores(name, gs, ls))
  return out

def _send_runs(w: Any, fxn: Any, name: str, uops: list[UOp], sets: Sequence[InputSet], written: list[int]) -> None:
  """In the child: run the program on each input set, each run's start and result pickled to `w` as it comes (a crash
  or hang leaves its start as the last message); the first error ends the runs."""
  import pickle
  for i, s in enumerate(sets):
    pickle.dump(("start", i), w)
    w.flush()
    try: res = _run_native(fxn, uops, name, s.bufs, s.var_vals)
    except Exception as e: return pickle.dump(("error", i, f"{type(e).__name__}: {str(e)[:300]}"), w)
    pickle.dump(("done", i, {k: res[k] for k in written}), w)
    w.flush()

def run_native(target: str, new: tuple[str, str, list[UOp]], sets: Sequence[InputSet],
               written: list[int], which: str = "new") -> list[dict[int, np.ndarray]] | RunResult | None:
  """Compile the `which` program (name, source, linear program: one the code checked out now generated) for the host
  (`target` CPU: C, CPU_LLVM: LLVM IR) and run it on every input set in a forked child, so a crash or a hang costs the
  child only: the buffers after each run, or the RunResult of a crash, hang or error. None when it cannot be run
  natively here (the reason in `native_skip`)."""
  import pickle, select, time
  global native_skip
  if not hasattr(os, "fork"):
    native_skip = "no fork() on this platform"
    return None
  if (bad := unsafe_string(new[0], new[2])) is not None:
    native_skip = f"not compiled: the program holds the string {bad[:60]!r}, which is not a plain identifier"
    return None
  try: fn = _load_native(target, new[0], new[1])
  except Exception as e:
    native_skip = f"could not compile it for {target}: {type(e).__name__}: {str(e)[:200]}"
    return None
  rd, wr = os.pipe()
  pid = os.fork()
  if pid == 0:  # the child: run, send each result as it comes, never return into the caller's code
    try:
      import faulthandler
      faulthandler.disable()  # NOTE: a crash is the finding, reported by the parent; no traceback dump from the child
      os.close(rd)
      with os.fdopen(wr, "wb") as w: _send_runs(w, fn[0], new[0], new[2], sets, written)
    finally: os._exit(0)
  os.close(wr)
  msgs: list[Any] = []
  deadline = time.monotonic() + NATIVE_TIMEOUT
  with os.fdopen(rd, "rb") as r:
    while True:
      left = deadline - time.monotonic()
      if left <= 0 or not select.select([r], [], [], left)[0]:
        os.kill(pid, 9)
        break
      try: msgs.append(pickle.load(r))
      except EOFError: break
  _, status = os.waitpid(pid, 0)
  where = native_where(target)
  if msgs and msgs[-1][0] == "error":
    return RunResult("differ", f"the {which} program failed to run {where}: {msgs[-1][2]} ({sets[msgs[-1][1]].name})")
  if msgs and msgs[-1][0] == "start":
    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
    how = f"timed out (over {NATIVE_TIMEOUT:.0f} s)" if sig == 9 else f"crashed (signal {sig})"
    return RunResult("differ", f"the {which} program {how} {where} ({sets[msgs[-1][1]].name})")
  done = {m[1]: m[2] for m in msgs if m[0] == "done"}
  if len(done) != len(sets):
    return RunResult("differ", f"the {which} program ended early {where} (exit status {status})")
  return [done[i] for i in range(len(sets))]

def native_where(target: str) -> str:
  return f"natively on {target} ({'LLVM IR, llvmlite' if target == 'CPU_LLVM' else 'C, the C compiler'})"

Program = tuple[str, str, list[UOp]]  # name, source, linear program

def run_both(ast: UOp | None, old: Program, new: Program, target: str, emulate: str,
             rebuilt: Program | None = None) -> RunResult:
  """Run both programs on the same inputs (`input_sets`) and compare every buffer either one stores to, within the ULP
  budget (`compare_outputs`). The old program is its recorded linear program interpreted on PYTHON (EMULATE=`emulate`);
  the new one runs natively when the target is the host's (CPU, CPU_LLVM) and it can be compiled, else interpreted. An
  input set the old program cannot run on (its ints or floats used as indices) is left out, and the detail says so.
  `rebuilt`: the old program as the code checked out now builds it from the record (its AST and captured opts), given
  where the caller found it equal to the recorded one; when the recorded program is too big to interpret, that one runs
  natively in its place (`run_rebuilt`)."""
  (oname, _, ouops), (nname, _, nuops) = old, new
  if (shown := _buffers_differ(ouops, nuops)) is not None: return shown
  if (n := elements(ouops)) > MAX_ELEMENTS:
    return RunResult("not run", f"not run: its buffers hold {n:.2e} elements in all (over {MAX_ELEMENTS:.0e})")
  written, dts = _written(ouops, nuops), _globals(ouops)
  ran: list[tuple[InputSet, dict[int, np.ndarray]]] = []
  left_out: list[str] = []
  spent, cut = 0, 0
  for s in input_sets(ouops):
    if (n := _steps(oname, ouops, s.var_vals)) > MAX_STEPS and not spent:
      too_big = f"the old program takes about {n:.2e} interpreted steps (over {MAX_STEPS:.0e})"
      if rebuilt is not None and target in NATIVE: return run_rebuilt(ast, rebuilt, new, target, too_big)
      return RunResult("not run", f"not run: {too_big}")
    if n > MAX_STEPS or (spent and spent + n > KERNEL_STEPS):
      cut += 1
      continue
    spent += n
    try: ran.append((s, run_program(oname, ouops, s.bufs, s.var_vals, emulate)))
    except Exception as e: left_out.append(f"{s.name}: {type(e).__name__}: {str(e)[:120]}")
  if not ran:
    return RunResult("not run", "not run: the old program fails on every input set on PYTHON: " + "; ".join(left_out))
  sets = [s for s, _ in ran]
  res = run_native(target, new, sets, written) if target in NATIVE else None
  where = native_where(target) if res is not None else "on PYTHON" + (f" (EMULATE={emulate})" if emulate else "")
  if target in NATIVE and res is None: where += f" (natively: {native_skip})"
  if isinstance(res, RunResult): return res
  if res is None:
    res = []
    for s in sets:
      if (big := _too_big("new", nname, nuops, s.var_vals)) is not None: return big
      try: res.append(run_program(nname, nuops, s.bufs, s.var_vals, emulate))
      except Exception as e:
        return RunResult("differ", f"the new program failed to run on PYTHON ({s.name}): {type(e).__name__}: "
                                   f"{str(e)[:300]}")
  how = f"old: its recorded linear program on PYTHON; new: {where}"
  skipped = _left_out(left_out)
  if cut: skipped += f"; {cut} input set(s) not run: interpreting the old program on them too would pass " \
    f"{KERNEL_STEPS:.0e} steps for the kernel"
  return _agreement(ast, ran, res, written, dts, how + skipped)

def _left_out(left_out: Sequence[str]) -> str:
  return f"; {len(left_out)} input set(s) left out, the old program fails on them ({'; '.join(left_out)})" \
    if left_out else ""

def _agreement(ast: UOp | None, ran: Sequence[tuple[InputSet, dict[int, np.ndarray]]],
               res: Sequence[dict[int, np.ndarray]], written: Sequence[int], dts: dict[int, PtrDType],
               how: str) -> RunResult:
  """The old outputs (`ran`: each input set with them) against the new ones (`res`, in the same order)."""
  worst, notes = 0.0, set()
  for (s, o), got in zip(ran, res):
    a = compare_outputs(ast, s, o, got, written, dts)
    if not a.ok:
      vv = f", variables {s.var_vals}" if s.var_vals else ""
      return RunResult("differ", f"{a.detail} ({s.name}{vv}); {how}")
    worst = max(worst, a.max_ulp)
    if a.detail: notes.add(a.detail)
  within = "exactly" if worst == 0 else f"within {worst:.3g} ulp"
  return RunResult("agree", f"outputs agree {within} on {len(ran)} input set(s){''.join(sorted(notes))}; {how}"
                            f": the change is not shown by running, and not proved safe either", worst)

def run_rebuilt(ast: UOp | None, old: Program, new: Program, target: str, why: str) -> RunResult:
  """Both programs natively (`target` CPU or CPU_LLVM), on the same inputs: `old` is the record's kernel as the code
  checked out now builds it with the captured opts (a program this code generated, never the record's source; the
  caller found it equal to the recorded one), run where the recorded program cannot be interpreted (`why`). Each input
  set runs the old program in a child of its own: a set it fails on (an int used as an index) is left out, as the
  interpreter leaves it out."""
  ouops, nuops = old[2], new[2]
  if (shown := _buffers_differ(ouops, nuops)) is not None: return shown
  # NOTE: the buffers' sizes come from the record's AST: checked here too, before any input is made
  if (n := elements(ouops)) > MAX_ELEMENTS:
    return RunResult("not run", f"not run: its buffers hold {n:.2e} elements in all (over {MAX_ELEMENTS:.0e})")
  written, dts = _written(ouops, nuops), _globals(ouops)
  where = native_where(target)
  ran: list[tuple[InputSet, dict[int, np.ndarray]]] = []
  left_out: list[str] = []
  for s in input_sets(ouops):
    got = run_native(target, old, [s], written, "old")
    if got is None: return RunResult("not run", f"not run: {why}, and the old program rebuilt does not run {where}: "
                                                f"{native_skip}")
    if isinstance(got, RunResult): left_out.append(got.detail[:160])
    else: ran.append((s, got[0]))
  if not ran: return RunResult("not run", f"not run: {why}, and the old program rebuilt fails {where} on every input "
                                          "set: " + "; ".join(left_out))
  res = run_native(target, new, [s for s, _ in ran], written)
  if res is None:
    return RunResult("not run", f"not run: {why}, and the new program does not run {where}: {native_skip}")
  if isinstance(res, RunResult): return res
  how = f"old: rebuilt from the record's AST and captured opts by the code checked out now ({why}), {where}; new: " \
        f"{where}{_left_out(left_out)}"
  return _agreement(ast, ran, res, written, dts, how)
