"""MAST-style step-label CSV reader.

There is no producer to install: the format is the step-label CSV people write by hand or from a spreadsheet when
annotating traces (the MAST data set itself ships raw console logs, not this table), so the fixtures are written
here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import tracetochain as tt
from tracetochain.exceptions import TraceValidationError
from tracetochain.readers import detect_format, read_traces
from tracetochain.readers.mast_csv import MAST_CSV

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "readers" / "mast_csv" / "steps.csv"


def write(tmp_path: Path, text: str, name: str = "steps.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_fixture() -> None:
    assert detect_format(FIXTURE) == "mast-csv"
    t = read_traces(FIXTURE)
    assert t.report.format == "mast-csv"
    assert t.trace_ids == ["t001", "t002", "t003", "t004", "t005"]
    # failure, solved → success, ends on continue → censored, Success, timeout → failure (the paper's adapter)
    assert t.trace_column("outcome").to_pylist() == ["failure", "success", "censored", "success", "failure"]
    assert t.trace_column("task_id").to_pylist() == ["retail-17", "retail-17", "airline-3", "airline-3", "airline-9"]
    assert t.trace_column("trial").to_pylist() == [0, 1, 0, 1, 0]
    arrow = t.to_arrow()
    assert arrow.column("state").to_pylist()[:3] == ["plan", "tool_call", "reflect"]
    assert arrow.column("tool_name").to_pylist()[1] == "lookup_order"  # the `tool` column is tool_name
    assert arrow.column("error").to_pylist()[:3] == [False, True, False]
    # t003's rows are out of order in the file: sorted by step_idx
    t003 = [r for r in arrow.to_pylist() if r["trace_id"] == "t003"]
    assert [(r["step_idx"], r["state"]) for r in t003] == [(0, "plan"), (1, "tool_call")]
    assert t.state_labels()[1] == ["plan", "tool_call", "reflect", "respond", "tool_call, retry"]


def test_canonical_csv_goes_to_the_canonical_reader(tmp_path: Path) -> None:
    canonical = write(tmp_path, "trace_id,step_idx,state,outcome\na,0,plan,success\na,1,act,success\n", "c.csv")
    assert not MAST_CSV.sniff(canonical)
    assert detect_format(canonical) == "canonical"
    # the mast reader still reads it when asked: a trace whose rows repeat its terminal label
    assert MAST_CSV.read(canonical).trace_column("outcome").to_pylist() == ["success"]
    assert not MAST_CSV.sniff(write(tmp_path, "a,b\n1,continue\n", "other.csv"))
    assert not MAST_CSV.sniff(write(tmp_path, "trace_id,step_idx,state,outcome\n", "head_only.csv"))
    txt = write(tmp_path, "trace_id,step_idx,state,outcome\na,0,x,continue\n", "steps.txt")
    assert not MAST_CSV.sniff(txt)


def test_terminal_label_before_last_step(tmp_path: Path) -> None:
    path = write(tmp_path, "trace_id,step_idx,state,outcome\n"
                           "a,0,plan,continue\na,1,act,success\na,2,act,continue\n"
                           "b,0,plan,continue\nb,1,act,failure\n")
    with pytest.raises(TraceValidationError, match="before the last step") as err:
        read_traces(path)
    assert err.value.line == 3 and err.value.field == "outcome"
    t = read_traces(path, on_error="skip")
    assert t.trace_ids == ["b"] and t.report.n_traces_skipped == 1


def test_bad_labels_and_steps(tmp_path: Path) -> None:
    path = write(tmp_path, "trace_id,step_idx,state,outcome\n"
                           "a,0,plan,continue\na,1,act,maybe\n"
                           "b,0,plan,continue\nb,x,act,failure\n"
                           "c,0,plan,continue\nc,1,act,pass\n"
                           ",0,plan,continue\n"
                           "d,0,plan,continue,extra\n")
    with pytest.raises(TraceValidationError, match="unknown outcome label 'maybe'") as err:
        read_traces(path)
    assert err.value.line == 3 and "outcome_map" in str(err.value)
    t = read_traces(path, on_error="skip")
    assert t.trace_ids == ["c"] and t.trace_column("outcome").to_pylist() == ["success"]
    assert t.report.n_traces_skipped == 3  # a, b and d (its ragged row) dropped whole
    assert any("trace_id is empty" in reason for reason in t.report.skipped_by_reason)
    t = read_traces(path, on_error="skip", outcome_map={"maybe": "censored"})
    assert t.trace_ids == ["a", "c"] and t.trace_column("outcome").to_pylist() == ["censored", "success"]
    with pytest.raises(TraceValidationError, match="step_idx must be a whole number"):
        read_traces(path, outcome_map={"maybe": "censored"})


def test_columns_rename_and_header_errors(tmp_path: Path) -> None:
    path = write(tmp_path, "episode,turn,label,result\ne1,0,plan,continue\ne1,1,act,correct\n")
    assert not MAST_CSV.sniff(path)
    t = MAST_CSV.read(path, columns={"episode": "trace_id", "turn": "step_idx", "label": "state",
                                     "result": "outcome"})
    assert t.trace_ids == ["e1"] and t.trace_column("outcome").to_pylist() == ["success"]
    with pytest.raises(TraceValidationError, match="required column 'trace_id'") as err:
        MAST_CSV.read(path)
    assert err.value.line == 1
    with pytest.raises(TraceValidationError, match="neither 'state' nor 'step_kind'"):
        MAST_CSV.read(write(tmp_path, "trace_id,step_idx,outcome\na,0,success\n", "nostate.csv"))
    with pytest.raises(TraceValidationError, match="appears twice"):
        MAST_CSV.read(write(tmp_path, "trace_id,step_idx,state,state,outcome\na,0,x,y,success\n", "dup.csv"))
    with pytest.raises(TraceValidationError, match="empty"):
        MAST_CSV.read(write(tmp_path, "", "empty.csv"))
    with pytest.raises(ValueError, match="outcome_map"):
        MAST_CSV.read(FIXTURE, outcome_map={"x": "great"})
    with pytest.raises(TypeError, match="columns="):
        MAST_CSV.read(FIXTURE, threshold=0.5)
    with pytest.raises(TraceValidationError, match="no such file"):
        MAST_CSV.read(tmp_path / "missing.csv")


def test_step_kind_only_and_extra_columns(tmp_path: Path) -> None:
    path = write(tmp_path, "\ufefftrace_id,step_idx,step_kind,tool_name,note,outcome\n"
                           "a,0,llm,,first,continue\na,1,tool,search,,continue\na,2,llm,,last,failed\n"
                           "b,0,tool,book,,continue\n")
    assert MAST_CSV.sniff(path)
    t = read_traces(path)
    assert t.trace_column("outcome").to_pylist() == ["failure", "censored"]
    assert t.state_labels()[1] == ["llm", "tool:search", "tool:book"]
    assert t.to_arrow().column("note").to_pylist() == ["first", None, "last", None]


def test_equivalent_to_canonical_records(tmp_path: Path) -> None:
    t = read_traces(FIXTURE)
    rebuilt = tt.TraceTable.from_records(t.to_arrow().to_pylist())
    assert rebuilt.outcome_counts() == t.outcome_counts() == {"success": 2, "failure": 2, "censored": 1,
                                                               "invalid": 0}
