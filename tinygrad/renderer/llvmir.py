"""LLVM IR renderer: one class hierarchy for the CPU (run through llvmlite's JIT) and AMD GPUs (llvmlite's AMDGPU
target).

The text is LLVM 22 IR with opaque pointers: a declared target triple and data layout, explicit address spaces (global,
local/LDS, private), declared intrinsics, loops in SSA form (a phi per RANGE), gated loads that never touch memory out
of bounds, explicit vector types with explicit alignment.

Semantics are the IR's (docs/ir.md), the ones the C backend and the PYTHON backend compute; LLVM's own rules are
stricter than C's (poison, immediate UB), so every case the IR defines and LLVM does not is guarded explicitly:
- floats: the only fast-math flag is `contract` (a*b+c may fuse into one FMA, as gcc's default -ffp-contract=fast does
  on the C path); no nnan/ninf/nsz/reassoc/arcp, so NaN, Inf and -0.0 behave as IEEE says. MAX is NaN-propagating
  `a > b || a != a ? a : b`, exactly the C backend's expression (also for -0.0 against +0.0).
- integers wrap (no nsw/nuw). IDIV/MOD truncate toward zero; a divisor of 0 or -1 is guarded where its bounds allow it:
  see `DIV_BY_ZERO` and the INT_MIN / -1 rule below. Shift amounts are taken modulo the width (`_shift`).
- bool arithmetic is C's (on 0/1, then != 0): ADD is OR, NEG the identity. MULACC of floats is fused (llvm.fma).
- float -> int casts saturate (`llvm.fptosi.sat`/`llvm.fptoui.sat`: out of range clamps, NaN gives 0).
- bool is i1 in registers and one byte (0/1) in memory; bfloat16 and fp8 are held as their bits (i16/i8) and converted
  with round-to-nearest-even by the helper functions of renderer/llvm_helpers.py, bit for bit as the C backend's.
"""
from __future__ import annotations
import math, struct
from dataclasses import dataclass, field
from typing import Any, Callable
from tinygrad.uop import Ops, GroupOp
from tinygrad.uop.ops import UOp
from tinygrad.dtype import DType, PtrDType, AddrSpace, dtypes, float_to_bf16, float_to_fp8, DTYPES_DICT
from tinygrad.renderer import Renderer, Vectors
from tinygrad.renderer.tensor_cores import AMD_TENSOR_CORES, TensorCore, tensor_core
from tinygrad.renderer.archs import AMD_DEFAULT_ARCH, AMD_DATALAYOUT, AMD_CODE_OBJECT_VERSION, amd_arch
from tinygrad.renderer.llvm_helpers import fmf, hex_double, HELPER_IR, TO_F32, FROM_F32
from tinygrad.codegen.llvm_vectorize import llvm_matcher

# ---- the semantics of the cases LLVM leaves undefined (one place; the PYTHON backend and constant folding agree) ----

# x // 0 and x % 0 for integers: the quotient reads 0 and the remainder reads x (what the PYTHON backend computes)
DIV_BY_ZERO = {Ops.IDIV: "zero", Ops.MOD: "dividend"}
EMULATED = (dtypes.bfloat16, dtypes.fp8e4m3, dtypes.fp8e5m2)

# NOTE: LLVM 22's loop vectorizer miscompiles an address that takes a loop's index modulo a power of two, `x[b + r % 4]`
# with b invariant in the loop (instcombine makes the add a disjoint or, the mod an and): lanes it widens past the
# modulus read consecutive elements (r % 4 taken as r) or one hoisted vector for every iteration. 242 of 480 sums
# `x[(i % 4) * m + (r * s + o) % c]` with r over 33..257 steps (not a multiple of c) gave wrong values at O2, none with
# the loop vectorizer off (docs/fuzz.md; tests/fuzz/llvm22_vectorized_mod_of_index.ll). Such loops are marked with
# llvm.loop.vectorize.enable = false: codegen's own vectors (UPCAST) are unaffected, and the kernels of the bench's
# training steps that get the mark ran as fast with it.
def _wrapping_ranges(uops: list[UOp]) -> set[UOp]:
  """The RANGEs some integer MOD or AND computes from through index arithmetic (ALU ops and casts, not loads)."""
  reads: dict[UOp, frozenset[UOp]] = {}
  out: set[UOp] = set()
  for u in uops:
    if u.op is Ops.RANGE: reads[u] = frozenset((u,))
    elif u.op in GroupOp.ALU or u.op is Ops.CAST:
      reads[u] = frozenset().union(*(reads.get(s, frozenset()) for s in u.src))
      if u.op in (Ops.MOD, Ops.AND) and dtypes.is_int(u.dtype.scalar()): out |= reads[u]
  return out

# ---- types ----

_INT_T = {1: "i8", 2: "i16", 4: "i32", 8: "i64"}
_FLOAT_T = {dtypes.float16: "half", dtypes.float32: "float", dtypes.float64: "double"}

def scalar_type(dt: DType) -> str:
  """The register type of a scalar dtype (bool is i1; bfloat16 and fp8 are their bits)."""
  s = dt.scalar()
  if s is dtypes.bool: return "i1"
  if s in _FLOAT_T: return _FLOAT_T[s]
  if s in EMULATED or dtypes.is_int(s): return _INT_T[s.itemsize]
  raise NotImplementedError(f"LLVM IR has no type for {dt}")

def ltype(dt: DType) -> str:
  """The register type of a value dtype: scalar, or `<N x T>`."""
  if isinstance(dt, PtrDType): raise TypeError(f"ltype: {dt} is a pointer (use the address space's ptr type)")
  return f"<{dt.count} x {scalar_type(dt)}>" if dt.count > 1 else scalar_type(dt)

def mem_type(dt: DType) -> str:
  """The in-memory type: bool is a byte there."""
  if dt.scalar() is dtypes.bool: return f"<{dt.count} x i8>" if dt.count > 1 else "i8"
  return ltype(dt)


def render_const(v: Any, dt: DType) -> str:
  """A scalar constant as LLVM spells it: floats in hex (exact), ints two's complement, bools true/false."""
  s = dt.scalar()
  if s is dtypes.bool: return "true" if v else "false"
  if s is dtypes.bfloat16: return str(_signed(float_to_bf16(float(v)), 16))
  if s in (dtypes.fp8e4m3, dtypes.fp8e5m2): return str(_signed(float_to_fp8(float(v), s), 8))
  if s is dtypes.float16:
    return "0xH%04X" % struct.unpack("<H", struct.pack("<e", float(v)))[0]
  if s in _FLOAT_T:
    f = float(v)
    # NOTE: a float constant is written as the double of the same value (LLVM's rule); NaN as the canonical quiet NaN
    if math.isnan(f): return "0xFFF8000000000000" if math.copysign(1.0, f) < 0 else "0x7FF8000000000000"
    if s is dtypes.float32: f = struct.unpack("<f", struct.pack("<f", f))[0]
    return hex_double(f)
  return str(_signed(int(v), s.itemsize * 8))

def _signed(v: int, bits: int) -> int:
  v &= (1 << bits) - 1
  return v - (1 << bits) if v >> (bits - 1) else v

def _vec_const(vals: list[Any], dt: DType) -> str:
  t = scalar_type(dt)
  return "<" + ", ".join(f"{t} {render_const(v, dt)}" for v in vals) + ">"

