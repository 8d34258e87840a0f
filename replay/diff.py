"""Diff: recompile every captured input with the code checked out now and classify what came out.

Kernels:   unchanged | renamed | same semantics | changed | failed | incompatible | bad record
           a changed kernel's outputs (both programs run on the same inputs): differ | agree | not run
Schedules: unchanged | changed | failed | incompatible | bad record

Modes (each kernel is one record; the default shows both views of it):
  both      (default) the captured opts replayed, classified as above (a lowering or rendering change), and the
            heuristics re-run: when they now give the kernel other opts, both sets side by side and the outputs of the
            program with the new opts against the old (an opts change). Opts a caller gave (a test's) and BEAM's are
            not re-chosen
  captured  (--captured-opts) only the captured opts replayed
  fresh     (--fresh-opts) only the opts chosen again (heuristics, or BEAM when the record's flags say so), classified
            as above
"incompatible": the record names an Op, dtype, arg class, opt, flag or renderer this version does not have; it is not
a failure of the new code. "bad record": a record that is not what capture writes (truncated, tampered with, or text
outside pyrender's grammar); its error names the record, and nothing in it is run. Every record is visited (an
optional limit is reported as such). The records of one kernel (one AST: other renderers, flags or opts) are grouped
in the summary, which leads with how many distinct kernels' outputs differ.
"""
from __future__ import annotations
import hashlib, re, sys, time, traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, TextIO
from tinygrad.uop.ops import UOp
from tinygrad.helpers import Context, ContextVar, FlagError, schedule_flags
from tinygrad.codegen.record import KernelRecord
from replay.db import DB, KINDS, RecordError, parse_record, default_path
from tinygrad.runtime import targets as registry
from replay import compare, capture

KERNEL_CLASSES = ("unchanged", "renamed", "same semantics", "changed", "failed", "incompatible", "bad record")
SCHEDULE_CLASSES = ("unchanged", "changed", "failed", "incompatible", "bad record")
OK_CLASSES = ("unchanged", "renamed")
OUTPUTS = ("differ", "agree", "not run")
# the heuristics re-run (mode both): what each kernel's opts are now
OPTS_CLASSES = {"same": "same opts", "changed": "other opts now", "given": "given by the caller (not re-chosen)",
                "beam": "BEAM (not re-searched)", "failed": "failed"}
MODES = {"both": "captured opts replayed (codegen changes) and the heuristics re-run (opts changes)",
         "captured": "captured opts (each kernel with the opts it had)",
         "fresh": "fresh opts (the opts are chosen again)"}
PROGRESS_EVERY_S = 5.0

@dataclass
class Outcome:
  rid: int
  kind: str            # "kernel" or "schedule"
  name: str
  cls: str
  detail: str
  target: str = ""
  old: str = ""        # the text the report diffs side by side (source, or kernel ASTs)
  new: str = ""
  seconds: float = 0.0
  outputs: str = ""    # a changed kernel's run: OUTPUTS
  group: str = ""      # the kernel it is a record of: a hash of its AST text (records of one kernel share it)
  opts: str = ""       # mode both: the heuristics re-run, a key of OPTS_CLASSES ("" when not done)
  opts_old: str = ""   # the captured applied opts and the ones the heuristics give now, when they differ
  opts_new: str = ""
  opts_outputs: str = ""  # the program with the new opts against the old one: OUTPUTS
  opts_detail: str = ""
  opts_src: str = ""   # the source with the new opts
  viz: str = ""        # the command that opens its VIZ traces (old and new side by side), set by replay.viz

  def differs(self) -> bool: return self.outputs == "differ" or self.opts_outputs == "differ"

def _label(o: Outcome) -> str:
  """The line of the summary an outcome that is not ok goes under."""
  if o.kind == "schedule": return f"schedule {o.cls}"
  return f"changed, outputs {o.outputs or 'not run'}" if o.cls == "changed" else o.cls

