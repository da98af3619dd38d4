"""Planning figures for repeated trials: intraclass correlation, design effect, and tasks × trials for a target width.

With T tasks, m_t trials of task t and c_t successes, the trials of one task are correlated (a task is easy or hard
for the agent). The **intraclass correlation** ρ of the binary outcomes is estimated by the one-way ANOVA estimator
(Fleiss 1981, §13; the estimator behind :meth:`~tracetochain.audit._trials.TaskTable.design_effect`)::

    p̄ = Σc/N,  MSB = Σ m_t (c_t/m_t − p̄)² / (T − 1),  MSW = Σ (c_t − c_t²/m_t) / (N − T),
    m₀ = (N − Σm_t²/N) / (T − 1),  ρ̂ = (MSB − MSW) / (MSB + (m₀ − 1) MSW),

with a percentile interval from a bootstrap over tasks (the task is the independent unit). The **design effect** of
the pass rate is Kish's 1 + (m̄ − 1) ρ with m̄ = Σm_t²/N (= m for equal trials): the factor by which task clustering
inflates the variance over N independent episodes.

**Tasks × trials for a target width.** Model the task success probabilities as p_t ~ Beta(α, β) with mean μ (the
pass rate) and α + β = 1/ρ − 1 (so that the correlation of two trials of a task is ρ; ρ = 0 is the binomial limit),
and run m trials of each of T tasks. The per-task unbiased pass^k estimator h_k(c) = C(c, k)/C(m, k) averaged over
tasks has variance V_k(m)/T with::

    V_k(m) = Σ_{c=0}^{m} BB(c; m, α, β) h_k(c)² − (pass^k)²,      pass^k = Π_{i<k} (α + i)/(α + β + i),

where BB is the beta-binomial law (exact under the model; Yao et al. 2024 for the estimator). For k = 1 this is the
familiar V_1(m) = μ(1 − μ)(1 + (m − 1)ρ)/m, i.e. the binomial variance times the design effect. A normal interval
at level 1 − a has width w = 2 z_{1−a/2} √(V_k(m)/T), so the number of tasks needed for width w is::

    T = ⌈ (2 z_{1−a/2})² V_k(m) / w² ⌉.

R∞ of a chain fitted on the traces' own states equals their pass rate up to the prior, so its width is planned with
k = 1. The prediction is checked against sub-samples of the τ-bench / τ²-bench runs in the test suite.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import betaln, gammaln

from tracetochain.audit.shared import anova_icc

__all__ = ["ICCEstimate", "TrialsPlan", "icc_estimate", "pass_k_variance", "plan_trials", "tasks_needed"]


@dataclass(frozen=True)
class ICCEstimate:
    """ρ̂ (ANOVA, unclipped: it can be slightly negative by chance), its task-bootstrap interval, and the design
    effect 1 + (m̄ − 1)·max(ρ̂, 0)."""

    icc: float | None
    interval: tuple[float | None, float | None]
    design_effect: float
    mean_trials: float
    n_tasks: int
    n_episodes: int
    pass_rate: float | None
    confidence: float
    n_bootstrap: int
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"icc": self.icc, "interval": list(self.interval), "design_effect": self.design_effect,
                "mean_trials": self.mean_trials, "n_tasks": self.n_tasks, "n_episodes": self.n_episodes,
                "pass_rate": self.pass_rate, "confidence": self.confidence, "n_bootstrap": self.n_bootstrap,
                "method": "one-way ANOVA estimator (Fleiss 1981), percentile bootstrap over tasks",
                "note": self.note}


def _counts(successes: ArrayLike, trials: ArrayLike) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    c = np.asarray(successes, dtype=np.int64).ravel()
    n = np.asarray(trials, dtype=np.int64).ravel()
    if c.shape != n.shape or np.any(n < 0) or np.any(c < 0) or np.any(c > n):
        raise ValueError("need one success count and one trial count per task, with 0 ≤ successes ≤ trials")
    keep = n > 0
    return c[keep], n[keep]


def icc_estimate(successes: ArrayLike, trials: ArrayLike, *, confidence: float = 0.95, n_bootstrap: int = 1000,
                 seed: int = 0) -> ICCEstimate:
    """The intraclass correlation of outcomes across trials of a task, with an interval (module docstring).

    >>> est = icc_estimate([4, 4, 0, 0, 2], [4, 4, 4, 4, 4], n_bootstrap=200)
    >>> round(est.icc, 3), round(est.design_effect, 3)
    (0.778, 3.333)
    """
    c, n = _counts(successes, trials)
    N, T = int(n.sum()), int(c.size)
    mbar = float(np.sum(n * n)) / N if N else 0.0
    rate = float(c.sum()) / N if N else None
    rho = anova_icc(c, n)
    if rho is None:
        note = ("no task was tried twice: the ICC needs repeated trials" if not np.any(n >= 2)
                else "every trial has the same outcome (or there is one task): the ICC is not defined")
        return ICCEstimate(None, (None, None), 1.0, mbar, T, N, rate, confidence, 0, note)
    rng = np.random.default_rng(seed)
    draws: list[float] = []
    for _ in range(n_bootstrap):
        idx = rng.integers(0, T, T)
        r = anova_icc(c[idx], n[idx])
        if r is not None:
            draws.append(r)
    if draws:
        lo, hi = np.quantile(draws, [(1 - confidence) / 2, (1 + confidence) / 2])
        interval: tuple[float | None, float | None] = (float(lo), float(hi))
    else:
        interval = (None, None)
    return ICCEstimate(float(rho), interval, 1.0 + (mbar - 1.0) * max(0.0, float(rho)), mbar, T, N, rate,
                       confidence, n_bootstrap)


def _log_choose(n: NDArray[np.float64] | float, k: NDArray[np.float64] | float) -> Any:
    return gammaln(np.asarray(n) + 1) - gammaln(np.asarray(k) + 1) - gammaln(np.asarray(n) - np.asarray(k) + 1)


def pass_k_variance(mean: float, icc: float, trials: int, k: int = 1) -> float | None:
    """V_k(m): the between-task variance of the per-task unbiased pass^k estimator with m trials per task under the
    beta-binomial with mean μ and correlation ρ (module docstring); None when m < k.

    >>> round(pass_k_variance(0.6, 0.2, 4, 1), 6) == round(0.6 * 0.4 * (1 + 3 * 0.2) / 4, 6)
    True
    """
    if trials < k or k < 1:
        return None
    mu = min(max(float(mean), 0.0), 1.0)
    rho = min(max(float(icc), 0.0), 1.0)
    if mu in (0.0, 1.0):
        return 0.0
    c = np.arange(trials + 1, dtype=np.float64)
    h = np.where(c >= k, np.exp(_log_choose(np.maximum(c, k), k) - _log_choose(trials, k)), 0.0)
    if rho <= 1e-9:  # the binomial limit
        logp = _log_choose(trials, c) + c * math.log(mu) + (trials - c) * math.log1p(-mu)
        passk = mu ** k
    elif rho >= 1 - 1e-9:  # every task all-or-nothing
        return float(mu - mu * mu)
    else:
        s = 1.0 / rho - 1.0
        a, b = mu * s, (1.0 - mu) * s
        logp = _log_choose(trials, c) + betaln(c + a, trials - c + b) - betaln(a, b)
        passk = float(np.exp(np.sum(np.log(a + np.arange(k)) - np.log(a + b + np.arange(k)))))
    p = np.exp(logp)
    p /= p.sum()
    return max(0.0, float(np.sum(p * h * h)) - passk * passk)


def tasks_needed(mean: float, icc: float, trials: int, width: float, *, k: int = 1,
                 confidence: float = 0.95) -> int | None:
    """T = ⌈(2 z)² V_k(m) / w²⌉: tasks of ``trials`` trials each for an interval of total width ``width`` on
    pass^k (k = 1: the pass rate and R∞); None when trials < k."""
    if not 0 < width < 1:
        raise ValueError(f"the target width must be in (0, 1), got {width!r}")
    v = pass_k_variance(mean, icc, trials, k)
    if v is None:
        return None
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    return max(2, math.ceil((2 * z) ** 2 * v / width ** 2))


def predicted_width(mean: float, icc: float, trials: int, tasks: int, *, k: int = 1,
                    confidence: float = 0.95) -> float | None:
    """2 z √(V_k(m)/T): the interval width the design (T tasks × m trials) should give."""
    v = pass_k_variance(mean, icc, trials, k)
    if v is None or tasks < 1:
        return None
    return 2 * NormalDist().inv_cdf(0.5 + confidence / 2) * math.sqrt(v / tasks)


@dataclass(frozen=True)
class TrialsPlan:
    """Tasks needed per trials-per-task for a target width, for R∞ (k = 1) and each pass^k."""

    width: float
    confidence: float
    icc: ICCEstimate
    ks: tuple[int, ...]
    rows: tuple[dict[str, Any], ...]
    current_width: dict[str, float | None]

    def to_dict(self) -> dict[str, Any]:
        return {"target_width": self.width, "confidence": self.confidence, "icc": self.icc.to_dict(),
                "ks": list(self.ks), "rows": [dict(r) for r in self.rows],
                "current_design_width": dict(self.current_width),
                "formula": "T = ceil((2 z)^2 V_k(m) / w^2), V_k(m) = Var over tasks of the per-task unbiased "
                           "pass^k estimator with m trials under a beta-binomial with the pass rate and ICC"}


def plan_trials(successes: ArrayLike, trials: ArrayLike, *, width: float = 0.1, ks: Sequence[int] = (1, 3),
                trial_counts: Sequence[int] = (1, 2, 3, 4, 5, 8), confidence: float = 0.95,
                n_bootstrap: int = 1000, seed: int = 0) -> TrialsPlan:
    """The planning table of a corpus: its ICC and, for each number of trials per task m, the tasks (and episodes)
    needed for an interval of width ``width`` on R∞ (k = 1) and on each pass^k. ``current_width`` is the width the
    corpus's own design (its tasks × its median trials) predicts, per quantity.

    >>> plan = plan_trials([3, 0, 4, 1, 2, 4], [4] * 6, width=0.2, n_bootstrap=100)
    >>> plan.rows[3]["trials"], plan.rows[3]["tasks"]["r_inf"] > 0
    (4, True)
    """
    c, n = _counts(successes, trials)
    icc = icc_estimate(c, n, confidence=confidence, n_bootstrap=n_bootstrap, seed=seed)
    mu = icc.pass_rate if icc.pass_rate is not None else 0.0
    rho = max(0.0, icc.icc) if icc.icc is not None else 0.0
    ks_t = tuple(sorted({int(k) for k in ks if int(k) >= 2}))
    rows: list[dict[str, Any]] = []
    for m in sorted({int(x) for x in trial_counts if int(x) >= 1}):
        need = {"r_inf": tasks_needed(mu, rho, m, width, k=1, confidence=confidence),
                **{f"pass^{k}": tasks_needed(mu, rho, m, width, k=k, confidence=confidence) for k in ks_t}}
        rows.append({"trials": m, "tasks": need,
                     "episodes": {q: (None if t is None else t * m) for q, t in need.items()}})
    m_now = int(np.median(n)) if n.size else 1
    current = {"r_inf": predicted_width(mu, rho, m_now, int(c.size), k=1, confidence=confidence),
               **{f"pass^{k}": predicted_width(mu, rho, m_now, int(c.size), k=k, confidence=confidence)
                  for k in ks_t}}
    return TrialsPlan(width, confidence, icc, ks_t, tuple(rows), current)
