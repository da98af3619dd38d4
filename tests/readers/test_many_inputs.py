"""Many inputs, one corpus (issue 29): folders, globs and several files read together, each file's header metadata on
its episodes, ``--where``/``--by`` selecting exactly what filtering the files by hand selects."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import tracetochain as tt
from tracetochain.exceptions import TraceValidationError
from tracetochain.readers._many import expand_inputs, flatten_metadata, read_corpus

SECURITY = Path(__file__).resolve().parents[1] / "data" / "board" / "security"
FILES = sorted(SECURITY.glob("*.jsonl"))


def test_the_fixture_has_the_shape_of_the_benchmark_exports() -> None:
    assert len(FILES) == 4
    for path in FILES:
        lines = [json.loads(x) for x in path.read_text().splitlines()]
        assert set(lines[0]) == {"metadata"} and lines[0]["metadata"]["n_episodes"] == 12 == len(lines) - 1
        assert all({"messages", "metadata"} <= set(ep) for ep in lines[1:])


def test_a_folder_reads_in_one_call_with_no_option_every_episode_counted() -> None:
    table = read_corpus(SECURITY)
    assert table.n_traces + table.report.n_zero_step == 48
    assert table.report.verdict_field == "metadata.success"
    assert table.report.run_metadata["n_files"] == 4
    assert set(table.trace_values("source_file")) == {p.name for p in FILES}
    by_file = dict(zip(table.trace_values("source_file"), table.trace_values("meta.model"), strict=True))
    assert by_file["gpt-4o__spotlighting.jsonl"] == "gpt-4o"
    # the verdicts are the files' own: the same successes as reading the files one by one
    assert table.outcome_counts()["success"] == sum(tt.read_traces(p).outcome_counts()["success"] for p in FILES)


def test_globs_lists_and_folders_name_the_same_files(tmp_path: Path) -> None:
    a = read_corpus([str(SECURITY / "gpt-4o*.jsonl"), FILES[0]])
    assert sorted(set(a.trace_values("source_file"))) == sorted(
        {FILES[0].as_posix(), *(p.as_posix() for p in FILES if p.name.startswith("gpt-4o"))})
    assert a.n_traces == 36
    with pytest.raises(TraceValidationError, match="no file matches"):
        expand_inputs(str(tmp_path / "*.jsonl"))
    (tmp_path / "README.md").write_text("not traces")
    with pytest.raises(TraceValidationError, match="no trace file"):
        expand_inputs(tmp_path)
    single = read_corpus(FILES[0])  # one file is exactly read_traces
    assert single.trace_ids == tt.read_traces(FILES[0]).trace_ids and "source_file" not in single.columns


def test_colliding_ids_are_kept_apart_by_their_file(tmp_path: Path) -> None:
    for name in ("a", "b"):
        rows = [{"metadata": {"model": name}}] + [
            {"id": f"ep{i}", "messages": [{"role": "assistant", "content": "x"}], "outcome": i % 2 == 0}
            for i in range(3)]
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    table = read_corpus(tmp_path)
    assert table.n_traces == 6 and "a.jsonl/ep0" in table.trace_ids and "b.jsonl/ep0" in table.trace_ids


def test_flatten_metadata_writes_text() -> None:
    assert flatten_metadata({"config": {"a": {"b": 1.5}, "flag": False, "tags": ["x"]}}) == {"a.b": "1.5",
                                                                                          "flag": "false"}


def test_where_and_by_give_the_numbers_of_filtering_by_hand(tmp_path: Path) -> None:
    """--where metadata.attack_type=none --by meta.defense equals cutting the files by hand and analysing each."""
    table = read_corpus(SECURITY).where(["metadata.attack_type=none"])
    assert table.report.filters == ["metadata.attack_type=none"]
    groups = table.group_by("meta.defense")
    assert list(groups) == ["none", "spotlighting", "tool_filter"]
    for defense, sub in groups.items():
        hand = tmp_path / defense
        hand.mkdir()
        for path in FILES:
            lines = [json.loads(x) for x in path.read_text().splitlines()]
            if lines[0]["metadata"]["defense"] != defense:
                continue
            keep = [ep for ep in lines[1:] if ep["metadata"]["attack_type"] == "none"]
            (hand / path.name).write_text("".join(json.dumps(x) + "\n" for x in keep))
        by_hand = read_corpus(hand, outcome_key="metadata.success")  # one file: exactly read_traces
        assert sub.n_traces == by_hand.n_traces and sub.outcome_counts() == by_hand.outcome_counts()
        a = tt.analyze(sub, audit=False, samples=200)
        b = tt.analyze(by_hand, audit=False, samples=200)
        assert a.chain.r_inf == pytest.approx(b.chain.r_inf, abs=1e-12)
        assert a.pass_rate == b.pass_rate


def test_where_conditions_and_errors() -> None:
    table = read_corpus(SECURITY)
    attacked = table.where("metadata.attack_type!=none")
    clean = table.where("metadata.attack_type=none")
    assert attacked.n_traces + clean.n_traces == table.n_traces == 48
    both = table.where(["meta.model=gpt-4o", "meta.defense=none", "metadata.attack_type=none"])
    assert both.n_traces == 6
    assert table.where("metadata.success=TRUE").outcome_counts()["failure"] == 0  # booleans in any case
    with pytest.raises(TraceValidationError, match=r"no field 'meta\.modle'") as exc:
        table.where("meta.modle=x")
    assert "meta.model" in str(exc.value)  # the error lists the fields there are
    with pytest.raises(TraceValidationError, match="step field"):
        table.where("tool_name=send_email")
    with pytest.raises(TraceValidationError, match="FIELD=VALUE"):
        table.where("meta.model")
    assert table.where("meta.model!=").n_traces == 48  # every episode has a model


def test_group_by_keeps_zero_step_episodes_and_missing_values() -> None:
    tab = tt.TraceTable.from_records([
        {"trace_id": "a", "step_idx": 0, "state": "s", "outcome": "success", "task_id": "1"},
        {"trace_id": "b", "step_idx": 0, "state": "s", "outcome": "failure"},
        {"trace_id": "c", "step_idx": 0, "state": "s", "outcome": "failure", "task_id": "1"}])
    groups = tab.group_by("task_id")
    assert {k: v.n_traces for k, v in groups.items()} == {"1": 2, "(missing)": 1}
    assert np.array_equal(groups["1"].outcomes(), [0, 1])


def test_a_stream_of_concatenated_files_reads_like_the_folder(tmp_path: Path) -> None:
    stream = tmp_path / "all.jsonl"
    with stream.open("wb") as out:
        for path in FILES:
            shutil.copyfileobj(path.open("rb"), out)
    table = tt.read_traces(stream)  # used to fail at the second header line with a misleading messages_key= fix
    folder = read_corpus(SECURITY)
    assert table.n_traces == folder.n_traces == 48
    assert sorted(table.trace_values("meta.defense")) == sorted(folder.trace_values("meta.defense"))
    assert table.outcome_counts() == folder.outcome_counts()
