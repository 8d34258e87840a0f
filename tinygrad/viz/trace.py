"""The VIZ trace: JSON lines, one record per line, written as the run goes (a crashed run leaves every line it flushed).
docs/viz.md is the reference for the records; `RECORDS` below is the same table as data, and the reader checks every
line against it. A trace is untrusted input: reading it never runs code from it, and every failure is a TraceError
that names the file, the line and what was wrong."""
from __future__ import annotations
import json, os, time
from dataclasses import dataclass, field
from typing import Any, IO

FORMAT = "tinygrad-viz-trace"
VERSION = 1

class TraceError(ValueError):
  """A trace that cannot be read: not a trace, a newer format, or a line that breaks the format (file and line
  named)."""

_INT, _STR, _BOOL, _NUM, _INTS = "int", "str", "bool", "num", "ints"
_OPT_STR, _OPT_INT, _OPT_INTS = "str?", "int?", "ints?"

# record type -> its fields and their kinds (every field is required; `?` allows null)
RECORDS: dict[str, dict[str, str]] = {
  "header": {"format": _STR, "version": _INT, "time": _NUM, "argv": "strs", "cap_bytes": _INT},
  "n": {"i": _INT, "op": _STR, "dt": _STR, "arg": _STR, "src": _INTS},
  "rule": {"i": _INT, "name": _STR, "loc": _STR, "code": _STR},
  "group": {"i": _INT, "kind": _STR, "name": _STR, "ast": _OPT_INT},
  "group_end": {"i": _INT, "name": _STR, "program": _OPT_INTS, "source": _OPT_STR, "target": _OPT_STR,
                "error": _OPT_STR},
  "pass": {"i": _INT, "group": _INT, "name": _STR, "root": _INT, "bottom_up": _BOOL},
  "s": {"p": _INT, "r": _INT, "m": _INT, "o": _INT},
  "pass_end": {"i": _INT, "out": _OPT_INT, "steps": _INT, "error": _OPT_STR},
  "launch": {"device": _STR, "name": _STR, "start": _NUM, "seconds": _NUM, "flops": _INT, "bytes": _INT},
  "cap": {"bytes": _INT},
  "end": {},
}
GROUP_KINDS = ("schedule", "kernel", "other")

def _kind_ok(v: Any, kind: str) -> bool:
  if kind.endswith("?"):
    if v is None: return True
    kind = kind[:-1]
  if kind == _INT: return type(v) is int
  if kind == _NUM: return type(v) in (int, float)
  if kind == _STR: return isinstance(v, str)
  if kind == _BOOL: return isinstance(v, bool)
  if kind == _INTS: return isinstance(v, list) and all(type(x) is int for x in v)
  if kind == "strs": return isinstance(v, list) and all(isinstance(x, str) for x in v)
  raise AssertionError(kind)

# ---- writing ----

class TraceWriter:
  """Appends records to `path`, flushed at each pass end and group boundary. Stops at `cap_bytes` with a `cap`
  record."""
  def __init__(self, path: str, cap_bytes: int, argv: list[str]):
    self.path, self.cap_bytes = path, cap_bytes
    self.f: IO[str] | None = open(path, "w", encoding="utf-8")
    self.size, self.capped = 0, False
    self.write({"t": "header", "format": FORMAT, "version": VERSION, "time": time.time(), "argv": list(argv),
                "cap_bytes": cap_bytes})
  def write(self, rec: dict[str, Any], flush: bool = False) -> bool:
    """Write one record; False once the cap was reached (the record was not written)."""
    if self.f is None: return False
    line = json.dumps(rec, separators=(",", ":"), ensure_ascii=False) + "\n"
    if self.size + len(line) > self.cap_bytes and rec["t"] != "end":
      self.f.write(json.dumps({"t": "cap", "bytes": self.size}) + "\n")
      self.capped = True
      self.close()
      return False
    self.f.write(line)
    self.size += len(line)
    if flush: self.f.flush()
    return True
  def close(self) -> None:
    if self.f is None: return
    self.f.close()
    self.f = None

# ---- reading ----

@dataclass
class Node:
  id: int
  op: str
  dtype: str
  arg: str
  src: tuple[int, ...]

@dataclass
class Step:
  rule: int
  match: int
  out: int

@dataclass
class Pass:
  id: int
  group: int
  name: str
  root: int
  bottom_up: bool
  steps: list[Step] = field(default_factory=list)
  out: int | None = None
  error: str | None = None
  finished: bool = False

