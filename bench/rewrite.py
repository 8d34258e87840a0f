"""Benchmark: graph_rewrite throughput of `symbolic`, and the cost of the hook checkpoint on UOp construction.

Prints ratios against references measured in the same run (absolute times on shared machines mean little):
  - symbolic rewrite vs. a rewrite with no rules over the same graph (the traversal floor), in nodes/second
  - UOp construction with a no-op callback on hooks.uop_created vs. with nothing registered
  - the empty-checkpoint branch itself vs. a construction
Usage: python bench/rewrite.py [--nodes 50000] [--construct 200000]
"""
from __future__ import annotations
import argparse, gc, random, time
from typing import Callable
from tinygrad.uop import Ops, hooks
from tinygrad.uop.ops import UOp, PatternMatcher, graph_rewrite
from tinygrad.uop.symbolic import symbolic
from tinygrad.dtype import dtypes
from fuzz.strategies import RandomChooser, build_index_expression, IndexExprConfig

def best_of(fn: Callable[[], object], n: int = 3) -> float:
  times = []
  for _ in range(n):
    gc.collect()
    st = time.perf_counter()
    fn()
    times.append(time.perf_counter() - st)
  return min(times)

def big_symbolic_graph(target_nodes: int, seed: int = 0) -> UOp:
  rng, exprs, seen = random.Random(seed), [], set[UOp]()
  cfg = IndexExprConfig(max_depth=6)
  while len(seen) < target_nodes:
    e, _ = build_index_expression(RandomChooser(rng.getrandbits(64)), cfg)
    exprs.append(e)
    seen.update(e.toposort())
  return UOp.sink(*exprs)

def bench_rewrite(target_nodes: int) -> None:
  sink = big_symbolic_graph(target_nodes)
  n = len(sink.toposort())
  empty = PatternMatcher([])
  graph_rewrite(sink, symbolic, name="bench warmup")  # NOTE: fills the bounds caches once, as a real pipeline would
  t_sym = best_of(lambda: graph_rewrite(sink, symbolic, name="bench symbolic"))
  t_empty = best_of(lambda: graph_rewrite(sink, empty, name="bench no rules"))
  # NOTE: a SINK keeps its walk (UOp.toposort), so the walk is timed from a GROUP over the same sources
  walk = UOp(Ops.GROUP, dtypes.void, sink.src)
  t_topo = best_of(lambda: walk.toposort())
  print(f"graph of {n} nodes")
  print(f"  symbolic rewrite:   {n / t_sym:12,.0f} nodes/s")
  print(f"  no-rule rewrite:    {n / t_empty:12,.0f} nodes/s   (symbolic costs {t_sym / t_empty:.2f}x the traversal)")
  print(f"  toposort:           {n / t_topo:12,.0f} nodes/s   (no-rule rewrite: {t_empty / t_topo:.2f}x a toposort)")

def bench_hooks(n: int) -> None:
  saved = list(hooks.uop_created)
  hooks.uop_created.clear()
  base = [0]
  def construct() -> None:
    # distinct args, so every call really creates (and hash-conses) a new node
    b = base[0] = base[0] + n
    keep = [UOp(Ops.CONST, dtypes.index, arg=i) for i in range(b, b + n)]
    del keep
  def noop(u: UOp) -> None: pass
  def branch_only() -> None:
    for _ in range(n):
      if hooks.uop_created: pass
  def empty_loop() -> None:
    for _ in range(n): pass
  try:
    construct()  # warm up the cache dict and the allocator
    t_plain, t_noop = float("inf"), float("inf")
    # NOTE: interleaved, so drift in machine load hits both sides alike
    for _ in range(3):
      t_plain = min(t_plain, best_of(construct, 1))
      hooks.register("uop_created", noop)
      t_noop = min(t_noop, best_of(construct, 1))
      hooks.unregister("uop_created", noop)
    t_branch = max(best_of(branch_only) - best_of(empty_loop), 0.0)
  finally:
    hooks.uop_created[:] = saved
  print(f"UOp construction, {n} new nodes")
  print(f"  nothing registered: {n / t_plain:12,.0f} nodes/s")
  print(f"  no-op callback:     {n / t_noop:12,.0f} nodes/s   ({t_noop / t_plain:.3f}x the plain construction)")
  print(f"  empty checkpoint branch alone: {t_branch / t_plain * 100:.2f}% of a construction")

if __name__ == "__main__":
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--nodes", type=int, default=50_000)
  ap.add_argument("--construct", type=int, default=200_000)
  a = ap.parse_args()
  bench_rewrite(a.nodes)
  bench_hooks(a.construct)
