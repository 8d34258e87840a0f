"""A replay database is untrusted data (a CI artifact, a colleague's file): the diff never compiles, loads or runs a text a
record carries. The old side's outputs come from interpreting the recorded linear program (parsed exec-free)."""
import json, sqlite3
import pytest
from replay.db import DB, canonical
from replay.diff import diff
from tests.replay.helpers import capture_programs, copy_db
from tests.replay.untrusted import watching

@pytest.fixture(scope="module")
def base(tmp_path_factory):
  db = tmp_path_factory.mktemp("untrusted") / "base.db"
  capture_programs(db)
  return db

def _kernels(db) -> list[tuple[int, dict]]:
  d = DB(str(db), create=False)
  ret = [(rid, json.loads(body)) for rid, _, _, body in d.rows("base", "kernel")]
  d.close()
  return ret


@pytest.mark.xfail(strict=True, reason="issue 22: the diff compiles and dlopens a record's src")
def test_constructor_payload_in_a_recorded_source_runs_nothing(base, tmp_path):
  copy = copy_db(base, tmp_path / "evil.db")
  sentinel = tmp_path / "pwned"
  payload = f'__attribute__((constructor)) static void p(void){{system("id > {sentinel}");}}\n'
  conn = sqlite3.connect(copy)
  # NOTE: src is an output field: the input hash does not cover it, so the records stay valid
  for rid, body in _kernels(base): conn.execute("UPDATE records SET body=? WHERE id=?",
                                                (canonical(dict(body, src=payload + body["src"])), rid))
  conn.commit()
  conn.close()
  with watching(str(copy), markers={str(sentinel)}) as w: rep = diff(str(copy), progress=None)
  assert w.events == []
  assert not sentinel.exists(), sentinel.read_text()
  # the old sources differ from the new ones only by the payload: every kernel is reported, none is lost
  assert len(rep.outcomes) == rep.total and {o.cls for o in rep.outcomes if o.kind == "kernel"} == {"changed"}
