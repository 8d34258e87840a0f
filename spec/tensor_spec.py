"""tensor_spec: the lazy tensor graph, before and after rangeify (docs/ir.md section 1)."""
from __future__ import annotations
from tinygrad.uop import Ops, GroupOp
from tinygrad.uop.ops import UOp, UPat
from tinygrad.dtype import dtypes
from tinygrad.uop.sint import sym_eq, shrink_fits, check_reshape
from spec.shared_spec import Rule, Spec, shared_rules, fail, const_ok, var_ok, is_value, is_invalid, has_index

def shape_of(u: UOp) -> tuple[int | UOp, ...]:
  if (sh := u.shape) is None: fail(f"source {u.op} has no tensor shape")
  return tuple(sh)

def ints(t: object, n: int | None = None) -> bool:
  return isinstance(t, tuple) and all(type(i) is int and i >= 0 for i in t) and (n is None or len(t) == n)

def size_ok(i: object) -> bool:
  """An int >= 0, or a symbolic size: an index UOp >= 0 for every value of its variables (tinygrad/uop/sint.py)."""
  if isinstance(i, UOp): return i.dtype is dtypes.index and i.vmin >= 0
  return type(i) is int and i >= 0

def sizes(t: object, n: int | None = None) -> bool:
  return isinstance(t, tuple) and all(size_ok(i) for i in t) and (n is None or len(t) == n)

def pairs(t: object, n: int) -> bool:
  return isinstance(t, tuple) and len(t) == n and all(isinstance(p, tuple) and sizes(p, 2) for p in t)

def reshape_ok(old: tuple[int | UOp, ...], new: tuple[int | UOp, ...]) -> bool:
  try: check_reshape(old, new)
  except ValueError: return False
  return True

def elementwise_ok(x: UOp) -> bool | None:
  """Elementwise values are not index math, and their sources have one shape (the Tensor layer broadcasts explicitly);
  None lets the shared dtype rules decide the rest."""
  if has_index(x.dtype): return fail(f"{x.op} of {x.dtype}: index math is only for shape arguments in a tensor graph")
  shapes = [s.shape for s in x.src]
  return None if all(s == shapes[0] for s in shapes) else fail(f"elementwise {x.op} of sources with shapes {shapes}")

def movement_ok(x: UOp, s: UOp) -> bool:
  if x.dtype != s.dtype: return fail(f"{x.op} changes the dtype from {s.dtype} to {x.dtype}")
  sh, a = shape_of(s), x.arg
  n = len(sh)
  # NOTE: a symbolic size must fit for every value of its variables, except a reshape between a concrete and a
  # symbolic shape, whose sizes are equal at the variables' bindings (tinygrad/uop/sint.py check_reshape)
  if x.op is Ops.RESHAPE: ok, want = sizes(a) and reshape_ok(sh, a), "a shape of as many elements"
  elif x.op is Ops.PERMUTE: ok, want = ints(a, n) and sorted(a) == list(range(n)), f"a permutation of {n} axes"
  elif x.op is Ops.EXPAND:
    ok, want = sizes(a, n) and all(_one(o) or sym_eq(o, e) for o, e in zip(sh, a)), "size-1 axes expanded"
  elif x.op is Ops.PAD: ok, want = pairs(a, n), f"{n} (before, after) pairs of sizes >= 0"
  elif x.op is Ops.SHRINK: ok, want = pairs(a, n) and shrink_fits(a, sh), f"{n} ranges inside the axes"
  else: ok, want = isinstance(a, tuple) and len(a) == n and all(type(f) is bool for f in a), f"{n} bools"
  return bool(ok) or fail(f"{x.op} of shape {sh} with arg {a!r}: the arg must be {want}")

def _one(x: int | UOp) -> bool: return not isinstance(x, UOp) and x == 1

def reduce_axis_ok(x: UOp, s: UOp) -> bool:
  if not (isinstance(x.arg, tuple) and len(x.arg) == 2 and x.arg[0] in (Ops.ADD, Ops.MUL, Ops.MAX)):
    return fail(f"REDUCE_AXIS arg {x.arg!r} must be (Ops.ADD|Ops.MUL|Ops.MAX, axes)")
  # NOTE: the axes are sorted and unique, so equal reductions are one node
  axes, n = x.arg[1], len(shape_of(s))
  if not (ints(axes) and list(axes) == sorted(set(axes)) and all(a < n for a in axes)):
    return fail(f"REDUCE_AXIS axes {axes!r} must be sorted, unique and < {n}")
  return x.dtype == s.dtype or fail(f"REDUCE_AXIS changes the dtype from {s.dtype} to {x.dtype}")

def buffer_ok(x: UOp) -> bool:
  if is_value(x.dtype) and x.dtype.count == 1 and type(x.arg) is int and x.arg >= 0: return True
  return fail(f"BUFFER of {x.dtype} with arg {x.arg!r}: needs a scalar value dtype and arg = size >= 0")

