"""The one semantics table (tinygrad/uop/semantics.py) against the LLVM IR path on the CPU: the same cases as the C
cross-check (tests/uop/test_semantics_crosscheck.py: every int8/uint8 pair, edge values of every other dtype, every
cast and bitcast), each kernel rendered by CPULLVMRenderer, compiled by llvmlite and run from its shared object."""
import ctypes
import pytest
from tinygrad.codegen import get_program
from tinygrad.dtype import DType
from tests.llvm.conftest import llvm_parts
from tests.uop.test_semantics_crosscheck import DTYPES, cases_of, check_outputs

@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_table_matches_llvm(dt: DType):
  from tinygrad.runtime.targets import load_host
  ren, compiler = llvm_parts()
  errors = []
  for c in cases_of(dt):
    prg = get_program(c.ast, ren, opts=[])
    fxn, _lib = load_host("CPU_LLVM", prg.name, compiler.compile(prg.src))
    bufs = c.buffers()
    fxn(*[ctypes.c_void_p(b.ctypes.data) for b in bufs], ctypes.c_int32(0))
    errors += check_outputs(c, c.outputs(bufs))
  assert not errors, "\n".join(errors)
