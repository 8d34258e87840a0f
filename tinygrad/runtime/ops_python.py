"""PYTHON backend: a reference interpreter of linear programs (docs/ir.md section 3) that emulates a GPU launch.

The renderer turns the linear program into text, one JSON array per uop: `[line, "OP", dtype, [source lines], arg]`. The
compiler checks that text parses and keeps it as bytes; the runtime parses it once and interprets it on every launch.

Launch model: a grid of workgroups (`gidx0..2` in `global_size`) of threads (`lidx0..2` in `local_size`); `core_id`
reads as `gidx0`. The threads of a batch of whole workgroups run in lockstep: every value is a numpy array over those
threads (shape (T,) for a scalar, (T, n) for a vector) and control flow (IF, RANGE) masks the active threads.
DEFINE_LOCAL memory is per workgroup and DEFINE_REG memory per thread, both fresh (uninitialised) at every launch.
Every LOAD/STORE is checked: out of bounds, a read of uninitialised local or register memory, two threads storing
different values to one global or local address in the same step (a write-write race), and a BARRIER reached by some
but not all threads of a workgroup raise `EmulatedKernelError`, naming the kernel, the line, the buffer, the index and
the thread ids. Races between different steps are not detected.

Arithmetic: every ALU op, CAST and BITCAST computes what tinygrad/uop/semantics.py defines (the table constant folding
uses too; docs/ir.md "Semantics" states it): integers wrap, IDIV/MOD truncate (x/0 = 0, x%0 = x), shift amounts are
taken modulo the width, float -> int casts saturate, bfloat16 and fp8 values are held as float32 and rounded to their
format after every op and cast. WMMA computes D = A @ B + C for each warp (wave) of the tensor core's `threads`
consecutive threads, reading and writing each lane's registers with the instruction's layout from the tensor-core table
(tinygrad/renderer/tensor_cores.py), looked up by the instruction's name.

EMULATE picks what the PYTHON device stands in for: a generic GPU, or NV / AMD (per arch), whose own renderer supplies
every attribute codegen reads (PythonRenderer), so the interpreter runs the very linear program that target's
renderer would render.
"""
from __future__ import annotations
import functools, json, time
from dataclasses import dataclass
from typing import Any, Callable, Sequence
import numpy as np
from tinygrad.uop import Ops, AxisType
from tinygrad.uop.ops import UOp
from tinygrad.uop import semantics
from tinygrad.dtype import DType, PtrDType, AddrSpace, dtypes, to_np_dtype, DTYPES_DICT, INVERSE_DTYPES_DICT
from tinygrad.dtype import to_storage_np, from_storage_np
from tinygrad.helpers import EMULATE, prod
from tinygrad.renderer.archs import emulated
from tinygrad.device import Compiled, Compiler, MallocAllocator, CompileError
from tinygrad.renderer import Renderer, Vectors, TensorCore
from tinygrad.renderer.tensor_cores import Layout, tensor_core

class EmulatedKernelError(RuntimeError):
  """A program did something a GPU would not survive: out-of-bounds access, uninitialised read, divergent barrier."""

# ---- targets: what the emulated GPU is ----

@dataclass(frozen=True)
class Target:
  name: str
  global_max: tuple[int, ...]
  local_max: tuple[int, ...]
  max_threads: int   # threads per workgroup
  shared_max: int    # bytes of DEFINE_LOCAL per workgroup
  base: Renderer | None = None  # the emulated target's own renderer (None: a generic GPU)

GENERIC = Target("PYTHON", (2**31 - 1, 65535, 65535), (1024, 1024, 64), 1024, 32768)
_targets: dict[tuple[str, str], Target] = {}

def base_renderer(device: str, arch: str) -> Renderer:
  """The renderer the emulated device would compile with: the PYTHON device runs exactly the linear program it gets."""
  # NOTE: built here, not by the target registry (runtime/targets.py), which imports this module for PythonRenderer
  if device == "NV":
    from tinygrad.renderer.cuda import CUDARenderer
    return CUDARenderer(arch)
  from tinygrad.renderer.llvmir import AMDLLVMRenderer
  return AMDLLVMRenderer(arch)

def get_target(name: str | None = None) -> Target:
  """The target an EMULATE value (None: the flag's) stands for (the registry's EMULATED, renderer/archs.py)."""
  key = (EMULATE.value if name is None else name).upper()
  if key == "": return GENERIC
  device, arch = emulated(key)
  if (device, arch) not in _targets:
    base = base_renderer(device, arch)
    assert base.global_max is not None and base.local_max is not None
    _targets[(device, arch)] = Target(key, base.global_max, base.local_max, base.local_max_total, base.shared_max, base)
  return _targets[(device, arch)]

# ---- program text: render and parse ----

