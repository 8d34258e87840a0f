"""The harness's outputs open in the viewer: a replay diff's changed kernel as old vs new traces side by side at the
first pass where they differ, and a fuzz finding's reduced case at the pass that failed."""
import os, subprocess, sys
import numpy as np
from tinygrad.uop import Ops
from tinygrad.uop.ops import UPat, PatternMatcher
from tinygrad.dtype import dtypes
from tinygrad.renderer.cstyle import CRenderer
from tinygrad.viz.trace import load
from tinygrad.viz.server import Viewer
from tests.viz.test_browser import browser, Page, serve, stop  # noqa: F401 (browser is a fixture)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

def test_replay_diff_opens_old_and_new_at_the_first_difference(browser, tmp_path, monkeypatch):  # noqa: F811
  from replay.diff import diff
  from replay.report import render_html
  from replay.viz import kernel_traces
  from tests.replay.helpers import capture_programs
  db = tmp_path / "base.db"
  capture_programs(db)
  # the change under review: a renderer rule computing float MAX as ADD (in this process only: the base checkout, run
  # in a process of its own, records the old side without it)
  monkeypatch.setattr(CRenderer, "extra_matcher",
                      PatternMatcher([(UPat(Ops.MAX, dtypes.float32, (UPat.var("x"), UPat.var("y"))), lambda x, y: x + y)]))
  rep = diff(str(db), progress=None)
  changed = [o for o in rep.outcomes if o.cls == "changed"]
  assert changed
  assert kernel_traces(rep, str(tmp_path / "viz"), ROOT) == len({o.group for o in changed})
  cmd = changed[0].viz.split()
  assert cmd[:3] == ["python", "-m", "tinygrad.viz"] and len(cmd) == 5, changed[0].viz
  old, new = cmd[3:]
  assert changed[0].viz in render_html(rep)
  v = Viewer([old, new])
  a, b = v.initial
  ta, tb = load(old), load(new)
  assert a is not None and b is not None
  # the old code has no renderer rules pass: the first difference is where the new code's pass comes in
  assert tb.passes[b["pass"]].name == "final renderer rules"
  assert "final renderer rules" not in {p.name for p in ta.passes.values()}
  assert [ta.passes[p].name for p in ta.groups[a["group"]].passes][:3] == \
         [tb.passes[p].name for p in tb.groups[b["group"]].passes][:3]
  url, srv = serve([old, new])
  page = Page(browser, url)
  try:
    page.wait_step(1, 0)
    assert page.text(".pane[data-t='1'] .pane-head").endswith("pass final renderer rules")
    first = tb.passes[b["pass"]].steps[0]
    assert page.text(".pane[data-t='1'] .rule-name") == tb.rules[first.rule]["name"]
    assert tb.rules[first.rule]["name"].startswith("<lambda> (test_harness_links.py:")
    page.shot("replay_diff.png")
  finally:
    page.close()
    stop(srv)

def _finding_with_a_reduce(d: str) -> str:
  from fuzz.levels import KernelLevel
  from fuzz.findings import Finding, Signature, write_finding
  lvl = KernelLevel()
  rng = np.random.default_rng(0)
  for _ in range(300):
    case = lvl.generate(rng.bytes(256))
    if lvl.valid(case) and any(u.op is Ops.REDUCE for u in case.ast.toposort()): break
  else: raise AssertionError("no generated kernel with a REDUCE in 300 tries")
  # NOTE: a kernel with a reduce has ranges the grid pass lowers (the planted bug raises there)
  sig = Signature("kernel", "codegen", "RuntimeError", "", "python")
  return write_finding(os.path.join(d, "findings"), Finding(sig, lvl.state(case), {}, "planted", ["python"]))

def test_fuzz_finding_opens_at_the_failing_pass(browser, tmp_path):  # noqa: F811
  path = _finding_with_a_reduce(str(tmp_path))
  out = str(tmp_path / "viz" / "f.jsonl")
  os.makedirs(os.path.dirname(out))
  r = subprocess.run([sys.executable, "-m", "fuzz.viz", path, out, "--setup", "tests.fuzz.planted:grid_lowering_raises"],
                     capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": ROOT})
  assert r.returncode == 0 and "planted: grid lowering crashed" in r.stdout, (r.stdout, r.stderr)
  tr = load(out)
  bad = [p for p in tr.passes.values() if p.error is not None]
  assert bad and bad[0].name == "grid ranges to SPECIAL" and "planted" in (bad[0].error or "")
  assert Viewer([out]).initial[0] == {"group": bad[0].group, "pass": bad[0].id, "step": max(0, len(bad[0].steps) - 1)}
  url, srv = serve([out])
  page = Page(browser, url)
  try:
    page.wait_step(0, max(0, len(bad[0].steps) - 1))
    head = page.text(".pane[data-t='0'] .pane-head")
    assert "pass grid ranges to SPECIAL" in head and "planted: grid lowering crashed" in head
    page.shot("fuzz_finding.png")
  finally:
    page.close()
    stop(srv)
