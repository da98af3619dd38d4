"""cost_report: every cost figure of a fitted chain, with intervals and the observed counterparts, as one JSON-ready
dict — the single call that ``fit``, ``metrics``, ``report`` and ``compare`` make (they render it, never compute)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tracetochain._compat import renamed_parameters
from tracetochain._version import __version__
from tracetochain.chain import AbsorbingChain
from tracetochain.chain.shared import METRICS, CostModel
from tracetochain.costs._analysis import (
    COST_LAYERS,
    cost_budget_curve,
    observed_costs_of,
    per_visit_for,
    step_cap_costs,
    summarize_costs,
)
from tracetochain.costs._intervals import (
    bootstrap_mean_draws,
    budget_band,
    cost_intervals,
    posterior_mean_draws,
)

COSTS_KIND = "tracetochain.costs"
COSTS_SCHEMA_VERSION = 1
DEFAULT_SAMPLES = {"posterior": 1000, "bootstrap": 200}


def _why_not_certified(certificate: Any, status: str) -> str | None:
    """The sentence behind a withheld or untested cost status: the layers the costs rest on that rejected (withheld)
    or could not test (untested), by their titles."""
    if status == "certified":
        return None
    rests = certificate.rests_on("costs") if hasattr(certificate, "rests_on") else COST_LAYERS
    layers = getattr(certificate, "layers", {}) or {}
    bad = "reject" if status == "withheld" else None
    named = [layers[n].title for n in rests if n in layers
             and (layers[n].status == bad if bad else layers[n].status not in ("pass", "reject"))]
    if not named:
        return "a layer they rest on rejects" if status == "withheld" else "a layer they rest on could not test"
    verb = "rejects" if status == "withheld" else "could not test"
    return f"{' and '.join(named)} {verb}" if len(named) == 1 else f"{', '.join(named)} {verb}"


def cost_certification(certificate: Any) -> dict[str, Any]:
    """Status of the cost outputs under an audit certificate: they rest on the layers :data:`COST_LAYERS` (the visit
    law, audited through the timing layer, and R∞). ``certificate`` may be a certificate with ``status(output)``,
    its dict (``certified`` / ``withheld`` lists), or None (no audit ran: untested)."""
    layers = list(COST_LAYERS)
    if certificate is None:
        return {"status": "untested", "rests_on": layers, "reason": "no audit was run"}
    status_of = getattr(certificate, "status", None)
    if callable(status_of):
        try:
            status = str(status_of("costs"))
        except (KeyError, ValueError):
            pass
        else:
            return {"status": status, "rests_on": layers, "reason": _why_not_certified(certificate, status)}
    doc = certificate.to_dict() if hasattr(certificate, "to_dict") else dict(certificate)
    withheld = set(doc.get("withheld") or ())
    # Until certificates name the cost outputs, read the layers off the outputs that share them.
    timing_out = "mean_steps" in withheld or "R(d)" in withheld
    r_inf_out = "R_inf" in withheld
    if timing_out or r_inf_out:
        why = [w for w, bad in (("the timing layer (visit law) is rejected", timing_out),
                                ("R∞ is not certified", r_inf_out)) if bad]
        return {"status": "withheld", "rests_on": layers, "reason": "; ".join(why)}
    return {"status": "certified", "rests_on": layers, "reason": None}


def _resolve(source: Any, traces: Any) -> tuple[AbsorbingChain, Any]:
    if hasattr(source, "chain") and hasattr(source, "labelled"):  # pipeline.FitResult
        return source.chain, traces if traces is not None else source.labelled
    if isinstance(source, AbsorbingChain):
        return source, traces
    raise TypeError(f"cost_report takes a FitResult or an AbsorbingChain, got {type(source).__name__}")


def _ensemble(chain: AbsorbingChain, traces: Any, method: str, samples: int, seed: int, confidence: float,
              by: str, pseudocount: float | None) -> tuple[Any, Any]:
    """The chain ensemble drawn exactly as :func:`~tracetochain.uncertainty.interval_summary` draws it (same
    settings and seed, so the chain part of every interval matches), plus the bootstrap plan when there is one."""
    from tracetochain.chain import ChainPrior

    md = chain.metadata
    prior = ChainPrior.from_settings(pseudocount) if pseudocount is not None else ChainPrior.from_metadata(md)
    policy = md.get("unvisited_policy", "auto")
    if policy == "prior" and not prior.has_mass:
        policy = "failure"
    if method == "posterior":
        from tracetochain.uncertainty import DirichletPosterior

        post = DirichletPosterior(prior=prior.kind, pseudocount=prior.strength, confidence=confidence,
                                  samples=samples, seed=seed, unvisited=policy).fit(chain).fetch_model()
        return post.ensemble, None
    from tracetochain.uncertainty import TraceBootstrap

    boot = TraceBootstrap(samples=samples, by=by, path="fast", state_names=chain.state_names,  # type: ignore[arg-type]
                          prior=prior.kind, pseudocount=prior.strength, unvisited=policy,
                          initial=md.get("initial", "empirical"), confidence=confidence, seed=seed).fit(traces)
    return boot.fetch_model(), boot.plan_


@renamed_parameters(method="intervals")
def cost_report(source: Any, *, traces: Any = None, costs: CostModel | None = None,
                intervals: str | None = "posterior",
                confidence: float = 0.95, samples: int | None = None, seed: int = 0, by: str = "trace",
                certificate: Any = None, metrics: Sequence[str] | None = None, target: float | None = None,
                horizon: int = 200, budget_levels: int | None = None, pseudocount: float | None = None,
                ensemble: Any = None, budget_metrics: Sequence[str] = ("cost_usd", "tokens", "seconds"),
                display: bool = False) -> dict[str, Any]:
    """Every cost figure of a fitted chain for every cost metric its traces carry, as one JSON-ready dict.

    Parameters
    ----------
    source
        A ``FitResult`` (:func:`~tracetochain.fit_chain`; its labelled traces give the observed costs and the
        bootstrap) or an :class:`~tracetochain.AbsorbingChain` (its ``metadata["costs"]`` gives the cost model).
    traces
        The labelled traces the chain was fitted on (for a chain given alone): observed costs, bootstrap.
    costs
        The cost model (default: the chain's, else built from ``traces``).
    intervals : {"posterior", "bootstrap", "bootstrap-full", None}
        Intervals: Dirichlet posterior of the chain with cost means drawn from their sampling law, or a trace
        bootstrap with the cost means recomputed on the same resamples ("bootstrap-full" is treated as
        "bootstrap": per-state costs need fixed states); None for no intervals. (``method=`` is its deprecated
        spelling, one release.)
    confidence, samples, seed, by, pseudocount
        As :func:`~tracetochain.uncertainty.interval_summary` (the chain draws are the same).
    certificate
        An audit certificate (or its dict): the cost outputs' status (they rest on the layers ``timing`` and
        ``r_inf``).
    metrics
        Metrics to report (default: every one with data).
    target, horizon
        Step cap: the smallest step budget d with R(d) ≥ ``target`` (default: 95% of R∞), searched up to
        ``horizon``.
    budget_levels
        Lattice size of R(B) (default: :func:`~tracetochain.costs._analysis.default_levels`).
    budget_metrics
        Metrics whose R(B) curve is computed (the band, from the ensemble, only for the first one present).
    ensemble
        A chain ensemble already drawn (posterior), to reuse instead of drawing one.
    display
        Only what the command line's cost table prints: the R(B) curve of the primary metric alone (its lattice step
        and discretisation error are printed) and no R(B) band — the other curves and the band are most of the
        section's work on a long-tailed corpus. The figures computed are the same as without it.

    Returns
    -------
    dict
        ``{"kind": "tracetochain.costs", "available", "reason", "primary", "metrics": {name: {"summary",
        "intervals", "budget", "budget_band", "step_cap", "observed", "agreement"}}, "absent": {name: reason},
        "certification", "interval_settings", "notes"}``. When the traces carry no cost data at all, ``available``
        is False and ``reason`` says so (and which reader, when known).
    """
    chain, labelled = _resolve(source, traces)
    if costs is None:
        costs = CostModel.of_chain(chain)
    if costs is None and labelled is not None:
        costs = CostModel.from_traces(labelled, chain.state_names)
    doc: dict[str, Any] = {"kind": COSTS_KIND, "schema_version": COSTS_SCHEMA_VERSION,
                           "tracetochain_version": __version__, "certification": cost_certification(certificate),
                           "metrics": {}, "absent": {}, "notes": []}
    if costs is None:
        doc.update(available=False, primary=None,
                   reason="this chain carries no cost model (it was fitted before costs were recorded, or built by "
                          "hand); refit it from the traces with `tracetochain fit`")
        return doc
    wanted = list(metrics) if metrics is not None else list(costs.available)
    unknown = [mt for mt in wanted if mt not in METRICS]
    if unknown:
        raise ValueError(f"unknown cost metric(s) {unknown}; metrics are {', '.join(METRICS)}")
    doc["absent"] = {mt: costs.absence_reason(mt) for mt in METRICS if mt not in costs.metrics}
    present = [mt for mt in wanted if mt in costs.metrics]
    if not present:
        doc.update(available=False, primary=None, reason=costs.absence_reason())
        return doc
    doc.update(available=True, reason=None, primary=present[0])
    if labelled is None:  # said, not silently left out (the engines and chain files keep counts, not traces)
        doc["notes"].append("observed cost per success (and its agreement with the model) needs the traces in "
                            "memory; it is left out with --engine local/dask or a chain file")
    if intervals == "bootstrap-full":
        doc["notes"].append("cost intervals use the fast trace bootstrap (states fixed): per-state costs need the "
                            "states to stay put across replicates")
        intervals = "bootstrap"
    if intervals == "bootstrap" and labelled is None:
        doc["notes"].append("bootstrap cost intervals need the traces; posterior intervals are given instead")
        intervals = "posterior"
    plan = None
    if intervals is not None and ensemble is None:
        n = int(samples if samples is not None else DEFAULT_SAMPLES[intervals])
        ensemble, plan = _ensemble(chain, labelled, intervals, n, seed, confidence, by, pseudocount)
    doc["interval_settings"] = None if ensemble is None else {
        "method": ensemble.method, "confidence": confidence, "n_draws": ensemble.n_samples, "seed": seed,
        "cost_means": ("recomputed on the same bootstrap resamples" if plan is not None else
                       "drawn from their sampling law (gamma with each state's mean and standard error; normal with "
                       "the joint covariance for means fitted to episode totals)")}
    goal = float(target) if target is not None else 0.95 * chain.r_inf
    no_success = (chain.metadata.get("n_traces") or {}).get("success") == 0
    banded = False
    withheld = doc["certification"].get("status") == "withheld"
    observed = None if labelled is None else observed_costs_of(labelled, costs, list(present), confidence=confidence,
                                                                seed=seed)
    for metric in present:
        summary = summarize_costs(chain, costs, metric)
        entry: dict[str, Any] = {"summary": summary.to_dict()}
        budget = cost_budget_curve(chain, costs, metric, n_levels=budget_levels) \
            if metric in budget_metrics and summary.mean > 0 and not (display and metric != present[0]) else None
        entry["budget"] = None if budget is None else budget.to_dict()
        if goal > 0:
            entry["step_cap"] = step_cap_costs(chain, costs, metric, target=goal, horizon=horizon).to_dict()
        if ensemble is not None:
            pv = per_visit_for(chain, costs, metric)
            if plan is not None:
                c_draws, v_draws = bootstrap_mean_draws(plan, labelled, costs, metric, chain.state_names)
            else:
                c_draws, v_draws = posterior_mean_draws(pv, ensemble.n_samples, seed), pv.variance
            entry["intervals"] = cost_intervals(ensemble, summary, c_draws, v_draws, confidence=confidence)
            if no_success and entry["intervals"].get("per_success"):
                # Every draw's R∞ is prior mass alone: E[C]/R∞ spans tens of orders of magnitude (N28).
                entry["intervals"]["per_success"].update(lower=None, upper=None,
                                                         undefined="no trace succeeded: the cost per success rests "
                                                                   "on the prior alone")
            if budget is not None and not banded and not display:
                banded = True
                if withheld:
                    # The band of a curve no report shows (its drawing is the section's largest cost on a
                    # long-tailed corpus: 0.66 s of SWE-bench `report`'s 5.4 s); said, not silently left out.
                    entry["budget_band"] = None
                    doc["notes"].append(f"the R(B) band of {metric} is not computed: the cost outputs are withheld "
                                        f"({doc['certification'].get('reason')}); the model's figures above are "
                                        "kept for the record with that status")
                else:
                    entry["budget_band"] = budget_band(ensemble, c_draws, pv.variance,
                                                       max_budget=budget.budgets[-1], confidence=confidence)
        if observed is not None:
            obs = observed[metric]
            entry["observed"] = obs.to_dict()
            if budget is not None:
                entry["observed"]["reliability_at_budgets"] = obs.reliability_at(budget.budgets)
            entry["agreement"] = _agreement(summary.per_success, obs.per_success,
                                            (entry.get("intervals") or {}).get("per_success"))
        doc["metrics"][metric] = entry
    return doc


def _agreement(model: float | None, observed: float | None, interval: dict[str, Any] | None) -> dict[str, Any]:
    """Does the observed spend per success lie inside the chain's interval of it?"""
    lo = interval.get("lower") if interval else None
    hi = interval.get("upper") if interval else None
    inside = None if observed is None or lo is None or hi is None else bool(lo <= observed <= hi)
    ratio = None if observed is None or model is None or observed == 0 else float(model / observed)
    return {"model_per_success": model, "observed_per_success": observed, "interval": [lo, hi],
            "observed_inside_interval": inside, "model_over_observed": ratio}


def cost_per_success_draws(chain: AbsorbingChain, ensemble: Any, plan: Any, traces: Any, costs: CostModel,
                           metric: str, seed: int = 0) -> np.ndarray:
    """E[C]/R∞ on every draw of ``ensemble`` (paired cost means: the bootstrap ``plan``'s resamples when given,
    else their sampling law), NaN where undefined — what ``compare`` subtracts draw by draw."""
    from tracetochain.costs._intervals import batched_cost_figures

    pv = per_visit_for(chain, costs, metric)
    if plan is not None:
        c, v = bootstrap_mean_draws(plan, traces, costs, metric, chain.state_names)
    else:
        c, v = posterior_mean_draws(pv, ensemble.n_samples, seed), pv.variance
    figures, used = batched_cost_figures(ensemble, c, v, spreads=False)
    out = np.full(ensemble.n_samples, np.nan)
    if figures:
        out[used] = figures["per_success"]
    return out
