"""Reading OTLP files: JSON values line by line with their positions, the index of each trace's last line, and the
streaming assembler that emits a trace once its last line is read.
"""

from __future__ import annotations

import heapq
import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracetochain.exceptions import TraceValidationError
from tracetochain.readers._common import MISSING as _MISSING
from tracetochain.readers._common import TraceBuilder, json_loads, json_raw_decode
from tracetochain.readers.otlp._conventions import _TRACE_ID_RE
from tracetochain.readers.otlp._spans import (
    _Options,
    _parse_flat_span,
    _parse_otlp_span,
    _SpanError,
    _Trace,
    resource_block,
)
from tracetochain.readers.otlp._values import norm_id
from tracetochain.traces import Problem


# ============================================================================================ JSON streaming
class _Bad:
    __slots__ = ("line", "message", "raw")

    def __init__(self, line: int, message: str, raw: bytes) -> None:
        self.line, self.message, self.raw = line, message, raw


def _iter_values(path: Path) -> Iterator[tuple[int, int, Any]]:
    """Yield ``(first_line, close_line, value)`` for each JSON value of a JSONL / concatenated-JSON file.

    A line holding one complete value (JSON Lines) is parsed on its own. Otherwise lines are collected until a line
    starting with ``}`` or ``]`` completes the value (pretty-printed console output, a pretty-printed document), so
    each byte is parsed about once. ``close_line`` is the last line whose trace ids are all covered once this value
    is processed. An invalid value is yielded as a :class:`_Bad` carrying its line and raw bytes (so that the traces
    it mentions can be dropped), and reading resumes at the next line.
    """
    decoder = json.JSONDecoder()
    pending: list[bytes] = []
    start = 0  # file line of pending[0]

    def drain(final: bool) -> Iterator[tuple[int, int, Any]]:
        nonlocal pending, start
        raw = b"".join(pending)
        pending = []
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield start, start + raw.count(b"\n"), _Bad(start, f"not UTF-8 text ({exc.reason})", raw)
            return
        idx, n = 0, len(text)
        line_at, pos_at = start, 0  # text[pos_at] lies on file line line_at
        while True:
            while idx < n and text[idx] in " \t\r\n":
                idx += 1
            if idx >= n:
                return
            line_at += text.count("\n", pos_at, idx)
            pos_at = idx
            try:
                value, end = json_raw_decode(decoder, text, idx)
            except json.JSONDecodeError as exc:
                if exc.pos >= len(text.rstrip()) and not final:
                    pending, start = [text[idx:].encode("utf-8")], line_at  # incomplete: wait for more lines
                    return
                last = start + text.count("\n")
                yield line_at, last, _Bad(start + exc.lineno - 1,
                                          f"not valid JSON ({exc.msg} at column {exc.colno})", raw)
                return
            first = line_at
            line_at += text.count("\n", pos_at, end)
            pos_at = end
            nl = text.find("\n", end)
            more_on_line = bool(text[end:nl if nl >= 0 else n].strip())
            yield first, line_at - 1 if more_on_line else line_at, value
            idx = end

    lineno = 0
    with path.open("rb") as fh:
        for lineno, line in enumerate(fh, start=1):
            if pending:
                if line[:1] == b"{" and line.rstrip()[-1:] == b"}":
                    # A complete JSON Lines record after an unfinished value: the unfinished one was cut off.
                    try:
                        value = json_loads(line)
                    except (json.JSONDecodeError, UnicodeDecodeError):
                        value = _MISSING
                    if value is not _MISSING:
                        raw = b"".join(pending)
                        yield start, lineno - 1, _Bad(start, "not valid JSON (the value is cut off)", raw)
                        pending = []
                        yield lineno, lineno, value
                        continue
                pending.append(line)
                if line[:1] in (b"}", b"]"):
                    yield from drain(False)
                continue
            if line.isspace():
                continue
            try:
                value = json_loads(line)
            except UnicodeDecodeError as exc:
                yield lineno, lineno, _Bad(lineno, f"not UTF-8 text ({exc.reason})", line)
                continue
            except json.JSONDecodeError as exc:
                s = line.strip()
                if exc.msg != "Extra data" and (s[:1], s[-1:]) in ((b"{", b"}"), (b"[", b"]")):
                    yield lineno, lineno, _Bad(lineno, f"not valid JSON ({exc.msg} at column {exc.colno})", line)
                    continue
                # Several values on one line, or the first line of a multi-line value.
                pending, start = [line], lineno
                if exc.msg == "Extra data" or s[:1] in (b"}", b"]"):
                    yield from drain(False)
                continue
            yield lineno, lineno, value
        if pending:
            yield from drain(True)


