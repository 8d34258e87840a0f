"""The rule-guided scheduler (fuzz/campaign/scheduler.py): features and buckets, choice boundaries, which inputs join the corpus,
rare-rule energy, mutations at choice boundaries, the bandit share of fresh inputs, and the targets' --scheduled mode."""
import collections, glob, json, os, random, subprocess, sys
import pytest
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp
from tinygrad.dtype import dtypes
from fuzz.campaign.scheduler import Scheduler, Seed, ChoiceRecorder, features, bucket, shape_features, recorder_marks
from fuzz.strategies import IndexExprConfig, RandomChooser, build_index_expression
from fuzz.campaign.levels import SymbolicLevel
from spec.shared_spec import is_masked

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

def _sched(**kw):
  return Scheduler(64, lambda d: list(range(0, len(d), 2)), random.Random(0), **kw)

def test_counts_fall_in_afl_buckets_and_are_features_with_the_rule():
  assert [bucket(n) for n in (1, 2, 3, 4, 7, 8, 15, 16, 31, 32, 127, 128, 10**6)] == [0, 1, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7]
  assert features({"a": 5, "b": 1, "c": 0}) == {"a", "a#3", "b", "b#0"}

def test_choice_recorder_marks_where_each_choice_starts():
  ch = ChoiceRecorder(bytes(range(10)))
  ch.integer(0, 3)        # one byte
  ch.integer(5, 5)        # no byte: no choice
  ch.integer(0, 1000)     # two bytes
  ch.choice("abc")        # one byte
  assert ch.marks == [0, 1, 3] and ch.used == 4
  ch.integer(0, 2**40)    # six bytes, past the end: read as zeros, and not a mark of this input
  assert ch.marks == [0, 1, 3, 4] and ch.used == 10

def test_an_input_joins_the_corpus_only_with_a_new_feature_trimmed_to_what_it_read():
  s = _sched()
  assert s.feedback(b"abcdef", {"r1": 1}, used=3) and s.corpus[-1].data == b"abc"
  assert not s.feedback(b"xyz", {"r1": 1}, used=3)
  # the same rule more often is a new bucket; a new shape feature counts too
  assert s.feedback(b"qqqq", {"r1": 9}, used=2)
  assert s.feedback(b"zz", {"r1": 1}, used=2, shape={"CMPLT:uint8"}) and len(s.corpus) == 3
  assert s.hits["r1"] == 4 and s.corpus[0].feats == frozenset({"r1", "r1#0"})

def test_seeds_with_rare_features_get_more_mutations():
  s = _sched()
  s.feedback(b"common", {"c": 1}, used=6)
  s.feedback(b"rare", {"r": 1}, used=4)
  for _ in range(200): s.feedback(b"other", {"c": 1}, used=5)
  picks = collections.Counter(s.pick() for _ in range(2000))
  assert picks[1] > 5 * picks[0], picks

def test_change_choices_changes_bytes_inside_choice_spans_only():
  s = _sched()
  seed = Seed(bytes(40), [0, 4, 10, 11, 30], frozenset())
  for _ in range(200):
    out = s.change_choices(seed, seed)
    assert len(out) == 40
    diff = [i for i in range(40) if out[i] != 0]
    starts = {lo for lo in seed.marks if any(lo <= i < (seed.marks + [40])[seed.marks.index(lo) + 1] for i in diff)}
    assert len(starts) <= 4

def test_mutations_keep_a_prefix_of_choices_and_splice_at_boundaries():
  s = _sched()
  a = Seed(b"A" * 20, [0, 5, 10, 15], frozenset())
  b = Seed(b"B" * 20, [0, 7, 14], frozenset())
  for _ in range(100):
    t = s.redraw_tail(a, b)
    assert any(t[:m] == a.data[:m] and (m == 0 or t[m - 1:m] == b"A") for m in a.marks)
    sp = s.splice(a, b)
    assert any(sp == a.data[:m] + b.data[o:] for m in a.marks for o in b.marks)
    d = s.delete_choice(a, b)
    assert len(d) == 15
    ins = s.insert_choice(a, b)
    assert len(ins) in (25,) and any(ins[:m] == a.data[:m] and ins[m + 5:] == a.data[m:] for m in a.marks)