@dataclass
class Report:
  db: str
  run_id: str
  git_commit: str
  mode: str
  target: str | None
  total: int
  limit: int | None
  outcomes: list[Outcome] = field(default_factory=list)
  capture_errors: list[tuple[str, str]] = field(default_factory=list)
  capture_skips: dict[str, int] = field(default_factory=dict)
  seconds: float = 0.0
  not_compiling: int = 0  # records whose captured program did not compile for its target (compile-only, at capture)
  mode_key: str = "both"

  def counts(self, kind: str) -> dict[str, int]:
    classes = KERNEL_CLASSES if kind == "kernel" else SCHEDULE_CLASSES
    ret = {c: 0 for c in classes}
    for o in self.outcomes:
      if o.kind == kind: ret[o.cls] += 1
    return ret
  def output_counts(self) -> dict[str, int]:
    """The changed kernels' records by what their runs showed."""
    ret = {c: 0 for c in OUTPUTS}
    for o in self.outcomes:
      if o.kind == "kernel" and o.cls == "changed": ret[o.outputs or "not run"] += 1
    return ret
  def opts_counts(self) -> dict[str, int]:
    ret = {c: 0 for c in OPTS_CLASSES}
    for o in self.outcomes:
      if o.opts: ret[o.opts] += 1
    return ret
  def groups(self, outcomes: list[Outcome]) -> dict[str, list[Outcome]]:
    """The outcomes by kernel (records of one AST), in the order their kernels first appear."""
    ret: dict[str, list[Outcome]] = {}
    for o in outcomes: ret.setdefault(o.group or f"record {o.rid}", []).append(o)
    return ret
  def differing(self) -> tuple[int, int]:
    """(distinct kernels, records) whose outputs differ, in either view."""
    recs = [o for o in self.outcomes if o.kind == "kernel" and o.differs()]
    return len(self.groups(recs)), len(recs)
  def all_ok(self) -> bool:
    return all(o.cls in OK_CLASSES and o.opts not in ("changed", "failed") for o in self.outcomes) and \
      not self.capture_errors

  def headline(self) -> str:
    """What a reader needs first: how many distinct kernels compute something else now."""
    k, n = self.differing()
    failed = self.groups([o for o in self.outcomes if o.cls == "failed" or o.opts == "failed"])
    out = self.output_counts()
    agree = len(self.groups([o for o in self.outcomes if o.cls == "changed" and o.outputs == "agree"]))
    opts = len(self.groups([o for o in self.outcomes if o.opts == "changed"]))
    return (f"replay diff: {k} distinct kernel(s) whose outputs differ ({n} records); {agree} changed kernel(s) whose "
            f"outputs agree ({out['agree']} records); {len(failed)} failed" +
            (f"; {opts} kernel(s) get other opts from the heuristics now" if self.mode_key == "both" else ""))

  def summary(self) -> str:
    lim = f"; LIMITED to the first {self.limit} of {self.total} records" if self.limit is not None and \
      self.limit < self.total else ""
    lines = [self.headline(), f"run {self.run_id} (captured at commit {self.git_commit[:12]}) in {self.db}",
             f"mode: {self.mode}" + (f"; target {self.target}" if self.target else "") + lim]
    for kind in ("kernel", "schedule"):
      c = self.counts(kind)
      n = sum(c.values())
      distinct = f", {len(self.groups([o for o in self.outcomes if o.kind == 'kernel']))} distinct kernels" \
        if kind == "kernel" else ""
      lines.append(f"{kind}s ({n}{distinct}): " + ", ".join(f"{k} {v}" for k, v in c.items()))
      if kind == "kernel":
        lines.append("  of the changed: " + ", ".join(f"outputs {k} {v}" for k, v in self.output_counts().items()))
        if self.mode_key == "both":
          lines.append("opts, the heuristics re-run: " + ", ".join(f"{OPTS_CLASSES[k]} {v}"
                                                                  for k, v in self.opts_counts().items()))
    kt = [o.seconds for o in self.outcomes if o.kind == "kernel"]
    if kt: lines.append(f"time: {self.seconds:.1f} s in all, {1000 * sum(kt) / len(kt):.1f} ms per kernel")
    if self.not_compiling:
      lines.append(f"{self.not_compiling} captured program(s) did not compile for their target at capture (the "
                   "compile error is in each record)")
    if self.capture_errors:
      lines.append(f"capture errors: {len(self.capture_errors)} (the capture could not record these)")
    if self.capture_skips:
      top = sorted(self.capture_skips.items(), key=lambda kv: (-kv[1], kv[0]))
      skipped = ", ".join(f"{k} x{v}" for k, v in top[:12]) + (f", and {len(top) - 12} more (the HTML report lists "
                                                                 "them all)" if len(top) > 12 else "")
      lines.append(f"not captured: {sum(self.capture_skips.values())} programs and schedules replay cannot make again "
                   f"as they were (test doubles, patched renderers, rules or tinygrad code): {skipped}")
    for label, outs in self.sections():
      g = self.groups(outs)
      lines.append(f"{label}: {len(g)} kernel(s), {len(outs)} record(s)" if outs[0].kind == "kernel" else
                   f"{label}: {len(outs)}")
      for recs in g.values(): lines.append("  " + self.group_line(recs, label))
    for what, err in self.capture_errors[:20]: lines.append(f"  capture error  {what}: {err[:300]}")
    return "\n".join(lines)

  def sections(self) -> list[tuple[str, list[Outcome]]]:
    """(label, outcomes) of everything that is not ok, worst first: the kernels whose outputs differ lead."""
    order = ["changed, outputs differ", "failed", "other opts now", "opts failed", "changed, outputs not run",
             "changed, outputs agree", "same semantics", "incompatible", "bad record", "schedule changed",
             "schedule failed", "schedule incompatible", "schedule bad record"]
    by: dict[str, list[Outcome]] = {k: [] for k in order}
    for o in self.outcomes:
      if o.cls not in OK_CLASSES: by[_label(o)].append(o)
      if o.opts == "changed": by["other opts now"].append(o)
      if o.opts == "failed": by["opts failed"].append(o)
    return [(k, v) for k, v in by.items() if v]

  @staticmethod
  def group_line(recs: list[Outcome], label: str) -> str:
    o = recs[0]
    ids = ", ".join(str(r.rid) for r in recs[:8]) + (f" and {len(recs) - 8} more" if len(recs) > 8 else "")
    where = f"{o.kind} {o.name} [record{'s' if len(recs) > 1 else ''} {ids}" + \
      (f"; {', '.join(sorted({r.target for r in recs if r.target}))}]" if o.target else "]")
    if label.startswith("other opts") or label == "opts failed":
      return f"{where}: captured {o.opts_old or '?'}  |  now {o.opts_new or '?'}: {o.opts_detail[:300]}"
    return f"{where}: {o.detail[:300]}"

