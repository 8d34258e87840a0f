"""pyrender: every graph prints as Python that rebuilds the very same object (exec in the project's names, and the safe
evaluator of spec.roundtrip), with readable sugar where it is exact."""
import math, struct
import pytest
from hypothesis import given, settings, strategies as st
from tinygrad.uop import Ops, AxisType
from tinygrad.uop.ops import UOp
from tinygrad.uop.symbolic import simplify
from tinygrad.dtype import dtypes, AddrSpace, Invalid
from tinygrad.helpers import Context
from tinygrad.uop.pyrender import pyrender, pyrender_list, pyrender_node, render_dtype, render_arg
from spec.roundtrip import eval_pyrender

def namespace() -> dict:
  ns = {"UOp": UOp, "Ops": Ops, "AxisType": AxisType, "AddrSpace": AddrSpace, "dtypes": dtypes, "Invalid": Invalid}
  try:
    from tinygrad.codegen.opt import KernelInfo, Opt, OptOps
    ns.update(KernelInfo=KernelInfo, Opt=Opt, OptOps=OptOps)
  except ImportError: pass
  return ns

def exec_text(text: str):
  ns = namespace()
  exec(text, ns)  # noqa: S102 (trusted: our own printer's output, to check it is plain Python)
  return ns["ast"]

def assert_roundtrip(u):
  text = pyrender(u)
  assert eval_pyrender(text) is u, text
  assert exec_text(text) is u, text
  return text

# ---- graphs the tests build ----

def idx(v: int) -> UOp: return UOp.const(dtypes.index, v)

def kernel_ast(name: str = "", reduce: bool = True) -> UOp:
  """out[i] = sum_j a[i*8+j] * 2 + b[i] over i < 16, j < 8; a masked store when i < 12 (docs/ir.md section 2)."""
  out = UOp(Ops.DEFINE_GLOBAL, dtypes.float.ptr(16), arg=0)
  a = UOp(Ops.DEFINE_GLOBAL, dtypes.float.ptr(128), arg=1)
  b = UOp(Ops.DEFINE_GLOBAL, dtypes.float.ptr(16), arg=2)
  i, j = UOp.range(16, 0, AxisType.LOOP), UOp.range(8, 1, AxisType.REDUCE)
  val = a.index(i * idx(8) + j).load() * UOp.const(dtypes.float, 2.0)
  red = val.reduce(j, arg=Ops.ADD) if reduce else val
  masked = (i < idx(12)).where(i, UOp.invalid())
  store = out.index(masked).store(red + b.index(i).load())
  arg = None
  if name:
    from tinygrad.codegen.opt import KernelInfo
    arg = KernelInfo(name=name)
  return UOp.sink(store.end(i), arg=arg)

def kernel_node(first: int = 100) -> UOp:
  """A KERNEL over three BUFFERs matching kernel_ast's DEFINE_GLOBALs."""
  dev = UOp(Ops.DEVICE, arg="CPU")
  bufs = tuple(UOp(Ops.BUFFER, dtypes.float, (UOp(Ops.UNIQUE, arg=first + i), dev), n) for i, n in enumerate((16, 128, 16)))
  return UOp(Ops.KERNEL, dtypes.void, bufs, kernel_ast())

def tensor_graph() -> tuple[UOp, UOp]:
  dev = UOp(Ops.DEVICE, arg="CPU")
  a = UOp(Ops.BUFFER, dtypes.float, (UOp(Ops.UNIQUE, arg=1), dev), 16)
  b = UOp(Ops.BUFFER, dtypes.float, (UOp(Ops.UNIQUE, arg=2), dev), 4)
  x = a.reshape((4, 4)).permute((1, 0))
  y = b.reshape((1, 4)).expand((4, 4))
  one = UOp(Ops.CONST, dtypes.float, (dev,), 1.0).reshape((1, 1)).expand((4, 4))
  z = (x + y * one).pad(((1, 1), (0, 0))).shrink(((1, 5), (0, 4))).flip((True, False))
  r = z.r(Ops.ADD, (1,)).contiguous()
  return UOp.sink(r), dev

