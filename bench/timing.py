"""Timing shared by the benchmarks (imported as `timing`: a bench runs as `python bench/NAME.py`, with bench/ on
its path)."""
import time
from typing import Any, Callable

def best_of(fn: Callable[[], Any], repeat: int) -> float:
  """The fastest of `repeat` calls of fn, in seconds of wall time."""
  best = float("inf")
  for _ in range(repeat):
    st = time.perf_counter()
    fn()
    best = min(best, time.perf_counter() - st)
  return best
