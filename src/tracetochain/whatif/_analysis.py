"""What-if results and bottleneck ranking: the engineering questions asked of a fitted chain.

:func:`what_if` reports the exact change of the headline metrics under a list of edits, with the first-order screening
term and Prop. 2's bound beside it (Tran-Truong & Le 2026; docs/numerics.md §5). :func:`bottlenecks` ranks states by the
share of failures that leave from them and by what a fallback there would be worth (exact).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tracetochain._display import Display, ResultDisplay, Table
from tracetochain.chain import AbsorbingChain
from tracetochain.exceptions import UndefinedMetricError
from tracetochain.numerics.sensitivity import first_order_delta, prop2_bound
from tracetochain.whatif._edits import Edit, EditError, RemoveState, Reroute, apply_edits


def _safe(fn: Any) -> float | None:
    try:
        return float(fn())
    except UndefinedMetricError:
        return None


@dataclass(frozen=True, repr=False)
class WhatIfResult(ResultDisplay):
    """Exact effect of ``edits`` on the chain's metrics, with the first-order term and Prop. 2's bound."""

    edits: tuple[str, ...]
    base: dict[str, float | None]
    edited: dict[str, float | None]
    delta_r_inf: float
    first_order: float | None
    prop2_bound: float | None
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: Interval of ΔR∞ propagated through an ensemble of chains (posterior or bootstrap), when one was given.
    delta_r_inf_interval: dict[str, Any] | None = None
    #: Expected cost per attempt and per success before and after, when a cost model was given (see
    #: :func:`what_if`): ``{"metric", "unit", "base", "edited", "delta_per_success", "delta_per_success_interval",
    #: "edge_costs"}``.
    costs: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        delta: dict[str, float | None] = {}
        for k, before in self.base.items():
            after = self.edited.get(k)
            delta[k] = None if before is None or after is None else after - before
        return {"kind": "tracetochain.whatif", "schema_version": 1, "edits": list(self.edits),
                "base": self.base, "edited": self.edited, "delta": delta, "delta_r_inf": self.delta_r_inf,
                "first_order": self.first_order, "prop2_bound": self.prop2_bound, "notes": list(self.notes),
                "delta_r_inf_interval": self.delta_r_inf_interval, "costs": self.costs}

    def __str__(self) -> str:
        lines = [f"What if: {'; '.join(self.edits)}",
                 f"  R∞ {self.base['r_inf']:.4f} → {self.edited['r_inf']:.4f}  (Δ = {self.delta_r_inf:+.4f} exact)"]
        iv = self.delta_r_inf_interval
        if iv is not None:
            lines.append(f"  ΔR∞ {iv.get('confidence', 0.95):.0%} interval [{iv['lower']:+.4f}, {iv['upper']:+.4f}] "
                         f"({iv.get('method')}, {iv.get('n_samples')} draws)")
        if self.first_order is not None:
            lines.append(f"  first-order estimate {self.first_order:+.4f}")
        if self.prop2_bound is not None:
            lines.append(f"  Prop. 2 bound on |Δ|: {self.prop2_bound:.4f}")
        if self.costs is not None:
            from tracetochain._display import fmt_amount

            c, u = self.costs, self.costs["unit"]
            before, after = c["base"]["per_success"], c["edited"]["per_success"]
            line = (f"  {c['metric']} per success {fmt_amount(before, u)} → {fmt_amount(after, u)}"
                    + (f"  (Δ = {after - before:+.4g} {u})" if before is not None and after is not None else ""))
            iv = c.get("delta_per_success_interval")
            if iv and iv.get("lower") is not None:
                line += f", {iv['confidence']:.0%} interval [{iv['lower']:+.4g}, {iv['upper']:+.4g}]"
            lines.append(line)
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def _display(self) -> Display:
        lines = str(self).splitlines()
        rows = tuple((k, b, self.edited.get(k), None if b is None or self.edited.get(k) is None
                      else self.edited[k] - b) for k, b in self.base.items())  # type: ignore[operator]
        return Display(lines[0].removeprefix("What if: "), kind="What if", lines=tuple(x.strip() for x in lines[1:]),
                       tables=(Table("metrics", ("metric", "base", "edited", "delta"), rows, default_digits=4),))


def _metrics(chain: AbsorbingChain, horizons: tuple[int, ...]) -> dict[str, float | None]:
    out: dict[str, float | None] = {"r_inf": chain.r_inf, "mean_steps": chain.mean_steps(),
                                    "mean_steps_given_success": _safe(chain.mean_steps_given_success),
                                    "mean_steps_given_failure": _safe(chain.mean_steps_given_failure)}
    if horizons:
        rel = chain.reliability(max(horizons))
        out.update({f"R({d})": float(rel[d]) for d in horizons})
    return out


@dataclass(frozen=True)
class EdgeCost:
    """The probability mass that the edits *add* to ``state → target`` costs ``cost`` per use (in the cost metric's
    unit), e.g. a fallback tool's price: ``EdgeCost("tool:search", "success", 0.02)`` with
    ``Reroute("tool:search", 0.1)``. ``state`` may be ``"*"``."""

    state: str
    target: str
    cost: float

    def __str__(self) -> str:
        return f"{self.state} → {self.target} costs {self.cost:g} per use"


def _edge_spend(chain: AbsorbingChain, edited: AbsorbingChain, edge_costs: Sequence[EdgeCost]
                ) -> tuple[np.ndarray, np.ndarray]:
    """M and M2 of :mod:`tracetochain.numerics.rewards`: added mass × cost and added mass × cost² per edge."""
    from tracetochain.whatif._edits import _column, _rows, _states

    before, after = _rows(chain), _rows(edited)
    M = np.zeros_like(after)
    M2 = np.zeros_like(after)
    for ec in edge_costs:
        if not np.isfinite(ec.cost) or ec.cost < 0:
            raise EditError(f"{ec}: the cost must be a finite number >= 0")
        j = _column(edited, ec.target)
        for i in _states(edited, ec.state):
            added = max(0.0, float(after[i, j] - before[i, j]))
            M[i, j] += added * ec.cost
            M2[i, j] += added * ec.cost**2
    return M, M2


def _cost_figures(chain: AbsorbingChain, c: np.ndarray, v: np.ndarray, M: np.ndarray | None = None,
                  M2: np.ndarray | None = None) -> dict[str, float | None]:
    mom = chain.accumulated_cost(c, v, edge_spend=M, edge_spend_sq=M2)
    return {"per_attempt": mom.mean, "per_success": mom.mean / chain.r_inf if chain.r_inf > 0 else None}


def what_if(chain: AbsorbingChain, edits: Sequence[Edit], *, horizons: tuple[int, ...] = (10, 20, 50),
            ensemble: Any = None, costs: Any = None, cost_metric: str | None = None,
            edge_costs: Sequence[EdgeCost] = ()) -> WhatIfResult:
    """Apply ``edits`` and compare metrics exactly; add the first-order term and Prop. 2's bound when they apply.

    With ``ensemble`` (a :class:`~tracetochain.uncertainty.ChainEnsemble`), ΔR∞ also gets a percentile interval:
    the same edits applied to every draw.

    With ``costs`` (a :class:`~tracetochain.costs.CostModel`, by default the chain's own when it carries one) the
    expected cost per attempt and per success (E[C]/R∞, independent retries) of ``cost_metric`` (default: the first
    metric the model has) are reported before and after; ``edge_costs`` price the mass the edits add to an edge
    (a fallback is rarely free). With an ensemble the change in cost per success gets an interval too, each draw
    paired with a draw of the per-visit cost means.
    """
    edited = apply_edits(chain, edits)
    notes: list[str] = []
    first: float | None = None
    bound: float | None = None
    if any(isinstance(e, RemoveState) for e in edits):
        notes.append("a state was removed: first-order and Prop. 2 terms need the same state set")
    else:
        dQ = edited.Q - chain.Q
        drs = edited.R_success - chain.R_success
        first = first_order_delta(chain.expected_visits(), chain.success_probabilities, dQ, drs)
        if np.allclose(drs, 0.0, atol=1e-15):
            N_norm = float(np.max(chain._t))  # ‖N‖∞ = max row sum of N = max expected steps (N ≥ 0)
            bound = prop2_bound(N_norm, dQ, chain.R_success)
            if bound is None:
                notes.append("Prop. 2's assumption ‖N‖∞‖ΔQ‖∞ < 1 fails for this edit: no bound")
        else:
            notes.append("the edit changes success exits: Prop. 2 covers changes of Q with R⊕ fixed, so no bound "
                         "(the exact change is computed instead, as the paper does for the fallback tool)")
    base_m = _metrics(chain, horizons)
    new_m = _metrics(edited, horizons)
    interval = None
    if ensemble is not None:
        q = ensemble.stats(lambda c: apply_edits(c, edits).r_inf - c.r_inf)
        interval = {"lower": float(q.lower), "upper": float(q.upper), "confidence": q.confidence,
                    "method": q.method, "n_samples": q.n_samples, "n_excluded": q.n_excluded}
    cost_doc = _what_if_costs(chain, edited, edits, ensemble, costs, cost_metric, edge_costs)
    if cost_doc is None and edge_costs:
        notes.append("edge costs were given but there is no cost model (fit the chain from traces with usage)")
    return WhatIfResult(tuple(str(e) for e in edits), base_m, new_m, edited.r_inf - chain.r_inf, first, bound,
                        tuple(notes), interval, cost_doc)


def _what_if_costs(chain: AbsorbingChain, edited: AbsorbingChain, edits: Sequence[Edit], ensemble: Any,
                   costs: Any, cost_metric: str | None, edge_costs: Sequence[EdgeCost]) -> dict[str, Any] | None:
    from tracetochain.chain.shared import METRICS
    from tracetochain.costs import CostModel
    from tracetochain.costs.shared import posterior_mean_draws

    model = costs if costs is not None else CostModel.of_chain(chain)
    if model is None or not model.available:
        return None
    metric = cost_metric or model.available[0]
    if metric not in model.metrics:
        raise EditError(f"no {metric} in the cost model (it has {', '.join(model.available) or 'none'})")
    if edge_costs and any(isinstance(e, RemoveState) for e in edits):
        raise EditError("edge costs need the same states before and after: price the edges of edits other than "
                        "remove")
    pv = model.per_visit(metric, chain.state_names)
    keep = np.array([chain.state_names.index(s) for s in edited.state_names], dtype=np.int64)
    M, M2 = _edge_spend(chain, edited, edge_costs) if edge_costs else (None, None)
    base = _cost_figures(chain, pv.mean, pv.variance)
    after = _cost_figures(edited, pv.mean[keep], pv.variance[keep], M, M2)
    doc: dict[str, Any] = {"metric": metric, "unit": METRICS[metric][0], "base": base, "edited": after,
                           "delta_per_success": None if base["per_success"] is None or after["per_success"] is None
                           else after["per_success"] - base["per_success"],
                           "edge_costs": [str(e) for e in edge_costs], "delta_per_success_interval": None}
    if ensemble is not None:
        draws = posterior_mean_draws(pv, ensemble.n_samples, int(ensemble.seed or 0))

        def delta(c: AbsorbingChain) -> float:
            draw = c.metadata.get("draw")  # the reference chain (point value) has none: the point means
            means = pv.mean if draw is None else draws[int(draw)]
            e = apply_edits(c, edits)
            Md, M2d = _edge_spend(c, e, edge_costs) if edge_costs else (None, None)
            b = _cost_figures(c, means, pv.variance)["per_success"]
            a = _cost_figures(e, means[keep], pv.variance[keep], Md, M2d)["per_success"]
            if a is None or b is None:
                raise UndefinedMetricError("success is unreachable on this draw")
            return a - b

        q = ensemble.stats(delta)
        doc["delta_per_success_interval"] = {"lower": None if q.lower is None else float(q.lower),
                                             "upper": None if q.upper is None else float(q.upper),
                                             "confidence": q.confidence, "method": q.method,
                                             "n_samples": q.n_samples, "n_excluded": q.n_excluded}
    return doc


@dataclass(frozen=True)
class Bottleneck:
    """One state in the bottleneck ranking."""

    state: str
    failure_share: float
    vulnerability: float
    expected_visits: float
    fallback_gain: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True, repr=False)
class BottleneckReport(ResultDisplay):
    """States ranked by failure attribution and by the exact R∞ gain of a fallback (``fraction`` of failures)."""

    fraction: float
    by_failure_share: tuple[Bottleneck, ...]
    by_gain: tuple[Bottleneck, ...]

    def sentences(self, n: int = 3) -> list[str]:
        out = []
        top = [b for b in self.by_failure_share[:n] if b.failure_share > 0]
        if top:
            out.append("Most failures leave from " + ", ".join(f"`{b.state}` ({b.failure_share:.0%})" for b in top)
                       + ".")
        if self.by_gain and self.by_gain[0].fallback_gain > 0:
            b = self.by_gain[0]
            out.append(f"A fallback that rescues {self.fraction:.0%} of `{b.state}`'s failures would raise R∞ by "
                       f"{b.fallback_gain:+.4f} — the largest single-state gain.")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"fraction": self.fraction, "by_failure_share": [b.to_dict() for b in self.by_failure_share],
                "by_gain": [b.to_dict() for b in self.by_gain], "sentences": self.sentences()}

    def __str__(self) -> str:
        return "\n".join(self.sentences())

    def _display(self) -> Display:
        cols = ("state", "failure_share", "vulnerability", "expected_visits", "fallback_gain")
        rows = tuple(tuple(getattr(b, c) for c in cols) for b in self.by_failure_share)
        return Display(f"states by failure share; fallback rescuing {self.fraction:.0%} of a state's failures",
                       kind="Bottlenecks", lines=tuple(self.sentences()), tables=(Table("states", cols, rows),))


def bottlenecks(chain: AbsorbingChain, *, fraction: float = 0.1) -> BottleneckReport:
    """Rank states: share of failures leaving from each (z_i r⊖_i / (1 − R∞)) and the exact gain in R∞ of
    rerouting ``fraction`` of that state's failure exit to success (a fallback tool at that state)."""
    share = chain.failure_attribution()
    z = chain.expected_visits()
    items = []
    for i, name in enumerate(chain.state_names):
        gain = apply_edits(chain, [Reroute(name, fraction)]).r_inf - chain.r_inf if chain.R_failure[i] > 0 else 0.0
        items.append(Bottleneck(name, float(share[i]), float(chain.R_failure[i]), float(z[i]), float(gain)))
    return BottleneckReport(fraction, tuple(sorted(items, key=lambda b: -b.failure_share)),
                            tuple(sorted(items, key=lambda b: -b.fallback_gain)))
