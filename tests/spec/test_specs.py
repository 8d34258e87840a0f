"""The five specs: legal graphs of each level pass; illegal ones are rejected naming the right node (op and position)."""
import pytest
from tinygrad.uop import Ops, AxisType
from tinygrad.uop.ops import UOp
from tinygrad.dtype import dtypes, AddrSpace
from tinygrad.helpers import Context
from spec import type_verify, SpecError, tensor_spec, kernel_spec, program_spec, full_spec, shared_spec

# NOTE: illegal nodes are built with SPEC=0 so that SPEC=2 (which checks every node at construction) lets the test build them
def illegal(fn):
  with Context(SPEC=0): return fn()

def rejects(graph, spec, bad):
  """type_verify raises, naming `bad` by op and by its position in the toposort (or list)."""
  nodes = list(graph) if isinstance(graph, list) else list(graph.toposort())
  with pytest.raises(SpecError) as e: type_verify(graph, spec)
  assert e.value.node is bad, f"blamed {e.value.node.op}, expected {bad.op}"
  assert e.value.position == nodes.index(bad)
  assert f"node {nodes.index(bad)} " in str(e.value) and str(bad.op) in str(e.value)
  return e.value

# ---- tensor graphs ----

def dev(d="CPU"): return UOp(Ops.DEVICE, arg=d)
def buf(n, size, dt=dtypes.float32): return UOp(Ops.BUFFER, dt, (UOp(Ops.UNIQUE, arg=n), dev()), size)
def tconst(v, dt=dtypes.float32): return UOp(Ops.CONST, dt, (dev(),), v)

def legal_tensor_graph():
  a, b = buf(1, 12).reshape((3, 4)), buf(2, 12).reshape((3, 4))
  c = tconst(2.0).reshape((1, 1)).expand((3, 4))
  x = ((a + b) * c).maximum(a).r(Ops.ADD, (1,))
  y = a.permute((1, 0)).pad(((1, 0), (0, 2))).shrink(((0, 4), (1, 4))).flip((True, False)).contiguous()
  z = UOp(Ops.COPY, dtypes.float32, (x.detach(), dev("PYTHON")))
  w = (a < b).where(a, b).cast(dtypes.int32).bitcast(dtypes.float32)
  asg = UOp(Ops.ASSIGN, dtypes.float32, (buf(3, 12).reshape((3, 4)), w))
  return UOp.sink(z, y, asg)

def test_tensor_spec_accepts_legal_graph():
  type_verify(legal_tensor_graph(), tensor_spec)
  type_verify(legal_tensor_graph(), full_spec)

def test_tensor_spec_accepts_kernel_graph():
  g0, g1 = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(12), arg=0), UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(12), arg=1)
  r = UOp.range(12, 0)
  ast = UOp.sink(g0.index(r).store(g1.index(r).load() * 2.0).end(r))
  out, inp = buf(5, 12), buf(6, 12)
  k = UOp(Ops.KERNEL, dtypes.void, (out, inp), ast)
  type_verify(UOp.sink(out.after(k)), tensor_spec)

def test_tensor_rejects_mismatched_elementwise_shapes():
  a, b = buf(1, 12).reshape((3, 4)), buf(2, 12).reshape((4, 3))
  bad = illegal(lambda: UOp(Ops.ADD, dtypes.float32, (a, b)))
  assert "shapes" in rejects(UOp.sink(bad), tensor_spec, bad).reason

def test_tensor_rejects_const_without_device():
  bad = UOp.const(dtypes.float32, 1.0)
  rejects(UOp.sink(buf(1, 1) + illegal(lambda: bad.reshape((1,)))), tensor_spec, bad)

def test_tensor_rejects_bad_reshape():
  a = buf(1, 12)
  bad = illegal(lambda: UOp(Ops.RESHAPE, dtypes.float32, (a,), (5, 2)))
  rejects(UOp.sink(bad), tensor_spec, bad)

def test_tensor_rejects_permute_that_is_not_a_permutation():
  a = buf(1, 12).reshape((3, 4))
  bad = illegal(lambda: UOp(Ops.PERMUTE, dtypes.float32, (a,), (0, 0)))
  rejects(UOp.sink(bad), tensor_spec, bad)

