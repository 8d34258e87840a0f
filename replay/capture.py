"""Capture: record every schedule and every compiled kernel of a run into the replay database.

Two boundaries, through tinygrad's checkpoints (tinygrad/uop/hooks.py):
  schedule  tensor_graph(sink) then kernel_graph(ksink): the canonical tensor graph in (buffers named LUNIQUE), the
            kernel ASTs out, in run order (one record per distinct tensor graph)
  kernel    compiled(ast, program, renderer): the kernel AST, the renderer's identity, the codegen flags and the applied
            opts in; the source, the linear program (pyrender text) and the ProgramSpec fields out
With REPLAY_TARGETS (`python -m replay capture --targets NV,AMD`) each kernel is also rendered for those targets and
recorded the same way, so `diff --target` has old programs to compare; an NV or AMD program is also compiled with the
target's toolchain (compile-only: NVRTC + ptxas, llvmlite + LLD; no device), the result or the compile error in its
record.

`install()` is the `tinygrad.plugins` entry point (replay/plugin.py): it registers only when CAPTURE_PROCESS_REPLAY=1.
A failure to record never takes the captured program down: it is stored in capture_errors and reported by diff.
"""
from __future__ import annotations
import contextlib, dataclasses, functools, operator, os, sys, types
from typing import Any, Callable, Iterator
from tinygrad.uop import hooks
from tinygrad.uop.ops import UOp, PatternMatcher
from tinygrad.uop.pyrender import pyrender
from tinygrad.codegen.record import record_program
from tinygrad.helpers import CAPTURE_PROCESS_REPLAY, REPLAY_RUN, REPLAY_TARGETS, Context
from replay.db import DB, default_path, git_commit, new_run_id
from tinygrad.runtime import targets as registry

# the targets whose programs capture also compiles with the target's toolchain (no device needed)
COMPILE_ONLY = tuple(t for t, v in registry.TARGETS.items() if v.compile_only)

class _State:
  def __init__(self) -> None:
    self.db: DB | None = None
    self.pid = -1
    self.path = ""
    self.run_id = ""
    self.targets: list[str] = []
    self.pending: list[tuple[UOp, int]] = []  # the tensor graph whose kernel graph is not out yet, and `patches` then
    # (id of the AST, `patches`, whether the caller gave the opts) of each get_program under way
    self.compiling: list[tuple[int, int, bool]] = []
    self.patches = 0  # rewrites run so far with a patched matcher (the `patched_rewrite` checkpoint)
    self.last_patch = ""
    self.no_toolchain: set[str] = set()  # targets whose compile-only toolchain is not installed here
    self.compile_failures = 0
    self.fanning = False
    self.written = {"kernel": 0, "schedule": 0}
    self.saved_run: tuple[str | None, str] | None = None  # REPLAY_RUN (environment, flag) before start()

state = _State()

def _db() -> DB:
  # NOTE: a sqlite connection must not cross a fork: a forked child opens its own
  if state.db is None or state.pid != os.getpid():
    state.db, state.pid = DB(state.path), os.getpid()
    state.db.add_run(state.run_id, git_commit(), sys.argv, state.targets)
  return state.db

def _error(what: str, e: BaseException) -> None:
  msg = f"{type(e).__name__}: {e}"
  print(f"replay capture: could not record {what}: {msg}", file=sys.stderr)
  try: _db().add_capture_error(state.run_id, what, msg)
  except Exception as e2: print(f"replay capture: could not store that error either: {e2}", file=sys.stderr)

# identity -> whether replay rebuilds that renderer exactly (the target registry builds it from its identity alone)
_replayable: dict[tuple[str, str], bool] = {}

def replayable(renderer: Any) -> bool:
  """The renderer is one of the targets' own classes and the one rebuilt from its identity has the same identity. A
  subclass (a test double) or a renderer whose output depends on state outside its identity is not: its programs could
  not be compiled again as they were."""
  ident = renderer.identity
  # NOTE: an emulating PYTHON renderer's state is also its shared target renderer's (see _fresh_base)
  key = (ident, str(getattr(getattr(renderer, "base", None), "identity", "")))
  if (ok := _replayable.get(key)) is None:
    cls = f"{type(renderer).__module__}.{type(renderer).__qualname__}"
    try: ok = registry.TARGETS[registry.parse_identity(ident)[0]].renderer_class == cls and \
      registry.renderer_of(ident).identity == ident and _fresh_base(renderer)
    except Exception: ok = False
    _replayable[key] = ok
  return ok

