"""Benchmark: the LLM app on a random-weight llama GGUF against llama.cpp (llama-cpp-python) and transformers (eager,
torch on the same CPU) loading the same file, plus the memory-bandwidth bound of decode, all measured in one run.

  python bench/llm.py [--dim 2048] [--layers 8] [--hidden 5632] [--vocab 32000] [--types Q8_0,F16] [--prompt 64]
                      [--decode 32] [--quantize fp8]

For each weight type: prefill tokens/s, decode tokens/s, time to first token (prefill + first sample, warm), peak RSS
of a fresh process each, ours, llama.cpp's and transformers', and our ratio to each. The bound: the bytes one decode
token reads (the file's weights once, or with --quantize fp8 one byte per matrix weight + a float32 scale per row, + the
KV cache) divided by the bandwidth of a numpy stream copy measured in the same run.

llama.cpp runs when llama-cpp-python is installed (`make bench-llm` installs the `bench-llm` extra: a source build of
10-20 minutes on 2 cores, never part of `make test`); without it the bench says so and prints "-" in its columns.
"""
from __future__ import annotations
import argparse, json, os, subprocess, sys, tempfile, time
import numpy as np
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

def stream_bandwidth() -> float:
  """Bytes/s of a numpy copy of 256 MiB (read + write counted), the best of 5."""
  a, b = np.ones(1 << 25, np.float64), np.empty(1 << 25, np.float64)
  best = 0.0
  for _ in range(5):
    t0 = time.perf_counter()
    np.copyto(b, a)
    best = max(best, 2 * a.nbytes / (time.perf_counter() - t0))
  return best

# NOTE: VmHWM, not ru_maxrss: Linux keeps ru_maxrss across exec, so a child would report its parent's peak
_HWM = ("def hwm():\n  return next(int(ln.split()[1]) for ln in open('/proc/self/status') "
        "if ln.startswith('VmHWM')) / 1024")

_OURS = """
import json, sys, time
HWM
from tinygrad.apps.llm import LLM, SamplingParams
fn, n_prompt, n_dec = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
llm = LLM.load(fn, capacity=n_prompt + n_dec + 8, quantize=sys.argv[4] or None)
prompt = [(i * 7919) % 1000 + 1 for i in range(n_prompt)]
p = SamplingParams(max_tokens=n_dec, ignore_eos=True)
list(llm.tokens(prompt, p)); list(llm.tokens(prompt, p))  # compile and capture every step
t0 = time.perf_counter(); it = llm.tokens(prompt, p); next(it); ttft = time.perf_counter() - t0
t1 = time.perf_counter(); rest = list(it); dec = time.perf_counter() - t1
print(json.dumps({"prefill": n_prompt / llm.stats.prefill_s, "decode": len(rest) / dec, "ttft": ttft,
                  "rss_mb": hwm()}))
"""

_TORCH = """
import json, os, sys, time, torch
HWM
from transformers import AutoModelForCausalLM
fn, n_prompt, n_dec = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
m = AutoModelForCausalLM.from_pretrained(os.path.dirname(fn), gguf_file=os.path.basename(fn), dtype=torch.float32)
ids = torch.tensor([[(i * 7919) % 1000 + 1 for i in range(n_prompt)]])
with torch.no_grad():
  m(ids)
  t0 = time.perf_counter(); out = m(ids, use_cache=True); pre = time.perf_counter() - t0
  tok = out.logits[:, -1:].argmax(-1); ttft = time.perf_counter() - t0
  past = out.past_key_values
  t1 = time.perf_counter()
  for _ in range(n_dec - 1):
    out = m(tok, past_key_values=past, use_cache=True); past = out.past_key_values; tok = out.logits[:, -1:].argmax(-1)
  dec = time.perf_counter() - t1
print(json.dumps({"prefill": n_prompt / pre, "decode": (n_dec - 1) / dec, "ttft": ttft,
                  "rss_mb": hwm()}))
"""

# NOTE: greedy (top_k=1) and never stopped by an end token: generate() yields until its caller stops; every CPU core,
# as ours uses them
_LLAMACPP = """
import json, os, sys, time
HWM
import llama_cpp
from llama_cpp import Llama
fn, n_prompt, n_dec = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
# NOTE: "plain" (argv[5]): no extra buffer types (use_extra_bufts off: ggml's repacked and AMX weight layouts); the
# parent asks for it only after the default run crashed (it segfaults in its first eval on an AVX-512 + AMX Xeon)
if sys.argv[5:] == ["plain"]:
  _defaults = llama_cpp.llama_cpp.llama_model_default_params
  def _plain():
    p = _defaults(); p.use_extra_bufts = False
    return p
  llama_cpp.llama_cpp.llama_model_default_params = _plain
n = os.cpu_count() or 1
llm = Llama(model_path=fn, n_ctx=n_prompt + n_dec + 8, n_batch=max(n_prompt, 8), n_threads=n, n_threads_batch=n,
            verbose=False)
prompt = [(i * 7919) % 1000 + 1 for i in range(n_prompt)]
# NOTE: generate() reuses the longest cached prefix of the prompt; reset() empties the cache, so the prompt is prefilled
def gen():
  llm.reset()
  it = llm.generate(prompt, top_k=1, temp=0.0, reset=True)
  t0 = time.perf_counter(); next(it); ttft = time.perf_counter() - t0
  t1 = time.perf_counter()
  for _ in range(n_dec - 1): next(it)
  return ttft, time.perf_counter() - t1
gen()
llm.reset(); t0 = time.perf_counter(); llm.eval(prompt); pre = time.perf_counter() - t0
ttft, dec = gen()
print(json.dumps({"prefill": n_prompt / pre, "decode": (n_dec - 1) / dec, "ttft": ttft, "rss_mb": hwm()}))
"""

