"""The viewer's HTTP server: the standard library's http.server on 127.0.0.1, the page from static/ and a JSON API over
one or two loaded traces. Layout and graph rebuilding run here, so the page only draws."""
from __future__ import annotations
import json, os, sys, threading, time, webbrowser
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlsplit, parse_qs
from tinygrad.helpers import VIZ_PORT, VIZ_BROWSER
from tinygrad.viz.trace import Trace, TraceError, load
from tinygrad.viz.graph import GraphBuilder, changed_lines, layout

STATIC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
STATIC_FILES = {"/": ("index.html", "text/html"), "/index.html": ("index.html", "text/html"),
                "/app.js": ("app.js", "text/javascript"), "/style.css": ("style.css", "text/css")}
LABEL_CHARS = 40

class ViewerError(ValueError):
  """A request the loaded traces cannot answer (no such trace, pass or step)."""

class Slot:
  """One trace given on the command line: loaded, or the error that says why it is not."""
  def __init__(self, path: str):
    self.path, self.trace, self.error, self.builder = path, None, None, None
    try:
      self.trace = load(path)
      self.builder = GraphBuilder(self.trace)
    except TraceError as e: self.error = str(e)
  trace: Trace | None
  error: str | None
  builder: GraphBuilder | None

def _sig(b: GraphBuilder, root: int) -> dict[int, int]:
  sig: dict[int, int] = {}
  for i in b.toposort(root):
    n = b.nodes[i]
    sig[i] = hash((n.op, n.dtype, n.arg, tuple(sig[s] for s in n.src)))
  return sig

