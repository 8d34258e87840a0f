"""An LLM from a GGUF file: the llama family (llama 2/3 layouts, GQA, RoPE with rope.freq_base, llama-3 frequency
factors and linear scaling, RMSNorm, SwiGLU, tied or separate output) and qwen2 (attention biases, NeoX RoPE).

    python -m tinygrad.apps.llm --model F.gguf --prompt "Hello" --max-tokens 64
    llm = LLM.load("F.gguf"); print(llm.generate("Hello", max_tokens=32)); for piece in llm.stream("Hi"): ...

Weights stay as they are in the file (memory-mapped, quantized) and each matmul dequantizes its weight inside its own
kernel. The KV cache is allocated once, at load. Prefill runs in fixed-size chunks and decode one token at a time, each
one TinyJit-captured step whose position is a bound variable (`start_pos`): the step writes the cache rows
start..start+C-1 and attends over rows 0..start+C-1, so one capture serves every position and a step's work follows the
position, not the cache's capacity."""
from __future__ import annotations
import argparse, math, sys, time
from dataclasses import dataclass
from typing import Any, Iterator
import numpy as np
from tinygrad.tensor import Tensor
from tinygrad.uop.ops import UOp
from tinygrad.uop.sint import sint
from tinygrad.dtype import dtypes
from tinygrad.engine.jit import TinyJit
from tinygrad.helpers import GlobalCounters, prod
from tinygrad.device import Device, DeviceOpenError
from tinygrad.nn.gguf import GGML_TYPES, GGUFFile, ggml_data_to_tensor, ggml_type_name
from tinygrad.nn.state import CheckpointError
from tinygrad.apps.tokenizer import Tokenizer, TokenizerError
from tinygrad.apps.sampling import LLMError, SamplingParams, sample

SUPPORTED_ARCHS = ("llama", "qwen2")
# the weight types a matmul dequantizes in its kernel
WEIGHT_TYPES = {"F32": 0, "F16": 1, "Q4_0": 2, "Q8_0": 8, "Q4_K": 12, "Q6_K": 14, "BF16": 30}

# ---- configuration from the GGUF metadata ----

@dataclass(frozen=True)
class Config:
  arch: str
  n_layers: int
  dim: int
  hidden: int
  n_heads: int
  n_kv_heads: int
  head_dim: int
  vocab: int
  context: int
  norm_eps: float
  rope_base: float
  rope_linear: float = 1.0
  neox_rope: bool = False
  qkv_bias: bool = False
  tied: bool = False
  rope_factors: bool = False

def _meta(md: dict[str, Any], key: str, kind: type, default: Any = None) -> Any:
  if key not in md:
    if default is not None: return default
    raise LLMError(f"llm: the GGUF metadata has no {key!r}, which the model needs")
  v = md[key]
  ok = isinstance(v, (int, float)) and not isinstance(v, bool) if kind is float else \
    isinstance(v, int) and not isinstance(v, bool) if kind is int else isinstance(v, kind)
  if not ok: raise LLMError(f"llm: GGUF key {key!r} is {v!r}, expected a {kind.__name__}")
  if kind is int and v <= 0: raise LLMError(f"llm: GGUF key {key!r} is {v}, expected a positive int")
  return kind(v)

