"""Devices: the registry (`Device`), buffers and allocators, compilers with the sqlite compile cache, and `Compiled`.

A backend lives in `tinygrad/runtime/ops_<name>.py` and defines `<NAME>Device(Compiled)`; `Device[name]` imports it
lazily, so a machine without a GPU never touches the GPU backends.
"""
from __future__ import annotations
import ctypes, importlib, itertools, weakref
from typing import Any, Callable
import numpy as np
from tinygrad.dtype import DType, dtypes, to_np_dtype
from tinygrad.helpers import DEV, DEVICES, device_shorthand, CACHELEVEL, HOST_DEVICES, diskcache_get, diskcache_put
from tinygrad.helpers import codegen_flags, GlobalCounters
from tinygrad.uop import Ops
from tinygrad.renderer import Renderer

# ---- errors ----

class DeviceOpenError(RuntimeError):
  """A backend could not be opened: the message says why and what to install or set."""

class CompileError(RuntimeError):
  """A kernel failed to compile: the message holds the source (with line numbers) and the compiler's output."""

class NotComputedError(RuntimeError):
  """A buffer was to be written by a kernel that never ran (COMPILE_ONLY=1 compiles every kernel and runs none)."""

def numbered(src: str) -> str: return "\n".join(f"{i:4d} | {line}" for i, line in enumerate(src.splitlines(), 1))

# ---- the device registry ----

KNOWN_DEVICES = DEVICES
# what to do when a backend's module or driver is missing
INSTALL_HINTS = {
  "CPU": "install a C compiler (cc, clang or gcc; e.g. `apt-get install clang`) or point CC= at one",
  "PYTHON": "the PYTHON backend needs only numpy; is tinygrad/runtime/ops_python.py present?",
  "NV": "needs an NVIDIA GPU with its driver (libcuda.so.1, r580 or newer) and the CUDA toolchain (`pip install -e "
        "'.[nv]'`: nvidia-cuda-nvrtc, nvidia-cuda-runtime, nvidia-cuda-nvcc); COMPILE_ONLY=1 needs only the toolchain",
  "AMD": "needs llvmlite and LLD (`pip install llvmlite ziglang`: the project's `llvm` extra) and, to run, the HIP "
         "runtime (ROCm)",
}

