"""The kernels of one training step under two versions of the opts (the heuristics of another checkout, saved by `dump`,
and this tree's), run in the step's order in one process and alternated round by round: for each kernel whose opts
differ, its best time under each, and the step's total under each.

  git worktree add /tmp/base <commit>
  python bench/step_ab.py dump /tmp/base.json --root /tmp/base --model resnet18 --batch 32 --hw 128
  python bench/step_ab.py ab /tmp/base.json --model resnet18 --batch 32 --hw 128 [--rounds 5]

--model resnet18 (--batch, --hw): ResNet-18's SGD step; --model block (--dim): a GPT-2 block's SGD step over 8 x 128
tokens; --model unet (--batch, --hw): tinygrad/models/unet.py's SGD step (base 32, depth 3, 8 groups); --model lstm
(--batch): tinygrad/models/lstm.py's over 32 tokens (bench/models.py's rows); --conv NxCxH: a 3x3 conv's forward and
both gradients (C channels in and out, H x H pixels, padding 1). `dump` imports tinygrad from --root (a checkout of the
commit to compare against) and writes the opts its heuristics chose for each kernel, keyed by the kernel's pyrender
text (the same graph gives the same key in both trees where the scheduler did not change). `ab` captures the step here,
compiles each kernel with both sets of opts, and times whole passes over the step's launches, so each kernel sees the
caches the kernels before it leave. Profiling two separate runs instead compares two speeds of this machine: on the
2-core VM of the nineteenth session one kernel's best of 3 profiled steps moved by 2x within minutes.
"""
from __future__ import annotations
import argparse, collections, json, os, sys, time

def parse() -> argparse.Namespace:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("mode", choices=("dump", "ab"))
  ap.add_argument("opts_file", help="dump: the JSON file to write; ab: the one dump wrote")
  ap.add_argument("--root", help="dump: the checkout whose tinygrad chooses the opts (default: this tree)")
  ap.add_argument("--model", choices=("resnet18", "block", "unet", "lstm"))
  ap.add_argument("--batch", type=int, default=8)
  ap.add_argument("--hw", type=int, default=64, help="resnet18, unet: the images' height and width")
  ap.add_argument("--dim", type=int, default=256, help="block: the model dimension (heads of 64)")
  ap.add_argument("--conv", help="NxCxH: a 3x3 conv's step instead of a model's")
  ap.add_argument("--rounds", type=int, default=5)
  args = ap.parse_args()
  if (args.model is None) == (args.conv is None): ap.error("give one of --model and --conv")
  return args

ARGS = parse()
_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.abspath(ARGS.root) if ARGS.root else _HERE)
import numpy as np  # noqa: E402
from tinygrad import Tensor, TinyJit  # noqa: E402
from tinygrad.uop import hooks  # noqa: E402
from tinygrad.uop.pyrender import pyrender  # noqa: E402
# NOTE: after tinygrad is imported from --root: bench/models.py's own path insert then finds it already loaded
from models import ours_train_step, resnet_loss, lm_loss, bench_input, unet_model, lstm_model, LSTM_VOCAB, \
  LSTM_TOKENS  # noqa: E402

