"""python -m tinygrad.nn.onnx MODEL.onnx [--inputs FILE.npz] [--compile-only NV|AMD] [--jit]

Runs an ONNX model and prints its outputs; with --compile-only, compiles every kernel of the model for that target
(COMPILE_ONLY=1: NV as NV_ARCH, default sm_90; AMD as AMD_ARCH) and prints how many. Inputs not in the .npz are made up
from the model's declared types (named dims as 1, seeded normal floats, zero integers, False bools)."""
from __future__ import annotations
import argparse, sys
import numpy as np

def _made_up_inputs(runner, given: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
  from tinygrad.nn.onnx.call import DTYPES, to_dtype
  from tinygrad.dtype import dtypes, to_np_dtype
  rng, out = np.random.default_rng(0), dict(given)
  for vi in runner.inputs:
    if vi.name in out: continue
    if vi.kind != "tensor" or vi.shape is None:
      raise SystemExit(f"input {vi.name!r} ({vi.kind or 'untyped'}): give it in --inputs")
    shape = tuple(d if isinstance(d, int) and d > 0 else 1 for d in vi.shape)
    dt = to_dtype(vi.elem, f"input {vi.name!r}") if vi.elem in DTYPES else None
    if dt is None: raise SystemExit(f"input {vi.name!r}: unsupported type {vi.elem}")
    if dtypes.is_float(dt): out[vi.name] = rng.standard_normal(shape).astype(to_np_dtype(dt) if dt.fmt else np.float32)
    else: out[vi.name] = np.zeros(shape, to_np_dtype(dt))
  return out

def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(prog="python -m tinygrad.nn.onnx", description=__doc__.split("\n\n")[1])
  ap.add_argument("model", help="the .onnx file (external data files beside it)")
  ap.add_argument("--inputs", help="an .npz with the feeds, by input name")
  ap.add_argument("--compile-only", choices=("NV", "AMD"), help="compile every kernel for this target, run nothing")
  ap.add_argument("--jit", action="store_true", help="run under TinyJit (three calls: warm-up, capture, replay)")
  args = ap.parse_args(argv)
  from tinygrad.helpers import Context
  from tinygrad.nn.onnx import OnnxRunner, OnnxError
  given = dict(np.load(args.inputs)) if args.inputs else {}
  try:
    if args.compile_only: return _compile_only(args.model, args.compile_only, given)
    runner = OnnxRunner(args.model)
    feeds = _made_up_inputs(runner, given)
    if args.jit:
      from tinygrad import Tensor, TinyJit
      jit = TinyJit(lambda **kw: runner(kw))
      for _ in range(3): outs = jit(**{k: Tensor(v) for k, v in feeds.items()})
    else: outs = runner(feeds)
  except OnnxError as e:
    print(f"error: {e}", file=sys.stderr)
    return 1
  with Context():
    for name, v in outs.items():
      vals = [x.numpy() for x in v] if isinstance(v, list) else None if v is None else v.numpy()
      print(f"{name}: {getattr(v, 'shape', None)} {getattr(v, 'dtype', type(v).__name__)}\n{vals}")
  return 0

def _compile_only(path: str, target: str, given: dict[str, np.ndarray]) -> int:
  from tinygrad.helpers import Context, AMD_ARCH
  from tinygrad.runtime.targets import default_arch
  from tinygrad.uop import hooks
  from tinygrad.nn.onnx import OnnxRunner
  from tinygrad.engine.realize import run_schedule  # noqa: F401  (the device's compiler is loaded before counting)
  compiled: list[str] = []
  def grab(ast, spec, renderer) -> None: compiled.append(spec.name)
  hooks.register("compiled", grab)
  try:
    with Context(COMPILE_ONLY=1):
      runner = OnnxRunner(path, device=target)
      runner(_made_up_inputs(runner, given))
  finally: hooks.unregister("compiled", grab)
  arch = default_arch("NV") if target == "NV" else (AMD_ARCH.value or "the device's default arch")
  print(f"{target} ({arch}): {len(compiled)} kernels compiled, {len(set(compiled))} distinct")
  return 0

if __name__ == "__main__": sys.exit(main())
