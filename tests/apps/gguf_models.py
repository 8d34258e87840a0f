"""Small random-weight llama/qwen2 GGUF files written with ggml's own `gguf` writer (the code path a real file takes),
for the LLM app's tests. Types the writer cannot quantize (Q4_K, Q6_K) get random valid blocks: random bytes with
finite float16 scales sized so the weights stay near N(0, 0.02^2)."""
from __future__ import annotations
import numpy as np

# GPT-2's printable byte characters (the test vocabulary's first 256 tokens), written out here, independent of ours
def byte_chars() -> list[str]:
  keep = list(range(33, 127)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
  out, n = {}, 0
  for b in range(256):
    if b in keep: out[b] = chr(b)
    else: out[b], n = chr(256 + n), n + 1
  return [out[b] for b in range(256)]

# byte offsets of each block type's float16 fields, and the scale magnitude that keeps values ~0.02
_F16 = {2: ([0], 0.004), 8: ([0], 0.0005), 12: ([0, 2], 0.0001), 14: ([208], 0.00003)}

def random_blocks(rng: np.random.Generator, qtype: int, rows: int, cols: int) -> np.ndarray:
  from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
  block, bb = GGML_QUANT_SIZES[GGMLQuantizationType(qtype)]
  nb = rows * cols // block
  raw = rng.integers(0, 256, size=(nb, bb), dtype=np.uint8)
  offs, mag = _F16[qtype]
  for o in offs: raw[:, o:o + 2] = (np.abs(rng.standard_normal(nb)) * mag + mag / 4).astype(np.float16).view(np.uint8).reshape(nb, 2)
  return raw.reshape(rows, -1)

def write_model(path: str, arch: str = "llama", qtype: str = "F32", dim: int = 64, n_layers: int = 2, n_heads: int = 4,
                n_kv_heads: int = 2, hidden: int = 128, vocab: int = 320, context: int = 256, tied: bool = False,
                out_scale: float = 1.0, seed: int = 0, rope_base: float = 10000.0, rope_freqs: np.ndarray | None = None,
                extra_kv: dict | None = None, skip: tuple[str, ...] = (), tokenizer: dict | None = None) -> dict[str, np.ndarray]:
  """A model file; returns the tensors as written (float32 values for plain types, raw blocks for quantized ones).
  qtype applies to the 2-d weights; norms and biases stay F32 (as llama.cpp writes them)."""
  import gguf
  from gguf import GGMLQuantizationType as Q
  rng = np.random.default_rng(seed)
  w = gguf.GGUFWriter(path, arch)
  w.add_context_length(context)
  w.add_embedding_length(dim)
  w.add_block_count(n_layers)
  w.add_feed_forward_length(hidden)
  w.add_head_count(n_heads)
  w.add_head_count_kv(n_kv_heads)
  w.add_layer_norm_rms_eps(1e-5)
  w.add_rope_freq_base(rope_base)
  w.add_rope_dimension_count(dim // n_heads)
  for k, v in (extra_kv or {}).items():
    if isinstance(v, str): w.add_string(k, v)
    elif isinstance(v, float): w.add_float32(k, v)
    else: w.add_uint32(k, v)
  tok = tokenizer or default_tokenizer(vocab)
  w.add_tokenizer_model(tok["model"])
  if "pre" in tok: w.add_tokenizer_pre(tok["pre"])
  w.add_token_list(tok["tokens"])
  w.add_token_types(tok["types"])
  if "merges" in tok: w.add_token_merges(tok["merges"])
  if "scores" in tok: w.add_token_scores(tok["scores"])
  for k in ("bos", "eos"):
    if k in tok: getattr(w, f"add_{k}_token_id")(tok[k])
  if "chat_template" in tok: w.add_chat_template(tok["chat_template"])
  # NOTE: matrices scaled by 1/sqrt(width) so a wider model stays as well-conditioned as the 64-wide one
  hd, out, m = dim // n_heads, {}, (64 / dim) ** 0.5
  def add(name: str, shape: tuple[int, ...], q: str = "F32", scale: float = 0.02, center: float = 0.0):
    if name in skip: return
    if q in ("Q4_K", "Q6_K") or (q in ("Q4_0",) and len(shape) == 2):
      arr = random_blocks(rng, Q[q].value, *shape)
      if scale != 0.02: arr = _rescale(arr, Q[q].value, scale / 0.02)
      w.add_tensor(name, arr, raw_shape=arr.shape, raw_dtype=Q[q])
    else:
      vals = (rng.standard_normal(shape) * scale + center).astype(np.float32)
      if q == "F32": arr = vals; w.add_tensor(name, arr)
      elif q == "F16": arr = vals.astype(np.float16); w.add_tensor(name, arr)
      else:
        arr = gguf.quants.quantize(vals, Q[q])
        w.add_tensor(name, arr, raw_shape=arr.shape, raw_dtype=Q[q])
    out[name] = arr
  add("token_embd.weight", (vocab, dim), qtype, scale=0.5)
  for i in range(n_layers):
    p = f"blk.{i}."
    add(p + "attn_norm.weight", (dim,), scale=0.1, center=1.0)
    add(p + "attn_q.weight", (n_heads * hd, dim), qtype, scale=0.15 * m)
    add(p + "attn_k.weight", (n_kv_heads * hd, dim), qtype, scale=0.15 * m)
    add(p + "attn_v.weight", (n_kv_heads * hd, dim), qtype, scale=0.1 * m)
    add(p + "attn_output.weight", (dim, n_heads * hd), qtype, scale=0.1 * m)
    if arch == "qwen2":
      for n, k in (("q", n_heads), ("k", n_kv_heads), ("v", n_kv_heads)): add(p + f"attn_{n}.bias", (k * hd,), scale=0.1)
    add(p + "ffn_norm.weight", (dim,), scale=0.1, center=1.0)
    add(p + "ffn_gate.weight", (hidden, dim), qtype, scale=0.1 * m)
    add(p + "ffn_up.weight", (hidden, dim), qtype, scale=0.1 * m)
    add(p + "ffn_down.weight", (dim, hidden), qtype, scale=0.1 * m)
  add("output_norm.weight", (dim,), scale=0.1, center=1.0)
  if not tied: add("output.weight", (vocab, dim), qtype, scale=0.1 * out_scale)
  if rope_freqs is not None:
    w.add_tensor("rope_freqs.weight", rope_freqs.astype(np.float32))
    out["rope_freqs.weight"] = rope_freqs
  w.write_header_to_file()
  w.write_kv_data_to_file()
  w.write_tensors_to_file()
  w.close()
  return out

def _rescale(raw: np.ndarray, qtype: int, f: float) -> np.ndarray:
  offs, _ = _F16[qtype]
  r = raw.copy()
  from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
  _, bb = GGML_QUANT_SIZES[GGMLQuantizationType(qtype)]
  blocks = r.reshape(-1, bb)
  for o in offs: blocks[:, o:o + 2] = (blocks[:, o:o + 2].copy().view(np.float16) * np.float16(f)).view(np.uint8)
  return blocks.reshape(raw.shape)

def default_tokenizer(vocab: int) -> dict:
  """A byte-level vocabulary: the 256 byte characters, then merged pieces of two byte characters, <s> and </s> last."""
  bc = byte_chars()
  tokens, merges = list(bc), []
  for a in "etaoinsrhl":
    for b in "etaoinsrhl ":
      if len(tokens) >= vocab - 2: break
      pb = bc[ord(b)]
      tokens.append(a + pb)
      merges.append(f"{a} {pb}")
  while len(tokens) < vocab - 2: tokens.append(f"<unused{len(tokens)}>")
  tokens += ["<s>", "</s>"]
  types = [1] * (vocab - 2) + [3, 3]
  types = [5 if t.startswith("<unused") else ty for t, ty in zip(tokens, types)]
  return {"model": "gpt2", "pre": "llama-bpe", "tokens": tokens, "types": types, "merges": merges, "bos": vocab - 2,
          "eos": vocab - 1}
