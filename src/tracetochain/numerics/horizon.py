"""Horizon reliability R(d), first-passage laws and step budgets by one forward sweep.

R(d) = Pr[τ⊕ ≤ d] = s + π0 Σ_{t<d} Q^t r⊕ (Tran-Truong & Le 2026, Prop. 1; R(0) = s, R(1) = s + π0·r⊕), with s the
start exit to success (episodes that end before any step; 0 in the paper, and then R(0) = 0).
The sweep π_d = π_{d−1} Q costs one (sparse) mat-vec per step; the tail R∞ − R(d) = π_d · h is an exact sum of
non-negative terms (docs/numerics.md §4), so the reported residual is a rigorous error bound, not an estimate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse
from numpy.typing import NDArray

#: Dense Q with at least this many states and at most this density is swept as a CSR matrix.
_SPARSE_SWEEP_STATES = 128
_SPARSE_SWEEP_DENSITY = 0.2
#: Public names of the two thresholds above (callers that build Qᵀ from non-zeros they already have).
SPARSE_SWEEP_STATES, SPARSE_SWEEP_DENSITY = _SPARSE_SWEEP_STATES, _SPARSE_SWEEP_DENSITY
#: Most multiply-adds one step-budget sweep may spend (about ten seconds), and the fewest steps it always tries.
_SWEEP_WORK = 20_000_000_000
_MIN_BUDGET_SWEEP = 1_000


@dataclass(frozen=True)
class HorizonSweep:
    """Result of :func:`forward_sweep` for d = 0..horizon (index = d).

    ``reliability[d]`` = R(d); ``success_pmf[d]`` = Pr[τ⊕ = d] (at d = 0 the start exit s, episodes that end before
    any step); ``failure_pmf[d]`` likewise for ⊖;
    ``survival[d]`` = Pr[T > d] (still transient after d steps); ``residual[d]`` = R∞ − R(d) computed as π_d·h.
    """

    reliability: NDArray[np.float64]
    success_pmf: NDArray[np.float64]
    failure_pmf: NDArray[np.float64]
    survival: NDArray[np.float64]
    residual: NDArray[np.float64]


def sweep_operator(Q: NDArray[np.float64], edges: tuple[NDArray[np.intp], NDArray[np.intp]] | None = None
                   ) -> NDArray[np.float64] | scipy.sparse.csr_matrix:
    """Qᵀ in the cheaper format for repeated mat-vecs (build it once per chain: on a chain of a thousand expanded
    states the conversion costs more than a short sweep). ``edges``: Q's positive entries when the caller has them
    (:func:`~tracetochain.numerics.absorbing.chain_edges`)."""
    m = Q.shape[0]
    if m >= _SPARSE_SWEEP_STATES:
        rows, cols = edges if edges is not None else np.nonzero(Q)
        if rows.size <= _SPARSE_SWEEP_DENSITY * m * m:
            # Qᵀ from the non-zeros found once (csr_matrix(dense) scans the m × m array again)
            return transposed_operator(m, rows, cols, Q[rows, cols])
    return np.ascontiguousarray(Q.T)


def transposed_operator(m: int, rows: NDArray[np.intp], cols: NDArray[np.intp], values: NDArray[np.float64]
                        ) -> scipy.sparse.csr_matrix:
    """Qᵀ as a CSR matrix from Q's positive entries ``values`` at (``rows``, ``cols``)."""
    return scipy.sparse.csr_matrix((values, (cols, rows)), shape=(m, m))


_sweep_operator = sweep_operator


def forward_sweep(
    Q: NDArray[np.float64] | None,
    r_success: NDArray[np.float64],
    r_failure: NDArray[np.float64],
    pi0: NDArray[np.float64],
    horizon: int,
    h: NDArray[np.float64],
    start_exits: NDArray[np.float64] | None = None,
    op: NDArray[np.float64] | scipy.sparse.csr_matrix | None = None,
) -> HorizonSweep:
    """Sweep d = 1..horizon: f⊕(d) = π_{d−1}·r⊕, f⊖(d) = π_{d−1}·r⊖, π_d = π_{d−1} Q (docs/numerics.md §4).

    ``h`` is the success-absorption vector N r⊕ (from :class:`ChainSolver`), used for the exact tail.
    ``start_exits`` (s, f): the episodes that end before any step, f⊕(0) = s and f⊖(0) = f (π0 is then a
    sub-distribution, π0·1 = 1 − s − f); the tail R∞ − R(d) = π_d·h is unchanged. ``op``: Qᵀ as
    :func:`sweep_operator` builds it, when the caller sweeps one chain several times (``Q`` may then be None: a
    chain held as its non-zeros has no m × m array). A chain swept to several horizons keeps a
    :class:`GrowingSweep` instead, which continues where its last sweep stopped.
    """
    if horizon < 0:
        raise ValueError(f"horizon must be >= 0, got {horizon}")
    if op is None:
        if Q is None:
            raise ValueError("forward_sweep needs Q or its sweep operator op")
        op = sweep_operator(Q)
    return GrowingSweep(op, r_success, r_failure, pi0, h, start_exits).to(horizon)


