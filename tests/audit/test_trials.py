"""i.i.d.-trials check (Cor. 5): per-task pass^k / pass@k vs R∞^k, bootstrap over tasks (formats.md §4)."""

from __future__ import annotations

import json
from math import comb
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracetochain as tt
from tracetochain.audit import (
    batched_r_inf,
    fit_states_and_chain,
    per_task_pass_at_k,
    per_task_pass_hat_k,
    trials_check,
)


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


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([0.0, 0.5, 1.0]), st.sampled_from(["auto", "prior", "failure"]),
       st.sampled_from(["empirical", "modal"]))
def test_batched_r_inf_equals_estimate_chain(seed: int, a: float, unvisited: str, initial: str) -> None:
    if unvisited == "prior" and a == 0:
        return
    chain = tt.datasets.random_chain(4, seed, rho=0.7)
    traces = tt.datasets.simulate_traces(chain, 30, seed=seed, max_steps=5)
    counts = tt.count_transitions(traces, states=chain.state_names)
    try:
        ref = tt.estimate_chain(counts, a, unvisited, initial).r_inf  # type: ignore[arg-type]
    except tt.exceptions.NonAbsorbingError:
        return
    got = batched_r_inf(counts.transitions[None], counts.exits_success[None], counts.exits_failure[None],
                        counts.initial[None], a, unvisited, initial)
    assert got[0] == pytest.approx(ref, abs=1e-10)


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
    chain, _, lab = fit_states_and_chain(het)
    res = trials_check(lab, chain, seed=1)
    assert res.applicable and res.flagged and res.flagged_ks == (2, 3, 4) and res.r_inf_refit
    assert res.pass_hat_k == pytest.approx((0.5, 0.5, 0.5, 0.5))
    assert res.gap_pass_hat_k[3] > 0.3 and res.gap_pass_at_k[3] < -0.3
    rng = np.random.default_rng(0)
    homo = _trials([["success" if u < 0.5 else "failure" for u in rng.random(4)] for _ in range(60)])
    chain, _, lab = fit_states_and_chain(homo)
    res = trials_check(lab, chain, seed=1)
    assert res.applicable and res.flagged is False


def test_exclusions_and_not_applicable() -> None:
    t = _trials([["success", "failure", "success"], ["success", "success"], ["failure"]])
    res = trials_check(t, r_inf=0.5, ks=[1, 2, 3])
    assert res.ks == (1, 2, 3) and res.n_tasks_used == (3, 2, 1) and res.n_tasks_excluded == (0, 1, 2)
    assert res.pass_hat_k[1] == pytest.approx((1 / 3 + 1) / 2) and not res.r_inf_refit
    default = trials_check(t, r_inf=0.5)
    assert default.ks == (1, 2)  # K = fewest trials among tasks with at least two
    single = trials_check(_trials([["success"], ["failure"]]), r_inf=0.5)
    assert not single.applicable and single.flagged is None and "single trial" in single.notes[0]
    no_task = trials_check(tt.datasets.simulate_traces(tt.datasets.notation_chain(), 5), r_inf=0.5)
    assert not no_task.applicable and no_task.n_tasks == 0
    json.dumps(res.to_dict(), allow_nan=False)
    with pytest.raises(ValueError):
        trials_check(t)


def test_tau_bench_gpt4o_airline_pass_hat_k(shared_data: Path) -> None:
    """formats.md §4 target: 50 tasks × 4 trials, 84/200 successes; pass^1..4 = 0.42, 0.2733, 0.22, 0.20 and
    pass@1..4 = 0.42, 0.5667, 0.66, 0.72. The gap to R∞^k is positive and flagged (trials are not i.i.d.)."""
    traces = tt.read_traces(shared_data / "tau-bench" / "historical_trajectories" / "gpt-4o-airline.json")
    chain, _, labelled = fit_states_and_chain(traces, "categorical", state_options={"vocabulary": "chat"})
    res = trials_check(labelled, chain, seed=0)
    assert res.n_tasks == 50 and res.trials_histogram == {4: 50} and res.ks == (1, 2, 3, 4)
    np.testing.assert_allclose(res.pass_hat_k, [0.42, 0.82 / 3, 0.22, 0.20], rtol=0, atol=1e-12)
    assert [round(x, 3) for x in res.pass_hat_k] == [0.420, 0.273, 0.220, 0.200]
    np.testing.assert_allclose(res.pass_at_k, [0.42, 1.7 / 3, 0.66, 0.72], rtol=0, atol=1e-12)
    assert res.r_inf == pytest.approx(chain.r_inf, abs=1e-12)
    np.testing.assert_allclose(res.chain_pass_hat_k, chain.r_inf ** np.arange(1, 5))
    assert all(g > 0.05 for g in res.gap_pass_hat_k[1:])
    assert res.flagged and 4 in res.flagged_ks
    lo, _ = res.gap_pass_hat_k_interval[3]
    assert lo is not None and lo > 0
    assert "not exchangeable" in str(res)
