"""The quantity registry: every number the library reports, once, with everything its consumers need.

A :class:`Quantity` carries its key and aliases, its kind (a scalar, one value per state, a curve in d, one value per
k), how to compute it on a batch of chains at once (:class:`~tracetochain.numerics.batched.ChainBatch`, the posterior
draws or bootstrap refits) and on one chain (the point estimate), the certificate output whose status it carries and
the layers that output rests on, its label, unit and digits, and whether it can be gated on (``--fail-under``) or
alerted on (live rules). :data:`QUANTITIES` is the registry; every consumer iterates it:

* :meth:`ChainEnsemble.stats <tracetochain.uncertainty.ChainEnsemble.stats>` (its built-in quantities),
* :func:`tracetochain.summarize` and :func:`tracetochain.uncertainty.interval_summary` (the reported numbers and
  their intervals; a chosen model's refit intervals too),
* the certificate's outputs (:data:`tracetochain.audit.OUTPUTS` adds the outputs of new quantities),
* the renderers (``fit``, the report's HTML and Markdown, the JSON documents), the CI gates, the live service's rules,
  its dashboard document and ``/metrics``.

Adding a quantity is one entry in :data:`QUANTITIES` (with its batched and one-chain functions; the one-chain
function may reuse the batched one on a batch of one chain, :func:`single`, so there is one implementation), plus its
golden tests. A model family that cannot compute a quantity says so: an object with an ``unavailable_quantities``
mapping (or method returning one) ``{key: reason}`` makes :meth:`Quantity.unavailable` return the reason, and the
consumers print it instead of a number — none of them branches on the family.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from tracetochain.exceptions import UndefinedMetricError
from tracetochain.numerics.batched import ChainBatch

Batched = Callable[[ChainBatch, dict[str, Any]], tuple[NDArray[np.float64], NDArray[np.bool_] | None, str]]
OnChain = Callable[[Any, dict[str, Any]], Any]
#: scalar: one number; per_state: one per transient state; curve: R(d)-like, d = 0..horizon; per_k: one per k;
#: matrix: the chain's own entries (Q, R⊕, R⊖, π0).
Kind = Literal["scalar", "per_state", "curve", "per_k", "matrix"]
Better = Literal["higher", "lower"]


@dataclass(frozen=True)
class Quantity:
    """One named quantity of an absorbing chain (module docstring).

    ``batched(batch, params)`` returns (values per draw, which draws it is defined on or None, why the others are
    not); ``on_chain(chain, params)`` the value on one chain (raising ``UndefinedMetricError`` when undefined).
    ``params``: accepted keyword arguments → default (``...`` = required). ``output``: the certificate output whose
    status the quantity carries, resting on the certificate layers ``rests_on``. ``reported``: one of the numbers
    every analysis reports (``summarize``, ``interval_summary``, ``fit``, the report, the JSON, the live service).
    ``better``: which direction is good (a gate's conservative end: the lower bound of what should be high, the
    upper bound of what should be low). ``chain_only``: defined only on draws that are absorbing chains;
    ``needs_solve``: uses N = (I − Q)⁻¹, so draws whose solve fails are excluded too.
    """

    key: str
    doc: str
    batched: Batched
    on_chain: OnChain
    params: dict[str, Any] = field(default_factory=dict)
    kind: Kind = "scalar"
    label: str = ""
    aliases: tuple[str, ...] = ()
    output: str | None = None
    rests_on: tuple[str, ...] = ()
    unit: str = ""
    digits: int = 4
    reported: bool = False
    headline: bool = False
    gateable: bool = False
    alertable: bool = False
    better: Better | None = None
    chain_only: bool = True
    needs_solve: bool = True

    @property
    def title(self) -> str:
        """The label, or the key when it has none."""
        return self.label or self.key

    def bind(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The keyword arguments with the defaults filled in (a TypeError naming what is unknown or missing)."""
        unknown = sorted(set(kwargs) - set(self.params))
        if unknown:
            accepted = ", ".join(self.params) or "none"
            raise TypeError(f"quantity {self.key!r} got unexpected argument(s) {unknown}; it accepts: {accepted}")
        bound = {**self.params, **kwargs}
        missing = [k for k, v in bound.items() if v is ...]
        if missing:
            raise TypeError(f"quantity {self.key!r} needs {', '.join(missing)} (e.g. ensemble.stats({self.key!r}, "
                            f"{missing[0]}=10))")
        return bound

    def value(self, chain: Any, **kwargs: Any) -> Any:
        """The value on one chain (``UndefinedMetricError`` when it is undefined there)."""
        return self.on_chain(chain, self.bind(kwargs))

    def point(self, chain: Any, **kwargs: Any) -> tuple[float | None, str | None]:
        """(value, None) of a scalar on one chain, or (None, why) when it is undefined or not finite — never NaN."""
        try:
            v = float(self.value(chain, **kwargs))
        except UndefinedMetricError as exc:
            return None, str(exc)
        except (ArithmeticError, ValueError, np.linalg.LinAlgError) as exc:
            return None, f"{self.key} could not be computed: {exc}"
        return (v, None) if np.isfinite(v) else (None, f"{self.key} is not finite on this chain")

    def unavailable(self, model: Any) -> str | None:
        """Why ``model`` (a fitted family, a compiled model, a chain) cannot give this quantity, or None: its
        ``unavailable_quantities`` ({key: reason}, an attribute or a method), so that no consumer branches on the
        family."""
        table = getattr(model, "unavailable_quantities", None)
        reasons = table() if callable(table) else (table or {})
        reason = reasons.get(self.key)
        return None if reason is None else str(reason)


