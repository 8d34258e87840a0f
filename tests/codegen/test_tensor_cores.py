"""Tensor cores: the table's layouts against the ISA formulas, the TC opt, the rendered instruction (NVRTC + ptxas for
sm_80/89/90, llvmlite for gfx1100/gfx1201/gfx942), and matmuls run on the PYTHON backend under each EMULATE target,
whose WMMA reads each lane's registers with the hardware layout (a layout bug is a wrong value there)."""
import dataclasses
import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.device import Device
from tinygrad.helpers import Context
from tinygrad.uop import Ops, hooks
from tinygrad.uop.ops import UOp
from tinygrad.codegen import get_program
from tinygrad.codegen.opt import Opt, OptOps, KernelOptError, apply_opts
from tinygrad.engine.realize import run_schedule
from tinygrad.renderer.tensor_cores import TENSOR_CORES, NV_TENSOR_CORES, AMD_TENSOR_CORES, Layout, TensorCore
from tinygrad.runtime.ops_python import get_target, EmulatedKernelError

EMULATIONS = ["NV", "AMD_GFX1100", "AMD_GFX1201", "AMD_GFX942"]
TOL = {dtypes.float16: 2e-2, dtypes.bfloat16: 2e-2, dtypes.fp8e4m3: 1e-5, dtypes.fp8e5m2: 1e-5}

# ---- the table against the ISA's own formulas (written here independently of the table's bit weights) ----

def _ptx_m16n8k16(which: str, lane: int, i: int) -> tuple[int, int]:
  g, t = lane >> 2, lane % 4
  if which == "A": return (g if i in (0, 1, 4, 5) else g + 8), t * 2 + (i & 1) + (8 if i >= 4 else 0)
  if which == "B": return t * 2 + (i & 1) + (8 if i >= 2 else 0), g
  return (g if i < 2 else g + 8), t * 2 + (i & 1)

def _ptx_m16n8k32(which: str, lane: int, i: int) -> tuple[int, int]:
  g, t = lane >> 2, lane % 4
  if which == "A": return (g if i < 4 or 8 <= i < 12 else g + 8), t * 4 + (i & 3) + (16 if i >= 8 else 0)
  if which == "B": return t * 4 + (i & 3) + (16 if i >= 4 else 0), g
  return _ptx_m16n8k16("C", lane, i)

def _rdna3(which: str, lane: int, i: int) -> tuple[int, int]:
  if which == "A": return lane % 16, i
  if which == "B": return i, lane % 16
  return 2 * i + lane // 16, lane % 16

