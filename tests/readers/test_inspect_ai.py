"""inspect_ai reader: .json and .eval logs, step sequences, outcome rules, scorer choice, zip caps and sniffing.

The fixture ``tests/data/readers/inspect_ai/toy_refunds.json`` is an invented log (3 samples × 2 epochs) that follows
inspect_ai's EvalLog schema; the ``.eval`` form of the same log is built from it here (see the folder's README).
"""

from __future__ import annotations

import copy
import json
import struct
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import tracetochain as tt
from tracetochain.exceptions import TraceValidationError
from tracetochain.readers import detect_format
from tracetochain.readers.inspect_ai import INSPECT_AI, score_to_reward

DATA = Path(__file__).resolve().parents[1] / "data" / "readers" / "inspect_ai"
LOG_JSON = DATA / "toy_refunds.json"

EXPECTED_STATES = {
    "refund-1/epoch1": ["llm", "tool:lookup_order", "llm", "tool:issue_refund", "tool:send_email", "llm"],
    # the grader's model call inside the scorer span is not a step; events are put in timestamp order
    "refund-1/epoch2": ["llm", "tool:lookup_order", "llm", "tool:lookup_order", "llm"],
    "refund-2/epoch1": ["llm", "tool:lookup_order", "llm", "tool:close_ticket"],
    "refund-2/epoch2": ["llm", "handoff:transfer_to_billing", "llm", "tool:issue_refund", "llm"],
    "refund-3/epoch1": ["llm", "tool:lookup_order"],
    # no events: steps come from the messages (two tool calls in one assistant turn, then the answer)
    "refund-3/epoch2": ["tool:lookup_order", "tool:check_policy", "llm"],
}
EXPECTED_ERRORS = {
    "refund-1/epoch1": [False] * 6,
    "refund-1/epoch2": [False, True, False, False, False],
    "refund-2/epoch1": [False, False, False, True],
    "refund-2/epoch2": [False] * 5,
    "refund-3/epoch1": [False, False],
    "refund-3/epoch2": [False, True, False],
}
EXPECTED_TRACE = {  # outcome, reward, termination_reason, task_id, trial
    "refund-1/epoch1": ("success", 1.0, None, "refund-1", 1),
    "refund-1/epoch2": ("failure", 0.0, None, "refund-1", 2),
    "refund-2/epoch1": ("censored", 0.0, "message", "refund-2", 1),
    "refund-2/epoch2": ("failure", 0.5, None, "refund-2", 2),
    "refund-3/epoch1": ("invalid", None, "error", "refund-3", 1),
    "refund-3/epoch2": ("success", 1.0, None, "refund-3", 2),
}


# ------------------------------------------------------------------------------------------------ helpers
def load_log() -> dict[str, Any]:
    log: dict[str, Any] = json.loads(LOG_JSON.read_text(encoding="utf-8"))
    return log


def write_json_log(path: Path, log: dict[str, Any]) -> Path:
    path.write_text(json.dumps(log, indent=2), encoding="utf-8")
    return path


def write_eval_log(path: Path, log: dict[str, Any], *, extra: dict[str, bytes] | None = None) -> Path:
    """The zipped layout inspect_ai writes: header.json, samples/<id>_epoch_<n>.json, summaries, reductions, journal."""
    samples = log.get("samples") or []
    header = {k: v for k, v in log.items() if k not in ("samples", "reductions")}
    start = {"version": log["version"], "eval": log["eval"], "plan": log["plan"]}
    summaries = [{"id": s["id"], "epoch": s["epoch"], "input": s["input"], "target": s["target"],
                  "scores": s.get("scores")} for s in samples]
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=5) as zf:
        zf.writestr("_journal/start.json", json.dumps(start, indent=2))
        for s in samples:
            zf.writestr(f"samples/{s['id']}_epoch_{s['epoch']}.json", json.dumps(s, indent=2))
        zf.writestr("_journal/summaries/1.json", json.dumps(summaries, indent=2))
        zf.writestr("summaries.json", json.dumps(summaries, indent=2))
        if "reductions" in log:
            zf.writestr("reductions.json", json.dumps(log["reductions"], indent=2))
        zf.writestr("header.json", json.dumps(header, indent=2))
        for name, data in (extra or {}).items():
            zf.writestr(name, data)
    return path


