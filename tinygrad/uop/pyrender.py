"""pyrender: print any UOp graph as Python that rebuilds it.

The text is a sequence of lines `cN = <expr>` (one per shared node, sources first) ending in `ast = <expr>`. Because
UOps are hash-consed, evaluating the text gives back the very same object (`is`), not merely an equal one.
`spec/roundtrip.py` reads it back without exec (`eval_pyrender`); the grammar below is the contract between the two.

Grammar of the text:
  - `def kN():` blocks (top level, no arguments) whose body is `cN = <expr>` lines and `return ast`: the AST of a KERNEL
    (any UOp found inside an arg) is printed once as its own function and referenced as `kN()`. A function is its own
    scope: its names are numbered from c0 and it sees no outer names, only the functions defined before it.
  - `cN = <expr>` and a final `ast = <expr>`; for a linear program (`pyrender_list`) the last line is
    `ast = [cA, cB, ...]` and every element of the list is named.
  - <expr> is one of
      `UOp(Ops.X, dtype, (srcs,), arg, tag=...)` (the generic form; trailing defaults dropped, then keywords)
      `UOp.const(dt, v)`, `UOp.invalid()`, `UOp.variable(name, lo, hi[, dtype=])`, `UOp.range(end, *arg[, dtype=])`,
      `UOp.special(end, name[, dtype=])`, `UOp.sink(*srcs[, arg=])`, `UOp.group(*srcs)`, `UOp.vectorize(*srcs)`
      `x.index(*idx)`, `x.load(*srcs[, dtype=])`, `x.store(v, *srcs)`, `x.end(*ranges)`, `x.after(*deps)`,
      `x.reduce(*ranges, arg=)`, `x.cast(dt)`, `x.bitcast(dt)`, `x.gep(i)`, `x.where(a, b)`, `x.maximum(y)`, `x.ne(y)`,
      `x.eq(y)`, `x.threefry(y)`, `x.exp2()`, `x.log2()`, `x.sin()`, `x.sqrt()`, `x.reciprocal()`, `x.trunc()`
      `x + y`, `x * y`, `x // y`, `x % y`, `x & y`, `x | y`, `x ^ y`, `x << y`, `x >> y`, `x < y` (both sides UOps)
    Sugar is used only when it rebuilds exactly the node (same dtype, arg and no tag); everything else is generic.
  - literals: None, bools, ints, strings, floats (`float('nan')`, `-float('nan')`, `float('inf')`, `float('-inf')`,
    `-0.0`, and any other NaN as `dtypes.float_from_bits(0x...)`, its 64 bits), tuples, `Invalid`, dtypes
    (`dtypes.float32.vec(4)`, `dtypes.float32.ptr(16, AddrSpace.LOCAL)`), enum members (`Ops.ADD`, `AxisType.REDUCE`,
    `AddrSpace.LOCAL`, ...), frozen dataclasses as `Name(field=value, ...)`.
Limits: eval_pyrender refuses ints beyond 2**128 in magnitude, strings over 10k characters and expressions nested over
64 deep.
"""
from __future__ import annotations
import dataclasses, enum, math, struct
from typing import Any, Callable
from tinygrad.uop import Ops, AxisType
from tinygrad.uop.ops import UOp, argkey
from tinygrad.dtype import DType, PtrDType, dtypes, AddrSpace, InvalidType, DTYPES_DICT, INVERSE_DTYPES_DICT

__all__ = ["pyrender", "pyrender_list", "pyrender_node", "render_arg", "render_dtype"]

# an inlined (single-use) node nests at most this many sugar levels: lines stay readable and parsing never recurses deep
INLINE_MAX_DEPTH = 2
INLINE_MAX_LEN = 100

# ---- literals: floats, dtypes, args ----

_NAN_BITS, _NEG_NAN_BITS = struct.pack("<d", float("nan")), struct.pack("<d", -float("nan"))

