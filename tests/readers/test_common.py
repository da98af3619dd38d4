"""Shared reader plumbing: ``TraceTable.from_arrow``, ``TraceBuilder.skip_trace(source=)``, the helpers moved into
``readers/_common.py``, and table building that tolerates values Arrow cannot hold."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import tracetochain as tt
from tracetochain.exceptions import TraceValidationError
from tracetochain.readers import read_traces
from tracetochain.readers._common import (
    MISSING,
    JSONLimitError,
    TraceBuilder,
    add_float,
    add_int,
    iso_seconds,
    json_loads,
    lookup,
    parse_success_values,
    read_record_head,
    records_to_arrow,
    verdict_to_outcome,
)
from tracetochain.readers.langfuse import LANGFUSE
from tracetochain.readers.swe_agent import SWE_AGENT
from tracetochain.traces._table import Problem

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "readers"
RECORDS = [
    {"trace_id": "a", "step_idx": 0, "state": "plan", "outcome": "success"},
    {"trace_id": "a", "step_idx": 1, "state": "act", "outcome": "success"},
    {"trace_id": "b", "step_idx": 0, "state": "plan", "outcome": "failure"},
]


# ================================================================================================ from_arrow
def test_from_arrow_matches_from_records() -> None:
    a = tt.TraceTable.from_arrow(pa.Table.from_pylist(RECORDS), source="mem", format="demo")
    r = tt.TraceTable.from_records(RECORDS)
    assert (a.n_traces, a.n_steps, a.trace_ids) == (r.n_traces, r.n_steps, r.trace_ids)
    assert np.array_equal(a.outcomes(), r.outcomes()) and a.state_labels()[1] == r.state_labels()[1]
    assert (a.report.source, a.report.format, a.report.location_kind) == ("mem", "demo", "row")


def test_from_arrow_names_location_and_counts_reader_problems() -> None:
    bad = pa.Table.from_pylist([*RECORDS, {"trace_id": "c", "step_idx": 0, "state": "x", "outcome": "won"}])
    with pytest.raises(TraceValidationError, match="unknown outcome 'won'") as err:
        tt.TraceTable.from_arrow(bad, source="t.jsonl", locations=[2, 3, 5, 7], location_kind="line")
    assert (err.value.source, err.value.line, err.value.field) == ("t.jsonl", 7, "outcome")
    t = tt.TraceTable.from_arrow(bad, on_error="skip", locations=np.array([2, 3, 5, 7]), location_kind="line",
                                 problems=[Problem(4, None, "not valid JSON (x)", whole_trace=False)])
    assert t.trace_ids == ["a", "b"]
    assert t.report.n_records == 5 and t.report.n_records_skipped == 2 and t.report.n_traces_skipped == 1
    assert t.report.skipped_by_reason == {"not valid JSON": 1, "unknown outcome 'won'": 1}


def test_from_arrow_rejects_bad_arguments() -> None:
    table = pa.Table.from_pylist(RECORDS)
    with pytest.raises(TypeError, match="pyarrow Table"):
        tt.TraceTable.from_arrow(RECORDS)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="one entry per row"):
        tt.TraceTable.from_arrow(table, locations=[1, 2])
    with pytest.raises(ValueError, match="on_error"):
        tt.TraceTable.from_arrow(table, on_error="ignore")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="location_kind"):
        tt.TraceTable.from_arrow(table, location_kind="cell")


# ================================================================================================ skip_trace(source=)
def test_skip_trace_names_the_file_of_a_multi_file_source(tmp_path: Path) -> None:
    file = tmp_path / "run" / "i-1" / "i-1.traj"
    raising = TraceBuilder(str(tmp_path), "demo", "raise")
    with pytest.raises(TraceValidationError) as err:
        raising.skip_trace("no verdict", field="instance_id", source=file)
    assert err.value.source == str(file) and str(err.value).startswith(f"{file}: field 'instance_id'")
    skipping = TraceBuilder(str(tmp_path), "demo", "skip")
    skipping.skip_trace("no verdict", location=3, source=file)
    skipping.skip_trace("no verdict", location=4)
    assert [p.message for p in skipping.problems] == ["no verdict (run/i-1/i-1.traj)", "no verdict"]
    skipping.add_step(RECORDS[0])
    report = skipping.build().report
    assert report.n_traces_skipped == 2 and report.skipped_by_reason == {"no verdict": 2}


def test_swe_agent_errors_name_the_trajectory_file() -> None:
    run = FIXTURES / "swe_agent" / "sweagent_run"
    with pytest.raises(TraceValidationError) as err:
        SWE_AGENT.read(run)
    assert err.value.source == str(run / "demo__pkg-303" / "demo__pkg-303.traj")
    t = SWE_AGENT.read(run, on_error="skip")
    assert t.report.problems[0].message.endswith("(demo__pkg-303/demo__pkg-303.traj)")
    assert list(t.report.skipped_by_reason) == ["no SWE-bench verdict for this instance"]


def test_tau2_folder_errors_name_the_simulation_file(tmp_path: Path) -> None:
    info = {"num_trials": 1, "max_steps": 30, "user_info": {"llm": "u"}, "agent_info": {"llm": "a"}}
    (tmp_path / "simulations").mkdir()
    (tmp_path / "results.json").write_text(json.dumps({"timestamp": "t", "info": info, "tasks": []}))
    sim = {"id": "s1", "task_id": "1", "trial": 0, "termination_reason": "user_stop", "reward_info": {"reward": 1.0},
           "messages": [{"role": "assistant", "content": "hi"}]}
    (tmp_path / "simulations" / "s1.json").write_text(json.dumps(sim))
    (tmp_path / "simulations" / "s2.json").write_text(json.dumps({**sim, "id": "s2", "task_id": None}))
    (tmp_path / "simulations" / "s3.json").write_text('{"id": "s3",\n "task_id": ')
    with pytest.raises(TraceValidationError) as err:
        read_traces(tmp_path)
    assert err.value.source == str(tmp_path / "simulations" / "s2.json") and err.value.field == "task_id"
    t = read_traces(tmp_path, on_error="skip")
    assert t.trace_ids == ["s1"] and t.report.n_traces_skipped == 2
    assert t.report.skipped_by_reason == {"simulation has no task_id": 1, "unreadable simulation file": 1}
    assert any(p.message.endswith("(simulations/s3.json)") for p in t.report.problems)


# ================================================================================================ shared helpers
def test_helpers_shared_by_several_readers() -> None:
    assert verdict_to_outcome("Passed", None, 1.0) == ("success", None)
    huge = verdict_to_outcome(10**400, None, 1.0)
    assert isinstance(huge, str) and huge.endswith("… is not a finite number") and len(huge) < 120
    assert verdict_to_outcome("ok", frozenset({"ok"}), 1.0) == ("success", None)
    assert iso_seconds("2026-01-01T00:00:00.123456789Z") == pytest.approx(1767225600.123456)
    assert iso_seconds(1_767_225_600_000_000_000) == pytest.approx(1767225600.0)
    with pytest.raises(ValueError):
        iso_seconds(float("inf"))
    assert lookup({"metadata": '{"task": {"id": 7}}'}, "metadata.task.id") == 7
    assert lookup({"a": 1}, "b") is MISSING and lookup(None, "a") is MISSING
    assert parse_success_values("ok, Fine") == frozenset({"ok", "fine"})
    assert add_int(None, None) is None and add_int(2, None) == 2 and add_float(1.5, 2.0) == 3.5
    head = read_record_head('[{"task_id": 1, "traj": [')
    assert head is not None and head.container == "list" and head.keys == {"task_id": "", "traj": "["}


def test_old_import_locations_still_work() -> None:
    from tracetochain.readers.openai_messages import RecordHead
    from tracetochain.readers.openai_messages import read_record_head as old

    assert old is read_record_head and RecordHead is type(read_record_head("{}"))


def test_json_loads_turns_parser_limits_into_decode_errors() -> None:
    with pytest.raises(JSONLimitError, match="nested too deeply") as err:
        json_loads("[" * 100_000 + "]" * 100_000)
    assert isinstance(err.value, json.JSONDecodeError) and err.value.lineno == 1
    with pytest.raises(JSONLimitError, match="number is too long"):
        json_loads(b'{"n": ' + b"9" * 5000 + b"}")
    with pytest.raises(UnicodeDecodeError):
        json_loads(b'"\xff"')
    assert json_loads('{"n": 1}') == {"n": 1}


def test_langfuse_missing_task_attribute_is_no_task() -> None:
    """A path that is not there was compared with another module's "missing" marker and crashed json.dumps."""
    t = LANGFUSE.read(FIXTURES / "langfuse" / "trace_download.json", task_attribute="metadata.nope")
    assert t.n_traces == 1 and t.trace_column("task_id").to_pylist() == [None]


def test_records_to_arrow_keeps_values_arrow_cannot_hold_as_text() -> None:
    table = records_to_arrow([{"a": 2**64, "t": "x\ud800"}, {"a": 1, "t": "ok"}, {}])
    assert table.column("a").to_pylist() == [str(2**64), "1", None]
    assert table.column("t").to_pylist() == ["x?", "ok", None]
    empty = records_to_arrow([{}, {}])
    assert empty.num_rows == 2 and set(empty.column_names) == {"trace_id", "step_idx", "state", "outcome"}


def test_canonical_reader_reports_its_name(tmp_path: Path) -> None:
    t = read_traces(tt.datasets.example_path("tau_airline"))
    assert t.report.format == "canonical" and t.n_traces == 200
    src = tmp_path / "t.jsonl"
    src.write_bytes(b'\xef\xbb\xbf{"trace_id": "a", "step_idx": 0, "state": "s", "outcome": "success"}\n')
    assert read_traces(src, format="canonical").n_traces == 1  # a byte-order mark is tolerated
