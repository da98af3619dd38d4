"""A small corpus in the format of every registered reader, for the engine-parity tests.

Formats that can be written are written here from a simulated corpus (any size, any seed): the canonical table as
JSONL, Parquet and CSV, MAST-style step CSV, OpenAI chat logs, τ-bench and τ²-bench results, Reflexion text logs,
OTLP JSONL spans, a Langfuse export folder and the SWE-agent token corpus. The others (SWE-agent and mini-swe-agent
run folders, inspect_ai logs) are the invented fixture files of the readers' own tests in ``tests/data/readers``.

:data:`CORPORA` maps each reader name to its corpora; a reader registered without an entry here makes
``test_reader_parity.py`` fail (naming the reader), never skip.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.csv as pacsv
import pyarrow.parquet as pq

import tracetochain as tt

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "readers"


@dataclass(frozen=True)
class Episode:
    trace_id: str
    task: int
    trial: int
    states: list[str]
    outcome: str  # success / failure / censored


@dataclass(frozen=True)
class Corpus:
    """A file or folder in one reader's format, with the reader options it needs (also as ``-O KEY=VALUE``)."""

    path: Path
    options: dict[str, Any] = field(default_factory=dict)
    #: Whether the corpus was written from a simulation (so any seed and size can be drawn).
    simulated: bool = True
    #: ``partition_options`` that cut it (canonical JSONL/Parquet only; other formats are one partition).
    partitions: dict[str, int] = field(default_factory=dict)