def config_from_gguf(f: GGUFFile) -> Config:
  md = f.metadata
  arch = md.get("general.architecture")
  if arch not in SUPPORTED_ARCHS:
    raise LLMError(f"llm: general.architecture is {arch!r}; this app runs {', '.join(SUPPORTED_ARCHS)}")
  p = f"{arch}."
  dim, n_heads = _meta(md, p + "embedding_length", int), _meta(md, p + "attention.head_count", int)
  n_kv = _meta(md, p + "attention.head_count_kv", int, n_heads)
  if dim % n_heads or n_heads % n_kv:
    raise LLMError(f"llm: {p}embedding_length {dim}, attention.head_count {n_heads} and head_count_kv {n_kv} do not "
                   "divide (dim by heads, heads by kv heads)")
  head_dim = _meta(md, p + "attention.key_length", int, dim // n_heads)
  if (rd := md.get(p + "rope.dimension_count", head_dim)) != head_dim:
    raise LLMError(f"llm: {p}rope.dimension_count is {rd}; only RoPE over the whole head ({head_dim}) is supported")
  if head_dim % 2: raise LLMError(f"llm: the head dim {head_dim} is odd; RoPE rotates pairs")
  scaling, factor = md.get(p + "rope.scaling.type", "none"), 1.0
  if scaling == "linear": factor = _meta(md, p + "rope.scaling.factor", float)
  elif scaling != "none":
    raise LLMError(f"llm: {p}rope.scaling.type is {scaling!r}; supported: none, linear (llama-3's scaling comes as "
                   "the rope_freqs.weight tensor)")
  vocab = md[p + "vocab_size"] if p + "vocab_size" in md else len(md.get("tokenizer.ggml.tokens", []))
  if "token_embd.weight" not in f.tensors: raise LLMError(f"llm: {f.path}: no tensor 'token_embd.weight'")
  if not vocab: vocab = f.tensors["token_embd.weight"].shape[0]
  eps, base = _meta(md, p + "attention.layer_norm_rms_epsilon", float), _meta(md, p + "rope.freq_base", float, 10000.0)
  return Config(arch, _meta(md, p + "block_count", int), dim, _meta(md, p + "feed_forward_length", int), n_heads, n_kv,
                head_dim, vocab, _meta(md, p + "context_length", int), eps, base, factor,
                neox_rope=arch == "qwen2", qkv_bias=arch == "qwen2", tied="output.weight" not in f.tensors,
                rope_factors="rope_freqs.weight" in f.tensors)

# ---- weights: kept as the file stores them, dequantized inside the kernel that reads them ----

class Weight:
  """A weight of shape (rows, cols) in the file's type; `matrix()` is its float32 values as a lazy expression over the
  raw bytes, so a matmul that reads it dequantizes in its own kernel and no dequantized copy is ever stored."""
  def __init__(self, f: GGUFFile, name: str, shape: tuple[int, ...]):
    ti = f.info(name)
    if ti.shape != shape:
      raise LLMError(f"llm: {f.path}: tensor {name!r} has shape {ti.shape}, the model's metadata needs {shape}")
    if ti.ggml_type not in WEIGHT_TYPES.values():
      raise LLMError(f"llm: {f.path}: tensor {name!r} is {ggml_type_name(ti.ggml_type)} (ggml type {ti.ggml_type}); "
                     f"the app runs weights of type {', '.join(WEIGHT_TYPES)}")
    self.name, self.shape, self.ggml_type, self.raw = name, shape, ti.ggml_type, f.raw(name)
    self.block = GGML_TYPES[ti.ggml_type][1]
    self.split: int | None = None  # 1 when the columns are split (Weight.shard): the raw bytes are stored column-major
    # NOTE: a plain type (F32, F16, BF16) is read in its own dtype over the same mapped bytes where the file allows it:
    # assembled from bytes instead, every element costs a kernel several loads and shifts (a norm's weight, fused into
    # a matmul, once per multiply-add)
    self.values: Tensor | None = f.typed(name)
    # NOTE: Q8_0 likewise: its blocks are a float16 scale then 32 int8 values (34 bytes, so every scale is 2-aligned),
    # read through a float16 and an int8 view of the same bytes
    self.q8: tuple[Tensor, Tensor] | None = None
    if ti.ggml_type == WEIGHT_TYPES["Q8_0"] and (h := f.view(name, dtypes.float16)) is not None and \
       (q := f.view(name, dtypes.int8)) is not None:
      self.q8 = (h, q)
  def tensors(self) -> list[Tensor]:
    """Every tensor this weight reads the file's bytes through (the raw bytes and the typed views of them)."""
    return [self.raw] + ([self.values] if self.values is not None else []) + (list(self.q8) if self.q8 else [])
  def matrix(self) -> Tensor:
    if self.values is not None: return self.values.reshape(self.shape).cast(dtypes.float32)
    if self.q8 is not None:
      (rows, cols), bb = self._rows_cols(), GGML_TYPES[self.ggml_type][2]
      h, q = self.q8
      scale = h.reshape(rows, cols // self.block, bb // 2)[:, :, 0:1].cast(dtypes.float32)
      return (q.reshape(rows, cols // self.block, bb)[:, :, 2:].cast(dtypes.float32) * scale).reshape(self.shape)
    v = ggml_data_to_tensor(self.raw.reshape(-1), prod(self.shape), self.ggml_type)
    if self.split == 1:
      rows, cols = self._rows_cols()
      v = v.reshape(cols // self.block, rows, self.block).permute(1, 0, 2)
    return v.reshape(self.shape).cast(dtypes.float32)
  def __call__(self, x: Tensor) -> Tensor: return x.matmul(self.matrix().T)
  def _rows_cols(self) -> tuple[int, int]:
    return (self.shape[0], self.shape[1]) if len(self.shape) == 2 else (1, self.shape[0])
  def shard(self, devices: tuple[str, ...], axis: int | None, unit: int = 1) -> None:
    """Copy the raw bytes onto `devices` now: replicated (axis None), or split on `axis` of the shape in groups of
    `unit` rows or columns. A column split stores each device's blocks column-major ((blocks, rows, bytes)), so every
    device dequantizes its own bytes; a column group that is not whole quantization blocks is replicated instead."""
    rows, cols = self._rows_cols()
    self.values, self.q8 = None, None
    if axis is not None and (axis == 1 or len(self.shape) == 1) and unit % self.block: axis = None
    nb, bb = cols // self.block, self.raw.shape[-1] // (cols // self.block) if cols else 0
    raw = self.raw.reshape(rows, nb, bb)
    if axis is None: self.raw = raw.shard(devices).realize()
    elif axis == 0 and len(self.shape) == 2:
      self.raw = raw.reshape(rows // unit, unit * nb * bb).shard(devices, 0).realize()
    else:
      g = unit // self.block
      self.raw, self.split = raw.permute(1, 0, 2).reshape(nb // g, g * rows * bb).shard(devices, 0).realize(), 1

QUANTIZATIONS = ("fp8",)
FP8_MAX = 448.0

class Fp8Weight:
  """A weight requantized at load to fp8e4m3 with one float32 scale per row (the row's absolute max / 448, so the row's
  largest value is +-448, e4m3's largest); `matrix()` is q * scale as a lazy expression, so the matmul's kernel
  dequantizes it, as for a file's own quantized types. An all-zero row gets scale 1."""
  def __init__(self, w: Weight):
    self.name, self.shape, self.source, self.block = w.name, w.shape, w.ggml_type, 1
    m = w.matrix()
    amax = m.abs().max(axis=1)
    self.scale = (amax == 0).where(1.0, amax / FP8_MAX).contiguous().realize()
    self.q = (m / self.scale.reshape(-1, 1)).clip(-FP8_MAX, FP8_MAX).cast(dtypes.fp8e4m3).contiguous().realize()
  def matrix(self) -> Tensor: return self.q.cast(dtypes.float32) * self.scale.reshape(-1, 1)
  def __call__(self, x: Tensor) -> Tensor: return x.matmul(self.matrix().T)
  def shard(self, devices: tuple[str, ...], axis: int | None, unit: int = 1) -> None:
    """As Weight.shard: the fp8 values split on `axis` in groups of `unit`, the row scales with the rows (or
    replicated when the columns are split)."""
    rows, cols = self.shape
    if axis is None: self.q, self.scale = self.q.shard(devices).realize(), self.scale.shard(devices).realize()
    elif axis == 0:
      self.q = self.q.reshape(rows // unit, unit * cols).shard(devices, 0).realize().reshape(rows, cols)
      self.scale = self.scale.reshape(rows // unit, unit).shard(devices, 0).realize().reshape(rows)
    else:
      self.q = self.q.reshape(rows, cols // unit, unit).shard(devices, 1).realize().reshape(rows, cols)
      self.scale = self.scale.shard(devices).realize()

def _rms_norm(x: Tensor, w: Tensor, eps: float) -> Tensor:
  return x * (x.square().mean(axis=-1, keepdim=True) + eps).rsqrt() * w

class Block:
  MATRICES = ("q", "k", "v", "o", "gate", "up", "down")
  q: Weight | Fp8Weight
  k: Weight | Fp8Weight
  v: Weight | Fp8Weight
  o: Weight | Fp8Weight
  gate: Weight | Fp8Weight
  up: Weight | Fp8Weight
  down: Weight | Fp8Weight
  def __init__(self, f: GGUFFile, c: Config, i: int):
    p, hd = f"blk.{i}.", c.head_dim
    self.attn_norm = Weight(f, p + "attn_norm.weight", (c.dim,))
    self.q = Weight(f, p + "attn_q.weight", (c.n_heads * hd, c.dim))
    self.k = Weight(f, p + "attn_k.weight", (c.n_kv_heads * hd, c.dim))
    self.v = Weight(f, p + "attn_v.weight", (c.n_kv_heads * hd, c.dim))
    self.o = Weight(f, p + "attn_output.weight", (c.dim, c.n_heads * hd))
    self.biases = [Weight(f, p + f"attn_{n}.bias", (k * hd,)) for n, k in (("q", c.n_heads), ("k", c.n_kv_heads),
                                                                             ("v", c.n_kv_heads))] if c.qkv_bias else []
    self.ffn_norm = Weight(f, p + "ffn_norm.weight", (c.dim,))
    self.gate = Weight(f, p + "ffn_gate.weight", (c.hidden, c.dim))
    self.up = Weight(f, p + "ffn_up.weight", (c.hidden, c.dim))
    self.down = Weight(f, p + "ffn_down.weight", (c.dim, c.hidden))

# ---- the model ----

def _realize_after(out: Tensor, writes: list[Tensor]) -> Tensor:
  """Realize `out` and the cache writes in one schedule. NOTE: the writes go first in the sink so that each is ordered
  right after the attention that reads the rows before it, not at the end, where it would keep every layer's new rows
  alive until then."""
  writes[0].realize(*writes[1:], out)
  return out

class Transformer:
  """The network and its KV cache (allocated once: `capacity` positions plus `chunk - 1` rows that the padding of a
  last prefill chunk may write). `forward(tokens, start)` runs positions start..start+C-1 of one sequence and returns
  their logits; `step` is the same through one TinyJit per chunk size, the position a bound variable."""
  def __init__(self, f: GGUFFile, c: Config, capacity: int, chunk: int = 32, quantize: str | None = None,
               devices: tuple[str, ...] | None = None):
    if quantize is not None and quantize not in QUANTIZATIONS:
      raise LLMError(f"llm: unknown quantization {quantize!r}; supported: {', '.join(QUANTIZATIONS)}")
    self.c, self.capacity, self.chunk = c, capacity, chunk
    self.device: str | tuple[str, ...] = devices if devices else f.device
    self.embed: Weight | Fp8Weight = Weight(f, "token_embd.weight", (c.vocab, c.dim))
    self.blocks = [Block(f, c, i) for i in range(c.n_layers)]
    self.norm = Weight(f, "output_norm.weight", (c.dim,))
    self.output: Weight | Fp8Weight = self.embed if c.tied else Weight(f, "output.weight", (c.vocab, c.dim))
    if quantize == "fp8":
      # NOTE: every matrix is requantized (the norms, biases and RoPE factors stay float32); a tied output stays tied
      for b in self.blocks:
        for n in Block.MATRICES: setattr(b, n, Fp8Weight(getattr(b, n)))
      self.output = Fp8Weight(self.output) if not c.tied else self.output
      self.embed = Fp8Weight(self.embed)
      if c.tied: self.output = self.embed
    inv = 1.0 / c.rope_base ** (np.arange(0, c.head_dim, 2, dtype=np.float64) / c.head_dim)
    inv_t = Tensor(inv.astype(np.float32) / np.float32(c.rope_linear))
    if c.rope_factors: inv_t = inv_t / Weight(f, "rope_freqs.weight", (c.head_dim // 2,)).matrix()
    self.inv_freq = inv_t.realize()
    self.rows = capacity + chunk - 1
    shape = (c.n_kv_heads, self.rows, c.head_dim)
    def zeros() -> Tensor: return Tensor.zeros(*shape).shard(devices, 0) if devices else Tensor.zeros(*shape)
    self.cache = [(zeros().contiguous().realize(), zeros().contiguous().realize()) for _ in self.blocks]
    if devices: self._shard(devices)
    self._jits: dict[int, TinyJit] = {}

  def _shard(self, devs: tuple[str, ...]) -> None:
    """Tensor parallel over devs: each device holds n_heads/N query heads and n_kv_heads/N kv heads (q, k, v and their
    biases split by rows, whole heads; the KV cache by kv heads) and 1/N of the FFN's hidden units (gate and up split
    by rows, down by columns, in groups of down's quantization block so the two splits meet). attn_output and down
    are split by columns, so their products are partial sums, allreduced; everything else (embedding, norms, output,
    RoPE frequencies) is replicated. An attn_output (or a bias) whose per-device part is not whole quantization blocks
    is replicated (each device then reads the columns of its own heads)."""
    c, n = self.c, len(devs)
    for b in self.blocks:
      for w in (b.q, b.k, b.v, *b.biases): w.shard(devs, 0, c.head_dim)
      b.o.shard(devs, 1, c.n_heads // n * c.head_dim)
      for w in (b.gate, b.up): w.shard(devs, 0, b.down.block)
      b.down.shard(devs, 1, b.down.block)
      for w in (b.attn_norm, b.ffn_norm): w.shard(devs, None)
    for w in {id(w): w for w in (self.embed, self.output, self.norm)}.values(): w.shard(devs, None)
    self.inv_freq = self.inv_freq.shard(devs).realize()

  def _rope(self, x: Tensor, pos: Tensor) -> Tensor:
    """x (heads, C, head_dim) rotated at positions pos (C,): GGUF llama weights pair adjacent dims, qwen2 the halves."""
    ang = pos.cast(dtypes.float32).reshape(-1, 1) * self.inv_freq.reshape(1, -1)
    cos, sin = ang.cos(), ang.sin()
    h = self.c.head_dim // 2
    if self.c.neox_rope: a, b = x[..., :h], x[..., h:]
    else: a, b = (p := x.reshape(*x.shape[:-1], h, 2))[..., 0], p[..., 1]
    ra, rb = a * cos - b * sin, a * sin + b * cos
    return ra.cat(rb, dim=-1) if self.c.neox_rope else Tensor.stack(ra, rb, dim=-1).reshape(x.shape)

  def _attend(self, q: Tensor, k: Tensor, v: Tensor, start: sint) -> Tensor:
    """q (heads, C, hd) at positions start.. attending to k, v (kv_heads, start + C, hd), the cache's rows up to the
    chunk's last position: query i sees rows <= start + i. Query heads are grouped by the kv head they share."""
    c, C = self.c, q.shape[1]
    rep, L = c.n_heads // c.n_kv_heads, start + C
    scores = q.reshape(c.n_kv_heads, rep * C, c.head_dim).matmul(k.transpose(1, 2)) * (1.0 / math.sqrt(c.head_dim))
    if C > 1:
      # NOTE: a one-token step sees every row it reads; a chunk masks each query's later rows
      later = Tensor.arange(L, dtype=dtypes.int32, device=self.device).reshape(1, -1) > \
        (Tensor.arange(C, dtype=dtypes.int32, device=self.device) + start).reshape(-1, 1)
      scores = later.where(-math.inf, scores.reshape(c.n_kv_heads, rep, C, L)).reshape(c.n_kv_heads, rep * C, L)
    return scores.softmax(-1).matmul(v).reshape(c.n_heads, C, c.head_dim)

  def _block(self, b: Block, li: int, x: Tensor, start: sint, writes: list[Tensor]) -> Tensor:
    c, C = self.c, x.shape[0]
    pos = Tensor.arange(C, dtype=dtypes.int32, device=self.device) + start
    h = _rms_norm(x, b.attn_norm.matrix(), c.norm_eps)
    q, k, v = b.q(h), b.k(h), b.v(h)
    if b.biases: q, k, v = q + b.biases[0].matrix(), k + b.biases[1].matrix(), v + b.biases[2].matrix()
    q = self._rope(q.reshape(C, c.n_heads, c.head_dim).transpose(0, 1), pos)
    # NOTE: the chunk's k is stored once, after its projection is: fused into the attention, its RoPE (two sines per
    # element) was evaluated for every cached position the scores kernel reads, not only for the chunk's own rows; and
    # the RoPE reads each projected value twice, so the projection is stored first (fused, it was reduced per read)
    k = self._rope(k.contiguous().reshape(C, c.n_kv_heads, c.head_dim).transpose(0, 1), pos).contiguous()
    v = v.reshape(C, c.n_kv_heads, c.head_dim).transpose(0, 1)
    ck, cv = self.cache[li]
    # NOTE: attention reads the earlier rows from the cache and this chunk's rows as computed, so the write of these
    # rows (disjoint from the rows read) runs in the same schedule as the rest of the step
    writes.extend((ck[:, start:start + C].assign(k), cv[:, start:start + C].assign(v)))
    a = self._attend(q, ck[:, :start].cat(k, dim=1), cv[:, :start].cat(v, dim=1), start) \
      .transpose(0, 1).reshape(C, c.n_heads * c.head_dim)
    # NOTE: the residual stream is stored at each add; left lazy, every later kernel would re-add all earlier pieces
    x = (x + b.o(a)).contiguous()
    h = _rms_norm(x, b.ffn_norm.matrix(), c.norm_eps)
    return (x + b.down(b.gate(h).silu() * b.up(h))).contiguous()

  def _hidden(self, tokens: Tensor | tuple[UOp, ...], start: sint, writes: list[Tensor]) -> Tensor:
    """The final normed hidden states (C, dim) of tokens (C,) int32 at positions start + 0..C-1; the cache writes of
    their rows are appended to `writes`, to be realized with the result. Tokens given as bound variables (a jitted
    step) are each the one row of the table, read in one kernel; a tensor of tokens is an embedding (a select summed
    over the vocabulary, which codegen turns into a load of each token's row: tinygrad/codegen/gather.py)."""
    if isinstance(tokens, tuple):
      table = self.embed.matrix()
      rows = [table[t:t + 1] for t in tokens]
      x = rows[0].cat(*rows[1:]) if len(rows) > 1 else rows[0]
    else: x = tokens.to(self.device).reshape(-1).embedding(self.embed.matrix())
    for i, b in enumerate(self.blocks): x = self._block(b, i, x, start, writes)
    return _rms_norm(x, self.norm.matrix(), self.c.norm_eps)

  def _check_window(self, start: int, n: int) -> None:
    if not 0 <= start or start + n > self.rows:
      raise LLMError(f"llm: positions {start}..{start + n - 1} are outside the KV cache's {self.rows} rows "
                     f"(capacity {self.capacity})")

  def forward(self, tokens: Tensor, start: int | Tensor = 0) -> Tensor:
    """Logits (C, vocab) of every position, writing their cache rows (not jitted; the tests compare them)."""
    if isinstance(start, Tensor): start = int(start.numpy().reshape(-1)[0])
    self._check_window(start, tokens.int_shape("forward")[0])
    writes: list[Tensor] = []
    return _realize_after(self.output(self._hidden(tokens, start, writes)), writes)

  def _step(self, *args: UOp) -> Tensor:
    # NOTE: the chunk's tokens, its position and the index of its last real token, all bound variables (TinyJit passes
    # them as they are), so one capture per chunk size serves every prompt
    *tokens, start, last = args
    writes: list[Tensor] = []
    x = self._hidden(tuple(tokens), start, writes)
    return _realize_after(self.output(x.shrink(((last, last + 1), None))).reshape(-1), writes)

  def _decode(self, token: UOp, start: UOp) -> Tensor:
    writes: list[Tensor] = []
    return _realize_after(self.output(self._hidden((token,), start, writes)).reshape(-1), writes)

  def step(self, tokens: list[int], start: int, chunk: int) -> np.ndarray:
    """The logits of the last of `tokens` (at most `chunk` of them, padded to `chunk`) placed at positions start...:
    one TinyJit per chunk size, its position `start_pos` a bound variable, so one capture serves every position and
    each launch works on the rows up to the position, not on the whole cache."""
    assert 0 < len(tokens) <= chunk <= self.chunk
    self._check_window(start, chunk)
    if not all(0 <= t < self.c.vocab for t in tokens):
      raise LLMError(f"llm: token ids {[t for t in tokens if not 0 <= t < self.c.vocab]} are outside the vocabulary "
                     f"of {self.c.vocab}")
    pos = UOp.variable("start_pos", 0, self.rows - chunk).bind(start)
    if chunk == 1:
      jit = self._jits.setdefault(1, TinyJit(self._decode))
      return jit(UOp.variable("token", 0, self.c.vocab - 1).bind(tokens[0]), pos).numpy()
    jit = self._jits.setdefault(chunk, TinyJit(self._step))
    padded = tokens + [0] * (chunk - len(tokens))
    toks = [UOp.variable(f"token{i}", 0, self.c.vocab - 1).bind(t) for i, t in enumerate(padded)]
    return jit(*toks, pos, UOp.variable("last", 0, chunk - 1).bind(len(tokens) - 1)).numpy()

def shard_devices(n: int, c: Config, device: str) -> tuple[str, ...] | None:
  """Devices 0..n-1 of `device`'s backend for tensor parallelism over n devices (None for n = 1: one device). n must
  divide the query and the kv head counts: each device holds whole heads."""
  if isinstance(n, bool) or not isinstance(n, int) or n < 1:
    raise LLMError(f"llm: --shard {n!r}: the number of devices must be a positive integer")
  if c.n_heads % n or c.n_kv_heads % n:
    raise LLMError(f"llm: --shard {n} does not divide the model's attention.head_count {c.n_heads} and head_count_kv "
                   f"{c.n_kv_heads}; each device holds whole heads, so use a device count dividing both")
  if n == 1: return None
  base = Device.canonicalize(device).split(":")[0]
  devs = tuple(f"{base}:{i}" for i in range(n))
  # NOTE: the highest index first, so a count past what the process may open opens no device
  try:
    for d in reversed(devs): Device[d]  # noqa: B018
  except DeviceOpenError as e: raise LLMError(f"llm: --shard {n}: {e}") from e
  return devs

# ---- the app ----

@dataclass
class Stats:
  prompt_tokens: int = 0
  tokens: int = 0
  prefill_s: float = 0.0
  decode_s: float = 0.0
  finish_reason: str = ""

class LLM:
  """A loaded model with its tokenizer. `generate` returns the text, `stream` yields text pieces as tokens come,
  `tokens` yields token ids; `stats` describes the last call."""
  def __init__(self, f: GGUFFile, capacity: int | None = None, chunk: int = 32, quantize: str | None = None,
               shard: int | None = None):
    self.file, self.config = f, config_from_gguf(f)
    devices = shard_devices(shard, self.config, f.device) if shard is not None else None
    try: self.tokenizer = Tokenizer.from_gguf(f.metadata)
    except TokenizerError as e: raise LLMError(f"llm: {f.path}: {e}") from e
    if self.tokenizer.vocab_size != self.config.vocab:
      raise LLMError(f"llm: {f.path}: the tokenizer has {self.tokenizer.vocab_size} tokens, the model's vocabulary is "
                     f"{self.config.vocab}")
    self.capacity = min(capacity or self.config.context, self.config.context)
    self.chunk = chunk
    self.model = Transformer(f, self.config, self.capacity, chunk, quantize, devices)
    self.stats = Stats()

  @staticmethod
  def load(path: str, capacity: int | None = None, chunk: int = 32, device: str | None = None,
           quantize: str | None = None, shard: int | None = None) -> LLM:
    """quantize="fp8": requantize every weight matrix to fp8e4m3 with per-row scales at load (Fp8Weight).
    shard=N: tensor parallel over devices 0..N-1 of `device`'s backend (Transformer._shard)."""
    return LLM(GGUFFile(path, device), capacity, chunk, quantize, shard)

  def chat_prompt(self, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
    return self.tokenizer.render_chat(messages, add_generation_prompt)

  def tokens(self, prompt: str | list[int], params: SamplingParams | None = None) -> Iterator[int]:
    """Token ids as they are sampled (EOS ends it, unless params.ignore_eos)."""
    for tok, _ in self.steps(prompt, params): yield tok

  def steps(self, prompt: str | list[int], params: SamplingParams | None = None) -> Iterator[tuple[int, np.ndarray]]:
    """(token, the logits it was sampled from) as tokens are sampled; a str prompt is encoded with BOS."""
    p = params or SamplingParams()
    p.check()
    ids = self.tokenizer.encode(prompt) if isinstance(prompt, str) else list(prompt)
    if not ids: raise LLMError("llm: the prompt is empty (and the tokenizer adds no BOS token)")
    if len(ids) + p.max_tokens > self.capacity:
      raise LLMError(f"llm: the prompt's {len(ids)} tokens + max_tokens {p.max_tokens} exceed the context of "
                     f"{self.capacity} tokens (the model's context_length {self.config.context}); shorten the prompt "
                     "or lower max_tokens")
    self.stats, rng = Stats(prompt_tokens=len(ids)), np.random.default_rng(p.seed)
    t0 = time.perf_counter()
    for s in range(0, len(ids), self.chunk): logits = self.model.step(ids[s:s + self.chunk], s, self.chunk)
    self.stats.prefill_s, seen, t1 = time.perf_counter() - t0, list(ids), time.perf_counter()
    for n in range(p.max_tokens):
      tok = sample(logits, p, seen, rng)
      if tok in self.tokenizer.eos_ids and not p.ignore_eos: self.stats.finish_reason = "stop"; break
      seen.append(tok)
      self.stats.tokens += 1
      yield tok, logits
      if n + 1 < p.max_tokens: logits = self.model.step([tok], len(seen) - 1, 1)
      self.stats.decode_s = time.perf_counter() - t1
    else: self.stats.finish_reason = "length"

  def stream(self, prompt: str | list[int], params: SamplingParams | None = None) -> Iterator[str]:
    """Text pieces as tokens come (a piece ends on a whole UTF-8 character); stops before a stop string."""
    p = params or SamplingParams()
    out, sent, raw = "", 0, b""
    for tok in self.tokens(prompt, p):
      raw += self.tokenizer.token_bytes(tok)
      text = raw.decode("utf-8", errors="replace") if _whole_utf8(raw) else None
      if text is None: continue
      out, raw = out + text, b""
      if (hit := min((i for s in p.stop if (i := out.find(s)) >= 0), default=-1)) >= 0:
        if hit > sent: yield out[sent:hit]
        self.stats.finish_reason = "stop"
        return
      # NOTE: text that may be the start of a stop string is held back until it cannot be
      hold = max((k for s in p.stop for k in range(1, len(s)) if out.endswith(s[:k])), default=0)
      if len(out) - hold > sent: yield out[sent:len(out) - hold]; sent = len(out) - hold
    if raw: out += raw.decode("utf-8", errors="replace")
    if len(out) > sent: yield out[sent:]

  def generate(self, prompt: str | list[int], params: SamplingParams | None = None, **kw: Any) -> str:
    return "".join(self.stream(prompt, params or SamplingParams(**kw)))

def _whole_utf8(b: bytes) -> bool:
  """b ends on a character boundary (a partial multi-byte sequence at the end is waited for, up to 4 bytes)."""
  for i in range(1, min(4, len(b)) + 1):
    c = b[-i]
    if c < 0x80: return True
    if c >= 0xC0: return i >= (2 if c < 0xE0 else 3 if c < 0xF0 else 4)
  return len(b) >= 4

# ---- CLI ----

def _peak_rss_mb() -> float:
  import resource
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(prog="python -m tinygrad.apps.llm", description="run a llama/qwen2 GGUF model")
  ap.add_argument("--model", required=True, help="the .gguf file")
  g = ap.add_mutually_exclusive_group()
  g.add_argument("--prompt", help="complete this text (default: read stdin)")
  g.add_argument("--chat", action="store_true", help="chat on stdin/stdout with the file's chat template")
  g.add_argument("--serve", action="store_true", help="serve OpenAI-compatible /v1/chat/completions, /v1/completions")
  ap.add_argument("--host", default="127.0.0.1", help="--serve's address (default 127.0.0.1: this machine only)")
  ap.add_argument("--port", type=int, default=8080)
  ap.add_argument("--max-tokens", type=int, default=128)
  ap.add_argument("--temperature", type=float, default=0.0)
  ap.add_argument("--top-k", type=int, default=0)
  ap.add_argument("--top-p", type=float, default=1.0)
  ap.add_argument("--min-p", type=float, default=0.0)
  ap.add_argument("--repetition-penalty", type=float, default=1.0)
  ap.add_argument("--seed", type=int, default=None)
  ap.add_argument("--stop", action="append", default=[], help="a stop string (repeatable)")
  ap.add_argument("--context", type=int, default=None, help="KV cache capacity (default: the model's context_length)")
  ap.add_argument("--quantize", default=None, help="requantize the weights at load: fp8 (fp8e4m3, per-row scales)")
  ap.add_argument("--shard", type=int, default=None, help="tensor parallel over N devices (CPU:0..N-1): whole heads "
                  "and 1/N of the FFN per device; N must divide the head counts")
  ap.add_argument("--benchmark", action="store_true", help="print prefill/decode tokens/s and peak memory")
  a = ap.parse_args(argv)
  try:
    llm = LLM.load(a.model, a.context, quantize=a.quantize, shard=a.shard)
    params = SamplingParams(a.temperature, a.top_k, a.top_p, a.min_p, a.repetition_penalty, a.seed, a.max_tokens,
                            a.stop)
    if a.chat: return _chat(llm, params)
    if a.serve:
      from tinygrad.apps.serve import serve
      httpd = serve(llm, a.host, a.port, name=a.model.rsplit("/", 1)[-1])
      print(f"serving {a.model} on http://{a.host}:{httpd.server_address[1]}/v1", file=sys.stderr)
      httpd.serve_forever()
      return 0
    for piece in llm.stream(a.prompt if a.prompt is not None else sys.stdin.read(), params):
      sys.stdout.write(piece)
      sys.stdout.flush()
    sys.stdout.write("\n")
  except (LLMError, TokenizerError, CheckpointError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  if a.benchmark: _print_bench(llm)
  return 0

def _print_bench(llm: LLM) -> None:
  s = llm.stats
  pre = s.prompt_tokens / s.prefill_s if s.prefill_s else 0.0
  dec = (s.tokens - 1) / s.decode_s if s.decode_s and s.tokens > 1 else 0.0
  print(f"prefill {s.prompt_tokens} tokens {pre:.2f} tok/s, decode {s.tokens} tokens {dec:.2f} tok/s, "
        f"peak RSS {_peak_rss_mb():.0f} MiB, kernels {GlobalCounters.kernel_count}", file=sys.stderr)

def _chat(llm: LLM, params: SamplingParams) -> int:
  messages: list[dict[str, str]] = []
  for line in sys.stdin:
    messages.append({"role": "user", "content": line.rstrip("\n")})
    reply = ""
    for piece in llm.stream(llm.tokenizer.encode(llm.chat_prompt(messages), add_bos=False, special=True), params):
      reply += piece
      sys.stdout.write(piece)
      sys.stdout.flush()
    sys.stdout.write("\n")
    messages.append({"role": "assistant", "content": reply})
  return 0

if __name__ == "__main__": sys.exit(main())