def buffer_view_ok(x: UOp, b: UOp) -> bool:
  if not (ints(x.arg, 2) and is_value(x.dtype)): return fail(f"BUFFER_VIEW arg {x.arg!r} must be (size, offset)")
  size, off = x.arg
  if (off + size) * x.dtype.itemsize <= b.arg * b.dtype.itemsize: return True
  return fail(f"BUFFER_VIEW {x.arg} overruns its buffer of {b.arg}")

def bind_ok(x: UOp, v: UOp, c: UOp) -> bool:
  if x.dtype == v.dtype == c.dtype and v.arg[1] <= c.arg <= v.arg[2]: return True
  return fail(f"BIND of {c.arg!r} ({c.dtype}) to {v.arg} ({v.dtype})")

def assign_ok(x: UOp, t: UOp, v: UOp) -> bool:
  if x.dtype == t.dtype == v.dtype and t.shape == v.shape: return True
  return fail(f"ASSIGN of {v.dtype}{v.shape} to {t.dtype}{t.shape}")

def kernel_ok(x: UOp) -> bool:
  """KERNEL(*buffers, arg=ast): one buffer per DEFINE_GLOBAL of the AST, numbered 0.. in src order."""
  if not (isinstance(x.arg, UOp) and x.arg.op is Ops.SINK): return fail("KERNEL arg must be the kernel AST (a SINK)")
  if x.dtype is not dtypes.void or any(s.op not in (Ops.BUFFER, Ops.BUFFER_VIEW, Ops.AFTER) for s in x.src):
    return fail(f"KERNEL is void over BUFFER/BUFFER_VIEW/AFTER sources, got {[s.op for s in x.src]}")
  globs = sorted({u.arg for u in x.arg.toposort() if u.op is Ops.DEFINE_GLOBAL})
  return globs == list(range(len(x.src))) or fail(f"KERNEL has {len(x.src)} buffers, its AST defines globals {globs}")

def after_ok(x: UOp, b: UOp) -> bool:
  if x.dtype == b.dtype and len(x.src) >= 2 and all(k.op is Ops.KERNEL for k in x.src[1:]): return True
  return fail("AFTER(buffer, *kernels) has the buffer's dtype")

def untyped_const(x: UOp) -> bool | None:
  # Invalid exists only in kernels; an index constant without a device is a shape argument or a BIND value
  if is_invalid(x): return fail("Invalid in a tensor graph")
  return None if x.dtype is dtypes.index else fail(f"tensor constant of {x.dtype} has no DEVICE source")

# checked before the shared dtype rules
tensor_reject: list[Rule] = [
  (UPat(Ops.CONST, src=(), name="x"), untyped_const),
  (UPat(GroupOp.Elementwise, name="x"), elementwise_ok),
]

tensor_rules: list[Rule] = [
  (UPat(Ops.DEVICE, dtypes.void, src=(), name="x"), lambda x: isinstance(x.arg, str) or fail("DEVICE arg is a str")),
  # UNIQUE(n): a buffer's identity in the process; LUNIQUE(i): its name in one scheduled graph (numbered 0.. there)
  (UPat((Ops.UNIQUE, Ops.LUNIQUE), dtypes.void, src=(), name="x"),
   lambda x: type(x.arg) is int or fail(f"{x.op} arg is an int")),
  (UPat(Ops.BUFFER, src=(UPat((Ops.UNIQUE, Ops.LUNIQUE)), UPat(Ops.DEVICE)), name="x"), buffer_ok),
  (UPat(Ops.BUFFER_VIEW, src=(UPat(Ops.BUFFER, name="b"),), name="x"), buffer_view_ok),
  (UPat(Ops.CONST, src=(UPat(Ops.DEVICE),), name="x"), lambda x: x.dtype.count == 1 and const_ok(x.dtype, x.arg)),
  (UPat(Ops.DEFINE_VAR, dtypes.index, src=(), name="x"), var_ok),
  # BIND(var, value): the value is a constant within the variable's bounds
  (UPat(Ops.BIND, src=(UPat(Ops.DEFINE_VAR, name="v"), UPat(Ops.CONST, name="c")), name="x"), bind_ok),
  (UPat(GroupOp.Movement, src=(UPat(name="s"),), name="x"), movement_ok),
  (UPat(Ops.REDUCE_AXIS, src=(UPat(name="s"),), name="x"), reduce_axis_ok),
  (UPat((Ops.CONTIGUOUS, Ops.DETACH), src=(UPat(name="s"),), name="x"), lambda x, s: x.dtype == s.dtype != dtypes.void),
  (UPat(Ops.COPY, src=(UPat(name="s"), UPat(Ops.DEVICE)), name="x"), lambda x, s: x.dtype == s.dtype != dtypes.void),
  (UPat(Ops.ASSIGN, src=(UPat(name="t"), UPat(name="v")), name="x"), assign_ok),
  (UPat(Ops.KERNEL, name="x"), kernel_ok),
  # AFTER(buffer, *kernels): the buffer once the kernels that write it ran
  (UPat(Ops.AFTER, src=(UPat((Ops.BUFFER, Ops.BUFFER_VIEW, Ops.AFTER), name="b"),), allow_any_len=True, name="x"),
   after_ok),
]

tensor_spec = Spec("tensor", tensor_reject + tensor_rules + shared_rules)
