"""The LLM app against transformers loading the same GGUF file (`from_pretrained(..., gguf_file=...)`, which dequantizes
with ggml's reference code): logits per weight type, greedy generation token for token, the decode step's kernels
(one capture for every position, no dequantized weight buffer), sampling, stop strings, the CLI and bad files."""
import json, os, subprocess, sys
import numpy as np
import pytest
from tinygrad import Tensor, Device, hooks
from tinygrad.helpers import Context, GlobalCounters
from tinygrad.apps.llm import LLM, LLMError, SamplingParams, sample, main
from tinygrad.nn.gguf import GGUFFile
from tinygrad.uop import Ops
from tinygrad.device import buffer_of
from tests.apps.gguf_models import write_model

import torch  # noqa: E402  (the testing extra has every reference: a missing one fails, never skips)
import transformers  # noqa: E402

# NOTE: 40 tokens: a full 32-token prefill chunk and a padded one; every test of the llama F32 file loads it with the same
# capacity and chunk, so a worker compiles its kernels once
PROMPT = [318, 5, 17, 99, 200, 3, 44, 250, 8, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21] * 2
CAP = 128
# the K-quants need rows of whole 256-element blocks
_K_SIZES = {"dim": 256, "hidden": 256}

def _ref_model(fn):
  return transformers.AutoModelForCausalLM.from_pretrained(os.path.dirname(fn), gguf_file=os.path.basename(fn),
                                                           dtype=torch.float32)

def _tol(ref: np.ndarray) -> float: return 1e-4 * float(ref.std())

@pytest.fixture(scope="module")
def models(tmp_path_factory):
  """One file per (arch, type), written on first use."""
  d, cache = tmp_path_factory.mktemp("llm"), {}
  def get(arch: str, q: str) -> str:
    if (arch, q) not in cache:
      fn = str(d / f"{arch}_{q}.gguf")
      write_model(fn, arch=arch, qtype=q, out_scale=4.0, **(_K_SIZES if q.endswith("_K") else {}))
      cache[arch, q] = fn
    return cache[arch, q]
  return get

# ---- logits ----

# NOTE: every type computes in float32 from exactly the values ggml's dequantizer gives, so all get F32's tolerance
# NOTE: F32, F16 and Q8_0 are compared at every generated position by the greedy test below
# the quantized matmul test below checks every type's values in one kernel; the whole model per type is under -m slow
_slow = pytest.mark.slow
@pytest.mark.parametrize("arch,q", [pytest.param("llama", "BF16", marks=_slow), pytest.param("llama", "Q4_0", marks=_slow),
                                    ("llama", "Q4_K"), pytest.param("llama", "Q6_K", marks=_slow), ("qwen2", "F32")])
def test_logits_match_transformers(models, arch, q):
  fn = models(arch, q)
  llm = LLM.load(fn, capacity=64)
  assert GGUFFile(fn).tensors["blk.0.attn_q.weight"].type_name == q
  ours = llm.model.forward(Tensor(np.array(PROMPT, np.int32)), Tensor(np.array([0], np.int32))).numpy()
  with torch.no_grad(): ref = _ref_model(fn)(torch.tensor([PROMPT])).logits[0].numpy()
  assert ref.std() > 0.1
  np.testing.assert_allclose(ours, ref, atol=_tol(ref), rtol=0)

# ---- greedy generation through the jitted prefill and decode ----

class _Compiles:
  def __enter__(self):
    self.n = 0
    self.fn = lambda *a: setattr(self, "n", self.n + 1)
    hooks.register("compiled", self.fn)
    comp = Device[Device.DEFAULT].compiler
    self.comp, self.c0 = comp, comp.compiles + comp.cache_hits
    return self
  def __exit__(self, *exc):
    hooks.unregister("compiled", self.fn)
    self.n += self.comp.compiles + self.comp.cache_hits - self.c0

@pytest.mark.parametrize("q", ["F32", pytest.param("F16", marks=_slow), pytest.param("Q8_0", marks=_slow)])
def test_greedy_generation_token_identical(models, q):
  fn = models("llama", q)
  llm = LLM.load(fn, capacity=CAP)
  it = llm.steps(PROMPT, SamplingParams(max_tokens=32, ignore_eos=True))
  steps = [next(it) for _ in range(3)]
  # NOTE: from the third token on, every decode step replays the capture: nothing is compiled
  with _Compiles() as c: steps += list(it)
  ours = [t for t, _ in steps]
  assert c.n == 0, f"{c.n} kernels compiled after the second decode token"
  with torch.no_grad():
    r = _ref_model(fn).generate(torch.tensor([PROMPT]), max_new_tokens=32, do_sample=False, eos_token_id=None,
                                pad_token_id=0, output_logits=True, return_dict_in_generate=True)
  scores = torch.stack(r.logits)[:, 0].numpy()
  # the logits of the jitted prefill (position 39) and of each decode step (positions 40-70)
  np.testing.assert_allclose(np.stack([lg for _, lg in steps]), scores, atol=_tol(scores), rtol=0)
  top2 = np.sort(scores, axis=-1)[:, -2:]
  # the tolerance of the logits test; a near-tie within it could flip greedy decoding either way
  assert (top2[:, 1] - top2[:, 0]).min() > 10 * _tol(scores), "the reference has a near-tie: pick another seed"
  assert ours == r.sequences[0, len(PROMPT):].tolist()
  assert llm.stats.tokens == 32 and llm.stats.finish_reason == "length"

