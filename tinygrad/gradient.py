"""Autograd as rules over the tensor graph: one rule per op gives the gradients of its sources from the gradient of its
output. `compute_gradient` walks the graph from the root back to the targets and sums the contributions.

A front-end op whose composed graph has a poor or undefined gradient somewhere (pow at a zero base) registers a rule for
its output node with `custom_gradient`: the walk then sends that node's gradient straight to the op's inputs."""
from __future__ import annotations
import functools, math, weakref
from typing import Any, Callable
from tinygrad.uop import Ops, GroupOp
from tinygrad.uop.ops import UOp, UPat, PatternMatcher
from tinygrad.dtype import dtypes, ConstType
from tinygrad.helpers import argsort

def _full(like: UOp, v: ConstType) -> UOp:
  """A constant of like's dtype, device and shape (CONST with a DEVICE source, broadcast by reshape+expand)."""
  dev = like.device
  c = UOp(Ops.CONST, like.dtype, (UOp(Ops.DEVICE, arg=dev),), dtypes.as_const(v, like.dtype))
  shape = like.shape or ()
  return c.reshape((1,) * len(shape)).expand(shape) if shape else c

def _mul(a: UOp, b: UOp) -> UOp: return a.alu(Ops.MUL, b)
def _add(a: UOp, b: UOp) -> UOp: return a.alu(Ops.ADD, b)
def _sum(us: list[UOp]) -> UOp: return functools.reduce(_add, us)  # ((u0 + u1) + u2) + ...
def _scale(a: UOp, v: float) -> UOp: return _mul(a, _full(a, v))
def _recip(a: UOp) -> UOp: return a.alu(Ops.RECIPROCAL)
def _where(c: UOp, a: UOp, b: UOp) -> UOp: return c.alu(Ops.WHERE, a, b)

def _max_grad(ctx: UOp, ret: UOp) -> tuple[UOp, UOp]:
  # NOTE: on a tie each side gets half, so the sum of the two gradients is still the incoming gradient
  a, b = ret.src
  half = _full(ctx, 0.5)
  share = _where(a.alu(Ops.CMPLT, b), _full(ctx, 0.0), _where(a.alu(Ops.CMPEQ, b), half, _full(ctx, 1.0)))
  return _mul(ctx, share), _mul(ctx, _add(_full(ctx, 1.0), _scale(share, -1.0)))

def _reduce_grad(ctx: UOp, ret: UOp) -> tuple[UOp | None]:
  x = ret.src[0]
  op, _ = ret.arg
  shape = x.shape or ()
  g = ctx.expand(shape)
  if op is Ops.ADD: return (g,)
  if op is Ops.MAX:
    # gradient shared equally between the positions that hold the maximum (a nan maximum: the nan positions)
    m = ret.expand(shape)
    hit = x.alu(Ops.CMPEQ, m)
    if dtypes.is_float(x.dtype): hit = hit.alu(Ops.OR, x.alu(Ops.CMPNE, x).alu(Ops.AND, m.alu(Ops.CMPNE, m)))
    hit = hit.cast(ctx.dtype)
    cnt = hit.r(Ops.ADD, ret.arg[1]).expand(shape)
    return (_mul(_mul(g, hit), _recip(cnt)),)
  if op is Ops.MUL: return (_mul(g, _prod_others(x, ret.arg[1])),)
  return (None,)

def _prod_others(x: UOp, axes: tuple[int, ...]) -> UOp:
  """d prod(x) / dx_i, the product of the other elements of i's group, without 0/0 at zeros: with no zero in the group
  it is prod/x_i, with one zero it is the product of the nonzero elements at the zero and 0 elsewhere, with more 0."""
  shape = x.shape or ()
  zero = x.alu(Ops.CMPEQ, _full(x, 0))
  nzeros = _where(zero, _full(x, 1), _full(x, 0)).r(Ops.ADD, axes).expand(shape)
  p = _where(zero, _full(x, 1), x).r(Ops.MUL, axes).expand(shape)  # the product of the nonzero elements
  at_zero = _where(nzeros.alu(Ops.CMPEQ, _full(nzeros, 1)), p, _full(x, 0))
  # NOTE: 1/x_i is taken of 1 at the zeros: an inf in the untaken branch would give 0*inf = nan in a second derivative
  inv = _recip(_where(zero, _full(x, 1), x))
  elsewhere = _where(nzeros.alu(Ops.CMPEQ, _full(nzeros, 0)), _mul(p, inv), _full(x, 0))
  return _where(zero, at_zero, elsewhere)

