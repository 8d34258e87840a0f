"""Does a plain campaign find a planted bug of every kind? `python -m tests.fuzz.planted_levels [--minutes 2]
[--seeds 0,1,2]` (`make fuzz-planted`; slow: about 4 minutes per run, not in make test).

For each level, a bug that only that level's cases can show is planted in the workers with `--setup` (nothing else
tells the campaign which level to favour), and `python -m fuzz run --minutes M --seed S --setup BUG --out DIR` runs
with every other option at its default (every level, every default backend, one worker per core). The bug counts as
found when DIR/findings/ holds a finding of its level that replays with the bug (`fuzz repro --setup BUG`: exit 1) and
not without it (exit 0): a bug the compiler has anyway does not count. Prints one line per (level, seed) and a table;
exit status 1 when any run missed its bug.

  symbolic  fuzz.measure.mutants:mod_mod_any              (x%a)%b folds to x%b without its side condition (b divides a)
  kernel    tests.fuzz.planted:c_lt_as_le         the C renderer prints `a < b` as `a <= b`
  tensor    tests.fuzz.planted:cat_pieces_reversed  Tensor.cat joins its pieces in reverse order
"""
from __future__ import annotations
import argparse, json, os, subprocess, sys, tempfile, time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLANTED = {"symbolic": "fuzz.measure.mutants:mod_mod_any", "kernel": "tests.fuzz.planted:c_lt_as_le",
           "tensor": "tests.fuzz.planted:cat_pieces_reversed"}

def fuzz(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
  return subprocess.run([sys.executable, "-m", "fuzz", *args], cwd=REPO, capture_output=True, text=True,
                        timeout=timeout, env={**os.environ, "PYTHONPATH": REPO})

def check(level: str, seed: int, minutes: float, out: str) -> dict[str, object]:
  """One plain campaign with the level's bug planted; what it found of that level, and when."""
  setup = PLANTED[level]
  t0 = time.time()
  run = fuzz("run", "--minutes", str(minutes), "--seed", str(seed), "--setup", setup, "--out", out)
  res: dict[str, object] = {"level": level, "seed": seed, "bug": setup, "found": False, "seconds": None,
                            "run_exit": run.returncode, "wall": round(time.time() - t0)}
  with open(os.path.join(out, "campaign.json")) as f: meta = json.load(f)
  res["cases"] = {n: v["cases"] for n, v in meta.get("levels", {}).items()}
  fdir = os.path.join(out, "findings")
  found = []
  for name in sorted(os.listdir(fdir)) if os.path.isdir(fdir) else []:
    with open(os.path.join(fdir, name)) as f: d = json.load(f)
    if d["signature"]["level"] == level: found.append((d["first_seen"], name, d["signature"]))
  for first_seen, name, sig in sorted(found):
    path = os.path.join(fdir, name)
    with_bug, without = fuzz("repro", path, "--setup", setup), fuzz("repro", path)
    if with_bug.returncode == 1 and without.returncode == 0:
      res.update(found=True, seconds=round(first_seen - meta["started"], 1), finding=sig)
      break
  return res

def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--minutes", type=float, default=2.0)
  ap.add_argument("--seeds", default="0,1,2")
  ap.add_argument("--levels", default=",".join(PLANTED))
  a = ap.parse_args(argv)
  rows = []
  with tempfile.TemporaryDirectory(prefix="fuzz-planted-") as d:
    for level in a.levels.split(","):
      for seed in (int(s) for s in a.seeds.split(",")):
        r = check(level, seed, a.minutes, os.path.join(d, f"{level}-{seed}"))
        print(json.dumps(r), flush=True)
        rows.append(r)
  print(f"\nplain `python -m fuzz run --minutes {a.minutes:g}` ({os.cpu_count()} cores), a bug planted per level:")
  print("| level | bug | seed | found | first seen | cases per level |")
  print("|---|---|---|---|---|---|")
  for r in rows:
    when = f"{r['seconds']} s" if r["found"] else "-"
    print(f"| {r['level']} | `{r['bug']}` | {r['seed']} | {'yes' if r['found'] else 'MISSED'} | {when} | {r['cases']} |")
  return 0 if all(r["found"] for r in rows) else 1

if __name__ == "__main__": sys.exit(main())
