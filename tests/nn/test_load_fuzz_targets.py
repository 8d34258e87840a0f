"""The atheris targets of the checkpoint readers (fuzz/targets/load_*_target.py, driver load_common.py): their seeds are
valid files that our readers load as the formats' own readers do, the audit hook refuses and reports a write, a
process and a library load, the memory cap turns a blow-up into a MemoryError, and a planted misbehaving reader is
reported by libFuzzer as a crash or a timeout with its input kept. `make fuzz-loaders` runs the real targets."""
import json, os, subprocess, sys
import numpy as np
import pytest
from fuzz.targets.load_common import SEEDS, LOADERS

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

def _seeds(fmt: str) -> list[str]:
  d = os.path.join(SEEDS, f"load_{fmt}")
  return [os.path.join(d, n) for n in sorted(os.listdir(d))]

def test_torch_seeds_load_as_torch_loads_them():
  import torch
  from tinygrad.nn.state import torch_load
  def flat(x, p=""):
    if isinstance(x, dict): return {k2: v2 for k, v in x.items() for k2, v2 in flat(v, f"{p}{k}.").items()}
    if isinstance(x, (list, tuple)): return {k2: v2 for i, v in enumerate(x) for k2, v2 in flat(v, f"{p}{i}.").items()}
    return {p: x}
  assert len(_seeds("torch")) >= 4
  for fn in _seeds("torch"):
    ours, ref = flat(torch_load(fn, device="PYTHON")), flat(torch.load(fn, weights_only=True) if "deflated" not in fn else
                                           torch.load(fn.replace("deflated", "state_dict"), weights_only=True))
    assert ours.keys() == ref.keys(), fn
    for k, v in ref.items():
      if not isinstance(v, torch.Tensor):
        assert ours[k] == v, (fn, k)
        continue
      want = v.detach().float().numpy() if v.dtype in (torch.bfloat16, torch.float8_e4m3fn) else v.detach().numpy()
      np.testing.assert_array_equal(ours[k].numpy(), want, err_msg=f"{fn} {k}")

def test_gguf_and_safetensors_seeds_load():
  gguf = pytest.importorskip("gguf")
  from tinygrad.nn.state import safe_load
  from tinygrad.nn.gguf import gguf_load
  for fn in _seeds("gguf"):
    kv, ts = gguf_load(fn)
    ref = gguf.GGUFReader(fn)
    assert kv["llama.block_count"] == 1 and kv["tokenizer.ggml.tokens"] == ["<s>", "a", "b"]
    for t in ref.tensors:
      want = gguf.quants.dequantize(t.data, t.tensor_type).reshape(ts[t.name].shape)
      np.testing.assert_allclose(ts[t.name].numpy().astype(np.float32), want.astype(np.float32), err_msg=t.name)
  for fn in _seeds("safetensors"): assert safe_load(fn)

_AUDIT = r'''
import ctypes, os, subprocess, sys
import numpy as np
from fuzz.targets.load_common import Audit, LoaderFinding, cap_memory, make_check
import tinygrad.nn.state as state
real, current = state.safe_load, [lambda: None]
state.safe_load = lambda data, **kw: (current[0](), real(data, **kw))[1]
audit = Audit()
check = make_check("safetensors", audit, realize=True)
check(open(sys.argv[2], "rb").read())
sys.addaudithook(audit)
acts = {"write": lambda: open(sys.argv[1], "w"), "os.open": lambda: os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT),
        "process": lambda: subprocess.run(["true"]), "system": lambda: os.system("true"),
        "library": lambda: ctypes.CDLL("libm.so.6"), "bad": lambda: bytes(4).decode("ascii") and int("x"),
        "checkpoint": lambda: real(b"not a safetensors file")}
for name, act in acts.items():
  current[0] = act
  try: check(open(sys.argv[2], "rb").read()); print(name, "ok")
  except LoaderFinding as e: print(name, "finding", str(e)[:200].replace("\n", " "))
  except Exception as e: print(name, "raised", type(e).__name__)
print("written", os.path.exists(sys.argv[1]))
audit.active = False
print("cap", cap_memory(256))
try: np.ones(1 << 30, np.uint8); print("memory ok")
except MemoryError: print("memory MemoryError")
'''

def test_audit_hook_refuses_and_reports_writes_processes_and_libraries(tmp_path):
  out = subprocess.run([sys.executable, "-c", _AUDIT, str(tmp_path / "planted"), _seeds("safetensors")[0]], cwd=REPO,
                       capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": REPO})
  lines = dict(ln.split(" ", 1) for ln in out.stdout.splitlines())
  assert out.returncode == 0, out.stderr[-3000:]
  for name in ("write", "os.open", "process", "system", "library"):
    assert lines[name].startswith("finding safe_load did what no file may make it do"), (name, lines[name])
  assert "open(" in lines["write"] and "subprocess.Popen" in lines["process"] and "ctypes.dlopen" in lines["library"]
  assert lines["bad"] == "raised ValueError" and lines["checkpoint"] == "ok"
  assert lines["written"] == "False", "the hook refuses the write, so the file is never created"
  assert lines["cap"].startswith("RLIMIT_AS") and lines["memory"] == "MemoryError"

def test_planted_misbehaving_readers_are_findings_with_their_inputs(tmp_path):
  planted = tmp_path / "planted"
  out = subprocess.run([sys.executable, os.path.join(REPO, "fuzz", "targets", "load_common.py"), "--seconds", "120",
                        "--out", str(tmp_path / "out"), "--setup=tests.nn.planted_loaders:misbehave", "-timeout=10"],
                       cwd=REPO, capture_output=True, text=True, timeout=600,
                       env={**os.environ, "PYTHONPATH": REPO, "PLANTED_FILE": str(planted)})
  assert out.returncode == 1, out.stdout + out.stderr[-3000:]
  got = {r["target"]: r for r in map(json.loads, (ln for ln in out.stdout.splitlines() if ln.startswith("{")))}
  assert set(got) == {f"load_{f}" for f in LOADERS}
  kinds = {t: [a.split("-")[1] for a in r["findings"]] for t, r in got.items()}
  logs = {t: (tmp_path / "out" / f"{t}.log").read_text() for t in got}
  assert kinds == {"load_safetensors": ["crash"], "load_torch": ["timeout"], "load_gguf": ["crash"]}, \
    {t: logs[t][-2000:] for t in got}
  assert "ValueError: planted" in logs["load_safetensors"]
  assert 'LoaderFinding: gguf_load did what no file may make it do: ["open(' in logs["load_gguf"]
  assert not planted.exists(), "the hook refused the write"
  for t, r in got.items(): assert f"Test unit written to {tmp_path / 'out' / r['findings'][0]}" in logs[t]
