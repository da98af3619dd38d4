"""interval_summary: an interval for every number :func:`tracetochain.summarize` reports, as one JSON-ready dict.

This is what ``tracetochain fit/metrics --ci 0.95 --uncertainty posterior|bootstrap|bootstrap-full --samples N``
attaches to the metrics JSON. Keys mirror :meth:`ReliabilitySummary.to_dict` so the two documents can be joined.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from tracetochain._compat import renamed_parameters
from tracetochain._display import Display, ResultDisplay, Table
from tracetochain._version import __version__
from tracetochain.chain import AbsorbingChain, ChainEstimator, ChainPrior, TransitionCounts
from tracetochain.quantities import reported, reported_scalars
from tracetochain.traces import TraceTable
from tracetochain.uncertainty._bootstrap import TraceBootstrap
from tracetochain.uncertainty._design import StoredDesign
from tracetochain.uncertainty._dirichlet import DirichletPosterior
from tracetochain.uncertainty._ensemble import ChainEnsemble
from tracetochain.uncertainty._stats import EntryIntervals, QuantityStats, check_confidence

INTERVALS_SCHEMA_VERSION = 1
Method = Literal["posterior", "bootstrap", "bootstrap-full"]
DEFAULT_SAMPLES = {"posterior": 2000, "bootstrap": 200, "bootstrap-full": 200}


class IntervalSummary(dict[str, Any], ResultDisplay):
    """The intervals document (a plain JSON-ready dict, see :func:`interval_summary`) that also prints as tables and
    converts to DataFrames: ``to_frame("metrics")`` (the default: every scalar metric, pass@k and pass^k per k),
    ``to_frame("states")`` (per-state figures, long form), ``to_frame("reliability")`` (the R(d) band). Its repr is
    one line (``dict(summary)`` shows the raw document)."""

    __repr__ = ResultDisplay.__repr__

    def _display(self) -> Display:
        cols = ("point", "lower", "upper", "mean", "std", "n_excluded")

        def row(name: str, parameter: Any, q: dict[str, Any]) -> tuple[Any, ...]:
            return (name, parameter, *(q.get(c) for c in cols))

        m = self["metrics"]
        scalars = [q.key for q in reported_scalars() if q.key in m]
        scalars.insert(min(2, len(scalars)), "residual_at_horizon")  # the tail at the horizon, after R∞ and 1 − R∞
        rows = [row(name, None, m[name]) for name in scalars if name in m]
        rows += [row(name, f"k={k}", q) for name in ("pass_at_k", "pass_hat_k") for k, q in m[name].items()]
        rows += [row(f"step_budget.{name}", f"δ={self['delta']:g}" if name != "kappa" else None, q)
                 for name, q in m["step_budget"].items()]
        metrics = Table("metrics", ("quantity", "parameter", *cols), tuple(rows))
        per_state = ("expected_visits", "r_success", "r_failure", "success_probability", "failure_share",
                     "sensitivity")
        states = Table("states", ("state", "quantity", *cols),
                       tuple((st["name"], name, *(st[name].get(c) for c in cols)) for st in m["states"]
                             for name in per_state))
        rel = m["reliability"]
        band = Table("reliability", ("d", "point", "lower", "upper", "mean", "std"),
                     tuple((d, *(None if rel.get(c) is None else rel[c][d] for c in cols[:5]))
                           for d in range(int(self["horizon"]) + 1)), shown=False)
        return Display(f"{self['confidence']:.0%} {self['method']} intervals, {self['n_draws']} draws "
                       f"(horizon {self['horizon']})", kind="Intervals", tables=(metrics, states, band))


def _compact(s: QuantityStats) -> dict[str, Any]:
    d = s.to_dict()
    for k in ("quantity", "parameters", "method", "confidence", "point_estimator"):
        d.pop(k)
    return d


def _resolve(source: Any, traces: TraceTable | None) -> tuple[AbsorbingChain | None, TransitionCounts | None,
                                                               TraceTable | None]:
    """(chain, counts, labelled traces) from a FitResult, a chain, counts or labelled traces."""
    if hasattr(source, "chain") and hasattr(source, "labelled"):  # pipeline.FitResult
        return source.chain, None, traces if traces is not None else source.labelled
    if isinstance(source, AbsorbingChain):
        return source, None, traces
    if isinstance(source, TransitionCounts):
        return None, source, traces
    if isinstance(source, TraceTable):
        return None, None, source
    raise TypeError(f"interval_summary takes a FitResult (fit_chain), an AbsorbingChain, TransitionCounts or labelled "
                    f"traces (TraceTable); got {type(source).__name__}")


@renamed_parameters(method="intervals")
def interval_summary(source: Any, *, intervals: Method = "posterior", confidence: float = 0.95,
                     samples: int | None = None, seed: int = 0, horizon: int = 50,
                     ks: Sequence[int] = (1, 2, 3, 4, 5), delta: float = 0.01, traces: TraceTable | None = None,
                     states: Any = None, by: Literal["auto", "trace", "task"] = "auto",
                     pseudocount: float | None = None, design_effect: float | None = None,
                     budget_bound: bool = True) -> IntervalSummary:
    """Intervals for every number of :func:`tracetochain.summarize` (R∞, 1 − R∞, R(d) band, tail at the horizon,
    MTTA and its sd, conditional means, pass@k / pass^k, ρ(Q), step budget (exact, Prop. 8 bound, κ), and per state:
    expected visits, R⊕, R⊖, success probability, failure share, sensitivity), plus per-entry intervals of Q, R⊕, R⊖.

    Parameters
    ----------
    source
        What the chain was fitted from, or a :class:`ChainEnsemble` already drawn (summarized as it is: ``intervals``,
        ``samples`` and ``confidence`` come from it). What each method needs:

        * ``"posterior"`` — the transition counts: an :class:`AbsorbingChain` fitted by ``ChainEstimator`` /
          ``fit_chain`` / ``tracetochain fit`` (they keep the counts in ``metadata["counts"]``), a ``FitResult``,
          :class:`TransitionCounts`, or labelled traces (counted here with ``ChainEstimator``).
        * ``"bootstrap"`` — the **labelled traces**: a ``FitResult`` (its ``labelled`` table), labelled traces
          (a ``TraceTable`` whose ``state`` column holds the chain's state names), or a chain plus ``traces=`` (the
          labelled traces it was fitted on; the chain fixes the state order and the estimator settings).
        * ``"bootstrap-full"`` — the traces (raw or labelled; the features come from their step columns) **and**
          the state estimator in ``states=`` (e.g. ``WardStates(...)``), which is refitted on every replicate.
    intervals : {"posterior", "bootstrap", "bootstrap-full"}
    confidence : float, default 0.95
    samples : int, optional
        Posterior draws (default 2000) or bootstrap replicates (default 200).
    seed : int, default 0
    horizon, ks, delta
        As :func:`tracetochain.summarize` (R(d) for d = 0..horizon; pass@k/pass^k for ``ks``; step budget δ).
    traces, states, by
        Labelled traces (with a chain), the state estimator (``bootstrap-full``), the resampling unit ("auto": tasks
        when some task repeats).
    pseudocount : float, optional
        A Laplace α for the posterior/refits; default: the chain's own prior (``metadata["prior"]``), else the
        episode prior.
    budget_bound : bool, default True
        Include Prop. 8's bound and κ∞(V) beside the exact step budget (an eigendecomposition of every draw, about a
        tenth of the summary's cost on a 25-state chain); a printed summary that does not show them leaves them out.
    design_effect : float, optional
        Posterior only: temper the counts by the design effect of repeated trials (``DirichletPosterior``). Default:
        the chain's own (``metadata["design_effect"]``, which :func:`~tracetochain.analyze` and ``tracetochain fit``
        save with the chain, so that a saved chain's intervals are the analysis's), else 1. Given explicitly, it
        applies to every quantity; left out, the chain's per-quantity design effects
        (``metadata["design_effect_per_quantity"]``) apply where it has them.

    Returns
    -------
    IntervalSummary
        A dict that also prints as tables and converts with ``to_frame``. Keys: ``{"kind":
        "tracetochain.intervals", "schema_version", "method", "confidence", "samples" (requested), "n_draws"
        (used), "seed", "point_estimator", "settings", "horizon", "ks", "delta", "metrics": {...},
        "entries": {...}}``. Each metric is ``{"point", "mean", "std", "lower", "upper", "n_samples",
        "n_excluded", "excluded", "point_undefined"}`` (arrays for R(d)); undefined values are ``None``, never NaN.
    """
    from tracetochain._limits import check_ensemble_size, check_horizon, check_samples

    level = check_confidence(confidence)
    if isinstance(source, ChainEnsemble):  # already drawn (e.g. by a partitioned audit): summarize it as it is
        return _summary(source, source.entry_intervals(), source.method, source.n_samples, source.confidence,
                        horizon, ks, delta, budget_bound)
    method = intervals
    if method not in DEFAULT_SAMPLES:
        raise ValueError(f"intervals must be 'posterior', 'bootstrap' or 'bootstrap-full', got {method!r}")
    n = DEFAULT_SAMPLES[method] if samples is None else int(samples)
    chain, counts, labelled = _resolve(source, traces)
    m = chain.n_states if chain is not None else counts.n_states if counts is not None else \
        len(labelled.state_labels()[1]) if labelled is not None else 0
    check_horizon(int(horizon))
    check_samples(n, int(horizon))
    check_ensemble_size(n, m)  # before any draw is made: every draw is an m × m chain
    md = chain.metadata if chain is not None else {}
    prior = (ChainPrior.from_settings(pseudocount) if pseudocount is not None or chain is None
             else ChainPrior.from_metadata(md))
    policy = md.get("unvisited_policy", "auto")
    if policy == "prior" and not prior.has_mass:
        policy = "failure"
    initial = md.get("initial", "empirical")
    # An explicit design effect applies to every quantity; the chain's stored per-quantity ones only when none is given.
    use_stored = design_effect is None
    if design_effect is None:
        design_effect = float(md.get("design_effect", 1.0))
    entries: EntryIntervals
    if method == "posterior":
        if chain is None and counts is None:
            assert labelled is not None
            chain = ChainEstimator(prior=prior.kind, pseudocount=prior.strength).fit(labelled).fetch_model()
        post = DirichletPosterior(prior=prior.kind, pseudocount=prior.strength, confidence=level, samples=n,
                                  seed=seed, unvisited=policy, design_effect=design_effect).fit(
            chain if chain is not None else counts).fetch_model()  # type: ignore[arg-type]
        ensemble: ChainEnsemble = post.ensemble
        entries = post.intervals
        stored = md.get("design_effect_per_quantity")
        if use_stored and isinstance(stored, dict) and StoredDesign.valid(stored):
            ensemble = ensemble.with_design(StoredDesign(stored, float(design_effect)))
    else:
        if labelled is None:
            raise ValueError(f"intervals={method!r} resamples traces: pass a FitResult, the labelled traces, or the "
                             "chain with traces=<the labelled traces it was fitted on>")
        if method == "bootstrap":
            boot = TraceBootstrap(samples=n, by=by, path="fast",
                                  state_names=chain.state_names if chain is not None else None,
                                  prior=prior.kind, pseudocount=prior.strength, unvisited=policy, initial=initial,
                                  confidence=level, seed=seed)
        else:
            if states is None or not hasattr(states, "fit"):
                raise ValueError("intervals='bootstrap-full' refits the states on every replicate: pass the state "
                                 "estimator, e.g. states=WardStates(featurizer=RuleFeaturizer(...))")
            boot = TraceBootstrap(samples=n, by=by, path="full", states=states, prior=prior.kind,
                                  pseudocount=prior.strength, unvisited=policy, initial=initial, confidence=level,
                                  seed=seed)
        ensemble = boot.fit(labelled).fetch_model()
        entries = ensemble.entry_intervals()
    return _summary(ensemble, entries, method, n, level, horizon, ks, delta, budget_bound)


def _summary(ensemble: ChainEnsemble, entries: EntryIntervals, method: str, n: int, level: float, horizon: int,
             ks: Sequence[int], delta: float, budget_bound: bool = True) -> IntervalSummary:
    def q(name: str, **kw: Any) -> QuantityStats:
        return ensemble.stats(name, **kw)

    ks_list = [int(k) for k in ks]
    visits = q("expected_visits")
    rs = q("R_success")
    rf = q("R_failure")
    h = q("success_probabilities")
    share = q("failure_attribution")
    sens = q("sensitivity_R_success")
    metrics: dict[str, Any] = {}
    for spec in reported():  # the registry's reported quantities, in its order
        if spec.kind == "scalar":
            metrics[spec.key] = _compact(q(spec.key))
        elif spec.key == "reliability":
            metrics["reliability"] = _compact(q("reliability", horizon=horizon))
            metrics["residual_at_horizon"] = _compact(q("residual", horizon=horizon).element(horizon))
        elif spec.kind == "per_k":
            by_k = q(spec.key, k=ks_list)
            metrics[spec.key] = {str(k): _compact(by_k.element(i)) for i, k in enumerate(ks_list)}
    budget = {"exact": _compact(q("step_budget", delta=delta))}
    if budget_bound:
        budget.update(prop8_bound=_compact(q("step_budget_bound", delta=delta)), kappa=_compact(q("step_budget_kappa")))
    metrics.update({
        "step_budget": budget,
        "states": [
            {"name": name, "expected_visits": _compact(visits.element(i)), "r_success": _compact(rs.element(i)),
             "r_failure": _compact(rf.element(i)), "success_probability": _compact(h.element(i)),
             "failure_share": _compact(share.element(i)), "sensitivity": _compact(sens.element(i))}
            for i, name in enumerate(ensemble.state_names)
        ],
    })
    return IntervalSummary({
        "kind": "tracetochain.intervals",
        "schema_version": INTERVALS_SCHEMA_VERSION,
        "tracetochain_version": __version__,
        "method": method,
        "confidence": level,
        "interval": "equal-tailed percentile of the propagated draws",
        "samples": n,
        "n_draws": ensemble.n_samples,
        "seed": ensemble.seed,
        "point_estimator": ensemble.point_estimator,
        "settings": {k: v for k, v in ensemble.to_dict()["info"].items() if k not in ("replicates", "point_estimator")},
        "horizon": int(horizon),
        "ks": ks_list,
        "delta": float(delta),
        "metrics": metrics,
        "entries": entries.to_dict(),
    })
