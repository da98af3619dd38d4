"""Self-contained HTML rendering of the report document (one file, no network, opens from disk).

Every piece of trace-derived text passes through jinja2's autoescaping; the only raw insertions are the SVGs we
generate ourselves (their text is escaped when they are built). A Content-Security-Policy forbids scripts.
"""

from __future__ import annotations

import os
import re
from importlib import resources
from typing import Any

from tracetochain._display import fmt_number
from tracetochain._text import DISPLAY_NAME_LIMIT, shorten
from tracetochain.quantities import format_row
from tracetochain.report._graph import chain_svg, graph_note
from tracetochain.report._plots import fpt_svg, reliability_svg

_VERDICT = {"accept": ("ACCEPT", "accept"), "partial": ("PARTIAL", "partial"), "reject": ("REJECT", "reject"),
            "insufficient": ("INSUFFICIENT EVIDENCE", "none")}
_LAYER_TITLES = {"r_inf": "R∞ check (held out)", "timing": "success-time law (held-out KS)",
                 "order": "Markov order", "trials": "exchangeable trials"}


def _fmt(x: Any, digits: int = 4) -> str:
    return fmt_number(x, digits)


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
    transitions = transition_rows(doc["chain"], visits)
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
    expanded = bool(doc.get("states_expanded"))
    # Thin evidence and "never failed" are about the observed states; a chosen model's expanded states may share a
    # name with one of them without being it, so they are marked only on the first-order chain.
    thin = {} if expanded else {t["state"]: t["observations"]
                                for t in (doc.get("thin_evidence") or {}).get("states", [])}
    never_failed = set() if expanded else set(doc.get("never_failed_states") or [])
    mc = doc.get("model_choice")
    pass_k = _pass_k_labels(doc, cert)
    costs_view = _costs_view(doc.get("costs"))
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
    env.filters["name"] = shorten  # trace content shown at a bounded length (the JSON report keeps it whole)
    template = env.get_template("report.html.j2")
    return template.render(
        doc=doc, m=m, oc=doc["source"]["outcomes"], cert=cert, timing_ok=timing_ok, verdict_text=verdict_text,
        verdict_class=verdict_class, cert_stats=_scalar_items(cert.get("statistics", cert)) if cert else [],
        fmt=_fmt, pass_k_ok=status.get("pass^k", "certified") != "withheld",
        pass_k_status=status.get("pass^k", "not audited"), pass_k_by_k=doc.get("pass_k_status_by_k") or {},
        timing_tag=timing_tag, layers=layers, status=status,
        thin=thin, never_failed=never_failed,
        thin_threshold=(doc.get("thin_evidence") or {}).get("threshold", 0),
        pct=lambda x: "—" if x is None else f"{100 * float(x):.1f}%", iv=iv, iv_k=iv_k, has_band=has_band,
        band_text=band_text, level_text=f"{float(level):.0%}" if level else "", picks=picks, rd_svg=rd,
        fpt_svg=fpt, graph_svg=graph, graph_note=graph_note(doc["chain"]), transitions=transitions,
        emp_pass=emp_pass, settings=settings,
        bottleneck_sentences=[shorten(s, 4 * DISPLAY_NAME_LIMIT)
                              for s in doc.get("bottlenecks", {}).get("sentences", [])], costs=costs_view,
        mc=mc, paths=doc.get("paths"), quantities=[(row, *format_row(row)) for row in doc.get("quantities") or []],
        **_model_choice_view(mc), **pass_k, **_discrimination_view(doc))


def _discrimination_view(doc: dict[str, Any]) -> dict[str, Any]:
    """The headline sentence and the held-out AUC card (empty when the document has none)."""
    head = (doc.get("headline") or {}).get("sentence")
    disc = doc.get("discrimination") or {}
    auc = disc.get("auc") or {}
    ok = bool(disc.get("available")) and auc.get("point") is not None
    return {"lead": shorten(head, 6 * DISPLAY_NAME_LIMIT) if head else None,
            "disc_auc": f"{auc['point']:.2f}" if ok else None,
            "disc_band": (f"[{auc['lower']:.2f}, {auc['upper']:.2f}], {disc.get('n_traces')} runs"
                          if ok and auc.get("lower") is not None else "")}


def _layer_cell(layer: dict[str, Any] | None) -> str:
    """A certificate layer in one table cell: its status and p-value (family-adjusted where it differs)."""
    if not layer:
        return "—"
    status = str(layer.get("status", "")).replace("_", " ")
    p = layer.get("p_value")
    if p is None:
        return status
    text = f"{status} (p {float(p):.3g}"
    adj = layer.get("p_adjusted")
    if adj is not None and abs(float(adj) - float(p)) > 1e-12:
        text += f", adjusted {float(adj):.3g}"
    return text + ")"


