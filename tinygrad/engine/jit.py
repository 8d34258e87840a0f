"""TinyJit: record the kernels a function launches once, then replay them on new inputs without calling the function,
scheduling or compiling again.

    @TinyJit
    def step(x: Tensor, y: Tensor) -> Tensor: ...

Call 1 runs the function normally (a warm-up: lazily built parameters and optimizer state get realized, kernels
compile). Call 2 runs it again and records every launch (runner, buffers, variable values): the capture. From call 3 on
the function is not called: the recorded launches run again with the new inputs' buffers in place of call 2's, and the
outputs come back as tensors over the captured output buffers. docs/jit.md has the contract and its limits."""
from __future__ import annotations
import functools, inspect, math
from dataclasses import dataclass
from typing import Any, Callable, Generic, TypeVar, cast
import numpy as np
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp
from tinygrad.uop.sint import sint, binds_of, unbind_sint, bind_sint, render_shape, graph_binds, substitute_sizes
from tinygrad.uop.sint import variables
from tinygrad.dtype import DType
from tinygrad.device import Device, Buffer, buffer_of
from tinygrad.helpers import DEBUG
from tinygrad.engine.realize import ExecItem, Runner, CompiledRunner, launch, capture_launches, _fmt_line
from tinygrad.tensor import Tensor, all_tensors, base_buffer

R = TypeVar("R")

class JitError(RuntimeError):
  """A call TinyJit cannot capture or replay faithfully; the message names the argument (or output) and what to do."""

# ---- argument and return structures: lists, tuples (named too) and dicts of leaves ----

def _map_leaves(obj: Any, fn: Callable[[str, Any], Any], path: str) -> Any:
  if isinstance(obj, dict): return {k: _map_leaves(v, fn, f"{path}[{k!r}]") for k, v in obj.items()}
  if isinstance(obj, tuple) and hasattr(obj, "_fields"):
    return type(obj)(*(_map_leaves(v, fn, f"{path}[{i}]") for i, v in enumerate(obj)))
  if isinstance(obj, (list, tuple)): return type(obj)(_map_leaves(v, fn, f"{path}[{i}]") for i, v in enumerate(obj))
  return fn(path, obj)

def _leaves(obj: Any, path: str) -> list[tuple[str, Any]]:
  out: list[tuple[str, Any]] = []
  _map_leaves(obj, lambda p, v: out.append((p, v)), path)
  return out

_PLAIN = (type(None), bool, int, float, complex, str, bytes, np.generic)

def _same_value(a: Any, b: Any) -> bool:
  """Equal plain values (NaN equal to NaN), or the very same object for anything else."""
  if isinstance(a, _PLAIN) and type(a) is type(b):
    return bool(a == b) or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))
  return a is b

@dataclass(frozen=True)
class _TensorArg:
  """What a tensor argument must be on every call (the tensor itself is not kept). A symbolic size is kept unbound
  (its variable, whatever value it is bound to); on several devices, its layout."""
  shape: tuple[sint, ...]
  dtype: DType
  device: str
  layout: Any = None

def _is_bound_var(v: Any) -> bool: return isinstance(v, UOp) and v.op is Ops.BIND

def _spec(v: Any) -> Any:
  """What an argument must be on every call: a tensor's shape (unbound), dtype and device; a bound variable's
  variable (its value may change: that is how a replay gets new values); any other value itself."""
  if isinstance(v, Tensor):
    return _TensorArg(tuple(unbind_sint(s) for s in v.shape), v.dtype, v.device,
                      v._layout() if isinstance(v.device, tuple) else None)
  return v.src[0] if _is_bound_var(v) else v

def _call_vals(leaves: list[tuple[str, Any]]) -> dict[str, int]:
  """The values of the call's bound variables by name: the variables passed as arguments and those in the symbolic
  sizes of its tensors."""
  ret: dict[str, int] = {}
  for p, v in leaves:
    found = binds_of(v) if _is_bound_var(v) else binds_of(v.shape) if isinstance(v, Tensor) else {}
    for var, val in found.items():
      if ret.setdefault(var.arg[0], val) != val:
        raise JitError(f"TinyJit: variable {var.arg[0]!r} is bound to {ret[var.arg[0]]} and to {val} ('{p}') in one "
                       "call")
  return ret

