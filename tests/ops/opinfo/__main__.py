"""python -m tests.ops.opinfo [--ops a,b] [-v]: every adapter's OpInfo samples against torch, a line per (op, dtype)
that fails or skips, and the totals."""
import argparse, collections, sys
from tests.ops.opinfo.driver import adapters, cases, opinfos, run_op

def main() -> int:
  ap = argparse.ArgumentParser(prog="python -m tests.ops.opinfo")
  ap.add_argument("--ops", help="comma-separated torch op names (default: every adapter)")
  ap.add_argument("-v", action="store_true", help="print every failing sample (default: the first 3 per case)")
  a = ap.parse_args()
  ops, ads = opinfos(), adapters()
  want = set(a.ops.split(",")) if a.ops else None
  tot, skip, bad = collections.Counter(), collections.Counter(), []
  for name, dt in cases():
    if want is not None and name not in want: continue
    r = run_op(ops[name], ads[name], dt)
    tot["passed"] += r.passed; tot["failed"] += len(r.failed); skip.update(r.skipped)
    if r.failed:
      bad.append((name, dt))
      print(f"FAIL {name} {str(dt).replace('torch.', '')}: {r.passed} passed, {len(r.failed)} failed")
      for s, e in (r.failed if a.v else r.failed[:3]): print(f"    {s}\n      " + " | ".join(ln for ln in e.splitlines() if ln.strip())[:300])
  print(f"\n{tot['passed']} samples passed, {tot['failed']} failed, {sum(skip.values())} skipped; "
        f"{len(bad)} failing (op, dtype) cases")
  for why, n in skip.most_common(): print(f"  skipped {n}: {why}")
  return 1 if bad else 0

if __name__ == "__main__": sys.exit(main())
