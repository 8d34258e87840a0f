"""create_schedule (order, buffers, hooks), memory planning, and run_schedule end to end on CPU against numpy."""
import numpy as np
import pytest
from tinygrad.uop import Ops, hooks
from tinygrad.uop.ops import UOp
from tinygrad.dtype import dtypes
from tinygrad.device import buffer_of, Buffer
from tinygrad.engine.schedule import create_schedule, create_schedule_with_vars, order_kernels, ScheduleItem
from tinygrad.engine.realize import run_schedule, get_runner
from tinygrad.schedule.memory import plan_memory, ALIGN
from tinygrad.schedule.rangeify import rangeify
from tests.schedule.test_rangeify import inputs, const, bufuop, matmul, cumsum, pool_last

def load_inputs(data):
  for u, n in data.items(): buffer_of(bufuop(u)).copyin(memoryview(np.ascontiguousarray(n).reshape(-1)))

def run(*outs, data):
  load_inputs(data)
  items, becomes, vv = create_schedule_with_vars(UOp.sink(*outs))
  run_schedule(items, vv)
  return [buffer_of(bufuop(becomes[o])).numpy().reshape(o.shape) for o in outs], items

# ---- ordering and buffers ----

def test_schedule_is_in_dependency_order():
  (x,), (nx,) = inputs((4, 8))
  s = x.r(Ops.ADD, (1,)).expand((4, 8))
  out = x.alu(Ops.SUB, s)
  items = create_schedule(UOp.sink(out))
  assert len(items) == 2
  # the first kernel writes the buffer the second reads
  assert items[0].bufs[0] in items[1].bufs[1:]

def test_schedule_item_bufs_follow_define_globals():
  (a, b), _ = inputs((3, 4), (3, 4))
  (it,) = create_schedule(UOp.sink(a + b))
  dgs = sorted((u for u in it.ast.toposort() if u.op is Ops.DEFINE_GLOBAL), key=lambda u: u.arg)
  assert len(dgs) == len(it.bufs) == 3
  assert all(dg.dtype.base is b.dtype and dg.dtype.size == b.size for dg, b in zip(dgs, it.bufs))
  assert it.bufs[1] is buffer_of(bufuop(a)) and it.bufs[2] is buffer_of(bufuop(b))

def test_assign_runs_after_readers_of_old_value():
  (x,), _ = inputs((4,))
  reader = x * const(2.0, (4,))
  asg = UOp(Ops.ASSIGN, dtypes.float32, (x, x + const(1.0, (4,))))
  # the assign comes first in the sink, but the reader of the old x must run before it
  ksink, _, _ = rangeify(UOp.sink(asg, reader))
  ks = order_kernels(ksink)
  writer = next(k for k in ks if k.src[0] is x)
  other = next(k for k in ks if k is not writer)
  assert ks.index(other) < ks.index(writer)

def test_hooks_fire_at_each_stage():
  (a,), _ = inputs((4,))
  seen = {"tensor_graph": [], "kernel_graph": [], "kernel_ast": []}
  fns = {k: (lambda v, k=k: seen[k].append(v)) for k in seen}
  for k, f in fns.items(): hooks.register(k, f)
  try: items = create_schedule(UOp.sink(a + a, a * a))
  finally:
    for k, f in fns.items(): hooks.unregister(k, f)
  assert len(seen["tensor_graph"]) == 1 and seen["tensor_graph"][0].op is Ops.SINK
  assert len(seen["kernel_graph"]) == 1 and any(u.op is Ops.KERNEL for u in seen["kernel_graph"][0].toposort())
  assert [it.ast for it in items] == seen["kernel_ast"]

# ---- memory planning ----

def test_memory_planner_reuses_dead_intermediates():
  (x,), (nx,) = inputs((16,))
  c1 = (x + const(1.0, (16,))).contiguous()
  c2 = (c1 * const(2.0, (16,))).contiguous()
  c3 = (c2 + const(3.0, (16,))).contiguous()
  out = c3 * const(0.5, (16,))
  (res,), items = run(out, data={x: nx})
  assert len(items) == 4
  # c1 is dead once c2 is written, so c3 takes c1's memory; the output keeps its own
  assert items[2].bufs[0] is items[0].bufs[0]
  assert items[3].bufs[0] not in {b for it in items[:3] for b in it.bufs}
  np.testing.assert_allclose(res, ((nx + 1) * 2 + 3) * 0.5, rtol=1e-6)

