"""The viewer in a real headless browser: Debian's chromium driven by playwright (never a browser download). Every
request that is not to 127.0.0.1 is refused, so the page works offline. Screenshots go to artifacts/viz/ (`make
viz-docs` copies them into docs/viz/)."""
import json, os, re, shutil, subprocess, sys, threading
from urllib.parse import urlsplit
import pytest
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite
from tinygrad.uop.symbolic import symbolic
from tinygrad.viz import record
from tinygrad.viz.trace import load, FORMAT, VERSION
from tinygrad.viz.server import Viewer, make_server

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ARTIFACTS = os.path.join(ROOT, "artifacts", "viz")
CHROMIUM_FIX = ("install Debian's chromium: `apt-get update && apt-get install -y chromium` (as root; `make test` does "
                "it where it runs as root), or point CHROMIUM at a chromium executable")

def chromium_path() -> str:
  path = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
  if path is None: pytest.fail(f"no chromium to run the viewer's browser tests: {CHROMIUM_FIX}", pytrace=False)
  return path

@pytest.fixture(scope="module")
def browser():
  try: from playwright.sync_api import sync_playwright
  except ImportError:
    pytest.fail("playwright is missing: pip install -e '.[testing]' (it is pinned there)", pytrace=False)
  exe = chromium_path()
  with sync_playwright() as p:
    try: b = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
    except Exception as e: pytest.fail(f"chromium at {exe} did not start ({e}): {CHROMIUM_FIX}", pytrace=False)
    yield b
    b.close()

class Page:
  """A page of the viewer with every request off 127.0.0.1 refused (and counted), and page errors collected."""
  def __init__(self, browser, url: str):
    self.ctx = browser.new_context(viewport={"width": 1500, "height": 950})
    self.outside: list[str] = []
    self.errors: list[str] = []
    def route(r):
      if urlsplit(r.request.url).hostname == "127.0.0.1": return r.continue_()
      self.outside.append(r.request.url)
      return r.abort()
    self.ctx.route("**/*", route)
    self.pg = self.ctx.new_page()
    self.pg.on("pageerror", lambda e: self.errors.append(str(e)))
    self.pg.goto(url)
    self.pg.wait_for_selector("body[data-ready='1']", timeout=30000)
  def shot(self, name: str) -> None:
    os.makedirs(ARTIFACTS, exist_ok=True)
    self.pg.screenshot(path=os.path.join(ARTIFACTS, name))
  def open_pass(self, t: int, g: int, p: int) -> None:
    det = self.pg.locator(f"#sidebar details.group[data-t='{t}'][data-g='{g}']")
    if det.get_attribute("open") is None: det.locator("summary .gname").click()
    self.pg.locator(f"#sidebar li.pass[data-t='{t}'][data-p='{p}']").click()
    self.wait_step(t, 0)
  def wait_step(self, t: int, k: int) -> None:
    self.pg.wait_for_selector(f".pane[data-t='{t}'][data-drawn-step='{k}']", timeout=30000)
  def text(self, sel: str) -> str: return self.pg.locator(sel).first.text_content() or ""
  def close(self) -> None:
    assert not self.outside, f"the page asked for something off this machine: {self.outside}"
    assert not self.errors, f"page errors: {self.errors}"
    self.ctx.close()

def serve(paths: list[str], **kw) -> tuple[str, object]:
  srv = make_server(Viewer(paths, **kw), 0)
  threading.Thread(target=srv.serve_forever, daemon=True).start()
  return f"http://127.0.0.1:{srv.server_address[1]}/", srv

def stop(srv) -> None:
  srv.shutdown()
  srv.server_close()

@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
  """tests/viz/viz_program.py run under VIZ=1 PROFILE=1, serving its page at exit as a user's run does."""
  d = tmp_path_factory.mktemp("run")
  trace, counts = str(d / "trace.jsonl"), str(d / "counts.json")
  env = {**os.environ, "VIZ": "1", "PROFILE": "1", "VIZ_PORT": "0", "VIZ_BROWSER": "0", "VIZ_TRACE": trace,
         "PYTHONPATH": ROOT}
  proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "viz", "viz_program.py"), counts], env=env,
                          stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
  url, lines = None, []
  assert proc.stderr is not None
  for line in proc.stderr:
    lines.append(line)
    if (m := re.search(r"VIZ: serving (http://127\.0\.0\.1:\d+/)", line)): url = m.group(1)
    if url: break
  try:
    assert url is not None, "the run never served its page:\n" + "".join(lines)
    yield url, load(trace), json.load(open(counts))
  finally:
    proc.terminate()
    proc.wait(timeout=30)

