"""`python -m fuzz report DIR`: a campaign directory as DIR/report.html (one self-contained page: inline CSS and SVG,
no scripts, every text from the campaign HTML-escaped) and DIR/report.md (the same in markdown).

Sections: the configuration and the backends (with the reason any was not run); totals (cases, rate, crashes, hangs,
worker restarts); the rate, rule coverage and findings over time (stats.json); findings per backend; every finding
(signature, count, when, size found -> reduced, message, the reduced case and the command that replays it); and the
rule-hit coverage (TRACK_MATCH_STATS: rules that matched at least once, per rewrite pass, of those that were tried).
"""
from __future__ import annotations
import html, json, os, re, time
from typing import Any, Callable
from tinygrad.helpers import atomic_write
from fuzz.findings import load_findings, Finding

class ReportError(ValueError):
  """A campaign directory the report cannot read: names the file and what is wrong, in one line."""

_NUM = (int, float)
# the fields of campaign.json and of each stats.json sample the report reads, and their types
META_FIELDS: dict[str, type | tuple[type, ...]] = {
  "config": dict, "backends": dict, "missing": dict, "seconds": _NUM, "cases": int, "rules_matched": list,
  "rules_tried": int, "corpus": int, "crashes": int, "hangs": int, "restarts": int, "losses": int}
SAMPLE_FIELDS: dict[str, type | tuple[type, ...]] = {"t": _NUM, "cases": int, "rules": int, "findings": int}

def _is(v: Any, t: type | tuple[type, ...]) -> bool:
  # NOTE: JSON's true and false read as bools, which Python counts as ints
  return isinstance(v, t) and not (type(v) is bool and t is not bool)

def _why_meta(d: Any) -> str | None:
  if not isinstance(d, dict): return f"must be an object, not {type(d).__name__}"
  for k, t in META_FIELDS.items():
    if k in d and not _is(d[k], t):
      return f"{k} must be {getattr(t, '__name__', 'a number')}, not {type(d[k]).__name__}"
  for k in ("backends", "missing"):
    if not all(isinstance(x, str) for x in d.get(k, {}).values()): return f"{k} must map names to text"
  if not all(isinstance(x, str) for x in d.get("rules_matched", [])): return "rules_matched must be a list of names"
  return None

def _why_timeline(d: Any) -> str | None:
  if not isinstance(d, list): return f"must be a list of samples, not {type(d).__name__}"
  for i, smp in enumerate(d):
    if not isinstance(smp, dict): return f"sample {i} must be an object, not {type(smp).__name__}"
    for k, t in SAMPLE_FIELDS.items():
      if not _is(smp.get(k), t): return f"sample {i}: {k} must be {getattr(t, '__name__', 'a number')}"
  return None

def _load(path: str, default: Any, why: Callable[[Any], str | None]) -> Any:
  """The JSON in `path` (`default` when there is no such file); ReportError when it is not what `why` accepts."""
  if not os.path.exists(path): return default
  try:
    with open(path, encoding="utf-8") as f: d = json.load(f)
  except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
    raise ReportError(f"{path}: not readable JSON: {type(e).__name__}: {e}") from None
  if (problem := why(d)) is not None: raise ReportError(f"{path}: not a campaign record: {problem}")
  return d

def _when(t: float) -> str: return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else "?"

def _rates(timeline: list[dict[str, Any]], step: int = 1) -> list[tuple[float, float]]:
  """(t, cases/s over the `step` samples before t). NOTE: workers report a batch at a time, so the rate between two
  neighbouring samples (5 s apart) swings between 0 and a burst: a table row averages over the rows it stands for."""
  out = []
  for a, b in zip(timeline, timeline[step:]):
    if (dt := b["t"] - a["t"]) > 0: out.append((b["t"], (b["cases"] - a["cases"]) / dt))
  return out

