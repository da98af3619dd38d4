"""OpenTelemetry traces of LLM agents: OTLP JSON / JSON Lines and the Python SDK's console span JSON.

Provenance (docs/formats.md)
----------------------------
* **OTLP JSON** (``open-telemetry/opentelemetry-proto``, JSON Protobuf encoding of ``TracesData``): the
  Collector's ``fileexporter`` and the SDK file exporter write **one** ``{"resourceSpans": [...]}`` document per
  line (JSON Lines, no ordering guarantee); a single pretty-printed document, a JSON array of documents and bare
  OTLP span objects (``{"traceId", "spanId", ...}``) are read too. Keys are lowerCamelCase (snake_case and the
  pre-1.0 ``instrumentationLibrarySpans`` are accepted). Attribute values are ``{"key", "value": {"stringValue" |
  "intValue" (a decimal *string*) | "doubleValue" | "boolValue" | "arrayValue" | "kvlistValue" | "bytesValue"}}``.
  ``traceId``/``spanId``/``parentSpanId`` are hex, or base64 from some exporters; both are normalised to
  lower-case hex. Times are ``startTimeUnixNano``/``endTimeUnixNano`` (decimal strings or numbers).
* **Console span JSON** (Python SDK ``ConsoleSpanExporter`` / ``span.to_json()``): one span object per JSON value,
  usually pretty-printed and simply concatenated: ``{"name", "context": {"trace_id": "0x…", "span_id": "0x…"},
  "parent_id": "0x…" | null, "start_time"/"end_time": ISO-8601, "status": {"status_code": "UNSET|OK|ERROR"},
  "attributes": {flat}, "events": [...], "resource": {"attributes": {...}}}``. Phoenix span rows (``span_kind``,
  top-level ``status_code``, ``context.trace_id`` without ``0x``) use the same path.
* Attribute vocabularies: OpenTelemetry **GenAI semantic conventions** (``gen_ai.operation.name``,
  ``gen_ai.tool.name``, ``gen_ai.usage.*``, ``error.type``, the ``gen_ai.evaluation.result`` event, the proposed
  ``gen_ai.agent.finish_reason``) and **OpenInference** (``openinference.span.kind``, ``tool.name``,
  ``llm.token_count.*``, ``llm.cost.total``, ``input.value``/``output.value``, evaluation/annotation attributes).
  Traceloop's ``traceloop.span.kind``/``llm.request.type`` are used as a last resort.

Field mapping onto the canonical record
---------------------------------------
* **Episode** (option ``episode=``): ``"trace"`` (default) — one episode per ``traceId``, ``trace_id`` = the
  lower-case hex trace id; ``"agent"`` — each top-level ``invoke_agent`` / ``invoke_workflow`` span (or
  OpenInference ``AGENT`` span) is an episode (an agent invoked inside another is part of the outer episode),
  ``trace_id`` = ``"<trace hex>:<span hex>"``; ``"span:NAME"`` — each outermost span named NAME, same id
  form. Traces without such a span give no episode and are counted as dropped (never raised).
* **Span kind**: ``gen_ai.operation.name`` chat / text_completion / generate_content / plan → ``llm``;
  execute_tool and the memory writes (create_memory, update_memory, upsert_memory, delete_memory,
  create_memory_store, delete_memory_store; tool name = the operation) → ``tool``; invoke_agent / create_agent /
  invoke_workflow → ``agent``; embeddings / retrieval / search_memory → ``retrieval``; any other operation →
  ``other`` (unless OpenInference names the kind). These are exactly the well-known ``gen_ai.operation.name``
  values of the GenAI conventions (all "Development"; since moved to open-telemetry/semantic-conventions-genai),
  ``plan`` and the memory operations being the newest; names not published there (``handle_conversation_turn``,
  an attribute ``gen_ai.invocation.internal``) are not read — in the conventions an *internal* agent invocation
  is an ``invoke_agent`` span of span kind INTERNAL (an in-process agent), which is an episode like any other.
  Otherwise ``openinference.span.kind`` LLM → llm, TOOL → tool,
  AGENT → agent, RETRIEVER / EMBEDDING / RERANKER → retrieval, CHAIN / GUARDRAIL / EVALUATOR / PROMPT → other;
  then Traceloop's ``traceloop.span.kind`` / ``llm.request.type``. Without any, ``other``.
* **Steps** (``step_idx``): the *leaf* step spans under the episode root — spans of kind llm / tool / retrieval none
  of whose descendants is itself of one of those kinds — ordered by start time, ties broken by span id. An LLM span
  with two ``execute_tool`` children therefore gives two ``tool`` steps (the tool calls) and no llm step; an LLM span
  whose tool calls are *sibling* spans (the usual GenAI layout) is its own ``llm`` step followed by the tool steps.
  Agent, chain and other wrapper spans are never steps. An episode with no step span (but an outcome) is kept as a
  zero-step episode (``table.report.zero_step``) and reported, never dropped.
* ``step_kind``/``tool_name``: the span kind; ``gen_ai.tool.name`` or ``tool.name`` (else the span name without an
  ``execute_tool`` prefix) on tool steps. ``state``: the step span's ``tracetochain.state`` attribute (set by
  :mod:`tracetochain.instrument`), else empty (the state is then ``step_kind[:tool_name]``).
* ``error``: the step span's **own** status is ERROR (``status.code`` 2 / ``"STATUS_CODE_ERROR"``; console
  ``"ERROR"``) or it carries ``error.type``. Errors on ancestors never mark their children, and a handled tool error
  (on the ``execute_tool`` span only) does not fail the episode. ``error_type``: ``error.type``, else
  ``exception.type`` (attribute or ``exception`` event) of an erroring span.
* ``text`` (``include_text=True``): tool steps ``gen_ai.tool.call.arguments`` or ``input.value``; llm steps
  ``gen_ai.output.messages`` or ``output.value``; retrieval steps ``input.value``. Non-string values are JSON.
* ``t_start``/``t_end``: span times in epoch seconds. ``tokens_in``/``tokens_out``: ``gen_ai.usage.input_tokens`` /
  ``output_tokens`` (older ``prompt_tokens``/``completion_tokens``; OpenInference ``llm.token_count.prompt`` /
  ``completion``); ``cost_usd``: ``llm.cost.total``. Unparseable usage values are left empty. The usage of an LLM
  span that is no step (its tool calls are its children) is added to its first step, so episode totals add up.
* ``task_id``/``trial``: only from attributes the user names (``task_attribute=``, ``trial_attribute=``), looked up
  on the episode root first, then on its descendants nearest the root, then on the root's ancestors (a harness may
  stamp the task on a wrapper span above the agent), then on the resource. A dotted name whose prefix is a
  JSON-string or kvlist attribute is looked up inside it (``metadata.task_id`` reads the
  OpenInference ``metadata`` JSON).
* **Outcome** — span status is **never** used: UNSET means "no error", not "task solved", and a root ERROR may be an
  infrastructure crash. **One rule per episode, offline and live** (:func:`_outcome`): the first of these sources
  that has a value *for this episode* decides, and ``table.report.outcome_sources`` counts how many episodes each
  source labelled (so a verdict file only needs the episodes whose spans say nothing):

  1. ``verdicts=PATH`` when given: a JSON object ``{id: verdict}``, a JSON/JSONL list of rows, or a CSV with an id
     column (``episode_id``, ``trace_id``, ``traceId``, ``id`` or ``span_id``) and a verdict column (``outcome``,
     ``resolved``, ``success``, ``passed``, ``label``; or a numeric ``reward``/``score``/``value``). Ids match the
     episode id, the episode's root span id, or (when the trace holds one episode) the trace id; ``0x`` prefixes,
     case and base64 are normalised.
  2. else ``outcome_attribute=NAME`` when given: the attribute looked up as for ``task_id``.
  3. else evaluation results within the episode: ``gen_ai.evaluation.result`` span events (or the same
     ``gen_ai.evaluation.*`` keys as span attributes) and OpenInference ``evaluation.*`` / ``annotation.*``
     attributes (also flattened as ``trace.evaluations.<i>.*``). ``evaluation_name=`` picks one evaluation when
     several are recorded; the result nearest the episode root wins, and disagreeing results at that depth are an
     error.
  4. verdicts posted to the live receiver (``tracetochain serve``, ``POST /v1/verdicts``).

  ``unlabelled="keep"`` keeps an episode no source labels as an *unlabelled* run (canonical outcome ``censored``,
  ``termination_reason="unlabelled"``: its steps, costs and times count; see docs/live.md for how the chain uses
  it); the default ``"skip"`` refuses it (below).

  A verdict maps to an outcome so: booleans directly; numbers are the ``reward`` and succeed when
  ``≥ success_threshold`` (default 1 − 1e−6); strings are matched case-insensitively against ``success_values=``
  when given (anything else fails), else against pass/passed/success/correct/true/yes/resolved/1 and
  fail/failed/failure/incorrect/false/no/unresolved/0 (``censored``/``invalid`` are taken literally); numeric
  strings are rewards. An episode with no outcome source raises ``OTLP spans carry no task outcome; span status is
  not success — pass outcome_attribute= or verdicts=`` (skipped and counted with ``on_error="skip"``).
* ``termination_reason``/censoring: ``gen_ai.agent.finish_reason`` (else ``gen_ai.agent.invocation.status``, how
  the agent invocation ended) of the shallowest span carrying it; a budget cut-off — ``max_iterations``,
  ``max_turns``, ``max_steps``, ``max_tokens``, ``time_budget``, ``timeout`` and their ``*_exceeded`` / ``*_limit`` /
  ``timed_out`` / ``budget_exceeded`` spellings — makes the episode ``censored`` (a budget ending, docs/formats.md,
  "The canonical record") whatever the verdict says. An invocation status is never an outcome (an agent that
  completed may still have failed its task).

Streaming and memory
--------------------
The file is read twice, line by line, never whole (except a single multi-line JSON document, which is one value).
Pass 1 scans each line's bytes with a regular expression for trace ids and records the last line on which each
trace appears (one small integer per trace). Pass 2 parses one line (JSON value) at a time, keeps only a compact
per-span tuple (the attributes the mapping needs, not all attributes), and finishes a trace — builds its episodes
and step rows — as soon as the line holding its last span has been read. Steps go into column chunks that are
converted to Arrow every 16,384 rows. Memory is therefore bounded by the traces *open* at once (those whose spans
straddle the current line) plus the output table and one id per trace; it stays small when the exporter's batches
are roughly grouped in time, as batch span processors write them, and grows towards the whole file only for a file
whose every trace straddles the whole file. Spans of one trace may arrive on many lines, in any order.

Protobuf export requests (``span_from_proto``, ``spans_of_export_request``) and OTLP JSON requests
(``spans_of_json_document``) go through the same span facts and :func:`emit_trace`: this is what the live receiver
(``tracetochain serve``) uses, so a span sent over OTLP/HTTP and the same span in a file give the same steps.

Bad input raises :class:`~tracetochain.exceptions.TraceValidationError` naming the file, the line and the field;
with ``on_error="skip"`` every trace touched by the bad line or span is dropped and counted: a bad span drops its
trace; a span without a usable trace id drops every trace with a span on the same line; a line that is not JSON
drops the traces whose ids appear in its text. A repeated span id within a trace keeps the first copy.
"""