STEPS_JS = """async (n) => {
  const pane = document.querySelector(".pane[data-t='0']");
  const out = [];
  for (let k = 0; k < n; k++) {
    if (k > 0) pane.querySelector("button.next").click();
    else { pane.querySelector(".slider").value = 0; pane.querySelector(".slider").dispatchEvent(new Event("change")); }
    while (pane.dataset.drawnStep !== String(k)) await new Promise((r) => setTimeout(r, 2));
    out.push({rule: pane.querySelector(".rule-name").textContent, loc: pane.querySelector(".rule-loc").textContent,
              hl: [...pane.querySelectorAll("svg g.node.hl")].map((e) => e.dataset.id),
              match: pane.querySelector(".match-id").textContent});
  }
  return out;
}"""

def test_real_run_steps_match_the_trace_and_the_rewriter(browser, real_run):
  url, tr, counts = real_run
  assert len(counts) == len(tr.passes)
  # the kernel with the most rewrites, and its pass with the most steps
  kernels = [g for g in tr.groups.values() if g.kind == "kernel"]
  k = max(kernels, key=lambda g: sum(len(tr.passes[p].steps) for p in g.passes))
  assert sum(len(tr.passes[p].steps) for p in k.passes) >= 100
  p = max((tr.passes[i] for i in k.passes), key=lambda x: len(x.steps))
  page = Page(browser, url)
  try:
    for pid in k.passes:  # the sidebar's count of each pass is the rewriter's own count of rule applications
      shown = page.text(f"#sidebar li.pass[data-t='0'][data-p='{pid}'] .n").strip()
      assert int(shown) == counts[pid][1] and counts[pid][0] == tr.passes[pid].name
    page.open_pass(0, k.id, p.id)
    assert page.text(".pane[data-t='0'] .n-steps") == f"({counts[p.id][1]} steps)"
    assert page.pg.locator(".pane[data-t='0'] .slider").get_attribute("max") == str(counts[p.id][1])
    page.shot("graph.png")
    # NOTE: the steps are clicked through inside the page (one round trip in all): click "next", wait for that step
    # drawn, read what it shows
    page.pg.evaluate(STEPS_JS, 4)
    page.shot("step.png")
    got = page.pg.evaluate(STEPS_JS, len(p.steps))
    want = [{"rule": tr.rules[st.rule]["name"], "loc": tr.rules[st.rule]["loc"], "hl": [str(st.match)],
             "match": str(st.match)} for st in p.steps]
    assert len(got) == len(want) and got == want
    # after the last step: no rule, the pass's output
    page.pg.locator(".pane[data-t='0'] button.next").click()
    page.wait_step(0, len(p.steps))
    assert "none" in page.text(".pane[data-t='0'] .rule-name")
    # the text view: the lines the step changed are marked on both sides
    page.pg.locator(".pane[data-t='0'] .slider").fill("0")
    page.pg.locator(".pane[data-t='0'] .slider").dispatch_event("change")
    page.wait_step(0, 0)
    page.pg.locator(".pane[data-t='0'] button.view-text").click()
    page.pg.wait_for_selector(".pane[data-t='0'] .text-view .ln.gone")
    assert page.pg.locator(".pane[data-t='0'] .text-view .ln.new").count() >= 1
    page.shot("text.png")
    # the source view: the kernel's rendered source and linear program, as the trace holds them
    page.pg.locator(".pane[data-t='0'] button.view-source").click()
    page.pg.wait_for_selector(".pane[data-t='0'] .source-view pre.source .ln")
    src = [x.text_content() for x in page.pg.locator(".pane[data-t='0'] .source-view pre.source .ln").all()]
    assert k.source is not None and src == k.source.split("\n")
    assert page.pg.locator(".pane[data-t='0'] .source-view pre.program .ln").count() >= len(k.program or []) > 0
    page.shot("source.png")
    # the filters: a rule name keeps only the passes where it fired
    rname = tr.rules[p.steps[0].rule]["name"]
    page.pg.locator("#f-rule").fill(rname)
    visible = page.pg.locator("#sidebar li.pass:visible").count()
    want = sum(1 for x in tr.passes.values() if any(tr.rules[s.rule]["name"] == rname for s in x.steps))
    assert visible == want
    page.pg.locator("#f-rule").fill("")
    page.pg.locator("#f-kernel").fill(k.name)
    assert page.pg.locator("#sidebar details.group:visible").count() == sum(g.name == k.name for g in tr.groups.values())
    page.pg.locator("#f-kernel").fill("")
    # the profile: one bar and one row per launch
    page.pg.locator("#tab-profile").click()
    assert page.pg.locator("#profile svg rect.k").count() == len(tr.launches) > 0
    assert page.pg.locator("#profile table.launches tr").count() == len(tr.launches) + 1
    page.shot("profile.png")
  finally: page.close()