def test_memory_planner_never_reuses_live_or_held_buffers():
  class It:
    def __init__(self, *bufs): self.bufs = bufs
  a, b, c, d = (Buffer("CPU", 8, dtypes.float32) for _ in range(4))
  # a: items 0-1, b: items 1-2, c: item 2, d: item 3 (d is held by the user)
  items = [It(a), It(b, a), It(c, b), It(d, c)]
  remap = plan_memory(items, {a, b, c})
  assert remap == {c: a}
  remap2 = plan_memory(items, {a, b, c, d})
  assert remap2[d] is b and remap2[c] is a

def test_memory_planner_shares_across_sizes_and_dtypes():
  class It:
    def __init__(self, *bufs): self.bufs = bufs
  a, b = Buffer("CPU", 8, dtypes.float32), Buffer("CPU", 4, dtypes.float32)
  c = Buffer("CPU", 8, dtypes.int32)
  remap = plan_memory([It(a), It(b), It(c)], {a, b, c})
  # the smaller float buffer is a view of a's memory, the int one a view of all of it
  assert remap[b].base is a and remap[b].offset == 0 and remap[b].size == 4
  assert remap[c].base is a and remap[c].dtype is dtypes.int32

def test_memory_planner_places_smaller_buffers_in_larger_dead_ones():
  """Sizes that grow along the schedule (a causal attention's blocks) share the largest one's memory, as views at
  aligned offsets: what is allocated is the largest pair that lives at once, not the sum; no two buffers whose
  lifetimes overlap overlap in bytes."""
  class It:
    def __init__(self, *bufs): self.bufs = bufs
  sizes = [1000 * (i + 1) for i in range(8)]
  bufs = [Buffer("CPU", n, dtypes.float32) for n in sizes]
  # buffer i is written by item i and read by item i + 1
  items = [It(bufs[0])] + [It(bufs[i], bufs[i - 1]) for i in range(1, 8)] + [It(bufs[7])]
  remap = plan_memory(items, set(bufs))
  placed = [remap.get(b, b) for b in bufs]
  homes = {p.base for p in placed}
  assert homes == {bufs[7], bufs[6]} and bufs[7] not in remap and bufs[6] not in remap
  for i in range(7):
    x, y = placed[i], placed[i + 1]
    assert x.base is not y.base or x.offset + x.nbytes <= y.offset or y.offset + y.nbytes <= x.offset
  assert all(p.offset % ALIGN == 0 for p in placed)
  # a larger buffer never goes into a smaller one, and other devices keep apart
  c, d = Buffer("CPU", 4, dtypes.float32), Buffer("PYTHON", 4, dtypes.float32)
  e = Buffer("CPU", 8, dtypes.float32)
  r = plan_memory([It(c), It(d), It(e)], {c, d, e})
  assert set(r) == {c} and r[c].base is e

def test_the_order_runs_a_buffers_last_reader_first():
  """Six stored rows, each read by a sum (one output) and a max (the other): the sums come first in the graph's order,
  so each row lived until its max, after every sum (six rows at once). A ready kernel that is the last reader of a
  buffer now goes first: each row's max follows its sum, and the rows share one allocation."""
  from tinygrad import Tensor
  x = Tensor.rand(6, 4096).realize()
  rows = [(x[i] * 2).contiguous() for i in range(6)]
  items = Tensor.schedule(Tensor.stack(*[r.sum() for r in rows]), Tensor.stack(*[(r * r).max() for r in rows]))
  first: dict = {}
  last: dict = {}
  for i, it in enumerate(items):
    for b in it.bufs: first.setdefault(b.base, i); last[b.base] = i
  stored = [b for b in {it.bufs[0].base for it in items} if last[b] > first[b]]
  peak = max(sum(b.nbytes for b in stored if first[b] <= i <= last[b]) for i in range(len(items)))
  assert peak < 2 * 4096 * 4, peak

