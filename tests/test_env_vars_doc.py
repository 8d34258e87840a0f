"""Every env flag is declared once (tinygrad/helpers.py) and listed in docs/env_vars.md."""
import importlib, os, re
from tinygrad.helpers import ContextVar

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "env_vars.md")

def _tinygrad_modules() -> list[str]:
  mods = []
  for root, _, files in os.walk(os.path.join(ROOT, "tinygrad")):
    for f in sorted(files):
      if f.endswith(".py"): mods.append(os.path.relpath(os.path.join(root, f), ROOT)[:-3].replace(os.sep, ".").removesuffix(".__init__"))
  return mods

def _import_all() -> None:
  broken = []
  for m in _tinygrad_modules():
    try: importlib.import_module(m)
    except ModuleNotFoundError as e:
      # an optional third-party dependency (a GPU driver binding, llvmlite, ...) may be absent; our own modules may not
      if (e.name or "").startswith("tinygrad"): broken.append(f"{m}: {e!r}")
    except Exception as e: broken.append(f"{m}: {type(e).__name__}: {e}")
  assert not broken, "tinygrad modules that fail to import:\n" + "\n".join(broken)

def _documented() -> set[str]:
  text = open(DOC).read()
  table = text.split("## Declared flags", 1)[1].split("\n## ", 1)[0]
  return set(re.findall(r"^\| `([A-Z0-9_]+)` \|", table, flags=re.M))

def test_every_declared_flag_is_documented():
  _import_all()
  declared = set(ContextVar._registry) - {k for k in ContextVar._registry if k.startswith("TG_TEST_")}
  missing = sorted(declared - _documented())
  assert not missing, f"flags declared in tinygrad/helpers.py but missing from docs/env_vars.md: {missing}"

def test_every_documented_flag_is_declared():
  _import_all()
  stale = sorted(_documented() - set(ContextVar._registry))
  assert not stale, f"docs/env_vars.md lists flags that are not declared in tinygrad/helpers.py: {stale}"

def test_flags_are_declared_only_in_helpers():
  offenders = []
  for m in _tinygrad_modules():
    path = os.path.join(ROOT, *m.split(".")) + ".py"
    if not os.path.exists(path): path = os.path.join(ROOT, *m.split("."), "__init__.py")
    if m == "tinygrad.helpers": continue
    if re.search(r"\bContextVar\(", open(path).read()): offenders.append(m)
  assert not offenders, f"env flags must be declared in tinygrad/helpers.py only; found ContextVar(...) in {offenders}"
