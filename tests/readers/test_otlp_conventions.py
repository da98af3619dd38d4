"""The OpenTelemetry GenAI conventions as they are now (still "Development"; moved to
open-telemetry/semantic-conventions-genai): every well-known `gen_ai.operation.name` value (the SDK's own enum, and
the registry's newer `plan` and memory operations), `gen_ai.agent.invocation.status` — spans written with the SDK and
its own attribute constants where the installed opentelemetry-semantic-conventions has them; names the conventions
do not publish (`handle_conversation_turn`, `gen_ai.invocation.internal`) are not read; one outcome rule per
episode."""

from __future__ import annotations

import base64
import dataclasses
import json
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the instrument extra is not installed")
pytest.importorskip("opentelemetry.exporter.otlp.proto.common", reason="the serve extra is not installed")

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as ga

from tracetochain.readers.otlp import OTLP, SpanTrace, emit_trace, parse_otlp_options, spans_of_export_request
from tracetochain.serve._ingest import _Collector

Op = ga.GenAiOperationNameValues
OP = ga.GEN_AI_OPERATION_NAME
# The SDK's own constants where this version has them; the newer well-known values otherwise.
PLAN = getattr(Op, "PLAN", None)
PLAN_VALUE = PLAN.value if PLAN is not None else "plan"
INVOKE_WORKFLOW = Op.INVOKE_WORKFLOW.value if hasattr(Op, "INVOKE_WORKFLOW") else "invoke_workflow"
SEARCH_MEMORY = getattr(Op, "SEARCH_MEMORY", None)
SEARCH_MEMORY_VALUE = SEARCH_MEMORY.value if SEARCH_MEMORY is not None else "search_memory"
UPDATE_MEMORY_VALUE = getattr(getattr(Op, "UPDATE_MEMORY", None), "value", "update_memory")
INVOCATION_STATUS = getattr(ga, "GEN_AI_AGENT_INVOCATION_STATUS", "gen_ai.agent.invocation.status")
#: The registry's well-known operation values (open-telemetry/semantic-conventions-genai, model/gen-ai/registry.yaml
#: and its memory-operation spans) and the step kind each is read as.
PUBLISHED_OPERATIONS = {
    "chat": "llm", "generate_content": "llm", "text_completion": "llm", "plan": "llm",
    "embeddings": "retrieval", "retrieval": "retrieval", "search_memory": "retrieval",
    "create_agent": "agent", "invoke_agent": "agent", "invoke_workflow": "agent",
    "execute_tool": "tool", "create_memory": "tool", "update_memory": "tool", "upsert_memory": "tool",
    "delete_memory": "tool", "create_memory_store": "tool", "delete_memory_store": "tool",
}
EVAL = "gen_ai.evaluation.result"


def record(fn) -> list:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    fn(provider.get_tracer("test"))
    provider.shutdown()
    return list(exporter.get_finished_spans())


def to_file(spans, path: Path) -> Path:
    doc = MessageToDict(encode_spans(spans))
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for s in ss["spans"]:
                for k in ("traceId", "spanId", "parentSpanId"):
                    if k in s:
                        s[k] = base64.b64decode(s[k]).hex()
    path.write_text(json.dumps(doc) + "\n")
    return path


def live_records(spans, **options) -> list[dict]:
    """The live receiver's path: protobuf request → span facts → the same emit_trace."""
    opts = parse_otlp_options(**options)
    by_trace: dict[str, SpanTrace] = {}
    for tid, span in spans_of_export_request(encode_spans(spans), opts):
        by_trace.setdefault(tid, SpanTrace(tid, 0)).spans[span.sid] = span
    out: list[dict] = []
    for tr in by_trace.values():
        c = _Collector()
        emit_trace(tr, opts, c)
        out += c.records
    return out


