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
the file. `replay(path)` checks the case again and says whether the same signature comes back.
"""
from __future__ import annotations
import hashlib, json, os, time
from dataclasses import dataclass, field, asdict
from typing import Any
from tinygrad.helpers import atomic_write

FORMAT = "tinygrad-fuzz-finding/1"
# the flags a reproducer records (and replays under)
ENV_FLAGS = ("SPEC", "IGNORE_OOB", "CPU_LLVM", "TRANSCENDENTAL", "DEVECTORIZE", "NOOPT", "NV_ARCH", "AMD_ARCH", "CC")

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
  """The flags of ENV_FLAGS as this process sees them (declared ContextVars)."""
  from tinygrad.helpers import ContextVar
  return {k: str(ContextVar._registry[k].value) for k in ENV_FLAGS if k in ContextVar._registry}

def write_finding(directory: str, f: Finding) -> str:
  """Write (or rewrite) the reproducer of `f` atomically; returns its path."""
  os.makedirs(directory, exist_ok=True)
  path = os.path.join(directory, f"{f.signature.id}.json")
  atomic_write(path, json.dumps(f.to_json(), indent=1, sort_keys=True) + "\n")
  return path

class ReproducerError(ValueError):
  """A reproducer file that is not one (wrong format, missing or ill-typed fields)."""

def read_reproducer(path: str) -> Finding:
  """A finding from its JSON file (no code is run: the graph stays text until a level parses it)."""
  try:
    with open(path) as fh: d = json.load(fh)
  except (OSError, json.JSONDecodeError) as e: raise ReproducerError(f"{path}: not a readable JSON file: {e}") from e
  if not isinstance(d, dict) or d.get("format") != FORMAT:
    raise ReproducerError(f"{path}: not a fuzz finding (format {d.get('format') if isinstance(d, dict) else None!r}, "
                          f"want {FORMAT!r})")
  try:
    sig = Signature(**{k: str(d["signature"][k]) for k in ("level", "stage", "kind", "site", "backend")})
    if not isinstance(d["state"], dict): raise TypeError("state must be an object")
    f = Finding(sig, d["state"], d.get("original") or d["state"], str(d.get("message", "")),
                [str(b) for b in d.get("backends", [])], int(d.get("size", 0)), int(d.get("original_size", 0)),
                int(d.get("count", 1)), float(d.get("first_seen", 0)), float(d.get("last_seen", 0)),
                str(d.get("input", "")), int(d.get("campaign_seed", 0)), bool(d.get("reduced", False)),
                {str(k): str(v) for k, v in (d.get("env") or {}).items()}, d.get("setup"))
  except (KeyError, TypeError, ValueError) as e: raise ReproducerError(f"{path}: malformed finding: {e}") from e
  return f

def load_findings(directory: str) -> dict[str, Finding]:
  """Every finding in a directory, by signature id (unreadable files are skipped with a warning)."""
  out: dict[str, Finding] = {}
  if not os.path.isdir(directory): return out
  for name in sorted(os.listdir(directory)):
    if not name.endswith(".json"): continue
    try: f = read_reproducer(os.path.join(directory, name))
    except ReproducerError as e:
      print(f"warning: {e}")
      continue
    out[f.signature.id] = f
  return out

def now() -> float: return time.time()

__all__ = ["Signature", "Finding", "write_finding", "read_reproducer", "load_findings", "ReproducerError", "FORMAT",
           "ENV_FLAGS", "current_env"]
