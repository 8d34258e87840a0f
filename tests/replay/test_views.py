"""What the default diff shows (issue 23): the captured opts replayed and the heuristics re-run side by side, changed
kernels' outputs classified within fuzz/oracles/budget.py's ULP budget, the records of one kernel grouped, a progress line, a
report the group can read."""
import importlib, io, json, re, stat
import numpy as np
import pytest
from tinygrad import Tensor
from tinygrad.uop import Ops
from tinygrad.dtype import dtypes
from tinygrad.codegen import get_program, heuristic
from tinygrad.codegen.opt import Opt, OptOps
from tinygrad.helpers import Context
from tinygrad.renderer.cstyle import CRenderer
from spec.roundtrip import eval_pyrender
from replay import compare
from replay.__main__ import main
from replay.db import DB
from replay.diff import diff
from tests.replay.helpers import capture_programs, capturing, kernels, programs
from tests.replay.untrusted import watching

@pytest.fixture(scope="module")
def base(tmp_path_factory):
  db = tmp_path_factory.mktemp("views") / "base.db"
  capture_programs(db)
  return db

def _records(db):
  d = DB(str(db), create=False)
  ret = [(rid, json.loads(body)) for rid, _, _, body in d.rows(d.latest_run().run_id, "kernel")]
  d.close()
  return ret

def _upcast_inner_by_2(b):
  # a heuristic change: elementwise kernels upcast their contiguous axis by 2 (it was 4, else 2)
  if heuristic.reduce_axes(b.ast) or heuristic.axes_of(b.ast, heuristic.AxisType.UPCAST): return
  if (sidx := heuristic._store_idx(b.ast)) is None: return
  outs = heuristic.output_axes(b.ast)
  inner = [i for i, r in enumerate(outs) if heuristic.index_stride(sidx, r) == 1]
  if inner and (heuristic.axis_size(outs[inner[0]]) or 0) % 2 == 0: b.try_opt(Opt(OptOps.UPCAST, inner[0], 2))

def test_default_diff_shows_a_heuristic_change_with_the_opts_side_by_side(base, monkeypatch):
  same = diff(str(base), progress=None)
  assert {o.opts for o in same.outcomes if o.kind == "kernel"} == {"same"} and same.all_ok()
  assert "captured opts replayed" in same.mode and "the heuristics re-run" in same.mode
  monkeypatch.setattr(heuristic, "_upcast_inner", _upcast_inner_by_2)
  # what get_program chooses now, for every record (an independent count of the kernels whose opts change)
  ren = CRenderer(2)
  moved = {rid: (b["opts"], get_program(eval_pyrender(b["ast"]), ren).applied_opts) for rid, b in _records(base)}
  moved = {rid: v for rid, v in moved.items() if [[o.op.name, o.axis, o.arg] for o in v[1]] != v[0]}
  with watching(str(base)) as w: rep = diff(str(base), progress=None)
  assert w.events == [] and moved
  # the codegen view: nothing changed; the opts view: exactly those kernels, both sets of opts named
  assert {o.cls for o in rep.outcomes} == {"unchanged"}
  got = {o.rid: o for o in rep.outcomes if o.opts == "changed"}
  assert set(got) == set(moved), rep.summary()
  for rid, (old, new) in moved.items():
    o = got[rid]
    assert o.opts_new == " ".join(f"{x.op.name}({x.axis},{x.arg})" for x in new) and o.opts_old != o.opts_new
    assert o.opts_outputs == "agree" and "outputs agree" in o.opts_detail, o.opts_detail
  summary = rep.summary()
  assert re.search(r"other opts now: \d+ kernel\(s\)", summary) and "  |  now UPCAST(" in summary, summary
  assert "get other opts from the heuristics now" in summary.splitlines()[0] and not rep.all_ok()
  # --captured-opts is the codegen view alone: unchanged, nothing about opts
  only = diff(str(base), mode="captured", progress=None)
  assert only.all_ok() and "other opts" not in only.summary() and not any(o.opts for o in only.outcomes)

def test_opts_a_caller_gave_are_not_chosen_again(tmp_path):
  db = tmp_path / "given.db"
  ast = kernels(programs()[4]())[0]  # a matmul: the heuristics give it opts
  ren = CRenderer(2)
  assert get_program(ast, ren).applied_opts
  with capturing(db, "g"): get_program(ast, ren, ())
  (rid, body), = _records(db)
  assert body["chosen"] is False and body["opts"] == []
  rep = diff(str(db), progress=None)
  assert [o.opts for o in rep.outcomes if o.kind == "kernel"] == ["given"] and rep.all_ok()

def _sum_kernel():
  (ast,) = kernels(Tensor.empty(4, 16).sum(1))
  p = get_program(ast, CRenderer(1))
  return ast, list(p.uops)

def test_outputs_within_the_budget_agree_and_outside_it_differ():
  ast, uops = _sum_kernel()
  (s, *_) = compare.input_sets(uops)
  old = compare.run_program("k", uops, s.bufs, s.var_vals, "")
  written, dts = compare._written(uops, uops), compare._globals(uops)
  assert written == [0] and dts[0].base == dtypes.float32
  # one ulp off in one output of a 16-term float sum: within the reassociation budget
  near = {k: v.copy() for k, v in old.items()}
  near[0][1] = np.nextafter(near[0][1], np.float32(np.inf))
  a = compare.compare_outputs(ast, s, old, near, written, dts)
  assert a.ok and a.max_ulp == 1.0, a
  # far off: differs, naming the element, both values and the budget there
  far = {k: v.copy() for k, v in old.items()}
  far[0][2] += np.float32(1.0)
  b = compare.compare_outputs(ast, s, old, far, written, dts)
  assert not b.ok and re.match(r"buffer data0\[2\]: old .*, new .* \([\d.e+]+ ulp, budget [\d.e+]+ ulp\)", b.detail), b

