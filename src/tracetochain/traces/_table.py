"""TraceTable: the canonical long table of steps, validated at the door.

Every reader ends here. Validation names the source, the line (JSONL/CSV) or row (Parquet/DataFrame), the field,
and how to fix the record. With ``on_error="skip"`` a bad record removes its whole trace (a trace with a hole in it
would silently change the transitions), and every skip is counted in :class:`IngestReport`.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, BinaryIO, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from tracetochain._limits import MAX_ABS_TIME, time_problem
from tracetochain.exceptions import TraceValidationError
from tracetochain.traces._schema import (
    COLUMN_BY_NAME,
    OUTCOME_VALUES,
    REQUIRED,
    STEP_KIND_VALUES,
    TRACE_LEVEL,
    TRACE_SCHEMA_VERSION,
    USAGE_COLUMNS,
)

OnError = Literal["raise", "skip"]
_FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv", ".parquet": "parquet",
            ".pq": "parquet"}
_MAX_PROBLEMS_KEPT = 50
#: Floating-point columns that must be finite (usage columns have their own check, which also refuses negatives).
_FINITE_COLUMNS = ("reward", "t_start", "t_end")
#: The largest usage value (tokens or dollars) one step may carry.
MAX_USAGE = 1e15


@dataclass(frozen=True)
class Problem:
    """One rejected record: where it was, which field, what was wrong."""

    location: int | None
    field: str | None
    message: str
    #: True when a reader dropped a whole trace (episode) for this problem, not just one record.
    whole_trace: bool = False


@dataclass
class IngestReport:
    """What happened at the door: records read, records and traces skipped (with reasons), and the first problems.

    ``location_kind`` is ``"line"`` for JSONL/CSV (1-based file lines) and ``"row"`` for Parquet/DataFrames
    (0-based rows).
    """

    source: str
    format: str
    location_kind: str = "line"
    n_records: int = 0
    n_records_skipped: int = 0
    n_traces: int = 0
    n_traces_skipped: int = 0
    skipped_by_reason: dict[str, int] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    #: What header lines of the source said about the run (e.g. a JSONL ``{"metadata": {...}}`` first line).
    run_metadata: dict[str, Any] = field(default_factory=dict)
    #: Traces with missing steps (a gap in step_idx, or a first step other than 0), when validation was told to
    #: defer that check (partitioned reading: the steps may be in another partition — a trace split across
    #: partitions, reported as such): (trace id, message, line or row). Dropped from the table, counted as skipped.
    step_gaps: list[tuple[str, str, int]] = field(default_factory=list)
    #: Episodes that ended before any agent step, as their trace-level records (trace_id, outcome, task_id, …):
    #: trials with an outcome that have no step to put in the table (readers keep them here, never drop them).
    zero_step: list[dict[str, Any]] = field(default_factory=list)
    #: Episodes per outcome source, for readers that merge several (OTLP: verdict file, outcome attribute,
    #: evaluation events, posted verdicts, budget finish reason, unlabelled).
    outcome_sources: dict[str, int] = field(default_factory=dict)
    #: The field a reader took the verdict from when the user named none (the only verdict-like field found).
    verdict_field: str | None = None
    #: The ``--where`` conditions that selected these traces (``TraceTable.where``), in the order applied.
    filters: list[str] = field(default_factory=list)

    @property
    def n_zero_step(self) -> int:
        """Number of episodes that ended before any agent step (kept beside the table, see ``zero_step``)."""
        return len(self.zero_step)

    def zero_step_outcomes(self) -> dict[str, int]:
        """Outcome counts of the zero-step episodes (every outcome listed, zeros included)."""
        counts = Counter(str(r.get("outcome")) for r in self.zero_step)
        return {name: counts.get(name, 0) for name in OUTCOME_VALUES}

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "source": self.source,
            "format": self.format,
            "n_records": self.n_records,
            "n_records_skipped": self.n_records_skipped,
            "n_traces": self.n_traces,
            "n_traces_skipped": self.n_traces_skipped,
            "skipped_by_reason": dict(self.skipped_by_reason),
            "problems": [
                {self.location_kind: p.location, "field": p.field, "message": p.message} for p in self.problems
            ],
        }
        if self.run_metadata:
            doc["run_metadata"] = self.run_metadata
        if self.outcome_sources:
            doc["outcome_sources"] = dict(self.outcome_sources)
        if self.verdict_field:
            doc["verdict_field"] = self.verdict_field
        if self.filters:
            doc["filters"] = list(self.filters)
        if self.zero_step:
            doc["n_zero_step"] = self.n_zero_step
            doc["zero_step_outcomes"] = self.zero_step_outcomes()
        return doc

    def __str__(self) -> str:
        text = (
            f"{self.source} ({self.format}): {self.n_records} records read, {self.n_traces} traces kept, "
            f"{self.n_records_skipped} records skipped ({self.n_traces_skipped} traces dropped whole)"
        )
        for reason, n in sorted(self.skipped_by_reason.items()):
            text += f"\n  - {n} records: {reason}"
        if self.zero_step:
            oc = ", ".join(f"{v} {k}" for k, v in self.zero_step_outcomes().items() if v)
            text += f"\n  {self.n_zero_step} episodes ended before any agent step (kept as trials: {oc})"
        if self.outcome_sources:
            src = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in self.outcome_sources.items() if v)
            text += f"\n  outcomes from: {src}"
        return text


# ---------------------------------------------------------------------------------------------------- typing
def _first_bad(values: list[Any], target: pa.DataType) -> list[int]:
    bad = []
    for i, v in enumerate(values):
        if v is None:
            continue
        try:
            _cast_one(pa.array([v]), target)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, ValueError):
            bad.append(i)
    return bad


def _cast_one(arr: pa.Array, target: pa.DataType) -> pa.Array:
    t = arr.type
    if pa.types.is_null(t):
        return pa.nulls(len(arr), target)
    if target == pa.string():
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return arr.cast(pa.string())
        if pa.types.is_integer(t):
            return arr.cast(pa.string())
        if pa.types.is_dictionary(t):
            return arr.cast(pa.string())
        raise ValueError(f"expected text, got {t}")
    if target == pa.bool_():
        if pa.types.is_boolean(t):
            return arr
        if pa.types.is_integer(t):
            if pc.any(pc.and_(pc.is_valid(arr), pc.invert(pc.is_in(arr, pa.array([0, 1], t))))).as_py():
                raise ValueError("expected true/false")
            return arr.cast(pa.bool_())
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            low = pc.utf8_lower(arr)
            if pc.any(pc.and_(pc.is_valid(low), pc.invert(pc.is_in(low, pa.array(["true", "false", "1", "0"]))))
                      ).as_py():
                raise ValueError("expected true/false")
            return low.cast(pa.bool_())
        raise ValueError(f"expected true/false, got {t}")
    if pa.types.is_boolean(t):
        raise ValueError("expected a number, got true/false")
    if target == pa.float64() and (pa.types.is_string(t) or pa.types.is_large_string(t)):
        try:
            return arr.cast(pa.float64())
        except pa.ArrowInvalid:
            # ISO-8601 timestamps are accepted for the time columns (converted to epoch seconds).
            return pa.array([_seconds(v) for v in arr.to_pylist()], pa.float64())
    if pa.types.is_timestamp(t) and target == pa.float64():
        return pc.divide(arr.cast(pa.timestamp("ns")).cast(pa.int64()).cast(pa.float64()), 1e9)
    return arr.cast(target)  # safe cast: 3.5 → int64 raises


def _seconds(value: str | None) -> float | None:
    """A number, or an ISO-8601 timestamp (naive means UTC), as seconds since the epoch."""
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        from datetime import UTC, datetime

        stamp = datetime.fromisoformat(value.strip())
        return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()


_TYPE_WORD = {pa.string(): "text", pa.int64(): "an integer", pa.float64(): "a number", pa.bool_(): "true/false"}


# ---------------------------------------------------------------------------------------------------- table
class TraceTable:
    """A validated set of traces in the canonical long layout (docs/formats.md), sorted by trace then step.

    Build one with :meth:`read` (JSONL, CSV or Parquet, chosen by extension), :meth:`from_dataframe`
    (pandas, polars or pyarrow) or :meth:`from_records`. The minimal record is
    ``{"trace_id", "step_idx", "state" (or "step_kind"), "outcome"}``.

    Examples
    --------
    >>> tt = TraceTable.from_records([
    ...     {"trace_id": "a", "step_idx": 0, "state": "plan", "outcome": "success"},
    ...     {"trace_id": "a", "step_idx": 1, "state": "act", "outcome": "success"},
    ...     {"trace_id": "b", "step_idx": 0, "state": "plan", "outcome": "failure"}])
    >>> tt.n_traces, tt.n_steps, tt.outcome_counts()["success"]
    (2, 3, 1)
    """

    def __init__(self, table: pa.Table, report: IngestReport, trace_ids: pa.Array,
                 trace_index: NDArray[np.int64], offsets: NDArray[np.int64]) -> None:
        self._table = table
        self.report = report
        self._trace_ids = trace_ids
        self._trace_index = trace_index
        self._offsets = offsets

    # ------------------------------------------------------------------ constructors
    @classmethod
    def read(cls, path: str | Path, *, on_error: OnError = "raise") -> TraceTable:
        """Read a canonical long table; the format comes from the extension (.jsonl/.ndjson, .json, .csv, .parquet).

        The same decoding as ``read_traces(path, "canonical")`` (:mod:`tracetochain.traces._canonical`).
        """
        from tracetochain._limits import check_in_memory_read
        from tracetochain.traces._canonical import read_canonical  # imports this module

        _check_on_error(on_error)
        check_in_memory_read(path)
        return read_canonical(Path(path), on_error=on_error)

    @classmethod
    def from_dataframe(cls, df: Any, *, on_error: OnError = "raise", source: str = "DataFrame") -> TraceTable:
        """Build from a pandas or polars DataFrame, or a pyarrow Table (columns named as the canonical record)."""
        _check_on_error(on_error)
        if isinstance(df, pa.Table):
            table = df
        elif hasattr(df, "to_arrow") and type(df).__module__.startswith("polars"):
            table = df.to_arrow()
        elif type(df).__module__.startswith("pandas"):
            table = pa.Table.from_pandas(df, preserve_index=False)
        else:
            raise TypeError(f"expected a pandas/polars DataFrame or a pyarrow Table, got {type(df).__name__}")
        return cls._build(table, np.arange(table.num_rows, dtype=np.int64),
                          IngestReport(source, "dataframe", "row"), on_error, [])

    @classmethod
    def from_records(cls, records: list[dict[str, Any]], *, on_error: OnError = "raise", source: str = "records",
                     format: str = "records", problems: list[Problem] | None = None,
                     locations: list[int] | None = None, location_kind: str = "row") -> TraceTable:
        """Build from a list of step dicts.

        Readers use the keyword arguments: ``format`` names the reader, ``problems`` are records the reader already
        skipped (they are counted in the report), ``locations`` gives each record's line or row in the source
        (default: its index) and ``location_kind`` says which ("line" or "row").
        """
        _check_on_error(on_error)
        locs = np.asarray(locations if locations is not None else range(len(records)), dtype=np.int64)
        if locs.shape != (len(records),):
            raise ValueError("locations must give one entry per record")
        from tracetochain.traces._build import records_to_arrow  # imports this module

        return cls._build(records_to_arrow(list(records)), locs, IngestReport(source, format, location_kind),
                          on_error, list(problems or []))

    @classmethod
    def from_arrow(cls, table: pa.Table, *, on_error: OnError = "raise", source: str = "arrow",
                   format: str = "arrow", problems: list[Problem] | None = None,
                   locations: Any = None, location_kind: str = "row",
                   defer_step_gaps: bool = False) -> TraceTable:
        """Build from a pyarrow Table whose columns are named as the canonical record (same validation as
        :meth:`from_records`).

        ``defer_step_gaps`` (partitioned reading): a trace with missing steps (a gap in step_idx, or a first step
        other than 0) is dropped, counted and listed in ``report.step_gaps`` instead of being reported at once —
        the caller decides, once it knows whether the trace's other steps are elsewhere.

        For readers that assemble columns themselves (e.g. streaming ones): ``format`` names the reader,
        ``problems`` are records the reader already skipped (counted in the report), ``locations`` gives each
        row's line or row in the source (default: its index; any integer sequence or array) and ``location_kind``
        says which ("line" or "row").

        >>> import pyarrow as pa
        >>> tt = TraceTable.from_arrow(pa.table({"trace_id": ["a", "a"], "step_idx": [0, 1],
        ...                                      "state": ["plan", "act"], "outcome": ["success", "success"]}))
        >>> tt.n_traces, tt.n_steps, tt.report.format
        (1, 2, 'arrow')
        """
        _check_on_error(on_error)
        if not isinstance(table, pa.Table):
            raise TypeError(f"expected a pyarrow Table, got {type(table).__name__}")
        if location_kind not in ("line", "row"):
            raise ValueError(f"location_kind must be 'line' or 'row', got {location_kind!r}")
        locs = np.asarray(locations if locations is not None else np.arange(table.num_rows), dtype=np.int64)
        if locs.shape != (table.num_rows,):
            raise ValueError(f"locations must give one entry per row ({table.num_rows}), got shape {locs.shape}")
        return cls._build(table, locs, IngestReport(source, format, location_kind), on_error, list(problems or []),
                          defer_step_gaps=defer_step_gaps)

    # ------------------------------------------------------------------ validation
    @classmethod
    def _build(cls, raw: pa.Table, locs: NDArray[np.int64], report: IngestReport, on_error: OnError,
               pre_problems: list[Problem], *, defer_step_gaps: bool = False) -> TraceTable:
        n = raw.num_rows
        report.n_records = n + len(pre_problems)
        skipped = Counter[str]()
        problems: list[Problem] = list(pre_problems)
        for p in pre_problems:
            skipped[p.message.split(" (")[0]] += 1
        pre_traces = sum(p.whole_trace for p in pre_problems)
        bad = np.zeros(n, dtype=bool)  # rows whose whole trace must go
        lost = np.zeros(n, dtype=bool)  # rows that cannot even be attributed to a trace
        row_reason = np.full(n, -1, dtype=np.int16)  # index into `reasons` of the first problem of each row
        reasons: list[str] = []

        def flag(mask: NDArray[np.bool_], fieldname: str | None, message: str, hint: str,
                 *, unattributable: bool = False, reason: str | None = None) -> None:
            if not mask.any():
                return
            first = int(np.flatnonzero(mask)[0])
            if on_error == "raise":
                loc = int(locs[first])
                is_line = report.location_kind == "line"
                raise TraceValidationError(message, source=report.source, line=loc if is_line else None,
                                           row=None if is_line else loc, field=fieldname, hint=hint)
            for i in np.flatnonzero(mask & ~bad & ~lost)[: max(0, _MAX_PROBLEMS_KEPT - len(problems))]:
                problems.append(Problem(int(locs[i]), fieldname, message))
            reasons.append(reason or message)
            row_reason[mask & (row_reason < 0)] = len(reasons) - 1
            (lost if unattributable else bad)[mask] = True

        # 1. Required columns and canonical types.
        present = set(raw.column_names)
        for name in REQUIRED:
            if name not in present:
                raise TraceValidationError(
                    f"required field {name!r} is missing from every record", source=report.source, field=name,
                    hint=_missing_hint(name),
                )
        if "state" not in present and "step_kind" not in present:
            raise TraceValidationError(
                "records have neither 'state' nor 'step_kind', so there is nothing to build states from",
                source=report.source, field="state",
                hint="add a 'state' label per step, or 'step_kind' (llm/tool/…) with an optional 'tool_name'",
            )
        cols: dict[str, pa.Array] = {}
        for name in raw.column_names:
            arr = _one_chunk(raw.column(name)) if n else pa.array([], type=raw.schema.field(name).type)
            spec = COLUMN_BY_NAME.get(name)
            if spec is None:
                cols[name] = arr  # extra columns travel along untouched
                continue
            try:
                cols[name] = _cast_one(arr, spec.type)
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, ValueError):
                values = arr.to_pylist()
                bad_idx = _first_bad(values, spec.type)
                mask = np.zeros(n, dtype=bool)
                mask[bad_idx] = True
                example = values[bad_idx[0]] if bad_idx else None
                flag(mask, name, f"expected {_TYPE_WORD[spec.type]}, got {example!r}",
                     f"write {name} as {_TYPE_WORD[spec.type]}")
                fixed = [None if i in set(bad_idx) else v for i, v in enumerate(values)]
                cols[name] = _cast_one(pa.array(fixed), spec.type) if fixed else pa.array([], spec.type)

        # 2. Row-level checks.
        tid = cols["trace_id"]
        flag(_nulls(tid), "trace_id", "trace_id is empty", "every step needs the id of its trace",
             unattributable=True)
        if n and pa.types.is_string(tid.type):
            flag(np.asarray(pc.equal(tid, "").fill_null(False)), "trace_id", "trace_id is empty",
                 "every step needs the id of its trace", unattributable=True)
        step = cols["step_idx"]
        flag(_nulls(step), "step_idx", "step_idx is empty", "number the steps of each trace 0, 1, 2, …")
        step_np = np.asarray(step.fill_null(0)) if n else np.zeros(0, np.int64)
        flag(step_np < 0, "step_idx", "step_idx is negative", "number the steps of each trace 0, 1, 2, …")

        outcome = cols["outcome"]
        if n:
            _enc = pc.dictionary_encode(outcome)
            _norm = pc.utf8_trim_whitespace(pc.utf8_lower(_enc.dictionary))
            if not pc.all(pc.equal(_norm, _enc.dictionary)).as_py():
                outcome = _norm.take(_enc.indices)
            del _enc, _norm
        cols["outcome"] = outcome
        flag(_nulls(outcome), "outcome", "outcome is empty", f"use one of {', '.join(OUTCOME_VALUES)}")
        unknown = _not_in(outcome, OUTCOME_VALUES)
        if unknown.any():
            val = outcome[int(np.flatnonzero(unknown)[0])].as_py()
            flag(unknown, "outcome", f"unknown outcome {val!r}",
                 f"use one of {', '.join(OUTCOME_VALUES)} (map your labels first, e.g. pass → success)")
        if "step_kind" in cols and n:
            kind = pc.utf8_trim_whitespace(pc.utf8_lower(cols["step_kind"]))
            cols["step_kind"] = kind
            badk = _not_in(kind, STEP_KIND_VALUES)
            if badk.any():
                val = kind[int(np.flatnonzero(badk)[0])].as_py()
                flag(badk, "step_kind", f"unknown step_kind {val!r}", f"use one of {', '.join(STEP_KIND_VALUES)}")
        if "state" in cols:
            st = cols["state"]
            empty = _nulls(st) | (np.asarray(pc.equal(st, "").fill_null(False)) if n else np.zeros(0, bool))
            if "step_kind" in cols:
                # A missing state falls back to step_kind[:tool_name] only where step_kind exists.
                empty &= _nulls(cols["step_kind"])
            flag(empty, "state", "state is empty",
                 "give every step a state label, or provide step_kind so a default state can be derived")
        elif "step_kind" in cols:
            flag(_nulls(cols["step_kind"]), "step_kind", "step_kind is empty",
                 f"use one of {', '.join(STEP_KIND_VALUES)}")
        for name in USAGE_COLUMNS:
            # Tokens and dollars are costs: a negative or infinite one is a broken record, not a saving.
            if name in cols and n:
                values = np.asarray(cols[name].fill_null(0).to_numpy(zero_copy_only=False), dtype=np.float64)
                # Above MAX_USAGE (10^15 tokens or dollars per step) a value is a unit or overflow bug, and its
                # square (cost variances) would leave the floating-point range.
                broken = ~np.isfinite(values) | (values < 0) | (values > MAX_USAGE)
                if broken.any():
                    flag(broken, name, f"{name} is {float(values[int(np.flatnonzero(broken)[0])])!r}; usage must be a "
                         f"finite number between 0 and {MAX_USAGE:.0e}",
                         "write it as a non-negative number, or leave it out when unknown",
                         reason=f"{name} negative, too large or not finite")
        for name in _FINITE_COLUMNS:
            # NaN or ±inf in a score or a time would reach every output (strict JSON cannot even write them).
            if name in cols and n:
                values = np.asarray(cols[name].fill_null(0).to_numpy(zero_copy_only=False), dtype=np.float64)
                broken = ~np.isfinite(values)
                if broken.any():
                    example = float(values[int(np.flatnonzero(broken)[0])])
                    flag(broken, name, f"expected a finite number, got {example!r}",
                         f"write {name} as a finite number, or leave it out when unknown",
                         reason=f"{name} not finite")
                if name != "reward":
                    # A finite but absurd time (1e300, year 1) would overflow every calendar conversion later.
                    absurd = np.isfinite(values) & (np.abs(values) > MAX_ABS_TIME)
                    if absurd.any():
                        example = float(values[int(np.flatnonzero(absurd)[0])])
                        flag(absurd, name, f"{name} {time_problem(example)}",
                             f"write {name} as epoch seconds (or seconds from the episode start), or leave it out",
                             reason=f"{name} out of range")
                        broken |= absurd
                if broken.any():
                    cols[name] = pc.if_else(pa.array(broken), pa.scalar(None, cols[name].type), cols[name])

        # 3. Group by trace (codes in order of first appearance) and sort by (trace, step).
        keep_rows = ~lost
        table = pa.table(cols)
        had_lost = bool(lost.any())
        if had_lost:
            for r in row_reason[lost]:
                skipped[reasons[r]] += 1
            table = table.filter(pa.array(keep_rows))
            locs, bad, row_reason = locs[keep_rows], bad[keep_rows], row_reason[keep_rows]
            lost = lost[keep_rows]
        enc = pc.dictionary_encode(_one_chunk(table.column("trace_id"))) if table.num_rows else None
        codes = np.asarray(enc.indices) if enc is not None else np.zeros(0, np.int64)
        steps = step_np if not had_lost else np.asarray(
            _one_chunk(table.column("step_idx")).fill_null(0), dtype=np.int64)
        order = _sort_order(codes, steps)
        if order is not None:
            table = table.take(pa.array(order))
            locs, bad, codes, steps = locs[order], bad[order], codes[order], steps[order]
            row_reason = row_reason[order]
        n_kept = table.num_rows
        starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]]) if n_kept else np.zeros(0, np.int64)
        offsets = np.r_[starts, n_kept].astype(np.int64)
        trace_of_row = np.repeat(np.arange(starts.size), np.diff(offsets))

        # 4. Per-trace checks: unique steps and agreeing trace-level fields.
        if n_kept:
            same = np.r_[False, codes[1:] == codes[:-1]]
            dup = same & np.r_[False, steps[1:] == steps[:-1]]
            flag(dup, "step_idx", "step_idx repeats within the trace",
                 "each step of a trace needs its own step_idx")
            # A hole (0, 1, 7) would silently join the steps around it into a transition that never happened, and
            # a late first step would move where the trace starts.
            jump = same & np.r_[False, steps[1:] - steps[:-1] > 1]
            late = np.zeros(n_kept, dtype=bool)
            late[starts] = steps[starts] > 0
            ids = table.column("trace_id")
            if defer_step_gaps and (jump.any() or late.any()):
                # Partitioned reading: the missing steps may be in another partition (a trace split across
                # partitions, reported as such by the caller); record the trace, drop it, decide later.
                gap_rows = np.flatnonzero((jump | late) & ~bad)
                first_of_trace = gap_rows[np.r_[True, trace_of_row[gap_rows][1:] != trace_of_row[gap_rows][:-1]]]
                report.step_gaps = [(str(ids[int(i)].as_py()), _gap_message(ids[int(i)].as_py(), steps, int(i),
                                                                             bool(late[i])), int(locs[i]))
                                    for i in first_of_trace]
                problems += [Problem(loc, "step_idx", message)
                             for _, message, loc in report.step_gaps[: max(0, _MAX_PROBLEMS_KEPT - len(problems))]]
                reasons.append(STEP_GAP_REASON)
                row_reason[(jump | late) & (row_reason < 0)] = len(reasons) - 1
                bad |= jump | late  # the whole trace goes below, as for any bad record
            else:
                if jump.any():
                    first = int(np.flatnonzero(jump)[0])
                    flag(jump, "step_idx", _gap_message(ids[first].as_py(), steps, first, False), STEP_GAP_HINT,
                         reason=STEP_GAP_REASON)
                if late.any():
                    first = int(np.flatnonzero(late)[0])
                    flag(late, "step_idx", _gap_message(ids[first].as_py(), steps, first, True), STEP_GAP_HINT,
                         reason=STEP_GAP_REASON)
            for name in TRACE_LEVEL:
                if name not in table.column_names:
                    continue
                col = _one_chunk(table.column(name))
                if not _changes_within_trace(col, same):
                    continue
                differs = _differs_from_trace_start(col, starts, trace_of_row)
                if differs.any():
                    first = int(np.flatnonzero(differs)[0])
                    t0 = starts[trace_of_row[first]]
                    flag(differs, name,
                         f"{name} is {col[first].as_py()!r} here but {col[int(t0)].as_py()!r} on an earlier step "
                         f"of trace {table.column('trace_id')[first].as_py()!r}",
                         f"{name} describes the whole trace: write the same value on every step",
                         reason=f"{name} differs between steps of one trace")

        # 5. Drop whole traces that hold a bad record (skip mode only; raise mode has raised by now).
        if bad.any():
            bad_traces = np.unique(trace_of_row[bad])
            drop_rows = np.isin(trace_of_row, bad_traces)
            # Every dropped record is counted under the first problem found in its trace.
            first_bad_row = np.full(starts.size, -1, dtype=np.int64)
            idx = np.flatnonzero(bad)[::-1]
            first_bad_row[trace_of_row[idx]] = idx
            trace_reason = row_reason[first_bad_row[bad_traces]]
            sizes = np.diff(offsets)[bad_traces]
            for r, size in zip(trace_reason, sizes, strict=True):
                skipped[reasons[r]] += int(size)
            report.n_traces_skipped += int(bad_traces.size)
            keep = ~drop_rows
            table = table.filter(pa.array(keep))
            codes = codes[keep]
            n_kept = table.num_rows
            starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]]) if n_kept else np.zeros(0, np.int64)
            offsets = np.r_[starts, n_kept].astype(np.int64)
            trace_of_row = np.repeat(np.arange(starts.size), np.diff(offsets))
        report.n_traces_skipped += pre_traces
        report.skipped_by_reason = {k: v for k, v in skipped.items() if v}
        report.n_records_skipped = sum(report.skipped_by_reason.values())
        report.problems = problems[:_MAX_PROBLEMS_KEPT]
        report.n_traces = int(starts.size)
        trace_ids = _one_chunk(table.column("trace_id")).take(pa.array(starts)) if n_kept \
            else pa.array([], pa.string())
        pa.default_memory_pool().release_unused()  # give the validation temporaries back to the OS
        return cls(table, report, trace_ids, trace_of_row.astype(np.int64, copy=False), offsets)

    # ------------------------------------------------------------------ accessors
    @property
    def n_traces(self) -> int:
        return int(self._offsets.size - 1)

    @property
    def n_steps(self) -> int:
        return int(self._table.num_rows)

    @property
    def columns(self) -> list[str]:
        return list(self._table.column_names)

    @property
    def trace_ids(self) -> list[str]:
        """Trace ids in table order (order of first appearance in the source)."""
        return [str(x) for x in self._trace_ids.to_pylist()]

    @property
    def trace_id_array(self) -> pa.Array:
        """The trace ids, one per trace in table order, as an Arrow string array."""
        return self._trace_ids

    @property
    def trace_index(self) -> NDArray[np.int64]:
        """Index of the trace of every step (table order; read-only view)."""
        out = self._trace_index.view()
        out.setflags(write=False)
        return out

    @property
    def offsets(self) -> NDArray[np.int64]:
        """Trace i occupies rows ``offsets[i]:offsets[i + 1]`` (read-only view)."""
        out = self._offsets.view()
        out.setflags(write=False)
        return out

    def trace_column(self, name: str) -> pa.Array:
        """A trace-level column (outcome, task_id, …) with one value per trace."""
        if name not in TRACE_LEVEL:
            raise KeyError(f"{name!r} is not a trace-level column; trace-level columns are {TRACE_LEVEL}")
        if name not in self._table.column_names:
            return pa.nulls(self.n_traces, COLUMN_BY_NAME[name].type)
        return _one_chunk(self._table.column(name)).take(pa.array(self._offsets[:-1]))

    def outcomes(self) -> NDArray[np.int8]:
        """Outcome per trace as :class:`~tracetochain.traces.OutcomeCode` values (the position in ``Outcome``: 0
        success, 1 failure, 2 censored, 3 invalid)."""
        col = self.trace_column("outcome")
        return np.asarray(pc.index_in(col, pa.array(OUTCOME_VALUES)), dtype=np.int8) if self.n_traces \
            else np.zeros(0, np.int8)

    def outcome_counts(self) -> dict[str, int]:
        """Number of traces per outcome (every outcome listed, zeros included)."""
        counts = np.bincount(self.outcomes(), minlength=len(OUTCOME_VALUES))
        return {name: int(c) for name, c in zip(OUTCOME_VALUES, counts, strict=True)}

    def state_labels(self) -> tuple[NDArray[np.int64], list[str]]:
        """State of every step as integer codes plus the names, in order of first appearance.

        Uses the ``state`` column; where it is absent (or empty on a row) the default state is
        ``step_kind`` or ``step_kind:tool_name`` (docs/formats.md).
        """
        if self.n_steps == 0:
            return np.zeros(0, np.int64), []
        labels = self._default_states()
        if "state" in self._table.column_names:
            st = _one_chunk(self._table.column("state"))
            labels = pc.if_else(pc.and_kleene(pc.is_valid(st), pc.not_equal(st, "")).fill_null(False), st, labels) \
                if labels is not None else st
        assert labels is not None
        enc = pc.dictionary_encode(labels)
        return np.asarray(enc.indices, dtype=np.int64), [str(s) for s in enc.dictionary.to_pylist()]

    def _default_states(self) -> pa.Array | None:
        if "step_kind" not in self._table.column_names:
            return None
        kind = _one_chunk(self._table.column("step_kind"))
        if "tool_name" not in self._table.column_names:
            return kind
        tool = _one_chunk(self._table.column("tool_name"))
        has_tool = pc.and_kleene(pc.is_valid(tool), pc.not_equal(tool, "")).fill_null(False)
        return pc.if_else(has_tool, pc.binary_join_element_wise(kind, tool, ":"), kind)

    def select_traces(self, traces: NDArray[np.int64] | NDArray[np.bool_]) -> TraceTable:
        """A new table with only the given traces (indices in table order, or a boolean mask over traces).

        The zero-step episodes of the source (``report.zero_step``) are not among them: the new table's report is a
        copy without them (otherwise every subset would count them again)."""
        sel = np.asarray(traces)
        if sel.dtype == bool:
            if sel.shape != (self.n_traces,):
                raise ValueError(f"a trace mask needs {self.n_traces} entries, got {sel.shape}")
            sel = np.flatnonzero(sel)
        sel = np.unique(sel.astype(np.int64))
        lengths = np.diff(self._offsets)[sel]
        rows = np.repeat(self._offsets[:-1][sel], lengths) + (
            np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths))
        table = self._table.take(pa.array(rows, pa.int64()))
        offsets = np.r_[0, np.cumsum(lengths)].astype(np.int64)
        trace_index = np.repeat(np.arange(sel.size), lengths).astype(np.int64)
        report = replace(self.report, zero_step=[]) if self.report.zero_step else self.report
        return TraceTable(table, report, self._trace_ids.take(pa.array(sel, pa.int64())), trace_index, offsets)

    def trace_values(self, name: str) -> list[str | None]:
        """The value of field ``name`` for every trace, as text (:func:`~tracetochain.traces._select.trace_values`)."""
        from tracetochain.traces._select import trace_values

        return trace_values(self, name)

    def where(self, conditions: str | list[str] | tuple[str, ...]) -> TraceTable:
        """The traces whose fields meet every condition ``FIELD=VALUE`` / ``FIELD!=VALUE``
        (:func:`~tracetochain.traces._select.where`)."""
        from tracetochain.traces._select import where

        return where(self, conditions)

    def group_by(self, name: str) -> dict[str, TraceTable]:
        """One table per value of field ``name`` (:func:`~tracetochain.traces._select.group_by`)."""
        from tracetochain.traces._select import group_by

        return group_by(self, name)

    def with_states(self, codes: NDArray[np.int64], names: list[str] | tuple[str, ...]) -> TraceTable:
        """A copy whose ``state`` column is ``names[codes]`` (one code per step); nothing is revalidated."""
        codes = np.asarray(codes, dtype=np.int64)
        if codes.shape != (self.n_steps,):
            raise ValueError(f"need one state code per step ({self.n_steps}), got shape {codes.shape}")
        if codes.size and (codes.min() < 0 or codes.max() >= len(names)):
            raise ValueError("state codes out of range of the state names")
        state = pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()), pa.array(list(names), pa.string()))
        state = state.cast(pa.string())
        table = self._table
        if "state" in table.column_names:
            table = table.set_column(table.column_names.index("state"), "state", state)
        else:
            table = table.append_column("state", state)
        return TraceTable(table, self.report, self._trace_ids, self._trace_index, self._offsets)

    # ------------------------------------------------------------------ export
    def to_arrow(self) -> pa.Table:
        return self._table

    def to_pandas(self) -> Any:
        """The table as a pandas DataFrame (needs the ``pandas`` extra)."""
        from tracetochain._optional import require

        require("pandas", "TraceTable.to_pandas")
        return self._table.to_pandas()

    def to_polars(self) -> Any:
        """The table as a polars DataFrame (needs the ``polars`` extra)."""
        from tracetochain._optional import require

        return require("polars", "TraceTable.to_polars").from_arrow(self._table)

    def write(self, path: str | Path, *, overwrite: bool = True) -> Path:
        """Write the canonical long table; the extension picks JSONL (.jsonl/.ndjson), CSV or Parquet (.parquet/.pq).

        Written through the safe writer (:func:`tracetochain._files.write_output`): complete or not at all, never
        through a symbolic link (with ``overwrite`` a link is replaced); ``overwrite=False`` refuses an existing
        file. See :meth:`write_to` for what each format carries.
        """
        from tracetochain._files import write_output

        p = Path(path)
        fmt = _FORMATS.get(p.suffix.lower())
        if fmt not in ("jsonl", "csv", "parquet"):
            raise TraceValidationError(f"cannot write {p.suffix or 'a file without an extension'}", source=str(p),
                                       hint="name the output .jsonl, .csv or .parquet")
        return write_output(p, lambda fh: self.write_to(fh, fmt), overwrite=overwrite, what="table")

    def write_to(self, stream: BinaryIO, format: str) -> None:
        """Write the table to a binary stream as ``"jsonl"``, ``"csv"`` or ``"parquet"``.

        Episodes that ended before any agent step (``report.zero_step``) are written as one record each, without
        step fields, so they stay trials when the file is read again. JSONL and CSV cannot carry NaN or infinity
        (strict JSON has no such tokens; a spreadsheet reads ``nan`` as text): a non-finite number in any column is
        an error naming the column and the row. In CSV, text cells that a spreadsheet would run as a formula
        (starting with ``=``, ``+``, ``-``, ``@``, tab or carriage return) get a leading ``'``
        (:func:`tracetochain._text.csv_cell`); :meth:`read` removes it again.
        """
        if format not in ("jsonl", "csv", "parquet"):
            raise ValueError(f"format must be 'jsonl', 'csv' or 'parquet', got {format!r}")
        table = self._table
        zero = self.report.zero_step
        if zero and format != "jsonl":
            table = _with_zero_step_rows(table, zero)
        if format == "parquet":
            import pyarrow.parquet as pq

            meta = {b"tracetochain.trace_schema_version": str(TRACE_SCHEMA_VERSION).encode()}
            pq.write_table(table.replace_schema_metadata(meta), stream)
            return
        _refuse_non_finite(table, "JSON" if format == "jsonl" else "CSV")
        if format == "csv":
            import pyarrow.csv as pacsv

            pacsv.write_csv(_neutralise_formulas(table), stream)
            return
        for batch in table.to_batches(max_chunksize=65_536):
            stream.write("".join(
                json.dumps({k: v for k, v in rec.items() if v is not None}, ensure_ascii=False, allow_nan=False)
                + "\n" for rec in batch.to_pylist()).encode("utf-8", errors="replace"))
        # Episodes that ended before any agent step: one record each, trace-level fields and no step fields.
        stream.write("".join(json.dumps({**z, "step_idx": None}, ensure_ascii=False, allow_nan=False) + "\n"
                             for z in zero).encode("utf-8", errors="replace"))

    def __repr__(self) -> str:
        oc = self.outcome_counts()
        return (f"TraceTable({self.n_traces} traces, {self.n_steps} steps; "
                + ", ".join(f"{k} {v}" for k, v in oc.items()) + ")")


# ---------------------------------------------------------------------------------------------------- helpers
STEP_GAP_REASON = "steps of the trace are missing (step_idx has a gap)"
STEP_GAP_HINT = ("number the steps of each trace 0, 1, 2, … without gaps (a missing step would join the steps around "
                 "it into a transition that never happened, or move where the trace starts)")


def _gap_message(trace_id: object, steps: NDArray[np.int64], row: int, at_start: bool) -> str:
    if at_start:
        return f"trace {trace_id!r} starts at step_idx {int(steps[row])}, not 0"
    return f"step_idx jumps from {int(steps[row - 1])} to {int(steps[row])} within trace {trace_id!r}"


def _refuse_non_finite(table: pa.Table, language: str) -> None:
    """Raise naming the first NaN/±inf of any floating-point column (``language`` cannot carry it)."""
    for name in table.column_names:
        col = table.column(name)
        if not pa.types.is_floating(col.type):
            continue
        finite = pc.is_finite(col)
        bad = pc.and_(pc.is_valid(col), pc.invert(finite.fill_null(True)))
        if pc.any(bad).as_py():
            row = int(np.flatnonzero(np.asarray(_one_chunk(bad).fill_null(False)))[0])
            raise TraceValidationError(
                f"holds {col[row].as_py()}, which {language} cannot represent", row=row, field=name,
                hint="write Parquet instead, or replace the value (e.g. with an empty cell) first")


def _with_zero_step_rows(steps: pa.Table, zero: list[dict[str, Any]]) -> pa.Table:
    """``steps`` with one row per zero-step episode appended (its trace-level fields; ``step_idx`` null), so such
    episodes stay trials when the file is read again."""
    names = list(dict.fromkeys([*steps.column_names, *(k for z in zero for k in z), "step_idx"]))
    extra = pa.Table.from_pylist([{n: z.get(n) for n in names} for z in zero])
    extra = pa.table({n: extra.column(n).cast(steps.schema.field(n).type)
                      if n in steps.column_names and not pa.types.is_null(steps.schema.field(n).type)
                      else extra.column(n) for n in names})
    return pa.concat_tables([steps, extra], promote_options="default")


def _neutralise_formulas(table: pa.Table) -> pa.Table:
    """Text columns with spreadsheet formula triggers prefixed by ``'`` (see :func:`tracetochain._text.csv_cell`)."""
    from tracetochain._text import CSV_TRIGGER_PATTERN

    for i, name in enumerate(table.column_names):
        col = table.column(i)
        if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
            continue
        hit = pc.match_substring_regex(col, CSV_TRIGGER_PATTERN)
        if pc.any(hit).as_py():
            table = table.set_column(i, name, pc.if_else(hit, pc.binary_join_element_wise("'", col, ""), col))
    return table


