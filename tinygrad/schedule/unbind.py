"""Unbind: a tensor graph's bound variables become its kernels' variables (docs/symbolic.md).

A Tensor holds a symbolic size as an expression of BINDs (a variable and its value) in the args of its movement ops.
The kernels must not depend on the values (one kernel serves every binding; the value is a launch argument), so before
rangeify every BIND in an arg becomes its DEFINE_VAR and the values go into var_vals. A BIND used as a value (a source)
is left to rangeify, which makes it a kernel variable the same way.

Once unbound, a reshape between a concrete and a symbolic shape (equal at the bindings only, which the front end
checked) is made one that holds for every value of the variables, so the kernels are correct for every binding:
  concrete X -> symbolic S   X as a flat tensor of S's maximum size shrunk to S's size: a buffer X is read through a
                             pointer of that maximum size (the caller's buffer has the bound size, and the kernel reads
                             no more than S's size at the binding); anything else is padded to the maximum
  symbolic X -> concrete S   X flattened, padded to its maximum size and shrunk to S's size
"""
from __future__ import annotations
from typing import Any
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp
from tinygrad.uop.sint import sint, all_concrete, sym_prod, sym_eq, vmax, graph_binds, substitute_sizes
from tinygrad.uop.sint import substitute_sizes_map
from tinygrad.uop.sint import render_shape

def _flat_base(u: UOp) -> UOp | None:
  """The BUFFER under a contiguous view (RESHAPEs only) of it, else None."""
  while u.op is Ops.RESHAPE: u = u.src[0]
  return u if u.op is Ops.BUFFER else None

def _provable_reshape(x: UOp, new: tuple[sint, ...], aliases: dict[UOp, UOp]) -> UOp | None:
  """A RESHAPE of x to `new` whose sizes are equal at the bindings only, as views whose sizes are equal for every
  binding (None: the RESHAPE holds as it is)."""
  old = x.shape
  if old is None or sym_eq(sym_prod(old), sym_prod(new)): return None
  n_old, n_new = sym_prod(old), sym_prod(new)
  if all_concrete(old):
    assert isinstance(n_old, int)
    top = max(vmax(n_new), n_old)
    if (buf := _flat_base(x)) is not None:
      # NOTE: the same buffer (its UNIQUE) read through a pointer of the maximum size; the schedule maps it back
      wide = UOp(Ops.BUFFER, buf.dtype, buf.src, top)
      aliases[wide] = buf
      return wide.shrink(((0, n_new),)).reshape(new)
    return x.reshape((n_old,)).pad(((0, top - n_old),)).shrink(((0, n_new),)).reshape(new)
  if all_concrete(new):
    assert isinstance(n_new, int)
    top = max(vmax(n_old), n_new)
    return x.reshape((n_old,)).pad(((0, top - n_old),)).shrink(((0, n_new),)).reshape(new)
  raise ValueError(f"schedule: reshape of {render_shape(old)} to {render_shape(new)}: the sizes of two symbolic shapes "
                   "must be provably equal")

def unbind_graph(sink: UOp) -> tuple[UOp, dict[UOp, UOp], dict[UOp, int], dict[UOp, UOp]]:
  """(the unbound sink, every node -> what it became, {DEFINE_VAR: value} of the sizes' variables, {BUFFER read through
  a wider pointer -> the buffer it is})."""
  binds = graph_binds(sink)
  if not binds: return sink, {}, {}, {}
  aliases: dict[UOp, UOp] = {}
  def fix(u: UOp, src: tuple[UOp, ...], arg: Any) -> UOp | None:
    if u.op is Ops.ASSIGN and any(a in aliases for a in src[0].toposort()):
      raise ValueError(f"schedule: an assign into {render_shape(u.shape or ())}, a symbolic view of a buffer of the "
                       "bound size; assign into a shrink of a buffer of the maximum size instead (docs/symbolic.md)")
    return _provable_reshape(src[0], arg, aliases) if u.op is Ops.RESHAPE else None
  new = substitute_sizes_map(sink, {var.bind(val): var for var, val in binds.items()}, fix)
  return new[sink], new, binds, aliases

def bind_view(view: UOp, binds: dict[UOp, int]) -> UOp:
  """A view the scheduler made (over unbound sizes) with its variables bound again, for the Tensor front end."""
  if not binds: return view
  return substitute_sizes(view, {var: var.bind(val) for var, val in binds.items()})

__all__ = ["unbind_graph", "bind_view"]
