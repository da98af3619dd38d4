"""What-if results and bottleneck ranking: the engineering questions asked of a fitted chain.

:func:`what_if` reports the exact change of the headline metrics under a list of edits, with the first-order
screening term and Prop. 2's bound beside it (``paper-spec.md`` §3.6). :func:`bottlenecks` ranks states by the
share of failures that leave from them and by what a fallback there would be worth (exact).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tracetochain.chain._model import AbsorbingChain
from tracetochain.exceptions import UndefinedMetricError
from tracetochain.numerics.sensitivity import first_order_delta, prop2_bound
from tracetochain.whatif._edits import Edit, RemoveState, Reroute, apply_edits


def _safe(fn: Any) -> float | None:
    try:
        return float(fn())
    except UndefinedMetricError:
        return None


@dataclass(frozen=True)
class WhatIfResult:
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

    def to_dict(self) -> dict[str, Any]:
        delta: dict[str, float | None] = {}
        for k, before in self.base.items():
            after = self.edited.get(k)
            delta[k] = None if before is None or after is None else after - before
        return {"kind": "tracetochain.whatif", "schema_version": 1, "edits": list(self.edits),
                "base": self.base, "edited": self.edited, "delta": delta, "delta_r_inf": self.delta_r_inf,
                "first_order": self.first_order, "prop2_bound": self.prop2_bound, "notes": list(self.notes),
                "delta_r_inf_interval": self.delta_r_inf_interval}

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
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return "<pre>" + html.escape(str(self)) + "</pre>"


def _metrics(chain: AbsorbingChain, horizons: tuple[int, ...]) -> dict[str, float | None]:
    out: dict[str, float | None] = {"r_inf": chain.r_inf, "mean_steps": chain.mean_steps(),
                                    "mean_steps_given_success": _safe(chain.mean_steps_given_success),
                                    "mean_steps_given_failure": _safe(chain.mean_steps_given_failure)}
    if horizons:
        rel = chain.reliability(max(horizons))
        out.update({f"R({d})": float(rel[d]) for d in horizons})
    return out


def what_if(chain: AbsorbingChain, edits: Sequence[Edit], *, horizons: tuple[int, ...] = (10, 20, 50),
            ensemble: Any = None) -> WhatIfResult:
    """Apply ``edits`` and compare metrics exactly; add the first-order term and Prop. 2's bound when they apply.

    With ``ensemble`` (a :class:`~tracetochain.uncertainty.ChainEnsemble`), ΔR∞ also gets a percentile interval:
    the same edits applied to every draw.
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
    return WhatIfResult(tuple(str(e) for e in edits), base_m, new_m, edited.r_inf - chain.r_inf, first, bound,
                        tuple(notes), interval)


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


@dataclass(frozen=True)
class BottleneckReport:
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
