"""The rule ledger: a z3 certificate (Alive-style) for every rewrite rule of the symbolic matchers, and for the codegen
rewrites z3 can reach (fuzz/ledger/codegen.py), kept in fuzz/ledger/ledger.json and checked by the suite.

A rule's verification condition comes from the rule itself. `InstanceBuilder` walks the rule's pattern and builds
instances of it: a capture becomes a small expression (a bounded variable, a constant, a sum, a div/mod, a masked
index, ...) of the dtype being swept, a pattern constant becomes a constant drawn from edge values (0, +-1, powers of
two +-1, the dtype's limits), a variable's bounds come from edge intervals (empty-width, straddling zero, at the wrap).
The rule's own function decides whether it fires on an instance; where it fires, z3 proves (spec/smt.py's meanings:
dtypes.index an unbounded Int, fixed-width ints wrapping bit-vectors, floats IEEE) that the rewritten node

  - has the same dtype,
  - is valid exactly where the original is (Invalid is poison; a masked index must stay masked),
  - equals the original wherever the original is valid, for every value of every variable within its bounds,
  - and that both nodes lie within their vmin/vmax (a rule that builds a node with wrong bounds misleads later rules).

Constants and bounds are enumerated (the rule functions branch on them in Python), variable values are not: each
instance is a proof over all of them. A rule is `proved` when every instance it fired on is, `counterexample` when one
is not (with the instance and a concrete input), `not expressible` when no instance could be proved or built (and
why). Instances that z3 cannot state exactly (approximate float ops, fp8e4m3 bits) are counted as excluded, with the
reason; a rule is proved on what remains.

Each entry is keyed by a hash of the rule's pattern, its function's source and the source of every tinygrad function it
calls by name (transitively), so an edited rule, or an edited helper of one, must be proved again:
`python -m fuzz ledger --update`. tests/fuzz/test_ledger.py fails on a missing or stale entry and on a counterexample.
"""
from __future__ import annotations
import inspect, json, pathlib, random, time
from dataclasses import dataclass
from typing import Any, Callable
from tinygrad.uop.ops import UOp, UPat, PatternMatcher
from tinygrad.uop.symbolic import symbolic_simple, symbolic
from tinygrad.codegen.decompositions import pm_decompose, pm_emulated_dtypes, pm_fast_divmod, pm_transcendental
from tinygrad.codegen.decompositions import DIVMOD_WIDE
from tinygrad.dtype import DType, dtypes
from tinygrad.renderer import Renderer
from tinygrad.helpers import atomic_write, Context
from fuzz.gen.choosers import RandomChooser
from fuzz.oracles.symbolic import fmt_index
from fuzz.ledger.proof import GENERATOR_VERSION, SWEEP, EMULATED_SWEEP, InstanceBuilder, NoInstance, Inexpressible
from fuzz.ledger.proof import rule_hash, prove_batch
from fuzz.ledger.codegen import CODEGEN_CERTIFICATES, certify_codegen
from spec.verify import SpecError

LEDGER_PATH = pathlib.Path(__file__).resolve().parent / "ledger.json"

# ---- the rules ----

@dataclass(frozen=True)
class RuleTable:
  """A matcher whose rules the ledger certifies: rules from `first` on (earlier ones belong to a table above it), the
  ctx its functions get, and the dtypes its instances are swept over."""
  matcher: PatternMatcher
  first: int = 0
  ctx: Any = None
  sweep: tuple[DType, ...] = ()
  # instances per swept dtype (Budget.fired): fewer where each proof is large (threefry's 20 rounds)
  fired: int = 40

@dataclass(frozen=True)
class RuleRef:
  """One rule of a matcher table: `table[index]` is (pat, fn)."""
  table: str
  index: int
  pat: UPat
  fn: Callable[..., Any]
  @property
  def name(self) -> str: return f"{self.table}[{self.index}] {getattr(self.fn, '__name__', '?')}"
  @property
  def key(self) -> str: return rule_hash(self.pat, self.fn)
  @property
  def spec(self) -> RuleTable: return RULE_TABLES[self.table]

def ledger_rules() -> list[RuleRef]:
  """Every rule of RULE_TABLES once, in table order."""
  return [RuleRef(name, i, *t.matcher.patterns[i]) for name, t in RULE_TABLES.items()
          for i in range(t.first, len(t.matcher.patterns))]

