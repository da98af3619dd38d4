"""Hierarchical Dirichlet shrinkage: the evidence formula, its empirical-Bayes maximiser, the shrunk rows."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracetochain.models._shrinkage import dirichlet_multinomial_evidence, eb_concentration, root_row, shrink


def _sequence_probability(counts: list[int], base: list[float], kappa: float) -> float:
    """Pólya urn: probability of one particular sequence with these counts (the oracle for the evidence)."""
    p, seen = 1.0, [0] * len(counts)
    n = 0
    for j, c in enumerate(counts):
        for _ in range(c):
            p *= (seen[j] + kappa * base[j]) / (n + kappa)
            seen[j] += 1
            n += 1
    return p


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=2, max_size=4), st.floats(0.05, 50.0))
def test_evidence_is_the_polya_urn_sequence_probability(counts: list[int], kappa: float) -> None:
    base = np.full(len(counts), 1.0 / len(counts))
    got = dirichlet_multinomial_evidence(np.array([counts], float), base[None, :], kappa)
    want = math.log(_sequence_probability(counts, base.tolist(), kappa)) if sum(counts) else 0.0
    assert got == pytest.approx(want, abs=1e-9)


def test_eb_concentration_maximises_the_evidence() -> None:
    rng = np.random.default_rng(3)
    base = np.array([0.5, 0.3, 0.2])
    rows = np.array([rng.multinomial(40, rng.dirichlet(5 * base)) for _ in range(12)], float)
    k = eb_concentration(rows, np.tile(base, (12, 1)))
    grid = np.exp(np.linspace(np.log(0.05), np.log(1e4), 2000))
    ev = [dirichlet_multinomial_evidence(rows, np.tile(base, (12, 1)), g) for g in grid]
    assert dirichlet_multinomial_evidence(rows, np.tile(base, (12, 1)), k) >= max(ev) - 1e-3
    # started from a nearby value, Newton's method lands on the same optimum
    k2 = eb_concentration(rows, np.tile(base, (12, 1)), start=k * 3)
    assert k2 == pytest.approx(k, rel=1e-2)


def test_alike_rows_push_kappa_to_the_bound_and_shrink_keeps_parents_at_infinity() -> None:
    base = np.array([0.25, 0.75])
    rows = np.array([[25.0, 75.0], [50.0, 150.0]])
    assert eb_concentration(rows, np.tile(base, (2, 1))) > 1e4
    assert np.array_equal(shrink(rows, np.tile(base, (2, 1)), math.inf), np.tile(base, (2, 1)))
    out = shrink(np.array([[3.0, 1.0]]), base[None, :], 4.0)
    assert out.tolist() == [[(3 + 1) / 8, (1 + 3) / 8]]


def test_root_row_has_full_support_and_sums_to_one() -> None:
    r = root_row(np.array([[3.0, 0.0, 1.0], [1.0, 0.0, 0.0]]))
    assert r.min() > 0 and r.sum() == pytest.approx(1.0)
    assert r[1] == pytest.approx(0.5 / (5 + 1.5))
