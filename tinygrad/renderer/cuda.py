"""CUDA C for the NV backend, on the C-style base: one C++ line per UOp, compiled by NVRTC (see
tinygrad/runtime/support/cuda_toolchain.py).

- Kernel: `extern "C" __global__ void __launch_bounds__(threads) name(T* data0, ..., int var0, ...)`: buffers in
  DEFINE_GLOBAL order, then the DEFINE_VARs by name (docs/ir.md section 3). The launch is a grid of `global_size`
  blocks of `local_size` threads.
- Grid: the lowerer numbers grid axes innermost first (tinygrad/codegen/lowerer.py grid_specials), so gidx0/lidx0 are
  the innermost and take x, the dimension with the largest limit: gidxN -> blockIdx.{x,y,z}, lidxN -> threadIdx.{x,y,z}.
- DEFINE_LOCAL -> `__shared__` (16-byte aligned), BARRIER -> `__syncthreads()`.
- half, bfloat16 and fp8 are the CUDA header types (cuda_fp16.h, cuda_bf16.h, cuda_fp8.h). A conversion into half rounds
  once, to nearest even, with the header intrinsic made for that pair of types; into bfloat16 and fp8 it goes through
  float32, as docs/ir.md section 5 defines it (and C, LLVM and the semantics table compute it); e4m3 saturates to
  +-448 and e5m2 overflows to inf, as tinygrad/dtype.py.
- The cases C++ leaves undefined have the IR's meaning (the CStyleLanguage base renders the guards: x/0, MIN/-1, shift
  amounts, saturating float -> int casts); MULACC of floats is fmaf (one rounding).
  Constants of these types are written as their bits. bfloat16 and fp8 arithmetic arrives already widened to float
  (codegen's pm_emulated_dtypes); half arithmetic is native, transcendentals of half go through float.
- Signed overflow: NVRTC has no -fwrapv, so int32/int64 ADD/SUB/MUL/NEG/MULACC (and uint16 products, promoted to int)
  whose operands' bounds do not prove the exact result in range are computed in the unsigned type and converted back:
  they wrap, as docs/ir.md section 5 says. Index math with proven bounds stays plain.
- MAX is NaN-propagating (a NaN operand is the result), as numpy's maximum; fmaxf is not (it drops NaN).
- Vectors: `tg_float4` etc. are structs of `T v[n]` aligned to min(n * itemsize, 16). A vector load/store is emitted
  only where its alignment is proven: the element index has a known power-of-two factor (from the index's ADD/MUL/SHL
  structure) that makes the byte offset a multiple of the alignment, and the buffer base is aligned (device
  allocations are 256-byte aligned; shared arrays are declared 16-byte aligned; for a buffer parameter the first line
  `// tinygrad-nv align: data0=16` states what the runtime must check at launch). Anything unproven is element by
  element: a misaligned vector access faults on a GPU, where a CPU forgives it.
- Limits per arch (`NV_ARCHS`): grid, block and static shared memory; a kernel over a limit is a clear error at render
  time, so COMPILE_ONLY catches it.
"""
from __future__ import annotations
import math
from dataclasses import dataclass
from typing import Any, Callable
import numpy as np
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp
from tinygrad.dtype import DType, PtrDType, dtypes, float_to_bf16, float_to_fp8
from tinygrad.renderer import Vectors
from tinygrad.renderer.tensor_cores import TensorCore, NV_TENSOR_CORES, tensor_core
from tinygrad.renderer.archs import NV_DEFAULT_ARCH, check_arch
from tinygrad.renderer.cstyle import CStyleLanguage, _Lines
from tinygrad.helpers import prod

# ---- per-arch limits ----

@dataclass(frozen=True)
class NVArch:
  name: str
  global_max: tuple[int, int, int] = (2**31 - 1, 65535, 65535)  # gridDim.x, .y, .z
  local_max: tuple[int, int, int] = (1024, 1024, 64)            # blockDim.x, .y, .z
  max_threads: int = 1024                                       # threads per block
  # NOTE: static __shared__ arrays are limited to 48 KiB per block on every arch; more needs dynamic shared memory with
  # an opt-in attribute (sm_80: 163 KiB, sm_89: 99 KiB, sm_90: 227 KiB), which this renderer does not use
  shared_max: int = 48 * 1024
  shared_optin: int = 48 * 1024

