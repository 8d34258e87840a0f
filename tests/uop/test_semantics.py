"""tinygrad/uop/semantics.py: the decided meanings (docs/ir.md, Semantics) by example, the same through constant folding
and the PYTHON backend, and the table covers every ALU op."""
import math
import numpy as np
import pytest
from tinygrad.uop import Ops, GroupOp, semantics
from tinygrad.uop.ops import UOp
from tinygrad.uop.symbolic import simplify
from tinygrad.dtype import dtypes, DType, to_np_dtype
from fuzz.oracles.differential import run_ast_on

I32_MIN = -2**31
# (op, operand dtype, operands, result): the cases C leaves undefined, and the ones easy to get wrong
CASES = [
  (Ops.IDIV, dtypes.int32, (7, 0), 0), (Ops.MOD, dtypes.int32, (7, 0), 7), (Ops.MOD, dtypes.int32, (-7, 0), -7),
  (Ops.IDIV, dtypes.uint8, (200, 0), 0), (Ops.MOD, dtypes.uint8, (200, 0), 200),
  (Ops.IDIV, dtypes.int32, (I32_MIN, -1), I32_MIN), (Ops.MOD, dtypes.int32, (I32_MIN, -1), 0),
  (Ops.IDIV, dtypes.int64, (-2**63, -1), -2**63), (Ops.IDIV, dtypes.int8, (-128, -1), -128),
  (Ops.IDIV, dtypes.int32, (-7, 2), -3), (Ops.MOD, dtypes.int32, (-7, 2), -1), (Ops.MOD, dtypes.int32, (7, -2), 1),
  (Ops.SHL, dtypes.int32, (1, 32), 1), (Ops.SHL, dtypes.int32, (1, 33), 2), (Ops.SHL, dtypes.int32, (1, -1), I32_MIN),
  (Ops.SHR, dtypes.int32, (-8, 1), -4), (Ops.SHR, dtypes.uint32, (2**31, 31), 1), (Ops.SHR, dtypes.int8, (-128, 15), -1),
  (Ops.SHL, dtypes.uint8, (1, 9), 2), (Ops.SHL, dtypes.int64, (1, 64), 1), (Ops.SHL, dtypes.int32, (2**30, 1), I32_MIN),
  (Ops.ADD, dtypes.int32, (2**31 - 1, 1), I32_MIN), (Ops.NEG, dtypes.uint8, (1,), 255), (Ops.NEG, dtypes.int8, (-128,), -128),
  (Ops.MUL, dtypes.uint16, (65535, 65535), 1), (Ops.CMPLT, dtypes.uint32, (2**32 - 1, 0), False),
  (Ops.ADD, dtypes.bool, (True, True), True), (Ops.SUB, dtypes.bool, (False, True), True), (Ops.NEG, dtypes.bool, (True,), True),
  (Ops.MAX, dtypes.bool, (False, True), True), (Ops.CMPLT, dtypes.bool, (False, True), True),
  (Ops.MAX, dtypes.float32, (math.nan, 1.0), math.nan), (Ops.MAX, dtypes.float32, (1.0, math.nan), math.nan),
  (Ops.MAX, dtypes.float32, (-0.0, 0.0), 0.0), (Ops.MAX, dtypes.float32, (0.0, -0.0), -0.0),
  (Ops.FDIV, dtypes.float32, (1.0, -0.0), -math.inf), (Ops.FDIV, dtypes.float32, (0.0, 0.0), math.nan),
  (Ops.TRUNC, dtypes.float32, (-0.5,), -0.0), (Ops.SQRT, dtypes.float32, (-0.0,), -0.0),
  (Ops.LOG2, dtypes.float32, (0.0,), -math.inf), (Ops.LOG2, dtypes.float32, (-1.0,), math.nan),
  (Ops.ADD, dtypes.float16, (65504.0, 32.0), math.inf), (Ops.ADD, dtypes.bfloat16, (1.0, 2.0**-9), 1.0),
  (Ops.MUL, dtypes.fp8e4m3, (300.0, 2.0), 448.0), (Ops.MUL, dtypes.fp8e5m2, (57344.0, 2.0), math.inf),
  # MULACC is fused: 1.5 * (1e30 rounded to float32) - 1 keeps the -1 in one rounding
  (Ops.MULACC, dtypes.float32, (1.0 + 2.0**-23, 1.0 - 2.0**-23, -1.0), -2.0**-46),
  (Ops.MULACC, dtypes.int8, (100, 3, 1), 45),
  # the exact product of finite operands is finite, however far past float64's range: an infinite addend is the answer
  # (a*b+c unfused overflows the product and gives inf - inf = NaN; found by a guided fuzz run on llvm)
  (Ops.MULACC, dtypes.float64, (-1.7976931348623157e308, -5.54, -math.inf), -math.inf),
  (Ops.MULACC, dtypes.float64, (1e300, 1e300, math.inf), math.inf), (Ops.MULACC, dtypes.float64, (0.0, 5.0, -math.inf), -math.inf),
  (Ops.MULACC, dtypes.float64, (math.inf, 0.0, 1.0), math.nan), (Ops.MULACC, dtypes.float64, (math.inf, 2.0, -math.inf), math.nan),
  (Ops.MULACC, dtypes.float64, (1e300, 1e300, 1.0), math.inf), (Ops.MULACC, dtypes.float64, (1.0, 2.0, math.nan), math.nan),
]

