"""Rendered CUDA kernels compiled and run on the host as C++ (g++), to check what the CUDA text means on a machine
without a GPU.

`HOST_SHIM` is a header of ours that stands in for the CUDA headers: `__global__`/`__device__` vanish, blockIdx and
threadIdx are globals a grid loop sets, and half, bfloat16 and fp8 are host types whose conversions round once, to
nearest even, as the CUDA Math API documents (e4m3 with __NV_SATFINITE clamps to +-448, __NV_NOSAT e5m2 overflows to
inf, bfloat16 NaN is 0x7fff); half arithmetic rounds every operation to half. Kernels with `__shared__` or
`__syncthreads()` are refused: one thread at a time is only a faithful schedule for kernels whose threads do not talk;
so are tensor-core kernels (a warp-wide `mma.sync`, checked instead by the PYTHON emulator under EMULATE=NV).

What it does not model: the GPU's libm (exp2f, sinf, ... are the host's), fused multiply-add contraction (NVRTC's
fmad; here -ffp-contract=off), and out-of-range float -> int conversions (the host's instruction decides).

`build_host_library(kernels)` compiles several kernels into one shared object (prefix lines deduplicated); each kernel
`k` gets a launcher `tg_launch_k(void** params, const unsigned* grid, const unsigned* block)` taking its arguments as
cuLaunchKernel does (so a fake libcuda can launch it, tests/nv/fake_libcuda.c).
"""
from __future__ import annotations
import ctypes, os, shutil, subprocess, tempfile
from typing import Any, Sequence
from tinygrad.device import CompileError, DeviceOpenError, numbered
from tinygrad.runtime.support.cuda_toolchain import split_kernel

