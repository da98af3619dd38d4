"""difference_interval: the interval of B − A from independent draws, over every pair of draws."""

from __future__ import annotations

import numpy as np
import pytest

import tracetochain.uncertainty._stats as _stats
from tracetochain.uncertainty._stats import difference_interval


def test_equals_the_quantiles_of_every_pair() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.normal(0.3, 0.05, 200), rng.normal(0.35, 0.04, 150)
    lo, hi = difference_interval(a, b, 0.95)
    every = (b[None, :] - a[:, None]).ravel()
    np.testing.assert_allclose((lo, hi), np.quantile(every, [0.025, 0.975]), rtol=1e-12)


def test_columns_of_curves_are_independent_intervals() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(120, 4)), rng.normal(1.0, 2.0, size=(100, 4))
    lo, hi = difference_interval(a, b, 0.9)
    assert lo.shape == hi.shape == (4,)
    for j in range(4):
        assert (lo[j], hi[j]) == tuple(difference_interval(a[:, j], b[:, j], 0.9))


def test_far_less_monte_carlo_noise_than_paired_draws() -> None:
    """The reason it exists: at 200 draws a side, the bounds from n paired differences scatter about twice as much
    as those from all n² pairs (over 300 repetitions of the same law)."""
    rng = np.random.default_rng(2)
    paired, every = [], []
    for _ in range(300):
        a, b = rng.normal(0, 1, 200), rng.normal(0, 1, 200)
        paired.append(np.quantile(b - a, 0.025))
        every.append(difference_interval(a, b, 0.95)[0])
    assert np.std(every) < 0.75 * np.std(paired)
    assert abs(np.mean(every) - (-1.96 * np.sqrt(2))) < 0.05


def test_many_draws_use_a_balanced_subset_of_pairs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_stats, "MAX_DIFFERENCE_PAIRS", 1000)
    rng = np.random.default_rng(3)
    a, b = rng.normal(0, 1, 400), rng.normal(0.5, 1, 400)
    lo, hi = difference_interval(a, b, 0.95)
    assert -3.5 < lo < -2.0 and 3.0 < hi < 4.5


def test_non_finite_draws_are_left_out_and_none_left_is_an_error() -> None:
    lo, hi = difference_interval(np.array([0.0, np.nan, 1.0]), np.array([2.0, np.inf]), 0.5)
    assert np.isfinite(lo) and np.isfinite(hi)
    with pytest.raises(ValueError, match="finite draw"):
        difference_interval(np.array([np.nan]), np.array([1.0]), 0.95)
