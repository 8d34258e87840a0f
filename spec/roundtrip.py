"""The safe round trip: `eval_pyrender` rebuilds a graph from pyrender text without exec/eval, `check_roundtrip` asserts
`eval_pyrender(pyrender(u)) is u` and reports the smallest sub-graph that does not come back.

eval_pyrender reads the text once, front to back, and builds the graph as it reads: a lexer (`_Lexer`: one token at a
time) and a reader (`_Reader`: one statement at a time, expressions by precedence) that evaluates each construct as
soon as it is read. No parse tree is built and no Python code is compiled, so every limit is checked while reading
(characters of a token, nesting, elements of a tuple or call, nodes built, literals their dtype cannot hold) and memory
stays proportional to what the text builds. The commonest lines of a linear program (`cN = cA.index(cB)`,
`cN = cA + cB`, `cN = UOp.const(dtypes.int32, 5)`, ...) are first read whole by a pattern (`_fast_line`), which builds
the same nodes or steps aside for the reader.

It accepts only the printer's grammar (see the docstring of tinygrad/uop/pyrender.py): assignments to `cN` / `ast`,
`def kN(): ... return ast` kernel blocks, literals, tuples, unary minus on numbers, the names UOp, Ops, AxisType,
AddrSpace, dtypes, Invalid, float('nan'|'inf'|'-inf'), dtypes.float_from_bits(int) (any other NaN, by its 64 bits),
the registered arg classes (KernelInfo, Opt, OptOps when tinygrad.codegen.opt has them), whitelisted methods with
whitelisted keywords, and the binary operators the printer emits, between UOps only. A const's literal must be one its
dtype holds (`UOp.const(dtypes.int64, 2**128)` is an error, not 0). Anything else raises PyrenderSyntaxError naming
the line and the construct, before it is evaluated: a text from an untrusted replay database or finding file cannot
run code.
"""
from __future__ import annotations
import codecs, dataclasses, enum, importlib, keyword, math, operator, re, weakref
from typing import Any, Callable, NoReturn
from tinygrad.uop import Ops, AxisType
from tinygrad.uop.ops import UOp
from tinygrad.dtype import DType, AddrSpace, Invalid, DTYPES_DICT, dtypes
from tinygrad.uop.pyrender import pyrender, pyrender_node

__all__ = ["eval_pyrender", "check_roundtrip", "PyrenderSyntaxError", "RoundTripError", "register_arg_class",
           "ARG_CLASSES", "pyrender", "pyrender_node"]

# ---- limits (each checked while reading) ----
# NOTE: index math may hold the product of two 64-bit values (magic-number division of int64 divides in a wide index)
MAX_INT = 2**128         # |int literal| above this is rejected
MAX_STR = 10_000         # characters in one string literal
MAX_TOKEN = 256          # characters in one name or number
MAX_DEPTH = 64           # nesting of one expression: brackets, calls, operators, unary minus
MAX_ELEMS = 1_000_000    # elements of one tuple, list or call
MAX_NODES = 10_000_000   # constructor calls and operators in one text
MAX_TEXT = 1 << 30       # characters of text
# a string literal's source may spell a character with up to 10 (`\U0001f600`); past this it cannot fit in MAX_STR
_MAX_STR_SOURCE = 10 * MAX_STR + 8
# lines the patterns read whole (a longer one goes through the reader, which holds no copy of it)
_FAST_LINE = 4096

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
_NAME_RE = re.compile(r"c[0-9]+|ast")
_FUNC_RE = re.compile(r"k[0-9]+")

# UOp.<name>(...) and x.<name>(...): the keyword args each accepts
_STATIC: dict[str, tuple[str, ...]] = {
  "const": (), "invalid": (), "variable": ("dtype",), "range": ("dtype",), "special": ("dtype",), "sink": ("arg",),
  "group": (), "vectorize": ()}
_METHODS: dict[str, tuple[str, ...]] = {
  "index": (), "load": ("dtype",), "store": (), "end": (), "after": (), "reduce": ("arg",), "cast": (), "bitcast": (),
  "gep": (), "where": (), "maximum": (), "ne": (), "eq": (), "threefry": (), "exp2": (), "log2": (), "sin": (),
  "sqrt": (), "reciprocal": (), "trunc": ()}
# the binary operators the printer emits (between UOps) and their precedence; `<` binds loosest, and only once
_BINOPS: dict[str, Callable[[Any, Any], Any]] = {
  "<": operator.lt, "|": operator.or_, "^": operator.xor, "&": operator.and_, "<<": operator.lshift,
  ">>": operator.rshift, "+": operator.add, "*": operator.mul, "//": operator.floordiv, "%": operator.mod}
_PREC = {"<": 0, "|": 1, "^": 2, "&": 3, "<<": 4, ">>": 4, "+": 5, "*": 6, "//": 6, "%": 6}
# operators Python has and the printer never emits, by the name errors give them
_OTHER_BINOPS = {"-": "Sub", "/": "Div", "@": "MatMult", "**": "Pow"}
_COMPARISONS = ("==", "!=", ">", "<=", ">=")
_FLOATS = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}
_UOP_KWARGS = ("dtype", "src", "arg", "tag")
# errors a whitelisted constructor raises on bad input; they become PyrenderSyntaxError
_BUILD_ERRORS = (TypeError, ValueError, AttributeError, KeyError, IndexError, AssertionError, OverflowError)

# statements that start with a keyword, by the name errors give them
_KEYWORD_STATEMENTS = {
  "import": "import", "from": "import", "for": "for loop", "while": "while loop", "if": "if", "try": "try",
  "with": "with", "class": "class definition", "global": "global", "nonlocal": "nonlocal", "del": "del",
  "raise": "raise", "assert": "assert", "pass": "pass", "return": "return", "async": "async def", "break": "break",
  "continue": "continue", "elif": "elif", "else": "else", "except": "except", "finally": "finally", "yield": "yield",
  "await": "await", "lambda": "expression statement", "not": "expression statement"}
