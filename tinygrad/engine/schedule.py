"""The schedule: the kernels of a tensor graph in an order that respects every dependency, with their Buffers.

    items, becomes, var_vals = create_schedule_with_vars(sink)

`items` run in order with `run_schedule`. `becomes` maps each tensor UOp of the sink (and each ASSIGN in the graph) to
the UOp that stands for its value once the schedule ran: a BUFFER reshaped to its shape (for an ASSIGN, its target
view), so the Tensor front end can swap its lazy graph for the buffer. `var_vals` binds the variables of BIND nodes by
name."""
from __future__ import annotations
import heapq
from dataclasses import dataclass
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp, Metadata
from tinygrad.uop import hooks
from tinygrad.device import Buffer, buffer_of
from tinygrad.schedule.rangeify import rangeify
from tinygrad.schedule.memory import plan_memory

@dataclass(frozen=True)
class ScheduleItem:
  """One kernel launch (or a COPY between devices). `ast` is the kernel AST (a SINK) or a bare COPY; `bufs[i]` is the
  Buffer of its DEFINE_GLOBAL i (the output first)."""
  ast: UOp
  bufs: tuple[Buffer, ...]
  metadata: tuple[Metadata, ...] = ()

def _base(u: UOp) -> UOp:
  while u.op is Ops.AFTER: u = u.src[0]
  return u

def order_kernels(ksink: UOp) -> list[UOp]:
  """The KERNEL nodes in a valid run order: after the kernels whose AFTER they read, and a kernel that overwrites a
  buffer (an ASSIGN) after every kernel that reads the version it overwrites."""
  kernels = [u for u in ksink.toposort() if u.op is Ops.KERNEL]
  deps: dict[UOp, set[UOp]] = {k: {s.src[1] for s in k.src if s.op is Ops.AFTER} for k in kernels}
  # NOTE: a buffer version is the node that names it (BUFFER or AFTER): the writer of src[0] must wait for its readers
  readers: dict[UOp, list[UOp]] = {}
  for k in kernels:
    for s in k.src[1:]: readers.setdefault(s, []).append(k)
  for w in kernels:
    for r in readers.get(w.src[0], []):
      if r is not w: deps[w].add(r)
  # Kahn's algorithm; among ready kernels the graph's toposort order is kept, so the order is deterministic
  users: dict[UOp, list[UOp]] = {k: [] for k in kernels}
  for k, ds in deps.items():
    for d in ds: users[d].append(k)
  pending = {k: len(ds) for k, ds in deps.items()}
  position = {k: i for i, k in enumerate(kernels)}
  ready = [(position[k], k) for k in kernels if pending[k] == 0]
  ret: list[UOp] = []
  while ready:
    k = heapq.heappop(ready)[1]
    ret.append(k)
    for u in users[k]:
      pending[u] -= 1
      if pending[u] == 0: heapq.heappush(ready, (position[u], u))
  if len(ret) < len(kernels):
    raise RuntimeError(f"schedule: {len(kernels) - len(ret)} kernels depend on each other in a cycle (a read and a "
                       "write of the same buffer that cannot be ordered); make one side .contiguous()")
  return ret

def create_schedule_with_vars(sink: UOp) -> tuple[list[ScheduleItem], dict[UOp, UOp], dict[str, int]]:
  """Schedule the tensor graph `sink`. Returns (items in run order, becomes, var_vals); see the module doc."""
  if hooks.tensor_graph:
    for fn in hooks.tensor_graph: fn(sink)
  ksink, becomes, var_vals = rangeify(sink)
  if hooks.kernel_graph:
    for fn in hooks.kernel_graph: fn(ksink)
  kernels = order_kernels(ksink)
  items: list[ScheduleItem] = []
  for k in kernels:
    if hooks.kernel_ast and k.arg.op is Ops.SINK:
      for fn in hooks.kernel_ast: fn(k.arg)
    items.append(ScheduleItem(k.arg, tuple(buffer_of(s) for s in k.src), k.metadata))
  # buffers the schedule creates and nobody outside holds may share memory
  held = {_base(s) for s in ksink.src} | {_base_of(v) for v in becomes.values()}
  intermediates = {buffer_of(_base(k.src[0])) for k in kernels if _base(k.src[0]) not in held}
  if (remap := plan_memory(items, intermediates)):
    items = [ScheduleItem(it.ast, tuple(remap.get(b, b) for b in it.bufs), it.metadata) for it in items]
  return items, becomes, {v.arg[0]: val for v, val in var_vals.items()}

def _base_of(view: UOp) -> UOp:
  while view.op not in (Ops.BUFFER, Ops.BUFFER_VIEW) and view.src: view = view.src[0]
  return view

def create_schedule(sink: UOp) -> list[ScheduleItem]:
  """The schedule of `sink` (see create_schedule_with_vars for the map the Tensor front end needs)."""
  return create_schedule_with_vars(sink)[0]

__all__ = ["ScheduleItem", "create_schedule", "create_schedule_with_vars", "order_kernels"]
