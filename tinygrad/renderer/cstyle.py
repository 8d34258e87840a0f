"""C-style renderers: a reusable base (one C line per UOp, loops and IFs as blocks) and CRenderer, C for the CPU
backend (gcc/clang vector types for upcasts, _Float16 for half, bfloat16 and fp8 stored as bits and converted by
helper functions)."""
from __future__ import annotations
import math, struct
from typing import Any, Callable
from tinygrad.uop import Ops, GroupOp
from tinygrad.uop.ops import UOp
from tinygrad.dtype import DType, PtrDType, dtypes
from tinygrad.renderer import Renderer, Vectors

def _nan_max(a: str, b: str, dt: DType) -> str:
  # NOTE: NaN-correct: a NaN in either operand is the result, as numpy's maximum
  return f"((({a})>({b})||({a})!=({a}))?({a}):({b}))" if dtypes.is_float(dt) else f"(({a})>({b})?({a}):({b}))"

def _bin(sym: str) -> Callable[..., str]: return lambda a, b, dt: f"({a}{sym}{b})"

class _Lines:
  """The state of one render: the C text of every UOp, fresh names, the body lines and the indentation."""
  def __init__(self) -> None:
    self.r: dict[UOp, str] = {}
    self.counts: dict[str, int] = {}
    self.body: list[str] = []
    self.params: list[tuple[tuple[int, Any], str]] = []
    self.depth = 1
  def fresh(self, prefix: str) -> str:
    self.counts[prefix] = self.counts.get(prefix, -1) + 1
    return f"{prefix}{self.counts[prefix]}"
  def emit(self, line: str) -> None: self.body.append("  " * self.depth + line)