def have_llamacpp() -> bool:
  import importlib.util
  return importlib.util.find_spec("llama_cpp") is not None

def run(code: str, fn: str, a: argparse.Namespace, optional: str = "", *extra: str) -> dict | None:
  """One side's measurements, from a fresh process. A failed run ends the bench, except an `optional` side's (the
  reference named by it: its failure, a llama.cpp crash, is printed and its columns are "-")."""
  r = subprocess.run([sys.executable, "-c", code.replace("HWM", _HWM), fn, str(a.prompt), str(a.decode), a.quantize,
                      *extra],
                     capture_output=True, text=True,
                     env={**os.environ, "PYTHONPATH": ROOT})
  if r.returncode and optional:
    last = r.stderr.strip().splitlines()[-1:] or [""]
    print(f"{optional}: its run failed (exit code {r.returncode}{', a signal' if r.returncode < 0 else ''}): {last[0]}")
    return None
  if r.returncode: raise SystemExit(f"bench/llm.py: a run failed:\n{r.stderr[-3000:]}")
  return json.loads(r.stdout.strip().splitlines()[-1])

def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--dim", type=int, default=2048)
  ap.add_argument("--layers", type=int, default=8)
  ap.add_argument("--hidden", type=int, default=5632)
  ap.add_argument("--vocab", type=int, default=32000)
  ap.add_argument("--types", default="Q8_0,F16")
  ap.add_argument("--prompt", type=int, default=64)
  ap.add_argument("--decode", type=int, default=32)
  ap.add_argument("--quantize", default="", help="ours requantized at load (fp8); the reference runs the file")
  a = ap.parse_args()
  from tests.apps.gguf_models import write_model
  bw = stream_bandwidth()
  print(f"stream copy bandwidth {bw / 1e9:.1f} GB/s")
  lcpp = have_llamacpp()
  if not lcpp: print("llama.cpp: not run (llama-cpp-python is not installed: `make bench-llm` builds and installs it)")
  print(f"{'type':6} {'params':>8} {'file MB':>8} | {'prefill tok/s ours/llama.cpp/torch':>36} | "
        f"{'decode tok/s ours/llama.cpp/torch':>34} | {'bound tok/s':>11} | {'ttft s ours/llama.cpp/torch':>28} | "
        f"{'peak RSS MB ours/llama.cpp/torch':>32}")
  def col(d: dict | None, k: str, fmt: str) -> str: return "-" if d is None else format(d[k], fmt)
  def ratio(x: dict, d: dict | None, k: str) -> str: return "-" if d is None else f"{x[k] / d[k]:.2f}x"
  with tempfile.TemporaryDirectory() as d:
    for q in a.types.split(","):
      fn = os.path.join(d, f"bench_{q}.gguf")
      written = write_model(fn, qtype=q, dim=a.dim, n_layers=a.layers, hidden=a.hidden, vocab=a.vocab,
                            n_heads=a.dim // 64, n_kv_heads=max(1, a.dim // 256), context=a.prompt + a.decode + 8)
      params = sum(int(np.prod(v.shape)) for v in written.values())
      size = os.path.getsize(fn)
      kv = 2 * a.layers * max(1, a.dim // 256) * 64 * (a.prompt + a.decode + 8) * 4
      # NOTE: requantized to fp8, a token reads one byte per matrix weight (and a float32 scale per row)
      kvd = max(1, a.dim // 256) * 64
      mat_rows_cols = [(a.dim, a.dim), (kvd, a.dim), (kvd, a.dim), (a.dim, a.dim), (a.hidden, a.dim), (a.hidden, a.dim),
                       (a.dim, a.hidden)] * a.layers + [(a.vocab, a.dim)] * 2
      read = sum(r * (c + 4) for r, c in mat_rows_cols) if a.quantize == "fp8" else size
      bound = bw / (read + kv)
      ours, cpp, ref = run(_OURS, fn, a), run(_LLAMACPP, fn, a, "llama.cpp") if lcpp else None, run(_TORCH, fn, a)
      if lcpp and cpp is None:
        cpp = run(_LLAMACPP, fn, a, "llama.cpp without extra buffer types", "plain")
        if cpp is not None: print("llama.cpp: measured without its extra buffer types (use_extra_bufts off: no "
                                  "repacked or AMX weights), since the default run crashed")
      assert ours is not None and ref is not None
      print(f"{q:6} {params / 1e6:7.0f}M {size / 1e6:8.0f} | {ours['prefill']:9.1f} / {col(cpp, 'prefill', '9.1f')} / "
            f"{ref['prefill']:7.1f} | {ours['decode']:8.2f} / {col(cpp, 'decode', '8.2f')} / {ref['decode']:6.2f} | "
            f"{bound:11.1f} | {ours['ttft']:7.2f} / {col(cpp, 'ttft', '7.2f')} / {ref['ttft']:7.2f} | "
            f"{ours['rss_mb']:9.0f} / {col(cpp, 'rss_mb', '9.0f')} / {ref['rss_mb']:9.0f}")
      print(f"       ours / llama.cpp: prefill {ratio(ours, cpp, 'prefill')}, decode {ratio(ours, cpp, 'decode')}; "
            f"ours / torch: prefill {ratio(ours, ref, 'prefill')}, decode {ratio(ours, ref, 'decode')}; "
            f"decode at {ours['decode'] / bound:.2f}x of the bandwidth bound")

if __name__ == "__main__": main()