# table name -> what it certifies; `symbolic` starts with symbolic_simple's rules, so its own begin after them
RULE_TABLES: dict[str, RuleTable] = {
  "symbolic_simple": RuleTable(symbolic_simple, sweep=SWEEP),
  "symbolic": RuleTable(symbolic, len(symbolic_simple), sweep=SWEEP),
  # codegen's decompositions, for the bare Renderer (it supports no op) / level 2: decompose everything the rule can
  "decompose": RuleTable(pm_decompose, ctx=Renderer(), sweep=(dtypes.uint64, dtypes.int8, dtypes.uint32, dtypes.int32,
                                                            dtypes.float16, dtypes.float32, dtypes.bfloat16), fired=12),
  "emulated_dtypes": RuleTable(pm_emulated_dtypes, sweep=EMULATED_SWEEP),
  "fast_divmod": RuleTable(pm_fast_divmod, ctx=tuple(DIVMOD_WIDE), sweep=tuple(DIVMOD_WIDE)),
  "transcendental": RuleTable(pm_transcendental, ctx=(Renderer(), 2), sweep=(dtypes.float16, dtypes.float32)),
}

# ---- certifying one rule ----

@dataclass
class Budget:
  """How hard to look: per swept dtype, stop after `fired` instances the rule rewrote or `draws` draws. `dtypes`:
  the dtypes to sweep (None: the rule's table's)."""
  draws: int = 300
  fired: int = 40
  dtypes: tuple[DType, ...] | None = None

def rule_fires(pat: UPat, fn: Callable[..., Any], u: UOp, ctx: Any = None) -> UOp | None:
  """What the rule rewrites u to, as PatternMatcher would (first match whose function returns a new node)."""
  has_ctx = "ctx" in inspect.signature(fn).parameters
  for m in pat.match(u, {}):
    ret = fn(ctx=ctx, **m) if has_ctx else fn(**m)
    if ret is not None and ret is not u: return ret
  return None

def draw_instances(pat: UPat, fn: Callable[..., Any], dt: DType, seed: int, budget: Budget,
                   errors: dict[str, int], ctx: Any = None) -> list[tuple[UOp, UOp | Exception]]:
  """Instances of the rule on `dt` where it fires, with what it rewrote each to (or the exception it raised)."""
  rng, seen = random.Random(seed), set()
  out: list[tuple[UOp, UOp | Exception]] = []
  # NOTE: instances and what the rule builds are checked by the full spec as they are made (SPEC=2): an instance the
  # spec rejects is not IR and is drawn again; a rule that builds an illegal node is refuted (an exception)
  with Context(SPEC=2):
    for _ in range(budget.draws):
      if len(out) >= budget.fired: break
      b = InstanceBuilder(RandomChooser(rng.getrandbits(64)), dt)
      try: u = b.pattern(pat, None)
      except (NoInstance, SpecError): continue
      except Inexpressible as e:
        errors[str(e)] = errors.get(str(e), 0) + 1
        return out
      if u in seen: continue
      seen.add(u)
      try: r = rule_fires(pat, fn, u, ctx)
      except Exception as e:
        out.append((u, e))
        continue
      if r is not None: out.append((u, r))
  return out

def describe_instance(u: UOp) -> str:
  return f"{u.dtype}: {fmt_index(u)}"

