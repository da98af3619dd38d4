"""Compact Markdown rendering of the report document, suited to a pull-request comment.

Trace content (state names, the source path, reasons that quote them) is untrusted: names go into code spans no
content can break (:func:`tracetochain._text.markdown_code`), other text through
:func:`tracetochain._text.markdown_text`, so a backtick, ``\r`` or ``@`` in a name cannot add images, links,
mentions, headings or task lists to the comment; the comment stays under GitHub's 65,536-character limit.
"""

from __future__ import annotations

from typing import Any

from tracetochain._display import fmt_number
from tracetochain._text import markdown_code, markdown_text
from tracetochain.quantities import format_row

#: GitHub refuses comments longer than 65,536 characters; stay well below.
MAX_COMMENT_CHARS = 60_000


def _f(x: Any, digits: int = 3) -> str:
    """The project's number rule (``fmt_number``): a p of 3e-5 reads 3.0e-05, never 0.000."""
    return fmt_number(None if x is None else float(x), digits)


def _cell(text: str) -> str:
    """Free text in a table cell or a quote: Markdown punctuation (| included) escaped, one line."""
    return markdown_text(text)


def _bottleneck_lines(bottlenecks: dict[str, Any]) -> list[str]:
    """The bottleneck sentences of :meth:`BottleneckReport.sentences`, with each state name as a safe code span (or,
    when the held-out discrimination made the state advice uninformative, the sentence that says so)."""
    if bottlenecks.get("status") == "uninformative":
        return [markdown_text(s) for s in bottlenecks.get("sentences", [])]
    out = []
    top = [b for b in bottlenecks.get("by_failure_share", [])[:3] if b.get("failure_share", 0) > 0]
    if top:
        out.append("Most failures leave from " + ", ".join(
            f"{markdown_code(b['state'], in_table=False)} ({b['failure_share']:.0%})" for b in top) + ".")
    gain = bottlenecks.get("by_gain", [])
    if gain and gain[0].get("fallback_gain", 0) > 0:
        b = gain[0]
        out.append(f"A fallback that rescues {float(bottlenecks.get('fraction', 0.1)):.0%} of "
                   f"{markdown_code(b['state'], in_table=False)}'s failures would raise R∞ by "
                   f"{b['fallback_gain']:+.4f} — the largest single-state gain.")
    return out


