"""The backends table (fuzz/campaign/backends.py) and the reducer (fuzz/campaign/reduce.py)."""
import pytest
from tinygrad.uop import Ops
from tinygrad.dtype import dtypes
from tinygrad.helpers import Context
from spec import type_verify, kernel_spec
from fuzz.campaign.backends import BACKENDS, DEFAULT_BACKENDS, open_backends, fit_opts, CBackend
from fuzz.campaign.levels import KernelLevel
from fuzz.campaign.reduce import reduce_locally, normalize, shrink_buffers, drop_range, kernel_candidates
from fuzz.strategies import build_kernel, RandomChooser, KernelConfig

def test_every_default_backend_is_registered_and_unknown_names_are_refused():
  assert set(DEFAULT_BACKENDS) <= set(BACKENDS) and {"cpu", "llvm", "python", "nv", "amd"} <= set(BACKENDS)
  with pytest.raises(ValueError, match="unknown backend"): open_backends(["cpu", "tpu"])

def test_a_backend_without_its_toolchain_is_named_with_the_reason():
  with Context(CC="no-such-compiler-here"):
    ok, missing = open_backends(["cpu", "python"])
  assert "python" in ok and "cpu" in missing and "no-such-compiler-here" in missing["cpu"]

def test_a_batch_compiles_into_one_shared_object(monkeypatch):
  from tinygrad.runtime.support import compiler_cpu
  calls = []
  orig = compiler_cpu.CCompiler.compile
  monkeypatch.setattr(compiler_cpu.CCompiler, "compile", lambda self, src: calls.append(src) or orig(self, src))
  lvl = KernelLevel()
  cases = [build_kernel(RandomChooser(s), KernelConfig(dtypes=(dtypes.float32, dtypes.int32))) for s in range(6)]
  assert all(not f for f in lvl.check(cases, {"cpu": CBackend()}))
  assert len(calls) == 1 and all(f"void k{i}(" in calls[0] for i in range(6))

def test_fit_opts_keeps_only_what_applies():
  from tinygrad.codegen.opt import Opt, OptOps
  from tinygrad.renderer.cstyle import CRenderer
  case = build_kernel(RandomChooser(3), KernelConfig(dtypes=(dtypes.float32,), max_reduce_dims=1))
  cands = (Opt(OptOps.LOCAL, 0, 2), Opt(OptOps.UPCAST, 9, 2), Opt(OptOps.GROUP, 0, 2))
  # the C renderer has no locals and no shared memory; axis 9 does not exist
  assert fit_opts(case.ast, CRenderer(), cands) == [] and fit_opts(case.ast, CRenderer(), None) is None

def test_reducer_finds_a_minimal_kernel_for_a_property():
  lvl = KernelLevel()
  case = next(c for c in (build_kernel(RandomChooser(s)) for s in range(200))
              if any(u.op is Ops.MUL and u.dtype is dtypes.float32 for u in c.ast.toposort()) and lvl.size(c) > 40)
  has_mul = lambda c: any(u.op is Ops.MUL and u.dtype is dtypes.float32 for u in c.ast.toposort())
  red = reduce_locally(lvl, case, has_mul, valid=lvl.valid)
  assert has_mul(red) and lvl.valid(red) and lvl.size(red) <= 8 < lvl.size(case), lvl.text(red)

def test_graph_edits_keep_kernels_legal():
  for s in range(30):
    ast = build_kernel(RandomChooser(s)).ast
    for new in (normalize(ast), shrink_buffers(ast), *[drop_range(ast, r) for r in ast.toposort() if r.op is Ops.RANGE]):
      type_verify(new, kernel_spec)

def test_candidates_are_valid_or_refused():
  lvl = KernelLevel()
  case = build_kernel(RandomChooser(11))
  n = 0
  for c in kernel_candidates(case):
    if lvl.valid(c): type_verify(c.ast, kernel_spec)
    n += 1
    if n > 200: break
  assert n > 10

def test_reducer_sees_through_a_bufferize_and_a_stored_cast():
  # store(cast(bufferize(load(x))[0])) keeps an int64 load: the load of the local buffer becomes the value it buffered,
  # and the cast goes with the output buffer retyped (then the range goes: nothing needs it)
  from fuzz.gen.kernels import KernelCase
  from tinygrad.uop.ops import UOp
  r = UOp.range(3, 0)
  x = UOp(Ops.DEFINE_GLOBAL, dtypes.int64.ptr(3), arg=1).index(r).load()
  bz = UOp(Ops.BUFFERIZE, dtypes.int64, (x, UOp.range(2, 1)))
  v = UOp(Ops.INDEX, dtypes.int64.ptr(2), (bz, UOp.const(dtypes.index, 0))).load().cast(dtypes.float32)
  out = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(3), arg=0).index(UOp.const(dtypes.index, 0)).store(v).end(r)
  lvl = KernelLevel()
  case = KernelCase(UOp.sink(out), {})
  assert lvl.valid(case)
  int_load = lambda c: any(u.op is Ops.LOAD and u.dtype is dtypes.int64 and u.src[0].src[0].op is Ops.DEFINE_GLOBAL
                           for u in c.ast.toposort())
  red = reduce_locally(lvl, case, int_load, valid=lvl.valid)
  topo = red.ast.toposort()
  assert lvl.valid(red) and int_load(red) and not any(u.op in (Ops.BUFFERIZE, Ops.CAST) for u in topo), lvl.text(red)
  # 2 buffers, one address, 2 INDEX, LOAD, STORE, SINK: out[0] = x[0]
  assert lvl.size(red) == 8, lvl.text(red)
