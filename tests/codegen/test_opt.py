import random, re
import numpy as np
import pytest
from tinygrad.codegen.opt import Opt, OptOps, KernelOptError, KernelInfo, apply_opts, output_axes, reduce_axes, axes_of, axis_size
from tinygrad.dtype import dtypes
from tinygrad.uop import Ops, AxisType
from tinygrad.uop.ops import UOp
from tinygrad.renderer import Renderer
from fuzz.oracles.kernel_ref import run_kernel

# NOTE: the reference is fuzz.oracles.kernel_ref: opts change how ranges are lowered, never what the kernel computes

class CPULike(Renderer):
  """A CPU-style target for the opts tests: 4 threads, no grid, no locals."""
  device, has_threads, threads = "CPU", True, 4

class GPULike(Renderer):
  """A GPU-style target for the opts tests: a launch grid, workgroups of up to 1024 threads, 32 KiB shared memory."""
  device, has_local, has_shared = "PYTHON", True, True
  global_max, local_max, local_max_total, shared_max = (2**31 - 1, 65535, 65535), (1024, 1024, 64), 1024, 32768

def _g(i, n, dt=dtypes.float32): return UOp(Ops.DEFINE_GLOBAL, dt.ptr(n), arg=i)

def elementwise_ast(M=4, N=8):
  # out[i, j] = a[i, j] + b[j]
  i, j = UOp.range(M, 0), UOp.range(N, 1)
  out, a, b = _g(0, M * N), _g(1, M * N), _g(2, N)
  val = a.index(i * N + j).load() + b.index(j).load()
  return UOp.sink(out.index(i * N + j).store(val).end(i, j), arg=KernelInfo(name="ew"))

def reduce_ast(M=4, K=16):
  # out[i] = sum_k a[i, k]
  i, k = UOp.range(M, 0), UOp.range(K, 1, AxisType.REDUCE)
  out, a = _g(0, M), _g(1, M * K)
  return UOp.sink(out.index(i).store(a.index(i * K + k).load().reduce(k, arg=Ops.ADD)).end(i))

def matmul_ast(M=8, N=8, K=8, dt=dtypes.float32):
  i, j, k = UOp.range(M, 0), UOp.range(N, 1), UOp.range(K, 2, AxisType.REDUCE)
  out, a, b = _g(0, M * N, dt), _g(1, M * K, dt), _g(2, K * N, dt)
  acc = (a.index(i * K + k).load() * b.index(k * N + j).load()).reduce(k, arg=Ops.ADD)
  return UOp.sink(out.index(i * N + j).store(acc).end(i, j))

def wt_matmul_ast(M=2, N=4, K=2048):
  # out[i, j] = sum_k a[i, k] * w[j, k]: W of x @ W^T, its rows (the lanes) each contiguous along the reduce
  i, j, k = UOp.range(M, 0), UOp.range(N, 1), UOp.range(K, 2, AxisType.REDUCE)
  out, a, w = _g(0, M * N), _g(1, M * K), _g(2, N * K)
  acc = (a.index(i * K + k).load() * w.index(j * K + k).load()).reduce(k, arg=Ops.ADD)
  return UOp.sink(out.index(i * N + j).store(acc).end(i, j))

def wt_conv_ast(M=2, N=4, C=256, T=9):
  # out[i, j] = sum_c sum_t a[i, c, t] * w[j, c, t]: a conv's filters W[cout, cin, taps] read along two reduce ranges,
  # one contiguous stretch of each filter
  i, j = UOp.range(M, 0), UOp.range(N, 1)
  c, t = UOp.range(C, 2, AxisType.REDUCE), UOp.range(T, 3, AxisType.REDUCE)
  out, a, w = _g(0, M * N), _g(1, M * C * T), _g(2, N * C * T)
  acc = (a.index(i * C * T + c * T + t).load() * w.index(j * C * T + c * T + t).load()).reduce(c, t, arg=Ops.ADD)
  return UOp.sink(out.index(i * N + j).store(acc).end(i, j))

def relu_matmul_ast(M=4, N=4, K=8):
  # out = relu(a @ b): the sum of relus of partial sums is not the relu of the sum, so KBLOCK must refuse it
  i, j, k = UOp.range(M, 0), UOp.range(N, 1), UOp.range(K, 2, AxisType.REDUCE)
  out, a, b = _g(0, M * N), _g(1, M * K), _g(2, K * N)
  acc = (a.index(i * K + k).load() * b.index(k * N + j).load()).reduce(k, arg=Ops.ADD)
  return UOp.sink(out.index(i * N + j).store(acc.maximum(0.0)).end(i, j))

def inplace_matmul_ast(N=4, K=8):
  # out[i, j] = sum_k out[i, k] * b[k, j]: the partial sums KBLOCK stores would change what later blocks read
  i, j, k = UOp.range(N, 0), UOp.range(N, 1), UOp.range(K, 2, AxisType.REDUCE)
  out, b = _g(0, N * K), _g(1, K * N)
  acc = (out.index(i * K + k).load() * b.index(k * N + j).load()).reduce(k, arg=Ops.ADD)
  return UOp.sink(out.index(i * N + j).store(acc).end(i, j))

def operand_matmul_ast(M=8, N=16, K=8, form="bias", a_rows=True):
  # out[i, j] = sum_k f(a[i, k]) * b[k, j], f a bias add (c[k]), a scale and shift or an exp2: A's operand is computed
  # in the product's loop. a_rows=False: A stored [k, i] (its rows contiguous) and the bias along i
  i, j, k = UOp.range(M, 0), UOp.range(N, 1), UOp.range(K, 2, AxisType.REDUCE)
  out, a, b, c = _g(0, M * N), _g(1, M * K), _g(2, K * N), _g(3, K if a_rows else M)
  x, cv = a.index(i * K + k if a_rows else k * M + i).load(), c.index(k if a_rows else i).load()
  v = {"bias": lambda: x + cv, "affine": lambda: x * cv + 1.0, "exp": lambda: (x * 0.25).exp2()}[form]()
  acc = (v * b.index(k * N + j).load()).reduce(k, arg=Ops.ADD)
  return UOp.sink(out.index(i * N + j).store(acc).end(i, j))

def _bufs(ast, seed=0):
  rng = np.random.default_rng(seed)
  gs = sorted([u for u in ast.toposort() if u.op is Ops.DEFINE_GLOBAL], key=lambda u: u.arg)
  return {g.arg: (np.zeros(g.dtype.size) if g.arg == 0 else rng.integers(-5, 5, g.dtype.size).astype(np.float64)) for g in gs}

def _check_same(ast, opts, renderer=CPULike()):
  ref = _bufs(ast)
  run_kernel(ast, ref)
  new = apply_opts(ast, opts, renderer)
  got = _bufs(ast)
  run_kernel(new, got)
  np.testing.assert_array_equal(got[0], ref[0])
  assert new.arg.applied_opts == tuple(opts)
  return new

