"""Findings: a signature per distinct bug, and the reproducer file each finding is written to.

A signature is (level, stage, kind, site, backend): the level fuzzed, the stage that failed (spec, roundtrip,
reference, codegen, compile, run, compare, crash, hang, ...), the kind (exception class, mismatch class, signal), the
code site (file:function of the frame that raised; empty for mismatches) and the backend ("all" when every backend
checked failed the same way). Findings with one signature are one finding, counted.

A reproducer is one JSON file, written atomically (tinygrad.helpers.atomic_write):

  format      "tinygrad-fuzz-finding/1"
  signature   {level, stage, kind, site, backend};  id  a short hash of it (the file name)
  state       the reduced case: for kernel/symbolic the graph as pyrender text, var_vals, opts, the input-data seed;
              for tensor the generator's bytes and the reducer's edits (and the program's source, for people only)
  original    the case as found, before reduction;  size / original_size  nodes (or steps) of each
  message     what the oracle said;  backends  the backends the repro checks;  env  the flags it ran under
  count, first_seen, last_seen, input (the corpus bytes, hex), campaign_seed, setup (a planted-bug hook, if any)

Reading one (`read_reproducer`) parses JSON and the graph with spec.roundtrip.eval_pyrender: it never runs code from
the file. The file is untrusted: every field is checked, and its `env` may set only the flags that change generated
code (declared `codegen=True` in tinygrad/helpers.py) and SPEC, IGNORE_OOB, each value read as the flag reads its
environment (`ContextVar.parse`); any other key (PYTHONPATH, LD_PRELOAD, CC, PATH, ...) or value is a ReproducerError
naming it. `replay(path)` checks the case again and says whether the same signature comes back.
"""
from __future__ import annotations
import hashlib, json, os, re, sys, time
from dataclasses import dataclass, field, asdict
from typing import Any
from tinygrad.helpers import atomic_write

FORMAT = "tinygrad-fuzz-finding/1"

def replay_flags() -> tuple[str, ...]:
  """The flags a reproducer may record and replays under: every flag that changes codegen, and the checkers' levels."""
  from tinygrad.helpers import ContextVar
  return ("SPEC", "IGNORE_OOB", *sorted(k for k, cv in ContextVar.declared().items() if cv.codegen))

@dataclass(frozen=True)
class Signature:
  level: str
  stage: str
  kind: str
  site: str
  backend: str
  @property
  def id(self) -> str:
    return hashlib.sha1("|".join(asdict(self).values()).encode()).hexdigest()[:12]
  def __str__(self) -> str:
    return f"{self.level}/{self.stage}/{self.kind}{f' at {self.site}' if self.site else ''} on {self.backend}"

@dataclass
class Finding:
  signature: Signature
  state: dict[str, Any]
  original: dict[str, Any]
  message: str
  backends: list[str]
  size: int = 0
  original_size: int = 0
  count: int = 1
  first_seen: float = 0.0
  last_seen: float = 0.0
  input: str = ""
  campaign_seed: int = 0
  reduced: bool = False
  env: dict[str, str] = field(default_factory=dict)
  setup: str | None = None

  def to_json(self) -> dict[str, Any]:
    d = asdict(self)
    d["signature"] = asdict(self.signature)
    return {"format": FORMAT, "id": self.signature.id, **d}

def current_env() -> dict[str, str]:
  """The flags of replay_flags() as this process sees them."""
  from tinygrad.helpers import ContextVar
  return {k: str(ContextVar.declared()[k].value) for k in replay_flags()}

def write_finding(directory: str, f: Finding) -> str:
  """Write (or rewrite) the reproducer of `f` atomically; returns its path."""
  os.makedirs(directory, exist_ok=True)
  path = os.path.join(directory, f"{f.signature.id}.json")
  atomic_write(path, json.dumps(f.to_json(), indent=1, sort_keys=True) + "\n")
  return path

class ReproducerError(ValueError):
  """A reproducer file that is not one (unreadable, wrong format, missing or ill-typed fields, an env it may not set,
  a case that cannot be read). The message is one line and starts with the file's path."""
  def __init__(self, msg: str): super().__init__(" ".join(msg.split("\n")))

_SETUP_RE = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")

def check_env(env: Any) -> dict[str, str]:
  """A reproducer's `env` as flags it may set (ValueError naming the first key or value it may not)."""
  from tinygrad.helpers import ContextVar, FlagError
  if not isinstance(env, dict): raise ValueError(f"env must be an object of flags, not {type(env).__name__}")
  allowed = replay_flags()
  out: dict[str, str] = {}
  for k, v in env.items():
    if k not in allowed:
      raise ValueError(f"env {k}={str(v)[:80]!r} is refused: a reproducer may set only {', '.join(allowed)}")
    raw = v if isinstance(v, str) else str(v) if type(v) is int else None
    if raw is None: raise ValueError(f"env {k}={v!r}: a flag's value must be a string")
    try: ContextVar.declared()[k].parse(raw)
    except FlagError as e: raise ValueError(f"env {e}") from None
    out[k] = raw
  return out

_MISSING = object()