class Viewer:
  """What the API serves: the traces, and where the page opens (a group, pass and step per trace)."""
  def __init__(self, paths: list[str], kernel: str | None = None, pass_name: str | None = None):
    self.slots = [Slot(p) for p in paths]
    self.lock = threading.Lock()
    self.initial: list[dict[str, int] | None] = [self.find(s, kernel, pass_name) for s in self.slots]
    if len(self.slots) == 2 and all(s.trace for s in self.slots) and pass_name is None:
      self.initial = self.first_divergence(kernel) or self.initial

  def find(self, s: Slot, kernel: str | None, pass_name: str | None) -> dict[str, int] | None:
    """Where the page opens on this trace: the named kernel and pass, else the first pass that failed, else nowhere."""
    if s.trace is None: return None
    if kernel is None and pass_name is None:
      bad = next((p for p in s.trace.passes.values() if p.error is not None), None)
      return None if bad is None else {"group": bad.group, "pass": bad.id, "step": max(0, len(bad.steps) - 1)}
    for g in s.trace.groups.values():
      if kernel is not None and g.name != kernel: continue
      for pid in g.passes:
        if pass_name is None or s.trace.passes[pid].name == pass_name: return {"group": g.id, "pass": pid, "step": 0}
      if pass_name is None: return {"group": g.id, "pass": -1, "step": 0}
    return None

  def first_divergence(self, kernel: str | None) -> list[dict[str, int] | None] | None:
    """The first pass of the kernel (named, else the first kernel of each; without kernels, the first group) where the
    two traces differ: another pass name, another number of steps, or another output graph."""
    a, b = self.slots
    assert a.trace is not None and b.trace is not None and a.builder is not None and b.builder is not None
    def pick(tr: Trace) -> list[Any]:
      ks = [g for g in tr.groups.values() if g.kind == "kernel" and kernel in (None, g.name)]
      return ks if ks or kernel is not None else [g for g in tr.groups.values() if g.passes]
    ga, gb = pick(a.trace), pick(b.trace)
    if not ga or not gb: return None
    pa, pb = ga[0].passes, gb[0].passes
    for k in range(max(len(pa), len(pb))):
      if k >= len(pa) or k >= len(pb): return [{"group": ga[0].id, "pass": pa[min(k, len(pa) - 1)], "step": 0},
                                               {"group": gb[0].id, "pass": pb[min(k, len(pb) - 1)], "step": 0}]
      x, y = a.trace.passes[pa[k]], b.trace.passes[pb[k]]
      ox, oy = a.builder.graph_at(x, len(x.steps)), b.builder.graph_at(y, len(y.steps))
      if x.name != y.name or len(x.steps) != len(y.steps) or _sig(a.builder, ox)[ox] != _sig(b.builder, oy)[oy]:
        return [{"group": ga[0].id, "pass": x.id, "step": 0}, {"group": gb[0].id, "pass": y.id, "step": 0}]
    return [{"group": ga[0].id, "pass": -1, "step": 0}, {"group": gb[0].id, "pass": -1, "step": 0}]

  def slot(self, q: dict[str, str]) -> tuple[Trace, GraphBuilder]:
    t = _int(q, "t")
    if not 0 <= t < len(self.slots): raise ViewerError(f"no trace {t}")
    s = self.slots[t]
    if s.trace is None or s.builder is None: raise ViewerError(f"trace {t} did not load: {s.error}")
    return s.trace, s.builder

  def index(self, q: dict[str, str]) -> dict[str, Any]:
    out: list[dict[str, Any]] = []
    for k, s in enumerate(self.slots):
      if s.trace is None:
        out.append({"path": s.path, "error": s.error})
        continue
      tr = s.trace
      groups = [{"id": g.id, "kind": g.kind, "name": g.name, "error": g.error, "finished": g.finished,
                 "has_source": g.source is not None,
                 "passes": [{"id": p.id, "name": p.name, "steps": len(p.steps), "error": p.error,
                             "rules": sorted({tr.rules[st.rule]["name"] for st in p.steps})}
                            for pid in g.passes for p in (tr.passes[pid],)]} for g in tr.groups.values()]
      out.append({"path": s.path, "error": None, "warnings": tr.warnings, "version": tr.header["version"],
                  "argv": tr.header["argv"], "groups": groups, "launches": tr.launches, "initial": self.initial[k]})
    return {"traces": out}

  def pass_info(self, q: dict[str, str]) -> dict[str, Any]:
    tr, _ = self.slot(q)
    p = _get(tr.passes, _int(q, "p"), "pass")
    steps = [{"rule": st.rule, "match": st.match, "out": st.out} for st in p.steps]
    rules = {r: tr.rules[r] for r in sorted({st.rule for st in p.steps})}
    return {"id": p.id, "name": p.name, "group": p.group, "bottom_up": p.bottom_up, "error": p.error, "steps": steps,
            "rules": rules}

  def graph(self, q: dict[str, str]) -> dict[str, Any]:
    """The graph before step `s` (`after=1`: after it) laid out; `text=1` adds both graphs' text and changed lines."""
    st = time.perf_counter()
    tr, b = self.slot(q)
    p = _get(tr.passes, _int(q, "p"), "pass")
    k, want_after, want_text = _int(q, "s"), q.get("after") == "1", q.get("text") == "1"
    with self.lock:
      before = b.root_at(p, k)
      after = b.root_at(p, k + 1) if k < len(p.steps) else before
      shown = after if want_after else before
      order = b.order(shown)
      step = p.steps[k] if k < len(p.steps) else None
      # NOTE: the rebuilt graph can run ahead of the rewriter (it applies each step everywhere at once); a matched node
      # it no longer holds is drawn beside it, so the step's node is always on the page
      focus = None if step is None else step.out if want_after else step.match
      detached = focus is not None and focus not in set(order)
      if detached: order = b.toposort(shown, focus)  # type: ignore[arg-type]
      pos = layout(b.nodes, order)
      in_before = set(b.order(before)) if want_after else set()
      changed = [i for i in order if i not in in_before] if want_after else []
      text: dict[str, Any] = {}
      if want_text:
        tb, ta = b.text(b.order(before)), b.text(b.order(after))
        gone, new = changed_lines(tb, ta)
        text = {"text_before": tb, "text_after": ta, "gone": gone, "new": new}
    nodes = [[i, x, y, b.nodes[i].op, _label(b.nodes[i])] for i in order for (x, y) in (pos[i],)]
    edges = [[s, i] for i in order for s in b.nodes[i].src]
    return {"pass": p.id, "step": k, "n_steps": len(p.steps), "after": want_after, "nodes": nodes, "edges": edges,
            "match": step.match if step else None, "out": step.out if step else None,
            "rule": tr.rules[step.rule] if step else None, "changed": changed, "detached": detached, **text,
            "server_ms": (time.perf_counter() - st) * 1e3}

  def kernel(self, q: dict[str, str]) -> dict[str, Any]:
    tr, b = self.slot(q)
    g = _get(tr.groups, _int(q, "g"), "group")
    return {"id": g.id, "name": g.name, "kind": g.kind, "target": g.target, "error": g.error, "source": g.source,
            "ast": b.text(b.toposort(g.ast)) if g.ast is not None else None,
            "program": [f"{k:4d} {b.nodes[i].op:16s} {b.nodes[i].dtype:24s} {b.nodes[i].arg}" for k, i in
                        enumerate(g.program)] if g.program is not None else None}

  def node(self, q: dict[str, str]) -> dict[str, Any]:
    tr, b = self.slot(q)
    n = _get(b.nodes, _int(q, "n"), "node")
    return {"id": n.id, "op": n.op, "dtype": n.dtype, "arg": n.arg, "src": list(n.src)}

