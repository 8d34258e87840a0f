"""Random chains of ops over tensors on several CPU devices (issue 28): hypothesis draws a start tensor, a device set and
a layout, then a sequence of elementwise ops (with fresh operands in their own layouts, broadcast or not), reduces,
reshapes (also those that cut the shards), movement ops, matmuls, reshards onto other device sets, gathers onto one
device and realizes in the middle. The result must equal numpy run on the unsharded values, and sit on the devices the
chain put it on. make test draws a few chains; -m slow (make test-multi) draws many more."""
from __future__ import annotations
import functools, itertools
from typing import Any, Callable
import numpy as np
import pytest
from hypothesis import given, settings, note, strategies as st
from tinygrad import Tensor, Device
from tinygrad.helpers import Context

POOL = ("CPU:0", "CPU:1", "CPU:2", "CPU:3")
MAX_DIM, MAX_NUMEL, MAX_STEPS = 6, 216, 7

Devs = Any  # a tuple of device names, or one name

@functools.cache
def shapes_of(numel: int) -> list[tuple[int, ...]]:
  """The shapes a reshape may draw for `numel` elements: rank 0 (one element), rank 1, and every rank 2 and 3 shape with
  no dimension over 8."""
  out: list[tuple[int, ...]] = [()] if numel == 1 else []
  out.append((numel,))
  for rank in (2, 3):
    out += [sh for sh in itertools.product(range(1, 9), repeat=rank) if int(np.prod(sh)) == numel]
  return out

def values(draw: Callable[..., Any], shape: tuple[int, ...]) -> np.ndarray:
  """Small integers as float32: sums and products of them are exact, so a mismatch is a real one, not rounding."""
  seed = draw(st.integers(0, 2**32 - 1), label="seed")
  return np.random.default_rng(seed).integers(-3, 4, size=shape).astype(np.float32)

def device_set(draw: Callable[..., Any]) -> tuple[str, ...]:
  n = draw(st.integers(2, 3), label="devices")
  return tuple(draw(st.permutations(POOL), label="device order")[:n])

def place(draw: Callable[..., Any], arr: np.ndarray, devs: Devs, what: str) -> tuple[Tensor, str]:
  """`arr` on `devs`: split on a drawn axis or replicated when devs is a set; the code that did it, for the notes."""
  if isinstance(devs, str): return Tensor(arr, device=devs), f"Tensor({what}, device={devs!r})"
  axis = draw(st.sampled_from([None, *range(arr.ndim)]), label=f"{what} axis")
  return Tensor(arr).shard(devs, axis), f"Tensor({what}).shard({devs}, {axis})"

def canon(devs: Devs) -> Devs:
  return Device.canonicalize(devs) if isinstance(devs, str) else tuple(Device.canonicalize(d) for d in devs)

UNARY: dict[str, tuple[Callable[[Tensor], Tensor], Callable[[np.ndarray], np.ndarray]]] = {
  "neg": (lambda t: -t, lambda a: -a),
  "relu": (lambda t: t.relu(), lambda a: np.maximum(a, 0)),
  "abs": (lambda t: t.abs(), np.abs),
  "affine": (lambda t: t * 0.5 + 1, lambda a: a * 0.5 + 1),
  "square": (lambda t: t * t, lambda a: a * a),
}
BINARY: dict[str, tuple[Callable[[Tensor, Tensor], Tensor], Callable[[np.ndarray, np.ndarray], np.ndarray]]] = {
  "add": (lambda x, y: x + y, np.add),
  "sub": (lambda x, y: x - y, np.subtract),
  "mul": (lambda x, y: x * y, np.multiply),
  "maximum": (lambda x, y: x.maximum(y), np.maximum),
}
REDUCE: dict[str, tuple[Callable[..., Tensor], Callable[..., np.ndarray]]] = {
  "sum": (lambda t, axis, keepdim: t.sum(axis, keepdim=keepdim), lambda a, axis, keepdim: a.sum(axis, keepdims=keepdim)),
  "max": (lambda t, axis, keepdim: t.max(axis, keepdim=keepdim), lambda a, axis, keepdim: a.max(axis, keepdims=keepdim)),
}
STEPS = ("unary", "binary", "reduce", "reshape", "permute", "shrink", "flip", "pad", "expand", "matmul", "shard", "to",
         "realize")

