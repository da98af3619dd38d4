"""τ-bench and τ²-bench readers (``readers/tau_bench.py``) on the real files in ``../shared/data`` and on small
invented cases built in ``tmp_path``.

Expected counts come from the data folders' own ``README.md`` files (trace and success counts per file;
termination reasons user_stop 602, agent_stop 80, max_steps 10, too_many_errors 2 — the ten ``max_steps`` runs are
censored: five in the fine-tuned telecom run, five in the gpt-oss-120b langchain run).
"""

from __future__ import annotations

import json
from math import comb
from pathlib import Path
from typing import Any

import pytest

from tracetochain.exceptions import TraceValidationError
from tracetochain.readers import detect_format, read_traces
from tracetochain.readers.tau_bench import TAU2_BENCH, TAU_BENCH
from tracetochain.traces._table import TraceTable

REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO.parent / "shared" / "data"  # as tests/conftest.py; module-scoped fixtures below read it once
DEMO = REPO / "src" / "tracetochain" / "datasets" / "data" / "tau_airline_sample.jsonl"
TAU_FILE = "tau-bench/historical_trajectories/gpt-4o-airline.json"

_SUB = "web/leaderboard/public/submissions/"
_MT = "src/experiments/model_training/results/"
_FT = "ft:gpt-4.1-2025-04-14:sierra:tau2-full-sft:BzrYdMNm_"
#: path under tau2-bench/ → (simulations, reward-1.0 successes, max_steps censored), as the data README tabulates them.
TAU2_FILES: dict[str, tuple[int, int, int]] = {
    _SUB + "claude-sonnet-4-5_aide-platform_2025-10-31/trajectories/"
    "claude-sonnet-4-5_airline_default_gpt4.1_1trials.json": (50, 36, 0),
    _SUB + "button-claude-opus-4-6_distyl-ai_2026-03-04/trajectories/airline.json": (50, 38, 0),
    _SUB + "gpt-oss-120b_openai_2025-11-26/trajectories/langchain_agent_airline_2025-11-26_00-37-06.json": (50, 19, 5),
    _SUB + "ironshell-ironforge_ironshell-ui_2026-03-09/trajectories/ironshell_airline_gpt54_run1.json": (50, 28, 0),
    _SUB + "ironshell-ironforge_ironshell-ui_2026-03-09/trajectories/ironshell_airline_opus46_run1.json": (44, 31, 0),
    _SUB + "toolorchestra_nvidia_2025-12-02/trajectories/toolorchestra_airline_gpt-5_1trial.json": (50, 28, 0),
    "results/whissle/airline_run1.json": (50, 28, 0),
    "judge_viewer/data/simulations/azure-airline-full.json": (50, 23, 0),
    _MT + "gpt-4.1_airline_default_gpt-4.1_1trials.json": (20, 10, 0),
    _MT + _FT + "airline_default_gpt-4.1_1trials.json": (20, 13, 0),
    _MT + "gpt-4.1_retail_defautl_gpt-4.1_1trials.json": (40, 34, 0),
    _MT + _FT + "retail_default_gpt-4.1_1trials.json": (40, 34, 0),
    _MT + "gpt-4.1_telecom_default_gpt-4.1_1trials.json": (40, 18, 0),
    _MT + _FT + "telecom_default_gpt-4.1_1trials.json": (40, 30, 5),
    _MT + "gpt-4.1_telecom_no-user_gpt-4.1_1trials.json": (40, 20, 0),
    _MT + _FT + "telecom_no-user_gpt-4.1_1trials.json": (40, 34, 0),
    "data/simulations/2025-08-10T02:44:06.496849_telecom_llm_agent_gpt-4o_user_simulator_gpt-4o.json": (20, 14, 0),
}


@pytest.fixture(scope="module")
def tau_table() -> TraceTable:
    path = SHARED_DATA / TAU_FILE
    if not path.exists():
        pytest.skip("../shared/data is not present beside the repository")
    return read_traces(path)


def _by_trace(table: TraceTable) -> dict[str, Any]:
    df = table.to_pandas()
    return {tid: g.sort_values("step_idx") for tid, g in df.groupby("trace_id", sort=False)}