def _expand_grad(ctx: UOp, ret: UOp) -> tuple[UOp]:
  src_shape = ret.src[0].shape or ()
  axes = tuple(i for i, (s, n) in enumerate(zip(src_shape, ret.arg)) if s != n)
  wide = ctx.cast(dtypes.float32) if ctx.dtype in (dtypes.float16, dtypes.bfloat16) + dtypes.fp8s else ctx
  return (wide.r(Ops.ADD, axes).cast(ctx.dtype),)

def _cos(x: UOp) -> UOp:
  # NOTE: 1 - 2*sin(x/2)**2: x/2 is exact, where x + pi/2 rounds away the low bits of a large x
  s = _scale(x, 0.5).alu(Ops.SIN)
  return _add(_full(x, 1.0), _scale(_mul(s, s), -2.0))
def _dev(x: UOp) -> UOp: return UOp(Ops.DEVICE, arg=x.device)

def _fdiv_grad(ctx: UOp, ret: UOp) -> tuple[UOp, UOp]:
  inv = _recip(ret.src[1])
  return _mul(ctx, inv), _scale(_mul(ctx, _mul(ret, inv)), -1.0)

# piecewise-constant and integer ops pass no gradient
_NO_GRAD = {Ops.TRUNC, Ops.BITCAST, Ops.IDIV, Ops.MOD, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR, Ops.THREEFRY} | \
  GroupOp.Comparison

def _where_grad(ctx: UOp, ret: UOp) -> tuple[None, UOp, UOp]:
  c, zero = ret.src[0], _full(ctx, 0)
  return None, _where(c, ctx, zero), _where(c, zero, ctx)
def _pad_grad(ctx: UOp, ret: UOp) -> tuple[UOp]:
  return (ctx.shrink(tuple((b, b + s) for (b, _), s in zip(ret.arg, ret.src[0].shape))),)
def _shrink_grad(ctx: UOp, ret: UOp) -> tuple[UOp]:
  return (ctx.pad(tuple((b, s - e) for (b, e), s in zip(ret.arg, ret.src[0].shape))),)

def _cast_grad(ctx: UOp, ret: UOp) -> tuple[UOp | None]:
  return (ctx.cast(ret.src[0].dtype),) if dtypes.is_float(ret.src[0].dtype) else (None,)

def _multi_grad(ctx: UOp, ret: UOp) -> tuple[UOp | None, ...]:
  """A tensor on several devices: each shard's gradient is its part of ctx, on its device (a replicated tensor's value
  is its first shard's, so that shard takes it all)."""
  axis, bounds, op = ret.arg
  shape = ret.shape or ()
  def part(i: int, s: UOp) -> UOp:
    box = tuple(bounds[i] if k == axis else (0, n) for k, n in enumerate(shape)) if axis is not None else None
    return UOp(Ops.COPY, ctx.dtype, (ctx.shrink(box) if box else ctx, UOp(Ops.DEVICE, arg=s.device)))
  if op is not None: return (None,) * len(ret.src)
  if axis is None: return (part(0, ret.src[0]),) + (None,) * (len(ret.src) - 1)
  return tuple(part(i, s) for i, s in enumerate(ret.src))