def _rdna4(which: str, lane: int, i: int) -> tuple[int, int]:
  # NOTE: the calculator's gfx1201 equations: A[i][k] and B[k][j] sit in lane 16 (k // 4 % 2) + i (or j), VGPR
  # 2 (k // 8) + (k // 2 % 2), half k % 2; element i of the 8-wide vector is VGPR i // 2, half i % 2
  vgpr, half = i // 2, i % 2
  k = 8 * (vgpr // 2) + 2 * (vgpr % 2) + half + 4 * (lane // 16)
  if which == "A": return lane % 16, k
  if which == "B": return k, lane % 16
  return 8 * (lane // 16) + i, lane % 16

def _cdna3(which: str, lane: int, i: int) -> tuple[int, int]:
  if which == "A": return lane % 16, 4 * (lane // 16) + i
  if which == "B": return 4 * (lane // 16) + i, lane % 16
  return 4 * (lane // 16) + i, lane % 16

def _isa(tc: TensorCore):
  if tc.name.startswith("mma.m16n8k16"): return _ptx_m16n8k16
  if tc.name.startswith("mma.m16n8k32"): return _ptx_m16n8k32
  return {"gfx1100": _rdna3, "gfx1201": _rdna4, "gfx942": _cdna3}[tc.name.split(".")[0]]

@pytest.mark.parametrize("name", sorted(TENSOR_CORES))
def test_table_layout_matches_the_isa_formulas(name):
  tc, isa = TENSOR_CORES[name], _isa(TENSOR_CORES[name])
  for which, lay, n in (("A", tc.layout_a, tc.elements_per_thread[0]), ("B", tc.layout_b, tc.elements_per_thread[1]),
                        ("C", tc.layout_c, tc.elements_per_thread[2])):
    for lane in range(tc.threads):
      for i in range(n): assert lay.coords(lane, i) == isa(which, lane, i), (name, which, lane, i)

def test_table_rejects_a_layout_that_misses_cells():
  bad = Layout((0, 0, 1, 2, 4), (2, 4, 0, 0, 0), (0, 0), (1, 1))  # two element bits on the same column bit
  with pytest.raises(ValueError, match="does not cover"):
    dataclasses.replace(TENSOR_CORES["mma.m16n8k16.f32.f16.f16.f32"], layout_c=bad)

def test_wave_sizes_per_target():
  assert {tc.threads for tcs in NV_TENSOR_CORES.values() for tc in tcs} == {32}
  assert {tc.threads for tc in AMD_TENSOR_CORES["gfx1100"] + AMD_TENSOR_CORES["gfx1201"]} == {32}
  assert {tc.threads for tc in AMD_TENSOR_CORES["gfx942"]} == {64}
  assert not any(tc.dtype_in in (dtypes.fp8e4m3, dtypes.fp8e5m2) for tc in NV_TENSOR_CORES["sm_80"])

# ---- matmuls on the PYTHON backend under each emulation ----

@pytest.fixture
def programs():
  got: list = []
  def grab(ast, p, renderer): got.append(p)
  hooks.register("compiled", grab)
  yield got
  hooks.unregister("compiled", grab)

def _operands(m: int, k: int, n: int, dt, seed: int):
  rng = np.random.default_rng(seed)
  an, bn = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
  a, b = Tensor(an, device="PYTHON").cast(dt).realize(), Tensor(bn, device="PYTHON").cast(dt).realize()
  return a, b, a.cast(dtypes.float32).numpy().astype(np.float64), b.cast(dtypes.float32).numpy().astype(np.float64)

def _check_matmul(emu: str, dt, shape: tuple[int, int, int], programs: list, out_dt=None, seed: int = 0):
  m, k, n = shape
  with Context(EMULATE=emu):
    a, b, ar, br = _operands(m, k, n, dt, seed)
    out = (a @ b) if out_dt is None else (a.reshape(m, 1, k) * b.T.reshape(1, n, k)).sum(-1, dtype=out_dt)
    got = out.cast(dtypes.float32).numpy()
  assert any(u.op is Ops.WMMA for p in programs for u in p.uops), f"{emu} {dt} {shape}: no WMMA in the programs"
  ref = ar @ br
  # NOTE: the result is rounded to the output dtype (half for a half matmul); fp8 products are exact in float32
  tol = TOL[dt] if out_dt is None else (2e-2 if out_dt is dtypes.float16 else 1e-5)
  np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * np.sqrt(k))

SHAPES = [(16, 16, 16), (32, 48, 16), (20, 24, 12), (5, 33, 7)]

@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16], ids=lambda d: d.name)
@pytest.mark.parametrize("emu", EMULATIONS)
def test_matmul_on_tensor_cores_under_emulation(emu, dt, shape, programs):
  _check_matmul(emu, dt, shape, programs)

@pytest.mark.parametrize("shape", [(16, 32, 8), (20, 40, 12)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dt", [dtypes.fp8e4m3, dtypes.fp8e5m2], ids=lambda d: d.name)
def test_fp8_matmul_on_nv_tensor_cores(dt, shape, programs):
  _check_matmul("NV", dt, shape, programs, out_dt=dtypes.float32)

def test_half_accumulate_on_nv_tensor_cores(programs):
  _check_matmul("NV", dtypes.float16, (16, 32, 16), programs, out_dt=dtypes.float16)
  assert any(u.op is Ops.WMMA and u.arg[0] == "mma.m16n8k16.f16.f16.f16.f16" for p in programs for u in p.uops)

def test_fp8_has_no_tensor_core_on_sm80():
  with Context(EMULATE="NV", NV_ARCH="sm_80"):
    r = Device["PYTHON"].renderer
    assert r.arch == "NV:sm_80" and not any(tc.dtype_in is dtypes.fp8e4m3 for tc in r.tensor_cores)

def test_tc0_keeps_matmuls_off_the_tensor_cores(programs):
  with Context(EMULATE="NV", TC=0):
    a, b, ar, br = _operands(16, 16, 16, dtypes.float16, 1)
    got = (a @ b).cast(dtypes.float32).numpy()
  assert programs and not any(u.op is Ops.WMMA for p in programs for u in p.uops)
  np.testing.assert_allclose(got, ar @ br, rtol=2e-2, atol=2e-2 * 4)

def test_batched_matmul_and_fused_epilogue_on_tensor_cores(programs):
  with Context(EMULATE="AMD_GFX942"):
    rng = np.random.default_rng(3)
    an, bn, cn = (rng.standard_normal(s).astype(np.float32) for s in ((3, 16, 32), (3, 32, 16), (16,)))
    a, b = Tensor(an, device="PYTHON").cast(dtypes.half), Tensor(bn, device="PYTHON").cast(dtypes.half)
    out = ((a @ b).cast(dtypes.float32) + Tensor(cn, device="PYTHON")).relu().numpy()
  assert any(u.op is Ops.WMMA for p in programs for u in p.uops)
  ref = np.maximum(an.astype(np.float16).astype(np.float64) @ bn.astype(np.float16).astype(np.float64) + cn, 0)
  np.testing.assert_allclose(out, ref, rtol=2e-2, atol=2e-2 * 6)

# ---- a wrong layout in codegen is a wrong value: the emulator keeps the hardware's layout ----

def _run_with(renderer, ast, bufs):
  dev = Device["PYTHON"]
  p = get_program(ast, renderer)
  assert any(u.op is Ops.WMMA for u in p.uops)
  prg = dev.runtime(p.name, dev.compiler.compile(p.src))
  for b in bufs:
    if not b.is_allocated(): b.allocate()
  gs, ls = p.launch_dims()
  prg(*[bufs[i]._buf for i in p.globals], global_size=gs, local_size=ls or (1, 1, 1))
  return bufs[0].numpy().view(np.float16).astype(np.float64)

def _swap_lane_bits(lay: Layout) -> Layout:
  # NOTE: lanes 0 and 1 trade places along one axis: a plausible off-by-a-bit layout bug
  return Layout((lay.lane_row[1], lay.lane_row[0], *lay.lane_row[2:]), (lay.lane_col[1], lay.lane_col[0], *lay.lane_col[2:]),
                lay.elem_row, lay.elem_col)

@pytest.mark.parametrize("emu,which", [("NV", "layout_a"), ("NV", "layout_c"), ("AMD_GFX1201", "layout_b"),
                                       ("AMD_GFX942", "layout_a"), ("AMD_GFX1100", "layout_c")])
def test_patched_layout_gives_wrong_values(emu, which, monkeypatch):
  with Context(EMULATE=emu):
    a, b, ar, br = _operands(16, 32, 16, dtypes.float16, 7)
    sched = (a @ b).schedule()
    run_schedule(sched[:-1])
    si = sched[-1]
    base = get_target(emu).base
    good = _run_with(Device["PYTHON"].renderer, si.ast, list(si.bufs))
    np.testing.assert_allclose(good.reshape(16, 16), ar @ br, rtol=2e-2, atol=0.2)
    tc = next(t for t in base.tensor_cores if t.dtype_in is dtypes.float16)
    bad = dataclasses.replace(tc, **{which: _swap_lane_bits(getattr(tc, which))})
    monkeypatch.setattr(base, "tensor_cores", (bad,))
    wrong = _run_with(Device["PYTHON"].renderer, si.ast, list(si.bufs))
  assert not np.allclose(wrong.reshape(16, 16), ar @ br, rtol=2e-2, atol=0.2)

def test_replicated_lanes_must_agree_on_rdna3(monkeypatch):
  # RDNA3 reads A and B from lanes 0-15 and 16-31 alike: a layout that loads different rows into the copies is caught
  with Context(EMULATE="AMD_GFX1100"):
    a, b, _, _ = _operands(16, 16, 16, dtypes.float16, 9)
    sched = (a @ b).schedule()
    run_schedule(sched[:-1])
    base = get_target("AMD_GFX1100").base
    tc = next(t for t in base.tensor_cores if t.dtype_in is dtypes.float16)
    lay = tc.layout_a
    # lane bit 4 (the copy) now moves along K by one and element bit 0 does nothing: the layout still covers the
    # matrix, but lanes 16-31 load other columns than lanes 0-15
    bad = dataclasses.replace(tc, layout_a=Layout(lay.lane_row, (0, 0, 0, 0, 1), lay.elem_row, (0, 2, 4, 8)))
    monkeypatch.setattr(base, "tensor_cores", (bad,))
    with pytest.raises(EmulatedKernelError, match="needs every copy equal"):
      _run_with(Device["PYTHON"].renderer, sched[-1].ast, list(sched[-1].bufs))

# ---- the opt ----

def test_tc_opt_refuses_what_it_cannot_compute():
  r = get_target("NV").base
  a = Tensor(np.ones((16, 16), np.float32))
  ast = (a @ a).schedule()[-1].ast
  with pytest.raises(KernelOptError, match="no ADD reduce of a product"):
    apply_opts(ast, [Opt(OptOps.TC, 0, "mma.m16n8k16.f32.f16.f16.f32")], r)
  h = Tensor(np.ones((16, 16), np.float16))
  hast = (h @ h).schedule()[-1].ast
  with pytest.raises(KernelOptError, match="not one of the renderer's tensor cores"):
    apply_opts(hast, [Opt(OptOps.TC, 0, "gfx942.mfma.f32.16x16x16.f16")], r)
  opted = apply_opts(hast, [Opt(OptOps.TC, 0, "mma.m16n8k16.f32.f16.f16.f32")], r)
  with pytest.raises(KernelOptError, match="not allowed after a TC opt"):
    apply_opts(opted, [Opt(OptOps.UNROLL, 0, 2)], r)

def test_tc_program_rebuilds_from_its_applied_opts():
  r = get_target("AMD_GFX1201").base
  h = Tensor(np.ones((24, 40), np.float16))
  ast = (h @ h.T).schedule()[-1].ast
  p = get_program(ast, r)
  assert p.applied_opts and p.applied_opts[0].op is OptOps.TC
  assert get_program(ast, r, p.applied_opts).src == p.src

# ---- the program spec checks a WMMA against the table ----

def test_program_spec_checks_wmma_fragments():
  from spec import type_verify, SpecError, program_spec
  tc = TENSOR_CORES["gfx942.mfma.f32.16x16x16.f16"]
  a, c = UOp.const(dtypes.half.vec(4), 1.0), UOp.const(dtypes.float.vec(4), 0.0)
  type_verify([a, c, UOp(Ops.WMMA, c.dtype, (a, a, c), arg=(tc.name,))], program_spec)
  wide = UOp.const(dtypes.half.vec(8), 1.0)
  with pytest.raises(SpecError, match="the instruction takes"):
    type_verify([a, wide, c, UOp(Ops.WMMA, c.dtype, (wide, a, c), arg=(tc.name,))], program_spec)
  with pytest.raises(SpecError, match="must be \\(name,\\) of a tensor core"):
    type_verify([a, c, UOp(Ops.WMMA, c.dtype, (a, a, c), arg=("WMMA_8_8_8",))], program_spec)

def test_heuristics_block_warps_on_big_tile_grids(programs):
  r = get_target("NV").base
  h = Tensor(np.ones((128, 64), np.float16))
  p = get_program((h @ h.T).schedule()[-1].ast, r)
  assert [o.op for o in p.applied_opts] == [OptOps.TC, OptOps.LOCAL, OptOps.LOCAL, OptOps.UPCAST]
  assert p.local_size == [32, 2, 2] and sum(u.op is Ops.WMMA for u in p.uops) == 2
  small = Tensor(np.ones((16, 16), np.float16))
  assert [o.op for o in get_program((small @ small).schedule()[-1].ast, r).applied_opts] == [OptOps.TC]
  _check_matmul("NV", dtypes.float16, (64, 32, 64), programs)
  assert any(p.local_size == [32, 2, 2] for p in programs)

def test_beam_candidates_include_the_tensor_cores():
  from tinygrad.codegen.search import candidates
  from tinygrad.codegen.program import prepare_kernel
  r = get_target("AMD_GFX1201").base
  h = Tensor(np.ones((32, 32), np.float16))
  ast = prepare_kernel((h @ h).schedule()[-1].ast)
  first = candidates(ast, r, [[]], set())
  assert [Opt(OptOps.TC, 0, "gfx1201.wmma.f32.16x16x16.f16")] in first
  # TC is a first opt only: no beam member extends a kernel by it later
  assert not any(o[-1].op is OptOps.TC for o in candidates(ast, r, [m for m in first if m[0].op is OptOps.LOCAL][:2], set()))
