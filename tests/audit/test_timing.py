"""KS timing layer: lattice statistic, success-time CDF, calibrated bootstrap, paper mode (docs/statistics.md §5)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

import tracetochain as tt
from tracetochain._outcome import OutcomeCode
from tracetochain.audit import ks_calibrated, ks_paper
from tracetochain.audit._censoring import length_histograms
from tracetochain.audit._timing import (
    kolmogorov_asymptotic_pvalue,
    ks_calibrated_counts,
    lattice_ks_statistic,
    replicate_counts,
    success_time_cdf,
    timing_test,
)
from tracetochain.numerics import simulate_traces


def _brute_force_sup(x: np.ndarray, cdf: np.ndarray) -> float:
    """sup over a fine real grid of |F_n(t) − F(t)|, both right-continuous step functions."""
    grid = np.arange(-1.0, x.max() + 2.0, 0.25)
    emp = np.array([np.mean(x <= t) for t in grid])
    model = np.array([cdf[min(int(np.floor(t)), cdf.size - 1)] if t >= 0 else 0.0 for t in grid])
    return float(np.max(np.abs(emp - model)))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(1, 12), min_size=1, max_size=40), st.integers(0, 10_000))
def test_lattice_statistic_is_the_supremum_over_the_real_line(xs: list[int], seed: int) -> None:
    x = np.array(xs)
    rng = np.random.default_rng(seed)
    steps = rng.random(x.max() + 4)
    steps[0] = 0.0
    cdf = np.cumsum(steps) / steps.sum() * rng.uniform(0.5, 1.0)
    assert lattice_ks_statistic(x, cdf) == pytest.approx(_brute_force_sup(x, cdf), abs=1e-12)


def test_scipy_ks_1samp_overstates_d_on_lattice_data() -> None:
    """scipy's one-sample KS evaluates F at the atom instead of its left limit; our D does not."""
    x = np.array([1, 1, 2, 3])
    cdf = np.array([0.0, 0.5, 0.75, 1.0])  # a perfect fit: F_n = F on the lattice
    assert lattice_ks_statistic(x, cdf) == pytest.approx(0.0, abs=1e-15)
    scipy_d = scipy.stats.ks_1samp(x, lambda t: cdf[np.clip(np.floor(t).astype(int), 0, 3)]).statistic
    assert scipy_d >= 0.5  # inflated by the largest jump


def test_success_time_cdf_matches_reliability_and_cap() -> None:
    chain = tt.datasets.notation_chain()
    F = success_time_cdf(chain, 7)
    np.testing.assert_allclose(F * 0.625, [0, 0.1, 0.21, 0.316, 0.4056, 0.47476, 0.524916, 0.5597236], atol=1e-12)
    capped = success_time_cdf(chain, 9, max_steps=5)
    assert capped[5] == pytest.approx(1.0) and capped[9] == pytest.approx(1.0)
    np.testing.assert_allclose(capped[:6], chain.reliability(5) / chain.reliability(5)[5])


def test_numerical_recipes_pvalue_reproduces_ss10() -> None:
    # SS10_summary.json: ks_stat 0.39295, n_emp 80, n_model 20000 → ks_pvalue 1.9729189348575157e-11.
    assert kolmogorov_asymptotic_pvalue(0.39295, 80, 20_000) == pytest.approx(1.9729189348575157e-11, rel=1e-12)
    assert kolmogorov_asymptotic_pvalue(0.0, 50, 50) == 1.0  # non-convergent region → 1, as Numerical Recipes
    assert kolmogorov_asymptotic_pvalue(1.0, 50, 50) < 1e-10


def test_replicate_counts_equal_count_transitions_per_replicate() -> None:
    chain = tt.datasets.random_chain(4, 7, rho=0.8)
    rng = np.random.default_rng(5)
    sim = simulate_traces(chain.Q, chain.R_success, chain.R_failure, chain.pi0, 3 * 40, rng, max_steps=6,
                          record_paths=True)
    rc = replicate_counts(sim, 40, 3, chain.n_states)
    assert sim.states is not None and sim.offsets is not None
    for r in range(3):
        recs = []
        for i in range(r * 40, (r + 1) * 40):
            states = sim.states[sim.offsets[i]:sim.offsets[i + 1]]
            out = ("success", "failure", "censored")[int(sim.outcome[i])]
            recs += [{"trace_id": f"t{i}", "step_idx": j, "state": f"s{s}", "outcome": out}
                     for j, s in enumerate(states)]
        c = tt.count_transitions(tt.TraceTable.from_records(recs), states=chain.state_names)
        np.testing.assert_array_equal(rc.transitions[r], c.transitions)
        np.testing.assert_array_equal(rc.exits_success[r], c.exits_success)
        np.testing.assert_array_equal(rc.exits_failure[r], c.exits_failure)
        np.testing.assert_array_equal(rc.initial[r], c.initial)
        assert rc.outcomes[r].tolist() == [c.n_traces["success"], c.n_traces["failure"], c.n_traces["censored"]]


