"""`python -m replay capture|diff|runs`: see replay/__init__.py and docs/replay.md."""
from __future__ import annotations
import argparse, contextlib, importlib.metadata, os, pathlib, signal, sqlite3, subprocess, sys, time
from typing import Any
from tinygrad.helpers import atomic_write
from replay.db import DB, DBError, default_path, git_commit, new_run_id
from tinygrad.runtime.targets import TARGETS

ROOT = pathlib.Path(__file__).resolve().parent.parent

def _entry_point_installed() -> bool:
  return any(ep.name == "replay" for ep in importlib.metadata.entry_points(group="tinygrad.plugins"))

# the signals a capture passes on to the command it runs (its whole process group), and how long the group then has to
# end before it is killed
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
GRACE_S = 10.0

def _group_alive(pgid: int) -> bool:
  try: os.killpg(pgid, 0)
  except ProcessLookupError: return False
  except PermissionError: return True
  return True

def run_command(cmd: list[str], env: dict[str, str]) -> tuple[int, int | None]:
  """Run the command in a process group of its own. A SIGINT, SIGTERM or SIGHUP to the capture goes to that whole group
  (the command's children too, e.g. pytest-xdist workers); what is left of the group GRACE_S seconds later is killed,
  so nothing goes on writing into the database. Returns (the command's exit status, the signal that ended it, or
  None)."""
  got: list[int] = []
  proc: subprocess.Popen[bytes] | None = None
  def forward(sig: int, frame: Any) -> None:
    got.append(sig)
    if proc is not None:
      with contextlib.suppress(ProcessLookupError): os.killpg(proc.pid, sig)
  old = {s: signal.signal(s, forward) for s in FORWARDED}
  try:
    proc = subprocess.Popen(cmd, env=env, process_group=0)
    # NOTE: a signal that came while the command was starting has not reached it yet
    if got: forward(got[-1], None)
    while True:
      try:
        rc = proc.wait(timeout=GRACE_S if got else None)
        break
      except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError): os.killpg(proc.pid, signal.SIGKILL)
    if got:
      # NOTE: the command's first process ended; its children (in its group) get the rest of the grace, then SIGKILL
      deadline = time.monotonic() + GRACE_S
      while _group_alive(proc.pid) and time.monotonic() < deadline: time.sleep(0.05)
      with contextlib.suppress(ProcessLookupError): os.killpg(proc.pid, signal.SIGKILL)
  finally:
    for s, h in old.items(): signal.signal(s, h)
  return rc, (got[0] if got else None)

def capture(args: argparse.Namespace) -> int:
  if not args.command: sys.exit("replay capture: give the command after --, e.g. python -m replay capture -- make test")
  targets = [t.strip().upper() for t in args.targets.split(",") if t.strip()]
  if (bad := [t for t in targets if t not in TARGETS]): sys.exit(f"replay capture: unknown target(s) {bad}; "
                                                                 f"targets are {sorted(TARGETS)}")
  path = os.path.abspath(args.db or default_path())
  run_id = args.run or new_run_id()
  try:
    db = DB(path)
    if (old := next((r for r in db.runs() if r.run_id == run_id), None)) is not None:
      when = time.strftime("%Y-%m-%d %H:%M", time.localtime(old.started))
      print(f"replay capture: run {run_id} is in {path} already (captured {when} at commit {old.git_commit[:12]}, "
            f"{db.count(run_id)} records); its records would mix with this command's under that commit: choose "
            "another --run, or leave --run out for a new id", file=sys.stderr)
      return 2
    db.add_run(run_id, git_commit(), args.command, targets)
  except (DBError, sqlite3.Error, OSError) as e: return _cannot_read("capture", path, e)
  env = {**os.environ, "CAPTURE_PROCESS_REPLAY": "1", "REPLAY_DB": path, "REPLAY_RUN": run_id,
         "REPLAY_TARGETS": ",".join(targets)}
  if not _entry_point_installed():
    # NOTE: the installed metadata predates the `replay` entry point: load the plugin through a start-up hook instead
    print("replay capture: the `tinygrad.plugins` entry point `replay` is not installed (pip install -e . adds it); "
          "loading the capture through replay/startup/sitecustomize.py", file=sys.stderr)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "replay" / "startup"), str(ROOT),
                                         *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
  st = time.perf_counter()
  rc, sig = run_command(args.command, env)
  secs = time.perf_counter() - st
  if sig is not None:
    print(f"replay capture: {signal.Signals(sig).name}: ended the command (its process group, the command's children "
          "included); what it recorded until then stays in the run", file=sys.stderr)
  n_k, n_s, errs = db.count(run_id, "kernel"), db.count(run_id, "schedule"), db.capture_errors(run_id)
  db.close()
  size = sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))
  print(f"replay capture: run {run_id} into {path}: {n_k} kernels, {n_s} schedules (distinct inputs), "
        f"{len(errs)} capture errors; the command took {secs:.1f} s and exited {rc}; database {size / 1e6:.1f} MB",
        file=sys.stderr)
  for what, err in errs[:10]: print(f"  capture error: {what}: {err[:300]}", file=sys.stderr)
  return 128 + sig if sig is not None else rc

