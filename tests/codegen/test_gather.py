"""One-hot select sums collapse to gathered loads (tinygrad/codegen/gather.py): an embedding, an advanced index and a
gather keep no reduce over the table's rows once their kernel is prepared, and give torch's values on C, LLVM and the
PYTHON interpreter under SPEC=2. Forms the collapse must leave alone (a compare that is not one-to-one, an arange
that wraps in its dtype, a one-hot product) keep their reduce and their values."""
import importlib.util
import numpy as np
import pytest
import torch
from tinygrad import Tensor, dtypes
from tinygrad.helpers import Context
from tinygrad.uop import Ops, AxisType
from tinygrad.uop.ops import UOp
from tinygrad.codegen.program import prepare_kernel
from fuzz.strategies import build_kernel, RandomChooser, KernelConfig
from fuzz.gen.kernels import FLOAT_OPS, INT_OPS
from fuzz.oracles.kernel_ref import run_kernel
from fuzz.oracles.differential import kernel_inputs, run_ast_on, compare_outputs, kernel_buffers
from tests.llvm_device import llvm_cpu_device, c_cpu_device

DEVICES = ["C", *(["LLVM"] if importlib.util.find_spec("llvmlite") is not None else []), "PYTHON"]

def device(kind: str) -> str: return c_cpu_device() if kind == "C" else llvm_cpu_device() if kind == "LLVM" else "PYTHON"

def reduces(t: Tensor) -> list[int]:
  """The REDUCEs of each kernel t's schedule runs, after prepare_kernel."""
  return [sum(u.op is Ops.REDUCE for u in prepare_kernel(si.ast).toposort()) for si in t.schedule()]

def realized(t: Tensor) -> np.ndarray:
  with Context(SPEC=2): return t.numpy()

@pytest.mark.parametrize("kind", DEVICES)
def test_embedding_reads_the_picked_rows(kind):
  dev = device(kind)
  rng = np.random.default_rng(0)
  w = rng.standard_normal((300, 24)).astype(np.float32)
  w[7] = np.inf  # a row no index picks: a one-hot product would sum 0 * inf = NaN into every output
  ids = rng.integers(0, 300, (4, 9)).astype(np.int32)
  ids[ids == 7] = 8
  out = Tensor(ids, device=dev).embedding(Tensor(w, device=dev))
  assert reduces(out) == [0]
  ref = torch.nn.functional.embedding(torch.tensor(ids, dtype=torch.int64), torch.tensor(w)).numpy()
  np.testing.assert_array_equal(realized(out), ref)

@pytest.mark.parametrize("kind", DEVICES)
def test_embedding_index_outside_the_table_gives_zeros(kind):
  # NOTE: as Tensor.embedding documents (torch raises; a check would read the indices back on the host)
  dev = device(kind)
  w = np.arange(5 * 3, dtype=np.float32).reshape(5, 3) + 1
  ids = np.array([[-1, 0, 4, 5, 2**31 - 1, -2**31]], dtype=np.int32)
  out = realized(Tensor(ids, device=dev).embedding(Tensor(w, device=dev)))
  np.testing.assert_array_equal(out, np.stack([np.zeros(3), w[0], w[4], np.zeros(3), np.zeros(3), np.zeros(3)])[None])

@pytest.mark.parametrize("kind", DEVICES)
def test_advanced_index_by_two_tensors_collapses_both(kind):
  dev = device(kind)
  rng = np.random.default_rng(1)
  x = rng.standard_normal((5, 6, 1100)).astype(np.float32)  # 1100 rows: the front end's arange is split (a*b + c)
  i, j = rng.integers(-5, 5, (3, 4)), rng.integers(-1100, 1100, (3, 4))
  out = Tensor(x, device=dev)[Tensor(i, device=dev), 1:5, Tensor(j, device=dev)]
  assert reduces(out) == [0]
  np.testing.assert_array_equal(realized(out), torch.tensor(x)[torch.tensor(i), 1:5, torch.tensor(j)].numpy())

