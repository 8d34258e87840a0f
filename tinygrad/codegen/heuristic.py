"""Hand-coded optimisations: the default opts for a kernel when BEAM is off.

Every opt is tried on the kernel as it stands and kept only if it applies: an opt that does not fit raises
KernelOptError, which is caught here, so the heuristics never fail a compile.
"""
from __future__ import annotations
from collections.abc import Callable, Iterable
from typing import Any
from tinygrad.codegen.opt import Opt, OptOps, KernelOptError, apply_opt, output_axes, reduce_axes, axis_size, axes_of
from tinygrad.codegen.opt import max_threads, packable_loads, panel_ranges, index_stride, pack_operand, \
  fills_as_lanes, PACK_MAX_BYTES, PACK_OPERAND, MAX_UPCAST
from tinygrad.codegen.opt import MAX_UPCAST_TOTAL
from tinygrad.codegen.grid import LOCAL_TYPES, grid_plan, is_identity
from tinygrad.renderer import Renderer
from tinygrad.helpers import prod, TC
from tinygrad.uop import Ops, AxisType, GroupOp
from tinygrad.uop.ops import UOp
from tinygrad.dtype import DType, PtrDType, dtypes

# a kernel must do at least this much work (iterations of its innermost body) before threads pay for their start-up.
# With Python's thread pool a launch on two threads waited ~90 us for the OS to wake the other (this 2-core VM), and the
# threshold was 1 << 19; the C pool's workers spin between launches (runtime/support/host_pool.py: ~4 us a launch).
# Measured then (LLVM path, 2 threads, one process each): an LLM decode (Q8_0, 8 layers) 71.8 tok/s at 1 << 19, 76.7 at
# 1 << 17, 76.6 at 1 << 15; bench/models.py's ResNet-18, D256 block and GPT-2 rows within 3% of each other at all three
THREAD_MIN_WORK = 1 << 17
ROOM_ROWS_MIN_REDUCE = 64  # _upcast_reuse_axes' 2 more rows only over a reduce this long
MAX_HEURISTIC_UPCAST = 32
# the most lanes of a CPU register tile (_tile_budget): 8 rows x 48 lanes, 24 accumulators of 16 lanes (AVX-512 has 32
# registers); a renderer that says how many vector registers it has gets 3/4 of them (AVX2: 12 of 16, 96 lanes)
MAX_CPU_UPCAST = 384
WIDE_MIN_REDUCE = 256  # the 48-lane tile (_wide_tile) only for reduces at least this long
PACKED_32_MIN_REDUCE = 128  # the packed lanes of a conv (_upcast_for_reuse) take 32 for reduces at least this long
BIG_BLOCK_MIN_WORK = 1 << 24
# a CPU kernel from this much work up to BIG_BLOCK_MIN_WORK gets one vector register of lanes by 4 rows (MID_TILE lanes
# in all; _upcast_reuse_axes), where smaller ones get 4 x 4 and a reduce unrolled by 4
MID_BLOCK_MIN_WORK, MID_TILE = 1 << 20, 64
# KBLOCK: a reduce whose input rows are a multiple of a page apart is blocked into this many steps per block
PAGE_BYTES = 4096
KBLOCK_STEPS = 256
# a reduce this short or shorter keeps its output loops' own order (_reorder_for_reuse): its stores cost most
SHORT_REDUCE = 32
TRANSCENDENTAL = (Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.POW)
HEAVY_BODY = 24  # ALU ops in a reduce body above which it is not copied per lane
# GPU: threads that keep a big GPU busy (an H100 runs 132 SMs x 2048 threads; a quarter of that hides latency well
# enough for memory-bound kernels), the largest workgroup the heuristics pick, and the fewest blocks worth aiming for
GPU_TARGET_THREADS = 1 << 15
GPU_BLOCK = 256
GPU_MIN_BLOCKS = 128

class _Builder:
  """The kernel as opts are added: `try_opt` applies one or leaves everything as it was."""
  def __init__(self, ast: UOp, renderer: Renderer, may_widen: bool = True, even_tiles: bool = False,
               spare_threads: int = 0):
    self.ast, self.renderer = ast, renderer
    # spare_threads: an UPCAST is refused where it would leave no output axis that this many threads split evenly
    self.spare_threads = spare_threads
    self.opts: list[Opt] = []
    # may_widen: a 48-lane register tile may be tried (_wide_tile); wide: one was applied
    self.may_widen, self.wide = may_widen, False
    # even_tiles: the contiguous axis pads to an even number of 32-lane tiles (a multiple of 64), so THREAD splits it
    self.even_tiles = even_tiles
    # streamed: _stream_once moved a loop; _reorder_for_reuse leaves the order as it is then
    self.streamed = False
    # mid_lanes: a mid-size CPU kernel's vector axis took 16 lanes (_upcast_reuse_axes); its rows get MID_TILE's room
    self.mid_lanes = False
    # table_tile: _long_table_rows made the tile (one register's lanes by a long table's rows): no PACK of the big input
    self.table_tile = False
    # tile_blocked: _kblock_tile_stream blocked the reduce for L1: no PACK of a panel then
    self.tile_blocked = False
    # NOTE: once per kernel: opts never add or remove a transcendental, and the renderer is fixed
    self.tile_budget = _tile_budget(ast, renderer)
  def try_opt(self, opt: Opt) -> bool:
    try: ast = apply_opt(self.ast, opt, self.renderer, tuple(self.opts))
    except KernelOptError: return False
    if self.spare_threads and opt.op is OptOps.UPCAST and \
       not any((axis_size(r) or 0) % self.spare_threads == 0 for r in output_axes(ast)): return False
    self.ast = ast
    self.opts.append(opt)
    return True
  def try_upcasts(self, ups: list[tuple[UOp, int]]) -> bool:
    """UPCAST each output axis (found by its range id, where it is then) by its amount, in order: all of them, or
    none (everything as it was)."""
    before = (self.ast, list(self.opts))
    for r, amt in ups:
      i = next((i for i, o in enumerate(output_axes(self.ast)) if o.arg[0] == r.arg[0]), None)
      if i is None or not self.try_opt(Opt(OptOps.UPCAST, i, amt)):
        self.ast, self.opts = before
        return False
    return True
  def try_local(self, opt: Opt) -> bool:
    """try_opt for an opt that adds a local axis, kept only where every local axis keeps a workgroup dimension of its
    own (grid.py's identity plan): the heuristics never ask the lowering to merge or split them."""
    before = (self.ast, list(self.opts))
    if not self.try_opt(opt): return False
    if (plan := grid_plan(self.ast, LOCAL_TYPES, self.renderer.local_max)[1]) is not None and is_identity(plan):
      return True
    self.ast, self.opts = before
    return False
  def upcast_total(self) -> int:
    return int(prod(axis_size(r) or 1 for r in axes_of(self.ast, AxisType.UPCAST, AxisType.UNROLL)))

def _tile_budget(ast: UOp, renderer: Renderer) -> int:
  """The most upcast lanes of a CPU register tile: 3/4 of the renderer's vector registers as accumulators (the rest
  hold the vectors of one operand and a broadcast of the other) of float32 lanes each. A renderer that does not pick
  its own vectors (the C path) gets MAX_CPU_UPCAST, as measured on AVX-512. Measured on AVX2 (16 registers of 8 lanes,
  2 threads, a 1024^3 matmul with B packed): the AVX-512 tile, 8 rows x 32 lanes, 53.7 GFLOPS (its 32 accumulators
  spilled); 8 x 16 78-80, 4 x 16 117-135 (numpy 131); 768^3: 8 x 32 53, 6 x 16 129, 4 x 24 136"""
  regs, ws = renderer.vector_registers, renderer.acc_widths(dtypes.float32)
  # NOTE: a transcendental in the reduce body is a call (libm, libmvec) that clobbers every vector register: the
  # accumulators live in memory across it whatever the tile, so the register file sets no budget there. Measured on
  # AVX2 (2 threads, GPT-2's probabilities x V with its exp, 64 lanes): 1 row 4.8 ms, 2 rows 4.2, 4 rows 3.6
  if not regs or not ws or any(u.op in TRANSCENDENTAL for red in ast.toposort() if red.op is Ops.REDUCE
                               for u in red.src[0].toposort()): return MAX_CPU_UPCAST
  return regs * 3 // 4 * ws[0]

def _loads(ast: UOp) -> list[UOp]: return [u for u in ast.toposort() if u.op is Ops.LOAD and u.src[0].op is Ops.INDEX]
def _lane_loads(ast: UOp) -> list[UOp]:
  """The loads that vary along the UPCAST lanes already taken."""
  ups = axes_of(ast, AxisType.UPCAST)
  return [ld for ld in _loads(ast) if any(u in ld.src[0]._ranges for u in ups)]
def _broadcast_loads(ast: UOp, r: UOp) -> int:
  """How many loads do not depend on range r: each upcast lane of r reuses them (a register-blocking win)."""
  return sum(1 for ld in _loads(ast) if r not in ld.src[0]._ranges)

def _work(ast: UOp) -> int:
  """Iterations of the kernel's innermost body: the product of its range sizes (a symbolic one counts 1)."""
  return prod(axis_size(r) or 1 for r in ast.toposort() if r.op is Ops.RANGE)

def _store_idxs(ast: UOp) -> list[UOp]:
  """The index of every store to a buffer (a cut kernel has one a piece)."""
  return [u.src[0].src[1].get_idx() for u in ast.toposort() if u.op is Ops.STORE and u.src[0].op is Ops.INDEX]

def _store_idx(ast: UOp) -> UOp | None:
  return idxs[0] if (idxs := _store_idxs(ast)) else None

def _index_math(nodes: Iterable[UOp]) -> set[UOp]:
  """The nodes that compute the index or the gate of a load or store among `nodes` (its INDEX's sources, all below)."""
  return {y for x in nodes if x.op is Ops.INDEX for s in x.src[1:] for y in s.toposort()}

def _value_alu(nodes: Iterable[UOp], index_math: set[UOp]) -> int:
  """ALU ops among `nodes` that are not in `index_math` (_index_math: what computes a load's index or gate)."""
  return sum(1 for x in nodes if x.op in GroupOp.ALU and x not in index_math)

def _reduce_body_alu(ast: UOp, values_only: bool = False) -> int:
  """ALU ops in the longest reduce body of the kernel (0 without a reduce). values_only leaves out those that compute
  load indices and their gates (a padded window's bounds): each lane of an upcast copies the values' ops, where the
  index math of the lanes is shared."""
  def body(red: UOp) -> int:
    ops = red.src[0].toposort()
    return _value_alu(ops, _index_math(ops) if values_only else set())
  return max((body(u) for u in ast.toposort() if u.op is Ops.REDUCE), default=0)

def _heavy_reduce(ast: UOp) -> bool:
  """A reduce whose body is long (e.g. random numbers or transcendentals fused in): every lane copies all of it."""
  return _reduce_body_alu(ast) > HEAVY_BODY

def _upcast_for_reuse(b: _Builder) -> None:
  # matmul-like kernels: register blocking over the output axes that some input does not depend on. A big kernel on
  # the CPU (no locals) gets 16 lanes on the output's contiguous axis (one AVX-512 register of float32, two of AVX2) and
  # 8 on the other reuse axis, which the C compiler vectorizes; small kernels and GPU-style targets get 4x4 (the big
  # blocking costs seconds of compile time that a small kernel never earns back).
  if not reduce_axes(b.ast): return
  cpu = not b.renderer.has_local and _work(b.ast) >= BIG_BLOCK_MIN_WORK
  # NOTE: a matmul whose operands are both read along the reduce (A @ W^T) has no vector axis: the store's axis then
  any_vec = any(_vector_axis(b.ast, r) for r in output_axes(b.ast))
  # a big reduce with no vector axis at all (a conv over a few pixels, a conv's weight gradient): 16 lanes whose load
  # PACK makes a vector load (_packed_lanes_axis), the rest of the tile as below; as below when the panel does not fit
  if cpu and (lanes := _packed_lanes_axis(b)) is not None:
    axis, buf = lanes
    # NOTE: 32 lanes (two vector registers a row, as the contiguous axis of a matmul gets them) where the reduce is
    # long enough to pay for the bigger tile's stores, 16 where the axis or PACK's limit allows no more. Measured alone
    # (ResNet-18 b8 64x64, 2 threads, threads on the lanes' axis): the weight gradients of the 3x3 convs over 16x16,
    # 8x8 and 4x4 pixels (reduces of 2048, 512, 128) ~1.15 -> 0.75-0.79 ms with 32 lanes; that over 2x2 (a reduce of
    # 32) 1.6 -> 1.8 ms: kept at 16
    long = prod(axis_size(r) or 0 for r in reduce_axes(b.ast)) >= PACKED_32_MIN_REDUCE
    # NOTE: where 4 rows of 32 lanes do not fit (AVX2's 96 lanes), 32 lanes by 2 rows where the rows' loads are gated
    # along the reduce (a padded conv's input, a branch or select per row and step): 4 gated rows of 16 lanes cost more
    # than 2 of 32. Not where the 32 lanes' panel needs cache blocking that 16 do not (_kblock_to_fit). Measured alone
    # (AVX2, one thread, ResNet-18 b8 64x64): the 3x3 weight gradients over 16x16, 8x8 and 4x4 pixels 4.2 -> 2.7, 2.3 ->
    # 1.4, 3.8 -> 3.0 ms; the 3x3 convs over 8x8, 4x4 and 2x2 pixels 0.96-1.29x (the 64-channel one over 8x8 0.96-1.00,
    # the others faster). An input gradient's windows (their gates hoisted out of the reduce) are 15% slower with 2 rows
    # of 32: 16 by 4 there
    gated = _gated_row_loads(b.ast, axis)
    two_rows = 32 * 4 > b.tile_budget and 32 * 2 <= b.tile_budget and bool(gated)
    roomy = 32 * 4 <= b.tile_budget or two_rows  # 32 lanes where 4 rows still fit (not on AVX2)
    # NOTE: the taps as rows where the pixels' loop is short (_sliding_rows; measured on AVX2 only): 16 lanes by them.
    # Alone (one thread, ResNet-18 b8 64x64's 3x3 weight gradients): 2x2 pixels 4.0-4.2 -> 3.3-3.4 ms, 4x4 2.8 -> 2.3
    # NOTE: on 32 registers (AVX-512) the taps as rows only under a short reduce (a weight gradient over 2x2 pixels),
    # there with 32 lanes and 2 rows of the next reuse axis (wide_slide). Measured in ResNet-18 b8's step (2 threads,
    # AMD Zen 5, its 512-channel weight gradients' 3 launches, alternated in one process): 16 lanes x 8 input-channel
    # rows 3.8-4.7 ms, 32 x kx x 2 rows 2.3-2.5, 32 x kx x 4 rows 3.5, 32 x kx 3.0, 16 x kx x 4 rows 3.1-3.3. Over 4x4
    # pixels (a reduce of 128, 32 lanes by 8 rows: 1.7 ms) the taps as rows were slower (32 x kx x 2 rows 2.1, 16 x kx
    # x 4 rows 2.8)
    wide_slide = b.renderer.vector_registers >= 32 and not long and (axis_size(axis) or 0) % 32 == 0 and \
      32 * 3 * 2 <= b.tile_budget
    slide = _sliding_rows(b, axis, gated) if b.renderer.vector_registers == 16 or wide_slide else None
    wide_slide = wide_slide and slide is not None
    wide = (long and roomy and (axis_size(axis) or 0) % 32 == 0 and slide is None) or wide_slide
    for more in ((2, 1) if wide else (1,)):
      before = (b.ast, list(b.opts))
      i = output_axes(b.ast).index(axis)
      if b.try_opt(Opt(OptOps.UPCAST, i, 16)) and (more == 1 or b.try_opt(Opt(OptOps.UPCAST, i, more))):
        if slide is not None and not wide_slide:
          b.try_opt(Opt(OptOps.UPCAST, output_axes(b.ast).index(slide), axis_size(slide) or 0))
        elif slide is not None and more == 2 and \
             b.try_opt(Opt(OptOps.UPCAST, output_axes(b.ast).index(slide), axis_size(slide) or 0)):
          _two_rows_off_lanes(b, axis, buf)
        else:
          _upcast_reuse_axes(b, cpu, {axis.arg[0]}, any_vec)
          if b.upcast_total() == 16 * more: _short_rows(b)
        # NOTE: the panel is packed once per iteration of the output loops it depends on, so those go outermost
        # (_panel_loops_outer). One the innermost output loop reads would be copied again on every iteration of it and
        # reused by none: where its loops cannot move, the lanes stay unpacked (_pack_panel packs the other operand).
        # Measured alone (2 threads): a conv's input gradient over 2x2 pixels (its (ky, kx) loops innermost, the
        # weights' lanes varying with them) 3.2 ms packed, 1.6 unpacked, 1.1-1.2 with (ky, kx) outside the pixels and
        # the weights packed; over 4x4 pixels at batch 32 (the lanes on the batch, the upstream gradient's panel varying
        # with the pixels) 17.9-18.0 ms with the pixels inside the channel tiles, 12.5-12.6 outside them
        if not _panel_loops_outer(b, buf) and _inner_loop_reads(b, buf): return
        if _pack_lanes(b, buf) or (not (two_rows and more == 2) and _kblock_to_fit(b, buf) and _pack_lanes(b, buf)):
          return
      b.ast, b.opts = before
  _upcast_reuse_axes(b, cpu, set(), any_vec)

