// tinygrad VIZ page. Every string from a trace goes into the page as text (textContent, never innerHTML): a trace is
// untrusted input. The server lays graphs out; this file only draws them.
"use strict";
const SVGNS = "http://www.w3.org/2000/svg";
const NODE_W = 150, NODE_H = 36, LABELS_ALWAYS = 1500;
const state = { index: null, panes: [], filters: { kernel: "", pass: "", rule: "" } };
window.viz = state;  // NOTE: the browser tests read the drawn state from here

function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = String(text);
  return e;
}
function sel(tag, attrs) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}
function message(kind, text) {
  document.getElementById("msg").appendChild(el("div", { class: kind }, text));
}
async function api(path, params) {
  const url = path + "?" + new URLSearchParams(params).toString();
  const r = await fetch(url);
  let body;
  try { body = await r.json(); } catch (e) { throw new Error(`${path}: the server answered ${r.status} without JSON`); }
  if (!r.ok) throw new Error(body.error || `${path}: HTTP ${r.status}`);
  return body;
}
// a colour per op, the same on every page
function opColour(op) {
  let h = 0;
  for (let i = 0; i < op.length; i++) h = (h * 31 + op.charCodeAt(i)) % 360;
  return `hsl(${h}, 65%, 80%)`;
}

// ---- the sidebar: traces, groups (schedules, kernels), passes ----
function buildSidebar() {
  const side = document.getElementById("sidebar");
  side.textContent = "";
  state.index.traces.forEach((tr, t) => {
    side.appendChild(el("h3", {}, (state.index.traces.length > 1 ? (t === 0 ? "A: " : "B: ") : "") + tr.path));
    if (tr.error) { side.appendChild(el("p", { class: "err" }, tr.error)); return; }
    if (tr.groups.length === 0) side.appendChild(el("p", { class: "empty" }, "no schedules, kernels or rewrites in this trace"));
    for (const g of tr.groups) {
      const det = el("details", { "data-t": t, "data-g": g.id, class: "group" });
      const sum = el("summary", { class: g.error ? "err" : "" });
      sum.appendChild(el("span", { class: "kind" }, g.kind + " "));
      sum.appendChild(el("span", { class: "gname" }, g.name));
      sum.appendChild(el("span", { class: "n" }, ` (${g.passes.length})`));
      if (g.has_source || g.kind === "kernel") {
        const a = el("span", { class: "src-link", "data-t": t, "data-g": g.id }, "source");
        a.addEventListener("click", (ev) => { ev.preventDefault(); paneFor(t).openSource(g.id); });
        sum.appendChild(a);
      }
      det.appendChild(sum);
      const ul = el("ul");
      for (const p of g.passes) {
        const li = el("li", { "data-t": t, "data-g": g.id, "data-p": p.id, class: "pass" + (p.error ? " err" : "") });
        li.appendChild(el("span", { class: "pname" }, p.name));
        li.appendChild(el("span", { class: "n" }, ` ${p.steps}`));
        if (p.error) li.title = p.error;
        li.addEventListener("click", () => paneFor(t).openPass(g.id, p.id, 0));
        ul.appendChild(li);
      }
      det.appendChild(ul);
      side.appendChild(det);
    }
  });
  applyFilters();
}
function applyFilters() {
  const f = state.filters;
  const has = (s, q) => !q || s.toLowerCase().includes(q.toLowerCase());
  document.querySelectorAll("#sidebar details.group").forEach((det) => {
    const tr = state.index.traces[+det.dataset.t];
    const g = tr.groups.find((x) => x.id === +det.dataset.g);
    let shown = 0;
    det.querySelectorAll("li.pass").forEach((li) => {
      const p = g.passes.find((x) => x.id === +li.dataset.p);
      const ok = has(g.name, f.kernel) && has(p.name, f.pass) && (!f.rule || p.rules.some((r) => has(r, f.rule)));
      li.hidden = !ok;
      shown += ok;
    });
    det.hidden = !(has(g.name, f.kernel) && (shown > 0 || (!f.pass && !f.rule)));
    if ((f.pass || f.rule) && shown > 0) det.open = true;
  });
}

