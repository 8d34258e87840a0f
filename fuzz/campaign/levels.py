"""The three levels a campaign fuzzes, each the same small interface (`Level`), so the runner, the reducer and the
reproducers treat them alike:

  generate(data)        a case from the bytes of a corpus entry (fuzz.strategies.BytesChooser)
  state(case)           the case as JSON-able data: what a reproducer file holds (a graph as pyrender text, never code)
  from_state(state)     the case back, parsing graphs with spec.roundtrip.eval_pyrender (no exec, no eval)
  check(cases, backends, note)   per case, the list of Failures (empty: every oracle agreed)
  size(case)            a measure the reducer makes smaller (graph nodes, program steps)

kernel:   a kernel AST (fuzz/gen/kernels.py) checked against kernel_spec, the pyrender round trip, the reference run
          (kernel_ref, with the ULP budget of fuzz/oracles/budget.py), and then on every backend
          (fuzz/campaign/backends.py).
symbolic: an index expression (fuzz.strategies.build_index_expression) that z3 proves simplify() keeps
          (fuzz/oracles/symbolic.py).
tensor:   a program through the public Tensor API (fuzz/gen/tensor_programs.py) against numpy, values and dtypes, on
          every backend that has a device computing values (nv and amd: the PYTHON device emulating their target); nv,
          amd and backends without a device check the program's scheduled kernels.
"""
from __future__ import annotations
import dataclasses, json
from dataclasses import dataclass, field
from typing import Any, Sequence
import numpy as np
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp
from fuzz.campaign.backends import Backend, CBackend, Failure, KernelItem, Note, failure_from, exception_site
from fuzz.campaign.backends import open_cpu_devices
from fuzz.strategies import BytesChooser, KernelCase, KernelConfig, build_kernel, IndexExprConfig

def _no_note(i: int, backend: str, stage: str) -> None: pass

class Level:
  name = ""
  def generate(self, data: bytes) -> Any: return self.from_chooser(BytesChooser(data))
  def from_chooser(self, ch: BytesChooser) -> Any: raise NotImplementedError
  def state(self, case: Any) -> dict[str, Any]: raise NotImplementedError
  def from_state(self, state: dict[str, Any]) -> Any: raise NotImplementedError
  def check(self, cases: Sequence[Any], backends: dict[str, Backend], note: Note = _no_note) -> list[list[Failure]]:
    raise NotImplementedError
  def size(self, case: Any) -> int: raise NotImplementedError
  def valid(self, case: Any) -> bool:
    """Whether a reducer's candidate is a legal case of this level (checked before it is sent to a worker)."""
    return True
  def text(self, case: Any) -> str:
    """Human-readable form of the case (for reports)."""
    return json.dumps(self.state(case), indent=1)

def parse_graph(text: str) -> UOp:
  from spec.roundtrip import eval_pyrender
  g = eval_pyrender(text)
  if not isinstance(g, UOp): raise ValueError("reproducer: the graph text must build one UOp (`ast = ...`)")
  return g

# ---- kernel ----

