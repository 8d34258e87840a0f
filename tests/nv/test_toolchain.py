"""The NV toolchain: each way of finding it on its own (wheels only, a system CUDA only, neither), the PTX and cubin per
arch, compile errors with the source lines they name, and the compile cache key."""
import os, struct
import numpy as np
import pytest
from tinygrad.device import CompileError, Device, DeviceOpenError
from tinygrad.helpers import Context
from tinygrad.runtime.support import cuda_toolchain as tc
from tinygrad.runtime.support.cuda_toolchain import (NVCompiler, NVBinary, ToolchainError, find_toolchain, check_arch,
                                                     wheel_roots, source_excerpt, parse_ptxas_report, arch_for_device)

KERNEL = '''#include <cuda_fp16.h>
extern "C" __global__ void __launch_bounds__(64) k(float* data0, half* data1, int var0) {
  int i = ((int)blockIdx.x)*64+((int)threadIdx.x);
  if (i < var0) data0[i] = __half2float(data1[i]) * 2.0f;
}
'''

def _wheel_dirs():
  roots = wheel_roots()
  if not roots: pytest.skip("the nvidia-cuda-* wheels are not installed in this Python (pip install -e '.[nv]')")
  return roots

def _elf_sm(cubin: bytes) -> int:
  assert cubin[:4] == b"\x7fELF", "a cubin is an ELF file"
  assert struct.unpack_from("<H", cubin, 0x12)[0] == 190, "e_machine is EM_CUDA"
  flags = struct.unpack_from("<I", cubin, 0x30)[0]
  # NOTE: ABI version 8 (CUDA 12.8+) keeps the SM number in bits 8..15 of e_flags; older ones in bits 0..7
  return (flags >> 8) & 0xff if cubin[8] >= 8 else flags & 0xff

# ---- lookup, one way at a time ----

def test_toolchain_from_wheels_only():
  roots = _wheel_dirs()
  t = find_toolchain(wheels=roots, system=[])
  for p in (t.nvrtc, t.include, t.ptxas): assert any(p.startswith(r) for r in roots), (p, roots)
  assert "site-packages" in t.nvrtc and os.path.basename(t.nvrtc).startswith("libnvrtc")
  lib = NVCompiler("sm_90", toolchain=t).compile(KERNEL)
  assert _elf_sm(NVBinary.unpack(lib).cubin) == 90

def test_wheel_lookup_scans_sys_path_for_the_wheel_layouts(tmp_path, monkeypatch):
  # NOTE: a site-packages of our own on sys.path, in the CUDA 12 wheel layout (one directory per wheel): found without
  # this venv's wheels or any system CUDA
  w = find_toolchain(wheels=_wheel_dirs(), system=[])
  site = tmp_path / "site"
  for sub, link, target in (("cuda_nvrtc/lib", os.path.basename(w.nvrtc), w.nvrtc), ("cuda_runtime", "include", w.include),
                            ("cuda_nvcc/bin", "ptxas", w.ptxas)):
    os.makedirs(site / "nvidia" / sub, exist_ok=True)
    os.symlink(target, site / "nvidia" / sub / link)
  monkeypatch.setattr("sys.path", [str(site)])
  roots = wheel_roots()
  assert sorted(roots) == sorted(str(site / "nvidia" / d) for d in ("cuda_nvrtc", "cuda_runtime", "cuda_nvcc"))
  t = find_toolchain(system=[])
  assert t.nvrtc.startswith(str(site)) and t.include.startswith(str(site)) and t.ptxas.startswith(str(site))

def _fake_system_cuda(root, nvrtc, include, ptxas):
  # the layout of a CUDA toolkit: lib64/libnvrtc.so.N, include/, bin/ptxas
  os.makedirs(root / "lib64"); os.makedirs(root / "bin")
  os.symlink(nvrtc, root / "lib64" / os.path.basename(nvrtc))
  os.symlink(include, root / "include")
  os.symlink(ptxas, root / "bin" / "ptxas")
  return root

def test_toolchain_from_system_cuda_only(tmp_path):
  # NOTE: this machine's system CUDA has no libnvrtc, so the toolkit is assembled in a temp dir (the wheel's libnvrtc
  # and ptxas, the headers of whichever CUDA has them) and found through CUDA_PATH alone, with no wheels searched
  w = find_toolchain(wheels=_wheel_dirs(), system=[])
  root = _fake_system_cuda(tmp_path / "cuda", w.nvrtc, w.include, w.ptxas)
  with Context(CUDA_PATH=str(root)):
    assert tc.system_roots()[0] == str(root)
    t = find_toolchain(wheels=[])
  assert t.nvrtc.startswith(str(root)) or os.path.realpath(t.nvrtc) == os.path.realpath(w.nvrtc)
  assert os.path.dirname(t.nvrtc) == os.path.abspath(root / "lib64") and t.ptxas == os.path.abspath(root / "bin" / "ptxas")
  assert t.include == os.path.abspath(root / "include")
  assert _elf_sm(NVBinary.unpack(NVCompiler("sm_89", toolchain=t).compile(KERNEL)).cubin) == 89

