"""The matmul-shaped kernels real models make (bench/models.py), with the default heuristics, against torch: the weight
gradient of a linear layer whose input is a fused gelu (a reduce over batch x time, both operands read along it, the
gelu recomputed in it), the weight gradient of a fused qkv projection of a layernorm (a cat of three matmuls), A^T @ B
(both operands read along the reduce with a row stride). On the C path and the LLVM path at sizes where the CPU's
register blocking applies, and on the PYTHON interpreter at small sizes, all under SPEC=2. The opts the CPU heuristics
choose for these forms (and for a gelu-fed A @ W^T and a batch-broadcast matmul) are checked for the structure that makes
them fast: register tiles, no cut of a matmul into pieces, the wide lanes where the costly operand is reused (a
transcendental) or along the operand whose fused ops are cheap (a bias add, a scale and shift)."""
import importlib.util
import numpy as np
import pytest
import torch
import tinygrad.tensor as tinygrad_tensor
from tinygrad import Tensor, Device
from tinygrad.helpers import Context
from tinygrad.uop import Ops, AxisType, GroupOp
from tinygrad.codegen.heuristic import hand_coded_optimizations
from tinygrad.codegen.opt import Opt, OptOps, output_axes, reduce_axes, axis_size, apply_opts, axes_of, packable_loads, \
  index_stride
from tinygrad.codegen.program import prepare_kernel
from tinygrad.schedule import rangeify
from tinygrad.codegen import get_program
from tests.llvm_device import llvm_cpu_device, llvm_cpu_device_at, c_cpu_device
from tinygrad.renderer.cstyle import CRenderer

HAS_LLVM = importlib.util.find_spec("llvmlite") is not None
# NOTE: each CPU path as a CPU device of this process (tests/llvm_device.py: CPU_LLVM is read when a device opens)
DEVICES = ["C", *(["LLVM"] if HAS_LLVM else []), "PYTHON"]
# (batch, time, model dim, hidden dim): the weight gradients reduce over B*T = 512 with d x f, 3d x d outputs: past the
# CPU heuristics' big-kernel threshold (2^24 multiply-adds), where the 32x8 register tiles apply
BIG, SMALL = (4, 128, 128, 256), (2, 4, 8, 16)

def llvm512() -> str:
  """The LLVM path with AVX-512's registers whatever the host has: the tile rules checked here were measured there (an
  AVX2 host's budget, 16 registers, is tested on its own below)"""
  return llvm_cpu_device_at(512)

def rand(seed: int, *shape: int) -> np.ndarray: return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)

def tol(x: np.ndarray, ref: np.ndarray, k: int) -> None:
  # float32 sums of k products in another order: relative to the size of the terms
  np.testing.assert_allclose(x, ref, atol=4e-6 * k ** 0.5 * max(1.0, float(np.abs(ref).max())), rtol=1e-4)

def gelu_linear(dev: str, b: int, t: int, d: int, f: int) -> tuple[Tensor, Tensor, np.ndarray, np.ndarray]:
  """gelu(h) @ W^T (both operands read along the reduce) and, against the upstream gradient g, its weight gradient
  dW = g^T gelu(h), reduced over (b, t): (out, dW, torch's out, torch's dW)."""
  h, w, g = rand(0, b, t, f), rand(1, d, f) / f ** 0.5, rand(2, b, t, d)
  tw = Tensor(w, device=dev, requires_grad=True)
  out = Tensor(h, device=dev).gelu(approximate="tanh") @ tw.T
  (out * Tensor(g, device=dev)).sum().backward()
  rh, rw = torch.from_numpy(h), torch.from_numpy(w).requires_grad_()
  rout = torch.nn.functional.gelu(rh, approximate="tanh") @ rw.T
  (rout * torch.from_numpy(g)).sum().backward()
  assert tw.grad is not None
  return out, tw.grad, rout.detach().numpy(), rw.grad.numpy()

def qkv_wgrad(dev: str, b: int, t: int, d: int) -> tuple[Tensor, np.ndarray]:
  """dW of a layernorm's qkv projection chunked in three (one gradient each, one through a relu): a cat of matmuls."""
  x, w, gs = rand(3, b, t, d), rand(4, 3 * d, d) / d ** 0.5, [rand(5 + i, b, t, d) for i in range(3)]
  tw = Tensor(w, device=dev, requires_grad=True)
  q, k, v = (Tensor(x, device=dev).layernorm() @ tw.T).chunk(3, dim=2)
  ((q * Tensor(gs[0], device=dev)).sum() + (k * Tensor(gs[1], device=dev)).sum() +
   (v.relu() * Tensor(gs[2], device=dev)).sum()).backward()
  rw = torch.from_numpy(w).requires_grad_()
  rq, rk, rv = (torch.nn.functional.layer_norm(torch.from_numpy(x), (d,), eps=1e-5) @ rw.T).chunk(3, dim=2)
  ((rq * torch.from_numpy(gs[0])).sum() + (rk * torch.from_numpy(gs[1])).sum() +
   (rv.relu() * torch.from_numpy(gs[2])).sum()).backward()
  assert tw.grad is not None
  return tw.grad, rw.grad.numpy()

@pytest.mark.parametrize("dev", DEVICES)
def test_weight_gradients_and_transposed_matmul_match_torch(dev):
  if dev in ("LLVM", "C"):
    want = dev == "LLVM"
    dev = llvm_cpu_device() if want else c_cpu_device()
    assert Device[dev].llvm == want
  b, t, d, f = SMALL if dev == "PYTHON" else BIG
  with Context(SPEC=2):
    out, got, rout, ref = gelu_linear(dev, b, t, d, f)
    tol(out.numpy(), rout, f)
    tol(got.numpy(), ref, b * t)
    got, ref = qkv_wgrad(dev, b, t, d)
    tol(got.numpy(), ref, b * t)
    a, bb = rand(10, b * t, d), rand(11, b * t, f)
    tol((Tensor(a, device=dev).T @ Tensor(bb, device=dev)).numpy(), a.T @ bb, b * t)

# ---- the opts the CPU heuristics choose (no kernel runs) ----

def kernels(*ts: Tensor) -> list:
  return [prepare_kernel(si.ast) for si in Tensor.schedule(*ts) if si.ast.op is Ops.SINK]

def out_sizes(ast) -> list[int]: return [axis_size(r) or 0 for r in output_axes(ast)]
def red_size(ast) -> int: return int(np.prod([axis_size(r) or 0 for r in reduce_axes(ast)]))

def the_kernel(ts: list[Tensor], outs: set[int], red: int):
  """The one kernel whose output axes have these sizes and whose reduce is this long."""
  ks = [k for k in kernels(*ts) if set(out_sizes(k)) == outs and red_size(k) == red]
  assert len(ks) == 1, [(out_sizes(k), red_size(k)) for k in kernels(*ts)]
  return ks[0]

def wide_axis(opts: list[Opt]) -> int | None:
  return next((o.axis for o in opts if o.op is OptOps.UPCAST and o.arg == 16), None)

REN = CRenderer(threads=2)

def test_heuristics_put_the_wide_lanes_where_a_fused_gelu_is_reused():
  # dW = g^T gelu(h): both axes are read with vector loads; every lane of d reuses each gelu(h) value, every lane of f
  # would compute its own: the 16 lanes go on d, and since the gelu's exp is reused by them, the rest of d too (2 more);
  # the 8 on f. NOTE: d under the scheduler's RECOMPUTE_SHARED (from there on the gelu, read by the forward too, is
  # stored by its own kernel, not recomputed here), f past 2^24 work
  b, t, d, f = 4, 128, 32, 1024
  _, grad, _, _ = gelu_linear("CPU", b, t, d, f)
  k = the_kernel([grad], {d, f}, b * t)
  assert any(u.op is Ops.EXP2 for u in k.toposort()), "the gelu is no longer recomputed in the weight gradient"
  opts = hand_coded_optimizations(k, REN)
  axes = output_axes(k)
  assert wide_axis(opts) is not None and axis_size(axes[wide_axis(opts)]) == d, opts
  assert Opt(OptOps.UPCAST, wide_axis(opts), 2) in opts and any(o.op is OptOps.UPCAST and o.arg == 8 for o in opts), opts

@pytest.mark.parametrize("form", ["scale and shift", "bias"])
def test_heuristics_put_the_wide_lanes_along_an_operand_with_cheap_fused_ops(form: str):
  # (x * s + t)^T @ y (a normalised input's weight gradient) and (x + t)^T @ y: both axes are read with vector loads;
  # along x's axis its scale and shift are vector ops, once per 16 lanes, where with the lanes on y's axis each of the
  # 8 rows would compute them as scalars and broadcast them every reduce step (measured 1.3-1.4x slower): the 16 lanes
  # go on x's axis (m), and the values agree with numpy under SPEC=2 on the C and LLVM paths
  k_, m, n = 512, 256, 384
  x, y, s, t = rand(20, k_, m), rand(21, k_, n), rand(22, m), rand(23, m)
  def prod(dev: str) -> Tensor:
    xs = Tensor(x, device=dev) * Tensor(s, device=dev) + Tensor(t, device=dev) if form == "scale and shift" else \
      Tensor(x, device=dev) + Tensor(t, device=dev)
    return xs.T @ Tensor(y, device=dev)
  k = the_kernel([prod("CPU")], {m, n}, k_)
  for ren in [REN, *([Device[llvm512()].renderer] if HAS_LLVM else [])]:
    opts = hand_coded_optimizations(k, ren)
    assert wide_axis(opts) is not None and axis_size(output_axes(k)[wide_axis(opts)]) == m, (ren, opts)
  ref = ((x * s + t) if form == "scale and shift" else (x + t)).T @ y
  for dev in [c_cpu_device(), *([llvm512()] if HAS_LLVM else [])]:
    with Context(SPEC=2): tol(prod(dev).numpy(), ref, k_)

@pytest.mark.parametrize("form", ["attention", "biased input"])
def test_a_computed_broadcast_operand_is_packed_with_its_ops_in_the_fill(form: str):
  # an attention's (Q + bias) K^T and (x + b) @ W^T: the lanes go on the other operand (K's tokens, W's rows, read with
  # the packed panel's vector loads), and each of the tile's 8 rows computed its operand's value, a scalar add and a
  # splat from a register, every reduce step (measured 1.2-1.4x slower). On the LLVM renderer (its own vector
  # accumulators) PACK_OPERAND stages the operand with its bias, in the input's order; not on the C path (no PACK).
  # Values against numpy under SPEC=2 on the C and LLVM paths
  if form == "attention":
    b_, t, h = 4, 128, 4
    xq, xk, bq = rand(30, b_, t, h * 64), rand(31, b_, t, h * 64), rand(32, h * 64)
    def heads(x: Tensor) -> Tensor: return x.reshape(b_, t, h, 64).permute(0, 2, 1, 3)
    def prod(dev: str) -> Tensor:
      q, k = heads(Tensor(xq, device=dev) + Tensor(bq, device=dev)), heads(Tensor(xk, device=dev))
      return q @ k.transpose(-1, -2)
    def np_heads(x: np.ndarray) -> np.ndarray: return x.reshape(b_, t, h, 64).transpose(0, 2, 1, 3)
    ref, red, outs, bias_elems = np_heads(xq + bq) @ np_heads(xk).transpose(0, 1, 3, 2), 64, {b_, h, t}, h * 64
  else:
    m, k_, n = 256, 512, 384
    x, w, bb = rand(33, m, k_), rand(34, n, k_), rand(35, k_)
    def prod(dev: str) -> Tensor: return (Tensor(x, device=dev) + Tensor(bb, device=dev)) @ Tensor(w, device=dev).T
    ref, red, outs, bias_elems = (x + bb) @ w.T, k_, {m, n}, k_
  k = the_kernel([prod("CPU")], outs, red)
  assert not any(o.op is OptOps.PACK for o in hand_coded_optimizations(k, REN))
  if HAS_LLVM:
    opts = hand_coded_optimizations(k, Device[llvm512()].renderer)
    packs = [o for o in opts if o.op is OptOps.PACK]
    assert [o.arg for o in packs] == [None, 1], opts
    # the operand packed is the one with the bias: its fill reads the bias, the product's loop does not
    new = apply_opts(k, opts, Device[llvm512()].renderer)
    bz = [u for u in new.toposort() if u.op is Ops.BUFFERIZE and u.src[0].op is Ops.ADD]
    assert len(bz) == 1 and any(u.op is Ops.LOAD and u.src[0].src[0].dtype.size == bias_elems for u in bz[0].toposort())
  for dev in [c_cpu_device(), *([llvm512()] if HAS_LLVM else [])]:
    with Context(SPEC=2): tol(prod(dev).numpy(), ref, red)

def test_a_weight_gradient_takes_its_lanes_on_the_big_operand_when_the_other_stays_cached():
  # an LSTM's gate weight gradient, sum over (t, b) of g[t, b, i] h[b, t, j]: g (2 MiB) time-major, h (512 KiB)
  # batch-major, so h walks the reduce's innermost step 8 KiB apart and g 4 KiB apart. By that stride the lanes went on
  # h's j, and g's 8 rows were read again from memory for every one of j's 8 lane tiles; with the lanes on g's i (its
  # panel packed once per lane tile), h's rows are read again from cache (measured alone 1.7-1.8 -> 1.0 ms, 2 threads,
  # AVX-512). Values against numpy under SPEC=2 on the C and LLVM paths
  t, b_, ni, nj = 32, 16, 1024, 256
  g, h = rand(40, t, b_, ni), rand(41, b_, t, nj)
  def prod(dev: str) -> Tensor: return Tensor.einsum("tbi,btj->ij", Tensor(g, device=dev), Tensor(h, device=dev))
  k = the_kernel([prod("CPU")], {ni, nj}, t * b_)
  for ren in [REN, *([Device[llvm512()].renderer] if HAS_LLVM else [])]:
    opts = hand_coded_optimizations(k, ren)
    # the buffer the 16 lanes read (the opts before any PACK: a packed load reads its copy)
    new = apply_opts(k, [o for o in opts if o.op not in (OptOps.PACK, OptOps.THREAD)], ren)
    lanes = [r for r in axes_of(new, AxisType.UPCAST) if axis_size(r) == 16]
    read = {ld.src[0].src[0].dtype.size for ld in new.toposort() if ld.op is Ops.LOAD and ld.src[0].op is Ops.INDEX
            and lanes and lanes[0] in ld.src[0].src[1]._ranges}
    assert read == {t * b_ * ni}, (ren, opts)
  ref = np.einsum("tbi,btj->ij", g, h)
  for dev in [c_cpu_device(), *([llvm512()] if HAS_LLVM else [])]:
    with Context(SPEC=2): tol(prod(dev).numpy(), ref, t * b_)

def test_heuristics_keep_a_cat_of_weight_gradients_whole_and_blocked():
  # the (3d, d) gradient of a chunked qkv projection: one register-blocked loop nest, not three cut pieces of which only
  # the first gets tiles (the opt limits count every piece's upcasts together)
  b, t, d, _ = BIG
  grad, _ = qkv_wgrad("CPU", b, t, d)
  opts = hand_coded_optimizations(the_kernel([grad], {3 * d, d}, b * t), REN)
  assert not any(o.op is OptOps.CUT for o in opts), opts
  assert [o.arg for o in opts if o.op is OptOps.UPCAST][:3] == [16, 2, 8], opts

def test_heuristics_block_transposed_and_broadcast_matmuls():
  b, t, d, f = BIG
  # A^T @ B: B is read along n with stride 1 (vector loads), A along m with stride 1 too, but n is the store's axis
  a = Tensor(rand(10, b * t, d)).T @ Tensor(rand(11, b * t, f))
  k = the_kernel([a], {d, f}, b * t)
  opts = hand_coded_optimizations(k, REN)
  assert wide_axis(opts) is not None and axis_size(output_axes(k)[wide_axis(opts)]) in (d, f), opts
  # gelu(h) @ W^T: both operands read along the reduce (no vector axis): the store's contiguous axis d takes the lanes
  w = Tensor(rand(1, d, f)).T
  k = the_kernel([Tensor(rand(0, b, t, f)).gelu() @ w], {b, t, d} - {1}, f)
  opts = hand_coded_optimizations(k, REN)
  assert wide_axis(opts) is not None and axis_size(output_axes(k)[wide_axis(opts)]) == d, opts
  # a batch of A against one B (broadcast over the batch): tiled like the plain matmul, lanes on n
  k = the_kernel([Tensor(rand(12, b, t, d)) @ Tensor(rand(13, d, f))], {b, t, f}, d)
  opts = hand_coded_optimizations(k, REN)
  assert wide_axis(opts) is not None and axis_size(output_axes(k)[wide_axis(opts)]) == f, opts