def _fresh_base(renderer: Any) -> bool:
  """A PYTHON renderer emulating NV or AMD takes its contract from the target's renderer, one instance per process
  (ops_python's target cache) that a rebuilt renderer shares: it must be what a fresh one of its arch is (a test may
  have set attributes on it, e.g. its tensor cores)."""
  if (base := getattr(renderer, "base", None)) is None: return True
  return bool(registry.renderer(base.device, base.arch).identity == base.identity)

def _foreign(v: Any) -> str | None:
  """The module of a Python function defined outside tinygrad (a test's monkeypatch), or the patched rule of a
  PatternMatcher that is not tinygrad's own rules (a matcher a test put in), else None."""
  if isinstance(v, PatternMatcher): return v.patched
  while isinstance(v, functools.partial): v = v.func
  if isinstance(v, (types.FunctionType, types.MethodType)) and not str(v.__module__).startswith("tinygrad"):
    return str(v.__module__)
  return None

def patched(renderer: Any) -> str | None:
  """Where the renderer's behaviour was replaced in this process (`attr from module`), else None. A program rendered
  by a patched renderer is no record of the code: replaying it would only show the patch."""
  scopes = [vars(c) for c in type(renderer).__mro__ if c is not object] + [vars(renderer)]
  for scope in scopes:
    for k, v in scope.items():
      vals = list(v.values()) if isinstance(v, dict) else [v]
      if (mod := next((m for x in vals if (m := _foreign(x)) is not None), None)) is not None: return f"{k} from {mod}"
  return None

# ---- programs made while a rewrite rule was patched ----
# NOTE: a test that swaps a rule (fuzz/mutants.py), or compiles with a matcher of its own, makes programs that are no
# record of the code: replaying them at the same commit shows the patch as a change. PatternMatcher.patched names such a
# matcher and every rewrite with one fires `patched_rewrite`; a compile (`compiling`..`compiled`) or a schedule
# (`tensor_graph`..`kernel_graph`) during which one ran is counted as a skip, not recorded.

def on_patched_rewrite(where: str) -> None:
  state.patches += 1
  state.last_patch = where

def on_compiling(ast: UOp, renderer: Any, opts: Any = None) -> None:
  # NOTE: a compile that raised never fires `compiled`: its mark stays until an enclosing compile ends (bounded)
  state.compiling.append((id(ast), state.patches, opts is not None))
  if len(state.compiling) > 64: del state.compiling[0]

# ---- tinygrad code a test replaced (a module function or a method) ----
# NOTE: tinygrad never imports the project's own other code (spec/, fuzz/, replay/, tests: tests/test_layering.py), so a
# function of it found in a namespace of tinygrad's was put there by a patch (e.g. `ops._min_max = patched` of a
# planted bug, `monkeypatch.setattr(sym, "_sum_fits", ...)`); so is a copy of a tinygrad function with other globals.
# A patch by a library function or a plain value is not seen.

REPO = os.path.dirname(os.path.dirname(os.path.abspath(sys.modules["tinygrad"].__file__ or ".")))
TINYGRAD = os.path.join(REPO, "tinygrad") + os.sep

def _project_function(fn: Any) -> str | None:
  """Why `fn`, found in a tinygrad namespace, is not tinygrad's code, else None."""
  if isinstance(fn, PatternMatcher): return fn.patched
  if isinstance(fn, (staticmethod, classmethod)): fn = fn.__func__
  elif isinstance(fn, property): return next((w for f in (fn.fget, fn.fset) if f is not None
                                              and (w := _project_function(f)) is not None), None)
  while isinstance(fn, functools.partial): fn = fn.func
  if isinstance(fn, types.MethodType): fn = fn.__func__
  if not isinstance(fn, types.FunctionType): return None
  mod = str(fn.__globals__.get("__name__", "?"))
  if mod.split(".")[0] == "tinygrad":
    if getattr(sys.modules.get(mod), "__dict__", None) is fn.__globals__: return None
    return f"{fn.__qualname__} (a copy of tinygrad's with other globals)"
  path = fn.__code__.co_filename
  ours = mod == "__main__" or (path.startswith(REPO + os.sep) and not path.startswith(TINYGRAD)
                               and "site-packages" not in path)
  return f"{fn.__qualname__} from {mod}" if ours else None

# NOTE: what comes before a record's input (the tensor front end: a schedule record holds the tensor graph it made) or
# after its output (toolchains and devices: a kernel record holds the source) cannot change a replay
FRONT = ("tinygrad.tensor", "tinygrad.nn", "tinygrad.gradient", "tinygrad.device", "tinygrad.runtime.support")