def _field(d: dict[str, Any], key: str, typ: type | tuple[type, ...], default: Any = _MISSING) -> Any:
  if key not in d:
    if default is _MISSING: raise ValueError(f"{key} is missing")
    return default
  v, types = d[key], typ if isinstance(typ, tuple) else (typ,)
  # NOTE: JSON's true and false read as Python bools, which are ints too
  if not isinstance(v, types) or (type(v) is bool and bool not in types):
    raise ValueError(f"{key} must be {' or '.join(t.__name__ for t in types)}, not {type(v).__name__}")
  return v

def read_reproducer(path: str) -> Finding:
  """A finding from its JSON file (no code is run: the graph stays text until a level parses it). Every field is
  checked; ReproducerError (one line, naming the file) for anything that is not a reproducer."""
  from fuzz.levels import LEVELS
  from fuzz.backends import BACKENDS
  try:
    with open(path, encoding="utf-8") as fh: d = json.load(fh)
  except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
    raise ReproducerError(f"{path}: not a readable JSON file: {type(e).__name__}: {e}") from None
  if not isinstance(d, dict) or d.get("format") != FORMAT:
    raise ReproducerError(f"{path}: not a fuzz finding (format {d.get('format') if isinstance(d, dict) else None!r}, "
                          f"want {FORMAT!r})")
  try:
    sd = _field(d, "signature", dict)
    sig = Signature(**{k: _field(sd, k, str) for k in ("level", "stage", "kind", "site", "backend")})
    if sig.level not in LEVELS: raise ValueError(f"unknown level {sig.level[:40]!r} (levels: {', '.join(LEVELS)})")
    state = _field(d, "state", dict)
    backends = _field(d, "backends", list, [])
    if (bad := [b for b in backends if not isinstance(b, str) or b not in BACKENDS]):
      raise ValueError(f"unknown backend(s) {str(bad)[:80]} (backends: {', '.join(BACKENDS)})")
    setup = _field(d, "setup", (str, type(None)), None)
    if setup is not None and not _SETUP_RE.fullmatch(setup):
      raise ValueError(f"setup {setup[:80]!r} is not module:function")
    original = _field(d, "original", (dict, type(None)), None) or state
    f = Finding(sig, state, original, _field(d, "message", str, ""), list(backends),
                _field(d, "size", int, 0), _field(d, "original_size", int, 0), _field(d, "count", int, 1),
                float(_field(d, "first_seen", (int, float), 0)), float(_field(d, "last_seen", (int, float), 0)),
                _field(d, "input", str, ""), _field(d, "campaign_seed", int, 0), _field(d, "reduced", bool, False),
                check_env(_field(d, "env", (dict, type(None)), None) or {}), setup)
  except (KeyError, TypeError, ValueError) as e: raise ReproducerError(f"{path}: malformed finding: {e}") from None
  return f

# a tensor case's generator reads at most this much: a reproducer asking for more is refused before it is built
MAX_TENSOR_STEPS, MAX_TENSOR_BYTES = 64, 1 << 20

def read_case(path: str, f: Finding) -> Any:
  """The case of a reproducer, read by its level in this process (exec-free: graphs through eval_pyrender, tensor
  programs rebuilt by our generator from the bytes); ReproducerError (one line) when the file holds no readable case."""
  from fuzz.levels import LEVELS
  st = f.state
  if "error" in st: raise ReproducerError(f"{path}: the finding holds no case: {str(st['error'])[:200]}")
  if not st: raise ReproducerError(f"{path}: the finding's state is empty")
  if f.signature.level == "tensor":
    steps, data = st.get("max_steps", 6), st.get("data", "")
    if type(steps) is not int or not 1 <= steps <= MAX_TENSOR_STEPS or not isinstance(data, str) or \
       len(data) > 2 * MAX_TENSOR_BYTES:
      raise ReproducerError(f"{path}: the tensor case needs max_steps from 1 to {MAX_TENSOR_STEPS} and at most "
                            f"{MAX_TENSOR_BYTES} bytes of data")
  try: return LEVELS[f.signature.level]().from_state(st)
  except Exception as e:
    raise ReproducerError(f"{path}: the {f.signature.level} case cannot be read: {type(e).__name__}: {e}") from None

def load_findings(directory: str, skipped: list[str] | None = None) -> dict[str, Finding]:
  """Every finding in a directory, by signature id. A file that is not a reproducer is skipped with a warning, and its
  error appended to `skipped`."""
  out: dict[str, Finding] = {}
  if not os.path.isdir(directory): return out
  for name in sorted(os.listdir(directory)):
    if not name.endswith(".json"): continue
    try: f = read_reproducer(os.path.join(directory, name))
    except ReproducerError as e:
      print(f"warning: skipped {e}", file=sys.stderr)
      if skipped is not None: skipped.append(str(e))
      continue
    out[f.signature.id] = f
  return out

def now() -> float: return time.time()

__all__ = ["Signature", "Finding", "write_finding", "read_reproducer", "load_findings", "ReproducerError", "FORMAT",
           "replay_flags", "check_env", "current_env", "read_case"]
