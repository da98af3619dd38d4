"""TraceTable: reading, writing, validation at the door, skip-and-count."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import tracetochain as tt
from tracetochain.exceptions import TraceValidationError

MINIMAL = [
    {"trace_id": "a", "step_idx": 0, "state": "plan", "outcome": "success"},
    {"trace_id": "a", "step_idx": 1, "state": "act", "outcome": "success"},
    {"trace_id": "b", "step_idx": 0, "state": "plan", "outcome": "failure"},
    {"trace_id": "c", "step_idx": 0, "state": "act", "outcome": "censored"},
    {"trace_id": "c", "step_idx": 1, "state": "act", "outcome": "censored"},
]


def write_jsonl(path: Path, records: list[dict], raw_lines: dict[int, str] | None = None) -> Path:
    lines = [json.dumps(r) for r in records]
    for i, text in (raw_lines or {}).items():
        lines.insert(i, text)
    path.write_text("\n".join(lines) + "\n")
    return path


def test_minimal_jsonl(tmp_path: Path) -> None:
    t = tt.read_traces(write_jsonl(tmp_path / "t.jsonl", MINIMAL))
    assert (t.n_traces, t.n_steps) == (3, 5)
    assert t.trace_ids == ["a", "b", "c"]
    assert t.outcome_counts() == {"success": 1, "failure": 1, "censored": 1, "invalid": 0}
    codes, names = t.state_labels()
    assert names == ["plan", "act"]
    assert codes.tolist() == [0, 1, 0, 1, 1]
    assert t.report.n_records == 5 and t.report.n_records_skipped == 0


@pytest.mark.parametrize("ext", [".jsonl", ".csv", ".parquet"])
def test_round_trip(tmp_path: Path, ext: str) -> None:
    records = [dict(r, task_id="task1", trial=i % 2, reward=1.0 if r["outcome"] == "success" else 0.0,
                    step_kind="tool", tool_name="search", error=bool(i % 2), tokens_in=10 * i)
               for i, r in enumerate(MINIMAL)]
    # trace-level fields must agree within a trace: give each trace one trial
    for r in records:
        r["trial"] = {"a": 0, "b": 1, "c": 2}[r["trace_id"]]
    t = tt.TraceTable.from_records(records)
    path = t.write(tmp_path / f"out{ext}")
    back = tt.read_traces(path)
    assert back.n_traces == 3 and back.n_steps == 5
    for col in ("trace_id", "step_idx", "outcome", "state", "task_id", "trial", "error", "tokens_in", "reward"):
        assert back.to_arrow().column(col).to_pylist() == t.to_arrow().column(col).to_pylist(), col


def test_sorts_steps_and_keeps_first_appearance_order() -> None:
    recs = [MINIMAL[4], MINIMAL[1], MINIMAL[2], MINIMAL[0], MINIMAL[3]]
    t = tt.TraceTable.from_records(recs)
    assert t.trace_ids == ["c", "a", "b"]
    assert t.to_arrow().column("step_idx").to_pylist() == [0, 1, 0, 1, 0]
    assert t.offsets.tolist() == [0, 2, 4, 5]


def test_from_pandas_and_polars() -> None:
    df = pd.DataFrame(MINIMAL)
    a = tt.TraceTable.from_dataframe(df)
    b = tt.TraceTable.from_dataframe(pl.DataFrame(MINIMAL))
    c = tt.TraceTable.from_dataframe(pa.Table.from_pylist(MINIMAL))
    for t in (a, b, c):
        assert t.n_traces == 3 and t.outcome_counts()["censored"] == 1
    with pytest.raises(TypeError, match="DataFrame"):
        tt.TraceTable.from_dataframe([1, 2, 3])


def test_default_state_from_step_kind_and_tool() -> None:
    t = tt.TraceTable.from_records([
        {"trace_id": "x", "step_idx": 0, "step_kind": "llm", "outcome": "success"},
        {"trace_id": "x", "step_idx": 1, "step_kind": "TOOL", "tool_name": "search", "outcome": "success"},
        {"trace_id": "x", "step_idx": 2, "step_kind": "tool", "tool_name": "", "outcome": "success"},
    ])
    assert t.state_labels()[1] == ["llm", "tool:search", "tool"]


def test_outcome_is_case_and_space_insensitive() -> None:
    t = tt.TraceTable.from_records([{"trace_id": "x", "step_idx": 0, "state": "s", "outcome": " Success "}])
    assert t.outcome_counts()["success"] == 1


def test_integer_trace_ids_are_text() -> None:
    t = tt.TraceTable.from_records([{"trace_id": 7, "step_idx": 0, "state": "s", "outcome": "failure"}])
    assert t.trace_ids == ["7"]


# ------------------------------------------------------------------------------------------ errors at the door
def test_malformed_jsonl_line_names_file_and_line(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "bad.jsonl", MINIMAL, {2: '{"trace_id": "a", "step_idx": 2,'})
    with pytest.raises(TraceValidationError) as info:
        tt.read_traces(path)
    msg = str(info.value)
    assert f"{path}:3" in msg and "not valid JSON" in msg and "on_error='skip'" in msg
    assert info.value.line == 3


def test_malformed_line_skipped_and_counted(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "bad.jsonl", MINIMAL, {2: "not json at all", 4: "[1, 2]"})
    t = tt.read_traces(path, on_error="skip")
    assert t.n_steps == 5
    assert t.report.n_records == 7 and t.report.n_records_skipped == 2
    assert {p.location for p in t.report.problems} == {3, 5}


def test_unknown_outcome_names_line_field_and_fix(tmp_path: Path) -> None:
    recs = [dict(r) for r in MINIMAL]
    recs[2]["outcome"] = "passed"
    path = write_jsonl(tmp_path / "t.jsonl", recs)
    with pytest.raises(TraceValidationError) as info:
        tt.read_traces(path)
    e = info.value
    assert (e.line, e.field) == (3, "outcome")
    assert "unknown outcome 'passed'" in str(e) and "success, failure, censored, invalid" in str(e)


def test_skip_drops_whole_trace_and_counts() -> None:
    recs = [dict(r) for r in MINIMAL]
    recs[1]["outcome"] = "failure"  # trace a: outcome disagrees between its two steps
    recs[3]["step_idx"] = "first"  # trace c: wrong type
    t = tt.TraceTable.from_records(recs, on_error="skip")
    assert t.trace_ids == ["b"]
    rep = t.report
    assert rep.n_traces_skipped == 2 and rep.n_records_skipped == 4
    assert rep.skipped_by_reason == {"outcome differs between steps of one trace": 2,
                                     "expected an integer, got 'first'": 2}
    assert "4 records skipped (2 traces dropped whole)" in str(rep)


@pytest.mark.parametrize(
    ("change", "field", "needle"),
    [
        ({"trace_id": None}, "trace_id", "trace_id is empty"),
        ({"step_idx": -1}, "step_idx", "negative"),
        ({"step_idx": 1.5}, "step_idx", "expected an integer"),
        ({"step_idx": 0}, "step_idx", "repeats"),
        ({"outcome": None}, "outcome", "outcome is empty"),
        ({"state": None}, "state", "state is empty"),
        ({"trial": "two"}, "trial", "expected an integer"),
        ({"error": "maybe"}, "error", "true/false"),
        ({"step_kind": "thinking"}, "step_kind", "unknown step_kind"),
        ({"cost_usd": -0.5}, "cost_usd", "finite number between 0"),
        ({"tokens_in": -3}, "tokens_in", "finite number between 0"),
        ({"cost_usd": float("inf")}, "cost_usd", "finite number between 0"),
    ],
)
def test_each_bad_field_is_named(change: dict, field: str, needle: str) -> None:
    recs = [dict(r) for r in MINIMAL]
    recs[1].update(change)
    with pytest.raises(TraceValidationError) as info:
        tt.TraceTable.from_records(recs)
    assert info.value.field == field
    assert needle in str(info.value)
    assert "row" in str(info.value)


def test_broken_usage_drops_its_trace_in_skip_mode() -> None:
    recs = [dict(r) for r in MINIMAL]
    recs[0]["cost_usd"] = float("nan")
    t = tt.TraceTable.from_records(recs, on_error="skip")
    assert t.report.skipped_by_reason == {"cost_usd negative, too large or not finite": 2}
    assert t.trace_ids == ["b", "c"]


def test_missing_required_column(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("trace_id,step_idx,state\na,0,plan\n")
    with pytest.raises(TraceValidationError, match="'outcome' is missing from every record"):
        tt.read_traces(path)


def test_no_state_source() -> None:
    with pytest.raises(TraceValidationError, match="neither 'state' nor 'step_kind'"):
        tt.TraceTable.from_records([{"trace_id": "a", "step_idx": 0, "outcome": "success"}])


def test_csv_error_reports_file_line(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("trace_id,step_idx,state,outcome\na,0,plan,success\na,1,act,win\n")
    with pytest.raises(TraceValidationError) as info:
        tt.read_traces(path)
    assert info.value.line == 3 and f"{path}:3" in str(info.value)


def test_unknown_extension_and_missing_file(tmp_path: Path) -> None:
    (tmp_path / "t.xml").write_text("<traces/>")
    with pytest.raises(TraceValidationError, match="no reader recognised this file"):
        tt.read_traces(tmp_path / "t.xml")
    with pytest.raises(TraceValidationError, match="unknown file extension"):
        tt.TraceTable.read(tmp_path / "t.xml")
    with pytest.raises(TraceValidationError, match="no such file"):
        tt.read_traces(tmp_path / "nope.jsonl")


def test_empty_file_gives_empty_table(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("\n")
    empty = tt.read_traces(path)
    assert empty.n_traces == 0 and empty.report.n_records == 0
    with pytest.raises(tt.exceptions.EmptyTraceSetError, match="no traces to fit"):
        tt.ChainEstimator().fit(empty)
    t = tt.TraceTable.from_dataframe(pa.table({"trace_id": pa.array([], pa.string()),
                                               "step_idx": pa.array([], pa.int64()),
                                               "state": pa.array([], pa.string()),
                                               "outcome": pa.array([], pa.string())}))
    assert t.n_traces == 0 and t.n_steps == 0
    assert t.outcome_counts()["success"] == 0


def test_extra_columns_travel_along() -> None:
    recs = [dict(r, span_id=f"s{i}") for i, r in enumerate(MINIMAL)]
    t = tt.TraceTable.from_records(recs)
    assert "span_id" in t.columns


def test_iso_timestamps_become_epoch_seconds() -> None:
    t = tt.TraceTable.from_records([{"trace_id": "a", "step_idx": 0, "state": "s", "outcome": "success",
                                     "t_start": "2026-01-01T00:00:01Z", "t_end": 1767225602.5}])
    assert t.to_arrow().column("t_start").to_pylist() == [1767225601.0]
    assert np.isclose(t.to_arrow().column("t_end")[0].as_py(), 1767225602.5)


def test_bundled_example_loads() -> None:
    t = tt.datasets.load_example("tau_airline")
    assert t.n_traces == 200
    assert t.outcome_counts() == {"success": 84, "failure": 116, "censored": 0, "invalid": 0}
    assert set(t.trace_column("trial").to_pylist()) == {0, 1, 2, 3}
