"""The replay database: sqlite in WAL mode, one row per distinct input per run, stable text only (JSON bodies holding
pyrender text), never pickle.

  meta(key, value)                         schema_version
  runs(run_id, git_commit, started, argv, targets)
  records(run_id, kind, input_hash, body)  kind is "kernel" or "schedule"; UNIQUE(run_id, kind, input_hash)
  capture_errors(run_id, what, error)      something the capture could not record (a --targets render that failed)
  capture_skips(run_id, renderer, count)   programs not recorded: their renderer cannot be rebuilt from its identity
                                           (a test double, a renderer whose state is not all in its identity)

A record is written and committed the moment it is captured (autocommit; many processes, e.g. pytest-xdist workers,
write at once: WAL plus a long busy timeout), so a killed worker loses nothing it recorded. `input_hash` is the sha256
of the record's inputs as canonical JSON; a reader recomputes it, so a record edited by hand is reported as tampered.
Reading never runs code from a record: bodies are JSON, graphs are pyrender text read back by spec.eval_pyrender.
"""
from __future__ import annotations
import hashlib, json, os, sqlite3, subprocess, time, urllib.parse, uuid
from dataclasses import dataclass
from typing import Any
from tinygrad.helpers import REPLAY_DB
from tinygrad.codegen.record import KernelRecord, RecordFormatError

SCHEMA_VERSION = 1
KINDS = ("kernel", "schedule")
# the inputs of each kind of record: what the input hash covers (the rest of a body is outputs)
INPUT_FIELDS: dict[str, tuple[str, ...]] = {"kernel": KernelRecord.INPUTS, "schedule": ("graph", "flags")}
# every field a schedule body must have, with its JSON type (a kernel body is a KernelRecord, which checks its own)
SCHEDULE_FIELDS: dict[str, type] = {"graph": str, "kernels": list}
# NOTE: fields a schedule of an older capture may lack: the input hash covers one when present (so removing it is
# tampering, caught), and a schedule captured before it existed is read without it
SCHEDULE_OPTIONAL: dict[str, type] = {"flags": list}

class DBError(RuntimeError):
  """The replay database cannot be read: not an sqlite file, truncated or corrupt, another program's sqlite file, or one
  of another schema version. One line naming the file and what is wrong."""

class RecordError(ValueError):
  """A record that cannot be read: truncated or malformed JSON, a missing or mistyped field, or an input hash that does
  not match its body (tampered). Names the record."""

def default_path() -> str:
  """REPLAY_DB, else ~/.cache/tinygrad/replay.db ($XDG_CACHE_HOME if set): capture and diff use the same one."""
  return REPLAY_DB.value or os.path.join(os.path.expanduser(os.environ.get("XDG_CACHE_HOME", "~/.cache")), "tinygrad",
                                         "replay.db")

def canonical(x: Any) -> str: return json.dumps(x, sort_keys=True, separators=(",", ":"), allow_nan=False)

def input_hash(kind: str, body: dict[str, Any]) -> str:
  fields = [k for k in INPUT_FIELDS[kind] if k in body or not (kind == "schedule" and k in SCHEDULE_OPTIONAL)]
  return hashlib.sha256(canonical([kind] + [body[k] for k in fields]).encode()).hexdigest()

def git_commit(cwd: str | None = None) -> str:
  try:
    out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=30)
  except (OSError, subprocess.TimeoutExpired): return "unknown"
  return out.stdout.strip() if out.returncode == 0 else "unknown"