// ---- a pane: one trace's pass, stepped through ----
class Pane {
  constructor(t) {
    this.t = t; this.group = null; this.pass = null; this.info = null; this.step = 0; this.after = false;
    this.view = "graph"; this.graph = null; this.kernelData = null;
    // NOTE: every fetch of a pane takes a ticket (nav: passes, steps, sources; views: setView); one that returns after
    // a later click's ticket is dropped, so the later click wins
    this.nav = 0; this.views = 0;
    const root = this.root = el("div", { class: "pane", "data-t": t });
    this.head = root.appendChild(el("div", { class: "pane-head" }, "choose a pass or a kernel's source on the left"));
    const c = root.appendChild(el("div", { class: "controls" }));
    this.prevB = c.appendChild(el("button", { class: "prev" }, "\u25c0 prev"));
    this.slider = c.appendChild(el("input", { type: "range", min: 0, max: 0, value: 0, class: "slider" }));
    this.nextB = c.appendChild(el("button", { class: "next" }, "next \u25b6"));
    this.counter = c.appendChild(el("span", { class: "counter" }, ""));
    this.afterB = c.appendChild(el("button", { class: "after" }, "show after"));
    for (const v of ["graph", "text", "source"]) {
      const b = c.appendChild(el("button", { class: "view-" + v }, v));
      b.addEventListener("click", () => this.setView(v));
    }
    this.zoomOut = c.appendChild(el("button", { class: "zoom-out" }, "\u2212"));
    this.zoomIn = c.appendChild(el("button", { class: "zoom-in" }, "+"));
    this.drawn = c.appendChild(el("span", { class: "drawn" }, ""));
    const si = root.appendChild(el("div", { class: "stepinfo" }));
    si.append("rule: "); this.ruleName = si.appendChild(el("span", { class: "rule-name" }, "-"));
    si.append(" at "); this.ruleLoc = si.appendChild(el("span", { class: "rule-loc" }, "-"));
    si.append(" matched node "); this.matchId = si.appendChild(el("span", { class: "match-id" }, "-"));
    si.append(" \u2192 "); this.outId = si.appendChild(el("span", { class: "out-id" }, "-"));
    si.append(" "); this.nSteps = si.appendChild(el("span", { class: "n-steps" }, ""));
    si.append(" "); this.detached = si.appendChild(el("span", { class: "detached" }, ""));
    this.body = root.appendChild(el("div", { class: "body" }));
    this.wrap = this.body.appendChild(el("div", { class: "graph-wrap" }));
    this.code = this.body.appendChild(el("pre", { class: "rule-code" }, ""));
    this.textView = root.appendChild(el("div", { class: "text-view" })); this.textView.hidden = true;
    this.sourceView = root.appendChild(el("div", { class: "source-view" })); this.sourceView.hidden = true;
    this.scale = 1;
    this.prevB.addEventListener("click", () => this.go(this.step - 1));
    this.nextB.addEventListener("click", () => this.go(this.step + 1));
    this.slider.addEventListener("change", () => this.go(+this.slider.value));
    this.afterB.addEventListener("click", () => { this.after = !this.after; this.go(this.step); });
    this.zoomIn.addEventListener("click", () => this.zoom(1.25));
    this.zoomOut.addEventListener("click", () => this.zoom(0.8));
  }
  async openPass(g, p, s) {
    this.clickAt = performance.now();  // NOTE: a pass's draw time runs from the click that opened it
    const seq = ++this.nav;
    document.querySelectorAll(`#sidebar li.pass[data-t="${this.t}"]`).forEach((li) => li.classList.toggle("sel", +li.dataset.p === p));
    const info = await api("/api/pass", { t: this.t, p });
    if (seq !== this.nav) return;
    this.info = info; this.group = g; this.pass = p;
    this.scale = 1;
    const gr = state.index.traces[this.t].groups.find((x) => x.id === g);
    this.head.textContent = `${gr ? gr.kind + " " + gr.name : ""} \u2014 pass ${this.info.name}` +
      (this.info.error ? ` (failed: ${this.info.error})` : "");
    this.slider.max = this.info.steps.length;
    this.nSteps.textContent = `(${this.info.steps.length} steps)`;
    this.kernelData = null;
    if (this.view === "source") this.setView("graph");
    await this.go(s || 0);
  }
  async go(s) {
    if (!this.info) return;
    const seq = ++this.nav;
    const n = this.info.steps.length;
    s = Math.max(0, Math.min(n, s));
    const t0 = this.clickAt !== undefined ? this.clickAt : performance.now();
    this.clickAt = undefined;
    this.step = s;
    this.slider.value = s;
    this.counter.textContent = s < n ? `step ${s + 1} / ${n}` : `after the last step (${n} steps)`;
    this.afterB.textContent = this.after ? "show before" : "show after";
    // NOTE: the text of both graphs is asked for only when the text view shows it (a big graph's text is large)
    const gr = await api("/api/graph", { t: this.t, p: this.pass, s, after: this.after ? 1 : 0, text: this.view === "text" ? 1 : 0 });
    if (seq !== this.nav) return;  // a later click won
    this.graph = gr;
    const st = s < n ? this.info.steps[s] : null;
    const rule = st ? this.info.rules[st.rule] : null;
    this.ruleName.textContent = rule ? rule.name : "(none: the pass's output)";
    this.ruleLoc.textContent = rule ? rule.loc : "-";
    this.code.textContent = rule ? rule.code : "";
    this.matchId.textContent = st ? st.match : "-";
    this.outId.textContent = st ? st.out : "-";
    this.detached.textContent = gr.detached ? "(the step's node is drawn apart: the graph rebuilt from the earlier steps no longer holds it)" : "";
    const t1 = performance.now();
    this.drawGraph(gr);
    if (gr.text_before) this.drawText(gr);
    const t2 = performance.now();
    await new Promise((r) => requestAnimationFrame(() => r()));
    this.lastDrawMs = performance.now() - t0;
    this.timing = { fetch: t1 - t0, server: gr.server_ms, dom: t2 - t1, paint: performance.now() - t2 };
    this.drawn.textContent = `${gr.nodes.length} nodes, drawn in ${this.lastDrawMs.toFixed(0)} ms`;
    this.root.dataset.drawnStep = s;
  }
  drawGraph(gr) {
    this.wrap.textContent = "";
    let w = 0, h = 0;
    for (const nd of gr.nodes) { w = Math.max(w, nd[1] + NODE_W); h = Math.max(h, nd[2] + NODE_H); }
    const svg = this.svg = sel("svg", { class: "graph", viewBox: `-10 -10 ${w + 20} ${h + 20}` });
    this.gw = w + 20; this.gh = h + 20;
    if (this.scale === 1 && w > 0) this.scale = Math.min(1, Math.max(0.15, (this.wrap.clientWidth - 20) / (w + 20)));
    this.applyScale();
    const pos = new Map();
    for (const nd of gr.nodes) pos.set(nd[0], nd);
    let d = "";
    for (const [s, u] of gr.edges) {
      const a = pos.get(s), b = pos.get(u);
      if (!a || !b) continue;
      d += `M${a[1] + NODE_W / 2},${a[2] + NODE_H}L${b[1] + NODE_W / 2},${b[2]}`;
    }
    svg.appendChild(sel("path", { class: "edges", d }));
    const hl = this.after ? gr.out : gr.match;
    const changed = new Set(gr.changed);
    const frag = document.createDocumentFragment();
    // NOTE: one node made by hand, then cloned: a clone is cheaper than four createElementNS calls
    // NOTE: text is the costly part of laying out an SVG: a big graph drawn small (unreadable anyway) gets no labels
    // until it is zoomed in, where its nodes keep their ids in the tooltip-free data-id and their colours
    const labels = gr.nodes.length <= LABELS_ALWAYS || this.scale >= 0.5;
    this.labelled = labels;
    const proto = sel("g", { class: "node" });
    proto.appendChild(sel("rect", { width: NODE_W, height: NODE_H }));
    if (labels) { proto.appendChild(sel("text", { x: 4, y: 14 })); proto.appendChild(sel("text", { x: 4, y: 29 })); }
    const colours = new Map();
    for (const [id, x, y, op, label] of gr.nodes) {
      const g = proto.cloneNode(true);
      if (id === hl) g.classList.add("hl");
      else if (changed.has(id)) g.classList.add("new");
      g.setAttribute("data-id", id);
      g.setAttribute("transform", `translate(${x},${y})`);
      if (!colours.has(op)) colours.set(op, opColour(op));
      g.firstChild.setAttribute("fill", colours.get(op));
      if (labels) { g.childNodes[1].textContent = `${op} ${id}`; g.childNodes[2].textContent = label; }
      frag.appendChild(g);
    }
    svg.appendChild(frag);
    this.wrap.appendChild(svg);
    const focus = svg.querySelector("g.node.hl");
    if (focus) focus.scrollIntoView({ block: "center", inline: "center" });
  }
  applyScale() {
    if (!this.svg) return;
    this.svg.setAttribute("width", Math.round(this.gw * this.scale));
    this.svg.setAttribute("height", Math.round(this.gh * this.scale));
  }
  zoom(f) {
    this.scale = Math.max(0.05, Math.min(4, this.scale * f));
    this.applyScale();
    if (this.graph && !this.labelled && this.scale >= 0.5) this.drawGraph(this.graph);
  }
  drawText(gr) {
    this.textView.textContent = "";
    const col = (title, lines, marks, cls) => {
      const pre = el("pre", { class: "text-" + cls });
      pre.appendChild(el("h4", {}, title));
      const m = new Set(marks);
      lines.forEach((line, i) => pre.appendChild(el("div", { class: "ln" + (m.has(i) ? " " + cls : "") }, line)));
      return pre;
    };
    this.textView.appendChild(col("before this step", gr.text_before, gr.gone, "gone"));
    this.textView.appendChild(col("after this step", gr.text_after, gr.new, "new"));
  }
  async openSource(g) {
    const seq = ++this.nav;
    const k = await api("/api/kernel", { t: this.t, g });
    if (seq !== this.nav) return;
    this.group = g; this.kernelData = k;
    this.head.textContent = `${this.kernelData.kind} ${this.kernelData.name} \u2014 source` +
      (this.kernelData.target ? ` for ${this.kernelData.target}` : "");
    this.setView("source");
  }
  drawSource() {
    this.sourceView.textContent = "";
    const k = this.kernelData;
    if (!k) { this.sourceView.appendChild(el("p", { class: "empty" }, "choose a kernel's source on the left")); return; }
    const other = state.panes.find((p) => p !== this && p.kernelData);
    const otherLines = other && other.kernelData.source ? new Set(other.kernelData.source.split("\n")) : null;
    const pre = el("pre", { class: "source" });
    pre.appendChild(el("h4", {}, "rendered source" + (otherLines ? " (lines the other trace's kernel lacks marked)" : "")));
    if (k.source === null) pre.appendChild(el("div", { class: "ln" }, k.error ? `no source: ${k.error}` : "no source (not a kernel, or it did not finish)"));
    else for (const line of k.source.split("\n")) pre.appendChild(el("div", { class: "ln" + (otherLines && !otherLines.has(line) ? " new" : "") }, line));
    this.sourceView.appendChild(pre);
    const prog = el("pre", { class: "program" });
    prog.appendChild(el("h4", {}, "linear program"));
    for (const line of k.program || ["(none)"]) prog.appendChild(el("div", { class: "ln" }, line));
    prog.appendChild(el("h4", {}, "AST"));
    for (const line of k.ast || ["(none)"]) prog.appendChild(el("div", { class: "ln" }, line));
    this.sourceView.appendChild(prog);
  }
  async setView(v) {
    const seq = ++this.views;
    if (v === "source" && !this.kernelData && this.group !== null) {
      const k = await api("/api/kernel", { t: this.t, g: this.group });
      if (seq !== this.views) return;
      this.kernelData = k;
    }
    const needText = v === "text" && this.view !== "text" && this.info;
    this.view = v;
    if (needText) { await this.go(this.step); if (seq !== this.views) return; }
    this.body.hidden = v !== "graph";
    this.textView.hidden = v !== "text";
    this.sourceView.hidden = v !== "source";
    if (v === "source") { this.drawSource(); state.panes.forEach((p) => { if (p !== this && p.view === "source") p.drawSource(); }); }
  }
}
function paneFor(t) { return state.panes[t] || state.panes[0]; }

