"""Every `python -m fuzz ...` and `python -m replay ...` command the docs, the README, the Makefile and the workflows
show runs: its `--help` exits 0 with a usage line, in a fresh interpreter as a user would start it. And every
subcommand the two CLIs have is documented somewhere."""
import concurrent.futures, pathlib, re, subprocess, sys
import pytest
from fuzz.__main__ import SUBCOMMANDS

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "README.md", ROOT / "Makefile", *sorted((ROOT / "docs").glob("*.md")),
           *sorted((ROOT / ".github" / "workflows").glob("*.yml")), *sorted((ROOT / "bench").glob("*.py")),
           *sorted((ROOT / "fuzz").rglob("*.py")), *sorted((ROOT / "replay").rglob("*.py"))]
COMMAND = re.compile(r"python3? -m ((?:fuzz|replay)(?:\.[a-z_]+)*)(?: ([a-z][a-z-]*))?")

def documented_commands() -> set[tuple[str, ...]]:
  """(module,) or (module, subcommand) for each command shown; a word after the module counts as a subcommand only where
  the module has subcommands (`python -m fuzz run`, not `python -m fuzz.gen.tensor_programs -n`)."""
  out: set[tuple[str, ...]] = set()
  for path in SOURCES:
    for mod, word in COMMAND.findall(path.read_text()):
      out.add((mod, word) if mod in ("fuzz", "replay") and word else (mod,))
  return out

def test_the_command_scan_finds_the_clis():
  cmds = documented_commands()
  assert {("fuzz", "run"), ("replay", "diff"), ("fuzz.gen.tensor_programs",)} <= cmds, sorted(cmds)

def test_every_subcommand_is_documented():
  cmds = documented_commands()
  missing = [f"python -m fuzz {s}" for s in SUBCOMMANDS if ("fuzz", s) not in cmds]
  missing += [f"python -m replay {s}" for s in ("capture", "diff", "runs") if ("replay", s) not in cmds]
  assert missing == []

def _help(cmd: tuple[str, ...]) -> tuple[tuple[str, ...], int, str]:
  r = subprocess.run([sys.executable, "-m", *cmd, "--help"], capture_output=True, text=True, timeout=120, cwd=ROOT)
  return cmd, r.returncode, r.stdout + r.stderr

def test_every_documented_command_has_help():
  cmds = sorted(documented_commands())
  unknown = [c for c in cmds if c[0] in ("fuzz", "replay") and len(c) > 1 and
             c[1] not in (SUBCOMMANDS if c[0] == "fuzz" else ("capture", "diff", "runs"))]
  assert unknown == [], f"documented subcommands the CLI does not have: {unknown}"
  with concurrent.futures.ThreadPoolExecutor(2) as ex: results = list(ex.map(_help, cmds))
  bad = {" ".join(c): f"exit {rc}: {out[-400:]}" for c, rc, out in results if rc != 0 or "usage:" not in out.lower()}
  assert bad == {}

@pytest.mark.parametrize("text,want", [
  ("run `python -m fuzz run --minutes 2` then", ("fuzz", "run")),
  ("python -m fuzz.gen.tensor_programs -n 10", ("fuzz.gen.tensor_programs",)),
  ("python -m replay.viz DB", ("replay.viz",)),
])
def test_command_pattern(text, want):
  mod, word = COMMAND.findall(text)[0]
  assert ((mod, word) if mod in ("fuzz", "replay") and word else (mod,)) == want