HOST_SHIM = r"""
// tinygrad host shim: a rendered CUDA kernel (no __shared__, no __syncthreads) compiled as host C++17
#pragma once
#include <cstdint>
#include <cstring>
#include <cmath>
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __align__(n) alignas(n)
#define __shared__ TG_HOST_SHIM_HAS_NO_SHARED_MEMORY
#define __syncthreads() TG_HOST_SHIM_HAS_NO_BARRIERS
struct tg_uint3 { unsigned int x, y, z; };
static tg_uint3 blockIdx, threadIdx;
static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline double __longlong_as_double(long long i) { double d; std::memcpy(&d, &i, 8); return d; }

// x rounded once, to nearest even, to p significant bits with 2^emin the smallest normal (below it the quantum stays
// 2^(emin-p+1)); long double holds every int64 and double exactly, so no source is rounded twice
static inline long double tg_round(long double x, int p, int emin) {
  if (!std::isfinite(x) || x == 0) return x;
  int e; std::frexp(x, &e);
  int lead = e - 1 < emin ? emin : e - 1;
  long double q = std::ldexp(1.0L, lead - (p - 1));
  return std::nearbyint(x / q) * q;
}

// ---- half: binary16, every operation rounded to half ----
struct __half_raw { unsigned short x; };
struct __half { _Float16 v; };
typedef __half half;
static inline __half tg_half(long double x) {
  long double r = tg_round(x, 11, -14);
  __half h; h.v = std::fabs(r) > 65504.0L ? (_Float16)(r < 0 ? -INFINITY : INFINITY) : (_Float16)(float)r;
  return h;
}
static inline float __half2float(__half h) { return (float)h.v; }
static inline __half __float2half_rn(float x) { return tg_half(x); }
static inline __half __double2half(double x) { return tg_half(x); }
static inline __half __int2half_rn(int x) { return tg_half(x); }
static inline __half __uint2half_rn(unsigned int x) { return tg_half(x); }
static inline __half __ll2half_rn(long long x) { return tg_half(x); }
static inline __half __ull2half_rn(unsigned long long x) { return tg_half(x); }
static inline __half __ushort_as_half(unsigned short b) { __half h; std::memcpy(&h, &b, 2); return h; }
static inline long double tg_ld(__half a) { return (long double)(float)a.v; }
static inline __half operator+(__half a, __half b) { return tg_half(tg_ld(a) + tg_ld(b)); }
static inline __half operator-(__half a, __half b) { return tg_half(tg_ld(a) - tg_ld(b)); }
static inline __half operator*(__half a, __half b) { return tg_half(tg_ld(a) * tg_ld(b)); }
static inline __half operator/(__half a, __half b) { return tg_half(tg_ld(a) / tg_ld(b)); }
static inline __half operator-(__half a) { __half h; h.v = -a.v; return h; }
static inline bool operator<(__half a, __half b) { return tg_ld(a) < tg_ld(b); }
static inline bool operator>(__half a, __half b) { return tg_ld(a) > tg_ld(b); }
static inline bool operator<=(__half a, __half b) { return tg_ld(a) <= tg_ld(b); }
static inline bool operator>=(__half a, __half b) { return tg_ld(a) >= tg_ld(b); }
static inline bool operator==(__half a, __half b) { return tg_ld(a) == tg_ld(b); }
static inline bool operator!=(__half a, __half b) { return tg_ld(a) != tg_ld(b); }

// ---- bfloat16 ----
struct __nv_bfloat16 { unsigned short __x; };
static inline __nv_bfloat16 tg_bf16(long double x) {
  __nv_bfloat16 b;
  if (x != x) { b.__x = 0x7fff; return b; }
  long double r = tg_round(x, 8, -126);
  float f = std::fabs(r) >= 0x1p128L ? (r < 0 ? -INFINITY : INFINITY) : (float)r;
  unsigned int u; std::memcpy(&u, &f, 4);
  b.__x = (unsigned short)(u >> 16);
  return b;
}
static inline float __bfloat162float(__nv_bfloat16 b) {
  unsigned int u = (unsigned int)b.__x << 16; float f; std::memcpy(&f, &u, 4); return f;
}
static inline __nv_bfloat16 __float2bfloat16_rn(float x) { return tg_bf16(x); }
static inline __nv_bfloat16 __double2bfloat16(double x) { return tg_bf16(x); }
static inline __nv_bfloat16 __int2bfloat16_rn(int x) { return tg_bf16(x); }
static inline __nv_bfloat16 __uint2bfloat16_rn(unsigned int x) { return tg_bf16(x); }
static inline __nv_bfloat16 __ll2bfloat16_rn(long long x) { return tg_bf16(x); }
static inline __nv_bfloat16 __ull2bfloat16_rn(unsigned long long x) { return tg_bf16(x); }
static inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short b) { __nv_bfloat16 r; r.__x = b; return r; }

// ---- fp8 (OCP e4m3 and e5m2) ----
typedef unsigned char __nv_fp8_storage_t;
enum __nv_saturation_t { __NV_NOSAT, __NV_SATFINITE };
enum __nv_fp8_interpretation_t { __NV_E4M3, __NV_E5M2 };
struct __nv_fp8_e4m3 { __nv_fp8_storage_t __x; };
struct __nv_fp8_e5m2 { __nv_fp8_storage_t __x; };
static inline __nv_fp8_storage_t tg_fp8(long double x, __nv_saturation_t sat, __nv_fp8_interpretation_t k) {
  const bool e4 = k == __NV_E4M3;
  const int mb = e4 ? 3 : 2, bias = e4 ? 7 : 15, emin = 1 - bias;
  const long double mx = e4 ? 448.0L : 57344.0L;
  if (x != x) return 0x7f;
  const unsigned char sign = std::signbit(x) ? 0x80 : 0;
  long double r = tg_round(std::fabs(x), mb + 1, emin);
  if (r > mx) {
    if (sat == __NV_SATFINITE) r = mx;
    else return (unsigned char)(sign | (e4 ? 0x7f : 0x7c));
  }
  if (r == 0) return sign;
  int e; std::frexp(r, &e);
  if (e - 1 < emin) return (unsigned char)(sign | (unsigned)std::ldexp(r, mb - emin));
  unsigned m = (unsigned)((std::ldexp(r, 1 - e) - 1) * (1 << mb));
  return (unsigned char)(sign | (unsigned)(e - 1 + bias) << mb | m);
}
static inline long double tg_fp8_value(unsigned char b, __nv_fp8_interpretation_t k) {
  const bool e4 = k == __NV_E4M3;
  const int mb = e4 ? 3 : 2, bias = e4 ? 7 : 15;
  const int e = (b >> mb) & ((1 << (7 - mb)) - 1), m = b & ((1 << mb) - 1);
  long double v;
  if (e4 && e == 15 && m == 7) v = NAN;
  else if (!e4 && e == 31) v = m ? NAN : INFINITY;
  else if (e == 0) v = std::ldexp((long double)m, 1 - bias - mb);
  else v = std::ldexp(1.0L + std::ldexp((long double)m, -mb), e - bias);
  return (b & 0x80) ? -v : v;
}
typedef __nv_saturation_t tg_sat;
typedef __nv_fp8_interpretation_t tg_kind;
static inline __nv_fp8_storage_t __nv_cvt_float_to_fp8(float x, tg_sat s, tg_kind k) { return tg_fp8(x, s, k); }
static inline __nv_fp8_storage_t __nv_cvt_double_to_fp8(double x, tg_sat s, tg_kind k) { return tg_fp8(x, s, k); }
static inline __half_raw __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t b, __nv_fp8_interpretation_t k) {
  __half h = tg_half(tg_fp8_value(b, k)); __half_raw r; std::memcpy(&r.x, &h, 2); return r;
}
"""