from __future__ import annotations

import base64
import binascii
import csv
import heapq
import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tracetochain.exceptions import TraceValidationError
from tracetochain.readers._common import (
    DEFAULT_SUCCESS_THRESHOLD,
    Refusal,
    Sniffed,
    TraceBuilder,
    add_float,
    add_int,
    arrow_column,
    build_table,
    head_text,
    iso_seconds,
    json_loads,
    json_raw_decode,
    load_json,
    lookup,
    parse_success_values,
    verdict_to_outcome,
    wrong_suffix,
)
from tracetochain.readers._common import MISSING as _MISSING
from tracetochain.readers._common import finite_float as _as_float
from tracetochain.traces import COLUMNS, Problem, TraceTable

__all__ = ["NO_OUTCOME_MESSAGE", "OTLP", "STATE_ATTRIBUTE", "ColumnarTraceBuilder", "OtlpOptions", "OtlpReader",
           "SpanError", "SpanFacts", "SpanTrace", "emit_trace", "parse_otlp_options", "span_from_proto",
           "spans_of_export_request", "spans_of_json_document"]

#: The error every episode without an outcome source gets (refuse to guess; docs/formats.md).
NO_OUTCOME_MESSAGE = (
    "OTLP spans carry no task outcome; span status is not success — pass outcome_attribute= or verdicts="
)
_NO_OUTCOME_HINT = "or record a gen_ai.evaluation.result event (score.label/score.value) on the episode's spans"

