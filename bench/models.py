"""Real-model speed on the CPU: one training step (forward, backward, SGD) of ResNet-18 and of a transformer block, and
a GPT-2-small-shaped forward, ours (a TinyJit-captured step on the default CPU path: LLVM where llvmlite is
installed, else C; --both adds the other path) against torch (eager, 2 threads) on the same shapes, measured in the
same run; then, per workload, the 10 kernels of our step that take the longest, with their GFLOPS and their share of
the step.

  python bench/models.py [--quick] [--both] [--big] [--only resnet,block,gpt2,unet,lstm] [--steps 3]

Rows (--quick: the first row of each workload, fewer steps):
  resnet18 b8 64x64      ResNet-18 (width 64, 10 classes), batch 8, 64x64 images; --big adds batch 32 at 128x128
  block D256 H4          a GPT-2 pre-norm block, B=8 T=128 D=256 H=4, causal scaled dot-product attention;
                         block D768 H12 the same at D=768 H=12
  gpt2 fwd T256          12 GPT-2 blocks D=768 H=12 (GPT-2 small without its embeddings and LM head), B=1, T=256,
                         forward only (--quick: 2 blocks)
  unet b8 64x64          tinygrad/models/unet.py (base 32, depth 3, GroupNorm of 8 groups, SiLU), batch 8, 64x64 images
  lstm b16 T32           tinygrad/models/lstm.py (a 2,000-token vocabulary, embedding and hidden 256, one layer), batch
                         16 of 32 random tokens, the loss on its logits
The torch models are written here with the same layers (no torchvision; the UNet's and the LSTM's are the model
zoo's torch twins, tests/models/twins.py); weights are random on both sides (the bench times, it does not compare
values). Times are the best of --steps steps after a warm-up and a capture step; on a shared machine compare the
ratios, not the milliseconds.
torch is timed with 2 threads and again with 1 (an oversubscribed machine slows its 2 OpenMP threads most), and our time
is given as a ratio to each. The kernel table comes from a separate set of profiled steps (each launch waits for its
kernel through the `launched` hook; each kernel's best of as many steps as are timed), so its total can differ from the
timed step. Last, the issue's goal for kernels: every matmul-shaped kernel (matmul_macs) of the profiled steps with
256^3 multiply-adds or more against half the 1024^3 matmul's GFLOPS, profiled the same way right after its row's
steps (this machine's speed moves within minutes, so each row has its own reference); those under
it are listed, each with its memory roofline: the GFLOPS it would reach moving each of its buffers once at the rate of a
64 MiB copy profiled in the same run (where that is under the line too, only moving fewer bytes gets it there, no opt).
"""
from __future__ import annotations
import argparse, os, sys, time
from typing import Any, Callable
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np
from timing import best_of  # noqa: E402
import torch
import torch.nn.functional as F
from tinygrad import Tensor, TinyJit, Device
from tinygrad.helpers import Context
from tinygrad.nn.optim import SGD
from tinygrad.nn.state import get_parameters
from tinygrad.models.resnet import resnet18
from tinygrad.models.gpt2 import GPT2Block
from tinygrad.models.unet import UNet
from tinygrad.models.lstm import LSTMLanguageModel
from tinygrad.nn import LayerNorm
from tinygrad.uop import hooks
from tinygrad.uop.ops import UOp, Ops
from tinygrad.codegen.opt import output_axes, axis_size
from tinygrad.helpers import prod
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "models"))
from twins import UNet as TUNet, LSTMLanguageModel as TLSTM  # noqa: E402

# ---- torch twins of the models (the reference side of the timing only) ----

class TBasic(torch.nn.Module):
  def __init__(self, cin: int, cout: int, stride: int):
    super().__init__()
    self.c1, self.b1 = torch.nn.Conv2d(cin, cout, 3, stride, 1, bias=False), torch.nn.BatchNorm2d(cout)
    self.c2, self.b2 = torch.nn.Conv2d(cout, cout, 3, 1, 1, bias=False), torch.nn.BatchNorm2d(cout)
    self.down = torch.nn.Sequential(torch.nn.Conv2d(cin, cout, 1, stride, bias=False), torch.nn.BatchNorm2d(cout)) \
      if stride != 1 or cin != cout else None
  def forward(self, x: torch.Tensor) -> torch.Tensor:
    out = self.b2(self.c2(F.relu(self.b1(self.c1(x)))))
    return F.relu(out + (self.down(x) if self.down is not None else x))