def test_fresh_share_follows_what_pays_within_bounds():
  s = _sched()
  assert s.fresh_share() == 1.0                         # an empty corpus: every input is fresh
  s.feedback(b"seed", {"r": 1}, used=4)
  for i in range(500):
    d = s.next()
    # only fresh inputs find something new
    s.feedback(d, {f"f{i}": 1} if s._origin.get(d, -1) < 0 else {"r": 1}, used=4)
  assert s.fresh_share() == s.fresh_max
  s2 = _sched()
  s2.feedback(b"seed", {"r": 1}, used=4)
  for i in range(500):
    d = s2.next()
    s2.feedback(d, {"r": 1} if s2._origin.get(d, -1) < 0 else {f"m{i}": 1}, used=4)
  assert s2.fresh_share() == s2.fresh_min

def test_shape_features_name_ops_with_the_dtype_they_compute_on():
  u = UOp.variable("u", 0, 255, dtypes.uint8)
  e = ((u + UOp.const(dtypes.uint8, 3)) < UOp.const(dtypes.uint8, 9)).cast(dtypes.float32)
  assert shape_features(e) == {"ADD:uint8", "CMPLT:uint8", "CAST:bool->float32"}
  assert shape_features(None) == set()

def test_marks_of_a_level_are_the_choices_its_generator_read():
  level = SymbolicLevel(IndexExprConfig())
  data = random.Random(3).randbytes(256)
  marks = recorder_marks(level.from_chooser)(data)
  assert marks and marks == sorted(set(marks)) and marks[0] == 0 and marks[-1] < 256
  # rebuilding from the same bytes builds the same case (the marks are of that case)
  assert level.generate(data) is level.generate(data)

def test_pad_coordinates_nest_gates_as_views_compose():
  # a pad of a pad: a gated coordinate whose value is built from another gated coordinate
  cfg = IndexExprConfig(ops={"add": 1, "pad": 3})
  nested = 0
  for i in range(100):
    e, _ = build_index_expression(RandomChooser(i), cfg)
    nested += any(is_masked(u) and any(is_masked(v) for v in u.src[1].toposort()) for u in e.toposort())
  assert nested >= 20, nested

def test_scheduled_target_runs_grows_a_corpus_dir_and_writes_stats(tmp_path):
  corpus = tmp_path / "corpus"
  corpus.mkdir()
  (corpus / "given").write_bytes(random.Random(1).randbytes(256))
  res = subprocess.run([sys.executable, os.path.join(REPO, "fuzz", "targets", "symbolic_target.py"), "--scheduled",
                        "-runs=150", "-seed=2", f"--stats={tmp_path}/st", str(corpus)], cwd=REPO, capture_output=True,
                       text=True, timeout=240, env={**os.environ, "PYTHONPATH": REPO})
  assert res.returncode == 0, res.stderr[-3000:]
  files = glob.glob(f"{tmp_path}/st.*")
  with open(files[0]) as f: st = json.load(f)
  assert st["mode"] == "scheduled" and st["inputs"] == 150 and st["rules"]
  assert len(os.listdir(corpus)) > 2 and "corpus" in res.stdout

def test_of_seeds_equally_rare_the_cheaper_one_is_picked_more():
  s = _sched()
  s.feedback(b"slow", {"a": 1}, used=4, cost=1.0)
  s.feedback(b"fast", {"b": 1}, used=4, cost=0.01)
  for _ in range(50): s.feedback(b"x", {}, used=1, cost=0.1)
  picks = collections.Counter(s.pick() for _ in range(2000))
  assert picks[1] > 4 * picks[0], picks

def test_the_cheapest_holder_of_a_feature_is_favored_and_a_cheaper_one_joins_for_a_rare_rule():
  s = _sched()
  s.feedback(b"big", {"rare": 1, "c": 1}, used=3, cost=1.0)
  assert s.top == {"rare": 0, "rare#0": 0, "c": 0, "c#0": 0}
  # the same rare rule for under half the cost: it joins, and becomes the favored seed of what it reaches
  assert s.feedback(b"small", {"rare": 1}, used=5, cost=0.1) and len(s.corpus) == 2
  assert s.top["rare"] == 1 and s.top["c"] == 0
  # not cheaper by half, or a common rule: it does not join
  assert not s.feedback(b"same", {"rare": 1}, used=4, cost=0.08)
  for _ in range(s.rare + 1): s.feedback(b"x", {"c": 1}, used=1, cost=0.5)
  assert not s.feedback(b"tiny", {"c": 1}, used=4, cost=1e-6)

