"""The VIZ recorder and trace reader, without a browser: what a trace holds, how bad traces are refused, and that the
recorder costs nothing per rewrite step when it is off."""
import json, os, subprocess, sys, threading, urllib.request, urllib.error
import pytest
from tinygrad.uop import hooks
from tinygrad.uop.ops import UOp, graph_rewrite
from tinygrad.uop.symbolic import symbolic
from tinygrad.dtype import dtypes
from tinygrad.viz import record
from tinygrad.viz.trace import load, TraceError, VERSION
from tinygrad.viz.graph import GraphBuilder
from tinygrad.viz.server import Viewer, make_server, _sig

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

def _expr(n: int) -> UOp:
  """A sum that symbolic folds step by step: x*1 + 0 + ... (each term one rule application or more)."""
  x = UOp.variable("x", 0, 100)
  acc = x
  for i in range(n): acc = (acc * 1 + 0) + (x * 0 if i % 2 else UOp.const(dtypes.index, i))
  return acc

def _steps_counted(fn):
  """Runs fn with a checkpoint that keeps each rewriter, and returns [(pass name, rw.steps)] in the order they ran."""
  seen = []
  cb = hooks.register("rewrite_start", lambda rw, root: seen.append(rw))
  try: fn()
  finally: hooks.unregister("rewrite_start", cb)
  return [(rw.name, rw.steps) for rw in seen]

def test_trace_records_each_rule_application(tmp_path):
  path = str(tmp_path / "t.jsonl")
  rec = record.start(path)
  try: counted = _steps_counted(lambda: graph_rewrite(_expr(30), symbolic, name="fold the sum"))
  finally: record.stop()
  tr = load(path)
  assert tr.complete and not tr.warnings
  passes = list(tr.passes.values())
  # NOTE: the rewriter's own counter (rw.steps) against the steps the trace holds, pass by pass
  assert [(p.name, len(p.steps)) for p in passes] == counted
  assert counted[0][1] >= 30
  for st in passes[0].steps:
    assert tr.rules[st.rule]["loc"].split(":")[0].endswith(".py") and tr.rules[st.rule]["code"]
  assert rec.path == path

def test_rebuilt_graph_after_the_last_step_is_the_output(tmp_path):
  path = str(tmp_path / "t.jsonl")
  record.start(path)
  try: out = graph_rewrite(_expr(20), symbolic, name="fold")
  finally: record.stop()
  tr = load(path)
  b = GraphBuilder(tr)
  p = next(iter(tr.passes.values()))
  fin = b.graph_at(p, len(p.steps))
  assert p.out is not None and _sig(b, fin)[fin] == _sig(b, p.out)[p.out]
  assert tr.nodes[p.out].op == out.op.name and tr.nodes[p.out].arg == repr(out.arg)
  with pytest.raises(TraceError, match="step 999 does not exist"): b.graph_at(p, 999)

def test_viz_off_makes_no_call_per_rewrite_step():
  g = _expr(40)
  def calls() -> tuple[int, list[str]]:
    names = []
    def prof(frame, event, arg):
      if event == "call": names.append(frame.f_code.co_filename)
    sys.setprofile(prof)
    try: graph_rewrite(g, symbolic, name="count calls")
    finally: sys.setprofile(None)
    return len(names), names
  calls()  # NOTE: the first run fills memo caches (rule signatures, simplified nodes)
  base, _ = calls()
  # a recorder started and stopped leaves nothing behind: the same calls, none into tinygrad/viz
  record.start(os.devnull)
  record.stop()
  after, names = calls()
  assert after == base
  assert not [n for n in names if os.path.join("tinygrad", "viz", "") in n]
  assert not hooks.rewrite_start and not hooks.launched

