"""Benchmark: the LLM app on a random-weight llama GGUF against transformers (eager, torch on the same CPU) loading the
same file, plus the memory-bandwidth bound of decode, all measured in one run.

  python bench/llm.py [--dim 1024] [--layers 8] [--hidden 2816] [--vocab 32000] [--types Q8_0,F16] [--prompt 64]
                      [--decode 32]

For each weight type: prefill tokens/s, decode tokens/s, time to first token (prefill + first sample, warm), peak RSS
of a fresh process each, ours and transformers', and the ratio. The bound: the bytes one decode token reads (the file's
weights once + the KV cache) divided by the bandwidth of a numpy stream copy measured in the same run. llama.cpp
(llama-cpp-python) is not run here: its build does not fit this machine's budget (docs/llm.md).
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
llm = LLM.load(fn, capacity=n_prompt + n_dec + 8)
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

def run(code: str, fn: str, a: argparse.Namespace) -> dict:
  r = subprocess.run([sys.executable, "-c", code.replace("HWM", _HWM), fn, str(a.prompt), str(a.decode)],
                     capture_output=True, text=True,
                     env={**os.environ, "PYTHONPATH": ROOT})
  if r.returncode: raise SystemExit(f"bench/llm.py: a run failed:\n{r.stderr[-3000:]}")
  return json.loads(r.stdout.strip().splitlines()[-1])

def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--dim", type=int, default=1024)
  ap.add_argument("--layers", type=int, default=8)
  ap.add_argument("--hidden", type=int, default=2816)
  ap.add_argument("--vocab", type=int, default=32000)
  ap.add_argument("--types", default="Q8_0,F16")
  ap.add_argument("--prompt", type=int, default=64)
  ap.add_argument("--decode", type=int, default=32)
  a = ap.parse_args()
  from tests.apps.gguf_models import write_model
  bw = stream_bandwidth()
  print(f"stream copy bandwidth {bw / 1e9:.1f} GB/s")
  print(f"{'type':6} {'params':>8} {'file MB':>8} | {'prefill tok/s ours/torch':>25} | "
        f"{'decode tok/s ours/torch':>24} | {'bound tok/s':>11} | {'ttft s ours/torch':>18} | "
        f"{'peak RSS MB ours/torch':>22}")
  with tempfile.TemporaryDirectory() as d:
    for q in a.types.split(","):
      fn = os.path.join(d, f"bench_{q}.gguf")
      written = write_model(fn, qtype=q, dim=a.dim, n_layers=a.layers, hidden=a.hidden, vocab=a.vocab,
                            n_heads=a.dim // 64, n_kv_heads=max(1, a.dim // 256), context=a.prompt + a.decode + 8)
      params = sum(int(np.prod(v.shape)) for v in written.values())
      size = os.path.getsize(fn)
      kv = 2 * a.layers * max(1, a.dim // 256) * 64 * (a.prompt + a.decode + 8) * 4
      bound = bw / (size + kv)
      ours, ref = run(_OURS, fn, a), run(_TORCH, fn, a)
      print(f"{q:6} {params / 1e6:7.0f}M {size / 1e6:8.0f} | {ours['prefill']:9.1f} / {ref['prefill']:7.1f} "
            f"({ours['prefill'] / ref['prefill']:.2f}x) | {ours['decode']:8.2f} / {ref['decode']:6.2f} "
            f"({ours['decode'] / ref['decode']:.2f}x) | {bound:11.1f} | {ours['ttft']:7.2f} / {ref['ttft']:7.2f} | "
            f"{ours['rss_mb']:9.0f} / {ref['rss_mb']:9.0f}")
      print(f"       decode at {ours['decode'] / bound:.2f}x of the bandwidth bound")

if __name__ == "__main__": main()