NV_ARCHS: dict[str, NVArch] = {
  "sm_80": NVArch("sm_80", shared_optin=163 * 1024),
  "sm_89": NVArch("sm_89", shared_optin=99 * 1024),
  "sm_90": NVArch("sm_90", shared_optin=227 * 1024),
}

class NVLimitError(ValueError):
  """A kernel does not fit the launch or memory limits of the NV arch it is rendered for."""

# ---- alignment proofs ----

def known_pow2(u: UOp, depth: int = 0) -> int:
  """log2 of a power of two that provably divides the integer value `u` (0 when nothing is known)."""
  if depth > 64: return 0
  if u.op is Ops.CONST and isinstance(u.arg, int) and not isinstance(u.arg, bool):
    return 62 if u.arg == 0 else (u.arg & -u.arg).bit_length() - 1
  if u.op in (Ops.ADD, Ops.SUB): return min(known_pow2(s, depth + 1) for s in u.src)
  if u.op is Ops.MUL: return min(62, sum(known_pow2(s, depth + 1) for s in u.src))
  if u.op is Ops.SHL and u.src[1].op is Ops.CONST: return min(62, known_pow2(u.src[0], depth + 1) + int(u.src[1].arg))
  if u.op is Ops.AND: return max(known_pow2(s, depth + 1) for s in u.src)
  if u.op is Ops.WHERE: return min(known_pow2(s, depth + 1) for s in u.src[1:])
  if u.op is Ops.CAST and dtypes.is_int(u.dtype) and dtypes.is_int(u.src[0].dtype):
    return known_pow2(u.src[0], depth + 1)
  return 0

def vector_align(dt: DType) -> int:
  """Byte alignment of the vector struct of `dt` (a vector dtype): the whole vector, at most 16 (one 128-bit access)."""
  return min(dt.itemsize, 16)

def _buffer_of(idx: UOp) -> UOp:
  b = idx.src[0]
  while b.op is Ops.AFTER: b = b.src[0]
  return b

def vector_access_aligned(idx: UOp) -> bool:
  """An INDEX with a vector pointer dtype: is every access through it aligned to its vector struct? The element offset's
  power-of-two factor must cover the alignment, and the buffer must be one whose base alignment is known (a global
  buffer, checked at launch, or a shared array)."""
  pt = idx.dtype
  assert isinstance(pt, PtrDType) and pt.v > 1
  if _buffer_of(idx).op not in (Ops.DEFINE_GLOBAL, Ops.DEFINE_LOCAL): return False
  need = vector_align(pt.base.vec(pt.v)) // pt.base.itemsize
  return (1 << min(known_pow2(idx.src[1]), 62)) % need == 0

# ---- signed overflow: NVRTC has no -fwrapv ----

_WRAPPING = (Ops.ADD, Ops.SUB, Ops.MUL, Ops.NEG, Ops.MULACC)
_SYM = {Ops.ADD: "+", Ops.SUB: "-", Ops.MUL: "*"}

def _bounds(u: UOp) -> tuple[int, int] | None:
  lo, hi = u.vmin, u.vmax
  return (lo, hi) if isinstance(lo, int) and isinstance(hi, int) else None

def _exact_range(u: UOp) -> tuple[int, int] | None:
  """The exact (unwrapped) range of an integer ADD/SUB/MUL/NEG/MULACC from its operands' bounds; None if unknown."""
  bs = [_bounds(s) for s in u.src]
  if any(b is None for b in bs): return None
  if u.op is Ops.NEG: return -bs[0][1], -bs[0][0]  # type: ignore[index]
  (a0, a1), (b0, b1) = bs[0], bs[1]  # type: ignore[misc]
  if u.op is Ops.ADD: return a0 + b0, a1 + b1
  if u.op is Ops.SUB: return a0 - b1, a1 - b0
  corners = (a0 * b0, a0 * b1, a1 * b0, a1 * b1)
  lo, hi = min(corners), max(corners)
  if u.op is Ops.MULACC: return lo + bs[2][0], hi + bs[2][1]  # type: ignore[index]
  return lo, hi

