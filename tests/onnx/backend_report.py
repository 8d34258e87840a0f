"""The per-category pass table of the ONNX backend suite: `python -m tests.onnx.backend_report [--jobs N] [--md FILE]`.
Every test of the four categories runs (excluded ones too); a skip, a supports_device refusal or an exclusion counts as
a failure. `real` is not run: its models are downloaded at test time."""
import argparse, collections, multiprocessing, sys, warnings

def _run_shard(args: tuple[int, int]) -> list[tuple[str, str, bool]]:
  shard, n = args
  warnings.simplefilter("ignore")
  from tests.onnx.test_backend import cases, run_case
  out = []
  for i, (cat, cls, name) in enumerate(cases()):
    if i % n != shard: continue
    try: ok = run_case(cls, name) is None
    except Exception: ok = False
    out.append((cat, name, ok))
  return out

def main() -> int:
  ap = argparse.ArgumentParser()
  ap.add_argument("--jobs", type=int, default=2)
  ap.add_argument("--md", help="also write the table as markdown to this file")
  args = ap.parse_args()
  with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
    results = [r for part in pool.map(_run_shard, [(i, args.jobs) for i in range(args.jobs)]) for r in part]
  from tests.onnx.exclusions import exclusion
  tally: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
  for cat, name, ok in results: tally[cat][0 if ok else 1] += 1
  lines = ["| category | passed | of | rate |", "|---|---|---|---|"]
  for cat in ("node", "simple", "pytorch-converted", "pytorch-operator"):
    p, f = tally[cat]
    lines.append(f"| {cat} | {p} | {p + f} | {100 * p / max(p + f, 1):.1f}% |")
  lines.append("| real | not run | 9 | (downloaded at test time) |")
  print("\n".join(lines))
  unexpected = [n for _, n, ok in results if ok == (exclusion(n) is not None)]
  if unexpected: print(f"\n{len(unexpected)} tests disagree with tests/onnx/exclusions.py: {unexpected[:20]}")
  if args.md:
    with open(args.md, "w") as fh: fh.write("\n".join(lines) + "\n")
  return 1 if unexpected else 0

if __name__ == "__main__": sys.exit(main())
