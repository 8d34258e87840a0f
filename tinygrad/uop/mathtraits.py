"""Python operators shared by UOp (builds nodes), UPat (builds patterns) and Tensor (builds tensor graphs), so rules
read like the math they match and the three spell every operator the same way.

Each operator calls a named method (`a + b` is `a.add(b)`, `b - a` is `a.sub(b, reverse=True)`), whose default here is
the IR's meaning, built with `alu`. A subclass overrides the named method where its semantics differ: Tensor promotes
and broadcasts in its `alu`, and gives `//`, `%`, `/` and `**` numpy's meaning."""
from __future__ import annotations
from typing import Any, TypeVar, cast
from tinygrad.uop import Ops, GroupOp

TMT = TypeVar("TMT", bound="MathTrait")

class MathTrait:
  __slots__ = ()
  # subclasses define how a node/pattern of an op is built and how a Python constant is lifted
  def alu(self: TMT, op: Ops, *src: Any) -> TMT: raise NotImplementedError
  def const_like(self: TMT, b: Any) -> TMT: raise NotImplementedError
  def ufix(self: TMT, x: Any) -> TMT: return cast(TMT, x) if isinstance(x, MathTrait) else self.const_like(x)
  def _binary(self: TMT, op: Ops, x: Any, reverse: bool = False) -> TMT:
    return self.ufix(x).alu(op, self) if reverse else self.alu(op, self.ufix(x))

  # ---- named ops: the IR's meaning ----
  def add(self: TMT, x: Any, reverse: bool = False) -> TMT: return self._binary(Ops.ADD, x, reverse)
  def mul(self: TMT, x: Any, reverse: bool = False) -> TMT: return self._binary(Ops.MUL, x, reverse)
  def neg(self: TMT) -> TMT: return self.mul(-1)
  def sub(self: TMT, x: Any, reverse: bool = False) -> TMT:
    return self.ufix(x).add(self.neg()) if reverse else self.add(self.ufix(x).neg())
  def div(self: TMT, x: Any, reverse: bool = False) -> TMT:
    return self.ufix(x).mul(self.reciprocal()) if reverse else self.mul(self.ufix(x).reciprocal())
  # NOTE: IDIV and MOD truncate toward zero as C does (not Python's floor semantics)
  def idiv(self: TMT, x: Any, reverse: bool = False) -> TMT: return self._binary(Ops.IDIV, x, reverse)
  def mod(self: TMT, x: Any, reverse: bool = False) -> TMT: return self._binary(Ops.MOD, x, reverse)
  def pow(self: TMT, x: Any, reverse: bool = False) -> TMT: return self._binary(Ops.POW, x, reverse)
  def bitwise_and(self: TMT, x: Any, reverse: bool = False) -> TMT: return self._binary(Ops.AND, x, reverse)
  def bitwise_or(self: TMT, x: Any, reverse: bool = False) -> TMT: return self._binary(Ops.OR, x, reverse)
  def bitwise_xor(self: TMT, x: Any, reverse: bool = False) -> TMT: return self._binary(Ops.XOR, x, reverse)
  def lshift(self: TMT, x: Any, reverse: bool = False) -> TMT: return self._binary(Ops.SHL, x, reverse)
  def rshift(self: TMT, x: Any, reverse: bool = False) -> TMT: return self._binary(Ops.SHR, x, reverse)
  def lt(self: TMT, x: Any) -> TMT: return self._binary(Ops.CMPLT, x)
  def gt(self: TMT, x: Any) -> TMT: return self._binary(Ops.CMPLT, x, True)
  def ge(self: TMT, x: Any) -> TMT: return self.lt(x).logical_not()
  def le(self: TMT, x: Any) -> TMT: return self.gt(x).logical_not()
  def ne(self: TMT, x: Any) -> TMT: return self._binary(Ops.CMPNE, x)
  def eq(self: TMT, x: Any) -> TMT: return self._binary(Ops.CMPEQ, x)
  def logical_not(self: TMT) -> TMT: return self.ne(True)
  def maximum(self: TMT, x: Any) -> TMT: return self._binary(Ops.MAX, x)
  def minimum(self: TMT, x: Any) -> TMT: return self.neg().maximum(self.ufix(x).neg()).neg()
  def where(self: TMT, x: Any, y: Any) -> TMT:
    xx = x if isinstance(x, MathTrait) else \
      self.ufix(y).const_like(x) if isinstance(y, MathTrait) else self.const_like(x)
    return self.alu(Ops.WHERE, xx, xx.ufix(y))
  def reciprocal(self: TMT) -> TMT: return self.alu(Ops.RECIPROCAL)
  def sqrt(self: TMT) -> TMT: return self.alu(Ops.SQRT)
  def exp2(self: TMT) -> TMT: return self.alu(Ops.EXP2)
  def log2(self: TMT) -> TMT: return self.alu(Ops.LOG2)
  def sin(self: TMT) -> TMT: return self.alu(Ops.SIN)
  def trunc(self: TMT) -> TMT: return self.alu(Ops.TRUNC)
  def threefry(self: TMT, seed: Any) -> TMT: return self.alu(Ops.THREEFRY, seed)

  # ---- Python operators: each is its named op ----
  def __add__(self: TMT, x: Any) -> TMT: return self.add(x)
  def __radd__(self: TMT, x: Any) -> TMT: return self.add(x, True)
  def __mul__(self: TMT, x: Any) -> TMT: return self.mul(x)
  def __rmul__(self: TMT, x: Any) -> TMT: return self.mul(x, True)
  def __sub__(self: TMT, x: Any) -> TMT: return self.sub(x)
  def __rsub__(self: TMT, x: Any) -> TMT: return self.sub(x, True)
  def __neg__(self: TMT) -> TMT: return self.neg()
  def __truediv__(self: TMT, x: Any) -> TMT: return self.div(x)
  def __rtruediv__(self: TMT, x: Any) -> TMT: return self.div(x, True)
  # NOTE: `//` is IDIV in the IR (C truncation); Tensor overrides these two with numpy's floor division
  def __floordiv__(self: TMT, x: Any) -> TMT: return self.idiv(x)
  def __rfloordiv__(self: TMT, x: Any) -> TMT: return self.idiv(x, True)
  def __mod__(self: TMT, x: Any) -> TMT: return self.mod(x)
  def __rmod__(self: TMT, x: Any) -> TMT: return self.mod(x, True)
  def __pow__(self: TMT, x: Any) -> TMT: return self.pow(x)
  def __rpow__(self: TMT, x: Any) -> TMT: return self.pow(x, True)
  def __and__(self: TMT, x: Any) -> TMT: return self.bitwise_and(x)
  def __rand__(self: TMT, x: Any) -> TMT: return self.bitwise_and(x, True)
  def __or__(self: TMT, x: Any) -> TMT: return self.bitwise_or(x)
  def __ror__(self: TMT, x: Any) -> TMT: return self.bitwise_or(x, True)
  def __xor__(self: TMT, x: Any) -> TMT: return self.bitwise_xor(x)
  def __rxor__(self: TMT, x: Any) -> TMT: return self.bitwise_xor(x, True)
  def __lshift__(self: TMT, x: Any) -> TMT: return self.lshift(x)
  def __rlshift__(self: TMT, x: Any) -> TMT: return self.lshift(x, True)
  def __rshift__(self: TMT, x: Any) -> TMT: return self.rshift(x)
  def __rrshift__(self: TMT, x: Any) -> TMT: return self.rshift(x, True)
  def __lt__(self: TMT, x: Any) -> TMT: return self.lt(x)
  def __gt__(self: TMT, x: Any) -> TMT: return self.gt(x)
  def __ge__(self: TMT, x: Any) -> TMT: return self.ge(x)
  def __le__(self: TMT, x: Any) -> TMT: return self.le(x)
  # NOTE: == and != keep Python identity semantics here (UOps are dict keys); use .eq() and .ne() to build comparisons.
  # Tensor, which is never a key by value, maps them to eq and ne.

COMMUTATIVE = GroupOp.Commutative
