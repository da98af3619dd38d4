"""The OTLP reader of the registry: options, sniffing, reading a file into a TraceTable."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tracetochain.exceptions import TraceValidationError
from tracetochain.readers._common import (
    Refusal,
    Sniffed,
    TraceBuilder,
    arrow_column,
    build_table,
    head_text,
    wrong_suffix,
)
from tracetochain.readers.otlp._conventions import _COLS, _EXTENSIONS
from tracetochain.readers.otlp._episodes import _emit_trace
from tracetochain.readers.otlp._files import StreamStats, _Stream
from tracetochain.readers.otlp._spans import _parse_options
from tracetochain.traces import TraceTable


@dataclass
class ColumnarTraceBuilder(TraceBuilder):
    """A :class:`TraceBuilder` that keeps steps as Arrow column chunks instead of one dict per step.

    Streaming readers use it so that memory grows with the compact Arrow table, not with Python dicts: every
    ``chunk_rows`` steps the pending Python lists are converted to typed Arrow arrays. ``build`` validates the result
    exactly like :meth:`TraceBuilder.build` (same checks, report and skip-and-count).
    """

    chunk_rows: int = 16_384
    _pending: dict[str, list[Any]] = field(default_factory=lambda: {name: [] for name, _ in _COLS})
    _chunks: dict[str, list[pa.Array]] = field(default_factory=lambda: {name: [] for name, _ in _COLS})
    _loc_chunks: list[np.ndarray] = field(default_factory=list)
    n_steps: int = 0

    def add_step(self, record: dict[str, Any], location: int = 0) -> None:
        for name, _ in _COLS:
            self._pending[name].append(record.get(name))
        self.locations.append(location)
        self.n_steps += 1
        if len(self.locations) >= self.chunk_rows:
            self._flush()

    def _flush(self) -> None:
        if not self.locations:
            return
        for name, typ in _COLS:
            values = self._pending[name]
            self._chunks[name].append(arrow_column(values, typ))
            values.clear()
        self._loc_chunks.append(np.asarray(self.locations, dtype=np.int64))
        self.locations.clear()

    def build(self) -> TraceTable:
        self._flush()
        if self.n_steps == 0:
            return TraceBuilder(self.source, self.format, self.on_error, self.location_kind,
                                problems=self.problems, run_metadata=self.run_metadata).build()
        cols: dict[str, pa.ChunkedArray] = {}
        for name, typ in _COLS:
            arr = pa.chunked_array(self._chunks[name], type=typ)
            if arr.null_count < len(arr):  # like from_records: a field no step has is no column
                cols[name] = arr
        self._chunks = {name: [] for name, _ in _COLS}
        locs = np.concatenate(self._loc_chunks)
        self._loc_chunks = []
        return build_table(pa.table(cols), on_error=self.on_error, source=self.source, format=self.format,
                           problems=list(self.problems), locations=locs, location_kind=self.location_kind,
                           zero_step=self.n_zero_step > 0)


class OtlpReader:
    name = "otlp"
    description = ("OpenTelemetry spans (OTLP JSON/JSONL file export, Python ConsoleSpanExporter JSON) with GenAI or "
                   "OpenInference attributes")
    needs = ("a task outcome: gen_ai.evaluation.result events in the spans, outcome_attribute=NAME, or a verdict "
             "file via verdicts=PATH (span status is never used)")

    def sniff(self, path: Path) -> Sniffed:
        if not path.is_file() or path.suffix.lower() not in _EXTENSIONS:
            return wrong_suffix(path, _EXTENSIONS)
        head = head_text(path)
        if not head.lstrip().startswith(("{", "[")):
            return Refusal("does not start with a JSON object or list")
        if re.search(r'"(?:resourceSpans|resource_spans)"\s*:', head):
            return True
        if '"traceId"' in head and '"spanId"' in head and '"startTimeUnixNano"' in head:
            return True
        if ('"context"' in head and '"trace_id"' in head and '"span_id"' in head
                and ('"parent_id"' in head or '"start_time"' in head)):
            return True
        return Refusal("no spans: neither resourceSpans (OTLP JSON) nor traceId/spanId/startTimeUnixNano, nor the "
                       "console exporter's context{trace_id, span_id}")

    def read(self, path: Path, *, on_error: str = "raise", **options: Any) -> TraceTable:
        table, _ = self.read_with_stats(path, on_error=on_error, **options)
        return table

    def read_with_stats(self, path: Path, *, on_error: str = "raise",
                        **options: Any) -> tuple[TraceTable, StreamStats]:
        """:meth:`read`, also returning what the streaming pass saw (open traces at most, spans, values)."""
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
        opts = _parse_options(options)
        path = Path(path)
        if path.is_dir():
            raise TraceValidationError("the otlp reader reads one file, not a folder", source=str(path),
                                       hint="pass the .jsonl file the exporter wrote")
        if not path.is_file():
            raise TraceValidationError("no such file", source=str(path))
        builder = ColumnarTraceBuilder(source=str(path), format=self.name, on_error=on_error, location_kind="line")
        stream = _Stream(path, opts, builder)
        for tr, poison in stream.run():
            _emit_trace(tr, poison, opts, builder)
        table = builder.build()
        table.report.outcome_sources = dict(builder.outcome_sources)
        return table, stream.stats


OTLP = OtlpReader()
