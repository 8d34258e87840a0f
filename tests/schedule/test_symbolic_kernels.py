"""Kernels of symbolic shapes: one AST for every binding (its variables are DEFINE_VARs), legal at every stage, printed
and read back as the same object, every access proved in bounds by z3 for the variable's whole range, captured and
replayed by process replay (compiled for NV sm_90 and AMD gfx1100 there); clear errors where a size must be concrete;
random symbolic chains against numpy. docs/symbolic.md."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from tinygrad import Tensor, Variable
from tinygrad.uop import Ops, AxisType
from tinygrad.uop.ops import UOp
from tinygrad.dtype import dtypes
from tinygrad.codegen import get_program
from tinygrad.renderer.cstyle import CRenderer
from tinygrad.tensor import ArgumentError
from tinygrad.uop.sint import bound_value
from spec.verify import type_verify, SpecError
from spec.kernel_spec import kernel_spec
from spec.program_spec import program_spec
from spec.tensor_spec import tensor_spec
from spec.roundtrip import check_roundtrip
from spec.validate_index import validate_index, IndexOutOfBounds

rng = np.random.default_rng(0)
X = rng.standard_normal((8, 6)).astype(np.float32)

def _programs(v: UOp, x: Tensor, cache: Tensor) -> list[Tensor]:
  """Symbolic programs of one bound variable v in [1, 8]: a window of a buffer of the maximum size, attention over a
  cache prefix, a reshape of a concrete tensor given a symbolic batch, cat and pad along the symbolic axis."""
  w = x[:v]
  return [
    (w @ x[0].reshape(6, 1)).softmax(0),
    (x[v - 1:v] @ cache[:v].T).softmax(-1) @ cache[:v],
    Tensor(X[:bound_value(v)]).reshape(v, 6).sum(0),
    w.cat(w * 2, dim=0).pad(((1, 1), None)).max(0),
  ]

def _asts(n: int, which: tuple[int, ...] = (0, 1, 2, 3)) -> list[UOp]:
  x, cache = Tensor(X).realize(), Tensor(X * 2).realize()
  v = Variable("n", 1, 8).bind(n)
  progs = _programs(v, x, cache)
  return [it.ast for k in which for it in progs[k].schedule() if it.ast.op is Ops.SINK]

def test_kernels_are_one_ast_for_every_binding_and_legal_at_every_stage():
  a3, a8 = _asts(3), _asts(8)
  # the same kernels (hash-consed, so `is`) whatever the binding: one compile serves all
  assert len(a3) == len(a8) and all(x is y for x, y in zip(a3, a8))
  assert all(any(u.op is Ops.DEFINE_VAR and u.arg == ("n", 1, 8) for u in ast.toposort()) for ast in a3)
  for ast in a3:
    type_verify(ast, kernel_spec, "kernel")
    validate_index(ast)
    check_roundtrip(ast)
    p = get_program(ast, CRenderer(2))
    type_verify(p.uops, program_spec, "program")
    validate_index(p.uops)
    check_roundtrip(p.uops)
    assert [v.arg[0] for v in p.vars] == ["n"] and "int n" in p.src

def test_z3_proof_uses_the_variables_range():
  # a loop to a variable in [1, 10] over a buffer of 8: the proof finds the binding that reads past the end
  n = UOp.variable("n", 1, 10)
  buf, out = UOp(Ops.DEFINE_GLOBAL, dtypes.float.ptr(8), arg=1), UOp(Ops.DEFINE_GLOBAL, dtypes.float.ptr(1), arg=0)
  r = UOp.range(n, 0, AxisType.REDUCE)
  ast = UOp.sink(out.index(UOp.const(dtypes.index, 0)).store(buf.index(r).load().reduce(r)))
  with pytest.raises(IndexOutOfBounds) as e: validate_index(ast)
  assert e.value.model.get("n", 0) >= 9
  # in [1, 8] it is proved
  n8 = UOp.variable("n", 1, 8)
  validate_index(ast.substitute({n: n8}))

def test_tensor_graph_with_symbolic_args_is_legal_and_round_trips():
  x = Tensor(X).realize()
  v = Variable("n", 1, 8).bind(5)
  t = (x[:v].pad(((0, 2), None)) + 1).reshape(v + 2, 2, 3).sum(1)
  sink = UOp.sink(t.uop)
  type_verify(sink, tensor_spec, "tensor")
  check_roundtrip(sink)
  np.testing.assert_allclose(t.reshape(7, 3).numpy(), (np.pad(X[:5], ((0, 2), (0, 0))) + 1).reshape(7, 2, 3).sum(1),
                             rtol=1e-6)

def test_sizes_that_must_be_concrete_or_fit_raise_clearly():
  x = Tensor(X).realize()
  n = Variable("n", 1, 8)
  with pytest.raises(ArgumentError, match=r"numpy\(\).*symbolic shape \(n=3, 6\).*\.reshape\(3, 6\)"): x[:n.bind(3)].numpy()
  with pytest.raises(IndexError, match=r"slice \[0:n=3\] of axis 0 \(size 4\)"): x[:4][:n.bind(3)]
  with pytest.raises(ArgumentError, match="not provably equal"): x[:n.bind(3)].reshape(Variable("m", 1, 8).bind(3), 6)
  with pytest.raises(ArgumentError, match="not provably equal"): x[:n.bind(3)].reshape(4, 6)
  with pytest.raises(ArgumentError, match="must be >= 0"): x.pad(((0, n.bind(3) - 2), None))
  with pytest.raises(ArgumentError, match="bound variables"): x[:n]
  with pytest.raises(TypeError, match="symbolic shape"): len(x[:n.bind(3)])
  with pytest.raises(ValueError, match="outside n's bounds"): n.bind(0)
  # an int index must be in range at the axis' least size; host ops that need a concrete size name the op
  with pytest.raises(IndexError, match=r"index 1 .* size n=3 \(its least value 1"): x[:n.bind(3)][1]
  with pytest.raises(ArgumentError, match=r"conv2d .*symbolic shape \(1, 1, n=3, 6\).*\.reshape\(1, 1, 3, 6\)"):
    x[:n.bind(3)].reshape(1, 1, n.bind(3), 6).conv2d(Tensor.ones(1, 1, 2, 2))
  with pytest.raises(ArgumentError, match="split needs a concrete size"): x[:n.bind(3)].split(2)

def test_tensor_spec_refuses_symbolic_args_that_do_not_fit_every_binding():
  # a shrink to n + 1 of an axis of 8 fits n in [0, 7], not n in [0, 8]; a reshape keeps the size for every value
  buf = Tensor(X).realize().uop
  # NOTE: under SPEC=2 an illegal node is refused where it is made, so each one is built inside pytest.raises
  def shrink(hi: int) -> UOp: return UOp(Ops.SHRINK, buf.dtype, (buf,), ((0, Variable("n", 0, hi).bind(3) + 1), (0, 6)))
  type_verify(UOp.sink(shrink(7)), tensor_spec, "tensor")
  with pytest.raises(SpecError, match="SHRINK"): type_verify(UOp.sink(shrink(8)), tensor_spec, "tensor")
  win = UOp(Ops.SHRINK, buf.dtype, (buf,), ((0, Variable("m", 1, 8).bind(3)), (0, 6)))
  with pytest.raises(SpecError, match="RESHAPE"):
    type_verify(UOp.sink(UOp(Ops.RESHAPE, buf.dtype, (win,), (Variable("k", 1, 8).bind(3), 6))), tensor_spec, "tensor")
  # a BIND's value outside its variable's bounds
  with pytest.raises(SpecError, match="BIND"):
    type_verify(UOp.sink(UOp(Ops.BIND, dtypes.index, (UOp.variable("n", 1, 8), UOp.const(dtypes.index, 9)))), tensor_spec,
                "tensor")

def test_process_replay_captures_and_replays_symbolic_kernels(tmp_path):
  from replay.diff import diff
  from tinygrad.runtime import targets as registry
  from tinygrad.renderer.archs import default_arch
  from tinygrad.device import DeviceOpenError
  from tests.replay.helpers import capturing
  targets = []
  for t in ("NV", "AMD"):
    try: registry.compiler(t, default_arch(t))
    except DeviceOpenError: continue
    targets.append(t)
  db = tmp_path / "sym.db"
  with capturing(db, "sym", targets):
    # the attention over a cache prefix and the concrete tensor given a symbolic batch (each target compiles them)
    asts = set(_asts(4, (1, 2)))
    progs = [get_program(ast, CRenderer(2)) for ast in asts]
  assert progs and all(p.vars for p in progs)
  # one kernel record per distinct AST and target; the schedules are rebuilt from their tensor graphs
  for t in ["CPU", *targets]:
    rep = diff(str(db), target=None if t == "CPU" else t, progress=None)
    assert rep.all_ok() and rep.counts("kernel")["unchanged"] >= len(asts) and rep.not_compiling == 0, rep.summary()
    assert rep.counts("schedule")["unchanged"] == 2, rep.summary()

# ---- random chains of symbolic ops against numpy ----

def _apply(op: str, t: Tensor, a: np.ndarray) -> tuple[Tensor, np.ndarray]:
  if op == "affine": return t * 0.5 - 1, a * 0.5 - 1
  if op == "relu": return t.relu(), np.maximum(a, 0)
  if op == "sum_keep0": return t.sum(0, keepdim=True), a.sum(0, keepdims=True)
  if op == "max_keep1": return t.max(1, keepdim=True), a.max(1, keepdims=True)
  if op == "transpose": return t.T, a.T
  if op == "flatten_back": return t.reshape(-1).reshape(t.shape), a
  if op == "cat_self0": return t.cat(t + 1, dim=0), np.concatenate([a, a + 1], 0)
  if op == "pad1": return t.pad((None, (1, 2))), np.pad(a, ((0, 0), (1, 2)))
  if op == "shrink_concrete": return t.shrink((None, (0, 1))), a[:, :1]
  if op == "softmax0":
    e = np.exp(a - a.max(0, keepdims=True))
    return t.softmax(0), e / e.sum(0, keepdims=True)
  raise ValueError(op)

OPS = ["affine", "relu", "sum_keep0", "max_keep1", "transpose", "flatten_back", "cat_self0", "pad1", "shrink_concrete",
       "softmax0"]

@settings(max_examples=15)
@given(st.lists(st.sampled_from(OPS), min_size=1, max_size=4), st.integers(0, 3), st.data())
def test_random_symbolic_chains_match_numpy(chain, lo, data):
  # a window of n rows from row lo, n in [1, 8 - lo]: its end is symbolic, as a KV cache's prefix
  n = data.draw(st.integers(1, 8 - lo), label="n")
  x = Tensor(X).realize()
  v = Variable("n", 1, 8 - lo).bind(n)
  t, a = x[lo:lo + v], X[lo:lo + n]
  for op in chain: t, a = _apply(op, t, a)
  np.testing.assert_allclose(t.reshape(tuple(bound_value(s) for s in t.shape)).numpy(), a, rtol=1e-5, atol=1e-5)