def agent(tracer, *, status: str | None = None, label: str | None = "pass", op: str = Op.INVOKE_AGENT.value,
          extra: dict | None = None) -> None:
    attrs = {OP: op, ga.GEN_AI_AGENT_NAME: "planner", **(extra or {})}
    if status is not None:
        attrs[INVOCATION_STATUS] = status
    with tracer.start_as_current_span(f"{op} planner", attributes=attrs) as root:
        with tracer.start_as_current_span("plan", attributes={OP: PLAN_VALUE}):
            pass
        with tracer.start_as_current_span("search_memory notes", attributes={OP: SEARCH_MEMORY_VALUE}):
            pass
        with tracer.start_as_current_span("execute_tool sql", attributes={OP: Op.EXECUTE_TOOL.value,
                                                                          ga.GEN_AI_TOOL_NAME: "sql"}):
            pass
        with tracer.start_as_current_span("update_memory notes", attributes={OP: UPDATE_MEMORY_VALUE}):
            pass
        if label is not None:
            root.add_event(EVAL, {"gen_ai.evaluation.name": "task", "gen_ai.evaluation.score.label": label})


def test_new_operations_map_to_steps(tmp_path: Path) -> None:
    spans = record(lambda t: agent(t))
    table = OTLP.read(to_file(spans, tmp_path / "t.jsonl"))
    rows = table.to_arrow().to_pylist()
    assert [(r["step_kind"], r.get("tool_name")) for r in rows] == [
        ("llm", None), ("retrieval", None), ("tool", "sql"), ("tool", UPDATE_MEMORY_VALUE)]
    assert set(table.state_labels()[1]) == {"llm", "retrieval", "tool:sql", "tool:update_memory"}
    assert {r["outcome"] for r in rows} == {"success"}
    assert table.report.outcome_sources == {"evaluation": 1}
    # The live receiver's decoding gives the same steps.
    live = live_records(spans)
    assert [(r["step_kind"], r.get("tool_name")) for r in live] == [
        (r["step_kind"], r.get("tool_name")) for r in rows]


@pytest.mark.parametrize("status", ["max_turns_exceeded", "budget_exceeded", "timeout", "max_iterations"])
def test_budget_invocation_status_censors(tmp_path: Path, status: str) -> None:
    spans = record(lambda t: agent(t, status=status))
    rows = OTLP.read(to_file(spans, tmp_path / "t.jsonl")).to_arrow().to_pylist()
    assert {r["outcome"] for r in rows} == {"censored"}  # a budget cut-off stays censored whatever the verdict
    assert {r["termination_reason"] for r in rows} == {status}


@pytest.mark.parametrize("status", ["completed", "failed"])
def test_invocation_status_is_no_outcome(tmp_path: Path, status: str) -> None:
    spans = record(lambda t: agent(t, status=status, label=None))
    path = to_file(spans, tmp_path / "t.jsonl")
    t = OTLP.read(path, on_error="skip")
    assert t.n_traces == 0 and t.report.n_traces_skipped == 1  # "completed" says nothing about the task
    kept = OTLP.read(path, unlabelled="keep").to_arrow().to_pylist()
    assert {(r["outcome"], r["termination_reason"]) for r in kept} == {("censored", "unlabelled")}


def test_every_published_operation_is_mapped() -> None:
    """Each value of the SDK's own GenAiOperationNameValues, and each newer registry value, has its kind; nothing
    unpublished is read as a well-known operation."""
    from tracetochain.readers.otlp._conventions import _AGENT_ROOT_OPS, _OP_KIND

    sdk = {m.value for m in Op}
    assert sdk <= set(PUBLISHED_OPERATIONS)  # the installed SDK knows no value the registry lacks
    assert _OP_KIND == PUBLISHED_OPERATIONS
    assert _AGENT_ROOT_OPS == {Op.INVOKE_AGENT.value, INVOKE_WORKFLOW}


@pytest.mark.parametrize("op", [INVOKE_WORKFLOW, Op.INVOKE_AGENT.value])
def test_workflow_and_agent_invocations_are_episode_roots(tmp_path: Path, op: str) -> None:
    def two(t) -> None:
        with t.start_as_current_span("session"):
            agent(t, op=op)
            agent(t, op=op, label="fail")

    rows = OTLP.read(to_file(record(two), tmp_path / "t.jsonl"), episode="agent").to_arrow().to_pylist()
    by_episode: dict[str, set] = {}
    for r in rows:
        by_episode.setdefault(r["trace_id"], set()).add(r["outcome"])
    assert sorted(map(sorted, by_episode.values())) == [["failure"], ["success"]]