def test_tensor_rejects_unsorted_reduce_axes():
  a = buf(1, 12).reshape((3, 4))
  bad = illegal(lambda: UOp(Ops.REDUCE_AXIS, dtypes.float32, (a,), (Ops.ADD, (1, 0))))
  rejects(UOp.sink(bad), tensor_spec, bad)

def test_tensor_rejects_kernel_ops():
  g = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(4), arg=0)
  rejects(UOp.sink(g.index(UOp.const(dtypes.index, 0)).load()), tensor_spec, g)

def test_tensor_rejects_kernel_with_wrong_buffer_count():
  g0 = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(4), arg=0)
  ast = UOp.sink(g0.index(UOp.const(dtypes.index, 0)).store(UOp.const(dtypes.float32, 1.0)))
  k = illegal(lambda: UOp(Ops.KERNEL, dtypes.void, (buf(1, 4), buf(2, 4)), ast))
  rejects(UOp.sink(k), tensor_spec, k)

def test_tensor_rejects_buffer_of_pointer_dtype():
  bad = illegal(lambda: UOp(Ops.BUFFER, dtypes.float32.ptr(4), (UOp(Ops.UNIQUE, arg=9), dev()), 4))
  rejects(UOp.sink(bad), tensor_spec, bad)

# ---- kernel ASTs ----

def g(i, size=16, dt=dtypes.float32): return UOp(Ops.DEFINE_GLOBAL, dt.ptr(size), arg=i)

def legal_kernel():
  r, red = UOp.range(4, 0), UOp.range(4, 1, AxisType.REDUCE)
  v = UOp.variable("n", 1, 4)
  x = g(1).index((r * 4 + red).valid((red < v) & (r < 3))).load()
  acc = (x * 2.0).reduce(red, arg=Ops.ADD)
  st = g(0, 4).index(r).store(acc.cast(dtypes.float32)).end(r)
  return UOp.sink(st)

def test_kernel_spec_accepts_legal_kernel():
  type_verify(legal_kernel(), kernel_spec)
  type_verify(legal_kernel(), full_spec)

def test_kernel_end_may_close_several_ranges():
  r0, r1 = UOp.range(4, 0), UOp.range(4, 1)
  type_verify(UOp.sink(g(0).index(r0 * 4 + r1).store(UOp.const(dtypes.float32, 0.0)).end(r0, r1)), kernel_spec)

def test_kernel_rejects_invalid_outside_index():
  r = UOp.range(16, 0)
  masked = r.valid(r < 8)
  bad = masked + 1
  rejects(UOp.sink(g(0).index(bad).store(UOp.const(dtypes.float32, 0.0)).end(r)), kernel_spec, bad)

def test_kernel_rejects_invalid_as_true_branch():
  r = UOp.range(16, 0)
  bad = (r < 8).where(UOp.invalid(), r)
  rejects(UOp.sink(g(0).index(bad).store(UOp.const(dtypes.float32, 0.0)).end(r)), kernel_spec, bad)

def test_kernel_rejects_int32_index_math():
  r = UOp.range(16, 0, dtype=dtypes.int32)
  rejects(UOp.sink(g(0).index(r).store(UOp.const(dtypes.float32, 0.0)).end(r)), kernel_spec, r)

def test_kernel_rejects_load_not_through_index():
  bad = illegal(lambda: UOp(Ops.LOAD, dtypes.float32, (g(1),)))
  rejects(UOp.sink(g(0).index(UOp.const(dtypes.index, 0)).store(bad)), kernel_spec, bad)

def test_kernel_rejects_reduce_over_loop_range():
  r = UOp.range(4, 0)
  bad = g(1).index(r).load().reduce(r, arg=Ops.ADD)
  rejects(UOp.sink(g(0).index(UOp.const(dtypes.index, 0)).store(bad)), kernel_spec, bad)

def test_kernel_rejects_program_ops():
  s = UOp.special(16, "gidx0", dtype=dtypes.index)
  rejects(UOp.sink(g(0).index(s).store(UOp.const(dtypes.float32, 0.0))), kernel_spec, s)

def test_kernel_rejects_store_of_wrong_dtype():
  bad = illegal(lambda: g(0).index(UOp.const(dtypes.index, 0)).store(UOp.const(dtypes.int32, 1)))
  rejects(UOp.sink(bad), kernel_spec, bad)

