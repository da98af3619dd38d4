"""Span facts: one span of any accepted encoding (OTLP JSON, flat console/Phoenix JSON, protobuf export requests) parsed
into the facts the mapping needs, with its attributes, events and evaluations.
"""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracetochain.readers._common import DEFAULT_SUCCESS_THRESHOLD, iso_seconds, parse_success_values
from tracetochain.readers._common import MISSING as _MISSING
from tracetochain.readers._common import finite_float as _as_float
from tracetochain.readers.otlp._conventions import (
    _AGENT_ROOT_OPS,
    _BASE_KEYS,
    _ERROR_CODES,
    _EVAL_ATTR_GROUPS,
    _EVAL_EVENT,
    _EVAL_INDEXED_RE,
    _EVAL_KEYS,
    _EVAL_PREFIXES,
    _INVOCATION_STATUS,
    _LLM_REQUEST_KIND,
    _MEMORY_OPS,
    _OI_KIND,
    _OP_KIND,
    _TEXT_KEYS,
    _TRACELOOP_KIND,
    STATE_ATTRIBUTE,
)
from tracetochain.readers.otlp._values import (
    _any_value,
    _as_int,
    _as_text,
    _key_prefixes,
    _ns_seconds,
    _usage,
    load_verdicts,
    norm_id,
)


# ============================================================================================ spans
class _Span:
    """The few facts about one span that the mapping needs (kept while its trace is open)."""

    __slots__ = ("agent_root", "cost", "end", "error", "error_type", "evals", "finish", "kind", "line", "name",
                 "parent", "resource", "sid", "start", "state", "text", "tokens_in", "tokens_out", "tool", "user")

    def __init__(self) -> None:
        self.sid: str = ""
        self.parent: str | None = None
        self.name: str = ""
        self.kind: str = "other"
        self.agent_root = False
        self.start: float | None = None
        self.end: float | None = None
        self.error = False
        self.error_type: str | None = None
        self.tool: str | None = None
        self.tokens_in: int | None = None
        self.tokens_out: int | None = None
        self.cost: float | None = None
        self.text: str | None = None
        self.user: dict[str, Any] | None = None
        self.evals: list[tuple[str | None, Any, Any]] | None = None
        self.finish: str | None = None
        self.line = 0
        self.resource: dict[str, Any] | None = None
        self.state: str | None = None


class _Trace:
    __slots__ = ("first_line", "spans", "tid")

    def __init__(self, tid: str, first_line: int) -> None:
        self.tid = tid
        self.first_line = first_line
        self.spans: dict[str, _Span] = {}


