"""A self-contained HTML page for a drift-monitoring run: the R∞ time series and the window table."""

from __future__ import annotations

import html
from typing import Any

from tracetochain.report._plots import monitor_svg


def _p(value: float | None) -> str:
    return "baseline" if value is None else f"{value:.4f}"


def render_monitor_html(doc: dict[str, Any]) -> str:
    """Render ``MonitorResult.to_dict()``; every text field is escaped."""
    e = html.escape
    rows = "".join(
        f"<tr class=\"{'alert' if w['alert'] else ''}\"><td>{w['index']}</td><td>{e(str(w['start']))}</td>"
        f"<td>{w['n_traces']}</td><td>{w['r_inf']:.3f} [{w['r_inf_lower']:.3f}, {w['r_inf_upper']:.3f}]</td>"
        f"<td>{w['pass_rate']:.3f}</td><td>{_p(w['p_homogeneity'])}</td>"
        f"<td>{'ALERT: ' + e(', '.join(w['differing_states'])) if w['alert'] else ''}</td></tr>"
        for w in doc["windows"])
    return (
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        "<title>tracetochain drift monitor</title><style>body{font:14px/1.45 Helvetica,Arial,sans-serif;"
        "max-width:960px;margin:24px auto;color:#1f2328}table{border-collapse:collapse;width:100%}td,th{padding:4px "
        "8px;border-bottom:1px solid #eaeef2;text-align:right}td:first-child,th:first-child{text-align:left}"
        "tr.alert{background:#ffebe9}svg{max-width:100%;height:auto}</style></head><body>"
        f"<h1>Drift monitor</h1><p>{len(doc['windows'])} windows ({e(str(doc['by']))}, {doc['window']:g} per window); "
        f"baseline: {e(str(doc['baseline']))}; alert when the homogeneity p ≤ {doc['per_window_threshold']:.2g} "
        f"(α = {doc['alpha']:g} over all windows, Bonferroni). Alerts: {len(doc['alerts'])}.</p>"
        f"<figure id=\"monitor-plot\">{monitor_svg(doc['windows'])}</figure>"
        "<table id=\"windows\"><tr><th>window</th><th>start</th><th>traces</th><th>R∞ [interval]</th>"
        f"<th>pass rate</th><th>p vs baseline</th><th></th></tr>{rows}</table></body></html>")
