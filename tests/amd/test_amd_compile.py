"""AMD code objects for gfx942 (CDNA3, wave64), gfx1100 (RDNA3) and gfx1201 (RDNA4, both wave32), checked without a GPU:
a representative slice of tensor programs compiled for every arch with their structure checked (the full sweep over
every kernel of tests/tensor is `make test-amd-sweep`), the renderer's AMD specifics, and bad input."""
import os, re, subprocess, sys, textwrap
import numpy as np
import pytest
from tinygrad import Tensor
from tinygrad.codegen import get_program
from tinygrad.device import CompileError, DeviceOpenError
from tinygrad.dtype import dtypes
from tinygrad.helpers import Context
from tinygrad.renderer.llvmir import AMDLLVMRenderer, AMD_DATALAYOUT
from tinygrad.runtime.targets import AMD_ARCHS, amd_arch
from tests.amd.checks import check_code_object

pytest.importorskip("llvmlite", reason="AMD compiles with llvmlite (the project's `llvm` extra)")
ARCHS = sorted(AMD_ARCHS)
_compilers: dict = {}

def compiler(arch):
  from tinygrad.runtime.support.compiler_amd import AMDCompiler
  if arch not in _compilers: _compilers[arch] = AMDCompiler(arch)
  return _compilers[arch]

def t(*shape, dtype=dtypes.float32, seed=0):
  rng = np.random.default_rng(seed)
  return Tensor(rng.standard_normal(shape).astype(np.float32)).cast(dtype).realize() if dtype is not dtypes.float32 else \
    Tensor(rng.standard_normal(shape).astype(np.float32)).realize()

