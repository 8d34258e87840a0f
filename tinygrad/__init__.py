"""tinygrad: a lazy tensor front end, one graph IR (UOp) rewritten by pattern matchers,
and kernels compiled per device."""
import importlib
from tinygrad.dtype import dtypes, DType
from tinygrad.helpers import Context, getenv, DEBUG, SPEC, GlobalCounters, VIZ, PROFILE
from tinygrad.uop import Ops, GroupOp, AxisType
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite
from tinygrad.uop import hooks

# NOTE: a symbolic int for shapes and JIT-replayed kernels: `Variable("i", 1, 10).bind(3)`
Variable = UOp.variable

def __getattr__(name: str):
  # NOTE: the front end is imported lazily so that `import tinygrad.uop` (used by the harness) stays light
  if name in ("Tensor", "Device", "TinyJit", "nn"):
    mod = {"Tensor": "tinygrad.tensor", "Device": "tinygrad.device", "TinyJit": "tinygrad.engine.jit",
           "nn": "tinygrad.nn"}[name]
    m = importlib.import_module(mod)
    return m if name == "nn" else getattr(m, name)
  raise AttributeError(f"module 'tinygrad' has no attribute {name!r}")

__all__ = ["Tensor", "Device", "TinyJit", "nn", "dtypes", "DType", "Context", "getenv", "GlobalCounters", "Variable",
           "UOp", "UPat", "PatternMatcher", "graph_rewrite", "Ops", "GroupOp", "AxisType", "DEBUG", "SPEC", "hooks"]

hooks.load_plugins()

if VIZ or PROFILE:
  from tinygrad.viz.record import start_from_flags
  start_from_flags()