def _buffer(t: Tensor):
  u = t.uop
  while u.op not in (Ops.BUFFER, Ops.BUFFER_VIEW): u = u.src[0]
  return buffer_of(u).base

# NOTE: the peak-memory test below checks a stricter bound (one row block) in the default run
@pytest.mark.slow
def test_decode_never_stores_a_dequantized_weight(models):
  """Each captured decode launch reads the raw Q8_0 blocks: no buffer as large as any dequantized weight exists."""
  llm = LLM.load(models("llama", "Q8_0"), capacity=CAP)
  for i in range(3): llm.model.step([5], i, 1)
  jit = llm.model._jits[1]
  smallest = min(4 * w.shape[0] * w.shape[1] for b in llm.model.blocks for w in (b.q, b.k, b.v, b.o, b.gate, b.up, b.down))
  caches = {_buffer(t) for kv in llm.model.cache for t in kv}
  weights = {_buffer(w.raw) for b in llm.model.blocks for w in (b.q, b.k, b.v, b.o, b.gate, b.up, b.down)}
  weights |= {_buffer(llm.model.embed.raw), _buffer(llm.model.output.raw)}
  assert jit.captured is not None
  others = [b for ln in jit.captured.launches for b in ln.bufs if b is not None and b.base not in caches | weights]
  assert others and max(b.base.nbytes for b in others) < smallest, \
    f"a {max(b.base.nbytes for b in others)}-byte buffer in decode, a dequantized weight is {smallest} bytes"

def test_decode_work_does_not_grow_with_capacity(tmp_path):
  """The decode step at a bound start_pos writes cache[:, pos:pos+1] and attends over cache[:, :pos+1]: at the same
  position a cache of 256 and one of 4096 count the same ops and bytes, the work grows with the position, the replays
  compile nothing and the cache buffers are the ones allocated at load."""
  from tinygrad.helpers import GlobalCounters
  work, fn = {}, str(tmp_path / "m.gguf")
  write_model(fn, n_layers=1, context=4096)
  for cap in (256, 4096):
    llm = LLM.load(fn, capacity=cap)
    caches = [_buffer(t) for kv in llm.model.cache for t in kv]
    assert caches[0].nbytes >= cap * 2 * 16 * 4
    for i in range(3): llm.model.step([5], i, 1)
    for pos in (3, 200):
      GlobalCounters.reset()
      with _Compiles() as c: llm.model.step([5], pos, 1)
      assert c.n == 0, f"capacity {cap}: {c.n} kernels compiled at position {pos}"
      work[cap, pos] = (GlobalCounters.global_ops, GlobalCounters.global_mem)
    assert [_buffer(t) for kv in llm.model.cache for t in kv] == caches
  assert work[256, 3] == work[4096, 3] and work[256, 200] == work[4096, 200], work
  assert work[256, 200][0] > work[256, 3][0] and work[256, 200][1] > work[256, 3][1], "the work follows the position"

# NOTE: run in a fresh process, so the allocator's peak is this model's alone (no buffer of another test is freed or
# kept meanwhile)
_PEAK = """
import json, sys
from tinygrad.helpers import GlobalCounters
from tinygrad.apps.llm import LLM, SamplingParams
from tests.apps.test_llm import _buffer
fn = sys.argv[1]
GlobalCounters.reset()
base = GlobalCounters.mem_used
llm = LLM.load(fn, capacity=256)
m = llm.model
caches = {_buffer(t) for kv in m.cache for t in kv}
mats = [w for b in m.blocks for w in (b.q, b.k, b.v, b.o, b.gate, b.up, b.down)] + [m.embed, m.output]
weights = {_buffer(t) for w in mats + [m.norm] + [w for b in m.blocks for w in (b.attn_norm, b.ffn_norm)]
           for t in w.tensors()}
toks = list(llm.tokens([(i * 7) % 300 + 1 for i in range(40)], SamplingParams(max_tokens=12, ignore_eos=True)))
tmp = [b.base.nbytes for ln in m._jits[1].captured.launches for b in ln.bufs
       if b is not None and b.base not in caches | weights]
print(json.dumps({"peak": GlobalCounters.mem_peak - base, "kv": sum(b.nbytes for b in caches), "tokens": len(toks),
                  "decode_tmp": max(tmp), "cols": min(w.shape[1] for w in mats),
                  "smallest": min(4 * w.shape[0] * w.shape[1] for w in mats),
                  "mapped": all(not b._owned for b in weights), "cache_owned": all(b._owned for b in caches)}))
"""

