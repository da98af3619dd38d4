"""Detection that explains itself, header lines kept as run metadata, verdicts in many spellings, and tool errors
given as text — on message-list files shaped like real exports (a metadata header line, a nested verdict)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tracetochain.exceptions import TraceValidationError
from tracetochain.readers import Refusal, available_readers, detect_format, read_traces, sniff_all
from tracetochain.readers._suggest import suggest


def episode(i: int, verdict: Any = None, *, key: str = "messages", error: Any = None) -> dict[str, Any]:
    reply: dict[str, Any] = {"role": "tool", "tool_call_id": f"c{i}", "content": "result"}
    if error is not None:
        reply["error"] = error
    messages = [{"role": "system", "content": "policy"}, {"role": "user", "content": "task"},
                {"role": "assistant", "content": None,
                 "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "search",
                                                                                  "arguments": "{}"}}]},
                reply, {"role": "assistant", "content": "answer"}]
    return {"id": f"ep{i}", key: messages, "metadata": {"success": i % 3 == 0 if verdict is None else verdict,
                                                        "model": "m"}}


def write_jsonl(path: Path, records: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


HEADER = {"metadata": {"benchmark": "shop", "defence": "none", "n_episodes": 30}}


@pytest.fixture
def with_header(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "runs.jsonl", [HEADER] + [episode(i) for i in range(30)])


def test_header_line_is_run_metadata_and_the_only_verdict_field_is_used(with_header: Path) -> None:
    assert detect_format(with_header) == "openai-messages"
    found = read_traces(with_header)  # metadata.success is the only verdict-like field: it is used, and said so
    assert found.report.verdict_field == "metadata.success"
    assert found.report.to_dict()["verdict_field"] == "metadata.success"
    table = read_traces(with_header, outcome_key="metadata.success")
    assert table.report.verdict_field is None  # named by the user: nothing was found
    assert table.n_traces == 30 and table.outcome_counts()["success"] == 10
    assert found.outcome_counts() == table.outcome_counts()
    assert table.report.run_metadata == HEADER
    assert table.report.to_dict()["run_metadata"] == HEADER
    assert "reward" not in table.columns  # a boolean verdict is not a score
    assert table.trace_values("metadata.model") == ["m"] * 30  # the episode's metadata travels as fields


def test_several_verdict_fields_stop_the_read_and_are_listed(tmp_path: Path) -> None:
    eps = [episode(i) for i in range(4)]
    for ep in eps:
        ep["metadata"]["passed"] = "yes"
    path = write_jsonl(tmp_path / "two.jsonl", eps)
    with pytest.raises(TraceValidationError) as exc:
        read_traces(path)
    text = str(exc.value)
    assert "metadata.success" in text and "metadata.passed" in text and "outcome_key=" in text
    assert read_traces(path, outcome_key="metadata.passed").outcome_counts()["success"] == 4


def test_header_lines_start_segments_of_a_concatenated_stream(tmp_path: Path) -> None:
    second = {"metadata": {"benchmark": "shop", "defence": "filter", "n_episodes": 2}}
    path = write_jsonl(tmp_path / "cat.jsonl", [HEADER, episode(0), episode(1), second, episode(0), episode(1)])
    table = read_traces(path)
    assert table.n_traces == 4
    assert table.trace_values("meta.defence") == ["none", "none", "filter", "filter"]
    assert sorted(table.trace_ids) == ["segment0/ep0", "segment0/ep1", "segment1/ep0", "segment1/ep1"]
    assert table.report.run_metadata == {"segments": [HEADER, second]}
    two = write_jsonl(tmp_path / "two.jsonl", [HEADER, {"header": {"run": 2}, "version": 3}, episode(0)])
    table = read_traces(two, outcome_key="metadata.success")
    assert table.report.run_metadata == {**HEADER, "header": {"run": 2}, "version": 3}


def test_header_line_in_a_canonical_table(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "steps.jsonl", [{"metadata": {"agent": "a"}},
                                                 {"trace_id": "t", "step_idx": 0, "state": "s", "outcome": "success"}])
    assert detect_format(path) == "canonical"
    table = read_traces(path)
    assert table.n_traces == 1 and table.report.run_metadata == {"metadata": {"agent": "a"}}


def test_no_reader_lists_every_reason_and_a_checked_suggestion(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "chat.jsonl", [episode(i, key="conversation") for i in range(12)])
    answers = sniff_all(path)
    assert [a.reader for a in answers] == list(available_readers())
    assert not any(a.accepted for a in answers) and all(a.reason for a in answers)
    with pytest.raises(TraceValidationError) as exc:
        read_traces(path)
    text = str(exc.value)
    assert "no reader recognised this file" in text
    for name in available_readers():
        assert f"\n  {name}: " in text
    assert "openai-messages: the first record has no 'messages' or 'traj' list; its keys: id, conversation" in text
    command = "--reader openai-messages -O messages_key=conversation -O outcome_key=metadata.success"
    assert command in text
    found = suggest(path)
    assert found is not None and found.options == {"messages_key": "conversation", "outcome_key": "metadata.success"}
    assert read_traces(path, found.reader, **found.options).n_traces == 12  # the suggestion works


def test_no_suggestion_without_a_message_list(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "odd.jsonl", [{"foo": 1}, {"foo": 2}])
    with pytest.raises(TraceValidationError) as exc:
        read_traces(path)
    assert "no reader recognised" in str(exc.value) and "--reader NAME" in str(exc.value)


def test_near_canonical_files_get_the_canonical_readers_precise_error(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "steps.jsonl", [{"trace_id": "a", "step_idx": 0, "state": "s"}])
    with pytest.raises(TraceValidationError, match="'outcome' is missing from every record"):
        read_traces(path)


def test_refusal_is_false_and_says_why(tmp_path: Path) -> None:
    assert not Refusal("x") and str(Refusal("not a .json file")) == "not a .json file"
    readers = available_readers()
    text = tmp_path / "notes.md"
    text.write_text("hello")
    why = readers["tau-bench"].sniff(text)
    assert isinstance(why, Refusal) and why.reason == "reads .json files, not .md"


@pytest.mark.parametrize(("value", "outcome"), [
    (True, "success"), (False, "failure"), (1, "success"), (0, "failure"), ("pass", "success"),
    ("FAILED", "failure"), ("resolved", "success"), ("1.0", "success"), ("0", "failure"), ("censored", "censored"),
])
def test_verdict_spellings(tmp_path: Path, value: Any, outcome: str) -> None:
    for key in ("outcome_key", "reward_key"):
        path = write_jsonl(tmp_path / "v.jsonl", [episode(0, value)])
        table = read_traces(path, **{key: "metadata.success"})
        assert table.outcome_counts()[outcome] == 1, (key, value)


def test_ambiguous_text_verdicts_need_success_values(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "v.jsonl", [episode(0, "completed"), episode(1, "gave up")])
    with pytest.raises(TraceValidationError, match="cannot tell whether verdict 'completed' means success"):
        read_traces(path, outcome_key="metadata.success")
    table = read_traces(path, outcome_key="metadata.success", success_values="completed")
    assert table.outcome_counts()["success"] == 1 and table.outcome_counts()["failure"] == 1


@pytest.mark.parametrize(("error", "flag", "error_type", "message"), [
    ("TimeoutError('upstream timed out')", True, "TimeoutError", "TimeoutError('upstream timed out')"),
    ("requests.exceptions.HTTPError: 503", True, "HTTPError", "requests.exceptions.HTTPError: 503"),
    ("order not found", True, None, "order not found"),
    ({"type": "rate_limit", "message": "slow down"}, True, "rate_limit", "slow down"),
    ("", False, None, None), (True, True, None, None), (False, False, None, None), (0, False, None, None),
])
def test_tool_errors_given_as_text_mark_the_step_and_keep_the_text(tmp_path: Path, error: Any, flag: bool,
                                                                  error_type: str | None,
                                                                  message: str | None) -> None:
    path = write_jsonl(tmp_path / "e.jsonl", [episode(0, True, error=error)])
    rows = read_traces(path, outcome_key="metadata.success").to_arrow().to_pylist()
    tool = rows[0]
    assert tool["step_kind"] == "tool" and tool["error"] is flag
    assert tool.get("error_type") == error_type and tool.get("error_message") == message


def test_long_error_messages_are_cut(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "e.jsonl", [episode(0, True, error="Traceback: " + "x" * 10_000)])
    message = read_traces(path, outcome_key="metadata.success").to_arrow().column("error_message")[0].as_py()
    assert len(message) == 4000 and message.endswith("…")
