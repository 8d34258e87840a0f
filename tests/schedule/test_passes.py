"""rangeify is a sequence of named graph_rewrite passes: each shows in the rewrite hooks and TRACK_MATCH_STATS; the
scheduler imports nothing from codegen, falls back on no missing module, and never raises the recursion limit."""
import ast, pathlib
import numpy as np
from tinygrad import Tensor
from tinygrad.uop import Ops, hooks
from tinygrad.uop.ops import UOp, match_stats
from tinygrad.helpers import Context
from tinygrad.schedule.rangeify import rangeify, reshape_index, linear_index, RangeifyContext, lower_kernels
from tinygrad.dtype import dtypes, Invalid
from tinygrad.uop import AxisType
from tests.schedule.test_rangeify import inputs, const

ROOT = pathlib.Path(__file__).resolve().parents[2]
RANGEIFY_PASSES = ["rangeify: strip tensor graph", "rangeify: push indices", "rangeify: simplify kernels, stores to KERNELs"]

def test_rangeify_passes_fire_the_rewrite_hook_in_order():
  (a, b), _ = inputs((4, 8), (4, 8))
  names: list[str] = []
  fn = lambda name, before, after: names.append(name)
  hooks.register("rewrite_done", fn)
  try: rangeify(UOp.sink((a * b).r(Ops.ADD, (1,)) + const(1.0, (4, 1))))
  finally: hooks.unregister("rewrite_done", fn)
  assert [n for n in names if n in RANGEIFY_PASSES] == RANGEIFY_PASSES

def test_rangeify_passes_show_in_match_stats():
  (a,), _ = inputs((3, 5))
  with Context(TRACK_MATCH_STATS=1): rangeify(UOp.sink(a.permute((1, 0)).contiguous()))
  pushed = match_stats["rangeify: push indices"]
  assert any("push_index" in rule and m >= 1 for rule, (m, _, _) in pushed.items())

def _imports(path: pathlib.Path) -> set[str]:
  mods: set[str] = set()
  for node in ast.walk(ast.parse(path.read_text())):
    if isinstance(node, ast.Import): mods |= {a.name for a in node.names}
    elif isinstance(node, ast.ImportFrom) and node.module: mods.add(node.module)
  return mods

def test_schedule_does_not_import_codegen():
  files = sorted((ROOT / "tinygrad" / "schedule").rglob("*.py"))
  assert files
  # function-level imports count: ast.walk sees every import statement in the file
  assert {f.name: sorted(m for m in _imports(f) if m.startswith("tinygrad.codegen")) for f in files} == \
    {f.name: [] for f in files}

def test_no_import_fallbacks_and_no_recursion_limit():
  for f in [ROOT / "tinygrad/schedule/rangeify.py", ROOT / "spec/plugin.py", ROOT / "tinygrad/engine/schedule.py"]:
    handlers = [n for n in ast.walk(ast.parse(f.read_text())) if isinstance(n, ast.ExceptHandler)]
    assert not [h for h in handlers if isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError")], f
  for f in (ROOT / "tinygrad" / "schedule").rglob("*.py"): assert "setrecursionlimit" not in f.read_text(), f

# ---- the index algebra is the symbolic rules ----

def test_reshape_index_round_trip_simplifies_to_the_ranges():
  r0, r1, r2 = UOp.range(4, 0, AxisType.LOOP), UOp.range(6, 1, AxisType.LOOP), UOp.range(5, 2, AxisType.LOOP)
  flat = reshape_index((r0, r1, r2), (4, 6, 5), (120,))
  assert reshape_index(flat, (120,), (4, 6, 5)) == (r0, r1, r2)
  # a split and a merge of different axes: (4, 6) -> (2, 12) -> (4, 6)
  assert reshape_index(reshape_index((r0, r1), (4, 6), (2, 12)), (2, 12), (4, 6)) == (r0, r1)

def test_masked_index_keeps_its_mask_through_index_math():
  r = UOp.range(8, 0, AxisType.LOOP)
  valid = r < UOp.const(dtypes.index, 5)
  (lin,) = reshape_index((r.valid(valid), UOp.const(dtypes.index, 0).valid(valid)), (8, 1), (8,))
  assert lin.is_masked() and lin.src[0] is valid and lin.src[1] is r
  never = UOp.const(dtypes.index, Invalid)
  assert linear_index((never, r), (3, 8)).arg is Invalid

def test_closed_form_arange_has_no_loop_and_reads_nothing():
  t = Tensor.arange(20)
  (red,) = [u for u in t.uop.toposort() if u.op is Ops.REDUCE_AXIS]
  lowered = lower_kernels(UOp.sink(red), RangeifyContext({red: None}))
  assert not [u for u in lowered.toposort() if u.op in (Ops.REDUCE, Ops.LOAD)]
  np.testing.assert_equal(Tensor.arange(20).numpy(), np.arange(20))

# ---- stores of assigns ----

def test_assign_through_strided_view_masks_the_store():
  x = Tensor.zeros(7).contiguous().realize()
  x[1::3] = Tensor([1.0, 2.0])
  np.testing.assert_equal(x.numpy(), [0, 1, 0, 0, 2, 0, 0])

def test_assign_reading_its_target_elsewhere_goes_through_a_temporary():
  x = Tensor(np.arange(6, dtype=np.float32)).contiguous().realize()
  x.assign(x.flip(0) + 1)
  items = x.schedule()
  assert len(items) == 2, "the flipped read of x must be stored before x is overwritten"
  x.realize()
  np.testing.assert_equal(x.numpy(), np.arange(6)[::-1] + 1)
