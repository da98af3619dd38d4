"""Reflexion / ReAct HotPotQA text-log reader: the two real files and small invented logs."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tracetochain.exceptions import TraceValidationError
from tracetochain.readers import detect_format, read_traces
from tracetochain.readers.reflexion import REFLEXION, question_key

REAL = Path("reflexion-hotpotqa/hotpotqa_runs/root/ReAct")

INVENTED = """########################################
BEGIN TRIAL 1
Trial summary: Correct: 1, Incorrect: 1, Halted: 1
#######################################
------------- BEGIN CORRECT AGENTS -------------

Question: Which band released the album first?
Thought 1: I need to search both albums.
Action 1: Search[Album A]
Observation 1: Album A is the debut album of Band X,
released in 1990.
Thought 2: Album A came out first.
Action 2: Finish[Band X]
Observation 2: Answer is CORRECT
Correct answer: Band X

------------- BEGIN INCORRECT AGENTS -----------

Question: How many stations does the line have?
Thought 1: Search the line.
Action 1: Search[The Line]
Observation 1: The Line is a railway.
Thought 2: Compare things.
Action 2: Compare[a and b]
Observation 2: Invalid Action. Valid Actions are Lookup[<topic>] Search[<topic>] and Finish[<answer>].
Action 3: Finish[7]
Observation 3: Answer is INCORRECT
Correct answer: 9

------------- BEGIN HALTED AGENTS --------------

Question: Who wrote the song?
Thought 1: Search the song.
Action 1: Search[The Song]
Observation 1: Could not find [The Song]. Similar: []
Thought 2: Look it up.
Action 2: Lookup[writer]
Observation 2: No Results
Correct answer: Somebody

Question: How many stations does the line have?
Thought 1: Search the line.
Action 1: Search[The Line]
Observation 1: The Line is a railway.
Thought 2: Compare things.
Action 2: Compare[a and b]
Observation 2: Invalid Action. Valid Actions are Lookup[<topic>] Search[<topic>] and Finish[<answer>].
Action 3: Finish[7]
Observation 3: Answer is INCORRECT
Correct answer: 9

########################################
BEGIN TRIAL 2
Trial summary: Correct: 2, Incorrect: 0, Halted: 1
#######################################
------------- BEGIN CORRECT AGENTS -------------

Question: Which band released the album first?
Thought 1: I need to search both albums.
Action 1: Search[Album A]
Observation 1: Album A is the debut album of Band X,
released in 1990.
Thought 2: Album A came out first.
Action 2: Finish[Band X]
Observation 2: Answer is CORRECT
Correct answer: Band X

Question: How many stations does the line have?You have attempted to answer following question before and \
failed. The following reflection(s) give a plan to avoid failing.
Reflections:
- I guessed. I should have counted the stations.
Thought 1: Search the line and count.
Action 1: Search[The Line]
Observation 1: The Line is a railway with 9 stations.
Action 2: Finish[9]
Observation 2: Answer is CORRECT
Correct answer: 9

------------- BEGIN INCORRECT AGENTS -----------

------------- BEGIN HALTED AGENTS --------------

