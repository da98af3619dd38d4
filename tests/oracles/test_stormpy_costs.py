"""Costs against Storm (stormpy 2.0) in exact rational arithmetic.

* ``R{"cost"}=? [F "absorb"]`` with a state reward c_i on the transient states = E[C], the expected cost until
  absorption.
* The same query on the chain conditioned on success (the Doob h-transform, built in exact rationals: Q̃_ij =
  Q_ij h_j / h_i, exit r⊕_i / h_i, start ∝ π0 h) = E[C | success]; likewise for failure.
* ``P=? [F{"cost"}<=B "succ"]`` (reward-bounded reachability) with integer costs = R(B), which our cost lattice of
  step 1 computes exactly (the up- and down-rounded bounds coincide).
"""

from __future__ import annotations

from fractions import Fraction
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from test_stormpy import random_count_chain, storm_value

from tracetochain import AbsorbingChain
from tracetochain import numerics as nx

pytestmark = pytest.mark.oracle


@pytest.fixture(scope="module")
def stormpy() -> ModuleType:
    return pytest.importorskip("stormpy")


def storm_cost_dtmc(stormpy: ModuleType, Q: list[list[Fraction]], rs: list[Fraction], rf: list[Fraction],
                    start: int, cost: list[Fraction]) -> Any:
    """Exact DTMC over [transient…, SUCCESS, FAILURE] with a state reward "cost" on the transient states."""
    from stormpy import datastructures, models

    R = stormpy.Rational
    m = len(Q)
    n = m + 2

    def rat(x: Fraction) -> Any:
        return R(f"{x.numerator}/{x.denominator}")

    builder = datastructures.SparseMatrixBuilder[R](rows=n, columns=n, entries=0)
    for i in range(m):
        for j, p in enumerate([*Q[i], rs[i], rf[i]]):
            if p != 0:
                builder.add_next_value(i, j, rat(p))
    builder.add_next_value(m, m, R(1))
    builder.add_next_value(m + 1, m + 1, R(1))
    labeling = models.StateLabeling(n)
    for label in ("init", "succ", "fail", "absorb"):
        labeling.add_label(label)
    labeling.add_label_to_state("init", start)
    labeling.add_label_to_state("succ", m)
    labeling.add_label_to_state("fail", m + 1)
    labeling.add_label_to_state("absorb", m)
    labeling.add_label_to_state("absorb", m + 1)
    rewards = models.SparseRewardModel[R](optional_state_reward_vector=[rat(c) for c in cost] + [R(0), R(0)])
    components = models.SparseModelComponents[R](transition_matrix=builder.build(), state_labeling=labeling,
                                                 reward_models={"cost": rewards})
    return models.SparseDtmc[R](components)


def exact_absorption(Q: list[list[Fraction]], r: list[Fraction]) -> list[Fraction]:
    """h = (I − Q)⁻¹ r in exact rationals (Gauss–Jordan on [I − Q | r])."""
    m = len(Q)
    M = [[Fraction(int(i == j)) - Q[i][j] for j in range(m)] + [r[i]] for i in range(m)]
    for col in range(m):
        piv = next(k for k in range(col, m) if M[k][col] != 0)
        M[col], M[piv] = M[piv], M[col]
        p = M[col][col]
        M[col] = [x / p for x in M[col]]
        for k in range(m):
            if k != col and M[k][col] != 0:
                f = M[k][col]
                M[k] = [a - f * b for a, b in zip(M[k], M[col], strict=True)]
    return [row[m] for row in M]


def split(rows: list[list[Fraction]]) -> tuple[list[list[Fraction]], list[Fraction], list[Fraction]]:
    m = len(rows)
    return [row[:m] for row in rows], [row[m] for row in rows], [row[m + 1] for row in rows]


def costs_for(m: int, seed: int) -> list[Fraction]:
    rng = np.random.default_rng(seed)
    return [Fraction(int(k), 4) for k in rng.integers(1, 17, size=m)]


@pytest.mark.parametrize(("seed", "m"), [(4, 1), (7, 2), (1, 3), (4, 7), (3, 12), (1, 20)])
def test_expected_cost_and_conditional_costs(stormpy: ModuleType, seed: int, m: int) -> None:
    rows, start = random_count_chain(seed, m)
    Q, rs, rf = split(rows)
    cost = costs_for(m, seed)
    chain = AbsorbingChain([[float(x) for x in r] for r in Q], [float(x) for x in rs], [float(x) for x in rf],
                           pi0=start)
    ours = chain.accumulated_cost([float(x) for x in cost])
    exact = storm_value(stormpy, storm_cost_dtmc(stormpy, Q, rs, rf, start, cost), 'R{"cost"}=? [F "absorb"]')
    assert ours.mean == pytest.approx(float(exact), rel=1e-10, abs=1e-12)
    for exit_, joint, label in ((rs, ours.mean_success, "succ"), (rf, ours.mean_failure, "fail")):
        h = exact_absorption(Q, exit_)
        if h[start] == 0:
            assert joint == pytest.approx(0.0, abs=1e-12)
            continue
        live = [i for i in range(m) if h[i] != 0]
        # The conditioned chain lives on the states that can still reach the outcome.
        idx = {s: k for k, s in enumerate(live)}
        Qt = [[Q[i][j] * h[j] / h[i] for j in live] for i in live]
        exit_t = [exit_[i] / h[i] for i in live]
        zero = [Fraction(0)] * len(live)
        ex_s, ex_f = (exit_t, zero) if label == "succ" else (zero, exit_t)
        model = storm_cost_dtmc(stormpy, Qt, ex_s, ex_f, idx[start], [cost[i] for i in live])
        conditional = storm_value(stormpy, model, f'R{{"cost"}}=? [F "{label}"]')
        assert joint / float(h[start]) == pytest.approx(float(conditional), rel=1e-10, abs=1e-12), label


@pytest.mark.parametrize(("seed", "m"), [(7, 2), (1, 3), (4, 7)])
def test_cost_bounded_reliability(stormpy: ModuleType, seed: int, m: int) -> None:
    """Integer per-visit costs: R(B) from the lattice (step 1, both roundings) equals Storm's reward-bounded
    reachability exactly (up to float rounding)."""
    rows, start = random_count_chain(seed, m)
    Q, rs, rf = split(rows)
    rng = np.random.default_rng(seed)
    cost = [Fraction(int(k)) for k in rng.integers(0, 4, size=m)]
    cost[start] = Fraction(max(1, int(cost[start])))
    chain = AbsorbingChain([[float(x) for x in r] for r in Q], [float(x) for x in rs], [float(x) for x in rf],
                           pi0=start)
    c = np.array([float(x) for x in cost])
    K = 12
    lo = nx.budget_reliability(chain.Q, chain.R_success, chain.pi0, nx.lattice_pmf(c, np.zeros(m), 1.0, K, "up"), K)
    hi = nx.budget_reliability(chain.Q, chain.R_success, chain.pi0, nx.lattice_pmf(c, np.zeros(m), 1.0, K, "down"),
                               K)
    np.testing.assert_allclose(lo, hi, atol=1e-14)
    model = storm_cost_dtmc(stormpy, Q, rs, rf, start, cost)
    for B in (0, 1, 3, 6, 12):
        exact = storm_value(stormpy, model, f'P=? [F{{"cost"}}<={B} "succ"]')
        assert lo[B] == pytest.approx(float(exact), abs=1e-10), B
