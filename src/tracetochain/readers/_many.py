"""Many inputs, one corpus: several files, folders or glob patterns read into one :class:`TraceTable`.

Teams rarely have one run: they have a folder with one file per model or defence, each file with a header line
describing its run. :func:`read_corpus` reads them all and keeps where every episode came from:

* an input that is a file is read by its reader (detected per file unless ``format`` is given);
* a folder that a reader reads as a whole (an inspect_ai log folder, a τ²-bench run folder, SWE-agent trajectories,
  a canonical partitioned folder) is read whole; any other folder is expanded into the trace files inside it
  (recursively, in name order; hidden files and files no reader could read — README, notes — are left out);
* a pattern with ``*``, ``?`` or ``[`` that names no existing path is a glob (``runs/*.jsonl``, ``**`` recursive).

With more than one file every episode gets the trace fields

* ``source_file`` — the file it came from (relative to the folder it was found in, else as given), and
* ``meta.<key>`` — the file's header metadata (``report.run_metadata``: a JSONL ``{"metadata": {...}}`` line, a
  run-metadata document), flattened to dotted keys (a single wrapping ``metadata``/``header`` object is unwrapped)
  and written as text (numbers in their JSON spelling, ``true``/``false``), so ``--where meta.defense=none`` and
  ``--by meta.model`` compare the same way for every file.

Trace ids stay as the readers made them unless two files use the same id; then every id is prefixed with its
file (``<source_file>/<id>``) so that the episodes stay distinct. Task ids are kept: the same task run by two
configurations is the same task (intervals that cluster by task need that).

The combined ingest report sums the files' counts, keeps the first problems of each, and lists every file's header
metadata under ``run_metadata["files"]``.
"""

from __future__ import annotations

import glob
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tracetochain.exceptions import TraceValidationError
from tracetochain.traces import IngestReport, TraceTable

__all__ = ["META_PREFIX", "SOURCE_FIELD", "expand_inputs", "flatten_metadata", "read_corpus"]

#: The trace field naming the file an episode came from (multi-file corpora).
SOURCE_FIELD = "source_file"
#: Prefix of the trace fields holding a file's header metadata.
META_PREFIX = "meta."
#: Extensions of files that may hold traces (anything else inside an expanded folder is left out).
TRACE_SUFFIXES = (".json", ".jsonl", ".ndjson", ".csv", ".parquet", ".pq", ".eval", ".traj")
_GLOB_CHARS = set("*?[")


def _is_pattern(text: str) -> bool:
    return bool(_GLOB_CHARS & set(text)) and not Path(text).exists()


def expand_inputs(sources: str | Path | Sequence[str | Path], format: str | None = None
                  ) -> list[tuple[Path, str]]:
    """The files (and whole-read folders) behind ``sources``, each with the name it is known by in the corpus.

    Raises :class:`TraceValidationError` for a path that does not exist, a pattern that matches nothing and a folder
    with no trace file in it.
    """
    items = [sources] if isinstance(sources, (str, Path)) else list(sources)
    if not items:
        raise TraceValidationError("no input given", hint="name a trace file, a folder or a glob pattern")
    out: list[tuple[Path, str]] = []
    for item in items:
        text = str(item)
        if _is_pattern(text):
            matches = sorted(glob.glob(text, recursive=True))
            files = [Path(m) for m in matches if Path(m).is_file() or _read_whole(Path(m), format)]
            if not files:
                raise TraceValidationError("no file matches this pattern", source=text,
                                           hint="check the pattern (quote it so the shell does not expand it)")
            out += [(p, p.as_posix()) for p in files]
            continue
        path = Path(item)
        if not path.exists():
            raise TraceValidationError("no such file or folder", source=text)
        if path.is_dir() and not _read_whole(path, format):
            files = _trace_files(path, format)
            if not files:
                raise TraceValidationError("no trace file in this folder", source=text,
                                           hint=f"the folder's files need one of the extensions "
                                                f"{', '.join(TRACE_SUFFIXES)}, or name the files themselves")
            out += [(p, p.relative_to(path).as_posix()) for p in files]
            continue
        out.append((path, text))
    seen: set[Path] = set()
    unique: list[tuple[Path, str]] = []
    for p, name in out:  # a file named twice (a folder and a pattern inside it) is read once
        key = p.resolve()
        if key not in seen:
            seen.add(key)
            unique.append((p, name))
    return unique


