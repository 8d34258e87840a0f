"""The viewer of what the compiler did: VIZ=1 records every graph_rewrite step and every kernel's passes into a trace
(trace.py), PROFILE=1 every launch; `python -m tinygrad.viz TRACE [TRACE]` serves the page (server.py). docs/viz.md."""
