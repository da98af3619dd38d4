"""The report document: one versioned JSON with everything a reader of the report needs.

It is the single source of truth: HTML, Markdown and the terminal render it and never recompute. Sections that
come from optional stages (the audit certificate, intervals) are ``None`` when those stages did not run.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from typing import Any

import numpy as np

from tracetochain._progress import phase_reporter
from tracetochain._version import __version__
from tracetochain.audit.shared import json_dict
from tracetochain.chain import AbsorbingChain
from tracetochain.families import is_first_order
from tracetochain.metrics import ReliabilitySummary, summarize
from tracetochain.quantities import quantity_rows
from tracetochain.whatif import bottlenecks

REPORT_SCHEMA_VERSION = 2
REPORT_KIND = "tracetochain.report"
#: A state or transition seen fewer times than this is marked low-confidence in every output.
THIN_EVIDENCE = 20


class Report(dict[str, Any]):
    """The report document (a plain JSON-ready dict) that also renders itself in a notebook."""

    def _repr_html_(self) -> str:
        import html as _html

        from tracetochain.report._html import render_html

        # The page is a full document with its own CSP; a sandboxed iframe keeps it apart from the notebook.
        return (f'<iframe sandbox srcdoc="{_html.escape(render_html(self), quote=True)}" '
                'style="width:100%;height:900px;border:0"></iframe>')

    def to_markdown(self) -> str:
        from tracetochain.report._markdown import render_markdown

        return render_markdown(self)


def build_report(result: Any, *, horizon: int = 50, ks: tuple[int, ...] = (1, 2, 3, 4, 5),
                 fallback_fraction: float = 0.1, thin_evidence: int = THIN_EVIDENCE,
                 findings: Any = (), paths: Any = None, cap_field: str | None = None,
                 progress: Callable[..., Any] | None = None) -> Report:
    """The report document of an :class:`~tracetochain.analysis.AnalysisResult` (every number comes from it).
    ``findings``: headline candidates of other analyses (:class:`~tracetochain.analysis._headline.Finding`, e.g. path
    patterns with q < 0.05), weighed with the analysis's own by :func:`~tracetochain.analysis._headline.headline`.
    ``paths``: the path patterns of the same traces (:func:`~tracetochain.analysis.analyze_paths`, a
    :class:`~tracetochain.paths.PathsResult` or its JSON document) for the "Paths" section (None: no section).
    ``cap_field``: the field holding each run's step cap, when the corpus has runs at several caps — R(d) thresholded
    from the largest cap is checked against the runs made at each smaller one
    (:func:`~tracetochain.audit._budget.budget_cap_check`).
    ``progress``: told each section as it starts (:func:`tracetochain._progress.phase_reporter`)."""
    step = phase_reporter(progress)
    step("report: metrics")
    chain: AbsorbingChain = result.chain
    # The chosen model's own pass^k (Σ_c w_c R_c^k when a task's trials share a class); summarize(chain) otherwise.
    metrics = getattr(result, "metrics", None)
    summary: ReliabilitySummary = metrics(horizon=horizon, ks=ks) if callable(metrics) else \
        summarize(chain, horizon=horizon, ks=ks)
    selection: Any = getattr(result, "model_choice", None)
    expanded = selection is not None and not selection.first_order
    counts = result.summary.success_length_counts()
    top = int(np.flatnonzero(counts)[-1]) if counts.any() else 0
    pmf = chain.success_pmf(max(top, horizon)) if chain.r_inf > 0 else None
    cert = result.certificate
    certificate = None if cert is None else cert.to_dict()
    if certificate is not None:
        certificate.pop("chain", None)  # the report shows the chain fitted on all traces
    statuses = {} if cert is None else {name: c.status for name, c in cert.outputs.items()}
    withheld = [o for o, st in statuses.items() if st == "withheld"]
    untested = [o for o, st in statuses.items() if st == "untested"]
    timing_status = statuses.get("R(d)", "not audited")
    timing_reason = None
    if cert is not None and timing_status != "certified":
        because = cert.outputs["R(d)"].because
        timing_reason = "; ".join(cert.layers[b].message for b in because if b in cert.layers) or None
    n_usable = result.summary.n_usable
    rdc = [float(x) for x in result.summary.empirical_rdc(horizon)]
    intervals = result.intervals(horizon=horizon, ks=ks, progress=step)
    visits = result.summary.visits
    row_totals = result.summary.counts.row_totals
    observed = result.summary.state_names  # the chain's states, unless a chosen model expanded them
    thin = [{"state": n, "observations": int(row_totals[i]), "steps": int(visits[i])}
            for i, n in enumerate(observed) if row_totals[i] < thin_evidence]
    trials = _trials_detail(cert, selection)
    never_failed = [n for i, n in enumerate(observed) if result.summary.counts.exits_failure[i] == 0]
    from tracetochain.costs import cost_report

    ens = result.ensemble
    step("report: cost section")
    if expanded:
        from tracetochain.analysis.shared import model_costs

        costs = model_costs(chain, cert, selection)
    else:
        costs = cost_report(chain, traces=getattr(result, "traces", None),
                            intervals=None if ens is None else "posterior",
                            confidence=ens.confidence if ens is not None else 0.95,
                            seed=result.settings.get("seed", 0), certificate=cert, ensemble=ens)
    from tracetochain.analysis.shared import headline
    from tracetochain.audit.shared import BUDGET_CAVEAT

    disc = getattr(result, "discrimination", None)
    cap_check = None
    if cap_field is not None:
        traces = getattr(result, "traces", None)
        if traces is None:
            raise ValueError("the step-cap check reads the runs themselves: run it on a corpus read into memory "
                             "(without --engine)")
        from tracetochain.audit.shared import budget_cap_check

        cap_check = budget_cap_check(traces, cap_field).to_dict()
    bottleneck_doc = bottlenecks(chain, fraction=fallback_fraction).to_dict()
    attribution = statuses.get("attribution")
    bottleneck_doc["status"] = attribution or "not audited"
    if attribution == "uninformative" and disc is not None:
        from tracetochain.audit.shared import uninformative_sentence

        # The shares only say where runs end; the sentences that would name a state as the cause are replaced.
        bottleneck_doc["sentences"] = ["Uninformative: " + uninformative_sentence(disc) + "."]
    return Report({
        "kind": REPORT_KIND,
        "schema_version": REPORT_SCHEMA_VERSION,
        "tracetochain_version": __version__,
        "generated_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "source": {k: v for k, v in result.source.items() if k != "report"} | {"ingest": result.ingest.to_dict()},
        "settings": dict(result.settings),
        "states": result.states_document(),
        "chain": {k: v for k, v in chain.to_dict().items() if k != "metadata"},
        "metrics": summary.to_dict(),
        "intervals": intervals,
        # Every reported scalar of the registry with its interval and certification status (what the HTML and
        # Markdown reports list, and what the gates read).
        "quantities": quantity_rows(summary.to_dict(), intervals, statuses if cert is not None else None),
        "empirical": {"rdc": rdc, "success_lengths": None,
                      "success_length_counts": [int(x) for x in counts[: top + 1]],
                      "pass_rate": result.pass_rate, "n_usable": n_usable},
        "model_success_pmf": ([float(p) / chain.r_inf for p in pmf] if pmf is not None else None),
        "certificate": certificate,
        "output_status": statuses,
        "withheld": withheld,
        "untested": untested,
        "timing_status": timing_status,
        "timing_withheld_reason": timing_reason if timing_status == "withheld" else None,
        "timing_untested_reason": timing_reason if timing_status == "untested" else None,
        "pass_k_status": statuses.get("pass^k", "not audited"),
        "pass_k_withheld": statuses.get("pass^k") == "withheld",
        "pass_k_status_by_k": None if cert is None else cert.to_dict(include_curves=False)["pass_k"]["status_by_k"],
        "per_task_pass_k": None if trials is None or not trials.applicable else {
            "ks": list(trials.ks), "pass_hat_k": list(trials.pass_hat_k),
            "pass_hat_k_interval": [list(x) for x in trials.pass_hat_k_interval], "pass_at_k": list(trials.pass_at_k),
            "pass_at_k_interval": [list(x) for x in trials.pass_at_k_interval],
            "design_effect": trials.design_effect},
        "design_effect": result.design_effect,
        "thin_evidence": {"threshold": thin_evidence, "states": thin},
        "never_failed_states": never_failed,
        "headline": headline(result, (*findings, *_path_findings(paths))).to_dict(),
        "discrimination": None if disc is None else disc.to_dict(),
        "uninformative": [o for o, st in statuses.items() if st == "uninformative"],
        "budget_caveat": BUDGET_CAVEAT,
        "budget_cap_check": cap_check,
        "bottlenecks": bottleneck_doc,
        "costs": costs,
        "model_choice": None if selection is None else model_choice_section(selection),
        "pass_k_trials": "iid" if selection is None else selection.trials,
        "states_expanded": expanded,
        "paths": None if paths is None else paths_section(paths),
    })


def _path_findings(paths: Any) -> list[Any]:
    """The headline candidate of the paths analysis (a pattern with q < 0.05), when there is one."""
    if paths is None:
        return []
    from tracetochain.analysis.shared import path_finding

    found = path_finding(paths)
    return [] if found is None else [found]


#: Pattern rows the report's "Paths" section lists (the JSON of `tracetochain paths` lists every one).
PATHS_SECTION_ROWS = 15


def paths_section(paths: Any, rows: int = PATHS_SECTION_ROWS) -> dict[str, Any]:
    """The report's "Paths" section: the paths document with its ``rows`` best-supported patterns."""
    doc = paths if isinstance(paths, dict) else paths.to_dict()
    return {**{k: v for k, v in doc.items() if k != "patterns"}, "patterns": list(doc["patterns"][:rows]),
            "n_patterns_listed": min(rows, len(doc["patterns"]))}