def _upcast_reuse_axes(b: _Builder, cpu: bool, done: set[int], any_vec: bool) -> None:
  """_upcast_for_reuse's register tile over the output axes not in `done` (range ids), best first."""
  packed = bool(done)  # the packed lanes' axis took the lanes (_packed_lanes_axis): the rows are what is left
  if packed and cpu and _short_pixel_rows(b, done): return
  while True:
    # NOTE: so are the rows under lanes along a vector axis (a 1x1 stride-2 conv's input gradient over 4x4 pixels, its
    # lanes on the weights' contiguous channels). Measured in ResNet-18 b32 128x128's step (AMD Zen 2, AVX2, 2
    # threads, alternated): 4 rows of the batch 1.80 ms, the 4 pixels of a row 1.21; b8's 3x3 convs' input gradients
    # over 4x4 pixels (3 launches) 5.86 -> 3.30. Not on the C path (no vector accumulators of its own): there the
    # 512-channel ones over 2x2 pixels went 7.4 -> 57.1 ms (b32's 1x1 over 4x4 12.9 -> 2.2)
    if cpu and done and not packed and b.upcast_total() >= 16 and _own_vector_accs(b) and _short_pixel_rows(b, done):
      return
    sidx = _store_idx(b.ast)
    # the loads that vary along the lanes already taken: an axis along which they are broadcast reuses them (a vector
    # load each) in every row, where one along which they vary reuses only the other operand
    lane_loads = _lane_loads(b.ast)
    cands = []
    for i, r in enumerate(output_axes(b.ast)):
      size = axis_size(r) or 0
      if r.arg[0] in done or size < 8 or (n := _broadcast_loads(b.ast, r)) == 0: continue
      # NOTE: the wide lanes go where the loads that vary along the axis are vector loads (a matmul's B columns); where
      # both axes have them (a weight gradient, dY^T X), by the fused value ops of the operand the other axis would
      # broadcast (_broadcast_value_cost): cheap ones (a bias add, a normalisation's scale and shift) go along the
      # lanes, vector ops once per 16 lanes, where in the broadcast operand each row computes them alone and moves the
      # result into a vector register (a shuffle, on a port the FMAs use) every reduce step; a transcendental (a fused
      # gelu) stays in the broadcast operand, computed once per row and reused by every lane. Then to the one whose
      # broadcast operand costs more index math per step (every lane reuses it); in a product into two axes, then to
      # the one whose operand is 4x the other's or more where the other stays in L2 (_rows_stay_cached: the rows'
      # operand is read again for every lane tile; an LSTM's (1024, 256) gate weight gradient over 32 x 16 tokens 1.88
      # -> 0.89 ms in its step with the lanes on its 2 MiB upstream gradient, (2000, 256) 2.88 -> 2.01); else to the
      # one whose operand walks
      # the reduce with the longer stride (the bigger matrix, whose rows a page or more apart alias in the cache: its
      # panel is the one PACK copies), and that axis loops outermost (below). Measured in the steps (bench/step_ab.py,
      # 2 threads, AVX-512, alternated): an attention's probabilities^T x (V + its bias) with the lanes on V's head
      # dimension, not on the probabilities' tokens, 1.85 -> 1.49 ms (D768 block), 0.70 -> 0.61 (D256); the UNet's
      # first 1x1 conv of a normalised 3-channel input 0.66 -> 0.24 ms with the lanes on its pixels. Alone: (X + b)^T
      # @ Y, (X * s)^T @ Y, (X * s + t)^T @ Y over 1024 steps into 512 x 768 1.27x, 1.40x, 1.34x faster with the lanes
      # on X's axis; g^T gelu(h) into 32 x 1024 (the gelu recomputed) 1.0-1.1 ms with the lanes on g's 32, 2.7-3.0 on
      # h's 1024
      vec = _vector_axis(b.ast, r)
      store = sidx is not None and index_stride(sidx, r) == 1
      # NOTE: rows whose loads are a multiple of a page apart (a conv's batch, 64 KiB apart) share their cache sets:
      # an axis whose rows are closer goes first (its pixel rows). Measured alone (2 threads): ResNet-18's 256-channel
      # conv over 8x8 pixels at batch 32, 8 pixel lanes by 8 channels, 4 batch rows 37-38 ms, 4 pixel rows 11.1-11.4
      # NOTE: the lanes' reuse decides only where everything before it ties, over the axis' size. Measured alone (AVX2,
      # 2 threads): Winograd's input transform (36 x 36 constants @ the tiles, lanes on 64 channels) 14.6 ms with 4
      # rows of 2,048 tiles, 5.0 ms with 6 rows of the 36 tile positions (16 x 6 lanes)
      reuse = sum(1 for ld in lane_loads if r not in ld.src[0]._ranges)
      cands.append((vec or (store and not any_vec), _broadcast_value_cost(b.ast, r) if vec else 0,
                    _reused_alu(b.ast, r) if vec else 0, vec and not done and _rows_stay_cached(b.ast, r),
                    _step_stride(b.ast, r) if vec else 0, -i if vec else 0, store, not _aliased_rows(b.ast, r), n,
                    reuse, size, i))
    if not cands: return
    contiguous, _, _, _, _, _, store, _, _, _, size, i = max(cands)
    ties = len({c[1:3] for c in cands if c[0]}) == 1
    # NOTE: both output axes of a weight gradient (dY^T X) read their operand with vector loads: the lanes' axis loops
    # outermost (SWAP), so the operand of the other axis is streamed once per 48 rows of the output rather than per 8,
    # and the lanes' panel is packed once per outer tile. Measured alone (2 threads, reduces of 8 x 128): a (768, 3072)
    # dW 54.3 ms with the lanes on the inner axis, 34.8 on the outer 768, 22.0 on the 3072 swapped outermost; (3072,
    # 768) 42.3 -> 26.4 ms
    outs = output_axes(b.ast)
    if cpu and not done and i != 0 and len(outs) == 2 and ties and all(_vector_axis(b.ast, r) for r in outs) and \
       b.try_opt(Opt(OptOps.SWAP, 0, i)):
      i = 0
    done.add(rid := output_axes(b.ast)[i].arg[0])
    # NOTE: a CPU kernel under BIG_BLOCK_MIN_WORK but not tiny (an LSTM step's 16 x 1024 @ 1024 x 256: 4.2M
    # multiply-adds) takes 16 lanes (a vector register) by 4 rows, not 4 x 4 with the reduce unrolled by 4. Measured
    # alone (2 threads, AMD Zen 5, LLVM) on that kernel: 4 x 4 0.141 ms, 63 ms to compile; 16 x 4 0.054, 78 ms; 16 x 8
    # 0.034, 397 ms; 32 x 8 0.025, 562 ms: the bigger tiles' compile pays only for a kernel launched thousands of times.
    # In the steps (bench/step_ab.py): the LSTM's 31 launches of it 0.15 -> 0.055 ms each, the UNet's Winograd
    # transforms at 32-64 channels 0.13-2.6 ms -> 0.06-1.3 (its step's launches 140.9 -> 132.5 ms), ResNet-18 b8's 3
    # such kernels 0.09-0.24 -> 0.05-0.10 ms
    heavy = _reduce_body_alu(b.ast, values_only=b.renderer.has_threads) > HEAVY_BODY
    mid = not cpu and not heavy and b.renderer.has_threads and not b.renderer.has_local and \
      MID_BLOCK_MIN_WORK <= _work(b.ast) < BIG_BLOCK_MIN_WORK
    # NOTE: the 16 lanes only on an axis its loads are vector loads along (not A @ W^T's store axis, whose W rows would
    # be gathered 16 at a time: a 16 x 256 @ (1024 x 256)^T in the LSTM's step 2.4 -> 14.6 ms)
    vec_lanes = mid and _vector_axis(b.ast, output_axes(b.ast)[i])
    amts: tuple[int, ...] = ((16, 8, 4) if contiguous else (8, 4)) if cpu else \
      ((16, 4, 2) if vec_lanes else (4, 2)) if mid else (4, 2)
    # NOTE: the rows of a weight gradient's tile (dY^T X, its lanes' axis swapped outermost, so the store runs along the
    # rows) under 48 lanes (3 vector registers a row) are 6: with 8, LLVM kept a third of the 24 accumulators on the
    # stack, loaded and stored on every reduce step (a matmul storing along its lanes did not). Measured alone (2
    # threads, AVX-512): the D768 block's (2304, 768) dW 21.0 -> 15.9 ms, (3072, 768) 28.7 -> 20.5, (768, 768) 5.54 ->
    # 4.40; 4 rows 18.0, 21.7, 4.77. Where 6 does not divide the axis, as before (4 rows: the D256 block's (768, 256)
    # 1.66 -> 1.52 ms, but (1024, 256) 2.32 -> 2.58)
    if cpu and done and store and b.upcast_total() == 48 and size % 6 == 0: amts = (6,)
    # NOTE: a small kernel's tile is 4 lanes where its values' ops are many, not where its index math is (Winograd's
    # input transform at batch 8 over 16x16 pixels, 64 channels, its reduce over a padded 6x6 window: 4 lanes 5.0 ms,
    # 1.4 ms with 4 tile positions by 4 lanes by 2 tiles)
    room = (b.tile_budget if cpu else 4 if heavy else MID_TILE if vec_lanes or (mid and b.mid_lanes) else
            MAX_HEURISTIC_UPCAST) // b.upcast_total()
    # NOTE: where the budget leaves room for fewer than 8 rows (AVX2's 16 registers: 12 accumulators, 6 rows of 16
    # lanes), 6 rows where 6 divides the axis, else 4 (_tile_budget has the measurements)
    if cpu and 4 <= room < 8: amts = (6, 4)
    # NOTE: lanes half a vector wide (an 8-pixel row on AVX-512's 16 float32 lanes) fill half a register each where
    # no row axis continues their run (a padded input's rows are 10 apart, not 8): the first row axis then takes a
    # whole vector's worth (16), so the accumulators pack into full vectors along it (a conv's output channels, over
    # the packed weights: llvm_vectorize.pack_accumulators), not into 8-lane halves, 32 of which spilled with the
    # operands. Measured in the steps (bench/step_ab.py, Intel Xeon, AVX-512, 2 threads, alternated): ResNet-18 b8
    # 64x64's 128-channel 3x3 convs over 8x8 pixels (3 launches), 8 channels x 4 pixel rows 3.9 ms (176 stack moves in
    # the kernel), 16 channels 2.2. Where the rows continue the run (the UNet's 1x1 convs over 8x8: rows 8 apart, 4 of
    # them make 2 full vectors) the rows stay: 16 channels there 0.17 -> 0.20 ms
    # (ResNet-18 b32's 1x1 stride-2 conv over 8x8, its lanes' loads 2 apart: 16 channels 0.67 -> 0.93 ms)
    if cpu and done and not contiguous and room >= 16 and size % 16 == 0 and _half_vector_lanes(b, done): amts = (16,)
    # NOTE: 2 rows under packed lanes whose reduce is short (a weight gradient over 2x2 pixels: 32 steps a tile) on a
    # 16-register renderer. Measured alone (AVX2, 2 threads, ResNet-18 b8 64x64's 3x3 weight gradients over 2x2 pixels):
    # 512 channels 16 lanes x 4 rows 2.8-2.9 ms, x 2 rows 2.0, x 1 row 2.6; 256 channels 2.2 -> 1.7
    if cpu and packed and b.renderer.vector_registers == 16 and \
       prod(axis_size(r) or 0 for r in reduce_axes(b.ast)) < PACKED_32_MIN_REDUCE: amts = (2,)
    # NOTE: 2 rows under 32 packed lanes where 4 do not fit (_upcast_for_reuse: AVX2's gated rows)
    if cpu and packed and 2 <= room < 4: amts = (2,)
    # NOTE: 2 more rows where the budget has room for 2-3 times the tile (16 lanes by 8 rows: 8 of AVX-512's 24
    # accumulators) and only the lanes' vector loads vary along the axis: each step's broadcasts (a 1x1 conv's 8
    # filter values) are then reused by twice the rows (the pixels of the next image row), for one more vector load.
    # Not where a broadcast operand varies along it (more rows of A in A @ B^T, each its own broadcast and stream: an
    # LSTM's logits 2.96 -> 3.17 ms), nor over short reduces (Winograd's transforms over 36 and 9 steps, 5-14% slower).
    # Measured in the steps (bench/step_ab.py, Intel Xeon, AVX-512, 2 threads, alternated): the UNet's 1x1 convs at 32
    # x 32 and 16 x 16 pixels 0.20-0.37 -> 0.17-0.29 ms each, its 10 changed kernels 4.13 -> 3.44 ms
    if cpu and not packed and 2 <= room < 4 and _vector_lanes(b) == 16 and \
       prod(axis_size(r) or 0 for r in reduce_axes(b.ast)) >= ROOM_ROWS_MIN_REDUCE and \
       _only_vector_loads_along(b, output_axes(b.ast)[i]): amts = (2,)
    got, untiled = None, (b.ast, list(b.opts))
    if cpu and contiguous and _wide_tile(b, i, size): continue
    # a target with masked vector loads keeps a padded axis' loads vector: the contiguous axis pads to 32 (16 lanes,
    # then 2 more below) rather than taking narrower blocks (measured on AVX-512: 1000 padded to 1024 and blocked 32x8
    # ran 1.8x numpy, 1000 blocked 8x8 0.45x; with the 32-lane axis even, THREAD also splits it)
    if cpu and contiguous and b.renderer.masked_loads and (size % 16 or (b.even_tiles and size % 64)) and 16 <= room:
      got = 16 if _pad_and_upcast(b, i, size, 16, 64 if b.even_tiles else 32) else None
    if got is None:
      got = next((amt for amt in amts if amt <= room and size % amt == 0 and b.try_opt(Opt(OptOps.UPCAST, i, amt))),
                 None)
      if vec_lanes and got == 16: b.mid_lanes = True
    # NOTE: padding only where no amount divides: without masked loads the padded lanes' gated loads are scalar
    # (measured: 1000 padded to 1024 runs at a sixth of 1000 blocked 8x8), but a 1023 matmul with no blocking at all is
    # 20x slower still. The contiguous axis pads to 32 (16 lanes, then 2 more below)
    # NOTE: not to 6 rows (AVX2): padded rows' broadcasts are gated loads. Measured (2 threads): 1024^3 padded to 6
    # rows 69 GFLOPS, 4 rows 117-135
    if got is None and cpu:
      got = next((amt for amt in amts if amt <= room and amt != 6 and
                  _pad_and_upcast(b, i, size, amt, 32 if contiguous and amt == 16 else amt)), None)
    # the contiguous axis of a big CPU kernel takes 2 more lanes: 32 (two cache lines of each input row per reduce step)
    # by 8 on the other axis is 256 accumulators; measured ~1.3x faster than 16x8 on a 1024 matmul (AVX-512 machine)
    # NOTE: an upcast of the whole axis retypes it, so it leaves the output axes; a split keeps it at index i
    if cpu and contiguous and got == 16 and _table_rows(b, rid, untiled): return
    kept = [r for r in output_axes(b.ast) if r.arg[0] == rid]
    if cpu and contiguous and got == 16 and kept:
      # NOTE: where a transcendental of each reduce step is shared by the axis' lanes (an attention's exp of a score,
      # shared by a head's values, fused into a matmul with V or K), the axis takes up to 4 x 16 lanes: each 16 lanes
      # fewer compute it once more. Measured on the probabilities x V of a causal attention (B=8 T=128 H=4, a head of
      # 64, 2 threads, alone): 32 lanes 1.99 ms, 64 lanes 1.31 ms
      rest = axis_size(kept[0]) or 0
      if _reused_transcendental(b.ast, kept[0]):
        more = next((m for m in (4, 3, 2) if rest % m == 0 and m * b.upcast_total() <= b.tile_budget), 0)
        if more: b.try_opt(Opt(OptOps.UPCAST, i, more))
      # NOTE: 32 lanes only where 4 rows of them still fit the budget (not on AVX2: 16 lanes by 6 rows there)
      elif rest >= 4 and 2 * b.upcast_total() * 4 <= b.tile_budget: b.try_opt(Opt(OptOps.UPCAST, i, 2))

