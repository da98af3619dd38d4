"""Aligning the states of a refitted model (a full-bootstrap replicate) to the reference states.

Each function returns ``mapping``: for every replicate state, the index of the reference state it stands for.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


def match_by_centroids(reference: NDArray[np.float64], replicate: NDArray[np.float64]
                       ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Hungarian matching (``scipy.optimize.linear_sum_assignment``) of replicate to reference centroids.

    Minimises the total squared Euclidean distance Σ ‖c_b(i) − c_ref(σ(i))‖² over one-to-one assignments σ (Kuhn 1955),
    rather than the authors' greedy matching on R⊕. With more replicate states than reference states, the unassigned
    ones are merged into their nearest reference centroid; with fewer, some reference states receive no replicate state
    (their rows are then empty). Returns the mapping and each replicate state's squared distance to its match.
    """
    import scipy.optimize  # imported here: only the bootstrap's state matching needs it
    ref = np.asarray(reference, dtype=np.float64)
    rep = np.asarray(replicate, dtype=np.float64)
    cost = ((rep[:, None, :] - ref[None, :, :]) ** 2).sum(axis=2)
    rows, cols = scipy.optimize.linear_sum_assignment(cost)
    mapping = np.argmin(cost, axis=1).astype(np.int64)  # unassigned replicate states: nearest reference state
    mapping[rows] = cols
    return mapping, cost[np.arange(rep.shape[0]), mapping]


def match_by_names(reference: tuple[str, ...], replicate: tuple[str, ...]) -> NDArray[np.int64]:
    """Replicate state → the reference state of the same name (categorical and milestone states keep their names)."""
    pos = {n: i for i, n in enumerate(reference)}
    unknown = [n for n in replicate if n not in pos]
    if unknown:
        raise ValueError(f"replicate state {unknown[0]!r} is not a reference state; name matching needs states whose "
                         "names do not depend on the sample (categories, milestones) — use align='centroids' with "
                         "WardStates")
    return np.array([pos[n] for n in replicate], dtype=np.int64)


def match_by_exit_profile(reference_r_success: NDArray[np.float64],
                          replicate_r_success: NDArray[np.float64]) -> NDArray[np.int64]:
    """The authors' artifact alignment (parity only): greedy matching on |R⊕ᵇ_i − R⊕_j|, smallest gaps first.

    States with similar success exits are easily swapped, so this alignment adds label noise to the full bootstrap's
    intervals (part of the extra width the paper's study SS13 attributes to re-clustering). Unmatched replicate states
    go to the reference state with the closest R⊕.
    """
    ref = np.asarray(reference_r_success, dtype=np.float64)
    rep = np.asarray(replicate_r_success, dtype=np.float64)
    gap = np.abs(rep[:, None] - ref[None, :])
    order = np.argsort(gap, axis=None, kind="stable")
    mapping = np.full(rep.size, -1, dtype=np.int64)
    used = np.zeros(ref.size, dtype=bool)
    for flat in order:
        i, j = divmod(int(flat), ref.size)
        if mapping[i] < 0 and not used[j]:
            mapping[i] = j
            used[j] = True
    left = mapping < 0
    mapping[left] = np.argmin(gap[left], axis=1)
    return mapping