class _SpanError(Exception):
    def __init__(self, message: str, field: str | None, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.hint = hint


@dataclass
class _Options:
    episode_kind: str = "trace"
    episode_span: str | None = None
    outcome_attribute: str | None = None
    success_values: frozenset[str] | None = None
    threshold: float = DEFAULT_SUCCESS_THRESHOLD
    verdicts: dict[str, Any] | None = None
    verdicts_path: str | None = None
    #: Verdicts posted to the live receiver (``POST /v1/verdicts``): the last outcome source (see :func:`_outcome`).
    posted: dict[str, Any] | None = None
    #: Keep an episode no source labels, as ``censored`` with ``termination_reason="unlabelled"`` (else refused).
    keep_unlabelled: bool = False
    evaluation_name: str | None = None
    task_attribute: str | None = None
    trial_attribute: str | None = None
    include_text: bool = True
    user_keys: frozenset[str] = frozenset()
    wanted: frozenset[str] = frozenset()


def _fill(rec: _Span, got: dict[str, Any], opts: _Options, oi_kind: Any = None) -> None:
    """Derive kind, tool, usage, error type, finish reason, evaluations, text and user keys from attributes."""
    op = got.get("gen_ai.operation.name")
    oik = got.get("openinference.span.kind", oi_kind)
    kind: str | None = None
    if isinstance(op, str):
        kind = _OP_KIND.get(op.strip().lower())
    if kind is None and isinstance(oik, str):
        kind = _OI_KIND.get(oik.strip().upper())
    if kind is None and op is None:
        tl = got.get("traceloop.span.kind")
        if isinstance(tl, str):
            kind = _TRACELOOP_KIND.get(tl.strip().lower())
        if kind is None:
            rt = got.get("llm.request.type")
            if isinstance(rt, str):
                kind = _LLM_REQUEST_KIND.get(rt.strip().lower())
    rec.kind = kind or "other"
    op_name = op.strip().lower() if isinstance(op, str) else None
    rec.agent_root = op_name in _AGENT_ROOT_OPS or (op is None and isinstance(oik, str)
                                                    and oik.strip().upper() == "AGENT")
    if rec.kind == "tool":
        tool = got.get("gen_ai.tool.name", got.get("tool.name"))
        if isinstance(tool, str) and tool.strip():
            rec.tool = tool.strip()
        elif op_name in _MEMORY_OPS:
            rec.tool = op_name
        else:
            name = rec.name.removeprefix("execute_tool").strip()
            rec.tool = name or None
    et = got.get("error.type")
    if et is not None and et != "":
        rec.error = True
        rec.error_type = str(et)
    elif rec.error:
        xt = got.get("exception.type")
        if xt is not None and xt != "":
            rec.error_type = str(xt)
    rec.tokens_in = _usage(_as_int(got.get("gen_ai.usage.input_tokens", got.get(
        "gen_ai.usage.prompt_tokens", got.get("llm.token_count.prompt")))))
    rec.tokens_out = _usage(_as_int(got.get("gen_ai.usage.output_tokens", got.get(
        "gen_ai.usage.completion_tokens", got.get("llm.token_count.completion")))))
    rec.cost = _usage(_as_float(got.get("llm.cost.total")))
    fr = got.get("gen_ai.agent.finish_reason")
    if not (isinstance(fr, str) and fr.strip()):
        fr = got.get(_INVOCATION_STATUS)  # how the agent invocation ended: a termination reason, never an outcome
    if isinstance(fr, str) and fr.strip():
        rec.finish = fr.strip()
    st = got.get(STATE_ATTRIBUTE)
    if isinstance(st, str) and st.strip():
        rec.state = st.strip()
    if not _EVAL_KEYS.isdisjoint(got) or any(k.startswith(_EVAL_PREFIXES) for k in got):
        evals = _attr_evals(got)
        if evals:
            rec.evals = (rec.evals or []) + evals
    if opts.include_text:
        if rec.kind == "tool":
            t = got.get("gen_ai.tool.call.arguments", got.get("input.value"))
        elif rec.kind == "llm":
            t = got.get("gen_ai.output.messages", got.get("output.value"))
        elif rec.kind == "retrieval":
            t = got.get("input.value")
        else:
            t = None
        rec.text = _as_text(t)
    if opts.user_keys:
        user = {k: got[k] for k in opts.user_keys if k in got}
        rec.user = user or None


def _attr_evals(got: dict[str, Any]) -> list[tuple[str | None, Any, Any]]:
    out: list[tuple[str | None, Any, Any]] = []
    for name_k, label_k, value_k in _EVAL_ATTR_GROUPS:
        if label_k in got or value_k in got:
            name = got.get(name_k)
            out.append((str(name) if name is not None else None, got.get(label_k), got.get(value_k)))
    indexed: dict[tuple[str, int], dict[str, Any]] = {}
    for k, v in got.items():
        m = _EVAL_INDEXED_RE.match(k) if k.startswith(_EVAL_PREFIXES) else None
        if m:
            indexed.setdefault((m.group(1), int(m.group(2))), {})[m.group(3)] = v
    for _, d in sorted(indexed.items()):
        if "label" in d or "score" in d or "value" in d:
            name = d.get("name")
            out.append((str(name) if name is not None else None, d.get("label"), d.get("score", d.get("value"))))
    return out


def _event_eval(attrs: dict[str, Any]) -> tuple[str | None, Any, Any] | None:
    label = attrs.get("gen_ai.evaluation.score.label")
    value = attrs.get("gen_ai.evaluation.score.value")
    if label is None and value is None:
        return None
    name = attrs.get("gen_ai.evaluation.name")
    return (str(name) if name is not None else None, label, value)


def _is_error_status(code: Any) -> bool:
    try:
        return code in _ERROR_CODES
    except TypeError:  # unhashable
        return False


def _parse_otlp_span(span: Any, resource: dict[str, Any] | None, line: int,
                     opts: _Options) -> tuple[str, _Span]:
    if not isinstance(span, dict):
        raise _SpanError(f"a span must be an object, got {type(span).__name__}", "spans")
    try:
        tid = norm_id(span.get("traceId", span.get("trace_id")))
    except ValueError as exc:
        raise _SpanError(f"traceId: {exc}", "traceId") from None
    if tid is None:
        raise _SpanError("span has no traceId", "traceId", "every span needs its 32-hex-digit trace id")
    rec = _Span()
    rec.line = line
    rec.resource = resource
    try:
        sid = norm_id(span.get("spanId", span.get("span_id")))
        rec.parent = norm_id(span.get("parentSpanId", span.get("parent_span_id")))
    except ValueError as exc:
        raise _SpanError(f"span id: {exc}", "spanId") from None
    if sid is None:
        raise _SpanError(f"span of trace {tid} has no spanId", "spanId")
    rec.sid = sid
    name = span.get("name")
    rec.name = name if isinstance(name, str) else ""
    try:
        rec.start = _ns_seconds(span.get("startTimeUnixNano", span.get("start_time_unix_nano")))
        rec.end = _ns_seconds(span.get("endTimeUnixNano", span.get("end_time_unix_nano")))
    except (TypeError, ValueError, OverflowError):
        raise _SpanError(f"span {sid}: start/end time is not a number of nanoseconds", "startTimeUnixNano",
                         'write times as decimal strings, e.g. "1767000000000000000"') from None
    status = span.get("status")
    if isinstance(status, dict):
        rec.error = _is_error_status(status.get("code"))
    elif status is not None:
        raise _SpanError(f"span {sid}: status must be an object", "status")
    attrs = span.get("attributes")
    got: dict[str, Any] = {}
    if attrs is not None:
        if not isinstance(attrs, list):
            raise _SpanError(f"span {sid}: attributes must be a list of {{key, value}}", "attributes")
        wanted = opts.wanted
        for a in attrs:
            if not isinstance(a, dict):
                raise _SpanError(f"span {sid}: an attribute is not a {{key, value}} object", "attributes")
            k = a.get("key")
            if type(k) is str and (k in wanted or (k[:6] == "trace." and k.startswith(_EVAL_PREFIXES))):
                got[k] = _any_value(a.get("value"))
    events = span.get("events")
    if events:
        if not isinstance(events, list):
            raise _SpanError(f"span {sid}: events must be a list", "events")
        for ev in events:
            if not isinstance(ev, dict):
                continue
            ev_name = ev.get("name")
            if ev_name == _EVAL_EVENT or (ev_name == "exception" and rec.error):
                ev_attrs = ev.get("attributes")
                decoded = {a["key"]: _any_value(a.get("value")) for a in ev_attrs
                           if isinstance(a, dict) and isinstance(a.get("key"), str)} \
                    if isinstance(ev_attrs, list) else {}
                _take_event(rec, ev_name, decoded, got)
    _fill(rec, got, opts)
    return tid, rec


def _take_event(rec: _Span, ev_name: Any, attrs: dict[str, Any], got: dict[str, Any]) -> None:
    if ev_name == _EVAL_EVENT:
        ev = _event_eval(attrs)
        if ev is not None:
            rec.evals = [*(rec.evals or []), ev]
    elif "exception.type" in attrs and "exception.type" not in got:
        got["exception.type"] = attrs["exception.type"]


def _parse_flat_span(obj: dict[str, Any], line: int, opts: _Options) -> tuple[str, _Span]:
    """A console (``span.to_json()``) or Phoenix span object."""
    ctx = obj.get("context")
    if not isinstance(ctx, dict):
        raise _SpanError("span has no context object", "context", 'console spans carry {"context": {"trace_id", '
                                                                  '"span_id"}}')
    try:
        tid = norm_id(ctx.get("trace_id"))
        sid = norm_id(ctx.get("span_id"))
        parent = norm_id(obj.get("parent_id"))
    except ValueError as exc:
        raise _SpanError(f"id: {exc}", "context.trace_id") from None
    if tid is None:
        raise _SpanError("span has no context.trace_id", "context.trace_id")
    if sid is None:
        raise _SpanError(f"span of trace {tid} has no context.span_id", "context.span_id")
    rec = _Span()
    rec.sid, rec.parent, rec.line = sid, parent, line
    name = obj.get("name")
    rec.name = name if isinstance(name, str) else ""
    try:
        rec.start = iso_seconds(obj.get("start_time"))
        rec.end = iso_seconds(obj.get("end_time"))
    except (TypeError, ValueError, OverflowError):
        raise _SpanError(f"span {sid}: start_time/end_time is not an ISO-8601 time", "start_time") from None
    status = obj.get("status")
    code = status.get("status_code") if isinstance(status, dict) else obj.get("status_code")
    rec.error = _is_error_status(code)
    attrs = obj.get("attributes")
    if attrs is not None and not isinstance(attrs, dict):
        raise _SpanError(f"span {sid}: attributes must be an object", "attributes")
    got: dict[str, Any] = {}
    wanted = opts.wanted
    for k, v in (attrs or {}).items():
        if k in wanted or k.startswith(_EVAL_PREFIXES):
            got[k] = v
    events = obj.get("events")
    if isinstance(events, list):
        for ev in events:
            if isinstance(ev, dict) and (ev.get("name") == _EVAL_EVENT or (ev.get("name") == "exception"
                                                                          and rec.error)):
                ev_attrs = ev.get("attributes")
                _take_event(rec, ev.get("name"), ev_attrs if isinstance(ev_attrs, dict) else {}, got)
    res = obj.get("resource")
    res_attrs = res.get("attributes") if isinstance(res, dict) else None
    if isinstance(res_attrs, dict) and opts.user_keys:
        rec.resource = {k: res_attrs[k] for k in opts.user_keys if k in res_attrs} or None
    _fill(rec, got, opts, obj.get("span_kind"))
    return tid, rec


# ============================================================================================ live requests
# The OTLP/HTTP receiver (``tracetochain serve``) decodes export requests with these, so a span gets the same facts
# whether it arrives as protobuf, as OTLP JSON over HTTP, or in a file: one mapping (:func:`_fill`), one assembly
# (:func:`emit_trace`).
SpanFacts = _Span


SpanTrace = _Trace


OtlpOptions = _Options


SpanError = _SpanError


def parse_otlp_options(**options: Any) -> _Options:
    """The reader's options (``episode=``, ``outcome_attribute=``, ``evaluation_name=``, ``success_values=``, …) as
    the object the span functions take; unknown options raise ``TypeError`` naming the valid ones."""
    return _parse_options(options)


def _proto_value(v: Any) -> Any:
    """A protobuf ``AnyValue`` as the JSON reader decodes it (bytes as base64 text, as OTLP JSON writes them)."""
    kind = v.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_proto_value(e) for e in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _proto_value(kv.value) for kv in v.kvlist_value.values}
    if kind == "bytes_value":
        return base64.b64encode(v.bytes_value).decode("ascii")
    return getattr(v, kind)