@pytest.fixture
def eval_log(tmp_path: Path) -> Path:
    return write_eval_log(tmp_path / "2026-01-05T10-00-00_toy-refunds_abc.eval", load_log())


def by_trace(table: tt.TraceTable) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for rec in table.to_arrow().to_pylist():
        out.setdefault(rec["trace_id"], []).append(rec)
    return out


def states_by_trace(table: tt.TraceTable) -> dict[str, list[str]]:
    codes, names = table.state_labels()
    ids = table.to_arrow().column("trace_id").to_pylist()
    out: dict[str, list[str]] = {}
    for tid, code in zip(ids, codes, strict=True):
        out.setdefault(tid, []).append(names[code])
    return out


def with_sample_change(tmp_path: Path, index: int, **changes: Any) -> Path:
    log = load_log()
    for key, value in changes.items():
        if value is _DELETE:
            log["samples"][index].pop(key, None)
        else:
            log["samples"][index][key] = value
    return write_json_log(tmp_path / "changed.json", log)


_DELETE = object()


def patch_zip_member(path: Path, member: str, *, declared_size: int | None = None,
                     method: int | None = None) -> None:
    """Rewrite a member's declared uncompressed size and/or compression method in both of its headers."""
    data = bytearray(path.read_bytes())
    name = member.encode()
    # local file header: signature, ..., method at 8, uncompressed size at 22, name length at 26, name at 30
    pos = 0
    while (pos := data.find(b"PK\x03\x04", pos)) >= 0:
        nlen = struct.unpack_from("<H", data, pos + 26)[0]
        if bytes(data[pos + 30:pos + 30 + nlen]) == name:
            if declared_size is not None:
                struct.pack_into("<I", data, pos + 22, declared_size)
            if method is not None:
                struct.pack_into("<H", data, pos + 8, method)
        pos += 4
    # central directory entry: method at 10, uncompressed size at 24, name length at 28, name at 46
    pos = 0
    while (pos := data.find(b"PK\x01\x02", pos)) >= 0:
        nlen = struct.unpack_from("<H", data, pos + 28)[0]
        if bytes(data[pos + 46:pos + 46 + nlen]) == name:
            if declared_size is not None:
                struct.pack_into("<I", data, pos + 24, declared_size)
            if method is not None:
                struct.pack_into("<H", data, pos + 10, method)
        pos += 4
    path.write_bytes(bytes(data))


# ------------------------------------------------------------------------------------------------ counts and steps
@pytest.mark.parametrize("kind", ["json", "eval"])
def test_counts(kind: str, eval_log: Path) -> None:
    table = INSPECT_AI.read(LOG_JSON if kind == "json" else eval_log)
    assert table.n_traces == 6
    assert table.n_steps == sum(len(v) for v in EXPECTED_STATES.values()) == 25
    assert table.outcome_counts() == {"success": 2, "failure": 2, "censored": 1, "invalid": 1}
    assert table.report.format == "inspect-ai"
    assert table.report.n_traces_skipped == 0 and table.report.n_records_skipped == 0


@pytest.mark.parametrize("kind", ["json", "eval"])
def test_step_sequences_errors_and_trace_fields(kind: str, eval_log: Path) -> None:
    table = INSPECT_AI.read(LOG_JSON if kind == "json" else eval_log)
    assert states_by_trace(table) == EXPECTED_STATES
    traces = by_trace(table)
    assert {tid: [r["error"] for r in recs] for tid, recs in traces.items()} == EXPECTED_ERRORS
    for tid, (outcome, reward, reason, task, trial) in EXPECTED_TRACE.items():
        for rec in traces[tid]:
            assert (rec["outcome"], rec["reward"], rec["termination_reason"], rec["task_id"], rec["trial"]) == \
                (outcome, reward, reason, task, trial), tid
        assert [r["step_idx"] for r in traces[tid]] == list(range(len(traces[tid])))