class KernelLevel(Level):
  name = "kernel"
  def __init__(self, cfg: KernelConfig | None = None, validate_bounds: bool = False):
    self.cfg, self.validate_bounds = cfg or KernelConfig(), validate_bounds
  def from_chooser(self, ch: BytesChooser) -> KernelCase: return build_kernel(ch, self.cfg)
  def state(self, case: KernelCase) -> dict[str, Any]:
    from tinygrad.uop.pyrender import pyrender
    opts = None if case.opts is None else [o.to_json() for o in case.opts]
    return {"graph": pyrender(case.ast), "var_vals": dict(case.var_vals), "opts": opts, "seed": case.seed}
  def from_state(self, st: dict[str, Any]) -> KernelCase:
    vv = st.get("var_vals", {})
    if not isinstance(vv, dict) or not all(isinstance(k, str) and type(v) is int for k, v in vv.items()):
      raise ValueError("reproducer: var_vals must map names to ints")
    from tinygrad.codegen.opt import Opt
    if (opts := st.get("opts")) is not None and not isinstance(opts, list):
      raise ValueError("reproducer: opts must be null or a list of [OptOps name, axis, arg]")
    try: got = None if opts is None else tuple(Opt.from_json(o) for o in opts)
    except ValueError as e: raise ValueError(f"reproducer: {e}") from None
    from fuzz.oracles.differential import kernel_buffers
    ast = parse_graph(st["graph"])
    kernel_buffers(ast)  # a buffer with no size, or over the size its inputs may take, is refused here
    return KernelCase(ast, dict(vv), got, int(st.get("seed", 0)))
  def size(self, case: KernelCase) -> int: return len(case.ast.toposort())
  def valid(self, case: KernelCase) -> bool:
    """kernel_spec holds for every node, and every RANGE is closed (by an END, a REDUCE or a BUFFERIZE)."""
    from spec import why_illegal, kernel_spec
    topo = case.ast.toposort()
    closed = {r for u in topo if u.op in (Ops.END, Ops.REDUCE, Ops.BUFFERIZE) for r in u.src[1:]}
    if any(u.op is Ops.RANGE and u not in closed for u in topo): return False
    return all(why_illegal(u, kernel_spec) is None for u in topo)
  def text(self, case: KernelCase) -> str: return self.state(case)["graph"]

  def prepare(self, case: KernelCase) -> KernelItem | Failure:
    """The checks before any backend: kernel_spec, the bounds proof (optional), the round trip, the reference."""
    from spec import type_verify, kernel_spec
    from spec.roundtrip import check_roundtrip
    from fuzz.oracles.differential import kernel_inputs
    from fuzz.oracles.budget import run_budget_ref, buffer_dtypes
    try: type_verify(case.ast, kernel_spec, "kernel")
    except Exception as e: return failure_from(e, "spec", "generator")
    if self.validate_bounds:
      from spec.validate_index import validate_index
      try: validate_index(case.ast)
      except Exception as e: return failure_from(e, "index-bounds", "generator")
    try: check_roundtrip(case.ast)
    except Exception as e: return failure_from(e, "roundtrip", "pyrender")
    try:
      inputs = kernel_inputs(case.ast, case.seed)
      ref = run_budget_ref(case.ast, inputs, case.var_vals)
    except Exception as e: return failure_from(e, "reference", "reference")
    return KernelItem(case.ast, dict(case.var_vals), case.opts, inputs, ref, buffer_dtypes(case.ast), case.seed)

  def check(self, cases: Sequence[KernelCase], backends: dict[str, Backend],
            note: Note = _no_note) -> list[list[Failure]]:
    out: list[list[Failure]] = [[] for _ in cases]
    items: dict[int, KernelItem] = {}
    for i, c in enumerate(cases):
      note(i, "reference", "prepare")
      p = self.prepare(c)
      if isinstance(p, Failure): out[i].append(p)
      else: items[i] = p
    order = list(items)
    for b in backends.values():
      res = b.check_kernels([items[i] for i in order], lambda k, bk, stg: note(order[k], bk, stg))
      for i, r in zip(order, res):
        if r is not None: out[i].append(r)
    return out

class SeededKernelLevel(KernelLevel):
  """The kernel level grown from one seed kernel (a real model's, fuzz/seeds.py): a case is the seed mutated by the
  chooser's choices (fuzz/gen/seeded.py mutate_kernel; zeros give the seed itself, fitted to the seeded size)."""
  def __init__(self, seed: KernelCase, validate_bounds: bool = False):
    super().__init__(validate_bounds=validate_bounds)
    self.seed = seed
  def from_chooser(self, ch: BytesChooser) -> KernelCase:
    from fuzz.gen.seeded import mutate_kernel
    return mutate_kernel(ch, self.seed, lambda ast: self.valid(KernelCase(ast, {})))

# a tag naming a seed kernel (DirectedLevels.get): "seed:" + the seed's name (its file's stem)
SEED_TAG = "seed:"

