"""What the scheduler shows the hooks does not depend on the process's history: it names the buffers of each graph
LUNIQUE(0..) in order of first appearance (and renumbers clone tags), so the same program prints the same tensor graph,
kernel graph and kernels in a fresh process and after many other tensors were made; the Tensor front end keeps buffers
of its own (distinct tensors never share one)."""
import os, pathlib, subprocess, sys
import numpy as np
import pytest
from tinygrad import Tensor
from tinygrad.uop import Ops, hooks
from tinygrad.uop.ops import UOp
from tinygrad.device import buffer_of
from tinygrad.engine.schedule import canonical_names

ROOT = pathlib.Path(__file__).resolve().parents[2]

# the program, and what captures its graphs; run here and, as text, in fresh processes
PROGRAM = """
import numpy as np
from tinygrad import Tensor
from tinygrad.uop import hooks
from tinygrad.uop.pyrender import pyrender

def program():
  a = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
  b = Tensor(np.ones((4, 5), np.float32))
  c = a.clone()
  return ((a @ b).relu() + 1).sum(1), (c * 2 + a).contiguous(), a[1:, ::2].contiguous()

def make_history(n):
  # other tensors, realized, cloned and assigned, so the process-wide counter has moved on
  ts = [Tensor(np.arange(4, dtype=np.float32).reshape(2, 2) + i) for i in range(n)]
  if not ts: return
  for t in ts[:20]: (t.clone() + 1).realize()
  ts[0].assign(ts[1] * 3).realize()

def capture():
  seen = []
  fns = {k: (lambda g, k=k: seen.append(f"# {k}\\n" + pyrender(g))) for k in ("tensor_graph", "kernel_graph", "kernel_ast")}
  for k, f in fns.items(): hooks.register(k, f)
  try:
    outs = program()
    outs[0].realize(*outs[1:])
  finally:
    for k, f in fns.items(): hooks.unregister(k, f)
  return "\\n".join(seen), [o.numpy() for o in outs]
"""

def run_fresh(history: int, hashseed: str) -> str:
  code = PROGRAM + f"\nmake_history({history})\nprint(capture()[0])\n"
  env = {**os.environ, "PYTHONHASHSEED": hashseed, "PYTHONPATH": str(ROOT)}
  res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
  assert res.returncode == 0, res.stderr[-3000:]
  return res.stdout

def test_same_program_prints_same_graphs_whatever_ran_before():
  fresh = run_fresh(0, "1")
  after_history = run_fresh(1000, "2")
  assert "Ops.LUNIQUE" in fresh and "Ops.KERNEL" in fresh
  assert fresh == after_history
  # and in this process, after whatever the suite ran before this test, plus a thousand more tensors
  ns: dict = {}
  exec(compile(PROGRAM, "<program>", "exec"), ns)
  ns["make_history"](1000)
  here, values = ns["capture"]()
  assert here + "\n" == fresh
  a = np.arange(12, dtype=np.float32).reshape(3, 4)
  np.testing.assert_allclose(values[0], np.maximum(a @ np.ones((4, 5), np.float32), 0).__add__(1).sum(1))
  np.testing.assert_equal(values[1], a * 3)
  np.testing.assert_equal(values[2], a[1:, ::2])

def test_canonical_names_are_first_appearance_order_and_one_to_one():
  a, b = Tensor(np.arange(4, dtype=np.float32)), Tensor(np.arange(4, dtype=np.float32) + 1)
  sink = UOp.sink(b.uop + a.uop + b.uop.reshape((2, 2)).reshape((4,)))
  names = canonical_names(sink)
  bufs = [u for u in sink.toposort() if u.op is Ops.BUFFER]
  assert [names[u].src[0].op for u in bufs] == [Ops.LUNIQUE] * 2
  assert [names[u].src[0].arg for u in bufs] == [0, 1]
  # the same graph renamed again is itself: the names depend on the graph alone
  csink = names[sink]
  assert canonical_names(csink)[csink] is csink

def test_scheduling_the_same_program_twice_gives_distinct_buffers_and_identical_kernels():
  x = Tensor(np.arange(6, dtype=np.float32))
  i1 = (x + 1).contiguous().schedule()
  i2 = (x + 1).contiguous().schedule()
  assert i1[0].ast is i2[0].ast
  assert i1[0].bufs[1] is i2[0].bufs[1] is buffer_of(x.uop)
  # NOTE: the output of each schedule is a buffer of its own, though both are BUFFER(LUNIQUE(1)) in the kernel graph
  assert i1[0].bufs[0] is not i2[0].bufs[0]
  y1, y2 = x * 2, x * 2 + 0
  y1.realize()
  y2.realize()
  assert buffer_of(y1.uop.src[0] if y1.uop.op is Ops.RESHAPE else y1.uop) is not buffer_of(
    y2.uop.src[0] if y2.uop.op is Ops.RESHAPE else y2.uop)

def test_clones_stay_distinct_after_renaming():
  x = Tensor(np.arange(4, dtype=np.float32))
  c1, c2 = x.clone(), x.clone()
  c1.realize(c2)
  c1.assign(c1 + 1).realize()
  np.testing.assert_equal(c1.numpy(), np.arange(4) + 1)
  np.testing.assert_equal(c2.numpy(), np.arange(4))

def test_kernel_graph_buffers_are_schedule_local():
  x = Tensor(np.arange(4, dtype=np.float32))
  graphs = []
  hooks.register("kernel_graph", graphs.append)
  try: (y := x + 1).realize()
  finally: hooks.unregister("kernel_graph", graphs.append)
  bufs = [u for u in graphs[0].toposort() if u.op is Ops.BUFFER]
  assert bufs and all(b.src[0].op is Ops.LUNIQUE for b in bufs)
  with pytest.raises(ValueError, match="LUNIQUE"): buffer_of(bufs[0])
  # the tensors themselves hold buffers of the process
  assert all(u.src[0].op is Ops.UNIQUE for u in y.uop.toposort() if u.op is Ops.BUFFER)
  np.testing.assert_equal(y.numpy(), np.arange(4) + 1)