_EXTENSIONS = (".jsonl", ".ndjson", ".json", ".log", ".txt")
_STEP_KINDS = frozenset({"llm", "tool", "retrieval"})
_OP_KIND = {
    "chat": "llm", "text_completion": "llm", "generate_content": "llm",
    # `plan` (an agent's planning / task-decomposition phase): a model step; a plan span whose model calls are
    # child spans is a wrapper, like a chat span with tool calls below it (the leaf rule decides).
    "plan": "llm",
    "execute_tool": "tool",
    "invoke_agent": "agent", "create_agent": "agent", "invoke_workflow": "agent",
    "embeddings": "retrieval", "retrieval": "retrieval",
    # Memory operations: a search reads like a retrieval; the writes are actions on a store, tool steps named by
    # the operation (so `update_memory` is one state however the store is called).
    "search_memory": "retrieval",
    "create_memory": "tool", "update_memory": "tool", "upsert_memory": "tool", "delete_memory": "tool",
    "create_memory_store": "tool", "delete_memory_store": "tool",
}
_MEMORY_OPS = frozenset({"create_memory", "update_memory", "upsert_memory", "delete_memory", "create_memory_store",
                         "delete_memory_store"})
#: Operations whose outermost span is an episode with ``episode="agent"`` (unless marked internal).
_AGENT_ROOT_OPS = frozenset({"invoke_agent", "invoke_workflow"})
#: The agent invocation's end status, as some agent frameworks record it (not in the published registry: read as a
#: termination reason only, never as an outcome).
_INVOCATION_STATUS = "gen_ai.agent.invocation.status"
_OI_KIND = {
    "LLM": "llm", "TOOL": "tool", "AGENT": "agent", "RETRIEVER": "retrieval", "EMBEDDING": "retrieval",
    "RERANKER": "retrieval", "CHAIN": "other", "GUARDRAIL": "other", "EVALUATOR": "other", "PROMPT": "other",
}
_TRACELOOP_KIND = {"tool": "tool", "agent": "agent", "workflow": "other", "task": "other"}
_LLM_REQUEST_KIND = {"chat": "llm", "completion": "llm", "embedding": "retrieval", "rerank": "retrieval"}
_CENSOR_REASONS = frozenset({"max_iterations", "max_turns", "max_steps", "max_tokens", "time_budget", "timeout",
                             # budget cut-offs as agent invocation statuses spell them
                             "max_iterations_exceeded", "max_turns_exceeded", "max_steps_exceeded",
                             "max_tokens_exceeded", "budget_exceeded", "token_limit", "turn_limit", "timed_out",
                             "time_limit"})
