"""Misbehaving checkpoint readers for the tests of the loader fuzz targets (fuzz/targets/load_common.py), planted with
`--setup=tests.nn.planted_loaders:misbehave`. Each reader behaves once the target's warm-up over its seeds is done:
safe_load raises a ValueError, torch_load sleeps past the time cap, gguf_load opens the file $PLANTED_FILE for
writing."""
import os, time
import importlib
from fuzz.targets.load_common import LOADERS, SEEDS

def _after_seeds(fmt: str, name: str, act) -> None:
  mod = importlib.import_module(LOADERS[fmt][0])
  orig, seeds, calls = getattr(mod, name), len(os.listdir(os.path.join(SEEDS, f"load_{fmt}"))), [0]
  def planted(data, **kw):
    calls[0] += 1
    if calls[0] > seeds: act()
    return orig(data, **kw)
  setattr(mod, name, planted)

def _write() -> None:
  with open(os.environ["PLANTED_FILE"], "w") as f: f.write("written by a checkpoint reader")

def _raise() -> None: raise ValueError("planted: a reader error that is not a CheckpointError")

def misbehave() -> None:
  _after_seeds("safetensors", "safe_load", _raise)
  _after_seeds("torch", "torch_load", lambda: time.sleep(60))
  _after_seeds("gguf", "gguf_load", _write)