def test_recorded_kernel_has_its_whole_path(tmp_path):
  path = str(tmp_path / "t.jsonl")
  code = ("from tinygrad import Tensor\nimport numpy as np\n"
          "print((Tensor(np.arange(12, dtype=np.float32).reshape(3, 4)) * 2).sum(1).numpy())\n")
  env = {**os.environ, "VIZ": "1", "VIZ_SERVE": "0", "VIZ_TRACE": path, "PYTHONPATH": ROOT}
  r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
  assert r.returncode == 0, r.stderr
  assert f"trace written to {path}" in r.stderr and "-m tinygrad.viz" in r.stderr
  tr = load(path)
  kernels = [g for g in tr.groups.values() if g.kind == "kernel"]
  assert kernels and any(g.kind == "schedule" for g in tr.groups.values())
  k = kernels[0]
  assert k.ast is not None and k.program and k.source and "void" in k.source and k.target
  assert k.name in k.source
  assert [tr.passes[p].name for p in k.passes][0] == "simplify index math"

def test_profile_records_launches(tmp_path):
  path = str(tmp_path / "t.jsonl")
  code = ("from tinygrad import Tensor\nimport numpy as np\nr = np.random.default_rng(0)\n"
          "a, b = (Tensor(r.standard_normal((64, 64), dtype=np.float32)) for _ in range(2))\n(a @ b).numpy()\n"
          "from tinygrad import GlobalCounters as G\nprint(G.kernel_count, G.global_ops, G.global_mem)\n")
  env = {**os.environ, "PROFILE": "1", "VIZ_SERVE": "0", "VIZ_TRACE": path, "PYTHONPATH": ROOT}
  r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
  assert r.returncode == 0, r.stderr
  tr = load(path)
  assert not tr.passes  # PROFILE alone records launches, not rewrites
  assert tr.launches and all(ln["seconds"] > 0 for ln in tr.launches)
  # the launches are what GlobalCounters counted, and the matmul's estimate is at least one op per multiply
  kernels, ops, mem = map(int, r.stdout.split())
  assert sum(ln["flops"] for ln in tr.launches) == ops and sum(ln["bytes"] for ln in tr.launches) == mem
  assert len([ln for ln in tr.launches if not ln["name"].startswith("copy")]) == kernels
  mm = max(tr.launches, key=lambda ln: ln["flops"])
  assert mm["flops"] >= 64 ** 3 and mm["bytes"] >= 3 * 64 * 64 * 4 and mm["device"].startswith("CPU")

# ---- bad traces ----

def _good(tmp_path) -> str:
  path = str(tmp_path / "good.jsonl")
  record.start(path)
  try: graph_rewrite(_expr(5), symbolic, name="fold")
  finally: record.stop()
  return path

