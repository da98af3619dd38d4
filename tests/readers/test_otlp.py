"""OTLP / console-span reader: nesting, tool calls per turn, errors, outcomes, episode roots, verdicts, streaming.

The edge cases here are built by hand; ``test_otlp_sdk.py`` reads spans written by the real producer
(``opentelemetry-sdk``'s OTLP encoder and console exporter).
"""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path
from typing import Any

import pytest

import tracetochain as tt
from tracetochain.exceptions import TraceValidationError
from tracetochain.readers._registry import detect_format
from tracetochain.readers.otlp import NO_OUTCOME_MESSAGE, OTLP, norm_id

DATA = Path(__file__).resolve().parents[1] / "data" / "readers" / "otlp"
LANGFUSE_DATA = Path(__file__).resolve().parents[1] / "data" / "readers" / "langfuse"
A = "a3f1c2d4e5b60718293a4b5c6d7e8f90"
B = "b0b1b2b3b4b5b6b7b8b9babbbcbdbebf"
C = "c0ffee00c0ffee00c0ffee00c0ffee00"
T0 = 1767000000.0


# ------------------------------------------------------------------------------------------- helpers
def _av(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    return {"stringValue": v}


def span(tid: str, sid: str, parent: str | None, t0: float, attrs: dict[str, Any] | None = None, *,
         name: str = "s", status: dict[str, Any] | None = None, events: list[dict[str, Any]] | None = None,
         dur: float = 0.5) -> dict[str, Any]:
    s: dict[str, Any] = {
        "traceId": tid, "spanId": sid, "parentSpanId": parent or "", "name": name, "kind": 1,
        "startTimeUnixNano": str(int((T0 + t0) * 1e9)), "endTimeUnixNano": str(int((T0 + t0 + dur) * 1e9)),
        "attributes": [{"key": k, "value": _av(v)} for k, v in (attrs or {}).items()], "status": status or {},
    }
    if events:
        s["events"] = events
    return s


def evaluation(label: str | None = None, value: float | None = None, name: str = "task_success") -> dict[str, Any]:
    attrs: dict[str, Any] = {"gen_ai.evaluation.name": name}
    if label is not None:
        attrs["gen_ai.evaluation.score.label"] = label
    if value is not None:
        attrs["gen_ai.evaluation.score.value"] = value
    return {"name": "gen_ai.evaluation.result", "timeUnixNano": "1",
            "attributes": [{"key": k, "value": _av(v)} for k, v in attrs.items()]}


def doc(spans: list[dict[str, Any]], resource: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"resourceSpans": [{"resource": {"attributes": [{"key": k, "value": _av(v)}
                                                           for k, v in (resource or {}).items()]},
                               "scopeSpans": [{"scope": {"name": "t"}, "spans": spans}]}]}


def write_lines(path: Path, docs: list[Any]) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path


def agent_trace(tid: str, *, label: str | None = "pass", extra_root: dict[str, Any] | None = None,
                root_status: dict[str, Any] | None = None, t: float = 0.0) -> list[dict[str, Any]]:
    """A minimal agent trace: invoke_agent → chat (leaf) + execute_tool (leaf)."""
    root = tid[:16]
    return [
        span(tid, root, None, t, {"gen_ai.operation.name": "invoke_agent", **(extra_root or {})},
             status=root_status, events=[evaluation(label)] if label else None, dur=5),
        span(tid, tid[16:28] + "0001", root, t + 1, {"gen_ai.operation.name": "chat"}),
        span(tid, tid[16:28] + "0002", root, t + 2, {"gen_ai.operation.name": "execute_tool",
                                                     "gen_ai.tool.name": "search"}),
    ]


def rows(table: tt.TraceTable, trace_id: str) -> list[dict[str, Any]]:
    return [r for r in table.to_arrow().to_pylist() if r["trace_id"] == trace_id]


# ------------------------------------------------------------------------------------------- collector fixture
def test_nesting_and_two_tool_calls_per_llm_span() -> None:
    t = OTLP.read(DATA / "collector.jsonl", on_error="skip", task_attribute="task.id", trial_attribute="trial")
    a = rows(t, A)
    # chat1 has two execute_tool children (same start: ordered by span id), chat2/chat3 one each, chat4 is a leaf.
    assert [(r["step_kind"], r.get("tool_name")) for r in a] == [
        ("tool", "lookup_order"), ("tool", "check_policy"), ("tool", "issue_refund"), ("tool", "issue_refund"),
        ("llm", None)]
    assert [r["step_idx"] for r in a] == [0, 1, 2, 3, 4]
    assert a[0]["t_start"] == pytest.approx(T0 + 1.6) and a[1]["t_start"] == a[0]["t_start"]
    assert a[0]["text"] == '{"order_id": "A7"}'
    assert a[4]["tokens_in"] == 1020 and a[4]["tokens_out"] == 41 and "refund" in a[4]["text"]
    # A chat span whose tool calls are its children is no step: its usage goes to its first step below.
    assert [(r.get("tokens_in"), r.get("tokens_out")) for r in a[:4]] == [(812, 64), (None, None), (950, 30),
                                                                          (990, 28)]
    assert {(r["task_id"], r["trial"], r["outcome"], r["reward"]) for r in a} == {("retail-17", 2, "success", 1.0)}
    # No wrapper span (invoke_agent, chat with tool children) became a step.
    assert t.n_steps == 7


def test_handled_and_unhandled_errors() -> None:
    t = OTLP.read(DATA / "collector.jsonl", on_error="skip")
    a = rows(t, A)
    # Handled: the first issue_refund timed out (its own status ERROR + error.type), the retry worked, the episode
    # succeeded; nothing else is marked.
    assert [r["error"] for r in a] == [False, False, True, False, False]
    assert a[2]["error_type"] == "timeout"
    assert a[0]["outcome"] == "success"
    # Unhandled: the root invoke_agent span is ERROR too, but that marks none of its children; the outcome comes from
    # the evaluation event (label "fail"), not from the root status.
    b = rows(t, B)
    assert [(r["step_kind"], r["error"]) for r in b] == [("retrieval", False), ("tool", True)]
    assert b[1]["error_type"] == "PermissionError"  # from the exception event ("STATUS_CODE_ERROR" status)
    assert {r["outcome"] for r in b} == {"failure"} and b[0]["reward"] == 0.0


def test_base64_ids_are_normalised_to_hex() -> None:
    t = OTLP.read(DATA / "collector.jsonl", on_error="skip")
    assert B in t.trace_ids  # written as base64 in the file
    assert norm_id(base64.b64encode(bytes.fromhex(B)).decode()) == B
    assert norm_id("0x" + B.upper()) == B
    assert norm_id("") is None and norm_id("0" * 32) is None
    with pytest.raises(ValueError):
        norm_id(12)


def test_missing_outcome_raises_and_says_status_is_not_used() -> None:
    with pytest.raises(TraceValidationError) as info:
        OTLP.read(DATA / "collector.jsonl")
    msg = str(info.value)
    assert NO_OUTCOME_MESSAGE in msg
    assert "OTLP spans carry no task outcome; span status is not success — pass outcome_attribute= or verdicts=" \
        in msg
    assert C in msg and info.value.line == 2 and info.value.field == "outcome"


def test_missing_outcome_skipped_and_counted() -> None:
    t = OTLP.read(DATA / "collector.jsonl", on_error="skip")
    assert sorted(t.trace_ids) == sorted([A, B])
    assert t.report.n_traces_skipped == 1
    assert t.report.skipped_by_reason == {NO_OUTCOME_MESSAGE: 1}


@pytest.mark.parametrize("status", [{"code": 1}, {"code": "STATUS_CODE_OK"}, {}, {"code": 2}])
def test_span_status_never_gives_an_outcome(tmp_path: Path, status: dict[str, Any]) -> None:
    path = write_lines(tmp_path / "t.jsonl", [doc(agent_trace(A, label=None, root_status=status))])
    with pytest.raises(TraceValidationError, match="span status is not success"):
        OTLP.read(path)


# ------------------------------------------------------------------------------------------- verdicts
def test_verdict_join_json() -> None:
    t = OTLP.read(DATA / "collector.jsonl", verdicts=DATA / "verdicts.json")
    # Only the verdict file is used: it overrides A's own evaluation, and fills C which had none.
    assert {r["trace_id"]: (r["outcome"], r["reward"]) for r in t.to_arrow().to_pylist()} == {
        A: ("failure", 0.0), B: ("success", 1.0), C: ("failure", 0.5)}


def test_verdict_join_csv_and_phoenix_rows() -> None:
    t = OTLP.read(DATA / "phoenix_spans.jsonl", verdicts=DATA / "verdicts.csv")
    r = t.to_arrow().to_pylist()
    assert [(x["step_kind"], x.get("tool_name"), x["error"]) for x in r] == [
        ("tool", "lookup_order", True), ("llm", None, False)]
    assert {x["outcome"] for x in r} == {"success"}


def test_verdict_missing_for_an_episode(tmp_path: Path) -> None:
    v = tmp_path / "v.json"
    v.write_text(json.dumps({A: "pass"}))
    with pytest.raises(TraceValidationError, match="no verdict for this episode"):
        OTLP.read(DATA / "collector.jsonl", verdicts=v)
    t = OTLP.read(DATA / "collector.jsonl", verdicts=v, on_error="skip")
    # One rule per episode: A from the file, B from its own evaluation event, C has no source at all.
    assert sorted(t.trace_ids) == sorted([A, B]) and t.report.n_traces_skipped == 1
    assert t.report.outcome_sources == {"verdict_file": 1, "evaluation": 1}
    assert t.report.to_dict()["outcome_sources"] == {"verdict_file": 1, "evaluation": 1}


def test_verdict_rows_and_agent_episode_ids(tmp_path: Path) -> None:
    v = tmp_path / "v.jsonl"
    v.write_text('{"episode_id": "d000000000000011", "outcome": "censored"}\n'
                 '{"span_id": "D00DD00DD00DD00DD00DD00DD00DD00D:D000000000000021", "score": 0.2}\n')
    t = OTLP.read(DATA / "multi_task.jsonl", episode="agent", verdicts=v, success_threshold=0.1)
    got = {r["trace_id"].split(":")[1]: (r["outcome"], r.get("reward")) for r in t.to_arrow().to_pylist()}
    assert got == {"d000000000000011": ("censored", None), "d000000000000021": ("success", 0.2)}


def test_bad_verdict_files(tmp_path: Path) -> None:
    v = tmp_path / "v.json"
    v.write_text(json.dumps([{"trace_id": A, "outcome": "x"}, {"trace_id": A, "outcome": "y"}]))
    with pytest.raises(TraceValidationError, match="appears twice"):
        OTLP.read(DATA / "collector.jsonl", verdicts=v)
    v.write_text(json.dumps([{"outcome": "pass"}]))
    with pytest.raises(TraceValidationError, match="row has no id"):
        OTLP.read(DATA / "collector.jsonl", verdicts=v)
    v.write_text(json.dumps({A: {"comment": "nothing"}}))
    with pytest.raises(TraceValidationError, match="has no outcome"):
        OTLP.read(DATA / "collector.jsonl", verdicts=v)
    with pytest.raises(TraceValidationError, match="verdict file not found"):
        OTLP.read(DATA / "collector.jsonl", verdicts=tmp_path / "nope.json")
    v.write_text(json.dumps({A: "maybe", B: 1, C: 0}))
    with pytest.raises(TraceValidationError, match="success_values"):
        OTLP.read(DATA / "collector.jsonl", verdicts=v)
    t = OTLP.read(DATA / "collector.jsonl", verdicts=v, success_values="maybe")
    assert t.outcome_counts()["success"] == 2  # A ("maybe") and B (1 ≥ threshold)


# ------------------------------------------------------------------------------------------- episode roots
def test_episode_agent_and_span_name() -> None:
    for episode, first in (("agent", "d000000000000011"), ("span:task", "d000000000000010")):
        t = OTLP.read(DATA / "multi_task.jsonl", episode=episode, task_attribute="task.id")
        assert t.n_traces == 2, episode
        by = {r["trace_id"]: r for r in t.to_arrow().to_pylist()}
        ep1 = f"d00dd00dd00dd00dd00dd00dd00dd00d:{first}"
        assert by[ep1]["outcome"] == "success" and by[ep1]["task_id"] == "airline-1"
        assert t.outcome_counts()["failure"] == 1
        # The trace without such a span gives no episode: counted, never raised.
        assert t.report.n_traces_skipped == 1
    t = OTLP.read(DATA / "multi_task.jsonl", episode="agent")
    second = rows(t, "d00dd00dd00dd00dd00dd00dd00dd00d:d000000000000021")
    assert [r["step_kind"] for r in second] == ["llm", "tool", "llm"]
    assert {r["termination_reason"] for r in second} == {"completed"}


def test_episode_trace_with_disagreeing_evaluations() -> None:
    with pytest.raises(TraceValidationError, match="disagree"):
        OTLP.read(DATA / "multi_task.jsonl")
    t = OTLP.read(DATA / "multi_task.jsonl", on_error="skip")
    assert t.trace_ids == ["e00ee00ee00ee00ee00ee00ee00ee00e"]


def test_bad_episode_option() -> None:
    for bad in ("span:", "agents", 3):
        with pytest.raises(ValueError, match="episode"):
            OTLP.read(DATA / "multi_task.jsonl", episode=bad)


# ------------------------------------------------------------------------------------------- other shapes
def test_console_span_exporter_output() -> None:
    with pytest.raises(TraceValidationError, match="span status is not success"):
        OTLP.read(DATA / "console.json")
    t = OTLP.read(DATA / "console.json", outcome_attribute="my.verdict", task_attribute="task.id",
                  trial_attribute="trial")
    r = t.to_arrow().to_pylist()
    assert t.trace_ids == ["5b8aa5a2d2c872e8321cf37308d69df2"]
    assert [(x["step_kind"], x.get("tool_name"), x["error"], x.get("error_type")) for x in r] == [
        ("tool", "get_weather", True, "HTTPError"), ("tool", "get_weather", False, None), ("llm", None, False, None)]
    assert r[0]["t_start"] == pytest.approx(T0 + 1.0)
    assert {(x["outcome"], x["task_id"], x["trial"]) for x in r} == {("success", "weather-3", 1)}
    # Resource attributes are the last place a user-named attribute is looked for.
    t = OTLP.read(DATA / "console.json", outcome_attribute="my.verdict", task_attribute="deployment.run")
    assert t.to_arrow().column("task_id").to_pylist() == ["run-7"] * 3


def test_openinference_attributes() -> None:
    t = OTLP.read(DATA / "openinference.jsonl", task_attribute="metadata.task_id", trial_attribute="metadata.trial")
    g = rows(t, "0123456789abcdef0123456789abcdef")
    # The RETRIEVER span wraps an EMBEDDING span: the leaf one is the step. CHAIN/AGENT spans are wrappers.
    assert [(r["step_kind"], r.get("tool_name")) for r in g] == [
        ("retrieval", None), ("llm", None), ("tool", "web_search"), ("llm", None)]
    assert g[1]["tokens_in"] == 100 and g[1]["tokens_out"] == 20 and g[1]["cost_usd"] == pytest.approx(0.002)
    assert g[2]["text"] == '{"q": "Lisbon"}' and g[1]["text"] == "I will search."
    assert {(r["outcome"], r["reward"], r["task_id"], r["trial"]) for r in g} == {("success", 1.0, "qa-3", 1)}
    h = rows(t, "fedcba9876543210fedcba9876543210")  # outcome from trace.evaluations.0.*
    assert {(r["outcome"], r["task_id"]) for r in h} == {("failure", "qa-4")}
    assert [r["error"] for r in h] == [False, True]


def test_concatenated_pretty_values_array_and_single_document(tmp_path: Path) -> None:
    spans = agent_trace(A)
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps(doc(spans), indent=2) + "\n")
    array = tmp_path / "array.json"
    array.write_text(json.dumps([doc(spans[:1]), doc(spans[1:])], indent=1))
    concat = tmp_path / "concat.json"
    concat.write_text(json.dumps(doc(spans[:2])) + json.dumps(doc(spans[2:])) + "\n")  # "}{" on one line
    bare = write_lines(tmp_path / "bare.jsonl", spans)  # bare OTLP span objects, one per line
    for path in (pretty, array, concat, bare):
        t = OTLP.read(path)
        assert (t.n_traces, t.n_steps) == (1, 2), path.name
        assert t.to_arrow().column("step_kind").to_pylist() == ["llm", "tool"]


