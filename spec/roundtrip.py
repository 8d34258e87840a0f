"""The safe round trip: `eval_pyrender` rebuilds a graph from pyrender text without exec/eval, `check_roundtrip` asserts
`eval_pyrender(pyrender(u)) is u` and reports the smallest sub-graph that does not come back.

eval_pyrender parses the text with `ast` and walks the tree itself (the commonest lines of a linear program first go
through `_eval_lines`, which reads them without building a Python AST and gives the same graph, or steps aside for the
whole reading). It accepts only the printer's grammar (see the
docstring of tinygrad/uop/pyrender.py): assignments to `cN` / `ast`, `def kN(): ... return ast` kernel blocks, literals,
tuples, unary minus on numbers, the names UOp, Ops, AxisType, AddrSpace, dtypes, Invalid, float('nan'|'inf'|'-inf'),
dtypes.float_from_bits(int) (any other NaN, by its 64 bits), the registered arg classes (KernelInfo, Opt, OptOps when
tinygrad.codegen.opt has them), whitelisted methods with whitelisted keywords, and the binary operators the printer
emits, between UOps only. Anything else raises PyrenderSyntaxError naming the line and the construct, before it is
evaluated: a text from an untrusted replay database or finding file cannot run code.
"""
from __future__ import annotations
import ast, dataclasses, enum, importlib, operator, re, weakref
from typing import Any, Callable
from tinygrad.uop import Ops, AxisType
from tinygrad.uop.ops import UOp
from tinygrad.dtype import DType, AddrSpace, Invalid, DTYPES_DICT, dtypes
from tinygrad.uop.pyrender import pyrender, pyrender_node

__all__ = ["eval_pyrender", "check_roundtrip", "PyrenderSyntaxError", "RoundTripError", "register_arg_class",
           "ARG_CLASSES", "pyrender", "pyrender_node"]

# ---- limits ----
# NOTE: index math may hold the product of two 64-bit values (magic-number division of int64 divides in a wide index)
MAX_INT = 2**128         # |int literal| above this is rejected
MAX_STR = 10_000         # characters in one string literal
MAX_DEPTH = 64           # nesting of one expression
MAX_ELEMS = 1_000_000    # elements of one tuple, list or call
MAX_NODES = 10_000_000   # constructor calls and operators in one text
MAX_TEXT = 1 << 30       # characters of text

class PyrenderSyntaxError(ValueError):
  """Text that is not in pyrender's grammar, or that does not build a valid graph. Names the line and the construct."""
  def __init__(self, lineno: int, construct: str, why: str):
    self.lineno, self.construct = lineno, construct
    super().__init__(f"pyrender text, line {lineno}: {construct} {why}")

class RoundTripError(AssertionError):
  """eval_pyrender(pyrender(u)) did not give back u."""

# ---- the names the text may use ----

# enum classes and frozen dataclasses that may appear in args, by the name the printer uses
ARG_CLASSES: dict[str, type] = {"Ops": Ops, "AxisType": AxisType, "AddrSpace": AddrSpace}

def register_arg_class(cls: type) -> type:
  """Allow an Enum (members as `Name.MEMBER`) or a dataclass (`Name(field=value)`) in args. Usable as a decorator."""
  if not (issubclass(cls, enum.Enum) or dataclasses.is_dataclass(cls)):
    raise TypeError(f"register_arg_class: {cls.__name__} is neither an Enum nor a dataclass")
  ARG_CLASSES[cls.__name__] = cls
  return cls

_lazy_done = False
def _load_lazy_classes() -> None:
  # NOTE: KernelInfo lives in codegen, which may not exist (or may not be imported) yet; import it on first use only
  global _lazy_done
  if _lazy_done: return
  _lazy_done = True
  try: mod = importlib.import_module("tinygrad.codegen.opt")
  except ModuleNotFoundError as e:
    if e.name in ("tinygrad.codegen", "tinygrad.codegen.opt"): return
    raise
  for name in ("KernelInfo", "Opt", "OptOps"):
    if isinstance(cls := getattr(mod, name, None), type): register_arg_class(cls)

class _Namespace:
  __slots__ = ("name",)
  def __init__(self, name: str): self.name = name
  def __repr__(self) -> str: return self.name

_UOP, _DTYPES, _FLOAT = _Namespace("UOp"), _Namespace("dtypes"), _Namespace("float")
_NAME_RE = re.compile(r"c\d+|ast")
_FUNC_RE = re.compile(r"k\d+")

