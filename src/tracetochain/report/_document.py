"""The report document: one versioned JSON with everything a reader of the report needs.

It is the single source of truth: HTML, Markdown and the terminal render it and never recompute. Sections that
come from optional stages (the audit certificate, intervals) are ``None`` when those stages did not run.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

import numpy as np

from tracetochain._version import __version__
from tracetochain.chain import AbsorbingChain
from tracetochain.metrics import ReliabilitySummary, summarize
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
                 fallback_fraction: float = 0.1, thin_evidence: int = THIN_EVIDENCE) -> Report:
    """The report document of an :class:`~tracetochain.analysis.AnalysisResult` (every number comes from it)."""
    chain: AbsorbingChain = result.chain
    summary: ReliabilitySummary = summarize(chain, horizon=horizon, ks=ks)
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
    intervals = result.intervals(horizon=horizon, ks=ks)
    visits = result.summary.visits
    row_totals = result.summary.counts.row_totals
    thin = [{"state": n, "observations": int(row_totals[i]), "steps": int(visits[i])}
            for i, n in enumerate(chain.state_names) if row_totals[i] < thin_evidence]
    trials = cert.trials if cert is not None else None
    never_failed = [n for i, n in enumerate(chain.state_names) if result.summary.counts.exits_failure[i] == 0]
    from tracetochain.costs import cost_report

    ens = result.ensemble
    costs = cost_report(chain, traces=getattr(result, "traces", None), method=None if ens is None else "posterior",
                        confidence=ens.confidence if ens is not None else 0.95, seed=result.settings.get("seed", 0),
                        certificate=cert, ensemble=ens)
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
        "per_task_pass_k": None if trials is None or not trials.applicable else {
            "ks": list(trials.ks), "pass_hat_k": list(trials.pass_hat_k),
            "pass_hat_k_interval": [list(x) for x in trials.pass_hat_k_interval], "pass_at_k": list(trials.pass_at_k),
            "pass_at_k_interval": [list(x) for x in trials.pass_at_k_interval],
            "design_effect": trials.design_effect},
        "design_effect": result.design_effect,
        "thin_evidence": {"threshold": thin_evidence, "states": thin},
        "never_failed_states": never_failed,
        "bottlenecks": bottlenecks(chain, fraction=fallback_fraction).to_dict(),
        "costs": costs,
    })
