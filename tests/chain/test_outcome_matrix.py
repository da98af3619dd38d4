"""One outcome-count table: ``TransitionCounts.outcome_matrix()`` is the [C | c⊕ | c⊖] table the estimator smooths,
the bootstrap's prior draws start from, and compare, the live service and ``homogeneity_test`` hand to the homogeneity
test. Compare and serve built it with copies of their own until issue 16; these tests pin the one function to those
copies bit for bit, on random count tables and on the counts of random corpora (batch and live counting).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

import tracetochain as tt
from tracetochain.chain import TransitionCounts, outcome_matrix
from tracetochain.serve._live import RunningCounts


def _former_copies(c: TransitionCounts) -> list[NDArray[np.float64]]:
    """The tables the removed copies built: analysis/_compare._count_rows and serve/_live.row_table."""
    compare_rows = np.column_stack([c.transitions, c.exits_success, c.exits_failure]).astype(float)
    serve_rows = np.column_stack([c.transitions, c.exits_success, c.exits_failure]).astype(np.float64)
    return [compare_rows, serve_rows]


def _assert_bit_identical(c: TransitionCounts) -> None:
    table = c.outcome_matrix()
    assert table.dtype == np.float64 and table.shape == (c.n_states, c.n_states + 2)
    assert table.tobytes() == outcome_matrix(c.transitions, c.exits_success, c.exits_failure).tobytes()
    for former in _former_copies(c):
        assert former.dtype == table.dtype and former.shape == table.shape
        assert former.tobytes() == table.tobytes()


@st.composite
def count_tables(draw: st.DrawFn) -> TransitionCounts:
    m = draw(st.integers(0, 6))
    # Up to 2**62: past 2**53 the int → float conversion rounds, and it must round the same way on every path.
    cell = st.integers(0, 2 ** 62)
    ints = st.lists(cell, min_size=m * m + 3 * m, max_size=m * m + 3 * m)
    values = np.array(draw(ints), dtype=np.int64)
    return TransitionCounts(tuple(f"s{i}" for i in range(m)), values[: m * m].reshape(m, m),
                            values[m * m: m * m + m], values[m * m + m: m * m + 2 * m], values[m * m + 2 * m:],
                            {"success": 0, "failure": 0, "censored": 0, "invalid": 0})


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(count_tables())
def test_outcome_matrix_equals_the_former_copies_on_random_tables(counts: TransitionCounts) -> None:
    _assert_bit_identical(counts)


episodes = st.lists(st.tuples(st.lists(st.sampled_from("abcde"), min_size=1, max_size=8),
                              st.sampled_from(["success", "failure", "censored", "invalid"])),
                    min_size=1, max_size=30)


@pytest.mark.slow
@settings(max_examples=80, deadline=None)
@given(episodes)
def test_outcome_matrix_on_random_corpora_batch_and_live(seqs: list[tuple[list[str], str]]) -> None:
    """The counts of a random corpus, counted by the batch counter and by the live service's running counts."""
    records = [{"trace_id": f"t{i}", "step_idx": j, "state": s, "outcome": out}
               for i, (states, out) in enumerate(seqs) for j, s in enumerate(states)]
    batch = tt.count_transitions(tt.TraceTable.from_records(records))
    _assert_bit_identical(batch)
    running = RunningCounts()
    for i, (states, out) in enumerate(seqs):
        running.add(tuple(states), out, f"t{i}")
    live = running.to_counts(list(batch.state_names))
    _assert_bit_identical(live)
    # Both counters follow one counting rule, so the two tables agree too.
    assert live.outcome_matrix().tobytes() == batch.outcome_matrix().tobytes()


def test_outcome_matrix_golden() -> None:
    c = tt.count_transitions(tt.TraceTable.from_records([
        {"trace_id": "x", "step_idx": 0, "state": "a", "outcome": "success"},
        {"trace_id": "x", "step_idx": 1, "state": "b", "outcome": "success"},
        {"trace_id": "y", "step_idx": 0, "state": "a", "outcome": "failure"},
    ]))
    assert c.outcome_matrix().tolist() == [[0.0, 1.0, 0.0, 1.0], [0.0, 0.0, 1.0, 0.0]]
