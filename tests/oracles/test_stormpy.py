"""Cross-checks against independent exact oracles: Storm (stormpy 2.0) with rational arithmetic, and sympy.

Every chain here is count-based, so its entries are exact rationals c/total; Storm is fed ``stormpy.Rational``
values and answers exactly (docs/numerics.md §9), so any disagreement beyond float rounding is ours.
Queries: ``P=? [F "succ"]`` = R∞, ``P=? [F<=d "succ"]`` = R(d), ``R{"steps"}=? [F "absorb"]`` (state reward 1
on transient states) = E[T], ``P=? [F "fail"]`` = failure probability.
"""

from __future__ import annotations

from fractions import Fraction
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from tracetochain import AbsorbingChain

pytestmark = pytest.mark.oracle

TOL = 1e-9


@pytest.fixture(scope="module")
def stormpy() -> ModuleType:
    return pytest.importorskip("stormpy")


# --------------------------------------------------------------------------------------------- helpers


def rational_chain(rows: list[list[Fraction]]) -> tuple[list[list[Fraction]], list[Fraction], list[Fraction]]:
    """Split rows over [transient..., SUCCESS, FAILURE] into (Q, r+, r−)."""
    m = len(rows)
    for row in rows:
        assert len(row) == m + 2 and sum(row) == 1
    return [row[:m] for row in rows], [row[m] for row in rows], [row[m + 1] for row in rows]


def to_absorbing_chain(rows: list[list[Fraction]], start: int) -> AbsorbingChain:
    Q, rs, rf = rational_chain(rows)
    return AbsorbingChain([[float(x) for x in r] for r in Q], [float(x) for x in rs], [float(x) for x in rf],
                          pi0=start)


def build_storm_dtmc(stormpy: ModuleType, rows: list[list[Fraction]], start: int) -> Any:
    """Exact DTMC: states 0..m−1 transient, m = SUCCESS, m+1 = FAILURE (both with self-loops)."""
    from stormpy import datastructures, models

    R = stormpy.Rational
    m = len(rows)
    n = m + 2
    builder = datastructures.SparseMatrixBuilder[R](rows=n, columns=n, entries=0)
    for i, row in enumerate(rows):
        for j, p in enumerate(row):
            if p != 0:
                builder.add_next_value(i, j, R(f"{p.numerator}/{p.denominator}"))
    builder.add_next_value(m, m, R(1))
    builder.add_next_value(m + 1, m + 1, R(1))
    matrix = builder.build()
    labeling = models.StateLabeling(n)
    for label in ("init", "succ", "fail", "absorb"):
        labeling.add_label(label)
    labeling.add_label_to_state("init", start)
    labeling.add_label_to_state("succ", m)
    labeling.add_label_to_state("fail", m + 1)
    labeling.add_label_to_state("absorb", m)
    labeling.add_label_to_state("absorb", m + 1)
    steps = models.SparseRewardModel[R](optional_state_reward_vector=[R(1)] * m + [R(0), R(0)])
    components = models.SparseModelComponents[R](
        transition_matrix=matrix, state_labeling=labeling, reward_models={"steps": steps}
    )
    return models.SparseDtmc[R](components)


def storm_value(stormpy: ModuleType, model: Any, query: str) -> Fraction:
    prop = stormpy.parse_properties(query)[0]
    result = stormpy.model_checking(model, prop, only_initial_states=True)
    init = next(iter(model.labeling.get_states("init")))
    return Fraction(str(result.get_value(init)))


def check_against_storm(stormpy: ModuleType, rows: list[list[Fraction]], start: int,
                        horizons: tuple[int, ...] = (0, 1, 2, 5, 10, 25)) -> dict[str, Fraction]:
    chain = to_absorbing_chain(rows, start)
    model = build_storm_dtmc(stormpy, rows, start)
    assert model.nr_states == len(rows) + 2
    exact = {
        "r_inf": storm_value(stormpy, model, 'P=? [F "succ"]'),
        "fail": storm_value(stormpy, model, 'P=? [F "fail"]'),
        "mtta": storm_value(stormpy, model, 'R{"steps"}=? [F "absorb"]'),
    }
    assert exact["r_inf"] + exact["fail"] == 1
    assert chain.r_inf == pytest.approx(float(exact["r_inf"]), abs=TOL)
    assert chain.failure_probability == pytest.approx(float(exact["fail"]), abs=TOL)
    assert chain.mean_steps() == pytest.approx(float(exact["mtta"]), abs=TOL * max(1.0, float(exact["mtta"])))
    rel = chain.reliability(max(horizons))
    for d in horizons:
        exact_d = storm_value(stormpy, model, f'P=? [F<={d} "succ"]')
        exact[f"R({d})"] = exact_d
        assert rel[d] == pytest.approx(float(exact_d), abs=TOL), d
    return exact


