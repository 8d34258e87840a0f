"""Batched checking (fuzz/campaign/backends.py): kernels of a batch share a compile (one shared object on cpu, one linked
shared object on llvm), yet a crash in one kernel of a batch is attributed to that kernel's graph, a kernel that does not build names
its own error, and the shortcuts taken for throughput give what the plain definitions give."""
import json, os, random, subprocess, sys
import pytest
from tinygrad.uop import Ops
from tinygrad.uop.ops import UPat, PatternMatcher
from tinygrad.dtype import dtypes
from fuzz.campaign.backends import CBackend, LLVMBackend, fit_opts
from fuzz.campaign.levels import KernelLevel
from fuzz.strategies import build_kernel, RandomChooser, KernelConfig

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

def _bool_buffer(case) -> bool:
  return any(u.op is Ops.DEFINE_GLOBAL and u.dtype.base is dtypes.bool for u in case.ast.toposort())

def _batch_with_one(pred, n: int, at: int) -> tuple[list[bytes], list]:
  """n inputs whose cases fail `pred` except the one at index `at`."""
  lvl, yes, no = KernelLevel(), [], []
  for s in range(400):
    data = random.Random(1000 + s).randbytes(2048)
    c = lvl.generate(data)
    (yes if pred(c) else no).append((data, c))
    if yes and len(no) >= n - 1: break
  picked = no[:at] + yes[:1] + no[at:n - 1]
  return [d for d, _ in picked], [c for _, c in picked]

@pytest.mark.parametrize("backend,setup", [("cpu", "wild_store_bool_kernels"),
                                           ("llvm", "wild_store_bool_kernels_llvm")])
def test_a_crash_in_one_kernel_of_a_batch_is_attributed_to_its_graph(backend, setup):
  if backend == "llvm" and (why := LLVMBackend().unavailable()) is not None: pytest.skip(f"no llvmlite: {why}")
  datas, cases = _batch_with_one(_bool_buffer, 6, 3)
  cfg = {"level": "kernel", "backends": [backend], "setup": f"tests.fuzz.planted:{setup}", "max_jobs": 0}
  env = {**os.environ, "PYTHONPATH": REPO, "SPEC": "1", "IGNORE_OOB": "1"}
  job = json.dumps({"job": 0, "op": "check", "inputs": [d.hex() for d in datas]}) + "\n"
  proc = subprocess.run([sys.executable, "-m", "fuzz.campaign.worker", json.dumps(cfg)], cwd=REPO, env=env, capture_output=True,
                        text=True, timeout=300, input=job)
  msgs = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
  notes = [m for m in msgs if m["t"] == "note"]
  assert proc.returncode == -11 and not any(m["t"] == "result" for m in msgs), (proc.returncode, proc.stderr[-2000:])
  # the batch was built as one (every kernel compiled before any ran), then the kernels before it ran and compared
  last = notes[-1]
  assert (last["item"], last["backend"], last["stage"]) == (3, backend, "run"), last
  assert {n["item"] for n in notes if n["stage"] == "compare"} == {0, 1, 2}
  # the graph the campaign records for the crash (the input of the item last announced) is the one with the bool buffer
  assert _bool_buffer(KernelLevel().generate(datas[last["item"]])) and not any(_bool_buffer(c) for c in cases[:3])

def test_a_kernel_that_does_not_compile_names_its_own_error_and_the_batch_runs(monkeypatch):
  from tinygrad.renderer.cstyle import CRenderer
  orig = CRenderer.render
  def render(self, uops, name="kernel"):
    src = orig(self, uops, name=name)
    return src.replace(f" {name}(", f" {name}(not valid C, ", 1) if name == "k2" else src
  monkeypatch.setattr(CRenderer, "render", render)
  cases = [build_kernel(RandomChooser(s), KernelConfig(dtypes=(dtypes.float32, dtypes.int32))) for s in range(5)]
  out = KernelLevel().check(cases, {"cpu": CBackend()})
  assert [bool(f) for f in out] == [False, False, True, False, False], out
  assert out[2][0].stage == "compile" and out[2][0].backend == "cpu" and "k2(not valid C" in out[2][0].message

def test_an_llvm_batch_links_into_one_shared_object_and_every_kernel_is_checked(monkeypatch):
  from tinygrad.runtime.support import compiler_llvm
  calls = []
  orig = compiler_llvm.link_shared
  monkeypatch.setattr(compiler_llvm, "link_shared", lambda objs, what="kernels": calls.append(len(objs)) or orig(objs, what))
  cases = [build_kernel(RandomChooser(s)) for s in range(5)]
  be = LLVMBackend()
  if (why := be.unavailable()) is not None: pytest.skip(f"no llvmlite: {why}")
  assert all(not f for f in KernelLevel().check(cases, {"llvm": be}))
  assert calls == [5]

def test_an_object_that_does_not_load_fails_alone(monkeypatch):
  be = LLVMBackend()
  if (why := be.unavailable()) is not None: pytest.skip(f"no llvmlite: {why}")
  comp = be._compiler
  orig = type(comp).compile_object
  # NOTE: kernel k1's object defines another name: the batch's shared object lacks k1, so each object is linked and
  # loaded alone, and only k1 fails
  monkeypatch.setattr(type(comp), "compile_object", lambda self, src: orig(self, src.replace('@"k1"', '@"other"')))
  cases = [build_kernel(RandomChooser(s)) for s in range(3)]
  out = KernelLevel().check(cases, {"llvm": be})
  assert [bool(f) for f in out] == [False, True, False], out
  assert out[1][0].stage == "load" and out[1][0].backend == "llvm" and "'k1'" in out[1][0].message

