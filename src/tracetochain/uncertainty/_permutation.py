r"""A permutation test of ΔR∞ between two trace sets: exact size under "one agent", whatever the censoring.

``compare`` reads a difference in eventual success from ΔR∞'s interval, built from two independent ensembles
(posterior draws or bootstrap replicates). That interval is right to first order, but its exclusion rate on two
samples of one agent is the interval's coverage error plus the draws' own Monte Carlo error: on 500 traces a side
with 28 % of traces cut between steps it excluded 0 in about 6 % of pairs at a 95 % level. A permutation test has
no such slack. Under the null hypothesis that A and B are samples of one agent, the traces are exchangeable between
the sets, so relabelling them at random and recomputing the statistic draws from its exact null law (Fisher 1935;
Pitman 1937), conditionally on the pooled traces:

    T = |R∞(chain of B) − R∞(chain of A)|,     p = (1 + #{b : T*_b ≥ T}) / (B + 1),

with T*_b the statistic of the b-th relabelling and the chains estimated by the estimator's own row formula
(:func:`~tracetochain.uncertainty.shared.estimate_batch`, so the identity relabelling gives ``compare``'s chains).
P(p ≤ α) ≤ α for every B (the observed labelling is one of B + 1 exchangeable draws), censoring included: a trace
keeps its own cut, so nothing is assumed about how traces are censored. Relabelling keeps each set's size, and what
may be exchanged respects repeated trials:

* a task run on both sides: its traces are relabelled among themselves (a stratum; each side keeps its number of
  that task's trials);
* everything else — tasks run on one side only, traces without a task — is relabelled whole: a task's trials move
  together (tasks of one population, each set keeping its number of tasks), a trace without a task alone.

Zero-step episodes are traces of length 0 (their start exits are the last two columns of the count layout). The
relabellings are drawn from ``seed`` on the traces sorted by (task, id hash), so every engine and partitioning gives
the same p-value.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    import scipy.sparse

    from tracetochain.chain import ChainPrior

#: Relabellings of a permutation test (B): the smallest p-value is 1 / (B + 1) = 0.005.
PERMUTATIONS = 199
_BLOCK = 32  # relabellings per sparse product (bounds the n_traces × block label matrix)
#: Distinguishes this test's random stream from the other seeded draws of the library.
_STREAM = 0x5045524D  # "PERM"


@dataclass(frozen=True, eq=False)
class TraceVectors:
    """Each usable trace's count vector in the layout m² + 3m + 2 (``chain.per_trace_counts`` then the zero-step
    start exits), with the hash of its id and of its task (``has_task`` False: no task). Adds up over partitions;
    :meth:`ordered` sorts it by (task, id), the order the relabellings are drawn in."""

    trace_hash: NDArray[np.uint64]
    task_hash: NDArray[np.uint64]
    has_task: NDArray[np.bool_]
    counts: scipy.sparse.csr_matrix

    @staticmethod
    def build(trace_hash: NDArray[np.uint64], task_hash: NDArray[np.uint64], has_task: NDArray[np.bool_],
              counts: Any) -> TraceVectors:
        import scipy.sparse

        return TraceVectors(np.asarray(trace_hash, np.uint64), np.asarray(task_hash, np.uint64),
                            np.asarray(has_task, bool), scipy.sparse.csr_matrix(counts, dtype=np.float64))

    @property
    def n(self) -> int:
        return int(self.trace_hash.size)

    def merge(self, other: TraceVectors) -> TraceVectors:
        import scipy.sparse

        return TraceVectors(np.concatenate([self.trace_hash, other.trace_hash]),
                            np.concatenate([self.task_hash, other.task_hash]),
                            np.concatenate([self.has_task, other.has_task]),
                            scipy.sparse.vstack([self.counts, other.counts]).tocsr())

    def reindexed(self, idx: NDArray[np.int64], M: int) -> TraceVectors:
        """Columns moved to the vocabulary of M states (``idx[old] = new``); the start exits stay last."""
        import scipy.sparse

        from tracetochain.uncertainty._design import layout_columns

        coo = self.counts.tocoo()
        col_map = np.concatenate([layout_columns(idx, M), [M * M + 3 * M, M * M + 3 * M + 1]])
        return TraceVectors(self.trace_hash, self.task_hash, self.has_task,
                            scipy.sparse.csr_matrix((coo.data, (coo.row, col_map[coo.col])),
                                                    shape=(self.n, M * M + 3 * M + 2)))

    def ordered(self) -> TraceVectors:
        order = np.lexsort((self.trace_hash, self.task_hash, ~self.has_task))
        return TraceVectors(self.trace_hash[order], self.task_hash[order], self.has_task[order],
                            self.counts[order])


@dataclass(frozen=True)
class PermutationTest:
    """The result of :func:`permutation_delta_r_inf`: the observed ΔR∞ (B − A), its two-sided p-value, the
    relabellings drawn and those with a statistic (one whose chain is not absorbing counts as reaching the observed
    statistic), and how the traces were exchanged."""

    statistic: float
    p_value: float
    permutations: int
    used: int
    shared_tasks: int
    whole_units: int

    def to_dict(self) -> dict[str, Any]:
        return {"method": "permutation", "statistic": "|ΔR∞|", "delta_r_inf": self.statistic,
                "p_value": self.p_value, "permutations": self.permutations, "used": self.used,
                "shared_tasks": self.shared_tasks, "whole_units": self.whole_units}


def _labellings(a: TraceVectors, b: TraceVectors, B: int, seed: int, block: int = _BLOCK
                ) -> tuple[Iterator[NDArray[np.float64]], int, int]:
    """The relabellings in blocks of ``block``: (n_a + n_b) × (≤ block) arrays, 1 where a trace goes to A (module
    docstring), the traces of ``a`` then ``b`` in their :meth:`TraceVectors.ordered` order; with the number of
    shared tasks and of whole units. Drawn lazily, block by block (the same draws whatever the block size)."""
    side = np.concatenate([np.ones(a.n, bool), np.zeros(b.n, bool)])
    task = np.concatenate([a.task_hash, b.task_hash])
    has = np.concatenate([a.has_task, b.has_task])
    shared_keys = np.intersect1d(a.task_hash[a.has_task], b.task_hash[b.has_task])
    in_shared = has & np.isin(task, shared_keys)
    rng = np.random.default_rng(np.random.SeedSequence([_STREAM, int(seed)]))
    # Tasks on both sides: a random order within each task, its A labels to the first n_A(task) of it.
    s_idx = np.flatnonzero(in_shared)
    s_task = task[s_idx]
    # Everything else: whole units (a task's trials, or a trace) relabelled among themselves.
    w_idx = np.flatnonzero(~in_shared)
    # a unit is (has a task, the task's hash or the trace's row): a trace is its own unit, even when the other set
    # has a trace of the same id, and never merges with a task
    w_key = np.stack([has[w_idx].astype(np.uint64), np.where(has[w_idx], task[w_idx], w_idx.astype(np.uint64))],
                     axis=1)
    units, w_inv = np.unique(w_key, axis=0, return_inverse=True)
    w_inv = w_inv.ravel()
    unit_side = np.zeros(units.shape[0], bool)
    unit_side[w_inv] = side[w_idx]
    dealt = side[s_idx[np.argsort(s_task, kind="stable")]]  # each task's labels, grouped by task

    def blocks() -> Iterator[NDArray[np.float64]]:
        for start in range(0, B, block):
            out = np.empty((min(block, B - start), side.size))  # a relabelling per row: contiguous writes
            for k in range(out.shape[0]):
                row = out[k]
                if s_idx.size:
                    # grouped by task again, in a random order within each task: its labels dealt to its traces
                    row[s_idx[np.lexsort((rng.random(s_idx.size), s_task))]] = dealt
                if units.shape[0]:
                    row[w_idx] = rng.permutation(unit_side)[w_inv]
            yield out.T

    return blocks(), int(shared_keys.size), int(units.shape[0])


def permutation_delta_r_inf(a: TraceVectors, b: TraceVectors, *, n_states: int, prior: ChainPrior, unvisited: str,
                            initial: str, permutations: int = PERMUTATIONS, seed: int = 0) -> PermutationTest:
    """Two-sided permutation test of R∞(A) = R∞(B) (module docstring). ``a`` and ``b`` in one vocabulary of
    ``n_states`` states; ``prior``, ``unvisited`` and ``initial`` are the estimator's, as the chains compared."""
    import scipy.sparse

    from tracetochain.numerics.batched import ChainBatch
    from tracetochain.uncertainty._bootstrap import estimate_batch

    if permutations < 1:
        raise ValueError(f"permutations must be >= 1, got {permutations}")
    a, b = a.ordered(), b.ordered()
    X = scipy.sparse.vstack([a.counts, b.counts]).tocsr()
    XT = X.T.tocsr()
    total = np.asarray(X.sum(axis=0)).ravel()
    m = int(n_states)

    def delta(count_a: NDArray[np.float64]) -> NDArray[np.float64]:
        """ΔR∞ of each row of A's count vectors (B's are the rest of the pool); NaN where a chain is not
        absorbing."""
        r = []
        for c in (count_a, total[None, :] - count_a):
            arr = estimate_batch(c, m, prior, unvisited, initial)
            batch = ChainBatch(arr["Q"], arr["R_success"], arr["R_failure"], arr["pi0"], arr.get("start_exits"))
            r.append(np.where(batch.valid, batch.r_inf(), np.nan))
        return r[1] - r[0]

    observed = float(delta(np.asarray(a.counts.sum(axis=0)).reshape(1, -1))[0])
    # ≤ 32 relabellings a block, fewer for large sets: a block's labels are n × block float64 (≤ 64 MB)
    block = int(min(_BLOCK, max(1, 8_000_000 // max(1, X.shape[0]))))
    labels, shared, whole = _labellings(a, b, permutations, seed, block)
    stats = np.concatenate([delta(np.asarray(XT @ np.ascontiguousarray(lab)).T) for lab in labels])
    ok = np.isfinite(stats)
    # A relabelling ties the observed one only up to rounding (the same traces summed in another order).
    tol = 1e-12 * max(1.0, abs(observed))
    # A relabelling without an absorbing chain has no statistic: it counts as reaching the observed one
    # (conservative, as the timing null's unusable replicates; leaving it out would condition on the labels).
    g = int(np.sum(np.abs(stats[ok]) >= abs(observed) - tol)) + int((~ok).sum())
    p = (1 + g) / (stats.size + 1) if np.isfinite(observed) else 1.0
    return PermutationTest(observed, float(p), int(permutations), int(ok.sum()), shared, whole)


__all__ = ["PERMUTATIONS", "PermutationTest", "TraceVectors", "permutation_delta_r_inf"]
