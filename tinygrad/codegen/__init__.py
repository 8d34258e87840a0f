"""Codegen: kernel AST (docs/ir.md section 2) -> linear program (section 3) -> ProgramSpec. The pipeline is
`full_rewrite_to_sink`, one named pass per line; `linearize` and `line_rewrite` live in linearize.py."""
from __future__ import annotations
import sys, inspect
from typing import Any
from tinygrad.uop import Ops, AxisType, hooks
from tinygrad.uop.ops import UOp, graph_rewrite
from tinygrad.helpers import DEBUG, TRANSCENDENTAL, DEVECTORIZE, to_function_name
from tinygrad.renderer import Renderer, ProgramSpec
from tinygrad.uop.symbolic import symbolic
from tinygrad.codegen.late import lower_index_dtype
from tinygrad.codegen.lowerer import pm_lower_invalid, pm_grid, grid_specials, pm_reduce, ReduceCtx, pm_split_ends
from tinygrad.codegen.lowerer import merge_ends
from tinygrad.codegen.expander import pm_expand, pm_vectorize
from tinygrad.codegen.decompositions import pm_decompose, pm_emulated_dtypes, pm_transcendental, pm_fast_divmod
from tinygrad.codegen.linearize import linearize, line_rewrite
from tinygrad.codegen.cutting import cut_store_ranges

def apply_kernel_opts(ast: UOp, renderer: Renderer, opts: Any = None) -> UOp:
  """The opts stage: opt.py's optimize_kernel (explicit opts, else KernelInfo.opts, else NOOPT/BEAM/heuristics).
  Without opt.py the kernel is lowered as written."""
  try: from tinygrad.codegen import opt
  except ImportError: return ast
  return opt.optimize_kernel(ast, renderer, opts)

def kernel_name(ast: UOp) -> str:
  """`r_4_16` (has a reduce) / `E_64`: the range sizes in layout order; a KernelInfo name wins. Deterministic."""
  if (n := getattr(ast.arg, "name", "")): return to_function_name(n)
  topo = ast.toposort()
  rngs = sorted([u for u in topo if u.op is Ops.RANGE], key=lambda r: (r.arg[-1], r.arg[0]))
  sizes = [str(r.src[0].arg) if r.src[0].op is Ops.CONST else r.src[0].arg[0] if r.src[0].op is Ops.DEFINE_VAR else "s"
           for r in rngs]
  reduces = (AxisType.REDUCE, AxisType.GROUP_REDUCE, AxisType.UNROLL)
  kind = "r" if any(u.op is Ops.REDUCE or (u.op is Ops.RANGE and u.arg[-1] in reduces) for u in topo) else "E"
  return to_function_name("_".join([kind, *(sizes or ["1"])]))