def test_eval_and_json_give_the_same_table(eval_log: Path) -> None:
    a = INSPECT_AI.read(LOG_JSON).to_arrow()
    b = INSPECT_AI.read(eval_log).to_arrow()
    assert sorted(a.column_names) == sorted(b.column_names)
    for name in a.column_names:
        assert a.column(name).to_pylist() == b.column(name).to_pylist(), name


def test_error_types_tokens_times_and_text() -> None:
    traces = by_trace(INSPECT_AI.read(LOG_JSON))
    assert traces["refund-1/epoch2"][1]["error_type"] == "timeout"  # ToolCallError.type
    assert traces["refund-2/epoch1"][3]["error_type"] == "permission"  # failed=true with an error
    assert traces["refund-3/epoch2"][1]["error_type"] == "permission"  # from the tool message (messages path)
    first = traces["refund-1/epoch1"][0]
    t0 = datetime(2026, 1, 5, 10, 0, 1, tzinfo=UTC).timestamp()
    assert (first["tokens_in"], first["tokens_out"]) == (120, 18)
    assert first["t_start"] == pytest.approx(t0) and first["t_end"] == pytest.approx(t0 + 0.8)
    tool = traces["refund-1/epoch1"][3]
    assert json.loads(tool["text"]) == {"order_id": "A7", "amount": 12.5}
    assert tool["t_end"] - tool["t_start"] == pytest.approx(0.3)
    # the final answer is stored as an attachment reference and resolved
    assert traces["refund-1/epoch1"][5]["text"].startswith("Refund issued for order A7.")
    # the messages path has no timing or usage
    assert traces["refund-3/epoch2"][0].get("t_start") is None


def test_timestamp_order_beats_file_order(tmp_path: Path) -> None:
    log = load_log()
    events = log["samples"][1]["events"]
    # the file lists the second lookup before the model call that made it; reversing the timestamps of that pair
    # flips the order of the two steps
    tool = next(e for e in events if e.get("uuid") == "f4")
    model = next(e for e in events if e.get("uuid") == "f3")
    tool["timestamp"], model["timestamp"] = model["timestamp"], tool["timestamp"]
    table = INSPECT_AI.read(write_json_log(tmp_path / "swapped.json", log))
    assert states_by_trace(table)["refund-1/epoch2"] == ["llm", "tool:lookup_order", "tool:lookup_order", "llm",
                                                         "llm"]


def test_include_user() -> None:
    table = INSPECT_AI.read(LOG_JSON, include_user=True)
    states = states_by_trace(table)
    assert states["refund-1/epoch1"] == ["user", *EXPECTED_STATES["refund-1/epoch1"]]
    assert states["refund-3/epoch2"] == ["user", "tool:lookup_order", "tool:check_policy", "user", "llm"]
    assert by_trace(table)["refund-3/epoch2"][3]["text"] == "Did it work?"


# ------------------------------------------------------------------------------------------------ outcome rules
def test_partial_credit_follows_the_threshold() -> None:
    table = INSPECT_AI.read(LOG_JSON, success_threshold=0.5)
    assert table.outcome_counts() == {"success": 3, "failure": 1, "censored": 1, "invalid": 1}
    strict = INSPECT_AI.read(LOG_JSON, success_threshold=1.5)
    assert strict.outcome_counts() == {"success": 0, "failure": 4, "censored": 1, "invalid": 1}