_ERROR_CODES = frozenset({2, "2", "STATUS_CODE_ERROR", "ERROR", "StatusCode.ERROR", "error"})
_EVAL_EVENT = "gen_ai.evaluation.result"
#: A step span's own state label (``tracetochain.instrument`` sets it); absent, the state is ``kind[:tool]``.
STATE_ATTRIBUTE = "tracetochain.state"
_EVAL_PREFIXES = ("trace.evaluations.", "trace.annotations.")
_EVAL_ATTR_GROUPS = (
    ("gen_ai.evaluation.name", "gen_ai.evaluation.score.label", "gen_ai.evaluation.score.value"),
    ("evaluation.name", "evaluation.label", "evaluation.score"),
    ("annotation.name", "annotation.label", "annotation.score"),
)
#: Attributes the mapping reads (besides user-named ones); everything else is dropped at once.
_BASE_KEYS = frozenset({
    "gen_ai.operation.name", "openinference.span.kind", "traceloop.span.kind", "llm.request.type",
    "gen_ai.tool.name", "tool.name", "error.type", "exception.type",
    "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.usage.prompt_tokens",
    "gen_ai.usage.completion_tokens", "llm.token_count.prompt", "llm.token_count.completion", "llm.cost.total",
    "gen_ai.agent.finish_reason", _INVOCATION_STATUS, STATE_ATTRIBUTE,
    *(k for group in _EVAL_ATTR_GROUPS for k in group),
})
_EVAL_KEYS = frozenset(k for group in _EVAL_ATTR_GROUPS for k in group)
_TEXT_KEYS = frozenset({"gen_ai.tool.call.arguments", "input.value", "gen_ai.output.messages", "output.value"})
_VERDICT_ID_KEYS = ("episode_id", "trace_id", "traceId", "id", "span_id")
_VERDICT_OUTCOME_KEYS = ("outcome", "resolved", "success", "passed", "label")
_VERDICT_REWARD_KEYS = ("reward", "score", "value")

# Pass 1: trace ids in raw bytes (OTLP "traceId", snake_case and console "trace_id").
_TRACE_ID_RE = re.compile(rb'"(?:traceId|trace_id)"\s*:\s*"((?:[^"\\]|\\.)*)"')
_HEX_RE = re.compile(r"[0-9a-fA-F]+\Z")
_EVAL_INDEXED_RE = re.compile(
    r"trace\.(evaluations|annotations)\.([0-9]{1,9})\.(?:[A-Za-z_]+\.)*(name|label|score|value)\Z")


# ============================================================================================ columnar builder
_COLS: tuple[tuple[str, pa.DataType], ...] = tuple((c.name, c.type) for c in COLUMNS)


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


# ============================================================================================ small parsers
_id_cache: dict[str, str | None] = {}


def norm_id(raw: Any) -> str | None:
    """Lower-case hex of an OTLP/console id (hex, ``0x`` hex or base64); None for an empty or all-zero id.

    A string that is neither hex nor base64 of 8/16 bytes is kept as it is (stripped); a non-string raises
    ``ValueError``.
    """
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise ValueError(f"expected a hex string, got {type(raw).__name__}")
    hit = _id_cache.get(raw, _MISSING)
    if hit is not _MISSING:
        return hit  # type: ignore[return-value]
    s = raw.strip()
    if s[:2] in ("0x", "0X"):
        s = s[2:]
    out: str | None
    if not s:
        out = None
    elif _HEX_RE.match(s) and len(s) in (16, 32):
        out = s.lower()
    else:
        out = s
        if len(s) in (12, 24) and not _HEX_RE.match(s):
            try:
                b = base64.b64decode(s, validate=True)
            except (binascii.Error, ValueError):
                b = b""
            if len(b) in (8, 16):
                out = b.hex()
        elif _HEX_RE.match(s):
            out = s.lower()
    if out is not None and not out.strip("0"):
        out = None
    if len(_id_cache) > 16_384:  # ids repeat within a trace; a small cache is enough
        _id_cache.clear()
    _id_cache[raw] = out
    return out


def _ns_seconds(value: Any) -> float | None:
    """OTLP ``*UnixNano`` (decimal string or number) as epoch seconds; None when absent or zero."""
    if value is None or isinstance(value, bool):
        return None
    try:
        ns = int(value)
    except (TypeError, ValueError):
        ns = int(float(value))  # "1.767e18": ValueError/TypeError propagate to the caller's guard
    return ns / 1e9 if ns else None


def _any_value(v: Any) -> Any:
    """Decode an OTLP ``AnyValue`` (``{"stringValue": …}`` etc.); plain JSON values pass through."""
    if not isinstance(v, dict):
        return v
    for k, x in v.items():
        if k in ("stringValue", "string_value"):
            return x
        if k in ("intValue", "int_value"):
            try:
                return int(x)
            except (TypeError, ValueError):
                return x
        if k in ("doubleValue", "double_value"):
            try:
                return float(x)  # "NaN", "Infinity" are legal here
            except (TypeError, ValueError, OverflowError):
                return x
        if k in ("boolValue", "bool_value"):
            return x
        if k in ("arrayValue", "array_value"):
            vals = x.get("values") if isinstance(x, dict) else None
            return [_any_value(e) for e in vals] if isinstance(vals, list) else []
        if k in ("kvlistValue", "kvlist_value"):
            vals = x.get("values") if isinstance(x, dict) else None
            out: dict[str, Any] = {}
            for kv in vals if isinstance(vals, list) else ():
                if isinstance(kv, dict) and isinstance(kv.get("key"), str):
                    out[kv["key"]] = _any_value(kv.get("value"))
            return out
        if k in ("bytesValue", "bytes_value"):
            return x
    return None


