"""Launch dimensions: where a kernel's grid axes go among the target's launch dimensions, within the limits its renderer
declares (`global_max`, `local_max`: one limit per dimension). The one place that decides it: the opts check with it
that a request fits (opt.py), the GPU heuristics that it fits without merging (heuristic.py), and the lowerer builds
the SPECIALs and index math from it (lowerer.py).

Axes are listed innermost first (`launch_axes`): the innermost is dimension 0 (gidx0/lidx0: x, the largest limit, the
fastest thread id). A plan lists, per launch dimension, its digits innermost first; a digit is a part of one axis
(`Digit(axis, size, weight)`): the dimension's id is the mixed-radix number of its digits, and an axis is the sum of
its digits' values times their weights. So:
- no more axes than dimensions, each within its own dimension's limit: axis i is dimension i (the plan is the identity,
  no index math added);
- else consecutive axes share a dimension (a merge: `axis = (gidx // stride) % size`), the outer ones first;
- an axis over every dimension's limit is split into factors first (`axis = hi * lo_size + lo`).
A plan's index math stays within each axis' range by construction; the z3 bounds proof (spec/validate_index.py) checks
every access it reaches. No plan (a prime axis over every limit, more threads than the dimensions hold): None."""
from __future__ import annotations
import itertools
from dataclasses import dataclass
from tinygrad.uop import Ops, AxisType
from tinygrad.uop.ops import UOp
from tinygrad.dtype import dtypes
from tinygrad.helpers import prod

GLOBAL_TYPES = (AxisType.GLOBAL,)
# NOTE: sorted by (AxisType, id) and reversed: a GROUP_REDUCE range is lidx0, then the WARP lanes, then LOCALs by id
LOCAL_TYPES = (AxisType.LOCAL, AxisType.WARP, AxisType.GROUP_REDUCE)
MAX_SPLITS = 8

@dataclass(frozen=True)
class Digit:
  axis: int    # which axis (index into the innermost-first list)
  size: int
  weight: int  # the axis' value is the sum of its digits' values times their weights

Plan = tuple[tuple[Digit, ...], ...]

def launch_axes(ranges: list[UOp], types: tuple[AxisType, ...]) -> list[UOp]:
  """The RANGEs of these AxisTypes in launch order, innermost first."""
  return list(reversed(sorted([r for r in ranges if r.arg[-1] in types], key=lambda r: (r.arg[-1], r.arg[0]))))

def identity_plan(sizes: list[int], limits: tuple[int, ...]) -> Plan | None:
  """Axis i as dimension i, where that fits."""
  if len(sizes) > len(limits) or any(s > m for s, m in zip(sizes, limits)): return None
  return tuple((Digit(i, s, 1),) for i, s in enumerate(sizes))

def is_identity(plan: Plan) -> bool: return all(len(d) == 1 and d[0].weight == 1 for d in plan)

def _partitions(n: int, k: int) -> list[tuple[int, ...]]:
  """Every split of n items into k consecutive nonempty groups, as group lengths."""
  return [tuple(b - a for a, b in zip((0, *cuts), (*cuts, n))) for cuts in itertools.combinations(range(1, n), k - 1)]

def _cut(digits: list[Digit], lens: tuple[int, ...]) -> Plan:
  return tuple(tuple(digits[sum(lens[:i]):sum(lens[:i + 1])]) for i in range(len(lens)))

def _group(digits: list[Digit], limits: tuple[int, ...]) -> Plan | None:
  """Consecutive digits into at most len(limits) dimensions, each within its limit: the most dimensions, then the inner
  dimensions with the fewest digits (the outer axes merge first)."""
  plans = (_cut(digits, lens) for k in range(min(len(digits), len(limits)), 0, -1)
           for lens in _partitions(len(digits), k))
  return next((p for p in plans if all(prod(d.size for d in dim) <= m for dim, m in zip(p, limits))), None)

def _split(d: Digit) -> tuple[Digit, Digit] | None:
  """A digit as two (inner, outer), the inner factor the largest divisor at most its square root; None for a prime."""
  lo = next((f for f in range(int(d.size ** 0.5), 1, -1) if d.size % f == 0), None)
  return None if lo is None else (Digit(d.axis, lo, d.weight), Digit(d.axis, d.size // lo, d.weight * lo))

def plan_launch(sizes: list[int], limits: tuple[int, ...]) -> Plan | None:
  """Where axes of these sizes (innermost first) go among launch dimensions of these limits; None if nowhere."""
  if (plan := identity_plan(sizes, limits)) is not None: return plan
  if not limits or any(s < 1 for s in sizes): return None
  digits = [Digit(i, s, 1) for i, s in enumerate(sizes)]
  for _ in range(MAX_SPLITS):
    if (plan := _group(digits, limits)) is not None: return plan
    # NOTE: the largest digit over the smallest limit is split; one over none of them could fit somewhere as it is
    over = sorted([i for i, d in enumerate(digits) if d.size > min(limits)], key=lambda i: -digits[i].size)
    parts = next(((i, p) for i in over if (p := _split(digits[i])) is not None), None)
    if parts is None: return None
    digits[parts[0]:parts[0] + 1] = list(parts[1])
  return None

def plan_for(axes: list[UOp], limits: tuple[int, ...] | None) -> Plan | None:
  """The plan of these RANGEs (innermost first): constant sizes only; a symbolic one must fit where it is."""
  if limits is None: return None
  if any(r.src[0].op is not Ops.CONST for r in axes):
    return identity_plan([int(r.src[0].vmax) for r in axes], limits)
  return plan_launch([int(r.src[0].arg) for r in axes], limits)

def grid_plan(ast: UOp, types: tuple[AxisType, ...], limits: tuple[int, ...] | None) -> tuple[list[UOp], Plan | None]:
  """A kernel's axes of these AxisTypes (innermost first) and their plan within these launch limits."""
  axes = launch_axes([u for u in ast.toposort() if u.op is Ops.RANGE], types)
  return axes, plan_for(axes, limits)

def plan_specials(axes: list[UOp], plan: Plan, kind: str) -> list[UOp]:
  """Each axis' index expression over the SPECIALs `{kind}0..` of the plan (the identity: the SPECIALs themselves)."""
  if is_identity(plan): return [UOp(Ops.SPECIAL, r.dtype, r.src, f"{kind}{i}") for i, r in enumerate(axes)]
  terms: list[list[UOp]] = [[] for _ in axes]
  for n, dim in enumerate(plan):
    sp = UOp(Ops.SPECIAL, dtypes.index, (UOp.const(dtypes.index, prod(d.size for d in dim)),), f"{kind}{n}")
    stride = 1
    for k, d in enumerate(dim):
      v = sp // stride if stride > 1 else sp
      if k < len(dim) - 1: v = v % d.size
      terms[d.axis].append(v * d.weight if d.weight > 1 else v)
      stride *= d.size
  return [sum(t[1:], t[0]) for t in terms]

__all__ = ["Digit", "Plan", "launch_axes", "plan_launch", "plan_for", "plan_specials", "grid_plan", "identity_plan",
           "is_identity", "GLOBAL_TYPES", "LOCAL_TYPES"]