# each rule returns one gradient (or None: no gradient) per source of the node
pm_gradient = PatternMatcher([
  (UPat(Ops.CAST, name="ret"), _cast_grad),
  (UPat(Ops.ADD), lambda ctx: (ctx, ctx)),
  (UPat(Ops.SUB), lambda ctx: (ctx, _scale(ctx, -1.0))),
  (UPat(Ops.MUL, name="ret"), lambda ctx, ret: (_mul(ctx, ret.src[1]), _mul(ctx, ret.src[0]))),
  (UPat(Ops.NEG), lambda ctx: (_scale(ctx, -1.0),)),
  (UPat(Ops.RECIPROCAL, name="ret"), lambda ctx, ret: (_scale(_mul(ctx, _mul(ret, ret)), -1.0),)),
  (UPat(Ops.SQRT, name="ret"), lambda ctx, ret: (_mul(ctx, _recip(_scale(ret, 2.0))),)),
  (UPat(Ops.EXP2, name="ret"), lambda ctx, ret: (_scale(_mul(ctx, ret), math.log(2)),)),
  (UPat(Ops.LOG2, name="ret"), lambda ctx, ret: (_mul(ctx, _recip(_scale(ret.src[0], math.log(2)))),)),
  (UPat(Ops.SIN, name="ret"), lambda ctx, ret: (_mul(ctx, _cos(ret.src[0])),)),
  (UPat(Ops.MAX, name="ret"), _max_grad),
  (UPat(Ops.WHERE, name="ret"), _where_grad),
  (UPat(Ops.FDIV, name="ret"), _fdiv_grad),
  (UPat(_NO_GRAD, name="ret"), lambda ret: (None,) * len(ret.src)),
  (UPat(Ops.RESHAPE, name="ret"), lambda ctx, ret: (ctx.reshape(ret.src[0].shape),)),
  (UPat(Ops.PERMUTE, name="ret"), lambda ctx, ret: (ctx.permute(tuple(argsort(ret.arg))),)),
  (UPat(Ops.EXPAND, name="ret"), _expand_grad),
  (UPat(Ops.PAD, name="ret"), _pad_grad),
  (UPat(Ops.SHRINK, name="ret"), _shrink_grad),
  (UPat(Ops.FLIP, name="ret"), lambda ctx, ret: (ctx.flip(ret.arg),)),
  (UPat(Ops.REDUCE_AXIS, name="ret"), _reduce_grad),
  # NOTE: stored where the forward stores: an unrolled recurrence's weight gradients would otherwise inline every step
  (UPat(Ops.CONTIGUOUS), lambda ctx: (ctx.contiguous(),)),
  (UPat(Ops.DETACH), lambda: (None,)),
  (UPat(Ops.COPY, name="ret"), lambda ctx, ret: (UOp(Ops.COPY, ctx.dtype, (ctx, _dev(ret.src[0]))), None)),
  (UPat(Ops.ASSIGN), lambda: (None, None)),
  (UPat(Ops.MULTI, name="ret"), _multi_grad),
])

# ---- custom rules for particular nodes ----
# NOTE: keyed by the node (hash-consed: an equal expression of the same inputs shares the rule) and weak: a rule lives
# as long as a graph holds its node. The node's own graph stays differentiable, so that a graph rebuilt around the node
# by anything but `substitute` below still has a gradient.
CustomRule = Callable[[UOp, UOp, tuple[UOp, ...]], tuple[UOp | None, ...]]
_custom_rules: weakref.WeakKeyDictionary[UOp, tuple[tuple[UOp, ...], CustomRule]] = weakref.WeakKeyDictionary()

def custom_gradient(node: UOp, inputs: tuple[UOp, ...], rule: CustomRule) -> UOp:
  """Differentiate `node` by `rule(ctx, node, inputs)` (one gradient per input, or None) instead of through its
  graph."""
  _custom_rules[node] = (inputs, rule)
  return node

def substitute(root: UOp, subs: dict[UOp, UOp]) -> UOp:
  """UOp.substitute that carries the custom rules of the nodes it rebuilds over to their new versions."""
  if not subs: return root
  new: dict[UOp, UOp] = {}
  for u in _edges_toposort(root, through_detach=True):
    if u in subs: new[u] = subs[u]; continue
    nsrc = tuple(new.get(s, s) for s in u.src)
    new[u] = u if all(a is b for a, b in zip(nsrc, u.src)) else u.replace(src=nsrc)
    if new[u] is not u and (r := _custom_rules.get(u)) is not None:
      _custom_rules[new[u]] = (tuple(new.get(i, i) for i in r[0]), r[1])
  return new[root]

