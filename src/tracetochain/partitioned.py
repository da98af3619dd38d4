"""Partitioned ingest and counting: corpora larger than memory, counted on any engine.

A corpus (a Parquet file, a JSONL file, a directory of them, or a ``scheme://`` Parquet URI that pyarrow can open)
is cut into *partitions*: small descriptors (a file and a range in it) that an engine ships to wherever the data
is read (:mod:`tracetochain.engines`). Each partition is read and validated exactly like a whole file
(:meth:`TraceTable.from_arrow` / :meth:`TraceTable.from_records`), its steps get their states, and its transitions
are counted (:func:`~tracetochain.chain.count_transitions_from_codes`). Only these counts travel; they are
summed in the order of the partitions. The result equals, bit for bit, ``count_transitions`` /
``ChainEstimator`` on the whole table read in one piece.

Where partitions are cut
------------------------
``by="range"`` (default) reads each file in order and assumes that **the steps of a trace are contiguous** (on
consecutive rows or lines, in any step order) and that no trace spans two files.

* Parquet: consecutive row groups are grouped into partitions of at least ``rows_per_partition`` rows (a row group
  is never split). A trace may still cross a row-group boundary: it belongs to the partition holding its first
  row, which reads on into the next row groups until the trace ends; the next partition skips those leading rows.
  This is decided by the workers themselves (they read the ``trace_id`` column around their range), so planning
  needs only the file footers.
* JSONL: the file is cut into byte ranges of about ``bytes_per_partition``, each moved forward to the first line
  whose ``trace_id`` differs from the line before. Planning reads the file once on the driver, to count lines,
  so that every error still names its line.

Every partition returns a 64-bit hash (FNV-1a) of each of its trace ids, and the driver checks that no id is in
two partitions: a trace whose steps are not contiguous is reported by name (never counted twice) with the two
places it was found. Such a corpus can be rewritten with :func:`repartition_by_trace` (a streaming pass that sends
every row to part file ``fnv1a(trace_id) mod n_parts``), then read with ``by="file"``, which reads every file whole
as one partition (so each part must fit in a worker's memory; the steps of a trace may then be anywhere within it).

States
------
``states=None`` (or ``"label"``) uses the traces' own labels. Each partition counts with its own labels; partial
counts merge their vocabularies in order of first appearance, so the states and their order are those of the
whole table (``count_transitions(whole)``). A sequence of names fixes the vocabulary as
``ChainEstimator(states=...)`` does. A fitted :class:`~tracetochain.states.StateModel` assigns states per partition
with ``predict``. A state estimator (``WardStates(...)``, ``CategoricalStates(...)``, …) or any other spec of
:func:`~tracetochain.states.states_from_spec` is fitted on the usable traces of the **first partition** (read on
the driver), then used as a StateModel; to fit the states on another sample, fit them yourself and pass the model.
"""

from __future__ import annotations

import functools
import html
import itertools
import json
import os
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from tracetochain.chain import AbsorbingChain, ChainEstimator, TransitionCounts, count_transitions_from_codes
from tracetochain.engines import Engine, get_engine
from tracetochain.exceptions import EmptyTraceSetError, TraceToChainError, TraceValidationError
from tracetochain.states import StateModel
from tracetochain.traces import IngestReport, Outcome, Problem, TraceTable
from tracetochain.traces._table import parse_jsonl_lines

PartitionBy = Literal["range", "file"]
OnError = Literal["raise", "skip"]

PARQUET_SUFFIXES = (".parquet", ".pq")
JSONL_SUFFIXES = (".jsonl", ".ndjson")
DEFAULT_ROWS_PER_PARTITION = 1 << 20
DEFAULT_BYTES_PER_PARTITION = 32 << 20
_MAX_PROBLEMS = 50
_INVALID = 3
_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
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

    def read(self, *, on_error: OnError = "raise") -> TraceTable:
        """The partition as a validated :class:`TraceTable` (the same checks and messages as a whole-file read)."""
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
        if self.format == "jsonl":
            return _read_jsonl_range(self, on_error)
        return _read_parquet_partition(self, on_error)


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
        if p.is_dir():
            found = sorted(f for f in p.iterdir() if f.is_file() and _format_of(f.name, format) is not None)
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


def _read_parquet_partition(part: Partition, on_error: OnError) -> TraceTable:
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
    return TraceTable.from_arrow(table, on_error=on_error, source=part.source, format="parquet", locations=locs,
                                 location_kind="row")


# ---------------------------------------------------------------------------------------------------- JSONL
_UNKNOWN = object()


def _line_trace_id(raw: bytes) -> object:
    """The trace id of one JSONL line as the canonical table will see it, or _UNKNOWN (blank, bad, no id)."""
    if not raw.strip():
        return _UNKNOWN
    try:
        rec = json.loads(raw.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
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


def _read_jsonl_range(part: Partition, on_error: OnError) -> TraceTable:
    """Parse lines exactly as ``TraceTable.read`` does (blank lines skipped; bad JSON named by its line)."""
    with open(part.source, "rb") as fh:
        fh.seek(part.start)
        data = fh.read(part.stop - part.start)
    records, lines, problems = parse_jsonl_lines(enumerate(data.split(b"\n"), start=part.first_location),
                                                 part.source, on_error)
    del data
    return TraceTable.from_records(records, on_error=on_error, source=part.source, format="jsonl",
                                   problems=problems, locations=lines, location_kind="line")


# ---------------------------------------------------------------------------------------------------- hashing
def trace_id_hashes(ids: pa.Array | pa.ChunkedArray) -> NDArray[np.uint64]:
    """64-bit FNV-1a hash of every id (as UTF-8 text; null hashes as ""), vectorised over the ids.

    h₀ = 14695981039346656037, h ← (h XOR byte) × 1099511628211 mod 2⁶⁴ for each byte (Fowler–Noll–Vo).
    Stable across processes, machines and library versions, unlike Python's ``hash``.

    >>> int(trace_id_hashes(pa.array(["a"]))[0]) == 0xAF63DC4C8601EC8C
    True
    """
    arr = ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        arr = arr.cast(pa.string())
    arr = arr.fill_null("").cast(pa.large_string())
    n = len(arr)
    h = np.full(n, _FNV_OFFSET, dtype=np.uint64)
    if n == 0:
        return h
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int64, count=n + 1, offset=arr.offset * 8)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    starts = offsets[:-1]
    lengths = np.diff(offsets)
    order = np.argsort(-lengths, kind="stable")  # longest first: the live ids of byte j are a prefix
    sorted_len = lengths[order]
    for j in range(int(sorted_len[0]) if n else 0):
        live = order[: int(np.searchsorted(-sorted_len, -j, side="left"))]
        h[live] = (h[live] ^ data[starts[live] + j].astype(np.uint64)) * _FNV_PRIME
    return h