@pytest.mark.parametrize(("value", "reward", "outcome"), [
    ("C", 1.0, "success"), ("I", 0.0, "failure"), ("P", 0.5, "failure"), ("N", 0.0, "failure"),
    (True, 1.0, "success"), (False, 0.0, "failure"), (1, 1.0, "success"), (0.999, 0.999, "failure"),
    ("yes", 1.0, "success"), ("false", 0.0, "failure"), ("0.9999999", 0.9999999, "success"), (2.5, 2.5, "success"),
])
def test_score_values(tmp_path: Path, value: Any, reward: float, outcome: str) -> None:
    path = with_sample_change(tmp_path, 5, scores={"task_check": {"value": value}})
    rec = by_trace(INSPECT_AI.read(path))["refund-3/epoch2"][0]
    assert (rec["reward"], rec["outcome"]) == (pytest.approx(reward), outcome)


@pytest.mark.parametrize("value", ["maybe", {"a": 1}, [1, 0], None, float("nan")])
def test_bad_score_values(tmp_path: Path, value: Any) -> None:
    path = with_sample_change(tmp_path, 5, scores={"task_check": {"value": value}})
    with pytest.raises(TraceValidationError) as err:
        INSPECT_AI.read(path)
    assert err.value.field == "samples[5].scores.task_check.value"
    assert err.value.row == 5 and err.value.source == str(path)
    skipped = INSPECT_AI.read(path, on_error="skip")
    assert skipped.n_traces == 5 and skipped.report.n_traces_skipped == 1


def test_score_to_reward_rules() -> None:
    assert [score_to_reward(v) for v in ("C", "I", "P", "N", " C ", "TRUE", "No", "-1.5", ".5")] == \
        [1.0, 0.0, 0.5, 0.0, 1.0, 1.0, 0.0, -1.5, 0.5]


def test_scorer_choice(tmp_path: Path) -> None:
    log = load_log()
    for s in log["samples"]:
        if s.get("scores"):
            s["scores"]["quality"] = {"value": 1.0}
    path = write_json_log(tmp_path / "two_scorers.json", log)
    for on_error in ("raise", "skip"):  # a configuration problem: raised whatever on_error says
        with pytest.raises(TraceValidationError, match="several scorers") as err:
            INSPECT_AI.read(path, on_error=on_error)
        assert "task_check" in str(err.value) and "quality" in str(err.value)
    quality = INSPECT_AI.read(path, scorer="quality")
    assert quality.outcome_counts() == {"success": 4, "failure": 0, "censored": 1, "invalid": 1}
    same = INSPECT_AI.read(path, scorer="task_check")
    assert same.outcome_counts() == INSPECT_AI.read(LOG_JSON).outcome_counts()
    with pytest.raises(TraceValidationError, match="no sample has a score from scorer 'nope'"):
        INSPECT_AI.read(path, scorer="nope")


def test_error_beats_limit_and_limit_beats_score(tmp_path: Path) -> None:
    path = with_sample_change(tmp_path, 0, limit={"type": "token", "limit": 1000})
    assert by_trace(INSPECT_AI.read(path))["refund-1/epoch1"][0]["outcome"] == "censored"
    assert by_trace(INSPECT_AI.read(path))["refund-1/epoch1"][0]["termination_reason"] == "token"
    assert by_trace(INSPECT_AI.read(path))["refund-1/epoch1"][0]["reward"] == 1.0
    log = load_log()
    log["samples"][2]["error"] = {"message": "boom", "traceback": ""}
    rec = by_trace(INSPECT_AI.read(write_json_log(tmp_path / "both.json", log)))["refund-2/epoch1"][0]
    assert (rec["outcome"], rec["termination_reason"]) == ("invalid", "error")
    rec = by_trace(INSPECT_AI.read(with_sample_change(tmp_path, 0, invalidation={"author": "rev"})))[
        "refund-1/epoch1"][0]
    assert (rec["outcome"], rec["termination_reason"]) == ("invalid", "invalidated")


