"""VIZ traces of the kernels a diff found changed: each compiled again with the captured opts under the viewer's
recorder, with the code checked out here (the new trace) and, given the base checkout, with its code (the old trace), so
`python -m tinygrad.viz OLD NEW` shows them side by side at the first pass where they differ.

  python -m replay.viz DB RUN RID OUT   record kernel record RID of run RUN of DB into the trace OUT with this
                                        checkout's code (what a diff runs in the base checkout for the old trace)
"""
from __future__ import annotations
import os, subprocess, sys
from tinygrad.codegen.record import KernelRecord
from tinygrad.runtime import targets as registry
from replay.db import DB, parse_record
from replay.diff import Report, read_flags, read_opts, read_graph

VIZ_CLASSES = ("changed", "failed")  # the kernel classes a diff writes traces for
OLD_TIMEOUT_S = 300

def record_kernel(body: KernelRecord, out: str) -> str | None:
  """Compile one kernel record with its captured opts under a recorder writing `out`; the error text if it failed (the
  trace then marks the pass that raised)."""
  from tinygrad.helpers import Context
  from tinygrad.codegen import get_program
  from tinygrad.viz.record import Recorder
  flags, opts = read_flags(body.flags), read_opts(body)
  ast = read_graph(body.ast, "the kernel AST")
  rec = Recorder(out, 256 << 20).install()
  try:
    with Context(**flags): get_program(ast, registry.renderer_of(body.renderer), opts)
  except Exception as e:
    rec.fail(e)
    return f"{type(e).__name__}: {e}"
  finally: rec.close()
  return None

def _body(db_path: str, run_id: str, rid: int) -> KernelRecord:
  db = DB(db_path, create=False)
  try: row = next((r for r in db.rows(run_id, "kernel") if r[0] == rid), None)
  finally: db.close()
  if row is None: raise LookupError(f"replay database {db_path} has no record {rid}")
  if not isinstance(rec := parse_record(*row), KernelRecord): raise LookupError(f"record {rid} is not a kernel")
  return rec

def kernel_traces(rep: Report, out_dir: str, base: str | None) -> int:
  """Write OUT_DIR/<kernel group>-new.jsonl (and -old.jsonl with the base checkout's code) for every changed or failed
  kernel of `rep`, one per group, and set each of its outcomes' `viz` to the command that opens them. Returns how many
  kernels got traces."""
  os.makedirs(out_dir, exist_ok=True)
  done: dict[str, str] = {}
  for o in rep.outcomes:
    if o.kind != "kernel" or o.cls not in VIZ_CLASSES: continue
    if o.group not in done: done[o.group] = _traces_for(rep.db, rep.run_id, o.rid, o.group, out_dir, base)
    o.viz = done[o.group]
  return len(done)

def _traces_for(db_path: str, run_id: str, rid: int, group: str, out_dir: str, base: str | None) -> str:
  new, old = os.path.join(out_dir, f"{group}-new.jsonl"), os.path.join(out_dir, f"{group}-old.jsonl")
  try: record_kernel(_body(db_path, run_id, rid), new)
  except Exception as e: return f"no trace: the record cannot be compiled again here ({type(e).__name__}: {e})"
  if base is None: return f"python -m tinygrad.viz {new}  (no old trace: give --viz-base, the base checkout)"
  env = {**os.environ, "PYTHONPATH": os.path.abspath(base)}
  try:
    r = subprocess.run([sys.executable, "-m", "replay.viz", os.path.abspath(db_path), run_id, str(rid),
                        os.path.abspath(old)], cwd=base, env=env, capture_output=True, text=True, timeout=OLD_TIMEOUT_S)
  except subprocess.TimeoutExpired:
    return f"python -m tinygrad.viz {old} {new}  (the old side ran past {OLD_TIMEOUT_S} s: its trace is cut short)"
  if not os.path.exists(old):
    why = (r.stderr.strip().splitlines() or ["it wrote nothing"])[-1]
    return f"python -m tinygrad.viz {new}  (no old trace: the base checkout could not record it: {why[:200]})"
  return f"python -m tinygrad.viz {old} {new}"

def main(argv: list[str]) -> int:
  if len(argv) != 4 or not argv[2].isdigit():
    print("usage: python -m replay.viz DB RUN RID OUT", file=sys.stderr)
    return 2
  err = record_kernel(_body(argv[0], argv[1], int(argv[2])), argv[3])
  if err is not None: print(f"replay.viz: the kernel failed: {err}", file=sys.stderr)
  return 0

if __name__ == "__main__": sys.exit(main(sys.argv[1:]))
