"""The canonical long table (``formats.md`` §1) in JSONL, CSV, Parquet or a JSON array: one row per step."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tracetochain.traces._table import TraceTable

_EXTENSIONS = (".jsonl", ".ndjson", ".csv", ".parquet", ".pq", ".json")


class CanonicalReader:
    name = "canonical"
    description = "tracetochain's long table: one row per step (trace_id, step_idx, state|step_kind, outcome, …)"
    needs = "nothing else"

    def sniff(self, path: Path) -> bool:
        suffix = path.suffix.lower()
        if not path.is_file() or suffix not in _EXTENSIONS:
            return False
        if suffix in (".parquet", ".pq"):
            import pyarrow.parquet as pq

            names = set(pq.read_schema(path).names)
            return {"trace_id", "step_idx", "outcome"} <= names
        with path.open("r", encoding="utf-8", errors="replace") as fh:
            head = fh.read(65_536)
        if suffix == ".csv":
            header = {h.strip().strip('"') for h in head.splitlines()[0].split(",")} if head else set()
            return {"trace_id", "step_idx", "outcome"} <= header
        first = head.lstrip()
        if suffix == ".json":
            first = first.lstrip("[").lstrip()
        line = first.splitlines()[0] if first else ""
        try:
            rec = json.loads(line.rstrip(","))
        except json.JSONDecodeError:
            return False
        return isinstance(rec, dict) and {"trace_id", "step_idx", "outcome"} <= set(rec)

    def read(self, path: Path, *, on_error: str = "raise", **options: Any) -> TraceTable:
        if options:
            raise TypeError(f"the canonical reader takes no options, got {sorted(options)}")
        return TraceTable.read(path, on_error=on_error)  # type: ignore[arg-type]


CANONICAL = CanonicalReader()
