"""Diff: recompile every captured input with the code checked out now and classify what came out.

Kernels:   unchanged | renamed | same semantics | changed | failed | incompatible | bad record
Schedules: unchanged | changed | failed | incompatible | bad record

  captured opts  (default) each kernel is compiled with the opts it was compiled with: a difference is a lowering or
                 rendering change
  fresh opts     (--fresh-opts) the opts are chosen again (heuristics, or BEAM when the record's flags say so): shows
                 what a heuristic change does
"incompatible": the record names an Op, dtype, arg class, opt, flag or renderer this version does not have; it is not
a failure of the new code. "bad record": a record that is not what capture writes (truncated, tampered with, or text
outside pyrender's grammar); its error names the record, and nothing in it is run. Every record is visited (an
optional limit is reported as such).
"""
from __future__ import annotations
import re, sys, time, traceback
from dataclasses import dataclass, field
from typing import Any, Callable, TextIO
from tinygrad.uop.ops import UOp
from tinygrad.helpers import Context, ContextVar
from replay.db import DB, RecordError, parse_record, default_path
from replay.targets import IncompatibleRecord, parse_identity, target_renderer, TARGETS, COMPILE_TARGETS, compile_only
from replay import compare

KERNEL_CLASSES = ("unchanged", "renamed", "same semantics", "changed", "failed", "incompatible", "bad record")
SCHEDULE_CLASSES = ("unchanged", "changed", "failed", "incompatible", "bad record")
OK_CLASSES = ("unchanged", "renamed")

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

  def counts(self, kind: str) -> dict[str, int]:
    classes = KERNEL_CLASSES if kind == "kernel" else SCHEDULE_CLASSES
    ret = {c: 0 for c in classes}
    for o in self.outcomes:
      if o.kind == kind: ret[o.cls] += 1
    return ret
  def all_ok(self) -> bool: return all(o.cls in OK_CLASSES for o in self.outcomes) and not self.capture_errors
  def summary(self) -> str:
    lim = f"; LIMITED to the first {self.limit} of {self.total} records" if self.limit is not None and \
      self.limit < self.total else ""
    lines = [f"replay diff of run {self.run_id} (captured at commit {self.git_commit[:12]}) in {self.db}",
             f"mode: {self.mode}" + (f"; target {self.target}" if self.target else "") + lim]
    for kind in ("kernel", "schedule"):
      c = self.counts(kind)
      n = sum(c.values())
      lines.append(f"{kind}s ({n}): " + ", ".join(f"{k} {v}" for k, v in c.items()))
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
    for o in self.outcomes:
      if o.cls not in OK_CLASSES: lines.append(f"  {o.cls:>14}  {o.kind} {o.name} (record {o.rid}): {o.detail[:300]}")
    for what, err in self.capture_errors[:20]: lines.append(f"  capture error  {what}: {err[:300]}")
    return "\n".join(lines)

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

def read_flags(flags: list[Any]) -> dict[str, Any]:
  ret: dict[str, Any] = {}
  for f in flags:
    if not (isinstance(f, list) and len(f) == 2 and isinstance(f[0], str) and isinstance(f[1], (int, str))):
      raise _Skip("bad record", f"flag entry {f!r} is not [name, int or str]")
    if (cv := ContextVar._registry.get(f[0])) is None: raise _Skip("incompatible", f"flag {f[0]} does not exist now")
    if not cv.codegen: raise _Skip("bad record", f"flag {f[0]} does not change generated code")
    ret[f[0]] = f[1]
  return ret

def _tuples(x: Any) -> Any: return tuple(_tuples(v) for v in x) if isinstance(x, list) else x

def read_opts(opts: list[Any]) -> tuple[Any, ...]:
  from tinygrad.codegen.opt import Opt, OptOps
  ret = []
  for o in opts:
    if not (isinstance(o, list) and len(o) == 3 and isinstance(o[0], str)): raise _Skip("bad record", f"opt {o!r}")
    if o[0] not in OptOps.__members__: raise _Skip("incompatible", f"opt {o[0]} does not exist now")
    ret.append(Opt(OptOps[o[0]], _tuples(o[1]), _tuples(o[2])))
  return tuple(ret)

# ---- one kernel ----

# NOTE: a renderer is built from its recorded identity once per diff process (the LLVM ones are slow to make)
_renderers: dict[tuple[str, str], Any] = {}

