"""TraceBootstrap: resample whole traces (or whole tasks) with replacement and refit (Tran-Truong & Le 2026, trace-level
bootstrap).

Two paths:

* **fast** — states fixed. Every trace's contribution to the sufficient statistics (m² transitions, m success exits,
  m failure exits, m first states) is one row of a sparse (n_traces × (m² + 3m)) matrix P, built once. Episodes that
  ended before any step are resampled like any other: each is one more row, whose two extra columns (the layout
  m² + 3m + 2) hold its start exit to success or failure. A replicate
  is a weight vector w over traces (multinomial counts of a resample, or Poisson(1) weights), its counts are w @ P,
  and its chain is estimated from those counts plus the prior's pseudo-counts, drawn for the replicate
  (``draw_prior``) or at their mean. All replicates are done at once: W @ P as one sparse product,
  then a vectorised estimate (no Python refit per replicate). The labels are the reference labelling (``relabel=
  "fit"``) or, for the paper's variant, each step's nearest reference centroid (``relabel="nearest-centroid"``,
  Ward states only); either way they are computed once, since a resample only repeats traces.
* **full** — states re-discovered on every replicate: the state estimator (e.g. ``WardStates``) is refitted on the
  resampled traces and its states are aligned to the reference's by Hungarian matching (``scipy.optimize.
  linear_sum_assignment``) of state centroids in feature space (Ward), or by state name (categorical and milestone
  states). The featurizer is fitted once on all the data and held fixed, so every replicate clusters the same
  feature vectors (as the paper's fixed per-step features). Reference states that a replicate does not produce get
  an empty row (then the ``unvisited`` policy applies: the prior row, or absorbing to failure); replicate states
  beyond the reference's m (more clusters found) are merged into their nearest reference centroid. ``align=
  "exit-profile"`` reproduces the authors' artifact instead (greedy matching on |R⊕ᵇ_i − R⊕_j|; crude — it can
  swap states with similar exits, which inflates widths; kept for parity with SS13 only).

Replicate i always uses child seed i of ``numpy.random.SeedSequence(seed).spawn(n_resamples)``, and the fast and full
paths draw the same resamples from it. The work is a plan with ``replicate_arrays(i)`` / ``replicate(i)`` plus a
local driver ``run()``; an engine that maps ``replicate_arrays`` over ``range(n_resamples)`` (e.g. Dask) gets the same
numbers as the local driver, bit for bit.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import scipy.sparse
from numpy.typing import NDArray

from tracetochain._compat import renamed_attribute, renamed_parameters
from tracetochain._display import EstimatorDisplay
from tracetochain._outcome import INVALID as _INVALID
from tracetochain.chain import (
    AbsorbingChain,
    ChainPrior,
    TransitionCounts,
    estimate_rows,
    initial_distribution,
    outcome_matrix,
    per_trace_counts,
    start_distribution,
    zero_step_counts,
    zero_step_outcome_codes,
)
from tracetochain.chain.shared import state_codes
from tracetochain.exceptions import EmptyTraceSetError, NotFittedError
from tracetochain.traces import TraceTable
from tracetochain.traces.shared import WeightKind, replicate_weights, unit_hashes
from tracetochain.uncertainty._align import match_by_centroids, match_by_exit_profile, match_by_names
from tracetochain.uncertainty._ensemble import ChainEnsemble
from tracetochain.uncertainty._stats import check_confidence

By = Literal["auto", "trace", "task"]
Path_ = Literal["fast", "full"]
Weights = Literal["poisson", "multinomial"]
Relabel = Literal["fit", "nearest-centroid"]
Align = Literal["auto", "centroids", "names", "exit-profile"]

_CHUNK = 128  # replicates per sparse product in the fast driver (bounds the dense weight block)
_WEIGHT_BLOCK = 32  # replicates per block of hash weights


# ------------------------------------------------------------------------------------------------ pure functions
def estimate_batch(counts: NDArray[np.float64], n_states: int, prior: ChainPrior, unvisited_policy: str,
                   initial: str, *, prior_draws: NDArray[np.float64] | None = None) -> dict[str, NDArray[np.float64]]:
    """Chains from a stack of count vectors (b × (m² + 3m), the layout of :func:`~tracetochain.chain.
    per_trace_counts`, or b × (m² + 3m + 2) whose last two columns are the zero-step (success, failure) counts),
    with the estimator's own row formula (:func:`~tracetochain.chain.estimate_rows`) and start distribution
    (:func:`~tracetochain.chain.start_distribution`), so a single vector gives the chain
    :func:`~tracetochain.estimate_chain` fits. The result has ``start_exits`` (b, 2) with the longer layout.

    ``prior_draws`` (b, m, m + 2): the Bayesian bootstrap — the prior enters as random pseudo-counts drawn per
    replicate (Gamma(a) for pseudo-count a) and every row is the replicate's counts plus its draws, normalised; rows
    with neither data nor prior mass follow ``unvisited_policy``.
    """
    m = int(n_states)
    b = counts.shape[0]
    K = m * m + 3 * m
    if counts.shape[1] not in (K, K + 2):
        raise ValueError(f"count vectors of {m} states have {K} or {K + 2} entries, got {counts.shape[1]}")
    X = outcome_matrix(counts[:, : m * m].reshape(b, m, m), counts[:, m * m: m * m + m],
                       counts[:, m * m + m: m * m + 2 * m], counts[:, m * m + 2 * m: K])
    if prior_draws is None:
        rows = estimate_rows(X, prior, unvisited_policy)
    else:
        shape = X + prior_draws
        total = shape.sum(axis=-1, keepdims=True)
        rows = np.divide(shape, total, out=np.zeros_like(shape), where=total > 0)
        empty = total[..., 0] <= 0
        if empty.any():
            fill = estimate_rows(X, prior, unvisited_policy)
            rows[empty] = fill[empty]
    out = {"Q": rows[..., :m], "R_success": rows[..., m], "R_failure": rows[..., m + 1]}
    if counts.shape[1] == K:
        out["pi0"] = initial_distribution(counts[:, m * m + 2 * m:], initial)
    else:
        out["pi0"], out["start_exits"] = start_distribution(counts[:, m * m + 2 * m: K], counts[:, K:], initial)
    return out


def prior_draws(reference: TransitionCounts, prior: ChainPrior, unvisited_policy: str, n: int,
                rng: np.random.Generator) -> NDArray[np.float64]:
    """The Bayesian bootstrap's random pseudo-counts, (n, m, m + 2): Gamma(a) for each pseudo-count a of the prior
    on the reference counts (a Dirichlet process posterior puts a Gamma(a) weight on each atom of its base measure,
    Ferguson 1973), and for rows without data, under the "prior" policy, Gamma of the prior row's concentration."""
    X = reference.outcome_matrix()
    shape = prior.pseudo_counts(X)
    empty = X.sum(axis=1) == 0
    if empty.any() and unvisited_policy == "prior":
        shape[empty] = prior.unvisited_concentration(X)
    out: NDArray[np.float64] = rng.standard_gamma(np.broadcast_to(shape, (n, *shape.shape)))
    return out