def single(chain: Any) -> ChainBatch:
    """One chain as a batch of one (a quantity's batched implementation on one chain)."""
    exits = np.asarray(getattr(chain, "start_exits", np.zeros(2)), dtype=np.float64)
    return ChainBatch(np.asarray(chain.Q, dtype=np.float64)[None], np.asarray(chain.R_success)[None],
                      np.asarray(chain.R_failure)[None], np.asarray(chain.pi0)[None],
                      exits[None] if exits.any() else None)


# ---------------------------------------------------------------------------------------------------- functions
def _all(v: NDArray[np.float64]) -> tuple[NDArray[np.float64], None, str]:
    return v, None, ""


def _check_horizon(kw: dict[str, Any]) -> int:
    h = kw["horizon"]
    if isinstance(h, bool) or not isinstance(h, (int, np.integer)) or h < 0:
        raise ValueError(f"horizon must be an integer >= 0, got {h!r}")
    return int(h)


def _check_k(kw: dict[str, Any]) -> tuple[NDArray[np.float64], bool]:
    k = kw["k"]
    ks = np.atleast_1d(np.asarray(k))
    if ks.size == 0 or not np.issubdtype(ks.dtype, np.integer) or ks.min() < 1:
        raise ValueError(f"k must be a positive integer (or integers), got {k!r}")
    return ks.astype(np.float64), np.ndim(k) == 0


def _pass_at(r: NDArray[np.float64], kw: dict[str, Any]) -> NDArray[np.float64]:
    ks, scalar = _check_k(kw)
    with np.errstate(divide="ignore"):
        out = -np.expm1(ks[None, :] * np.log1p(-np.minimum(r, 1.0))[:, None])
    return out[:, 0] if scalar else out


def _pass_hat(r: NDArray[np.float64], kw: dict[str, Any]) -> NDArray[np.float64]:
    ks, scalar = _check_k(kw)
    out = np.power(r[:, None], ks[None, :])
    return out[:, 0] if scalar else out


def _scalar_k(value: NDArray[np.float64], kw: dict[str, Any]) -> Any:
    return float(value[0]) if np.ndim(kw["k"]) == 0 else value


def _undefined_if_none(value: Any, why: str) -> Any:
    if value is None:
        raise UndefinedMetricError(why)
    return value


def _chain_attribution(c: Any) -> NDArray[np.float64]:
    if c.failure_probability <= 0.0:
        raise UndefinedMetricError("failure is unreachable from the initial distribution, so the failure "
                                   "attribution is undefined")
    out: NDArray[np.float64] = c.failure_attribution()
    return out


def _exits(b: ChainBatch) -> NDArray[np.float64]:
    return np.zeros((b.size, 2)) if b.start_exits is None else b.start_exits