class CStyleLanguage(Renderer):
  """The C-family base: subclasses set the type names, the kernel signature and the few ops spelled differently."""
  kernel_prefix = "void"
  buffer_prefix = ""
  infinity = "__builtin_inff()"
  nan = "__builtin_nanf(\"\")"
  type_map: dict[DType, str] = {}
  # ops rendered as C expressions: (operand strings..., dtype) -> str
  code_for_op: dict[Ops, Callable[..., str]] = {
    # NOTE: on bool, C computes in int and converts back with != 0: NEG is the identity, SUB is XOR (semantics.py)
    Ops.NEG: lambda x, dt: f"(-{x})", Ops.RECIPROCAL: lambda x, dt: f"(1/{x})",
    Ops.ADD: _bin("+"), Ops.SUB: _bin("-"), Ops.MUL: _bin("*"), Ops.FDIV: _bin("/"), Ops.IDIV: _bin("/"),
    Ops.MOD: _bin("%"),
    Ops.SHL: _bin("<<"), Ops.SHR: _bin(">>"), Ops.AND: _bin("&"), Ops.OR: _bin("|"), Ops.XOR: _bin("^"),
    Ops.CMPLT: _bin("<"), Ops.CMPNE: _bin("!="), Ops.CMPEQ: _bin("=="), Ops.MAX: _nan_max,
    Ops.WHERE: lambda c, a, b, dt: f"({c}?{a}:{b})",
    # NOTE: integers only; MULACC of floats is fused (render_fma): a*b+c written out could round twice
    Ops.MULACC: lambda a, b, c, dt: f"(({a}*{b})+{c})",
  }

  # ---- types and constants ----
  def render_dtype(self, dt: DType) -> str:
    if isinstance(dt, PtrDType): return self.render_dtype(dt.base) + "*"
    if dt.count > 1: return self.vector_name(dt)
    if dt not in self.type_map: raise NotImplementedError(f"{type(self).__name__} has no C type for {dt}")
    return self.type_map[dt]
  def vector_name(self, dt: DType) -> str: return self.type_map[dt.scalar()].replace(" ", "_") + str(dt.count)
  def render_vector(self, dt: DType, elems: list[str]) -> str:
    return f"(({self.render_dtype(dt)}){{{', '.join(elems)}}})"
  def render_const(self, x: object, dt: DType) -> str:
    s = self._render_const(x, dt)
    # NOTE: a negative literal goes in parentheses: `a-(-2.75f)`, never `a--2.75f` (found by fuzz: SUB of a negative
    # constant did not compile)
    return f"({s})" if s.startswith("-") else s
  def _render_const(self, x: object, dt: DType) -> str:
    if dt.count > 1: return self.render_vector(dt, [self.render_const(x, dt.scalar())] * dt.count)
    if dtypes.is_float(dt): return self.render_float(float(x), dt)  # type: ignore[arg-type]
    v = int(x)  # type: ignore[call-overload,unused-ignore]
    if dt is dtypes.bool: return "1" if v else "0"
    if dt is dtypes.int32: return str(v) if v != -2**31 else "(-2147483647-1)"
    if dt is dtypes.int64: return f"{v}ll" if v != -2**63 else "(-9223372036854775807ll-1)"
    if dt is dtypes.uint32: return f"{v}u"
    if dt is dtypes.uint64: return f"{v}ull"
    return f"(({self.render_dtype(dt)}){v})"
  def render_float(self, f: float, dt: DType) -> str:
    if math.isnan(f): v = self.nan
    elif math.isinf(f): v = ("-" if f < 0 else "") + self.infinity
    elif dt is dtypes.float64: v = repr(f)
    else: v = f"{struct.unpack('<f', struct.pack('<f', f))[0]!r}f"
    return v if dt in (dtypes.float32, dtypes.float64) else self.render_cast(v, dtypes.float32, dt)
  def render_cast(self, x: str, src: DType, dt: DType) -> str:
    if dt.count > 1: return f"__builtin_convertvector({x}, {self.render_dtype(dt)})"
    return f"(({self.render_dtype(dt)})({x}))"
  def render_bitcast(self, x: str, src: DType, dt: DType) -> str:
    # NOTE: a byte read as bool is byte != 0 (a _Bool holding 2 would be undefined)
    if dt is dtypes.bool: return f"(({self.render_dtype(dt)})({x}))"
    t, s = self.render_dtype(dt), self.render_dtype(src)
    return f"({{ {s} __s = {x}; {t} __d; __builtin_memcpy(&__d, &__s, sizeof(__d)); __d; }})"

  # ---- the kernel ----
  def render_kernel(self, name: str, params: list[str], body: list[str], prefix: list[str]) -> str:
    return "\n".join(prefix + [f"{self.kernel_prefix} {name}({', '.join(params)}) {{"] + body + ["}"]) + "\n"
  def render_prefix(self, uops: list[UOp]) -> list[str]: return []
  def extra_params(self) -> list[str]: return []
  def render_special(self, u: UOp) -> str: raise NotImplementedError(f"{type(self).__name__}: no SPECIAL {u.arg}")
  def render_define(self, u: UOp) -> str: return self.render_dtype(u.dtype.base)
  def render_barrier(self) -> str: raise NotImplementedError(f"{type(self).__name__} has no BARRIER")

  def render(self, uops: list[UOp], name: str = "kernel") -> str:
    """The kernel's source: params are the buffers in DEFINE_GLOBAL order, then the DEFINE_VARs by name, then extras."""
    st = _Lines()
    for u in uops:
      if u.op in (Ops.SINK, Ops.GROUP): continue
      handler = self._handlers.get(u.op)
      if handler is not None: handler(self, st, u)
      else:
        st.r[u] = st.fresh(_PREFIX.get(u.op, "alu"))
        st.emit(f"{self.render_dtype(u.dtype)} {st.r[u]} = {self.render_expr(u, st.r)};")
    params = [p for _, p in sorted(st.params)] + self.extra_params()
    return self.render_kernel(name, params, st.body, self.render_prefix(uops))

  # ---- one method per op that is not a plain expression ----
  def _ptr(self, st: _Lines, idx: UOp) -> str:
    p = f"({st.r[idx.src[0]]}+{st.r[idx.src[1]]})"
    if isinstance(idx.dtype, PtrDType) and idx.dtype.v > 1:
      return f"(({self.vector_name(idx.dtype.base.vec(idx.dtype.v))}*){p})"
    return p
  def _global(self, st: _Lines, u: UOp) -> None:
    st.r[u] = f"data{u.arg}"
    st.params.append(((0, u.arg), f"{self.buffer_prefix}{self.render_dtype(u.dtype.base)}* {st.r[u]}"))
  def _var(self, st: _Lines, u: UOp) -> None:
    st.r[u] = u.arg[0]
    st.params.append(((1, u.arg[0]), f"{self.render_dtype(u.dtype)} {u.arg[0]}"))
  def _define(self, st: _Lines, u: UOp) -> None:
    st.r[u] = st.fresh("acc" if u.op is Ops.DEFINE_REG else "smem")
    st.emit(f"{self.render_define(u)} {st.r[u]}[{u.dtype.size}];")  # type: ignore[attr-defined]
  def _range(self, st: _Lines, u: UOp) -> None:
    st.r[u] = v = f"ridx{u.arg[0]}"
    st.emit(f"for ({self.render_dtype(u.dtype)} {v} = 0; {v} < {st.r[u.src[0]]}; {v}++) {{")
    st.depth += 1
  def _if(self, st: _Lines, u: UOp) -> None:
    st.emit(f"if ({st.r[u.src[0]]}) {{")
    st.depth += 1
  def _close(self, st: _Lines, u: UOp) -> None:
    st.depth -= 1
    st.emit("}")
  def _load(self, st: _Lines, u: UOp) -> None:
    st.r[u] = st.fresh("val")
    idx = u.src[0]
    if len(u.src) == 1: expr = f"*{st.r[idx]}"
    else: expr = f"({st.r[idx.src[2]]}?*{self._ptr(st, idx)}:{st.r[u.src[1]]})"
    st.emit(f"{self.render_dtype(u.dtype)} {st.r[u]} = {expr};")
  _handlers: dict[Ops, Callable[..., None]] = {
    Ops.DEFINE_GLOBAL: _global, Ops.DEFINE_VAR: _var, Ops.DEFINE_REG: _define, Ops.DEFINE_LOCAL: _define,
    Ops.SPECIAL: lambda self, st, u: st.r.__setitem__(u, self.render_special(u)),
    Ops.CONST: lambda self, st, u: st.r.__setitem__(u, self.render_const(u.arg, u.dtype)),
    Ops.VCONST: lambda self, st, u: st.r.__setitem__(u, self.render_vconst(u)),
    Ops.AFTER: lambda self, st, u: st.r.__setitem__(u, st.r[u.src[0]]),
    Ops.INDEX: lambda self, st, u: st.r.__setitem__(u, self._ptr(st, u)),
    Ops.RANGE: _range, Ops.IF: _if, Ops.END: _close, Ops.ENDIF: _close, Ops.LOAD: _load,
    Ops.STORE: lambda self, st, u: st.emit(f"*{st.r[u.src[0]]} = {st.r[u.src[1]]};"),
    Ops.BARRIER: lambda self, st, u: st.emit(self.render_barrier()),
  }

  def render_vconst(self, u: UOp) -> str:
    return self.render_vector(u.dtype, [self.render_const(x, u.dtype.scalar()) for x in u.arg])

  # ---- the IR's meaning where C's is undefined (tinygrad/uop/semantics.py); a guard only where bounds do not rule
  # the case out, so ordinary kernels (index math, division by constants, shifts by constants) pay nothing ----
  def render_unsigned_of(self, dt: DType) -> str:
    """The unsigned C type a signed or narrow integer shifts and negates in without overflow."""
    return self.type_map[dtypes.uint64 if dt.scalar().itemsize == 8 else dtypes.uint32]
  def render_wrapping_neg(self, x: str, dt: DType) -> str:
    """-x modulo 2**width (x = MIN gives MIN) without signed overflow."""
    return f"(({self.render_dtype(dt)})(0-({self.render_unsigned_of(dt)})({x})))"
  def render_divmod(self, u: UOp, a: str, b: str) -> str:
    """x/0 = 0, x%0 = x; MIN/-1 = MIN and MIN%-1 = 0 (x86 traps on both)."""
    dt, x, d, idiv = u.dtype, u.src[0], u.src[1], u.op is Ops.IDIV
    ret = f"({a}{'/' if idiv else '%'}{b})"
    # NOTE: narrower ints divide in int (C's promotions), where MIN/-1 does not overflow; the result wraps on the store
    if _may_overflow_div(x, d): ret = f"(({b})==-1?{self.render_wrapping_neg(a, dt) if idiv else '0'}:{ret})"
    if d.vmin <= 0 <= d.vmax: ret = f"(({b})==0?{'0' if idiv else a}:{ret})"
    return ret
  def render_shift(self, u: UOp, a: str, b: str) -> str:
    """The amount modulo the width; a left shift in unsigned arithmetic (C: a signed overflow is undefined)."""
    dt, d, w = u.dtype, u.src[1], 8 * u.dtype.scalar().itemsize
    amt = b if 0 <= d.vmin and d.vmax < w else f"(({b})&{w - 1})"
    if u.op is Ops.SHR: return f"({a}>>{amt})"
    if dt.count > 1 or dt.scalar() in (dtypes.uint32, dtypes.uint64): return f"({a}<<{amt})"
    return f"(({self.render_dtype(dt)})(({self.render_unsigned_of(dt)})({a})<<{amt}))"
  def render_float_value(self, x: str, src: DType) -> str:
    """x (of float dtype src) as a C float/double expression; targets that store a format as bits convert here."""
    return x
  def render_float_to_int(self, x: str, src: DType, dt: DType) -> str:
    """Truncate toward zero, saturate at dt's range, NaN -> 0 (PTX cvt.rzi and LLVM fptosi.sat compute the same)."""
    wide = dtypes.float64 if src.scalar() is dtypes.float64 else dtypes.float32
    v = self.render_float_value(x, src)
    lo, hi = int(dtypes.min(dt)), int(dtypes.max(dt))
    # NOTE: hi + 1 and lo are 0 or powers of two: exact as floats, so the compares are exact
    top, bot = self.render_float(float(hi + 1), wide), self.render_float(float(lo), wide)
    t, mx, mn = self.render_dtype(dt), self.render_const(hi, dt), self.render_const(lo, dt)
    return f"(({v})!=({v})?({t})0:({v})>={top}?{mx}:({v})<{bot}?{mn}:({t})({v}))"
  def render_fma(self, a: str, b: str, c: str, dt: DType) -> str:
    """MULACC of floats: a*b+c rounded once (float16 fuses in float, then rounds to half)."""
    if dt.scalar() is dtypes.float64: return f"__builtin_fma({a}, {b}, {c})"
    ret = f"__builtin_fmaf((float){a}, (float){b}, (float){c})"
    return ret if dt.scalar() is dtypes.float32 else f"(({self.render_dtype(dt)}){ret})"
  def render_expr(self, u: UOp, r: dict[UOp, str]) -> str:
    op, dt, src = u.op, u.dtype, u.src
    if op is Ops.MULACC and dtypes.is_float(dt):
      if dt.count > 1: raise NotImplementedError(f"{type(self).__name__}: vector MULACC ({dt}) must be devectorized")
      return self.render_fma(r[src[0]], r[src[1]], r[src[2]], dt)
    if op in (Ops.IDIV, Ops.MOD) and dt.count == 1 and dtypes.is_int(dt):
      return self.render_divmod(u, r[src[0]], r[src[1]])
    if op in (Ops.SHL, Ops.SHR) and dtypes.is_int(dt): return self.render_shift(u, r[src[0]], r[src[1]])
    if op is Ops.CAST and _needs_saturation(src[0], dt):
      x, sdt = r[src[0]], src[0].dtype.scalar()
      if dt.count == 1: return self.render_float_to_int(x, sdt, dt)
      # NOTE: lane by lane: C's vector extensions have no select; the compiler may vectorize it again
      return self.render_vector(dt, [self.render_float_to_int(f"{x}[{i}]", sdt, dt.scalar()) for i in range(dt.count)])
    if op is Ops.CAST: return self.render_cast(r[src[0]], src[0].dtype, dt)
    if op is Ops.BITCAST: return self.render_bitcast(r[src[0]], src[0].dtype, dt)
    if op is Ops.GEP and len(u.arg) == 1: return f"{r[src[0]]}[{u.arg[0]}]"
    if op is Ops.GEP: return self.render_vector(dt, [f"{r[src[0]]}[{i}]" for i in u.arg])
    if op is Ops.VECTORIZE: return self.render_vector(dt, [r[s] for s in src])
    if op in GroupOp.ALU and op in self.code_for_op: return self.code_for_op[op](*[r[s] for s in src], dt)
    raise NotImplementedError(f"{type(self).__name__} cannot render {op} ({dt}); codegen should have decomposed it")