# keywords where an operand should be, by the construct they start
_KEYWORD_OPERANDS = {"lambda": "lambda", "not": "unary Not", "await": "await", "yield": "yield"}
_KEYWORDS = frozenset(keyword.kwlist)

# ---- literals a dtype holds ----

def _why_not_held(dt: DType, v: Any) -> str | None:
  """Why `v` cannot be the value of a const of `dt` (None when it can): an int in an int dtype's range (index: up to
  MAX_INT), a bool for bool, a number a float format holds (rounded to it, not overflowing or saturating)."""
  if isinstance(v, tuple): return next((w for x in v if (w := _why_not_held(dt.scalar(), x)) is not None), None)
  s = dt.scalar()
  if v is Invalid and s is dtypes.index: return None
  if s is dtypes.bool: return None if type(v) is bool else "it is not a bool"
  if dtypes.is_int(s) or s is dtypes.index:
    if type(v) is not int: return "it is not an integer"
    lo, hi = (-MAX_INT, MAX_INT) if s is dtypes.index else (int(dtypes.min(s)), int(dtypes.max(s)))
    return None if lo <= v <= hi else f"it is outside {lo}..{hi}"
  if not dtypes.is_float(s): return None
  if type(v) not in (int, float): return "it is not a number"
  try: f = float(v)
  except OverflowError: return "it overflows"
  if math.isnan(f): return None
  r = float(dtypes.as_const(f, s))
  if math.isinf(f): return None if r == f else "the format has no infinity"
  exp_bits, man_bits = dtypes.finfo(s)
  # NOTE: rounding moves a value by at most half an ulp (relative 2**-man_bits, absolute the subnormal spacing)
  tiny = 2.0 ** (2 - 2 ** (exp_bits - 1) - man_bits)
  if not math.isfinite(r) or abs(r - f) > abs(f) * 2.0 ** -man_bits + tiny: return "it overflows the format"
  return None

# ---- the lexer ----

# one token after any blanks: a newline, a string (with its prefix), a name, a number, an operator, or skipped text (a
# line continuation, a comment); `end` at the end of the text. NOTE: possessive repeats: a string that does not close
# fails in one pass, never by backtracking
_TOKEN_RE = re.compile(r"""[ \t\f]*+(?:
  (?P<nl>\r\n|\r|\n)
| (?P<str>[rRbBuUfF]{0,2}(?:'''(?:[^'\\]|\\.|'(?!''))*+'''|\"\"\"(?:[^"\\]|\\.|"(?!""))*+\"\"\"
    |'(?:[^'\\\r\n]|\\(?:\r\n|.))*+'|"(?:[^"\\\r\n]|\\(?:\r\n|.))*+"))
| (?P<name>[^\W\d]\w*+)
| (?P<num>[0-9](?:[0-9_a-zA-Z.]|(?<=[eE])[-+])*+|\.[0-9](?:[0-9_a-zA-Z.]|(?<=[eE])[-+])*+)
| (?P<op>\*\*=?|//=?|<<=?|>>=?|->|:=|\.\.\.|[-+*/%&|^@<>=!]=|[-+*/%&|^~@<>=(),:;.\[\]{}])
| (?P<skip>\\(?:\r\n|\r|\n)|\#[^\r\n]*+)
| (?P<end>\Z))""", re.X | re.S)
_OPEN, _CLOSE = {"(": ")", "[": "]", "{": "}"}, {")": "(", "]": "[", "}": "{"}
_EOL_RE = re.compile(r"[\r\n]")
_DEC_RE = re.compile(r"[0-9](?:_?[0-9])*")
_PREFIXED_RE = re.compile(r"0(?:[xX](?:_?[0-9a-fA-F])+|[oO](?:_?[0-7])+|[bB](?:_?[01])+)")
_FLOAT_RE = re.compile(r"(?:[0-9](?:_?[0-9])*)?(?:\.(?:[0-9](?:_?[0-9])*)?)?(?:[eE][-+]?[0-9](?:_?[0-9])*)?")

# a token: (kind, value, line, indent). kind is "name", "num", "str", "nl" (the end of a logical line), "eof", or for an
# operator the operator itself ("(", "+", "**", ...); value is the name, the number, the string, the operator; indent
# is the leading whitespace of the line for the first token of a logical line, else None
_Tok = tuple[str, Any, int, "str | None"]