def svg_chart(series: list[tuple[float, float]], title: str, w: int = 520, h: int = 140) -> str:
  """A line chart as inline SVG (numbers only: nothing to escape but the title)."""
  if not series: return f"<p>{html.escape(title)}: no samples</p>"
  xs, ys = [p[0] for p in series], [p[1] for p in series]
  x0, x1, y1 = min(xs), max(xs) or 1.0, max(ys) or 1.0
  def px(x: float) -> float: return 40 + (x - x0) / ((x1 - x0) or 1.0) * (w - 50)
  def py(y: float) -> float: return h - 20 - y / y1 * (h - 35)
  pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in series)
  return (f'<figure><svg width="{w}" height="{h}" role="img"><rect width="{w}" height="{h}" fill="#fafafa"/>'
          f'<polyline fill="none" stroke="#2a6" stroke-width="2" points="{pts}"/>'
          f'<text x="4" y="14" font-size="11">{y1:.3g}</text><text x="4" y="{h - 6}" font-size="11">0</text>'
          f'<text x="{w - 60}" y="{h - 6}" font-size="11">{x1:.0f} s</text></svg>'
          f"<figcaption>{html.escape(title)}</figcaption></figure>")

def rules_by_pass(rules: list[str]) -> dict[str, list[str]]:
  out: dict[str, list[str]] = {}
  for r in rules:
    p, _, name = r.partition("::")
    out.setdefault(p, []).append(name)
  return out

def replay_command(path: str, f: Finding) -> str:
  return f"python -m fuzz repro {path}" + (f" --setup {f.setup}" if f.setup else "")

def _levels(meta: dict[str, Any]) -> str:
  """The levels fuzzed, each with its cases and worker-seconds where the record has them."""
  cfg, per = meta.get("config", {}), meta.get("levels", {})
  names = cfg.get("levels") or ([cfg["level"]] if "level" in cfg else [])
  if not isinstance(names, list): return "?"
  return ", ".join(f"{n} ({per[n].get('cases', '?')} cases, {per[n].get('seconds', '?')} worker-s)"
                   if isinstance(per.get(n), dict) else str(n) for n in names) or "?"

def _findings_sorted(findings: dict[str, Finding]) -> list[Finding]:
  return sorted(findings.values(), key=lambda f: (-f.count, f.first_seen))

def _fenced(text: str, lang: str) -> list[str]:
  """`text` as a markdown code block whose fence is longer than any run of backticks in it."""
  runs = [len(r) for r in re.findall(r"`+", text)]
  fence = "`" * max(3, max(runs, default=0) + 1)
  return [fence + lang, text, fence]

def _md_line(text: str) -> str: return " ".join(text.split())

