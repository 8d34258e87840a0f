"""The Renderer contract: codegen reads from a renderer only what `Renderer` declares, and a renderer's identity names
what decides its output."""
import ast, os, pathlib, subprocess, sys
import pytest
from tinygrad import Tensor
from tinygrad.codegen import get_program, search
from tinygrad.codegen.opt import Opt, OptOps, KernelOptError
from tinygrad.dtype import dtypes
from tinygrad.engine.schedule import create_schedule_with_vars
from tinygrad.helpers import Context
from tinygrad.renderer import Renderer, Vectors, TensorCore
from tinygrad.renderer.cstyle import CRenderer
from tinygrad.renderer.llvmir import CPULLVMRenderer, AMDLLVMRenderer
from tinygrad.renderer.cuda import CUDARenderer
from tinygrad.runtime.ops_python import PythonRenderer
from tinygrad.uop import Ops

ROOT = pathlib.Path(__file__).resolve().parents[2]
DECLARED = {n for n in dir(Renderer) if not n.startswith("_")} | set(Renderer.__annotations__)

def recording(cls: type, *args) -> tuple[Renderer, set[str]]:
  """An instance of renderer class `cls` that records the name of every attribute a module of tinygrad.codegen reads
  from it (reads by the renderer's own methods are its business, not codegen's)."""
  reads: set[str] = set()
  class Recording(cls):  # type: ignore[misc, valid-type]
    def __getattribute__(self, name: str):
      if not name.startswith("__") and sys._getframe(1).f_globals.get("__name__", "").startswith("tinygrad.codegen"):
        reads.add(name)
      return super().__getattribute__(name)
  return Recording(*args), reads

def kernel_asts() -> list:
  """The kernels of a few programs that reach every codegen pass: matmul, reductions, cat/pad (cut on CPU), random
  numbers (threefry), transcendentals, half and bfloat16, integer division, a masked conv."""
  Tensor.manual_seed(0)
  # NOTE: inputs realized first, so random numbers are one small kernel instead of fused into every other one
  a, b, w = Tensor.randn(16, 32).realize(), Tensor.randn(32, 8).realize(), Tensor.randn(4, 2, 3, 3).realize()
  outs = [a @ b, a.sum(1), a.max(0), a.exp().log().sin(), a.cat(a, dim=0).pad(((1, 2), (0, 3))),
          Tensor.rand(64) * 2, a.cast(dtypes.half).sum(0).cast(dtypes.float32), a.cast(dtypes.bfloat16) * 3,
          Tensor.arange(40).reshape(8, 5) // 3 % 4, a.reshape(1, 2, 16, 16).conv2d(w, padding=1),
          a.softmax(-1)]
  items, _, _ = create_schedule_with_vars(outs[0].uop.sink(*[t.uop for t in outs[1:]]))
  return [it.ast for it in items if it.ast.op is Ops.SINK]

@pytest.fixture(scope="module")
def asts():
  ret = kernel_asts()
  assert len(ret) >= 10
  return ret

def check_reads(reads: set[str]) -> None:
  undeclared = sorted(reads - DECLARED)
  assert not undeclared, f"codegen read renderer attribute(s) {undeclared} that Renderer does not declare"

RENDERERS = [(CRenderer, (4,)), (PythonRenderer, ("NV",)), (CPULLVMRenderer, ("x86_64-unknown-linux-gnu", "", 512, 4)),
             (AMDLLVMRenderer, ("gfx942",)), (CUDARenderer, ("sm_89",))]

@pytest.mark.parametrize("cls,args", RENDERERS, ids=["C", "PYTHON-NV", "LLVM-CPU", "LLVM-AMD", "CUDA"])
@pytest.mark.parametrize("flags", [{}, {"DEVECTORIZE": 1, "TRANSCENDENTAL": 2}, {"NOOPT": 1}], ids=["default", "devec", "noopt"])
def test_codegen_reads_only_declared_renderer_attributes(asts, cls, args, flags):
  ren, reads = recording(cls, *args)
  with Context(**flags):
    for a in asts: get_program(a, ren)
  check_reads(reads)
  # the recorder sees the reads that matter (else this test could not fail)
  assert {"has_local", "global_max", "supports_op", "extra_matcher"} <= reads
  if not flags: assert "has_threads" in reads and ("threads" in reads or not ren.has_threads)

