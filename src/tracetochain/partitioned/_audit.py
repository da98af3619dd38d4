"""Audit and intervals of a partitioned corpus in one pass: every partition returns sufficient statistics only.

What each partition returns (all of it adds up over partitions, so any engine and any partitioning give the same
numbers, bit for bit):

* the transition counts of all its usable traces and of its **fit half** (the test half is their difference);
* per half: the histogram of success times (a successful trace's number of steps), the number of usable traces and
  the longest one: what the KS timing layer, the R∞ check and the empirical RDC need;
* per half: the counts n[prev, cur, next] of the order test's observations (:func:`~tracetochain.audit.
  order_triplets`), enough for ℓ1, ℓ2, G², AIC, BIC and a permutation p-value;
* B bootstrap replicates of the counts of all usable traces.

Which half a trace is in, and its bootstrap weights, are functions of its id (the 64-bit FNV-1a hash of
:func:`~tracetochain.partitioned.trace_id_hashes`) and the seed, never of where the trace was read: a trace is held
out iff u(id, seed) < ``test_fraction`` (u uniform on [0, 1) from SplitMix64), and its weight in replicate b is a
Poisson(1) draw by inversion of a second SplitMix64 uniform of (id, seed, b). The Poisson bootstrap (Hanley &
MacGibbon 2006; Chamandy et al. 2012, "Estimating uncertainty for massive data streams") resamples whole traces,
like :class:`~tracetochain.uncertainty.TraceBootstrap` with ``weights="poisson"``, and needs no global resample
size, so it is computed partition by partition. Replicate b's counts are Σ_traces w_tb · (the trace's counts).
"""

from __future__ import annotations

import functools
import html
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from tracetochain.audit import (
    Certificate,
    OrderSettings,
    TimingSettings,
    certify,
    ks_calibrated_times,
    l_inf_distance,
    order_observations_from_codes,
    order_test_counts,
    order_triplets,
    r_inf_check_counts,
)
from tracetochain.audit._certificate import _settings_from
from tracetochain.chain import AbsorbingChain, TransitionCounts, count_transitions_from_codes, estimate_chain
from tracetochain.engines import Engine, get_engine
from tracetochain.exceptions import EmptyTraceSetError, TraceValidationError
from tracetochain.partitioned._counts import (
    PartitionedCounts,
    _check_unique_traces,
    _merge,
    _pad_counts,
    _Partial,
    _resolve_states,
    ingest_report,
    label_partition,
    partial_of,
    source_name,
)
from tracetochain.partitioned._ingest import (
    DEFAULT_BYTES_PER_PARTITION,
    DEFAULT_ROWS_PER_PARTITION,
    OnError,
    Partition,
    PartitionBy,
    _table_trace_ids,
    plan_partitions,
    trace_id_hashes,
)
from tracetochain.states import StateModel
from tracetochain.uncertainty import ChainEnsemble, DirichletPosterior
from tracetochain.uncertainty._bootstrap import estimate_batch, per_trace_counts
from tracetochain.uncertainty._dirichlet import resolve_unvisited

Intervals = Literal["bootstrap", "posterior", "none"]

_SUCCESS, _INVALID = 0, 3
_FIT, _TEST = 0, 1
_SPLIT_STREAM = np.uint64(0x5EED_5B11_7000_0001)
_BOOT_STREAM = np.uint64(0x5EED_B007_0000_0002)
_WEIGHT_BLOCK = 32  # replicates per weight block (bounds the n_traces × block weight matrix of a partition)
_POISSON_MAX = 24  # P(Poisson(1) > 24) < 1e-25: weights are capped there
_TO_UNIT = 2.0 ** -53