def test_peak_memory_is_the_file_and_the_kv_cache(tmp_path):
  """Peak memory over load, a 40-token prefill (two chunks) and 12 decode tokens: the weights are the file's pages,
  mapped (counted at the whole file's size: decode touches every page), and everything the allocators hold at their
  peak (GlobalCounters.mem_peak: the KV cache, the steps' intermediates, the buffers the LRU allocator keeps) is the KV
  cache + at most 10% of file + KV. The allocator's count, not RSS, because RSS also holds the interpreter and the
  compiler's state, which do not grow with the model and would dwarf a test-sized one. During decode no buffer but the
  cache and the mapped weights is larger than one row block (32 rows, dequantized to float32) of a weight."""
  fn = str(tmp_path / "m.gguf")
  # NOTE: 8 layers of width 256: a prefill chunk's intermediates (constant in the layer count; 0.78 MB since its scores'
  # exps and probabilities are stored besides the scores, 0.63 before) are under 10% of them (0.93 MB)
  write_model(fn, qtype="Q8_0", dim=256, hidden=768, n_layers=8, context=512)
  r = subprocess.run([sys.executable, "-c", _PEAK, fn], capture_output=True, text=True, timeout=600,
                     env={**os.environ, "PYTHONPATH": os.getcwd()})
  assert r.returncode == 0, r.stderr[-3000:]
  m = json.loads(r.stdout.strip().splitlines()[-1])
  size = os.path.getsize(fn)
  assert m["tokens"] == 12 and m["mapped"] and m["cache_owned"]
  assert size + m["peak"] <= 1.1 * (size + m["kv"]), \
    f"peak {size + m['peak']} bytes (file {size} + allocated {m['peak']}) over file + KV cache {m['kv']} + 10%"
  row_block = 32 * m["cols"] * 4
  assert row_block < m["smallest"] and m["decode_tmp"] <= row_block, \
    f"a {m['decode_tmp']}-byte buffer in decode, one row block of a dequantized weight is {row_block} bytes"

def test_typed_views_read_the_files_values_without_a_copy(tmp_path):
  """GGUFFile.typed (a plain type) and the Q8_0 views Weight reads are the file's own bytes (no buffer of their own)
  and give exactly the values the byte-level dequantization gives; a quantized type has no typed view."""
  from tinygrad.apps.llm import Weight
  from tinygrad.dtype import dtypes
  fn = str(tmp_path / "m.gguf")
  written = write_model(fn, qtype="Q8_0", dim=64, hidden=128, n_layers=1)
  f = GGUFFile(fn)
  norm = f.typed("blk.0.attn_norm.weight")
  assert norm is not None and norm.dtype is dtypes.float32 and not _buffer(norm)._owned
  np.testing.assert_array_equal(norm.numpy(), written["blk.0.attn_norm.weight"])
  assert f.typed("blk.0.ffn_up.weight") is None
  w = Weight(f, "blk.0.ffn_up.weight", (128, 64))
  assert w.q8 is not None and all(not _buffer(t)._owned for t in w.tensors())
  np.testing.assert_array_equal(w.matrix().numpy(), f.dequantized("blk.0.ffn_up.weight").numpy())
  # a scale is the block's first two bytes, as float16
  raw = np.frombuffer(open(fn, "rb").read(), np.uint8)[f.info("blk.0.ffn_up.weight").offset:][:2].view(np.float16)
  assert w.q8[0].numpy()[0] == raw[0]
  f16 = str(tmp_path / "h.gguf")
  written = write_model(f16, qtype="F16", dim=64, hidden=128, n_layers=1)
  h = GGUFFile(f16).typed("blk.0.ffn_up.weight")
  assert h is not None and h.dtype is dtypes.float16 and h.shape == (128, 64)
  np.testing.assert_array_equal(h.numpy(), written["blk.0.ffn_up.weight"].astype(np.float16))

# ---- --quantize fp8 ----

def _fp8_reference(fn):
  """transformers' model of the file with every weight matrix rounded as fp8e4m3 with per-row scales by torch
  (float8_e4m3fn, round to nearest even): the row's absolute max / 448, the values clamped to +-448. Per-row scales do
  not depend on the row order, so transformers' permuted q/k rows round as ours."""
  ref = _ref_model(fn)
  with torch.no_grad():
    for p in ref.parameters():
      if p.ndim != 2: continue
      s = p.abs().amax(1, keepdim=True) / 448.0
      s = torch.where(s == 0, torch.ones_like(s), s)
      p.copy_((p / s).clamp(-448, 448).to(torch.float8_e4m3fn).float() * s)
  return ref

