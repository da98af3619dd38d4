"""pass@k and pass^k from R∞ under i.i.d. trials (Tran-Truong & Le 2026, Thm 3).

pass^k = R∞^k (all k trials succeed); pass@k = 1 − (1 − R∞)^k (at least one succeeds). Under correlated trials
these are a lower and an upper bound respectively (Thm 4); the audit compares them with per-task estimates.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray


def _check_k(k: ArrayLike) -> NDArray[np.int64]:
    ks = np.atleast_1d(np.asarray(k))
    if ks.size == 0 or not np.issubdtype(ks.dtype, np.integer) or ks.min() < 1:
        raise ValueError(f"k must be a positive integer (or integers), got {k!r}")
    return ks.astype(np.int64)


def pass_hat_k(r_inf: float, k: ArrayLike) -> NDArray[np.float64]:
    """pass^k = R∞^k."""
    return np.power(float(r_inf), _check_k(k).astype(np.float64))


def pass_at_k(r_inf: float, k: ArrayLike) -> NDArray[np.float64]:
    """pass@k = 1 − (1 − R∞)^k, computed as −expm1(k·log1p(−R∞)) to keep accuracy when R∞ is tiny."""
    ks = _check_k(k).astype(np.float64)
    r = float(r_inf)
    if r >= 1.0:
        return np.ones_like(ks)
    out: NDArray[np.float64] = -np.expm1(ks * np.log1p(-r))
    return out
