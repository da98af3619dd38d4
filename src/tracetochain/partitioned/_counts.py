"""Counting partition by partition on an engine: partial counts, their merge, the whole-corpus fit."""

from __future__ import annotations

import functools
import html
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from tracetochain._limits import check_state_count
from tracetochain.chain import AbsorbingChain, ChainEstimator, TransitionCounts, count_transitions_from_codes
from tracetochain.costs._model import CostModel, reader_name, trace_totals, usage_arrays
from tracetochain.engines import Engine, get_engine
from tracetochain.exceptions import EmptyTraceSetError, TraceToChainError, TraceValidationError
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
from tracetochain.traces import IngestReport, Outcome, Problem, TraceTable
from tracetochain.traces._table import STEP_GAP_HINT

_MAX_PROBLEMS = 50
_INVALID = 3



# ---------------------------------------------------------------------------------------------------- counting
@dataclass(frozen=True, eq=False)
class _Partial:
    """Counts of a run of consecutive partitions, with what is needed to merge them and check the traces."""

    counts: TransitionCounts
    hashes: NDArray[np.uint64]
    spans: tuple[tuple[int, int], ...]  # (partition index, traces) in partition order
    n_records: int
    n_records_skipped: int
    n_traces_skipped: int
    skipped_by_reason: dict[str, int]
    problems: tuple[Problem, ...]
    #: Per-state usage statistics (tokens, dollars, seconds) of the partition's usable traces; they add up too.
    costs: CostModel | None = None
    #: Traces with missing steps, as (trace-id hash, partition index, trace id, message, location); dropped from the
    #: counts, and reported once it is known whether their other steps are in another partition.
    step_gaps: tuple[tuple[int, int, str, str, int], ...] = ()


def partition_costs(traces: TraceTable, codes: NDArray[np.int64], names: tuple[str, ...]) -> CostModel:
    """The cost model of a partition's usable (non-invalid) traces, over its state codes."""
    keep = traces.outcomes() != _INVALID
    if keep.all():
        usable, kept = traces, codes
    else:
        usable = traces.select_traces(keep)
        kept = codes[np.repeat(keep, np.diff(traces.offsets))]
    table = usable.to_arrow()
    values, derivation = usage_arrays(table, usable.offsets)
    return CostModel.from_arrays(kept, usable.offsets, names, values, trace_totals(table, usable.offsets),
                                 source_format=reader_name(traces.report.format), derivation=derivation)


def _count_partition(part: Partition, *, on_error: OnError, model: StateModel | None,
                     check_traces: bool) -> _Partial:
    traces = part.read(on_error=on_error, defer_step_gaps=True)
    codes, names = label_partition(part, traces, model)
    counts = count_transitions_from_codes(codes, traces.offsets, traces.outcomes(), names)
    hashes = trace_id_hashes(_table_trace_ids(traces)) if check_traces else np.zeros(0, np.uint64)
    return partial_of(part, traces, counts, hashes, codes)


def partial_of(part: Partition, traces: TraceTable, counts: TransitionCounts,
               hashes: NDArray[np.uint64], codes: NDArray[np.int64] | None = None) -> _Partial:
    """The :class:`_Partial` of one partition: its counts, trace-id hashes and ingest report (and, given the state
    ``codes`` of its steps, its cost statistics)."""
    r = traces.report
    late = tuple((int(h), part.index, tid, message, loc) for (tid, message, loc), h in zip(
        r.step_gaps[:_MAX_PROBLEMS], trace_id_hashes(pa.array([t for t, _, _ in r.step_gaps[:_MAX_PROBLEMS]],
                                                                pa.string())), strict=True))
    costs = partition_costs(traces, codes, counts.state_names) if codes is not None else None
    return _Partial(counts, hashes, ((part.index, traces.n_traces),), r.n_records, r.n_records_skipped,
                    r.n_traces_skipped, dict(r.skipped_by_reason), tuple(r.problems[:_MAX_PROBLEMS]), costs,
                    step_gaps=late)