def span_from_proto(span: Any, resource: dict[str, Any] | None, opts: _Options, line: int = 0) -> tuple[str, _Span]:
    """``(trace id, facts)`` of one protobuf ``opentelemetry.proto.trace.v1.Span``, by the rules of the JSON path.

    Raises :class:`SpanError` (message, field) for a span without a trace or span id.
    """
    tid = norm_id(span.trace_id.hex()) if span.trace_id else None
    if tid is None:
        raise _SpanError("span has no traceId", "traceId", "every span needs its 16-byte trace id")
    sid = norm_id(span.span_id.hex()) if span.span_id else None
    if sid is None:
        raise _SpanError(f"span of trace {tid} has no spanId", "spanId")
    rec = _Span()
    rec.line = line
    rec.resource = resource
    rec.sid = sid
    rec.parent = norm_id(span.parent_span_id.hex()) if span.parent_span_id else None
    rec.name = span.name
    rec.start = span.start_time_unix_nano / 1e9 if span.start_time_unix_nano else None
    rec.end = span.end_time_unix_nano / 1e9 if span.end_time_unix_nano else None
    rec.error = span.status.code == 2  # STATUS_CODE_ERROR
    wanted = opts.wanted
    got: dict[str, Any] = {}
    for a in span.attributes:
        k = a.key
        if k in wanted or (k[:6] == "trace." and k.startswith(_EVAL_PREFIXES)):
            got[k] = _proto_value(a.value)
    for ev in span.events:
        if ev.name == _EVAL_EVENT or (ev.name == "exception" and rec.error):
            _take_event(rec, ev.name, {a.key: _proto_value(a.value) for a in ev.attributes}, got)
    _fill(rec, got, opts)
    return tid, rec