def _describe(v: Any) -> str:
  if isinstance(v, _TensorArg):
    bounds = "".join(f", {u.arg[0]} in [{u.arg[1]}, {u.arg[2]}]" for u in variables(v.shape))
    split = "" if v.layout is None else " replicated" if v.layout[1] is None else f" split on axis {v.layout[1]} " \
      f"{v.layout[2]}"
    return f"a Tensor {render_shape(v.shape)} {v.dtype} on {v.device}{split}{bounds}"
  if isinstance(v, UOp) and v.op is Ops.DEFINE_VAR: return f"variable {v.arg[0]!r} in [{v.arg[1]}, {v.arg[2]}]"
  return repr(v) if isinstance(v, _PLAIN) else f"a {type(v).__name__} object (id {id(v):#x})"

def _rebind(u: UOp, vals: dict[str, int]) -> UOp:
  """A captured view with its symbolic sizes bound to this call's values."""
  subs = {var.bind(old): var.bind(vals[var.arg[0]]) for var, old in graph_binds(u).items() if var.arg[0] in vals}
  return substitute_sizes(u, subs) if subs else u

# ---- the capture ----

@dataclass(frozen=True)
class _Launch:
  """One recorded launch. `bufs` holds None where a slot's buffer goes; `patches` are (position, slot, view): the
  slot's buffer itself, or a view (size, dtype, byte offset) of it."""
  runner: Runner
  bufs: tuple[Buffer | None, ...]
  var_vals: dict[str, int]
  patches: tuple[tuple[int, int, tuple[int, DType, int] | None], ...]

@dataclass(frozen=True)
class _Out:
  """A returned tensor: a view `uop` of a captured buffer, or (slot >= 0) the buffer of input `slot` in `shape`."""
  uop: UOp | None
  slot: int
  shape: tuple[sint, ...]