def _is_float(dt: DType) -> bool: return dt.scalar() in _FLOAT_T
def _is_signed(dt: DType) -> bool: return dtypes.is_int(dt) and not dtypes.is_unsigned(dt)
def _intr_suffix(dt: DType) -> str:
  base = {"half": "f16", "float": "f32", "double": "f64"}.get(scalar_type(dt), scalar_type(dt))
  return f"v{dt.count}{base}" if dt.count > 1 else base

# ---- one render ----

@dataclass
class _Loop:
  var: str
  header: str
  body: str
  exit: str
  phi_at: int        # index of the phi line in the output, patched when the latch is known

@dataclass
class _State:
  """The state of one render: the value of every UOp, fresh names, the lines, the current block."""
  r: dict[UOp, str] = field(default_factory=dict)
  lines: list[str] = field(default_factory=list)
  allocas: list[str] = field(default_factory=list)
  globals: list[str] = field(default_factory=list)
  decls: dict[str, str] = field(default_factory=dict)
  params: list[tuple[tuple[int, Any], str]] = field(default_factory=list)
  loops: list[_Loop] = field(default_factory=list)
  ifs: list[tuple[str, str]] = field(default_factory=list)
  helpers: set[str] = field(default_factory=set)
  # loops LLVM's loop vectorizer must leave scalar (_wrapping_ranges), and the metadata nodes that say so, numbered
  # from meta_base (after the module flags)
  no_vectorize: set[UOp] = field(default_factory=set)
  meta_base: int = 0
  meta: list[str] = field(default_factory=list)
  n: int = 0
  block: str = "entry"
  def no_vectorize_loop(self) -> str:
    """The `!llvm.loop` node of one more loop whose vectorization is disabled (each loop has its own, distinct node)."""
    if not self.meta: self.meta.append(f'!{self.meta_base} = !{{!"llvm.loop.vectorize.enable", i1 false}}')
    k = self.meta_base + len(self.meta)
    self.meta.append(f"!{k} = distinct !{{!{k}, !{self.meta_base}}}")
    return f"!{k}"
  def fresh(self, prefix: str = "v") -> str:
    self.n += 1
    return f"%{prefix}{self.n}"
  def label(self, prefix: str) -> str:
    self.n += 1
    return f"{prefix}{self.n}"
  def emit(self, line: str) -> None: self.lines.append("  " + line)
  def start_block(self, name: str) -> None:
    self.lines.append(f"{name}:")
    self.block = name
  def declare(self, name: str, ret: str, args: list[str], attrs: str = "") -> str:
    self.decls.setdefault(name, f"declare {ret} @{name}({', '.join(args)}){(' ' + attrs) if attrs else ''}")
    return f"@{name}"

# ops every LLVM target computes lane-wise on vectors
LLVM_VECTOR_OPS = frozenset({Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.AND, Ops.OR, Ops.XOR, Ops.MAX, Ops.NEG, Ops.CAST,
                             Ops.MULACC, Ops.SQRT, Ops.TRUNC, Ops.RECIPROCAL})

# and on the CPU: compares and selects (bool vectors), shifts, integer division, bitcasts
CPU_VECTOR_OPS = LLVM_VECTOR_OPS | {Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ, Ops.WHERE, Ops.SHL, Ops.SHR, Ops.IDIV, Ops.MOD,
                                    Ops.BITCAST}

