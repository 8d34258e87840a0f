"""rangeify on hand-built tensor graphs: kernel counts (fusion) and the ASTs' values, checked by the kernel evaluator."""
import numpy as np
import pytest
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp
from tinygrad.dtype import dtypes
from tinygrad.device import next_unique
from tinygrad.helpers import prod
from tinygrad.schedule.rangeify import rangeify, reshape_index, linear_index
from fuzz.oracles.kernel_ref import run_kernel_graph, kernels_of, read_view, base_buffer

DEV = UOp(Ops.DEVICE, arg="CPU")

def new_buf(shape, dtype=dtypes.float32) -> UOp:
  return UOp(Ops.BUFFER, dtype, (UOp(Ops.UNIQUE, arg=next_unique()), DEV), arg=prod(shape)).reshape(shape)

def bufuop(view: UOp) -> UOp:
  while view.op is Ops.RESHAPE: view = view.src[0]
  return view

def const(v, shape, dtype=dtypes.float32) -> UOp:
  return UOp(Ops.CONST, dtype, (DEV,), arg=v).reshape((1,) * len(shape)).expand(shape)

def inputs(*shapes, seed=0, dtype=dtypes.float32):
  rng = np.random.default_rng(seed)
  bufs = [new_buf(s, dtype) for s in shapes]
  vals = [rng.standard_normal(s).astype(np.float32) for s in shapes]
  return bufs, vals

def realize(*outs: UOp, data: dict) -> tuple[list[np.ndarray], list[UOp]]:
  """Rangeify SINK(outs), run the kernels on `data` ({buffer view: numpy}), return the outputs and the kernels."""
  ksink, becomes, _ = rangeify(UOp.sink(*outs))
  arrays = {bufuop(v): a.reshape(-1).copy() for v, a in data.items()}
  run_kernel_graph(ksink, arrays)
  return [read_view(becomes[o], arrays) for o in outs], kernels_of(ksink)

def matmul(a: UOp, b: UOp) -> UOp:
  (n, k), (_, m) = a.shape, b.shape
  x = a.reshape((n, 1, k)).expand((n, m, k))
  y = b.permute((1, 0)).reshape((1, m, k)).expand((n, m, k))
  return (x * y).r(Ops.ADD, (2,)).reshape((n, m))

# ---- fusion targets ----

def test_sum_of_add_is_one_kernel():
  (a, b), (na, nb) = inputs((4, 5), (4, 5))
  (out,), ks = realize((a + b).r(Ops.ADD, (0, 1)), data={a: na, b: nb})
  assert len(ks) == 1
  np.testing.assert_allclose(out, (na + nb).sum(keepdims=True), rtol=1e-5)

def test_matmul_add_relu_is_one_kernel():
  (a, b, c), (na, nb, nc) = inputs((3, 4), (4, 5), (3, 5))
  mm = matmul(a, b) + c
  out_u = mm.maximum(const(0.0, (3, 5)))
  (out,), ks = realize(out_u, data={a: na, b: nb, c: nc})
  assert len(ks) == 1
  np.testing.assert_allclose(out, np.maximum(na @ nb + nc, 0), rtol=1e-5, atol=1e-6)

def test_transpose_contiguous_is_one_kernel():
  (x,), (nx,) = inputs((3, 7))
  (out,), ks = realize(x.permute((1, 0)).contiguous(), data={x: nx})
  assert len(ks) == 1
  np.testing.assert_equal(out, nx.T)

def cumsum(x: UOp) -> UOp:
  """cumsum of a 1-d x by the window trick: pad left n-1, tile n times with a stride of one extra element, sum windows."""
  n = x.shape[0]
  L = 2 * n - 1
  xp = x.pad(((n - 1, 0),))
  t = xp.reshape((1, L)).expand((n, L)).reshape((n * L,)).pad(((0, n),)).reshape((n, L + 1)).shrink(((0, n), (0, n)))
  return t.r(Ops.ADD, (1,)).reshape((n,))

def test_arange_is_one_kernel_without_inputs():
  n = 10
  ar = cumsum(const(1, (n,), dtypes.int32)) + const(-1, (n,), dtypes.int32)
  (out,), ks = realize(ar, data={})
  assert len(ks) == 1
  assert len(ks[0].src) == 1, "arange must read no buffer"
  np.testing.assert_equal(out, np.arange(n))

def test_cat_is_one_kernel():
  (a, b, c), (na, nb, nc) = inputs((3,), (4,), (2,))
  cat = a.pad(((0, 6),)) + b.pad(((3, 2),)) + c.pad(((7, 0),))
  (out,), ks = realize(cat, data={a: na, b: nb, c: nc})
  assert len(ks) == 1
  np.testing.assert_equal(out, np.concatenate([na, nb, nc]))