def simulated_episodes(n_traces: int, seed: int, max_steps: int = 18) -> list[Episode]:
    """``n_traces`` episodes of a random 4-state chain: three trials per task; long ones are censored."""
    chain = tt.datasets.random_chain(4, seed=seed, rho=0.8)
    table = tt.datasets.simulate_traces(chain, n_traces, seed=seed, max_steps=max_steps).to_arrow()
    by_trace: dict[str, list[str]] = {}
    outcome: dict[str, str] = {}
    for rec in table.to_pylist():
        by_trace.setdefault(rec["trace_id"], []).append(rec["state"])
        outcome[rec["trace_id"]] = rec["outcome"]
    return [Episode(tid, i // 3, i % 3, states, outcome[tid]) for i, (tid, states) in enumerate(by_trace.items())]


def _canonical_rows(episodes: list[Episode]) -> list[dict[str, Any]]:
    return [{"trace_id": e.trace_id, "step_idx": i, "state": s, "outcome": e.outcome, "task_id": f"task{e.task}",
             "trial": e.trial} for e in episodes for i, s in enumerate(e.states)]


def _table(episodes: list[Episode]) -> Any:
    import pyarrow as pa

    return pa.Table.from_pylist(_canonical_rows(episodes))


# ------------------------------------------------------------------------------------------------- writers
def write_canonical_jsonl(root: Path, episodes: list[Episode]) -> Corpus:
    path = root / "traces.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _canonical_rows(episodes)), encoding="utf-8")
    return Corpus(path, partitions={"bytes_per_partition": 1_500})


def write_canonical_parquet(root: Path, episodes: list[Episode]) -> Corpus:
    path = root / "traces.parquet"
    pq.write_table(_table(episodes), path, row_group_size=37)
    return Corpus(path, partitions={"rows_per_partition": 50})


def write_canonical_csv(root: Path, episodes: list[Episode]) -> Corpus:
    path = root / "traces.csv"
    pacsv.write_csv(_table(episodes), path)
    return Corpus(path)


def write_mast_csv(root: Path, episodes: list[Episode]) -> Corpus:
    """One row per step; every step but the last says ``continue``, the last the verdict (none when censored)."""
    path = root / "steps.csv"
    verdict = {"success": "solved", "failure": "failure", "censored": "continue"}
    with path.open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(["trace_id", "task_id", "trial", "step_idx", "state", "tool", "error", "outcome"])
        for e in episodes:
            for i, s in enumerate(e.states):
                last = i == len(e.states) - 1
                out.writerow([e.trace_id, f"task{e.task}", e.trial, i, s, s if i % 2 else "", str(i % 5 == 4).lower(),
                              verdict[e.outcome] if last else "continue"])
    return Corpus(path)


def _chat(e: Episode, *, tau2: bool = False) -> list[dict[str, Any]]:
    """System, user, then per state one assistant tool call answered by its tool message (every fifth an error);
    a closing assistant reply."""
    messages: list[dict[str, Any]] = [] if tau2 else [{"role": "system", "content": "policy"}]
    messages.append({"role": "user", "content": f"task {e.task}"})
    for i, s in enumerate(e.states):
        cid = f"c{i}"
        if tau2:
            messages.append({"role": "assistant", "content": None,
                             "tool_calls": [{"id": cid, "name": s, "arguments": {"i": i}, "requestor": "assistant"}]})
            messages.append({"role": "tool", "id": cid, "content": f"{s} ok", "requestor": "assistant",
                             "error": i % 5 == 4})
        else:
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": s, "arguments": json.dumps({"i": i})}}]})
            messages.append({"role": "tool", "tool_call_id": cid, "name": s,
                             "content": "Error: busy" if i % 5 == 4 else f"{s} ok"})
    messages.append({"role": "assistant", "content": "done"})
    if tau2:
        for k, m in enumerate(messages):
            m["turn_idx"] = k
    return messages


def write_openai_messages(root: Path, episodes: list[Episode]) -> Corpus:
    path = root / "episodes.jsonl"
    path.write_text("".join(json.dumps({"id": e.trace_id, "task_id": f"task{e.task}", "trial": e.trial,
                                        "outcome": e.outcome, "messages": _chat(e)}) + "\n" for e in episodes),
                    encoding="utf-8")
    return Corpus(path)


def write_tau_bench(root: Path, episodes: list[Episode]) -> Corpus:
    """τ-bench's results list (reward only: a censored episode is a failure there)."""
    path = root / "gpt-x-airline.json"
    results = [{"task_id": e.task, "trial": e.trial, "reward": 1.0 if e.outcome == "success" else 0.0,
                "info": {"reward_info": {"reward": 1.0 if e.outcome == "success" else 0.0}}, "traj": _chat(e)}
               for e in episodes]
    path.write_text(json.dumps(results), encoding="utf-8")
    return Corpus(path)


def write_tau2_bench(root: Path, episodes: list[Episode]) -> Corpus:
    """τ²-bench's results document; a censored episode stopped at ``max_steps``."""
    path = root / "results.json"
    info = {"git_commit": "x", "num_trials": 3, "max_steps": 30, "max_errors": 10,
            "user_info": {"implementation": "user_simulator", "llm": "gpt-x"},
            "agent_info": {"implementation": "llm_agent", "llm": "gpt-y"},
            "environment_info": {"domain_name": "airline", "policy": "…"}}
    sims = [{"id": e.trace_id, "task_id": str(e.task), "trial": e.trial,
             "termination_reason": "max_steps" if e.outcome == "censored" else "user_stop",
             "reward_info": {"reward": 1.0 if e.outcome == "success" else 0.0, "db_check": None},
             "messages": _chat(e, tau2=True)} for e in episodes]
    path.write_text(json.dumps({"timestamp": "t", "info": info, "tasks": [], "simulations": sims}), encoding="utf-8")
    return Corpus(path)


def write_reflexion(root: Path, episodes: list[Episode]) -> Corpus:
    """One ``BEGIN TRIAL`` block per trial number; each episode a ReAct log with one ``Action`` per state, closed by
    ``Finish`` (CORRECT / INCORRECT) unless censored (HALTED: no answer)."""
    path = root / "100_questions_3_trials.txt"
    lines: list[str] = []
    for trial in sorted({e.trial for e in episodes}):
        block = [e for e in episodes if e.trial == trial]
        sections = {o: [e for e in block if e.outcome == o] for o in ("success", "failure", "censored")}
        lines += ["#" * 40, f"BEGIN TRIAL {trial + 1}",
                  f"Trial summary: Correct: {len(sections['success'])}, Incorrect: {len(sections['failure'])}, "
                  f"Halted: {len(sections['censored'])}", "#" * 39]
        for outcome, heading in (("success", "CORRECT"), ("failure", "INCORRECT"), ("censored", "HALTED")):
            lines.append(f"------------- BEGIN {heading} AGENTS -------------")
            for e in sections[outcome]:
                lines.append(f"Question: What is answer {e.trace_id} of task {e.task}?")
                n = 0
                for n, s in enumerate(e.states, start=1):
                    lines += [f"Thought {n}: step {n}.", f"Action {n}: {s.capitalize()}[{e.trace_id}]",
                              f"Observation {n}: seen {s}."]
                if outcome != "censored":
                    verdict = "CORRECT" if outcome == "success" else "INCORRECT"
                    lines += [f"Action {n + 1}: Finish[{e.trace_id}]", f"Observation {n + 1}: Answer is {verdict}"]
                lines.append(f"Correct answer: {e.trace_id}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return Corpus(path)


def _av(v: Any) -> dict[str, Any]:
    return {"intValue": str(v)} if isinstance(v, int) else {"stringValue": str(v)}


def write_otlp(root: Path, episodes: list[Episode]) -> Corpus:
    """Collector file-exporter JSONL, one line per episode: ``invoke_agent`` with its evaluation event
    (pass / fail; a censored episode's agent finished on ``max_turns``, which is no verdict: ``fail`` here) and one
    ``execute_tool`` child per state."""
    path = root / "spans.jsonl"
    t0 = 1_767_000_000 * 10**9
    lines = []
    for k, e in enumerate(episodes):
        tid = f"{k + 1:032x}"
        root_id = f"{k + 1:08x}00000000"
        start = t0 + k * 10**12
        label = "pass" if e.outcome == "success" else "fail"
        spans = [{"traceId": tid, "spanId": root_id, "parentSpanId": "", "name": "invoke_agent", "kind": 1,
                  "startTimeUnixNano": str(start), "endTimeUnixNano": str(start + 10**11),
                  "attributes": [{"key": "gen_ai.operation.name", "value": _av("invoke_agent")},
                                 {"key": "task.id", "value": _av(f"task{e.task}")},
                                 {"key": "trial", "value": _av(e.trial)}],
                  "status": {},
                  "events": [{"name": "gen_ai.evaluation.result", "timeUnixNano": str(start + 10**11),
                              "attributes": [{"key": "gen_ai.evaluation.name", "value": _av("task_success")},
                                             {"key": "gen_ai.evaluation.score.label", "value": _av(label)}]}]}]
        for i, s in enumerate(e.states):
            begin = start + (i + 1) * 10**9
            spans.append({"traceId": tid, "spanId": f"{k + 1:08x}{i + 1:08x}", "parentSpanId": root_id,
                          "name": f"execute_tool {s}", "kind": 1, "startTimeUnixNano": str(begin),
                          "endTimeUnixNano": str(begin + 5 * 10**8),
                          "attributes": [{"key": "gen_ai.operation.name", "value": _av("execute_tool")},
                                         {"key": "gen_ai.tool.name", "value": _av(s)}],
                          "status": {"code": 2} if i % 5 == 4 else {}})
        lines.append(json.dumps({"resourceSpans": [{"resource": {"attributes": []},
                                                    "scopeSpans": [{"scope": {"name": "t"}, "spans": spans}]}]}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return Corpus(path, options={"task_attribute": "task.id", "trial_attribute": "trial"})


def _iso(seconds: float) -> str:
    minutes, sec = divmod(seconds, 60)
    hours, minutes = divmod(int(minutes), 60)
    return f"2026-01-01T{10 + hours:02d}:{minutes:02d}:{sec:06.3f}Z"


def write_langfuse(root: Path, episodes: list[Episode]) -> Corpus:
    """An export folder: ``traces.json``, ``observations.jsonl`` (an AGENT with one TOOL child per state) and
    ``scores.json`` (a NUMERIC ``task_success`` per trace; censored episodes score 0)."""
    folder = root / "langfuse_export"
    folder.mkdir()
    traces, observations, scores = [], [], []
    for k, e in enumerate(episodes):
        t = 60.0 * k
        tid = f"tr_{k}"
        traces.append({"id": tid, "name": "qa", "timestamp": _iso(t),
                       "metadata": {"task_id": f"task{e.task}", "trial": e.trial}})
        observations.append({"id": f"{tid}_a", "traceId": tid, "type": "AGENT", "name": "agent", "startTime": _iso(t),
                             "endTime": _iso(t + 50), "parentObservationId": None, "level": "DEFAULT"})
        for i, s in enumerate(e.states):
            observations.append({"id": f"{tid}_{i:03d}", "traceId": tid, "type": "TOOL", "name": s,
                                 "startTime": _iso(t + i + 1), "endTime": _iso(t + i + 1.5),
                                 "parentObservationId": f"{tid}_a",
                                 "level": "ERROR" if i % 5 == 4 else "DEFAULT"})
        scores.append({"id": f"s{k}", "traceId": tid, "name": "task_success",
                       "value": 1.0 if e.outcome == "success" else 0.0, "dataType": "NUMERIC", "source": "API",
                       "timestamp": _iso(t + 55)})
    (folder / "traces.json").write_text(json.dumps(traces), encoding="utf-8")
    (folder / "observations.jsonl").write_text("".join(json.dumps(o) + "\n" for o in observations), encoding="utf-8")
    (folder / "scores.json").write_text(json.dumps(scores), encoding="utf-8")
    return Corpus(folder)


def write_swe_token_corpus(root: Path, episodes: list[Episode]) -> Corpus:
    """The TraceToChain artifact's token corpus: instance → command tokens and a resolved flag (no censoring)."""
    path = root / "token_corpus.json"
    doc = {f"demo__{e.trace_id}": {"toks": e.states, "resolved": e.outcome == "success",
                                   "label": "S" if e.outcome == "success" else "F"} for e in episodes}
    path.write_text(json.dumps(doc), encoding="utf-8")
    return Corpus(path)


# ------------------------------------------------------------------------------------------------- fixtures
def _copy(src: Path, root: Path) -> Path:
    import shutil

    dst = root / src.name
    if src.is_dir():
        shutil.copytree(src, dst)
    else:
        shutil.copy(src, dst)
    return dst


def fixture_swe_agent(root: Path, episodes: list[Episode]) -> Corpus:
    run = _copy(FIXTURES / "swe_agent" / "sweagent_run", root)
    # results.json lacks demo__pkg-303: a verdict file for all three (as users pass one: -O verdicts=PATH)
    verdicts = root / "verdicts.json"
    verdicts.write_text(json.dumps({"demo__pkg-101": False, "demo__pkg-202": True, "demo__pkg-303": False}))
    return Corpus(run, options={"verdicts": str(verdicts)}, simulated=False)


def fixture_mini_swe_agent(root: Path, episodes: list[Episode]) -> Corpus:
    return Corpus(_copy(FIXTURES / "swe_agent" / "mini_run", root), simulated=False)


def fixture_inspect_ai(root: Path, episodes: list[Episode]) -> Corpus:
    return Corpus(_copy(FIXTURES / "inspect_ai" / "toy_refunds.json", root), simulated=False)


Writer = Callable[[Path, list[Episode]], Corpus]

#: reader name → {variant: how to make a corpus in its format}.
CORPORA: dict[str, dict[str, Writer]] = {
    "canonical": {"jsonl": write_canonical_jsonl, "parquet": write_canonical_parquet, "csv": write_canonical_csv},
    "mast-csv": {"csv": write_mast_csv},
    "openai-messages": {"jsonl": write_openai_messages},
    "tau-bench": {"json": write_tau_bench},
    "tau2-bench": {"json": write_tau2_bench},
    "reflexion": {"txt": write_reflexion},
    "otlp": {"jsonl": write_otlp},
    "langfuse": {"export": write_langfuse},
    "swe-token-corpus": {"json": write_swe_token_corpus},
    "swe-agent": {"fixture": fixture_swe_agent},
    "mini-swe-agent": {"fixture": fixture_mini_swe_agent},
    "inspect-ai": {"fixture": fixture_inspect_ai},
}


def make_corpus(reader: str, variant: str, root: Path, *, n_traces: int = 90, seed: int = 5) -> Corpus:
    root.mkdir(parents=True, exist_ok=True)
    return CORPORA[reader][variant](root, simulated_episodes(n_traces, seed))