class LLVMRenderer(Renderer):
  """LLVM IR for one target. Subclasses set the triple, the data layout, the address spaces, the kernel's calling
  convention and parameters, and how grid ids and barriers are spelled."""
  triple = ""
  datalayout = ""
  addrspace: dict[AddrSpace, int] = {AddrSpace.GLOBAL: 0, AddrSpace.LOCAL: 0, AddrSpace.REG: 0}
  kernel_cc = ""
  # every LLVM target has vectors of any width (it legalizes what its registers do not hold): codegen packs 8, 4 and 2
  # lanes, the final rules (llvm_matcher) any width; bool and the emulated dtypes (held as bits) stay scalar
  vectors = {dt: Vectors((8, 4, 2), LLVM_VECTOR_OPS) for dt in DTYPES_DICT.values()
             if dt not in (dtypes.void, dtypes.index, dtypes.bool, *EMULATED)}
  # vectorize_load turns gated lanes into llvm.masked.load
  masked_loads = True
  # the triple and data layout change the module text (a CPU subclass adds its vector width)
  IDENTITY = Renderer.IDENTITY + ("triple", "datalayout")
  # the scalar ops rendered natively (codegen decomposes THREEFRY; subclasses add the transcendentals they have)
  code_for_op = {op: True for op in (Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.IDIV, Ops.MOD, Ops.NEG, Ops.RECIPROCAL,
                                     Ops.SQRT, Ops.TRUNC, Ops.MAX, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ, Ops.AND, Ops.OR,
                                     Ops.XOR, Ops.SHL, Ops.SHR, Ops.WHERE, Ops.MULACC)}

  # ---- target hooks ----
  def ptr_type(self, space: AddrSpace) -> str:
    a = self.addrspace[space]
    return f"ptr addrspace({a})" if a else "ptr"
  def kernel_params(self, st: _State) -> list[str]: return [p for _, p in sorted(st.params)]
  def kernel_attrs(self, uops: list[UOp]) -> str: return "nounwind"
  def render_special(self, st: _State, u: UOp) -> str:
    raise NotImplementedError(f"{type(self).__name__}: no SPECIAL {u.arg!r}")
  def render_barrier(self, st: _State) -> None:
    raise NotImplementedError(f"{type(self).__name__} has no BARRIER")
  def module_flags(self) -> list[str]: return []
  def renders_intrinsic(self, op: Ops, dt: DType) -> bool:
    """Whether render_alu has a lowering of the intrinsic `op` on `dt`: the target has it for the scalar dtype (the
    final rules pack lanes of any width, which LLVM legalizes)."""
    return self.supports_op(op, dt.scalar())
  def acc_widths(self, dt: DType) -> tuple[int, ...]:
    """Lane counts of the vector accumulators pack_accumulators builds for `dt`, widest first (none: it never runs)."""
    return ()

  # ---- the module ----
  def render(self, uops: list[UOp], name: str = "kernel") -> str:
    """The module: one kernel `name` whose parameters are the buffers in DEFINE_GLOBAL order, then the DEFINE_VARs by
    name, then what the target adds (the CPU's core_id)."""
    flags = self.module_flags()
    st = _State(no_vectorize=_wrapping_ranges(uops), meta_base=len(flags))
    for u in uops:
      if u.op in (Ops.SINK, Ops.GROUP): continue
      if (h := _HANDLERS.get(u.op)) is not None: h(self, st, u)
      elif u.op in GroupOp.ALU: st.r[u] = self.render_alu(st, u)
      else: raise NotImplementedError(f"{type(self).__name__} cannot render {u.op} ({u.dtype})")
    if st.loops or st.ifs:
      raise ValueError(f"LLVM render of {name}: {len(st.loops)} loops and {len(st.ifs)} IFs are not closed")
    st.emit("ret void")
    head = [f'; kernel {name}', f'target datalayout = "{self.datalayout}"', f'target triple = "{self.triple}"', ""]
    cc = self.kernel_cc + " " if self.kernel_cc else ""
    body = [f'define {cc}void @"{name}"({", ".join(self.kernel_params(st))}) #0 {{', "entry:",
            *["  " + a for a in st.allocas], *st.lines, "}"]
    helpers = [HELPER_IR[h] for h in sorted(st.helpers)]
    tail = [f"attributes #0 = {{ {self.kernel_attrs(uops)} }}"]
    if flags: tail += [f"!llvm.module.flags = !{{{', '.join(f'!{i}' for i in range(len(flags)))}}}"] + \
                      [f"!{i} = {f}" for i, f in enumerate(flags)]
    tail += st.meta
    return "\n".join(head + st.globals + ([""] if st.globals else []) + body + [""] + helpers +
                     sorted(st.decls.values()) + [""] + tail) + "\n"

  # ---- definitions ----
  def _global(self, st: _State, u: UOp) -> None:
    st.r[u] = f"%data{u.arg}"
    st.params.append(((0, u.arg), f"{self.ptr_type(AddrSpace.GLOBAL)} %data{u.arg}"))
  def _var(self, st: _State, u: UOp) -> None:
    st.r[u] = f"%{u.arg[0]}"
    st.params.append(((1, u.arg[0]), f"{ltype(u.dtype)} %{u.arg[0]}"))
  def _reg(self, st: _State, u: UOp) -> None:
    assert isinstance(u.dtype, PtrDType)
    st.r[u] = v = f"%acc{u.arg}"
    a = self.addrspace[AddrSpace.REG]
    # NOTE: an array of a cache line or more (a packed panel, OptOps.PACK) starts on a cache line, so the vector loads
    # of its rows never straddle two lines
    al = 64 if u.dtype.size * u.dtype.base.itemsize >= 64 else _align(u.dtype.base)
    st.allocas.append(f"{v} = alloca [{u.dtype.size} x {mem_type(u.dtype.base)}], align {al}"
                      + (f", addrspace({a})" if a else ""))
  def _local(self, st: _State, u: UOp) -> None:
    assert isinstance(u.dtype, PtrDType)
    st.r[u] = v = f"@smem{u.arg}"
    st.globals.append(f"{v} = internal addrspace({self.addrspace[AddrSpace.LOCAL]}) global "
                      f"[{u.dtype.size} x {mem_type(u.dtype.base)}] undef, align 16")

  # ---- control flow ----
  def _range(self, st: _State, u: UOp) -> None:
    t, end = ltype(u.dtype), st.r[u.src[0]]
    v, hdr, body, ext = st.fresh("ridx"), st.label("loop"), st.label("body"), st.label("exit")
    pre = st.block
    st.emit(f"br label %{hdr}")
    st.start_block(hdr)
    st.lines.append("")  # the phi, patched at the END (when the latch block is known)
    loop = _Loop(v, hdr, body, ext, len(st.lines) - 1)
    st.lines[loop.phi_at] = f"  {v} = phi {t} [ 0, %{pre} ]"
    c = st.fresh()
    st.emit(f"{c} = icmp slt {t} {v}, {end}")
    st.emit(f"br i1 {c}, label %{body}, label %{ext}")
    st.start_block(body)
    st.loops.append(loop)
    st.r[u] = v
  def _end(self, st: _State, u: UOp) -> None:
    loop = st.loops.pop()
    if st.r[u.src[1]] != loop.var: raise ValueError(f"LLVM render: END of {u.src[1].arg} closes a different loop")
    t = ltype(u.src[1].dtype)
    nxt = st.fresh()
    st.emit(f"{nxt} = add {t} {loop.var}, 1")
    meta = f", !llvm.loop {st.no_vectorize_loop()}" if u.src[1] in st.no_vectorize else ""
    st.emit(f"br label %{loop.header}{meta}")
    st.lines[loop.phi_at] += f", [ {nxt}, %{st.block} ]"
    st.start_block(loop.exit)
  def _if(self, st: _State, u: UOp) -> None:
    then, after = st.label("if"), st.label("endif")
    st.emit(f"br i1 {st.r[u.src[0]]}, label %{then}, label %{after}")
    st.start_block(then)
    st.ifs.append((then, after))
  def _endif(self, st: _State, u: UOp) -> None:
    _, after = st.ifs.pop()
    st.emit(f"br label %{after}")
    st.start_block(after)

  # ---- memory ----
  def _index(self, st: _State, u: UOp) -> None:
    buf, idx = u.src[0], u.src[1]
    bdt = buf.dtype
    assert isinstance(bdt, PtrDType)
    pt = self.ptr_type(bdt.addrspace)
    st.r[u] = p = st.fresh("p")
    i = st.r[idx]
    if len(u.src) == 3 and u.src[2].dtype.count > 1:
      # NOTE: a masked vector access (a gate per lane): llvm.masked.load reads no masked-off lane, so the address is
      # never made safe; without `inbounds`, since the lanes past the buffer's end may lie outside it
      st.emit(f"{p} = getelementptr {mem_type(bdt.base)}, {pt} {st.r[buf]}, {ltype(idx.dtype)} {i}")
      return
    if len(u.src) == 3 and _index0_ok(bdt):
      # NOTE: the gated index may be out of bounds; a gated load reads through index 0 (in bounds) instead
      i2 = st.fresh()
      st.emit(f"{i2} = select i1 {st.r[u.src[2]]}, {ltype(idx.dtype)} {i}, {ltype(idx.dtype)} 0")
      i = i2
    st.emit(f"{p} = getelementptr inbounds {mem_type(bdt.base)}, {pt} {st.r[buf]}, {ltype(idx.dtype)} {i}")
  def _load(self, st: _State, u: UOp) -> None:
    idx = u.src[0]
    bdt = idx.src[0].dtype
    assert isinstance(bdt, PtrDType)
    pt = self.ptr_type(bdt.addrspace)
    if len(u.src) == 2 and not _index0_ok(bdt):
      # NOTE: the buffer has no element at all: the gate is false wherever the load runs, so it reads the alternative
      st.r[u] = st.r[u.src[1]]
      return
    if len(u.src) == 2 and idx.src[2].dtype.count > 1:
      st.r[u] = self._masked_load(st, u, bdt)
      return
    v = st.fresh()
    st.emit(f"{v} = load {mem_type(u.dtype)}, {pt} {st.r[idx]}, align {_mem_align(u.dtype, bdt)}")
    v = self._from_mem(st, v, u.dtype)
    if len(u.src) == 2:
      # a gated load: the index was made safe (index 0), the value is the alternative where the gate is false
      g, alt = st.r[idx.src[2]], st.r[u.src[1]]
      st.r[u] = st.fresh()
      st.emit(f"{st.r[u]} = select i1 {g}, {ltype(u.dtype)} {v}, {ltype(u.dtype)} {alt}")
    else: st.r[u] = v
  def _masked_load(self, st: _State, u: UOp, bdt: PtrDType) -> str:
    """LOAD(INDEX(buf, idx, gates), alts) of n lanes: lane j reads element idx+j where its gate holds, else its alt."""
    if bdt.base.count != 1:
      raise NotImplementedError(f"{type(self).__name__}: masked vector LOAD of {u.dtype} from {bdt}: only plain "
                                "element buffers")
    # NOTE: bool lanes are bytes in memory: the bytes are loaded (the alternatives as bytes) and compared with 0
    t, pt = mem_type(u.dtype), self.ptr_type(bdt.addrspace)
    n, space = u.dtype.count, self.addrspace[bdt.addrspace]
    suffix = f"v{n}i8" if u.dtype.scalar() is dtypes.bool else _intr_suffix(u.dtype)
    fn = st.declare(f"llvm.masked.load.{suffix}.p{space}", t, [pt, f"<{n} x i1>", t])
    v = st.fresh()
    st.emit(f"{v} = call {t} {fn}({pt} align {_mem_align(u.dtype, bdt)} {st.r[u.src[0]]}, <{n} x i1> "
            f"{st.r[u.src[0].src[2]]}, {t} {self._to_mem(st, st.r[u.src[1]], u.dtype)})")
    return self._from_mem(st, v, u.dtype)
  def _store(self, st: _State, u: UOp) -> None:
    idx, val = u.src
    bdt = idx.src[0].dtype
    assert isinstance(bdt, PtrDType)
    v = self._to_mem(st, st.r[val], val.dtype)
    st.emit(f"store {mem_type(val.dtype)} {v}, {self.ptr_type(bdt.addrspace)} {st.r[idx]}, "
            f"align {_mem_align(val.dtype, bdt)}")
  def _from_mem(self, st: _State, v: str, dt: DType) -> str:
    if dt.scalar() is not dtypes.bool: return v
    r = st.fresh()
    st.emit(f"{r} = icmp ne {mem_type(dt)} {v}, {_zero(mem_type(dt))}")
    return r
  def _to_mem(self, st: _State, v: str, dt: DType) -> str:
    if dt.scalar() is not dtypes.bool: return v
    r = st.fresh()
    st.emit(f"{r} = zext {ltype(dt)} {v} to {mem_type(dt)}")
    return r

  # ---- values ----
  def _const(self, st: _State, u: UOp) -> None:
    st.r[u] = render_const(u.arg, u.dtype) if u.dtype.count == 1 else _vec_const([u.arg] * u.dtype.count, u.dtype)
  def _vconst(self, st: _State, u: UOp) -> None: st.r[u] = _vec_const(list(u.arg), u.dtype)
  def _gep(self, st: _State, u: UOp) -> None:
    src = u.src[0]
    st.r[u] = v = st.fresh()
    if len(u.arg) == 1: st.emit(f"{v} = extractelement {ltype(src.dtype)} {st.r[src]}, i32 {u.arg[0]}")
    else:
      mask = ", ".join(f"i32 {i}" for i in u.arg)
      st.emit(f"{v} = shufflevector {ltype(src.dtype)} {st.r[src]}, {ltype(src.dtype)} poison, <{len(u.arg)} x i32> "
              f"<{mask}>")
  def _vectorize(self, st: _State, u: UOp) -> None:
    t, et = ltype(u.dtype), scalar_type(u.dtype)
    if all(s is u.src[0] for s in u.src):
      # a broadcast: one insert and a splat shuffle
      one = st.fresh()
      st.emit(f"{one} = insertelement <1 x {et}> poison, {et} {st.r[u.src[0]]}, i32 0")
      st.r[u] = v = st.fresh()
      st.emit(f"{v} = shufflevector <1 x {et}> {one}, <1 x {et}> poison, <{u.dtype.count} x i32> zeroinitializer")
      return
    cur = "poison"
    for i, s in enumerate(u.src):
      nv = st.fresh()
      st.emit(f"{nv} = insertelement {t} {cur}, {et} {st.r[s]}, i32 {i}")
      cur = nv
    st.r[u] = cur
  def _cast(self, st: _State, u: UOp) -> None: st.r[u] = self.cast(st, st.r[u.src[0]], u.src[0].dtype, u.dtype)
  def _bitcast(self, st: _State, u: UOp) -> None:
    src = u.src[0]
    if ltype(src.dtype) == ltype(u.dtype): st.r[u] = st.r[src]; return
    st.r[u] = v = st.fresh()
    # NOTE: a bool's byte is 0 or 1; a byte read as bool is byte != 0 (tinygrad/uop/semantics.py)
    if src.dtype.scalar() is dtypes.bool:
      st.emit(f"{v} = zext {ltype(src.dtype)} {st.r[src]} to {ltype(u.dtype)}")
      return
    if u.dtype.scalar() is dtypes.bool:
      st.emit(f"{v} = icmp ne {ltype(src.dtype)} {st.r[src]}, {_zero(ltype(src.dtype), src.dtype)}")
      return
    st.emit(f"{v} = bitcast {ltype(src.dtype)} {st.r[src]} to {ltype(u.dtype)}")

  def cast(self, st: _State, x: str, src: DType, dt: DType) -> str:
    """CAST, C's conversions except where C is undefined: float -> int saturates (NaN -> 0)."""
    s, d = src.scalar(), dt.scalar()
    if s is d: return x
    if (s in EMULATED or d in EMULATED) and dt.count > 1:
      raise NotImplementedError(f"LLVM: vector cast {src} -> {dt} of an emulated dtype (codegen keeps them scalar)")
    if s in EMULATED:
      return self.cast(st, self._call_helper(st, TO_F32[s], "float", [f"{scalar_type(s)} {x}"]), dtypes.float32, dt)
    if d in EMULATED:
      f = self.cast(st, x, src, dtypes.float32)
      return self._call_helper(st, FROM_F32[d], scalar_type(d), [f"float {f}"])
    st_, dt_ = ltype(src), ltype(dt)
    v = st.fresh()
    if d is dtypes.bool:
      op = f"fcmp une {st_} {x}, {_zero(st_, src)}" if _is_float(s) else f"icmp ne {st_} {x}, {_zero(st_, src)}"
      st.emit(f"{v} = {op}")
    elif s is dtypes.bool:
      st.emit(f"{v} = {'uitofp' if _is_float(d) else 'zext'} {st_} {x} to {dt_}")
    elif s is dtypes.float64 and d is dtypes.float16: return self._f64_to_f16(st, x, src, dt)
    elif _is_float(s) and _is_float(d):
      st.emit(f"{v} = {'fpext' if d.itemsize > s.itemsize else 'fptrunc'} {st_} {x} to {dt_}")
    elif _is_float(s):
      # NOTE: from half through float (exact): LLVM 22's x86 lowering of fptosi.sat.i16.f16 turns NaN into -32768
      if s is dtypes.float16:
        f32 = dtypes.float32.vec(dt.count)
        return self.cast(st, self.cast(st, x, src, f32), f32, dt)
      fn = f"llvm.fpto{'s' if _is_signed(d) else 'u'}i.sat.{_intr_suffix(dt)}.{_intr_suffix(src)}"
      st.emit(f"{v} = call {dt_} {st.declare(fn, dt_, [st_])}({st_} {x})")
    elif _is_float(d):
      st.emit(f"{v} = {'sitofp' if _is_signed(s) else 'uitofp'} {st_} {x} to {dt_}")
    elif d.itemsize < s.itemsize: st.emit(f"{v} = trunc {st_} {x} to {dt_}")
    elif d.itemsize > s.itemsize: st.emit(f"{v} = {'sext' if _is_signed(s) else 'zext'} {st_} {x} to {dt_}")
    else: return x  # same width, other signedness: the same bits
    return v
  def _f64_to_f16(self, st: _State, x: str, src: DType, dt: DType) -> str:
    """double -> half, rounded once: double -> float rounded to odd (the inexact ones get their last bit set), then
    float -> half to nearest even, which is exact for that (float keeps 13 bits more than half). No x86 instruction
    does double -> half, and LLVM's libcall for it (__truncdfhf2) is not in a process that has not loaded libgcc_s."""
    d_t, f_t, i_t = ltype(src), ltype(dtypes.float32.vec(dt.count)), ltype(dtypes.int32.vec(dt.count))
    f, back, inexact, ax, ab, away, bits, down, odd, pick, keep, g, v = (st.fresh() for _ in range(13))
    fabs = st.declare(f"llvm.fabs.{_intr_suffix(src)}", d_t, [d_t])
    one = _splat("1", dtypes.int32.vec(dt.count))
    st.emit(f"{f} = fptrunc {d_t} {x} to {f_t}")
    st.emit(f"{back} = fpext {f_t} {f} to {d_t}")
    st.emit(f"{inexact} = fcmp one {d_t} {back}, {x}")
    st.emit(f"{ax} = call {d_t} {fabs}({d_t} {x})")
    st.emit(f"{ab} = call {d_t} {fabs}({d_t} {back})")
    st.emit(f"{away} = fcmp ogt {d_t} {ab}, {ax}")
    st.emit(f"{bits} = bitcast {f_t} {f} to {i_t}")
    st.emit(f"{down} = sub {i_t} {bits}, {one}")
    st.emit(f"{pick} = select {ltype(dtypes.bool.vec(dt.count))} {away}, {i_t} {down}, {i_t} {bits}")
    st.emit(f"{odd} = or {i_t} {pick}, {one}")
    st.emit(f"{keep} = select {ltype(dtypes.bool.vec(dt.count))} {inexact}, {i_t} {odd}, {i_t} {bits}")
    st.emit(f"{g} = bitcast {i_t} {keep} to {f_t}")
    st.emit(f"{v} = fptrunc {f_t} {g} to {ltype(dt)}")
    return v

  def _call_helper(self, st: _State, fn: str, ret: str, args: list[str]) -> str:
    st.helpers.add(fn)
    v = st.fresh()
    st.emit(f"{v} = call {ret} @{fn}({', '.join(args)})")
    return v

  # ---- ALU ----
  def render_alu(self, st: _State, u: UOp) -> str:
    op, dt = u.op, u.dtype
    srcs = [st.r[s] for s in u.src]
    t = ltype(u.src[-1].dtype)
    v = st.fresh()
    if op is Ops.WHERE:
      st.emit(f"{v} = select {ltype(u.src[0].dtype)} {srcs[0]}, {t} {srcs[1]}, {t} {srcs[2]}")
    elif op in GroupOp.Comparison: st.emit(f"{v} = {_cmp(op, u.src[0].dtype)} {t} {srcs[0]}, {srcs[1]}")
    elif op is Ops.MAX: return self._max(st, srcs[0], srcs[1], dt)
    elif op in (Ops.IDIV, Ops.MOD): return self._divmod(st, u, srcs[0], srcs[1])
    elif op in (Ops.SHL, Ops.SHR): return self._shift(st, u, srcs[0], srcs[1])
    elif op is Ops.MULACC:
      if dt.scalar() is dtypes.bool:
        # NOTE: bool arithmetic is C's, on 0/1 then != 0 (tinygrad/uop/semantics.py): (a AND b) OR c
        m = st.fresh()
        st.emit(f"{m} = and {t} {srcs[0]}, {srcs[1]}")
        st.emit(f"{v} = or {t} {m}, {srcs[2]}")
      elif not _is_float(dt):
        m = st.fresh()
        st.emit(f"{m} = mul {t} {srcs[0]}, {srcs[1]}")
        st.emit(f"{v} = add {t} {m}, {srcs[2]}")
      else: return self._fma(st, srcs, dt)
    elif op is Ops.NEG:
      if _is_float(dt): st.emit(f"{v} = fneg {fmf(dt)} {t} {srcs[0]}")
      # NOTE: C's -b on a bool is -1 or 0, then != 0: the identity (tinygrad/uop/semantics.py)
      elif dt.scalar() is dtypes.bool: return srcs[0]
      else: st.emit(f"{v} = sub {t} {_zero(t, dt)}, {srcs[0]}")
    elif op is Ops.ADD and dt.scalar() is dtypes.bool: st.emit(f"{v} = or {t} {srcs[0]}, {srcs[1]}")
    elif op is Ops.RECIPROCAL:
      if not _is_float(dt): raise NotImplementedError(f"LLVM: RECIPROCAL of {dt}")
      st.emit(f"{v} = fdiv {fmf(dt)} {t} {_splat(render_const(1.0, dt.scalar()), dt)}, {srcs[0]}")
    elif op in _INTRINSIC:
      if not _is_float(dt): raise NotImplementedError(f"LLVM: {op} of {dt}")
      # NOTE: an intrinsic the target has no lowering for aborts LLVM's instruction selection (the whole process):
      # refuse it here (found by fuzz: POW on AMD, which codegen does not decompose)
      if not self.renders_intrinsic(op, dt):
        raise NotImplementedError(f"{type(self).__name__}: {op} on {dt} is not supported by this target and codegen "
                                  "has no decomposition of it")
      fn = st.declare(f"llvm.{_INTRINSIC[op]}.{_intr_suffix(dt)}", t, [t] * len(srcs))
      st.emit(f"{v} = call {fmf(dt)} {t} {fn}({', '.join(f'{t} {s}' for s in srcs)})")
    elif op in _BINARY:
      iop, fop = _BINARY[op]
      if _is_float(dt):
        if fop is None: raise NotImplementedError(f"LLVM: {op} of {dt}")
        st.emit(f"{v} = {fop} {fmf(dt)} {t} {srcs[0]}, {srcs[1]}")
      else:
        if iop is None: raise NotImplementedError(f"LLVM: {op} of {dt}")
        st.emit(f"{v} = {iop} {t} {srcs[0]}, {srcs[1]}")
    else: raise NotImplementedError(f"{type(self).__name__} cannot render {op} ({dt}); codegen should decompose it")
    return v

  def _fma(self, st: _State, srcs: list[str], dt: DType) -> str:
    """MULACC of floats is fused, one rounding (llvm.fma, never fmuladd: that one may round twice); half fuses in float
    and rounds that to half, as the semantics table defines it."""
    t = ltype(dt)
    if dt.scalar() is not dtypes.float16:
      fn = st.declare(f"llvm.fma.{_intr_suffix(dt)}", t, [t, t, t])
      v = st.fresh()
      st.emit(f"{v} = call {t} {fn}({t} {srcs[0]}, {t} {srcs[1]}, {t} {srcs[2]})")
      return v
    ft = ltype(dtypes.float32.vec(dt.count))
    ext = []
    for x in srcs:
      e = st.fresh()
      st.emit(f"{e} = fpext {t} {x} to {ft}")
      ext.append(e)
    fn = st.declare(f"llvm.fma.{_intr_suffix(dtypes.float32.vec(dt.count))}", ft, [ft, ft, ft])
    w, v = st.fresh(), st.fresh()
    st.emit(f"{w} = call {ft} {fn}({ft} {ext[0]}, {ft} {ext[1]}, {ft} {ext[2]})")
    st.emit(f"{v} = fptrunc {ft} {w} to {t}")
    return v

  def _max(self, st: _State, a: str, b: str, dt: DType) -> str:
    t, c, v = ltype(dt), st.fresh(), st.fresh()
    if _is_float(dt):
      # NOTE: NaN-correct and -0.0 exactly as the C backend: a > b || a != a ? a : b
      gt, nan = st.fresh(), st.fresh()
      bt = ltype(dtypes.bool.vec(dt.count)) if dt.count > 1 else "i1"
      st.emit(f"{gt} = fcmp ogt {t} {a}, {b}")
      st.emit(f"{nan} = fcmp uno {t} {a}, {a}")
      st.emit(f"{c} = or {bt} {gt}, {nan}")
    elif dt.scalar() is dtypes.bool:
      st.emit(f"{v} = or {t} {a}, {b}")
      return v
    else: st.emit(f"{c} = icmp {'s' if _is_signed(dt) else 'u'}gt {t} {a}, {b}")
    st.emit(f"{v} = select {'i1' if dt.count == 1 else ltype(dtypes.bool.vec(dt.count))} {c}, {t} {a}, {t} {b}")
    return v

  def _divmod(self, st: _State, u: UOp, a: str, b: str) -> str:
    """Truncating division (C). x/0 and x%0 are guarded (DIV_BY_ZERO), and so is INT_MIN / -1 (LLVM: immediate UB;
    x86 traps): the quotient wraps to INT_MIN (negation), the remainder is 0."""
    dt, d = u.dtype, u.src[1]
    t = ltype(dt)
    signed = _is_signed(dt)
    op = ("sdiv" if signed else "udiv") if u.op is Ops.IDIV else ("srem" if signed else "urem")
    may_zero = _may_be(d, 0)
    may_m1 = signed and _may_be(d, -1)
    if not may_zero and not may_m1:
      v = st.fresh()
      st.emit(f"{v} = {op} {t} {a}, {b}")
      return v
    bt = "i1" if dt.count == 1 else f"<{dt.count} x i1>"
    one, zero, m1 = _splat("1", dt), _zero(t, dt), _splat("-1", dt)
    bad = st.fresh()
    if may_zero and may_m1:
      z, n = st.fresh(), st.fresh()
      st.emit(f"{z} = icmp eq {t} {b}, {zero}")
      st.emit(f"{n} = icmp eq {t} {b}, {m1}")
      st.emit(f"{bad} = or {bt} {z}, {n}")
    else: st.emit(f"{bad} = icmp eq {t} {b}, {zero if may_zero else m1}")
    safe, q = st.fresh(), st.fresh()
    st.emit(f"{safe} = select {bt} {bad}, {t} {one}, {t} {b}")
    st.emit(f"{q} = {op} {t} {a}, {safe}")
    ret = q
    if may_m1:
      # b == -1: a / -1 = -a (wrapping), a % -1 = 0
      n2, alt, r2 = st.fresh(), st.fresh(), st.fresh()
      st.emit(f"{n2} = icmp eq {t} {b}, {m1}")
      if u.op is Ops.IDIV: st.emit(f"{alt} = sub {t} {zero}, {a}")
      st.emit(f"{r2} = select {bt} {n2}, {t} {alt if u.op is Ops.IDIV else zero}, {t} {ret}")
      ret = r2
    if may_zero:
      z2, r3 = st.fresh(), st.fresh()
      st.emit(f"{z2} = icmp eq {t} {b}, {zero}")
      by_zero = zero if DIV_BY_ZERO[u.op] == "zero" else a
      st.emit(f"{r3} = select {bt} {z2}, {t} {by_zero}, {t} {ret}")
      ret = r3
    return ret

  def _shift(self, st: _State, u: UOp, a: str, b: str) -> str:
    """SHL/SHR with the amount taken modulo the width (tinygrad/uop/semantics.py; LLVM: an amount outside [0, width)
    is poison), masked only where its bounds allow it to leave the width."""
    dt, amt = u.dtype, u.src[1]
    t = ltype(dt)
    op = "shl" if u.op is Ops.SHL else ("ashr" if _is_signed(dt) else "lshr")
    bits = dt.scalar().itemsize * 8
    lo, hi = amt.vmin, amt.vmax
    if not (isinstance(lo, int) and isinstance(hi, int) and 0 <= lo and hi < bits):
      m = st.fresh()
      st.emit(f"{m} = and {t} {b}, {_splat(str(bits - 1), dt)}")
      b = m
    v = st.fresh()
    st.emit(f"{v} = {op} {t} {a}, {b}")
    return v