def test_fp8_quantize_logits_match_fp8_rounded_reference(models):
  """--quantize fp8: our logits against transformers with torch's fp8 rounding of the same weights at the F32
  tolerance; against the F32 model the fp8 loss is stated as an RMS of at most 0.15 x std(logits) (0.077 measured at
  this seed: e4m3 keeps 3 mantissa bits, a relative rounding error of up to 2^-4 per weight). The fp8 matmul is one
  kernel reading the 1-byte weights."""
  import gc
  from tinygrad.helpers import GlobalCounters
  fn = models("llama", "F32")
  gc.collect()
  Device[Device.DEFAULT].allocator.free_cache()
  GlobalCounters.reset()
  base = GlobalCounters.mem_used
  llm = LLM.load(fn, capacity=64, quantize="fp8")
  m = llm.model
  mats = [getattr(b, n) for b in m.blocks for n in b.MATRICES] + [m.embed, m.output]
  held = sum(w.q.nbytes() + w.scale.nbytes() for w in mats) + sum(t.nbytes() for kv in m.cache for t in kv)
  # requantizing never stores a dequantized float32 weight: the load's peak is what it keeps (+ the RoPE frequencies)
  assert GlobalCounters.mem_peak - base <= held + 256 < held + min(4 * w.shape[0] * w.shape[1] for w in mats)
  w = llm.model.blocks[0].gate
  assert w.q.dtype.name == "float8_e4m3" and _buffer(w.q).nbytes == w.shape[0] * w.shape[1]
  assert len(w(Tensor(np.ones((2, w.shape[1]), np.float32)).realize()).schedule()) == 1
  ours = llm.model.forward(Tensor(np.array(PROMPT, np.int32)), 0).numpy()
  with torch.no_grad():
    ref = _fp8_reference(fn)(torch.tensor([PROMPT])).logits[0].numpy()
    f32 = _ref_model(fn)(torch.tensor([PROMPT])).logits[0].numpy()
  np.testing.assert_allclose(ours, ref, atol=_tol(ref), rtol=0)
  assert np.sqrt(((ours - f32) ** 2).mean()) <= 0.15 * f32.std()
  assert np.abs(ours - f32).max() > 10 * _tol(f32), "the weights were really rounded to fp8"
  with pytest.raises(LLMError, match="unknown quantization 'int3'; supported: fp8"): LLM.load(fn, quantize="int3")

@pytest.mark.slow
def test_fp8_greedy_generation_token_identical(models):
  """--quantize fp8 through the jitted prefill and decode: the logits at every generated position against the
  fp8-rounded reference at the F32 tolerance, greedy token-identical for 32 tokens (margins asserted)."""
  fn = models("llama", "F32")
  llm = LLM.load(fn, capacity=CAP, quantize="fp8")
  steps = list(llm.steps(PROMPT, SamplingParams(max_tokens=32, ignore_eos=True)))
  with torch.no_grad():
    r = _fp8_reference(fn).generate(torch.tensor([PROMPT]), max_new_tokens=32, do_sample=False, eos_token_id=None,
                                    pad_token_id=0, output_logits=True, return_dict_in_generate=True)
  scores = torch.stack(r.logits)[:, 0].numpy()
  np.testing.assert_allclose(np.stack([lg for _, lg in steps]), scores, atol=_tol(scores), rtol=0)
  top2 = np.sort(scores, axis=-1)[:, -2:]
  assert (top2[:, 1] - top2[:, 0]).min() > 10 * _tol(scores), "the reference has a near-tie: pick another seed"
  assert [t for t, _ in steps] == r.sequences[0, len(PROMPT):].tolist()

# ---- sampling ----

def test_sampling_filters_against_numpy():
  rng = np.random.default_rng(1)
  logits = rng.standard_normal(50).astype(np.float32) * 3
  assert sample(logits, SamplingParams(), [], rng) == int(np.argmax(logits))
  for _ in range(20):
    t = sample(logits, SamplingParams(temperature=1.0, top_k=3), [], rng)
    assert t in np.argsort(-logits)[:3]
    p = np.exp(logits - logits.max()); p /= p.sum()
    t = sample(logits, SamplingParams(temperature=1.0, min_p=0.5), [], rng)
    assert p[t] >= 0.5 * p.max()
    order = np.argsort(-p)
    nucleus = order[:int(np.searchsorted(np.cumsum(p[order]), 0.6) + 1)]
    assert sample(logits, SamplingParams(temperature=1.0, top_p=0.6), [], rng) in nucleus
  # the repetition penalty divides a positive logit and multiplies a negative one (the CTRL rule)
  lg = np.array([2.0, 1.9, -1.0, -1.05], np.float32)
  assert sample(lg, SamplingParams(repetition_penalty=1.1), [0], rng) == 1
  assert sample(np.array([-1.0, -1.05], np.float32), SamplingParams(repetition_penalty=1.1), [0], rng) == 1
  a = [sample(logits, SamplingParams(temperature=0.8), [], np.random.default_rng(7)) for _ in range(3)]
  assert len(set(a)) == 1, "the same seed draws the same token"
  with pytest.raises(LLMError, match="top_p"): SamplingParams(top_p=0.0).check()

