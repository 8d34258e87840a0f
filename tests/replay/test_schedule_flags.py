"""Schedule records carry the flags that shape schedules (ALLREDUCE): a capture made under a forced variant diffs
unchanged on the same code, and a record's flags are inputs (hashed, checked, refused when not scheduler flags)."""
import json, sqlite3
import numpy as np
from tinygrad import Tensor
from tinygrad.helpers import Context, schedule_flags
from replay.db import input_hash, canonical
from replay.diff import diff
from tests.replay.helpers import capturing, copy_db

def _allreduce():
  x = np.arange(4 * 70000, dtype=np.float32).reshape(4, 70000) / 1e5
  t = Tensor(x).shard(("CPU", "CPU:1"), 0).realize()
  return t.sum(0).contiguous().realize()

def _capture(db, variants):
  with capturing(db, "base"):
    for v in variants:
      with Context(ALLREDUCE=v): _allreduce()

def _schedules(db):
  conn = sqlite3.connect(db)
  ret = [(rid, json.loads(b)) for rid, b in conn.execute("SELECT id, body FROM records WHERE kind='schedule'")]
  conn.close()
  return ret

def _sched_outcomes(db):
  rep = diff(str(db), progress=None)
  return {o.rid: o for o in rep.outcomes if o.kind == "schedule"}

def test_a_forced_allreduce_is_recorded_and_replayed_under_it(tmp_path):
  db = tmp_path / "r.db"
  _capture(db, ["naive", "ring"])
  recs = _schedules(db)
  # the two variants schedule the same graph differently: two records, told apart by their flags
  assert all(b["flags"] == [["ALLREDUCE", "naive"]] or b["flags"] == [["ALLREDUCE", "ring"]] for _, b in recs)
  flagged = {v: _the_allreduce(recs, v)[1] for v in ("naive", "ring")}
  assert len(flagged["naive"]["kernels"]) != len(flagged["ring"]["kernels"])
  # the diff runs under the default (naive for two devices): without the recorded flag the ring record would change
  assert dict(schedule_flags())["ALLREDUCE"] == ""
  outs = _sched_outcomes(db)
  assert outs and all(o.cls == "unchanged" for o in outs.values()), [(o.cls, o.detail) for o in outs.values()]

def _the_allreduce(recs, variant):
  """The record of the allreduce (the sum) captured under ALLREDUCE=variant: the most kernels of its records."""
  return max(((rid, b) for rid, b in recs if b["flags"] == [["ALLREDUCE", variant]]), key=lambda r: len(r[1]["kernels"]))

def _rewrite(db, tmp_path, name, change):
  copy = copy_db(db, tmp_path / name)
  conn = sqlite3.connect(copy)
  rid, body = _the_allreduce(_schedules(copy), "ring")
  b = change(dict(body))
  conn.execute("UPDATE records SET input_hash=?, body=? WHERE id=?", (input_hash("schedule", b), canonical(b), rid))
  conn.commit(); conn.close()
  return copy, rid

def test_a_schedule_records_flags_are_checked(tmp_path):
  db = tmp_path / "r.db"
  _capture(db, ["ring"])
  cases = {"codegen flag": (lambda b: dict(b, flags=[["CPU_LLVM", 1]]), "bad record", "does not change how a graph"),
           "unknown flag": (lambda b: dict(b, flags=[["NO_SUCH_FLAG", 1]]), "incompatible", "does not exist now"),
           "bad value": (lambda b: dict(b, flags=[["ALLREDUCE", "tree"]]), "incompatible", "'tree' is not allowed"),
           "twice": (lambda b: dict(b, flags=[["ALLREDUCE", "ring"], ["ALLREDUCE", "naive"]]), "bad record", "twice"),
           "not a pair": (lambda b: dict(b, flags=[["ALLREDUCE"]]), "bad record", "is not [name, int or str]"),
           "nested value": (lambda b: dict(b, flags=[["ALLREDUCE", [["ring"]]]]), "bad record", "is not [name, int or str]"),
           "code as value": (lambda b: dict(b, flags=[["ALLREDUCE", "__import__('os').system('id')"]]), "incompatible",
                             "is not allowed"),
           "not a list": (lambda b: dict(b, flags="ALLREDUCE=ring"), "bad record", "field 'flags' is a str")}
  for name, (change, cls, text) in cases.items():
    copy, rid = _rewrite(db, tmp_path, f"{name.replace(' ', '_')}.db", change)
    o = _sched_outcomes(copy)[rid]
    assert o.cls == cls and text in o.detail, (name, o.cls, o.detail)

def test_removing_a_records_flags_is_tampering_and_an_old_record_without_them_is_read_at_the_defaults(tmp_path):
  db = tmp_path / "r.db"
  _capture(db, ["ring"])
  # the flags are hashed: dropping them from a record but keeping its hash is caught
  copy = copy_db(db, tmp_path / "t.db")
  conn = sqlite3.connect(copy)
  rid, body = _the_allreduce(_schedules(copy), "ring")
  conn.execute("UPDATE records SET body=? WHERE id=?", (canonical({k: v for k, v in body.items() if k != "flags"}), rid))
  conn.commit(); conn.close()
  o = _sched_outcomes(copy)[rid]
  assert o.cls == "bad record" and "changed after capture" in o.detail
  # a record as an older capture wrote it (no flags, hashed without them) is scheduled with ALLREDUCE at its default:
  # the ring's kernels are not what naive makes, and the change says why it may be so
  copy, rid = _rewrite(db, tmp_path, "old.db", lambda b: {k: v for k, v in b.items() if k != "flags"})
  o = _sched_outcomes(copy)[rid]
  assert o.cls == "changed" and "captured before schedule records carried their flags" in o.detail