def label_partition(part: Partition, traces: TraceTable,
                    model: StateModel | None) -> tuple[NDArray[np.int64], tuple[str, ...]]:
    """State code of every step and the partition's state names: its own labels, or the model's prediction."""
    if model is None:
        codes, names = traces.state_labels()
        return np.asarray(codes, dtype=np.int64), tuple(names)
    codes = np.asarray(model.predict(traces), dtype=np.int64)
    names_t = tuple(model.state_names)
    if codes.shape != (traces.n_steps,) or (codes.size and (codes.min() < 0 or codes.max() >= len(names_t))):
        raise TraceToChainError(
            f"{part.describe()}: the state model gave no valid state to some steps (probably a category it did "
            f"not see when it was fitted); fit the states on a larger sample, or use states='label' or "
            f"CategoricalStates(keep_unobserved=True)")
    return codes, names_t


def _pad_counts(c: TransitionCounts, names: tuple[str, ...]) -> TransitionCounts:
    """``c`` re-indexed into the vocabulary ``names`` (a superset of its own)."""
    if c.state_names == names:
        return c
    pos = {s: i for i, s in enumerate(names)}
    idx = np.array([pos[s] for s in c.state_names], dtype=np.int64)
    m = len(names)
    check_state_count(m, "the traces")  # the merged vocabulary, before the m × m matrix is allocated
    T = np.zeros((m, m), np.int64)
    if idx.size:
        T[np.ix_(idx, idx)] = c.transitions

    def vec(v: NDArray[np.int64]) -> NDArray[np.int64]:
        out = np.zeros(m, np.int64)
        out[idx] = v
        return out

    return TransitionCounts(names, T, vec(c.exits_success), vec(c.exits_failure), vec(c.initial), dict(c.n_traces))


def _merge(a: _Partial, b: _Partial) -> _Partial:
    """Sum two partial counts; the states keep their order of first appearance (``a`` comes first)."""
    names = a.counts.state_names
    if b.counts.state_names != names:
        seen = set(names)
        names = names + tuple(s for s in b.counts.state_names if s not in seen)
    ca, cb = _pad_counts(a.counts, names), _pad_counts(b.counts, names)
    counts = TransitionCounts(
        names, ca.transitions + cb.transitions, ca.exits_success + cb.exits_success,
        ca.exits_failure + cb.exits_failure, ca.initial + cb.initial,
        {k: ca.n_traces[k] + cb.n_traces[k] for k in ca.n_traces})
    reasons = Counter(a.skipped_by_reason)
    reasons.update(b.skipped_by_reason)
    costs = a.costs.merge(b.costs) if a.costs is not None and b.costs is not None else (a.costs or b.costs)
    return _Partial(counts, np.concatenate([a.hashes, b.hashes]), a.spans + b.spans,
                    a.n_records + b.n_records, a.n_records_skipped + b.n_records_skipped,
                    a.n_traces_skipped + b.n_traces_skipped, dict(reasons),
                    (a.problems + b.problems)[:_MAX_PROBLEMS], costs,
                    step_gaps=(a.step_gaps + b.step_gaps)[:_MAX_PROBLEMS])


def _with_vocabulary(counts: TransitionCounts, vocab: tuple[str, ...], source: str) -> TransitionCounts:
    """Counts re-indexed into a fixed vocabulary, with the error ``count_transitions(states=...)`` gives."""
    if len(set(vocab)) != len(vocab):
        raise ValueError("states must be unique")
    missing = [s for s in counts.state_names if s not in set(vocab)]
    if missing:
        raise TraceValidationError(
            f"state {missing[0]!r} occurs in the traces but is not in the given states",
            source=source, field="state",
            hint=f"add it to the state list ({len(missing)} label(s) missing) or relabel those steps",
        )
    return _pad_counts(counts, vocab)