# ---- reading the text of a record ----

_MEMBER = re.compile(r"^(\w+)\.(\w+)$")
_NAME = re.compile(r"^name '([A-Z]\w*)'$")
_CALL = re.compile(r"^call of [A-Z]\w*$")

def _incompatible(e: Exception) -> bool:
  """A pyrender error that means "this version lacks a name the record uses", not "the record is bad"."""
  from spec.roundtrip import PyrenderSyntaxError
  if not isinstance(e, PyrenderSyntaxError): return False
  msg = str(e)
  if _MEMBER.match(e.construct) and msg.endswith("is not a member"): return True
  if e.construct.startswith("dtypes.") and msg.endswith("is not a dtype"): return True
  # NOTE: a CapWords name is an arg class (a dataclass or enum in args) this version does not have
  if _CALL.match(e.construct) and "is not allowed" in msg: return True
  return bool(_NAME.match(e.construct)) and "is not defined" in msg

class _Skip(Exception):
  def __init__(self, cls: str, detail: str):
    super().__init__(detail)
    self.cls, self.detail = cls, detail

def read_graph(text: str, what: str, want_list: bool = False) -> Any:
  from spec.roundtrip import eval_pyrender, PyrenderSyntaxError
  try: g = eval_pyrender(text)
  except PyrenderSyntaxError as e:
    raise _Skip("incompatible" if _incompatible(e) else "bad record", f"{what}: {e}") from None
  except RecursionError: raise _Skip("bad record", f"{what}: nested too deep") from None
  if want_list != isinstance(g, list): raise _Skip("bad record", f"{what}: is not a {'list' if want_list else 'graph'}")
  return g

