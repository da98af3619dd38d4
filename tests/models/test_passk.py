"""pass^k under heterogeneity: per-task estimates with a task bootstrap, the beta-binomial, a model's own pass^k."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, stats

import tracetochain as tt
from tests.models.conftest import records
from tracetochain.models import MarkovModel, beta_binomial_pass_k, empirical_pass_k, model_pass_k
from tracetochain.models.passk import BetaBinomial, task_trials

TAU_C = np.array([0] * 14 + [1] * 12 + [2] * 10 + [3] * 4 + [4] * 10)
TAU_N = np.full(50, 4)


def test_empirical_pass_k_golden_tau_bench_counts() -> None:
    est = empirical_pass_k((TAU_C, TAU_N), n_bootstrap=2000, seed=0)
    np.testing.assert_allclose(est.pass_hat_k, [0.42, 0.273333, 0.22, 0.2], atol=1e-6)
    np.testing.assert_allclose(est.pass_at_k, [0.42, 0.566667, 0.66, 0.72], atol=1e-6)
    for i, _k in enumerate(est.ks):
        lo, hi = est.pass_hat_k_interval[i]
        assert lo < est.pass_hat_k[i] < hi
    assert est.to_dict()["n_tasks"] == 50
    # k beyond every task's trials: not estimable from the trials
    assert empirical_pass_k((TAU_C, TAU_N), [5], n_bootstrap=10).pass_hat_k == (None,)


def test_task_trials_counts_per_task() -> None:
    t = records([(["a"], "success"), (["a"], "failure"), (["a"], "censored"), (["a"], "success")],
                task=["x", "x", "y", "y"])
    c, n = task_trials(t)
    assert sorted(zip(c.tolist(), n.tolist(), strict=True)) == [(1, 2), (1, 2)]


def test_beta_binomial_moments_against_integration() -> None:
    bb = BetaBinomial(0.64, 0.86, 0.0, 50)
    for k in (1, 2, 5):
        want = integrate.quad(lambda p, k=k: p**k * stats.beta.pdf(p, 0.64, 0.86), 0, 1)[0]
        assert bb.pass_hat_k(k)[0] == pytest.approx(want, rel=1e-6)
        want_at = 1 - integrate.quad(lambda p, k=k: (1 - p) ** k * stats.beta.pdf(p, 0.64, 0.86), 0, 1)[0]
        assert bb.pass_at_k(k)[0] == pytest.approx(want_at, rel=1e-6)
    assert bb.intra_task_correlation == pytest.approx(1 / (0.64 + 0.86 + 1))


def test_beta_binomial_maximum_likelihood_on_tau_bench() -> None:
    bb = BetaBinomial.fit(TAU_C, TAU_N)
    # the likelihood at the optimum beats a grid around it
    grid = [(a, b) for a in np.linspace(0.3, 1.2, 31) for b in np.linspace(0.4, 1.6, 31)]
    ll = [float(np.sum(stats.betabinom.logpmf(TAU_C, TAU_N, a, b))) for a, b in grid]
    assert bb.loglik >= max(ll) - 1e-6
    assert bb.loglik == pytest.approx(float(np.sum(stats.betabinom.logpmf(TAU_C, TAU_N, bb.alpha, bb.beta))))
    # the figures of the issue: ρ 0.40, pass^2..5 = 0.281 / 0.212 / 0.172 / 0.145
    assert bb.intra_task_correlation == pytest.approx(0.40, abs=0.005)
    np.testing.assert_allclose(bb.pass_hat_k([2, 3, 4, 5]), [0.281, 0.212, 0.172, 0.145], atol=0.0015)
    est = beta_binomial_pass_k((TAU_C, TAU_N), n_bootstrap=200, seed=1)
    assert est.ks == (1, 2, 3, 4, 5, 6, 7, 8)
    for i in range(8):
        lo, hi = est.pass_hat_k_interval[i]
        assert lo <= est.pass_hat_k[i] <= hi


def test_identical_tasks_give_the_iid_limit() -> None:
    rng = np.random.default_rng(0)
    n = np.full(400, 5)
    c = rng.binomial(5, 0.6, 400)
    bb = BetaBinomial.fit(c, n)
    assert bb.intra_task_correlation < 0.02
    np.testing.assert_allclose(bb.pass_hat_k([2, 3]), bb.mean ** np.array([2, 3]), atol=0.01)


def test_model_pass_k_refits_on_resampled_tasks() -> None:
    t = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 120, seed=3)
    est = model_pass_k(MarkovModel, t, [1, 2], n_bootstrap=20, seed=0)
    r = MarkovModel().fit(t).to_chain().chain.r_inf
    assert est.pass_hat_k[0] == pytest.approx(r) and est.pass_hat_k[1] == pytest.approx(r * r)
    lo, hi = est.pass_hat_k_interval[0]
    assert lo < r < hi
    assert "i.i.d." in est.notes[0]


def test_pass_k_check_against_the_tasks() -> None:
    from tracetochain.models import CompiledModel
    from tracetochain.models.passk import pass_k_check

    chain = tt.AbsorbingChain([[0.0]], [0.42], [0.58], 0)
    iid = CompiledModel(chain, ("s",), np.ones((1, 1)), np.zeros(1, np.int64), np.ones(1), "iid", "markov")
    check = pass_k_check((TAU_C, TAU_N), iid, n_bootstrap=1000)
    assert check.ks == (2, 3, 4) and check.agrees is False and check.inside[1] is False  # 0.42³ = 0.074
    two = tt.AbsorbingChain([[0.0, 0.0], [0.0, 0.0]], [0.05, 0.9], [0.95, 0.1], [0.55, 0.45])
    het = CompiledModel(two, ("s",), np.ones((2, 1)), np.array([0, 1]), np.array([0.55, 0.45]), "task", "mixture")
    assert pass_k_check((TAU_C, TAU_N), het, n_bootstrap=1000).agrees is True
    assert pass_k_check((np.array([1, 0]), np.array([1, 1])), het).agrees is None
    assert pass_k_check((TAU_C, TAU_N), het).to_dict()["model_trials"] == "task"
