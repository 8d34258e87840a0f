"""Front-end semantics a torch user relies on: dtypes given by name, dtype promotion of mixed tensor/scalar and
tensor/tensor operands, the exception types torch raises (IndexError, RuntimeError, TypeError), and std/var where the
divisor N - correction is 0 or negative."""
import math
import operator
import numpy as np
import pytest
import torch
from tinygrad import Tensor, dtypes, UOp
from spec import type_verify, tensor_spec
from tests.ops.helpers import check_op, check_raises, TORCH_DTYPES, TINY_DTYPES, torch_dtype_name

# ---- dtypes by name ----

def _legal(t: Tensor) -> Tensor:
  # NOTE: independent of the SPEC level: the graph a front-end op builds must pass its own tensor spec
  type_verify(UOp.sink(t.uop), tensor_spec)
  return t

NAMED = [
  ("cast", lambda: Tensor([1.7, -2.2, 300.0]).cast("int32"), dtypes.int32, [1, -2, 300]),
  ("cast_uint8", lambda: Tensor([1, 2, 255]).cast("uint8"), dtypes.uint8, [1, 2, 255]),
  ("linspace", lambda: Tensor.linspace(5, 10, 3, dtype="int32"), dtypes.int32, [5, 7, 10]),
  ("zeros", lambda: Tensor.zeros(2, dtype="float16"), dtypes.float16, [0, 0]),
  ("ones", lambda: Tensor.ones(2, 1, dtype="bool"), dtypes.bool, [[True], [True]]),
  ("full", lambda: Tensor.full((2,), 3, dtype="int8"), dtypes.int8, [3, 3]),
  ("arange", lambda: Tensor.arange(3, dtype="float64"), dtypes.float64, [0.0, 1.0, 2.0]),
  ("eye", lambda: Tensor.eye(2, dtype="uint8"), dtypes.uint8, [[1, 0], [0, 1]]),
  ("init", lambda: Tensor([1, 2], dtype="int16"), dtypes.int16, [1, 2]),
  ("init_alias", lambda: Tensor([1.5], dtype="half"), dtypes.float16, [1.5]),
  ("like", lambda: Tensor([1.5, 2.5]).ones_like(dtype="int64"), dtypes.int64, [1, 1]),
  ("sum", lambda: Tensor([1, 2, 3]).sum(dtype="float32"), dtypes.float32, 6.0),
  ("prod", lambda: Tensor([1, 2, 3]).prod(dtype="int64"), dtypes.int64, 6),
  ("bitcast", lambda: Tensor([1.0]).bitcast("int32"), dtypes.int32, [0x3F800000]),
  ("numpy_dtype", lambda: Tensor([1, 2]).cast(np.float16), dtypes.float16, [1.0, 2.0]),
  ("dtypes_prefix", lambda: Tensor([1, 2]).cast("dtypes.bfloat16"), dtypes.bfloat16, [1.0, 2.0]),
]

@pytest.mark.parametrize("name,make,dt,want", NAMED, ids=[n[0] for n in NAMED])
def test_dtype_by_name(name, make, dt, want):
  t = _legal(make())
  assert t.dtype is dt
  np.testing.assert_array_equal(t.numpy(), np.array(want))

def test_dtype_by_name_random_constructors():
  for make, dt in [(lambda: Tensor.rand(3, dtype="float16"), dtypes.float16), (lambda: Tensor.randn(3, dtype="float64"), dtypes.float64),
                   (lambda: Tensor.randint(3, high=5, dtype="int8"), dtypes.int8),
                   (lambda: Tensor.uniform(3, low=-1, high=1, dtype="half"), dtypes.float16),
                   (lambda: Tensor.normal(3, dtype="bfloat16"), dtypes.bfloat16), (lambda: Tensor.empty(3, dtype="uint16"), dtypes.uint16)]:
    t = _legal(make())
    assert t.dtype is dt and t.shape == (3,)
  assert _legal(Tensor.rand(3, dtype="float16")).numpy().max() < 1