def read_flags(flags: Sequence[Any], kind: str = "kernel") -> dict[str, Any]:
  """A record's flags as {name: value}: each one declared now, of the kind the record may carry (codegen=True in a
  kernel record, schedule=True in a schedule record); a scheduler flag's value must be one the flag allows."""
  ret: dict[str, Any] = {}
  for f in flags:
    if isinstance(f, list): f = tuple(f)
    if not (isinstance(f, tuple) and len(f) == 2 and isinstance(f[0], str) and isinstance(f[1], (int, str))):
      raise _Skip("bad record", f"flag entry {f!r} is not [name, int or str]")
    if (cv := ContextVar.declared().get(f[0])) is None: raise _Skip("incompatible", f"flag {f[0]} does not exist now")
    if kind == "kernel" and not cv.codegen: raise _Skip("bad record", f"flag {f[0]} does not change generated code")
    if kind == "schedule" and not cv.schedule:
      raise _Skip("bad record", f"flag {f[0]} does not change how a graph is scheduled")
    if f[0] in ret: raise _Skip("bad record", f"flag {f[0]} is given twice")
    # NOTE: a scheduler flag's value is checked before the scheduler sees it (codegen flags reach the compiler as
    # recorded: a test may set one through Context to a value the environment could not)
    if kind == "schedule":
      try: cv.parse(str(f[1]))
      except FlagError as e: raise _Skip("incompatible", str(e)) from None
    ret[f[0]] = f[1]
  return ret

def read_opts(rec: KernelRecord) -> tuple[Any, ...]:
  from tinygrad.codegen.opt import UnknownOptError
  try: return rec.applied_opts()
  except UnknownOptError as e: raise _Skip("incompatible", str(e)) from None
  except ValueError as e: raise _Skip("bad record", str(e)) from None

# ---- one kernel ----

# NOTE: a renderer is built from its recorded identity once per diff process (the LLVM ones are slow to make)
_renderers: dict[tuple[str, str], Any] = {}

def _emulate(target: str, renderer: Any) -> str:
  """The EMULATE value the PYTHON interpreter runs a program of this target and renderer under."""
  if target in ("NV", "AMD"): return target
  if target != "PYTHON": return ""
  name = str(getattr(getattr(renderer, "target", None), "name", "PYTHON"))
  return "" if name == "PYTHON" else name

def _opts_text(opts: Any) -> str: return " ".join(f"{o.op.name}({o.axis},{o.arg})" for o in opts) or "none"

def diff_kernel(rid: int, rec: KernelRecord, mode: str | bool = "both") -> Outcome:
  """One kernel record, in `mode` (MODES; True is "fresh", False "captured", as the flag --fresh-opts was)."""
  mode = {True: "fresh", False: "captured"}.get(mode, mode) if isinstance(mode, bool) else mode
  name = rec.name
  out = Outcome(rid, "kernel", name, "", "", old=rec.src,
                group=hashlib.sha256(rec.ast.encode()).hexdigest()[:16])
  try:
    try: out.target, _, _ = registry.parse_identity(rec.renderer)
    except registry.UnknownTarget as e: raise _Skip("incompatible", str(e)) from None
    flags, opts = read_flags(rec.flags), read_opts(rec)
    ast: UOp = read_graph(rec.ast, "the kernel AST")
    old_uops: list[UOp] = read_graph(rec.uops, "the linear program", want_list=True)
  except _Skip as s:
    out.cls, out.detail = s.cls, s.detail
    return out
  from tinygrad.codegen import get_program
  from tinygrad.codegen.program import prepare_kernel
  prepared: UOp | None = None
  try:
    with Context(**flags):
      if (renderer := _renderers.get((out.target, rec.renderer))) is None:
        renderer = _renderers[(out.target, rec.renderer)] = registry.renderer_of(rec.renderer)
      prepared = prepare_kernel(ast)
      p = get_program(ast, renderer, None if mode == "fresh" else opts, prepared=prepared)
  except Exception as e:
    from tinygrad.uop.pyrender import pyrender
    out.cls, out.detail = "failed", f"{type(e).__name__}: {e}"
    out.new = "".join(traceback.format_exception(e)[-6:]) + "\n" + pyrender(ast)
  else:
    # NOTE: under the record's flags: its NV_ARCH/AMD_ARCH decide what an emulating PYTHON run interprets it as
    with Context(**flags): _classify(out, rec, ast, old_uops, p, renderer)
  if mode == "both" and prepared is not None:
    # NOTE: where the captured opts give the recorded program again, this code builds the old program as it was: a
    # kernel too big to interpret runs it natively in the recorded one's place (compare.run_rebuilt)
    rebuilt = (p.name, p.src, list(p.uops)) if out.cls in ("unchanged", "renamed") else None
    _heuristics_again(out, rec, ast, prepared, old_uops, flags, opts, rebuilt)
  return out