def random_count_chain(seed: int, m: int) -> tuple[list[list[Fraction]], int]:
    """Rows of integer counts over [transient..., SUCCESS, FAILURE], sparse, every row with an exit count."""
    rng = np.random.default_rng(seed)
    density = rng.uniform(0.2, 0.9)
    counts = rng.integers(1, 30, size=(m, m + 2)) * (rng.random((m, m + 2)) < density)
    for i in range(m):
        if counts[i, m] + counts[i, m + 1] == 0:
            counts[i, m + int(rng.integers(0, 2))] = int(rng.integers(1, 5))
    rows = [[Fraction(int(c), int(row.sum())) for c in row] for row in counts]
    return rows, int(rng.integers(0, m))


# ----------------------------------------------------------------------------------------------- tests


def test_two_state_prism_model(stormpy: ModuleType) -> None:
    """Two-state PRISM-style model: R∞ = 42/59, E[T] = 170/59, R(10) = 708181341/10⁹ exactly."""
    F = Fraction
    rows = [[F(2, 10), F(7, 10), F(0), F(1, 10)], [F(3, 10), F(0), F(6, 10), F(1, 10)]]
    exact = check_against_storm(stormpy, rows, 0, horizons=(0, 1, 10))
    assert exact["r_inf"] == F(42, 59)
    assert exact["mtta"] == F(170, 59)
    assert exact["fail"] == F(17, 59)
    assert exact["R(10)"] == F(708181341, 10**9)
    assert exact["R(0)"] == 0


def test_five_state_oracle_chain(stormpy: ModuleType) -> None:
    """Five-state oracle chain: R∞ = 106/193, E[T] = 680/193, R(1) = 0.1, R(5) = 0.45316."""
    F = Fraction
    rows = [
        [F(0), F(6, 10), F(2, 10), F(1, 10), F(1, 10)],
        [F(1, 10), F(3, 10), F(4, 10), F(1, 10), F(1, 10)],
        [F(0), F(3, 10), F(2, 10), F(3, 10), F(2, 10)],
    ]
    exact = check_against_storm(stormpy, rows, 0, horizons=(1, 5, 20))
    assert exact["r_inf"] == F(106, 193)
    assert exact["mtta"] == F(680, 193)
    assert exact["fail"] == F(87, 193)
    assert exact["R(1)"] == F(1, 10)
    assert exact["R(5)"] == F(45316, 100000)
    assert abs(float(exact["R(20)"]) - 0.5490039823850) < 1e-12


# Seeds chosen so that 0 < R∞ < 1 and E[T] > 1.5 (non-trivial chains), plus (3, 4): R∞ = 0 exactly.
@pytest.mark.parametrize(
    ("seed", "m"), [(4, 1), (7, 2), (1, 3), (3, 4), (4, 4), (4, 7), (3, 12), (2, 16), (1, 20), (2, 20)]
)
def test_random_count_chains(stormpy: ModuleType, seed: int, m: int) -> None:
    rows, start = random_count_chain(seed, m)
    exact = check_against_storm(stormpy, rows, start)
    if (seed, m) == (3, 4):
        assert exact["r_inf"] == 0
        assert to_absorbing_chain(rows, start).r_inf == 0.0
    else:
        assert 0 < exact["r_inf"] < 1


def test_random_count_chain_every_start(stormpy: ModuleType) -> None:
    """One chain, every start state (Storm's init label moves; ours is pi0 = index)."""
    rows, _ = random_count_chain(42, 6)
    for start in range(6):
        check_against_storm(stormpy, rows, start, horizons=(3, 15))


def test_sympy_exact_r_inf() -> None:
    """R∞ = e_{s0}ᵀ (I − Q)⁻¹ r+ in exact rationals (sympy), on a tiny chain with a retry loop."""
    sympy = pytest.importorskip("sympy")
    Rat = sympy.Rational
    Q = sympy.Matrix([
        [Rat(1, 7), Rat(3, 7), Rat(0)],
        [Rat(1, 5), Rat(1, 5), Rat(2, 5)],
        [Rat(0), Rat(1, 3), Rat(0)],
    ])
    rs = sympy.Matrix([Rat(1, 7), Rat(0), Rat(1, 2)])
    rf = sympy.Matrix([Rat(2, 7), Rat(1, 5), Rat(1, 6)])
    assert all(sum(Q.row(i)) + rs[i] + rf[i] == 1 for i in range(3))
    N = (sympy.eye(3) - Q).inv()
    h = N * rs
    g = N * rf
    t = N * sympy.ones(3, 1)
    chain = AbsorbingChain(np.array(Q, dtype=float), np.array(rs, dtype=float).ravel(),
                           np.array(rf, dtype=float).ravel(), pi0=0)
    for i in range(3):
        assert h[i] + g[i] == 1
        c = chain.with_changes(pi0=i)
        assert c.r_inf == pytest.approx(float(h[i]), rel=1e-12, abs=1e-15)
        assert c.failure_probability == pytest.approx(float(g[i]), rel=1e-12, abs=1e-15)
        assert c.mean_steps() == pytest.approx(float(t[i]), rel=1e-12)
    # Also R(d) for small d, exactly: R(d) = e0ᵀ Σ_{k<d} Q^k r+.
    acc = sympy.zeros(3, 1)
    Qk = sympy.eye(3)
    rel = chain.reliability(8)
    for d in range(1, 9):
        acc += Qk * rs
        Qk = Qk * Q
        assert rel[d] == pytest.approx(float(acc[0]), abs=1e-15)
