"""The public face of the generators (fuzz/gen/): hypothesis strategies, in front of seeded builders that atheris,
campaigns and plain scripts use too.

A builder takes a `Chooser` (integers and choices from some source of randomness, fuzz/gen/choosers.py): `RandomChooser`
(seeded), `DrawChooser` (hypothesis' `draw`, shrinkable), `BytesChooser` (a byte string: campaigns and coverage-guided
engines), `FDPChooser` (atheris' FuzzedDataProvider).

Three levels of generators, each `build_*(chooser, config)` plus a hypothesis strategy:
  - symbolic index expressions: `build_index_expression` / `index_expressions` (IndexExprConfig;
  fuzz/gen/index_exprs.py)
  - kernel ASTs that pass kernel_spec: `build_kernel` / `kernel_cases` (KernelConfig -> KernelCase; fuzz/gen/kernels.py)
  - tensor programs through the public Tensor API: `fuzz.gen.tensor_programs.build_tensor_program` / `tensor_programs`
"""
from __future__ import annotations
from typing import Any, Callable
from hypothesis import strategies as st
from tinygrad.uop.ops import UOp
from fuzz.gen.choosers import Chooser, RandomChooser, DrawChooser, BytesChooser, FDPChooser
from fuzz.gen.index_exprs import IndexExprConfig, wrapping_config, variables_of, build_index_expression
from fuzz.gen.kernels import ALL_DTYPES, KernelConfig, KernelCase, build_kernel, random_opts

# ---- symbolic index expressions ----

def index_expressions(cfg: IndexExprConfig | None = None) -> st.SearchStrategy[tuple[UOp, list[UOp]]]:
  """Hypothesis strategy of (expr, variables): random index expressions over bounded variables and ranges."""
  @st.composite
  def strat(draw: Callable[[st.SearchStrategy[Any]], Any]) -> tuple[UOp, list[UOp]]:
    return build_index_expression(DrawChooser(draw), cfg)
  return strat()

ExprAndVars = tuple[UOp, list[UOp]]

def index_expression_batches(size: int, cfg: IndexExprConfig | None = None) -> st.SearchStrategy[list[ExprAndVars]]:
  """Batches of `size` expressions from one seed (for bulk proofs: one hypothesis example checks many expressions)."""
  def batch(seed: int) -> list[ExprAndVars]:
    return [build_index_expression(RandomChooser(seed * 1_000_003 + i), cfg) for i in range(size)]
  return st.integers(0, 2**32 - 1).map(batch)

# ---- kernel ASTs ----

def kernel_cases(cfg: KernelConfig | None = None) -> st.SearchStrategy[KernelCase]:
  """Hypothesis strategy of random kernels (KernelCase: ast, var_vals, candidate opts, input seed)."""
  @st.composite
  def strat(draw: Callable[[st.SearchStrategy[Any]], Any]) -> KernelCase:
    return build_kernel(DrawChooser(draw), cfg)
  return strat()

__all__ = ["Chooser", "RandomChooser", "DrawChooser", "BytesChooser", "FDPChooser", "IndexExprConfig",
           "wrapping_config", "build_index_expression", "index_expressions", "index_expression_batches",
           "variables_of", "ALL_DTYPES", "KernelConfig", "KernelCase", "build_kernel", "random_opts", "kernel_cases"]
