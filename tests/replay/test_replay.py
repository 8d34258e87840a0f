"""Process replay: a change made in the test (a patched matcher, a patched renderer) is classified as what it is."""
import json, os, pathlib, re, sqlite3, subprocess, sys
import pytest
from tinygrad.uop import Ops
from tinygrad.uop.ops import UPat, PatternMatcher, UOp
from tinygrad.dtype import dtypes
from tinygrad.renderer import cstyle
from tinygrad.renderer.cstyle import CRenderer
from replay.db import DB, input_hash, canonical
from replay.diff import diff
from replay.report import render_html
from replay import compare as replay_compare
from tinygrad.codegen import program as codegen_program
from tests.replay.helpers import capture_programs, copy_db, capturing, kernels
from tests.replay.untrusted import watching

ROOT = pathlib.Path(__file__).resolve().parents[2]

@pytest.fixture(scope="module")
def base(tmp_path_factory):
  db = tmp_path_factory.mktemp("replay") / "base.db"
  return db, capture_programs(db)

@pytest.fixture(autouse=True)
def no_recorded_text_runs(request):
  """Every test that diffs the base capture: none of its recorded texts is compiled, dlopened or run."""
  if "base" not in request.fixturenames:
    yield
    return
  with watching(str(request.getfixturevalue("base")[0])) as w: yield
  assert w.events == []

def by_class(rep, kind="kernel") -> dict[str, set[str]]:
  ret: dict[str, set[str]] = {}
  for o in rep.outcomes:
    if o.kind == kind: ret.setdefault(o.cls, set()).add(f"{o.name}#{o.rid}")
  return ret

def kernel_records(db) -> list[tuple[int, dict]]:
  d = DB(str(db), create=False)
  ret = [(rid, json.loads(body)) for rid, _, _, body in d.rows("base", "kernel")]
  d.close()
  return ret

def old_uops(body) -> list[UOp]:
  from spec.roundtrip import eval_pyrender
  return eval_pyrender(body["uops"])

def test_capture_holds_every_compiled_kernel_once_and_diffs_unchanged(base):
  db, compiled = base
  recs = kernel_records(db)
  # one record per distinct input (the AST text and the opts decide it here: one renderer, one set of flags)
  from tinygrad.uop.pyrender import pyrender
  distinct = {(pyrender(p.ast), tuple(p.applied_opts)) for p in compiled}
  assert len(recs) == len(distinct) >= 8
  rep = diff(str(db), progress=None)
  assert by_class(rep).keys() == {"unchanged"} and by_class(rep, "schedule").keys() == {"unchanged"}
  assert rep.counts("schedule")["unchanged"] == 7 and rep.all_ok()
  assert "captured opts" in rep.mode

def test_fresh_opts_mode_says_so_and_keeps_deterministic_heuristics(base):
  rep = diff(str(base[0]), fresh=True, progress=None)
  assert "fresh opts" in rep.mode and "fresh opts" in rep.summary()
  assert by_class(rep).keys() == {"unchanged"}

def test_rule_change_is_changed_for_exactly_the_kernels_it_touches(base, monkeypatch):
  db, _ = base
  # a deliberately wrong rule: float MAX computed as ADD
  monkeypatch.setattr(CRenderer, "extra_matcher",
                      PatternMatcher([(UPat(Ops.MAX, dtypes.float32, (UPat.var("x"), UPat.var("y"))), lambda x, y: x + y)]))
  expected = {f"{b['name']}#{rid}" for rid, b in kernel_records(db)
              if any(u.op is Ops.MAX and u.dtype == dtypes.float32 for u in old_uops(b))}
  rep = diff(str(db), progress=None)
  got = by_class(rep)
  assert expected and got.get("changed") == expected
  assert set(got) == {"changed", "unchanged"}
  for o in rep.outcomes:
    if o.cls == "changed": assert re.search(r"buffer data\d+\[\d+\]: old .*, new ", o.detail), o.detail
  assert not rep.all_ok()

def test_pure_rename_is_renamed(base, monkeypatch):
  db, _ = base
  fresh = cstyle._Lines.fresh
  monkeypatch.setattr(cstyle._Lines, "fresh", lambda self, prefix: "t_" + fresh(self, prefix))
  rep = diff(str(db), progress=None)
  n = len(kernel_records(db))
  assert by_class(rep).keys() == {"renamed"} and len(by_class(rep)["renamed"]) == n
  assert rep.all_ok()

