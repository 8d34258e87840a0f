"""The LLM app's kernels on the GPU targets (docs/llm.md, docs/models.md): every kernel of the jitted prefill chunks and
decode steps of a small random-weight llama GGUF model (tests/models/llm_run.py: Q8_0 and Q4_0 weights, dequantized
inside the matmuls) compiles for the GPU archs as `COMPILE_ONLY=1 realize()` compiles it, and the same run on the
PYTHON backend emulating NV and AMD gives the CPU's logits at every step, from the same file. The default suite
compiles the Q8_0 model's decode-step kernels for sm_90 and its prefill kernels for gfx942, and runs a short prefill
and two decode steps under EMULATE=NV; every type's kernels on sm_80/89/90 and gfx942/1100/1201 and the whole run under
every emulation are under -m slow (make test-models-slow)."""
import pytest
from tinygrad.uop import Ops
from tests.models.test_zoo_targets import ARCHS, EMULATIONS, assert_compiles, assert_emulation_matches
from tests.models.llm_run import TYPES, CHUNK, PROMPT_LEN, DECODE, llm_kernels, model_file, run

# NOTE: codegen and the toolchains dominate (a quantized matmul kernel takes seconds for sm_90): the default suite
# compiles each half of the Q8_0 model's kernels for one arch
DEFAULT_COMPILE = (("Q8_0", "decode", "sm_90"), ("Q8_0", "prefill", "gfx942"))
# the default emulation: one prefill chunk and two decode steps (the JIT captures on the second)
DEFAULT_EMU, SHORT = ("Q8_0", "NV"), (CHUNK, 2)

def _check_compiles(q: str, which: str, arch: str) -> None:
  asts = llm_kernels(q, which)
  # NOTE: per layer at least the q/k/v/o and three FFN matmuls, and the output matmul
  assert len(asts) >= 8, f"llm {q}: only {len(asts)} kernels in its {which}"
  assert_compiles(f"llm {q} {which}", asts, arch)

@pytest.mark.parametrize("q,which,arch", DEFAULT_COMPILE)
def test_llm_kernels_compile(q, which, arch): _check_compiles(q, which, arch)

@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("q,arch", [(q, a) for q in TYPES for a in ARCHS])
def test_llm_kernels_compile_every_arch(q, arch): _check_compiles(q, "all", arch)

def _check_emulation(q: str, emu: str, tmp_path, prompt_len: int, decode: int) -> None:
  d = str(tmp_path)
  _, cpu = run(model_file(d, q), prompt_len, decode)
  # NOTE: a flat distribution would make any logits look alike: the model's logits must tell tokens apart
  assert cpu.shape[0] == decode + 1 and cpu.std(axis=-1).min() > 0.05, f"llm {q}: the CPU's logits are nearly flat"
  out = str(tmp_path / "emu.npz")
  cmd = ["tests.models.llm_run", "--types", q, "--dir", d, "--out", out, "--prompt-len", str(prompt_len),
         "--decode", str(decode)]
  assert_emulation_matches(f"llm {q}", emu, cmd, out, {q: cpu})

def test_llm_under_emulation_matches_cpu(tmp_path): _check_emulation(*DEFAULT_EMU, tmp_path, *SHORT)

@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("q,emu", [(q, e) for q in TYPES for e in EMULATIONS])
def test_llm_under_every_emulation_matches_cpu(q, emu, tmp_path): _check_emulation(q, emu, tmp_path, PROMPT_LEN, DECODE)

def test_llm_kernels_are_the_jitted_steps():
  """The collected kernels are the app's jitted steps: prefill chunks read the bound position, decode steps also the
  bound token, and no kernel is in both."""
  def names(which: str) -> set[str]:
    return {u.arg[0] for a in llm_kernels("Q8_0", which) for u in a.toposort() if u.op is Ops.DEFINE_VAR}
  assert "start_pos" in names("prefill") and "token" not in names("prefill"), names("prefill")
  assert {"start_pos", "token"} <= names("decode"), names("decode")
  assert not set(llm_kernels("Q8_0", "prefill")) & set(llm_kernels("Q8_0", "decode"))