def render_float(x: float) -> str:
  """A float literal that reads back to the same bits (repr round-trips every finite double, -0.0 included)."""
  if math.isnan(x):
    bits = struct.pack("<d", x)
    if bits == _NAN_BITS: return "float('nan')"
    if bits == _NEG_NAN_BITS: return "-float('nan')"
    # NOTE: any other NaN (a payload, a signalling NaN, made by a BITCAST) prints its 64 bits; the const of a narrower
    # float holds a Python float too, so this is exact for every float dtype
    return f"dtypes.float_from_bits(0x{struct.unpack('<Q', bits)[0]:016x})"
  if math.isinf(x): return "float('inf')" if x > 0 else "float('-inf')"
  return repr(x)

_dtype_text: dict[DType, str] = {}

def _scalar_name(d: DType) -> str | None:
  if (n := INVERSE_DTYPES_DICT.get(d.name)) is not None and DTYPES_DICT.get(n) is d: return n
  return next((k for k, v in DTYPES_DICT.items() if v is d), None)

def render_dtype(d: DType) -> str:
  """`dtypes.float32`, `dtypes.float32.vec(4)`, `dtypes.float32.ptr(16, AddrSpace.LOCAL)`; checked to rebuild `d`."""
  if (ret := _dtype_text.get(d)) is not None: return ret
  if isinstance(d, PtrDType):
    pargs = [] if d.size == -1 and d.addrspace is AddrSpace.GLOBAL else [str(d.size)]
    if d.addrspace is not AddrSpace.GLOBAL: pargs.append(f"AddrSpace.{d.addrspace.name}")
    text = f"{render_dtype(d.base)}.ptr({', '.join(pargs)})" + (f".vec({d.v})" if d.v != 1 else "")
    rebuilt: DType = d.base.ptr(d.size, d.addrspace).vec(d.v)
  elif d.count > 1:
    text, rebuilt = f"{render_dtype(d.scalar())}.vec({d.count})", d.scalar().vec(d.count)
  else:
    if (name := _scalar_name(d)) is None: raise ValueError(f"pyrender: dtype {d!r} is not in dtypes: no printed form")
    text, rebuilt = f"dtypes.{name}", d
  if rebuilt is not d: raise ValueError(f"pyrender: dtype {d!r} cannot be rebuilt from {text}")
  _dtype_text[d] = text
  return text

def render_arg(x: Any, uop_ref: Callable[[UOp], str] | None = None) -> str:
  """A literal for an arg or tag. UOps inside (a KERNEL's AST) are printed by `uop_ref`."""
  t = type(x)
  if x is None or t is bool or t is int or t is str: return repr(x)
  if t is float: return render_float(x)
  if t is tuple: return "(" + ", ".join(render_arg(v, uop_ref) for v in x) + ("," if len(x) == 1 else "") + ")"
  if isinstance(x, DType): return render_dtype(x)
  if isinstance(x, InvalidType): return "Invalid"
  if isinstance(x, enum.Enum): return f"{t.__name__}.{x.name}"
  if isinstance(x, UOp):
    if uop_ref is None: raise ValueError(f"pyrender: a UOp inside an arg needs a kernel function here: {x!r}")
    return uop_ref(x)
  if dataclasses.is_dataclass(x) and not isinstance(x, type):
    kws = []
    for f in dataclasses.fields(x):
      if not f.init: continue
      v = getattr(x, f.name)
      default = f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
      if default is not dataclasses.MISSING and argkey(v) == argkey(default): continue
      kws.append(f"{f.name}={render_arg(v, uop_ref)}")
    return f"{t.__name__}({', '.join(kws)})"
  raise ValueError(f"pyrender: cannot print an arg of type {t.__name__}: {x!r}")

# ---- how one node prints ----

