"""Bugs planted into the compiler of a campaign's worker processes (`--setup tests.fuzz.planted:<name>`), to show that
a campaign finds, reduces and deduplicates them. Each patches one rule of this process only."""
from tinygrad.uop import Ops

def range_bound_off_by_one() -> None:
  """The bounds rule of RANGE claims one value too few (vmax = end - 2): comparisons and div/mod fold wrongly."""
  import tinygrad.uop.ops as ops
  orig = ops._min_max
  def patched(u):
    lo, hi = orig(u)
    return (lo, max(lo, hi - 1)) if u.op is Ops.RANGE else (lo, hi)
  ops._min_max = patched

def wild_store() -> None:
  """The C renderer writes through a null pointer at the start of every kernel: each run segfaults."""
  from tinygrad.renderer.cstyle import CRenderer
  orig = CRenderer.render
  def render(self, uops, name="kernel"):
    src = orig(self, uops, name=name)
    at = src.index("{", src.rfind(f" {name}(")) + 1
    return src[:at] + "\n  *(volatile int*)0 = 1;" + src[at:]
  CRenderer.render = render  # type: ignore[method-assign]

def roll_one_further() -> None:
  """Tensor.roll shifts one place further than asked (a front-end bug for the tensor level)."""
  from tinygrad import Tensor
  orig = Tensor.roll
  Tensor.roll = lambda self, shifts, dims=None: orig(self, shifts + 1 if isinstance(shifts, int) else shifts, dims)  # type: ignore