def _model_choice_view(mc: dict[str, Any] | None) -> dict[str, Any]:
    """The rows of the "Model choice" table and what goes beside it (no number is recomputed)."""
    if not mc:
        return {"mc_rows": [], "mc_rule": "", "mc_classes": [], "mc_attribution": []}
    rows = []
    for c in mc["candidates"]:
        ll = c.get("heldout_loglik_per_trace")
        se = c.get("heldout_loglik_se")
        gain, z = c.get("gain_vs_baseline"), c.get("z_vs_baseline")
        layers = c.get("layers") or {}
        checked = bool(c.get("checked"))
        rows.append({
            "name": c["name"], "family": c["family"], "chosen": bool(c.get("chosen")),
            "params": "—" if c.get("n_parameters") is None else str(c["n_parameters"]),
            "ll": "—" if ll is None else f"{ll:.3f}" + ("" if se is None else f" ± {se:.3f}"),
            "gain": "—" if gain is None else f"{gain:+.1f}" + ("" if z is None else f" ({z:+.1f})"),
            "r_inf": _layer_cell(layers.get("r_inf")) if checked else "not checked",
            "timing": _layer_cell(layers.get("timing")) if checked else "—",
            "trials": _layer_cell(layers.get("trials")) if checked else "—",
            "order": _layer_cell(layers.get("order")) if checked else "—",
            "l_inf": "—" if c.get("l_inf") is None else f"{c['l_inf']:.3f}",
            "verdict": c.get("verdict", "") + (f"; {c['note']}" if c.get("note") else "")})
    splits = mc.get("splits") or {}
    rule = (f"Held-out log-likelihood over the analysis's {splits.get('n_splits')} splits of {mc.get('n_units')} "
            f"{mc.get('grouped_by')}s ({float(splits.get('test_fraction') or 0):.0%} held out each time, by id hash, "
            f"seed {splits.get('seed')}): a candidate must beat the first-order chain by "
            + (f"{mc['z_threshold']:.2f} " if isinstance(mc.get("z_threshold"), (int, float)) else "")
            + "standard errors of the summed gain over units; among those that do, the one with the fewest "
              "parameters within one standard error of the best is chosen. The first-order chain, the choice and "
              "the best of every family are checked with the certificate's held-out layers (each layer that applies at "
              "level / L); the choice's layers are its certificate.")
    classes = []
    attribution: list[tuple[str, float]] = []
    compiled = mc.get("compiled") or {}
    if compiled.get("n_classes", 1) > 1:
        classes = [{"name": f"class {i + 1}", "weight": f"{w:.3f}", "r_inf": f"{r:.3f}"}
                   for i, (w, r) in enumerate(zip(compiled["class_weights"], compiled["class_r_inf"], strict=True))]
    overall = (compiled.get("failure_attribution") or {}).get("overall") or {}
    attribution = sorted(((str(k), float(v)) for k, v in overall.items()), key=lambda kv: -kv[1])
    return {"mc_rows": rows, "mc_rule": rule, "mc_classes": classes, "mc_attribution": attribution}


def _pass_k_labels(doc: dict[str, Any], cert: dict[str, Any] | None) -> dict[str, Any]:
    """The column label and the assumption sentence of the pass^k table: the first-order chain's i.i.d. trials, or
    the chosen model's own law of a task's trials."""
    mc = doc.get("model_choice")
    if not mc or mc.get("first_order"):
        return {"pass_k_source": "chain, i.i.d.", "pass_k_withheld_note": "", "pass_k_untested_note": "",
                "pass_k_assumption": "Chain values assume i.i.d. trials (pass^k = R∞^k, pass@k = 1 − (1 − R∞)^k)"}
    layer = ((cert or {}).get("layers") or {}).get("trials") or {}
    if doc.get("pass_k_trials") == "task":
        source = f"model {mc['chosen']}"
        assumption = ("Model values: a task draws its class once and its trials then succeed independently with "
                      "that class's R∞ (pass^k = Σ_c w_c R_c^k, pass@k = 1 − Σ_c w_c (1 − R_c)^k)")
    else:
        source = f"model {mc['chosen']}, i.i.d."
        assumption = (f"Model values assume i.i.d. trials of the {mc['chosen']} model (pass^k = R∞^k, "
                      "pass@k = 1 − (1 − R∞)^k)")
    return {"pass_k_source": source, "pass_k_assumption": assumption,
            "pass_k_withheld_note": str(layer.get("message") or ""),
            "pass_k_untested_note": str(layer.get("message") or "")}


def transition_rows(chain: dict[str, Any], visits: list[float], min_prob: float = 0.01) -> list[tuple[str, str, str,
                                                                                                      str]]:
    """Every transition and exit of at least ``min_prob`` as (from, to, probability, expected uses per attempt),
    the most used first: the table behind the graph, which draws only the main ones."""
    names = [str(n) for n in chain["state_names"]]
    rows: list[tuple[float, str, str, float]] = []
    for i, name in enumerate(names):
        targets = [(names[j], float(p)) for j, p in enumerate(chain["Q"][i])]
        targets += [("success", float(chain["R_success"][i])), ("failure", float(chain["R_failure"][i]))]
        rows += [(visits[i] * p, name, to, p) for to, p in targets if p >= min_prob]
    rows.sort(key=lambda r: -r[0])
    return [(a, b, f"{p:.3f}", f"{flow:.2f}") for flow, a, b, p in rows]


