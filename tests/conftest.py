import os, sys, types, pytest
from hypothesis import settings, HealthCheck

# the `ci` profile: derandomized and bounded, so a run is reproducible and fits the suite's time budget
settings.register_profile("ci", derandomize=True, deadline=None, max_examples=200, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("dev", deadline=None, max_examples=100)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

def pytest_collection_modifyitems(config, items):
  check_durations_coverage(config, items)
  # NOTE: slow sweeps have make targets of their own (-m slow); the default suite skips them with the reason
  if "slow" not in (config.getoption("-m") or ""):
    slow = pytest.mark.skip(reason="slow: runs with -m slow (make test-nv, make test-semantics-sweep, make test-deep-chains, make test-llvm-matmul, make test-symbolic, make test-llm-slow, make test-multi, make test-models-slow, make test-ops-targets)")
    for it in items:
      if "slow" in it.keywords: it.add_marker(slow)
  # NOTE: GPU tests run only where a real GPU answers; everywhere else they skip with the reason
  from tinygrad.helpers import getenv
  if getenv("RUN_GPU_TESTS", 0): return
  skip = pytest.mark.skip(reason="needs a real GPU (set RUN_GPU_TESTS=1 on a GPU host)")
  for it in items:
    if "gpu" in it.keywords: it.add_marker(skip)

# ---- .test_durations stays fresh (pytest-split shards by it; docs/testing.md says how to refresh it) ----
# NOTE: a stale file gives shards of very different lengths. A shard refuses to start when the file covers under 90%
# of the collected tests; a shard fails when a test that took over 5 s is missing from it.
DURATIONS_MIN_COVERAGE, DURATIONS_SLOW_S = 0.9, 5.0
REFRESH_HINT = "refresh it with `make durations` (docs/testing.md) and commit .test_durations"

def _stored_durations(config) -> dict | None:
  import json
  path = config.getoption("durations_path", None)
  if path is None or not os.path.exists(path): return None
  with open(path) as f: return json.load(f)

def _is_shard(config) -> bool: return bool(config.getoption("splits", None))

def _coverage_error(config, nodeids: list[str]) -> str | None:
  # a run that stores durations (make durations) is the refresh itself
  if config.getoption("store_durations", False): return None
  # NOTE: only shards are split by the file; a whole-suite run (make test) does not depend on it
  if not _is_shard(config) or (stored := _stored_durations(config)) is None: return None
  covered = sum(n in stored for n in nodeids)
  if not nodeids or covered >= DURATIONS_MIN_COVERAGE * len(nodeids): return None
  return (f".test_durations covers {covered} of the {len(nodeids)} collected tests ({covered / len(nodeids):.0%}, at least "
          f"{DURATIONS_MIN_COVERAGE:.0%} needed): {REFRESH_HINT}")

def check_durations_coverage(config, items) -> None:
  # NOTE: under pytest-xdist the workers collect; the controller checks the ids they report (below)
  if hasattr(config, "workerinput") or (err := _coverage_error(config, [it.nodeid for it in items])) is None: return
  raise pytest.UsageError(err)

_xdist_checked = [False]
@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
  if _xdist_checked[0]: return
  _xdist_checked[0] = True
  if (err := _coverage_error(node.config, ids)) is not None: pytest.exit(err, returncode=pytest.ExitCode.USAGE_ERROR)

def pytest_sessionfinish(session, exitstatus):
  config = session.config
  if hasattr(config, "workerinput") or not _is_shard(config) or (stored := _stored_durations(config)) is None: return
  if (tr := config.pluginmanager.get_plugin("terminalreporter")) is None: return
  took: dict[str, float] = {}
  for reports in tr.stats.values():
    for r in reports:
      if isinstance(r, pytest.TestReport): took[r.nodeid] = took.get(r.nodeid, 0.0) + r.duration
  missing = sorted((t, n) for n, t in took.items() if t > DURATIONS_SLOW_S and n not in stored)
  if not missing: return
  tr.write_line(f"\n.test_durations lacks {len(missing)} test(s) that took over {DURATIONS_SLOW_S:.0f} s in this shard: "
                f"{REFRESH_HINT}", red=True)
  for t, n in reversed(missing): tr.write_line(f"  {t:7.1f}s {n}")
  session.exitstatus = pytest.ExitCode.TESTS_FAILED

# ---- a test that patches tinygrad pauses the replay capture (docs/replay.md) ----
# NOTE: a program compiled while a test's patch is in is no record of the code: a same-code diff would show the patch.
# The tensor front end is left out: what it makes (the tensor graph) is a schedule record's input, whatever made it.
FRONT_END = ("tinygrad.tensor", "tinygrad.nn", "tinygrad.gradient")

def _in_compiler(module: str) -> bool:
  return module.split(".")[0] == "tinygrad" and not any(module == f or module.startswith(f + ".") for f in FRONT_END)

def _owner(obj: object) -> str:
  """The module whose code `obj` (what a patch changes) belongs to; a dict is found among tinygrad's module globals and
  class attributes."""
  if isinstance(obj, str): return obj.rpartition(".")[0]
  if isinstance(obj, types.ModuleType): return obj.__name__
  if isinstance(obj, type): return obj.__module__
  if isinstance(obj, dict):
    for name, mod in list(sys.modules.items()):
      if name.split(".")[0] != "tinygrad" or mod is None: continue
      for v in list(vars(mod).values()):
        if v is obj or (isinstance(v, type) and v.__module__ == name and any(a is obj for a in vars(v).values())):
          return name
    return ""
  return type(obj).__module__

class CompilerPatch(pytest.MonkeyPatch):
  """pytest's monkeypatch that pauses the replay capture from its first patch of tinygrad's compiler until undone."""
  _paused: object = None  # the capture session paused (replay.capture.pause), while a patch is in
  def _note(self, target: object) -> None:
    if self._paused is not None or not _in_compiler(_owner(target)): return
    from replay import capture
    self._paused = capture.pause()
  def setattr(self, target, *args, **kw):  # type: ignore[override]
    self._note(target)
    return super().setattr(target, *args, **kw)
  def delattr(self, target, *args, **kw):  # type: ignore[override]
    self._note(target)
    return super().delattr(target, *args, **kw)
  def setitem(self, dic, *args, **kw):  # type: ignore[override]
    self._note(dic)
    return super().setitem(dic, *args, **kw)
  def delitem(self, dic, *args, **kw):  # type: ignore[override]
    self._note(dic)
    return super().delitem(dic, *args, **kw)
  def undo(self) -> None:
    super().undo()
    if self._paused is None: return
    from replay import capture
    capture.resume(self._paused)  # type: ignore[arg-type]
    self._paused = None

@pytest.fixture
def monkeypatch():
  mp = CompilerPatch()
  yield mp
  mp.undo()