def test_snake_case_keys_and_kvlist_attribute(tmp_path: Path) -> None:
    s = agent_trace(A)
    snake = []
    for x in s:
        snake.append({"trace_id": x["traceId"], "span_id": x["spanId"], "parent_span_id": x["parentSpanId"],
                      "name": x["name"], "start_time_unix_nano": int(x["startTimeUnixNano"]),
                      "attributes": x["attributes"], "events": x.get("events", [])})
    snake[0]["attributes"].append({"key": "run", "value": {"kvlistValue": {"values": [
        {"key": "task", "value": {"stringValue": "T9"}}, {"key": "rep", "value": {"intValue": "3"}}]}}})
    path = write_lines(tmp_path / "s.jsonl", [{"resource_spans": [{"scope_spans": [{"spans": snake}]}]}])
    t = OTLP.read(path, task_attribute="run.task", trial_attribute="run.rep")
    assert (t.n_steps, t.to_arrow().column("task_id")[0].as_py(), t.to_arrow().column("trial")[0].as_py()) == \
        (2, "T9", 3)


# ------------------------------------------------------------------------------------------- outcome sources
def test_outcome_attribute_threshold_and_success_values(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "t.jsonl", [doc(agent_trace(A, label=None, extra_root={"score": 0.7}) +
                                                  agent_trace(B, label=None, extra_root={"grade": "B"}, t=10))])
    t = OTLP.read(path, outcome_attribute="score", on_error="skip")
    assert t.trace_ids == [A] and t.outcome_counts()["failure"] == 1  # 0.7 < 1 − 1e−6
    assert t.report.n_traces_skipped == 1  # B has no "score"
    t = OTLP.read(path, outcome_attribute="score", success_threshold=0.5, on_error="skip")
    assert t.outcome_counts()["success"] == 1 and t.to_arrow().column("reward")[0].as_py() == 0.7
    t = OTLP.read(path, outcome_attribute="grade", on_error="skip")  # A: no grade; B: "B" means nothing yet
    assert t.n_traces == 0 and t.report.n_traces_skipped == 2
    assert any("success_values" in p.message for p in t.report.problems)
    t = OTLP.read(path, outcome_attribute="grade", success_values=["a", "b"], on_error="skip")
    assert t.trace_ids == [B] and t.outcome_counts()["success"] == 1