def test_kernel_rejects_index_with_other_dtype():
  bad = illegal(lambda: UOp(Ops.INDEX, dtypes.int32.ptr(16), (g(0), UOp.const(dtypes.index, 0))))
  rejects(UOp.sink(UOp(Ops.STORE, dtypes.void, (bad, UOp.const(dtypes.int32, 1)))), kernel_spec, bad)

def test_kernel_local_bufferize():
  i, j, k = UOp.range(3, 0), UOp.range(4, 1), UOp.range(4, 2)
  bz = UOp(Ops.BUFFERIZE, dtypes.float32, (g(1).index(i * 4 + k).load() * 2.0, k))
  read = UOp(Ops.INDEX, dtypes.float32.ptr(4), (bz, (j + 1) % 4)).load()
  type_verify(UOp.sink(g(0).index(i * 4 + j).store(read).end(i, j)), kernel_spec)
  n = UOp.range(UOp.variable("n", 1, 4), 3)
  bad = UOp(Ops.BUFFERIZE, dtypes.float32, (g(1).index(n).load(), n))
  rejects(UOp.sink(g(0).index(UOp.const(dtypes.index, 0)).store(UOp(Ops.INDEX, dtypes.float32.ptr(4), (bad, UOp.const(dtypes.index, 0))).load())),
          kernel_spec, bad)

# ---- programs ----

def i32(v): return UOp.const(dtypes.int32, v)

def legal_program():
  """out[gidx0*4 + r] = (r < 3 ? in[...] : 0) summed into a register, locals and a barrier, an IF-gated store."""
  out, inp = g(0, 64), g(1, 64)
  loc = UOp(Ops.DEFINE_LOCAL, dtypes.float32.ptr(4, AddrSpace.LOCAL), arg=0)
  acc = UOp(Ops.DEFINE_REG, dtypes.float32.ptr(1, AddrSpace.REG), arg=0)
  gid = UOp.special(i32(16), "gidx0", dtype=dtypes.int32)
  r = UOp.range(i32(4), 0, AxisType.LOOP, dtype=dtypes.int32)
  init = acc.index(i32(0)).store(UOp.const(dtypes.float32, 0.0))
  gate = r < i32(3)
  val = inp.index(gid * i32(4) + r, gate).load(UOp.const(dtypes.float32, 0.0))
  upd = acc.after(init, r).index(i32(0)).store(acc.after(init, r).index(i32(0)).load() + val)
  end = upd.end(r)
  total = acc.after(end).index(i32(0)).load()
  lst = loc.index(i32(0)).store(total)
  bar = UOp(Ops.BARRIER, dtypes.void, (lst,))
  back = loc.after(bar).index(i32(0)).load()
  cond = gid < i32(8)
  iff = UOp(Ops.IF, dtypes.void, (cond,))
  st = out.index(gid).store(back)
  endif = UOp(Ops.ENDIF, dtypes.void, (iff,))
  vec = UOp.vectorize(back, back).gep(1)
  return linear(init, end, bar, vec, iff, st, endif)

def linear(*roots):
  """A program in the order of `roots`, each preceded by those of its sources not listed yet."""
  lst = []
  for r in roots: lst += [u for u in r.toposort() if u not in lst]
  return lst

def test_program_spec_accepts_legal_program():
  type_verify(legal_program(), program_spec)
  type_verify(legal_program(), full_spec)

def test_program_rejects_index_dtype():
  r = UOp.range(16, 0)
  lst = [g(0), UOp.const(dtypes.index, 16), r, g(0).index(r), g(0).index(r).store(UOp.const(dtypes.float32, 0.0))]
  rejects(lst, program_spec, UOp.const(dtypes.index, 16))

def test_program_rejects_end_of_two_ranges():
  r0, r1 = UOp.range(i32(4), 0, dtype=dtypes.int32), UOp.range(i32(4), 1, dtype=dtypes.int32)
  st = g(0).index(r0 * i32(4) + r1).store(UOp.const(dtypes.float32, 0.0))
  bad = st.end(r0, r1)
  lst = [g(0), i32(4), r0, r1, r0 * i32(4), r0 * i32(4) + r1, g(0).index(r0 * i32(4) + r1), UOp.const(dtypes.float32, 0.0), st, bad]
  rejects(lst, program_spec, bad)