LEGAL = [
  (elementwise_ast, [Opt(OptOps.UPCAST, 1, 4)]),
  (elementwise_ast, [Opt(OptOps.UPCAST, 0, 0)]),
  (elementwise_ast, [Opt(OptOps.UPCAST, 1, 2), Opt(OptOps.UPCAST, 1, 2), Opt(OptOps.UPCAST, 0, 2)]),
  (elementwise_ast, [Opt(OptOps.THREAD, 0, 4), Opt(OptOps.UPCAST, 0, 8)]),
  (elementwise_ast, [Opt(OptOps.THREAD, 1, 2)]),
  (elementwise_ast, [Opt(OptOps.SWAP, 0, 1)]),
  (reduce_ast, [Opt(OptOps.UNROLL, 0, 4)]),
  (reduce_ast, [Opt(OptOps.UNROLL, 0, 4), Opt(OptOps.UNROLL, 0, 2), Opt(OptOps.UPCAST, 0, 4)]),
  (reduce_ast, [Opt(OptOps.THREAD, 0, 2), Opt(OptOps.UNROLL, 0, 0)]),
  (matmul_ast, [Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.UNROLL, 0, 4), Opt(OptOps.THREAD, 0, 2)]),
  (matmul_ast, [Opt(OptOps.KBLOCK, 0, 2)]),
  (matmul_ast, [Opt(OptOps.KBLOCK, 0, 1)]),
  (matmul_ast, [Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.KBLOCK, 0, 1), Opt(OptOps.THREAD, 0, 2)]),
  (lambda: matmul_ast(M=7, N=5, K=6), [Opt(OptOps.KBLOCK, 0, 3)]),
  (lambda: matmul_ast(M=1, N=1, K=4), [Opt(OptOps.KBLOCK, 0, 2)]),
  (matmul_ast, [Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.KBLOCK, 0, 4), Opt(OptOps.UNROLL, 0, 2), Opt(OptOps.THREAD, 0, 2)]),
  (lambda: matmul_ast(M=5, N=7, K=8), [Opt(OptOps.PADTO, 1, 4), Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.KBLOCK, 0, 2)]),
]

@pytest.mark.parametrize("mk,opts", LEGAL, ids=[f"{mk.__name__}-{i}" for i, (mk, _) in enumerate(LEGAL)])
def test_opt_preserves_semantics(mk, opts):
  _check_same(mk(), opts)

@pytest.mark.parametrize("opts", [[Opt(OptOps.LOCAL, 1, 4)], [Opt(OptOps.GROUP, 0, 4)], [Opt(OptOps.GROUPTOP, 0, 8)],
                                  [Opt(OptOps.LOCAL, 0, 2), Opt(OptOps.GROUPTOP, 0, 4), Opt(OptOps.UNROLL, 0, 2)]])
def test_local_opts_preserve_semantics_on_gpu_like(opts):
  mk = reduce_ast if all(o.op is not OptOps.LOCAL or o.axis == 0 for o in opts) and any(o.op is not OptOps.LOCAL for o in opts) else elementwise_ast
  new = _check_same(mk(), opts, GPULike())
  assert axes_of(new, AxisType.LOCAL, AxisType.GROUP_REDUCE)

def test_random_opt_sequences_preserve_semantics():
  rnd = random.Random(1234)
  ops = [OptOps.UPCAST, OptOps.UNROLL, OptOps.THREAD, OptOps.SWAP, OptOps.PADTO, OptOps.LOCAL, OptOps.GROUPTOP,
         OptOps.KBLOCK]
  tried = applied = kblocked = 0
  for trial in range(60):
    mk = rnd.choice([elementwise_ast, reduce_ast, matmul_ast])
    ast, ren = mk(), rnd.choice([CPULike(), GPULike()])
    opts = []
    for _ in range(rnd.randint(1, 4)):
      cand = opts + [Opt(rnd.choice(ops), rnd.randint(0, 2), rnd.choice([0, 2, 3, 4, 8]))]
      tried += 1
      try: apply_opts(ast, cand, ren)
      except KernelOptError: continue
      opts, applied = cand, applied + 1
    _check_same(ast, opts, ren)
    kblocked += any(o.op is OptOps.KBLOCK for o in opts)
  assert applied > 20, f"only {applied} of {tried} random opts applied"
  assert kblocked > 0, "no random sequence applied KBLOCK"

def test_upcast_splits_into_upcast_range():
  new = apply_opts(elementwise_ast(), [Opt(OptOps.UPCAST, 1, 4)], CPULike())
  ups = axes_of(new, AxisType.UPCAST)
  assert len(ups) == 1 and axis_size(ups[0]) == 4
  assert sorted(axis_size(r) for r in output_axes(new)) == [2, 4]

def test_thread_range_is_outer_and_sized_by_threads():
  new = apply_opts(elementwise_ast(M=8), [Opt(OptOps.THREAD, 0, 4)], CPULike())
  th = axes_of(new, AxisType.THREAD)
  assert len(th) == 1 and axis_size(th[0]) == 4
  # the thread's block is the outer part of the index: thread t covers rows 2t, 2t+1
  store_idx = [u for u in new.toposort() if u.op is Ops.STORE][0].src[0].src[1]
  assert th[0] in store_idx.toposort()

def test_applied_opts_recorded_and_name_kept():
  opts = [Opt(OptOps.UPCAST, 0, 2), Opt(OptOps.UNROLL, 0, 4)]
  new = apply_opts(matmul_ast(), opts, CPULike())
  assert isinstance(new.arg, KernelInfo) and new.arg.applied_opts == tuple(opts)
  new2 = apply_opts(elementwise_ast(), [], CPULike())
  assert new2.arg.name == "ew" and new2.arg.applied_opts == ()

def test_apply_opts_is_deterministic_hash_consed():
  opts = [Opt(OptOps.UPCAST, 0, 2), Opt(OptOps.THREAD, 1, 2)]
  assert apply_opts(matmul_ast(), opts, CPULike()) is apply_opts(matmul_ast(), opts, CPULike())

