"""Tokenizers from GGUF metadata (tokenizer.ggml.*) and the file's chat template.

- `gpt2`: byte-level BPE. Text is split by the pre-tokenizer of `tokenizer.ggml.pre` (llama-3's regex for `llama-bpe`,
  qwen2's, GPT-2's), each piece's UTF-8 bytes are mapped to GPT-2's printable characters, and the merges apply in rank
  order. Control and user-defined tokens are matched in the text first when `special=True`.
- `llama`: sentencepiece BPE. Spaces become U+2581, a space is put in front (add_space_prefix), then the adjacent pair
  whose joined piece has the highest score is merged until none is in the vocabulary; characters outside it fall
  back to their UTF-8 bytes (`<0xXX>` tokens).

The chat template is `tokenizer.chat_template`, rendered by jinja2's immutable sandbox: a template is untrusted input,
so it can call no Python beyond what the sandbox allows."""
from __future__ import annotations
import ctypes, functools, json, threading, time
from typing import Any

class TokenizerError(ValueError):
  """A tokenizer the metadata does not describe consistently, or one this module does not implement (named by key)."""

# the pre-tokenizer regexes by tokenizer.ggml.pre (the same pattern strings the models were trained with)
_LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
           r"\s+(?!\S)|\s+")
_QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|"
          r"\s+")
_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
PRE_TOKENIZERS = {"llama-bpe": _LLAMA3, "llama3": _LLAMA3, "smaug-bpe": _LLAMA3, "qwen2": _QWEN2, "default": _GPT2,
                  "gpt-2": _GPT2}
# llama.cpp's token types
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6

@functools.cache
def _byte_chars() -> tuple[str, ...]:
  """GPT-2's byte -> printable character map: printable Latin-1 bytes are themselves, the rest shift to U+0100 on."""
  keep = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
  out, n = {}, 0
  for b in range(256):
    if b in keep: out[b] = chr(b)
    else: out[b], n = chr(256 + n), n + 1
  return tuple(out[b] for b in range(256))

def _list(md: dict[str, Any], key: str, kind: type | tuple[type, ...], n: int | None = None) -> list[Any]:
  v = md.get(key)
  if not isinstance(v, list) or not all(isinstance(x, kind) and not isinstance(x, bool) for x in v):
    raise TokenizerError(f"tokenizer: {key} must be a list of {getattr(kind, '__name__', 'numbers')}, got "
                         f"{type(v).__name__}" + ("" if not isinstance(v, list) else " with another type in it"))
  if n is not None and len(v) != n:
    raise TokenizerError(f"tokenizer: {key} has {len(v)} entries, tokenizer.ggml.tokens has {n}")
  return v