@pytest.mark.parametrize("bad", ["index", "void", "float33", "torch.float32", 3, None])
def test_dtype_by_name_rejects_what_a_tensor_cannot_hold(bad):
  with pytest.raises(TypeError, match="dtype|cannot hold"): Tensor([1.0]).cast(bad)
  if bad is not None:
    with pytest.raises(TypeError): Tensor.zeros(2, dtype=bad)

# ---- promotion: the result dtype of mixed operands is torch's (except the default int: ours is int32) ----

NAMES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
OPS = {"add": operator.add, "mul": operator.mul, "truediv": operator.truediv, "lt": operator.lt, "eq": operator.eq,
       "pow": operator.pow, "maximum": None}

def _result_name(fn):
  try: r = fn()
  except Exception as e: return type(e).__name__
  return torch_dtype_name(r.dtype) if isinstance(r, torch.Tensor) else next(k for k, v in TINY_DTYPES.items() if v is r.dtype)

@pytest.mark.parametrize("dt", NAMES)
def test_promotion_tensor_and_python_scalar_as_torch(dt):
  # NOTE: only dtypes are compared (nothing is realized): the graph is built and promoted at the call
  for sc in (True, 3, 2.5):
    for name, op in OPS.items():
      if op is None: continue
      for rev in (False, True):
        tt, ti = torch.tensor([1, 2]).to(TORCH_DTYPES[dt]), Tensor([1, 2], dtype=TINY_DTYPES[dt])
        want = _result_name(lambda: op(sc, tt) if rev else op(tt, sc))
        got = _result_name(lambda: op(sc, ti) if rev else op(ti, sc))
        if want == "int64" and got == "int32" and dt not in ("int64",): continue
        # NOTE: torch refuses some arithmetic on bools (True ** bool tensor); ours computes it as numpy does
        if dt == "bool" and want.endswith("Error") and not got.endswith("Error"): continue
        assert got == want, f"{'scalar ' + name + ' ' + dt if rev else dt + ' ' + name + ' scalar'} {sc!r}: {got} != torch {want}"

@pytest.mark.parametrize("a", NAMES)
def test_promotion_tensor_and_tensor_as_torch(a):
  for b in NAMES:
    for name, op in OPS.items():
      ta, tb = torch.tensor([1, 0]).to(TORCH_DTYPES[a]), torch.tensor([1, 1]).to(TORCH_DTYPES[b])
      xa, xb = Tensor([1, 0], dtype=TINY_DTYPES[a]), Tensor([1, 1], dtype=TINY_DTYPES[b])
      if name == "pow" and (a == "bool" or b == "bool"): continue
      want = _result_name(lambda: torch.maximum(ta, tb) if op is None else op(ta, tb))
      got = _result_name(lambda: xa.maximum(xb) if op is None else op(xa, xb))
      assert got == want, f"{a} {name} {b}: {got} != torch {want}"

def test_promotion_values_int_tensor_float_scalar():
  check_op([(3, 4)], lambda x: x * 1.5 + 0.25, dtype="int32", low=-5, high=5)
  check_op([(3, 4)], lambda x: x / 2, dtype="int32", low=-5, high=5)
  check_op([(3, 4)], lambda x: x + 1, dtype="bool", check_dtype=False)
  assert (Tensor([True, False]) + 1).dtype is dtypes.int32

# ---- exception types ----