ILLEGAL = [
  (elementwise_ast, Opt(OptOps.UPCAST, 1, 3), CPULike, "does not divide"),
  (elementwise_ast, Opt(OptOps.UPCAST, 5, 2), CPULike, "out of range"),
  (elementwise_ast, Opt(OptOps.UNROLL, 0, 2), CPULike, "0 reduce axes"),
  (lambda: elementwise_ast(N=32), Opt(OptOps.UPCAST, 1, 32), CPULike, "limit of 16"),
  (elementwise_ast, Opt(OptOps.LOCAL, 0, 2), CPULike, "no local"),
  (elementwise_ast, Opt(OptOps.THREAD, 0, 2), GPULike, "no CPU threads"),
  (lambda: elementwise_ast(N=16), Opt(OptOps.THREAD, 1, 8), CPULike, "8 threads > 4"),
  (reduce_ast, Opt(OptOps.GROUP, 0, 4), CPULike, "no local"),
  (reduce_ast, Opt(OptOps.UPCAST, 1, 2), CPULike, "out of range"),
  (matmul_ast, Opt(OptOps.TC, 0, 0), CPULike, "tensor cores"),
  (elementwise_ast, Opt(OptOps.PADTO, 1, 4), CPULike, "already a multiple"),
  (elementwise_ast, Opt(OptOps.SWAP, 0, 0), CPULike, "itself"),
  (elementwise_ast, Opt(OptOps.UPCAST, 0, 1), CPULike, "does nothing"),
  (elementwise_ast, Opt(OptOps.NOLOCALS), CPULike, "no locals"),
  (matmul_ast, Opt(OptOps.KBLOCK, 0, 2), GPULike, "CPU target"),
  (matmul_ast, Opt(OptOps.KBLOCK, 0, 3), CPULike, "divides"),
  (matmul_ast, Opt(OptOps.KBLOCK, 0, 8), CPULike, "divides"),
  (matmul_ast, Opt(OptOps.KBLOCK, 0, 0), CPULike, "divides"),
  (elementwise_ast, Opt(OptOps.KBLOCK, 0, 2), CPULike, "0 reduce axes"),
  (lambda: relu_matmul_ast(), Opt(OptOps.KBLOCK, 0, 2), CPULike, "ADD REDUCE over the axis"),
  (lambda: inplace_matmul_ast(), Opt(OptOps.KBLOCK, 0, 2), CPULike, "reads its output"),
  (lambda: elementwise_ast(M=0), Opt(OptOps.UPCAST, 0, 0), CPULike, "empty"),
]

@pytest.mark.parametrize("mk,opt,ren,msg", ILLEGAL, ids=[f"{o.op.name}-{m}" for _, o, _, m in ILLEGAL])
def test_illegal_opt_raises_clear_error(mk, opt, ren, msg):
  with pytest.raises(KernelOptError, match=msg): apply_opts(mk(), [opt], ren())

def test_only_one_thread_axis():
  with pytest.raises(KernelOptError, match="already has a THREAD"):
    apply_opts(matmul_ast(), [Opt(OptOps.THREAD, 0, 2), Opt(OptOps.THREAD, 1, 2)], CPULike())

def test_total_upcast_limit():
  ast = matmul_ast(16, 16, 16)
  with pytest.raises(KernelOptError, match="total upcast"):
    apply_opts(ast, [Opt(OptOps.UPCAST, 0, 16), Opt(OptOps.UPCAST, 0, 16), Opt(OptOps.UNROLL, 0, 4)], CPULike())

def test_nolocals_blocks_later_locals():
  with pytest.raises(KernelOptError, match="NOLOCALS"):
    apply_opts(elementwise_ast(), [Opt(OptOps.NOLOCALS), Opt(OptOps.LOCAL, 0, 2)], GPULike())

def test_padto_masks_and_preserves_semantics():
  new = _check_same(elementwise_ast(M=4, N=6), [Opt(OptOps.PADTO, 1, 4), Opt(OptOps.UPCAST, 1, 4)])
  assert sorted(axis_size(r) for r in new.toposort() if r.op is Ops.RANGE) == [2, 4, 4]
  assert any(u.is_masked() for u in new.toposort() if u.op is Ops.WHERE)

def test_padto_rejected_with_int_division_by_loaded_values():
  i = UOp.range(6, 0)
  out, a = _g(0, 6, dtypes.int32), _g(1, 6, dtypes.int32)
  ast = UOp.sink(out.index(i).store(UOp.const(dtypes.int32, 100) // a.index(i).load()).end(i))
  with pytest.raises(KernelOptError, match="divide by 0"): apply_opts(ast, [Opt(OptOps.PADTO, 0, 4)], CPULike())

def test_gpu_like_output_axes_go_on_the_grid():
  new = apply_opts(elementwise_ast(), [Opt(OptOps.LOCAL, 1, 4)], GPULike())
  assert len(axes_of(new, AxisType.GLOBAL)) == 2 and len(axes_of(new, AxisType.LOCAL)) == 1
  # CPU keeps loops
  assert not axes_of(apply_opts(elementwise_ast(), [], CPULike()), AxisType.GLOBAL)

def test_reduce_axes_stable_under_unroll():
  ast = matmul_ast(8, 8, 16)
  new = apply_opts(ast, [Opt(OptOps.UNROLL, 0, 2), Opt(OptOps.UNROLL, 0, 2)], CPULike())
  assert [axis_size(r) for r in reduce_axes(new)] == [4]
  assert sorted(axis_size(r) for r in axes_of(new, AxisType.UNROLL)) == [2, 2]

# ---- end to end on the CPU: opts through codegen, the C compiler and the runtime ----

def _run_on_cpu(ast, opts, threads=4):
  from tinygrad.codegen import get_program
  from tinygrad.device import Device, Buffer
  from tinygrad.runtime import targets
  dev = Device["CPU"]
  # NOTE: THREAD counts are capped by the renderer's threads, not by this machine: 4 calls on fewer cores still run.
  # The renderer is the device's own kind (C, or LLVM IR under CPU_LLVM), so its compiler takes the source
  p = get_program(ast, targets.renderer("CPU_LLVM" if dev.llvm else "CPU", threads=threads), opts=opts)
  host = _bufs(ast, seed=1)
  bufs = {i: Buffer("CPU", a.size, dtypes.float32).copyin(memoryview(a.astype(np.float32))) for i, a in host.items()}
  prg = dev.runtime(p.name, dev.compiler.compile_cached(p.src, p.renderer))
  gs, ls = p.launch_dims({})
  prg(*[bufs[i]._buf for i in p.globals], global_size=gs, local_size=ls)
  return bufs[0].numpy(), p

E2E = [
  (elementwise_ast, []), (elementwise_ast, [Opt(OptOps.UPCAST, 1, 4)]), (elementwise_ast, [Opt(OptOps.THREAD, 0, 4), Opt(OptOps.UPCAST, 0, 8)]),
  (lambda: elementwise_ast(M=4, N=6), [Opt(OptOps.PADTO, 1, 4), Opt(OptOps.UPCAST, 1, 4)]),
  (reduce_ast, [Opt(OptOps.UNROLL, 0, 4), Opt(OptOps.THREAD, 0, 2)]), (matmul_ast, [Opt(OptOps.SWAP, 0, 1)]),
  (matmul_ast, [Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.UNROLL, 0, 4), Opt(OptOps.THREAD, 0, 2)]),
  (matmul_ast, None),
  (matmul_ast, [Opt(OptOps.KBLOCK, 0, 2), Opt(OptOps.THREAD, 0, 2)]),
  (lambda: matmul_ast(M=7, N=13, K=12), [Opt(OptOps.UPCAST, 1, 13), Opt(OptOps.KBLOCK, 0, 6), Opt(OptOps.UNROLL, 0, 3)]),
  (lambda: matmul_ast(M=4, N=7, K=8), [Opt(OptOps.PADTO, 1, 4), Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.KBLOCK, 0, 2),
                                       Opt(OptOps.THREAD, 0, 2)]),
]

