"""The op list, once. Grouped by the stage that introduces each op;
enum order is also the linearizer's tie-break order."""
from __future__ import annotations
from enum import Enum, auto

class FastEnum(Enum):
  # NOTE: identity hash and ordering by value make Ops cheap as dict keys in the pattern matcher's index
  def __lt__(self, x: FastEnum) -> bool: return self._value_ < x._value_
  def __hash__(self) -> int: return self._value_
  def __repr__(self) -> str: return f"{type(self).__name__}.{self.name}"
  @staticmethod
  def _generate_next_value_(_name: str, _start: int, count: int, _last_values: list[int]) -> int: return count

class Ops(FastEnum):
  # ---- graph structure (every stage) ----
  SINK = auto(); GROUP = auto(); AFTER = auto()
  # ---- tensor graph: buffers and devices (LUNIQUE: a buffer's name local to one scheduled graph) ----
  UNIQUE = auto(); LUNIQUE = auto(); DEVICE = auto(); BUFFER = auto(); BUFFER_VIEW = auto()
  # ---- tensor graph: movement ----
  RESHAPE = auto(); PERMUTE = auto(); EXPAND = auto(); PAD = auto(); SHRINK = auto(); FLIP = auto()
  # ---- tensor graph: other ----
  CONTIGUOUS = auto(); DETACH = auto(); COPY = auto(); ASSIGN = auto(); REDUCE_AXIS = auto(); KERNEL = auto()
  BUFFERIZE = auto()
  # ---- tensor graph: one tensor on several devices (tinygrad/schedule/multi.py) ----
  MULTI = auto()
  # ---- kernel / program: definitions ----
  DEFINE_GLOBAL = auto(); DEFINE_LOCAL = auto(); DEFINE_REG = auto(); DEFINE_VAR = auto(); BIND = auto()
  SPECIAL = auto()
  # ---- kernel / program: loops and memory ----
  RANGE = auto(); END = auto(); REDUCE = auto(); INDEX = auto(); LOAD = auto(); STORE = auto()
  # ---- vectors and expansion ----
  VECTORIZE = auto(); GEP = auto(); VCONST = auto(); WMMA = auto()
  # ---- program-only control flow ----
  IF = auto(); ENDIF = auto(); BARRIER = auto()
  # ---- constants ----
  CONST = auto()
  # ---- unary ALU ----
  CAST = auto(); BITCAST = auto(); EXP2 = auto(); LOG2 = auto(); SIN = auto(); SQRT = auto(); RECIPROCAL = auto()
  NEG = auto(); TRUNC = auto()
  # ---- binary ALU ----
  ADD = auto(); MUL = auto(); SHL = auto(); SHR = auto(); IDIV = auto(); MAX = auto(); MOD = auto(); CMPLT = auto()
  CMPNE = auto(); CMPEQ = auto(); XOR = auto(); OR = auto(); AND = auto(); THREEFRY = auto(); SUB = auto()
  FDIV = auto(); POW = auto()
  # ---- ternary ALU ----
  WHERE = auto(); MULACC = auto()

class GroupOp:
  Unary = {Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIPROCAL, Ops.NEG, Ops.TRUNC}
  Binary = {Ops.ADD, Ops.MUL, Ops.IDIV, Ops.MAX, Ops.MOD, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ, Ops.XOR, Ops.SHL, Ops.SHR,
            Ops.OR, Ops.AND, Ops.THREEFRY, Ops.SUB, Ops.FDIV, Ops.POW}
  ALU = Unary | Binary | {Ops.WHERE, Ops.MULACC}
  Elementwise = ALU | {Ops.CAST, Ops.BITCAST}
  Movement = {Ops.RESHAPE, Ops.EXPAND, Ops.PERMUTE, Ops.PAD, Ops.SHRINK, Ops.FLIP}
  Defines = {Ops.DEFINE_GLOBAL, Ops.DEFINE_LOCAL, Ops.DEFINE_REG}
  # binary ops where a op b == b op a
  Commutative = {Ops.ADD, Ops.MUL, Ops.MAX, Ops.CMPNE, Ops.CMPEQ, Ops.XOR, Ops.AND, Ops.OR}
  Comparison = {Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ}
  # ops that are not values (side effects, structure)
  All = set(Ops)

class AxisType(FastEnum):
  """What a RANGE became. Order is the order axes are laid out in a kernel (outermost first)."""
  GLOBAL = auto(); THREAD = auto(); LOCAL = auto(); WARP = auto(); KBLOCK = auto(); LOOP = auto(); GROUP_REDUCE = auto()
  REDUCE = auto(); UPCAST = auto(); UNROLL = auto()

# NOTE: KBLOCK is the outer part of a reduce that runs outside the output loops (OptOps.KBLOCK): its partial sums
# accumulate in the output buffer
axis_letters = {AxisType.GLOBAL: "g", AxisType.THREAD: "t", AxisType.LOCAL: "l", AxisType.WARP: "w",
                AxisType.KBLOCK: "K", AxisType.LOOP: "L", AxisType.UPCAST: "u", AxisType.GROUP_REDUCE: "G",
                AxisType.REDUCE: "R", AxisType.UNROLL: "r"}
