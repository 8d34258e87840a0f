"""The LLM app's kernels on the GPU targets (docs/llm.md, docs/models.md): every kernel of the jitted prefill chunks and
decode steps of a small random-weight llama GGUF model (tests/models/llm_run.py: Q8_0 and Q4_0 weights, dequantized
inside the matmuls) compiles for the GPU archs as `COMPILE_ONLY=1 realize()` compiles it, and the same run on the
PYTHON backend emulating NV and AMD gives the CPU's logits at every step, from the same file. The default suite
compiles the Q8_0 model's kernels for sm_90 and gfx942 and runs it under EMULATE=NV; every type on sm_80/89/90 and
gfx942/1100/1201 and under every emulation runs under -m slow (make test-models-slow)."""
import pytest
from tinygrad.uop import Ops
from tests.models.test_zoo_targets import ARCHS, EMULATIONS, assert_compiles, assert_emulation_matches
from tests.models.llm_run import TYPES, llm_kernels, model_file, run

DEFAULT_COMPILE = (("Q8_0", "sm_90"), ("Q8_0", "gfx942"))
DEFAULT_EMU = ("Q8_0", "NV")

def _check_compiles(q: str, arch: str) -> None:
  asts = llm_kernels(q)
  # NOTE: per layer at least the q/k/v/o and three FFN matmuls, in a prefill chunk and in a decode step
  assert len(asts) >= 14, f"llm {q}: only {len(asts)} kernels in its prefill and decode"
  assert_compiles(f"llm {q}", asts, arch)

@pytest.mark.parametrize("q,arch", DEFAULT_COMPILE)
def test_llm_kernels_compile(q, arch): _check_compiles(q, arch)

@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("q,arch", [(q, a) for q in TYPES for a in ARCHS if (q, a) not in DEFAULT_COMPILE])
def test_llm_kernels_compile_every_arch(q, arch): _check_compiles(q, arch)

def _check_emulation(q: str, emu: str, tmp_path) -> None:
  d = str(tmp_path)
  toks, cpu = run(model_file(d, q))
  # NOTE: a flat distribution would make any logits look alike: the model's logits must tell tokens apart
  assert cpu.std(axis=-1).min() > 0.05, f"llm {q}: the CPU's logits are nearly flat"
  out = str(tmp_path / "emu.npz")
  assert_emulation_matches(f"llm {q}", emu, ["tests.models.llm_run", "--types", q, "--dir", d, "--out", out], out,
                           {q: cpu})

def test_llm_under_emulation_matches_cpu(tmp_path): _check_emulation(*DEFAULT_EMU, tmp_path)

@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("q,emu", [(q, e) for q in TYPES for e in EMULATIONS if (q, e) != DEFAULT_EMU])
def test_llm_under_every_emulation_matches_cpu(q, emu, tmp_path): _check_emulation(q, emu, tmp_path)

def test_llm_kernels_hold_the_decode_step():
  """The collected kernels are the app's jitted steps: they read the bound position and the decode step's token."""
  names = {u.arg[0] for a in llm_kernels("Q8_0") for u in a.toposort() if u.op is Ops.DEFINE_VAR}
  assert {"start_pos", "token"} <= names, f"the LLM run's kernels read the variables {sorted(names)}"