# ---- round trips ----

def test_symbolic_expression_roundtrip():
  a, b = UOp.variable("a", -5, 10), UOp.variable("b", 0, 3)
  r = UOp.range(16, 0, AxisType.LOOP)
  e = ((a * idx(3) + b) // idx(4)) % idx(-7) + r
  e = (e < idx(5)).where(e.maximum(a), b.ne(idx(2)).where(a, r)) + (a.eq(b)).where(idx(1), idx(-1))
  assert_roundtrip(UOp.sink(e))

def test_vectors_roundtrip():
  a = UOp.variable("a", 0, 7)
  v = UOp.vectorize(a, a + idx(1), a + idx(2), a + idx(3))
  f4 = UOp.vectorize(*[UOp.const(dtypes.float, float(i)) for i in range(4)])
  e = UOp.sink(v.gep(2), v.gep((0, 1)), f4 * UOp.const(dtypes.float.vec(4), (1.0, 2.0, 3.0, 4.0)), f4.gep(3).cast(dtypes.int32))
  text = assert_roundtrip(e)
  assert "UOp.vectorize(" in text and ".gep(2)" in text and "dtypes.float32.vec(4)" in text

def test_pointers_roundtrip():
  g = UOp(Ops.DEFINE_GLOBAL, dtypes.half.ptr(64), arg=0)
  loc = UOp(Ops.DEFINE_LOCAL, dtypes.float.ptr(16, AddrSpace.LOCAL), arg=0)
  reg = UOp(Ops.DEFINE_REG, dtypes.float.ptr(1, AddrSpace.REG), arg=0)
  i = UOp.special(16, "lidx0")
  st1 = loc.index(i).store(g.index(i).load().cast(dtypes.float))
  st2 = reg.index(idx(0)).store(loc.after(st1).index(i).load())
  text = assert_roundtrip(UOp.sink(st2))
  assert "AddrSpace.LOCAL" in text and "AddrSpace.REG" in text and "UOp.special(16, 'lidx0')" in text

def test_pointer_vector_dtype_prints():
  for dt in [dtypes.float.ptr(), dtypes.float.ptr(16), dtypes.float.ptr(16, AddrSpace.LOCAL).vec(4), dtypes.int8.vec(4).ptr(8),
             dtypes.half.ptr(-1, AddrSpace.REG)]:
    text = render_dtype(dt)
    assert eval(text, namespace()) is dt, text  # noqa: S307 (trusted: our own output)

def test_every_scalar_dtype_const_roundtrip():
  consts = []
  for name in ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "fp8e4m3", "fp8e5m2", "float16",
               "bfloat16", "float32", "float64", "index"]:
    dt = getattr(dtypes, name)
    consts.append(UOp.const(dt, 1))
    consts.append(UOp.const(dt.vec(4), 0))
  assert_roundtrip(UOp.sink(*consts))

def test_fp8_and_bf16_consts_keep_their_values():
  cs = [UOp.const(dtypes.fp8e4m3, 0.3), UOp.const(dtypes.fp8e5m2, -1000.0), UOp.const(dtypes.bfloat16, 1 / 3), UOp.const(dtypes.fp8e4m3, 1e9)]
  assert_roundtrip(UOp.sink(*cs))

def test_special_floats_roundtrip_bit_exact():
  vals = [float("nan"), -float("nan"), float("inf"), float("-inf"), -0.0, 0.0, 5e-324, 1.7976931348623157e308, 0.1]
  cs = [UOp.const(dtypes.float64, v) for v in vals]
  back = eval_pyrender(pyrender(UOp.sink(*cs)))
  assert back is UOp.sink(*cs)
  for c, v in zip(back.src, vals): assert struct.pack("<d", c.arg) == struct.pack("<d", v)
  assert "float('nan')" in pyrender(cs[0]) and "-float('nan')" in pyrender(cs[1]) and "-0.0" in pyrender(cs[4])

