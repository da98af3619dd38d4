"""Compare two trace sets (two agents, two versions, last week and this week), in memory or partition by partition.

Both sets get one state model (learned on a seeded sample of both, or the traces' own labels, whose vocabularies are
united), so their chains share states. Each set is reduced to its summary (``analysis._summary``) with its own
bootstrap replicates — Poisson weights by trace, or by task when tasks repeat —, so ΔR∞ and ΔR(d) get percentile
intervals from the two sets' independent replicates (or posterior draws), over every pair of a draw of A and a draw
of B (``uncertainty.shared.difference_interval``: pairing draws by index left the 2.5 % tail on about five
differences, and two samples of one agent were called different too often); the per-state homogeneity
test (Rao–Scott corrected G², ``audit._homogeneity``) says which rows differ; the transitions that moved most are
listed; a verdict sums it up. A difference is never called on too little data: each side needs ``min_traces`` usable
traces, else the verdict is *insufficient evidence* and says how many are missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from tracetochain._compat import renamed_parameters
from tracetochain._display import Display, ResultDisplay, Table
from tracetochain._limits import check_ensemble_size
from tracetochain.analysis._analyze import (
    DEFAULT_STATE_SAMPLE,
    UNSEEN_STATE,
    MemoryPartition,
    opened_engine,
    plan_input,
    resolve_states,
    summarize_parts,
)
from tracetochain.analysis._intervals import summary_ensemble
from tracetochain.analysis._summary import SummarySpec, reindex_summary
from tracetochain.audit import HomogeneityResult
from tracetochain.audit.shared import homogeneity_from_counts
from tracetochain.chain import AbsorbingChain, ChainPrior, estimate_chain
from tracetochain.exceptions import EmptyTraceSetError
from tracetochain.uncertainty.shared import PERMUTATIONS, PermutationTest, difference_interval, permutation_delta_r_inf

#: Why a comparison has no permutation test (its per-trace count vectors would outgrow the memory budget).
SKIPPED_TEST = ("not run: the per-trace count vectors of the two sets exceed the memory budget "
                "(TRACETOCHAIN_MAX_MEMORY_MB); at that size ΔR∞'s interval alone decides")
#: Usable traces each side needs before a difference is called.
MIN_TRACES_PER_SIDE = 20
#: Bootstrap replicates drawn for the homogeneity test's design-effect correction when the intervals are posterior.
HOMOGENEITY_REPLICATES = 200


@dataclass(frozen=True, repr=False)
class Comparison(ResultDisplay):
    """The result of :func:`compare`: B relative to A."""

    names: tuple[str, str]
    chain_a: AbsorbingChain
    chain_b: AbsorbingChain
    delta_r_inf: float
    delta_r_inf_interval: tuple[float, float]
    horizon: int
    delta_reliability: list[float]
    delta_reliability_lower: list[float]
    delta_reliability_upper: list[float]
    homogeneity: HomogeneityResult
    changed_transitions: tuple[dict[str, Any], ...]
    confidence: float
    samples: int
    seed: int
    method: str = "bootstrap"
    n_usable: tuple[int, int] = (0, 0)
    pass_rates: tuple[float, float] = (0.0, 0.0)
    design_effects: tuple[float, float] = (1.0, 1.0)
    min_traces: int = MIN_TRACES_PER_SIDE
    #: Cost per success of A and B and its change with an interval, per cost metric both sets carry (see
    #: :func:`cost_deltas`); empty when neither has cost data.
    costs: tuple[dict[str, Any], ...] = ()
    #: With ``model=`` other than "markov": the model both sets were fitted with (its R∞, ΔR∞ and ΔR(d) replace the
    #: first-order chains' above; :class:`~tracetochain.analysis._models.ModelComparison`).
    model: Any = None
    #: The permutation test of ΔR∞ = 0 (the first-order chains' R∞, traces relabelled between the sets): a
    #: difference is called only when it rejects at 1 − ``confidence`` too (:attr:`direction`). None when the
    #: sets' per-trace count vectors would outgrow the memory budget (:data:`SKIPPED_TEST`).
    delta_r_inf_test: PermutationTest | None = None

    @property
    def r_inf(self) -> tuple[float, float]:
        """R∞ of A and of B: the chosen model's when there is one, else the first-order chains'."""
        if self.model is not None:
            a, b = self.model.compiled
            return float(a.chain.r_inf), float(b.chain.r_inf)
        return self.chain_a.r_inf, self.chain_b.r_inf

    @property
    def insufficient(self) -> bool:
        """Too few usable traces on a side to call a difference."""
        return min(self.n_usable) < self.min_traces

    @property
    def interval_direction(self) -> Literal["better", "worse", "same"]:
        """B against A by ΔR∞'s interval alone: above 0, below 0, across 0."""
        lo, hi = self.delta_r_inf_interval
        return "better" if lo > 0 else ("worse" if hi < 0 else "same")

    @property
    def unconfirmed(self) -> bool:
        """ΔR∞'s interval excludes 0 but the permutation test does not reject at 1 − ``confidence``."""
        t = self.delta_r_inf_test
        return (not self.insufficient and self.interval_direction != "same" and t is not None
                and t.p_value > 1.0 - self.confidence)

    @property
    def direction(self) -> Literal["better", "worse", "same", "insufficient"]:
        """B against A — or too little data to tell. A difference is called when ΔR∞'s interval excludes 0 and the
        permutation test of ΔR∞ = 0 rejects at 1 − ``confidence``: the interval alone, from two sets of draws,
        called two samples of one agent different in about 6 % of pairs at 95 % under heavy censoring; the test's
        size is exact (``uncertainty._permutation``)."""
        if self.insufficient:
            return "insufficient"
        return "same" if self.unconfirmed else self.interval_direction

    @property
    def verdict(self) -> str:
        lo, hi = self.delta_r_inf_interval
        d = f"ΔR∞ = {self.delta_r_inf:+.3f} [{lo:+.3f}, {hi:+.3f}]"
        a, b = self.names
        if self.insufficient:
            short = [f"{n} has {k}" for n, k in zip(self.names, self.n_usable, strict=True) if k < self.min_traces]
            return (f"Insufficient evidence to compare {a} and {b}: {', '.join(short)} usable trace(s); a comparison "
                    f"needs at least {self.min_traces} per side ({d}).")
        t = self.delta_r_inf_test
        p = "" if t is None else f", permutation p = {t.p_value:.3g}"
        if self.direction == "better":
            return f"{b} is more reliable than {a}: {d}{p}."
        if self.direction == "worse":
            return f"{b} is less reliable than {a}: {d}{p}."
        if self.unconfirmed and t is not None:
            d += (f"; the interval excludes 0 but the permutation test of no difference does not reject "
                  f"(p = {t.p_value:.3g} > {1.0 - self.confidence:.3g}), so no difference is called")
        else:
            d += p
        shape = (" — but their transitions differ (states: " + ", ".join(self.homogeneity.differing) + ")"
                 if self.homogeneity.differing else "")
        return f"No significant difference in eventual success between {a} and {b}: {d}{shape}."

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "tracetochain.comparison", "schema_version": 2, "a": self.names[0], "b": self.names[1],
                "verdict": self.verdict, "direction": self.direction, "insufficient_evidence": self.insufficient,
                "min_traces_per_side": self.min_traces, "n_usable": list(self.n_usable),
                "pass_rate": {"a": self.pass_rates[0], "b": self.pass_rates[1]},
                "design_effect": {"a": self.design_effects[0], "b": self.design_effects[1]},
                "r_inf": {"a": self.r_inf[0], "b": self.r_inf[1]},
                "delta_r_inf": self.delta_r_inf, "delta_r_inf_interval": list(self.delta_r_inf_interval),
                "delta_r_inf_test": (self.delta_r_inf_test.to_dict() if self.delta_r_inf_test is not None else
                                     {"method": "permutation", "p_value": None, "skipped": SKIPPED_TEST}),
                "horizon": self.horizon, "delta_reliability": self.delta_reliability,
                "delta_reliability_lower": self.delta_reliability_lower,
                "delta_reliability_upper": self.delta_reliability_upper, "homogeneity": self.homogeneity.to_dict(),
                "changed_transitions": list(self.changed_transitions), "confidence": self.confidence,
                "method": self.method, "samples": self.samples, "seed": self.seed,
                "state_names": list(self.chain_a.state_names), "costs": list(self.costs),
                **({"model": self.model.to_dict()} if self.model is not None else {})}

    def __str__(self) -> str:
        lines = [self.verdict, f"  R∞: {self.names[0]} {self.r_inf[0]:.4f}, {self.names[1]} "
                               f"{self.r_inf[1]:.4f} ({self.confidence:.0%} {self.method}, {self.samples} draws; "
                               f"usable traces {self.n_usable[0]} / {self.n_usable[1]})",
                 "  " + str(self.homogeneity)]
        if self.model is not None:
            lines.insert(1, f"  model: {self.model.chosen} — {self.model.reason}; the permutation test, the "
                            "state test and the transitions below are the first-order chains'")
        lines += [f"  {_cost_line(c, self.names)}" for c in self.costs]
        if self.changed_transitions:
            lines.append("  transitions that changed most:")
            lines += [f"    {t['from']} → {t['to']}: {t['a']:.3f} → {t['b']:.3f} ({t['delta']:+.3f})"
                      for t in self.changed_transitions]
        return "\n".join(lines)

    def to_markdown(self) -> str:
        """A pull-request comment: verdict, the R∞ table and the transitions that moved.

        Names (files, states) are code spans their content cannot break, free text is escaped
        (:mod:`tracetochain._text`): trace content cannot add links, images, mentions or headings.
        """
        from tracetochain._text import markdown_code as cell
        from tracetochain._text import markdown_text as md_text

        a, b = (cell(n) for n in self.names)
        lo, hi = self.delta_r_inf_interval
        lines = [f"### {md_text(self.verdict)}", "", f"| | {a} | {b} | Δ ({self.confidence:.0%} interval) |",
                 "|---|---|---|---|",
                 f"| R∞ | {self.r_inf[0]:.3f} | {self.r_inf[1]:.3f} | {self.delta_r_inf:+.3f} "
                 f"[{lo:+.3f}, {hi:+.3f}] |"]
        if self.model is not None:
            lines[0:0] = [f"Model: {cell(self.model.chosen)} — {md_text(self.model.reason)}", ""]
        for d in (10, 20, 50):
            if d <= self.horizon:
                lo_d, hi_d = self.delta_reliability_lower[d], self.delta_reliability_upper[d]
                lines.append(f"| R({d}) | | | {self.delta_reliability[d]:+.3f} [{lo_d:+.3f}, {hi_d:+.3f}] |")
        for c in self.costs:
            from tracetochain._display import fmt_amount

            u = c["unit"]
            ci = c.get("delta_interval") or [None, None]
            delta = "—" if c["delta"] is None else f"{c['delta']:+.4g} {u}"
            if ci[0] is not None:
                delta += f" [{ci[0]:+.4g}, {ci[1]:+.4g}]"
            lines.append(f"| {cell(c['metric'])} per success | {fmt_amount(c['a'], u)} | {fmt_amount(c['b'], u)} "
                         f"| {delta} |")
        lines += ["", md_text(str(self.homogeneity), limit=2000), ""]
        if self.changed_transitions:
            lines += ["| transition | " + a + " | " + b + " | Δ |", "|---|---|---|---|"]
            lines += [f"| {cell(t['from'])} → {cell(t['to'])} | {t['a']:.3f} | {t['b']:.3f} | "
                      f"{t['delta']:+.3f} |" for t in self.changed_transitions]
        return "\n".join(lines) + "\n"

    def _display(self) -> Display:
        lines = str(self).splitlines()
        moved = Table("transitions", ("from", "to", "a", "b", "delta"),
                      tuple((t["from"], t["to"], t["a"], t["b"], t["delta"]) for t in self.changed_transitions))
        band = Table("reliability", ("d", "delta", "lower", "upper"),
                     tuple(zip(range(self.horizon + 1), self.delta_reliability, self.delta_reliability_lower,
                               self.delta_reliability_upper, strict=False)), shown=False)
        costs = Table("costs", ("metric", "unit", "a", "b", "delta", "lower", "upper"),
                      tuple((c["metric"], c["unit"], c["a"], c["b"], c["delta"],
                             *((c.get("delta_interval") or [None, None])[:2])) for c in self.costs), shown=False)
        states = self.homogeneity._display().tables
        return Display(lines[0], kind="Comparison", lines=tuple(x.strip() for x in lines[1:3]),
                       tables=(moved, *states, band, costs))


