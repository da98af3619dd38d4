"""Homogeneity test and compare: two agents, one agent against itself, and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_runner import run_cli

import tracetochain as tt
from tracetochain.audit import homogeneity_test
from tracetochain.compare import compare


def test_homogeneity_size_and_power() -> None:
    chain = tt.datasets.notation_chain()
    same = [homogeneity_test(tt.datasets.simulate_traces(chain, 200, 2 * s),
                             tt.datasets.simulate_traces(chain, 200, 2 * s + 1), samples=99, seed=s).rejects
            for s in range(20)]
    assert sum(same) <= 3  # 5% nominal: ≤ 3 of 20 is well within binomial noise
    worse = chain.with_changes(Q=[[0.35, 0.3, 0], [0, 0.4, 0.3], [0, 0, 0.6]], R_failure=[0.25, 0.1, 0.1])
    result = homogeneity_test(tt.datasets.simulate_traces(chain, 300, 1),
                              tt.datasets.simulate_traces(worse, 300, 2), samples=199)
    assert result.rejects and result.differing == ("plan",) and result.method == "rao-scott"
    assert result.to_dict()["per_state"][0]["state"] == "plan"


@pytest.fixture(scope="module")
def tau2(shared_data: Path) -> dict[str, tt.TraceTable]:
    root = shared_data / "tau2-bench"
    files = {p.name: p for p in root.rglob("*.json")}
    return {"langchain": tt.read_traces(files["langchain_agent_airline_2025-11-26_00-37-06.json"]),
            "claude": tt.read_traces(files["claude-sonnet-4-5_airline_default_gpt4.1_1trials.json"])}


def test_two_tau2_airline_agents(tau2: dict[str, tt.TraceTable]) -> None:
    r = compare(tau2["langchain"], tau2["claude"], names=("langchain", "claude"), state_options={"vocabulary": "chat"},
                samples=200)
    lo, hi = r.delta_r_inf_interval
    assert lo < r.delta_r_inf < hi
    assert lo > 0 and r.verdict.startswith("claude is more reliable than langchain: ΔR∞ = +")
    assert r.homogeneity.rejects
    doc = r.to_dict()
    json.dumps(doc, allow_nan=False)
    assert len(doc["delta_reliability"]) == 51 and doc["changed_transitions"]


def test_a_set_against_itself(tau2: dict[str, tt.TraceTable]) -> None:
    r = compare(tau2["claude"], tau2["claude"], state_options={"vocabulary": "chat"}, samples=200)
    assert r.delta_r_inf == 0.0
    lo, hi = r.delta_r_inf_interval
    assert lo <= 0 <= hi and r.verdict.startswith("No significant difference")
    assert not r.homogeneity.rejects and r.homogeneity.g2 == pytest.approx(0.0, abs=1e-9)


def test_compare_cli(tmp_path: Path) -> None:
    ex = str(tt.datasets.example_path())
    r = run_cli("compare", ex, ex, "--json", "--samples", "60")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["kind"] == "tracetochain.comparison" and doc["delta_r_inf"] == 0.0


def test_compare_markdown(tau2: dict[str, tt.TraceTable]) -> None:
    r = compare(tau2["langchain"], tau2["claude"], names=("a|<b>", "claude"), state_options={"vocabulary": "chat"},
                samples=60)
    md = r.to_markdown()
    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark").enable("table").render(md)  # the name is a code span: shown, never markup
    assert md.startswith("### claude is more reliable") and "| R∞ |" in md and "<b>" not in html


def test_a_set_against_itself_with_learned_states() -> None:
    """One state model is learned on both sides together; their trace ids coincide, which must not read as a trace
    whose steps repeat."""
    t = tt.datasets.load_example()
    r = compare(t, t, states="categorical", state_options={"vocabulary": "chat"}, samples=50)
    assert r.delta_r_inf == 0.0 and r.chain_a.state_names == r.chain_b.state_names
    assert r.chain_a.n_states > 1 and r.homogeneity.g2 == pytest.approx(0.0, abs=1e-9)


def test_posterior_comparison_corrects_the_homogeneity_test_for_clustered_steps() -> None:
    """With posterior intervals the per-state test fell back to plain χ² (no replicates were drawn), which treats the
    steps of one trace as independent: two samples of one agent had a 'changed' state in 13.5 % of corpora."""
    a = tt.datasets.simulate_traces(tt.datasets.ss7_chain(), 200, seed=1)
    b = tt.datasets.simulate_traces(tt.datasets.ss7_chain(), 200, seed=2)
    res = compare(a, b, intervals="posterior", samples=100)
    assert res.homogeneity.to_dict()["method"] == "rao-scott"
