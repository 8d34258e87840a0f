"""`python -m replay capture` owns the command it runs: a SIGINT or SIGTERM to it ends the whole command (its process
group: pytest-xdist workers too), so nothing goes on writing into the database; a run id in use is refused."""
import os, pathlib, signal, subprocess, sys, time
import pytest
from replay.db import DB

ROOT = pathlib.Path(__file__).resolve().parents[2]

def _env(db):
  e = {k: v for k, v in os.environ.items() if k not in ("CAPTURE_PROCESS_REPLAY", "REPLAY_RUN", "REPLAY_DB")}
  return {**e, "REPLAY_DB": str(db), "SPEC": "0"}

def _alive(pid: int) -> bool:
  try:
    with open(f"/proc/{pid}/stat") as f: return f.read().rsplit(")", 1)[1].split()[0] != "Z"
  except FileNotFoundError: return False

# the captured command: a worker that compiles a new kernel every 50 ms (each one a record), and a grandchild of it
COMMAND = """
import os, subprocess, sys, time
from tinygrad import Tensor
from tinygrad.codegen import get_program
from tinygrad.renderer.cstyle import CRenderer
d = sys.argv[1]
g = subprocess.Popen([sys.executable, "-c", "import time\\nwhile True: time.sleep(0.1)"])
open(os.path.join(d, "pids.tmp"), "w").write(f"{os.getpid()} {g.pid}")
os.rename(os.path.join(d, "pids.tmp"), os.path.join(d, "pids"))
n = 1
while True:
  for it in (Tensor.arange(n).float() * 3).schedule(): get_program(it.ast, CRenderer(1))
  n += 1
  time.sleep(0.05)
"""

@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_the_capture_ends_the_command_and_its_children(tmp_path, sig):
  db = tmp_path / "k.db"
  cap = subprocess.Popen([sys.executable, "-m", "replay", "capture", "--run", "k", "--", sys.executable, "-c", COMMAND,
                          str(tmp_path)], cwd=ROOT, env=_env(db), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
  try:
    deadline = time.monotonic() + 120
    while not (tmp_path / "pids").exists() or DB(str(db), create=False).count("k", "kernel") < 2:
      assert cap.poll() is None and time.monotonic() < deadline, cap.communicate()
      time.sleep(0.1)
    worker, grandchild = map(int, (tmp_path / "pids").read_text().split())
    cap.send_signal(sig)
    _, err = cap.communicate(timeout=60)
    assert cap.returncode == 128 + sig, (cap.returncode, err[-2000:])
    assert f"replay capture: {signal.Signals(sig).name}" in err and "ended the command" in err, err[-2000:]
    time.sleep(0.5)
    assert not _alive(worker) and not _alive(grandchild)
    n = DB(str(db), create=False).count("k", "kernel")
    time.sleep(1)
    assert DB(str(db), create=False).count("k", "kernel") == n >= 2
  finally:
    if cap.poll() is None: cap.kill()
    if (tmp_path / "pids").exists():
      for pid in map(int, (tmp_path / "pids").read_text().split()):
        if _alive(pid): os.kill(pid, signal.SIGKILL)

def test_a_run_id_in_use_is_refused_and_the_command_not_run(tmp_path):
  db, mark = tmp_path / "r.db", tmp_path / "ran"
  cmd = [sys.executable, "-m", "replay", "capture", "--run", "same", "--", sys.executable, "-c",
         f"open({str(mark)!r}, 'a').write('x')"]
  first = subprocess.run(cmd, cwd=ROOT, env=_env(db), capture_output=True, text=True, timeout=300)
  assert first.returncode == 0 and mark.read_text() == "x", first.stderr[-2000:]
  again = subprocess.run(cmd, cwd=ROOT, env=_env(db), capture_output=True, text=True, timeout=300)
  assert again.returncode == 2 and mark.read_text() == "x", again.stderr[-2000:]
  assert "run same is in" in again.stderr and "choose another --run" in again.stderr, again.stderr[-2000:]