@pytest.mark.parametrize("kind", DEVICES)
def test_gather_along_a_middle_axis(kind):
  dev = device(kind)
  rng = np.random.default_rng(2)
  x = rng.standard_normal((4, 7, 5)).astype(np.float32)
  idx = rng.integers(0, 7, (4, 3, 5))
  out = Tensor(x, device=dev).gather(1, Tensor(idx.astype(np.int32), device=dev))
  assert reduces(out) == [0]
  np.testing.assert_array_equal(realized(out), torch.gather(torch.tensor(x), 1, torch.tensor(idx)).numpy())

@pytest.mark.parametrize("kind", DEVICES)
def test_forms_that_are_not_a_gather_keep_their_reduce(kind):
  dev = device(kind)
  rng = np.random.default_rng(3)
  w = rng.standard_normal((200, 4)).astype(np.float32)
  ids = np.array([3, 0, 99, -100, 56, -57, 127], dtype=np.int8)
  wt, it = Tensor(w, device=dev), Tensor(ids, device=dev)
  # r // 2 matches two rows: their sum
  half = (it.cast(dtypes.int32).reshape(-1, 1, 1) == (Tensor.arange(200, device=dev) // 2).reshape(200, 1)) \
    .where(wt, 0).sum(1)
  assert reduces(half) == [1]
  ref = np.stack([w[2 * v:2 * v + 2].sum(0) if 0 <= v < 100 else np.zeros(4, np.float32) for v in ids.astype(int)])
  np.testing.assert_allclose(realized(half), ref, rtol=1e-6, atol=1e-6)
  # an arange of 200 compared as int8 wraps (128..199 are -128..-57): -100 picks row 156, -57 row 199
  wrapped = (it.reshape(-1, 1, 1) == Tensor.arange(200, device=dev).cast(dtypes.int8).reshape(200, 1)).where(wt, 0) \
    .sum(1)
  assert reduces(wrapped) == [1]
  ref = np.stack([w[(np.arange(200).astype(np.int8) == v)].sum(0) for v in ids])
  np.testing.assert_array_equal(realized(wrapped), ref)
  # a one-hot product sums 0 * every other row (NaN where one is inf), which a gathered load would not
  prod = (it.cast(dtypes.int32).reshape(-1, 1) == Tensor.arange(200, device=dev).reshape(1, 200)).cast(dtypes.float32) \
    @ wt
  assert reduces(prod) == [1]
  np.testing.assert_allclose(realized(prod), np.stack([w[v] if 0 <= v < 200 else np.zeros(4, np.float32) for v in
                                                       ids.astype(int)]), rtol=1e-6, atol=1e-6)

def test_generated_select_sums_agree_with_the_reference():
  """The kernel fuzzer's select sums (fuzz/gen/kernels.py, `select_sum`: any dtype, x loaded or computed, r + c written
  as the front end's arange or split as (r // k) * k + r % k, a second condition, symbolic sizes), weighted up: the
  collapsed kernel against the reference interpreter's sum, on each CPU path and the PYTHON interpreter."""
  cfg = KernelConfig(float_ops=dict(FLOAT_OPS, selectsum=25), int_ops=dict(INT_OPS, selectsum=25))
  collapsed = 0
  for seed in range(40):
    c = build_kernel(RandomChooser(seed), cfg)
    if sum(u.op is Ops.REDUCE for u in prepare_kernel(c.ast).toposort()) == sum(u.op is Ops.REDUCE for u in
                                                                               c.ast.toposort()): continue
    collapsed += 1
    inputs = kernel_inputs(c.ast, c.seed)
    ref = {k: v.copy() for k, v in inputs.items()}
    run_kernel(c.ast, ref, c.var_vals)
    bufs = kernel_buffers(c.ast)
    written = {u.src[0].src[0].arg for u in c.ast.toposort() if u.op is Ops.STORE}
    for kind in DEVICES:
      with Context(SPEC=2): out = run_ast_on(device(kind), c.ast, inputs, c.var_vals)
      for n in written: assert compare_outputs(out[n], ref[n], bufs[n].base) is None, (seed, kind, n)
  assert collapsed >= 20, collapsed

@pytest.mark.parametrize("kind", DEVICES)
@pytest.mark.parametrize("dt", [dtypes.int64, dtypes.int8, dtypes.uint64])
def test_an_index_at_its_dtypes_edge_is_outside_the_table(kind, dt):
  """sum over r < n of where(r + c == x, v, 0) picks v where x - c is in [0, n): an int64 x near its top, offset before
  the range check, would wrap into the table (int64 is the widest index math). c = -3, and 0 for uint64 (r - 3 does not
  fit it), whose values over int64's top leave it a reduce."""
  c = 0 if dt is dtypes.uint64 else -3
  i = UOp.range(6, 0, AxisType.LOOP)
  r = UOp.range(UOp.variable("n", 1, 17), 1, AxisType.REDUCE)
  x = UOp(Ops.DEFINE_GLOBAL, dt.ptr(6), arg=1).index(i).load()
  v = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(6), arg=2).index(i).load()
  pick = (r + UOp.const(dtypes.index, c) if c else r).cast(dt).eq(x).where(v, UOp.const(dtypes.float32, 0.0))
  ast = UOp.sink(UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(6), arg=0).index(i).store(pick.reduce(r, arg=Ops.ADD)).end(i))
  assert sum(u.op is Ops.REDUCE for u in prepare_kernel(ast).toposort()) == (1 if dt is dtypes.uint64 else 0)
  top, low = int(dtypes.max(dt)), int(dtypes.min(dt))
  xs = np.array([top - 1, top, low, low + 2, 5, 7], dtype=np.dtype(dt.fmt))
  inputs = {0: np.zeros(6, np.float32), 1: xs, 2: np.arange(1, 7, dtype=np.float32)}
  ref = {k: a.copy() for k, a in inputs.items()}
  run_kernel(ast, ref, {"n": 11})
  with Context(SPEC=2): out = run_ast_on(device(kind), ast, inputs, {"n": 11})
  np.testing.assert_array_equal(out[0], ref[0])
  np.testing.assert_array_equal(ref[0], [k + 1 if 0 <= int(v) - c < 11 else 0 for k, v in enumerate(xs)])