class GrowingSweep:
    """The forward sweep of one chain, kept with its last π_d so that a longer horizon continues from there.

    A chain's step budget, median and reliability curve each sweep from d = 0 (the step budget by sweeps of 64,
    256, 1,024 … steps until the tail is small enough): on a compiled chain of 2,187 expanded states those repeated
    sweeps were half the cost of a refit's metrics. The values are those of one sweep to the longest horizon asked
    for (the same operations in the same order, so bit for bit those of :func:`forward_sweep` with that horizon).
    """

    def __init__(self, op: NDArray[np.float64] | scipy.sparse.csr_matrix, r_success: NDArray[np.float64],
                 r_failure: NDArray[np.float64], pi0: NDArray[np.float64], h: NDArray[np.float64],
                 start_exits: NDArray[np.float64] | None = None) -> None:
        self._op, self._rs, self._rf, self._h = op, r_success, r_failure, h
        self._pi = np.asarray(pi0, dtype=np.float64).copy()  # π_d at d = self._done
        self._done = 0
        size = 65
        self._fs, self._ff, self._surv, self._resid = (np.zeros(size) for _ in range(4))
        if start_exits is not None:
            self._fs[0], self._ff[0] = float(start_exits[0]), float(start_exits[1])
        self._surv[0] = self._pi.sum()
        self._resid[0] = self._pi @ h

    def _grow(self, horizon: int) -> None:
        n = horizon + 1
        if n > self._fs.size:
            size = max(n, 2 * self._fs.size)
            self._fs, self._ff, self._surv, self._resid = (
                np.concatenate([a, np.zeros(size - a.size)]) for a in (self._fs, self._ff, self._surv, self._resid))
        fs, ff, surv, resid = self._fs, self._ff, self._surv, self._resid
        op, rs, rf, h, pi = self._op, self._rs, self._rf, self._h, self._pi
        for d in range(self._done + 1, n):
            fs[d] = pi @ rs
            ff[d] = pi @ rf
            pi = op @ pi
            surv[d] = pi.sum()
            resid[d] = pi @ h
        self._pi, self._done = pi, max(self._done, horizon)

    def to(self, horizon: int) -> HorizonSweep:
        """The sweep d = 0..horizon (continued from the longest one so far when it is longer)."""
        if horizon < 0:
            raise ValueError(f"horizon must be >= 0, got {horizon}")
        if horizon > self._done:
            self._grow(horizon)
        n = horizon + 1
        return HorizonSweep(np.cumsum(self._fs[:n]), self._fs[:n].copy(), self._ff[:n].copy(),
                            np.clip(self._surv[:n], 0.0, None), np.clip(self._resid[:n], 0.0, None))


#: Chains (and strongly connected components) up to this many states get ρ from dense eigenvalues; above it, from
#: their components and ARPACK (:func:`spectral_radius`).
DENSE_EIGVALS_STATES = 256


def spectral_radius(Q: NDArray[np.float64], edges: tuple[NDArray[np.intp], NDArray[np.intp]] | None = None) -> float:
    """ρ(Q), the Perron root: the geometric rate at which the survival Pr[T > d] decays (docs/numerics.md §4).

    Q ≥ 0, so ρ(Q) = max over the strongly connected components C of the transition graph of ρ(Q[C, C])
    (Frobenius normal form: Q is permutation-similar to a block-triangular matrix with those diagonal blocks; Horn &
    Johnson, *Matrix Analysis*, §8.3). Above :data:`DENSE_EIGVALS_STATES` states the components are found first: a
    chain without cycles (an all-zero or nilpotent Q, e.g. states labelled by position) has ρ = 0 exactly, a single
    state contributes its self-loop Q[i, i], a small component is solved densely, and a large one — irreducible, so
    its Perron root is a simple eigenvalue of largest modulus with a positive eigenvector — by ARPACK's ``eigs``
    started from the all-ones vector (positive, so never orthogonal to the Perron vector, and the same start on every
    call, so the result does not depend on what ran before); the dense solve is the fallback. ARPACK fails on exactly
    the matrices the components remove ("starting vector is zero", no convergence). A model with task classes
    compiles to C disjoint copies of its chain: the refits behind its intervals spent most of their metrics here (a
    1,008-state demo model: 56 ms dense on its three 328-state components, 9 ms by ARPACK, agreeing to 2e-16).
    ``edges``: Q's positive entries when the caller has them (:func:`~tracetochain.numerics.absorbing.chain_edges`;
    the graph and the blocks are then built from them).
    """
    m = Q.shape[0]
    if m <= DENSE_EIGVALS_STATES:
        return float(np.max(np.abs(np.linalg.eigvals(Q)))) if m else 0.0
    from scipy.sparse.csgraph import connected_components

    if edges is not None:
        graph = scipy.sparse.csr_matrix((Q[edges], edges), shape=(m, m))
        graph.sort_indices()
    else:
        graph = scipy.sparse.csr_matrix(Q)
    graph.eliminate_zeros()
    if graph.nnz == 0:
        return 0.0
    n_comp, labels = connected_components(graph, directed=True, connection="strong")
    sizes = np.bincount(labels, minlength=n_comp)
    diag = np.abs(np.diag(Q))
    single = sizes[labels] == 1
    rho = float(diag[single].max()) if single.any() else 0.0
    for c in np.flatnonzero(sizes > 1):
        idx = np.flatnonzero(labels == c)
        value: float | None = None
        if idx.size > DENSE_EIGVALS_STATES:  # irreducible: ARPACK usually converges; the dense solve is the fallback
            from scipy.sparse.linalg import ArpackError, ArpackNoConvergence, eigs

            try:
                # the block sliced from the sparse graph (no dense m × m copy and scan)
                vals = eigs(graph[idx][:, idx], k=1, which="LM", return_eigenvectors=False,
                            v0=np.ones(idx.size))
                value = float(np.abs(vals[0]))
            except (ArpackError, ArpackNoConvergence):
                value = None
        if value is None:
            value = float(np.max(np.abs(np.linalg.eigvals(Q[np.ix_(idx, idx)]))))
        rho = max(rho, value)
    return rho


