"""The model path's intervals are bias-corrected percentile intervals of the refits (analysis._models)."""

from __future__ import annotations

import numpy as np
import scipy.stats

from tracetochain.analysis._models import bias_corrected_percentile


def test_refits_centred_on_the_point_give_the_percentile_interval() -> None:
    rng = np.random.default_rng(0)
    draws = rng.normal(0.5, 0.1, 4001)
    point = np.median(draws)
    lo, hi = bias_corrected_percentile(draws, np.asarray(point), 0.95)
    np.testing.assert_allclose([lo, hi], np.quantile(draws, [0.025, 0.975]), atol=2e-3)


def test_biased_refits_are_shifted_back_to_the_point_by_twice_z0() -> None:
    """The refits sit 1 s.d. below the point (z0 = Φ⁻¹(0.841) = 1): BC takes their Φ(2 ± 1.96) quantiles."""
    rng = np.random.default_rng(1)
    draws = rng.normal(0.0, 1.0, 20_000)
    lo, hi = bias_corrected_percentile(draws, np.asarray(1.0), 0.95)
    z0 = scipy.stats.norm.ppf(np.mean(draws < 1.0))
    z = scipy.stats.norm.ppf(0.975)
    expect = np.quantile(draws, scipy.stats.norm.cdf([2 * z0 - z, 2 * z0 + z]))
    np.testing.assert_allclose([lo, hi], expect, rtol=1e-9)
    assert lo < 1.0 < hi  # the plain percentile interval, [−1.96, 1.96], would hold it too — but not below:
    lo2, hi2 = bias_corrected_percentile(draws, np.asarray(2.5), 0.95)
    assert np.quantile(draws, 0.975) < 2.5 and lo2 <= 2.5 <= hi2


def test_a_point_beyond_every_refit_is_reached_and_columns_are_separate() -> None:
    draws = np.column_stack([np.linspace(0.0, 1.0, 200), np.linspace(0.0, 0.5, 200)])
    lo, hi = bias_corrected_percentile(draws, np.array([0.5, 0.9]), 0.9)
    assert lo.shape == hi.shape == (2,)
    assert lo[0] < 0.5 < hi[0]
    assert hi[1] == 0.9 and lo[1] < 0.5  # every refit below the point: the interval is stretched to reach it


def test_the_point_is_inside_for_any_skewed_refits() -> None:
    rng = np.random.default_rng(3)
    for _ in range(50):
        draws = rng.gamma(rng.uniform(0.3, 5.0), 1.0, size=(rng.integers(20, 400), 3))
        point = np.quantile(draws, rng.uniform(0, 1, 3), axis=0).diagonal() * rng.uniform(0.5, 1.5, 3)
        lo, hi = bias_corrected_percentile(draws, point, 0.95)
        assert np.all(lo <= point) and np.all(point <= hi)
