"""Running a schedule: per item a runner (compiled once per (device, AST)), buffers allocated, the kernel launched.

DEBUG>=2 prints one line per kernel: its number, name, time, GFLOPS and GB/s (timing waits for each kernel), and once
per compiled kernel the compiler's report (registers, spills, shared memory) where the compiler has one.

COMPILE_ONLY=1: every kernel is scheduled, lowered and compiled with the real toolchain, and nothing runs: the buffers
the kernels would write are marked not computed (reading one raises NotComputedError). Copies between devices still
move data that exists; a copy of a not-computed buffer is not computed either.

Every launch goes through `launch`, which counts it in GlobalCounters and, while a TinyJit captures
(`capture_launches`), records it as an ExecItem."""
from __future__ import annotations
import time, contextlib
from dataclasses import dataclass
from typing import Any, Iterator
from tinygrad.uop import Ops, hooks
from tinygrad.uop.ops import UOp
from tinygrad.uop.sint import sint, infer
from tinygrad.device import Device, Buffer
from tinygrad.helpers import DEBUG, GlobalCounters, COMPILE_ONLY, BEAM, codegen_flags
from tinygrad.codegen import get_program
from tinygrad.codegen.search import check_beam_device

class Runner:
  """Something that runs one schedule item: `runner(bufs, var_vals, wait) -> seconds | None`."""
  display_name: str = "runner"
  ops: sint = 0
  mem: sint = 0
  def __call__(self, bufs: list[Buffer], var_vals: dict[str, int], wait: bool = False) -> float | None:
    raise NotImplementedError
  def work(self, var_vals: dict[str, int]) -> tuple[int, int]:
    """(ALU ops, bytes) of one launch with these variable values."""
    return infer(self.ops, var_vals), infer(self.mem, var_vals)

class CompiledRunner(Runner):
  """A kernel AST compiled for a device: ProgramSpec from codegen, binary from the cached compiler, runtime program."""
  def __init__(self, device: str, ast: UOp):
    # NOTE: before anything compiles: BEAM with no device to time on is an error up front (codegen/search.py)
    if BEAM >= 1: check_beam_device(device, int(BEAM.value))
    dev = Device[device]
    self.device, self.ast = device, ast
    self.p = get_program(ast, dev.renderer)
    self.display_name = self.p.name
    # NOTE: sizes (sint) where a loop or the grid is symbolic; work(var_vals) gives a launch's numbers
    self.ops, self.mem = self.p.estimates.ops, self.p.estimates.mem
    self.lib = dev.compiler.compile_cached(self.p.src, self.p.renderer)
    self.report = dev.compiler.describe(self.lib)
    # NOTE: under COMPILE_ONLY the device's runtime still takes the binary (a backend may check it there: AMD reads its
    # code object), but opened without a driver it loads nothing, and run_schedule never calls it
    self.prg: Any = dev.runtime(self.p.name, self.lib)
    # NOTE: a program without variables launches with the same sizes and does the same work every time: both are
    # worked out once here, not on every launch (a TinyJit replay of an LSTM's step makes 221 launches)
    self._fixed: tuple[tuple[int, ...], tuple[int, ...], tuple[int, int]] | None = None
    if not self.p.vars:
      gs, ls = self.p.launch_dims({})
      self._fixed = (tuple(gs), tuple(ls) if ls is not None else (1, 1, 1), self.p.estimates.at({}))
    if DEBUG >= 2 and self.report and not COMPILE_ONLY:
      print(f"compiled {self.p.name}: {self.report}; grid {self.p.global_size} block {self.p.local_size or [1, 1, 1]}")

  def __call__(self, bufs: list[Buffer], var_vals: dict[str, int], wait: bool = False) -> float | None:
    if COMPILE_ONLY: raise RuntimeError(f"kernel {self.p.name}: COMPILE_ONLY=1 compiles kernels and never runs them")
    if (fixed := self._fixed) is not None:
      return self.prg(*[bufs[i]._buf for i in self.p.globals], global_size=fixed[0], local_size=fixed[1], wait=wait)
    gs, ls = self.p.launch_dims(var_vals)
    missing = [n for n in self.p.var_names if n not in var_vals]
    if missing: raise KeyError(f"kernel {self.p.name}: no value bound for variable(s) {missing}")
    vals = tuple(int(var_vals[n]) for n in self.p.var_names)
    args = [bufs[i]._buf for i in self.p.globals]
    lsz = tuple(ls) if ls is not None else (1, 1, 1)
    et: float | None = self.prg(*args, global_size=tuple(gs), local_size=lsz, vals=vals, wait=wait)
    return et
  def work(self, var_vals: dict[str, int]) -> tuple[int, int]:
    """The program's estimates at the launch's values: a loop over a symbolic size counts its bound length."""
    return self._fixed[2] if self._fixed is not None else self.p.estimates.at(var_vals)