class _Lexer:
  """The tokens of `text`, one at a time, with their line. Newlines inside brackets do not end a statement. Every
  limit on a single token (characters of a name, number or string) and on bracket nesting is checked here, before
  anything is built from it."""
  def __init__(self, text: str):
    self.text, self.pos, self.line = text, 0, 1
    self.brackets: list[tuple[str, int]] = []
    self.line_start = True  # at the start of a logical line (the next token carries its indentation)

  def err(self, construct: str, why: str, line: int | None = None) -> PyrenderSyntaxError:
    return PyrenderSyntaxError(self.line if line is None else line, construct, why)

  def read(self) -> _Tok:
    text = self.text
    while True:
      m = _TOKEN_RE.match(text, self.pos)
      if m is None: self._bad_char()
      kind, self.pos = m.lastgroup, m.end()
      if kind == "op":
        op, indent = m.group("op"), self._indent(m.start("op"))
        if op in _OPEN:
          self.brackets.append((op, self.line))
          if len(self.brackets) > MAX_DEPTH: raise self.err("expression", f"is nested deeper than {MAX_DEPTH}")
        elif op in _CLOSE:
          if not self.brackets or self.brackets[-1][0] != _CLOSE[op]:
            raise self.err("syntax error", f"unmatched {op!r}")
          self.brackets.pop()
        return (op, op, self.line, indent)
      if kind == "name":
        start = m.start("name")
        if self.pos - start > MAX_TOKEN: raise self.err("name", f"is longer than {MAX_TOKEN} characters")
        return ("name", m.group("name"), self.line, self._indent(start))
      if kind == "num":
        start = m.start("num")
        if self.pos - start > MAX_TOKEN:
          raise self.err("int literal", f"is larger than 2**128 ({self.pos - start} digits)")
        return ("num", self._number(m.group("num")), self.line, self._indent(start))
      if kind == "nl":
        self.line += 1
        # NOTE: a newline inside brackets, or ending a blank or comment line, is not the end of a statement
        if self.brackets or self.line_start: continue
        self.line_start = True
        return ("nl", None, self.line - 1, None)
      if kind == "str":
        line, indent = self.line, self._indent(m.start("str"))
        # NOTE: the length is checked before the token is copied out of the text
        if self.pos - m.start("str") > _MAX_STR_SOURCE:
          raise self.err("string literal", f"is longer than {MAX_STR} characters", line)
        return ("str", self._string(m.group("str"), line), line, indent)
      if kind == "skip":
        if m.group("skip")[0] == "\\": self.line += 1
        continue
      # the end of the text: close the last logical line first
      if self.brackets:
        raise self.err("syntax error", f"{self.brackets[-1][0]!r} was never closed", self.brackets[-1][1])
      if not self.line_start:
        self.line_start = True
        return ("nl", None, self.line, None)
      return ("eof", None, self.line, None)

  def _indent(self, start: int) -> str | None:
    if not self.line_start: return None
    self.line_start = False
    text = self.text
    return text[max(text.rfind("\n", 0, start), text.rfind("\r", 0, start)) + 1:start]

  def _bad_char(self) -> NoReturn:
    at = self.pos
    while self.text[at] in " \t\f": at += 1
    c = self.text[at]
    if c in "'\"": raise self.err("syntax error", "unterminated string literal")
    raise self.err("syntax error", f"invalid character {c!r}")

  def _string(self, tok: str, line: int) -> str:
    self.line += tok.count("\n") + tok.count("\r") - tok.count("\r\n")
    q = min(i for i in (tok.find("'"), tok.find('"')) if i >= 0)
    prefix, body = tok[:q].lower(), tok[q:]
    if "b" in prefix: raise self.err("bytes literal", "is not allowed", line)
    if "f" in prefix: raise self.err("f-string", "is not allowed", line)
    if prefix not in ("", "r", "u"): raise self.err("syntax error", f"invalid string prefix {tok[:q]!r}", line)
    inner = body[3:-3] if body[:3] in ("'''", '"""') and len(body) >= 6 else body[1:-1]
    if prefix == "r": value = inner
    else:
      # NOTE: Python's escapes, decoded by the codec that implements them (no code is compiled)
      try: value = codecs.decode(inner.encode("latin-1", "backslashreplace"), "unicode_escape")
      except UnicodeDecodeError as e: raise self.err("string literal", f"has a bad escape: {e.reason}", line) from None
    if len(value) > MAX_STR: raise self.err("string literal", f"is longer than {MAX_STR} characters", line)
    return value

  def _number(self, t: str) -> int | float:
    if len(t) > MAX_TOKEN: raise self.err("int literal", f"is larger than 2**128 ({len(t)} digits)")
    if t[-1] in "jJ": raise self.err("complex literal", "is not allowed")
    if _DEC_RE.fullmatch(t):
      if t[0] == "0" and t.strip("0_"): raise self.err("syntax error", "leading zeros in a decimal int literal")
      return int(t)
    if _PREFIXED_RE.fullmatch(t): return int(t, 0)
    if _FLOAT_RE.fullmatch(t) and any(c.isdigit() for c in t): return float(t.replace("_", ""))
    raise self.err("syntax error", f"invalid number literal {t[:40]!r}")

  def rest_of_line(self) -> tuple[str, int] | None:
    """At the start of a logical line: the physical line's text and where it ends; None where tokens must be read
    (inside a logical line or brackets)."""
    if not self.line_start or self.brackets: return None
    e = m.start() if (m := _EOL_RE.search(self.text, self.pos)) is not None else len(self.text)
    return self.text[self.pos:e], e

  def skip_line(self, end: int) -> None:
    """Past the physical line ending at `end` (read whole by a pattern) and its newline."""
    self.pos = end + (2 if self.text.startswith("\r\n", end) else 1 if end < len(self.text) else 0)
    self.line += 1

# ---- the reader ----

class _Name:
  """A plain name just read, before it is used: as a value, a call's callee or the base of an attribute."""
  __slots__ = ("id", "line")
  def __init__(self, id: str, line: int): self.id, self.line = id, line

# tokens that may follow an operand within an expression (a binary operator, or what errors name)
_AFTER_OPERAND = frozenset({*_PREC, *_OTHER_BINOPS, *_COMPARISONS, ":=", "name"})