def _costs_view(doc: dict[str, Any] | None) -> dict[str, Any] | None:
    """The cost section, formatted: rows per metric (model per attempt / per success with intervals, observed per
    success), the R(B) plot of the primary metric, where failed spend goes, and the notes. None: no cost stage."""
    if doc is None:
        return None
    from tracetochain._display import fmt_amount
    from tracetochain.report._plots import budget_svg

    cert = doc.get("certification") or {}
    view: dict[str, Any] = {"available": bool(doc.get("available")), "reason": doc.get("reason"),
                            "status": cert.get("status"), "status_reason": cert.get("reason"),
                            "rests_on": ", ".join(cert.get("rests_on") or ()), "rows": [], "states": [],
                            "sentences": [], "notes": list(doc.get("notes") or []), "svg": None, "budget_note": None,
                            "settings": doc.get("interval_settings")}
    if not view["available"]:
        return view
    withheld = cert.get("status") == "withheld"

    def iv_text(entry: dict[str, Any], key: str, unit: str) -> str:
        q = (entry.get("intervals") or {}).get(key) or {}
        return f"[{fmt_amount(q['lower'], unit)}, {fmt_amount(q['upper'], unit)}]" if q.get("lower") is not None \
            else ""

    for metric, entry in doc["metrics"].items():
        s = entry["summary"]
        u = s["unit"]
        obs = entry.get("observed") or {}
        obs_iv = obs.get("per_success_interval")
        agree = (entry.get("agreement") or {}).get("observed_inside_interval")
        if withheld:  # the model's figures rest on the rejected layers: shown as withheld, the observed kept
            view["rows"].append({"metric": metric, "per_attempt": "withheld", "per_attempt_iv": "",
                                 "per_success": "withheld", "per_success_iv": "",
                                 "observed": fmt_amount(obs.get("per_success"), u) if obs else "—",
                                 "observed_iv": f"[{fmt_amount(obs_iv[0], u)}, {fmt_amount(obs_iv[1], u)}]"
                                 if obs_iv else "", "agree": "", "given_success": "withheld",
                                 "given_failure": "withheld", "failed_share": "withheld",
                                 "findings": s.get("findings", [])})
            continue
        view["rows"].append({
            "metric": metric, "per_attempt": fmt_amount(s["mean"], u), "per_attempt_iv": iv_text(entry, "mean", u),
            "per_success": fmt_amount(s["per_success"], u), "per_success_iv": iv_text(entry, "per_success", u),
            "observed": fmt_amount(obs.get("per_success"), u) if obs else "—",
            "observed_iv": f"[{fmt_amount(obs_iv[0], u)}, {fmt_amount(obs_iv[1], u)}]" if obs_iv else "",
            "agree": "" if agree is None else ("yes" if agree else "no"),
            "given_success": fmt_amount(s["mean_given_success"], u),
            "given_failure": fmt_amount(s["mean_given_failure"], u),
            "failed_share": "—" if s["failed_share"] is None else f"{100 * s['failed_share']:.0f}%",
            "findings": s.get("findings", [])})
    primary = doc["metrics"][doc["primary"]]
    s = primary["summary"]
    view["sentences"] = [] if withheld else s.get("sentences", [])
    view["primary"] = doc["primary"]
    view["states"] = [{"name": st["name"], "per_visit": fmt_amount(st["per_visit_mean"], s["unit"]),
                       "visits": f"{st['expected_visits']:.2f}", "spend": fmt_amount(st["spend"], s["unit"]),
                       "failed": fmt_amount(st["failed_spend"], s["unit"]),
                       "failed_share": f"{100 * st['failed_spend_share']:.0f}%",
                       "imputed": st["imputed"]}
                      for st in sorted(s["states"], key=lambda x: -x["failed_spend"])[:10]] if not withheld else []
    budget = primary.get("budget")
    if budget:
        observed = (primary.get("observed") or {}).get("reliability_at_budgets")
        view["svg"] = budget_svg(budget, primary.get("budget_band"), observed,
                                 withheld_reason=cert.get("reason") if withheld else None)
        view["budget_note"] = (f"Model R(B) on a lattice of step {fmt_amount(budget['step'], budget['unit'])} "
                               f"({budget['n_levels']} levels): every listed value is within "
                               f"{budget['error_bound']:.2g} of the exact model value (visit costs rounded up and "
                               f"down bracket it); per-visit costs {budget['per_visit_law']}-distributed with the "
                               f"estimated mean and variance. Success mass beyond the last budget: "
                               f"{budget['residual']:.2g}.")
    return view
