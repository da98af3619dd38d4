"""The default analysis on real agent runs: the R∞ interval contains the observed pass rate, no trace is lost from the
held-out checks, and the verdict does not hinge on the seed (or the runs say their verdict is split-dependent)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import tracetochain as tt
from tracetochain.analysis import AnalysisResult, analyze

TAU2 = ("tau2-bench/web/leaderboard/public/submissions/claude-sonnet-4-5_aide-platform_2025-10-31/trajectories/"
        "claude-sonnet-4-5_airline_default_gpt4.1_1trials.json")
MINI = "swebench-verified-mini-swe-agent-gemini-3-pro/swebench_results/20251118_gemini-3-pro-74pct"
CORPORA: dict[str, tuple[str, dict[str, Any]]] = {
    "tau-bench": ("tau-bench/historical_trajectories/gpt-4o-airline.json", {}),
    "tau2-bench": (TAU2, {}),
    "mini-swe-agent": (MINI, {"states": "categorical", "state_options": {"vocabulary": "shell"}}),
    "swe-artifact": ("tracetochain-artifact/swebench_real/corpus.json",
                     {"states": "categorical", "state_options": {"vocabulary": "shell"}}),
}
FAST = {"n_bootstrap": 49, "n_permutations": 99, "samples": 500}


def _read(shared_data: Path, name: str) -> tt.TraceTable:
    path, _ = CORPORA[name]
    if not (shared_data / path).exists():
        pytest.skip(f"{path} is not in the shared data")
    return tt.read_traces(shared_data / path)


def _check(res: AnalysisResult) -> None:
    s = res.ensemble.stats("r_inf")
    assert s.lower <= res.pass_rate <= s.upper, (res.pass_rate, s.lower, s.upper)
    # Nothing lost: every usable trace is in exactly one half of every split, and every held-out trace is compared.
    lengths = res.summary.lengths
    n_usable = res.summary.n_usable
    for s_idx in range(lengths.shape[0]):
        assert int(lengths[s_idx].sum()) == n_usable
    checks = res.certificate.layers["r_inf"].detail
    if checks:
        assert [c.n for c in checks] == [int(x) for x in lengths[:, 1].sum(axis=(1, 2))]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CORPORA))
def test_default_analysis_on_real_runs(shared_data: Path, name: str) -> None:
    traces = _read(shared_data, name)
    _, options = CORPORA[name]
    results = [analyze(traces, seed=seed, **options, **FAST) for seed in range(10)]
    for res in results:
        _check(res)
    decisions = [r.certificate.decision for r in results]
    if len(set(decisions)) > 1:
        # The verdict depends on the split: every run whose verdict differs from the majority says so.
        majority = max(set(decisions), key=decisions.count)
        for r in results:
            if r.certificate.decision != majority:
                assert any(layer.split_dependent for layer in r.certificate.layers.values()), (
                    name, decisions, str(r.certificate))


def test_tau_bench_task_clusters_widen_the_interval(shared_data: Path) -> None:
    """τ-bench airline: 50 tasks × 4 trials, design effect ≈ 2.2; the tempered posterior's R∞ interval is about
    √2.2 wider than the untempered one, and the trials layer rejects exchangeable trials."""
    traces = _read(shared_data, "tau-bench")
    res = analyze(traces, **FAST)
    assert 2.0 < res.design_effect < 2.5
    s = res.ensemble.stats("r_inf")
    plain = tt.DirichletPosterior(samples=2000).fit(res.chain).fetch_model().ensemble.stats("r_inf")
    ratio = (s.upper - s.lower) / (plain.upper - plain.lower)
    assert 1.3 < ratio < 1.7, ratio
    assert res.certificate.layers["trials"].status == "reject"
    assert res.certificate.status("pass^k") == "withheld" and res.certificate.status("R_inf") == "certified"
