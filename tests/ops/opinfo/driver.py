"""Run torch's OpInfo sample inputs through our Tensor API and compare with torch, forward and backward.

Every OpInfo in torch's op_db has `sample_inputs(device, dtype, requires_grad)`: hand-picked inputs per op (empty and
size-1 dims, broadcasting, negative dims, extreme keyword arguments). An `Adapter` says how one torch op is called on
our Tensor; `run_op` converts each sample (tensors through numpy), calls both, and checks

- the output's shape, dtype and values (NaN where torch has NaN, inf where it has inf; float16 at half tolerance);
- for float32 samples of differentiable ops, the gradient of every input that requires one, seeded with a random
  cotangent per output (not ones, so a rule that mixes up elements shows).

Policy for dtypes: our integer default is int32 (tinygrad's), so an int64 result of torch's (an index, an integer
sum) may be int32 here. Everything else must match. A sample outside what our API promises is skipped only by an
adapter's `skip` with a stated reason, and the reasons are counted and printed, never silent.
"""
from __future__ import annotations
import collections, dataclasses, inspect
from typing import Any, Callable
import numpy as np
import torch
from tinygrad import Tensor, dtypes
from tinygrad.dtype import DType

TORCH_TO_OURS: dict[torch.dtype, DType] = {
  torch.float32: dtypes.float32, torch.float16: dtypes.float16, torch.bfloat16: dtypes.bfloat16,
  torch.float64: dtypes.float64, torch.int8: dtypes.int8, torch.int16: dtypes.int16, torch.int32: dtypes.int32,
  torch.int64: dtypes.int64, torch.uint8: dtypes.uint8, torch.bool: dtypes.bool}

# the dtypes an op is tried with, when torch supports it for the op on CPU
DEFAULT_DTYPES = (torch.float32, torch.float16, torch.int32, torch.bool)

class Unsupported(Exception):
  """A sample our conversion cannot express (a complex tensor, a torch object with no counterpart): counted as a skip
  with its reason."""

@dataclasses.dataclass(frozen=True)
class Adapter:
  fn: Callable[..., Any]                     # fn(x, *args, **kwargs) on our Tensors (converted like torch's)
  dtypes: tuple[torch.dtype, ...] = DEFAULT_DTYPES
  grad: bool = True                          # check gradients of float32 samples (where torch's OpInfo supports it)
  skip: Callable[[Any], str | None] | None = None   # sample -> reason it is out of scope, or None
  tol: dict[torch.dtype, float] = dataclasses.field(default_factory=dict)  # per output dtype: rtol = atol
  grad_tol: float = 1e-3
  torch_fn: Callable[..., Any] | None = None  # a different reference than OpInfo.op (e.g. torch's values only)
  samples: int | None = None                  # at most this many samples (an OpInfo with hundreds of near-duplicates,
                                              # a cartesian product of options): see spread(); the rest count as skipped

def method(name: str, **rename: str) -> Callable[..., Any]:
  """Tensor.<name>, with torch's keyword names renamed to ours (`dim` goes to `axis` where the method takes axis)."""
  fn = getattr(Tensor, name)
  params = inspect.signature(fn).parameters
  def call(x: Any, *args: Any, **kw: Any) -> Any:
    for t, o in rename.items():
      if t in kw: kw[o] = kw.pop(t)
    if "dim" in kw and "dim" not in params and "axis" in params: kw["axis"] = kw.pop("dim")
    return fn(x, *args, **kw)
  call.__name__ = name
  return call