@pytest.mark.parametrize("mk,opts", E2E, ids=[f"{mk.__name__}-{i}" for i, (mk, _) in enumerate(E2E)])
def test_opts_end_to_end_on_cpu(mk, opts):
  ast = mk()
  ref = _bufs(ast, seed=1)
  run_kernel(ast, ref)
  got, p = _run_on_cpu(ast, opts)
  np.testing.assert_allclose(got, ref[0], rtol=1e-6)
  if opts: assert tuple(p.applied_opts) == tuple(opts)
  if opts and any(o.op is OptOps.THREAD for o in opts): assert p.global_size[0] == next(o.arg for o in opts if o.op is OptOps.THREAD)

def test_heuristics_thread_and_upcast_big_matmul_on_cpu():
  from tinygrad.codegen.heuristic import hand_coded_optimizations
  opts = hand_coded_optimizations(matmul_ast(256, 256, 256), CPULike())
  kinds = {o.op for o in opts}
  assert OptOps.UPCAST in kinds and OptOps.THREAD in kinds
  # register blocking: the contiguous output axis (1) gets 16 lanes, the other reuse axis 8
  assert Opt(OptOps.UPCAST, 1, 16) in opts and Opt(OptOps.UPCAST, 0, 8) in opts
  # and they apply
  apply_opts(matmul_ast(256, 256, 256), opts, CPULike())

def test_heuristics_never_raise_and_skip_threads_on_small_kernels():
  from tinygrad.codegen.heuristic import hand_coded_optimizations
  for mk in (elementwise_ast, reduce_ast, matmul_ast, lambda: elementwise_ast(3, 5), lambda: reduce_ast(7, 13),
             lambda: elementwise_ast(0, 8), lambda: reduce_ast(4, 0), lambda: colsum_ast(1, 1)):
    for ren in (CPULike(), GPULike()):
      opts = hand_coded_optimizations(mk(), ren)
      _check_same(mk(), opts, ren)
      assert all(o.op is not OptOps.THREAD for o in opts)

def test_heuristics_group_small_output_reduce_on_gpu_like():
  from tinygrad.codegen.heuristic import hand_coded_optimizations
  # NOTE: GROUP where the reduce reads memory contiguously (a warp's threads take consecutive elements), else GROUPTOP
  opts = hand_coded_optimizations(reduce_ast(M=2, K=1024), GPULike())
  assert any(o.op in (OptOps.GROUP, OptOps.GROUPTOP) for o in opts)

def test_grid_dims_respect_their_limits_in_lowering_order():
  from tinygrad.codegen import full_rewrite_to_sink
  class SmallGrid(GPULike):
    global_max = (1 << 20, 4, 4)
  # three output axes of 8, 8, 2 (the lowerer numbers them innermost first: axis 2 is gidx0): 2 fits gidx0, but 8 is
  # over the limit 4 of gidx1 and gidx2, so all three become GLOBAL and share gidx0 (2 * 8 * 8 = 128 <= 2**20)
  i, j, k = UOp.range(8, 0), UOp.range(8, 1), UOp.range(2, 2)
  out = _g(0, 128)
  ast = UOp.sink(out.index(i * 16 + j * 2 + k).store(UOp.const(dtypes.float32, 1.0)).end(i, j, k))
  new = apply_opts(ast, [], SmallGrid())
  assert [(r.arg[0], axis_size(r)) for r in axes_of(new, AxisType.GLOBAL)] == [(0, 8), (1, 8), (2, 2)]
  specials = {u.arg: u.src[0].arg for u in full_rewrite_to_sink(ast, SmallGrid(), []).toposort() if u.op is Ops.SPECIAL}
  assert specials == {"gidx0": 128}

def colsum_ast(R, C):
  # out[j] = sum_i a[i, j]: the reduce walks a with stride C, the output axis reads it contiguously
  j, i = UOp.range(C, 0), UOp.range(R, 1, AxisType.REDUCE)
  out, a = _g(0, C), _g(1, R * C)
  return UOp.sink(out.index(j).store(a.index(i * C + j).load().reduce(i, arg=Ops.ADD)).end(j))

def test_stride_of():
  from tinygrad.codegen.opt import index_stride
  ast = matmul_ast(8, 8, 8)
  i, j, k = sorted([u for u in ast.toposort() if u.op is Ops.RANGE], key=lambda r: r.arg[0])
  idx = i * 8 + j
  assert (index_stride(idx, i), index_stride(idx, j), index_stride(idx, k)) == (8, 1, 0)

def test_heuristics_upcast_contiguous_output_of_strided_reduce():
  from tinygrad.codegen.heuristic import hand_coded_optimizations
  opts = hand_coded_optimizations(colsum_ast(4096, 4096), CPULike())
  assert opts[:2] == [Opt(OptOps.UPCAST, 0, 16), Opt(OptOps.UPCAST, 0, 4)]
  # a row sum reads along its reduce: no upcast there, an unroll instead
  rows = hand_coded_optimizations(reduce_ast(4096, 4096), CPULike())
  assert not any(o.op is OptOps.UPCAST for o in rows) and Opt(OptOps.UNROLL, 0, 4) in rows
  # under BIG_BLOCK_MIN_WORK too: whole cache lines, and 4 of them where each thread still gets a tile (it took 4 lanes
  # unrolled by 4 there, each line read 4 times over: a (256, 4096) sum 0.89 -> 0.08 ms)
  mid = hand_coded_optimizations(colsum_ast(256, 4096), CPULike())
  assert mid[:2] == [Opt(OptOps.UPCAST, 0, 16), Opt(OptOps.UPCAST, 0, 4)]
  _check_same(colsum_ast(256, 4096), mid)
  # 96 columns: one line each, 6 tiles for the threads; 16 columns: the whole row is one tile
  few = hand_coded_optimizations(colsum_ast(64, 96), CPULike())
  assert few[0] == Opt(OptOps.UPCAST, 0, 16) and Opt(OptOps.UPCAST, 0, 4) not in few
  small = hand_coded_optimizations(colsum_ast(8, 16), CPULike())
  assert small[0] == Opt(OptOps.UPCAST, 0, 16) and Opt(OptOps.UPCAST, 0, 4) not in small
  _check_same(colsum_ast(8, 16), small)
  # a GPU's threads take the columns: 4 lanes
  assert hand_coded_optimizations(colsum_ast(256, 4096), GPULike())[0] == Opt(OptOps.UPCAST, 0, 4)

