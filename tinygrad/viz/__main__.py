"""python -m tinygrad.viz TRACE [TRACE]: serve the viewer for one saved trace, or two side by side (docs/viz.md)."""
from __future__ import annotations
import argparse, sys
from tinygrad.viz.trace import TraceError, load

def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(prog="python -m tinygrad.viz", description="View one VIZ trace, or two side by side.")
  ap.add_argument("traces", nargs="+", help="one or two trace files (JSON lines, written by VIZ=1)")
  ap.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default VIZ_PORT; 0 picks a free one)")
  ap.add_argument("--no-browser", action="store_true", help="print the address only (default VIZ_BROWSER)")
  ap.add_argument("--kernel", default=None, help="open at this kernel (by name); with two traces, at the first pass "
                  "where they differ")
  ap.add_argument("--pass", dest="pass_name", default=None, help="open at the first pass of this name")
  ap.add_argument("--check", action="store_true", help="read the traces, print a summary and exit (no server)")
  args = ap.parse_args(argv)
  if len(args.traces) > 2: ap.error("give one trace, or two to compare")
  if args.check: return check(args.traces)
  from tinygrad.viz.server import serve_paths
  return serve_paths(args.traces, args.port, False if args.no_browser else None, args.kernel, args.pass_name)

def check(paths: list[str]) -> int:
  rc = 0
  for p in paths:
    try: tr = load(p)
    except TraceError as e:
      print(f"error: {e}", file=sys.stderr)
      rc = 2
      continue
    steps = sum(len(x.steps) for x in tr.passes.values())
    print(f"{p}: {len(tr.groups)} groups, {len(tr.passes)} passes, {steps} steps, {len(tr.nodes)} nodes, "
          f"{len(tr.launches)} launches")
    for w in tr.warnings: print(f"warning: {p}: {w}", file=sys.stderr)
  return rc

if __name__ == "__main__": sys.exit(main())
