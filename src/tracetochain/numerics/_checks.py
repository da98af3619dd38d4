"""Validation at the entry of public numerics: the single place that checks chain arrays and π0."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from tracetochain.exceptions import ChainValidationError

#: Absolute tolerance on row sums Q·1 + r⊕ + r⊖ = 1 and on negative entries.
ROW_SUM_ATOL = 1e-9


def ensure_chain_arrays(
    Q: ArrayLike, r_success: ArrayLike, r_failure: ArrayLike, names: tuple[str, ...] | None = None, *,
    copy: bool = True,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Return float64 copies of (Q, r⊕, r⊖) after checking shapes, finiteness, signs and row sums — or, with
    ``copy=False``, the arrays themselves when they are float64 already (a tiny negative entry is then clipped in
    place: for arrays the caller owns and hands over).

    Raises :class:`ChainValidationError` naming the first offending state (by name when ``names`` is given).
    """
    as_float = np.array if copy else np.asarray
    Qa = as_float(Q, dtype=np.float64)
    rs = as_float(r_success, dtype=np.float64).reshape(-1)
    rf = as_float(r_failure, dtype=np.float64).reshape(-1)
    if Qa.ndim != 2 or Qa.shape[0] != Qa.shape[1]:
        raise ChainValidationError(f"Q must be a square matrix, got shape {Qa.shape}")
    m = Qa.shape[0]
    if m == 0:
        raise ChainValidationError("the chain has no transient states")
    if rs.shape != (m,) or rf.shape != (m,):
        raise ChainValidationError(
            f"R_success and R_failure must have length {m} (one entry per state), got {rs.shape[0]} and {rf.shape[0]}"
        )

    def label(i: int) -> str:
        return repr(names[i]) if names is not None else f"#{i}"

    # Few passes over Q (a compiled chain of 2,187 expanded states has a 38 MB Q, and refits build them by the
    # thousand): a NaN or infinity makes its row sum non-finite, so the entries are searched only then, and the clip
    # runs only when an entry is negative (the row sums are then taken again, after it).
    rows = Qa.sum(axis=1) + rs + rf
    finite = bool(np.all(np.isfinite(rows)))
    clipped = False
    for arr, what in ((Qa, "Q"), (rs, "R_success"), (rf, "R_failure")):
        if not finite and not np.all(np.isfinite(arr)):
            where = np.unravel_index(int(np.flatnonzero(~np.isfinite(arr))[0]), arr.shape)
            raise ChainValidationError(
                f"{what} has a NaN or infinite entry in the row of state {label(int(where[0]))}"
            )
        low = arr.min() if arr.size else 0.0
        if low < -ROW_SUM_ATOL:
            idx = np.unravel_index(int(np.argmin(arr)), arr.shape)
            raise ChainValidationError(
                f"{what} has a negative entry {arr[idx]:.3g} in row of state {label(int(idx[0]))}"
            )
        if low < 0.0:
            np.clip(arr, 0.0, None, out=arr)
            clipped = True
    if clipped or not finite:
        rows = Qa.sum(axis=1) + rs + rf
    bad = np.flatnonzero(np.abs(rows - 1.0) > ROW_SUM_ATOL)
    if bad.size:
        i = int(bad[0])
        raise ChainValidationError(
            f"row of state {label(i)} sums to {rows[i]:.12g}, not 1 (Q·1 + R_success + R_failure must equal 1 "
            f"in every row; {bad.size} row(s) affected)"
        )
    return Qa, rs, rf


def as_start_exits(start_exits: ArrayLike | None) -> NDArray[np.float64]:
    """The start exits (s, f): the probabilities that an episode ends in success / failure before any step."""
    if start_exits is None:
        return np.zeros(2)
    e = np.array(start_exits, dtype=np.float64).reshape(-1)
    if e.shape != (2,):
        raise ChainValidationError(f"start_exits must be two probabilities (success, failure before any step), got "
                                   f"{e.shape[0]} value(s)")
    if not np.all(np.isfinite(e)) or e.min() < -ROW_SUM_ATOL:
        raise ChainValidationError(f"start_exits must be finite and non-negative, got {e.tolist()}")
    out: NDArray[np.float64] = np.clip(e, 0.0, None)
    if out.sum() > 1.0 + ROW_SUM_ATOL:
        raise ChainValidationError(f"start_exits sum to {out.sum():.12g}: at most every episode can end before a "
                                   "step (the sum must be <= 1)")
    return out


def as_initial_distribution(pi0: ArrayLike | int, m: int,
                            start_exits: NDArray[np.float64] | None = None) -> NDArray[np.float64]:
    """The single s0/π0 helper: an int is a start state (e_{s0}); a vector must be a distribution over m states.

    With start exits (s, f) (episodes that end before any step, :func:`as_start_exits`) π0 is a sub-distribution:
    π0·1 + s + f = 1. An int then puts the remaining mass 1 − s − f on that state.
    """
    mass = 1.0 if start_exits is None or not start_exits.any() else 1.0 - float(start_exits.sum())
    if isinstance(pi0, (int, np.integer)):
        if not 0 <= int(pi0) < m:
            raise ChainValidationError(f"start state {pi0} is out of range for {m} states")
        out = np.zeros(m)
        out[int(pi0)] = mass
        return out
    p = np.array(pi0, dtype=np.float64).reshape(-1)
    if p.shape != (m,):
        raise ChainValidationError(f"pi0 must have length {m}, got {p.shape[0]}")
    if not np.all(np.isfinite(p)) or p.min() < -ROW_SUM_ATOL:
        raise ChainValidationError("pi0 must be finite and non-negative")
    total = p.sum()
    if mass == 1.0:
        if abs(total - 1.0) > ROW_SUM_ATOL:
            raise ChainValidationError(f"pi0 sums to {total:.12g}, not 1")
        dist: NDArray[np.float64] = np.clip(p, 0.0, None)
        # Renormalise only beyond rounding noise, so that saving and reloading a chain keeps π0 bit for bit.
        return dist if abs(dist.sum() - 1.0) <= 1e-12 else dist / dist.sum()
    assert start_exits is not None
    s, f = (float(x) for x in start_exits)
    if abs(total + s + f - 1.0) > ROW_SUM_ATOL:
        raise ChainValidationError(
            f"pi0 sums to {total:.12g} and the start exits to {s + f:.12g} (success {s:.6g}, failure {f:.6g}): "
            "together they must be 1 (pi0 holds the episodes that take a first step, the start exits those that end "
            "before any step)")
    dist = np.clip(p, 0.0, None)
    if abs(dist.sum() - mass) <= 1e-12 or dist.sum() <= 0.0:
        return dist
    scaled: NDArray[np.float64] = dist * (mass / dist.sum())
    return scaled


def clip_probabilities(x: NDArray[np.float64], what: str, atol: float = 1e-10) -> NDArray[np.float64]:
    """Clip solved probabilities into [0, 1], but only within ``atol``: larger violations are bugs, not noise."""
    if x.size and (x.min() < -atol or x.max() > 1 + atol):
        raise ChainValidationError(
            f"{what} left [0, 1] by more than {atol:g} (min {x.min():.3g}, max {x.max():.3g}); "
            "the chain is too ill-conditioned for a reliable solve"
        )
    return np.clip(x, 0.0, 1.0)
