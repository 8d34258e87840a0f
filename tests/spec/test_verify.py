"""type_verify: what the SpecError says, verdict caching, lists vs graphs, and the DEBUG>=3 print."""
import pytest
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp
from tinygrad.dtype import dtypes
from tinygrad.helpers import Context
from spec import type_verify, SpecError, kernel_spec, program_spec, full_spec, why_illegal
from spec.verify import legal_cache

def g(i, size=16): return UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(size), arg=i)

def test_error_names_stage_position_op_dtype_sources_and_arg():
  r = UOp.range(16, 0)
  bad = UOp.special(16, "gidx0")
  sink = UOp.sink(g(0).index(r + bad).store(UOp.const(dtypes.float32, 1.0)).end(r))
  with pytest.raises(SpecError) as e: type_verify(sink, kernel_spec)
  msg, pos = str(e.value), list(sink.toposort()).index(bad)
  assert msg.startswith(f"kernel spec: node {pos} of {len(sink.toposort())} is illegal: Ops.SPECIAL")
  assert "dtype: dtypes.index" in msg and "arg:   'gidx0'" in msg
  assert "src[0]: Ops.CONST dtypes.index arg=16" in msg and "why:" in msg
  assert (e.value.stage, e.value.position, e.value.node) == ("kernel", pos, bad)

def test_error_reason_comes_from_the_rule():
  with pytest.raises(SpecError) as e: type_verify([UOp.const(dtypes.index, 0)], program_spec, "my stage")
  assert e.value.stage == "my stage" and "index math must be lowered" in e.value.reason
  assert str(e.value).startswith("my stage spec: node 0 of 1")

def test_stage_name_defaults_from_spec():
  bad = UOp.special(16, "gidx0")
  with pytest.raises(SpecError) as e: type_verify([UOp.const(dtypes.index, 16), bad], kernel_spec)
  assert e.value.stage == "kernel" and e.value.position == 1

def test_list_checks_every_node_in_list_order():
  c = UOp.const(dtypes.int32, 1)
  add = c + c
  type_verify([c, add], program_spec)
  with pytest.raises(SpecError) as e: type_verify([add, c], program_spec)
  assert e.value.position == 0 and "earlier" in e.value.reason

def test_verdicts_are_cached_per_node_and_spec():
  r = UOp.range(64, 0)
  sink = UOp.sink(g(0, 64).index(r).store(g(1, 64).index(r).load() + 1.0).end(r))
  type_verify(sink, kernel_spec)
  assert all(u in legal_cache(kernel_spec) for u in sink.toposort())
  assert sink not in legal_cache(program_spec)

def test_cached_recheck_runs_no_rule(monkeypatch):
  import spec.verify
  x = UOp.variable("cache_test_x", 0, 100)
  for i in range(50): x = (x + i) * 3
  sink = UOp.sink(x)
  calls = []
  real = spec.verify.why_illegal
  monkeypatch.setattr(spec.verify, "why_illegal", lambda u, s: calls.append(u) or real(u, s))
  type_verify(sink, full_spec)
  # NOTE: small constants may already be cached by another test (nodes are shared), the new chain is not
  first = len(calls)
  assert sink in calls and first <= len(sink.toposort())
  type_verify(sink, full_spec)
  assert len(calls) == first

def test_why_illegal_is_none_for_legal_and_a_reason_otherwise():
  assert why_illegal(UOp.const(dtypes.float32, 1.0), kernel_spec) is None
  assert "no rule" in why_illegal(UOp.special(16, "gidx0"), kernel_spec)

def test_debug3_prints_the_graph(capsys):
  bad = UOp.special(16, "gidx0")
  with Context(DEBUG=3), pytest.raises(SpecError): type_verify(UOp.sink(bad), kernel_spec)
  out = capsys.readouterr().out
  assert "gidx0" in out

def test_illegal_node_is_not_cached():
  bad = UOp.special(16, "gidx0")
  for _ in range(2):
    with pytest.raises(SpecError): type_verify(UOp.sink(bad), kernel_spec)
  assert bad not in legal_cache(kernel_spec)

def test_each_spec_carries_the_name_of_its_stage():
  from spec import SPECS
  from spec.verify import spec_name
  from tinygrad.uop.ops import UPat, PatternMatcher
  assert {name: spec_name(s) for name, s in SPECS.items()} == {name: name for name in SPECS}
  own = PatternMatcher([(UPat(Ops.CONST), lambda: True)])
  assert spec_name(own) == "custom" and spec_name(kernel_spec + own) == "custom"
  with pytest.raises(SpecError, match="^custom spec: node 0 of 1 is illegal"): type_verify(UOp.variable("a", 0, 3), own)
