"""Counts of runs of partitions: partial counts with their ingest bookkeeping, their merge, and the check that no
trace lies in two partitions. The statistics themselves are computed by :mod:`tracetochain.analysis`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tracetochain._display import Display, ResultDisplay
from tracetochain._limits import check_state_count
from tracetochain._outcome import INVALID as _INVALID
from tracetochain.chain import TransitionCounts
from tracetochain.chain.shared import CostModel, reader_name, trace_totals, usage_arrays
from tracetochain.exceptions import TraceValidationError
from tracetochain.partitioned._ingest import (
    OnError,
    Partition,
    _table_trace_ids,
)
from tracetochain.states import StateModel
from tracetochain.traces import IngestReport, Outcome, Problem, TraceTable
from tracetochain.traces.shared import STEP_GAP_HINT

_MAX_PROBLEMS = 50



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
    #: The episodes that ended before any step (their trace-level records), for the merged ingest report.
    zero_step: tuple[dict[str, Any], ...] = ()
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

    return TransitionCounts(names, T, vec(c.exits_success), vec(c.exits_failure), vec(c.initial), dict(c.n_traces),
                            c.start_exits)


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
        {k: ca.n_traces[k] + cb.n_traces[k] for k in ca.n_traces}, ca.start_exits + cb.start_exits)
    reasons = Counter(a.skipped_by_reason)
    reasons.update(b.skipped_by_reason)
    costs = a.costs.merge(b.costs) if a.costs is not None and b.costs is not None else (a.costs or b.costs)
    return _Partial(counts, np.concatenate([a.hashes, b.hashes]), a.spans + b.spans,
                    a.n_records + b.n_records, a.n_records_skipped + b.n_records_skipped,
                    a.n_traces_skipped + b.n_traces_skipped, dict(reasons),
                    (a.problems + b.problems)[:_MAX_PROBLEMS], costs, a.zero_step + b.zero_step,
                    (a.step_gaps + b.step_gaps)[:_MAX_PROBLEMS])


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


@dataclass(frozen=True, eq=False, repr=False)
class PartitionedCounts(ResultDisplay):
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

    def _display(self) -> Display:
        lines = str(self).splitlines()
        return Display(lines[0], kind="Partitioned counts", lines=tuple(x.strip(" -") for x in lines[1:]),
                       tables=self.counts._display().tables)


def source_name(source: str | Path | Sequence[str | Path]) -> str:
    """The corpus named in messages and reports."""
    return str(source) if isinstance(source, (str, Path)) else ", ".join(str(s) for s in source)


def ingest_report(partial: _Partial, counts: TransitionCounts, source: str, fmt: str) -> IngestReport:
    """The merged :class:`IngestReport` of all partitions (``n_traces`` counts the traces with steps, as a reader's
    report does; the zero-step episodes are listed beside them)."""
    return IngestReport(source, fmt, "row" if fmt == "parquet" else "line", n_records=partial.n_records,
                        n_records_skipped=partial.n_records_skipped,
                        n_traces=sum(counts.n_traces[o.value] for o in Outcome) - len(partial.zero_step),
                        n_traces_skipped=partial.n_traces_skipped,
                        skipped_by_reason=dict(sorted(partial.skipped_by_reason.items())),
                        problems=list(partial.problems), zero_step=[dict(r) for r in partial.zero_step])