def test_a_concatenation_of_matmuls_stores_each_matmul():
  # fused into the concatenation, each matmul's loop ran for every row of the result and was selected away outside its
  # piece (a reduce read through a PAD): each is stored, and the concatenation copies them
  (a, b, c, d), (na, nb, nc, nd) = inputs((3, 4), (4, 5), (2, 6), (6, 5))
  cat = matmul(a, b).pad(((0, 2), (0, 0))) + (matmul(c, d) + const(1.0, (2, 5))).pad(((3, 0), (0, 0)))
  (out,), ks = realize(cat, data={a: na, b: nb, c: nc, d: nd})
  assert len(ks) == 3
  assert [any(u.op is Ops.REDUCE for u in k.arg.toposort()) for k in ks].count(False) == 1
  np.testing.assert_allclose(out, np.concatenate([na @ nb, nc @ nd + 1]), rtol=1e-5, atol=1e-6)

def test_softmax_at_most_three_kernels():
  (x,), (nx,) = inputs((4, 6))
  m = x.r(Ops.MAX, (1,)).expand((4, 6))
  e = x.alu(Ops.SUB, m).exp2()
  s = e.r(Ops.ADD, (1,)).expand((4, 6))
  (out,), ks = realize(e * s.reciprocal(), data={x: nx})
  assert len(ks) <= 3
  ref = np.exp2(nx - nx.max(1, keepdims=True))
  np.testing.assert_allclose(out, ref / ref.sum(1, keepdims=True), rtol=1e-5)

def pool_last(x: UOp, k: int) -> UOp:
  """(..., H) -> (..., H-k+1, k) windows x[..., o+j], by the tiling trick (movement ops only)."""
  *pre, H = x.shape
  O = H - k + 1
  t = x.reshape((*pre, 1, H)).expand((*pre, O, H)).reshape((*pre, O * H))
  t = t.pad(tuple((0, 0) for _ in pre) + ((0, O),)).reshape((*pre, O, H + 1))
  return t.shrink(tuple((0, s) for s in pre) + ((0, O), (0, k)))

def test_conv2d_forward_is_one_kernel():
  N, Cin, H, W, Cout, kh, kw = 2, 3, 6, 5, 4, 3, 2
  (x, w), (nx, nw) = inputs((N, Cin, H, W), (Cout, Cin, kh, kw))
  OH, OW = H - kh + 1, W - kw + 1
  # windows over W, then over H: (N, Cin, H, OW, kw) -> (N, Cin, OW, kw, H) -> (N, Cin, OW, kw, OH, kh)
  xw = pool_last(pool_last(x, kw).permute((0, 1, 3, 4, 2)), kh).permute((0, 1, 4, 2, 5, 3))  # (N, Cin, OH, OW, kh, kw)
  full = (N, Cout, Cin, OH, OW, kh, kw)
  xe = xw.reshape((N, 1, Cin, OH, OW, kh, kw)).expand(full)
  we = w.reshape((1, Cout, Cin, 1, 1, kh, kw)).expand(full)
  out_u = (xe * we).r(Ops.ADD, (2, 5, 6)).reshape((N, Cout, OH, OW))
  (out,), ks = realize(out_u, data={x: nx, w: nw})
  assert len(ks) == 1
  ref = np.zeros((N, Cout, OH, OW), np.float32)
  for i in range(kh):
    for j in range(kw): ref += np.einsum("nchw,oc->nohw", nx[:, :, i:i+OH, j:j+OW], nw[:, :, i, j])
  np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)

# ---- identical kernels, renumbering ----

def test_identical_kernels_are_identical_uops():
  (a, b, c, d), _ = inputs((4, 4), (4, 4), (4, 4), (4, 4))
  k1 = kernels_of(rangeify(UOp.sink((a + b).r(Ops.ADD, (1,))))[0])
  k2 = kernels_of(rangeify(UOp.sink((c + d).r(Ops.ADD, (1,))))[0])
  assert k1[0].arg is k2[0].arg
  assert k1[0] is not k2[0]

def test_ranges_and_buffers_numbered_in_order():
  (a, b), _ = inputs((3, 4), (4, 3))
  (k,) = kernels_of(rangeify(UOp.sink(a + b.permute((1, 0))))[0])
  topo = list(k.arg.toposort())
  assert [u.arg for u in topo if u.op is Ops.DEFINE_GLOBAL] == [0, 1, 2]
  assert [u.arg[0] for u in topo if u.op is Ops.RANGE] == [0, 1]
  assert base_buffer(k.src[1]) is base_buffer(bufuop(a)) and base_buffer(k.src[2]) is base_buffer(bufuop(b))