Question: Who wrote the song?
Thought 1: Search the song again.
Action 1: Search[The Song (song)]
Observation 1: Could not find [The Song (song)]. Similar: []
Correct answer: Somebody
"""


def write(tmp_path: Path, text: str, name: str = "log.txt") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def by_trace(table) -> dict[str, list[dict]]:  # type: ignore[no-untyped-def]
    out: dict[str, list[dict]] = {}
    for r in table.to_arrow().to_pylist():
        out.setdefault(r["trace_id"], []).append(r)
    return out


def per_trial(table) -> dict[int, dict[str, int]]:  # type: ignore[no-untyped-def]
    counts: dict[int, Counter[str]] = {}
    for trial, outcome in zip(table.trace_column("trial").to_pylist(), table.trace_column("outcome").to_pylist(),
                              strict=True):
        counts.setdefault(trial, Counter())[outcome] += 1
    return {t: dict(c) for t, c in sorted(counts.items())}


# ================================================================================================ invented logs
def test_invented_log(tmp_path: Path) -> None:
    path = write(tmp_path, INVENTED)
    assert detect_format(path) == "reflexion"
    t = read_traces(path)
    # trial 1: the INCORRECT log repeated under HALTED is one attempt: dropped and counted
    assert t.n_traces == 6 and t.report.n_traces_skipped == 1
    assert list(t.report.skipped_by_reason) == ["duplicate of an earlier log of the same question in this trial"]
    assert per_trial(t) == {1: {"success": 1, "failure": 1, "censored": 1}, 2: {"success": 2, "censored": 1}}
    traces = by_trace(t)
    line = next(v for v in traces.values() if v[0]["task_id"].startswith("How many") and v[0]["trial"] == 1)
    assert [(r["tool_name"], r["text"], r["error"]) for r in line] == [
        ("Search", "The Line", False), ("Compare", "a and b", True), ("Finish", "7", False)]
    assert line[1]["error_type"] == "invalid_action"
    assert {r["termination_reason"] for r in line} == {"finish"}
    halted = next(v for v in traces.values() if v[0]["task_id"] == "Who wrote the song?" and v[0]["trial"] == 1)
    assert [r["tool_name"] for r in halted] == ["Search", "Lookup"]
    assert {(r["outcome"], r["termination_reason"]) for r in halted} == {("censored", "halted")}
    # the reflection preface is not part of the task id: the same question keeps one task across trials
    tasks = Counter(t.trace_column("task_id").to_pylist())
    assert tasks == {"Which band released the album first?": 2, "How many stations does the line have?": 2,
                     "Who wrote the song?": 2}
    ids = t.trace_ids
    assert len(set(ids)) == 6 and all(i.endswith(("/trial1", "/trial2")) for i in ids)


def test_options(tmp_path: Path) -> None:
    path = write(tmp_path, INVENTED)
    t = REFLEXION.read(path, include_thoughts=True)
    first = by_trace(t)[t.trace_ids[0]]
    assert [r["step_kind"] for r in first] == ["llm", "tool", "llm", "tool"]
    assert first[0]["text"] == "I need to search both albums."
    dropped = REFLEXION.read(path, carried="drop")
    # trial 2's copy of the album question (correct in trial 1, identical) was never re-run
    assert per_trial(dropped) == {1: {"success": 1, "failure": 1, "censored": 1}, 2: {"success": 1, "censored": 1}}
    assert dropped.report.skipped_by_reason["carried forward unchanged from the previous trial"] == 1
    with pytest.raises(ValueError, match="carried"):
        REFLEXION.read(path, carried="maybe")
    with pytest.raises(TypeError, match="include_thoughts"):
        REFLEXION.read(path, success_threshold=0.5)
    with pytest.raises(TypeError, match="include_thoughts"):
        REFLEXION.read(path, include_thoughts="yes")


def test_section_disagreeing_with_log(tmp_path: Path) -> None:
    text = INVENTED.replace("Observation 2: Answer is CORRECT\nCorrect answer: Band X\n\n------------- BEGIN INCORRECT",
                            "Observation 2: Answer is INCORRECT\nCorrect answer: Band X\n\n------------- BEGIN "
                            "INCORRECT", 1)
    path = write(tmp_path, text)
    with pytest.raises(TraceValidationError, match="listed under CORRECT but its last observation says Answer is "
                                                   "INCORRECT") as err:
        REFLEXION.read(path)
    assert err.value.line == 7 and err.value.field == "outcome"
    t = REFLEXION.read(path, on_error="skip")
    assert t.n_traces == 5 and t.report.n_traces_skipped == 2


def test_second_different_log_and_stray_lines(tmp_path: Path) -> None:
    different = INVENTED.replace("Question: Who wrote the song?\nThought 1: Search the song.\n",
                                 "Question: How many stations does the line have?\nThought 1: Search the song.\n", 1)
    with pytest.raises(TraceValidationError, match="second, different log"):
        REFLEXION.read(write(tmp_path, different))
    stray = "BEGIN TRIAL 1\nsomething odd\n" + INVENTED.split("BEGIN TRIAL 1\n", 1)[1]
    with pytest.raises(TraceValidationError, match="belongs to no agent log") as err:
        REFLEXION.read(write(tmp_path, stray, "stray.txt"))
    assert err.value.line == 2
    t = REFLEXION.read(tmp_path / "stray.txt", on_error="skip")
    assert t.report.skipped_by_reason.get("line belongs to no agent log") == 1


def test_log_without_action_and_bad_files(tmp_path: Path) -> None:
    text = "Question: What?\nThought 1: Hmm.\nCorrect answer: x\n\nQuestion: Why?\nAction 1: Search[y]\n" \
           "Observation 1: Answer is INCORRECT\nCorrect answer: z\n"
    t = REFLEXION.read(write(tmp_path, text))  # no trial blocks: trial 1
    assert t.n_traces == 1 and t.report.n_traces_skipped == 0
    assert [z["task_id"] for z in t.report.zero_step] == ["What?"]  # no action: a trial without a step
    assert t.trace_column("trial").to_pylist() == [1]
    assert REFLEXION.sniff(tmp_path / "log.txt")
    with pytest.raises(TraceValidationError, match="no agent log"):
        REFLEXION.read(write(tmp_path, "hello\n", "empty.txt"), on_error="skip")
    (tmp_path / "bin.txt").write_bytes(b"Question: a\n\xff\xfe\n")
    with pytest.raises(TraceValidationError, match="not UTF-8"):
        REFLEXION.read(tmp_path / "bin.txt")
    with pytest.raises(TraceValidationError, match="no such file"):
        REFLEXION.read(tmp_path / "missing.txt")
    assert not REFLEXION.sniff(write(tmp_path, "trace_id,step_idx,state,outcome\n", "t.csv"))
    assert not REFLEXION.sniff(write(tmp_path, "just some notes\nAction items: none\n", "notes.txt"))


def test_question_key() -> None:
    assert question_key("  Who  is X?You have attempted to answer following question before and failed.") \
        == "Who is X?"
    assert question_key(" Plain question? ") == "Plain question?"


# ================================================================================================ real files
@pytest.fixture
def real(shared_data: Path) -> Path:
    path = shared_data / REAL
    if not path.exists():
        pytest.skip("the Reflexion logs are not in ../shared/data")
    return path


def test_real_base(real: Path) -> None:
    path = real / "base" / "100_questions_5_trials.txt"
    assert detect_format(path) == "reflexion"
    t = read_traces(path)
    # The file has 512 `Question:` blocks; 12 of them repeat an INCORRECT log under HALTED in the same trial
    assert t.n_traces + t.report.n_traces_skipped == 512
    assert t.n_traces == 500 and t.report.n_traces_skipped == 12
    # base ReAct: 34 correct in every trial; incorrect 56/57, halted 9/10 (trial 3's summary says 56 + 9 of 99,
    # the log lists 100 distinct questions)
    assert per_trial(t) == {
        1: {"success": 34, "failure": 56, "censored": 10}, 2: {"success": 34, "failure": 57, "censored": 9},
        3: {"success": 34, "failure": 56, "censored": 10}, 4: {"success": 34, "failure": 57, "censored": 9},
        5: {"success": 34, "failure": 56, "censored": 10}}
    assert len(set(t.trace_column("task_id").to_pylist())) == 100
    tools = Counter(t.to_arrow().column("tool_name").to_pylist())
    assert set(tools) == {"Search", "Lookup", "Finish"} and t.n_steps == 1795
    # every answered trace ends with Finish; halted ones never call it
    for rows in by_trace(t).values():
        finished = rows[-1]["tool_name"] == "Finish"
        assert finished == (rows[0]["outcome"] != "censored")
    # without the carried-forward copies only first successes remain: 34 questions solved, in trial 1
    dropped = REFLEXION.read(path, carried="drop")
    assert dropped.outcome_counts()["success"] == 34 and per_trial(dropped)[2].get("success", 0) == 0


def test_real_reflexion(real: Path) -> None:
    path = real / "reflexion" / "100_questions_5_trials.txt"
    assert detect_format(path) == "reflexion"
    t = read_traces(path)
    assert t.n_traces == 498 and t.report.n_traces_skipped == 0  # 498 `Question:` blocks in the file
    assert per_trial(t) == {
        1: {"success": 32, "failure": 51, "censored": 17}, 2: {"success": 42, "failure": 43, "censored": 14},
        3: {"success": 48, "failure": 41, "censored": 11}, 4: {"success": 50, "failure": 39, "censored": 11},
        5: {"success": 51, "failure": 35, "censored": 13}}
    assert t.n_steps == 1896
    arrow = t.to_arrow()
    invalid = [r for r in arrow.to_pylist() if r["error"]]
    assert [(r["tool_name"], r["error_type"]) for r in invalid] == [("Compare", "invalid_action")]
    dropped = REFLEXION.read(path, carried="drop")
    # each question counts as solved once, in the trial that solved it: 51 solved by trial 5
    assert dropped.outcome_counts()["success"] == 51
    assert [per_trial(dropped)[k].get("success", 0) for k in range(1, 6)] == [32, 10, 6, 2, 1]
    # the same question has the same trace-id prefix in both files
    base = read_traces(real / "base" / "100_questions_5_trials.txt")
    assert {i.split("/")[0] for i in base.trace_ids} == {i.split("/")[0] for i in t.trace_ids}