def may_overflow_signed(u: UOp) -> bool:
  """Would C++ compute this integer ADD/SUB/MUL/NEG/MULACC with a signed overflow (undefined behaviour, which NVRTC
  has no -fwrapv to define)? int32/int64 arithmetic whose exact range leaves the type; and uint16 products, which C++
  promotes to int (65535*65535 overflows it). int8/int16/uint8 compute in int without overflow and wrap on the
  conversion back; uint32/uint64 wrap by definition."""
  dt = u.dtype
  if u.op not in _WRAPPING or dt.count > 1 or not dtypes.is_int(dt) or dt is dtypes.bool: return False
  rng = _exact_range(u)
  if dt in (dtypes.int32, dtypes.int64):
    return rng is None or not (dtypes.min(dt) <= rng[0] and rng[1] <= dtypes.max(dt))
  if dt is dtypes.uint16 and u.op in (Ops.MUL, Ops.MULACC): return rng is None or rng[1] > 2**31 - 1
  return False

# ---- the renderer ----

_SHORT = {dtypes.bool: "bool", dtypes.int8: "char", dtypes.uint8: "uchar", dtypes.int16: "short",
          dtypes.uint16: "ushort", dtypes.int32: "int", dtypes.uint32: "uint", dtypes.int64: "long",
          dtypes.uint64: "ulong", dtypes.float16: "half", dtypes.bfloat16: "bf16", dtypes.float32: "float",
          dtypes.float64: "double", dtypes.fp8e4m3: "fp8e4m3", dtypes.fp8e5m2: "fp8e5m2"}
_FP8 = {dtypes.fp8e4m3: ("e4m3", "__NV_SATFINITE", "__NV_E4M3"), dtypes.fp8e5m2: ("e5m2", "__NV_NOSAT", "__NV_E5M2")}

# NOTE: the e4m3 conversion saturates (no infinity in e4m3; tinygrad/dtype.py clamps to +-448), e5m2 does not (it has
# infinity, and rounds 61440 and above to it)
# NOTE: one helper per line: merge_kernels (cuda_toolchain.py) dedupes the prefix of several kernels line by line
def _fp8_helpers(k: str, sat: str, kind: str) -> str:
  t, fi = f"__nv_fp8_{k}", "__device__ __forceinline__"
  return "\n".join([
    f"{fi} {t} tg_fp8{k}_bits(unsigned char b) {{ {t} r; r.__x = b; return r; }}",
    f"{fi} {t} tg_float_to_fp8{k}(float x) {{ return tg_fp8{k}_bits(__nv_cvt_float_to_fp8(x, {sat}, {kind})); }}",
    f"{fi} float tg_fp8{k}_to_float({t} x) {{ __half_raw h = __nv_cvt_fp8_to_halfraw(x.__x, {kind}); "
    "return __half2float(__ushort_as_half(h.x)); }"])
_FP8_HELPERS = {dt: _fp8_helpers(*v) for dt, v in _FP8.items()}
_BITCAST = ("template <class T, class F> __device__ __forceinline__ T tg_bitcast(F f) { "
            "static_assert(sizeof(T) == sizeof(F), \"bitcast between sizes\"); T t; memcpy(&t, &f, sizeof(T)); "
            "return t; }")

# the integer types each conversion intrinsic takes: (half suffix, argument cast)
_INT_TO = {dtypes.bool: ("int", "int"), dtypes.int8: ("int", "int"), dtypes.int16: ("int", "int"),
           dtypes.int32: ("int", "int"), dtypes.uint8: ("uint", "unsigned int"),
           dtypes.uint16: ("uint", "unsigned int"), dtypes.uint32: ("uint", "unsigned int"),
           dtypes.int64: ("ll", "long long"), dtypes.uint64: ("ull", "unsigned long long")}

def _mma_fn(tc: TensorCore) -> str: return "tg_" + tc.name.replace(".", "_")

