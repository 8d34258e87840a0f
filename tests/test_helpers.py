"""helpers: env flags (ContextVar, Context as context manager and decorator, getenv), and C-style cdiv/cmod."""
import math, os, subprocess, sys
from fractions import Fraction
import pytest
from tinygrad.helpers import Context, ContextVar, Ints, FlagError, getenv, cdiv, cmod, DEBUG, SPEC, BEAM

def test_context_manager_sets_and_restores():
  old, old_beam = DEBUG.value, BEAM.value
  with Context(DEBUG=3):
    assert DEBUG.value == 3 and DEBUG >= 3 and DEBUG > 2 and DEBUG == 3
    with Context(DEBUG=5, BEAM=2):
      assert DEBUG.value == 5 and BEAM.value == 2
    assert DEBUG.value == 3 and BEAM.value == old_beam
  assert DEBUG.value == old and BEAM.value == old_beam

def test_context_restores_after_exception():
  old = SPEC.value
  with pytest.raises(RuntimeError):
    with Context(SPEC=0):
      assert SPEC.value == 0
      raise RuntimeError("boom")
  assert SPEC.value == old

def test_context_as_decorator():
  @Context(DEBUG=7)
  def f(): return DEBUG.value
  old = DEBUG.value
  assert f() == 7 and DEBUG.value == old
  assert f() == 7  # reusable

def test_context_unknown_flag_names_it():
  with pytest.raises(KeyError, match="NOT_A_FLAG_XYZ"):
    with Context(NOT_A_FLAG_XYZ=1): pass

def test_flag_declared_twice_is_an_error():
  with pytest.raises(RuntimeError, match="DEBUG"): ContextVar("DEBUG", 0, allowed=Ints(0, 1))

def test_getenv_typed_by_default(monkeypatch):
  monkeypatch.setenv("TG_TEST_GETENV_INT", "12")
  monkeypatch.setenv("TG_TEST_GETENV_STR", "hello")
  monkeypatch.setenv("TG_TEST_GETENV_FLOAT", "2.5")
  assert getenv("TG_TEST_GETENV_INT") == 12
  assert getenv("TG_TEST_GETENV_STR", "") == "hello"
  assert getenv("TG_TEST_GETENV_FLOAT", 0.0) == 2.5
  assert getenv("TG_TEST_GETENV_MISSING_9", 4) == 4 and getenv("TG_TEST_GETENV_MISSING_9b", "x") == "x"

def test_contextvar_reads_env(monkeypatch):
  monkeypatch.setenv("TG_TEST_CV_FLAG", "3")
  cv = ContextVar("TG_TEST_CV_FLAG", 0, "test only", allowed=Ints(0, 9))
  try:
    assert cv.value == 3 and int(cv) == 3 and bool(cv)
    with Context(TG_TEST_CV_FLAG=0): assert not cv
  finally: del ContextVar._registry["TG_TEST_CV_FLAG"]

def trunc_ref(a: int, b: int) -> int: return math.trunc(Fraction(a, b))

