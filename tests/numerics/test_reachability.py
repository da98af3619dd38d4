"""The reachability search before every solve (``absorbing_reachability``): NumPy, equal to scipy.sparse.csgraph's
breadth-first order on random directed graphs, self-loops, isolated nodes and empty edge sets included."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse
import scipy.sparse.csgraph
from hypothesis import given, settings
from hypothesis import strategies as st

from tracetochain.numerics.absorbing import _reached_from


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.integers(1, 40), st.lists(st.tuples(st.integers(0, 39), st.integers(0, 39)), max_size=120),
       st.integers(0, 39))
def test_reached_set_is_csgraph_breadth_first_order(n: int, edges: list[tuple[int, int]], start: int) -> None:
    start %= n
    src = np.array([a % n for a, _ in edges], dtype=np.intp)
    dst = np.array([b % n for _, b in edges], dtype=np.intp)
    graph = scipy.sparse.csr_matrix((np.ones(src.size), (src, dst)), shape=(n, n))
    order = scipy.sparse.csgraph.breadth_first_order(graph, start, directed=True, return_predecessors=False)
    expected = np.zeros(n, dtype=bool)
    expected[order] = True
    assert np.array_equal(_reached_from(start, src, dst, n), expected)
