"""pass^k and pass@k when tasks differ: per-task estimates, a beta-binomial over tasks, and a chain's own value.

With n_t trials and c_t successes of task t, the unbiased per-task estimators (Yao et al. 2024 for pass^k, Chen et
al. 2021 for pass@k) are C(c, k)/C(n, k) and 1 − C(n − c, k)/C(n, k), averaged over the tasks with n_t ≥ k
(:func:`empirical_pass_k`; the formulas live in :mod:`tracetochain.audit` and are reused here). Their interval comes
from a bootstrap over tasks (the task is the independent unit; resampling trials would ignore that they share it).

They say nothing about k beyond the trials run. :class:`BetaBinomial` models the task success probabilities as
p_t ~ Beta(α, β) and the trials of a task as Binomial(n_t, p_t); by maximum likelihood over tasks it gives, for
any k,

    pass^k = E[p^k] = Π_{i<k} (α + i)/(α + β + i),      pass@k = 1 − Π_{i<k} (β + i)/(α + β + i),

with the intra-task correlation ρ = 1/(α + β + 1) (Skellam 1948; ρ → 0 is the i.i.d. case pass^k = μ^k). Intervals:
refit on tasks resampled with replacement (percentile bootstrap).

:func:`model_pass_k` does the same for any model family: refit it on resampled tasks and read pass^k from the
compiled chain (Σ_c w_c R_c^k for a mixture whose trials share a class, R∞^k for a model with i.i.d. trials).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow.compute as pc
from numpy.typing import NDArray
from scipy.special import betaln, digamma, gammaln

from tracetochain._display import fmt_number
from tracetochain._outcome import INVALID, SUCCESS
from tracetochain.audit.shared import per_task_pass_at_k, per_task_pass_hat_k
from tracetochain.models._base import TraceModel
from tracetochain.models._encoded import EncodedTraces
from tracetochain.traces import TraceTable

Interval = tuple[float | None, float | None]


# ---------------------------------------------------------------------------------------------------- data
def task_trials(traces: TraceTable | EncodedTraces) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(successes c_t, trials n_t) per task. Invalid traces are not trials; censored ones are trials that did not
    pass. Traces without a task id are tasks of their own (one trial)."""
    if isinstance(traces, EncodedTraces):
        succ = np.bincount(traces.unit, weights=(traces.outcomes == SUCCESS).astype(np.float64),
                           minlength=traces.n_units).astype(np.int64)
        return succ, np.bincount(traces.unit, minlength=traces.n_units).astype(np.int64)
    oc = traces.outcomes()
    keep = oc != INVALID
    task = traces.trace_column("task_id")
    code = np.asarray(pc.dictionary_encode(task).indices.fill_null(-1), dtype=np.int64)
    solo = code < 0
    code = np.where(solo, code.max(initial=-1) + 1 + np.arange(code.size), code)[keep]
    _, group = np.unique(code, return_inverse=True)
    n = np.bincount(group).astype(np.int64)
    c = np.bincount(group, weights=(oc[keep] == SUCCESS).astype(np.float64)).astype(np.int64)
    return c, n