def spans_of_export_request(request: Any, opts: _Options) -> list[tuple[str, _Span]]:
    """Every span of a protobuf ``ExportTraceServiceRequest`` as ``(trace id, facts)``; a bad span raises
    :class:`SpanError` (the receiver refuses the whole request rather than acknowledge part of it)."""
    keys = opts.user_keys
    out: list[tuple[str, _Span]] = []
    for block in request.resource_spans:
        resource = ({a.key: _proto_value(a.value) for a in block.resource.attributes if a.key in keys} or None) \
            if keys else None
        for scope in block.scope_spans:
            for span in scope.spans:
                out.append(span_from_proto(span, resource, opts))
    return out


def resource_block(block: dict[str, Any], keys: Any) -> tuple[dict[str, Any] | None, Any]:
    """One ``resourceSpans`` entry: its resource attributes among the user's ``keys`` (None when none is asked for
    or present) and its scope blocks (``scopeSpans``, ``scope_spans`` or the pre-1.0 ``instrumentationLibrarySpans``;
    None when absent, anything else as found for the caller to refuse)."""
    resource: dict[str, Any] | None = None
    if keys:
        res = block.get("resource")
        attrs = res.get("attributes") if isinstance(res, dict) else None
        if isinstance(attrs, list):
            resource = {a["key"]: _any_value(a.get("value")) for a in attrs
                        if isinstance(a, dict) and a.get("key") in keys} or None
    return resource, block.get("scopeSpans", block.get("scope_spans", block.get("instrumentationLibrarySpans")))


