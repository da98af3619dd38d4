"""``convert`` and ``formats``: turn any supported trace source into the canonical table, and list the readers.

Thin like the other commands: the readers do the reading and validation, :meth:`TraceTable.write` the writing;
this module parses options, guards the output file and renders.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from tracetochain.cli._commands import JsonOpt, OnErrorChoice
from tracetochain.cli._input import (
    LegacyFormatOpt,
    ReaderOpt,
    ReaderOptionOpt,
    load_traces,
    parse_reader_options,
    reader_name,
)

CONVERT_EXAMPLE = (
    "Example: tracetochain convert runs/ --reader mini-swe-agent -O verdicts=results_summary.json -o traces.parquet"
)
FORMATS_EXAMPLE = "Example: tracetochain formats --json > readers.json"

#: Output extensions and the canonical file type each one writes (``TraceTable.write``).
OUTPUT_TYPES = {".jsonl": "JSON Lines", ".ndjson": "JSON Lines", ".csv": "CSV", ".parquet": "Parquet",
                ".pq": "Parquet"}


def convert(
    source: Annotated[Path, typer.Argument(
        help="Trace file or folder in any supported format (see `formats`), or - for standard input.")],
    output: Annotated[Path, typer.Option(
        "-o", "--output", help="Canonical table to write; the extension picks .jsonl, .csv or .parquet.")],
    reader: ReaderOpt = None,
    on_error: Annotated[OnErrorChoice, typer.Option(
        "--on-error", help="Bad records: stop with an error, or skip their traces and report the count.")] = (
        OnErrorChoice.raise_),
    option: ReaderOptionOpt = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite OUTPUT if it exists.")] = False,
    as_json: JsonOpt = False,
    legacy_format: LegacyFormatOpt = None,
) -> None:
    """Read traces in any supported format and write the canonical long table (one row per step)."""
    from tracetochain.exceptions import TraceToChainError, TraceValidationError

    reader = reader_name(reader, legacy_format)
    suffix = output.suffix.lower()
    if suffix not in OUTPUT_TYPES:
        raise TraceValidationError(f"cannot write {suffix or 'a file without an extension'}", source=str(output),
                                   hint="name the output .jsonl, .csv or .parquet")
    if output.exists() or output.is_symlink():
        if output.is_dir():
            raise TraceToChainError(f"{output} is a folder; name the file to write")
        if source.exists() and _same_file(source, output):
            raise TraceToChainError(f"{output} is the input file; write the converted table elsewhere")
        if not force:
            raise TraceToChainError(f"{output} already exists; pass --force to overwrite it")
    table = load_traces(source, reader, option, on_error=on_error.value, announce=as_json)
    _write_atomically(table, output)
    report = table.report
    if as_json:
        doc = {"output": str(output), "output_type": OUTPUT_TYPES[suffix], "format": report.format,
               "reader": report.format, "format_detected": reader is None, "reader_detected": reader is None,
               "n_steps": table.n_steps, "outcomes": table.outcome_counts(),
               "ingest": report.to_dict()}
        typer.echo(json.dumps(doc, indent=2, allow_nan=False))
        return
    from tracetochain.cli._render import render_ingest

    render_ingest(report, table.outcome_counts(), detected=reader is None)
    zero = f" and {report.n_zero_step} without steps" if report.n_zero_step else ""
    typer.echo(f"wrote {table.n_traces} traces{zero}, {table.n_steps} steps to {output} ({OUTPUT_TYPES[suffix]})")


def formats(as_json: JsonOpt = False) -> None:
    """List the trace formats this installation reads: each reader's name, what it reads and what it needs."""
    from tracetochain.readers import BUILTIN_READERS, available_readers

    rows = [{"name": name, "description": str(r.description), "needs": str(r.needs),
             "builtin": name in BUILTIN_READERS and type(r).__module__.startswith("tracetochain.")}
            for name, r in available_readers().items()]
    if as_json:
        typer.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    from tracetochain.cli._render import render_formats

    render_formats(rows)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _append_zero_step(path: Path, table: Any) -> None:
    """Add the episodes that ended before any agent step to a written canonical file, one record each with its
    trace-level fields and no step fields (``step_idx`` null), so they stay trials when the file is read again.

    The step table cannot hold them yet (they travel in ``report.zero_step``), hence this second write.
    """
    import pyarrow as pa

    zero = table.report.zero_step
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        with path.open("a", encoding="utf-8") as fh:
            for z in zero:
                fh.write(json.dumps({**z, "step_idx": None}, ensure_ascii=False, allow_nan=False) + "\n")
        return
    steps = table.to_arrow()
    names = list(dict.fromkeys([*steps.column_names, *(k for z in zero for k in z), "step_idx"]))
    extra = pa.Table.from_pylist([{n: z.get(n) for n in names} for z in zero])
    extra = pa.table({n: extra.column(n).cast(steps.schema.field(n).type)
                      if n in steps.column_names and not pa.types.is_null(steps.schema.field(n).type)
                      else extra.column(n) for n in names})
    combined = pa.concat_tables([steps, extra], promote_options="default")
    if suffix == ".csv":
        import pyarrow.csv as pacsv

        pacsv.write_csv(combined, path)
    else:
        import pyarrow.parquet as pq

        from tracetochain.traces._schema import TRACE_SCHEMA_VERSION

        meta = {b"tracetochain.trace_schema_version": str(TRACE_SCHEMA_VERSION).encode()}
        pq.write_table(combined.replace_schema_metadata(meta), path)


def _write_atomically(table: Any, output: Path) -> None:
    """Write beside OUTPUT and rename, so a failed write never leaves half a file (or destroys the old one)."""
    from tracetochain.exceptions import TraceToChainError

    tmp = output.with_name(f".{output.stem}.partial-{os.getpid()}{output.suffix}")
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        table.write(tmp)
        if table.report.zero_step:
            _append_zero_step(tmp, table)
        os.replace(tmp, output)
    except OSError as exc:
        raise TraceToChainError(f"cannot write {output}: {exc.strerror or exc}") from None
    finally:
        if tmp.exists():
            tmp.unlink()


__all__ = ["convert", "formats", "parse_reader_options"]
