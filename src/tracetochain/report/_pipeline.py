"""Traces → report document in one call: states and chain, audit certificate, intervals, then the document.

This is what ``tracetochain report`` runs. The reported chain is fitted on all (non-invalid) traces; the
certificate comes from the held-out audit (fit on one half, checked on the other) unless ``holdout=False``, and
its verdict decides which outputs the document marks as withheld.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from tracetochain.pipeline import fit_chain
from tracetochain.report._document import Report, assemble_report, build_report
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
    step("costs")
    from tracetochain.costs import cost_report

    costs = cost_report(fit, method=uncertainty, confidence=confidence, samples=samples, seed=seed,
                        certificate=certificate)
    step("report")
    settings = {"states": states if isinstance(states, str) else type(states).__name__, **options,
                "pseudocount": pseudocount, "seed": seed, "audit": "held-out" if audit and holdout else
                ("in-sample" if audit else "none")}
    return build_report(fit, horizon=horizon, ks=ks, certificate=certificate, intervals=intervals,
                        settings=settings, costs=costs)


def make_partitioned_report(source: str | Path | Sequence[str | Path], *, engine: Any = None, states: Any = None,
                            state_options: dict[str, Any] | None = None, pseudocount: float = 1.0,
                            horizon: int = 50, ks: tuple[int, ...] = (1, 2, 3, 4, 5), holdout: bool = True,
                            audit_options: dict[str, Any] | None = None,
                            uncertainty: Literal["posterior", "bootstrap"] | None = "posterior",
                            confidence: float = 0.95, samples: int = 1000, seed: int = 0,
                            progress: Callable[[str], None] | None = None,
                            **partition_options: Any) -> Report:
    """:func:`make_report` for a corpus read partition by partition (:func:`~tracetochain.partitioned.
    audit_partitioned`, any size, any engine): the same document, built from counts.

    The chain is fitted on all usable traces, the certificate audits the fit half on the held-out half (split by
    trace id), the intervals come from the Dirichlet posterior of the counts (``"posterior"``) or the Poisson
    bootstrap over trace ids (``"bootstrap"``), ``samples`` draws. The document's ``empirical.success_lengths`` is
    None (one entry per successful trace would not scale); ``empirical.success_length_counts`` holds the histogram.
    The i.i.d.-trials check is not run (it needs the traces grouped by task).
    """
    from tracetochain.partitioned import audit_partitioned

    step = progress or (lambda stage: None)
    if uncertainty not in ("posterior", "bootstrap", None):
        raise ValueError(f"with partitions, uncertainty must be 'posterior', 'bootstrap' or None, got "
                         f"{uncertainty!r} ('bootstrap-full' refits the states on every replicate: it needs the "
                         "traces in memory)")
    step("reading, counting and auditing the partitions")
    # The posterior needs only the chain's counts: drawn below exactly as make_report does; the bootstrap is
    # accumulated in the pass over the partitions.
    result = audit_partitioned(source, engine=engine, states=states, state_options=state_options,
                               pseudocount=pseudocount, holdout=holdout, seed=seed, confidence=confidence,
                               intervals="bootstrap" if uncertainty == "bootstrap" else "none",
                               n_resamples=samples, **(audit_options or {}), **partition_options)
    certificate = result.certificate.to_dict()
    certificate.pop("chain", None)  # the report shows the chain fitted on all traces
    intervals = None
    if uncertainty is not None:
        step(f"uncertainty ({uncertainty})")
        from tracetochain.uncertainty import interval_summary

        intervals = (interval_summary(result.ensemble, horizon=horizon, ks=ks) if result.ensemble is not None
                     else interval_summary(result.chain, method="posterior", confidence=confidence, samples=samples,
                                           seed=seed, horizon=horizon, ks=ks))
    step("costs")
    from tracetochain.costs import cost_report

    # The partition statistics carry the cost model; the chain ensemble (when drawn) is reused for the intervals.
    costs = cost_report(result.chain, method="posterior" if uncertainty is not None else None,
                        confidence=confidence, samples=samples, seed=seed, certificate=certificate,
                        ensemble=result.ensemble if uncertainty == "bootstrap" else None)
    step("report")
    counts = result.counts
    rep = counts.report
    outcomes = dict(counts.counts.n_traces)
    src = {"path": rep.source, "format": rep.format, "ingest": rep.to_dict(), "outcomes": outcomes,
           "n_traces": rep.n_traces, "n_steps": int(result.state_visits.sum()),
           "partitions": counts.n_partitions, "engine": counts.engine}
    if counts.state_model is not None:
        states_doc = counts.state_model.to_dict()
    else:
        visits = result.state_visits
        total = int(visits.sum())
        states_doc = {"method": "label", "state_names": list(result.chain.state_names),
                      "taxonomy": [{"name": name, "n_steps": int(v), "share_of_steps": int(v) / max(1, total),
                                    "composition": {name: 1.0}} for name, v in zip(result.chain.state_names, visits,
                                                                                   strict=True)],
                      "settings": {"n_steps": total}, "silhouette_by_k": {}}
    settings = {"states": states if isinstance(states, str) or states is None else type(states).__name__,
                **(state_options or {}), "pseudocount": pseudocount, "seed": seed,
                "audit": "held-out" if holdout else "in-sample", "engine": counts.engine,
                "partitions": counts.n_partitions}
    return assemble_report(result.chain, states_doc, src, success_length_counts=result.success_time_counts,
                           n_usable=result.n_usable, success_lengths=None, horizon=horizon, ks=ks,
                           certificate=certificate, intervals=intervals, settings=settings, costs=costs)
