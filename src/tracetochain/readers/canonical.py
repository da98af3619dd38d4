"""The canonical long table (docs/formats.md) in JSONL, CSV, Parquet or a JSON array: one row per step.

Decoding lives with the table it builds (:func:`tracetochain.traces._canonical.read_canonical`, which
:meth:`TraceTable.read` runs too); this module adds what a reader of the registry needs on top: recognising a
canonical file from its first record (``sniff``) and the reader's name. ``table.report.format`` is ``"canonical"``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa

from tracetochain.readers._common import (
    Refusal,
    Sniffed,
    json_loads,
    jsonl_head_records,
    keys_text,
    read_record_head,
    wrong_suffix,
)
from tracetochain.traces import TraceTable
from tracetochain.traces.shared import CANONICAL_EXTENSIONS as _EXTENSIONS
from tracetochain.traces.shared import REQUIRED, read_canonical


class CanonicalReader:
    name = "canonical"
    description = "tracetochain's long table: one row per step (trace_id, step_idx, state|step_kind, outcome, …)"
    needs = "nothing else"

    def sniff(self, path: Path) -> Sniffed:
        suffix = path.suffix.lower()
        if not path.is_file() or suffix not in _EXTENSIONS:
            return wrong_suffix(path, _EXTENSIONS)
        names = first_record_fields(path)
        if names is None:
            return Refusal("its first record could not be read as one object")
        if set(REQUIRED) <= names:
            return True
        missing = [c for c in REQUIRED if c not in names]
        return Refusal(f"the first record has no {'/'.join(missing)}; its fields: {keys_text(sorted(names))}")

    def read(self, path: Path, *, on_error: str = "raise", **options: Any) -> TraceTable:
        if options:
            raise TypeError(f"the canonical reader takes no options, got {sorted(options)}")
        return read_canonical(path, on_error=on_error, format=self.name)


def first_record_fields(path: Path) -> set[str] | None:
    """The field names of a canonical file's first record (after JSONL header lines), from its first bytes; None
    when they cannot be read (not JSON, cut off, not an object)."""
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        try:
            return set(pq.read_schema(path).names)
        except (pa.ArrowException, OSError):
            return None
    with path.open("r", encoding="utf-8", errors="replace") as fh:
        head = fh.read(65_536)
    if suffix == ".csv":
        return {h.strip().strip('"') for h in head.splitlines()[0].split(",")} if head.strip() else set()
    if suffix in (".jsonl", ".ndjson"):
        _, records, cut = jsonl_head_records(path, limit=1)
        if records:
            return set(records[0]) if isinstance(records[0], dict) else None
        head_rec = read_record_head(cut) if cut is not None else None
        return set(head_rec.keys) if head_rec is not None and head_rec.container == "object" else None
    first = head.lstrip("\ufeff \t\r\n").lstrip("[").lstrip()
    line = first.splitlines()[0] if first else ""
    try:
        rec = json_loads(line.rstrip(","))
    except json.JSONDecodeError:
        head_rec = read_record_head(head)
        return set(head_rec.keys) if head_rec is not None else None
    return set(rec) if isinstance(rec, dict) else None


CANONICAL = CanonicalReader()