def test_program_rejects_gated_store():
  gate = UOp.const(dtypes.bool, True)
  idx = g(0).index(i32(0), gate)
  bad = idx.store(UOp.const(dtypes.float32, 1.0))
  rejects([g(0), i32(0), gate, idx, UOp.const(dtypes.float32, 1.0), bad], program_spec, bad)

def test_program_rejects_gated_load_without_alt():
  gate = UOp.const(dtypes.bool, True)
  idx = g(0).index(i32(0), gate)
  bad = idx.load()
  rejects([g(0), i32(0), gate, idx, bad], program_spec, bad)

def test_program_masked_vector_load_needs_a_gate_per_lane():
  gate4 = UOp.const(dtypes.bool.vec(4), True)
  alt = UOp.const(dtypes.float32.vec(4), 0.0)
  ok = UOp(Ops.INDEX, g(0).dtype.vec(4), (g(0), i32(0), gate4))
  type_verify([g(0), i32(0), gate4, ok, alt, ok.load(alt, dtype=dtypes.float32.vec(4))], program_spec)
  # a gate of 2 lanes on a 4-lane access says nothing about lanes 2 and 3
  gate2 = UOp.const(dtypes.bool.vec(2), True)
  bad = UOp(Ops.INDEX, g(0).dtype.vec(4), (g(0), i32(0), gate2))
  e = rejects([g(0), i32(0), gate2, bad], program_spec, bad)
  assert "per-lane gate" in str(e)

def test_program_rejects_barrier_with_two_sources():
  st = g(0).index(i32(0)).store(UOp.const(dtypes.float32, 1.0))
  bad = UOp(Ops.BARRIER, dtypes.void, (st, st))
  rejects([g(0), i32(0), g(0).index(i32(0)), UOp.const(dtypes.float32, 1.0), st, bad], program_spec, bad)

def test_program_rejects_reduce():
  r = UOp.range(i32(4), 0, AxisType.REDUCE, dtype=dtypes.int32)
  ld = g(1).index(r).load()
  bad = ld.reduce(r, arg=Ops.ADD)
  rejects([g(1), i32(4), r, g(1).index(r), ld, bad], program_spec, bad)

def test_program_rejects_unknown_special():
  bad = illegal(lambda: UOp.special(i32(4), "gidx7", dtype=dtypes.int32))
  rejects([i32(4), bad], program_spec, bad)

def test_program_rejects_source_after_its_user():
  st = g(0).index(i32(0)).store(UOp.const(dtypes.float32, 1.0))
  e = rejects([g(0), g(0).index(i32(0)), i32(0), UOp.const(dtypes.float32, 1.0), st], program_spec, g(0).index(i32(0)))
  assert "earlier" in e.reason

def test_if_and_endif_only_in_programs():
  iff = UOp(Ops.IF, dtypes.void, (UOp.const(dtypes.bool, True),))
  endif = UOp(Ops.ENDIF, dtypes.void, (iff,))
  rejects(UOp.sink(endif), kernel_spec, iff)
  rejects(UOp.sink(UOp(Ops.IF, dtypes.void, (tconst(True, dtypes.bool),))), tensor_spec, UOp(Ops.IF, dtypes.void, (tconst(True, dtypes.bool),)))

# ---- shared rules, at every level ----

@pytest.mark.parametrize("spec", [shared_spec, tensor_spec, kernel_spec, program_spec, full_spec], ids=lambda s: "spec")
def test_shared_rejects_comparison_not_bool(spec):
  a, b = UOp.const(dtypes.int32, 1), UOp.const(dtypes.int32, 2)
  bad = illegal(lambda: UOp(Ops.CMPLT, dtypes.int32, (a, b)))
  with pytest.raises(SpecError): type_verify([a, b, bad], spec)

