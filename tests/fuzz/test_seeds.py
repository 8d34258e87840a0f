"""Real models' kernels as kernel-level seeds (fuzz/seeds.py, fuzz/gen/seeded.py, docs/fuzz.md): seeds extracted from a
replay capture of a small model run load as kernel cases, a short campaign mutating them runs clean, and a seed file is
untrusted input (read exec-free, refused with a SeedError naming the file)."""
import json, os, random, sqlite3, subprocess, sys
import pytest
from tinygrad.uop.pyrender import pyrender
from fuzz.seeds import read_seed, read_seeds, extract, SeedError, MAX_SEED_BYTES
from fuzz.gen.seeded import fit, points, mutate_kernel
from fuzz.gen.choosers import BytesChooser
from fuzz.campaign.levels import KernelLevel, SeededKernelLevel, SEED_TAG
from fuzz.campaign.run import CampaignConfig, run_campaign
from replay.db import DB, parse_record

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

@pytest.fixture(scope="module")
def model_db(tmp_path_factory) -> str:
  """A replay capture of the zoo's GPT-2 block's forward (tiny sizes) on CPU."""
  db = str(tmp_path_factory.mktemp("seeds") / "models.db")
  env = {**os.environ, "PYTHONPATH": ROOT}
  cmd = [sys.executable, "-m", "replay", "capture", "--db", db, "--run", "gpt2", "--", sys.executable, "-m",
         "tinygrad.models", "--models", "gpt2", "--size", "tiny", "--forward-only"]
  res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
  assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
  return db

@pytest.fixture(scope="module")
def seed_dir(model_db, tmp_path_factory) -> str:
  d = str(tmp_path_factory.mktemp("seeds") / "kernel")
  res = extract(model_db, d)
  assert res.written >= 5 and not res.skipped, str(res)
  return d

def test_seeds_are_the_captured_kernels(model_db, seed_dir):
  db = DB(model_db, create=False)
  asts = {parse_record(*row).ast for row in db.rows("gpt2", "kernel")}  # type: ignore[union-attr]
  seeds = read_seeds(seed_dir)
  # one seed per distinct kernel AST of the run, each the captured graph read back
  level = KernelLevel()
  assert {pyrender(level.from_state({"graph": a}).ast) for a in asts} == {pyrender(c.ast) for c in seeds.values()}
  assert all(level.valid(c) for c in seeds.values())
  # extracting again keeps the files there
  again = extract(model_db, seed_dir)
  assert again.written == 0 and again.existing == len(seeds)

def test_a_seeded_case_starts_from_its_seed(seed_dir):
  seeds = list(read_seeds(seed_dir).values())
  big = max(seeds, key=lambda c: points(c.ast))
  # zeros: the seed itself, its ranges halved until it fits the seeded size (a subset of its points)
  lv = SeededKernelLevel(big)
  case = lv.generate(b"")
  assert case.ast is fit(big.ast, 4096) and case.opts == big.opts and points(case.ast) <= max(4096, 1)
  assert mutate_kernel(BytesChooser(b""), big, lambda a: True, max_points=points(big.ast)).ast is big.ast
  # random choices: other kernels, every one legal
  rng = random.Random(0)
  muts = [SeededKernelLevel(s).generate(rng.randbytes(512)) for s in seeds for _ in range(3)]
  assert sum(m.ast is not fit(s.ast, 4096) for m, s in zip(muts, [s for s in seeds for _ in range(3)])) > len(seeds)
  assert all(KernelLevel().valid(m) for m in muts)

def test_a_campaign_mutates_the_seeds_clean(seed_dir, tmp_path):
  n = len(read_seeds(seed_dir))
  cfg = CampaignConfig(out=str(tmp_path / "camp"), minutes=10, backends=("cpu", "python"), jobs=1, levels=("kernel",),
                       seeds=seed_dir, max_cases=n + 16, mutate=1.0, progress=False, step_timeout=300)
  summ = run_campaign(cfg)
  assert summ.seeded == n + 16, str(summ)   # seeds as they are and mutations of the corpus (only seeds join it)
  assert summ.findings == {}, str(summ)
  assert summ.corpus > 0 and summ.rules_matched > 0