def _enc_dtype(dt: DType) -> Any:
  if isinstance(dt, PtrDType): return ["ptr", _enc_dtype(dt.base), dt.size, dt.addrspace.name, dt.v]
  name = INVERSE_DTYPES_DICT.get(dt.scalar().name, dt.scalar().name)
  return name if dt.count == 1 else [name, dt.count]

def _dec_dtype(x: Any) -> DType:
  if isinstance(x, str): return DTYPES_DICT[x]
  if x[0] == "ptr": return _dec_dtype(x[1]).ptr(x[2], AddrSpace[x[3]]).vec(x[4])
  return DTYPES_DICT[x[0]].vec(x[1])

def _enc_arg(a: Any, where: str) -> Any:
  if isinstance(a, np.generic): a = a.item()
  if a is None or isinstance(a, (bool, int, float, str)): return a
  if isinstance(a, tuple): return [_enc_arg(x, where) for x in a]
  if isinstance(a, AxisType): return {"AxisType": a.name}
  if isinstance(a, Ops): return {"Ops": a.name}
  raise ValueError(f"PYTHON render: {where} has an arg of type {type(a).__name__} ({a!r}) the program text cannot hold")

def _dec_arg(a: Any) -> Any:
  if isinstance(a, list): return tuple(_dec_arg(x) for x in a)
  if isinstance(a, dict): return {"AxisType": AxisType, "Ops": Ops}[next(iter(a))][next(iter(a.values()))]
  return a

def render_program(uops: Sequence[UOp]) -> str:
  """The program as text: one JSON array `[line, "OP", dtype, [source lines], arg]` per uop."""
  pos: dict[UOp, int] = {}
  lines = []
  for i, u in enumerate(uops):
    where = f"line {i} ({u.op.name})"
    missing = [s.op.name for s in u.src if s not in pos]
    if missing: raise ValueError(f"PYTHON render: {where} uses sources {missing} that are not earlier lines")
    lines.append(json.dumps([i, u.op.name, _enc_dtype(u.dtype), [pos[s] for s in u.src], _enc_arg(u.arg, where)]))
    pos[u] = i
  return "\n".join(lines)

@dataclass(frozen=True)
class Line:
  op: Ops
  dtype: DType
  src: tuple[int, ...]
  arg: Any

def parse_program(text: str) -> list[Line]:
  """The inverse of `render_program`; every source must be an earlier line."""
  ret: list[Line] = []
  for n, raw in enumerate(text.splitlines()):
    if not raw.strip(): continue
    try:
      i, op, dt, src, arg = json.loads(raw)
      ln = Line(Ops[op], _dec_dtype(dt), tuple(src), _dec_arg(arg))
    except (ValueError, KeyError, TypeError, IndexError) as e:
      raise ValueError(f"PYTHON program text, line {n}: cannot parse {raw[:80]!r}: {type(e).__name__}: {e}") from e
    if i != len(ret) or any(not 0 <= s < i for s in src):
      raise ValueError(f"PYTHON program text, line {n}: numbered {i} with sources {src}; sources must be earlier lines")
    ret.append(ln)
  return ret

# ---- values and ALU: tinygrad/uop/semantics.py defines every op; this is how the interpreter holds values ----

def np_value_dtype(dt: DType) -> Any:
  """numpy dtype of a value of `dt` in the interpreter: bfloat16 and fp8 as float32 holding representable values."""
  return np.int8 if dt.scalar() is dtypes.void else semantics.holder(dt)

def encode(dt: DType, v: np.ndarray) -> np.ndarray:
  """Interpreter value -> storage bits (fp8 as uint8, bfloat16 as uint16, others their numpy type)."""
  return to_storage_np(v, dt)

def decode(dt: DType, raw: np.ndarray) -> np.ndarray:
  """Storage bits -> interpreter value."""
  return from_storage_np(raw, dt)

# ---- memory ----

class Memory:
  """One buffer as the interpreter sees it. Global: the storage array (shared by every thread). Local: (groups, size)
  values, one row per workgroup. Register: (threads, size) values, one row per thread. Local/register track writes."""
  __slots__ = ("space", "num", "dtype", "arr", "written", "size")
  def __init__(self, space: AddrSpace, num: int, dtype: DType, arr: np.ndarray):
    self.space, self.num, self.dtype, self.arr = space, num, dtype, arr
    self.size = arr.shape[-1]
    self.written = None if space is AddrSpace.GLOBAL else np.zeros(arr.shape, np.bool_)
  def describe(self) -> str:
    kind = {AddrSpace.GLOBAL: "global buffer", AddrSpace.LOCAL: "local buffer", AddrSpace.REG: "register"}[self.space]
    return f"{kind} {self.num}"

# ---- the interpreter ----