def test_unpublished_names_are_not_read(tmp_path: Path) -> None:
    """`handle_conversation_turn` is no published operation (no episode root, no agent kind) and
    `gen_ai.invocation.internal` no published attribute (an in-process agent is an episode like any other; in the
    conventions "internal" is the span kind of an in-process invoke_agent span)."""
    def run(t) -> None:
        with t.start_as_current_span("session"):
            agent(t, extra={"gen_ai.invocation.internal": True})
            agent(t)

    rows = OTLP.read(to_file(record(run), tmp_path / "t.jsonl"), episode="agent").to_arrow().to_pylist()
    assert len({r["trace_id"] for r in rows}) == 2

    def turn(t) -> None:
        with t.start_as_current_span("session"):
            agent(t, op="handle_conversation_turn")

    table = OTLP.read(to_file(record(turn), tmp_path / "u.jsonl"), episode="agent", on_error="skip")
    assert table.n_traces == 0 and table.report.n_traces_skipped == 1


# ------------------------------------------------------------------------------------------------ one rule
def test_outcome_sources_merge_in_one_order(tmp_path: Path) -> None:
    """verdict file > outcome attribute > evaluation events > posted verdicts, per episode."""
    def run(t) -> None:
        for i in range(4):
            attrs = {OP: Op.INVOKE_AGENT.value}
            if i in (0, 1):
                attrs["task.passed"] = i == 1  # episodes 0 and 1 carry the attribute
            with t.start_as_current_span(f"agent {i}", attributes=attrs) as root:
                with t.start_as_current_span("tool", attributes={OP: Op.EXECUTE_TOOL.value,
                                                                  ga.GEN_AI_TOOL_NAME: "x"}):
                    pass
                if i in (1, 2):
                    root.add_event(EVAL, {"gen_ai.evaluation.score.label": "fail"})

    spans = record(run)
    path = to_file(spans, tmp_path / "t.jsonl")
    tids = sorted({format(s.context.trace_id, "032x") for s in spans},
                  key=lambda x: next(s.start_time for s in spans if format(s.context.trace_id, "032x") == x))
    verdicts = tmp_path / "v.json"
    verdicts.write_text(json.dumps({tids[0]: "success"}))
    t = OTLP.read(path, verdicts=verdicts, outcome_attribute="task.passed", on_error="skip")
    got = {r["trace_id"]: r["outcome"] for r in t.to_arrow().to_pylist()}
    # 0: the file (success) beats its attribute (false); 1: the attribute (true) beats its evaluation (fail);
    # 2: its evaluation; 3: nothing, skipped (offline there are no posted verdicts).
    assert got == {tids[0]: "success", tids[1]: "success", tids[2]: "failure"}
    assert t.report.outcome_sources == {"verdict_file": 1, "attribute": 1, "evaluation": 1}
    assert t.report.n_traces_skipped == 1
    assert "outcomes from: 1 verdict file, 1 attribute, 1 evaluation" in str(t.report)
    # Live: a posted verdict is the last source — it labels episode 3, and never overrides episode 2's evaluation.
    opts = parse_otlp_options(outcome_attribute="task.passed")
    posted = dataclasses.replace(opts, posted={tids[2]: "success", tids[3]: "success"})
    by_trace: dict[str, SpanTrace] = {}
    for tid, span in spans_of_export_request(encode_spans(spans), posted):
        by_trace.setdefault(tid, SpanTrace(tid, 0)).spans[span.sid] = span
    c = _Collector()
    for tr in by_trace.values():
        emit_trace(tr, posted, c)
    live = {r["trace_id"]: r["outcome"] for r in c.records}
    assert live == {tids[0]: "failure", tids[1]: "success", tids[2]: "failure", tids[3]: "success"}
    assert c.outcome_sources == {"attribute": 2, "evaluation": 1, "posted": 1}
