"""SPEC levels, wired into tinygrad's checkpoints (tinygrad/uop/hooks.py). Loaded at `import tinygrad` as the
`tinygrad.plugins` entry point `spec`; tinygrad itself never imports spec.

  SPEC=0  nothing is registered
  SPEC=1  tensor_graph, kernel_graph -> tensor_spec; kernel_ast -> kernel_spec; program -> program_spec
          (+ validate_index of kernels and programs when IGNORE_OOB=0)
  SPEC=2  also uop_created -> full_spec on every new UOp, and the pyrender round trip of every verified sink
  SPEC=3  also the round trip of every new UOp (eval_pyrender(*pyrender_node(u)) is u)

Which callbacks are registered follows SPEC: `install()` registers for the current value and asks `Context` to call
`sync()` whenever SPEC changes, so `with Context(SPEC=2):` turns the construction check on and leaving it turns it off
(at SPEC<2 the construction checkpoint stays empty and costs nothing). Each callback also re-reads the flags.

Loading this module needs nothing of spec: spec's checks are imported at the first check (`load()`). Importing spec
imports tinygrad, whose import loads this plugin while spec is still half imported; so `import spec`, `import tinygrad`
and `import spec.plugin` work in any order.
"""
from __future__ import annotations
import sys, weakref
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Sequence
from tinygrad.uop import Ops, GroupOp, hooks
from tinygrad.uop.ops import UOp
from tinygrad.helpers import SPEC, IGNORE_OOB, ContextVar
if TYPE_CHECKING:
  from spec.verify import type_verify, SpecError, why_illegal
  from spec.tensor_spec import tensor_spec
  from spec.kernel_spec import kernel_spec
  from spec.program_spec import program_spec
  from spec.full_spec import full_spec
  from spec.shared_spec import const_ok
  from spec import roundtrip

_loaded = [False]

def load() -> None:
  """Import spec's checks into this module (once; every callback calls it before it checks)."""
  global type_verify, SpecError, why_illegal, tensor_spec, kernel_spec, program_spec, full_spec, const_ok, roundtrip
  if _loaded[0]: return
  from spec.verify import type_verify, SpecError, why_illegal
  from spec.tensor_spec import tensor_spec
  from spec.kernel_spec import kernel_spec
  from spec.program_spec import program_spec
  from spec.full_spec import full_spec
  from spec.shared_spec import const_ok
  from spec import roundtrip
  _loaded[0] = True

# NOTE: checking may build UOps (a round trip rebuilds a graph); those must not be checked again from inside the check
_busy = [False]
_roundtripped: weakref.WeakSet[UOp] = weakref.WeakSet()

# what the plugin checked in this process (make demo prints it): UOps checked at construction (SPEC>=2), graphs checked
# at stage boundaries, graphs round-tripped through pyrender, and graphs whose every memory access z3 proved in bounds
stats: dict[str, int] = {"uops_at_construction": 0, "boundary_graphs": 0, "round_trips": 0, "index_proofs": 0}

def level() -> int: return int(SPEC.value)

def _guarded(fn: Callable[..., None]) -> Callable[..., None]:
  def checkpoint(*args: Any) -> None:
    if _busy[0] or level() < 1: return
    _busy[0] = True
    stats["boundary_graphs"] += 1
    try:
      load()
      fn(*args)
    finally: _busy[0] = False
  checkpoint.__name__ = checkpoint.__qualname__ = f"spec_{fn.__name__}"
  return checkpoint

def _roundtrip(graph: UOp | Sequence[UOp]) -> None:
  """SPEC>=2: the printed sink (or linear program) reads back as the same object(s)."""
  if level() < 2 or (isinstance(graph, UOp) and graph in _roundtripped): return
  roundtrip.check_roundtrip(graph if isinstance(graph, UOp) else list(graph))
  stats["round_trips"] += 1
  if isinstance(graph, UOp): _roundtripped.add(graph)