def test_symbolic_axis_is_left_alone():
  from tinygrad.codegen.heuristic import hand_coded_optimizations
  n = UOp.variable("n", 1, 64)
  i, j = UOp.range(n, 0), UOp.range(16, 1)
  out, a = _g(0, 64 * 16), _g(1, 64 * 16)
  ast = UOp.sink(out.index(i * 16 + j).store(a.index(i * 16 + j).load()).end(i, j))
  with pytest.raises(KernelOptError, match="symbolic"): apply_opts(ast, [Opt(OptOps.UPCAST, 0, 4)], CPULike())
  opts = hand_coded_optimizations(ast, CPULike())
  assert all(o.axis == 1 for o in opts if o.op is OptOps.UPCAST)
  ref, got = _bufs(ast), _bufs(ast)
  run_kernel(ast, ref, {"n": 5})
  run_kernel(apply_opts(ast, opts, CPULike()), got, {"n": 5})
  np.testing.assert_array_equal(got[0], ref[0])

def test_heuristics_whole_axis_upcast_of_16_on_big_cpu_kernel():
  # the contiguous output axis has exactly 16 elements: UPCAST 16 takes all of it (the axis leaves the output axes), and
  # the extra 2 lanes the heuristics give a split axis must not land on another axis (or past the end of the list)
  from tinygrad.codegen.heuristic import hand_coded_optimizations
  ast = matmul_ast(1024, 16, 1024)
  opts = hand_coded_optimizations(ast, CPULike())
  assert Opt(OptOps.UPCAST, 1, 16) in opts and Opt(OptOps.UPCAST, 1, 2) not in opts
  assert apply_opts(ast, opts, CPULike()).arg.applied_opts == tuple(opts)

# ---- KBLOCK: the reduce's outer part outside the output loops, partial sums through the output buffer ----

def test_kblock_is_the_outermost_loop_and_not_an_output_axis():
  new = apply_opts(matmul_ast(K=8), [Opt(OptOps.KBLOCK, 0, 2)], CPULike())
  kb = axes_of(new, AxisType.KBLOCK)
  assert [axis_size(r) for r in kb] == [4] and [axis_size(r) for r in reduce_axes(new)] == [2]
  assert kb[0] not in output_axes(new) and len(output_axes(new)) == 2
  # the store reads what the earlier blocks stored, gated off in block 0 (the output is not initialized)
  gated = [u for u in new.toposort() if u.op is Ops.INDEX and u.src[0].arg == 0 and u.src[1].is_masked()]
  assert len(gated) == 1 and kb[0] in gated[0].src[1].get_valid()._ranges

def test_only_one_kblock():
  with pytest.raises(KernelOptError, match="already has a KBLOCK"):
    apply_opts(matmul_ast(K=8), [Opt(OptOps.KBLOCK, 0, 2), Opt(OptOps.KBLOCK, 0, 2)], CPULike())

def test_heuristics_kblock_a_matmul_whose_rows_are_a_page_apart():
  from tinygrad.codegen.heuristic import hand_coded_optimizations, KBLOCK_STEPS
  # 1024 floats per row of B: every reduce step reads 4 KiB further on
  opts = hand_coded_optimizations(matmul_ast(1024, 1024, 1024), CPULike())
  assert Opt(OptOps.KBLOCK, 0, KBLOCK_STEPS) in opts
  ast = apply_opts(matmul_ast(1024, 1024, 1024), opts, CPULike())
  assert [axis_size(r) for r in axes_of(ast, AxisType.KBLOCK)] == [1024 // KBLOCK_STEPS]
  # rows 4000 bytes apart spread over the cache; a GPU runs output tiles in parallel
  assert not any(o.op is OptOps.KBLOCK for o in hand_coded_optimizations(matmul_ast(1000, 1000, 1000), CPULike()))
  assert not any(o.op is OptOps.KBLOCK for o in hand_coded_optimizations(matmul_ast(1024, 1024, 1024), GPULike()))
  # a column sum reads each element once: there is no panel to keep in cache
  assert not any(o.op is OptOps.KBLOCK for o in hand_coded_optimizations(colsum_ast(4096, 4096), CPULike()))

# ---- PACK: a panel of an input copied to a contiguous per-thread buffer (a local BUFFERIZE) ----

class CPUVectorLike(CPULike):
  """A CPU target that packs its own vector accumulators of 16 float32 lanes (as the LLVM renderer does on AVX-512): the
  heuristics pack panels and widen register tiles for it. 2 threads (as the machines this was measured on)."""
  masked_loads, threads = True, 2
  def acc_widths(self, dtype): return tuple(w for w in (16, 8, 4, 2) if w * dtype.itemsize <= 64)

def symbolic_matmul_ast(M=4, N=4):
  i, j = UOp.range(M, 0), UOp.range(N, 1)
  k = UOp.range(UOp.variable("k", 1, 8), 2, AxisType.REDUCE)
  out, a, b = _g(0, M * N), _g(1, M * 8), _g(2, 8 * N)
  acc = (a.index(i * 8 + k).load() * b.index(k * N + j).load()).reduce(k, arg=Ops.ADD)
  return UOp.sink(out.index(i * N + j).store(acc).end(i, j))

# NOTE: in matmul_ast the packable loads are A (0) then B (1): B's panel is reused by every row i, A's by every column j
PACKED = [
  (matmul_ast, [Opt(OptOps.PACK, 1)], CPULike),
  (matmul_ast, [Opt(OptOps.PACK, 0)], CPULike),
  (matmul_ast, [Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.PACK, 1)], CPULike),
  (matmul_ast, [Opt(OptOps.PACK, 1), Opt(OptOps.PACK, 0)], CPULike),
  # later opts split a range of the panel (UNROLL of K, UPCAST of a lane) or one the fill runs in (THREAD, UPCAST of j)
  (matmul_ast, [Opt(OptOps.UPCAST, 1, 2), Opt(OptOps.PACK, 1), Opt(OptOps.UNROLL, 0, 2), Opt(OptOps.UPCAST, 1, 2),
                Opt(OptOps.UPCAST, 0, 2), Opt(OptOps.THREAD, 0, 2)], CPULike),
  (matmul_ast, [Opt(OptOps.SWAP, 0, 1), Opt(OptOps.PACK, 1), Opt(OptOps.THREAD, 1, 2)], CPULike),
  # a padded lane axis: the fill copies the masked-off elements as the 0 the masked load read
  (lambda: matmul_ast(M=5, N=7, K=6), [Opt(OptOps.PADTO, 1, 4), Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.PACK, 1)], CPULike),
  (lambda: matmul_ast(M=5, N=7, K=6), [Opt(OptOps.PACK, 1), Opt(OptOps.PADTO, 1, 4), Opt(OptOps.UPCAST, 1, 4)], CPULike),
  # cache blocked first: the panel is one block of K
  (lambda: matmul_ast(K=12), [Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.KBLOCK, 0, 3), Opt(OptOps.PACK, 1)], CPULike),
  (lambda: matmul_ast(K=12), [Opt(OptOps.PACK, 1), Opt(OptOps.KBLOCK, 0, 3)], CPULike),
  # W of x @ W^T cut by KBLOCK: its rows are separate runs of 4 KiB, filled run by run (fill_run)
  (wt_matmul_ast, [Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.KBLOCK, 0, 1024), Opt(OptOps.PACK, 1)], CPULike),
  (lambda: wt_matmul_ast(M=3, N=5, K=2048), [Opt(OptOps.PADTO, 1, 4), Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.KBLOCK, 0, 1024),
                                            Opt(OptOps.PACK, 1), Opt(OptOps.THREAD, 0, 3)], CPULike),
  # filters cut by KBLOCK over their input channels: runs of 128 channels x 9 taps, filled as one loop each
  (wt_conv_ast, [Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.KBLOCK, 0, 128), Opt(OptOps.PACK, 1)], CPULike),
  # any target: the buffer is per thread (GPU-style: per lane of the grid)
  (matmul_ast, [Opt(OptOps.PACK, 1), Opt(OptOps.LOCAL, 0, 2), Opt(OptOps.GROUPTOP, 0, 2)], GPULike),
  # PACK_OPERAND (arg 1): A's operand (a in operand_matmul_ast is packable load 0) with its bias, scale and shift or exp2
  # computed in the fill, in A's own order; B's panel (load 2) packed too
  (operand_matmul_ast, [Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.UPCAST, 0, 2), Opt(OptOps.PACK, 0, 1)], CPULike),
  (lambda: operand_matmul_ast(form="affine"), [Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.PACK, 2),
                                               Opt(OptOps.PACK, 0, 1)], CPULike),
  (lambda: operand_matmul_ast(form="exp"), [Opt(OptOps.UPCAST, 0, 2), Opt(OptOps.PACK, 0, 1), Opt(OptOps.THREAD, 1, 2)],
   CPULike),
  # A read along its rows: the fill's innermost range is the tile's rows
  (lambda: operand_matmul_ast(a_rows=False), [Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.PACK, 0, 1)], CPULike),
  # a reduce of more than 64 steps along A's rows: filled in runs of 16
  (lambda: operand_matmul_ast(K=96), [Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.PACK, 0, 1)], CPULike),
  (lambda: operand_matmul_ast(M=5, K=12), [Opt(OptOps.PADTO, 0, 4), Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.PACK, 0, 1),
                                           Opt(OptOps.KBLOCK, 0, 3)], CPULike),
  (operand_matmul_ast, [Opt(OptOps.PACK, 0, 1), Opt(OptOps.UNROLL, 0, 2), Opt(OptOps.UPCAST, 0, 2)], CPULike),
  (operand_matmul_ast, [Opt(OptOps.PACK, 0, 1), Opt(OptOps.LOCAL, 0, 2)], GPULike),
]

