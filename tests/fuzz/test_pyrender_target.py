"""The pyrender reader's atheris target (fuzz/targets/pyrender_target.py): what counts as a finding, each shown by a
planted reader that does it. `make fuzz-parser` runs the target on the real reader for 30 s (in `make test`), the
nightly workflow for longer."""
import os, subprocess, sys, textwrap

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# each planted reader does one thing a read must not; the guard must turn each into a finding, and let the real one be
PLANTED = textwrap.dedent("""
  import os, subprocess, sys, ctypes
  sys.path.insert(0, os.path.join({repo!r}, "fuzz", "targets"))
  import pyrender_target as t
  import spec.roundtrip as rt
  real = rt.eval_pyrender
  real("ast = UOp.variable('a', 0, 1)")  # NOTE: what a first read imports (the string codec), as the target warms up
  def writes(text, *a): open(os.path.join({tmp!r}, "written"), "w").write("x")
  def swallows_write(text, *a):
    try: open(os.path.join({tmp!r}, "written2"), "a")
    except Exception: pass
    return real("ast = UOp.variable('a', 0, 1)")
  def spawns(text, *a): subprocess.run(["true"])
  def system(text, *a): os.system("true")
  def compiles(text, *a): return eval(compile("1", "x", "eval"))
  def loads(text, *a): ctypes.CDLL(None)
  def raises(text, *a): raise KeyError("not the documented error")
  def spins(text, *a):
    while True: pass
  def blows_up(text, *a): return bytearray(2 * 1024**3)
  guard = t.Guard(time_cap=1.0)
  import resource
  cap = t._address_space() + 512 * 2**20
  resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
  for fn in (writes, swallows_write, spawns, system, compiles, loads, raises, spins, blows_up, real):
    rt.eval_pyrender = fn
    try:
      t.check_one(b"ast = UOp.variable('a', 0, 1)", guard)
      print("real" if fn is real else fn.__name__, "ok")
    except BaseException as e: print("real" if fn is real else fn.__name__, "FINDING", type(e).__name__, str(e)[:300])
  print("files", sorted(os.listdir({tmp!r})))
""")

def test_each_forbidden_effect_of_a_read_is_a_finding(tmp_path):
  code = PLANTED.format(repo=REPO, tmp=str(tmp_path))
  res = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": REPO})
  out = dict(line.split(" ", 1) for line in res.stdout.splitlines())
  assert res.returncode == 0, res.stdout + res.stderr
  for name, why in [("writes", "for writing"), ("swallows_write", "for writing"), ("spawns", "subprocess.Popen"),
                    ("system", "os.system"), ("compiles", "compile"), ("loads", "ctypes.dlopen"),
                    ("raises", "KeyError"), ("spins", "TimeCapExceeded"), ("blows_up", "MemoryError")]:
    assert out[name].startswith("FINDING") and why in out[name], (name, out[name])
  assert out["real"] == "ok"
  # the hook stops the write itself, not only reports it
  assert out["files"] == "[]", out["files"]

def test_the_target_runs_in_make_test_nightly_and_in_clusterfuzzlite():
  with open(os.path.join(REPO, "Makefile")) as f: mk = f.read()
  test_rule = mk[mk.index("\ntest:"):].split("\n\n")[0]
  parser_rule = mk[mk.index("\nfuzz-parser:"):].split("\n\n")[0]
  assert "$(MAKE) fuzz-parser" in test_rule and "PARSER_SECONDS ?= 30" in mk
  assert "fuzz/targets/pyrender_target.py -max_total_time=$(PARSER_SECONDS)" in parser_rule
  with open(os.path.join(REPO, ".github", "workflows", "fuzz-nightly.yml")) as f: wf = f.read()
  assert "make fuzz-parser PARSER_SECONDS=1200" in wf
  with open(os.path.join(REPO, ".clusterfuzzlite", "build.sh")) as f: build = f.read()
  assert "fuzz/targets/pyrender_target.py" in build and "pyrender_target.dict" in build