def test_heuristics_pack_w_of_x_at_w_transposed_where_the_renderer_owns_its_vectors():
  # x @ W^T on a renderer that builds its own vector accumulators (the LLVM path): W's tile loop goes outermost (SWAP)
  # and its panel is packed (PACK) with the reduce outermost, so each reduce step reads the tile's lanes contiguously
  from tests.codegen.test_opt import CPUVectorLike
  from tinygrad.codegen.opt import apply_opts, packable_loads, panel_ranges, index_stride
  b, t, d, f = BIG
  k = the_kernel([Tensor(rand(0, b * t, f)) @ Tensor(rand(1, 2 * d, f)).T], {b * t, 2 * d}, f)
  ren = CPUVectorLike()
  opts = hand_coded_optimizations(k, ren)
  assert any(o.op is OptOps.SWAP for o in opts) and any(o.op is OptOps.PACK for o in opts), opts
  pre = apply_opts(k, [o for o in opts if o.op is not OptOps.PACK and o.op is not OptOps.THREAD][:4], ren)
  ld = packable_loads(pre)[next(o.axis for o in opts if o.op is OptOps.PACK)]
  rs = panel_ranges(ld)
  assert rs[0].arg[-1] is AxisType.REDUCE and index_stride(ld.src[0].src[1].get_idx(), rs[0]) == 1, rs
  # the C path (gcc vectorizes, no own accumulators) keeps the loop order and packs nothing
  assert not any(o.op in (OptOps.SWAP, OptOps.PACK) for o in hand_coded_optimizations(k, REN))

# ---- matrix-vector products (an LLM's decode step) on the LLVM path ----

