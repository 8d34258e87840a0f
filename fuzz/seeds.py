"""Kernel-level seeds from real models: `python -m fuzz seeds --db DB --out DIR` writes every distinct kernel AST a
process replay database holds (`make replay-models` captures the model zoo and the LLM app) as one seed file, and
`python -m fuzz run --seeds DIR` starts the kernel level's mutations from them (fuzz/gen/seeded.py, docs/fuzz.md).

A seed file is a kernel case in the reproducers' state format (fuzz/campaign/levels.py KernelLevel.state): JSON
{"graph": pyrender text, "var_vals": {name: int}, "opts": [Opt.to_json(), ...] or null, "seed": int}, plus "origin"
(where it came from: database, run, record id, kernel name). A seed is untrusted input like a reproducer: `read_seed`
reads at most MAX_SEED_BYTES, parses JSON, reads the graph with spec.roundtrip.eval_pyrender (no exec, no eval, no
pickle) and checks it is a legal kernel (kernel_spec, every range closed); anything else is a SeedError naming the
file and what is wrong."""
from __future__ import annotations
import hashlib, json, os
from dataclasses import dataclass, field
from typing import Any
from tinygrad.helpers import atomic_write
from tinygrad.uop import Ops
from fuzz.gen.kernels import KernelCase

# a seed file larger than this is refused before it is read (the biggest model kernel's text is ~100 KB)
MAX_SEED_BYTES = 4 << 20
# seed files a directory may hold (each is parsed in every worker)
MAX_SEEDS = 5000

class SeedError(ValueError):
  """A seed file or directory that cannot be read as kernel cases: the message names the file and what is wrong."""

def read_seed(path: str) -> KernelCase:
  from fuzz.campaign.levels import KernelLevel
  try:
    with open(path, "rb") as f: raw = f.read(MAX_SEED_BYTES + 1)
  except OSError as e: raise SeedError(f"seed {path}: cannot be read: {e}") from None
  if len(raw) > MAX_SEED_BYTES: raise SeedError(f"seed {path}: larger than {MAX_SEED_BYTES} bytes")
  try: st = json.loads(raw.decode("utf-8"))
  except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
    raise SeedError(f"seed {path}: not UTF-8 JSON: {str(e)[:200]}") from None
  if not isinstance(st, dict) or not isinstance(st.get("graph"), str):
    raise SeedError(f"seed {path}: not a kernel case (a JSON object with a 'graph' text)")
  if not isinstance(st.get("seed", 0), int) or isinstance(st.get("seed", 0), bool):
    raise SeedError(f"seed {path}: 'seed' must be an int")
  level = KernelLevel()
  try: case = level.from_state(st)
  except Exception as e: raise SeedError(f"seed {path}: {type(e).__name__}: {str(e)[:500]}") from None
  if case.ast.op is not Ops.SINK:
    raise SeedError(f"seed {path}: the graph's root is a {case.ast.op.name}, not a kernel's SINK")
  if not level.valid(case): raise SeedError(f"seed {path}: not a legal kernel (kernel_spec, every range closed)")
  return case

def seed_files(d: str) -> list[str]:
  """The seed files (*.json) of directory `d`, sorted; SeedError when it is not a directory or holds too many."""
  if not os.path.isdir(d): raise SeedError(f"seeds {d}: not a directory")
  names = sorted(n for n in os.listdir(d) if n.endswith(".json"))
  if len(names) > MAX_SEEDS: raise SeedError(f"seeds {d}: {len(names)} seed files, more than {MAX_SEEDS}")
  return [os.path.join(d, n) for n in names]

def read_seeds(d: str) -> dict[str, KernelCase]:
  """Seed name (the file's stem) -> its case, for every seed file of `d`; the first bad one is a SeedError."""
  return {os.path.basename(p)[:-len(".json")]: read_seed(p) for p in seed_files(d)}

@dataclass
class Extracted:
  written: int = 0
  existing: int = 0
  records: int = 0
  duplicates: int = 0
  skipped: dict[str, int] = field(default_factory=dict)   # why -> records
  runs: list[str] = field(default_factory=list)
  def __str__(self) -> str:
    skip = "".join(f"\n  skipped {n}: {why}" for why, n in sorted(self.skipped.items(), key=lambda x: -x[1]))
    return (f"fuzz seeds: {self.records} kernel records of run(s) {', '.join(self.runs)}: {self.written} seeds "
            f"written, {self.existing} already there, {self.duplicates} records of a kernel seen before{skip}")

def extract(db_path: str, out: str, runs: list[str] | None = None) -> Extracted:
  """Every distinct kernel AST of the database's runs (default: all) as a seed file in `out`, named by the hash of
  its graph text, with the opts of its first record (capture order: the captured device before --targets). A record
  that cannot be read (replay.db.parse_record), parsed or is not a legal kernel is counted under its reason."""
  from replay.db import DB, parse_record, RecordError
  from tinygrad.codegen.record import KernelRecord
  from tinygrad.uop.pyrender import pyrender
  from fuzz.campaign.levels import KernelLevel
  level, res, seen = KernelLevel(), Extracted(), set()
  db = DB(db_path, create=False)
  all_runs = [r.run_id for r in db.runs()]
  if runs and (missing := [r for r in runs if r not in all_runs]):
    raise SeedError(f"{db_path}: no run {', '.join(missing)}; runs: {', '.join(all_runs)}")
  res.runs = list(runs or all_runs)
  os.makedirs(out, exist_ok=True)
  def skip(why: str) -> None: res.skipped[why] = res.skipped.get(why, 0) + 1
  for run in res.runs:
    for rid, kind, ihash, text in db.rows(run, "kernel"):
      res.records += 1
      try: rec = parse_record(rid, kind, ihash, text)
      except RecordError as e:
        skip(f"bad record: {str(e)[:120]}")
        continue
      assert isinstance(rec, KernelRecord)
      try:
        case = level.from_state({"graph": rec.ast, "opts": [list(o) for o in rec.opts], "var_vals": {}, "seed": 0})
      except Exception as e:
        skip(f"{type(e).__name__}: {str(e)[:120]}")
        continue
      if not level.valid(case):
        skip("not a legal kernel (kernel_spec, closed ranges)")
        continue
      graph = pyrender(case.ast)
      if graph in seen:
        res.duplicates += 1
        continue
      seen.add(graph)
      path = os.path.join(out, hashlib.sha256(graph.encode()).hexdigest()[:16] + ".json")
      if os.path.exists(path):
        res.existing += 1
        continue
      st: dict[str, Any] = {**level.state(case), "origin": {"db": os.path.basename(db_path), "run": run, "record": rid,
                                                           "kernel": rec.name, "renderer": rec.renderer.split("(")[0]}}
      atomic_write(path, json.dumps(st, indent=1) + "\n")
      res.written += 1
  return res

__all__ = ["SeedError", "read_seed", "read_seeds", "seed_files", "extract", "Extracted", "MAX_SEED_BYTES", "MAX_SEEDS"]
