"""Property: any program computes the same values on the CPU and under every GPU emulation (the PYTHON device running
the NV and AMD renderers' exact programs: their heuristics, grid, tensor cores and final rules).

- a kernel (fuzz.strategies.kernel_cases, candidate opts included) on the C backend and on the interpreter under each
  EMULATE target, every buffer within the ULP budget of the reference run (fuzz/oracles/budget.py);
- a tensor program (fuzz.gen.tensor_programs) on CPU and on PYTHON under each EMULATE target, each output within the error
  bound its builder tracked against numpy.
Bounded for the default suite (the `ci` hypothesis profile derandomizes it); a campaign on nv and amd runs both levels
unbounded (`python -m fuzz run --backends nv,amd [--level tensor]`)."""
from hypothesis import given, settings
from tinygrad.helpers import Context
from fuzz.campaign.backends import CBackend, PythonBackend, Failure
from fuzz.campaign.levels import KernelLevel
from fuzz.strategies import KernelConfig, kernel_cases
from fuzz.gen.tensor_programs import check_program, tensor_programs

EMULATE = ("NV", "AMD_GFX1100", "AMD_GFX1201", "AMD_GFX942")

@settings(max_examples=12)
@given(kernel_cases(KernelConfig(max_points=512)))
def test_kernel_values_agree_on_cpu_and_under_every_emulation(case):
  item = KernelLevel().prepare(case)
  assert not isinstance(item, Failure), item
  fails = {"cpu": CBackend().check_kernels([item])[0]}
  py = PythonBackend()
  for emu in EMULATE:
    with Context(EMULATE=emu): fails[emu] = py.check_kernels([item])[0]
  assert all(f is None for f in fails.values()), {k: f for k, f in fails.items() if f is not None}

@settings(max_examples=6)
@given(tensor_programs(max_steps=4))
def test_tensor_programs_agree_on_cpu_and_under_every_emulation(prog):
  check_program(prog, ("CPU",))
  for emu in EMULATE:
    with Context(EMULATE=emu): check_program(prog, ("PYTHON",))
