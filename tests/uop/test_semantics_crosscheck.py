"""The one semantics table (tinygrad/uop/semantics.py) against compiled C and against its z3 translation (spec/smt.py).

Constant folding, the PYTHON backend and the kernel reference executor all compute through the table, so a bug in it
would be invisible to all three: this is the check that can see it. Inputs: every int8 and uint8 value pair for every
binary op (every value for unary ops and casts), edge values of the wider ints (0, +-1, min, max, min+1, max-1, powers
of two around the width, shift amounts -2..width+1), float edge values (+-0, nan, +-inf, subnormals, the largest finite,
values that round or saturate in every conversion). (a) One C file computes every result with the C renderer's own
spelling (kernels from get_program, bounds-free operands so every guard is rendered), compiled once by the CPU backend's
compiler. (b) The z3 translation evaluated on the same inputs: a sample in the default suite, all of them with -m slow
(make test-semantics-sweep).
"""
from __future__ import annotations
import ctypes, functools, itertools, math, os, tempfile
from typing import Any
import numpy as np
import pytest
from tinygrad.uop import Ops, semantics
from tinygrad.uop.ops import UOp
from tinygrad.dtype import DType, dtypes, to_np_dtype, to_storage_np, from_storage_np
from tinygrad.codegen import get_program
from tinygrad.renderer.cstyle import CRenderer
from tinygrad.runtime.support.compiler_cpu import CCompiler
from spec import smt

DTYPES: list[DType] = [dtypes.bool, *dtypes.ints, *dtypes.floats]
BINARY = [Ops.ADD, Ops.SUB, Ops.MUL, Ops.MAX, Ops.IDIV, Ops.MOD, Ops.SHL, Ops.SHR, Ops.AND, Ops.OR, Ops.XOR, Ops.CMPLT,
          Ops.CMPNE, Ops.CMPEQ, Ops.FDIV, Ops.POW]
UNARY = [Ops.NEG, Ops.RECIPROCAL, Ops.SQRT, Ops.TRUNC, Ops.EXP2, Ops.LOG2, Ops.SIN]
# no exact value is defined for these (docs/ir.md: a few ulp); NaN, infinities and zeros must still match exactly
APPROX = {Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.POW}

# ---- inputs ----

def _wrap(v: int, dt: DType) -> int: return int(semantics.fold_cast(v, dtypes.index, dt))

FLOAT_EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, -0.75, 1.5, -2.5, 3.0, 1 / 3, 7.25, 100.5, 255.5, 256.0, -129.5, 300.7, 65504.0,
               65520.0, 1e5, 2.0**31, -2.0**31, 2.0**32, 2.0**63, -2.0**63, 2.0**64, 1e10, -1e10, 1e30, 3.4e38, 1e300,
               2.0**-6, 2.0**-9, 2.0**-14, 2.0**-24, 2.0**-126, 1e-40, 1.4e-45, 5e-324, math.nan, math.inf, -math.inf]

