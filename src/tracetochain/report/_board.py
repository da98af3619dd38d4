"""Rendering a reliability board (:func:`~tracetochain.analysis._board.board`): HTML, Markdown, CSV, SVG, cards.

Every function takes the board's JSON document (``Board.to_dict()``) and computes nothing: the numbers, ranks and
decisions are the library's. The HTML page is self-contained (inline CSS and SVG, no script) and every piece of
trace-derived text — group names, file names, header metadata — is escaped.
"""

from __future__ import annotations

import csv
import io
import json
import math
from html import escape
from typing import Any

from tracetochain.report._svgplot import nice_ticks

__all__ = ["board_card_markdown", "board_csv", "board_svg", "render_board_html", "render_board_markdown"]

_FONT = 'font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12"'


def _f(x: Any, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def _iv(lo: Any, hi: Any, digits: int = 3) -> str:
    return "–" if lo is None or hi is None else f"[{_f(lo, digits)}, {_f(hi, digits)}]"


def _ks(doc: dict[str, Any]) -> list[str]:
    return [str(k) for k in doc.get("settings", {}).get("ks", []) if int(k) >= 2]


def _plan_cell(row: dict[str, Any], quantity: str = "r_inf") -> str:
    plan = row.get("planning") or {}
    parts = []
    for r in plan.get("rows", []):
        t = r["tasks"].get(quantity)
        if t is not None and r["trials"] in (1, 3, 5):
            parts.append(f"{t}×{r['trials']}")
    return ", ".join(parts) or "–"


def board_svg(doc: dict[str, Any]) -> str:
    """A forest plot: each group's R∞ (dot) and interval (bar), best first, with its rank interval at the right."""
    rows = doc["rows"]
    n = len(rows)
    label_w, right_w, top, row_h, bottom = 220, 80, 28, 22, 40
    width = 760
    height = top + row_h * max(n, 1) + bottom
    x0, x1 = label_w, width - right_w
    lows = [r["r_inf_interval"][0] for r in rows if r["r_inf_interval"][0] is not None] + [r["r_inf"] for r in rows]
    highs = [r["r_inf_interval"][1] for r in rows if r["r_inf_interval"][1] is not None] + [r["r_inf"] for r in rows]
    lo = max(0.0, min(lows, default=0.0) - 0.02)
    hi = min(1.0, max(highs, default=1.0) + 0.02)
    if hi - lo < 0.05:
        lo, hi = max(0.0, lo - 0.05), min(1.0, hi + 0.05)

    def sx(v: float) -> float:
        return x0 + (v - lo) / (hi - lo) * (x1 - x0)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
           f'height="{height}" role="img" aria-label="R∞ by group with intervals and rank intervals" {_FONT}>',
           f'<text x="{x0}" y="16" font-weight="bold">R∞ with its '
           f'{_f(doc["settings"].get("confidence", 0.95) * 100, 0)}% interval</text>'
           f'<text x="{x1 + 8}" y="16" font-weight="bold">rank</text>']
    axis_y = top + row_h * n + 6
    for t in nice_ticks(lo, hi, 6):
        if lo - 1e-9 <= t <= hi + 1e-9:
            out.append(f'<line x1="{sx(t):.1f}" x2="{sx(t):.1f}" y1="{top - 4}" y2="{axis_y}" stroke="#ddd"/>'
                       f'<text x="{sx(t):.1f}" y="{axis_y + 16}" text-anchor="middle">{t:g}</text>')
    for i, r in enumerate(rows):
        y = top + row_h * i + row_h / 2
        name = escape(str(r["group"]))
        short = name if len(str(r["group"])) <= 30 else escape(str(r["group"])[:29]) + "…"
        out.append(f'<text x="{label_w - 8}" y="{y + 4:.1f}" text-anchor="end"><title>{name}</title>{short}</text>')
        lo_i, hi_i = r["r_inf_interval"]
        if lo_i is not None and hi_i is not None:
            out.append(f'<line x1="{sx(lo_i):.1f}" x2="{sx(hi_i):.1f}" y1="{y:.1f}" y2="{y:.1f}" stroke="#1f77b4" '
                       'stroke-width="3"/>')
        out.append(f'<circle cx="{sx(r["r_inf"]):.1f}" cy="{y:.1f}" r="4.5" fill="#d62728"/>')
        a, b = r["rank_interval"]
        out.append(f'<text x="{x1 + 8}" y="{y + 4:.1f}">{a}–{b}</text>' if a != b else
                   f'<text x="{x1 + 8}" y="{y + 4:.1f}">{a}</text>')
    out.append(f'<text x="{(x0 + x1) / 2:.1f}" y="{height - 6}" text-anchor="middle">R∞ (probability of success)'
               '</text></svg>')
    return "".join(out)


