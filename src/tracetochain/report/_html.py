"""Self-contained HTML rendering of the report document (one file, no network, opens from disk).

Every piece of trace-derived text passes through jinja2's autoescaping; the only raw insertions are the SVGs we
generate ourselves (their text is escaped when they are built). A Content-Security-Policy forbids scripts.
"""

from __future__ import annotations

import os
import re
from importlib import resources
from typing import Any

from tracetochain.report._graph import chain_svg
from tracetochain.report._plots import fpt_svg, reliability_svg

_VERDICT = {"accept": ("ACCEPT", "accept"), "partial": ("PARTIAL", "partial"), "reject": ("REJECT", "reject"),
            "insufficient": ("INSUFFICIENT EVIDENCE", "none")}
_LAYER_TITLES = {"r_inf": "R∞ check (held out)", "timing": "success-time law (held-out KS)",
                 "order": "Markov order", "trials": "exchangeable trials"}


def _fmt(x: Any, digits: int = 4) -> str:
    if x is None:
        return "—"
    return f"{float(x):.{digits}f}"


def _scalar_items(d: dict[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for k, v in d.items():
        if k in ("kind", "schema_version", "withheld", "certified", "untested", "summary", "decision", "reasons",
                 "chain", "rdc", "settings", "trials", "layers", "outputs", "details", "splits"):
            continue
        name = f"{prefix}{k}"
        if isinstance(v, bool) or v is None:
            out.append((name, str(v)))
        elif isinstance(v, (int, float)):
            out.append((name, f"{v:.4g}"))
        elif isinstance(v, str):
            out.append((name, v))
        elif isinstance(v, dict) and len(out) < 60:
            out += _scalar_items(v, name + ".")
    return out


def _code_spans(text: str) -> Any:
    """Escape ``text``, then turn Markdown `code` spans into <code> elements (escaping first keeps it inert)."""
    import markupsafe

    escaped = str(markupsafe.escape(text))
    return markupsafe.Markup(re.sub(r"`([^`]*)`", r"<code>\1</code>", escaped))


def render_html(doc: dict[str, Any]) -> str:
    import jinja2

    m = doc["metrics"]
    cert = doc.get("certificate")
    meta = doc.get("intervals") or {}
    intervals = meta.get("metrics", {}) if isinstance(meta, dict) else {}
    status = doc.get("output_status") or {}
    timing_ok = status.get("R(d)", "certified") != "withheld"
    timing_tag = "untested" if status.get("R(d)") == "untested" else ""
    verdict_text, verdict_class = _VERDICT.get(str(cert.get("decision")).lower(), ("NOT AUDITED", "none")) \
        if cert else ("NOT AUDITED", "none")
    level = meta.get("confidence") if isinstance(meta, dict) else None

    def iv(name: str, digits: int = 4) -> str:
        q = intervals.get(name) if isinstance(intervals, dict) else None
        if isinstance(q, dict) and q.get("lower") is not None and q.get("upper") is not None:
            return f"[{_fmt(q['lower'], digits)}, {_fmt(q['upper'], digits)}]"
        return ""

    def iv_k(name: str, k: str) -> str:
        q = intervals.get(name, {}) if isinstance(intervals, dict) else {}
        q = q.get(k) if isinstance(q, dict) else None
        if isinstance(q, dict) and q.get("lower") is not None:
            return f"[{_fmt(q['lower'])}, {_fmt(q['upper'])}]"
        return ""

    band = intervals.get("reliability") if isinstance(intervals, dict) else None
    has_band = isinstance(band, dict) and band.get("lower") is not None

    def band_text(d: int) -> str:
        assert isinstance(band, dict)
        return f"[{_fmt(band['lower'][d])}, {_fmt(band['upper'][d])}]"

    horizon = m["horizon"]
    picks = sorted({d for d in (1, 2, 5, 10, 20, 30, 50, 100, horizon) if d <= horizon})
    reason = doc.get("timing_withheld_reason")
    curve = {"R": m["reliability"], "r_inf": m["r_inf"],
             "lower": band.get("lower") if has_band and isinstance(band, dict) else None,
             "upper": band.get("upper") if has_band and isinstance(band, dict) else None, "level": level or 0.95}
    rd = reliability_svg(curve, doc["empirical"]["rdc"], withheld_reason=None if timing_ok else (reason or "rejected"))
    emp = doc["empirical"]
    counts = emp.get("success_length_counts")  # documents before 0.1.x carry the lengths only
    if counts is None:
        lengths = emp.get("success_lengths") or []
        counts = [lengths.count(k) for k in range(max(lengths) + 1)] if lengths else []
    fpt = fpt_svg(counts, doc.get("model_success_pmf"),
                  withheld_reason=None if timing_ok else (reason or "rejected"))
    visits = [s["expected_visits"] for s in m["states"]]
    graph = chain_svg(doc["chain"], visits)
    emp_pass = None
    per_task = doc.get("per_task_pass_k")
    if isinstance(per_task, dict):
        emp_pass = {}
        for key in ("pass_hat_k", "pass_at_k"):
            cells = {}
            for k, v, ivl in zip(per_task["ks"], per_task[key], per_task[f"{key}_interval"], strict=True):
                if isinstance(v, (int, float)):
                    lo, hi = ivl
                    cells[str(k)] = f"{v:.4f}" + (f" [{lo:.3f}, {hi:.3f}]" if lo is not None and hi is not None
                                                  else "")
            emp_pass[key] = cells
    layers = []
    if cert:
        for name, layer in (cert.get("layers") or {}).items():
            layers.append({"title": _LAYER_TITLES.get(name, name), "status": layer["status"].replace("_", " "),
                           "p": _fmt(layer.get("p_value"), 4), "p_adjusted": _fmt(layer.get("p_adjusted"), 4),
                           "message": layer["message"], "needs": layer.get("traces_needed"),
                           "splits": (f"{100 * layer['share_rejecting']:.0f}% of {len(layer['split_p_values'])} "
                                      "splits reject alone" + (" (split-dependent)" if layer["split_dependent"]
                                                               else ""))
                           if layer.get("share_rejecting") is not None and len(layer.get("split_p_values", [])) > 1
                           else ""})
    thin = {t["state"]: t["observations"] for t in (doc.get("thin_evidence") or {}).get("states", [])}
    never_failed = set(doc.get("never_failed_states") or [])
    settings = [(k, str(v)) for k, v in (doc.get("settings") or {}).items()]
    if meta:
        settings.append(("intervals", f"{meta.get('method', '?')}, {meta.get('interval', 'percentile')}, level "
                                      f"{level}, {meta.get('n_draws', meta.get('samples', '?'))} draws, seed "
                                      f"{meta.get('seed', '?')}"))
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(lambda name: resources.files("tracetochain.report").joinpath(
            "templates").joinpath(name).read_text(encoding="utf-8")),
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["basename"] = lambda p: os.path.basename(str(p))
    env.filters["code"] = _code_spans
    template = env.get_template("report.html.j2")
    return template.render(
        doc=doc, m=m, oc=doc["source"]["outcomes"], cert=cert, timing_ok=timing_ok, verdict_text=verdict_text,
        verdict_class=verdict_class, cert_stats=_scalar_items(cert.get("statistics", cert)) if cert else [],
        fmt=_fmt, pass_k_ok=status.get("pass^k", "certified") != "withheld",
        pass_k_status=status.get("pass^k", "not audited"), timing_tag=timing_tag, layers=layers, status=status,
        thin=thin, never_failed=never_failed,
        thin_threshold=(doc.get("thin_evidence") or {}).get("threshold", 0),
        pct=lambda x: "—" if x is None else f"{100 * float(x):.1f}%", iv=iv, iv_k=iv_k, has_band=has_band,
        band_text=band_text, level_text=f"{float(level):.0%}" if level else "", picks=picks, rd_svg=rd,
        fpt_svg=fpt, graph_svg=graph, emp_pass=emp_pass, settings=settings,
        bottleneck_sentences=doc.get("bottlenecks", {}).get("sentences", []))