class Form:
  """How a node prints: the sources it references (in order) and a function of their texts (plain, and wrapped in parens
  where an operand must be atomic). `atom` is False for `a + b`."""
  __slots__ = ("refs", "fn", "atom", "inline")
  def __init__(self, refs: tuple[UOp, ...], fn: Callable[[list[str], list[str]], str], atom: bool = True,
               inline: bool = True):
    self.refs, self.fn, self.atom, self.inline = refs, fn, atom, inline

def _as_const_exact(arg: Any, dtype: DType) -> bool:
  try: return bool(argkey(dtypes.as_const(arg, dtype)) == argkey(arg))
  except (KeyError, TypeError, ValueError, OverflowError): return False

def _const_exact(u: UOp) -> bool:
  """True if `UOp.const(u.dtype, u.arg)` rebuilds u."""
  if u.op is not Ops.CONST or u.src or u.tag is not None or type(u.arg) not in (int, float, bool): return False
  return _as_const_exact(u.arg, u.dtype)

def _alu_dtype(op: Ops, src: tuple[UOp, ...]) -> DType:
  # the dtype UOp.alu gives: the last source's, bool (vector) for comparisons
  dt = src[-1].dtype
  if op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ): return dtypes.bool.vec(dt.count) if dt.count > 1 else dtypes.bool
  return dt

def _dtkw(u: UOp, default: DType) -> str: return "" if u.dtype is default else f", dtype={render_dtype(u.dtype)}"
def _join(p: list[str]) -> str: return ", ".join(p)

# ---- sugar rules: each returns a Form only when the sugar rebuilds exactly this node (tagged nodes go generic) ----

Aref = Callable[[UOp], str]

def _s_const(u: UOp, aref: Aref) -> Form | None:
  if u.src: return None
  if isinstance(u.arg, InvalidType):
    if u.dtype is dtypes.index: return Form((), lambda p, a: "UOp.invalid()")
    return Form((), lambda p, a: f"UOp.const({render_dtype(u.dtype)}, Invalid)")
  return Form((), lambda p, a: f"UOp.const({render_dtype(u.dtype)}, {render_arg(u.arg)})") if _const_exact(u) else None

def _s_vconst(u: UOp, aref: Aref) -> Form | None:
  if u.src or type(u.arg) is not tuple or not len(u.arg) == u.dtype.count > 1: return None
  if not _as_const_exact(u.arg, u.dtype): return None
  return Form((), lambda p, a: f"UOp.const({render_dtype(u.dtype)}, {render_arg(u.arg)})")

def _s_variable(u: UOp, aref: Aref) -> Form | None:
  if u.src or type(u.arg) is not tuple or len(u.arg) != 3 or type(u.arg[0]) is not str: return None
  name, lo, hi = u.arg
  if not (type(lo) in (int, float) and type(hi) in (int, float) and lo <= hi): return None
  return Form((), lambda p, a: f"UOp.variable({name!r}, {render_arg(lo)}, {render_arg(hi)}{_dtkw(u, dtypes.index)})")

def _s_range_special(u: UOp, aref: Aref) -> Form | None:
  if len(u.src) != 1: return None
  if u.op is Ops.RANGE and not (type(u.arg) is tuple and u.arg and isinstance(u.arg[-1], AxisType)): return None
  if u.op is Ops.SPECIAL and type(u.arg) is not str: return None
  rest = ", ".join(render_arg(x, aref) for x in (u.arg if u.op is Ops.RANGE else (u.arg,))) + _dtkw(u, dtypes.index)
  meth, end = "range" if u.op is Ops.RANGE else "special", u.src[0]
  # NOTE: a constant end folds into the call (UOp.range(16, ...) builds the same CONST), so it is not referenced
  if _const_exact(end) and end.dtype is u.dtype:
    return Form((), lambda p, a: f"UOp.{meth}({render_arg(end.arg)}, {rest})")
  return Form(u.src, lambda p, a: f"UOp.{meth}({p[0]}, {rest})")

