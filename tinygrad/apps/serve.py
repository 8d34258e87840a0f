"""An OpenAI-compatible HTTP endpoint for an LLM (`python -m tinygrad.apps.llm --model F.gguf --serve [--host H]
[--port P]`): POST /v1/chat/completions and /v1/completions (with "stream": true as server-sent events), GET
/v1/models. Bound to 127.0.0.1 unless told otherwise; one request runs at a time (the model has one KV cache)."""
from __future__ import annotations
import json, threading, time, uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator
from tinygrad.apps.sampling import LLMError, SamplingParams
from tinygrad.apps.tokenizer import TokenizerError

# the most bytes of JSON one request may send
MAX_BODY = 1 << 22

class RequestError(ValueError):
  """A request the server answers with 400 and the message."""

def _params(body: dict[str, Any]) -> SamplingParams:
  stop = body.get("stop") or []
  if isinstance(stop, str): stop = [stop]
  if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop):
    raise RequestError("'stop' must be a string or a list of non-empty strings")
  def num(k: str, default: Any, kind: type) -> Any:
    v = body.get(k, default)
    if v is None: return default
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (kind is int and not isinstance(v, int)):
      raise RequestError(f"'{k}' must be a {kind.__name__}, got {v!r}")
    return kind(v)
  return SamplingParams(num("temperature", 1.0, float), num("top_k", 0, int), num("top_p", 1.0, float),
                        num("min_p", 0.0, float), num("repetition_penalty", 1.0, float), num("seed", None, int),
                        num("max_tokens", 128, int), stop)

class Server:
  def __init__(self, llm: Any, name: str = "model"):
    self.llm, self.name, self.lock = llm, name, threading.Lock()

  def prompt(self, path: str, body: dict[str, Any]) -> list[int]:
    if path == "/v1/chat/completions":
      msgs = body.get("messages")
      if not isinstance(msgs, list) or not msgs or not all(isinstance(m, dict) and isinstance(m.get("role"), str) and
                                                            isinstance(m.get("content"), str) for m in msgs):
        raise RequestError("'messages' must be a non-empty list of {'role': str, 'content': str}")
      return self.llm.tokenizer.encode(self.llm.chat_prompt(msgs), add_bos=False, special=True)
    if not isinstance(p := body.get("prompt"), str): raise RequestError("'prompt' must be a string")
    return self.llm.tokenizer.encode(p)

  def run(self, path: str, body: dict[str, Any]) -> Iterator[tuple[str, str | None]]:
    """(text piece, finish reason or None) as they come; the last has the finish reason."""
    ids, params = self.prompt(path, body), _params(body)
    with self.lock:
      for piece in self.llm.stream(ids, params): yield piece, None
      yield "", self.llm.stats.finish_reason or "stop"

def _chunk(kind: str, rid: str, model: str, text: str, finish: str | None, chat: bool) -> dict[str, Any]:
  choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
  if chat: choice["delta" if kind == "chunk" else "message"] = {"role": "assistant", "content": text}
  else: choice["text"] = text
  obj = ("chat.completion" if chat else "text_completion") + (".chunk" if kind == "chunk" and chat else "")
  return {"id": rid, "object": obj, "created": int(time.time()), "model": model, "choices": [choice]}

def make_handler(server: Server) -> type[BaseHTTPRequestHandler]:
  class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a: Any) -> None: pass
    def _json(self, code: int, obj: Any) -> None:
      data = json.dumps(obj).encode()
      self.send_response(code)
      self.send_header("Content-Type", "application/json")
      self.send_header("Content-Length", str(len(data)))
      self.end_headers()
      self.wfile.write(data)
    def _error(self, code: int, msg: str) -> None:
      self._json(code, {"error": {"message": msg, "type": "invalid_request_error" if code == 400 else "not_found"}})
    def do_GET(self) -> None:
      if self.path != "/v1/models": return self._error(404, f"no endpoint GET {self.path}")
      self._json(200, {"object": "list", "data": [{"id": server.name, "object": "model", "owned_by": "tinygrad"}]})
    def do_POST(self) -> None:
      if self.path not in ("/v1/chat/completions", "/v1/completions"):
        return self._error(404, f"no endpoint POST {self.path}")
      try:
        n = int(self.headers.get("Content-Length", "0"))
        if not 0 < n <= MAX_BODY: raise RequestError(f"the body must be 1 to {MAX_BODY} bytes of JSON, got {n}")
        body = json.loads(self.rfile.read(n))
        if not isinstance(body, dict): raise RequestError("the body must be a JSON object")
        chat, rid = self.path == "/v1/chat/completions", f"cmpl-{uuid.uuid4().hex[:16]}"
        pieces = server.run(self.path, body)
        if not body.get("stream"):
          got = list(pieces)
          return self._json(200, _chunk("full", rid, server.name, "".join(t for t, _ in got), got[-1][1], chat))
        first = next(pieces)  # NOTE: errors of the request (a prompt over the context) surface before the 200
      except (RequestError, LLMError, TokenizerError, json.JSONDecodeError, UnicodeDecodeError, ValueError) as e:
        return self._error(400, str(e))
      self.send_response(200)
      self.send_header("Content-Type", "text/event-stream")
      self.send_header("Cache-Control", "no-cache")
      self.send_header("Connection", "close")
      self.end_headers()
      for text, finish in [first, *pieces]:
        self.wfile.write(f"data: {json.dumps(_chunk('chunk', rid, server.name, text, finish, chat))}\n\n".encode())
        self.wfile.flush()
      self.wfile.write(b"data: [DONE]\n\n")
      self.close_connection = True
  return Handler

def serve(llm: Any, host: str = "127.0.0.1", port: int = 8080, name: str = "model") -> ThreadingHTTPServer:
  """llm: a tinygrad.apps.llm.LLM (not imported here: llm.py's CLI imports this module).
  A started-on-call server (call serve_forever, or run it in a thread; port 0 picks a free port)."""
  return ThreadingHTTPServer((host, port), make_handler(Server(llm, name)))