def _as_counts(data: TraceTable | EncodedTraces | tuple[ArrayLikeInt, ArrayLikeInt]
               ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    if isinstance(data, (TraceTable, EncodedTraces)):
        return task_trials(data)
    c, n = (np.asarray(x, dtype=np.int64) for x in data)
    if c.shape != n.shape or c.ndim != 1:
        raise ValueError("successes and trials must be 1-d arrays of the same length (one entry per task)")
    if (n < 1).any() or (c < 0).any() or (c > n).any():
        raise ValueError("every task needs 1 <= trials and 0 <= successes <= trials")
    return c, n


ArrayLikeInt = Sequence[int] | NDArray[np.int64]


# ---------------------------------------------------------------------------------------------------- result
@dataclass(frozen=True)
class PassKEstimate:
    """pass^k and pass@k at each k with bootstrap-over-tasks intervals (None where not estimable)."""

    method: str
    ks: tuple[int, ...]
    pass_hat_k: tuple[float | None, ...]
    pass_hat_k_interval: tuple[Interval, ...]
    pass_at_k: tuple[float | None, ...]
    pass_at_k_interval: tuple[Interval, ...]
    n_tasks: int
    n_tasks_used: tuple[int, ...]
    confidence: float
    n_bootstrap: int
    seed: int
    parameters: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def value(self, k: int) -> float | None:
        return self.pass_hat_k[self.ks.index(k)]

    def interval(self, k: int) -> Interval:
        return self.pass_hat_k_interval[self.ks.index(k)]

    def to_dict(self) -> dict[str, Any]:
        from tracetochain.audit.shared import json_dict

        return json_dict({
            "method": self.method, "ks": list(self.ks), "pass_hat_k": list(self.pass_hat_k),
            "pass_hat_k_interval": [list(i) for i in self.pass_hat_k_interval], "pass_at_k": list(self.pass_at_k),
            "pass_at_k_interval": [list(i) for i in self.pass_at_k_interval], "n_tasks": self.n_tasks,
            "n_tasks_used": list(self.n_tasks_used), "confidence": self.confidence,
            "n_bootstrap": self.n_bootstrap, "seed": self.seed, "parameters": self.parameters,
            "notes": list(self.notes),
            "interval": "percentile bootstrap over tasks (tasks resampled with replacement)",
        })

    def describe(self) -> str:
        lines = [f"pass^k by {self.method} over {self.n_tasks} tasks ({self.confidence:.0%} task bootstrap, "
                 f"B = {self.n_bootstrap}):"]
        for i, k in enumerate(self.ks):
            v, (lo, hi) = self.pass_hat_k[i], self.pass_hat_k_interval[i]
            a, (alo, ahi) = self.pass_at_k[i], self.pass_at_k_interval[i]
            lines.append(f"  k={k}: pass^k {_f(v)} [{_f(lo)}, {_f(hi)}]   pass@k {_f(a)} [{_f(alo)}, {_f(ahi)}]")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.describe()


def _f(x: float | None) -> str:
    return fmt_number(x)


def _check(ks: Sequence[int], n_bootstrap: int, confidence: float) -> tuple[int, ...]:
    out = tuple(sorted({int(k) for k in ks}))
    if not out or out[0] < 1:
        raise ValueError(f"ks must be positive integers, got {ks!r}")
    if n_bootstrap < 1:
        raise ValueError(f"n_bootstrap must be >= 1, got {n_bootstrap}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    return out


def _quantiles(samples: NDArray[np.float64], confidence: float) -> Interval:
    ok = samples[np.isfinite(samples)]
    if ok.size == 0:
        return (None, None)
    a = (1.0 - confidence) / 2.0
    return (float(np.quantile(ok, a)), float(np.quantile(ok, 1.0 - a)))


def _task_weights(n_tasks: int, n_bootstrap: int, seed: int) -> NDArray[np.float64]:
    """(B, T) multiplicities of every task in B bootstrap resamples of the tasks."""
    rng = np.random.default_rng(seed)
    draw = rng.integers(0, n_tasks, size=(n_bootstrap, n_tasks))
    out: NDArray[np.float64] = np.bincount((np.arange(n_bootstrap)[:, None] * n_tasks + draw).ravel(),
                                           minlength=n_bootstrap * n_tasks).reshape(n_bootstrap, n_tasks
                                                                                     ).astype(np.float64)
    return out


# ---------------------------------------------------------------------------------------------------- empirical
def empirical_pass_k(data: TraceTable | EncodedTraces | tuple[ArrayLikeInt, ArrayLikeInt],
                     ks: Sequence[int] | None = None, *, n_bootstrap: int = 2000, confidence: float = 0.95,
                     seed: int = 0) -> PassKEstimate:
    """Per-task unbiased pass^k / pass@k, averaged over tasks with at least k trials, with a task bootstrap.

    ``data``: traces (task ids tie the trials) or ``(successes, trials)`` per task. Default ks: 1 … the largest
    number of trials of any task. At k above every task's trials the value is None (not estimable from trials; use
    :class:`BetaBinomial` or a model to extrapolate).

    >>> est = empirical_pass_k(([3, 1, 0], [4, 4, 4]), [1, 2], n_bootstrap=200)
    >>> [round(v, 4) for v in est.pass_hat_k]
    [0.3333, 0.1667]
    """
    c, n = _as_counts(data)
    ks_t = _check(ks if ks is not None else range(1, int(n.max()) + 1), n_bootstrap, confidence)
    W = _task_weights(c.size, n_bootstrap, seed)
    out: dict[str, list[Any]] = {k: [] for k in ("ph", "pa", "iph", "ipa", "used")}
    notes: list[str] = []
    for k in ks_t:
        elig = n >= k
        out["used"].append(int(elig.sum()))
        if not elig.any():
            out["ph"].append(None)
            out["pa"].append(None)
            out["iph"].append((None, None))
            out["ipa"].append((None, None))
            notes.append(f"k={k}: no task has {k} trials")
            continue
        vh = per_task_pass_hat_k(c[elig], n[elig], k)
        va = per_task_pass_at_k(c[elig], n[elig], k)
        out["ph"].append(float(vh.mean()))
        out["pa"].append(float(va.mean()))
        We = W[:, elig]
        tot = We.sum(axis=1)
        ok = tot > 0
        out["iph"].append(_quantiles((We[ok] @ vh) / tot[ok], confidence))
        out["ipa"].append(_quantiles((We[ok] @ va) / tot[ok], confidence))
    return PassKEstimate("per-task unbiased estimator", ks_t, tuple(out["ph"]), tuple(out["iph"]),
                         tuple(out["pa"]), tuple(out["ipa"]), int(c.size), tuple(out["used"]), confidence,
                         n_bootstrap, seed, {}, tuple(notes))


# ---------------------------------------------------------------------------------------------------- beta-binomial
@dataclass(frozen=True)
class BetaBinomial:
    """Task success probabilities p_t ~ Beta(α, β), trials Binomial(n_t, p_t) (module docstring)."""

    alpha: float
    beta: float
    loglik: float
    n_tasks: int

    @property
    def mean(self) -> float:
        """μ = α/(α + β): the mean success probability (= pass^1)."""
        return self.alpha / (self.alpha + self.beta)

    @property
    def intra_task_correlation(self) -> float:
        """ρ = 1/(α + β + 1): the correlation between two trials of one task (0: i.i.d. trials)."""
        return 1.0 / (self.alpha + self.beta + 1.0)

    def pass_hat_k(self, k: int | Sequence[int]) -> NDArray[np.float64]:
        """E[p^k] = Π_{i<k} (α + i)/(α + β + i)."""
        ks = np.atleast_1d(np.asarray(k, dtype=np.int64))
        out: NDArray[np.float64] = np.exp(np.array([
            float(np.sum(np.log(self.alpha + np.arange(kk)) - np.log(self.alpha + self.beta + np.arange(kk))))
            for kk in ks]))
        return out

    def pass_at_k(self, k: int | Sequence[int]) -> NDArray[np.float64]:
        """1 − E[(1 − p)^k] = 1 − Π_{i<k} (β + i)/(α + β + i)."""
        ks = np.atleast_1d(np.asarray(k, dtype=np.int64))
        out: NDArray[np.float64] = 1.0 - np.exp(np.array([
            float(np.sum(np.log(self.beta + np.arange(kk)) - np.log(self.alpha + self.beta + np.arange(kk))))
            for kk in ks]))
        return out

    @classmethod
    def fit(cls, successes: ArrayLikeInt, trials: ArrayLikeInt,
            weights: NDArray[np.float64] | None = None) -> BetaBinomial:
        """Maximum likelihood over tasks, in (logit μ, log(α + β)); α + β is kept in [1e−3, 1e6] (the upper end is
        the i.i.d. limit, reached when the tasks look alike)."""
        c, n = _as_counts((successes, trials))
        w = np.ones(c.size) if weights is None else np.asarray(weights, dtype=np.float64)
        return _fit_beta_binomial(c, n, w)

    def to_dict(self) -> dict[str, Any]:
        return {"alpha": self.alpha, "beta": self.beta, "mean": self.mean,
                "intra_task_correlation": self.intra_task_correlation, "loglik": self.loglik,
                "n_tasks": self.n_tasks}


_LOG_THETA = (math.log(1e-3), math.log(1e6))


@dataclass(frozen=True, eq=False)
class _Pairs:
    """The distinct (successes, trials) pairs of the tasks: the likelihood depends on the data only through them."""

    c: NDArray[np.float64]
    n: NDArray[np.float64]
    inverse: NDArray[np.int64]
    log_binom: NDArray[np.float64]

    @classmethod
    def of(cls, c: NDArray[np.int64], n: NDArray[np.int64]) -> _Pairs:
        pairs, inv = np.unique(np.column_stack([c, n]), axis=0, return_inverse=True)
        cp, np_ = pairs[:, 0].astype(np.float64), pairs[:, 1].astype(np.float64)
        return cls(cp, np_, inv.ravel().astype(np.int64),
                   gammaln(np_ + 1) - gammaln(cp + 1) - gammaln(np_ - cp + 1))

    def fold(self, task_weights: NDArray[np.float64]) -> NDArray[np.float64]:
        out: NDArray[np.float64] = np.bincount(self.inverse, weights=task_weights, minlength=self.c.size
                                               ).astype(np.float64)
        return out


def _fit_beta_binomial(c: NDArray[np.int64], n: NDArray[np.int64], w: NDArray[np.float64],
                       start: tuple[float, float] | None = None, pairs: _Pairs | None = None) -> BetaBinomial:
    pp = pairs if pairs is not None else _Pairs.of(c, n)
    wp = pp.fold(w)
    cp, np_ = pp.c, pp.n
    mu0 = float(np.clip((wp * cp).sum() / max((wp * np_).sum(), 1e-12), 1e-4, 1 - 1e-4))

    def nll_grad(x: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
        # Outside the box the parameters are held at its edge (zero slope there), so an unconstrained quasi-Newton
        # search stays inside it; L-BFGS-B costs ~100× more per step on this two-parameter problem.
        x0c, x1c = min(max(x[0], -12.0), 12.0), min(max(x[1], _LOG_THETA[0]), _LOG_THETA[1])
        mu = 1.0 / (1.0 + math.exp(-x0c))
        theta = math.exp(x1c)
        a, b = mu * theta, (1.0 - mu) * theta
        value = float(np.sum(wp * (betaln(cp + a, np_ - cp + b) - betaln(a, b))))
        # d/da and d/db of the log-likelihood, then the chain rule to (logit μ, log θ).
        dab = digamma(a + b) - digamma(np_ + a + b)
        da = float(np.sum(wp * (digamma(cp + a) - digamma(a) + dab)))
        db = float(np.sum(wp * (digamma(np_ - cp + b) - digamma(b) + dab)))
        dmu = theta * (da - db) * mu * (1.0 - mu) if x0c == x[0] else 0.0
        dtheta = (mu * da + (1.0 - mu) * db) * theta if x1c == x[1] else 0.0
        return -value, -np.array([dmu, dtheta])

    from scipy.optimize import minimize  # imported here: start-up of commands that fit no beta-binomial
    x0 = np.array(start if start is not None else (math.log(mu0 / (1 - mu0)), math.log(10.0)))
    best = None
    for s in ([x0] if start is not None else [x0, np.array([x0[0], math.log(1.0)]), np.array([x0[0], 8.0])]):
        res = minimize(nll_grad, s, jac=True, method="BFGS", options={"gtol": 1e-7})
        if best is None or res.fun < best.fun:
            best = res
    assert best is not None
    mu = 1.0 / (1.0 + math.exp(-min(max(best.x[0], -12.0), 12.0)))
    theta = math.exp(min(max(best.x[1], _LOG_THETA[0]), _LOG_THETA[1]))
    ll = -float(best.fun) + float(np.sum(wp * pp.log_binom))
    return BetaBinomial(mu * theta, (1.0 - mu) * theta, ll, round(float(wp.sum())))


def beta_binomial_pass_k(data: TraceTable | EncodedTraces | tuple[ArrayLikeInt, ArrayLikeInt],
                         ks: Sequence[int] = (1, 2, 3, 4, 5, 6, 7, 8), *, n_bootstrap: int = 1000,
                         confidence: float = 0.95, seed: int = 0) -> PassKEstimate:
    """pass^k / pass@k of the maximum-likelihood beta-binomial over tasks, any k, with a task bootstrap (refit per
    resample). ``parameters`` carries α, β, μ, ρ and their bootstrap intervals."""
    c, n = _as_counts(data)
    ks_t = _check(ks, n_bootstrap, confidence)
    fit = _fit_beta_binomial(c, n, np.ones(c.size))
    W = _task_weights(c.size, n_bootstrap, seed)
    start = (math.log(fit.mean / (1 - fit.mean)) if 0 < fit.mean < 1 else 0.0,
             math.log(fit.alpha + fit.beta))
    pairs = _Pairs.of(c, n)
    boots = [_fit_beta_binomial(c, n, W[b], start, pairs) for b in range(n_bootstrap)]
    ph_b = np.array([bb.pass_hat_k(list(ks_t)) for bb in boots])
    pa_b = np.array([bb.pass_at_k(list(ks_t)) for bb in boots])
    rho_b = np.array([bb.intra_task_correlation for bb in boots])
    notes = []
    if int(n.max()) < 2:
        notes.append("every task has one trial: the intra-task correlation is not identified (pass^k is μ^k)")
    params = {**fit.to_dict(), "intra_task_correlation_interval": _quantiles(rho_b, confidence),
              "mean_interval": _quantiles(np.array([bb.mean for bb in boots]), confidence)}
    return PassKEstimate(
        "beta-binomial over tasks (maximum likelihood)", ks_t, tuple(float(v) for v in fit.pass_hat_k(list(ks_t))),
        tuple(_quantiles(ph_b[:, i], confidence) for i in range(len(ks_t))),
        tuple(float(v) for v in fit.pass_at_k(list(ks_t))),
        tuple(_quantiles(pa_b[:, i], confidence) for i in range(len(ks_t))), int(c.size),
        tuple(int(c.size) for _ in ks_t), confidence, n_bootstrap, seed, params, tuple(notes))


# ---------------------------------------------------------------------------------------------------- models
def resample_units(enc: EncodedTraces, units: NDArray[np.int64]) -> EncodedTraces:
    """Encoded traces made of the given units (with repeats; every copy becomes a unit of its own)."""
    units = np.asarray(units, dtype=np.int64)
    by_unit = np.argsort(enc.unit, kind="stable")
    counts = np.bincount(enc.unit, minlength=enc.n_units)
    first = np.r_[0, np.cumsum(counts)[:-1]]
    traces = np.concatenate([by_unit[first[u]:first[u] + counts[u]] for u in units]) if units.size else \
        np.zeros(0, np.int64)
    new_unit = np.repeat(np.arange(units.size, dtype=np.int64), counts[units])
    lengths = enc.lengths[traces]
    rows = np.repeat(enc.starts[traces], lengths) + (
        np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths))
    return EncodedTraces(enc.codes[rows], np.r_[0, np.cumsum(lengths)].astype(np.int64), enc.outcomes[traces],
                         enc.state_names, new_unit, enc.grouped_by, (), 0, enc.notes)


def model_pass_k(factory: Callable[[], TraceModel], traces: TraceTable | EncodedTraces,
                 ks: Sequence[int] = (1, 2, 3, 4, 5, 6, 7, 8), *, n_bootstrap: int = 200, confidence: float = 0.95,
                 seed: int = 0, state_names: Sequence[str] | None = None) -> PassKEstimate:
    """pass^k / pass@k of a model family, with intervals from refitting it on tasks resampled with replacement.

    ``factory()`` returns an unfitted model (e.g. ``lambda: MixtureModel(2)``). The point value is the fit on all
    traces. Costs ``n_bootstrap`` fits.
    """
    from tracetochain.models._encoded import encode_traces

    ks_t = _check(ks, n_bootstrap, confidence)
    enc = encode_traces(traces, tuple(state_names) if state_names is not None else None)
    model = factory().fit(enc)
    compiled = model.to_chain()
    rng = np.random.default_rng(seed)
    ph_b = np.full((n_bootstrap, len(ks_t)), np.nan)
    pa_b = np.full((n_bootstrap, len(ks_t)), np.nan)
    failed = 0
    for b in range(n_bootstrap):
        sample = resample_units(enc, rng.integers(0, enc.n_units, enc.n_units))
        try:
            fitted = factory().fit(sample).to_chain()
        except (ValueError, ArithmeticError) as exc:  # a degenerate resample (e.g. no success at all)
            failed += 1
            if failed == 1:
                first_error = str(exc)
            continue
        ph_b[b] = fitted.pass_hat_k(list(ks_t))
        pa_b[b] = fitted.pass_at_k(list(ks_t))
    notes = [f"trials treated as {'sharing the class of their task' if compiled.trials == 'task' else 'i.i.d.'}"]
    if failed:
        notes.append(f"{failed} of {n_bootstrap} resamples could not be fitted (first: {first_error})")
    c, _ = task_trials(enc)
    return PassKEstimate(
        f"model: {model.label}", ks_t, tuple(float(v) for v in compiled.pass_hat_k(list(ks_t))),
        tuple(_quantiles(ph_b[:, i], confidence) for i in range(len(ks_t))),
        tuple(float(v) for v in compiled.pass_at_k(list(ks_t))),
        tuple(_quantiles(pa_b[:, i], confidence) for i in range(len(ks_t))), int(c.size),
        tuple(int(c.size) for _ in ks_t), confidence, n_bootstrap, seed,
        {"r_inf": compiled.chain.r_inf, "trials": compiled.trials, "n_parameters": model.n_parameters},
        tuple(notes))


# ---------------------------------------------------------------------------------------------------- check
@dataclass(frozen=True)
class PassKCheck:
    """A compiled model's pass^k against the per-task estimate's task-bootstrap interval, k by k.

    ``agrees`` is True when every model value lies inside its interval (None when no task has two trials).
    """

    ks: tuple[int, ...]
    model: tuple[float, ...]
    empirical: tuple[float | None, ...]
    interval: tuple[Interval, ...]
    inside: tuple[bool | None, ...]
    agrees: bool | None
    trials: str
    confidence: float

    def to_dict(self) -> dict[str, Any]:
        from tracetochain.audit.shared import json_dict

        return json_dict({"ks": list(self.ks), "model_pass_hat_k": list(self.model),
                          "empirical_pass_hat_k": list(self.empirical),
                          "interval": [list(i) for i in self.interval], "inside": list(self.inside),
                          "agrees": self.agrees, "model_trials": self.trials, "confidence": self.confidence})


def pass_k_check(traces: TraceTable | EncodedTraces | tuple[ArrayLikeInt, ArrayLikeInt], compiled: Any,
                 ks: Sequence[int] | None = None, *,
                 n_bootstrap: int = 2000, confidence: float = 0.95, seed: int = 0) -> PassKCheck:
    """Check a compiled model's pass^k (:class:`~tracetochain.models.CompiledModel`) against the traces' per-task
    estimates: inside the ``confidence`` task-bootstrap interval at every k (default 2 … the fewest trials of the
    tasks that have at least two) — the trials layer of a certificate for a model that lets tasks differ.
    """
    c, n = _as_counts(traces)
    multi = n[n >= 2]
    if ks is None:
        ks = list(range(2, int(multi.min()) + 1)) if multi.size else [2]
    ks_t = _check(ks, n_bootstrap, confidence)
    model = tuple(float(v) for v in compiled.pass_hat_k(list(ks_t)))
    if not multi.size:
        return PassKCheck(ks_t, model, tuple(None for _ in ks_t), tuple((None, None) for _ in ks_t),
                          tuple(None for _ in ks_t), None, compiled.trials, confidence)
    est = empirical_pass_k((c, n), ks_t, n_bootstrap=n_bootstrap, confidence=confidence, seed=seed)
    inside: list[bool | None] = []
    for v, (lo, hi) in zip(model, est.pass_hat_k_interval, strict=True):
        inside.append(None if lo is None or hi is None else bool(lo - 1e-12 <= v <= hi + 1e-12))
    known = [x for x in inside if x is not None]
    return PassKCheck(ks_t, model, est.pass_hat_k, est.pass_hat_k_interval, tuple(inside),
                      all(known) if known else None, compiled.trials, confidence)


# ---------------------------------------------------------------------------------------------------- test
@dataclass(frozen=True)
class PassKTest:
    """A calibrated test of a model's law of successes within a task (the certificate's trials layer for a model).

    ``statistic`` T = Σ_k ((ê_k − m_k)/s_k)² over k = 2 … K, where ê_k is the traces' per-task unbiased pass^k, m_k
    the model's pass^k and s_k the standard deviation of ê_k under the model for these tasks' trial counts; p is
    the Monte Carlo rank of T among corpora of the same shape drawn from the model (:func:`pass_k_test`). None when
    no task has two trials (``applicable`` False) or the traces are too few (``notes`` says why).
    """

    applicable: bool
    ks: tuple[int, ...]
    model: tuple[float, ...]
    empirical: tuple[float | None, ...]
    statistic: float | None
    p_value: float | None
    n_tasks: int
    n_repeated_traces: int
    n_simulations: int
    trials: str
    seed: int
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        from tracetochain.audit.shared import json_dict

        return json_dict({
            "applicable": self.applicable, "ks": list(self.ks), "model_pass_hat_k": list(self.model),
            "empirical_pass_hat_k": list(self.empirical), "statistic": self.statistic, "p_value": self.p_value,
            "n_tasks": self.n_tasks, "n_repeated_traces": self.n_repeated_traces,
            "n_simulations": self.n_simulations, "model_trials": self.trials, "seed": self.seed,
            "notes": list(self.notes),
            "definitions": {
                "statistic": "sum over k = 2..K of ((per-task pass^k - model pass^k) / sd)^2, sd of the per-task "
                             "estimate under the model for these trial counts",
                "null": "tasks of the same trial counts drawn from the model: a task draws its class once when its "
                        "trials share one, then each trial succeeds with the class's R_inf",
            },
        })


def pass_k_test(traces: TraceTable | EncodedTraces | tuple[ArrayLikeInt, ArrayLikeInt], compiled: Any,
                ks: Sequence[int] | None = None, *, n_simulations: int = 999, min_traces: int = 20,
                seed: int = 0) -> PassKTest:
    """Test a compiled model's pass^k against the traces' tasks with two or more trials (:class:`PassKTest`).

    Under the model a task's trials succeed independently with probability R_c of the class c the task draws once
    (w_c, when the model's trials share a class), or with R∞ (i.i.d. trials). The per-task estimator
    C(c, k)/C(n, k) is unbiased for pass^k given the task (Yao et al. 2024), so its average over tasks is centred
    on the model's Σ_c w_c R_c^k when the model is right. The test standardises each k's gap by its sd under the
    model (from a pilot of ``n_simulations`` draws) and ranks the observed T among ``n_simulations`` fresh draws:
    p = (1 + #{T* ≥ T}) / (B + 1). Each k is estimated on the tasks with at least k trials, so every k the tasks
    can show is tested: ``ks`` default 2 … K, K the largest number of trials that at least two tasks have (the
    default used to stop at the fewest trials of any task, so a corpus of 2- and 5-trial tasks tested k = 2 only and
    pass^3 … pass^5 were certified by extrapolation). Fewer than ``min_traces`` traces in tasks with two or more
    trials: no p-value.
    """
    if n_simulations < 1:
        raise ValueError(f"n_simulations must be >= 1, got {n_simulations}")
    c_all, n_all = _as_counts(traces)
    multi = n_all >= 2
    c, n = c_all[multi], n_all[multi]
    if ks is None:
        top = int(np.sort(n)[-2]) if n.size >= 2 else 2  # at least two tasks have this many trials
        ks = list(range(2, max(2, top) + 1))
    ks_t = tuple(int(k) for k in ks)
    if not ks_t or min(ks_t) < 2:
        raise ValueError(f"ks must be integers >= 2 (pass^1 is R∞, the R∞ layer's), got {ks!r}")
    model = tuple(float(v) for v in compiled.pass_hat_k(list(ks_t)))
    trials = str(compiled.trials)
    none: tuple[float | None, ...] = tuple(None for _ in ks_t)
    if not n.size:
        return PassKTest(False, ks_t, model, none, None, None, 0, 0, n_simulations, trials, seed,
                         ("no task has two or more trials",))
    if int(n.max()) < max(ks_t):
        raise ValueError(f"no task has k = {max(ks_t)} trials; the largest number of trials is {int(n.max())}")
    empirical = tuple(float(np.nanmean(per_task_pass_hat_k(c, n, k))) for k in ks_t)
    n_rep = int(n.sum())
    if n_rep < min_traces:
        return PassKTest(True, ks_t, model, empirical, None, None, int(n.size), n_rep, n_simulations, trials, seed,
                         (f"only {n_rep} traces in tasks with two or more trials; the test needs at least "
                          f"{min_traces}",))
    if trials == "task" and compiled.n_components > 1:
        weights = np.asarray(compiled.component_weights, dtype=np.float64)
        rates = np.asarray(compiled.component_r_inf(), dtype=np.float64)
    else:
        weights, rates = np.ones(1), np.array([float(compiled.chain.r_inf)])
    weights = weights / weights.sum()
    target = np.asarray(model)
    rng = np.random.default_rng(seed)

    def draw(size: int) -> NDArray[np.float64]:
        cls = rng.choice(weights.size, size=(size, n.size), p=weights)
        succ = rng.binomial(np.broadcast_to(n, (size, n.size)), np.clip(rates[cls], 0.0, 1.0))
        trials_b = np.broadcast_to(n, succ.shape)
        return np.stack([np.nanmean(per_task_pass_hat_k(succ, trials_b, k), axis=1) for k in ks_t], axis=1)

    sd = draw(n_simulations).std(axis=0, ddof=1)
    sd = np.where(sd > 0, sd, 1e-12)  # a degenerate model (R_c all 0 or 1) makes any gap infinitely unlikely

    def stat(e: NDArray[np.float64]) -> NDArray[np.float64]:
        out: NDArray[np.float64] = np.sum(((e - target) / sd) ** 2, axis=-1)
        return out

    t_obs = float(stat(np.asarray(empirical)))
    t_star = stat(draw(n_simulations))
    p = (1 + int(np.count_nonzero(t_star >= t_obs - 1e-9 * max(1.0, t_obs)))) / (n_simulations + 1)
    return PassKTest(True, ks_t, model, empirical, t_obs, p, int(n.size), n_rep, n_simulations, trials, seed)