def _big_graph(n_terms: int) -> UOp:
  """Terms v_i * (i + 2) * 1 + v_(i+1), summed as a balanced tree: five nodes a term, and one `* 1` a term to fold."""
  vs = [UOp.variable(f"v{i}", 0, 10) for i in range(n_terms)]
  terms = [vs[i] * (i + 2) * 1 + vs[(i + 1) % n_terms] for i in range(n_terms)]
  while len(terms) > 1: terms = [terms[i] + terms[i + 1] if i + 1 < len(terms) else terms[i] for i in range(0, len(terms), 2)]
  return terms[0]

# NOTE: one rule of symbolic's, alone: symbolic itself spends half a minute re-associating a 1000-term sum
pm_mul_one = PatternMatcher([(UPat.var("x") * 1, lambda x: x)])

def test_5000_node_graph_draws(browser, tmp_path):
  path = str(tmp_path / "big.jsonl")
  root = _big_graph(850)
  assert len(root.toposort()) >= 5000
  record.start(path)
  try: graph_rewrite(root, pm_mul_one, name="big graph")
  finally: record.stop()
  url, srv = serve([path])
  page = Page(browser, url)
  try:
    page.open_pass(0, 0, 0)
    assert page.pg.locator(".pane[data-t='0'] svg g.node").count() >= 5000
    ms = page.pg.evaluate("window.viz.panes[0].lastDrawMs")
    # NOTE: the time is measured and written out, not asserted (a timed assertion fails on a busy machine)
    os.makedirs(ARTIFACTS, exist_ok=True)
    with open(os.path.join(ARTIFACTS, "timings.json"), "w") as f:
      json.dump({"nodes": page.pg.locator(".pane[data-t='0'] svg g.node").count(), "click_to_drawn_ms": ms}, f)
    print(f"5000-node graph: click to last node drawn {ms:.0f} ms")
    assert ms > 0
    page.shot("big_graph.png")
  finally:
    page.close()
    stop(srv)

def _hostile_trace(path: str) -> None:
  evil = "<script>window.pwned=1</script><img src=x onerror='window.pwned=2'>"
  recs = [{"t": "header", "format": FORMAT, "version": VERSION, "time": 0, "argv": [evil], "cap_bytes": 1 << 20},
          {"t": "n", "i": 0, "op": "CONST", "dt": "int", "arg": evil, "src": []},
          {"t": "n", "i": 1, "op": evil, "dt": evil, "arg": "1", "src": [0]},
          {"t": "n", "i": 2, "op": "CONST", "dt": "int", "arg": "2", "src": []},
          {"t": "rule", "i": 0, "name": evil, "loc": evil, "code": evil},
          {"t": "group", "i": 0, "kind": "kernel", "name": evil, "ast": 1},
          {"t": "pass", "i": 0, "group": 0, "name": evil, "root": 1, "bottom_up": False},
          {"t": "s", "p": 0, "r": 0, "m": 1, "o": 2},
          {"t": "pass_end", "i": 0, "out": 2, "steps": 1, "error": evil},
          {"t": "group_end", "i": 0, "name": evil, "program": [2], "source": evil, "target": evil, "error": None},
          {"t": "launch", "device": evil, "name": evil, "start": 0.0, "seconds": 1e-6, "flops": 1, "bytes": 1},
          {"t": "end"}]
  with open(path, "w") as f: f.write("".join(json.dumps(r) + "\n" for r in recs))

def _hostile_page(browser, tmp_path) -> tuple[Page, object]:
  """The viewer serving _hostile_trace, its first pass open: (the page, the server)."""
  path = str(tmp_path / "evil.jsonl")
  _hostile_trace(path)
  url, srv = serve([path])
  page = Page(browser, url)
  page.open_pass(0, 0, 0)
  return page, srv

def _text_then_source(page: Page) -> None:
  """Click the text view, then the source view, and wait for the source's lines."""
  page.pg.locator(".pane[data-t='0'] button.view-text").click()
  page.pg.locator(".pane[data-t='0'] button.view-source").click()
  page.pg.wait_for_selector(".pane[data-t='0'] .source-view pre.source .ln")

def test_trace_strings_are_text_never_markup(browser, tmp_path):
  page, srv = _hostile_page(browser, tmp_path)
  try:
    evil = "<script>window.pwned=1</script><img src=x onerror='window.pwned=2'>"
    _text_then_source(page)
    page.pg.locator("#tab-profile").click()
    page.pg.wait_for_timeout(200)
    assert page.pg.evaluate("window.pwned") is None
    assert page.pg.locator("#sidebar script, #panes script, #profile script, #sidebar img, #panes img").count() == 0
    assert page.text(".pane[data-t='0'] .rule-name") == evil
    assert page.text("#sidebar summary .gname") == evil
    assert evil in page.text(".pane[data-t='0'] .source-view pre.source")
  finally:
    page.close()
    stop(srv)

