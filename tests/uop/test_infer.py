"""sint.infer, the value of a symbolic size at the launch's variable values: its fast path (the size's nodes evaluated in
order by the constant folder) agrees with substituting the values and simplifying, on random expressions of the ALU ops
sizes use; a missing variable is a KeyError naming it."""
import random
import pytest
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp
from tinygrad.uop.sint import infer
from tinygrad.uop.symbolic import simplify
from tinygrad.dtype import dtypes

def rand_expr(rng: random.Random, vs: list[UOp], depth: int) -> UOp:
  if depth == 0 or rng.random() < 0.2:
    return rng.choice(vs) if rng.random() < 0.6 else UOp.const(dtypes.index, rng.randint(-9, 40))
  a, b = rand_expr(rng, vs, depth - 1), rand_expr(rng, vs, depth - 1)
  op = rng.choice(["add", "mul", "sub", "idiv", "mod", "max", "where"])
  if op == "add": return a + b
  if op == "mul": return a * b
  if op == "sub": return a - b
  if op == "max": return a.maximum(b)
  if op == "where": return (a < b).where(a, b)
  c = rng.randint(1, 9)
  return a // c if op == "idiv" else a % c

def test_fast_path_matches_substitute_and_simplify():
  rng = random.Random(0)
  vs = [UOp.variable("start_pos", 0, 200), UOp.variable("n", 1, 64), UOp.variable("i", 0, 7).bind(3)]
  checked = 0
  for _ in range(300):
    x = rand_expr(rng, vs, 4)
    if x.op is Ops.CONST: continue
    for vals in ({"start_pos": 0, "n": 1, "i": 3}, {"start_pos": 117, "n": 33, "i": 3}, {"start_pos": 200, "n": 64, "i": 3}):
      subs = {v: UOp.const(dtypes.index, vals[(v.src[0] if v.op is Ops.BIND else v).arg[0]]) for v in vs}
      ref = simplify(x.substitute(subs))
      assert ref.op is Ops.CONST
      assert infer(x, vals) == ref.arg, (x, vals)
      checked += 1
  assert checked > 500

def test_a_missing_variable_is_named():
  v = UOp.variable("start_pos", 0, 10)
  with pytest.raises(KeyError, match="start_pos"): infer(v * 3 + 1, {"other": 1})