def test_evaluation_name_selects_one_of_several(tmp_path: Path) -> None:
    spans = agent_trace(A, label=None)
    spans[0]["events"] = [evaluation("fail", name="politeness"), evaluation(value=1.0, name="task_success")]
    path = write_lines(tmp_path / "t.jsonl", [doc(spans)])
    with pytest.raises(TraceValidationError, match="several evaluations"):
        OTLP.read(path)
    t = OTLP.read(path, evaluation_name="task_success")
    assert t.outcome_counts()["success"] == 1 and t.to_arrow().column("reward")[0].as_py() == 1.0
    t = OTLP.read(path, evaluation_name="politeness")
    assert t.outcome_counts()["failure"] == 1
    with pytest.raises(TraceValidationError, match="no evaluation named"):
        OTLP.read(path, evaluation_name="nope")


def test_evaluation_nearest_the_root_wins(tmp_path: Path) -> None:
    spans = agent_trace(A, label="pass")
    spans[1]["events"] = [evaluation("fail")]  # on the chat span, deeper than the root's
    t = OTLP.read(write_lines(tmp_path / "t.jsonl", [doc(spans)]))
    assert t.outcome_counts()["success"] == 1


def test_budget_finish_reason_is_censored(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "t.jsonl", [doc(agent_trace(
        A, label="fail", extra_root={"gen_ai.agent.finish_reason": "max_iterations"}))])
    t = OTLP.read(path)
    assert t.outcome_counts()["censored"] == 1
    assert t.to_arrow().column("termination_reason")[0].as_py() == "max_iterations"