def _headline_text(head: dict[str, Any]) -> str:
    """The headline with the state it names as a safe code span, the rest as escaped text."""
    sentence = str(head.get("sentence", ""))
    state = (head.get("evidence") or {}).get("state")
    if state is not None and f"`{state}`" in sentence:
        before, after = sentence.split(f"`{state}`", 1)
        return markdown_text(before) + markdown_code(str(state), in_table=False) + markdown_text(after)
    return markdown_text(sentence)


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
    head = doc.get("headline")
    lines = [f"### Agent reliability: **{decision}**", "", *([_headline_text(head), ""] if head else []),
             f"{markdown_code(doc['source']['path'], in_table=False)} — {doc['source']['n_traces']} traces "
             f"({oc['success']} success, {oc['failure']} failure, {oc['censored']} censored, {oc['invalid']} invalid)"
             + _selection(doc["source"].get("ingest") or {}),
             "", "| metric | value |", "|---|---|",
             f"| R∞ (eventual success) | {_f(m['r_inf'])}{interval('r_inf')} |",
             f"| observed pass rate | {_f(doc['empirical']['pass_rate'])} |"]
    for d in (10, 20, 50):
        if d <= m["horizon"]:
            value = _f(m["reliability"][d]) if timing_ok else "withheld"
            lines.append(f"| R({d}) | {value} |")
    lines.append(f"| mean steps (MTTA) | {_f(m['mean_steps'], 1) if timing_ok else 'withheld'} |")
    disc = doc.get("discrimination") or {}
    auc = disc.get("auc") or {}
    if disc.get("available") and auc.get("point") is not None:
        band = f" [{_f(auc['lower'], 2)}, {_f(auc['upper'], 2)}]" if auc.get("lower") is not None else ""
        lines.append(f"| held-out AUC of P(success \\| path) | {_f(auc['point'], 2)}{band} |")
    mc = doc.get("model_choice")
    model_path = mc is not None and not mc.get("first_order")
    for k in ("1", "3", "5"):
        if k in m["pass_hat_k"]:
            if pass_k == "withheld" and k != "1":
                value = ("withheld (the model's pass^k disagrees with held-out tasks)" if model_path else
                         "withheld (tasks differ: see the per-task values)")
            else:
                value = f"{_f(m['pass_hat_k'][k])} / {_f(m['pass_at_k'][k])}"
                if pass_k == "untested" and k != "1":
                    value += " (assumes i.i.d. trials; untested)"
                elif pass_k == "certified" and (doc.get("pass_k_status_by_k") or {}).get(k) == "untested":
                    value += f" (untested: no two tasks were tried {k} times)"
            lines.append(f"| pass^{k} / pass@{k} | {value} |")
    lines.append("")
    lines += _quantity_lines(doc.get("quantities"))
    if doc.get("budget_caveat"):
        lines += [f"> R(d): {markdown_text(doc['budget_caveat'])}", ""]
    for c in (doc.get("budget_cap_check") or {}).get("comparisons", []):
        lines += [f"> Step cap {c['cap']:g}: thresholding the {c['reference_cap']:g}-step runs predicts "
                  f"{_f(c['predicted'], 2)}, the runs capped at {c['cap']:g} pass {_f(c['observed'], 2)} "
                  f"(difference {c['difference']:+.2f} [{c['lower']:+.2f}, {c['upper']:+.2f}]"
                  + ("" if c["consistent"] else "; thresholding does not predict the capped runs") + ").", ""]
    if doc.get("uninformative"):
        lines += [f"> Uninformative: {markdown_text(', '.join(doc['uninformative']))} — the states do not separate "
                  "failing from succeeding held-out runs.", ""]
    if not timing_ok:
        reason = doc.get("timing_withheld_reason") or "audit rejected timing"
        lines += [f"> Timing outputs withheld: {markdown_text(reason)}", ""]
    if cert and cert.get("layers"):
        lines += ["| audit layer | status | p |", "|---|---|---|"]
        for name, layer in cert["layers"].items():
            lines.append(f"| {_cell(name)} | {_cell(layer['status'].replace('_', ' '))} | {_f(layer.get('p_value'))} |")
        lines.append("")
    lines += _model_choice_lines(mc)
    lines += _bottleneck_lines(doc.get("bottlenecks") or {})
    lines += _cost_lines(doc.get("costs"))
    lines += _paths_lines(doc.get("paths"))
    text = "\n".join(lines).rstrip() + "\n"
    if len(text) > MAX_COMMENT_CHARS:  # cannot happen with names cut to their display length; a last guard
        text = text[:MAX_COMMENT_CHARS].rsplit("\n", 1)[0] + "\n\n_(cut to fit a pull-request comment)_\n"
    return text


def _quantity_lines(rows: list[dict[str, Any]] | None) -> list[str]:
    """Every reported number of the registry with its interval and certification status (the report's
    ``quantities``; absent from reports written before the registry)."""
    if not rows:
        return []
    out = ["<details><summary>Every reported number</summary>", "", "| quantity | value | interval | status |",
           "|---|---|---|---|"]
    for row in rows:
        value, interval = format_row(row)
        out.append(f"| {_cell(row['label'])} | {value} | {interval} | {_cell(row['status'])} |")
    return [*out, "", "</details>", ""]


def _paths_lines(paths: dict[str, Any] | None, rows: int = 5) -> list[str]:
    """The "Paths" section: the best-supported patterns (q < 0.05 first) with their differences and q-values."""
    if not paths:
        return []
    out = ["", f"**Paths that go with failure** ({paths['n_candidates']} patterns tested, "
               f"{paths['n_supported']} with q < 0.05, Benjamini–Yekutieli)", ""]
    top = paths.get("top_finding")
    if top is None:
        out += ["No path pattern separates succeeding from failing runs at a false discovery rate of 0.05.", ""]
    else:
        out += [markdown_text(str(top["sentence"])), ""]
    out += ["| pattern | share | success with / without | difference | q |", "|---|---|---|---|---|"]
    for r in paths["patterns"][:rows]:
        d = r["difference"]
        out.append(f"| {markdown_code(r['pattern'])} | {100 * r['share']:.0f}% | {100 * r['success_with']:.0f}% / "
                   f"{100 * r['success_without']:.0f}% | {100 * d['point']:+.0f} [{100 * d['lower']:+.0f}, "
                   f"{100 * d['upper']:+.0f}] pts | {_f(r['q_value'])} |")
    return out


