"""Episodes that ended before any agent step are trials: every reader keeps them (``report.zero_step``), the
canonical table represents them as one record without step fields, and ``convert`` writes them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tracetochain as tt
from tracetochain.exceptions import TraceValidationError
from tracetochain.readers import read_traces


def write_jsonl(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def step(tid: str, i: int, outcome: str) -> dict[str, object]:
    return {"trace_id": tid, "step_idx": i, "state": "act", "outcome": outcome, "task_id": "t"}


def test_canonical_record_without_step_fields_is_a_zero_step_trace(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", [
        step("a", 0, "success"), step("a", 1, "success"),
        {"trace_id": "b", "outcome": "failure", "task_id": "t", "reward": 0.0},  # no step_idx at all
        {"trace_id": "c", "step_idx": None, "state": "", "outcome": "success"},  # null step_idx, empty state
    ])
    table = read_traces(path)
    assert table.trace_ids == ["a"] and table.n_steps == 2
    assert table.report.zero_step == [{"trace_id": "b", "outcome": "failure", "task_id": "t", "reward": 0.0},
                                      {"trace_id": "c", "outcome": "success"}]
    assert table.report.zero_step_outcomes() == {"success": 1, "failure": 1, "censored": 0, "invalid": 0}
    doc = table.report.to_dict()
    assert doc["n_zero_step"] == 2 and doc["zero_step_outcomes"]["failure"] == 1
    assert "2 episodes ended before any agent step" in str(table.report)


def test_zero_step_records_are_validated_like_any_record(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", [step("a", 0, "success"), {"trace_id": "b", "outcome": "won"}])
    with pytest.raises(TraceValidationError) as exc:
        read_traces(path)
    assert exc.value.line == 2 and exc.value.field == "outcome"
    table = read_traces(path, on_error="skip")
    assert table.report.zero_step == [] and table.report.n_traces_skipped == 1


def test_a_stepless_record_inside_a_trace_with_steps_is_an_error(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", [step("a", 0, "success"), {"trace_id": "a", "outcome": "success"}])
    with pytest.raises(TraceValidationError, match="step_idx is empty"):
        read_traces(path)


def test_every_episode_without_steps(tmp_path: Path) -> None:
    episodes = [{"id": f"e{i}", "messages": [{"role": "user", "content": "hi"}], "reward": float(i % 2)}
                for i in range(4)]
    path = write_jsonl(tmp_path / "chat.jsonl", episodes)
    table = read_traces(path)
    assert table.n_traces == 0 and table.report.n_zero_step == 4
    assert table.report.zero_step_outcomes()["success"] == 2


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_convert_writes_zero_step_episodes(tmp_path: Path, suffix: str) -> None:
    from cli_runner import run_cli

    episodes = [{"id": f"e{i}", "task_id": f"t{i % 3}", "reward": float(i % 2),
                 "messages": [{"role": "user", "content": "q"}]
                 + ([{"role": "assistant", "content": "a"}] if i % 4 else [])} for i in range(10)]
    src = write_jsonl(tmp_path / "chat.jsonl", episodes)
    out = tmp_path / f"out{suffix}"
    r = run_cli("convert", str(src), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "3 episodes ended before any agent step (3 failure): kept as trials" in " ".join(r.stdout.split())
    assert "wrote 7 traces and 3 without steps" in r.stdout
    back = tt.read_traces(out)
    assert back.n_traces == 7 and back.report.n_zero_step == 3
    assert sorted(z["trace_id"] for z in back.report.zero_step) == ["e0", "e4", "e8"]
    assert {z["task_id"] for z in back.report.zero_step} == {"t0", "t1", "t2"}


def _zero_step_table(tmp_path: Path) -> tt.TraceTable:
    return read_traces(write_jsonl(tmp_path / "t.jsonl", [
        step("a", 0, "success"), step("a", 1, "success"), step("d", 0, "failure"),
        {"trace_id": "b", "outcome": "failure", "task_id": "t"},
        {"trace_id": "c", "outcome": "success", "task_id": "t"},
    ]))


def test_the_analysis_reports_the_zero_step_episodes(tmp_path: Path) -> None:
    """What a reader keeps beside the step table (zero-step episodes, run metadata) stays in the analysis's ingest
    report, so `fit --json` and the report still show them."""
    from tracetochain.analysis import analyze

    table = _zero_step_table(tmp_path)
    res = analyze(table, audit=False, intervals=None)
    assert res.ingest.n_zero_step == 2 and res.ingest.zero_step == table.report.zero_step
    assert res.ingest.to_dict()["zero_step_outcomes"] == {"success": 1, "failure": 1, "censored": 0, "invalid": 0}


def test_zero_step_episodes_are_trials_of_the_chain(tmp_path: Path) -> None:
    from tracetochain.analysis import analyze

    res = analyze(_zero_step_table(tmp_path), audit=False, intervals=None, pseudocount=0)
    assert res.summary.n_usable == 4 and res.pass_rate == pytest.approx(2 / 4)
    assert res.chain.r_inf == pytest.approx(2 / 4)  # α = 0, no censoring: R∞ is the pass rate
