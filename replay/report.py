"""The HTML report of a diff: one self-contained page (no scripts, no external files), every record text escaped."""
from __future__ import annotations
import difflib, html
from replay.diff import Report, KERNEL_CLASSES, SCHEDULE_CLASSES

CSS = """body{font-family:sans-serif;margin:1em 2em}
table.diff{font-family:monospace;font-size:12px;border-collapse:collapse}
td{vertical-align:top;padding:0 4px}.diff_add{background:#cfc}.diff_chg{background:#ffa}.diff_sub{background:#fcc}
.diff_header{background:#eee;color:#888}pre{background:#f6f6f6;padding:6px;overflow:auto;max-height:40em}
.c-changed,.c-failed,.c-bad{color:#b00}.c-same{color:#06a}.c-incompatible{color:#a60}h3{margin-bottom:.2em}"""

def _cls(c: str) -> str: return "c-" + c.split()[0]

def render_html(rep: Report, max_lines: int = 4000) -> str:
  """The page: the run, the mode, counts per class, then every kernel/schedule that is not unchanged with its detail and
  a side-by-side diff of the old and new text (a failure: the error and the kernel's pyrender text)."""
  e = html.escape
  out = [f"<!doctype html><html><head><meta charset='utf-8'><title>replay diff {e(rep.run_id)}</title>",
         f"<style>{CSS}</style></head><body><h1>replay diff</h1>",
         f"<p>run <b>{e(rep.run_id)}</b>, captured at commit <code>{e(rep.git_commit)}</code>, database "
         f"<code>{e(rep.db)}</code></p><p>mode: <b>{e(rep.mode)}</b>"
         + (f"; target <b>{e(rep.target)}</b>" if rep.target else "") + "</p>"]
  if rep.limit is not None and rep.limit < rep.total:
    out.append(f"<p><b>LIMITED: only the first {rep.limit} of {rep.total} records were diffed.</b></p>")
  for kind, classes in (("kernel", KERNEL_CLASSES), ("schedule", SCHEDULE_CLASSES)):
    c = rep.counts(kind)
    out.append(f"<h2>{kind}s</h2><table border=1 cellpadding=4><tr>" + "".join(f"<th>{e(k)}</th>" for k in classes) +
               "</tr><tr>" + "".join(f"<td>{c[k]}</td>" for k in classes) + "</tr></table>")
  if rep.capture_errors:
    out.append(f"<h2>capture errors ({len(rep.capture_errors)})</h2><ul>" +
               "".join(f"<li><code>{e(w)}</code>: {e(err)}</li>" for w, err in rep.capture_errors) + "</ul>")
  if rep.capture_skips:
    out.append(f"<h2>not captured ({sum(rep.capture_skips.values())})</h2><p>programs and schedules replay cannot "
               "make again as they were (test doubles, patched renderers, rules or tinygrad code)</p><ul>" +
               "".join(f"<li><code>{e(k)}</code>: {v}</li>" for k, v in rep.capture_skips.items()) + "</ul>")
  out.append("<h2>details</h2>")
  differ = difflib.HtmlDiff(wrapcolumn=100)
  for o in rep.outcomes:
    if o.cls == "unchanged": continue
    out.append(f"<h3 class='{_cls(o.cls)}'>{e(o.cls)}: {e(o.kind)} {e(o.name)} <small>(record {o.rid}"
               + (f", {e(o.target)}" if o.target else "") + f")</small></h3><p>{e(o.detail)}</p>")
    if o.cls in ("bad record", "incompatible") or not (o.old or o.new): continue
    if o.cls == "failed": out.append(f"<pre>{e(o.new[:200_000])}</pre>"); continue
    a, b = o.old.splitlines()[:max_lines], o.new.splitlines()[:max_lines]
    # NOTE: HtmlDiff escapes the text of the lines it shows (&, <, >)
    out.append(differ.make_table(a, b, "before", "now", context=True, numlines=4))
  out.append("</body></html>")
  return "\n".join(out)