@pytest.fixture(scope="module")
def markov_fit() -> tuple[tt.AbsorbingChain, tt.TraceTable]:
    traces = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 200, seed=11)
    return tt.ChainEstimator(pseudocount=1.0).fit(traces).fetch_model(), traces


def test_calibrated_is_seeded_and_prefix_consistent(markov_fit: tuple[tt.AbsorbingChain, tt.TraceTable]) -> None:
    chain, traces = markov_fit
    a = ks_calibrated(chain, traces, n_bootstrap=40, seed=3)
    b = ks_calibrated(chain, traces, n_bootstrap=40, seed=3)
    assert a.p_value == b.p_value and a.statistic == b.statistic
    assert a.settings["refit"] == "same" and a.n_times == int((traces.outcomes() == OutcomeCode.SUCCESS).sum())
    # Replicate i does not depend on B: the p-value counts of B = 40 are a prefix of those of B = 64.
    c = ks_calibrated(chain, traces, n_bootstrap=64, seed=3)
    assert a.p_value is not None and c.p_value is not None
    exceed_40 = round(a.p_value * 41) - 1
    exceed_64 = round(c.p_value * 65) - 1
    assert exceed_40 <= exceed_64 <= exceed_40 + 24
    assert 1 / 41 <= a.p_value <= 1.0
    longest_success = int(np.diff(traces.offsets)[traces.outcomes() == OutcomeCode.SUCCESS].max())
    assert len(a.empirical_cdf) == len(a.model_cdf) == longest_success + 1
    assert a.empirical_cdf[-1] == pytest.approx(1.0)


def test_calibrated_detects_a_wrong_timing_law(markov_fit: tuple[tt.AbsorbingChain, tt.TraceTable]) -> None:
    """Held-out traces from a slower chain: the fixed chain's timing must be rejected (refit='none')."""
    chain, _ = markov_fit
    slow = tt.datasets.notation_chain().with_changes(
        Q=[[0.7, 0.15, 0.0], [0.0, 0.6, 0.2], [0.0, 0.0, 0.8]], R_success=[0.1, 0.1, 0.15],
        R_failure=[0.05, 0.1, 0.05])
    other = tt.datasets.simulate_traces(slow, 200, seed=2)
    res = ks_calibrated(chain, other, refit="none", n_bootstrap=99, seed=0)
    assert res.p_value == pytest.approx(0.01) and res.rejects(0.05)
    same = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 200, seed=9)
    assert not ks_calibrated(tt.datasets.notation_chain(), same, refit="none", n_bootstrap=99, seed=0).rejects()


def test_train_refit_needs_the_fit_size(markov_fit: tuple[tt.AbsorbingChain, tt.TraceTable]) -> None:
    chain, traces = markov_fit
    with pytest.raises(ValueError, match="fit_traces"):
        ks_calibrated(chain, traces, refit="train")
    fit = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 150, seed=12)
    res = ks_calibrated(chain, traces, refit="train", fit_traces=fit, n_bootstrap=20, seed=1)
    assert res.settings["n_fit_traces"] == 150 and res.p_value is not None
    # From counts: the fit half's size alone (no censoring) gives the same test as its histogram.
    hist = length_histograms(np.diff(traces.offsets), traces.outcomes())
    with pytest.raises(ValueError, match="fit_histogram"):
        ks_calibrated_counts(chain, hist, refit="train")
    by_size = ks_calibrated_counts(chain, hist, refit="train", n_fit_traces=150, n_bootstrap=20, seed=1)
    assert by_size.settings["n_fit_traces"] == 150
    assert (by_size.statistic, by_size.p_value) == (res.statistic, res.p_value)


def test_cap_is_applied_and_checked() -> None:
    chain = tt.datasets.notation_chain()
    traces = tt.datasets.simulate_traces(chain, 150, seed=4, max_steps=4)
    assert (traces.outcomes() == 2).any()
    fit = tt.ChainEstimator().fit(traces).fetch_model()
    res = ks_calibrated(fit, traces, n_bootstrap=30, max_steps=4, seed=0)
    assert res.settings["max_steps"] == 4 and res.model_cdf[-1] <= 1.0
    with pytest.raises(ValueError, match="max_steps"):
        ks_calibrated(fit, traces, n_bootstrap=5, max_steps=3)