@pytest.mark.parametrize("mk,opts,ren", PACKED, ids=[" ".join(f"{o.op.name}{o.axis}" for o in os) for _, os, _ in PACKED])
def test_pack_preserves_semantics(mk, opts, ren):
  new = _check_same(mk(), opts, ren())
  assert any(u.op is Ops.BUFFERIZE for u in new.toposort())

def test_pack_layout_is_contiguous_in_stride_order():
  # B[k, j] with j upcast by 4: the buffer is [K][4] (row-major, the lanes innermost), read at k * 4 + lane
  new = apply_opts(matmul_ast(M=8, N=8, K=6), [Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.PACK, 1)], CPULike())
  bz = [u for u in new.toposort() if u.op is Ops.BUFFERIZE]
  assert len(bz) == 1 and [axis_size(r) for r in bz[0].src[1:]] == [6, 4]
  assert all(r.arg[-1] is AxisType.LOOP for r in bz[0].src[1:])
  # the fill's ranges are not axes later opts may name
  assert not set(bz[0].src[1:]) & set(output_axes(new) + reduce_axes(new))
  rd = [u for u in new.toposort() if u.op is Ops.INDEX and u.src[0] is bz[0]][0]
  lane, k = axes_of(new, AxisType.UPCAST)[0], reduce_axes(new)[0]
  from tinygrad.uop.symbolic import simplify
  assert simplify(rd.src[1].substitute({k: k.const_like(2), lane: lane.const_like(3)})).arg == 2 * 4 + 3

def _fill(new):
  bz = [u for u in new.toposort() if u.op is Ops.BUFFERIZE]
  assert len(bz) == 1
  # the fill's loops nest by range id (lowerer.range_key): the innermost is the range of the highest id
  return [axis_size(r) for r in bz[0].src[1:]], axis_size(max(bz[0].src[1:], key=lambda r: r.arg[0]))

def test_pack_fills_a_panel_of_separate_long_runs_of_its_input_run_by_run():
  # W[j, k] of x @ W^T cut by KBLOCK into blocks of 1024 of its 2048 steps: the panel's 4 rows are runs of 4 KiB, 8 KiB
  # apart in W. The layout stays [1024][4] (the product reads 4 lanes a step); the fill's innermost loop is the run's
  opts = [Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.KBLOCK, 0, 1024), Opt(OptOps.PACK, 1)]
  assert _fill(_check_same(wt_matmul_ast(), opts)) == ([1024, 4], 1024)
  # whole rows of W (adjacent: one run of the input), runs under FILL_RUN_BYTES, and B of A @ B (read along the lanes):
  # filled in the panel's order, its lanes innermost
  assert _fill(apply_opts(wt_matmul_ast(), opts[:1] + opts[2:], CPULike())) == ([2048, 4], 4)
  assert _fill(apply_opts(wt_matmul_ast(K=1024), [*opts[:1], Opt(OptOps.KBLOCK, 0, 512), opts[2]], CPULike())) == \
    ([512, 4], 4)
  assert _fill(apply_opts(matmul_ast(M=2, N=4, K=2048), opts, CPULike())) == ([1024, 4], 4)
  # the lowered program: the fill's loop over 1024 steps inside its loop over the 4 rows, on the C path
  from tinygrad.codegen import get_program
  from tinygrad.renderer.cstyle import CRenderer
  src = get_program(wt_matmul_ast(), CRenderer(threads=2), opts).src
  loops = re.findall(r"for \(int \w+ = 0; \w+ < (\d+);", src)
  assert loops[:3] == ["2", "4", "1024"], loops
  # a run over two reduce ranges (128 input channels x 9 taps of each filter, 4.5 KiB, 9 KiB apart): one fill loop of
  # 1152 at their place in the layout, its index folded back to the run's offset (no division in the fill)
  opts = [Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.KBLOCK, 0, 128), Opt(OptOps.PACK, 1)]
  assert _fill(_check_same(wt_conv_ast(), opts)) == ([1152, 4], 1152)
  src = get_program(wt_conv_ast(), CRenderer(threads=2), opts).src
  fill = src[src.index("< 1152;"):src.index("}")]
  assert "/" not in fill and "%" not in fill, fill
  # 64 channels x 9 taps (2.25 KiB): under FILL_RUN_BYTES
  assert _fill(apply_opts(wt_conv_ast(), [*opts[:1], Opt(OptOps.KBLOCK, 0, 64), opts[2]], CPULike()))[1] == 4

