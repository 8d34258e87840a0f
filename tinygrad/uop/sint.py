"""Symbolic sizes (sint): a size is an int or an index-typed UOp over variables (docs/symbolic.md).

In a Tensor's shape a symbolic size is built from bound variables, `Variable("i", 1, 10).bind(3)` (a BIND: the
variable and its value), with index arithmetic (`i + 1`, `i * 4`). Every UOp knows its bounds (vmin/vmax), so a size
is checked for every value the variable may take: a kernel is compiled once for the variable and reused for every
binding. The scheduler unbinds the graph (`unbind_graph`: each BIND becomes its DEFINE_VAR, the value goes into
var_vals), so the kernels do not depend on the values.

Sizes are kept simplified (`ssimplify`): a symbolic size that folds to a constant is that int, and equal sizes are the
same node, so shapes compare with `sym_eq` (and mostly with `is`).
"""
from __future__ import annotations
import sys
from typing import Any, Callable, Iterable, Union
from tinygrad.uop import Ops, GroupOp
from tinygrad.uop import ops
from tinygrad.uop.ops import UOp
from tinygrad.uop.symbolic import simplify
from tinygrad.uop.semantics import fold_alu
from tinygrad.dtype import dtypes

sint = Union[int, UOp]

def is_sym(x: Any) -> bool: return isinstance(x, UOp)
def all_concrete(shape: Iterable[Any]) -> bool: return all(not isinstance(s, UOp) for s in shape)

def as_uop(x: sint) -> UOp: return x if isinstance(x, UOp) else UOp.const(dtypes.index, x)

def ssimplify(x: sint) -> sint:
  """x simplified by the symbolic rules; a constant comes back as an int."""
  if not isinstance(x, UOp): return x
  if x.dtype is not dtypes.index: raise TypeError(f"a symbolic size must be a dtypes.index UOp, got {x.dtype}: {x!r}")
  s = simplify(x)
  return int(s.arg) if s.op is Ops.CONST else s

def sym_prod(xs: Iterable[sint]) -> sint:
  ret: sint = 1
  for x in xs: ret = ret * x
  return ssimplify(ret)

def smax(*xs: sint) -> sint:
  ret = xs[0]
  for x in xs[1:]: ret = max(ret, x) if not isinstance(ret, UOp) and not isinstance(x, UOp) else as_uop(ret).maximum(x)
  return ssimplify(ret)

def vmin(x: sint) -> int: return int(x.vmin) if isinstance(x, UOp) else x
def vmax(x: sint) -> int: return int(x.vmax) if isinstance(x, UOp) else x

def sym_le(a: sint, b: sint) -> bool:
  """a <= b proved for every value of the variables."""
  if not isinstance(a, UOp) and not isinstance(b, UOp): return a <= b
  return vmin(ssimplify(as_uop(b) - a)) >= 0

def sym_eq(a: sint, b: sint) -> bool:
  """a == b proved for every value of the variables."""
  if not isinstance(a, UOp) and not isinstance(b, UOp): return a == b
  if a is b: return True
  d = ssimplify(as_uop(a) - b)
  return not isinstance(d, UOp) and d == 0

def shape_eq(a: tuple[sint, ...], b: tuple[sint, ...]) -> bool:
  return len(a) == len(b) and all(sym_eq(x, y) for x, y in zip(a, b))

def shrink_fits(arg: tuple[tuple[sint, sint], ...], shape: tuple[sint, ...]) -> bool:
  """0 <= begin <= end <= size on every axis, for every value of the variables."""
  return all(vmin(b) >= 0 and sym_le(b, e) and sym_le(e, s) for (b, e), s in zip(arg, shape))

def check_reshape(old: tuple[sint, ...], new: tuple[sint, ...]) -> None:
  """A reshape keeps the number of elements: for every value of the variables, or, between a concrete and a symbolic
  shape (how a tensor of the bound size enters and leaves the symbolic world), at the variables' bindings."""
  a, b = sym_prod(old), sym_prod(new)
  if sym_eq(a, b): return
  if all_concrete(old) or all_concrete(new):
    if (va := bound_value(a)) is not None and va == bound_value(b): return
    why = "not at the variables' bindings either"
  else: why = "a reshape between symbolic shapes must keep the size for every value of the variables"
  raise ValueError(f"reshape: cannot reshape {render_shape(old)} to {render_shape(new)}: {render_sint(a)} and "
                   f"{render_sint(b)} elements are not provably equal ({why})")

# ---- variables and their bindings ----

def variables(x: Any) -> list[UOp]:
  """The BIND and DEFINE_VAR nodes in a size, a tuple of them, or a movement arg, in order of first appearance."""
  out: dict[UOp, None] = {}
  for u in _uops_in(x):
    # NOTE: the walk stops at a BIND: its DEFINE_VAR is bound there
    for n in u.toposort(gate=lambda n: n.op is not Ops.BIND):
      if n.op is Ops.BIND or (n.op is Ops.DEFINE_VAR and not n.src): out[n] = None
  return list(out)

