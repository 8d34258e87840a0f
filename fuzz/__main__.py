"""`python -m fuzz <subcommand> [options]`. Each subcommand registers a parser builder and a runner in SUBCOMMANDS."""
from __future__ import annotations
import argparse, os, sys
from dataclasses import dataclass
from typing import Any, Callable, Sequence

def _symbolic_args(p: argparse.ArgumentParser) -> None:
  p.add_argument("--seconds", type=float, default=None, help="stop after this many seconds (default 30 without -n)")
  p.add_argument("-n", type=int, default=None, help="stop after this many expressions")
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--depth", type=int, default=4, help="maximum depth of the random expressions")
  p.add_argument("--dtype", default="index", choices=["index", "int8", "int16", "int32"],
                 help="index (unbounded) or a wrapping signed int (int8 is the cheap one for z3)")

def _symbolic_run(a: argparse.Namespace) -> int:
  from fuzz.strategies import IndexExprConfig, wrapping_config
  from fuzz.oracles.symbolic import run_symbolic_fuzz
  from tinygrad.dtype import dtypes
  seconds = a.seconds if a.seconds is not None or a.n is not None else 30.0
  cfg = IndexExprConfig(max_depth=a.depth) if a.dtype == "index" else wrapping_config(getattr(dtypes, a.dtype), a.depth)
  summ = run_symbolic_fuzz(seconds=seconds, n=a.n, seed=a.seed, cfg=cfg, verbose=sys.stdout.isatty())
  print(summ)
  return 1 if summ.failures else 0

# ---- argument types: a bad value is a usage error (exit 2) before any worker starts ----

def _names(kind: str, known: Sequence[str]) -> Callable[[str], tuple[str, ...]]:
  def parse(text: str) -> tuple[str, ...]:
    names = tuple(x.strip() for x in text.split(",") if x.strip())
    if not names: raise argparse.ArgumentTypeError(f"no {kind} given; {kind} are {', '.join(known)}")
    if (bad := [x for x in names if x not in known]):
      raise argparse.ArgumentTypeError(f"unknown {kind} {', '.join(map(repr, bad))}; {kind} are {', '.join(known)}")
    return names
  return parse

def _number(typ: type, lo: float, hi: float | None = None) -> Callable[[str], Any]:
  def parse(text: str) -> Any:
    try: v = typ(text)
    except ValueError: raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if typ is int else 'a number'}")
    if v < lo or (hi is not None and v > hi):
      raise argparse.ArgumentTypeError(f"{text} is outside {lo}..{'' if hi is None else hi}")
    return v
  return parse

def _setup(text: str) -> str:
  """module:function, the function found (the module is imported here; its function is called in the workers)."""
  import importlib
  mod, _, fn = text.partition(":")
  if not mod or not fn: raise argparse.ArgumentTypeError(f"{text!r} is not module:function")
  try: m = importlib.import_module(mod)
  except ImportError as e: raise argparse.ArgumentTypeError(f"cannot import {mod!r}: {e}") from None
  if not callable(getattr(m, fn, None)): raise argparse.ArgumentTypeError(f"{mod} has no function {fn!r}")
  return text

def _backends() -> Callable[[str], tuple[str, ...]]:
  from fuzz.campaign.backends import BACKENDS
  return _names("backends", tuple(BACKENDS))