def _trials_detail(cert: Any, selection: Any) -> Any:
    """The per-task pass^k behind the report's observed column: the certificate's trials layer for the first-order
    chain; for a chosen model, the first-order certificate's (the model's own layer tests it on held-out tasks)."""
    from tracetochain.audit import TrialsResult

    found = cert.trials if cert is not None else None
    if isinstance(found, TrialsResult):
        return found
    if selection is not None:
        for c in selection.candidates:
            layer = c.layers.get("trials") if is_first_order(c.name) else None
            if layer is not None and isinstance(layer.detail, TrialsResult):
                return layer.detail
    return None


def model_choice_section(selection: Any) -> dict[str, Any]:
    """The report's "Model choice" section: the candidates side by side (held-out log-likelihood with its standard
    error, parameters, each certificate layer's status and p-value, held-out L∞) and the sentence saying why."""
    doc = selection.to_dict()
    rows = []
    for c in selection.candidates:
        rows.append({
            "name": c.name, "family": c.family, "size": c.size, "n_parameters": c.n_parameters,
            "heldout_loglik_per_trace": c.heldout_loglik_per_trace, "heldout_loglik_se": c.heldout_loglik_se,
            "gain_vs_baseline": c.gain_vs_baseline, "z_vs_baseline": c.z_vs_baseline, "chosen": c.chosen,
            "verdict": c.verdict, "checked": c.checked, "l_inf": c.l_inf, "timing_null": c.timing_null,
            "note": c.note,
            "layers": {name: {"status": layer.status, "p_value": layer.p_value, "p_adjusted": layer.p_adjusted}
                       for name, layer in c.layers.items()}})
    checked = [r for r in rows if r["checked"]]
    return json_dict({"requested": doc["requested"], "chosen": doc["chosen"], "family": doc["family"],
            "first_order": doc["first_order"], "trials": doc["trials"], "reason": doc["reason"],
            "why": _why(selection), "grouped_by": doc["grouped_by"], "n_units": doc["n_units"],
            "z_threshold": doc["z_threshold"], "splits": doc["splits"], "rule": doc["rule"], "candidates": rows,
            "n_checked": len(checked), "notes": doc["notes"], "compiled": doc.get("compiled"),
            "intervals": doc["intervals"]})


def _why(selection: Any) -> str:
    """One sentence: which model the numbers of the report come from, and why."""
    if selection.requested == "auto":
        if selection.first_order:
            return (f"The first-order chain is used: among {len(selection.candidates)} candidates none beat it on "
                    f"held-out traces by enough ({selection.reason.split(': ', 1)[-1]}).")
        return (f"{selection.chosen} is used: it predicts held-out {selection.grouped_by}s best among "
                f"{len(selection.candidates)} candidates, with the fewest parameters of those within one standard "
                f"error ({selection.reason.split(': ', 1)[-1]}).")
    return f"{selection.chosen} is used: {selection.reason}."
