"""The exported ONNX models as a harness input (docs/onnx.md, docs/models.md): the models of tests/onnx/torch_models.py
(a ResNet, a transformer encoder with causal and key-padding masks, a 2-layer LSTM, a UNet-like conv net, a CNN
quantized to QDQ by onnxruntime's quantizer), exported by torch.onnx.export as tests/onnx/test_models.py does and run
by tinygrad.nn.onnx.OnnxRunner: once eagerly at batch 3, then through a TinyJit fed `runner.bind` (symbolic batch) at
batch 3, 5 and 3, so the capture holds both the concrete and the symbolic kernels of each model.

  python -m tests.models.onnx_run [--models resnet,encoder,lstm,unet,cnn_qdq] [--no-jit] [--dir DIR]

runs on the current device and prints each model's output shapes; exits 1 when a jitted call's outputs (the capture's
first call and its replay at the same batch) differ from the eager run's. `--dir` keeps the exported files there
(written when missing). What `make replay-models` captures as run `onnx`, after the zoo and the LLM app."""
from __future__ import annotations
import argparse, os, pathlib, sys, tempfile
import numpy as np
from tinygrad import TinyJit
from tinygrad.nn.onnx import OnnxRunner
from tests.onnx import torch_models as tm

MODELS = ("resnet", "encoder", "lstm", "unet", "cnn_qdq")
# the eager run and the jitted calls' batch sizes: the capture at 5 replays at 3 (same feeds as the eager run)
EAGER_BATCH, JIT_BATCHES = 3, (3, 5, 3)

def model_file(d: str, name: str) -> str:
  """The exported model's path in `d`, exported (and for cnn_qdq quantized) when missing; written to a temp file and
  renamed."""
  path = os.path.join(d, f"{name}.onnx")
  if os.path.exists(path): return path
  data = tm.quantize_qdq(pathlib.Path(model_file(d, "cnn")).read_bytes()) if name == "cnn_qdq" else tm.export(name)
  tmp = path + ".tmp"
  with open(tmp, "wb") as f: f.write(data)
  os.replace(tmp, path)
  return path

def run(path: str, name: str, jit: bool = True) -> tuple[list[np.ndarray], list[list[np.ndarray]]]:
  """(the eager outputs at EAGER_BATCH, the jitted outputs of each of JIT_BATCHES) of the model at `path`."""
  base = name.split("_")[0]
  runner = OnnxRunner(path)
  eager = [v.numpy() for v in runner(tm.inputs(base, EAGER_BATCH, seed=0)).values()]
  if not jit: return eager, []
  fn = TinyJit(lambda **kw: list(runner(kw).values()))
  jitted = []
  for b in JIT_BATCHES:
    outs = fn(**runner.bind(tm.inputs(base, b, seed=0)))
    # NOTE: the outputs' batch dim is the bound variable; the only named dim of these models is the batch
    jitted.append([o.reshape(tuple(n if isinstance(n, int) else b for n in o.shape)).numpy() for o in outs])
  return eager, jitted

def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(prog="python -m tests.models.onnx_run", description=__doc__.splitlines()[0])
  ap.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {','.join(MODELS)}")
  ap.add_argument("--no-jit", action="store_true", help="the eager run only")
  ap.add_argument("--dir", default=None, help="keep the exported files here (written when missing)")
  a = ap.parse_args(argv)
  names = [n.strip() for n in a.models.split(",") if n.strip()]
  if (bad := [n for n in names if n not in MODELS]): ap.error(f"unknown model(s) {bad}; models are {list(MODELS)}")
  failed = []
  with tempfile.TemporaryDirectory(prefix="onnx-run-") as tmp:
    d = a.dir or tmp
    os.makedirs(d, exist_ok=True)
    for name in names:
      eager, jitted = run(model_file(d, name), name, jit=not a.no_jit)
      print(f"onnx {name}: eager batch {EAGER_BATCH} -> {[o.shape for o in eager]}" +
            (f", jitted batches {list(JIT_BATCHES)}" if jitted else ""), flush=True)
      # NOTE: the jitted calls at EAGER_BATCH are the capture's first call and a replay: both must give the eager values
      for k in (i for i, b in enumerate(JIT_BATCHES) if b == EAGER_BATCH and jitted):
        if len(jitted[k]) != len(eager) or not all(j.shape == e.shape and np.allclose(j, e, rtol=1e-4, atol=1e-4)
                                                    for j, e in zip(jitted[k], eager)):
          print(f"onnx {name}: jitted call {k} (batch {JIT_BATCHES[k]}) differs from the eager run", file=sys.stderr)
          failed.append(name)
  return 1 if failed else 0

if __name__ == "__main__": sys.exit(main())
