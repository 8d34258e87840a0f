"""Differential fuzzing of whole tensor programs: CPU and PYTHON against numpy (fuzz/gen/tensor_programs.py)."""
import numpy as np
import pytest
from hypothesis import given, settings
from tinygrad.dtype import dtypes
from fuzz.strategies import RandomChooser
from fuzz.gen.tensor_programs import (TensorProgram, Val, ProgramMismatch, build_tensor_program, check_program, run_numpy,
                                  tensor_programs, NP_NAMESPACE)

# NOTE: bounded for CI (the `ci` profile derandomizes it); run it hard with `python -m fuzz.gen.tensor_programs -n 5000`
@settings(max_examples=80)
@given(tensor_programs(max_steps=8))
def test_tensor_programs_match_numpy(prog):
  check_program(prog)

# big shapes reach the CPU heuristics' upcasts, unrolls and THREAD splits; the PYTHON interpreter would be too slow
@settings(max_examples=15)
@given(tensor_programs(max_steps=6, big=True))
def test_big_tensor_programs_match_numpy_on_cpu(prog):
  check_program(prog, devices=("CPU",))

def _prog(tg: str, npc: str, val: Val, *inputs: np.ndarray) -> TensorProgram:
  p = TensorProgram(defs=list(inputs), vals=[Val(a.shape, dtypes.float32, 4.0) for a in inputs])
  p.defs.append((tg, npc))
  p.vals.append(val)
  p.outputs = [len(p.defs) - 1]
  return p

def test_check_program_catches_a_wrong_value():
  a = np.arange(6, dtype=np.float32).reshape(2, 3)
  check_program(_prog("v0.sum(1, keepdim=False)", "v0.sum(1)", Val((2,), dtypes.float32, 30.0), a))
  with pytest.raises(ProgramMismatch, match="output v1"):
    check_program(_prog("v0.sum(1, keepdim=False)", "v0.sum(1) + 1", Val((2,), dtypes.float32, 30.0), a))

@pytest.mark.filterwarnings("ignore:Mean of empty slice")
def test_the_relu_reference_passes_a_nan_through_as_torch_does():
  # a campaign finding (seed 28, bd50d4488bcf): a mean over no elements is NaN, and the numpy reference's relu
  # (np.where(x > 0, x, 0)) made it 0 where torch's relu and ours keep the NaN
  import torch
  for dt in (np.float32, np.float16):
    x = np.array([np.nan, -0.0, 0.0, -np.inf, np.inf, -1, 2], dtype=dt)
    got = NP_NAMESPACE["_relu"](x)
    assert got.dtype == dt
    np.testing.assert_array_equal(got, torch.relu(torch.from_numpy(x)).numpy())
  empty = np.zeros((0,), np.float16)
  for shard in (None, {0: None}, {0: 0}):
    p = _prog("v0.mean((0,), keepdim=False).relu()", "_relu(np.mean(v0, axis=(0,)))", Val((), dtypes.float16, 1.0), empty)
    p.shard = shard
    check_program(p, devices=("CPU",))

def test_check_program_catches_a_wrong_dtype_or_shape():
  a = np.arange(6, dtype=np.float32).reshape(2, 3)
  with pytest.raises(ProgramMismatch, match="dtype"):
    check_program(_prog("v0.cast(dtypes.int32)", "v0.astype(np.int32)", Val((2, 3), dtypes.float32, 6.0), a))
  with pytest.raises(ProgramMismatch, match="shape"):
    check_program(_prog("v0.sum(1, keepdim=True)", "v0.sum(1)", Val((2,), dtypes.float32, 30.0), a))

def test_check_program_reports_an_exception_with_the_program():
  a = np.arange(6, dtype=np.float32).reshape(2, 3)
  with pytest.raises(ProgramMismatch, match="(?s)raised ArgumentError: reshape.*v1 = v0.reshape"):
    check_program(_prog("v0.reshape((4, 2))", "v0", Val((2, 3), dtypes.float32, 6.0), a), devices=("CPU",))

def test_builder_is_deterministic_and_source_runs():
  for seed in range(5):
    p, q = build_tensor_program(RandomChooser(seed)), build_tensor_program(RandomChooser(seed))
    assert p.source() == q.source()
    env: dict = {}
    exec(p.source().replace("print(", "repr(").replace("DEVICE = 'CPU'", "DEVICE = 'PYTHON'"), env)
    for o, want in zip(p.outputs, run_numpy(p)): assert env[f"v{o}"].shape == want.shape

def test_builder_covers_dtypes_and_empty_shapes():
  progs = [build_tensor_program(RandomChooser(s)) for s in range(60)]
  vals = [v for p in progs for v in p.vals]
  assert {v.dtype for v in vals} == {dtypes.float32, dtypes.float16, dtypes.int32, dtypes.bool}
  assert any(0 in v.shape for v in vals) and any(v.shape == () for v in vals)
  assert any(len(p.outputs) > 1 for p in progs)

