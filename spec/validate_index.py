"""validate_index: a z3 proof that every LOAD/STORE index is inside its buffer whenever its gate is true.

The index math is translated by spec/smt.py, the one z3 translation of the IR's semantics: dtypes.index as unbounded
integers, a program's int32/int64 as wrapping bit-vectors, C truncating IDIV/MOD (x/0 = 0), shift amounts modulo the
width; RANGE and SPECIAL in [0, end), DEFINE_VAR in [lo, hi]. Loaded values, floats and anything derived from them (a
cast from a float) are free values bounded by their dtype: the proof holds whatever memory holds.
The gate is the `cond.where(idx, Invalid)` mask of a kernel, or the third source of a program's INDEX and the IF blocks
around the access. One solver per call; proved accesses are cached per node, so a kernel seen again costs nothing.
"""
from __future__ import annotations
import importlib.util, threading, weakref
from typing import Any, NamedTuple, Sequence
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp
from tinygrad.dtype import PtrDType
from spec.shared_spec import is_masked

class IndexOutOfBounds(Exception):
  """An access z3 shows can leave its buffer: `model` maps variable names to a witness, `index` is the bad offset."""
  def __init__(self, msg: str, node: UOp, model: dict[str, int], index: int | None):
    self.node, self.model, self.index = node, model, index
    super().__init__(msg)

_proved: weakref.WeakSet[UOp] = weakref.WeakSet()
# NOTE: z3's Python API shares one context between threads and is not thread-safe (BEAM compiles candidates on a
# thread pool, each compile validating its program): a proof, its terms and their release all happen under this lock
_z3_lock = threading.RLock()
PROOF_RLIMIT = 60_000_000

class Access(NamedTuple):
  buf: UOp          # the DEFINE_GLOBAL/LOCAL/REG under the INDEX (through AFTERs)
  size: int         # its PtrDType.size in elements
  idx: UOp          # the flat index, mask removed
  gates: list[UOp]  # the mask's conditions and the INDEX's gate
  width: int        # elements accessed from idx on (a pointer vector's width)
  masked: bool      # a gate per element (a masked vector load): element j is checked under lane j of the gates

def access_of(u: UOp) -> Access | None:
  """What a LOAD/STORE touches, or None when it has no sized buffer to check against."""
  if u.op not in (Ops.LOAD, Ops.STORE) or not u.src or u.src[0].op is not Ops.INDEX: return None
  index = u.src[0]
  if len(index.src) < 2: return None
  buf, idx, gates = index.src[0], index.src[1], list(index.src[2:3])
  while buf.op is Ops.AFTER: buf = buf.src[0]
  while is_masked(idx): gates, idx = gates + [idx.src[0]], idx.src[1]
  if not isinstance(buf.dtype, PtrDType) or buf.dtype.size < 0: return None
  width = index.dtype.vcount if isinstance(index.dtype, PtrDType) else 1
  masked = width > 1 and idx.dtype.count == 1 and any(g.dtype.count > 1 for g in gates)
  return Access(buf, buf.dtype.size, idx, gates, width, masked)

def accesses(graph_or_list: UOp | Sequence[UOp]) -> list[tuple[int, UOp, tuple[UOp, ...]]]:
  """(position, LOAD/STORE, gates of the IF blocks around it) for every access; a graph has no IF blocks."""
  if isinstance(graph_or_list, UOp):
    return [(i, u, ()) for i, u in enumerate(graph_or_list.toposort()) if u.op in (Ops.LOAD, Ops.STORE)]
  ret: list[tuple[int, UOp, tuple[UOp, ...]]] = []
  ifs: list[UOp] = []
  for i, u in enumerate(graph_or_list):
    if u.op is Ops.IF: ifs.append(u.src[0])
    elif u.op is Ops.ENDIF and ifs: ifs.pop()
    elif u.op in (Ops.LOAD, Ops.STORE): ret.append((i, u, tuple(ifs)))
  return ret

def _as_wide(z3: Any, smt: Any, v: Any, dt: Any) -> Any:
  """An index term as a 66-bit signed bit-vector (bit-vector indices) or itself (Int), so `v + width` cannot wrap."""
  if smt.kind(dt) != "bv": return v
  w = smt.bits(dt)
  return z3.SignExt(66 - w, v) if smt.signed(dt) else z3.ZeroExt(66 - w, v)