def _run_args(p: argparse.ArgumentParser) -> None:
  from fuzz.campaign.backends import BACKENDS, DEFAULT_BACKENDS
  from fuzz.campaign.run import LEVEL_NAMES
  p.add_argument("--minutes", type=_number(float, 0.0), default=1.0,
                 help="how long to fuzz (then reductions get --reduce-grace)")
  p.add_argument("--levels", type=_names("levels", LEVEL_NAMES), default=",".join(LEVEL_NAMES), metavar="LIST",
                 help=f"comma list of {', '.join(LEVEL_NAMES)}: each gets an equal share of the workers' time "
                      "(docs/fuzz.md says which kind of change each level catches)")
  p.add_argument("--backends", type=_backends(), default=",".join(DEFAULT_BACKENDS), metavar="LIST",
                 help=f"comma list of {', '.join(BACKENDS)}")
  p.add_argument("--jobs", "-j", type=_number(int, 1), default=os.cpu_count() or 1,
                 help="worker processes (this machine's cores by default)")
  p.add_argument("--out", default="fuzz_out", help="campaign directory: corpus/, findings/, logs/, stats.json; a "
                 "campaign on an existing one continues it")
  p.add_argument("--seed", type=int, default=0, help="the campaign's random seed (inputs, mutations, directed aims)")
  p.add_argument("--batch", type=_number(int, 1), default=16, help="cases per worker job (one shared object per batch "
                 "on cpu)")
  p.add_argument("--step-timeout", type=_number(float, 1.0), default=120.0,
                 help="seconds without progress before a worker is hung")
  p.add_argument("--memory-mb", type=_number(int, 256), default=None,
                 help="a worker's resident memory cap, past it the case is a resource finding (default: the physical "
                      "memory shared by the workers and the parent)")
  p.add_argument("--no-reduce", action="store_true", help="write findings as found, without reducing them")
  p.add_argument("--reduce-checks", type=_number(int, 0), default=300, help="candidate checks per finding")
  p.add_argument("--reduce-grace", type=_number(float, 0.0), default=120.0,
                 help="seconds after the deadline to finish reductions")
  p.add_argument("--spec", type=int, choices=range(4), default=2, help="SPEC level of the workers")
  p.add_argument("--bounds", action="store_true", help="z3-prove every access in bounds (IGNORE_OOB=0): slower")
  p.add_argument("--setup", type=_setup, default=None,
                 help="module:function each worker calls first (planted-bug experiments)")
  p.add_argument("--max-cases", type=_number(int, 1), default=None, help="stop after this many cases")
  p.add_argument("--mutate", type=_number(float, 0.0, 1.0), default=0.5,
                 help="share of inputs mutated from the corpus (0: fresh only)")
  p.add_argument("--no-directed", action="store_true", help="kernel and symbolic levels: no inputs directed at "
                 "rules not matched yet (fuzz/campaign/scheduler.py Director)")
  p.add_argument("--seeds", type=_seeds_dir, default=None, metavar="DIR",
                 help="kernel level: start mutations from the seed kernels in DIR (`python -m fuzz seeds`), each run "
                      "once as it is (half the inputs until all have run)")

def _run_run(a: argparse.Namespace) -> int:
  from fuzz.campaign.run import CampaignConfig, run_campaign
  cfg = CampaignConfig(out=a.out, minutes=a.minutes, backends=a.backends, jobs=a.jobs, levels=a.levels, seed=a.seed,
                       batch=a.batch, step_timeout=a.step_timeout, reduce=not a.no_reduce,
                       reduce_checks=a.reduce_checks, reduce_grace=a.reduce_grace, spec=a.spec, bounds=a.bounds,
                       setup=a.setup, max_cases=a.max_cases, mutate=a.mutate, directed=not a.no_directed,
                       memory_mb=a.memory_mb, seeds=a.seeds)
  summ = run_campaign(cfg)
  print(summ)
  return 0

def _seeds_dir(text: str) -> str:
  """A directory of kernel seeds, every one read (and checked) here, before any worker starts."""
  from fuzz.seeds import read_seeds, SeedError
  try: n = len(read_seeds(text))
  except SeedError as e: raise argparse.ArgumentTypeError(str(e)) from None
  if not n: raise argparse.ArgumentTypeError(f"seeds {text}: no seed files (*.json) there")
  return text

def _seeds_args(p: argparse.ArgumentParser) -> None:
  p.add_argument("--db", required=True, help="a process replay database (make replay-models writes .replay/models.db)")
  p.add_argument("--out", required=True, help="the seed directory (created; seeds already there are kept)")
  p.add_argument("--run", action="append", default=None, help="a run of the database (repeatable; default: every run)")

def _seeds_run(a: argparse.Namespace) -> int:
  from fuzz.seeds import extract, SeedError
  from replay.db import DBError
  try: res = extract(a.db, a.out, a.run)
  except (SeedError, DBError) as e:
    print(f"fuzz seeds: {e}", file=sys.stderr)
    return 2
  print(res)
  return 0

def _repro_args(p: argparse.ArgumentParser) -> None:
  p.add_argument("file", help="a finding (DIR/findings/<id>.json)")
  p.add_argument("--backends", type=_backends(), default=None, metavar="LIST",
                 help="comma list (default: the finding's)")
  p.add_argument("--setup", type=_setup, default=None,
                 help="module:function to call first (the file's own setup is never run)")
  p.add_argument("--timeout", type=_number(float, 1.0), default=300.0, help="seconds the case may take")
  p.add_argument("--memory-mb", type=_number(int, 256), default=None,
                 help="the worker's resident memory cap (default: half the physical memory)")

# `fuzz repro` of a file that is not a readable reproducer (malformed, an env it may not set, a graph outside the
# grammar, no case): neither 0 nor 1, which `git bisect run` reads as good and bad, nor 125 (skip: the file is the same
# at every commit, so all would be skipped); 128 and above abort the bisection, with this one line as the reason
EXIT_BAD_REPRODUCER = 128