def step(draw: Callable[..., Any], t: Tensor, ref: np.ndarray, devs: Devs, i: int) -> tuple[Tensor, np.ndarray, Devs, str]:
  """One drawn op applied to the tensor and to its numpy reference; returns both, the devices, and the op's code."""
  kind, shape = draw(st.sampled_from(STEPS), label=f"step {i}"), ref.shape
  if kind == "unary":
    name = draw(st.sampled_from(sorted(UNARY)), label="unary")
    return UNARY[name][0](t), UNARY[name][1](ref), devs, f"{name}(t)"
  if kind == "binary":
    keep = [draw(st.booleans(), label="broadcast dim") for _ in shape]
    oshape = tuple(s if k else 1 for s, k in zip(shape, keep))
    other = values(draw, oshape)
    o, code = place(draw, other, devs, f"values{oshape}")
    name, swap = draw(st.sampled_from(sorted(BINARY)), label="binary"), draw(st.booleans(), label="swap")
    tg, npf = BINARY[name]
    if swap: return tg(o, t), npf(other, ref).astype(np.float32), devs, f"{name}({code}, t)"
    return tg(t, o), npf(ref, other).astype(np.float32), devs, f"{name}(t, {code})"
  if kind == "reduce" and ref.ndim:
    name, keepdim = draw(st.sampled_from(sorted(REDUCE)), label="reduce"), draw(st.booleans(), label="keepdim")
    axis = draw(st.sampled_from([None, *range(-ref.ndim, ref.ndim)]), label="reduce axis")
    return REDUCE[name][0](t, axis, keepdim), REDUCE[name][1](ref, axis, keepdim), devs, \
      f"t.{name}({axis}, keepdim={keepdim})"
  if kind == "reshape":
    new = draw(st.sampled_from(shapes_of(ref.size)), label="new shape")
    return t.reshape(new), ref.reshape(new), devs, f"t.reshape({new})"
  if kind == "permute" and ref.ndim:
    order = tuple(draw(st.permutations(range(ref.ndim)), label="order"))
    return t.permute(order), ref.transpose(order), devs, f"t.permute({order})"
  if kind == "shrink" and ref.ndim:
    arg = []
    for s in shape:
      b = draw(st.integers(0, s - 1), label="shrink start")
      arg.append((b, draw(st.integers(b + 1, s), label="shrink end")))
    return t.shrink(tuple(arg)), ref[tuple(slice(b, e) for b, e in arg)], devs, f"t.shrink({tuple(arg)})"
  if kind == "flip" and ref.ndim:
    axis = draw(st.integers(0, ref.ndim - 1), label="flip axis")
    return t.flip(axis), np.flip(ref, axis), devs, f"t.flip({axis})"
  if kind == "pad" and ref.ndim and ref.size * 8 <= MAX_NUMEL:
    arg = tuple((draw(st.integers(0, 1), label="pad before"), draw(st.integers(0, 1), label="pad after")) for _ in shape)
    return t.pad(arg), np.pad(ref, arg), devs, f"t.pad({arg})"
  if kind == "expand" and ref.ndim < 3 and ref.size * 3 <= MAX_NUMEL:
    at, n = draw(st.integers(0, ref.ndim), label="expand at"), draw(st.integers(2, 3), label="expand to")
    new = shape[:at] + (n,) + shape[at:]
    return t.unsqueeze(at).expand(new), np.broadcast_to(np.expand_dims(ref, at), new).copy(), devs, \
      f"t.unsqueeze({at}).expand({new})"
  if kind == "matmul" and ref.ndim:
    m = draw(st.integers(1, 4), label="matmul columns")
    w = values(draw, (shape[-1], m))
    o, code = place(draw, w, devs, f"values{w.shape}")
    return t @ o, ref @ w, devs, f"t @ {code}"
  if kind == "shard":
    new_devs = device_set(draw)
    axis = draw(st.sampled_from([None, *range(ref.ndim)]), label="shard axis")
    return t.shard(new_devs, axis), ref, new_devs, f"t.shard({new_devs}, {axis})"
  if kind == "to":
    target: Devs = draw(st.sampled_from(POOL), label="to") if draw(st.booleans(), label="gather") else device_set(draw)
    return t.to(target), ref, target, f"t.to({target!r})"
  if kind == "realize": return t.realize(), ref, devs, "t.realize()"
  return t, ref, devs, f"({kind} does not apply to shape {shape})"

def run_chain(data: Any) -> None:
  draw = data.draw
  shape = tuple(draw(st.lists(st.integers(1, MAX_DIM), min_size=1, max_size=3), label="shape"))
  ref = values(draw, shape)
  devs: Devs = device_set(draw)
  # NOTE: the partials here are small, so the size rule would always pick the naive allreduce: each chain draws one
  variant = draw(st.sampled_from(["", "naive", "ring"]), label="ALLREDUCE")
  note(f"ALLREDUCE={variant!r}")
  with Context(ALLREDUCE=variant):
    t, code = place(draw, ref, devs, f"values{shape}")
    note(f"t = {code}")
    for i in range(draw(st.integers(1, MAX_STEPS), label="steps")):
      t, ref, devs, code = step(draw, t, ref, devs, i)
      note(f"t = {code}  # {ref.shape} on {devs}")
    assert t.shape == ref.shape, f"shape {t.shape}, numpy's {ref.shape}"
    assert t.device == canon(devs), f"device {t.device}, the chain put it on {canon(devs)}"
    np.testing.assert_allclose(t.numpy(), ref, rtol=1e-6, atol=1e-6)

@settings(max_examples=15)
@given(st.data())
def test_random_chains_equal_numpy_on_the_unsharded_values(data):
  run_chain(data)

@pytest.mark.slow
@settings(max_examples=300)
@given(st.data())
def test_many_random_chains_equal_numpy_on_the_unsharded_values(data):
  run_chain(data)