def binds_of(x: Any) -> dict[UOp, int]:
  """{DEFINE_VAR: value} of the bound variables in x (a size, a shape, a movement arg); a variable bound to two values
  is an error."""
  ret: dict[UOp, int] = {}
  for b in variables(x):
    if b.op is not Ops.BIND: continue
    var, val = b.src[0], int(b.src[1].arg)
    if ret.setdefault(var, val) != val:
      raise ValueError(f"variable {var.arg[0]!r} is bound to both {ret[var]} and {val}")
  return ret

def bound_value(x: sint) -> int | None:
  """The value of x at its variables' bindings; None if it holds an unbound variable."""
  if not isinstance(x, UOp): return x
  vs = variables(x)
  if any(v.op is Ops.DEFINE_VAR for v in vs): return None
  r = simplify(x.substitute({b: b.src[1] for b in vs}))
  return int(r.arg) if r.op is Ops.CONST else None

# NOTE: x's nodes in dependency order as (op, dtype, arg, positions of its sources), or None where a node is not a
# constant, a variable or an ALU op: a launch evaluates its kernel's symbolic sizes and work (GlobalCounters) with these
# steps, not a substitute and a simplify (a graph rewrite per size per launch: ~6 ms of an LLM decode step's 23)
_Step = tuple[Ops, Any, Any, tuple[int, ...]]
_plans: dict[UOp, list[_Step] | None] = {}
def _plan(x: UOp) -> list[_Step] | None:
  if x in _plans: return _plans[x]
  if len(_plans) > 50_000: _plans.clear()
  nodes = x.toposort(gate=lambda n: n.op is not Ops.BIND)
  pos = {n: i for i, n in enumerate(nodes)}
  plan: list[_Step] = []
  for n in nodes:
    if n.op is Ops.CONST: plan.append((n.op, n.dtype, n.arg, ()))
    elif n.op is Ops.BIND or (n.op is Ops.DEFINE_VAR and not n.src):
      plan.append((Ops.DEFINE_VAR, n.dtype, (n.src[0] if n.op is Ops.BIND else n).arg[0], ()))
    elif n.op in GroupOp.ALU and n.dtype.count == 1: plan.append((n.op, n.dtype, None, tuple(pos[c] for c in n.src)))
    else:
      _plans[x] = None
      return None
  _plans[x] = plan
  return plan

def _run_plan(plan: list[_Step], var_vals: dict[str, int]) -> Any:
  """The value of a _plan at var_vals; None where an op has no value on its dtype."""
  vals: list[Any] = []
  for op, dt, arg, srcs in plan:
    if op is Ops.CONST: vals.append(arg)
    elif op is Ops.DEFINE_VAR: vals.append(var_vals[arg])
    elif (v := fold_alu(op, dt, tuple(vals[i] for i in srcs))) is None: return None
    else: vals.append(v)
  return vals[-1]

def infer(x: sint, var_vals: dict[str, int]) -> int:
  """The value of x with its variables (bound or not) set by name from var_vals."""
  if not isinstance(x, UOp): return x
  if (plan := _plan(x)) is not None:
    # NOTE: a missing variable falls through to the path below, whose KeyError names it
    try: r = _run_plan(plan, var_vals)
    except KeyError: r = None
    if r is not None and not isinstance(r, float): return int(r)
  subs: dict[UOp, UOp] = {}
  for v in variables(x):
    name = v.arg[0] if v.op is Ops.DEFINE_VAR else v.src[0].arg[0]
    if name not in var_vals: raise KeyError(f"no value for variable {name!r} of {render_sint(x)}")
    subs[v] = UOp.const(dtypes.index, var_vals[name])
  r = simplify(x.substitute(subs))
  if r.op is not Ops.CONST: raise ValueError(f"{render_sint(x)} did not fold to a number with {var_vals}")
  return int(r.arg)

# ---- substitution inside movement args (symbolic sizes live in args, not in sources) ----

def _uops_in(x: Any) -> Iterable[UOp]:
  if isinstance(x, UOp): yield x
  elif isinstance(x, tuple):
    for y in x: yield from _uops_in(y)

def _map_arg(x: Any, fn: Callable[[UOp], sint]) -> Any:
  if isinstance(x, UOp): return fn(x)
  if isinstance(x, tuple): return tuple(_map_arg(y, fn) for y in x)
  return x

def has_symbolic_arg(u: UOp) -> bool: return u.op in GroupOp.Movement and any(True for _ in _uops_in(u.arg))

Rebuild = Callable[[UOp, tuple[UOp, ...], Any], Union[UOp, None]]

