"""Two-group comparisons of success rates, vectorised over many candidates, and the false discovery rate.

For each candidate the traces split into those that contain it (group 1: n₁ traces, s₁ successes) and those that do
not (group 0). Reported:

* **difference** d = s₁/n₁ − s₀/n₀ with Newcombe's hybrid score interval (Newcombe 1998, method 10: the two groups'
  Wilson intervals combined by the square-and-add rule). It keeps close to nominal coverage at the small counts and
  extreme rates path patterns produce, where the Wald interval collapses (zero width at 0 % or 100 %).
  When tasks repeat, each group's Wilson interval is computed on its **effective sample size** n/deff
  (Korn & Graubard 1998), with deff the design effect of the group's success rate: the cluster (linearisation)
  variance of the ratio estimator over tasks, T/(T−1) · Σₜ (sₜ − p̂ nₜ)² / n², over the binomial one, floored at 1;
  at p̂ ∈ {0, 1}, where both vanish, deff is the mean number of traces per task in the group (all trials of a task
  alike: the worst case). The two groups share tasks, and a task's shared difficulty makes their errors positively
  correlated; Newcombe's rule treats them as independent, which overstates the variance of the difference: the
  interval is conservative on that account.
* **p-value** of "success does not depend on containing the pattern": Fisher's exact test (two-sided, summing the
  tables no more likely than the one observed) when every trace is its own task — exact, valid at any count; when
  tasks repeat, the Pearson χ² (pooled variance) divided by the larger design effect of the two groups (the Rao–Scott
  first-order correction, Rao & Scott 1981), on 1 degree of freedom.
* **q-value** (:func:`by_qvalues`): Benjamini–Yekutieli (2001) step-up adjusted p-values over the whole family.

Why Benjamini–Yekutieli and not Benjamini–Hochberg: candidates overlap (``a → b`` lies inside ``a → b → c``; a loop
through ``a`` implies ``a`` visited ≥ 2 times), so their statistics are dependent. BH controls the FDR under positive
regression dependence on the subset of true nulls (PRDS; Benjamini & Yekutieli 2001, Thm 1.2), which is known to hold
for one-sided tests of positively correlated Gaussian statistics but not for two-sided tests, and two-sided tests of
nested binary features are what we run. BY controls the FDR at level α under *any* dependence (their Thm 1.3) at the
price of the factor H_C = Σ_{i ≤ C} 1/i (≈ ln C + 0.58) — about 7 for 600 candidates. Merging candidates with the same
traces (``_candidates``) keeps C, and that price, down.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

_GRID = 4_000_000  # cells of one chunk of the Fisher support grid


def z_of(confidence: float) -> float:
    from scipy.special import ndtri

    return float(ndtri(0.5 + confidence / 2.0))


def wilson(s: NDArray[np.float64], n: NDArray[np.float64], z: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Wilson score interval of s/n (n may be an effective, non-integer size; n = 0 gives [0, 1])."""
    n = np.asarray(n, float)
    safe = np.where(n > 0, n, 1.0)
    p = np.where(n > 0, s / safe, 0.5)
    z2 = z * z
    denom = 1.0 + z2 / safe
    centre = (p + z2 / (2 * safe)) / denom
    half = z / denom * np.sqrt(np.maximum(p * (1 - p) / safe + z2 / (4 * safe * safe), 0.0))
    lo = np.where(n > 0, np.clip(centre - half, 0.0, 1.0), 0.0)
    hi = np.where(n > 0, np.clip(centre + half, 0.0, 1.0), 1.0)
    return lo, hi


