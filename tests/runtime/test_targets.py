"""The target registry (tinygrad/runtime/targets.py): one place answers which renderer, compiler and arch a target has,
what EMULATE stands for, and how a host kernel is launched; arch names are written nowhere else."""
import ast, pathlib, re
from concurrent.futures import ThreadPoolExecutor
import numpy as np
import pytest
from tinygrad.helpers import Context
from tinygrad.runtime import targets as registry

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
ARCH = re.compile(r"sm_\d{2,3}|gfx\d{3,4}[0-9a-f]?|AMD_GFX\d{3,4}[0-9A-F]?")
# the registry and its data, and the renderers' own tables (limits and tensor cores per arch)
ARCH_HOMES = {"tinygrad/runtime/targets.py", "tinygrad/renderer/archs.py", "tinygrad/renderer/cuda.py",
              "tinygrad/renderer/tensor_cores.py"}

def arch_literals(path: pathlib.Path) -> list[tuple[int, str]]:
  """(line, text) of each string constant that is an arch name; docstrings are prose and do not count."""
  tree = ast.parse(path.read_text(), filename=str(path))
  docs = {id(n.body[0].value) for n in ast.walk(tree)
          if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body
          and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
  return [(n.lineno, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
          and id(n) not in docs and ARCH.fullmatch(n.value)]

def test_arch_literals_live_only_in_the_registry_and_the_renderer_tables():
  files = [p for d in ("tinygrad", "spec", "replay", "fuzz", "bench") for p in sorted((ROOT / d).rglob("*.py"))]
  assert len(files) > 50
  bad = {str(p.relative_to(ROOT)): lits for p in files if str(p.relative_to(ROOT)) not in ARCH_HOMES
         and (lits := arch_literals(p))}
  assert bad == {}, f"arch names belong in the target registry (tinygrad/runtime/targets.py): {bad}"

def test_arch_literal_check_sees_code_and_skips_docstrings(tmp_path):
  p = tmp_path / "x.py"
  p.write_text('"""gfx942 and sm_90 in prose."""\ndef f(a="sm_90"):\n  """sm_80"""\n  return a or ("gfx1201", "gfx")\n')
  assert sorted(v for _, v in arch_literals(p)) == ["gfx1201", "sm_90"]

@pytest.mark.parametrize("name", sorted(registry.TARGETS))
def test_every_target_renderer_is_rebuilt_from_its_identity(name):
  r = registry.renderer(name, threads=3) if registry.TARGETS[name].host else registry.renderer(name)
  assert f"{type(r).__module__}.{type(r).__qualname__}" == registry.TARGETS[name].renderer_class
  assert registry.parse_identity(r.identity)[0] == name and registry.target_of(r.identity) == name
  assert registry.renderer_of(r.identity).identity == r.identity

def test_gpu_renderers_take_the_arch_flags_as_their_default():
  with Context(NV_ARCH=registry.NV_SUPPORTED_ARCHS[0]): assert registry.renderer("NV").arch == registry.NV_SUPPORTED_ARCHS[0]
  with Context(NV_ARCH=""): assert registry.renderer("NV").arch == registry.NV_DEFAULT_ARCH
  for a in registry.AMD_ARCHS: assert registry.renderer("AMD", a).arch == a == registry.amd_arch(a).name
  assert registry.archs("AMD") == tuple(registry.AMD_ARCHS) and registry.NV_DEFAULT_ARCH in registry.archs("NV")

def test_emulation_maps_both_ways():
  for key, (dev, arch) in registry.EMULATED.items():
    r = registry.renderer("PYTHON", key)
    assert r.base is not None and r.base.device == dev and (arch == "" or r.base.arch == arch)
    assert registry.renderer_of(r.identity).identity == r.identity
    assert registry.emulated(registry.emulate_key(dev, r.base.arch)) == (dev, r.base.arch)
  assert registry.renderer("PYTHON").base is None
  with pytest.raises(registry.UnknownTarget, match="emulates"): registry.emulate_key("METAL", "m3")
  with pytest.raises(ValueError, match="not a known target"): registry.emulated("AMD_GFX000")

def test_unknown_targets_and_identities_name_what_is_wrong():
  with pytest.raises(registry.UnknownTarget, match="unknown target 'TPU'"): registry.renderer("TPU")
  with pytest.raises(registry.UnknownTarget, match="not one this version has"):
    registry.parse_identity("tests.Double(device=CPU, arch=, threads=1, 0123abcd)")
  with pytest.raises(registry.UnknownTarget, match="not in the form"): registry.parse_identity("CRenderer")
  assert registry.target_of("nonsense") == "?"

KERNEL = """
void k(float* restrict out, const float* restrict a, int n, int core_id) {
  for (int i = core_id; i < n; i += 4) out[i] = a[i] * 2.0f + (float)core_id;
}
"""

@pytest.mark.parametrize("pool", [False, True], ids=["serial", "pool"])
def test_host_launcher_calls_once_per_core_with_buffers_vars_and_core_id(pool):
  fxn, keep = registry.load_host("CPU", "k", registry.compiler("CPU").compile(KERNEL))
  a, out, n = np.arange(10, dtype=np.float32), np.full(12, -1, np.float32), 10
  with ThreadPoolExecutor(4) as ex:
    registry.launch_host(fxn, [out.ctypes.data, a.ctypes.data], [n], registry.host_cores("k", (4, 1, 1)),
                         ex if pool else None)
  want = np.concatenate([a * 2 + np.arange(n) % 4, [-1, -1]]).astype(np.float32)
  np.testing.assert_array_equal(out, want)
  assert keep is not None

def test_host_launch_refuses_a_gpu_grid():
  with pytest.raises(ValueError, match="local_size"): registry.host_cores("k", (4, 1, 1), (2, 1, 1))
  with pytest.raises(ValueError, match="only global_size"): registry.host_cores("k", (4, 2, 1))
  with pytest.raises(registry.UnknownTarget, match="do not run on the host"): registry.load_host("NV", "k", b"")