def _only_vector_loads_along(b: _Builder, r: UOp) -> bool:
  """Is every load that varies along output axis r a vector load along the tile's widest lanes (unit-stride along
  them)? Then more rows of r reuse each reduce step's broadcasts (_upcast_reuse_axes)."""
  if not (ups := axes_of(b.ast, AxisType.UPCAST)): return False
  wide = max(ups, key=lambda u: axis_size(u) or 0)
  lds = [ld for ld in _loads(b.ast) if r in ld.src[0]._ranges]
  return bool(lds) and all(index_stride(ld.src[0].src[1].get_idx(), wide) == 1 for ld in lds)

def _half_vector_lanes(b: _Builder, done: set[int]) -> bool:
  """Are the lanes taken half a vector register (8 float32 lanes of AVX-512's 16), read by vector loads (every load that
  varies along them is contiguous along them), with no output axis not yet tiled that continues their run (steps
  every such load by exactly the lanes' count, as an unpadded image's next row does)?"""
  # NOTE: 16-lane vectors only (measured on AVX-512; AVX2's 4-lane halves were not)
  if _vector_lanes(b) != 16 or b.upcast_total() != 8: return False
  if not (idxs := [ld.src[0].src[1].get_idx() for ld in _lane_loads(b.ast)]): return False
  if not all(index_stride(idx, u) in (0, 1) for idx in idxs for u in axes_of(b.ast, AxisType.UPCAST)): return False
  return not any(r.arg[0] not in done and all(index_stride(idx, r) == 8 for idx in idxs) for r in output_axes(b.ast))