def directed_kernel_level(aim: Any, patterns: Sequence[Any] = (), validate_bounds: bool = False) -> KernelLevel:
  """The kernel level with its generator directed at a rewrite rule (fuzz/campaign/scheduler.py Director): its op and
  dtype weights at `aim` (the Ops and DTypes of the rule's pattern, and whether it repeats an operand), and building an
  expression from one of the rule's `patterns` now and then (fuzz/gen/kernels.py directed_config)."""
  from fuzz.gen.kernels import directed_config
  ops, dts, repeat = aim
  return KernelLevel(directed_config(KernelConfig(), ops, sorted(dts, key=str), repeat, patterns=patterns),
                     validate_bounds)

def directed_level(level: str, aim: Any, patterns: Sequence[Any] = (), validate_bounds: bool = False) -> Level:
  """The level `level` with its generator directed at a rewrite rule (its `aim` and `patterns`,
  fuzz/campaign/scheduler.py); the levels with a generator that builds patterns: kernel and symbolic."""
  if level == "kernel": return directed_kernel_level(aim, patterns, validate_bounds)
  if level == "symbolic": return SymbolicLevel(patterns=patterns)
  raise ValueError(f"the {level} level has no directed generator (kernel and symbolic have)")

class DirectedLevels:
  """The level a tagged input is built with: tag None, `plain`; SEED_TAG + a seed's name, that seed's mutations
  (SeededKernelLevel); a rule's key (fuzz/campaign/scheduler.py rule_key),
  `plain`'s level directed at that rule (`directed_level`), made once per rule. The rule tables are read on first need:
  every module that holds rules is imported and the PatternMatchers alive are walked (`aims`: rule key -> (aim,
  patterns)), so the campaign's parent, its workers and the targets see the same rules."""
  def __init__(self, plain: Level, validate_bounds: bool = False, seeds: dict[str, KernelCase] | None = None):
    """`seeds` (kernel level): seed name -> case; the tag SEED_TAG + name builds mutations of that seed."""
    self.plain, self.validate_bounds, self.seeds = plain, validate_bounds, seeds or {}
    self.levels: dict[str, Level] = {}
    self._aims: dict[str, tuple[Any, tuple[Any, ...]]] | None = None
  @property
  def aims(self) -> dict[str, tuple[Any, tuple[Any, ...]]]:
    if self._aims is None:
      from fuzz.campaign.scheduler import import_rule_tables, rule_ops, rule_patterns, rule_key
      import_rule_tables()
      pats = rule_patterns(rule_key)
      self._aims = {k: (a, pats.get(k, ())) for k, a in rule_ops(rule_key).items()}
    return self._aims
  def ops(self) -> dict[str, Any]:
    """rule key -> aim (the Ops and DTypes of its pattern, whether it repeats an operand): a Director picks from it."""
    return {k: a for k, (a, _) in self.aims.items()}
  def get(self, tag: str | None) -> Level:
    if tag is None: return self.plain
    if (lv := self.levels.get(tag)) is None and tag.startswith(SEED_TAG):
      if (seed := self.seeds.get(tag[len(SEED_TAG):])) is None:
        raise ValueError(f"an input names seed {tag[len(SEED_TAG):]!r}, which this process has not loaded")
      lv = self.levels[tag] = SeededKernelLevel(seed, self.validate_bounds)
    if lv is None:
      if tag not in self.aims: raise ValueError(f"a directed input names rule {tag!r}, which this process has not")
      aim, pats = self.aims[tag]
      lv = self.levels[tag] = directed_level(self.plain.name, aim, pats, self.validate_bounds)
    return lv

# ---- symbolic ----