def _table_trace_ids(traces: TraceTable) -> pa.Array:
    ids = traces.to_arrow().column("trace_id")
    ids = ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids
    return ids.take(pa.array(traces.offsets[:-1])) if traces.n_traces else pa.array([], pa.string())


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


def _count_partition(part: Partition, *, on_error: OnError, model: StateModel | None,
                     check_traces: bool) -> _Partial:
    traces = part.read(on_error=on_error)
    if model is None:
        codes, names = traces.state_labels()
        names_t: tuple[str, ...] = tuple(names)
    else:
        codes = np.asarray(model.predict(traces), dtype=np.int64)
        names_t = tuple(model.state_names)
        if codes.shape != (traces.n_steps,) or (codes.size and (codes.min() < 0 or codes.max() >= len(names_t))):
            raise TraceToChainError(
                f"{part.describe()}: the state model gave no valid state to some steps (probably a category it did "
                f"not see when it was fitted); fit the states on a larger sample, or use states='label' or "
                f"CategoricalStates(keep_unobserved=True)")
    counts = count_transitions_from_codes(codes, traces.offsets, traces.outcomes(), names_t)
    hashes = trace_id_hashes(_table_trace_ids(traces)) if check_traces else np.zeros(0, np.uint64)
    r = traces.report
    return _Partial(counts, hashes, ((part.index, traces.n_traces),), r.n_records, r.n_records_skipped,
                    r.n_traces_skipped, dict(r.skipped_by_reason), tuple(r.problems[:_MAX_PROBLEMS]))


def _pad_counts(c: TransitionCounts, names: tuple[str, ...]) -> TransitionCounts:
    """``c`` re-indexed into the vocabulary ``names`` (a superset of its own)."""
    if c.state_names == names:
        return c
    pos = {s: i for i, s in enumerate(names)}
    idx = np.array([pos[s] for s in c.state_names], dtype=np.int64)
    m = len(names)
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
    return _Partial(counts, np.concatenate([a.hashes, b.hashes]), a.spans + b.spans,
                    a.n_records + b.n_records, a.n_records_skipped + b.n_records_skipped,
                    a.n_traces_skipped + b.n_traces_skipped, dict(reasons),
                    (a.problems + b.problems)[:_MAX_PROBLEMS])


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


def _check_unique_traces(partial: _Partial, parts: list[Partition], on_error: OnError) -> None:
    """Raise when one trace id was counted in two partitions (its steps were not contiguous)."""
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
        ids_a = set(_table_trace_ids(first.read(on_error=on_error)).to_pylist())
        common = [x for x in _table_trace_ids(second.read(on_error=on_error)).to_pylist() if x in ids_a]
        if common:
            raise TraceValidationError(
                f"trace {common[0]!r} has steps in two places: {first.describe()} and {second.describe()}",
                source=first.source, field="trace_id",
                hint="partitioned reading needs the steps of each trace on consecutive rows/lines of one file; "
                     "sort the data by trace_id, or rewrite it with tracetochain.partitioned.repartition_by_trace "
                     "and read the parts with by='file'")


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

    def to_dict(self) -> dict[str, Any]:
        return {"counts": self.counts.to_dict(), "report": self.report.to_dict(), "n_partitions": self.n_partitions,
                "engine": self.engine,
                "states": self.state_model.to_dict() if self.state_model is not None else None}

    def __str__(self) -> str:
        c = self.counts
        n = c.n_traces
        return (f"{sum(n.values())} traces counted in {self.n_partitions} partitions ({self.engine} engine): "
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
    src = str(source) if isinstance(source, (str, Path)) else ", ".join(str(s) for s in source)
    if check_traces:
        _check_unique_traces(partial, parts, on_error)
    counts = partial.counts
    if vocab is not None:
        counts = _with_vocabulary(counts, vocab, src)
    fmt = parts[0].format
    report = IngestReport(src, fmt, "row" if fmt == "parquet" else "line", n_records=partial.n_records,
                          n_records_skipped=partial.n_records_skipped,
                          n_traces=sum(counts.n_traces[o.value] for o in Outcome),
                          n_traces_skipped=partial.n_traces_skipped,
                          skipped_by_reason=dict(sorted(partial.skipped_by_reason.items())),
                          problems=list(partial.problems))
    return PartitionedCounts(counts, report, len(parts), eng.name, model)


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
    return chain


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


__all__ = ["DEFAULT_BYTES_PER_PARTITION", "DEFAULT_ROWS_PER_PARTITION", "Partition", "PartitionedCounts",
           "count_partitioned", "fit_partitioned", "iter_partitions", "plan_partitions", "repartition_by_trace",
           "trace_id_hashes"]
