"""The .test_durations coverage check of tests/conftest.py: shards refuse a stale file; the refresh run
(--store-durations), the unsplit suite and partial runs do not."""
import json, pathlib
from tests.conftest import _coverage_error

class FakeConfig:
  def __init__(self, root: pathlib.Path, args: list[str], **opts):
    self.rootpath, self.args = root, args
    self.opts = {"durations_path": str(root / ".test_durations"), "splits": None, "store_durations": False, "-k": "",
                 "-m": "", **opts}
  def getoption(self, name, default=None): return self.opts.get(name, default)

def _setup(tmp_path: pathlib.Path, covered: int, total: int) -> list[str]:
  ids = [f"tests/test_x.py::test_{i}" for i in range(total)]
  (tmp_path / ".test_durations").write_text(json.dumps({i: 1.0 for i in ids[:covered]}))
  return ids

def test_a_shard_refuses_a_file_under_90_percent(tmp_path):
  ids = _setup(tmp_path, 50, 100)
  err = _coverage_error(FakeConfig(tmp_path, [str(tmp_path)], splits=2), ids)
  assert err is not None and "covers 50 of the 100 collected tests (50%" in err and "make durations" in err
  # the whole suite unsplit does not depend on the file
  assert _coverage_error(FakeConfig(tmp_path, [str(tmp_path)]), ids) is None

def test_a_fresh_file_a_partial_run_and_the_refresh_itself_pass(tmp_path):
  ids = _setup(tmp_path, 95, 100)
  assert _coverage_error(FakeConfig(tmp_path, [str(tmp_path)], splits=2), ids) is None
  ids = _setup(tmp_path, 10, 100)
  assert _coverage_error(FakeConfig(tmp_path, [str(tmp_path / "tests" / "test_x.py")]), ids) is None
  assert _coverage_error(FakeConfig(tmp_path, [str(tmp_path)], **{"-k": "foo"}), ids) is None
  assert _coverage_error(FakeConfig(tmp_path, [str(tmp_path)], splits=2, store_durations=True), ids) is None