def test_a_seed_favored_for_nothing_gets_a_tenth_of_the_energy():
  s = _sched()
  s.feedback(b"slow", {"a": 1}, used=4, cost=1.0)
  s.feedback(b"fast", {"a": 1}, used=4, cost=0.4)
  assert s.top["a"] == 1 and len(s.corpus) == 2
  picks = collections.Counter(s.pick() for _ in range(2000))
  assert picks[1] > 6 * picks[0], picks

def test_rare_rules_outweigh_rare_shapes():
  s = _sched()
  s.feedback(b"shape", {"c": 1}, used=5, shape={"CAST:fp8e4m3->uint16"})
  s.feedback(b"rule", {"r": 1}, used=4)
  for _ in range(50): s.feedback(b"x", {"c": 1}, used=1)
  assert s.corpus[0].shape == frozenset({"CAST:fp8e4m3->uint16"}) and s.corpus[1].feats == frozenset({"r", "r#0"})
  picks = collections.Counter(s.pick() for _ in range(2000))
  assert picks[1] > 3 * picks[0], picks

def test_only_new_rule_features_pay_the_bandit():
  s = _sched()
  s.feedback(b"seed", {"r": 1}, used=4)
  before = s.fresh.finds
  s.feedback(b"fresh", {"r": 1}, used=4, shape={"ADD:uint8"})
  assert s.fresh.finds < before + 1 and len(s.corpus) == 2

# ---- directed generation ----

def test_pattern_ops_are_every_op_a_rule_pattern_names():
  from tinygrad.uop import Ops
  from tinygrad.uop.ops import UPat
  from fuzz.campaign.scheduler import pattern_ops
  p = UPat(Ops.WHERE, dtypes.bool, src=(UPat.var("c"), UPat.const(dtypes.bool, False), UPat.const(dtypes.bool, True)))
  assert pattern_ops(p) == {Ops.WHERE, Ops.CONST}
  assert pattern_ops(UPat(Ops.IDIV, src=(UPat(Ops.IDIV, src=(UPat.var("x"), UPat.cvar("a"))), UPat.cvar("b")))) == \
    {Ops.IDIV, Ops.CONST, Ops.VCONST}

def test_rule_ops_know_the_symbolic_rules_by_their_hit_key():
  from tinygrad.uop import Ops
  from fuzz.campaign.scheduler import rule_ops
  from fuzz.campaign.scheduler import rule_key
  ops = rule_ops(rule_key)
  div_div = [k for k in ops if k.startswith("fold_div_div (symbolic.py:")]
  assert div_div and ops[div_div[0]][0] >= {Ops.IDIV, Ops.CONST}
  flip = [k for k in ops if k.startswith("_cond_not (symbolic.py:")]
  assert flip and ops[flip[0]] == ({Ops.WHERE, Ops.CONST}, {dtypes.bool}, False)
  # a pattern that binds a name twice asks for a repeated operand
  self_div = [k for k in ops if k.startswith("fold_self_div (symbolic.py:")]
  assert self_div and ops[self_div[0]][2] and not ops[div_div[0]][2]

RULE_KEYS = """
import json
from fuzz.campaign.levels import DirectedLevels, KernelLevel
lower = __import__("sys").argv[1] == "1"
if lower:
  # a process that has lowered a kernel on the LLVM path: its renderer made its own matcher
  from tinygrad.renderer.llvmir import CPULLVMRenderer
  from tinygrad.codegen import get_program
  from tinygrad.uop import Ops
  from tinygrad.uop.ops import UOp
  from tinygrad.dtype import dtypes
  out, a = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(64), arg=0), UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(64), arg=1)
  r = UOp.range(64, 0)
  keep = CPULLVMRenderer(vector_bits=512, vector_math=True)
  get_program(UOp.sink(out.index(r).store(a.index(r).load() * 2).end(r)), keep)
print(json.dumps(sorted(DirectedLevels(KernelLevel()).aims)))
"""

