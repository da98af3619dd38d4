"""SWE-agent / mini-swe-agent trajectory readers, SWE-bench verdict joins, and the artifact's token corpus.

Real producer output: 250 mini-swe-agent v1.15.0 trajectories with the SWE-bench harness's verdicts and the
TraceToChain artifact's SWE-agent corpus (``../shared/data``; counted in ``test_real_corpora.py``). SWE-agent itself
(and its ``.traj`` writer) cannot be run here — it needs a Docker sandbox and a model API — so the ``.traj`` files in
``tests/data/readers/swe_agent/`` are small invented trajectories in its documented format.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tracetochain as tt
from tracetochain.exceptions import TraceValidationError
from tracetochain.readers import BUILTIN_READERS, detect_format, read_traces
from tracetochain.readers.swe_agent import (
    MINI_SWE_AGENT,
    SWE_AGENT,
    SWE_TOKEN_CORPUS,
    Verdicts,
    command_name,
    exit_status_class,
    load_verdicts,
)

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "readers" / "swe_agent"
SWE_RUN = FIXTURES / "sweagent_run"
MINI_RUN = FIXTURES / "mini_run"
REAL_RUN = Path("swebench-verified-mini-swe-agent-gemini-3-pro/swebench_results/20251118_gemini-3-pro-74pct")


def rows(table: tt.TraceTable, trace_id: str) -> list[dict]:
    return [r for r in table.to_arrow().to_pylist() if r["trace_id"] == trace_id]


# ================================================================================================ command words
@pytest.mark.parametrize(("command", "expected"), [
    ("cat setup.py", "cat"),
    ("cd /testbed && sed -n '1,40p' django/db/models/query.py", "sed"),
    ("cd /testbed; PYTHONPATH=. timeout 120 python -m pytest -x tests/test_io.py", "python"),
    ("export LANG=C.UTF-8\nexport LC_ALL=C.UTF-8\nPYTHONPATH=. python3 tests/runtests.py admin", "python3"),
    ("cat <<'EOF' > repro.py\nprint('it's odd')\nEOF", "cat"),
    ("python -c \"\nimport sys\nprint('a')\n\"", "python"),
    ("(cd astropy && ls -la)", "ls"),
    ("sudo -u root env A=1 ./tests/runtests.py queries", "runtests.py"),
    ("/opt/conda/bin/python3 x.py", "python3"),
    ("nl -ba a.py | sed -n '10,20p'", "nl"),
    ("time nohup nice -n 5 pytest &", "pytest"),
    ("source venv/bin/activate && pytest -q", "pytest"),
    ("# look first\nls", "ls"),
    ("cd /testbed", "cd"),
    ("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached", "submit"),
    ("echo MINI_SWE_AGENT_FINAL_OUTPUT; git diff", "submit"),
    ("submit", "submit"),
    ("str_replace_editor view /testbed/x.py", "str_replace_editor:view"),
    ("str_replace_editor create /x.py --file_text 'a\nb'", "str_replace_editor:create"),
    ("edit 10:12\n    return x\nend_of_edit", "edit"),
    ("echo 'never closed", "echo"),
    ("", None),
    ("  \n# only a comment\n", None),
    (None, None),
])
def test_command_name(command: str | None, expected: str | None) -> None:
    assert command_name(command) == expected


@pytest.mark.parametrize(("status", "cls"), [
    ("Submitted", "normal"), ("submitted", "normal"), (None, "normal"), ("exit_format", "normal"),
    ("exit_forfeit", "normal"), ("LimitsExceeded", "budget"), ("exit_cost", "budget"),
    ("submitted (exit_cost)", "budget"), ("exit_context", "budget"), ("submitted (exit_context)", "budget"),
    ("exit_total_execution_time", "budget"), ("ContextWindowExceededError", "budget"),
    ("ExecutionTimeoutError", "budget"), ("RetryError", "infra"), ("exit_api", "infra"),
    ("exit_environment_error", "infra"), ("submitted (exit_error)", "infra"), ("RuntimeError", "infra"),
])
def test_exit_status_class(status: str | None, cls: str) -> None:
    assert exit_status_class(status) == cls


# ================================================================================================ real data
@pytest.fixture
def real_run(shared_data: Path) -> Path:
    path = shared_data / REAL_RUN
    if not path.exists():
        pytest.skip("the mini-swe-agent sample is not in ../shared/data")
    return path


def test_real_mini_swe_agent_counts(real_run: Path) -> None:
    t = read_traces(real_run)
    assert t.report.format == "mini-swe-agent"
    # The sample: 250 trajectories, 183 resolved, 13–145 assistant steps per trace (median 35)
    assert t.n_traces == 250
    assert t.outcome_counts() == {"success": 183, "failure": 67, "censored": 0, "invalid": 0}
    lengths = np.diff(t.offsets)
    assert (lengths.min(), lengths.max(), float(np.median(lengths))) == (13, 145, 35.0)
    assert t.n_steps == 9830 and t.report.n_traces_skipped == 0
    arrow = t.to_arrow()
    assert set(arrow.column("trial").to_pylist()) == {0}
    assert arrow.column("task_id").to_pylist() == arrow.column("trace_id").to_pylist()
    assert set(arrow.column("termination_reason").to_pylist()) == {"Submitted"}
    kinds = Counter(arrow.column("step_kind").to_pylist())
    # an assistant turn with zero or several bash blocks is rejected by mini-swe-agent: an llm step, format_error
    assert kinds == {"tool": 9482, "llm": 348}
    errors = Counter(arrow.column("error_type").to_pylist())
    assert errors["format_error"] == 348 and errors["nonzero_exit"] > 500 and errors["timeout"] > 0
    tools = Counter(arrow.column("tool_name").to_pylist())
    # Counted on the sample: cat, sed, grep, nl, python3, python as the most frequent first words
    assert [name for name, _ in tools.most_common(6)] == ["cat", "sed", "grep", "nl", "python3", "python"]
    assert tools["submit"] >= 250
    # usage from the API responses: tokens and cost on every assistant turn, t_start from `created`
    for col in ("tokens_in", "tokens_out", "cost_usd", "t_start"):
        assert arrow.column(col).null_count == 0, col
    # info.model_stats: the episode totals, which the per-step usage adds up to (one step per API call)
    frame = t.to_pandas().groupby("trace_id").agg(cost=("cost_usd", "sum"), total=("total_cost_usd", "first"),
                                                 steps=("step_idx", "size"), calls=("total_api_calls", "first"))
    assert np.allclose(frame.cost, frame.total, rtol=1e-12, atol=1e-12)
    assert (frame.steps == frame.calls).all()


def test_real_outcomes_match_results_summary(real_run: Path) -> None:
    summary = json.loads((real_run / "results_summary.json").read_text())
    resolved = {i["instance_id"]: i["resolved"] for i in summary["instances"]}
    t = MINI_SWE_AGENT.read(real_run / "trajs")
    outcomes = dict(zip(t.trace_ids, t.trace_column("outcome").to_pylist(), strict=True))
    assert len(outcomes) == 250
    for iid, outcome in outcomes.items():
        assert outcome == ("success" if resolved[iid] else "failure"), iid
    sampled = (real_run.parents[1] / "SAMPLED_INSTANCES.txt").read_text().split()
    assert sorted(outcomes) == sorted(sampled)


def test_real_detection_and_single_file(real_run: Path) -> None:
    one = real_run / "trajs" / "astropy__astropy-12907" / "astropy__astropy-12907.traj.json"
    for path in (real_run, real_run / "trajs", one):
        assert detect_format(path) == "mini-swe-agent", path
    assert not SWE_AGENT.sniff(real_run) and not SWE_AGENT.sniff(one)
    assert not SWE_TOKEN_CORPUS.sniff(real_run / "results_summary.json")
    t = read_traces(one)  # results_summary.json two folders up is found automatically
    assert t.trace_ids == ["astropy__astropy-12907"] and t.outcome_counts()["success"] == 1
    assert rows(t, "astropy__astropy-12907")[-1]["tool_name"] == "submit"


# ================================================================================================ SWE-agent fixture
def test_swe_agent_fixture_missing_verdict_raises() -> None:
    assert detect_format(SWE_RUN) == "swe-agent"
    assert detect_format(SWE_RUN / "demo__pkg-101" / "demo__pkg-101.traj") == "swe-agent"
    with pytest.raises(TraceValidationError, match=r"demo__pkg-303.*verdicts=") as err:
        read_traces(SWE_RUN)
    assert err.value.field == "instance_id" and "demo__pkg-303.traj" in str(err.value.source)


def test_swe_agent_fixture_skip_and_count() -> None:
    t = read_traces(SWE_RUN, on_error="skip")
    assert t.trace_ids == ["demo__pkg-101", "demo__pkg-202"]
    assert t.outcome_counts() == {"success": 1, "failure": 0, "censored": 1, "invalid": 0}
    assert t.report.n_traces_skipped == 1
    assert list(t.report.skipped_by_reason) == ["no SWE-bench verdict for this instance"]
    assert "demo__pkg-303" in t.report.problems[0].message
    first = rows(t, "demo__pkg-101")
    assert [r["tool_name"] for r in first] == ["find_file", "open", "edit", "python", "python", "submit"]
    assert [r["error"] for r in first] == [False, False, False, True, False, False]  # extra_info.returncode 1
    assert first[3]["text"] == "cd /repo && python reproduce.py"
    assert {r["termination_reason"] for r in first} == {"submitted"}
    second = rows(t, "demo__pkg-202")
    assert [r["tool_name"] for r in second] == ["str_replace_editor:view", "str_replace_editor:str_replace", None]
    assert second[2]["step_kind"] == "llm" and second[2]["text"] == "Exit due to cost limit"
    # unresolved but cut by the cost limit: censored, with the raw exit status kept
    assert {r["outcome"] for r in second} == {"censored"}
    assert {r["termination_reason"] for r in second} == {"submitted (exit_cost)"}
    # SWE-agent steps carry no usage: the episode totals of info.model_stats are all there is
    assert "cost_usd" not in t.columns
    assert (first[0]["total_cost_usd"], first[0]["total_tokens_in"], first[0]["total_tokens_out"],
            first[0]["total_api_calls"]) == (0.12, 1000, 100, 6)
    assert t.trace_column("total_api_calls").to_pylist() == [6, 3]


def test_swe_agent_explicit_verdicts_mapping_and_file(tmp_path: Path) -> None:
    t = SWE_AGENT.read(SWE_RUN, verdicts={"demo__pkg-101": False, "demo__pkg-202": True, "demo__pkg-303": False})
    assert dict(zip(t.trace_ids, t.trace_column("outcome").to_pylist(), strict=True)) == {
        "demo__pkg-101": "failure", "demo__pkg-202": "success", "demo__pkg-303": "failure"}
    # a SWE-bench experiments results.json lists only the resolved ones: the others are unresolved
    vfile = tmp_path / "results.json"
    vfile.write_text(json.dumps({"no_generation": [], "no_logs": [], "resolved": ["demo__pkg-303"]}))
    t = read_traces(SWE_RUN, verdicts=vfile)
    assert t.trace_column("outcome").to_pylist() == ["failure", "censored", "success"]
    # per-instance report.json files in a folder
    logs = tmp_path / "logs"
    for iid, ok in (("demo__pkg-101", True), ("demo__pkg-202", False), ("demo__pkg-303", True)):
        (logs / iid).mkdir(parents=True)
        (logs / iid / "report.json").write_text(json.dumps({iid: {"patch_exists": True, "resolved": ok}}))
    t = read_traces(SWE_RUN, verdicts=logs)
    assert t.trace_column("outcome").to_pylist() == ["success", "censored", "success"]


def test_load_verdicts_shapes(tmp_path: Path) -> None:
    v = load_verdicts(MINI_RUN / "results_summary.json")
    assert isinstance(v, Verdicts) and v.get("demo__mini-1") is True and v.get("nope") is None
    v = load_verdicts(SWE_RUN / "results.json")  # harness report: an unlisted instance has no verdict
    assert (v.get("demo__pkg-101"), v.get("demo__pkg-202"), v.get("demo__pkg-303")) == (True, False, None)
    assert load_verdicts(MINI_RUN).get("demo__mini-2") is False  # a folder holding results_summary.json
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"instances": [{"instance_id": "a", "resolved": "yes"}]}))
    with pytest.raises(TraceValidationError, match="resolved") as err:
        load_verdicts(bad)
    assert err.value.row == 0
    bad.write_text(json.dumps({"resolved_ids": "a"}))
    with pytest.raises(TraceValidationError, match="list of instance ids"):
        load_verdicts(bad)
    bad.write_text(json.dumps({"a": {"tests": 3}}))
    with pytest.raises(TraceValidationError, match="no resolved"):
        load_verdicts(bad)
    bad.write_text("[1, 2")
    with pytest.raises(TraceValidationError, match="not valid JSON"):
        load_verdicts(bad)
    with pytest.raises(TypeError, match="verdicts must"):
        SWE_AGENT.read(SWE_RUN, verdicts={"demo__pkg-101": "yes"})
    with pytest.raises(TypeError, match="verdicts must"):
        SWE_AGENT.read(SWE_RUN, verdicts=3)


def test_no_verdict_file_anywhere(tmp_path: Path) -> None:
    run = tmp_path / "a" / "b" / "c" / "run"
    shutil.copytree(SWE_RUN, run)
    (run / "results.json").unlink()
    with pytest.raises(TraceValidationError, match="no verdict file found") as err:
        read_traces(run)
    assert "verdicts=" in str(err.value)
    t = read_traces(run, on_error="skip")
    assert t.n_traces == 0 and t.report.n_traces_skipped == 3


def test_verdict_file_for_another_run_is_refused(tmp_path: Path) -> None:
    run = tmp_path / "run"
    for k in range(10):
        d = run / f"x__y-{k}"
        d.mkdir(parents=True)
        (d / f"x__y-{k}.traj").write_text(json.dumps({"trajectory": [{"action": "ls", "observation": ""}],
                                                      "info": {"exit_status": "submitted"}}))
    vfile = tmp_path / "results.json"
    vfile.write_text(json.dumps({"resolved": ["other-1", "other-2"]}))
    with pytest.raises(TraceValidationError, match="lists none of these 10 instances"):
        read_traces(run, verdicts=vfile)


# ================================================================================================ mini fixture
def test_mini_fixture() -> None:
    assert detect_format(MINI_RUN) == "mini-swe-agent"
    t = read_traces(MINI_RUN)
    assert t.trace_ids == ["demo__mini-1", "demo__mini-2", "demo__mini-3"]
    assert t.trace_column("outcome").to_pylist() == ["success", "censored", "invalid"]
    assert t.trace_column("termination_reason").to_pylist() == ["Submitted", "LimitsExceeded", "RetryError"]
    one = rows(t, "demo__mini-1")
    assert [(r["step_kind"], r["tool_name"], r["error"], r["error_type"]) for r in one] == [
        ("tool", "ls", False, None), ("tool", "python", True, "nonzero_exit"), ("llm", None, True, "format_error"),
        ("tool", "submit", False, None)]
    assert one[0]["text"] == "cd /testbed && ls" and one[0]["t_start"] == 1700000000
    assert (one[0]["tokens_in"], one[0]["tokens_out"], one[0]["cost_usd"]) == (100, 20, 0.001)
    assert "Two things at once." in one[2]["text"]
    two = rows(t, "demo__mini-2")
    assert [(r["tool_name"], r["error_type"]) for r in two] == [("grep", None), ("python", "timeout"), ("nl", None)]
    three = rows(t, "demo__mini-3")  # v2: extra.actions, extra.returncode, extra.timestamp
    assert [(r["tool_name"], r["error"], r["t_start"], r["t_end"], r["cost_usd"]) for r in three] == [
        ("git", True, 1700000200.5, 1700000201.25, 0.002)]


def test_mini_tool_calls_and_multiple_actions(tmp_path: Path) -> None:
    data = {"info": {"exit_status": "Submitted"}, "instance_id": "tc-1", "messages": [
        {"role": "system", "content": "s"}, {"role": "user", "content": "task"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls -la"}'}},
            {"id": "c2", "type": "function", "function": {"name": "bash", "arguments": {"command": "cat a.py"}}}]},
        {"role": "tool", "tool_call_id": "c2", "content": "<returncode>2</returncode>"},
        {"role": "tool", "tool_call_id": "c1", "content": "<returncode>0</returncode>"},
        {"role": "assistant", "content": "done, nothing to run"},
    ]}
    path = tmp_path / "tc-1.traj.json"
    path.write_text(json.dumps(data))
    t = MINI_SWE_AGENT.read(path, verdicts={"tc-1": False})
    assert [(r["step_kind"], r["tool_name"], r["error"]) for r in rows(t, "tc-1")] == [
        ("tool", "ls", False), ("tool", "cat", True), ("llm", None, True)]


def test_runs_as_trials(tmp_path: Path) -> None:
    shutil.copytree(MINI_RUN, tmp_path / "run_a")
    shutil.copytree(MINI_RUN, tmp_path / "run_b")
    shutil.rmtree(tmp_path / "run_b" / "trajs" / "demo__mini-3")
    t = read_traces(tmp_path)
    assert t.report.format == "mini-swe-agent"
    got = dict(zip(t.trace_ids, t.trace_column("trial").to_pylist(), strict=True))
    assert got == {"run_a/trajs/demo__mini-1": 0, "run_a/trajs/demo__mini-2": 0, "demo__mini-3": 0,
                   "run_b/trajs/demo__mini-1": 1, "run_b/trajs/demo__mini-2": 1}
    assert t.trace_column("task_id").to_pylist().count("demo__mini-1") == 2
    with pytest.raises(TraceValidationError, match="cannot tell the runs apart"):
        read_traces(tmp_path, verdicts=MINI_RUN / "results_summary.json")


# ================================================================================================ malformed input
def write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


@pytest.mark.parametrize(("reader", "data", "match"), [
    (MINI_SWE_AGENT, {"info": {"exit_status": "Submitted"}, "messages": {"role": "user"}}, "messages"),
    (MINI_SWE_AGENT, {"info": {"exit_status": "Submitted"}, "messages": ["hello"]}, r"messages\[0\]"),
    (MINI_SWE_AGENT, {"info": {"exit_status": 3}, "messages": [{"role": "assistant", "content": "x"}]},
     "exit_status"),
    (MINI_SWE_AGENT, {"instance_id": 7, "messages": []}, "instance_id"),
    (SWE_AGENT, {"trajectory": [{"action": 5}], "info": {}}, r"trajectory\[0\]\.action"),
    (SWE_AGENT, {"trajectory": ["ls"], "info": {}}, r"trajectory\[0\]"),
    (SWE_AGENT, {"trajectory": [], "history": [], "info": []}, None),  # info not an object: no status, ok
    (MINI_SWE_AGENT, {"trajectory": [{"action": "ls"}]}, "found a SWE-agent trajectory"),
    (SWE_AGENT, [1, 2], "not a trajectory"),
    (SWE_AGENT, "{not json", "not valid JSON"),
])
def test_malformed_files(tmp_path: Path, reader: Any, data: object, match: str | None) -> None:
    name = "x-1.traj.json" if reader is MINI_SWE_AGENT else "x-1.traj"
    path = write(tmp_path / "run" / "x-1" / name, data)
    if match is None:  # an empty trajectory: a trial that ended before any step, kept with its outcome
        t = reader.read(path, verdicts={"x-1": True})
        assert t.n_traces == 0 and t.report.n_traces_skipped == 0
        assert [(z["trace_id"], z["outcome"]) for z in t.report.zero_step] == [("x-1", "success")]
        return
    with pytest.raises(TraceValidationError, match=match) as err:
        reader.read(path, verdicts={"x-1": True})
    assert "x-1" in str(err.value)
    good = write(tmp_path / "run" / "x-2" / name.replace("x-1", "x-2"),
                 {"trajectory": [{"action": "ls"}]} if reader is SWE_AGENT else
                 {"info": {"exit_status": "Submitted"},
                  "messages": [{"role": "assistant", "content": "```bash\nls\n```"}]})
    t = reader.read(tmp_path / "run", on_error="skip", verdicts={"x-1": True, "x-2": True})
    assert t.trace_ids == ["x-2"] and t.report.n_traces_skipped == 1
    assert good.exists()


def test_reader_options_and_paths(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="verdicts="):
        MINI_SWE_AGENT.read(MINI_RUN, success_threshold=0.5)
    with pytest.raises(ValueError, match="on_error"):
        MINI_SWE_AGENT.read(MINI_RUN, on_error="ignore")
    with pytest.raises(TraceValidationError, match="no such file"):
        MINI_SWE_AGENT.read(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(TraceValidationError, match="no trajectory files"):
        MINI_SWE_AGENT.read(tmp_path / "empty")
    assert not MINI_SWE_AGENT.sniff(tmp_path / "empty") and not SWE_AGENT.sniff(tmp_path / "empty")
    mixed = tmp_path / "mixed"
    shutil.copytree(MINI_RUN, mixed / "mini")
    shutil.copytree(SWE_RUN, mixed / "swe")
    with pytest.raises(TraceValidationError, match="read SWE-agent and mini-swe-agent runs separately"):
        MINI_SWE_AGENT.read(mixed)


def test_sniff_is_specific(tmp_path: Path) -> None:
    canonical = write(tmp_path / "t.jsonl", '{"trace_id": "a", "step_idx": 0, "state": "s", "outcome": "success"}\n')
    messages = write(tmp_path / "m.json", [{"messages": [{"role": "user", "content": "hi"}], "reward": 1.0}])
    odd = write(tmp_path / "odd.traj.json", {"foo": 1})
    v0 = write(tmp_path / "old.traj", '{"environment": "swe_main", "trajectory": [{"action": "ls"}], "info": {}}')
    for reader in (SWE_AGENT, MINI_SWE_AGENT, SWE_TOKEN_CORPUS):
        assert not reader.sniff(canonical) and not reader.sniff(messages) and not reader.sniff(odd)
    assert SWE_AGENT.sniff(v0) and not MINI_SWE_AGENT.sniff(v0)
    assert not SWE_TOKEN_CORPUS.sniff(MINI_RUN / "results_summary.json")
    assert not SWE_TOKEN_CORPUS.sniff(SWE_RUN / "results.json")


# ================================================================================================ token corpus
def test_token_corpus_fixture(tmp_path: Path) -> None:
    path = FIXTURES / "token_corpus.json"
    assert SWE_TOKEN_CORPUS.sniff(path)
    t = SWE_TOKEN_CORPUS.read(path)
    assert t.trace_ids == ["demo__tok-1", "demo__tok-2"] and t.n_steps == 7
    assert t.trace_column("outcome").to_pylist() == ["success", "failure"]
    assert t.state_labels()[1] == ["edit:view", "python", "submit", "grep", "none", "edit:create"]
    bad = write(tmp_path / "c.json", {"a": {"toks": ["x"], "resolved": True, "label": "F"},
                                      "b": {"toks": "x y", "resolved": False}, "c": {"toks": ["y"], "label": "S"}})
    with pytest.raises(TraceValidationError, match="agreeing with 'label'"):
        SWE_TOKEN_CORPUS.read(bad)
    t = SWE_TOKEN_CORPUS.read(bad, on_error="skip")
    assert t.trace_ids == ["c"] and t.report.n_traces_skipped == 2
    with pytest.raises(TypeError):
        SWE_TOKEN_CORPUS.read(path, verdicts="x")


def load_artifact_corpus(path: Path) -> tt.TraceTable:
    """The artifact's ``corpus.json`` as a TraceTable built with ``from_records`` (state = the action token)."""
    corpus = json.loads(path.read_text())
    records = [
        {"trace_id": iid, "task_id": iid, "trial": 0, "step_idx": k, "state": tok,
         "outcome": "success" if entry["resolved"] else "failure"}
        for iid, entry in corpus.items() for k, tok in enumerate(entry["toks"])
    ]
    return tt.TraceTable.from_records(records, source=str(path))