def _s_sink(u: UOp, aref: Aref) -> Form | None:
  if u.dtype is not dtypes.void: return None
  akw = "" if u.arg is None else (", " if u.src else "") + f"arg={render_arg(u.arg, aref)}"
  return Form(u.src, lambda p, a: f"UOp.sink({_join(p)}{akw})")

def _s_group(u: UOp, aref: Aref) -> Form | None:
  return Form(u.src, lambda p, a: f"UOp.group({_join(p)})") if u.dtype is dtypes.void and u.arg is None else None

def _s_vectorize(u: UOp, aref: Aref) -> Form | None:
  if len(u.src) < 2 or u.arg is not None: return None
  try: want = u.src[0].dtype.vec(len(u.src))
  except (ValueError, TypeError): return None
  return Form(u.src, lambda p, a: f"UOp.vectorize({_join(p)})") if want is u.dtype else None

Rule = Callable[[UOp, Aref], "Form | None"]

def _method(name: str, nsrc: int, dtype: Callable[[UOp], DType | None], variadic: bool = False) -> Rule:
  # x.name(*rest) builds UOp(op, dtype(u), (x, *rest)) with arg None; exactly nsrc sources (at least, if variadic)
  def rule(u: UOp, aref: Aref) -> Form | None:
    if (len(u.src) < nsrc if variadic else len(u.src) != nsrc) or u.arg is not None: return None
    if u.dtype is not dtype(u): return None
    return Form(u.src, lambda p, a: f"{a[0]}.{name}({_join(p[1:])})")
  return rule

def _s_load(u: UOp, aref: Aref) -> Form | None:
  if not u.src or u.arg is not None: return None
  default = u.src[0].dtype.base if isinstance(u.src[0].dtype, PtrDType) else u.src[0].dtype
  dkw = [] if u.dtype is default else [f"dtype={render_dtype(u.dtype)}"]
  return Form(u.src, lambda p, a: f"{a[0]}.load({_join(p[1:] + dkw)})")

def _s_reduce(u: UOp, aref: Aref) -> Form | None:
  if not u.src or u.dtype is not u.src[0].dtype: return None
  return Form(u.src, lambda p, a: f"{a[0]}.reduce({''.join(x + ', ' for x in p[1:])}arg={render_arg(u.arg, aref)})")

def _s_cast(u: UOp, aref: Aref) -> Form | None:
  if len(u.src) != 1 or u.arg is not None or u.dtype is u.src[0].dtype: return None
  meth = "cast" if u.op is Ops.CAST else "bitcast"
  return Form(u.src, lambda p, a: f"{a[0]}.{meth}({render_dtype(u.dtype)})")

def _s_gep(u: UOp, aref: Aref) -> Form | None:
  if len(u.src) != 1 or type(u.arg) is not tuple or not u.arg or not all(type(i) is int for i in u.arg): return None
  sdt = u.src[0].dtype.scalar()
  try: want = sdt.vec(len(u.arg)) if len(u.arg) > 1 else sdt
  except (ValueError, TypeError): return None
  # gep of every lane in order returns the source itself, so it cannot rebuild such a node
  if want is not u.dtype or (u.src[0].dtype.vcount == len(u.arg) and u.arg == tuple(range(len(u.arg)))): return None
  i = str(u.arg[0]) if len(u.arg) == 1 else render_arg(u.arg)
  return Form(u.src, lambda p, a: f"{a[0]}.gep({i})")

def _binop(sym: str) -> Rule:
  def rule(u: UOp, aref: Aref) -> Form | None:
    if len(u.src) != 2 or u.arg is not None or u.dtype is not _alu_dtype(u.op, u.src): return None
    return Form(u.src, lambda p, a: f"{a[0]} {sym} {a[1]}", atom=False)
  return rule

def _s_where(u: UOp, aref: Aref) -> Form | None:
  if len(u.src) != 3 or u.arg is not None or u.dtype is not u.src[2].dtype: return None
  return Form(u.src, lambda p, a: f"{a[0]}.where({p[1]}, {p[2]})")