def _classify(out: Outcome, rec: KernelRecord, ast: UOp, old_uops: list[UOp], p: Any, renderer: Any) -> None:
  """The class of the new program `p` against the record's (the captured-opts view, or the fresh-opts mode's)."""
  name = rec.name
  out.new = p.src
  note = "" if renderer.identity == rec.renderer else f" (the renderer's identity changed: {renderer.identity})"
  if p.src == rec.src and p.name == name:
    out.cls, out.detail = "unchanged", ""
    return
  if p.src != rec.src and isinstance(old_c := rec.compile, dict) and out.target in capture.COMPILE_ONLY:
    # NOTE: the captured program was compiled with the target's toolchain: the new one is too (never the recorded one)
    try:
      if (bad := compare.unsafe_string(p.name, list(p.uops))) is not None:
        raise ValueError(f"the program holds the string {bad[:60]!r}, which is not a plain identifier")
      sys.audit("replay.compile", out.target, p.src)
      new_c = capture.compile_only(out.target, renderer.identity, p.src)
    except Exception as e: new_c = {"ok": None, "error": f"{type(e).__name__}: {e}"}
    if new_c["ok"] is None: note += f" (the new source was not compiled for {out.target}: {new_c['error'][:200]})"
    elif old_c.get("ok") and not new_c["ok"]:
      out.cls = "failed"
      out.detail = f"the new source does not compile for {out.target} (the captured one did): {new_c['error']}"
      return
    elif not old_c.get("ok") and new_c["ok"]: note += f" (the new source compiles for {out.target}; the captured one " \
                                                      "did not)"
    elif not new_c["ok"]: note += f" (neither source compiles for {out.target})"
  new_uops = list(p.uops)
  if p.name != name: note += f" (named {p.name} now)"
  old, new = (name, rec.src, old_uops), (p.name, p.src, new_uops)
  if compare.uops_rename_equal(old_uops, new_uops):
    if compare.source_rename_equal(rec.src, p.src):
      out.cls, out.detail = "renamed", "the same program up to names" + note
      return
    # NOTE: the same linear program rendered to other text: the renderer changed, and nothing proves its text right.
    # Only a native run of the new source shows it: interpreting the new linear program runs the old one again
    out.cls = "changed"
    if out.target in compare.NATIVE: run = compare.run_both(ast, old, new, out.target, _emulate(out.target, renderer))
    else: run = compare.RunResult("not run", "nothing was run: the PYTHON interpreter runs the linear program, which "
                                             "did not change")
    out.outputs, out.detail = run.outputs, f"the linear program is the same, the rendered source is not: a renderer " \
      f"change (run: {run.detail}){note}"
    return
  proof = compare.prove_same(old_uops, new_uops)
  if proof.verdict == "proved":
    out.cls, out.detail = "same semantics", proof.detail + note
    return
  run = compare.run_both(ast, old, new, out.target, _emulate(out.target, renderer))
  how = {"structure": "the programs differ in structure", "differs": "z3 found index math that differs",
         "unknown": "z3 did not prove the index math equal"}[proof.verdict]
  out.cls, out.outputs, out.detail = "changed", run.outputs, f"{how}: {proof.detail}; run: {run.detail}{note}"