def _check_unique_traces(partial: _Partial, parts: list[Partition], on_error: OnError, *,
                         check_split: bool = True) -> None:
    """Raise when one trace id was counted in two partitions (its steps were not contiguous), then — with
    ``on_error="raise"`` — for a trace with missing steps (the in-memory read's error, deferred until
    it is known not to be part of a split trace)."""
    if check_split:
        _check_split_traces(partial, parts, on_error)
    by_index = {p.index: p for p in parts}
    part_of = _partition_of(partial) if partial.step_gaps and check_split else []
    for h, index, tid, _step, _loc in partial.step_gaps if check_split else ():
        for i in np.flatnonzero(partial.hashes == np.uint64(h)):
            other = by_index[part_of[int(i)]]
            if other.index != index and tid in _ids_of(other, on_error):
                first, second = sorted((other, by_index[index]), key=lambda p: p.index)
                raise _split_error(tid, first, second)
    if partial.step_gaps and on_error == "raise":
        _, index, tid, message, loc = partial.step_gaps[0]
        part = by_index[index]
        is_line = part.format == "jsonl"
        raise TraceValidationError(message, source=part.source, line=loc if is_line else None,
                                   row=None if is_line else loc, field="step_idx", hint=STEP_GAP_HINT)


def _ids_of(part: Partition, on_error: OnError, *, ordered: bool = False) -> Any:
    """The trace ids a partition counts (a set, or a list in table order)."""
    ids = _table_trace_ids(part.read(on_error=on_error, defer_step_gaps=True)).to_pylist()
    return ids if ordered else set(ids)


def _partition_of(partial: _Partial) -> list[int]:
    """The partition index of every entry of ``partial.hashes``."""
    return [index for index, n in partial.spans for _ in range(n)]


def _split_error(trace_id: object, first: Partition, second: Partition) -> TraceValidationError:
    return TraceValidationError(
        f"trace {trace_id!r} has steps in two places: {first.describe()} and {second.describe()}",
        source=first.source, field="trace_id",
        hint="partitioned reading needs the steps of each trace on consecutive rows/lines of one file; "
             "sort the data by trace_id, or rewrite it with tracetochain.partitioned.repartition_by_trace "
             "and read the parts with by='file'")


def _check_split_traces(partial: _Partial, parts: list[Partition], on_error: OnError) -> None:
    h = partial.hashes
    if h.size < 2:
        return
    order = np.argsort(h, kind="stable")
    hs = h[order]
    dup = np.flatnonzero(hs[1:] == hs[:-1])
    if dup.size == 0:
        return
    bounds = np.cumsum([n for _, n in partial.spans])
    part_of = [partial.spans[int(i)][0] for i in np.searchsorted(bounds, order, side="right")]
    by_index = {p.index: p for p in parts}
    checked: set[tuple[int, int]] = set()
    for i in dup[:100]:  # a hash shared within one partition, or by two different ids, is a collision: go on
        pa_, pb = part_of[int(i)], part_of[int(i) + 1]
        key = (min(pa_, pb), max(pa_, pb))
        if pa_ == pb or key in checked:
            continue
        checked.add(key)
        first, second = by_index[key[0]], by_index[key[1]]
        ids_a = _ids_of(first, on_error)
        common = [x for x in _ids_of(second, on_error, ordered=True) if x in ids_a]
        if common:
            raise _split_error(common[0], first, second)


