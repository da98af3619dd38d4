"""The order layer's random tables with fixed margins (``audit._order.random_tables``): both exact samplers draw the
multivariate hypergeometric law, checked against the law enumerated table by table (an oracle that shares no code
with them), and keep the margins whatever the totals."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.special import chdtrc

from tracetochain.audit._order import _boyett_tables, _hypergeometric_tables, random_tables

SAMPLERS = [_boyett_tables, _hypergeometric_tables, random_tables]


def exact_law(rows: tuple[int, ...], cols: tuple[int, ...]) -> dict[tuple[int, ...], float]:
    """P(x) = Π R_i! Π C_j! / (N! Π x_ij!) for every table with these margins, by enumeration."""
    n = sum(rows)
    r, c = len(rows), len(cols)
    law = {}
    for cells in itertools.product(range(max(rows) + 1), repeat=r * c):
        x = np.array(cells).reshape(r, c)
        if tuple(x.sum(axis=1)) != rows or tuple(x.sum(axis=0)) != cols:
            continue
        log_p = (sum(math.lgamma(v + 1) for v in rows) + sum(math.lgamma(v + 1) for v in cols)
                 - math.lgamma(n + 1) - sum(math.lgamma(v + 1) for v in cells))
        law[cells] = math.exp(log_p)
    return law


@pytest.mark.parametrize("sampler", SAMPLERS, ids=lambda f: f.__name__)
@pytest.mark.parametrize(("rows", "cols"), [((3, 2, 2), (2, 3, 2)), ((4, 1), (1, 2, 2))])
def test_each_sampler_draws_the_multivariate_hypergeometric_law(sampler, rows, cols) -> None:
    law = exact_law(rows, cols)
    assert sum(law.values()) == pytest.approx(1.0, abs=1e-12)
    size = 40_000
    draws = sampler(np.array(rows), np.array(cols), size, np.random.default_rng(7))
    keys = [tuple(t) for t in draws.reshape(size, -1).tolist()]
    seen: dict[tuple[int, ...], int] = {}
    for k in keys:
        seen[k] = seen.get(k, 0) + 1
    assert set(seen) <= set(law), "a table off the margins' support"
    # Pearson's χ² over the support, cells of small expectation pooled into one.
    expected = np.array([size * p for p in law.values()])
    observed = np.array([seen.get(k, 0) for k in law])
    small = expected < 5
    e, o = expected[~small], observed[~small]
    if small.any():
        e, o = np.append(e, expected[small].sum()), np.append(o, observed[small].sum())
    x2 = float(((o - e) ** 2 / e).sum())
    assert chdtrc(len(e) - 1, x2) > 1e-3, (x2, len(e))


@pytest.mark.parametrize("sampler", SAMPLERS, ids=lambda f: f.__name__)
def test_the_margins_hold_on_random_shapes_and_totals(sampler) -> None:
    rng = np.random.default_rng(3)
    for _ in range(30):
        r, c = int(rng.integers(1, 8)), int(rng.integers(1, 8))
        n = int(rng.integers(0, 300))
        rows = rng.multinomial(n, np.ones(r) / r)
        cols = rng.multinomial(n, np.ones(c) / c)
        draws = sampler(rows, cols, 17, rng)
        assert draws.shape == (17, r, c) and draws.min(initial=0) >= 0
        assert (draws.sum(axis=2) == rows).all() and (draws.sum(axis=1) == cols).all()


def test_large_totals_cost_the_cells_not_the_observations() -> None:
    """A partitioned corpus can hold millions of moves in one context: the shuffle would need them all in memory
    per replicate; the choice takes the hypergeometric path, whose cost does not grow with the total."""
    rows = np.array([3_000_000, 2_000_000, 5_000_000])
    cols = np.array([4_000_000, 4_000_000, 2_000_000])
    draws = random_tables(rows, cols, 199, np.random.default_rng(0))
    assert (draws.sum(axis=2) == rows).all() and (draws.sum(axis=1) == cols).all()
    # Near independence the cells concentrate on R_i C_j / N (sd ~ sqrt of that): a shuffle-free draw still mixes.
    assert np.abs(draws.mean(axis=0) - np.outer(rows, cols) / rows.sum()).max() < 500


def test_unequal_margins_are_refused() -> None:
    with pytest.raises(ValueError, match="equal totals"):
        random_tables(np.array([2, 3]), np.array([4, 2]), 5, np.random.default_rng(0))
