"""PYTHON backend interpreter throughput: uops executed per second (program lines, and lines x threads in lockstep) for
an elementwise kernel, a reduction and a matmul through shared memory, with numpy doing the same work in the same run as
the reference (the ratio is what to compare across machines; absolute times on shared machines mean little).

  python bench/python_backend.py [--runs 3] [--n 65536]
"""
from __future__ import annotations
import argparse, os, sys, time
from typing import Callable
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tinygrad.codegen import get_program
from tinygrad.codegen.opt import Opt, OptOps
from tinygrad.dtype import dtypes, AddrSpace
from tinygrad.uop import Ops, AxisType
from tinygrad.uop.ops import UOp
from tinygrad.runtime.ops_python import PythonRenderer, PythonCompiler, PythonProgram

def gbuf(n: int, i: int) -> UOp: return UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(n), arg=i)

def elementwise_ast(n: int) -> UOp:
  out, a, b = gbuf(n, 0), gbuf(n, 1), gbuf(n, 2)
  r = UOp.range(n, 0)
  x, y = a.index(r).load(), b.index(r).load()
  return UOp.sink(out.index(r).store(x * y + x).end(r))

def reduce_ast(rows: int, k: int) -> UOp:
  out, a = gbuf(rows, 0), gbuf(rows * k, 1)
  r, red = UOp.range(rows, 0), UOp.range(k, 1, AxisType.REDUCE)
  return UOp.sink(out.index(r).store(a.index(r * k + red).load().reduce(red, arg=Ops.ADD)).end(r))

def from_ast(ast: UOp, opts: list[Opt] | None) -> tuple[PythonProgram, tuple, tuple]:
  p = get_program(ast, PythonRenderer(), opts)
  prg = PythonProgram(p.name, PythonCompiler().compile(p.src))
  gs, ls = p.launch_dims({})
  return prg, tuple(gs), tuple(ls) if ls is not None else (1, 1, 1)

def matmul_locals(n: int, t: int) -> list[UOp]:
  """A hand-linearized tiled matmul: one workgroup of t x t threads per tile of C, A and B tiles staged in DEFINE_LOCAL
  with a BARRIER after the loads and after the use, a register accumulator."""
  i32, f32 = dtypes.int32, dtypes.float32
  def c(v, dt=i32) -> UOp: return UOp.const(dt, v)
  C, A, B = gbuf(n * n, 0), gbuf(n * n, 1), gbuf(n * n, 2)
  gx, gy = UOp.special(c(n // t), "gidx0", dtype=i32), UOp.special(c(n // t), "gidx1", dtype=i32)
  lx, ly = UOp.special(c(t), "lidx0", dtype=i32), UOp.special(c(t), "lidx1", dtype=i32)
  row, col = gy * c(t) + ly, gx * c(t) + lx
  la, lb = [UOp(Ops.DEFINE_LOCAL, f32.ptr(t * t, AddrSpace.LOCAL), arg=k) for k in (0, 1)]
  acc = UOp(Ops.DEFINE_REG, f32.ptr(1, AddrSpace.REG), arg=0)
  init = acc.index(c(0)).store(c(0.0, f32))
  kt, k = UOp.range(c(n // t), 0, AxisType.REDUCE, dtype=i32), UOp.range(c(t), 1, AxisType.REDUCE, dtype=i32)
  sa = la.index(ly * c(t) + lx).store(A.index(row * c(n) + kt * c(t) + lx).load())
  sb = lb.index(ly * c(t) + lx).store(B.index((kt * c(t) + ly) * c(n) + col).load())
  b1 = UOp(Ops.BARRIER, src=(UOp.group(sa, sb),))
  cur = acc.after(init, kt, k).index(c(0))
  prod = la.after(b1).index(ly * c(t) + k).load() * lb.after(b1).index(k * c(t) + lx).load()
  inner = cur.store(cur.load() + prod).end(k)
  b2 = UOp(Ops.BARRIER, src=(inner,))
  outer = b2.end(kt)
  fin = C.index(row * c(n) + col).store(acc.after(outer).index(c(0)).load())
  placed: dict[UOp, None] = {}
  for root in (init, kt, sa, sb, b1, inner, b2, outer, fin):
    for u in root.toposort(): placed.setdefault(u, None)
  return list(placed)

def best_of(fn: Callable[[], object], runs: int) -> float:
  ts = []
  for _ in range(runs):
    st = time.perf_counter()
    fn()
    ts.append(time.perf_counter() - st)
  return min(ts)

def report(name: str, prg: PythonProgram, bufs: list[np.ndarray], gs: tuple, ls: tuple, ref: Callable[[], object],
           runs: int) -> None:
  t = best_of(lambda: prg(*bufs, global_size=gs, local_size=ls), runs)
  tref = best_of(ref, max(runs, 5))
  print(f"{name:42s} {len(prg.lines):4d} lines {prg.steps:7d} uops {prg.lane_steps:11d} thread-uops  {t*1e3:8.1f} ms  "
        f"{prg.steps / t / 1e3:8.1f} K uops/s  {prg.lane_steps / t / 1e6:8.2f} M thread-uops/s  {t / tref:9.0f}x numpy")

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--runs", type=int, default=3)
  ap.add_argument("--n", type=int, default=65536, help="elements of the elementwise kernel")
  args = ap.parse_args()
  rs = np.random.default_rng(0)
  n = args.n
  a, b, out = rs.random(n, dtype=np.float32), rs.random(n, dtype=np.float32), np.zeros(n, np.float32)
  prg, gs, ls = from_ast(elementwise_ast(n), None)
  report(f"elementwise x*y+x n={n}", prg, [out, a, b], gs, ls, lambda: a * b + a, args.runs)
  assert np.allclose(out, a * b + a)
  rows, k = 256, 256
  x, o = rs.random(rows * k, dtype=np.float32), np.zeros(rows, np.float32)
  prg, gs, ls = from_ast(reduce_ast(rows, k), None)
  report(f"row sum {rows}x{k} (heuristics)", prg, [o, x], gs, ls, lambda: x.reshape(rows, k).sum(axis=1), args.runs)
  assert np.allclose(o, x.reshape(rows, k).sum(axis=1), rtol=1e-4)
  prg, gs, ls = from_ast(reduce_ast(rows, k), [Opt(OptOps.LOCAL, 0, 16), Opt(OptOps.UNROLL, 0, 4)])
  report(f"row sum {rows}x{k} (LOCAL 16, UNROLL 4)", prg, [o, x], gs, ls, lambda: x.reshape(rows, k).sum(axis=1),
         args.runs)
  assert np.allclose(o, x.reshape(rows, k).sum(axis=1), rtol=1e-4)
  m, t = 128, 16
  A, B, C = rs.random((m, m), dtype=np.float32), rs.random((m, m), dtype=np.float32), np.zeros(m * m, np.float32)
  prg = PythonProgram("matmul_locals", PythonCompiler().compile(PythonRenderer().render(matmul_locals(m, t))))
  report(f"matmul {m}x{m} shared-memory tiles {t}x{t}", prg, [C, A.ravel(), B.ravel()], (m // t, m // t, 1), (t, t, 1),
         lambda: A @ B, args.runs)
  assert np.allclose(C.reshape(m, m), A @ B, rtol=1e-4)

if __name__ == "__main__":
  main()
