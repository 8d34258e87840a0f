; LLVM 22.1.0 (llvmlite 0.50) x86-64 loop-vectorizer miscompile, reduced by hand from the fuzz finding 5c22e0cfd431
; (campaign seed 36: a MAX over x[(i % 4) * 272 + r % 4], r over 17). out[i] = sum over r < 131 of x[(i % 4) * 64 + r % 4].
; At O2 (the default pipeline, host AVX-512) the inner loop's vector body reads 64 consecutive i32 from the row's start
; (four <16 x i32> loads hoisted out of it) as if r % 4 were r: instcombine turns `add %base, %rm` into `or disjoint`
; and the vectorizer widens the address past the modulus. x = 0..255 gives 4035 for out[0] where the sum is 195; right
; with the loop vectorizer off (PipelineTuningOptions.loop_vectorization) and at O0. In a scan of such sums through the
; renderer (r over 33..257 steps, not a multiple of the modulus; moduli 2..64; r * s + o for s in 1, 2 and o in 0, 1)
; 242 of 480 were wrong at O2, none with the loop vectorizer off.
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-unknown-linux-gnu"

define void @f(ptr %out, ptr %x) #0 {
entry:
  br label %outer
outer:
  %i = phi i32 [ 0, %entry ], [ %in, %oexit ]
  %oc = icmp slt i32 %i, 15
  br i1 %oc, label %obody, label %done
obody:
  %im = srem i32 %i, 4
  %base = mul i32 %im, 64
  br label %loop
loop:
  %r = phi i32 [ 0, %obody ], [ %rn, %body ]
  %acc = phi i32 [ 0, %obody ], [ %s, %body ]
  %c = icmp slt i32 %r, 131
  br i1 %c, label %body, label %oexit
body:
  %rm = srem i32 %r, 4
  %idx = add i32 %base, %rm
  %p = getelementptr inbounds i32, ptr %x, i32 %idx
  %v = load i32, ptr %p, align 4
  %s = add i32 %acc, %v
  %rn = add i32 %r, 1
  br label %loop
oexit:
  %po = getelementptr inbounds i32, ptr %out, i32 %i
  store i32 %acc, ptr %po, align 4
  %in = add i32 %i, 1
  br label %outer
done:
  ret void
}
attributes #0 = { nounwind "min-legal-vector-width"="512" "prefer-vector-width"="512" }