_PROGS: list = []
def _programs() -> list:
  if not _PROGS: _PROGS.extend(build_tensor_program(RandomChooser(s), 6) for s in range(400))
  return _PROGS

def _with(kind: str) -> list:
  return [p for p in _programs() if any(isinstance(d, tuple) and kind in d[0] for d in p.defs)]

def test_newer_api_ops_and_gradients_match_torch():
  progs = _with("_grad(")[:3] + _with(".conv2d(")[:2] + _with(".sort(")[:2]
  assert len(progs) >= 5
  for p in progs: check_program(p, devices=("CPU",))

def test_api_steps_cover_the_newer_ops():
  seen = {name for p in _programs() for d in p.defs if isinstance(d, tuple)
          for name in ("sort", "topk", "cummax", "roll", "tril", "triu", "gather", "scatter", ".pad(", "pool2d",
                       "conv2d", "einsum", "interpolate", "conv_transpose2d", "logsumexp", "_grad(") if name in d[0]}
  assert len(seen) >= 14, seen

def test_a_wrong_gradient_is_caught(monkeypatch):
  from tinygrad import Tensor
  prog = _with("_grad(lambda t: t.roll(")[0]
  check_program(prog, devices=("CPU",))
  orig = Tensor.roll
  # the planted bug: roll shifts one further than asked, so its gradient lands one place off
  monkeypatch.setattr(Tensor, "roll", lambda self, shifts, dims=None: orig(self, shifts + 1, dims))
  with pytest.raises(ProgramMismatch): check_program(prog, devices=("CPU",))

# ---- sharded programs: inputs on two devices, numpy the one program they stand for ----

def _split(p) -> bool: return p.shard is not None and any(a is not None for a in p.shard.values())

def _level_cases(n: int) -> list:
  """The tensor level's cases as a campaign draws them: from random bytes (fixed here)."""
  from fuzz.campaign.levels import TensorLevel
  from fuzz.gen.choosers import BytesChooser
  rng, lv = np.random.default_rng(0), TensorLevel()
  return [lv.from_chooser(BytesChooser(rng.integers(0, 256, 400, dtype=np.uint8).tobytes())) for _ in range(n)]

def test_some_programs_are_sharded_and_their_source_runs():
  progs = _programs()
  sharded = [p for p in progs if p.shard is not None]
  assert 0.15 < len(sharded) / len(progs) < 0.35
  axes = [(p.defs[i].shape, a) for p in sharded for i, a in p.shard.items() if a is not None]
  # split inputs on even and on uneven axes (the last device's part the smaller), and replicated ones
  assert any(s[a] % 2 == 0 for s, a in axes) and any(s[a] % 2 for s, a in axes)
  assert any(a is None for p in sharded for a in p.shard.values())
  p = next(p for p in sharded if _split(p))
  src = p.source()
  assert "DEVICE = ('CPU', 'CPU:1')" in src and ".shard(DEVICE, " in src
  env: dict = {}
  exec(src.replace("print(", "repr("), env)
  for o, want in zip(p.outputs, run_numpy(p)):
    assert env[f"v{o}"].device == ("CPU", "CPU:1") and env[f"v{o}"].shape == want.shape

def test_the_tensor_level_runs_sharded_programs_clean():
  """The campaign's tensor level (its check path, on the cpu and python backends) on sharded programs with a split
  input: every output equals numpy's single-array run and comes back on the device set."""
  from fuzz.campaign.levels import TensorLevel
  from fuzz.campaign.backends import BACKENDS
  cases = [c for c in _level_cases(40) if _split(c.program)][:5]
  assert len(cases) == 5
  fails = TensorLevel().check(cases, {"cpu": BACKENDS["cpu"](), "python": BACKENDS["python"]()})
  assert fails == [[] for _ in cases], fails

def test_a_planted_allreduce_bug_is_found_on_sharded_programs(monkeypatch):
  """The multi-device pass's allreduce leaving one device's partial out (tests.fuzz.planted:allreduce_drops_a_shard)
  is found by the tensor level within a few sharded programs; the program it fails is clean without the bug."""
  import tinygrad.schedule.multi as multi
  from fuzz.campaign.levels import TensorLevel
  from fuzz.campaign.backends import BACKENDS
  lv, be = TensorLevel(), {"cpu": BACKENDS["cpu"]()}
  orig = multi._reduce_onto
  monkeypatch.setattr(multi, "_reduce_onto", lambda shards, op, dev, box: orig(shards[:-1], op, dev, box))
  found = None
  for c in [c for c in _level_cases(60) if _split(c.program)][:8]:
    if (f := lv.check([c], be)[0]): found = (c, f); break
  assert found is not None, "the planted allreduce bug was not found in 8 sharded programs"
  c, f = found
  from fuzz.campaign.backends import CBackend
  assert f[0].stage == "tensor-compare" and str(CBackend.SHARD_DEVICES) in f[0].message, f
  monkeypatch.undo()
  assert lv.check([c], be) == [[]]
