"""A slice of the GPU compile sweep (tests/codegen/gpu_sweep.py; `make test-gpu-sweep` runs 2,000 programs per arch):
random conv / pool / matmul / reduce / scan programs, forward and backward, each kernel compiled for each arch with its
default heuristics. Each arch gets three programs of its own here, so the slice covers more programs than one list
would."""
import collections
import pytest
from tests.codegen.gpu_sweep import ARCHS, KINDS, Program, build_program, sweep

PER_ARCH = 3

def test_programs_cover_every_kind_forward_and_backward():
  kinds = collections.Counter()
  for s in range(30):
    p = build_program(s)
    kinds[next(k for k in ("conv_transpose2d", "conv2d", "pool", "@", "cum", ".") if k in p.text)] += 1
    # a forward kernel and at least one for the gradients
    assert len(p.kernels) >= 2, p.text
  assert all(kinds[k] for k in ("conv_transpose2d", "conv2d", "pool", "@", "cum", ".")), kinds
  assert len(KINDS) >= 5

@pytest.mark.parametrize("arch", ARCHS)
def test_sweep_slice_compiles(arch):
  i = ARCHS.index(arch)
  progs = [build_program(s) for s in range(1000 + i * PER_ARCH, 1000 + (i + 1) * PER_ARCH)]
  r = sweep(progs, [arch])[0]
  assert r.programs == PER_ARCH and r.kernels >= PER_ARCH
  assert not r.failed, "\n".join(f"program {s}: {next(p.text for p in progs if p.seed == s)}\n  {e[:2000]}"
                                 for s, e in r.failed.items())

def test_sweep_names_the_programs_that_do_not_compile():
  # issue 31 planted back (tests/fuzz/planted.py): a long reduce under three output axes (a group reduce's workgroup
  # dimension besides a local on each output axis) fails on every arch, and the report says which program. The issue's
  # own conv backward no longer has such a kernel: its fold reads the windows' matmul stored (a reduce read through a
  # PAD is stored), a reduce of 16 that takes no group
  from tinygrad import Tensor
  from tinygrad.uop import Ops
  from tests.fuzz import planted
  import tinygrad.codegen.lowerer as lowerer, tinygrad.codegen.heuristic as heuristic
  saved = (lowerer.plan_for, heuristic._Builder.try_local, heuristic.LOCAL_TYPES)
  try:
    planted.issue31()
    y = Tensor.empty(8, 18, 18, 512).sum(-1)
    bad = Program(7, "x.sum(-1)", [si.ast for si in y.schedule() if si.ast.op is Ops.SINK])
    mm = Tensor.empty(16, 16) @ Tensor.empty(16, 16)
    good = Program(8, "a @ b", [si.ast for si in mm.schedule() if si.ast.op is Ops.SINK])
    res = sweep([bad, good], ["sm_90", "gfx1100"])
  finally: lowerer.plan_for, heuristic._Builder.try_local, heuristic.LOCAL_TYPES = saved
  for r in res:
    assert list(r.failed) == [7] and "grid lowering" in r.failed[7], (r.arch, r.failed)