def _as_int(v: Any) -> int | None:
    """An integral number (or numeric text) that fits in 64 bits; None for anything else."""
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError, OverflowError):
        return None
    return int(f) if math.isfinite(f) and f == int(f) and abs(f) < 2**63 else None


def _usage(v: Any) -> Any:
    """A usage value (tokens, dollars) as kept: a negative one is dropped like a non-numeric one, so one bad
    counter costs the step its usage, never the episode its outcome."""
    return None if v is None or v < 0 else v


def _as_text(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, str):
        return v
    try:
        return json.dumps(v, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(v)


def _key_prefixes(key: str) -> set[str]:
    parts = key.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts) + 1)}


# ============================================================================================ verdict values
def _norm_key(raw: Any) -> str:
    s = str(raw).strip()
    if ":" in s:
        return ":".join(_norm_key(p) for p in s.split(":"))
    try:
        n = norm_id(s)
    except ValueError:
        n = None
    return (n or s).lower()


def load_verdicts(path: Path) -> dict[str, Any]:
    """Read a verdict file into ``{normalised id: verdict}``; a verdict is a value or ``(outcome, reward)`` pair."""
    src = str(path)
    if not path.is_file():
        raise TraceValidationError("verdict file not found", source=src,
                                   hint="pass verdicts= a JSON, JSONL or CSV file")
    suffix = path.suffix.lower()
    rows: list[tuple[int, Any]] = []
    if suffix == ".csv":
        try:
            with path.open("r", encoding="utf-8", newline="") as fh:
                reader = csv.DictReader(fh)
                rows = [(i, dict(r)) for i, r in enumerate(reader, start=2)]
        except (csv.Error, UnicodeDecodeError) as exc:
            raise TraceValidationError(f"cannot parse CSV ({exc})", source=src) from None
    elif suffix in (".jsonl", ".ndjson"):
        with path.open("rb") as fh:
            for i, line in enumerate(fh, start=1):
                if line.strip():
                    try:
                        rows.append((i, json_loads(line.decode("utf-8"))))
                    except UnicodeDecodeError as exc:
                        raise TraceValidationError(f"not UTF-8 text ({exc.reason})", source=src, line=i) from None
                    except json.JSONDecodeError as exc:
                        raise TraceValidationError(f"not valid JSON ({exc.msg})", source=src, line=i) from None
    else:
        data = load_json(path)
        if isinstance(data, dict) and not any(k in data for k in _VERDICT_ID_KEYS):
            out: dict[str, Any] = {}
            for k, v in data.items():
                out[_norm_key(k)] = _verdict_value(v, src, None, str(k))
            return out
        if isinstance(data, dict):
            data = [data]
        if not isinstance(data, list):
            raise TraceValidationError("a verdict file must hold an object {id: verdict} or a list of rows",
                                       source=src)
        rows = list(enumerate(data))
    out = {}
    for loc, row in rows:
        if not isinstance(row, dict):
            raise TraceValidationError(f"expected an object, got {type(row).__name__}", source=src, row=loc)
        key = next((row[k] for k in _VERDICT_ID_KEYS if row.get(k) not in (None, "")), None)
        if key is None:
            raise TraceValidationError("row has no id", source=src, row=loc, field="episode_id",
                                       hint=f"name the episode in one of {', '.join(_VERDICT_ID_KEYS)}")
        nk = _norm_key(key)
        if nk in out:
            raise TraceValidationError(f"id {key!r} appears twice", source=src, row=loc, field="episode_id")
        out[nk] = _verdict_value({k: v for k, v in row.items() if k not in _VERDICT_ID_KEYS}, src, loc, str(key))
    return out


def _verdict_value(v: Any, src: str, loc: int | None, key: str) -> Any:
    if not isinstance(v, dict):
        return v
    out = next((v[k] for k in _VERDICT_OUTCOME_KEYS if v.get(k) not in (None, "")), None)
    rew = next((v[k] for k in _VERDICT_REWARD_KEYS if v.get(k) not in (None, "")), None)
    if out is None and rew is None:
        raise TraceValidationError(
            f"verdict for {key!r} has no outcome", source=src, row=loc, field="outcome",
            hint=f"give one of {', '.join(_VERDICT_OUTCOME_KEYS + _VERDICT_REWARD_KEYS)}",
        )
    return ("pair", out, rew)


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
        resource: dict[str, Any] | None = None
        if keys:
            res = block.get("resource")
            attrs = res.get("attributes") if isinstance(res, dict) else None
            if isinstance(attrs, list):
                resource = {a["key"]: _any_value(a.get("value")) for a in attrs
                            if isinstance(a, dict) and a.get("key") in keys} or None
        scopes = block.get("scopeSpans", block.get("scope_spans", block.get("instrumentationLibrarySpans")))
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


