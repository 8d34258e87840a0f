"""Loaded at interpreter start-up only where `python -m replay capture` put this directory on PYTHONPATH, because the
installed package metadata has no `replay` entry point (an install older than it: `pip install -e .` adds it). It
calls replay's plugin right after `import tinygrad` finishes, as the entry point would, in every Python process the
captured command starts. It imports nothing of tinygrad itself: a process that never imports tinygrad is untouched.
NOTE: it shadows any other sitecustomize module on the path for those processes."""
import importlib.abc, importlib.util, os, sys

class _AfterTinygrad(importlib.abc.MetaPathFinder):
  def find_spec(self, name, path=None, target=None):  # type: ignore[no-untyped-def]
    if name != "tinygrad": return None
    sys.meta_path.remove(self)
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None: return spec
    run = spec.loader.exec_module
    def exec_module(module):  # type: ignore[no-untyped-def]
      run(module)
      from replay.plugin import install
      install()
    spec.loader.exec_module = exec_module  # type: ignore[method-assign]
    return spec

if os.environ.get("CAPTURE_PROCESS_REPLAY", "0") not in ("", "0"): sys.meta_path.insert(0, _AfterTinygrad())