def weighted_counts(per_trace: scipy.sparse.csr_matrix, unit_hashes: NDArray[np.uint64], seed: int,
                    replicates: range, kind: WeightKind) -> NDArray[np.float64]:
    """Replicate count vectors Σ_t w_tb · (trace t's counts) for the replicates ``replicates`` (len × the columns of
    ``per_trace``), with the weights of ``traces._hashing.replicate_weights`` (functions of each unit's id)."""
    PT = per_trace.T.tocsr()
    out = np.zeros((len(replicates), per_trace.shape[1]))
    for k in range(0, len(replicates), _WEIGHT_BLOCK):
        block = replicates[k: k + _WEIGHT_BLOCK]
        out[k: k + len(block)] = np.asarray(PT @ replicate_weights(unit_hashes, seed, block, kind)).T
    return out


def take_traces(traces: TraceTable, idx: NDArray[np.int64]) -> tuple[TraceTable, NDArray[np.int64]]:
    """A table holding the traces ``idx`` in that order, repeats allowed (a bootstrap resample), and the source row
    of each of its steps. Repeated traces get ids ``<id>#<k>``; nothing is revalidated."""
    idx = np.asarray(idx, dtype=np.int64)
    offs = traces.offsets
    lengths = np.diff(offs)[idx]
    starts = offs[:-1][idx]
    new_offsets = np.r_[0, np.cumsum(lengths)].astype(np.int64)
    rows = np.repeat(starts - new_offsets[:-1], lengths) + np.arange(int(lengths.sum()))
    table = traces.to_arrow().take(pa.array(rows, pa.int64()))
    ids = traces.trace_ids
    seen: dict[int, int] = {}
    names = []
    for i in idx.tolist():
        k = seen.get(i, 0)
        seen[i] = k + 1
        names.append(ids[i] if k == 0 else f"{ids[i]}#{k}")
    trace_index = np.repeat(np.arange(idx.size), lengths).astype(np.int64)
    return TraceTable(table, traces.report, pa.array(names, pa.string()), trace_index, new_offsets), rows


