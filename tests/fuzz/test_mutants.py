"""The planted bugs of the mutation score (fuzz/mutants.py): each changes one rule, where it shows is what its name
says, it comes out again, and a campaign finds one, reduces it and it does not reproduce without it."""
import os, subprocess, sys
import pytest
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp, PatternMatcher, graph_rewrite
from tinygrad.uop.symbolic import symbolic
from tinygrad.codegen.decompositions import pm_emulated_dtypes
from tinygrad.dtype import dtypes
from fuzz.mutants import MUTANTS, _matchers_with
from fuzz.campaign import CampaignConfig, run_campaign
from fuzz.findings import read_reproducer

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

def _sym(u): return graph_rewrite(u, symbolic, name="mutant test")
def _buf(dt, n=0): return UOp(Ops.DEFINE_GLOBAL, dt.ptr(4), arg=n).index(UOp.const(dtypes.index, 0)).load()

# the expression each mutant gets wrong, and how to rewrite it
EXAMPLES = {
  "boundary_off_by_one": (lambda: (UOp.variable("x", 0, 20) * 2 + 3) < 9, _sym),
  "negative_sign_slip": (lambda: (UOp.variable("n", -20, 0) * 4 - 3) % 4, _sym),
  "unsigned_wrap": (lambda: (UOp.variable("u", 0, 255, dtypes.uint8) + UOp.const(dtypes.uint8, 200)) <
                    UOp.const(dtypes.uint8, 210), _sym),
  "wrong_gate": (lambda: (UOp.range(8, 0) < 5).where((UOp.range(8, 1) < 3).where(UOp.range(8, 0) + UOp.range(8, 1),
                  UOp.invalid()), UOp.invalid()), _sym),
  "dropped_cast": (lambda: _buf(dtypes.bfloat16) * _buf(dtypes.bfloat16, 1) + _buf(dtypes.bfloat16, 2),
                   lambda u: graph_rewrite(u, pm_emulated_dtypes, name="mutant test")),
  "mod_mod_any": (lambda: (UOp.variable("x", 0, 100) % 6) % 4, _sym),
}

def test_every_mutant_has_an_example():
  assert set(EXAMPLES) == set(MUTANTS) and len({m.kind for m in MUTANTS.values()}) == len(MUTANTS)

@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutant_changes_one_rule_and_comes_out_again(name):
  m = MUTANTS[name]
  make, rewrite = EXAMPLES[name]
  before = rewrite(make())
  held = _matchers_with(m.rule)
  assert held and all(isinstance(pm, PatternMatcher) for pm in held)
  m.apply()
  try:
    # exactly that rule's function is swapped, in every matcher that held it, and the example rewrites differently
    assert not _matchers_with(m.rule) and len(_matchers_with(m.applied)) == len(held)
    assert rewrite(make()) is not before
  finally: m.revert()
  assert len(_matchers_with(m.rule)) == len(held) and rewrite(make()) is before

def test_campaign_finds_a_planted_dropped_cast_reduced_and_not_reproduced_without_it(tmp_path):
  # NOTE: a budget of cases, not of time (the cases, and so the findings, are the same on a slow or loaded machine)
  cfg = CampaignConfig(out=str(tmp_path / "camp"), minutes=10, max_cases=96, backends=("python",), jobs=1, batch=8,
                       setup="fuzz.mutants:dropped_cast", progress=False, reduce_checks=150, reduce_grace=60, spec=1,
                       levels=("kernel",))
  summ = run_campaign(cfg)
  assert summ.findings, str(summ)
  top = max(summ.findings.values(), key=lambda f: f.count)
  path = os.path.join(cfg.out, "findings", f"{top.signature.id}.json")
  f = read_reproducer(path)
  # NOTE: a small graph: an emulated-dtype op whose operand is another one's result (its rounding dropped), over loads
  assert f.reduced and f.size <= 16 < f.original_size and f.setup == "fuzz.mutants:dropped_cast", (f.size, f.state)
  proc = subprocess.run([sys.executable, "-m", "fuzz", "repro", path], cwd=REPO, capture_output=True, text=True,
                        env={**os.environ, "PYTHONPATH": REPO})
  assert proc.returncode == 0 and "not reproduced" in proc.stdout, proc.stdout + proc.stderr

# ---- the kernel level reaches the rules of the index-arithmetic mutants ----

def _nonpos_divmod(u):
  return u.op in (Ops.IDIV, Ops.MOD) and u.dtype is not dtypes.index and dtypes.is_int(u.dtype) and \
    u.src[1].op is Ops.CONST and u.src[0].vmin < 0 and u.src[0].vmax <= 0
def _unsigned_cmp_sum(u):
  return u.op is Ops.CMPLT and dtypes.is_unsigned(u.src[0].dtype) and u.src[0].op is Ops.ADD and \
    u.src[0].src[1].op is Ops.CONST and u.src[1].op is Ops.CONST

@pytest.mark.parametrize("name,shape", [("negative_sign_slip", _nonpos_divmod), ("unsigned_wrap", _unsigned_cmp_sum)])
def test_kernel_generator_builds_cases_that_kill_index_arithmetic_mutants(name, shape):
  # NOTE: the generator's integer index arithmetic (sums of loop indices that are never positive, divided by a
  # constant) and its comparisons of wrapping unsigned sums with constants: of the first kernels that have that shape,
  # one fails on PYTHON with the mutant and passes without it
  from fuzz.strategies import build_kernel, RandomChooser
  from fuzz.levels import KernelLevel
  from fuzz.backends import open_backends
  level, (bk, _) = KernelLevel(), open_backends(["python"])
  cands = [c for c in (build_kernel(RandomChooser(s)) for s in range(600)) if any(shape(u) for u in c.ast.toposort())]
  assert len(cands) >= 5, len(cands)
  m = MUTANTS[name]
  for c in cands[:12]:
    m.apply()
    try: bad = level.check([c], bk)[0]
    finally: m.revert()
    if bad and not level.check([c], bk)[0]: return
  raise AssertionError(f"{name}: none of {min(12, len(cands))} kernels of its shape killed it")