def test_an_llvm_batch_with_an_undefined_symbol_checks_the_others(monkeypatch):
  be = LLVMBackend()
  if (why := be.unavailable()) is not None: pytest.skip(f"no llvmlite: {why}")
  comp = be._compiler
  orig = type(comp).compile_object
  # NOTE: k1 calls a function nothing defines: the batch's shared object does not load, so each kernel is loaded alone
  def compile_object(self, src):
    if '@"k1"' not in src: return orig(self, src)
    src = src.replace("define ", "declare void @no_such_function()\ndefine ", 1)
    return orig(self, src.replace("entry:\n", "entry:\n  call void @no_such_function()\n", 1))
  monkeypatch.setattr(type(comp), "compile_object", compile_object)
  cases = [build_kernel(RandomChooser(s)) for s in range(3)]
  out = KernelLevel().check(cases, {"llvm": be})
  assert [bool(f) for f in out] == [False, True, False], out
  assert out[1][0].stage == "load" and "no_such_function" in out[1][0].message, out[1][0]

def test_fit_opts_keeps_what_applying_each_candidate_after_the_kept_ones_keeps():
  from tinygrad.codegen.opt import apply_opts, KernelOptError
  from tinygrad.codegen.program import prepare_kernel
  from tinygrad.renderer.cstyle import CRenderer
  from tinygrad.runtime.ops_python import PythonRenderer
  def reference(ast, ren, cands):
    ast, kept = prepare_kernel(ast), []
    for o in cands:
      try: apply_opts(ast, [*kept, o], ren)
      except KernelOptError: continue
      kept.append(o)
    return kept
  tried = 0
  for s in range(40):
    case = build_kernel(RandomChooser(s))
    if not case.opts: continue
    for ren in (CRenderer(), PythonRenderer()):
      assert fit_opts(case.ast, ren, case.opts) == reference(case.ast, ren, case.opts), (s, case.opts)
      tried += 1
  assert tried >= 20

def test_a_matcher_sum_keeps_which_rules_take_ctx():
  with_ctx = lambda ctx, x: x if ctx else None  # noqa: E731
  plain = lambda x: None  # noqa: E731
  a = PatternMatcher([(UPat(Ops.ADD, name="x"), with_ctx)])
  b = PatternMatcher([(UPat(Ops.MUL, name="x"), plain)])
  for pm in (a + b, b + a, a + b):
    assert [r.has_ctx for r in pm.rules] == [r.fn is with_ctx for r in pm.rules]
  # a rule swapped for another function (as fuzz/measure/mutants.py swaps them) is inspected afresh
  a.__init__([(UPat(Ops.ADD, name="x"), plain)])
  assert [r.has_ctx for r in a.rules] == [False]

def test_the_throughput_bench_times_a_campaign_worker():
  import importlib.util
  spec = importlib.util.spec_from_file_location("fuzz_throughput", os.path.join(REPO, "bench", "fuzz_throughput.py"))
  assert spec is not None and spec.loader is not None
  bench = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(bench)
  r = bench.measure(["python"], 4, 2, 1)
  assert r["backends"] == ["python"] and r["n"] == 4 and r["failing"] == 0 and r["cpu"] > 0, r
  assert r["min"] <= r["nodes"] <= r["max"] and {"generate", "prepare", "codegen", "run"} <= set(r["stages"]), r

def test_coverage_attributes_each_rule_to_the_case_it_first_fired_in():
  from fuzz.campaign.worker import Coverage
  from tinygrad.uop.ops import UOp, graph_rewrite, match_stats
  from tinygrad.helpers import Context
  def keep(a): return None
  pm = PatternMatcher([(UPat(Ops.ADD, name="a"), keep), (UPat(Ops.MUL, name="a"), lambda a: a.src[0])])
  x = UOp.variable("cov_x", 0, 5)
  for p in ("cov_pass_a", "cov_pass_b"): match_stats.pop(p, None)
  with Context(TRACK_MATCH_STATS=1):
    cov = Coverage()
    cov.at(0)
    graph_rewrite(x + 1, pm, name="cov_pass_a")     # ADD tried, not matched
    cov.at(0)                                       # the same case again: nothing moves
    cov.at(1)
    graph_rewrite((x + 1) * 2, pm, name="cov_pass_a")  # MUL rule matches: new for case 1; ADD seen already
    graph_rewrite(x + 2, pm, name="cov_pass_b")     # a new pass: its ADD rule is new for case 1 too
    cov.at(2)
    graph_rewrite((x + 3) * 3, pm, name="cov_pass_a")  # nothing new
    cov.flush()
  new = {i: (sorted(m), sorted(t)) for i, (m, t) in cov.new.items()}
  add = [r for r in match_stats["cov_pass_a"] if "keep" in r][0]
  mul = [r for r in match_stats["cov_pass_a"] if "keep" not in r][0]
  assert new[0] == ([], [f"cov_pass_a::{add}"])
  assert new[1] == ([f"cov_pass_a::{mul}"], sorted([f"cov_pass_a::{mul}", f"cov_pass_b::{add}"]))
  assert 2 not in new
