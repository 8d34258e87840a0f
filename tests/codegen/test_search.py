import pytest
from tinygrad.codegen import search
from tinygrad.codegen.opt import Opt, OptOps, apply_opts, KernelOptError
from tinygrad.device import Device
from tinygrad.helpers import Context
from tests.codegen.test_opt import matmul_ast, elementwise_ast, _run_on_cpu, _bufs
from fuzz.oracles.kernel_ref import run_kernel
import numpy as np

SMALL_ACTIONS = [Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.UNROLL, 0, 4), Opt(OptOps.THREAD, 0, 2),
                 Opt(OptOps.UPCAST, 5, 4), Opt(OptOps.LOCAL, 0, 4)]

@pytest.fixture
def small_beam(monkeypatch, tmp_path):
  monkeypatch.setattr(search, "ACTIONS", SMALL_ACTIONS)
  monkeypatch.setattr(search, "MAX_ROUNDS", 2)
  with Context(CACHEDB=str(tmp_path / "beam.db"), CACHELEVEL=2, CPU_THREADS=2): yield

def test_candidates_are_legal_and_new(small_beam):
  ren = Device["CPU"].renderer
  ast = matmul_ast(16, 16, 16)
  seen = {search.apply_all(ast, [], ren)}
  cands = search.candidates(ast, ren, [[]], seen)
  # UPCAST axis 5 does not exist and the CPU has no locals: those two are dropped
  assert len(cands) == 4 and all(len(c) == 1 for c in cands)
  for c in cands: search.apply_all(ast, c, ren)
  # a second pass from the same beam finds nothing new
  assert search.candidates(ast, ren, [[]], seen) == []

def test_beam_search_returns_legal_opts_that_compute_the_same(small_beam):
  ast = matmul_ast(16, 16, 16)
  opts = search.beam_search(ast, Device["CPU"].renderer, 2)
  assert all(isinstance(o, Opt) for o in opts)
  apply_opts(ast, opts, Device["CPU"].renderer)
  ref = _bufs(ast, seed=1)
  run_kernel(ast, ref)
  got, _ = _run_on_cpu(ast, opts)
  np.testing.assert_allclose(got, ref[0], rtol=1e-6)

def test_beam_search_result_is_cached(small_beam, monkeypatch):
  ast = elementwise_ast(16, 64)
  ren = Device["CPU"].renderer
  first = search.beam_search(ast, ren, 1)
  def no_timing(*a, **k): raise AssertionError("BEAM ran again instead of using its cache")
  monkeypatch.setattr(search, "_Timer", no_timing)
  assert search.beam_search(ast, ren, 1) == first
  with pytest.raises(AssertionError, match="cache"): search.beam_search(ast, ren, 1, disable_cache=True)

def test_beam_through_codegen_flag(small_beam):
  # BEAM=1 in the opts stage of codegen searches instead of using the heuristics
  from tinygrad.codegen import optimize_kernel
  ast = matmul_ast(8, 8, 8)
  with Context(BEAM=1): new = optimize_kernel(ast, Device["CPU"].renderer)
  assert all(o in SMALL_ACTIONS for o in new.arg.applied_opts)

def test_kernel_key_is_stable_text():
  assert search.kernel_key(matmul_ast()) == search.kernel_key(matmul_ast())
  assert search.kernel_key(matmul_ast()) != search.kernel_key(matmul_ast(8, 8, 4))

def test_illegal_action_never_reaches_timing():
  with pytest.raises(KernelOptError): search.apply_all(matmul_ast(), [Opt(OptOps.UPCAST, 5, 4)], Device["CPU"].renderer)

def test_compiled_fires_once_per_used_program_and_beam_candidates_apart(small_beam):
  from tinygrad.codegen import get_program
  from tinygrad.uop import hooks
  seen: dict[str, list] = {"compiled": [], "beam_candidate": []}
  fns = {k: (lambda k: lambda ast, p, renderer: seen[k].append(p))(k) for k in seen}
  for k, f in fns.items(): hooks.register(k, f)
  try:
    ren = Device["CPU"].renderer
    with Context(BEAM=1): p = get_program(matmul_ast(8, 8, 8), ren)
  finally:
    for k, f in fns.items(): hooks.unregister(k, f)
  # the winner fires `compiled` once; every timed candidate fired `beam_candidate` instead
  assert seen["compiled"] == [p] and len(seen["beam_candidate"]) >= 2
  assert all(c.renderer == ren.identity for c in seen["beam_candidate"])
  assert p.src in {c.src for c in seen["beam_candidate"]}