def test_trial_must_be_an_integer(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "t.jsonl", [doc(agent_trace(A, extra_root={"trial": "second"}))])
    with pytest.raises(TraceValidationError, match="not an integer") as info:
        OTLP.read(path, trial_attribute="trial")
    assert info.value.field == "trial"


# ------------------------------------------------------------------------------------------- structure edge cases
def test_episode_without_steps_is_kept_as_a_zero_step_trial(tmp_path: Path) -> None:
    only_agent = [span(B, "b1b1b1b1b1b1b1b1", None, 0, {"gen_ai.operation.name": "invoke_agent"},
                       events=[evaluation("pass")]),
                  span(B, "b1b1b1b1b1b1b1b2", "b1b1b1b1b1b1b1b1", 1, {"gen_ai.operation.name": "guard_check"})]
    t = OTLP.read(write_lines(tmp_path / "t.jsonl", [doc(agent_trace(A) + only_agent)]))
    assert t.trace_ids == [A] and t.report.n_traces_skipped == 0
    assert [(z["trace_id"], z["outcome"]) for z in t.report.zero_step] == [(B, "success")]


def test_unknown_operation_is_other_and_never_a_step(tmp_path: Path) -> None:
    spans = agent_trace(A)
    spans.append(span(A, "ffff000000000001", spans[0]["spanId"], 3, {"gen_ai.operation.name": "guard_check"}))
    t = OTLP.read(write_lines(tmp_path / "t.jsonl", [doc(spans)]))
    assert t.to_arrow().column("step_kind").to_pylist() == ["llm", "tool"]