class _Namespaces:
  """The namespaces of tinygrad's modules and of the classes they define, each with its values when last scanned and
  what was found patched in it then. A scan compares identities (cheap) and looks closer only where one changed."""
  def __init__(self) -> None:
    self.n_modules = -1
    self.scopes: dict[str, Any] = {}
    self.seen: dict[str, tuple[tuple[Any, ...], str | None]] = {}

  def _collect(self) -> None:
    self.n_modules = len(sys.modules)
    for name, mod in list(sys.modules.items()):
      if name.split(".")[0] != "tinygrad" or name in self.scopes or mod is None or name.startswith(FRONT): continue
      self.scopes[name] = vars(mod)
      for v in list(vars(mod).values()):
        if isinstance(v, type) and v.__module__ == name: self.scopes[f"{name}.{v.__qualname__}"] = v.__dict__

  def patched(self) -> str | None:
    if len(sys.modules) != self.n_modules: self._collect()
    found = None
    for where, d in self.scopes.items():
      vals = tuple(d.values())
      old = self.seen.get(where)
      if old is None or len(old[0]) != len(vals) or not all(map(operator.is_, old[0], vals)):
        why = next((f"{where}.{k}: {w}" for k, v in list(d.items()) if (w := _project_function(v)) is not None), None)
        self.seen[where] = old = (vals, why)
      if found is None and old[1] is not None: found = old[1]
    return found

namespaces = _Namespaces()

def _compile_mark(ast: UOp) -> tuple[str | None, bool | None]:
  """(the patched rewrite that ran since get_program started on `ast` (the last one) or None, whether its caller gave
  the opts: None when the compile has no mark)."""
  # NOTE: no mark (the capture started inside the compile): judge by whether any patched rewrite ran at all
  start, given = 0, None
  while state.compiling:
    aid, n, g = state.compiling.pop()
    if aid == id(ast):
      start, given = n, g
      break
  return (state.last_patch if state.patches > start else None), given

def _skip(key: str, what: str) -> None:
  try: _db().add_skip(state.run_id, key)
  except Exception as e: _error(f"the skip of {what}", e)

def on_compiled(ast: UOp, p: Any, renderer: Any) -> None:
  why = None if replayable(renderer) else "cannot be rebuilt from its identity"
  rule, given = _compile_mark(ast)
  if why is None and (where := patched(renderer)) is not None: why = f"patched: {where}"
  if why is None and rule is not None: why = f"patched rule: {rule}"
  if why is None and (code := namespaces.patched()) is not None: why = f"patched code: {code}"
  if why is not None: return _skip(f"{p.renderer} ({why})", f"kernel {getattr(p, 'name', '?')}")
  try:
    # NOTE: whether get_program chose the opts (its caller gave none): the diff re-chooses only those
    rec = record_program(ast, p, None if given is None else not given)
    if state.fanning and (t := registry.target_of(p.renderer)) in COMPILE_ONLY and (res := _compile(t, p)) is not None:
      rec = dataclasses.replace(rec, compile=res)
    if _db().add_record(state.run_id, "kernel", rec.to_json()): state.written["kernel"] += 1
  except Exception as e: _error(f"kernel {getattr(p, 'name', '?')}", e)
  if state.fanning or not state.targets: return
  from tinygrad.codegen import get_program
  state.fanning = True
  try:
    for t in state.targets:
      # NOTE: get_program fires `compiled` again with the target's renderer: that call records the target's program
      try:
        with Context(**dict(registry.TARGETS[t].flags)): get_program(ast, registry.renderer(t))
      except Exception as e: _error(f"kernel {p.name} rendered for {t}", e)
  finally: state.fanning = False

def _compile(target: str, p: Any) -> dict[str, Any] | None:
  """The compile-only result of a program rendered for `target` (stored in its record, for the diff to compare), or
  None when the target's toolchain is missing (one capture error per target and process says so)."""
  if target in state.no_toolchain: return None
  from tinygrad.device import DeviceOpenError
  try: res = compile_only(target, p.renderer, p.src)
  except DeviceOpenError as e:
    state.no_toolchain.add(target)
    _error(f"compile-only for {target} (its programs are rendered, not compiled)", e)
    return None
  if not res["ok"]:
    state.compile_failures += 1
    if state.compile_failures <= 3:
      print(f"replay capture: kernel {p.name} does not compile for {target}: {res['error'][:300]}", file=sys.stderr)
  return res

# NOTE: only the latest tensor graph waits for its kernel graph: a schedule that raised in between never fires
# kernel_graph, and its graph must not be kept alive (or paired with the next schedule's kernels)
def on_tensor_graph(sink: UOp) -> None: state.pending = [(sink, state.patches)]

