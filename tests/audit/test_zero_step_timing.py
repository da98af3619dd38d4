"""The audit with zero-step episodes: success times of 0 (the chain's f⊕(0) = s), simulated episodes of length 0 counted
as start exits in every refit, and a censored episode of length 0 read as a cut before the first step."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_array_equal

import tracetochain as tt
from tracetochain.analysis import analyze
from tracetochain.audit import ks_calibrated
from tracetochain.audit._censoring import censoring_survival, draw_caps, length_histograms
from tracetochain.audit._timing import replicate_counts, success_time_cdf, table_histogram
from tracetochain.numerics import simulate_traces


def chain_with_exits(s: float = 0.15, f: float = 0.1, seed: int = 3) -> tt.AbsorbingChain:
    base = tt.datasets.random_chain(4, seed=seed, rho=0.8)
    return base.with_changes(pi0=base.pi0 * (1 - s - f), start_exits=(s, f))


def test_replicate_counts_count_length_zero_episodes_as_start_exits() -> None:
    chain = chain_with_exits()
    n, reps = 300, 3
    sim = chain.simulate(n * reps, seed=4, max_steps=30, record_paths=True)
    assert (sim.length == 0).any()
    rc = replicate_counts(sim, n, reps, chain.n_states)
    for r in range(reps):
        t = tt.datasets.simulate_traces(chain, n * reps, seed=4, max_steps=30)
        ids = {f"t{i}" for i in range(r * n, (r + 1) * n)}
        part = t.select_traces(np.array([tid in ids for tid in t.trace_ids]))
        part.report.zero_step = [z for z in t.report.zero_step if z["trace_id"] in ids]
        c = tt.count_transitions(part, chain.state_names)
        assert_array_equal(rc.transitions[r], c.transitions)
        assert_array_equal(rc.exits_success[r], c.exits_success)
        assert_array_equal(rc.exits_failure[r], c.exits_failure)
        assert_array_equal(rc.initial[r], c.initial)
        assert_array_equal(rc.start_exits[r], c.start_exits)


def test_success_times_of_zero_are_in_the_histogram_and_the_model_law() -> None:
    chain = chain_with_exits()
    t = tt.datasets.simulate_traces(chain, 500, seed=1)
    hist = table_histogram(t)
    zo = t.report.zero_step_outcomes()
    assert hist[:, 0].tolist() == [zo["success"], zo["failure"], 0]
    cdf = success_time_cdf(chain, 5)
    assert cdf[0] == pytest.approx(chain.start_success / chain.r_inf)


def test_ks_keeps_its_level_with_zero_step_episodes() -> None:
    """Corpora drawn from a chain with start exits: the calibrated KS rejects about as often as its level."""
    chain = chain_with_exits()
    p = []
    for seed in range(20):
        t = tt.datasets.simulate_traces(chain, 200, seed=100 + seed)
        fit = tt.ChainEstimator().fit(t).fetch_model()
        res = ks_calibrated(fit, t, n_bootstrap=39, seed=seed)
        assert res.n_times == int(table_histogram(t)[0].sum())
        p.append(res.p_value)
    assert sum(x <= 0.05 for x in p) <= 4  # Binomial(20, 0.05): P(≥ 5) < 0.003
    assert np.mean(p) > 0.3


def test_a_chain_that_ignores_the_zero_step_successes_fails_the_timing_test() -> None:
    chain = chain_with_exits(s=0.3, f=0.05)
    t = tt.datasets.simulate_traces(chain, 600, seed=9)
    fit = tt.ChainEstimator().fit(t).fetch_model()
    without = fit.with_changes(pi0=fit.pi0 / fit.pi0.sum(), start_exits=(0.0, 0.0))
    assert ks_calibrated(fit, t, n_bootstrap=39, seed=1).p_value > 0.05
    assert ks_calibrated(without, t, n_bootstrap=39, seed=1, refit="none").p_value <= 0.05


def test_the_audit_accepts_a_chain_with_start_exits() -> None:
    t = tt.datasets.simulate_traces(chain_with_exits(), 800, seed=11)
    res = analyze(t, intervals=None, seed=2, **{"n_bootstrap": 49, "n_permutations": 49, "trials_permutations": 99})
    cert = res.certificate
    assert cert is not None
    assert cert.layers["r_inf"].status == "pass" and cert.layers["timing"].status == "pass"
    assert cert.status("R_inf") == "certified" and cert.status("R(d)") == "certified"
    # the descriptive model-vs-empirical curve starts at the zero-step successes: R(0) = s
    assert cert.model_rdc[0] == pytest.approx(res.chain.start_success)
    assert cert.empirical_rdc[0] == pytest.approx(res.summary.success_length_counts()[0] / res.summary.n_usable)


def test_censored_episodes_of_length_zero_are_cuts_before_the_first_step() -> None:
    lengths = np.array([0, 0, 1, 2, 3, 3, 0])
    outcomes = np.array([2, 2, 0, 1, 0, 2, 0])  # two cut at 0, one zero-step success
    surv = censoring_survival(length_histograms(lengths, outcomes))
    assert surv is not None and surv[0] == 1.0 and surv[1] == pytest.approx(5 / 7)
    caps = draw_caps(surv, 20_000, np.random.default_rng(0))
    assert caps is not None and (caps == 0).mean() == pytest.approx(2 / 7, abs=0.02)
    chain = chain_with_exits()
    sim = simulate_traces(chain.Q, chain.R_success, chain.R_failure, chain.pi0, caps.size, np.random.default_rng(1),
                          caps=caps, start_exits=chain.start_exits)
    cut0 = caps == 0
    assert (sim.length[cut0] == 0).all()
    # a cut at 0 censors the episodes that would take a step; those that end before any step are still seen
    assert ((sim.outcome[cut0] == 2).mean() == pytest.approx(chain.pi0.sum(), abs=0.03))
    no_zero = draw_caps(censoring_survival(length_histograms(np.array([1, 2, 2]), np.array([0, 2, 1]))), 1000,
                        np.random.default_rng(0))
    assert no_zero is not None and no_zero.min() >= 1
