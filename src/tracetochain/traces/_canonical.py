"""Canonical trace files — the long table of docs/formats.md in JSONL, CSV, Parquet or a JSON array — decoded into a
:class:`TraceTable`: what :meth:`TraceTable.read` and the ``canonical`` reader (:mod:`tracetochain.readers.canonical`)
both run.

The extension picks the parser: ``.jsonl``/``.ndjson`` (one JSON object per line; problems are named by file line),
``.json`` (a JSON array of objects; by 0-based element index), ``.csv`` (a header line, then one step per line; by
file line) and ``.parquet``/``.pq`` (by 0-based row). Parsing is done here, record by record, so that with
``on_error="skip"`` a line that is not UTF-8, not JSON, not an object, nested too deeply or holding a number Python
cannot read is skipped and counted like any other bad record; validation is :func:`~._build.build_table` (the same as
every reader). A JSONL file may start with header lines describing the run (``{"metadata": {...}}``; see
:func:`~._json.is_header_record`): they are kept in ``table.report.run_metadata``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from tracetochain._files import check_input_file
from tracetochain._text import CSV_NEUTRALISED_PATTERN, one_line
from tracetochain.exceptions import TraceValidationError
from tracetochain.traces._build import build_table, drop_traces, records_to_arrow
from tracetochain.traces._json import JSONLimitError, is_header_record, json_loads, load_json, merge_header
from tracetochain.traces._table import Problem, TraceTable

#: File extensions of the canonical table (the parser follows the extension).
CANONICAL_EXTENSIONS = (".jsonl", ".ndjson", ".csv", ".parquet", ".pq", ".json")
_LINE_HINT = "each line must be one JSON object; fix or remove the line, or pass on_error='skip'"


def read_canonical(path: str | Path, *, on_error: str = "raise", format: str = "canonical") -> TraceTable:
    """Read a canonical trace file into a validated :class:`TraceTable` (``report.format`` is ``format``)."""
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in CANONICAL_EXTENSIONS:
        raise TraceValidationError(f"unknown file extension {p.suffix!r}", source=str(p),
                                   hint=f"use one of {', '.join(sorted(CANONICAL_EXTENSIONS))}")
    check_input_file(p)
    problems: list[Problem] = []
    header: dict[str, Any] = {}
    if suffix in (".jsonl", ".ndjson"):
        table, locs, problems = _read_jsonl(p, on_error, header)
        kind = "line"
    elif suffix == ".json":
        table, locs = _read_json_array(p)
        kind = "row"
    elif suffix == ".csv":
        table, locs, problems = _read_csv(p, on_error)
        kind = "line"
    else:
        table, locs = _read_parquet(p)
        kind = "row"
    result = build_table(table, on_error=on_error, source=str(p), format=format, problems=problems,
                         locations=locs, location_kind=kind)
    result.report.run_metadata = header
    return result


def parse_jsonl_lines(lines: Iterable[tuple[int, bytes | str]], source: str, on_error: str,
                      header: dict[str, Any] | None = None,
                      ) -> tuple[list[dict[str, Any]], list[int], list[Problem]]:
    """Parse (line number, raw line) pairs of a canonical JSONL source into records, their line numbers and the
    lines skipped.

    The one JSONL line parser of the canonical table, in memory and partitioned (``--engine``) alike: blank lines
    are skipped; a byte-order mark on line 1 is dropped; a line that is not UTF-8, not JSON, nested too deeply,
    holds a number too long to read, or is not an object raises a :class:`TraceValidationError` naming ``source``
    and the line — or, with ``on_error="skip"``, becomes a counted :class:`Problem`. Header lines describing the
    run, before the first step, are merged into ``header`` (when given) instead of being read as steps.
    """
    records: list[dict[str, Any]] = []
    locations: list[int] = []
    problems: list[Problem] = []

    def bad(lineno: int, message: str, hint: str) -> None:
        if on_error == "raise":
            raise TraceValidationError(message, source=source, line=lineno, hint=hint)
        problems.append(Problem(lineno, None, message))

    for lineno, raw in lines:
        if lineno == 1:  # a byte-order mark is not part of the first record
            raw = raw[3:] if isinstance(raw, bytes) and raw.startswith(b"\xef\xbb\xbf") else \
                raw[1:] if isinstance(raw, str) and raw.startswith("\ufeff") else raw
        if not raw.strip():
            continue
        try:
            rec = json_loads(raw.decode("utf-8") if isinstance(raw, bytes) else raw)
        except UnicodeDecodeError as exc:
            bad(lineno, f"not UTF-8 text ({exc.reason})", "save the file as UTF-8")
            continue
        except json.JSONDecodeError as exc:
            where = "" if isinstance(exc, JSONLimitError) else f" at column {exc.colno}"
            bad(lineno, f"not valid JSON ({exc.msg}{where})", _LINE_HINT)
            continue
        if not isinstance(rec, dict):
            bad(lineno, f"expected a JSON object, got {type(rec).__name__}",
                'each line must be one step record such as {"trace_id": "t1", "step_idx": 0, "state": "plan", '
                '"outcome": "success"}')
            continue
        if header is not None and not records and "trace_id" not in rec and is_header_record(rec):
            merge_header(header, rec)  # a header line describing the run, before the first step
            continue
        records.append(rec)
        locations.append(lineno)
    return records, locations, problems


def _read_jsonl(path: Path, on_error: str, header: dict[str, Any]
                ) -> tuple[pa.Table, NDArray[np.int64], list[Problem]]:
    with path.open("rb") as fh:
        records, lines, problems = parse_jsonl_lines(enumerate(fh, start=1), str(path), on_error, header)
    return records_to_arrow(records), np.asarray(lines, dtype=np.int64), problems


def _read_json_array(path: Path) -> tuple[pa.Table, NDArray[np.int64]]:
    data = load_json(path)
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise TraceValidationError(
            "a .json trace file must hold a list of step records", source=str(path),
            hint="use JSONL (one record per line) or a JSON array of objects",
        )
    # Records of a JSON array have no line numbers of their own: report the 0-based element index.
    return records_to_arrow(data), np.arange(len(data), dtype=np.int64)


def _read_csv(path: Path, on_error: str) -> tuple[pa.Table, NDArray[np.int64], list[Problem]]:
    import pyarrow.csv as pacsv

    try:
        table = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(strings_can_be_null=True))
        table.column_names  # noqa: B018 — Arrow decodes the header names only when asked
    except (pa.ArrowException, OSError) as exc:
        raise TraceValidationError(f"cannot parse CSV ({one_line(str(exc), 300)})", source=str(path)) from None
    except UnicodeDecodeError as exc:
        raise TraceValidationError(f"cannot parse CSV (the header is not UTF-8 text: {exc.reason})",
                                   source=str(path), line=1) from None
    names = table.column_names
    twice = next((n for n in names if names.count(n) > 1), None)
    if twice is not None:
        raise TraceValidationError(f"column {twice!r} appears twice", source=str(path), line=1, field=twice,
                                   hint="give every column its own name")
    # Header is line 1; assumes no quoted field spans several lines (true of canonical files we write).
    locs = np.arange(2, table.num_rows + 2, dtype=np.int64)
    table, locs, problems = _decode_text_cells(table, locs, str(path), on_error)
    return _restore_formulas(table), locs, problems


def _decode_text_cells(table: pa.Table, locs: NDArray[np.int64], source: str, on_error: str
                       ) -> tuple[pa.Table, NDArray[np.int64], list[Problem]]:
    """Columns Arrow read as bytes (some cell is not UTF-8) back to text, with the bad cells named by their line.

    One bad byte makes Arrow type the whole column as binary, which validation would blame on the column's first
    row; here the bad cells themselves raise (``on_error="raise"``) or drop their traces (``"skip"``, counted).
    """
    problems: list[Problem] = []
    for name in list(table.column_names):
        col = table.column(name)
        if not (pa.types.is_binary(col.type) or pa.types.is_large_binary(col.type)):
            continue
        values: list[str | None] = []
        bad = np.zeros(table.num_rows, dtype=bool)
        reason = ""
        for i, raw in enumerate(col.to_pylist()):
            try:
                values.append(None if raw is None else raw.decode("utf-8"))
            except UnicodeDecodeError as exc:
                values.append(None)
                bad[i] = True
                reason = reason or exc.reason
        table = table.set_column(table.column_names.index(name), name, pa.array(values, pa.string()))
        if not bad.any():
            continue
        message = f"not UTF-8 text ({reason})"
        if on_error == "raise":
            raise TraceValidationError(message, source=source, line=int(locs[int(np.flatnonzero(bad)[0])]),
                                       field=name, hint="save the file as UTF-8")
        if "trace_id" in table.column_names:
            keep, dropped = drop_traces(table, locs, bad, name, message)
        else:
            keep, dropped = ~bad, [Problem(int(locs[i]), name, message) for i in np.flatnonzero(bad)]
        problems += dropped
        table, locs = table.filter(pa.array(keep)), locs[keep]
    return table, locs, problems


def _restore_formulas(table: pa.Table) -> pa.Table:
    """Undo the spreadsheet-formula neutralisation of :meth:`TraceTable.write_to` (a leading ``'``)."""
    import pyarrow.compute as pc

    for i, name in enumerate(table.column_names):
        col = table.column(i)
        if not pa.types.is_string(col.type):
            continue
        hit = pc.match_substring_regex(col, CSV_NEUTRALISED_PATTERN)
        if pc.any(hit).as_py():
            table = table.set_column(i, name, pc.if_else(hit, pc.utf8_slice_codeunits(col, 1), col))
    return table


def _read_parquet(path: Path) -> tuple[pa.Table, NDArray[np.int64]]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
        if len(set(table.column_names)) < table.num_columns:
            return table, np.arange(table.num_rows, dtype=np.int64)  # build_table names the repeated column
        cols = {}
        for name in table.column_names:  # one column at a time, so the peak stays near one copy of the data
            cols[name] = table.column(name).combine_chunks()
            table = table.drop_columns([name])
        table = pa.table(cols)
    except (pa.ArrowException, OSError, EOFError) as exc:
        raise TraceValidationError(f"cannot read Parquet ({exc})", source=str(path)) from None
    del cols
    return table, np.arange(table.num_rows, dtype=np.int64)
