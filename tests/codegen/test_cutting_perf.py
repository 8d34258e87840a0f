"""Cutting at scale: a cat/stack of hundreds of pieces stays correct and its program stays small (the cut is capped at
MAX_PIECES loops per store; past that the loop keeps its gates)."""
import numpy as np
import pytest
from tinygrad import Tensor, Device
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp
from tinygrad.dtype import dtypes
from tinygrad.codegen import get_program
from tinygrad.codegen.opt import Opt, OptOps, KernelOptError
from tinygrad.codegen.cutting import MAX_PIECES

def cut_only(ast, renderer):
  """The program with just the CUT opt (none where nothing can be cut: past MAX_PIECES the loop keeps its gates)."""
  try: return get_program(ast, renderer, [Opt(OptOps.CUT)])
  except KernelOptError: return get_program(ast, renderer, [])

def program_of(t: Tensor):
  sched = t.schedule()
  assert len(sched) == 1, "one kernel expected"
  return cut_only(sched[0].ast, Device["CPU"].renderer)

def count(prg, op: Ops) -> int: return sum(1 for u in prg.uops if u.op is op)
def gated(prg) -> int: return sum(1 for u in prg.uops if u.op is Ops.INDEX and len(u.src) == 3)

@pytest.mark.parametrize("n", [8, MAX_PIECES, MAX_PIECES + 1, 300])
def test_stack_many_pieces_matches_numpy(n):
  xs = [np.array([i, -i - 0.5], np.float32) for i in range(n)]
  np.testing.assert_array_equal(Tensor.stack(*[Tensor(x) for x in xs]).numpy(), np.stack(xs))

def test_cat_many_pieces_matches_numpy():
  rng = np.random.default_rng(0)
  xs = [rng.random(1 + i % 5, dtype=np.float32) for i in range(143)]
  np.testing.assert_array_equal(Tensor.cat(*[Tensor(x) for x in xs]).numpy(), np.concatenate(xs))

def test_cat_many_pieces_2d_matches_numpy():
  rng = np.random.default_rng(1)
  xs = [rng.random((3, 1 + i % 3), dtype=np.float32) for i in range(60)]
  np.testing.assert_array_equal(Tensor.cat(*[Tensor(x) for x in xs], dim=1).numpy(), np.concatenate(xs, axis=1))

def test_cat_within_budget_is_cut_branch_free():
  prg = program_of(Tensor.cat(*[Tensor([float(i), -float(i)]) for i in range(MAX_PIECES)]))
  assert count(prg, Ops.RANGE) == MAX_PIECES and gated(prg) == 0 and count(prg, Ops.IF) == 0

def test_stack_past_budget_keeps_one_gated_loop():
  prg = program_of(Tensor.stack(*[Tensor([float(i)]) for i in range(300)]))
  assert count(prg, Ops.RANGE) == 1 and count(prg, Ops.STORE) == 1 and count(prg, Ops.IF) == 0
  # one gated load per source: the program grows linearly with the pieces, not with their square
  assert gated(prg) == 300 and len(prg.uops) < 20 * 300

def test_nested_cuts_share_one_budget(run_kernel):
  # out[i, j] = sum_k [i < k] a[i, j] + sum_k [j < k] b[i, j]: 8 pieces on each axis would be 64 loops
  n = 8
  out, a, b = [UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(n * n), arg=i) for i in range(3)]
  r0, r1 = UOp.range(n, 0), UOp.range(n, 1)
  idx = r0 * n + r1
  terms = [a.index(idx.valid(r0 < k)).load() for k in range(1, n)] + [b.index(idx.valid(r1 < k)).load() for k in range(1, n)]
  val = terms[0]
  for t in terms[1:]: val = val + t
  ast = UOp.sink(out.index(idx).store(val).end(r0, r1))
  rng = np.random.default_rng(2)
  bufs = [np.zeros(n * n, np.float32), rng.random(n * n, dtype=np.float32), rng.random(n * n, dtype=np.float32)]
  prg = run_kernel(ast, bufs, opts=[Opt(OptOps.CUT)])
  i, j = np.arange(n)[:, None], np.arange(n)[None, :]
  want = (n - 1 - i) * bufs[1].reshape(n, n) + (n - 1 - j) * bufs[2].reshape(n, n)
  np.testing.assert_allclose(bufs[0].reshape(n, n), want, rtol=1e-6)
  # one STORE per piece (size-1 loops vanish, so RANGEs undercount the pieces)
  assert count(prg, Ops.STORE) <= MAX_PIECES
  ends = [u.src[1] for u in prg.uops if u.op is Ops.END]
  assert len(ends) == len(set(ends)), "one END per RANGE"

def _store_loops(ast):
  from tinygrad.uop import AxisType
  ends = [u for u in ast.toposort() if u.op is Ops.END and u.src[0].op is Ops.STORE]
  return len(ends), sum(1 for e in ends if any(r.op is Ops.RANGE and r.arg[-1] is AxisType.THREAD for r in e.src[1:]))

@pytest.mark.parametrize("llvm", [False, True])
def test_threads_split_every_loop_of_a_cut_kernel(llvm):
  # a pad of a 3-d tensor is cut into 5 store loops, each with ranges of its own; THREAD split one of them and every
  # thread ran the other 4 whole (the max-pool gradient's phases over 32 x 64 x 64 x 64: 18.8-24.5 ms, 10.1 with every
  # loop split). Now each loop's outermost axis the threads divide is split too, and the values are numpy's
  import importlib.util
  from tinygrad.helpers import Context
  from tinygrad.codegen.heuristic import hand_coded_optimizations
  from tinygrad.codegen.opt import apply_opts
  from tests.llvm_device import cpu_device
  if llvm and importlib.util.find_spec("llvmlite") is None: pytest.skip("the LLVM path needs llvmlite (the llvm extra)")
  dev = cpu_device(llvm)
  x = np.random.default_rng(2).random((64, 48, 40), dtype=np.float32)
  t = (Tensor(x, device=dev) * 2).pad(((0, 0), (1, 2), (3, 1)), value=-1.0)
  ast = t.schedule()[-1].ast
  ren = Device[dev].renderer
  opts = hand_coded_optimizations(ast, ren)
  assert opts[0].op is OptOps.CUT and any(o.op is OptOps.THREAD for o in opts), opts
  loops, threaded = _store_loops(apply_opts(ast, opts, ren))
  assert loops == 5 and threaded == loops, (loops, threaded, opts)
  with Context(SPEC=2):
    np.testing.assert_array_equal(t.numpy(), np.pad(x * 2, ((0, 0), (1, 2), (3, 1)), constant_values=-1.0))