def test_artifact_corpus(shared_data: Path) -> None:
    path = shared_data / "tracetochain-artifact" / "swebench_real" / "corpus.json"
    if not path.exists():
        pytest.skip("the artifact corpus is not in ../shared/data")
    by_hand = load_artifact_corpus(path)
    # The corpus: 479 traces, 324 resolved / 155 not, 29,504 steps, 24–153 tokens per trace, 28 distinct tokens
    assert by_hand.n_traces == 479 and by_hand.n_steps == 29_504
    assert by_hand.outcome_counts() == {"success": 324, "failure": 155, "censored": 0, "invalid": 0}
    lengths = np.diff(by_hand.offsets)
    assert (lengths.min(), lengths.max(), float(np.median(lengths))) == (24, 153, 58.0)
    assert len(by_hand.state_labels()[1]) == 28
    if "swe-token-corpus" in BUILTIN_READERS:  # once registered, sniffing must find it
        assert detect_format(path) == "swe-token-corpus"
    t = SWE_TOKEN_CORPUS.read(path)
    assert SWE_TOKEN_CORPUS.sniff(path)
    assert t.trace_ids == by_hand.trace_ids
    assert t.trace_column("outcome").to_pylist() == by_hand.trace_column("outcome").to_pylist()
    assert t.state_labels()[0].tolist() == by_hand.state_labels()[0].tolist()
