"""The tensor-core table: every matrix instruction the TC opt may use, with the exact register layout of its operands.

One table drives the TC opt (tinygrad/codegen/tc.py: which lane loads which element), the renderers (cuda.py: the
`mma.sync` PTX; llvmir.py: the `llvm.amdgcn.wmma`/`mfma` intrinsics) and the PYTHON backend's emulation of the
instruction (tinygrad/runtime/ops_python.py), which reads the layout by the instruction's name from `TENSOR_CORES`.

An instruction computes D (M x N, dtype_out) = A (M x K, dtype_in) @ B (K x N, dtype_in) + C (M x N, dtype_out) with
`threads` threads (a warp, a wave) together; each thread holds `elements_per_thread` = (a, b, c) elements of A, B and
C/D, in registers numbered 0.. (the element order of the vector operand: PTX's a0, a1, ..., LLVM's vector lanes).

Layouts are linear in the bits of the lane id and of the element number: each bit adds a fixed weight to the row or to
the column (or nothing: RDNA3 replicates A and B in lanes 16-31). Sources (facts, not code):
- NV: PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type" and "... mma.m16n8k32" (.e4m3/.e5m2,
  sm_89+): groupID = laneid >> 2, threadID_in_group = laneid % 4.
- AMD: the AMD Matrix Instruction Calculator (ROCm/amd_matrix_instruction_calculator, its gfx11 / gfx12 / gfx9
  register layouts; docs/llvm_amd.md quotes its equations).
- gfx1100 (RDNA3, WMMA): A and B are 16 elements per lane, lane l % 16 holds row (A) / column (B) l % 16 along all
  of K, lanes 16-31 hold a copy of lanes 0-15; D: lane l, element v is D[2v + l // 16][l % 16].
- gfx1201 (RDNA4, WMMA, wave32): no replication: A lane l holds row l % 16 and B column l % 16, element v at
  K = (v % 4) + 4 (l // 16) + 8 (v // 4) (lanes 0-15 hold K 0-3 and 8-11, lanes 16-31 K 4-7 and 12-15);
  D: lane l, element v is D[8 (l // 16) + v][l % 16].
- gfx942 (CDNA3, MFMA 16x16x16 f16 / bf16, wave64): A lane l holds row l % 16, K = 4 (l // 16) + v; B column l % 16,
  K = 4 (l // 16) + v; D: lane l, element v is D[4 (l // 16) + v][l % 16].
"""
from __future__ import annotations
from dataclasses import dataclass
from tinygrad.dtype import DType, dtypes

@dataclass(frozen=True)
class Layout:
  """Where element `e` of lane `l` of a fragment sits in its matrix: row = sum of `lane_row[b]` over the set bits b of
  l plus sum of `elem_row[b]` over the set bits of e; the column likewise."""
  lane_row: tuple[int, ...]
  lane_col: tuple[int, ...]
  elem_row: tuple[int, ...]
  elem_col: tuple[int, ...]
  def coords(self, lane: int, elem: int) -> tuple[int, int]:
    row = sum(w for b, w in enumerate(self.lane_row) if lane >> b & 1) + \
          sum(w for b, w in enumerate(self.elem_row) if elem >> b & 1)
    col = sum(w for b, w in enumerate(self.lane_col) if lane >> b & 1) + \
          sum(w for b, w in enumerate(self.elem_col) if elem >> b & 1)
    return row, col
  @property
  def lanes(self) -> int: return 1 << len(self.lane_row)
  @property
  def elems(self) -> int: return 1 << len(self.elem_row)

