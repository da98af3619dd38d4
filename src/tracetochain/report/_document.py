"""The report document: one versioned JSON with everything a reader of the report needs.

It is the single source of truth: HTML, Markdown and the terminal render it and never recompute. Sections that
come from optional stages (the audit certificate, intervals) are ``None`` when those stages did not run.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tracetochain._version import __version__
from tracetochain.chain import AbsorbingChain
from tracetochain.metrics import ReliabilitySummary, success_lengths, summarize
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
                 settings: dict[str, Any] | None = None, fallback_fraction: float = 0.1,
                 costs: dict[str, Any] | None = None) -> Report:
    """Assemble the report document from a fit (and, when run, the certificate and intervals)."""
    traces = fit.labelled
    lengths = success_lengths(traces)
    outcomes = traces.outcome_counts()
    source = {"path": traces.report.source, "format": traces.report.format, "ingest": traces.report.to_dict(),
              "outcomes": outcomes, "n_traces": traces.n_traces, "n_steps": traces.n_steps}
    return assemble_report(fit.chain, fit.states.to_dict(), source,
                           success_length_counts=np.bincount(lengths) if lengths.size else np.zeros(1, np.int64),
                           n_usable=traces.n_traces - outcomes["invalid"],
                           success_lengths=[int(x) for x in lengths], horizon=horizon, ks=ks,
                           certificate=certificate, intervals=intervals, settings=settings,
                           fallback_fraction=fallback_fraction, costs=costs)


def assemble_report(chain: AbsorbingChain, states: dict[str, Any], source: dict[str, Any], *,
                    success_length_counts: NDArray[np.int64], n_usable: int,
                    success_lengths: list[int] | None = None, horizon: int = 50,
                    ks: tuple[int, ...] = (1, 2, 3, 4, 5), certificate: dict[str, Any] | None = None,
                    intervals: dict[str, Any] | None = None, settings: dict[str, Any] | None = None,
                    fallback_fraction: float = 0.1, costs: dict[str, Any] | None = None) -> Report:
    """The report document from its parts: what :func:`build_report` (traces in memory) and
    :func:`build_partitioned_report` (a partitioned corpus: only counts) both call.

    ``success_length_counts[k]`` is the number of successful traces of k steps; ``n_usable`` the traces that count
    (invalid ones excluded), the denominator of the empirical RDC and pass rate. ``success_lengths`` (one entry per
    successful trace) is kept in documents of traces read in memory and is None for partitioned corpora.
    ``costs`` is :func:`tracetochain.costs.cost_report`'s document (None when the cost stage did not run).
    """
    summary: ReliabilitySummary = summarize(chain, horizon=horizon, ks=ks)
    counts = np.asarray(success_length_counts, dtype=np.int64)
    top = int(np.flatnonzero(counts)[-1]) if counts.any() else 0
    pmf = chain.success_pmf(max(top, horizon)) if chain.r_inf > 0 else None
    withheld = list(certificate.get("withheld", [])) if certificate else []
    reason = None
    if certificate and any(w in withheld for w in TIMING_OUTPUTS):
        reasons = [str(r) for r in certificate.get("reasons", []) if "success-time" in str(r) or "timing" in str(r)]
        reason = reasons[0] if reasons else "the timing audit rejected the chain's first-passage distribution"
    within = np.zeros(horizon + 1, np.int64)
    within[: min(horizon + 1, counts.size)] = counts[: horizon + 1]
    rdc = [float(x) for x in np.cumsum(within) / n_usable] if n_usable else [0.0] * (horizon + 1)
    return Report({
        "kind": REPORT_KIND,
        "schema_version": REPORT_SCHEMA_VERSION,
        "tracetochain_version": __version__,
        "generated_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "source": source,
        "settings": dict(settings or {}),
        "states": states,
        "chain": {k: v for k, v in chain.to_dict().items() if k != "metadata"},
        "metrics": summary.to_dict(),
        "intervals": intervals,
        "empirical": {"rdc": rdc, "success_lengths": success_lengths,
                      "success_length_counts": [int(x) for x in counts[: top + 1]],
                      "pass_rate": int(counts.sum()) / max(1, n_usable)},
        "model_success_pmf": ([float(p) / chain.r_inf for p in pmf] if pmf is not None else None),
        "certificate": certificate,
        "withheld": withheld,
        "timing_withheld_reason": reason,
        "pass_k_withheld": "pass^k" in withheld or "pass@k" in withheld,
        "bottlenecks": bottlenecks(chain, fraction=fallback_fraction).to_dict(),
        "costs": costs,
    })