_same_dtype: Callable[[UOp], DType | None] = lambda u: u.src[0].dtype if u.src else None
_void: Callable[[UOp], DType | None] = lambda u: dtypes.void
_alu: Callable[[UOp], DType | None] = lambda u: _alu_dtype(u.op, u.src) if u.src else None

# one rule per op; an op without a rule, or whose rule declines, prints in the generic UOp(...) form
SUGAR: dict[Ops, Rule] = {
  Ops.CONST: _s_const,
  Ops.VCONST: _s_vconst,
  Ops.DEFINE_VAR: _s_variable,
  Ops.RANGE: _s_range_special,
  Ops.SPECIAL: _s_range_special,
  Ops.SINK: _s_sink,
  Ops.GROUP: _s_group,
  Ops.VECTORIZE: _s_vectorize,
  Ops.INDEX: _method("index", 1, _same_dtype, variadic=True),
  Ops.AFTER: _method("after", 1, _same_dtype, variadic=True),
  Ops.STORE: _method("store", 2, _void, variadic=True),
  Ops.END: _method("end", 2, _void, variadic=True),
  Ops.LOAD: _s_load,
  Ops.REDUCE: _s_reduce,
  Ops.CAST: _s_cast,
  Ops.BITCAST: _s_cast,
  Ops.GEP: _s_gep,
  Ops.WHERE: _s_where,
  Ops.ADD: _binop("+"),
  Ops.MUL: _binop("*"),
  Ops.IDIV: _binop("//"),
  Ops.MOD: _binop("%"),
  Ops.AND: _binop("&"),
  Ops.OR: _binop("|"),
  Ops.XOR: _binop("^"),
  Ops.SHL: _binop("<<"),
  Ops.SHR: _binop(">>"),
  Ops.CMPLT: _binop("<"),
  Ops.MAX: _method("maximum", 2, _alu),
  Ops.CMPNE: _method("ne", 2, _alu),
  Ops.CMPEQ: _method("eq", 2, _alu),
  Ops.THREEFRY: _method("threefry", 2, _alu),
  Ops.EXP2: _method("exp2", 1, _same_dtype),
  Ops.LOG2: _method("log2", 1, _same_dtype),
  Ops.SIN: _method("sin", 1, _same_dtype),
  Ops.SQRT: _method("sqrt", 1, _same_dtype),
  Ops.RECIPROCAL: _method("reciprocal", 1, _same_dtype),
  Ops.TRUNC: _method("trunc", 1, _same_dtype),
}

def _generic(u: UOp, aref: Callable[[UOp], str]) -> Form:
  def fn(p: list[str], a: list[str]) -> str:
    fields = [("dtype", render_dtype(u.dtype), u.dtype is dtypes.void),
              ("src", "(" + ", ".join(p) + ("," if len(p) == 1 else "") + ")", not u.src),
              ("arg", render_arg(u.arg, aref), u.arg is None)]
    parts, gap = [f"Ops.{u.op.name}"], False
    for i, (k, text, is_default) in enumerate(fields):
      if is_default and all(d for _, _, d in fields[i:]): break
      if is_default and not gap: gap = True
      if is_default: continue
      parts.append(f"{k}={text}" if gap else text)
    if u.tag is not None: parts.append(f"tag={render_arg(u.tag, aref)}")
    return f"UOp({', '.join(parts)})"
  # NOTE: a generic node with sources is always a line of its own (never inlined): it is long, and often a KERNEL
  return Form(u.src, fn, inline=not u.src)

def node_form(u: UOp, aref: Callable[[UOp], str]) -> Form:
  """The sugar form of u if one rebuilds it exactly, else the generic `UOp(...)` form."""
  rule = SUGAR.get(u.op) if u.tag is None else None
  f = rule(u, aref) if rule is not None else None
  return f if f is not None else _generic(u, aref)

# ---- whole graphs ----

