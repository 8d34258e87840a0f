"""Fixtures for the LLVM IR path on the CPU: `run_kernel(ast, bufs, var_vals=None, opts=None, renderer=None)` lowers a
kernel AST with the host's CPULLVMRenderer, compiles it with llvmlite and runs it on numpy buffers from its shared object (the
same signature as tests/codegen's C fixture, so the C semantics tests run here unchanged)."""
import ctypes
import pytest
from tinygrad.codegen import get_program

pytest.importorskip("llvmlite", reason="the LLVM path needs llvmlite (the project's `llvm` extra)")

_STATE: dict = {}

def llvm_parts():
  """(renderer, compiler) for the host, built once per worker."""
  if not _STATE:
    from tinygrad.renderer.llvmir import CPULLVMRenderer
    from tinygrad.runtime.support.compiler_llvm import LLVMCompiler, host_target
    h = host_target()
    _STATE["parts"] = (CPULLVMRenderer(h.triple, h.datalayout, h.vector_bits, 2, h.vector_math), LLVMCompiler())
  return _STATE["parts"]

def run_program(prg, bufs, var_vals=None):
  from tinygrad.runtime.targets import load_host
  _, compiler = llvm_parts()
  fxn, _lib = load_host("CPU_LLVM", prg.name, compiler.compile(prg.src))
  vals = [int((var_vals or {})[n]) for n in prg.var_names]
  args = [ctypes.c_void_p(b.ctypes.data) for b in bufs] + [ctypes.c_int32(v) for v in vals]
  gs, _ = prg.launch_dims(var_vals or {})
  for core in range(gs[0]): fxn(*args, ctypes.c_int32(core))

@pytest.fixture
def run_kernel():
  def f(ast, bufs, var_vals=None, opts=None, renderer=None):
    prg = get_program(ast, renderer or llvm_parts()[0], opts)
    run_program(prg, bufs, var_vals)
    return prg
  return f