_PREFIX = {Ops.CAST: "cast", Ops.BITCAST: "bitcast", Ops.GEP: "gep", Ops.VECTORIZE: "vec", Ops.WHERE: "sel"}

def _may_overflow_div(x: UOp, d: UOp) -> bool:
  """A signed division of 32 or 64 bits whose dividend may be MIN while its divisor may be -1."""
  dt = x.dtype
  if dt.count > 1 or dt.scalar() not in (dtypes.int32, dtypes.int64): return False
  return bool(d.vmin <= -1 <= d.vmax and x.vmin <= dtypes.min(dt))

def _nan_free(x: UOp, depth: int = 4) -> bool:
  """x cannot be NaN: a number, an int converted, or +, -, *, max, where of such with finite bounds (never inf - inf or
  0 * inf). Bounds alone do not say it: fp8e4m3's range is finite, and it has a NaN."""
  if x.op is Ops.CONST: return not (isinstance(x.arg, float) and math.isnan(x.arg))
  if x.op is Ops.CAST: return not dtypes.is_float(x.src[0].dtype) or depth > 0 and _nan_free(x.src[0], depth - 1)
  if depth == 0 or x.op not in (Ops.ADD, Ops.SUB, Ops.MUL, Ops.MAX, Ops.NEG, Ops.WHERE): return False
  if not all(isinstance(b, float) and math.isfinite(b) for b in (x.vmin, x.vmax)): return False
  return all(_nan_free(s, depth - 1) for s in (x.src[1:] if x.op is Ops.WHERE else x.src))

