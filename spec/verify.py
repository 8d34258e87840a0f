"""type_verify: check every node of a graph (or a linear program) against a spec, and say exactly what is wrong."""
from __future__ import annotations
import weakref
from typing import Any, Sequence
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp, PatternMatcher
from tinygrad.helpers import DEBUG
from spec.shared_spec import RuleFailure, Spec

class SpecError(Exception):
  """An illegal node: `stage`, `position` (index in the toposort or list), `node` and `reason` are kept for tools."""
  def __init__(self, stage: str, position: int, node: UOp, reason: str, total: int = 0):
    self.stage, self.position, self.node, self.reason = stage, position, node, reason
    super().__init__(format_error(stage, position, node, reason, total) + "\n" + _view_line(stage, node, reason))

def _view_line(stage: str, node: UOp, reason: str) -> str:
  """The command that opens the illegal node's graph in the viewer (under VIZ=1 it is marked in the run's trace)."""
  from tinygrad.viz import record
  if record.active is None or not record.active.rewrites:
    return "  view:  rerun with VIZ=1 to open this graph in the viewer"
  return "  view:  " + record.active.mark_error(f"{stage} spec error", node, reason)

def describe_node(u: UOp) -> str:
  return f"{u.op} {u.dtype!r} arg={_short(u.arg)}"

def _short(arg: Any) -> str:
  # NOTE: a KERNEL's arg is a whole AST; name it instead of printing it
  if isinstance(arg, UOp): return f"<{arg.op} with {len(arg.toposort())} nodes>"
  r = repr(arg)
  return r if len(r) <= 200 else r[:197] + "..."

def format_error(stage: str, position: int, node: UOp, reason: str, total: int = 0) -> str:
  lines = [f"{stage} spec: node {position}{f' of {total}' if total else ''} is illegal: {node.op}",
           f"  dtype: {node.dtype!r}", f"  arg:   {_short(node.arg)}"]
  lines += [f"  src[{i}]: {describe_node(s)}" for i, s in enumerate(node.src)] or ["  src: ()"]
  lines.append(f"  why:   {reason}")
  return "\n".join(lines)

def spec_name(spec: PatternMatcher) -> str:
  """The stage a spec describes ("tensor", "kernel", ...), "custom" for any other matcher."""
  return spec.name if isinstance(spec, Spec) else "custom"

def why_illegal(u: UOp, spec: PatternMatcher) -> str | None:
  """None if `spec` accepts `u`, else why not: the failing rule's message, or that no rule accepts the node."""
  ret: Any
  try: ret, ri = spec._rewrite(u, None)
  except RuleFailure as e: return str(e)
  except Exception as e: return f"a spec rule crashed on it ({type(e).__name__}: {e}): the node is malformed"
  if ret is True: return None
  if ret is None:
    return f"no rule accepts {u.op} in this form (an op of another stage, wrong sources or a wrong dtype)"
  return f"rejected by {spec.rules[ri].describe()}"

# verdicts per spec: the nodes already found legal (nodes are immutable, so a verdict never changes)
_legal: weakref.WeakKeyDictionary[PatternMatcher, weakref.WeakSet[UOp]] = weakref.WeakKeyDictionary()

def legal_cache(spec: PatternMatcher) -> weakref.WeakSet[UOp]:
  if (ok := _legal.get(spec)) is None: _legal[spec] = ok = weakref.WeakSet()
  return ok

def print_graph(root: UOp | Sequence[UOp]) -> None:
  try:
    from tinygrad.uop.pyrender import pyrender  # type: ignore[import-not-found, unused-ignore]
    print(pyrender(root if isinstance(root, UOp) else list(root)))
  except Exception:
    nodes = list(root.toposort()) if isinstance(root, UOp) else list(root)
    num = {u: i for i, u in enumerate(nodes)}
    for i, u in enumerate(nodes): print(f"{i:4d} {describe_node(u)} src={[num.get(s, '?') for s in u.src]}")

def linear_structure(nodes: Sequence[UOp]) -> tuple[int, str] | None:
  """(position, reason) of the first break of a program's block structure: every RANGE is closed by exactly one END
  after it, and IF/ENDIF blocks nest (an ENDIF closes the innermost open IF). None if the structure holds."""
  opened: dict[UOp, int] = {}
  closed: set[UOp] = set()
  ifs: list[UOp] = []
  for i, u in enumerate(nodes):
    if u.op is Ops.RANGE:
      if u in opened: return i, "RANGE appears twice in the program"
      opened[u] = i
    elif u.op is Ops.END:
      for r in u.src[1:]:
        if r in closed: return i, f"END closes the RANGE at {opened.get(r, '?')} a second time"
        closed.add(r)
    elif u.op is Ops.IF: ifs.append(u)
    elif u.op is Ops.ENDIF:
      if not ifs or u.src[0] is not ifs[-1]: return i, "ENDIF does not close the innermost open IF"
      ifs.pop()
  if ifs: return len(nodes) - 1, f"{len(ifs)} IF block(s) are never closed"
  if (unclosed := [i for r, i in opened.items() if r not in closed]): return unclosed[0], "RANGE is never closed"
  return None

def type_verify(graph_or_list: UOp | Sequence[UOp], spec: PatternMatcher, stage: str = "") -> None:
  """Check every node of `graph_or_list` against `spec`; raise SpecError at the first illegal one.

  Checks, in this order, for each node of the sink's toposort (or of the list, in list order):
    - in a list (a linear program), every source of a node appears earlier in the list;
    - the first rule of `spec` whose pattern matches the node and that returns a verdict returns True (False, a
      RuleFailure, or no verdict at all make the node illegal);
  and then, for a list checked against program_spec, the block structure (linear_structure): each RANGE closed by
  exactly one END after it, IF/ENDIF properly nested.
  The SpecError names the stage, the node's position, its op, dtype, arg, each source (op, dtype, arg) and the reason.
  At DEBUG>=3 the graph is printed with pyrender first. Legal verdicts are cached per (node, spec): checking a graph
  again costs one cache lookup per node.
  """
  stage = stage or spec_name(spec)
  is_list = not isinstance(graph_or_list, UOp)
  nodes = list(graph_or_list.toposort()) if isinstance(graph_or_list, UOp) else list(graph_or_list)
  ok = legal_cache(spec)
  seen: set[UOp] = set()
  for i, u in enumerate(nodes):
    if is_list:
      if (late := next((j for j, s in enumerate(u.src) if s not in seen), None)) is not None:
        why = f"src[{late}] ({u.src[late].op}) does not appear earlier in the program"
        _raise(graph_or_list, stage, i, u, why, len(nodes))
      seen.add(u)
    if u in ok: continue
    if (reason := why_illegal(u, spec)) is not None: _raise(graph_or_list, stage, i, u, reason, len(nodes))
    ok.add(u)
  if is_list and spec_name(spec) == "program" and (bad := linear_structure(nodes)) is not None:
    _raise(graph_or_list, stage, bad[0], nodes[bad[0]], bad[1], len(nodes))

def _raise(root: UOp | Sequence[UOp], stage: str, i: int, u: UOp, reason: str, total: int) -> None:
  if DEBUG >= 3: print_graph(root)
  raise SpecError(stage, i, u, reason, total)