def test_cdiv_cmod_truncate_like_c():
  for a in range(-25, 26):
    for b in [-7, -3, -2, -1, 1, 2, 3, 5, 8]:
      q = trunc_ref(a, b)
      assert cdiv(a, b) == q, (a, b)
      assert cmod(a, b) == a - b * q, (a, b)
      assert cmod(a, b) == 0 or (cmod(a, b) > 0) == (a > 0)
  assert cdiv(-7, 2) == -3 and cmod(-7, 2) == -1 and cdiv(7, -2) == -3 and cmod(7, -2) == 1
  big = 2**70 + 3
  assert cdiv(-big, 2) == -(big // 2) and cmod(-big, 2) == -1
  # the IR's meaning of division by zero (docs/ir.md, Semantics): x/0 = 0, x%0 = x
  assert cdiv(7, 0) == 0 and cmod(-7, 0) == -7

# ---- flag values are validated at import (issue 22) ----

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

def _import_with(env: dict[str, str]) -> subprocess.CompletedProcess:
  base = {k: v for k, v in os.environ.items() if k not in ("SPEC", "BEAM", "DEBUG", "CPU_LLVM", "DEVECTORIZE", "CPU_THREADS",
                                                           "CPU", "PYTHON", "NV", "AMD", "DEV")}
  return subprocess.run([sys.executable, "-c", "import tinygrad; from tinygrad import Device; print(Device.DEFAULT)"],
                        env={**base, "PYTHONPATH": ROOT, **env}, cwd=ROOT, capture_output=True, text=True, timeout=120)

BAD_FLAGS = [("SPEC", "abc"), ("BEAM", "abc"), ("DEBUG", "x"), ("CPU_LLVM", "abc"), ("SPEC", "9"), ("SPEC", "-1"),
             ("BEAM", "-1"), ("DEVECTORIZE", "7"), ("CPU_THREADS", "-3")]

@pytest.mark.parametrize("flag,value", BAD_FLAGS)
def test_bad_flag_value_is_refused_at_import_with_name_value_and_allowed(flag, value):
  res = _import_with({flag: value})
  last = res.stderr.strip().splitlines()[-1] if res.stderr.strip() else ""
  assert res.returncode != 0, res.stdout
  assert "FlagError" in last and flag in last and repr(value) in last and "allowed" in last, res.stderr

def test_two_device_shorthands_are_refused_naming_both():
  res = _import_with({"CPU": "1", "PYTHON": "1"})
  last = res.stderr.strip().splitlines()[-1] if res.stderr.strip() else ""
  assert res.returncode != 0 and "CPU" in last and "PYTHON" in last, res.stdout + res.stderr

def test_every_declared_flag_has_a_type_and_range_and_refuses_values_outside_it():
  for key, cv in ContextVar._registry.items():
    if key.startswith("TG_TEST_"): continue
    assert cv.allowed is not None, key
    assert cv.parse(str(cv.default) if not isinstance(cv.default, str) else cv.default) == cv.default, key
    for bad in cv.allowed.bad_samples():
      with pytest.raises(FlagError) as ei: cv.parse(bad)
      msg = str(ei.value)
      assert key in msg and repr(bad) in msg and "allowed" in msg, msg

def test_a_flag_in_the_environment_is_read_through_its_allowed_values(monkeypatch):
  monkeypatch.setenv("TG_TEST_CV_RANGE", "7")
  with pytest.raises(FlagError, match=r"TG_TEST_CV_RANGE='7' is not allowed; allowed: an integer from 0 to 3"):
    ContextVar("TG_TEST_CV_RANGE", 0, "test only", allowed=Ints(0, 3))
  assert "TG_TEST_CV_RANGE" not in ContextVar._registry
  monkeypatch.setenv("TG_TEST_CV_RANGE", " 2 ")
  try: assert ContextVar("TG_TEST_CV_RANGE", 0, "test only", allowed=Ints(0, 3)).value == 2
  finally: del ContextVar._registry["TG_TEST_CV_RANGE"]

def test_getenv_names_the_variable_of_a_bad_value(monkeypatch):
  monkeypatch.setenv("TG_TEST_GETENV_BAD", "zz")
  with pytest.raises(FlagError, match="TG_TEST_GETENV_BAD='zz'"): getenv("TG_TEST_GETENV_BAD", 0)

def test_good_values_of_the_issue_flags_are_accepted():
  res = _import_with({"SPEC": "3", "BEAM": "4", "DEBUG": "2", "CPU_LLVM": "1", "DEVECTORIZE": "2", "CPU_THREADS": "3",
                      "PYTHON": "1", "CPU": "0"})
  assert res.returncode == 0 and res.stdout.strip() == "PYTHON", res.stdout + res.stderr

def test_the_docs_table_states_what_each_flag_allows():
  import re
  text = open(os.path.join(ROOT, "docs", "env_vars.md")).read()
  rows = dict(re.findall(r"^\| `([A-Z0-9_]+)` \| [^|]* \| ((?:[^|\\]|\\.)*?) \|", text, flags=re.M))
  for key, cv in ContextVar._registry.items():
    if key.startswith("TG_TEST_"): continue
    assert rows.get(key, "").strip().replace("\\|", "|") == cv.allowed.text, (key, rows.get(key), cv.allowed.text)
