"""Whole-repo facts: tinygrad never imports the harness, its modules import each other without cycles, and every op
has a full_spec rule and a printer."""
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

def private_tinygrad_names(path: pathlib.Path) -> list[str]:
  """The `_`-prefixed tinygrad names a file uses: imported (`from tinygrad.x import _y`, `import tinygrad._x`), or read
  as an attribute of a tinygrad module or class it imported (`sym._y`, `ContextVar._y`)."""
  tree = ast.parse(path.read_text(), filename=str(path))
  bound: set[str] = set()
  out: list[str] = []
  for node in ast.walk(tree):
    if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "tinygrad":
      out += [f"{node.lineno}: from {node.module} import {a.name}" for a in node.names if a.name.startswith("_")]
      bound |= {a.asname or a.name for a in node.names}
    elif isinstance(node, ast.Import):
      for a in node.names:
        if a.name.split(".")[0] != "tinygrad": continue
        if any(part.startswith("_") for part in a.name.split(".")): out.append(f"{node.lineno}: import {a.name}")
        bound.add(a.asname or "tinygrad")
  for node in ast.walk(tree):
    if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
      base = node.value
      while isinstance(base, ast.Attribute): base = base.value
      if isinstance(base, ast.Name) and base.id in bound: out.append(f"{node.lineno}: {ast.unparse(node)}")
  return out

def test_replay_and_fuzz_use_no_private_tinygrad_name():
  files = [p for d in ("replay", "fuzz") for p in sorted((ROOT / d).rglob("*.py"))]
  assert len(files) > 20
  bad = {str(f.relative_to(ROOT)): names for f in files if (names := private_tinygrad_names(f))}
  assert bad == {}, f"give the caller a public API instead: {bad}"

def test_private_name_check_sees_imports_and_attributes(tmp_path):
  p = tmp_path / "x.py"
  p.write_text("from tinygrad.uop import symbolic as sym, _hidden\nimport tinygrad._x\nfrom os import _exit\n"
               "from tinygrad.helpers import ContextVar\nsym._floordiv(1, 2)\nContextVar._registry\nself._mine\n")
  assert sorted(n.split(": ")[1] for n in private_tinygrad_names(p)) == sorted([
    "from tinygrad.uop import _hidden", "import tinygrad._x", "sym._floordiv", "ContextVar._registry"])

# ---- import cycles among tinygrad modules ----

# NOTE: cycles another change is removing right now; the lead deletes an entry when that change lands. Each is the set of
# modules of one strongly connected component.
KNOWN_CYCLES: list[set[str]] = []

def module_name(path: pathlib.Path, root: pathlib.Path) -> str:
  parts = list(path.relative_to(root).with_suffix("").parts)
  return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

def import_graph(root: pathlib.Path, package: str = "tinygrad") -> dict[str, set[str]]:
  """module -> the modules of `package` it imports, anywhere in the file (module level, functions, methods). `from a
  import b` names module a.b when that is a module, else a; relative imports are resolved."""
  files = {module_name(p, root): p for p in sorted((root / package).rglob("*.py"))}
  graph: dict[str, set[str]] = {}
  for name, path in files.items():
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    deps: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
      if isinstance(node, ast.Import): deps |= {a.name for a in node.names}
      elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
          up = pkg.split(".")[:len(pkg.split(".")) - (node.level - 1)]
          base = ".".join(up + ([node.module] if node.module else []))
        deps |= {f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names}
    graph[name] = {d for d in deps if d in files and d != name}
  return graph

def import_cycles(graph: dict[str, set[str]]) -> list[set[str]]:
  """The strongly connected components with more than one module (Tarjan, iterative)."""
  index: dict[str, int] = {}
  low: dict[str, int] = {}
  stack: list[str] = []
  on_stack: set[str] = set()
  out: list[set[str]] = []
  for root in sorted(graph):
    if root in index: continue
    work = [(root, iter(sorted(graph[root])))]
    index[root] = low[root] = len(index)
    stack.append(root); on_stack.add(root)
    while work:
      v, it = work[-1]
      w = next(it, None)
      if w is not None:
        if w not in index:
          index[w] = low[w] = len(index)
          stack.append(w); on_stack.add(w)
          work.append((w, iter(sorted(graph[w]))))
        elif w in on_stack: low[v] = min(low[v], index[w])
        continue
      work.pop()
      if work: low[work[-1][0]] = min(low[work[-1][0]], low[v])
      if low[v] == index[v]:
        comp: set[str] = set()
        while True:
          x = stack.pop(); on_stack.discard(x); comp.add(x)
          if x == v: break
        if len(comp) > 1: out.append(comp)
  return out

def test_no_import_cycles_in_tinygrad():
  cycles = import_cycles(import_graph(ROOT))
  new = [sorted(c) for c in cycles if c not in KNOWN_CYCLES]
  assert new == [], f"import cycles (function-level imports count too): {new}"
  # a KNOWN entry that is gone must leave the list, so it cannot hide a new cycle later
  gone = [sorted(k) for k in KNOWN_CYCLES if k not in cycles]
  assert gone == [], f"these KNOWN_CYCLES no longer exist; remove them: {gone}"

def test_cycle_finder_sees_function_level_imports(tmp_path):
  pkg = tmp_path / "tinygrad"
  (pkg / "sub").mkdir(parents=True)
  (pkg / "__init__.py").write_text("")
  (pkg / "sub" / "__init__.py").write_text("from tinygrad.sub.a import f\n")
  (pkg / "sub" / "a.py").write_text("def f():\n  from .b import g\n  return g\n")
  (pkg / "sub" / "b.py").write_text("from tinygrad.sub import a\ndef g(): pass\n")
  (pkg / "c.py").write_text("import tinygrad.sub.b\n")
  graph = import_graph(tmp_path)
  assert graph["tinygrad.sub.a"] == {"tinygrad.sub.b"} and graph["tinygrad.sub.b"] == {"tinygrad.sub.a"}
  assert import_cycles(graph) == [{"tinygrad.sub.a", "tinygrad.sub.b"}]

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
