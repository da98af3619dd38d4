"""The median steps of the runs that succeed, M = min{d : R(d) ≥ R∞/2}: closed forms, ties, start exits, the sweep
against R(d), the batched twin against the one-chain value, and Monte Carlo against simulated traces."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracetochain as tt
from tracetochain.quantities import QUANTITIES
from tracetochain.uncertainty import DirichletPosterior

MEDIAN = QUANTITIES["median_steps_to_success"]


def one_state(q: float, a: float, start: tuple[float, float] = (0.0, 0.0)) -> tt.AbsorbingChain:
    """One transient state looping with probability q, succeeding with a: R(d) = s + (1 − s − f)·a(1 − q^d)/(1 − q)."""
    pi = 1.0 - sum(start)
    return tt.AbsorbingChain([[q]], [a], [1.0 - q - a], [pi], ["s"], start_exits=start)


@pytest.mark.parametrize(("q", "expected"), [(0.8, 4), (0.9, 7), (0.3, 1), (0.0, 1)])
def test_geometric_closed_form(q: float, expected: int) -> None:
    # R(d)/R∞ = 1 − q^d, so M = ⌈log(1/2) / log q⌉ (1 when q = 0: every success takes exactly one step).
    a = (1.0 - q) * 0.6
    assert MEDIAN.value(one_state(q, a)) == expected
    if q > 0:
        assert expected == math.ceil(math.log(0.5) / math.log(q))


def test_tie_at_exactly_one_half_counts() -> None:
    # q = 0.5: R(1)/R∞ = 1/2 exactly, so the median is 1 (the smallest d with F(d) ≥ 1/2), not 2.
    assert MEDIAN.value(one_state(0.5, 0.25)) == 1


def test_start_exits() -> None:
    # s = 0.4 of the runs succeed before any step, R∞ = 0.4 + 0.6·0.5 = 0.7: R(0) = 0.4 ≥ 0.35, so M = 0.
    assert MEDIAN.value(one_state(0.5, 0.25, start=(0.4, 0.0))) == 0
    # s = 0.1: R∞ = 0.1 + 0.9·0.5 = 0.55, R(0) = 0.1 < 0.275 ≤ R(1) = 0.1 + 0.9·0.25 = 0.325.
    assert MEDIAN.value(one_state(0.5, 0.25, start=(0.1, 0.0))) == 1


def test_undefined_without_success_and_beyond_max_horizon() -> None:
    value, why = MEDIAN.point(one_state(0.5, 0.0))
    assert value is None and "R∞ = 0" in why
    value, why = MEDIAN.point(one_state(0.999, 0.0005), max_horizon=10)
    assert value is None and "max_horizon = 10" in why


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 5), st.integers(0, 10_000))
def test_median_is_where_the_rdc_crosses_one_half(m: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows = rng.dirichlet(np.ones(m + 2), size=m)
    chain = tt.AbsorbingChain(rows[:, :m] * 0.95, rows[:, m] * 0.95 + 0.025, rows[:, m + 1] * 0.95 + 0.025,
                              rng.dirichlet(np.ones(m)), [f"s{i}" for i in range(m)])
    med = int(MEDIAN.value(chain))
    rel = chain.reliability(med)
    assert rel[med] >= chain.r_inf / 2 * (1 - 1e-12)
    if med > 0:
        assert rel[med - 1] < chain.r_inf / 2


def test_batched_twin_equals_the_one_chain_value() -> None:
    chain = tt.datasets.notation_chain()
    traces = tt.datasets.simulate_traces(chain, 300, seed=3)
    ens = DirichletPosterior(samples=60, seed=1).fit(tt.ChainEstimator().fit(traces).fetch_model()).fetch_model() \
        .ensemble
    s = ens.stats("median_steps_to_success", return_samples=True)
    assert s.n_excluded == 0
    per_draw = [MEDIAN.value(ens.chain(i)) for i in range(ens.n_samples)]
    assert np.array_equal(np.asarray(s.samples), np.asarray(per_draw, dtype=float))
    assert s.point == MEDIAN.value(ens.reference)


def _success_lengths(chain: tt.AbsorbingChain, n: int, seed: int) -> np.ndarray:
    traces = tt.datasets.simulate_traces(chain, n, seed=seed)
    return np.diff(traces.offsets)[traces.outcomes() == 0]


def test_monte_carlo_median_of_simulated_successes() -> None:
    chain = one_state(0.75, 0.15)  # F(2) = 0.4375, F(3) = 0.578: the median 3, far from a tie
    med = int(MEDIAN.value(chain))
    assert med == 3
    lengths = _success_lengths(chain, 20_000, seed=11)
    assert int(np.sort(lengths)[(len(lengths) - 1) // 2]) == med  # the lower median: smallest d with F(d) ≥ 1/2


def test_monte_carlo_notation_chain_brackets_one_half() -> None:
    # The notation chain's median sits near a tie (F(M) = 0.5056), so the simulated F at M and M − 1 are checked to
    # straddle 1/2 within 4 standard errors of the model's values.
    chain = tt.datasets.notation_chain()
    med = int(MEDIAN.value(chain))
    cdf = chain.success_conditional_cdf(med)
    lengths = _success_lengths(chain, 40_000, seed=12)
    n = len(lengths)
    for d in (med - 1, med):
        f = float((lengths <= d).mean())
        assert abs(f - cdf[d]) < 4 * math.sqrt(cdf[d] * (1 - cdf[d]) / n), (d, f, cdf[d])
    assert cdf[med] >= 0.5 > cdf[med - 1]


def test_first_within_is_the_step_budgets_exact_d_and_stops_at_max_horizon() -> None:
    """The growing sweeps behind the one-chain median and the refits' step budgets: the exact budget of
    ``AbsorbingChain.step_budget``, also past the first 64-step sweep; None when the tail is still above at the cap."""
    from tracetochain.quantities import first_within

    chain = one_state(0.97, 0.02)  # R∞ − R(d) = R∞·0.97^d: the budget for δ = 1e-3 is far beyond 64 steps
    for delta in (0.1, 1e-3):
        assert first_within(chain, delta, 100_000) == chain.step_budget(delta).exact
    assert first_within(chain, 1e-3, 100) is None