def test_renderer_only_change_is_changed_not_same_semantics(base, monkeypatch):
  db, _ = base
  # the C text of MAX spelled as a sum: the linear program is untouched, so only the source shows it
  monkeypatch.setitem(CRenderer.code_for_op, Ops.MAX, lambda a, b, dt: f"({a}+{b})")
  expected = {f"{b['name']}#{rid}" for rid, b in kernel_records(db) if any(u.op is Ops.MAX for u in old_uops(b))}
  rep = diff(str(db), progress=None)
  got = by_class(rep)
  assert expected and got.get("changed") == expected and set(got) == {"changed", "unchanged"}
  # the C programs are compiled and run: the sum shows where the max was
  for o in rep.outcomes:
    if o.cls == "changed":
      assert "a renderer change" in o.detail and re.search(r"buffer data\d+\[\d+\]: old .*, new .* natively on CPU",
                                                           o.detail), o.detail

def test_new_program_that_crashes_natively_is_changed_and_the_diff_goes_on(base, monkeypatch):
  db, _ = base
  # the C text of MAX reads through a null pointer: the run happens in a forked child, which dies, not the diff
  monkeypatch.setitem(CRenderer.code_for_op, Ops.MAX, lambda a, b, dt: f"(*(volatile {dt.name}*)0)")
  rep = diff(str(db), progress=None)
  changed = [o for o in rep.outcomes if o.cls == "changed"]
  assert changed and len(rep.outcomes) == rep.total
  assert all("the new program crashed (signal" in o.detail and "natively on CPU" in o.detail for o in changed), \
    [o.detail for o in changed]