def _model_choice_lines(mc: dict[str, Any] | None) -> list[str]:
    """The model-choice table: every candidate's held-out log-likelihood, parameters and certificate layers."""
    if not mc:
        return []

    def layer(c: dict[str, Any], name: str) -> str:
        if not c.get("checked"):
            return "—"
        entry = (c.get("layers") or {}).get(name)
        if not entry:
            return "—"
        p = entry.get("p_value")
        status = str(entry.get("status", "")).replace("_", " ")
        return _cell(status if p is None else f"{status} (p {float(p):.3g})")

    out = [f"#### Model: {markdown_code(str(mc['chosen']), in_table=False)}", "", markdown_text(str(mc["why"])), "",
           "| candidate | parameters | held-out LL / trace (± se) | gain vs first-order (z) | R∞ | timing | trials |",
           "|---|---|---|---|---|---|---|"]
    for c in mc["candidates"]:
        ll, se = c.get("heldout_loglik_per_trace"), c.get("heldout_loglik_se")
        gain, z = c.get("gain_vs_baseline"), c.get("z_vs_baseline")
        name = markdown_code(str(c["name"])) + (" **✓**" if c.get("chosen") else "")
        out.append(f"| {name} | {'—' if c.get('n_parameters') is None else c['n_parameters']} | "
                   f"{'—' if ll is None else f'{ll:.3f}'}{'' if se is None else f' ± {se:.3f}'} | "
                   f"{'—' if gain is None else f'{gain:+.1f}'}{'' if z is None else f' ({z:+.1f})'} | "
                   f"{layer(c, 'r_inf')} | {layer(c, 'timing')} | {layer(c, 'trials')} |")
    out.append("")
    return out


def _cost_lines(costs: dict[str, Any] | None) -> list[str]:
    """Cost per success, model (with interval) beside observed, for every cost metric."""
    if not costs:
        return []
    if not costs.get("available"):
        return ["", f"_No cost figures: {_cell(costs.get('reason') or '')}._"]
    from tracetochain._display import fmt_amount

    out = ["", "| cost | per attempt | per success (model) | per success (observed) | spent on failures |",
           "|---|---|---|---|---|"]
    withheld = (costs.get("certification") or {}).get("status") == "withheld"
    for metric, entry in costs["metrics"].items():
        if withheld:
            obs = (entry.get("observed") or {}).get("per_success")
            unit = entry["summary"]["unit"]
            out.append(f"| {markdown_code(metric)} | withheld | withheld | "
                       f"{fmt_amount(obs, unit) if obs is not None else '—'} | withheld |")
            continue
        s = entry["summary"]
        u = s["unit"]
        q = (entry.get("intervals") or {}).get("per_success") or {}
        iv = f" [{fmt_amount(q['lower'], u)}, {fmt_amount(q['upper'], u)}]" if q.get("lower") is not None else ""
        obs = (entry.get("observed") or {}).get("per_success")
        share = "—" if s["failed_share"] is None else f"{100 * s['failed_share']:.0f}%"
        out.append(f"| {markdown_code(metric)} | {fmt_amount(s['mean'], u)} | {fmt_amount(s['per_success'], u)}{iv} | "
                   f"{fmt_amount(obs, u) if obs is not None else '—'} | {share} |")
    if (costs.get("certification") or {}).get("status") == "withheld":
        out.append(f"> Cost figures withheld: {_cell(costs['certification'].get('reason') or '')}")
    return out


def _selection(ingest: dict[str, Any]) -> str:
    """The --where filter and the verdict field a reader found, as a clause after the trace counts."""
    parts = []
    if ingest.get("filters"):
        parts.append("selected by " + " AND ".join(markdown_code(f, in_table=False) for f in ingest["filters"]))
    if ingest.get("verdict_field"):
        parts.append("verdict field " + markdown_code(ingest["verdict_field"], in_table=False))
    if isinstance(ingest.get("run_metadata"), dict) and ingest["run_metadata"].get("n_files"):
        parts.append(f"{ingest['run_metadata']['n_files']} input files")
    return ("; " + "; ".join(parts)) if parts else ""