def test_toolchain_missing_everything_names_what_to_install(tmp_path):
  with pytest.raises(ToolchainError) as e: find_toolchain(wheels=[], system=[str(tmp_path)])
  msg = str(e.value)
  for piece in ("libnvrtc", "cuda_fp16.h", "ptxas", f"nvidia-cuda-nvrtc=={tc.PINNED_CUDA}", "nvidia-cuda-runtime",
                "nvidia-cuda-nvcc", "CUDA_PATH", str(tmp_path)):
    assert piece in msg, (piece, msg)
  assert "\n" not in msg

def test_toolchain_missing_one_piece_names_only_it(tmp_path):
  w = find_toolchain(wheels=_wheel_dirs(), system=[])
  root = tmp_path / "cuda"
  os.makedirs(root / "lib64")
  os.symlink(w.nvrtc, root / "lib64" / os.path.basename(w.nvrtc))
  os.symlink(w.include, root / "include")
  with pytest.raises(ToolchainError, match="missing ptxas") as e: find_toolchain(wheels=[], system=[str(root)])
  assert "libnvrtc" not in str(e.value).split("Looked in")[0]

def test_older_ptxas_than_nvrtc_is_a_clear_error(tmp_path):
  sys_ptxas = "/usr/local/cuda/bin/ptxas"
  w = find_toolchain(wheels=_wheel_dirs(), system=[])
  def ver(p): return tuple(int(x) for x in tc.tool_version(p).split("."))
  if not os.path.exists(sys_ptxas) or ver(sys_ptxas)[:2] >= ver(w.ptxas)[:2]:
    pytest.skip("needs a system ptxas older than the wheel's NVRTC")
  t = tc.Toolchain(w.nvrtc, w.include, sys_ptxas)
  with pytest.raises(ToolchainError, match=r"ptxas 13\.0.*older than NVRTC 13\.\d.*pip install nvidia-cuda-nvcc"):
    NVCompiler("sm_90", toolchain=t)

def test_nv_device_without_toolchain_says_so_in_one_line(monkeypatch, tmp_path):
  monkeypatch.setattr(tc, "wheel_roots", lambda: [])
  monkeypatch.setattr(tc, "system_roots", lambda: [str(tmp_path)])
  with Context(COMPILE_ONLY=1), pytest.raises(DeviceOpenError) as e: Device["NV"]
  assert "\n" not in str(e.value) and "libnvrtc" in str(e.value) and "pip install" in str(e.value)

# ---- archs ----

@pytest.mark.parametrize("arch", ["sm_80", "sm_89", "sm_90"])
def test_ptx_and_cubin_for_each_arch(arch):
  b = NVBinary.unpack(NVCompiler(arch).compile(KERNEL))
  assert f".target {arch}" in b.ptx and ".entry k(" in b.ptx
  assert _elf_sm(b.cubin) == int(arch[3:])
  assert b.params == ("data0", "data1", "var0") and b.report.registers > 0

def test_unknown_arch_lists_the_supported_ones():
  for bad in ("sm_75", "sm_100", "hopper", ""):
    with pytest.raises(ValueError, match="sm_80, sm_89, sm_90"): check_arch(bad)
  assert check_arch("SM_90") == "sm_90" and check_arch("89") == "sm_89"

def test_unknown_nv_arch_on_device_open_is_clear():
  with Context(COMPILE_ONLY=1, NV_ARCH="sm_75"), pytest.raises(DeviceOpenError, match="NV_ARCH='sm_75'.*sm_80, sm_89, sm_90"):
    Device["NV"]

def test_device_arch_maps_to_a_cubin_that_runs():
  assert arch_for_device(8, 0) == "sm_80" and arch_for_device(8, 6) == "sm_80" and arch_for_device(8, 9) == "sm_89"
  assert arch_for_device(9, 0) == "sm_90"
  for cc in ((7, 5), (10, 0), (12, 0)):
    with pytest.raises(DeviceOpenError, match="sm_80, sm_89, sm_90"): arch_for_device(*cc)

# ---- errors, reports, cache ----