class _Device:
  """`Device["CPU"]` opens (once) and returns a backend; `Device.DEFAULT` is the device new tensors go to."""
  def __init__(self) -> None:
    self._opened: dict[str, Compiled] = {}
    self._default: str | None = None

  @staticmethod
  def canonicalize(name: str) -> str:
    """"cpu" -> "CPU", "nv:1" -> "NV:1", "CPU:0" -> "CPU": the backend is upper case, an optional ":n" picks one device
    of it (device 0 is the backend's name alone)."""
    if not isinstance(name, str):
      raise TypeError(f"a device name is a str like 'CPU' or 'NV:1', got {name!r}; a tuple of names is a set of "
                      "devices for Tensor.shard")
    base, _, num = name.partition(":")
    if num.isdigit(): num = str(int(num))
    return base.upper() + (f":{num}" if num and num != "0" else "")

  def __getitem__(self, name: str) -> Compiled:
    cname = self.canonicalize(name)
    if (dev := self._opened.get(cname)) is None: dev = self._opened[cname] = self._open(cname)
    return dev

  def opened(self, name: str) -> Compiled | None:
    """The device `name` if this process has opened it, else None (never opens one)."""
    return self._opened.get(self.canonicalize(name))

  def _open(self, cname: str) -> Compiled:
    base, _, num = cname.partition(":")
    if not base.isidentifier(): raise DeviceOpenError(f"device {cname!r}: not a device name; known: {KNOWN_DEVICES}")
    if num and not num.isdigit():
      raise DeviceOpenError(f"device {cname!r}: the index after ':' must be a number (like {base}:1), got {num!r}")
    # NOTE: the host backends have HOST_DEVICES devices each; the GPU backends check their index against the GPUs
    if num and base in ("CPU", "PYTHON") and int(num) >= int(HOST_DEVICES.value):
      raise DeviceOpenError(f"device {cname}: unknown device index {num}: HOST_DEVICES={HOST_DEVICES.value} opens "
                            f"{base}:0..{base}:{int(HOST_DEVICES.value) - 1}; set HOST_DEVICES higher for more")
    modname = f"tinygrad.runtime.ops_{base.lower()}"
    try: mod = importlib.import_module(modname)
    except ModuleNotFoundError as e:
      if e.name != modname:
        raise DeviceOpenError(f"device {cname}: {modname} needs {e.name!r}: {INSTALL_HINTS.get(base, '')}") from e
      raise DeviceOpenError(f"device {cname}: no backend module {modname}; known devices are {KNOWN_DEVICES}") from e
    cls = getattr(mod, f"{base}Device", None)
    if cls is None: raise DeviceOpenError(f"device {cname}: {modname} defines no class {base}Device")
    try:
      dev: Compiled = cls(cname)
      return dev
    except DeviceOpenError: raise
    except Exception as e:
      hint = INSTALL_HINTS.get(base, "")
      raise DeviceOpenError(f"device {cname} could not be opened: {type(e).__name__}: {e}. Hint: {hint}") from e

  @property
  def DEFAULT(self) -> str:
    if self._default is not None: return self._default
    if DEV.value: return self.canonicalize(DEV.value)
    # NOTE: NV=1, AMD=1, PYTHON=1 and CPU=1 are the short forms of DEV= (helpers checks them at import)
    return device_shorthand() or "CPU"
  @DEFAULT.setter
  def DEFAULT(self, name: str | None) -> None: self._default = None if name is None else self.canonicalize(name)

  def get_available_devices(self) -> list[str]:
    """Devices that open on this machine (opening each one that is not open yet)."""
    ret = []
    for d in KNOWN_DEVICES:
      try: self[d]
      except DeviceOpenError: continue
      ret.append(d)
    return ret

Device = _Device()

def is_dtype_supported(dtype: DType, device: str | None = None) -> bool:
  """Whether tensors of `dtype` compute on `device` (default: Device.DEFAULT). Every backend here stores and computes
  every scalar dtype of `dtypes` (the renderers emulate what the hardware lacks: fp8 and bfloat16 through float32,
  64-bit ints on GPUs), so only what is not a tensor dtype is refused: vectors, pointers, `index` and `void`. The
  device name is checked (ValueError for an unknown backend), not opened."""
  from tinygrad.dtype import PtrDType
  if Device.canonicalize(device or Device.DEFAULT).split(":")[0] not in KNOWN_DEVICES:
    raise ValueError(f"is_dtype_supported: unknown device {device!r} (backends: {', '.join(KNOWN_DEVICES)})")
  return not isinstance(dtype, PtrDType) and dtype.count == 1 and dtype not in (dtypes.index, dtypes.void)

# ---- allocators ----

class Allocator:
  """Device memory. Backends implement `_alloc`, `_free`, `_copyin`, `_copyout`, and optionally `_offset`
  (sub-buffers) and `_as_buffer` (zero-copy host view)."""
  def alloc(self, nbytes: int, options: Any = None) -> Any:
    if not isinstance(nbytes, int) or nbytes < 0: raise ValueError(f"alloc: size must be an int >= 0, got {nbytes!r}")
    ret = self._alloc(nbytes, options)
    GlobalCounters.mem_used += nbytes
    GlobalCounters.mem_peak = max(GlobalCounters.mem_peak, GlobalCounters.mem_used)
    return ret
  def free(self, opaque: Any, nbytes: int, options: Any = None) -> None:
    self._free(opaque, nbytes, options)
    GlobalCounters.mem_used -= nbytes
  def _alloc(self, nbytes: int, options: Any) -> Any: raise NotImplementedError(f"{type(self).__name__}: no _alloc")
  def _free(self, opaque: Any, nbytes: int, options: Any) -> None: pass
  def _copyin(self, dest: Any, src: memoryview) -> None: raise NotImplementedError(f"{type(self).__name__}: no _copyin")
  def _copyout(self, dest: memoryview, src: Any) -> None:
    raise NotImplementedError(f"{type(self).__name__}: no _copyout")