def test_kernel_ast_form():
  (a,), _ = inputs((8,))
  (k,) = kernels_of(rangeify(UOp.sink(a + a))[0])
  ast = k.arg
  assert ast.op is Ops.SINK and ast.src[0].op is Ops.END and ast.src[0].src[0].op is Ops.STORE
  st = ast.src[0].src[0]
  assert st.src[0].op is Ops.INDEX and st.src[0].src[0].op is Ops.DEFINE_GLOBAL and st.src[0].src[0].arg == 0
  assert all(u.dtype is dtypes.index for u in ast.toposort() if u.op is Ops.RANGE)

def test_scalar_output_has_no_end():
  (a,), (na,) = inputs((5,))
  (out,), ks = realize(a.r(Ops.ADD, (0,)), data={a: na})
  assert ks[0].arg.src[0].op is Ops.STORE
  np.testing.assert_allclose(out, na.sum(keepdims=True), rtol=1e-5)

# ---- cost rules ----

def test_reduce_read_by_two_outputs_is_stored_once():
  (a,), (na,) = inputs((4, 8))
  s = a.r(Ops.ADD, (1,))
  (o1, o2), ks = realize(s + const(1.0, (4, 1)), s * const(2.0, (4, 1)), data={a: na})
  assert len(ks) == 3
  np.testing.assert_allclose(o1, na.sum(1, keepdims=True) + 1, rtol=1e-5)
  np.testing.assert_allclose(o2, na.sum(1, keepdims=True) * 2, rtol=1e-5)

def test_broadcast_reduce_is_stored():
  (a,), (na,) = inputs((4, 8))
  mean = (a.r(Ops.ADD, (1,)) * const(1 / 8, (4, 1))).expand((4, 8))
  d = a.alu(Ops.SUB, mean)
  (out,), ks = realize((d * d).r(Ops.ADD, (1,)), data={a: na})
  assert len(ks) == 2
  np.testing.assert_allclose(out, ((na - na.mean(1, keepdims=True)) ** 2).sum(1, keepdims=True), rtol=1e-4)

def test_reduce_of_reduce_fuses():
  (a,), (na,) = inputs((3, 4, 5))
  (out,), ks = realize(a.r(Ops.ADD, (2,)).r(Ops.MAX, (1,)), data={a: na})
  assert len(ks) == 1
  np.testing.assert_allclose(out, na.sum(2, keepdims=True).max(1, keepdims=True), rtol=1e-5)

def test_already_realized_output_needs_no_kernel():
  (a,), _ = inputs((2, 3))
  ksink, becomes, _ = rangeify(UOp.sink(a))
  assert kernels_of(ksink) == [] and a not in becomes

# ---- movement chains vs numpy ----

def _chain(case, x, n):
  for op, arg in case:
    if op == "reshape": x, n = x.reshape(arg), n.reshape(arg)
    elif op == "permute": x, n = x.permute(arg), n.transpose(arg)
    elif op == "expand": x, n = x.expand(arg), np.broadcast_to(n, arg)
    elif op == "pad": x, n = x.pad(arg), np.pad(n, arg)
    elif op == "shrink": x, n = x.shrink(arg), n[tuple(slice(b, e) for b, e in arg)]
    elif op == "flip": x, n = x.flip(arg), np.flip(n, [i for i, f in enumerate(arg) if f])
    elif op == "sum": x, n = x.r(Ops.ADD, arg), n.sum(arg, keepdims=True)
    elif op == "max": x, n = x.r(Ops.MAX, arg), n.max(arg, keepdims=True)
    elif op == "exp2": x, n = x.exp2(), np.exp2(n)
  return x, n

CHAINS = [
  [("reshape", (4, 6)), ("permute", (1, 0)), ("reshape", (2, 12))],
  [("reshape", (2, 3, 4)), ("permute", (2, 0, 1)), ("reshape", (8, 3)), ("shrink", ((1, 7), (0, 2)))],
  [("reshape", (6, 4)), ("pad", ((1, 2), (0, 3))), ("flip", (True, False)), ("shrink", ((2, 8), (1, 7)))],
  [("reshape", (24, 1)), ("expand", (24, 3)), ("reshape", (8, 9)), ("sum", (1,))],
  [("reshape", (4, 6)), ("exp2", None), ("pad", ((2, 0), (1, 1))), ("sum", (0,))],
  [("reshape", (2, 12)), ("flip", (True, True)), ("reshape", (3, 8)), ("max", (0,)), ("pad", ((1, 1), (0, 0)))],
  [("reshape", (4, 6)), ("sum", (1,)), ("reshape", (2, 2)), ("pad", ((0, 1), (1, 0))), ("flip", (False, True))],
  [("reshape", (2, 3, 4)), ("pad", ((0, 0), (1, 1), (0, 0))), ("reshape", (2, 20)), ("shrink", ((0, 2), (3, 17))), ("reshape", (7, 4))],
]

