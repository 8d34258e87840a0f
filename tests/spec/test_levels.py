"""SPEC levels: which checkpoints spec registers at each level, and what each level catches."""
import os, subprocess, sys
import pytest
from tinygrad.uop import Ops, hooks
from tinygrad.uop.ops import UOp
from tinygrad.dtype import dtypes
from tinygrad.helpers import Context
from spec import SpecError, IndexOutOfBounds
import spec.plugin as plugin

plugin.load()  # the tests below read the checks the plugin imports at its first check

BOUNDARY = ("tensor_graph", "kernel_graph", "kernel_ast", "program")

def registered():
  return {name: [fn.__name__ for fn in getattr(hooks, name) if getattr(fn, "__module__", "") == "spec.plugin"] for name in hooks.CHECKPOINTS}

@pytest.mark.parametrize("level", [0, 1, 2, 3])
def test_level_registers_the_right_callbacks(level):
  with Context(SPEC=level):
    reg = registered()
    for name in BOUNDARY: assert (len(reg[name]) == 1) == (level >= 1), (name, reg)
    assert (len(reg["uop_created"]) == 1) == (level >= 2)
    assert reg["compiled"] == [] and reg["rewrite_done"] == []

def test_leaving_context_restores_registration():
  with Context(SPEC=0):
    with Context(SPEC=2): assert plugin.uop_created in hooks.uop_created
    assert plugin.uop_created not in hooks.uop_created and plugin.kernel_ast not in hooks.kernel_ast

IMPORT_ORDER = """
{first}
from tinygrad.helpers import Context
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp
from tinygrad.dtype import dtypes
from spec import SpecError
with Context(SPEC=2):
  try: UOp(Ops.ADD, dtypes.int32, (UOp.const(dtypes.float32, 1.0), UOp.const(dtypes.float32, 2.0)))
  except SpecError: print("caught")
"""

@pytest.mark.parametrize("first", ["import spec", "import tinygrad", "import spec.plugin", "from spec import verify",
                                   "import replay.capture"])
def test_any_import_order_works(first):
  # NOTE: importing spec imports tinygrad, whose import loads spec.plugin: the plugin needs nothing of spec until its
  # first check
  code = IMPORT_ORDER.format(first=first)
  out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "SPEC": "1"}, capture_output=True, text=True)
  assert out.returncode == 0 and out.stdout.split() == ["caught"], out.stdout + out.stderr

@pytest.mark.parametrize("env,expect", [("0", ([], [])), ("1", (["spec_kernel_ast"], [])), ("2", (["spec_kernel_ast"], ["uop_created"]))])
def test_env_flag_at_import(env, expect):
  code = ("import tinygrad; from tinygrad.uop import hooks; "
          "print([f.__name__ for f in hooks.kernel_ast], [f.__name__ for f in hooks.uop_created])")
  out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "SPEC": env}, capture_output=True, text=True, check=True).stdout
  assert out.strip() == f"{expect[0]} {expect[1]}"

def test_illegal_node_built_under_spec2_raises_at_construction():
  a, b = UOp.const(dtypes.float32, 1.0), UOp.const(dtypes.int32, 2)
  with Context(SPEC=2), pytest.raises(SpecError) as e: UOp(Ops.ADD, dtypes.float32, (a, b), tag="spec2-test")
  assert "at construction" in str(e.value) and e.value.node.op is Ops.ADD
  with Context(SPEC=1): UOp(Ops.MUL, dtypes.float32, (a, b), tag="spec1-test")  # not checked at construction below SPEC=2

def test_spec1_checks_kernel_ast_at_the_checkpoint():
  bad = UOp.sink(UOp.special(16, "gidx0").cast(dtypes.float32))
  with Context(SPEC=1), pytest.raises(SpecError) as e: hooks.fire("kernel_ast", bad)
  assert e.value.stage == "kernel"
  with Context(SPEC=0): hooks.fire("kernel_ast", bad)

def test_ignore_oob_0_proves_kernels():
  g = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(8), arg=0)
  r = UOp.range(8, 0)
  bad = UOp.sink(g.index(r + 1).store(UOp.const(dtypes.float32, 0.0)).end(r))
  with Context(SPEC=1, IGNORE_OOB=1): hooks.fire("kernel_ast", bad)
  with Context(SPEC=1, IGNORE_OOB=0), pytest.raises(IndexOutOfBounds): hooks.fire("kernel_ast", bad)

