"""Traces → report document in one call: states and chain, audit certificate, intervals, then the document.

This is what ``tracetochain report`` runs. The reported chain is fitted on all (non-invalid) traces; the
certificate comes from the held-out audit (fit on one half, checked on the other) unless ``holdout=False``, and
its verdict decides which outputs the document marks as withheld.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from tracetochain.pipeline import fit_chain
from tracetochain.report._document import Report, build_report
from tracetochain.traces._table import TraceTable


def make_report(traces: TraceTable, *, states: Any = "label", state_options: dict[str, Any] | None = None,
                pseudocount: float = 1.0, horizon: int = 50, ks: tuple[int, ...] = (1, 2, 3, 4, 5),
                audit: bool = True, holdout: bool = True, audit_options: dict[str, Any] | None = None,
                uncertainty: Literal["posterior", "bootstrap", "bootstrap-full"] | None = "posterior",
                confidence: float = 0.95, samples: int = 1000,
                seed: int = 0, progress: Callable[[str], None] | None = None) -> Report:
    """Fit, audit and attach intervals; returns the versioned report document (see :func:`build_report`)."""
    step = progress or (lambda stage: None)
    options = dict(state_options or {})
    step("states and chain")
    fit = fit_chain(traces, states=states, pseudocount=pseudocount, **options)
    certificate = None
    if audit:
        step("audit")
        from tracetochain.audit import audit as run_audit

        cert = run_audit(traces, states=states, pseudocount=pseudocount, holdout=holdout, seed=seed,
                         horizon=horizon, state_options=options or None, **(audit_options or {}))
        certificate = cert.to_dict()
        certificate.pop("chain", None)  # the report shows the chain fitted on all traces
    intervals = None
    if uncertainty:
        step(f"uncertainty ({uncertainty})")
        from tracetochain.uncertainty import interval_summary

        intervals = interval_summary(fit, method=uncertainty, confidence=confidence, samples=samples, seed=seed,
                                     horizon=horizon, ks=ks)
    step("report")
    settings = {"states": states if isinstance(states, str) else type(states).__name__, **options,
                "pseudocount": pseudocount, "seed": seed, "audit": "held-out" if audit and holdout else
                ("in-sample" if audit else "none")}
    return build_report(fit, horizon=horizon, ks=ks, certificate=certificate, intervals=intervals,
                        settings=settings)
