"""An absorbing chain held as its non-zeros, with only what a Monte Carlo null asks of a refit: R(d) and R∞.

The timing layer's null refits an expanded family on every replicate (:func:`~tracetochain.models.evaluation
.timing_check`) and needs nothing of the refit but its success-time law F(d) = R(d)/R∞. An order-3 chain on 43
observed states compiles to 2,187 states with 43 successors each: as an :class:`~tracetochain.chain.AbsorbingChain`
it is a 38 MB dense Q, allocated, validated and scanned for its non-zeros on every replicate — more than half of a
replicate's cost, for a matrix whose 94,000 non-zeros the family had in hand. :class:`SparseChain` keeps those
non-zeros and answers with the same numerics as the dense chain (the sparse solver and sweep operator of
:mod:`tracetochain.numerics`, the same reachability search), so R(d) and R∞ agree with the dense chain's to rounding.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

from tracetochain.exceptions import ChainValidationError, NonAbsorbingError
from tracetochain.numerics.absorbing import ChainSolver, reachability_of_edges, success_absorption
from tracetochain.numerics.horizon import GrowingSweep, HorizonSweep, transposed_operator


@dataclass(frozen=True, eq=False)
class SparseChain:
    """Transitions ``weight[e]`` from ``source[e]`` to ``target[e]`` (duplicates add up), exits ``R_success`` /
    ``R_failure`` and start ``pi0``; rows are renormalised to sum to 1 (they do up to rounding) and π0 to a
    distribution, as :func:`~tracetochain.models._context.compiled_model` does for the dense chain."""

    n_states: int
    rows: NDArray[np.intp]
    cols: NDArray[np.intp]
    values: NDArray[np.float64]
    R_success: NDArray[np.float64]
    R_failure: NDArray[np.float64]
    pi0: NDArray[np.float64]

    @classmethod
    def from_transitions(cls, source: NDArray[np.int64], target: NDArray[np.int64], weight: NDArray[np.float64],
                         r_success: NDArray[np.float64], r_failure: NDArray[np.float64], pi0: NDArray[np.float64]
                         ) -> SparseChain:
        m = int(r_success.size)
        w = np.asarray(weight, dtype=np.float64)
        rs, rf, p0 = (np.asarray(x, dtype=np.float64) for x in (r_success, r_failure, pi0))
        if not (np.all(np.isfinite(w)) and np.all(np.isfinite(rs)) and np.all(np.isfinite(rf))
                and np.all(np.isfinite(p0))):
            raise ChainValidationError("the chain's transitions, exits and start must be finite")
        if (w < 0).any() or (rs < 0).any() or (rf < 0).any() or (p0 < 0).any() or p0.sum() <= 0:
            raise ChainValidationError("the chain's transitions, exits and start must be non-negative, with some start")
        keep = w > 0
        # duplicates (two contexts backing off to one) summed first, as the dense chain's np.add.at does, in CSR order
        key, where = np.unique(np.asarray(source, np.int64)[keep] * m + np.asarray(target, np.int64)[keep],
                               return_inverse=True)
        summed = np.bincount(where.ravel(), weights=w[keep], minlength=key.size)
        rows, cols = (key // m).astype(np.intp), (key % m).astype(np.intp)
        total = np.bincount(rows, weights=summed, minlength=m) + rs + rf
        if (total <= 0).any():
            raise ChainValidationError("every state of the chain needs a row with positive mass")
        out = cls(m, rows, cols, summed / total[rows], rs / total, rf / total, p0 / p0.sum())
        can_absorb = out._reach[0]
        if not can_absorb.all():
            stuck = tuple(f"s{i}" for i in np.flatnonzero(~can_absorb))
            raise NonAbsorbingError(f"absorption is impossible from {len(stuck)} state(s) of the chain: they form a "
                                    "closed loop with no path to success or failure, so I − Q is singular; give them "
                                    "an exit (fit with a pseudocount > 0) or remove them", stuck)
        return out

    @cached_property
    def _reach(self) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
        return reachability_of_edges(self.n_states, self.rows, self.cols, self.R_success, self.R_failure)

    @cached_property
    def _solver(self) -> ChainSolver:
        m = self.n_states
        off = self.rows != self.cols
        diag = np.bincount(self.rows[off], weights=self.values[off], minlength=m) + self.R_success + self.R_failure
        return ChainSolver.iterative(m, self.rows, self.cols, self.values, diag)

    @cached_property
    def success_probabilities(self) -> NDArray[np.float64]:
        """h = N R⊕ (as :attr:`AbsorbingChain.success_probabilities`)."""
        return success_absorption(self._solver, self.R_success, self._reach[1])

    @cached_property
    def r_inf(self) -> float:
        """R∞ = π0 N R⊕."""
        return float(self.pi0 @ self.success_probabilities)

    @cached_property
    def _growing_sweep(self) -> GrowingSweep:
        return GrowingSweep(transposed_operator(self.n_states, self.rows, self.cols, self.values), self.R_success,
                            self.R_failure, self.pi0, self.success_probabilities)

    def sweep(self, horizon: int) -> HorizonSweep:
        return self._growing_sweep.to(int(horizon))

    def reliability(self, horizon: int) -> NDArray[np.float64]:
        """R(d) for d = 0..horizon."""
        return self.sweep(horizon).reliability