def test_a_fresh_process_knows_the_rules_a_process_that_lowered_on_llvm_knows():
  # a campaign's parent that had built an LLVM renderer directed inputs at a rule of its matcher (a lambda of
  # llvm_matcher), which a fresh worker did not have: "a directed input names rule ..., which this process has not"
  got = [json.loads(subprocess.run([sys.executable, "-c", RULE_KEYS, flag], capture_output=True, text=True, check=True,
                                   timeout=300).stdout) for flag in ("0", "1")]
  assert any("llvm_vectorize.py" in k for k in got[0])
  assert got[0] == got[1]

def test_director_aims_at_tried_unmatched_rules_and_tires_of_one_that_never_comes():
  from tinygrad.uop import Ops
  from fuzz.campaign.scheduler import Director
  aim = lambda *ops: (frozenset(ops), frozenset(), False)  # noqa: E731
  d = Director({"a": aim(Ops.IDIV), "b": aim(Ops.WHERE), "c": aim(Ops.ADD), "x": aim()}, random.Random(0))
  # c was hit, x has no ops, z was never tried: only a and b are aims
  aims = collections.Counter(d.pick({"a", "b", "c", "x"}, {"c": 3})[0] for _ in range(400))
  assert set(aims) == {"a", "b"}
  d.tries.clear()
  for _ in range(300): d.pick({"a"}, {})
  aims = collections.Counter(d.pick({"a", "b", "c"}, {"c": 1})[0] for _ in range(100))
  assert aims["b"] > 4 * aims["a"], aims
  assert d.pick({"c"}, {"c": 1}) is None

def test_directed_kernel_config_weighs_up_the_ops_of_a_pattern_and_keeps_the_rest():
  from tinygrad.uop import Ops
  from fuzz.gen.kernels import KernelConfig, directed_config
  base = KernelConfig()
  cfg = directed_config(base, {Ops.IDIV, Ops.WHERE}, boost=5)
  assert cfg.int_ops["idiv"] == 5 * base.int_ops["idiv"] and cfg.int_ops["affine"] == 5 * base.int_ops["affine"]
  assert cfg.bool_ops["where"] == 5 * base.bool_ops["where"] and cfg.float_ops["add"] == base.float_ops["add"]
  assert all(w > 0 for t in (cfg.int_ops, cfg.float_ops, cfg.bool_ops) for w in t.values())
  assert base.int_ops["idiv"] == KernelConfig().int_ops["idiv"] and cfg.dtypes == base.dtypes
  b = directed_config(base, {Ops.WHERE}, [dtypes.bool, dtypes.index], boost=3)
  assert b.dtypes.count(dtypes.bool) == 3 and dtypes.index not in b.dtypes and set(b.dtypes) == set(base.dtypes)
  assert b.p_repeat == base.p_repeat < directed_config(base, {Ops.IDIV}, repeat=True).p_repeat

def _rule_pats(prefix):
  from fuzz.campaign.scheduler import rule_patterns
  from fuzz.campaign.scheduler import rule_key
  pats = rule_patterns(rule_key)
  keys = [k for k in pats if k.startswith(prefix)]
  assert len(keys) == 1, keys
  return pats[keys[0]]

@pytest.mark.parametrize("prefix,none", [("_cond_not (symbolic.py:", 0), ("fold_self_div (symbolic.py:", 0),
                                         ("<lambda> (symbolic.py:", 1)])