# UOp.<name>(...) and x.<name>(...): the keyword args each accepts
_STATIC: dict[str, tuple[str, ...]] = {
  "const": (), "invalid": (), "variable": ("dtype",), "range": ("dtype",), "special": ("dtype",), "sink": ("arg",),
  "group": (), "vectorize": ()}
_METHODS: dict[str, tuple[str, ...]] = {
  "index": (), "load": ("dtype",), "store": (), "end": (), "after": (), "reduce": ("arg",), "cast": (), "bitcast": (),
  "gep": (), "where": (), "maximum": (), "ne": (), "eq": (), "threefry": (), "exp2": (), "log2": (), "sin": (),
  "sqrt": (), "reciprocal": (), "trunc": ()}
_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
  ast.Add: operator.add, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
  ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor, ast.LShift: operator.lshift,
  ast.RShift: operator.rshift}
_FLOATS = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}
_UOP_KWARGS = ("dtype", "src", "arg", "tag")
# errors a whitelisted constructor raises on bad input; they become PyrenderSyntaxError
_BUILD_ERRORS = (TypeError, ValueError, AttributeError, KeyError, IndexError, AssertionError, OverflowError)

_CONSTRUCT_NAMES: dict[type, str] = {
  ast.Lambda: "lambda", ast.ListComp: "list comprehension", ast.SetComp: "set comprehension",
  ast.DictComp: "dict comprehension", ast.GeneratorExp: "generator expression", ast.JoinedStr: "f-string",
  ast.FormattedValue: "f-string", ast.Subscript: "subscript", ast.Starred: "starred expression",
  ast.NamedExpr: "walrus (:=)", ast.Import: "import", ast.ImportFrom: "import", ast.Await: "await", ast.Yield: "yield",
  ast.YieldFrom: "yield", ast.IfExp: "conditional expression", ast.BoolOp: "and/or", ast.Dict: "dict literal",
  ast.Set: "set literal", ast.List: "list literal", ast.Slice: "slice", ast.Global: "global", ast.Nonlocal: "nonlocal",
  ast.Delete: "del", ast.With: "with", ast.For: "for loop", ast.While: "while loop", ast.If: "if", ast.Try: "try",
  ast.Raise: "raise", ast.ClassDef: "class definition", ast.AsyncFunctionDef: "async def",
  ast.Expr: "expression statement", ast.AugAssign: "augmented assignment", ast.AnnAssign: "annotated assignment",
  ast.Assert: "assert", ast.Pass: "pass"}

def _construct(node: ast.AST) -> str: return _CONSTRUCT_NAMES.get(type(node), type(node).__name__)

# ---- the evaluator ----