class _Batch:
  """Runs a program for a batch of whole workgroups, all threads in lockstep."""
  def __init__(self, prg: PythonProgram, globals_: dict[int, Memory], var_vals: dict[int, int], gsize: tuple[int, ...],
               lsize: tuple[int, ...], g0: int, ngroups: int):
    self.prg, self.globals, self.var_vals, self.gsize, self.lsize, self.g0 = prg, globals_, var_vals, gsize, lsize, g0
    self.L = prod(lsize)
    self.G = ngroups
    self.T = self.L * ngroups
    t = np.arange(self.T, dtype=np.int64)
    self.row_of_thread = t // self.L
    g, l = g0 + self.row_of_thread, t % self.L
    self.ids = {"gidx0": g % gsize[0], "gidx1": (g // gsize[0]) % gsize[1], "gidx2": g // (gsize[0] * gsize[1]),
                "lidx0": l % lsize[0], "lidx1": (l // lsize[0]) % lsize[1], "lidx2": l // (lsize[0] * lsize[1])}
    self.ids["core_id"] = self.ids["gidx0"]
    self.all_threads = t
    self.vals: list[Any] = [None] * len(prg.lines)
    self.mask = np.ones(self.T, np.bool_)
    self.saved: list[np.ndarray] = []
    self.steps = 0

  def thread_name(self, t: int) -> str:
    g, l = self.g0 + t // self.L, t % self.L
    gs, ls = self.gsize, self.lsize
    gid = (g % gs[0], (g // gs[0]) % gs[1], g // (gs[0] * gs[1]))
    lid = (l % ls[0], (l // ls[0]) % ls[1], l // (ls[0] * ls[1]))
    return f"gidx={gid} lidx={lid}"

  def fail(self, i: int, msg: str) -> EmulatedKernelError:
    return EmulatedKernelError(f"kernel {self.prg.name}, line {i} ({self.prg.lines[i].op.name}): {msg}")

  def run(self) -> None:
    lines, handlers = self.prg.lines, self.prg.handlers
    pc, n = 0, len(lines)
    with np.errstate(all="ignore"):
      while pc < n:
        self.steps += 1
        nxt = handlers[pc](self, pc, lines[pc])
        pc = pc + 1 if nxt is None else nxt

  # ---- memory access ----
  def lanes(self, idx: np.ndarray, gate: np.ndarray | None, n: int) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """(threads, lanes or None for scalar access, element addresses) of every active access."""
    act = self.mask if gate is None else (self.mask & gate if gate.ndim == 1 else self.mask[:, None] & gate)
    if idx.ndim == 1 and n == 1 and act.ndim == 1:
      ti = self.all_threads if act.all() else np.flatnonzero(act)
      return ti, None, idx[ti] if ti is not self.all_threads else idx
    addr2 = idx if idx.ndim == 2 else idx[:, None] + np.arange(n, dtype=idx.dtype)
    ti, li = np.nonzero(np.broadcast_to(act[:, None] if act.ndim == 1 else act, addr2.shape))
    return ti, li, addr2[ti, li]

  def check(self, i: int, what: str, mem: Memory, ti: np.ndarray, addr: np.ndarray) -> None:
    if addr.size == 0 or (addr.min() >= 0 and addr.max() < mem.size): return
    k = int(np.flatnonzero((addr < 0) | (addr >= mem.size))[0])
    raise self.fail(i, f"out-of-bounds {what} of {mem.describe()} (size {mem.size}) at index {int(addr[k])} "
                       f"by thread {self.thread_name(int(ti[k]))}")

  def check_race(self, i: int, mem: Memory, ti: np.ndarray, key: np.ndarray, bits: np.ndarray) -> None:
    """Two threads storing different values to one address in the same step: the result would depend on the GPU's
    scheduling. (Equal values, as when every thread of a group stores the reduced result, are not a race.)"""
    if key.size < 2: return
    order = np.argsort(key, kind="stable")
    k, raw = key[order], np.ascontiguousarray(bits).view(np.uint8).reshape(key.size, -1)[order]
    differ = (raw[1:] != raw[:-1]).any(axis=1)
    if dtypes.is_float(mem.dtype.scalar()):
      # NOTE: NaNs are one value (sign and payload are not defined, docs/ir.md): two NaNs are no race (found by fuzz)
      isnan = np.isnan(decode(mem.dtype.scalar(), np.ascontiguousarray(bits)).astype(np.float64)).reshape(key.size, -1)
      nan = np.asarray(isnan[order].all(axis=1))
      differ &= ~(nan[1:] & nan[:-1])
    clash = np.flatnonzero((k[1:] == k[:-1]) & differ)
    if clash.size == 0: return
    a, b = int(ti[order[clash[0]]]), int(ti[order[clash[0] + 1]])
    idx = int(k[clash[0]]) % mem.size
    raise self.fail(i, f"write-write race on {mem.describe()} at index {idx}: threads {self.thread_name(a)} and "
                       f"{self.thread_name(b)} store different values in the same step")

  def rows(self, mem: Memory, ti: np.ndarray) -> np.ndarray:
    return self.row_of_thread[ti] if mem.space is AddrSpace.LOCAL else ti

  def read(self, i: int, mem: Memory, ti: np.ndarray, addr: np.ndarray) -> np.ndarray:
    self.check(i, "LOAD", mem, ti, addr)
    if mem.space is AddrSpace.GLOBAL: return decode(mem.dtype, mem.arr[addr])
    r = self.rows(mem, ti)
    if mem.written is not None and not (ok := mem.written[r, addr]).all():
      k = int(np.flatnonzero(~ok)[0])
      raise self.fail(i, f"LOAD of uninitialised {mem.describe()} at index {int(addr[k])} "
                         f"by thread {self.thread_name(int(ti[k]))}")
    return mem.arr[r, addr]

  def write(self, i: int, mem: Memory, ti: np.ndarray, addr: np.ndarray, v: np.ndarray) -> None:
    self.check(i, "STORE", mem, ti, addr)
    if mem.space is AddrSpace.GLOBAL:
      bits = encode(mem.dtype, v)
      self.check_race(i, mem, ti, addr, bits)
      mem.arr[addr] = bits
      return
    r = self.rows(mem, ti)
    if mem.space is AddrSpace.LOCAL: self.check_race(i, mem, ti, r * mem.size + addr, encode(mem.dtype, v))
    mem.arr[r, addr] = v
    if mem.written is not None: mem.written[r, addr] = True

# ---- handlers: one per op; each returns the next line, or None for the one after ----

def _h_const(b: _Batch, i: int, ln: Line) -> None:
  if b.vals[i] is None:
    shape = (b.T,) if ln.dtype.count == 1 else (b.T, ln.dtype.count)
    # NOTE: a constant's value is already one of its dtype (dtypes.as_const), so it converts exactly
    b.vals[i] = np.broadcast_to(np.asarray(ln.arg, dtype=np_value_dtype(ln.dtype)), shape)

def _h_define_global(b: _Batch, i: int, ln: Line) -> None:
  if ln.arg not in b.globals: raise b.fail(i, f"global buffer {ln.arg} was not passed to the launch")
  b.vals[i] = b.globals[ln.arg]

def _h_define_mem(b: _Batch, i: int, ln: Line) -> None:
  if b.vals[i] is not None: return
  dt = ln.dtype
  assert isinstance(dt, PtrDType)
  if dt.size < 0: raise b.fail(i, f"{ln.op.name} needs a size, got {dt}")
  rows = b.G if ln.op is Ops.DEFINE_LOCAL else b.T
  space = AddrSpace.LOCAL if ln.op is Ops.DEFINE_LOCAL else AddrSpace.REG
  b.vals[i] = Memory(space, ln.arg, dt.base, np.zeros((rows, dt.size * dt.base.count), np_value_dtype(dt.base)))

def _h_define_var(b: _Batch, i: int, ln: Line) -> None:
  b.vals[i] = np.broadcast_to(np.asarray(b.var_vals[i], np_value_dtype(ln.dtype)), (b.T,))

def _h_special(b: _Batch, i: int, ln: Line) -> None:
  if ln.arg not in b.ids: raise b.fail(i, f"unknown SPECIAL {ln.arg!r}; expected gidx0..2, lidx0..2 or core_id")
  b.vals[i] = b.ids[ln.arg].astype(np_value_dtype(ln.dtype))

def _h_passthrough(b: _Batch, i: int, ln: Line) -> None: b.vals[i] = b.vals[ln.src[0]] if ln.src else None

def _h_nothing(b: _Batch, i: int, ln: Line) -> None: return None

def _h_index(b: _Batch, i: int, ln: Line) -> None:
  mem, idx = b.vals[ln.src[0]], b.vals[ln.src[1]].astype(np.int64)
  # NOTE: memory of vectors (a float4 register) is held as scalars: index i is element i * 4
  if mem.dtype.count > 1: idx = idx * mem.dtype.count
  b.vals[i] = (mem, idx, b.vals[ln.src[2]] if len(ln.src) > 2 else None)

def _h_load(b: _Batch, i: int, ln: Line) -> None:
  mem, idx, gate = b.vals[ln.src[0]]
  n = ln.dtype.count
  ti, li, addr = b.lanes(idx, gate, n)
  got = b.read(i, mem, ti, addr)
  shape = (b.T,) if n == 1 else (b.T, n)
  if len(ln.src) > 1: out = np.array(np.broadcast_to(b.vals[ln.src[1]], shape), dtype=np_value_dtype(ln.dtype))
  elif ti is b.all_threads and li is None: b.vals[i] = got; return
  else: out = np.zeros(shape, np_value_dtype(ln.dtype))
  if li is None: out[ti] = got
  else: out.reshape(b.T, -1)[ti, li] = got
  b.vals[i] = out

def _h_store(b: _Batch, i: int, ln: Line) -> None:
  mem, idx, gate = b.vals[ln.src[0]]
  v = b.vals[ln.src[1]]
  n = v.shape[1] if v.ndim == 2 else 1
  ti, li, addr = b.lanes(idx, gate, n)
  b.write(i, mem, ti, addr, v[ti] if li is None else v.reshape(b.T, -1)[ti, li])

def _h_alu(b: _Batch, i: int, ln: Line) -> None:
  # NOTE: the op's function without exec_alu's errstate: the batch runs under np.errstate(all="ignore") already
  b.vals[i] = b.prg.alu[i](*[b.vals[s] for s in ln.src])

def _h_cast(b: _Batch, i: int, ln: Line) -> None:
  b.vals[i] = semantics.exec_cast(b.vals[ln.src[0]], b.prg.lines[ln.src[0]].dtype, ln.dtype)

def _h_bitcast(b: _Batch, i: int, ln: Line) -> None:
  b.vals[i] = semantics.exec_bitcast(b.vals[ln.src[0]], b.prg.lines[ln.src[0]].dtype, ln.dtype)

def _h_gep(b: _Batch, i: int, ln: Line) -> None:
  v = b.vals[ln.src[0]]
  if v.ndim == 1: b.vals[i] = v if ln.arg == (0,) else np.broadcast_to(v[:, None], (b.T, len(ln.arg)))
  else: b.vals[i] = v[:, ln.arg[0]] if len(ln.arg) == 1 else v[:, list(ln.arg)]

def _h_vectorize(b: _Batch, i: int, ln: Line) -> None:
  v = np.stack([np.broadcast_to(b.vals[s], (b.T,)) for s in ln.src], axis=1)
  b.vals[i] = v.astype(np_value_dtype(ln.dtype), copy=False)

def _h_range(b: _Batch, i: int, ln: Line) -> int | None:
  end = b.vals[ln.src[0]]
  counter = np.zeros(b.T, np_value_dtype(ln.dtype))
  b.saved.append(b.mask)
  active = b.mask & (counter < end)
  if not active.any():
    b.mask = b.saved.pop()
    return b.prg.jump[i] + 1
  b.vals[i], b.mask = counter, active
  return None

def _h_end(b: _Batch, i: int, ln: Line) -> int | None:
  r = b.prg.jump[i]
  counter = b.vals[r] + np.ones((), b.vals[r].dtype)
  active = b.mask & (counter < b.vals[b.prg.lines[r].src[0]])
  if active.any():
    b.vals[r], b.mask = counter, active
    return r + 1
  b.mask = b.saved.pop()
  return None

def _h_if(b: _Batch, i: int, ln: Line) -> int | None:
  b.saved.append(b.mask)
  b.mask = b.mask & b.vals[ln.src[0]]
  return None if b.mask.any() else b.prg.jump[i]

def _h_endif(b: _Batch, i: int, ln: Line) -> None: b.mask = b.saved.pop()

def _h_barrier(b: _Batch, i: int, ln: Line) -> None:
  m = b.mask.reshape(b.G, b.L)
  some, every = m.any(axis=1), m.all(axis=1)
  if (bad := np.flatnonzero(some & ~every)).size == 0: return
  row = int(bad[0])
  here, away = np.flatnonzero(m[row]), np.flatnonzero(~m[row])
  raise b.fail(i, f"BARRIER in divergent control flow: thread {b.thread_name(row * b.L + int(here[0]))} reached it but "
                  f"thread {b.thread_name(row * b.L + int(away[0]))} of the same workgroup did not "
                  f"({here.size} of {b.L} threads arrived; all threads of a workgroup or none must reach a barrier)")

@functools.cache
def _coords(lay: Layout) -> np.ndarray:
  """(row, col) of every (lane, element) of a fragment, lane-major: shape (lanes * elements, 2)."""
  return np.array([lay.coords(l, e) for l in range(lay.lanes) for e in range(lay.elems)])

def _gather(b: _Batch, i: int, tc: TensorCore, which: str, vals: np.ndarray, rows: int, cols: int) -> np.ndarray:
  """The per-warp matrices (warps, rows, cols) that the lanes' fragments `vals` (threads, elements) hold, by the
  table's layout. A cell held by several lanes (RDNA3 replicates A and B) must hold one value in all of them."""
  lay = {"A": tc.layout_a, "B": tc.layout_b, "C": tc.layout_c}[which]
  rc = _coords(lay)
  v = vals.reshape(-1, tc.threads, lay.elems).astype(np.float64).reshape(-1, lay.lanes * lay.elems)
  flat = rc[:, 0] * cols + rc[:, 1]
  order = np.argsort(flat, kind="stable")
  first = np.ones(flat.size, np.bool_)
  first[1:] = flat[order][1:] != flat[order][:-1]
  mat = np.zeros((v.shape[0], rows * cols))
  mat[:, flat[order][first]] = v[:, order[first]]
  dup = order[~first]
  if dup.size:
    got, want = v[:, dup], mat[:, flat[dup]]
    bad = ~((got == want) | (np.isnan(got) & np.isnan(want)))
    if bad.any():
      w, k = (int(x[0]) for x in np.nonzero(bad))
      r, c = rc[dup[k]]
      raise b.fail(i, f"WMMA {tc.name}: lane {dup[k] // lay.elems} of warp {w} holds {got[w, k]} for "
                      f"{which}[{r}][{c}], another lane {want[w, k]}; the instruction needs every copy equal")
  return mat.reshape(-1, rows, cols)

def _h_wmma(b: _Batch, i: int, ln: Line) -> None:
  """D = A @ B + C per warp of `threads` consecutive threads (lidx0 fastest), each lane's fragments laid out as the
  tensor-core table says for the instruction named by the arg. Products are exact, the sum is rounded once to the
  accumulator's dtype. Every lane of a warp must execute it together."""
  try: tc = tensor_core(ln.arg[0] if isinstance(ln.arg, tuple) and ln.arg else str(ln.arg))
  except KeyError as e: raise b.fail(i, e.args[0]) from e
  W, (M, N, K) = tc.threads, tc.dims
  if b.L % W: raise b.fail(i, f"WMMA {tc.name} needs whole warps of {W} threads, the workgroup has {b.L}")
  m = b.mask.reshape(-1, W)
  if (part := np.flatnonzero(m.any(axis=1) & ~m.all(axis=1))).size:
    raise b.fail(i, f"WMMA {tc.name} in divergent control flow: warp {int(part[0])} has {int(m[part[0]].sum())} of "
                    f"{W} lanes active (all lanes of a warp must execute it)")
  a, bb, c = (np.broadcast_to(b.vals[s], (b.T, n)) for s, n in zip(ln.src, tc.elements_per_thread))
  d = _gather(b, i, tc, "A", a, M, K) @ _gather(b, i, tc, "B", bb, K, N) + _gather(b, i, tc, "C", c, M, N)
  rc = _coords(tc.layout_c)
  out = d[:, rc[:, 0], rc[:, 1]].reshape(b.T, tc.layout_c.elems)
  b.vals[i] = semantics.exec_cast(out, dtypes.float64, ln.dtype)

def _h_unsupported(b: _Batch, i: int, ln: Line) -> None:
  raise b.fail(i, f"the PYTHON interpreter does not implement {ln.op.name}")

HANDLERS: dict[Ops, Callable[[_Batch, int, Line], int | None]] = {
  Ops.CONST: _h_const, Ops.VCONST: _h_const, Ops.DEFINE_GLOBAL: _h_define_global, Ops.DEFINE_LOCAL: _h_define_mem,
  Ops.DEFINE_REG: _h_define_mem, Ops.DEFINE_VAR: _h_define_var, Ops.SPECIAL: _h_special, Ops.AFTER: _h_passthrough,
  Ops.GROUP: _h_nothing, Ops.SINK: _h_nothing, Ops.INDEX: _h_index, Ops.LOAD: _h_load,
  Ops.STORE: _h_store, Ops.CAST: _h_cast, Ops.BITCAST: _h_bitcast, Ops.GEP: _h_gep, Ops.VECTORIZE: _h_vectorize,
  Ops.RANGE: _h_range, Ops.END: _h_end, Ops.IF: _h_if, Ops.ENDIF: _h_endif, Ops.BARRIER: _h_barrier,
  Ops.WMMA: _h_wmma,
  **{op: _h_alu for op in semantics.ALU},
}

# ---- runtime ----

class PythonProgram:
  """A parsed program; called like every runtime's program: `prg(*bufs, global_size=, local_size=, vals=, wait=)`.
  `bufs` are one per DEFINE_GLOBAL in number order (ProgramSpec.globals); `vals` bind the DEFINE_VARs sorted by name
  (ProgramSpec.vars)."""
  # NOTE: threads per lockstep batch are bounded so that one value per line per thread stays a few tens of MB
  batch_values: int = 1 << 22
  def __init__(self, name: str, lib: bytes):
    self.name = name
    self.lines = parse_program(lib.decode())
    self.handlers = [HANDLERS.get(ln.op, _h_unsupported) for ln in self.lines]
    self.alu = {i: self._alu_fn(i, ln) for i, ln in enumerate(self.lines) if ln.op in semantics.ALU}
    self.jump = self._match_blocks()
    var_lines = [i for i, ln in enumerate(self.lines) if ln.op is Ops.DEFINE_VAR]
    self.var_lines = sorted(var_lines, key=lambda i: self.lines[i].arg[0])
    self.shared_bytes = sum(ln.dtype.nbytes() for ln in self.lines
                            if ln.op is Ops.DEFINE_LOCAL and isinstance(ln.dtype, PtrDType))
    self.steps = self.lane_steps = 0

  def _alu_fn(self, i: int, ln: Line) -> Callable[..., np.ndarray]:
    """The op's function from the one semantics table, for the dtype of its operands (WHERE: of its branches)."""
    dt = self.lines[ln.src[-1]].dtype.scalar() if ln.src else ln.dtype.scalar()
    try: return semantics.alu_fn(ln.op, dt)
    except TypeError as e: raise CompileError(f"PYTHON program {self.name}: line {i} {ln.op.name}: {e}") from e

  def _match_blocks(self) -> dict[int, int]:
    """RANGE <-> END and IF <-> ENDIF line numbers, checking that they nest."""
    jump: dict[int, int] = {}
    open_: list[int] = []
    for i, ln in enumerate(self.lines):
      if ln.op in (Ops.RANGE, Ops.IF): open_.append(i)
      if ln.op not in (Ops.END, Ops.ENDIF): continue
      opener = next((s for s in ln.src if self.lines[s].op in (Ops.RANGE, Ops.IF)), None)
      if opener is None or not open_ or open_[-1] != opener:
        raise CompileError(f"PYTHON program {self.name}: line {i} {ln.op.name} does not close the innermost open "
                           f"RANGE/IF (open: {open_})")
      jump[open_.pop()], jump[i] = i, opener
    if open_: raise CompileError(f"PYTHON program {self.name}: lines {open_} open a RANGE/IF that is never closed")
    return jump

  def __call__(self, *bufs: Any, global_size: Sequence[int] | None = (1, 1, 1),
               local_size: Sequence[int] | None = (1, 1, 1), vals: Sequence[int] = (),
               wait: bool = False) -> float | None:
    gsize = tuple(int(x) for x in (*(global_size or ()), 1, 1, 1)[:3])
    lsize = tuple(int(x) for x in (*(local_size or ()), 1, 1, 1)[:3])
    self._check_launch(gsize, lsize, vals)
    globals_ = self._globals(bufs)
    var_vals = {i: int(v) for i, v in zip(self.var_lines, vals)}
    st = time.perf_counter()
    L, ngroups = prod(lsize), prod(gsize)
    per_batch = max(1, min(ngroups, self.batch_values // (L * max(1, len(self.lines)))))
    self.steps = self.lane_steps = 0
    for g0 in range(0, ngroups, per_batch):
      b = _Batch(self, globals_, var_vals, gsize, lsize, g0, min(per_batch, ngroups - g0))
      b.run()
      self.steps += b.steps
      self.lane_steps += b.steps * b.T
    return time.perf_counter() - st if wait else None

  def _check_launch(self, gsize: tuple[int, ...], lsize: tuple[int, ...], vals: Sequence[int]) -> None:
    t = get_target()
    where = f"PYTHON kernel {self.name} (EMULATE target {t.name})"
    if any(s < 1 for s in gsize + lsize): raise ValueError(f"{where}: launch sizes must be >= 1: {gsize}, {lsize}")
    if any(s > m for s, m in zip(lsize, t.local_max)) or prod(lsize) > t.max_threads:
      raise ValueError(f"{where}: local_size {lsize} exceeds the limits {t.local_max}, {t.max_threads} threads")
    if any(s > m for s, m in zip(gsize, t.global_max)):
      raise ValueError(f"{where}: global_size {gsize} exceeds {t.global_max}")
    if self.shared_bytes > t.shared_max:
      raise ValueError(f"{where}: {self.shared_bytes} bytes of local memory exceed the {t.shared_max} of a workgroup")
    if len(vals) != len(self.var_lines):
      names = [self.lines[i].arg[0] for i in self.var_lines]
      raise ValueError(f"{where}: {len(vals)} values for {len(self.var_lines)} variables {names}")
    for i, v in zip(self.var_lines, vals):
      name, lo, hi = self.lines[i].arg
      if not lo <= v <= hi: raise ValueError(f"{where}: variable {name} = {v} is outside its bounds [{lo}, {hi}]")

  def _globals(self, bufs: Sequence[Any]) -> dict[int, Memory]:
    # NOTE: the runners pass one buffer per DEFINE_GLOBAL in the order of their numbers (ProgramSpec.globals)
    ret: dict[int, Memory] = {}
    defs = sorted({ln.arg: ln for ln in self.lines if ln.op is Ops.DEFINE_GLOBAL}.items())
    if len(bufs) != len(defs): raise ValueError(f"PYTHON kernel {self.name}: uses {len(defs)} buffers, got {len(bufs)}")
    for buf, (num, ln) in zip(bufs, defs):
      base = ln.dtype.base if isinstance(ln.dtype, PtrDType) else ln.dtype
      npdt = np.dtype(to_np_dtype(base.scalar()))
      raw = np.frombuffer(buf, dtype=np.uint8)
      usable = raw[:raw.size // npdt.itemsize * npdt.itemsize]
      ret[num] = Memory(AddrSpace.GLOBAL, num, base.scalar(), usable.view(npdt))
    return ret

# ---- renderer, compiler, device ----

_GENERIC_VECTORS = {dt: Vectors((8, 4, 2), frozenset({Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.AND, Ops.OR, Ops.XOR,
                                                       Ops.SHL, Ops.SHR, Ops.CAST}))
                    for dt in DTYPES_DICT.values() if dt not in (dtypes.void, dtypes.index)}

class PythonRenderer(Renderer):
  """Renders a linear program as the interpreter's text. What codegen reads follows EMULATE: nothing (a generic GPU)
  or an emulated target (NV, AMD, AMD_GFX1100, AMD_GFX1201, AMD_GFX942), whose every contract attribute (limits,
  locals, shared memory, vectors, ops, tensor cores, final rules) is that target's own renderer's: the interpreter
  then runs exactly the linear program the NV (CUDA) or AMD (LLVM) renderer gets."""
  device = "PYTHON"
  has_threads = False
  def __init__(self, target: str | None = None):
    """`target` an EMULATE value ("" generic); None follows EMULATE at every read, as the launch checks do."""
    if target is not None: get_target(target)
    self._target = target
  @property
  def target(self) -> Target: return get_target(self._target)
  @property
  def base(self) -> Renderer | None:
    """The emulated target's renderer (None for the generic GPU)."""
    return self.target.base
  @property
  def arch(self) -> str: return self.target.name if (b := self.base) is None else f"{b.device}:{b.arch}"  # type: ignore[override]
  @property
  def has_local(self) -> bool: return True  # type: ignore[override]
  @property
  def has_shared(self) -> bool: return True  # type: ignore[override]
  @property
  def global_max(self) -> tuple[int, ...]: return self.target.global_max  # type: ignore[override]
  @property
  def local_max(self) -> tuple[int, ...]: return self.target.local_max  # type: ignore[override]
  @property
  def local_max_total(self) -> int: return self.target.max_threads  # type: ignore[override]
  @property
  def shared_max(self) -> int: return self.target.shared_max  # type: ignore[override]
  # the generic GPU: the interpreter holds a vector as a numpy row: loads and stores of 8, 4 and 2 lanes of any dtype,
  # and the lane-wise arithmetic a C vector extension has (numpy computes it on the whole row)
  @property
  def vectors(self) -> dict[DType, Vectors]:  # type: ignore[override]
    return _GENERIC_VECTORS if (b := self.base) is None else b.vectors
  @property
  def code_for_op(self) -> dict[Ops, Any]:  # type: ignore[override]
    return {op: op.name for op in semantics.ALU} if (b := self.base) is None else b.code_for_op
  @property
  def tensor_cores(self) -> tuple[TensorCore, ...]:  # type: ignore[override]
    return () if (b := self.base) is None else b.tensor_cores
  @property
  def extra_matcher(self) -> Any:  # type: ignore[override]
    return None if (b := self.base) is None else b.extra_matcher
  @property
  def div_by_multiply(self) -> tuple[DType, ...]:  # type: ignore[override]
    return () if (b := self.base) is None else b.div_by_multiply
  @property
  def masked_loads(self) -> bool:  # type: ignore[override]
    return False if (b := self.base) is None else b.masked_loads
  def supports_op(self, op: Ops, dtype: DType) -> bool:
    return super().supports_op(op, dtype) if (b := self.base) is None else b.supports_op(op, dtype)
  def render(self, uops: list[UOp], name: str = "kernel") -> str:
    """The program text (the name is not part of it: the runtime gets the name beside the binary)."""
    return render_program(uops)
  def __reduce__(self) -> tuple[Any, ...]: return (type(self), (self._target,))

class PythonCompiler(Compiler):
  """The program text is its own binary; compiling checks that it parses."""
  # NOTE: no sqlite cache (cachekey None): parsing the text is cheaper than a cache lookup
  def __init__(self) -> None: super().__init__(None)
  def compile(self, src: str) -> bytes:
    try: parse_program(src)
    except ValueError as e: raise CompileError(str(e)) from e
    return src.encode()

class PYTHONDevice(Compiled):
  def __init__(self, device: str = "PYTHON"):
    super().__init__(device, MallocAllocator(), PythonRenderer(), PythonCompiler(), PythonProgram)
