"""An audit hook (sys.addaudithook) that records every attempt of the process to compile, load or run a text recorded in a
replay database, while armed. A replay database is untrusted data: its texts (C, LLVM IR, CUDA, PTX, listings) may be
diffed as text, never compiled, loaded or run.

The hook is added once per process (an audit hook cannot be removed) and does nothing unless armed by `watching`."""
from __future__ import annotations
import contextlib, json, sqlite3, sys
from typing import Any, Iterator

class _Watch:
  def __init__(self, texts: set[str], markers: set[str]):
    self.texts, self.markers = texts, markers
    self.events: list[tuple[str, str]] = []  # (event, what) of every violation
    self.compiles: list[str] = []  # the sources the diff compiled natively (the `replay.compile` event)
    self.inside = False

_watch: _Watch | None = None
_added = False

def _text(x: Any) -> str:
  if isinstance(x, bytes): return x.decode(errors="replace")
  if isinstance(x, (list, tuple)): return "\n".join(_text(v) for v in x)
  return x if isinstance(x, str) else ""

def _hook(event: str, args: tuple[Any, ...]) -> None:
  w = _watch
  if w is None or w.inside: return
  if event not in ("ctypes.dlopen", "compile", "exec", "subprocess.Popen", "os.system", "os.posix_spawn", "os.exec",
                   "os.spawn", "replay.compile"):
    return
  w.inside = True  # NOTE: reading a file below fires `open`: the hook must not look at its own reads
  try:
    if event == "ctypes.dlopen":
      path = _text(args[0])
      try:
        with open(path, "rb") as f: data = f.read().decode("latin-1")
      except OSError: data = ""
      if (m := next((m for m in w.markers if m in data), None)) is not None: w.events.append((event, f"{path}: {m}"))
      return
    if event == "replay.compile":
      src = _text(args[1])
      w.compiles.append(src)
      if src in w.texts or any(m in src for m in w.markers): w.events.append((event, src[:200]))
      return
    text = _text(args[0]) if event in ("compile", "exec", "os.system") else _text(list(args))
    if text in w.texts or any(m in text for m in w.markers): w.events.append((event, text[:200]))
  finally: w.inside = False

def recorded_texts(db: str) -> set[str]:
  """Every text field of every record in the database (the sources, and the compile reports)."""
  conn = sqlite3.connect(db)
  ret: set[str] = set()
  for (body,) in conn.execute("SELECT body FROM records"):
    try: b = json.loads(body)
    except ValueError: continue
    if isinstance(b, dict) and isinstance(b.get("src"), str): ret.add(b["src"])
  conn.close()
  return ret

@contextlib.contextmanager
def watching(db: str, markers: set[str] | tuple[str, ...] = ()) -> Iterator[_Watch]:
  """Armed for the block: every recorded text of `db` (and any string of `markers`) must not reach a compiler, a
  dlopen, a subprocess or Python's compile/exec. The caller asserts `w.events == []` after the block. A watch inside
  another (a test diffing a copy of its database) suspends the outer one."""
  global _watch, _added
  if not _added:
    sys.addaudithook(_hook)
    _added = True
  w, outer = _Watch(recorded_texts(db), set(markers)), _watch
  _watch = w
  try: yield w
  finally: _watch = outer
