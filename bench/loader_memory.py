"""Peak memory of the checkpoint loaders (safe_load, torch_load, gguf_load) on the hostile inputs of issue 22 and on
plain files of each format, each load in a child process under an address-space cap and a time cap
(tests/nn/capped.py), peak traced by tracemalloc (numpy arrays and tinygrad's host buffers included).

  python bench/loader_memory.py [--mem-mb 4096] [--seconds 60] [--plain-mb 256] [--bomb-mb 1600] [--repo PATH]

Prints one row per input: how the load ended (ok, the error class, timeout at the cap), the peak traced memory and
its ratio to the bytes of the data the file holds (the reference: a loader that copies the data once is near 1.0).
--repo runs the loaders of another checkout (the before column: a `git worktree` or `git archive` of an older
commit); the inputs are built with this checkout's tests/nn/hostile_checkpoints.py either way."""
from __future__ import annotations
import argparse, os, pathlib, sys, tempfile, time
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tests.nn import hostile_checkpoints as H  # noqa: E402
from tests.nn.capped import run_capped, REPO  # noqa: E402

TORCH = "from tinygrad.nn.state import torch_load\nr = torch_load(PATH)\n"
SAFE = "from tinygrad.nn.state import safe_load\nr = safe_load(PATH)\n"
GGUF = "from tinygrad.nn.gguf import gguf_load\nr = gguf_load(PATH)\n"

def cases(d: pathlib.Path, plain: int, bomb: int) -> list[tuple[str, str, pathlib.Path, int]]:
  """(name, snippet, file, bytes of data the file holds)."""
  n = plain // 4
  return [
    ("torch: x=[x,x] nested 60 deep", TORCH, H.nested_shared_lists(d / "nested.pth"), 0),
    ("torch: 4 MB storage, 4096 views", TORCH, H.shared_storage_views(d / "shared.pth"), 4 << 20),
    (f"torch: zip bomb, {bomb >> 20} MB of deflated zeros", TORCH, H.zip_bomb(d / "bomb.pth", bomb), bomb),
    ("torch: stride-0 view of 10^10 elements", TORCH, H.stride0_view(d / "stride0.pth"), 4),
    ("torch: pickle nested 100,000 deep", TORCH, H.deep_pickle(d / "deep.pth"), 0),
    ("safetensors: /dev/zero", SAFE, pathlib.Path("/dev/zero"), 0),
    ("safetensors: header nested 100,000 deep", SAFE, H.deep_json_header(d / "deep.safetensors"), 0),
    ("gguf: array nested 5,000 deep", GGUF, _write(d / "deep.gguf", H.gguf_deep_array()), 0),
    (f"torch: plain zip, {plain >> 20} MB float32", TORCH, H.torch_zip_f32(d / "plain.pth", n), 4 * n),
    (f"safetensors: plain, {plain >> 20} MB float32", SAFE, H.safetensors_f32(d / "plain.safetensors", n), 4 * n),
    (f"gguf: plain, {plain >> 20} MB F32", GGUF, H.gguf_f32(d / "plain.gguf", n), 4 * n),
  ]

def _write(fn: pathlib.Path, raw: bytes) -> pathlib.Path:
  fn.write_bytes(raw)
  return fn

def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--mem-mb", type=int, default=4096, help="address space each load may add (RLIMIT_AS)")
  ap.add_argument("--seconds", type=float, default=60, help="wall-clock cap of each load")
  ap.add_argument("--plain-mb", type=int, default=256)
  ap.add_argument("--bomb-mb", type=int, default=1600)
  ap.add_argument("--repo", default=REPO, help="the checkout whose loaders run (default: this one)")
  ap.add_argument("--only", default="", help="run the cases whose name contains this")
  args = ap.parse_args()
  with tempfile.TemporaryDirectory() as td:
    rows = cases(pathlib.Path(td), args.plain_mb << 20, args.bomb_mb << 20)
    print(f"loaders of {args.repo}; cap {args.mem_mb} MiB of address space, {args.seconds:.0f} s per load")
    print(f"{'input':44} {'file':>10} {'outcome':>28} {'peak MiB':>9} {'peak/data':>9} {'s':>6}")
    for name, snippet, fn, data in rows:
      if args.only and args.only not in name: continue
      t0 = time.perf_counter()
      r = run_capped(snippet, fn, mem_mb=args.mem_mb, seconds=args.seconds, pythonpath=os.path.abspath(args.repo))
      dt = time.perf_counter() - t0
      outcome = "loaded" if r.status == "ok" else r.error_type if r.status == "error" else f"{r.status} at the cap"
      size = fn.stat().st_size if fn.is_file() else 0
      # NOTE: a ratio only where the data is big enough for it to mean copies (not a few objects' overhead)
      ratio = f"{r.peak / data:.2f}" if data >= 1 << 20 and r.status == "ok" else "-"
      print(f"{name:44} {size:>10} {str(outcome)[:28]:>28} {r.peak / 2**20:>9.1f} {ratio:>9} {dt:>6.1f}")
      if r.status == "error" and os.environ.get("VERBOSE"): print(f"    {r.message[:300]}")

if __name__ == "__main__": main()
