"""The generic OpenAI-style chat-log reader and the shared message walk (``readers/openai_messages.py``).

The format has no single producer to install (many harnesses write it); real producer output is tested through the
τ-bench and τ²-bench files it shares its message walk with (``test_tau_bench.py``, ``test_real_corpora.py``).
Fixtures in ``tests/data/readers/openai/`` are invented:
* ``multi_tool.jsonl`` — three tool calls in one turn answered out of order (one fails by its "Error" text, one by
  its ``error`` flag), content given as parts, a legacy ``function_call`` answered by a ``function`` message, an
  explicit ``outcome``/``termination_reason``, and a partial reward;
* ``missing_reward.jsonl`` — the second episode has neither reward nor outcome;
* ``wrong_types.jsonl`` — one good episode, then one bad field per line, then a non-JSON and a non-object line;
* ``custom_keys.json`` — a JSON list whose keys differ (``conversation``, ``episode``, ``problem``, ``attempt``,
  nested ``result.score``) and τ²-style tool calls; the third episode has no agent step.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracetochain.exceptions import TraceValidationError
from tracetochain.readers import detect_format, read_traces
from tracetochain.readers.openai_messages import (
    OPENAI_MESSAGES,
    EpisodeFormatError,
    read_record_head,
    steps_from_messages,
    tool_error_rule,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "readers" / "openai"
MULTI = DATA / "multi_tool.jsonl"


def _traces(table: Any) -> dict[str, Any]:
    df = table.to_pandas()
    return {tid: g.sort_values("step_idx") for tid, g in df.groupby("trace_id", sort=False)}


# ------------------------------------------------------------------------------------------------ happy paths
def test_multiple_tool_calls_per_turn_and_tool_errors() -> None:
    t = read_traces(MULTI, format="openai-messages")
    assert t.report.format == "openai-messages"
    assert t.trace_ids == ["ep-1", "ep-2", "ep-3"]
    tr = _traces(t)
    ep1 = tr["ep-1"]
    assert list(ep1.step_kind) == ["tool", "tool", "tool", "llm", "tool", "llm"]
    assert list(ep1.tool_name.fillna("")) == ["lookup_order", "lookup_order", "get_policy", "", "refund", ""]
    # c2 answered "Error: …" (prefix convention); c3 carries error=true; results arrived out of order.
    assert list(ep1.error) == [False, True, True, False, False, False]
    assert list(ep1.text)[:2] == ['{"order_id": "A7"}', '{"order_id": "B9"}']
    assert list(ep1.text)[3] == "A7 can be refunded; B9 does not exist."  # text content parts joined
    assert list(ep1.text)[4] == '{"order_id": "A7"}'  # dict arguments become JSON text
    assert set(ep1.outcome) == {"success"} and set(ep1.reward) == {1.0}
    assert set(ep1.task_id) == {"refund-7"} and set(ep1.trial) == {0}

    ep2 = tr["ep-2"]  # legacy function_call answered by a role="function" message
    assert list(ep2.step_kind) == ["tool", "llm"] and list(ep2.error) == [True, False]
    assert set(ep2.outcome) == {"censored"} and set(ep2.termination_reason) == {"max_steps"}

    ep3 = tr["ep-3"]
    assert list(ep3.step_kind) == ["llm"] and set(ep3.outcome) == {"failure"}  # reward 0.4 < 1 − 1e−6
    assert t.outcome_counts() == {"success": 1, "failure": 1, "censored": 1, "invalid": 0}


def test_include_user_threshold_and_error_prefix_options() -> None:
    t = read_traces(MULTI, format="openai-messages", include_user=True, success_threshold=0.3, error_prefix=None)
    tr = _traces(t)
    assert list(tr["ep-1"].step_kind) == ["user", "tool", "tool", "tool", "llm", "user", "tool", "llm"]
    assert list(tr["ep-1"].error) == [False, False, False, True, False, False, False, False]  # only the flag
    assert list(tr["ep-2"].error) == [False, False, False]
    assert set(tr["ep-3"].outcome) == {"success"}  # 0.4 ≥ 0.3
    assert list(tr["ep-3"].step_kind) == ["user", "llm"]


def test_custom_keys_and_empty_episode_counted(tmp_path: Path) -> None:
    opts = dict(messages_key="conversation", id_key="episode", task_key="problem", trial_key="attempt",
                reward_key="result.score")
    t = read_traces(DATA / "custom_keys.json", format="openai-messages", **opts)
    assert t.trace_ids == ["r1", "r2"]
    tr = _traces(t)
    assert list(tr["r1"].step_kind) == ["tool", "llm"] and list(tr["r1"].error) == [False, False]
    assert tr["r1"].text.iloc[0] == '{"expr": "2+2"}'
    assert list(tr["r2"].error) == [True]
    assert set(tr["r1"].trial) == {0} and set(tr["r2"].trial) == {1} and set(tr["r1"].task_id) == {"12"}
    assert t.outcome_counts() == {"success": 1, "failure": 1, "censored": 0, "invalid": 0}
    # r3 has only system/user messages: kept as a trial without steps, with its outcome.
    assert t.report.n_traces_skipped == 0
    assert t.report.zero_step == [{"trace_id": "r3", "outcome": "failure", "task_id": "13", "trial": 0,
                                   "reward": 0.7}]
    # Without the messages key named, the reader says which key it looked for.
    with pytest.raises(TraceValidationError, match="messages") as exc:
        read_traces(DATA / "custom_keys.json", format="openai-messages")
    assert exc.value.row == 0


def test_trace_id_fallbacks(tmp_path: Path) -> None:
    eps = [{"task_id": 3, "trial": 1, "reward": 1, "messages": [{"role": "assistant", "content": "x"}]},
           {"reward": 0, "messages": [{"role": "assistant", "content": "y"}]}]
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in eps) + "\n")
    t = read_traces(path, format="openai-messages")
    assert t.trace_ids == ["runs/task3/trial1", "runs/2"]  # second: file stem + line number


def test_boolean_outcome_and_traj_key(tmp_path: Path) -> None:
    path = tmp_path / "eps.json"
    path.write_text(json.dumps([
        {"id": 1, "outcome": True, "traj": [{"role": "assistant", "content": "a"}]},
        {"id": 2, "outcome": "FAILURE", "reward": 1.0, "traj": [{"role": "assistant", "content": "b"}]},
    ]))
    assert detect_format(path) == "openai-messages"
    t = read_traces(path)
    assert t.trace_ids == ["1", "2"]
    assert t.outcome_counts()["success"] == 1 and t.outcome_counts()["failure"] == 1  # outcome wins over reward


# ------------------------------------------------------------------------------------------------ bad input
def test_missing_reward_raises_then_skips() -> None:
    path = DATA / "missing_reward.jsonl"
    with pytest.raises(TraceValidationError) as exc:
        read_traces(path, format="openai-messages")
    err = exc.value
    assert err.line == 2 and err.field == "reward"
    assert "neither" in str(err) and "reward_key" in str(err) and str(path) in str(err)
    t = read_traces(path, format="openai-messages", on_error="skip")
    assert t.trace_ids == ["a", "c"]
    assert t.report.n_traces_skipped == 1
    assert t.report.problems[0].location == 2 and t.report.problems[0].field == "reward"


WRONG_FIELDS = {
    "messages-not-list": "messages",
    "reward-is-text": "reward",
    "trial-is-float": "trial",
    "tool-calls-not-list": "messages[0].tool_calls",
    "no-function-name": "messages[0].tool_calls[0].function.name",
    "role-missing": "messages[0].role",
    "error-flag-not-bool": "messages[1].error",
    "message-not-object": "messages[0]",
    "outcome-unknown": "outcome",
}


def test_wrong_types_name_line_and_field(tmp_path: Path) -> None:
    lines = (DATA / "wrong_types.jsonl").read_text().splitlines()
    seen = set()
    for i, line in enumerate(lines[1:], start=2):
        try:
            name = json.loads(line).get("id")
        except (json.JSONDecodeError, AttributeError):
            name = None
        single = tmp_path / f"line{i}.jsonl"
        single.write_text(lines[0] + "\n" + line + "\n")
        with pytest.raises(TraceValidationError) as exc:
            read_traces(single, format="openai-messages")
        assert exc.value.line == 2, line
        assert exc.value.source == str(single)
        if isinstance(name, str):
            assert exc.value.field == WRONG_FIELDS[name], name
            seen.add(name)
        elif isinstance(name, list):
            assert exc.value.field == "id"
    assert seen == set(WRONG_FIELDS)


def test_wrong_types_skip_counts_every_bad_episode() -> None:
    t = read_traces(DATA / "wrong_types.jsonl", format="openai-messages", on_error="skip")
    assert t.trace_ids == ["ok"] and t.n_steps == 2
    assert t.report.n_traces_skipped == 12  # 10 bad fields + 1 non-JSON line + 1 non-object line
    assert [p.location for p in t.report.problems] == list(range(2, 14))


def test_duplicate_ids_and_file_shape(tmp_path: Path) -> None:
    path = tmp_path / "dup.jsonl"
    ep = {"id": "same", "reward": 1, "messages": [{"role": "assistant", "content": "x"}]}
    path.write_text(json.dumps(ep) + "\n" + json.dumps(ep) + "\n")
    with pytest.raises(TraceValidationError, match="repeats"):
        read_traces(path, format="openai-messages")
    assert read_traces(path, format="openai-messages", on_error="skip").n_traces == 1
    obj = tmp_path / "obj.json"
    obj.write_text(json.dumps(ep))
    with pytest.raises(TraceValidationError, match="list of episodes"):
        read_traces(obj, format="openai-messages")
    broken = tmp_path / "broken.json"
    broken.write_text('[{"id": 1,')
    with pytest.raises(TraceValidationError, match="not valid JSON"):
        read_traces(broken, format="openai-messages")


def test_options_are_checked() -> None:
    with pytest.raises(TypeError):
        read_traces(MULTI, format="openai-messages", sucess_threshold=0.5)  # misspelt
    with pytest.raises(TypeError):
        read_traces(MULTI, format="openai-messages", success_threshold="high")
    with pytest.raises(TypeError):
        read_traces(MULTI, format="openai-messages", reward_key=3)
    assert OPENAI_MESSAGES.needs and OPENAI_MESSAGES.description and "\n" not in OPENAI_MESSAGES.description


# ------------------------------------------------------------------------------------------------ sniffing
def test_sniffing(tmp_path: Path, shared_data: Path) -> None:
    assert detect_format(MULTI) == "openai-messages"
    assert detect_format(DATA / "missing_reward.jsonl") == "openai-messages"
    # A canonical JSONL/JSON table is not claimed.
    canon = Path(__file__).resolve().parents[2] / "src/tracetochain/datasets/data/tau_airline_sample.jsonl"
    assert not OPENAI_MESSAGES.sniff(canon)
    assert detect_format(canon) == "canonical"
    rows = [{"trace_id": "a", "step_idx": 0, "state": "x", "outcome": "success", "messages": []}]
    arr = tmp_path / "canon.json"
    arr.write_text(json.dumps(rows))
    assert not OPENAI_MESSAGES.sniff(arr)
    # One JSON document with a messages list (e.g. a mini-swe-agent trajectory) is not a list of episodes.
    doc = tmp_path / "one.traj.json"
    doc.write_text(json.dumps({"instance_id": "x", "messages": [{"role": "user", "content": "hi"}]}))
    assert not OPENAI_MESSAGES.sniff(doc)
    swe = next((shared_data / "swebench-verified-mini-swe-agent-gemini-3-pro").rglob("*.traj.json"), None)
    if swe is not None:
        assert not OPENAI_MESSAGES.sniff(swe)
    # A messages key nested deeper than the episode (Langfuse-like observations) is not claimed.
    nested = tmp_path / "obs.jsonl"
    nested.write_text(json.dumps({"id": "o1", "input": {"messages": [{"role": "user"}]}}) + "\n")
    assert not OPENAI_MESSAGES.sniff(nested)
    assert not OPENAI_MESSAGES.sniff(tmp_path)  # a folder


def test_record_head_on_truncated_text() -> None:
    head = read_record_head('[ {"task_id": 1, "reward": 0.0, "info": {"a": {"b": 1}, "c": [1, 2]}, "traj": [{"role')
    assert head is not None and head.container == "list"
    assert head.keys == {"task_id": "", "reward": "", "info": "{", "traj": "["}
    assert head.nested == {"info": {"a", "c"}}
    head = read_record_head('{"k": "a \\" : tricky", "m": [')
    assert head is not None and set(head.keys) == {"k", "m"}
    assert read_record_head("trace_id,step_idx\n") is None
    assert read_record_head("[1, 2]") is None


# ------------------------------------------------------------------------------------------------ the walk itself
def test_walk_matches_results_in_order_without_ids() -> None:
    msgs = [
        {"role": "assistant", "tool_calls": [{"function": {"name": "a", "arguments": "1"}},
                                             {"function": {"name": "b", "arguments": "2"}}]},
        {"role": "tool", "content": "fine"},
        {"role": "tool", "content": "Error: nope"},
        {"role": "tool", "content": "Error: nobody asked"},  # orphan result: ignored
    ]
    steps = steps_from_messages(msgs)
    assert [(s["tool_name"], s["error"]) for s in steps] == [("a", False), ("b", True)]


def test_walk_drops_user_tool_calls_unless_asked() -> None:
    msgs = [
        {"role": "user", "tool_calls": [{"id": "u1", "name": "toggle", "arguments": {}, "requestor": "user"}]},
        {"role": "tool", "id": "u1", "content": "Error: x", "error": True, "requestor": "user"},
        {"role": "assistant", "tool_calls": [{"id": "a1", "name": "check", "arguments": {}}]},
        {"role": "tool", "id": "a1", "content": "ok", "error": False},
    ]
    rule = tool_error_rule(flag=True, prefix=None)
    steps = steps_from_messages(msgs, tool_error=rule)
    assert [(s["step_kind"], s["tool_name"], s["error"]) for s in steps] == [("tool", "check", False)]
    steps = steps_from_messages(msgs, tool_error=rule, include_user=True)
    assert [(s["step_kind"], s["tool_name"], s["error"]) for s in steps] == [("user", "toggle", True),
                                                                             ("tool", "check", False)]


def test_walk_timestamps_usage_and_multi_tool_wrapper() -> None:
    msgs = [
        {"role": "assistant", "timestamp": "2025-01-01T00:00:00", "usage": {"prompt_tokens": 10,
         "completion_tokens": 3}, "cost": 0.5,
         "tool_calls": [{"id": "x", "name": "f", "arguments": {}}, {"id": "y", "name": "g", "arguments": {}}]},
        {"role": "tool", "tool_messages": [
            {"role": "tool", "id": "y", "content": "bad", "error": True, "timestamp": "2025-01-01T00:00:02Z"},
            {"role": "tool", "id": "x", "content": "ok", "error": False, "timestamp": 1735689601.0}]},
    ]
    steps = steps_from_messages(msgs)
    assert steps[0]["t_start"] == 1735689600.0 and steps[0]["t_end"] == 1735689601.0
    assert steps[1]["t_end"] == 1735689602.0 and steps[1]["error"] is True
    assert (steps[0]["tokens_in"], steps[0]["tokens_out"], steps[0]["cost_usd"]) == (10, 3, 0.5)
    assert "tokens_in" not in steps[1]  # a turn's usage is counted once


def test_walk_content_types() -> None:
    msgs = [{"role": "assistant", "tool_calls": [{"id": "q", "name": "f", "arguments": {}}]},
            {"role": "tool", "id": "q", "content": {"rows": 3}},
            {"role": "assistant", "content": {"answer": 3}},
            {"role": "assistant", "content": [{"type": "image_url", "image_url": {"url": "x"}}]},
            {"role": "assistant"}]
    steps = steps_from_messages(msgs)
    assert steps[0]["error"] is False and steps[1]["text"] == '{"answer": 3}'
    assert steps[2]["text"] is None and steps[3]["text"] is None and len(steps) == 4  # empty turns are llm steps
    with pytest.raises(EpisodeFormatError) as exc:
        steps_from_messages([{"role": "assistant", "content": 5}])
    assert exc.value.field == "messages[0].content"


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=True) | st.sampled_from(
        ["assistant", "user", "tool", "function", "system", "Error: x", "id1", ""]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["role", "content", "tool_calls", "function", "name", "arguments", "id", "tool_call_id",
                         "error", "tool_messages", "function_call", "timestamp", "usage", "cost", "text"]),
        inner, max_size=5),
    max_leaves=25,
)


@pytest.mark.slow
@settings(max_examples=300, derandomize=True, deadline=None)
@given(messages=st.lists(_json, max_size=6) | _json)
def test_walk_never_crashes_on_arbitrary_json(messages: Any) -> None:
    try:
        steps = steps_from_messages(messages, include_user=True)
    except EpisodeFormatError as exc:
        assert exc.field is None or exc.field.startswith("messages")
        return
    for s in steps:
        assert s["step_kind"] in ("llm", "tool", "user") and isinstance(s["error"], bool)


@pytest.mark.slow
@settings(max_examples=100, derandomize=True, deadline=None)
@given(episodes=st.lists(st.dictionaries(st.sampled_from(["id", "task_id", "trial", "reward", "outcome",
                                                          "messages"]), _json, max_size=6), max_size=4))
def test_reader_skip_mode_never_crashes(episodes: list[dict[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "eps.jsonl"
        path.write_text("".join(json.dumps(e) + "\n" for e in episodes))
        try:
            t = read_traces(path, format="openai-messages", on_error="skip")
        except TraceValidationError:
            return
        assert t.n_traces + t.report.n_traces_skipped == len(episodes)
