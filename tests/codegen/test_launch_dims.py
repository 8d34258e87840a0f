"""Launch dimensions (tinygrad/codegen/grid.py): a kernel's GLOBAL and local axes fit the target's grid and workgroup
dimensions whatever the opts asked for. More axes than dimensions share one (a merge), an axis over every limit is
split; the plans are checked against an independent enumeration of the launch, the lowered programs against numpy on
the PYTHON interpreter (under each GPU emulation) and by the z3 bounds proof, and a request that cannot fit is a
KernelOptError naming the limit."""
import itertools
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from tinygrad.codegen import get_program, full_rewrite_to_sink
from tinygrad.codegen.grid import plan_launch, is_identity
from tinygrad.codegen.heuristic import hand_coded_optimizations
from tinygrad.codegen.opt import Opt, OptOps, KernelOptError, apply_opts
from tinygrad.device import Buffer, Device
from tinygrad.dtype import dtypes
from tinygrad.helpers import Context, prod
from tinygrad.renderer import Renderer
from tinygrad.renderer.cuda import CUDARenderer
from tinygrad.renderer.llvmir import AMDLLVMRenderer
from tinygrad.runtime.ops_python import PythonRenderer
from tinygrad.uop import Ops, AxisType
from tinygrad.uop.ops import UOp

L, G, GT, U = OptOps.LOCAL, OptOps.GROUP, OptOps.GROUPTOP, OptOps.UPCAST

# ---- the plan, against an enumeration of every launch coordinate ----

def _axis_values(plan, sizes):
  """Every thread's axis values under `plan`: the launch coordinates enumerated, each dimension's digits read off it."""
  dims = [prod(d.size for d in dim) for dim in plan]
  out = []
  for coord in itertools.product(*[range(n) for n in dims]):
    vals = [0] * len(sizes)
    for c, dim in zip(coord, plan):
      for d in dim:
        vals[d.axis] += (c % d.size) * d.weight
        c //= d.size
    out.append(tuple(vals))
  return dims, out

@settings(max_examples=150)
@given(st.lists(st.integers(1, 40), min_size=0, max_size=6),
       st.lists(st.integers(1, 64), min_size=1, max_size=3))
def test_plan_is_a_bijection_within_the_limits(sizes, limits):
  plan = plan_launch(sizes, tuple(limits))
  if plan is None:
    # NOTE: every axis in the first dimension is always a plan where that holds them all
    assert prod(sizes) > limits[0]
    return
  dims, vals = _axis_values(plan, sizes)
  assert len(plan) <= len(limits) and all(n <= m for n, m in zip(dims, limits))
  assert sorted(vals) == list(itertools.product(*[range(s) for s in sizes]))

def test_plan_is_the_identity_where_every_axis_fits():
  plan = plan_launch([32, 4, 2], (1024, 1024, 64))
  assert plan is not None and is_identity(plan) and [d[0].axis for d in plan] == [0, 1, 2]

def test_more_axes_than_dimensions_merge_the_outer_ones():
  # a group reduce and three LOCALs (issue 31's conv backward): the inner dimensions keep one axis each
  plan = plan_launch([8, 2, 2, 4], (1024, 1024, 64))
  assert plan is not None and [[d.axis for d in dim] for dim in plan] == [[0], [1], [2, 3]]

def test_axis_over_its_dimension_limit_moves_inward():
  # 70001 blocks cannot be gridDim.y (65535): it shares x with the inner axis
  plan = plan_launch([3, 70001], (2**31 - 1, 65535, 65535))
  assert plan is not None and [[d.axis for d in dim] for dim in plan] == [[0, 1]]

def test_axis_over_every_limit_is_split():
  plan = plan_launch([2**32], (2**31 - 1, 65535, 65535))
  assert plan is not None and not is_identity(plan) and all(d.axis == 0 for dim in plan for d in dim)
  assert prod(d.size for dim in plan for d in dim) == 2**32
  assert plan_launch([2**31 + 11], (2**31 - 1, 65535, 65535)) is None  # a prime: no split

# ---- opts: merged where needed, refused only where nothing fits ----

def matmul(M, N, K, B=1):
  out, a, b = (UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(n), arg=i) for i, n in enumerate((B * M * N, B * M * K, K * N)))
  z, i, j, k = UOp.range(B, 0), UOp.range(M, 1), UOp.range(N, 2), UOp.range(K, 3, AxisType.REDUCE)
  val = (a.index(z * M * K + i * K + k).load() * b.index(k * N + j).load()).reduce(k)
  return UOp.sink(out.index(z * M * N + i * N + j).store(val).end(z, i, j))

