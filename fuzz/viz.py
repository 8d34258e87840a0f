"""A finding's reduced case checked again under the VIZ recorder, so `python -m tinygrad.viz TRACE` opens it at the pass
that failed (the viewer opens a trace at its first failed pass). `python -m fuzz report` writes one trace per finding
into DIR/viz/<id>.jsonl, each in its own process (a finding may crash or hang its process: the trace keeps what was
written until then).

  python -m fuzz.viz FINDING OUT [--setup module:function]

The finding file is untrusted and read as `fuzz repro` reads it (nothing from it runs); its `setup` hook is run only
when passed on the command line, as with `fuzz repro --setup`.
"""
from __future__ import annotations
import argparse, os, subprocess, sys
from typing import Any

TIMEOUT_S = 120

def record_finding(path: str, out: str, setup: str | None = None) -> str:
  """Check the finding's case on its backends under a recorder writing `out`; returns what the check said."""
  from tinygrad.helpers import Context, ContextVar
  from tinygrad.viz.record import Recorder
  from fuzz.findings import read_reproducer, read_case
  from fuzz.levels import LEVELS
  from fuzz.backends import BACKENDS, open_backends
  from fuzz.worker import run_setup
  f = read_reproducer(path)
  case = read_case(path, f)
  run_setup(setup)
  backends, missing = open_backends([b for b in f.backends if b in BACKENDS])
  flags = {k: ContextVar.declared()[k].parse(v) for k, v in f.env.items()}
  rec = Recorder(out, 256 << 20).install()
  try:
    with Context(**flags): fails = LEVELS[f.signature.level]().check([case], backends)[0]
    said = "; ".join(f"{x.backend}/{x.stage}: {x.message[:200]}" for x in fails) or "not reproduced (no failure)"
    # NOTE: a backend catches the exception of a pass that raised, so that pass is still open here
    if rec.passes: rec.fail(RuntimeError(said))
  except Exception as e:
    said = f"{type(e).__name__}: {e}"
    rec.fail(e)
  finally: rec.close()
  return said + (f" (backends not here: {', '.join(missing)})" if missing else "")

def trace_findings(d: str, ids: list[str], timeout: float = TIMEOUT_S) -> dict[str, str]:
  """Record each finding DIR/findings/<id>.json into DIR/viz/<id>.jsonl in a process of its own; finding id -> the
  command that opens its trace, or why there is none."""
  os.makedirs(os.path.join(d, "viz"), exist_ok=True)
  out: dict[str, str] = {}
  for i in ids:
    src, dst = os.path.join(d, "findings", f"{i}.json"), os.path.join(d, "viz", f"{i}.jsonl")
    note = ""
    try:
      r = subprocess.run([sys.executable, "-m", "fuzz.viz", src, dst], capture_output=True, text=True, timeout=timeout,
                         env={**os.environ, "VIZ": "0", "PROFILE": "0"})
      if r.returncode != 0: note = f" (its check ended with exit {r.returncode}: the trace holds what came before)"
    except subprocess.TimeoutExpired: note = f" (its check ran past {timeout:.0f} s: the trace holds what came before)"
    out[i] = f"python -m tinygrad.viz {dst}{note}" if os.path.exists(dst) else f"no trace: the check wrote none{note}"
  return out

def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(prog="python -m fuzz.viz", description=__doc__.split("\n\n")[0] if __doc__ else None)
  ap.add_argument("finding")
  ap.add_argument("out")
  ap.add_argument("--setup", default=None, help="module:function run first (a planted bug), as `fuzz repro --setup`")
  a = ap.parse_args(argv)
  from fuzz.findings import ReproducerError
  try: said: Any = record_finding(a.finding, a.out, a.setup)
  except ReproducerError as e:
    print(f"fuzz.viz: bad reproducer: {e}", file=sys.stderr)
    return 2
  print(said)
  return 0

if __name__ == "__main__": sys.exit(main())
