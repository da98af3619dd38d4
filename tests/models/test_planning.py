"""Planning figures (issue 29): the ANOVA intraclass correlation, the design effect, and the tasks × trials planner —
its variance formula against closed forms and Monte Carlo, and its width prediction against sub-samples of the shared
τ-bench / τ²-bench runs."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy.special import comb

import tracetochain as tt
from tracetochain.audit._trials import TaskTable, anova_icc
from tracetochain.models.passk import task_trials
from tracetochain.models.planning import (
    icc_estimate,
    pass_k_variance,
    plan_trials,
    predicted_width,
    tasks_needed,
)


def test_anova_icc_golden_and_the_design_effect_uses_it() -> None:
    c, n = np.array([4, 4, 0, 0, 2]), np.array([4, 4, 4, 4, 4])
    # MSB = 4·Σ(p_t − 0.5)²/4 = 1, MSW = Σ(c − c²/n)/15 = 1/15, m0 = 4 → ρ = (1 − 1/15)/(1 + 3/15) = 7/9
    assert anova_icc(c, n) == pytest.approx(7 / 9)
    table = TaskTable(np.arange(5, dtype=np.uint64), n, c)
    assert table.design_effect() == pytest.approx(1 + 3 * 7 / 9)
    est = icc_estimate(c, n, n_bootstrap=200)
    assert est.design_effect == pytest.approx(1 + 3 * 7 / 9) and est.interval[0] <= est.icc <= est.interval[1]
    assert anova_icc(np.array([1, 1]), np.array([1, 1])) is None  # no task repeats
    assert icc_estimate([2, 2], [2, 2]).icc is None  # every trial succeeded: not defined, said so
    assert "same outcome" in icc_estimate([2, 2], [2, 2]).note


def test_variance_closed_form_for_the_pass_rate_and_monte_carlo_for_pass_k() -> None:
    for mu, rho, m in ((0.6, 0.2, 4), (0.3, 0.0, 3), (0.8, 0.5, 8)):
        assert pass_k_variance(mu, rho, m, 1) == pytest.approx(mu * (1 - mu) * (1 + (m - 1) * rho) / m)
    rng = np.random.default_rng(3)
    mu, rho, m, k = 0.55, 0.3, 5, 3
    s = 1 / rho - 1
    p = rng.beta(mu * s, (1 - mu) * s, 400_000)
    c = rng.binomial(m, p)
    h = comb(c, k) / comb(m, k)
    assert pass_k_variance(mu, rho, m, k) == pytest.approx(h.var(), rel=0.02)
    assert pass_k_variance(mu, rho, 2, 3) is None


def test_tasks_needed_inverts_the_predicted_width() -> None:
    for k, m in ((1, 1), (1, 4), (3, 5)):
        t = tasks_needed(0.6, 0.25, m, 0.1, k=k)
        assert t is not None
        assert predicted_width(0.6, 0.25, m, t, k=k) <= 0.1 < predicted_width(0.6, 0.25, m, t - 1, k=k)
    # more trials per task never need more tasks; with correlated trials they need more episodes
    need = [tasks_needed(0.6, 0.25, m, 0.1) for m in (1, 2, 4, 8)]
    assert need == sorted(need, reverse=True)
    assert need[3] * 8 > need[0] * 1
    plan = plan_trials([3, 0, 4, 1, 2, 4], [4] * 6, width=0.2, ks=(1, 3), n_bootstrap=100)
    doc = plan.to_dict()
    assert [r["trials"] for r in doc["rows"]] == [1, 2, 3, 4, 5, 8]
    assert doc["rows"][0]["tasks"]["pass^3"] is None and doc["rows"][2]["tasks"]["pass^3"] > 0
    with pytest.raises(ValueError, match="width"):
        tasks_needed(0.5, 0.1, 2, 1.5)


def _subsample_sd(c: np.ndarray, outcomes: list[np.ndarray], tasks: int, trials: int, k: int, reps: int,
                  seed: int) -> float:
    """SD over sub-samples (tasks drawn with replacement, `trials` of each task's trials without) of the per-task
    unbiased pass^k estimator."""
    rng = np.random.default_rng(seed)
    values = np.empty(reps)
    for r in range(reps):
        pick = rng.integers(0, c.size, tasks)
        cs = np.array([rng.permutation(outcomes[t])[:trials].sum() for t in pick])
        values[r] = np.mean(comb(cs, k) / comb(trials, k))
    return float(values.std(ddof=1))


def test_planner_width_prediction_on_tau_bench_subsamples(shared_data: Path) -> None:
    """τ-bench gpt-4o airline: 50 tasks × 4 trials. The planner's width for T tasks × m trials (from the full run's
    pass rate and ICC) against the spread of the estimator over 400 sub-samples of that design."""
    traces = tt.read_traces(shared_data / "tau-bench" / "historical_trajectories" / "gpt-4o-airline.json")
    c, n = task_trials(traces)
    assert c.size == 50 and set(n.tolist()) == {4}
    est = icc_estimate(c, n, n_bootstrap=200)
    assert est.icc is not None and 0.2 < est.icc < 0.7 and est.interval[0] < est.icc < est.interval[1]
    mu, rho = est.pass_rate, est.icc
    outcomes = [np.array([1] * int(ci) + [0] * int(ni - ci)) for ci, ni in zip(c, n, strict=True)]
    z = 2 * 1.959964
    ratios = {}
    for tasks, trials, k in ((20, 2, 1), (40, 4, 1), (30, 3, 2), (40, 4, 3)):
        predicted = predicted_width(mu, rho, trials, tasks, k=k)
        observed = z * _subsample_sd(c, outcomes, tasks, trials, k, 400, seed=tasks + trials + k)
        ratios[(tasks, trials, k)] = predicted / observed
    assert all(0.85 < r < 1.18 for r in ratios.values()), ratios  # measured 0.947–1.015


def test_planner_width_prediction_on_tau2_bench_subsamples(shared_data: Path) -> None:
    """τ²-bench runs have one trial per task: the ICC is not estimable (said so) and the planner is the binomial
    one; its width for T tasks against sub-samples of a 50-task airline run."""
    root = shared_data / "tau2-bench"
    files = {p.name: p for p in root.rglob("*.json")}
    traces = tt.read_traces(files["claude-sonnet-4-5_airline_default_gpt4.1_1trials.json"])
    c, n = task_trials(traces)
    est = icc_estimate(c, n)
    assert est.icc is None and "tried twice" in est.note and est.design_effect == 1.0
    outcomes = [np.array([1] * int(ci) + [0] * int(ni - ci)) for ci, ni in zip(c, n, strict=True)]
    for tasks in (20, 50):
        predicted = predicted_width(est.pass_rate, 0.0, 1, tasks)
        observed = 2 * 1.959964 * _subsample_sd(c, outcomes, tasks, 1, 1, 400, seed=tasks)
        assert 0.8 < predicted / observed < 1.25
    assert math.isclose(predicted_width(est.pass_rate, 0.0, 1, 50),
                        2 * 1.959964 * math.sqrt(est.pass_rate * (1 - est.pass_rate) / 50), rel_tol=1e-6)