class CUDARenderer(CStyleLanguage):
  """CUDA C for one NV arch (sm_80, sm_89, sm_90)."""
  device = "NV"
  has_local = True
  has_shared = True
  has_threads = False
  # NOTE: a GPU has no integer divider: a division by a constant is cheaper as a multiply and shifts
  div_by_multiply = (dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32)
  kernel_prefix = 'extern "C" __global__ void'
  infinity = "__int_as_float(0x7f800000)"
  nan = "__int_as_float(0x7fc00000)"
  type_map = {dtypes.bool: "bool", dtypes.int8: "signed char", dtypes.uint8: "unsigned char", dtypes.int16: "short",
              dtypes.uint16: "unsigned short", dtypes.int32: "int", dtypes.uint32: "unsigned int",
              dtypes.int64: "long long", dtypes.uint64: "unsigned long long", dtypes.float16: "half",
              dtypes.float32: "float", dtypes.float64: "double", dtypes.bfloat16: "__nv_bfloat16",
              dtypes.fp8e4m3: "__nv_fp8_e4m3", dtypes.fp8e5m2: "__nv_fp8_e5m2"}
  math_fns = {Ops.SQRT: "sqrt", Ops.EXP2: "exp2", Ops.LOG2: "log2", Ops.SIN: "sin", Ops.TRUNC: "trunc", Ops.POW: "pow"}
  # NOTE: the tg_ vector structs have no arithmetic: only loads and stores are packed into vectors (of any dtype)
  vectors = {dt: Vectors((8, 4, 2)) for dt in type_map}

  def __init__(self, arch: str = NV_DEFAULT_ARCH):
    self.arch = check_arch(arch)
    lim = NV_ARCHS[self.arch]
    self.limits = lim
    self.global_max, self.local_max, self.shared_max = lim.global_max, lim.local_max, lim.shared_max
    self.local_max_total = lim.max_threads
    self.tensor_cores = NV_TENSOR_CORES[self.arch]
  def __reduce__(self) -> tuple[Any, ...]: return (type(self), (self.arch,))
  def __repr__(self) -> str: return f"CUDARenderer({self.arch!r})"

  def supports_op(self, op: Ops, dtype: DType) -> bool:
    return super().supports_op(op, dtype) or (dtype.count == 1 and op in self.math_fns)

  # ---- types and constants ----
  def vector_name(self, dt: DType) -> str:
    s = _SHORT[dt.scalar()]
    return f"tg_{s}{'x' if s[-1].isdigit() else ''}{dt.count}"
  def render_vector(self, dt: DType, elems: list[str]) -> str:
    return f"{self.vector_name(dt)}{{{{{', '.join(elems)}}}}}"
  def _render_const(self, x: object, dt: DType) -> str:
    # NOTE: the base's render_const puts a negative one in parentheses (`a-(-inf)`, never `a--inf`)
    if dt.count > 1: return self.render_vector(dt, [self.render_const(x, dt.scalar())] * dt.count)
    if dt is dtypes.bool: return "true" if x else "false"
    if dt is dtypes.float64 and isinstance(x, float) and not math.isfinite(x):
      return "__longlong_as_double(0x7ff8000000000000ll)" if math.isnan(x) else \
        f"{'-' if x < 0 else ''}__longlong_as_double(0x7ff0000000000000ll)"
    # NOTE: half, bfloat16 and fp8 constants as their bits: exact, with no rounding through float on the way
    if dt is dtypes.float16:
      return f"__ushort_as_half({int(np.array(float(x)).astype(np.float16).view(np.uint16)):#06x}u)"  # type: ignore[arg-type]
    if dt is dtypes.bfloat16: return f"__ushort_as_bfloat16({float_to_bf16(float(x)):#06x}u)"  # type: ignore[arg-type]
    if dt in _FP8: return f"tg_fp8{_FP8[dt][0]}_bits({float_to_fp8(float(x), dt):#04x}u)"  # type: ignore[arg-type]
    return super()._render_const(x, dt)

  def _as_float(self, x: str, src: DType) -> str:
    """`x` of an emulated type (half, bfloat16, fp8) as an exact float expression."""
    if src is dtypes.float16: return f"__half2float({x})"
    if src is dtypes.bfloat16: return f"__bfloat162float({x})"
    if src in _FP8: return f"tg_fp8{_FP8[src][0]}_to_float({x})"
    raise AssertionError(src)

  def render_cast(self, x: str, src: DType, dt: DType) -> str:
    if dt.count > 1 or src.count > 1: raise NotImplementedError(f"CUDARenderer: vector cast {src} -> {dt}")
    if src is dt: return x
    emu = (dtypes.float16, dtypes.bfloat16, *_FP8)
    if dt is dtypes.bool: return f"({self._as_float(x, src) if src in emu else x}!=0)"
    # NOTE: into bfloat16 and fp8 every conversion goes through float32 (docs/ir.md section 5: they are float32 values
    # rounded to the format, as C, LLVM and the semantics table compute them); into half it rounds once
    if dt is dtypes.bfloat16: return f"__float2bfloat16_rn({self._as_float(x, src) if src in emu else f'(float)({x})'})"
    if dt in _FP8:
      return f"tg_float_to_fp8{_FP8[dt][0]}({self._as_float(x, src) if src in emu else f'(float)({x})'})"
    if dt is dtypes.float16:
      if src is dtypes.float32: return f"__float2half_rn({x})"
      if src is dtypes.float64: return f"__double2half({x})"
      if src in emu: return f"__float2half_rn({self._as_float(x, src)})"  # NOTE: exact in float, one rounding
      suffix, arg = _INT_TO[src]
      return f"__{suffix}2half_rn(({arg})({x}))"
    if src in emu: return f"(({self.type_map[dt]})({self._as_float(x, src)}))"
    return f"(({self.type_map[dt]})({x}))"
  def render_bitcast(self, x: str, src: DType, dt: DType) -> str:
    # NOTE: a byte read as bool is byte != 0 (a bool holding 2 would be undefined)
    if dt is dtypes.bool: return f"(tg_bitcast<unsigned char>({x})!=0)"
    return f"tg_bitcast<{self.render_dtype(dt)}>({x})"
  def render_float_value(self, x: str, src: DType) -> str:
    return self._as_float(x, src) if src.scalar() in (dtypes.float16, dtypes.bfloat16, *_FP8) else x
  def render_fma(self, a: str, b: str, c: str, dt: DType) -> str:
    if dt.scalar() is dtypes.float64: return f"fma({a}, {b}, {c})"
    if dt.scalar() is dtypes.float32: return f"fmaf({a}, {b}, {c})"
    # NOTE: half fuses in float and rounds that to half (the semantics table's definition)
    return f"__float2half_rn(fmaf({self._as_float(a, dt)}, {self._as_float(b, dt)}, {self._as_float(c, dt)}))"

  # ---- ops ----
  def render_special(self, u: UOp) -> str:
    kind, dim = u.arg[:-1], u.arg[-1]
    if kind not in ("gidx", "lidx") or dim not in "012":
      raise NotImplementedError(f"CUDARenderer: SPECIAL {u.arg!r} (NV has gidx0-2 and lidx0-2, no core_id)")
    return f"((int){'blockIdx' if kind == 'gidx' else 'threadIdx'}.{'xyz'[int(dim)]})"
  def render_define(self, u: UOp) -> str:
    t = self.render_dtype(u.dtype.base)
    return f"__shared__ __align__(16) {t}" if u.op is Ops.DEFINE_LOCAL else t
  def render_barrier(self) -> str: return "__syncthreads();"

  def render_wrapping(self, u: UOp, r: dict[UOp, str]) -> str:
    """Integer arithmetic that may overflow, computed in the unsigned type of its width (which wraps by definition) and
    converted back (modular in NVRTC, and in C++20 by definition): the IR's wrapping (docs/ir.md section 5)."""
    dt, ut = u.dtype, self.render_unsigned_of(u.dtype)
    if u.op is Ops.NEG: return self.render_wrapping_neg(r[u.src[0]], dt)
    a, b = (f"({ut})({r[s]})" for s in u.src[:2])
    ex = f"{a}*{b}+({ut})({r[u.src[2]]})" if u.op is Ops.MULACC else f"{a}{_SYM[u.op]}{b}"
    return f"(({self.render_dtype(dt)})({ex}))"

  def render_expr(self, u: UOp, r: dict[UOp, str]) -> str:
    op, dt, src = u.op, u.dtype, u.src
    if may_overflow_signed(u): return self.render_wrapping(u, r)
    if op is Ops.GEP and len(u.arg) == 1: return f"{r[src[0]]}.v[{u.arg[0]}]"
    if op is Ops.GEP: return self.render_vector(dt, [f"{r[src[0]]}.v[{i}]" for i in u.arg])
    if op is Ops.RECIPROCAL: return f"({self.render_const(1.0, dt)}/{r[src[0]]})"
    if op is Ops.WMMA: return f"{_mma_fn(tensor_core(u.arg[0]))}({', '.join(r[s] for s in src)})"
    if op in self.math_fns:
      if dt.count > 1: raise NotImplementedError(f"CUDARenderer: vector {op} ({dt}) must be devectorized first")
      fn = self.math_fns[op]
      if dt is dtypes.float64: return f"{fn}({', '.join(r[s] for s in src)})"
      if dt is dtypes.float32: return f"{fn}f({', '.join(r[s] for s in src)})"
      if dt is dtypes.float16: return f"__float2half_rn({fn}f({', '.join(self._as_float(r[s], dt) for s in src)}))"
      raise NotImplementedError(f"CUDARenderer: {op} on {dt} (bfloat16/fp8 math is widened to float by codegen)")
    return super().render_expr(u, r)

  # ---- memory access: vectors only where aligned ----
  def _ptr(self, st: _Lines, idx: UOp) -> str:
    p = f"({st.r[idx.src[0]]}+{st.r[idx.src[1]]})"
    if isinstance(idx.dtype, PtrDType) and idx.dtype.v > 1 and vector_access_aligned(idx):
      return f"(({self.vector_name(idx.dtype.base.vec(idx.dtype.v))}*){p})"
    return p
  def _lanes(self, st: _Lines, idx: UOp) -> list[str] | None:
    """The element pointers of a vector access that is not proven aligned (None for a scalar or aligned access)."""
    pt = idx.dtype
    if not isinstance(pt, PtrDType) or pt.v == 1 or vector_access_aligned(idx): return None
    return [f"{st.r[idx]}[{i}]" for i in range(pt.v)]
  def _load(self, st: _Lines, u: UOp) -> None:
    idx = u.src[0]
    if (lanes := self._lanes(st, idx)) is None: return CStyleLanguage._load(self, st, u)
    st.r[u] = st.fresh("val")
    expr = self.render_vector(u.dtype, lanes)
    if len(u.src) > 1: expr = f"({st.r[idx.src[2]]}?{expr}:{st.r[u.src[1]]})"
    st.emit(f"{self.render_dtype(u.dtype)} {st.r[u]} = {expr};")
  def _store(self, st: _Lines, u: UOp) -> None:
    if (lanes := self._lanes(st, u.src[0])) is None:
      st.emit(f"*{st.r[u.src[0]]} = {st.r[u.src[1]]};")
      return
    for i, lane in enumerate(lanes): st.emit(f"{lane} = ({st.r[u.src[1]]}).v[{i}];")
  _handlers: dict[Ops, Callable[..., None]] = {**CStyleLanguage._handlers, Ops.LOAD: _load, Ops.STORE: _store}

  # ---- the kernel ----
  def check_limits(self, uops: list[UOp], name: str) -> None:
    """Grid, block and shared memory against this arch's limits (symbolic sizes at their upper bound)."""
    lim, where = self.limits, f"NV {self.arch} kernel {name}"
    threads = 1
    for u in uops:
      if u.op is not Ops.SPECIAL: continue
      kind, dim, size = u.arg[:-1], int(u.arg[-1]), int(u.src[0].vmax)
      if kind == "gidx" and size > lim.global_max[dim]:
        raise NVLimitError(f"{where}: grid dimension {u.arg} (blockIdx.{'xyz'[dim]}) is {size} blocks, over the limit "
                           f"{lim.global_max[dim]} (grid limits {lim.global_max}); split the axis or make it a loop")
      if kind == "lidx":
        if size > lim.local_max[dim]:
          raise NVLimitError(f"{where}: block dimension {u.arg} (threadIdx.{'xyz'[dim]}) is {size} threads, over the "
                             f"limit {lim.local_max[dim]} (block limits {lim.local_max})")
        threads *= size
    if threads > lim.max_threads:
      raise NVLimitError(f"{where}: {threads} threads per block, over the limit {lim.max_threads}")
    smem = sum(u.dtype.nbytes() for u in uops if u.op is Ops.DEFINE_LOCAL and isinstance(u.dtype, PtrDType))
    if smem > lim.shared_max:
      raise NVLimitError(f"{where}: {smem} bytes of shared memory (DEFINE_LOCAL), over the {lim.shared_max}-byte limit "
                         f"of static __shared__ memory per block on {self.arch}")

  def render_prefix(self, uops: list[UOp]) -> list[str]:
    dts = {u.dtype.scalar() for u in uops} | {u.dtype.base.scalar() for u in uops if isinstance(u.dtype, PtrDType)}
    lines = []
    if dtypes.float16 in dts or dts & set(_FP8): lines.append("#include <cuda_fp16.h>")
    if dtypes.bfloat16 in dts: lines.append("#include <cuda_bf16.h>")
    if dts & set(_FP8): lines.append("#include <cuda_fp8.h>")
    lines += [_FP8_HELPERS[d] for d in _FP8 if d in dts]
    if any(u.op is Ops.BITCAST for u in uops): lines.append(_BITCAST)
    wmmas = sorted({u.arg[0] for u in uops if u.op is Ops.WMMA})
    # NOTE: a DEFINE_REG of a vector (a tensor core accumulator) is a pointer whose base is the vector
    vecs = {(u.dtype.base.vec(u.dtype.v) if u.dtype.v > 1 else u.dtype.base) if isinstance(u.dtype, PtrDType)
            else u.dtype for u in uops}
    for d in sorted((d for d in vecs if d.count > 1), key=lambda d: (d.scalar().priority, d.count)):
      t = self.type_map[d.scalar()]
      lines.append(f"struct __align__({vector_align(d)}) {self.vector_name(d)} {{ {t} v[{d.count}]; }};")
    return lines + [self.render_mma(tensor_core(n)) for n in wmmas]

  def render_mma(self, tc: TensorCore) -> str:
    """One `mma.sync` as an inline-PTX function of the fragment structs: A, B (and a half C/D) are packed two halves
    (or four fp8) per 32-bit register, element 0 in the low bits (PTX: "elements low to high")."""
    ea, eb, ec = tc.elements_per_thread
    ta, tb, tcv = (self.vector_name(d) for d in (tc.dtype_in.vec(ea), tc.dtype_in.vec(eb), tc.dtype_out.vec(ec)))
    ra, rb = ea * tc.dtype_in.itemsize // 4, eb * tc.dtype_in.itemsize // 4
    rc = ec * tc.dtype_out.itemsize // 4
    regs = lambda first, n: "{" + ", ".join(f"%{first + i}" for i in range(n)) + "}"  # noqa: E731
    ins = ", ".join([f'"r"(A[{i}])' for i in range(ra)] + [f'"r"(B[{i}])' for i in range(rb)])
    half_acc = tc.dtype_out.itemsize == 2
    outs = ", ".join(f'"+r"(C[{i}])' if half_acc else f'"+f"(c.v[{i}])' for i in range(rc))
    asm = (f"mma.sync.aligned.{tc.name.split('.', 1)[1].replace('.', '.row.col.', 1)} {regs(0, rc)}, {regs(rc, ra)}, "
           f"{regs(rc + ra, rb)}, {regs(0, rc)};")
    cptr = "unsigned *C = (unsigned*)&c; " if half_acc else ""
    return (f"__device__ __forceinline__ {tcv} {_mma_fn(tc)}({ta} a, {tb} b, {tcv} c) {{ "
            f"const unsigned *A = (const unsigned*)&a, *B = (const unsigned*)&b; {cptr}"
            f'asm volatile("{asm}" : {outs} : {ins}); return c; }}')

  def render(self, uops: list[UOp], name: str = "kernel") -> str:
    self.check_limits(uops, name)
    threads = prod(int(u.src[0].vmax) for u in uops if u.op is Ops.SPECIAL and u.arg.startswith("lidx"))
    align: dict[str, int] = {}
    for u in uops:
      if u.op is Ops.INDEX and isinstance(u.dtype, PtrDType) and u.dtype.v > 1 and vector_access_aligned(u):
        if (b := _buffer_of(u)).op is Ops.DEFINE_GLOBAL:
          align[f"data{b.arg}"] = max(align.get(f"data{b.arg}", 1), vector_align(u.dtype.base.vec(u.dtype.v)))
    src = super().render(uops, name)
    head = f"{self.kernel_prefix} {name}("
    if head not in src: raise AssertionError(f"CUDARenderer: kernel line {head!r} not found")
    src = src.replace(head, f"{self.kernel_prefix} __launch_bounds__({threads}) {name}(", 1)
    if align: src = "// tinygrad-nv align: " + " ".join(f"{k}={v}" for k, v in sorted(align.items())) + "\n" + src
    return src

__all__ = ["CUDARenderer", "NV_ARCHS", "NVArch", "NVLimitError", "vector_access_aligned", "known_pow2",
           "may_overflow_signed"]
