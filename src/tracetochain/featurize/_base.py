"""What every featurizer returns: a feature matrix plus what clustering and naming need."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray


@dataclass(frozen=True, eq=False)
class Features:
    """Features of every step of a :class:`~tracetochain.TraceTable`, in table order.

    ``X`` (n_steps × p) is the matrix clustered by Ward. ``row_codes`` identifies identical rows with one integer
    each when the featurizer knows them (categorical features) — this is what makes exact Ward on unique rows
    cheap; ``None`` means "find the unique rows from X". ``descriptor`` / ``descriptor_names`` give every step a
    readable primary label (e.g. ``tool:search`` or ``EXECUTE``) used to name the discovered states.
    """

    X: NDArray[np.float64]
    feature_names: tuple[str, ...]
    descriptor: NDArray[np.int64]
    descriptor_names: tuple[str, ...]
    row_codes: NDArray[np.int64] | None = None

    @property
    def n_steps(self) -> int:
        return int(self.X.shape[0])


def mixed_radix(parts: Sequence[tuple[NDArray[np.int64], int]], n: int) -> NDArray[np.int64] | None:
    """One integer per row for several columns of small integer codes: Σ code_c · Π_{later c'} base_c', equal for
    two rows iff every code is (codes must lie in [0, base)). ``None`` when the product of the bases reaches 2⁶²,
    where the integer could overflow: the caller then compares the columns themselves.

    >>> mixed_radix([(np.array([0, 1, 1]), 2), (np.array([2, 0, 2]), 3)], 3).tolist()
    [2, 3, 5]
    """
    if float(np.prod([float(max(1, base)) for _, base in parts])) >= 2.0**62:
        return None
    code = np.zeros(n, np.int64)
    for values, base in parts:
        code = code * max(1, base) + values
    return code


def unique_rows(features: Features) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.int64]]:
    """(unique rows U, weights w, inverse) with U[inverse] == X: the exact deduplication behind weighted Ward."""
    X = features.X
    if features.row_codes is not None:
        _, first, inverse, counts = np.unique(features.row_codes, return_index=True, return_inverse=True,
                                              return_counts=True)
        return X[first], counts.astype(np.int64), inverse.astype(np.int64)
    Xc = np.ascontiguousarray(X)
    if Xc.shape[0] == 0:
        return Xc, np.zeros(0, np.int64), np.zeros(0, np.int64)
    # Sorting the raw bytes of each row is much faster than np.unique(axis=0) and exact.
    void = Xc.view(np.dtype((np.void, Xc.dtype.itemsize * Xc.shape[1]))).ravel()
    _, first, inverse, counts = np.unique(void, return_index=True, return_inverse=True, return_counts=True)
    return Xc[first], counts.astype(np.int64), inverse.astype(np.int64)
