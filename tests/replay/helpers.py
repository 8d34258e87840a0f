"""Shared by the replay tests: a small capture of tensor programs, compiled for the C renderer, into a fresh database."""
from __future__ import annotations
import contextlib, pathlib
from typing import Any, Callable, Iterator

def programs() -> list[Callable[[], Any]]:
  from tinygrad import Tensor
  a = lambda: Tensor.arange(24).float().reshape(4, 6)
  return [
    lambda: (a().relu() * 2 + 1).sum(1),
    lambda: a().max(0) + a().mean(),
    lambda: a()[1:, ::2].contiguous(),
    lambda: a().pad(((1, 2), (0, 3))).cat(a().pad(((0, 3), (3, 0))), dim=1),
    lambda: a() @ a().T,
    lambda: (a() > 5).where(a(), -a()).exp2(),
    lambda: a().reshape(2, 12).permute(1, 0).contiguous() * 3,
  ]

def kernels(t: Any) -> list[Any]:
  """The kernel ASTs (SINKs) of a tensor's schedule, in order."""
  from tinygrad.uop import Ops
  return [it.ast for it in t.schedule() if it.ast.op is Ops.SINK]

@contextlib.contextmanager
def capturing(db: str | pathlib.Path, run_id: str, targets: tuple[str, ...] | list[str] = ()) -> Iterator[None]:
  """A capture into `db` as run `run_id` for the block's duration (stopped however the block ends)."""
  from replay import capture
  capture.start(str(db), run_id, targets=list(targets))
  try: yield
  finally: capture.stop()

def capture_programs(db: pathlib.Path, run_id: str = "base") -> list[Any]:
  """Schedule every program and compile each kernel for the C renderer (threads=2) while capturing; returns the
  ProgramSpecs compiled (an independent count of what the capture must hold)."""
  from tinygrad.codegen import get_program
  from tinygrad.renderer.cstyle import CRenderer
  ren = CRenderer(2)
  with capturing(db, run_id): return [get_program(ast, ren) for prog in programs() for ast in kernels(prog())]

def copy_db(db: str | pathlib.Path, dst: pathlib.Path) -> pathlib.Path:
  """A consistent copy of a replay database (sqlite's backup API: the WAL's records included), to tamper with."""
  import sqlite3
  src, out = sqlite3.connect(db), sqlite3.connect(dst)
  src.backup(out)
  src.close(); out.close()
  return dst

def _open_new(path: str, q: Any) -> None:
  from replay.db import DB
  try:
    DB(path, create=True).close()
    q.put(None)
  except Exception as e: q.put(f"{type(e).__name__}: {e}")

def open_new_at_once(folder: str, files: int, procs: int) -> list[str]:
  """`procs` forked processes open each of `files` new databases in `folder` at the same moment (as a capture's xdist
  workers do); the errors they met. Run in a fresh interpreter (`python -m tests.replay.helpers`): forked from a test
  worker late in the suite, the same 800 opens took 100 s against 4-11 s from a fresh one."""
  import multiprocessing as mp
  import replay.db  # noqa: F401  # NOTE: imported once here, not in each of the forked processes
  ctx = mp.get_context("fork")
  errors: list[str] = []
  for i in range(files):
    q = ctx.Queue()
    ps = [ctx.Process(target=_open_new, args=(str(pathlib.Path(folder) / f"new{i}.db"), q)) for _ in range(procs)]
    for p in ps: p.start()
    errors += [e for e in (q.get(timeout=60) for _ in ps) if e]
    for p in ps: p.join()
  return errors

if __name__ == "__main__":
  import json, sys
  print(json.dumps(open_new_at_once(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))))