@dataclass(frozen=True)
class StepBudget:
    """Smallest step budget d with R∞ − R(d) ≤ δ (Tran-Truong & Le 2026, Prop. 8).

    ``exact`` comes from the forward sweep's exact residual π_d·h (assumption-free). ``bound`` is Prop. 8's
    d*(δ) = ⌈log(κ∞(V) ‖N r⊕‖∞ / δ) / (−log ρ)⌉ with κ∞(V) = ‖V‖∞‖V⁻¹‖∞ *computed* from the eigenvectors (the
    artifact silently takes κ = 1, valid only for normal Q); it is ``None`` when Q is numerically not
    diagonalizable (then only ``exact`` is meaningful). ``exact`` is ``None`` if not reached within ``max_horizon``
    steps — capped at 2·10¹⁰ / nnz(Q) steps (at least 1,000), so the sweep's work stays bounded.
    """

    delta: float
    exact: int | None
    bound: int | None
    spectral_radius: float
    kappa: float | None
    diagonalizable: bool


def step_budget(
    Q: NDArray[np.float64],
    r_success: NDArray[np.float64],
    r_failure: NDArray[np.float64],
    pi0: NDArray[np.float64],
    h: NDArray[np.float64],
    delta: float,
    max_horizon: int = 100_000,
) -> StepBudget:
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    rho = spectral_radius(Q)
    # The sweep costs one mat-vec (nnz(Q) multiply-adds) per step: cap the steps so that a large, slowly mixing
    # chain (thousands of states, ρ near 1) answers "not reached" in seconds instead of sweeping for minutes.
    nnz = int(np.count_nonzero(Q)) if Q.size else 0
    max_horizon = min(max_horizon, max(_MIN_BUDGET_SWEEP, _SWEEP_WORK // max(nnz, 1)))
    # Exact: sweep in growing blocks until the residual falls below delta.
    exact: int | None = None
    horizon = 64
    while exact is None and horizon <= 2 * max_horizon:
        sweep = forward_sweep(Q, r_success, r_failure, pi0, min(horizon, max_horizon), h)
        hit = np.flatnonzero(sweep.residual <= delta)
        if hit.size:
            exact = int(hit[0])
        elif horizon >= max_horizon:
            break
        horizon *= 4
    # Prop. 8 bound with κ∞(V) computed.
    kappa: float | None = None
    bound: int | None = None
    diagonalizable = False
    h_norm = float(np.max(np.abs(h))) if h.size else 0.0
    if Q.shape[0] <= 600:
        _, V = np.linalg.eig(Q)
        cond = np.linalg.cond(V) if V.size else 1.0
        diagonalizable = bool(np.isfinite(cond) and cond < 1e10)
        if diagonalizable:
            Vinv = np.linalg.inv(V)
            kappa = float(np.linalg.norm(V, np.inf) * np.linalg.norm(Vinv, np.inf))
            if 0.0 < rho < 1.0 and h_norm > 0.0:
                bound = max(0, math.ceil(math.log(kappa * h_norm / delta) / (-math.log(rho))))
            # ρ = 0 (nilpotent Q) or h = 0: the bound's logarithm is undefined; ``exact`` still answers.
    return StepBudget(delta, exact, bound, rho, kappa, diagonalizable)