def _emulate(target: str, renderer: Any) -> str:
  """The EMULATE value the PYTHON interpreter runs a program of this target and renderer under."""
  if target in ("NV", "AMD"): return target
  if target != "PYTHON": return ""
  name = str(getattr(getattr(renderer, "target", None), "name", "PYTHON"))
  return "" if name == "PYTHON" else name

Program = tuple[str, str, list[UOp]]  # name, source, linear program

def _run_native(target: str, old: Program, new: Program) -> compare.RunResult | None:
  """Both programs run natively when the target is the host's (CPU, CPU_LLVM), else None."""
  return compare.run_both_native(target, old, new) if target in compare.NATIVE else None

def diff_kernel(rid: int, body: dict[str, Any], fresh: bool) -> Outcome:
  name = body["name"]
  out = Outcome(rid, "kernel", name, "", "", old=body["src"])
  try:
    try: out.target, _, _ = parse_identity(body["renderer"])
    except IncompatibleRecord as e: raise _Skip("incompatible", str(e)) from None
    flags, opts = read_flags(body["flags"]), read_opts(body["opts"])
    ast: UOp = read_graph(body["ast"], "the kernel AST")
    old_uops: list[UOp] = read_graph(body["uops"], "the linear program", want_list=True)
  except _Skip as s:
    out.cls, out.detail = s.cls, s.detail
    return out
  from tinygrad.codegen import get_program
  try:
    with Context(**flags):
      if (renderer := _renderers.get((out.target, body["renderer"]))) is None:
        renderer = _renderers[(out.target, body["renderer"])] = target_renderer(out.target, body["renderer"])
      p = get_program(ast, renderer, None if fresh else opts)
  except Exception as e:
    from tinygrad.uop.pyrender import pyrender
    out.cls, out.detail = "failed", f"{type(e).__name__}: {e}"
    out.new = "".join(traceback.format_exception(e)[-6:]) + "\n" + pyrender(ast)
    return out
  out.new = p.src
  note = "" if renderer.identity == body["renderer"] else f" (the renderer's identity changed: {renderer.identity})"
  if p.src == body["src"] and p.name == name:
    out.cls, out.detail = "unchanged", ""
    return out
  if p.src != body["src"] and isinstance(old_c := body.get("compile"), dict) and out.target in COMPILE_TARGETS:
    # NOTE: the captured program was compiled with the target's toolchain: the new one is too
    try: new_c = compile_only(out.target, renderer.identity, p.src)
    except Exception as e: new_c = {"ok": None, "error": f"{type(e).__name__}: {e}"}
    if new_c["ok"] is None: note += f" (the new source was not compiled for {out.target}: {new_c['error'][:200]})"
    elif old_c.get("ok") and not new_c["ok"]:
      out.cls = "failed"
      out.detail = f"the new source does not compile for {out.target} (the captured one did): {new_c['error']}"
      return out
    elif not old_c.get("ok") and new_c["ok"]: note += f" (the new source compiles for {out.target}; the captured one " \
                                                      "did not)"
    elif not new_c["ok"]: note += f" (neither source compiles for {out.target})"
  new_uops = list(p.uops)
  if p.name != name: note += f" (named {p.name} now)"
  if compare.uops_rename_equal(old_uops, new_uops):
    if compare.source_rename_equal(body["src"], p.src):
      out.cls, out.detail = "renamed", "the same program up to names" + note
      return out
    # NOTE: the same linear program rendered to other text: the renderer changed, and nothing proves its text right
    run = _run_native(out.target, (name, body["src"], old_uops), (p.name, p.src, new_uops))
    how = f"run: {run.detail}" if run is not None else "nothing was run: the PYTHON interpreter runs the linear " \
      "program, which did not change" + (f"; natively: {compare.native_skip}" if out.target in compare.NATIVE else "")
    out.cls, out.detail = "changed", f"the linear program is the same, the rendered source is not: a renderer change " \
      f"({how}){note}"
    return out
  proof = compare.prove_same(old_uops, new_uops)
  if proof.verdict == "proved":
    out.cls, out.detail = "same semantics", proof.detail + note
    return out
  run = _run_native(out.target, (name, body["src"], old_uops), (p.name, p.src, new_uops))
  if run is None:
    run = compare.run_both(old_uops, new_uops, name, _emulate(out.target, renderer))
    if out.target in compare.NATIVE: note += f" (run on PYTHON: natively {compare.native_skip})"
  how = {"structure": "the programs differ in structure", "differs": "z3 found index math that differs",
         "unknown": "z3 did not prove the index math equal"}[proof.verdict]
  out.cls, out.detail = "changed", f"{how}: {proof.detail}; run: {run.detail}{note}"
  return out

