"""Capture: record every schedule and every compiled kernel of a run into the replay database.

Two boundaries, through tinygrad's checkpoints (tinygrad/uop/hooks.py):
  schedule  tensor_graph(sink) then kernel_graph(ksink): the canonical tensor graph (buffers named LUNIQUE) and the
            scheduler flags (helpers.schedule_flags) in, the kernel ASTs out, in run order (one record per distinct
            input)
  kernel    compiled(ast, program, renderer): the kernel AST, the renderer's identity, the codegen flags and the applied
            opts in; the source, the linear program (pyrender text) and the ProgramSpec fields out
With REPLAY_TARGETS (`python -m replay capture --targets NV,AMD`) each kernel is also rendered for those targets and
recorded the same way, so `diff --target` has old programs to compare; an NV or AMD program is also compiled with the
target's toolchain (compile-only: NVRTC + ptxas, llvmlite + LLD; no device), the result or the compile error in its
record.

`install()` is the `tinygrad.plugins` entry point (replay/plugin.py): it registers only when CAPTURE_PROCESS_REPLAY=1.
A failure to record never takes the captured program down: it is stored in capture_errors and reported by diff.

Whatever patches the compiler pauses the capture while the patch is in (`pause()`/`resume()`, `paused()`): a program
made by a patched compiler is no record of the code. tests/conftest.py's `monkeypatch` does it for a patch of tinygrad,
fuzz/measure/mutants.py for a planted mutant, tests/fuzz/planted.py for a planted bug.
"""
from __future__ import annotations
import contextlib, dataclasses, os, sys
from typing import Any, Callable, Iterator
from tinygrad.uop import hooks
from tinygrad.uop.ops import UOp
from tinygrad.uop.pyrender import pyrender
from tinygrad.codegen.record import record_program
from tinygrad.helpers import CAPTURE_PROCESS_REPLAY, REPLAY_RUN, REPLAY_TARGETS, Context, schedule_flags
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
    self.live = False  # between start() and stop()
    self.pauses = 0  # pause() calls not resumed yet: records nothing while > 0
    self.pending: list[UOp] = []  # the tensor graph whose kernel graph is not out yet
    # (id of the AST, whether the caller gave the opts) of each get_program under way
    self.compiling: list[tuple[int, bool]] = []
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

def on_compiling(ast: UOp, renderer: Any, opts: Any = None) -> None:
  # NOTE: a compile that raised never fires `compiled`: its mark stays until an enclosing compile ends (bounded)
  state.compiling.append((id(ast), opts is not None))
  if len(state.compiling) > 64: del state.compiling[0]

def _opts_given(ast: UOp) -> bool | None:
  """Whether get_program's caller gave the opts for `ast`: None when the compile has no mark (the capture started
  inside it)."""
  while state.compiling:
    aid, given = state.compiling.pop()
    if aid == id(ast): return given
  return None

def _skip(key: str, what: str) -> None:
  try: _db().add_skip(state.run_id, key)
  except Exception as e: _error(f"the skip of {what}", e)

def on_compiled(ast: UOp, p: Any, renderer: Any) -> None:
  given = _opts_given(ast)
  if not replayable(renderer):
    return _skip(f"{p.renderer} (cannot be rebuilt from its identity)", f"kernel {getattr(p, 'name', '?')}")
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
def on_tensor_graph(sink: UOp) -> None: state.pending = [sink]

def on_kernel_graph(ksink: UOp) -> None:
  if not state.pending: return
  sink = state.pending.pop()
  try:
    from tinygrad.engine.schedule import order_kernels
    body = {"graph": pyrender(sink), "flags": [list(f) for f in schedule_flags()],
            "kernels": [pyrender(k.arg) for k in order_kernels(ksink)]}
    if _db().add_record(state.run_id, "schedule", body): state.written["schedule"] += 1
  except Exception as e: _error("a schedule", e)

CALLBACKS: dict[str, Callable[..., None]] = {"compiling": on_compiling, "compiled": on_compiled,
                                             "tensor_graph": on_tensor_graph, "kernel_graph": on_kernel_graph}

_outer: list[_State] = []  # what each nested start() (a test inside a captured run) interrupted, innermost last

def _sync() -> None:
  """The callbacks are registered exactly while the current session records (started, not stopped, not paused)."""
  on = state.live and state.pauses == 0
  for name, fn in CALLBACKS.items(): (hooks.register if on else hooks.unregister)(name, fn)

def active() -> bool:
  """A session is recording now (started and not paused)."""
  return state.live and state.pauses == 0

def start(path: str | None = None, run_id: str | None = None, targets: list[str] | None = None) -> str:
  """Record from now on into `path` (default: REPLAY_DB or the default path) under `run_id` (default: REPLAY_RUN, else
  a new id exported to REPLAY_RUN so child processes file under the same run). Returns the run id. A session already
  recording is suspended until the matching stop()."""
  global state
  _outer.append(state)
  state = new = _State()
  new.live = True
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
  _sync()
  return new.run_id

def stop() -> None:
  """End the current session; the one it suspended goes on as it was (recording, or paused)."""
  global state
  state.live = False
  if state.db is not None and state.pid == os.getpid(): state.db.close()
  state.db, state.pending = None, []
  if state.saved_run is not None:
    env, REPLAY_RUN.value = state.saved_run
    if env is None: os.environ.pop("REPLAY_RUN", None)
    else: os.environ["REPLAY_RUN"] = env
    state.saved_run = None
  if _outer: state = _outer.pop()
  _sync()

def pause() -> _State:
  """Record nothing in the current session until the matching resume(): for whatever patches the compiler (a program it
  makes is no record of the code) and for a diff, which compiles every record again. Pauses nest; a session started
  while paused records, and the paused one goes on paused when it stops. Costs nothing per program: the callbacks are
  unregistered. Returns the session paused, for resume()."""
  state.pauses += 1
  _sync()
  return state

def resume(session: _State | None = None) -> None:
  """End one pause of `session` (what pause() returned; default the current session)."""
  s = state if session is None else session
  if s.pauses == 0: raise RuntimeError("replay capture: resume() without a pause() of that session")
  s.pauses -= 1
  if s is state: _sync()

@contextlib.contextmanager
def paused() -> Iterator[None]:
  """Record nothing inside the block, then go on as before."""
  session = pause()
  try: yield
  finally: resume(session)

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
  if CAPTURE_PROCESS_REPLAY.value and not state.live: start()
  return sys.modules[__name__]