class _Printer:
  def __init__(self) -> None:
    self.funcs: dict[UOp, str] = {}
    self.func_lines: list[str] = []

  def kernel_ref(self, ast: UOp) -> str:
    # NOTE: a UOp inside an arg (a KERNEL's AST) is printed once as a function, and every use calls it
    if (name := self.funcs.get(ast)) is None:
      body = self.block([ast], list_mode=False)
      name = self.funcs[ast] = f"k{len(self.funcs)}"
      self.func_lines += [f"def {name}():", *("  " + ln for ln in body), "  return ast", ""]
    return f"{name}()"

  def block(self, roots: list[UOp], list_mode: bool) -> list[str]:
    forms: dict[UOp, Form] = {}
    order: list[UOp] = []
    stack: list[tuple[UOp, bool]] = [(r, False) for r in reversed(roots)]
    while stack:
      node, done = stack.pop()
      if done: order.append(node); continue
      if node in forms: continue
      f = forms[node] = node_form(node, self.kernel_ref)
      stack.append((node, True))
      stack.extend((s, False) for s in reversed(f.refs) if s not in forms)
    uses: dict[UOp, int] = {}
    for node in order:
      for s in forms[node].refs: uses[s] = uses.get(s, 0) + 1
    forced = set(roots)
    # rendered text of each node: (text, atom, depth); named nodes have depth 0
    texts: dict[UOp, tuple[str, bool, int]] = {}
    lines: list[str] = []
    # NOTE: names are local to a block: a kernel function has its own scope, numbered from c0
    for node in order:
      f = forms[node]
      rt = [texts[s] for s in f.refs]
      text = f.fn([t for t, _, _ in rt], [t if atom else f"({t})" for t, atom, _ in rt])
      depth = 1 + max((d for _, _, d in rt), default=0)
      single = f.inline and node not in forced and uses.get(node, 0) == 1
      if single and depth <= INLINE_MAX_DEPTH and len(text) <= INLINE_MAX_LEN:
        texts[node] = (text, f.atom, depth)
        continue
      if not list_mode and node is roots[0]:
        lines.append(f"ast = {text}")
        continue
      name = f"c{len(lines)}"
      lines.append(f"{name} = {text}")
      texts[node] = (name, True, 0)
    if list_mode: lines.append("ast = [" + ", ".join(texts[r][0] for r in roots) + "]")
    return lines

def pyrender(u: UOp | list[UOp]) -> str:
  """Python text that rebuilds `u` (the same object): `cN = ...` lines ending in `ast = ...`. A list is a linear
  program (see pyrender_list)."""
  if isinstance(u, list): return pyrender_list(u)
  if not isinstance(u, UOp): raise TypeError(f"pyrender: expected a UOp or a list of UOps, got {type(u).__name__}")
  p = _Printer()
  lines = p.block([u], list_mode=False)
  return "\n".join(p.func_lines + lines) + "\n"

def pyrender_list(uops: list[UOp]) -> str:
  """A linear program: every listed UOp is named, and the text ends in `ast = [cA, cB, ...]` (the list, in order)."""
  if not all(isinstance(x, UOp) for x in uops): raise TypeError("pyrender_list: every element must be a UOp")
  p = _Printer()
  lines = p.block(list(uops), list_mode=True)
  return "\n".join(p.func_lines + lines) + "\n"

def pyrender_node(u: UOp) -> tuple[str, dict[str, UOp]]:
  """The text of just this node, `ast = <expr>`, with its sources (and UOps in its arg) referenced by names bound in the
  returned env: `eval_pyrender(*pyrender_node(u)) is u` checks one node in O(1)."""
  env: dict[str, UOp] = {}
  names: dict[UOp, str] = {}
  def bind(x: UOp) -> str:
    if (nm := names.get(x)) is None: nm = names[x] = f"c{len(names)}"; env[nm] = x
    return nm
  f = node_form(u, bind)
  p = [bind(s) for s in f.refs]
  return f"ast = {f.fn(p, p)}\n", env
