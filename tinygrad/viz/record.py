"""VIZ=1 / PROFILE=1: the recorder. It plugs into the compiler's checkpoints (tinygrad/uop/hooks.py) and writes the
trace (tinygrad/viz/trace.py) as the run goes; with VIZ=0 and PROFILE=0 nothing here is registered, so the compiler
pays one empty-list test per graph_rewrite and nothing per step."""
from __future__ import annotations
import atexit, inspect, linecache, os, sys
from typing import Any, Callable
from tinygrad.uop import hooks
from tinygrad.uop.ops import UOp, Rule
from tinygrad.helpers import VIZ, PROFILE, VIZ_TRACE, VIZ_MAX_MB, VIZ_SERVE
from tinygrad.viz.trace import TraceWriter, default_path

ARG_CHARS = 400  # a node's arg text is cut here (with "...") so one odd constant cannot blow the trace up
CODE_LINES = 40  # a rule function's source shown beside the graph, at most

def rule_source(fn: Any) -> tuple[str, str]:
  """(file:line, source text) of a rule's function: the rule table's line for a lambda, the def for a function."""
  code = getattr(fn, "__code__", None)
  if code is None: return "?", repr(fn)
  loc = f"{code.co_filename}:{code.co_firstlineno}"
  if code.co_name == "<lambda>": return loc, linecache.getline(code.co_filename, code.co_firstlineno).strip()
  try: lines, _ = inspect.getsourcelines(fn)
  except (OSError, TypeError): return loc, linecache.getline(code.co_filename, code.co_firstlineno).strip()
  return loc, "".join(lines[:CODE_LINES]) + ("    ...\n" if len(lines) > CODE_LINES else "")