class LRUAllocator(Allocator):
  """Keeps freed memory by (size, options) and hands it out again: allocation is the slow part of many small kernels.
  At most `max_cached` bytes are kept; beyond that, freed memory is really freed."""
  max_cached = 1 << 28
  def __init__(self) -> None:
    self.cache: dict[tuple[int, Any], list[Any]] = {}
    self.cached_bytes = 0
  def alloc(self, nbytes: int, options: Any = None) -> Any:
    if (lst := self.cache.get((nbytes, options))):
      self.cached_bytes -= nbytes
      return lst.pop()
    try: return super().alloc(nbytes, options)
    except MemoryError:
      self.free_cache()
      return super().alloc(nbytes, options)
  def free(self, opaque: Any, nbytes: int, options: Any = None) -> None:
    if getattr(options, "nolru", False) or self.cached_bytes + nbytes > self.max_cached:
      super().free(opaque, nbytes, options)
    else:
      self.cache.setdefault((nbytes, options), []).append(opaque)
      self.cached_bytes += nbytes
  def free_cache(self) -> None:
    for (nbytes, options), opaques in self.cache.items():
      for o in opaques: super().free(o, nbytes, options)
    self.cache.clear()
    self.cached_bytes = 0

class MallocAllocator(LRUAllocator):
  """Host memory as ctypes byte arrays; shared by CPU and PYTHON. Programs get the ctypes array (`ctypes.addressof` is
  the pointer), the PYTHON interpreter wraps it with `np.frombuffer`."""
  def _alloc(self, nbytes: int, options: Any) -> Any: return (ctypes.c_uint8 * nbytes)()
  def _as_buffer(self, src: Any) -> memoryview: return memoryview(src).cast("B")
  def _copyin(self, dest: Any, src: memoryview) -> None:
    if len(src) == 0: return
    ctypes.memmove(dest, bytes(src) if src.readonly else (ctypes.c_char * len(src)).from_buffer(src), len(src))
  def _copyout(self, dest: memoryview, src: Any) -> None:
    if len(dest) == 0: return
    ctypes.memmove((ctypes.c_char * len(dest)).from_buffer(dest), src, len(dest))
  def _offset(self, buf: Any, size: int, offset: int) -> Any: return (ctypes.c_uint8 * size).from_buffer(buf, offset)

class _Placeholder:
  """COMPILE_ONLY device memory: nothing until data is copied in (then host bytes of the whole base)."""
  def __init__(self, nbytes: int, base: _Placeholder | None = None, offset: int = 0):
    self.nbytes, self.base, self.offset = nbytes, base, offset
    self.mem: bytearray | None = None
  def root(self) -> _Placeholder: return self.base.root() if self.base is not None else self

class CompileOnlyAllocator(Allocator):
  """Memory of a device opened under COMPILE_ONLY=1 (no driver needed). Kernel outputs are never written, so they take
  no memory; data copied in (a model's inputs and weights) is kept on the host, so it reads back as it went in."""
  def _alloc(self, nbytes: int, options: Any) -> Any: return _Placeholder(nbytes)
  def _offset(self, buf: Any, size: int, offset: int) -> Any: return _Placeholder(size, buf.root(), buf.offset + offset)
  def _copyin(self, dest: Any, src: memoryview) -> None:
    root = dest.root()
    if root.mem is None: root.mem = bytearray(root.nbytes)
    root.mem[dest.offset:dest.offset + len(src)] = src
  def _copyout(self, dest: memoryview, src: Any) -> None:
    root = src.root()
    dest[:] = root.mem[src.offset:src.offset + len(dest)] if root.mem is not None else bytes(len(dest))