# ================================================================================================ τ-bench, real file
def test_tau_bench_real_counts(tau_table: TraceTable) -> None:
    t = tau_table
    assert t.report.format == "tau-bench"
    assert t.n_traces == 200 and t.report.n_traces_skipped == 0
    assert t.outcome_counts() == {"success": 84, "failure": 116, "censored": 0, "invalid": 0}
    assert t.n_steps == 2454  # 1,290 plain replies + 1,164 tool calls
    df = t.to_pandas()
    assert (df.step_kind == "tool").sum() == 1164 and (df.step_kind == "llm").sum() == 1290
    assert df.groupby("trace_id").task_id.first().nunique() == 50
    assert sorted(df.groupby("trace_id").trial.first().unique()) == [0, 1, 2, 3]
    assert t.trace_ids[0] == "gpt-4o-airline/task0/trial0"


def test_tau_bench_real_pass_hat_k(tau_table: TraceTable) -> None:
    """Per-task pass^k from the table equals the targets counted from the raw file (0.4200, 0.2733, 0.2200, 0.2000)."""
    df = tau_table.to_pandas().groupby("trace_id").first()
    per_task = df.groupby("task_id").outcome.agg(lambda s: int((s == "success").sum()))
    n = 4
    got = [float((per_task.map(lambda c, k=k: comb(c, k) / comb(n, k))).mean()) for k in range(1, 5)]
    assert got == pytest.approx([0.42, 0.27333333, 0.22, 0.20], abs=1e-6)


def test_tau_bench_real_tool_errors_match_raw_json(shared_data: Path, tau_table: TraceTable) -> None:
    raw = json.loads((shared_data / TAU_FILE).read_text(encoding="utf-8"))
    expected = sum(1 for ep in raw for m in ep["traj"]
                   if m["role"] == "tool" and str(m.get("content") or "").startswith("Error"))
    assert int(tau_table.to_pandas().error.sum()) == expected == 73


def test_demo_file_equals_reader_output(tau_table: TraceTable) -> None:
    """The bundled demo file is what the τ-bench reader produces (user turns excluded): per (task, trial) the same
    number of steps, step kinds, tool-name sequence, error flags and outcome."""
    mine = {(str(g.task_id.iloc[0]), int(g.trial.iloc[0])): g for g in _by_trace(tau_table).values()}
    demo = {(str(g.task_id.iloc[0]), int(g.trial.iloc[0])): g for g in _by_trace(TraceTable.read(DEMO)).values()}
    assert mine.keys() == demo.keys() and len(mine) == 200
    for key, a in mine.items():
        b = demo[key]
        assert len(a) == len(b), key
        assert list(a.tool_name.fillna("")) == list(b.tool_name.fillna("")), key
        assert list(a.step_kind) == list(b.step_kind), key
        assert list(a.error) == list(b.error), key
        assert a.outcome.iloc[0] == b.outcome.iloc[0], key
        assert a.reward.iloc[0] == b.reward.iloc[0], key


def test_tau_bench_real_include_user(shared_data: Path) -> None:
    t = read_traces(shared_data / TAU_FILE, include_user=True)
    df = t.to_pandas()
    assert (df.step_kind == "user").sum() == 1490 and t.n_steps == 2454 + 1490
    assert t.outcome_counts()["success"] == 84


def test_tau_bench_real_as_generic_messages(shared_data: Path, tau_table: TraceTable) -> None:
    """The generic reader (messages_key falls back to 'traj') reads the same steps from the τ-bench file."""
    generic = read_traces(shared_data / TAU_FILE, format="openai-messages")
    assert generic.trace_ids == tau_table.trace_ids
    a, b = generic.to_pandas(), tau_table.to_pandas()
    assert list(a.tool_name.fillna("")) == list(b.tool_name.fillna("")) and list(a.error) == list(b.error)
    assert generic.outcome_counts() == tau_table.outcome_counts()


# ================================================================================================ τ²-bench, real files
@pytest.fixture(scope="module")
def tau2_tables() -> dict[str, TraceTable]:
    base = SHARED_DATA / "tau2-bench"
    if not base.exists():
        pytest.skip("../shared/data is not present beside the repository")
    return {rel: read_traces(base / rel) for rel in TAU2_FILES}


def test_tau2_every_file_is_listed(shared_data: Path) -> None:
    base = shared_data / "tau2-bench"
    on_disk = {str(p.relative_to(base)) for p in base.rglob("*.json")}
    assert on_disk == set(TAU2_FILES)


