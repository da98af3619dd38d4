"""ReliabilitySummary: the metric set that ``fit`` and ``metrics`` report, computed once from a chain.

This is the only place that decides *which* numbers are reported; the CLI renders it and never computes. Undefined
quantities (e.g. E[steps | success] when success is unreachable) are ``None`` with the reason in ``undefined`` —
never NaN.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tracetochain._display import Display, ResultDisplay, Table
from tracetochain._outcome import OutcomeCode
from tracetochain._version import __version__
from tracetochain.chain import AbsorbingChain
from tracetochain.quantities import reported, reported_scalars

METRICS_SCHEMA_VERSION = 1
#: The reported scalars with a typed field of their own (computed unguarded, as before the registry).
_TYPED = ("r_inf", "failure_probability", "mean_steps", "steps_std", "spectral_radius")


@dataclass(frozen=True)
class StateMetrics:
    """Per-state figures: expected visits z_i, exits, share of all failures leaving from i, ∂R∞/∂R⊕_i."""

    name: str
    expected_visits: float
    r_success: float
    r_failure: float
    success_probability: float
    failure_share: float
    sensitivity: float


@dataclass(frozen=True, repr=False)
class ReliabilitySummary(ResultDisplay):
    """Everything a reader of a fitted chain asks first. Build with :func:`summarize`.

    Prints as a short block; ``to_frame("states")`` (the default), ``to_frame("pass_k")``, ``to_frame("reliability")``
    and ``to_frame("summary")`` give its tables as DataFrames; ``to_dict()`` is the JSON document.

    >>> import tracetochain as tt
    >>> s = summarize(tt.datasets.notation_chain(), horizon=10, ks=(1, 2))
    >>> print(s)
    Reliability summary: 3 states, R∞ = 0.6250
      R∞ (eventual success)                     0.6250
      failure probability                       0.3750
      R(5)                                      0.4748
      R(10) (horizon)                           0.6084
      R∞ − R(horizon)                           0.0166
      mean steps (MTTA)                         3.7500
      sd of steps                               2.6021
      mean steps | success                      4.0333
      mean steps | failure                      3.2778
      median steps | success                    3
      spectral radius ρ(Q)                      0.6000
      steps to within 0.01 of R∞                12
        bound (Tran-Truong & Le 2026, Prop. 8)  16
    <BLANKLINE>
      state   expected_visits  r_success  r_failure  success_probability  failure_share  sensitivity
      plan              2.000      0.100      0.100                0.625          0.533        2.000
      act               1.000      0.200      0.100                0.708          0.267        1.000
      verify            0.750      0.300      0.100                0.750          0.200        0.750
    <BLANKLINE>
      k  pass_at_k  pass_hat_k
      1      0.625       0.625
      2      0.859       0.391
    >>> s.frame_names()
    ('states', 'pass_k', 'reliability', 'summary')
    """

    n_states: int
    r_inf: float
    failure_probability: float
    horizon: int
    reliability: list[float]
    residual_at_horizon: float
    mean_steps: float
    steps_std: float
    mean_steps_given_success: float | None
    mean_steps_given_failure: float | None
    ks: list[int]
    pass_at_k: list[float]
    pass_hat_k: list[float]
    spectral_radius: float
    step_budget_delta: float
    step_budget_exact: int | None
    step_budget_bound: int | None
    step_budget_kappa: float | None
    states: list[StateMetrics]
    undefined: dict[str, str] = field(default_factory=dict)
    chain_metadata: dict[str, Any] = field(default_factory=dict)
    #: Every reported scalar of the quantity registry (:func:`tracetochain.quantities.reported_scalars`) by key,
    #: None where undefined (the reason in ``undefined``).
    values: dict[str, float | None] = field(default_factory=dict)

    def worst_states(self, n: int = 3) -> list[StateMetrics]:
        """States ranked by their share of all failures (the bottlenecks)."""
        return sorted(self.states, key=lambda s: -s.failure_share)[:n]

    def _display(self) -> Display:
        fields: list[tuple[str, Any]] = []
        for q in reported("scalar", "curve"):  # the registry's order
            if q.kind == "scalar":
                value = self.values.get(q.key, getattr(self, q.key, None))
                if q.digits == 0 and isinstance(value, float) and value.is_integer():
                    value = int(value)  # a count of steps prints as one
                fields.append((q.title, value))
            elif q.key == "reliability":
                fields += [(f"R({d})", self.reliability[d]) for d in (5, 10, 20) if d < self.horizon]
                fields += [(f"R({self.horizon}) (horizon)", self.reliability[self.horizon]),
                           ("R∞ − R(horizon)", self.residual_at_horizon)]
        fields += [(f"steps to within {self.step_budget_delta:g} of R∞", self.step_budget_exact),
                   ("  bound (Tran-Truong & Le 2026, Prop. 8)", self.step_budget_bound)]
        states = Table("states", ("state", "expected_visits", "r_success", "r_failure", "success_probability",
                                  "failure_share", "sensitivity"),
                       tuple((s.name, s.expected_visits, s.r_success, s.r_failure, s.success_probability,
                              s.failure_share, s.sensitivity) for s in self.states))
        pass_k = Table("pass_k", ("k", "pass_at_k", "pass_hat_k"),
                       tuple(zip(self.ks, self.pass_at_k, self.pass_hat_k, strict=True)), digits={"k": 0})
        curve = Table("reliability", ("d", "reliability"), tuple(enumerate(self.reliability)), shown=False)
        return Display(f"{self.n_states} states, R∞ = {self.r_inf:.4f}", kind="Reliability summary",
                       lines=tuple(f"  {k}: {v}" for k, v in self.undefined.items()), fields=tuple(fields),
                       tables=(states, pass_k, curve))

    def to_dict(self) -> dict[str, Any]:
        doc = self._fixed_dict()
        # Every reported scalar of the registry has its key (a new quantity appears with no edit here).
        for key, value in self.values.items():
            doc.setdefault(key, value)
        return doc

    def _fixed_dict(self) -> dict[str, Any]:
        return {
            "kind": "tracetochain.metrics",
            "schema_version": METRICS_SCHEMA_VERSION,
            "tracetochain_version": __version__,
            "n_states": self.n_states,
            "r_inf": self.r_inf,
            "failure_probability": self.failure_probability,
            "horizon": self.horizon,
            "reliability": self.reliability,
            "residual_at_horizon": self.residual_at_horizon,
            "mean_steps": self.mean_steps,
            "steps_std": self.steps_std,
            "mean_steps_given_success": self.mean_steps_given_success,
            "mean_steps_given_failure": self.mean_steps_given_failure,
            "pass_at_k": {str(k): v for k, v in zip(self.ks, self.pass_at_k, strict=True)},
            "pass_hat_k": {str(k): v for k, v in zip(self.ks, self.pass_hat_k, strict=True)},
            "spectral_radius": self.spectral_radius,
            "step_budget": {"delta": self.step_budget_delta, "exact": self.step_budget_exact,
                            "prop8_bound": self.step_budget_bound, "kappa": self.step_budget_kappa},
            "states": [s.__dict__ for s in self.states],
            "undefined": dict(self.undefined),
            # The counts and the cost model are sufficient statistics, not provenance: the chain file keeps them.
            "chain_metadata": {k: v for k, v in self.chain_metadata.items() if k not in ("counts", "costs")},
        }


def summarize(chain: AbsorbingChain, *, horizon: int = 50, ks: tuple[int, ...] = (1, 2, 3, 4, 5),
              delta: float = 0.01) -> ReliabilitySummary:
    """Compute the reported metric set of ``chain`` (R(d) for d = 0..horizon, pass@k/pass^k for ``ks``)."""
    if horizon < 0:
        raise ValueError(f"horizon must be >= 0, got {horizon}")
    from tracetochain._limits import check_horizon

    check_horizon(horizon)
    undefined: dict[str, str] = {}

    values: dict[str, float | None] = {}
    for q in reported_scalars():
        values[q.key], why = q.point(chain)
        if why is not None and q.key not in _TYPED:
            undefined[q.key] = why
    sweep = chain.sweep(horizon)
    budget = chain.step_budget(delta)
    z = chain.expected_visits()
    share = chain.failure_attribution()
    h = chain.success_probabilities
    states = [
        StateMetrics(name, float(z[i]), float(chain.R_success[i]), float(chain.R_failure[i]), float(h[i]),
                     float(share[i]), float(z[i]))
        for i, name in enumerate(chain.state_names)
    ]
    k_arr = np.asarray(ks, dtype=np.int64)
    return ReliabilitySummary(
        n_states=chain.n_states,
        r_inf=chain.r_inf,
        failure_probability=chain.failure_probability,
        horizon=horizon,
        reliability=[float(x) for x in sweep.reliability],
        residual_at_horizon=float(sweep.residual[-1]),
        mean_steps=chain.mean_steps(),
        steps_std=float(np.sqrt(chain.steps_variance())),
        mean_steps_given_success=values["mean_steps_given_success"],
        mean_steps_given_failure=values["mean_steps_given_failure"],
        ks=[int(k) for k in k_arr],
        pass_at_k=[float(x) for x in chain.pass_at_k(k_arr)],
        pass_hat_k=[float(x) for x in chain.pass_hat_k(k_arr)],
        spectral_radius=chain.spectral_radius(),
        step_budget_delta=delta,
        step_budget_exact=budget.exact,
        step_budget_bound=budget.bound,
        step_budget_kappa=budget.kappa,
        states=states,
        undefined=undefined,
        chain_metadata=dict(chain.metadata),
        values=values,
    )


def success_lengths(traces: Any) -> NDArray[np.int64]:
    """Number of steps of every successful trace (its success first-passage time; the step that enters success counts).
    """
    lengths = np.diff(traces.offsets)
    return np.asarray(lengths[traces.outcomes() == OutcomeCode.SUCCESS], dtype=np.int64)


def empirical_rdc(traces: Any, horizon: int) -> list[float]:
    """Empirical RDC(d) = #successes with length ≤ d / #traces counted (success, failure, censored), d = 0..horizon.

    The denominator is every non-invalid trace, as in the held-out check of Tran-Truong & Le (2026), study SS9.
    """
    from tracetochain.numerics.empirical import empirical_rdc_from_counts

    n = int(np.sum(traces.outcomes() != OutcomeCode.INVALID))
    counts = np.bincount(success_lengths(traces), minlength=1)
    return [float(x) for x in empirical_rdc_from_counts(counts, n, horizon)]
