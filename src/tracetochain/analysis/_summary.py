"""The sufficient statistics of a corpus: everything the chain, the certificate and the intervals are computed from.

One function, :func:`summarize_traces`, turns a labelled set of traces into a :class:`CorpusSummary`; summaries add
up (:func:`merge_summaries`), so a corpus read in one piece and the same corpus read in any number of partitions, on
any engine, in any order, give the same summary — bit for bit, because every random choice (the held-out splits,
the bootstrap weights) is a function of a trace's or task's id (``traces._hashing``), never of where it was read.
The in-memory analysis is the partitioned one with a single partition.

A summary holds, for the usable (non-invalid) traces:

* the transition counts of all of them (the chain) and the steps per state;
* for each of S held-out splits, the counts of its fit half (the chain that split audits) and, per half, the trace
  lengths by outcome (success times, failure times, censoring times: the R∞ check and the KS timing layer);
* the lengths by outcome of all traces (the empirical success-time curve);
* the order test's observation counts n[prev, cur, next] over all traces;
* the per-task trials and successes (the trials layer and the design effect);
* B bootstrap replicates of the count vector Σ_t w_tb · (trace t's counts), with w the replicate weights of the
  trace's unit (itself, or its task).

Episodes that ended before any step (``traces.report.zero_step``) are trials of length 0: they enter the counts as
start exits, the length histograms at length 0 (each split's half by the same id-hash rule as every trace), the
per-task table, and every bootstrap replicate (the last two of the m² + 3m + 2 columns), weighted by their unit's
weight.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from tracetochain._outcome import CENSORED, FAILURE, INVALID, SUCCESS
from tracetochain.audit.shared import TaskTable, TracePoints, order_observations_from_codes, order_triplets
from tracetochain.chain import (
    TransitionCounts,
    count_transitions_from_codes,
    per_trace_counts,
    zero_step_counts,
    zero_step_outcome_codes,
)
from tracetochain.partitioned.shared import _merge, _pad_counts, _Partial, partition_costs
from tracetochain.traces import Problem, TraceTable
from tracetochain.traces.shared import fnv1a_hashes, holdout_mask, replicate_weights, unit_hashes
from tracetochain.uncertainty.shared import TraceVectors, UnitCounts, layout_columns

FIT, TEST = 0, 1
_WEIGHT_BLOCK = 32  # replicates per weight block (bounds the n_traces × block weight matrix)
_MAX_PROBLEMS = 50

Unit = Literal["trace", "task"]


@dataclass(frozen=True)
class SummarySpec:
    """What a summary collects: the splits (``n_splits`` random halves holding out ``test_fraction`` of the traces, or
    of the tasks with ``split_by="task"``), the bootstrap replicates (``n_replicates`` with ``weights`` drawn per
    ``resample_by`` unit: ``"task"`` weighs all trials of a task together, a trace without a task being its own unit;
    ``"trace"`` weighs every trace alone), all seeded by ``seed``; ``include_outcomes`` for the order test.
    ``states_on_fit_half``: learn the states on the fit half of split 0 even when no split is audited, so that an
    analysis without the audit (``tracetochain fit``) has the states of the audited one (``report``, ``audit``)."""

    seed: int = 0
    n_splits: int = 5
    test_fraction: float = 0.5
    split_by: Unit = "trace"
    n_replicates: int = 0
    weights: Literal["poisson", "exponential"] = "poisson"
    resample_by: Unit = "task"
    include_outcomes: bool = True
    states_on_fit_half: bool = False
    keep_trace_vectors: bool = False

    def __post_init__(self) -> None:
        if self.n_splits < 0:
            raise ValueError(f"n_splits must be >= 0, got {self.n_splits}")
        if (self.n_splits or self.states_on_fit_half) and not 0.0 < self.test_fraction < 1.0:
            raise ValueError(f"test_fraction must be in (0, 1), got {self.test_fraction!r}")
        if self.n_replicates < 0:
            raise ValueError(f"the number of replicates must be >= 0, got {self.n_replicates}")
        for name, value in (("split_by", self.split_by), ("resample_by", self.resample_by)):
            if value not in ("trace", "task"):
                raise ValueError(f"{name} must be 'trace' or 'task', got {value!r}")


@dataclass(frozen=True, eq=False)
class CorpusSummary:
    """Sufficient statistics of a corpus (module docstring) in the state vocabulary ``state_names``."""

    base: _Partial
    spec: SummarySpec
    visits: NDArray[np.int64]  # (m,)
    split_counts: NDArray[np.int64]  # (S, m, m + 2): [C | c⊕ | c⊖] of each split's fit half
    split_initial: NDArray[np.int64]  # (S, m)
    lengths: NDArray[np.int64]  # (S, 2, 3, L + 1): per split, half (fit, test), outcome
    all_lengths: NDArray[np.int64]  # (3, L + 1)
    triplets: Any  # sparse ((m + 1)·m) × s: audit._order.order_triplets
    tasks: TaskTable | None
    boot: NDArray[np.float64]  # (B, m² + 3m + 2): the last two columns are the zero-step (success, failure) exits
    split_start_exits: NDArray[np.int64] | None = None  # (S, 2): zero-step (success, failure) of each fit half
    #: Per usable trace: outcome, unit, held-out splits and states at the scored positions (the discrimination).
    points: TracePoints | None = None
    #: Per unit (task, else trace) with a task somewhere in the corpus: summed count vectors (the per-quantity design
    #: effect, ``uncertainty._design``).
    units: UnitCounts | None = None
    #: With ``spec.keep_trace_vectors``: every usable trace's count vector (``compare``'s permutation test).
    vectors: TraceVectors | None = None

    @property
    def state_names(self) -> tuple[str, ...]:
        return self.base.counts.state_names

    @property
    def counts(self) -> TransitionCounts:
        return self.base.counts

    @property
    def n_states(self) -> int:
        return len(self.state_names)

    @property
    def n_usable(self) -> int:
        return int(self.all_lengths.sum())

    @property
    def n_success(self) -> int:
        return int(self.all_lengths[SUCCESS].sum())

    def split_fit_counts(self, s: int) -> TransitionCounts:
        """The counts of split ``s``'s fit half as :class:`TransitionCounts`."""
        m = self.n_states
        x = self.split_counts[s]
        h = self.lengths[s, FIT]
        n = {"success": int(h[SUCCESS].sum()), "failure": int(h[FAILURE].sum()), "censored": int(h[CENSORED].sum()),
             "invalid": 0}
        exits = (self.split_start_exits[s].copy() if self.split_start_exits is not None
                 else np.zeros(2, np.int64))
        return TransitionCounts(self.state_names, x[:, :m].copy(), x[:, m].copy(), x[:, m + 1].copy(),
                                self.split_initial[s].copy(), n, exits)

    def success_length_counts(self) -> NDArray[np.int64]:
        """Number of successful traces of each length 0, 1, … (length 0: the episodes that succeeded before any
        step)."""
        out: NDArray[np.int64] = self.all_lengths[SUCCESS].copy()
        return out

    def empirical_rdc(self, horizon: int) -> NDArray[np.float64]:
        """R̂(d), d = 0..horizon: successes within d steps over all usable traces (censored and failed traces stay in
        the denominator)."""
        from tracetochain.numerics.empirical import empirical_rdc_from_counts

        return empirical_rdc_from_counts(self.all_lengths[SUCCESS], self.n_usable, horizon)