def _needs_saturation(x: UOp, dt: DType) -> bool:
  """A float -> int cast whose operand is not proved NaN-free and, by its bounds, within the int's range."""
  if not (dtypes.is_float(x.dtype) and dtypes.is_int(dt)): return False
  lo, hi = x.vmin, x.vmax
  if not (isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and _nan_free(x)): return True
  return not (dtypes.min(dt) - 1 < lo and hi < dtypes.max(dt) + 1)

# ---- C for the CPU ----

# NOTE: bfloat16 and fp8 are stored as bits and converted with round-to-nearest-even, exactly as tinygrad/dtype.py does.
# The fp8 helpers are plain `static`, not `static inline`: the hint made gcc -O2 paste ~25 lines at every conversion,
# and a kernel with 60 conversions took 120 ms to compile (40 ms without the hint); gcc still inlines where it pays.
_C_HELPERS = r"""
static inline float __tg_bf16_to_f32(unsigned short b) {
  unsigned int u = (unsigned int)b << 16; float f; __builtin_memcpy(&f, &u, 4); return f;
}
static inline unsigned short __tg_f32_to_bf16(float f) {
  unsigned int u; __builtin_memcpy(&u, &f, 4);
  if (f != f) return (unsigned short)(0x7FC0u | ((u >> 16) & 0x8000u));
  return (unsigned short)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
static float __tg_fp8_to_f32(unsigned char b, int e4m3) {
  int mb = e4m3 ? 3 : 2, eb = e4m3 ? 4 : 5, bias = e4m3 ? 7 : 15;
  int e = (b >> mb) & ((1 << eb) - 1), m = b & ((1 << mb) - 1);
  float v;
  if (e4m3 && e == 15 && m == 7) v = __builtin_nanf("");
  else if (!e4m3 && e == 31) v = m ? __builtin_nanf("") : __builtin_inff();
  else if (e == 0) v = (float)m * (e4m3 ? 0.001953125f : 1.52587890625e-05f);
  else {
    unsigned int u = (unsigned int)(e - bias + 127) << 23 | (unsigned int)m << (23 - mb);
    __builtin_memcpy(&v, &u, 4);
  }
  return (b & 0x80) ? -v : v;
}
static unsigned char __tg_f32_to_fp8(float f, int e4m3) {
  int mb = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
  unsigned int u; __builtin_memcpy(&u, &f, 4);
  unsigned char sign = (unsigned char)((u >> 24) & 0x80u);
  u &= 0x7FFFFFFFu;
  float a; __builtin_memcpy(&a, &u, 4);
  if (a != a) return sign | (e4m3 ? 0x7F : 0x7E);
  if (e4m3 && a >= 448.0f) return sign | 0x7E;
  if (!e4m3 && a >= 61440.0f) return sign | 0x7C;
  int e = (int)(u >> 23) - 127 + bias;
  if (e >= 1) {
    int sh = 23 - mb;
    unsigned int r = u + ((1u << (sh - 1)) - 1u) + ((u >> sh) & 1u);
    return sign | (unsigned char)((r >> sh) - ((unsigned int)(127 - bias) << mb));
  }
  volatile float x = a * (e4m3 ? 512.0f : 65536.0f);
  float q = (x + 8388608.0f) - 8388608.0f;
  return sign | (unsigned char)(int)q;
}
"""