// ---- the profile: launches on a timeline per device ----
function buildProfile() {
  const box = document.getElementById("profile");
  box.textContent = "";
  state.index.traces.forEach((tr, t) => {
    if (tr.error) return;
    box.appendChild(el("h3", {}, `launches in ${tr.path}`));
    const ls = tr.launches;
    if (!ls.length) { box.appendChild(el("p", { class: "empty" }, "no launches recorded: run with PROFILE=1")); return; }
    const t0 = Math.min(...ls.map((l) => l.start)), t1 = Math.max(...ls.map((l) => l.start + l.seconds));
    const devices = [...new Set(ls.map((l) => l.device))];
    const W = 1000, rowH = 26, scale = W / Math.max(t1 - t0, 1e-9);
    const svg = sel("svg", { class: "timeline", width: W + 120, height: devices.length * rowH + 30 });
    devices.forEach((d, r) => { const tx = sel("text", { x: 0, y: r * rowH + 17 }); tx.textContent = d; svg.appendChild(tx); });
    for (const l of ls) {
      const r = devices.indexOf(l.device);
      const rect = sel("rect", { class: "k", x: 110 + (l.start - t0) * scale, y: r * rowH + 4, width: Math.max(1, l.seconds * scale), height: rowH - 8 });
      const title = sel("title");
      title.textContent = `${l.name}: ${(l.seconds * 1e6).toFixed(1)} us, ${l.flops} FLOPs, ${l.bytes} bytes`;
      rect.appendChild(title);
      svg.appendChild(rect);
    }
    const axis = sel("text", { x: 110, y: devices.length * rowH + 20 });
    axis.textContent = `0 .. ${((t1 - t0) * 1e3).toFixed(3)} ms`;
    svg.appendChild(axis);
    box.appendChild(svg);
    const table = el("table", { class: "launches" });
    const hd = el("tr");
    for (const c of ["device", "kernel", "start (ms)", "time (us)", "FLOPs", "bytes", "GFLOP/s", "GB/s"]) hd.appendChild(el("th", {}, c));
    table.appendChild(hd);
    for (const l of ls) {
      const row = el("tr");
      const s = Math.max(l.seconds, 1e-9);
      for (const [v, cls] of [[l.device, "name"], [l.name, "name"], [((l.start - t0) * 1e3).toFixed(3)], [(l.seconds * 1e6).toFixed(1)],
        [l.flops], [l.bytes], [(l.flops / s * 1e-9).toFixed(2)], [(l.bytes / s * 1e-9).toFixed(2)]]) row.appendChild(el("td", cls ? { class: cls } : {}, v));
      table.appendChild(row);
    }
    box.appendChild(table);
  });
}