def test_unscored_sample_is_not_guessed(tmp_path: Path) -> None:
    path = with_sample_change(tmp_path, 0, scores=None)
    with pytest.raises(TraceValidationError, match="outcome is unknown") as err:
        INSPECT_AI.read(path)
    assert err.value.row == 0
    table = INSPECT_AI.read(path, on_error="skip")
    assert table.n_traces == 5 and table.report.n_traces_skipped == 1
    assert "refund-1/epoch1" not in table.trace_ids


# ------------------------------------------------------------------------------------------------ folders
def test_folder_of_logs(tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    write_json_log(folder / "a.json", load_log())
    other = load_log()
    other["eval"]["eval_id"] = "ev-toy-0002"
    write_eval_log(folder / "b.eval", other)
    (folder / "logs.json").write_text(json.dumps({"a.json": {k: v for k, v in load_log().items()
                                                             if k != "samples"}}))  # inspect's listing file
    (folder / "notes.txt").write_text("not a log")
    assert INSPECT_AI.sniff(folder)
    assert detect_format(folder) == "inspect-ai"
    table = INSPECT_AI.read(folder)
    assert table.n_traces == 12
    assert "ev-toy-0001:refund-1/epoch1" in table.trace_ids and "ev-toy-0002:refund-1/epoch1" in table.trace_ids
    assert set(table.trace_column("task_id").to_pylist()) == {"refund-1", "refund-2", "refund-3"}
    # logs of two different tasks: task ids are qualified by the task so equal sample ids are not merged
    other["eval"]["task"] = "other_task"
    write_eval_log(folder / "b.eval", other)
    tasks = set(INSPECT_AI.read(folder).trace_column("task_id").to_pylist())
    assert {"toy_refunds/refund-1", "other_task/refund-1"} <= tasks


def test_folder_without_logs(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text("[]")
    assert not INSPECT_AI.sniff(tmp_path)
    with pytest.raises(TraceValidationError, match="no inspect_ai log"):
        INSPECT_AI.read(tmp_path)


# ------------------------------------------------------------------------------------------------ zip safety
def test_compressible_member_hits_the_member_cap(tmp_path: Path) -> None:
    log = load_log()
    log["samples"][0]["metadata"] = {"pad": "a" * (8 * 1024 * 1024)}  # ~8 MiB that deflates to a few KiB
    path = write_eval_log(tmp_path / "bomb.eval", log)
    assert path.stat().st_size < 200_000
    with pytest.raises(TraceValidationError, match="1,048,576-byte cap") as err:
        INSPECT_AI.read(path, max_member_bytes=1024 * 1024)
    assert err.value.source == f"{path}!samples/refund-1_epoch_1.json"
    assert INSPECT_AI.read(path, max_member_bytes=16 * 1024 * 1024).n_traces == 6


def test_lying_declared_size_hits_the_cap_while_streaming(tmp_path: Path) -> None:
    log = load_log()
    log["samples"][0]["metadata"] = {"pad": "a" * (4 * 1024 * 1024)}
    path = write_eval_log(tmp_path / "liar.eval", log)
    member = "samples/refund-1_epoch_1.json"
    patch_zip_member(path, member, declared_size=100)  # claims 100 bytes, inflates to > 4 MiB
    with zipfile.ZipFile(path) as zf:
        assert zf.getinfo(member).file_size == 100
    with pytest.raises(TraceValidationError, match="decompresses to more than the 1,048,576-byte cap") as err:
        INSPECT_AI.read(path, max_member_bytes=1024 * 1024)
    assert err.value.source == f"{path}!{member}"
    with pytest.raises(TraceValidationError, match="takes the decompressed log over") as err:
        INSPECT_AI.read(path, max_decompressed_bytes=2 * 1024 * 1024)
    assert err.value.source == f"{path}!{member}"


def test_total_cap_over_many_members(tmp_path: Path, eval_log: Path) -> None:
    with zipfile.ZipFile(eval_log) as zf:
        sizes = {i.filename: i.file_size for i in zf.infolist()}
    largest = max(sizes.values())
    with pytest.raises(TraceValidationError, match=r"over the .*-byte cap|takes the decompressed log over"):
        INSPECT_AI.read(eval_log, max_decompressed_bytes=largest + 10)  # each member fits, all of them do not
    assert INSPECT_AI.read(eval_log, max_decompressed_bytes=sum(sizes.values())).n_traces == 6


def test_json_log_size_cap() -> None:
    with pytest.raises(TraceValidationError, match="limit"):
        INSPECT_AI.read(LOG_JSON, max_decompressed_bytes=1000)


@pytest.mark.parametrize("name", ["../evil.json", "/etc/evil.json", "samples/../../evil.json", "C:/evil.json"])
def test_unsafe_member_names_are_rejected(tmp_path: Path, name: str) -> None:
    path = tmp_path / "unsafe.eval"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("header.json", json.dumps({k: v for k, v in load_log().items() if k != "samples"}))
        zf.writestr(zipfile.ZipInfo(name), "{}")
    with pytest.raises(TraceValidationError, match="unsafe name") as err:
        INSPECT_AI.read(path, on_error="skip")
    assert err.value.source == str(path) and name in str(err.value)


def test_corrupt_member_and_unknown_compression(tmp_path: Path) -> None:
    path = write_eval_log(tmp_path / "crc.eval", load_log())
    member = "samples/refund-2_epoch_1.json"
    patch_zip_member(path, member, declared_size=50)  # truthful data, wrong size: zipfile stops early → bad CRC
    # (the declared size is not trusted: the member is read to its real end, so this one is accepted)
    assert INSPECT_AI.read(path).n_traces == 6
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(member)
    data_start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    raw[data_start + 5] ^= 0xFF  # flip bits inside the compressed stream
    path.write_bytes(bytes(raw))
    with pytest.raises(TraceValidationError, match="corrupt") as err:
        INSPECT_AI.read(path)
    assert err.value.source == f"{path}!{member}"
    zstd = write_eval_log(tmp_path / "zstd.eval", load_log())
    patch_zip_member(zstd, member, method=93)
    with pytest.raises(TraceValidationError, match="compression method") as err:
        INSPECT_AI.read(zstd)
    assert "inspect log convert" in str(err.value)


def test_not_a_zip(tmp_path: Path) -> None:
    path = tmp_path / "fake.eval"
    path.write_bytes(b"PK\x03\x04 not really a zip")
    assert not INSPECT_AI.sniff(path)
    with pytest.raises(TraceValidationError, match="zip"):
        INSPECT_AI.read(path)


# ------------------------------------------------------------------------------------------------ bad input
def test_missing_epoch_names_the_field(tmp_path: Path) -> None:
    path = with_sample_change(tmp_path, 3, epoch=_DELETE)
    with pytest.raises(TraceValidationError) as err:
        INSPECT_AI.read(path)
    assert (err.value.field, err.value.row, err.value.source) == ("samples[3].epoch", 3, str(path))
    table = INSPECT_AI.read(path, on_error="skip")
    assert table.n_traces == 5 and table.report.n_traces_skipped == 1


def test_bad_fields_inside_a_sample_in_an_eval_member(tmp_path: Path) -> None:
    log = load_log()
    ev = next(e for e in log["samples"][0]["events"] if e["event"] == "tool")
    ev["function"] = 123
    model = next(e for e in log["samples"][1]["events"] if e["event"] == "model")
    model["output"]["usage"]["input_tokens"] = "lots"
    path = write_eval_log(tmp_path / "bad.eval", log)
    with pytest.raises(TraceValidationError) as err:
        INSPECT_AI.read(path)
    assert err.value.source == f"{path}!samples/refund-1_epoch_1.json"
    assert err.value.field is not None and err.value.field.startswith("events[") \
        and err.value.field.endswith("].function")
    table = INSPECT_AI.read(path, on_error="skip")
    assert table.n_traces == 4 and table.report.n_traces_skipped == 2


@pytest.mark.parametrize(("change", "fieldname"), [
    ({"events": "nope"}, "samples[0].events"),
    ({"events": [42]}, "samples[0].events[0]"),
    ({"scores": ["C"]}, "samples[0].scores"),
    ({"limit": 7}, "samples[0].limit"),
    ({"id": None}, "samples[0].id"),
    ({"epoch": "1"}, "samples[0].epoch"),
])
def test_wrong_types_raise_located_errors(tmp_path: Path, change: dict[str, Any], fieldname: str) -> None:
    path = with_sample_change(tmp_path, 0, **change)
    with pytest.raises(TraceValidationError) as err:
        INSPECT_AI.read(path)
    assert err.value.field == fieldname


def test_bad_timestamp(tmp_path: Path) -> None:
    log = load_log()
    log["samples"][0]["events"][1]["timestamp"] = "yesterday"
    with pytest.raises(TraceValidationError, match="ISO-8601") as err:
        INSPECT_AI.read(write_json_log(tmp_path / "ts.json", log))
    assert err.value.field == "samples[0].events[1].timestamp"


def test_sample_without_steps_is_kept_as_a_zero_step_trial(tmp_path: Path) -> None:
    path = with_sample_change(tmp_path, 4, events=[], messages=[])
    table = INSPECT_AI.read(path)
    assert table.n_traces == 5 and table.report.n_traces_skipped == 0
    assert "refund-3/epoch1" not in table.trace_ids
    assert table.report.zero_step == [{"trace_id": "refund-3/epoch1", "task_id": "refund-3", "trial": 1,
                                       "outcome": "invalid", "termination_reason": "error"}]


def test_duplicate_sample(tmp_path: Path) -> None:
    log = load_log()
    log["samples"].append(copy.deepcopy(log["samples"][0]))
    path = write_json_log(tmp_path / "dup.json", log)
    with pytest.raises(TraceValidationError, match="appears twice"):
        INSPECT_AI.read(path)
    assert INSPECT_AI.read(path, on_error="skip").n_traces == 6


def test_log_without_samples(tmp_path: Path) -> None:
    log = load_log()
    del log["samples"]
    with pytest.raises(TraceValidationError, match="no samples"):
        INSPECT_AI.read(write_json_log(tmp_path / "header_only.json", log))


def test_top_level_not_an_object(tmp_path: Path) -> None:
    path = tmp_path / "list.json"
    path.write_text("[1, 2]")
    with pytest.raises(TraceValidationError, match="JSON object"):
        INSPECT_AI.read(path)


def test_options_are_checked() -> None:
    with pytest.raises(TypeError):
        INSPECT_AI.read(LOG_JSON, no_such_option=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        INSPECT_AI.read(LOG_JSON, max_member_bytes=0)
    with pytest.raises(TypeError):
        INSPECT_AI.read(LOG_JSON, success_threshold="high")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        INSPECT_AI.read(LOG_JSON, on_error="ignore")


# ------------------------------------------------------------------------------------------------ sniffing
def test_sniff_recognises_inspect_logs(eval_log: Path) -> None:
    assert INSPECT_AI.sniff(LOG_JSON)
    assert INSPECT_AI.sniff(eval_log)
    assert detect_format(LOG_JSON) == "inspect-ai"
    assert detect_format(eval_log) == "inspect-ai"
    assert tt.read_traces(eval_log).report.format == "inspect-ai"


def test_sniff_recognises_running_and_legacy_archives(tmp_path: Path) -> None:
    log = load_log()
    path = tmp_path / "running.eval"
    with zipfile.ZipFile(path, "w") as zf:  # an eval still in progress: only the journal so far
        zf.writestr("_journal/start.json", json.dumps({"version": 2, "eval": log["eval"], "plan": log["plan"]}))
        zf.writestr("samples/refund-1_epoch_1.json", json.dumps(log["samples"][0]))
    assert INSPECT_AI.sniff(path)
    table = INSPECT_AI.read(path)
    assert table.trace_ids == ["refund-1/epoch1"]


def test_sniff_does_not_claim_other_files(tmp_path: Path) -> None:
    canonical = tmp_path / "canonical.jsonl"
    canonical.write_text("\n".join(json.dumps({"trace_id": "a", "step_idx": i, "state": "plan",
                                               "outcome": "success", "task": "t", "model": "m"})
                                   for i in range(3)) + "\n")
    assert not INSPECT_AI.sniff(canonical)
    array = tmp_path / "canonical.json"
    array.write_text(json.dumps([{"trace_id": "a", "step_idx": 0, "state": "plan", "outcome": "success"}]))
    assert not INSPECT_AI.sniff(array)
    listing = tmp_path / "logs.json"  # inspect's log-directory listing: keyed by file name, not a log
    listing.write_text(json.dumps({"x.eval": {k: v for k, v in load_log().items() if k != "samples"}}))
    assert not INSPECT_AI.sniff(listing)
    plain_zip = tmp_path / "other.eval"
    with zipfile.ZipFile(plain_zip, "w") as zf:
        zf.writestr("readme.txt", "hello")
    assert not INSPECT_AI.sniff(plain_zip)
    renamed = tmp_path / "toy.jsonl"
    renamed.write_text(LOG_JSON.read_text())
    assert not INSPECT_AI.sniff(renamed)


def test_sniff_does_not_claim_real_data_of_other_formats(shared_data: Path) -> None:
    checked = 0
    others = sorted(p for p in shared_data.rglob("*.json") if "inspect-ai-logs" not in p.parts)
    for path in others[:300]:
        assert not INSPECT_AI.sniff(path), path
        checked += 1
    assert checked > 0


#: The shared logs written by inspect_ai itself, with the counts their README states: samples, steps of the one
#: agent sample, scored outcomes.
REAL_LOGS = {
    "log_streaming.eval": {"traces": 4, "success": 3, "failure": 1},
    "log_message_deduplication.eval": {"traces": 1, "success": 0, "failure": 1, "steps": 11},
    "log_read_sample.eval": {"traces": 1},
    "log_read_sample.json": {"traces": 1},
    "log_formats.eval": {"traces": 1},
}


@pytest.mark.parametrize("name", sorted(REAL_LOGS))
def test_real_inspect_logs_are_detected_and_counted(shared_data: Path, name: str) -> None:
    """Logs written by inspect_ai (its own test fixtures, copied byte for byte): detected, every sample kept,
    outcomes as the README states."""
    path = shared_data / "inspect-ai-logs" / name
    assert detect_format(path) == "inspect-ai"
    table = tt.read_traces(path)
    expected = REAL_LOGS[name]
    assert table.n_traces == expected["traces"]
    assert table.report.n_traces_skipped == 0
    counts = table.outcome_counts()
    assert sum(counts.values()) == expected["traces"]
    for outcome in ("success", "failure"):
        if outcome in expected:
            assert counts[outcome] == expected[outcome]
    if "steps" in expected:
        assert table.n_steps == expected["steps"]


def test_real_log_in_both_formats_reads_the_same(shared_data: Path) -> None:
    folder = shared_data / "inspect-ai-logs"
    # The two files were written by separate runs of the same sample, so only the clock times differ.
    a = tt.read_traces(folder / "log_read_sample.eval").to_arrow().drop_columns(["t_start", "t_end"])
    b = tt.read_traces(folder / "log_read_sample.json").to_arrow().drop_columns(["t_start", "t_end"])
    assert a.to_pylist() == b.to_pylist()


def test_real_unscored_log_is_refused_or_skipped_and_counted(shared_data: Path) -> None:
    path = shared_data / "inspect-ai-logs" / "log_tool_call_error.json"
    with pytest.raises(TraceValidationError, match="no score"):
        tt.read_traces(path)
    table = tt.read_traces(path, on_error="skip")
    assert table.n_traces == 0
    assert table.report.n_traces_skipped == 1
