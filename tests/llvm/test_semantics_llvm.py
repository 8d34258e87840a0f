"""The one semantics table (tinygrad/uop/semantics.py) against the LLVM IR path on the CPU: the same cases as the C
cross-check (tests/uop/test_semantics_crosscheck.py: every int8/uint8 pair, edge values of every other dtype, every
cast and bitcast), each kernel rendered by CPULLVMRenderer, compiled by llvmlite and run through the JIT."""
import ctypes
import pytest
from tinygrad.codegen import get_program
from tinygrad.dtype import DType
from tests.llvm.conftest import llvm_parts
from tests.uop.test_semantics_crosscheck import DTYPES, cases_of, check_outputs

@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_table_matches_llvm(dt: DType):
  ren, compiler, loader = llvm_parts()
  errors = []
  for c in cases_of(dt):
    prg = get_program(c.ast, ren, opts=[])
    engine, addr = loader.load(prg.name, compiler.compile(prg.src))
    bufs = c.buffers()
    ctypes.CFUNCTYPE(None)(addr)(*[ctypes.c_void_p(b.ctypes.data) for b in bufs], ctypes.c_int32(0))
    del engine
    errors += check_outputs(c, c.outputs(bufs))
  assert not errors, "\n".join(errors)