class _Evaluator:
  def __init__(self, max_nodes: int):
    self.max_nodes, self.nodes = max_nodes, 0
    self.funcs: dict[str, UOp] = {}

  def err(self, node: ast.AST, construct: str, why: str) -> PyrenderSyntaxError:
    return PyrenderSyntaxError(getattr(node, "lineno", 0), construct, why)

  def count(self, node: ast.AST) -> None:
    self.nodes += 1
    if self.nodes > self.max_nodes: raise self.err(node, "text", f"builds more than {self.max_nodes} nodes")

  # ---- statements ----
  def run(self, mod: ast.Module, scope: dict[str, Any]) -> Any:
    for i, st in enumerate(mod.body):
      if isinstance(st, ast.FunctionDef): self.define(st)
      elif isinstance(st, ast.Assign): self.assign(st, scope, top=True)
      else: raise self.err(st, _construct(st), "is not allowed at the top level")
      if "ast" in scope and i != len(mod.body) - 1:
        raise self.err(mod.body[i + 1], "statement", "after `ast = ...` is not allowed")
    if "ast" not in scope: raise PyrenderSyntaxError(0, "text", "never assigns `ast`")
    return scope["ast"]

  def assign(self, st: ast.Assign, scope: dict[str, Any], top: bool) -> None:
    if len(st.targets) != 1 or not isinstance(tgt := st.targets[0], ast.Name):
      raise self.err(st, "assignment", "must have one plain name target")
    what = f"assignment to {tgt.id!r}"
    if not _NAME_RE.fullmatch(tgt.id): raise self.err(st, what, "is not allowed (only cN and ast)")
    if tgt.id in scope: raise self.err(st, what, "rebinds a name that is already defined")
    if tgt.id == "ast" and top and isinstance(st.value, ast.List):
      if len(st.value.elts) > MAX_ELEMS: raise self.err(st, "list", f"has more than {MAX_ELEMS} elements")
      vals = [self.expr(e, scope, 1) for e in st.value.elts]
      if not all(isinstance(v, UOp) for v in vals): raise self.err(st, "list", "must hold UOps only")
      scope["ast"] = vals
      return
    val = self.expr(st.value, scope, 0)
    if not isinstance(val, UOp): raise self.err(st, what, f"must bind a UOp, not {type(val).__name__}")
    scope[tgt.id] = val

  def define(self, fd: ast.FunctionDef) -> None:
    a = fd.args
    if not _FUNC_RE.fullmatch(fd.name): raise self.err(fd, f"def {fd.name}", "is not allowed (only kN)")
    if a.posonlyargs or a.args or a.vararg or a.kwonlyargs or a.kwarg or a.defaults or a.kw_defaults:
      raise self.err(fd, f"def {fd.name}", "must take no arguments")
    if fd.decorator_list or fd.returns is not None or getattr(fd, "type_params", None):
      raise self.err(fd, f"def {fd.name}", "must have no decorators or annotations")
    if fd.name in self.funcs: raise self.err(fd, f"def {fd.name}", "is defined twice")
    *body, last = fd.body
    if not (isinstance(last, ast.Return) and isinstance(last.value, ast.Name) and last.value.id == "ast"):
      raise self.err(last, f"def {fd.name}", "must end in `return ast`")
    scope: dict[str, Any] = {}
    for st in body:
      if not isinstance(st, ast.Assign): raise self.err(st, _construct(st), f"is not allowed inside def {fd.name}")
      self.assign(st, scope, top=False)
    if "ast" not in scope: raise self.err(last, f"def {fd.name}", "returns `ast` but never assigns it")
    self.funcs[fd.name] = scope["ast"]

  # ---- expressions ----
  def expr(self, node: ast.expr, scope: dict[str, Any], depth: int) -> Any:
    if depth > MAX_DEPTH: raise self.err(node, "expression", f"is nested deeper than {MAX_DEPTH}")
    if isinstance(node, ast.Name):
      if isinstance(v := self.name(node, scope), (_Namespace, type)):
        raise self.err(node, f"name {node.id!r}", f"is not a value: use {node.id}.<member> or {node.id}(...)")
      return v
    if isinstance(node, ast.Call): return self.call(node, scope, depth)
    if isinstance(node, ast.Constant): return self.constant(node)
    if isinstance(node, ast.Tuple):
      if len(node.elts) > MAX_ELEMS: raise self.err(node, "tuple", f"has more than {MAX_ELEMS} elements")
      return tuple(self.expr(e, scope, depth + 1) for e in node.elts)
    if isinstance(node, ast.Attribute): return self.attribute(node, scope, depth)
    if isinstance(node, ast.BinOp):
      if (fn := _BINOPS.get(type(node.op))) is None:
        raise self.err(node, f"operator {type(node.op).__name__}", "is not allowed")
      lhs, rhs = self.expr(node.left, scope, depth + 1), self.expr(node.right, scope, depth + 1)
      return self.uop_operator(node, fn, lhs, rhs)
    if isinstance(node, ast.Compare):
      if len(node.ops) != 1 or not isinstance(node.ops[0], ast.Lt):
        raise self.err(node, "comparison", "other than one `<` is not allowed")
      rhs = self.expr(node.comparators[0], scope, depth + 1)
      return self.uop_operator(node, operator.lt, self.expr(node.left, scope, depth + 1), rhs)
    if isinstance(node, ast.UnaryOp):
      if not isinstance(node.op, ast.USub): raise self.err(node, f"unary {type(node.op).__name__}", "is not allowed")
      v = self.expr(node.operand, scope, depth + 1)
      if type(v) not in (int, float):
        raise self.err(node, "unary minus", f"only applies to numbers, not {type(v).__name__}")
      return -v
    raise self.err(node, _construct(node), "is not allowed")

  def constant(self, node: ast.Constant) -> Any:
    v: Any = node.value
    t = type(v)
    if v is None or t is bool or t is float: return v
    if t is int:
      if abs(v) > MAX_INT: raise self.err(node, "int literal", f"is larger than 2**128 ({len(str(v))} digits)")
      return v
    if t is str:
      if len(v) > MAX_STR: raise self.err(node, "string literal", f"is longer than {MAX_STR} characters")
      return v
    raise self.err(node, f"{t.__name__} literal", "is not allowed")

  def name(self, node: ast.Name, scope: dict[str, Any]) -> Any:
    n = node.id
    if n in scope: return scope[n]
    if n == "UOp": return _UOP
    if n == "dtypes": return _DTYPES
    if n == "Invalid": return Invalid
    if n == "float": return _FLOAT
    if (cls := ARG_CLASSES.get(n)) is not None: return cls
    if n in self.funcs: raise self.err(node, f"kernel function {n}", f"must be called: write it as {n}()")
    if n.startswith("_"): raise self.err(node, f"name {n!r}", "is not allowed (underscore names)")
    raise self.err(node, f"name {n!r}", "is not defined (yet): names must be assigned before they are used")

  def attribute(self, node: ast.Attribute, scope: dict[str, Any], depth: int) -> Any:
    attr = node.attr
    if attr.startswith("_"): raise self.err(node, f"attribute .{attr}", "is not allowed (underscore/dunder attributes)")
    if not isinstance(node.value, ast.Name):
      raise self.err(node, f"attribute .{attr}", "is only allowed on a plain name (no attribute chains)")
    base = self.name(node.value, scope)
    if base is _DTYPES:
      if (dt := DTYPES_DICT.get(attr)) is None: raise self.err(node, f"dtypes.{attr}", "is not a dtype")
      return dt
    if isinstance(base, type) and issubclass(base, enum.Enum):
      if attr not in base.__members__: raise self.err(node, f"{base.__name__}.{attr}", "is not a member")
      return base.__members__[attr]
    raise self.err(node, f"attribute .{attr} of {node.value.id}", "is only allowed as a whitelisted method call")

  def uop_operator(self, node: ast.expr, fn: Callable[[Any, Any], Any], a: Any, b: Any) -> UOp:
    if not (isinstance(a, UOp) and isinstance(b, UOp)):
      raise self.err(node, "operator", f"is only allowed between UOps, not {type(a).__name__} and {type(b).__name__}")
    self.count(node)
    return self.build_uop(node, "operator", lambda: fn(a, b))

  def build(self, node: ast.expr, what: str, fn: Callable[[], Any]) -> Any:
    try: return fn()
    except _BUILD_ERRORS as e: raise self.err(node, what, f"failed: {type(e).__name__}: {e}") from e

  def build_uop(self, node: ast.expr, what: str, fn: Callable[[], Any]) -> UOp:
    if not isinstance(ret := self.build(node, what, fn), UOp): raise self.err(node, what, "did not build a UOp")
    return ret

  def call(self, node: ast.Call, scope: dict[str, Any], depth: int) -> Any:
    f = node.func
    if isinstance(f, ast.Name): return self.call_name(node, f, scope, depth)
    if not isinstance(f, ast.Attribute): raise self.err(node, f"call of {ast.unparse(f)[:60]}", "is not allowed")
    attr = f.attr
    if attr.startswith("_"): raise self.err(node, f"method .{attr}", "is not allowed (underscore/dunder attributes)")
    recv = self.name(f.value, scope) if isinstance(f.value, ast.Name) else self.expr(f.value, scope, depth + 1)
    if recv is _DTYPES and attr == "float_from_bits":
      args, _ = self.arguments(node, scope, depth, (), "dtypes.float_from_bits")
      if len(args) != 1 or type(args[0]) is not int or not 0 <= args[0] < 2**64:
        raise self.err(node, "dtypes.float_from_bits(...)", "takes one int in [0, 2**64)")
      return dtypes.float_from_bits(args[0])
    if recv is _UOP:
      if attr not in _STATIC: raise self.err(node, f"UOp.{attr}", "is not a whitelisted constructor")
      args, kw = self.arguments(node, scope, depth, _STATIC[attr], f"UOp.{attr}")
      self.count(node)
      return self.build_uop(node, f"UOp.{attr}", lambda: getattr(UOp, attr)(*args, **kw))
    if isinstance(recv, UOp):
      if attr not in _METHODS: raise self.err(node, f"method .{attr}", "is not a whitelisted UOp method")
      args, kw = self.arguments(node, scope, depth, _METHODS[attr], f".{attr}")
      if attr in ("cast", "bitcast") and not (len(args) == 1 and isinstance(args[0], DType)):
        raise self.err(node, f".{attr}", "takes one dtype")
      self.count(node)
      return self.build_uop(node, f".{attr}", lambda: getattr(recv, attr)(*args, **kw))
    if isinstance(recv, DType):
      if attr not in ("vec", "ptr"): raise self.err(node, f"dtype method .{attr}", "is not allowed (only vec, ptr)")
      args, kw = self.arguments(node, scope, depth, (), f".{attr}")
      if not all(type(a) is int or isinstance(a, AddrSpace) for a in args):
        raise self.err(node, f".{attr}", "takes ints and AddrSpace only")
      return self.build(node, f".{attr}", lambda: getattr(recv, attr)(*args))
    owner = recv.name if isinstance(recv, _Namespace) else getattr(recv, "__name__", type(recv).__name__)
    raise self.err(node, f"method .{attr} of {owner}", "is not allowed")

  def call_name(self, node: ast.Call, f: ast.Name, scope: dict[str, Any], depth: int) -> Any:
    n = f.id
    if _FUNC_RE.fullmatch(n) and n in self.funcs:
      if node.args or node.keywords: raise self.err(node, f"call of {n}", "takes no arguments")
      return self.funcs[n]
    if _FUNC_RE.fullmatch(n): raise self.err(node, f"kernel function {n}", "is not defined (yet)")
    if n not in ("UOp", "float") and n not in ARG_CLASSES:
      raise self.err(node, f"call of {n}", "is not allowed (only UOp, float, kN and registered arg classes)")
    fn = self.name(f, scope)
    if fn is _FLOAT:
      args, _ = self.arguments(node, scope, depth, (), "float")
      if len(args) != 1 or not isinstance(args[0], str) or args[0] not in _FLOATS:
        raise self.err(node, "float(...)", "only takes 'nan', 'inf' or '-inf'")
      return _FLOATS[args[0]]
    if fn is _UOP:
      args, kw = self.arguments(node, scope, depth, _UOP_KWARGS, "UOp")
      return self.generic_uop(node, args, kw)
    if isinstance(fn, type) and dataclasses.is_dataclass(fn) and ARG_CLASSES.get(n) is fn:
      fields = tuple(x.name for x in dataclasses.fields(fn) if x.init)
      args, kw = self.arguments(node, scope, depth, fields, n)
      if args: raise self.err(node, n, "takes keyword arguments only")
      return self.build(node, n, lambda: fn(**kw))
    raise self.err(node, f"call of {n}", "is not allowed")

  def arguments(self, node: ast.Call, scope: dict[str, Any], depth: int, kwnames: tuple[str, ...],
                what: str) -> tuple[list[Any], dict[str, Any]]:
    if len(node.args) + len(node.keywords) > MAX_ELEMS: raise self.err(node, what, f"has over {MAX_ELEMS} arguments")
    args = [self.expr(a, scope, depth + 1) for a in node.args]
    kw: dict[str, Any] = {}
    for k in node.keywords:
      if k.arg is None: raise self.err(node, f"{what}(**...)", "is not allowed")
      if k.arg not in kwnames:
        raise self.err(node, f"keyword {k.arg}= of {what}", f"is not allowed (allowed: {', '.join(kwnames) or 'none'})")
      kw[k.arg] = self.expr(k.value, scope, depth + 1)
      if k.arg == "dtype" and not isinstance(kw[k.arg], DType): raise self.err(node, f"{what}(dtype=)", "needs a dtype")
    return args, kw

  def generic_uop(self, node: ast.Call, args: list[Any], kw: dict[str, Any]) -> UOp:
    if not 1 <= len(args) <= 4: raise self.err(node, "UOp(...)", "takes op and at most dtype, src, arg positionally")
    vals = dict(zip(("op", "dtype", "src", "arg"), args))
    for k, v in kw.items():
      if k in vals: raise self.err(node, "UOp(...)", f"got {k} twice")
      vals[k] = v
    op, dtype, src = vals["op"], vals.get("dtype"), vals.get("src", ())
    if not isinstance(op, Ops): raise self.err(node, "UOp(...)", f"needs an Ops member first, not {type(op).__name__}")
    if dtype is not None and not isinstance(dtype, DType):
      raise self.err(node, "UOp(...)", f"dtype must be a dtype, not {type(dtype).__name__}")
    if not (isinstance(src, tuple) and all(isinstance(s, UOp) for s in src)):
      raise self.err(node, "UOp(...)", "src must be a tuple of UOps")
    self.count(node)
    return self.build_uop(node, "UOp(...)", lambda: UOp(op, **{k: v for k, v in vals.items() if k != "op"}))