def _cost_line(c: dict[str, Any], names: tuple[str, str]) -> str:
    from tracetochain._display import fmt_amount

    u = c["unit"]
    ci = c.get("delta_interval") or [None, None]
    text = (f"{c['metric']} per success: {names[0]} {fmt_amount(c['a'], u)}, {names[1]} {fmt_amount(c['b'], u)}"
            + ("" if c["delta"] is None else f" (Δ = {c['delta']:+.4g} {u}"))
    if c["delta"] is not None:
        text += (f", {c['confidence']:.0%} interval [{ci[0]:+.4g}, {ci[1]:+.4g}])" if ci[0] is not None else ")")
    return text


def cost_deltas(sides: tuple[tuple[AbsorbingChain, Any], tuple[AbsorbingChain, Any]], *, confidence: float,
                seed: int = 0, metrics: tuple[str, ...] = ("cost_usd", "tokens", "seconds"),
                traces: tuple[Any, Any] = (None, None)) -> tuple[dict[str, Any], ...]:
    """Δ cost per success (B − A) with a percentile interval, per cost metric both sets carry.

    ``sides`` = ((chain, ensemble) of A, (chain, ensemble) of B); each chain carries its cost model. On every draw
    of a side's ensemble the cost per success E[C]/R∞ is computed with per-visit cost means drawn from their sampling
    law (:func:`tracetochain.costs.shared.cost_per_success_draws`); the interval of B − A is taken over every pair of
    draws (the two sides are independent, as for ΔR∞: :func:`~tracetochain.uncertainty.shared.difference_interval`).
    With the ``traces`` of a side (in memory), its observed spend per success
    is given beside.
    """
    from tracetochain.chain.shared import METRICS
    from tracetochain.costs import CostModel, observed_costs, summarize_costs
    from tracetochain.costs.shared import cost_per_success_draws

    (ca, ea), (cb, eb) = sides
    ma, mb = CostModel.of_chain(ca), CostModel.of_chain(cb)
    if ma is None or mb is None:
        return ()
    out: list[dict[str, Any]] = []
    for metric in metrics:
        if metric not in ma.metrics or metric not in mb.metrics:
            continue
        sa, sb = summarize_costs(ca, ma, metric), summarize_costs(cb, mb, metric)
        da = cost_per_success_draws(ca, ea, None, None, ma, metric, seed=seed)
        db = cost_per_success_draws(cb, eb, None, None, mb, metric, seed=seed + 1)
        da, db = da[np.isfinite(da)], db[np.isfinite(db)]
        delta = None if sa.per_success is None or sb.per_success is None else sb.per_success - sa.per_success
        interval: list[float | None] = [None, None]
        if da.size and db.size:
            lo, hi = difference_interval(da, db, confidence)
            interval = [float(lo), float(hi)]
        # The observed figures are shown as points: no bootstrap (2,000 resamples a metric and side) for them.
        oa = observed_costs(traces[0], ma, metric, n_boot=0).per_success if traces[0] is not None else None
        ob = observed_costs(traces[1], mb, metric, n_boot=0).per_success if traces[1] is not None else None
        out.append({"metric": metric, "unit": METRICS[metric][0], "a": sa.per_success, "b": sb.per_success,
                    "delta": delta, "delta_interval": interval, "confidence": confidence,
                    "n_draws": int(min(da.size, db.size)), "observed_a": oa, "observed_b": ob,
                    "failed_share_a": sa.failed_share, "failed_share_b": sb.failed_share})
    return tuple(out)


