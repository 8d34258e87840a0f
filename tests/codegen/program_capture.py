"""Capture every program a pytest run compiles, and recompile captured programs in a fresh process.

  capture:    python -m pytest -p tests.codegen.program_capture --capture-programs DIR tests/tensor
              (every process, xdist workers included, appends its records to DIR/<pid>.jsonl)
  recompile:  python -m tests.codegen.program_capture DIR
              (rebuilds each AST with spec.eval_pyrender, recompiles it with the recorded opts and flags on the
              device's renderer, and prints a JSON summary: records, distinct inputs, kernels whose store loops
              were cut, mismatches)

Records are tinygrad.codegen.record.KernelRecord, written at the `compiled` checkpoint.
"""
from __future__ import annotations
import difflib, json, os, pathlib, sys
from typing import Any

# ---- capture: a pytest plugin ----

_files: list[Any] = []

def pytest_addoption(parser: Any) -> None:
  parser.addoption("--capture-programs", default="", help="directory: append a KernelRecord per compiled program")

def pytest_configure(config: Any) -> None:
  out = config.getoption("--capture-programs")
  if not out: return
  from tinygrad.codegen.record import record_program
  from tinygrad.uop import hooks
  os.makedirs(out, exist_ok=True)
  f = open(os.path.join(out, f"{os.getpid()}.jsonl"), "a", buffering=1)
  _files.append(f)
  def capture(ast: Any, p: Any, renderer: Any) -> None: f.write(json.dumps(record_program(ast, p).to_json()) + "\n")
  hooks.register("compiled", capture)

def pytest_unconfigure(config: Any) -> None:
  for f in _files: f.close()
  _files.clear()

# ---- recompile ----

def load_records(out: str) -> list[Any]:
  from tinygrad.codegen.record import KernelRecord
  recs = []
  for path in sorted(pathlib.Path(out).glob("*.jsonl")):
    for i, line in enumerate(path.read_text().splitlines()):
      try: recs.append(KernelRecord.from_json(json.loads(line)))
      except ValueError as e: raise ValueError(f"{path}:{i + 1}: {e}") from e
  return recs

def recompile_all(out: str) -> dict[str, Any]:
  """Every distinct captured input compiled again; a mismatch is a record whose source (or name) comes out different,
  or two records of the same input with different results."""
  from spec.roundtrip import eval_pyrender
  from tinygrad.codegen.record import recompile
  from tinygrad.device import Device
  recs = load_records(out)
  by_key: dict[Any, list[Any]] = {}
  for r in recs: by_key.setdefault(r.key(), []).append(r)
  mismatches: list[dict[str, Any]] = []
  cut = 0
  for key, group in by_key.items():
    rec = group[0]
    if len({(r.name, r.src) for r in group}) > 1:
      mismatches.append({"name": rec.name, "why": "one input gave different programs in the capture run"})
      continue
    cut += any(op == "CUT" for op, _, _ in rec.opts)
    try:
      p = recompile(rec, eval_pyrender(rec.ast), Device[rec.device].renderer)
    except Exception as e:
      mismatches.append({"name": rec.name, "why": f"{type(e).__name__}: {e}", "opts": rec.opts})
      continue
    if (p.name, p.src) != (rec.name, rec.src):
      diff = "".join(list(difflib.unified_diff(rec.src.splitlines(True), p.src.splitlines(True), "captured", "recompiled"))[:60])
      mismatches.append({"name": rec.name, "why": "different program", "opts": rec.opts, "diff": diff})
  return {"records": len(recs), "inputs": len(by_key), "cut": cut, "mismatches": mismatches}

if __name__ == "__main__":
  if len(sys.argv) != 2: sys.exit(f"usage: python -m tests.codegen.program_capture DIR\n{__doc__}")
  print(json.dumps(recompile_all(sys.argv[1])))