def test_extract_names_the_runs_and_skips_bad_records(model_db, tmp_path):
  with pytest.raises(SeedError, match="no run nope"): extract(model_db, str(tmp_path / "a"), ["nope"])
  # a tampered record (its input changed after capture) is counted under its reason, not written
  db = str(tmp_path / "t.db")
  with sqlite3.connect(model_db) as src, sqlite3.connect(db) as dst: src.backup(dst)
  with sqlite3.connect(db) as c:
    rid, body = c.execute("SELECT id, body FROM records WHERE kind='kernel' ORDER BY id LIMIT 1").fetchone()
    rec = json.loads(body)
    rec["ast"] = "x = 1\n" + rec["ast"]
    c.execute("UPDATE records SET body=? WHERE id=?", (json.dumps(rec), rid))
  res = extract(db, str(tmp_path / "b"))
  assert sum(res.skipped.values()) == 1 and "bad record" in next(iter(res.skipped)), str(res)

def test_worker_and_parent_refuse_an_unknown_seed_tag(seed_dir):
  from fuzz.campaign.levels import DirectedLevels
  dl = DirectedLevels(KernelLevel(), seeds=read_seeds(seed_dir))
  with pytest.raises(ValueError, match="seed 'nope'"): dl.get(SEED_TAG + "nope")

@pytest.mark.parametrize("body,why", [
  (b"\xff\xfe not utf-8", "not UTF-8 JSON"),
  (b'{"graph": ', "not UTF-8 JSON"),
  (b"[1, 2]", "not a kernel case"),
  (b'{"graph": 5}', "not a kernel case"),
  (b'{"graph": "ast = UOp.sink()", "seed": "x"}', "'seed' must be an int"),
  (b'{"graph": "__import__(\'os\').system(\'touch PWNED\')"}', "PyrenderSyntaxError"),
  (b'{"graph": "ast = UOp.const(dtypes.float, 1.0)"}', "root is a CONST"),
  (b'{"graph": "ast = UOp.sink()", "var_vals": {"a": "1"}}', "var_vals"),
  (b'{"graph": "ast = UOp.sink()", "opts": [["NOPE", 0, 1]]}', "ValueError"),
  (b"[" * 100000 + b"]" * 100000, "not UTF-8 JSON: maximum recursion depth"),
  # a SINK whose range is never ended: read, but not a legal kernel
  (b'{"graph": "c0 = UOp.range(4, 0, AxisType.LOOP)\\nc1 = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(4), arg=0)'
   b'.index(c0).store(UOp.const(dtypes.float32, 1.0))\\nast = UOp.sink(c1)"}', "not a legal kernel"),
  # a legal kernel naming a buffer of 2^40 floats: its inputs would be made from that size
  (b'{"graph": "c0 = UOp.range(4, 0, AxisType.LOOP)\\nc1 = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(1099511627776), '
   b'arg=0).index(c0).store(UOp.const(dtypes.float32, 1.0)).end(c0)\\nast = UOp.sink(c1)"}',
   "1099511627776 elements in all.*not allocated"),
])
def test_a_bad_seed_is_a_seed_error_naming_the_file(tmp_path, body, why, monkeypatch):
  monkeypatch.chdir(tmp_path)
  p = tmp_path / "bad.json"
  p.write_bytes(body)
  with pytest.raises(SeedError, match=why) as e: read_seed(str(p))
  assert str(p) in str(e.value)
  assert not (tmp_path / "PWNED").exists()

def test_an_oversized_seed_is_refused_before_it_is_parsed(tmp_path):
  p = tmp_path / "big.json"
  p.write_bytes(b'{"graph": "' + b" " * MAX_SEED_BYTES + b'"}')
  with pytest.raises(SeedError, match=f"larger than {MAX_SEED_BYTES}"): read_seed(str(p))

def test_fuzz_run_refuses_a_bad_seed_directory(tmp_path, capsys):
  from fuzz.__main__ import main
  (tmp_path / "x.json").write_text(json.dumps({"graph": "not pyrender"}))
  (tmp_path / "empty").mkdir()
  for d, msg in ((tmp_path, "x.json"), (tmp_path / "missing", "not a directory"), (tmp_path / "empty", "no seed files")):
    with pytest.raises(SystemExit) as e:
      main(["run", "--levels", "kernel", "--seeds", str(d), "--out", str(tmp_path / "o")])
    assert e.value.code == 2 and msg in capsys.readouterr().err
  assert not (tmp_path / "o").exists()

def test_seeds_cli_names_an_unreadable_database(tmp_path, capsys):
  from fuzz.__main__ import main
  bad = tmp_path / "not.db"
  bad.write_bytes(b"this is not sqlite" * 100)
  assert main(["seeds", "--db", str(bad), "--out", str(tmp_path / "s")]) == 2
  assert str(bad) in capsys.readouterr().err
