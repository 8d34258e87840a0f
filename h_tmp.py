import numpy as np, time
from tinygrad import Tensor
from tinygrad.codegen import get_program
from tinygrad.codegen.heuristic import hand_coded_optimizations
from tinygrad.codegen.program import prepare_kernel
from tinygrad.renderer.cuda import CUDARenderer
from tinygrad.renderer.llvmir import AMDLLVMRenderer
def T(*s): return Tensor(np.zeros(s, np.float32))
shapes = {
 "elementwise": lambda: T(4096, 4096) + T(4096, 4096),
 "sum_rows": lambda: T(4096, 4096).sum(1),
 "sum_all": lambda: T(1 << 22).sum(),
 "sum_cols": lambda: T(4096, 4096).sum(0),
 "matmul512": lambda: T(512, 512) @ T(512, 512),
 "gemv": lambda: T(1, 4096) @ T(4096, 4096),
 "thin": lambda: T(4096, 16) @ T(16, 4096),
 "tallskinny": lambda: T(8192, 1024) @ T(1024, 16),
 "softmax": lambda: T(512, 1024).softmax(-1),
}
for ren in [CUDARenderer("sm_90"), AMDLLVMRenderer("gfx1100"), AMDLLVMRenderer("gfx942")]:
  for n, f in shapes.items():
    for si in f().schedule():
      st = time.perf_counter()
      p = get_program(si.ast, ren)
      smem = sum(u.dtype.nbytes() for u in p.uops if u.op.name == "DEFINE_LOCAL")
      print(type(ren).__name__[:4], n, p.name, p.global_size, p.local_size, "smem", smem, p.applied_opts if hasattr(p,'applied_opts') else "", f"{time.perf_counter()-st:.2f}s")