# the header names a rendered kernel includes; each becomes a file that includes the shim
CUDA_HEADERS = ("cuda_fp16.h", "cuda_bf16.h", "cuda_fp8.h")
# NOTE: -fwrapv although NVRTC has none: g++ 12 at -O2 -march=native miscompiles well-defined unsigned reductions
# converted back to int (`a = (int)((unsigned)a + (unsigned)d[i])` over 4 accumulators gives a wrong sum without it).
# That the CUDA text never relies on wrapping signed arithmetic is checked by the trapping build instead.
# NOTE: no -march=native: on an AVX512-FP16 host, g++ 12 emits masked vmovsh forms binutils 2.40 cannot assemble (found
# by fuzz: a float16 kernel's host build failed); the shim checks what a kernel computes, not how fast
HOST_CXXFLAGS = ("-std=c++17", "-O2", "-fPIC", "-shared", "-fwrapv", "-fno-math-errno", "-ffp-contract=off", "-w")
# without -fwrapv, a signed overflow or an out-of-range shift executes a trap instruction (SIGILL): run such a build in
# a subprocess
TRAP_UB_CXXFLAGS = ("-fno-wrapv", "-fsanitize=signed-integer-overflow,shift", "-fsanitize-undefined-trap-on-error")

class HostShimError(RuntimeError):
  """A kernel the host shim cannot run faithfully (shared memory, barriers, warp-wide tensor-core instructions)."""

def host_refusal(src: str) -> str | None:
  """Why the shim cannot run this CUDA source, or None when it can."""
  if "__shared__" in src: return "it uses __shared__ memory (threads of a block communicate)"
  if "__syncthreads" in src: return "it has barriers (__syncthreads)"
  # NOTE: an mma.sync is one instruction of a whole warp (each lane holds part of the tile): PTX, not host code
  if "mma.sync" in src: return "it uses tensor cores (mma.sync: the lanes of a warp compute one tile together)"
  return None

def launcher(name: str, params: Sequence[tuple[str, str]]) -> str:
  """`tg_launch_<name>(void** params, const unsigned* grid, const unsigned* block)`: params as cuLaunchKernel takes
  them (one pointer to each argument's value), the whole grid run one thread at a time."""
  args = ", ".join(f"*({t}*)p[{i}]" for i, (t, _) in enumerate(params))
  return (f'extern "C" void tg_launch_{name}(void** p, const unsigned* g, const unsigned* l) {{\n'
          "  for (unsigned bz = 0; bz < g[2]; bz++) for (unsigned by = 0; by < g[1]; by++)\n"
          "  for (unsigned bx = 0; bx < g[0]; bx++) for (unsigned tz = 0; tz < l[2]; tz++)\n"
          "  for (unsigned ty = 0; ty < l[1]; ty++) for (unsigned tx = 0; tx < l[0]; tx++) {\n"
          "    blockIdx = {bx, by, bz}; threadIdx = {tx, ty, tz};\n"
          f"    {name}({args});\n  }}\n}}\n")

