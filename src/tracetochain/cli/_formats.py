"""``convert`` and ``formats``: turn any supported trace source into the canonical table, and list the readers.

Thin like the other commands: the readers do the reading and validation, :meth:`TraceTable.write` the writing;
this module parses options, guards the output file and renders.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from tracetochain.cli._commands import ForceOpt, JsonOpt, OnErrorChoice, check_output
from tracetochain.cli._input import (
    LegacyFormatOpt,
    ReaderOpt,
    ReaderOptionOpt,
    WhereOpt,
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
    source: Annotated[list[Path], typer.Argument(
        help="Trace files, folders or quoted glob patterns in any supported format (see `formats`), read into one "
             "table; or - for standard input.")],
    output: Annotated[Path, typer.Option(
        "-o", "--output", help="Canonical table to write; the extension picks .jsonl, .csv or .parquet.")],
    reader: ReaderOpt = None,
    on_error: Annotated[OnErrorChoice, typer.Option(
        "--on-error", help="Bad records: stop with an error, or skip their traces and report the count.")] = (
        OnErrorChoice.raise_),
    option: ReaderOptionOpt = None,
    where: WhereOpt = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
    legacy_format: LegacyFormatOpt = None,
) -> None:
    """Read traces in any supported format and write the canonical long table (one row per step)."""
    from tracetochain._files import write_output
    from tracetochain.exceptions import TraceValidationError

    reader = reader_name(reader, legacy_format)
    suffix = output.suffix.lower()
    if suffix not in OUTPUT_TYPES:
        raise TraceValidationError(f"cannot write {suffix or 'a file without an extension'}", source=str(output),
                                   hint="name the output .jsonl, .csv or .parquet")
    check_output(output, force, list(source), "table")
    table = load_traces(source, reader, option, on_error=on_error.value, announce=as_json, where=where)
    kind = {"JSON Lines": "jsonl", "CSV": "csv", "Parquet": "parquet"}[OUTPUT_TYPES[suffix]]
    write_output(output, lambda fh: table.write_to(fh, kind), overwrite=force, inputs=list(source), what="table")
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


__all__ = ["convert", "formats", "parse_reader_options"]