def f64_bits(x: float) -> int: return struct.unpack("<Q", struct.pack("<d", x))[0]

# NaNs whose sign, payload or signalling bit repr does not keep, as the bits of each float dtype (a BITCAST makes them)
NAN_BITS = {"float64": [0x7FF0000000000123, 0xFFFFFFFFFFFFFFF2, 0x7FF0000000000001, 0xFFF4000000000000],
            "float32": [0x7FA00001, 0xFFC00123, 0x7F800001], "float16": [0x7C01, 0xFE42, 0x7D00],
            "bfloat16": [0x7F81, 0xFFC1, 0x7FA0], "fp8e4m3": [0x7F, 0xFF], "fp8e5m2": [0x7D, 0xFE, 0x7F]}
UINT_OF = {1: dtypes.uint8, 2: dtypes.uint16, 4: dtypes.uint32, 8: dtypes.uint64}

def test_nan_with_payload_roundtrips_bit_exact():
  odd = dtypes.float_from_bits(0x7FF0000000000123)
  assert math.isnan(odd) and f64_bits(odd) == 0x7FF0000000000123
  c = UOp.const(dtypes.float64, odd)
  text = assert_roundtrip(c)
  assert "dtypes.float_from_bits(0x7ff0000000000123)" in text
  assert f64_bits(eval_pyrender(text).arg) == 0x7FF0000000000123

@pytest.mark.parametrize("name", sorted(NAN_BITS))
def test_nan_payload_consts_of_every_float_dtype_roundtrip_bit_exact(name):
  from tinygrad.uop.semantics import fold_bitcast
  from tinygrad.uop.symbolic import symbolic
  from tinygrad.uop.ops import graph_rewrite
  dt = getattr(dtypes, name)
  consts = []
  for bits in NAN_BITS[name]:
    v = fold_bitcast(bits, UINT_OF[dt.itemsize], dt)
    assert math.isnan(v)
    # the CONST a BITCAST folds to, the sugar form, and the generic form with an arbitrary float64 NaN as the arg
    folded = graph_rewrite(UOp.const(UINT_OF[dt.itemsize], bits).bitcast(dt), symbolic, name="fold bitcast")
    assert folded.op is Ops.CONST and math.isnan(folded.arg)
    consts += [folded, UOp.const(dt, v), UOp(Ops.CONST, dt, arg=dtypes.float_from_bits(0x7FF0000000000000 | bits))]
  sink = UOp.sink(*consts)
  text = assert_roundtrip(sink)
  for c, b in zip(consts, eval_pyrender(text).src): assert f64_bits(b.arg) == f64_bits(c.arg)
  # the same through a vector const (VCONST args are tuples of floats)
  assert_roundtrip(UOp(Ops.VCONST, dt.vec(len(consts)), arg=tuple(c.arg for c in consts)))

def test_float_from_bits_refuses_what_is_not_64_bits():
  with pytest.raises(ValueError, match="float_from_bits"): dtypes.float_from_bits(2**64)
  with pytest.raises(ValueError, match="float_from_bits"): dtypes.float_from_bits(-1)
  for bad in ("dtypes.float_from_bits(2**64)", "dtypes.float_from_bits(0x10000000000000000)",
              "dtypes.float_from_bits('0x7ff0000000000001')", "dtypes.float_from_bits(1, 2)", "dtypes.float_from_bit(1)"):
    with pytest.raises(ValueError): eval_pyrender(f"ast = UOp.const(dtypes.float64, {bad})")

def test_kernel_ast_roundtrip_and_sugar():
  k = kernel_ast()
  text = assert_roundtrip(k)
  assert "UOp.range(16, 0, AxisType.LOOP)" in text and "UOp.range(8, 1, AxisType.REDUCE)" in text
  assert ".index(" in text and ".load()" in text and ".store(" in text and ".reduce(" in text and ".end(" in text
  assert "UOp.invalid()" in text and text.rstrip().splitlines()[-1].startswith("ast = ")