# ---- end to end on CPU ----

def test_run_elementwise_and_reduce():
  (a, b), (na, nb) = inputs((5, 7), (5, 7))
  (s, r), _ = run(a + b, (a * b).r(Ops.ADD, (1,)), data={a: na, b: nb})
  np.testing.assert_allclose(s, na + nb, rtol=1e-6)
  np.testing.assert_allclose(r, (na * nb).sum(1, keepdims=True), rtol=1e-5)

def test_run_transpose_contiguous():
  (x,), (nx,) = inputs((3, 7))
  (out,), items = run(x.permute((1, 0)).contiguous(), data={x: nx})
  assert len(items) == 1
  np.testing.assert_equal(out, nx.T)

def test_run_matmul_add_relu():
  (a, b, c), (na, nb, nc) = inputs((3, 4), (4, 5), (3, 5))
  (out,), items = run((matmul(a, b) + c).maximum(const(0.0, (3, 5))), data={a: na, b: nb, c: nc})
  assert len(items) == 1
  np.testing.assert_allclose(out, np.maximum(na @ nb + nc, 0), rtol=1e-5, atol=1e-6)

def test_run_cat_and_arange():
  (a, b, c), (na, nb, nc) = inputs((3,), (4,), (2,))
  ar = cumsum(const(1, (9,), dtypes.int32)) + const(-1, (9,), dtypes.int32)
  (cat, arv), items = run(a.pad(((0, 6),)) + b.pad(((3, 2),)) + c.pad(((7, 0),)), ar, data={a: na, b: nb, c: nc})
  assert len(items) == 2
  np.testing.assert_equal(cat, np.concatenate([na, nb, nc]))
  np.testing.assert_equal(arv, np.arange(9))

def test_run_softmax():
  (x,), (nx,) = inputs((4, 6))
  m = x.r(Ops.MAX, (1,)).expand((4, 6))
  e = x.alu(Ops.SUB, m).exp2()
  s = e.r(Ops.ADD, (1,)).expand((4, 6))
  (out,), items = run(e * s.reciprocal(), data={x: nx})
  assert len(items) <= 3
  ref = np.exp2(nx - nx.max(1, keepdims=True))
  np.testing.assert_allclose(out, ref / ref.sum(1, keepdims=True), rtol=1e-5)

def test_run_conv2d():
  N, Cin, H, W, Cout, kh, kw = 1, 2, 5, 5, 3, 3, 3
  (x, w), (nx, nw) = inputs((N, Cin, H, W), (Cout, Cin, kh, kw))
  OH, OW = H - kh + 1, W - kw + 1
  xw = pool_last(pool_last(x, kw).permute((0, 1, 3, 4, 2)), kh).permute((0, 1, 4, 2, 5, 3))
  full = (N, Cout, Cin, OH, OW, kh, kw)
  out_u = (xw.reshape((N, 1, Cin, OH, OW, kh, kw)).expand(full) * w.reshape((1, Cout, Cin, 1, 1, kh, kw)).expand(full))
  out_u = out_u.r(Ops.ADD, (2, 5, 6)).reshape((N, Cout, OH, OW))
  (out,), items = run(out_u, data={x: nx, w: nw})
  assert len(items) == 1
  ref = sum(np.einsum("nchw,oc->nohw", nx[:, :, i:i+OH, j:j+OW], nw[:, :, i, j]) for i in range(kh) for j in range(kw))
  np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)

def test_run_assign_updates_buffer_in_place():
  (x,), (nx,) = inputs((6,))
  load_inputs({x: nx})
  asg = UOp(Ops.ASSIGN, dtypes.float32, (x, x * const(3.0, (6,))))
  items, becomes, vv = create_schedule_with_vars(UOp.sink(asg))
  run_schedule(items, vv)
  assert becomes[asg] is x and items[0].bufs[0] is buffer_of(x)
  np.testing.assert_allclose(buffer_of(x).numpy(), nx * 3, rtol=1e-6)