# a group reduce and three LOCALs: four local axes for three workgroup dimensions
FOUR_LOCALS = [Opt(GT, 0, 4), Opt(L, 2, 4), Opt(L, 1, 2), Opt(L, 0, 2)]

def _specials(p):
  return {u.arg: u.src[0].arg for u in p.uops if u.op is Ops.SPECIAL}

@pytest.mark.parametrize("ren", [CUDARenderer("sm_90"), AMDLLVMRenderer("gfx942"), PythonRenderer("")],
                         ids=["sm_90", "gfx942", "python"])
def test_four_local_axes_lower_into_three_dimensions(ren):
  p = get_program(matmul(4, 8, 16, B=2), ren, FOUR_LOCALS)
  sp = _specials(p)
  lids = sorted(k for k in sp if k.startswith("lidx"))
  assert lids == ["lidx0", "lidx1", "lidx2"] and prod(sp[k] for k in lids) == 4 * 4 * 2 * 2
  assert all(sp[f"lidx{i}"] <= ren.local_max[i] for i in range(3))
  assert p.applied_opts == tuple(FOUR_LOCALS)

class TinyWorkgroup(Renderer):
  device, has_local, has_shared = "PYTHON", True, True
  global_max, local_max, local_max_total, shared_max = (2**31 - 1, 65535, 65535), (16, 16, 4), 1024, 32768

def test_a_local_that_fits_no_dimension_is_a_kernel_opt_error_naming_the_limit():
  ast = matmul(17, 8, 4)
  with pytest.raises(KernelOptError, match=r"local axes of sizes \[17\].*\(16, 16, 4\) \(local_max\)"):
    apply_opts(ast, [Opt(L, 1, 17)], TinyWorkgroup())
  # 32 threads on one axis fit as 4 x 8 in two dimensions
  assert apply_opts(matmul(32, 8, 4), [Opt(L, 1, 32)], TinyWorkgroup()) is not None

def test_heuristics_reject_a_local_that_would_need_a_merge():
  # every opt the heuristics keep leaves one workgroup dimension per local axis (KernelOptError or not)
  ast = matmul(17, 9, 64, B=16)
  opts = hand_coded_optimizations(ast, TinyWorkgroup())
  opted = apply_opts(ast, opts, TinyWorkgroup())
  from tinygrad.codegen.grid import grid_plan, LOCAL_TYPES
  plan = grid_plan(opted, LOCAL_TYPES, TinyWorkgroup.local_max)[1]
  assert plan is not None and is_identity(plan)

# ---- values: the merged programs on the interpreter, under each emulation ----

def run_on_python(ast, opts, arrays):
  dev = Device["PYTHON"]
  p = get_program(ast, dev.renderer, opts)
  bufs = [Buffer("PYTHON", a.size, dtypes.float32).ensure_allocated().copyin(np.ascontiguousarray(a).data) for a in arrays]
  gs, ls = p.launch_dims({})
  dev.runtime(p.name, dev.compiler.compile(p.src))(*[b._buf for b in bufs], global_size=gs, local_size=ls)
  return np.frombuffer(bufs[0].as_buffer(), np.float32), p

@pytest.mark.parametrize("emu", ["", "NV", "AMD_GFX1100", "AMD_GFX942"])
@pytest.mark.parametrize("opts", [FOUR_LOCALS, [Opt(G, 0, 4), Opt(L, 2, 8), Opt(L, 1, 4), Opt(L, 0, 2)],
                                  [Opt(U, 2, 2), Opt(L, 2, 4), Opt(L, 1, 8), Opt(L, 0, 2)]], ids=["gt+3l", "g+3l", "3l"])
def test_merged_workgroups_compute_the_matmul(emu, opts):
  B, M, N, K = 2, 8, 8, 16
  rng = np.random.default_rng(0)
  x, y = rng.standard_normal((B, M, K), dtype=np.float32), rng.standard_normal((K, N), dtype=np.float32)
  # NOTE: the z3 bounds proof runs on every lowered program here (the program checkpoint at IGNORE_OOB=0)
  with Context(EMULATE=emu, IGNORE_OOB=0):
    got, p = run_on_python(matmul(M, N, K, B), opts, [np.zeros(B * M * N, np.float32), x.ravel(), y.ravel()])
  np.testing.assert_allclose(got.reshape(B, M, N), x @ y, rtol=1e-5, atol=1e-5)
  assert len([k for k in _specials(p) if k.startswith("lidx")]) == 3