def test_a_directed_config_builds_what_the_rule_pattern_matches_and_stays_legal(prefix, none):
  # where(c, False, True) and x // x (one node twice) are shapes random trees almost never make; built from the
  # rule's own pattern they come up in most directed kernels, and every kernel still passes kernel_spec
  from fuzz.gen.kernels import KernelConfig, directed_config, build_kernel
  from fuzz.campaign.levels import KernelLevel
  from fuzz.strategies import BytesChooser
  from fuzz.campaign.scheduler import rule_ops
  from fuzz.campaign.scheduler import rule_key
  if none:
    # x.ne(True).ne(True) (bool): the first <lambda> rule whose pattern is a CMPNE of a CMPNE
    ops = rule_ops(rule_key)
    prefix = next(k for k in ops if k.startswith(prefix) and ops[k][0] == {Ops.CMPNE, Ops.CONST})
  pats = _rule_pats(prefix)
  cfg = directed_config(KernelConfig(), set(), patterns=pats, p_pattern=0.5)
  lv, plain, hit, hit_plain = KernelLevel(), KernelConfig(), 0, 0
  for i in range(30):
    data = random.Random(i).randbytes(2048)
    case = build_kernel(BytesChooser(data), cfg)
    assert lv.valid(case)
    hit += any(p.match(u, {}) for u in case.ast.toposort() for p in pats)
    hit_plain += any(p.match(u, {}) for u in build_kernel(BytesChooser(data), plain).ast.toposort() for p in pats)
  assert hit >= 10 and hit >= 3 * hit_plain, (hit, hit_plain)

def test_a_pattern_that_cannot_give_a_value_gives_nothing_and_the_tree_is_drawn_as_usual():
  # lift_invalid's pattern is index arithmetic with an Invalid source and fold_invalid_first's a WHERE with an
  # Invalid branch: no value of a kernel's dtypes is one, so instance() gives None and expr() draws as usual
  from fuzz.gen.kernels import KernelConfig, ALL_DTYPES, _KernelBuilder, directed_config, build_kernel
  from fuzz.campaign.levels import KernelLevel
  from fuzz.strategies import BytesChooser
  pats = _rule_pats("lift_invalid (symbolic.py:") + _rule_pats("fold_invalid_first (symbolic.py:")
  for i, dt in enumerate(ALL_DTYPES):
    b = _KernelBuilder(BytesChooser(random.Random(i).randbytes(512)), KernelConfig())
    assert all(b.instance(p, dt, 3, [UOp.range(4, 0)]) is None for p in pats)
  cfg = directed_config(KernelConfig(), set(), patterns=pats, p_pattern=0.5)
  assert all(KernelLevel().valid(build_kernel(BytesChooser(random.Random(i).randbytes(2048)), cfg)) for i in range(5))

def test_repeating_a_run_of_choices_builds_a_repeated_operand():
  s = _sched()
  a = Seed(b"ABCDEFGH", [0, 2, 3, 6], frozenset())
  for _ in range(100):
    r = s.repeat_choices(a, a)
    assert any(r == a.data[:hi] + a.data[lo:hi] + a.data[hi:] for lo in a.marks for hi in a.marks[1:] + [8] if lo < hi)

@pytest.mark.parametrize("prefix", ["fold_invalid_first (symbolic.py:", "fold_self_div (symbolic.py:"])
def test_a_directed_symbolic_level_builds_the_rule_pattern_and_the_z3_check_holds(prefix):
  # where(c, Invalid, x) and x // x, built into index expressions: the rule fires on most of them, no case is an
  # unsound rewrite (the z3 check), and the plain builder's same bytes hardly ever make that shape
  from tinygrad.uop.ops import match_stats
  from fuzz.campaign.scheduler import rule_key
  from fuzz.strategies import BytesChooser
  pats = _rule_pats(prefix)
  def matched() -> int:
    return sum(int(st[0]) for rules in match_stats.values() for r, st in rules.items() if rule_key(r).startswith(prefix))
  lv, plain = SymbolicLevel(patterns=pats, p_pattern=0.5), SymbolicLevel()
  datas = [random.Random(i).randbytes(256) for i in range(60)]
  cases = [lv.from_chooser(BytesChooser(d)) for d in datas]
  hit = sum(any(p.match(u, {}) for u in c.toposort() for p in pats) for c in cases)
  hit_plain = sum(any(p.match(u, {}) for u in plain.from_chooser(BytesChooser(d)).toposort() for p in pats) for d in datas)
  assert hit >= 15 and hit >= 3 * hit_plain, (hit, hit_plain)
  from tinygrad.helpers import Context
  with Context(TRACK_MATCH_STATS=1):
    before = matched()
    assert not any(lv.check(cases, {}))
    assert matched() > before
