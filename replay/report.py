"""The HTML report of a diff: one self-contained page (no scripts, no external files), every record text escaped."""
from __future__ import annotations
import difflib, html
from replay.diff import Report, KERNEL_CLASSES, SCHEDULE_CLASSES, OUTPUTS, OPTS_CLASSES

CSS = """body{font-family:sans-serif;margin:1em 2em}
table.diff{font-family:monospace;font-size:12px;border-collapse:collapse}
td{vertical-align:top;padding:0 4px}.diff_add{background:#cfc}.diff_chg{background:#ffa}.diff_sub{background:#fcc}
.diff_header{background:#eee;color:#888}pre{background:#f6f6f6;padding:6px;overflow:auto;max-height:40em}
.c-changed,.c-failed,.c-bad,.c-other,.c-opts,.c-schedule{color:#b00}.c-same{color:#06a}.c-incompatible{color:#a60}
h3{margin-bottom:.2em}"""

def _cls(c: str) -> str: return "c-" + c.split()[0].strip(",")

def render_html(rep: Report, max_lines: int = 4000) -> str:
  """The page: the headline (distinct kernels whose outputs differ), the run, the mode, counts per class, then every
  kernel/schedule that is not unchanged, grouped by kernel (the records of one AST), with its detail and a side-by-side
  diff of the old and new text (a failure: the error and the kernel's pyrender text); a kernel the heuristics give other
  opts now: both sets of opts side by side and the captured source against the one with the new opts."""
  e = html.escape
  out = [f"<!doctype html><html><head><meta charset='utf-8'><title>replay diff {e(rep.run_id)}</title>",
         f"<style>{CSS}</style></head><body><h1>replay diff</h1><p><b>{e(rep.headline())}</b></p>",
         f"<p>run <b>{e(rep.run_id)}</b>, captured at commit <code>{e(rep.git_commit)}</code>, database "
         f"<code>{e(rep.db)}</code></p><p>mode: <b>{e(rep.mode)}</b>"
         + (f"; target <b>{e(rep.target)}</b>" if rep.target else "") + "</p>"]
  if rep.limit is not None and rep.limit < rep.total:
    out.append(f"<p><b>LIMITED: only the first {rep.limit} of {rep.total} records were diffed.</b></p>")
  tables = [("kernels", KERNEL_CLASSES, rep.counts("kernel")),
            ("the changed kernels' outputs", OUTPUTS, rep.output_counts()),
            ("schedules", SCHEDULE_CLASSES, rep.counts("schedule"))]
  if rep.mode_key == "both":
    tables.insert(2, ("opts, the heuristics re-run", tuple(OPTS_CLASSES.values()),
                      {OPTS_CLASSES[k]: v for k, v in rep.opts_counts().items()}))
  for title, classes, c in tables:
    out.append(f"<h2>{e(title)}</h2><table border=1 cellpadding=4><tr>" + "".join(f"<th>{e(k)}</th>" for k in classes)
               + "</tr><tr>" + "".join(f"<td>{c[k]}</td>" for k in classes) + "</tr></table>")
  if rep.capture_errors:
    out.append(f"<h2>capture errors ({len(rep.capture_errors)})</h2><ul>" +
               "".join(f"<li><code>{e(w)}</code>: {e(err)}</li>" for w, err in rep.capture_errors) + "</ul>")
  if rep.capture_skips:
    out.append(f"<h2>not captured ({sum(rep.capture_skips.values())})</h2><p>programs and schedules replay cannot "
               "make again as they were (test doubles, patched renderers, rules or tinygrad code)</p><ul>" +
               "".join(f"<li><code>{e(k)}</code>: {v}</li>" for k, v in rep.capture_skips.items()) + "</ul>")
  differ = difflib.HtmlDiff(wrapcolumn=100)
  def side_by_side(a: str, b: str, left: str, right: str) -> str:
    # NOTE: HtmlDiff escapes the text of the lines it shows (&, <, >)
    return differ.make_table(a.splitlines()[:max_lines], b.splitlines()[:max_lines], left, right, context=True,
                             numlines=4)
  for label, outs in rep.sections():
    groups = rep.groups(outs)
    out.append(f"<h2 class='{_cls(label)}'>{e(label)}: {len(groups)} kernel(s), {len(outs)} record(s)</h2>"
               if outs[0].kind == "kernel" else f"<h2 class='{_cls(label)}'>{e(label)}: {len(outs)}</h2>")
    for recs in groups.values():
      o = recs[0]
      ids = ", ".join(str(r.rid) for r in recs)
      out.append(f"<h3 class='{_cls(label)}'>{e(o.kind)} {e(o.name)} <small>(record{'s' if len(recs) > 1 else ''} "
                 f"{e(ids)}" + (f", {e(', '.join(sorted({r.target for r in recs if r.target})))}" if o.target else "")
                 + ")</small></h3>")
      if label in ("other opts now", "opts failed"):
        out.append(f"<table border=1 cellpadding=4><tr><th>captured opts</th><th>the heuristics now</th></tr><tr><td>"
                   f"<code>{e(o.opts_old)}</code></td><td><code>{e(o.opts_new)}</code></td></tr></table>"
                   f"<p>{e(o.opts_detail)}</p>")
        if o.opts_src: out.append(side_by_side(o.old, o.opts_src, "captured", "with the new opts"))
        continue
      out.append(f"<p>{e(o.detail)}</p>")
      if o.viz: out.append("<p class='viz'>in the viewer, old and new side by side at the first pass where they "
                           f"differ: <code>{e(o.viz)}</code></p>")
      if o.cls in ("bad record", "incompatible") or not (o.old or o.new): continue
      if o.cls == "failed": out.append(f"<pre>{e(o.new[:200_000])}</pre>")
      else: out.append(side_by_side(o.old, o.new, "before", "now"))
  out.append("</body></html>")
  return "\n".join(out)