def _metadata_table(meta: dict[str, Any]) -> str:
    files = meta.get("files") if isinstance(meta, dict) else None
    if not files:
        return ""
    rows = []
    for name, doc in files.items():
        text = json.dumps(doc, ensure_ascii=False, sort_keys=True)
        rows.append(f"<tr><td><code>{escape(str(name))}</code></td><td><code>{escape(text[:600])}"
                    f"{'…' if len(text) > 600 else ''}</code></td></tr>")
    return ("<h2>Header metadata of the input files</h2><table><tr><th>file</th><th>metadata</th></tr>"
            + "".join(rows) + "</table>")


def render_board_html(doc: dict[str, Any]) -> str:
    """The board as one self-contained HTML page."""
    rows = doc["rows"]
    ks = _ks(doc)
    conf = _f(doc["settings"].get("confidence", 0.95) * 100, 0)
    filters = doc.get("filters") or []
    head = ("<tr><th>rank</th><th>rank interval</th><th>group</th><th>episodes</th><th>tasks</th>"
            f"<th>pass rate [{conf}%]</th><th>R∞ [{conf}%]</th>"
            + "".join(f"<th>pass^{k} [{conf}%]</th>" for k in ks)
            + "<th>mean steps</th><th>cost / success</th><th>certificate</th><th>ICC</th><th>design effect</th>"
              "<th>tasks×trials for R∞ ±</th></tr>")
    body = []
    for r in rows:
        pk = "".join(f"<td>{_f(r['pass_hat_k'].get(k, {}).get('point'))} "
                     f"{_iv(r['pass_hat_k'].get(k, {}).get('lower'), r['pass_hat_k'].get(k, {}).get('upper'))}</td>"
                     for k in ks)
        icc = (r.get("planning") or {}).get("icc", {})
        cert = r["certificate"]
        body.append(
            f"<tr data-group=\"{escape(str(r['group']))}\"><td>{r['rank']}</td>"
            f"<td class=\"rank-interval\">{r['rank_interval'][0]}–{r['rank_interval'][1]}</td>"
            f"<td>{escape(str(r['group']))}</td><td>{r['n_episodes']}</td><td>{r['n_tasks']}</td>"
            f"<td>{_f(r['pass_rate'])} {_iv(*r['pass_rate_interval'])}</td>"
            f"<td class=\"r-inf\">{_f(r['r_inf'])} {_iv(*r['r_inf_interval'])}</td>{pk}"
            f"<td>{_f(r['mean_steps'].get('point'), 2)} "
            f"{_iv(r['mean_steps'].get('lower'), r['mean_steps'].get('upper'), 2)}</td>"
            f"<td>{_f(r['cost_per_success'], 4)}</td>"
            f"<td>{escape(str(cert.get('decision')))} (R∞ {escape(str(cert.get('r_inf')))})</td>"
            f"<td>{_f(icc.get('icc'))} {_iv(*(icc.get('interval') or [None, None]))}</td>"
            f"<td>{_f(r['design_effect'], 2)}</td><td>{escape(_plan_cell(r))}</td></tr>")
    sig = [p for p in doc["pairs"] if p["significant"]]
    pair_rows = "".join(
        f"<tr><td>{escape(str(p['a']))}</td><td>{escape(str(p['b']))}</td><td>{_f(p['difference'])}</td>"
        f"<td>{_iv(*p['interval'])}</td><td>{_f(p['p_value'], 4)}</td><td>{_f(p['p_adjusted'], 4)}</td>"
        f"<td>{'yes' if p['significant'] else 'no'}</td></tr>" for p in doc["pairs"])
    width = doc["settings"].get("target_width")
    filt = (f"<p class=\"filters\">Episodes selected by: {escape(' AND '.join(filters))}</p>" if filters else
            "<p class=\"filters\">No filter: every episode of the input.</p>")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Reliability board by {escape(doc['by'])}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body {{ font-family: system-ui, sans-serif; margin: 2rem; color: #222; max-width: 1400px; }}
table {{ border-collapse: collapse; margin: 1rem 0; font-size: 0.9rem; }}
th, td {{ border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }}
th {{ background: #f4f4f4; }}
.multiplicity {{ background: #fff8e1; border-left: 4px solid #f0b400; padding: 0.5rem 1rem; }}
code {{ font-size: 0.85em; word-break: break-all; }}
</style></head><body>
<h1>Reliability board by <code>{escape(doc['by'])}</code></h1>
<p>{len(rows)} groups from <code>{escape(str(doc.get('source', '')))}</code>; intervals at {conf}% clustered by task
(design effect); {escape(str(doc['settings'].get('intervals')))} intervals with {doc['settings'].get('n_samples')}
draws; seed {doc['settings'].get('seed')}.</p>
{filt}
<p class="multiplicity" id="multiplicity"><strong>Multiplicity:</strong> {escape(doc['multiplicity'])}.
{len(sig)} of {len(doc['pairs'])} pairwise differences are significant.</p>
<figure>{board_svg(doc)}</figure>
<h2>Groups</h2>
<table id="board">{head}{''.join(body)}</table>
<p>Rank 1 is the most reliable (highest R∞). The rank interval holds every group's true rank at once with
probability ≥ {_f(1 - doc['settings'].get('level', 0.05), 2)}. pass^k: the per-task unbiased estimator with a
bootstrap over tasks when tasks repeat, else R∞^k (i.i.d. trials, labelled in the JSON). ICC: one-way ANOVA
intraclass correlation of outcomes across trials of a task; tasks×trials: tasks needed with 1, 3 or 5 trials each
for an R∞ interval of width {_f(width, 2)}.</p>
<h2>Pairwise differences of R∞</h2>
<table id="pairs"><tr><th>A</th><th>B</th><th>R∞(A) − R∞(B)</th><th>simultaneous interval</th><th>p</th>
<th>Holm-adjusted p</th><th>significant</th></tr>{pair_rows}</table>
{_metadata_table(doc.get('run_metadata') or {})}
<p><small>tracetochain {escape(str(doc.get('tracetochain_version')))} · board schema {doc.get('schema_version')}
</small></p>
</body></html>
"""


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_board_markdown(doc: dict[str, Any]) -> str:
    """The board as a Markdown table (a pull-request comment or a README section)."""
    ks = _ks(doc)
    conf = _f(doc["settings"].get("confidence", 0.95) * 100, 0)
    lines = [f"## Reliability board by `{_md(doc['by'])}`", ""]
    if doc.get("filters"):
        lines += [f"Episodes selected by: `{_md(' AND '.join(doc['filters']))}`", ""]
    lines += [f"**Multiplicity:** {_md(doc['multiplicity'])}.", "",
              "| rank | rank interval | group | episodes | pass rate | R∞ [" + conf + "%] | "
              + "".join(f"pass^{k} | " for k in ks) + "mean steps | cost/success | certificate | ICC | deff |",
              "|---|---|---|---|---|---|" + "---|" * len(ks) + "---|---|---|---|---|"]
    for r in doc["rows"]:
        icc = (r.get("planning") or {}).get("icc", {})
        pk = "".join(f"{_f(r['pass_hat_k'].get(k, {}).get('point'))} "
                     f"{_iv(r['pass_hat_k'].get(k, {}).get('lower'), r['pass_hat_k'].get(k, {}).get('upper'))} | "
                     for k in ks)
        lines.append(f"| {r['rank']} | {r['rank_interval'][0]}–{r['rank_interval'][1]} | {_md(r['group'])} | "
                     f"{r['n_episodes']} | {_f(r['pass_rate'])} | {_f(r['r_inf'])} {_iv(*r['r_inf_interval'])} | "
                     f"{pk}{_f(r['mean_steps'].get('point'), 2)} | {_f(r['cost_per_success'], 4)} | "
                     f"{_md(r['certificate'].get('decision'))} | {_f(icc.get('icc'))} | {_f(r['design_effect'], 2)} |")
    sig = [p for p in doc["pairs"] if p["significant"]]
    lines += ["", f"{len(sig)} of {len(doc['pairs'])} pairwise differences significant"
              + (":" if sig else ".")]
    lines += [f"- {_md(p['a'])} − {_md(p['b'])}: {_f(p['difference'])} {_iv(*p['interval'])} "
              f"(Holm p = {_f(p['p_adjusted'], 4)})" for p in sig]
    return "\n".join(lines) + "\n"


def board_csv(doc: dict[str, Any]) -> str:
    """One CSV row per group (the JSON's flat figures; pass^k columns per k)."""
    ks = [str(k) for k in doc.get("settings", {}).get("ks", [])]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["rank", "rank_lower", "rank_upper", "group", "n_episodes", "n_tasks", "n_success", "pass_rate",
                "pass_rate_lower", "pass_rate_upper", "r_inf", "r_inf_lower", "r_inf_upper",
                *[f"pass^{k}{s}" for k in ks for s in ("", "_lower", "_upper")], "mean_steps", "cost_per_success",
                "certificate", "r_inf_status", "icc", "design_effect", "sha256"])
    for r in doc["rows"]:
        pk = [r["pass_hat_k"].get(k, {}).get(s) for k in ks for s in ("point", "lower", "upper")]
        icc = (r.get("planning") or {}).get("icc", {}).get("icc")
        w.writerow([r["rank"], *r["rank_interval"], _csv_text(r["group"]), r["n_episodes"], r["n_tasks"],
                    r["n_success"], r["pass_rate"], *r["pass_rate_interval"], r["r_inf"], *r["r_inf_interval"], *pk,
                    r["mean_steps"].get("point"), r["cost_per_success"], r["certificate"].get("decision"),
                    r["certificate"].get("r_inf"), icc, r["design_effect"], r["sha256"]])
    return buf.getvalue()


def _csv_text(value: Any) -> str:
    """A cell that a spreadsheet would read as a formula gets a leading apostrophe (trace content is untrusted)."""
    text = str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def board_card_markdown(card: dict[str, Any]) -> str:
    """A reliability card as Markdown (to paste into a leaderboard submission)."""
    num = card["numbers"]
    g = card["group"]
    lines = [f"### Reliability card: `{_md(g['field'])}` = `{_md(g['value'])}`", "",
             f"- trajectories: {card['trajectories']['n_episodes']} episodes, {card['trajectories']['n_tasks']} "
             f"tasks, sha256 `{card['trajectories']['sha256']}`",
             f"- pass rate {_f(num['pass_rate'])} {_iv(*num['pass_rate_interval'])}",
             f"- R∞ {_f(num['r_inf'])} {_iv(*num['r_inf_interval'])}; rank {num['rank']} "
             f"(interval {num['rank_interval'][0]}–{num['rank_interval'][1]})"]
    for k, v in num["pass_hat_k"].items():
        lines.append(f"- pass^{k} {_f(v.get('point'))} {_iv(v.get('lower'), v.get('upper'))} "
                     f"({_md(v.get('estimator'))})")
    cert = card["certificate"]
    lines += [f"- mean steps {_f(num['mean_steps'].get('point'), 2)}; cost per success "
              f"{_f(num['cost_per_success'], 4)}",
              f"- certificate: {_md(cert.get('decision'))} (R∞ {_md(cert.get('r_inf'))}); design effect "
              f"{_f(num['design_effect'], 2)}",
              f"- filters: {_md(', '.join(card['filters']) or 'none')}; "
              f"settings: `{_md(json.dumps(card['settings']))}`",
              f"- multiplicity: {_md(card['multiplicity'])}", ""]
    return "\n".join(lines)