def test_the_bounds_proof_catches_a_wrong_merge(monkeypatch):
  # a merge that forgets the remainder of the inner digit reads past the end of the buffers: z3 says where
  from tinygrad.codegen import grid
  from spec.validate_index import validate_index, IndexOutOfBounds
  real = grid.plan_specials
  def no_remainder(axes, plan, kind):
    return [e.src[0] if e.op is Ops.MOD else e for e in real(axes, plan, kind)]
  monkeypatch.setattr("tinygrad.codegen.lowerer.plan_specials", no_remainder)
  with Context(IGNORE_OOB=1): p = get_program(matmul(4, 8, 16, B=2), CUDARenderer("sm_90"), FOUR_LOCALS)
  with pytest.raises(IndexOutOfBounds, match="outside its size"): validate_index(p.uops)
  # the same check is the program checkpoint at IGNORE_OOB=0: the compile fails there
  with Context(IGNORE_OOB=0), pytest.raises(IndexOutOfBounds):
    get_program(matmul(4, 8, 16, B=2), CUDARenderer("sm_90"), FOUR_LOCALS)

# ---- the grid: axes over a dimension's limit ----

def elementwise(*shape, pre_typed=False, types=()):
  n = prod(shape)
  out, a = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(n), arg=0), UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(n), arg=1)
  types = types or [AxisType.GLOBAL if pre_typed else AxisType.LOOP] * len(shape)
  rs = [UOp.range(s, i, t) for i, (s, t) in enumerate(zip(shape, types))]
  idx = UOp.const(dtypes.index, 0)
  for r, s in zip(rs, shape): idx = idx * s + r
  return UOp.sink(out.index(idx).store(a.index(idx).load() + 1.0).end(*rs))

def test_outer_axis_over_the_y_limit_shares_x():
  # (70001, 3): 70001 blocks would be gridDim.y (max 65535)
  p = get_program(elementwise(70001, 3), CUDARenderer("sm_90"), [])
  gs = p.global_size
  assert prod(gs) == 70001 * 3 and all(g <= m for g, m in zip(gs, (2**31 - 1, 65535, 65535)))

def test_five_pre_typed_global_axes_and_one_over_every_limit():
  # GLOBAL axes given by the AST itself (no assign_grid): five of them, then one of 2**32 (split over two dimensions)
  for shape in ((2, 3, 4, 5, 6), (2**32,)):
    sink = full_rewrite_to_sink(elementwise(*shape, pre_typed=True), CUDARenderer("sm_90"), [])
    sp = {u.arg: u.src[0].arg for u in sink.toposort() if u.op is Ops.SPECIAL}
    assert len(sp) <= 3 and prod(sp.values()) == prod(shape), sp
    assert all(sp[f"gidx{i}"] <= m for i, m in enumerate((2**31 - 1, 65535, 65535)) if f"gidx{i}" in sp)

def test_pre_typed_global_axes_compute_on_python():
  shape = (2, 3, 4, 5, 6)
  x = np.random.default_rng(1).standard_normal(prod(shape)).astype(np.float32)
  with Context(EMULATE="NV", IGNORE_OOB=0):
    got, p = run_on_python(elementwise(*shape, pre_typed=True), [], [np.zeros_like(x), x])
  np.testing.assert_array_equal(got, x + 1.0)
  assert len([k for k in _specials(p) if k.startswith("gidx")]) == 3

def test_pre_typed_local_axes_over_the_workgroup_run_as_loops():
  # 4 x 16 x 64 threads asked for by the AST itself (no opt checked them): the outer LOCAL runs as a loop in each
  # thread, the rest fit the 1024 threads of a block
  shape, types = (3, 4, 16, 64), (AxisType.GLOBAL, AxisType.LOCAL, AxisType.LOCAL, AxisType.LOCAL)
  x = np.random.default_rng(2).standard_normal(prod(shape)).astype(np.float32)
  with Context(EMULATE="NV", IGNORE_OOB=0):
    got, p = run_on_python(elementwise(*shape, types=types), [], [np.zeros_like(x), x])
  np.testing.assert_array_equal(got, x + 1.0)
  lids = {k: v for k, v in _specials(p).items() if k.startswith("lidx")}
  assert prod(lids.values()) == 16 * 64 and all(v <= m for v, m in zip(lids.values(), (1024, 1024, 64)))