def emit_trace(trace: _Trace, opts: _Options, builder: TraceBuilder) -> None:
    """Assemble one trace's spans into episodes and step records on ``builder`` (``add_step`` per step,
    ``skip_trace`` / ``problems`` for an episode that cannot be used): the reader's rules, for one trace."""
    _emit_trace(trace, None, opts, builder)


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
            resource: dict[str, Any] | None = None
            if keys:
                res = block.get("resource")
                attrs = res.get("attributes") if isinstance(res, dict) else None
                if isinstance(attrs, list):
                    resource = {a["key"]: _any_value(a.get("value")) for a in attrs
                                if isinstance(a, dict) and a.get("key") in keys} or None
            scopes = block.get("scopeSpans", block.get("scope_spans", block.get("instrumentationLibrarySpans")))
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


# ============================================================================================ episodes
@dataclass
class _Episode:
    eid: str
    root: _Span | None
    spans: list[tuple[_Span, int]]  # BFS order from the episode root(s), with depth
    ancestors: list[_Span] = field(default_factory=list)  # of the root, nearest first


def _tree(tr: _Trace) -> tuple[list[_Span], dict[str, list[_Span]], list[_Span]]:
    """Roots (true roots first, then orphans, by start), children lists, and all spans in BFS order."""
    spans = tr.spans
    children: dict[str, list[_Span]] = {}
    roots: list[_Span] = []
    for s in spans.values():
        if s.parent is None or s.parent not in spans or s.parent == s.sid:
            roots.append(s)
        else:
            children.setdefault(s.parent, []).append(s)
    roots.sort(key=lambda s: (s.parent is not None, _start_key(s), s.sid))
    order: list[_Span] = list(roots)
    i = 0
    while i < len(order):
        order.extend(children.get(order[i].sid, ()))
        i += 1
    return roots, children, order


def _start_key(s: _Span) -> float:
    return s.start if s.start is not None else math.inf


def _episodes(tr: _Trace, roots: list[_Span], children: dict[str, list[_Span]], order: list[_Span],
              opts: _Options) -> list[_Episode]:
    if opts.episode_kind == "trace":
        return [_Episode(tr.tid, roots[0] if roots else None, _bfs(roots, children))]
    tops: list[_Span] = []
    inside: dict[str, bool] = {}
    parent_of = tr.spans
    for s in order:
        p = parent_of.get(s.parent) if s.parent is not None and s.parent != s.sid else None
        above = p is not None and (inside.get(p.sid, False) or _is_episode_root(p, opts))
        inside[s.sid] = above
        if not above and _is_episode_root(s, opts):
            tops.append(s)
    tops.sort(key=lambda s: (_start_key(s), s.sid))
    return [_Episode(f"{tr.tid}:{s.sid}", s, _bfs([s], children), _ancestors(s, parent_of)) for s in tops]


def _ancestors(s: _Span, spans: dict[str, _Span]) -> list[_Span]:
    out: list[_Span] = []
    cur = s
    while cur.parent is not None and cur.parent != cur.sid and cur.parent in spans:
        cur = spans[cur.parent]
        out.append(cur)
    return out


def _is_episode_root(s: _Span, opts: _Options) -> bool:
    return s.agent_root if opts.episode_kind == "agent" else s.name == opts.episode_span


def _bfs(roots: list[_Span], children: dict[str, list[_Span]]) -> list[tuple[_Span, int]]:
    out = [(r, 0) for r in roots]
    i = 0
    while i < len(out):
        s, d = out[i]
        out.extend((c, d + 1) for c in children.get(s.sid, ()))
        i += 1
    return out


