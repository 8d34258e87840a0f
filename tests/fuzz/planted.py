"""Bugs planted into the compiler of a campaign's worker processes (`--setup tests.fuzz.planted:<name>`), to show that
a campaign finds, reduces and deduplicates them. Each patches one rule of this process only, for good, and pauses the
replay capture of this process for good (what the compiler makes now is no record of the code)."""
import functools
from tinygrad.uop import Ops
from replay import capture

def planted(fn):
  @functools.wraps(fn)
  def plant() -> None:
    capture.pause()
    fn()
  return plant

@planted
def range_bound_off_by_one() -> None:
  """The bounds rule of RANGE claims one value too few (vmax = end - 2): comparisons and div/mod fold wrongly."""
  import tinygrad.uop.ops as ops
  orig = ops._min_max
  def patched(u):
    lo, hi = orig(u)
    return (lo, max(lo, hi - 1)) if u.op is Ops.RANGE else (lo, hi)
  ops._min_max = patched

@planted
def wild_store() -> None:
  """The C renderer writes through a null pointer at the start of every kernel: each run segfaults."""
  from tinygrad.renderer.cstyle import CRenderer
  orig = CRenderer.render
  def render(self, uops, name="kernel"):
    src = orig(self, uops, name=name)
    at = src.index("{", src.rfind(f" {name}(")) + 1
    return src[:at] + "\n  *(volatile int*)0 = 1;" + src[at:]
  CRenderer.render = render  # type: ignore[method-assign]

@planted
def roll_one_further() -> None:
  """Tensor.roll shifts one place further than asked (a front-end bug for the tensor level)."""
  from tinygrad import Tensor
  orig = Tensor.roll
  Tensor.roll = lambda self, shifts, dims=None: orig(self, shifts + 1 if isinstance(shifts, int) else shifts, dims)  # type: ignore

@planted
def c_lt_as_le() -> None:
  """The C renderer prints CMPLT `a < b` as `a <= b` (a renderer change: C kernels' comparisons are off at equality;
  the CPU backend shows it, the symbolic level cannot)."""
  from tinygrad.renderer.cstyle import CRenderer
  CRenderer.code_for_op = {**CRenderer.code_for_op, Ops.CMPLT: lambda a, b, dt: f"({a}<={b})"}

@planted
def cat_pieces_reversed() -> None:
  """Tensor.cat joins its pieces in reverse order (a front-end change: only programs through the Tensor API show it)."""
  from tinygrad import Tensor
  orig = Tensor.cat
  def cat(self, *args, dim=0):
    ts = [self, *args]
    return orig(ts[-1], *ts[-2::-1], dim=dim)
  Tensor.cat = cat  # type: ignore[method-assign]

def _bool_buffer(uops) -> bool:
  from tinygrad.dtype import dtypes
  return any(u.op is Ops.DEFINE_GLOBAL and u.dtype.base is dtypes.bool for u in uops)

@planted
def wild_store_bool_kernels() -> None:
  """The C renderer writes through a null pointer at the start of kernels that have a bool buffer, and only those: in a
  batch (one shared object), one kernel segfaults and the others run."""
  from tinygrad.renderer.cstyle import CRenderer
  orig = CRenderer.render
  def render(self, uops, name="kernel"):
    src = orig(self, uops, name=name)
    if not _bool_buffer(uops): return src
    at = src.index("{", src.rfind(f" {name}(")) + 1
    return src[:at] + "\n  *(volatile int*)0 = 1;" + src[at:]
  CRenderer.render = render  # type: ignore[method-assign]

@planted
def wild_store_bool_kernels_llvm() -> None:
  """The LLVM renderer stores through address 8 at the entry of kernels that have a bool buffer (one MCJIT engine holds
  a batch: one kernel of it segfaults)."""
  from tinygrad.renderer.llvmir import LLVMRenderer
  orig = LLVMRenderer.render
  def render(self, uops, name="kernel"):
    src = orig(self, uops, name=name)
    if not _bool_buffer(uops): return src
    return src.replace("\nentry:\n", "\nentry:\n  store volatile i32 1, ptr inttoptr (i64 8 to ptr), align 4\n", 1)
  LLVMRenderer.render = render  # type: ignore[method-assign]

def _buffer_dtypes(ast) -> set:
  return {u.dtype.base for u in ast.toposort() if u.op is Ops.DEFINE_GLOBAL}