def to_ours(a: Any, grads: list[tuple[torch.Tensor, Tensor]]) -> Any:
  if isinstance(a, torch.Tensor):
    if a.dtype not in TORCH_TO_OURS: raise Unsupported(f"input dtype {a.dtype}")
    rg = a.requires_grad and a.dtype.is_floating_point
    v = a.detach().float().numpy() if a.dtype == torch.bfloat16 else a.detach().numpy()
    t = Tensor(v, dtype=TORCH_TO_OURS[a.dtype], requires_grad=True if rg else None)
    if rg: grads.append((a, t))
    return t
  if isinstance(a, list): return [to_ours(x, grads) for x in a]
  if isinstance(a, tuple): return tuple(to_ours(x, grads) for x in a)
  if isinstance(a, dict): return {k: to_ours(v, grads) for k, v in a.items()}
  if isinstance(a, torch.dtype):
    if a not in TORCH_TO_OURS: raise Unsupported(f"dtype argument {a}")
    return TORCH_TO_OURS[a]
  if isinstance(a, (torch.device, torch.memory_format, torch.layout, torch.Generator)): raise Unsupported(f"{type(a).__name__} argument")
  if isinstance(a, complex): raise Unsupported("complex scalar")
  return a

def flat(o: Any) -> list[Any]:
  if isinstance(o, (tuple, list)): return [y for x in o for y in flat(x)]
  return [o]

def _np(t: torch.Tensor) -> np.ndarray: return t.detach().float().numpy() if t.dtype == torch.bfloat16 else t.detach().numpy()

def _realize(ts: list[Tensor]) -> None:
  # NOTE: one schedule for all of them: outputs that share work (sort's values and indices) compute it once
  if ts: ts[0].realize(*ts[1:])

def check_outputs(ours: Any, theirs: Any, tol: dict[torch.dtype, float]) -> None:
  ro, rt = flat(ours), flat(theirs)
  assert len(ro) == len(rt), f"{len(ro)} outputs, torch has {len(rt)}"
  _realize([o for o in ro if isinstance(o, Tensor)])
  for i, (o, t) in enumerate(zip(ro, rt)):
    if not isinstance(t, torch.Tensor): t = torch.tensor(t)
    if isinstance(o, Tensor):
      want = TORCH_TO_OURS.get(t.dtype)
      if o.dtype != want and not (t.dtype == torch.int64 and o.dtype == dtypes.int32):
        raise AssertionError(f"output {i}: dtype {o.dtype}, torch {t.dtype}")
      on = o.numpy()
    else: on = np.asarray(o)
    tn = _np(t)
    assert on.shape == tn.shape, f"output {i}: shape {on.shape}, torch {tuple(tn.shape)}"
    if tn.dtype == np.bool_ or on.dtype == np.bool_:
      np.testing.assert_array_equal(on, tn, err_msg=f"output {i}")
      continue
    r = tol.get(t.dtype, {torch.float16: 1e-2, torch.bfloat16: 4e-2}.get(t.dtype, 1e-4 if t.dtype.is_floating_point else 0))
    np.testing.assert_allclose(on.astype(np.float64), tn.astype(np.float64), rtol=r, atol=r, equal_nan=True, err_msg=f"output {i}")

def check_grads(ours: Any, theirs: Any, grads: list[tuple[torch.Tensor, Tensor]], tol: float, seed: int) -> None:
  pairs = [(o, t) for o, t in zip(flat(ours), flat(theirs)) if isinstance(t, torch.Tensor) and t.requires_grad and isinstance(o, Tensor)]
  if not pairs: return
  gen = torch.Generator().manual_seed(seed)
  cots = [torch.randn(t.shape, generator=gen, dtype=t.dtype) for _, t in pairs]
  tg = torch.autograd.grad([t for _, t in pairs], [a for a, _ in grads], cots, allow_unused=True)
  loss = sum(((o * Tensor(c.numpy())).sum() for (o, _), c in zip(pairs, cots)), Tensor(0.0))
  ours_g = loss.gradient(*[t for _, t in grads])
  _realize(list(ours_g))
  for k, (g, og) in enumerate(zip(tg, ours_g)):
    want = np.zeros(grads[k][0].shape, np.float32) if g is None else g.numpy()
    np.testing.assert_allclose(og.numpy(), want, rtol=tol, atol=tol, equal_nan=True, err_msg=f"gradient of input {k}")