def _short_pixel_rows(b: _Builder, done: set[int]) -> bool:
  """The rows of a packed-lanes conv over few pixels (_upcast_for_reuse): where every long row axis' loads are a page
  apart (the batch: its rows share their cache sets) and the pixels' axes are short (under 8: a conv over 4x4 outputs),
  the rows are 8 pixels from the short axes, innermost first (each whole while the rows stay within 8, the next by what
  is left), not 8 of the batch; fewer pixels than that (2x2) are made up to 8 by the batch (below). Measured in
  ResNet-18 b32 128x128's step (2 threads, Intel Xeon, AVX-512, alternated): its 3x3 stride-2 conv to 512 channels over
  4x4 pixels 12.6 -> 9.1 ms, its 1x1 stride-2 one 2.1 -> 1.2; b8's convs over 4x4 1.01 -> 0.78 and 5.8 -> 5.6; over
  2x2 (4 rows of pixels against 4 of the batch) 1.28 -> 1.24 and 7.47 -> 7.46, within noise"""
  cands = [r for r in output_axes(b.ast) if r.arg[0] not in done and (axis_size(r) or 0) >= 2 and
           _broadcast_loads(b.ast, r)]
  long = [r for r in cands if (axis_size(r) or 0) >= 8]
  short = [r for r in cands if (axis_size(r) or 0) < 8 and not _aliased_rows(b.ast, r)]
  if not short or not long or not all(_aliased_rows(b.ast, r) for r in long) or (sidx := _store_idx(b.ast)) is None:
    return False
  # NOTE: up to 8 rows, fewer where the tile's budget holds fewer (AVX2's 96 lanes: 6 rows of 16 lanes, so a 4x4
  # image's row of 4 pixels). Measured in ResNet-18 b32 128x128's step (AMD Zen 2, AVX2, 2 threads, candidates in one
  # process): its 1x1 stride-2 conv to 512 channels over 4x4 pixels 1.86 ms with 4 rows of the batch, 1.36 with the 4
  # pixels of a row
  if (cap := min(8, b.tile_budget // max(b.upcast_total(), 1))) < 4: return False
  short.sort(key=lambda r: abs(index_stride(sidx, r) or 1 << 30))
  ups: list[tuple[UOp, int]] = []
  for r in short:
    size, rows = axis_size(r) or 0, prod(amt for _, amt in ups)
    # each axis whole while the rows stay within the cap, then the next by what is left where that divides it
    amt = size if rows * size <= cap else cap // rows if size % (cap // rows) == 0 else 1
    if amt > 1: ups.append((r, amt))
    if rows * amt == cap: break
  # NOTE: pixels fewer than the cap (a conv over 2x2 outputs: 4 rows, 8 or 12 accumulators on AVX-512, each FMA's
  # accumulator reused every 4-6 FMAs, under their latency x throughput) are made up to it from the nearest long axis
  # (the batch: 2 images a page apart, one pair of cache sets, not 8). Measured in the steps (bench/step_ab.py, Intel
  # Xeon, AVX-512, 2 threads, alternated, two runs): ResNet-18 b8 64x64's 512-channel input gradients over 2x2 (3
  # launches) 3.83 -> 3.54 and 4.12 -> 4.02 ms, the 256-channel one 0.61 -> 0.61 and 0.70 -> 0.55, its 3x3 convs over
  # 2x2 3.41 -> 3.26 and 3.78 -> 3.73, 0.54 -> 0.51 and 0.63 -> 0.57; the UNet's two convs over 2x2 groups 0.87 -> 0.75
  # and 1.03 -> 0.92 ms
  if cap // (rows := prod(amt for _, amt in ups)) >= 2:
    long.sort(key=lambda r: abs(index_stride(sidx, r) or 1 << 30))
    if (more := next((r for r in long if (axis_size(r) or 0) % (cap // rows) == 0), None)) is not None:
      ups.append((more, cap // rows))
  return prod(amt for _, amt in ups) >= 4 and b.try_upcasts(ups)

def _table_rows(b: _Builder, lanes: int, untiled: tuple[UOp, list[Opt]] | None = None) -> bool:
  """A constant table's rows against a big input (a product of a small matrix, Winograd's filter-gradient transform
  G^T dU G: 9 x 36 constants @ 36 x (Cin x Cout)): output axes under 8 that only small loads (SMALL_OPERAND_BYTES) vary
  along, while a big one (BIG_OPERAND_BYTES) is broadcast along them, are upcast whole after the 16 lanes, so that each
  vector load of the big input serves every row of the table (as the loops they were, each row read the big input's
  tile again). The big input is then read once, so the loop it walks with the shortest stride goes innermost: the
  kernel streams it. The rows take no more lanes and no other rows where they fill the tile's budget. Measured in the
  step (2 threads, Intel Xeon, AVX-512; ResNet-18 b32 128x128's 512-channel transform, 3 launches, alternated):
  32 lanes x 8 input-channel rows with the 3 x 3 taps as loops 10.5-11.4 ms, 16 lanes x the 9 taps with the lanes'
  loop innermost 6.5-7.5 (alone 3.1-3.4 -> 1.7-2.5), the same with the input channels' loop innermost 8.0"""
  lds = _loads(b.ast)
  outs = output_axes(b.ast)
  def table(r: UOp) -> bool:
    # NOTE: a table varies along its rows and the reduce only; a small input that also varies along another output
    # axis of 8 or more is data (a conv's upstream gradient over 2x2 pixels, 64 KiB at batch 8: its rows' loop is the
    # batch, and _big_panel_outer's order reads the 9.4 MB filters once instead of once per image). Measured in
    # ResNet-18 b8's step (AMD Zen 2, AVX2, 2 threads, alternated): that input gradient's 3 launches 8.4 -> 4.7 ms
    mine = [ld for ld in lds if r in ld.src[0]._ranges]
    return all(_buffer_bytes(ld) <= SMALL_OPERAND_BYTES and
               not any(o in ld.src[0]._ranges for o in outs if o is not r and (axis_size(o) or 0) >= 8) for ld in mine)
  # NOTE: not what is left of the lanes' axis (range id `lanes`): a weight gradient's 32 lanes over 2 x 16
  def against_big(r: UOp) -> bool:
    return any(_buffer_bytes(ld) >= BIG_OPERAND_BYTES for ld in lds if r not in ld.src[0]._ranges)
  rows = [r for r in outs if r.arg[0] != lanes and 1 < (axis_size(r) or 0) < 8 and table(r) and against_big(r)]
  if not rows:
    long = [r for r in outs if r.arg[0] != lanes and (axis_size(r) or 0) >= 8 and table(r) and against_big(r)]
    return len(long) == 1 and _long_table_rows(b, lanes, long[0], untiled)
  ups = [(r, axis_size(r) or 0) for r in rows]
  if b.upcast_total() * (n := prod(amt for _, amt in ups)) > b.tile_budget:
    # NOTE: where the rows do not fit under 16 lanes but do under one vector register's 8 (AVX2's 96 lanes: the 9 taps
    # of a 3 x 3 filter gradient), 8 lanes by the rows (taken again from the tile as it was before the 16 lanes).
    # Measured in ResNet-18 b32 128x128's step (AMD Zen 2, AVX2, 2 threads, alternated): its 512-channel transform's 3
    # launches 14.7 ms with 16 lanes x 4 input-channel rows (dU read again for each tap), 8.3 with 8 lanes x the 9
    # taps and the lanes' loop innermost (16 lanes x the 3 taps of x: 14.4); the 256-channel one's 2.8 -> 1.5
    vec = b.renderer.acc_widths(dtypes.float32)
    half = b.upcast_total() // 2
    if untiled is None or not vec or half != vec[0] or half * n > b.tile_budget or \
       not _retile(b, untiled, lanes, half, ups): return False
  # NOTE: the caller goes on with the 16-lane tile it made where the rows do not take
  elif not b.try_upcasts(ups): return False
  buf = max(lds, key=_buffer_bytes).src[0].src[0]
  loops = [r for r in output_axes(b.ast) if r.arg[-1] is AxisType.LOOP and (axis_size(r) or 0) > 1]
  idx = next(ld for ld in _loads(b.ast) if ld.src[0].src[0] is buf).src[0].src[1].get_idx()
  walks = [(abs(st), i) for i, r in enumerate(loops) if (st := index_stride(idx, r))]
  if walks and (inner := min(walks)[1]) != len(loops) - 1:
    outs = output_axes(b.ast)
    b.try_opt(Opt(OptOps.SWAP, outs.index(loops[inner]), outs.index(loops[-1])))
  b.streamed = True
  return True

def _long_table_rows(b: _Builder, lanes: int, rows: UOp, untiled: tuple[UOp, list[Opt]] | None) -> bool:
  """A constant table whose rows are two blocks of one vector register's lanes (16 on AVX2: Winograd's output
  transform, 16 x 36 constants @ 36 x (tiles x channels)) against a big input, on a 16-register renderer: 8 lanes by
  8 rows (8 accumulators), the rows' loop innermost, and the big input's panel not packed (read by two row blocks, the
  copy cost more than it saved). The 16 lanes took 4 rows there, with the panel (36 rows 512 KiB apart) packed for
  the 4 row blocks. Measured in the steps (AMD Zen 2, AVX2, 2 threads, bench/step_ab.py, alternated): ResNet-18 b32
  128x128's output transforms over 2048 tiles x 64 channels (8 launches) 20.6 -> 14.2 ms, over 512 x 128 7.4 -> 5.4,
  over 128 x 256 4.6 -> 3.0 (candidates timed in the step: 16 lanes x 4 rows unpacked 17.8 against 21.0, 8 x 8 packed
  21.5, 8 x 8 with the channels' loop innermost 16.0); the UNet's 4.2 -> 3.3, 1.36 -> 1.11, 0.64 -> 0.43, two others
  within 2%. Not other tables, where it was slower: 36 rows (the input transform, 8 lanes x 12 rows: 31.4 -> 33.6
  ms, 0.94 -> 1.43 for the weight gradient's 36 x 16; the filter transform's 36 x 9 2.6 -> 5.8), a 1x1 conv's 128 x 64
  weights (1.6 -> 10.5 ms) or 8 rows (an input gradient's dy over 2 x 2 pixels at batch 8, 4.7 -> 7.8)"""
  if b.renderer.vector_registers != 16 or not (vec := b.renderer.acc_widths(dtypes.float32)): return False
  # one register's lanes by as many rows: half the table's rows a block
  amt = vec[0]
  if axis_size(rows) != 2 * amt or amt * amt > b.tile_budget: return False
  # NOTE: a table that stays in L1 (16 x 36 floats, 2.3 KiB), not a small matmul's A (16 rows x 512, 64 KiB at batch 2:
  # its 16 lanes by 4 rows with B's panel packed are the matmul path's tile)
  if any(_buffer_bytes(ld) > TABLE_MAX_BYTES for ld in _loads(b.ast) if rows in ld.src[0]._ranges): return False
  if untiled is None or not _retile(b, untiled, lanes, amt, [(rows, amt)]): return False
  # the rows' loop innermost, the others in their order: each vector load of the big input serves both row blocks
  # from cache
  _sort_loops(b, lambda r: r.arg[0] == rows.arg[0])
  b.streamed = b.table_tile = True
  return True

def _retile(b: _Builder, untiled: tuple[UOp, list[Opt]], lanes: int, amt: int, ups: list[tuple[UOp, int]]) -> bool:
  """The register tile made again from `untiled` (the kernel before its 16 lanes, _upcast_reuse_axes): the lanes' axis
  (range id `lanes`) by amt, then each of ups (try_upcasts); or the kernel as it was (False)."""
  tiled = (b.ast, list(b.opts))
  b.ast, b.opts = untiled
  lane = next((o for o in output_axes(b.ast) if o.arg[0] == lanes), None)
  if lane is not None and b.try_upcasts([(lane, amt), *ups]): return True
  b.ast, b.opts = tiled
  return False

def _aliased_rows(ast: UOp, r: UOp) -> bool:
  """Does some load step along output axis r by a multiple of a page (each row in the same cache sets)?"""
  return any((st := index_stride(ld.src[0].src[1].get_idx(), r)) and (st * ld.dtype.itemsize) % PAGE_BYTES == 0
             for ld in _loads(ast))

def _short_rows(b: _Builder) -> None:
  """Packed lanes and no other output axis of 8+ for rows (a 7x7 stem conv's weight gradient, 64 x 3 x 7 x 7): the
  longest axis of 3-7 that some load does not depend on is the tile's rows, whole, rather than one row a reduce step.
  Measured alone (2 threads): that weight gradient over batch 32, 64x64 pixels, 16 lanes x 1 row 44.2 ms, x 7 rows
  22.6"""
  outs = output_axes(b.ast)
  # NOTE: an axis along which the lanes' loads are broadcast goes first (each row reuses their vector loads), then the
  # longest. Measured alone (AVX2, 2 threads, the stem's weight gradient at batch 32, 128x128, packed by the image): 16
  # lanes x 3 input-channel rows 38.8 ms, x 2 rows of the lanes' own output channels 51.9 (x 4: the panel is over
  # PACK's limit)
  lane_loads = _lane_loads(b.ast)
  short = [(not any(r in ld.src[0]._ranges for ld in lane_loads), size, i) for i, r in enumerate(outs)
           if 3 <= (size := axis_size(r) or 0) < 8 and _broadcast_loads(b.ast, r) and
           size * b.upcast_total() <= b.tile_budget]
  if not short: return
  _, size, i = max(short)
  # NOTE: rows that take the last axis the threads could split (AVX2's budget: the lanes' own axis, 4 rows of 16 of the
  # 64 channels, the 3 x 7 x 7 left to loop) leave a big kernel on one thread: a share of them then, the rest threaded.
  # Measured alone (AVX2, 2 threads, ResNet-18 b8 64x64's stem gradient): 64 lanes on one thread 5.5 ms, 32 on two 2.3
  nt = max_threads(b.renderer) if b.renderer.has_threads else 1
  if nt > 1 and _work(b.ast) >= THREAD_MIN_WORK and size % nt == 0 and size // nt >= 2 and \
     not any((axis_size(r) or 0) % nt == 0 for j, r in enumerate(outs) if j != i):
    size //= nt
  b.try_opt(Opt(OptOps.UPCAST, i, size))

def _gated_row_loads(ast: UOp, lanes: UOp) -> list[UOp]:
  """The loads that the lanes' axis does not vary (a row's broadcast) gated by a condition on a reduce range (a padded
  conv's input: its bounds checked on every reduce step)."""
  reds = set(reduce_axes(ast))
  return [ld for ld in _loads(ast) if lanes not in ld.src[0]._ranges and (idx := ld.src[0].src[1]).is_masked() and
          reds & idx.get_valid()._ranges]

def _two_rows_off_lanes(b: _Builder, lanes: UOp, buf: UOp) -> None:
  """2 rows on the longest other output axis that the lanes' load (of buffer `buf`) does not depend on (a weight
  gradient's input channels, under its taps as rows)."""
  lane_lds = [ld for ld in _loads(b.ast) if ld.src[0].src[0] is buf]
  rows = [(axis_size(r) or 0, j) for j, r in enumerate(output_axes(b.ast)) if r.arg[0] != lanes.arg[0] and
          (axis_size(r) or 0) % 2 == 0 and not any(r in ld.src[0]._ranges for ld in lane_lds)]
  if rows: b.try_opt(Opt(OptOps.UPCAST, max(rows)[1], 2))

def _sliding_rows(b: _Builder, lanes: UOp, gated: list[UOp]) -> UOp | None:
  """An output axis of 3-7 along which one of the gated row loads `gated` (_gated_row_loads) shifts as it does along the
  innermost reduce axis, where that axis is 4 steps or fewer (a weight gradient's kernel taps over the pixels of a 4x4
  or 2x2 image): as whole rows, the loop of 4 steps unrolled by the compiler reads each row's input once for all the
  rows that share it (the next tap's row is this one's next step). None where there is no such axis."""
  if not (reds := reduce_axes(b.ast)) or (axis_size(inner := reds[-1]) or 0) > 4: return None
  idxs = [ld.src[0].src[1].get_idx() for ld in gated]
  def shifts(r: UOp) -> bool: return any((st := index_stride(i, r)) and st == index_stride(i, inner) for i in idxs)
  cands = [(size, r) for r in output_axes(b.ast) if r is not lanes and 3 <= (size := axis_size(r) or 0) <= 7 and
           size * 16 <= b.tile_budget and shifts(r)]
  return max(cands, key=lambda c: c[0])[1] if cands else None

def _reduce_loads(ast: UOp, r: UOp) -> list[UOp]:
  """The loads of the reduce (their index uses a reduce range) that depend on output axis r."""
  reds = set(reduce_axes(ast))
  return [ld for ld in _loads(ast) if r in (rs := ld.src[0].src[1]._ranges) and reds & rs]

def _packed_lanes_axis(b: _Builder) -> tuple[UOp, UOp] | None:
  """The output axis whose 16 lanes a PACK makes vector loads, in a big reduce no operand and no store reads with stride
  1 along an output axis of 8 or more (a conv over a 4x4 or 2x2 image, where the row is too short for lanes; a conv's
  weight gradient): among the axes of a multiple of 16 with exactly one reduce load varying along them, the one whose
  load is reused most (the product of the output axes it does not depend on): the weights of a conv (reused over
  batch x pixels), the upstream gradient of its weight gradient (reused over input channels x taps). Only where the
  renderer builds its own vector accumulators and vector loads (the CPU LLVM renderer). (the axis, the load's buffer)"""
  if not _own_vector_accs(b) or (sidx := _store_idx(b.ast)) is None: return None
  outs = output_axes(b.ast)
  # NOTE: a store axis whose reduce loads step 2-8 elements a lane (a strided conv's input pixels), in a reduce over
  # taps and channels, is no lanes axis: its lanes would gather. Measured alone (2 threads, ResNet-18 at batch 32,
  # 128x128): the 7x7 stride-2 stem conv, 32 pixel lanes 218 ms, 32 packed output-channel lanes 14.4; a 3x3 stride-2
  # conv 15.0 -> 6.9. A 1x1 stride-2 conv (one reduce axis) keeps its pixel lanes, whose gathered panel PACK copies
  # (_pack_panel): 0.75 ms, 0.90 with packed channel lanes
  # NOTE: so is one whose loads step a row or more a lane (the input channels of a 1x1 conv's weight gradient, an image
  # apart): they were 16 gathered lanes, PACK copying the other operand's rows. Now packed lanes (by reuse, the input
  # channels again, their input packed). Measured alone (AVX2, 2 threads, 64 -> 128 channels at batch 32): stride 1
  # over 32x32 pixels 51.2 -> 7.7 ms, stride 2 over 16x16 8.3 -> 1.7 (16 packed output-channel lanes: 6.3 and 2.2)
  def gathers(r: UOp) -> bool:
    sts = [index_stride(ld.src[0].src[1].get_idx(), r) for ld in _reduce_loads(b.ast, r)]
    return len(reduce_axes(b.ast)) > 1 and bool(sts) and all(st is None or abs(st) >= 2 for st in sts)
  # NOTE: a pixel axis of 8 is one vector register of AVX2: its tile (8 channel rows of broadcasts) spilled, and the
  # packed channel lanes run faster there (measured alone, 2 threads, ResNet-18 b8 64x64's 128-channel 3x3 conv over
  # 8x8 pixels: 8 pixel lanes x 8 rows 2.8 ms, 16 channel lanes x 4 pixel rows 1.8). AVX-512 keeps its pixel lanes
  least = 16 if b.renderer.vector_registers == 16 else 8
  if any((index_stride(sidx, r) == 1 and not gathers(r) or _vector_axis(b.ast, r)) and (axis_size(r) or 0) >= least
         for r in outs): return None
  cands, packable = [], packable_loads(b.ast)
  for r in outs:
    if (size := axis_size(r) or 0) % 16 or size < 16 or _broadcast_loads(b.ast, r) == 0: continue
    if len(lds := _reduce_loads(b.ast, r)) != 1 or lds[0] not in packable: continue
    rs = lds[0].src[0].src[1]._ranges
    cands.append((prod(axis_size(o) or 1 for o in outs if o not in rs), size, r.arg[0], r, lds[0].src[0].src[0]))
  return max(cands, key=lambda c: c[:3])[3:] if cands else None

def _innermost_loop(ast: UOp) -> UOp | None:
  """The innermost output LOOP of more than one iteration (None: there is none)."""
  loops = [r for r in output_axes(ast) if r.arg[-1] is AxisType.LOOP and (axis_size(r) or 0) > 1]
  return max(loops, key=lambda r: r.arg[0]) if loops else None

def _inner_loop_reads(b: _Builder, buf: UOp) -> bool:
  """Does the innermost output loop read buffer `buf`'s load?"""
  if (inner := _innermost_loop(b.ast)) is None: return False
  return any(ld.src[0].src[0] is buf and inner in ld.src[0].src[1]._ranges for ld in packable_loads(b.ast))

def _panel_loops_outer(b: _Builder, buf: UOp) -> bool:
  """SWAP the output loops so that those buffer `buf`'s load depends on run outside those it does not (in their order):
  its panel is then packed once per iteration of its own loops and reused by every iteration of the others. False (the
  kernel as it was) where the innermost loop still reads it."""
  before = (b.ast, list(b.opts))
  ld = next(ld for ld in packable_loads(b.ast) if ld.src[0].src[0] is buf)
  if _sort_loops(b, lambda r: r not in ld.src[0].src[1]._ranges) and not _inner_loop_reads(b, buf): return True
  b.ast, b.opts = before
  return False

def _sort_loops(b: _Builder, key: Callable[[UOp], Any]) -> bool:
  """SWAP the output loops (of more than one iteration) into the order of key, a stable sort (loops that tie keep
  their order); False (the kernel as it was) where a SWAP is refused."""
  before = (b.ast, list(b.opts))
  outs = output_axes(b.ast)
  loops = [i for i, r in enumerate(outs) if r.arg[-1] is AxisType.LOOP and (axis_size(r) or 0) > 1]
  want = sorted(loops, key=lambda i: key(outs[i]))
  at = list(loops)  # at[k]: the original index of the axis now at position loops[k]
  for k, w in enumerate(want):
    if at[k] == w: continue
    j = at.index(w)
    if not b.try_opt(Opt(OptOps.SWAP, loops[k], loops[j])):
      b.ast, b.opts = before
      return False
    at[k], at[j] = at[j], at[k]
  return True

def _kblock_to_fit(b: _Builder, buf: UOp) -> bool:
  """KBLOCK the outermost reduce axis into the longest blocks whose panel of buffer `buf`'s load fits PACK's limit (a
  conv's weight gradient over a big batch: 32 x 32 x 32 pixels of the upstream gradient by 32 lanes is 4 MiB). False
  (nothing applied) where no block of that axis fits. Measured alone (2 threads): ResNet-18's 64-channel 3x3 weight
  gradient at batch 32, 32x32 pixels, 8x8 scalar tiles 98-101 ms, 32 lanes packed in blocks of 4 images 11.8-12.0"""
  lds = [ld for ld in packable_loads(b.ast) if ld.src[0].src[0] is buf]
  if len(lds) != 1 or not (reds := reduce_axes(b.ast)): return False
  rs, idx = panel_ranges(lds[0]), lds[0].src[0].src[1].get_idx()
  # NOTE: the reduce axis the load walks with the largest stride (the outermost in memory), so that each block reads
  # whole cache lines of the input: a conv's reduce is (ky, kx, Cin) where its filters are stored (Cin, ky, kx). Blocks
  # of one ky read a third of each line of the filters, and each line 3 times. Measured in ResNet-18 b8's step (2
  # threads, AMD Zen 5): the 512-channel conv over 2x2 pixels (3 launches) 3.46 ms by ky, 2.88 by 256 input channels
  # NOTE: down to blocks of one step (one image of a weight gradient over 64x64 pixels by 32 lanes is PACK's 512
  # KiB). Measured alone (AVX2, 2 threads): ResNet-18's stem weight gradient at batch 32, 128x128, unpacked 8 lanes
  # 131-155 ms; 16 lanes x 3 rows packed by the image 38.8
  return _kblock_longest(b, [(j, int(prod(axis_size(r) or 0 for r in rs if r is not red)) * lds[0].dtype.itemsize,
                              index_stride(idx, red) or 0) for j, red in enumerate(reds) if red in rs], PACK_MAX_BYTES)

def _kblock_longest(b: _Builder, steps: list[tuple[int, int, int]], limit: int) -> bool:
  """KBLOCK, of `steps` ((index among the reduce axes, bytes one step of that axis reads, its stride in the input)), the
  axis with the largest stride (the outermost in memory) into the longest blocks (of fewer steps than the axis) whose
  bytes are within `limit`. False (nothing applied) where no block fits."""
  reds, cands = reduce_axes(b.ast), []
  for j, step, stride in steps:
    if (size := axis_size(reds[j])) is None: continue
    if fits := [n for n in range(size - 1, 0, -1) if size % n == 0 and n * step <= limit]:
      cands.append((stride, -j, fits[0]))
  if not cands: return False
  _, nj, n = max(cands)
  return b.try_opt(Opt(OptOps.KBLOCK, -nj, n))

def _pack_lanes(b: _Builder, buf: UOp) -> bool:
  """PACK the reduce load of buffer `buf` (the one varying along the lanes _packed_lanes_axis chose): its panel becomes
  [reduce steps][lanes], so each step's lanes are one vector load. Measured on ResNet-18's kernels (b8 64x64, LLVM path,
  2 threads, a loaded machine): the 512-channel 3x3 conv over 2x2 pixels 14.6 -> 3.1 ms with the weights packed (8x8
  scalar tiles before), the 64-channel conv's weight gradient 14.0 -> 2.7 ms with the upstream gradient packed."""
  lds = [i for i, ld in enumerate(packable_loads(b.ast)) if ld.src[0].src[0] is buf]
  return len(lds) == 1 and b.try_opt(Opt(OptOps.PACK, lds[0]))

def _vector_axis(ast: UOp, r: UOp) -> bool:
  """Do the loads that vary along output axis r (and along the reduce) all read it with stride 1 (vector loads)?"""
  reds = set(reduce_axes(ast))
  idxs = [idx for ld in _loads(ast) if r in (idx := ld.src[0].src[1].get_idx())._ranges and reds & idx._ranges]
  return bool(idxs) and all(index_stride(idx, r) == 1 for idx in idxs)

def _step_stride(ast: UOp, r: UOp) -> int:
  """The longest stride, along the innermost reduce range, of the loads that vary along output axis r."""
  if not (reds := reduce_axes(ast)): return 0
  idxs = [idx for ld in _loads(ast) if r in (idx := ld.src[0].src[1].get_idx())._ranges]
  return max((abs(st) for idx in idxs if (st := index_stride(idx, reds[-1])) is not None), default=0)

def _reused_body(ast: UOp, r: UOp) -> list[UOp]:
  """The nodes of each reduce step that do not depend on output axis r: computed once and reused by each lane of r."""
  reds = set(reduce_axes(ast))
  body = {u for red in ast.toposort() if red.op is Ops.REDUCE for u in red.src[0].toposort()}
  return [u for u in body if r not in u._ranges and reds & u._ranges]

def _rows_stay_cached(ast: UOp, r: UOp) -> bool:
  """With the lanes on output axis r, is the operand of the tile's rows (the loads that vary along another output axis
  and not along r) small enough to stay in L2 (PACK_MAX_BYTES, a core's share) while the lanes' operand is 4x or more
  its bytes? The rows' operand is read again for every tile of the lanes, the lanes' panel once (packed)."""
  # NOTE: a product into two output axes (a weight gradient dY^T X); not a batched one (Winograd's products over their
  # 36 tile positions took lanes on the small operand's axis for it: ResNet-18 b32's 4.66 -> 5.42 ms)
  if len(outs := [a for a in output_axes(ast) if (axis_size(a) or 0) > 1]) != 2: return False
  lds = [ld for ld in _loads(ast) if any(a in ld.src[0]._ranges for a in outs)]
  lanes = sum(_buffer_bytes(ld) for ld in lds if r in ld.src[0]._ranges)
  rows = sum(_buffer_bytes(ld) for ld in lds if r not in ld.src[0]._ranges)
  return 0 < rows <= PACK_MAX_BYTES and lanes >= 4 * rows

def _reused_alu(ast: UOp, r: UOp) -> int: return sum(1 for u in _reused_body(ast, r) if u.op in GroupOp.ALU)
def _broadcast_value_cost(ast: UOp, r: UOp) -> int:
  """With the lanes on output axis r, how much the broadcast operand's own value ops (not the index math that computes
  a load's index or gate) weigh for those lanes: positive where they hold a transcendental (computed once per row and
  reused by every lane, rather than as vector ops once per row tile: _upcast_reuse_axes), negative where they are
  cheap (a vector op each along the lanes beats a scalar op and a broadcast per row)."""
  body = _reused_body(ast, r)
  n = _value_alu(body, _index_math(ast.toposort()))
  return n if any(u.op in TRANSCENDENTAL for u in body) else -n
def _reused_transcendental(ast: UOp, r: UOp) -> bool:
  return any(u.op in TRANSCENDENTAL for u in _reused_body(ast, r))

def _reuse_reduce(ast: UOp) -> bool:
  """A reduce with an output axis that some load does not depend on: register blocking pays (a matmul, a conv)."""
  return bool(reduce_axes(ast)) and any((axis_size(r) or 0) >= 8 and _broadcast_loads(ast, r) for r in output_axes(ast))

def _reduce_dtype(b: _Builder) -> DType | None:
  return next((u.dtype for u in b.ast.toposort() if u.op is Ops.REDUCE), None)

def _vector_lanes(b: _Builder) -> int:
  """The lanes of the widest vector accumulator the renderer builds for the reduce's dtype (0: it builds none, the C
  path leaves vectors to its compiler)."""
  return ws[0] if (dt := _reduce_dtype(b)) is not None and (ws := b.renderer.acc_widths(dt)) else 0

def _own_vector_accs(b: _Builder) -> bool:
  """Does the renderer pack the reduce's lanes into vector accumulators itself (not a C compiler's choice)?"""
  return _vector_lanes(b) > 0

def _wide_tile(b: _Builder, i: int, size: int) -> bool:
  """The contiguous axis of a big float32 CPU matmul on a renderer whose vector registers hold 16 lanes (AVX-512,
  whose 32 registers hold 8 rows x 3 accumulators, 3 of B and a broadcast of A): 48 lanes where 48 divides the axis.
  Measured against 32 lanes (8x32 tiles, B packed, 2 threads, AMD Zen 5): 768^3 and 1024x768x2304 1-2% faster; but
  4096x64x4096 -10% on another AVX-512 host (a short reduce: storing the tile weighs more than its inner loop), so only
  from WIDE_MIN_REDUCE steps on. Leaves the kernel as it was when an opt does not fit."""
  # NOTE: not padded up to 48. Measured against 32 lanes, unpadded (2 threads, wall, AMD Zen 5): 512^3 0.67 -> 0.60 ms,
  # 1024^3 4.9-7.0 -> 4.5-5.1, 2048x512x1024 7.0 -> 5.5; Winograd's 36 (32 x 512) @ (512 x 512) (ResNet-18 b32's
  # 512-channel convs) 6.6 -> 2.7. That was while PACK copied a padded panel with scalar loads and a gather a row; with
  # its masked vector copy (lowerer.fill_lanes), 1024^3 padded to 1056 for 48 lanes still took 5.9 ms against 5.3 for
  # 32 lanes. An earlier host (one thread) had padding 1024 to 1056 6-9% faster
  dt = _reduce_dtype(b)
  if not b.may_widen or dt is None or dt.itemsize != 4 or 16 not in b.renderer.acc_widths(dt)[:1]: return False
  if prod(axis_size(r) or 0 for r in reduce_axes(b.ast)) < WIDE_MIN_REDUCE: return False
  if size % 48 or b.upcast_total() * 48 > MAX_CPU_UPCAST: return False
  before = (b.ast, list(b.opts))
  if b.try_opt(Opt(OptOps.UPCAST, i, 16)) and b.try_opt(Opt(OptOps.UPCAST, i, 3)):
    b.wide = True
    return True
  b.ast, b.opts = before
  return False

def _pad_and_upcast(b: _Builder, i: int, size: int, amt: int, pad_to: int) -> bool:
  """Pad output axis i to a multiple of pad_to (PADTO: the extra lanes' loads are gated, their stores dropped), then
  UPCAST it by amt; only where that adds at most 1/8 of the work. Leaves the kernel as it was when either fails."""
  if (-size % pad_to) * 8 > size: return False
  before = (b.ast, list(b.opts))
  if b.try_opt(Opt(OptOps.PADTO, i, pad_to)) and b.try_opt(Opt(OptOps.UPCAST, i, amt)): return True
  b.ast, b.opts = before
  return False

# the most rows a transposed elementwise tile takes (_transpose_tile)
TRANSPOSE_MAX_ROWS = 8
# a buffer this small stays in a core's L1/L2 cache whichever output loop reads it; one this big does not stay in L2
SMALL_OPERAND_BYTES, BIG_OPERAND_BYTES = 64 * 1024, 2 * 1024 * 1024
# a constant table that stays in L1 beside the lines of the big input it multiplies (_long_table_rows)
TABLE_MAX_BYTES = 16 * 1024

def _buffer_bytes(ld: UOp) -> int:
  buf = ld.src[0].src[0]
  return buf.dtype.size * ld.dtype.itemsize if isinstance(buf.dtype, PtrDType) and buf.op is Ops.DEFINE_GLOBAL else 0

def _stream_once(b: _Builder) -> None:
  """An outer output loop whose own input is small (its loads depend on no other output loop and read a buffer of up to
  SMALL_OPERAND_BYTES: a constant matrix, Winograd's transforms' B^T (x) B^T) goes inside the loops a big input (over
  BIG_OPERAND_BYTES) depends on: each block of the big input is then read once, and the small one again from cache for
  every block, where the big one was streamed once per iteration of the outer loop. Measured in the step (2 threads,
  wall, AMD Zen 5; the step's kernels run in order, the old and new opts alternated): a 3x3 conv's forward and backward
  at 32x64x32x32 31.6 -> 22.5 ms (Winograd's input transform, 36 x 36 constants @ 36 x (2048 tiles x 64 channels), the
  36 rows in 9 loops of 4 outermost, 11.1 -> 3.9 ms); ResNet-18 b32 128x128's step 437 -> 407 ms"""
  # NOTE: not once a panel is packed (a stem conv's weights, PACKed with its register tile): its fill goes in the
  # innermost loop it depends on, so moving that loop inward fills it again for every iteration of the loops it passes.
  # Measured in ResNet-18 b32's step: the 7x7 stem conv 9-16 -> 47 ms
  if b.renderer.has_local or not reduce_axes(b.ast) or any(u.op is Ops.BUFFERIZE for u in b.ast.toposort()): return
  for _ in range(4):
    loops = [r for r in output_axes(b.ast) if r.arg[-1] is AxisType.LOOP and (axis_size(r) or 0) > 1]
    lds = _loads(b.ast)
    def moves(i: int) -> bool:
      r, inner = loops[i], loops[i + 1]
      # NOTE: not past an innermost loop of more than 4 iterations (the stores' contiguous run: outside it, each row
      # of a plane of the small input's rows is written whole in turn; inside it, in pieces of one tile, to every plane
      # in turn). Measured in ResNet-18 b32's step (2 threads, wall, AMD Zen 5, variants alternated): Winograd's filter
      # transform at 512 channels (36 x 9 @ 9 x (512 x 512), 16 tiles of 32 lanes innermost) 12.5 ms as it was, 7.9
      # with the rows' loop inside the input channels' and outside the tiles', 14.0 inside the tiles' too. Past a short
      # one (2 tiles of the 64 channels of the conv above): the input transform 4.1 ms, 5.0 outside it
      if i + 1 == len(loops) - 1 and (axis_size(inner) or 0) > 4: return False
      own = [ld for ld in lds if r in ld.src[0]._ranges]
      if not own or any(o in ld.src[0]._ranges for ld in own for o in loops if o is not r): return False
      if sum(_buffer_bytes(ld) for ld in own) > SMALL_OPERAND_BYTES: return False
      big = [ld for ld in lds if r not in ld.src[0]._ranges and inner in ld.src[0]._ranges]
      # NOTE: a big input over L2's share (PACK_MAX_BYTES), not only over BIG_OPERAND_BYTES: Winograd's input
      # transform over 32 tiles x 512 channels (its 1 MiB input) kept its 6 row blocks outermost and split them across
      # the threads, each thread reading the whole input 3 times. Measured in the steps (AMD Zen 2, 2 threads, L2 512
      # KiB, bench/step_ab.py, alternated): ResNet-18 b32 128x128's 4.85 -> 3.89 ms, the UNet's over 128 tiles x 128
      # channels 4.33 -> 3.57, three of its small output transforms 0.61 -> 0.43, 0.32 -> 0.18, 0.20 -> 0.09
      return sum(_buffer_bytes(ld) for ld in big) > PACK_MAX_BYTES
    i = next((i for i in range(len(loops) - 1) if moves(i)), None)
    if i is None: return
    outs = output_axes(b.ast)
    if not b.try_opt(Opt(OptOps.SWAP, outs.index(loops[i]), outs.index(loops[i + 1]))): return
    b.streamed = True

def _reorder_for_reuse(b: _Builder) -> None:
  # a big register-blocked CPU kernel: the innermost output loop should be the one whose own input is read contiguously
  # along the reduce (a matmul's rows of A), so that the block of the other input that each step reuses (a panel of
  # B's columns, read with a stride) stays in cache across that loop instead of being streamed again for every block
  if b.renderer.has_local or len(reds := reduce_axes(b.ast)) != 1 or b.streamed: return
  if _work(b.ast) < BIG_BLOCK_MIN_WORK: return
  # NOTE: not over a short reduce (a conv's weight gradient over few pixels: dy^T @ its stored windows, 512 x 4608 over
  # 32 pixels): each output element is 32 multiply-adds, so its stores are what costs, and in the kernel's own order
  # the innermost loop walks them along the output's rows, where swapped each tile's 8 rows are a row apart. Measured in
  # ResNet-18 b8's step (bench/step_ab.py, Intel Xeon, 2 threads, alternated): that gradient (3 launches) 5.8 swapped,
  # 3.2 ms in its own order, the 512 x 2304 one 1.3 -> 0.6; over 128 pixels (256 x 2304 and 256 x 1152) swapped was
  # faster (3.2 against 4.3 ms, 0.56 against 0.80), as it is alone for 512 x 4608 over 128 (3.6 against 10.0 ms)
  if (rsize := axis_size(reds[0])) is not None and rsize <= SHORT_REDUCE: return
  # NOTE: the two innermost output loops (a batched matmul's batch loop stays outermost)
  outs = [r for r in output_axes(b.ast) if r.arg[-1] is AxisType.LOOP and (axis_size(r) or 0) > 1][-2:]
  if len(outs) != 2 or not axes_of(b.ast, AxisType.UPCAST): return
  def own_strides(r: UOp, other: UOp) -> list[int | None]:
    return [index_stride(idx, reds[0]) for ld in _loads(b.ast)
            if r in (idx := ld.src[0].src[1].get_idx())._ranges and other not in idx._ranges]
  outer, inner = outs
  so, si = own_strides(outer, inner), own_strides(inner, outer)
  if so and si and all(x == 1 for x in so) and all(x not in (0, 1) for x in si):
    b.try_opt(Opt(OptOps.SWAP, output_axes(b.ast).index(outer), output_axes(b.ast).index(inner)))
    return
  # x @ W^T (both inputs read along the reduce): the loop whose input has no vector loads along its lanes (W's rows, a
  # row apart) goes outermost, so that the panel PACK transposes for it (_pack_panel) is reused by every block of x.
  # Measured on a 1024x1024 @ (256x1024)^T (AVX2, LLVM path, a shared machine): 4x the unswapped, unpacked kernel, the
  # same time as the 1024x1024 @ 1024x256 matmul. Only where PACK follows (the C path's gcc gained nothing from it)
  wide = max(axes_of(b.ast, AxisType.UPCAST), key=lambda u: axis_size(u) or 0)
  def strided_wide_lanes(r: UOp, other: UOp) -> bool:
    idxs = [idx for ld in _loads(b.ast)
            if r in (idx := ld.src[0].src[1].get_idx())._ranges and other not in idx._ranges]
    return bool(idxs) and all(wide in idx._ranges and index_stride(idx, wide) != 1 for idx in idxs)
  if _own_vector_accs(b) and so and si and all(x == 1 for x in so + si) and strided_wide_lanes(inner, outer):
    b.try_opt(Opt(OptOps.SWAP, output_axes(b.ast).index(outer), output_axes(b.ast).index(inner)))

def _big_panel_outer(b: _Builder) -> None:
  """A big register-blocked CPU reduce of one big input (over BIG_OPERAND_BYTES) by small ones (all of them within
  PACK_MAX_BYTES, L2's share) where a loop only the small ones depend on runs outside the big one's loops: the big one
  was streamed from memory again for every iteration of that loop, the small ones read from cache. The big one's loops
  go outermost (_panel_loops_outer), so that its panel is read once and reused by every iteration of the small ones'
  loops (_pack_panel then packs it, as a matmul's B). A conv's input gradient over few pixels is such a product: dy^T
  (32 pixels x 512 channels, 64 KiB) @ the filters (512 x 4608, 9.4 MB), whose 4 row tiles each streamed the filters.
  Measured in the step (bench/step_ab.py, Intel Xeon, 2 threads, old and new opts alternated): ResNet-18 b8 64x64's
  512-channel input gradients over 2x2 pixels (3 launches) 8.5 -> 3.7 ms, 256 over 4x4 5.1 -> 2.4, its step's kernels
  84.4 -> 74.9 ms; at b32 128x128 two products 1.34 -> 0.93 and 1.56 -> 1.30 ms."""
  if b.renderer.has_local or len(reds := reduce_axes(b.ast)) != 1 or b.streamed: return
  if _work(b.ast) < BIG_BLOCK_MIN_WORK or not axes_of(b.ast, AxisType.UPCAST): return
  if any(u.op is Ops.BUFFERIZE for u in b.ast.toposort()): return
  lds = [ld for ld in _loads(b.ast) if reds[0] in ld.src[0]._ranges]
  big = [ld for ld in lds if _buffer_bytes(ld) >= BIG_OPERAND_BYTES]
  small = [ld for ld in lds if ld not in big]
  if len({ld.src[0].src[0] for ld in big}) != 1 or not small or sum(_buffer_bytes(ld) for ld in small) > PACK_MAX_BYTES:
    return
  # NOTE: only a big input read across its rows (a stride along the reduce): one read along them streams again at the
  # prefetchers' pace, and _reorder_for_reuse's order (the other's panel packed) was faster. Measured in the LSTM's
  # step (bench/step_ab.py, Intel Xeon, 2 threads): its output layer's 2000 x 256 weight gradient over 512 tokens (the
  # big one 4 MB, read along the tokens) 2.3 ms in that order, 2.6 with the big one's loop outermost
  if any(index_stride(ld.src[0].src[1].get_idx(), reds[0]) == 1 for ld in big): return
  # NOTE: its panel must be one PACK can copy (a buffer the kernel also stores to is not)
  if big[0] not in packable_loads(b.ast): return
  loops = [r for r in output_axes(b.ast) if r.arg[-1] is AxisType.LOOP and (axis_size(r) or 0) > 1]
  mine = {r for ld in big for r in ld.src[0]._ranges}
  if not any(r not in mine and any(o in mine for o in loops[i + 1:]) for i, r in enumerate(loops)): return
  if _panel_loops_outer(b, big[0].src[0].src[0]): b.streamed = True

# the most bytes of a streamed inner operand one block of the reduce reads (_kblock_streamed_rows)
ROWS_BLOCK_BYTES = 1024 * 1024

def _kblock_streamed_rows(b: _Builder) -> None:
  """KBLOCK a big register-blocked CPU reduce whose inner operand (the loads the innermost output loop reads) is walked
  across its rows (a stride along the reduce) and read whole again for every iteration of an outer loop it does not
  depend on: X of a weight gradient dY^T X over 1024 tokens, its 8 rows of a tile half a cache line of each token's row
  3 KiB apart, all 768 rows (3 MiB) again for each of the 64 tiles of dY's 3072 lanes; the filters of a conv's input
  gradient (4.7 MiB) again for each image. Over ROWS_BLOCK_BYTES it was streamed from memory each time; blocked, the
  reduce's outer part runs outermost and one block of it stays in L2 across those iterations, for the price of the
  partial sums going through the output once a block. Not where it is read along the reduce (A of A @ B: the
  prefetchers stream its rows, and a 1024^3 matmul blocked by 512 ran 0.82x numpy where unblocked it ran 0.90x:
  _pack_panel). Measured in the steps (bench/step_ab.py, Intel Xeon, AVX-512, 2 threads, alternated): the D768 block's
  (768, 3072), (3072, 768) and (2304, 768) weight gradients 25.9 -> 23.3, 24.2 -> 22.5, 17.9 -> 16.9 ms ((768, 768)
  5.36 -> 5.48; its step's launches 228.2 -> 219.7); ResNet-18 b32 128x128's 256-channel input gradient over 4x4 pixels
  11.1 -> 6.3 ms (b8's, over 1.2 MiB of filters, 0.52 -> 0.54). Blocks of the (768, 3072) one's X: unblocked 28.7 ms,
  512 tokens (1.5 MiB) 25.3, 256 (768 KiB) 23.9, 128 25.6"""
  if b.renderer.has_local or not _own_vector_accs(b) or _work(b.ast) < BIG_BLOCK_MIN_WORK: return
  if any(o.op in (OptOps.PACK, OptOps.KBLOCK) for o in b.opts) or not (ups := axes_of(b.ast, AxisType.UPCAST)): return
  if not (reds := reduce_axes(b.ast)) or (inner := _innermost_loop(b.ast)) is None: return
  rows = [ld for ld in _loads(b.ast) if inner in ld.src[0]._ranges and any(r in ld.src[0]._ranges for r in reds)]
  if not rows or any(index_stride(ld.src[0].src[1].get_idx(), r) == 1 for ld in rows for r in reds): return
  loops = [r for r in output_axes(b.ast) if r.arg[-1] is AxisType.LOOP and (axis_size(r) or 0) > 1]
  outer = [i for i, r in enumerate(loops) if all(r not in ld.src[0]._ranges for ld in rows)]
  if not outer: return
  k = outer[-1]
  inside = set(loops[k + 1:]) | set(reds) | set(ups)
  footprint = sum(int(prod(axis_size(r) or 0 for r in ld.src[0].src[1]._ranges if r in inside)) * ld.dtype.itemsize
                  for ld in rows)
  if footprint <= ROWS_BLOCK_BYTES: return
  # NOTE: the reduce axis the rows walk with the largest stride (the outermost in memory: a weight gradient's batch)
  idxs = [ld.src[0].src[1].get_idx() for ld in rows]
  _kblock_longest(b, [(j, footprint // size, max(abs(index_stride(idx, red) or 0) for idx in idxs))
                      for j, red in enumerate(reds) if (size := axis_size(red))], ROWS_BLOCK_BYTES)

# the most bytes of its operands one output tile may stream over its whole reduce before the tiles after it no longer
# find them in L2 (_kblock_tile_stream), and the most one block of it reads (each tile's block then stays in L1)
TILE_STREAM_BYTES = PACK_MAX_BYTES // 4
TILE_BLOCK_BYTES = 16 * 1024
CACHE_LINE = 64

def _tile_step_bytes(b: _Builder, ld: UOp) -> int:
  """The bytes of whole cache lines one output tile's load `ld` reads per reduce step: its run along the tile's unit-
  stride upcast axis in lines, once for each step of its other upcast axes."""
  idx, size = ld.src[0].src[1].get_idx(), ld.dtype.itemsize
  run, rows = size, 1
  for u in axes_of(b.ast, AxisType.UPCAST):
    if u not in idx._ranges: continue
    if index_stride(idx, u) == 1: run *= axis_size(u) or 1
    else: rows *= axis_size(u) or 1
  return -(-run // CACHE_LINE) * CACHE_LINE * rows

def _kblock_tile_stream(b: _Builder) -> None:
  """KBLOCK a big register-blocked CPU reduce whose operands are all walked across their rows (each reduce step a row
  or more apart, the weight-gradient form X^T dY) where one output tile's reduce streams over TILE_STREAM_BYTES of
  their cache lines: Winograd's dU = V^T dM per tile position, over 2048 tiles, each 16 x 4 tile reading a 64-byte line
  of each operand per step (256 KiB a tile), the next tile found none of it in L2 (512 KiB, with the rest of both
  operands) and streamed them from L3 again. Blocks of TILE_BLOCK_BYTES a tile (128 steps) stay in L1 across the tiles
  of the block; no PACK then (a packed panel per block ran 2.5x slower). Measured in the steps (bench's kernels,
  AMD Zen 3, AVX2, 2 threads, whole-step passes alternated): the UNet's 32 x 32 over 2048 tiles 4.83 -> 3.71 and 5.23
  -> 4.76 ms (blocks of 64 steps 4.18, 256 4.61), its 64 x 32 4.95 -> 3.90, ResNet-18 b32's 64 x 64 35.8 -> 27.4 (4
  launches; 64 steps 31.8, 256 31.7). Not where a tile streams less: over 512 tiles (64 KiB a tile) 4.18 -> 4.32-4.43
  and 22.1 -> 23.0-24.8 ms."""
  if b.renderer.has_local or not _own_vector_accs(b) or _work(b.ast) < BIG_BLOCK_MIN_WORK: return
  if any(o.op in (OptOps.PACK, OptOps.KBLOCK) for o in b.opts) or not axes_of(b.ast, AxisType.UPCAST): return
  if len(reds := reduce_axes(b.ast)) != 1 or (size := axis_size(reds[0])) is None: return
  lds = [ld for ld in _loads(b.ast) if reds[0] in ld.src[0]._ranges]
  if not lds or not all(abs(index_stride(ld.src[0].src[1].get_idx(), reds[0]) or 0) * ld.dtype.itemsize >= CACHE_LINE
                        for ld in lds): return
  step = sum(_tile_step_bytes(b, ld) for ld in lds)
  if size * step > TILE_STREAM_BYTES: b.tile_blocked = _kblock_longest(b, [(0, step, 0)], TILE_BLOCK_BYTES)

def _pack_candidate(b: _Builder) -> tuple[int, int] | None:
  """(index among packable_loads, panel bytes) of the load a big register-blocked CPU kernel should PACK: one that the
  innermost output loop does not read (every iteration of that loop reuses its panel), read with a layout that is not
  already the packed one (a strided walk along the reduce), over one reduce axis or several (a weight gradient over
  batch x time). None where there is none."""
  if b.renderer.has_local or not reduce_axes(b.ast) or not axes_of(b.ast, AxisType.UPCAST): return None
  if _work(b.ast) < BIG_BLOCK_MIN_WORK: return None
  if (inner := _innermost_loop(b.ast)) is None: return None
  for i, ld in enumerate(packable_loads(b.ast)):
    idx = ld.src[0].src[1]
    if inner in idx._ranges: continue
    rs = panel_ranges(ld)
    sizes = [axis_size(r) or 0 for r in rs]
    packed = [int(prod(sizes[j + 1:])) for j in range(len(rs))]
    if [index_stride(idx.get_idx(), r) for r in rs] == packed: continue
    return i, int(prod(sizes)) * ld.dtype.itemsize
  return None

def _pack_panel(b: _Builder) -> None:
  # a big register-blocked CPU kernel reads a panel of one input (B's columns of a matmul tile: each reduce step the
  # next row, a whole row apart) again for every iteration of the innermost output loop. PACK copies that panel once
  # per tile column into a contiguous per-thread buffer, so the micro-kernel's vector loads walk it unit-stride: no
  # cache-set aliasing of rows a page apart, no TLB miss per row, prefetchable. A panel too big for PACK's buffer is
  # first cache blocked (KBLOCK), then packed. Measured on a 1024 matmul (AVX-512, LLVM path, one thread, a shared
  # machine, ratio to numpy in the same run): KBLOCK 256 alone 0.56x, KBLOCK 256 + PACK 0.72x, KBLOCK 512 + PACK
  # 0.82x, PACK over the whole reduce (a 128 KiB panel) 0.90x.
  # NOTE: only where the renderer builds the vector accumulators and the panel's vector loads itself (acc_widths: the
  # CPU LLVM renderer): the C path leaves vectorization to gcc, which vectorized the packed kernel's reduce loop across
  # K with gathers from the panel (1.8 GFLOPS, 24 unpacked)
  if not _own_vector_accs(b) or b.table_tile or b.tile_blocked or (cand := _pack_candidate(b)) is None: return
  if cand[1] <= PACK_MAX_BYTES:
    b.try_opt(Opt(OptOps.PACK, cand[0]))
    return
  red = reduce_axes(b.ast)[0]
  size, nbytes = axis_size(red) or 0, cand[1]
  fits = [s for s in (2048, 1024, 512, 256, 128, 64)
          if s < size and size % s == 0 and nbytes // (size // s) <= PACK_MAX_BYTES]
  steps = fits[0] if fits else None
  if steps is None or not b.try_opt(Opt(OptOps.KBLOCK, 0, steps)): return
  if (cand := _pack_candidate(b)) is not None: b.try_opt(Opt(OptOps.PACK, cand[0]))

def _pack_operand(b: _Builder) -> None:
  """A big register-blocked CPU reduce whose broadcast operand (one value per row of the tile and reduce step, the rows
  of A @ B) is computed, not loaded: Q + bias in an attention's Q K^T, x + b in (x + b) @ W^T. Each reduce step
  computed each row's value in scalar ops and moved it into a vector register (a splat from a register, on the port
  the FMAs use). PACK_OPERAND computes the operand's panel once per tile in the input's order, the fill's rows as vector
  ops, and each step splats a stored value (a load). Measured in the steps (bench/step_ab.py, Intel Xeon, 2 threads,
  alternated): the D768 block's Q K^T over 64 channels 1.47 -> 1.22 ms, the D256 block's 0.48 -> 0.36; alone, (x + b)
  @ W^T over 3072 into 1024 x 768 22.8-24.0 -> 17.0-21.2 ms."""
  if b.renderer.has_local or not _own_vector_accs(b) or not reduce_axes(b.ast): return
  if _work(b.ast) < BIG_BLOCK_MIN_WORK: return
  if not (ups := axes_of(b.ast, AxisType.UPCAST)): return
  wide = max(ups, key=lambda u: axis_size(u) or 0)
  idx_math = _index_math(b.ast.toposort())
  for i, ld in enumerate(packable_loads(b.ast)):
    if wide in (idx := ld.src[0].src[1])._ranges or not any(u in idx._ranges for u in ups): continue
    operand = pack_operand(b.ast, ld)
    if not _value_alu(operand.toposort(), idx_math): continue
    # NOTE: only where the fill's rows go as lanes: every load of the operand reads the panel's innermost range (in the
    # input's order) unit-stride or not at all; a strided fill computes the values in scalar ops, as the loop did
    if fills_as_lanes(operand, panel_ranges(ld, stored_order=True)[-1]) and \
       b.try_opt(Opt(OptOps.PACK, i, PACK_OPERAND)): return

def _kblock_reduce(b: _Builder) -> None:
  # a big CPU reduce that walks an input with a stride that is a multiple of a page (B of a 1024 matmul: each reduce
  # step reads the next row, 4 KiB on): all the rows one output tile reads map to the same few cache sets, so the panel
  # the tiles reuse never stays in L2 and is fetched again for every tile. KBLOCK makes the reduce's outer part the
  # outermost loop: a panel of KBLOCK_STEPS rows fits those sets and is reused by every tile before the next block (its
  # partial sums go through the output buffer). Measured on a 1024 matmul (AVX-512, both paths, a shared machine):
  # 128/256/512 steps ran 3.1x/3.7x/2.1x the unblocked kernel on LLVM, 256 steps 1.8x on C
  if b.renderer.has_local or len(reds := reduce_axes(b.ast)) != 1 or (size := axis_size(reds[0])) is None: return
  if _work(b.ast) < BIG_BLOCK_MIN_WORK: return
  # NOTE: a packed panel (PACK) is contiguous: its rows no longer alias in the cache
  if any(o.op is OptOps.PACK for o in b.opts): return
  if size <= KBLOCK_STEPS or size % KBLOCK_STEPS: return
  # NOTE: only a panel that output tiles reuse (the load does not depend on some output loop): a load every tile reads
  # its own part of (a column sum's input) is streamed once either way
  outs = [r for r in output_axes(b.ast) if (axis_size(r) or 0) > 1]
  def aliased_panel(ld: UOp) -> bool:
    idx = ld.src[0].src[1].get_idx()
    st = index_stride(idx, reds[0])
    reused = any(r not in idx._ranges for r in outs)
    return reused and st is not None and st not in (0, 1) and (st * ld.dtype.itemsize) % PAGE_BYTES == 0
  if any(aliased_panel(ld) for ld in _loads(b.ast)): b.try_opt(Opt(OptOps.KBLOCK, 0, KBLOCK_STEPS))

def _upcast_strided_reduce(b: _Builder) -> None:
  # a reduce that walks its input with a stride (a column sum) but some output axis reads it contiguously: upcast that
  # axis, so each step of the reduce reads whole cache lines (16 lanes, then 4 more on a big kernel on the CPU)
  if not reduce_axes(b.ast) or axes_of(b.ast, AxisType.UPCAST) or _heavy_reduce(b.ast): return
  loads = [ld.src[0].src[1].get_idx() for ld in _loads(b.ast)]
  reds = reduce_axes(b.ast)
  # NOTE: a load that walks the reduce (a per-channel mean broadcast over the pixels does not: a batchnorm's sum of
  # squares took 4 channel lanes for it, each lane a stream of its own)
  for i, r in enumerate(output_axes(b.ast)):
    if not any(index_stride(idx, r) == 1 and any(x in idx._ranges for x in reds) and
               all(index_stride(idx, x) != 1 for x in reds) for idx in loads):
      continue
    cpu, size = not b.renderer.has_local, axis_size(r) or 0
    first = next((amt for amt in ((16, 8, 4) if cpu else (4,)) if b.try_opt(Opt(OptOps.UPCAST, i, amt))), None)
    # NOTE: 4 more where each thread still gets a tile of its own: the 4 lines are 4 streams the prefetcher follows
    # down the rows, where 4 lanes read a quarter of each line and came back for the rest 3 more times. Measured alone
    # (AMD Zen 2, 2 threads, LLVM path), sums over the rows of (R, N), 4 lanes unrolled by 4 (the rule for any kernel
    # under BIG_BLOCK_MIN_WORK before) -> 64 lanes: (256, 4096) 0.89 -> 0.08 ms, (1024, 768) 0.155 -> 0.040, (64,
    # 65536) 2.08 -> 0.30, (36, 262144) 3.47 -> 1.21; numpy's (one thread) 0.105, 0.093, 0.79, 2.32
    if first is not None and cpu and size // first >= 4 * max_threads(b.renderer):
      b.try_opt(Opt(OptOps.UPCAST, i, 4))
    return

# a reduce this short (every reduce axis together) is unrolled whole even with a heavy body, up to twice HEAVY_BODY ALU
# ops: the gradient of a conv's sliding windows (col2im: a sum over the 4x4 windows that may hold each pixel, its gates
# and index math the heavy part) ran 1.4-1.7x faster unrolled (ResNet-18's, LLVM path: 1.80 -> 1.06 ms, 1.08 -> 0.78)
TINY_REDUCE = 16

def _vector_unroll(b: _Builder) -> bool:
  """A renderer that builds its own vector accumulators (LLVM on the CPU) unrolls by 16 the reduce axis its loads walk
  with stride 1, where no register tile took the lanes: vector loads into vector accumulators. Every REDUCE of the
  kernel gets its own (a fused batchnorm backward sums over two sizes of image), and a heavy body too: its lanes are
  one vector op each, not copies. Measured alone (AVX2, 2 threads): a batchnorm's sum of squares over 32 x 32 x 32 of
  (32, 64, 32, 32), the batch's axis unrolled by 4 (the first) with 4 channel lanes 1.78 ms, the pixels' by 16 0.11,
  by 8 0.17. AVX-512 (AMD Zen 5): ResNet-18 b32's fused batchnorm backward sums of its first stage (two reduces, over
  32x32 and 64x64 images, 22 loads) 7.9 ms alone with no unroll (its body counted as too heavy) -> 3.4 with both."""
  if not _own_vector_accs(b) or axes_of(b.ast, AxisType.UPCAST): return False
  done = False
  for red in (u for u in b.ast.toposort() if u.op is Ops.REDUCE):
    # NOTE: the first contiguous axis of each REDUCE, whether or not its unroll takes
    r = next((r for r in red.src[1:] if axis_size(r) is not None and _reduce_is_contiguous(b, r)), None)
    if r is None: continue
    size = axis_size(r) or 0
    if size < 32 or size % 16: done |= _unroll_short_run(b, red, r, size)
    elif r in (reds := reduce_axes(b.ast)): done |= b.try_opt(Opt(OptOps.UNROLL, reds.index(r), 16))
  return done

def _unroll_short_run(b: _Builder, red: UOp, r: UOp, size: int) -> bool:
  """A reduce's contiguous axis shorter than the 16 lanes (a per-channel sum over 8x8 or 4x4 pixels): it is unrolled
  whole, and so much of the next axis of the contiguous run (its stride in every load that walks the reduce the span
  so far) as makes 16 lanes (all of it where it is shorter): one vector load a step. Measured (2 threads, AMD Zen 5):
  ResNet-18 b8's per-channel sums of (8, 128, 8, 8) alone 0.010 ms with the batch's axis unrolled whole (8 streams 8
  KiB apart) -> 0.004; in b32's step (bench/step_ab.py) its sums over 8x8 and 4x4 pixels about 9.5 -> 3.7 ms."""
  if 16 % size: return False
  idxs = [idx for ld in _loads(b.ast) if r in (idx := ld.src[0].src[1].get_idx())._ranges]
  nxt = next((x for x in red.src[1:] if x is not r and all(index_stride(idx, x) == size for idx in idxs)), None)
  if nxt is None or (nsize := axis_size(nxt)) is None: return False
  # the next axis by the lanes' rest, or whole where it is no longer than that
  if nsize * size <= 16: amt = 0
  elif nsize % (amt := 16 // size): return False
  before = (b.ast, list(b.opts))
  for x, a in ((r, 0), (nxt, amt)):
    if x not in (reds := reduce_axes(b.ast)) or not b.try_opt(Opt(OptOps.UNROLL, reds.index(x), a)):
      b.ast, b.opts = before
      return False
  return True

def _unroll_reduce(b: _Builder) -> None:
  if _vector_unroll(b): return
  if (body := _reduce_body_alu(b.ast)) > HEAVY_BODY:
    reds = reduce_axes(b.ast)
    if reds and body <= 2 * HEAVY_BODY and prod(axis_size(r) or TINY_REDUCE + 1 for r in reds) <= TINY_REDUCE:
      while reduce_axes(b.ast) and b.try_opt(Opt(OptOps.UNROLL, 0, 0)): pass
    return
  for i, r in enumerate(reduce_axes(b.ast)):
    size = axis_size(r)
    if size is None: continue
    # a small reduce is unrolled whole; a large one by 4
    room = MAX_HEURISTIC_UPCAST * 2 // b.upcast_total()
    if size <= min(8, room) and b.try_opt(Opt(OptOps.UNROLL, i, 0)): return
    if size % 4 == 0 and room >= 4 and b.try_opt(Opt(OptOps.UNROLL, i, 4)): return

def _modular_reads(ast: UOp, r: UOp) -> bool:
  """Does a load's index or gate take `r` modulo or divided by something (a strided window's fold: `(4*y + j) % 19`)?"""
  return any(u.op in (Ops.MOD, Ops.IDIV) and r in u._ranges for ld in _loads(ast) for u in ld.src[0].src[1].toposort())

def _transposed_load(ast: UOp, lanes: UOp) -> bool:
  """Does an input vary along the store's lanes (not contiguously) and lie contiguous along another output axis (a
  transpose: _transpose_tile's square tile makes both sides vector loads)?"""
  others = [r for r in output_axes(ast) if r is not lanes]
  idxs = [ld.src[0].src[1].get_idx() for ld in _loads(ast)]
  return any(index_stride(idx, lanes) not in (0, 1) and any(index_stride(idx, r) == 1 for r in others) for idx in idxs)

def _upcast_row(b: _Builder, i: int, size: int) -> bool:
  """_upcast_inner's lanes for a row whose loads take it modulo or divided: the whole row (up to 2 * MAX_UPCAST). A
  longer row that 4 does not divide (a stride-2 conv's input gradient folded into its padded 34-wide rows) takes its
  largest divisor up to MAX_UPCAST, where the plain lanes would be 2 alone. Measured in ResNet-18 b32's step
  (bench/step_ab.py ab, AMD Zen 2, 2 threads, 3 rounds): the 3x3 stride-2 conv's fold over (32, 64, 34, 34) 6.0 -> 4.1
  ms (2 lanes and the rows by 2, against 2 lanes)."""
  if size <= 2 * MAX_UPCAST: return size > 2 and _upcast_whole(b, i, size)
  if size % 4 == 0: return False
  d = max((d for d in range(2, MAX_UPCAST + 1) if size % d == 0), default=0)
  return d > 0 and b.try_opt(Opt(OptOps.UPCAST, i, d))

def _upcast_whole(b: _Builder, i: int, size: int) -> bool:
  """Upcast output axis i whole (two opts where it is over MAX_UPCAST), so every lane's index is a constant plus the
  outer loops' part."""
  parts = [(d, size // d) for d in range(min(size, MAX_UPCAST), 1, -1) if size % d == 0 and size // d <= MAX_UPCAST]
  if not parts or b.upcast_total() * size > MAX_UPCAST_TOTAL: return False
  d, rest = parts[0]
  before = (b.ast, list(b.opts))
  if b.try_opt(Opt(OptOps.UPCAST, i, d)) and (rest == 1 or b.try_opt(Opt(OptOps.UPCAST, i, rest))): return True
  b.ast, b.opts = before  # not half a row
  return False

def _upcast_inner(b: _Builder) -> None:
  # elementwise kernels: vector loads and stores along the output's contiguous axis
  if reduce_axes(b.ast) or axes_of(b.ast, AxisType.UPCAST) or (sidx := _store_idx(b.ast)) is None: return
  outs = output_axes(b.ast)
  inner = [i for i, r in enumerate(outs) if index_stride(sidx, r) == 1]
  if not inner: return
  size = axis_size(outs[inner[0]]) or 0
  # CPU: where loads index the contiguous axis through % or // (a strided window's gradient, unrolled: 16 gated
  # candidates a point, 2-4 of them real), the whole axis as lanes makes each lane's part of those a constant, so the
  # gates of the other lanes fold away; the next axis by 2 as well where it fits. Measured (AVX2, ResNet-18's folds, 4x4
  # candidates): 6x6 pixels 0.53-0.54 -> 0.07-0.11 ms, 10x10 0.72 -> 0.12-0.25, 18x18 1.15-1.17 -> 0.26-0.54 (an init
  # kernel's random weights, its row of 3 taps: 13.9 -> 8.9). Rows up to 32, the longest measured
  # NOTE: not where an input is contiguous along another axis (a transpose, _transpose_tile): the % or // there is a
  # layout's (a group norm's groups of channels, Winograd's tiles back to pixels), no gate folds, and the whole axis as
  # lanes leaves that input's loads gathers. Measured in the steps (bench/step_ab.py ab, AMD Zen 2, 2 threads, 3
  # rounds): the UNet's group norm over (8, 64, 64, 32) channels-last 9.4 -> 1.6 ms with the 8 x 8 tile, its step's
  # launches 194.5 -> 184.5 ms; ResNet-18 b32's Winograd outputs to (N, C, H, W) 9.7 -> 5.5 and 4.6 -> 2.1
  if b.renderer.has_threads and _modular_reads(b.ast, outs[inner[0]]) and \
     not _transposed_load(b.ast, outs[inner[0]]) and _upcast_row(b, inner[0], size):
    nxt = [j for j, r in enumerate(output_axes(b.ast))
           if index_stride(sidx, r) == size and (axis_size(r) or 0) % 2 == 0]
    if nxt and b.upcast_total() * 2 <= MAX_UPCAST_TOTAL: b.try_opt(Opt(OptOps.UPCAST, nxt[0], 2))
    return
  # NOTE: a renderer that packs its own vectors (LLVM on the CPU) gets a whole vector register of float32 lanes (16 on
  # AVX-512), which its compares, selects and arithmetic run on at once
  ws = b.renderer.acc_widths(dtypes.float32)
  amts = ((ws[0],) if ws and ws[0] > 4 else ()) + (4, 2)
  for amt in amts:
    if size % amt or size < amt * 2: continue
    before = (b.ast, list(b.opts))
    if not b.try_opt(Opt(OptOps.UPCAST, inner[0], amt)): continue
    # NOTE: a transposed tile is square at TRANSPOSE_MAX_ROWS (8 x 8 on AVX-512, its 16 store lanes otherwise); the 16
    # lanes stay where no long axis is read contiguously (a short one is taken whole, _transpose_tile)
    if amt > TRANSPOSE_MAX_ROWS and size % TRANSPOSE_MAX_ROWS == 0:
      wide = (b.ast, list(b.opts))
      b.ast, b.opts = before
      if b.try_opt(Opt(OptOps.UPCAST, inner[0], TRANSPOSE_MAX_ROWS)) and \
         _transpose_tile(b, TRANSPOSE_MAX_ROWS, square_only=True): return
      b.ast, b.opts = wide
    _transpose_tile(b, amt)
    return
  if b.renderer.has_threads and 2 <= size < 2 * amts[0]: _upcast_run(b, sidx, outs[inner[0]], amts[0])

def _upcast_run(b: _Builder, sidx: UOp, first: UOp, lanes: int) -> None:
  """CPU: the store's contiguous axis is too short for the lanes (a conv's 3x3 taps: (Cout, Cin, 3, 3) weights and
  their SGD update): its contiguous run goes on along the next axes (each one's stride the product of the sizes
  within it). Those are taken whole while short, and the first long one gives `lanes` lanes, so one tile's stores are
  one run of whole vectors. Measured (2 threads, AMD Zen 5): the SGD update of 512x512x3x3 filters alone 1.2 ms with no
  upcast (a scalar loop over the taps) -> 0.32, C and LLVM alike; in ResNet-18 b8's step its 7 filter updates 2.07 ->
  0.92 ms (bench/step_ab.py)."""
  run, span = [first], axis_size(first) or 0
  while True:
    nxt = [r for r in output_axes(b.ast) if r not in run and index_stride(sidx, r) == span]
    if not nxt or (size := axis_size(nxt[0])) is None: return
    if size % lanes == 0 and size >= 2 * lanes: break
    if span * size > MAX_UPCAST: return
    run.append(nxt[0])
    span *= size
  if b.upcast_total() * span * lanes > MAX_UPCAST_TOTAL: return
  b.try_upcasts([(nxt[0], lanes), *((r, axis_size(r) or 0) for r in run)])

def _transpose_tile(b: _Builder, lanes: int, square_only: bool = False) -> bool:
  """CPU: an elementwise kernel that stores along one axis and loads some input contiguously along another (a
  transpose, channels-first to channels-last): that axis takes as many lanes, a square tile the compiler transposes in
  registers, so the loads are vector loads too rather than one gather per lane. Measured (AVX2, 2 threads, LLVM path):
  (32, 64, 32, 32) -> (32, 32, 32, 64) 4.3 ms with the store's 8 lanes alone, 1.2-1.5 with 8 x 8 (8 x 4 1.7-2.0, 16 x 8
  1.8); a plain copy of its 8 MB 0.9-1.0. True where it took a long axis (square_only: nothing else)."""
  if not b.renderer.has_threads or not (stores := _store_idxs(b.ast)): return False
  # NOTE: at most 8 rows (AVX-512's 16 store lanes by 8, not 16 x 16; _upcast_inner tries 8 x 8 first): 16 rows of 16
  # lanes spilled (160-250 stack moves in a kernel), and rows a plane apart (16 KiB for 64x64 images) share an L1 set,
  # 16 of them over its 12 ways. Measured in the UNet b8 64x64 step (Intel Xeon, AVX-512, 2 threads, alternated):
  # (8, 32, 64, 64) to channels-last 16 x 16 1.78 ms, 16 x 8 1.46, 8 x 8 1.41; (8, 64, 32, 32) 16 x 16 1.52, 16 x 8
  # 1.25; a GroupNorm's scale and shift into a transposed store (2 launches) 2.66 -> 1.69. ResNet-18 b8's (128, 2304)
  # filters transposed: 16 x 16 0.25 ms, 16 x 8 0.41, 8 x 8 0.25
  lanes = min(lanes, TRANSPOSE_MAX_ROWS)
  sidx, short = stores[0], []
  ups = axes_of(b.ast, AxisType.UPCAST)
  for ld in _loads(b.ast):
    idx = ld.src[0].src[1].get_idx()
    # the lanes of the stores in the load's own loops (a cut kernel's piece)
    inner = [r for st in stores if set(st._ranges) & set(idx._ranges) for r in ups if index_stride(st, r) == 1]
    # NOTE: only an input that varies along the store's lanes (read along them it would be a gather): one broadcast
    # along them (a batchnorm's per-channel scale, contiguous along the channels) is one splat a vector as it is, and
    # lanes on its axis split every big input and the output into that many streams a plane apart. Measured in
    # ResNet-18 b32's step (bench/step_ab.py's capture, AMD Zen 2, 2 threads): a batchnorm's backward over (32, 64, 64,
    # 64), 8 channels x 8 pixels 16.2 ms, 8 pixels alone 2.4
    if inner and all(index_stride(idx, r) == 0 for r in inner): continue
    for j, r in enumerate(output_axes(b.ast)):
      size = axis_size(r) or 0
      # NOTE: a short axis read backwards (stride -1: a flipped input) is taken whole too (below); a long one is not
      if index_stride(sidx, r) == 1 or (st := index_stride(idx, r)) not in (1, -1): continue
      if st == -1 or size % lanes or size < 2 * lanes:
        if 2 <= size <= MAX_UPCAST: short.append((j, size))
        continue
      if b.upcast_total() * lanes <= MAX_UPCAST_TOTAL and b.try_opt(Opt(OptOps.UPCAST, j, lanes)): return True
  if square_only: return False
  # NOTE: an input contiguous along a short axis (a conv's 3x3 taps: the weights' Winograd layout, (Cout, Cin, 9) ->
  # (9, Cin, Cout)) takes it whole: each lane's taps are read together, where a loop over the taps outermost swept the
  # whole input once per tap with gathers. Measured in ResNet-18 b32's step (2 threads, AMD Zen 5, its 6 launches at
  # 256 and 512 channels): 16.0 -> 7.1 ms. Also where the taps are read backwards (a conv's input gradient by Winograd:
  # the transposed filters flipped, (Cout, Cin, 9) -> (9, Cout, Cin) reading tap 8 - t). Measured in ResNet-18 b32's
  # step (2 threads, Intel Xeon, alternated): its 512-channel copy's 3 launches 8.6 -> 2.9 ms
  for j, size in short:
    if b.upcast_total() * size <= MAX_UPCAST_TOTAL and b.try_opt(Opt(OptOps.UPCAST, j, size)): return False
  return False

# ---- GPU targets (a launch grid and workgroups: NV, AMD, the PYTHON backend's emulation of them) ----

def _out_threads(b: _Builder) -> int:
  """Threads the kernel launches as it stands: one per output point left after upcasts, times the group reduce."""
  outs = prod(axis_size(r) or 1 for r in output_axes(b.ast))
  return int(outs * prod(axis_size(r) or 1 for r in axes_of(b.ast, AxisType.LOCAL, AxisType.GROUP_REDUCE)))

def _reduce_is_contiguous(b: _Builder, red: UOp) -> bool:
  """Do the big loads (those that depend on the reduce and on an output axis) walk memory with stride 1 along `red`?
  Then threads of a group reduce that take consecutive elements (GROUP) read whole cache lines together."""
  outs = output_axes(b.ast)
  idxs = [idx for ld in _loads(b.ast) if red in (idx := ld.src[0].src[1].get_idx())._ranges
          and any(o in idx._ranges for o in outs)]
  if not idxs: idxs = [idx for ld in _loads(b.ast) if red in (idx := ld.src[0].src[1].get_idx())._ranges]
  return bool(idxs) and all(index_stride(idx, red) == 1 for idx in idxs)

def _group_reduce(b: _Builder) -> None:
  # a reduce with too few outputs to keep a GPU busy (one thread per output with a serial loop) spreads each output's
  # reduce over a group of threads that combine through shared memory. GROUP (the group is the inner part of the axis)
  # where the reduce walks memory contiguously, so the threads of a warp read consecutive elements; GROUPTOP (each
  # thread a contiguous block) where it is strided, so each thread keeps its own cache lines
  if not (b.renderer.has_local and b.renderer.has_shared) or _heavy_reduce(b.ast): return
  # NOTE: a quarter of the target or more already fills the GPU well enough (a matmul's 4x4-upcast threads)
  if (outs := _out_threads(b)) * 4 > GPU_TARGET_THREADS: return
  reds = [(axis_size(r) or 0, -i, r) for i, r in enumerate(reduce_axes(b.ast))]
  if not reds: return
  rsize, ni, red = max(reds)
  contiguous = _reduce_is_contiguous(b, red)
  want = GPU_TARGET_THREADS // max(outs, 1)
  # NOTE: the group's threads are lidx0 (the lowerer's order), so a warp spans the group: for a strided reduce, whose
  # coalescing comes from the output axis' threads in the next dimension, the group stays at most 8 wide
  lo, hi = (b.renderer.wave, 256) if contiguous else (4, 8)
  for amt in (256, 128, 64, 32, 16, 8, 4):
    # NOTE: each thread still reduces at least 4 elements of its own; the shared-memory limit is apply_opt's check
    if not lo <= amt <= min(hi, max(want, lo)) or rsize % amt or rsize // amt < 4: continue
    if b.try_opt(Opt(OptOps.GROUP if contiguous else OptOps.GROUPTOP, -ni, amt)): return

def _group_shared_bytes(b: _Builder, more_locals: int) -> int:
  """Shared memory a group reduce needs with `more_locals` times the workgroup (apply_opt's estimate for GROUP, which
  a LOCAL added later does not check again): a partial per thread and reduce lane. 0 without a group reduce."""
  if not axes_of(b.ast, AxisType.GROUP_REDUCE): return 0
  nbytes = max((u.dtype.itemsize for u in b.ast.toposort() if u.op is Ops.REDUCE), default=4)
  threads = prod(axis_size(r) or 1 for r in axes_of(b.ast, AxisType.LOCAL, AxisType.GROUP_REDUCE))
  return int(threads * more_locals * nbytes * b.upcast_total())

def _locals(b: _Builder) -> None:
  # workgroups: the output axis the store walks contiguously first (a warp's threads write, and mostly read,
  # consecutive addresses), at most a wave wide when other axes can take the rest; blocks of up to GPU_BLOCK threads
  # (with the group reduce's threads), smaller when that leaves fewer than GPU_MIN_BLOCKS blocks on the grid
  if not b.renderer.has_local: return
  wave, group = b.renderer.wave, int(prod(axis_size(r) or 1 for r in axes_of(b.ast, AxisType.GROUP_REDUCE)))
  block = GPU_BLOCK
  while block > wave and _out_threads(b) // block < GPU_MIN_BLOCKS: block //= 2
  budget = block // group
  sidx = _store_idx(b.ast)
  outs = output_axes(b.ast)
  order = sorted(range(len(outs)), key=lambda i: (not (sidx is not None and index_stride(sidx, outs[i]) == 1), -i))
  # NOTE: by range id: a LOCAL of a whole axis retypes it, and the output axes after it move down by one
  for n, rid in enumerate([outs[i].arg[0] for i in order]):
    # NOTE: a group reduce (and TC's lanes) hold a workgroup dimension too; when every dimension is taken, stop
    if budget < 2 or (free := len(b.renderer.local_max or ()) - len(axes_of(b.ast, *LOCAL_TYPES))) < 1: return
    if rid not in (cur := [r.arg[0] for r in output_axes(b.ast)]): continue
    i = cur.index(rid)
    # NOTE: a symbolic axis is padded to a multiple of the workgroup (opt.split_symbolic): sized by its maximum
    sym = axis_size(r := output_axes(b.ast)[i]) is None
    size = int(r.src[0].vmax) if sym else axis_size(r) or 0
    cap = budget if n == len(order) - 1 or free == 1 else min(budget, max(wave, budget // 4))
    for amt in (256, 128, 64, 32, 16, 8, 4, 2):
      if amt > cap or (size % amt and not sym) or size < amt: continue
      if _group_shared_bytes(b, amt) > b.renderer.shared_max: continue
      if b.try_local(Opt(OptOps.LOCAL, i, amt)):
        budget //= amt
        break

def _threads(b: _Builder) -> None:
  if not b.renderer.has_threads or (nt := max_threads(b.renderer)) < 2: return
  if _work(b.ast) < THREAD_MIN_WORK: return
  # the largest output axis that splits evenly across the most threads; among those, one that no vectorized load (one
  # an upcast axis walks with stride 1) depends on: a thread offset in that load's index hides from the C compiler that
  # its lanes are adjacent (the index math wraps), and it stops vectorizing the loop
  outs = output_axes(b.ast)
  lds = _loads(b.ast)
  idxs = [ld.src[0].src[1].get_idx() for ld in lds]
  ups = axes_of(b.ast, AxisType.UPCAST, AxisType.UNROLL)
  vec_idxs = [idx for idx in idxs if any(index_stride(idx, u) == 1 for u in ups)]
  # NOTE: where a panel is packed (PACK), an axis it depends on first: each thread packs only its own panels. Measured
  # alone (2 threads): the 32-lane weight gradients of ResNet-18's 3x3 convs 0.93-0.98 ms with the threads on the input
  # channels, 0.75-0.79 on the lanes' output channels (1.54 on one thread); a 1024^3 matmul the same either way; a GPT-2
  # block's packed matmuls equal or faster (the slowest of its forward 4.5 -> 3.4-4.0 ms, at D256 2.0-2.1 -> 1.6)
  packed = {r for u in b.ast.toposort() if u.op is Ops.BUFFERIZE for r in u.src[0]._ranges}
  # NOTE: a kernel _stream_once reordered splits its outermost loop (the big input's) first: each thread then reads its
  # own part of it once; split on the small input's rows, each thread read all of it. Measured in a conv's step
  # (32x64x32x32, 2 threads): Winograd's output transform 3.7 ms with the threads on its 2 row blocks, 2.8 on the tiles
  if b.streamed and (loops := [(i, r) for i, r in enumerate(outs) if r.arg[-1] is AxisType.LOOP]):
    i, r = loops[0]
    if (axis_size(r) or 0) % nt == 0 and b.try_opt(Opt(OptOps.THREAD, i, nt)): return
  # NOTE: among those, an axis that every big input (BIG_OPERAND_BYTES or more) depends on: split on another, each
  # thread reads all of an input that does not depend on it (a batched product split on one operand's rows reads the
  # other operand twice). Measured in the steps (bench/step_ab.py, Intel Xeon, 2 threads, alternated, three runs for
  # the UNet): the UNet's 8 batched products of its Winograd gradients (36 positions) 21.7 -> 17.8 ms, ResNet-18 b32
  # 128x128's 4 56.2 -> 41.7, the attention's batched products of the D256 block 2.83 -> 2.47, D768 6.72 -> 6.05. Before
  # the packed axis it cost: the UNet's 2x2 stride-2 convs (their 8 MB input split on the pixels, the packed weights on
  # the output channels) 3.2 -> 3.5 ms
  def splits_big(r: UOp) -> bool:
    return all(r in ld.src[0]._ranges for ld in lds if _buffer_bytes(ld) >= BIG_OPERAND_BYTES)
  cands = []
  for i, r in enumerate(outs):
    size = axis_size(r) or 0
    amt = max((t for t in range(2, nt + 1) if size % t == 0), default=0)
    if amt: cands.append((amt, r in packed, splits_big(r), all(r not in idx._ranges for idx in vec_idxs), size, -i))
  for amt, _, _, _, _, ni in sorted(cands, reverse=True):
    if b.try_opt(Opt(OptOps.THREAD, -ni, amt)): return

def _tc_blocking(b: _Builder) -> None:
  # after TC: 2x2 warps per workgroup (lidx1, lidx2) where the tile grid is big enough, and two tiles per warp along
  # the innermost output axis (each A fragment feeds two WMMAs)
  nlocal = 0
  for i in reversed(range(len(output_axes(b.ast)))):
    if nlocal < 2 and (axis_size(output_axes(b.ast)[i]) or 0) >= 4: nlocal += b.try_local(Opt(OptOps.LOCAL, i, 2))
  outs = output_axes(b.ast)
  if outs and (axis_size(outs[-1]) or 0) >= 4: b.try_opt(Opt(OptOps.UPCAST, len(outs) - 1, 2))

def hand_coded_optimizations(ast: UOp, renderer: Renderer) -> list[Opt]:
  """The default opts for `ast` on `renderer` (a list, possibly empty). Never raises KernelOptError."""
  b = _Builder(ast, renderer)
  # a matmul-like reduce in a tensor core's dtypes: one warp per tile, the reduce a WMMA chain (opt.py apply_tc)
  if TC and any(b.try_opt(Opt(OptOps.TC, 0, tc.name)) for tc in renderer.tensor_cores):
    _tc_blocking(b)
    return b.opts
  _build(b)
  # NOTE: a 48-lane tile can leave no output axis that splits evenly across the threads (an odd number of 48-lane
  # tiles by an odd number of row tiles); the 32-lane tile then, where THREAD may split its axis
  def threaded(x: _Builder) -> bool: return any(o.op is OptOps.THREAD for o in x.opts)
  if b.wide and not threaded(b) and max_threads(renderer) > 1:
    b = _Builder(ast, renderer, may_widen=False)
    _build(b)
  # NOTE: still no output axis the threads split evenly (1000 x 1008: 63 tiles of 16 lanes by 125 tiles of 8 rows): the
  # contiguous axis padded to an even number of 32-lane tiles, where that threads the kernel. Measured alone (2 threads,
  # wall, AMD Zen 5): 1000 x 1000 x 1008 10.5 ms on one thread, 5.1 padded to 1024 and threaded (48 lanes padded to
  # 1056 5.4; the rows padded to 1008 under 48 lanes 7.0)
  if not threaded(b) and max_threads(renderer) > 1 and renderer.masked_loads and _work(ast) >= THREAD_MIN_WORK:
    _build(even := _Builder(ast, renderer, may_widen=False, even_tiles=True))
    if threaded(even): b = even
  # NOTE: still unthreaded, the tile having taken every axis the threads could split (the weight gradient of a conv
  # over 3 input channels: its 32 output channels whole as lanes, the 3 x 3 x 3 taps left): the tile again, no upcast
  # taking an output axis' last factor the threads need. Measured alone (2 threads, AMD Zen 5, LLVM; the UNet's first
  # conv, 3 -> 32 channels over batch 8 of 64x64): 32 lanes on one thread 1.13 ms, 16 lanes on each of two 0.58. (On
  # the LLVM path that kernel now takes _contraction_lanes; the C path, with no vector accumulators of its own, this.)
  if not threaded(b) and (nt := max_threads(renderer)) > 1 and _work(ast) >= THREAD_MIN_WORK and output_axes(ast):
    _build(spare := _Builder(ast, renderer, may_widen=False, spare_threads=nt))
    if threaded(spare): b = spare
  return b.opts

def _matvec(b: _Builder) -> bool:
  """A matrix-vector product on a renderer that builds its own vector accumulators (the CPU LLVM renderer): some load
  (the matrix) depends on the reduce and on every output axis, so no lane of a register tile reuses it, and reads the
  reduce with stride 1 (W of x @ W^T with one row of x: an LLM's decode step). The reduce is unrolled by 16 into one
  vector accumulator (vector loads of 16 consecutive weights, converted from int8 or half in registers, one FMA), and
  8 rows share each load of the vector (UPCAST of the matrix's row axis). Measured on the Q8_0 decode step's kernels
  (2 threads, a shared machine): the 32000x1024 output layer 19.8 ms -> 5.7 ms, a 1024x1024 projection
  0.98 -> 0.12 ms, the 2816x1024 FFN ones 0.65 -> 0.32 ms, against the matmul tile (32 rows, the reduce serial)."""
  if b.renderer.has_local or not _own_vector_accs(b) or len(reds := reduce_axes(b.ast)) != 1: return False
  if (rsize := axis_size(red := reds[0])) is None or rsize < 32: return False
  outs = [r for r in output_axes(b.ast) if (axis_size(r) or 0) != 1]
  def matrix(ld: UOp) -> bool:
    idx = ld.src[0].src[1].get_idx()
    return red in idx._ranges and all(r in idx._ranges for r in outs) and index_stride(idx, red) == 1
  mats = [ld for ld in _loads(b.ast) if matrix(ld)]
  # NOTE: and no output axis reads some input contiguously along its lanes (a matmul's B, a conv's input): those kernels
  # get the register tile of _upcast_for_reuse
  if not outs or not mats or any(_vector_axis(b.ast, r) for r in outs): return False
  if not any(rsize % u == 0 and b.try_opt(Opt(OptOps.UNROLL, 0, u)) for u in (16, 8, 4)): return False
  # the rows: the largest output axis with a known size that the matrix walks with a stride
  rows = [(size, -i) for i, r in enumerate(output_axes(b.ast)) if r in outs and (size := axis_size(r))]
  if rows:
    size, ni = max(rows)
    any(size % amt == 0 and b.try_opt(Opt(OptOps.UPCAST, -ni, amt)) for amt in (8, 4, 2))
  return True

# a contraction whose reduce axes together are at least this long, into at most this many outputs (_contraction_lanes)
CONTRACTION_MIN_REDUCE, CONTRACTION_MAX_OUT = 1 << 12, 1 << 12

def _outer_product_loads(ast: UOp, reds: list[UOp], inner: UOp, outs: list[UOp]) -> list[UOp] | None:
  """The two loads of a reduce over `reds` where both read `inner` with stride 1 and every output axis in `outs` varies
  exactly one of them (an outer product summed along the reduce: _contraction_lanes, _dot_tile); None otherwise."""
  lds = [ld for ld in _loads(ast) if set(reds) & ld.src[0].src[1].get_idx()._ranges]
  idxs = [ld.src[0].src[1].get_idx() for ld in lds]
  if len(idxs) != 2 or not all(index_stride(idx, inner) == 1 for idx in idxs): return None
  return None if any((r in idxs[0]._ranges) == (r in idxs[1]._ranges) for r in outs) else lds

def _contraction_lanes(b: _Builder) -> bool:
  """An outer product summed over a long reduce that both its loads walk with stride 1, into few outputs: the weight
  gradient of a conv over 3 input channels, dW (32, 3, 3, 3) = dY (32 channels; 8 x 64 x 64) against the padded
  input's 27 shifted windows. No output axis of 16 or more reads an input with stride 1, so the register tile took 16
  output channels as lanes gathered 4096 floats apart (a packed panel) and the 3 x 3 x 3 taps as short rows. Here the
  reduce's innermost axis is unrolled by 16 into vector accumulators (vector loads of both inputs), and the tile is x
  steps of an axis one load varies along by y of one the other varies along: x * y accumulators within the budget, as
  many FMAs a load as that allows (x * y / (x + y)), the axis each load reads with the shortest stride (a shifted window
  of the same cache lines). Measured in the UNet's step (bench/step_ab.py, alternated; Intel Xeon, AVX-512, 2 threads):
  its first conv's weight gradient 1.75 -> 1.00 ms (8 output channels x 3 taps; 4 x 3 was 0.77 where 8 x 3 was 0.64,
  2 x 3 x 3 1.60), its last conv's (1x1, 32 -> 3 channels: 3 x 8 accumulators) 1.14 -> 0.17."""
  if b.renderer.has_local or not _own_vector_accs(b): return False
  reds, outs = reduce_axes(b.ast), output_axes(b.ast)
  if not reds or not outs or any(axis_size(r) is None for r in reds + outs): return False
  size = {r: int(axis_size(r) or 0) for r in reds + outs}
  if prod(size[r] for r in reds) < CONTRACTION_MIN_REDUCE or prod(size[r] for r in outs) > CONTRACTION_MAX_OUT:
    return False
  inner, long = reds[-1], [r for r in outs if size[r] > 1]
  # an outer product: every output axis (of more than one step) varies exactly one of the two loads
  if size[inner] % 16 or (lds := _outer_product_loads(b.ast, reds, inner, long)) is None: return False
  big = [ld.src[0].src[1].get_idx() for ld in lds]
  sides = [[r for r in long if r in idx._ranges] for idx in big]
  if not all(sides) or any(size[r] >= 16 and _vector_axis(b.ast, r) for r in long): return False
  accs = b.tile_budget // 16
  def steps(side: list[UOp], idx: UOp) -> list[tuple[UOp, int, int]]:
    return [(r, a, abs(index_stride(idx, r) or 1 << 30)) for r in side for a in range(1, min(size[r], accs) + 1)
            if size[r] % a == 0]
  pairs = [(x, y) for x in steps(sides[0], big[0]) for y in steps(sides[1], big[1]) if x[1] * y[1] <= accs]
  if not pairs or not b.try_opt(Opt(OptOps.UNROLL, reds.index(inner), 16)): return False
  x, y = max(pairs, key=lambda p: (p[0][1] * p[1][1] / (p[0][1] + p[1][1]), p[0][1] * p[1][1], -p[0][2] - p[1][2]))
  b.try_upcasts([(r, a) for r, a, _ in (x, y) if a > 1])
  return True

def _dot_tile(b: _Builder) -> bool:
  """A mid-size A @ W^T (MID_BLOCK_MIN_WORK up to BIG_BLOCK_MIN_WORK) on a renderer that builds its own vector
  accumulators: both loads walk the one reduce with stride 1, and no output axis reads an input with stride 1 (no
  vector axis: a register tile's lanes would be scalar loads, and at this size PACK's transposed panel costs as much as
  the product). The reduce is unrolled by one vector register's lanes into vector accumulators (vector loads of both
  inputs, each accumulator summed across its lanes once at the end), and the tile is x rows of one input's axis by y of
  the other's: x * y accumulators in half the vector registers (the rest hold the x + y loads of a step), as many FMAs
  a load as that allows, the more rows on the smaller input's axis (each load of the bigger one serves them all).
  Measured in the LSTM's step (bench/step_ab.py's capture, AMD Zen 2, AVX2, 2 threads): its recurrent h @ W_hh^T, 16 x
  256 @ (1024 x 256)^T, 31 launches: a 4 x 4 tile with the reduce unrolled by 4 5.25 ms; 8 lanes by 4 h rows x 2 W
  rows 2.99-3.06; 2 x 4 3.19; 8 x 1 3.25; 4 x 4 3.70 (16 accumulators: spilled); 16 lanes by 4 x 2 3.99."""
  if b.renderer.has_local or len(reds := reduce_axes(b.ast)) != 1: return False
  if (dt := _reduce_dtype(b)) is None or not (ws := b.renderer.acc_widths(dt)) or not b.renderer.vector_registers:
    return False
  if not MID_BLOCK_MIN_WORK <= _work(b.ast) < BIG_BLOCK_MIN_WORK: return False
  red, lanes = reds[0], ws[0]
  if (rsize := axis_size(red)) is None or rsize % lanes or rsize < 2 * lanes: return False
  outs = [r for r in output_axes(b.ast) if axis_size(r) != 1]
  if not outs or any(axis_size(r) is None or _vector_axis(b.ast, r) for r in outs): return False
  # an outer product: every output axis varies exactly one of the two loads
  if (lds := _outer_product_loads(b.ast, reds, red, outs)) is None: return False
  idxs = [ld.src[0].src[1].get_idx() for ld in lds]
  # each side's rows from its longest axis; the smaller input's side first (it takes the larger factor on a tie)
  sides = sorted(((_buffer_bytes(ld), max((r for r in outs if r in idx._ranges), key=lambda r: axis_size(r) or 0))
                  for ld, idx in zip(lds, idxs)), key=lambda s: s[0])
  (_, rx), (_, ry) = sides
  accs = b.renderer.vector_registers // 2
  def amts(r: UOp) -> list[int]: return [a for a in range(1, accs + 1) if (axis_size(r) or 0) % a == 0]
  pairs = [(x, y) for x in amts(rx) for y in amts(ry) if x * y <= accs]
  x, y = max(pairs, key=lambda p: (p[0] * p[1] / (p[0] + p[1]), p[0] * p[1], p[0]))
  if not b.try_opt(Opt(OptOps.UNROLL, 0, lanes)): return False
  b.try_upcasts([(r, a) for r, a in ((rx, x), (ry, y)) if a > 1])
  return True

def _build(b: _Builder) -> None:
  # CPU: a store loop compared against constants (cat, pad) becomes several branch-free loops, before anything else.
  # NOTE: not a matmul-like reduce (the weight gradient of a chunked projection: a cat of matmuls): the opt limits
  # count the upcasts of every piece together, so only one piece would get register tiles (measured: the 768x256x1024
  # gradient of a fused qkv projection ran 14x slower cut than whole, its gated loads blocked 32x8)
  if b.renderer.has_threads and not _reuse_reduce(b.ast): b.try_opt(Opt(OptOps.CUT))
  if _matvec(b) or _contraction_lanes(b) or _dot_tile(b):
    _threads(b)
    return
  _upcast_for_reuse(b)
  _stream_once(b)
  _reorder_for_reuse(b)
  _big_panel_outer(b)
  _kblock_streamed_rows(b)
  _kblock_tile_stream(b)
  _pack_panel(b)
  _kblock_reduce(b)
  _pack_operand(b)
  _upcast_strided_reduce(b)
  _group_reduce(b)
  _unroll_reduce(b)
  _upcast_inner(b)
  _locals(b)
  _threads(b)