# ---------------------------------------------------------------------------------------------------- one piece
def _step_gaps(report: Any, partition: int) -> tuple[tuple[int, int, str, str, int], ...]:
    """The traces a deferred read dropped for missing steps, keyed by their id hash (see
    :func:`tracetochain.partitioned._counts._check_unique_traces`, which reports them)."""
    gaps = report.step_gaps[:_MAX_PROBLEMS]
    if not gaps:
        return ()
    hashes = fnv1a_hashes(pa.array([tid for tid, _, _ in gaps], pa.string()))
    return tuple((int(h), partition, tid, message, loc) for (tid, message, loc), h in zip(gaps, hashes, strict=True))


def summarize_traces(traces: TraceTable, codes: NDArray[np.int64], names: tuple[str, ...], spec: SummarySpec, *,
                     partition: int = 0, check_traces: bool = True) -> CorpusSummary:
    """The summary of ``traces`` whose steps have the state ``codes`` (indices into ``names``), with the zero-step
    episodes of ``traces.report.zero_step``."""
    codes = np.asarray(codes, dtype=np.int64)
    m = len(names)
    offsets = traces.offsets
    outcomes = traces.outcomes()
    lengths = np.diff(offsets).astype(np.int64)
    ids = traces.trace_id_array
    trace_hash = fnv1a_hashes(ids)
    task_col = traces.trace_column("task_id") if "task_id" in traces.columns else None
    r = traces.report
    zero_oc = zero_step_outcome_codes(r.zero_step)
    counts = count_transitions_from_codes(codes, offsets, outcomes, names, zero_step_outcomes=zero_oc)
    base = _Partial(counts, trace_hash if check_traces else np.zeros(0, np.uint64), ((partition, traces.n_traces),),
                    r.n_records, r.n_records_skipped, r.n_traces_skipped, dict(r.skipped_by_reason),
                    tuple(r.problems[:_MAX_PROBLEMS]), partition_costs(traces, codes, names),
                    tuple(dict(z) for z in r.zero_step), _step_gaps(r, partition))
    usable = outcomes != INVALID
    # The usable zero-step episodes: length 0, their ids and tasks (hashed by the same rules as the traces' ids).
    zero_usable = zero_oc != INVALID
    zero_records = [z for z, ok in zip(r.zero_step, zero_usable.tolist(), strict=True) if ok]
    zero_u = zero_oc[zero_usable]
    zero_ids = pa.array([str(z["trace_id"]) for z in zero_records], pa.string())
    zero_task = pa.array([None if z.get("task_id") is None else str(z["task_id"]) for z in zero_records],
                         pa.string())
    zero_task_col = zero_task if zero_task.null_count < len(zero_task) else None
    S = spec.n_splits
    top = int(lengths[usable].max()) if usable.any() else 0
    L = top + 1
    visits = np.bincount(codes[np.repeat(usable, lengths)], minlength=m).astype(np.int64)
    oc_u = outcomes[usable].astype(np.int64)
    len_u = lengths[usable]
    all_lengths = np.bincount(oc_u * L + len_u, minlength=3 * L).reshape(3, L).astype(np.int64)
    if zero_u.size:
        all_lengths[:, 0] += np.bincount(zero_u, minlength=3)[:3]

    keep_codes = np.repeat(usable, lengths)
    c_u = codes[keep_codes]
    o_u = np.concatenate([[0], np.cumsum(len_u)]).astype(np.int64)
    P = per_trace_counts(c_u, o_u, outcomes[usable], m)  # (n_usable, m² + 3m)
    K = m * m + 3 * m
    split_hash = (unit_hashes(ids, task_col) if spec.split_by == "task" else trace_hash)[usable]
    split_counts = np.zeros((S, m, m + 2), np.int64)
    split_initial = np.zeros((S, m), np.int64)
    split_lengths = np.zeros((S, 2, 3, L), np.int64)
    split_exits = np.zeros((S, 2), np.int64)
    test = np.zeros((int(usable.sum()), S), bool)
    if S and usable.any():
        test = np.stack([holdout_mask(split_hash, spec.test_fraction, spec.seed, s) for s in range(S)], axis=1)
        fit_w = (~test).astype(np.float64)
        fit_counts = np.asarray(P.T @ fit_w).T.round().astype(np.int64)  # (S, K)
        T = fit_counts[:, : m * m].reshape(S, m, m)
        split_counts[:, :, :m] = T
        split_counts[:, :, m] = fit_counts[:, m * m: m * m + m]
        split_counts[:, :, m + 1] = fit_counts[:, m * m + m: m * m + 2 * m]
        split_initial[:] = fit_counts[:, m * m + 2 * m:]
        half = test.astype(np.int64)  # 0 fit, 1 test
        key = ((np.arange(S)[None, :] * 2 + half) * 3 + oc_u[:, None]) * L + len_u[:, None]
        split_lengths = np.bincount(key.ravel(), minlength=S * 2 * 3 * L).reshape(S, 2, 3, L).astype(np.int64)
    if S and zero_u.size:
        zero_split_hash = unit_hashes(zero_ids, zero_task_col) if spec.split_by == "task" else fnv1a_hashes(zero_ids)
        zero_test = np.stack([holdout_mask(zero_split_hash, spec.test_fraction, spec.seed, s) for s in range(S)],
                             axis=1)
        zero_half = zero_test.astype(np.int64)
        zkey = ((np.arange(S)[None, :] * 2 + zero_half) * 3 + zero_u[:, None]) * L  # length 0
        split_lengths += np.bincount(zkey.ravel(), minlength=S * 2 * 3 * L).reshape(S, 2, 3, L).astype(np.int64)
        fit_zero = (~zero_test).astype(np.float64)
        split_exits[:] = np.asarray(zero_step_counts(zero_u).T @ fit_zero).T.round().astype(np.int64)

    obs = order_observations_from_codes(c_u, o_u, outcomes[usable], m, include_outcomes=spec.include_outcomes)
    triplets = order_triplets(obs)

    tasks: TaskTable | None = None
    has_tasks = task_col is not None and task_col.null_count < len(task_col)
    if has_tasks or zero_task_col is not None:
        keys = np.zeros(0, np.uint64)
        succ = np.zeros(0, np.int64)
        if task_col is not None and has_tasks:
            has = np.asarray(task_col.is_valid().to_numpy(zero_copy_only=False), dtype=bool) & usable
            keys = fnv1a_hashes(task_col.filter(pa.array(has)))
            succ = (outcomes[has] == SUCCESS).astype(np.int64)
        if zero_task_col is not None:
            zhas = np.asarray(zero_task.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
            keys = np.concatenate([keys, fnv1a_hashes(zero_task.filter(pa.array(zhas)))])
            succ = np.concatenate([succ, (zero_u[zhas] == SUCCESS).astype(np.int64)])
        uniq, inv = np.unique(keys, return_inverse=True)
        tasks = TaskTable(uniq, np.bincount(inv, minlength=uniq.size).astype(np.int64),
                          np.bincount(inv, succ, minlength=uniq.size).astype(np.int64))

    B = spec.n_replicates
    boot = np.zeros((B, K + 2))
    if B and usable.any():
        unit = (unit_hashes(ids, task_col) if spec.resample_by == "task" else trace_hash)[usable]
        P_T = P.T.tocsr()
        for start in range(0, B, _WEIGHT_BLOCK):
            stop = min(B, start + _WEIGHT_BLOCK)
            boot[start:stop, :K] = np.asarray(P_T @ replicate_weights(unit, spec.seed, range(start, stop),
                                                                      spec.weights)).T
    if B and zero_u.size:
        zero_unit = unit_hashes(zero_ids, zero_task_col) if spec.resample_by == "task" else fnv1a_hashes(zero_ids)
        Z_T = zero_step_counts(zero_u).T.tocsr()
        for start in range(0, B, _WEIGHT_BLOCK):
            stop = min(B, start + _WEIGHT_BLOCK)
            boot[start:stop, K:] = np.asarray(Z_T @ replicate_weights(zero_unit, spec.seed, range(start, stop),
                                                                      spec.weights)).T
    unit_of_trace = unit_hashes(ids, task_col)[usable]
    points = TracePoints.build(trace_hash[usable], unit_of_trace, outcomes[usable], test, c_u, o_u)
    units = UnitCounts.build(unit_of_trace, P, len_u) if has_tasks else None
    vectors = None
    if spec.keep_trace_vectors:
        import scipy.sparse

        z_has = (np.asarray(zero_task.is_valid().to_numpy(zero_copy_only=False), dtype=bool) if zero_u.size
                 else np.zeros(0, bool))
        t_has = (np.asarray(task_col.is_valid().to_numpy(zero_copy_only=False), dtype=bool)[usable]
                 if task_col is not None else np.zeros(int(usable.sum()), bool))
        rows = scipy.sparse.vstack([scipy.sparse.hstack([P, scipy.sparse.csr_matrix((P.shape[0], 2))]),
                                    scipy.sparse.hstack([scipy.sparse.csr_matrix((zero_u.size, K)),
                                                         zero_step_counts(zero_u)])])
        if _vectors_fit(rows.nnz):  # else None: compare says its permutation test was not run, and why
            vectors = TraceVectors.build(np.concatenate([trace_hash[usable], fnv1a_hashes(zero_ids)]),
                                         np.concatenate([unit_of_trace, unit_hashes(zero_ids, zero_task_col)]),
                                         np.concatenate([t_has, z_has]), rows)
    return CorpusSummary(base, spec, visits, split_counts, split_initial, split_lengths, all_lengths, triplets,
                         tasks, boot, split_exits, points, units, vectors)


# ---------------------------------------------------------------------------------------------------- merging
def _positions(old: tuple[str, ...], new: tuple[str, ...]) -> NDArray[np.int64]:
    pos = {s: i for i, s in enumerate(new)}
    return np.array([pos[s] for s in old], dtype=np.int64)


def _remap_rows(x: NDArray[np.int64], idx: NDArray[np.int64], M: int) -> NDArray[np.int64]:
    """(…, m, m + 2) outcome rows → (…, M, M + 2)."""
    m = idx.size
    out = np.zeros((*x.shape[:-2], M, M + 2), x.dtype)
    cols = np.concatenate([idx, [M, M + 1]])
    if m:
        out[..., idx[:, None], cols[None, :]] = x
    return out


def _remap_triplets(t: Any, idx: NDArray[np.int64], M: int, include_outcomes: bool) -> Any:
    """Sparse ((m + 1)·m) × s triplet counts → ((M + 1)·M) × S: states to their new positions, START and the
    outcomes to the new ends."""
    from scipy import sparse

    m = idx.size
    coo = t.tocoo()
    prev = np.append(idx, M)[coo.row // m] if m else coo.row
    cur = idx[coo.row % m] if m else coo.row
    nxt = (np.concatenate([idx, [M, M + 1]]) if include_outcomes else idx)[coo.col]
    return sparse.csr_array((coo.data, (prev * M + cur, nxt)), shape=((M + 1) * M, M + 2 if include_outcomes else M))


def _remap_layout(x: NDArray[np.float64], idx: NDArray[np.int64], M: int) -> NDArray[np.float64]:
    """(B, m² + 3m [+ 2]) per-trace-count layout → (B, M² + 3M [+ 2]) (the start exits, when present, stay last)."""
    m = idx.size
    extra = x.shape[1] - (m * m + 3 * m)
    out = np.zeros((x.shape[0], M * M + 3 * M + extra))
    out[:, layout_columns(idx, M)] = x[:, : m * m + 3 * m]
    if extra:
        out[:, M * M + 3 * M:] = x[:, m * m + 3 * m:]
    return out


def reindex_summary(a: CorpusSummary, names: tuple[str, ...]) -> CorpusSummary:
    """``a`` in the vocabulary ``names`` (a superset of its own states, in any order)."""
    if a.state_names == names:
        return a
    idx = _positions(a.state_names, names)
    M = len(names)
    visits = np.zeros(M, np.int64)
    visits[idx] = a.visits
    init = np.zeros((a.split_initial.shape[0], M), np.int64)
    init[:, idx] = a.split_initial
    return replace(a, base=replace(a.base, counts=_pad_counts(a.base.counts, names)), visits=visits,
                   split_counts=_remap_rows(a.split_counts, idx, M), split_initial=init,
                   triplets=_remap_triplets(a.triplets, idx, M, a.spec.include_outcomes),
                   boot=_remap_layout(a.boot, idx, M), points=None if a.points is None else a.points.reindexed(idx),
                   units=None if a.units is None else a.units.reindexed(idx, M),
                   vectors=None if a.vectors is None else a.vectors.reindexed(idx, M))


def _pad_last(x: NDArray[np.int64], n: int) -> NDArray[np.int64]:
    if x.shape[-1] >= n:
        return x
    pad = [(0, 0)] * (x.ndim - 1) + [(0, n - x.shape[-1])]
    return np.pad(x, pad)


def merge_summaries(a: CorpusSummary, b: CorpusSummary) -> CorpusSummary:
    """The summary of two disjoint sets of traces (states keep their order of first appearance, ``a`` first)."""
    if a.spec != b.spec:
        raise ValueError("summaries made with different settings cannot be merged")
    base = _merge(a.base, b.base)
    names = base.counts.state_names
    a, b = reindex_summary(a, names), reindex_summary(b, names)
    L = max(a.all_lengths.shape[-1], b.all_lengths.shape[-1])
    tasks = a.tasks if b.tasks is None else (b.tasks if a.tasks is None else a.tasks.merge(b.tasks))
    return CorpusSummary(base, a.spec, a.visits + b.visits, a.split_counts + b.split_counts,
                         a.split_initial + b.split_initial, _pad_last(a.lengths, L) + _pad_last(b.lengths, L),
                         _pad_last(a.all_lengths, L) + _pad_last(b.all_lengths, L), a.triplets + b.triplets, tasks,
                         _pad_boot(a.boot, b.boot.shape[1]) + _pad_boot(b.boot, a.boot.shape[1]),
                         _split_exits(a) + _split_exits(b), _merge_points(a.points, b.points),
                         _merge_units(a.units, b.units),
                         _merge_vectors(a.vectors, b.vectors))


def _merge_units(a: UnitCounts | None, b: UnitCounts | None) -> UnitCounts | None:
    # A partition without task ids keeps no units (each trace its own): the merged units would miss its traces, so
    # the per-quantity design effect is then left out (the pass rate's d still applies).
    if a is None or b is None:
        return None
    return a.merge(b)


def _vectors_fit(nnz: int) -> bool:
    """Per-trace count vectors with ``nnz`` stored counts fit the memory budget (``TRACETOCHAIN_MAX_MEMORY_MB``, at
    16 bytes a stored count)."""
    from tracetochain._limits import memory_budget

    return 16 * nnz <= memory_budget()


def _merge_vectors(a: TraceVectors | None, b: TraceVectors | None) -> TraceVectors | None:
    """Both sets' count vectors — or none, once they would outgrow the memory budget (:func:`_vectors_fit`)."""
    if a is None or b is None or not _vectors_fit(a.counts.nnz + b.counts.nnz):
        return None
    return a.merge(b)


def _merge_points(a: TracePoints | None, b: TracePoints | None) -> TracePoints | None:
    if a is None or b is None:
        return a if b is None else b
    return a.merge(b)


def _pad_boot(x: NDArray[np.float64], n: int) -> NDArray[np.float64]:
    """Replicates of the layout m² + 3m (no zero-step columns) widened to m² + 3m + 2 when the other side has them."""
    return np.pad(x, [(0, 0), (0, n - x.shape[1])]) if x.shape[1] < n else x


def _split_exits(a: CorpusSummary) -> NDArray[np.int64]:
    if a.split_start_exits is not None:
        return a.split_start_exits
    return np.zeros((a.split_initial.shape[0], 2), np.int64)


def summary_problems(summary: CorpusSummary) -> tuple[Problem, ...]:
    return summary.base.problems


def describe_spec(spec: SummarySpec) -> dict[str, Any]:
    return {"seed": spec.seed, "n_splits": spec.n_splits, "test_fraction": spec.test_fraction,
            "split_by": spec.split_by, "n_replicates": spec.n_replicates, "weights": spec.weights,
            "resample_by": spec.resample_by}


__all__ = ["CorpusSummary", "SummarySpec", "merge_summaries", "reindex_summary", "summarize_traces"]