def test_no_successes_is_undefined_not_an_error() -> None:
    traces = tt.TraceTable.from_records([{"trace_id": "a", "step_idx": 0, "state": "x", "outcome": "failure"},
                                         {"trace_id": "b", "step_idx": 0, "state": "x", "outcome": "failure"}])
    chain = tt.ChainEstimator().fit(traces).fetch_model()
    res = ks_calibrated(chain, traces, n_bootstrap=5)
    assert res.p_value is None and res.rejects() is None and "no successful trace" in res.undefined["p_value"]
    assert res.to_dict()["p_value"] is None
    assert ks_paper(chain, traces).p_value is None


def test_paper_mode_options(markov_fit: tuple[tt.AbsorbingChain, tt.TraceTable]) -> None:
    chain, traces = markov_fit
    a = ks_paper(chain, traces, n_model=4000, seed=1)
    b = timing_test(chain, traces, mode="paper", n_model=4000, seed=1)
    assert a.statistic == b.statistic and a.p_value == b.p_value and a.outcome == "success"
    c = ks_paper(chain, traces, n_model=4000, outcome="any", start="modal", pvalue="asymptotic", seed=1)
    oc = traces.outcomes()
    assert c.n_times == int(((oc == 0) | (oc == 1)).sum())
    assert c.settings["n_model_times"] == 4000  # any-outcome keeps every model run
    assert a.settings["n_model_times"] < 4000  # success-conditional keeps the successes only
    assert 0.0 <= c.p_value <= 1.0  # type: ignore[operator]
    with pytest.raises(ValueError):
        ks_paper(chain, traces, outcome="both")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        timing_test(chain, traces, mode="exact")  # type: ignore[arg-type]


@pytest.mark.slow
def test_rescaled_bootstrap_keeps_the_level_and_the_decisions() -> None:
    """60 null corpora (SS7 truth, 2,000 traces split 50/50, held-out refit): replicates at 1/8 of the size and
    rescaled reject about as often as full-size ones and almost always decide alike (benchmarks/
    ks_rescale_calibration.py runs the 400-corpus version: 5.0% vs 5.5%)."""
    from tracetochain.audit import ks_calibrated
    from tracetochain.audit._holdout import split_indices
    from tracetochain.datasets import simulate_memory_traces, ss7_chain

    chain = ss7_chain()
    full, small = [], []
    for i in range(60):
        sim_seed, ks_seed = np.random.SeedSequence([20261130, i]).spawn(2)
        traces = simulate_memory_traces(chain, 2000, memory=0.0, seed=sim_seed, max_steps=200)
        fit_idx, test_idx = split_indices(traces, 0.5, seed=i)
        fit, test = traces.select_traces(fit_idx), traces.select_traces(test_idx)
        model = tt.ChainEstimator(states=chain.state_names).fit(fit).fetch_model()
        kw = dict(refit="train", fit_traces=fit, n_bootstrap=99, seed=ks_seed, max_steps=200)
        full.append(ks_calibrated(model, test, max_simulated_traces=None, **kw).p_value)
        small.append(ks_calibrated(model, test, max_simulated_traces=125, **kw).p_value)
    full_rej, small_rej = np.array(full) <= 0.05, np.array(small) <= 0.05
    assert small_rej.sum() <= 8 and full_rej.sum() <= 8  # ≈ 3 expected; 8 of 60 would be 13%
    assert np.mean(full_rej == small_rej) >= 0.95
    assert np.corrcoef(full, small)[0, 1] > 0.9


def test_ks_statistic_without_scipy_stats_equals_ks_2samp_bit_for_bit() -> None:
    """ks_paper's asymptotic p-value takes D from ks_two_sample_statistic (no scipy.stats import): the same D as
    scipy.stats.ks_2samp, to the bit, on lattice data with many ties (absorption times) and on continuous data."""
    import scipy.stats

    from tracetochain.audit._timing import ks_two_sample_statistic

    rng = np.random.default_rng(27)
    for _ in range(200):
        n1, n2 = rng.integers(1, 60), rng.choice([rng.integers(1, 3000), rng.integers(10_001, 14_000)])
        if rng.random() < 0.7:
            a, b = rng.geometric(rng.uniform(0.05, 0.5), n1), rng.geometric(rng.uniform(0.05, 0.5), n2)
        else:
            a, b = rng.normal(size=n1), rng.normal(rng.uniform(-1, 1), size=n2)
        assert ks_two_sample_statistic(a, b) == float(scipy.stats.ks_2samp(a, b).statistic)
