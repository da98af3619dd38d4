"""Fundamental-matrix quantities of an absorbing chain, from one factorization of I − Q.

References: Kemeny & Snell, *Finite Markov Chains* (1960) ch. III; Tran-Truong & Le (2026), Prop. 1;
docs/numerics.md §2–§3.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import scipy.linalg
import scipy.sparse
from numpy.typing import NDArray

if TYPE_CHECKING:
    import scipy.sparse.linalg

from tracetochain.exceptions import IllConditionedWarning
from tracetochain.numerics._checks import clip_probabilities

#: Above this many states the solves are sparse: iterative first, a sparse LU (SuperLU) when the iteration fails.
SPARSE_THRESHOLD = 400
#: Relative residual ‖b − A x‖ ≤ rtol·‖b‖ an iterative solve must reach to be kept (else the LU decides). At 1e-15
#: the solution agrees with the dense LU's to ~1e-13 relative on chains with retry loops near 1 (tests).
ITERATIVE_RTOL = 1e-15
#: Iterations an iterative solve may take before the LU takes over (a compiled order-3 chain of 2,187 states
#: converges in ~20; a retry-heavy chain with self-loops near 1, Jacobi-preconditioned, in ~10).
ITERATIVE_MAXITER = 1000


def absorbing_reachability(
    Q: NDArray[np.float64], r_success: NDArray[np.float64], r_failure: NDArray[np.float64],
    edges: tuple[NDArray[np.intp], NDArray[np.intp]] | None = None,
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """Graph analysis before any solve (the prob0 precomputation of PRISM/Storm; docs/numerics.md §2).

    Returns ``(can_absorb, can_succeed)``: boolean masks of states from which some path reaches an exit
    (success or failure), and from which some path reaches success. States with ``can_absorb`` false form
    closed loops that make I − Q singular; states with ``can_succeed`` false have success probability exactly 0.
    ``edges``: the (rows, cols) of Q's positive entries when the caller has them (:func:`chain_edges`).
    """
    m = Q.shape[0]
    rows, cols = edges if edges is not None else chain_edges(Q)  # found once for both searches
    return reachability_of_edges(m, rows, cols, r_success, r_failure)


def reachability_of_edges(m: int, rows: NDArray[np.intp], cols: NDArray[np.intp], r_success: NDArray[np.float64],
                          r_failure: NDArray[np.float64]) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """:func:`absorbing_reachability` of a chain given by the (rows, cols) of its positive transitions (a chain held
    as its non-zeros, never as an m × m array)."""

    def reaches(exit_mask: NDArray[np.bool_]) -> NDArray[np.bool_]:
        # Reverse graph plus a sink node m: i → m when i exits. BFS from the sink over reversed edges.
        ex = np.flatnonzero(exit_mask)
        src = np.concatenate([cols, np.full(ex.size, m)])  # reversed: target → source
        dst = np.concatenate([rows, ex])
        return _reached_from(m, src, dst, m + 1)[:m]

    return reaches((r_success + r_failure) > 0), reaches(r_success > 0)


def chain_edges(Q: NDArray[np.float64]) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """(rows, cols) of the positive entries of Q: one scan of the m × m array, shared by the graph search, the
    sparse solver and the sweep operator of a chain (each O(m²) scan of a 2,187-state Q costs ~15 ms)."""
    rows, cols = np.nonzero(Q > 0)
    return rows, cols


def _reached_from(start: int, src: NDArray[np.intp], dst: NDArray[np.intp], n: int) -> NDArray[np.bool_]:
    """Nodes reachable from ``start`` over the edges src → dst: a breadth-first search level by level on the dense
    boolean adjacency matrix (each node's row is read once, O(n²) like Q itself). Faster than building a sparse
    graph for ``scipy.sparse.csgraph`` (8 µs against 430 µs on a 6-state chain, 0.7 ms against 1.2 ms on 300
    states), and it keeps ``scipy.sparse.csgraph`` (~0.1 s of start-up) off every command's path."""
    adjacency = np.zeros((n, n), dtype=bool)
    adjacency[src, dst] = True
    seen = np.zeros(n, dtype=bool)
    seen[start] = True
    frontier = seen.copy()
    while True:
        new = adjacency[frontier].any(axis=0) & ~seen
        if not new.any():
            return seen
        seen |= new
        frontier = new


@dataclass(frozen=True, eq=False)
class ChainSolver:
    """Solves with A = I − Q, the matrix built once and reused for every solve (solve, never invert;
    docs/numerics.md §2).

    The diagonal is built subtraction-free (GTH style): A_ii = Σ_{j≠i} Q_ij + r⊕_i + r⊖_i rather than 1 − Q_ii,
    so retry self-loops with Q_ii ≈ 1 keep full relative accuracy. Up to :data:`SPARSE_THRESHOLD` states: one dense
    LAPACK LU. Above: each right-hand side by Jacobi-preconditioned BiCGSTAB (van der Vorst 1992) to a relative
    residual of :data:`ITERATIVE_RTOL`, and SuperLU, factored on first need, for any solve the iteration does not
    finish within :data:`ITERATIVE_MAXITER` — expanded chains (order-3 contexts of 43 observed states: 2,187 states,
    43 successors each) fill their LU factors to ~15× their non-zeros, so the factorization cost 30× the iterative
    solves (docs/numerics.md §2). Every solve is followed by a residual check.
    """

    m: int
    _dense: tuple[NDArray[np.float64], NDArray[np.int32]] | None
    _A: NDArray[np.float64] | scipy.sparse.csr_matrix
    _diag: NDArray[np.float64] | None = None
    _lu: dict[str, scipy.sparse.linalg.SuperLU] = field(default_factory=dict, repr=False)

    @classmethod
    def factor(
        cls, Q: NDArray[np.float64], r_success: NDArray[np.float64], r_failure: NDArray[np.float64],
        edges: tuple[NDArray[np.intp], NDArray[np.intp]] | None = None,
    ) -> ChainSolver:
        """Build (and below :data:`SPARSE_THRESHOLD` states factor) I − Q. The caller must have checked
        (``absorbing_reachability``) that every state can exit. ``edges``: Q's positive entries
        (:func:`chain_edges`), when the caller has them."""
        m = Q.shape[0]
        offdiag = Q.sum(axis=1) - np.diag(Q)
        diag = offdiag + r_success + r_failure
        if m > SPARSE_THRESHOLD:
            rows, cols = edges if edges is not None else chain_edges(Q)
            return cls.iterative(m, rows, cols, Q[rows, cols], diag)
        A = -np.array(Q, dtype=np.float64)
        np.fill_diagonal(A, diag)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", scipy.linalg.LinAlgWarning)
            lu = scipy.linalg.lu_factor(A, check_finite=False)
        return cls(m, lu, A)

    @classmethod
    def iterative(cls, m: int, rows: NDArray[np.intp], cols: NDArray[np.intp], values: NDArray[np.float64],
                  diag: NDArray[np.float64]) -> ChainSolver:
        """The large-chain solver (BiCGSTAB, SuperLU on need) of the chain whose positive transitions are
        ``values`` at (``rows``, ``cols``), with the subtraction-free diagonal ``diag`` of I − Q."""
        # −Q off the diagonal and the diagonal, assembled from the non-zeros in one pass (a LIL round trip cost more
        # than the factorization on chains of a thousand expanded states)
        off = rows != cols
        rows, cols = rows[off], cols[off]
        idx = np.arange(m)
        A_csr = scipy.sparse.csr_matrix(
            (np.concatenate([-values[off], diag]), (np.concatenate([rows, idx]), np.concatenate([cols, idx]))),
            shape=(m, m))
        A_csr.sort_indices()
        return cls(m, None, A_csr, diag)

    def _superlu(self) -> scipy.sparse.linalg.SuperLU:
        if "lu" not in self._lu:
            from scipy.sparse.linalg import splu  # imported here: only large chains whose iteration fails use it

            self._lu["lu"] = splu(scipy.sparse.csc_matrix(self._A))
        return self._lu["lu"]

    def _iterate(self, b: NDArray[np.float64], transposed: bool) -> NDArray[np.float64] | None:
        """One right-hand side by preconditioned BiCGSTAB; None when it does not converge to ITERATIVE_RTOL."""
        from scipy.sparse.linalg import LinearOperator, bicgstab

        assert self._diag is not None
        if not np.any(b):
            return np.zeros(self.m)
        diag = self._diag
        A = self._A.T if transposed else self._A
        jacobi = LinearOperator((self.m, self.m), matvec=lambda v: v / diag, dtype=np.float64)
        x, info = bicgstab(A, b, rtol=ITERATIVE_RTOL, atol=0.0, maxiter=ITERATIVE_MAXITER, M=jacobi)
        return np.asarray(x, dtype=np.float64) if info == 0 and np.all(np.isfinite(x)) else None

    def _sparse_solve(self, b: NDArray[np.float64], transposed: bool) -> NDArray[np.float64]:
        cols = b[:, None] if b.ndim == 1 else b
        out = np.empty(cols.shape)
        for j in range(cols.shape[1]):
            x = self._iterate(np.ascontiguousarray(cols[:, j]), transposed)
            out[:, j] = x if x is not None else self._superlu().solve(cols[:, j], trans="T" if transposed else "N")
        return out[:, 0] if b.ndim == 1 else out

    def solve(self, b: NDArray[np.float64], *, transposed: bool = False) -> NDArray[np.float64]:
        """Solve A x = b (or Aᵀ x = b). ``b`` may be a vector or an (m, k) block of right-hand sides."""
        if self._dense is None:
            x = self._sparse_solve(np.asarray(b, dtype=np.float64), transposed)
        else:
            x = scipy.linalg.lu_solve(self._dense, b, trans=1 if transposed else 0, check_finite=False)
        A = self._A.T if transposed else self._A
        resid = np.max(np.abs(A @ x - b)) if np.size(b) else 0.0
        scale = max(1.0, float(np.max(np.abs(x))) if np.size(x) else 1.0)
        if resid > 1e-8 * scale:
            warnings.warn(
                f"linear solve residual {resid:.2e} is large: the chain is nearly non-absorbing "
                "(spectral radius close to 1); results may be inaccurate",
                IllConditionedWarning,
                stacklevel=2,
            )
        return np.asarray(x, dtype=np.float64)


def success_absorption(solver: ChainSolver, r_success: NDArray[np.float64], can_succeed: NDArray[np.bool_]
                       ) -> NDArray[np.float64]:
    """h = N R⊕, the probability of eventually succeeding from each state: exactly 0 where no path reaches success
    (``can_succeed`` of :func:`absorbing_reachability`), clipped to [0, 1] against the solve's rounding."""
    h = solver.solve(r_success)
    h[~can_succeed] = 0.0
    return clip_probabilities(h, "success probability")


def mean_steps(solver: ChainSolver) -> NDArray[np.float64]:
    """t = N 1: expected steps to absorption from each state (Kemeny–Snell Thm 3.3.5; MTTA = π0·t)."""
    return solver.solve(np.ones(solver.m))


def steps_variance(solver: ChainSolver, t: NDArray[np.float64]) -> NDArray[np.float64]:
    """Var of steps to absorption from each state: τ₂ = (2N − I) t − t∘t (Kemeny–Snell Thm 3.3.5)."""
    var = 2.0 * solver.solve(t) - t - t * t
    return np.clip(var, 0.0, None)


def conditional_mean_steps(z: NDArray[np.float64], h: NDArray[np.float64], p: float) -> float:
    """E[T | outcome] = π0 N² r / p = (z · h) / p, with h = N r, z = Nᵀ π0 and p the outcome's probability (first-step
    analysis): π0·h, plus the start exit to that outcome (episodes that end before any step take 0 steps)."""
    return float(z @ h) / p


def failure_attribution(z: NDArray[np.float64], r_failure: NDArray[np.float64],
                        start_failure: float = 0.0) -> NDArray[np.float64]:
    """Share of failures that leave from each state: z_i r⊖_i / (f + Σ_j z_j r⊖_j), with f the start exit to failure
    (episodes that fail before any step; exact: f + Σ z_i r⊖_i = 1 − R∞). The shares sum to 1 − f / (1 − R∞)."""
    flows = z * r_failure
    total = flows.sum() + start_failure
    return flows / total if total > 0 else np.zeros_like(flows)