# ---- buffers ----

class Buffer:
  """`size` elements of `dtype` on `device`. Allocated on demand; `_buf` is the allocator's opaque handle given to
  programs. A view (`.view(size, dtype, offset)`, offset in bytes) shares its base's memory."""
  def __init__(self, device: str, size: int, dtype: DType, opaque: Any = None, options: Any = None,
               base: Buffer | None = None, offset: int = 0):
    if dtype.count != 1 or dtype is dtypes.void: raise ValueError(f"Buffer: dtype must be a scalar type, not {dtype}")
    if not isinstance(size, int) or size < 0: raise ValueError(f"Buffer: size must be an int >= 0, got {size!r}")
    self.device, self.size, self.dtype = Device.canonicalize(device), size, dtype
    self.options, self.offset = options, offset
    self._base = base
    # NOTE: set on the base buffer when a kernel that writes it was compiled but not run (COMPILE_ONLY)
    self._not_computed: str | None = None
    if base is not None:
      if base._base is not None: raise ValueError("Buffer: the base of a view must not be a view")
      if offset < 0 or offset + self.nbytes > base.nbytes:
        raise ValueError(f"Buffer.view: bytes [{offset}, {offset + self.nbytes}) outside a base of {base.nbytes} bytes")
    if opaque is not None: self._set(opaque)

  @property
  def nbytes(self) -> int: return self.size * self.dtype.itemsize
  @property
  def base(self) -> Buffer: return self._base if self._base is not None else self
  @property
  def allocator(self) -> Allocator: return Device[self.device].allocator
  def is_allocated(self) -> bool: return hasattr(self, "_buf")
  def _set(self, opaque: Any) -> None:
    self._buf = opaque
    self._owned = False
  def allocate(self, opaque: Any = None) -> Buffer:
    if self.is_allocated(): raise RuntimeError(f"{self!r} is already allocated")
    if opaque is not None: self._set(opaque); return self
    if self._base is not None:
      self._base.ensure_allocated()
      alloc = self.allocator
      if not hasattr(alloc, "_offset"): raise NotImplementedError(f"device {self.device}: allocator cannot make views")
      self._buf = alloc._offset(self._base._buf, self.nbytes, self.offset)
      self._owned = False
    else:
      self._buf = self.allocator.alloc(self.nbytes, self.options)
      self._owned = True
    return self
  def ensure_allocated(self) -> Buffer: return self if self.is_allocated() else self.allocate()
  def deallocate(self) -> None:
    if not self.is_allocated(): return
    if self._owned: self.allocator.free(self._buf, self.nbytes, self.options)
    del self._buf
  def __del__(self) -> None:
    try: self.deallocate()
    except Exception: pass  # NOTE: at interpreter exit the device registry may be gone already

  def view(self, size: int, dtype: DType, offset: int) -> Buffer:
    """A buffer of `size` elements of `dtype` starting `offset` bytes into this one (or into this view's base)."""
    if self._base is not None: return self._base.view(size, dtype, self.offset + offset)
    return Buffer(self.device, size, dtype, base=self, offset=offset)

  def mark_not_computed(self, why: str) -> None:
    """A kernel that writes this buffer was compiled and not run: reading it raises NotComputedError saying `why`."""
    self.base._not_computed = why
  @property
  def not_computed(self) -> str | None: return self.base._not_computed
  def _check_computed(self, what: str) -> None:
    if (why := self.base._not_computed) is not None:
      raise NotComputedError(f"{what}: {self!r} holds no values: {why}. Nothing ran (COMPILE_ONLY=1 compiles every "
                             "kernel and runs none); compute it again without COMPILE_ONLY to read it")

  def _check_len(self, mv: memoryview, what: str) -> memoryview:
    mv = mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv
    if len(mv) != self.nbytes: raise ValueError(f"{what}: {len(mv)} bytes given for {self!r} of {self.nbytes} bytes")
    return mv
  def copyin(self, mv: memoryview) -> Buffer:
    mv = self._check_len(memoryview(mv), "copyin")
    self.ensure_allocated().allocator._copyin(self._buf, mv)
    # NOTE: a write of the whole base gives it values again; a write through a view leaves the rest unknown
    if self._base is None: self._not_computed = None
    return self
  def copyout(self, mv: memoryview) -> memoryview:
    mv = self._check_len(memoryview(mv), "copyout")
    self._check_computed("copyout")
    if not self.is_allocated() and self._base is not None and self._base.is_allocated(): self.allocate()
    if not self.is_allocated(): raise RuntimeError(f"copyout: {self!r} is not allocated")
    self.allocator._copyout(mv, self._buf)
    return mv
  def as_buffer(self, allow_zero_copy: bool = False) -> memoryview:
    """The bytes of the buffer: a copy, or with `allow_zero_copy` a live view of host memory where there is one."""
    self._check_computed("as_buffer")
    alloc = self.ensure_allocated().allocator
    if allow_zero_copy and hasattr(alloc, "_as_buffer"):
      mv: memoryview = alloc._as_buffer(self._buf)
      return mv
    return self.copyout(memoryview(bytearray(self.nbytes)))
  def numpy(self) -> np.ndarray:
    """A copy as a numpy array (fp8 and bfloat16 as their raw bit patterns)."""
    arr: np.ndarray = np.empty(self.size, dtype=to_np_dtype(self.dtype))
    if self.size: self.copyout(arr.view(np.uint8).data)
    return arr
  def __repr__(self) -> str:
    v = f" view of {self.offset}+" if self._base is not None else ""
    return f"<buf{v} {self.device} size={self.size} {self.dtype}{'' if self.is_allocated() else ' (unallocated)'}>"