def test_truncated_trace_loads_with_a_warning(tmp_path):
  text = open(_good(tmp_path)).read()
  cut = tmp_path / "cut.jsonl"
  cut.write_text(text[:len(text) * 2 // 3])
  tr = load(str(cut))
  assert any("cut short" in w or "no end record" in w for w in tr.warnings)
  assert tr.passes

def test_edited_trace_names_the_line(tmp_path):
  lines = open(_good(tmp_path)).read().splitlines()
  k = next(i for i, ln in enumerate(lines) if '"t":"s"' in ln)
  bad = tmp_path / "bad.jsonl"
  bad.write_text("\n".join(lines[:k] + [lines[k].replace('"m":', '"m":"x","z":')] + lines[k + 1:]) + "\n")
  with pytest.raises(TraceError, match=rf"bad.jsonl:{k + 1}: "): load(str(bad))
  lines[k] = lines[k][:-5]  # cut short in the middle of the file: an edit, not a crash
  bad.write_text("\n".join(lines) + "\n")
  with pytest.raises(TraceError, match=rf"bad.jsonl:{k + 1}: not a JSON record"): load(str(bad))
  lines = open(_good(tmp_path)).read().splitlines()
  lines.insert(2, json.dumps({"t": "n", "i": 999999, "op": "ADD", "dt": "int", "arg": "None", "src": [123456]}))
  bad.write_text("\n".join(lines) + "\n")
  with pytest.raises(TraceError, match="refers to node 123456, which no earlier line defines"): load(str(bad))
  # JSON nested past the parser's recursion limit, as a record and as the header
  lines = open(_good(tmp_path)).read().splitlines()
  bad.write_text("\n".join(lines[:2] + ["[" * 200000] + lines[2:]) + "\n")
  with pytest.raises(TraceError, match="bad.jsonl:3: not a JSON record"): load(str(bad))
  bad.write_text("[" * 200000 + "\n")
  with pytest.raises(TraceError, match="bad.jsonl:1: not a VIZ trace"): load(str(bad))

def test_newer_trace_says_so(tmp_path):
  lines = open(_good(tmp_path)).read().splitlines()
  hdr = json.loads(lines[0])
  hdr["version"] = VERSION + 1
  new = tmp_path / "new.jsonl"
  new.write_text("\n".join([json.dumps(hdr)] + lines[1:]) + "\n")
  with pytest.raises(TraceError, match=f"format version {VERSION + 1}, newer than this viewer reads"): load(str(new))
  r = subprocess.run([sys.executable, "-m", "tinygrad.viz", "--check", str(new)], capture_output=True, text=True,
                     env={**os.environ, "PYTHONPATH": ROOT}, timeout=60)
  assert r.returncode == 2 and "newer than this viewer reads" in r.stderr

def test_not_a_trace(tmp_path):
  for text, msg in [("", "empty"), ("hello\n", "not a VIZ trace"), ('{"t":"header"}\n', "not a VIZ trace"),
                    ("\xff\xfe".encode("latin-1").decode("latin-1"), "not a VIZ trace")]:
    p = tmp_path / "x.jsonl"
    p.write_text(text, encoding="latin-1")
    with pytest.raises(TraceError, match=msg): load(str(p))
  with pytest.raises(TraceError, match="cannot open"): load(str(tmp_path / "missing.jsonl"))

def test_size_cap_is_reported(tmp_path):
  path = str(tmp_path / "t.jsonl")
  record.start(path, cap_mb=1)
  rec = record.active
  assert rec is not None
  rec.w.cap_bytes = 4000  # NOTE: a cap a few records long; VIZ_MAX_MB counts in MiB
  try: graph_rewrite(_expr(60), symbolic, name="fold")
  finally: record.stop()
  assert rec.w.capped and os.path.getsize(path) <= 4000 + 100
  tr = load(path)
  assert tr.capped_at is not None and any("size cap" in w for w in tr.warnings)

# ---- the server ----

def test_server_answers_only_local_hosts_and_names_bad_requests(tmp_path):
  srv = make_server(Viewer([_good(tmp_path)]), 0)
  threading.Thread(target=srv.serve_forever, daemon=True).start()
  base = f"http://127.0.0.1:{srv.server_address[1]}"
  try:
    idx = json.load(urllib.request.urlopen(base + "/api/index"))
    assert idx["traces"][0]["groups"][0]["passes"][0]["name"] == "fold"
    with pytest.raises(urllib.error.HTTPError) as e: urllib.request.urlopen(base + "/api/pass?t=0&p=77")
    assert e.value.code == 400 and "no pass 77" in json.load(e.value)["error"]
    req = urllib.request.Request(base + "/api/index", headers={"Host": "evil.example:80"})
    with pytest.raises(urllib.error.HTTPError) as e: urllib.request.urlopen(req)
    assert e.value.code == 403
    with pytest.raises(urllib.error.HTTPError) as e: urllib.request.urlopen(base + "/../../etc/passwd")
    assert e.value.code == 404
  finally:
    srv.shutdown()
    srv.server_close()

def test_spec_error_prints_the_command_that_opens_its_graph(tmp_path):
  from spec.verify import SpecError
  node = _expr(2)
  assert "rerun with VIZ=1" in str(SpecError("kernel", 3, node, "made up for the test"))
  path = str(tmp_path / "t.jsonl")
  record.start(path)
  try: msg = str(SpecError("kernel", 3, node, "made up for the test"))
  finally: record.stop()
  assert msg.splitlines()[-1] == f"  view:  python -m tinygrad.viz {path} --pass 'kernel spec error'"
  tr = load(path)
  p = next(iter(tr.passes.values()))
  assert p.name == "kernel spec error" and p.error == "made up for the test" and tr.nodes[p.root].op == node.op.name
  assert len(GraphBuilder(tr).toposort(p.root)) == len(node.toposort())
  assert Viewer([path], pass_name="kernel spec error").initial[0] == {"group": p.group, "pass": p.id, "step": 0}