def same(a, b) -> bool:
  if isinstance(b, float) and math.isnan(b): return isinstance(a, float) and math.isnan(a)
  return a == b and (not isinstance(b, float) or math.copysign(1, a) == math.copysign(1, b))

@pytest.mark.parametrize("op,dt,args,want", CASES, ids=lambda x: str(x)[:24])
def test_decided_meaning(op, dt, args, want):
  assert same(semantics.fold_alu(op, dt, args), want)
  # constant folding computes it
  out = dtypes.bool if op in GroupOp.Comparison else dt
  folded = simplify(UOp(op, out, tuple(UOp.const(dt, a) for a in args)))
  assert folded.op is Ops.CONST and same(folded.arg, want), folded

CASTS = [
  (1e10, dtypes.float32, dtypes.int32, 2**31 - 1), (-1e10, dtypes.float32, dtypes.int32, I32_MIN),
  (math.nan, dtypes.float32, dtypes.int32, 0), (math.inf, dtypes.float64, dtypes.int64, 2**63 - 1),
  (-3.7, dtypes.float32, dtypes.uint8, 0), (300.5, dtypes.float64, dtypes.uint8, 255), (-129.5, dtypes.float32, dtypes.int8, -128),
  (-2.7, dtypes.float32, dtypes.int32, -2), (65504.0, dtypes.float16, dtypes.int16, 32767), (math.nan, dtypes.bfloat16, dtypes.int8, 0),
  (1e30, dtypes.float32, dtypes.index, 2**63 - 1), (2**40 + 5, dtypes.index, dtypes.int32, 5), (-1, dtypes.int8, dtypes.uint64, 2**64 - 1),
  (math.nan, dtypes.float32, dtypes.bool, True), (-0.0, dtypes.float32, dtypes.bool, False), (256, dtypes.int32, dtypes.bool, True),
  (1e6, dtypes.float32, dtypes.fp8e4m3, 448.0), (1e6, dtypes.float32, dtypes.fp8e5m2, math.inf), (70000, dtypes.int32, dtypes.float16, math.inf),
]

@pytest.mark.parametrize("v,src,dst,want", CASTS, ids=lambda x: str(x)[:24])
def test_decided_cast(v, src, dst, want):
  assert same(semantics.fold_cast(v, src, dst), want)
  folded = simplify(UOp.const(src, v).cast(dst))
  assert folded.op is Ops.CONST and same(folded.arg, want), folded

@pytest.mark.parametrize("dt", [dtypes.int8, dtypes.int32, dtypes.uint32, dtypes.int64], ids=str)
def test_python_backend_computes_the_decided_cases(dt: DType):
  # x/0, x%0, MIN/-1, shifts past the width, on the PYTHON backend (the same table, run on arrays of threads)
  lo, w = int(dtypes.min(dt)), 8 * dt.itemsize
  wrap = lambda xs: np.array([semantics.fold_cast(x, dtypes.index, dt) for x in xs], to_np_dtype(dt))
  a, b = wrap([7, -7, lo, lo, 5, 1, -1, 3]), wrap([0, 0, -1, -1, 3, w + 1, w, -1])
  r = UOp.range(8, 0)
  ga, gb = (UOp(Ops.DEFINE_GLOBAL, dt.ptr(8), arg=i).index(r).load() for i in (3, 4))
  outs = [ga // gb, ga % gb, ga << gb, ga >> gb]
  ast = UOp.sink(*[UOp(Ops.DEFINE_GLOBAL, dt.ptr(8), arg=i if i < 3 else 5).index(r).store(v).end(r)
                   for i, v in enumerate(outs)])
  got = run_ast_on("PYTHON", ast, {3: a, 4: b}, opts=[])
  got[3] = got.pop(5)
  for i, op in enumerate((Ops.IDIV, Ops.MOD, Ops.SHL, Ops.SHR)):
    assert got[i].tolist() == [semantics.fold_alu(op, dt, (int(x), int(y))) for x, y in zip(a, b)], op

def test_every_alu_op_has_a_definition():
  assert set(semantics.ALU) == set(GroupOp.ALU)
  for op in GroupOp.ALU: assert any(semantics.defined_on(op, dt) for dt in (dtypes.int32, dtypes.float32, dtypes.uint64))
  # and an undefined pair is refused, never guessed
  assert semantics.fold_alu(Ops.SQRT, dtypes.int32, (4,)) is None
  with pytest.raises(TypeError, match="no meaning"): semantics.alu_fn(Ops.IDIV, dtypes.float32)