def _heuristics_again(out: Outcome, rec: KernelRecord, ast: UOp, prepared: UOp, old_uops: list[UOp],
                      flags: dict[str, Any], opts: tuple[Any, ...], rebuilt: compare.Program | None = None) -> None:
  """Mode both: the opts the code checked out now chooses for the kernel; when it applies other ones than the record's,
  both side by side and the new program's outputs against the old one's (`rebuilt`: the old program as this code
  builds it, when that is the recorded one)."""
  if rec.chosen is False:
    out.opts = "given"
    return
  if isinstance(beam := flags.get("BEAM", 0), int) and beam >= 1:
    out.opts, out.opts_detail = "beam", f"captured with BEAM={beam}: --fresh-opts searches again"
    return
  from tinygrad.codegen import choose_opts, get_program
  renderer = _renderers[(out.target, rec.renderer)]
  try:
    with Context(**flags):
      chosen = tuple(choose_opts(prepared, renderer))
      if chosen == opts:
        out.opts = "same"
        return
      q = get_program(ast, renderer, chosen, prepared=prepared)
  except Exception as e:
    out.opts = "failed"
    out.opts_detail = f"the heuristics or the program with their opts raised: {type(e).__name__}: {e}"
    return
  if tuple(q.applied_opts) == opts:
    out.opts = "same"
    return
  out.opts, out.opts_old, out.opts_new, out.opts_src = "changed", _opts_text(opts), _opts_text(q.applied_opts), q.src
  with Context(**flags):
    run = compare.run_both(ast, (rec.name, rec.src, old_uops), (q.name, q.src, list(q.uops)), out.target,
                           _emulate(out.target, renderer), rebuilt)
  unknown = "" if rec.chosen is not None else " (captured before records said whether opts were chosen or given)"
  out.opts_outputs, out.opts_detail = run.outputs, run.detail + unknown

# ---- one schedule ----

def diff_schedule(rid: int, body: dict[str, Any]) -> Outcome:
  kernels = body["kernels"]
  out = Outcome(rid, "schedule", f"#{rid} ({len(kernels)} kernels)", "", "", old="\n\n".join(map(str, kernels)))
  try:
    graph: UOp = read_graph(body["graph"], "the tensor graph")
    flags = read_flags(body.get("flags", []), "schedule")
  except _Skip as s:
    out.cls, out.detail = s.cls, s.detail
    return out
  from tinygrad.engine.schedule import kernel_graph, order_kernels
  from tinygrad.uop.pyrender import pyrender
  # NOTE: a record without flags was captured before schedule records carried them: it is scheduled under the defaults
  unknown = "" if "flags" in body else " (captured before schedule records carried their flags: scheduled with each " \
                                       "flag at its default)"
  try:
    declared = ContextVar.declared()
    with Context(**{**{k: declared[k].default for k, _ in schedule_flags()}, **flags}):
      ksink = kernel_graph(graph).sink
    new = [pyrender(k.arg) for k in order_kernels(ksink)]
  except Exception as e:
    out.cls, out.detail = "failed", f"{type(e).__name__}: {e}"
    out.new = "".join(traceback.format_exception(e)[-6:]) + "\n" + body["graph"]
    return out
  out.new = "\n\n".join(new)
  old = body["kernels"]
  if new == old:
    out.cls = "unchanged"
    return out
  which = [i for i, (a, b) in enumerate(zip(old, new)) if a != b]
  out.cls = "changed"
  out.detail = (f"{len(old)} kernels before, {len(new)} now" if len(old) != len(new) else
                f"kernel(s) {which} of {len(old)} have a different AST") + unknown
  return out

# ---- the run ----

