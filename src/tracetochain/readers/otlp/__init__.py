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

Layout (one module per concern)
-------------------------------
* ``_conventions`` — the attribute vocabularies (GenAI, OpenInference, Traceloop) and their constants;
* ``_values`` — ids, times, typed attribute values, token usage, verdict files;
* ``_spans`` — span facts from OTLP JSON, flat JSON and protobuf requests, and the reader's options;
* ``_files`` — reading files value by value and the streaming assembler;
* ``_outcomes`` — the one outcome rule per episode (offline and live);
* ``_episodes`` — the span tree, episodes, steps and the emission of a canonical trace;
* ``_reader`` — :class:`OtlpReader`, the registry's entry.
"""

from __future__ import annotations

from tracetochain.readers.otlp._conventions import NO_OUTCOME_MESSAGE, STATE_ATTRIBUTE
from tracetochain.readers.otlp._episodes import emit_trace
from tracetochain.readers.otlp._outcomes import OUTCOME_SOURCES as OUTCOME_SOURCES
from tracetochain.readers.otlp._outcomes import UNLABELLED as UNLABELLED
from tracetochain.readers.otlp._reader import OTLP, ColumnarTraceBuilder, OtlpReader
from tracetochain.readers.otlp._spans import (
    OtlpOptions,
    SpanError,
    SpanFacts,
    SpanTrace,
    parse_otlp_options,
    span_from_proto,
    spans_of_export_request,
    spans_of_json_document,
)
from tracetochain.readers.otlp._values import load_verdicts as load_verdicts
from tracetochain.readers.otlp._values import norm_id as norm_id

# OUTCOME_SOURCES, UNLABELLED, load_verdicts and norm_id are re-exported for the serve package and the tests,
# not for users (they are not in __all__).
__all__ = ["NO_OUTCOME_MESSAGE", "OTLP", "STATE_ATTRIBUTE", "ColumnarTraceBuilder", "OtlpOptions", "OtlpReader",
           "SpanError", "SpanFacts", "SpanTrace", "emit_trace", "parse_otlp_options", "span_from_proto",
           "spans_of_export_request", "spans_of_json_document"]