# ---- buffers of the tensor graph ----

_buffers: weakref.WeakKeyDictionary[Any, Buffer] = weakref.WeakKeyDictionary()
_unique_counter = itertools.count()

def next_unique() -> int:
  """A fresh number for `UOp(Ops.UNIQUE, arg=n)`: every BUFFER UOp of the tensor graph is distinct by it (and a tag
  `(kind, next_unique())` gives a node such an identity). The numbers depend on the process's history, so the scheduler
  renames them LUNIQUE(0..) in each graph it schedules (engine/schedule.canonical_names) before anyone sees it."""
  return next(_unique_counter)

def buffer_of(u: Any) -> Buffer:
  """The Buffer of a BUFFER UOp (created unallocated on first request), of a BUFFER_VIEW (a view of its base; arg =
  (size, offset in elements)) or of an AFTER (the buffer it orders)."""
  if u.op is Ops.AFTER: return buffer_of(u.src[0])
  if (b := _buffers.get(u)) is not None: return b
  if u.op is Ops.BUFFER:
    if u.src and u.src[0].op is Ops.LUNIQUE:
      raise ValueError(f"buffer_of: BUFFER(LUNIQUE({u.src[0].arg})) names a buffer inside one scheduled graph, not a "
                       "buffer of the process; create_schedule_with_vars maps it to the BUFFER it stands for")
    dev = u.src[1].arg if len(u.src) > 1 and u.src[1].op is Ops.DEVICE else None
    if not isinstance(dev, str): raise ValueError(f"buffer_of: BUFFER needs a DEVICE with one device, got {dev!r}")
    b = Buffer(dev, u.arg, u.dtype)
  elif u.op is Ops.BUFFER_VIEW:
    size, offset = u.arg
    b = buffer_of(u.src[0]).view(size, u.dtype, offset * u.dtype.itemsize)
  else: raise TypeError(f"buffer_of: {u.op} has no buffer; expected BUFFER, BUFFER_VIEW or AFTER")
  _buffers[u] = b
  return b