def _repro_run(a: argparse.Namespace) -> int:
  """Exit status 1 when the finding still reproduces (the bug is there), 0 when it does not (git bisect run), 128 when
  the file is not a readable reproducer."""
  from fuzz.campaign.run import repro
  from fuzz.campaign.findings import read_reproducer, ReproducerError
  try:
    f = read_reproducer(a.file)
    if f.setup and not a.setup:
      print(f"note: the finding was found with --setup {f.setup}; pass --setup to replay it under the same patch")
    res = repro(a.file, a.backends, a.setup, a.timeout, a.memory_mb)
  except ReproducerError as e:
    print(f"fuzz repro: bad reproducer (exit {EXIT_BAD_REPRODUCER}): {e}", file=sys.stderr)
    return EXIT_BAD_REPRODUCER
  print(res)
  return 1 if res.reproduced else 0

def _report_args(p: argparse.ArgumentParser) -> None:
  p.add_argument("dir", help="a campaign directory")
  p.add_argument("--no-viz", action="store_true", help="do not check each finding again under the VIZ recorder (by "
                 "default its trace goes to DIR/viz/<id>.jsonl and the report gives the command that opens it)")

def _report_run(a: argparse.Namespace) -> int:
  from fuzz.campaign.report import write_report, ReportError
  try: html, md = write_report(a.dir, viz=not a.no_viz)
  except ReportError as e:
    print(f"fuzz report: {e}", file=sys.stderr)
    return 2
  print(f"wrote {html} and {md}")
  return 0

def _ledger_args(p: argparse.ArgumentParser) -> None:
  p.add_argument("--update", action="store_true", help="prove the rules without a current entry and write the ledger")
  p.add_argument("--force", action="store_true", help="with --update: prove every rule again")
  p.add_argument("--only", default=None, help="with --update: only rules whose name contains this")
  p.add_argument("--jobs", "-j", type=int, default=1, help="worker processes for --update")

def _ledger_run(a: argparse.Namespace) -> int:
  from fuzz.ledger.rules import update_ledger, check_ledger, summarize
  if a.update: update_ledger(jobs=a.jobs, force=a.force, only=a.only, progress=print)
  print(summarize())
  problems = check_ledger()
  for p in problems: print("LEDGER:", p)
  return 1 if problems else 0

def _compare_args(p: argparse.ArgumentParser) -> None:
  p.add_argument("--levels", default="symbolic,kernel", help="comma list of symbolic, kernel")
  p.add_argument("--seconds", type=float, default=600.0, help="per mode (both modes run side by side)")
  p.add_argument("--backends", default="python", help="kernel level: backends to check on")
  p.add_argument("--modes", default="guided,unguided",
                 help="guided (the rule-guided scheduler, fuzz/campaign/scheduler.py), unguided (fresh random inputs), "
                      "atheris (libFuzzer: line coverage + rule counters), rules (libFuzzer: rule counters only)")
  p.add_argument("--json", default=None, help="also write the numbers to this file")
  p.add_argument("--out", default=None, help="keep each mode's work directory and its findings as reproducers in "
                 "DIR/<level>/<mode>/findings/ (default: a fresh directory, named in the output)")
  p.add_argument("--setup", default=None, help="module:function called first in every target and worker (a planted "
                 "bug, e.g. tests.fuzz.planted:range_bound_off_by_one)")

def _compare_run(a: argparse.Namespace) -> int:
  import json, tempfile
  from fuzz.measure.guidance import compare_rules, format_compare
  from tinygrad.helpers import atomic_write
  out_dir = a.out or tempfile.mkdtemp(prefix="fuzz-compare-")
  print(f"work directories and findings of each mode: {out_dir}", flush=True)
  out = []
  for lv in (x for x in a.levels.split(",") if x):
    r = compare_rules(lv, a.seconds, a.backends, [m for m in a.modes.split(",") if m], out=out_dir, setup=a.setup)
    print(format_compare(r), flush=True)
    out.append(r)
  if a.json: atomic_write(a.json, json.dumps(out, indent=1))
  return 0

def _mutants_args(p: argparse.ArgumentParser) -> None:
  p.add_argument("--levels", default="symbolic,kernel", help="comma list of symbolic, kernel")
  p.add_argument("--seconds", type=float, default=60.0, help="budget per (mutant, level, mode)")
  p.add_argument("--mutants", default=None, help="comma list of fuzz/measure/mutants.py names (default: all)")
  p.add_argument("--backends", default="python", help="kernel level: backends to check on")
  p.add_argument("--json", default=None, help="also write the numbers to this file")