def render_markdown(d: str, meta: dict[str, Any], timeline: list[dict[str, Any]], findings: dict[str, Finding]) -> str:
  cfg = meta.get("config", {})
  lines = [f"# Fuzz campaign {d}", "",
           f"levels {_levels(meta)}, seed {cfg.get('seed', '?')}, {cfg.get('jobs', '?')} worker(s), "
           f"{cfg.get('minutes', '?')} min, SPEC={cfg.get('spec', '?')}"
           f"{', bounds proved' if cfg.get('bounds') else ''}",
           "", "## Backends", ""]
  lines += [f"- {desc}" for desc in meta.get("backends", {}).values()]
  lines += [f"- **{n}: not run**: {why}" for n, why in meta.get("missing", {}).items()]
  secs = meta.get("seconds", 0) or 0
  lines += ["", "## Totals", "", f"- {meta.get('cases', 0)} cases in {secs:.0f} s "
            f"({meta.get('cases', 0) / secs if secs else 0:.1f}/s)",
            f"- rules matched {len(meta.get('rules_matched', []))} of {meta.get('rules_tried', 0)} tried",
            f"- corpus {meta.get('corpus', 0)}, crashes {meta.get('crashes', 0)}, hangs {meta.get('hangs', 0)}, "
            f"worker restarts {meta.get('restarts', 0)}", "", "## Rate over time", "",
            "| s | cases | cases/s | rules | findings |", "|---|---|---|---|---|"]
  step = max(1, len(timeline) // 20)
  rows = timeline[::step] + ([timeline[-1]] if timeline and (len(timeline) - 1) % step else [])
  rates = dict(_rates(rows))
  for s in rows:
    lines.append(f"| {s['t']:.0f} | {s['cases']} | {rates.get(s['t'], 0):.1f} | {s['rules']} | {s['findings']} |")
  per: dict[str, tuple[int, int]] = {}
  for f in findings.values():
    a, b = per.get(f.signature.backend, (0, 0))
    per[f.signature.backend] = (a + 1, b + f.count)
  lines += ["", "## Findings per backend", "", "| backend | findings | occurrences |", "|---|---|---|"]
  lines += [f"| {b} | {n} | {c} |" for b, (n, c) in sorted(per.items())]
  lines += ["", f"## Findings ({len(findings)})", ""]
  for f in _findings_sorted(findings):
    path = os.path.join(d, "findings", f"{f.signature.id}.json")
    case = str(f.state.get("graph") or f.state.get("program") or json.dumps(f.state))[:4000]
    # NOTE: the message holds the oracle's counterexample (the first differing element, the z3 model): all of it, as
    # the HTML page shows it
    lines += [f"### `{f.signature.id}` {f.signature} (x{f.count})", "",
              f"first seen {_when(f.first_seen)}, last {_when(f.last_seen)}; size {f.original_size} -> {f.size}"
              f"{'' if f.reduced else ' (not reduced)'}; `{replay_command(path, f)}`", "",
              *([f"in the viewer, at the failing pass: `{meta['viz'][f.signature.id]}`", ""]
                if f.signature.id in meta.get("viz", {}) else []),
              *_fenced(f.message[:3000], ""), "", *_fenced(case, "python"), ""]
  if (skipped := meta.get("skipped")):
    lines += [f"## Finding files skipped ({len(skipped)})", "", *[f"- {_md_line(x)}" for x in skipped], ""]
  lines += ["## Rule-hit coverage", ""]
  for p, rs in sorted(rules_by_pass(meta.get("rules_matched", [])).items()):
    lines.append(f"- `{p}`: {len(rs)} rules matched")
  return "\n".join(lines) + "\n"

CSS = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}table{border-collapse:collapse}"
       "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}pre{background:#f4f4f4;"
       "padding:8px;overflow-x:auto;max-height:400px}.bad{color:#b00}figure{display:inline-block;margin:4px}")