def _even_mul_split(x, c):
  return (x * (c.arg // 2)) + (x * (c.arg // 2)) if c.arg > 0 and c.arg % 2 == 0 else None

def _has_even_int_mul(uops: list[UOp]) -> bool:
  return any(u.op is Ops.MUL and u.dtype == dtypes.int32 and u.src[1].op is Ops.CONST and u.src[1].arg > 0
             and u.src[1].arg % 2 == 0 for u in uops)

def test_index_rewrite_that_keeps_values_is_same_semantics(base, monkeypatch):
  db, _ = base
  # x*c with c even -> x*(c/2) + x*(c/2): other index math, the same values (z3 proves it in 32-bit wrapping ints)
  monkeypatch.setattr(CRenderer, "extra_matcher",
                      PatternMatcher([(UPat(Ops.MUL, dtypes.int32, (UPat.var("x"), UPat.cvar("c"))), _even_mul_split)]))
  expected = {f"{b['name']}#{rid}" for rid, b in kernel_records(db) if _has_even_int_mul(old_uops(b))}
  rep = diff(str(db), progress=None)
  got = by_class(rep)
  assert expected and got.get("same semantics") == expected, rep.summary()
  assert set(got) <= {"same semantics", "unchanged"}
  assert all("proved equal by z3" in o.detail for o in rep.outcomes if o.cls == "same semantics")

def test_index_rewrite_that_changes_values_is_changed_with_a_counterexample(base, monkeypatch):
  db, _ = base
  def off_by_one(x, c): return (x * (c.arg - 1)) + x.const_like(0) * x if c.arg > 2 and c.arg % 2 == 0 else None
  monkeypatch.setattr(CRenderer, "extra_matcher",
                      PatternMatcher([(UPat(Ops.MUL, dtypes.int32, (UPat.var("x"), UPat.cvar("c"))), off_by_one)]))
  rep = diff(str(db), progress=None)
  changed = [o for o in rep.outcomes if o.cls == "changed"]
  assert changed and "same semantics" not in by_class(rep)
  assert any("z3 found index math that differs" in o.detail for o in changed), rep.summary()

def test_schedule_whose_old_kernels_differ_is_changed(base, tmp_path):
  db, _ = base
  copy = copy_db(db, tmp_path / "s.db")
  dst = sqlite3.connect(copy)
  # the kernels are outputs: an older version that made one more kernel is a schedule change (no tampering)
  rid, body = dst.execute("SELECT id, body FROM records WHERE kind='schedule' ORDER BY id LIMIT 1").fetchone()
  b = json.loads(body)
  b["kernels"] = b["kernels"] + b["kernels"][:1]
  dst.execute("UPDATE records SET body=? WHERE id=?", (canonical(b), rid))
  dst.commit()
  dst.close()
  rep = diff(str(copy), progress=None)
  (o,) = [o for o in rep.outcomes if o.kind == "schedule" and o.cls != "unchanged"]
  assert o.rid == rid and o.cls == "changed" and f"{len(b['kernels'])} kernels before, {len(b['kernels']) - 1} now" in o.detail

def _insert(db, kind, body, ihash=None, text=None):
  conn = sqlite3.connect(db)
  cur = conn.execute("INSERT INTO records (run_id, kind, input_hash, body) VALUES ('base', ?, ?, ?)",
                     (kind, ihash or input_hash(kind, body), text if text is not None else canonical(body)))
  conn.commit()
  conn.close()
  return cur.lastrowid

def test_tampered_truncated_and_hostile_records_are_errors_and_run_nothing(base, tmp_path):
  db, _ = base
  copy = copy_db(db, tmp_path / "bad.db")
  (rid_t, good), (rid_tr, other), (rid_ok, _), *_ = kernel_records(db)
  sentinel = tmp_path / "pwned"
  conn = sqlite3.connect(copy)
  # tampered: a record's AST text edited after capture (it stays under its old hash); truncated: half a JSON body
  conn.execute("UPDATE records SET body=? WHERE id=?", (canonical(dict(good, ast=good["ast"] + "\n")), rid_t))
  conn.execute("UPDATE records SET body=? WHERE id=?", (canonical(other)[:len(canonical(other)) // 2], rid_tr))
  conn.commit(); conn.close()
  ids = {"tampered": rid_t, "truncated": rid_tr}
  # hostile: code in the AST text, the linear program and a schedule graph, each under a correct hash
  evil = f"__import__('os').system('touch {sentinel}')"
  ids["hostile ast"] = _insert(copy, "kernel", dict(good, ast=f"ast = {evil}"))
  ids["hostile uops"] = _insert(copy, "kernel", dict(good, ast=good["ast"] + "\n", uops=f"c0 = {evil}\nast = [c0]"))
  ids["hostile graph"] = _insert(copy, "schedule", {"graph": f"ast = (lambda: {evil})()", "kernels": []})
  ids["not an object"] = _insert(copy, "kernel", dict(good, name="other"), ihash="0" * 64, text="[1, 2]")
  rep = diff(str(copy), progress=None)
  assert not sentinel.exists()
  got = {o.rid: o for o in rep.outcomes}
  assert len(rep.outcomes) == rep.total  # every record visited, none stopped the run
  for what, rid in ids.items():
    assert got[rid].cls == "bad record", (what, got[rid])
  assert "tampered" in got[ids["tampered"]].detail and "not valid JSON" in got[ids["truncated"]].detail
  assert "not allowed" in got[ids["hostile ast"]].detail and "line 1" in got[ids["hostile ast"]].detail
  assert got[rid_ok].cls == "unchanged"

def test_record_naming_what_this_version_lacks_is_incompatible(base, tmp_path):
  db, _ = base
  copy = copy_db(db, tmp_path / "bad.db")
  (_, good), *_ = kernel_records(db)
  ids = {
    "op": _insert(copy, "kernel", dict(good, ast=re.sub(r"Ops\.SINK", "Ops.FROBNICATE", good["ast"], count=1)
                                       if "Ops.SINK" in good["ast"] else "ast = UOp(Ops.FROBNICATE, dtypes.void)")),
    "dtype": _insert(copy, "kernel", dict(good, ast="c0 = UOp.const(dtypes.float128, 1.0)\nast = UOp.sink(c0)")),
    "opt": _insert(copy, "kernel", dict(good, opts=[["WARPSPEED", 0, 4]])),
    "flag": _insert(copy, "kernel", dict(good, flags=good["flags"] + [["OLD_FLAG", 1]])),
    "renderer": _insert(copy, "kernel", dict(good, renderer="tinygrad.renderer.gone.GoneRenderer(device=CPU, arch=, "
                                                           "threads=2, 0123456789abcdef)")),
    "arg class": _insert(copy, "kernel", dict(good, ast="ast = UOp(Ops.SINK, dtypes.void, (), Gone(x=1))")),
  }
  rep = diff(str(copy), progress=None)
  got = {o.rid: o for o in rep.outcomes}
  for what, rid in ids.items(): assert got[rid].cls == "incompatible", (what, got[rid].detail)
  assert "FROBNICATE" in got[ids["op"]].detail and "float128" in got[ids["dtype"]].detail

def test_html_report_is_self_contained_and_escapes_record_text(base, tmp_path, monkeypatch):
  db, _ = base
  copy = copy_db(db, tmp_path / "bad.db")
  (_, good), *_ = kernel_records(db)
  # an old source with markup in it: the report shows it as text
  conn = sqlite3.connect(copy)
  rid = conn.execute("SELECT id FROM records WHERE kind='kernel' ORDER BY id LIMIT 1").fetchone()[0]
  conn.execute("UPDATE records SET body=? WHERE id=?", (canonical(dict(good, src=good["src"] + "<script>alert(1)</script>")), rid))
  conn.commit(); conn.close()
  with watching(str(copy)) as w: rep = diff(str(copy), progress=None, limit=3)
  assert w.events == []
  page = render_html(rep)
  assert "<script>" not in page and "&lt;script&gt;" in page
  assert "LIMITED" in page and "LIMITED" in rep.summary() and len(rep.outcomes) == 3
  assert "http" not in page.split("<body>")[1]  # nothing external

def test_capture_for_other_targets_diffs_them(tmp_path):
  db = tmp_path / "t.db"
  from replay import capture
  capture.start(str(db), "nv", targets=["NV"])
  try:
    from tinygrad.codegen import get_program
    for prog in __import__("tests.replay.helpers", fromlist=["programs"]).programs()[:3]:
      for it in prog().schedule():
        if it.ast.op is Ops.SINK: get_program(it.ast, CRenderer(2))
  finally: capture.stop()
  rep = diff(str(db), target="NV", progress=None)
  nv = [o for o in rep.outcomes if o.kind == "kernel"]
  assert nv and all(o.target == "NV" and o.cls == "unchanged" for o in nv)
  assert len(nv) == DB(str(db)).count("nv", "kernel") // 2
  with pytest.raises(LookupError, match="--targets AMD"): diff(str(db), target="AMD", progress=None)

def _run(*args, env=None, timeout=600):
  e = {k: v for k, v in os.environ.items() if k not in ("CAPTURE_PROCESS_REPLAY", "REPLAY_RUN", "REPLAY_DB")}
  e.update({"SPEC": "1", "IGNORE_OOB": "1", **(env or {})})
  return subprocess.run([sys.executable, *args], cwd=ROOT, env=e, capture_output=True, text=True, timeout=timeout)

@pytest.mark.parametrize("how", ["cli", "env"])
def test_capture_under_xdist_loses_no_record_and_cli_diff_asserts_no_change(tmp_path, how):
  db, out, html = tmp_path / "x.db", tmp_path / "programs", tmp_path / "r.html"
  # the capture is the replay CLI, or CAPTURE_PROCESS_REPLAY=1 alone, around pytest with 2 workers; the independent count
  # is the program-capture plugin (tests/codegen/program_capture.py), which appends every compiled program to a file
  # per process
  pytest_cmd = [sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider", "-p",
                "tests.codegen.program_capture", "--capture-programs", str(out), "tests/tensor/test_realize.py"]
  if how == "cli": cap = _run("-m", "replay", "capture", "--", *pytest_cmd, env={"REPLAY_DB": str(db)})
  else:
    # NOTE: the plugin as `import tinygrad` loads it: the entry point where the install has it, else the start-up hook
    env = {"REPLAY_DB": str(db), "CAPTURE_PROCESS_REPLAY": "1"}
    from replay.__main__ import _entry_point_installed
    if not _entry_point_installed(): env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "replay" / "startup"), str(ROOT)])
    cap = _run(*pytest_cmd[1:], env=env)
  assert cap.returncode == 0, cap.stdout[-2000:] + cap.stderr[-2000:]
  from tests.codegen.program_capture import load_records
  independent = {(r.ast, r.renderer, tuple(tuple(f) for f in r.flags), tuple(tuple(o) for o in r.opts))
                 for r in load_records(str(out))}
  assert len(list(out.glob("*.jsonl"))) >= 2  # both workers compiled
  d = DB(str(db), create=False)
  (run,) = d.runs()
  captured = set()
  for _, _, _, body in d.rows(run.run_id, "kernel"):
    b = json.loads(body)
    captured.add((b["ast"], b["renderer"], tuple(tuple(f) for f in b["flags"]), tuple(tuple(o) for o in b["opts"])))
  assert captured == independent and len(captured) > 10
  assert d.count(run.run_id, "schedule") > 0 and d.capture_errors(run.run_id) == []
  d.close()
  rep = _run("-m", "replay", "diff", "--assert-no-change", "--html", str(html), env={"REPLAY_DB": str(db)})
  assert rep.returncode == 0, rep.stdout[-3000:] + rep.stderr[-2000:]
  assert re.search(rf"kernels \({len(captured)}, \d+ distinct kernels\): unchanged {len(captured)},", rep.stdout)
  assert html.exists()

def test_records_of_a_killed_process_are_kept(tmp_path):
  db = tmp_path / "k.db"
  # every record is committed as it is written: a process killed with SIGKILL (no exit handlers) loses none
  script = ("import os, signal\nfrom tinygrad import Tensor\nfrom tinygrad.codegen import get_program\n"
            "from tinygrad.renderer.cstyle import CRenderer\nfrom replay import capture\n"
            f"capture.start({str(db)!r}, 'killed', targets=[])\nn = 0\n"
            "for it in (Tensor.arange(12).float().reshape(3, 4).sum(1) + 1).schedule():\n"
            "  get_program(it.ast, CRenderer(2)); n += 1\n"
            f"open({str(tmp_path / 'n')!r}, 'w').write(str(n))\nos.kill(os.getpid(), signal.SIGKILL)\n")
  r = _run("-c", script)
  assert r.returncode == -9, r.stderr[-2000:]
  n = int((tmp_path / "n").read_text())
  d = DB(str(db), create=False)
  assert n >= 1 and d.count("killed", "kernel") == n and d.count("killed", "schedule") == 1

def test_kernel_too_big_to_interpret_is_changed_without_a_run(base, monkeypatch):
  from replay import compare
  db, _ = base
  monkeypatch.setattr(compare, "MAX_STEPS", 10)
  monkeypatch.setattr(compare, "NATIVE", ())  # NOTE: the bound is the PYTHON interpreter's: native runs are not bounded
  monkeypatch.setattr(CRenderer, "extra_matcher",
                      PatternMatcher([(UPat(Ops.MAX, dtypes.float32, (UPat.var("x"), UPat.var("y"))), lambda x, y: x + y)]))
  changed = [o for o in diff(str(db), progress=None).outcomes if o.cls == "changed"]
  assert changed and all("not run: the old program takes about" in o.detail for o in changed)

def test_z3_unknown_is_not_same_semantics(base, monkeypatch):
  import z3
  db, _ = base
  monkeypatch.setattr(CRenderer, "extra_matcher",
                      PatternMatcher([(UPat(Ops.MUL, dtypes.int32, (UPat.var("x"), UPat.cvar("c"))), _even_mul_split)]))
  # a solver that gives up (a timeout answers the same): no proof, so the kernel is changed, never same semantics
  monkeypatch.setattr(z3.Solver, "check", lambda self, *a: z3.unknown)
  rep = diff(str(db), progress=None)
  got = by_class(rep)
  assert "same semantics" not in got and got.get("changed")
  assert all("z3 did not prove the index math equal" in o.detail for o in rep.outcomes if o.cls == "changed")

def test_database_of_another_schema_version_is_refused(base, tmp_path):
  copy = copy_db(base[0], tmp_path / "bad.db")
  conn = sqlite3.connect(copy)
  conn.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
  conn.commit(); conn.close()
  with pytest.raises(RuntimeError, match="schema version 99"): diff(str(copy), progress=None)
  with pytest.raises(FileNotFoundError, match="capture first"): diff(str(tmp_path / "missing.db"), progress=None)

def test_nested_capture_and_diff_do_not_end_an_outer_capture(base, tmp_path):
  from replay import capture
  from tinygrad.codegen import get_program
  from tinygrad import Tensor
  outer, inner = tmp_path / "outer.db", tmp_path / "inner.db"
  ren = CRenderer(2)
  was = capture.active()  # NOTE: the suite itself may run captured (python -m replay capture -- pytest)
  def compile_one(n):
    (it,) = [it for it in (Tensor.arange(n).float() * 3).schedule() if it.ast.op is Ops.SINK]
    get_program(it.ast, ren)
  capture.start(str(outer), "outer", targets=[])
  try:
    compile_one(5)
    capture.start(str(inner), "inner", targets=[])
    compile_one(6)
    capture.stop()
    diff(str(base[0]), progress=None, limit=2)  # a diff inside a captured run records nothing
    compile_one(7)
  finally: capture.stop()
  assert capture.active() == was
  o, i = DB(str(outer), create=False), DB(str(inner), create=False)
  assert (o.count("outer", "kernel"), i.count("inner", "kernel")) == (2, 1)

def test_programs_of_renderers_replay_cannot_rebuild_are_counted_not_recorded(tmp_path, monkeypatch):
  from replay import capture
  from tinygrad.codegen import get_program
  from tinygrad import Tensor
  class Double(CRenderer): pass  # a test double: not a class replay builds renderers of
  odd = CRenderer(2)
  odd.wave = 16  # state outside what the rebuilt renderer would have: its identity does not come back
  db = tmp_path / "s.db"
  (it,) = [it for it in (Tensor.arange(9).float() + 2).schedule() if it.ast.op is Ops.SINK]
  capture.start(str(db), "s", targets=[])
  try:
    for ren in (Double(2), odd, CRenderer(2)): get_program(it.ast, ren)
    # a renderer a test patched in place (its identity unchanged): the capture is paused meanwhile (tests/conftest.py)
    with monkeypatch.context() as m:
      m.setitem(CRenderer.code_for_op, Ops.ADD, lambda a, b, dt: f"({a}-{b})")
      get_program(it.ast, CRenderer(2))
  finally: capture.stop()
  d = DB(str(db), create=False)
  skips = d.capture_skips("s")
  assert d.count("s", "kernel") == 1 and sum(skips.values()) == 2
  assert all("cannot be rebuilt from its identity" in k for k in skips)
  rep = diff(str(db), progress=None)
  assert rep.all_ok() and "not captured: 2 programs" in rep.summary() and "not captured (2)" in render_html(rep)

# ---- same semantics up to a reordering of independent nodes (the skeletons compared as DAGs) ----

def _pure_sunk(lst):
  """Every pure node of the skeleton (float math, vector constants: not index math) moved down to just before its first
  user: other positions, the same values."""
  out = list(lst)
  for u in reversed(list(lst)):
    if u.op not in replay_compare.PURE or replay_compare.is_expr(u): continue
    i = out.index(u)
    j = next((k for k in range(i + 1, len(out)) if u in out[k].src), None)
    if j is None or j == i + 1: continue
    out.insert(j - 1, out.pop(i))
  return out

def _moves(uops) -> bool:
  skel = [u for u in uops if not replay_compare.is_expr(u)]
  return [u for u in _pure_sunk(uops) if not replay_compare.is_expr(u)] != skel

def test_independent_nodes_reordered_are_same_semantics(base, monkeypatch):
  db, _ = base
  orig = codegen_program.linearize
  monkeypatch.setattr(codegen_program, "linearize", lambda sink: _pure_sunk(orig(sink)))
  expected = {f"{b['name']}#{rid}" for rid, b in kernel_records(db) if _moves(old_uops(b))}
  rep = diff(str(db), progress=None)
  got = by_class(rep)
  # NOTE: a kernel whose moved nodes are constants the C text inlines renders the same source: unchanged
  assert got.get("same semantics") and got["same semantics"] <= expected, rep.summary()
  assert set(got) <= {"same semantics", "unchanged"}, rep.summary()
  assert all("independent node(s) reordered" in o.detail for o in rep.outcomes if o.cls == "same semantics")

def test_a_load_moved_across_an_effect_is_not_the_same_dag(base):
  db, _ = base
  for _, b in kernel_records(db):
    uops = old_uops(b)
    skel = [u for u in uops if not replay_compare.is_expr(u)]
    for i, u in enumerate(skel):
      if u.op is not Ops.LOAD: continue
      e = next((k for k in range(i - 1, -1, -1) if skel[k].op not in replay_compare.PURE and skel[k].op is not Ops.LOAD), None)
      if e is None: continue
      # the LOAD moved above the effect before it (a STORE, an END, ...): it would read memory in another state
      moved = skel[:e] + [u] + skel[e:i] + skel[i + 1:]
      assert replay_compare.pair_as_dag(skel, moved) is None
      assert replay_compare.pair_as_dag(skel, list(skel)) == skel
      return
  raise AssertionError("no kernel with a LOAD after an effect")

def test_programs_of_the_python_renderer_emulating_nv_or_amd_are_recorded_and_diff_unchanged(tmp_path, monkeypatch):
  from tinygrad.codegen import get_program
  from tinygrad.runtime.ops_python import PythonRenderer
  from tests.replay.helpers import programs
  db = tmp_path / "e.db"
  asts = [a for prog in programs()[:3] for a in kernels(prog())]
  with capturing(db, "e"):
    for key in ("NV", "AMD_GFX942", ""):
      for a in asts: get_program(a, PythonRenderer(key))
  d = DB(str(db), create=False)
  assert d.capture_skips("e") == {} and d.count("e", "kernel") == 3 * len(set(asts))
  archs = {json.loads(b)["renderer"].split("arch=")[1].split(",")[0] for _, _, _, b in d.rows("e", "kernel")}
  assert archs == {"NV:sm_90", "AMD:gfx942", "PYTHON"}
  assert diff(str(db), progress=None).all_ok()
  # a wrong rule is shown by running the emulated programs
  # (added to the emulated target's own final rules, which the PYTHON renderer hands on)
  mine, own = PatternMatcher([(UPat(Ops.MAX, dtypes.float32, (UPat.var("x"), UPat.var("y"))), lambda x, y: x + y)]), \
    PythonRenderer.extra_matcher
  monkeypatch.setattr(PythonRenderer, "extra_matcher",
                      property(lambda self: mine if (o := own.fget(self)) is None else mine + o))
  rep = diff(str(db), progress=None)
  changed = [o for o in rep.outcomes if o.cls == "changed"]
  bodies = {rid: b for rid, _, _, b in DB(str(db), create=False).rows("e", "kernel")}
  assert changed and all(any(u.op is Ops.MAX for u in old_uops(json.loads(bodies[o.rid]))) for o in changed)
  # the random run (the old and new programs interpreted as the emulated target) shows it
  assert sum(bool(re.search(r"buffer data\d+\[\d+\]: old .*, new ", o.detail)) for o in changed) >= 3, rep.summary()

def test_program_with_a_nan_payload_const_is_recorded_bit_exact(tmp_path):
  # a BITCAST of a constant folds to a NaN with a payload; pyrender had no literal for it, so the capture lost the record
  from tinygrad.codegen import get_program
  from tinygrad.uop import AxisType
  import struct
  out = UOp(Ops.DEFINE_GLOBAL, dtypes.float64.ptr(4), arg=0)
  r = UOp.range(4, 0, AxisType.LOOP)
  ast = UOp.sink(out.index(r).store(UOp.const(dtypes.uint64, 0xFFF0000000000123).bitcast(dtypes.float64)).end(r))
  db = tmp_path / "nan.db"
  with capturing(db, "n"): get_program(ast, CRenderer(2))
  d = DB(str(db), create=False)
  assert d.count("n", "kernel") == 1 and d.capture_errors("n") == []
  (body,) = [json.loads(b) for _, _, _, b in d.rows("n", "kernel")]
  consts = [u.arg for u in old_uops(body) if u.op is Ops.CONST and u.dtype is dtypes.float64]
  assert [struct.pack("<d", c) for c in consts] == [struct.pack("<Q", 0xFFF0000000000123)]
  assert diff(str(db), progress=None).all_ok()