@dataclass(frozen=True)
class TensorCore:
  """One matrix-multiply-accumulate instruction: D (M x N, dtype_out) = A (M x K, dtype_in) @ B (K x N, dtype_in) + C,
  computed by `threads` threads together, each holding `elements_per_thread` = (a, b, c) elements of A, B and C/D laid
  out as `layout_a`, `layout_b`, `layout_c`. `name` names the instruction (the WMMA op's arg, the emulator's key)."""
  name: str
  dims: tuple[int, int, int]                # (M, N, K)
  threads: int
  elements_per_thread: tuple[int, int, int]
  dtype_in: DType
  dtype_out: DType
  layout_a: Layout
  layout_b: Layout
  layout_c: Layout

  def __post_init__(self) -> None:
    M, N, K = self.dims
    for lay, (rows, cols), n, what in ((self.layout_a, (M, K), self.elements_per_thread[0], "A"),
                                       (self.layout_b, (K, N), self.elements_per_thread[1], "B"),
                                       (self.layout_c, (M, N), self.elements_per_thread[2], "C")):
      if lay.lanes != self.threads or lay.elems != n or len(lay.lane_col) != len(lay.lane_row) or \
         len(lay.elem_col) != len(lay.elem_row):
        raise ValueError(f"tensor core {self.name}: layout of {what} has {lay.lanes} lanes x {lay.elems} elements, "
                         f"expected {self.threads} x {n}")
      cells = {lay.coords(l, e) for l in range(lay.lanes) for e in range(lay.elems)}
      if cells != {(r, c) for r in range(rows) for c in range(cols)}:
        raise ValueError(f"tensor core {self.name}: layout of {what} does not cover its {rows}x{cols} matrix")
    if self.threads * self.elements_per_thread[2] != M * N:
      raise ValueError(f"tensor core {self.name}: C/D must be held exactly once ({self.threads} x "
                       f"{self.elements_per_thread[2]} != {M}x{N})")

  @property
  def replicated(self) -> bool:
    """Whether A/B are held more than once across the lanes (RDNA3: lanes 16-31 copy lanes 0-15)."""
    M, N, K = self.dims
    return self.threads * self.elements_per_thread[0] != M * K

# ---- NV: mma.sync (warp of 32; lane bits 0-1 are threadID_in_group, bits 2-4 groupID) ----

_NV_C = Layout(lane_row=(0, 0, 1, 2, 4), lane_col=(2, 4, 0, 0, 0), elem_row=(0, 8), elem_col=(1, 0))
_NV_A16 = Layout(lane_row=(0, 0, 1, 2, 4), lane_col=(2, 4, 0, 0, 0), elem_row=(0, 8, 0), elem_col=(1, 0, 8))
_NV_B16 = Layout(lane_row=(2, 4, 0, 0, 0), lane_col=(0, 0, 1, 2, 4), elem_row=(1, 8), elem_col=(0, 0))
_NV_A32 = Layout(lane_row=(0, 0, 1, 2, 4), lane_col=(4, 8, 0, 0, 0), elem_row=(0, 0, 8, 0), elem_col=(1, 2, 0, 16))
_NV_B32 = Layout(lane_row=(4, 8, 0, 0, 0), lane_col=(0, 0, 1, 2, 4), elem_row=(1, 2, 16), elem_col=(0, 0, 0))

def _nv(din: DType, dout: DType, ptx: str) -> TensorCore:
  k = 32 if din.itemsize == 1 else 16
  a, b = (_NV_A32, _NV_B32) if k == 32 else (_NV_A16, _NV_B16)
  return TensorCore(f"mma.m16n8k{k}.{ptx}", (16, 8, k), 32, (16 if k == 32 else 8, 8 if k == 32 else 4, 4), din, dout,
                    a, b, _NV_C)

NV_F16_F32 = _nv(dtypes.float16, dtypes.float32, "f32.f16.f16.f32")
NV_BF16_F32 = _nv(dtypes.bfloat16, dtypes.float32, "f32.bf16.bf16.f32")
NV_F16_F16 = _nv(dtypes.float16, dtypes.float16, "f16.f16.f16.f16")
NV_E4M3_F32 = _nv(dtypes.fp8e4m3, dtypes.float32, "f32.e4m3.e4m3.f32")
NV_E5M2_F32 = _nv(dtypes.fp8e5m2, dtypes.float32, "f32.e5m2.e5m2.f32")

# ---- AMD: RDNA3 / RDNA4 WMMA (wave32), CDNA3 MFMA (wave64) ----