class _Reader:
  """Reads statements from the lexer and builds each construct as soon as it is read. `t` is the next token (one token
  of look-ahead; a keyword argument `k=` is told from an expression starting with a name after reading the name)."""
  def __init__(self, text: str, scope: dict[str, Any], max_nodes: int):
    self.lex = _Lexer(text)
    # NOTE: `scope` is the names of the block being read: the top level's, or a def's while its body is read
    self.top, self.scope, self.max_nodes, self.nodes = scope, scope, max_nodes, 0
    self.funcs: dict[str, UOp] = {}
    # NOTE: the patterns read names as the reader does only where the env shadows none of the names they use
    self.fast = not any(n in scope for n in ("UOp", "dtypes", "Ops", "AxisType")) and \
      ARG_CLASSES.get("Ops") is Ops and ARG_CLASSES.get("AxisType") is AxisType
    self.t: _Tok | None = None

  def err(self, line: int, construct: str, why: str) -> PyrenderSyntaxError:
    return PyrenderSyntaxError(line, construct, why)

  def count(self, line: int) -> None:
    self.nodes += 1
    if self.nodes > self.max_nodes: raise self.err(line, "text", f"builds more than {self.max_nodes} nodes")

  def peek(self) -> _Tok:
    if self.t is None: self.t = self.lex.read()
    return self.t

  def next(self) -> _Tok:
    t = self.t if self.t is not None else self.lex.read()
    self.t = None
    return t

  def expect(self, kind: str, what: str) -> _Tok:
    t = self.next()
    if t[0] != kind: raise self.err(t[2], "syntax error", f"expected {kind!r} {what}, got {_show(t)}")
    return t

  def end_of_statement(self) -> None:
    t = self.next()
    if t[0] in ("nl", "eof", ";"): return
    if t[0] == "=": raise self.err(t[2], "assignment", "must have one plain name target")
    raise self.err(t[2], "syntax error", f"unexpected {_show(t)} after the statement")

  # ---- statements ----
  def run(self) -> Any:
    scope = self.top
    while True:
      if self.fast and self.t is None and "ast" not in scope and self.fast_line("", top=True): continue
      t = self.next()
      if t[0] in ("nl", ";"): continue
      if t[0] == "eof": break
      if t[3]: raise self.err(t[2], "syntax error", "unexpected indent")
      if "ast" in scope: raise self.err(t[2], "statement", "after `ast = ...` is not allowed")
      if t[:2] == ("name", "def"): self.define(t[2])
      elif t[0] == "@": raise self.err(t[2], "decorator", "is not allowed (kN functions have none)")
      else: self.statement(t, top=True, where="at the top level")
    if "ast" not in scope: raise PyrenderSyntaxError(0, "text", "never assigns `ast`")
    return scope["ast"]

  def statement(self, first: _Tok, top: bool, where: str) -> None:
    kind, text, line, _ = first
    if kind == "name" and text in _KEYWORD_STATEMENTS:
      raise self.err(line, _KEYWORD_STATEMENTS[text], f"is not allowed {where}")
    if kind != "name" or text in _KEYWORDS or self.peek()[0] != "=":
      if (what := self.classify(first)) == "assignment": raise self.err(line, what, "must have one plain name target")
      raise self.err(line, what, f"is not allowed {where}")
    self.next()
    what = f"assignment to {text!r}"
    if not _NAME_RE.fullmatch(text): raise self.err(line, what, "is not allowed (only cN and ast)")
    if text in self.scope: raise self.err(line, what, "rebinds a name that is already defined")
    if text == "ast" and top and self.peek()[0] == "[":
      self.next()
      self.scope["ast"] = self.program_list(line)
    else:
      val = self.expr(0)
      if not isinstance(val, UOp): raise self.err(line, what, f"must bind a UOp, not {type(val).__name__}")
      self.scope[text] = val
    self.end_of_statement()

  def classify(self, first: _Tok) -> str:
    """What the statement starting with `first` is, by its tokens up to its end (nothing is evaluated)."""
    depth, t = 0, first
    while t[0] not in ("nl", "eof"):
      k = t[0]
      if k in _OPEN: depth += 1
      elif k in _CLOSE: depth -= 1
      elif depth == 0 and k == "=": return "assignment"
      elif depth == 0 and k == ":": return "annotated assignment"
      elif depth == 0 and len(k) > 1 and k[-1] == "=" and k not in ("==", "!=", "<=", ">=", ":="):
        return "augmented assignment"
      t = self.next()
    return "expression statement"

  def program_list(self, line: int) -> list[UOp]:
    vals: list[UOp] = []
    while self.peek()[0] != "]":
      v = self.expr(1)
      if self.peek()[:2] == ("name", "for"): raise self.err(line, "list comprehension", "is not allowed")
      if not isinstance(v, UOp): raise self.err(line, "list", "must hold UOps only")
      vals.append(v)
      if len(vals) > MAX_ELEMS: raise self.err(line, "list", f"has more than {MAX_ELEMS} elements")
      if self.peek()[0] != ",": break
      self.next()
    self.expect("]", "to close the list")
    return vals

  def define(self, line: int) -> None:
    t = self.next()
    name = t[1] if t[0] == "name" else "?"
    if not _FUNC_RE.fullmatch(name): raise self.err(line, f"def {name}", "is not allowed (only kN)")
    self.expect("(", f"after def {name}")
    if self.next()[0] != ")": raise self.err(line, f"def {name}", "must take no arguments")
    if self.peek()[0] == "->": raise self.err(line, f"def {name}", "must have no decorators or annotations")
    self.expect(":", f"after def {name}()")
    if name in self.funcs: raise self.err(line, f"def {name}", "is defined twice")
    if self.next()[0] != "nl": raise self.err(line, f"def {name}", "must have its body on the lines below it")
    self.scope = {}
    try: self.funcs[name] = self.body(name)
    finally: self.scope = self.top

  def body(self, name: str) -> UOp:
    """The statements of def `name` up to its `return ast`; what it returns."""
    indent = ""  # the body's indentation, set by its first line
    while True:
      if indent and self.fast and self.t is None and self.fast_line(indent, top=False): continue
      t = self.next()
      if t[0] in ("nl", ";"): continue
      if t[0] == "eof" or t[3] == "": break
      if t[3] is not None:
        if not indent: indent = t[3]
        elif t[3] != indent: raise self.err(t[2], "syntax error", "unexpected indent or unindent")
      if t[:2] == ("name", "return"):
        if self.next()[:2] != ("name", "ast"): raise self.err(t[2], f"def {name}", "must end in `return ast`")
        self.end_of_statement()
        if (after := self.peek())[0] != "eof" and after[3] != "":
          raise self.err(after[2], "statement", f"after `return ast` is not allowed inside def {name}")
        if "ast" not in self.scope: raise self.err(t[2], f"def {name}", "returns `ast` but never assigns it")
        ret: UOp = self.scope["ast"]
        return ret
      if t[:2] == ("name", "def"): raise self.err(t[2], "nested def", f"is not allowed inside def {name}")
      self.statement(t, top=False, where=f"inside def {name}")
    raise self.err(self.lex.line, f"def {name}", "must end in `return ast`")

  # ---- expressions ----
  def expr(self, depth: int, first: _Tok | None = None) -> Any:
    """Binary operators by precedence, all left-associative, on a stack (no recursion per operator). `first`: the
    expression's first token when the caller has read it already."""
    if depth > MAX_DEPTH: raise self.err(self.peek()[2], "expression", f"is nested deeper than {MAX_DEPTH}")
    v = self.operand(depth, first)
    if self.peek()[0] not in _AFTER_OPERAND: return v
    vals: list[Any] = [v]
    ops: list[tuple[str, int]] = []
    compares = 0
    while (t := self.peek())[0] in _AFTER_OPERAND:
      op, line = t[0], t[2]
      if op == "name":
        if t[1] in ("in", "is", "not"): raise self.err(line, "comparison", "other than one `<` is not allowed")
        if t[1] in ("if", "else"): raise self.err(line, "conditional expression", "is not allowed")
        if t[1] in ("and", "or"): raise self.err(line, "and/or", "is not allowed")
        break
      if op in _COMPARISONS: raise self.err(line, "comparison", "other than one `<` is not allowed")
      if op in _OTHER_BINOPS: raise self.err(line, f"operator {_OTHER_BINOPS[op]}", "is not allowed")
      if op == ":=": raise self.err(line, "walrus (:=)", "is not allowed")
      if op == "<" and (compares := compares + 1) > 1:
        raise self.err(line, "comparison", "other than one `<` is not allowed")
      self.next()
      if (depth := depth + 1) > MAX_DEPTH: raise self.err(line, "expression", f"is nested deeper than {MAX_DEPTH}")
      while ops and _PREC[ops[-1][0]] >= _PREC[op]: self.reduce(vals, ops)
      ops.append((op, line))
      vals.append(self.operand(depth, None))
    while ops: self.reduce(vals, ops)
    return vals[0]

  def reduce(self, vals: list[Any], ops: list[tuple[str, int]]) -> None:
    op, line = ops.pop()
    b, a = vals.pop(), vals.pop()
    if not (isinstance(a, UOp) and isinstance(b, UOp)):
      raise self.err(line, "operator", f"is only allowed between UOps, not {type(a).__name__} and {type(b).__name__}")
    self.count(line)
    vals.append(self.build_uop(line, "operator", lambda: _BINOPS[op](a, b)))

  def operand(self, depth: int, first: _Tok | None) -> Any:
    """A primary, after any number of unary minuses (on numbers only)."""
    t = first if first is not None else self.next()
    negs, line = 0, t[2]
    while t[0] == "-":
      if depth + (negs := negs + 1) > MAX_DEPTH:
        raise self.err(line, "expression", f"is nested deeper than {MAX_DEPTH}")
      t = self.next()
    if t[0] in ("+", "~"): raise self.err(line, f"unary {'UAdd' if t[0] == '+' else 'Invert'}", "is not allowed")
    v = self.primary(depth + negs, t)
    if (p := self.peek())[0] == "**": raise self.err(p[2], "operator Pow", "is not allowed")
    if negs:
      if type(v) not in (int, float):
        raise self.err(line, "unary minus", f"only applies to numbers, not {type(v).__name__}")
      for _ in range(negs): v = -v
    return v

  def primary(self, depth: int, t: _Tok) -> Any:
    kind, val, line, _ = t
    cur: Any
    if kind == "num":
      if type(val) is int and abs(val) > MAX_INT:
        raise self.err(line, "int literal", f"is larger than 2**128 ({len(str(val))} digits)")
      cur = val
    elif kind == "name":
      if val not in _KEYWORDS: cur = _Name(val, line)
      elif val in _CONSTANTS: cur = _CONSTANTS[val]
      elif val in _KEYWORD_OPERANDS: raise self.err(line, _KEYWORD_OPERANDS[val], "is not allowed")
      else: raise self.err(line, "syntax error", f"unexpected keyword {val!r}")
    elif kind == "str":
      cur = val
      while self.peek()[0] == "str":
        cur += self.next()[1]
        if len(cur) > MAX_STR: raise self.err(line, "string literal", f"is longer than {MAX_STR} characters")
    elif kind == "(": cur = self.paren(depth, line)
    elif kind == "[":
      raise self.err(line, "list literal or comprehension", "is not allowed (only `ast = [cA, ...]` at the top level)")
    elif kind == "{": raise self.err(line, "dict or set literal or comprehension", "is not allowed")
    elif kind == "*": raise self.err(line, "starred expression", "is not allowed")
    else: raise self.err(line, "syntax error", f"unexpected {_show(t)}")
    if isinstance(cur, _Name) and self.peek()[0] == ":=": raise self.err(line, "walrus (:=)", "is not allowed")
    while (k := self.peek()[0]) in (".", "(", "["): cur = self.trailer(k, cur, depth)
    if isinstance(cur, _Name):
      v = self.name(cur)
      if isinstance(v, (_Namespace, type)):
        raise self.err(cur.line, f"name {cur.id!r}", f"is not a value: use {cur.id}.<member> or {cur.id}(...)")
      return v
    return cur

  def trailer(self, k: str, cur: Any, depth: int) -> Any:
    """`cur` followed by `.attr`, `.method(...)`, `(...)` or `[...]`."""
    line = self.next()[2]
    if k == "[": raise self.err(line, "subscript", "is not allowed")
    if k == "(":
      if not isinstance(cur, _Name): raise self.err(line, "call of an expression", "is not allowed")
      return self.call_name(cur, depth)
    a = self.next()
    if a[0] != "name" or a[1] in _KEYWORDS:
      raise self.err(a[2], "syntax error", f"expected a name after '.', got {_show(a)}")
    attr = a[1]
    if self.peek()[0] == "(":
      if attr.startswith("_"): raise self.err(a[2], f"method .{attr}", "is not allowed (underscore/dunder attributes)")
      recv = self.name(cur) if isinstance(cur, _Name) else cur
      self.next()
      return self.method(a[2], recv, attr, depth)
    if attr.startswith("_"): raise self.err(a[2], f"attribute .{attr}", "is not allowed (underscore/dunder attributes)")
    if not isinstance(cur, _Name):
      raise self.err(a[2], f"attribute .{attr}", "is only allowed on a plain name (no attribute chains)")
    return self.attribute(cur, attr)

  def paren(self, depth: int, line: int) -> Any:
    if self.peek()[0] == ")":
      self.next()
      return ()
    first = self.element(depth + 1)
    if self.peek()[0] == ")":
      self.next()
      return first
    elems = [first]
    while self.peek()[0] == ",":
      self.next()
      if self.peek()[0] == ")": break
      elems.append(self.element(depth + 1))
      if len(elems) > MAX_ELEMS: raise self.err(line, "tuple", f"has more than {MAX_ELEMS} elements")
    self.expect(")", "to close the tuple")
    return tuple(elems)

  def element(self, depth: int, first: _Tok | None = None) -> Any:
    """One element of a tuple or call. NOTE: most are one number or one name: read those without the expression
    machinery (the same checks, fewer calls)."""
    t = first if first is not None else self.next()
    if self.peek()[0] in (",", ")"):
      if t[0] == "num" and not (type(t[1]) is int and abs(t[1]) > MAX_INT): return t[1]
      if t[0] == "name" and t[1] not in _KEYWORDS and t[1] in self.scope: return self.scope[t[1]]
    v = self.expr(depth, t)
    if (t := self.peek())[:2] == ("name", "for"): raise self.err(t[2], "generator expression", "is not allowed")
    return v

  def name(self, ref: _Name) -> Any:
    n, scope = ref.id, self.scope
    if n in scope: return scope[n]
    if n == "UOp": return _UOP
    if n == "dtypes": return _DTYPES
    if n == "Invalid": return Invalid
    if n == "float": return _FLOAT
    if (cls := ARG_CLASSES.get(n)) is not None: return cls
    if n in self.funcs: raise self.err(ref.line, f"kernel function {n}", f"must be called: write it as {n}()")
    if n.startswith("_"): raise self.err(ref.line, f"name {n!r}", "is not allowed (underscore names)")
    raise self.err(ref.line, f"name {n!r}", "is not defined (yet): names must be assigned before they are used")

  def attribute(self, ref: _Name, attr: str) -> Any:
    base = self.name(ref)
    if base is _DTYPES:
      if (dt := DTYPES_DICT.get(attr)) is None: raise self.err(ref.line, f"dtypes.{attr}", "is not a dtype")
      return dt
    if isinstance(base, type) and issubclass(base, enum.Enum):
      if attr not in base.__members__: raise self.err(ref.line, f"{base.__name__}.{attr}", "is not a member")
      return base.__members__[attr]
    raise self.err(ref.line, f"attribute .{attr} of {ref.id}", "is only allowed as a whitelisted method call")

  def method(self, line: int, recv: Any, attr: str, depth: int) -> Any:
    if recv is _DTYPES and attr == "float_from_bits":
      args, _ = self.arguments(line, depth, (), "dtypes.float_from_bits")
      if len(args) != 1 or type(args[0]) is not int or not 0 <= args[0] < 2**64:
        raise self.err(line, "dtypes.float_from_bits(...)", "takes one int in [0, 2**64)")
      return dtypes.float_from_bits(args[0])
    if recv is _UOP:
      if attr not in _STATIC: raise self.err(line, f"UOp.{attr}", "is not a whitelisted constructor")
      args, kw = self.arguments(line, depth, _STATIC[attr], f"UOp.{attr}")
      self.check_literals(line, attr, args, kw)
      self.count(line)
      return self.build_uop(line, f"UOp.{attr}", lambda: getattr(UOp, attr)(*args, **kw))
    if isinstance(recv, UOp):
      if attr not in _METHODS: raise self.err(line, f"method .{attr}", "is not a whitelisted UOp method")
      args, kw = self.arguments(line, depth, _METHODS[attr], f".{attr}")
      if attr in ("cast", "bitcast") and not (len(args) == 1 and isinstance(args[0], DType)):
        raise self.err(line, f".{attr}", "takes one dtype")
      self.count(line)
      return self.build_uop(line, f".{attr}", lambda: getattr(recv, attr)(*args, **kw))
    if isinstance(recv, DType):
      if attr not in ("vec", "ptr"): raise self.err(line, f"dtype method .{attr}", "is not allowed (only vec, ptr)")
      args, kw = self.arguments(line, depth, (), f".{attr}")
      if not all(type(a) is int or isinstance(a, AddrSpace) for a in args):
        raise self.err(line, f".{attr}", "takes ints and AddrSpace only")
      return self.build(line, f".{attr}", lambda: getattr(recv, attr)(*args))
    owner = recv.name if isinstance(recv, _Namespace) else getattr(recv, "__name__", type(recv).__name__)
    raise self.err(line, f"method .{attr} of {owner}", "is not allowed")

  def call_name(self, ref: _Name, depth: int) -> Any:
    n, line = ref.id, ref.line
    if _FUNC_RE.fullmatch(n) and n in self.funcs:
      self.expect(")", f"after {n}(: a kernel function takes no arguments")
      return self.funcs[n]
    if _FUNC_RE.fullmatch(n): raise self.err(line, f"kernel function {n}", "is not defined (yet)")
    if n not in ("UOp", "float") and n not in ARG_CLASSES:
      raise self.err(line, f"call of {n}", "is not allowed (only UOp, float, kN and registered arg classes)")
    fn = self.name(ref)
    if fn is _FLOAT:
      args, _ = self.arguments(line, depth, (), "float")
      if len(args) != 1 or not isinstance(args[0], str) or args[0] not in _FLOATS:
        raise self.err(line, "float(...)", "only takes 'nan', 'inf' or '-inf'")
      return _FLOATS[args[0]]
    if fn is _UOP:
      args, kw = self.arguments(line, depth, _UOP_KWARGS, "UOp")
      return self.generic_uop(line, args, kw)
    if isinstance(fn, type) and dataclasses.is_dataclass(fn) and ARG_CLASSES.get(n) is fn:
      fields = tuple(x.name for x in dataclasses.fields(fn) if x.init)
      args, kw = self.arguments(line, depth, fields, n)
      if args: raise self.err(line, n, "takes keyword arguments only")
      return self.build(line, n, lambda: fn(**kw))
    raise self.err(line, f"call of {n}", "is not allowed")

  def arguments(self, line: int, depth: int, kwnames: tuple[str, ...], what: str) -> tuple[list[Any], dict[str, Any]]:
    """The arguments of a call whose `(` was read, up to its `)`."""
    args: list[Any] = []
    kw: dict[str, Any] = {}
    while (t := self.peek())[0] != ")":
      if t[0] == "**": raise self.err(t[2], f"{what}(**...)", "is not allowed")
      first = self.next() if t[0] == "name" and t[1] not in _KEYWORDS else None
      if first is not None and self.peek()[0] == "=":
        self.next()
        if (k := t[1]) not in kwnames:
          raise self.err(t[2], f"keyword {k}= of {what}", f"is not allowed (allowed: {', '.join(kwnames) or 'none'})")
        if k in kw: raise self.err(t[2], "syntax error", f"keyword argument {k}= repeated")
        kw[k] = self.element(depth + 1)
        if k == "dtype" and not isinstance(kw[k], DType): raise self.err(t[2], f"{what}(dtype=)", "needs a dtype")
      else:
        if kw: raise self.err(t[2], "syntax error", "positional argument follows keyword argument")
        args.append(self.element(depth + 1, first))
      if len(args) + len(kw) > MAX_ELEMS: raise self.err(line, what, f"has over {MAX_ELEMS} arguments")
      if self.peek()[0] != ",": break
      self.next()
    self.expect(")", f"to close the arguments of {what}")
    return args, kw

  def check_literals(self, line: int, attr: str, args: list[Any], kw: dict[str, Any]) -> None:
    """A const's value, and a variable's bounds, must be ones their dtype holds (the constructor would wrap them)."""
    if attr == "const" and len(args) == 2 and isinstance(args[0], DType) and not kw:
      if (why := _why_not_held(args[0], args[1])) is not None:
        raise self.err(line, "UOp.const(...)", f"a {args[0]} const cannot hold {_short(args[1])}: {why}")
    if attr == "variable" and len(args) == 3 and isinstance(dt := kw.get("dtype", dtypes.index), DType):
      for b in args[1:]:
        if (why := _why_not_held(dt, b)) is not None:
          raise self.err(line, "UOp.variable(...)", f"a {dt} variable cannot hold the bound {_short(b)}: {why}")

  def generic_uop(self, line: int, args: list[Any], kw: dict[str, Any]) -> UOp:
    if not 1 <= len(args) <= 4: raise self.err(line, "UOp(...)", "takes op and at most dtype, src, arg positionally")
    vals = dict(zip(("op", "dtype", "src", "arg"), args))
    for k, v in kw.items():
      if k in vals: raise self.err(line, "UOp(...)", f"got {k} twice")
      vals[k] = v
    op, dtype, src = vals["op"], vals.get("dtype"), vals.get("src", ())
    if not isinstance(op, Ops): raise self.err(line, "UOp(...)", f"needs an Ops member first, not {type(op).__name__}")
    if dtype is not None and not isinstance(dtype, DType):
      raise self.err(line, "UOp(...)", f"dtype must be a dtype, not {type(dtype).__name__}")
    if not (isinstance(src, tuple) and all(isinstance(s, UOp) for s in src)):
      raise self.err(line, "UOp(...)", "src must be a tuple of UOps")
    if op in (Ops.CONST, Ops.VCONST) and dtype is not None and (why := _why_not_held(dtype, vals.get("arg"))):
      raise self.err(line, "UOp(...)", f"a {dtype} {op.name} cannot hold {_short(vals.get('arg'))}: {why}")
    self.count(line)
    return self.build_uop(line, "UOp(...)", lambda: UOp(op, **{k: v for k, v in vals.items() if k != "op"}))

  def build(self, line: int, what: str, fn: Callable[[], Any]) -> Any:
    try: return fn()
    except _BUILD_ERRORS as e: raise self.err(line, what, f"failed: {type(e).__name__}: {e}") from e

  def build_uop(self, line: int, what: str, fn: Callable[[], Any]) -> UOp:
    if not isinstance(ret := self.build(line, what, fn), UOp): raise self.err(line, what, "did not build a UOp")
    # NOTE: a constructor such as UOp.group(1) takes any source; a node is a graph only if each source is a node
    if (bad := next((s for s in ret.src if not isinstance(s, UOp)), None)) is not None:
      raise self.err(line, what, f"has a source that is not a UOp: {type(bad).__name__}")
    return ret

  # ---- the common lines, read whole by a pattern ----
  def fast_line(self, indent: str, top: bool) -> bool:
    """Read the next line whole if it is one of the patterns and builds exactly what the reader would (True); else read
    nothing (False). A line that steps aside may leave nodes built: hash-consed, the reader builds the same again."""
    got = self.lex.rest_of_line()
    if got is None: return False
    line, end = got
    if len(line) > _FAST_LINE or not line.startswith(indent) or line[len(indent):len(indent) + 1] in (" ", "\t", ""):
      return False
    body = line[len(indent):]
    for k, pat in enumerate(_LINE_PATTERNS):
      if (m := pat.fullmatch(body)) is not None: break
    else: return False
    # NOTE: any error steps aside: the reader reads the line again and names the error
    try:
      if not _fast_build(k, m, self.scope, top): return False
    except Exception: return False
    self.count(self.lex.line)
    self.lex.skip_line(end)
    return True