def _index_last_lines(path: Path) -> dict[str, int]:
    """Pass 1: the last line on which each (normalised) trace id appears."""
    raw_last: dict[bytes, int] = {}
    with path.open("rb") as fh:
        for lineno, line in enumerate(fh, start=1):
            if b"race" not in line:  # neither traceId nor trace_id: skip the regex
                continue
            for raw in set(_TRACE_ID_RE.findall(line)):
                raw_last[raw] = lineno
    out: dict[str, int] = {}
    for raw, last in raw_last.items():
        try:
            text = json.loads(b'"' + raw + b'"') if b"\\" in raw else raw.decode("utf-8")
            tid = norm_id(text)
        except (ValueError, UnicodeDecodeError):
            continue
        if tid is not None and out.get(tid, 0) < last:
            out[tid] = last
    return out


# ============================================================================================ assembly
@dataclass
class StreamStats:
    """What the streaming pass saw (for tests and the benchmark)."""

    n_values: int = 0
    n_spans: int = 0
    n_traces: int = 0
    max_open_traces: int = 0
    max_open_spans: int = 0


class _Stream:
    """Pass 2: parse values, group spans into open traces, close each trace after its last line."""

    def __init__(self, path: Path, opts: _Options, builder: TraceBuilder) -> None:
        self.path = path
        self.source = str(path)
        self.opts = opts
        self.builder = builder
        self.last_line = _index_last_lines(path)
        self.open: dict[str, _Trace] = {}
        self.heap: list[tuple[float, int, str]] = []
        self.seq = 0
        self.poison: dict[str, tuple[str, int, str | None]] = {}
        self.stats = StreamStats()
        self.open_spans = 0
        self.value_tids: set[str] = set()  # traces with a span in the current value
        self.unattributed: tuple[str, int, str | None] | None = None  # a span of the value with no usable trace id

    # ---------------------------------------------------------------- problems
    def problem(self, message: str, line: int, fieldname: str | None, hint: str | None = None,
                tids: Iterable[str] = ()) -> None:
        if self.builder.on_error == "raise":
            raise TraceValidationError(message, source=self.source, line=line, field=fieldname, hint=hint)
        tids = list(tids)
        if not tids:
            self.builder.problems.append(Problem(line, fieldname, message))
        for tid in tids:
            self.poison.setdefault(tid, (message, line, fieldname))

    # ---------------------------------------------------------------- driving
    def run(self) -> Iterator[tuple[_Trace, tuple[str, int, str | None] | None]]:
        """Yield each finished trace with its poison message (None if clean), in the order traces finish."""
        for first, last, value in _iter_values(self.path):
            self.stats.n_values += 1
            if isinstance(value, _Bad):
                tids = set()
                for raw in set(_TRACE_ID_RE.findall(value.raw)):
                    try:
                        tid = norm_id(raw.decode("utf-8", "replace"))
                    except ValueError:
                        tid = None
                    if tid:
                        tids.add(tid)
                self.problem(value.message, value.line, None,
                             "each line must be one JSON value; fix or remove it, or pass on_error='skip'", tids)
            else:
                self.take(value, first)
                if self.unattributed is not None:
                    # Some span of this value could not be attributed: every trace it shares the line with may have a
                    # hole, so all of them go (skip mode only; raise mode has raised).
                    for tid in self.value_tids:
                        self.poison.setdefault(tid, self.unattributed)
                    self.unattributed = None
                self.value_tids.clear()
            yield from self.close(last)
        yield from self.close(math.inf)
        for tid, (message, line, fieldname) in self.poison.items():  # traces whose only spans were bad
            self.builder.problems.append(Problem(line, fieldname, f"{message} (trace {tid})", whole_trace=True))
        self.poison.clear()

    def take(self, value: Any, line: int) -> None:
        if isinstance(value, list):
            for v in value:
                self.take(v, line)
            return
        if not isinstance(value, dict):
            self.problem(f"expected an OTLP document or a span object, got {type(value).__name__}", line, None,
                         'lines hold {"resourceSpans": [...]} documents or console span objects')
            return
        rs = value.get("resourceSpans", value.get("resource_spans", _MISSING))
        if rs is not _MISSING:
            self.take_document(rs, line)
        elif "context" in value:
            self.take_span(value, line, None, flat=True)
        elif "traceId" in value or "spanId" in value:
            self.take_span(value, line, None, flat=False)
        else:
            self.problem("not an OTLP document or span (no resourceSpans, context or traceId)", line, "resourceSpans",
                         'lines hold {"resourceSpans": [...]} documents or console span objects')

    def take_document(self, rs: Any, line: int) -> None:
        if not isinstance(rs, list):
            self.problem(f"resourceSpans must be a list, got {type(rs).__name__}", line, "resourceSpans")
            return
        keys = self.opts.user_keys
        for block in rs:
            if not isinstance(block, dict):
                self.problem("a resourceSpans entry must be an object", line, "resourceSpans")
                continue
            resource, scopes = resource_block(block, keys)
            if scopes is None:
                continue
            if not isinstance(scopes, list):
                self.problem("scopeSpans must be a list", line, "scopeSpans")
                continue
            for scope in scopes:
                spans = scope.get("spans") if isinstance(scope, dict) else _MISSING
                if spans is None:
                    continue
                if not isinstance(spans, list):
                    self.problem("scopeSpans[].spans must be a list", line, "spans")
                    continue
                for span in spans:
                    self.take_span(span, line, resource, flat=False)

    def take_span(self, span: Any, line: int, resource: dict[str, Any] | None, *, flat: bool) -> None:
        try:
            tid, rec = _parse_flat_span(span, line, self.opts) if flat else \
                _parse_otlp_span(span, resource, line, self.opts)
        except _SpanError as exc:
            tid_guess = None
            if isinstance(span, dict):
                raw = span.get("traceId", span.get("trace_id"))
                ctx = span.get("context")
                if raw is None and isinstance(ctx, dict):
                    raw = ctx.get("trace_id")
                try:
                    tid_guess = norm_id(raw)
                except ValueError:
                    tid_guess = None
            self.problem(exc.message, line, exc.field, exc.hint, [tid_guess] if tid_guess else [])
            if tid_guess is None and self.unattributed is None:
                self.unattributed = (exc.message, line, exc.field)
            return
        self.stats.n_spans += 1
        self.value_tids.add(tid)
        tr = self.open.get(tid)
        if tr is None:
            last = self.last_line.get(tid)
            if last == -1:
                self.problem(f"a span of trace {tid} arrives after the trace was finished", line, "traceId",
                             "the trace-id index missed this span; please report the file layout")
                return
            tr = _Trace(tid, line)
            self.open[tid] = tr
            self.seq += 1
            heapq.heappush(self.heap, (last if last is not None and last >= line else math.inf, self.seq, tid))
            self.stats.n_traces += 1
            if len(self.open) > self.stats.max_open_traces:
                self.stats.max_open_traces = len(self.open)
        if rec.sid not in tr.spans:  # a re-exported duplicate keeps the first copy
            tr.spans[rec.sid] = rec
            self.open_spans += 1
            if self.open_spans > self.stats.max_open_spans:
                self.stats.max_open_spans = self.open_spans

    def close(self, upto: float) -> Iterator[tuple[_Trace, tuple[str, int, str | None] | None]]:
        heap = self.heap
        while heap and heap[0][0] <= upto:
            _, _, tid = heapq.heappop(heap)
            tr = self.open.pop(tid)
            self.open_spans -= len(tr.spans)
            self.last_line[tid] = -1
            yield tr, self.poison.pop(tid, None)
