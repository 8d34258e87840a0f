; LLVM 22.1.0 (llvmlite 0.50) x86-64 miscompile, reduced by hand from the fuzz finding 7ed24ef0301b (the loop
; vectorizer's last, masked, store of a gated bfloat16 store). One lane of a truncating masked store: on AVX-512
; (-mcpu=znver5, skylake-avx512) `llc` stores lane 0 with `vmovss`, 4 bytes, so p[1] is overwritten too; on AVX2
; (haswell) it is `movw`, 2 bytes. The same for i32 -> i8 and i64 -> i32/i16/i8 lanes, any one lane, and vectors of 4
; to 16 lanes (llvm/llvm-project#179489, fixed after LLVM 22).
target triple = "x86_64-unknown-linux-gnu"
define void @f(ptr %p, <8 x i32> %v) {
  %t = trunc <8 x i32> %v to <8 x i16>
  call void @llvm.masked.store.v8i16.p0(<8 x i16> %t, ptr align 2 %p, <8 x i1> <i1 true, i1 false, i1 false, i1 false, i1 false, i1 false, i1 false, i1 false>)
  ret void
}
declare void @llvm.masked.store.v8i16.p0(<8 x i16>, ptr, <8 x i1>)