_CONSTANTS: dict[str, Any] = {"True": True, "False": False, "None": None}

def _show(t: _Tok) -> str:
  if t[0] in ("nl", "eof"): return "the end of the line" if t[0] == "nl" else "the end of the text"
  return repr(t[1]) if t[0] != "str" else "a string"

def _short(v: Any) -> str:
  try: s = repr(v)
  except Exception as e: s = f"<{type(v).__name__}, unprintable: {type(e).__name__}>"
  return s if len(s) <= 60 else s[:57] + "..."

# NOTE: each pattern is one whole line exactly as pyrender prints it, and takes only what the reader would take from
# that line (names c0.., a whitelisted method, dtypes.NAME, a decimal literal without leading zeros)
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
  """A line the patterns do not read as the reader would: the reader reads it (and names any error)."""

def _built(x: Any) -> UOp:
  if not isinstance(x, UOp): raise _StepAside
  return x

def _fast_build(k: int, m: re.Match[str], scope: dict[str, Any], top: bool) -> bool:
  if k == 4:
    if not top: return False
    vals = [scope.get(n) for n in m.group(1).split(", ")] if m.group(1) else []
    if len(vals) > MAX_ELEMS or not all(isinstance(v, UOp) for v in vals): return False
    scope["ast"] = vals
    return True
  tgt = m.group(1)
  if tgt in scope: return False
  if k == 0:
    recv, attr = scope.get(m.group(2)), m.group(3)
    if attr not in _METHODS or attr in ("cast", "bitcast") or not isinstance(recv, UOp): return False
    args = [_built(scope.get(n)) for n in m.group(4).split(", ")] if m.group(4) else []
    scope[tgt] = _built(getattr(recv, attr)(*args))
  elif k == 1:
    a, b = _built(scope.get(m.group(2))), _built(scope.get(m.group(4)))
    scope[tgt] = _built(_LINE_OPS[m.group(3)](a, b))
  elif k == 2:
    if (dt := DTYPES_DICT.get(m.group(2))) is None: return False
    lit = m.group(4)
    if len(lit) > MAX_TOKEN: return False
    v: int | float = float(lit) if "." in lit or "e" in lit else int(lit)
    if m.group(3): v = -v
    if _why_not_held(dt, v) is not None: return False
    scope[tgt] = _built(UOp.const(dt, v))
  elif k == 3:
    recv, dt = scope.get(m.group(2)), DTYPES_DICT.get(m.group(4))
    if dt is None or not isinstance(recv, UOp): return False
    scope[tgt] = _built(getattr(recv, m.group(3))(dt))
  elif k == 5:
    op, dt = Ops.__members__.get(m.group(2)), DTYPES_DICT.get(m.group(3))
    if op is None or dt is None or len(m.group(4)) > MAX_TOKEN or len(m.group(5)) > MAX_TOKEN: return False
    size, arg = int(m.group(4)), int(m.group(5))
    if size > MAX_INT or arg > MAX_INT or op in (Ops.CONST, Ops.VCONST): return False
    scope[tgt] = _built(UOp(op, dtype=dt.ptr(size), arg=arg))
  elif k == 6:
    e, axis = m.group(2), AxisType.__members__.get(m.group(4))
    if len(e) > MAX_TOKEN or len(m.group(3)) > MAX_TOKEN: return False
    rid = int(m.group(3))
    end: UOp | int = _built(scope.get(e)) if e[0] == "c" else int(e)
    rdt = None if m.group(5) is None else DTYPES_DICT.get(m.group(5))
    if axis is None or (m.group(5) is not None and rdt is None) or rid > MAX_INT or \
      (isinstance(end, int) and end > MAX_INT): return False
    scope[tgt] = _built(UOp.range(end, rid, axis) if rdt is None else UOp.range(end, rid, axis, dtype=rdt))
  else:
    args = [_built(scope.get(n)) for n in m.group(3).split(", ")] if m.group(3) else []
    scope[tgt] = _built(getattr(UOp, m.group(2))(*args))
  return True

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
  ret: UOp | list[UOp] = _Reader(text, scope, max_nodes).run()
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
