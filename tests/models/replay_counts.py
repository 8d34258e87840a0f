"""python -m tests.models.replay_counts DB: what a capture of the models (`make replay-models`: the zoo's run `zoo`, the
LLM app's run `llm`, the ONNX models' run `onnx`) holds, per run: schedules, and kernels per target (renderer) with how
many of the NV and AMD ones compiled. Exits 1 when a run has capture errors or a kernel that did not compile."""
import collections, sys
from replay.db import DB, parse_record
from tinygrad.codegen.record import KernelRecord

def counts(path: str, run_id: str | None = None) -> tuple[int, dict[str, list[int]], list[tuple[str, str]]]:
  """(schedules, renderer -> [kernels, compiled, failed to compile], capture errors) of run `run_id` (default: the
  latest)."""
  db = DB(path, create=False)
  run = db.latest_run().run_id if run_id is None else run_id
  per: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0, 0])
  for rid, kind, ihash, text in db.rows(run, "kernel"):
    rec = parse_record(rid, kind, ihash, text)
    assert isinstance(rec, KernelRecord), f"record {rid}: a kernel row that is not a KernelRecord"
    c = per[rec.renderer]
    c[0] += 1
    if rec.compile is not None: c[1 if rec.compile.get("ok") else 2] += 1
  return db.count(run, "schedule"), dict(per), db.capture_errors(run)

def main(argv: list[str]) -> int:
  if len(argv) != 1:
    print("usage: python -m tests.models.replay_counts DB", file=sys.stderr)
    return 2
  bad = False
  for run in DB(argv[0], create=False).runs():
    schedules, per, errors = counts(argv[0], run.run_id)
    print(f"run {run.run_id}: {schedules} schedules, {sum(c[0] for c in per.values())} kernel records")
    for r, (k, ok, nok) in sorted(per.items()):
      print(f"  {r}: {k} kernels" + (f", {ok} compiled, {nok} failed to compile" if ok or nok else ""))
    for what, err in errors: print(f"  capture error: {what}: {err[:300]}")
    bad |= bool(errors) or any(c[2] for c in per.values())
  return 1 if bad else 0

if __name__ == "__main__": sys.exit(main(sys.argv[1:]))