_BINARY: dict[Ops, tuple[str | None, str | None]] = {
  Ops.ADD: ("add", "fadd"), Ops.SUB: ("sub", "fsub"), Ops.MUL: ("mul", "fmul"), Ops.FDIV: (None, "fdiv"),
  Ops.AND: ("and", None), Ops.OR: ("or", None), Ops.XOR: ("xor", None),
}
_INTRINSIC = {Ops.SQRT: "sqrt", Ops.TRUNC: "trunc", Ops.EXP2: "exp2", Ops.LOG2: "log2", Ops.SIN: "sin", Ops.POW: "pow"}

def _cmp(op: Ops, dt: DType) -> str:
  if _is_float(dt): return {Ops.CMPLT: "fcmp olt", Ops.CMPNE: "fcmp une", Ops.CMPEQ: "fcmp oeq"}[op]
  if op is Ops.CMPLT: return "icmp slt" if _is_signed(dt) else "icmp ult"
  return {Ops.CMPNE: "icmp ne", Ops.CMPEQ: "icmp eq"}[op]

def _splat(c: str, dt: DType) -> str:
  if dt.count == 1: return c
  return "<" + ", ".join(f"{scalar_type(dt)} {c}" for _ in range(dt.count)) + ">"

# glibc's vector math library (libmvec, glibc 2.35+): the 8-lane AVX2 variant of each function, the only one the CPU
# renderer calls, so a value gets the same bits in every kernel whatever its lane count. Its 4-lane SSE and 16-lane
# AVX-512 variants compute other bits (exp2: 0.7% of floats differ between the AVX2 and AVX-512 ones, 0.2-1.3% of
# floats between any two; the C library's scalar exp2f too). The AVX2 ones are within 1 (exp2) and 2 (log2, sin) ulp
# of the correctly rounded result over every float, and give IEEE's special values (docs/perf.md)
LIBMVEC = {Ops.EXP2: "_ZGVdN8v_exp2f", Ops.LOG2: "_ZGVdN8v_log2f", Ops.SIN: "_ZGVdN8v_sinf"}
# NOTE: a call with a lane out of a function's fast range takes glibc's slow path, 10x the time (exp2 of -inf, the
# causal mask's every other score: GPT-2's probabilities x V kernel 24.9 -> 89.5 ms). Where the result there is one
# value, the renderer selects it and gives the call 1.0 in that lane: (compare, bound, result); the same bits as the
# call (exp2: 0 below -150, where 2^x is under half the smallest subnormal, inf from 128 on; log2: -inf at +-0)
LIBMVEC_FAST: dict[str, tuple[tuple[str, float, float], ...]] = {
  "_ZGVdN8v_exp2f": (("fcmp olt", -150.0, 0.0), ("fcmp oge", 128.0, math.inf)),
  "_ZGVdN8v_log2f": (("fcmp oeq", 0.0, -math.inf),)}

