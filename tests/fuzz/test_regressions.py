"""Kernels the fuzzer found miscompiled, as its reducer left them (the reproducer's state: pyrender text, opts,
DEFINE_VAR values, input seed), checked again on the backends that failed."""
import pytest
from fuzz.campaign.levels import KernelLevel
from fuzz.campaign.backends import open_backends

def state(graph: str, opts=None, var_vals=None, seed=0):
  return {"graph": graph.strip() + "\n", "opts": opts, "var_vals": var_vals or {}, "seed": seed}

# name -> (backends, reproducer state); each was a finding before its fix (see the comment)
FIXED = {
  # the amd and nv backends interpreted a GPU lowering that the PYTHON interpreter runs (shared memory, barriers) as the
  # generic GPU: an AMD workgroup (2, 2, 80) failed the generic z limit of 64 (AMD's is 1024); the interpreter now runs
  # as the GPU the program was lowered for (EMULATE and its arch)
  "amd_workgroup_checked_against_the_generic_gpu": (["amd", "nv"], state("""
c0 = UOp.range(2, 0, AxisType.LOOP)
c1 = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(1600), arg=0).index(c0).store(UOp.const(dtypes.float32, 0.0).reduce(UOp.range(2, 4, AxisType.REDUCE), arg=Ops.ADD))
c2 = c1.end(c0, UOp.range(4, 1, AxisType.LOOP), UOp.range(4, 2, AxisType.LOOP), UOp.range(5, 3, AxisType.LOOP))
ast = UOp.sink(c2)""", [["GROUP", 0, 2], ["LOCAL", 3, 0], ["LOCAL", 2, 0], ["LOCAL", 1, 2], ["LOCAL", 1, 0], ["LOCAL", 0, 0]],
    seed=1138718869)),
  # a gather index read from a local BUFFERIZE: at SPEC=2 the gate's z3 translation walked through the LOAD into the
  # register's STORE chain (void: "dtypes.void has no sort") and codegen failed on every backend; a LOAD is a free value
  "gather_index_from_a_local_bufferize": (["cpu", "python"], state("""
c0 = UOp.range(2, 0, AxisType.LOOP)
c1 = UOp.range(6, 1, AxisType.LOOP)
c2 = UOp(Ops.BUFFERIZE, dtypes.int64, (UOp(Ops.DEFINE_GLOBAL, dtypes.int64.ptr(6), arg=2).index(c1).load(), c1))
c3 = UOp(Ops.INDEX, dtypes.int64.ptr(6), (c2, c0)).load().cast(dtypes.index)
c4 = (c3 < UOp.const(dtypes.index, 0)).ne(UOp.const(dtypes.bool, True)) & (c3 < UOp.const(dtypes.index, 2))
c5 = UOp(Ops.DEFINE_GLOBAL, dtypes.int64.ptr(2), arg=1).index(c4.where(c3, UOp.invalid())).load()
c6 = UOp(Ops.DEFINE_GLOBAL, dtypes.int64.ptr(2), arg=0).index(c0).store(c5)
ast = UOp.sink(c6.end(c0))""", [], seed=3)),
  # a one-hot select sum collapsed to its picked value (codegen/gather.py) kept a picked -0.0, where the sum (from +0.0)
  # gives +0.0: bfloat16's bits 0x8000 against 0 (campaign seed 32); the collapse adds 0.0 to a float now
  "select_sum_of_a_negative_zero": (["cpu", "llvm", "python"], state("""
c0 = UOp.range(2, 0, AxisType.REDUCE)
c1 = UOp.const(dtypes.int32, 0).eq(c0.cast(dtypes.int32)).where(UOp.const(dtypes.bfloat16, -0.0), UOp.const(dtypes.bfloat16, 0.0))
c2 = UOp(Ops.DEFINE_GLOBAL, dtypes.uint16.ptr(1), arg=0).index(UOp.const(dtypes.index, 0)).store(c1.reduce(c0, arg=Ops.ADD).bitcast(dtypes.uint16))
ast = UOp.sink(c2)""", [], seed=1929646246)),
  # the CUDA renderer wrote float64's -inf as `-__longlong_as_double(...)` without the parentheses the C renderers put
  # around a negative constant, so x - (-inf) was `x--__longlong_as_double(...)` and NVRTC refused it (a directed run
  # of the kernel fuzzer's select sums)
  "cuda_float64_negative_infinity_subtracted": (["nv"], state("""
c0 = UOp(Ops.DEFINE_GLOBAL, dtypes.float64.ptr(2), arg=1).index(UOp.const(dtypes.index, 1)).load()
c1 = UOp(Ops.SUB, dtypes.float64, (c0, UOp.const(dtypes.float64, float('-inf'))))
c2 = UOp(Ops.DEFINE_GLOBAL, dtypes.float64.ptr(1), arg=0).index(UOp.const(dtypes.index, 0)).store(c1.exp2())
ast = UOp.sink(c2)""", [], seed=0)),
  # AMD had no POW (the renderer refused it: the campaign's most frequent finding); codegen decomposes it now
  "pow_on_amd": (["amd"], state("""
c0 = UOp(Ops.DEFINE_GLOBAL, dtypes.float64.ptr(2), arg=1).index(UOp.const(dtypes.index, 1)).load()
c1 = UOp(Ops.POW, dtypes.float64, (c0, UOp.const(dtypes.float64, 0.0)))
c2 = UOp(Ops.DEFINE_GLOBAL, dtypes.float64.ptr(13), arg=0).index(UOp.const(dtypes.index, 0)).store(c1)
ast = UOp.sink(c2)""", [], seed=1536553671)),
  # exp2 as a polynomial (AMD has no float64 exp2) clamped its argument to float32's range: 2**144 came out 2**129
  "float64_exp2_polynomial_range": (["amd"], state("""
c0 = UOp.range(13, 0, AxisType.LOOP)
c1 = c0.cast(dtypes.float64)
c2 = UOp(Ops.MULACC, dtypes.float64, (c1, c1, UOp.const(dtypes.float64, 0.0)))
c3 = UOp(Ops.DEFINE_GLOBAL, dtypes.float64.ptr(15), arg=0).index(c0).store(c2.exp2())
ast = UOp.sink(c3.end(c0))""", [], seed=209883746)),
  # the NV host shim's build (g++ -march=native on an AVX512-FP16 host) emitted masked vmovsh that binutils 2.40 cannot
  # assemble: a float16 kernel did not build (the shim now builds without -march=native)
  "nv_host_float16_build": (["nv"], state("""
c0 = UOp.range(2, 0, AxisType.LOOP)
c1 = UOp.const(dtypes.float16, 0.0)
c2 = UOp(Ops.FDIV, dtypes.float16, (c1.maximum(c0.cast(dtypes.float16)), c1.reduce(UOp.range(1, 2, AxisType.REDUCE), arg=Ops.MUL)))
c3 = UOp(Ops.DEFINE_GLOBAL, dtypes.float16.ptr(21), arg=0).index(c0).store(c2)
c4 = UOp(Ops.DEFINE_GLOBAL, dtypes.fp8e5m2.ptr(651), arg=1).index(c0 * UOp.const(dtypes.index, 93))
c5 = UOp.range(1, 1, AxisType.LOOP)
c6 = c4.store(c5.cast(dtypes.fp8e5m2).log2())
ast = UOp.sink(c3.end(c0), c6.end(c0, c5))""", [], seed=532256361)),
  # after CUT (the heuristics' opt: opts None) two store loops shared one gated INDEX; line_rewrite defined its ungated
  # INDEX at the first store, inside the first loop, and the second loop's store used it (LLVM: "does not dominate")
  "cut_loops_share_a_gated_store_index": (["llvm", "python", "cpu"], state("""
c0 = UOp.invalid()
c1 = UOp(Ops.DEFINE_GLOBAL, dtypes.int8.ptr(35), arg=0).index(UOp.const(dtypes.bool, False).where(UOp.const(dtypes.index, 0), c0))
c2 = UOp.range(5, 0, AxisType.LOOP)
c3 = UOp(Ops.DEFINE_GLOBAL, dtypes.uint16.ptr(7), arg=2).index(c2).load()
c4 = c3.cast(dtypes.index)
c5 = (c4 < UOp.const(dtypes.index, 35)).where(c4, c0)
c6 = UOp(Ops.DEFINE_GLOBAL, dtypes.int8.ptr(35), arg=1).index(c5).load()
c7 = (c2 < UOp.const(dtypes.index, 3)).where(c2, c0)
c8 = UOp(Ops.DEFINE_GLOBAL, dtypes.int8.ptr(35), arg=3).index(c7).load()
c9 = c1.store(c6 + c8).end(c2)
ast = UOp.sink(c9)""", None, seed=1644949367)),
  # a store in a loop of 0 iterations ran once: drop_unused_end dropped the loop, the linearizer hoisted the store
  "empty_loop_store": (["cpu", "python"], state("""
c0 = UOp.const(dtypes.index, 0)
c1 = UOp.range(0, 0, AxisType.LOOP)
c2 = UOp(Ops.DEFINE_GLOBAL, dtypes.int8.ptr(4), arg=0).index(c0 + (c0 + c1))
c3 = c2.store(UOp.const(dtypes.int8, 0)).end(c1)
ast = UOp.sink(c3)""", [], seed=1333977006)),
  # under a range of 0 the index math folds as if r = 0 (bounds (0, 0)) and a load at a folded index went out of bounds
  "empty_loop_folded_load": (["python", "cpu"], state("""
c0 = UOp.const(dtypes.index, 0)
c1 = UOp.range(0, 0, AxisType.LOOP)
c2 = UOp.const(dtypes.index, 2)
c3 = ((c1 + c2) * c2) + c0
c4 = (c1 * UOp.const(dtypes.index, 4)) + c3
c5 = UOp(Ops.DEFINE_GLOBAL, dtypes.bool.ptr(4), arg=1).index(c4).load()
c6 = UOp(Ops.BUFFERIZE, dtypes.uint32, (c5.where(UOp.const(dtypes.uint32, 0), UOp.const(dtypes.uint32, 1)),))
c7 = UOp(Ops.INDEX, dtypes.uint32.ptr(2), (c6, c1))
c8 = UOp(Ops.DEFINE_GLOBAL, dtypes.uint32.ptr(2), arg=0).index(c0 + c1).store(c7.load())
ast = UOp.sink(c8.end(c1))""", [], seed=350129398)),
  # PADTO masked only the INDEXes that use the padded range: this store's address had folded to 0
  "padto_store_without_the_range": (["cpu", "python"], state("""
c0 = UOp.range(1, 0, AxisType.LOOP)
c1 = UOp.range(1, 1, AxisType.LOOP)
c2 = UOp.range(1, 2, AxisType.LOOP)
c3 = UOp(Ops.DEFINE_GLOBAL, dtypes.float16.ptr(8), arg=0).index(c0 + (c1 + c2))
c4 = UOp(Ops.DEFINE_GLOBAL, dtypes.float16.ptr(8), arg=1).index(c2).load()
c5 = UOp(Ops.FDIV, dtypes.float16, (UOp.const(dtypes.float16, 1.25), c4))
ast = UOp.sink(c3.store(c5).end(c0, c1, c2))""", [["PADTO", 2, 2]], seed=2113558821)),
  # the range that fills a local BUFFERIZE was taken for an output axis and put on the grid
  "bufferize_fill_range_on_the_grid": (["python", "cpu"], state("""
c0 = UOp.const(dtypes.float16, 0.0)
c1 = UOp(Ops.BUFFERIZE, dtypes.float16, (c0, UOp.range(3, 0, AxisType.LOOP)))
c2 = UOp(Ops.INDEX, dtypes.float16.ptr(3), (c1, UOp.const(dtypes.index, 2)))
c3 = UOp(Ops.DEFINE_GLOBAL, dtypes.bool.ptr(9), arg=0).index(UOp.const(dtypes.index, 0)).store(c2.load().eq(c0))
ast = UOp.sink(c3)""", [], seed=1864029542)),
  # the heuristics split a BUFFERIZE fill range: "local BUFFERIZE needs constant-size ranges"
  "bufferize_fill_range_split": (["python", "cpu"], state("""
c0 = UOp.const(dtypes.index, 0)
c1 = UOp(Ops.BUFFERIZE, dtypes.int32, (UOp.const(dtypes.int32, 0), UOp.range(6, 0, AxisType.LOOP)))
c2 = UOp(Ops.INDEX, dtypes.int32.ptr(6), (c1, c0))
c3 = UOp(Ops.BUFFERIZE, dtypes.int32, (c2.load(),))
c4 = UOp(Ops.INDEX, dtypes.int32.ptr(2), (c3, c0))
c5 = UOp(Ops.DEFINE_GLOBAL, dtypes.int32.ptr(1), arg=0).index(c0).store(c4.load())
ast = UOp.sink(c5)""", None, seed=498728975)),
  # an axis of size 0 was put on the launch grid (a launch no runtime accepts)
  "empty_axis_on_the_grid": (["python", "cpu"], state("""
c0 = UOp.range(2, 0, AxisType.LOOP)
c1 = UOp.range(0, 1, AxisType.LOOP)
c2 = UOp(Ops.DEFINE_GLOBAL, dtypes.fp8e5m2.ptr(15), arg=0).index(c0 + c1).store(UOp.const(dtypes.fp8e5m2, 0.5))
ast = UOp.sink(c2.end(c0, c1))""", [], seed=1182723707)),
  # a padded range inside a range of 0: the loops were not properly nested around the PADTO mask
  "padto_inside_an_empty_loop": (["cpu", "python"], state("""
c0 = UOp.range(0, 0, AxisType.LOOP)
c1 = UOp.range(1, 1, AxisType.LOOP)
c2 = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(1), arg=0).index(c0 + c1).store(UOp.const(dtypes.float32, 0.0))
ast = UOp.sink(c2.end(c0, c1))""", [["PADTO", 1, 2]], seed=2126335847)),
  # C and CUDA rendered `val--2.75f` (a decrement): a negative literal needs parentheses
  "sub_of_a_negative_literal": (["cpu", "nv", "python"], state("""
c0 = UOp.const(dtypes.index, 0)
c1 = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(1), arg=1).index(c0).load()
c2 = UOp(Ops.SUB, dtypes.float32, (c1, UOp.const(dtypes.float32, -2.75)))
c3 = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(1), arg=0).index(c0).store(c2)
ast = UOp.sink(c3)""", [], seed=2037160329)),
  # PADTO masked a gather's index built from the unmasked load, which then read past the end in the extra iterations
  "padto_gather": (["python", "amd", "cpu"], state("""
c0 = UOp.range(1, 0, AxisType.LOOP)
c1 = UOp.const(dtypes.index, 13)
c2 = UOp.range(13, 1, AxisType.LOOP)
c3 = UOp(Ops.DEFINE_GLOBAL, dtypes.uint64.ptr(13), arg=0).index((c0 * c1) + c2)
c4 = UOp(Ops.DEFINE_GLOBAL, dtypes.int8.ptr(13), arg=2).index(c2).load()
c5 = c4.cast(dtypes.index)
c6 = (c5 < UOp.const(dtypes.index, 0)).ne(UOp.const(dtypes.bool, True))
c7 = (c6 & (c5 < c1)).where(c5, UOp.invalid())
c8 = UOp(Ops.DEFINE_GLOBAL, dtypes.uint64.ptr(13), arg=1).index(c7).load()
ast = UOp.sink(c3.store(c8).end(c0, c2))""", [["PADTO", 1, 16]], seed=1457518314)),
  # every thread of a group reduce stored NaN, with different sign/payload bits: the PYTHON emulator called it a race
  "group_reduce_stores_nan": (["python", "nv"], state("""
c0 = UOp.range(31, 1, AxisType.REDUCE)
c1 = UOp.const(dtypes.index, 3)
c2 = (c0 * UOp.const(dtypes.index, 31)) + (c0 + UOp.const(dtypes.index, -3))
c3 = (c0 < c1).ne(UOp.const(dtypes.bool, True)).where(c2, UOp.invalid())
c4 = UOp(Ops.DEFINE_GLOBAL, dtypes.float64.ptr(1953), arg=1).index(c3).load()
c5 = UOp(Ops.DEFINE_GLOBAL, dtypes.float64.ptr(4), arg=2).index(c1).load()
c6 = c4.reduce(UOp.range(1, 0, AxisType.REDUCE), c0, arg=Ops.MAX) + c5.sqrt()
c7 = UOp(Ops.DEFINE_GLOBAL, dtypes.float64.ptr(1), arg=0).index(UOp.const(dtypes.index, 0)).store(c6)
ast = UOp.sink(c7)""", [["GROUP", 1, 0]], seed=292154458)),
  # a gated store (its lane masked off) and an ungated store to the same address share one hash-consed INDEX, which
  # line_rewrite defined inside the gated store's IF: LLVM "does not dominate all uses", PYTHON a None value
  "gated_and_ungated_store_share_an_index": (["llvm", "python", "cpu"], state("""
c0 = UOp.range(4, 0, AxisType.LOOP)
c1 = c0 < UOp.const(dtypes.index, 1)
c2 = UOp.invalid()
c3 = UOp.range(4, 1, AxisType.LOOP)
c4 = UOp(Ops.BUFFERIZE, dtypes.fp8e5m2, (c3.cast(dtypes.fp8e5m2), c3))
c5 = c1.where(c0 + UOp.const(dtypes.index, 3), c2)
c6 = UOp(Ops.INDEX, dtypes.fp8e5m2.ptr(4), (c4, c5))
c7 = UOp(Ops.DEFINE_GLOBAL, dtypes.fp8e5m2.ptr(4), arg=0).index(c1.where(c0, c2)).store(c6.load())
c8 = UOp(Ops.DEFINE_GLOBAL, dtypes.uint16.ptr(4), arg=1).index(c0).store(UOp.const(dtypes.uint16, 0).reduce(UOp.range(1, 2, AxisType.REDUCE), arg=Ops.MAX))
ast = UOp.sink(c7.end(c0), c8.end(c0))""", None, seed=2009057100)),
  # POW's decomposition (AMD) gave NaN for (-inf)**y with a non-integer y: a negative base and a non-integer exponent
  # is NaN only for a finite base (second 10-minute campaign over all five backends, 104 nodes reduced to 14)
  "pow_of_negative_infinity_on_amd": (["amd"], state("""
c0 = UOp.range(2, 1, AxisType.LOOP)
c1 = UOp(Ops.DEFINE_GLOBAL, dtypes.fp8e5m2.ptr(780), arg=2).index(c0).load()
c2 = UOp(Ops.POW, dtypes.fp8e5m2, (UOp.const(dtypes.fp8e5m2, 2.0) * UOp.const(dtypes.fp8e5m2, float('-inf')), c1))
c3 = UOp(Ops.DEFINE_GLOBAL, dtypes.fp8e5m2.ptr(156), arg=0).index(c0).store(c2)
ast = UOp.sink(c3.end(c0))""", [], seed=663674872)),
  # not a compiler bug: the budget oracle's float64 MUL REDUCE bound was 0 ((1+u)**(2n) with 1 + u == 1 in float64), so
  # x**16 computed in another order (one ulp off) was a "value mismatch" on python, nv and amd (same campaign, 108 -> 11)
  "float64_mul_reduce_budget": (["cpu", "python", "nv", "amd"], state("""
c0 = UOp.const(dtypes.index, 0)
c1 = UOp(Ops.DEFINE_GLOBAL, dtypes.float64.ptr(13), arg=1).index(c0).load()
c2 = UOp(Ops.DEFINE_GLOBAL, dtypes.float64.ptr(13), arg=0).index(c0).store(c1.reduce(UOp.range(16, 0, AxisType.REDUCE), arg=Ops.MUL))
ast = UOp.sink(c2)""", None, seed=389490436)),
  # pyrender had no literal for a NaN with a payload (here a BITCAST of an int64 const folded to one), so the lowered
  # program's round trip failed (python, 6-minute campaign, x15, 71 -> 7 nodes); it prints dtypes.float_from_bits(...) now
  "nan_payload_const_roundtrip": (["python", "cpu"], state("""
c0 = UOp(Ops.DEFINE_GLOBAL, dtypes.float64.ptr(13), arg=0).index(UOp.const(dtypes.index, 0)).store(UOp.const(dtypes.int64, -14).bitcast(dtypes.float64))
ast = UOp.sink(c0)""", [], seed=1536553671)),
  # not a compiler bug: 0 * max * max * tiny * tiny (a masked load's 0 first) is 0 in order, but GROUPTOP multiplied
  # max * max in one thread (inf) and the masked 0 in another (inf * 0 = NaN, python, nv, amd). The budget's overflow
  # check took the product of all nonzero factors (~1e-3), not the largest partial product of some order (6-minute
  # campaign, 178 -> 25 nodes); every other seed of this kernel agrees on all five backends
  "bfloat16_grouped_mul_reduce_overflow_budget": (["python", "cpu", "llvm", "nv", "amd"], state("""
c0 = UOp.range(3, 2, AxisType.REDUCE)
c1 = (c0 < UOp.const(dtypes.index, 1)).ne(UOp.const(dtypes.bool, True))
c2 = UOp.const(dtypes.index, 3) + (c0 + UOp.const(dtypes.index, -1))
c3 = (UOp.const(dtypes.index, 2) * UOp.const(dtypes.index, 45)) + c2
c4 = UOp(Ops.DEFINE_GLOBAL, dtypes.bfloat16.ptr(180), arg=20).index(c1.where(c3, UOp.invalid()))
c5 = UOp(Ops.DEFINE_GLOBAL, dtypes.bfloat16.ptr(15), arg=2).index(UOp.const(dtypes.index, 0)).store(c4.load().reduce(c0, UOp.range(2, 3, AxisType.REDUCE), arg=Ops.MUL))
ast = UOp.sink(c5)""", [["GROUPTOP", 0, 3]], seed=129011292)),
  # not a compiler bug: 16 bfloat16 factors from ~1e-39 to ~3e37; with UNROLL 4 a partial product of the tiny factor
  # and small ones underflowed to 0 (reference 1.16e-12, bound 1.63e-13). The budget had no underflow term; it now adds
  # n * eta * prod max(|x|, 1) where some subset product may be subnormal (6-minute campaign, 56 -> 14 nodes)
  "bfloat16_unrolled_mul_reduce_underflow_budget": (["python", "cpu", "llvm"], state("""
c0 = UOp.range(16, 0, AxisType.REDUCE)
c1 = UOp(Ops.DEFINE_GLOBAL, dtypes.bfloat16.ptr(16), arg=4).index(c0).load()
c2 = UOp(Ops.FDIV, dtypes.bfloat16, (c1, UOp.const(dtypes.bfloat16, 0.10009765625).reciprocal()))
c3 = UOp(Ops.DEFINE_GLOBAL, dtypes.bfloat16.ptr(1), arg=1).index(UOp.const(dtypes.index, 0)).store(c2.reduce(c0, arg=Ops.MUL))
ast = UOp.sink(c3)""", [["UNROLL", 0, 4]], seed=989943066)),
  # the bounds of a CAST into a float were the source's, unrounded: range(249) cast to fp8e4m3 was bounded by 248, but
  # 248 rounds to 256, so the C and CUDA renderers dropped the saturation of the cast to uint8 (256 wrapped to 0, not 255;
  # 30-minute campaign over five backends, cpu and nv, x9 each, 174 -> 9 nodes)
  "fp8_cast_bound_rounds_up": (["cpu", "nv", "llvm", "python", "amd"], state("""
c0 = UOp.range(249, 0, AxisType.LOOP)
c1 = UOp(Ops.DEFINE_GLOBAL, dtypes.uint8.ptr(768), arg=0).index(c0).store(c0.cast(dtypes.fp8e4m3).cast(dtypes.uint8))
ast = UOp.sink(c1.end(c0))""", [], seed=109987489)),
  # not a compiler bug: 64 fp8e4m3 factors of 0.75; in order the product sticks at 2**-8 (0.75 * 2**-8 rounds back up
  # to it), in another order it underflows to 0 (python, nv, amd; 30-minute campaign, 118 -> 14 nodes). The budget now
  # holds the underflow of a reordered product (fuzz/oracles/budget.py mul_reduce_bound)
  "fp8_mul_reduce_underflow_budget": (["python", "nv", "amd", "cpu", "llvm"], state("""
c0 = UOp.range(2, 0, AxisType.LOOP)
c1 = UOp(Ops.DEFINE_GLOBAL, dtypes.fp8e4m3.ptr(32), arg=3).index(c0).load()
c2 = UOp(Ops.DEFINE_GLOBAL, dtypes.fp8e4m3.ptr(4), arg=0).index(c0).store(c1.reduce(UOp.range(8, 3, AxisType.REDUCE), UOp.range(8, 4, AxisType.REDUCE), arg=Ops.MUL))
ast = UOp.sink(c2.end(c0))""", None, seed=1060567583)),
  # pyrender had no literal for the NaN a BITCAST of uint64 max folds to (every backend's program round trip; 30-minute
  # campaign, 83 -> 7 nodes): the same cause as nan_payload_const_roundtrip, another payload and sign
  "nan_payload_all_ones_roundtrip": (["cpu", "llvm", "python", "nv", "amd"], state("""
c0 = UOp(Ops.DEFINE_GLOBAL, dtypes.float64.ptr(560), arg=0).index(UOp.const(dtypes.index, 0)).store(UOp.const(dtypes.uint64, 18446744073709551615).bitcast(dtypes.float64))
ast = UOp.sink(c0)""", [], seed=1429505117)),
  # LLVM 22's x86 code generator computes every lane of an 8-bit urem/udiv/srem/sdiv by a constant as 0 in a vector
  # narrower than 128 bits whose lanes are then shuffled (the loop vectorizer's <8 x i8> body of this reversed walk;
  # tests/fuzz/llvm22_i8_vector_divmod.ll is that body alone); the CPU LLVM renderer now has 8-bit division by a
  # constant lowered to a multiply and shifts before LLVM sees it (Renderer.div_by_multiply)
  "llvm_narrow_i8_vector_divmod": (["llvm"], state("""
c0 = UOp.range(30, 0, AxisType.LOOP)
c1 = UOp(Ops.DEFINE_GLOBAL, dtypes.int64.ptr(93), arg=1).index(UOp.const(dtypes.int8, 0).cast(dtypes.index))
c2 = UOp.const(dtypes.index, 30) + (c0 * UOp.const(dtypes.index, -1))
c3 = UOp(Ops.DEFINE_GLOBAL, dtypes.uint8.ptr(868), arg=2).index(c2).load()
c4 = c1.load().cast(dtypes.uint8) * (c3 % UOp.const(dtypes.uint8, 7))
c5 = UOp(Ops.DEFINE_GLOBAL, dtypes.uint8.ptr(651), arg=0).index(c0).store(c4)
ast = UOp.sink(c5.end(c0))""", [], {"n4": 3}, seed=1965087873)),
  # LLVM 22's loop vectorizer read x[(i % 4) * 272 + r % 4] for r < 17 as 16 consecutive int16 from the row's start
  # (r % 4 taken as r; campaign seed 36, 4 of 15 rows 1 where the reference has 0; tests/fuzz/
  # llvm22_vectorized_mod_of_index.ll is a sum of that shape alone). The LLVM renderer marks a loop whose index an
  # integer MOD or AND computes from with llvm.loop.vectorize.enable = false (renderer/llvmir.py, _wrapping_ranges)
  "llvm_vectorizer_mod_of_index": (["llvm", "cpu"], state("""
c0 = UOp.range(UOp.variable('n0', 4, 15), 0, AxisType.LOOP)
c1 = UOp.const(dtypes.index, 4)
c2 = UOp.range(17, 1, AxisType.REDUCE)
c3 = ((c0 % c1) * UOp.const(dtypes.index, 272)) + (c2 % c1)
c4 = UOp(Ops.DEFINE_GLOBAL, dtypes.int16.ptr(4080), arg=1).index(c3).load()
c5 = UOp.const(dtypes.int16, 0).eq(c4).where(UOp.const(dtypes.int64, 1), UOp.const(dtypes.int64, 0))
c6 = UOp(Ops.DEFINE_GLOBAL, dtypes.int64.ptr(120), arg=0).index(c0).store(c5.reduce(c2, arg=Ops.MAX))
ast = UOp.sink(c6.end(c0))""", [], {"n0": 15}, seed=87424520)),
  # PADTO then UPCAST: in the lane where log2(2) = 1 folded the fp8 product to cast(load), that lane's CAST read the
  # float64 LOAD while the others' read a float32 MUL (fp8 emulated through float32); pm_vectorize's ALU packing
  # compared only the lanes' own dtypes, so the CAST's operand became a float32.vec(4) VECTORIZE holding a float64
  # lane (an illegal VECTORIZE at SPEC=2); it now also requires every lane's operands to have lane 0's dtypes
  "vectorize_casts_from_mixed_source_dtypes": (["python", "cpu", "llvm", "nv", "amd"], state("""
c0 = UOp.range(7, 0, AxisType.LOOP)
c1 = UOp.const(dtypes.index, 6)
c2 = (c0 < c1).where(c0 + UOp.const(dtypes.index, 1), UOp.invalid())
c3 = UOp(Ops.DEFINE_GLOBAL, dtypes.float64.ptr(7), arg=1).index(c2).load()
c4 = c0.cast(dtypes.fp8e4m3).log2() * c3.cast(dtypes.fp8e4m3)
c5 = UOp(Ops.SUB, dtypes.fp8e4m3, (UOp.const(dtypes.fp8e4m3, -0.0) * UOp.const(dtypes.fp8e4m3, 448.0), c4))
c6 = c1 + (c0 * UOp.const(dtypes.index, -1))
c7 = UOp(Ops.DEFINE_GLOBAL, dtypes.fp8e4m3.ptr(7), arg=2).index(c6).load()
c8 = UOp(Ops.DEFINE_GLOBAL, dtypes.fp8e4m3.ptr(7), arg=0).index(c0).store(c5 + c7)
ast = UOp.sink(c8.end(c0))""", [["PADTO", 0, 8], ["UPCAST", 0, 8]], seed=1)),
  # sqrt of a negative fp8e5m2, its bits bitcast to fp8e4m3 (guided compare run, llvm, 103 -> 10 nodes): x86 gives -NaN,
  # CUDA +NaN, the reference +NaN; IEEE 754 leaves a computed NaN's sign open, so the budget leaves a float->float
  # bitcast of a NaN unchecked as it did the float->int one (cpu, llvm and nv failed; python and amd passed)
  "bitcast_of_a_computed_nan_sign": (["cpu", "llvm", "python", "nv", "amd"], state("""
c0 = UOp.const(dtypes.index, 0)
c1 = UOp(Ops.DEFINE_GLOBAL, dtypes.fp8e5m2.ptr(7), arg=7).index(c0).load()
c2 = UOp(Ops.DEFINE_GLOBAL, dtypes.fp8e4m3.ptr(7), arg=1).index(c0).store(c1.sqrt().bitcast(dtypes.fp8e4m3))
ast = UOp.sink(c2)""", [], seed=633146649)),
  # float64 MULACC with an infinite addend and a product past float64's range (a directed case of a guided compare
  # run on llvm, 166 -> 26 nodes): the reference computed a*b+c unfused (inf - inf = NaN) where fma gives the addend
  "float64_mulacc_infinite_addend": (["llvm", "cpu", "python"], state("""
c0 = UOp.range(30, 0, AxisType.LOOP)
c1 = UOp.const(dtypes.index, 31)
c2 = UOp.range(30, 1, AxisType.LOOP)
c3 = (c0 * c1) + c2
c4 = UOp.const(dtypes.index, 30) + (c2 * UOp.const(dtypes.index, -1))
c5 = UOp(Ops.DEFINE_GLOBAL, dtypes.float64.ptr(1953), arg=3).index(c1 + c4).load()
c6 = UOp(Ops.DEFINE_GLOBAL, dtypes.float16.ptr(1953), arg=7).index(c2).load()
c7 = UOp(Ops.DEFINE_GLOBAL, dtypes.float64.ptr(1953), arg=8).index(c3).load()
c8 = UOp(Ops.MULACC, dtypes.float64, (c5, c6.cast(dtypes.float64), c7))
c9 = UOp(Ops.DEFINE_GLOBAL, dtypes.float64.ptr(1953), arg=0).index(c3).store(c8)
ast = UOp.sink(c9.end(c0, c2))""", [], seed=1963873510)),
  # (0 * x) == 0 on fp8e4m3 folded to True on every backend (a directed case of a guided compare run, 69 -> 13 nodes):
  # the bounds of 0 * x are [0, 0], but x may be NaN and NaN == 0 is False; a float comparison's bounds now keep the
  # NaN answer unless both sides are constants
  "float_compare_bounds_forgot_nan": (["python", "cpu", "llvm", "nv", "amd"], state("""
c0 = UOp.range(3, 0, AxisType.LOOP)
c1 = UOp.const(dtypes.fp8e4m3, 0.0)
c2 = UOp(Ops.DEFINE_GLOBAL, dtypes.fp8e4m3.ptr(257), arg=3).index(c0).load()
c3 = UOp(Ops.DEFINE_GLOBAL, dtypes.bool.ptr(257), arg=0).index(c0).store((c1 * c2).eq(c1))
ast = UOp.sink(c3.end(c0))""", [], seed=659503664)),
  # sin of a float16 MUL REDUCE that overflows in another order (x0 * ... * x39 with a zero factor: the target's order
  # made inf * 0 = NaN; guided compare run on python, 67 -> 12 nodes): the REDUCE was unchecked, but sin's bound of 2
  # hid it; an unchecked argument now leaves sin unchecked
  "sin_of_an_unchecked_mul_reduce": (["python", "cpu"], state("""
c0 = UOp.range(5, 0, AxisType.REDUCE)
c1 = c0.cast(dtypes.float16).reduce(c0, UOp.range(8, 1, AxisType.REDUCE), arg=Ops.MUL).sin()
c2 = UOp(Ops.DEFINE_GLOBAL, dtypes.float16.ptr(8), arg=0).index(UOp.const(dtypes.index, 0)).store(c1)
ast = UOp.sink(c2)""", None, seed=1239679571)),
  # 0.001 - where(False, 0, x * r) in float64 (30-minute directed campaign, cpu and llvm, 107 -> 18 nodes): codegen folds
  # the WHERE to the product and the compiler contracts the SUB into an fma; the budget allowed a contraction only for
  # a MUL operand, and now sees through a WHERE whose condition has one value
  "contraction_through_a_folded_where": (["cpu", "llvm", "python"], state("""
c0 = UOp.range(4, 1, AxisType.LOOP)
c1 = UOp(Ops.DEFINE_GLOBAL, dtypes.float64.ptr(2), arg=11).index(UOp.const(dtypes.index, 1)).load()
c2 = UOp.const(dtypes.bool, False).where(UOp.const(dtypes.float64, 0.0), c1 * c0.cast(dtypes.float64))
c3 = UOp(Ops.SUB, dtypes.float64, (UOp.const(dtypes.float64, 0.001), c2))
c4 = UOp(Ops.DEFINE_GLOBAL, dtypes.float64.ptr(306), arg=0).index(c0).store(c3)
ast = UOp.sink(c4.end(c0))""", [], seed=769087101)),
  # bool lanes with a gate each (a padded axis UPCAST 4) packed into one masked vector load, which the LLVM renderer
  # refused for bool (4-minute campaign, kernel and tensor levels, 123 -> 18 nodes) once the CPU packed bool lanes: bool
  # lanes are bytes in memory, so the masked load reads <N x i8> and compares it with 0
  "masked_vector_load_of_bool_lanes": (["llvm", "cpu"], state("""
c0 = UOp.range(4, 1, AxisType.LOOP)
c1 = UOp.range(4, 0, AxisType.LOOP)
c2 = (c1 < UOp.const(dtypes.index, 3)).where(c0, UOp.invalid())
c3 = UOp(Ops.DEFINE_GLOBAL, dtypes.bool.ptr(80), arg=1).index(c2).load()
c4 = UOp(Ops.DEFINE_GLOBAL, dtypes.float16.ptr(80), arg=0).index(c0).store(c3.where(UOp.const(dtypes.float16, 0.0), UOp.const(dtypes.float16, 1.0)))
ast = UOp.sink(c4.end(c1, c0))""", [["UPCAST", 1, 4]], seed=624312245)),
  # LLVM 22's x86 code generator stores the whole wide lane where a one-lane masked store is a truncating one on
  # AVX-512 (llvm/llvm-project#179489): the loop vectorizer's last masked store of this gated bfloat16 store (lanes of
  # i32 truncated to i16) wrote element 18 too (3-minute campaign, llvm, 84 -> 29 nodes;
  # tests/fuzz/llvm22_one_lane_trunc_store.ll is that store alone). The CPU LLVM compiler writes every one-lane masked
  # store as the scalar store it means before the code generator sees it (compiler_llvm.scalar_one_lane_stores)
  "llvm_one_lane_truncating_masked_store": (["llvm", "cpu"], state("""
c0 = UOp.range(27, 1, AxisType.LOOP)
c1 = UOp.invalid()
c2 = (c0 < UOp.const(dtypes.index, 18)).where(c0, c1)
c3 = (c0 < UOp.const(dtypes.index, 1)).ne(UOp.const(dtypes.bool, True))
c4 = c3.where(c0 + UOp.const(dtypes.index, -1), c1)
c5 = UOp(Ops.DEFINE_GLOBAL, dtypes.bool.ptr(192), arg=6).index(c4).load()
c6 = c5.where(UOp.const(dtypes.bfloat16, float('inf')), UOp.const(dtypes.bfloat16, 0.5).reduce(UOp.range(11, 2, AxisType.REDUCE), arg=Ops.ADD))
c7 = UOp(Ops.DEFINE_GLOBAL, dtypes.bfloat16.ptr(64), arg=2).index(c2).store(UOp.const(dtypes.bfloat16, 0.0) + c6)
ast = UOp.sink(c7.end(c0))""", [], seed=1746481683)),
  # a local BUFFERIZE over a range whose value reads another local BUFFERIZE computed from that range: PACK's fill-as-
  # lanes (lowerer.fill_lanes) copied it as lanes, substituting the range in the inner buffer's already lowered loop,
  # so both lanes stored into the one inner buffer and the last won (3-minute campaign, cpu, llvm and python alike, 40
  # -> 17 nodes). Only a copy of a global buffer (a panel of an input) is filled as lanes
  "fill_lanes_of_a_buffer_computed_from_the_lane": (["cpu", "llvm", "python"], state("""
c0 = UOp.const(dtypes.index, 0)
c1 = UOp.range(2, 0, AxisType.LOOP)
c2 = UOp(Ops.DEFINE_GLOBAL, dtypes.int64.ptr(9), arg=1).index(c1).load()
c3 = UOp(Ops.BUFFERIZE, dtypes.int64, (c2, UOp.range(2, 1, AxisType.LOOP)))
c4 = UOp(Ops.INDEX, dtypes.int64.ptr(3), (c3, c1))
c5 = UOp(Ops.BUFFERIZE, dtypes.int64, (c4.load(), c1))
c6 = UOp(Ops.INDEX, dtypes.int64.ptr(3), (c5, c0))
c7 = UOp(Ops.DEFINE_GLOBAL, dtypes.int64.ptr(1), arg=0).index(c0).store(c6.load())
ast = UOp.sink(c7)""", [], seed=46600848)),
  # THREAD in a kernel of several store loops splits each of them (a cut kernel's pieces ran whole on every thread):
  # the second loop's only axis was shared with the first, which THREAD had split on its other axis, so the first got
  # two THREAD ranges on the one core_id and stored half its elements (4-minute campaign, cpu and llvm, 98 -> 15 nodes).
  # A loop splits only an axis of its own
  "thread_split_of_an_axis_another_store_loop_shares": (["llvm", "cpu"], state("""
c0 = UOp.range(4, 0, AxisType.LOOP)
c1 = UOp.range(4, 1, AxisType.LOOP)
c2 = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(32), arg=0).index(c0 + c1).store(UOp.const(dtypes.float32, 0.0))
c3 = UOp(Ops.DEFINE_GLOBAL, dtypes.int8.ptr(4), arg=1).index(c0).store(UOp.const(dtypes.int8, 0))
ast = UOp.sink(c2.end(c0, c1), c3.end(c0))""", [["THREAD", 1, 2]], seed=1474058478)),
  # gcc 12.2's loop if-conversion with AVX-512 (-O2 -march=native): two uint64 accumulators over a gated load (the
  # window's rows under 5 of 8) summed twice by an inner loop of 2: the first accumulator also summed row 5 (60 for 40
  # on 0..15; 3-minute campaign, cpu, 110 -> 20 nodes). The rendered C is right: -fno-tree-loop-if-convert in CFLAGS
  # (runtime/support/compiler_cpu.py). It reproduces only on an AVX-512 host
  "gcc12_avx512_if_converted_gated_load": (["cpu"], state("""
c0 = UOp.range(2, 0, AxisType.LOOP)
c1 = UOp.range(8, 1, AxisType.REDUCE)
c2 = (c1 * UOp.const(dtypes.index, 2)) + c0
c3 = (c1 < UOp.const(dtypes.index, 5)).where(c2, UOp.invalid())
c4 = UOp(Ops.DEFINE_GLOBAL, dtypes.uint64.ptr(16), arg=1).index(c3).load()
c5 = UOp(Ops.DEFINE_GLOBAL, dtypes.uint64.ptr(2), arg=0).index(c0).store(c4.reduce(c1, UOp.range(2, 2, AxisType.REDUCE), arg=Ops.ADD))
ast = UOp.sink(c5.end(c0))""", [["UPCAST", 0, 2]], seed=385567069)),
}