@dataclass(frozen=True, eq=False)
class PartitionedCounts:
    """The transition counts of a partitioned corpus, with its merged ingest report.

    ``counts`` equals ``count_transitions`` on the whole table (same states, same order) — see the module
    docstring for the conditions. ``state_model`` is the StateModel used, if any.
    """

    counts: TransitionCounts
    report: IngestReport
    n_partitions: int
    engine: str
    state_model: StateModel | None = field(default=None, repr=False)
    #: The per-state cost model of the corpus (summed partition statistics), over the states of ``counts``.
    costs: CostModel | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {"counts": self.counts.to_dict(), "report": self.report.to_dict(), "n_partitions": self.n_partitions,
                "engine": self.engine,
                "states": self.state_model.to_dict() if self.state_model is not None else None}

    def __str__(self) -> str:
        c = self.counts
        n = c.n_traces
        parts = f"{self.n_partitions} partition{'s' if self.n_partitions != 1 else ''}"
        return (f"{sum(n.values())} traces counted in {parts} ({self.engine} engine): "
                f"{n['success']} success, {n['failure']} failure, {n['censored']} censored, {n['invalid']} invalid; "
                f"{c.n_states} states, {int(c.transitions.sum())} transitions\n{self.report}")

    def _repr_html_(self) -> str:
        lines = str(self).splitlines()
        body = "".join(f"<li>{html.escape(x.strip(' -'))}</li>" for x in lines[2:])
        return (f"<div><strong>{html.escape(lines[0])}</strong><br>{html.escape(lines[1])}"
                f"{f'<ul>{body}</ul>' if body else ''}</div>")


def _resolve_states(states: Any, parts: list[Partition], on_error: OnError,
                    state_options: dict[str, Any]) -> tuple[StateModel | None, tuple[str, ...] | None]:
    """(model to predict with, fixed vocabulary) from the ``states`` argument."""
    if states is None or (isinstance(states, str) and states == "label" and not state_options):
        return None, None
    if isinstance(states, StateModel):
        return states, None
    if isinstance(states, (list, tuple)) and all(isinstance(s, str) for s in states):
        return None, tuple(states)
    if isinstance(states, str):
        from tracetochain.states import states_from_spec

        estimator = states_from_spec(states, **state_options)
    elif hasattr(states, "fit") and hasattr(states, "fetch_model"):
        estimator = states
    else:
        raise TypeError(f"states must be None, 'label', a list of state names, a StateModel, a state estimator or "
                        f"a spec string, got {type(states).__name__}")
    sample = parts[0].read(on_error=on_error)
    usable = sample.select_traces(sample.outcomes() != _INVALID)
    if usable.n_steps == 0:
        raise EmptyTraceSetError(f"{parts[0].describe()}: the first partition has no usable traces to fit the "
                                 f"states on; fit a StateModel on a sample yourself and pass it as states=")
    model: StateModel = estimator.fit(usable).fetch_model()
    return model, None


def count_partitioned(source: str | Path | Sequence[str | Path], *, engine: Engine | str | None = None,
                      states: Any = None, on_error: OnError = "raise", format: str | None = None,
                      by: PartitionBy = "range", rows_per_partition: int = DEFAULT_ROWS_PER_PARTITION,
                      bytes_per_partition: int = DEFAULT_BYTES_PER_PARTITION, check_traces: bool = True,
                      **state_options: Any) -> PartitionedCounts:
    """Count the transitions of a corpus partition by partition on ``engine``; only counts travel.

    Parameters
    ----------
    source : path, URI or list of them
        Parquet or JSONL file(s) or a directory of them (see :func:`plan_partitions`).
    engine : Engine, "local" or "dask", optional
        Where partitions are counted (default: in this process). An engine given by name is closed afterwards.
    states : None, "label", list of str, StateModel, state estimator or spec string
        How steps get their states (module docstring); ``state_options`` go to ``states_from_spec``.
    on_error : {"raise", "skip"}
        As in :meth:`TraceTable.read`; skipped records are summed into ``report``.
    by, rows_per_partition, bytes_per_partition, format
        How the corpus is cut (:func:`plan_partitions`).
    check_traces : bool, default True
        Check that no trace id occurs in two partitions (8 bytes per trace travel to the driver); off only for data
        known to be grouped by trace.
    """
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    parts = plan_partitions(source, format=format, by=by, rows_per_partition=rows_per_partition,
                            bytes_per_partition=bytes_per_partition)
    model, vocab = _resolve_states(states, parts, on_error, state_options)
    owns = not isinstance(engine, Engine)  # an engine made here from a name is closed here
    eng: Engine = get_engine(engine) if owns else engine  # type: ignore[assignment]
    try:
        fn = functools.partial(_count_partition, on_error=on_error, model=model, check_traces=check_traces)
        partial: _Partial = eng.map_reduce(fn, parts, _merge)
    finally:
        if owns:
            eng.close()
    src = source_name(source)
    _check_unique_traces(partial, parts, on_error, check_split=check_traces)
    counts = partial.counts
    if vocab is not None:
        counts = _with_vocabulary(counts, vocab, src)
    costs = partial.costs.reindexed(counts.state_names) if partial.costs is not None else None
    return PartitionedCounts(counts, ingest_report(partial, counts, src, parts[0].format), len(parts), eng.name,
                             model, costs)


