"""`--targets NV,AMD` compiles each target program with the target's toolchain at capture (compile-only: NVRTC + ptxas,
llvmlite + LLD), and the diff compiles a new source that differs: one that no longer compiles is a failure."""
import json
import pytest
from tinygrad import Tensor
from tinygrad.uop import Ops
from tinygrad.codegen import get_program
from tinygrad.renderer.cstyle import CRenderer
from tinygrad.renderer.cuda import CUDARenderer
from tinygrad.device import DeviceOpenError
from replay.db import DB
from replay.diff import diff
from tinygrad.runtime import targets as registry
from tests.replay.helpers import copy_db, capturing, kernels

def _toolchains() -> list[str]:
  ret = []
  for t in ("NV", "AMD"):
    try: registry.compiler(t, registry.default_arch(t))
    except DeviceOpenError: continue
    ret.append(t)
  return ret

@pytest.fixture(scope="module")
def captured(tmp_path_factory):
  targets = _toolchains()
  if not targets: pytest.skip("neither the NV (nvidia-cuda-nvrtc, nvidia-cuda-nvcc) nor the AMD (llvmlite, ziglang) "
                              "compile-only toolchain is installed")
  db = tmp_path_factory.mktemp("tc") / "t.db"
  with capturing(db, "t", targets):
    for t in ((Tensor.arange(12).float().reshape(3, 4) + 1).sum(1), Tensor.arange(8).float().exp2() * 2):
      for ast in kernels(t): get_program(ast, CRenderer(2))
  return db, targets

def _records(db, target):
  d = DB(str(db), create=False)
  ret = [json.loads(b) for _, _, _, b in d.rows("t", "kernel")]
  d.close()
  return [b for b in ret if f"(device={target}," in b["renderer"]]

def test_target_programs_are_compiled_at_capture_and_diff_unchanged(captured):
  db, targets = captured
  for t in targets:
    recs = _records(db, t)
    assert recs and all(r["compile"]["ok"] and r["compile"]["bytes"] > 0 for r in recs), (t, recs[0].get("compile"))
    rep = diff(str(db), target=t, progress=None)
    assert rep.all_ok() and rep.counts("kernel")["unchanged"] == len(recs) and rep.not_compiling == 0

def test_new_source_that_does_not_compile_is_failed_with_the_compile_error(captured, monkeypatch):
  db, targets = captured
  if "NV" not in targets: pytest.skip("no NV compile-only toolchain (nvidia-cuda-nvrtc, nvidia-cuda-nvcc)")
  # the CUDA text of ADD spelled with an undeclared function: the C renderer's text is untouched
  monkeypatch.setitem(CUDARenderer.code_for_op, Ops.ADD, lambda a, b, dt: f"not_a_function({a}, {b})")
  rep = diff(str(db), target="NV", progress=None)
  failed = [o for o in rep.outcomes if o.cls == "failed"]
  assert failed and all("does not compile for NV (the captured one did)" in o.detail and "not_a_function" in o.detail
                        for o in failed), rep.summary()

def test_program_that_did_not_compile_at_capture_is_counted(captured, tmp_path):
  import sqlite3
  from replay.db import canonical
  db, targets = captured
  copy = copy_db(db, tmp_path / "c.db")
  dst = sqlite3.connect(copy)
  t = targets[0]
  rid, body = next((rid, b) for rid, _, _, b in DB(str(db), create=False).rows("t", "kernel") if f"(device={t}," in b)
  b = json.loads(body)
  # the compile result is an output of the capture (not hashed): an old toolchain that rejected the program
  dst.execute("UPDATE records SET body=? WHERE id=?", (canonical(dict(b, compile={"ok": False, "error": "old"})), rid))
  dst.commit()
  dst.close()
  rep = diff(str(copy), target=t, progress=None)
  assert rep.not_compiling == 1 and "1 captured program(s) did not compile" in rep.summary()