SLOW_FETCH_JS = """(part) => { const f = window.fetch; window.fetch = async (u, ...a) => {
  if (String(u).includes(part)) await new Promise((r) => setTimeout(r, 800));
  return f(u, ...a); }; }"""

def test_a_later_pass_click_wins_over_a_slow_earlier_one(browser, real_run):
  url, tr, _ = real_run
  g = next(g for g in tr.groups.values() if len(g.passes) >= 2 and len({len(tr.passes[p].steps) for p in g.passes}) >= 2)
  a, b = (tr.passes[p] for p in sorted(g.passes, key=lambda p: len(tr.passes[p].steps))[:2])
  page = Page(browser, url)
  try:
    det = page.pg.locator(f"#sidebar details.group[data-t='0'][data-g='{g.id}']")
    if det.get_attribute("open") is None: det.locator("summary .gname").click()
    page.pg.evaluate(SLOW_FETCH_JS, f"/api/pass?t=0&p={a.id}")
    page.pg.locator(f"#sidebar li.pass[data-t='0'][data-p='{a.id}']").click()
    page.pg.locator(f"#sidebar li.pass[data-t='0'][data-p='{b.id}']").click()
    page.wait_step(0, 0)
    page.pg.wait_for_timeout(1500)
    assert page.pg.evaluate("window.viz.panes[0].pass") == b.id
    assert page.text(".pane[data-t='0'] .n-steps") == f"({len(b.steps)} steps)"
    assert page.text(".pane[data-t='0'] .pane-head").endswith(f"pass {b.name}")
  finally: page.close()

def test_a_later_view_click_wins_over_a_slow_earlier_one(browser, tmp_path):
  # the text view's fetch is held back until after the source view is drawn: its late return must not bring it back
  page, srv = _hostile_page(browser, tmp_path)
  try:
    page.pg.evaluate(SLOW_FETCH_JS, "text=1")
    _text_then_source(page)
    page.pg.wait_for_timeout(1500)
    assert page.pg.evaluate("window.viz.panes[0].view") == "source"
    assert page.pg.locator(".pane[data-t='0'] .source-view").is_visible()
    assert not page.pg.locator(".pane[data-t='0'] .text-view").is_visible()
  finally:
    page.close()
    stop(srv)

def test_bad_traces_give_a_message_not_a_blank_page(browser, tmp_path, real_run):
  _, tr, _ = real_run
  text = open(tr.path).read()
  cut, edited = tmp_path / "cut.jsonl", tmp_path / "edited.jsonl"
  cut.write_text(text[:len(text) // 2])
  lines = text.splitlines()
  lines[5] = lines[5].replace('"t":"n"', '"t":"nope"')
  edited.write_text("\n".join(lines) + "\n")
  url, srv = serve([str(cut), str(edited)])
  page = Page(browser, url)
  try:
    msg = page.text("#msg")
    assert "cut short" in msg or "no end record" in msg
    assert "edited.jsonl:6: unknown record type 'nope'" in msg
    assert page.pg.locator("#sidebar li.pass[data-t='0']").count() > 0  # the cut trace still shows what it holds
    page.shot("bad_trace.png")
  finally:
    page.close()
    stop(srv)
  r = subprocess.run([sys.executable, "-m", "tinygrad.viz", "--check", str(edited)], capture_output=True, text=True,
                     env={**os.environ, "PYTHONPATH": ROOT}, timeout=60)
  assert r.returncode == 2 and "edited.jsonl:6: unknown record type 'nope'" in r.stderr

def test_two_traces_open_side_by_side_at_the_first_difference(browser, tmp_path):
  a, b = str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")
  x = UOp.variable("x", 0, 100)
  for path, g in ((a, (x * 1 + 0) * 2), (b, (x * 1 + 0) * 3)):
    record.start(path)
    try:
      graph_rewrite(x + 1, symbolic, name="same in both")
      graph_rewrite(g, symbolic, name="differs")
    finally: record.stop()
  url, srv = serve([a, b], kernel=None)
  page = Page(browser, url)
  try:
    assert page.pg.locator(".pane").count() == 2
    for t in (0, 1):
      page.wait_step(t, 0)
      assert page.text(f".pane[data-t='{t}'] .pane-head").endswith("pass differs")
    page.shot("compare.png")
  finally:
    page.close()
    stop(srv)

def test_missing_browser_is_a_failure_that_says_what_to_install(monkeypatch):
  monkeypatch.delenv("CHROMIUM", raising=False)
  monkeypatch.setattr(shutil, "which", lambda name: None)
  with pytest.raises(pytest.fail.Exception, match=r"apt-get update && apt-get install -y chromium"): chromium_path()
