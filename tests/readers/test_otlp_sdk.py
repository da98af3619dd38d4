"""The OTLP reader on spans written by the real producer: ``opentelemetry-sdk`` with the GenAI semantic-convention
attributes, exported (1) by the SDK's OTLP encoder as ``ExportTraceServiceRequest`` JSON — what an OTLP/HTTP JSON
receiver or the Collector's file exporter stores — and (2) by the SDK's ``ConsoleSpanExporter`` (one JSON object
per span). Nothing here is hand-written JSON: the spans are made with the tracer API and serialised by the SDK."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tracetochain.readers import detect_format, read_traces

pytest.importorskip("opentelemetry.sdk", reason="the SDK is in the test extra (tracetochain[instrument])")

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

#: (task, passed, tool calls: (tool name, fails)) per episode; the agent makes one chat call per tool call.
EPISODES = [
    ("refund-1", True, [("get_order", False), ("refund_order", False)]),
    ("refund-2", False, [("get_order", True), ("get_order", False), ("refund_order", True)]),
    ("lookup-7", True, [("search_flights", False)]),
    ("lookup-8", False, []),  # the agent answered without any tool call: one chat step
]


def produce() -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "support-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("agent", "1.0")
    for task, passed, calls in EPISODES:
        with tracer.start_as_current_span("invoke_agent support", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support", "task.id": task}) as root:
            for tool, fails in calls:
                with tracer.start_as_current_span("chat gpt-4o", attributes={
                        "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
                        "gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 12}):
                    pass
                with tracer.start_as_current_span(f"execute_tool {tool}", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}) as span:
                    if fails:
                        span.set_attribute("error.type", "TimeoutError")
                        span.set_status(Status(StatusCode.ERROR, "upstream timed out"))
            with tracer.start_as_current_span("chat gpt-4o", attributes={
                    "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
                    "gen_ai.usage.input_tokens": 200, "gen_ai.usage.output_tokens": 30}):
                pass
            root.add_event("gen_ai.evaluation.result", attributes={
                "gen_ai.evaluation.name": "task_success", "gen_ai.evaluation.score.label": "pass" if passed else "fail",
                "gen_ai.evaluation.score.value": 1.0 if passed else 0.0})
    provider.shutdown()
    return list(exporter.get_finished_spans())


@pytest.fixture(scope="module")
def spans() -> list[ReadableSpan]:
    return produce()


def expected_steps(calls: list[tuple[str, bool]]) -> list[tuple[str, str | None, bool]]:
    steps: list[tuple[str, str | None, bool]] = []
    for tool, fails in calls:
        steps += [("llm", None, False), ("tool", tool, fails)]
    return [*steps, ("llm", None, False)]


def check(table: Any) -> None:
    assert table.report.format == "otlp" and table.report.n_traces_skipped == 0
    assert table.n_traces == len(EPISODES)
    assert table.outcome_counts() == {"success": 2, "failure": 2, "censored": 0, "invalid": 0}
    rows = table.to_arrow().to_pylist()
    by_task: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_task.setdefault(r["task_id"], []).append(r)
    for task, _passed, calls in EPISODES:
        got = [(r["step_kind"], r.get("tool_name"), bool(r["error"])) for r in sorted(by_task[task],
                                                                                     key=lambda r: r["step_idx"])]
        assert got == expected_steps(calls), task
    failed = [r for r in rows if r["error"]]
    assert failed and all(r["error_type"] == "TimeoutError" for r in failed)
    chats = [r for r in rows if r["step_kind"] == "llm"]
    assert all(r["tokens_in"] in (120, 200) for r in chats)


def test_otlp_json_request_from_the_sdk_encoder(spans: list[ReadableSpan], tmp_path: Path) -> None:
    """The SDK's OTLP encoder (the one its OTLP/HTTP exporter sends) → ExportTraceServiceRequest as JSON, one
    request per line as a receiver stores them."""
    path = tmp_path / "spans.jsonl"
    half = len(spans) // 2  # two export batches, as a batching processor would send them
    lines = [json.dumps(MessageToDict(encode_spans(batch))) for batch in (spans[:half], spans[half:])]
    path.write_text("\n".join(lines) + "\n")
    assert detect_format(path) == "otlp"
    check(read_traces(path, task_attribute="task.id"))


def test_console_exporter_json_from_the_sdk(spans: list[ReadableSpan], tmp_path: Path) -> None:
    """The SDK's ``ConsoleSpanExporter`` writes ``span.to_json()`` for each span, one after the other."""
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    path = tmp_path / "console.json"
    with path.open("w") as out:
        exporter = ConsoleSpanExporter(out=out)
        exporter.export(spans)
        exporter.shutdown()
    assert detect_format(path) == "otlp"
    check(read_traces(path, task_attribute="task.id"))