def _rows(chain: AbsorbingChain) -> NDArray[np.float64]:
    out: NDArray[np.float64] = np.column_stack([chain.Q, chain.R_success, chain.R_failure])
    return out


@renamed_parameters(method="intervals")
def compare(a: Any, b: Any, *, names: tuple[str, str] = ("A", "B"), reader: str | None = None,
            reader_options: dict[str, Any] | None = None, on_error: str = "raise", engine: Any = None,
            states: Any = "label", state_options: dict[str, Any] | None = None, pseudocount: float | None = None,
            prior: str | None = None, horizon: int = 50, samples: int = 200,
            intervals: Literal["bootstrap", "posterior"] = "bootstrap", confidence: float = 0.95, seed: int = 0,
            level: float = 0.05, min_row_count: int = 5, top: int = 5, min_traces: int = MIN_TRACES_PER_SIDE,
            partition_options: dict[str, Any] | None = None, model: str = "markov",
            model_options: dict[str, Any] | None = None, n_jobs: int | None = None,
            permutations: int = PERMUTATIONS) -> Comparison:
    """Compare B with A (module docstring): ΔR∞ and ΔR(d) with intervals, per-state homogeneity, biggest moves.

    ``a`` and ``b`` are TraceTables or paths (any reader; canonical Parquet/JSONL corpora partition by partition with
    an ``engine``). Seeds: A's replicates use ``seed``, B's ``seed + 1``; the same inputs give the same numbers on
    every engine and every partitioning.

    ``model`` other than ``"markov"`` (``"auto"`` or a family, as :func:`~tracetochain.analysis.analyze`): one model
    family and size, chosen on A ∪ B by held-out log-likelihood (or asked for), is fitted on each set; R∞, ΔR∞ and
    ΔR(d) are then that model's, with intervals from ``samples`` refits over each set's units
    (:func:`~tracetochain.analysis._models.compare_models`). Needs both sets in memory. ``n_jobs``: processes for
    that model's candidates and refits (as :func:`~tracetochain.analysis.analyze`'s; the result does not depend on
    it).

    A difference in R∞ is called only when the permutation test of ΔR∞ = 0 (``permutations`` relabellings of the
    traces between the sets, tasks run on both sides within themselves; ``uncertainty._permutation``) rejects at
    1 − ``confidence`` as well; its p-value is in the verdict and in ``delta_r_inf_test``.
    """
    from tracetochain.families import is_first_order, model_choices

    if model not in model_choices():
        raise ValueError(f"model must be one of {', '.join(model_choices())}, got {model!r}")
    if samples < 2:
        raise ValueError(f"samples must be >= 2, got {samples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    prior_obj = ChainPrior.from_settings(pseudocount, prior)
    policy = prior_obj.resolve_unvisited("auto")
    opts = dict(reader_options or {})
    popts = dict(partition_options or {})
    with opened_engine(engine) as eng:  # the analysis's reading and counting driver, on both corpora
        parts_a, src_a, _ = plan_input(a, engine=eng, reader=reader, on_error=on_error, reader_options=opts,
                                       partition_options=popts)
        parts_b, src_b, _ = plan_input(b, engine=eng, reader=reader, on_error=on_error, reader_options=opts,
                                       partition_options=popts)
        # One state model for both: learned on a seeded sample of both corpora (no held-out split here).
        learn_spec = SummarySpec(seed=seed, n_splits=0)
        state_model, vocab = resolve_states(states, dict(state_options or {}), [*parts_a, *parts_b], learn_spec,
                                            on_error, DEFAULT_STATE_SAMPLE)
        summaries = []
        for k, parts in enumerate((parts_a, parts_b)):
            # Replicates are drawn with the posterior too: the per-state homogeneity test needs them for its
            # Rao–Scott correction (steps of one trace are not independent; the plain χ² it fell back to called a
            # state changed between two samples of one agent in 13.5 % of corpora).
            spec = SummarySpec(seed=seed + k, n_splits=0,
                               n_replicates=(samples if intervals == "bootstrap" else
                                             min(samples, HOMOGENEITY_REPLICATES)),
                               resample_by="task", keep_trace_vectors=True)
            summaries.append(summarize_parts(parts, eng, on_error=on_error, model=state_model, spec=spec))
    sa, sb = summaries
    if vocab is not None:
        union = tuple(vocab)
    elif state_model is not None:
        seen = set(sa.state_names) | set(sb.state_names)
        union = tuple(state_model.state_names) + ((UNSEEN_STATE,) if UNSEEN_STATE in seen else ())
    else:
        union = sa.state_names + tuple(s for s in sb.state_names if s not in set(sa.state_names))
    check_ensemble_size(samples, len(union))  # each side's replicates on the shared vocabulary
    sa, sb = reindex_summary(sa, union), reindex_summary(sb, union)
    for s, src in ((sa, src_a), (sb, src_b)):
        if s.counts.n_fitted_traces == 0:
            raise EmptyTraceSetError(f"no usable traces in {src}: every trace is invalid or there are none")
    chain_a = estimate_chain(sa.counts, prior=prior_obj, unvisited=policy)
    chain_b = estimate_chain(sb.counts, prior=prior_obj, unvisited=policy)
    if sa.base.costs is not None:
        chain_a = chain_a.with_metadata(costs=sa.base.costs.reindexed(union).to_dict())
    if sb.base.costs is not None:
        chain_b = chain_b.with_metadata(costs=sb.base.costs.reindexed(union).to_dict())
    draws = []
    ensembles = []
    for k, (s, chain) in enumerate(((sa, chain_a), (sb, chain_b))):
        ens = summary_ensemble(s, chain, method=intervals, prior=prior_obj, unvisited=policy, initial="empirical",
                               n_samples=samples, seed=seed + k, confidence=confidence)
        ensembles.append(ens)
        r = ens.stats("r_inf", return_samples=True).samples
        curve = ens.stats("reliability", horizon=horizon, return_samples=True).samples
        assert r is not None and curve is not None
        draws.append((np.asarray(r, float), np.asarray(curve, float), ens.info.get("design_effect", 1.0)))
    in_memory = tuple(p[0].traces if len(p) == 1 and isinstance(p[0], MemoryPartition) else None
                      for p in (parts_a, parts_b))
    costs = cost_deltas(((chain_a, ensembles[0]), (chain_b, ensembles[1])), confidence=confidence, seed=seed,
                        traces=(in_memory[0], in_memory[1]))
    homog = homogeneity_from_counts(sa.counts.outcome_matrix(), sb.counts.outcome_matrix(), list(union), level=level,
                                    n_traces=(sa.n_usable, sb.n_usable),
                                    boot=(sa.boot, sb.boot) if min(sa.boot.shape[0], sb.boot.shape[0]) > 1
                                    else None, seed=seed)
    test = None
    if sa.vectors is not None and sb.vectors is not None:
        test = permutation_delta_r_inf(sa.vectors, sb.vectors, n_states=len(union), prior=prior_obj,
                                       unvisited=policy, initial="empirical", permutations=permutations, seed=seed)
    (ra, ca, da), (rb, cb, db) = draws
    chosen = None
    if not is_first_order(model):
        chosen = _compare_models(model, parts_a, parts_b, state_model=state_model, union=union, seed=seed,
                                 samples=samples, horizon=horizon, options=model_options, n_jobs=n_jobs)
        (ra, rb), (ca, cb) = chosen.r_inf_draws, chosen.reliability_draws
    r_lo, r_hi = difference_interval(ra, rb, confidence)
    c_lo, c_hi = difference_interval(ca, cb, confidence)
    Pa, Pb = _rows(chain_a), _rows(chain_b)
    support = (sa.counts.row_totals >= min_row_count) & (sb.counts.row_totals >= min_row_count)
    targets = [*union, "success", "failure"]
    moves: list[dict[str, Any]] = []
    for i in np.flatnonzero(support):
        for j in range(Pa.shape[1]):
            moves.append({"from": union[i], "to": targets[j], "a": float(Pa[i, j]), "b": float(Pb[i, j]),
                          "delta": float(Pb[i, j] - Pa[i, j])})
    moves.sort(key=lambda t: -abs(t["delta"]))
    rel_a, rel_b = chain_a.reliability(horizon), chain_b.reliability(horizon)
    r_a, r_b = chain_a.r_inf, chain_b.r_inf
    if chosen is not None:
        ma, mb = chosen.compiled
        rel_a, rel_b, r_a, r_b = ma.chain.reliability(horizon), mb.chain.reliability(horizon), ma.chain.r_inf, \
            mb.chain.r_inf
    return Comparison(names, chain_a, chain_b, r_b - r_a,
                      (float(r_lo), float(r_hi)), horizon,
                      [float(x) for x in rel_b - rel_a], [float(x) for x in c_lo], [float(x) for x in c_hi], homog,
                      tuple(moves[:top]),
                      confidence, samples, seed, intervals if chosen is None else "bootstrap (model refits)",
                      (sa.n_usable, sb.n_usable),
                      (sa.n_success / max(1, sa.n_usable), sb.n_success / max(1, sb.n_usable)), (float(da), float(db)),
                      int(min_traces), costs, chosen, test)


def _compare_models(model: str, parts_a: list[Any], parts_b: list[Any], *, state_model: Any, union: tuple[str, ...],
                    seed: int, samples: int, horizon: int, options: dict[str, Any] | None,
                    n_jobs: int | None = None) -> Any:
    """The model side of a comparison (both sets in memory, labelled with the comparison's states)."""
    from tracetochain.analysis._analyze import label_steps
    from tracetochain.analysis._models import compare_models

    labelled = []
    for parts in (parts_a, parts_b):
        if not (len(parts) == 1 and isinstance(parts[0], MemoryPartition)):
            raise ValueError(f"model={model!r} fits the model families on the traces in memory; compare without "
                             "--engine (the sets are then read into memory), or keep model='markov'")
        traces = parts[0].traces
        codes, names = label_steps(traces, state_model)
        labelled.append(traces.with_states(codes, list(names)))
    return compare_models((labelled[0], labelled[1]), union, requested=model, seed=seed, samples=samples,
                          horizon=horizon, options=options, n_jobs=n_jobs)
