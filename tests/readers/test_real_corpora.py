"""Nothing lost on the shared real corpora: every episode in the source is counted somewhere, and the pass rate the
report shows equals the pass rate of the corpus's own verdicts — and so does the chain's R∞ fitted with no prior
(pseudocount 0), zero-step episodes counted as the start distribution's direct exits.

For each corpus the expected numbers come from the source itself, counted here without the reader: the number of
episodes (list length, simulations, trajectory files, log headers) and the successes by the producer's own rule
(τ-bench ``reward``, τ²-bench ``reward_info.reward``, the SWE-bench harness's ``resolved``, Reflexion's trial
summaries), cross-checked against the counts the corpus README states. The reader must account for every
episode: ``traces in = success + failure + censored + invalid + zero-step (+ skipped, each with its reason)``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tracetochain.analysis import analyze
from tracetochain.readers import read_traces
from tracetochain.report import build_report
from tracetochain.traces import TraceTable

TAU2_README_ROW = re.compile(r"^\| (\S+\.json) \| [0-9a-f]{40} \| [^|]+ \| [^|]+ \| [^|]+ \| (\d+) \| (\d+) \|$")


@dataclass(frozen=True)
class Expected:
    """What the source says: episodes in it, successes by its own verdicts, and episodes a reader may refuse."""

    episodes: int
    successes: int
    refused: int = 0  # episodes the reader is expected to refuse, each counted with its reason
    invalid: int = 0  # episodes the producer itself marks as not scorable (excluded from the pass rate)


def accounted(table: TraceTable) -> int:
    counts = table.outcome_counts()
    return sum(counts.values()) + table.report.n_zero_step


def check(table: TraceTable, expected: Expected) -> None:
    report = table.report
    assert accounted(table) + report.n_traces_skipped == expected.episodes, report
    assert report.n_traces_skipped == expected.refused, report.skipped_by_reason
    successes = table.outcome_counts()["success"] + report.zero_step_outcomes()["success"]
    assert successes == expected.successes
    invalid = table.outcome_counts()["invalid"] + report.zero_step_outcomes()["invalid"]
    assert invalid == expected.invalid
    result = analyze(table, pseudocount=0.0, audit=False, intervals=None)
    doc = build_report(result)
    usable = expected.episodes - expected.refused - expected.invalid
    assert result.summary.n_usable == usable
    assert doc["empirical"]["pass_rate"] == pytest.approx(expected.successes / usable, abs=1e-12)
    censored = table.outcome_counts()["censored"] + report.zero_step_outcomes()["censored"]
    if censored == 0:  # with α = 0 and no censoring, R∞ is the pass rate exactly (zero-step episodes included)
        assert result.chain.r_inf == pytest.approx(expected.successes / usable, abs=1e-9)
        assert doc["metrics"]["r_inf"] == pytest.approx(expected.successes / usable, abs=1e-9)
    zero = report.zero_step_outcomes()
    assert result.chain.start_success == pytest.approx(zero["success"] / (usable - censored), abs=1e-12)


# ------------------------------------------------------------------------------------------------ τ-bench
def test_tau_bench_gpt4o_airline(shared_data: Path) -> None:
    path = shared_data / "tau-bench" / "historical_trajectories" / "gpt-4o-airline.json"
    raw = json.loads(path.read_text())
    expected = Expected(len(raw), sum(r["reward"] >= 1 - 1e-6 for r in raw))
    assert (expected.episodes, expected.successes) == (200, 84)  # the README's counts
    check(read_traces(path), expected)


# ------------------------------------------------------------------------------------------------ τ²-bench
def tau2_files(shared_data: Path) -> dict[str, tuple[int, int]]:
    """README rows: path → (simulations, successes)."""
    rows = {}
    for line in (shared_data / "tau2-bench" / "README.md").read_text().splitlines():
        m = TAU2_README_ROW.match(line)
        if m:
            rows[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    return rows


def test_tau2_readme_lists_every_results_file(shared_data: Path) -> None:
    listed = set(tau2_files(shared_data))
    on_disk = {p.relative_to(shared_data / "tau2-bench").as_posix()
               for p in (shared_data / "tau2-bench").rglob("*.json")}
    assert listed and listed <= on_disk


@pytest.mark.slow
@pytest.mark.parametrize("index", range(17))
def test_tau2_bench_results(shared_data: Path, index: int) -> None:
    files = sorted(tau2_files(shared_data).items())
    if index >= len(files):
        pytest.skip(f"the README lists {len(files)} files")
    rel, (n, succ) = files[index]
    path = shared_data / "tau2-bench" / rel
    sims = json.loads(path.read_text())["simulations"]
    by_reward = sum((s.get("reward_info") or {}).get("reward") == 1.0 for s in sims)
    invalid = sum(s.get("termination_reason") in ("infrastructure_error", "user_error", "unexpected_error")
                  for s in sims)
    assert (len(sims), by_reward) == (n, succ), rel  # the file agrees with the README
    check(read_traces(path), Expected(n, succ, invalid=invalid))


# ------------------------------------------------------------------------------------------------ SWE-bench
@pytest.mark.slow
def test_mini_swe_agent_gemini_run(shared_data: Path) -> None:
    root = shared_data / "swebench-verified-mini-swe-agent-gemini-3-pro"
    run = root / "swebench_results" / "20251118_gemini-3-pro-74pct"
    sampled = (root / "SAMPLED_INSTANCES.txt").read_text().split()
    verdicts = {r["instance_id"]: r["resolved"]
                for r in json.loads((run / "results_summary.json").read_text())["instances"]}
    files = list((run / "trajs").rglob("*.traj.json"))
    assert len(files) == len(sampled) == 250
    expected = Expected(len(files), sum(verdicts[i] for i in sampled))
    assert expected.successes == 183  # the README's count
    check(read_traces(run), expected)


def test_swe_agent_artifact_corpus(shared_data: Path) -> None:
    path = shared_data / "tracetochain-artifact" / "swebench_real" / "corpus.json"
    raw = json.loads(path.read_text())
    expected = Expected(len(raw), sum(bool(v["resolved"]) for v in raw.values()))
    assert (expected.episodes, expected.successes) == (479, 324)
    check(read_traces(path), expected)


# ------------------------------------------------------------------------------------------------ Reflexion
@pytest.mark.parametrize(("variant", "duplicates"), [("base", 12), ("reflexion", 0)])
def test_reflexion_logs(shared_data: Path, variant: str, duplicates: int) -> None:
    """The logs' own trial summaries give the successes. The base log repeats 12 (question, trial) logs verbatim;
    the reader keeps the first of each and counts the repeats as skipped, naming the earlier line."""
    path = shared_data / "reflexion-hotpotqa" / "hotpotqa_runs" / "root" / "ReAct" / variant / \
        "100_questions_5_trials.txt"
    text = path.read_text()
    episodes = len(re.findall(r"^Question:", text, re.MULTILINE))
    correct = sum(int(m) for m in re.findall(r"^Trial summary: Correct: (\d+),", text, re.MULTILINE))
    table = read_traces(path, on_error="skip")
    check(table, Expected(episodes, correct, refused=duplicates))
    if duplicates:
        assert table.report.skipped_by_reason == {
            "duplicate of an earlier log of the same question in this trial": duplicates}


# ------------------------------------------------------------------------------------------------ inspect_ai
@pytest.mark.parametrize(("name", "samples", "successes"), [
    ("log_streaming.eval", 4, 3), ("log_message_deduplication.eval", 1, 0), ("log_read_sample.eval", 1, 1),
    ("log_read_sample.json", 1, 1),
])
def test_inspect_ai_logs(shared_data: Path, name: str, samples: int, successes: int) -> None:
    check(read_traces(shared_data / "inspect-ai-logs" / name), Expected(samples, successes))


def test_inspect_ai_unscored_log_is_refused_and_counted(shared_data: Path) -> None:
    table = read_traces(shared_data / "inspect-ai-logs" / "log_tool_call_error.json", on_error="skip")
    assert accounted(table) == 0 and table.report.n_traces_skipped == 1