def test_spec2_round_trips_verified_sinks(monkeypatch):
  seen = []
  import spec.roundtrip
  monkeypatch.setattr(spec.roundtrip, "check_roundtrip", lambda u: seen.append(u))
  g = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(8), arg=0)
  ast = UOp.sink(g.index(UOp.const(dtypes.index, 3)).store(UOp.const(dtypes.float32, 7.0)), arg=None)
  with Context(SPEC=1): hooks.fire("kernel_ast", ast)
  assert seen == []
  with Context(SPEC=2): hooks.fire("kernel_ast", ast)
  assert seen == [ast]

def test_spec3_round_trips_every_new_uop(monkeypatch):
  import spec.roundtrip
  calls = []
  real = spec.roundtrip.pyrender_node
  monkeypatch.setattr(spec.roundtrip, "pyrender_node", lambda u: calls.append(u) or real(u))
  with Context(SPEC=3): u = UOp.variable("spec3_var", 0, 7) * 5
  assert u in calls and u.src[0] in calls

def test_check_that_builds_uops_does_not_recurse(monkeypatch):
  # a construction check that itself builds UOps must not check those (nor loop)
  built = []
  def checking(u):
    built.append(UOp.const(dtypes.int32, len(built) + 10_000))
    return True
  monkeypatch.setattr(plugin.full_spec, "_rewrite", lambda u, ctx: (checking(u), 0))
  with Context(SPEC=2): UOp.variable("reentry", 0, 3)
  assert len(built) >= 1

def test_alu_verdict_memo_is_sound():
  # the construction check memoizes ALU, CAST and BITCAST verdicts per (op, dtype, source dtypes): every full_spec rule
  # such a node can reach must look at nothing else
  from tinygrad.uop import GroupOp
  # NOTE: spec/__init__ exports the matchers under the module names, so the modules are taken from sys.modules
  ss, fs = sys.modules["spec.shared_spec"], sys.modules["spec.full_spec"]
  dtype_only = {ss.same_dtypes, ss.cmp_ok, ss.where_ok, ss.int_only, ss.int_or_bool, ss.float_only, fs.index_mix_ok,
                ss.cast_ok, ss.bitcast_ok}
  assert plugin.ALU >= set(GroupOp.ALU) | {Ops.CAST, Ops.BITCAST}
  for op in plugin.ALU:
    for pat, fn, *_ in plugin.full_spec.pdict[op]:
      assert fn.__wrapped__ in dtype_only, f"{op}: rule {fn.__wrapped__} at {pat.location} may look beyond dtypes"

def test_memoized_alu_still_rejects_other_signatures():
  a, b = UOp.const(dtypes.float32, 1.0), UOp.const(dtypes.float32, 2.0)
  with Context(SPEC=2):
    UOp(Ops.ADD, dtypes.float32, (a, b), tag="memo-ok")
    with pytest.raises(SpecError): UOp(Ops.ADD, dtypes.int32, (a, b), tag="memo-bad")
    # conversions: a legal signature memoized does not let another through
    UOp(Ops.CAST, dtypes.int32, (a,), tag="memo-ok")
    UOp(Ops.BITCAST, dtypes.int32, (a,), tag="memo-ok")
    with pytest.raises(SpecError): UOp(Ops.CAST, dtypes.int32.vec(2), (a,), tag="memo-bad")
    with pytest.raises(SpecError): UOp(Ops.BITCAST, dtypes.int16, (a,), tag="memo-bad")

def test_compiler_stages_are_checked_at_spec1(monkeypatch):
  Tensor = pytest.importorskip("tinygrad.tensor").Tensor
  stages = []
  real = plugin.type_verify
  monkeypatch.setattr(plugin, "type_verify", lambda g, s, stage="": stages.append(stage) or real(g, s, stage))
  with Context(SPEC=1):
    a = Tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert (a + 7.5).sum(1).numpy().tolist() == [28.5, 37.5]
  assert {"tensor", "kernel graph (tensor)", "kernel", "program"} <= set(stages), stages