def test_explicit_gpu_opts_read_only_declared_attributes(asts):
  ren, reads = recording(PythonRenderer, "AMD")
  reduce_ast = next(a for a in asts if any(u.op is Ops.REDUCE for u in a.toposort()))
  for opts in ([Opt(OptOps.GROUPTOP, 0, 16)], [Opt(OptOps.LOCAL, 0, 2)], [Opt(OptOps.GROUP, 0, 4), Opt(OptOps.NOLOCALS)]):
    try: get_program(reduce_ast, ren, opts)
    except KernelOptError: pass
  check_reads(reads)
  assert {"local_max", "local_max_total", "shared_max", "has_shared"} <= reads

def test_beam_reads_only_declared_attributes(monkeypatch, tmp_path, asts):
  monkeypatch.setattr(search, "ACTIONS", [Opt(OptOps.UPCAST, 0, 2), Opt(OptOps.THREAD, 0, 2)])
  monkeypatch.setattr(search, "MAX_ROUNDS", 1)
  # NOTE: BEAM times on Device["CPU"], so the renderer is of its kind (LLVM IR where llvmlite is installed, else C)
  from tinygrad.device import Device
  if Device["CPU"].llvm:
    from tinygrad.runtime.support.compiler_llvm import host_target
    h = host_target()
    ren, reads = recording(CPULLVMRenderer, h.triple, h.datalayout, h.vector_bits, 2)
  else: ren, reads = recording(CRenderer, 2)
  with Context(CACHEDB=str(tmp_path / "beam.db"), BEAM=1): get_program(asts[0], ren)
  check_reads(reads)
  assert {"device", "identity", "threads"} <= reads

def test_undeclared_read_is_caught():
  # a codegen module that probes an attribute with a default (the pattern the contract forbids) is recorded
  ren, reads = recording(CRenderer)
  exec("getattr(ren, 'supports_float4', False); ren.has_local", {"__name__": "tinygrad.codegen.probe", "ren": ren})
  assert reads == {"supports_float4", "has_local"}
  with pytest.raises(AssertionError, match="supports_float4"): check_reads(reads)

def test_codegen_has_no_attribute_probing():
  # getattr/hasattr with a default hides an undeclared read from mypy; codegen has none
  bad = []
  for f in sorted((ROOT / "tinygrad" / "codegen").glob("*.py")):
    for node in ast.walk(ast.parse(f.read_text())):
      if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
        bad.append(f"{f.name}:{node.lineno}")
      if isinstance(node, ast.Attribute) and node.attr == "signature": bad.append(f"{f.name}:{node.lineno} signature")
  assert bad == []

# ---- the renderers this repo has keep the contract ----

@pytest.mark.parametrize("ren", [CRenderer(), CRenderer(8), PythonRenderer(), PythonRenderer("NV"), PythonRenderer("AMD"),
                                 *[cls(*args) for cls, args in RENDERERS[2:]], AMDLLVMRenderer("gfx1201")],
                         ids=["C1", "C8", "PY", "PY-NV", "PY-AMD", "LLVM-CPU", "LLVM-gfx942", "CUDA-sm_89", "LLVM-gfx1201"])
def test_renderer_values_are_consistent(ren):
  assert isinstance(ren.device, str) and ren.device and isinstance(ren.arch, str)
  assert isinstance(ren.threads, int) and ren.threads >= 1 and (ren.has_threads or ren.threads == 1)
  if ren.has_threads: assert ren.global_max is None and not ren.has_local
  if ren.has_local:
    assert ren.global_max is not None and ren.local_max is not None and ren.local_max_total >= max(ren.local_max[:1])
  if ren.has_shared: assert ren.has_local and ren.shared_max > 0
  for dt, v in ren.vectors.items():
    assert dt.count == 1 and isinstance(v, Vectors) and v.widths == tuple(sorted(v.widths, reverse=True)) and min(v.widths) >= 2
    for w in v.widths: assert all(ren.supports_op(op, dt.vec(w)) for op in v.ops)
  assert all(isinstance(tc, TensorCore) for tc in ren.tensor_cores)
  assert ren.supports_op(Ops.ADD, dtypes.float32) and not ren.supports_op(Ops.ADD, dtypes.float32.vec(3))

def test_c_vector_ops_per_dtype():
  ren = CRenderer()
  assert ren.vector_widths(dtypes.float32) == (8, 4, 2) and ren.vector_widths(dtypes.bool) == ()
  assert ren.vector_widths(dtypes.bfloat16) == () and ren.supports_op(Ops.MUL, dtypes.float32.vec(4))
  # comparisons and transcendentals are scalar only in C; bfloat16 has no vectors at all
  assert not ren.supports_op(Ops.CMPLT, dtypes.float32.vec(4)) and not ren.supports_op(Ops.EXP2, dtypes.float32.vec(4))
  assert ren.supports_op(Ops.EXP2, dtypes.float32) and not ren.supports_op(Ops.ADD, dtypes.bfloat16.vec(2))

