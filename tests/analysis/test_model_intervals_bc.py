"""The model path's intervals: the refits' percentile interval widened to the bias-corrected (BC) one
(analysis._models.refit_interval)."""

from __future__ import annotations

import numpy as np
import scipy.stats

from tracetochain.analysis._models import refit_interval

Z = scipy.stats.norm.ppf(0.975)


def test_refits_centred_on_the_point_give_the_percentile_interval() -> None:
    rng = np.random.default_rng(0)
    draws = rng.normal(0.5, 0.1, 4001)
    lo, hi = refit_interval(draws, np.asarray(np.median(draws)), 0.95)
    np.testing.assert_allclose([lo, hi], np.quantile(draws, [0.025, 0.975]), atol=2e-3)


def test_biased_refits_widen_the_interval_by_the_bc_one() -> None:
    """Refits 1 s.d. below the point (z0 = 1): BC takes their Φ(2 ± 1.96) quantiles [0.04, 3.9]; the interval is the
    union with the percentile one [−1.96, 1.96]."""
    rng = np.random.default_rng(1)
    draws = rng.normal(0.0, 1.0, 20_000)
    lo, hi = refit_interval(draws, np.asarray(1.0), 0.95)
    z0 = scipy.stats.norm.ppf(np.mean(draws < 1.0))
    np.testing.assert_allclose(lo, np.quantile(draws, 0.025), rtol=1e-9)
    np.testing.assert_allclose(hi, np.quantile(draws, scipy.stats.norm.cdf(2 * z0 + Z)), rtol=1e-9)
    assert hi > 3.5


def test_a_strong_bias_does_not_collapse_the_interval() -> None:
    """97.5 %+ of the refits below the point (mini-swe-agent's R(10)): BC alone sits on the refits' top tail; the
    interval keeps the percentile interval's spread and reaches the point."""
    rng = np.random.default_rng(2)
    draws = rng.normal(0.099, 0.006, 200)
    point = 0.111
    lo, hi = refit_interval(draws, np.asarray(point), 0.95)
    perc = np.quantile(draws, [0.025, 0.975])
    assert lo <= perc[0] and hi >= max(perc[1], point)


def test_a_point_beyond_every_refit_is_reached_and_columns_are_separate() -> None:
    draws = np.column_stack([np.linspace(0.0, 1.0, 200), np.linspace(0.0, 0.5, 200)])
    lo, hi = refit_interval(draws, np.array([0.5, 0.9]), 0.9)
    assert lo.shape == hi.shape == (2,)
    assert lo[0] < 0.5 < hi[0]
    assert hi[1] == 0.9 and lo[1] < 0.5  # every refit below the point: the interval is stretched to reach it


def test_never_narrower_than_the_percentile_interval_and_always_holds_the_point() -> None:
    rng = np.random.default_rng(3)
    for _ in range(50):
        draws = rng.gamma(rng.uniform(0.3, 5.0), 1.0, size=(rng.integers(20, 400), 3))
        point = np.quantile(draws, rng.uniform(0, 1, 3), axis=0).diagonal() * rng.uniform(0.5, 1.5, 3)
        lo, hi = refit_interval(draws, point, 0.95)
        perc_lo, perc_hi = np.quantile(draws, [0.025, 0.975], axis=0)
        assert np.all(lo <= point) and np.all(point <= hi)
        assert np.all(lo <= perc_lo + 1e-12) and np.all(hi >= perc_hi - 1e-12)
