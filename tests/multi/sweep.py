"""The multi-device sweep of tests/tensor (`pytest tests/tensor --shard N:AXIS`, tests/tensor/conftest.py): every tensor
of a test lives on CPU:0..CPU:N-1. A tensor made from data (a list, a numpy array) is split on AXIS where it has that
axis (AXIS -1: its last), else replicated; every other tensor (constants, random draws, results) on all N devices as
the ops make it. The tests' numpy references are unchanged, so each test checks the multi-device result against numpy
as it checks the single-device one."""
from __future__ import annotations
from typing import Any
import numpy as np
import tinygrad.tensor as T
from tinygrad.schedule.multi import is_multi_device, split_bounds, multi

def parse(spec: str) -> tuple[int, int | None]:
  n, _, axis = spec.partition(":")
  if not n.isdigit() or int(n) < 1 or axis.lower() not in ("none", *map(str, range(-1, 8))):
    raise ValueError(f"--shard {spec!r}: N:AXIS with N >= 1 and AXIS a number (-1 the last) or none")
  return int(n), None if axis.lower() == "none" else int(axis)

def shard_everything(monkeypatch: Any, spec: str) -> tuple[str, ...]:
  n, axis = parse(spec)
  devs = T._canon_devices(tuple(f"CPU:{i}" for i in range(n)), "--shard")
  canon, make = T._canon_device, T._buffer_uop
  def default_devices(device: Any) -> Any: return devs if device is None else canon(device)
  def split_data(arr: np.ndarray, dtype: Any, device: Any, raw: bool = False) -> Any:
    if not is_multi_device(device) or axis is None or arr.ndim == 0 or not -arr.ndim <= axis < arr.ndim:
      return make(arr, dtype, device, raw)
    a = axis % arr.ndim
    bounds = split_bounds(arr.shape[a], len(device))
    parts = [make(arr[(slice(None),) * a + (slice(b, e),)], dtype, d, raw) for d, (b, e) in zip(device, bounds)]
    return multi(parts, a, bounds)
  monkeypatch.setattr(T, "_canon_device", default_devices)
  monkeypatch.setattr(T, "_buffer_uop", split_data)
  return devs