def _validate(graph: UOp | Sequence[UOp]) -> None:
  if IGNORE_OOB.value: return
  from spec.validate_index import validate_index
  validate_index(graph)
  stats["index_proofs"] += 1

@_guarded
def tensor_graph(sink: UOp) -> None:
  type_verify(sink, tensor_spec, "tensor")
  _roundtrip(sink)

@_guarded
def kernel_graph(sink: UOp) -> None:
  type_verify(sink, tensor_spec, "kernel graph (tensor)")
  _roundtrip(sink)

@_guarded
def kernel_ast(ast: UOp) -> None:
  type_verify(ast, kernel_spec, "kernel")
  _validate(ast)
  _roundtrip(ast)

@_guarded
def program(ast: UOp, uops: Sequence[UOp], renderer: Any = None) -> None:
  type_verify(uops, program_spec, "program")
  _validate(uops)

# NOTE: full_spec's verdict on an ALU node, a CAST or a BITCAST depends only on its op, its dtype and its sources'
# dtypes (shared_spec's typing and conversion rules and full_spec's index mixing; tests/spec/test_levels.py checks
# that), so it is memoized per that signature, and a CONST without sources has the one rule const_ok: the common nodes
# skip the pattern match
_alu_ok: set[tuple[Any, ...]] = set()
ALU = frozenset(GroupOp.ALU) | {Ops.CAST, Ops.BITCAST}

def uop_created(u: UOp) -> None:
  """SPEC>=2, the hot path: every new node against full_spec (SPEC=3: and its O(1) round trip)."""
  if _busy[0]: return
  if not _loaded[0]:
    _busy[0] = True
    try: load()
    finally: _busy[0] = False
  stats["uops_at_construction"] += 1
  if u.op in ALU and u.arg is None:
    if (key := (u.op, u.dtype, *[s.dtype for s in u.src])) in _alu_ok and level() < 3: return
  else: key = None
  if u.op is Ops.CONST and not u.src and level() < 3 and _const_ok(u): return
  _busy[0] = True
  # NOTE: full_spec's rules never raise (they are lenient), so the common case is one dict lookup and one pattern match
  try:
    verdict: Any = full_spec._rewrite(u, None)[0]
    if verdict is True and key is not None: _alu_ok.add(key)
    if verdict is not True or level() >= 3: _check_created(u)
  finally: _busy[0] = False

def _const_ok(u: UOp) -> bool:
  try: return const_ok(u.dtype, u.arg)
  except Exception: return False

def _check_created(u: UOp) -> None:
  if level() < 2: return
  if (reason := why_illegal(u, full_spec)) is not None: raise SpecError("full (at construction)", 0, u, reason)
  if (back := roundtrip.eval_pyrender(*roundtrip.pyrender_node(u))) is not u:
    why = f"eval_pyrender(*pyrender_node(u)) gave back {back!r}, not the same object"
    raise SpecError("round trip (at construction)", 0, u, why)

BOUNDARIES: dict[str, Callable[..., None]] = {"tensor_graph": tensor_graph, "kernel_graph": kernel_graph,
                                              "kernel_ast": kernel_ast, "program": program}

def sync() -> None:
  """Register exactly the callbacks the current SPEC level needs, and unregister the rest."""
  lvl = level()
  for name, fn in BOUNDARIES.items(): (hooks.register if lvl >= 1 else hooks.unregister)(name, fn)
  (hooks.register if lvl >= 2 else hooks.unregister)("uop_created", uop_created)

def uninstall() -> None:
  for name, fn in [*BOUNDARIES.items(), ("uop_created", uop_created)]: hooks.unregister(name, fn)
  if sync in (w := ContextVar.watchers.get("SPEC", [])): w.remove(sync)

def install() -> ModuleType:
  """The plugin entry point: register for the current SPEC level and follow later changes made with Context."""
  watchers = ContextVar.watchers.setdefault("SPEC", [])
  if sync not in watchers: watchers.append(sync)
  sync()
  return sys.modules[__name__]