@pytest.mark.parametrize("case", CHAINS, ids=[str(i) for i in range(len(CHAINS))])
def test_movement_chain_matches_numpy(case):
  (x,), (nx,) = inputs((24,))
  xu, ref = _chain(case, x, nx)
  (out,), _ = realize(xu.contiguous(), data={x: nx})
  np.testing.assert_allclose(out, ref, rtol=1e-5)

def test_random_movement_chains_match_numpy():
  rng = np.random.default_rng(1)
  for trial in range(30):
    shape = tuple(int(s) for s in rng.integers(1, 4, size=3))
    (x,), (nx,) = inputs(shape, seed=trial)
    xu, n = x, nx
    for _ in range(4):
      kind = rng.choice(["permute", "pad", "shrink", "flip", "reshape", "expand"])
      sh = xu.shape
      if kind == "permute": case = [("permute", tuple(int(i) for i in rng.permutation(len(sh))))]
      elif kind == "pad": case = [("pad", tuple((int(rng.integers(0, 2)), int(rng.integers(0, 2))) for _ in sh))]
      elif kind == "shrink": case = [("shrink", tuple((int(b), int(s)) for b, s in zip((rng.integers(0, s) if s > 1 else 0 for s in sh), sh)))]
      elif kind == "flip": case = [("flip", tuple(bool(f) for f in rng.integers(0, 2, len(sh))))]
      elif kind == "expand": case = [("reshape", (*sh, 1)), ("expand", (*sh, 2))] if len(sh) < 5 else []
      else: case = [("reshape", (prod(sh),))]
      xu, n = _chain(case, xu, n)
    (out,), _ = realize(xu.contiguous(), data={x: nx})
    np.testing.assert_allclose(out, n, rtol=1e-6, err_msg=f"trial {trial}")

def test_reshape_index_merges_and_splits_without_flattening():
  from tinygrad.uop import AxisType
  r0, r1 = UOp.range(4, 0, AxisType.LOOP), UOp.range(6, 1, AxisType.LOOP)
  (i,) = reshape_index((r0, r1), (4, 6), (24,))
  assert i is r0 * UOp.const(dtypes.index, 6) + r1
  a, b = reshape_index((i,), (24,), (4, 6))
  assert a is r0 and b is r1
  assert linear_index((r0, r1), (4, 6)) is i

# ---- assign ----

def test_assign_writes_target_buffer():
  (x,), (nx,) = inputs((6,))
  asg = UOp(Ops.ASSIGN, dtypes.float32, (x, x * const(2.0, (6,))))
  ksink, becomes, _ = rangeify(UOp.sink(asg))
  ks = kernels_of(ksink)
  assert len(ks) == 1 and base_buffer(ks[0].src[0]) is bufuop(x) and becomes[asg] is x
  arrays = run_kernel_graph(ksink, {bufuop(x): nx.copy()})
  np.testing.assert_allclose(arrays[bufuop(x)], nx * 2)

def test_assign_into_view_and_hazard():
  (x,), (nx,) = inputs((6,))
  # x[1:4] = x[3:6] reads the target at other places than it writes: the value is stored first
  asg = UOp(Ops.ASSIGN, dtypes.float32, (x.shrink(((1, 4),)), x.shrink(((3, 6),))))
  ksink, _, _ = rangeify(UOp.sink(asg))
  assert len(kernels_of(ksink)) == 2
  arrays = run_kernel_graph(ksink, {bufuop(x): nx.copy()})
  ref = nx.copy()
  ref[1:4] = nx[3:6]
  np.testing.assert_allclose(arrays[bufuop(x)], ref)

def test_read_after_assign_uses_after():
  (x,), (nx,) = inputs((4,))
  asg = UOp(Ops.ASSIGN, dtypes.float32, (x, x + const(1.0, (4,))))
  out_u = asg * const(3.0, (4,))
  ksink, becomes, _ = rangeify(UOp.sink(out_u))
  ks = kernels_of(ksink)
  assert len(ks) == 2 and ks[1].src[1].op is Ops.AFTER
  arrays = run_kernel_graph(ksink, {bufuop(x): nx.copy()})
  assert becomes[asg] is x
  np.testing.assert_allclose(read_view(becomes[out_u], arrays), (nx + 1) * 3, rtol=1e-6)
  np.testing.assert_allclose(arrays[bufuop(x)], nx + 1, rtol=1e-6)