def _rewrite(ast: UOp, renderer: Renderer, opts: Any = None) -> tuple[UOp, str, tuple[Any, ...]]:
  sym = symbolic
  # fold the scheduler's index math
  sink = graph_rewrite(ast, sym, name="simplify index math")
  # CPU only: a store loop compared against constants (cat, pad) becomes several branch-free loops.
  # NOTE: only when codegen picks the opts itself: explicit opts (BEAM, KernelInfo.opts) name the axes of the uncut AST
  explicit = opts is not None or bool(getattr(ast.arg, "opts", ())) or bool(getattr(ast.arg, "applied_opts", ()))
  cut = cut_store_ranges(sink, sym) if renderer.has_threads and not explicit else sink
  # opts split RANGEs and set their AxisTypes (explicit opts, KernelInfo.opts, BEAM or heuristics)
  opted = apply_kernel_opts(cut, renderer, opts)
  # NOTE: a cut kernel is named by its shape before the cut (one name per kernel, not one per piece)
  name, applied = kernel_name(opted if cut is sink else sink), tuple(getattr(opted.arg, "applied_opts", ()) or ())
  # UPCAST/UNROLL ranges: one copy of the body per lane
  sink = graph_rewrite(opted, sym + pm_expand, name="expand UPCAST/UNROLL lanes")
  # GLOBAL/LOCAL/THREAD ranges become SPECIALs; GROUP_REDUCE goes through local memory
  sink = graph_rewrite(sink, pm_grid, ctx=grid_specials(sink, renderer), name="grid ranges to SPECIAL")
  # cond.where(idx, Invalid) becomes INDEX(buf, idx, cond); a gated LOAD reads 0
  sink = graph_rewrite(sink, sym + pm_lower_invalid, name="masked index to gated INDEX")
  # REDUCE becomes DEFINE_REG accumulators with loops
  sink = graph_rewrite(sink, pm_reduce, ctx=ReduceCtx(), name="REDUCE to accumulator loops")
  # END closes one range; one END per range
  sink = merge_ends(graph_rewrite(sink, pm_split_ends, name="one range per END"))
  # THREEFRY into uint32 ops, bfloat16/fp8 arithmetic through float32
  sink = graph_rewrite(sink, pm_decompose + pm_emulated_dtypes, ctx=renderer, name="decompose ops the target lacks")
  # exp2/log2/sin as polynomials where the target lacks them (or TRANSCENDENTAL>=2)
  sink = graph_rewrite(sink, pm_transcendental, ctx=(renderer, TRANSCENDENTAL.value), name="exp2/log2/sin polynomials")
  # dtypes.index becomes int32, or int64 where the bounds need it
  sink = lower_index_dtype(sink)
  # int32/uint32 division by a constant as a multiply and shifts where the target's division is slow
  if renderer.slow_int_div: sink = graph_rewrite(sink, pm_fast_divmod, name="division by constants to multiply-shift")
  # lanes with consecutive addresses and the same op become vector ops the target has
  if renderer.supports_float4 and DEVECTORIZE < 2:
    sink = graph_rewrite(sink, pm_vectorize, ctx=renderer, name="pack lanes into vectors")
  if (extra := getattr(renderer, "extra_matcher", None)) is not None:
    sink = graph_rewrite(sink, extra, name="final renderer rules")
  # NOTE: a buffer whose every access folded away stays a parameter: the signature always lists all kernel buffers
  kept = set(sink.toposort())
  lost = [u for u in ast.toposort() if u.op is Ops.DEFINE_GLOBAL and u not in kept]
  return (sink.replace(src=sink.src + tuple(lost)) if lost else sink), name, applied

def full_rewrite_to_sink(ast: UOp, renderer: Renderer, opts: Any = None) -> UOp:
  """The kernel AST lowered to a SINK the linearizer takes: no open ranges, no index dtype, no Invalid."""
  return _rewrite(ast, renderer, opts)[0]

def _print_failing_kernel(ast: UOp, e: BaseException) -> None:
  try:
    from tinygrad.uop.pyrender import pyrender
    text = pyrender(ast)
  except Exception: text = repr(ast)
  print(f"codegen failed ({type(e).__name__}: {e}) on this kernel:\n{text}", file=sys.stderr)

def print_uops(uops: list[UOp]) -> None:
  pos = {u: i for i, u in enumerate(uops)}
  for i, u in enumerate(uops): print(f"{i:4d} {u.op!s:20s} {u.dtype!r:28s} {[pos.get(s, '-') for s in u.src]} {u.arg}")

def get_program(ast: UOp, renderer: Renderer, opts: Any = None) -> ProgramSpec:
  """Lower, linearize and render one kernel. On a failure the kernel is printed (pyrender) and the error re-raised."""
  try:
    sink, name, applied = _rewrite(ast, renderer, opts)
    uops = line_rewrite(linearize(sink))
    if hooks.program: hooks.fire("program", ast, uops, renderer)
    if DEBUG >= 5: print_uops(uops)
    takes_name = "name" in inspect.signature(renderer.render).parameters
    src = renderer.render(uops, name=name) if takes_name else renderer.render(uops)
  except Exception as e:
    # NOTE: an opt that does not fit is the caller's business (heuristics, BEAM), not a codegen failure
    if type(e).__name__ != "KernelOptError": _print_failing_kernel(ast, e)
    raise
  if DEBUG >= 4: print(src)
  spec = ProgramSpec.from_uops(name, src, renderer.device, ast, uops, applied)
  if hooks.compiled: hooks.fire("compiled", ast, spec, opts)
  return spec

__all__ = ["full_rewrite_to_sink", "linearize", "line_rewrite", "get_program", "kernel_name", "apply_kernel_opts"]
