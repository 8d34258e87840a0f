; LLVM 22.1.0 (llvmlite 0.50) x86-64 miscompile, reduced by hand from the fuzz finding 5c22e0cfd431 (the loop
; vectorizer's body of that kernel). out[i] = (a[7-i] % 7) * s for 8 bytes; every lane comes out 0.
; Same with udiv by 7 or urem by 3, for -mcpu=x86-64-v3, x86-64-v4, icelake-server and the host (rocketlake), and with
; the code generator at -O0; correct for <16 x i8>, <8 x i16>, <4 x i32>, <8 x i32>, with `and`/`lshr` in place of
; urem, and without the reversing shufflevector.
target triple = "x86_64-unknown-linux-gnu"
define void @f(ptr %out, ptr %a, i8 %s) {
entry:
  %si = insertelement <8 x i8> poison, i8 %s, i64 0
  %sp = shufflevector <8 x i8> %si, <8 x i8> poison, <8 x i32> zeroinitializer
  %w = load <8 x i8>, ptr %a, align 1
  %u = urem <8 x i8> %w, splat (i8 7)
  %v = shufflevector <8 x i8> %u, <8 x i8> poison, <8 x i32> <i32 7, i32 6, i32 5, i32 4, i32 3, i32 2, i32 1, i32 0>
  %r = mul <8 x i8> %v, %sp
  store <8 x i8> %r, ptr %out, align 1
  ret void
}