def test_pack_operand_holds_the_computed_operand_in_the_inputs_order():
  # A's operand a[i, k] + c[k] with i upcast by 2: the buffer is [2][K] (A's order: its rows, each contiguous along k)
  # and holds the sums; the product's loop reads no c any more
  new = apply_opts(operand_matmul_ast(M=8, N=16, K=8), [Opt(OptOps.UPCAST, 0, 2), Opt(OptOps.PACK, 0, 1)], CPULike())
  bz = [u for u in new.toposort() if u.op is Ops.BUFFERIZE]
  assert len(bz) == 1 and [axis_size(r) for r in bz[0].src[1:]] == [2, 8] and bz[0].src[0].op is Ops.ADD
  red = [u for u in new.toposort() if u.op is Ops.REDUCE][0]
  assert {ld.src[0].src[0].arg for ld in red.toposort() if ld.op is Ops.LOAD and ld.src[0].src[0].op is Ops.DEFINE_GLOBAL
          and ld not in bz[0].toposort()} == {2}
  # more than 64 steps along the rows: the fill's innermost range is split into runs of 16 lanes, the layout unchanged
  new = apply_opts(operand_matmul_ast(K=96), [Opt(OptOps.UPCAST, 0, 2), Opt(OptOps.PACK, 0, 1)], CPULike())
  bz = [u for u in new.toposort() if u.op is Ops.BUFFERIZE]
  assert [axis_size(r) for r in bz[0].src[1:]] == [2, 6, 16]

PACK_ILLEGAL = [
  (elementwise_ast, Opt(OptOps.PACK, 0), "0 packable load"),
  # the output buffer is never packed (a copy would miss what the kernel stores into it)
  (inplace_matmul_ast, Opt(OptOps.PACK, 1), "1 packable load"),
  (reduce_ast, Opt(OptOps.PACK, 0), "depends on every output axis"),
  (matmul_ast, Opt(OptOps.PACK, 1, 2), "PACK's arg is 0"),
  (symbolic_matmul_ast, Opt(OptOps.PACK, 1), "symbolic size"),
  (lambda: matmul_ast(M=2, N=2, K=1 << 18), Opt(OptOps.PACK, 1), "over PACK's limit"),
]

@pytest.mark.parametrize("mk,opt,msg", PACK_ILLEGAL, ids=[m for _, _, m in PACK_ILLEGAL])
def test_illegal_pack_raises_clear_error(mk, opt, msg):
  with pytest.raises(KernelOptError, match=msg): apply_opts(mk(), [opt], CPULike())

def test_random_opt_sequences_with_pack_preserve_semantics():
  rnd = random.Random(4321)
  ops = [OptOps.UPCAST, OptOps.UNROLL, OptOps.THREAD, OptOps.SWAP, OptOps.PADTO, OptOps.KBLOCK, OptOps.PACK, OptOps.PACK]
  packed = 0
  for _ in range(40):
    ast, opts = rnd.choice([lambda: matmul_ast(M=6, N=8, K=12), lambda: matmul_ast(M=5, N=7, K=8)])(), []
    for _ in range(rnd.randint(2, 5)):
      op = rnd.choice(ops)
      cand = opts + [Opt(op, rnd.randint(0, 1), None if op is OptOps.PACK else rnd.choice([0, 2, 3, 4, 8]))]
      try: apply_opts(ast, cand, CPULike())
      except KernelOptError: continue
      opts = cand
    _check_same(ast, opts)
    packed += any(o.op is OptOps.PACK for o in opts)
  assert packed > 10, f"only {packed} random sequences applied PACK"

def test_pack_runs_the_same_on_every_cpu_backend():
  # lowered and run for real: the C path, the LLVM path and the PYTHON interpreter, against the reference executor
  from fuzz.campaign.backends import open_backends
  from fuzz.gen.kernels import KernelCase
  from fuzz.campaign.levels import KernelLevel
  ok, missing = open_backends(["cpu", "llvm", "python"])
  if "llvm" in missing: ok, missing = open_backends(["cpu", "python"])
  assert not missing, missing
  cases = [KernelCase(mk(), {}, tuple(opts), seed) for seed, (mk, opts, _) in enumerate(PACKED)]
  cases.append(KernelCase(matmul_ast(M=16, N=32, K=16), {}, (Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.UPCAST, 0, 4),
                                                              Opt(OptOps.SWAP, 0, 1), Opt(OptOps.PACK, 1)), 99))
  # each target keeps the opts that fit it: every PACK must fit every one of them
  from fuzz.campaign.backends import fit_opts
  from tinygrad.renderer.cstyle import CRenderer
  from tinygrad.runtime.ops_python import PythonRenderer
  for case in cases:
    for ren in (CRenderer(threads=2), PythonRenderer()):
      fit = fit_opts(case.ast, ren, case.opts) or []
      assert [o for o in fit if o.op is OptOps.PACK] == [o for o in case.opts or () if o.op is OptOps.PACK], (ren, fit)
  for case, fails in zip(cases, KernelLevel().check(cases, ok)):
    assert not fails, "\n".join(f"{f.backend} {f.stage}: {f.message[:2000]}" for f in fails) + f"\nopts {case.opts}"