def test_parent_cycle_is_reported(tmp_path: Path) -> None:
    chat = {"gen_ai.operation.name": "chat"}
    spans = [*agent_trace(A), span(A, "0000000000000e01", "0000000000000e02", 1, chat),
             span(A, "0000000000000e02", "0000000000000e01", 1, chat)]
    path = write_lines(tmp_path / "t.jsonl", [doc(spans)])
    with pytest.raises(TraceValidationError, match="cycle"):
        OTLP.read(path)
    assert OTLP.read(path, on_error="skip").report.n_traces_skipped == 1


def test_duplicate_span_keeps_first_and_missing_start_is_an_error(tmp_path: Path) -> None:
    spans = agent_trace(A)
    t = OTLP.read(write_lines(tmp_path / "t.jsonl", [doc(spans), doc(spans[1:])]))
    assert t.n_steps == 2
    del spans[2]["startTimeUnixNano"]
    with pytest.raises(TraceValidationError, match="no start time"):
        OTLP.read(write_lines(tmp_path / "u.jsonl", [doc(spans)]))


def test_include_text_false(tmp_path: Path) -> None:
    t = OTLP.read(DATA / "collector.jsonl", on_error="skip", include_text=False)
    assert "text" not in t.columns and "tool_name" in t.columns


# ------------------------------------------------------------------------------------------- malformed input
def test_invalid_json_line(tmp_path: Path) -> None:
    good = doc(agent_trace(A))
    other = doc(agent_trace(B, t=10))
    broken = json.dumps(other)[:-40] + "}"  # complete-looking line that is not JSON, mentioning trace B
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(good) + "\n" + broken + "\n")
    with pytest.raises(TraceValidationError, match="not valid JSON") as info:
        OTLP.read(path)
    assert info.value.line == 2
    t = OTLP.read(path, on_error="skip")
    assert t.trace_ids == [A]
    assert t.report.n_traces_skipped == 1  # B was in the bad line: dropped and counted


