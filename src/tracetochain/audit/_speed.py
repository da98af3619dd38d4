r"""Do tasks differ in speed? A permutation test of trace lengths grouped by task.

A chain fitted to tasks that differ only in speed (same success, more or fewer steps) reproduces the pooled
pass rate and even the pooled mean length, but its R(d), step budgets and the spread of mean steps are those of one
chain, not of a mixture of tasks; the held-out KS test on success times sees this only weakly (the pooled law of a
mixture is close to some chain's). Under the chain — every trial of every task one draw of the same chain — the trace
lengths are exchangeable across tasks, so the layer tests that exchangeability directly.

The statistic is Kruskal–Wallis's between-task spread of mid-ranks (Kruskal & Wallis 1952),
H ∝ Σ_t n_t (R̄_t − R̄)², over the traces of tasks with at least two trials (ranks make it robust to the long tails
of step counts, and to censoring that does not depend on the task). Its null law is exact and needs no model:
permuting the lengths over those traces, p = (1 + #{H* ≥ H}) / (B + 1) over B permutations, so its size is at most
the level on any first-order corpus whatever the chain. One-sided: tasks that differ make H large.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

#: Fewer traces in repeated tasks than this and the test is not run (the trials layer's floor).
MIN_REPEATED_TRACES = 20
_BLOCK = 64  # permutations per vectorised block


@dataclass(frozen=True)
class SpeedResult:
    """Outcome of :func:`speed_heterogeneity_test`: the statistic, its permutation p-value (None when too few
    repeated traces), and the per-task spread it measured."""

    statistic: float | None
    p_value: float | None
    n_tasks: int
    n_traces: int
    n_permutations: int
    icc: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"statistic": self.statistic, "p_value": self.p_value, "n_tasks": self.n_tasks,
                "n_traces": self.n_traces, "n_permutations": self.n_permutations, "icc_of_length": self.icc,
                "test": "Kruskal–Wallis between-task spread of length ranks, permutation null"}


def _midranks(x: NDArray[np.float64]) -> NDArray[np.float64]:
    order = np.argsort(x, kind="stable")
    xs = x[order]
    ranks = np.empty(x.size)
    bounds = np.flatnonzero(np.diff(xs)) + 1
    starts = np.concatenate([[0], bounds])
    ends = np.concatenate([bounds, [x.size]])
    mid = (starts + ends + 1) / 2.0
    ranks[order] = np.repeat(mid, ends - starts)
    return ranks


def _between(ranks: NDArray[np.float64], group: NDArray[np.int64], sizes: NDArray[np.float64]) -> float:
    sums = np.bincount(group, ranks, minlength=sizes.size)
    return float(np.sum(sums * sums / sizes))


def speed_heterogeneity_test(unit: NDArray[np.uint64], length: NDArray[np.int64], *, n_permutations: int = 999,
                             seed: Any = 0) -> SpeedResult:
    """Kruskal–Wallis permutation test that trace lengths do not depend on the task (module docstring).

    ``unit`` is each trace's task (id hash; a trace without a task is its own unit and drops out), ``length`` its
    number of steps. Reproducible: the result depends only on the multiset of (unit, length) pairs and ``seed``.

    >>> u = np.repeat(np.arange(10, dtype=np.uint64), 4)
    >>> slow = np.repeat(np.arange(10) % 2, 4) * 10
    >>> speed_heterogeneity_test(u, 3 + slow + np.tile([0, 1, 2, 3], 10), n_permutations=199).p_value
    0.005
    """
    u = np.asarray(unit, np.uint64)
    L = np.asarray(length, np.float64)
    key = np.lexsort((L, u))  # canonical order: any partitioning gives the same arrays
    u, L = u[key], L[key]
    _, inv, counts = np.unique(u, return_inverse=True, return_counts=True)
    rep = counts[inv] >= 2
    n = int(rep.sum())
    n_tasks = int(np.sum(counts >= 2))
    if n < MIN_REPEATED_TRACES or n_tasks < 2:
        return SpeedResult(None, None, n_tasks, n, 0, None)
    _, group = np.unique(inv[rep], return_inverse=True)
    group = group.astype(np.int64)
    sizes = np.bincount(group).astype(np.float64)
    ranks = _midranks(L[rep])
    observed = _between(ranks, group, sizes)
    rng = np.random.default_rng(seed)
    hits = 0
    for start in range(0, n_permutations, _BLOCK):
        b = min(_BLOCK, n_permutations - start)
        perm = np.argsort(rng.random((b, n)), axis=1)
        idx = (np.arange(b)[:, None] * sizes.size + group[None, :]).ravel()
        sums = np.bincount(idx, ranks[perm].ravel(), minlength=b * sizes.size).reshape(b, sizes.size)
        stat = np.sum(sums * sums / sizes, axis=1)
        hits += int(np.sum(stat >= observed * (1 - 1e-12)))
    p = (1 + hits) / (n_permutations + 1)
    N = float(n)
    mean_rank = (N + 1) / 2.0
    h = 12.0 / (N * (N + 1)) * (observed - N * mean_rank ** 2)
    # ANOVA intraclass correlation of the lengths themselves (descriptive: how much of their spread is the task's).
    x = L[rep]
    T = sizes.size
    means = np.bincount(group, x) / sizes
    msb = float(np.sum(sizes * (means - x.mean()) ** 2) / (T - 1))
    msw = float(np.sum((x - means[group]) ** 2) / (N - T)) if N > T else 0.0
    m0 = (N - float(np.sum(sizes ** 2)) / N) / (T - 1)
    denom = msb + (m0 - 1) * msw
    icc = (msb - msw) / denom if denom > 0 else None
    return SpeedResult(float(h), float(p), n_tasks, n, int(n_permutations), icc)