def source_name(source: str | Path | Sequence[str | Path]) -> str:
    """The corpus named in messages and reports."""
    return str(source) if isinstance(source, (str, Path)) else ", ".join(str(s) for s in source)


def ingest_report(partial: _Partial, counts: TransitionCounts, source: str, fmt: str) -> IngestReport:
    """The merged :class:`IngestReport` of all partitions."""
    return IngestReport(source, fmt, "row" if fmt == "parquet" else "line", n_records=partial.n_records,
                        n_records_skipped=partial.n_records_skipped,
                        n_traces=sum(counts.n_traces[o.value] for o in Outcome),
                        n_traces_skipped=partial.n_traces_skipped,
                        skipped_by_reason=dict(sorted(partial.skipped_by_reason.items())),
                        problems=list(partial.problems))


def fit_partitioned(source: str | Path | Sequence[str | Path], *, engine: Engine | str | None = None,
                    pseudocount: float = 1.0, unvisited: str = "auto", initial: str = "empirical",
                    states: Any = None, on_error: OnError = "raise", format: str | None = None,
                    by: PartitionBy = "range", rows_per_partition: int = DEFAULT_ROWS_PER_PARTITION,
                    bytes_per_partition: int = DEFAULT_BYTES_PER_PARTITION, check_traces: bool = True,
                    **state_options: Any) -> AbsorbingChain:
    """Fit an :class:`AbsorbingChain` to a corpus that need not fit in memory (see :func:`count_partitioned`).

    With the traces' own labels (``states=None``) the chain is identical, bit for bit, to
    ``ChainEstimator(pseudocount=..., unvisited=..., initial=...).fit(TraceTable.read(source)).fetch_model()``;
    with a state model it equals ``ChainEstimator(states=model.state_names).fit(model.label(whole))`` and, as
    :func:`~tracetochain.pipeline.fit_chain` does, records the state model in the metadata.

    Example (a Dask cluster needs the ``if __name__ == "__main__":`` guard in scripts)::

        from tracetochain.engines import DaskEngine
        with DaskEngine(n_workers=2) as engine:                            # doctest: +SKIP
            chain = fit_partitioned("s3://bucket/traces/", engine=engine)
    """
    result = count_partitioned(source, engine=engine, states=states, on_error=on_error, format=format, by=by,
                               rows_per_partition=rows_per_partition, bytes_per_partition=bytes_per_partition,
                               check_traces=check_traces, **state_options)
    est = ChainEstimator(pseudocount=pseudocount, unvisited=unvisited,  # type: ignore[arg-type]
                         initial=initial)  # type: ignore[arg-type]
    chain = est.fit(result.counts).fetch_model()
    if result.state_model is not None:
        chain = chain.with_metadata(states=result.state_model.to_dict())
    if result.costs is not None:  # as ChainEstimator.fit does for traces in memory
        chain = chain.with_metadata(costs=result.costs.reindexed(chain.state_names).to_dict())
    return chain