class SymbolicLevel(Level):
  name = "symbolic"
  def __init__(self, cfg: IndexExprConfig | None = None, patterns: Sequence[Any] = (), p_pattern: float = 0.25):
    """`patterns`: a directed level's (fuzz/gen/patterns.py), built into every config one time in 1/p_pattern."""
    import dataclasses
    from fuzz.strategies import wrapping_config
    from tinygrad.dtype import dtypes
    # NOTE: without a config, one case in two is in a fixed-width int that wraps, signed or unsigned (the first choice
    # picks): rules that must not fold across the wrap get cases where it happens
    wrap = [wrapping_config(dt) for dt in (dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16)]
    self.cfgs = [cfg] if cfg is not None else [IndexExprConfig()] * len(wrap) + wrap
    if patterns: self.cfgs = [dataclasses.replace(c, patterns=tuple(patterns), p_pattern=p_pattern) for c in self.cfgs]
  def from_chooser(self, ch: BytesChooser) -> UOp:
    from fuzz.strategies import build_index_expression
    cfg = self.cfgs[0] if len(self.cfgs) == 1 else self.cfgs[ch.integer(0, len(self.cfgs) - 1)]
    return build_index_expression(ch, cfg)[0]
  def state(self, case: UOp) -> dict[str, Any]:
    from tinygrad.uop.pyrender import pyrender
    return {"graph": pyrender(case)}
  def from_state(self, st: dict[str, Any]) -> UOp: return parse_graph(st["graph"])
  def size(self, case: UOp) -> int: return len(case.toposort())
  def text(self, case: UOp) -> str: return self.state(case)["graph"]
  def check(self, cases: Sequence[UOp], backends: dict[str, Backend], note: Note = _no_note) -> list[list[Failure]]:
    from fuzz.oracles.symbolic import check_expression
    out: list[list[Failure]] = []
    for i, e in enumerate(cases):
      note(i, "z3", "symbolic")
      try: r = check_expression(e)
      except Exception as ex:
        out.append([failure_from(ex, "symbolic", "z3")])
        continue
      # NOTE: "unknown" is z3 giving up on a large nonlinear domain: not a finding
      out.append([] if r.ok or r.kind == "unknown" else
                 [Failure("symbolic", f"{r.kind} failure", "tinygrad/uop/symbolic.py:simplify", "z3", str(r))])
    return out

# ---- tensor ----

@dataclass
class TensorCase:
  """A tensor program drawn from `data`, with edits the reducer made: steps replaced by inputs of the same shape and
  dtype, and the outputs kept."""
  data: bytes
  max_steps: int = 6
  replaced: tuple[int, ...] = ()
  outputs: tuple[int, ...] | None = None
  program: Any = field(default=None, compare=False, repr=False)