def _start_failure_share(b: ChainBatch) -> tuple[NDArray[np.float64], NDArray[np.bool_], str]:
    p = b.failure_probability()
    ok = p > 0.0
    f = _exits(b)[:, 1]
    return np.divide(f, p, out=np.zeros_like(f), where=ok), ok, "failure unreachable from π0"


def _chain_start_failure_share(c: Any) -> float:
    if c.failure_probability <= 0.0:
        raise UndefinedMetricError("failure is unreachable from the initial distribution, so the share of failures "
                                   "before any step is undefined")
    return float(c.start_failure_share())


def _sweep_field(name: str) -> Batched:
    def run(b: ChainBatch, kw: dict[str, Any]) -> tuple[NDArray[np.float64], None, str]:
        return b.sweep(_check_horizon(kw), residual=name == "residual")[name], None, ""
    return run


def _conditional_cdf(b: ChainBatch, kw: dict[str, Any]) -> tuple[NDArray[np.float64], NDArray[np.bool_], str]:
    rel = b.sweep(_check_horizon(kw))["reliability"]
    r = b.r_inf()
    ok = r > 0
    return (np.divide(rel, r[:, None], out=np.zeros_like(rel), where=ok[:, None]), ok,
            "success unreachable from π0 (R∞ = 0)")


def _cond_mean(outcome: str) -> Batched:
    def run(b: ChainBatch, kw: dict[str, Any]) -> tuple[NDArray[np.float64], NDArray[np.bool_], str]:
        v, ok = b.conditional_mean_steps(outcome)
        return v, ok, f"{outcome} unreachable from π0"
    return run


def _attribution(b: ChainBatch, kw: dict[str, Any]) -> tuple[NDArray[np.float64], NDArray[np.bool_], str]:
    v, ok = b.failure_attribution()
    return v, ok, "failure unreachable from π0"


def _budget(b: ChainBatch, kw: dict[str, Any]) -> tuple[NDArray[np.float64], NDArray[np.bool_], str]:
    d, ok = b.step_budget(float(kw["delta"]), int(kw["max_horizon"]))
    return d, ok, f"R∞ − R(d) still > δ at max_horizon = {int(kw['max_horizon'])}"


def _bound(b: ChainBatch, kw: dict[str, Any]) -> tuple[NDArray[np.float64], NDArray[np.bool_], str]:
    bound, ok, _, _ = b.prop8(float(kw["delta"]))
    return bound, ok, "Prop. 8 bound undefined (Q not diagonalizable, ρ ∉ (0, 1) or h = 0)"


def _kappa(b: ChainBatch, kw: dict[str, Any]) -> tuple[NDArray[np.float64], NDArray[np.bool_], str]:
    _, _, kappa, ok = b.prop8(0.5)
    return kappa, ok, "κ∞(V) undefined (Q numerically not diagonalizable)"


def _median_success(b: ChainBatch, kw: dict[str, Any]) -> tuple[NDArray[np.float64], NDArray[np.bool_], str]:
    """M = min{d : R(d) ≥ R∞/2}, the median number of steps of the runs that succeed (the median of the success-time
    law, Pr[τ⊕ ≤ d | success] ≥ 1/2; Tran-Truong & Le 2026, the RDC of Prop. 6 normalized by R∞).

    R∞ − R(d) = π_d·h with π_d = π0 Q^d (the exact tail of :meth:`ChainBatch.sweep`), so M is the first d with
    π_d·h ≤ R∞/2: one forward sweep of the draws not yet below their own half (R(0) = s, the success before any step,
    so M = 0 when s ≥ R∞/2). Undefined where R∞ = 0, or where the sweep reaches ``max_horizon`` first."""
    max_horizon = int(kw["max_horizon"])
    if max_horizon < 0:
        raise ValueError(f"max_horizon must be >= 0, got {max_horizon}")
    r = b.r_inf()
    out = np.zeros(b.size)
    reached = np.zeros(b.size, dtype=bool)
    active = np.flatnonzero(b.valid & (r > 0.0))
    pi = np.array(b.pi0[active], dtype=np.float64)
    Qa, ha = b.Q[active], b.h[active]
    # A tie R(d) = R∞/2 exactly (a median at a jump) must count as reached despite rounding in the sweep.
    half = r[active] / 2.0 * (1.0 + 1e-12)
    d = 0
    while active.size:
        hit = np.einsum("bi,bi->b", pi, ha) <= half
        if hit.any():
            out[active[hit]] = d
            reached[active[hit]] = True
            keep = ~hit
            active, pi, Qa, ha, half = active[keep], pi[keep], Qa[keep], ha[keep], half[keep]
        if d >= max_horizon or not active.size:
            break
        pi = np.einsum("bi,bij->bj", pi, Qa)
        d += 1
    return out, reached, f"success unreachable (R∞ = 0), or R(d) < R∞/2 at max_horizon = {max_horizon}"