def newcombe(s1: NDArray[np.float64], n1: NDArray[np.float64], s0: NDArray[np.float64], n0: NDArray[np.float64],
             z: float) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """(d, lower, upper) of d = s₁/n₁ − s₀/n₀ by Newcombe's hybrid score method (module docstring).

    >>> d, lo, hi = newcombe(np.array([56.]), np.array([70.]), np.array([48.]), np.array([80.]), 1.959964)
    >>> round(float(d[0]), 4), round(float(lo[0]), 4), round(float(hi[0]), 4)  # Newcombe (1998), Table II, ex. (a)
    (0.2, 0.0524, 0.3339)
    """
    p1 = s1 / np.where(n1 > 0, n1, 1.0)
    p0 = s0 / np.where(n0 > 0, n0, 1.0)
    l1, u1 = wilson(s1, n1, z)
    l0, u0 = wilson(s0, n0, z)
    d = p1 - p0
    lower = d - np.sqrt((p1 - l1) ** 2 + (u0 - p0) ** 2)
    upper = d + np.sqrt((u1 - p1) ** 2 + (p0 - l0) ** 2)
    return d, np.clip(lower, -1.0, 1.0), np.clip(upper, -1.0, 1.0)


def fisher_two_sided(N: int, K: int, n: NDArray[np.int64], x: NDArray[np.int64]) -> NDArray[np.float64]:
    """Two-sided Fisher exact p-values of many 2×2 tables with the same margins N (traces) and K (successes):
    table j has n[j] traces in group 1, x[j] of them successes. p = Σ P(Y = y) over the y with
    P(Y = y) ≤ P(Y = x)·(1 + 10⁻⁷), Y hypergeometric (the rule of R's ``fisher.test`` and scipy's ``fisher_exact``).
    Computed on a grid of the support, in chunks (no loop over tables)."""
    from scipy.special import gammaln

    from tracetochain.numerics.shared import logsumexp_rows

    n = np.asarray(n, np.int64)
    x = np.asarray(x, np.int64)
    out = np.ones(n.size, float)
    if n.size == 0 or K == 0 or K == N:
        return out

    def lchoose(a: NDArray[np.float64] | float, b: NDArray[np.float64]) -> NDArray[np.float64]:
        return gammaln(np.asarray(a) + 1) - gammaln(b + 1) - gammaln(np.asarray(a) - b + 1)  # type: ignore[no-any-return]

    lo = np.maximum(0, n + K - N)
    hi = np.minimum(n, K)
    width = hi - lo + 1
    order = np.argsort(width)
    start = 0
    while start < n.size:
        w = int(width[order[start]])
        stop = start + 1
        while stop < n.size:  # chunks of similar support width, each at most _GRID cells
            w_next = int(width[order[stop]])
            if (stop - start + 1) * w_next > _GRID:
                break
            w = w_next
            stop += 1
        idx = order[start:stop]
        y = lo[idx, None] + np.arange(w)[None, :]
        valid = y <= hi[idx, None]
        nn = n[idx, None].astype(float)
        yf = np.where(valid, y, lo[idx, None]).astype(float)
        logp = lchoose(float(K), yf) + lchoose(float(N - K), nn - yf) - lchoose(float(N), nn)
        xs = x[idx].astype(float)
        n_idx = n[idx].astype(float)
        logp_obs = lchoose(float(K), xs) + lchoose(float(N - K), n_idx - xs) - lchoose(float(N), n_idx)
        take = valid & (logp <= logp_obs[:, None] + 1e-7)
        vals = logsumexp_rows(np.where(take, logp, -np.inf))
        out[idx] = np.minimum(1.0, np.exp(vals))
        start = stop
    return out


def by_qvalues(p: NDArray[np.float64]) -> NDArray[np.float64]:
    """Benjamini–Yekutieli adjusted p-values: q₍ᵢ₎ = min_{j ≥ i} min(1, C·H_C·p₍ⱼ₎ / j), H_C = Σ_{i ≤ C} 1/i.
    Rejecting q ≤ α controls the FDR at α under arbitrary dependence (Benjamini & Yekutieli 2001, Thm 1.3).

    >>> by_qvalues(np.array([0.01, 0.04, 0.03])).round(4).tolist()
    [0.055, 0.0733, 0.0733]
    """
    p = np.asarray(p, float)
    C = p.size
    if C == 0:
        return p.copy()
    h = float(np.sum(1.0 / np.arange(1, C + 1)))
    order = np.argsort(p, kind="stable")
    ranked = p[order] * C * h / np.arange(1, C + 1)
    q_sorted = np.minimum.accumulate(ranked[::-1])[::-1]
    q = np.empty(C)
    q[order] = np.minimum(q_sorted, 1.0)
    return q