class CapturedJit:
  """The launches of one captured call and how to rebuild its return value. Slots are the buffers that change between
  calls: first the tensor arguments in order, then each device's random-number state."""
  def __init__(self, items: list[ExecItem], slot_bufs: list[Buffer], slot_names: list[str], ret: Any):
    self.slot_names = slot_names
    slot_of: dict[Buffer, int] = {}
    for i, b in enumerate(slot_bufs): slot_of.setdefault(b, i)
    # NOTE: arguments that shared a buffer at capture must share one on replay (a kernel may read one, write the other)
    self.aliases = tuple(slot_of[b] for b in slot_bufs)
    base_slot = {b.base: i for i, b in reversed(list(enumerate(slot_bufs)))}
    self.launches = [self._launch(it, slot_of, base_slot, slot_bufs) for it in items]
    # the buffers the capture owns, and the slots some launch writes: an argument that is one of the former (the output
    # of an earlier call fed back in) is copied before a replay, unless it is written in place
    self.owned = {b.base for ln in self.launches for b in ln.bufs if b is not None}
    self.written_slots = {s for ln in self.launches for pos, s, _ in ln.patches if pos in _written(ln.runner)}
    self.ret = _map_leaves(ret, lambda p, v: self._out(p, v, slot_of, base_slot), "return")

  def _launch(self, it: ExecItem, slot_of: dict[Buffer, int], base_slot: dict[Buffer, int],
              slot_bufs: list[Buffer]) -> _Launch:
    bufs: list[Buffer | None] = list(it.bufs)
    patches: list[tuple[int, int, tuple[int, DType, int] | None]] = []
    for pos, b in enumerate(it.bufs):
      if (s := slot_of.get(b)) is not None:
        patches.append((pos, s, None))
      elif (s := base_slot.get(b.base)) is not None:
        sb = slot_bufs[s]
        if sb._base is not None or b._base is not sb:
          raise JitError(f"TinyJit: kernel {it.runner.display_name} uses {b!r}, which overlaps the memory of "
                         f"'{self.slot_names[s]}' without being it; pass that argument as a contiguous tensor")
        patches.append((pos, s, (b.size, b.dtype, b.offset)))
      else: continue
      bufs[pos] = None
    return _Launch(it.runner, tuple(bufs), it.var_vals, tuple(patches))

  def _out(self, path: str, v: Any, slot_of: dict[Buffer, int], base_slot: dict[Buffer, int]) -> Any:
    if not isinstance(v, Tensor): return v
    base = base_buffer(v.uop)
    assert base is not None, f"{path} was realized"
    bufs = _buffers_of(base)
    slots = [slot_of.get(b) for b in bufs]
    # NOTE: a returned argument (on several devices: every shard of it, in order) comes back as this call's argument
    if slots[0] is not None and slots == list(range(slots[0], slots[0] + len(bufs))):
      return _Out(None, slots[0], v.shape)
    for buf in bufs:
      if buf in slot_of or buf.base in base_slot:
        raise JitError(f"TinyJit: {path} is a view into argument '{self.slot_names[base_slot[buf.base]]}'; return a "
                       "contiguous copy (.contiguous()) instead")
    return _Out(v.uop, -1, v.shape)

  def _unowned(self, slot: int, b: Buffer) -> Buffer:
    """`b`, or a copy of it when it is memory the captured launches use for something else (they would overwrite it
    while reading it)."""
    if b.base not in self.owned: return b
    if slot in self.written_slots:
      raise JitError(f"TinyJit: argument '{self.slot_names[slot]}' is a buffer of this TinyJit's own capture (an "
                     "output of an earlier call) and the function writes it in place; pass a copy (.clone())")
    cp = Buffer(b.device, b.size, b.dtype).allocate()
    cp.copyin(b.as_buffer())
    return cp

  def replay(self, slot_bufs: list[Buffer], vals: dict[str, int] | None = None) -> Any:
    """Run every launch with `slot_bufs` (the current arguments' and random states' buffers) swapped in and the bound
    variables at `vals` (by name; a variable not in it keeps its value from the capture)."""
    now = {b: i for i, b in reversed(list(enumerate(slot_bufs)))}
    for i, b in enumerate(slot_bufs):
      if now[b] != self.aliases[i]:
        j = now[b] if now[b] != i else self.aliases[i]
        raise JitError(f"TinyJit: arguments '{self.slot_names[j]}' and '{self.slot_names[i]}' "
                       f"{'were' if self.aliases[i] != i else 'were not'} the same tensor at capture and "
                       f"{'are not' if self.aliases[i] != i else 'are'} now; the captured kernels assume the "
                       "sharing they saw (call reset() to capture again)")
    slot_bufs = [self._unowned(i, b) for i, b in enumerate(slot_bufs)]
    # NOTE: read once, not per launch (a Context variable's comparison is a call)
    dbg = DEBUG >= 2
    for k, ln in enumerate(self.launches):
      bufs = list(ln.bufs)
      for pos, s, view in ln.patches: bufs[pos] = slot_bufs[s] if view is None else slot_bufs[s].view(*view)
      run_bufs = cast(list[Buffer], bufs)
      var_vals = {k: (vals or {}).get(k, v) for k, v in ln.var_vals.items()} if ln.var_vals else ln.var_vals
      try: et = launch(ln.runner, run_bufs, var_vals, wait=dbg)
      except Exception as e:
        raise RuntimeError(f"TinyJit replay: launch {k} ({ln.runner.display_name}) failed: {type(e).__name__}: "
                           f"{e}") from e
      if dbg: print(_fmt_line(k, ln.runner, run_bufs, et, var_vals) + "  (jit)")
    return self.ret

def _buffers_of(base: UOp) -> list[Buffer]:
  """The buffers of a realized tensor's base: one, or one per device for a tensor on several devices."""
  return [buffer_of(cast(UOp, base_buffer(s))) for s in base.src] if base.op is Ops.MULTI else [buffer_of(base)]

def _slots(tensors: list[Tensor], names: list[str]) -> tuple[list[Buffer], list[str], list[int]]:
  """The capture's slots (buffers that change between calls) of these tensors: each tensor's buffer, or one per device
  for a tensor on several; with their names and the index of the tensor each belongs to."""
  bufs, snames, owner = [], [], []
  for i, (t, n) in enumerate(zip(tensors, names)):
    base = base_buffer(t.uop)
    assert base is not None, f"{n} was realized"
    tb = _buffers_of(base)
    bufs += [b.ensure_allocated() for b in tb]
    snames += [n] if len(tb) == 1 else [f"{n} (on {b.device})" for b in tb]
    owner += [i] * len(tb)
  return bufs, snames, owner

def _written(r: Runner) -> tuple[int, ...]:
  """The positions of a runner's buffers that it writes."""
  if isinstance(r, CompiledRunner): return r.p.outs
  return (0,)