def q8_matvec(dev: str, n: int, k: int, rows: int = 1) -> tuple[Tensor, np.ndarray]:
  """x (rows, k) @ W^T with W (n, k) in Q8_0's layout: int8 values in blocks of 32, one float16 scale per block,
  dequantized inside the kernel (as apps/llm.py reads a Q8_0 weight); and numpy's product of the same values."""
  rng = np.random.default_rng(20)
  q = rng.integers(-127, 128, (n, k // 32, 32)).astype(np.int8)
  sc = (rng.random((n, k // 32, 1)) * 0.02 + 0.001).astype(np.float16)
  x = rand(21, rows, k)
  w = (Tensor(q, device=dev).cast("float32") * Tensor(sc, device=dev).cast("float32")).reshape(n, k)
  return Tensor(x, device=dev) @ w.T, x @ (q.astype(np.float32) * sc.astype(np.float32)).reshape(n, k).T

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
def test_matvec_unrolls_the_reduce_into_one_vector_accumulator_on_llvm():
  dev = llvm512()
  ren = Device[dev].renderer
  n, k = 256, 1024
  out, ref = q8_matvec(dev, n, k)
  (kern,) = [a for a in kernels(out) if red_size(a) == k]
  mv = kern
  opts = hand_coded_optimizations(kern, ren)
  # the reduce unrolled by 16 (one vector of consecutive weights), 8 rows sharing each load of x
  assert Opt(OptOps.UNROLL, 0, 16) in opts and Opt(OptOps.UPCAST, 0, 8) in opts, opts
  src = get_program(kern, ren).src
  # int8 weights loaded 16 at a time and converted in registers; one vector FMA into a vector accumulator
  assert "load <16 x i8>" in src and "sitofp <16 x i8>" in src and "@llvm.fma.v16f32" in src, src
  with Context(SPEC=2): tol(out.numpy(), ref, k)
  # float16 and float32 matrices likewise
  for dt in ("float16", "float32"):
    w = rand(22, n, k).astype(dt)
    x = rand(23, 1, k)
    t = Tensor(x, device=dev) @ Tensor(w, device=dev).cast("float32").T
    (kern,) = [a for a in kernels(t) if red_size(a) == k]
    assert Opt(OptOps.UNROLL, 0, 16) in hand_coded_optimizations(kern, ren)
    with Context(SPEC=2): tol(t.numpy(), x @ w.astype(np.float32).T, k)
  # a product with more than one row of x reuses W across the rows: the matmul's register tile, not the matvec form
  out, ref = q8_matvec(dev, n, k, rows=32)
  (kern,) = [a for a in kernels(out) if red_size(a) == k]
  assert not any(o.op is OptOps.UNROLL and o.arg == 16 for o in hand_coded_optimizations(kern, ren))
  with Context(SPEC=2): tol(out.numpy(), ref, k)
  # the C path leaves vectorization to gcc: its heuristics are unchanged
  assert not any(o.op is OptOps.UNROLL and o.arg == 16 for o in hand_coded_optimizations(mv, REN))

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
@pytest.mark.parametrize("bits, rows", [(256, (4, 2)), (512, (4, 4))])
def test_a_mid_size_product_of_rows_read_along_the_reduce_takes_vector_lanes_along_the_reduce(bits: int,
                                                                                              rows: tuple[int, int]):
  # an LSTM's recurrent h @ W_hh^T, 16 x 256 @ (1024 x 256)^T: both inputs are read along the reduce and no output axis
  # with stride 1, so a register tile's lanes were scalar loads (4 x 4, the reduce unrolled by 4). Now the reduce is
  # unrolled by one vector register (8 lanes on AVX2, 16 on AVX-512) into vector accumulators, by 4 rows of h (the
  # smaller input) x 2 of W on AVX2's 16 registers, 4 x 4 on 32. Measured in the LSTM's step (AVX2): its 31 launches
  # 5.0 -> 2.6 ms. Values against numpy under SPEC=2 on the LLVM path, and the C path keeps its tile
  dev = llvm_cpu_device_at(bits)
  h, w = rand(95, 16, 256), rand(96, 1024, 256) / 16
  def out(d: str) -> Tensor: return (Tensor(h, device=d) @ Tensor(w, device=d).T).tanh()
  k = the_kernel([out(dev)], {16, 1024}, 256)
  opts = hand_coded_optimizations(k, Device[dev].renderer)
  assert Opt(OptOps.UNROLL, 0, bits // 32) in opts, opts
  ups = {axis_size(output_axes(k)[o.axis]): o.arg for o in opts if o.op is OptOps.UPCAST}
  assert ups == {16: rows[0], 1024: rows[1]}, opts
  assert any(o.op is OptOps.THREAD for o in opts), opts
  src = get_program(k, Device[dev].renderer, opts).src
  assert f"@llvm.fma.v{bits // 32}f32" in src, src
  assert not any(o.op is OptOps.UNROLL and o.arg == bits // 32 for o in hand_coded_optimizations(k, REN))
  for d in (dev, c_cpu_device()):
    with Context(SPEC=2): tol(out(d).numpy(), np.tanh(h @ w.T), 256)

# ---- convs over few pixels and conv weight gradients: lanes through PACK (the LLVM path) ----

def conv_step(dev: str, b: int, cin: int, cout: int, hw: int, k: int = 3,
              stride: int = 1) -> tuple[list[Tensor], list[np.ndarray]]:
  """A k x k conv (padding k // 2, `stride`) over b x cin x hw x hw and, against an upstream gradient, its weight
  gradient: ([out, dW], torch's). By the direct sum (WINO=0: the default takes Winograd's F(4, 3) for the bigger 3x3
  convs on the CPU; these are the direct sum's kernels, as every other device and smaller convs get them)."""
  x, w = rand(30, b, cin, hw, hw), rand(31, cout, cin, k, k) / (k * k * cin) ** 0.5
  tw = Tensor(w, device=dev, requires_grad=True)
  with Context(WINO=0):
    out = Tensor(x, device=dev).conv2d(tw, padding=k // 2, stride=stride)
    g = rand(32, *out.shape)
    (out * Tensor(g, device=dev)).sum().backward()
  rw = torch.from_numpy(w).requires_grad_()
  rout = torch.nn.functional.conv2d(torch.from_numpy(x), rw, padding=k // 2, stride=stride)
  (rout * torch.from_numpy(g)).sum().backward()
  assert tw.grad is not None
  return [out, tw.grad], [rout.detach().numpy(), rw.grad.numpy()]

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
def test_convs_over_few_pixels_and_their_weight_gradients_get_packed_vector_lanes_on_llvm(monkeypatch):
  # ResNet's last stages: a 3x3 conv over a 4x4 image has no output axis of 8+ that an operand or the store walks with
  # stride 1, so its tile was 8x8 scalar lanes. The out-channel axis takes 16 lanes and the weights' panel is packed
  # ([taps x cin][16 channels]: one vector load per step); the weight gradient likewise on its out-channel axis, with
  # the upstream gradient packed. Values against torch under SPEC=2 on both CPU paths
  # NOTE: the autograd form of the weight gradient, which the CPU default takes over more than 16 output pixels only
  # (over fewer, a matmul of the stored windows: test_a_conv_weight_gradient_over_few_pixels_is_a_matmul_of_its_stored_
  # windows); these rules still tile that form wherever it comes
  monkeypatch.setattr(tinygrad_tensor, "CONV_IM2COL_WGRAD_PIXELS", 0)
  dev = llvm512()
  ren = Device[dev].renderer
  b, cin, cout, hw = 8, 128, 128, 4
  outs, refs = conv_step(dev, b, cin, cout, hw)
  fwd = the_kernel([outs[0]], {b, cout, hw}, 9 * cin)
  wgrad = the_kernel([outs[1]], {cout, cin, 3}, b * hw * hw)
  for k, lanes in ((fwd, cout), (wgrad, cout)):
    opts = hand_coded_optimizations(k, ren)
    assert wide_axis(opts) is not None and axis_size(output_axes(k)[wide_axis(opts)]) == lanes, opts
    assert any(o.op is OptOps.PACK for o in opts), opts
    # the C path (gcc vectorizes) keeps its scalar tile
    assert not any(o.op is OptOps.PACK for o in hand_coded_optimizations(k, REN))
  for d in (dev, c_cpu_device()):
    outs, refs = conv_step(d, b, cin, cout, hw)
    with Context(SPEC=2):
      tol(outs[0].numpy(), refs[0], 9 * cin)
      tol(outs[1].numpy(), refs[1], b * hw * hw)
  outs, refs = conv_step("PYTHON", 2, 4, 16, 3)
  with Context(SPEC=2):
    tol(outs[0].numpy(), refs[0], 36)
    tol(outs[1].numpy(), refs[1], 18)

def movement_windows(x: Tensor, k: int, stride: int = 1) -> Tensor:
  """(N, C, H, W) -> (N, C, oh, ow, k, k) sliding windows from the movement ops Tensor._pool uses: autograd folds their
  gradient back (col2im), a reduce over each pixel's candidate windows. Tensor._pool's own windows of up to 9 taps are
  differentiated by phases instead, so the fold these heuristics are for is made here."""
  n, c, h, w = x.shape
  o1 = (h - k + 1, w - k + 1)
  r = (-(-k * (h + 1) // h), -(-k * (w + 1) // w))
  t = x.reshape(n, c, 1, h, 1, w).expand(n, c, r[0], h, r[1], w).reshape(n, c, r[0] * h, r[1] * w)
  t = t.shrink((None, None, (0, k * (h + 1)), (0, k * (w + 1)))).reshape(n, c, k, h + 1, k, w + 1)
  t = t.shrink((None, None, (0, k), (0, o1[0]), (0, k), (0, o1[1])))
  if stride > 1:
    o = tuple((v - 1) // stride + 1 for v in o1)
    t = t.pad(((0, 0), (0, 0), (0, 0), (0, o[0] * stride - o1[0]), (0, 0), (0, o[1] * stride - o1[1])))
    t = t.reshape(n, c, k, o[0], stride, k, o[1], stride)
    t = t.shrink((None, None, (0, k), (0, o[0]), (0, 1), (0, k), (0, o[1]), (0, 1))).reshape(n, c, k, o[0], k, o[1])
  return t.permute(0, 1, 3, 5, 2, 4)

def test_a_tiny_reduce_with_a_heavy_body_is_unrolled_whole():
  # the gradient of a conv's sliding windows (col2im): per pixel, a sum over the 4x4 windows that may hold it, a reduce
  # of 16 whose body is mostly gates and index math, over HEAVY_BODY ALU ops: unrolled whole on both CPU paths
  from tinygrad.codegen.heuristic import HEAVY_BODY, TINY_REDUCE
  xs, gs = rand(40, 2, 8, 10, 10), rand(41, 2, 8, 10, 10, 3, 3)
  x, g = Tensor(xs, requires_grad=True), Tensor(gs)
  (movement_windows(x.pad((1, 1, 1, 1)), 3) * g).sum().backward()
  assert x.grad is not None
  (k,) = kernels(x.grad)
  assert red_size(k) == TINY_REDUCE and len(reduce_axes(k)) == 2
  assert any(sum(1 for u in r.src[0].toposort() if u.op in GroupOp.ALU) > HEAVY_BODY
             for r in k.toposort() if r.op is Ops.REDUCE)
  for ren in (REN, *([Device[llvm512()].renderer] if HAS_LLVM else [])):
    opts = hand_coded_optimizations(k, ren)
    assert [o for o in opts if o.op is OptOps.UNROLL] == [Opt(OptOps.UNROLL, 0, 0)] * 2, opts
  # numpy: each window's 3x3 gradient added back onto the pixels it covers
  ref = np.zeros((2, 8, 12, 12), np.float32)
  for i in range(3):
    for j in range(3): ref[:, :, i:i + 10, j:j + 10] += gs[..., i, j]
  with Context(SPEC=2): tol(x.grad.numpy(), ref[:, :, 1:11, 1:11], 9)

def fold(dev: str, b: int, c: int, hw: int, stride: int) -> tuple[Tensor, np.ndarray, np.ndarray]:
  """The gradient of a padded 3x3 window view (a conv's input gradient after the products): x.grad, the windows'
  gradient, numpy's fold of it (each window's 3x3 added back onto the pixels it covers)."""
  o = (hw + 2 - 3) // stride + 1
  gs = rand(42, b, c, o, o, 3, 3)
  x = Tensor(rand(43, b, c, hw, hw), device=dev, requires_grad=True)
  (movement_windows(x.pad((1, 1, 1, 1)), 3, stride) * Tensor(gs, device=dev)).sum().backward()
  assert x.grad is not None
  ref = np.zeros((b, c, hw + 2 + stride, hw + 2 + stride), np.float32)
  for i in range(3):
    for j in range(3): ref[:, :, i:i + stride * o:stride, j:j + stride * o:stride] += gs[..., i, j]
  return x.grad, gs, ref[:, :, 1:hw + 1, 1:hw + 1]

@pytest.mark.parametrize("hw, stride", [(16, 2), (8, 1), (4, 2)])
def test_a_window_gradient_takes_its_whole_row_as_lanes_so_its_gates_fold(hw: int, stride: int):
  # the fold indexes each pixel's 4x4 candidate windows through % and // of the pixel (autograd's fold of 3x3 windows,
  # ResNet-18's convs' before Tensor._pool's phases; 16 gated loads for
  # 2-4 real ones): with the whole row as lanes each lane's part of those is a constant and the other gates fold away
  # (AVX2, alone: 6x6 pixels 0.55 -> 0.07-0.11 ms, 10x10 0.72 -> 0.12-0.25, 18x18 1.2 -> 0.26-0.54). On the C path,
  # the LLVM path (AVX-512's and AVX2's renderers), and that program interpreted on PYTHON, against numpy under SPEC=2
  from replay.compare import run_program
  from tinygrad.codegen import heuristic
  grad, gs, ref = fold("CPU", 2, 8, hw, stride)
  (k,) = kernels(grad)
  assert out_sizes(k) == [2, 8, hw, hw], out_sizes(k)
  row, inner = hw, 3
  rens = [REN, *([Device[llvm512()].renderer, Device[llvm_cpu_device_at(256)].renderer] if HAS_LLVM else [])]
  for ren in rens:
    opts = hand_coded_optimizations(k, ren)
    assert int(np.prod([o.arg for o in opts if o.op is OptOps.UPCAST and o.axis == inner])) == row, (ren, opts)
    assert heuristic._modular_reads(k, output_axes(k)[inner])
  # a padded copy reads its row affinely: no % or //, so this rule leaves it as it was
  (pad,) = kernels(Tensor(rand(44, 2, 8, hw, hw)).pad((1, 1, 1, 1)).contiguous())
  assert not any(heuristic._modular_reads(pad, r) for r in output_axes(pad))
  for dev in (c_cpu_device(), *([llvm_cpu_device_at(256)] if HAS_LLVM else [])):
    with Context(SPEC=2): tol(fold(dev, 2, 8, hw, stride)[0].numpy(), ref, 9)
  # the C program of those opts, interpreted (every access checked)
  p = get_program(k, REN, hand_coded_optimizations(k, REN))
  glb = sorted((u.arg, u.dtype.size) for u in p.uops if u.op is Ops.DEFINE_GLOBAL)
  bufs = {i: (gs.ravel() if n == gs.size else np.zeros(n, np.float32)) for i, n in glb}
  with Context(SPEC=2): out = run_program(p.name, list(p.uops), bufs, {}, "")
  tol(out[0].reshape(ref.shape), ref, 9)

def test_a_transcendental_shared_by_the_lanes_gets_the_whole_axis(monkeypatch):
  # causal attention in inference (B=8 H=4 T=128, a head of 64) with probabilities x V computing exp(score - max) / sum
  # per (query, key), fused, shared by the head's 64 values: they take 16 x 4 lanes, so the exp2 is computed once per
  # (query, key), not once per 32 of them. The scheduler stores those probabilities now (rangeify._broadcast_calls, and
  # _store_shared_calls: the sum and the product both compute them), so the fused kernel is made with those rules off:
  # the form any exp broadcast fewer than RECOMPUTE_SHARED times over and computed in one kernel (or of fewer than
  # RECOMPUTE_CALLS_MIN elements) still takes. Values against torch on the LLVM path, under SPEC=2, with the rules on
  q, k, v = (rand(50 + i, 8, 4, 128, 64) for i in range(3))
  with monkeypatch.context() as m:
    m.setattr(rangeify, "_broadcast_calls", lambda *args: [])
    m.setattr(rangeify, "_store_shared_calls", lambda *args: False)
    out = Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), is_causal=True)
    (pv,) = [x for x in kernels(out) if 64 in out_sizes(x) and red_size(x) == 128]
  assert any(u.op is Ops.EXP2 for u in pv.toposort())
  for ren in (REN, *([Device[llvm512()].renderer] if HAS_LLVM else [])):
    opts = hand_coded_optimizations(pv, ren)
    d = output_axes(pv)[wide_axis(opts)]
    assert axis_size(d) == 64 and Opt(OptOps.UPCAST, wide_axis(opts), 4) in opts, opts
  ref = torch.nn.functional.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q, k, v)), is_causal=True)
  dev = llvm512() if HAS_LLVM else c_cpu_device()
  with Context(SPEC=2):
    got = Tensor(q, device=dev).scaled_dot_product_attention(Tensor(k, device=dev), Tensor(v, device=dev), is_causal=True)
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-5, atol=1e-5)

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM CPU path (llvmlite) is not installed")
def test_a_weight_gradient_over_batch_and_time_is_packed_with_its_lanes_looping_outermost():
  # dW = g^T x reduced over (batch, time), two reduce axes, both operands read with a row stride along them and with
  # stride 1 along their own output axis: the 16 lanes go on the axis whose operand has the longer rows (the one whose
  # rows alias in the cache), that axis loops outermost (SWAP where it is the inner one: the other operand is then
  # streamed once per 48 rows of dW, not once per 8) and PACK copies its panel (it packed only single-axis reduces).
  # Measured (2 threads, alone, reduces of 8 x 128): a (768, 3072) dW 54.3 -> 22.2 ms, (3072, 768) 42.3 -> 25.3,
  # (1024, 256) 5.1 -> 2.1
  b, t, d, f = 8, 128, 256, 768
  ren = Device[llvm512()].renderer
  g, x = Tensor(rand(60, b, t, d)), Tensor(rand(61, b, t, f))
  for dw, lanes, swapped in (((g.reshape(b, t, d, 1) * x.reshape(b, t, 1, f)).sum((0, 1)), f, True),
                             ((x.reshape(b, t, f, 1) * g.reshape(b, t, 1, d)).sum((0, 1)), f, False)):
    k = the_kernel([dw], {d, f}, b * t)
    assert len(reduce_axes(k)) == 2
    opts = hand_coded_optimizations(k, ren)
    assert (opts[0] == Opt(OptOps.SWAP, 0, 1)) == swapped, opts
    assert wide_axis(opts) == 0 and any(o.op is OptOps.PACK for o in opts), opts
    assert axis_size(output_axes(k)[1 if swapped else 0]) == lanes
  # the values on this path (the swapped, packed form), under SPEC=2
  with Context(SPEC=2):
    got = (Tensor(g.numpy(), device=llvm512()).reshape(b, t, d, 1) *
           Tensor(x.numpy(), device=llvm512()).reshape(b, t, 1, f)).sum((0, 1))
    tol(got.numpy(), np.einsum("btd,btf->df", g.numpy(), x.numpy()), b * t)

def lanes(opts: list[Opt]) -> int:
  """The lanes of the output axis that took the first 16-lane UPCAST (times a 2 or 3 more on that axis)."""
  i = next((n for n, o in enumerate(opts) if o.op is OptOps.UPCAST and o.arg == 16), None)
  assert i is not None, opts
  more = opts[i + 1] if i + 1 < len(opts) else None
  return 16 * (more.arg if more is not None and more.op is OptOps.UPCAST and more.axis == opts[i].axis else 1)

def packed_panel_ranges(k, opts: list[Opt]) -> tuple[set, list]:
  """With `opts` applied to kernel k: (the output ranges the packed panel depends on, the output axes in loop order)."""
  ast = apply_opts(k, opts, Device[llvm512()].renderer)
  bzs = [u for u in ast.toposort() if u.op is Ops.BUFFERIZE]
  assert len(bzs) == 1, opts
  return set(bzs[0].src[0]._ranges), output_axes(ast)

def chained_conv_input_grad(seed: int, b: int, c: int, hw: int):
  """Two 3x3 convs (c channels, padding 1) with a relu between, as in ResNet, by the direct sum (WINO=0), and the input
  gradient against a random upstream one: (a function of the device giving ours, torch's as an array)."""
  x, w1, w2 = rand(seed, b, c, hw, hw), *(rand(seed + 1 + i, c, c, 3, 3) / (9 * c) ** 0.5 for i in range(2))
  g = rand(seed + 3, b, c, hw, hw)
  def grad(d: str) -> Tensor:
    tx = Tensor(x, device=d, requires_grad=True)
    with Context(WINO=0):
      out = tx.conv2d(Tensor(w1, device=d), padding=1).relu().conv2d(Tensor(w2, device=d), padding=1)
      (out * Tensor(g, device=d)).sum().backward()
    assert tx.grad is not None
    return tx.grad
  rx = torch.from_numpy(x).requires_grad_()
  rout = torch.nn.functional.conv2d(torch.nn.functional.conv2d(rx, torch.from_numpy(w1), padding=1).relu(),
                                    torch.from_numpy(w2), padding=1)
  (rout * torch.from_numpy(g)).sum().backward()
  assert rx.grad is not None
  return grad, rx.grad.numpy()

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
@pytest.mark.parametrize("c, hw", [(256, 4), (128, 8)])
def test_a_conv_input_gradient_is_a_matmul_along_the_filters_rows(c: int, hw: int):
  # the input gradient of a 3x3 conv (following another conv and a relu, as in ResNet) goes through its windows: the
  # sum over cout of dy times the filters, (b, cin, y, x, ky, kx). Stored pixels-first, (b, y, x, cin x ky x kx), it is
  # dy^T @ W (cout, cin x 9), whose cin x 9 axis the filters and the store both walk with stride 1 (the reshape's digits
  # (i//9)*9 + ((i//3)%3)*3 + i%3 fold back to i): its lanes are vector loads and stores, as a plain matmul's. In the
  # windows' own order the lanes were cin, 9 apart in both, each (y, x, ky, kx) a matmul of its own over a packed panel
  # (in a 3x3 conv's step alone, 2 threads: 256 over 4x4 pixels 0.69 -> 0.32 ms). Values against torch under SPEC=2
  from tinygrad.codegen.heuristic import _vector_axis
  b = 8
  dev = llvm512()
  grad, ref = chained_conv_input_grad(70, b, c, hw)
  # NOTE: both convs' input gradients have this form
  ks = [k for k in kernels(grad(dev)) if set(out_sizes(k)) == {b, hw, 9 * c} and red_size(k) == c]
  assert len(ks) == 2, [(out_sizes(k), red_size(k)) for k in kernels(grad(dev))]
  for k in ks:
    cols = next(r for r in output_axes(k) if axis_size(r) == 9 * c)
    assert _vector_axis(k, cols)
    opts = hand_coded_optimizations(k, Device[dev].renderer)
    assert output_axes(k)[wide_axis(opts)] is cols and lanes(opts) >= 32, opts
    # no division left in its index math: each lane's filter load is a fixed offset from the tile's
    src = get_program(k, Device[dev].renderer, opts).src
    assert not any(op in src for op in ("sdiv", "srem", "udiv", "urem")), src
  for d in (dev, c_cpu_device()):
    with Context(SPEC=2): tol(grad(d).numpy(), ref, 9 * c)

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
@pytest.mark.parametrize("form, bits", [("conv input gradient", 512), ("matmul", 512), ("conv input gradient", 256)])
def test_a_small_operand_times_a_big_one_packs_the_big_ones_panel_outside_the_small_ones_loops(form: str, bits: int):
  # a product of a small operand (under L2's share) by a big one (the filters, 9.4 MB): dy^T (8 x 2 x 2 pixels, 512
  # channels) @ W (512, 4608), a 3x3 conv's input gradient over 2x2 pixels, and the same shapes as a plain matmul. Its
  # 48-lane tile had the pixels' loops outside the filters' columns, so the filters were streamed from memory once per
  # row tile (4 times) and the small dy was packed. The filters' loop goes outermost now, their panel packed and reused
  # by every row tile, and the threads split it (each reads its half once): the form the plain matmul of these shapes
  # already had (A is read along the reduce, _reorder_for_reuse), where dy^T is not. Measured in ResNet-18 b8's step
  # (Intel Xeon, 2 threads, old and new opts alternated): its three launches 9.4 -> 4.4 ms; 256 channels over 4x4
  # 6.3 -> 3.1. On AVX2 (16 lanes) the 2 x 2 pixels are not a constant table's rows (_table_rows): dy varies along the
  # batch too (AMD Zen 2, in the step: 8.5 -> 4.7 ms)
  dev, b, c, hw = llvm_cpu_device_at(bits), 8, 512, 2
  grad, conv_ref = chained_conv_input_grad(80, b, c, hw)
  a, wm = rand(84, b * hw * hw, c), rand(85, c, 9 * c) / c ** 0.5
  def out(d: str) -> Tensor: return Tensor(a, device=d) @ Tensor(wm, device=d) if form == "matmul" else grad(d)
  ks = [k for k in kernels(out(dev)) if 9 * c in out_sizes(k) and red_size(k) == c]
  assert ks, [(out_sizes(k), red_size(k)) for k in kernels(out(dev))]
  for k in ks:
    opts = hand_coded_optimizations(k, Device[dev].renderer)
    wide = 48 if bits == 512 else 16
    assert lanes(opts) == wide and any(o.op is OptOps.SWAP for o in opts), opts
    panel, axes = packed_panel_ranges(k, opts)
    loops = [r for r in axes if (axis_size(r) or 0) > 1 and r.arg[-1] is AxisType.LOOP]
    # the packed panel is the filters' (their columns' loop), that loop runs outside every loop of the rows, and the
    # threads split it
    threads = [r for r in panel if r.arg[-1] is AxisType.THREAD]
    assert loops[0] in panel and all(r not in panel for r in loops[1:]), (loops, panel)
    assert len(threads) == 1 and (axis_size(threads[0]) or 0) * (axis_size(loops[0]) or 0) * wide == 9 * c, panel
  ref, k_ = (a @ wm, c) if form == "matmul" else (conv_ref, 9 * c)
  for d in (dev, c_cpu_device()):
    with Context(SPEC=2): tol(out(d).numpy(), ref, k_)

@pytest.mark.parametrize("groups, stride, dilation", [(1, 1, 1), (2, 2, 1), (3, 1, 2), (6, 1, 1)])
def test_conv_gradients_stored_pixels_first_match_torch(groups: int, stride: int, dilation: int):
  # the windows' gradient stored pixels-first, as every conv with more than one output channel a group gets it (a
  # depthwise conv, one a group, keeps autograd's form), and over at most 16 output pixels on the CPU the filters'
  # gradient from the windows stored pixels-first too: grouped, strided and dilated, 1-d and 3-d too, over many pixels
  # and over few, on the PYTHON interpreter and both CPU paths, against torch under SPEC=2
  devs = ["PYTHON", c_cpu_device()] + ([llvm512()] if HAS_LLVM else [])
  for nd, (hw, k) in ((2, (7, 3)), (2, (3, 3)), (1, (9, 3)), (1, (4, 3)), (3, (5, 2)), (3, (1, 2))):
    x, w = rand(80 + nd, 2, 6, *(hw,) * nd), rand(90 + nd, 12 if groups != 6 else 6, 6 // groups, *(k,) * nd)
    g = None
    for d in devs:
      tx, tw = Tensor(x, device=d, requires_grad=True), Tensor(w, device=d, requires_grad=True)
      with Context(WINO=0):
        out = tx.conv2d(tw, groups=groups, stride=stride, dilation=dilation, padding=1)
        if g is None: g = rand(100 + nd, *out.shape)
        (out * Tensor(g, device=d)).sum().backward()
      rx, rw = torch.from_numpy(x).requires_grad_(), torch.from_numpy(w).requires_grad_()
      conv = {1: torch.nn.functional.conv1d, 2: torch.nn.functional.conv2d, 3: torch.nn.functional.conv3d}[nd]
      rout = conv(rx, rw, groups=groups, stride=stride, dilation=dilation, padding=1)
      (rout * torch.from_numpy(g)).sum().backward()
      assert tx.grad is not None and rx.grad is not None and tw.grad is not None and rw.grad is not None
      with Context(SPEC=2):
        tol(tx.grad.numpy(), rx.grad.numpy(), w.shape[0] // groups * k ** nd)
        tol(tw.grad.numpy(), rw.grad.numpy(), 2 * int(np.prod(g.shape[2:])))

def gated_loads(ast) -> int:
  """How many of a kernel's loads are gated (read through a padding's bounds)."""
  return sum(ld.src[0].src[1].is_masked() for ld in ast.toposort() if ld.op is Ops.LOAD and ld.src[0].op is Ops.INDEX)

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
@pytest.mark.parametrize("b, cin, cout, hw, k, stride", [(2, 3, 16, 16, 7, 2), (2, 8, 16, 16, 3, 2), (2, 16, 16, 4, 3, 1)])
def test_a_padded_direct_conv_reads_its_input_padded_and_stored_on_llvm(b, cin, cout, hw, k, stride, monkeypatch):
  # a stem's 7x7 stride-2 conv, a stride-2 3x3 and a 3x3 over 4x4 pixels: on the LLVM path the padded input is stored
  # once (one copy of b x cin x (hw + 2 pad)^2) and the forward and the weight gradient read it with no gate; through
  # the padding every one of their window loads was gated (ResNet-18 b32's stem 66.1 -> 49.5 ms alone). The C path
  # keeps the gated windows (its kernels were slower on the stored copy). Values against torch under SPEC=2 on both
  # paths and the PYTHON interpreter, the input's gradient too
  # NOTE: these convs are under the rule's size (CONV_PADDING_STORED_MIN_MACS, where a launch outweighs the gates)
  monkeypatch.setattr(tinygrad_tensor, "CONV_PADDING_STORED_MIN_MACS", 0)
  def step(dev: str, stored: bool):
    monkeypatch.setattr(tinygrad_tensor, "CONV_PADDING_STORED", stored)
    x, w = rand(40, b, cin, hw, hw), rand(41, cout, cin, k, k) / (k * k * cin) ** 0.5
    tx, tw = Tensor(x, device=dev, requires_grad=True), Tensor(w, device=dev, requires_grad=True)
    with Context(WINO=0):
      out = tx.conv2d(tw, padding=k // 2, stride=stride)
      g = rand(42, *out.shape)
      (out * Tensor(g, device=dev)).sum().backward()
    assert tx.grad is not None and tw.grad is not None
    rx, rw = torch.from_numpy(x).requires_grad_(), torch.from_numpy(w).requires_grad_()
    rout = torch.nn.functional.conv2d(rx, rw, padding=k // 2, stride=stride)
    (rout * torch.from_numpy(g)).sum().backward()
    return [out, tx.grad, tw.grad], [rout.detach().numpy(), rx.grad.numpy(), rw.grad.numpy()]
  pad = hw + 2 * (k // 2)
  oh = (hw + 2 * (k // 2) - k) // stride + 1
  dev = llvm_cpu_device()
  for stored in (True, False):
    ts, _ = step(dev, stored)
    ks = kernels(ts[0], ts[2])
    copies = [q for q in ks if red_size(q) == 1 and int(np.prod(out_sizes(q))) == b * cin * pad * pad]
    fwd = [q for q in ks if int(np.prod(out_sizes(q))) == b * cout * oh * oh and red_size(q) == cin * k * k]
    wgrad = [q for q in ks if int(np.prod(out_sizes(q))) == cout * cin * k * k and red_size(q) == b * oh * oh]
    assert len(copies) == int(stored) and len(fwd) == 1 and len(wgrad) <= 1, [(out_sizes(q), red_size(q)) for q in ks]
    gates = [gated_loads(q) for q in fwd + wgrad]
    # over 16 pixels or fewer the weight gradient is a matmul of the windows' own stored copy (no gate either way)
    assert all(n == 0 for n in gates) if stored else gates[0] > 0 and all(n > 0 for n in gates[1:] if oh * oh > 16), gates
  n = {0: cin * k * k, 1: cout * k * k, 2: b * oh * oh}
  for d in (dev, c_cpu_device(), "PYTHON"):
    if d == "PYTHON" and hw > 8: continue
    outs, refs = step(d, True)
    if d != dev:  # the C path and the interpreter read through the padding: no copy of the padded input
      assert not any(red_size(q) == 1 and int(np.prod(out_sizes(q))) == b * cin * pad * pad for q in kernels(outs[0]))
    with Context(SPEC=2):
      for i, (o, r) in enumerate(zip(outs, refs)): tol(o.numpy(), r, n[i])

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
def test_a_conv_weight_gradient_over_few_pixels_is_a_matmul_of_its_stored_windows():
  # the weight gradient of a 3x3 conv over 4x4 pixels (16 outputs) at batch 8: dy^T (Cout, 8 x 16) @ the windows
  # stored pixels-first (8 x 16, Cin x 9), kept in that shape (the filters' shape a reshape of its buffer, not a copy),
  # its lanes along Cin x 9 (the windows and the store with stride 1). Autograd's form read the padded windows in place,
  # its lanes on Cout stored 2,304 apart (alone, 2 threads: 0.93 -> 0.79 ms at 256 channels, 0.84 -> 0.40 at 512 over
  # 2x2). Over 8x8 pixels autograd's form stays (it was faster there). Values against torch under SPEC=2
  from tinygrad.codegen.heuristic import _vector_axis
  dev = llvm512()
  for c, hw, merged in ((256, 4, True), (64, 8, False)):
    outs, refs = conv_step(dev, 8, c, c, hw)
    ks = kernels(outs[1])
    mm = [k for k in ks if set(out_sizes(k)) == {c, 9 * c} and red_size(k) == 8 * hw * hw]
    assert len(mm) == int(merged), [(out_sizes(k), red_size(k)) for k in ks]
    # no kernel copies the gradient into the filters' shape
    assert not any(red_size(k) == 1 and int(np.prod(out_sizes(k))) == 9 * c * c for k in ks)
    if merged:
      cols = next(r for r in output_axes(mm[0]) if axis_size(r) == 9 * c)
      opts = hand_coded_optimizations(mm[0], Device[dev].renderer)
      assert _vector_axis(mm[0], cols) and output_axes(mm[0])[wide_axis(opts)] is cols, opts
    with Context(SPEC=2): tol(outs[1].numpy(), refs[1], 8 * hw * hw)

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
@pytest.mark.parametrize("c, hw, swapped", [(512, 2, False), (256, 4, True)])
def test_a_weight_gradient_over_a_short_reduce_keeps_its_stores_along_the_innermost_loop(c: int, hw: int, swapped: bool):
  # dy^T @ the stored windows over 8 x 2 x 2 pixels: 32 multiply-adds an element of a 512 x 4608 output (9.4 MB), so the
  # stores cost most. In its own order the innermost loop (the 4608 axis' tiles) walks them along the rows; the swap of
  # a matmul (its rows inside, so that the windows' panel stays in cache) stored each tile's 8 rows 18 KiB apart (in
  # ResNet-18 b8's step, Intel Xeon, 2 threads: its 3 launches 5.8 ms swapped, 3.2 not). Over 8 x 4 x 4 pixels (a
  # reduce of 128) the swap stays: it was faster there (3.2 against 4.3 ms). Values against torch under SPEC=2
  dev = llvm512()
  outs, refs = conv_step(dev, 8, c, c, hw)
  mm = [k for k in kernels(outs[1]) if set(out_sizes(k)) == {c, 9 * c} and red_size(k) == 8 * hw * hw]
  assert len(mm) == 1, [(out_sizes(k), red_size(k)) for k in kernels(outs[1])]
  opts = hand_coded_optimizations(mm[0], Device[dev].renderer)
  assert output_axes(mm[0])[wide_axis(opts)] is output_axes(mm[0])[1] and lanes(opts) == 32, opts
  ast = apply_opts(mm[0], opts, Device[dev].renderer)
  loops = [r for r in output_axes(ast) if r.arg[-1] is AxisType.LOOP and (axis_size(r) or 0) > 1]
  st = next(u for u in ast.toposort() if u.op is Ops.STORE).src[0].src[1].get_idx()
  # the innermost loop steps the store by a tile of lanes (its own order) or by 8 rows of 9c (swapped)
  assert [index_stride(st, loops[-1])] == ([8 * 9 * c] if swapped else [32]), (opts, loops)
  for d in (dev, c_cpu_device()):
    o, r = conv_step(d, 8, c, c, hw)
    with Context(SPEC=2): tol(o[1].numpy(), r[1], 8 * hw * hw)

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
@pytest.mark.parametrize("c, hw, want", [(128, 4, 32), (256, 2, 32)])
def test_a_conv_weight_gradient_takes_32_packed_lanes_threads_on_them_over_a_long_reduce(c: int, hw: int, want: int,
                                                                                         monkeypatch):
  # a 3x3 conv's weight gradient (cout, cin, 3, 3), reduced over batch x pixels: 32 lanes on cout with the upstream
  # gradient packed, by 8 rows of cin where that reduce is 128+ long (8 x 4 x 4 here). Over 8 x 2 x 2 (storing the tile
  # weighs more) the rows are the 3 kx taps whole (the input's row of one tap is the next tap's after one step of the
  # pixels' loop) by 2 of cin: ResNet-18 b8's 512-channel gradients in the step 3.6-4.7 -> 2.3-2.5 ms for their 3
  # launches (16 lanes by 8 rows before). The threads split the lanes' axis, so each packs only its own panels (alone,
  # 2 threads, ResNet-18's: 0.93-0.98 ms with the threads on cin, 0.75-0.79 on cout). Values against torch under SPEC=2
  # NOTE: the autograd form of the weight gradient, which the CPU default takes over more than 16 output pixels only
  # (over fewer, a matmul of the stored windows: test_a_conv_weight_gradient_over_few_pixels_is_a_matmul_of_its_stored_
  # windows); these rules still tile that form wherever it comes, here as it reads the windows through the padding (the
  # C path's form: the LLVM path's reads them stored padded, Tensor._padding_stored)
  monkeypatch.setattr(tinygrad_tensor, "CONV_IM2COL_WGRAD_PIXELS", 0)
  monkeypatch.setattr(tinygrad_tensor, "CONV_PADDING_STORED", False)
  dev = llvm512()
  b = 8
  outs, refs = conv_step(dev, b, c, c, hw)
  k = the_kernel([outs[1]], {c, 3}, b * hw * hw)
  opts = hand_coded_optimizations(k, Device[dev].renderer)
  assert lanes(opts) == want and any(o.op is OptOps.PACK for o in opts), opts
  ups = [(axis_size(r), r) for r in axes_of(apply_opts(k, opts, Device[dev].renderer), AxisType.UPCAST)]
  if hw == 2: assert sorted(n for n, _ in ups) == [2, 2, 3, 16], opts
  else: assert sorted(n for n, _ in ups) == [2, 8, 16], opts
  panel, loops = packed_panel_ranges(k, opts)
  thread = [o for o in opts if o.op is OptOps.THREAD]
  assert len(thread) == 1 and loops[thread[0].axis] in panel, opts
  with Context(SPEC=2): tol(outs[1].numpy(), refs[1], b * hw * hw)

def conv_forward(b: int, c: int, hw: int, k: int = 3, cout: int | None = None):
  """A k x k conv's step (c channels in, cout out (default c), over hw x hw pixels) on the LLVM path with AVX-512's
  registers: (its outputs, torch's, the forward conv's kernel, the heuristics' opts for it)."""
  dev, cout = llvm512(), cout or c
  outs, refs = conv_step(dev, b, c, cout, hw, k=k)
  kern = the_kernel([outs[0]], {b, cout, hw}, k * k * c)
  return outs, refs, kern, hand_coded_optimizations(kern, Device[dev].renderer)

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
def test_a_conv_whose_packed_filters_are_cache_blocked_blocks_its_input_channels():
  # a 3x3 conv over 2x2 pixels at 512 channels: its filters' panel (4608 steps x 32 lanes, 576 KiB) is over PACK's
  # limit, so the reduce is cache blocked first. The blocks are of input channels, the reduce axis the filters are
  # stored along outermost ((Cout, Cin, ky, kx)): blocks of one ky (the kernel's outermost reduce axis) read a third
  # of each cache line of the filters, every line 3 times (ResNet-18 b8's step: 3.46 -> 2.88 ms for its 3 launches).
  # Values against torch under SPEC=2
  b, c, hw = 8, 512, 2
  outs, refs, k, opts = conv_forward(b, c, hw)
  kb = [o for o in opts if o.op is OptOps.KBLOCK]
  assert len(kb) == 1 and any(o.op is OptOps.PACK for o in opts), opts
  before = apply_opts(k, opts[:opts.index(kb[0])], Device[llvm512()].renderer)
  assert axis_size(reduce_axes(before)[kb[0].axis]) == c and c % kb[0].arg == 0 and kb[0].arg < c, opts
  with Context(SPEC=2): tol(outs[0].numpy(), refs[0], 9 * c)

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
@pytest.mark.parametrize("b, c", [(16, 256), (8, 64)])
def test_a_padded_conv_over_8x8_pixels_takes_a_vector_of_channel_rows_on_avx512(b: int, c: int):
  # a 3x3 conv over 8x8 pixels: its 8 pixel lanes are half an AVX-512 register, and its input is stored padded (rows
  # 10 apart), so no pixel row continues them: 8 channels by 4 pixel rows were 32 half-register accumulators that
  # spilled (in the steps: 10.2 -> 6.2 ms at b16 c256, 0.33 -> 0.18 at b8 c64); the channel axis takes 16 rows, which
  # LLVM packs into 16 full vectors over the packed filters. No rows go on the batch either (its images are a page apart,
  # the same cache sets in every row). Values against torch under SPEC=2
  hw = 8
  outs, refs, k, opts = conv_forward(b, c, hw)
  sizes = out_sizes(k)
  ups = [o for o in opts if o.op is OptOps.UPCAST]
  assert [sizes[o.axis] for o in ups] == [hw, c] and [o.arg for o in ups] == [8, 16], opts
  assert any(o.op is OptOps.PACK for o in opts), opts
  with Context(SPEC=2): tol(outs[0].numpy(), refs[0], 9 * c)

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
def test_a_1x1_conv_over_8x8_pixels_keeps_its_pixel_rows():
  # unpadded, its next pixel row continues the 8 lanes' run (8 apart): 4 rows make 2 full vectors, and 16 channel rows
  # instead were slower (the UNet's 1x1 convs: 0.17 -> 0.20 ms). Values against torch under SPEC=2
  outs, refs, k, opts = conv_forward(8, 256, 8, k=1, cout=128)
  sizes = out_sizes(k)
  ups = [o for o in opts if o.op is OptOps.UPCAST]
  assert [(sizes[o.axis], o.arg) for o in ups][:1] == [(8, 8)] and not any(o.arg == 16 for o in ups), opts
  with Context(SPEC=2): tol(outs[0].numpy(), refs[0], 256)

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
def test_a_conv_over_2x2_pixels_makes_its_rows_up_to_8_from_the_batch_on_avx512():
  # a 3x3 conv over 2x2 output pixels (ResNet-18 b8 64x64's last stage): its 4 pixels are 4 rows of the tile, 8 of
  # its accumulators on AVX-512, fewer than its FMAs' latency needs; 2 images of the batch make them 8 rows (2 x 2 x 2,
  # 2 images a page apart: one pair of cache sets). In the step (Intel Xeon, 2 threads, alternated): its 3 launches at
  # 512 channels 3.41 -> 3.26 ms, the 256 one 0.54 -> 0.51. Values against torch under SPEC=2
  b, c, hw = 8, 256, 2
  outs, refs, k, opts = conv_forward(b, c, hw)
  sizes = out_sizes(k)
  ups = [(sizes[o.axis] if o.axis < len(sizes) else None, o.arg) for o in opts if o.op is OptOps.UPCAST and o.arg < 16]
  assert (b, 2) in [(sz, a) for sz, a in ups if sz != c], opts
  ast = apply_opts(k, opts, Device[llvm512()].renderer)
  rows = int(np.prod([axis_size(r) or 0 for r in axes_of(ast, AxisType.UPCAST)])) // 32
  assert rows == 8, opts
  with Context(SPEC=2): tol(outs[0].numpy(), refs[0], 9 * c)

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
def test_a_weight_gradient_whose_rows_are_streamed_per_lane_tile_is_cache_blocked():
  # dW = X^T dY over 1024 tokens (a linear layer's weight gradient): its lanes' tiles loop outermost, and its rows'
  # operand (read across its rows: 8 floats of each token's row a tile) was read whole (2-3 MiB, not in L2) again for
  # each tile of the lanes. KBLOCK cuts the tokens into blocks whose rows fit ROWS_BLOCK_BYTES, each kept in L2 across
  # the lanes' tiles. In the D768 block's step (Intel Xeon, 2 threads, alternated): its (768, 3072), (3072, 768) and
  # (2304, 768) gradients 25.9 -> 23.3, 24.2 -> 22.5, 17.9 -> 16.9 ms. x @ W (its rows read along the reduce, which
  # the prefetchers stream) is not blocked. Values against numpy under SPEC=2
  from tinygrad.codegen.heuristic import ROWS_BLOCK_BYTES
  dev, t, d, f = llvm512(), 1024, 768, 512
  x, g, w = rand(60, t, d), rand(61, t, f), rand(62, d, f) / d ** 0.5
  tx, tg = Tensor(x, device=dev), Tensor(g, device=dev)
  dw, y = tx.T @ tg, tx @ Tensor(w, device=dev)
  k = the_kernel([dw], {d, f}, t)
  opts = hand_coded_optimizations(k, Device[dev].renderer)
  kb = [o for o in opts if o.op is OptOps.KBLOCK]
  assert len(kb) == 1 and any(o.op is OptOps.PACK for o in opts), opts
  # the lanes on X's d columns, the rows on g's f: g's rows (t x f, 2 MiB) are the streamed operand, cut
  # into the longest blocks that fit
  assert out_sizes(k)[wide_axis(opts) or 0] == d and wide_axis(opts) is not None, opts
  assert kb[0].arg * f * 4 <= ROWS_BLOCK_BYTES < 2 * kb[0].arg * f * 4, opts
  ky = the_kernel([y], {t, f}, d)
  assert not any(o.op is OptOps.KBLOCK for o in hand_coded_optimizations(ky, Device[dev].renderer))
  with Context(SPEC=2):
    tol(dw.numpy(), x.T @ g, t)
    tol(y.numpy(), x @ w, d)

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
def test_a_1x1_conv_whose_tile_leaves_room_takes_2_more_pixel_rows_reusing_its_broadcasts():
  # a 1x1 conv 64 -> 32 channels over 32x32 pixels (the UNet's): 16 pixel lanes by 8 output channels, 8 of AVX-512's 24
  # accumulators; the next image row (only the input's vector loads vary along it) takes 2 rows, each step's 8 filter
  # broadcasts reused by both (in the UNet's step: 0.20-0.48 -> 0.17-0.25 ms each). Not the logits of an LSTM (x @
  # W^T over 256 into 2000 words, 16 lanes of words by 8 of the batch): more rows of x there are more broadcasts, each
  # its own stream. Values against torch and numpy under SPEC=2
  dev = llvm512()
  outs, refs, _, opts = conv_forward(8, 64, 32, k=1, cout=32)
  ups = [o.arg for o in opts if o.op is OptOps.UPCAST]
  assert sorted(ups) == [2, 8, 16], opts
  h, w = rand(63, 16, 32, 256), rand(64, 2000, 256) / 16
  y = Tensor(h, device=dev) @ Tensor(w, device=dev).T
  ky = the_kernel([y], {16, 32, 2000}, 256)
  assert sorted(o.arg for o in hand_coded_optimizations(ky, Device[dev].renderer) if o.op is OptOps.UPCAST) == [8, 16]
  with Context(SPEC=2):
    tol(outs[0].numpy(), refs[0], 64)
    tol(y.numpy(), h @ w.T, 256)

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
def test_a_weight_gradient_over_many_pixels_is_cache_blocked_to_pack_its_lanes():
  # a 3x3 conv's weight gradient over 8 x 32 x 32 pixels: its 32 lanes' panel of the upstream gradient (8192 steps) is
  # 1 MiB, over PACK's limit, so it was an 8x8 scalar tile; KBLOCK cuts the reduce into blocks of 4 images, each
  # packed (alone, 2 threads, at batch 32: 100 -> 12 ms). Values against torch under SPEC=2
  dev = llvm512()
  b, c, hw = 8, 64, 32
  outs, refs = conv_step(dev, b, c, c, hw)
  k = the_kernel([outs[1]], {c, 3}, b * hw * hw)
  opts = hand_coded_optimizations(k, Device[dev].renderer)
  assert lanes(opts) == 32 and Opt(OptOps.KBLOCK, 0, 4) in opts and any(o.op is OptOps.PACK for o in opts), opts
  with Context(SPEC=2): tol(outs[1].numpy(), refs[1], b * hw * hw)

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
def test_a_strided_conv_takes_packed_channel_lanes_and_its_stem_gradient_whole_short_rows():
  # a 7x7 stride-2 conv (a ResNet stem): its output pixels read the input 2 elements apart, so 32 pixel lanes gathered
  # their loads (alone, 2 threads, at batch 32, 128x128: 218 ms); the lanes go on the output channels with the weights
  # packed (14.4 ms). Its weight gradient (64 x 3 x 7 x 7) has no other axis of 8+ for rows: one axis of 7 is upcast
  # whole (44 -> 23 ms). A 1x1 stride-2 conv (one reduce axis) keeps its pixel lanes. Values against torch under SPEC=2
  dev = llvm512()
  b, cin, cout, hw = 8, 3, 64, 64
  outs, refs = conv_step(dev, b, cin, cout, hw, k=7, stride=2)
  fwd = the_kernel([outs[0]], {b, cout, hw // 2}, 49 * cin)
  opts = hand_coded_optimizations(fwd, Device[dev].renderer)
  assert axis_size(output_axes(fwd)[wide_axis(opts)]) == cout and lanes(opts) == 32, opts
  wgrad = the_kernel([outs[1]], {cout, cin, 7}, b * (hw // 2) ** 2)
  opts = hand_coded_optimizations(wgrad, Device[dev].renderer)
  assert any(o.op is OptOps.UPCAST and o.arg == 7 for o in opts) and any(o.op is OptOps.PACK for o in opts), opts
  with Context(SPEC=2):
    tol(outs[0].numpy(), refs[0], 49 * cin)
    tol(outs[1].numpy(), refs[1], b * (hw // 2) ** 2)
  outs, refs = conv_step(dev, 8, 128, 256, 32, k=1, stride=2)
  one = the_kernel([outs[0]], {8, 256, 16}, 128)
  opts = hand_coded_optimizations(one, Device[dev].renderer)
  assert axis_size(output_axes(one)[wide_axis(opts)]) == 16, opts
  with Context(SPEC=2): tol(outs[0].numpy(), refs[0], 128)

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
def test_a_conv_over_8x8_pixels_takes_packed_channel_lanes_on_avx2():
  # 8 pixels are one AVX2 register: 8 pixel lanes by 8 channel rows spilled (16 registers), 16 packed channel lanes by
  # 4 pixel rows did not (alone, 2 threads, ResNet-18 b8 64x64's 128-channel convs and input-gradient windows over 8x8:
  # 2.8 -> 1.8, 2.4 -> 1.1, 1.2 -> 0.6 ms). AVX-512 keeps its pixel lanes. Values against torch under SPEC=2
  dev = llvm_cpu_device_at(256)
  outs, refs = conv_step(dev, 8, 128, 128, 8)
  fwd = the_kernel([outs[0]], {8, 128}, 9 * 128)
  opts = hand_coded_optimizations(fwd, Device[dev].renderer)
  assert axis_size(output_axes(fwd)[wide_axis(opts)]) == 128 and any(o.op is OptOps.PACK for o in opts), opts
  wide = hand_coded_optimizations(fwd, Device[llvm512()].renderer)
  assert axis_size(output_axes(fwd)[next(o.axis for o in wide if o.op is OptOps.UPCAST)]) == 8, wide
  with Context(SPEC=2):
    tol(outs[0].numpy(), refs[0], 9 * 128)
    tol(outs[1].numpy(), refs[1], 8 * 64)

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
@pytest.mark.parametrize("hw,stride,rows,tap", [(2, 1, 3, True), (4, 1, 3, True), (4, 2, 2, False)])
def test_small_weight_gradients_on_avx2_take_their_taps_or_2_rows_under_16_packed_lanes(hw: int, stride: int, rows: int,
                                                                                        tap: bool, monkeypatch):
  # ResNet-18 b8 64x64's 3x3 weight gradients over 2x2 and 4x4 pixels (256 channels), 16 packed output-channel lanes.
  # Over a reduce of 32 (batch 8 x 2 x 2) 4 input-channel rows (AVX2's budget) took 2.8-2.9 ms, 2 rows 2.0 (alone, 2
  # threads, the 512-channel stage; 256 channels 2.2 -> 1.7). With the pixels' loop 4 steps or fewer, the kernel's 3 taps
  # along the width are the rows: the compiler unrolls that loop, and a tap's input is the previous tap's next step, so
  # each input is loaded once for the taps that share it (alone, one thread: 2x2 4.0-4.2 -> 3.3-3.4 ms, 4x4 2.8 -> 2.3;
  # 2 threads 2.2 -> 1.7 and 2.8 -> 2.2). A stride-2 conv's gradient (its input 2 apart a step, no tap shares it) keeps 2
  # rows under its short reduce. Values against torch under SPEC=2
  # NOTE: the autograd form of the weight gradient, which the CPU default takes over more than 16 output pixels only
  # (over fewer, a matmul of the stored windows: test_a_conv_weight_gradient_over_few_pixels_is_a_matmul_of_its_stored_
  # windows); these rules still tile that form wherever it comes, here as it reads the windows through the padding (the
  # gated rows these rules are for: the LLVM path reads a conv's input stored padded, Tensor._padding_stored)
  monkeypatch.setattr(tinygrad_tensor, "CONV_IM2COL_WGRAD_PIXELS", 0)
  monkeypatch.setattr(tinygrad_tensor, "CONV_PADDING_STORED", False)
  dev = llvm_cpu_device_at(256)
  ren = Device[dev].renderer
  outs, refs = conv_step(dev, 8, 256, 256, hw, stride=stride)
  red = 8 * (hw // stride) ** 2
  wgrad = the_kernel([outs[1]], {256, 3}, red)
  opts = hand_coded_optimizations(wgrad, ren)
  assert lanes(opts) == 16 and any(o.op is OptOps.PACK for o in opts), opts
  ups = [o for o in opts if o.op is OptOps.UPCAST and o.arg != 16]
  assert [o.arg for o in ups] == [rows], opts
  # the taps' axis of the width (3, last in the stored (Cout, Cin, 3, 3)) rather than the input channels
  assert (ups[0].axis == 3 and out_sizes(wgrad)[3] == 3) == tap, opts
  with Context(SPEC=2): tol(outs[1].numpy(), refs[1], red)

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
@pytest.mark.parametrize("b,hw,kblock", [(8, 64, None), (2, 144, 1)])
def test_a_stem_gradient_on_avx2_takes_input_channel_rows_and_keeps_an_axis_for_its_threads(b: int, hw: int,
                                                                                           kblock: int | None):
  # on AVX2 (96 lanes of budget) the stem's weight gradient (64 x 3 x 7 x 7, a reduce over b x (hw/2)^2) takes 16 packed
  # lanes of its output channels, and its rows on the 3 input channels, along which those lanes' loads are broadcast
  # (the 4 left of the lanes' own 64 channels took them once: each row then loaded its own lanes; alone, 2 threads, b8
  # 64x64: 32 lanes 3.6-3.9 ms, 16 x 3 2.7; the 64 channels' last 4 left to the threads, or the whole kernel ran on one:
  # 5.5-6.3 ms). Where one image's panel (16 lanes x (hw/2)^2 pixels) is over half PACK's 512 KiB, the reduce is cache
  # blocked by one image (KBLOCK 1; at batch 32, 128x128: unpacked 8 lanes 131-155 ms, 38.8 packed by the image).
  # AVX-512 takes a 7 as rows and threads the channels as before. Values against torch under SPEC=2
  from tinygrad.codegen.opt import max_threads
  dev = llvm_cpu_device_at(256)
  ren = Device[dev].renderer
  outs, refs = conv_step(dev, b, 3, 64, hw, k=7, stride=2)
  wgrad = the_kernel([outs[1]], {64, 3, 7}, b * (hw // 2) ** 2)
  opts = hand_coded_optimizations(wgrad, ren)
  assert max_threads(ren) > 1 and any(o.op is OptOps.THREAD for o in opts), opts
  assert lanes(opts) == 16 and any(o.op is OptOps.PACK for o in opts), opts
  rows = [o for o in opts if o.op is OptOps.UPCAST and o.arg != 16]
  assert len(rows) == 1 and rows[0].arg == 3 and axis_size(output_axes(wgrad)[rows[0].axis]) == 3, opts
  assert [o.arg for o in opts if o.op is OptOps.KBLOCK] == ([] if kblock is None else [kblock]), opts
  with Context(SPEC=2): tol(outs[1].numpy(), refs[1], b * (hw // 2) ** 2)

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
def test_a_packed_panel_is_packed_once_per_iteration_of_its_own_loops():
  # a 3x3 conv over 4x4 pixels at batch 16: 32 packed lanes of output channels, 8 batch rows, so two batch tiles. The
  # weights' panel depends only on the channel tiles' loop, which goes outside the batch tiles' (SWAP): it is packed
  # once per channel tile, not once per (batch tile, channel tile). Measured alone (2 threads, ResNet-18 at batch 32):
  # its 256-channel conv over 8x8 pixels 6.6-6.9 -> 5.8-5.9 ms, the 512-channel windows over 4x4 17.3-18.4 -> 12.2-13.0
  b, c, hw = 16, 256, 4
  outs, refs, k, opts = conv_forward(b, c, hw)
  assert lanes(opts) == 32 and any(o.op is OptOps.SWAP for o in opts), opts
  panel, loops = packed_panel_ranges(k, opts)
  loops = [r for r in loops if (axis_size(r) or 0) > 1 and r.arg[-1] is AxisType.LOOP]
  assert loops[0] in panel and any(r not in panel for r in loops[1:]), loops
  thread = [o for o in opts if o.op is OptOps.THREAD]
  assert len(thread) == 1 and output_axes(apply_opts(k, opts, Device[llvm512()].renderer))[thread[0].axis] in panel, opts
  with Context(SPEC=2): tol(outs[0].numpy(), refs[0], 9 * c)

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
@pytest.mark.parametrize("lanes_n,rows_n,want", [(2304, 768, 6), (768, 2304, 8), (1536, 256, 8)])
def test_a_weight_gradient_storing_along_its_rows_takes_6_rows_under_48_lanes(lanes_n: int, rows_n: int, want: int):
  # dW[n, m] = sum over (batch, time) of g[., n] x[., m]: the 48 lanes (16 x 3, AVX-512) go on n, whose operand has the
  # longer rows, so the store runs along the rows' axis m. 8 rows of 3 vector registers each had LLVM keep a third of
  # the accumulators on the stack (measured alone, 2 threads: the D768 block's (2304, 768) dW 21.0 -> 15.9 ms with 6
  # rows); a dW storing along its lanes, or whose rows 6 does not divide, keeps 8
  from tinygrad.renderer.llvmir import CPULLVMRenderer
  b, t = 2, 128  # a reduce of 256: the 48-lane tile's shortest (WIDE_MIN_REDUCE)
  ren = CPULLVMRenderer(vector_bits=512, threads=2)
  g, x = Tensor(rand(70, b, t, lanes_n)), Tensor(rand(71, b, t, rows_n))
  dw = (g.reshape(b, t, lanes_n, 1) * x.reshape(b, t, 1, rows_n)).sum((0, 1))
  k = the_kernel([dw], {lanes_n, rows_n}, b * t)
  opts = hand_coded_optimizations(k, ren)
  ups = [o for o in opts if o.op is OptOps.UPCAST]
  assert lanes(opts) == 48 and ups[-1].arg == want and ups[-1].axis != ups[0].axis, opts
  if want == 6:
    with Context(SPEC=2):
      got = (Tensor(g.numpy(), device=llvm512()).reshape(b, t, lanes_n, 1) *
             Tensor(x.numpy(), device=llvm512()).reshape(b, t, 1, rows_n)).sum((0, 1))
      tol(got.numpy(), np.einsum("btn,btm->nm", g.numpy(), x.numpy()), b * t)

# ---- the register budget of an AVX2 host (16 vector registers of 8 float32 lanes) ----

def tile_lanes(ast, opts: list[Opt], ren) -> int:
  return int(np.prod([axis_size(r) or 1 for r in axes_of(apply_opts(ast, opts, ren), AxisType.UPCAST, AxisType.UNROLL)]))

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
def test_avx2_tiles_fit_its_16_registers_and_a_transcendental_tile_does_not_need_to(monkeypatch):
  # AVX-512's 8 rows x 32-48 lanes kept 32 of AVX2's 16 registers' worth of accumulators (spilled: 1024^3 53.7
  # GFLOPS, 4 rows x 16 lanes 117-135): on AVX2 the tile is 16 lanes x 6 rows where 6 divides, else 4 (12 or 8
  # accumulators). Values under SPEC=2 on a device with AVX2's renderer whatever the host
  dev, dev512 = llvm_cpu_device_at(256), llvm512()
  ren = Device[dev].renderer
  assert ren.vector_registers == 16 and Device[dev512].renderer.vector_registers == 32
  for m, rows in ((384, 6), (256, 4)):
    a, b = rand(30, m, 256), rand(31, 256, 1024)
    out = Tensor(a, device=dev) @ Tensor(b, device=dev)
    (k,) = kernels(out)
    opts = hand_coded_optimizations(k, ren)
    assert [o for o in opts if o.op is OptOps.UPCAST] == [Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.UPCAST, 0, rows)], opts
    assert tile_lanes(k, opts, ren) <= 96
    # the same kernel on AVX-512: 8 rows and more lanes
    assert tile_lanes(k, hand_coded_optimizations(k, Device[dev512].renderer), Device[dev512].renderer) >= 256
    with Context(SPEC=2): tol(out.numpy(), a @ b, 256)
  # attention's probabilities x V with its exp fused: each exp is a call that clobbers every vector register, so the
  # budget does not apply (GPT-2's, on AVX2: 64 lanes x 1 row 4.8 ms, x 4 rows 3.6): the whole head's 64 lanes, 4 rows
  # (the fused form, made with rangeify._broadcast_calls and _store_shared_calls off: the scheduler stores these
  # probabilities now)
  q, kk, v = (rand(32 + i, 1, 4, 256, 64) for i in range(3))
  with monkeypatch.context() as m:
    m.setattr(rangeify, "_broadcast_calls", lambda *args: [])
    m.setattr(rangeify, "_store_shared_calls", lambda *args: False)
    fused = Tensor(q, device=dev).scaled_dot_product_attention(Tensor(kk, device=dev), Tensor(v, device=dev),
                                                                is_causal=True)
    (pv,) = [x for x in kernels(fused) if red_size(x) == 256 and 64 in out_sizes(x) and
             any(u.op is Ops.EXP2 for u in x.toposort())]
  att = Tensor(q, device=dev).scaled_dot_product_attention(Tensor(kk, device=dev), Tensor(v, device=dev),
                                                            is_causal=True)
  opts = hand_coded_optimizations(pv, ren)
  assert tile_lanes(pv, opts, ren) == 256, opts
  ref = torch.nn.functional.scaled_dot_product_attention(*(torch.from_numpy(x) for x in (q, kk, v)), is_causal=True)
  with Context(SPEC=2): tol(att.numpy(), ref.numpy(), 256)

def fma_live_peak(uops) -> tuple[int, int]:
  """(vector FMAs, most of their operands live at once) in the innermost loop holding vector FMAs: each operand lives
  from its first use there to its last; the accumulators are the FMAs' own (one register each)."""
  fmas = [u for u in uops if u.op is Ops.MULACC and u.dtype.count > 1]
  last_range = max(i for i, u in enumerate(uops) if u.op is Ops.RANGE and i < uops.index(fmas[0]))
  body = [u for u in uops[last_range:] if u.op is Ops.MULACC and u.dtype.count > 1]
  span: dict = {}
  for t, f in enumerate(body):
    for s in f.src[:2]: span.setdefault(s, [t, t])[1] = t
  return len(body), max(sum(a <= t <= b for a, b in span.values()) for t in range(len(body)))

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
def test_a_weight_gradient_tile_walks_its_rows_outermost_so_it_fits_avx2_registers():
  # a weight gradient g^T x whose lanes go on the output's first axis (g's, read with the longer stride) and its 6 rows
  # on the second: in the codegen's lane order both vectors of a panel row are walked with the 6 rows inside, so all 6
  # splats stay live across them, 12 + 6 + 1 of AVX2's 16 registers, and LLVM spilled accumulators to the stack (the
  # D768 block's (3072, 768) dW 64-69 ms). Walked row by row: 12 + 2 + 1 (45-54 ms). Values under SPEC=2 against torch
  dev = llvm_cpu_device_at(256)
  ren = Device[dev].renderer
  g, x = rand(40, 2, 128, 768), rand(41, 2, 128, 192)
  tw = torch.from_numpy(g).reshape(-1, 768).T @ torch.from_numpy(x).reshape(-1, 192)
  out = Tensor(g, device=dev).reshape(-1, 768).T @ Tensor(x, device=dev).reshape(-1, 192)
  (k,) = kernels(out)
  opts = hand_coded_optimizations(k, ren)
  assert [o for o in opts if o.op is OptOps.UPCAST] == [Opt(OptOps.UPCAST, 0, 16), Opt(OptOps.UPCAST, 1, 6)], opts
  n, peak = fma_live_peak(get_program(k, ren, opts).uops)
  assert n == 12 and n + peak <= ren.vector_registers, (n, peak)
  with Context(SPEC=2): tol(out.numpy(), tw.numpy(), 256)

# ---- Winograd's transforms (tensor.py _winograd_forward: matmuls with a constant operand) ----

def test_heuristics_tile_winograds_input_transform_over_its_tile_positions():
  # the input transform is K (36 x 36 constants) @ the tiles' 6x6 windows, the windows' channels contiguous: the lanes
  # go on the channels, and the rows on the 36 tile positions (the axis the windows' vector loads are broadcast along),
  # not on the tiles (along which the windows vary: a row of tiles reuses only K's scalar). For a big kernel (register
  # tiles past 2^24 work) and a small one, whose padded windows' index math is not a heavy body copied per lane
  from tinygrad.tensor import _winograd_input
  for bs, c, hw in ((32, 64, 32), (8, 64, 16)):
    tiles = (hw // 4, hw // 4)
    v = _winograd_input(Tensor.empty(bs, c, hw, hw), 2, [(1, 1), (1, 1)], tiles, 1)
    k = the_kernel([v], {36, bs * tiles[0] * tiles[1], c}, 36)
    opts = hand_coded_optimizations(k, REN)
    tiled = apply_opts(k, opts, REN)
    ups = axes_of(tiled, AxisType.UPCAST)
    lds = [u for u in tiled.toposort() if u.op is Ops.LOAD and u.src[0].op is Ops.INDEX]
    # every load (the windows, K) is reused by the lanes or rows of some upcast axis it does not depend on
    assert len(ups) >= 2 and all(any(r not in ld.src[0]._ranges for r in ups) for ld in lds), (bs, c, hw, opts)

@pytest.mark.parametrize("ren", ["C", *(["LLVM"] if HAS_LLVM else [])])
def test_winograds_transforms_stream_their_tiles_once_under_the_constants_loop(ren: str):
  # each transform is a small constant matrix (5 KiB at most) @ a big operand (the tiles, 8 MiB of x at batch 32, 64
  # channels, 32x32). The loop over the constant's row blocks goes inside the loops the big operand depends on: every
  # block of tiles is read once, the constants again from cache. With it outermost, each of its iterations streamed
  # every tile again (9 times for the input transform). Measured in the step (a conv's forward and backward at
  # 32x64x32x32, 2 threads, AMD Zen 5, the step's kernels run in order, old and new opts alternated): 31.6 -> 22.5 ms,
  # the input transform 11.1 -> 3.9 ms (its 2 launches). A small one (batch 8, 8x8: 0.2 MiB of x, every operand under
  # L2's share, PACK_MAX_BYTES) keeps its order
  from tinygrad.tensor import _winograd_input, _winograd_lmat, _winograd_output_tiles, _WINO_AT
  r = REN if ren == "C" else Device[llvm512()].renderer
  def transforms(bs: int, hw: int) -> list:
    x, tiles = Tensor.empty(bs, 64, hw, hw), (hw // 4, hw // 4)
    t = bs * tiles[0] * tiles[1]
    dm = _winograd_lmat(_winograd_output_tiles(Tensor.empty(bs, 64, hw, hw), 2, tiles), _WINO_AT, 2, transpose=True)
    m = _winograd_lmat(Tensor.empty(36, t, 64), _WINO_AT, 2)
    return [the_kernel([_winograd_input(x, 2, [(1, 1), (1, 1)], tiles, 1)], {36, t, 64}, 36),
            the_kernel([dm], {36, t, 64}, 16), the_kernel([m], {16, t, 64}, 36)]
  for (bs, hw), inside in (((32, 32), True), ((8, 8), False)):
    for k in transforms(bs, hw):
      consts = [u for u in k.toposort() if u.op is Ops.LOAD and u.src[0].op is Ops.INDEX and
                u.src[0].src[0].dtype.size <= 36 * 36]
      tiled = apply_opts(k, opts := hand_coded_optimizations(k, r), r)
      loops = [x for x in output_axes(tiled) if x.arg[-1] is AxisType.LOOP and (axis_size(x) or 0) > 1]
      own = [x for x in loops if any(x in ld.src[0]._ranges for ld in [
        u for u in tiled.toposort() if u.op is Ops.LOAD and u.src[0].op is Ops.INDEX and
        u.src[0].src[0] in {c.src[0].src[0] for c in consts}])]
      # NOTE: (the threads may split the constant's rows instead: no loop of them is left)
      assert len(consts) == 1 and len(own) <= 1, (bs, hw, opts)
      if inside: assert not own or (own[0] is loops[-1] and own[0] is not loops[0]), (bs, hw, loops, opts)
      else: assert own and own[0] is loops[0], (bs, hw, loops, opts)
  # the filter transform at 512 channels (36 x 9 constants @ 9 x (512 x 512) filters): the rows' loop goes inside the
  # input channels' but not inside the 16 tiles of 32 output channels, whose rows are then stored whole per plane
  # (measured in ResNet-18 b32's step: 12.5 ms as it was, 7.9 so, 14.0 inside the tiles' loop too)
  wk = Tensor.empty(9, 1, 512, 512)
  from tinygrad.tensor import _WINO_G
  k = next(k for k in kernels(_winograd_lmat(wk, _WINO_G, 2)) if red_size(k) == 9)
  tiled = apply_opts(k, opts := hand_coded_optimizations(k, r), r)
  loops = [x for x in output_axes(tiled) if x.arg[-1] is AxisType.LOOP and (axis_size(x) or 0) > 1]
  rows = [x for x in loops if any(x in u.src[0]._ranges for u in tiled.toposort() if u.op is Ops.LOAD and
                                  u.src[0].op is Ops.INDEX and getattr(u.src[0].src[0].dtype, "size", 0) == 36 * 9)]
  assert len(rows) == 1 and rows[0] is not loops[0] and rows[0] is not loops[-1], (loops, opts)
  # a packed panel's loop is never moved (its fill would be redone inside the loops it passed): the 7x7 stem conv at
  # batch 32, 128x128 (its 37 KiB of weights packed with its tile; 6 MiB of input)
  stem = next(k for k in kernels(Tensor.empty(32, 3, 128, 128).conv2d(Tensor.empty(64, 3, 7, 7), stride=2, padding=3))
              if red_size(k) == 3 * 7 * 7)
  opts = hand_coded_optimizations(stem, r)
  if any(o.op is OptOps.PACK for o in opts):
    assert not any(o.op is OptOps.SWAP for o in opts[[o.op for o in opts].index(OptOps.PACK):]), opts

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
@pytest.mark.parametrize("bits", [256, 512])
def test_a_batched_weight_gradient_whose_tiles_each_stream_over_l2_is_blocked_for_l1(bits: int):
  # Winograd's dU = V^T dM per tile position (36 of them) over 2048 tiles, 32 x 32 channels: both operands are read
  # across their rows, each tile's reduce streams a 64-byte line of each per step (256 KiB a tile), which the next tile
  # found no longer in L2. KBLOCK cuts the tiles into blocks of at most TILE_BLOCK_BYTES a tile (kept in L1 across the
  # block's tiles), with no PACK. In the steps (AMD Zen 3, 2 threads): the UNet's 4.83 -> 3.71 ms, ResNet-18 b32's 64 x
  # 64 35.8 -> 27.4. Over 256 tiles (32 KiB a tile) it is not blocked. Values against numpy under SPEC=2
  from tinygrad.codegen.heuristic import TILE_BLOCK_BYTES
  dev = llvm_cpu_device_at(bits)
  for t, blocked in ((2048, True), (256, False)):
    v, dm = rand(70, 36, t, 32), rand(71, 36, t, 32)
    du = Tensor(v, device=dev).transpose(-1, -2) @ Tensor(dm, device=dev)
    k = the_kernel([du], {36, 32}, t)
    opts = hand_coded_optimizations(k, Device[dev].renderer)
    kb = [o for o in opts if o.op is OptOps.KBLOCK]
    if not blocked:
      assert not kb, (t, opts)
      continue
    assert len(kb) == 1 and not any(o.op is OptOps.PACK for o in opts), (t, opts)
    # the longest block within TILE_BLOCK_BYTES: a line of each operand per step (their 16 lanes and 4 rows: 64 B each)
    assert kb[0].arg * 2 * 64 <= TILE_BLOCK_BYTES < 2 * kb[0].arg * 2 * 64, opts
    with Context(SPEC=2):
      tol(du.numpy(), v.transpose(0, 2, 1) @ dm, t)

def test_a_transpose_takes_a_square_tile_of_vector_loads_and_stores():
  # channels-first to channels-last (Winograd's input copy): the store's contiguous axis (channels) takes 8 lanes and
  # the axis the input is contiguous along (width) 8 more, a tile the compiler transposes in registers (AVX2, 2
  # threads, 32x64x32x32: 4.3 -> 1.2-1.5 ms on LLVM, 3.6-3.8 -> 1.2-1.3 on C). Values on the C and LLVM paths under
  # SPEC=2
  from tinygrad.codegen.opt import index_stride
  x = rand(40, 4, 16, 8, 32)
  k = kernels(Tensor(x).permute(0, 2, 3, 1).contiguous())[0]
  tiled = apply_opts(k, hand_coded_optimizations(k, REN), REN)
  ups = axes_of(tiled, AxisType.UPCAST)
  st = [u for u in tiled.toposort() if u.op is Ops.STORE][0].src[0].src[1].get_idx()
  ld = [u for u in tiled.toposort() if u.op is Ops.LOAD and u.src[0].op is Ops.INDEX][0].src[0].src[1].get_idx()
  assert any(index_stride(st, r) == 1 for r in ups) and any(index_stride(ld, r) == 1 for r in ups), ups
  for dev in [c_cpu_device(), *([llvm_cpu_device()] if HAS_LLVM else [])]:
    with Context(SPEC=2):
      np.testing.assert_equal(Tensor(x, device=dev).permute(0, 2, 3, 1).contiguous().numpy(), x.transpose(0, 2, 3, 1))

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
def test_a_transpose_on_avx512_takes_an_8x8_tile():
  # AVX-512's 16 store lanes by 16 input rows spilled (160-250 stack moves) and put 16 rows a plane apart in one L1 set:
  # the square is 8 x 8 (the UNet's channels-last copies, 17 kernels, 13.7 -> 10.3 ms in its step; ResNet-18 b32's 10
  # of 11 faster). A short contiguous axis (the filters' 9 taps) keeps the 16 store lanes. Values on that path against
  # numpy under SPEC=2
  from tinygrad.codegen.opt import index_stride
  dev = llvm512()
  x, w = rand(51, 4, 64, 32, 32), rand(52, 64, 48, 3, 3)
  cases = ((lambda d: Tensor(x, device=d).permute(0, 2, 3, 1).contiguous(), x.transpose(0, 2, 3, 1), [8, 8]),
           (lambda d: Tensor(w, device=d).reshape(64, 48, 9).permute(2, 1, 0).contiguous(),
            w.reshape(64, 48, 9).transpose(2, 1, 0), [16, 9]))
  for t, ref, want in cases:
    k = kernels(t("CPU"))[0]
    opts = hand_coded_optimizations(k, Device[dev].renderer)
    tiled = apply_opts(k, opts, Device[dev].renderer)
    ld = [u for u in tiled.toposort() if u.op is Ops.LOAD and u.src[0].op is Ops.INDEX][0].src[0].src[1].get_idx()
    ups = axes_of(tiled, AxisType.UPCAST)
    assert [o.arg for o in opts if o.op is OptOps.UPCAST] == want and any(index_stride(ld, r) == 1 for r in ups), opts
    with Context(SPEC=2): np.testing.assert_equal(t(dev).numpy(), ref)

def test_a_per_channel_broadcast_is_no_transpose_and_splits_no_stream():
  # a batchnorm's backward over (N, C, H, W): two big inputs and the output contiguous along the pixels, and per-channel
  # scales contiguous along the channels but broadcast along the pixels. The scales are not a transposed input: lanes
  # on the channels (a "transpose tile" of 8 x 8) split each big input and the output into 8 streams a plane apart
  # (ResNet-18 b32's step, AMD Zen 2, 2 threads: its (32, 64, 64, 64) one 16.2 -> 2.4 ms with the pixels' lanes alone).
  # The store's lanes are on the pixels only; values against numpy on C and LLVM under SPEC=2
  from tinygrad.codegen.opt import index_stride
  g, x, s, m = rand(43, 2, 32, 16, 16), rand(44, 2, 32, 16, 16), rand(45, 1, 32, 1, 1), rand(46, 1, 32, 1, 1)
  def f(d: str) -> Tensor:
    return ((Tensor(g, device=d) * Tensor(s, device=d)) * (Tensor(x, device=d) - Tensor(m, device=d))).contiguous()
  ref = (g * s) * (x - m)
  k = kernels(f("CPU"))[0]
  tiled = apply_opts(k, opts := hand_coded_optimizations(k, REN), REN)
  st = [u for u in tiled.toposort() if u.op is Ops.STORE][0].src[0].src[1].get_idx()
  ups = axes_of(tiled, AxisType.UPCAST)
  assert ups and all(index_stride(st, r) == 1 for r in ups), opts
  for dev in [c_cpu_device(), *([llvm_cpu_device()] if HAS_LLVM else [])]:
    with Context(SPEC=2): np.testing.assert_allclose(f(dev).numpy(), ref, rtol=1e-6, atol=1e-6)

def test_a_transpose_through_a_group_index_takes_the_square_tile():
  # a group norm's normalize written channels-last (the UNet's): the store's lanes on the channels, the input contiguous
  # along the width, and per-group statistics indexed by channel // 4 (a %// read of the store's axis). That read is a
  # layout's, not a gated fold's: the input takes the 8 x 8 transpose tile rather than the whole channel row as lanes
  # (the UNet's (8, 64, 64, 32) one 9.4 -> 1.6 ms in its step). Values against numpy on C and LLVM under SPEC=2
  from tinygrad.codegen.opt import index_stride
  x, m = rand(47, 2, 32, 16, 32), rand(48, 2, 8, 1)
  def f(d: str) -> Tensor:
    xg = Tensor(x, device=d).reshape(2, 8, -1) - Tensor(m, device=d)
    return xg.reshape(2, 32, 16, 32).permute(0, 2, 3, 1).contiguous()
  ref = (x.reshape(2, 8, -1) - m).reshape(2, 32, 16, 32).transpose(0, 2, 3, 1)
  k = kernels(f("CPU"))[0]
  tiled = apply_opts(k, opts := hand_coded_optimizations(k, REN), REN)
  ups = axes_of(tiled, AxisType.UPCAST)
  st = [u for u in tiled.toposort() if u.op is Ops.STORE][0].src[0].src[1].get_idx()
  big = [u for u in tiled.toposort() if u.op is Ops.LOAD and u.src[0].op is Ops.INDEX and
         u.src[0].src[0].dtype.size == x.size]
  assert big and any(index_stride(st, r) == 1 for r in ups), opts
  # NOTE: a square tile: as many of the input's contiguous lanes (4 here) as the store's
  assert any(index_stride(big[0].src[0].src[1].get_idx(), r) == 1 and (axis_size(r) or 0) >= 4 for r in ups), opts
  for dev in [c_cpu_device(), *([llvm_cpu_device()] if HAS_LLVM else [])]:
    with Context(SPEC=2): np.testing.assert_allclose(f(dev).numpy(), ref, rtol=1e-6, atol=1e-6)

def test_a_stride_2_fold_over_rows_too_long_to_take_whole_takes_their_phase_and_the_rows_by_2():
  # a 3x3 stride-2 conv's input gradient folded from its windows into the padded 34-wide rows: the taps' %// reads of
  # both axes. 34 is too long to take whole and 4 does not divide it: 2 lanes and the rows by 2 (both phases constant
  # in each lane), where the plain lanes were 2 alone (ResNet-18 b32's (32, 64, 34, 34) one 6.0 -> 4.1 ms in its
  # step). The gradient against torch on C and LLVM under SPEC=2
  x, w = rand(49, 2, 4, 32, 32), rand(50, 8, 4, 3, 3)
  def grad(d: str) -> Tensor:
    tx = Tensor(x, device=d, requires_grad=True)
    tx.conv2d(Tensor(w, device=d), stride=2, padding=1).square().sum().backward()
    assert tx.grad is not None
    return tx.grad
  ks = [k for k in kernels(grad("CPU")) if not reduce_axes(k) and out_sizes(k)[-2:] == [34, 34]]
  assert ks, [out_sizes(k) for k in kernels(grad("CPU"))]
  opts = hand_coded_optimizations(ks[0], REN)
  assert [(o.op, o.arg) for o in opts if o.op is OptOps.UPCAST] == [(OptOps.UPCAST, 2), (OptOps.UPCAST, 2)], opts
  rx = torch.from_numpy(x).requires_grad_()
  torch.nn.functional.conv2d(rx, torch.from_numpy(w), stride=2, padding=1).square().sum().backward()
  assert rx.grad is not None
  for dev in [c_cpu_device(), *([llvm_cpu_device()] if HAS_LLVM else [])]:
    with Context(SPEC=2): tol(grad(dev).numpy(), rx.grad.numpy(), 4 * 8 * 9)

def test_a_transpose_from_a_short_contiguous_axis_takes_that_axis_whole():
  # the filters' Winograd layout, (Cout, Cin, 3, 3) -> (9, Cin, Cout): the store's lanes on Cout, and the 9 taps (along
  # which the filters are contiguous, too short for a square tile) whole, so each lane's taps are read together; with
  # the taps' loop outermost the copy swept all the filters 9 times with gathers (ResNet-18 b32's 6 launches at 256 and
  # 512 channels 16.0 -> 7.1 ms in the step). The same with the taps read backwards (a conv's input gradient by
  # Winograd: the transposed filters flipped; 8.6 -> 2.9 ms for the 512-channel copy's 3 launches). Also the
  # channels-last copy of a 4-wide image. Values on C and LLVM
  from tinygrad.codegen.opt import index_stride
  w, x = rand(41, 32, 48, 3, 3), rand(42, 2, 32, 4, 4)
  cases = ((lambda d: Tensor(w, device=d).reshape(32, 48, 9).permute(2, 1, 0).contiguous(),
            w.reshape(32, 48, 9).transpose(2, 1, 0)),
           (lambda d: Tensor(w, device=d).flip((2, 3)).reshape(32, 48, 9).permute(2, 0, 1).contiguous(),
            w[:, :, ::-1, ::-1].reshape(32, 48, 9).transpose(2, 0, 1)),
           (lambda d: Tensor(x, device=d).permute(0, 2, 3, 1).contiguous(), x.transpose(0, 2, 3, 1)))
  for t, ref in cases:
    k = kernels(t("CPU"))[0]
    tiled = apply_opts(k, opts := hand_coded_optimizations(k, REN), REN)
    ups = axes_of(tiled, AxisType.UPCAST)
    ld = [u for u in tiled.toposort() if u.op is Ops.LOAD and u.src[0].op is Ops.INDEX][0].src[0].src[1].get_idx()
    st = [u for u in tiled.toposort() if u.op is Ops.STORE][0].src[0].src[1].get_idx()
    assert any(index_stride(st, r) == 1 for r in ups) and any(index_stride(ld, r) in (1, -1) for r in ups), opts
    for dev in [c_cpu_device(), *([llvm_cpu_device()] if HAS_LLVM else [])]:
      with Context(SPEC=2): np.testing.assert_equal(t(dev).numpy(), ref)

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
def test_a_per_channel_sum_unrolls_its_contiguous_pixels_into_vector_accumulators():
  # a batchnorm's sum of squares over (batch, 32, 32) of (32, 64, 32, 32): the per-channel mean, contiguous along the
  # channels and read by no reduce step, took 4 channel lanes (each lane a stream of its own, 256 KiB apart) and the
  # batch's axis (the first) was unrolled by 4: 1.78 ms alone; the pixels' axis unrolled by 16 into vector accumulators
  # 0.11-0.29. Values against numpy under SPEC=2
  dev = llvm_cpu_device_at(256)
  x, m = rand(80, 8, 64, 32, 32), rand(81, 1, 64, 1, 1)
  out = ((Tensor(x, device=dev) - Tensor(m, device=dev)) ** 2).sum((0, 2, 3))
  k = the_kernel([out], {64}, 8 * 32 * 32)
  opts = hand_coded_optimizations(k, Device[dev].renderer)
  assert not any(o.op is OptOps.UPCAST for o in opts), opts
  unrolls = [o for o in opts if o.op is OptOps.UNROLL]
  assert len(unrolls) == 1 and unrolls[0].arg == 16 and axis_size(reduce_axes(k)[unrolls[0].axis]) == 32, opts
  with Context(SPEC=2): tol(out.numpy(), ((x - m) ** 2).sum((0, 2, 3)), 8 * 32 * 32)

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
@pytest.mark.parametrize("stride", [1, 2])
def test_a_1x1_conv_weight_gradient_packs_the_operand_of_its_lanes(stride: int):
  # a 1x1 conv's weight gradient (cout x cin, a reduce over batch x pixels) stores along its input channels, whose
  # input is read an image apart a lane: those 16 lanes were gathered scalars and PACK copied the other operand's 4
  # rows (alone, AVX2, 2 threads, 64 -> 128 channels at batch 32: stride 1 over 32x32 51.2 ms, stride 2 over 16x16 8.3).
  # Now the lanes' own operand is packed ([reduce steps][lanes]: one vector load a step), cache blocked where its panel
  # is over PACK's limit: 7.7 and 1.7 ms. On AVX-512's and AVX2's budgets; values against torch under SPEC=2 on both
  # CPU paths and the PYTHON interpreter
  b, cin, cout, hw = 8, 64, 128, 32
  for dev in (llvm512(), llvm_cpu_device_at(256)):
    outs, refs = conv_step(dev, b, cin, cout, hw, k=1, stride=stride)
    wgrad = the_kernel([outs[1]], {cout, cin}, b * (hw // stride) ** 2)
    opts = hand_coded_optimizations(wgrad, Device[dev].renderer)
    i = wide_axis(opts)
    assert i is not None and any(o.op is OptOps.PACK for o in opts), opts
    # the packed load is the one that varies along the lanes' axis, not the other operand (its rows)
    lane_bufs = {ld.src[0].src[0].arg for ld in packable_loads(wgrad) if output_axes(wgrad)[i] in ld.src[0]._ranges}
    p = next(n for n, o in enumerate(opts) if o.op is OptOps.PACK)
    packed = packable_loads(apply_opts(wgrad, opts[:p], Device[dev].renderer))[opts[p].axis]
    assert lane_bufs == {packed.src[0].src[0].arg}, (opts, lane_bufs)
    with Context(SPEC=2): tol(outs[1].numpy(), refs[1], b * (hw // stride) ** 2)
  outs, refs = conv_step(c_cpu_device(), 2, cin, cout, 8, k=1, stride=stride)
  with Context(SPEC=2): tol(outs[1].numpy(), refs[1], 2 * (8 // stride) ** 2)
  outs, refs = conv_step("PYTHON", 2, 4, 16, 4, k=1, stride=stride)
  with Context(SPEC=2): tol(outs[1].numpy(), refs[1], 2 * (4 // stride) ** 2)

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
def test_gated_rows_take_32_packed_lanes_by_2_rows_on_avx2(monkeypatch):
  # AVX2's 96 lanes of budget hold 16 packed lanes by 4 rows, or 32 by 2. Where the rows' loads are gated along the
  # reduce (a padded conv's input: a bounds check per row and step), 2 rows of 32 cost less (alone, one thread, ResNet-18
  # b8 64x64: the 3x3 weight gradients over 16x16 and 8x8 pixels 3.7 -> 2.5-2.7 and 2.2 -> 1.4 ms; the 3x3 convs over
  # 4x4 pixels 1.13-1.29x faster). A 512-channel conv over 2x2 pixels, whose 32-lane panel of weights is over PACK's
  # limit, keeps 16 lanes rather than cache blocking them; its input gradient is a plain matmul (stored pixels-first,
  # no gates: test_a_conv_input_gradient_is_a_matmul_along_the_filters_rows). AVX-512 keeps its 32 by 4+. Values
  # against torch under SPEC=2
  # NOTE: the convs here read their input through the padding (gated), as the C path's do: the LLVM path's read it
  # stored padded (Tensor._padding_stored), with no gate
  monkeypatch.setattr(tinygrad_tensor, "CONV_PADDING_STORED", False)
  dev = llvm_cpu_device_at(256)
  ren = Device[dev].renderer
  def tile(k) -> tuple[int, list[int]]:
    opts = hand_coded_optimizations(k, ren)
    assert any(o.op is OptOps.PACK for o in opts) and not any(o.op is OptOps.KBLOCK for o in opts), opts
    rows = [o.arg for o in opts if o.op is OptOps.UPCAST and o.axis != wide_axis(opts)]
    return lanes(opts), rows
  outs, refs = conv_step(dev, 8, 64, 64, 16)
  wgrad = the_kernel([outs[1]], {64, 3}, 8 * 16 * 16)
  assert tile(wgrad) == (32, [2])
  assert lanes(hand_coded_optimizations(wgrad, Device[llvm512()].renderer)) == 32
  outs2, refs2 = conv_step(dev, 8, 128, 256, 8, stride=2)
  fwd = the_kernel([outs2[0]], {8, 256, 4}, 9 * 128)
  assert tile(fwd) == (32, [2])
  dx_x = Tensor(rand(40, 8, 512, 2, 2), device=dev, requires_grad=True)
  w = Tensor(rand(41, 512, 512, 3, 3) / 48, device=dev)
  with Context(WINO=0): (dx_x.conv2d(w, padding=1) * Tensor(rand(42, 8, 512, 2, 2), device=dev)).sum().backward()
  assert dx_x.grad is not None
  windows = [k for k in kernels(dx_x.grad) if red_size(k) == 512 and 9 * 512 in out_sizes(k)]
  assert len(windows) == 1
  wopts = hand_coded_optimizations(windows[0], ren)
  assert axis_size(output_axes(windows[0])[wide_axis(wopts)]) == 9 * 512, wopts
  outs3, _ = conv_step(dev, 8, 512, 512, 2)
  big = the_kernel([outs3[0]], {8, 512, 2}, 9 * 512)
  # NOTE: its 4 rows are the 2x2 pixels, not 4 of the batch (_short_pixel_rows; in ResNet-18 b8's step, its input stored
  # padded: 4.65 -> 4.51 ms)
  assert tile(big) == (16, [2, 2])
  with Context(SPEC=2):
    tol(outs[1].numpy(), refs[1], 8 * 16 * 16)
    tol(outs2[0].numpy(), refs2[0], 9 * 128)

def test_an_update_of_3x3_filters_takes_the_taps_whole_and_lanes_on_the_input_channels():
  # an SGD step of (Cout, Cin, 3, 3) filters: the store is contiguous along the taps (3, too short for the lanes), then
  # along Cin. It had no upcast at all (a scalar loop); now the taps are whole and Cin gives the lanes, one tile of the
  # filters a run of whole vectors (alone, 512 x 512 x 3 x 3: 1.2 ms -> 0.3 on C and on LLVM). Values under SPEC=2
  from tinygrad.codegen.opt import index_stride
  from tinygrad.nn.optim import SGD
  w0, g = rand(43, 64, 32, 3, 3), rand(44, 64, 32, 3, 3)
  def step(dev: str) -> Tensor:
    w = Tensor(w0, device=dev, requires_grad=True)
    opt = SGD([w], lr=0.5)
    with Tensor.train():
      opt.zero_grad()
      (w * Tensor(g, device=dev)).sum().backward()
      opt.step()
    return w
  # the update's kernel as SGD schedules it (step() realizes): the filters less lr times their gradient
  lr = Tensor([0.5], device="CPU")
  k = the_kernel([Tensor(w0, device="CPU") - lr * Tensor(g, device="CPU")], {64, 32, 3}, 1)
  for ren, lanes in ((REN, 4), *(((Device[llvm512()].renderer, 16),) if HAS_LLVM else ())):
    tiled = apply_opts(k, opts := hand_coded_optimizations(k, ren), ren)
    st = [u for u in tiled.toposort() if u.op is Ops.STORE][0].src[0].src[1].get_idx()
    ups = {index_stride(st, r): axis_size(r) for r in axes_of(tiled, AxisType.UPCAST)}
    assert ups == {1: 3, 3: 3, 9: lanes}, opts
  if HAS_LLVM:
    src = get_program(k, Device[llvm512()].renderer).src
    assert "store <8 x float>" in src and "store float" not in src
  for dev in [c_cpu_device(), *([llvm_cpu_device()] if HAS_LLVM else [])]:
    with Context(SPEC=2): np.testing.assert_allclose(step(dev).numpy(), w0 - 0.5 * g, rtol=1e-6, atol=1e-6)

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
def test_two_fused_per_channel_sums_with_a_heavy_body_each_unroll_their_pixels():
  # a batchnorm backward's per-channel sums over two image sizes fused in one kernel (ResNet-18 b32's first stage),
  # each term normalized, scaled and masked by a relu: a body of more than HEAVY_BODY ALU ops, which was left with no
  # unroll at all (a scalar loop: 7.9 ms alone, 3.4 with both sums' pixels unrolled by 16). Each REDUCE's contiguous
  # axis is unrolled by 16 into vector accumulators. Values against numpy under SPEC=2
  from tinygrad.codegen.heuristic import HEAVY_BODY, _reduce_body_alu
  dev = llvm_cpu_device_at(512)
  xs = [rand(82 + i, 2, 16, 32 * (i + 1), 32 * (i + 1)) for i in range(2)]
  m, s, g = rand(84, 1, 16, 1, 1), rand(85, 1, 16, 1, 1), rand(86, 1, 16, 1, 1)
  def body(x, mod, relu):
    xh = (x - mod(m) / 1024) * mod(s)
    return relu(xh * mod(g) + mod(m)) * xh + relu(xh * mod(s) - mod(g)) * (x - mod(s)) + relu(xh - mod(g)) * mod(m)
  T = lambda a: Tensor(a, device=dev)  # noqa: E731
  out = body(T(xs[0]), T, Tensor.relu).sum((0, 2, 3)) + body(T(xs[1]), T, Tensor.relu).sum((0, 2, 3))
  (k,) = [k for k in kernels(out) if len([u for u in k.toposort() if u.op is Ops.REDUCE]) == 2]
  assert _reduce_body_alu(k) > HEAVY_BODY
  opts = hand_coded_optimizations(k, Device[dev].renderer)
  unrolls = [(axis_size(reduce_axes(k)[o.axis]), o.arg) for o in opts if o.op is OptOps.UNROLL]
  assert sorted(unrolls) == [(32, 16), (64, 16)], opts
  def ref(x): return body(x, lambda a: a, lambda a: np.maximum(a, 0)).sum((0, 2, 3))
  with Context(SPEC=2): tol(out.numpy(), ref(xs[0]) + ref(xs[1]), 2 * 64 * 64)

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
@pytest.mark.parametrize("hw", [8, 4, 2])
def test_a_per_channel_sum_over_few_pixels_unrolls_its_contiguous_run_into_16_lanes(hw: int):
  # a batchnorm's per-channel sum over (batch, hw, hw) with hw < 16 (ResNet's later stages): the pixels' row is too short
  # for the lanes, and the batch's axis (the first, 8 KiB apart) was unrolled whole: 8 scalar streams. The row is
  # unrolled whole and the next row axis by the rest of 16 lanes (whole at 2x2), so each step is one vector load of
  # consecutive pixels (b8 at 8x8, alone: 0.010 -> 0.004 ms; b32's 4x4 and 8x8 sums in the step 2-4x). Values under SPEC=2
  dev = llvm_cpu_device_at(512)
  x = rand(87, 8, 64, hw, hw)
  out = (Tensor(x, device=dev) * 2).sum((0, 2, 3))
  k = the_kernel([out], {64}, 8 * hw * hw)
  opts = hand_coded_optimizations(k, Device[dev].renderer)
  # the row (the last reduce axis) whole, then the rows' axis by the rest of the lanes
  assert [o.op for o in opts].count(OptOps.UNROLL) == 2 and opts[0] == Opt(OptOps.UNROLL, 2, 0), opts
  assert opts[1] == Opt(OptOps.UNROLL, 1, 0 if hw * hw <= 16 else 16 // hw), opts
  with Context(SPEC=2): tol(out.numpy(), (x * 2).sum((0, 2, 3)), 8 * hw * hw)

@pytest.mark.parametrize("dev", ["C", *(["LLVM"] if HAS_LLVM else [])])
def test_a_mid_size_matmul_takes_one_vector_register_of_lanes_by_4_rows(dev):
  # an LSTM step's dH = dG @ W_hh (16 x 1024 @ 1024 x 256): 4.2M multiply-adds, under the big tiles' 2^24 but over
  # MID_BLOCK_MIN_WORK: 16 lanes on W's contiguous axis by 4 rows, no unrolled reduce (4 x 4 and an unroll by 4 ran 2.6x
  # slower). x @ W^T at that size has no axis W is read along with vector loads: no 16 lanes there (they would gather)
  from tinygrad.codegen.heuristic import MID_BLOCK_MIN_WORK, BIG_BLOCK_MIN_WORK
  dev = {"C": c_cpu_device, "LLVM": llvm512}[dev]()
  m, k_, n = 16, 1024, 256
  assert MID_BLOCK_MIN_WORK <= m * k_ * n < BIG_BLOCK_MIN_WORK
  g, w = rand(40, m, k_), rand(41, k_, n) / k_ ** 0.5
  out = Tensor(g, device=dev) @ Tensor(w, device=dev)
  k = the_kernel([out], {m, n}, k_)
  opts = hand_coded_optimizations(k, Device[dev].renderer)
  assert wide_axis(opts) is not None and axis_size(output_axes(k)[wide_axis(opts)]) == n, opts
  assert Opt(OptOps.UPCAST, 0, 4) in opts and not any(o.op is OptOps.UNROLL for o in opts), opts
  tol(out.numpy(), g @ w, k_)
  h, w2 = rand(42, m, n), rand(43, k_, n) / n ** 0.5
  out2 = Tensor(h, device=dev) @ Tensor(w2, device=dev).T
  k2 = the_kernel([out2], {m, k_}, n)
  assert wide_axis(hand_coded_optimizations(k2, Device[dev].renderer)) is None
  tol(out2.numpy(), h @ w2.T, n)

@pytest.mark.parametrize("dev", DEVICES[:-1])
def test_a_weight_gradient_whose_tile_took_every_threaded_axis_keeps_one_for_the_threads(dev):
  # a first conv's weight gradient (3 -> 32 channels over batch 8 of 64x64): its 32 output channels taken whole as
  # lanes left only the 3 x 3 x 3 taps, which 2 threads do not split: one thread ran it (alone, LLVM: 1.13 ms; 16 lanes
  # on each of two threads 0.58). The tile again, keeping a factor of the threads on an output axis
  dev = {"C": c_cpu_device, "LLVM": llvm512}[dev]()
  b, cin, cout, hw = 8, 3, 32, 64
  outs, refs = conv_step(dev, b, cin, cout, hw)
  wgrad = the_kernel([outs[1]], {cout, cin}, b * hw * hw)
  opts = hand_coded_optimizations(wgrad, Device[dev].renderer)
  assert any(o.op is OptOps.THREAD for o in opts), opts
  with Context(SPEC=2): tol(outs[1].numpy(), refs[1], b * hw * hw)

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
def test_a_batched_product_of_two_big_operands_splits_its_batch_across_the_threads():
  # Winograd's weight gradient: for each of the 36 tile positions, A^T @ B over 2048 tiles (A, B: 36 x 2048 x 32, 9.4 MB
  # each). The threads split the packed operand's rows (its panel per thread), so each thread read all of B; split on
  # the positions, each reads its half of both. Measured in the UNet's step (Intel Xeon, 2 threads, alternated): this
  # kernel's 2 launches 4.1-5.2 -> 2.8-4.0 ms, the step's 7 other batched products of its Winograd gradients 9%-48% each (three runs)
  dev, p, t, c = llvm512(), 36, 2048, 32
  a, bm = rand(90, p, t, c), rand(91, p, t, c)
  out = Tensor(a, device=dev).transpose(1, 2) @ Tensor(bm, device=dev)
  k = the_kernel([out], {p, c}, t)
  opts = hand_coded_optimizations(k, Device[dev].renderer)
  ast = apply_opts(k, opts, Device[dev].renderer)
  threads = axes_of(ast, AxisType.THREAD)
  assert len(threads) == 1, opts
  loads = [u for u in ast.toposort() if u.op is Ops.LOAD and u.src[0].op is Ops.INDEX and reduce_axes(ast)[0] in u.src[0]._ranges]
  assert loads and all(threads[0] in ld.src[0]._ranges for ld in loads), opts
  ref = torch.from_numpy(a).transpose(1, 2) @ torch.from_numpy(bm)
  for d in (dev, c_cpu_device()):
    with Context(SPEC=2): tol((Tensor(a, device=d).transpose(1, 2) @ Tensor(bm, device=d)).numpy(), ref.numpy(), t)

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
@pytest.mark.parametrize("bits", [512, 256])
def test_a_constant_tables_rows_are_upcast_whole_and_the_big_input_streamed_along_its_lanes(bits: int):
  # Winograd's filter-gradient transform, dW = G^T dU G per (Cout, Cin): 9 x 36 constants @ 36 x (256 x 256), 9.4 MB of
  # dU. Its 3 x 3 taps (only the table varies along them) are the tile's rows under 16 lanes, so each vector load of dU
  # serves all 9; as loops, each tap read dU's tile again. The lanes' loop goes innermost (dU is read once: streamed).
  # Measured in ResNet-18 b32 128x128's step (Intel Xeon, 2 threads, alternated): its 512-channel transform's 3
  # launches 10.4 -> 6.7 ms, the 256-channel one's 2.8 -> 1.6. On AVX2 (96 lanes) the 9 rows fit under one register's 8
  # lanes, not 16 (AMD Zen 2, the 512-channel one 14.7 -> 8.3 ms)
  dev, p, c = llvm_cpu_device_at(bits), 36, 256
  lanes = 16 if bits == 512 else 8
  du = rand(92, p, 1, c, c)
  def dw(d: str) -> Tensor:
    t = tinygrad_tensor._winograd_lmat(Tensor(du, device=d), tinygrad_tensor._WINO_G, 2, transpose=True)
    return t.permute(1, 3, 2, 0).reshape(c, c, 3, 3)
  k = the_kernel([dw(dev)], {c, 3}, p)
  opts = hand_coded_optimizations(k, Device[dev].renderer)
  ast = apply_opts(k, opts, Device[dev].renderer)
  assert sorted(axis_size(r) for r in axes_of(ast, AxisType.UPCAST)) == [3, 3, lanes], opts
  loops = [r for r in output_axes(ast) if r.arg[-1] is AxisType.LOOP and (axis_size(r) or 0) > 1]
  # dU's load: the one the output loops read (the table's varies along the taps and the reduce only)
  big = next(u for u in ast.toposort() if u.op is Ops.LOAD and u.src[0].op is Ops.INDEX and loops[-1] in u.src[0]._ranges)
  assert index_stride(big.src[0].src[1].get_idx(), loops[-1]) == lanes, opts
  g = np.array(tinygrad_tensor._WINO_G, dtype=np.float64)
  ref = np.einsum("ai,abxy,bj->yxij", g, du[:, 0].reshape(6, 6, c, c).astype(np.float64), g)
  for d in (dev, c_cpu_device()):
    with Context(SPEC=2): tol(dw(d).numpy(), ref, p)

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
@pytest.mark.parametrize("mat", ["AT", "BT"])
def test_a_constant_table_of_two_register_blocks_of_rows_takes_8_lanes_by_8_rows_unpacked_on_avx2(mat: str):
  # Winograd's output transform (16 x 36 constants @ 36 x (tiles x channels)) on AVX2 (16 registers): the 16 lanes
  # took 4 of the table's 16 rows and PACK copied the tiles' panel (36 rows 256 KiB apart here) for the 4 row blocks
  # that read it. Now 8 lanes by 8 rows, the rows' loop innermost, no PACK. Measured in ResNet-18 b32 128x128's step
  # (AMD Zen 2, 2 threads, alternated): over 2048 tiles x 64 channels (8 launches) 20.6 -> 14.2 ms. The input
  # transform's 36 rows keep their 16 lanes by 6 rows (8 x 12 was slower there). Values against numpy under SPEC=2 on
  # LLVM and C
  dev, t, c = llvm_cpu_device_at(256), 1024, 64
  m = {"AT": tinygrad_tensor._WINO_AT, "BT": tinygrad_tensor._WINO_BT}[mat]
  q = len(m) ** 2
  x = rand(93, 36, t, c)
  def tr(d: str) -> Tensor: return tinygrad_tensor._winograd_lmat(Tensor(x, device=d), m, 2)
  k = the_kernel([tr(dev)], {q, t, c}, 36)
  opts = hand_coded_optimizations(k, Device[dev].renderer)
  ast = apply_opts(k, opts, Device[dev].renderer)
  ups = sorted(axis_size(r) or 0 for r in axes_of(ast, AxisType.UPCAST))
  if mat == "BT": assert ups == [6, 16] and any(o.op is OptOps.PACK for o in opts), opts
  else:
    assert ups == [8, 8] and not any(o.op is OptOps.PACK for o in opts), opts
    # the rows' loop (2 blocks: only the table's load varies along it) innermost
    loops = [r for r in output_axes(ast) if r.arg[-1] is AxisType.LOOP and (axis_size(r) or 0) > 1]
    assert axis_size(loops[-1]) == 2, opts
    lds = [u for u in ast.toposort() if u.op is Ops.LOAD and u.src[0].op is Ops.INDEX]
    assert len(lds) == 2 and sum(loops[-1] in ld.src[0]._ranges for ld in lds) == 1, opts
  kr = np.kron(np.array(m, dtype=np.float64), np.array(m, dtype=np.float64))
  ref = np.einsum("qp,ptc->qtc", kr, x.astype(np.float64))
  for d in (dev, c_cpu_device()):
    with Context(SPEC=2): tol(tr(d).numpy(), ref, 36)

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
def test_a_constant_tables_row_blocks_go_inside_a_mid_size_inputs_loops():
  # Winograd's input transform over 32 tiles x 512 channels (36 x 36 constants @ 36 x (32 x 512)): its input, 1 MiB,
  # is under BIG_OPERAND_BYTES but over L2's share (PACK_MAX_BYTES). Its 6 row blocks were the outermost loop, split
  # across the threads, so each thread read all of the input 3 times; now the rows' loop goes inside the tiles' (the
  # input's loops) and the threads split the tiles. Measured in ResNet-18 b32 128x128's step (AMD Zen 2, 2 threads,
  # alternated): 4.85 -> 3.89 ms. Values against numpy under SPEC=2 on LLVM and C
  dev, t, c = llvm_cpu_device_at(256), 32, 512
  x = rand(94, t, c, 4, 4)
  def tr(d: str) -> Tensor: return tinygrad_tensor._winograd_input(Tensor(x, device=d), 2, [(1, 1), (1, 1)], (1, 1), 1)
  k = the_kernel([tr(dev)], {36, t, c}, 36)
  opts = hand_coded_optimizations(k, Device[dev].renderer)
  ast = apply_opts(k, opts, Device[dev].renderer)
  # the loops (each thread's part): its 16 tiles, the 6 row blocks, the 32 blocks of 16 channels (the rows' loop stays
  # outside the channels': past an innermost loop of more than 4, _stream_once's rule)
  loops = [axis_size(r) for r in output_axes(ast) if r.arg[-1] is AxisType.LOOP and (axis_size(r) or 0) > 1]
  assert loops == [t // 2, 6, c // 16], opts
  bt = np.array(tinygrad_tensor._WINO_BT, dtype=np.float64)
  win = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1))).transpose(2, 3, 0, 1).reshape(36, t, c)
  ref = np.einsum("qp,ptc->qtc", np.kron(bt, bt), win).reshape(36, 1, t, c)
  for d in (dev, c_cpu_device()):
    with Context(SPEC=2): tol(tr(d).numpy(), ref, 36)

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
@pytest.mark.parametrize("bits", [512, 256])
@pytest.mark.parametrize("b, k, stride, hw", [(16, 3, 1, 4), (32, 1, 2, 8)])
def test_a_packed_conv_over_4x4_pixels_takes_its_rows_from_the_pixels_not_the_batch(b: int, k: int, stride: int, hw: int,
                                                                                   bits: int):
  # a conv over 4x4 output pixels (ResNet-18 b32's last stage: a 3x3 conv, a 1x1 stride-2 one): its rows were 8 of the
  # batch, whose images are a page apart (one cache set for every row), the pixels' axes (4) too short for the rows'
  # rule; now 8 pixels (4 x, 2 y). Measured in ResNet-18 b32 128x128's step (Intel Xeon, 2 threads, alternated): the
  # 3x3 12.6 -> 9.1 ms, the 1x1 2.1 -> 1.2. On AVX2 (96 lanes of budget: 6 rows of 16) the 4 pixels of a row, where the
  # rows were 4 of the batch (AMD Zen 2, in the step: 11.0 -> 8.0 and 1.90 -> 1.34 ms). Values against torch under SPEC=2
  dev, c = llvm_cpu_device_at(bits), 256
  outs, refs = conv_step(dev, b, c, c, hw, k=k, stride=stride)
  kern = the_kernel([outs[0]], {b, c, 4}, k * k * c)
  opts = hand_coded_optimizations(kern, Device[dev].renderer)
  sizes = out_sizes(kern)
  batch = sizes.index(b)
  assert not any(o.op is OptOps.UPCAST and o.axis == batch for o in opts), opts
  ast = apply_opts(kern, opts, Device[dev].renderer)
  assert sorted(axis_size(r) or 0 for r in axes_of(ast, AxisType.UPCAST)) == ([2, 2, 4, 16] if bits == 512 else [4, 16]), opts
  with Context(SPEC=2): tol(outs[0].numpy(), refs[0], k * k * c)

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
def test_a_conv_input_gradient_over_4x4_pixels_takes_its_rows_from_the_pixels_not_the_batch_on_avx2():
  # a 3x3 conv's input gradient over 4x4 pixels at batch 8 (256 channels): dy^T (8 x 16 pixels, Cout) @ the filters
  # (Cout, Cin x 9), its lanes along the filters' contiguous Cin x 9. Its rows were 4 of the batch (dy's images a page
  # apart), now the 4 pixels of a row (AVX2's budget holds 6 rows of 16 lanes). Measured in ResNet-18 b8 64x64's step
  # (AMD Zen 2, 2 threads, alternated): its 3 launches 5.86 -> 3.30 ms. Values against torch under SPEC=2
  dev, b, c, hw = llvm_cpu_device_at(256), 8, 256, 4
  x, w = rand(50, b, c, hw, hw), rand(51, c, c, 3, 3) / (9 * c) ** 0.5
  tx = Tensor(x, device=dev, requires_grad=True)
  out = tx.conv2d(Tensor(w, device=dev), padding=1)
  g = rand(52, *out.shape)
  (out * Tensor(g, device=dev)).sum().backward()
  assert tx.grad is not None
  kern = the_kernel([tx.grad], {b, hw, 9 * c}, c)
  opts = hand_coded_optimizations(kern, Device[dev].renderer)
  batch = out_sizes(kern).index(b)
  assert not any(o.op is OptOps.UPCAST and o.axis == batch for o in opts), opts
  ast = apply_opts(kern, opts, Device[dev].renderer)
  assert sorted(axis_size(r) or 0 for r in axes_of(ast, AxisType.UPCAST)) == [4, 16], opts
  rx = torch.from_numpy(x).requires_grad_()
  (torch.nn.functional.conv2d(rx, torch.from_numpy(w), padding=1) * torch.from_numpy(g)).sum().backward()
  assert rx.grad is not None
  with Context(SPEC=2): tol(tx.grad.numpy(), rx.grad.numpy(), 9 * c)

@pytest.mark.skipif(not HAS_LLVM, reason="the LLVM path needs llvmlite (the llvm extra)")
@pytest.mark.parametrize("cin, cout, k", [(3, 32, 3), (32, 3, 1)])
def test_a_weight_gradient_into_few_outputs_takes_its_lanes_along_the_pixels(cin: int, cout: int, k: int):
  # the UNet's first and last convs' weight gradients (3 -> 32 channels 3x3, 32 -> 3 1x1, over batch 8 of 64x64): an
  # outer product summed over 32768 pixels that both operands read with stride 1 into 864 or 96 outputs. The packed
  # lanes' tile took 16 output channels 4096 floats apart; now the pixels' innermost axis is unrolled by 16 into vector
  # accumulators under a tile of 8 x 3 (8 output channels x 3 taps) or 3 x 8 accumulators. Measured in the UNet's step
  # (Intel Xeon, 2 threads, alternated): 1.75 -> 1.00 ms and 1.14 -> 0.17. Values against torch under SPEC=2
  dev, b, hw = llvm512(), 8, 64
  outs, refs = conv_step(dev, b, cin, cout, hw, k=k)
  kern = the_kernel([outs[1]], {cout, cin} | ({k} if k > 1 else set()), b * hw * hw)
  opts = hand_coded_optimizations(kern, Device[dev].renderer)
  assert Opt(OptOps.UNROLL, 2, 16) in opts, opts
  ast = apply_opts(kern, opts, Device[dev].renderer)
  assert sorted(axis_size(r) or 0 for r in axes_of(ast, AxisType.UPCAST)) == [3, 8], opts
  assert [axis_size(r) for r in axes_of(ast, AxisType.UNROLL)] == [16], opts
  with Context(SPEC=2): tol(outs[1].numpy(), refs[1], b * hw * hw)