@dataclass
class Group:
  id: int
  kind: str
  name: str
  ast: int | None
  passes: list[int] = field(default_factory=list)
  program: list[int] | None = None
  source: str | None = None
  target: str | None = None
  error: str | None = None
  finished: bool = False

@dataclass
class Trace:
  path: str
  header: dict[str, Any]
  nodes: dict[int, Node] = field(default_factory=dict)
  rules: dict[int, dict[str, Any]] = field(default_factory=dict)
  groups: dict[int, Group] = field(default_factory=dict)
  passes: dict[int, Pass] = field(default_factory=dict)
  launches: list[dict[str, Any]] = field(default_factory=list)
  capped_at: int | None = None
  complete: bool = False
  warnings: list[str] = field(default_factory=list)

def _check(path: str, lineno: int, rec: Any) -> dict[str, Any]:
  where = f"{path}:{lineno}"
  if not isinstance(rec, dict): raise TraceError(f"{where}: a record must be a JSON object, got {type(rec).__name__}")
  t = rec.get("t")
  if not isinstance(t, str) or t not in RECORDS:
    raise TraceError(f"{where}: unknown record type {t!r}; known: {', '.join(RECORDS)}")
  fields = RECORDS[t]
  for k, kind in fields.items():
    if k not in rec: raise TraceError(f"{where}: {t} record lacks field {k!r}")
    if not _kind_ok(rec[k], kind):
      raise TraceError(f"{where}: {t} record field {k!r} must be {kind}, got {repr(rec[k])[:80]}")
  if (extra := set(rec) - set(fields) - {"t"}):
    raise TraceError(f"{where}: {t} record has unknown fields {sorted(extra)}")
  return rec

def _header(path: str, first: str) -> dict[str, Any]:
  try: rec = json.loads(first)
  except (ValueError, RecursionError) as e:
    raise TraceError(f"{path}:1: not a VIZ trace (the first line is not JSON: {type(e).__name__}: {e})") from None
  if not isinstance(rec, dict) or rec.get("t") != "header" or rec.get("format") != FORMAT:
    raise TraceError(f"{path}:1: not a VIZ trace (the first line is not a {FORMAT} header)")
  v = rec.get("version")
  if type(v) is int and v > VERSION:
    raise TraceError(f"{path}: the trace is format version {v}, newer than this viewer reads (version {VERSION}); "
                     "open it with the tinygrad that wrote it, or update this one")
  if v != VERSION: raise TraceError(f"{path}:1: unknown trace format version {v!r} (this viewer reads {VERSION})")
  return _check(path, 1, rec)