def test_nvrtc_error_shows_log_and_named_source_lines():
  src = KERNEL.replace("* 2.0f;", "* undefined_thing;")
  with pytest.raises(CompileError) as e: NVCompiler("sm_90").compile(src)
  msg = str(e.value)
  assert 'identifier "undefined_thing" is undefined' in msg
  assert ">   4 |   if (i < var0) data0[i] = __half2float(data1[i]) * undefined_thing;" in msg
  assert "   2 | extern" in msg  # context around the named line

def test_ptxas_error_shows_the_ptx_line():
  bad = ".version 9.0\n.target sm_90\n.address_size 64\n.visible .entry k() {\n  bogus.instr;\n}\n"
  with pytest.raises(CompileError) as e: tc.assemble(find_toolchain().ptxas, bad, "sm_90", "k")
  assert "bogus" in str(e.value) and ">   5 |   bogus.instr;" in str(e.value)

def test_ptxas_files_of_a_very_long_kernel_name():
  # the .ptx/.cubin temp files were named after the kernel: a name of hundreds of bytes failed with ENAMETOOLONG
  ptx = NVBinary.unpack(NVCompiler("sm_90").compile(KERNEL)).ptx
  cubin, report, _ = tc.assemble(find_toolchain().ptxas, ptx, "sm_90", "r_" + "_".join(["2"] * 200))
  assert _elf_sm(cubin) == 90 and report.registers > 0

def test_source_excerpt_without_line_numbers_shows_all():
  assert "   1 | a" in source_excerpt("a\nb", "some error", "x.cu") and "   2 | b" in source_excerpt("a\nb", "", "x.cu")

def test_ptxas_report_parsed():
  r = parse_ptxas_report("ptxas info    : Function properties for k\n    24 bytes stack frame, 8 bytes spill stores, "
                         "12 bytes spill loads\nptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem, 368 bytes cmem[0]")
  assert (r.registers, r.spill_stores, r.spill_loads, r.stack, r.smem) == (40, 8, 12, 24, 2048)
  assert "regs 40" in r.describe() and "smem 2048 B" in r.describe()

def test_shared_memory_and_spills_reported_from_ptxas():
  src = ('extern "C" __global__ void __launch_bounds__(256) s(float* data0) {\n  __shared__ __align__(16) float smem0[512];\n'
         '  smem0[threadIdx.x] = data0[threadIdx.x];\n  __syncthreads();\n  data0[threadIdx.x] = smem0[511-threadIdx.x];\n}\n')
  b = NVBinary.unpack(NVCompiler("sm_90").compile(src))
  assert b.report.smem == 2048 and b.report.spill_stores == 0

def test_cache_key_holds_versions_arch_and_flags():
  c90, c80 = NVCompiler("sm_90"), NVCompiler("sm_80")
  assert c90.cachekey != c80.cachekey and "sm_90" in c90.cachekey
  assert f"nvrtc {c90.nvrtc.version}" in c90.cachekey and f"ptxas {c90.ptxas_version}" in c90.cachekey
  assert "--fmad=true" in c90.cachekey and c90.toolchain.include in c90.cachekey

def test_compile_cache_hits_on_second_compile(tmp_path):
  with Context(CACHEDB=str(tmp_path / "cache.db"), CACHELEVEL=2):
    c = NVCompiler("sm_90")
    a = c.compile_cached(KERNEL)
    b = c.compile_cached(KERNEL)
    assert a == b and (c.compiles, c.cache_hits) == (1, 1)
    c80 = NVCompiler("sm_80")
    c80.compile_cached(KERNEL)
    assert (c80.compiles, c80.cache_hits) == (1, 0), "another arch must not hit sm_90's entry"

def test_binary_pack_roundtrip():
  b = NVBinary("sm_89", "ptx text", b"\x7fELFxyz", tc.PtxasReport(3, 1, 2, 4, 5), ("data0", "var0"), {"data0": 16})
  assert NVBinary.unpack(b.pack()) == b
  with pytest.raises(ValueError, match="not an NV kernel binary"): NVBinary.unpack(b"garbage")

def test_batch_verify_names_each_failing_kernel():
  good = KERNEL
  bad = tc.rename_kernel(KERNEL.replace("* 2.0f;", "* nope;"), "k_bad")
  other = tc.rename_kernel(KERNEL, "k_other")
  res = NVCompiler("sm_90").verify([good, bad, other], batch=8)
  assert res[0] is None and res[2] is None and res[1] is not None and "k_bad" in res[1] and "nope" in res[1]

def test_min_driver_for_cuda13_is_r580():
  c = NVCompiler("sm_90")
  if c.nvrtc.version[0] == 13: assert c.min_driver == (13000, "580.65.06")
  assert np.all([tc.MIN_DRIVER[m][0] == m * 1000 for m in tc.MIN_DRIVER])
