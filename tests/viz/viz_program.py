"""The program the browser tests run under VIZ=1 PROFILE=1: a small conv net step whose kernels take hundreds of rule
applications. It writes each graph_rewrite's own count of rule applications (the rewriter's `steps`, in the order the
rewrites started, so entry k is pass k of the trace) to the file named by argv[1], before the viewer starts at exit."""
import json, sys
import numpy as np
from tinygrad import Tensor
from tinygrad.uop import hooks

rewriters = []
hooks.register("rewrite_start", lambda rw, root: rewriters.append(rw))
r = np.random.default_rng(0)
x = Tensor(r.standard_normal((2, 3, 10, 10), dtype=np.float32))
w = Tensor(r.standard_normal((4, 3, 3, 3), dtype=np.float32))
out = x.conv2d(w).relu().max(axis=(2, 3)) @ Tensor(r.standard_normal((4, 5), dtype=np.float32))
print(out.softmax().numpy().sum())
with open(sys.argv[1], "w") as f: json.dump([[rw.name, rw.steps] for rw in rewriters], f)