class _Loader:
  def __init__(self, tr: Trace): self.tr = tr
  def add(self, where: str, rec: dict[str, Any]) -> None:
    getattr(self, "r_" + rec["t"])(where, rec)
  def _new_id(self, where: str, table: dict[int, Any], i: int, what: str) -> None:
    if i in table: raise TraceError(f"{where}: {what} {i} is defined twice")
  def _ref(self, where: str, table: dict[int, Any], i: int, what: str) -> Any:
    if (x := table.get(i)) is None: raise TraceError(f"{where}: refers to {what} {i}, which no earlier line defines")
    return x
  def r_header(self, where: str, rec: dict[str, Any]) -> None: raise TraceError(f"{where}: a second header")
  def r_n(self, where: str, rec: dict[str, Any]) -> None:
    i = rec["i"]
    self._new_id(where, self.tr.nodes, i, "node")
    for s in rec["src"]: self._ref(where, self.tr.nodes, s, "node")
    self.tr.nodes[i] = Node(i, rec["op"], rec["dt"], rec["arg"], tuple(rec["src"]))
  def r_rule(self, where: str, rec: dict[str, Any]) -> None:
    self._new_id(where, self.tr.rules, rec["i"], "rule")
    self.tr.rules[rec["i"]] = {"name": rec["name"], "loc": rec["loc"], "code": rec["code"]}
  def r_group(self, where: str, rec: dict[str, Any]) -> None:
    self._new_id(where, self.tr.groups, rec["i"], "group")
    if rec["kind"] not in GROUP_KINDS:
      raise TraceError(f"{where}: group kind {rec['kind']!r} is not one of {GROUP_KINDS}")
    if rec["ast"] is not None: self._ref(where, self.tr.nodes, rec["ast"], "node")
    self.tr.groups[rec["i"]] = Group(rec["i"], rec["kind"], rec["name"], rec["ast"])
  def r_group_end(self, where: str, rec: dict[str, Any]) -> None:
    g: Group = self._ref(where, self.tr.groups, rec["i"], "group")
    for u in rec["program"] or []: self._ref(where, self.tr.nodes, u, "node")
    g.name, g.program, g.source = rec["name"], rec["program"], rec["source"]
    g.target, g.error = rec["target"], rec["error"]
    g.finished = True
  def r_pass(self, where: str, rec: dict[str, Any]) -> None:
    self._new_id(where, self.tr.passes, rec["i"], "pass")
    g: Group = self._ref(where, self.tr.groups, rec["group"], "group")
    self._ref(where, self.tr.nodes, rec["root"], "node")
    self.tr.passes[rec["i"]] = Pass(rec["i"], rec["group"], rec["name"], rec["root"], rec["bottom_up"])
    g.passes.append(rec["i"])
  def r_s(self, where: str, rec: dict[str, Any]) -> None:
    p: Pass = self._ref(where, self.tr.passes, rec["p"], "pass")
    if p.finished: raise TraceError(f"{where}: a step of pass {p.id}, which ended on an earlier line")
    self._ref(where, self.tr.rules, rec["r"], "rule")
    self._ref(where, self.tr.nodes, rec["m"], "node")
    self._ref(where, self.tr.nodes, rec["o"], "node")
    p.steps.append(Step(rec["r"], rec["m"], rec["o"]))
  def r_pass_end(self, where: str, rec: dict[str, Any]) -> None:
    p: Pass = self._ref(where, self.tr.passes, rec["i"], "pass")
    if rec["out"] is not None: self._ref(where, self.tr.nodes, rec["out"], "node")
    if rec["steps"] != len(p.steps):
      raise TraceError(f"{where}: pass {p.id} ends with {rec['steps']} steps but the trace has {len(p.steps)} of them")
    p.out, p.error, p.finished = rec["out"], rec["error"], True
  def r_launch(self, where: str, rec: dict[str, Any]) -> None:
    self.tr.launches.append({k: rec[k] for k in RECORDS["launch"]})
  def r_cap(self, where: str, rec: dict[str, Any]) -> None: self.tr.capped_at = rec["bytes"]
  def r_end(self, where: str, rec: dict[str, Any]) -> None: self.tr.complete = True

def load(path: str) -> Trace:
  """Read and check a whole trace. A last line cut short (a run that crashed mid-write) is dropped with a warning; any
  other bad line raises TraceError naming it."""
  try: f = open(path, "r", encoding="utf-8", errors="strict")
  except OSError as e: raise TraceError(f"{path}: cannot open the trace: {e.strerror}") from None
  with f:
    try: first = f.readline()
    except UnicodeDecodeError: raise TraceError(f"{path}:1: not a VIZ trace (not UTF-8 text)") from None
    if not first: raise TraceError(f"{path}: the trace is empty")
    tr = Trace(path, _header(path, first))
    ld = _Loader(tr)
    lineno, pending = 1, None
    try:
      for line in f:
        lineno += 1
        if pending is not None: raise pending
        if tr.complete or tr.capped_at is not None:
          raise TraceError(f"{path}:{lineno}: a record after the trace's {'end' if tr.complete else 'cap'} record")
        # NOTE: JSON nested deeper than the parser's recursion is a RecursionError; it is a bad line like any other
        try: rec = json.loads(line)
        except (ValueError, RecursionError) as e:
          # NOTE: only the last line may be cut short; a bad line before another one is an edited file
          if line.endswith("\n"): pending = TraceError(f"{path}:{lineno}: not a JSON record ({e})")
          else: tr.warnings.append(f"the trace ends mid-record at line {lineno} (the run was cut short); showing what "
                                   "came before")
          continue
        ld.add(f"{path}:{lineno}", _check(path, lineno, rec))
      if pending is not None: raise pending
    except UnicodeDecodeError: raise TraceError(f"{path}:{lineno + 1}: the trace is not UTF-8 text") from None
  if tr.capped_at is not None:
    tr.warnings.append(f"the trace reached its size cap ({tr.header['cap_bytes']} bytes, VIZ_MAX_MB): recording "
                       "stopped there, and what ran after is not in it")
  elif not tr.complete:
    tr.warnings.append("the trace has no end record: the run did not finish (it crashed, was killed, or is running)")
  return tr

def default_path() -> str:
  import tempfile
  return os.path.join(tempfile.gettempdir(), f"tinygrad-viz-{os.getpid()}-{int(time.time())}.jsonl")