def test_run_copy():
  (x,), (nx,) = inputs((5,))
  cp = UOp(Ops.COPY, dtypes.float32, ((x + x), UOp(Ops.DEVICE, arg="CPU")))
  (out,), items = run(cp, data={x: nx})
  assert len(items) == 2 and items[1].bufs[1] is items[0].bufs[0]
  np.testing.assert_allclose(out, nx * 2, rtol=1e-6)

def test_identical_kernels_compile_once():
  (a, b, c, d), _ = inputs((6,), (6,), (6,), (6,))
  (i1,) = create_schedule(UOp.sink(a + b))
  (i2,) = create_schedule(UOp.sink(c + d))
  assert i1.ast is i2.ast
  assert get_runner("CPU", i1.ast) is get_runner("CPU", i2.ast)

def test_run_error_names_the_item():
  (a,), _ = inputs((4,))
  (it,) = create_schedule(UOp.sink(a + a))
  bad = ScheduleItem(it.ast, it.bufs[:1], it.metadata)
  with pytest.raises(RuntimeError, match="run_schedule: item 0"): run_schedule([bad])

def test_debug2_prints_one_line_per_kernel(capsys):
  from tinygrad.helpers import Context
  (a,), (na,) = inputs((8,))
  load_inputs({a: na})
  items = create_schedule(UOp.sink((a + a).r(Ops.ADD, (0,)), a * a))
  with Context(DEBUG=2): run_schedule(items)
  lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("***")]
  assert len(lines) == len(items) == 2
  assert all("GFLOPS" in ln and "GB/s" in ln and "us" in ln for ln in lines)

def test_run_copy_across_devices():
  (x,), (nx,) = inputs((5,))
  cp = UOp(Ops.COPY, dtypes.float32, ((x * x), UOp(Ops.DEVICE, arg="PYTHON")))
  (out,), items = run(cp, data={x: nx})
  assert [it.bufs[0].device for it in items] == ["CPU", "PYTHON"]
  np.testing.assert_allclose(out, nx * nx, rtol=1e-6)

def test_run_reads_buffer_view():
  (x,), (nx,) = inputs((10,))
  view = UOp(Ops.BUFFER_VIEW, dtypes.float32, (bufuop(x),), arg=(4, 3))
  load_inputs({x: nx})
  out_u = view + view
  (out,), items = run(out_u, data={})
  assert items[0].bufs[1].base is buffer_of(bufuop(x))
  np.testing.assert_allclose(out, nx[3:7] * 2, rtol=1e-6)

# ---- the kernel graph cache ----

def test_the_same_graph_is_rangeified_once_per_flags_and_code_and_the_cache_is_bounded(monkeypatch):
  from tinygrad import Tensor
  from tinygrad.helpers import Context
  import tinygrad.engine.schedule as sched
  import tinygrad.schedule.rangeify as rangeify_mod
  calls: list[UOp] = []
  real = sched.kernel_graph
  monkeypatch.setattr(sched, "kernel_graph", lambda csink: calls.append(csink) or real(csink))
  monkeypatch.setattr(sched, "SCHEDULE_CACHE_SIZE", 2)
  sched.kernel_graph_cache.clear()
  a = np.arange(12, dtype=np.float32).reshape(3, 4)
  def step(x: Tensor) -> Tensor: return ((x + 1).contiguous() * 2).sum(1)
  # two eager steps of new tensors over new buffers: one graph once canonical, so one rangeify and the same kernels
  outs = [step(Tensor(a + k)) for k in range(2)]
  items = [Tensor.schedule(o) for o in outs]
  assert len(calls) == 1 and [si.ast for si in items[0]] == [si.ast for si in items[1]]
  for k, o in enumerate(outs): np.testing.assert_array_equal(o.numpy(), ((a + k + 1) * 2).sum(1))
  # the scheduler's code is part of the key: a global of its modules replaced (a planted bug, a patched constant)
  # schedules afresh, and put back, finds its graph again
  monkeypatch.setattr(rangeify_mod, "RECOMPUTE_CHAIN", rangeify_mod.RECOMPUTE_CHAIN + 1)
  step(Tensor(a)).realize()
  assert len(calls) == 2
  monkeypatch.setattr(rangeify_mod, "RECOMPUTE_CHAIN", rangeify_mod.RECOMPUTE_CHAIN - 1)
  step(Tensor(a)).realize()
  assert len(calls) == 2
  # so is a flag: another value schedules again (and is cached under it)
  with Context(DEBUG=1): step(Tensor(a)).realize()
  assert len(calls) == 3
  # at SCHEDULE_CACHE_SIZE graphs the least recently used goes
  step(Tensor(a)).realize()
  Tensor(a).exp().realize()
  assert len(calls) == 4 and len(sched.kernel_graph_cache) == 2
  step(Tensor(a)).realize()
  assert len(calls) == 4
  with Context(DEBUG=1): step(Tensor(a)).realize()
  assert len(calls) == 5
  # a graph of more than SCHEDULE_CACHE_NODES nodes is not kept (a training step's kernels hold tens of MB)
  monkeypatch.setattr(sched, "SCHEDULE_CACHE_NODES", limit := len(calls[-1].toposort()) - 1)
  step(Tensor(a)).realize()
  step(Tensor(a)).realize()
  assert len(calls) == 7 and len(calls[-1].toposort()) > limit