def test_heuristics_pack_the_reused_panel_of_a_big_matmul():
  from tinygrad.codegen.heuristic import hand_coded_optimizations
  from tinygrad.codegen.opt import PACK_MAX_BYTES
  # B's panel (K x 32 columns, rows a row of B apart) is read again for every row block: packed, and not KBLOCKed
  opts = hand_coded_optimizations(matmul_ast(1024, 1024, 1024), CPUVectorLike())
  assert Opt(OptOps.PACK, 1) in opts and not any(o.op is OptOps.KBLOCK for o in opts), opts
  # a panel over PACK's limit (8192 steps x 32 lanes, 1 MiB) is cache blocked first, into the longest blocks (of 2048
  # steps at most) whose panel fits
  opts = hand_coded_optimizations(matmul_ast(512, 512, 8192), CPUVectorLike())
  assert Opt(OptOps.PACK, 1) in opts and [o.arg for o in opts if o.op is OptOps.KBLOCK] == [2048], opts
  bz = [u for u in apply_opts(matmul_ast(512, 512, 8192), opts, CPUVectorLike()).toposort() if u.op is Ops.BUFFERIZE]
  assert len(bz) == 1 and 4 * int(np.prod([axis_size(r) for r in bz[0].src[1:]])) == 2048 * 32 * 4 <= PACK_MAX_BYTES
  # B of 16 columns is contiguous already: nothing to pack; C-style targets (no own vector loads) keep KBLOCK
  assert not any(o.op is OptOps.PACK for o in hand_coded_optimizations(matmul_ast(8192, 16, 1024), CPUVectorLike()))
  assert not any(o.op is OptOps.PACK for o in hand_coded_optimizations(matmul_ast(1024, 1024, 1024), CPULike()))
  # small kernels and GPU targets: no packing
  assert not any(o.op is OptOps.PACK for o in hand_coded_optimizations(matmul_ast(64, 64, 64), CPUVectorLike()))
  assert not any(o.op is OptOps.PACK for o in hand_coded_optimizations(matmul_ast(1024, 1024, 1024), GPULike()))

def test_pack_is_a_beam_action():
  from tinygrad.codegen.search import ACTIONS, candidates
  assert Opt(OptOps.PACK, 1) in ACTIONS
  cands = candidates(matmul_ast(), CPULike(), [[]], set())
  assert [Opt(OptOps.PACK, 1)] in cands and [Opt(OptOps.PACK, 0)] in cands

def test_random_kernels_with_pack_match_reference():
  # the fuzzer's random kernels (every dtype, masked and gather loads, several reduces) with PACK inserted among their
  # opts: the C path, the LLVM path and the PYTHON interpreter against the reference, within the ULP budget
  from fuzz.campaign.backends import open_backends, fit_opts
  from fuzz.gen.kernels import KernelCase
  from fuzz.campaign.levels import KernelLevel
  from fuzz.strategies import build_kernel, RandomChooser
  from tinygrad.codegen.opt import packable_loads
  from tinygrad.codegen.program import prepare_kernel
  from tinygrad.renderer.cstyle import CRenderer
  ok, missing = open_backends(["cpu", "llvm", "python"])
  if "llvm" in missing: ok, missing = open_backends(["cpu", "python"])
  assert not missing, missing
  rnd, cases = random.Random(7), []
  for seed in range(400):
    c = build_kernel(RandomChooser(seed))
    if not (n := len(packable_loads(prepare_kernel(c.ast)))): continue
    opts = list(c.opts or [])
    opts.insert(rnd.randint(0, len(opts)), Opt(OptOps.PACK, rnd.randint(0, n - 1)))
    if any(o.op is OptOps.PACK for o in fit_opts(c.ast, CRenderer(threads=2), opts) or []):
      cases.append(KernelCase(c.ast, c.var_vals, tuple(opts), c.seed))
    if len(cases) == 6: break
  assert len(cases) == 6, f"only {len(cases)} random kernels took a PACK"
  for case, fails in zip(cases, KernelLevel().check(cases, ok)):
    assert not fails, "\n".join(f"{f.backend} {f.stage}: {f.message[:2000]}" for f in fails) + \
      f"\n---- kernel (opts {case.opts}) ----\n{KernelLevel().text(case)}"

def test_heuristics_widen_the_register_tile_where_registers_hold_16_lanes():
  from tinygrad.codegen.heuristic import hand_coded_optimizations
  # 8 rows x 48 lanes (24 accumulators of 16 lanes) where 48 divides the axis; B's panel packed; THREAD on the rows
  opts = hand_coded_optimizations(matmul_ast(768, 768, 768), CPUVectorLike())
  assert opts[:3] == [Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.UPCAST, 1, 3), Opt(OptOps.UPCAST, 0, 8)], opts
  assert any(o.op is OptOps.THREAD for o in opts) and any(o.op is OptOps.PACK for o in opts), opts
  # 1024 is not padded to 1056 for 48 lanes (the padded work and gates cost more than the wider tile gains): the 32-lane
  # tile, packed
  opts = hand_coded_optimizations(matmul_ast(1024, 1024, 1024), CPUVectorLike())
  assert opts[:3] == [Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.UPCAST, 1, 2), Opt(OptOps.UPCAST, 0, 8)], opts
  assert not any(o.op is OptOps.PADTO for o in opts) and any(o.op is OptOps.PACK for o in opts), opts
  # 1000 (no multiple of 48): the 32-lane tile (padded to 1024: 32 tiles a row), and THREAD
  opts = hand_coded_optimizations(matmul_ast(1000, 1000, 1000), CPUVectorLike())
  assert Opt(OptOps.UPCAST, 1, 2) in opts and any(o.op is OptOps.THREAD for o in opts), opts
  # no axis the threads split evenly: 1008 = 21 x 48 and = 63 x 16 (odd tile counts both), 1040 = 65 x 16, by 125 tiles
  # of 8 rows; the lanes' axis padded to an even number of 32-lane tiles then (1024, 1088), and threaded
  for n in (1008, 1040):
    opts = hand_coded_optimizations(matmul_ast(1000, n, 1000), CPUVectorLike())
    assert opts[:3] == [Opt(OptOps.PADTO, 1, 64), Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.UPCAST, 1, 2)], opts
    assert any(o.op is OptOps.THREAD for o in opts) and any(o.op is OptOps.PACK for o in opts), opts
  # but a kernel that an unpadded tile threads is not padded (768 x 1008: 96 tiles of 8 rows)
  opts = hand_coded_optimizations(matmul_ast(768, 1008, 1000), CPUVectorLike())
  assert not any(o.op is OptOps.PADTO for o in opts) and any(o.op is OptOps.THREAD for o in opts), opts
  # 256 = 8 x 32: padding to 288 for 48 lanes wastes 1/8: the 32-lane tile; so for a short reduce (storing the tile
  # weighs more than its inner loop)
  assert Opt(OptOps.UPCAST, 1, 3) not in hand_coded_optimizations(matmul_ast(256, 256, 256), CPUVectorLike())
  assert Opt(OptOps.UPCAST, 1, 3) not in hand_coded_optimizations(matmul_ast(4096, 4096, 64), CPUVectorLike())
  # float64 lanes fill registers twice as fast, and a C-style target (no own accumulators) keeps 32 lanes
  assert Opt(OptOps.UPCAST, 1, 3) not in hand_coded_optimizations(matmul_ast(1024, 1024, 1024, dtypes.float64),
                                                                   CPUVectorLike())
  assert Opt(OptOps.UPCAST, 1, 3) not in hand_coded_optimizations(matmul_ast(1024, 1024, 1024), CPULike())
