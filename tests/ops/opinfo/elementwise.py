"""OpInfo adapters for the elementwise ops (unary math, binary arithmetic, comparisons, bit and logic ops, activations):
see driver.py."""
from __future__ import annotations
from typing import Any
import torch
from tests.ops.opinfo.driver import Adapter, method

# the dtypes the bit ops (and other int-only ops) are tried with, where torch supports them
INT_DTYPES = (torch.int32, torch.int8, torch.uint8, torch.int64, torch.bool)

def _kw(*names: str) -> Any:
  """A skip for samples that pass a torch-only keyword our method does not take."""
  def skip(s: Any) -> str | None:
    return next((f"torch-only keyword {n}" for n in names if n in s.kwargs), None)
  return skip

def _unary(name: str, **kw: Any) -> Adapter: return Adapter(method(name), **kw)

def _binary(name: str, **kw: Any) -> Adapter: return Adapter(method(name), **kw)

def _reverse(name: str, **kw: Any) -> Adapter:
  """torch.Tensor.__r<op>__(x, y) computes y <op> x; ours is the same dunder on our Tensor."""
  return Adapter(lambda x, y: getattr(x, name)(y), **kw)

def _clamp(x: Any, min: Any = None, max: Any = None) -> Any: return x.clamp(min, max)  # noqa: A002 -- torch's names

def _gelu(x: Any, approximate: str = "none") -> Any: return x.gelu(approximate)  # NOTE: torch's default is erf's

ADAPTERS: dict[str, Adapter] = {
  # ---- unary math ----
  **{n: _unary(n) for n in ("abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "ceil", "cos", "cosh", "erf", "erfc",
                            "exp", "exp2", "expm1", "floor", "log", "log2", "log1p", "neg", "reciprocal", "rsqrt",
                            "sigmoid", "sign", "signbit", "sin", "sinh", "sqrt", "square", "tan", "tanh", "trunc",
                            "isnan", "isinf", "isfinite", "logical_not", "nan_to_num")},
  "round": _unary("round"),
  "round.decimals_0": _unary("round"),
  "round.decimals_3": _unary("round"),
  "round.decimals_neg_3": _unary("round"),
  "isposinf": Adapter(lambda x: x.isinf(detect_positive=True, detect_negative=False)),
  "isneginf": Adapter(lambda x: x.isinf(detect_positive=False, detect_negative=True)),
  "bitwise_not": Adapter(method("bitwise_not"), dtypes=INT_DTYPES),
  # ---- binary arithmetic ----
  "add": _binary("add", skip=_kw("alpha")),
  "sub": _binary("sub", skip=_kw("alpha")),
  "rsub": Adapter(lambda x, y: x.sub(y, reverse=True), skip=_kw("alpha")),
  "mul": _binary("mul"),
  "div.no_rounding_mode": _binary("div"),
  "div.trunc_rounding": _binary("div"),
  "div.floor_rounding": _binary("div"),
  "true_divide": _binary("div"),
  "floor_divide": _binary("floordiv"),
  "remainder": _binary("mod"),
  "pow": _binary("pow"),
  "maximum": _binary("maximum"),
  "minimum": _binary("minimum"),
  "copysign": _binary("copysign"),
  "logaddexp": _binary("logaddexp"),
  "lerp": Adapter(method("lerp")),
  "where": Adapter(lambda x, cond, other: cond.where(x, other)),
  "clamp": Adapter(_clamp),
  "clamp_min": Adapter(lambda x, y: x.clamp(y, None)),
  "clamp_max": Adapter(lambda x, y: x.clamp(None, y)),
  "isclose": _binary("isclose"),
  "__radd__": _reverse("__radd__"),
  "__rsub__": _reverse("__rsub__"),
  "__rmul__": _reverse("__rmul__"),
  "__rdiv__": _reverse("__rtruediv__"),
  "__rmod__": _reverse("__rmod__"),
  "__rpow__": _reverse("__rpow__"),
  "__rand__": _reverse("__rand__", dtypes=INT_DTYPES),
  "__ror__": _reverse("__ror__", dtypes=INT_DTYPES),
  "__rxor__": _reverse("__rxor__", dtypes=INT_DTYPES),
  # ---- comparisons, bits, logic ----
  **{n: _binary(n) for n in ("eq", "ne", "lt", "le", "gt", "ge")},
  **{n: _binary(n, dtypes=INT_DTYPES) for n in ("bitwise_and", "bitwise_or", "bitwise_xor")},
  "bitwise_left_shift": _binary("lshift", dtypes=INT_DTYPES),
  "bitwise_right_shift": _binary("rshift", dtypes=INT_DTYPES),
  **{n: _binary(n) for n in ("logical_and", "logical_or", "logical_xor")},
  # ---- activations ----
  **{f"nn.functional.{n}": _unary(n) for n in ("relu", "relu6", "selu", "silu", "mish", "hardswish", "hardsigmoid",
                                                "softsign", "logsigmoid")},
  "nn.functional.elu": Adapter(method("elu")),
  "nn.functional.celu": Adapter(method("celu")),
  "nn.functional.hardtanh": Adapter(method("hardtanh")),
  "nn.functional.leaky_relu": Adapter(method("leaky_relu", negative_slope="neg_slope")),
  "nn.functional.softplus": Adapter(method("softplus")),
  "nn.functional.gelu": Adapter(_gelu),
}