class TResNet18(torch.nn.Module):
  def __init__(self, width: int = 64, classes: int = 10):
    super().__init__()
    self.c1, self.b1 = torch.nn.Conv2d(3, width, 7, 2, 3, bias=False), torch.nn.BatchNorm2d(width)
    blocks, cin = [], width
    for i, stride in enumerate((1, 2, 2, 2)):
      cout = width << i
      blocks += [TBasic(cin, cout, stride), TBasic(cout, cout, 1)]
      cin = cout
    self.blocks, self.fc = torch.nn.Sequential(*blocks), torch.nn.Linear(cin, classes)
  def forward(self, x: torch.Tensor) -> torch.Tensor:
    x = F.max_pool2d(F.relu(self.b1(self.c1(x))), 3, 2, 1)
    return self.fc(self.blocks(x).mean((2, 3)))

class TBlock(torch.nn.Module):
  def __init__(self, d: int, h: int):
    super().__init__()
    self.h, self.ln1, self.ln2 = h, torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
    self.attn, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
    self.fc, self.out = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)
  def forward(self, x: torch.Tensor) -> torch.Tensor:
    n, t, d = x.shape
    q, k, v = (z.reshape(n, t, self.h, d // self.h).transpose(1, 2) for z in self.attn(self.ln1(x)).chunk(3, dim=2))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    x = x + self.proj(y.transpose(1, 2).reshape(n, t, d))
    return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

class TStack(torch.nn.Module):
  def __init__(self, d: int, h: int, layers: int):
    super().__init__()
    self.blocks, self.ln = torch.nn.Sequential(*[TBlock(d, h) for _ in range(layers)]), torch.nn.LayerNorm(d)
  def forward(self, x: torch.Tensor) -> torch.Tensor: return self.ln(self.blocks(x))

class Stack:
  def __init__(self, d: int, h: int, layers: int):
    self.blocks, self.ln = [GPT2Block(d, h) for _ in range(layers)], LayerNorm(d)
  def __call__(self, x: Tensor) -> Tensor:
    for b in self.blocks: x = b(x)
    return self.ln(x)

# ---- one workload: how to build each side's step ----

def ours_train_step(model: Any, loss_fn: Callable[[Tensor], Tensor], jit: bool = True) -> Callable[[Tensor], Tensor]:
  """One SGD step of model under loss_fn, captured by TinyJit (jit=False: eager, as bench/eager.py times it)."""
  opt = SGD(get_parameters(model), lr=0.01)
  def step(x: Tensor) -> Tensor:
    with Tensor.train():
      opt.zero_grad()
      loss = loss_fn(model(x))
      loss.backward()
      opt.step()
    return loss.realize()
  return TinyJit(step) if jit else step

def ours_forward(model: Any) -> Callable[[Tensor], Tensor]:
  # NOTE: the weights are made before the step (as torch's are, or as loading a checkpoint makes them): a tensor graph
  # of lazy random weights realized only inside the step is drawn again in every call of it (the forward alone stores
  # no weight), which timed the draw of GPT-2's weights with its forward
  Tensor.realize(*get_parameters(model))
  @TinyJit
  def step(x: Tensor) -> Tensor: return model(x).realize()
  return step

def torch_train_step(model: torch.nn.Module, loss_fn: Callable[[torch.Tensor], torch.Tensor]) -> Callable[..., Any]:
  opt = torch.optim.SGD(model.parameters(), lr=0.01)
  model.train()
  def step(x: torch.Tensor) -> torch.Tensor:
    opt.zero_grad()
    loss = loss_fn(model(x))
    loss.backward()
    opt.step()
    return loss
  return step

def torch_forward(model: torch.nn.Module) -> Callable[..., Any]:
  model.eval()
  def step(x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad(): return model(x)
  return step

def resnet_loss(out: Tensor) -> Tensor: return out.square().mean()
def torch_resnet_loss(out: torch.Tensor) -> torch.Tensor: return out.square().mean()
def lm_loss(out: tuple[Tensor, Any]) -> Tensor: return out[0].square().mean()
def torch_lm_loss(out: tuple[torch.Tensor, Any]) -> torch.Tensor: return out[0].square().mean()

# the UNet's and the LSTM's rows (bench/step_ab.py builds the same models)
LSTM_VOCAB, LSTM_TOKENS = 2000, 32
def unet_model() -> UNet: return UNet(3, 3, base=32, depth=3, groups=8)
def lstm_model() -> LSTMLanguageModel: return LSTMLanguageModel(LSTM_VOCAB, 256, 256, nlayers=1)

# a workload: (our step maker, torch step, input shape, vocabulary size where the input is tokens (ints below it), else
# None: standard normal floats)
Build = Callable[[], tuple[Any, Any, tuple[int, ...], int | None]]

def workloads(args: argparse.Namespace) -> list[tuple[str, str, Build]]:
  """(row name, group, build)."""
  rows: list[tuple[str, str, Build]] = []
  def resnet(b: int, hw: int) -> Build:
    return lambda: (lambda: ours_train_step(resnet18(num_classes=10), resnet_loss),
                    torch_train_step(TResNet18(), torch_resnet_loss), (b, 3, hw, hw), None)
  def block(d: int, h: int) -> Build:
    return lambda: (lambda: ours_train_step(GPT2Block(d, h), resnet_loss),
                    torch_train_step(TBlock(d, h), torch_resnet_loss), (8, 128, d), None)
  def gpt2(layers: int) -> Build:
    return lambda: (lambda: ours_forward(Stack(768, 12, layers)), torch_forward(TStack(768, 12, layers)), (1, 256, 768),
                    None)
  rows.append(("resnet18 b8 64x64", "resnet", resnet(8, 64)))
  if args.big: rows.append(("resnet18 b32 128x128", "resnet", resnet(32, 128)))
  rows.append(("block D256 H4", "block", block(256, 4)))
  if not args.quick: rows.append(("block D768 H12", "block", block(768, 12)))
  rows.append((f"gpt2 fwd T256 x{2 if args.quick else 12}", "gpt2", gpt2(2 if args.quick else 12)))
  def unet() -> tuple[Any, Any, tuple[int, ...], int | None]:
    return (lambda: ours_train_step(unet_model(), resnet_loss),
            torch_train_step(TUNet(3, 3, 32, 3, 8), torch_resnet_loss), (8, 3, 64, 64), None)
  rows.append(("unet b8 64x64", "unet", unet))
  def lstm() -> tuple[Any, Any, tuple[int, ...], int | None]:
    return (lambda: ours_train_step(lstm_model(), lm_loss),
            torch_train_step(TLSTM(LSTM_VOCAB, 256, 256, 1), torch_lm_loss), (16, LSTM_TOKENS), LSTM_VOCAB)
  rows.append(("lstm b16 T32", "lstm", lstm))
  return [r for r in rows if r[1] in args.only.split(",")]

# ---- timing ----

def profile_step(fn: Callable[[], Any]) -> dict[str, list[Any]]:
  """One step with every launch timed: kernel name -> [seconds, ops, launches, multiply-adds of one launch where the
  kernel is matmul-shaped (matmul_macs), else 0, bytes of the buffers one launch reads or writes (each once)]."""
  per: dict[str, list[Any]] = {}
  # NOTE: two kernels can share a display name (the same axes after their opts): the second seen is "name~2" and so on,
  # in launch order (the same in every step of a jitted function), so that each keeps its own time and multiply-adds
  keys: dict[int, str] = {}  # id of a program -> its key
  named: dict[str, int] = {}  # display name -> programs seen with it
  def on_launch(runner: Any, bufs: Any, start: float, seconds: float | None) -> None:
    if not hasattr(runner, "p"): return
    if (key := keys.get(id(runner.p))) is None:
      n = named[runner.display_name] = named.get(runner.display_name, 0) + 1
      key = keys[id(runner.p)] = runner.display_name if n == 1 else f"{runner.display_name}~{n}"
    e = per.setdefault(key, [0.0, 0.0, 0, matmul_macs(runner.p.ast),
                             sum({id(b): b.nbytes for b in bufs if b is not None}.values())])
    e[0] += seconds if seconds is not None else time.perf_counter() - start
    e[1] += runner.work({})[0]
    e[2] += 1
  hooks.launched.append(on_launch)
  try: fn()
  finally: hooks.launched.remove(on_launch)
  return per

def matmul_macs(ast: UOp) -> int:
  """The multiply-adds of a matmul-shaped kernel (0 for any other): an ADD reduce whose body multiplies two loads that
  both walk the reduce, one varying along an output axis the other is broadcast along and the other way round (a
  matmul's rows and columns, a conv's pixels and output channels, a weight gradient's two sides), whatever else is
  fused around them. Its multiply-adds: the output axes' sizes times the reduce's."""
  outs, total = output_axes(ast), 0
  for red in (u for u in ast.toposort() if u.op is Ops.REDUCE and u.arg is Ops.ADD):
    rs = set(red.src[1:])
    lds = [u for u in red.src[0].toposort() if u.op is Ops.LOAD and u.src[0].op is Ops.INDEX and rs & u.src[0]._ranges]
    sizes = [axis_size(r) for r in outs + list(rs)]
    if not any(u.op is Ops.MUL for u in red.src[0].toposort()) or not all(sizes): continue
    own = [{o for o in outs if o in ld.src[0]._ranges} for ld in lds]
    if any(a - b and b - a for a in own for b in own): total = max(total, prod(s or 0 for s in sizes))
  return total

def matmul_path_gflops(device: str, steps: int) -> float:
  """The 1024^3 matmul on `device` as the profiled steps time it (2 flops per multiply-add): the reference of the
  goal that every matmul-shaped kernel over 256^3 multiply-adds reach half of it."""
  Device.DEFAULT = device
  a, b = (Tensor.randn(1024, 1024, device=device).realize() for _ in range(2))
  mm = TinyJit(lambda: (a @ b).realize())
  for _ in range(2): mm()
  best = min(sum(v[0] for v in profile_step(mm).values()) for _ in range(steps))
  return 2 * 1024 ** 3 / best * 1e-9

def copy_gbps(device: str, steps: int) -> float:
  """GB/s of a copy of 64 MiB (read and written once each, counted as 128 MiB moved) on `device`, profiled as the
  steps are: the rate at which the goal's check says how fast a kernel could be that moved each of its buffers once."""
  Device.DEFAULT = device
  a = Tensor.randn(1 << 24, device=device).realize()
  cp = TinyJit(lambda: (a + 1.0).realize())
  for _ in range(2): cp()
  best = min(sum(v[0] for v in profile_step(cp).values()) for _ in range(steps))
  return 2 * a.nbytes() / best * 1e-9

def bench_input(shape: tuple[int, ...], vocab: int | None) -> np.ndarray:
  """The step's input, the same for both sides: tokens below `vocab` (int32), else standard normal floats."""
  rng = np.random.default_rng(0)
  return rng.standard_normal(shape).astype(np.float32) if vocab is None else rng.integers(0, vocab, shape, np.int32)

def run_ours(device: str, make: Callable[[], Any], shape: tuple[int, ...], vocab: int | None,
             steps: int) -> tuple[float, dict]:
  Device.DEFAULT = device
  Tensor.manual_seed(0)
  step = make()
  x = Tensor(bench_input(shape, vocab), device=device).realize()
  def one() -> None: step(x).numpy()
  for _ in range(2): one()  # warm-up and capture
  t = best_of(one, steps)
  return t, profile_best(one, steps)

def profile_best(fn: Callable[[], Any], steps: int) -> dict[str, list[Any]]:
  """profile_step over `steps` steps, each kernel's best: on a shared machine one profiled step's kernels are slowed
  at random (the 1024^3 reference of the goal's check is a best of as many steps too)."""
  best = profile_step(fn)
  for _ in range(steps - 1):
    for k, v in profile_step(fn).items():
      if k in best and v[0] < best[k][0]: best[k] = v
  return best

def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--quick", action="store_true", help="the first row of each workload, 2 timed steps")
  ap.add_argument("--both", action="store_true", help="also ours on the other CPU path (C where the default is LLVM)")
  ap.add_argument("--big", action="store_true", help="add ResNet-18 at batch 32, 128x128")
  ap.add_argument("--only", default="resnet,block,gpt2,unet,lstm", help="comma-separated workload groups")
  ap.add_argument("--steps", type=int, default=None, help="timed steps per side (default 3, --quick 2)")
  ap.add_argument("--top", type=int, default=10, help="slowest kernels listed per row")
  args = ap.parse_args()
  steps = args.steps or (2 if args.quick else 3)
  torch.set_num_threads(2)
  default = "LLVM" if Device["CPU"].llvm else "C"
  paths = {default: "CPU"}
  if args.both:
    with Context(CPU_LLVM=int(default == "C")): paths["C" if default == "LLVM" else "LLVM"] = Device["CPU:1"].device
  print(f"torch {torch.__version__} with {torch.get_num_threads()} threads; ours: TinyJit, "
        f"{Device['CPU'].threads} threads; best of {steps} steps", flush=True)
  results = []
  goal: dict[str, list[tuple[str, str, float, int, int, int, float]]] = {p: [] for p in paths}
  for name, _, build in workloads(args):
    make, tstep, shape, vocab = build()
    # NOTE: torch's embedding takes int64 indices
    tx = torch.from_numpy(bench_input(shape, vocab).astype(np.float32 if vocab is None else np.int64))
    tstep(tx)
    t_torch = best_of(lambda: tstep(tx), steps)
    # NOTE: torch's OpenMP threads wait on each other on an oversubscribed machine: one thread is the steadier reference
    torch.set_num_threads(1)
    t_torch1 = best_of(lambda: tstep(tx), steps)
    torch.set_num_threads(2)
    row = {"torch": t_torch, "torch1": t_torch1}
    profs = {}
    refs = {}
    for pname, dev in paths.items():
      row[pname], profs[pname] = run_ours(dev, make, shape, vocab, steps)
      # NOTE: the goal's reference is profiled right after the row's own steps: this VM's speed moves by 2x within
      # minutes, and one reference at the end of a run (as before) measured 209.6 GFLOPS, where the next run's after
      # each row got 393.9-487.6 (the twenty-first session's two runs: 438.5 and 484.5)
      refs[pname] = matmul_path_gflops(dev, steps)
    results.append((name, row))
    cells = "  ".join(f"{p} {row[p]*1e3:9.1f} ms ({row[p]/t_torch:5.1f}x, {row[p]/t_torch1:5.1f}x)" for p in paths)
    print(f"{name:22s} torch {t_torch*1e3:8.1f} ms, 1 thread {t_torch1*1e3:8.1f} ms  {cells}", flush=True)
    for pname, per in profs.items():
      total = sum(v[0] for v in per.values())
      print(f"  slowest kernels ({pname}, profiled step (each kernel's best) {total*1e3:.1f} ms, "
            f"{sum(int(v[2]) for v in per.values())} launches):")
      for kname, (sec, ops, n, _, _) in sorted(per.items(), key=lambda kv: -kv[1][0])[:args.top]:
        print(f"    {kname:40s} x{int(n):<3d} {sec*1e3:8.2f} ms {ops/max(sec, 1e-9)*1e-9:7.1f} GFLOPS "
              f"{100*sec/total:5.1f}%")
      goal[pname].extend((name, kname, sec, n, macs, nbytes, refs[pname])
                         for kname, (sec, _, n, macs, nbytes) in per.items() if macs >= 256 ** 3)
  # the goal: every matmul-shaped kernel over 256^3 multiply-adds at half the 1024^3 matmul path's GFLOPS or more
  for pname, ks in goal.items():
    bw = copy_gbps(paths[pname], steps)
    # NOTE: the most a kernel's multiply-adds could run at if it moved each of its buffers once at the copy's rate (a
    # roofline of its compulsory traffic): under half of its row's reference, no opt gets it there, only moving fewer
    # bytes. Not a hard bound: a buffer its producer just wrote can come from the last-level cache, faster than the
    # copy's 128 MiB
    rate = [(2 * macs * n / max(sec, 1e-9) * 1e-9, row, kname, 2 * macs / (nbytes / (bw * 1e9)) * 1e-9, ref)
            for row, kname, sec, n, macs, nbytes, ref in ks]
    under = sorted(r for r in rate if r[0] < r[4] / 2)
    refs_by_row = {r[1]: r[4] for r in rate}
    print(f"\nmatmul-shaped kernels over 256^3 multiply-adds ({pname}; 2 flops a multiply-add): "
          f"{len(rate) - len(under)} of {len(rate)} at half the 1024^3 matmul's GFLOPS or more (the matmul profiled "
          f"after each row's steps: " + ", ".join(f"{row} {ref:.1f}" for row, ref in refs_by_row.items()) + ")")
    bound = [r for r in under if r[3] < r[4] / 2]
    print(f"  of the {len(under)} under it, {len(bound)} could not reach it moving each of their buffers once at the "
          f"copy's {bw:.1f} GB/s (their memory roofline, the last column, is under it too)")
    for gf, row, kname, roof, ref in under:
      print(f"  under: {row:22s} {kname:40s} {gf:7.1f} GFLOPS ({gf / ref:.2f} of it), roofline {roof:8.1f} "
            f"({roof / ref:.2f}){'  memory-bound' if roof < ref / 2 else ''}")
  Device.DEFAULT = "CPU"
  print("\n| workload | torch 2 threads ms | torch 1 thread ms | " +
        " | ".join(f"ours {p} ms | {p} / torch 2 thr | {p} / torch 1 thr" for p in paths) + " |")
  print("|---|---|---|" + "---|---|---|" * len(paths))
  for name, row in results:
    print(f"| {name} | {row['torch']*1e3:.1f} | {row['torch1']*1e3:.1f} | " + " | ".join(
      f"{row[p]*1e3:.1f} | {row[p]/row['torch']:.1f}x | {row[p]/row['torch1']:.1f}x" for p in paths) + " |")
  return 0

if __name__ == "__main__": sys.exit(main())