def _read_whole(folder: Path, format: str | None) -> bool:
    """Whether a reader reads ``folder`` as one source (the chosen one, or any when none is chosen)."""
    if not folder.is_dir():
        return False
    from tracetochain.readers._registry import get_reader, sniff_all

    if format is not None:
        try:
            return bool(get_reader(format).sniff(folder))
        except (OSError, UnicodeDecodeError, ValueError):
            return False
    answers = sniff_all(folder, stop_at_first=True)
    return bool(answers) and answers[-1].accepted


def _trace_files(folder: Path, format: str | None) -> list[Path]:
    from tracetochain.readers._registry import detect_format

    found: list[Path] = []
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder)
        if any(part.startswith(".") for part in rel.parts) or not p.is_file():
            continue
        if p.suffix.lower() not in TRACE_SUFFIXES:
            continue
        if format is None:  # a JSON file no reader recognises (a config, a summary) is not a trace file
            try:
                detect_format(p)
            except (TraceValidationError, OSError, UnicodeDecodeError, ValueError):
                continue
        found.append(p)
    return found


def flatten_metadata(metadata: dict[str, Any], *, max_depth: int = 4) -> dict[str, str]:
    """A header's metadata as ``{dotted key: text}``: one wrapping ``metadata``/``header`` object is unwrapped;
    nested objects become dotted keys; numbers keep their JSON spelling, booleans are ``true``/``false``; lists and
    nulls are left out (they are still in the ingest report).

    >>> flatten_metadata({"metadata": {"model": "m1", "defense": {"name": "spotlight"}, "n": 194, "ok": True}})
    {'model': 'm1', 'defense.name': 'spotlight', 'n': '194', 'ok': 'true'}
    """
    doc: Any = metadata
    if isinstance(doc, dict) and len(doc) == 1:
        (key, value), = doc.items()
        if key.lower() in ("metadata", "header", "meta", "run_metadata", "config") and isinstance(value, dict):
            doc = value
    out: dict[str, str] = {}

    def walk(node: dict[str, Any], prefix: str, depth: int) -> None:
        for key, value in node.items():
            name = f"{prefix}{key}"
            if isinstance(value, dict):
                if depth < max_depth:
                    walk(value, f"{name}.", depth + 1)
            elif isinstance(value, bool):
                out[name] = "true" if value else "false"
            elif isinstance(value, (int, float, str)):
                out[name] = value if isinstance(value, str) else json.dumps(value)
    if isinstance(doc, dict):
        walk(doc, "", 1)
    return out


def read_corpus(sources: str | Path | Sequence[str | Path], format: str | None = None, *,
                on_error: str = "raise", **options: Any) -> TraceTable:
    """Read one or more files, folders or glob patterns into one :class:`TraceTable` (module docstring).

    One input that is one file (or a folder a reader reads whole) is exactly ``read_traces(source, format, …)``.
    With several files each is read on its own (the same reader options for all) and the tables are joined, every
    episode carrying ``source_file`` and its file's ``meta.*`` fields.

    >>> import tracetochain as tt, pathlib, tempfile, json
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> for name, ok in (("a", True), ("b", False)):
    ...     lines = [{"metadata": {"model": name}}, {"id": "e1", "messages": [{"role": "assistant", "content": "x"}],
    ...              "outcome": ok}]
    ...     _ = (d / f"{name}.jsonl").write_text("\\n".join(json.dumps(x) for x in lines))
    >>> t = read_corpus(d)
    >>> t.n_traces, sorted(t.trace_values("meta.model")), t.trace_ids
    (2, ['a', 'b'], ['a.jsonl/e1', 'b.jsonl/e1'])
    """
    from tracetochain.readers._registry import read_traces

    files = expand_inputs(sources, format)
    if len(files) == 1:
        return read_traces(files[0][0], format, on_error=on_error, **options)
    tables = [(name, read_traces(path, format, on_error=on_error, **options)) for path, name in files]
    return join_tables(tables, source=", ".join(str(s) for s in ([sources] if isinstance(sources, (str, Path))
                                                                 else sources)), on_error=on_error)


