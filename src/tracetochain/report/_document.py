"""The report document: one versioned JSON with everything a reader of the report needs.

It is the single source of truth: HTML, Markdown and the terminal render it and never recompute. Sections that
come from optional stages (the audit certificate, intervals) are ``None`` when those stages did not run.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from tracetochain._version import __version__
from tracetochain.metrics import ReliabilitySummary, empirical_rdc, success_lengths, summarize
from tracetochain.pipeline import FitResult
from tracetochain.whatif import bottlenecks

REPORT_SCHEMA_VERSION = 1
REPORT_KIND = "tracetochain.report"
#: Outputs that depend on the timing of the chain (withheld when the KS timing layer rejects); names as in the
#: certificate's ``withheld`` list.
TIMING_OUTPUTS = ("R(d)", "RDC", "horizons", "step_budgets", "mean_steps")


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


def build_report(fit: FitResult, *, horizon: int = 50, ks: tuple[int, ...] = (1, 2, 3, 4, 5),
                 certificate: dict[str, Any] | None = None, intervals: dict[str, Any] | None = None,
                 settings: dict[str, Any] | None = None, fallback_fraction: float = 0.1) -> Report:
    """Assemble the report document from a fit (and, when run, the certificate and intervals)."""
    chain = fit.chain
    traces = fit.labelled
    summary: ReliabilitySummary = summarize(chain, horizon=horizon, ks=ks)
    lengths = [int(x) for x in success_lengths(traces)]
    pmf = chain.success_pmf(max([*lengths, horizon])) if chain.r_inf > 0 else None
    withheld = list(certificate.get("withheld", [])) if certificate else []
    reason = None
    if certificate and any(w in withheld for w in TIMING_OUTPUTS):
        reasons = [str(r) for r in certificate.get("reasons", []) if "success-time" in str(r) or "timing" in str(r)]
        reason = reasons[0] if reasons else "the timing audit rejected the chain's first-passage distribution"
    ingest = traces.report.to_dict()
    return Report({
        "kind": REPORT_KIND,
        "schema_version": REPORT_SCHEMA_VERSION,
        "tracetochain_version": __version__,
        "generated_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "source": {"path": traces.report.source, "format": traces.report.format, "ingest": ingest,
                   "outcomes": traces.outcome_counts(), "n_traces": traces.n_traces, "n_steps": traces.n_steps},
        "settings": dict(settings or {}),
        "states": fit.states.to_dict(),
        "chain": {k: v for k, v in chain.to_dict().items() if k != "metadata"},
        "metrics": summary.to_dict(),
        "intervals": intervals,
        "empirical": {"rdc": empirical_rdc(traces, horizon), "success_lengths": lengths,
                      "pass_rate": (traces.outcome_counts()["success"] / max(1, traces.n_traces
                                                                              - traces.outcome_counts()["invalid"]))},
        "model_success_pmf": ([float(p) / chain.r_inf for p in pmf] if pmf is not None else None),
        "certificate": certificate,
        "withheld": withheld,
        "timing_withheld_reason": reason,
        "pass_k_withheld": "pass^k" in withheld or "pass@k" in withheld,
        "bottlenecks": bottlenecks(chain, fraction=fallback_fraction).to_dict(),
    })
