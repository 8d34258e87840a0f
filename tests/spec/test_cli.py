"""`python -m spec check FILE [--stage ...]`: exit 0 legal, 1 illegal, 2 unreadable."""
import os, pathlib, subprocess, sys
import pytest
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp
from tinygrad.dtype import dtypes
from tinygrad.uop.pyrender import pyrender
from spec.__main__ import main

ROOT = pathlib.Path(__file__).resolve().parents[2]

def kernel():
  g0, g1 = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(16), arg=0), UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(16), arg=1)
  r = UOp.range(16, 0)
  return UOp.sink(g0.index(r).store(g1.index(r).load() + 1.0).end(r))

@pytest.fixture
def kernel_file(tmp_path):
  p = tmp_path / "k.py"
  p.write_text(pyrender(kernel()))
  return p

def test_legal_kernel_exits_0(kernel_file, capsys):
  assert main(["check", str(kernel_file), "--stage", "kernel"]) == 0
  assert "legal at the kernel stage" in capsys.readouterr().out

def test_default_stage_is_full(kernel_file, capsys):
  assert main(["check", str(kernel_file)]) == 0
  assert "full stage" in capsys.readouterr().out

def test_illegal_at_program_stage_exits_1_with_the_error(kernel_file, capsys):
  assert main(["check", str(kernel_file), "--stage", "program"]) == 1
  out = capsys.readouterr().out
  assert "ILLEGAL at the program stage" in out and "index math must be lowered" in out and "node " in out

def test_missing_file_exits_2(tmp_path, capsys):
  assert main(["check", str(tmp_path / "nope.py")]) == 2
  assert "unreadable" in capsys.readouterr().err

def test_text_outside_the_grammar_exits_2_and_runs_nothing(tmp_path, capsys):
  marker = tmp_path / "ran"
  p = tmp_path / "evil.py"
  p.write_text(f"ast = __import__('os').system('touch {marker}')\n")
  assert main(["check", str(p)]) == 2
  assert not marker.exists() and "line 1" in capsys.readouterr().err

def test_cli_runs_as_a_module(kernel_file):
  res = subprocess.run([sys.executable, "-m", "spec", "check", str(kernel_file), "--stage", "tensor"], cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, "SPEC": "1"})
  assert res.returncode == 1 and "ILLEGAL at the tensor stage" in res.stdout

# ---- how to make the file `spec check` takes (issue 23), and literals their dtype cannot hold (issue 22) ----

PROGRAM = "import sys\nfrom tinygrad import Tensor\na = Tensor([1.0, 2.0, 3.0, 4.0])\n" \
          "print('sum', ((a + 1) * a).sum().numpy(), sys.argv[1:])\nsys.exit(int(sys.argv[1]))\n"

def test_dump_writes_each_graph_of_a_program_as_check_reads_it(tmp_path):
  prog, out = tmp_path / "prog.py", tmp_path / "dump"
  prog.write_text(PROGRAM)
  res = subprocess.run([sys.executable, "-m", "spec", "dump", "--out", str(out), "--", str(prog), "3"], cwd=ROOT,
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT), "SPEC": "1"})
  # the program ran with its own arguments and its exit status is dump's
  assert res.returncode == 3 and "sum 40.0 ['3']" in res.stdout, res.stdout + res.stderr
  files = sorted(os.listdir(out))
  assert [f.split("-", 1)[1] for f in files] == ["tensor.py", "kernel.py", "program.py"], files
  for f in files:
    stage = f.split("-", 1)[1][:-3]
    assert main(["check", str(out / f), "--stage", stage]) == 0, f
  assert main(["check", str(out / files[2]), "--stage", "kernel"]) == 1

def test_check_help_says_what_the_file_is_and_how_to_make_one(capsys):
  with pytest.raises(SystemExit): main(["check", "--help"])
  out = " ".join(capsys.readouterr().out.split())
  assert "pyrender" in out and "python -m spec dump --out DIR -- prog.py" in out and "Exit status: 0 legal" in out

def test_a_literal_its_dtype_cannot_hold_is_unreadable(tmp_path, capsys):
  p = tmp_path / "c.py"
  p.write_text(f"ast = UOp.const(dtypes.int64, {2**128})\n")
  assert main(["check", str(p)]) == 2
  assert "cannot hold" in capsys.readouterr().err