_EMULATED = (dtypes.bfloat16, dtypes.fp8e4m3, dtypes.fp8e5m2)
_SHORT = {"unsigned char": "uchar", "signed char": "char", "unsigned short": "ushort", "unsigned int": "uint",
          "long long": "long", "unsigned long long": "ulong", "_Float16": "half"}

class CRenderer(CStyleLanguage):
  """C for the CPU backend. Signature: `void name(T* data0, ..., int var0, ..., int core_id)`; core_id always last.
  `threads`: the most threads a THREAD axis may use (the CPU device passes its thread count; 1 renders no threads)."""
  device = "CPU"
  has_local = False
  has_shared = False
  has_threads = True
  global_max = None
  type_map = {dtypes.bool: "_Bool", dtypes.int8: "signed char", dtypes.uint8: "unsigned char", dtypes.int16: "short",
              dtypes.uint16: "unsigned short", dtypes.int32: "int", dtypes.uint32: "unsigned int",
              dtypes.int64: "long long", dtypes.uint64: "unsigned long long", dtypes.float16: "_Float16",
              dtypes.float32: "float", dtypes.float64: "double", dtypes.bfloat16: "unsigned short",
              dtypes.fp8e4m3: "unsigned char", dtypes.fp8e5m2: "unsigned char"}
  # gcc/clang vector extensions of 8, 4 and 2 lanes; these ops work lane-wise on them (comparisons, WHERE and MAX do
  # not). bool and the emulated dtypes (stored as bits) stay scalar
  vectors = {dt: Vectors((8, 4, 2), frozenset({Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL,
                                                Ops.SHR, Ops.CAST}))
             for dt in type_map if dt is not dtypes.bool and dt not in _EMULATED}
  # the ops C spells as a builtin function; half computes in float
  math_fns = {Ops.SQRT: "sqrt", Ops.EXP2: "exp2", Ops.LOG2: "log2", Ops.SIN: "sin", Ops.TRUNC: "trunc", Ops.POW: "pow"}

  def __init__(self, threads: int = 1):
    if not isinstance(threads, int) or threads < 1:
      raise ValueError(f"CRenderer: threads must be an int >= 1, not {threads!r}")
    self.threads = threads
  def __reduce__(self) -> tuple[Any, ...]: return (type(self), (self.threads,))
  def supports_op(self, op: Ops, dtype: DType) -> bool:
    return super().supports_op(op, dtype) or (dtype.count == 1 and op in self.math_fns)
  def extra_params(self) -> list[str]: return ["int core_id"]
  def render_special(self, u: UOp) -> str:
    if u.arg != "core_id": raise NotImplementedError(f"CRenderer: SPECIAL {u.arg!r} needs a GPU grid (CPU: core_id)")
    return "core_id"
  def vector_name(self, dt: DType) -> str:
    s = self.type_map[dt.scalar()]
    return _SHORT.get(s, s) + str(dt.count)
  def render_prefix(self, uops: list[UOp]) -> list[str]:
    dts = [u.dtype.base.vec(u.dtype.v) if isinstance(u.dtype, PtrDType) else u.dtype for u in uops]
    vecs = {d for d in dts if d.count > 1}
    lines = [_C_HELPERS.strip()] if any(u.dtype.scalar() in _EMULATED for u in uops) else []
    for d in sorted(vecs, key=lambda d: (d.scalar().priority, d.count)):
      # NOTE: aligned(element) lets a vector load/store start at any element offset
      attr = f"__attribute__((vector_size({d.itemsize}), aligned({d.scalar().itemsize})))"
      lines.append(f"typedef {self.type_map[d.scalar()]} {self.vector_name(d)} {attr};")
    return lines
  def render_cast(self, x: str, src: DType, dt: DType) -> str:
    s, d = src.scalar(), dt.scalar()
    if dt.count > 1 or src.count > 1:
      if s in _EMULATED or d in _EMULATED: raise NotImplementedError(f"CRenderer: vector cast {src} -> {dt}")
      return f"__builtin_convertvector({x}, {self.render_dtype(dt)})"
    if s is d: return x
    if s is dtypes.bfloat16: x = f"__tg_bf16_to_f32({x})"
    elif s in (dtypes.fp8e4m3, dtypes.fp8e5m2): x = f"__tg_fp8_to_f32({x}, {int(s is dtypes.fp8e4m3)})"
    if d is dtypes.bfloat16: return f"__tg_f32_to_bf16((float)({x}))"
    if d in (dtypes.fp8e4m3, dtypes.fp8e5m2): return f"__tg_f32_to_fp8((float)({x}), {int(d is dtypes.fp8e4m3)})"
    return f"(({self.type_map[d]})({x}))"
  def render_float_value(self, x: str, src: DType) -> str:
    s = src.scalar()
    if s is dtypes.bfloat16: return f"__tg_bf16_to_f32({x})"
    if s in (dtypes.fp8e4m3, dtypes.fp8e5m2): return f"__tg_fp8_to_f32({x}, {int(s is dtypes.fp8e4m3)})"
    return x
  def render_expr(self, u: UOp, r: dict[UOp, str]) -> str:
    if u.op not in self.math_fns: return super().render_expr(u, r)
    if u.dtype.count > 1: raise NotImplementedError(f"CRenderer: vector {u.op} ({u.dtype}) must be devectorized first")
    fn = "__builtin_" + self.math_fns[u.op]
    if u.dtype is dtypes.float64: return f"{fn}({', '.join(r[s] for s in u.src)})"
    ret = f"{fn}f({', '.join(f'(float){r[s]}' for s in u.src)})"
    return ret if u.dtype is dtypes.float32 else f"(({self.render_dtype(u.dtype)}){ret})"

__all__ = ["CStyleLanguage", "CRenderer"]