def _edges(u: UOp) -> tuple[UOp, ...]:
  r = _custom_rules.get(u)
  return u.src if r is None else r[0]

def _edges_toposort(root: UOp, through_detach: bool = False) -> dict[UOp, None]:
  """Sources (and custom-rule inputs) before users; not below DETACH unless through_detach."""
  ret: dict[UOp, None] = {}
  stack: list[tuple[UOp, bool]] = [(root, False)]
  while stack:
    node, visited = stack.pop()
    if node in ret: continue
    if visited: ret[node] = None; continue
    stack.append((node, True))
    if node.op is Ops.DETACH and not through_detach: continue
    stack.extend((s, False) for s in reversed(dict.fromkeys(node.src + _edges(node))) if s not in ret)
  return ret

_LEAVES = {Ops.BUFFER, Ops.BUFFER_VIEW, Ops.CONST, Ops.DEVICE, Ops.UNIQUE, Ops.DEFINE_VAR, Ops.BIND}

# A node that several broadcast products reach (the weight of a recurrence unrolled over its steps: each step's matmul
# gives its gradient dG_t^T H_t) got the sum of those products: one kernel reading 2 inputs a step, its reduce only the
# batch. STACK_MIN_PRODUCTS or more of them, alike, of STACK_MIN_ELEMENTS or more each, are one product of the stacked
# operands instead, reduced over the stack (and, where the node's own gradient is a reduce, over its axes in the same
# reduce: _merge_stacked_reduces): a matmul over steps x batch. Measured (2 threads, AMD Zen 5): an LSTM's weight_hh
# gradient over 32 steps of a batch of 16, 1024 x 256, 15.1 ms summed, 1.1 ms stacked
STACK_MIN_PRODUCTS, STACK_MIN_ELEMENTS = 4, 1 << 16
# NOTE: a stack is a cat, stored by one kernel that CUT makes branch-free up to its MAX_PIECES (32) pieces; past that
# each of its elements would test every piece's gate. So at most this many products a stack: more are several, summed
STACK_MAX_PRODUCTS = 32

def _broadcast_product(u: UOp) -> tuple[UOp, UOp] | None:
  """u's two operands' unexpanded sources where u is a product of two broadcasts (EXPAND x EXPAND), else None."""
  if u.op is not Ops.MUL or any(s.op is not Ops.EXPAND for s in u.src): return None
  return u.src[0].src[0], u.src[1].src[0]

def _stacked_product(group: list[UOp], shape: tuple[int, ...], stacks: set[UOp]) -> UOp:
  """The sum of the broadcast products in group (each EXPAND(a_i) * EXPAND(b_i) of `shape`) as the product of the stored
  stacks of the a_i and of the b_i, reduced over the stack (that reduce added to `stacks`)."""
  n = len(group)
  def stack(us: list[UOp]) -> UOp:
    return _sum([u.reshape((1, *u.shape)).pad(((i, n - 1 - i),) + ((0, 0),) * len(u.shape))
                 for i, u in enumerate(us)]).contiguous()
  a, b = (stack([g.src[k].src[0] for g in group]) for k in (0, 1))
  red = _mul(a.expand((n, *shape)), b.expand((n, *shape))).r(Ops.ADD, (0,))
  stacks.add(red)
  return red.reshape(shape)