# exception, our call, torch's spelling of it (None: the same), a word our message has
RAISES = [
  (IndexError, lambda t: t.squeeze(3), None, "out of range"), (IndexError, lambda t: t.flip(2), None, "out of range"),
  (IndexError, lambda t: t.cumsum(2), None, "out of range"), (IndexError, lambda t: t.unsqueeze(4), None, "out of range"),
  (IndexError, lambda t: t.transpose(0, 3), None, "out of range"), (IndexError, lambda t: t.sum(-3), None, "out of range"),
  (IndexError, lambda t: t.softmax(2), None, "out of range"), (IndexError, lambda t: t.argmax(5), None, "out of range"),
  (IndexError, lambda t: t.logcumsumexp(2), lambda t: torch.logcumsumexp(t, 2), "out of range"),
  (IndexError, lambda t: t.max(axis=(0, 7)), lambda t: t.amax(dim=(0, 7)), "out of range"),
  (RuntimeError, lambda t: t.sum((0, 0)), None, "repeats"), (RuntimeError, lambda t: t.permute(0, 0), None, "permutation"),
  (RuntimeError, lambda t: t.permute(0,), None, "permutation"), (RuntimeError, lambda t: t.flip((1, -1)), None, "repeats"),
  (RuntimeError, lambda t: t @ t, None, "do not match"),
  (RuntimeError, lambda t: t.matmul(t.reshape(1, 2, 3)), None, "do not match"),
]

@pytest.mark.parametrize("exc,fn,tfn,msg", RAISES, ids=[f"{r[0].__name__}-{i}" for i, r in enumerate(RAISES)])
def test_errors_have_torch_exception_types(exc, fn, tfn, msg):
  tt, ti = torch.ones(2, 3), Tensor.ones(2, 3)
  check_raises(exc, lambda: (tfn or fn)(tt), lambda: fn(ti), match=msg)

def test_errors_matmul_batch_and_scalar():
  check_raises(RuntimeError, lambda: torch.ones(2, 3, 4) @ torch.ones(3, 4, 5), lambda: Tensor.ones(2, 3, 4) @ Tensor.ones(3, 4, 5),
               match="matmul of (2, 3, 4) and (3, 4, 5)")
  check_raises(RuntimeError, lambda: torch.ones(()) @ torch.ones(2), lambda: Tensor.ones(()) @ Tensor.ones(2), match="scalars")

def test_errors_wrong_dtypes_are_type_errors():
  check_raises(TypeError, lambda: ~torch.ones(2), lambda: ~Tensor.ones(2), match="int or bool")
  for fn in (lambda t: t << 1, lambda t: t >> 1, lambda t: t.idiv(2), lambda t: t & t, lambda t: t | True, lambda t: t ^ 1):
    with pytest.raises(TypeError): fn(Tensor.ones(2))
  with pytest.raises(TypeError, match="shift amount must be an int tensor"): Tensor([1, 2]) << Tensor([1.0, 2.0])
  with pytest.raises(TypeError, match="unsupported operand type str"): Tensor([1.0]) + "a"
  with pytest.raises(TypeError, match="unsupported operand type list"): Tensor([1.0]) * [1, 2]

def test_squeeze_of_a_scalar_checks_the_axis():
  assert Tensor(2.0).squeeze(0).shape == () and Tensor(2.0).squeeze(-1).shape == ()
  check_raises(IndexError, lambda: torch.tensor(2.0).squeeze(1), lambda: Tensor(2.0).squeeze(1))

# ---- std / var with N <= correction ----

@pytest.mark.parametrize("shape,axis,correction", [((3, 1), 1, 1), ((1,), 0, 1), ((2, 3), 1, 3), ((2, 3), 1, 5),
                                                   ((2, 2), (0, 1), 4), ((2, 2), None, 2), ((3, 4), 0, 0), ((3, 4), (0, 1), 2), ((0, 3), 0, 1)])
@pytest.mark.filterwarnings("ignore:.*degrees of freedom")
def test_std_var_small_n_give_inf_nan_as_torch(shape, axis, correction):
  for name in ("var", "std"):
    tfn = lambda x, name=name: getattr(torch, name)(x, dim=axis, correction=correction)
    check_op([shape], tfn, lambda x, name=name: getattr(x, name)(axis, correction=correction))

@pytest.mark.filterwarnings("ignore:.*degrees of freedom")
def test_var_of_constant_rows_divided_by_zero_is_nan():
  check_op(None, lambda x: x.var(1, correction=2), lambda x: x.var(1, correction=2), vals=[[[1.0, 1.0], [1.0, 3.0]]])
  assert math.isnan(Tensor([[1.0]]).std(1).item())