@pytest.mark.slow
@pytest.mark.parametrize("rel", list(TAU2_FILES), ids=[Path(r).name[:48] for r in TAU2_FILES])
def test_tau2_real_file_counts(rel: str, tau2_tables: dict[str, TraceTable]) -> None:
    n, succ, censored = TAU2_FILES[rel]
    t = tau2_tables[rel]
    assert t.report.format == "tau2-bench"
    assert t.n_traces == n and t.report.n_traces_skipped == 0
    assert t.outcome_counts() == {"success": succ, "failure": n - succ - censored, "censored": censored,
                                  "invalid": 0}
    trace = t.to_pandas().groupby("trace_id").first()
    assert (trace.termination_reason == "max_steps").sum() == censored
    assert set(trace[trace.outcome == "censored"].termination_reason) <= {"max_steps"}


def test_tau2_real_totals_and_tool_errors(shared_data: Path, tau2_tables: dict[str, TraceTable]) -> None:
    totals = {"success": 0, "failure": 0, "censored": 0, "invalid": 0}
    reasons: dict[str, int] = {}
    errors = 0
    for t in tau2_tables.values():
        for k, v in t.outcome_counts().items():
            totals[k] += v
        df = t.to_pandas()
        for r, c in df.groupby("trace_id").termination_reason.first().value_counts().items():
            reasons[str(r)] = reasons.get(str(r), 0) + int(c)
        errors += int(df.error.sum())
    assert sum(totals.values()) == 694
    assert totals == {"success": 438, "failure": 246, "censored": 10, "invalid": 0}
    assert reasons == {"user_stop": 602, "agent_stop": 80, "max_steps": 10, "too_many_errors": 2}
    # Step errors are exactly the agent-requested tool results flagged error=true in the raw files.
    expected = 0
    for rel in TAU2_FILES:
        raw = json.loads((shared_data / "tau2-bench" / rel).read_text(encoding="utf-8"))
        expected += sum(1 for s in raw["simulations"] for m in s["messages"]
                        if m["role"] == "tool" and m.get("error") is True and m.get("requestor") == "assistant")
    assert errors == expected == 94


def test_tau2_real_multi_tool_turns_and_user_tools(shared_data: Path, tau2_tables: dict[str, TraceTable]) -> None:
    rel = _MT + "gpt-4.1_telecom_default_gpt-4.1_1trials.json"
    raw = json.loads((shared_data / "tau2-bench" / rel).read_text(encoding="utf-8"))
    agent_calls = sum(len(m.get("tool_calls") or []) for s in raw["simulations"] for m in s["messages"]
                      if m["role"] == "assistant")
    user_calls = sum(len(m.get("tool_calls") or []) for s in raw["simulations"] for m in s["messages"]
                     if m["role"] == "user")
    df = tau2_tables[rel].to_pandas()
    assert (df.step_kind == "tool").sum() == agent_calls
    assert "user" not in set(df.step_kind)
    with_user = read_traces(shared_data / "tau2-bench" / rel, include_user=True).to_pandas()
    assert ((with_user.step_kind == "user") & with_user.tool_name.notna()).sum() == user_calls > 0
    # timing and usage travel along
    assert df.t_start.notna().all() and (df.tokens_in.notna()).any() and (df.cost_usd.notna()).any()
    # a multi-call assistant turn exists somewhere in the real data and gives one tool step per call
    rel2 = _MT + "gpt-4.1_airline_default_gpt-4.1_1trials.json"
    raw2 = json.loads((shared_data / "tau2-bench" / rel2).read_text(encoding="utf-8"))
    calls2 = sum(len(m.get("tool_calls") or []) for s in raw2["simulations"] for m in s["messages"]
                 if m["role"] == "assistant")
    multi = sum(1 for s in raw2["simulations"] for m in s["messages"]
                if m["role"] == "assistant" and len(m.get("tool_calls") or []) > 1)
    assert multi > 0
    assert (tau2_tables[rel2].to_pandas().step_kind == "tool").sum() == calls2


