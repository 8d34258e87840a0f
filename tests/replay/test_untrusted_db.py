"""A replay database is untrusted data (a CI artifact, a colleague's file): the diff never compiles, loads or runs a text a
record carries. The old side's outputs come from interpreting the recorded linear program (parsed exec-free)."""
import json, sqlite3
import pytest
from tinygrad.uop import Ops
from tinygrad.renderer.cstyle import CRenderer
from spec.roundtrip import eval_pyrender
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
  # the old side is the recorded linear program interpreted, the new side the new source run natively: they agree
  assert all(o.outputs == "agree" and "old: its recorded linear program on PYTHON; new: natively on CPU" in o.detail
             for o in rep.outcomes if o.kind == "kernel"), [o.detail for o in rep.outcomes]
  assert w.compiles and not set(w.compiles) & w.texts

def test_planted_renderer_bug_is_reported_with_differing_outputs(base, monkeypatch):
  # `<` printed as `<=` by the C renderer: the linear programs are unchanged, so only running the new source shows it
  monkeypatch.setitem(CRenderer.code_for_op, Ops.CMPLT, lambda a, b, dt: f"({a}<={b})")
  expected = {rid for rid, b in _kernels(base) if any(u.op is Ops.CMPLT for u in eval_pyrender(b["uops"]))}
  with watching(str(base)) as w: rep = diff(str(base), progress=None)
  assert w.events == [] and w.compiles and not set(w.compiles) & w.texts
  changed = {o.rid: o for o in rep.outcomes if o.cls == "changed"}
  assert expected and set(changed) == expected, rep.summary()
  assert {o.cls for o in rep.outcomes if o.kind == "kernel"} == {"changed", "unchanged"}
  assert all("a renderer change" in o.detail and o.outputs in ("differ", "agree") for o in changed.values())
  differ = [o for o in changed.values() if o.outputs == "differ"]
  assert differ and all("natively on CPU" in o.detail and "buffer data" in o.detail for o in differ), rep.summary()
