"""Memory planning: intermediate buffers whose lifetimes do not overlap share memory.

A buffer is *intermediate* when the schedule creates it and nobody outside holds it (not a sink output, not an input,
not an assign target). Its lifetime runs from the first to the last schedule item that uses it. Two intermediates with
disjoint lifetimes, on the same device and of the same size in bytes, share one allocation (a dtype-changing view of it
when the dtypes differ). Outputs the user holds are never reused."""
from __future__ import annotations
from typing import Any, Sequence

def plan_memory(items: Sequence[Any], intermediates: set[Any]) -> dict[Any, Any]:
  """Items have `.bufs` (Buffers with device, size, dtype, nbytes, view()). Returns {buffer: buffer to use instead} for
  the `intermediates` that can reuse an earlier intermediate's memory; every other buffer keeps its own."""
  first: dict[Any, int] = {}
  last: dict[Any, int] = {}
  for i, it in enumerate(items):
    for b in it.bufs:
      if b not in intermediates or getattr(b, "_base", None) is not None or b.is_allocated(): continue
      first.setdefault(b, i)
      last[b] = i
  # free lists keyed by (device, nbytes): (free from item index, base buffer)
  free: dict[tuple[str, int], list[tuple[int, Any]]] = {}
  ret: dict[Any, Any] = {}
  for b in sorted(first, key=lambda x: first[x]):
    key = (b.device, b.nbytes)
    pool = free.setdefault(key, [])
    # NOTE: a buffer freed by item i may be reused from item i+1 on (item i still reads or writes it)
    reuse = next((k for k, (t, _) in enumerate(pool) if t < first[b]), None)
    base = pool.pop(reuse)[1] if reuse is not None else b
    if base is not b: ret[b] = base if base.dtype is b.dtype else base.view(b.size, b.dtype, 0)
    pool.append((last[b], base))
  return ret
