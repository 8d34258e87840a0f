"""`python -m spec check FILE [--stage tensor|kernel|program|full]`: verify a pyrender file.

Exit status: 0 legal, 1 illegal (the SpecError is printed), 2 unreadable (a missing file, or text outside pyrender's
grammar).
A text that evaluates to a list is a linear program and is checked in list order; a UOp is checked over its toposort.
"""
from __future__ import annotations
import argparse, sys
from typing import Sequence
from tinygrad.uop.ops import UOp

STAGES = ("tensor", "kernel", "program", "full")

def load(path: str) -> UOp | list[UOp]:
  """The graph in a pyrender file; OSError / PyrenderSyntaxError (a ValueError) when it cannot be read."""
  from spec.roundtrip import eval_pyrender
  with open(path, encoding="utf-8") as f: text = f.read()
  return eval_pyrender(text)

def check(path: str, stage: str) -> int:
  from spec import SPECS, type_verify, SpecError
  try: graph = load(path)
  except (OSError, UnicodeDecodeError, ValueError, ImportError) as e:
    print(f"{path}: unreadable: {type(e).__name__}: {e}", file=sys.stderr)
    return 2
  n = len(graph) if isinstance(graph, list) else len(graph.toposort())
  try: type_verify(graph, SPECS[stage], stage)
  except SpecError as e:
    print(f"{path}: ILLEGAL at the {stage} stage\n{e}")
    return 1
  print(f"{path}: legal at the {stage} stage ({n} nodes checked)")
  return 0

def main(argv: Sequence[str] | None = None) -> int:
  ap = argparse.ArgumentParser(prog="python -m spec", description="Check graphs against the stage specs.")
  sub = ap.add_subparsers(dest="cmd", required=True)
  c = sub.add_parser("check", help="verify a pyrender file")
  c.add_argument("file")
  c.add_argument("--stage", choices=STAGES, default="full", help="which spec to check against (default: full)")
  args = ap.parse_args(argv)
  return check(args.file, args.stage)

if __name__ == "__main__": sys.exit(main())