def first_within(chain: Any, tail: float, max_horizon: int) -> int | None:
    """Smallest d ≤ ``max_horizon`` with R∞ − R(d) ≤ ``tail`` (the exact tail π_d·h of the chain's forward sweep), by
    sweeps of 64, 256, … steps up to ``max_horizon``; None when the tail is still above it there. One chain's step
    budgets and median read it from the chain's own sweep (sparse operator, iterative solves on large chains)."""
    horizon = min(64, max_horizon)
    while True:
        hit = np.flatnonzero(chain.sweep(horizon).residual <= tail)
        if hit.size:
            return int(hit[0])
        if horizon >= max_horizon:
            return None
        horizon = min(4 * horizon, max_horizon)


def _chain_median_success(c: Any, kw: dict[str, Any]) -> float:
    """M on one chain, the batched definition (first d with π_d·h ≤ R∞/2, ties counted) by :func:`first_within`:
    a compiled chain of thousands of expanded states stays out of a dense batch of one (two dense solves and a dense
    sweep per refit)."""
    max_horizon = int(kw["max_horizon"])
    if max_horizon < 0:
        raise ValueError(f"max_horizon must be >= 0, got {max_horizon}")
    r = c.r_inf
    if r <= 0.0:
        raise UndefinedMetricError("success unreachable (R∞ = 0): the median steps to success are undefined")
    # a tie R(d) = R∞/2 exactly counts as reached despite rounding in the sweep
    d = first_within(c, r / 2.0 * (1.0 + 1e-12), max_horizon)
    if d is None:
        raise UndefinedMetricError(f"R(d) < R∞/2 at max_horizon = {max_horizon}; pass a larger max_horizon")
    return float(d)


_H = {"horizon": ...}
_K = {"k": ...}
_NOT_DIAG = "Q is numerically not diagonalizable (or ρ ∉ (0, 1), or h = 0), so Prop. 8's bound is undefined"
_TIMED = ("r_inf", "timing")


def _q(key: str, doc: str, batched: Batched, on_chain: OnChain, params: dict[str, Any] | None = None,
       **meta: Any) -> Quantity:
    return Quantity(key, doc, batched, on_chain, dict(params or {}), **meta)