@dataclasses.dataclass
class Result:
  passed: int = 0
  failed: list[tuple[str, str]] = dataclasses.field(default_factory=list)   # (sample, error)
  skipped: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # reason -> count

def sample_str(s: Any) -> str:
  def d(a: Any) -> str:
    if isinstance(a, torch.Tensor): return f"T{tuple(a.shape)}:{str(a.dtype).replace('torch.', '')}"
    if isinstance(a, (list, tuple)): return ("[" if isinstance(a, list) else "(") + ", ".join(d(x) for x in a) + ("]" if isinstance(a, list) else ")")
    return repr(a)
  return f"input={d(s.input)} args={d(tuple(s.args))} kwargs={{{', '.join(f'{k}={d(v)}' for k, v in s.kwargs.items())}}}"

def spread(n: int, cap: int | None) -> range:
  """At most cap of n sample positions, every p-th for the least odd prime p >= n/cap: a list built as a cartesian
  product of options (torch's pooling samples) is then not sampled in step with an option's period (every 30th of a
  list alternating return_indices would take only one of its values)."""
  if cap is None or n <= cap: return range(n)
  p = max(3, -(-n // cap))
  while any(p % d == 0 for d in range(2, int(p ** 0.5) + 1)): p += 1
  return range(0, n, p)

def run_op(opinfo: Any, ad: Adapter, dtype: torch.dtype) -> Result:
  res = Result()
  grad = ad.grad and dtype == torch.float32 and opinfo.supports_autograd
  torch.manual_seed(0)
  samples = list(opinfo.sample_inputs("cpu", dtype, requires_grad=grad))
  keep = spread(len(samples), ad.samples)
  for n, s in enumerate(samples):
    if n not in keep:
      res.skipped[f"spread: {len(keep)} of {len(samples)} samples run (Adapter.samples)"] += 1
      continue
    if ad.skip is not None and (why := ad.skip(s)) is not None:
      res.skipped[why] += 1
      continue
    grads: list[tuple[torch.Tensor, Tensor]] = []
    try: x, args, kw = to_ours(s.input, grads), to_ours(tuple(s.args), grads), to_ours(dict(s.kwargs), grads)
    except Unsupported as e:
      res.skipped[str(e)] += 1
      continue
    try: theirs = (ad.torch_fn or opinfo.op)(s.input, *s.args, **s.kwargs)
    except Exception as e:  # noqa: BLE001 -- torch refuses the sample (an error-input sample): ours is not judged on it
      res.skipped[f"torch raises {type(e).__name__}"] += 1
      continue
    try:
      ours = ad.fn(x, *args, **kw)
      check_outputs(ours, theirs, ad.tol)
      if grad and grads: check_grads(ours, theirs, grads, ad.grad_tol, n)
      res.passed += 1
    except Exception as e:  # noqa: BLE001 -- every failure of ours is reported with its sample
      res.failed.append((sample_str(s), f"{type(e).__name__}: {str(e)[:400]}"))
  return res

def opinfos() -> dict[str, Any]:
  """torch's OpInfos by name; a variant is `name.variant` (`div.floor_rounding`, `nn.functional.pad.reflect`)."""
  from torch.testing._internal.common_methods_invocations import op_db
  return {o.name + (f".{o.variant_test_name}" if o.variant_test_name else ""): o for o in op_db}

def adapters() -> dict[str, Adapter]:
  from tests.ops.opinfo import elementwise, reduce, shape, nn
  out: dict[str, Adapter] = {}
  for m in (elementwise, reduce, shape, nn):
    for k, v in m.ADAPTERS.items():
      assert k not in out, f"{k} has two adapters"
      out[k] = v
  return out

def cases() -> list[tuple[str, torch.dtype]]:
  ops, ads = opinfos(), adapters()
  return [(name, dt) for name, ad in sorted(ads.items()) for dt in ad.dtypes if dt in ops[name].supported_dtypes("cpu")]