# ---- one schedule ----

def diff_schedule(rid: int, body: dict[str, Any]) -> Outcome:
  kernels = body["kernels"]
  out = Outcome(rid, "schedule", f"#{rid} ({len(kernels)} kernels)", "", "", old="\n\n".join(map(str, kernels)))
  try: graph: UOp = read_graph(body["graph"], "the tensor graph")
  except _Skip as s:
    out.cls, out.detail = s.cls, s.detail
    return out
  from tinygrad.engine.schedule import kernel_graph, order_kernels
  from tinygrad.uop.pyrender import pyrender
  try:
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
  out.detail = f"{len(old)} kernels before, {len(new)} now" if len(old) != len(new) else \
    f"kernel(s) {which} of {len(old)} have a different AST"
  return out

# ---- the run ----

def diff(db_path: str | None = None, against: str | None = None, fresh: bool = False, target: str | None = None,
         limit: int | None = None, progress: TextIO | None = sys.stderr,
         on_outcome: Callable[[Outcome], None] | None = None) -> Report:
  """Diff every record of run `against` (default: the latest run) in the database. Never stops early unless `limit`."""
  path = db_path or default_path()
  db = DB(path, create=False)
  run = next((r for r in db.runs() if r.run_id == against), None) if against else db.latest_run()
  if run is None:
    raise LookupError(f"replay database {path} has no run {against!r}; runs: {[r.run_id for r in db.runs()]}")
  if target is not None and target not in TARGETS:
    raise ValueError(f"unknown target {target}; targets {sorted(TARGETS)}")
  mode = "fresh opts (the opts are chosen again)" if fresh else "captured opts (each kernel with the opts it had)"
  rows = list(db.rows(run.run_id))
  if target is not None:
    def for_target(r: tuple[int, str, str, str]) -> bool:
      return r[1] != "kernel" or _target_of_text(r[3]) == target
    rows = [r for r in rows if for_target(r)]
    if not any(r[1] == "kernel" for r in rows):
      raise LookupError(f"run {run.run_id} has no programs for {target}: capture with `python -m replay capture "
                        f"--targets {target} -- <command>` so the diff has old {target} programs to compare")
  rep = Report(path, run.run_id, run.git_commit, mode, target, len(rows), limit)
  rep.capture_errors, rep.capture_skips = db.capture_errors(run.run_id), db.capture_skips(run.run_id)
  st = time.perf_counter()
  todo = rows if limit is None else rows[:limit]
  from replay import capture
  # NOTE: a diff records nothing, even inside a captured run
  with capture.paused():
    for i, (rid, kind, ihash, text) in enumerate(todo): _diff_one(rep, i, len(todo), rid, kind, ihash, text, fresh,
                                                                  progress, on_outcome)
  rep.seconds = time.perf_counter() - st
  db.close()
  return rep

def _diff_one(rep: Report, i: int, n: int, rid: int, kind: str, ihash: str, text: str, fresh: bool,
              progress: TextIO | None, on_outcome: Callable[[Outcome], None] | None) -> None:
  t0 = time.perf_counter()
  try:
    body = parse_record(rid, kind, ihash, text)
    if isinstance(c := body.get("compile"), dict) and c.get("ok") is False: rep.not_compiling += 1
    o = diff_kernel(rid, body, fresh) if kind == "kernel" else diff_schedule(rid, body)
  except RecordError as e: o = Outcome(rid, kind, f"record {rid}", "bad record", str(e))
  except Exception as e:  # NOTE: one kernel's trouble never ends the run; it is a failure the report shows
    o = Outcome(rid, kind, f"record {rid}", "failed", f"replay could not compare it: {type(e).__name__}: {e}",
                new="".join(traceback.format_exception(e)[-8:]))
  o.seconds = time.perf_counter() - t0
  rep.outcomes.append(o)
  if on_outcome is not None: on_outcome(o)
  if progress is not None and (i + 1 == n or (i + 1) % 25 == 0 or o.cls not in OK_CLASSES):
    counts = {c: k for c, k in rep.counts("kernel").items() if k}
    print(f"[{i + 1}/{n}] {o.kind} {o.name}: {o.cls}   so far {counts}", file=progress, flush=True)

def _target_of_text(text: str) -> str:
  import json
  try: return parse_identity(str(json.loads(text).get("renderer", "")))[0]
  except (ValueError, AttributeError, IncompatibleRecord): return "?"