# ---- identity ----

def test_identity_names_class_arch_threads():
  assert CRenderer(2).identity != CRenderer(4).identity and CRenderer(4).identity == CRenderer(4).identity
  assert "CRenderer" in CRenderer().identity and "threads=4" in CRenderer(4).identity
  assert PythonRenderer("NV").identity != PythonRenderer("AMD").identity
  assert AMDLLVMRenderer("gfx942").identity != AMDLLVMRenderer("gfx1100").identity
  assert CUDARenderer("sm_80").identity != CUDARenderer("sm_90").identity
  # the LLVM CPU renderer's module depends on the vector width and the triple, which are part of its identity
  assert CPULLVMRenderer("x86_64-unknown-linux-gnu", "", 512, 4).identity != CPULLVMRenderer("x86_64-unknown-linux-gnu", "", 256, 4).identity
  # a renderer that follows EMULATE names the target it follows now
  with Context(EMULATE="AMD"): assert PythonRenderer().identity == PythonRenderer("AMD").identity

def test_identity_changes_with_any_contract_value():
  class Wide(CRenderer):
    vectors = {dtypes.float32: Vectors((16, 8, 4, 2), CRenderer.vectors[dtypes.float32].ops)}
  assert Wide().identity.replace("Wide", "CRenderer") != CRenderer().identity

def test_identity_is_the_same_in_a_fresh_process():
  code = ("from tinygrad.renderer.cstyle import CRenderer; from tinygrad.runtime.ops_python import PythonRenderer; "
          "print(CRenderer(3).identity); print(PythonRenderer('NV').identity)")
  outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True,
                         env={"PYTHONHASHSEED": str(seed), "PATH": "/usr/bin:/bin"}).stdout for seed in (1, 2)}
  assert outs == {f"{CRenderer(3).identity}\n{PythonRenderer('NV').identity}\n"}

def test_cpu_device_renderer_has_its_thread_count():
  from tinygrad.device import Device
  dev = Device["CPU"]
  assert isinstance(dev.renderer, CPULLVMRenderer if dev.llvm else CRenderer) and dev.renderer.threads == dev.threads

def test_cpu_device_compiles_llvm_by_default_where_llvmlite_is_installed_else_c():
  # CPU_LLVM (read when the device opens) defaults to 1 where llvmlite is installed, else 0; either path gives the
  # same values, and CPU_LLVM=0 selects C
  code = ("from tinygrad.device import Device; from tinygrad import Tensor; d = Device['CPU']; "
          "print(d.llvm, type(d.renderer).__name__, (Tensor([1.0, 2.0]) * 3).tolist())")
  # NOTE: a None entry in sys.modules is how an absent package looks to importlib.util.find_spec and to import
  hidden = "import sys; sys.modules['llvmlite'] = None; "
  def run(env: dict[str, str], prefix: str = "") -> str:
    e = {k: v for k, v in os.environ.items() if k not in ("CPU_LLVM", "DEV", "PYTHON")} | env
    return subprocess.run([sys.executable, "-c", prefix + code], capture_output=True, text=True, cwd=ROOT, check=True,
                          env=e).stdout.strip()
  assert run({}, hidden) == "False CRenderer [3.0, 6.0]"
  assert run({"CPU_LLVM": "0"}) == "False CRenderer [3.0, 6.0]"
  import importlib.util
  if importlib.util.find_spec("llvmlite") is not None:
    assert run({}) == "True CPULLVMRenderer [3.0, 6.0]"
    assert run({"CPU_LLVM": "1"}) == "True CPULLVMRenderer [3.0, 6.0]"

def test_heuristics_follow_the_renderer_not_the_machine():
  from tests.codegen.test_opt import matmul_ast
  from tinygrad.codegen.heuristic import hand_coded_optimizations
  t3, t8 = hand_coded_optimizations(matmul_ast(256, 256, 256), CRenderer(3)), hand_coded_optimizations(matmul_ast(256, 256, 256), CRenderer(8))
  assert any(o.op is OptOps.THREAD and o.arg == 8 for o in t8) and all(o.arg <= 3 for o in t3 if o.op is OptOps.THREAD) and t3 != t8
  # CPU_THREADS is read when the CPU device opens, never by the heuristics
  with Context(CPU_THREADS=64): assert hand_coded_optimizations(matmul_ast(256, 256, 256), CRenderer(8)) == t8

def test_program_records_renderer_identity():
  from tests.codegen.test_opt import matmul_ast
  p = get_program(matmul_ast(), CRenderer(2))
  assert p.renderer == CRenderer(2).identity and p.device == "CPU" and "void" in p.src
