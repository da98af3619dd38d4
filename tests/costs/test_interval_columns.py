"""Per-state cost intervals summarise whole columns at once; the result is the one-column summary's, bit for bit."""

from __future__ import annotations

import numpy as np

from tracetochain.costs._intervals import _interval


def test_columns_at_once_equal_one_column_at_a_time() -> None:
    rng = np.random.default_rng(1)
    draws = rng.gamma(2.0, size=(1000, 43)) * rng.uniform(0.1, 1000, size=43)
    draws[rng.integers(0, 1000, 20), 5] = np.nan  # a column with undefined draws takes the one-column path
    draws[:, 7] = np.inf
    points = [float(i) for i in range(43)]
    expected = [_interval(draws[:, i], points[i], 0.95) for i in range(43)]
    assert _interval(draws, points, 0.95) == {"per_state": expected}
    one = draws[:1]  # one draw: no standard deviation, the one-column rule (std 0.0)
    assert _interval(one, points, 0.95) == {"per_state": [_interval(one[:, i], points[i], 0.95) for i in range(43)]}
