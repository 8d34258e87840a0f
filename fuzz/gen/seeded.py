"""Kernel cases grown from a seed kernel (a real model's kernel, `python -m fuzz seeds`): `mutate_kernel(ch, seed)`
reads its choices from a chooser as the plain generator does, so the campaign's byte-level mutations of a seeded input
(fuzz/campaign/scheduler.py) are nearby mutations of the same seed kernel.

Every choice's first option keeps the seed (a chooser that reads zeros gives the seed itself, fitted). In order:

  fit       the seed's ranges halved, largest first, until the kernel's loop iterations are at most `max_points`
            (the reference and the PYTHON interpreter run every one): a subset of the seed's points, so every access
            stays in bounds; a range ended by a DEFINE_VAR is left alone (its variable's value is drawn instead)
  edits     up to three: a constant replaced by an edge value of its dtype; a binary or unary ALU op swapped for another
            of its kind; a value replaced by one of its same-dtype sources; a binary op's operands swapped; a REDUCE's
            op changed (ADD, MUL, MAX); a float value rounded through another float dtype (a cast there and back).
            An edit whose kernel is not kernel_spec is dropped
  opts      the seed's own (the opts its capture applied), none (each target's heuristics), random opts or a GPU
            target's default opts, as the plain generator draws them
  var_vals  each DEFINE_VAR's value kept or drawn in its range (the ends first)
  seed      the input data's seed kept or drawn
"""
from __future__ import annotations
import math
from typing import Any, Callable
from tinygrad.uop import Ops, GroupOp
from tinygrad.uop.ops import UOp
from tinygrad.dtype import dtypes
from fuzz.gen.choosers import Chooser
from fuzz.gen.kernels import KernelCase, KernelConfig, _KernelBuilder, random_opts, gpu_opts
from fuzz.campaign.reduce import substitute, is_value, resize_range

# the loop iterations a seeded case may run (the plain generator's max_points is 2048 per store)
SEED_MAX_POINTS = 4096

FLOAT_BINARY = (Ops.ADD, Ops.SUB, Ops.MUL, Ops.MAX)
INT_BINARY = (Ops.ADD, Ops.SUB, Ops.MUL, Ops.MAX, Ops.AND, Ops.OR, Ops.XOR)
COMPARES = (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ)
FLOAT_UNARY = (Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIPROCAL, Ops.NEG, Ops.TRUNC)
REDUCE_OPS = (Ops.ADD, Ops.MUL, Ops.MAX)
ROUND_THROUGH = (dtypes.half, dtypes.bfloat16, dtypes.fp8e4m3, dtypes.float64)

def points(ast: UOp) -> int:
  """The loop iterations of the kernel at most: the product of every range's largest extent."""
  return math.prod(max(1, int(u.src[0].vmax)) for u in ast.toposort() if u.op is Ops.RANGE)

def fit(ast: UOp, max_points: int) -> UOp:
  """The kernel with its largest constant-ended range halved (rounded up) until it runs at most max_points iterations
  (or no range can shrink)."""
  while (n := points(ast)) > max_points:
    rngs = [u for u in ast.toposort() if u.op is Ops.RANGE and u.src[0].op is Ops.CONST and int(u.src[0].arg) > 1]
    if not rngs: break
    r = max(rngs, key=lambda u: (int(u.src[0].arg), -u.arg[0]))
    ast = resize_range(ast, r, (int(r.src[0].arg) + 1) // 2)
    if points(ast) >= n: break
  return ast

def _swap_op(u: UOp, ch: Chooser) -> UOp | None:
  if u.op in COMPARES: ops: tuple[Ops, ...] = COMPARES
  elif u.op in FLOAT_BINARY and dtypes.is_float(u.dtype): ops = FLOAT_BINARY
  elif u.op in INT_BINARY and dtypes.is_int(u.dtype): ops = INT_BINARY
  elif u.op in FLOAT_UNARY and dtypes.is_float(u.dtype): ops = FLOAT_UNARY
  else: return None
  op = ch.choice([o for o in ops if o is not u.op])
  return UOp(op, u.dtype, u.src, u.arg)

def _edit(ast: UOp, ch: Chooser) -> UOp:
  """One edit of a value node (see the module docstring); the AST unchanged where the drawn edit does not apply."""
  values = [u for u in ast.toposort() if is_value(u) or (u.op is Ops.CONST and u.dtype not in (dtypes.index,))]
  if not values: return ast
  u = ch.choice(values)
  kind = ch.integer(0, 5)
  new: UOp | None = None
  if kind == 0 and u.op is Ops.CONST and u.dtype.count == 1:
    new = _KernelBuilder(ch, KernelConfig()).const(u.dtype.scalar())
  elif kind == 1 and u.op in GroupOp.ALU: new = _swap_op(u, ch)
  elif kind == 2:
    srcs = [s for s in u.src if s.dtype == u.dtype and is_value(s)]
    if srcs and u.op is not Ops.REDUCE: new = ch.choice(srcs)
  elif kind == 3 and u.op in GroupOp.Binary and len(u.src) == 2 and u.src[0].dtype == u.src[1].dtype:
    new = u.replace(src=(u.src[1], u.src[0]))
  elif kind == 4 and u.op is Ops.REDUCE: new = u.replace(arg=ch.choice([o for o in REDUCE_OPS if o is not u.arg]))
  elif kind == 5 and dtypes.is_float(u.dtype) and u.dtype.count == 1:
    via = ch.choice([d for d in ROUND_THROUGH if d != u.dtype])
    new = u.cast(via).cast(u.dtype)
  if new is None or new is u: return ast
  return substitute(ast, {u: new})

def mutate_kernel(ch: Chooser, seed: KernelCase, valid: Callable[[UOp], bool],
                  max_points: int = SEED_MAX_POINTS) -> KernelCase:
  """A case near `seed` from the chooser's choices (see the module docstring); `valid(ast)` says whether an edited
  kernel is legal (kernel_spec, every range closed): an edit that is not is dropped."""
  ast = fit(seed.ast, max_points)
  for _ in range(ch.integer(0, 3)):
    try: cand = _edit(ast, ch)
    except Exception: continue
    if cand is not ast and valid(cand): ast = cand
  k = ch.integer(0, 3)
  opts: tuple[Any, ...] | None = seed.opts if k == 0 else None if k == 1 else random_opts(ch, ast) if k == 2 else \
    gpu_opts(ch, ast)
  var_vals = dict(seed.var_vals)
  for v in sorted((u for u in ast.toposort() if u.op is Ops.DEFINE_VAR), key=lambda u: u.arg[0]):
    lo, hi = int(v.vmin), int(v.vmax)
    if (pick := ch.integer(0, 3)) == 1: var_vals[v.arg[0]] = lo
    elif pick == 2: var_vals[v.arg[0]] = hi
    elif pick == 3: var_vals[v.arg[0]] = ch.integer(lo, hi)
    else: var_vals.setdefault(v.arg[0], lo)
  s = ch.integer(0, 2**31 - 1)
  return KernelCase(ast, var_vals, opts, seed.seed if s == 0 else s)

__all__ = ["mutate_kernel", "fit", "points", "SEED_MAX_POINTS"]