# ================================================================================================ sniffing
def test_sniffing_real_files(shared_data: Path) -> None:
    assert detect_format(shared_data / TAU_FILE) == "tau-bench"
    for rel in TAU2_FILES:
        assert detect_format(shared_data / "tau2-bench" / rel) == "tau2-bench", rel
        assert not TAU_BENCH.sniff(shared_data / "tau2-bench" / rel)
    assert not TAU2_BENCH.sniff(shared_data / TAU_FILE)
    # Neither claims the canonical demo file, the artifact's τ-bench statistics, or other formats' files.
    assert detect_format(DEMO) == "canonical"
    others = [DEMO, *sorted((shared_data / "tracetochain-artifact").rglob("*.json"))[:10],
              *sorted((shared_data / "who-and-when").rglob("*.json"))[:3],
              *sorted((shared_data / "swebench-verified-mini-swe-agent-gemini-3-pro").rglob("*.json"))[:3]]
    for p in others:
        assert not TAU_BENCH.sniff(p) and not TAU2_BENCH.sniff(p), p


# ================================================================================================ τ-bench, invented
def _tau_ep(task: int, trial: int | None, reward: Any, traj: list[dict[str, Any]] | None = None,
            info: Any = None) -> dict[str, Any]:
    ep: dict[str, Any] = {"task_id": task, "reward": reward, "info": info or {"reward_info": {"reward": reward}},
                          "traj": traj if traj is not None else [
                              {"role": "system", "content": "policy"}, {"role": "user", "content": "hi"},
                              {"role": "assistant", "content": None, "tool_calls": [
                                  {"id": "c", "type": "function",
                                   "function": {"name": "get_user", "arguments": "{}"}}]},
                              {"role": "tool", "tool_call_id": "c", "name": "get_user", "content": "Error: no user"},
                              {"role": "assistant", "content": "Sorry."}]}
    if trial is not None:
        ep["trial"] = trial
    return ep


def _write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_tau_bench_exception_during_solve_is_invalid(tmp_path: Path) -> None:
    crash = {"error": "RateLimitError", "traceback": "Traceback …"}
    path = _write(tmp_path / "run.json", [
        _tau_ep(0, 0, 1.0),
        _tau_ep(0, 1, 0.0, info=crash),
        _tau_ep(1, 0, 0.0, traj=[{"role": "system", "content": "policy"}], info=crash),  # no step at all
    ])
    assert detect_format(path) == "tau-bench"
    t = read_traces(path)
    assert t.trace_ids == ["run/task0/trial0", "run/task0/trial1"]
    assert t.outcome_counts() == {"success": 1, "failure": 0, "censored": 0, "invalid": 1}
    tr = _by_trace(t)
    assert set(tr["run/task0/trial1"].termination_reason) == {"error"}
    assert list(tr["run/task0/trial0"].error) == [True, False]
    assert t.report.n_traces_skipped == 0  # the empty crashed episode is a trial without steps, kept
    assert [(z["trace_id"], z["outcome"]) for z in t.report.zero_step] == [("run/task1/trial0", "invalid")]


def test_tau_bench_trial_inferred_duplicates_and_missing_reward(tmp_path: Path) -> None:
    t = read_traces(_write(tmp_path / "a.json", [_tau_ep(5, None, 1.0), _tau_ep(5, None, 0.0)]), format="tau-bench")
    assert t.trace_ids == ["a/task5/trial0", "a/task5/trial1"]
    dup = _write(tmp_path / "dup.json", [_tau_ep(5, 0, 1.0), _tau_ep(5, 0, 1.0)])
    with pytest.raises(TraceValidationError, match="appears twice") as exc:
        read_traces(dup, format="tau-bench")
    assert exc.value.row == 1
    assert read_traces(dup, format="tau-bench", on_error="skip").n_traces == 1
    bad = _write(tmp_path / "bad.json", [_tau_ep(1, 0, None), _tau_ep(2, 0, "1.0"), _tau_ep(3, 0, 1.0), 7])
    with pytest.raises(TraceValidationError) as exc:
        read_traces(bad, format="tau-bench")
    assert exc.value.row == 0 and exc.value.field == "reward" and "no reward" in str(exc.value)
    t = read_traces(bad, format="tau-bench", on_error="skip")
    assert t.trace_ids == ["bad/task3/trial0"] and t.report.n_traces_skipped == 3