def _check_on_error(on_error: str) -> None:
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")


def _nulls(arr: pa.Array) -> NDArray[np.bool_]:
    return np.asarray(arr.is_null(), dtype=bool) if len(arr) else np.zeros(0, bool)


def _missing_hint(name: str) -> str:
    return {
        "trace_id": "add the id of the episode each step belongs to",
        "step_idx": "add the 0-based position of each step within its trace",
        "outcome": "add the episode outcome (success, failure, censored or invalid) on every step of the trace",
    }[name]


def _not_in(arr: pa.Array, allowed: tuple[str, ...]) -> NDArray[np.bool_]:
    """Non-null values outside ``allowed`` (nulls are reported by their own check)."""
    if not len(arr):
        return np.zeros(0, bool)
    return np.asarray(pc.and_(pc.is_valid(arr), pc.invert(pc.is_in(arr, pa.array(allowed)))), dtype=bool)


def _sort_order(codes: NDArray[np.int64], steps: NDArray[np.int64]) -> NDArray[np.int64] | None:
    """Permutation sorting rows by (trace code, step), or None when already sorted (the common case)."""
    if codes.size < 2:
        return None
    dc = np.diff(codes)
    if np.all((dc > 0) | ((dc == 0) & (np.diff(steps) > 0))):
        return None
    # One packed int64 key is faster than lexsort, but only for steps in [0, 2³¹): a negative step (a bad record,
    # still sorted with its trace) would set the high bits and move its row out of its trace's group.
    if steps.min(initial=0) >= 0 and steps.max(initial=0) < 2**31 and codes.max(initial=0) < 2**31:
        return np.argsort((codes.astype(np.int64) << 31) | steps, kind="stable")
    return np.lexsort((steps, codes))