def diff(db_path: str | None = None, against: str | None = None, fresh: bool = False, target: str | None = None,
         limit: int | None = None, progress: TextIO | None = sys.stderr,
         on_outcome: Callable[[Outcome], None] | None = None, mode: str | None = None) -> Report:
  """Diff every record of run `against` (default: the latest run) in the database, in `mode` (MODES; default both,
  `fresh=True` is mode fresh). Never stops early unless `limit`."""
  mode = mode or ("fresh" if fresh else "both")
  if mode not in MODES: raise ValueError(f"unknown mode {mode!r}; modes are {list(MODES)}")
  path = db_path or default_path()
  db = DB(path, create=False)
  run = next((r for r in db.runs() if r.run_id == against), None) if against else db.latest_run()
  if run is None:
    raise LookupError(f"replay database {path} has no run {against!r}; runs: {[r.run_id for r in db.runs()]}")
  if target is not None and target not in registry.TARGETS:
    raise ValueError(f"unknown target {target}; targets {sorted(registry.TARGETS)}")
  rows = list(db.rows(run.run_id))
  if target is not None:
    def for_target(r: tuple[int, Any, Any, Any]) -> bool:
      return r[1] != "kernel" or _target_of_text(r[3]) == target
    rows = [r for r in rows if for_target(r)]
    if not any(r[1] == "kernel" for r in rows):
      raise LookupError(f"run {run.run_id} has no programs for {target}: capture with `python -m replay capture "
                        f"--targets {target} -- <command>` so the diff has old {target} programs to compare")
  rep = Report(path, run.run_id, run.git_commit, MODES[mode], target, len(rows), limit, mode_key=mode)
  rep.capture_errors, rep.capture_skips = db.capture_errors(run.run_id), db.capture_skips(run.run_id)
  db.close()
  st = time.perf_counter()
  todo = rows if limit is None else rows[:limit]
  last = [st]
  # NOTE: a diff records nothing, even inside a captured run
  with capture.paused():
    for i, (rid, kind, ihash, text) in enumerate(todo):
      _diff_one(rep, rid, kind, ihash, text, mode, on_outcome)
      if progress is not None and (i + 1 == len(todo) or time.perf_counter() - last[0] >= PROGRESS_EVERY_S):
        last[0] = time.perf_counter()
        print(progress_line(rep, i + 1, len(todo), last[0] - st), file=progress, flush=True)
  rep.seconds = time.perf_counter() - st
  return rep

def progress_line(rep: Report, done: int, n: int, secs: float) -> str:
  c, out = rep.counts("kernel"), rep.output_counts()
  opts = f", {rep.opts_counts()['changed']} other opts" if rep.mode_key == "both" else ""
  return (f"replay diff: {done}/{n} records, {c['changed']} changed ({out['differ']} outputs differ), {c['failed']} "
          f"failed{opts}, {secs:.0f} s")

def _diff_one(rep: Report, rid: int, kind: Any, ihash: Any, text: Any, mode: str,
              on_outcome: Callable[[Outcome], None] | None) -> None:
  t0 = time.perf_counter()
  try:
    rec = parse_record(rid, kind, ihash, text)
    if isinstance(rec, KernelRecord):
      if isinstance(rec.compile, dict) and rec.compile.get("ok") is False: rep.not_compiling += 1
      o = diff_kernel(rid, rec, mode)
    else: o = diff_schedule(rid, rec)
  except RecordError as e: o = Outcome(rid, kind if kind in KINDS else "kernel", f"record {rid}", "bad record", str(e))
  except Exception as e:  # NOTE: one kernel's trouble never ends the run; it is a failure the report shows
    o = Outcome(rid, kind, f"record {rid}", "failed", f"replay could not compare it: {type(e).__name__}: {e}",
                new="".join(traceback.format_exception(e)[-8:]))
  o.seconds = time.perf_counter() - t0
  rep.outcomes.append(o)
  if on_outcome is not None: on_outcome(o)

def _target_of_text(text: Any) -> str:
  import json
  try: return registry.parse_identity(str(json.loads(text).get("renderer", "")))[0]
  except (ValueError, TypeError, AttributeError, RecursionError): return "?"