_RDNA3_A = Layout(lane_row=(1, 2, 4, 8, 0), lane_col=(0, 0, 0, 0, 0), elem_row=(0, 0, 0, 0), elem_col=(1, 2, 4, 8))
_RDNA3_B = Layout(lane_row=(0, 0, 0, 0, 0), lane_col=(1, 2, 4, 8, 0), elem_row=(1, 2, 4, 8), elem_col=(0, 0, 0, 0))
_RDNA3_C = Layout(lane_row=(0, 0, 0, 0, 1), lane_col=(1, 2, 4, 8, 0), elem_row=(2, 4, 8), elem_col=(0, 0, 0))
_RDNA4_A = Layout(lane_row=(1, 2, 4, 8, 0), lane_col=(0, 0, 0, 0, 4), elem_row=(0, 0, 0), elem_col=(1, 2, 8))
_RDNA4_B = Layout(lane_row=(0, 0, 0, 0, 4), lane_col=(1, 2, 4, 8, 0), elem_row=(1, 2, 8), elem_col=(0, 0, 0))
_RDNA4_C = Layout(lane_row=(0, 0, 0, 0, 8), lane_col=(1, 2, 4, 8, 0), elem_row=(1, 2, 4), elem_col=(0, 0, 0))
_CDNA3_A = Layout(lane_row=(1, 2, 4, 8, 0, 0), lane_col=(0, 0, 0, 0, 4, 8), elem_row=(0, 0), elem_col=(1, 2))
_CDNA3_B = Layout(lane_row=(0, 0, 0, 0, 4, 8), lane_col=(1, 2, 4, 8, 0, 0), elem_row=(1, 2), elem_col=(0, 0))
_CDNA3_C = Layout(lane_row=(0, 0, 0, 0, 4, 8), lane_col=(1, 2, 4, 8, 0, 0), elem_row=(1, 2), elem_col=(0, 0))

def _amd(arch: str, din: DType) -> TensorCore:
  s = "f16" if din is dtypes.float16 else "bf16"
  if arch == "gfx1100":
    return TensorCore(f"gfx1100.wmma.f32.16x16x16.{s}", (16, 16, 16), 32, (16, 16, 8), din, dtypes.float32,
                      _RDNA3_A, _RDNA3_B, _RDNA3_C)
  if arch == "gfx1201":
    return TensorCore(f"gfx1201.wmma.f32.16x16x16.{s}", (16, 16, 16), 32, (8, 8, 8), din, dtypes.float32,
                      _RDNA4_A, _RDNA4_B, _RDNA4_C)
  assert arch == "gfx942", arch
  return TensorCore(f"gfx942.mfma.f32.16x16x16.{s}", (16, 16, 16), 64, (4, 4, 4), din, dtypes.float32,
                    _CDNA3_A, _CDNA3_B, _CDNA3_C)

# ---- per target ----

NV_TENSOR_CORES: dict[str, tuple[TensorCore, ...]] = {
  "sm_80": (NV_F16_F32, NV_BF16_F32, NV_F16_F16),
  "sm_89": (NV_F16_F32, NV_BF16_F32, NV_F16_F16, NV_E4M3_F32, NV_E5M2_F32),
  "sm_90": (NV_F16_F32, NV_BF16_F32, NV_F16_F16, NV_E4M3_F32, NV_E5M2_F32),
}
AMD_TENSOR_CORES: dict[str, tuple[TensorCore, ...]] = {
  arch: (_amd(arch, dtypes.float16), _amd(arch, dtypes.bfloat16)) for arch in ("gfx1100", "gfx1201", "gfx942")}

TENSOR_CORES: dict[str, TensorCore] = {tc.name: tc for tcs in (*NV_TENSOR_CORES.values(), *AMD_TENSOR_CORES.values())
                                       for tc in tcs}

def tensor_core(name: str) -> TensorCore:
  """The instruction called `name` (a WMMA op's arg[0]), or a clear error."""
  if name not in TENSOR_CORES: raise KeyError(f"unknown tensor core {name!r}; known: {sorted(TENSOR_CORES)}")
  return TENSOR_CORES[name]

__all__ = ["Layout", "TensorCore", "TENSOR_CORES", "NV_TENSOR_CORES", "AMD_TENSOR_CORES", "tensor_core"]