# ---- TinyJit ----

def _realize_with_pending_assigns(tensors: list[Tensor]) -> None:
  """Realize `tensors` and every pending assign (a lazily assigned learning rate, BatchNorm statistics): the captured
  kernels read buffers, so a write still queued in a lazy graph must land in its buffer first."""
  todo = tensors + [t for t in all_tensors if t.uop.op is Ops.ASSIGN]
  if todo: todo[0].realize(*todo[1:])

class TinyJit(Generic[R]):
  """Decorate a function of tensors: call 1 runs it, call 2 captures its launches, later calls replay them (see the
  module doc). `reset()` forgets the capture; `captured` holds it (`captured.launches`)."""
  def __init__(self, fxn: Callable[..., R]):
    if not callable(fxn): raise TypeError(f"TinyJit: needs a function, got {type(fxn).__name__}")
    self.fxn = fxn
    functools.update_wrapper(self, fxn)
    try: self._sig: inspect.Signature | None = inspect.signature(fxn)
    except (TypeError, ValueError): self._sig = None
    self.reset()

  def reset(self) -> None:
    """Forget the capture: the next call runs the function normally again, the one after captures anew."""
    self.cnt = 0
    self.captured: CapturedJit | None = None
    self._expected: list[tuple[str, Any]] | None = None
    self._training = Tensor.training
    self._rng_devs: list[str] = []

  def __get__(self, obj: Any, objtype: Any = None) -> Any:
    # NOTE: a decorated method: the instance is bound as the first argument (compared by identity on every call)
    return self if obj is None else functools.partial(self.__call__, obj)

  @property
  def _name(self) -> str: return getattr(self.fxn, "__qualname__", getattr(self.fxn, "__name__", repr(self.fxn)))

  def _bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The arguments by parameter name (so f(x) and f(x=x) are one call signature)."""
    if self._sig is not None:
      try: return dict(self._sig.bind(*args, **kwargs).arguments)
      except TypeError: pass
    return {**{f"args[{i}]": a for i, a in enumerate(args)}, **kwargs}

  def _check_signature(self, leaves: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """Raise unless the call matches the first one; returns the leaves in the first call's order (tensor arguments fill
    the capture's slots in that order, whatever order keyword arguments come in)."""
    for p, v in leaves:
      if isinstance(v, np.ndarray):
        raise JitError(f"TinyJit({self._name}): argument '{p}' is a numpy ndarray; its values would be constants of "
                       "the captured kernels. Pass Tensor(...) instead")
    specs = [(p, _spec(v)) for p, v in leaves]
    if self._expected is None: return leaves
    if Tensor.training != self._training:
      raise JitError(f"TinyJit({self._name}): captured with Tensor.training={self._training}, called with "
                     f"{Tensor.training}; the captured kernels follow the mode they saw (dropout, BatchNorm). Use one "
                     "TinyJit per mode")
    exp = dict(self._expected)
    if sorted(exp) != sorted(p for p, _ in specs):
      raise JitError(f"TinyJit({self._name}): called with arguments {[p for p, _ in specs]} but captured with "
                     f"{list(exp)}; a jitted function takes the same arguments (and tensor count) on every call "
                     "(reset() to capture again)")
    for p, v in specs:
      e = exp[p]
      if isinstance(e, _TensorArg) and isinstance(v, _TensorArg):
        if e == v: continue
        raise JitError(f"TinyJit({self._name}): argument '{p}' is {_describe(v)}, but it was captured as "
                       f"{_describe(e)}; the captured kernels are specialized to shapes, dtypes and devices. Use one "
                       "TinyJit per shape, or reset() to capture again")
      if isinstance(e, _TensorArg) or isinstance(v, _TensorArg):
        raise JitError(f"TinyJit({self._name}): argument '{p}' is {_describe(v)}, but it was {_describe(e)} at "
                       "capture")
      if not _same_value(e, v):
        raise JitError(f"TinyJit({self._name}): argument '{p}' is {_describe(v)} but was {_describe(e)} at capture; "
                       "Python values are constants of the captured kernels: pass a Tensor for a value that changes "
                       "(or reset() to capture again)")
    got = dict(leaves)
    return [(p, got[p]) for p in exp]

  def _outputs(self, ret: Any) -> list[Tensor]:
    """The tensors of the return value; anything but tensors and plain Python constants is an error."""
    outs: list[Tensor] = []
    for p, v in _leaves(ret, "return"):
      if isinstance(v, Tensor): outs.append(v)
      elif not isinstance(v, _PLAIN):
        raise JitError(f"TinyJit({self._name}): {p} is a {type(v).__name__}; a jitted function returns Tensors (and "
                       "plain Python constants, returned as they were at capture), since a replay does not run "
                       "the function")
    return outs

  def __call__(self, *args: Any, **kwargs: Any) -> R:
    bound = self._bind(args, kwargs)
    # NOTE: paths read like "x", "xs[0]", "batch['img']"
    leaves = [leaf for name, v in bound.items() for leaf in _leaves(v, name)]
    leaves = self._check_signature(leaves)
    named = [(p, v) for p, v in leaves if isinstance(v, Tensor)]
    inputs = [t for _, t in named]
    _realize_with_pending_assigns(inputs)
    if self.captured is not None: return cast(R, self._replay(inputs, _call_vals(leaves)))
    if self.cnt == 0:
      ret = self.fxn(*args, **kwargs)
      _realize_with_pending_assigns(self._outputs(ret))
      # NOTE: the first call that ran fixes the signature every later call must have
      self._expected, self._training = [(p, _spec(v)) for p, v in leaves], Tensor.training
    else: ret = self._capture(args, kwargs, named)
    self.cnt += 1
    return ret

  def _capture(self, args: tuple[Any, ...], kwargs: dict[str, Any], named: list[tuple[str, Tensor]]) -> Any:
    # NOTE: every device the call may draw random numbers on gets its state before the capture, so the first state a
    # captured draw reads is a buffer that exists outside it (a replay swaps the current state in there)
    devs = {d for _, t in named for d in (t.device if isinstance(t.device, tuple) else (t.device,))}
    for dev in devs | {Device.DEFAULT}: Tensor._rng_state(dev)
    rng_before = dict(Tensor._rng_states)
    with capture_launches() as items:
      ret = self.fxn(*args, **kwargs)
      _realize_with_pending_assigns(self._outputs(ret))
      rng_devs = self._commit_rng(rng_before)
    slot_tensors = [t for _, t in named] + [Tensor._rng_state(d) for d in rng_devs]
    slot_bufs, slot_names, _ = _slots(slot_tensors, [p for p, _ in named] + [f"random state of {d}" for d in rng_devs])
    self.captured = CapturedJit(items, slot_bufs, slot_names, ret)
    self._rng_devs = rng_devs
    if DEBUG >= 2:
      print(f"TinyJit({self._name}): captured {len(self.captured.launches)} launches, "
            f"{len(named)} tensor arguments")
    return ret

  def _commit_rng(self, before: dict[str, Tensor]) -> list[str]:
    """Write each device's advanced random state into the buffer that held it before the call (a captured launch), so
    a replay continues the stream from wherever it stands then. Returns the devices that drew."""
    devs = []
    for dev, st in list(Tensor._rng_states.items()):
      start = before.get(dev)
      if st is start: continue
      if start is None:
        raise JitError(f"TinyJit({self._name}): the function drew random numbers on {dev}, which had no random state "
                       "before the capture; draw once on that device before capturing")
      start.assign(st).realize()
      Tensor._rng_states[dev] = start
      devs.append(dev)
    return devs

  def _replay(self, inputs: list[Tensor], vals: dict[str, int]) -> Any:
    assert self.captured is not None
    slot_tensors = inputs + [Tensor._rng_state(d) for d in self._rng_devs]
    slot_bufs, _, owner = _slots(slot_tensors, [f"argument {i}" for i in range(len(slot_tensors))])
    ret = self.captured.replay(slot_bufs, vals)
    self.cnt += 1
    def make(p: str, v: Any) -> Any:
      if not isinstance(v, _Out): return v
      if v.slot < 0: return Tensor(_rebind(cast(UOp, v.uop), vals))
      shape, t = tuple(bind_sint(s, vals) for s in v.shape), slot_tensors[owner[v.slot]]
      if t.shape == shape: return Tensor(t.uop)
      base = cast(UOp, base_buffer(t.uop))
      return Tensor(base if base.op is Ops.MULTI else base.reshape(shape))
    return _map_leaves(ret, make, "return")

__all__ = ["TinyJit", "CapturedJit", "JitError"]
