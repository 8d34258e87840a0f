"""python -m tests.ops.opinfo [--ops a,b] [--dtypes float32,...] [-v]: every adapter's OpInfo samples against torch, a
line per (op, dtype) that fails or skips, and the totals. The device is the default one (DEV=PYTHON EMULATE=NV runs
them on the NV renderer's exact programs, CPU_LLVM=1 on the CPU's LLVM path: `make test-ops-targets`)."""
import argparse, collections, sys
from tests.ops.opinfo.driver import adapters, cases, opinfos, run_op

def main() -> int:
  ap = argparse.ArgumentParser(prog="python -m tests.ops.opinfo")
  ap.add_argument("--ops", help="comma-separated torch op names (default: every adapter)")
  ap.add_argument("--dtypes", help="comma-separated torch dtype names, e.g. float32,int32 (default: each adapter's)")
  ap.add_argument("-v", action="store_true", help="print every failing sample (default: the first 3 per case)")
  a = ap.parse_args()
  ops, ads = opinfos(), adapters()
  want = set(a.ops.split(",")) if a.ops else None
  dts = set(a.dtypes.split(",")) if a.dtypes else None
  if want is not None and (unknown := want - set(ads)): ap.error(f"no adapter for {sorted(unknown)}")
  tot, skip, bad = collections.Counter(), collections.Counter(), []
  for name, dt in cases():
    if (want is not None and name not in want) or (dts is not None and str(dt).replace("torch.", "") not in dts): continue
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
