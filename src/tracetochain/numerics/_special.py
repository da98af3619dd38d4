"""Small special functions the EM loops call thousands of times."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray


def logsumexp_rows(a: ArrayLike) -> NDArray[np.float64]:
    """log Σ_j exp(a_ij) for every row of a 2-d array, shifted by the row's maximum (the standard stable form); a
    row of −∞ gives −∞.

    ``scipy.special.logsumexp(a, axis=1)`` agrees to rounding, but its array-API dispatch costs ~0.3 ms a call
    against ~20 µs here, and the EM loops of the task-class and mixture families call it on every iteration of every
    refit (12 % of a task-class refit in the timing null).

    >>> logsumexp_rows([[0.0, 0.0], [-np.inf, -np.inf]]).round(6).tolist()
    [0.693147, -inf]
    """
    x = np.asarray(a, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"logsumexp_rows takes a 2-d array, got shape {x.shape}")
    if x.shape[1] == 0:
        return np.full(x.shape[0], -np.inf)
    top = x.max(axis=1)
    shift = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        out: NDArray[np.float64] = np.log(np.exp(x - shift[:, None]).sum(axis=1)) + shift
    return out
