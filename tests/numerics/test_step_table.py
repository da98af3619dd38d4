"""The simulator's step tables keep only the columns a draw can land in; the traces are those of the full table."""

from __future__ import annotations

import numpy as np
import pytest

from tracetochain._outcome import CENSORED, FAILURE, SUCCESS
from tracetochain.numerics import simulate_traces
from tracetochain.numerics.simulate import step_table


def _full_table_traces(Q, rs, rf, pi0, n, seed, max_steps):  # type: ignore[no-untyped-def]
    """The reference: every row's whole cumulative sum (last entry set to 1), the column = entries ≤ u."""
    rng = np.random.default_rng(seed)
    m = Q.shape[0]
    cum = np.cumsum(np.column_stack([Q, rs, rf]), axis=1)
    cum[:, -1] = 1.0
    cum_pi0 = np.cumsum(pi0)
    cum_pi0[-1] = 1.0
    state = np.searchsorted(cum_pi0, rng.random(n), side="right")
    length = np.zeros(n, np.int64)
    outcome = np.full(n, CENSORED, np.int8)
    active = np.arange(n)
    for _ in range(max_steps):
        if not active.size:
            break
        length[active] += 1
        u = rng.random(active.size)
        nxt = (cum[state[active]] <= u[:, None]).sum(axis=1)
        absorbed = nxt >= m
        outcome[active[absorbed]] = np.where(nxt[absorbed] == m, SUCCESS, FAILURE)
        active = active[~absorbed]
        state[active] = nxt[~absorbed]
    return length, outcome


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
    want = _full_table_traces(Q, rs, rf, pi0, n, seed=3, max_steps=200)
    got = simulate_traces(Q, rs, rf, pi0, n, np.random.default_rng(3), max_steps=200, table=table)
    assert np.array_equal(got.length, want[0]) and np.array_equal(got.outcome, want[1])
    again = simulate_traces(Q, rs, rf, pi0, n, np.random.default_rng(3), max_steps=200)  # table built inside
    assert np.array_equal(again.length, want[0]) and np.array_equal(again.outcome, want[1])


def test_a_table_for_another_chain_is_refused() -> None:
    Q = np.array([[0.5]])
    with pytest.raises(ValueError, match="step table is for 2 states"):
        simulate_traces(Q, np.array([0.25]), np.array([0.25]), np.array([1.0]), 5, np.random.default_rng(0),
                        table=step_table(np.eye(2) * 0.5, np.full(2, 0.25), np.full(2, 0.25)))