def group_means(X: NDArray[np.float64], labels: NDArray[np.int64], k: int) -> NDArray[np.float64]:
    """Centroid (feature mean) of each of the k labels (a label with no rows gets a row of NaN)."""
    onehot = scipy.sparse.csr_matrix((np.ones(labels.size), (labels, np.arange(labels.size))), shape=(k, labels.size))
    sums = np.asarray(onehot @ X)
    n = np.bincount(labels, minlength=k).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        out: NDArray[np.float64] = sums / n[:, None]
    return out


def _episode_ids(traces: TraceTable, zero_step: list[dict[str, Any]]) -> tuple[pa.Array, pa.Array | None]:
    """Trace ids and task ids (None when no episode has a task) of the traces, then of the zero-step episodes."""
    ids = traces.trace_id_array
    has_task = "task_id" in traces.columns or any(r.get("task_id") is not None for r in zero_step)
    task = traces.trace_column("task_id") if has_task else None
    if zero_step:
        ids = pa.concat_arrays([ids.cast(pa.string()), pa.array([str(r["trace_id"]) for r in zero_step], pa.string())])
        if task is not None:
            extra = pa.array([None if r.get("task_id") is None else str(r["task_id"]) for r in zero_step], pa.string())
            task = pa.concat_arrays([task.cast(pa.string()), extra])
    return ids, task