@pytest.mark.parametrize("name", sorted(FIXED))
def test_fixed_finding_stays_fixed(name):
  names, st = FIXED[name]
  backends, missing = open_backends(names)
  assert not missing, missing
  lvl = KernelLevel()
  fails = lvl.check([lvl.from_state(st)], backends)[0]
  assert not fails, "\n".join(f"{f.backend} {f.stage} {f.kind}: {f.message[:1500]}" for f in fails)

@pytest.mark.parametrize("dt", ["float64", "float32", "float16"])
def test_pow_on_amd_is_computed_not_refused(dt):
  # LLVM's AMDGPU instruction selection aborted the process on llvm.pow.f64; the renderer then refused POW (the most
  # frequent finding of the 30-minute campaign, reduced to pow(x, 0.0)); codegen now decomposes it where the target
  # lacks it. Edge inputs (NaN, +-inf, -0.0, extremes) come with the seeds.
  backends, missing = open_backends(["amd"])
  if missing: pytest.skip(f"amd: {missing['amd']}")
  lvl = KernelLevel()
  graph = f"""
c0 = UOp.range(64, 0, AxisType.LOOP)
c1 = UOp(Ops.DEFINE_GLOBAL, dtypes.{dt}.ptr(64), arg=1).index(c0).load()
c2 = UOp(Ops.DEFINE_GLOBAL, dtypes.{dt}.ptr(64), arg=2).index(c0).load()
c3 = UOp(Ops.DEFINE_GLOBAL, dtypes.{dt}.ptr(64), arg=0).index(c0).store(UOp(Ops.POW, dtypes.{dt}, (c1, c2)))
ast = UOp.sink(c3.end(c0))"""
  for seed in range(3):
    fails = lvl.check([lvl.from_state(state(graph, [], seed=seed))], backends)[0]
    assert not fails, "\n".join(f"{f.backend} {f.stage} {f.kind}: {f.message[:1500]}" for f in fails)