async function main() {
  window.addEventListener("error", (e) => message("error", `page error: ${e.message}`));
  window.addEventListener("unhandledrejection", (e) => message("error", `${e.reason && e.reason.message ? e.reason.message : e.reason}`));
  try { state.index = await api("/api/index", {}); } catch (e) { message("error", `cannot read the traces: ${e.message}`); document.getElementById("sidebar").textContent = ""; return; }
  state.index.traces.forEach((tr) => {
    if (tr.error) message("error", tr.error);
    for (const w of tr.warnings || []) message("warning", `${tr.path}: ${w}`);
  });
  const panes = document.getElementById("panes");
  state.index.traces.forEach((tr, t) => { const p = new Pane(t); state.panes.push(p); panes.appendChild(p.root); });
  buildSidebar();
  for (const k of ["kernel", "pass", "rule"]) {
    document.getElementById("f-" + k).addEventListener("input", (e) => { state.filters[k] = e.target.value; applyFilters(); });
  }
  const tabs = { rewrites: document.getElementById("tab-rewrites"), profile: document.getElementById("tab-profile") };
  tabs.rewrites.addEventListener("click", () => { document.getElementById("main").hidden = false; document.getElementById("profile").hidden = true; tabs.rewrites.classList.add("on"); tabs.profile.classList.remove("on"); });
  tabs.profile.addEventListener("click", () => { buildProfile(); document.getElementById("main").hidden = true; document.getElementById("profile").hidden = false; tabs.profile.classList.add("on"); tabs.rewrites.classList.remove("on"); });
  document.addEventListener("keydown", (e) => {
    if (e.target.tagName === "INPUT") return;
    if (e.key === "ArrowRight") state.panes.forEach((q) => q.go(q.step + 1));
    if (e.key === "ArrowLeft") state.panes.forEach((q) => q.go(q.step - 1));
  });
  for (const [t, tr] of state.index.traces.entries()) {
    const ini = tr.initial;
    if (!ini) continue;
    const det = document.querySelector(`#sidebar details.group[data-t="${t}"][data-g="${ini.group}"]`);
    if (det) det.open = true;
    if (ini.pass >= 0) await state.panes[t].openPass(ini.group, ini.pass, ini.step);
    else await state.panes[t].openSource(ini.group);
  }
  document.body.dataset.ready = "1";
}
main();
