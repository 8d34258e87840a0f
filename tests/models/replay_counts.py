"""python -m tests.models.replay_counts DB: what a capture of the zoo (`make replay-models`) holds, for its latest run:
schedules, and kernels per target (renderer) with how many of the NV and AMD ones compiled. Exits 1 when the run has
capture errors or a kernel that did not compile."""
import collections, sys
from replay.db import DB, parse_record
from tinygrad.codegen.record import KernelRecord

def counts(path: str) -> tuple[int, dict[str, list[int]], list[tuple[str, str]]]:
  db = DB(path, create=False)
  run = db.latest_run()
  per: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0, 0])  # renderer -> [kernels, compiled, failed]
  for rid, kind, ihash, text in db.rows(run.run_id, "kernel"):
    rec = parse_record(rid, kind, ihash, text)
    assert isinstance(rec, KernelRecord), f"record {rid}: a kernel row that is not a KernelRecord"
    c = per[rec.renderer]
    c[0] += 1
    if rec.compile is not None: c[1 if rec.compile.get("ok") else 2] += 1
  return db.count(run.run_id, "schedule"), dict(per), db.capture_errors(run.run_id)

def main(argv: list[str]) -> int:
  if len(argv) != 1:
    print("usage: python -m tests.models.replay_counts DB", file=sys.stderr)
    return 2
  schedules, per, errors = counts(argv[0])
  print(f"zoo capture: {schedules} schedules, {sum(c[0] for c in per.values())} kernel records")
  for r, (k, ok, bad) in sorted(per.items()):
    print(f"  {r}: {k} kernels" + (f", {ok} compiled, {bad} failed to compile" if ok or bad else ""))
  for what, err in errors: print(f"  capture error: {what}: {err[:300]}")
  return 1 if errors or any(c[2] for c in per.values()) else 0

if __name__ == "__main__": sys.exit(main(sys.argv[1:]))