def test_pow_decomposition_edge_values():
  import math
  import numpy as np
  from tinygrad.uop import Ops
  from tinygrad.uop.ops import UOp
  from tinygrad.dtype import dtypes
  from tinygrad.codegen.decompositions import decompose_pow
  from fuzz.oracles.kernel_ref import run_kernel
  inf, nan = math.inf, math.nan
  pairs = [(2.0, 10.0), (-2.0, 3.0), (-2.0, 0.5), (-0.0, 3.0), (-0.0, -3.0), (0.0, -1.0), (nan, 0.0), (1.0, nan),
           (-1.0, inf), (0.5, inf), (2.0, -inf), (-inf, 3.0), (-inf, 2.0), (10.0, 308.0), (3.0, -700.0), (2.0, 1024.0),
           (-inf, 0.5), (-inf, -0.5), (-inf, -3.0), (-inf, -2.0), (-inf, 2.5), (-inf, inf), (-inf, -inf), (-7.0, -inf)]
  a, b, out = (UOp(Ops.DEFINE_GLOBAL, dtypes.float64.ptr(len(pairs)), arg=i) for i in (1, 2, 0))
  r = UOp.range(len(pairs), 0)
  x, y = a.index(r).load(), b.index(r).load()
  ast = UOp.sink(out.index(r).store(decompose_pow(UOp(Ops.POW, dtypes.float64, (x, y)), x, y)).end(r))
  bufs = {0: np.zeros(len(pairs)), 1: np.array([p[0] for p in pairs]), 2: np.array([p[1] for p in pairs])}
  run_kernel(ast, bufs)
  want = np.power(bufs[1], bufs[2])
  np.testing.assert_allclose(bufs[0], want, rtol=1e-12)
  # NOTE: a NaN's sign means nothing; every other result's sign (0.0 vs -0.0, inf vs -inf) does
  keep = ~np.isnan(want)
  assert list(np.signbit(bufs[0][keep])) == list(np.signbit(want[keep]))