def test_truncated_last_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(doc(agent_trace(A))) + "\n" + json.dumps(doc(agent_trace(B, t=10)))[:300])
    with pytest.raises(TraceValidationError, match="not valid JSON") as info:
        OTLP.read(path)
    assert info.value.line == 2
    t = OTLP.read(path, on_error="skip")
    assert t.trace_ids == [A] and t.report.n_traces_skipped == 1


def test_truncated_line_followed_by_good_lines(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(doc(agent_trace(B)))[:300] + "\n" + json.dumps(doc(agent_trace(A, t=10))) + "\n")
    t = OTLP.read(path, on_error="skip")
    assert t.trace_ids == [A] and t.report.n_traces_skipped == 1


@pytest.mark.parametrize(("mutate", "field"), [
    (lambda d: d["resourceSpans"][0]["scopeSpans"][0]["spans"][1].update(traceId=7), "traceId"),
    (lambda d: d["resourceSpans"][0]["scopeSpans"][0]["spans"][1].update(attributes={"a": 1}), "attributes"),
    (lambda d: d["resourceSpans"][0]["scopeSpans"][0]["spans"][1].update(spanId=""), "spanId"),
    (lambda d: d["resourceSpans"][0]["scopeSpans"][0]["spans"][1].update(startTimeUnixNano="soon"),
     "startTimeUnixNano"),
    (lambda d: d["resourceSpans"][0]["scopeSpans"][0]["spans"][1].update(status="ERROR"), "status"),
    (lambda d: d["resourceSpans"][0].update(scopeSpans={"spans": []}), "scopeSpans"),
    (lambda d: d.update(resourceSpans="x"), "resourceSpans"),
])
def test_wrong_types_name_the_field(tmp_path: Path, mutate: Any, field: str) -> None:
    d = doc(agent_trace(A))
    mutate(d)
    path = write_lines(tmp_path / "t.jsonl", [doc(agent_trace(B, t=10)), d])
    with pytest.raises(TraceValidationError) as info:
        OTLP.read(path)
    assert info.value.field == field and info.value.line == 2
    t = OTLP.read(path, on_error="skip")
    assert B in t.trace_ids and A not in t.trace_ids