def _units(ids: pa.Array, task: pa.Array | None, by: str) -> tuple[NDArray[np.int64], int, NDArray[np.uint64]]:
    """Resampling unit of each episode (itself, or its task; episodes without a task_id are their own task), the
    number of units and each unit's id hash (``traces._hashing.unit_hashes``)."""
    n = len(ids)
    hashes = unit_hashes(ids, task if by == "task" else None)
    if by == "trace" or task is None:
        return np.arange(n, dtype=np.int64), n, hashes
    uniq, first, inv = np.unique(hashes, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # units in order of first appearance
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return rank[inv].astype(np.int64), int(uniq.size), uniq[order]


def _task_ids_repeat(task: pa.Array | None) -> bool:
    """Some task id is carried by two or more episodes."""
    if task is None or len(task) < 2:
        return False
    task = task.drop_null()
    return len(task) > len(pc.unique(task))


def tasks_repeat(traces: TraceTable) -> bool:
    """Some task id is carried by two or more traces (the zero-step episodes of ``traces.report`` included)."""
    return _task_ids_repeat(_episode_ids(traces, traces.report.zero_step)[1])


class _FrozenFeaturizer:
    """A featurizer whose ``fit`` returns an already-fitted feature model (the same features on every replicate)."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def fit(self, traces: Any) -> _FrozenFeaturizer:
        return self

    def fetch_model(self) -> Any:
        return self.model


# ------------------------------------------------------------------------------------------------------- plans
def prior_draws_for(reference: TransitionCounts, prior: ChainPrior, unvisited_policy: str, seed: int,
                    replicates: range) -> NDArray[np.float64]:
    """:func:`prior_draws` for the replicates ``replicates``, replicate i from its own stream
    ``SeedSequence([seed, 0x9D1A, i])`` (the same draws whatever else is computed, and wherever)."""
    parts = [prior_draws(reference, prior, unvisited_policy, 1,
                         np.random.default_rng(np.random.SeedSequence([int(seed), 0x9D1A, int(i)])))
             for i in replicates]
    m = reference.n_states
    return np.concatenate(parts) if parts else np.zeros((0, m, m + 2))


@dataclass(frozen=True, eq=False)
class _PlanBase:
    reference: AbsorbingChain
    reference_counts: TransitionCounts
    seeds: tuple[np.random.SeedSequence, ...]
    seed: int
    unit_of_trace: NDArray[np.int64]
    unit_hashes: NDArray[np.uint64]
    n_units: int
    weights: str
    n_states: int
    prior: ChainPrior
    unvisited_policy: str
    initial: str
    draw_prior: bool = True

    @property
    def n_resamples(self) -> int:
        return len(self.seeds)

    def trace_weights(self, seed: np.random.SeedSequence) -> NDArray[np.float64]:
        """How often each trace appears in the replicate seeded by ``seed``: a multinomial resample of the units, or
        the hash-based weights of its units (``traces._hashing``) for replicate ``seed.spawn_key[-1]``."""
        if self.weights == "poisson":
            i = int(seed.spawn_key[-1]) if seed.spawn_key else 0
            unit_w = replicate_weights(self.unit_hashes, self.seed, range(i, i + 1), "poisson")[:, 0]
            out: NDArray[np.float64] = unit_w[self.unit_of_trace]
            return out
        rng = np.random.default_rng(seed)
        U = self.n_units
        counts = np.bincount(rng.integers(0, U, U), minlength=U).astype(np.float64)
        w: NDArray[np.float64] = counts[self.unit_of_trace]
        return w

    def _estimate(self, counts: NDArray[np.float64], replicates: range) -> dict[str, Any]:
        draws = (prior_draws_for(self.reference_counts, self.prior, self.unvisited_policy, self.seed, replicates)
                 if self.draw_prior else None)
        arr: dict[str, Any] = estimate_batch(counts, self.n_states, self.prior, self.unvisited_policy, self.initial,
                                             prior_draws=draws)
        m = self.n_states
        arr["dropped"] = counts[:, m * m + 2 * m:].sum(axis=1) == 0  # no trace drawn at all (Poisson only)
        return arr

    def arrays_for_seed(self, seed: np.random.SeedSequence) -> dict[str, Any]:  # pragma: no cover - overridden
        raise NotImplementedError

    def replicate_arrays(self, i: int) -> dict[str, Any]:
        """Replicate i alone (arrays of shape (1, …)): ``arrays_for_seed(seeds[i])``. An engine maps
        ``arrays_for_seed`` over ``SeedSequence(seed).spawn(n_resamples)`` and gets the same numbers."""
        return self.arrays_for_seed(self.seeds[i])

    def replicate(self, i: int) -> AbsorbingChain:
        """Replicate i as a chain (raises ``NonAbsorbingError`` if, with pseudocount 0, it is not absorbing)."""
        arr = self.replicate_arrays(i)
        if arr.get("dropped") is not None and bool(np.asarray(arr["dropped"])[0]):
            raise EmptyTraceSetError(f"replicate {i} drew no traces (Poisson weights all zero)")
        exits = arr.get("start_exits")
        return AbsorbingChain(arr["Q"][0], arr["R_success"][0], arr["R_failure"][0], arr["pi0"][0],
                              self.reference.state_names, {"bootstrap_replicate": i},
                              None if exits is None else exits[0])

    def run(self) -> dict[str, Any]:  # pragma: no cover - overridden
        raise NotImplementedError


@dataclass(frozen=True, eq=False)
class FastBootstrapPlan(_PlanBase):
    """States fixed: replicate i's counts are w_i @ P with P the per-trace count matrix (built once)."""

    per_trace: scipy.sparse.csr_matrix = field(repr=False, default=None)  # type: ignore[assignment]

    def arrays_for_seed(self, seed: np.random.SeedSequence) -> dict[str, Any]:
        """One replicate from its seed: arrays of shape (1, …)."""
        i = int(seed.spawn_key[-1]) if seed.spawn_key else 0
        w = self.trace_weights(seed)
        counts = np.asarray(self.per_trace.T @ w, dtype=np.float64)[None, :]
        return self._estimate(counts, range(i, i + 1))

    def run(self) -> dict[str, Any]:
        """All replicates: the weights of each replicate, counts by one sparse product per chunk of replicates."""
        B = self.n_resamples
        if self.weights == "poisson":
            unit_P = scipy.sparse.csr_matrix(
                (np.ones(self.unit_of_trace.size), (self.unit_of_trace, np.arange(self.unit_of_trace.size))),
                shape=(self.n_units, self.unit_of_trace.size)) @ self.per_trace
            counts = weighted_counts(unit_P.tocsr(), self.unit_hashes, self.seed, range(B), "poisson")
            return self._estimate(counts, range(B))
        PT = self.per_trace.T.tocsr()
        blocks = []
        for start in range(0, B, _CHUNK):
            stop = min(B, start + _CHUNK)
            W = np.stack([self.trace_weights(self.seeds[i]) for i in range(start, stop)], axis=1)  # (n_traces, b)
            blocks.append(np.asarray(PT @ W).T)
        return self._estimate(np.vstack(blocks), range(B))


@dataclass(frozen=True, eq=False)
class FullBootstrapPlan(_PlanBase):
    """States re-discovered per replicate: refit the state estimator on the resample, align, count, estimate.

    The weights cover the traces, then the zero-step episodes (``zero_step``: their start exits, one row each), which
    need no states: their weighted exits are added to the replicate's counts."""

    traces: TraceTable = field(repr=False, default=None)  # type: ignore[assignment]
    zero_step: scipy.sparse.csr_matrix | None = field(repr=False, default=None)
    estimator: Any = field(repr=False, default=None)
    features: NDArray[np.float64] | None = field(repr=False, default=None)
    reference_centroids: NDArray[np.float64] | None = field(repr=False, default=None)
    align: str = "centroids"

    def arrays_for_seed(self, seed: np.random.SeedSequence) -> dict[str, Any]:
        """One replicate from its seed: resample, refit the states, align, count, estimate."""
        i = int(seed.spawn_key[-1]) if seed.spawn_key else 0
        w_all = self.trace_weights(seed).astype(np.int64)
        n = self.traces.n_traces
        w = w_all[:n]
        idx = np.repeat(np.arange(w.size), w)
        m = self.n_states
        extra = (np.zeros(0) if self.zero_step is None
                 else np.asarray(self.zero_step.T @ w_all[n:].astype(np.float64), dtype=np.float64))
        if idx.size == 0:
            empty = estimate_batch(np.zeros((1, m * m + 3 * m + extra.size)), m, self.prior, self.unvisited_policy,
                                   self.initial)
            return {**empty, "dropped": np.array([True]), "diagnostics": [{"replicate": i, "dropped": True}]}
        rep, rows = take_traces(self.traces, idx)
        est = copy.copy(self.estimator)
        if hasattr(est, "seed"):
            est.seed = int(seed.generate_state(1)[0])
        model = est.fit(rep).fetch_model()
        labels = getattr(model, "fit_labels", None)
        if labels is None or np.shape(labels) != (rep.n_steps,):
            labels = model.predict(rep)
        labels = np.asarray(labels, dtype=np.int64)
        names_b = tuple(model.state_names)
        mb = len(names_b)
        outcomes = rep.outcomes()
        if self.align == "names":
            mapping = match_by_names(self.reference.state_names, names_b)
            detail: dict[str, Any] = {}
        elif self.align == "exit-profile":
            own = per_trace_counts(labels, rep.offsets, outcomes, mb).sum(axis=0)
            own_arr = estimate_batch(np.asarray(own, dtype=np.float64), mb, self.prior, self.unvisited_policy,
                                     self.initial)
            mapping = match_by_exit_profile(self.reference.R_success, own_arr["R_success"][0])
            detail = {}
        else:
            assert self.features is not None and self.reference_centroids is not None
            cent = group_means(self.features[rows], labels, mb)
            mapping, cost = match_by_centroids(self.reference_centroids, cent)
            detail = {"mean_centroid_distance": float(np.sqrt(cost).mean())}
        codes = mapping[labels]
        counts = np.asarray(per_trace_counts(codes, rep.offsets, outcomes, m).sum(axis=0), dtype=np.float64)
        counts = np.concatenate([counts.reshape(1, -1), extra[None, :]], axis=1)
        # The same estimate as the fast path: the prior's pseudo-counts drawn for this replicate (draw_prior).
        arr = self._estimate(counts, range(i, i + 1))
        matched = np.unique(mapping)
        missing = [self.reference.state_names[j] for j in range(m) if j not in set(matched.tolist())]
        arr["dropped"] = np.array([False])
        arr["diagnostics"] = [{"replicate": i, "n_states_found": mb, "missing_reference_states": missing,
                               "merged_states": int(mb - matched.size), **detail}]
        return arr

    def run(self) -> dict[str, Any]:
        """All replicates, one after another (each refits the states: the cost is the state discovery)."""
        return combine_replicates([self.replicate_arrays(i) for i in range(self.n_resamples)])


def combine_replicates(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Stack the per-replicate results of ``arrays_for_seed`` (in replicate order) as ``run()`` returns them."""
    keys = ("Q", "R_success", "R_failure", "pi0", "dropped") + (("start_exits",) if parts and "start_exits" in parts[0]
                                                                 else ())
    out: dict[str, Any] = {k: np.concatenate([p[k] for p in parts]) for k in keys}
    if any("diagnostics" in p for p in parts):
        out["diagnostics"] = [d for p in parts for d in p.get("diagnostics", [])]
    return out


# --------------------------------------------------------------------------------------------------- estimator
class TraceBootstrap(EstimatorDisplay):
    """Non-parametric bootstrap of the chain: resample traces (or tasks) and refit.

    Each replicate weights the resampling units (traces, or tasks) — by default with Poisson(1) weights that are
    functions of each unit's id (``traces._hashing``; the same weights wherever a trace is read, so the partitioned
    engines give the same replicates) — sums the weighted counts and re-estimates the chain. The prior enters every
    replicate as random pseudo-counts (Gamma(a) for a pseudo-count a: the bootstrap of the data *and* of the prior's
    pseudo-episode, as a Dirichlet-process posterior resamples its base measure). Without that, a corpus with no
    failure would give every replicate R∞ = 1 and a zero-width interval; with it the interval behaves like a Jeffreys
    interval of the pass rate when failures are rare.

    Parameters
    ----------
    samples : int, default 200
        Number of replicates B (the paper's default).
    by : {"auto", "trace", "task"}, default "auto"
        Resampling unit. "task" resamples whole tasks (all trials of a task together; traces without a ``task_id``
        are their own task), which respects correlation between trials of the same task; "auto" is "task" when some
        task has two or more traces, else "trace".
    path : {"fast", "full"}, default "fast"
        States fixed (fast, vectorised) or re-discovered on every replicate (full; needs ``states`` to be a state
        estimator such as ``WardStates(...)``).
    weights : {"poisson", "multinomial"}, default "poisson"
        Independent Poisson(1) weights per unit, functions of the unit's id (the Poisson bootstrap; partition-
        friendly), or the classic resampling of n units out of n from ``seed`` (the paper's).
    draw_prior : bool, default True
        Draw the prior's pseudo-counts in every replicate (above); False adds them at their mean (the paper's
        refit).
    states : state estimator, fitted StateModel or None
        None: the traces are already labelled (their ``state`` column, as ``ChainEstimator`` reads it). A fitted
        ``StateModel``: label the traces with it (fast path only). An estimator (``WardStates``,
        ``CategoricalStates``, ``MilestoneStates``): fitted once on all usable traces for the reference, and again
        on every replicate for the full path.
    state_names : sequence of str, optional
        Fix the state order (e.g. an existing chain's ``state_names``), for already-labelled traces.
    relabel : {"fit", "nearest-centroid"}, default "fit"
        Fast path with a Ward estimator: keep the reference clustering's labels, or give each step the state of its
        nearest reference centroid (the artifact's fast path; the reference chain is then refitted on those labels).
    align : {"auto", "centroids", "names", "exit-profile"}, default "auto"
        Full path label alignment: Hungarian on centroids (Ward; "auto" picks it when the estimator has a
        featurizer), by state name (other estimators), or the artifact's greedy R⊕ matching (parity only).
    pseudocount, prior, unvisited, initial
        As :class:`~tracetochain.ChainEstimator`, applied to every replicate and to the reference.
    confidence : float, default 0.95
        Default interval level of the resulting ensemble.
    seed : int, default 0
        Master seed: of the hash weights, of the prior draws, and — multinomial weights and the full path — replicate i
        uses ``SeedSequence(seed).spawn(n_resamples)[i]``. ``None`` draws fresh entropy (recorded in ``info["seed"]``
        so the run can be repeated).
    engine : engine, optional
        Where the replicates run (``tracetochain.engines``: anything with ``map_seeds(fn, seed, n)``). Default: this
        process, with the vectorised driver for the fast path. Every engine gives the same numbers.

    Invalid traces are not resampled (they never count). Episodes that ended before any step (``traces.report.
    zero_step``) are resampling units like the others (or part of their task's unit); they enter every replicate as
    start exits. After ``fit``, ``plan_`` holds the replicate plan
    (``plan_.replicate_arrays(i)``, ``plan_.replicate(i)``, ``plan_.run()``) and ``fetch_model()`` the
    :class:`ChainEnsemble` (method ``"bootstrap"`` or ``"bootstrap-full"``).

    Examples
    --------
    >>> import tracetochain as tt
    >>> traces = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 300, seed=0)
    >>> ens = TraceBootstrap(samples=100, seed=1).fit(traces).fetch_model()
    >>> s = ens.stats("r_inf")
    >>> s.method, s.n_samples, s.lower < s.point < s.upper
    ('bootstrap', 100, True)
    """

    n_resamples = renamed_attribute("n_resamples", "samples")

    @renamed_parameters(n_resamples="samples")
    def __init__(self, *, samples: int = 200, by: By = "auto", path: Path_ = "fast",
                 weights: Weights = "poisson", draw_prior: bool = True, states: Any = None,
                 state_names: Sequence[str] | None = None, relabel: Relabel = "fit", align: Align = "auto",
                 pseudocount: float | None = None, prior: str | None = None,
                 unvisited: Literal["auto", "prior", "failure"] = "auto",
                 initial: Literal["empirical", "modal"] = "empirical", confidence: float = 0.95,
                 seed: int | None = 0, engine: Any = None) -> None:
        self.samples = samples
        self.draw_prior = draw_prior
        self.prior = prior
        self.by = by
        self.path = path
        self.weights = weights
        self.states = states
        self.state_names = state_names
        self.relabel = relabel
        self.align = align
        self.pseudocount = pseudocount
        self.unvisited = unvisited
        self.initial = initial
        self.confidence = confidence
        self.seed = seed
        self.engine = engine
        self.plan_: FastBootstrapPlan | FullBootstrapPlan | None = None
        self._model: ChainEnsemble | None = None

    # ------------------------------------------------------------------ validation
    def _check(self) -> tuple[ChainPrior, str, float]:
        B = self.samples
        if isinstance(B, bool) or not isinstance(B, (int, np.integer)) or B < 1:
            raise ValueError(f"samples must be a positive integer, got {B!r}")
        for name, value, allowed in (("by", self.by, ("auto", "trace", "task")), ("path", self.path, ("fast", "full")),
                                     ("weights", self.weights, ("poisson", "multinomial")),
                                     ("relabel", self.relabel, ("fit", "nearest-centroid")),
                                     ("align", self.align, ("auto", "centroids", "names", "exit-profile")),
                                     ("initial", self.initial, ("empirical", "modal"))):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}; got {value!r}")
        prior = ChainPrior.from_settings(self.pseudocount, self.prior)
        policy = prior.resolve_unvisited(self.unvisited)
        level = check_confidence(self.confidence)
        if self.path == "full" and (self.states is None or not hasattr(self.states, "fit")):
            raise ValueError("path='full' re-discovers the states on every replicate, so it needs a state estimator: "
                             "states=WardStates(...) (or CategoricalStates/MilestoneStates)")
        if self.relabel == "nearest-centroid" and not hasattr(self.states, "featurizer"):
            raise ValueError("relabel='nearest-centroid' needs a clustering state estimator with a featurizer "
                             "(states=WardStates(...))")
        if self.path == "full" and self.align == "centroids" and not hasattr(self.states, "featurizer"):
            raise ValueError("align='centroids' needs a clustering state estimator with a featurizer (WardStates); "
                             "use align='names' for categorical or milestone states")
        return prior, policy, level

    # ------------------------------------------------------------------ states
    def _label(self, usable: TraceTable) -> tuple[NDArray[np.int64], tuple[str, ...], dict[str, Any]]:
        """State codes of every usable step, the state names, and (Ward) the fixed features and centroids."""
        extra: dict[str, Any] = {}
        st = self.states
        if st is None:
            if self.state_names is None:
                codes, names = usable.state_labels()
            else:
                names = [str(s) for s in self.state_names]
                codes = state_codes(usable, names, of="state_names",
                                    hint="add it to state_names or relabel those steps")
            return codes.astype(np.int64), tuple(names), extra
        if not hasattr(st, "fit"):  # a fitted StateModel
            return np.asarray(st.predict(usable), dtype=np.int64), tuple(st.state_names), extra
        estimator = st
        if hasattr(st, "featurizer"):
            from tracetochain.featurize.rules import RuleFeaturizer

            featurizer = st.featurizer if st.featurizer is not None else RuleFeaturizer()
            feat_model = featurizer.fit(usable).fetch_model()
            estimator = copy.copy(st)
            estimator.featurizer = _FrozenFeaturizer(feat_model)
            extra["features"] = np.asarray(feat_model.transform(usable).X, dtype=np.float64)
        model = estimator.fit(usable).fetch_model()
        fitted = getattr(model, "fit_labels", None)
        if fitted is None or np.shape(fitted) != (usable.n_steps,):
            fitted = model.predict(usable)
        codes = np.asarray(fitted, dtype=np.int64)
        state_names = tuple(str(s) for s in model.state_names)
        extra["estimator"] = estimator
        extra["state_model"] = model
        if "features" in extra:
            extra["centroids"] = group_means(extra["features"], codes, len(state_names))
            if self.relabel == "nearest-centroid":
                X, C = extra["features"], extra["centroids"]
                d2 = (X * X).sum(axis=1)[:, None] - 2.0 * X @ C.T + (C * C).sum(axis=1)[None, :]
                codes = np.argmin(d2, axis=1).astype(np.int64)
                extra["centroids"] = group_means(X, codes, len(state_names))
        return codes, state_names, extra

    # ------------------------------------------------------------------ fit
    def fit(self, traces: TraceTable) -> TraceBootstrap:
        """Label (or cluster) the traces, build the replicate plan and run it with the local driver."""
        if not isinstance(traces, TraceTable):
            raise TypeError(f"fit expects a TraceTable (the labelled traces, or raw traces with states=...), got "
                            f"{type(traces).__name__}")
        prior, policy, level = self._check()
        outcomes_all = traces.outcomes()
        usable = traces.select_traces(outcomes_all != _INVALID)
        if usable.n_traces == 0:
            raise EmptyTraceSetError(f"no traces to resample in {traces.report.source}: all "
                                     f"{traces.n_traces} trace(s) are invalid or there are none")
        codes, names, extra = self._label(usable)
        m = len(names)
        K = m * m + 3 * m
        outcomes = usable.outcomes()
        P = per_trace_counts(codes, usable.offsets, outcomes, m)
        zero_all = zero_step_outcome_codes(traces.report.zero_step)
        zero_records = [r for r, o in zip(traces.report.zero_step, zero_all.tolist(), strict=True) if o != _INVALID]
        zero = zero_all[zero_all != _INVALID]
        Z = zero_step_counts(zero) if zero.size else None
        if Z is not None:  # the layout m² + 3m + 2: traces first, then one row per zero-step episode
            P = scipy.sparse.vstack([scipy.sparse.hstack([P, scipy.sparse.csr_matrix((P.shape[0], 2))]),
                                     scipy.sparse.hstack([scipy.sparse.csr_matrix((zero.size, K)), Z])]).tocsr()
        total = np.asarray(P.sum(axis=0), dtype=np.float64)
        n_by = np.bincount(outcomes_all.astype(np.int64), minlength=4) + np.bincount(zero_all, minlength=4)
        counts = TransitionCounts(
            names, total[0, : m * m].reshape(m, m).astype(np.int64), total[0, m * m: m * m + m].astype(np.int64),
            total[0, m * m + m: m * m + 2 * m].astype(np.int64), total[0, m * m + 2 * m: K].astype(np.int64),
            {"success": int(n_by[0]), "failure": int(n_by[1]), "censored": int(n_by[2]), "invalid": int(n_by[3])},
            total[0, K:].astype(np.int64) if Z is not None else np.zeros(2, np.int64))
        from tracetochain.chain import estimate_chain

        reference = estimate_chain(counts, prior=prior, unvisited=policy, initial=self.initial)
        if "state_model" in extra:
            reference = reference.with_metadata(states=extra["state_model"].to_dict())
        if self.seed is None:
            root = np.random.SeedSequence()
            seed_used: int = int(root.entropy)  # type: ignore[arg-type]
        else:
            root = np.random.SeedSequence(int(self.seed))
            seed_used = int(self.seed)
        seeds = tuple(root.spawn(int(self.samples)))
        by = self.by
        ids, task = _episode_ids(usable, zero_records)
        if by == "auto":
            by = "task" if _task_ids_repeat(task) else "trace"
        unit_of_trace, n_units, unit_hash = _units(ids, task, by)
        common: dict[str, Any] = {
            "reference": reference, "reference_counts": counts, "seeds": seeds, "seed": seed_used,
            "unit_of_trace": unit_of_trace, "unit_hashes": unit_hash, "n_units": n_units, "weights": self.weights,
            "n_states": m, "prior": prior, "unvisited_policy": policy, "initial": self.initial,
            "draw_prior": bool(self.draw_prior)}
        plan: FastBootstrapPlan | FullBootstrapPlan
        align = self.align
        if self.path == "fast":
            plan = FastBootstrapPlan(**common, per_trace=P)
        else:
            if align == "auto":
                align = "centroids" if "features" in extra else "names"
            plan = FullBootstrapPlan(**common, traces=usable, zero_step=Z, estimator=extra["estimator"],
                                     features=extra.get("features"), reference_centroids=extra.get("centroids"),
                                     align=align)
        if self.engine is None:
            out = plan.run()
        else:
            out = combine_replicates(self.engine.map_seeds(plan.arrays_for_seed, seed_used, int(self.samples)))
        keep = ~np.asarray(out["dropped"], dtype=bool)
        if not keep.any():
            raise EmptyTraceSetError("every bootstrap replicate drew no traces; use more traces or weights="
                                     "'multinomial'")
        info: dict[str, Any] = {
            "path": self.path, "by": by, "weights": self.weights, "n_resamples": int(self.samples),
            "n_dropped": int((~keep).sum()), "n_traces": usable.n_traces + int(zero.size), "n_units": n_units,
            "prior": prior.to_dict(), "draw_prior": bool(self.draw_prior), "unvisited_policy": policy,
            "initial": self.initial, "seed": seed_used,
            "relabel": self.relabel if self.states is not None and self.path == "fast" else None,
            "align": align if self.path == "full" else None,
            "point_estimator": (f"ChainEstimator({prior.describe()}, unvisited={policy!r}, initial={self.initial!r}) "
                                f"on all {usable.n_traces + int(zero.size)} usable traces"
                                + (" (nearest-centroid labels)" if self.relabel == "nearest-centroid" else "")),
        }
        if "diagnostics" in out:
            diags = out["diagnostics"]
            info["replicates"] = diags
            found = [d.get("n_states_found") for d in diags if "n_states_found" in d]
            info["n_states_found"] = {str(k): found.count(k) for k in sorted(set(found))}
            info["replicates_missing_states"] = sum(1 for d in diags if d.get("missing_reference_states"))
        self.plan_ = plan
        arrays = {"Q": out["Q"][keep], "R_success": out["R_success"][keep], "R_failure": out["R_failure"][keep],
                  "pi0": out["pi0"][keep]}
        if "start_exits" in out:
            arrays["start_exits"] = out["start_exits"][keep]
        self._model = ChainEnsemble(
            reference,
            arrays,
            method="bootstrap" if self.path == "fast" else "bootstrap-full", confidence=level, seed=seed_used,
            info=info)
        return self

    def fetch_model(self) -> ChainEnsemble:
        if self._model is None:
            raise NotFittedError("call fit(traces) before fetch_model()")
        return self._model
