"""The schedule: the kernels of a tensor graph in an order that respects every dependency, with their Buffers.

    items, becomes, var_vals = create_schedule_with_vars(sink)

`items` run in order with `run_schedule`. `becomes` maps each tensor UOp of the sink (and each ASSIGN in the graph) to
the UOp that stands for its value once the schedule ran: a BUFFER reshaped to its shape (for an ASSIGN, its target
view), so the Tensor front end can swap its lazy graph for the buffer. `var_vals` binds the variables of BIND nodes by
name."""
from __future__ import annotations
import heapq, sys
from collections import OrderedDict
from dataclasses import dataclass
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp, Metadata
from tinygrad.uop import hooks
from tinygrad.device import Buffer, buffer_of, next_unique
from tinygrad.schedule.rangeify import rangeify
from tinygrad.schedule.unbind import unbind_graph, bind_view
from tinygrad.schedule.memory import plan_memory
from tinygrad.helpers import ContextVar, SCHEDULE_CACHE

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
  buffer (an ASSIGN) after every kernel that reads the version it overwrites. Among the kernels ready to run, one that
  is the last reader of a buffer goes first, so the memory planner can reuse that buffer from then on (a training
  step's peak: ResNet-18 b8 157 -> 145 MB, a D768 block 171 -> 150)."""
  kernels = [u for u in ksink.toposort() if u.op is Ops.KERNEL]
  deps: dict[UOp, set[UOp]] = {k: {s.src[1] for s in k.src if s.op is Ops.AFTER} for k in kernels}
  # NOTE: a buffer version is the node that names it (BUFFER or AFTER): the writer of src[0] must wait for its readers
  readers: dict[UOp, list[UOp]] = {}
  for k in kernels:
    for s in k.src[1:]: readers.setdefault(s, []).append(k)
  for w in kernels:
    for r in readers.get(w.src[0], []):
      if r is not w: deps[w].add(r)
  # Kahn's algorithm; among ready kernels, first one that is the last reader of a buffer another kernel wrote (its
  # memory can be reused from then on), then the graph's toposort order, so the order is deterministic
  users: dict[UOp, list[UOp]] = {k: [] for k in kernels}
  for k, ds in deps.items():
    for d in ds: users[d].append(k)
  pending = {k: len(ds) for k, ds in deps.items()}
  position = {k: i for i, k in enumerate(kernels)}
  distinct = {s: dict.fromkeys(rs) for s, rs in readers.items() if s.op is Ops.AFTER}
  unread = {s: len(rs) for s, rs in distinct.items()}
  def frees(k: UOp) -> bool: return any(unread.get(s) == 1 for s in k.src[1:])
  # two heaps of (position, kernel): the ready kernels that free a buffer, and the others; a kernel that comes to free
  # one while waiting is pushed on the first too, and whichever entry comes second is skipped
  freeing: list[tuple[int, UOp]] = []
  others: list[tuple[int, UOp]] = []
  def push(k: UOp) -> None: heapq.heappush(freeing if frees(k) else others, (position[k], k))
  for k in kernels:
    if pending[k] == 0: push(k)
  ret: list[UOp] = []
  done: set[UOp] = set()
  while freeing or others:
    k = heapq.heappop(freeing if freeing else others)[1]
    if k in done: continue
    done.add(k)
    ret.append(k)
    for s in dict.fromkeys(k.src[1:]):
      if s not in unread: continue
      unread[s] -= 1
      if unread[s] == 1:
        last = next(r for r in distinct[s] if r not in done)
        if pending[last] == 0: heapq.heappush(freeing, (position[last], last))
    for u in users[k]:
      pending[u] -= 1
      if pending[u] == 0: push(u)
  if len(ret) < len(kernels):
    raise RuntimeError(f"schedule: {len(kernels) - len(ret)} kernels depend on each other in a cycle (a read and a "
                       "write of the same buffer that cannot be ordered); make one side .contiguous()")
  return ret

# ---- canonical buffer names ----

def _is_identity_tag(tag: object) -> bool:
  # NOTE: a tag (kind, n) with n from next_unique() is an identity (a clone's), renamed like the buffers
  return isinstance(tag, tuple) and len(tag) == 2 and type(tag[1]) is int

def canonical_names(sink: UOp) -> dict[UOp, UOp]:
  """Every node of `sink` -> the same node with its buffers named LUNIQUE(0..) and its identity tags (kind, 0..) in
  order of first appearance, so a buffer's name depends on the graph alone, not on what the process created before.
  Distinct buffers keep distinct names (the renaming is one to one)."""
  # NOTE: not a graph_rewrite: the names given may equal names the input already has (a graph read back from text),
  # and the rewrite's memo would merge the two
  new: dict[UOp, UOp] = {}
  nbuf = ntag = 0
  for u in sink.toposort():
    if u.op in (Ops.UNIQUE, Ops.LUNIQUE):
      new[u], nbuf = UOp(Ops.LUNIQUE, arg=nbuf), nbuf + 1
      continue
    tag = u.tag
    if _is_identity_tag(tag): tag, ntag = (tag[0], ntag), ntag + 1
    nsrc = tuple(new[s] for s in u.src)
    new[u] = u if tag is u.tag and all(a is b for a, b in zip(nsrc, u.src)) else u.replace(src=nsrc, tag=tag)
  return new

class RealBuffers:
  """Canonical buffers (BUFFER(LUNIQUE)) -> the BUFFERs they name in the process; a buffer the schedule created gets a
  fresh identity (UNIQUE(next_unique())) the first time it is asked for."""
  def __init__(self, names: dict[UOp, UOp]):
    self.real = {c: o for o, c in names.items() if o.op is Ops.BUFFER}
  def buffer(self, u: UOp) -> UOp:
    if (r := self.real.get(u)) is None:
      if u.op is Ops.BUFFER_VIEW: r = u.replace(src=(self.buffer(u.src[0]),))
      elif u.op is Ops.BUFFER: r = UOp(Ops.BUFFER, u.dtype, (UOp(Ops.UNIQUE, arg=next_unique()), u.src[1]), u.arg)
      else: raise TypeError(f"schedule: {u.op} is not a buffer of the kernel graph")
      self.real[u] = r
    return r
  def view(self, v: UOp) -> UOp:
    return v.substitute({u: self.buffer(u) for u in v.toposort() if u.op in (Ops.BUFFER, Ops.BUFFER_VIEW)})

@dataclass(frozen=True)
class KernelGraph:
  sink: UOp                     # KERNEL nodes over BUFFERs
  becomes: dict[UOp, UOp]       # tensor graph node (unbound) -> the view of its buffer
  var_vals: dict[UOp, int]      # DEFINE_VAR -> value at the tensor graph's bindings
  unbound: dict[UOp, UOp]       # tensor graph node -> its unbound node
  size_vals: dict[UOp, int]     # the values of the variables of symbolic sizes
  aliases: dict[UOp, UOp]       # a buffer read through a wider pointer -> the buffer it is

def kernel_graph(csink: UOp) -> KernelGraph:
  """The kernel graph of the canonical tensor graph `csink`. Process replay rebuilds a schedule record's kernels with
  it."""
  # NOTE: the bound variables of symbolic sizes become the kernels' variables, so the kernels serve every binding
  usink, unbound, size_vals, aliases = unbind_graph(csink)
  ksink, becomes, var_vals = rangeify(usink)
  for var, val in size_vals.items():
    if var_vals.setdefault(var, val) != val:
      raise ValueError(f"schedule: variable {var.arg[0]!r} is bound to both {val} and {var_vals[var]}")
  return KernelGraph(ksink, becomes, var_vals, unbound, size_vals, aliases)

# NOTE: a kernel graph is a function of the canonical tensor graph, the flags and the scheduler's code (replay rebuilds
# one from a record's graph and flags), and an eager loop schedules the same graph every step: rangeify was 70-85% of an
# eager realize (a chain of 20 elementwise kernels 1.22 -> 0.22 ms a kernel; a (64, 1024) sort by its network, 57
# kernels, 313 -> 27 ms; a ResNet-18 b8 training step 1938 -> 366 ms). The last graphs are kept (SCHEDULE_CACHE_SIZE,
# SCHEDULE_CACHE_NODES), keyed by the graph, the value of every flag and the identity of every global of the
# scheduler's modules (SCHEDULER_MODULES), so a function or constant replaced there (a test's monkeypatch, a planted
# bug) schedules afresh. A change made inside an object (a PatternMatcher's rules edited in place) is not seen: clear
# the cache with `kernel_graph_cache.clear()` after one. SCHEDULE_CACHE=0 turns it off (the fuzz campaign's workers: a
# case's rule coverage is what scheduling it fires)
SCHEDULE_CACHE_SIZE, SCHEDULE_CACHE_NODES = 256, 1 << 15
SCHEDULER_MODULES = ("tinygrad.engine.schedule", "tinygrad.schedule.rangeify", "tinygrad.schedule.multi",
                     "tinygrad.schedule.unbind", "tinygrad.uop.ops", "tinygrad.uop.symbolic", "tinygrad.uop.sint")
# key -> (the kernel graph, the nodes of its tensor graph). NOTE: a graph's kernels (their ASTs) are what it holds: a
# ResNet-18 training step's (3978 nodes) about 30 MB, so the cache keeps at most SCHEDULE_CACHE_NODES tensor graph nodes
# (about 250 MB of such graphs) as well as at most SCHEDULE_CACHE_SIZE graphs
kernel_graph_cache: OrderedDict[tuple, tuple[KernelGraph, int]] = OrderedDict()

def cached_kernel_graph(csink: UOp) -> KernelGraph:
  """kernel_graph(csink), from kernel_graph_cache where the same graph was scheduled under the same flags and code
  (SCHEDULE_CACHE=1)."""
  if not SCHEDULE_CACHE.value: return kernel_graph(csink)
  code = tuple(id(v) for name in SCHEDULER_MODULES for v in vars(sys.modules[name]).values())
  key = (csink, tuple((k, v.value) for k, v in ContextVar._registry.items()), code)
  if (hit := kernel_graph_cache.get(key)) is not None:
    kernel_graph_cache.move_to_end(key)
    return hit[0]
  kg = kernel_graph(csink)
  if (nodes := len(csink.toposort())) > SCHEDULE_CACHE_NODES: return kg
  kernel_graph_cache[key] = (kg, nodes)
  total = sum(n for _, n in kernel_graph_cache.values())
  while len(kernel_graph_cache) > SCHEDULE_CACHE_SIZE or total > SCHEDULE_CACHE_NODES:
    total -= kernel_graph_cache.popitem(last=False)[1][1]
  return kg

def create_schedule_with_vars(sink: UOp) -> tuple[list[ScheduleItem], dict[UOp, UOp], dict[str, int]]:
  """Schedule the tensor graph `sink`. Returns (items in run order, becomes, var_vals); see the module doc."""
  # NOTE: the scheduler and the hooks see the graph with its buffers renamed LUNIQUE(0..) in order of first appearance,
  # so the same program gives the same tensor graph, kernel graph and kernels whatever ran in the process before
  names = canonical_names(sink)
  csink = names[sink]
  if hooks.tensor_graph:
    for fn in hooks.tensor_graph: fn(csink)
  kg = cached_kernel_graph(csink)
  ksink, cbecomes = kg.sink, kg.becomes
  if hooks.kernel_graph:
    for fn in hooks.kernel_graph: fn(ksink)
  kernels = order_kernels(ksink)
  real = RealBuffers(names)
  for wide, buf in kg.aliases.items(): real.real[wide] = real.real[buf]
  items: list[ScheduleItem] = []
  for k in kernels:
    if hooks.kernel_ast and k.arg.op is Ops.SINK:
      for fn in hooks.kernel_ast: fn(k.arg)
    items.append(ScheduleItem(k.arg, tuple(buffer_of(real.buffer(_base(s))) for s in k.src), k.metadata))
  original = {kg.unbound.get(c, c): o for o, c in names.items() if kg.unbound.get(c, c) in cbecomes}
  # NOTE: nodes the multi-device pass made (one per device) stand for no node of the caller's graph
  becomes = {original[c]: bind_view(real.view(v), kg.size_vals) for c, v in cbecomes.items()
             if c in original}
  # buffers the schedule creates and nobody outside holds may share memory
  held = {_base(s) for s in ksink.src} | {_base_of(b) for v in cbecomes.values() for b in _views_of(v)}
  intermediates = {buffer_of(real.buffer(_base(k.src[0]))) for k in kernels if _base(k.src[0]) not in held}
  if (remap := plan_memory(items, intermediates)):
    items = [ScheduleItem(it.ast, tuple(remap.get(b, b) for b in it.bufs), it.metadata) for it in items]
  return items, becomes, {v.arg[0]: val for v, val in kg.var_vals.items()}

def _views_of(v: UOp) -> tuple[UOp, ...]:
  """The buffer views a node becomes: its shards for a tensor on several devices, else itself."""
  return v.src if v.op is Ops.MULTI else (v,)

def _base_of(view: UOp) -> UOp:
  while view.op not in (Ops.BUFFER, Ops.BUFFER_VIEW) and view.src: view = view.src[0]
  return view

def create_schedule(sink: UOp) -> list[ScheduleItem]:
  """The schedule of `sink` (see create_schedule_with_vars for the map the Tensor front end needs)."""
  return create_schedule_with_vars(sink)[0]

__all__ = ["ScheduleItem", "KernelGraph", "kernel_graph", "create_schedule", "create_schedule_with_vars",
           "order_kernels"]
