"""LLVM IR pieces the LLVM renderer and its rewrites share: the fast-math flags, float constants as hex, and the helper
functions that convert the emulated dtypes (bfloat16, fp8e4m3, fp8e5m2; held as their bits, i16/i8) to and from float32
with round-to-nearest-even, bit for bit as the C backend's __tg_* helpers (the renderer declares the ones a kernel
calls)."""
from __future__ import annotations
import struct
from tinygrad.dtype import DType, dtypes

# NOTE: the one fast-math flag, on float32/float64 only: a*b+c may become one FMA, as gcc's default -ffp-contract=fast
# does on the C path; half rounds every op (as C and numpy do), so it gets no flag
FASTMATH = "contract"
def fmf(dt: DType) -> str: return FASTMATH if dt.scalar() in (dtypes.float32, dtypes.float64) else ""

def hex_double(v: float) -> str: return "0x%016X" % struct.unpack("<Q", struct.pack("<d", v))[0]

def _fp8_to_f32_ir(name: str, eb: int, mb: int, bias: int, e4m3: bool) -> str:
  sub_scale = 2.0 ** (1 - bias - mb)
  nan_cond = (f"  %n1 = icmp eq i32 %e, {(1 << eb) - 1}\n  %n2 = icmp eq i32 %m, {(1 << mb) - 1}\n"
              "  %isnan = and i1 %n1, %n2\n  %isinf = and i1 false, false\n") if e4m3 else \
             (f"  %n1 = icmp eq i32 %e, {(1 << eb) - 1}\n  %mz = icmp ne i32 %m, 0\n  %isnan = and i1 %n1, %mz\n"
              f"  %mnz = icmp eq i32 %m, 0\n  %isinf = and i1 %n1, %mnz\n")
  return (f"define internal float @{name}(i8 %b) alwaysinline nounwind {{\n"
          f"  %u = zext i8 %b to i32\n  %e0 = lshr i32 %u, {mb}\n  %e = and i32 %e0, {(1 << eb) - 1}\n"
          f"  %m = and i32 %u, {(1 << mb) - 1}\n" + nan_cond +
          f"  %mf = uitofp i32 %m to float\n  %sub = fmul float %mf, {hex_double(sub_scale)}\n"
          f"  %eb = add i32 %e, {127 - bias}\n  %eb2 = shl i32 %eb, 23\n  %mb2 = shl i32 %m, {23 - mb}\n"
          f"  %nb = or i32 %eb2, %mb2\n  %norm = bitcast i32 %nb to float\n"
          f"  %isz = icmp eq i32 %e, 0\n  %v0 = select i1 %isz, float %sub, float %norm\n"
          f"  %v1 = select i1 %isinf, float 0x7FF0000000000000, float %v0\n"
          f"  %v2 = select i1 %isnan, float 0x7FF8000000000000, float %v1\n"
          f"  %sg = and i32 %u, 128\n  %neg = icmp ne i32 %sg, 0\n  %nv = fneg float %v2\n"
          f"  %r = select i1 %neg, float %nv, float %v2\n  ret float %r\n}}\n")

def _f32_to_fp8_ir(name: str, mb: int, bias: int, e4m3: bool) -> str:
  sh = 23 - mb
  nanv, maxv, top = (0x7F, 448.0, 0x7E) if e4m3 else (0x7E, 61440.0, 0x7C)
  scale = 512.0 if e4m3 else 65536.0
  return (f"define internal i8 @{name}(float %f) alwaysinline nounwind {{\n"
          f"  %u0 = bitcast float %f to i32\n  %s0 = lshr i32 %u0, 24\n  %sign = and i32 %s0, 128\n"
          f"  %u = and i32 %u0, 2147483647\n  %a = bitcast i32 %u to float\n"
          f"  %e0 = lshr i32 %u, 23\n  %e = add i32 %e0, {bias - 127}\n"
          f"  %lsb0 = lshr i32 %u, {sh}\n  %lsb = and i32 %lsb0, 1\n  %r0 = add i32 %u, {(1 << (sh - 1)) - 1}\n"
          f"  %r1 = add i32 %r0, %lsb\n  %r2 = lshr i32 %r1, {sh}\n  %norm = sub i32 %r2, {(127 - bias) << mb}\n"
          f"  %x = fmul float %a, {hex_double(scale)}\n  %q0 = fadd float %x, 0x4160000000000000\n"
          f"  %q1 = fsub float %q0, 0x4160000000000000\n  %sub = fptoui float %q1 to i32\n"
          f"  %isn = icmp sge i32 %e, 1\n  %v0 = select i1 %isn, i32 %norm, i32 %sub\n"
          f"  %big = fcmp oge float %a, {hex_double(maxv)}\n  %v1 = select i1 %big, i32 {top}, i32 %v0\n"
          f"  %nan = fcmp uno float %f, %f\n  %v2 = select i1 %nan, i32 {nanv}, i32 %v1\n"
          f"  %v3 = or i32 %v2, %sign\n  %r = trunc i32 %v3 to i8\n  ret i8 %r\n}}\n")

HELPER_IR = {
  "__tg_bf16_to_f32": ("define internal float @__tg_bf16_to_f32(i16 %b) alwaysinline nounwind {\n"
                       "  %u = zext i16 %b to i32\n  %s = shl i32 %u, 16\n  %f = bitcast i32 %s to float\n"
                       "  ret float %f\n}\n"),
  "__tg_f32_to_bf16": ("define internal i16 @__tg_f32_to_bf16(float %f) alwaysinline nounwind {\n"
                       "  %u = bitcast float %f to i32\n  %hi = lshr i32 %u, 16\n  %sign = and i32 %hi, 32768\n"
                       "  %qnan = or i32 %sign, 32704\n  %lsb = and i32 %hi, 1\n  %r0 = add i32 %u, 32767\n"
                       "  %r1 = add i32 %r0, %lsb\n  %r2 = lshr i32 %r1, 16\n  %nan = fcmp uno float %f, %f\n"
                       "  %r3 = select i1 %nan, i32 %qnan, i32 %r2\n  %r = trunc i32 %r3 to i16\n  ret i16 %r\n}\n"),
  "__tg_fp8e4m3_to_f32": _fp8_to_f32_ir("__tg_fp8e4m3_to_f32", 4, 3, 7, True),
  "__tg_fp8e5m2_to_f32": _fp8_to_f32_ir("__tg_fp8e5m2_to_f32", 5, 2, 15, False),
  "__tg_f32_to_fp8e4m3": _f32_to_fp8_ir("__tg_f32_to_fp8e4m3", 3, 7, True),
  "__tg_f32_to_fp8e5m2": _f32_to_fp8_ir("__tg_f32_to_fp8e5m2", 2, 15, False),
}
TO_F32 = {dtypes.bfloat16: "__tg_bf16_to_f32", dtypes.fp8e4m3: "__tg_fp8e4m3_to_f32",
           dtypes.fp8e5m2: "__tg_fp8e5m2_to_f32"}
FROM_F32 = {dtypes.bfloat16: "__tg_f32_to_bf16", dtypes.fp8e4m3: "__tg_f32_to_fp8e4m3",
             dtypes.fp8e5m2: "__tg_f32_to_fp8e5m2"}

__all__ = ["FASTMATH", "fmf", "hex_double", "HELPER_IR", "TO_F32", "FROM_F32"]
