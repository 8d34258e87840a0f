"""Python operators shared by UOp (builds nodes) and UPat (builds patterns), so rules read like the math they match."""
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
  def _binop(self: TMT, op: Ops, x: Any, reverse: bool) -> TMT:
    return self.ufix(x).alu(op, self) if reverse else self.alu(op, self.ufix(x))

  def __add__(self: TMT, x: Any) -> TMT: return self._binop(Ops.ADD, x, False)
  def __radd__(self: TMT, x: Any) -> TMT: return self._binop(Ops.ADD, x, True)
  def __mul__(self: TMT, x: Any) -> TMT: return self._binop(Ops.MUL, x, False)
  def __rmul__(self: TMT, x: Any) -> TMT: return self._binop(Ops.MUL, x, True)
  def __neg__(self: TMT) -> TMT: return self * -1
  def __sub__(self: TMT, x: Any) -> TMT: return self + (-self.ufix(x))
  def __rsub__(self: TMT, x: Any) -> TMT: return self.ufix(x) + (-self)
  # NOTE: `//` and `%` build IDIV and MOD, which truncate toward zero as C does (not Python's floor semantics)
  def __floordiv__(self: TMT, x: Any) -> TMT: return self._binop(Ops.IDIV, x, False)
  def __rfloordiv__(self: TMT, x: Any) -> TMT: return self._binop(Ops.IDIV, x, True)
  def __mod__(self: TMT, x: Any) -> TMT: return self._binop(Ops.MOD, x, False)
  def __rmod__(self: TMT, x: Any) -> TMT: return self._binop(Ops.MOD, x, True)
  def __truediv__(self: TMT, x: Any) -> TMT: return self * self.ufix(x).reciprocal()
  def __rtruediv__(self: TMT, x: Any) -> TMT: return self.ufix(x) * self.reciprocal()
  def __and__(self: TMT, x: Any) -> TMT: return self._binop(Ops.AND, x, False)
  def __rand__(self: TMT, x: Any) -> TMT: return self._binop(Ops.AND, x, True)
  def __or__(self: TMT, x: Any) -> TMT: return self._binop(Ops.OR, x, False)
  def __ror__(self: TMT, x: Any) -> TMT: return self._binop(Ops.OR, x, True)
  def __xor__(self: TMT, x: Any) -> TMT: return self._binop(Ops.XOR, x, False)
  def __rxor__(self: TMT, x: Any) -> TMT: return self._binop(Ops.XOR, x, True)
  def __lshift__(self: TMT, x: Any) -> TMT: return self._binop(Ops.SHL, x, False)
  def __rshift__(self: TMT, x: Any) -> TMT: return self._binop(Ops.SHR, x, False)
  def __lt__(self: TMT, x: Any) -> TMT: return self._binop(Ops.CMPLT, x, False)
  def __gt__(self: TMT, x: Any) -> TMT: return self._binop(Ops.CMPLT, x, True)
  def __ge__(self: TMT, x: Any) -> TMT: return (self < x).logical_not()
  def __le__(self: TMT, x: Any) -> TMT: return (self > x).logical_not()
  # NOTE: == and != keep Python identity semantics (UOps are dict keys); use .eq() and .ne() to build comparisons
  def ne(self: TMT, x: Any) -> TMT: return self._binop(Ops.CMPNE, x, False)
  def eq(self: TMT, x: Any) -> TMT: return self._binop(Ops.CMPEQ, x, False)
  def logical_not(self: TMT) -> TMT: return self.ne(True)
  def maximum(self: TMT, x: Any) -> TMT: return self._binop(Ops.MAX, x, False)
  def minimum(self: TMT, x: Any) -> TMT: return -(-self).maximum(-self.ufix(x))
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

COMMUTATIVE = GroupOp.Commutative