class Tokenizer:
  def __init__(self, model: str, tokens: list[str], types: list[int], md: dict[str, Any]):
    self.model, self.tokens, self.types = model, tokens, types
    self.vocab_size = len(tokens)
    self.ids = {t: i for i, t in enumerate(tokens)}
    def tid(key: str) -> int | None:
      v = md.get(key)
      if v is None: return None
      if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < len(tokens):
        raise TokenizerError(f"tokenizer: {key} is {v!r}, not a token id below {len(tokens)}")
      return v
    self.bos, self.eos = tid("tokenizer.ggml.bos_token_id"), tid("tokenizer.ggml.eos_token_id")
    self.eos_ids = {i for k in ("eos", "eot", "eom") if (i := tid(f"tokenizer.ggml.{k}_token_id")) is not None}
    self.add_bos = bool(md.get("tokenizer.ggml.add_bos_token", model == "llama")) and self.bos is not None
    self.chat_template = md.get("tokenizer.chat_template")
    self.specials = sorted((t for t, ty in zip(tokens, types) if ty in (CONTROL, USER_DEFINED) and t),
                           key=len, reverse=True)
    if model == "gpt2":
      import regex
      pre = md.get("tokenizer.ggml.pre", "default")
      if pre not in PRE_TOKENIZERS:
        raise TokenizerError(f"tokenizer: tokenizer.ggml.pre is {pre!r}; supported: {', '.join(PRE_TOKENIZERS)}")
      self.pattern = regex.compile(PRE_TOKENIZERS[pre])
      merges = _list(md, "tokenizer.ggml.merges", str)
      self.ranks: dict[tuple[str, str], int] = {}
      for r, m in enumerate(merges):
        a, sep, b = m.partition(" ")
        if not sep: raise TokenizerError(f"tokenizer: tokenizer.ggml.merges[{r}] is {m!r}, not two pieces")
        self.ranks.setdefault((a, b), r)
      self.byte_of = {c: b for b, c in enumerate(_byte_chars())}
    else:
      self.scores = [float(s) for s in _list(md, "tokenizer.ggml.scores", (int, float), len(tokens))] \
        if "tokenizer.ggml.scores" in md else [0.0] * len(tokens)
      self.space_prefix = bool(md.get("tokenizer.ggml.add_space_prefix", True))
      self.byte_ids = {int(t[3:5], 16): i for i, (t, ty) in enumerate(zip(tokens, types)) if ty == BYTE and
                       len(t) == 6 and t.startswith("<0x") and t.endswith(">")}
      self.unk = tid("tokenizer.ggml.unknown_token_id")
    self._bpe = functools.lru_cache(maxsize=1 << 16)(self._bpe_word if model == "gpt2" else self._spm_piece)

  @staticmethod
  def from_gguf(md: dict[str, Any]) -> Tokenizer:
    model = md.get("tokenizer.ggml.model")
    if model not in ("gpt2", "llama"):
      raise TokenizerError(f"tokenizer: tokenizer.ggml.model is {model!r}; supported: gpt2 (byte-level BPE), llama "
                           "(sentencepiece BPE)")
    tokens = _list(md, "tokenizer.ggml.tokens", str)
    if not tokens: raise TokenizerError("tokenizer: tokenizer.ggml.tokens is empty")
    types = _list(md, "tokenizer.ggml.token_type", int, len(tokens)) if "tokenizer.ggml.token_type" in md else \
      [NORMAL] * len(tokens)
    return Tokenizer(model, tokens, types, md)

  # ---- encoding ----

  def encode(self, text: str, add_bos: bool | None = None, special: bool = False) -> list[int]:
    """Token ids of text; add_bos None follows tokenizer.ggml.add_bos_token; special=True matches control and
    user-defined tokens written in the text (a chat template's markers), else they are plain text."""
    out = [self.bos] if (self.add_bos if add_bos is None else add_bos) and self.bos is not None else []
    first = True
    for part, is_special in self._split_special(text) if special and self.specials else [(text, False)]:
      if is_special: out.append(self.ids[part]); continue
      out += self._encode_plain(part, first) if part else []
      first = False
    return out

  def _split_special(self, text: str) -> list[tuple[str, bool]]:
    import regex
    pat = regex.compile("|".join(regex.escape(s) for s in self.specials))
    parts, at = [], 0
    for m in pat.finditer(text):
      if m.start() > at: parts.append((text[at:m.start()], False))
      parts.append((m.group(), True))
      at = m.end()
    if at < len(text): parts.append((text[at:], False))
    return parts

  def _encode_plain(self, text: str, first: bool) -> list[int]:
    if self.model == "gpt2":
      bc = _byte_chars()
      return [i for w in self.pattern.findall(text) for i in self._bpe("".join(bc[b] for b in w.encode("utf-8")))]
    s = text.replace(" ", "\u2581")
    if self.space_prefix and first: s = "\u2581" + s
    return list(self._bpe(s))

  def _bpe_word(self, word: str) -> tuple[int, ...]:
    parts = list(word)
    while len(parts) > 1:
      best = min(range(len(parts) - 1), key=lambda i: self.ranks.get((parts[i], parts[i + 1]), 1 << 62))
      if (parts[best], parts[best + 1]) not in self.ranks: break
      parts[best:best + 2] = [parts[best] + parts[best + 1]]
    out = []
    for p in parts:
      if p in self.ids: out.append(self.ids[p])
      else: out += [self.ids[c] for c in p if c in self.ids]
    return tuple(out)

  def _spm_piece(self, s: str) -> tuple[int, ...]:
    parts = list(s)
    while len(parts) > 1:
      best, best_score = -1, 0.0
      for i in range(len(parts) - 1):
        j = self.ids.get(parts[i] + parts[i + 1])
        if j is not None and self.types[j] in (NORMAL, USER_DEFINED) and (best < 0 or self.scores[j] > best_score):
          best, best_score = i, self.scores[j]
      if best < 0: break
      parts[best:best + 2] = [parts[best] + parts[best + 1]]
    out: list[int] = []
    for p in parts:
      if (j := self.ids.get(p)) is not None and self.types[j] != BYTE: out.append(j)
      elif self.byte_ids: out += [self.byte_ids[b] for b in p.encode("utf-8")]
      elif self.unk is not None: out.append(self.unk)
      else: raise TokenizerError(f"tokenizer: {p!r} is not in the vocabulary, which has no byte or unknown tokens")
    return tuple(out)

  # ---- decoding ----

  def token_bytes(self, i: int) -> bytes:
    t, ty = self.tokens[i], self.types[i]
    if ty in (CONTROL, USER_DEFINED): return t.encode("utf-8")
    if self.model == "gpt2": return bytes(self.byte_of[c] for c in t if c in self.byte_of)
    if ty == BYTE: return bytes([int(t[3:5], 16)])
    return t.replace("\u2581", " ").encode("utf-8")

  def decode(self, ids: list[int], skip_special: bool = False) -> str:
    out = b"".join(self.token_bytes(i) for i in ids
                   if not (skip_special and self.types[i] == CONTROL) and not (i == self.bos and self.model == "llama"))
    text = out.decode("utf-8", errors="replace")
    if self.model == "llama" and self.space_prefix and text.startswith(" "): text = text[1:]
    return text

  # ---- chat ----

  def render_chat(self, messages: list[dict[str, Any]], add_generation_prompt: bool = True, **extra: Any) -> str:
    if not isinstance(self.chat_template, str):
      raise TokenizerError("tokenizer: the file has no tokenizer.chat_template; use a plain prompt")
    return render_template(self.chat_template, messages=messages, add_generation_prompt=add_generation_prompt,
                           bos_token=self.tokens[self.bos] if self.bos is not None else "",
                           eos_token=self.tokens[self.eos] if self.eos is not None else "", **extra)

