"""`python -m fuzz <subcommand> [options]`. Each subcommand registers a parser builder and a runner in SUBCOMMANDS."""
from __future__ import annotations
import argparse, sys
from typing import Callable

def _symbolic_args(p: argparse.ArgumentParser) -> None:
  p.add_argument("--seconds", type=float, default=None, help="stop after this many seconds (default 30 without -n)")
  p.add_argument("-n", type=int, default=None, help="stop after this many expressions")
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--depth", type=int, default=4, help="maximum depth of the random expressions")
  p.add_argument("--dtype", default="index", choices=["index", "int8", "int16", "int32"],
                 help="index (unbounded) or a wrapping signed int (int8 is the cheap one for z3)")

def _symbolic_run(a: argparse.Namespace) -> int:
  from fuzz.strategies import IndexExprConfig, wrapping_config
  from fuzz.symbolic import run_symbolic_fuzz
  from tinygrad.dtype import dtypes
  seconds = a.seconds if a.seconds is not None or a.n is not None else 30.0
  cfg = IndexExprConfig(max_depth=a.depth) if a.dtype == "index" else wrapping_config(getattr(dtypes, a.dtype), a.depth)
  summ = run_symbolic_fuzz(seconds=seconds, n=a.n, seed=a.seed, cfg=cfg, verbose=sys.stdout.isatty())
  print(summ)
  return 1 if summ.failures else 0

def _ledger_args(p: argparse.ArgumentParser) -> None:
  p.add_argument("--update", action="store_true", help="prove the rules without a current entry and write the ledger")
  p.add_argument("--force", action="store_true", help="with --update: prove every rule again")
  p.add_argument("--only", default=None, help="with --update: only rules whose name contains this")
  p.add_argument("--jobs", "-j", type=int, default=1, help="worker processes for --update")

def _ledger_run(a: argparse.Namespace) -> int:
  from fuzz.ledger import update_ledger, check_ledger, summarize
  if a.update: update_ledger(jobs=a.jobs, force=a.force, only=a.only, progress=print)
  print(summarize())
  problems = check_ledger()
  for p in problems: print("LEDGER:", p)
  return 1 if problems else 0

# name -> (help, add arguments, run); a new subcommand is one more entry here
SUBCOMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]] = {
  "symbolic": ("prove simplify() sound on random index expressions with z3", _symbolic_args, _symbolic_run),
  "ledger": ("the z3 certificate of every rewrite rule (fuzz/ledger.json): check it, or --update it", _ledger_args,
             _ledger_run),
}

def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(prog="python -m fuzz", description="fuzzers of the tinygrad harness")
  sub = ap.add_subparsers(dest="cmd", required=True)
  for name, (hlp, add_args, _) in SUBCOMMANDS.items(): add_args(sub.add_parser(name, help=hlp))
  a = ap.parse_args(argv)
  return SUBCOMMANDS[a.cmd][2](a)

if __name__ == "__main__": sys.exit(main())