def certify(pat: UPat, fn: Callable[..., Any], budget: Budget | None = None, seed: int = 0,
            ctx: Any = None) -> dict[str, Any]:
  """The ledger entry's verdict part for one rule: proved / counterexample / not expressible, with what was tried."""
  budget = budget or Budget()
  sweep = budget.dtypes or SWEEP
  st = time.perf_counter()
  errors: dict[str, int] = {}
  fired: dict[str, int] = {}
  excluded: dict[str, int] = {}
  counts = {"fired": 0, "proved": 0, "excluded": 0, "unknown": 0}
  cex: dict[str, Any] | None = None
  for di, dt in enumerate(sweep):
    inst = draw_instances(pat, fn, dt, seed * 1_000_003 + di, budget, errors, ctx)
    if not inst: continue
    fired[str(dt)] = len(inst)
    counts["fired"] += len(inst)
    crashed = [(u, e) for u, e in inst if isinstance(e, Exception)]
    if crashed and cex is None:
      u, e = crashed[0]
      cex = {"kind": "exception", "instance": describe_instance(u), "detail": f"{type(e).__name__}: {e}"}
    pairs = [(u, r) for u, r in inst if isinstance(r, UOp)]
    for (u, r), v in zip(pairs, prove_batch(pairs)):
      if v.kind == "": counts["proved"] += 1
      elif v.kind == "excluded":
        counts["excluded"] += 1
        excluded[v.detail] = excluded.get(v.detail, 0) + 1
      elif v.kind == "unknown": counts["unknown"] += 1
      elif cex is None:
        cex = {"kind": v.kind, "instance": describe_instance(u), "rewritten": describe_instance(r),
               "inputs": v.inputs, "replay": v.detail}
  entry: dict[str, Any] = {"instances": counts, "fired_per_dtype": fired, "seconds": round(time.perf_counter() - st, 2)}
  if excluded: entry["excluded"] = excluded
  if cex is not None: entry.update(verdict="counterexample", counterexample=cex)
  elif counts["proved"]: entry["verdict"] = "proved"
  else:
    entry["verdict"] = "not expressible"
    if errors: entry["reason"] = "; ".join(sorted(errors))
    elif excluded: entry["reason"] = "every instance it fires on is outside z3's exact meanings: " + \
      "; ".join(sorted(excluded))
    elif counts["unknown"]: entry["reason"] = "z3 gave up on every instance (nonlinear) and none could be enumerated"
    else: entry["reason"] = "it fired on no instance the pattern builder drew (the pattern needs a shape the " \
      f"builder does not make, within {budget.draws} draws per dtype)"
  return entry

def certify_rule(rule: RuleRef, budget: Budget | None = None) -> dict[str, Any]:
  """The full ledger entry of one rule."""
  seed = int(rule.key[:8], 16)
  b = budget or Budget()
  if b.dtypes is None: b = Budget(b.draws, min(b.fired, rule.spec.fired), rule.spec.sweep)
  return {"key": rule.key, "rule": rule.name, "table": rule.table, "index": rule.index,
          "function": getattr(rule.fn, "__name__", "?"), "module": getattr(rule.fn, "__module__", "?"),
          **certify(rule.pat, rule.fn, b, seed, rule.spec.ctx)}

# ---- the ledger file ----

def load_ledger(path: pathlib.Path = LEDGER_PATH) -> dict[str, Any]:
  if not path.exists(): return {"generator": GENERATOR_VERSION, "rules": [], "codegen": []}
  return json.loads(path.read_text())

def write_ledger(ledger: dict[str, Any], path: pathlib.Path = LEDGER_PATH) -> None:
  atomic_write(str(path), json.dumps(ledger, indent=1, sort_keys=True) + "\n")

def _certify_by_ref(table: str, index: int) -> dict[str, Any]:
  return certify_rule(RuleRef(table, index, *RULE_TABLES[table].matcher.patterns[index]))

def _codegen_entry(name: str) -> dict[str, Any]:
  return certify_codegen(CODEGEN_CERTIFICATES[name])

def update_ledger(jobs: int = 1, force: bool = False, only: str | None = None,
                  progress: Callable[[str], None] | None = None, path: pathlib.Path = LEDGER_PATH) -> dict[str, Any]:
  """Prove every rule whose key is not in the ledger (every rule with `force`), drop entries of rules that are gone,
  and write the ledger. `only`: a substring of the rule names to limit the work to."""
  old = load_ledger(path)
  have = {e["key"]: e for e in old.get("rules", []) + old.get("codegen", [])}
  rules = ledger_rules()
  todo: list[tuple[Callable[..., dict[str, Any]], tuple[Any, ...], str]] = []
  for r in rules:
    if (force or r.key not in have) and (only is None or only in r.name):
      todo.append((_certify_by_ref, (r.table, r.index), r.name))
  for name, c in CODEGEN_CERTIFICATES.items():
    if (force or c.key not in have) and (only is None or only in name): todo.append((_codegen_entry, (name,), name))
  done = _run_all(todo, jobs, progress)
  # NOTE: an entry kept by its key takes the rule's current name: a rule inserted before it shifts the index
  new_rules = [done.get(r.name) or ({**have[r.key], "rule": r.name, "index": r.index} if r.key in have else None)
               for r in rules]
  new_cg = [done.get(n) or have.get(c.key) for n, c in CODEGEN_CERTIFICATES.items()]
  ledger = {"generator": GENERATOR_VERSION, "rules": [e for e in new_rules if e], "codegen": [e for e in new_cg if e]}
  write_ledger(ledger, path)
  return ledger