def test_kernel_info_arg_roundtrip():
  pytest.importorskip("tinygrad.codegen.opt")
  from tinygrad.codegen.opt import KernelInfo, Opt, OptOps
  k = kernel_ast()
  k2 = UOp.sink(*k.src, arg=KernelInfo(name="r_16_8", opts=(Opt(OptOps.UPCAST, 0, 4),), applied_opts=(Opt(OptOps.UNROLL, 0, 2),)))
  text = assert_roundtrip(k2)
  assert "KernelInfo(name='r_16_8'" in text and "OptOps.UPCAST" in text

def test_tensor_graph_roundtrip():
  sink, _ = tensor_graph()
  text = assert_roundtrip(sink)
  assert "Ops.BUFFER" in text and "Ops.UNIQUE" in text and "arg='CPU'" in text and "Ops.PAD" in text

def test_kernel_node_prints_its_ast_as_a_function():
  _, dev = tensor_graph()
  bufs = [UOp(Ops.BUFFER, dtypes.float, (UOp(Ops.UNIQUE, arg=10 + i), dev), n) for i, n in enumerate((16, 128, 16))]
  ast = kernel_ast()
  k = UOp(Ops.KERNEL, dtypes.void, tuple(bufs), ast)
  after = bufs[0].after(k)
  k2 = UOp(Ops.KERNEL, dtypes.void, (bufs[2], after, bufs[1]), ast)  # the same AST twice: one function
  sink = UOp.sink(bufs[2].after(k2))
  text = assert_roundtrip(sink)
  assert text.startswith("def k0():\n") and "  return ast\n" in text and text.count("def k") == 1 and text.count("arg=k0()") == 2

def test_nested_kernel_functions_are_defined_before_use():
  with Context(SPEC=0):  # not a legal graph at any stage: the printer must still handle a UOp arg holding a KERNEL
    inner = kernel_ast()
    mid = UOp.sink(UOp(Ops.KERNEL, dtypes.void, (), inner))
    outer = UOp.sink(UOp(Ops.KERNEL, dtypes.void, (), mid))
    text = assert_roundtrip(outer)
  assert text.index("def k0") < text.index("def k1") and "k0()" in text.split("def k1")[1]

def test_tags_roundtrip():
  with Context(SPEC=0):
    a = UOp.variable("a", 0, 10)
    tagged = [(a + idx(1)).rtag(1), a.rtag("x"), UOp.const(dtypes.float, 1.0).rtag((1, 2)), UOp.range(4, 0).rtag(True)]
    text = assert_roundtrip(UOp.sink(*tagged).rtag(7))
  assert "tag=1" in text and "tag='x'" in text and "tag=(1, 2)" in text and "tag=7" in text

def test_linear_program_roundtrip():
  g = UOp(Ops.DEFINE_GLOBAL, dtypes.int32.ptr(16), arg=0)
  r = UOp.range(UOp.const(dtypes.int32, 16), 0, AxisType.LOOP, dtype=dtypes.int32)
  gate = r < UOp.const(dtypes.int32, 8)
  st1 = g.index(r).store(r * UOp.const(dtypes.int32, 2))
  iff = UOp(Ops.IF, dtypes.void, (gate,))
  endif = UOp(Ops.ENDIF, dtypes.void, (iff,))
  end = st1.end(r)
  prog = [g, r.src[0], r, gate, iff, st1, endif, end]
  text = pyrender_list(prog)
  back = eval_pyrender(text)
  assert isinstance(back, list) and len(back) == len(prog) and all(x is y for x, y in zip(back, prog))
  assert text.rstrip().splitlines()[-1] == "ast = [" + ", ".join(f"c{i}" for i in range(len(prog))) + "]"
  assert pyrender(prog) == text and exec_text(text) == prog

