"""The observed reliability curve of a set of traces, from counts (one implementation for every caller)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray


def empirical_rdc_from_counts(success_length_counts: ArrayLike, n_traces: int, horizon: int) -> NDArray[np.float64]:
    """R̂(d) = #{traces that succeeded within d steps} / #{traces}, d = 0..horizon.

    ``success_length_counts[L]`` is the number of successful traces of length L (length 0: episodes that succeeded
    before any step; lengths beyond the array count as never within the horizon); ``n_traces`` counts every usable
    trace — failed and censored ones stay in the denominator, as in the held-out check of Tran-Truong & Le (2026),
    study SS9. No traces give a curve of zeros.

    >>> empirical_rdc_from_counts([0, 2, 1, 1], 8, 5).tolist()
    [0.0, 0.25, 0.375, 0.5, 0.5, 0.5]
    """
    if horizon < 0:
        raise ValueError(f"horizon must be >= 0, got {horizon}")
    counts = np.zeros(horizon + 1, np.int64)
    given = np.asarray(success_length_counts, dtype=np.int64).reshape(-1)[: horizon + 1]
    counts[: given.size] = given
    out: NDArray[np.float64] = np.cumsum(counts) / max(1, int(n_traces))
    return out
