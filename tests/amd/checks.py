"""Structure checks of an AMD code object against the program it was compiled from (no GPU needed): shared by the tests
and the full compile sweep (tests/amd/sweep.py)."""
from tinygrad.dtype import PtrDType
from tinygrad.uop import Ops
from tinygrad.runtime.targets import amd_arch
from tinygrad.runtime.support.compiler_amd import read_code_object, kernarg_layout, KernelInfo

def check_code_object(lib: bytes, prg, arch: str) -> KernelInfo:
  """The kernel of `prg` in code object `lib` for `arch`, after checking: code object v5 for that arch, the `.kd`
  descriptor (read_code_object checks its symbol and entry offset), the wave size in metadata and descriptor, kernarg
  offsets equal to what the runtime packs, LDS at least the program's DEFINE_LOCAL bytes, metadata == descriptor."""
  target = amd_arch(arch)
  co = read_code_object(lib)
  assert co.version == (1, 2), f"code object version {co.version}, want (1, 2) = v5"
  assert co.target.startswith("amdgcn-amd-amdhsa--") and co.target.split("--")[1].split(":")[0] == arch, co.target
  k = co.kernels[prg.name]
  assert k.wavefront_size == target.wave and k.kd.wave32 == (target.wave == 32), (k.wavefront_size, k.kd)
  want = [(off, size, "global_buffer" if size == 8 else "by_value")
          for off, size in kernarg_layout(len(prg.globals), len(prg.vars))]
  assert k.explicit_args == want, f"kernargs {k.explicit_args} != runtime packing {want}"
  end = want[-1][0] + want[-1][1] if want else 0
  assert k.kd.kernarg_size >= end and k.meta[".kernarg_segment_size"] == k.kd.kernarg_size
  local = sum(u.dtype.size * u.dtype.base.itemsize for u in prg.uops if u.op is Ops.DEFINE_LOCAL and isinstance(u.dtype, PtrDType))
  assert k.lds == k.kd.group_segment_fixed_size and (k.lds >= local if local else k.lds == 0), (k.lds, local)
  assert k.scratch == k.kd.private_segment_fixed_size
  return k
