"""A kernel AST and its opts -> ProgramSpec: every codegen pass except the choice of opts (tinygrad/codegen/__init__.py
chooses them: heuristics, BEAM). BEAM compiles its candidates through here, so this module imports neither.

The passes, one named graph_rewrite per line, in `prepare_kernel` (before opts) and `lower_kernel` (after them). The
program is a function of (kernel AST, renderer identity, opts, codegen flags) only: `build_program(ast,
prepare_kernel(ast), renderer, p.applied_opts)` gives back `p.src` in any process."""
from __future__ import annotations
import sys
from tinygrad.uop import Ops, hooks
from tinygrad.uop.ops import UOp, graph_rewrite
from tinygrad.uop.symbolic import symbolic
from tinygrad.uop.pyrender import pyrender
from tinygrad.helpers import DEBUG, TRANSCENDENTAL, DEVECTORIZE
from tinygrad.renderer import Renderer, ProgramSpec
from tinygrad.codegen.opt import Opt, KernelInfo, apply_opts, kernel_name
from tinygrad.codegen.late import lower_index_dtype
from tinygrad.codegen.gather import pm_collapse_one_hot
from tinygrad.codegen.lowerer import pm_lower_invalid, pm_grid, grid_specials, pm_reduce, ReduceCtx, pm_split_ends
from tinygrad.codegen.lowerer import merge_ends
from tinygrad.codegen.expander import pm_expand, pm_vectorize, VectorizeCtx
from tinygrad.codegen.decompositions import pm_decompose, pm_emulated_dtypes, pm_transcendental, pm_fast_divmod
from tinygrad.codegen.linearize import linearize, line_rewrite

def is_optimized(ast: UOp) -> bool:
  """An AST whose opts were applied already (its KernelInfo records them): codegen neither cuts nor opts it again."""
  return isinstance(ast.arg, KernelInfo) and bool(ast.arg.applied_opts)

def prepare_kernel(ast: UOp) -> UOp:
  """The AST the opts are chosen for and applied to: the scheduler's index math folded, a one-hot sum over a table's
  rows collapsed to a load of the row (gather.py). (On CPU the heuristics' first opt is usually CUT: opt.py.)"""
  ast = graph_rewrite(ast, symbolic, name="simplify index math")
  return graph_rewrite(ast, symbolic + pm_collapse_one_hot, name="one-hot sums to gathered loads")

def lower_kernel(ast: UOp, prepared: UOp, renderer: Renderer,
                 opts: tuple[Opt, ...]) -> tuple[UOp, str, tuple[Opt, ...]]:
  """`opts` applied to the prepared AST, then lowered to a SINK the linearizer takes: no open ranges, no index dtype, no
  Invalid. Returns (sink, kernel name, applied opts). `ast` is the kernel as scheduled: every buffer it names stays a
  parameter."""
  # opts split RANGEs and set their AxisTypes
  opted = prepared if is_optimized(prepared) and not opts else apply_opts(prepared, opts, renderer)
  name, applied = kernel_name(opted), tuple(opted.arg.applied_opts)
  # UPCAST/UNROLL ranges: one copy of the body per lane
  sink = graph_rewrite(opted, symbolic + pm_expand, name="expand UPCAST/UNROLL lanes")
  # GLOBAL/LOCAL/THREAD ranges become SPECIALs; GROUP_REDUCE goes through local memory
  sink = graph_rewrite(sink, pm_grid, ctx=grid_specials(sink, renderer), name="grid ranges to SPECIAL")
  # cond.where(idx, Invalid) becomes INDEX(buf, idx, cond); a gated LOAD reads 0
  sink = graph_rewrite(sink, symbolic + pm_lower_invalid, name="masked index to gated INDEX")
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
  # division by a constant as a multiply and shifts for the dtypes the target asks (its division is slow, or broken)
  if renderer.div_by_multiply:
    sink = graph_rewrite(sink, pm_fast_divmod, ctx=renderer.div_by_multiply,
                         name="division by constants to multiply-shift")
  # lanes with consecutive addresses (and, at DEVECTORIZE=0, the same ALU op) become the target's vector ops
  if DEVECTORIZE < 2 and renderer.vectors:
    vctx = VectorizeCtx(renderer, int(DEVECTORIZE.value))
    sink = graph_rewrite(sink, pm_vectorize, ctx=vctx, name="pack lanes into vectors")
  if renderer.extra_matcher is not None: sink = graph_rewrite(sink, renderer.extra_matcher, name="final renderer rules")
  # NOTE: a buffer whose every access folded away stays a parameter: the signature always lists all kernel buffers
  kept = set(sink.toposort())
  lost = [u for u in ast.toposort() if u.op is Ops.DEFINE_GLOBAL and u not in kept]
  return (sink.replace(src=sink.src + tuple(lost)) if lost else sink), name, applied

def print_uops(uops: list[UOp]) -> None:
  pos = {u: i for i, u in enumerate(uops)}
  for i, u in enumerate(uops): print(f"{i:4d} {u.op!s:20s} {u.dtype!r:28s} {[pos.get(s, '-') for s in u.src]} {u.arg}")

def build_program(ast: UOp, prepared: UOp, renderer: Renderer, opts: tuple[Opt, ...]) -> ProgramSpec:
  """Lower (with exactly `opts`), linearize and render one kernel. Fires the `program` checkpoint, not `compiled`: that
  one belongs to the caller that uses the program (get_program), not to a BEAM candidate."""
  sink, name, applied = lower_kernel(ast, prepared, renderer, opts)
  uops = line_rewrite(linearize(sink))
  if hooks.program:
    for fn in hooks.program: fn(ast, uops, renderer)
  if DEBUG >= 5: print_uops(uops)
  src = renderer.render(uops, name)
  if DEBUG >= 4: print(src)
  return ProgramSpec.from_uops(name, src, renderer, ast, uops, applied)

def print_failing_kernel(ast: UOp, e: BaseException) -> None:
  """The kernel that made codegen fail, as pyrender text (its repr if even printing fails), on stderr."""
  try: text = pyrender(ast)
  except Exception: text = repr(ast)
  print(f"codegen failed ({type(e).__name__}: {e}) on this kernel:\n{text}", file=sys.stderr)