def render_html(d: str, meta: dict[str, Any], timeline: list[dict[str, Any]], findings: dict[str, Finding]) -> str:
  e = html.escape
  cfg = meta.get("config", {})
  secs = meta.get("seconds", 0) or 0
  parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>fuzz campaign {e(d)}</title>"
           f"<style>{CSS}</style></head><body><h1>Fuzz campaign <code>{e(d)}</code></h1>",
           f"<p>levels <b>{e(_levels(meta))}</b>, seed {e(str(cfg.get('seed', '?')))}, "
           f"{e(str(cfg.get('jobs', '?')))} worker(s), {e(str(cfg.get('minutes', '?')))} min, "
           f"SPEC={e(str(cfg.get('spec', '?')))}</p><h2>Backends</h2><ul>"]
  parts += [f"<li>{e(desc)}</li>" for desc in meta.get("backends", {}).values()]
  parts += [f"<li class='bad'><b>{e(n)}: not run</b>: {e(why)}</li>" for n, why in meta.get("missing", {}).items()]
  parts.append("</ul><h2>Totals</h2><table>")
  totals = [("cases", meta.get("cases", 0)), ("seconds", f"{secs:.0f}"),
            ("cases/s", f"{meta.get('cases', 0) / secs if secs else 0:.1f}"),
            ("rules matched / tried", f"{len(meta.get('rules_matched', []))} / {meta.get('rules_tried', 0)}"),
            ("corpus", meta.get("corpus", 0)), ("crashes", meta.get("crashes", 0)), ("hangs", meta.get("hangs", 0)),
            ("worker restarts", meta.get("restarts", 0)), ("findings", len(findings))]
  parts += [f"<tr><th>{e(k)}</th><td>{e(str(v))}</td></tr>" for k, v in totals]
  parts.append("</table><h2>Over time</h2>")
  parts.append(svg_chart(_rates(timeline, max(1, len(timeline) // 50)), "cases per second"))
  parts.append(svg_chart([(s["t"], s["rules"]) for s in timeline], "rules matched"))
  parts.append(svg_chart([(s["t"], s["findings"]) for s in timeline], "distinct findings"))
  per: dict[str, tuple[int, int]] = {}
  for f in findings.values():
    a, b = per.get(f.signature.backend, (0, 0))
    per[f.signature.backend] = (a + 1, b + f.count)
  parts.append("<h2>Findings per backend</h2><table><tr><th>backend</th><th>findings</th><th>occurrences</th></tr>")
  parts += [f"<tr><td>{e(b)}</td><td>{n}</td><td>{c}</td></tr>" for b, (n, c) in sorted(per.items())]
  parts.append(f"</table><h2>Findings ({len(findings)})</h2>")
  for f in _findings_sorted(findings):
    path = os.path.join(d, "findings", f"{f.signature.id}.json")
    case = str(f.state.get("graph") or f.state.get("program") or json.dumps(f.state))
    parts.append(f"<h3><code>{e(f.signature.id)}</code> {e(str(f.signature))} &times;{f.count}</h3>"
                 f"<p>first seen {e(_when(f.first_seen))}, last {e(_when(f.last_seen))}; size {f.original_size} "
                 f"&rarr; {f.size}{'' if f.reduced else ' (not reduced)'}; replay: "
                 f"<code>{e(replay_command(path, f))}</code></p>"
                 + (f"<p class='viz'>in the viewer, at the failing pass: <code>{e(meta['viz'][f.signature.id])}</code>"
                    "</p>" if f.signature.id in meta.get("viz", {}) else "")
                 + f"<pre>{e(f.message[:3000])}</pre>"
                 f"<details open><summary>reduced case</summary><pre>{e(case[:20000])}</pre></details>")
  if (skipped := meta.get("skipped")):
    parts.append(f"<h2>Finding files skipped ({len(skipped)})</h2><ul>")
    parts += [f"<li class='bad'>{e(x)}</li>" for x in skipped]
    parts.append("</ul>")
  parts.append("<h2>Rule-hit coverage</h2><p>Rules that matched at least once (TRACK_MATCH_STATS), per rewrite pass, "
               f"of {e(str(meta.get('rules_tried', 0)))} rules tried.</p><table><tr><th>pass</th><th>matched</th>"
               "<th>rules</th></tr>")
  for p, rs in sorted(rules_by_pass(meta.get("rules_matched", [])).items()):
    parts.append(f"<tr><td>{e(p)}</td><td>{len(rs)}</td><td><details><summary>show</summary>"
                 f"{'<br>'.join(e(r) for r in sorted(rs))}</details></td></tr>")
  parts.append("</table></body></html>")
  return "".join(parts) + "\n"

def write_report(d: str, viz: bool = False) -> tuple[str, str]:
  """Write DIR/report.html and DIR/report.md (atomically); returns their paths. ReportError when DIR, its
  campaign.json or its stats.json cannot be read; a finding file that is not a reproducer is skipped and listed.
  `viz`: each finding's case is checked again under the VIZ recorder (fuzz/viz.py) and the report gives the command
  that opens its trace at the failing pass."""
  if not os.path.isdir(d): raise ReportError(f"{d}: not a campaign directory (no such directory)")
  meta = _load(os.path.join(d, "campaign.json"), {}, _why_meta)
  timeline = _load(os.path.join(d, "stats.json"), [], _why_timeline)
  skipped: list[str] = []
  findings = load_findings(os.path.join(d, "findings"), skipped)
  meta = {**meta, "skipped": skipped}
  if viz:
    from fuzz.viz import trace_findings
    meta["viz"] = trace_findings(d, [f.signature.id for f in _findings_sorted(findings)])
  h, m = os.path.join(d, "report.html"), os.path.join(d, "report.md")
  atomic_write(h, render_html(d, meta, timeline, findings))
  atomic_write(m, render_markdown(d, meta, timeline, findings))
  return h, m

__all__ = ["write_report", "render_html", "render_markdown", "svg_chart", "ReportError"]