# ---- the common lines, read without a Python AST ----

# NOTE: each pattern is one whole line exactly as pyrender prints it, and takes only what the evaluator above would take
# from that line's AST (names c0.., a whitelisted method, dtypes.NAME, a decimal literal without leading zeros)
_NAME, _TARGET = r"(c[0-9]+)", r"(c[0-9]+|ast)"
_LIT = r"(-?)((?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:e[-+][0-9]+)?)"
_LINE_METHOD = re.compile(rf"{_TARGET} = {_NAME}\.([a-z][a-z0-9]*)\(((?:c[0-9]+)(?:, c[0-9]+)*)?\)")
_LINE_CAST = re.compile(rf"{_TARGET} = {_NAME}\.(cast|bitcast)\(dtypes\.([a-z][a-z0-9_]*)\)")
_LINE_BINOP = re.compile(rf"{_TARGET} = {_NAME} (\+|\*|//|%|&|\||\^|<<|>>|<) {_NAME}")
_LINE_CONST = re.compile(rf"{_TARGET} = UOp\.const\(dtypes\.([a-z][a-z0-9_]*), {_LIT}\)")
_LINE_LIST = re.compile(r"ast = \[((?:c[0-9]+)(?:, c[0-9]+)*)?\]")
_NAT = r"(0|[1-9][0-9]*)"
_LINE_DEFINE = re.compile(rf"{_TARGET} = UOp\(Ops\.([A-Z][A-Z0-9_]*), dtypes\.([a-z][a-z0-9_]*)\.ptr\({_NAT}\), "
                          rf"arg={_NAT}\)")