#: The registry, in the order the reports list the numbers.
QUANTITIES: dict[str, Quantity] = {q.key: q for q in (
    _q("r_inf", "R∞ = π0 N R⊕, the probability of eventual success (Prop. 1)",
       lambda b, kw: _all(b.r_inf()), lambda c, kw: c.r_inf,
       label="R∞ (eventual success)", aliases=("R∞", "R_inf", "Rinf", "rinf", "r_infinity"), output="R_inf",
       rests_on=("r_inf",), unit="probability", reported=True, headline=True, gateable=True, alertable=True,
       better="higher"),
    _q("failure_probability", "1 − R∞, solved directly as π0 N R⊖",
       lambda b, kw: _all(b.failure_probability()), lambda c, kw: c.failure_probability,
       label="failure probability", output="R_inf", rests_on=("r_inf",), unit="probability", reported=True,
       headline=True, gateable=True, alertable=True, better="lower"),
    _q("reliability", "R(d) for d = 0..horizon (a band)", _sweep_field("reliability"),
       lambda c, kw: c.reliability(_check_horizon(kw)), _H, kind="curve", label="R(d): success within d steps",
       output="R(d)", rests_on=_TIMED, unit="probability", reported=True, needs_solve=False),
    _q("success_pmf", "Pr[τ⊕ = d] for d = 0..horizon", _sweep_field("success_pmf"),
       lambda c, kw: c.sweep(_check_horizon(kw)).success_pmf, _H, kind="curve", output="R(d)", rests_on=_TIMED,
       needs_solve=False),
    _q("failure_pmf", "Pr[τ⊖ = d] for d = 0..horizon", _sweep_field("failure_pmf"),
       lambda c, kw: c.sweep(_check_horizon(kw)).failure_pmf, _H, kind="curve", output="R(d)", rests_on=_TIMED,
       needs_solve=False),
    _q("survival", "Pr[T > d] for d = 0..horizon", _sweep_field("survival"),
       lambda c, kw: c.sweep(_check_horizon(kw)).survival, _H, kind="curve", output="R(d)", rests_on=_TIMED,
       needs_solve=False),
    _q("residual", "R∞ − R(d) for d = 0..horizon (exact tail π_d·h)", _sweep_field("residual"),
       lambda c, kw: c.sweep(_check_horizon(kw)).residual, _H, kind="curve", output="R(d)", rests_on=_TIMED),
    _q("success_conditional_cdf", "R(d)/R∞ for d = 0..horizon", _conditional_cdf,
       lambda c, kw: c.success_conditional_cdf(_check_horizon(kw)), _H, kind="curve", output="RDC",
       rests_on=_TIMED),
    _q("pass_at_k", "pass@k = 1 − (1 − R∞)^k (Thm 3); k an int or a list",
       lambda b, kw: _all(_pass_at(b.r_inf(), kw)), lambda c, kw: _scalar_k(c.pass_at_k(kw["k"]), kw), _K,
       kind="per_k", label="pass@k", output="pass@k", rests_on=("r_inf", "trials"), unit="probability",
       reported=True, gateable=True, better="higher"),
    _q("pass_hat_k", "pass^k = R∞^k (Thm 3); k an int or a list",
       lambda b, kw: _all(_pass_hat(b.r_inf(), kw)), lambda c, kw: _scalar_k(c.pass_hat_k(kw["k"]), kw), _K,
       kind="per_k", label="pass^k", output="pass^k", rests_on=("r_inf", "trials"), unit="probability",
       reported=True, gateable=True, better="higher"),
    _q("mean_steps", "MTTA = π0 N 1", lambda b, kw: _all(b.mean_steps()), lambda c, kw: c.mean_steps(),
       label="mean steps (MTTA)", output="mean_steps", rests_on=_TIMED, unit="steps", digits=2, reported=True,
       headline=True, gateable=True, alertable=True, better="lower"),
    _q("steps_variance", "Var[T] (Kemeny–Snell)", lambda b, kw: _all(b.steps_variance()),
       lambda c, kw: c.steps_variance(), output="mean_steps", rests_on=_TIMED, unit="steps²", digits=2),
    _q("steps_std", "sd[T]", lambda b, kw: _all(np.sqrt(b.steps_variance())),
       lambda c, kw: float(np.sqrt(c.steps_variance())), label="sd of steps", output="mean_steps",
       rests_on=_TIMED, unit="steps", digits=2, reported=True, headline=True, gateable=True, alertable=True,
       better="lower"),
    _q("mean_steps_given_success", "E[T | success] = π0 N² R⊕ / R∞", _cond_mean("success"),
       lambda c, kw: c.mean_steps_given_success(), label="mean steps | success", output="mean_steps",
       rests_on=_TIMED, unit="steps", digits=2, reported=True, headline=True, gateable=True, alertable=True,
       better="lower"),
    _q("mean_steps_given_failure", "E[T | failure] = π0 N² R⊖ / (1 − R∞)", _cond_mean("failure"),
       lambda c, kw: c.mean_steps_given_failure(), label="mean steps | failure", output="mean_steps",
       rests_on=_TIMED, unit="steps", digits=2, reported=True, headline=True, gateable=True, alertable=True),
    _q("median_steps_to_success", "median steps of the runs that succeed: min{d : R(d) ≥ R∞/2}", _median_success,
       _chain_median_success, {"max_horizon": 100_000}, label="median steps | success",
       aliases=("median_steps",), output="median_steps_to_success", rests_on=_TIMED, unit="steps", digits=0,
       reported=True, gateable=True, alertable=True, better="lower"),
    _q("success_probabilities", "h = N R⊕ per state", lambda b, kw: _all(b.h),
       lambda c, kw: c.success_probabilities, kind="per_state", label="success probability", output="attribution",
       rests_on=("r_inf",), unit="probability"),
    _q("failure_probabilities", "g = N R⊖ per state", lambda b, kw: _all(b.g),
       lambda c, kw: c.failure_probabilities, kind="per_state", label="failure probability",
       output="attribution", rests_on=("r_inf",), unit="probability"),
    _q("expected_visits", "z = Nᵀ π0 per state", lambda b, kw: _all(b.z), lambda c, kw: c.expected_visits(),
       kind="per_state", label="expected visits", output="attribution", rests_on=("r_inf",), unit="visits",
       digits=3),
    _q("failure_attribution", "share of failures leaving from each state", _attribution,
       lambda c, kw: _chain_attribution(c), kind="per_state", label="share of failures", output="attribution",
       rests_on=("r_inf",), unit="probability"),
    _q("vulnerability", "R⊖_i per state", lambda b, kw: _all(b.r_failure), lambda c, kw: c.vulnerability(),
       kind="per_state", label="P(→ failure)", output="attribution", rests_on=("r_inf",), unit="probability",
       chain_only=False),
    _q("sensitivity_R_success", "∂R∞/∂R⊕_i = z_i", lambda b, kw: _all(b.z),
       lambda c, kw: c.sensitivity_R_success(), kind="per_state", label="∂R∞/∂R⊕", output="sensitivity",
       rests_on=("r_inf", "order")),
    _q("sensitivity_Q", "∂R∞/∂Q_ij = z_i h_j", lambda b, kw: _all(b.z[:, :, None] * b.h[:, None, :]),
       lambda c, kw: c.sensitivity_Q(), kind="matrix", label="∂R∞/∂Q", output="sensitivity",
       rests_on=("r_inf", "order")),
    _q("spectral_radius", "ρ(Q)", lambda b, kw: _all(b.spectral_radius()), lambda c, kw: c.spectral_radius(),
       label="spectral radius ρ(Q)", output="horizons", rests_on=_TIMED, reported=True, headline=True,
       needs_solve=False),
    _q("step_budget", "smallest d with R∞ − R(d) ≤ δ (exact)", _budget,
       lambda c, kw: _undefined_if_none(c.step_budget(float(kw["delta"]), int(kw["max_horizon"])).exact,
                                        f"R∞ − R(d) still > δ at max_horizon = {int(kw['max_horizon'])}"),
       {"delta": 0.01, "max_horizon": 100_000}, label="steps to within δ of R∞", output="step_budgets",
       rests_on=_TIMED, unit="steps", digits=0),
    _q("step_budget_bound", "Prop. 8's bound d*(δ) with κ∞(V) computed", _bound,
       lambda c, kw: _undefined_if_none(c.step_budget(float(kw["delta"])).bound, _NOT_DIAG), {"delta": 0.01},
       label="Prop. 8 bound", output="step_budgets", rests_on=_TIMED, unit="steps", digits=0),
    _q("step_budget_kappa", "κ∞(V) = ‖V‖∞‖V⁻¹‖∞ of Q's eigenvectors", _kappa,
       lambda c, kw: _undefined_if_none(c.step_budget(0.5).kappa, _NOT_DIAG), label="κ∞(V)",
       output="step_budgets", rests_on=_TIMED, digits=3),
    _q("Q", "the transient block Q (m × m)", lambda b, kw: _all(b.Q), lambda c, kw: c.Q, kind="matrix",
       chain_only=False),
    _q("R_success", "R⊕ (m)", lambda b, kw: _all(b.r_success), lambda c, kw: c.R_success, kind="matrix",
       chain_only=False),
    _q("R_failure", "R⊖ (m)", lambda b, kw: _all(b.r_failure), lambda c, kw: c.R_failure, kind="matrix",
       chain_only=False),
    _q("pi0", "π0 (m)", lambda b, kw: _all(b.pi0), lambda c, kw: c.pi0, kind="matrix", chain_only=False),
    _q("start_exits", "(s, f): success and failure before any step", lambda b, kw: _all(_exits(b)),
       lambda c, kw: c.start_exits, kind="matrix", chain_only=False),
    _q("start_failure_share", "share of failures that happen before any step, f / (1 − R∞)",
       lambda b, kw: _start_failure_share(b), lambda c, kw: _chain_start_failure_share(c),
       label="share of failures before any step", output="R_inf", rests_on=("r_inf",), unit="probability"),
)}


