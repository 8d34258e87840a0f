"""Named checkpoints the harness (spec/, replay/, fuzz/) plugs into. tinygrad never imports the harness by name.

A checkpoint is a module-level list of callbacks. Every call site in the compiler has one form,
`if hooks.name:` then `for fn in hooks.name: fn(...)`: nothing is built for a checkpoint with nothing registered (one
attribute load and one branch), and a registered one costs no lookup by name.

Checkpoints, with the arguments each callback receives:
  uop_created(u)                        every new UOp, right after hash-consing created it
  tensor_graph(sink)                    the tensor graph handed to the scheduler
  device_graph(sink)                    a tensor graph with tensors on several devices, lowered to one graph per device
                                        (tinygrad/schedule/multi.py): every node on one device, transfers as COPYs
  kernel_graph(sink)                    the graph after rangeify: KERNEL nodes over BUFFERs
  kernel_ast(ast)                       each kernel's AST (a SINK) before codegen; a copy between devices too
                                        (SINK(COPY), realize.is_transfer), which has no codegen
  program(ast, uops, renderer)          each linearized program (the list after line_rewrite), BEAM candidates too
  compiling(ast, renderer, opts)        get_program starts on `ast` with the opts its caller gave (None: it chooses
                                        them); `compiled` ends it
  compiled(ast, program_spec, renderer) once per program that is used: get_program's result, after the opts were
                                        chosen (its applied_opts, renderer identity and source are final)
  beam_candidate(ast, program_spec, renderer)
                                        each program BEAM compiles to time it (never `compiled`: the winner is
                                        compiled again by get_program and fires `compiled` there)
  rewrite_start(rewriter, root)         each graph_rewrite (and graph_rewrite_map) about to run: `rewriter` is the
                                        ops._Rewriter (name, pm, bottom_up); a callback may set `rewriter.apply` to a
                                        wrapper (the viewer's recorder does), so an empty checkpoint costs nothing
                                        per step
  rewrite_done(name, before, after)     each named graph_rewrite that ran (only when registered)
  launched(runner, bufs, start, seconds) each launch, after it ran (PROFILE=1 registers it: launches then wait for the
                                        kernel, and `seconds` is its time; `start` is time.perf_counter() before it)

`ast` is the kernel AST as the scheduler made it; `renderer` the Renderer (its `identity` names it across processes).
"""
from __future__ import annotations
import importlib.metadata, sys
from typing import Any, Callable

uop_created: list[Callable[..., Any]] = []
tensor_graph: list[Callable[..., Any]] = []
device_graph: list[Callable[..., Any]] = []
kernel_graph: list[Callable[..., Any]] = []
kernel_ast: list[Callable[..., Any]] = []
program: list[Callable[..., Any]] = []
compiling: list[Callable[..., Any]] = []
compiled: list[Callable[..., Any]] = []
beam_candidate: list[Callable[..., Any]] = []
rewrite_start: list[Callable[..., Any]] = []
rewrite_done: list[Callable[..., Any]] = []
launched: list[Callable[..., Any]] = []

# name -> its list: every list above (a checkpoint is named once, where it is defined)
CHECKPOINTS: dict[str, list[Callable[..., Any]]] = {k: v for k, v in globals().items()
                                                    if type(v) is list and not k.startswith("_")}

def _list(name: str) -> list[Callable[..., Any]]:
  if (lst := CHECKPOINTS.get(name)) is None:
    raise KeyError(f"unknown checkpoint {name!r}; checkpoints are {tuple(CHECKPOINTS)}")
  return lst

def register(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
  """Call `fn` at checkpoint `name`. Registering the same function twice is a no-op. Returns `fn`."""
  lst = _list(name)
  if fn not in lst: lst.append(fn)
  return fn

def unregister(name: str, fn: Callable[..., Any]) -> None:
  lst = _list(name)
  if fn in lst: lst.remove(fn)

def fire(name: str, *args: Any) -> None:
  for fn in list(_list(name)): fn(*args)

# ---- plugins ----

PLUGIN_GROUP = "tinygrad.plugins"
loaded_plugins: dict[str, Any] = {}

def load_plugins() -> dict[str, Any]:
  """Load every entry point of the `tinygrad.plugins` group and call it;
  each plugin decides from the env flags what to register."""
  for ep in importlib.metadata.entry_points(group=PLUGIN_GROUP):
    if ep.name in loaded_plugins: continue
    # NOTE: a broken plugin must not take the compiler down with it: say which and why, and go on without it
    try:
      install = ep.load()
      loaded_plugins[ep.name] = install() if callable(install) else install
    except Exception as e:
      print(f"tinygrad: plugin {ep.name!r} ({ep.value}) failed to load: {type(e).__name__}: {e}", file=sys.stderr)
  return loaded_plugins