class Recorder:
  """Writes the trace. Groups (schedules, kernels) hold passes; a pass holds the steps of one graph_rewrite."""
  def __init__(self, path: str, cap_bytes: int, rewrites: bool = True, launches: bool = False):
    self.path = path
    self.w = TraceWriter(path, cap_bytes, sys.argv)
    self.ids: dict[UOp, int] = {}
    self.rule_ids: dict[tuple[Any, str], int] = {}
    self.n_groups = self.n_passes = 0
    self.group: int | None = None  # the open schedule or kernel
    self.program: list[int] | None = None  # the open kernel's linear program
    self.other: int | None = None  # the group of passes outside any schedule or kernel
    self.passes: list[tuple[int, Any, UOp]] = []  # open passes, innermost last: (id, rewriter, root)
    self.steps: dict[int, int] = {}
    self.rewrites, self.launches = rewrites, launches
    self.closed = False

  # ---- the node and rule tables ----
  def node(self, u: UOp) -> int:
    if (i := self.ids.get(u)) is not None: return i
    stack, ids, w = [u], self.ids, self.w
    while stack:
      x = stack[-1]
      if x in ids:
        stack.pop()
        continue
      if (todo := [s for s in x.src if s not in ids]):
        stack.extend(todo)
        continue
      stack.pop()
      ids[x] = n = len(ids)
      arg = repr(x.arg)
      if len(arg) > ARG_CHARS: arg = arg[:ARG_CHARS] + "..."
      w.write({"t": "n", "i": n, "op": x.op.name, "dt": repr(x.dtype).removeprefix("dtypes."), "arg": arg,
               "src": [ids[s] for s in x.src]})
    return ids[u]

  def rule(self, r: Rule) -> int:
    key = (r.fn, r.pat.location)
    if (i := self.rule_ids.get(key)) is not None: return i
    self.rule_ids[key] = i = len(self.rule_ids)
    loc, code = rule_source(r.fn)
    fname = getattr(r.fn, "__name__", "?")
    # NOTE: a lambda is named by its line in the rule table (the pattern's own location can be an operator's module)
    name = f"{fname} ({os.path.basename(loc)})" if fname == "<lambda>" else fname
    self.w.write({"t": "rule", "i": i, "name": name, "loc": loc, "code": code})
    return i

  # ---- groups ----
  def open_group(self, kind: str, name: str, ast: UOp | None = None) -> int:
    if self.group is not None: self.close_group(None, error="a new one started before it finished (it raised)")
    self.group, self.n_groups = self.n_groups, self.n_groups + 1
    self.w.write({"t": "group", "i": self.group, "kind": kind, "name": name,
                  "ast": None if ast is None else self.node(ast)}, flush=True)
    return self.group

  def close_group(self, name: str | None, program: list[int] | None = None, source: str | None = None,
                  target: str | None = None, error: str | None = None) -> None:
    if self.group is None: return
    self.w.write({"t": "group_end", "i": self.group, "name": name or f"group {self.group}", "program": program,
                  "source": source, "target": target, "error": error}, flush=True)
    self.group, self.program = None, None

  def current_group(self) -> int:
    if self.group is not None: return self.group
    if self.other is None:
      self.other, self.n_groups = self.n_groups, self.n_groups + 1
      self.w.write({"t": "group", "i": self.other, "kind": "other", "name": "outside schedules and kernels",
                    "ast": None})
    return self.other

  # ---- checkpoints ----
  def on_tensor_graph(self, sink: UOp) -> None: self.open_group("schedule", f"schedule {self.n_groups}", sink)
  def on_kernel_graph(self, sink: UOp) -> None: self.close_group(f"schedule {self.group}")
  def on_compiling(self, ast: UOp, renderer: Any, opts: Any) -> None:
    self.open_group("kernel", f"kernel {self.n_groups}", ast)
    self.program = None
  def on_program(self, ast: UOp, uops: list[UOp], renderer: Any) -> None:
    if self.group is not None: self.program = [self.node(u) for u in uops]
  def on_compiled(self, ast: UOp, spec: Any, renderer: Any) -> None:
    self.close_group(spec.name, self.program, spec.src, getattr(renderer, "identity", None))

  def on_rewrite_start(self, rw: Any, root: UOp) -> None:
    pid, self.n_passes = self.n_passes, self.n_passes + 1
    self.w.write({"t": "pass", "i": pid, "group": self.current_group(), "name": rw.name, "root": self.node(root),
                  "bottom_up": bool(rw.bottom_up)})
    self.passes.append((pid, rw, root))
    self.steps[pid] = 0
    apply, rules, step = rw.apply, rw.pm.rules, self.step
    def traced_apply(u: UOp) -> UOp | None:
      if (ret := apply(u)) is not None: step(pid, rules[rw.last_rule], u, ret)
      return ret
    # NOTE: _Rewriter.run reads self.apply once it has fired rewrite_start, so this instance attribute is what it calls
    setattr(rw, "apply", traced_apply)

  def step(self, pid: int, r: Rule, u: UOp, ret: UOp) -> None:
    m, o = self.node(u), self.node(ret)
    if self.w.write({"t": "s", "p": pid, "r": self.rule(r), "m": m, "o": o}): self.steps[pid] += 1

  def on_rewrite_done(self, name: str, before: UOp, after: UOp) -> None:
    k = next((k for k in range(len(self.passes) - 1, -1, -1)
              if self.passes[k][1].name == name and self.passes[k][2] is before), None)
    if k is None: return  # a rewrite_done fired by hand (late.py) for a rewrite that had no rewrite_start
    while len(self.passes) > k + 1: self.end_pass("it raised before it finished")
    self.end_pass(None, after)

  def end_pass(self, error: str | None, out: UOp | None = None) -> None:
    pid, _, _ = self.passes.pop()
    self.w.write({"t": "pass_end", "i": pid, "out": None if out is None else self.node(out),
                  "steps": self.steps.pop(pid), "error": error}, flush=True)

  def fail(self, e: BaseException) -> None:
    """Close every open pass and group as failed with `e` (a caller that caught a codegen failure says so)."""
    msg = f"{type(e).__name__}: {e}"
    while self.passes: self.end_pass(msg)
    self.close_group(None, error=msg)

  def mark_error(self, name: str, u: UOp, error: str) -> str:
    """Record the graph under `u` as a failed pass named `name` (a checker's error), so the viewer opens there; returns
    the command that opens it."""
    pid, self.n_passes = self.n_passes, self.n_passes + 1
    self.w.write({"t": "pass", "i": pid, "group": self.current_group(), "name": name, "root": self.node(u),
                  "bottom_up": False})
    self.w.write({"t": "pass_end", "i": pid, "out": None, "steps": 0, "error": error}, flush=True)
    return f"python -m tinygrad.viz {self.path} --pass '{name}'"

  def on_launched(self, runner: Any, bufs: list[Any], start: float, seconds: float | None) -> None:
    self.w.write({"t": "launch", "device": str(bufs[0].device) if bufs else "?", "name": runner.display_name,
                  "start": start, "seconds": seconds or 0.0, "flops": int(runner.ops), "bytes": int(runner.mem)})

  # ---- registration ----
  def checkpoints(self) -> dict[str, Callable[..., Any]]:
    ret: dict[str, Callable[..., Any]] = {}
    if self.rewrites:
      ret.update(tensor_graph=self.on_tensor_graph, kernel_graph=self.on_kernel_graph, compiling=self.on_compiling,
                 program=self.on_program, compiled=self.on_compiled, rewrite_start=self.on_rewrite_start,
                 rewrite_done=self.on_rewrite_done)
    if self.launches: ret["launched"] = self.on_launched
    return ret

  def install(self) -> Recorder:
    for k, fn in self.checkpoints().items(): hooks.register(k, fn)
    return self

  def close(self) -> None:
    """Unregister, end what is open and write the end record."""
    if self.closed: return
    self.closed = True
    for k, fn in self.checkpoints().items(): hooks.unregister(k, fn)
    while self.passes: self.end_pass("the run ended inside it")
    self.close_group(None, error="the run ended inside it")
    self.w.write({"t": "end"})
    self.w.close()

active: Recorder | None = None

def start(path: str | None = None, cap_mb: int | None = None, rewrites: bool = True,
          launches: bool = False) -> Recorder:
  """Record into `path` (VIZ_TRACE, else a new temp file) until `stop()`."""
  global active
  if active is not None: stop()
  cap = int(VIZ_MAX_MB.value if cap_mb is None else cap_mb) * (1 << 20)
  active = Recorder(path or VIZ_TRACE.value or default_path(), cap, rewrites, launches).install()
  return active

def stop() -> Recorder | None:
  global active
  rec, active = active, None
  if rec is not None: rec.close()
  return rec

def _at_exit() -> None:
  rec = stop()
  if rec is None: return
  print(f"VIZ: trace written to {rec.path}" + (" (it reached VIZ_MAX_MB)" if rec.w.capped else ""), file=sys.stderr)
  if not VIZ_SERVE:
    print(f"VIZ: open it with: {sys.executable} -m tinygrad.viz {rec.path}", file=sys.stderr)
    return
  from tinygrad.viz.server import serve_paths
  serve_paths([rec.path])

def start_from_flags() -> None:
  """What `import tinygrad` does for VIZ=1 or PROFILE=1: record the whole run, serve the viewer at exit."""
  if not (VIZ or PROFILE) or active is not None: return
  start(rewrites=bool(VIZ), launches=bool(PROFILE))
  # NOTE: a child process inherits VIZ=1: it writes a trace of its own (a temp file, never this one) and does not serve
  os.environ.update(VIZ_TRACE="", VIZ_SERVE="0")
  atexit.register(_at_exit)