def test_an_exact_kernel_has_no_budget_to_spend():
  # x * 2 is exact: one ulp off is a difference, not an agreement
  (ast,) = kernels(Tensor.empty(12) * 2)
  uops = list(get_program(ast, CRenderer(1)).uops)
  (s, *_) = compare.input_sets(uops)
  old = compare.run_program("k", uops, s.bufs, s.var_vals, "")
  near = {k: v.copy() for k, v in old.items()}
  near[0][3] = np.nextafter(near[0][3], np.float32(np.inf))
  a = compare.compare_outputs(ast, s, old, near, [0], compare._globals(uops))
  assert not a.ok and "budget 0 ulp" in a.detail, a

def test_input_sets_have_random_and_boundary_values_of_the_captured_shapes():
  ast, uops = _sum_kernel()
  sets = compare.input_sets(uops)
  assert len(sets) == 4 and all(set(s.bufs) == set(compare._globals(uops)) for s in sets)
  sizes = {k: int(v.size) for k, v in compare._globals(uops).items()}
  assert all({k: a.size for k, a in s.bufs.items()} == sizes for s in sets)
  assert [s.name.split(" (")[0] for s in sets] == ["random inputs, seed 0", "boundary floats", "boundary floats and ints",
                                                   "random inputs, seed 1"]
  inp = sets[1].bufs[1]
  f = np.finfo(np.float32)
  for v in (np.inf, -np.inf, f.max, -f.max, f.tiny):
    assert (inp == v).any(), v
  assert np.isnan(inp).any() and (np.signbit(inp) & (inp == 0)).any() and ((inp == 0) & ~np.signbit(inp)).any()
  # int buffers: their extremes in the last set only (ints may be indices)
  idx = [u for u in compare.input_sets([u.replace(dtype=dtypes.int32.ptr(8)) if u.op is Ops.DEFINE_GLOBAL and u.arg == 1
                                        else u for u in uops])]
  i32 = np.iinfo(np.int32)
  assert idx[1].bufs[1].max() < 4 and (idx[2].bufs[1] == i32.max).any() and (idx[2].bufs[1] == i32.min).any()

def test_records_of_one_kernel_are_grouped_and_the_summary_leads_with_distinct_kernels(tmp_path, monkeypatch):
  # the same kernels compiled under two flag settings: two records each, one kernel each
  db = tmp_path / "two.db"
  asts = [a for prog in programs()[:6] for a in kernels(prog())]
  with capturing(db, "two"):
    for devec in (0, 1):
      with Context(DEVECTORIZE=devec):
        for a in asts: get_program(a, CRenderer(2))
  monkeypatch.setitem(CRenderer.code_for_op, Ops.CMPLT, lambda a, b, dt: f"({a}<={b})")
  rep = diff(str(db), progress=None)
  differ = [o for o in rep.outcomes if o.outputs == "differ"]
  kernels_differ = {b["ast"] for rid, b in _records(db) if rid in {o.rid for o in differ}}
  assert differ and len(kernels_differ) < len(differ), [o.rid for o in differ]
  first = rep.summary().splitlines()[0]
  assert first.startswith(f"replay diff: {len(kernels_differ)} distinct kernel(s) whose outputs differ "
                          f"({len(differ)} records)"), first
  section = rep.summary().split("changed, outputs differ: ")[1]
  assert section.startswith(f"{len(kernels_differ)} kernel(s), {len(differ)} record(s)"), section[:200]
  assert re.search(r"\[records \d+, \d+; CPU\]", section), section[:2000]
  assert "changed, outputs agree" in rep.summary() or rep.output_counts()["agree"] == 0

def test_progress_is_a_line(base, monkeypatch):
  monkeypatch.setattr(importlib.import_module("replay.diff"), "PROGRESS_EVERY_S", 0.0)
  buf = io.StringIO()
  rep = diff(str(base), progress=buf)
  lines = buf.getvalue().splitlines()
  assert len(lines) == rep.total and all(re.fullmatch(r"replay diff: \d+/\d+ records, \d+ changed \(\d+ outputs "
                                                      r"differ\), \d+ failed, \d+ other opts, \d+ s", ln) for ln in lines)
  assert lines[-1].startswith(f"replay diff: {rep.total}/{rep.total} records")

def test_html_report_is_readable_by_the_group_and_written_whole(base, tmp_path, capsys):
  html = tmp_path / "out" / "r.html"
  assert main(["diff", "--db", str(base), "--html", str(html)]) == 0
  assert stat.S_IMODE(html.stat().st_mode) == 0o644 and html.read_text().endswith("</html>")
  assert [p.name for p in html.parent.iterdir()] == ["r.html"]
  assert "HTML report" in capsys.readouterr().out

def test_a_big_kernel_runs_on_as_many_input_sets_as_the_step_bound_allows(monkeypatch):
  ast, uops = _sum_kernel()
  p = ("k", "", uops)
  n = compare.steps(uops, 1)
  assert compare.run_both(ast, p, p, "PYTHON", "").detail.startswith("outputs agree exactly on 4 input set(s)")
  monkeypatch.setattr(compare, "KERNEL_STEPS", 2 * n)
  r = compare.run_both(ast, p, p, "PYTHON", "")
  assert r.outputs == "agree" and "on 2 input set(s)" in r.detail and "2 input set(s) not run" in r.detail, r