def reported(*kinds: Kind) -> tuple[Quantity, ...]:
    """The reported quantities (:attr:`Quantity.reported`), of the given kinds (all kinds when none is given), in
    registry order."""
    return tuple(q for q in QUANTITIES.values() if q.reported and (not kinds or q.kind in kinds))


def reported_scalars() -> tuple[Quantity, ...]:
    """The reported scalar quantities: what every surface lists with its interval and certification status."""
    return reported("scalar")


def _alias_table() -> dict[str, str]:
    out: dict[str, str] = {}
    for q in QUANTITIES.values():
        for name in (q.key, *q.aliases):
            out[name] = q.key
            out.setdefault(name.lower(), q.key)
    return out


def lookup(name: str) -> Quantity | None:
    """The quantity a key or alias names (aliases are matched as written, then in lower case), or None."""
    table = _alias_table()
    key = table.get(name, table.get(name.lower()))
    return None if key is None else QUANTITIES[key]


def iter_quantities(*, gateable: bool | None = None, alertable: bool | None = None) -> Iterator[Quantity]:
    """The registry filtered by whether a quantity can be gated on or alerted on."""
    for q in QUANTITIES.values():
        if gateable is not None and q.gateable != gateable:
            continue
        if alertable is not None and q.alertable != alertable:
            continue
        yield q