def test_the_live_tensor_sets_iterate_in_creation_order():
  # all_tensors and backward_roots are walked into schedules and new tensors (backward's targets, the optimizer's
  # pending writes): they iterate in the order the tensors were made, whatever their addresses, and drop collected ones
  import gc
  from tinygrad import Tensor
  from tinygrad.tensor import all_tensors, backward_roots, CreationOrderedTensors
  made = [Tensor.full((i % 3 + 1,), float(i)) for i in range(40)]
  kept = made[1::2]
  del made
  gc.collect()
  # the newer tensors reuse the freed slots, below the kept ones' addresses
  kept += [Tensor.full((i % 3 + 1,), float(i)) for i in range(20)]
  mine = [t for t in all_tensors if any(t is k for k in kept)]
  assert [id(t) for t in mine] == [id(t) for t in kept]
  del mine
  roots = CreationOrderedTensors()
  for t in reversed(kept): roots.add(t)
  assert [id(t) for t in roots] == [id(t) for t in kept] and len(roots) == len(kept) and kept[4] in roots
  roots.discard(kept[4])
  assert kept[4] not in roots and len(roots) == len(kept) - 1 and kept[4] in all_tensors
  gone = kept.pop()
  del gone
  gc.collect()
  assert len(roots) == len(kept) - 1 and all(t in all_tensors for t in kept)
  assert isinstance(backward_roots, CreationOrderedTensors) and "x" not in roots

def test_an_eager_training_loop_schedules_its_step_from_the_cache(monkeypatch):
  # an SGD step with momentum over a conv, a BatchNorm (its running statistics are writes the forward queues) and a
  # linear layer, eager: after the warm-up steps (the first makes the momentum buffers), every step is the same graph.
  # The step's outputs include tensors taken from all_tensors and backward_roots: in their addresses' order (as a WeakSet
  # iterates) rather than the tensors' own, the graph differs each step and misses the cache
  from tinygrad import Tensor, nn
  from tinygrad.nn.optim import SGD
  from tinygrad.nn.state import get_parameters
  import tinygrad.engine.schedule as sched
  calls: list[UOp] = []
  real = sched.kernel_graph
  monkeypatch.setattr(sched, "kernel_graph", lambda csink: calls.append(csink) or real(csink))
  sched.kernel_graph_cache.clear()
  Tensor.manual_seed(0)
  conv, bn, lin = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Linear(4 * 6 * 6, 5)
  opt = SGD(get_parameters([conv, bn, lin]), lr=0.01, momentum=0.9)
  x = Tensor.randn(2, 3, 8, 8).realize()
  losses, keep = [], []
  for k in range(6):
    with Tensor.train():
      opt.zero_grad()
      loss = lin(bn(conv(x)).relu().flatten(1)).square().mean()
      loss.backward()
      opt.step()
    losses.append(loss.item())
    if k == 2: warm = len(calls)
    # other tensors made and kept between steps move the next step's tensors to other addresses
    keep += [Tensor.ones(k + 1) for _ in range(7 * k + 3)]
  assert len(calls) == warm, [len(c.toposort()) for c in calls]
  assert losses[-1] < losses[0]
