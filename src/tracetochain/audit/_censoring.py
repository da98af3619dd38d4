r"""Censoring in the audit: what a chain predicts about traces that were cut before they ended.

A censored trace (stopped by a step budget, a timeout, a crash of the harness) was observed for L steps without being
absorbed. Counting handles it exactly (its transitions count, it adds no exit). The audit's held-out checks must
handle it too: a success that would have happened after the cut is not seen, so comparing R∞ with the pass rate of
censored data, or the success-time law with the times of the successes that happened to be seen, rejects sound chains
(measured: first-order data capped at 6 steps failed the R∞ check 30 % of the time; 30 % random censoring 89 %).

Let C be the step at which a trace would be cut (independent of the agent's path; C = ∞ when nothing cuts it). A
trace that is absorbed at step T is observed to end iff T ≤ C, so under the chain

    P(success observed at step d) = f⊕(d) · P(C ≥ d),     R_C = Σ_d f⊕(d) · P(C ≥ d),

with f⊕ the chain's success first-passage law. Without censoring P(C ≥ d) = 1 and R_C = R∞; with a fixed cap D it is
R(D). An episode that succeeded before any step (the chain's start exit, f⊕(0) = s) is always observed: P(C ≥ 0) = 1;
a censored episode of length 0 was cut before its first step (C = 0). P(C ≥ d) is estimated from the traces themselves
by the reverse Kaplan–Meier estimator (Schemper & Smith 1996):
the "events" are the censored traces, and a trace that ended at step L shows only C ≥ L. On the step lattice the hazard
of C at d is λ(d) = #{censored at d} / #{traces of ≥ d steps} (a trace that ended at d is still at risk at d: its end
was observed, so C ≥ d), and P(C ≥ d) = Π_{j<d} (1 − λ(j)). Beyond the longest trace nothing is observed, so when
there is any censoring P(C ≥ d) = 0 for d past it.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from tracetochain._outcome import CENSORED


def length_histograms(lengths: NDArray[np.int64], outcomes: NDArray[np.integer], size: int | None = None
                      ) -> NDArray[np.int64]:
    """Histogram (3, L + 1) of trace lengths by outcome (success, failure, censored); other outcomes are ignored."""
    lengths = np.asarray(lengths, dtype=np.int64)
    oc = np.asarray(outcomes, dtype=np.int64)
    top = int(lengths.max()) if lengths.size else 0
    n = max(top + 1, size or 0)
    keep = oc <= CENSORED
    flat = np.bincount(oc[keep] * n + lengths[keep], minlength=3 * n)
    out: NDArray[np.int64] = flat.reshape(3, n).astype(np.int64)
    return out


def censoring_survival(hist: NDArray[np.int64]) -> NDArray[np.float64] | None:
    """P(C ≥ d) for d = 0 … L + 1 from a (3, L + 1) length histogram (module docstring), or None without censoring.

    >>> h = np.zeros((3, 7), np.int64); h[0, 3] = 5; h[2, 6] = 5           # 5 successes at 3, 5 cut at the cap 6
    >>> censoring_survival(h).tolist()
    [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0]
    """
    h = np.asarray(hist, dtype=np.int64)
    if h.ndim != 2 or h.shape[0] != 3:
        raise ValueError(f"need a (3, L + 1) histogram of lengths by outcome, got shape {h.shape}")
    censored = h[CENSORED]
    if not censored.any():
        return None
    all_traces = h.sum(axis=0)
    L = int(np.flatnonzero(all_traces)[-1])
    at_risk = np.cumsum(all_traces[::-1])[::-1]  # traces of ≥ d steps
    hazard = np.divide(censored, at_risk, out=np.zeros(h.shape[1]), where=at_risk > 0)
    out = np.ones(L + 2)  # out[d] = P(C ≥ d) = Π_{j<d} (1 − λ(j))
    out[1:] = np.cumprod(1.0 - hazard[: L + 1])
    out[L + 1] = 0.0  # nothing is observed past the longest trace
    return out


def cap_survival(max_steps: int) -> NDArray[np.float64]:
    """P(C ≥ d) for a known step cap D: 1 for d ≤ D, 0 after (d = 0 … D + 1)."""
    out = np.ones(int(max_steps) + 2)
    out[-1] = 0.0
    return out


def draw_caps(survival: NDArray[np.float64] | None, n: int, rng: np.random.Generator) -> NDArray[np.int64] | None:
    """n censoring steps C drawn from P(C ≥ d) (None: no censoring). P(C = d) = P(C ≥ d) − P(C ≥ d + 1).

    C = 0 (an episode cut before its first step) has probability 1 − P(C ≥ 1), which is 0 unless censored episodes of
    length 0 were seen."""
    if survival is None:
        return None
    s = np.asarray(survival, dtype=np.float64)
    pmf = np.clip(s[:-1] - s[1:], 0.0, None)
    total = pmf.sum()
    if total <= 0:
        return None
    cdf = np.cumsum(pmf / total)
    cdf[-1] = 1.0
    out: NDArray[np.int64] = np.searchsorted(cdf, rng.random(n), side="right").astype(np.int64)
    return out


def observed_success_pmf(success_pmf: NDArray[np.float64], survival: NDArray[np.float64] | None
                         ) -> NDArray[np.float64]:
    """f⊕(d) · P(C ≥ d) for d = 0 … len − 1 (the last axis); without censoring f⊕ itself. Works on stacks."""
    f = np.asarray(success_pmf, dtype=np.float64)
    if survival is None:
        return f
    n = f.shape[-1]
    s = np.zeros(n)
    k = min(n, survival.size)
    s[:k] = survival[:k]
    out: NDArray[np.float64] = f * s
    return out