def test_seeded_sampling_reproducible_and_stop_strings(models):
  llm = LLM.load(models("llama", "F32"), capacity=CAP)
  p = SamplingParams(temperature=0.9, top_k=20, seed=3, max_tokens=12, ignore_eos=True)
  a, b = list(llm.tokens(PROMPT, p)), list(llm.tokens(PROMPT, p))
  assert a == b and len(a) == 12
  text = llm.tokenizer.decode(a)
  full = llm.generate(PROMPT, p)
  assert full == text
  stop = text[len(text) // 2:len(text) // 2 + 2]
  assert stop and llm.generate(PROMPT, SamplingParams(**{**p.__dict__, "stop": [stop]})) == text[:text.find(stop)]
  assert llm.stats.finish_reason == "stop"

# ---- limits and bad files ----

def test_prompt_over_the_context_is_an_error(models):
  llm = LLM.load(models("llama", "F32"), capacity=32)
  with pytest.raises(LLMError, match=r"40 tokens \+ max_tokens 20 exceed the context of 32"):
    list(llm.tokens(PROMPT, SamplingParams(max_tokens=20)))
  with pytest.raises(LLMError, match=r"token ids \[320, -1\] are outside the vocabulary of 320"):
    list(llm.tokens([1, 320, -1], SamplingParams(max_tokens=2)))

def test_bad_files_name_the_key_or_tensor(tmp_path):
  fn = str(tmp_path / "m.gguf")
  import gguf
  w = gguf.GGUFWriter(fn, "gpt2")
  w.add_tensor("x", np.zeros(4, np.float32))
  w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
  with pytest.raises(LLMError, match="general.architecture is 'gpt2'; this app runs llama, qwen2"): LLM.load(fn)
  write_model(fn, skip=("blk.1.ffn_up.weight",))
  with pytest.raises(Exception, match="no tensor 'blk.1.ffn_up.weight'"): LLM.load(fn)
  write_model(fn, qtype="Q5_0")
  with pytest.raises(LLMError, match="'token_embd.weight' is Q5_0.*runs weights of type F32, F16, Q4_0, Q8_0"):
    LLM.load(fn)
  write_model(fn, tokenizer={"model": "bert", "tokens": ["a"] * 320, "types": [1] * 320})
  with pytest.raises(LLMError, match="tokenizer.ggml.model is 'bert'"): LLM.load(fn)
  write_model(fn, n_heads=3)
  with pytest.raises(LLMError, match="embedding_length 64, attention.head_count 3"): LLM.load(fn)

@pytest.mark.slow
def test_cli_streams_and_benchmarks(models, capsys):
  fn = models("llama", "F32")
  assert main(["--model", fn, "--prompt", "the ", "--max-tokens", "5", "--seed", "1", "--temperature", "0.7",
               "--context", "64", "--benchmark"]) == 0
  out = capsys.readouterr()
  assert "prefill" in out.err and "decode 5 tokens" in out.err and "peak RSS" in out.err
  llm = LLM.load(fn, capacity=64)
  assert out.out == llm.generate("the ", SamplingParams(temperature=0.7, seed=1, max_tokens=5)) + "\n"

def test_cli_errors_exit_2_naming_the_limit(models, tmp_path, capsys):
  assert main(["--model", models("llama", "F32"), "--prompt", "x" * 100, "--context", "64"]) == 2
  assert "exceed the context of 64 tokens" in capsys.readouterr().err
  (tmp_path / "bad.gguf").write_bytes(b"GGUF" + bytes(20))
  assert main(["--model", str(tmp_path / "bad.gguf")]) == 2
  assert "gguf" in capsys.readouterr().err

def test_cli_help_runs():
  r = subprocess.run([sys.executable, "-m", "tinygrad.apps.llm", "--help"], capture_output=True, text=True, timeout=120,
                     env={**os.environ, "PYTHONPATH": os.getcwd()})
  assert r.returncode == 0 and "--max-tokens" in r.stdout and "--benchmark" in r.stdout and "--quantize" in r.stdout

# ---- the quantized matmul ----

@pytest.mark.parametrize("q", ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_K", "Q6_K"])
def test_quantized_matmul_is_one_kernel_reading_the_mapped_blocks(tmp_path, q):
  from gguf import GGUFWriter, GGMLQuantizationType as Q, quants
  from tinygrad.apps.llm import Weight
  from tinygrad.helpers import GlobalCounters
  from tests.apps.gguf_models import random_blocks
  rng, fn = np.random.default_rng(5), str(tmp_path / "w.gguf")
  w = GGUFWriter(fn, "llama")
  vals = rng.standard_normal((32, 512)).astype(np.float32)
  raw = random_blocks(rng, Q[q].value, 32, 512) if q in ("Q4_0", "Q4_K", "Q6_K") else \
    vals.astype(np.float16) if q == "F16" else vals if q == "F32" else quants.quantize(vals, Q[q])
  w.add_tensor("w", raw, raw_shape=raw.shape if q not in ("F32", "F16") else None, raw_dtype=Q[q])
  w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
  ref = quants.dequantize(raw, Q[q]).astype(np.float32)
  f = GGUFFile(fn)
  weight = Weight(f, "w", (32, 512))
  x = rng.standard_normal((3, 512)).astype(np.float32)
  xt = Tensor(x).realize()
  y = weight(xt)
  assert len(y.schedule()) == 1, "the dequantization fuses into the matmul's kernel"
  GlobalCounters.reset()
  np.testing.assert_allclose(y.numpy(), x @ ref.T, rtol=1e-5, atol=1e-5 * np.abs(x @ ref.T).max())
  assert GlobalCounters.kernel_count == 1
  # the raw tensor is the file's bytes, mapped, not a copy
  assert bytes(weight.raw.numpy().reshape(-1)) == open(fn, "rb").read()[f.tensors["w"].offset:][:f.tensors["w"].nbytes]
  assert _buffer(weight.raw)._owned is False

# ---- --serve ----

def test_serve_openai_chat_and_completions_over_loopback(models):
  import http.client, json, threading
  from tinygrad.apps.serve import serve
  llm = LLM.load(models("llama", "F32"), capacity=CAP)
  llm.tokenizer.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:"
  httpd = serve(llm, port=0)
  assert httpd.server_address[0] == "127.0.0.1"
  threading.Thread(target=httpd.serve_forever, daemon=True).start()
  def post(path, body):
    c = http.client.HTTPConnection("127.0.0.1", httpd.server_address[1], timeout=300)
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    return r.status, r.read().decode()
  try:
    msgs = [{"role": "user", "content": "hi there"}]
    want = llm.generate(llm.tokenizer.encode("user: hi there\nassistant:", add_bos=False, special=True),
                        SamplingParams(temperature=0.0, max_tokens=6, ignore_eos=False))
    st, body = post("/v1/chat/completions", {"messages": msgs, "max_tokens": 6, "temperature": 0})
    out = json.loads(body)
    assert st == 200 and out["object"] == "chat.completion" and out["choices"][0]["message"]["content"] == want
    st, body = post("/v1/chat/completions", {"messages": msgs, "max_tokens": 6, "temperature": 0, "stream": True})
    events = [ln[6:] for ln in body.split("\n") if ln.startswith("data: ")]
    assert st == 200 and events[-1] == "[DONE]" and len(events) >= 3
    chunks = [json.loads(e) for e in events[:-1]]
    assert "".join(ch["choices"][0]["delta"]["content"] for ch in chunks) == want
    assert chunks[-1]["choices"][0]["finish_reason"] in ("length", "stop")
    st, body = post("/v1/completions", {"prompt": "the ", "max_tokens": 4, "temperature": 0})
    assert st == 200 and json.loads(body)["choices"][0]["text"] == llm.generate("the ", max_tokens=4)
    st, body = post("/v1/completions", {"prompt": "x" * 400, "max_tokens": 4})
    assert st == 400 and "exceed the context of 128" in json.loads(body)["error"]["message"]
    st, body = post("/v1/chat/completions", {"messages": "hi"})
    assert st == 400 and "'messages' must be" in body
  finally:
    httpd.shutdown()
    httpd.server_close()

# ---- llama-3 RoPE scaling ----

@pytest.mark.slow
def test_llama3_rope_frequency_factors_match_transformers(tmp_path):
  """llama.cpp stores llama-3's scaling as rope_freqs.weight (each frequency's divisor); the reference's frequencies
  come from transformers' own llama3 rope function, set into the model transformers loads from the same file (its
  GGUF loader does not read rope_freqs)."""
  from transformers import LlamaConfig
  from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
  cfg = LlamaConfig(hidden_size=64, num_attention_heads=4, rope_parameters={
    "rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
    "original_max_position_embeddings": 16})
  inv3, _ = ROPE_INIT_FUNCTIONS["llama3"](cfg, "cpu")
  plain = 1.0 / (500000.0 ** (torch.arange(0, 16, 2, dtype=torch.int64).float() / 16))
  factors = (plain / inv3).numpy()
  assert factors.max() > 7, "the scaling changes the low frequencies"
  fn = str(tmp_path / "l3.gguf")
  write_model(fn, n_layers=1, rope_base=500000.0, rope_freqs=factors, out_scale=4.0)
  ours = LLM.load(fn, capacity=64).model.forward(Tensor(np.array(PROMPT, np.int32)), Tensor(np.array([0], np.int32)))
  ref_model = _ref_model(fn)
  ref_model.model.rotary_emb.inv_freq.copy_(inv3)
  with torch.no_grad(): ref = ref_model(torch.tensor([PROMPT])).logits[0].numpy()
  np.testing.assert_allclose(ours.numpy(), ref, atol=_tol(ref), rtol=0)

# ---- tensor parallel: --shard N ----

def _check_greedy_against_reference(steps: list, fn: str, prompt: list[int], n: int, reference=None) -> None:
  """steps (token, logits) against the reference's greedy generation from prompt: logits at the F32 tolerance at every
  position, the reference's margins over 10x it, the tokens identical."""
  with torch.no_grad():
    r = (reference or _ref_model)(fn).generate(torch.tensor([prompt]), max_new_tokens=n, do_sample=False,
                                               eos_token_id=None, pad_token_id=0, output_logits=True,
                                               return_dict_in_generate=True)
  scores = torch.stack(r.logits)[:, 0].numpy()
  np.testing.assert_allclose(np.stack([lg for _, lg in steps]), scores, atol=_tol(scores), rtol=0)
  top2 = np.sort(scores, axis=-1)[:, -2:]
  assert (top2[:, 1] - top2[:, 0]).min() > 10 * _tol(scores), "the reference has a near-tie: pick another seed"
  assert [t for t, _ in steps] == r.sequences[0, len(prompt):].tolist()

def _layout(t: Tensor):
  lay = t._layout()
  return None if lay is None else (lay[1], lay[2])

# NOTE: the default run has one layer and prefills one chunk (each jitted call of a sharded step schedules for seconds);
# -m slow has two layers, prefills two chunks (the second through the prefill's capture) and covers qwen2's biases, a K-quant whose attn_output is replicated
# (its 128 columns per device are not whole 256-element blocks) and whose down has one block (an empty shard), four
# devices, and fp8
@pytest.mark.parametrize("arch,q,n,kw", [
  ("llama", "Q8_0", 2, {"n_layers": 1}),
  pytest.param("qwen2", "F32", 2, {"prompt": PROMPT}, marks=_slow),
  pytest.param("llama", "Q4_K", 2, {"prompt": PROMPT}, marks=_slow),
  pytest.param("llama", "F16", 4, {"n_kv_heads": 4, "prompt": PROMPT}, marks=_slow),
  pytest.param("llama", "F32", 2, {"quantize": "fp8", "prompt": PROMPT}, marks=_slow)])
def test_shard_generates_the_single_device_tokens(tmp_path, arch, q, n, kw):
  """--shard N: whole heads and 1/N of the FFN per device, through the jitted prefill and the decode step at the bound
  start_pos; the single-device run is checked against transformers (test_greedy_generation_token_identical), so the
  sharded run is checked against the same reference: logits at the F32 tolerance, tokens identical."""
  fn, quantize, prompt = str(tmp_path / "m.gguf"), kw.pop("quantize", None), kw.pop("prompt", PROMPT[:20])
  write_model(fn, arch=arch, qtype=q, out_scale=4.0, **(_K_SIZES if q.endswith("_K") else {}), **kw)
  GlobalCounters.reset()
  llm = LLM.load(fn, capacity=CAP, quantize=quantize, shard=n)
  devs = tuple(Device.canonicalize(f"CPU:{i}") for i in range(n))
  b, c = llm.model.blocks[0], llm.config
  # the KV cache and q/k/v are split by whole heads, gate/up by rows and down by columns on the same bounds
  kv = c.n_kv_heads // n
  assert llm.model.cache[0][0].device == devs
  assert _layout(llm.model.cache[0][0]) == (0, tuple((i * kv, (i + 1) * kv) for i in range(n)))
  assert _layout(b.k.matrix()) == (0, tuple((i * kv * c.head_dim, (i + 1) * kv * c.head_dim) for i in range(n)))
  gate, down = _layout(b.gate.matrix()), _layout(b.down.matrix())
  # NOTE: a down of one block (Q4_K here) sits whole on device 0, a layout that reads as a split of either axis
  if c.hidden // b.down.block >= n: assert gate is not None and down == (1, gate[1]) and gate[0] == 0
  # attn_output by columns on the heads' bounds, replicated where those columns are not whole blocks (a K-quant's 256)
  oc = c.n_heads // n * c.head_dim
  assert _layout(b.o.matrix()) == ((1, tuple((i * oc, (i + 1) * oc) for i in range(n))) if oc % b.o.block == 0 else
                                   (None, None))
  assert _layout(llm.model.norm.matrix()) == (None, None)
  it = llm.steps(prompt, SamplingParams(max_tokens=8, ignore_eos=True))
  steps = [next(it) for _ in range(3)]
  with _Compiles() as comp: steps += list(it)
  assert comp.n == 0, f"{comp.n} kernels compiled after the second decode token"
  # every device ran its part, and the partial sums of attn_output and down moved between devices as COPYs
  assert all(GlobalCounters.device_kernels.get(d, 0) > 0 for d in devs) and GlobalCounters.copy_count > 0
  # no hidden gather: a decode step moves only the two allreduced partials per layer (naive at this size: N(N-1) COPYs
  # of dim floats each)
  GlobalCounters.reset()
  llm.model.step([steps[-1][0]], len(prompt) + len(steps), 1)
  assert GlobalCounters.copy_count == 2 * c.n_layers * n * (n - 1)
  assert GlobalCounters.copy_bytes == GlobalCounters.copy_count * c.dim * 4
  _check_greedy_against_reference(steps, fn, prompt, 8, _fp8_reference if quantize else None)

def test_shard_count_that_cannot_split_the_heads_is_an_error(models, tmp_path, capsys):
  fn = models("llama", "F32")
  for n, msg in ((0, r"--shard 0: the number of devices must be a positive integer"),
                 (3, r"--shard 3 does not divide the model's attention.head_count 4 and head_count_kv 2")):
    with pytest.raises(LLMError, match=msg): LLM.load(fn, capacity=CAP, shard=n)
  assert main(["--model", fn, "--prompt", "hi", "--shard", "3"]) == 2
  assert "--shard 3 does not divide" in capsys.readouterr().err
  # more devices than the process may open (HOST_DEVICES, 8 by default)
  write_model(wide := str(tmp_path / "wide.gguf"), n_heads=16, n_kv_heads=16)
  with Context(HOST_DEVICES=8), pytest.raises(LLMError, match=r"--shard 16: .*CPU:15.*HOST_DEVICES"):
    LLM.load(wide, capacity=CAP, shard=16)

def _unaligned_file(path):
  """A file at general.alignment 1 whose Q8_0 and F32 tensors sit at odd offsets (a short padding key shifts them)."""
  import gguf
  from gguf import GGMLQuantizationType as Q
  x = np.random.default_rng(0).standard_normal((2, 64)).astype(np.float32)
  for pad in range(8):
    w = gguf.GGUFWriter(path, "llama")
    w.add_custom_alignment(1)
    w.add_string("x.pad", "p" * pad)
    w.add_tensor("a", np.arange(3, dtype=np.int8))
    w.add_tensor("q", gguf.quantize(x, Q.Q8_0), raw_dtype=Q.Q8_0)
    w.add_tensor("f", np.arange(4, dtype=np.float32))
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
    f = GGUFFile(path)
    if f.info("q").offset % 2 and f.info("f").offset % 4: return f
  raise AssertionError("no padding put both tensors at odd offsets")

def test_unaligned_tensors_get_no_view_and_are_read_from_their_bytes(tmp_path):
  """A tensor whose offset is not a multiple of a view's element size (a hand-made or hostile file at alignment 1) gets
  no typed view: the weight reads its raw bytes, with the same values, and nothing is mapped past the tensor."""
  from tinygrad.apps.llm import Weight
  from tinygrad.dtype import dtypes
  f = _unaligned_file(str(tmp_path / "u.gguf"))
  assert f.view("q", dtypes.float16) is None and f.typed("f") is None
  assert f.view("q", dtypes.int8) is not None and f.view("q", dtypes.int8).numel() == f.info("q").nbytes
  q, v = Weight(f, "q", (2, 64)), Weight(f, "f", (4,))
  assert q.q8 is None and v.values is None and q.tensors() == [q.raw]
  np.testing.assert_array_equal(q.matrix().numpy(), f.dequantized("q").numpy())
  np.testing.assert_array_equal(v.matrix().numpy(), np.arange(4, dtype=np.float32))
  # a view never reaches past the file: a truncated copy is refused when opened, before any tensor is mapped
  from tinygrad.nn.state import CheckpointError
  cut = tmp_path / "cut.gguf"
  cut.write_bytes((tmp_path / "u.gguf").read_bytes()[:-3])
  with pytest.raises(CheckpointError, match="truncated"): GGUFFile(str(cut))