_LINE_RANGE = re.compile(rf"{_TARGET} = UOp\.range\((c[0-9]+|0|[1-9][0-9]*), {_NAT}, AxisType\.([A-Z][A-Z0-9_]*)"
                         r"(?:, dtype=dtypes\.([a-z][a-z0-9_]*))?\)")
_LINE_STATIC = re.compile(rf"{_TARGET} = UOp\.(group|sink|vectorize)\(((?:c[0-9]+)(?:, c[0-9]+)*)?\)")
_LINE_PATTERNS = (_LINE_METHOD, _LINE_BINOP, _LINE_CONST, _LINE_CAST, _LINE_LIST, _LINE_DEFINE, _LINE_RANGE,
                  _LINE_STATIC)
_LINE_OPS: dict[str, Callable[[Any, Any], Any]] = {
  "+": operator.add, "*": operator.mul, "//": operator.floordiv, "%": operator.mod, "&": operator.and_,
  "|": operator.or_, "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift, "<": operator.lt}

class _StepAside(Exception):
  """The text is not one _eval_lines reads: the whole reading goes the general way (which also names any error)."""

def _built(x: Any) -> UOp:
  if not isinstance(x, UOp): raise _StepAside
  return x

def _eval_lines(text: str, scope: dict[str, Any], max_nodes: int) -> UOp | list[UOp]:
  """The graph of `text` as the evaluator above builds it, reading the commonest lines by pattern (a linear program's
  text is mostly `cN = cA.index(cB)`, `cN = cA + cB`, `cN = UOp.const(dtypes.int32, 5)`, its buffers and loops); the
  other lines are parsed together, one statement per line. Raises _StepAside for anything else (errors, def blocks, a
  line that is not one whole statement), before or after building nodes: nodes are hash-consed, so building them again
  is harmless.
  NOTE: the same graph as ast.parse of the whole text: each line is one whole statement starting at column 0, so the
  whole text's statements are the lines' statements, in order."""
  # NOTE: names an env could shadow, and the classes the general reader looks up in ARG_CLASSES
  if any(n in scope for n in ("UOp", "dtypes", "Ops", "AxisType")): raise _StepAside
  if ARG_CLASSES.get("Ops") is not Ops or ARG_CLASSES.get("AxisType") is not AxisType: raise _StepAside
  lines = [ln for ln in text.split("\n") if ln]
  kinds: list[tuple[int, Any]] = []
  rest: list[str] = []
  for ln in lines:
    for k, pat in enumerate(_LINE_PATTERNS):
      if (m := pat.fullmatch(ln)) is not None:
        kinds.append((k, m))
        break
    else:
      if ln.endswith("\\"): raise _StepAside  # NOTE: a line continued on the next is not one whole statement
      kinds.append((-1, None))
      rest.append(ln)
  stmts: list[ast.Assign] = []
  if rest:
    try: body = ast.parse("\n".join(rest), mode="exec").body
    except Exception: raise _StepAside from None
    stmts = [st for i, st in enumerate(body) if isinstance(st, ast.Assign) and st.lineno == st.end_lineno == i + 1]
    if len(stmts) != len(rest) or len(body) != len(rest): raise _StepAside
  ev, nstmt = _Evaluator(max_nodes), 0
  for k, m in kinds:
    if "ast" in scope: raise _StepAside  # NOTE: a statement after `ast = ...`
    if k == -1:
      try: ev.assign(stmts[nstmt], scope, top=True)
      except Exception: raise _StepAside from None
      nstmt += 1
      continue
    if k == 4:
      vals = [scope.get(n) for n in m.group(1).split(", ")] if m.group(1) else []
      if len(vals) > MAX_ELEMS or not all(isinstance(v, UOp) for v in vals): raise _StepAside
      scope["ast"] = vals
      continue
    tgt = m.group(1)
    if tgt in scope: raise _StepAside
    ev.nodes += 1
    if ev.nodes > ev.max_nodes: raise _StepAside
    try:
      if k == 0:
        recv, attr = scope.get(m.group(2)), m.group(3)
        if attr not in _METHODS or attr in ("cast", "bitcast") or not isinstance(recv, UOp): raise _StepAside
        args = [_built(scope.get(n)) for n in m.group(4).split(", ")] if m.group(4) else []
        scope[tgt] = _built(getattr(recv, attr)(*args))
      elif k == 1:
        a, b = _built(scope.get(m.group(2))), _built(scope.get(m.group(4)))
        scope[tgt] = _built(_LINE_OPS[m.group(3)](a, b))
      elif k == 2:
        if (dt := DTYPES_DICT.get(m.group(2))) is None: raise _StepAside
        lit = m.group(4)
        v: int | float = float(lit) if "." in lit or "e" in lit else int(lit)
        if type(v) is int and abs(v) > MAX_INT: raise _StepAside
        scope[tgt] = _built(UOp.const(dt, -v if m.group(3) else v))
      elif k == 3:
        recv, dt = scope.get(m.group(2)), DTYPES_DICT.get(m.group(4))
        if dt is None or not isinstance(recv, UOp): raise _StepAside
        scope[tgt] = _built(getattr(recv, m.group(3))(dt))
      elif k == 5:
        op, dt = Ops.__members__.get(m.group(2)), DTYPES_DICT.get(m.group(3))
        size, arg = int(m.group(4)), int(m.group(5))
        if op is None or dt is None or size > MAX_INT or arg > MAX_INT: raise _StepAside
        scope[tgt] = _built(UOp(op, dtype=dt.ptr(size), arg=arg))
      elif k == 6:
        e, rid, axis = m.group(2), int(m.group(3)), AxisType.__members__.get(m.group(4))
        end: UOp | int = _built(scope.get(e)) if e[0] == "c" else int(e)
        rdt = None if m.group(5) is None else DTYPES_DICT.get(m.group(5))
        if axis is None or (m.group(5) is not None and rdt is None) or rid > MAX_INT or \
          (isinstance(end, int) and end > MAX_INT): raise _StepAside
        scope[tgt] = _built(UOp.range(end, rid, axis) if rdt is None else UOp.range(end, rid, axis, dtype=rdt))
      else:
        args = [_built(scope.get(n)) for n in m.group(3).split(", ")] if m.group(3) else []
        scope[tgt] = _built(getattr(UOp, m.group(2))(*args))
    except _StepAside: raise
    except Exception: raise _StepAside from None
  if "ast" not in scope: raise _StepAside
  ret: UOp | list[UOp] = scope["ast"]
  return ret

def eval_pyrender(text: str, env: dict[str, UOp] | None = None, max_nodes: int = MAX_NODES) -> UOp | list[UOp]:
  """Rebuild the graph that pyrender printed, without exec/eval. `env` pre-binds names (as `pyrender_node` returns
  them). Raises PyrenderSyntaxError (a ValueError) naming the line and construct for anything outside the grammar."""
  if not isinstance(text, str): raise TypeError(f"eval_pyrender: expected str, got {type(text).__name__}")
  if len(text) > MAX_TEXT: raise PyrenderSyntaxError(0, "text", f"is longer than {MAX_TEXT} characters")
  _load_lazy_classes()
  scope: dict[str, Any] = {}
  for k, v in (env or {}).items():
    if not (isinstance(k, str) and k.isidentifier() and not k.startswith("_")) or not isinstance(v, UOp):
      raise TypeError(f"eval_pyrender: env must map plain names to UOps; got {k!r}: {type(v).__name__}")
    scope[k] = v
  try: return _eval_lines(text, dict(scope), max_nodes)
  except _StepAside: pass
  try: mod = ast.parse(text, mode="exec")
  except SyntaxError as e: raise PyrenderSyntaxError(e.lineno or 0, "syntax error", f"{e.msg}") from None
  except (RecursionError, MemoryError, ValueError) as e:
    raise PyrenderSyntaxError(0, "text", f"is nested too deeply or too large to parse ({type(e).__name__})") from None
  ret: UOp | list[UOp] = _Evaluator(max_nodes).run(mod, scope)
  return ret

# ---- check_roundtrip ----

# sinks already shown to round-trip: UOps are immutable, so the verdict holds for their lifetime
_verified: weakref.WeakSet[UOp] = weakref.WeakSet()

def _same(a: object, b: UOp | list[UOp]) -> bool:
  if isinstance(b, UOp): return a is b
  return isinstance(a, list) and len(a) == len(b) and all(x is y for x, y in zip(a, b))

def _try_eval(text: str, env: dict[str, UOp] | None = None) -> UOp | list[UOp] | PyrenderSyntaxError:
  try: return eval_pyrender(text, env)
  except PyrenderSyntaxError as e: return e

def _describe(back: object) -> str:
  if isinstance(back, Exception): return f"{type(back).__name__}: {back}"
  if isinstance(back, (UOp, list)):
    try: return pyrender(back)
    except (ValueError, TypeError) as e: return f"(unprintable: {e}) {back!r}"
  return repr(back)

def _all_nodes(roots: list[UOp]) -> list[UOp]:
  """Every node under roots, sources first, with the graphs in args (a KERNEL's AST) before the node holding them."""
  ret: dict[UOp, None] = {}
  stack: list[tuple[UOp, bool]] = [(r, False) for r in reversed(roots)]
  while stack:
    node, done = stack.pop()
    if done: ret[node] = None; continue
    if node in ret: continue
    stack.append((node, True))
    stack.extend((s, False) for s in reversed(node.src) if s not in ret)
    if isinstance(node.arg, UOp) and node.arg not in ret: stack.append((node.arg, False))
  return list(ret)

# characters of sub-graph text _diagnose may print while looking for the smallest failing sub-graph
_DIAGNOSE_BUDGET = 20_000_000

def _diagnose(roots: list[UOp], text: str, back: object) -> str:
  nodes = _all_nodes(roots)
  # O(1) per node first: the first node whose own line does not come back, all of its sources being fine
  for n in nodes:
    try: ntext, env = pyrender_node(n)
    except (ValueError, TypeError) as e: return f"round trip failed: pyrender cannot print {n!r}: {e}"
    if not _same(nb := _try_eval(ntext, env), n):
      return (f"round trip failed at {n!r}\n--- its pyrender (sources bound by name: {', '.join(env) or 'none'}) ---\n"
              f"{ntext}--- what came back ---\n{_describe(nb)}")
  # every node is fine alone: find the smallest sub-graph whose whole text does not come back (quadratic, so bounded)
  budget = _DIAGNOSE_BUDGET
  for n in nodes:
    try: sub = pyrender(n)
    except (ValueError, TypeError) as e: return f"round trip failed: pyrender cannot print the sub-graph at {n!r}: {e}"
    if (budget := budget - len(sub)) < 0: break
    if not _same(nb := _try_eval(sub), n):
      return (f"round trip failed for the sub-graph at {n!r}\n--- its pyrender ---\n{sub}"
              f"--- what came back ---\n{_describe(nb)}")
  return f"round trip failed for the whole graph\n--- its pyrender ---\n{text}--- what came back ---\n{_describe(back)}"

def check_roundtrip(u: UOp | list[UOp]) -> None:
  """Assert `eval_pyrender(pyrender(u)) is u` (element-wise for a linear program). On failure raises RoundTripError
  naming the smallest sub-graph that does not come back, its pyrender text and the pyrender of what came back."""
  if isinstance(u, UOp) and u in _verified: return
  roots = u if isinstance(u, list) else [u]
  try: text = pyrender(u)
  except (ValueError, TypeError) as e:
    raise RoundTripError(f"round trip failed: pyrender cannot print the graph: {e}\n{_diagnose(roots, '', e)}") from e
  back = _try_eval(text)
  if not _same(back, u): raise RoundTripError(_diagnose(roots, text, back))
  if isinstance(u, UOp): _verified.add(u)
