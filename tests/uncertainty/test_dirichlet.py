"""DirichletPosterior: closed-form Beta marginals, joint draws, unvisited-row policies, π0 handling."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

import tracetochain as tt
from tracetochain.exceptions import NotFittedError
from tracetochain.uncertainty import ChainEnsemble, DirichletPosterior
from tracetochain.uncertainty._dirichlet import beta_intervals, counts_from_chain, sample_rows


def traces_from(seqs: list[tuple[list[str], str]]) -> tt.TraceTable:
    recs = [{"trace_id": f"t{i}", "step_idx": j, "state": s, "outcome": out}
            for i, (states, out) in enumerate(seqs) for j, s in enumerate(states)]
    return tt.TraceTable.from_records(recs)


@pytest.fixture(scope="module")
def notation_fit() -> tt.AbsorbingChain:
    traces = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 300, seed=3)
    return tt.ChainEstimator().fit(traces).fetch_model()


def test_beta_marginal_formula_matches_scipy(notation_fit: tt.AbsorbingChain) -> None:
    """Beta(c_ij + α, c_i + α(m+2) − c_ij − α), equal-tailed (the paper's Dirichlet posterior), for a Q, an R⊕ and an R⊖
    entry."""
    post = DirichletPosterior(pseudocount=1.0, confidence=0.9).fit(notation_fit).fetch_model()
    c = post.counts
    m = c.n_states
    ci = c.row_totals.astype(float)
    for i, j in [(0, 1), (1, 2), (2, 2)]:
        a = c.transitions[i, j] + 1.0
        b = ci[i] + (m + 2) - a
        lo, hi = scipy.stats.beta.ppf([0.05, 0.95], a, b)
        assert post.intervals.Q_lower[i, j] == pytest.approx(lo, rel=1e-12)
        assert post.intervals.Q_upper[i, j] == pytest.approx(hi, rel=1e-12)
    a = c.exits_success[1] + 1.0
    lo, hi = scipy.stats.beta.ppf([0.05, 0.95], a, ci[1] + (m + 2) - a)
    assert (post.intervals.R_success_lower[1], post.intervals.R_success_upper[1]) == pytest.approx((lo, hi))
    a = c.exits_failure[2] + 1.0
    lo, hi = scipy.stats.beta.ppf([0.05, 0.95], a, ci[2] + (m + 2) - a)
    assert (post.intervals.R_failure_lower[2], post.intervals.R_failure_upper[2]) == pytest.approx((lo, hi))


def test_beta_intervals_equal_scipy_stats_bit_for_bit() -> None:
    """beta_intervals calls scipy.special.betaincinv (not scipy.stats.beta.ppf, to keep scipy.stats out of start-up):
    the two are the same Boost inverse, so the intervals are unchanged to the last bit, over pseudocount-sized and
    count-sized shapes and the usual confidence levels."""
    rng = np.random.default_rng(27)
    shape = np.exp(rng.uniform(-4.0, 9.0, size=(400, 12)))
    shape[rng.random(shape.shape) < 0.1] = 0.0  # degenerate marginals keep their exact points
    for confidence in (0.5, 0.8, 0.9, 0.95, 0.99):
        _, lower, upper = beta_intervals(shape, confidence)
        a = shape
        b = shape.sum(axis=1, keepdims=True) - shape
        proper = (a > 0) & (b > 0)
        lo_q, hi_q = (1.0 - confidence) / 2.0, (1.0 + confidence) / 2.0
        assert np.array_equal(lower[proper], scipy.stats.beta.ppf(lo_q, a[proper], b[proper]))
        assert np.array_equal(upper[proper], scipy.stats.beta.ppf(hi_q, a[proper], b[proper]))


def test_beta_marginals_under_the_episode_prior(notation_fit: tt.AbsorbingChain) -> None:
    """The default prior adds ½ c_i / C to each exit of row i and nothing to its transitions, so the row's total is
    c_i (1 + 1/C): Q_ij ~ Beta(c_ij, c_i(1 + 1/C) − c_ij), R⊕_i ~ Beta(c⊕_i + ½ c_i/C, …)."""
    post = DirichletPosterior(confidence=0.9).fit(notation_fit).fetch_model()
    assert post.prior.kind == "episode"
    c = post.counts
    ci = c.row_totals.astype(float)
    C = ci.sum()
    for i, j in [(0, 1), (1, 2)]:
        a = float(c.transitions[i, j])
        lo, hi = scipy.stats.beta.ppf([0.05, 0.95], a, ci[i] * (1 + 1 / C) - a)
        assert (post.intervals.Q_lower[i, j], post.intervals.Q_upper[i, j]) == pytest.approx((lo, hi), rel=1e-12)
    for i in range(c.n_states):
        a = c.exits_success[i] + 0.5 * ci[i] / C
        lo, hi = scipy.stats.beta.ppf([0.05, 0.95], a, ci[i] * (1 + 1 / C) - a)
        assert (post.intervals.R_success_lower[i], post.intervals.R_success_upper[i]) == pytest.approx((lo, hi),
                                                                                                       rel=1e-12)
    zero = c.transitions == 0  # no pseudo-mass on transitions never seen: exactly 0 in every draw
    assert zero.any() and post.intervals.Q_upper[zero].max() == 0.0 and np.all(post.ensemble.Q[:, zero] == 0)


def test_posterior_mean_is_the_fitted_chain(notation_fit: tt.AbsorbingChain) -> None:
    post = DirichletPosterior().fit(notation_fit).fetch_model()
    np.testing.assert_allclose(post.intervals.Q_center, notation_fit.Q, rtol=1e-12)
    np.testing.assert_allclose(post.intervals.R_success_center, notation_fit.R_success, rtol=1e-12)
    np.testing.assert_allclose(post.intervals.R_failure_center, notation_fit.R_failure, rtol=1e-12)
    assert post.reference is notation_fit
    ens = post.sample(4000, seed=1)
    np.testing.assert_allclose(ens.Q.mean(axis=0), notation_fit.Q, atol=4e-3)  # MC error ≈ 0.001


def test_joint_draws_have_the_beta_marginals(notation_fit: tt.AbsorbingChain) -> None:
    """The empirical quantiles of 20k joint draws match the closed-form Beta quantiles (MC tolerance)."""
    post = DirichletPosterior(confidence=0.9).fit(notation_fit).fetch_model()
    ens = post.sample(20_000, seed=5)
    emp = ens.entry_intervals(confidence=0.9)
    np.testing.assert_allclose(emp.Q_lower, post.intervals.Q_lower, atol=0.006)
    np.testing.assert_allclose(emp.Q_upper, post.intervals.Q_upper, atol=0.006)
    np.testing.assert_allclose(emp.R_success_upper, post.intervals.R_success_upper, atol=0.006)


def test_rows_are_dirichlet_not_independent_entries() -> None:
    """Entries of a row are negatively correlated (they sum to 1): the posterior draws whole rows."""
    a = np.array([31.0, 21.0, 11.0, 6.0])
    X = sample_rows(a[None, :], 5000, np.random.default_rng(0))
    np.testing.assert_allclose(X.sum(axis=2), 1.0, atol=1e-12)
    corr = np.corrcoef(X[:, 0, 0], X[:, 0, 1])[0, 1]
    a0 = a.sum()
    dirichlet = -np.sqrt(a[0] * a[1] / ((a0 - a[0]) * (a0 - a[1])))  # −0.597 for Dir(31, 21, 11, 6)
    assert corr == pytest.approx(dirichlet, abs=0.04)  # sampling s.e. of r here ≈ 0.009
    np.testing.assert_allclose(X[:, 0, :].mean(axis=0), a / a0, atol=0.005)


def test_draws_are_reproducible_and_seed_dependent(notation_fit: tt.AbsorbingChain) -> None:
    post = DirichletPosterior().fit(notation_fit).fetch_model()
    a, b, c = post.sample(50, seed=7), post.sample(50, seed=7), post.sample(50, seed=8)
    np.testing.assert_array_equal(a.Q, b.Q)
    assert not np.array_equal(a.Q, c.Q)
    assert a.seed == 7 and a.method == "posterior"


def test_unvisited_failure_rows_stay_absorbing_in_every_draw() -> None:
    # "c" is only ever the last step of a censored trace: no outgoing observation.
    t = traces_from([(["a", "b"], "success"), (["a", "c"], "censored"), (["b", "a"], "failure")])
    chain = tt.ChainEstimator(unvisited="failure").fit(t).fetch_model()
    post = DirichletPosterior().fit(chain).fetch_model()
    assert post.unvisited_policy == "failure"  # taken from the chain's metadata
    k = chain.state_index("c")
    ens = post.ensemble
    assert np.all(ens.Q[:, k, :] == 0) and np.all(ens.R_success[:, k] == 0) and np.all(ens.R_failure[:, k] == 1)
    iv = post.intervals
    assert (iv.R_failure_lower[k], iv.R_failure_upper[k]) == (1.0, 1.0)
    assert iv.Q_upper[k].max() == 0.0


def test_unvisited_prior_rows_are_drawn_from_the_prior() -> None:
    t = traces_from([(["a", "b"], "success"), (["a", "c"], "censored"), (["b", "a"], "failure")])
    # Laplace α = 1: the unvisited row's posterior is its prior Dir(1, …, 1).
    chain = tt.ChainEstimator(pseudocount=1, unvisited="prior").fit(t).fetch_model()
    post = DirichletPosterior(samples=20_000).fit(chain).fetch_model()
    k = chain.state_index("c")
    ens = post.ensemble
    m = chain.n_states
    assert ens.R_failure[:, k].std() > 0.05  # random, unlike the failure policy
    np.testing.assert_allclose(ens.R_success[:, k].mean(), 1 / (m + 2), atol=0.01)
    lo, hi = scipy.stats.beta.ppf([0.025, 0.975], 1.0, m + 1.0)  # Beta(α, α(m+1))
    assert (post.intervals.R_success_lower[k], post.intervals.R_success_upper[k]) == pytest.approx((lo, hi))
    # The episode prior (default): one pseudo-episode times the pooled outcomes of all rows. The rows observed are
    # a → b, a → c, a → failure, b → success, b → a; with ½ success and ½ failure added the pooled row over
    # (a, b, c, ⊕, ⊖) is (1, 1, 1, 1.5, 1.5) / 6, so c's row is Dir(1/6, 1/6, 1/6, 1/4, 1/4).
    chain = tt.ChainEstimator().fit(t).fetch_model()
    post = DirichletPosterior(samples=20_000).fit(chain).fetch_model()
    ens = post.ensemble
    assert chain.state_names == ("a", "b", "c") and post.unvisited_policy == "prior"
    np.testing.assert_allclose(ens.R_success[:, k].mean(), 0.25, atol=0.01)
    np.testing.assert_allclose(ens.Q[:, k, :].mean(axis=0), [1 / 6] * 3, atol=0.01)
    lo, hi = scipy.stats.beta.ppf([0.025, 0.975], 0.25, 0.75)
    assert (post.intervals.R_success_lower[k], post.intervals.R_success_upper[k]) == pytest.approx((lo, hi))


def test_zero_pseudocount_keeps_unobserved_outcomes_at_zero() -> None:
    t = traces_from([(["a", "b"], "success"), (["a", "b", "a"], "failure"), (["b"], "success")])
    chain = tt.ChainEstimator(pseudocount=0).fit(t).fetch_model()
    post = DirichletPosterior(pseudocount=0).fit(chain).fetch_model()
    ens = post.ensemble
    zero = chain.Q == 0
    assert np.all(ens.Q[:, zero] == 0)
    assert post.intervals.Q_upper[zero].max() == 0.0
    # b's row: b→a once, success twice: never failure.
    b = chain.state_index("b")
    assert np.all(ens.R_failure[:, b] == 0)


def test_initial_sampled_by_default_or_fixed() -> None:
    """π0 is drawn from Dir(first-state counts) by default (its noise counted), or held at the fitted π0."""
    truth = tt.datasets.random_chain(4, seed=1).with_changes(pi0=[0.4, 0.3, 0.2, 0.1])
    traces = tt.datasets.simulate_traces(truth, 200, seed=0)
    chain = tt.ChainEstimator().fit(traces).fetch_model()
    first = np.asarray(tt.count_transitions(traces).initial, dtype=float)
    order = [chain.state_names.index(s) for s in tt.count_transitions(traces).state_names]
    n0 = np.zeros(chain.n_states)
    n0[order] = first
    assert (n0 > 0).sum() == 4 and n0.sum() == 200
    sampled = DirichletPosterior(samples=20_000).fit(chain).fetch_model().ensemble
    assert sampled.info["initial"] == "sample"
    np.testing.assert_allclose(sampled.pi0.sum(axis=1), 1.0)
    p = n0 / n0.sum()
    np.testing.assert_allclose(sampled.pi0.mean(axis=0), p, atol=0.003)
    np.testing.assert_allclose(sampled.pi0.var(axis=0), p * (1 - p) / (n0.sum() + 1), rtol=0.05)  # Dirichlet
    fixed = DirichletPosterior(samples=200, initial="fixed").fit(chain).fetch_model().ensemble
    assert np.all(fixed.pi0 == chain.pi0) and fixed.info["initial"] == "fixed"
    # Drawing π0 widens the interval of R∞ when start states differ in their prospects: two start states, one that
    # succeeds 90 % of the time and one that fails 90 %. R∞ = Σ π0_i r_i; the start mix adds (r_good − r_bad)² ×
    # Var(π0_good) ≈ 0.8² × ¼ / 201 to the variance of the exits' part.
    two = tt.AbsorbingChain(Q=np.zeros((2, 2)), R_success=[0.9, 0.1], R_failure=[0.1, 0.9], pi0=[0.5, 0.5],
                            state_names=["good", "bad"])
    fit2 = tt.ChainEstimator().fit(tt.datasets.simulate_traces(two, 200, seed=1)).fetch_model()
    widths = {}
    for how in ("sample", "fixed"):
        post = DirichletPosterior(samples=20_000, initial=how).fit(fit2).fetch_model()  # type: ignore[arg-type]
        widths[how] = post.ensemble.stats("r_inf").std
    extra = 0.8**2 * 0.25 / 201
    assert widths["sample"] ** 2 - widths["fixed"] ** 2 == pytest.approx(extra, rel=0.25)


def test_fit_from_counts_builds_the_laplace_reference() -> None:
    traces = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 100, seed=0)
    counts = tt.count_transitions(traces)
    chain = tt.ChainEstimator().fit(traces).fetch_model()
    post = DirichletPosterior().fit(counts).fetch_model()
    np.testing.assert_array_equal(post.reference.Q, chain.Q)
    assert post.counts is counts


def test_counts_round_trip_through_chain_metadata(notation_fit: tt.AbsorbingChain) -> None:
    c = counts_from_chain(tt.AbsorbingChain.from_json(notation_fit.to_json()))
    d = notation_fit.metadata["counts"]
    assert c.transitions.tolist() == d["transitions"] and c.initial.tolist() == d["initial"]


def test_chain_without_counts_is_refused_with_a_hint() -> None:
    with pytest.raises(ValueError, match="Fit the chain with ChainEstimator"):
        DirichletPosterior().fit(tt.datasets.notation_chain())


@pytest.mark.parametrize("kw", [{"pseudocount": -1}, {"confidence": 1.5}, {"samples": 0},
                                {"initial": "modal"}, {"unvisited": "drop"}])
def test_bad_parameters(kw: dict[str, object], notation_fit: tt.AbsorbingChain) -> None:
    with pytest.raises(ValueError):
        DirichletPosterior(**kw).fit(notation_fit)  # type: ignore[arg-type]


def test_fetch_before_fit_and_wrong_input() -> None:
    with pytest.raises(NotFittedError):
        DirichletPosterior().fetch_model()
    with pytest.raises(TypeError):
        DirichletPosterior().fit("counts.json")  # type: ignore[arg-type]


def test_outputs_are_printable_and_json_ready(notation_fit: tt.AbsorbingChain) -> None:
    import json

    post = DirichletPosterior().fit(notation_fit).fetch_model()
    assert "beta intervals" in str(post) and "<table>" in post._repr_html_()
    json.dumps(post.to_dict(), allow_nan=False)
    assert isinstance(post.ensemble, ChainEnsemble)


def test_degenerate_beta_marginals_are_points() -> None:
    mean, lo, hi = beta_intervals(np.array([[3.0, 0.0, 0.0]]), 0.95)
    assert (lo[0, 0], hi[0, 0]) == (1.0, 1.0) and (lo[0, 1], hi[0, 1]) == (0.0, 0.0)
    assert mean[0].tolist() == [1.0, 0.0, 0.0]


@settings(max_examples=40, deadline=None)
@given(counts=st.lists(st.lists(st.integers(0, 30), min_size=5, max_size=5), min_size=3, max_size=3),
       alpha=st.sampled_from([0.5, 1.0, 2.0]))
def test_every_draw_is_a_stochastic_matrix_and_intervals_bracket_the_mean(counts: list[list[int]],
                                                                          alpha: float) -> None:
    c = np.asarray(counts, dtype=float) + alpha  # the Laplace posterior Dir(counts + α) of every row
    X = sample_rows(c, 20, np.random.default_rng(0))
    assert np.all(X >= 0)
    np.testing.assert_allclose(X.sum(axis=2), 1.0, atol=1e-12)
    mean, lo, hi = beta_intervals(c, 0.95)
    assert np.all(lo <= mean + 1e-12) and np.all(mean <= hi + 1e-12)
    assert np.all((0 <= lo) & (hi <= 1))


def test_censored_last_moves_enter_the_transient_total_not_the_split() -> None:
    """The coarsened observation's exact posterior (sample_rows' docstring): with k censored last moves at a row of
    Dirichlet parameters β (transient β_t, exits β⊕, β⊖), the transient total is Beta(Σβ_t + k, β⊕ + β⊖) and the split
    among the transient states Dir(β_t), independent of it — checked against that construction drawn directly."""
    beta = np.array([[6.0, 3.0, 1.0, 2.0, 4.0]])  # 3 transient states, then ⊕, ⊖
    k = np.array([5.0])
    n = 200_000
    X = sample_rows(beta, n, np.random.default_rng(1), continuations=k)[:, 0, :]
    assert np.allclose(X.sum(axis=1), 1.0)
    rng = np.random.default_rng(2)
    total = rng.beta(beta[0, :3].sum() + k[0], beta[0, 3:].sum(), n)
    split = rng.dirichlet(beta[0, :3], n)
    direct = np.column_stack([total[:, None] * split, (1 - total)[:, None] * rng.dirichlet(beta[0, 3:], n)])
    se = direct.std(axis=0) / np.sqrt(n)
    np.testing.assert_array_less(np.abs(X.mean(axis=0) - direct.mean(axis=0)), 5 * np.sqrt(2) * se)
    np.testing.assert_allclose(X.std(axis=0), direct.std(axis=0), rtol=0.02)
    # The transient total's law: Beta(Σβ_t + k, β⊕ + β⊖) (a KS test at a fixed seed).
    t = X[:, :3].sum(axis=1)
    assert scipy.stats.kstest(t, scipy.stats.beta(beta[0, :3].sum() + k[0], beta[0, 3:].sum()).cdf).pvalue > 0.01
    # Allocating the k moves as if seen narrows the split (what the draws did before).
    alloc = beta.copy()
    alloc[0, :3] *= 1 + k[0] / beta[0, :3].sum()
    Y = sample_rows(alloc, n, np.random.default_rng(1))[:, 0, :]
    assert Y[:, 0].std() < 0.97 * X[:, 0].std()


def test_posterior_of_censored_traces_is_unchanged_without_censoring(notation_fit: tt.AbsorbingChain) -> None:
    """No censored trace: the draws are bit for bit those of plain Dirichlet rows (no extra random draws)."""
    post = DirichletPosterior(samples=300, seed=4).fit(notation_fit).fetch_model()
    shape, absorbing = post._shape
    assert post._draw_shape[1] is None
    X = sample_rows(shape, 300, np.random.default_rng(4), absorbing)
    m = notation_fit.n_states
    np.testing.assert_array_equal(post.ensemble.Q, X[:, :, :m])
