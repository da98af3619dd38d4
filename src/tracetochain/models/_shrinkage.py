"""Hierarchical Dirichlet shrinkage of categorical rows, with the concentration chosen by empirical Bayes.

A row of counts c (over J outcomes, n = Σ c) whose probabilities p are drawn from Dir(κ·b) around a parent row b
has posterior mean

    p̂ = (c + κ b) / (n + κ),

so a row with little data stays near its parent and a row with much data follows its counts. The concentration κ
is chosen by maximising the marginal likelihood of all rows of one level (type-II maximum likelihood), the
Dirichlet–multinomial evidence of the observed sequences

    log p(c | κ b) = log Γ(κ) − log Γ(n + κ) + Σ_j [log Γ(c_j + κ b_j) − log Γ(κ b_j)]

(MacKay & Peto 1995, "A hierarchical Dirichlet language model"; Minka 2000 for the estimator). Only cells with
c_j > 0 contribute to the sum, so the cost is the number of non-empty cells. Counts may be fractional (expected
counts of an EM step).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray
from scipy.special import digamma, gammaln, polygamma

#: Search range of κ (log scale). The upper end means "the row equals its parent" for any realistic n.
KAPPA_BOUNDS = (1e-2, 1e6)
#: Pseudo-count per outcome of the root row (Jeffreys, ½ per cell): the only place prior mass is added outright.
ROOT_PSEUDOCOUNT = 0.5


def dirichlet_multinomial_evidence(counts: NDArray[np.float64], base: NDArray[np.float64], kappa: float) -> float:
    """Σ over rows of log p(c_r | κ b_r) (module docstring); rows without data contribute 0.

    >>> round(dirichlet_multinomial_evidence(np.array([[1.0, 0.0]]), np.array([[0.5, 0.5]]), 1.0), 6)
    -0.693147
    """
    c = np.asarray(counts, dtype=np.float64)
    b = np.asarray(base, dtype=np.float64)
    n = c.sum(axis=1)
    rows = n > 0
    if not rows.any():
        return 0.0
    c, b, n = c[rows], b[rows], n[rows]
    nz = c > 0
    kb = kappa * b[nz]
    cells = float(np.sum(gammaln(c[nz] + kb) - gammaln(kb)))
    return float(np.sum(gammaln(kappa) - gammaln(n + kappa))) + cells


def eb_concentration(counts: NDArray[np.float64], base: NDArray[np.float64],
                     bounds: tuple[float, float] = KAPPA_BOUNDS, start: float | None = None) -> float:
    """κ maximising :func:`dirichlet_multinomial_evidence` of the rows around their parents (log-scale search).

    Rows that are as alike as multinomial sampling allows push κ to the upper bound (no spread between rows);
    rows that differ more than sampling explains pull it down. ``start`` (a previous κ, e.g. from the last EM
    iteration) starts Newton's method on log κ there; without it, or when Newton does not settle, a bounded
    Brent search over the whole range decides.
    """
    c = np.asarray(counts, dtype=np.float64)
    b = np.asarray(base, dtype=np.float64)
    n = c.sum(axis=1)
    rows = n > 0
    if c.size == 0 or not rows.any():
        return bounds[1]
    c, b, n = c[rows], b[rows], n[rows]
    nz = c > 0
    if np.any(b[nz] <= 0):
        raise ValueError("a parent row gives probability 0 to an observed outcome; the root must have full support")
    # Flatten once: the evidence is evaluated many times per search.
    cells, cell_base = c[nz], b[nz]
    lo, hi = math.log(bounds[0]), math.log(bounds[1])

    def negative(log_kappa: float) -> float:
        kappa = math.exp(log_kappa)
        kb = kappa * cell_base
        value = float(np.add.reduce(gammaln(cells + kb) - gammaln(kb))) \
            + float(np.add.reduce(gammaln(kappa) - gammaln(n + kappa)))
        return -value

    def slope_and_curvature(x: float) -> tuple[float, float]:
        """First and second derivative of the evidence in x = log κ (digamma / trigamma sums)."""
        kappa = math.exp(x)
        kb = kappa * cell_base
        d1 = float(np.add.reduce(cell_base * (digamma(cells + kb) - digamma(kb)))) \
            + float(np.add.reduce(digamma(kappa) - digamma(n + kappa)))
        d2 = float(np.add.reduce(cell_base**2 * (polygamma(1, cells + kb) - polygamma(1, kb)))) \
            + float(np.add.reduce(polygamma(1, kappa) - polygamma(1, n + kappa)))
        return kappa * d1, kappa * d1 + kappa * kappa * d2

    if start is not None and start > 0:
        x = min(max(math.log(start), lo), hi)
        for _ in range(30):
            g1, g2 = slope_and_curvature(x)
            if (x <= lo and g1 <= 0) or (x >= hi and g1 >= 0):
                return math.exp(x)  # the optimum sits on the bound
            if g2 >= 0:  # not locally concave: leave it to the global search
                break
            step = max(-2.0, min(2.0, -g1 / g2))
            x = min(max(x + step, lo), hi)
            if abs(step) < 1e-4:
                return math.exp(x)
    from scipy.optimize import minimize_scalar  # imported here: start-up (the Newton steps above rarely fail)
    res = minimize_scalar(negative, bounds=(lo, hi), method="bounded", options={"xatol": 1e-2})
    best = float(res.x)
    # The bounded search can stop short of an end point where the evidence is still rising.
    for edge in (lo, hi):
        if negative(edge) < negative(best):
            best = edge
    return math.exp(best)


def shrink(counts: NDArray[np.float64], base: NDArray[np.float64], kappa: float) -> NDArray[np.float64]:
    """Posterior-mean rows (c + κ b) / (n + κ); κ = ∞ returns the parent rows exactly."""
    c = np.asarray(counts, dtype=np.float64)
    b = np.asarray(base, dtype=np.float64)
    if math.isinf(kappa):
        return np.array(np.broadcast_to(b, c.shape), dtype=np.float64)
    out: NDArray[np.float64] = (c + kappa * b) / (c.sum(axis=1, keepdims=True) + kappa)
    return out


def root_row(counts: NDArray[np.float64], pseudocount: float = ROOT_PSEUDOCOUNT) -> NDArray[np.float64]:
    """The pooled row of all contexts with ½ pseudo-count per outcome: full support, weight independent of the
    number of states (the only prior mass that is not borrowed from data)."""
    pooled = np.asarray(counts, dtype=np.float64).sum(axis=0) + pseudocount
    out: NDArray[np.float64] = pooled / pooled.sum()
    return out