@functools.cache
def edges(dt: DType) -> tuple[Any, ...]:
  """The edge values of dt, as values of dt (the exhaustive set for the byte types)."""
  if dt is dtypes.bool: return (False, True)
  if dt in (dtypes.int8, dtypes.uint8): return tuple(range(int(dtypes.min(dt)), int(dtypes.max(dt)) + 1))
  if dtypes.is_int(dt):
    w, lo, hi = 8 * dt.itemsize, int(dtypes.min(dt)), int(dtypes.max(dt))
    vals = [0, 1, -1, 2, -2, 3, -7, 100, lo, hi, lo + 1, hi - 1]
    for k in (w // 2 - 1, w // 2, w - 2, w - 1): vals += [1 << k, -(1 << k), (1 << k) + 1, (1 << k) - 1]
    return tuple(dict.fromkeys(_wrap(v, dt) for v in vals))
  got = [semantics.fold_cast(v, dtypes.float64, dt) for v in FLOAT_EDGES]
  # NOTE: dedupe by bits: 0.0 and -0.0 stay apart, the NaNs collapse
  return tuple({(math.copysign(1, v), v) if not math.isnan(v) else "nan": v for v in got}.values())

def shift_amounts(dt: DType) -> tuple[int, ...]:
  w = 8 * dt.itemsize
  return tuple(dict.fromkeys(_wrap(v, dt) for v in [*range(-2, w + 2), -w, int(dtypes.min(dt)), int(dtypes.max(dt))]))

def binary_inputs(dt: DType) -> tuple[list[Any], list[Any]]:
  """Every pair of edge values, plus every edge value shifted by every amount (ints)."""
  e = edges(dt)
  pairs = list(itertools.product(e, e))
  if dtypes.is_int(dt) and dt.itemsize > 1: pairs += list(itertools.product(e, shift_amounts(dt)))
  return [a for a, _ in pairs], [b for _, b in pairs]

def ternary_inputs(dt: DType) -> tuple[list[Any], list[Any], list[Any]]:
  e = edges(dt)
  small = e if len(e) <= 12 else e[::max(1, len(e) // 10)]
  trip = list(itertools.product(small, small, small))
  return [a for a, _, _ in trip], [b for _, b, _ in trip], [c for _, _, c in trip]

def storage(vals: list[Any], dt: DType) -> np.ndarray:
  return np.ascontiguousarray(to_storage_np(np.array(vals, dtype=semantics.holder(dt)), dt))

def values(vals: list[Any], dt: DType) -> np.ndarray: return np.array(vals, dtype=semantics.holder(dt))

# ---- the C side: one kernel per (dtype, kind), all in one C file ----

def kernel_ast(ins: list[DType], outs: list[tuple[str, Any, DType]], n: int) -> UOp:
  """out_j[i] = f_j(in_0[i], ...) for i < n. outs: (kind, op or dtype, out dtype), kind "alu", "cast" or "bitcast"."""
  r = UOp.range(n, 0)
  loads = [UOp(Ops.DEFINE_GLOBAL, dt.ptr(n), arg=len(outs) + k).index(r).load() for k, dt in enumerate(ins)]
  stores = []
  for j, (kind, what, odt) in enumerate(outs):
    if kind == "alu": v = UOp(what, odt, tuple(loads[:len(ins) if what not in UNARY else 1]))
    else: v = loads[0].cast(odt) if kind == "cast" else loads[0].bitcast(odt)
    stores.append(UOp(Ops.DEFINE_GLOBAL, odt.ptr(n), arg=j).index(r).store(v).end(r))
  return UOp.sink(*stores)

class Case:
  """One kernel of the C file: its inputs (storage arrays), its outputs and how the table computes each."""
  def __init__(self, name: str, ins: list[tuple[list[Any], DType]], outs: list[tuple[str, Any, DType]]):
    self.name, self.ins, self.outs = name, ins, outs
    self.n = len(ins[0][0])
    self.ast = kernel_ast([dt for _, dt in ins], outs, self.n)
    self.src = get_program(self.ast, CRenderer(), opts=[]).src

  def buffers(self) -> list[np.ndarray]:
    """The kernel's arguments: zeroed outputs, then the inputs as storage."""
    return [np.zeros(self.n, to_np_dtype(odt)) for _, _, odt in self.outs] + [storage(v, dt) for v, dt in self.ins]

  def outputs(self, bufs: list[np.ndarray]) -> list[np.ndarray]:
    return [from_storage_np(bufs[j], odt) for j, (_, _, odt) in enumerate(self.outs)]

  def table(self, j: int) -> np.ndarray:
    kind, what, odt = self.outs[j]
    vs = [values(v, dt) for v, dt in self.ins]
    if kind == "cast": return semantics.exec_cast(vs[0], self.ins[0][1], odt)
    if kind == "bitcast": return semantics.exec_bitcast(vs[0], self.ins[0][1], odt)
    srcs = vs[:1] if what in UNARY else vs
    return semantics.exec_alu(what, self.ins[-1][1], *srcs)

def alu_cases(dt: DType) -> list[Case]:
  name = f"k_{dt.name.replace(' ', '_')}"
  a, b = binary_inputs(dt)
  cases = []
  if (bops := [op for op in BINARY if semantics.defined_on(op, dt)]):
    out = [("alu", op, dtypes.bool if op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ) else dt) for op in bops]
    cases.append(Case(f"{name}_binary", [(a, dt), (b, dt)], out))
  e = list(edges(dt))
  if (uops := [op for op in UNARY if semantics.defined_on(op, dt)]):
    cases.append(Case(f"{name}_unary", [(e, dt)], [("alu", op, dt) for op in uops]))
  x, y, z = ternary_inputs(dt)
  cases.append(Case(f"{name}_mulacc", [(x, dt), (y, dt), (z, dt)], [("alu", Ops.MULACC, dt)]))
  conds = [bool(i % 3) for i in range(len(x))]
  cases.append(Case(f"{name}_where", [(conds, dtypes.bool), (x, dt), (y, dt)], [("alu", Ops.WHERE, dt)]))
  cases.append(Case(f"{name}_cast", [(e, dt)], [("cast", None, d) for d in DTYPES if d is not dt]))
  if (same := [d for d in DTYPES if d is not dt and d.itemsize == dt.itemsize]):
    cases.append(Case(f"{name}_bitcast", [([v for v in e if not _is_nan(v)], dt)], [("bitcast", None, d) for d in same]))
  return cases

def _is_nan(v: Any) -> bool: return isinstance(v, float) and math.isnan(v)

def threefry_case() -> Case:
  e = list(edges(dtypes.uint64))
  a, b = [x for x, _ in itertools.product(e, e)], [y for _, y in itertools.product(e, e)]
  return Case("k_threefry", [(a, dtypes.uint64), (b, dtypes.uint64)], [("alu", Ops.THREEFRY, dtypes.uint64)])

def one_c_file(cases: list[Case]) -> str:
  """The kernels' sources as one translation unit: shared prefix lines (typedefs, helpers) once, then each function."""
  head: dict[str, None] = {}
  bodies = []
  for c in cases:
    pre, fn = c.src.split(f"void {c.name}(", 1)
    # NOTE: the prefix is the helper functions (one block) and typedef lines; each is needed once
    lines = pre.strip().split("\n")
    helpers = "\n".join(ln for ln in lines if not ln.startswith("typedef "))
    head.update(dict.fromkeys([helpers, *[ln for ln in lines if ln.startswith("typedef ")]]))
    bodies.append(f"void {c.name}(" + fn)
  return "\n".join([*head, *bodies])

@functools.cache
def c_results() -> tuple[list[Case], dict[str, list[np.ndarray]]]:
  """Every case run through compiled C: case name -> its outputs as values."""
  cases = [c for dt in DTYPES for c in alu_cases(dt)] + [threefry_case()]
  for c in cases: c.src = _rename(c.src, c.name)
  lib = _load(CCompiler().compile(one_c_file(cases)))
  out: dict[str, list[np.ndarray]] = {}
  for c in cases:
    bufs = c.buffers()
    fn = getattr(lib, c.name)
    fn.restype = None
    fn(*[ctypes.c_void_p(b.ctypes.data) for b in bufs], ctypes.c_int32(0))
    out[c.name] = c.outputs(bufs)
  return cases, out

def cases_of(dt: DType) -> list[Case]:
  cases, _ = c_results()
  return [c for c in cases if c.name.startswith(f"k_{dt.name.replace(' ', '_')}_") or
          (dt is dtypes.uint64 and c.name == "k_threefry")]

def check_outputs(c: Case, got: list[np.ndarray]) -> list[str]:
  """The table against another computation of the case's outputs; a description of every output that differs."""
  errors = []
  for j, (kind, what, odt) in enumerate(c.outs):
    want = c.table(j)
    if (bad := mismatches(got[j], want, odt, kind == "alu" and what in APPROX)).size:
      errors.append(describe(c, j, bad, got[j], want))
  return errors

def _rename(src: str, name: str) -> str:
  """The function's name in the source -> name (get_program names kernels after their ops)."""
  sig = next(line for line in src.splitlines() if line.startswith("void ") and "(" in line)
  old = sig[len("void "):sig.index("(")]
  return src.replace(f"void {old}(", f"void {name}(", 1)

def _load(lib: bytes) -> ctypes.CDLL:
  with tempfile.NamedTemporaryFile(prefix="tg-semantics-", suffix=".so", delete=False) as f:
    f.write(lib)
  try: return ctypes.CDLL(f.name)
  finally: os.unlink(f.name)

# ---- comparing ----

def _ulp(dt: DType) -> float: return 2.0 ** -dtypes.finfo(dt)[1]

def mismatches(got: np.ndarray, want: np.ndarray, dt: DType, approx: bool) -> np.ndarray:
  """Indices where got and want differ: ints and bools exactly; floats by bits (so -0.0 != 0.0) except that any NaN
  matches any NaN (its sign and payload are not defined); approximate ops within a few ulp, with inf/zero/NaN exact."""
  if not dtypes.is_float(dt): return np.flatnonzero(np.asarray(got) != np.asarray(want))
  g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
  both_nan = np.isnan(g) & np.isnan(w)
  same = both_nan | ((g == w) & (np.signbit(g) == np.signbit(w)))
  if approx:
    with np.errstate(all="ignore"):
      close = np.isfinite(g) & np.isfinite(w) & (g != 0) & (w != 0) & (np.abs(g - w) <= 4 * _ulp(dt) * np.abs(w))
    same |= close
  return np.flatnonzero(~same)

def describe(c: Case, j: int, bad: np.ndarray, got: np.ndarray, want: np.ndarray) -> str:
  kind, what, odt = c.outs[j]
  k = int(bad[0])
  args = ", ".join(repr(v[k]) for v, _ in c.ins)
  return (f"{c.name}: {kind} {what if kind == 'alu' else ''} -> {odt}: {bad.size} of {c.n} differ; first ({args}): "
          f"table {want[k]!r}, other {got[k]!r}")

# ---- (a) compiled C ----

@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_table_matches_compiled_c(dt: DType):
  _, out = c_results()
  errors = [e for c in cases_of(dt) for e in check_outputs(c, out[c.name])]
  assert not errors, "\n".join(errors)

# ---- (b) the z3 translation ----

def z3_points(c: Case, j: int, limit: int | None) -> list[int]:
  if limit is None or c.n <= limit: return list(range(c.n))
  return sorted({*range(0, c.n, max(1, c.n // limit)), c.n - 1})

def z3_value(c: Case, j: int, k: int) -> Any:
  kind, what, odt = c.outs[j]
  args = [v[k] for v, _ in c.ins]
  if kind == "alu": return smt.evaluate(what, c.ins[-1][1], *(args[:1] if what in UNARY else args))
  return smt.evaluate_cast(args[0], c.ins[0][1], odt, bit=kind == "bitcast")

def z3_modelled(c: Case, j: int) -> bool:
  kind, what, odt = c.outs[j]
  if kind == "alu": return what not in APPROX
  # NOTE: fp8e4m3 is not an IEEE format: z3 has no sort for its bits (its values are modelled)
  return not (kind == "bitcast" and dtypes.fp8e4m3 in (c.ins[0][1], odt))

def check_z3(dt: DType, limit: int | None) -> list[str]:
  errors = []
  for c in cases_of(dt):
    for j, (_, _, odt) in enumerate(c.outs):
      if not z3_modelled(c, j): continue
      pts = z3_points(c, j, limit)
      want = c.table(j)[pts]
      got = np.array([z3_value(c, j, k) for k in pts], dtype=semantics.holder(odt) if odt is not dtypes.index else object)
      if (bad := mismatches(got, want, odt, False)).size:
        errors.append(describe(c, j, np.array([pts[int(i)] for i in bad]), _scatter(c.n, pts, got), c.table(j)))
  return errors

def _scatter(n: int, pts: list[int], vals: np.ndarray) -> np.ndarray:
  out = np.zeros(n, vals.dtype)
  out[pts] = vals
  return out

@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_table_matches_z3_translation_sampled(dt: DType):
  errors = check_z3(dt, limit=16)
  assert not errors, "\n".join(errors)

@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_table_matches_z3_translation_everywhere(dt: DType):
  errors = check_z3(dt, limit=None)
  assert not errors, "\n".join(errors)

# ---- the scalar path constant folding uses is the same definition ----

@pytest.mark.parametrize("dt", [dtypes.bool, *dtypes.ints], ids=str)
def test_folding_scalar_path_matches_the_arrays(dt: DType):
  a, b = binary_inputs(dt)
  for op in BINARY + [Ops.NEG]:
    if not semantics.defined_on(op, dt): continue
    args = [a] if op is Ops.NEG else [a, b]
    want = semantics.exec_alu(op, dt, *[values(v, dt) for v in args]).tolist()
    got = [semantics.scalar_alu(op, dt, *p) for p in zip(*args)]
    assert got == want, f"{op} {dt}: first difference at {next(i for i, (g, w) in enumerate(zip(got, want)) if g != w)}"