def spans_of_json_document(doc: Any, opts: _Options) -> list[tuple[str, _Span]]:
    """Every span of an OTLP JSON ``{"resourceSpans": [...]}`` document (an OTLP/HTTP JSON export request), with the
    file reader's rules; anything malformed raises :class:`SpanError` naming the field."""
    if not isinstance(doc, dict):
        raise _SpanError(f"expected an OTLP JSON object, got {type(doc).__name__}", None,
                         'send {"resourceSpans": [...]}')
    rs = doc.get("resourceSpans", doc.get("resource_spans", _MISSING))
    if rs is _MISSING:
        raise _SpanError("not an OTLP export request (no resourceSpans)", "resourceSpans",
                         'send {"resourceSpans": [...]}')
    if not isinstance(rs, list):
        raise _SpanError(f"resourceSpans must be a list, got {type(rs).__name__}", "resourceSpans")
    keys = opts.user_keys
    out: list[tuple[str, _Span]] = []
    for block in rs:
        if not isinstance(block, dict):
            raise _SpanError("a resourceSpans entry must be an object", "resourceSpans")
        resource, scopes = resource_block(block, keys)
        if scopes is None:
            continue
        if not isinstance(scopes, list):
            raise _SpanError("scopeSpans must be a list", "scopeSpans")
        for scope in scopes:
            spans = scope.get("spans") if isinstance(scope, dict) else _MISSING
            if spans is None:
                continue
            if not isinstance(spans, list):
                raise _SpanError("scopeSpans[].spans must be a list", "spans")
            for span in spans:
                try:
                    out.append(_parse_otlp_span(span, resource, 0, opts))
                except (TypeError, ValueError, OverflowError, RecursionError) as exc:
                    raise _SpanError(f"malformed span ({type(exc).__name__}: {exc})", "spans") from None
    return out