# rules that take minutes (float multiplies bit-blasted, nonlinear index bounds): scheduled first by --jobs
SLOW_FIRST = {"symbolic_simple[4] <lambda>", "symbolic_simple[12] <lambda>", "codegen lower_index_dtype",
              "emulated_dtypes[0] promote_emulated", "symbolic[33] fold_div_div", "symbolic[28] fold_self_div"}

def _run_all(todo: list[tuple[Callable[..., dict[str, Any]], tuple[Any, ...], str]], jobs: int,
             progress: Callable[[str], None] | None) -> dict[str, dict[str, Any]]:
  done: dict[str, dict[str, Any]] = {}
  def report(name: str, e: dict[str, Any]) -> None:
    done[name] = e
    if progress: progress(f"{len(done)}/{len(todo)} {name}: {e['verdict']} ({e.get('seconds', 0)}s)")
  if jobs <= 1:
    for fn, args, name in todo: report(name, fn(*args))
    return done
  # NOTE: the slowest first, so the pool does not end on one long rule
  todo = sorted(todo, key=lambda t: t[2] not in SLOW_FIRST)
  import concurrent.futures, multiprocessing
  # NOTE: spawn, not fork: z3's context is not safe to share with a forked child
  with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as ex:
    futs = {ex.submit(fn, *args): name for fn, args, name in todo}
    for f in concurrent.futures.as_completed(futs):
      # NOTE: a crash certifying one rule is reported and leaves it without an entry (the check then names it)
      try: report(futs[f], f.result())
      except Exception as e:
        if progress: progress(f"{futs[f]}: the certificate crashed: {type(e).__name__}: {e}")
  return done

# ---- the check the suite runs ----

def check_ledger(path: pathlib.Path = LEDGER_PATH) -> list[str]:
  """Problems with the committed ledger: rules without a current entry, counterexamples, entries for no rule."""
  led = load_ledger(path)
  fix = "run `python -m fuzz ledger --update` and commit fuzz/ledger/ledger.json"
  if led.get("generator") != GENERATOR_VERSION:
    return [f"the ledger was made by generator v{led.get('generator')}, this is v{GENERATOR_VERSION}: {fix} "
            "(with --force)"]
  entries = {e["key"]: e for e in led.get("rules", []) + led.get("codegen", [])}
  problems: list[str] = []
  wanted = [(r.name, r.key) for r in ledger_rules()] + [(n, c.key) for n, c in CODEGEN_CERTIFICATES.items()]
  for name, key in wanted:
    if key not in entries: problems.append(f"{name}: no ledger entry for its current source (key {key}): new or "
                                           f"edited, so not proved; {fix}")
    elif entries[key]["verdict"] == "counterexample":
      problems.append(f"{name}: z3 refutes it: {json.dumps(entries[key]['counterexample'])}")
  live = {k for _, k in wanted}
  problems += [f"{e['rule']}: a ledger entry for a rule that no longer exists; {fix}" for k, e in entries.items()
               if k not in live]
  return problems

def summarize(path: pathlib.Path = LEDGER_PATH) -> str:
  led = load_ledger(path)
  lines = []
  for part in ("rules", "codegen"):
    es = led.get(part, [])
    by: dict[str, int] = {}
    for e in es: by[e["verdict"]] = by.get(e["verdict"], 0) + 1
    lines.append(f"{part}: {len(es)} entries: " + ", ".join(f"{n} {v}" for v, n in sorted(by.items())))
    for e in es:
      if e["verdict"] == "proved": continue
      lines.append(f"  {e['rule']}: {e['verdict']}: {e.get('reason') or e.get('counterexample')}")
  return "\n".join(lines)

__all__ = ["LEDGER_PATH", "RuleTable", "RuleRef", "RULE_TABLES", "ledger_rules", "Budget", "certify", "certify_rule",
           "load_ledger", "update_ledger", "check_ledger", "summarize", "rule_fires"]