def _out_of_bounds(z3: Any, smt: Any, i: Any, dt: Any, a: Access, elem: int = 0) -> Any:
  """Whether index i (plus `elem`, one element of a masked access) leaves the buffer."""
  i = _as_wide(z3, smt, i, dt) + elem
  end = a.size - (1 if a.masked else a.width) + 1
  if smt.kind(dt) == "int": return z3.Or(i < 0, i >= end)
  return z3.Or(i < z3.BitVecVal(0, 66), i >= z3.BitVecVal(end, 66))

def validate_index(graph_or_list: UOp | Sequence[UOp]) -> None:
  """Prove every LOAD/STORE in bounds under its gate (and, in a program, the IF blocks around it); raise
  IndexOutOfBounds with a witness (the variable values) otherwise."""
  # NOTE: a proof under enclosing IFs holds only at that place in the program, so only IF-free verdicts are cached
  todo = [(i, u, ifs, a) for i, u, ifs in accesses(graph_or_list)
          if (ifs or u not in _proved) and (a := access_of(u)) is not None]
  if not todo: return
  with _z3_lock:
    try:
      _prove(todo)
      return
    except Exception as e:
      # NOTE: the traceback's frames hold the solver and its terms; they are released here, under the lock, not
      # wherever the caller drops the exception
      err: Exception = e
      x_: BaseException | None = e
      while x_ is not None: x_.__traceback__, x_ = None, x_.__cause__ or x_.__context__
  raise err

def _prove(todo: list[tuple[int, UOp, tuple[UOp, ...], Access]]) -> None:
  # NOTE: z3 loads in ~0.2 s; imported here so that loading the spec plugin stays cheap
  # NOTE: z3-solver is an optional third-party package, needed only at IGNORE_OOB=0: without it that setting is refused
  if importlib.util.find_spec("z3") is None:
    raise ImportError("IGNORE_OOB=0 proves every memory access with z3, which is not installed: pip install z3-solver "
                      "(the project's `fuzz` and `testing` extras have it), or leave IGNORE_OOB at 1")
  import z3
  from spec import smt
  tr, solver = smt.Translator(model_floats=False), z3.Solver()
  # NOTE: the budget is z3's deterministic resource count, not wall time, so a proof holds or fails the same way on a
  # loaded machine (the heaviest proof in the suite, an int64 cumsum's index under EMULATE=NV, takes ~10.4M)
  solver.set("rlimit", PROOF_RLIMIT)
  for pos, u, ifs, a in todo:
    gates = a.gates + list(ifs)
    # NOTE: a masked access checks each element under its own lane of the gates (a scalar gate reads its one value)
    for lane in range(a.width if a.masked else a.idx.dtype.count):
      i, conds = tr.value(a.idx, 0 if a.masked else lane), [tr.value(g, lane) for g in gates]
      solver.add(*tr.constraints)
      tr.constraints = []
      solver.push()
      solver.add(*conds, _out_of_bounds(z3, smt, i, a.idx.dtype, a, lane if a.masked else 0))
      res = solver.check()
      if res == z3.sat: _report(z3, smt, solver.model(), tr, pos, u, a, i, lane)
      if res == z3.unknown and not (0 <= a.idx.vmin and a.idx.vmax + a.width - 1 < a.size):
        raise IndexOutOfBounds(f"{u.op} at position {pos}: z3 could not prove its index within {a.buf.op} {a.buf.arg} "
                               f"(size {a.size}): {solver.reason_unknown()}", u, {}, None)
      solver.pop()
    if not ifs: _proved.add(u)

def _report(z3: Any, smt: Any, m: Any, tr: Any, pos: int, u: UOp, a: Access, i: Any, lane: int) -> None:
  # NOTE: floats are free values (model_floats=False), so every free value here is an int or a bool
  model = {k: int(v) for k, v in tr.model(m).items()}
  bad = int(tr.model_value(m, i, a.idx.dtype.scalar()))
  shown = ", ".join(f"{k}={v}" for k, v in model.items())
  where = f"[{bad + lane}]" if a.masked else f"[{bad}..{bad + a.width - 1}]" if a.width > 1 else f"[{bad}]"
  if a.idx.dtype.count > 1 or a.masked: where += f" (lane {lane})"
  raise IndexOutOfBounds(f"{u.op} at position {pos} can access {a.buf.op} {a.buf.arg}{where}, outside its size "
                         f"{a.size}, when {shown or 'always'}", u, model, bad)