def new_run_id() -> str: return time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:8]

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (run_id TEXT PRIMARY KEY, git_commit TEXT NOT NULL, started REAL NOT NULL,
                                 argv TEXT NOT NULL, targets TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS records (id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, kind TEXT NOT NULL,
                                    input_hash TEXT NOT NULL, body TEXT NOT NULL, UNIQUE(run_id, kind, input_hash));
CREATE TABLE IF NOT EXISTS capture_skips (run_id TEXT NOT NULL, renderer TEXT NOT NULL, count INTEGER NOT NULL,
                                          UNIQUE(run_id, renderer));
CREATE TABLE IF NOT EXISTS capture_errors (id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, what TEXT NOT NULL,
                                           error TEXT NOT NULL);
"""

TABLES = ("meta", "runs", "records", "capture_skips", "capture_errors")

class DB:
  """One connection to a replay database: created with its schema if new (`create`, the capture), else opened read-only
  (the diff, `runs`). Anything that is not a replay database of this schema version is refused with DBError, and so is
  every read that sqlite cannot do (a truncated or corrupt file)."""
  def __init__(self, path: str, create: bool = True):
    self.path = path
    if not create and not os.path.exists(path):
      raise FileNotFoundError(f"replay database {path} does not exist: capture first (python -m replay capture -- "
                              "<command>), or name another with --db / REPLAY_DB")
    # NOTE: workers opening one new file at once: switching it to WAL can meet another's lock, and sqlite then says
    # "database is locked" at once, whatever the busy timeout (1-3 of 800 opens, 8 at a time): open again
    for attempt in range(5):
      try:
        self._open(create)
        return
      except sqlite3.OperationalError as e:
        if hasattr(self, "conn"): self.conn.close()
        if "locked" not in str(e) or attempt == 4: raise self.error(e) from None
        time.sleep(0.2 * (attempt + 1))
      except sqlite3.Error as e: raise self.error(e) from None

  def error(self, e: BaseException, what: str = "") -> DBError:
    msg = " ".join(str(e).split())
    return DBError(f"replay database {self.path} cannot be read{what}: {msg} (not a replay database, or truncated or "
                   "corrupt: capture again)")

  def _open(self, create: bool) -> None:
    if create:
      os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
      # NOTE: isolation_level=None is autocommit: every INSERT is its own committed transaction
      self.conn = sqlite3.connect(self.path, timeout=120, isolation_level=None, check_same_thread=False)
    else:
      # NOTE: read-only: a diff never writes, and never adds replay tables to a file that turns out to be another's
      uri = f"file:{urllib.parse.quote(os.path.abspath(self.path))}?mode=ro"
      self.conn = sqlite3.connect(uri, uri=True, timeout=120, isolation_level=None, check_same_thread=False)
    self.conn.execute("PRAGMA busy_timeout=120000")
    # NOTE: a capture's workers open one new file at once: the check and the schema are one write transaction, so no
    # opener sees another's tables half made (executescript committed each CREATE on its own: a worker saw meta, runs
    # and records but not the rest, refused the file and lost its records)
    if create: self.conn.execute("BEGIN IMMEDIATE")
    try:
      tables = {str(r[0]) for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
      if (tables or not create) and not set(TABLES) <= tables:
        raise DBError(f"{self.path} is not a replay database: it has the table(s) {sorted(tables)[:8]}, a replay "
                      f"database has {list(TABLES)}")
      if create:
        for stmt in (x.strip() for x in SCHEMA.split(";")):
          if stmt: self.conn.execute(stmt)
        self.conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        self.conn.execute("COMMIT")
    except BaseException:
      if self.conn.in_transaction: self.conn.execute("ROLLBACK")
      raise
    if create:
      self.conn.execute("PRAGMA journal_mode=WAL")
      # NOTE: in WAL mode, synchronous=NORMAL keeps every commit of a process that is killed (it is in the WAL file, in
      # the OS's cache); only an OS crash or power loss can lose the latest ones. FULL would fsync each record: about
      # 6 ms a record, most of the capture's cost
      self.conn.execute("PRAGMA synchronous=NORMAL")
    got = self.conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    if got is None or str(got[0]) != str(SCHEMA_VERSION):
      raise DBError(f"replay database {self.path} has schema version {None if got is None else got[0]}; this replay "
                    f"reads version {SCHEMA_VERSION}. Capture again into a new database (--db)")

  def _read(self, q: str, args: tuple[Any, ...] | list[Any] = ()) -> list[Any]:
    try: return self.conn.execute(q, args).fetchall()
    except sqlite3.Error as e: raise self.error(e) from None

  def close(self) -> None: self.conn.close()

  def add_run(self, run_id: str, commit: str, argv: list[str], targets: list[str]) -> None:
    self.conn.execute("INSERT OR IGNORE INTO runs VALUES (?, ?, ?, ?, ?)",
                      (run_id, commit, time.time(), canonical(argv), canonical(targets)))

  def add_record(self, run_id: str, kind: str, body: dict[str, Any]) -> bool:
    """Store one record (committed at once). False when the run has a record of the same input already."""
    args = (run_id, kind, input_hash(kind, body), canonical(body))
    # NOTE: under heavy load a writer was seen to get "database is locked" despite the busy timeout: try again
    for attempt in range(5):
      try:
        cur = self.conn.execute("INSERT OR IGNORE INTO records (run_id, kind, input_hash, body) VALUES (?, ?, ?, ?)",
                                args)
        return cur.rowcount == 1
      except sqlite3.OperationalError as e:
        if "locked" not in str(e) or attempt == 4: raise
        time.sleep(0.5 * (attempt + 1))
    return False

  def add_capture_error(self, run_id: str, what: str, error: str) -> None:
    self.conn.execute("INSERT INTO capture_errors (run_id, what, error) VALUES (?, ?, ?)", (run_id, what, error))

  def add_skip(self, run_id: str, renderer: str) -> None:
    self.conn.execute("INSERT INTO capture_skips VALUES (?, ?, 1) ON CONFLICT(run_id, renderer) DO UPDATE SET "
                      "count = count + 1", (run_id, renderer))

  def capture_skips(self, run_id: str) -> dict[str, int]:
    rows = self._read("SELECT renderer, count FROM capture_skips WHERE run_id=? ORDER BY renderer", (run_id,))
    if (bad := next((r for r in rows if not isinstance(r[1], int)), None)) is not None:
      raise DBError(f"replay database {self.path}: table capture_skips: the count of {str(bad[0])[:80]!r} is "
                    f"{bad[1]!r}, not an integer")
    return {str(r[0]): int(r[1]) for r in rows}

  def runs(self) -> list[Run]:
    rows = self._read("SELECT run_id, git_commit, started, argv, targets FROM runs ORDER BY started, run_id")
    for r in rows:
      if not (isinstance(r[0], str) and isinstance(r[1], str) and isinstance(r[2], (int, float)) and
              isinstance(r[3], str) and isinstance(r[4], str)):
        raise DBError(f"replay database {self.path}: table runs: the row of run {str(r[0])[:80]!r} does not hold "
                      f"(text run id, text commit, numeric start time, text argv, text targets): {r!r}"[:400])
    return [Run(r[0], r[1], float(r[2]), r[3], r[4]) for r in rows]

  def latest_run(self) -> Run:
    runs = self.runs()
    if not runs: raise LookupError(f"replay database {self.path} holds no run: capture first")
    return runs[-1]

  def count(self, run_id: str, kind: str | None = None) -> int:
    if kind is None: return int(self._read("SELECT COUNT(*) FROM records WHERE run_id=?", (run_id,))[0][0])
    return int(self._read("SELECT COUNT(*) FROM records WHERE run_id=? AND kind=?", (run_id, kind))[0][0])

  def capture_errors(self, run_id: str) -> list[tuple[str, str]]:
    return [(str(r[0]), str(r[1])) for r in self._read("SELECT what, error FROM capture_errors WHERE run_id=? ORDER BY "
                                                       "id", (run_id,))]

  def rows(self, run_id: str, kind: str | None = None) -> list[tuple[int, Any, Any, Any]]:
    """(id, kind, input_hash, body) of a run in capture order, as stored: `parse_record` checks their types and parses
    the body."""
    q, args = "SELECT id, kind, input_hash, body FROM records WHERE run_id=?", [run_id]
    if kind is not None: q, args = q + " AND kind=?", args + [kind]
    return [(int(r[0]), r[1], r[2], r[3]) for r in self._read(q + " ORDER BY id", args)]

@dataclass(frozen=True)
class Run:
  run_id: str
  git_commit: str
  started: float
  argv: str
  targets: str

def parse_record(rid: int, kind: Any, ihash: Any, text: Any) -> KernelRecord | dict[str, Any]:
  """Record `rid` (its row's values as stored), checked: text where text belongs, JSON, every field present with its
  type, and the input hash it was stored under: a KernelRecord, or a schedule's body. Raises RecordError naming the
  record and what is wrong."""
  where = f"record {rid} ({str(kind)[:40]})"
  if kind not in KINDS: raise RecordError(f"{where}: unknown kind {kind!r}; kinds are {KINDS}")
  for name, v in (("input hash", ihash), ("body", text)):
    if not isinstance(v, str):
      raise RecordError(f"{where}: its {name} is {'NULL' if v is None else f'a {type(v).__name__}'}, not text")
  try: body = json.loads(text)
  except (json.JSONDecodeError, RecursionError) as e:
    raise RecordError(f"{where}: its body is not valid JSON (truncated or corrupt): {e}") from None
  if not isinstance(body, dict): raise RecordError(f"{where}: its body is a JSON {type(body).__name__}, not an object")
  rec: KernelRecord | dict[str, Any] = body
  if kind == "kernel":
    try: rec = KernelRecord.from_json(body)
    except RecordFormatError as e: raise RecordError(f"{where}: {e}") from None
  for name, typ in {**SCHEDULE_FIELDS, **SCHEDULE_OPTIONAL}.items() if kind == "schedule" else ():
    if name not in body:
      if name in SCHEDULE_OPTIONAL: continue
      raise RecordError(f"{where}: field {name!r} is missing")
    if not isinstance(body[name], typ): raise RecordError(f"{where}: field {name!r} is a {type(body[name]).__name__}")
  try: got = input_hash(kind, body)
  except (TypeError, ValueError) as e: raise RecordError(f"{where}: its inputs cannot be hashed: {e}") from None
  if got != ihash:
    raise RecordError(f"{where}: its inputs hash to {got[:16]}..., but it was stored under {ihash[:16]}...: the record "
                      "was changed after capture (tampered or corrupt); capture again")
  return rec