class CopyRunner(Runner):
  """A copy between devices (a transfer kernel, `is_transfer`): bufs[0] <- bufs[1] through host memory."""
  def __init__(self, nbytes: int, src: str = "", dst: str = ""):
    self.display_name, self.mem = f"copy {nbytes:8d} bytes {src}->{dst}", nbytes
  def __call__(self, bufs: list[Buffer], var_vals: dict[str, int], wait: bool = False) -> float | None:
    dest, src = bufs[0], bufs[1]
    st = time.perf_counter()
    dest.copyin(src.as_buffer())
    return time.perf_counter() - st if wait else None

def is_transfer(ast: UOp) -> bool:
  """A copy between devices: SINK(COPY(DEFINE_GLOBAL 0, DEFINE_GLOBAL 1), arg=(src device, dst device)), no codegen."""
  return ast.op is Ops.SINK and len(ast.src) == 1 and ast.src[0].op is Ops.COPY

def _is_cross_device_copy(ast: UOp, bufs: list[Buffer]) -> bool:
  if is_transfer(ast):
    if len(bufs) != 2 or bufs[0].nbytes != bufs[1].nbytes:
      raise RuntimeError(f"a transfer copies one buffer into another of its size, got {bufs}")
    return True
  if len({b.device for b in bufs}) > 1:
    raise RuntimeError(f"a kernel cannot span devices: buffers on {[b.device for b in bufs]} (only a transfer can)")
  return False

def _copy_runner(bufs: list[Buffer]) -> CopyRunner: return CopyRunner(bufs[0].nbytes, bufs[1].device, bufs[0].device)

_runner_cache: dict[tuple[str, UOp, tuple[tuple[str, Any], ...]], Runner] = {}

def get_runner(device: str, ast: UOp) -> Runner:
  """The runner of `ast` on `device`, built once per (device, ast, codegen flags): identical kernels compile once, and
  a kernel run under other codegen flags (`Context(NOOPT=1)`, DEVECTORIZE, ...) is compiled for them."""
  key = (Device.canonicalize(device), ast, codegen_flags())
  if (r := _runner_cache.get(key)) is None: r = _runner_cache[key] = CompiledRunner(key[0], ast)
  return r

# ---- launches: counted, and recorded while a TinyJit captures ----

@dataclass(frozen=True)
class ExecItem:
  """One launch as it ran: the runner, its buffers (in the runner's order) and the variable values."""
  runner: Runner
  bufs: tuple[Buffer, ...]
  var_vals: dict[str, int]

# NOTE: a stack, so a TinyJit called inside another one's capture records its launches into both
_captures: list[list[ExecItem]] = []

@contextlib.contextmanager
def capture_launches() -> Iterator[list[ExecItem]]:
  """Record every launch made inside the block (by run_schedule or a TinyJit replay) into the yielded list."""
  cap: list[ExecItem] = []
  _captures.append(cap)
  try: yield cap
  finally: _captures.pop()

def is_capturing() -> bool: return bool(_captures)