def quantity_rows(metrics: dict[str, Any], intervals: dict[str, Any] | None = None,
                  statuses: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """One row per reported scalar (:func:`reported_scalars`) for every surface that lists the numbers: ``key``,
    ``label``, ``unit``, ``digits``, ``point`` (from the metrics document, :meth:`ReliabilitySummary.to_dict`),
    ``lower``/``upper`` (from the intervals document's ``metrics``, None without intervals), ``output`` and
    ``status`` (the certificate's status of that output in ``statuses``; ``"not audited"`` without a certificate),
    ``undefined`` (why the point is missing, else None), ``gateable``, ``alertable``. Plain JSON values."""
    iv = (intervals or {}).get("metrics") or {}
    undefined = metrics.get("undefined") or {}
    rows: list[dict[str, Any]] = []
    for q in reported_scalars():
        found = iv.get(q.key)
        entry: dict[str, Any] = found if isinstance(found, dict) else {}
        point = metrics.get(q.key)
        why = undefined.get(q.key) or (entry.get("point_undefined") if point is None else None)
        status = (statuses or {}).get(q.output or "", "not audited") if statuses is not None else "not audited"
        rows.append({"key": q.key, "label": q.title, "unit": q.unit, "digits": q.digits,
                     "point": None if point is None else float(point),
                     "lower": entry.get("lower"), "upper": entry.get("upper"), "output": q.output,
                     "rests_on": list(q.rests_on), "status": status, "undefined": why,
                     "gateable": q.gateable, "alertable": q.alertable})
    return rows


def format_row(row: dict[str, Any]) -> tuple[str, str]:
    """(value, interval) of a :func:`quantity_rows` row as the renderers print them, by the number rule
    (:func:`~tracetochain._display.fmt_number`) at the quantity's digits: ``"withheld"`` for a withheld output,
    ``"—"`` for an undefined one; the interval ``"[lower, upper]"``, or empty without one."""
    from tracetochain._display import fmt_number

    if row.get("status") == "withheld":
        return "withheld", ""
    digits = int(row.get("digits", 4))
    value = fmt_number(row.get("point"), digits)
    lo, hi = row.get("lower"), row.get("upper")
    interval = f"[{fmt_number(lo, digits)}, {fmt_number(hi, digits)}]" if lo is not None and hi is not None else ""
    return value, interval


#: The scalar quantities :meth:`ChainEnsemble.to_frame` tabulates by default.
HEADLINE_QUANTITIES: tuple[str, ...] = tuple(q.key for q in QUANTITIES.values() if q.headline)

__all__ = ["HEADLINE_QUANTITIES", "QUANTITIES", "Quantity", "format_row", "iter_quantities", "lookup",
           "quantity_rows", "reported", "reported_scalars", "single"]
