"""Choosers: where a generator's integers and choices come from. Every builder (fuzz/strategies.py, fuzz/gen/kernels.py,
fuzz/gen/tensor_programs.py, the ledger's instance builder) takes any `Chooser`:
  - `RandomChooser` wraps random.Random (fast, seeded: `python -m fuzz symbolic` and scripts),
  - `DrawChooser` wraps hypothesis' `draw` (shrinkable: pytest),
  - `BytesChooser` reads a byte string (campaigns and coverage-guided engines: a corpus entry is the bytes, a mutation
    of the bytes is a nearby input),
  - `FDPChooser` wraps atheris' FuzzedDataProvider.
"""
from __future__ import annotations
import random
from typing import Any, Callable, Protocol, Sequence, TypeVar
from hypothesis import strategies as st

T = TypeVar("T")

class Chooser(Protocol):
  def integer(self, lo: int, hi: int) -> int: ...
  def choice(self, seq: Sequence[T]) -> T: ...

class RandomChooser:
  def __init__(self, rng: random.Random | int): self.rng = rng if isinstance(rng, random.Random) else random.Random(rng)
  def integer(self, lo: int, hi: int) -> int: return self.rng.randint(lo, hi)
  def choice(self, seq: Sequence[T]) -> T: return seq[self.rng.randrange(len(seq))]

class DrawChooser:
  def __init__(self, draw: Callable[[st.SearchStrategy[Any]], Any]): self.draw = draw
  def integer(self, lo: int, hi: int) -> int: return int(self.draw(st.integers(lo, hi)))
  def choice(self, seq: Sequence[T]) -> T: return seq[int(self.draw(st.integers(0, len(seq) - 1)))]

class BytesChooser:
  """Choices read from a byte string, little by little: integer(lo, hi) takes the fewest bytes that cover hi - lo + 1
  values (none when lo == hi). Past the end it reads zeros, so every choice falls to its first option and any byte
  string (the empty one included) builds an input. `used` is how many bytes were read (a corpus keeps that prefix)."""
  def __init__(self, data: bytes):
    self.data, self.pos = bytes(data), 0
  @property
  def used(self) -> int: return min(self.pos, len(self.data))
  def integer(self, lo: int, hi: int) -> int:
    if hi <= lo: return lo
    n = hi - lo + 1
    k = (n.bit_length() + 7) // 8
    chunk = self.data[self.pos:self.pos + k]
    self.pos += k
    return lo + int.from_bytes(chunk.ljust(k, b"\0"), "little") % n
  def choice(self, seq: Sequence[T]) -> T: return seq[self.integer(0, len(seq) - 1)]

class FDPChooser:
  """An atheris FuzzedDataProvider as a Chooser (ConsumeIntInRange)."""
  def __init__(self, fdp: Any): self.fdp = fdp
  def integer(self, lo: int, hi: int) -> int: return lo if hi <= lo else int(self.fdp.ConsumeIntInRange(lo, hi))
  def choice(self, seq: Sequence[T]) -> T: return seq[self.integer(0, len(seq) - 1)]

__all__ = ["Chooser", "RandomChooser", "DrawChooser", "BytesChooser", "FDPChooser"]
