"""Compact Markdown rendering of the report document, suited to a pull-request comment."""

from __future__ import annotations

from typing import Any


def _f(x: Any, digits: int = 3) -> str:
    return "—" if x is None else f"{float(x):.{digits}f}"


def _cell(text: str) -> str:
    """Table-safe text: no pipes, newlines or raw HTML from trace content."""
    return (str(text).replace("|", "\\|").replace("\n", " ").replace("<", "&lt;").replace(">", "&gt;"))


def render_markdown(doc: dict[str, Any]) -> str:
    m = doc["metrics"]
    cert = doc.get("certificate")
    iv = (doc.get("intervals") or {}).get("metrics", {})
    raw = str(cert.get("decision", "")) if cert else ""
    decision = ("INSUFFICIENT EVIDENCE" if raw == "insufficient" else raw.upper()) if cert else "NOT AUDITED"

    def interval(name: str) -> str:
        q = iv.get(name) if isinstance(iv, dict) else None
        return f" [{_f(q['lower'])}, {_f(q['upper'])}]" if isinstance(q, dict) and q.get("lower") is not None else ""

    status = doc.get("output_status") or {}
    timing_ok = status.get("R(d)", "certified") != "withheld"
    pass_k = status.get("pass^k", "not audited")
    oc = doc["source"]["outcomes"]
    lines = [f"### Agent reliability: **{decision}**", "",
             f"`{_cell(doc['source']['path'])}` — {doc['source']['n_traces']} traces "
             f"({oc['success']} success, {oc['failure']} failure, {oc['censored']} censored, {oc['invalid']} invalid)",
             "", "| metric | value |", "|---|---|",
             f"| R∞ (eventual success) | {_f(m['r_inf'])}{interval('r_inf')} |",
             f"| observed pass rate | {_f(doc['empirical']['pass_rate'])} |"]
    for d in (10, 20, 50):
        if d <= m["horizon"]:
            value = _f(m["reliability"][d]) if timing_ok else "withheld"
            lines.append(f"| R({d}) | {value} |")
    lines.append(f"| mean steps (MTTA) | {_f(m['mean_steps'], 1) if timing_ok else 'withheld'} |")
    for k in ("1", "3", "5"):
        if k in m["pass_hat_k"]:
            if pass_k == "withheld" and k != "1":
                value = "withheld (tasks differ: see the per-task values)"
            else:
                value = f"{_f(m['pass_hat_k'][k])} / {_f(m['pass_at_k'][k])}"
                if pass_k == "untested" and k != "1":
                    value += " (assumes i.i.d. trials; untested)"
            lines.append(f"| pass^{k} / pass@{k} | {value} |")
    lines.append("")
    if not timing_ok:
        lines += [f"> Timing outputs withheld: {_cell(doc.get('timing_withheld_reason') or 'audit rejected timing')}",
                  ""]
    if cert and cert.get("layers"):
        lines += ["| audit layer | status | p |", "|---|---|---|"]
        for name, layer in cert["layers"].items():
            lines.append(f"| {_cell(name)} | {_cell(layer['status'].replace('_', ' '))} | {_f(layer.get('p_value'))} |")
        lines.append("")
    for sentence in doc.get("bottlenecks", {}).get("sentences", []):
        lines.append(_cell(sentence).replace("\\|", "|"))
    lines += _cost_lines(doc.get("costs"))
    return "\n".join(lines).rstrip() + "\n"


def _cost_lines(costs: dict[str, Any] | None) -> list[str]:
    """Cost per success, model (with interval) beside observed, for every cost metric."""
    if not costs:
        return []
    if not costs.get("available"):
        return ["", f"_No cost figures: {_cell(costs.get('reason') or '')}._"]
    from tracetochain.costs import fmt_amount

    out = ["", "| cost | per attempt | per success (model) | per success (observed) | spent on failures |",
           "|---|---|---|---|---|"]
    withheld = (costs.get("certification") or {}).get("status") == "withheld"
    for metric, entry in costs["metrics"].items():
        if withheld:
            obs = (entry.get("observed") or {}).get("per_success")
            unit = entry["summary"]["unit"]
            out.append(f"| {_cell(metric)} | withheld | withheld | "
                       f"{fmt_amount(obs, unit) if obs is not None else '—'} | withheld |")
            continue
        s = entry["summary"]
        u = s["unit"]
        q = (entry.get("intervals") or {}).get("per_success") or {}
        iv = f" [{fmt_amount(q['lower'], u)}, {fmt_amount(q['upper'], u)}]" if q.get("lower") is not None else ""
        obs = (entry.get("observed") or {}).get("per_success")
        share = "—" if s["failed_share"] is None else f"{100 * s['failed_share']:.0f}%"
        out.append(f"| {_cell(metric)} | {fmt_amount(s['mean'], u)} | {fmt_amount(s['per_success'], u)}{iv} | "
                   f"{fmt_amount(obs, u) if obs is not None else '—'} | {share} |")
    if (costs.get("certification") or {}).get("status") == "withheld":
        out.append(f"> Cost figures withheld: {_cell(costs['certification'].get('reason') or '')}")
    return out
