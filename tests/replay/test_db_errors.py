"""A replay database that cannot be read (not sqlite, truncated, corrupt, another program's sqlite file) is one line on
stderr and exit 2, for every subcommand that reads one; a record that cannot be read is a "bad record" outcome, and the
run goes on."""
import os, sqlite3
import pytest
from replay.__main__ import main
from replay.db import canonical
from replay.diff import diff
from tests.replay.helpers import capture_programs, copy_db

@pytest.fixture(scope="module")
def base(tmp_path_factory):
  db = tmp_path_factory.mktemp("dberr") / "base.db"
  capture_programs(db)
  return copy_db(db, db.parent / "whole.db")

def _cli(capsys, *argv):
  try: rc = main(list(argv))
  except SystemExit as e: rc = e.code
  return rc, capsys.readouterr()

def _one_line_error(capsys, path, *argv):
  for cmd in (("diff", "--db", str(path), *argv), ("runs", "--db", str(path))):
    rc, out = _cli(capsys, *cmd)
    err = out.err.strip()
    assert rc == 2 and "Traceback" not in out.err and "\n" not in err and str(path) in err, (cmd, rc, out.err[-2000:])
  return err

def _corrupt(base, tmp_path, name, edit):
  p = tmp_path / name
  data = bytearray(base.read_bytes())
  p.write_bytes(bytes(edit(data)))
  return p


def test_unreadable_databases_are_one_line_and_exit_2(base, tmp_path, capsys):
  text = tmp_path / "notes.txt"
  text.write_text("this is not a database\n" * 200)
  assert "not a replay database" in _one_line_error(capsys, text)
  # truncated mid-file (a download cut short), and pages overwritten with garbage
  half = _corrupt(base, tmp_path, "half.db", lambda d: d[:len(d) // 2])
  _one_line_error(capsys, half)
  garbage = _corrupt(base, tmp_path, "garbage.db", lambda d: d[:4096] + bytes((i * 7) % 251 for i in range(len(d) - 4096)))
  _one_line_error(capsys, garbage)
  header = _corrupt(base, tmp_path, "header.db", lambda d: d[:100].replace(b"SQLite format 3", b"SQLite format 9") + d[100:])
  _one_line_error(capsys, header)
  empty = tmp_path / "empty.db"
  empty.write_bytes(b"")
  assert "not a replay database" in _one_line_error(capsys, empty)
  # another program's sqlite file: refused, and left as it was (no replay tables created in it)
  other = tmp_path / "other.db"
  conn = sqlite3.connect(other)
  conn.execute("CREATE TABLE notes (id INTEGER, text TEXT)")
  conn.commit()
  conn.close()
  before = other.read_bytes()
  assert "not a replay database" in _one_line_error(capsys, other)
  assert other.read_bytes() == before and not os.path.exists(str(other) + "-wal")


def test_malformed_rows_are_bad_records_or_one_line_errors(base, tmp_path, capsys):
  copy = copy_db(base, tmp_path / "rows.db")
  conn = sqlite3.connect(copy)
  (good,) = conn.execute("SELECT body FROM records WHERE kind='kernel' ORDER BY id LIMIT 1").fetchone()
  # a body that is a BLOB, NULL, a number; a kind that is not text; each is one bad record, the rest is diffed
  conn.execute("CREATE TABLE r2 AS SELECT * FROM records")
  conn.execute("DROP TABLE records")
  conn.execute("CREATE TABLE records (id INTEGER PRIMARY KEY, run_id TEXT, kind TEXT, input_hash TEXT, body)")
  conn.execute("INSERT INTO records SELECT * FROM r2")
  conn.execute("DROP TABLE r2")
  bad = [conn.execute("INSERT INTO records (run_id, kind, input_hash, body) VALUES ('base', ?, ?, ?)", row).lastrowid
         for row in (("kernel", "0" * 64, good.encode()), ("kernel", "0" * 64, None), ("kernel", None, 12),
                     (7, "0" * 64, canonical({})))]
  conn.commit()
  conn.close()
  rep = diff(str(copy), progress=None)
  got = {o.rid: o for o in rep.outcomes}
  assert len(rep.outcomes) == rep.total and all(got[r].cls == "bad record" for r in bad), [got[r] for r in bad if r in got]
  assert sum(o.cls == "unchanged" for o in rep.outcomes) == rep.total - len(bad)
  # a run row whose start time is not a number: the database cannot be read, one line, exit 2
  conn = sqlite3.connect(copy)
  conn.execute("UPDATE runs SET started='yesterday'")
  conn.commit()
  conn.close()
  assert "runs" in _one_line_error(capsys, copy)

def test_workers_creating_one_new_database_at_once_all_open_it(tmp_path):
  # a capture's xdist workers open one new file at the same moment: each CREATE used to commit on its own, so a worker
  # could see some of the tables, call the file "not a replay database" and lose its records (8 at a time over 100 new
  # files: 25-45 refused); the schema is one transaction now, and an open that meets the switch to WAL is tried again.
  # The processes fork from a fresh interpreter, not from this test worker (helpers.open_new_at_once)
  import json, subprocess, sys
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  out = subprocess.run([sys.executable, "-m", "tests.replay.helpers", str(tmp_path), "100", "8"], cwd=root,
                       capture_output=True, text=True, timeout=600)
  assert out.returncode == 0, out.stderr[-2000:]
  errors = json.loads(out.stdout.splitlines()[-1])
  assert not errors, errors[:3]
  conn = sqlite3.connect(str(tmp_path / "new0.db"))
  assert {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")} >= \
    {"meta", "runs", "records", "capture_skips", "capture_errors"}

def test_a_capture_into_a_file_that_is_not_a_new_or_replay_database_refuses_it_and_leaves_it_as_it_was(tmp_path):
  # the capture opens its database in one write transaction (check, then schema): a file that is not sqlite, or
  # another program's sqlite file, is refused with DBError and left byte for byte as it was (no table added, its
  # journal mode not switched to WAL), and nothing of it is run
  from replay.db import DB, DBError
  text = tmp_path / "notes.db"
  text.write_bytes(b"SQLite format 3\x00 but not really; __import__('os').system('touch pwned')\n" * 20)
  other = tmp_path / "other.db"
  conn = sqlite3.connect(str(other))
  conn.execute("CREATE TABLE meta (k TEXT)")
  conn.execute("CREATE TABLE runs (x INTEGER)")
  conn.commit()
  conn.close()
  for path in (text, other):
    before = path.read_bytes()
    with pytest.raises(DBError) as e: DB(str(path), create=True)
    assert str(path) in str(e.value) and "\n" not in str(e.value)
    assert path.read_bytes() == before
  assert not (tmp_path / "pwned").exists() and not (tmp_path / "other.db-wal").exists()
  conn = sqlite3.connect(str(other))
  assert conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal"
  assert {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")} == {"meta", "runs"}
