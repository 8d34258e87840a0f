"""The LLM app's kernels as a harness input (docs/models.md, docs/llm.md): a small random-weight llama GGUF file written
with ggml's `gguf` writer (tests/apps/gguf_models.py, the code path a real file takes), loaded by the app
(tinygrad.apps.llm.LLM) and run for a few jitted prefill chunks and decode steps, greedy.

  python -m tests.models.llm_run [--types Q8_0,Q4_0] [--out OUT.npz] [--dir DIR] [--prompt-len N] [--decode N]

runs each type's model on the current device (DEV=..., EMULATE=...) and prints its tokens; `--out` saves the logits of
every step (the prefill's last position, then each decode step) per type; `--dir` keeps the model files there (written
when missing: a run under emulation reads the files the CPU run wrote). What `make replay-models` captures after the
zoo. `llm_kernels(qtype, "prefill"|"decode"|"all")` is the distinct kernel ASTs of such a run, collected at the
kernel_ast checkpoint."""
from __future__ import annotations
import argparse, functools, os, sys, tempfile
import numpy as np
from tinygrad.uop import hooks
from tinygrad.uop.ops import UOp
from tinygrad.apps.llm import LLM
from tinygrad.apps.sampling import SamplingParams

# NOTE: a prompt of 19 tokens is three prefill chunks of 8 (the last one padded), so the chunk's TinyJit captures on
# its second call and replays on its third; 4 decode steps do the same for the one-token step
CHUNK, PROMPT_LEN, DECODE = 8, 19, 4
TYPES = ("Q8_0", "Q4_0")
# small enough for the PYTHON interpreter under emulation, wide enough to have GQA (4 query heads on 2 kv heads)
SHAPE = {"dim": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "hidden": 128, "vocab": 320, "context": 64}

def model_file(d: str, qtype: str) -> str:
  path = os.path.join(d, f"llama-{qtype}.gguf")
  if not os.path.exists(path):
    from tests.apps.gguf_models import write_model
    tmp = path + ".tmp"
    write_model(tmp, "llama", qtype, seed=1, **SHAPE)
    os.replace(tmp, path)
  return path

def prompt(n: int = PROMPT_LEN) -> list[int]:
  return [int(x) for x in np.random.default_rng(0).integers(0, SHAPE["vocab"] - 2, n)]

def run(path: str, prompt_len: int = PROMPT_LEN, decode: int = DECODE,
        phase: list[str] | None = None) -> tuple[list[int], np.ndarray]:
  """(the greedy tokens, the logits of every step) of the prompt's prefill and `decode` decode steps; `phase[0]` is
  set to "prefill" or "decode" while each runs."""
  llm = LLM.load(path, capacity=SHAPE["context"], chunk=CHUNK)
  if phase is not None: phase[0] = "prefill"
  steps = []
  for tok, lg in llm.steps(prompt(prompt_len), SamplingParams(max_tokens=decode + 1, ignore_eos=True)):
    steps.append((tok, lg))
    if phase is not None: phase[0] = "decode"
  return [t for t, _ in steps], np.stack([lg for _, lg in steps])

@functools.cache
def llm_kernels(qtype: str, which: str = "all") -> tuple[UOp, ...]:
  """The distinct kernel ASTs of the prefill chunks ("prefill"), the decode steps ("decode") or both ("all") of the
  `qtype` model, on the current device (a kernel both run is in each)."""
  if which != "all": return _phase_kernels(qtype)[which]
  return tuple(dict.fromkeys(_phase_kernels(qtype)["prefill"] + _phase_kernels(qtype)["decode"]))

@functools.cache
def _phase_kernels(qtype: str) -> dict[str, tuple[UOp, ...]]:
  phase = ["load"]
  asts: dict[str, list[UOp]] = {"load": [], "prefill": [], "decode": []}
  collect = hooks.register("kernel_ast", lambda ast: asts[phase[0]].append(ast))
  try:
    with tempfile.TemporaryDirectory(prefix="llm-kernels-") as d: run(model_file(d, qtype), phase=phase)
  finally: hooks.unregister("kernel_ast", collect)
  # NOTE: what loading runs (the KV cache's zeros) counts with the prefill
  return {"prefill": tuple(dict.fromkeys(asts["load"] + asts["prefill"])), "decode": tuple(dict.fromkeys(asts["decode"]))}

def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(prog="python -m tests.models.llm_run", description=__doc__.splitlines()[0])
  ap.add_argument("--types", default=",".join(TYPES), help="comma-separated GGUF weight types")
  ap.add_argument("--out", default=None, help="save each type's step logits here (npz)")
  ap.add_argument("--dir", default=None, help="keep the model files here (written when missing)")
  ap.add_argument("--prompt-len", type=int, default=PROMPT_LEN, help=f"prompt tokens (prefill chunks of {CHUNK})")
  ap.add_argument("--decode", type=int, default=DECODE, help="decode steps")
  a = ap.parse_args(argv)
  outs: dict[str, np.ndarray] = {}
  with tempfile.TemporaryDirectory(prefix="llm-run-") as tmp:
    d = a.dir or tmp
    os.makedirs(d, exist_ok=True)
    for q in a.types.split(","):
      toks, logits = run(model_file(d, q), a.prompt_len, a.decode)
      print(f"llm {q}: prefill {a.prompt_len} tokens in chunks of {CHUNK}, decoded {toks}", flush=True)
      outs[q] = logits
  if a.out:
    tmp_out = a.out + ".tmp.npz"
    np.savez(tmp_out, **outs)
    os.replace(tmp_out, a.out)
  return 0

if __name__ == "__main__": sys.exit(main())