def diff(args: argparse.Namespace) -> int:
  from replay.diff import diff as run_diff
  from replay.report import render_html
  try:
    mode = "fresh" if args.fresh_opts else "captured" if args.captured_opts else "both"
    from replay import compare
    cap = compare.REF_MAX_ELEMENTS
    # NOTE: for this diff only (main() may be called again in the same process)
    if args.budget_elements is not None: compare.REF_MAX_ELEMENTS = args.budget_elements
    try: rep = run_diff(args.db, args.against, mode=mode, target=args.target, limit=args.limit, progress=sys.stderr)
    finally: compare.REF_MAX_ELEMENTS = cap
  except (FileNotFoundError, LookupError, ValueError, RuntimeError, sqlite3.Error) as e:
    return _cannot_read("diff", args.db, e)
  print(rep.summary())
  if args.viz:
    from replay.viz import kernel_traces
    n = kernel_traces(rep, args.viz, args.viz_base)
    print(f"VIZ traces of {n} changed or failed kernel(s) in {args.viz}" + ("" if args.viz_base else
          " (new side only: --viz-base names the base checkout for the old side)"))
  if args.html:
    # NOTE: readable by the group and others: CI uploads the report as an artifact
    atomic_write(args.html, render_html(rep), mode=0o644)
    print(f"HTML report: {args.html}")
  if args.assert_no_change and not rep.all_ok():
    bad = sum(o.cls not in ("unchanged", "renamed") for o in rep.outcomes)
    opts = sum(o.opts in ("changed", "failed") for o in rep.outcomes)
    print(f"replay diff: --assert-no-change: {bad} record(s) are neither unchanged nor renamed"
          + (f", {opts} get other opts from the heuristics (or those failed)" if opts else "")
          + (f", {len(rep.capture_errors)} capture errors" if rep.capture_errors else ""), file=sys.stderr)
    return 1
  return 0

def _positive(text: str) -> int:
  try: n = int(text)
  except ValueError: raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
  if n < 1: raise argparse.ArgumentTypeError(f"must be at least 1, not {n}")
  return n

def _ref_default() -> int:
  from replay.compare import REF_MAX_ELEMENTS
  return REF_MAX_ELEMENTS

def _cannot_read(cmd: str, path: str | None, e: BaseException) -> int:
  """Exit status 2 (the database or run could not be read), with one line on stderr."""
  msg = " ".join(str(e).split())
  if isinstance(e, sqlite3.Error): msg = f"replay database {path or default_path()} cannot be read: {msg}"
  print(f"replay {cmd}: {msg}", file=sys.stderr)
  return 2

def runs(args: argparse.Namespace) -> int:
  try:
    db = DB(args.db or default_path(), create=False)
    lines = [f"{r.run_id}  commit {r.git_commit[:12]}  {time.strftime('%Y-%m-%d %H:%M', time.localtime(r.started))}  "
             f"{db.count(r.run_id, 'kernel')} kernels, {db.count(r.run_id, 'schedule')} schedules  targets "
             f"{r.targets}  {r.argv[:100]}" for r in db.runs()]
  except (FileNotFoundError, ValueError, RuntimeError, OverflowError, OSError, sqlite3.Error) as e:
    return _cannot_read("runs", args.db, e)
  for line in lines: print(line)
  return 0

def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(prog="python -m replay", description=__doc__)
  sub = ap.add_subparsers(dest="cmd", required=True)
  db_help = f"the replay database (default: REPLAY_DB, else {default_path()})"
  c = sub.add_parser("capture", help="run a command and record every schedule and kernel it compiles")
  c.add_argument("--db", default=None, help=db_help)
  c.add_argument("--targets", default="", help="also render every kernel for these targets, compile-only "
                 "(NV,AMD,CPU_LLVM)")
  c.add_argument("--run", default=None, help="the run id (default: a new one); one already in the database is refused")
  c.add_argument("command", nargs=argparse.REMAINDER, help="-- the command to run")
  d = sub.add_parser("diff", help="recompile every record of a run with the code checked out now and classify it")
  d.add_argument("--db", default=None, help=db_help)
  d.add_argument("--against", default=None, help="the run to diff against (default: the latest)")
  d.add_argument("--assert-no-change", action="store_true", help="exit 1 when anything is not unchanged or renamed, "
                 "or the heuristics give a kernel other opts now")
  d.add_argument("--html", default=None, help="write a self-contained HTML report here")
  d.add_argument("--viz", default=None, metavar="DIR", help="write VIZ traces of every changed or failed kernel here "
                 "(the HTML report gives the command that opens each old/new pair side by side)")
  d.add_argument("--viz-base", default=None, metavar="CHECKOUT", help="with --viz: the base checkout whose code "
                 "records the old side of each pair")
  d.add_argument("--target", default=None, choices=sorted(TARGETS), help="diff the programs captured for this target")
  opts = d.add_mutually_exclusive_group()
  opts.add_argument("--fresh-opts", action="store_true", help="only choose the opts again (heuristics, or BEAM where "
                    "the record was captured with it) instead of replaying the captured ones")
  opts.add_argument("--captured-opts", action="store_true", help="only replay the captured opts (the default also "
                    "re-runs the heuristics and shows the kernels that get other opts now)")
  d.add_argument("--limit", type=int, default=None, help="diff only the first N records (the report says so)")
  d.add_argument("--budget-elements", type=_positive, default=None, metavar="N",
                 help="the most elements (the product of a kernel's range extents) the ULP budget's reference "
                      "evaluates; a bigger changed kernel's outputs are compared exactly (default "
                      f"{_ref_default()}; the reference holds about 70 bytes an element)")
  r = sub.add_parser("runs", help="list the runs in the database")
  r.add_argument("--db", default=None, help=db_help)
  args = ap.parse_args(argv)
  if args.cmd == "capture":
    if args.command and args.command[0] == "--": args.command = args.command[1:]
    return capture(args)
  return diff(args) if args.cmd == "diff" else runs(args)

if __name__ == "__main__": sys.exit(main())