def _sum_contributions(parts: list[UOp], stacks: set[UOp]) -> UOp:
  """The sum of a node's gradient contributions, with STACK_MIN_PRODUCTS or more alike broadcast products stacked into
  one product reduced over the stack (the stacks' reduces added to `stacks`)."""
  if len(parts) < STACK_MIN_PRODUCTS: return _sum(parts)
  groups: dict[tuple[Any, ...], list[UOp]] = {}
  for p in parts:
    # NOTE: concrete shapes on one device only (a sharded tensor's products are summed as before)
    if (ops := _broadcast_product(p)) is not None and isinstance(p.device, str) and \
       all(isinstance(d, int) for o in (p, *ops) for d in o.shape) and math.prod(p.shape) >= STACK_MIN_ELEMENTS:
      groups.setdefault((p.dtype, p.shape, ops[0].shape, ops[1].shape), []).append(p)
  out: list[UOp] = []
  stacked: set[UOp] = set()
  for key, group in groups.items():
    if len(group) < STACK_MIN_PRODUCTS: continue
    chunks = -(-len(group) // STACK_MAX_PRODUCTS)
    for c in range(chunks):
      out.append(_stacked_product(group[c * len(group) // chunks:(c + 1) * len(group) // chunks], key[1], stacks))
    stacked.update(group)
  return _sum(out + [p for p in parts if p not in stacked])

def _merge_stacked_reduces(g: UOp, stacks: set[UOp]) -> UOp:
  """g with each sum over the axes A of a stack's reduce (one of `stacks`, reshaped to drop its stack axis) as one
  reduce over the stack and A, so the stacked product is one matmul-shaped kernel."""
  def leaves(x: UOp) -> list[UOp]: return [y for s in x.src for y in leaves(s)] if x.op is Ops.ADD else [x]
  subs: dict[UOp, UOp] = {}
  for u in g.toposort():
    if u.op is not Ops.REDUCE_AXIS or u.arg[0] is not Ops.ADD: continue
    # NOTE: the sum of several stacks (over STACK_MAX_PRODUCTS products) too, each stack's reduce joined with u's
    if not (terms := leaves(u.src[0])) or not all(t.op is Ops.RESHAPE and t.src[0] in stacks for t in terms): continue
    subs[u] = _sum([t.src[0].src[0].r(Ops.ADD, (0, *(a + 1 for a in u.arg[1]))).reshape(u.shape) for t in terms])
  return substitute(g, subs) if subs else g

def compute_gradient(root: UOp, root_grad: UOp, targets: set[UOp]) -> dict[UOp, UOp]:
  """Gradients of `root` (seeded with `root_grad`, same shape) with respect to each target it depends on, as tensor
  graphs. Targets `root` does not depend on are absent from the result."""
  topo = list(_edges_toposort(root))
  # only nodes on a path to a target carry gradient
  on_path: dict[UOp, bool] = {}
  for u in topo: on_path[u] = u in targets or (u.op is not Ops.DETACH and any(on_path.get(s, False) for s in _edges(u)))
  # every node's contributions, summed when the walk reaches it (_sum_contributions)
  parts: dict[UOp, list[UOp]] = {root: [root_grad]}
  grads: dict[UOp, UOp] = {}
  stacks: set[UOp] = set()  # the reduces over stacked products made on this walk (_merge_stacked_reduces joins them)
  for u in reversed(topo):
    if (ps := parts.pop(u, None)) is None: continue
    grads[u] = g = _sum_contributions(ps, stacks)
    if not on_path[u] or u.op in _LEAVES: continue
    if (custom := _custom_rules.get(u)) is not None: src_grads: Any = custom[1](g, u, custom[0])
    else: src_grads = pm_gradient.rewrite(u, ctx=g)
    if src_grads is None:
      raise NotImplementedError(f"compute_gradient: no gradient rule for {u.op} (dtype {u.dtype}, shape {u.shape})")
    for s, sg in zip(_edges(u), src_grads):
      if sg is None or not on_path.get(s, False): continue
      if sg.shape != s.shape:
        raise RuntimeError(f"compute_gradient: the rule for {u.op} gave a gradient of shape {sg.shape} to a "
                                                 f"source of shape {s.shape}")
      parts.setdefault(s, []).append(sg)
  # NOTE: the whole graph is walked again only where this walk stacked something
  return {t: _merge_stacked_reduces(grads[t], stacks) if stacks else grads[t] for t in targets if t in grads}

__all__ = ["compute_gradient", "pm_gradient", "custom_gradient", "substitute"]