@pytest.mark.parametrize("vocab", [1025, 32768, 50257])
def test_an_embedding_of_any_vocabulary_size_is_one_kernel_of_loads(vocab):
  """The front end's arange over more than 1024 rows is split square (Tensor._arange_index), so the scheduler keeps it
  fused (two different cumsums were two padded views, stored as a concatenation) and its compare is there to collapse:
  one kernel and no reduce for the GGUF models' vocabularies too."""
  rng = np.random.default_rng(vocab)
  w = rng.standard_normal((vocab, 64)).astype(np.float32)
  ids = rng.integers(-2, vocab + 2, (256,)).astype(np.int32)
  out = Tensor(ids).embedding(Tensor(w))
  assert reduces(out) == [0]
  want = np.where(((ids >= 0) & (ids < vocab))[:, None], w[np.clip(ids, 0, vocab - 1)], 0)
  np.testing.assert_array_equal(realized(out), want)

def test_an_index_by_two_tensors_broadcast_wide_is_one_kernel_of_loads():
  """x[i, :, j] with the middle axis 128 wide: the index tensors make one flat index into the indexed axes (a mask of
  one compare per axis ANDed over every combination was stored by the scheduler and summed); 64-bit indices past
  int32 pick nothing (cast to int32 they wrapped into the table)."""
  rng = np.random.default_rng(4)
  x = rng.standard_normal((16, 128, 96)).astype(np.float32)
  i, j = rng.integers(-16, 16, (200,)), rng.integers(-96, 96, (200,))
  out = Tensor(x)[Tensor(i.astype(np.int32)), :, Tensor(j.astype(np.int32))]
  assert reduces(out) == [0]
  np.testing.assert_array_equal(realized(out), torch.tensor(x)[torch.tensor(i), :, torch.tensor(j)].numpy())
  far = np.array([2**32 + 1, 3, 1], dtype=np.int64), np.array([0, 2**33 + 3, 5], dtype=np.int64)
  got = realized(Tensor(x)[Tensor(far[0]), :, Tensor(far[1])])
  np.testing.assert_array_equal(got, np.stack([np.zeros(128, np.float32), np.zeros(128, np.float32), x[1, :, 5]]))
