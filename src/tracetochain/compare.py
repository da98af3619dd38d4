"""Compare two trace sets (two agents, two versions, before/after a prompt change).

Both sets are labelled with one state model fitted on their union, so their chains share states. ΔR∞ and ΔR(d)
get percentile intervals from independent trace bootstraps of each set (seeded), and so does the change in cost
per success (tokens, dollars, seconds) when the traces carry usage; a per-state homogeneity test
says which rows differ; the transitions that moved most are listed; a verdict sentence sums it up.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from tracetochain.audit._homogeneity import HomogeneityResult, homogeneity_test
from tracetochain.chain._estimator import ChainEstimator
from tracetochain.chain._model import AbsorbingChain
from tracetochain.states._spec import states_from_spec
from tracetochain.traces._table import TraceTable


def concat_traces(a: TraceTable, b: TraceTable, prefixes: tuple[str, str] = ("A/", "B/")) -> TraceTable:
    """One table with the traces of ``a`` then ``b``; trace ids get ``prefixes`` so they cannot collide."""
    parts = []
    for t, prefix in zip((a, b), prefixes, strict=True):
        table = t.to_arrow()
        ids = pa.array([prefix + str(x) for x in table.column("trace_id").to_pylist()], pa.string())
        parts.append(table.set_column(table.column_names.index("trace_id"), "trace_id", ids))
    merged = pa.concat_tables(parts, promote_options="permissive")
    return TraceTable.from_arrow(merged, source=f"{a.report.source} + {b.report.source}", format="union")


@dataclass(frozen=True)
class Comparison:
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
    #: Cost per success of A and B and its change with an interval, per cost metric both sets carry (see
    #: :func:`cost_deltas`); empty when neither has cost data.
    costs: tuple[dict[str, Any], ...] = ()

    @property
    def verdict(self) -> str:
        lo, hi = self.delta_r_inf_interval
        d = f"ΔR∞ = {self.delta_r_inf:+.3f} [{lo:+.3f}, {hi:+.3f}]"
        a, b = self.names
        if lo > 0:
            return f"{b} is more reliable than {a}: {d}."
        if hi < 0:
            return f"{b} is less reliable than {a}: {d}."
        shape = (" — but their transitions differ (states: " + ", ".join(self.homogeneity.differing) + ")"
                 if self.homogeneity.differing else "")
        return f"No significant difference in eventual success between {a} and {b}: {d}{shape}."

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "tracetochain.comparison", "schema_version": 1, "a": self.names[0], "b": self.names[1],
                "verdict": self.verdict, "r_inf": {"a": self.chain_a.r_inf, "b": self.chain_b.r_inf},
                "delta_r_inf": self.delta_r_inf, "delta_r_inf_interval": list(self.delta_r_inf_interval),
                "horizon": self.horizon, "delta_reliability": self.delta_reliability,
                "delta_reliability_lower": self.delta_reliability_lower,
                "delta_reliability_upper": self.delta_reliability_upper, "homogeneity": self.homogeneity.to_dict(),
                "changed_transitions": list(self.changed_transitions), "confidence": self.confidence,
                "method": "independent trace bootstraps", "samples": self.samples, "seed": self.seed,
                "state_names": list(self.chain_a.state_names), "costs": list(self.costs)}

    def __str__(self) -> str:
        lines = [self.verdict, f"  R∞: {self.names[0]} {self.chain_a.r_inf:.4f}, {self.names[1]} "
                               f"{self.chain_b.r_inf:.4f} ({self.confidence:.0%} bootstrap, {self.samples} replicates)",
                 "  " + str(self.homogeneity)]
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
        from tracetochain._text import markdown_code, markdown_text

        cell = markdown_code
        a, b = (cell(n) for n in self.names)
        lo, hi = self.delta_r_inf_interval
        lines = [f"### {markdown_text(self.verdict)}", "", f"| | {a} | {b} | Δ ({self.confidence:.0%} interval) |",
                 "|---|---|---|---|",
                 f"| R∞ | {self.chain_a.r_inf:.3f} | {self.chain_b.r_inf:.3f} | {self.delta_r_inf:+.3f} "
                 f"[{lo:+.3f}, {hi:+.3f}] |"]
        for d in (10, 20, 50):
            if d <= self.horizon:
                lo_d, hi_d = self.delta_reliability_lower[d], self.delta_reliability_upper[d]
                lines.append(f"| R({d}) | | | {self.delta_reliability[d]:+.3f} [{lo_d:+.3f}, {hi_d:+.3f}] |")
        for c in self.costs:
            from tracetochain.costs import fmt_amount

            u = c["unit"]
            iv = c.get("delta_interval") or [None, None]
            delta = "—" if c["delta"] is None else f"{c['delta']:+.4g} {u}"
            if iv[0] is not None:
                delta += f" [{iv[0]:+.4g}, {iv[1]:+.4g}]"
            lines.append(f"| {cell(c['metric'])} per success | {fmt_amount(c['a'], u)} | {fmt_amount(c['b'], u)} | "
                         f"{delta} |")
        lines += ["", markdown_text(str(self.homogeneity), limit=2000), ""]
        if self.changed_transitions:
            lines += ["| transition | " + a + " | " + b + " | Δ |", "|---|---|---|---|"]
            lines += [f"| {cell(t['from'])} → {cell(t['to'])} | {t['a']:.3f} | {t['b']:.3f} | {t['delta']:+.3f} |"
                      for t in self.changed_transitions]
        return "\n".join(lines) + "\n"

    def _repr_html_(self) -> str:
        return "<pre>" + html.escape(str(self)) + "</pre>"


def _cost_line(c: dict[str, Any], names: tuple[str, str]) -> str:
    from tracetochain.costs import fmt_amount

    u = c["unit"]
    iv = c.get("delta_interval") or [None, None]
    text = (f"{c['metric']} per success: {names[0]} {fmt_amount(c['a'], u)}, {names[1]} {fmt_amount(c['b'], u)}"
            + ("" if c["delta"] is None else f" (Δ = {c['delta']:+.4g} {u}"))
    if c["delta"] is not None:
        text += (f", {c['confidence']:.0%} interval [{iv[0]:+.4g}, {iv[1]:+.4g}])" if iv[0] is not None else ")")
    return text


def cost_deltas(sides: tuple[tuple[AbsorbingChain, TraceTable, Any, Any], tuple[AbsorbingChain, TraceTable, Any, Any]],
                *, confidence: float, metrics: tuple[str, ...] = ("cost_usd", "tokens", "seconds")
                ) -> tuple[dict[str, Any], ...]:
    """Δ cost per success (B − A) with a percentile interval from the two independent bootstraps, per metric.

    ``sides`` = ((chain, labelled traces, bootstrap ensemble, bootstrap plan) of A, the same of B). Each replicate
    pairs a resampled chain with the per-visit cost means of the same resample (:func:`tracetochain.costs.
    cost_per_success_draws`); replicate i of A is subtracted from replicate i of B (independent, as for ΔR∞). The
    observed spend per success of each set is given beside.
    """
    from tracetochain.costs import METRICS, CostModel, cost_per_success_draws, observed_costs, summarize_costs

    (ca, ta, ea, pa_), (cb, tb, eb, pb) = sides
    ma = CostModel.from_traces(ta, ca.state_names)
    mb = CostModel.from_traces(tb, cb.state_names)
    out: list[dict[str, Any]] = []
    alpha = (1 - confidence) / 2
    for metric in metrics:
        if metric not in ma.metrics or metric not in mb.metrics:
            continue
        sa, sb = summarize_costs(ca, ma, metric), summarize_costs(cb, mb, metric)
        da = cost_per_success_draws(ca, ea, pa_, ta, ma, metric)
        db = cost_per_success_draws(cb, eb, pb, tb, mb, metric)
        n = min(da.size, db.size)
        diff = db[:n] - da[:n]
        diff = diff[np.isfinite(diff)]
        delta = None if sa.per_success is None or sb.per_success is None else sb.per_success - sa.per_success
        interval = [float(np.quantile(diff, alpha)), float(np.quantile(diff, 1 - alpha))] if diff.size else [None,
                                                                                                            None]
        oa, ob = observed_costs(ta, ma, metric), observed_costs(tb, mb, metric)
        out.append({"metric": metric, "unit": METRICS[metric][0], "a": sa.per_success, "b": sb.per_success,
                    "delta": delta, "delta_interval": interval, "confidence": confidence,
                    "n_replicates": int(diff.size), "observed_a": oa.per_success, "observed_b": ob.per_success,
                    "failed_share_a": sa.failed_share, "failed_share_b": sb.failed_share})
    return tuple(out)


def _rows(chain: AbsorbingChain) -> np.ndarray:
    return np.column_stack([chain.Q, chain.R_success, chain.R_failure])


def compare(a: TraceTable, b: TraceTable, *, names: tuple[str, str] = ("A", "B"), states: Any = "label",
            state_options: dict[str, Any] | None = None, pseudocount: float = 1.0, horizon: int = 50,
            samples: int = 200, confidence: float = 0.95, n_permutations: int = 999, seed: int = 0,
            min_row_count: int = 5, top: int = 5) -> Comparison:
    """Compare B with A: ΔR∞ and ΔR(d) with bootstrap intervals, per-state homogeneity, biggest moves."""
    from tracetochain.uncertainty import TraceBootstrap

    estimator = states_from_spec(states, **(state_options or {})) if isinstance(states, str) else states
    union = concat_traces(a, b)
    usable = union.select_traces(union.outcomes() != 3)
    model = estimator.fit(usable).fetch_model()
    la, lb = model.label(a), model.label(b)
    vocab = model.state_names
    chain_a = ChainEstimator(pseudocount=pseudocount, states=vocab).fit(la).fetch_model()
    chain_b = ChainEstimator(pseudocount=pseudocount, states=vocab).fit(lb).fetch_model()
    seeds = np.random.SeedSequence(seed).spawn(3)

    boots: list[tuple[Any, Any]] = []

    def draws(t: TraceTable, ss: np.random.SeedSequence) -> tuple[np.ndarray, np.ndarray]:
        boot = TraceBootstrap(n_resamples=samples, seed=int(ss.generate_state(1)[0]), pseudocount=pseudocount,
                              state_names=vocab).fit(t)
        ens = boot.fetch_model()
        boots.append((ens, boot.plan_))
        r = ens.stats("r_inf", return_samples=True).samples
        curve = ens.stats("reliability", horizon=horizon, return_samples=True).samples
        assert r is not None and curve is not None
        return np.asarray(r, float), np.asarray(curve, float)

    ra, ca = draws(la, seeds[0])
    rb, cb = draws(lb, seeds[1])
    homog = homogeneity_test(la, lb, states=vocab, n_permutations=n_permutations,
                             seed=int(seeds[2].generate_state(1)[0]))
    costs = cost_deltas(((chain_a, la, *boots[0]), (chain_b, lb, *boots[1])), confidence=confidence)
    return comparison_from_draws(names, chain_a, chain_b, (ra, ca), (rb, cb), homog, horizon=horizon,
                                 confidence=confidence, samples=samples, seed=seed, min_row_count=min_row_count,
                                 top=top, costs=costs)


def comparison_from_draws(names: tuple[str, str], chain_a: AbsorbingChain, chain_b: AbsorbingChain,
                          draws_a: tuple[np.ndarray, np.ndarray], draws_b: tuple[np.ndarray, np.ndarray],
                          homogeneity: HomogeneityResult, *, horizon: int, confidence: float, samples: int,
                          seed: int, min_row_count: int = 5, top: int = 5,
                          costs: tuple[dict[str, Any], ...] = ()) -> Comparison:
    """The :class:`Comparison` of two chains on one vocabulary, given each one's independent replicate draws of R∞
    and of the R(0..horizon) curve (paired by index), and their homogeneity test."""
    (ra, ca), (rb, cb) = draws_a, draws_b
    n = min(ra.size, rb.size)
    alpha = (1 - confidence) / 2
    diff = rb[:n] - ra[:n]
    curve_diff = cb[:n] - ca[:n]
    vocab = chain_a.state_names
    Pa, Pb = _rows(chain_a), _rows(chain_b)
    counts_a = np.asarray(chain_a.metadata["counts"]["transitions"], float).sum(axis=1)
    counts_b = np.asarray(chain_b.metadata["counts"]["transitions"], float).sum(axis=1)
    support = (counts_a >= min_row_count) & (counts_b >= min_row_count)
    targets = [*vocab, "success", "failure"]
    moves: list[dict[str, Any]] = []
    for i in np.flatnonzero(support):
        for j in range(Pa.shape[1]):
            moves.append({"from": vocab[i], "to": targets[j], "a": float(Pa[i, j]), "b": float(Pb[i, j]),
                          "delta": float(Pb[i, j] - Pa[i, j])})
    moves.sort(key=lambda t: -abs(t["delta"]))
    return Comparison(names, chain_a, chain_b, chain_b.r_inf - chain_a.r_inf,
                      (float(np.quantile(diff, alpha)), float(np.quantile(diff, 1 - alpha))), horizon,
                      [float(x) for x in chain_b.reliability(horizon) - chain_a.reliability(horizon)],
                      [float(x) for x in np.quantile(curve_diff, alpha, axis=0)],
                      [float(x) for x in np.quantile(curve_diff, 1 - alpha, axis=0)], homogeneity,
                      tuple(moves[:top]), confidence, samples, seed, costs)