TEMPLATE_MAX_CHARS = 1 << 20  # a rendered chat prompt, and any string or list a template builds with * on the way
TEMPLATE_MAX_SECONDS = 5.0    # CPU time of the thread rendering a template (a real chat template takes milliseconds)

class _TemplateTimeout(BaseException):
  """Raised into the rendering thread when its template runs past TEMPLATE_MAX_SECONDS (a BaseException, so no
  `except Exception` inside jinja or a filter swallows it)."""

def _cpu_bounded(fn: Any, seconds: float) -> Any:
  """fn() in this thread, ended by _TemplateTimeout once this thread has used `seconds` of CPU time: a watcher thread
  reads this thread's CPU clock and raises the exception into it, which ends even a loop that calls nothing."""
  me, lock, state = threading.get_ident(), threading.Lock(), {"done": False, "fired": False}
  clock = time.pthread_getcpuclockid(me)
  start, done = time.clock_gettime(clock), threading.Event()
  def watch() -> None:
    while not done.wait(0.02):
      if time.clock_gettime(clock) - start <= seconds: continue
      with lock:
        if not state["done"]:
          state["fired"] = True
          ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(me), ctypes.py_object(_TemplateTimeout))
      return
  watcher = threading.Thread(target=watch, name="template-cpu-budget", daemon=True)
  watcher.start()
  landed = False
  try: ret = fn()
  except _TemplateTimeout: landed = True
  finally:
    with lock: state["done"] = True  # from here on the watcher sets nothing
    done.set()
    watcher.join()
  if state["fired"] and not landed:
    # NOTE: fn ended (or swallowed it) after the watcher set the exception: it is let land here, never cleared with
    # PyThreadState_SetAsyncExc(id, NULL). CPython 3.11 then keeps its "async exception pending" flag set with nothing
    # pending: every later call in this thread takes the slow path, and one under sys.setprofile (a profiler, a
    # coverage tool, pytest-timeout's handler) loops at its first instruction forever. The loop's first backward jump
    # delivers a pending exception; it ends by itself if the exception already landed inside fn.
    try:
      for _ in range(1_000_000): pass
    except _TemplateTimeout: pass
  if state["fired"]: raise _TemplateTimeout
  return ret

def render_template(template: str, **ctx: Any) -> str:
  """A chat template rendered in jinja2's immutable sandbox, with the helpers chat templates expect (raise_exception,
  tojson keeping non-ASCII, strftime_now). A template is untrusted: `*` may not build a string or list longer than
  TEMPLATE_MAX_CHARS, nor may the output be, and it may use TEMPLATE_MAX_SECONDS of CPU time; every failure is a
  TokenizerError."""
  from jinja2.exceptions import TemplateError, SecurityError
  from jinja2.sandbox import ImmutableSandboxedEnvironment
  import datetime
  def raise_exception(msg: str) -> None: raise TemplateError(msg)
  class Sandbox(ImmutableSandboxedEnvironment):
    intercepted_binops = frozenset({"*"})
    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
      seq, n = (left, right) if isinstance(left, (str, list, tuple)) else (right, left)
      if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and len(seq) * n > TEMPLATE_MAX_CHARS:
        raise SecurityError(f"a repetition of {len(seq)} x {n} items is over the limit of {TEMPLATE_MAX_CHARS}")
      return super().call_binop(context, operator, left, right)
  env = Sandbox(trim_blocks=True, lstrip_blocks=True)
  env.filters["tojson"] = lambda x, indent=None, ensure_ascii=False, sort_keys=False: \
    json.dumps(x, indent=indent, ensure_ascii=ensure_ascii, sort_keys=sort_keys)
  env.globals["raise_exception"] = raise_exception
  env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
  def render() -> str:
    out, n = list[str](), 0
    for piece in env.from_string(template).generate(**ctx):
      out.append(piece)
      if (n := n + len(piece)) > TEMPLATE_MAX_CHARS:
        raise SecurityError(f"the rendered text passed {TEMPLATE_MAX_CHARS} characters ({n} so far)")
    return "".join(out)
  try: return _cpu_bounded(render, TEMPLATE_MAX_SECONDS)
  except _TemplateTimeout:
    raise TokenizerError(f"tokenizer: the chat template failed: it ran past {TEMPLATE_MAX_SECONDS} s of CPU time") \
      from None
  except TemplateError as e: raise TokenizerError(f"tokenizer: the chat template failed: {e}") from e
  # NOTE: a template is code from the file: whatever it raises (1/0, a bad index, a recursion) is the file's fault
  except (ArithmeticError, LookupError, TypeError, ValueError, RecursionError, MemoryError) as e:
    raise TokenizerError(f"tokenizer: the chat template failed: {type(e).__name__}: {e}") from e
