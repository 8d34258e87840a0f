"""Deterministic programs: `get_program(ast, renderer, opts=p.applied_opts)` gives back `p.src` for every program `p`
that tests/tensor compiles, recompiled in a fresh process (another PYTHONHASHSEED, no caches, the AST rebuilt from its
pyrender text), so that no cache or hash-consing inside one process can make it pass. Process replay relies on this."""
import json, os, pathlib, subprocess, sys
from tinygrad.codegen.record import KernelRecord, record_program, recompile
from tinygrad.codegen import get_program
from tinygrad.renderer.cstyle import CRenderer
from tests.codegen.program_capture import load_records

ROOT = pathlib.Path(__file__).resolve().parents[2]

def run(args: list[str], seed: int, **env: str) -> subprocess.CompletedProcess:
  # NOTE: SPEC=1 and no bounds proof while capturing: the checks do not change programs, and they cost the most time.
  # 2 CPU threads on every machine, so that THREAD opts are among the programs even on a single core
  e = {**os.environ, "PYTHONHASHSEED": str(seed), "SPEC": "1", "IGNORE_OOB": "1", "CPU_THREADS": "2", **env}
  return subprocess.run([sys.executable, *args], cwd=ROOT, env=e, capture_output=True, text=True, timeout=900)

def test_every_tensor_program_recompiles_identically_in_a_fresh_process(tmp_path):
  out = str(tmp_path / "programs")
  cap = run(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.codegen.program_capture",
             "--capture-programs", out, "tests/tensor"], seed=1)
  assert cap.returncode == 0, f"tests/tensor failed while capturing:\n{cap.stdout[-3000:]}\n{cap.stderr[-3000:]}"
  recs = load_records(out)
  assert len(recs) > 300, f"only {len(recs)} programs captured from tests/tensor"
  # the THREAD axes and the cut store loops (cat, pad) of the CPU are among them
  assert any(op == "THREAD" for r in recs for op, _, _ in r.opts)
  rep = run(["-m", "tests.codegen.program_capture", out], seed=2, CACHELEVEL="0", SPEC="0")
  assert rep.returncode == 0, rep.stderr[-3000:]
  summary = json.loads(rep.stdout)
  assert summary["records"] == len(recs) and summary["cut"] > 0
  assert summary["mismatches"] == [], json.dumps(summary["mismatches"][:3], indent=1)

def test_cut_kernel_reproduces_from_its_applied_opts():
  # a CPU kernel whose store loop is cut (pad + cat) gets opts for its cut form; they fit again
  from tinygrad import Tensor
  from tinygrad.uop import Ops
  from tinygrad.engine.schedule import create_schedule_with_vars
  t = Tensor.arange(24).float().reshape(4, 6)
  items, _, _ = create_schedule_with_vars(t.pad(((1, 3), (0, 2))).cat(t.pad(((0, 4), (2, 0))), dim=1).uop.sink())
  ren = CRenderer(4)
  for ast in [it.ast for it in items if it.ast.op is Ops.SINK]:
    p = get_program(ast, ren)
    again = get_program(ast, ren, p.applied_opts)
    assert (again.src, again.applied_opts) == (p.src, p.applied_opts)

def test_record_round_trips_through_json():
  from tests.codegen.test_opt import matmul_ast
  from spec.roundtrip import eval_pyrender
  ast = matmul_ast(16, 16, 16)
  p = get_program(ast, CRenderer(2))
  rec = record_program(ast, p)
  back = KernelRecord.from_json(json.loads(json.dumps(rec.to_json())))
  assert back == rec and back.applied_opts() == tuple(p.applied_opts)
  assert recompile(back, eval_pyrender(back.ast), CRenderer(2)).src == p.src

def test_recompile_refuses_another_renderer():
  import pytest
  from tests.codegen.test_opt import matmul_ast
  from spec.roundtrip import eval_pyrender
  rec = record_program(matmul_ast(), get_program(matmul_ast(), CRenderer(2)))
  with pytest.raises(ValueError, match="the renderer is"): recompile(rec, eval_pyrender(rec.ast), CRenderer(3))