@planted
def killed_and_hogging_workers() -> None:
  """Three ways a worker is lost, at the start of a kernel's checks (KernelLevel.prepare), each remembered by files in
  FUZZ_TEST_MARKER_DIR, a kill from outside (SIGKILL) or a blow-up:
  the first kernel with a bool buffer is killed whenever it is checked, a kill that recurs; the first with a 64-bit
  buffer (and no bool one) takes 2 GB of memory whenever it is checked, written so it is resident, and holds it (a
  blow-up past a small memory cap); the first with neither is killed once (the first time it is checked)."""
  import hashlib, os, signal, time
  from tinygrad.dtype import dtypes
  from tinygrad.uop.pyrender import pyrender
  from fuzz.campaign.levels import KernelLevel
  orig, d = KernelLevel.prepare, os.environ["FUZZ_TEST_MARKER_DIR"]
  def chosen(name: str, key: str) -> bool:
    """Whether this kernel is the one picked for `name` (the first that asked)."""
    path = os.path.join(d, name)
    if not os.path.exists(path):
      with open(path, "w") as f: f.write(key)
    with open(path) as f: return f.read() == key
  def prepare(self, case):
    dts, key = _buffer_dtypes(case.ast), hashlib.sha1(pyrender(case.ast).encode()).hexdigest()
    wide = dts & {dtypes.float64, dtypes.int64, dtypes.uint64}
    if not wide and dtypes.bool not in dts and not os.path.exists(os.path.join(d, "killed-once")):
      open(os.path.join(d, "killed-once"), "w").close()
      os.kill(os.getpid(), signal.SIGKILL)
    if dtypes.bool in dts and chosen("killed-always", key): os.kill(os.getpid(), signal.SIGKILL)
    if wide and dtypes.bool not in dts and chosen("hog", key):
      hog = b"x" * (2 << 30)
      time.sleep(30)
      del hog
    return orig(self, case)
  KernelLevel.prepare = prepare  # type: ignore[method-assign]

@planted
def no_grid_merge() -> None:
  """The lowering gives each grid axis a launch dimension of its own and never merges or splits them (as before issue
  31): a kernel with more local axes than workgroup dimensions (or an axis over its dimension's limit) fails to compile,
  while the opts still accept what a merge would fit."""
  import tinygrad.codegen.lowerer as lowerer
  from tinygrad.codegen.grid import identity_plan
  def plan_for(axes, limits):
    if limits is None: return None
    sizes = [int(r.src[0].vmax) for r in axes]
    if (plan := identity_plan(sizes, limits)) is None:
      raise ValueError(f"grid lowering: axes of sizes {sizes} do not each fit a launch dimension of {limits}; merge them")
    return plan
  lowerer.plan_for = plan_for

@planted
def issue31() -> None:
  """Issue 31 as it was: no merge in the lowering (no_grid_merge), and GPU heuristics that give every output axis a
  LOCAL while the thread budget lasts, without counting the workgroup dimension a group reduce holds."""
  from tinygrad.uop import AxisType
  import tinygrad.codegen.heuristic as heuristic
  no_grid_merge()
  heuristic._Builder.try_local = heuristic._Builder.try_opt  # type: ignore[method-assign]
  heuristic.LOCAL_TYPES = (AxisType.LOCAL, AxisType.WARP)

def grid_lowering_raises() -> None:
  """Lowering a kernel's ranges to the grid raises (a codegen crash in one named pass, for the viewer's failing-pass
  link: tests/viz/test_harness_links.py)."""
  from tinygrad.uop.ops import UPat
  from tinygrad.codegen import lowerer
  def boom(r):
    raise RuntimeError("planted: grid lowering crashed")
  lowerer.pm_grid.__init__([(UPat(Ops.RANGE, name="r"), boom)] + lowerer.pm_grid.patterns)

@planted
def allreduce_drops_a_shard() -> None:
  """The multi-device pass's allreduce (and reduce-scatter) leaves the last device's partial out of the sum: a reduce
  over a split axis is wrong on every device (only sharded tensor programs show it)."""
  import tinygrad.schedule.multi as multi
  orig = multi._reduce_onto
  multi._reduce_onto = lambda shards, op, dev, box: orig(shards[:-1] or shards, op, dev, box)