def substitute_sizes(root: UOp, subs: dict[UOp, UOp], extra: Rebuild | None = None) -> UOp:
  """Every node of root rebuilt with `subs` applied inside the symbolic sizes of its movement arg (re-simplified); the
  nodes themselves are not substituted. `extra(node, new sources, new arg)` may build a node's replacement itself."""
  return substitute_sizes_map(root, subs, extra)[root]

def substitute_sizes_map(root: UOp, subs: dict[UOp, UOp], extra: Rebuild | None = None) -> dict[UOp, UOp]:
  """substitute_sizes, returning what every node of root became."""
  new: dict[UOp, UOp] = {}
  def size(x: UOp) -> sint: return ssimplify(x.substitute(subs))
  for u in root.toposort():
    nsrc = tuple(new[s] for s in u.src)
    arg = _map_arg(u.arg, size) if has_symbolic_arg(u) else u.arg
    if extra is not None and (r := extra(u, nsrc, arg)) is not None: nu = r
    elif _same_arg(arg, u.arg) and all(a is b for a, b in zip(nsrc, u.src)): nu = u
    else: nu = UOp(u.op, u.dtype, nsrc, arg, u.tag)
    if nu is not u and (md := u.metadata): nu.set_metadata(md)
    new[u] = nu
  return new

def _same_arg(a: Any, b: Any) -> bool:
  if isinstance(a, tuple) and isinstance(b, tuple):
    return len(a) == len(b) and all(_same_arg(x, y) for x, y in zip(a, b))
  return a is b or (not isinstance(a, UOp) and not isinstance(b, UOp) and type(a) is type(b) and a == b)

def graph_binds(root: UOp) -> dict[UOp, int]:
  """{DEFINE_VAR: value} of every BIND in the graph, in sources and in movement args."""
  ret: dict[UOp, int] = {}
  for u in root.toposort():
    found = [u] if u.op is Ops.BIND else variables(u.arg) if has_symbolic_arg(u) else []
    for b in found:
      if b.op is not Ops.BIND: continue
      var, val = b.src[0], int(b.src[1].arg)
      if ret.setdefault(var, val) != val:
        raise ValueError(f"variable {var.arg[0]!r} is bound to both {ret[var]} and {val} in one graph")
  return ret

def unbind_sint(x: sint) -> sint:
  """x with each bound variable replaced by its DEFINE_VAR (the size for every binding)."""
  if not isinstance(x, UOp): return x
  return ssimplify(x.substitute({b: b.src[0] for b in variables(x) if b.op is Ops.BIND}))

def bind_sint(x: sint, values: dict[str, int]) -> sint:
  """x with each variable (bound or not) bound to its value in `values` (by name); others are left as they are."""
  if not isinstance(x, UOp): return x
  subs: dict[UOp, UOp] = {}
  for v in variables(x):
    var = v if v.op is Ops.DEFINE_VAR else v.src[0]
    if var.arg[0] in values: subs[v] = var.bind(values[var.arg[0]])
  return ssimplify(x.substitute(subs)) if subs else x

# ---- printing ----

_INFIX = {Ops.ADD: "+", Ops.MUL: "*", Ops.IDIV: "//", Ops.MOD: "%"}

def _render(u: UOp) -> str:
  if u.op is Ops.CONST: return str(u.arg)
  if u.op is Ops.DEFINE_VAR: return str(u.arg[0])
  if u.op is Ops.BIND: return f"{u.src[0].arg[0]}"
  if u.op in _INFIX: return f"({_render(u.src[0])}{_INFIX[u.op]}{_render(u.src[1])})"
  if u.op is Ops.MAX: return f"max({_render(u.src[0])}, {_render(u.src[1])})"
  return f"{u.op.name.lower()}({', '.join(_render(s) for s in u.src)})"

def render_sint(x: sint) -> str:
  """`i`, `(i+1)`, with the value at the binding where the size is bound: `(i+1)=4`."""
  if not isinstance(x, UOp): return str(x)
  txt = _render(x)
  if txt.startswith("(") and txt.endswith(")"): txt = txt[1:-1]
  val = bound_value(x)
  return f"{txt}={val}" if val is not None else txt

def render_shape(shape: Iterable[sint]) -> str:
  items = [render_sint(s) for s in shape]
  return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"

__all__ = ["sint", "is_sym", "all_concrete", "as_uop", "ssimplify", "sym_prod", "smax", "vmin", "vmax", "sym_le",
           "sym_eq", "shape_eq", "shrink_fits", "check_reshape", "variables", "binds_of", "bound_value", "infer",
           "has_symbolic_arg", "substitute_sizes", "substitute_sizes_map", "graph_binds", "unbind_sint", "bind_sint",
           "render_sint", "render_shape"]

# the shape checks of tinygrad.uop.ops use these helpers where a size is symbolic
if not ops.sint_helpers: ops.sint_helpers.append(sys.modules[__name__])