def set_buffer(u: Any, buf: Buffer) -> Buffer:
  """Register `buf` as the buffer of BUFFER UOp `u` (it lives as long as `u` does)."""
  if u.op not in (Ops.BUFFER, Ops.BUFFER_VIEW): raise TypeError(f"set_buffer: {u.op} is not a BUFFER")
  if buf.size != (u.arg if u.op is Ops.BUFFER else u.arg[0]) or buf.dtype is not u.dtype:
    raise ValueError(f"set_buffer: {buf!r} does not match the UOp's size/dtype ({u.arg}, {u.dtype})")
  _buffers[u] = buf
  return buf

def has_buffer(u: Any) -> bool: return u in _buffers

# ---- compilers ----

class Compiler:
  """Turns rendered source into a binary. `compile_cached` goes through the sqlite cache keyed by `cache_key`: the
  compiler's cachekey (its name, version and flags), the identity of the renderer that produced the source, the codegen
  flags (helpers.codegen_flags) and the source, so changing any of them misses the cache."""
  def __init__(self, cachekey: str | None = None):
    self.cachekey = cachekey
    self.compiles, self.cache_hits = 0, 0
  def compile(self, src: str) -> bytes: return src.encode()
  def cache_key(self, src: str, renderer: str = "") -> tuple[Any, ...]:
    """`renderer`: the identity of the renderer that made `src` (ProgramSpec.renderer); "" for hand-written source."""
    return (self.cachekey, renderer, codegen_flags(), src)
  def compile_cached(self, src: str, renderer: str = "") -> bytes:
    use_cache = self.cachekey is not None and CACHELEVEL >= 1
    key = self.cache_key(src, renderer) if use_cache else None
    if key is not None and (hit := diskcache_get("compile_cache", key)) is not None:
      self.cache_hits += 1
      return bytes(hit)
    lib = self.compile(src)
    self.compiles += 1
    if key is not None: diskcache_put("compile_cache", key, lib)
    return lib
  def disassemble(self, lib: bytes) -> str: return f"<{len(lib)} bytes>"
  def describe(self, lib: bytes) -> str:
    """A one-line report on a compiled kernel (registers, spills, ...), shown at DEBUG>=2; empty when there is none."""
    return ""

# ---- a compiled device ----

class Compiled:
  """A backend: `allocator`, `renderer` (a Renderer, or a zero-argument factory called on first use), `compiler`, and
  `runtime(name, lib)` returning a program called as
  `prg(*bufs, global_size=(1,1,1), local_size=(1,1,1), vals=(), wait=False) -> float | None` (seconds when wait)."""
  def __init__(self, device: str, allocator: Allocator, renderer: Renderer | Callable[[], Renderer] | None,
               compiler: Compiler | None, runtime: Callable[[str, bytes], Any]):
    self.device, self.allocator, self.compiler, self.runtime = device, allocator, compiler or Compiler(), runtime
    self._renderer = renderer
  @property
  def renderer(self) -> Renderer:
    if self._renderer is None: raise DeviceOpenError(f"device {self.device} has no renderer")
    # NOTE: a factory (not yet a Renderer) is called once, on first use
    if not isinstance(self._renderer, Renderer): self._renderer = self._renderer()
    return self._renderer
  @renderer.setter
  def renderer(self, r: Renderer) -> None: self._renderer = r
  def synchronize(self) -> None:
    """Wait for all queued work (host backends run synchronously)."""
  def __repr__(self) -> str: return f"<{type(self).__name__} {self.device}>"

__all__ = ["Device", "Buffer", "Allocator", "LRUAllocator", "MallocAllocator", "CompileOnlyAllocator", "Compiler",
           "Compiled", "CompileError", "DeviceOpenError", "NotComputedError", "buffer_of", "set_buffer", "has_buffer",
           "next_unique", "numbered", "KNOWN_DEVICES"]
