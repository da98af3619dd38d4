"""Where a corpus is cut into partitions, how each is read and validated, and trace-id hashing.

See the package docstring (:mod:`tracetochain.partitioned`) for the partitioning rules.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from tracetochain._files import check_input_file
from tracetochain.exceptions import TraceValidationError
from tracetochain.traces import TraceTable
from tracetochain.traces.shared import build_table, fnv1a_hashes, json_loads, parse_jsonl_lines, records_to_arrow

PartitionBy = Literal["range", "file"]
OnError = Literal["raise", "skip"]

PARQUET_SUFFIXES = (".parquet", ".pq")
JSONL_SUFFIXES = (".jsonl", ".ndjson")
DEFAULT_ROWS_PER_PARTITION = 1 << 20
DEFAULT_BYTES_PER_PARTITION = 32 << 20
_MAX_PROBLEMS = 50
_READ_BLOCK = 16 << 20
_PROBE_ROWS = 4096


# ---------------------------------------------------------------------------------------------------- partitions
@dataclass(frozen=True)
class Partition:
    """One piece of a corpus: a file and a range in it. Cheap to pickle; :meth:`read` does the I/O.

    Parquet: row groups ``start:stop`` of a file with ``n_row_groups`` row groups, ``first_location`` being the
    file row of the first row of group ``start``. JSONL: bytes ``start:stop``, ``first_location`` being the line
    number of the line at byte ``start``. ``by="file"``: the whole file.
    """

    index: int
    source: str
    format: Literal["parquet", "jsonl"]
    start: int
    stop: int
    first_location: int
    n_row_groups: int = 0
    by: PartitionBy = "range"

    def describe(self) -> str:
        """Where the partition is, in words (for messages)."""
        if self.by == "file":
            return f"{self.source} (whole file)"
        if self.format == "parquet":
            return f"{self.source} row groups {self.start}–{self.stop - 1} (from row {self.first_location})"
        return f"{self.source} from line {self.first_location} (bytes {self.start}–{self.stop})"

    def read(self, *, on_error: OnError = "raise", defer_step_gaps: bool = False) -> TraceTable:
        """The partition as a validated :class:`TraceTable` (the same checks and messages as a whole-file read).

        ``defer_step_gaps``: a trace that does not start at step 0 — perhaps the tail of a trace whose first steps
        lie in another partition — is dropped and listed in ``report.step_gaps`` rather than reported at once
        (counting reports it after checking that no trace is split across partitions).
        """
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
        if self.format == "jsonl":
            return _read_jsonl_range(self, on_error, defer_step_gaps)
        return _read_parquet_partition(self, on_error, defer_step_gaps)


def plan_partitions(source: str | Path | Sequence[str | Path], *, format: str | None = None,
                    by: PartitionBy = "range", rows_per_partition: int = DEFAULT_ROWS_PER_PARTITION,
                    bytes_per_partition: int = DEFAULT_BYTES_PER_PARTITION) -> list[Partition]:
    """Cut a corpus into partitions (see the module docstring for the rules); nothing but footers is read for
    Parquet, JSONL files are scanned once for line numbers and trace boundaries.

    ``source`` is a file, a directory (its ``*.parquet``/``*.pq`` or ``*.jsonl``/``*.ndjson`` files, sorted by name),
    a pyarrow filesystem URI of a Parquet file or directory (``s3://…``, ``gs://…``, ``file://…``), or a list of
    those. ``format`` ("parquet" or "jsonl") overrides the extension.
    """
    if by not in ("range", "file"):
        raise ValueError(f"by must be 'range' or 'file', got {by!r}")
    if rows_per_partition < 1 or bytes_per_partition < 1:
        raise ValueError("rows_per_partition and bytes_per_partition must be >= 1")
    files = _list_files(source, format)
    parts: list[Partition] = []
    for name, fmt in files:
        if fmt == "parquet":
            parts.extend(_plan_parquet(name, by, rows_per_partition, len(parts)))
        else:
            parts.extend(_plan_jsonl(name, by, bytes_per_partition, len(parts)))
    return parts


def iter_partitions(source: str | Path | Sequence[str | Path], *, format: str | None = None,
                    by: PartitionBy = "range", rows_per_partition: int = DEFAULT_ROWS_PER_PARTITION,
                    bytes_per_partition: int = DEFAULT_BYTES_PER_PARTITION,
                    on_error: OnError = "raise") -> Iterator[TraceTable]:
    """The partitions of a corpus as validated :class:`TraceTable` objects, one at a time, in order.

    Every trace is in exactly one partition (when its steps are contiguous; see the module docstring).
    """
    for p in plan_partitions(source, format=format, by=by, rows_per_partition=rows_per_partition,
                             bytes_per_partition=bytes_per_partition):
        yield p.read(on_error=on_error)


# ---------------------------------------------------------------------------------------------------- listing
def _is_uri(name: str) -> bool:
    return "://" in name


def _format_of(name: str, format: str | None) -> Literal["parquet", "jsonl"] | None:
    if format is not None:
        if format not in ("parquet", "jsonl"):
            raise ValueError(f"format must be 'parquet' or 'jsonl', got {format!r}")
        return format  # type: ignore[return-value]
    low = name.lower()
    if low.endswith(PARQUET_SUFFIXES):
        return "parquet"
    if low.endswith(JSONL_SUFFIXES):
        return "jsonl"
    return None


def _list_files(source: str | Path | Sequence[str | Path], format: str | None) -> list[tuple[str, str]]:
    items = [source] if isinstance(source, (str, Path)) else list(source)
    if not items:
        raise TraceValidationError("no input files given", source="(empty list)")
    out: list[tuple[str, str]] = []
    for item in items:
        name = str(item)
        if _is_uri(name):
            out.extend(_list_uri(name, format))
            continue
        p = Path(name)
        check_input_file(p, allow_folder=True)  # a FIFO or a device would block or never end
        if p.is_dir():
            found = sorted(f for f in p.iterdir() if _format_of(f.name, format) is not None)
            for f in found:  # a trace file that is a FIFO, a device or a folder is named, not silently left out
                check_input_file(f)
            if not found:
                raise TraceValidationError(
                    "the directory holds no trace files", source=name,
                    hint="expected *.parquet, *.pq, *.jsonl or *.ndjson files (or pass format=)")
            out.extend((str(f), str(_format_of(f.name, format))) for f in found)
            continue
        if not p.exists():
            raise TraceValidationError("no such file", source=name)
        fmt = _format_of(p.name, format)
        if fmt is None:
            raise TraceValidationError(
                f"cannot read {p.suffix!r} files in partitions", source=name,
                hint="partitioned ingest reads Parquet (.parquet, .pq) and JSONL (.jsonl, .ndjson); convert other "
                     "formats with read_traces(...).write('traces.parquet')")
        out.append((name, fmt))
    kinds = {fmt for _, fmt in out}
    if len(kinds) > 1:
        raise TraceValidationError("the input mixes Parquet and JSONL files", source=str(source),
                                   hint="read one format at a time (or pass format=)")
    return out


def _list_uri(uri: str, format: str | None) -> list[tuple[str, str]]:
    import pyarrow.fs as pafs

    fs, path = pafs.FileSystem.from_uri(uri)
    info = fs.get_file_info(path)
    scheme = uri.split("://", 1)[0]
    if info.type == pafs.FileType.Directory:
        entries = fs.get_file_info(pafs.FileSelector(path, recursive=False))
        found = sorted(e.path for e in entries if e.type == pafs.FileType.File and _format_of(e.path, format))
        if not found:
            raise TraceValidationError("the directory holds no trace files", source=uri,
                                       hint="expected *.parquet or *.pq files")
        names = [f"{scheme}://{f}" for f in found]
    elif info.type == pafs.FileType.File:
        names = [uri]
    else:
        raise TraceValidationError("no such file", source=uri)
    out: list[tuple[str, str]] = []
    for name in names:
        fmt = _format_of(name, format) or "parquet"
        if fmt != "parquet":
            raise TraceValidationError("only Parquet can be read from a URI", source=name,
                                       hint="copy JSONL files to a local disk, or convert them to Parquet")
        out.append((name, fmt))
    return out


# ---------------------------------------------------------------------------------------------------- Parquet
def _parquet_file(source: str) -> Any:
    """The file, opened with its footer parsed once per process (a footer is O(row groups) to parse, and every
    partition of the file needs it)."""
    import pyarrow.parquet as pq

    try:
        if _is_uri(source):
            import pyarrow.fs as pafs

            fs, path = pafs.FileSystem.from_uri(source)
            info = fs.get_file_info(path)
            key: tuple[Any, ...] = (source, info.size, info.mtime_ns)
            handle: Any = fs.open_input_file(path)
        else:
            st = os.stat(source)
            key, handle = (source, st.st_size, st.st_mtime_ns), source
        metadata = _FOOTERS.get(key)
        pf = pq.ParquetFile(handle, metadata=metadata)
        if metadata is None:
            if len(_FOOTERS) >= 64:
                _FOOTERS.clear()
            _FOOTERS[key] = pf.metadata
        return pf
    except (pa.ArrowInvalid, OSError) as exc:
        raise TraceValidationError(f"cannot read Parquet ({exc})", source=source) from None


_FOOTERS: dict[tuple[Any, ...], Any] = {}  # (source, size, mtime) → parsed footer, per process


def _plan_parquet(source: str, by: PartitionBy, rows_per_partition: int, index0: int) -> list[Partition]:
    md = _parquet_file(source).metadata
    n_groups = md.num_row_groups
    rows = [md.row_group(i).num_rows for i in range(n_groups)]
    if by == "file" or n_groups == 0:
        return [Partition(index0, source, "parquet", 0, n_groups, 0, n_groups, by)]
    parts: list[Partition] = []
    start, acc, first_row, row = 0, 0, 0, 0
    for g, n in enumerate(rows):
        acc += n
        row += n
        if acc >= rows_per_partition or g == n_groups - 1:
            parts.append(Partition(index0 + len(parts), source, "parquet", start, g + 1, first_row, n_groups, by))
            start, acc, first_row = g + 1, 0, row
    return parts


def _leading_equal(values: pa.Array | pa.ChunkedArray, value: pa.Scalar) -> int:
    """How many leading entries of ``values`` equal ``value`` (nulls never do)."""
    if len(values) == 0 or not value.is_valid:
        return 0
    n, done, probe = len(values), 0, _PROBE_ROWS
    while done < n:  # traces are short next to a row group: look at a growing prefix, not the whole column
        eq = pc.equal(values.slice(done, probe), value).fill_null(False)
        arr = eq.to_numpy(zero_copy_only=False) if isinstance(eq, pa.ChunkedArray) else np.asarray(eq)
        if not arr.all():
            return done + int(np.argmin(arr))
        done += arr.size
        probe *= 4
    return n


def _plain(table: pa.Table) -> pa.Table:
    return table.replace_schema_metadata(None)


def _head_rows(pf: Any, group: int, n: int, columns: list[str] | None = None) -> pa.Table:
    """The first ``n`` rows of a row group, decoding no more pages than needed."""
    batches = []
    got = 0
    for batch in pf.iter_batches(batch_size=max(n, 1), row_groups=[group], columns=columns, use_threads=False):
        batches.append(batch)
        got += batch.num_rows
        if got >= n:
            break
    return _plain(pa.Table.from_batches(batches)).slice(0, n)


def _run_into(pf: Any, group: int, value: pa.Scalar) -> tuple[int, bool]:
    """Leading rows of ``group`` whose trace_id is ``value``; and whether the run covers the whole group."""
    k = 0
    for batch in pf.iter_batches(batch_size=_PROBE_ROWS, row_groups=[group], columns=["trace_id"],
                                 use_threads=False):
        run = _leading_equal(batch.column(0), value)
        k += run
        if run < batch.num_rows:
            return k, False
    return k, True


def _read_parquet_partition(part: Partition, on_error: OnError, defer_step_gaps: bool = False) -> TraceTable:
    pf = _parquet_file(part.source)
    md = pf.metadata
    try:
        table = _plain(pf.read_row_groups(list(range(part.start, part.stop)))) if part.stop > part.start \
            else _plain(pf.schema_arrow.empty_table())
    except (pa.ArrowInvalid, OSError) as exc:
        raise TraceValidationError(f"cannot read Parquet ({exc})", source=part.source) from None
    first = part.first_location  # file row of the first row of group `start`
    locations = [np.arange(first, first + table.num_rows, dtype=np.int64)]
    if part.by == "range" and "trace_id" in table.column_names and table.num_rows:
        ids = table.column("trace_id")
        drop = 0
        g = part.start - 1  # the last non-empty row group before ours
        while g >= 0 and md.row_group(g).num_rows == 0:
            g -= 1
        if g >= 0:  # the leading trace belongs to an earlier partition if it started there
            prev = pf.read_row_group(g, columns=["trace_id"]).column(0)
            drop = _leading_equal(ids, prev[len(prev) - 1])
        tables = [table.slice(drop)]
        locations = [locations[0][drop:]]
        if drop < table.num_rows:  # the trailing trace may go on into the next row groups: read it to its end
            last = ids[table.num_rows - 1]
            g, row = part.stop, first + table.num_rows
            while g < part.n_row_groups:
                k, whole = _run_into(pf, g, last)
                if k:
                    tables.append(_head_rows(pf, g, k).select(table.column_names))
                    locations.append(np.arange(row, row + k, dtype=np.int64))
                if not whole:
                    break
                row += md.row_group(g).num_rows
                g += 1
        table = pa.concat_tables(tables, promote_options="default") if len(tables) > 1 else tables[0]
    locs = np.concatenate(locations)
    # The canonical reader's validation, which also keeps the episodes that ended before any step (report.zero_step).
    return build_table(table, on_error=on_error, source=part.source, format="parquet", problems=[], locations=locs,
                       location_kind="row", defer_step_gaps=defer_step_gaps)


# ---------------------------------------------------------------------------------------------------- JSONL
_UNKNOWN = object()


def _line_trace_id(raw: bytes) -> object:
    """The trace id of one JSONL line as the canonical table will see it, or _UNKNOWN (blank, bad, no id)."""
    if not raw.strip():
        return _UNKNOWN
    try:
        rec = json_loads(raw.decode("utf-8-sig"))
    except (json.JSONDecodeError, UnicodeDecodeError):  # the read of the partition reports the line
        return _UNKNOWN
    if not isinstance(rec, dict):
        return _UNKNOWN
    tid = rec.get("trace_id")
    return _UNKNOWN if tid is None or tid == "" else str(tid)


def _trace_boundary_after(fh: Any, target: int, size: int) -> int:
    """The first line start ≥ ``target`` where a new trace begins (or ``size``)."""
    fh.seek(target - 1)
    fh.readline()  # the rest of the line holding byte target − 1
    pos = fh.tell()
    current: object = _UNKNOWN
    while pos < size:
        raw = fh.readline()
        if not raw:
            break
        tid = _line_trace_id(raw)
        if tid is not _UNKNOWN:
            if current is _UNKNOWN:
                current = tid
            elif tid != current:
                return int(pos)
        pos += len(raw)
    return size


def _plan_jsonl(source: str, by: PartitionBy, bytes_per_partition: int, index0: int) -> list[Partition]:
    path = Path(source)
    size = path.stat().st_size
    cuts = [0]
    if by == "range":
        with path.open("rb") as fh:
            target = bytes_per_partition
            while target < size:
                cut = _trace_boundary_after(fh, target, size)
                if cut >= size:
                    break
                cuts.append(cut)
                target = cut + bytes_per_partition
    cuts.append(size)
    first_lines = [1]
    with path.open("rb") as fh:  # line numbers of the cuts: count newlines (C speed), parse nothing
        for a, b in itertools.pairwise(cuts[:-1]):
            fh.seek(a)
            remaining, n = b - a, 0
            while remaining > 0:
                buf = fh.read(min(_READ_BLOCK, remaining))
                if not buf:
                    break
                n += buf.count(b"\n")
                remaining -= len(buf)
            first_lines.append(first_lines[-1] + n)
    return [Partition(index0 + i, source, "jsonl", a, b, line, 0, by)
            for i, (a, b, line) in enumerate(zip(cuts[:-1], cuts[1:], first_lines, strict=True))]


def _read_jsonl_range(part: Partition, on_error: OnError, defer_step_gaps: bool = False) -> TraceTable:
    """Parse lines exactly as ``TraceTable.read`` does (blank lines skipped; bad JSON named by its line)."""
    with open(part.source, "rb") as fh:
        fh.seek(part.start)
        data = fh.read(part.stop - part.start)
    records, lines, problems = parse_jsonl_lines(enumerate(data.split(b"\n"), start=part.first_location),
                                                 part.source, on_error)
    del data
    # The canonical reader's validation, which also keeps the episodes that ended before any step (report.zero_step).
    return build_table(records_to_arrow(records), on_error=on_error, source=part.source, format="jsonl",
                       problems=problems, locations=lines, location_kind="line", defer_step_gaps=defer_step_gaps)


# ---------------------------------------------------------------------------------------------------- hashing
def trace_id_hashes(ids: pa.Array | pa.ChunkedArray) -> NDArray[np.uint64]:
    """64-bit FNV-1a hash of every id (``traces._hashing.fnv1a_hashes``)."""
    return fnv1a_hashes(ids)


def _table_trace_ids(traces: TraceTable) -> pa.Array:
    ids = traces.to_arrow().column("trace_id")
    ids = ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids
    return ids.take(pa.array(traces.offsets[:-1])) if traces.n_traces else pa.array([], pa.string())


# ---------------------------------------------------------------------------------------------------- rewriting
def repartition_by_trace(source: str | Path | Sequence[str | Path], out_dir: str | Path, n_parts: int, *,
                         compression: str = "zstd") -> list[Path]:
    """Rewrite Parquet data into ``n_parts`` files ``part-00000.parquet`` … by ``fnv1a(trace_id) mod n_parts``.

    The fallback for data whose traces are not contiguous: afterwards every trace lies in exactly one part, so
    ``fit_partitioned(out_dir, by="file")`` counts it correctly (each part is read whole, so choose ``n_parts``
    so that a part fits in a worker's memory). One streaming pass, one row group in memory at a time; rows keep
    their relative order. Rows without a trace_id go to part 0 (where validation reports them).
    """
    import pyarrow.parquet as pq

    if n_parts < 1:
        raise ValueError(f"n_parts must be >= 1, got {n_parts}")
    files = _list_files(source, None)
    if any(fmt != "parquet" for _, fmt in files):
        raise TraceValidationError("repartition_by_trace reads Parquet only", source=str(source),
                                   hint="convert JSONL first: TraceTable.read(path).write('traces.parquet')")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"part-{k:05d}.parquet" for k in range(n_parts)]
    writers: list[Any] = [None] * n_parts
    schema: pa.Schema | None = None
    try:
        for name, _ in files:
            pf = _parquet_file(name)
            for g in range(pf.metadata.num_row_groups):
                table = _plain(pf.read_row_group(g))
                if schema is None:
                    schema = table.schema
                    for k in range(n_parts):
                        writers[k] = pq.ParquetWriter(paths[k], schema, compression=compression)
                elif table.schema != schema:
                    table = table.select(schema.names).cast(schema)
                if "trace_id" not in table.column_names:
                    raise TraceValidationError("required field 'trace_id' is missing", source=name,
                                               field="trace_id")
                part = (trace_id_hashes(table.column("trace_id")) % np.uint64(n_parts)).astype(np.int64)
                order = np.argsort(part, kind="stable")
                bounds = np.searchsorted(part[order], np.arange(n_parts + 1))
                for k in range(n_parts):
                    if bounds[k + 1] > bounds[k]:
                        writers[k].write_table(table.take(pa.array(order[bounds[k]:bounds[k + 1]])))
        if schema is None:  # no rows anywhere: write empty parts with the first file's schema
            schema = _plain(_parquet_file(files[0][0]).schema_arrow.empty_table()).schema
            for k in range(n_parts):
                writers[k] = pq.ParquetWriter(paths[k], schema, compression=compression)
    finally:
        for w in writers:
            if w is not None:
                w.close()
    return paths
