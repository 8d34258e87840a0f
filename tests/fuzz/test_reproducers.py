"""Hostile and malformed finding files (issue 22): `python -m fuzz repro` and `python -m fuzz report` run nothing from
them, set only the declared codegen flags (each checked like the real flag), and refuse anything else with one line
and the "bad reproducer" exit status, never 0 ("not reproduced": `git bisect run` would read it as good)."""
import json, os, subprocess, sys
import pytest
from fuzz.__main__ import main

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXIT_BAD_REPRODUCER = 128
PROGRAM = ("c0 = UOp(Ops.DEFINE_GLOBAL, dtypes.int32.ptr(4), arg=0)\nc1 = UOp.range(UOp.const(dtypes.index, 4), 0, "
           "AxisType.LOOP)\nc2 = c0.index(c1).store(UOp.const(dtypes.int32, 1)).end(c1)\nast = UOp.sink(c2)\n")

def _finding(path, state=None, env=None, level="kernel", backends=("python",)):
  d = {"format": "tinygrad-fuzz-finding/1", "message": "m", "backends": list(backends), "env": env or {},
       "signature": {"level": level, "stage": "compare", "kind": "value mismatch", "site": "", "backend": "python"},
       "state": {"graph": PROGRAM, "var_vals": {}, "opts": None, "seed": 0} if state is None else state}
  path.write_text(json.dumps(d))
  return str(path)

def _cli(args, capsys):
  """(exit status, stdout, stderr) of `python -m fuzz ARGS` run in this process."""
  try: rc = main(args)
  except SystemExit as e: rc = e.code
  out = capsys.readouterr()
  return rc, out.out, out.err

def test_repro_refuses_a_pythonpath_from_the_file_and_runs_nothing(tmp_path, capsys):
  evil = tmp_path / "evil"
  evil.mkdir()
  marker = tmp_path / "ran"
  (evil / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'w').write('pwned')\n")
  f = _finding(tmp_path / "f.json", env={"PYTHONPATH": str(evil), "SPEC": "1"})
  rc, out, err = _cli(["repro", f, "--timeout", "60"], capsys)
  assert not marker.exists(), "the file's PYTHONPATH ran code in the worker"
  assert rc == EXIT_BAD_REPRODUCER and "PYTHONPATH" in err and len(err.strip().splitlines()) == 1, (rc, out, err)

@pytest.mark.parametrize("key,value", [("CC", "/bin/sh -c 'touch /tmp/x'"), ("LD_PRELOAD", "/tmp/evil.so"),
                                       ("PATH", "/tmp"), ("DEVECTORIZE", "7"), ("SPEC", "abc")])
def test_repro_refuses_env_keys_and_values_outside_the_codegen_flags(tmp_path, capsys, key, value):
  f = _finding(tmp_path / "f.json", env={key: value})
  rc, out, err = _cli(["repro", f], capsys)
  assert rc == EXIT_BAD_REPRODUCER and f"{key}=" in err, (rc, err)
  assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err

@pytest.mark.parametrize("text", ["not json {", "[1, 2]", '{"format": "tinygrad-fuzz-finding/1"}',
                                  '{"format": "tinygrad-fuzz-finding/1", "signature": {"level": "x"}, "state": {}}'])
def test_repro_of_a_malformed_file_is_one_line_and_the_bad_reproducer_status(tmp_path, text):
  p = tmp_path / "f.json"
  p.write_text(text)
  res = subprocess.run([sys.executable, "-m", "fuzz", "repro", str(p)], cwd=REPO, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": REPO}, timeout=300)
  assert res.returncode == EXIT_BAD_REPRODUCER, (res.returncode, res.stdout, res.stderr)
  assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1 and str(p) in res.stderr, res.stderr

@pytest.mark.parametrize("state", [{"graph": "ast = __import__('os').system('true')"}, {}, {"graph": ""},
                                   {"error": "the case could not be recorded", "input": ""}])
def test_repro_of_a_graph_with_code_or_no_case_is_a_bad_reproducer_not_good(tmp_path, capsys, state):
  f = _finding(tmp_path / "f.json", state=state)
  rc, out, err = _cli(["repro", f], capsys)
  assert rc == EXIT_BAD_REPRODUCER and "not reproduced" not in out, (rc, out, err)
  assert len(err.strip().splitlines()) == 1, err

@pytest.mark.parametrize("name,text", [("campaign.json", "[1, 2]"), ("campaign.json", "{oops"),
                                       ("stats.json", '[{"t": "x"}]'), ("stats.json", '{"t": 1}')])
def test_report_of_a_malformed_campaign_is_one_line(tmp_path, capsys, name, text):
  d = tmp_path / "camp"
  (d / "findings").mkdir(parents=True)
  (d / "campaign.json").write_text("{}")
  (d / "stats.json").write_text("[]")
  (d / name).write_text(text)
  rc, out, err = _cli(["report", str(d)], capsys)
  assert rc == 2 and name in err and len(err.strip().splitlines()) == 1, (rc, out, err)
  assert not (d / "report.html").exists()

def test_report_of_a_missing_directory_is_one_line(tmp_path, capsys):
  rc, out, err = _cli(["report", str(tmp_path / "nope")], capsys)
  assert rc == 2 and "nope" in err and len(err.strip().splitlines()) == 1, (rc, out, err)

def test_repro_of_a_kernel_naming_a_huge_buffer_is_refused_before_any_allocation(tmp_path, capsys):
  # its inputs are made from the buffers' sizes: 2^40 floats would be asked of numpy (or, under overcommit, touched)
  huge = {"graph": PROGRAM.replace("dtypes.int32.ptr(4)", "dtypes.int32.ptr(1099511627776)"), "var_vals": {},
          "opts": None, "seed": 0}
  f = _finding(tmp_path / "f.json", state=huge)
  rc, out, err = _cli(["repro", f], capsys)
  assert rc == EXIT_BAD_REPRODUCER and "1099511627776 elements in all" in err and "not allocated" in err, (rc, err)
  assert len(err.strip().splitlines()) == 1, err
