"""Whole-repo facts: tinygrad never imports the harness, and every op has a full_spec rule and a printer."""
import ast, pathlib
import pytest
from tinygrad.uop import Ops
from spec import full_spec

ROOT = pathlib.Path(__file__).resolve().parent.parent
HARNESS = {"spec", "replay", "fuzz"}

def imported_modules(path: pathlib.Path) -> set[str]:
  mods: set[str] = set()
  for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
    if isinstance(node, ast.Import): mods |= {a.name for a in node.names}
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module: mods.add(node.module)
    # importlib.import_module("spec...") and __import__("spec") by a literal name count too
    elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
      fn = node.func
      name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
      if name in ("import_module", "__import__"): mods.add(node.args[0].value)
  return mods

def test_tinygrad_never_imports_the_harness():
  files = sorted((ROOT / "tinygrad").rglob("*.py"))
  assert len(files) > 5
  bad = {str(f.relative_to(ROOT)): sorted(m for m in imported_modules(f) if m.split(".")[0] in HARNESS) for f in files}
  assert {k: v for k, v in bad.items() if v} == {}

def test_layering_check_catches_an_import(tmp_path):
  p = tmp_path / "x.py"
  p.write_text("import os\nfrom spec.verify import type_verify\nimportlib.import_module('replay')\n")
  assert {"spec.verify", "replay"} <= imported_modules(p)

@pytest.mark.parametrize("op", list(Ops), ids=lambda o: o.name)
def test_every_op_has_a_full_spec_rule(op):
  assert op in full_spec.pdict, f"full_spec has no rule for {op}: no node of this op could ever be built under SPEC=2"

def test_every_op_is_printable_by_pyrender():
  pyrender = pytest.importorskip("tinygrad.uop.pyrender")
  from tinygrad.uop.ops import UOp
  from tinygrad.dtype import dtypes
  from tinygrad.helpers import Context
  missing = []
  for op in Ops:
    # a bare node of each op (mostly illegal, so built with the construction check off): the printer must still print it
    with Context(SPEC=0): u = UOp(op, dtypes.void, (), None) if op is not Ops.CONST else UOp.const(dtypes.int32, 1)
    try: text = pyrender.pyrender(u)
    except Exception as e: missing.append(f"{op}: {type(e).__name__}: {e}")
    else: assert "ast = " in text
  assert missing == []