def on_kernel_graph(ksink: UOp) -> None:
  if not state.pending: return
  sink, start = state.pending.pop()
  if state.patches > start: return _skip(f"schedule (patched rule: {state.last_patch})", "a schedule")
  if (code := namespaces.patched()) is not None: return _skip(f"schedule (patched code: {code})", "a schedule")
  try:
    from tinygrad.engine.schedule import order_kernels
    body = {"graph": pyrender(sink), "kernels": [pyrender(k.arg) for k in order_kernels(ksink)]}
    if _db().add_record(state.run_id, "schedule", body): state.written["schedule"] += 1
  except Exception as e: _error("a schedule", e)

CALLBACKS: dict[str, Callable[..., None]] = {"compiling": on_compiling, "compiled": on_compiled,
                                             "tensor_graph": on_tensor_graph, "kernel_graph": on_kernel_graph,
                                             "patched_rewrite": on_patched_rewrite}

_outer: list[_State] = []  # the sessions a nested start() (a test inside a captured run) interrupted

def active() -> bool: return hooks.compiled.count(on_compiled) > 0

def start(path: str | None = None, run_id: str | None = None, targets: list[str] | None = None) -> str:
  """Record from now on into `path` (default: REPLAY_DB or the default path) under `run_id` (default: REPLAY_RUN, else
  a new id exported to REPLAY_RUN so child processes file under the same run). Returns the run id. A session already
  recording is suspended until the matching stop()."""
  global state
  if active(): _outer.append(state)
  state = new = _State()
  new.path = path or default_path()
  # NOTE: pytest-xdist workers are started before the controller imports tinygrad, so they cannot inherit its run id;
  # they share the session's test run uid instead
  xdist = os.environ.get("PYTEST_XDIST_TESTRUNUID", "")
  new.run_id = run_id or REPLAY_RUN.value or (f"pytest-xdist-{xdist[:16]}" if xdist else new_run_id())
  new.saved_run = (os.environ.get("REPLAY_RUN"), REPLAY_RUN.value)
  os.environ["REPLAY_RUN"] = REPLAY_RUN.value = new.run_id
  env_targets = [t.strip().upper() for t in REPLAY_TARGETS.value.split(",") if t.strip()]
  new.targets = targets if targets is not None else env_targets
  if (bad := [t for t in new.targets if t not in registry.TARGETS]):
    stop()
    raise ValueError(f"replay capture: unknown target(s) {bad}; targets are {sorted(registry.TARGETS)}")
  for name, fn in CALLBACKS.items(): hooks.register(name, fn)
  return new.run_id

def stop() -> None:
  """End the current session; a session it suspended records again."""
  global state
  if state.db is not None and state.pid == os.getpid(): state.db.close()
  state.db, state.pending = None, []
  if state.saved_run is not None:
    env, REPLAY_RUN.value = state.saved_run
    if env is None: os.environ.pop("REPLAY_RUN", None)
    else: os.environ["REPLAY_RUN"] = env
    state.saved_run = None
  if _outer: state = _outer.pop()
  else:
    for name, fn in CALLBACKS.items(): hooks.unregister(name, fn)

@contextlib.contextmanager
def paused() -> Iterator[None]:
  """Record nothing inside the block (a diff compiles every record again), then go on as before."""
  was = active()
  for name, fn in CALLBACKS.items(): hooks.unregister(name, fn)
  try: yield
  finally:
    if was:
      for name, fn in CALLBACKS.items(): hooks.register(name, fn)

def compile_only(target: str, identity: str, src: str) -> dict[str, Any]:
  """Compile `src` (an NV or AMD program rendered by `identity`) with the target's toolchain, nothing run: {"ok": True,
  "bytes": n, "report": the compiler's one-line report} or {"ok": False, "error": the compile error}.
  Raises DeviceOpenError when there is no toolchain (not a verdict on the program)."""
  from tinygrad.device import CompileError
  t, arch, _ = registry.parse_identity(identity)
  if t != target or t not in COMPILE_ONLY:
    raise ValueError(f"compile-only is for NV and AMD programs, not {identity[:120]} as {target}")
  comp = registry.compiler(target, arch)
  try: lib = comp.compile_cached(src, identity)
  except CompileError as e: return {"ok": False, "error": f"{type(e).__name__}: {e}"[:4000]}
  try: report = str(comp.describe(lib))[:500]
  except Exception as e: report = f"(no report: {type(e).__name__}: {e})"
  return {"ok": True, "bytes": len(lib), "report": report}

def install() -> Any:
  """The plugin entry point: start capturing when CAPTURE_PROCESS_REPLAY=1 (idempotent)."""
  if CAPTURE_PROCESS_REPLAY.value and not active(): start()
  return sys.modules[__name__]