@pytest.mark.slow
def test_random_corruption_never_escapes_as_a_bare_error(tmp_path: Path) -> None:
    """Replace random values in valid documents by values of other types: only TraceValidationError may escape."""
    rng = random.Random(20240611)
    base = doc(agent_trace(A) + agent_trace(B, t=10))
    junk: list[Any] = [None, 0, -1, 1.5, "", "x", [], {}, [1], {"a": 1}, True]
    n_raised = 0
    for i in range(300):
        d = json.loads(json.dumps(base))
        for _ in range(rng.randint(1, 3)):
            node: Any = d
            path: list[Any] = []
            while isinstance(node, (dict, list)) and node and rng.random() < 0.85:
                key = rng.choice(list(node)) if isinstance(node, dict) else rng.randrange(len(node))
                path.append((node, key))
                node = node[key]
            if path:
                parent, key = path[-1]
                parent[key] = json.loads(json.dumps(rng.choice(junk)))  # a fresh copy: no shared nodes
        p = write_lines(tmp_path / f"c{i}.jsonl", [d])
        for on_error in ("raise", "skip"):
            try:
                OTLP.read(p, on_error=on_error)
            except TraceValidationError:
                n_raised += on_error == "skip"
    assert n_raised == 0  # skip mode never raises for bad records


def test_unknown_and_conflicting_options() -> None:
    with pytest.raises(TypeError, match="unknown options"):
        OTLP.read(DATA / "collector.jsonl", task_key="task.id")
    with pytest.raises(ValueError, match="unlabelled must be"):
        OTLP.read(DATA / "collector.jsonl", unlabelled="guess")
    with pytest.raises(TypeError):
        OTLP.read(DATA / "collector.jsonl", success_threshold="high")
    with pytest.raises(TraceValidationError, match="not a folder"):
        OTLP.read(DATA)


# ------------------------------------------------------------------------------------------- sniffing / registry
def test_sniff() -> None:
    for name in ("collector.jsonl", "multi_task.jsonl", "console.json", "openinference.jsonl",
                 "phoenix_spans.jsonl"):
        assert OTLP.sniff(DATA / name), name
        assert detect_format(DATA / name) == "otlp", name
    for name in ("verdicts.json", "verdicts.csv"):
        assert not OTLP.sniff(DATA / name)
    assert not OTLP.sniff(DATA)
    for p in sorted(LANGFUSE_DATA.rglob("*")):
        assert not OTLP.sniff(p), p


def test_sniff_rejects_canonical_table(tmp_path: Path) -> None:
    p = write_lines(tmp_path / "c.jsonl", [{"trace_id": "t", "step_idx": 0, "state": "a", "outcome": "success"}])
    assert not OTLP.sniff(p)


def test_read_traces_entry_point() -> None:
    t = tt.read_traces(DATA / "collector.jsonl", on_error="skip")
    assert t.report.format == "otlp" and t.n_traces == 2
    assert OTLP.needs and OTLP.description and OTLP.name == "otlp"


# ------------------------------------------------------------------------------------------- streaming
def test_streaming_finishes_traces_as_soon_as_their_last_line_is_read(tmp_path: Path) -> None:
    """60 traces, each split over two consecutive lines (like batches of a batch span processor): at most a couple
    are open at once, whatever the file size. One trace's late span arrives on the very last line: it stays open
    (and complete) until then."""
    ids = [f"{i:02x}" * 16 for i in range(1, 61)]
    parts = [agent_trace(tid, t=10.0 * i) for i, tid in enumerate(ids)]
    late = parts[0].pop()  # trace 1's tool span
    lines = []
    for i in range(len(ids)):
        batch = parts[i][:1] + (parts[i - 1][1:] if i else [])
        lines.append(doc(batch))
    lines.append(doc([*parts[-1][1:], late]))
    path = write_lines(tmp_path / "s.jsonl", lines)
    table, stats = OTLP.read_with_stats(path)
    assert table.n_traces == 60 and table.n_steps == 120
    assert stats.n_traces == 60 and stats.n_spans == 180
    assert stats.max_open_traces <= 3  # trace 1 (late span) + the two straddling the current line
    first = rows(table, ids[0])
    assert [r.get("tool_name") for r in first] == [None, "search"]
    # Holding everything until the end would need all 60 open at once.
    assert stats.max_open_spans < 20
