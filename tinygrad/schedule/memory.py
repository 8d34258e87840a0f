"""Memory planning: intermediate buffers whose lifetimes do not overlap share memory.

A buffer is *intermediate* when the schedule creates it and nobody outside holds it (not a sink output, not an input,
not an assign target). Its lifetime runs from the first to the last schedule item that uses it. The largest
intermediates are placed first: each goes into the smallest already placed buffer (of its device) with a free range
of bytes as long as its own, free meaning that no buffer placed there lives at the same time; where none has one, it
keeps its own memory and others may be placed in it. So a buffer takes the memory of a dead one of the same size (as
itself, or as a view when the dtypes differ) or, as a view at an offset, of a larger one: the blocks of a causal
attention, whose sizes grow along the schedule, share the largest block's. Only intermediates that keep their own
memory are allocated, each at its own size, so the allocator's cache reuses them across schedules. Outputs the user
holds are never reused."""
from __future__ import annotations
from typing import Any, Sequence

# NOTE: a view's offset into another buffer is a multiple of this many bytes, as aligned as an allocation's start
ALIGN = 256

def _aligned(n: int) -> int: return (n + ALIGN - 1) // ALIGN * ALIGN

def _free_offset(occupants: list[tuple[int, int, int, int]], nbytes: int, capacity: int, first: int,
                 last: int) -> int | None:
  """The lowest offset of `nbytes` bytes within `capacity` that no occupant (offset, end, first, last) living in
  [first, last] covers, or None (a buffer freed by item i may be reused from item i+1 on)."""
  off = 0
  for o, e in sorted((o, e) for o, e, f, lst in occupants if f <= last and first <= lst):
    if off + nbytes <= o: break
    off = max(off, _aligned(e))
  return off if off + nbytes <= capacity else None

def plan_memory(items: Sequence[Any], intermediates: set[Any]) -> dict[Any, Any]:
  """Items have `.bufs` (Buffers with device, size, dtype, nbytes, view()). Returns {buffer: the buffer, or a view of
  it, to use instead} for the `intermediates` that can live in an earlier-placed intermediate's memory; every other
  buffer keeps its own."""
  first: dict[Any, int] = {}
  last: dict[Any, int] = {}
  for i, it in enumerate(items):
    for b in it.bufs:
      if b not in intermediates or getattr(b, "_base", None) is not None or b.is_allocated() or b.nbytes == 0: continue
      first.setdefault(b, i)
      last[b] = i
  # per device, the buffers keeping their own memory, smallest last, each with what is placed in it
  homes: dict[str, list[tuple[Any, list[tuple[int, int, int, int]]]]] = {}
  ret: dict[Any, Any] = {}
  for b in sorted(first, key=lambda x: (-x.nbytes, first[x])):
    spot = None
    for home, occupants in reversed(homes.setdefault(b.device, [])):
      if (off := _free_offset(occupants, b.nbytes, home.nbytes, first[b], last[b])) is not None:
        spot = (home, occupants, off)
        break
    if spot is None:
      homes[b.device].append((b, [(0, b.nbytes, first[b], last[b])]))
      continue
    home, occupants, off = spot
    occupants.append((off, off + b.nbytes, first[b], last[b]))
    same = off == 0 and home.nbytes == b.nbytes and home.dtype is b.dtype
    ret[b] = home if same else home.view(b.size, b.dtype, off)
  return ret
