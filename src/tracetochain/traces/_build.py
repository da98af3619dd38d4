"""A source's Arrow table or step records → a validated :class:`TraceTable`: the one path every reader (and
:meth:`TraceTable.read`) goes through.

:func:`records_to_arrow` types step dicts as columns without failing the whole source on one odd value;
:func:`build_table` settles the rows validation does not handle yet, takes out the episodes that ended before any
step, and validates the rest through :meth:`TraceTable.from_arrow`, so skip-and-count and the ingest report work the
same for every format.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from tracetochain.exceptions import TraceValidationError
from tracetochain.traces._schema import COLUMNS
from tracetochain.traces._table import Problem, TraceTable

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_ARROW_FAILURES = (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, UnicodeEncodeError)
_BOOL_COLUMNS = tuple(c.name for c in COLUMNS if c.type == pa.bool_())
_BOOL_TEXT = {"true": True, "1": True, "false": False, "0": False}


def clean_text(value: str) -> str:
    """``value`` with lone surrogates (from ``\\ud800``-style JSON escapes, which UTF-8 cannot hold) replaced by
    ``?``; other text is returned unchanged."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", errors="replace").decode("utf-8")
    return value


def _as_text_value(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, str):
        return clean_text(v)
    if isinstance(v, (dict, list)):
        try:
            return clean_text(json.dumps(v, ensure_ascii=False))
        except (TypeError, ValueError, RecursionError):
            return clean_text(repr(v))
    return clean_text(str(v))


def records_to_arrow(records: list[dict[str, Any]], *, drop_empty: bool = False) -> pa.Table:
    """Step dicts as an Arrow table, one column per field (in order of first appearance).

    A field Arrow cannot type as one column — mixed Python types (3 and "3"), an integer outside 64 bits, text
    with lone surrogates — is kept as text, so that :meth:`TraceTable.from_arrow` reports each bad value by its
    record (e.g. ``expected an integer, got '1e30'``) instead of failing the whole source. No records at all give
    the minimal canonical columns, so "nothing to fit" is reported downstream rather than a missing field (and
    records without any field each report their empty ``trace_id``). With ``drop_empty`` a field that is None in
    every record is left out, as if no record had it (readers' records: None means "not given").
    """
    names: dict[str, None] = {}
    for r in records:
        names.update(dict.fromkeys(r))
    cols: dict[str, pa.Array] = {}
    for name in names:
        values = [r.get(name) for r in records]
        try:
            column = pa.array(values)
        except _ARROW_FAILURES:
            column = pa.array([_as_text_value(v) for v in values], pa.string())
        if not drop_empty or column.null_count < len(column):
            cols[name] = column
    if not cols:  # no records, or only empty ones (each then reports its empty trace_id)
        n = len(records)
        return pa.table({"trace_id": pa.nulls(n, pa.string()), "step_idx": pa.nulls(n, pa.int64()),
                         "state": pa.nulls(n, pa.string()), "outcome": pa.nulls(n, pa.string())})
    return pa.table(cols)


def arrow_column(values: list[Any], typ: pa.DataType) -> pa.Array:
    """``pa.array(values, type=typ)`` for reader-built columns, where a value that does not fit (an integer
    outside 64 bits, text with lone surrogates) becomes null / cleaned text instead of failing the source."""
    try:
        return pa.array(values, type=typ)
    except _ARROW_FAILURES:
        fixed: list[Any]
        if pa.types.is_integer(typ):
            fixed = [v if isinstance(v, int) and not isinstance(v, bool) and _INT64_MIN <= v <= _INT64_MAX
                     else None for v in values]
        elif pa.types.is_string(typ):
            fixed = [None if v is None else clean_text(str(v)) for v in values]
        else:
            raise
        return pa.array(fixed, type=typ)


