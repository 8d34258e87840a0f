"""Codegen: kernel AST (docs/ir.md section 2) -> linear program (section 3) -> ProgramSpec.

`get_program` is the entry point: prepare the AST (program.py), choose its opts (`choose_opts`: explicit, KernelInfo,
NOOPT, BEAM or the heuristics, whose first opt on CPU is usually CUT), lower, linearize and render it with those opts
(program.py). The module graph has no
cycle: program.py knows nothing of the choice; heuristic.py and search.py choose, on top of opt.py and program.py."""
from __future__ import annotations
from tinygrad.uop import hooks
from tinygrad.uop.ops import UOp
from tinygrad.helpers import NOOPT, BEAM
from tinygrad.renderer import Renderer, ProgramSpec
from tinygrad.codegen.opt import Opt, KernelInfo, KernelOptError, apply_opts, kernel_name
from tinygrad.codegen.heuristic import hand_coded_optimizations
from tinygrad.codegen.search import beam_search
from tinygrad.codegen.program import prepare_kernel, lower_kernel, build_program, is_optimized
from tinygrad.codegen.program import print_failing_kernel
from tinygrad.codegen.linearize import linearize, line_rewrite

def choose_opts(prepared: UOp, renderer: Renderer) -> tuple[Opt, ...]:
  """The opts stage for a prepared AST: its KernelInfo.opts, else none for an AST optimised already or under NOOPT,
  else a BEAM=n search, else `hand_coded_optimizations`."""
  info = prepared.arg if isinstance(prepared.arg, KernelInfo) else KernelInfo()
  if info.opts: return tuple(info.opts)
  if is_optimized(prepared) or NOOPT: return ()
  if BEAM >= 1: return tuple(beam_search(prepared, renderer, int(BEAM.value)))
  return tuple(hand_coded_optimizations(prepared, renderer))

def _opts_or_choose(prepared: UOp, renderer: Renderer, opts: tuple[Opt, ...] | list[Opt] | None) -> tuple[Opt, ...]:
  return choose_opts(prepared, renderer) if opts is None else tuple(opts)

def optimize_kernel(ast: UOp, renderer: Renderer, opts: tuple[Opt, ...] | list[Opt] | None = None) -> UOp:
  """The kernel AST after the opts stage: prepared, `opts` (or the chosen ones) applied and recorded in KernelInfo."""
  prepared = prepare_kernel(ast)
  return apply_opts(prepared, _opts_or_choose(prepared, renderer, opts), renderer)

def full_rewrite_to_sink(ast: UOp, renderer: Renderer, opts: tuple[Opt, ...] | list[Opt] | None = None) -> UOp:
  """The kernel AST lowered to a SINK the linearizer takes: no open ranges, no index dtype, no Invalid."""
  prepared = prepare_kernel(ast)
  return lower_kernel(ast, prepared, renderer, _opts_or_choose(prepared, renderer, opts))[0]

def get_program(ast: UOp, renderer: Renderer, opts: tuple[Opt, ...] | list[Opt] | None = None,
                prepared: UOp | None = None) -> ProgramSpec:
  """Lower, linearize and render one kernel with `opts` (None: choose them). The result depends only on the AST, the
  renderer's identity, the opts and the codegen flags: `get_program(ast, renderer, p.applied_opts).src == p.src`.
  `prepared` is `prepare_kernel(ast)` when the caller has it already (a fuzzer lowering one AST for several targets);
  it must be exactly that. Fires `compiling`, then `compiled` once. On a failure other than an opt that does not fit,
  the kernel is printed (pyrender) and the error re-raised."""
  if hooks.compiling:
    for fn in hooks.compiling: fn(ast, renderer, opts)
  try:
    if prepared is None: prepared = prepare_kernel(ast)
    spec = build_program(ast, prepared, renderer, _opts_or_choose(prepared, renderer, opts))
  except KernelOptError: raise  # NOTE: an opt that does not fit is the caller's business (heuristics, BEAM, a test)
  except Exception as e:
    print_failing_kernel(ast, e)
    raise
  if hooks.compiled:
    for fn in hooks.compiled: fn(ast, spec, renderer)
  return spec

__all__ = ["full_rewrite_to_sink", "linearize", "line_rewrite", "get_program", "kernel_name", "choose_opts",
           "optimize_kernel"]
