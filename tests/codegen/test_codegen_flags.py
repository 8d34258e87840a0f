"""The registry of flags that change generated code (helpers.codegen_flags), and the cache keys that read it."""
import ast, pathlib, re
from tinygrad import helpers
from tinygrad.codegen import search
from tinygrad.codegen.opt import Opt, OptOps
from tinygrad.device import Compiler
from tinygrad.helpers import Context, ContextVar, codegen_flags
from tinygrad.renderer.cstyle import CRenderer
from tests.codegen.test_opt import matmul_ast

ROOT = pathlib.Path(__file__).resolve().parents[2]
# flags that codegen, renderer and backend modules read without changing a kernel's source: why, per flag
NOT_CODEGEN = {
  "DEBUG": "printing only", "CACHELEVEL": "which caches are read, not what they hold", "CACHEDB": "where the cache is",
  "CC": "the C compiler: changes the binary, not the source (in CCompiler's cachekey)",
  "COMPILE_ONLY": "whether programs run, not what they are", "HCQ_VISIBLE_DEVICES": "which GPU runs it",
}

def helper_flags_read(path: pathlib.Path) -> set[str]:
  names = set()
  for node in ast.walk(ast.parse(path.read_text())):
    if isinstance(node, ast.ImportFrom) and node.module == "tinygrad.helpers": names |= {a.name for a in node.names}
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "helpers": names.add(node.attr)
  return {n for n in names if isinstance(getattr(helpers, n, None), ContextVar)}

def test_every_flag_read_by_codegen_or_a_renderer_is_registered():
  files = [*(ROOT / "tinygrad" / "codegen").glob("*.py"), *(ROOT / "tinygrad" / "renderer").glob("*.py"),
           *(ROOT / "tinygrad" / "runtime").glob("ops_*.py"), ROOT / "tinygrad" / "runtime" / "targets.py",
           ROOT / "tinygrad" / "engine" / "realize.py"]
  read = {n: f.name for f in files for n in helper_flags_read(f)}
  assert {"DEVECTORIZE", "TRANSCENDENTAL", "NOOPT", "BEAM", "EMULATE", "CPU_THREADS"} <= set(read)
  unregistered = {n: f for n, f in read.items() if not getattr(helpers, n).codegen and n not in NOT_CODEGEN}
  assert unregistered == {}, "declare these flags with codegen=True (or say in NOT_CODEGEN why they change no code)"

def test_codegen_flags_follow_context():
  flags = dict(codegen_flags())
  assert {"DEVECTORIZE", "TRANSCENDENTAL", "NOOPT", "BEAM"} <= set(flags) and "DEBUG" not in flags and "SPEC" not in flags
  assert list(flags) == sorted(flags)
  with Context(NOOPT=1, DEVECTORIZE=2):
    inner = dict(codegen_flags())
    assert inner["NOOPT"] == 1 and inner["DEVECTORIZE"] == 2
  assert dict(codegen_flags()) == flags

def test_compile_cache_key_has_renderer_and_flags():
  c = Compiler("cc-test")
  k = c.cache_key("src", CRenderer(2).identity)
  assert k != c.cache_key("src", CRenderer(4).identity) and k != c.cache_key("src")
  with Context(TRANSCENDENTAL=2): assert c.cache_key("src", CRenderer(2).identity) != k
  assert c.cache_key("src", CRenderer(2).identity) == k

def test_compile_cache_misses_on_another_renderer(tmp_path):
  class Counting(Compiler):
    def compile(self, src): return src.encode() + b"!"
  c = Counting("counting-test")
  with Context(CACHEDB=str(tmp_path / "c.db"), CACHELEVEL=2):
    assert c.compile_cached("x", CRenderer(2).identity) == b"x!" and c.compiles == 1
    c.compile_cached("x", CRenderer(2).identity)
    assert (c.compiles, c.cache_hits) == (1, 1)
    c.compile_cached("x", CRenderer(3).identity)
    with Context(NOOPT=1): c.compile_cached("x", CRenderer(2).identity)
    assert (c.compiles, c.cache_hits) == (3, 1)

def test_beam_cache_key_has_renderer_identity_and_flags(monkeypatch):
  keys = []
  def fake_get(table, key):
    keys.append(key)
    return [Opt(OptOps.UPCAST, 0, 2)]
  monkeypatch.setattr(search, "diskcache_get", fake_get)
  with Context(CACHELEVEL=2):
    search.beam_search(matmul_ast(), CRenderer(2), 2)
    search.beam_search(matmul_ast(), CRenderer(4), 2)
    with Context(DEVECTORIZE=1): search.beam_search(matmul_ast(), CRenderer(2), 2)
  assert len(set(keys)) == 3 and all(CRenderer(2).identity in k or CRenderer(4).identity in k for k in keys)

def test_env_vars_doc_lists_exactly_the_codegen_flags():
  text = (ROOT / "docs" / "env_vars.md").read_text()
  section = text.split("## Flags that change generated code", 1)[1].split("\n## ", 1)[0]
  # the paragraph that is only a list of flag names
  para = next(p for p in section.split("\n\n") if re.fullmatch(r"(`[A-Z_]+`(, |\.))+", p.strip()))
  listed = set(re.findall(r"`([A-Z_]+)`", para))
  assert listed == {k for k, v in ContextVar._registry.items() if v.codegen}

def test_env_vars_doc_lists_exactly_the_schedule_flags():
  text = (ROOT / "docs" / "env_vars.md").read_text()
  section = text.split("## Flags that change how a graph is scheduled", 1)[1].split("\n## ", 1)[0]
  para = next(p for p in section.split("\n\n") if re.fullmatch(r"(`[A-Z_]+`(, |\.))+", p.strip()))
  listed = set(re.findall(r"`([A-Z_]+)`", para))
  assert listed == {k for k, v in ContextVar._registry.items() if v.schedule} and "ALLREDUCE" in listed