def build_table(table: pa.Table, *, on_error: str, source: str, format: str, problems: list[Problem],
                locations: Any, location_kind: str, zero_step: bool = False,
                defer_step_gaps: bool = False) -> TraceTable:
    """Validate a reader's Arrow table into a :class:`TraceTable` (:meth:`TraceTable.from_arrow`).

    Two kinds of rows are settled here first, because the shared validation does not handle them yet (see
    :func:`_settle_rows`): with ``on_error="skip"`` rows without a trace id, and text or 0/1 values with gaps in a
    true/false column such as ``error``. Then the records of episodes that ended before any step are taken out
    (:func:`split_zero_step`; ``zero_step`` says the reader added some, so ``step_idx`` may be absent from every
    record) and kept, validated, in ``report.zero_step``.
    """
    names = table.column_names
    if len(set(names)) < len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise TraceValidationError(f"column {twice!r} appears twice", source=source, field=twice,
                                   hint="give every column its own name")
    locs = np.asarray(locations, dtype=np.int64) if locations is not None else np.arange(table.num_rows)
    table, locs, settled = _settle_rows(table, locs, on_error, source, location_kind)
    if zero_step and "step_idx" not in names and "trace_id" in names:
        table = table.append_column("step_idx", pa.nulls(table.num_rows, pa.int64()))
    table, locs, zero_rows, zero_locs = split_zero_step(table, locs)
    if zero_rows is not None and table.num_rows == 0 and not {"state", "step_kind"} & set(table.column_names):
        table = table.append_column("state", pa.nulls(0, pa.string()))  # only zero-step episodes: no steps at all
    result = TraceTable.from_arrow(table, on_error=on_error,  # type: ignore[arg-type]
                                   source=source, format=format, problems=[*problems, *settled], locations=locs,
                                   location_kind=location_kind, defer_step_gaps=defer_step_gaps)
    if zero_rows is not None:
        _add_zero_step(result, zero_rows, zero_locs, on_error, source, format, location_kind)
    return result


# ================================================================================================ zero-step episodes
#: Step fields: a record with none of them (and no ``step_idx``) is an episode that ended before any step.
STEP_FIELDS = ("step_idx", "state", "step_kind", "tool_name", "text")


def split_zero_step(table: pa.Table, locs: NDArray[np.int64]
                    ) -> tuple[pa.Table, NDArray[np.int64], pa.Table | None, NDArray[np.int64]]:
    """Take out the records of episodes that ended before any agent step.

    Such an episode is one trace whose single record has no step fields: ``step_idx`` null and no ``state``,
    ``step_kind``, ``tool_name`` or ``text``. It is still a trial with an outcome (a run that crashed or gave up
    before acting, or was judged on no action at all), so it must be counted, never dropped. The step table cannot
    hold it yet, so it travels beside the table in ``report.zero_step``. A stepless record whose trace also has
    other records stays in the table (where validation reports its empty ``step_idx``).

    Returns the step rows, their locations, and the zero-step rows with theirs (None when there are none).
    """
    names = table.column_names
    if table.num_rows == 0 or "trace_id" not in names or "step_idx" not in names:
        return table, locs, None, np.zeros(0, np.int64)
    stepless = np.asarray(_column(table, "step_idx").is_null(), dtype=bool)
    for name in STEP_FIELDS[1:]:
        if name in names and stepless.any():
            col = _column(table, name)
            empty = col.is_null()
            if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
                empty = pc.or_kleene(empty, pc.equal(col, "")).fill_null(True)
            stepless &= np.asarray(empty, dtype=bool)
    if not stepless.any():
        return table, locs, None, np.zeros(0, np.int64)
    tid = _column(table, "trace_id")
    keys = np.asarray(pc.dictionary_encode(tid.cast(pa.string()) if not pa.types.is_string(tid.type) else tid)
                      .indices.fill_null(-1), dtype=np.int64)
    rows_per_trace = np.bincount(keys[keys >= 0], minlength=int(keys.max(initial=-1)) + 1)
    alone = np.zeros(len(keys), dtype=bool)
    valid = keys >= 0
    alone[valid] = rows_per_trace[keys[valid]] == 1
    zero = stepless & alone
    if not zero.any():
        return table, locs, None, np.zeros(0, np.int64)
    return table.filter(pa.array(~zero)), locs[~zero], table.filter(pa.array(zero)), locs[zero]


def _add_zero_step(result: TraceTable, rows: pa.Table, locs: NDArray[np.int64], on_error: str, source: str,
                   format: str, location_kind: str) -> None:
    """Validate zero-step records like any other (outcome, task, trial, reward …) and keep them in the report."""
    probe = rows.drop_columns([c for c in STEP_FIELDS if c in rows.column_names])
    probe = probe.append_column("step_idx", pa.array(np.zeros(probe.num_rows, np.int64)))
    probe = probe.append_column("state", pa.array(["(no step)"] * probe.num_rows, pa.string()))
    checked = TraceTable.from_arrow(probe, on_error=on_error,  # type: ignore[arg-type]
                                    source=source, format=format, locations=locs, location_kind=location_kind)
    report, extra = result.report, checked.report
    report.n_records += extra.n_records
    report.n_records_skipped += extra.n_records_skipped
    report.n_traces_skipped += extra.n_traces_skipped
    for reason, n in extra.skipped_by_reason.items():
        report.skipped_by_reason[reason] = report.skipped_by_reason.get(reason, 0) + n
    report.problems = [*report.problems, *extra.problems][:50]
    kept = checked.to_arrow().drop_columns(["step_idx", "state"])
    report.zero_step = [{k: v for k, v in rec.items() if v is not None} for rec in kept.to_pylist()]