def find_cxx() -> str:
  for c in ("g++", "c++", "clang++"):
    if (p := shutil.which(c)) is not None: return p
  raise DeviceOpenError("the host CUDA shim needs a C++ compiler (g++, c++ or clang++ on PATH): apt-get install g++")

def merged_source(srcs: Sequence[str]) -> tuple[str, list[str]]:
  """One C++ translation unit for several rendered kernels (distinct names): prefix lines once each, every kernel
  body, a launcher per kernel. Returns (source, kernel names)."""
  prefix: dict[str, None] = {}
  bodies, names = [], []
  for src in srcs:
    if (why := host_refusal(src)) is not None: raise HostShimError(f"the host shim cannot run this kernel: {why}")
    pre, body, name, params = split_kernel(src)
    if name in names: raise ValueError(f"merged_source: two kernels named {name}; rename one (rename_kernel)")
    prefix.update(dict.fromkeys(pre))
    bodies.append(body + "\n" + launcher(name, params))
    names.append(name)
  return "\n".join([*prefix, *bodies]), names

def build_host_library(srcs: Sequence[str], cxx: str | None = None, trap_ub: bool = False) -> bytes:
  """A shared object (bytes) with every kernel and its launcher `tg_launch_<name>`. `trap_ub`: signed integer overflow
  and out-of-range shifts trap (SIGILL) instead of being whatever the optimizer makes of them (TRAP_UB_CXXFLAGS)."""
  text, _ = merged_source(srcs)
  with tempfile.TemporaryDirectory(prefix="tinygrad-cudahost-") as d:
    with open(os.path.join(d, "tg_cuda_host_shim.h"), "w") as f: f.write(HOST_SHIM)
    for h in CUDA_HEADERS:
      with open(os.path.join(d, h), "w") as f: f.write('#include "tg_cuda_host_shim.h"\n')
    out = os.path.join(d, "kernels.so")
    cmd = [cxx or find_cxx(), *HOST_CXXFLAGS, *(TRAP_UB_CXXFLAGS if trap_ub else ()), "-I", d, "-include",
           os.path.join(d, "tg_cuda_host_shim.h"), "-x", "c++", "-", "-o", out]
    proc = subprocess.run(cmd, input=text.encode(), capture_output=True)
    if proc.returncode != 0:
      raise CompileError(f"host C++ compile of CUDA kernels failed (exit {proc.returncode}):\n"
                         f"{proc.stderr.decode(errors='replace')[:6000]}\n---- source ----\n{numbered(text)}")
    with open(out, "rb") as f: return f.read()

class HostLibrary:
  """A loaded host build; `run(name, bufs, vals, global_size, local_size)` runs one kernel's whole grid, one thread at a
  time, with the buffer addresses and then the variable values (the kernel's parameter order)."""
  def __init__(self, lib: bytes):
    with tempfile.NamedTemporaryFile(prefix="tinygrad-cudahost-", suffix=".so", delete=False) as f:
      f.write(lib)
      path = f.name
    try: self.lib = ctypes.CDLL(path)
    finally: os.unlink(path)
  def run(self, name: str, bufs: Sequence[int], vals: Sequence[int], global_size: Sequence[int],
          local_size: Sequence[int]) -> None:
    fn: Any = getattr(self.lib, f"tg_launch_{name}")
    fn.restype = None
    cargs = [ctypes.c_void_p(b) for b in bufs] + [ctypes.c_int32(v) for v in vals]
    a = (ctypes.c_void_p * max(1, len(cargs)))(*[ctypes.addressof(x) for x in cargs])
    g = (ctypes.c_uint * 3)(*[int(x) for x in (*global_size, 1, 1, 1)[:3]])
    lsz = (ctypes.c_uint * 3)(*[int(x) for x in (*local_size, 1, 1, 1)[:3]])
    fn(a, g, lsz)

__all__ = ["HOST_SHIM", "HostShimError", "HostLibrary", "build_host_library", "merged_source", "host_refusal"]