# a representative slice of what tensor programs compile to: LDS + barriers (GROUPTOP), locals, upcasts, gated loads,
# integer math with guards, every dtype's casts, transcendentals, random numbers, symbolic-free reductions of each kind
PROGRAMS = {
  "elementwise": lambda: ((t(64, 64) + t(64, 64, seed=1) * 2).exp2().sqrt().sin(),),
  "group_reduce": lambda: (t(8, 4096).sum(axis=1) + t(8, 4096).max(axis=1),),
  "matmul": lambda: (t(96, 64) @ t(64, 128),),
  "conv_relu": lambda: (t(2, 3, 16, 16).conv2d(t(8, 3, 3, 3), padding=1).relu(),),
  "softmax": lambda: (t(32, 100).softmax(-1),),
  "cumsum_argmax": lambda: (t(64, 33).cumsum(1), t(64, 33).argmax(-1)),
  "pad_cat": lambda: (t(10, 7).pad(((1, 2), (3, 0))).cat(t(13, 10), dim=0),),
  "int_math": lambda: ((Tensor(np.arange(-50, 50, dtype=np.int32)) // Tensor(np.arange(1, 101, dtype=np.int32))) % 7 << 2,),
  "casts": lambda: (t(256).cast(dtypes.half).cast(dtypes.bfloat16).cast(dtypes.fp8e4m3).cast(dtypes.int8).cast(dtypes.float64),),
  "random": lambda: (Tensor.rand(1000) + Tensor.randn(1000),),
  "layernorm": lambda: (t(16, 256).layernorm(),),
}

@pytest.fixture(scope="module")
def slice_kernels():
  return {name: [si.ast for si in Tensor.schedule(*fn())] for name, fn in PROGRAMS.items()}  # type: ignore[attr-defined]

@pytest.mark.parametrize("arch", ARCHS)
def test_representative_slice_compiles_with_checked_code_objects(arch, linker, slice_kernels):
  ren, seen_lds = AMDLLVMRenderer(arch), False
  with Context(CACHELEVEL=0):
    for name, asts in slice_kernels.items():
      for ast in asts:
        prg = get_program(ast, ren)
        k = check_code_object(compiler(arch).compile(prg.src), prg, arch)
        seen_lds |= k.lds > 0
        assert k.vgprs > 0 and k.sgprs > 0, f"{name}: {k}"
  assert seen_lds, "the group reduce uses LDS"

@pytest.mark.parametrize("arch", ARCHS)
def test_datalayout_is_llvms(arch):
  from tinygrad.runtime.support.compiler_amd import AMDCompiler
  assert str(AMDCompiler.__new__(AMDCompiler).__class__)  # the class imports
  from tinygrad.runtime.support.compiler_llvm import llvm
  tm = llvm().Target.from_triple("amdgcn-amd-amdhsa").create_target_machine(cpu=arch)
  assert str(tm.target_data) == AMD_DATALAYOUT

def test_ir_uses_amd_address_spaces_ids_and_fenced_barriers(slice_kernels):
  ren = AMDLLVMRenderer("gfx1100")
  src = "\n".join(get_program(ast, ren).src for ast in slice_kernels["group_reduce"])
  assert "define amdgpu_kernel void" in src and "ptr addrspace(1) %data0" in src
  assert re.search(r"@smem\d+ = internal addrspace\(3\) global \[\d+ x float\]", src), "LDS in address space 3"
  assert "@llvm.amdgcn.workgroup.id.x()" in src and "@llvm.amdgcn.workitem.id.x()" in src
  assert re.search(r'fence syncscope\("workgroup"\) release\n  call void @llvm.amdgcn.s.barrier\(\)\n'
                   r'  fence syncscope\("workgroup"\) acquire', src)
  assert '!"amdhsa_code_object_version", i32 500' in src
  assert '"amdgpu-flat-work-group-size"="1,' in src

def test_private_memory_is_address_space_5():
  ren = AMDLLVMRenderer("gfx942")
  src = "\n".join(get_program(ast, ren).src for ast in [si.ast for si in (t(64, 64) @ t(64, 64)).schedule()])
  assert re.search(r"alloca \[\d+ x float\], align \d+, addrspace\(5\)", src)

@pytest.mark.parametrize("arch", ARCHS)
def test_linker_links_every_arch(arch, linker):
  from tinygrad.runtime.support.compiler_amd import read_code_object
  from tinygrad.runtime.support.elf import ELF, ET_REL
  prg = get_program([si.ast for si in (t(64) * 3).schedule()][-1], AMDLLVMRenderer(arch))
  obj = compiler(arch).object(prg.src)
  assert ELF(obj).type == ET_REL
  co = read_code_object(compiler(arch).compile(prg.src))
  assert f"{prg.name}.kd" in [s.name for s in co.elf.symbols(dynamic=True)]
  assert co.elf.osabi == 64 and co.elf.abiversion == 3, "ELFOSABI_AMDGPU_HSA, ABI version 3 = code object v5"

def test_scratch_is_reported():
  # a per-thread array indexed by loaded values, too big for registers and LDS (128 KB): it lives in scratch
  from tinygrad.uop import Ops, AxisType
  from tinygrad.uop.ops import UOp
  from tinygrad.dtype import AddrSpace
  from tinygrad.codegen.linearize import linearize, line_rewrite
  from tinygrad.runtime.support.compiler_amd import read_code_object
  try: from tinygrad.runtime.support.compiler_amd import find_linker; find_linker()
  except DeviceOpenError as e: pytest.skip(str(e))
  i32, n = dtypes.int32, 32768
  out, a = UOp(Ops.DEFINE_GLOBAL, i32.ptr(n), arg=0), UOp(Ops.DEFINE_GLOBAL, i32.ptr(n), arg=1)
  reg = UOp(Ops.DEFINE_REG, i32.ptr(n, AddrSpace.REG), arg=0)
  r = UOp(Ops.RANGE, i32, (UOp.const(i32, n),), arg=(0, AxisType.LOOP))
  fill = reg.index(r).store(a.index(r).load() * UOp.const(i32, 3)).end(r)
  r2 = UOp(Ops.RANGE, i32, (UOp.const(i32, n),), arg=(1, AxisType.LOOP))
  idx = a.index(r2).load() & UOp.const(i32, n - 1)
  body = out.index(r2).store(reg.after(fill).index(idx).load()).end(r2)
  uops = line_rewrite(linearize(UOp.sink(body)))
  src = AMDLLVMRenderer("gfx1100").render(uops, name="scratchy")
  k = read_code_object(compiler("gfx1100").compile(src)).kernels["scratchy"]
  assert k.scratch >= n * 4 and k.kd.private_segment_fixed_size == k.scratch

def test_unknown_arch_is_a_clear_error():
  with pytest.raises(ValueError, match=r"AMD_ARCH='gfx90a' is not a supported architecture; choose one of"): amd_arch("gfx90a")
  from tinygrad.runtime.ops_amd import AMDDevice
  with Context(AMD_ARCH="gfx90a", COMPILE_ONLY=1):
    with pytest.raises(DeviceOpenError, match="gfx942"): AMDDevice("AMD")

def test_missing_linker_is_a_clear_error(monkeypatch):
  from tinygrad.runtime.support import compiler_amd
  compiler_amd.find_linker.cache_clear()
  try:
    with Context(AMD_LD="/nonexistent/ld.lld"):
      with pytest.raises(DeviceOpenError, match=r"AMD_LD='/nonexistent/ld.lld' is not a program"): compiler_amd.find_linker()
    compiler_amd.find_linker.cache_clear()
    monkeypatch.setitem(sys.modules, "ziglang", None)
    with Context(AMD_LD=""):
      with pytest.raises(DeviceOpenError, match=r"no linker for code objects.*pip install -e '\.\[llvm\]'.*AMD_LD"):
        compiler_amd.find_linker()
  finally: compiler_amd.find_linker.cache_clear()

def test_linker_that_fails_is_a_clear_error(tmp_path, linker):
  # an LLD too old for code object v5 (Debian's lld 14 says "unknown abi version") fails the link: the error says so
  from tinygrad.runtime.support import compiler_amd
  fake = tmp_path / "ld.lld"
  fake.write_text("#!/bin/sh\necho 'ld.lld: error: unknown abi version: ' >&2\nexit 1\n")
  fake.chmod(0o755)
  prg = get_program([si.ast for si in (t(64) * 3).schedule()][-1], AMDLLVMRenderer("gfx1100"))
  compiler_amd.find_linker.cache_clear()
  try:
    with Context(AMD_LD=str(fake)):
      with pytest.raises(CompileError, match=r"(?s)unknown abi version.*LLD 15 or newer for code object v5"):
        compiler_amd.link(compiler("gfx1100").object(prg.src), "AMD gfx1100")
  finally: compiler_amd.find_linker.cache_clear()

def test_verifier_error_names_the_ir_lines(linker):
  prg = get_program([si.ast for si in (t(64) * 3).schedule()][-1], AMDLLVMRenderer("gfx942"))
  bad = prg.src.replace("ptr addrspace(1) %data1", "ptr addrspace(3) %data1", 1)
  with pytest.raises(CompileError) as e: compiler("gfx942").object(bad)
  assert "AMD gfx942: LLVM rejected the IR" in str(e.value) and ">>" in str(e.value)

def test_kernarg_packing_matches_the_layout():
  import struct
  from tinygrad.runtime.support.compiler_amd import kernarg_layout, pack_kernargs
  assert kernarg_layout(2, 3) == [(0, 8), (8, 8), (16, 4), (20, 4), (24, 4)]
  raw = pack_kernargs([0x1122334455667788, 0x10], [-1, 7])
  assert struct.unpack("<QQii", raw) == (0x1122334455667788, 0x10, -1, 7)

def test_gfx_names_and_visible_devices():
  from tinygrad.runtime.ops_amd import gfx_name, visible_devices
  assert [gfx_name(v) for v in (90402, 110000, 120001, 90010)] == ["gfx942", "gfx1100", "gfx1201", "gfx90a"]
  with Context(HCQ_VISIBLE_DEVICES="0,2"): assert visible_devices(4) == [0, 2]
  with Context(HCQ_VISIBLE_DEVICES="0,5"):
    with pytest.raises(DeviceOpenError, match="HCQ_VISIBLE_DEVICES"): visible_devices(4)
  with Context(HCQ_VISIBLE_DEVICES="a,b"):
    with pytest.raises(DeviceOpenError, match="comma list"): visible_devices(4)

def test_no_hip_is_a_one_line_error():
  from tinygrad.runtime import ops_amd
  if ops_amd.open_hip() is not None: pytest.skip("this machine has the HIP runtime")
  with Context(COMPILE_ONLY=0):
    with pytest.raises(DeviceOpenError) as e: ops_amd.AMDDevice("AMD")
  assert "\n" not in str(e.value) and "libamdhip64" in str(e.value) and "COMPILE_ONLY=1" in str(e.value)

COMPILE_ONLY_RUN = textwrap.dedent('''
  import numpy as np
  from tinygrad import Tensor
  a = Tensor(np.ones((8, 4096), np.float32), device="AMD")
  out = (a.sum(axis=1) + a.max(axis=1)).exp2()
  out.realize()
  (a[:, :64] @ a[:, :64].T).realize()
  try: out.numpy()
  except Exception as e: print("READ:", type(e).__name__, str(e).splitlines()[-1])
  np.testing.assert_array_equal(a.numpy(), np.ones((8, 4096), np.float32))  # data copied in reads back
''')

@pytest.mark.parametrize("arch", ARCHS)
def test_compile_only_compiles_every_kernel_and_debug_prints_resources(arch, linker):
  env = {**os.environ, "COMPILE_ONLY": "1", "AMD_ARCH": arch, "DEBUG": "2", "CACHELEVEL": "0"}
  res = subprocess.run([sys.executable, "-c", COMPILE_ONLY_RUN], capture_output=True, text=True, timeout=300, env=env)
  assert res.returncode == 0, res.stderr[-3000:]
  lines = [ln for ln in res.stdout.splitlines() if ln.startswith("*** AMD") and f" compiled {arch} " in ln]
  assert len(lines) >= 2, res.stdout
  for ln in lines:
    assert re.search(r"; grid \[\d+, \d+, \d+\] block \[\d+, \d+, \d+\]$", ln), ln
    assert re.search(r"VGPRs \d+, SGPRs \d+, LDS \d+ bytes, scratch \d+ bytes \(spills: \d+ VGPRs, \d+ SGPRs\)", ln), ln
    assert f"wave{amd_arch(arch).wave}" in ln
  assert any(re.search(r"LDS [1-9]\d* bytes", ln) for ln in lines), "the group reduce uses LDS"
  assert "READ: NotComputedError" in res.stdout and "COMPILE_ONLY=1" in res.stdout

@pytest.mark.gpu
def test_runs_on_an_amd_gpu():
  from tinygrad.device import Device
  Device["AMD"]
  a = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
  got = (Tensor(a, device="AMD") @ Tensor(a, device="AMD")).relu().sum(axis=0).numpy()
  np.testing.assert_allclose(got, np.maximum(a @ a, 0).sum(axis=0), rtol=1e-4, atol=1e-4)
