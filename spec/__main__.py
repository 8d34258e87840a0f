"""`python -m spec check FILE [--stage tensor|kernel|program|full]`: verify a pyrender file.
`python -m spec dump [--out DIR] -- prog.py [args]`: run a program and write the pyrender text of every graph it makes.

check: exit status 0 legal, 1 illegal (the SpecError is printed), 2 unreadable (a missing file, text outside
pyrender's grammar, a literal its dtype cannot hold). A text that evaluates to a list is a linear program and is checked
in list order; a UOp is checked over its toposort.

dump: the program runs in this process (it is your own program) with three of tinygrad's checkpoints
(tinygrad/uop/hooks.py) writing each graph once, as `spec check` reads it: DIR/NNNN-tensor.py (a tensor graph handed to
the scheduler), DIR/NNNN-kernel.py (a kernel's AST before codegen) and DIR/NNNN-program.py (a linearized program). Exit
status: the program's.
"""
from __future__ import annotations
import argparse, os, runpy, sys
from typing import Any, Callable, Sequence
from tinygrad.uop.ops import UOp

STAGES = ("tensor", "kernel", "program", "full")

CHECK_HELP = """Verify a graph written as pyrender text against the spec of one stage of the pipeline.

FILE is the text tinygrad.uop.pyrender.pyrender prints for a graph (lines `cN = ...` ending in `ast = ...`; a linear
program as `ast = [cA, cB, ...]`). Make one from a program with `python -m spec dump --out DIR -- prog.py` (one file
per tensor graph, kernel AST and linear program, named by stage), or in Python with
`open("k.py", "w").write(pyrender(uop))`. The text is read without running it (spec.roundtrip.eval_pyrender): anything
outside the printer's grammar, or a literal its dtype cannot hold, makes the file unreadable.

Exit status: 0 legal, 1 illegal (the error names the node, the rule and the stage), 2 unreadable."""

DUMP_HELP = """Run a Python program and write the pyrender text of every graph it makes, each once, as `spec check`
reads it: OUT/NNNN-tensor.py (a tensor graph handed to the scheduler; check with --stage tensor), OUT/NNNN-kernel.py
(a kernel's AST before codegen; --stage kernel) and OUT/NNNN-program.py (a linearized program; --stage program). The
program runs in this process, with its own arguments after `--`; `-- -m module args` runs a module. Exit status: the
program's (1 when it raises)."""

def load(path: str) -> UOp | list[UOp]:
  """The graph in a pyrender file; OSError / PyrenderSyntaxError (a ValueError) when it cannot be read."""
  from spec.roundtrip import eval_pyrender
  with open(path, encoding="utf-8") as f: text = f.read()
  return eval_pyrender(text)

def check(path: str, stage: str) -> int:
  from spec import SPECS, type_verify, SpecError
  try: graph = load(path)
  except (OSError, UnicodeDecodeError, ValueError, ImportError) as e:
    print(f"{path}: unreadable: {type(e).__name__}: {e}", file=sys.stderr)
    return 2
  n = len(graph) if isinstance(graph, list) else len(graph.toposort())
  try: type_verify(graph, SPECS[stage], stage)
  except SpecError as e:
    print(f"{path}: ILLEGAL at the {stage} stage\n{e}")
    return 1
  print(f"{path}: legal at the {stage} stage ({n} nodes checked)")
  return 0

class Dumper:
  """Writes each graph a checkpoint hands it to OUT, once, numbered in the order they come."""
  def __init__(self, out: str):
    self.out, self.n = out, 0
    self.seen: set[Any] = set()
    self.written: dict[str, int] = {}
    os.makedirs(out, exist_ok=True)
  def write(self, stage: str, graph: UOp | list[UOp]) -> None:
    from tinygrad.helpers import atomic_write
    from tinygrad.uop.pyrender import pyrender
    key = graph if isinstance(graph, UOp) else tuple(graph)
    if key in self.seen: return
    self.seen.add(key)
    atomic_write(os.path.join(self.out, f"{self.n:04d}-{stage}.py"), pyrender(graph))
    self.n += 1
    self.written[stage] = self.written.get(stage, 0) + 1
  def tensor_graph(self, sink: UOp) -> None: self.write("tensor", sink)
  def kernel_ast(self, ast: UOp) -> None: self.write("kernel", ast)
  def program(self, ast: UOp, uops: list[UOp], renderer: Any) -> None: self.write("program", list(uops))

def dump(out: str, argv: list[str]) -> int:
  from tinygrad.uop import hooks
  if not argv: raise SystemExit("python -m spec dump: give the program after --: python -m spec dump -- prog.py")
  d = Dumper(out)
  cbs: dict[str, Callable[..., None]] = {"tensor_graph": d.tensor_graph, "kernel_ast": d.kernel_ast,
                                         "program": d.program}
  for name, fn in cbs.items(): hooks.register(name, fn)
  saved = sys.argv[:]
  rc = 0
  try:
    if argv[0] == "-m" and len(argv) > 1:
      sys.argv = argv[1:]
      runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
      sys.argv = argv[:]
      runpy.run_path(argv[0], run_name="__main__")
  except SystemExit as e: rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
  except Exception:
    import traceback
    traceback.print_exc()
    rc = 1
  finally:
    sys.argv = saved
    for name, fn in cbs.items(): hooks.unregister(name, fn)
  counts = ", ".join(f"{n} {s}" for s, n in d.written.items()) or "no graphs"
  print(f"spec dump: wrote {counts} to {out}/ (check one with: python -m spec check FILE --stage STAGE)",
        file=sys.stderr)
  return rc

def main(argv: Sequence[str] | None = None) -> int:
  args = list(sys.argv[1:] if argv is None else argv)
  rest: list[str] = []
  if "--" in args: args, rest = args[:args.index("--")], args[args.index("--") + 1:]
  ap = argparse.ArgumentParser(prog="python -m spec", description="Check graphs against the stage specs.")
  sub = ap.add_subparsers(dest="cmd", required=True)
  c = sub.add_parser("check", help="verify a pyrender file against a stage's spec", description=CHECK_HELP,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
  c.add_argument("file", help="pyrender text of a graph (see above for how to make one)")
  c.add_argument("--stage", choices=STAGES, default="full", help="which spec to check against (default: full, every "
                 "node that may exist at any stage)")
  d = sub.add_parser("dump", help="run a program, writing the pyrender text of every graph it makes",
                     description=DUMP_HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
                     usage="python -m spec dump [--out DIR] -- prog.py [args] | -- -m module [args]")
  d.add_argument("--out", default="spec_dump", help="directory for the files (default: spec_dump)")
  a = ap.parse_args(args)
  if a.cmd == "dump": return dump(a.out, rest)
  if rest: ap.error(f"unexpected arguments after --: {' '.join(rest)}")
  return check(a.file, a.stage)

if __name__ == "__main__": sys.exit(main())