def make_step():
  """One step to capture: a 3x3 conv's forward and gradients (--conv), else bench/models.py's SGD step of the model."""
  rng = np.random.default_rng(0)
  if ARGS.conv:
    n, c, h = (int(v) for v in ARGS.conv.split("x"))
    x = Tensor(rng.standard_normal((n, c, h, h)).astype(np.float32), requires_grad=True).realize()
    w = Tensor((rng.standard_normal((c, c, 3, 3)) * 0.05).astype(np.float32), requires_grad=True).realize()
    g = Tensor(rng.standard_normal((n, c, h, h)).astype(np.float32)).realize()
    @TinyJit
    def conv_step():
      x.grad = w.grad = None
      o = x.conv2d(w, padding=1)
      (o * g).sum().backward()
      # NOTE: the three tensors, not list(Tensor.realize(...)): realize returns o, whose list is its images (one copy
      # kernel each in the captured step)
      Tensor.realize(o, x.grad, w.grad)
      return [o, x.grad, w.grad]
    return conv_step
  Tensor.manual_seed(0)
  if ARGS.model == "lstm":
    step = ours_train_step(lstm_model(), lm_loss)
    tokens = Tensor(bench_input((ARGS.batch, LSTM_TOKENS), LSTM_VOCAB)).realize()
    return lambda: step(tokens)
  if ARGS.model == "block":
    from tinygrad.models.gpt2 import GPT2Block
    model, shape = GPT2Block(ARGS.dim, ARGS.dim // 64), (8, 128, ARGS.dim)
  elif ARGS.model == "unet":
    model, shape = unet_model(), (ARGS.batch, 3, ARGS.hw, ARGS.hw)
  else:
    from tinygrad.models.resnet import resnet18
    model, shape = resnet18(num_classes=10), (ARGS.batch, 3, ARGS.hw, ARGS.hw)
  step = ours_train_step(model, resnet_loss)
  xb = Tensor(rng.standard_normal(shape).astype(np.float32)).realize()
  return lambda: step(xb)

def capture() -> list:
  """(runner, buffers) of every compiled kernel's launch in one step, in order (after a warm-up that captures the
  JIT)."""
  step = make_step()
  for _ in range(2): step()
  seq: list = []
  def on_launch(runner, bufs, start, seconds):
    if hasattr(runner, "p"): seq.append((runner, list(bufs)))
  hooks.launched.append(on_launch)
  try: step()
  finally: hooks.launched.remove(on_launch)
  return seq

class OptsFileError(ValueError): pass

def load_opts(path: str) -> dict[str, list]:
  """The dumped {kernel key: [[op name, axis, arg], ...]}, checked entry by entry (a damaged file fails here, naming the
  entry; nothing in it is evaluated)."""
  from tinygrad.codegen.opt import Opt, OptOps
  try:
    with open(path) as f: raw = json.load(f)
  except (OSError, ValueError) as e: raise OptsFileError(f"{path}: not a readable JSON file ({e})") from e
  if not isinstance(raw, dict):
    raise OptsFileError(f"{path}: expected an object of kernel -> opts, got {type(raw).__name__}")
  out = {}
  for i, (key, opts) in enumerate(raw.items()):
    if not isinstance(opts, list): raise OptsFileError(f"{path}: entry {i}: opts must be a list")
    got = []
    for j, o in enumerate(opts):
      if not (isinstance(o, list) and len(o) == 3 and isinstance(o[0], str) and o[0] in OptOps.__members__ and
              (o[1] is None or isinstance(o[1], int)) and (o[2] is None or isinstance(o[2], (int, str)))):
        raise OptsFileError(f"{path}: entry {i}, opt {j}: expected [op name, axis or null, arg or null], got {o!r}")
      got.append(Opt(OptOps[o[0]], o[1], o[2]))
    out[key] = got
  return out

def dump() -> None:
  seq = capture()
  opts = {pyrender(r.p.ast): [[o.op.name, o.axis, o.arg] for o in r.p.applied_opts] for r, _ in seq}
  tmp = ARGS.opts_file + ".tmp"
  with open(tmp, "w") as f: json.dump(opts, f)
  os.replace(tmp, ARGS.opts_file)
  print(f"{len(opts)} kernels' opts written to {ARGS.opts_file}")

def ab() -> None:
  from tinygrad.codegen.opt import KernelInfo
  from tinygrad.engine.realize import CompiledRunner
  from tinygrad.helpers import Context
  base = load_opts(ARGS.opts_file)
  seq = capture()
  # the captured runners are this tree's programs; a kernel with other opts at the base is compiled again with those
  # (KernelInfo.opts, or NOOPT where the base had none)
  old, keys, diff = {}, {}, []
  for r, _ in seq:
    if id(r) in keys: continue
    keys[id(r)] = key = pyrender(r.p.ast)
    old[id(r)] = r
    if key in base and list(base[key]) != list(r.p.applied_opts):
      info = r.p.ast.arg if isinstance(r.p.ast.arg, KernelInfo) else KernelInfo()
      with Context(NOOPT=int(not base[key])):
        old[id(r)] = CompiledRunner(r.device, r.p.ast.replace(arg=KernelInfo(info.name, tuple(base[key]))))
      diff.append(r)
  missing = sum(k not in base for k in keys.values())
  print(f"{len(diff)} of {len(keys)} kernels have other opts here ({missing} not in {ARGS.opts_file}: other graphs)")
  best = {v: collections.defaultdict(lambda: float("inf")) for v in ("base", "here")}
  total = {"base": float("inf"), "here": float("inf")}
  for _ in range(ARGS.rounds):
    for v in ("base", "here"):
      per: dict[int, float] = collections.defaultdict(float)
      for r, bufs in seq:
        t = time.perf_counter()
        (old[id(r)] if v == "base" else r)(bufs, {}, wait=True)
        per[id(r)] += time.perf_counter() - t
      total[v] = min(total[v], sum(per.values()))
      for k, x in per.items(): best[v][k] = min(best[v][k], x)
  print(f"step (the kernels' launches): base {total['base'] * 1e3:.2f} ms, here {total['here'] * 1e3:.2f} ms")
  for r in sorted(diff, key=lambda r: best["here"][id(r)] - best["base"][id(r)]):
    print(f"  {r.display_name:48s} base {best['base'][id(r)] * 1e3:8.3f} ms  here {best['here'][id(r)] * 1e3:8.3f} ms")
    print(f"    base {' '.join(f'{o.op.name}({o.axis},{o.arg})' for o in base[keys[id(r)]])}")
    print(f"    here {' '.join(f'{o.op.name}({o.axis},{o.arg})' for o in r.p.applied_opts)}")

if __name__ == "__main__":
  if ARGS.mode == "dump": dump()
  else: ab()