def test_sugar_falls_back_to_generic_when_not_exact():
  with Context(SPEC=0):
    a, b = UOp.variable("a", 0, 10), UOp.variable("b", 0, 10)
    odd = [UOp(Ops.ADD, dtypes.int32, (a, b)),                          # dtype differs from what `a + b` gives
           UOp(Ops.CONST, dtypes.float, arg=1),                         # int arg in a float const
           UOp(Ops.CONST, dtypes.index, arg=(5,)),                      # 1-tuple arg: UOp.const would unwrap it
           UOp(Ops.RANGE, dtypes.index, (idx(4),), (0,)),               # no AxisType at the end
           UOp(Ops.GEP, dtypes.index.vec(2), (UOp.vectorize(a, b),), (0, 1)),  # identity gep: .gep returns the source
           UOp(Ops.CAST, dtypes.index, (a,)),                           # cast to the same dtype is a no-op in .cast
           UOp(Ops.DEFINE_VAR, dtypes.index, arg=("v", 5, 1)),          # UOp.variable refuses min > max
           UOp(Ops.SQRT, dtypes.float, (a, b)),                         # wrong arity for .sqrt()
           UOp(Ops.INDEX, dtypes.float.ptr(4), (a, b)),                 # index dtype differs from the buffer's
           UOp(Ops.LOAD, dtypes.float, (a,), arg=1)]                    # an arg the sugar cannot carry
    for u in odd:
      text = assert_roundtrip(u)
      assert text.startswith("ast = UOp(Ops."), text