class _NoOutcome(Exception):
    def __init__(self, message: str, fieldname: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message, self.field, self.hint = message, fieldname, hint


def _find_attr(ep: _Episode, key: str) -> Any:
    """A user-named attribute: on the episode's spans nearest the root first, then on the root's ancestors (nearest
    first), then on the resource."""
    chain = [s for s, _ in ep.spans] + ep.ancestors
    for s in chain:
        v = lookup(s.user, key)
        if v is not _MISSING:
            return v
    for s in chain:
        v = lookup(s.resource, key)
        if v is not _MISSING:
            return v
    return _MISSING


#: The outcome sources, in the order :func:`_outcome` tries them (the names counted in
#: ``IngestReport.outcome_sources``).
OUTCOME_SOURCES = ("finish_reason", "verdict_file", "attribute", "evaluation", "posted", "unlabelled")
#: ``termination_reason`` of an episode kept without an outcome (``keep_unlabelled``; the live receiver after
#: ``--verdict-timeout``): canonical outcome ``censored``, told apart from a budget ending by this reason.
UNLABELLED = "unlabelled"


def _verdict_for(ep: _Episode, trace_id: str, n_episodes: int, verdicts: dict[str, Any]) -> Any:
    keys = [ep.eid]
    if ep.root is not None and ep.eid != trace_id:
        keys.append(ep.root.sid)
    if n_episodes == 1 and ep.eid != trace_id:
        keys.append(trace_id)
    return next((verdicts[k] for k in keys if k in verdicts), _MISSING)


def _outcome(ep: _Episode, trace_id: str, n_episodes: int,
             opts: _Options) -> tuple[str, float | None, str | None, str]:
    """(outcome, reward, termination reason, source) of one episode: **one rule, offline and live**.

    A budget finish reason censors the episode whatever else is said. Otherwise the first source that has a value
    for *this episode* decides: 1. the verdict file (``verdicts=``), 2. the outcome attribute
    (``outcome_attribute=``), 3. evaluation results in the episode's spans, 4. verdicts posted to the live receiver.
    An episode none of them labels is refused (:class:`_NoOutcome`), or kept as *unlabelled* with
    ``keep_unlabelled``. A source that has a value that cannot be mapped is an error, never skipped over.
    """
    finish = next((s.finish for s, _ in ep.spans if s.finish), None)
    if finish is not None and finish.lower() in _CENSOR_REASONS:
        return "censored", None, finish, "finish_reason"
    tried: list[str] = []
    if opts.verdicts is not None:
        v = _verdict_for(ep, trace_id, n_episodes, opts.verdicts)
        if v is not _MISSING:
            return (*_map_verdict(v, opts, f"verdict for episode {ep.eid}"), finish, "verdict_file")
        tried.append(f"no verdict for this episode in {opts.verdicts_path}")
    if opts.outcome_attribute is not None:
        v = _find_attr(ep, opts.outcome_attribute)
        if v is not _MISSING and v is not None:
            return (*_map_verdict(v, opts, f"{opts.outcome_attribute} of episode {ep.eid}"), finish, "attribute")
        tried.append(f"attribute {opts.outcome_attribute!r} is not set on any span of the episode")
    found: list[tuple[int, int, tuple[str | None, Any, Any]]] = []
    seq = 0
    for s, depth in ep.spans:
        for ev in s.evals or ():
            if opts.evaluation_name is None or ev[0] == opts.evaluation_name:
                found.append((depth, seq, ev))
                seq += 1
    if found:
        names = sorted({str(ev[0]) for _, _, ev in found})
        if len(names) > 1:
            raise _NoOutcome(f"the episode holds several evaluations ({', '.join(names)}) (episode {ep.eid})",
                             "gen_ai.evaluation.name", "pass evaluation_name= to choose the one that is the task "
                                                       "verdict")
        top = min(d for d, _, _ in found)
        results = [_map_eval(ev, opts, ep.eid) for d, _, ev in found if d == top]
        if len({o for o, _ in results}) > 1:
            raise _NoOutcome(f"evaluation results disagree within the episode (episode {ep.eid})", "outcome",
                             "choose a narrower episode= (agent or span:NAME) or pass verdicts=")
        outcome, reward = results[-1]  # agreeing results: the last recorded one gives the reward
        return outcome, reward, finish, "evaluation"
    if opts.posted:
        v = _verdict_for(ep, trace_id, n_episodes, opts.posted)
        if v is not _MISSING:
            return (*_map_verdict(v, opts, f"posted verdict for episode {ep.eid}"), finish, "posted")
    if opts.keep_unlabelled:
        return "censored", None, UNLABELLED, "unlabelled"
    if opts.evaluation_name is not None:
        tried.append(f"no evaluation named {opts.evaluation_name!r} in the episode")
        raise _NoOutcome(f"{'; '.join(tried)}; {NO_OUTCOME_MESSAGE} (episode {ep.eid})", "gen_ai.evaluation.name",
                         _NO_OUTCOME_HINT)
    if tried:
        field = "outcome" if opts.verdicts is not None else str(opts.outcome_attribute)
        hint = ("add a row for it (episode id, root span id or trace id), or pass on_error='skip'"
                if opts.verdicts is not None else "span status is not used as an outcome; set the attribute or "
                                                  "pass verdicts=")
        raise _NoOutcome(f"{'; '.join(tried)}, and no evaluation result (episode {ep.eid})", field, hint)
    raise _NoOutcome(f"{NO_OUTCOME_MESSAGE} (episode {ep.eid})", "outcome", _NO_OUTCOME_HINT)


def _map_verdict(v: Any, opts: _Options, what: str) -> tuple[str, float | None]:
    if isinstance(v, tuple) and v and v[0] == "pair":
        _, out, rew = v
        reward = _as_float(rew) if not isinstance(rew, bool) else float(rew)
        if out is None:
            out = rew if reward is None else reward
        r = verdict_to_outcome(_csv_scalar(out), opts.success_values, opts.threshold)
        if isinstance(r, str):
            raise _NoOutcome(f"{r} ({what})", "outcome", "pass success_values= or success_threshold=")
        return r[0], reward if reward is not None else r[1]
    r = verdict_to_outcome(_csv_scalar(v), opts.success_values, opts.threshold)
    if isinstance(r, str):
        raise _NoOutcome(f"{r} ({what})", "outcome", "pass success_values= or success_threshold=")
    return r


def _csv_scalar(v: Any) -> Any:
    return v.strip() if isinstance(v, str) else v


def _map_eval(ev: tuple[str | None, Any, Any], opts: _Options, eid: str) -> tuple[str, float | None]:
    _, label, value = ev
    reward = _as_float(value)
    if label is not None and label != "":
        r = verdict_to_outcome(label, opts.success_values, opts.threshold)
        if not isinstance(r, str):
            return r[0], reward if reward is not None else r[1]
        if reward is None:
            raise _NoOutcome(f"{r} (evaluation label of episode {eid})", "gen_ai.evaluation.score.label",
                             "pass success_values= listing the labels that mean success")
    if reward is None:
        raise _NoOutcome(f"evaluation has neither a label nor a numeric score (episode {eid})",
                         "gen_ai.evaluation.score.value")
    return ("success" if reward >= opts.threshold else "failure"), reward


def _task_trial(ep: _Episode, opts: _Options) -> tuple[str | None, int | None]:
    task = trial = None
    if opts.task_attribute is not None:
        v = _find_attr(ep, opts.task_attribute)
        if v is not _MISSING and v is not None:
            task = v if isinstance(v, str) else _as_text(v)
    if opts.trial_attribute is not None:
        v = _find_attr(ep, opts.trial_attribute)
        if v is not _MISSING and v is not None:
            trial = _as_int(v.strip() if isinstance(v, str) else v)
            if trial is None:
                raise _NoOutcome(f"trial {v!r} is not an integer (episode {ep.eid})", opts.trial_attribute,
                                 "the trial attribute must hold a repetition index such as 0, 1, 2")
    return task, trial


def _emit_trace(tr: _Trace, poison: tuple[str, int, str | None] | None, opts: _Options,
                builder: TraceBuilder) -> None:
    if poison is not None:  # skip mode only: a bad line or span touched this trace
        message, line, fieldname = poison
        builder.skip_trace(f"{message} (trace {tr.tid})", location=line, field=fieldname)
        return
    roots, children, order = _tree(tr)
    if len(order) < len(tr.spans):
        seen = {s.sid for s in order}
        loop = sorted(sid for sid in tr.spans if sid not in seen)
        builder.skip_trace(f"parentSpanId links form a cycle (trace {tr.tid}, spans {', '.join(loop[:3])})",
                           location=tr.first_line, field="parentSpanId",
                           hint="every span's parent chain must end at a root span")
        return
    # Which spans have a step-kind descendant (children come after parents in BFS order).
    has_step_below: dict[str, bool] = {}
    for s in reversed(order):
        has_step_below[s.sid] = any(c.kind in _STEP_KINDS or has_step_below[c.sid] for c in children.get(s.sid, ()))
    episodes = _episodes(tr, roots, children, order, opts)
    if not episodes:
        what = "top-level invoke_agent span" if opts.episode_kind == "agent" else f"span named {opts.episode_span!r}"
        builder.problems.append(Problem(tr.first_line, None, f"trace has no {what} (trace {tr.tid})",
                                        whole_trace=True))
        return
    for ep in episodes:
        steps = [s for s, _ in ep.spans if s.kind in _STEP_KINDS and not has_step_below[s.sid]]
        untimed = next((s for s in steps if s.start is None), None)
        if untimed is not None:
            builder.skip_trace(f"step span has no start time, so the steps cannot be ordered "
                               f"(episode {ep.eid}, span {untimed.sid})", location=untimed.line,
                               field="startTimeUnixNano")
            continue
        try:
            outcome, reward, finish, source = _outcome(ep, tr.tid, len(episodes), opts)
            task, trial = _task_trial(ep, opts)
        except _NoOutcome as exc:
            builder.skip_trace(exc.message, location=ep.root.line if ep.root else tr.first_line, field=exc.field,
                               hint=exc.hint)
            continue
        builder.outcome_sources[source] = builder.outcome_sources.get(source, 0) + 1
        if not steps:  # an episode with a verdict but no tool, LLM or retrieval span: still a trial
            builder.add_zero_step({"trace_id": ep.eid, "outcome": outcome, "task_id": task, "trial": trial,
                                   "reward": reward, "termination_reason": finish},
                                  ep.spans[0][0].line if ep.spans else tr.first_line)
            continue
        steps.sort(key=lambda s: (s.start, s.sid))
        extra = _wrapper_usage(ep, steps, children)
        for idx, s in enumerate(steps):
            tin, tout, cost = s.tokens_in, s.tokens_out, s.cost
            if s.sid in extra:
                e = extra[s.sid]
                tin, tout, cost = add_int(tin, e[0]), add_int(tout, e[1]), add_float(cost, e[2])
            builder.add_step({
                "trace_id": ep.eid, "step_idx": idx, "outcome": outcome, "task_id": task, "trial": trial,
                "reward": reward, "termination_reason": finish, "step_kind": s.kind,
                "tool_name": s.tool if s.kind == "tool" else None, "error": s.error, "error_type": s.error_type,
                "state": s.state, "text": s.text, "t_start": s.start, "t_end": s.end, "tokens_in": tin,
                "tokens_out": tout, "cost_usd": cost,
            }, s.line)


def _wrapper_usage(ep: _Episode, steps: list[_Span], children: dict[str, list[_Span]]) -> dict[str, list[Any]]:
    """Usage of LLM spans that are no step (their tool calls are child spans), keyed by their first step below."""
    step_ids = {s.sid for s in steps}
    extra: dict[str, list[Any]] = {}
    for s, _ in ep.spans:
        if s.kind != "llm" or s.sid in step_ids or (s.tokens_in is None and s.tokens_out is None and s.cost is None):
            continue
        below: list[_Span] = []
        stack = list(children.get(s.sid, ()))
        while stack:
            c = stack.pop()
            if c.sid in step_ids:
                below.append(c)
            stack.extend(children.get(c.sid, ()))
        if below:
            first = min(below, key=lambda b: (_start_key(b), b.sid))
            acc = extra.setdefault(first.sid, [None, None, None])
            acc[0], acc[1], acc[2] = add_int(acc[0], s.tokens_in), add_int(acc[1], s.tokens_out), \
                add_float(acc[2], s.cost)
    return extra


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