def _differs_from_trace_start(col: pa.Array, starts: NDArray[np.int64],
                              trace_of_row: NDArray[np.int64]) -> NDArray[np.bool_]:
    """Rows whose value (nulls included) differs from the first row of their trace."""
    first_idx = starts[trace_of_row]
    null = _nulls(col)
    if pa.types.is_string(col.type):
        vals = np.asarray(pc.dictionary_encode(col.fill_null("")).indices, dtype=np.int64)
    elif pa.types.is_boolean(col.type):
        vals = np.asarray(col.fill_null(False), dtype=np.int64)
    else:
        vals = np.asarray(col.fill_null(0))
    differs: NDArray[np.bool_] = (vals != vals[first_idx]) | (null != null[first_idx])
    return differs


def _one_chunk(col: pa.ChunkedArray) -> pa.Array:
    return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()


def _changes_within_trace(col: pa.Array, same: NDArray[np.bool_]) -> bool:
    """Cheap exact test: does any row differ from the previous row of its trace (nulls included)?"""
    null = _nulls(col)
    if pa.types.is_string(col.type):
        vals = np.asarray(pc.dictionary_encode(col.fill_null("")).indices)
    elif pa.types.is_boolean(col.type):
        vals = np.asarray(col.fill_null(False))
    else:
        vals = np.asarray(col.fill_null(0))
    s = same[1:]
    return bool((s & (vals[1:] != vals[:-1])).any() or (s & (null[1:] != null[:-1])).any())