def test_tau_bench_bad_shapes(tmp_path: Path) -> None:
    with pytest.raises(TraceValidationError, match="list of τ-bench results"):
        read_traces(_write(tmp_path / "obj.json", {"task_id": 1}), format="tau-bench")
    with pytest.raises(TraceValidationError) as exc:
        read_traces(_write(tmp_path / "m.json", [_tau_ep(0, 0, 1.0, traj=[{"role": "assistant",
                                                                            "tool_calls": "x"}])]),
                    format="tau-bench")
    assert exc.value.field == "traj[0].tool_calls"
    with pytest.raises(TraceValidationError) as exc:
        read_traces(_write(tmp_path / "t.json", [{**_tau_ep(0, 0, 1.0), "task_id": {"a": 1}}]), format="tau-bench")
    assert exc.value.field == "task_id"
    with pytest.raises(TypeError):
        read_traces(_write(tmp_path / "ok.json", [_tau_ep(0, 0, 1.0)]), format="tau-bench", verdicts="x")


def test_tau_bench_threshold(tmp_path: Path) -> None:
    path = _write(tmp_path / "r.json", [_tau_ep(0, 0, 0.7), _tau_ep(1, 0, 1.0 - 1e-7)])
    assert read_traces(path).outcome_counts()["success"] == 1
    assert read_traces(path, success_threshold=0.5).outcome_counts()["success"] == 2


# ================================================================================================ τ²-bench, invented
_INFO = {"git_commit": "x", "num_trials": 1, "max_steps": 30, "max_errors": 10,
         "user_info": {"implementation": "user_simulator", "llm": "gpt-x"},
         "agent_info": {"implementation": "llm_agent", "llm": "gpt-y"},
         "environment_info": {"domain_name": "airline", "policy": "…"}}


def _sim(sid: str, task: str, reason: str | None, reward: float | None, *, messages: Any = None,
         trial: int | None = 0) -> dict[str, Any]:
    sim: dict[str, Any] = {
        "id": sid, "task_id": task, "trial": trial, "termination_reason": reason,
        "reward_info": None if reward is None else {"reward": reward, "db_check": None},
        "messages": messages if messages is not None else [
            {"role": "assistant", "content": "Hi! How can I help you today?", "turn_idx": 0},
            {"role": "user", "content": "cancel", "turn_idx": 1},
            {"role": "assistant", "content": None, "turn_idx": 2, "tool_calls": [
                {"id": "a", "name": "get_reservation", "arguments": {"id": "R1"}, "requestor": "assistant"},
                {"id": "b", "name": "get_user", "arguments": {"id": "U1"}, "requestor": "assistant"}]},
            {"role": "tool", "id": "a", "content": "Error: not found", "requestor": "assistant", "error": False,
             "turn_idx": 3},
            {"role": "tool", "id": "b", "content": "user U1", "requestor": "assistant", "error": True,
             "turn_idx": 4},
            {"role": "assistant", "content": "Done.", "turn_idx": 5}],
    }
    return sim


def test_tau2_termination_reasons(tmp_path: Path) -> None:
    sims = [_sim("s1", "1", "user_stop", 1.0), _sim("s2", "2", "agent_stop", 0.0),
            _sim("s3", "3", "max_steps", 0.0), _sim("s4", "4", "timeout", None),
            _sim("s5", "5", "context_window_exceeded", 0.0), _sim("s6", "6", "infrastructure_error", None),
            _sim("s7", "7", "user_error", 0.0), _sim("s8", "8", "too_many_errors", 0.0),
            _sim("s9", "9", "agent_error", 0.0), _sim("s10", "10", "unexpected_error", 0.0)]
    path = _write(tmp_path / "res.json", {"timestamp": "t", "info": _INFO, "tasks": [], "simulations": sims})
    assert detect_format(path) == "tau2-bench"
    t = read_traces(path)
    out = t.to_pandas().groupby("trace_id").outcome.first().to_dict()
    assert out == {"s1": "success", "s2": "failure", "s3": "censored", "s4": "censored", "s5": "censored",
                   "s6": "invalid", "s7": "invalid", "s8": "failure", "s9": "failure", "s10": "invalid"}
    tr = _by_trace(t)
    assert list(tr["s1"].step_kind) == ["llm", "tool", "tool", "llm"]
    assert list(tr["s1"].tool_name.fillna("")) == ["", "get_reservation", "get_user", ""]
    assert list(tr["s1"].error) == [False, False, True, False]  # τ² trusts the flag, not the text
    assert list(tr["s1"].text)[1] == '{"id": "R1"}'
    # The sets can be replaced.
    t2 = read_traces(path, censored_reasons=("max_steps", "timeout"), invalid_reasons={"infrastructure_error"})
    out2 = t2.to_pandas().groupby("trace_id").outcome.first()
    assert out2["s5"] == "failure" and out2["s7"] == "failure" and out2["s3"] == "censored"
    with pytest.raises(TraceValidationError, match=r"no reward_info\.reward"):
        read_traces(path, censored_reasons=[])  # s4 (timeout) has no reward to fall back on
    with pytest.raises(ValueError, match="both censored and invalid"):
        read_traces(path, censored_reasons=["timeout"], invalid_reasons=["timeout"])
    with pytest.raises(TypeError):
        read_traces(path, censored_reasons=[1, 2])