def join_tables(tables: Iterable[tuple[str, TraceTable]], *, source: str, on_error: str = "raise") -> TraceTable:
    """One table from several named ones: ``source_file`` and ``meta.*`` fields added, ids kept distinct."""
    from tracetochain.traces.shared import build_table

    named = list(tables)
    all_ids = [tid for _, t in named for tid in t.trace_ids] + [str(z.get("trace_id")) for _, t in named
                                                                for z in t.report.zero_step]
    prefix = len(set(all_ids)) < len(all_ids)
    parts: list[pa.Table] = []
    locations: list[np.ndarray[Any, Any]] = []
    formats: list[str] = []
    files_meta: dict[str, Any] = {}
    for name, table in named:
        rep = table.report
        formats.append(rep.format)
        if rep.run_metadata:
            files_meta[name] = rep.run_metadata
        extra = {SOURCE_FIELD: name, **{f"{META_PREFIX}{k}": v for k, v in flatten_metadata(rep.run_metadata).items()}}
        arrow = table.to_arrow()
        zero = [dict(z) for z in rep.zero_step]
        for rec in zero:
            rec["step_idx"] = None
        if zero:
            arrow = pa.concat_tables([arrow, pa.Table.from_pylist(zero)], promote_options="permissive")
        n = arrow.num_rows
        if prefix:
            ids = arrow.column("trace_id").cast(pa.string())
            arrow = arrow.set_column(arrow.column_names.index("trace_id"), "trace_id",
                                     pa.array([f"{name}/{v}" for v in ids.to_pylist()], pa.string()))
        for key, value in extra.items():
            if key in arrow.column_names:  # a reader field of the same name wins; the file's value is in the report
                continue
            arrow = arrow.append_column(key, pa.array([value] * n, pa.string()))
        parts.append(arrow)
        locations.append(np.zeros(n, np.int64))
    joined = pa.concat_tables(parts, promote_options="permissive") if parts else pa.table({})
    fmt = formats[0] if len(set(formats)) == 1 else "mixed"
    out = build_table(joined, on_error=on_error, source=source, format=fmt, problems=[],
                      locations=np.concatenate(locations) if locations else None, location_kind="row",
                      zero_step=any(t.report.zero_step for _, t in named))
    _merge_reports(out.report, [t.report for _, t in named], files_meta)
    return out


def _merge_reports(into: IngestReport, reports: list[IngestReport], files_meta: dict[str, Any]) -> None:
    """The files' own read counts (the join re-validated rows that were already valid: count them once)."""
    into.n_records = sum(r.n_records for r in reports)
    into.n_records_skipped = sum(r.n_records_skipped for r in reports)
    into.n_traces_skipped = sum(r.n_traces_skipped for r in reports)
    reasons: dict[str, int] = {}
    for r in reports:
        for reason, n in r.skipped_by_reason.items():
            reasons[reason] = reasons.get(reason, 0) + n
    into.skipped_by_reason = reasons
    into.problems = [p for r in reports for p in r.problems][:50]
    verdicts = {r.verdict_field for r in reports if r.verdict_field}
    if len(verdicts) == 1:
        into.verdict_field = verdicts.pop()
    into.run_metadata = {"files": files_meta, "n_files": len(reports)} if files_meta else {"n_files": len(reports)}
