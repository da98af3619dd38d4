"""i.i.d.-trials check (Cor. 5): per-task pass^k / pass@k vs R∞^k, bootstrap over tasks (per-task estimators of Chen et
al. 2021, Yao et al. 2024)."""

from __future__ import annotations

import json
from math import comb
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracetochain as tt
from tracetochain.audit import trials_check
from tracetochain.audit._trials import TaskTable, per_task_pass_at_k, per_task_pass_hat_k, trials_check_table


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 12), st.integers(0, 12)), min_size=1, max_size=20), st.integers(1, 12))
def test_per_task_estimators_equal_the_binomial_forms(tasks: list[tuple[int, int]], k: int) -> None:
    n = np.array([a for a, _ in tasks])
    c = np.minimum(np.array([b for _, b in tasks]), n)
    ph = per_task_pass_hat_k(c, n, k)
    pa = per_task_pass_at_k(c, n, k)
    for i in range(n.size):
        if n[i] < k:
            assert np.isnan(ph[i]) and np.isnan(pa[i])
        else:
            assert ph[i] == pytest.approx(comb(int(c[i]), k) / comb(int(n[i]), k), abs=1e-12)
            assert pa[i] == pytest.approx(1 - comb(int(n[i] - c[i]), k) / comb(int(n[i]), k), abs=1e-12)
            assert ph[i] <= pa[i] + 1e-12


def _trials(pattern: list[list[str]]) -> tt.TraceTable:
    recs = []
    for t, outs in enumerate(pattern):
        for k, out in enumerate(outs):
            recs += [{"trace_id": f"{t}/{k}", "task_id": f"t{t}", "trial": k, "step_idx": j, "state": s,
                      "outcome": out} for j, s in enumerate(["a", "b"] if out == "success" else ["a"])]
    return tt.TraceTable.from_records(recs)


def test_heterogeneous_tasks_are_flagged_and_homogeneous_are_not() -> None:
    easy, hard = ["success"] * 4, ["failure"] * 4
    het = _trials([easy] * 20 + [hard] * 20)  # p(ξ) ∈ {0, 1}: maximal Jensen gap
    res = trials_check(het, r_inf=0.5, seed=1)
    assert res.applicable and res.flagged and res.flagged_ks == (2, 3, 4)
    assert res.p_value == pytest.approx(1 / 1000)
    assert res.pass_hat_k == pytest.approx((0.5, 0.5, 0.5, 0.5))
    assert res.design_effect == pytest.approx(4.0)  # ρ = 1: the four trials of a task count as one
    rng = np.random.default_rng(0)
    homo = _trials([["success" if u < 0.5 else "failure" for u in rng.random(4)] for _ in range(60)])
    res = trials_check(homo, r_inf=0.5, seed=1)
    assert res.applicable and res.flagged is False and res.design_effect < 1.5


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000))
def test_dispersion_test_holds_its_level_on_exchangeable_trials(seed: int) -> None:
    """Under exchangeable trials the exact null makes P(p ≤ α) ≤ α; checked on the law of the p-value over 60
    corpora per example: the share at or below 0.1 stays within a binomial bound."""
    rng = np.random.default_rng(seed)
    rejections = 0
    for _ in range(60):
        n = rng.integers(2, 6, 30)
        c = rng.binomial(n, 0.4)
        table = TaskTable(np.arange(30, dtype=np.uint64), n.astype(np.int64), c.astype(np.int64))
        res = trials_check_table(table, 0.4, n_permutations=199, seed=int(rng.integers(1 << 30)))
        rejections += res.p_value is not None and res.p_value <= 0.1
    assert rejections <= 15  # E = 6; P(≥ 16 | 60, 0.1) < 1e-3


def test_exclusions_and_not_applicable() -> None:
    t = _trials([["success", "failure", "success"], ["success", "success"], ["failure"]])
    res = trials_check(t, r_inf=0.5, ks=[1, 2, 3])
    assert res.ks == (1, 2, 3) and res.n_tasks_used == (3, 2, 1)
    assert res.pass_hat_k[1] == pytest.approx((1 / 3 + 1) / 2)
    assert res.p_value is None and res.insufficient and "at least 20" in res.notes[0]
    default = trials_check(t, r_inf=0.5)
    assert default.ks == (1, 2)  # K = the most trials that at least two tasks have
    single = trials_check(_trials([["success"], ["failure"]]), r_inf=0.5)
    assert not single.applicable and single.flagged is None and "two or more" in single.notes[0]
    json.dumps(res.to_dict(), allow_nan=False)
    with pytest.raises(ValueError):
        trials_check(t)


def test_tau_bench_gpt4o_airline_pass_hat_k(shared_data: Path) -> None:
    """50 tasks × 4 trials, 84/200 successes; pass^1..4 = 0.42, 0.2733, 0.22, 0.20 and pass@1..4 = 0.42, 0.5667,
    0.66, 0.72. The tasks differ: the layer rejects and the design effect is about 2.2."""
    traces = tt.read_traces(shared_data / "tau-bench" / "historical_trajectories" / "gpt-4o-airline.json")
    chain = tt.ChainEstimator().fit(traces).fetch_model()
    res = trials_check(traces, chain, seed=0)
    assert res.n_tasks == 50 and res.trials_histogram == {4: 50} and res.ks == (1, 2, 3, 4)
    np.testing.assert_allclose(res.pass_hat_k, [0.42, 0.82 / 3, 0.22, 0.20], rtol=0, atol=1e-12)
    np.testing.assert_allclose(res.pass_at_k, [0.42, 1.7 / 3, 0.66, 0.72], rtol=0, atol=1e-12)
    np.testing.assert_allclose(res.chain_pass_hat_k, chain.r_inf ** np.arange(1, 5))
    assert res.flagged and res.p_value is not None and res.p_value < 0.01 and 4 in res.flagged_ks
    assert 1.8 < res.design_effect < 2.6
    lo, hi = res.pass_hat_k_interval[3]
    assert lo is not None and hi is not None and lo < 0.2 < hi and lo > chain.r_inf ** 4
    assert "not exchangeable" in str(res)