def launch(runner: Runner, bufs: list[Buffer], var_vals: dict[str, int], wait: bool = False) -> float | None:
  """Run one launch, count it in GlobalCounters and record it into every active capture."""
  # NOTE: a profiler (the `launched` checkpoint) needs the kernel's own time, so the launch waits for it
  st = time.perf_counter() if hooks.launched else 0.0
  et = runner(bufs, var_vals, wait or bool(hooks.launched))
  ops, mem = runner.work(var_vals)
  GlobalCounters.kernel_count += isinstance(runner, CompiledRunner)
  GlobalCounters.global_ops += ops
  GlobalCounters.global_mem += mem
  if isinstance(runner, CopyRunner):
    GlobalCounters.copy_count += 1
    GlobalCounters.copy_bytes += mem
  elif bufs:
    dev = bufs[0].device
    GlobalCounters.device_kernels[dev] = GlobalCounters.device_kernels.get(dev, 0) + 1
    GlobalCounters.device_ops[dev] = GlobalCounters.device_ops.get(dev, 0) + ops
    GlobalCounters.device_mem[dev] = GlobalCounters.device_mem.get(dev, 0) + mem
  if et is not None: GlobalCounters.time_sum_s += et
  if hooks.launched:
    for fn in hooks.launched: fn(runner, bufs, st, et)
  if _captures:
    item = ExecItem(runner, tuple(bufs), dict(var_vals))
    for cap in _captures: cap.append(item)
  return et

def _fmt_line(i: int, r: Runner, bufs: list[Buffer], et: float | None, var_vals: dict[str, int]) -> str:
  if et is None: return f"*** {bufs[0].device:7s} {i:4d} {r.display_name:30s}"
  ops, mem = r.work(var_vals)
  gflops, gbs = ops / max(et, 1e-9) * 1e-9, mem / max(et, 1e-9) * 1e-9
  return (f"*** {bufs[0].device:7s} {i:4d} {r.display_name:30s} tm {et*1e6:9.2f}us  {gflops:9.2f} GFLOPS "
          f"{gbs:8.2f} GB/s")

def _compile_only_item(i: int, si: Any, bufs: list[Buffer], var_vals: dict[str, int]) -> Runner:
  """COMPILE_ONLY: compile the item's kernel (or do its copy where the source has values) and run nothing."""
  if _is_cross_device_copy(si.ast, bufs):
    runner: Runner = _copy_runner(bufs)
    if (why := bufs[1].not_computed) is not None: bufs[0].mark_not_computed(why)
    else: runner(bufs, var_vals)
    return runner
  runner = get_runner(bufs[0].device, si.ast)
  assert isinstance(runner, CompiledRunner)
  for j in runner.p.outs: bufs[j].mark_not_computed(f"COMPILE_ONLY=1 compiled kernel {runner.p.name} that writes it")
  if DEBUG >= 2:
    gs, ls = runner.p.launch_dims(var_vals)
    print(f"*** {bufs[0].device:7s} {i:4d} {runner.display_name:30s} compiled {runner.report or '(no report)'}; "
          f"grid {gs} block {ls or [1, 1, 1]}")
  return runner

def run_schedule(schedule: list[Any], var_vals: dict[str, int] | None = None) -> None:
  """Run every ScheduleItem in order, allocating its buffers first. An error names the kernel that raised it.
  Under COMPILE_ONLY every kernel is compiled and none runs (see the module docstring)."""
  vv = dict(var_vals or {})
  for i, si in enumerate(schedule):
    bufs = [b.ensure_allocated() for b in si.bufs]
    runner: Runner | None = None
    try:
      if COMPILE_ONLY:
        runner = _compile_only_item(i, si, bufs, vv)
        continue
      runner = _copy_runner(bufs) if _is_cross_device_copy(si.ast, bufs) else get_runner(bufs[0].device, si.ast)
      et = launch(runner, bufs, vv, wait=DEBUG >= 2)
    except Exception as e:
      name = runner.display_name if runner is not None else "kernel (while compiling)"
      md = ", ".join(str(m) for m in si.metadata)
      where = f"{name}; {md}" if md else name
      raise RuntimeError(f"run_schedule: item {i} ({where}) failed: {type(e).__name__}: {e}") from e
    if DEBUG >= 2: print(_fmt_line(i, runner, bufs, et, vv))

__all__ = ["Runner", "CompiledRunner", "CopyRunner", "is_transfer", "ExecItem", "get_runner", "launch",
           "capture_launches", "is_capturing", "run_schedule"]