# ============================================================================================ episodes
@dataclass
class _Episode:
    eid: str
    root: _Span | None
    spans: list[tuple[_Span, int]]  # BFS order from the episode root(s), with depth
    ancestors: list[_Span] = field(default_factory=list)  # of the root, nearest first


# ============================================================================================ the reader
def _parse_options(options: dict[str, Any]) -> _Options:
    o = dict(options)
    episode = o.pop("episode", "trace")
    opts = _Options()
    if episode in ("trace", "agent"):
        opts.episode_kind = episode
    elif isinstance(episode, str) and episode.startswith("span:") and episode[5:]:
        opts.episode_kind, opts.episode_span = "span", episode[5:]
    else:
        raise ValueError(f"episode must be 'trace', 'agent' or 'span:NAME', got {episode!r}")
    for name in ("outcome_attribute", "evaluation_name", "task_attribute", "trial_attribute"):
        v = o.pop(name, None)
        if v is not None and (not isinstance(v, str) or not v.strip()):
            raise TypeError(f"{name} must be an attribute name (a non-empty string), got {v!r}")
        setattr(opts, name, v.strip() if isinstance(v, str) else None)
    opts.success_values = parse_success_values(o.pop("success_values", None))
    threshold = o.pop("success_threshold", DEFAULT_SUCCESS_THRESHOLD)
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not math.isfinite(threshold):
        raise TypeError(f"success_threshold must be a number, got {threshold!r}")
    opts.threshold = float(threshold)
    verdicts = o.pop("verdicts", None)
    if verdicts is not None:
        vp = Path(verdicts)
        opts.verdicts = load_verdicts(vp)
        opts.verdicts_path = str(vp)
    opts.include_text = bool(o.pop("include_text", True))
    unlabelled = o.pop("unlabelled", "skip")
    if unlabelled not in ("skip", "keep"):
        raise ValueError(f"unlabelled must be 'skip' or 'keep', got {unlabelled!r}")
    opts.keep_unlabelled = unlabelled == "keep"
    if o:
        raise TypeError(f"the otlp reader got unknown options {sorted(o)}; it takes episode=, outcome_attribute=, "
                        "success_values=, success_threshold=, verdicts=, evaluation_name=, task_attribute=, "
                        "trial_attribute=, include_text=, unlabelled=")
    user = {k for k in (opts.outcome_attribute, opts.task_attribute, opts.trial_attribute) if k}
    opts.user_keys = frozenset(p for k in user for p in _key_prefixes(k))
    opts.wanted = _BASE_KEYS | opts.user_keys | (_TEXT_KEYS if opts.include_text else frozenset())
    return opts
