// tracetochain live dashboard: polls /api/live and redraws. Trace content (state names, messages, ids) is untrusted:
// it only ever reaches the page through textContent / setAttribute, never as markup. Anything keyed by a state name
// is a Map, never a plain object: a state named "constructor" or "__proto__" must not meet Object.prototype.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const POLL_MS = 2000;

function el(tag, attrs, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }

function fmt(x, digits) {
  if (x === null || x === undefined || Number.isNaN(x)) return "—";
  return Number(x).toFixed(digits === undefined ? 3 : digits);
}

function interval(t) {
  if (!t || t.lower === null || t.upper === null) return "";
  return "[" + fmt(t.lower) + ", " + fmt(t.upper) + "]";
}

function setText(id, text) { const n = document.getElementById(id); if (n) n.textContent = text; }

function when(ts) {
  if (!ts) return "";
  return new Date(ts * 1000).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

// ---------------------------------------------------------------- groups (one chain per agent)
const GROUP = typeof window !== "undefined" && typeof URLSearchParams !== "undefined"
  ? new URLSearchParams(window.location.search).get("group") : null;

function withGroup(path) {
  if (GROUP === null) return path;
  return path + (path.indexOf("?") >= 0 ? "&" : "?") + "group=" + encodeURIComponent(GROUP);
}

function drawGroups(doc) {
  const box = document.getElementById("groups");
  if (!box) return;
  clear(box);
  setText("group-by", "agents (" + (doc.group_by || "service.name") + "):");
  const all = el("a", {href: "/", class: GROUP === null ? "group current" : "group"}, "all");
  box.appendChild(all);
  for (const [name, g] of Object.entries(doc.groups || {})) {
    const label = (name === "" ? "(no " + (doc.group_by || "group") + ")" : name) + " · " + g.n_episodes +
      (g.r_inf && g.r_inf.point !== null && g.r_inf.point !== undefined ? " · R∞ " + fmt(g.r_inf.point) : "") +
      (g.firing && g.firing.length ? " · " + g.firing.length + " firing" : "");
    box.appendChild(el("a", {href: "/?group=" + encodeURIComponent(name),
      class: "group" + (GROUP === name ? " current" : "") + (g.firing && g.firing.length ? " firing" : "")}, label));
  }
}

function drawLabels(doc) {
  const tot = doc.total;
  if (!tot) { setText("n-labelled", "—"); setText("labelled-line", ""); setText("label-test", ""); return; }
  const n = tot.n_labelled ?? 0, u = tot.n_unlabelled ?? 0;
  setText("n-labelled", n + " / " + (n + u));
  const usage = tot.usage || {};
  const ms = k => (usage[k] && usage[k].mean_steps !== null ? fmt(usage[k].mean_steps, 1) : "—");
  setText("labelled-line", "labelled / all; " + u + " unlabelled (no verdict). Mean steps " + ms("labelled") +
    " labelled, " + ms("unlabelled") + " unlabelled. R∞ rests on the labelled ones.");
  const t = tot.label_test || {};
  setText("label-test", t.tested ? ("paths of labelled vs unlabelled: p = " + fmt(t.p_value, 3) +
    (t.differ ? " — they differ: R∞ may not describe the unlabelled runs" : " (no difference found)"))
    : (t.reason ? "labelled vs unlabelled not compared: " + t.reason : ""));
}

// ---------------------------------------------------------------- cards and status
function drawCards(doc) {
  const cur = doc.current;
  const tot = doc.total;
  setText("r-inf", cur ? fmt(cur.r_inf.point) : "—");
  setText("r-inf-ci", cur ? (Math.round(doc.confidence * 100) + "% interval " + interval(cur.r_inf)) : "no usable traces yet");
  const series = doc.series || [];
  const last = series.length ? series[series.length - 1] : null;
  setText("window-label", last ? ("window " + last.label + " · " + last.n_traces + " traces" +
    (last.complete ? "" : " (filling)")) : "");
  setText("r-inf-total", tot ? fmt(tot.r_inf.point) : "—");
  setText("r-inf-total-ci", tot ? (Math.round(doc.confidence * 100) + "% interval " + interval(tot.r_inf)) : "");
  setText("total-label", tot ? (tot.n_traces + " traces · pass rate " + fmt(tot.pass_rate)) : "");
  const firing = (doc.rules || []).filter(r => r.firing).length;
  const drift = series.filter(w => w.drift && w.drift.alert).length;
  setText("alert-count", firing + " / " + drift);
  const st = doc.status || {};
  const health = doc.health || {};
  const banner = document.getElementById("degraded");
  if (banner) {
    const reasons = (health.reasons || []).concat(doc.degraded || []);
    const unique = reasons.filter((r, i) => reasons.indexOf(r) === i);
    banner.hidden = !unique.length;
    banner.textContent = unique.length ? ((health.status === "failing" ? "failing: " : "degraded: ") + unique.join("; ")) : "";
  }
  setText("status", doc.n_episodes + " episodes · windows of " + doc.window.describe +
    (st.open_traces !== undefined ? " · " + st.open_traces + " open traces" : "") +
    (st.pending_verdicts ? " · " + st.pending_verdicts + " waiting for a verdict" : "") +
    " · updated " + new Date().toLocaleTimeString());
  const rep = document.getElementById("report-window-link");
  if (rep && doc.current_key !== null && doc.current_key !== undefined) rep.setAttribute("href", withGroup("/report?window=" + encodeURIComponent(doc.current_key)));
  const all = document.getElementById("report-link");
  if (all) all.setAttribute("href", withGroup("/report?window=all"));
}

// ---------------------------------------------------------------- R∞ over time
function drawSeries(doc) {
  const root = document.getElementById("series-svg");
  clear(root);
  const W = 900, H = 240, L = 44, R = 12, T = 12, B = 30;
  const pts = (doc.series || []).filter(w => w.r_inf !== null);
  const y = v => T + (1 - v) * (H - T - B);
  for (const v of [0, 0.25, 0.5, 0.75, 1]) {
    root.appendChild(svg("line", {x1: L, x2: W - R, y1: y(v), y2: y(v), class: "gridline"}));
    root.appendChild(svg("text", {x: L - 6, y: y(v) + 4, "text-anchor": "end", class: "tick"}, v.toFixed(2)));
  }
  root.appendChild(svg("line", {x1: L, x2: L, y1: T, y2: H - B, class: "axis"}));
  if (!pts.length) {
    root.appendChild(svg("text", {x: W / 2, y: H / 2, "text-anchor": "middle", class: "tick"}, "no window with usable traces yet"));
    return;
  }
  const n = pts.length;
  const x = i => n === 1 ? (L + W - R) / 2 : L + 10 + i * (W - R - L - 20) / (n - 1);
  let band = "";
  pts.forEach((w, i) => { band += (i ? " L" : "M") + x(i) + "," + y(w.r_inf_upper ?? w.r_inf); });
  for (let i = n - 1; i >= 0; i--) band += " L" + x(i) + "," + y(pts[i].r_inf_lower ?? pts[i].r_inf);
  root.appendChild(svg("path", {d: band + " Z", class: "band"}));
  let line = "";
  pts.forEach((w, i) => { line += (i ? " L" : "M") + x(i) + "," + y(w.r_inf); });
  root.appendChild(svg("path", {d: line, class: "line", id: "series-line"}));
  pts.forEach((w, i) => {
    const cls = "point" + (w.drift && w.drift.alert ? " drift" : "") + (w.complete ? "" : " partial");
    const c = svg("circle", {cx: x(i), cy: y(w.r_inf), r: 4, class: cls});
    c.appendChild(svg("title", {}, w.label + ": R∞ " + fmt(w.r_inf) + " [" + fmt(w.r_inf_lower) + ", " +
      fmt(w.r_inf_upper) + "], " + w.n_traces + " traces" + (w.drift && w.drift.alert ? " — drift" : "")));
    root.appendChild(c);
  });
  const step = Math.max(1, Math.ceil(n / 8));
  pts.forEach((w, i) => {
    if (i % step === 0 || i === n - 1) root.appendChild(svg("text", {x: x(i), y: H - 10, "text-anchor": "middle", class: "tick"}, w.label));
  });
}

// ---------------------------------------------------------------- alerts and rules
function drawAlerts(doc) {
  const ul = document.getElementById("alerts");
  clear(ul);
  const alerts = doc.alerts || [];
  if (!alerts.length) { ul.appendChild(el("li", {class: "resolved"}, "no alerts")); return; }
  for (const a of alerts.slice(0, 50)) {
    const li = el("li", {class: (a.kind === "drift" ? "drift " : "") + (a.status === "resolved" ? "resolved" : "firing")});
    li.appendChild(el("span", {class: "when"}, when(a.at)));
    if (a.group !== null && a.group !== undefined && GROUP === null) li.appendChild(el("span", {class: "group-tag"}, a.group));
    li.appendChild(el("span", {class: "message"}, a.message));
    const links = el("div", {class: "links"});
    (a.examples || []).forEach((e, i) => {
      links.appendChild(el("a", {href: "/traces/" + encodeURIComponent(e), class: "example"}, "example " + (i + 1)));
    });
    if (a.window !== null && a.window !== undefined) {
      const rep = "/report?window=" + encodeURIComponent(a.window) + (a.group !== null && a.group !== undefined ? "&group=" + encodeURIComponent(a.group) : "");
      links.appendChild(el("a", {href: rep}, "report of the window"));
    }
    if (a.delivery) {
      links.appendChild(el("span", {class: "delivery " + a.delivery.status},
        "webhook: " + a.delivery.status + " (" + a.delivery.attempts + " attempt" + (a.delivery.attempts === 1 ? "" : "s") + ")"));
    }
    li.appendChild(links);
    ul.appendChild(li);
  }
}

function drawRules(doc) {
  const body = document.querySelector("#rules tbody");
  clear(body);
  const rules = doc.rules || [];
  if (!rules.length) { const tr = el("tr"); tr.appendChild(el("td", {colspan: "4"}, "no rules (serve --rules FILE)")); body.appendChild(tr); return; }
  for (const r of rules) {
    const tr = el("tr");
    tr.appendChild(el("td", {}, r.rule));
    tr.appendChild(el("td", {class: r.firing ? "firing" : "ok"}, r.state));
    tr.appendChild(el("td", {}, r.value === null ? "—" : fmt(r.value) + " " + r.op + " " + r.threshold));
    tr.appendChild(el("td", {}, r.over));
    body.appendChild(tr);
  }
}

// ---------------------------------------------------------------- chain graph
function layout(cur) {
  const initial = new Map(Object.entries(cur.initial));
  const names = [...initial.keys()];
  const out = new Map();
  for (const e of cur.edges) {
    if (!out.has(e.from)) out.set(e.from, []);
    out.get(e.from).push(e.to);
  }
  const depth = new Map();
  const queue = names.filter(s => initial.get(s) > 0);
  queue.forEach(s => { depth.set(s, 0); });
  while (queue.length) {
    const s = queue.shift();
    for (const t of out.get(s) || []) {
      if (t === "success" || t === "failure") continue;
      if (!depth.has(t)) { depth.set(t, depth.get(s) + 1); queue.push(t); }
    }
  }
  names.forEach(s => { if (!depth.has(s)) depth.set(s, 0); });
  const maxDepth = Math.max(0, ...depth.values());
  const cols = new Map();
  const place = (s, d) => { if (!cols.has(d)) cols.set(d, []); cols.get(d).push(s); };
  names.forEach(s => place(s, depth.get(s)));
  const W = 900, H = 360, nCols = maxDepth + 2;
  const pos = new Map();
  for (const [d, col] of cols) {
    col.forEach((s, i) => {
      pos.set(s, {x: 70 + d * (W - 140) / Math.max(1, nCols - 1), y: (i + 1) * H / (col.length + 1)});
    });
  }
  // The two outcomes in the last column (kept apart from states of the same name).
  const x = 70 + (maxDepth + 1) * (W - 140) / Math.max(1, nCols - 1);
  pos.set("\u0000success", {x: x, y: H / 3});
  pos.set("\u0000failure", {x: x, y: 2 * H / 3});
  return pos;
}

// Where an edge ends: the outcome nodes are keyed apart from state names.
function target(pos, name) {
  return (name === "success" || name === "failure") ? pos.get("\u0000" + name) : pos.get(name);
}

function drawGraph(doc) {
  const root = document.getElementById("graph-svg");
  clear(root);
  const cur = doc.current;
  const movedList = document.getElementById("moved");
  clear(movedList);
  if (!cur) { root.appendChild(svg("text", {x: 450, y: 180, "text-anchor": "middle", class: "tick"}, "no usable traces in this window yet")); return; }
  const moved = new Map();
  for (const m of doc.moved || []) moved.set(m.from + "\u0000" + m.to, m);
  const defs = svg("defs");
  const marker = svg("marker", {id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto-start-reverse"});
  marker.appendChild(svg("path", {d: "M 0 0 L 10 5 L 0 10 z", fill: "#8c96aa"}));
  defs.appendChild(marker);
  root.appendChild(defs);
  const pos = layout(cur);
  for (const e of cur.edges) {
    if (e.p < 0.02 && !moved.has(e.from + "\u0000" + e.to)) continue;
    const a = pos.get(e.from), b = target(pos, e.to);
    if (!a || !b) continue;
    const m = moved.get(e.from + "\u0000" + e.to);
    const cls = m ? (m.change > 0 === (e.to !== "success") ? " moved-up" : " moved-down") : "";
    let d;
    if (a === b) {
      d = "M" + (a.x - 10) + "," + (a.y - 14) + " C" + (a.x - 30) + "," + (a.y - 55) + " " + (a.x + 30) + "," + (a.y - 55) + " " + (a.x + 10) + "," + (a.y - 14);
    } else {
      const mx = (a.x + b.x) / 2, my = (a.y + b.y) / 2 - 18;
      d = "M" + a.x + "," + a.y + " Q" + mx + "," + my + " " + b.x + "," + b.y;
    }
    const path = svg("path", {d: d, class: "edge" + cls, "stroke-width": (0.8 + 5 * e.p).toFixed(2), "marker-end": "url(#arrow)"});
    path.appendChild(svg("title", {}, e.from + " → " + e.to + ": " + fmt(e.p) + " (" + e.count + " seen)" +
      (m ? ", was " + fmt(m.before) + " in the baseline" : "")));
    root.appendChild(path);
    const lx = a === b ? a.x : (a.x + b.x) / 2, ly = a === b ? a.y - 46 : (a.y + b.y) / 2 - 12;
    root.appendChild(svg("text", {x: lx, y: ly, "text-anchor": "middle", class: "edge-label" + cls}, fmt(e.p, 2)));
  }
  for (const [key, p] of pos) {
    const outcome = key.charAt(0) === "\u0000";
    const name = outcome ? key.slice(1) : key;
    const g = svg("g", {class: "node" + (outcome ? " " + name : ""), transform: "translate(" + p.x + "," + p.y + ")"});
    const label = name.length > 22 ? name.slice(0, 21) + "…" : name;
    const w = Math.max(50, 7.2 * label.length + 14);
    g.appendChild(svg("rect", {x: -w / 2, y: -13, width: w, height: 26}));
    g.appendChild(svg("text", {x: 0, y: 4, "text-anchor": "middle"}, label));
    g.appendChild(svg("title", {}, name));
    root.appendChild(g);
  }
  for (const m of doc.moved || []) {
    const li = el("li", {class: "moved"}, m.from + " → " + m.to + ": " + fmt(m.before) + " → " + fmt(m.after) + " ");
    (m.examples || []).slice(0, 3).forEach((ex, i) => li.appendChild(el("a", {href: "/traces/" + encodeURIComponent(ex)}, "example " + (i + 1) + " ")));
    movedList.appendChild(li);
  }
}

function drawStates(doc) {
  const body = document.querySelector("#states tbody");
  clear(body);
  const cur = doc.current;
  if (!cur) return;
  const rows = [...cur.states].sort((a, b) => (b.attribution.point || 0) - (a.attribution.point || 0));
  for (const s of rows) {
    const tr = el("tr");
    tr.appendChild(el("td", {}, s.name));
    tr.appendChild(el("td", {}, fmt(s.vulnerability.point) + " " + interval(s.vulnerability)));
    tr.appendChild(el("td", {}, fmt(s.attribution.point) + " " + interval(s.attribution)));
    tr.appendChild(el("td", {}, fmt(s.success_probability.point)));
    body.appendChild(tr);
  }
}

// Every reported scalar of the quantity registry (doc.total.quantities), each with its own digits.
function drawQuantities(doc) {
  const body = document.querySelector("#quantities tbody");
  if (!body) return;
  clear(body);
  const tot = doc.total;
  for (const q of (tot && tot.quantities) || []) {
    const tr = el("tr", {"data-key": q.key});
    tr.appendChild(el("td", {}, q.label));
    tr.appendChild(el("td", {}, fmt(q.point, q.digits)));
    tr.appendChild(el("td", {}, q.lower === null ? "" : "[" + fmt(q.lower, q.digits) + ", " + fmt(q.upper, q.digits) + "]"));
    tr.appendChild(el("td", {}, q.status));
    body.appendChild(tr);
  }
}

function draw(doc) {
  drawGroups(doc);
  drawLabels(doc);
  drawCards(doc);
  drawSeries(doc);
  drawAlerts(doc);
  drawRules(doc);
  drawGraph(doc);
  drawStates(doc);
  drawQuantities(doc);
  document.body.setAttribute("data-episodes", String(doc.n_episodes));
}

async function poll() {
  const dot = document.getElementById("live-dot");
  let doc = null;
  try {
    const resp = await fetch(withGroup("/api/live"), {credentials: "same-origin", cache: "no-store"});
    if (!resp.ok) throw new Error("HTTP " + resp.status);
    doc = await resp.json();
    // The stored alerts (each once) with their webhook delivery status, of this agent or of all.
    const ar = await fetch(withGroup("/api/alerts?limit=50"), {credentials: "same-origin", cache: "no-store"});
    if (ar.ok) doc.alerts = (await ar.json()).alerts;
    dot.classList.remove("stale");
  } catch (err) {
    dot.classList.add("stale");
    setText("status", "cannot reach the server (" + err.message + "); retrying");
  }
  if (doc !== null) {
    try { draw(doc); } catch (err) { setText("status", "the page could not draw this update (" + err.message + ")"); }
  }
  setTimeout(poll, POLL_MS);
}

document.addEventListener("DOMContentLoaded", () => {
  const initial = document.getElementById("initial-data");
  try { if (GROUP === null) draw(JSON.parse(initial.textContent)); } catch (err) { setText("status", "waiting for data"); }
  setTimeout(poll, GROUP === null ? POLL_MS : 0);
});