def _column(table: pa.Table, name: str) -> pa.Array:
    col = table.column(name)
    return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()


def _settle_rows(table: pa.Table, locs: NDArray[np.int64], on_error: str, source: str,
                 location_kind: str) -> tuple[pa.Table, NDArray[np.int64], list[Problem]]:
    """Settle rows that ``TraceTable`` validation mishandles, exactly as it means to treat them.

    * A true/false column (``error``) held as text or integers with empty cells: valid values (true/false/1/0, any
      case) become booleans here; any other value raises ``expected true/false`` naming its record, or with
      ``on_error="skip"`` drops its whole trace (counted). Left alone, an empty cell beside a valid one stopped
      the read with an untyped ``ValueError``.
    * With ``on_error="skip"``, rows with an empty or missing ``trace_id`` are dropped and counted ("trace_id is
      empty"); left in, they broke the step ordering of the rows that remained.
    """
    problems: list[Problem] = []
    if table.num_rows == 0 or "trace_id" not in table.column_names:
        return table, locs, problems
    for name in _BOOL_COLUMNS:
        if name not in table.column_names:
            continue
        col = _column(table, name)
        values: list[Any]
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            values = [None if v is None else _BOOL_TEXT.get(v.strip().lower(), v) for v in col.to_pylist()]
        elif pa.types.is_integer(col.type):
            values = [None if v is None else {1: True, 0: False}.get(v, v) for v in col.to_pylist()]
        else:
            continue  # booleans already, or a type the validation rejects as a whole (which it handles)
        bad = np.fromiter((v is not None and not isinstance(v, bool) for v in values), bool, len(values))
        if bad.any():
            first = int(np.flatnonzero(bad)[0])
            message = f"expected true/false, got {values[first]!r}"
            if on_error == "raise":
                loc = int(locs[first])
                raise TraceValidationError(message, source=source, line=loc if location_kind == "line" else None,
                                           row=None if location_kind == "line" else loc, field=name,
                                           hint=f"write {name} as true/false")
            keep, dropped = drop_traces(table, locs, bad, name, message)
            problems += dropped
            table, locs = table.filter(pa.array(keep)), locs[keep]
            values = [v for v, k in zip(values, keep, strict=True) if k]
        table = table.set_column(table.column_names.index(name), name, pa.array(values, pa.bool_()))
    if on_error == "skip" and table.num_rows:
        tid = _column(table, "trace_id")
        if pa.types.is_string(tid.type) or pa.types.is_large_string(tid.type):
            lost = np.asarray(pc.or_kleene(pc.is_null(tid), pc.equal(tid, "")).fill_null(True), dtype=bool)
        elif pa.types.is_integer(tid.type):
            lost = np.asarray(pc.is_null(tid), dtype=bool)
        else:
            lost = np.zeros(table.num_rows, bool)
        if lost.any():
            problems += [Problem(int(locs[i]), "trace_id", "trace_id is empty") for i in np.flatnonzero(lost)]
            table, locs = table.filter(pa.array(~lost)), locs[~lost]
    return table, locs, problems


def drop_traces(table: pa.Table, locs: NDArray[np.int64], bad: NDArray[np.bool_], fieldname: str,
                 message: str) -> tuple[NDArray[np.bool_], list[Problem]]:
    """Rows to keep once every trace holding a ``bad`` row is dropped, and one counted problem per dropped row
    (the trace's first bad row carries the whole-trace count; the others say they went with it)."""
    tid = _column(table, "trace_id")
    keys: list[Any] = tid.to_pylist() if (pa.types.is_string(tid.type) or pa.types.is_large_string(tid.type)
                                          or pa.types.is_integer(tid.type)) else [None] * len(tid)
    bad_ids = {keys[i] for i in np.flatnonzero(bad) if keys[i] not in (None, "")}
    drop = bad | np.fromiter((k in bad_ids for k in keys), bool, len(keys))
    problems: list[Problem] = []
    counted: set[Any] = set()
    for i in np.flatnonzero(drop):
        key = keys[i]
        if bad[i] and key not in counted:
            if key not in (None, ""):
                counted.add(key)
            problems.append(Problem(int(locs[i]), fieldname, message, whole_trace=key not in (None, "")))
        else:
            problems.append(Problem(int(locs[i]), fieldname, f"{message} (another step of its trace)"))
    return ~drop, problems