def _mutants_run(a: argparse.Namespace) -> int:
  import json
  from fuzz.measure.guidance import mutation_score, format_score
  from tinygrad.helpers import atomic_write
  s = mutation_score([x for x in a.levels.split(",") if x], a.seconds, a.mutants.split(",") if a.mutants else None,
                     a.backends, progress=lambda line: print(line, flush=True))
  print(format_score(s))
  if a.json: atomic_write(a.json, json.dumps(s, indent=1))
  return 0

@dataclass(frozen=True)
class Subcommand:
  help: str         # one line in `python -m fuzz --help`
  description: str  # the subcommand's own --help
  add_args: Callable[[argparse.ArgumentParser], None]
  run: Callable[[argparse.Namespace], int]

# name -> its parser and runner; a new subcommand is one more entry here
SUBCOMMANDS: dict[str, Subcommand] = {
  "symbolic": Subcommand("prove simplify() sound on random index expressions with z3",
                         "Random index expressions over variables and ranges are simplified by simplify() and proved "
                         "equal to the original by z3. Exit status 1 when a rewrite is unsound.",
                         _symbolic_args, _symbolic_run),
  "run": Subcommand("a campaign: worker processes, corpus, findings reduced to reproducers",
                    "A fuzz campaign. Worker processes check generated cases of every level (symbolic index "
                    "expressions, kernel ASTs, tensor programs; each level an equal share of the workers' time) "
                    "against the specs and the reference semantics on every backend. Findings are deduplicated by "
                    "signature, reduced, and written as reproducers in OUT/findings/. A progress line every 5 s; at "
                    "the end a summary with each finding's file and the report command. See docs/fuzz.md.",
                    _run_args, _run_run),
  "seeds": Subcommand("kernel seeds for `run --seeds` from a process replay database (real models' kernels)",
                      "Write every distinct kernel AST of a process replay database (make replay-models captures the "
                      "model zoo and the LLM app) into DIR as a seed file of the kernel level (a reproducer's case "
                      "format, read back exec-free). Records that cannot be read or are not legal kernels are counted "
                      "and named. Exit status 2 when the database cannot be read.", _seeds_args, _seeds_run),
  "repro": Subcommand("replay one finding; exit 1 if it still reproduces, 0 if not, 128 if the file is not one",
                      "Replay one finding in a worker process, under the flags it recorded (only the flags that "
                      "change codegen, and SPEC, IGNORE_OOB). Exit status: 0 not reproduced (what `git bisect run` "
                      "reads as good), 1 reproduced (bad), 128 the file is not a readable reproducer (aborts the "
                      "bisection), 2 bad usage.", _repro_args, _repro_run),
  "report": Subcommand("write DIR/report.html and DIR/report.md for a campaign",
                       "Write DIR/report.html (one self-contained page: inline CSS and SVG, no scripts) and "
                       "DIR/report.md for a campaign directory: the configuration and backends, totals, rate and "
                       "rules over time, findings per backend, every finding with its message (the counterexample), "
                       "reduced case and replay command, and rule-hit coverage. Exit status 2 when DIR, its "
                       "campaign.json or its stats.json cannot be read.", _report_args, _report_run),
  "compare": Subcommand("rules hit, guided vs unguided, side by side (fuzz/targets/)",
                        "Rewrite rules hit over time by each mode of a level's atheris target (fuzz/targets/), run "
                        "side by side; each mode's failing inputs are kept as reduced reproducers.",
                        _compare_args, _compare_run),
  "mutants": Subcommand("mutation score: which planted bugs each level finds, guided vs unguided",
                        "The mutation score: each planted bug of fuzz/measure/mutants.py, each level and mode, within "
                        "a fixed time; a kill fails with the mutant and passes without it.",
                        _mutants_args, _mutants_run),
  "ledger": Subcommand("the z3 certificate of every rewrite rule (fuzz/ledger/ledger.json): check it or --update it",
                       "The z3 certificate of every symbolic rewrite rule (fuzz/ledger/ledger.json): proved, "
                       "counterexample, or not expressible. Exit status 1 when the ledger is stale.",
                       _ledger_args, _ledger_run),
}

def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(prog="python -m fuzz", description="fuzzers of the tinygrad harness (docs/fuzz.md)")
  sub = ap.add_subparsers(dest="cmd", required=True)
  for name, sc in SUBCOMMANDS.items():
    sc.add_args(sub.add_parser(name, help=sc.help, description=sc.description,
                               formatter_class=argparse.ArgumentDefaultsHelpFormatter))
  a = ap.parse_args(argv)
  return SUBCOMMANDS[a.cmd].run(a)

if __name__ == "__main__": sys.exit(main())