# ---------------------------------------------------------------------------------------------------- hashing
def _splitmix64(x: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """SplitMix64's output function (Steele, Lea & Flood 2014): a bijective 64-bit mixer, vectorised."""
    z = x + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    out: NDArray[np.uint64] = z ^ (z >> np.uint64(31))
    return out


def _unit(keys: NDArray[np.uint64]) -> NDArray[np.float64]:
    """Uniforms on [0, 1) from 64-bit keys (the top 53 bits)."""
    out: NDArray[np.float64] = (keys >> np.uint64(11)).astype(np.float64) * _TO_UNIT
    return out


def _stream_key(stream: np.uint64, seed: int, index: int = 0) -> np.uint64:
    key = _splitmix64(np.array([stream ^ np.uint64(seed & 0xFFFF_FFFF_FFFF_FFFF)], dtype=np.uint64))
    return np.uint64(_splitmix64(key + np.uint64(index))[0])


def holdout_mask(hashes: NDArray[np.uint64], test_fraction: float, seed: int) -> NDArray[np.bool_]:
    """True for the traces held out: u(id, seed) < ``test_fraction``, a function of the trace id alone.

    >>> import pyarrow as pa
    >>> h = trace_id_hashes(pa.array([f"t{i}" for i in range(10_000)]))
    >>> abs(float(holdout_mask(h, 0.5, 0).mean()) - 0.5) < 0.02
    True
    """
    if not 0.0 <= test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in [0, 1), got {test_fraction!r}")
    out: NDArray[np.bool_] = _unit(_splitmix64(hashes ^ _stream_key(_SPLIT_STREAM, seed))) < test_fraction
    return out


@functools.cache
def _poisson1_cdf() -> NDArray[np.float64]:
    from scipy.stats import poisson

    out: NDArray[np.float64] = poisson.cdf(np.arange(_POISSON_MAX), 1.0)
    return out


def poisson_weights(hashes: NDArray[np.uint64], seed: int, replicates: range) -> NDArray[np.float64]:
    """Poisson(1) bootstrap weights, (n_traces × len(replicates)): weight of trace t in replicate b is the
    inverse-CDF Poisson(1) draw of u(id_t, seed, b), the same wherever the trace is read.

    >>> import pyarrow as pa
    >>> h = trace_id_hashes(pa.array([f"t{i}" for i in range(20_000)]))
    >>> w = poisson_weights(h, 0, range(4))
    >>> w.shape, round(float(w.mean()), 1), round(float(w.var()), 1)
    ((20000, 4), 1.0, 1.0)
    """
    cdf = _poisson1_cdf()
    out = np.empty((hashes.size, len(replicates)), dtype=np.float64)
    for k, b in enumerate(replicates):
        u = _unit(_splitmix64(hashes ^ _stream_key(_BOOT_STREAM, seed, b)))
        out[:, k] = np.searchsorted(cdf, u, side="right")
    return out


# ---------------------------------------------------------------------------------------------------- partitions
@dataclass(frozen=True, eq=False)
class _AuditPartial:
    """The sufficient statistics of a run of consecutive partitions, in the vocabulary ``base.counts.state_names``.

    ``fit``: counts of the fit half; ``visits``: steps per state in usable traces; ``success_times[h]``: histogram of
    success times of half h (0 fit, 1 test);
    ``n_usable``, ``n_success``, ``longest``: per half; ``triplets[h]``: order-test counts n[prev, cur, next] of
    half h; ``boot``: (B, m² + 3m) replicate counts of all usable traces (B = 0 when no bootstrap).
    """

    base: _Partial
    fit: TransitionCounts
    visits: NDArray[np.int64]
    success_times: NDArray[np.int64]
    n_usable: NDArray[np.int64]
    n_success: NDArray[np.int64]
    longest: NDArray[np.int64]
    triplets: NDArray[np.int64]
    boot: NDArray[np.float64]

    @property
    def names(self) -> tuple[str, ...]:
        return self.base.counts.state_names


def _subset(codes: NDArray[np.int64], offsets: NDArray[np.int64],
            keep: NDArray[np.bool_]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Codes and offsets of the traces ``keep`` (in order)."""
    lengths = np.diff(offsets)
    rows = np.repeat(keep, lengths)
    new_offsets = np.concatenate([[0], np.cumsum(lengths[keep])]).astype(np.int64)
    return codes[rows], new_offsets


def _audit_partition(part: Partition, *, on_error: OnError, model: StateModel | None, holdout: bool,
                     test_fraction: float, seed: int, n_resamples: int, include_outcomes: bool) -> _AuditPartial:
    traces = part.read(on_error=on_error, defer_step_gaps=True)
    codes, names = label_partition(part, traces, model)
    m = len(names)
    offsets, outcomes = traces.offsets, traces.outcomes()
    hashes = trace_id_hashes(_table_trace_ids(traces))
    base = partial_of(part, traces, count_transitions_from_codes(codes, offsets, outcomes, names), hashes, codes)
    test = holdout_mask(hashes, test_fraction, seed) if holdout else np.zeros(hashes.size, bool)
    lengths = np.diff(offsets)
    usable = outcomes != _INVALID
    c_fit, o_fit = _subset(codes, offsets, ~test)
    fit = count_transitions_from_codes(c_fit, o_fit, outcomes[~test], names)
    s = m + 2 if include_outcomes else m
    halves = (~test, test)
    longest = np.array([int(lengths[h & usable].max()) if np.any(h & usable) else 0 for h in halves], np.int64)
    top = int(longest.max())
    times = np.zeros((2, top + 1), np.int64)
    triplets = np.zeros((2, m + 1, m, s), np.int64)
    for k, h in enumerate(halves):
        done = h & (outcomes == _SUCCESS)
        times[k] = np.bincount(lengths[done], minlength=top + 1)[: top + 1]
        c_h, o_h = _subset(codes, offsets, h)
        obs = order_observations_from_codes(c_h, o_h, outcomes[h], m, include_outcomes=include_outcomes)
        triplets[k] = order_triplets(obs)
    visits = np.bincount(codes[np.repeat(usable, lengths)], minlength=m).astype(np.int64)
    n_usable = np.array([int(np.count_nonzero(h & usable)) for h in halves], np.int64)
    n_success = np.array([int(np.count_nonzero(h & (outcomes == _SUCCESS))) for h in halves], np.int64)
    boot = np.zeros((n_resamples, m * m + 3 * m))
    if n_resamples and np.any(usable):
        c_u, o_u = _subset(codes, offsets, usable)
        P_T = per_trace_counts(c_u, o_u, outcomes[usable], m).T.tocsr()
        h_u = hashes[usable]
        for start in range(0, n_resamples, _WEIGHT_BLOCK):
            stop = min(n_resamples, start + _WEIGHT_BLOCK)
            boot[start:stop] = np.asarray(P_T @ poisson_weights(h_u, seed, range(start, stop))).T
    return _AuditPartial(base, fit, visits, times, n_usable, n_success, longest, triplets, boot)


# ---------------------------------------------------------------------------------------------------- merging
def _positions(old: tuple[str, ...], new: tuple[str, ...]) -> NDArray[np.int64]:
    pos = {s: i for i, s in enumerate(new)}
    return np.array([pos[s] for s in old], dtype=np.int64)




def _remap_triplets(t: NDArray[np.int64], idx: NDArray[np.int64], M: int, include_outcomes: bool) -> NDArray[np.int64]:
    """(2, m+1, m, s) → (2, M+1, M, S): states to their new positions, START and the outcomes to the new ends."""
    m = idx.size
    if m == M and np.array_equal(idx, np.arange(m)):
        return t
    prev = np.append(idx, M)
    nxt = np.concatenate([idx, [M, M + 1]]) if include_outcomes else idx
    out = np.zeros((t.shape[0], M + 1, M, M + 2 if include_outcomes else M), np.int64)
    out[:, prev[:, None, None], idx[None, :, None], nxt[None, None, :]] = t
    return out


def _remap_layout(x: NDArray[np.float64], idx: NDArray[np.int64], M: int) -> NDArray[np.float64]:
    """(B, m² + 3m) per-trace-count layout → (B, M² + 3M) (see :func:`~tracetochain.uncertainty._bootstrap.
    per_trace_counts`)."""
    m = idx.size
    if m == M and np.array_equal(idx, np.arange(m)):
        return x
    out = np.zeros((x.shape[0], M * M + 3 * M))
    out[:, (idx[:, None] * M + idx[None, :]).ravel()] = x[:, : m * m]
    for k in range(3):
        out[:, M * M + k * M + idx] = x[:, m * m + k * m: m * m + (k + 1) * m]
    return out


def _reindexed(a: _AuditPartial, names: tuple[str, ...], include_outcomes: bool) -> _AuditPartial:
    if a.names == names:
        return a
    idx = _positions(a.names, names)
    M = len(names)
    base = replace(a.base, counts=_pad_counts(a.base.counts, names))
    visits = np.zeros(M, np.int64)
    visits[idx] = a.visits
    return replace(a, base=base, fit=_pad_counts(a.fit, names), visits=visits,
                   triplets=_remap_triplets(a.triplets, idx, M, include_outcomes),
                   boot=_remap_layout(a.boot, idx, M))


def _add_hist(x: NDArray[np.int64], y: NDArray[np.int64]) -> NDArray[np.int64]:
    n = max(x.shape[1], y.shape[1])
    out = np.zeros((2, n), np.int64)
    out[:, : x.shape[1]] += x
    out[:, : y.shape[1]] += y
    return out


def _merge_audit(a: _AuditPartial, b: _AuditPartial, *, include_outcomes: bool) -> _AuditPartial:
    """Sum two partials; states keep their order of first appearance (as :func:`count_partitioned`)."""
    base = _merge(a.base, b.base)
    names = base.counts.state_names
    a, b = _reindexed(a, names, include_outcomes), _reindexed(b, names, include_outcomes)
    fit = TransitionCounts(names, a.fit.transitions + b.fit.transitions, a.fit.exits_success + b.fit.exits_success,
                           a.fit.exits_failure + b.fit.exits_failure, a.fit.initial + b.fit.initial,
                           {k: a.fit.n_traces[k] + b.fit.n_traces[k] for k in a.fit.n_traces})
    return _AuditPartial(base, fit, a.visits + b.visits, _add_hist(a.success_times, b.success_times),
                         a.n_usable + b.n_usable,
                         a.n_success + b.n_success, np.maximum(a.longest, b.longest), a.triplets + b.triplets,
                         a.boot + b.boot)


def summarize_partitions(parts: list[Partition], engine: Engine, *, model: StateModel | None,
                         vocab: tuple[str, ...] | None, source: str, on_error: OnError, holdout: bool,
                         test_fraction: float, seed: int, n_resamples: int, include_outcomes: bool,
                         check_traces: bool) -> _AuditPartial:
    """One pass over ``parts`` on ``engine``: the merged sufficient statistics, in the fixed vocabulary ``vocab``
    when given (else the states in order of first appearance), with every trace checked to be in one partition."""
    fn = functools.partial(_audit_partition, on_error=on_error, model=model, holdout=holdout,
                           test_fraction=test_fraction, seed=seed, n_resamples=n_resamples,
                           include_outcomes=include_outcomes)
    acc: _AuditPartial = engine.map_reduce(fn, parts, functools.partial(_merge_audit,
                                                                        include_outcomes=include_outcomes))
    _check_unique_traces(acc.base, parts, on_error, check_split=check_traces)
    if vocab is not None:
        missing = [s for s in acc.names if s not in set(vocab)]
        if missing:
            raise TraceValidationError(f"state {missing[0]!r} occurs in the traces but is not in the given states",
                                       source=source, field="state",
                                       hint=f"add it to the state list ({len(missing)} label(s) missing) or relabel "
                                            "those steps")
        acc = _reindexed(acc, tuple(vocab), include_outcomes)
    return acc


# ---------------------------------------------------------------------------------------------------- result
@dataclass(frozen=True, eq=False)
class PartitionedAudit:
    """A partitioned corpus fitted, audited and given intervals (:func:`audit_partitioned`).

    ``chain`` is fitted on all usable traces (what a report shows); ``certificate`` audits, as
    :func:`~tracetochain.audit.audit` does, the chain of the fit half against the held-out half (or ``chain``
    in-sample when ``holdout=False``); ``ensemble`` holds the replicate chains behind the intervals of ``chain``
    (None with ``intervals="none"``); ``counts`` the merged counts and ingest report; ``timings`` the wall seconds
    of the pass over the partitions (read, label, count: ``"partitions"``), of the certificate layers
    (``"audit"``) and of the ensemble (``"intervals"``); ``success_time_counts[k]`` the number of successful
    traces of k steps and ``state_visits`` the steps per state, over all usable traces.
    """

    chain: AbsorbingChain
    certificate: Certificate
    ensemble: ChainEnsemble | None
    counts: PartitionedCounts
    settings: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    success_time_counts: NDArray[np.int64] = field(default_factory=lambda: np.zeros(1, np.int64), repr=False)
    state_visits: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)

    @property
    def n_usable(self) -> int:
        """Traces that count (success, failure, censored; invalid ones excluded)."""
        return int(self.counts.counts.n_fitted_traces)

    def empirical_rdc(self, horizon: int) -> NDArray[np.float64]:
        """R̂(d), d = 0..horizon: successes within d steps over all usable traces (as :func:`~tracetochain.metrics.
        empirical_rdc` on the whole table)."""
        c = np.zeros(horizon + 1, np.int64)
        k = min(horizon + 1, self.success_time_counts.size)
        c[:k] = self.success_time_counts[:k]
        out: NDArray[np.float64] = np.cumsum(c) / max(1, self.n_usable)
        return out

    def interval_summary(self, **options: Any) -> dict[str, Any]:
        """:func:`~tracetochain.uncertainty.interval_summary` of the ensemble (every metric with its interval)."""
        from tracetochain.uncertainty import interval_summary

        if self.ensemble is None:
            raise ValueError("no intervals were computed (intervals='none')")
        return interval_summary(self.ensemble, **options)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "tracetochain.partitioned_audit", "settings": self.settings, "counts": self.counts.to_dict(),
            "chain": self.chain.to_dict(), "certificate": self.certificate.to_dict()}
        if self.ensemble is not None:
            s = self.ensemble.stats("r_inf")
            out["r_inf_interval"] = {"point": s.point, "lower": s.lower, "upper": s.upper,
                                     "method": self.ensemble.method, "n_samples": s.n_samples}
        return out

    def __str__(self) -> str:
        lines = [str(self.counts).splitlines()[0], f"R∞ = {self.chain.r_inf:.4f}"]
        if self.ensemble is not None:
            s = self.ensemble.stats("r_inf")
            lines[-1] += f" [{s.lower:.4f}, {s.upper:.4f}] ({self.ensemble.method}, {s.n_samples} replicates)"
        lines.append(str(self.certificate))
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        head = html.escape("\n".join(str(self).splitlines()[:2]))
        return f"<div><pre>{head}</pre>{self.certificate._repr_html_()}</div>"


# ---------------------------------------------------------------------------------------------------- driver
def audit_partitioned(source: str | Path | Sequence[str | Path], *, engine: Engine | str | None = None,
                      states: Any = None, pseudocount: float = 1.0, unvisited: str = "auto",
                      initial: str = "empirical", holdout: bool = True, test_fraction: float = 0.5, seed: int = 0,
                      timing: TimingSettings | None = None, order: OrderSettings | None = None,
                      horizon: int | None = None, interval: Literal["wilson", "clopper-pearson"] = "wilson",
                      confidence: float = 0.95, intervals: Intervals = "bootstrap", n_resamples: int = 200,
                      on_error: OnError = "raise", format: str | None = None, by: PartitionBy = "range",
                      rows_per_partition: int = DEFAULT_ROWS_PER_PARTITION,
                      bytes_per_partition: int = DEFAULT_BYTES_PER_PARTITION, check_traces: bool = True,
                      state_options: dict[str, Any] | None = None, **layer_options: Any) -> PartitionedAudit:
    """Fit, audit and bound a corpus too large for memory, in one pass over its partitions on ``engine``.

    The certificate follows :func:`~tracetochain.audit.audit`: with ``holdout`` the traces are split by id
    (``test_fraction`` held out, module docstring), the chain of the fit half is audited on the held-out half (KS
    timing layer with ``refit="train"``, R∞ against the held-out pass rate, L∞ between R(d) and the held-out RDC)
    and the order layer runs on the fit half; without it everything is in-sample. The KS bootstrap simulates at
    most ``max_simulated_traces`` traces per replicate (10,000 by default) and rescales (:func:`~tracetochain.audit.
    ks_calibrated`), so its cost does not grow with the corpus. The order layer's permutation p-value is drawn as
    random tables with the observed margins (:func:`~tracetochain.audit.order_test_counts`). The i.i.d.-trials
    check needs per-task grouping and is not run here.

    Parameters
    ----------
    source, engine, states, on_error, format, by, rows_per_partition, bytes_per_partition, check_traces
        As in :func:`count_partitioned` (``state_options`` go to a state spec string).
    pseudocount, unvisited, initial
        Chain-estimator settings.
    holdout, test_fraction, seed
        The id-based split, and the seed of the split, the bootstrap weights and (spawned) the KS bootstrap and
        permutation test.
    timing, order, horizon, interval, confidence, layer_options
        As in :func:`~tracetochain.audit.audit` (shortcuts such as ``n_bootstrap=``, ``n_permutations=``,
        ``order_criterion=``, ``max_simulated_traces=``).
    intervals : {"bootstrap", "posterior", "none"}, default "bootstrap"
        How the ensemble behind the intervals of ``chain`` is made: the Poisson bootstrap over trace ids with
        ``n_resamples`` replicates (resamples whole traces; robust to dependence within a trace), the Dirichlet
        posterior of the counts (``n_resamples`` draws; assumes the chain), or none.
    """
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    if intervals not in ("bootstrap", "posterior", "none"):
        raise ValueError(f"intervals must be 'bootstrap', 'posterior' or 'none', got {intervals!r}")
    if intervals != "none" and n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if holdout and not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction!r}")
    timing, order = _settings_from(timing, order, layer_options)
    if timing.mode != "calibrated" or order.mode != "per-trace":
        raise ValueError("a partitioned audit runs the calibrated KS and the per-trace order test only (the paper's "
                         "and the artifact's modes need every trace in memory)")
    ks_seed, order_seed, _ = np.random.SeedSequence(seed).spawn(3)
    parts = plan_partitions(source, format=format, by=by, rows_per_partition=rows_per_partition,
                            bytes_per_partition=bytes_per_partition)
    model, vocab = _resolve_states(states, parts, on_error, dict(state_options or {}))
    n_boot = n_resamples if intervals == "bootstrap" else 0
    owns = not isinstance(engine, Engine)
    eng: Engine = get_engine(engine) if owns else engine  # type: ignore[assignment]
    src = source_name(source)
    t0 = time.perf_counter()
    try:
        acc = summarize_partitions(parts, eng, model=model, vocab=vocab, source=src, on_error=on_error,
                                   holdout=holdout, test_fraction=test_fraction, seed=seed, n_resamples=n_boot,
                                   include_outcomes=order.include_outcomes, check_traces=check_traces)
    finally:
        if owns:
            eng.close()
    t1 = time.perf_counter()
    names = acc.names
    all_counts = acc.base.counts
    if sum(all_counts.n_traces[k] for k in ("success", "failure", "censored")) == 0:
        raise EmptyTraceSetError(f"no usable traces in {src}: every trace is invalid or there are none")
    a = float(pseudocount)
    policy = resolve_unvisited(unvisited, a)
    state_md = {"states": model.to_dict()} if model is not None else {}
    chain = estimate_chain(all_counts, a, policy, initial)  # type: ignore[arg-type]
    if state_md:
        chain = chain.with_metadata(**state_md)
    costs = acc.base.costs.reindexed(chain.state_names) if acc.base.costs is not None else None
    if costs is not None:
        chain = chain.with_metadata(costs=costs.to_dict())
    counts_result = PartitionedCounts(all_counts, ingest_report(acc.base, all_counts, src, parts[0].format),
                                      len(parts), eng.name, model, costs)

    # --- the certificate
    h_aud = _TEST if holdout else _FIT  # the half whose times are tested (in-sample: everything is in "fit")
    if holdout:
        if acc.n_usable[_FIT] == 0 or acc.n_usable[_TEST] == 0:
            raise EmptyTraceSetError(f"the id-based split of {src} left a half without usable traces "
                                     f"({int(acc.n_usable[_FIT])} fit, {int(acc.n_usable[_TEST])} held out); use "
                                     "more traces or holdout=False")
        audited = estimate_chain(acc.fit, a, policy, initial)  # type: ignore[arg-type]
        if state_md:
            audited = audited.with_metadata(**state_md)
    else:
        audited = chain
    hist = acc.success_times[h_aud]
    times = np.repeat(np.arange(hist.size, dtype=np.int64), hist)
    n_aud = int(acc.n_usable[h_aud])
    timing_res = ks_calibrated_times(
        audited, times, n_usable=n_aud, longest=int(acc.longest[h_aud]), refit="train" if holdout else "same",
        n_fit_traces=int(acc.n_usable[_FIT]) if holdout else None, n_bootstrap=timing.n_bootstrap, seed=ks_seed,
        max_steps=timing.max_steps, max_simulated_traces=timing.max_simulated_traces)
    order_res = order_test_counts(
        acc.triplets[_FIT], names, n_traces=int(acc.n_usable[_FIT]),
        include_outcomes=order.include_outcomes, parameter_count=order.parameter_count, criterion=order.criterion,
        level=order.level, n_permutations=order.n_permutations, seed=order_seed)
    rinf = r_inf_check_counts(audited.r_inf, int(acc.n_success[h_aud]), n_aud, method=interval,
                              confidence=confidence, in_sample=not holdout,
                              n_fit=int(acc.n_usable[_FIT]) if holdout else None)
    D = int(acc.longest[h_aud]) if horizon is None else int(horizon)
    model_rdc = audited.reliability(D)
    padded = np.zeros(D + 1, np.int64)
    padded[: min(D + 1, hist.size)] = hist[: D + 1]
    emp_rdc = np.cumsum(padded) / n_aud
    split_info = ({"by": "trace id (hash)", "test_fraction": test_fraction, "seed": seed,
                   "n_train": int(acc.fit.n_fitted_traces + acc.fit.n_traces["invalid"]),
                   "n_test": int(all_counts.n_fitted_traces + all_counts.n_traces["invalid"]
                                 - acc.fit.n_fitted_traces - acc.fit.n_traces["invalid"]),
                   "n_test_dropped": 0} if holdout else None)
    settings: dict[str, Any] = {
        "states": states if isinstance(states, str) or states is None else type(states).__name__,
        "state_options": dict(state_options or {}), "pseudocount": a, "unvisited": unvisited, "initial": initial,
        "holdout": holdout, "test_fraction": test_fraction if holdout else None,
        "split_by": "trace id (hash)" if holdout else None, "seed": seed, "timing": timing.to_dict(),
        "order": order.to_dict(), "interval": interval, "confidence": confidence, "trials": False,
        "partial_when": "timing", "engine": eng.name, "n_partitions": len(parts),
        "seeds": {"split": f"SplitMix64(trace id hash, {seed})" if holdout else None,
                  "timing": f"SeedSequence({seed}).spawn(3)[0]", "order": f"SeedSequence({seed}).spawn(3)[1]",
                  "bootstrap": f"Poisson(1) by inversion of SplitMix64(trace id hash, {seed}, b)"},
    }
    certificate = certify(timing_res, order_res, rinf, ks_level=timing.level, l_inf=l_inf_distance(model_rdc,
                          emp_rdc), horizon=D, holdout=split_info, settings=settings, chain=audited,
                          state_model=model, model_rdc=tuple(float(x) for x in model_rdc),
                          empirical_rdc=tuple(float(x) for x in emp_rdc))

    # --- the intervals
    t2 = time.perf_counter()
    ensemble: ChainEnsemble | None = None
    if intervals == "bootstrap":
        ensemble = _bootstrap_ensemble(chain, acc, a, policy, initial, n_resamples, seed, confidence)
    elif intervals == "posterior":
        post = DirichletPosterior(pseudocount=a, confidence=confidence, n_samples=n_resamples, seed=seed,
                                  unvisited=unvisited).fit(chain).fetch_model()  # type: ignore[arg-type]
        ensemble = post.ensemble
    settings["intervals"] = intervals
    settings["n_resamples"] = n_resamples if intervals != "none" else None
    timings = {"partitions": t1 - t0, "audit": t2 - t1, "intervals": time.perf_counter() - t2}
    return PartitionedAudit(chain, certificate, ensemble, counts_result, settings, timings,
                            acc.success_times.sum(axis=0), acc.visits)



def bootstrap_partitioned(source: str | Path | Sequence[str | Path], *, engine: Engine | str | None = None,
                          states: Any = None, state_options: dict[str, Any] | None = None, pseudocount: float = 1.0,
                          unvisited: str = "auto", initial: str = "empirical", n_resamples: int = 200, seed: int = 0,
                          confidence: float = 0.95, on_error: OnError = "raise", format: str | None = None,
                          by: PartitionBy = "range", rows_per_partition: int = DEFAULT_ROWS_PER_PARTITION,
                          bytes_per_partition: int = DEFAULT_BYTES_PER_PARTITION,
                          check_traces: bool = True) -> tuple[AbsorbingChain, ChainEnsemble]:
    """The chain of a partitioned corpus and its Poisson bootstrap over trace ids (module docstring), without the
    audit: ``(chain, ensemble)``; ``interval_summary(ensemble)`` gives every metric with its interval. The same
    numbers as ``audit_partitioned(..., intervals="bootstrap")``'s chain and ensemble."""
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    parts = plan_partitions(source, format=format, by=by, rows_per_partition=rows_per_partition,
                            bytes_per_partition=bytes_per_partition)
    model, vocab = _resolve_states(states, parts, on_error, dict(state_options or {}))
    owns = not isinstance(engine, Engine)
    eng: Engine = get_engine(engine) if owns else engine  # type: ignore[assignment]
    src = source_name(source)
    try:
        acc = summarize_partitions(parts, eng, model=model, vocab=vocab, source=src, on_error=on_error,
                                   holdout=False, test_fraction=0.0, seed=seed, n_resamples=n_resamples,
                                   include_outcomes=True, check_traces=check_traces)
    finally:
        if owns:
            eng.close()
    counts = acc.base.counts
    if counts.n_fitted_traces == 0:
        raise EmptyTraceSetError(f"no usable traces in {src}: every trace is invalid or there are none")
    a = float(pseudocount)
    policy = resolve_unvisited(unvisited, a)
    chain = estimate_chain(counts, a, policy, initial)  # type: ignore[arg-type]
    if model is not None:
        chain = chain.with_metadata(states=model.to_dict())
    if acc.base.costs is not None:
        chain = chain.with_metadata(costs=acc.base.costs.reindexed(chain.state_names).to_dict())
    return chain, _bootstrap_ensemble(chain, acc, a, policy, initial, n_resamples, seed, confidence)


def _bootstrap_ensemble(chain: AbsorbingChain, acc: _AuditPartial, a: float, policy: str, initial: str,
                        n_resamples: int, seed: int, confidence: float) -> ChainEnsemble:
    """The ensemble of the replicate counts in ``acc`` (replicates that drew no trace are dropped and counted)."""
    m = chain.n_states
    counts = acc.base.counts
    arr = estimate_batch(acc.boot, m, a, policy, initial)
    keep = acc.boot[:, m * m + 2 * m:].sum(axis=1) > 0
    info = {"weights": "poisson (by trace id)", "n_resamples": n_resamples, "n_dropped": int((~keep).sum()),
            "n_traces": int(counts.n_fitted_traces), "pseudocount": a, "unvisited_policy": policy,
            "initial": initial, "seed": seed,
            "point_estimator": f"ChainEstimator(pseudocount={a!r}, unvisited={policy!r}, initial={initial!r}) "
                               f"on all {counts.n_fitted_traces} usable traces"}
    return ChainEnsemble(chain, {k: v[keep] for k, v in arr.items()}, method="bootstrap", confidence=confidence,
                         seed=seed, info=info)


__all__ = ["PartitionedAudit", "audit_partitioned", "bootstrap_partitioned", "holdout_mask", "poisson_weights"]