def test_inlining_is_bounded_and_shared_nodes_are_named():
  a = UOp.variable("a", 0, 10)
  shared = a * idx(3)
  e = UOp.sink(shared + shared, shared // idx(2))
  text = assert_roundtrip(e)
  assert "c0 = UOp.variable('a', 0, 10)" in text or "UOp.variable('a', 0, 10) * " in text
  # the shared node is one line, referenced twice by name
  name = next(ln.split(" = ")[0] for ln in text.splitlines() if "* UOp.const(dtypes.index, 3)" in ln)
  assert text.count(name) >= 4  # defined once, used three times
  for ln in text.splitlines(): assert ln.count("(") - ln.count(")") == 0

def test_deep_graph_roundtrip_without_recursion():
  x = UOp.variable("x", 0, 3)
  for i in range(20000): x = x + idx(1) if i % 2 else x * idx(2)
  text = assert_roundtrip(x)
  assert len(text.splitlines()) > 20000 // 4
  def nesting(line):
    d = m = 0
    for ch in line:
      d += {"(": 1, ")": -1}.get(ch, 0)
      m = max(m, d)
    return m
  assert max(nesting(ln) for ln in text.splitlines()) <= 8

def test_large_graph_is_linear_time():
  # 10k+ nodes; the timing itself is in bench/, here just that it completes and round-trips
  a = UOp.variable("a", 0, 10)
  nodes = [a]
  for i in range(5000): nodes.append(nodes[-1] * idx(i % 7 + 2) + nodes[i // 2])
  sink = UOp.sink(nodes[-1])
  assert len(sink.toposort()) > 10000
  assert eval_pyrender(pyrender(sink)) is sink

def test_pyrender_node_is_one_line_with_env():
  a = UOp.variable("a", 0, 10)
  big = a
  for i in range(200): big = big + idx(i)
  u = big * big
  text, env = pyrender_node(u)
  assert text == "ast = c0 * c0\n" and env == {"c0": big}
  assert eval_pyrender(text, env) is u
  for n in kernel_ast().toposort():
    t, e = pyrender_node(n)
    assert t.count("\n") == 1 and eval_pyrender(t, e) is n, t

def test_pyrender_node_binds_kernel_ast_by_name():
  k = kernel_node()
  text, env = pyrender_node(k)
  assert "def " not in text and env["c3"] is k.arg and eval_pyrender(text, env) is k

def test_render_arg_of_unknown_type_is_a_clear_error():
  with pytest.raises(ValueError, match="cannot print an arg of type object"): render_arg(object())

# ---- every op ----

def example_of(op: Ops) -> UOp:
  """A small, plausible node of each op."""
  a, b = UOp.variable("a", 0, 10), UOp.variable("b", 1, 10)
  buf = UOp(Ops.DEFINE_GLOBAL, dtypes.float.ptr(16), arg=0)
  f, g = UOp.const(dtypes.float, 1.5), buf.index(a).load()
  dev = UOp(Ops.DEVICE, arg="CPU")
  tb = UOp(Ops.BUFFER, dtypes.float, (UOp(Ops.UNIQUE, arg=0), dev), 16)
  r = UOp.range(16, 0, AxisType.REDUCE)
  st1 = buf.index(r).store(f)
  vec = UOp.vectorize(g, g, g, g)
  iff = UOp(Ops.IF, dtypes.void, (a < b,))
  ex = {
    Ops.SINK: UOp.sink(st1.end(r)), Ops.GROUP: UOp.group(st1, st1.replace(src=(st1.src[0], g))),
    Ops.AFTER: kernel_node().src[0].after(kernel_node()), Ops.UNIQUE: UOp(Ops.UNIQUE, arg=3), Ops.DEVICE: dev,
    Ops.LUNIQUE: UOp(Ops.LUNIQUE, arg=0),
    Ops.BUFFER: tb, Ops.BUFFER_VIEW: UOp(Ops.BUFFER_VIEW, dtypes.float, (tb,), (8, 4)), Ops.RESHAPE: tb.reshape((4, 4)),
    Ops.PERMUTE: tb.reshape((4, 4)).permute((1, 0)), Ops.EXPAND: tb.reshape((16, 1)).expand((16, 3)),
    Ops.PAD: tb.pad(((1, 2),)), Ops.SHRINK: tb.shrink(((2, 5),)), Ops.FLIP: tb.flip((True,)), Ops.CONTIGUOUS: tb.contiguous(),
    Ops.DETACH: tb.detach(), Ops.COPY: UOp(Ops.COPY, dtypes.float, (tb, UOp(Ops.DEVICE, arg="PYTHON"))),
    Ops.ASSIGN: UOp(Ops.ASSIGN, dtypes.float, (tb, tb.contiguous())), Ops.REDUCE_AXIS: tb.reshape((4, 4)).r(Ops.MAX, (0,)),
    Ops.KERNEL: kernel_node(),
    Ops.MULTI: UOp(Ops.MULTI, dtypes.float, (tb.shrink(((0, 8),)), UOp(Ops.COPY, dtypes.float, (tb.shrink(((8, 16),)), UOp(Ops.DEVICE, arg="CPU:1")))), (0, ((0, 8), (8, 16)), None)),
    Ops.BUFFERIZE: UOp(Ops.BUFFERIZE, dtypes.float, (g, r), AddrSpace.LOCAL),
    Ops.DEFINE_GLOBAL: buf, Ops.DEFINE_LOCAL: UOp(Ops.DEFINE_LOCAL, dtypes.float.ptr(8, AddrSpace.LOCAL), arg=0),
    Ops.DEFINE_REG: UOp(Ops.DEFINE_REG, dtypes.float.ptr(1, AddrSpace.REG), arg=0), Ops.DEFINE_VAR: a, Ops.BIND: a.bind(3),
    Ops.SPECIAL: UOp.special(32, "gidx0"), Ops.RANGE: r, Ops.END: st1.end(r), Ops.REDUCE: (g * f).reduce(r, arg=Ops.ADD),
    Ops.INDEX: buf.index(r), Ops.LOAD: buf.index(r).load(), Ops.STORE: st1, Ops.VECTORIZE: vec, Ops.GEP: vec.gep(1),
    Ops.VCONST: UOp.const(dtypes.int32.vec(3), (1, 2, 3)),
    Ops.WMMA: UOp(Ops.WMMA, dtypes.float.vec(4), (vec, vec, vec), ("WMMA_8_8_8", (8, 8, 8), dtypes.half, dtypes.float, "NV", 32)),
    Ops.IF: iff, Ops.ENDIF: UOp(Ops.ENDIF, dtypes.void, (iff,)), Ops.BARRIER: UOp(Ops.BARRIER, dtypes.void, (st1,)),
    Ops.CONST: f, Ops.CAST: a.cast(dtypes.float), Ops.BITCAST: g.bitcast(dtypes.int32), Ops.NEG: UOp(Ops.NEG, dtypes.float, (g,)),
    Ops.SUB: UOp(Ops.SUB, dtypes.float, (g, f)), Ops.FDIV: UOp(Ops.FDIV, dtypes.float, (g, f)), Ops.POW: UOp(Ops.POW, dtypes.float, (g, f)),
    Ops.WHERE: (a < b).where(g, f), Ops.MULACC: UOp(Ops.MULACC, dtypes.float, (g, f, g)),
    Ops.THREEFRY: UOp.const(dtypes.uint64, 7).threefry(UOp.const(dtypes.uint64, 9)),
  }
  if op in ex: return ex[op]
  if op in (Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIPROCAL, Ops.TRUNC): return g.alu(op)
  if op in (Ops.SHL, Ops.SHR, Ops.XOR, Ops.OR, Ops.AND): return UOp.const(dtypes.uint32, 5).alu(op, UOp.const(dtypes.uint32, 2))
  if op in (Ops.ADD, Ops.MUL, Ops.IDIV, Ops.MAX, Ops.MOD, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ): return a.alu(op, b)
  raise AssertionError(f"example_of: no example node for {op}; add one so pyrender is checked on it")

@pytest.mark.parametrize("op", list(Ops), ids=lambda o: o.name)
def test_every_op_printable(op):
  u = example_of(op)
  assert u.op is op
  text = assert_roundtrip(u)
  t, env = pyrender_node(u)
  assert eval_pyrender(t, env) is u, t
  assert text.endswith("\n")

# ---- properties ----

def _small_exprs():
  try:
    from fuzz.strategies import index_expressions
    return index_expressions().map(lambda t: t[0])
  except ImportError:
    leaf = st.one_of(st.integers(-20, 20).map(idx), st.sampled_from([UOp.variable("a", -4, 9), UOp.range(8, 0, AxisType.LOOP)]))
    def ext(s):
      return st.one_of(st.tuples(s, s).map(lambda t: t[0] + t[1]), st.tuples(s, s).map(lambda t: t[0] * t[1]),
                       st.tuples(s, st.integers(1, 9)).map(lambda t: t[0] // idx(t[1])), st.tuples(s, s).map(lambda t: t[0].maximum(t[1])))
    return st.recursive(leaf, ext, max_leaves=12)

@settings(max_examples=150)
@given(_small_exprs())
def test_roundtrip_random_index_expressions(e):
  for u in (e, simplify(e), UOp.sink(e, simplify(e))):
    assert eval_pyrender(pyrender(u)) is u
    t, env = pyrender_node(u)
    assert eval_pyrender(t, env) is u

@settings(max_examples=100)
@given(st.lists(st.one_of(st.integers(-2**63, 2**64 - 1), st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
                          st.text(max_size=20)), min_size=1, max_size=5).map(tuple),
       st.sampled_from([None, 0, "t", (1, "x")]))
def test_roundtrip_random_args_and_tags(arg, tag):
  with Context(SPEC=0):
    u = UOp(Ops.SINK, dtypes.void, (), (arg, (arg,), Ops.ADD, AxisType.UPCAST, dtypes.half.vec(2), Invalid), tag=tag)
    assert eval_pyrender(pyrender(u)) is u