# ---- variables, deep graphs ----

def test_bound_variable_becomes_kernel_var():
  (a,), (na,) = inputs((4,))
  v = UOp.variable("n", 1, 10).bind(3)
  out_u = a + v.cast(dtypes.float32).reshape((1,)).expand((4,))
  ksink, becomes, var_vals = rangeify(UOp.sink(out_u))
  (k,) = kernels_of(ksink)
  assert [u.arg for u in k.arg.toposort() if u.op is Ops.DEFINE_VAR] == [("n", 1, 10)]
  assert {d.arg[0]: val for d, val in var_vals.items()} == {"n": 3}
  arrays = run_kernel_graph(ksink, {bufuop(a): na.copy()}, {"n": 3})
  np.testing.assert_allclose(read_view(becomes[out_u], arrays), na + 3, rtol=1e-6)

def test_deep_lazy_chain_schedules():
  (a,), (na,) = inputs((4,))
  t = a
  for _ in range(2000): t = t + const(1.0, (4,))
  (out,), ks = realize(t, data={a: na})
  assert len(ks) == 1
  np.testing.assert_allclose(out, na + 2000, rtol=1e-5)

def test_chained_assigns_run_in_order():
  (x,), (nx,) = inputs((5,))
  a1 = UOp(Ops.ASSIGN, dtypes.float32, (x, x + const(1.0, (5,))))
  a2 = UOp(Ops.ASSIGN, dtypes.float32, (a1, a1 * const(2.0, (5,))))
  ksink, becomes, _ = rangeify(UOp.sink(a2))
  ks = kernels_of(ksink)
  assert len(ks) == 2 and ks[1].src[0].op is Ops.AFTER and ks[1].src[0].src[1] is ks[0]
  assert becomes[a1] is x and becomes[a2] is x
  arrays = run_kernel_graph(ksink, {bufuop(x): nx.copy()})
  np.testing.assert_allclose(arrays[bufuop(x)], (nx + 1) * 2, rtol=1e-6)

def _random_program(rng, x, nx, y, ny):
  """A random DAG over two (2, 3, 4) inputs: movement ops, reduces, broadcasts back, binary ops between live values."""
  live = [(x, nx), (y, ny)]
  for _ in range(6):
    u, n = live[int(rng.integers(len(live)))]
    kind = rng.choice(["binary", "reduce_bcast", "permute", "flip", "pad_shrink", "reshape"])
    sh = u.shape
    if kind == "binary":
      same = [(v, m) for v, m in live if v.shape == sh]
      v, m = same[int(rng.integers(len(same)))]
      u, n = (u + v, n + m) if rng.integers(2) else (u * v, n * m)
    elif kind == "reduce_bcast":
      ax = int(rng.integers(len(sh)))
      op, fn = (Ops.ADD, np.sum) if rng.integers(2) else (Ops.MAX, np.max)
      u, n = u.r(op, (ax,)).expand(sh), np.broadcast_to(fn(n, ax, keepdims=True), sh)
    elif kind == "permute":
      p = tuple(int(i) for i in rng.permutation(len(sh)))
      u, n = u.permute(p), n.transpose(p)
    elif kind == "flip": u, n = u.flip((True,) + (False,) * (len(sh) - 1)), np.flip(n, 0)
    elif kind == "pad_shrink":
      pad = ((1, 0),) + ((0, 0),) * (len(sh) - 1)
      shr = ((0, sh[0]),) + tuple((0, s) for s in sh[1:])
      u, n = u.pad(pad).shrink(shr), np.pad(n, pad)[tuple(slice(b, e) for b, e in shr)]
    else:
      new = tuple(int(s) for s in rng.permutation(sh))
      u, n = u.reshape(new), n.reshape(new)
    live.append((u, n))
  return live[-1], live[-2]

def test_random_programs_match_numpy():
  rng = np.random.default_rng(7)
  for trial in range(25):
    (x, y), (nx, ny) = inputs((2, 3, 4), (2, 3, 4), seed=trial)
    (o1, r1), (o2, r2) = _random_program(rng, x, nx, y, ny)
    (v1, v2), _ = realize(o1.contiguous(), o2.contiguous(), data={x: nx, y: ny})
    np.testing.assert_allclose(v1, r1, rtol=1e-4, atol=1e-5, err_msg=f"trial {trial}")
    np.testing.assert_allclose(v2, r2, rtol=1e-4, atol=1e-5, err_msg=f"trial {trial}")