@pytest.mark.parametrize("dt", ["uint8", "int8"])
@pytest.mark.parametrize("op", ["%", "//"])
def test_llvm_narrow_int_division_by_constants_reversed(dt, op):
  # the shape LLVM 22 miscompiled (a reversed walk of 8-bit values divided by a constant, times a loaded value), for
  # several divisors, on the CPU LLVM path and the C path
  backends, missing = open_backends(["llvm", "cpu"])
  if missing: pytest.skip(f"{missing}")
  lvl = KernelLevel()
  for d in (3, 7, -5, 100) if dt == "int8" else (3, 7, 10, 255):
    graph = f"""
c0 = UOp.range(40, 0, AxisType.LOOP)
c1 = UOp(Ops.DEFINE_GLOBAL, dtypes.{dt}.ptr(1), arg=1).index(UOp.const(dtypes.index, 0)).load()
c2 = UOp(Ops.DEFINE_GLOBAL, dtypes.{dt}.ptr(41), arg=2).index(UOp.const(dtypes.index, 40) + (c0 * UOp.const(dtypes.index, -1))).load()
c3 = UOp(Ops.DEFINE_GLOBAL, dtypes.{dt}.ptr(40), arg=0).index(c0).store(c1 * (c2 {op} UOp.const(dtypes.{dt}, {d})))
ast = UOp.sink(c3.end(c0))"""
    fails = lvl.check([lvl.from_state(state(graph, [], seed=d & 0xff))], backends)[0]
    assert not fails, "\n".join(f"{f.backend} {f.stage} {f.kind}: {f.message[:1500]}" for f in fails)
