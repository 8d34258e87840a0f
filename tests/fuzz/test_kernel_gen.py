"""The kernel-AST generator (fuzz/gen/kernels.py through fuzz.strategies): every kernel passes kernel_spec and the z3
bounds proof, runs on the reference, and the features the issue asks for all show up."""
import random
from collections import Counter
from hypothesis import given, settings
from tinygrad.uop import Ops, AxisType
from tinygrad.dtype import dtypes, PtrDType, InvalidType
from spec import type_verify, kernel_spec
from spec.validate_index import validate_index
from spec.roundtrip import check_roundtrip
from fuzz.strategies import (build_kernel, kernel_cases, RandomChooser, BytesChooser, KernelConfig, ALL_DTYPES)
from fuzz.oracles.kernel_ref import run_kernel
from fuzz.oracles.differential import kernel_inputs

CASES = [build_kernel(RandomChooser(s)) for s in range(150)]

def features(ast):
  topo = ast.toposort()
  f: Counter = Counter()
  for u in topo:
    if u.op is Ops.LOAD and u.src[0].src[0].op is Ops.DEFINE_GLOBAL:
      idx = u.src[0].src[1]
      f["load"] += 1
      if idx.op is Ops.WHERE and isinstance(idx.src[2].arg, InvalidType):
        f["gather" if any(x.op is Ops.LOAD for x in idx.toposort()) else "masked"] += 1
    if u.op is Ops.REDUCE: f[f"reduce {u.arg}"] += 1
    if u.op is Ops.REDUCE and u.arg is Ops.ADD and u.src[0].op is Ops.WHERE and u.src[0].src[2].op is Ops.CONST and \
       any(c.op is Ops.CMPEQ and any(r in c._ranges for r in u.src[1:]) for c in u.src[0].src[0].toposort()):
      f["select sum"] += 1
    if u.op in (Ops.CAST, Ops.BITCAST) and u.dtype is not dtypes.index: f[str(u.op)] += 1
    if u.op is Ops.DEFINE_VAR: f["var"] += 1
    if u.op is Ops.BUFFERIZE: f["bufferize"] += 1
    if u.op is Ops.RANGE and int(u.src[0].vmax) in (31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257): f["tile"] += 1
    if u.op is Ops.RANGE and int(u.src[0].vmax) == 0: f["empty"] += 1
    if u.op is Ops.STORE and u.src[0].src[1].op is Ops.WHERE: f["masked store"] += 1
    if u.op is Ops.DEFINE_GLOBAL and isinstance(u.dtype, PtrDType): f[f"dtype {u.dtype.base}"] += 1
    # integer index arithmetic in ALU code: a sum of loop indices that is never positive, divided by a constant; a
    # division of a division; a wrapping unsigned sum compared with a constant; a mask comparing a sum of ranges
    if u.op in (Ops.IDIV, Ops.MOD) and u.dtype is not dtypes.index and u.src[1].op is Ops.CONST:
      if any(x.op is Ops.RANGE for x in u.src[0].toposort()) and u.src[0].vmin < 0 and u.src[0].vmax <= 0:
        f["never-positive divmod"] += 1
      if u.src[0].op is u.op and u.src[0].src[1].op is Ops.CONST: f["nested divmod"] += 1
    if u.op is Ops.CMPLT and dtypes.is_unsigned(u.src[0].dtype) and u.src[0].op is Ops.ADD and \
       u.src[0].src[1].op is Ops.CONST and u.src[0].src[1].arg > dtypes.max(u.src[0].dtype) // 2:
      f["wrapping unsigned sum < const"] += 1
    if u.op is Ops.CMPLT and u.src[0].dtype is dtypes.index and u.src[0].op is Ops.ADD and \
       sum(x.op is Ops.RANGE for x in u.src[0].src) == 2: f["range sum mask"] += 1
  f[f"stores {sum(u.op is Ops.STORE for u in topo)}"] += 1
  return f

def test_every_kernel_passes_the_spec_the_bounds_proof_and_the_round_trip():
  for c in CASES:
    type_verify(c.ast, kernel_spec)
    validate_index(c.ast)
    check_roundtrip(c.ast)

def test_every_kernel_runs_on_the_reference():
  for c in CASES[:60]: run_kernel(c.ast, kernel_inputs(c.ast, c.seed), c.var_vals)

def test_the_features_all_show_up():
  f: Counter = sum((features(c.ast) for c in CASES), Counter())
  for k in ("masked", "gather", "select sum", "reduce Ops.ADD", "reduce Ops.MUL", "reduce Ops.MAX", "Ops.CAST", "Ops.BITCAST", "var",
            "bufferize", "tile", "empty", "masked store", "stores 2", "stores 3", "never-positive divmod",
            "nested divmod", "wrapping unsigned sum < const", "range sum mask"):
    assert f[k] > 0, (k, f)
  for dt in ALL_DTYPES: assert f[f"dtype {dt}"] > 0, dt
  assert any(c.opts for c in CASES) and any(c.opts is None for c in CASES)

def test_bytes_choosers_are_deterministic_and_total():
  data = random.Random(7).randbytes(3000)
  a, b = build_kernel(BytesChooser(data)), build_kernel(BytesChooser(data))
  assert a.ast is b.ast and a.var_vals == b.var_vals and a.opts == b.opts and a.seed == b.seed
  # any byte string builds a kernel, the empty one included (every choice takes its first option)
  for d in (b"", b"\xff" * 5, data[:100]): type_verify(build_kernel(BytesChooser(d)).ast, kernel_spec)
  ch = BytesChooser(data)
  build_kernel(ch)
  assert 0 < ch.used <= len(data)

def test_config_restricts_dtypes_and_sizes():
  cfg = KernelConfig(dtypes=(dtypes.float32,), max_points=16, p_var=0.0)
  for s in range(30):
    c = build_kernel(RandomChooser(s), cfg)
    topo = c.ast.toposort()
    assert all(u.dtype.base is dtypes.float32 for u in topo if u.op is Ops.DEFINE_GLOBAL)
    assert not any(u.op is Ops.DEFINE_VAR for u in topo) and not c.var_vals
    outs = [u for u in topo if u.op is Ops.RANGE and u.arg[-1] is AxisType.LOOP and not any(
      b.op is Ops.BUFFERIZE and u in b.src for b in topo)]
    n = 1
    for r in outs: n *= max(1, int(r.src[0].vmax))
    assert n <= 16

@settings(max_examples=25)
@given(kernel_cases(KernelConfig(max_depth=3)))
def test_hypothesis_strategy_gives_valid_kernels(case):
  type_verify(case.ast, kernel_spec)
  validate_index(case.ast)

def test_repeated_operands_are_one_node_and_more_of_them_when_asked():
  def twice(cfg, n=150):
    out = 0
    for s in range(n):
      c = build_kernel(RandomChooser(s), cfg)
      out += sum(u.op in (Ops.ADD, Ops.MUL, Ops.IDIV, Ops.MOD, Ops.CMPLT, Ops.CMPNE, Ops.MAX) and u.src[0] is u.src[1]
                 for u in c.ast.toposort())
    return out
  assert 0 < twice(KernelConfig()) < twice(KernelConfig(p_repeat=0.25)) / 3