def test_tau2_bad_simulations(tmp_path: Path) -> None:
    sims = [_sim("ok", "1", "user_stop", 1.0),
            _sim("no-reward", "2", "user_stop", None),
            {**_sim("no-task", "3", "user_stop", 1.0), "task_id": None},
            {**_sim("bad-reward", "4", "user_stop", 1.0), "reward_info": {"reward": "high"}},
            _sim("bad-msgs", "5", "user_stop", 1.0, messages=[{"role": "assistant", "tool_calls": [{"id": 1}]}]),
            {**_sim("ticks", "6", "user_stop", 1.0), "messages": None, "ticks": [{"tick": 0}]},
            _sim("empty", "7", "user_stop", 1.0, messages=[{"role": "user", "content": "hi", "turn_idx": 0}]),
            _sim("ok", "8", "user_stop", 1.0),
            "not a simulation"]
    path = _write(tmp_path / "res.json", {"info": _INFO, "tasks": [], "simulations": sims})
    with pytest.raises(TraceValidationError) as exc:
        read_traces(path)
    assert exc.value.row == 1 and exc.value.field == "reward_info.reward"
    t = read_traces(path, on_error="skip")
    assert t.trace_ids == ["ok"]
    assert t.report.n_traces_skipped == 7
    assert [z["trace_id"] for z in t.report.zero_step] == ["empty"]  # kept as a trial without steps
    fields = [p.field for p in t.report.problems]
    assert fields == ["reward_info.reward", "task_id", "reward_info.reward", "messages[0].tool_calls[0].name",
                      "messages", "id", None]


def test_tau2_orders_by_turn_idx_and_bare_list(tmp_path: Path) -> None:
    msgs = [{"role": "assistant", "content": "second", "turn_idx": 2},
            {"role": "assistant", "content": "first", "turn_idx": 0}]
    path = _write(tmp_path / "bare.json", [_sim("x", "1", "agent_stop", 1.0, messages=msgs, trial=None)])
    assert detect_format(path) == "tau2-bench"
    t = read_traces(path)
    assert list(t.to_pandas().text) == ["first", "second"]
    assert "trial" not in t.columns  # τ² allows trial = null


def test_tau2_directory_form(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "simulations").mkdir(parents=True)
    index = [{"id": f"sim{i}", "task_id": str(i), "trial": 0} for i in range(3)]
    _write(run / "results.json", {"timestamp": "t", "info": _INFO, "tasks": [], "simulation_index": index})
    _write(run / "simulations" / "sim0.json", _sim("sim0", "0", "user_stop", 1.0))
    _write(run / "simulations" / "sim1.json", _sim("sim1", "1", "max_steps", 0.0))
    (run / "simulations" / "sim2.json").write_text("{broken", encoding="utf-8")
    assert detect_format(run) == "tau2-bench"
    assert detect_format(run / "results.json") == "tau2-bench"
    with pytest.raises(TraceValidationError, match=r"sim2\.json"):
        read_traces(run)
    for target in (run, run / "results.json"):
        t = read_traces(target, on_error="skip")
        assert t.trace_ids == ["sim0", "sim1"] and t.report.n_traces_skipped == 1
        assert t.outcome_counts() == {"success": 1, "failure": 0, "censored": 1, "invalid": 0}
    empty = tmp_path / "empty"
    empty.mkdir()
    assert not TAU2_BENCH.sniff(empty)
    with pytest.raises(TraceValidationError, match=r"results\.json"):
        read_traces(empty, format="tau2-bench")


def test_tau2_readers_describe_themselves() -> None:
    for r in (TAU_BENCH, TAU2_BENCH):
        assert r.name in ("tau-bench", "tau2-bench") and r.needs == "nothing else"
        assert r.description and "\n" not in r.description