class TensorLevel(Level):
  name = "tensor"
  def __init__(self, max_steps: int = 6): self.max_steps, self.last_used = max_steps, 0
  def from_chooser(self, ch: BytesChooser) -> TensorCase:
    case = self.build(TensorCase(ch.data, self.max_steps))
    # NOTE: only the bytes the generator read matter; the rest would only make the reproducer longer
    ch.pos = self.last_used
    case.data = ch.data[:ch.used]
    return case
  def build(self, case: TensorCase) -> TensorCase:
    """The program of `case` (generator + edits): replaced steps become inputs; steps no output needs do too."""
    from fuzz.gen.tensor_programs import build_tensor_program
    ch = BytesChooser(case.data)
    prog = build_tensor_program(ch, case.max_steps)
    self.last_used = ch.used
    if case.outputs is not None: prog.outputs = [o for o in prog.outputs if o in case.outputs] or prog.outputs[:1]
    rs = np.random.default_rng(len(case.data))
    for i in sorted(set(case.replaced) | unused_steps(prog)):
      d, v = prog.defs[i], prog.vals[i]
      if not isinstance(d, tuple): continue
      prog.defs[i] = input_like(v, rs)
    case.program = prog
    return case
  def state(self, case: TensorCase) -> dict[str, Any]:
    return {"data": case.data.hex(), "max_steps": case.max_steps, "replaced": list(case.replaced),
            "outputs": None if case.outputs is None else list(case.outputs),
            "program": case.program.source() if case.program is not None else ""}
  def from_state(self, st: dict[str, Any]) -> TensorCase:
    # NOTE: the program is rebuilt by our generator from the bytes; the source text in the file is never run
    outs = st.get("outputs")
    case = TensorCase(bytes.fromhex(st["data"]), int(st.get("max_steps", self.max_steps)),
                      tuple(int(x) for x in st.get("replaced", ())),
                      None if outs is None else tuple(int(x) for x in outs))
    return self.build(case)
  def size(self, case: TensorCase) -> int:
    return sum(isinstance(d, tuple) for d in case.program.defs) * 8 + len(case.program.outputs)
  def text(self, case: TensorCase) -> str: return str(case.program.source())

  def check(self, cases: Sequence[TensorCase], backends: dict[str, Backend],
            note: Note = _no_note) -> list[list[Failure]]:
    from fuzz.gen.tensor_programs import check_program, ProgramMismatch
    out: list[list[Failure]] = [[] for _ in cases]
    kernel_backends = {n: b for n, b in backends.items() if b.checks_scheduled()}
    for i, c in enumerate(cases):
      for name, b in backends.items():
        if (dev := b.tensor_device()) is None: continue
        note(i, name, "tensor")
        prog, devs = c.program, None
        if prog.shard is not None and (devs := b.tensor_shard_devices()) is None:
          prog = dataclasses.replace(prog, shard=None)
        try:
          with b.tensor_context(len(c.data)): check_program(prog, [dev], {dev: devs} if devs else None)
        except ProgramMismatch as e:
          cause = e.__cause__
          if cause is not None: out[i].append(failure_from(cause, "tensor-run", name))
          else: out[i].append(Failure("tensor-compare", mismatch_class(str(e)), "", name, str(e)[:20000]))
        except Exception as e: out[i].append(failure_from(e, "tensor-run", name))
      # NOTE: the scheduled kernels' checkers (spec, round trip, reference) run even with no kernel backend, so that a
      # finding of theirs reproduces and reduces on no backend, as at the kernel level
      out[i].extend(self.check_scheduled(c, kernel_backends, lambda k, b, s: note(i, b, s)))
    return out

  def check_scheduled(self, case: TensorCase, backends: dict[str, Backend], note: Note) -> list[Failure]:
    """The program's kernels (scheduled for the CPU), each checked on the backends as at the kernel level."""
    from fuzz.gen.tensor_programs import run_tensor_lazy
    from tinygrad.engine.realize import is_transfer
    note(0, "schedule", "schedule")
    try:
      devs = open_cpu_devices(CBackend.SHARD_DEVICES, llvm=0)
      outs = run_tensor_lazy(case.program, devs[0], devs)
      # NOTE: a transfer kernel (a sharded program's COPY between devices) has no codegen to check
      asts = [it.ast for it in outs[0].schedule(*outs[1:]) if not is_transfer(it.ast)] if outs else []
    except Exception as e: return [failure_from(e, "tensor-schedule", "schedule")]
    kl = KernelLevel()
    fails = [f for fs in kl.check([KernelCase(a, {}, None, k) for k, a in enumerate(asts)], backends, note) for f in fs]
    return [Failure(f"tensor-{f.stage}", f.kind, f.site, f.backend, f.message) for f in fails]

def unused_steps(prog: Any) -> set[int]:
  """Steps no output depends on (they become inputs: a smaller program that computes the same outputs)."""
  import re
  need: set[int] = set()
  todo = list(prog.outputs)
  while todo:
    i = todo.pop()
    if i in need: continue
    need.add(i)
    if isinstance(d := prog.defs[i], tuple): todo.extend(int(m) for m in re.findall(r"\bv(\d+)\b", d[0]))
  return {i for i in range(len(prog.defs)) if i not in need}

def input_like(v: Any, rs: np.random.Generator) -> np.ndarray:
  """A small input of v's shape and dtype (exact values)."""
  from tinygrad.dtype import dtypes
  n = int(np.prod(v.shape)) if v.shape else 1
  if v.dtype is dtypes.bool: a: np.ndarray = rs.integers(0, 2, n).astype(np.bool_)
  elif v.dtype is dtypes.int32: a = rs.integers(-9, 10, n).astype(np.int32)
  else: a = rs.integers(-4, 5, n).astype(np.float32 if v.dtype is dtypes.float32 else np.float16)
  return a.reshape(v.shape)

def mismatch_class(msg: str) -> str:
  for k in ("dtype", "shape", "device", "NaN", "Inf"):
    if k in msg.split("\n")[0]: return f"{k} mismatch"
  return "value mismatch"

LEVELS: dict[str, type[Level]] = {"kernel": KernelLevel, "symbolic": SymbolicLevel, "tensor": TensorLevel}

__all__ = ["Level", "KernelLevel", "SeededKernelLevel", "SEED_TAG", "SymbolicLevel", "TensorLevel", "TensorCase",
           "LEVELS", "parse_graph", "exception_site"]
