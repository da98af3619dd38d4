"""OTLP/HTTP request bodies → span facts: protobuf or JSON, optionally gzip'd, with size limits.

The OTLP/HTTP specification: ``POST /v1/traces`` with ``Content-Type: application/x-protobuf`` (a binary
``ExportTraceServiceRequest``) or ``application/json`` (its JSON encoding, ids as hex), and ``Content-Encoding:
gzip`` allowed. Protobuf is decoded by the ``opentelemetry-proto`` package; both paths then use the OTLP reader's
span mapping (:mod:`tracetochain.readers.otlp`). Anything malformed raises :class:`BadRequest` with the reason,
which the receiver returns as a 400 and counts.
"""

from __future__ import annotations

import json
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tracetochain._limits import time_problem
from tracetochain.readers.otlp import OtlpOptions, SpanError, SpanFacts, spans_of_export_request, spans_of_json_document

PROTOBUF = "application/x-protobuf"
JSON = "application/json"


class BadRequest(Exception):
    """A request the receiver refuses: ``status`` (400, 413, 415) and a reason the client can act on."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message


def media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def decompress(body: bytes, encoding: str | None, limit: int) -> bytes:
    """The body without its ``Content-Encoding`` (gzip / deflate / identity), never more than ``limit`` bytes.

    A gzip body may hold several members (RFC 1952 §2.2; ``cat a.gz b.gz``): every member is decoded, within the
    same total limit. Bytes after the last member that are not a gzip member are refused (400), never ignored —
    a 200 must not be sent for spans that were not read.
    """
    enc = (encoding or "identity").strip().lower()
    if enc in ("", "identity"):
        return body
    if enc not in ("gzip", "deflate"):
        raise BadRequest(415, "encoding", f"unsupported Content-Encoding {enc!r}; send gzip or no encoding")
    parts: list[bytes] = []
    size = 0
    rest = body
    while True:
        d = zlib.decompressobj(wbits=31 if enc == "gzip" else 15)
        try:
            out = d.decompress(rest, limit - size + 1)
        except zlib.error as exc:
            raise BadRequest(400, "encoding", f"the {enc} body cannot be decompressed ({exc})") from None
        size += len(out)
        if size > limit or d.unconsumed_tail:
            raise BadRequest(413, "too_large", f"the decompressed body exceeds the {limit:,}-byte limit")
        if not d.eof:
            raise BadRequest(400, "encoding", f"the {enc} body is truncated (its end is missing)")
        parts.append(out)
        rest = d.unused_data
        if not rest:
            return parts[0] if len(parts) == 1 else b"".join(parts)
        if enc != "gzip" or rest[:2] != b"\x1f\x8b":
            raise BadRequest(400, "encoding", f"{len(rest):,} bytes after the end of the {enc} data; send one "
                                              "compressed body (several gzip members are fine)")


#: Bytes of Python objects a JSON body can cost per container (``{``/``[``), string (two ``"``) and value
#: separator (``,``): measured on CPython 3.11, 64 MiB of ``{},`` (22 M dicts) peaks at 1.85 GB (≈ 84 B/dict),
#: ``"",`` ≈ 50 B/string, ``0,`` ≈ 8 B/list slot. Upper bounds, so an estimate never undercounts.
_JSON_COST = {b"{": 100, b"[": 100, b'"': 30, b",": 16}
#: Protobuf: bytes of message objects and span facts per byte of body (measured: 16 MiB of empty spans → 0.8 GB;
#: real spans cost ≈ 10×).
_PROTOBUF_COST = 50


def decode_cost(body: bytes, kind: str) -> int:
    """An upper estimate of the memory (bytes) decoding ``body`` takes (counted at C speed: no parse).

    >>> decode_cost(b'{"a": [1, 2]}', "application/json") > 13
    True
    """
    if kind == PROTOBUF:
        return _PROTOBUF_COST * len(body)
    return len(body) + sum(body.count(ch) * cost for ch, cost in _JSON_COST.items())


class DecodeGate:
    """Admission by memory: the decodes running at once may together cost at most ``budget`` bytes (by
    :func:`decode_cost`). A request that alone costs more is refused (413); one that would overflow the budget
    waits up to ``wait`` seconds for others to finish, then gets 503 (OTLP exporters retry a 503)."""

    def __init__(self, budget: int, wait: float = 10.0) -> None:
        self.budget, self.wait = budget, wait
        self.used = 0
        self._cond = threading.Condition()

    @contextmanager
    def hold(self, cost: int) -> Iterator[None]:
        if cost > self.budget:
            raise BadRequest(413, "too_costly", f"decoding this body would take about {cost / 1e6:,.0f} MB of memory "
                                                f"(the limit is {self.budget / 1e6:,.0f} MB); send smaller batches "
                                                "(OTEL_BSP_MAX_EXPORT_BATCH_SIZE)")
        deadline = time.monotonic() + self.wait
        with self._cond:
            while self.used + cost > self.budget:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise BadRequest(503, "busy", "the server is decoding other large requests; retry")
                self._cond.wait(left)
            self.used += cost
        try:
            yield
        finally:
            with self._cond:
                self.used -= cost
                self._cond.notify_all()


def check_span_times(spans: list[tuple[str, SpanFacts]], now: float) -> None:
    """Refuse the request (400, reason ``time``) when a span starts or ends outside a plausible epoch time:
    after 1970, before 2200, and at most a day after ``now`` (the receive time). One such span would otherwise
    open a window in the year 10^21 (nothing can print it) or become the "current" window for days."""
    if not spans:
        return
    starts = [s.start for _, s in spans if s.start is not None]
    ends = [s.end for _, s in spans if s.end is not None]
    for values, what in ((starts, "startTimeUnixNano"), (ends, "endTimeUnixNano")):
        if not values:
            continue
        for t in (min(values), max(values)):
            problem = time_problem(t, now=now)
            if problem is not None:
                tid = next(tid for tid, s in spans if (s.start if what[0] == "s" else s.end) == t)
                raise BadRequest(400, "time", f"a span of trace {tid}: {what} {problem}; fix the exporter's clock "
                                              "or time unit (OTLP times are nanoseconds since 1970)")


def decode_traces(body: bytes, content_type: str | None, options: OtlpOptions) -> list[tuple[str, SpanFacts]]:
    """Decode an export request body (already decompressed) into ``(trace id, span facts)`` pairs."""
    kind = media_type(content_type)
    if kind == PROTOBUF:
        from google.protobuf.message import DecodeError
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        request = ExportTraceServiceRequest()
        try:
            request.ParseFromString(body)
        except (DecodeError, ValueError, RuntimeError) as exc:
            raise BadRequest(400, "protobuf", f"not a valid ExportTraceServiceRequest ({exc})") from None
        try:
            return spans_of_export_request(request, options)
        except SpanError as exc:
            raise BadRequest(400, "span", _span_message(exc)) from None
    if kind == JSON:
        try:
            doc: Any = json.loads(body)
        except UnicodeDecodeError as exc:
            raise BadRequest(400, "json", f"the body is not UTF-8 text ({exc.reason})") from None
        except json.JSONDecodeError as exc:
            raise BadRequest(400, "json", f"not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") \
                from None
        except (RecursionError, ValueError) as exc:
            raise BadRequest(400, "json", f"JSON too deep or too large to read ({type(exc).__name__})") from None
        try:
            return spans_of_json_document(doc, options)
        except SpanError as exc:
            raise BadRequest(400, "span", _span_message(exc)) from None
    raise BadRequest(415, "content_type", f"unsupported Content-Type {content_type!r}; OTLP/HTTP sends "
                                          f"{PROTOBUF} or {JSON}")


def _span_message(exc: SpanError) -> str:
    text = exc.message + (f" (field {exc.field})" if exc.field else "")
    return text + (f"; {exc.hint}" if exc.hint else "")


def encode_response(kind: str) -> tuple[bytes, str]:
    """An empty ``ExportTraceServiceResponse`` (full success) in the request's encoding."""
    if kind == PROTOBUF:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

        return ExportTraceServiceResponse().SerializeToString(), PROTOBUF
    return b"{}", JSON
