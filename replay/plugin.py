"""The `tinygrad.plugins` entry point `replay` (pyproject.toml): `import tinygrad` calls `install`, which starts the
capture when CAPTURE_PROCESS_REPLAY=1 and does nothing otherwise (importing only this module and replay.capture)."""
from __future__ import annotations
from typing import Any

def install() -> Any:
  from tinygrad.helpers import CAPTURE_PROCESS_REPLAY
  if not CAPTURE_PROCESS_REPLAY.value: return None
  from replay import capture
  return capture.install()
