"""OTLP/HTTP request bodies → span facts: protobuf or JSON, optionally gzip'd, with size limits.

The OTLP/HTTP specification: ``POST /v1/traces`` with ``Content-Type: application/x-protobuf`` (a binary
``ExportTraceServiceRequest``) or ``application/json`` (its JSON encoding, ids as hex), and ``Content-Encoding:
gzip`` allowed. Protobuf is decoded by the ``opentelemetry-proto`` package; both paths then use the OTLP reader's
span mapping (:mod:`tracetochain.readers.otlp`). Anything malformed raises :class:`BadRequest` with the reason,
which the receiver returns as a 400 and counts.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

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
    """The body without its ``Content-Encoding`` (gzip / deflate / identity), never more than ``limit`` bytes."""
    enc = (encoding or "identity").strip().lower()
    if enc in ("", "identity"):
        return body
    if enc not in ("gzip", "deflate"):
        raise BadRequest(415, "encoding", f"unsupported Content-Encoding {enc!r}; send gzip or no encoding")
    d = zlib.decompressobj(wbits=31 if enc == "gzip" else 15)
    try:
        out = d.decompress(body, limit + 1)
    except zlib.error as exc:
        raise BadRequest(400, "encoding", f"the {enc} body cannot be decompressed ({exc})") from None
    if len(out) > limit or d.unconsumed_tail:
        raise BadRequest(413, "too_large", f"the decompressed body exceeds the {limit:,}-byte limit")
    return out


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
