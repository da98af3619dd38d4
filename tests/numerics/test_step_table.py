"""The simulator's step tables keep only the columns a draw can land in; the traces are those of the full table."""

from __future__ import annotations

import numpy as np
import pytest

from tests.numerics.test_properties import _simulate_by_counting
from tracetochain.numerics import simulate_traces
from tracetochain.numerics.simulate import step_table


@pytest.mark.parametrize("m, density, n", [(4, 1.0, 300), (50, 0.5, 200), (200, 1.0, 300), (400, 0.2, 500),
                                          (400, 0.02, 300), (900, 0.005, 40)])  # (200, 1.0) and (400, 0.2): the
# binary search (more than 2^15 cells a step), the others the direct count
def test_sparse_tables_give_the_full_tables_traces(m: int, density: float, n: int) -> None:
    rng = np.random.default_rng(m)
    Q = rng.random((m, m)) * (rng.random((m, m)) < density)
    exits = rng.random((m, 2)) * (rng.random((m, 2)) < 0.5)
    exits[0] = 0.0  # a state that cannot exit
    Q[1] = 0.0  # a state that can only exit
    exits[1] = (0.3, 0.7)
    total = Q.sum(axis=1) + exits.sum(axis=1)
    total[total == 0] = 1.0
    Q, rs, rf = Q / total[:, None], exits[:, 0] / total, exits[:, 1] / total
    pi0 = rng.dirichlet(np.ones(m))
    table = step_table(Q, rs, rf)
    assert table.cum.shape[1] <= m + 2 and np.all(np.isinf(table.cum) | (table.cum <= 1.0 + 1e-9))
    want = _simulate_by_counting(Q, rs, rf, pi0, n, np.random.default_rng(3), 200)  # the full table's draw
    got = simulate_traces(Q, rs, rf, pi0, n, np.random.default_rng(3), max_steps=200, table=table)
    assert np.array_equal(got.length, want[0]) and np.array_equal(got.outcome, want[1])
    again = simulate_traces(Q, rs, rf, pi0, n, np.random.default_rng(3), max_steps=200)  # table built inside
    assert np.array_equal(again.length, want[0]) and np.array_equal(again.outcome, want[1])


def test_a_table_for_another_chain_is_refused() -> None:
    Q = np.array([[0.5]])
    with pytest.raises(ValueError, match="step table is for 2 states"):
        simulate_traces(Q, np.array([0.25]), np.array([0.25]), np.array([1.0]), 5, np.random.default_rng(0),
                        table=step_table(np.eye(2) * 0.5, np.full(2, 0.25), np.full(2, 0.25)))