@pytest.mark.parametrize("make", [
  lambda: UOp(Ops.IDIV, dtypes.float32, (UOp.const(dtypes.float32, 1.0), UOp.const(dtypes.float32, 2.0))),
  lambda: UOp(Ops.ADD, dtypes.float32, (UOp.const(dtypes.float32, 1.0), UOp.const(dtypes.int32, 2))),
  lambda: UOp(Ops.WHERE, dtypes.float32, (UOp.const(dtypes.int32, 1), UOp.const(dtypes.float32, 1.0), UOp.const(dtypes.float32, 2.0))),
  lambda: UOp(Ops.CONST, dtypes.int32, arg=1.5),
  lambda: UOp(Ops.CONST, dtypes.uint8, arg=300),
  lambda: UOp(Ops.BITCAST, dtypes.int64, (UOp.const(dtypes.float32, 1.0),)),
  lambda: UOp(Ops.VECTORIZE, dtypes.float32.vec(3), (UOp.const(dtypes.float32, 1.0), UOp.const(dtypes.float32, 2.0))),
  lambda: UOp(Ops.GEP, dtypes.float32, (UOp.const(dtypes.float32.vec(2), 1.0),), (2,)),
  lambda: UOp(Ops.SINK, dtypes.float32),
], ids=["idiv_float", "add_mixed", "where_int_cond", "const_float_in_int", "const_out_of_range", "bitcast_size", "vectorize_width",
        "gep_lane", "sink_dtype"])
def test_shared_rejects_at_every_level_and_at_construction(make):
  bad = illegal(make)
  for spec in (shared_spec, kernel_spec, program_spec, full_spec):
    with pytest.raises(SpecError) as e: type_verify(bad, spec)
    assert e.value.node is bad
  with Context(SPEC=2), pytest.raises(SpecError):
    # a fresh copy of the node (a different tag) is built, so the construction check runs
    bad.replace(tag="fresh")

def test_full_spec_accepts_codegen_intermediates():
  r32 = UOp.range(i32(4), 0, dtype=dtypes.int32)
  idx = UOp.range(4, 1)
  # index lowering rebuilds an index node over int32 sources before it retypes it
  type_verify(UOp(Ops.ADD, dtypes.index, (idx, r32)), full_spec)
  with pytest.raises(SpecError): type_verify(UOp(Ops.ADD, dtypes.index, (idx, r32)), kernel_spec)

def test_program_block_structure():
  r = UOp.range(i32(4), 0, dtype=dtypes.int32)
  st = g(0).index(r).store(UOp.const(dtypes.float32, 1.0))
  body = [g(0), i32(4), r, g(0).index(r), UOp.const(dtypes.float32, 1.0), st]
  type_verify(body + [st.end(r)], program_spec)
  e = rejects(body, program_spec, r)
  assert "never closed" in e.reason
  with pytest.raises(SpecError) as ex: type_verify(body + [st.end(r), st.end(r)], program_spec)
  assert ex.value.position == len(body) + 1 and "second time" in ex.value.reason
  iff = UOp(Ops.IF, dtypes.void, (UOp.const(dtypes.bool, True),))
  iff2 = UOp(Ops.IF, dtypes.void, (UOp.const(dtypes.bool, False),))
  lst = [UOp.const(dtypes.bool, True), iff, UOp.const(dtypes.bool, False), iff2, UOp(Ops.ENDIF, dtypes.void, (iff,))]
  with pytest.raises(SpecError) as ex: type_verify(lst, program_spec)
  assert ex.value.position == 4 and "innermost" in ex.value.reason

def test_tensor_rejects_index_math_on_values():
  v = UOp.variable("tv", 1, 8).bind(3)
  bad = v * 2
  rejects(UOp.sink(bad), tensor_spec, bad)

@pytest.mark.parametrize("op", [Ops.SQRT, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.RECIPROCAL, Ops.TRUNC, Ops.POW])
def test_float_only_ops_are_rejected_on_ints_at_every_level(op):
  # these have no integer meaning (tinygrad/uop/semantics.py defines them on floats): no pass may build them on ints
  x = g(1, dt=dtypes.int32).index(UOp.const(dtypes.index, 0)).load()
  bad = illegal(lambda: UOp(op, dtypes.int32, (x,) * (2 if op is Ops.POW else 1)))
  e = rejects(UOp.sink(g(0, dt=dtypes.int32).index(UOp.const(dtypes.index, 0)).store(bad)), kernel_spec, bad)
  assert "float only" in str(e)
  with pytest.raises(SpecError): type_verify([bad], full_spec)
  ok = UOp(op, dtypes.float32, (x.cast(dtypes.float32),) * (2 if op is Ops.POW else 1))
  type_verify(UOp.sink(g(0).index(UOp.const(dtypes.index, 0)).store(ok)), kernel_spec)