def _label(n: Any) -> str:
  arg = n.arg if len(n.arg) <= LABEL_CHARS else n.arg[:LABEL_CHARS] + "..."
  return arg if arg != "None" else ""

def _int(q: dict[str, str], k: str) -> int:
  v = q.get(k)
  if v is None or not v.lstrip("-").isdigit() or len(v) > 12: raise ViewerError(f"parameter {k!r} must be an integer")
  return int(v)

def _get(table: dict[int, Any], i: int, what: str) -> Any:
  if (x := table.get(i)) is None: raise ViewerError(f"no {what} {i} in this trace")
  return x

API = {"/api/index": Viewer.index, "/api/pass": Viewer.pass_info, "/api/graph": Viewer.graph,
       "/api/kernel": Viewer.kernel, "/api/node": Viewer.node}

def make_handler(viewer: Viewer) -> type[BaseHTTPRequestHandler]:
  class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None: pass
    def send(self, code: int, body: bytes, ctype: str) -> None:
      self.send_response(code)
      self.send_header("Content-Type", ctype + "; charset=utf-8")
      self.send_header("Content-Length", str(len(body)))
      self.send_header("Cache-Control", "no-store")
      self.send_header("X-Content-Type-Options", "nosniff")
      self.end_headers()
      self.wfile.write(body)
    def do_GET(self) -> None:
      host = (self.headers.get("Host") or "").rsplit(":", 1)[0]
      # NOTE: only pages on this machine may read the API (a DNS-rebinding page names another host)
      if host not in ("127.0.0.1", "localhost"): return self.send(403, b"forbidden host", "text/plain")
      url = urlsplit(self.path)
      if (st := STATIC_FILES.get(url.path)) is not None:
        with open(os.path.join(STATIC, st[0]), "rb") as f: return self.send(200, f.read(), st[1])
      if url.path == "/favicon.ico": return self.send(204, b"", "image/x-icon")
      if (fn := API.get(url.path)) is None: return self.send(404, b"not found", "text/plain")
      q = {k: v[0] for k, v in parse_qs(url.query).items()}
      try: body, code = fn(viewer, q), 200
      except (ViewerError, TraceError) as e: body, code = {"error": str(e)}, 400
      self.send(code, json.dumps(body).encode(), "application/json")
  return Handler

def make_server(viewer: Viewer, port: int) -> ThreadingHTTPServer:
  srv = ThreadingHTTPServer(("127.0.0.1", port), make_handler(viewer))
  srv.daemon_threads = True
  return srv

def serve_paths(paths: list[str], port: int | None = None, browser: bool | None = None, kernel: str | None = None,
                pass_name: str | None = None) -> int:
  """Load the traces and serve them until interrupted. Returns an exit status: 2 when no trace could be read."""
  viewer = Viewer(paths, kernel, pass_name)
  for s in viewer.slots:
    if s.error is not None: print(f"VIZ: {s.error}", file=sys.stderr)
    for w in (s.trace.warnings if s.trace is not None else []): print(f"VIZ: {s.path}: {w}", file=sys.stderr)
  if all(s.trace is None for s in viewer.slots): return 2
  srv = make_server(viewer, int(VIZ_PORT.value) if port is None else port)
  url = f"http://127.0.0.1:{srv.server_address[1]}/"
  print(f"VIZ: serving {url} (Ctrl-C to stop)", file=sys.stderr, flush=True)
  if VIZ_BROWSER if browser is None else browser: webbrowser.open(url)
  try: srv.serve_forever()
  except KeyboardInterrupt: pass
  finally: srv.server_close()
  return 0