@dataclass(frozen=True)
class ClusterSums:
    """Per candidate, the task-level sums a group's cluster variance needs: Σₜ aₜ², Σₜ aₜbₜ, Σₜ bₜ² (aₜ traces and
    bₜ successes of task t in the group) and T, the number of tasks with a trace in the group."""

    aa: NDArray[np.float64]
    ab: NDArray[np.float64]
    bb: NDArray[np.float64]
    tasks: NDArray[np.float64]


def design_effect(s: NDArray[np.float64], n: NDArray[np.float64], sums: ClusterSums) -> NDArray[np.float64]:
    """Design effect of the success rate s/n of a group clustered by task (module docstring), at least 1."""
    safe = np.where(n > 0, n, 1.0)
    p = s / safe
    T = sums.tasks
    resid = np.maximum(sums.bb - 2 * p * sums.ab + p * p * sums.aa, 0.0)
    v_cluster = np.where(T > 1, T / np.maximum(T - 1, 1) * resid / safe ** 2, 0.0)
    v_binom = p * (1 - p) / safe
    interior = (v_binom > 0) & (T > 1)
    deff = np.where(interior, v_cluster / np.where(v_binom > 0, v_binom, 1.0), safe / np.maximum(T, 1))
    return np.maximum(deff, 1.0)


def cluster_sums(presence: sp.csc_matrix, success: NDArray[np.bool_], task_codes: NDArray[np.int64], n_tasks: int
                 ) -> tuple[ClusterSums, ClusterSums]:
    """(with, without) task-level sums for every candidate column of ``presence`` (traces × candidates)."""
    y = success.astype(float)
    n_traces = presence.shape[0]
    G = sp.csr_matrix((np.ones(n_traces), (task_codes, np.arange(n_traces))), shape=(n_tasks, n_traces))
    a = (G @ presence.astype(float)).tocsc()  # tasks × candidates: traces with the pattern
    b = (G @ sp.diags(y) @ presence.astype(float)).tocsc()  # … and successes among them
    nt = np.asarray(G.sum(axis=1)).ravel()
    st = G @ y
    aa = np.asarray(a.multiply(a).sum(axis=0)).ravel()
    ab = np.asarray(a.multiply(b).sum(axis=0)).ravel()
    bb = np.asarray(b.multiply(b).sum(axis=0)).ravel()
    with_tasks = np.diff(a.indptr).astype(float)
    # Tasks all of whose traces contain the pattern have no trace without it.
    full = a.copy()
    full.data = (a.data == nt[a.indices]).astype(float)
    without_tasks = n_tasks - np.asarray(full.sum(axis=0)).ravel()
    # Without = task totals minus with: Σ(n−a)², Σ(n−a)(s−b), Σ(s−b)².
    na = nt @ a
    nb = nt @ b
    sa = st @ a
    sb = st @ b
    w_aa = float(nt @ nt) - 2 * na + aa
    w_ab = float(nt @ st) - nb - sa + ab
    w_bb = float(st @ st) - 2 * sb + bb
    return (ClusterSums(aa, ab, bb, with_tasks),
            ClusterSums(w_aa, w_ab, w_bb, without_tasks.astype(float)))


def rao_scott_p(s1: NDArray[np.float64], n1: NDArray[np.float64], s0: NDArray[np.float64], n0: NDArray[np.float64],
                deff: NDArray[np.float64]) -> NDArray[np.float64]:
    """p-value of the Pearson χ² (pooled) of the 2×2 table divided by ``deff`` (Rao–Scott), 1 degree of freedom."""
    from scipy.special import chdtrc

    N = n1 + n0
    pooled = (s1 + s0) / np.where(N > 0, N, 1.0)
    var = pooled * (1 - pooled) * (1 / np.where(n1 > 0, n1, 1.0) + 1 / np.where(n0 > 0, n0, 1.0))
    d = s1 / np.where(n1 > 0, n1, 1.0) - s0 / np.where(n0 > 0, n0, 1.0)
    x2 = np.where(var > 0, d * d / np.where(var > 0, var, 1.0), 0.0) / np.maximum(deff, 1.0)
    return np.asarray(chdtrc(1.0, x2), float)