def _libmvec(st: _State, name: str, x: str, n: int) -> str:
  """`name` (a LIBMVEC function) of the n float32 lanes `x` (a scalar when n is 1): one call per 8 lanes, the lanes of
  a narrower value repeated to fill 8, then the results cut back to n lanes."""
  fn = st.declare(name, "<8 x float>", ["<8 x float>"], "nounwind willreturn memory(none)")
  def emit(rhs: str) -> str:
    v = st.fresh()
    st.emit(f"{v} = {rhs}")
    return v
  def shuffle(a: str, b: str, w: int, idx: list[int]) -> str:
    return emit(f"shufflevector <{w} x float> {a}, <{w} x float> {b}, <{len(idx)} x i32> <" +
                ", ".join(f"i32 {i}" for i in idx) + ">")
  def splat(c: float) -> str: return _splat(render_const(c, dtypes.float32), dtypes.float32.vec(8))
  def call(v: str) -> str:
    outside = [(emit(f"{cmp} <8 x float> {v}, {splat(bound)}"), res) for cmp, bound, res in LIBMVEC_FAST.get(name, ())]
    if outside:
      any_out = outside[0][0]
      for m, _ in outside[1:]: any_out = emit(f"or <8 x i1> {any_out}, {m}")
      v = emit(f"select <8 x i1> {any_out}, <8 x float> {splat(1.0)}, <8 x float> {v}")
    r = emit(f"call <8 x float> {fn}(<8 x float> {v})")
    for m, res in outside: r = emit(f"select <8 x i1> {m}, <8 x float> {splat(res)}, <8 x float> {r}")
    return r
  if n == 1:
    r = call(shuffle(emit(f"insertelement <8 x float> poison, float {x}, i64 0"), "poison", 8, [0] * 8))
    return emit(f"extractelement <8 x float> {r}, i64 0")
  outs = [call(x if n == 8 else shuffle(x, "poison", n, [(8 * k + j) % n for j in range(8)]))
          for k in range((n + 7) // 8)]
  w = 8
  while len(outs) > 1:
    if len(outs) % 2: outs.append(outs[-1])
    outs, w = [shuffle(a, b, w, list(range(2 * w))) for a, b in zip(outs[::2], outs[1::2])], 2 * w
  return outs[0] if w == n else shuffle(outs[0], "poison", w, list(range(n)))

def _zero(t: str, dt: DType | None = None) -> str:
  if t.startswith("<"):
    return "zeroinitializer"
  return "0.0" if t in ("half", "float", "double") else "false" if t == "i1" else "0"

def _align(dt: DType) -> int:
  """The natural alignment of a register value (vectors: their size, capped at 64 bytes)."""
  n = dt.itemsize if dt.scalar() is not dtypes.bool else dt.count
  return min(64, 1 << max(0, (n - 1).bit_length()))

def _mem_align(dt: DType, buf: PtrDType) -> int:
  # NOTE: a vector access to a buffer starts at any element: only the element's alignment is known, except in registers
  if buf.addrspace is AddrSpace.REG: return _align(buf.base)
  return max(1, dt.scalar().itemsize)

def _index0_ok(buf: PtrDType) -> bool:
  """Whether index 0 is in bounds (so a gated load can read it safely)."""
  return buf.size != 0

def _may_be(u: UOp, v: int) -> bool:
  if u.op is Ops.CONST: return u.arg == v
  if u.op is Ops.VCONST: return v in u.arg
  lo, hi = u.vmin, u.vmax
  return not (isinstance(lo, int) and isinstance(hi, int)) or lo <= v <= hi

def amd_intrinsic(tc: TensorCore) -> tuple[str, str]:
  """(LLVM intrinsic, extra arguments) of an AMD tensor core: the WMMA intrinsics are overloaded on (C/D, A/B) vector
  types (bfloat16 as i16 bits); MFMA takes cbsz, abid, blgp (0: no broadcast)."""
  ea, _, ec = tc.elements_per_thread
  ab = f"v{ea}{'f16' if tc.dtype_in is dtypes.float16 else 'i16'}"
  s = "f16" if tc.dtype_in is dtypes.float16 else "bf16"
  if ".mfma." in tc.name:
    return f"llvm.amdgcn.mfma.f32.16x16x16{s}{'.1k' if s == 'bf16' else ''}", ", i32 0, i32 0, i32 0"
  return f"llvm.amdgcn.wmma.f32.16x16x16.{s}.v{ec}f32.{ab}", ""

def _wmma(self: LLVMRenderer, st: _State, u: UOp) -> None:
  name, extra = amd_intrinsic(tensor_core(u.arg[0]))
  ts = [ltype(s.dtype) for s in u.src]
  fn = st.declare(name, ltype(u.dtype), ts + (["i32", "i32", "i32"] if extra else []))
  st.r[u] = v = st.fresh()
  st.emit(f"{v} = call {ltype(u.dtype)} {fn}({', '.join(f'{t} {st.r[s]}' for t, s in zip(ts, u.src))}{extra})")

_HANDLERS: dict[Ops, Callable[..., None]] = {
  Ops.WMMA: _wmma,
  Ops.DEFINE_GLOBAL: LLVMRenderer._global, Ops.DEFINE_VAR: LLVMRenderer._var, Ops.DEFINE_REG: LLVMRenderer._reg,
  Ops.DEFINE_LOCAL: LLVMRenderer._local, Ops.RANGE: LLVMRenderer._range, Ops.END: LLVMRenderer._end,
  Ops.IF: LLVMRenderer._if, Ops.ENDIF: LLVMRenderer._endif, Ops.INDEX: LLVMRenderer._index,
  Ops.LOAD: LLVMRenderer._load, Ops.STORE: LLVMRenderer._store, Ops.CONST: LLVMRenderer._const,
  Ops.VCONST: LLVMRenderer._vconst, Ops.GEP: LLVMRenderer._gep, Ops.VECTORIZE: LLVMRenderer._vectorize,
  Ops.CAST: LLVMRenderer._cast, Ops.BITCAST: LLVMRenderer._bitcast,
  Ops.AFTER: lambda self, st, u: st.r.__setitem__(u, st.r[u.src[0]]),
  Ops.SPECIAL: lambda self, st, u: st.r.__setitem__(u, self.render_special(st, u)),
  Ops.BARRIER: lambda self, st, u: self.render_barrier(st),
}

# ---- targets ----

class CPULLVMRenderer(LLVMRenderer):
  """The host CPU, run through llvmlite's JIT. Signature: `void name(ptr data0, ..., i32 var0, ..., i32 core_id)`, as
  the C backend's, so the CPU runtime calls both the same way. `vector_bits` is the widest vector register (512 on
  AVX-512, 256 on AVX2): vector accumulators are that wide."""
  device = "CPU"
  has_local = False
  has_shared = False
  has_threads = True
  global_max = None
  # NOTE: LLVM 22's x86 code generator computes every lane of an 8-bit udiv/urem/sdiv/srem by a constant as 0 in a
  # vector narrower than 128 bits whose lanes are then shuffled (tests/fuzz/test_regressions.py,
  # llvm_narrow_i8_vector_divmod): codegen gives LLVM the multiply and shifts instead
  div_by_multiply = (dtypes.int8, dtypes.uint8)
  IDENTITY = LLVMRenderer.IDENTITY + ("vector_bits", "vector_math")
  # the transcendentals go to the C library (llvm.exp2 etc. lower to exp2f, ... as the C backend's builtins do); with
  # `vector_math`, float32's exp2, log2 and sin go to glibc's vector math library (libmvec) instead, vector lanes and
  # scalars alike (`_libmvec`)
  code_for_op = {**LLVMRenderer.code_for_op, Ops.EXP2: True, Ops.LOG2: True, Ops.SIN: True, Ops.POW: True}
  # NOTE: compares, selects, shifts, integer division and bitcasts pack into vector ops too, with <N x i1> masks: a
  # gelu's, a sigmoid's or a clamp's selects left the lanes scalar from there on (a GPT-2 block's gelu kernel 6.1 ->
  # 3.8 ms)
  vectors = {dt: Vectors((8, 4, 2), CPU_VECTOR_OPS) for dt in DTYPES_DICT.values()
             if dt not in (dtypes.void, dtypes.index, *EMULATED)}
  def __init__(self, triple: str = "x86_64-unknown-linux-gnu", datalayout: str = "", vector_bits: int = 128,
               threads: int = 1, vector_math: bool = False):
    if vector_bits not in (128, 256, 512):
      raise ValueError(f"CPULLVMRenderer: vector_bits must be 128, 256 or 512, not {vector_bits}")
    self.triple, self.datalayout, self.vector_bits, self.threads = triple, datalayout, vector_bits, threads
    self.vector_math = vector_math
    # NOTE: x86 has 32 vector registers with AVX-512, 16 with AVX2 or SSE; aarch64 32 (a function of the triple and
    # vector_bits, both in the identity)
    self.vector_registers = 32 if vector_bits == 512 or not triple.startswith(("x86_64", "i386", "i686")) else 16
    if vector_math:
      # NOTE: float32 lanes of exp2, log2 and sin pack into vectors: one libmvec call computes 8 (0.5-0.8 ns a lane
      # against 1.5-5.5 for a call of exp2f, log2f or sinf)
      self.vectors = {**self.vectors, dtypes.float32: Vectors((8, 4, 2), CPU_VECTOR_OPS | set(LIBMVEC))}
    self.extra_matcher = llvm_matcher(self)
  def __reduce__(self) -> tuple[Any, ...]:
    return (type(self), (self.triple, self.datalayout, self.vector_bits, self.threads, self.vector_math))
  def render_alu(self, st: _State, u: UOp) -> str:
    if self.vector_math and u.op in LIBMVEC and u.dtype.scalar() is dtypes.float32:
      return _libmvec(st, LIBMVEC[u.op], st.r[u.src[0]], u.dtype.count)
    return super().render_alu(st, u)
  def acc_widths(self, dt: DType) -> tuple[int, ...]:
    n = self.vector_bits // (dt.scalar().itemsize * 8)
    return tuple(w for w in (32, 16, 8, 4, 2) if w <= n)
  def kernel_params(self, st: _State) -> list[str]: return super().kernel_params(st) + ["i32 %core_id"]
  def render_special(self, st: _State, u: UOp) -> str:
    if u.arg != "core_id":
      raise NotImplementedError(f"CPULLVMRenderer: SPECIAL {u.arg!r} needs a GPU grid (the CPU has core_id)")
    return "%core_id"
  def kernel_attrs(self, uops: list[UOp]) -> str:
    # NOTE: without these, x86 targets tuned to prefer 256-bit vectors split every 512-bit vector op in two
    return f'nounwind "min-legal-vector-width"="{self.vector_bits}" "prefer-vector-width"="{self.vector_bits}"'

class AMDLLVMRenderer(LLVMRenderer):
  """AMD GPUs through llvmlite's AMDGPU target. Kernel: `amdgpu_kernel void name(ptr addrspace(1) data0, ..., i32 var0,
  ...)`; buffers in the global address space (1), DEFINE_LOCAL in LDS (3), DEFINE_REG in private memory (5); gidxN is
  the workgroup id, lidxN the work-item id in its workgroup (HIP's blockIdx/threadIdx)."""
  device = "AMD"
  has_local = True
  has_shared = True
  has_threads = False
  triple = "amdgcn-amd-amdhsa"
  datalayout = AMD_DATALAYOUT
  addrspace = {AddrSpace.GLOBAL: 1, AddrSpace.LOCAL: 3, AddrSpace.REG: 5}
  kernel_cc = "amdgpu_kernel"
  # NOTE: a GPU has no integer divider: a division by a constant is cheaper as a multiply and shifts
  div_by_multiply = (dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32)
  global_max = (2**31 - 1, 65535, 65535)
  local_max = (1024, 1024, 1024)
  local_max_total = 1024
  code_for_op = {**LLVMRenderer.code_for_op, Ops.EXP2: True, Ops.LOG2: True}
  def __init__(self, arch: str = AMD_DEFAULT_ARCH):
    self.target = amd_arch(arch)
    self.arch, self.shared_max, self.wave = self.target.name, self.target.lds, self.target.wave
    self.tensor_cores = AMD_TENSOR_CORES[self.arch]
    self.extra_matcher = llvm_matcher(self)
  def __reduce__(self) -> tuple[Any, ...]: return (type(self), (self.arch,))
  def supports_op(self, op: Ops, dtype: DType) -> bool:
    # NOTE: the hardware has exp2/log2 for half and float only (double would be a library call the GPU does not have)
    if op in (Ops.EXP2, Ops.LOG2) and dtype.count == 1: return dtype in (dtypes.float16, dtypes.float32)
    return super().supports_op(op, dtype)
  def render_special(self, st: _State, u: UOp) -> str:
    kind, dim = u.arg[:-1], "xyz"[int(u.arg[-1])]
    fn = {"gidx": "llvm.amdgcn.workgroup.id", "lidx": "llvm.amdgcn.workitem.id"}.get(kind)
    if fn is None: raise NotImplementedError(f"AMDLLVMRenderer: SPECIAL {u.arg!r} (a GPU has gidxN and lidxN)")
    v = st.fresh(u.arg)
    st.emit(f"{v} = call i32 {st.declare(f'{fn}.{dim}', 'i32', [])}()")
    return v
  def render_barrier(self, st: _State) -> None:
    # NOTE: s_barrier only waits for the other waves; the fences make the LDS stores before it visible after it
    st.emit('fence syncscope("workgroup") release')
    st.emit(f"call void {st.declare('llvm.amdgcn.s.barrier', 'void', [])}()")
    st.emit('fence syncscope("workgroup") acquire')
  def kernel_attrs(self, uops: list[UOp]) -> str:
    threads = 1
    for u in uops:
      if u.op is Ops.SPECIAL and u.arg.startswith("lidx") and u.src[0].op is Ops.CONST: threads *= int(u.src[0].arg)
    return f'nounwind "amdgpu-flat-work-group-size"="1,{max(threads, 1)}"'
  def module_flags(self) -> list[str]:
    return [f'!{{i32 1, !"amdhsa_code_object_version", i32 {AMD_CODE_OBJECT_VERSION * 100}}}']

__all__ = ["LLVMRenderer", "CPULLVMRenderer", "AMDLLVMRenderer", "DIV_BY_ZERO"]
