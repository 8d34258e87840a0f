import numpy as np
from tinygrad import Tensor
from tinygrad.codegen.opt import Opt, OptOps, apply_opt
from tinygrad.codegen.program import prepare_kernel
from tinygrad.renderer.cuda import CUDARenderer
ast = prepare_kernel((Tensor(np.zeros((8192,1024),np.float32)) @ Tensor(np.zeros((1024,16),np.float32))).schedule()[-1].ast)
ren = CUDARenderer("sm_90")
opts = (Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.UPCAST, 0, 4))
for o in opts: ast = apply_opt(ast, o, ren)
try: apply_opt(ast, Opt(OptOps.GROUPTOP, 0, 4), ren, opts)
except Exception as e: print(e)
