"""The target registry's data (tinygrad/runtime/targets.py is the registry): the default NV and AMD archs, the AMD arch
table, and what each EMULATE value makes the PYTHON device stand in for. Only data: renderers and compilers import it,
and it imports nothing of theirs (the NV arch table is the CUDA renderer's own, NV_ARCHS in renderer/cuda.py).
"""
from __future__ import annotations
from dataclasses import dataclass
from tinygrad.helpers import NV_ARCH, AMD_ARCH

# the NV archs the CUDA renderer and toolchain build for, oldest first
NV_SUPPORTED_ARCHS = ("sm_80", "sm_89", "sm_90")
NV_DEFAULT_ARCH = "sm_90"
AMD_DEFAULT_ARCH = "gfx1100"

def check_arch(arch: str) -> str:
  """`arch` as one of NV_SUPPORTED_ARCHS ("sm_90"; "SM_90" and "90" are accepted too), else a clear error."""
  a = arch.strip().lower()
  a = a if a.startswith("sm_") else f"sm_{a.removeprefix('sm')}"
  if a not in NV_SUPPORTED_ARCHS:
    raise ValueError(f"NV_ARCH={arch!r} is not a supported NVIDIA architecture; supported: "
                     f"{', '.join(NV_SUPPORTED_ARCHS)} (A100 sm_80, L4/L40/RTX 40xx sm_89, H100/H200 sm_90)")
  return a

@dataclass(frozen=True)
class AMDArch:
  """What codegen and the compiler need to know of one AMD GPU architecture."""
  name: str
  family: str
  wave: int          # threads per wavefront: 64 on CDNA, 32 (the compiler's choice) on RDNA
  lds: int           # bytes of LDS per workgroup

AMD_ARCHS = {a.name: a for a in (AMDArch("gfx942", "CDNA3", 64, 65536), AMDArch("gfx1100", "RDNA3", 32, 65536),
                                  AMDArch("gfx1201", "RDNA4", 32, 65536))}

def amd_arch(name: str) -> AMDArch:
  if name not in AMD_ARCHS:
    raise ValueError(f"AMD_ARCH={name!r} is not a supported architecture; choose one of {sorted(AMD_ARCHS)} "
                     "(gfx942: CDNA3/MI300, gfx1100: RDNA3/RX 7900, gfx1201: RDNA4/RX 9070)")
  return AMD_ARCHS[name]

def default_arch(device: str) -> str:
  """The arch of NV or AMD when none is named: NV_ARCH / AMD_ARCH (codegen flags), else the default one."""
  if device == "NV": return NV_ARCH.value or NV_DEFAULT_ARCH
  if device == "AMD": return AMD_ARCH.value or AMD_DEFAULT_ARCH
  raise ValueError(f"{device} has no arch; NV and AMD do")

# EMULATE value -> (device, arch) the PYTHON device stands in for; "" arch: the device's default_arch
EMULATED: dict[str, tuple[str, str]] = {"NV": ("NV", ""), "AMD": ("AMD", ""),
                                        **{f"AMD_{a.upper()}": ("AMD", a) for a in AMD_ARCHS}}

def emulated(key: str) -> tuple[str, str]:
  """(device, arch) of an EMULATE value ("" is not one: the generic GPU emulates nothing)."""
  if key.upper() not in EMULATED:
    raise ValueError(f"EMULATE={key!r} is not a known target; use one of {sorted(EMULATED)} or nothing (generic)")
  device, arch = EMULATED[key.upper()]
  return device, arch or default_arch(device)

__all__ = ["NV_SUPPORTED_ARCHS", "check_arch", "NV_DEFAULT_ARCH", "AMD_DEFAULT_ARCH", "AMDArch", "AMD_ARCHS",
           "amd_arch", "default_arch", "EMULATED", "emulated"]
