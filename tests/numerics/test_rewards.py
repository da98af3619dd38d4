"""Accumulated costs on the chain (``tracetochain.numerics.rewards``): golden values, exact rationals (the Doob
h-transform as an independent route), Monte Carlo with known per-state costs, structural identities, budgets.

Every random chain and every simulation is seeded; hypothesis runs derandomized.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from numpy.testing import assert_allclose
from test_properties import PROPERTY_SETTINGS, Spec, chains

from tracetochain import AbsorbingChain
from tracetochain import numerics as nx

GOLDEN = AbsorbingChain(Q=[[0.5, 0.3, 0], [0, 0.4, 0.3], [0, 0, 0.6]], R_success=[0.1, 0.2, 0.3],
                        R_failure=[0.1, 0.1, 0.1], pi0=0)


def random_chain(seed: int, m: int, start: int | None = 0) -> AbsorbingChain:
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 20, size=(m, m + 2)) * (rng.random((m, m + 2)) < 0.7)
    counts[:, m] += 1
    counts[:, m + 1] += 1
    P = counts / counts.sum(axis=1, keepdims=True)
    pi0: int | np.ndarray = start if start is not None else rng.dirichlet(np.ones(m))
    return AbsorbingChain(P[:, :m], P[:, m], P[:, m + 1], pi0)


# ------------------------------------------------------------------------------------------------ golden


def test_unit_costs_are_the_step_moments() -> None:
    """c = 1, v = 0: C = T, so the moments are the paper example's (docs/numerics.md §9: E[T] 3.75, Var T 6.770833, E[T
    | S] 4.033333, E[T | F] 3.277778)."""
    r = GOLDEN.accumulated_cost(np.ones(3), np.zeros(3))
    assert r.mean == pytest.approx(3.75, abs=1e-12)
    assert r.second - r.mean**2 == pytest.approx(GOLDEN.steps_variance(), abs=1e-12)
    assert r.second - r.mean**2 == pytest.approx(6.770833333333, abs=1e-9)
    assert r.mean_success / GOLDEN.r_inf == pytest.approx(GOLDEN.mean_steps_given_success(), abs=1e-12)
    assert r.mean_success / GOLDEN.r_inf == pytest.approx(4.0333333333333, abs=1e-10)
    assert r.mean_failure / GOLDEN.failure_probability == pytest.approx(3.2777777777778, abs=1e-10)
    assert_allclose(r.per_state_spend, [2, 1, 0.75], atol=1e-12)  # z_i · 1
    assert_allclose(r.expected_from, [3.75, 35 / 12, 2.5], atol=1e-12)  # t = N 1


def test_walk_example_conditional_times() -> None:
    """Sanity example: x ← a ↔ b → y, each move 1/2, start a: E[T | x] = 5/3, E[T | y] = 8/3."""
    chain = AbsorbingChain([[0, 0.5], [0.5, 0]], [0.5, 0], [0, 0.5], 0, ["a", "b"])
    r = chain.accumulated_cost([1.0, 1.0])
    assert r.mean_success / chain.r_inf == pytest.approx(5 / 3, abs=1e-12)
    assert r.mean_failure / chain.failure_probability == pytest.approx(8 / 3, abs=1e-12)
    assert r.second is None  # no variances given: no second moments


# ------------------------------------------------------------------------------------------------ exact


def _exact_inverse(A: list[list[Fraction]]) -> list[list[Fraction]]:
    """Gauss–Jordan inverse in exact rationals."""
    n = len(A)
    M = [row[:] + [Fraction(int(i == j)) for j in range(n)] for i, row in enumerate(A)]
    for col in range(n):
        piv = next(r for r in range(col, n) if M[r][col] != 0)
        M[col], M[piv] = M[piv], M[col]
        p = M[col][col]
        M[col] = [x / p for x in M[col]]
        for r in range(n):
            if r != col and M[r][col] != 0:
                f = M[r][col]
                M[r] = [a - f * b for a, b in zip(M[r], M[col], strict=True)]
    return [row[n:] for row in M]


def _exact_moments(Q: list[list[Fraction]], pi0: list[Fraction], c: list[Fraction],
                   v: list[Fraction]) -> tuple[Fraction, Fraction]:
    """E[C] and E[C²] of an absorbing chain with transient block Q, by first-step analysis in exact rationals:
    w = N c, s = N(v + c² + 2 c∘(Q w))."""
    m = len(Q)
    N = _exact_inverse([[Fraction(int(i == j)) - Q[i][j] for j in range(m)] for i in range(m)])
    w = [sum(N[i][j] * c[j] for j in range(m)) for i in range(m)]
    Qw = [sum(Q[i][j] * w[j] for j in range(m)) for i in range(m)]
    rhs = [v[i] + c[i] ** 2 + 2 * c[i] * Qw[i] for i in range(m)]
    s = [sum(N[i][j] * rhs[j] for j in range(m)) for i in range(m)]
    return sum(p * x for p, x in zip(pi0, w, strict=True)), sum(p * x for p, x in zip(pi0, s, strict=True))


@pytest.mark.parametrize(("seed", "m"), [(1, 1), (2, 3), (3, 5), (5, 8)])
def test_conditional_moments_equal_the_h_transformed_chain_exactly(seed: int, m: int) -> None:
    """E[C | S] and E[C² | S] from the formulas equal the plain moments of the chain conditioned on success (the
    Doob h-transform Q̃_ij = Q_ij h_j / h_i, exit r⊕_i / h_i, π̃0 ∝ π0∘h), computed in exact rationals; likewise
    for failure with g. Agreement to 1e−10 (relative)."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 9, size=(m, m + 2)) * (rng.random((m, m + 2)) < 0.8)
    counts[:, m] += 1
    counts[:, m + 1] += 1
    P = [[Fraction(int(x), int(row.sum())) for x in row] for row in counts]
    Q = [row[:m] for row in P]
    rs = [row[m] for row in P]
    rf = [row[m + 1] for row in P]
    w0 = rng.integers(1, 5, size=m)
    pi0 = [Fraction(int(x), int(w0.sum())) for x in w0]
    c = [Fraction(int(x), 7) for x in rng.integers(1, 40, size=m)]
    v = [Fraction(int(x), 11) for x in rng.integers(0, 30, size=m)]
    N = _exact_inverse([[Fraction(int(i == j)) - Q[i][j] for j in range(m)] for i in range(m)])
    chain = AbsorbingChain([[float(x) for x in row] for row in Q], [float(x) for x in rs], [float(x) for x in rf],
                           [float(x) for x in pi0])
    got = chain.accumulated_cost([float(x) for x in c], [float(x) for x in v])
    mean, second = _exact_moments(Q, pi0, c, v)
    assert got.mean == pytest.approx(float(mean), rel=1e-10)
    assert got.second == pytest.approx(float(second), rel=1e-10)
    for exit_, joint_mean, joint_second in ((rs, got.mean_success, got.second_success),
                                            (rf, got.mean_failure, got.second_failure)):
        h = [sum(N[i][j] * exit_[j] for j in range(m)) for i in range(m)]
        p = sum(a * b for a, b in zip(pi0, h, strict=True))
        Qt = [[Q[i][j] * h[j] / h[i] for j in range(m)] for i in range(m)]
        pit = [pi0[i] * h[i] / p for i in range(m)]
        cond_mean, cond_second = _exact_moments(Qt, pit, c, v)
        assert joint_mean / float(p) == pytest.approx(float(cond_mean), rel=1e-10)
        assert joint_second / float(p) == pytest.approx(float(cond_second), rel=1e-10)


def test_edge_costs_equal_an_explicit_fallback_state() -> None:
    """A fallback at state s that moves p of its failure mass to success at cost e per use, as edge-cost matrices,
    equals the chain with an explicit fallback state (cost e, one visit, then success) in every moment. The explicit
    chain has one more step, which only the step counts see, not the costs."""
    base = random_chain(11, 4)
    m, s, frac, e = 4, 2, 0.3, 2.5
    c = np.array([1.0, 2.0, 0.5, 3.0])
    v = np.array([0.2, 1.0, 0.0, 0.5])
    moved = frac * base.R_failure[s]
    rf = base.R_failure.copy()
    rf[s] -= moved
    rs = base.R_success.copy()
    rs[s] += moved
    edited = base.with_changes(R_success=rs, R_failure=rf)
    M = np.zeros((m, m + 2))
    M[s, m] = moved * e
    M2 = np.zeros((m, m + 2))
    M2[s, m] = moved * e * e
    got = edited.accumulated_cost(c, v, edge_spend=M, edge_spend_sq=M2)
    Q2 = np.zeros((m + 1, m + 1))
    Q2[:m, :m] = base.Q
    Q2[s, m] = moved
    rs2 = np.r_[base.R_success, 1.0]
    rf2 = np.r_[rf, 0.0]
    explicit = AbsorbingChain(Q2, rs2, rf2, np.r_[base.pi0, 0.0])
    want = explicit.accumulated_cost(np.r_[c, e], np.r_[v, 0.0])
    for name in ("mean", "mean_success", "mean_failure", "second", "second_success", "second_failure"):
        assert getattr(got, name) == pytest.approx(getattr(want, name), rel=1e-10), name
    assert edited.r_inf == pytest.approx(explicit.r_inf, rel=1e-12)


# ------------------------------------------------------------------------------------------------ Monte Carlo


def _simulated_costs(chain: AbsorbingChain, c: np.ndarray, v: np.ndarray, n: int, seed: int
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Totals of gamma per-visit costs (mean c, variance v; v = 0: exactly c) along simulated traces, and
    their outcomes (0 success, 1 failure)."""
    sim = chain.simulate(n, seed=seed, record_paths=True)
    rng = np.random.default_rng(seed + 1)
    st = sim.states
    random = v > 0
    shape = np.where(random, c**2 / np.where(random, v, 1.0), 1.0)
    scale = np.where(random, v / np.where(c > 0, c, 1.0), 0.0)
    x = np.where(random[st], rng.gamma(shape[st], scale[st]), c[st])
    totals = np.add.reduceat(x, sim.offsets[:-1])
    return totals, sim.outcome


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_expected_cost_matches_monte_carlo(seed: int) -> None:
    """Known per-state costs: E[C], E[C | S], E[C | F] and the three variances agree with 200,000 simulated traces
    within 3 standard errors."""
    chain = random_chain(seed, 5, start=None)
    rng = np.random.default_rng(100 + seed)
    c = rng.uniform(0.5, 5.0, 5)
    v = rng.uniform(0.0, 4.0, 5) * (rng.random(5) < 0.8)
    r = chain.accumulated_cost(c, v)
    totals, outcome = _simulated_costs(chain, c, v, 200_000, seed)
    S, F = outcome == 0, outcome == 1
    assert (S | F).all()
    checks = [
        (r.mean, totals),
        (r.mean_success / chain.r_inf, totals[S]),
        (r.mean_failure / chain.failure_probability, totals[F]),
    ]
    for exact, sample in checks:
        se = sample.std(ddof=1) / np.sqrt(sample.size)
        assert abs(sample.mean() - exact) < 3 * se, (exact, sample.mean(), se)
    variances = [
        (r.second - r.mean**2, totals),
        (r.second_success / chain.r_inf - (r.mean_success / chain.r_inf) ** 2, totals[S]),
        (r.second_failure / chain.failure_probability - (r.mean_failure / chain.failure_probability) ** 2,
         totals[F]),
    ]
    for exact, sample in variances:
        # standard error of a sample variance: sqrt((μ4 − σ⁴)/n)
        d = sample - sample.mean()
        se = np.sqrt(max(np.mean(d**4) - np.mean(d**2) ** 2, 0.0) / sample.size)
        assert abs(sample.var(ddof=1) - exact) < 3 * se, (exact, sample.var(ddof=1), se)
    share = r.mean_failure / r.mean
    assert share == pytest.approx(totals[F].sum() / totals.sum(), abs=0.01)


def test_retry_cost_matches_simulated_retries() -> None:
    """Cost until the first success with independent retries: mean E[C]/R∞ and the compound-geometric variance."""
    chain = random_chain(7, 4)
    c = np.array([1.0, 3.0, 0.5, 2.0])
    v = np.array([0.5, 2.0, 0.1, 0.0])
    r = chain.accumulated_cost(c, v)
    R = chain.r_inf
    ms, mf = r.mean_success / R, r.mean_failure / (1 - R)
    vs = r.second_success / R - ms**2
    vf = r.second_failure / (1 - R) - mf**2
    mean, var = nx.retry_cost(ms, mf, vs, vf, R)
    assert mean == pytest.approx(r.mean / R, rel=1e-12)
    totals, outcome = _simulated_costs(chain, c, v, 300_000, 3)
    # cut the attempt stream into runs ending at each success
    success_at = np.flatnonzero(outcome == 0)
    cum = np.concatenate([[0.0], np.cumsum(totals)])
    ends = success_at + 1
    starts = np.concatenate([[0], ends[:-1]])
    per_success = cum[ends] - cum[starts]
    se = per_success.std(ddof=1) / np.sqrt(per_success.size)
    assert abs(per_success.mean() - mean) < 3 * se
    assert var is not None
    assert np.sqrt(var) == pytest.approx(per_success.std(ddof=1), rel=0.02)


def test_capped_cost_with_unit_costs_is_expected_min_of_t_and_d() -> None:
    """c = 1: the capped cost is E[min(T, d)] = Σ_{t<d} P(T > t), the survival sum of the forward sweep."""
    chain = random_chain(5, 6)
    got = nx.capped_mean_cost(chain.Q, chain.pi0, np.ones(6), 40)
    surv = chain.sweep(40).survival
    assert_allclose(got, np.r_[0.0, np.cumsum(surv[:-1])], atol=1e-12)
    assert got[-1] == pytest.approx(chain.mean_steps(), abs=1e-3)


# ------------------------------------------------------------------------------------------------ budgets


def test_unit_costs_on_the_unit_lattice_give_the_horizon_curve() -> None:
    """With every visit costing exactly 1 and a lattice of step 1, R(B) is R(d) at d = B, and the up/down
    bracket closes."""
    chain = random_chain(3, 6, start=None)
    pmf_up = nx.lattice_pmf(np.ones(6), np.zeros(6), 1.0, 60, "up")
    pmf_dn = nx.lattice_pmf(np.ones(6), np.zeros(6), 1.0, 60, "down")
    lo = nx.budget_reliability(chain.Q, chain.R_success, chain.pi0, pmf_up, 60)
    hi = nx.budget_reliability(chain.Q, chain.R_success, chain.pi0, pmf_dn, 60)
    assert_allclose(lo, chain.reliability(60), atol=1e-13)
    assert_allclose(hi, lo, atol=1e-13)


def test_zero_cost_states_solve_each_level() -> None:
    """A free state (cost 0) is looped through at no cost: R(B) at any B ≥ the paid part is R∞ restricted to
    paths whose paid visits fit; with only free states, R(0) = R∞ (each level is a linear solve)."""
    chain = random_chain(4, 3)
    pmf = nx.lattice_pmf(np.zeros(3), np.zeros(3), 1.0, 5, "up")
    out = nx.budget_reliability(chain.Q, chain.R_success, chain.pi0, pmf, 5)
    assert_allclose(out, chain.r_inf, atol=1e-13)


def _budget_reliability_by_levels(Q, r_success, pi0, visit_pmf, n_levels):  # type: ignore[no-untyped-def]
    """The dynamic programme of nx.budget_reliability as first written (levels stored row by row, one einsum over
    a reversed view and scipy.linalg.lu_solve per level): the reference its faster layout must reproduce."""
    import scipy.linalg

    m, K, p = Q.shape[0], int(n_levels), np.asarray(visit_pmf, dtype=np.float64)
    L, p0 = p.shape[1], p[:, 0]
    zero_cost = bool((p0 > 0).any())
    lu = scipy.linalg.lu_factor(np.eye(m) - p0[:, None] * Q) if zero_cost else None
    V, out = np.zeros((K + 1, m)), np.zeros(K + 1)
    for k in range(K + 1):
        hi = min(k, L - 1)
        rest = np.einsum("ia,ai->i", p[:, 1: hi + 1], V[k - 1:: -1][:hi]) if hi >= 1 else np.zeros(m)
        u = scipy.linalg.lu_solve(lu, p0 * r_success + rest) if zero_cost else rest
        V[k] = r_success + Q @ u
        out[k] = float(pi0 @ u)
    return np.clip(out, 0.0, None)


@pytest.mark.parametrize(("seed", "m", "free"), [(0, 5, False), (1, 12, True), (2, 30, True), (5, 8, False)])
def test_budget_reliability_equals_the_level_by_level_programme(seed: int, m: int, free: bool) -> None:
    """The contiguous layout and the direct LAPACK solve change where the numbers are stored, not the sums: equal
    to the original programme to rounding (relative 1e-13), with gamma per-visit costs, zero-cost states or not,
    on a long lattice (support as long as the levels)."""
    rng = np.random.default_rng(seed)
    chain = random_chain(seed, m, start=None)
    mean = rng.uniform(0.5, 3.0, m)
    if free:
        mean[: m // 3] = 0.0
    var = mean * rng.uniform(0.1, 2.0, m)
    for rounding in ("up", "down"):
        pmf = nx.lattice_pmf(mean, var, 0.05, 400, rounding)
        got = nx.budget_reliability(chain.Q, chain.R_success, chain.pi0, pmf, 400)
        ref = _budget_reliability_by_levels(chain.Q, chain.R_success, chain.pi0, pmf, 400)
        assert_allclose(got, ref, rtol=1e-13, atol=1e-15)


def _sparse_chain(seed: int, m: int) -> AbsorbingChain:
    """Each state moves to at most 4 others (Q about 3% dense): the budget programme's CSR mat-vec path."""
    rng = np.random.default_rng(seed)
    counts = np.zeros((m, m + 2))
    for i in range(m):
        counts[i, rng.choice(m, 4, replace=False)] = rng.integers(1, 20, 4)
    counts[:, m] += 1
    counts[:, m + 1] += 1
    P = counts / counts.sum(axis=1, keepdims=True)
    return AbsorbingChain(P[:, :m], P[:, m], P[:, m + 1], rng.dirichlet(np.ones(m)))


@pytest.mark.parametrize(("seed", "m", "levels", "narrow"), [(3, 7, 1001, True), (4, 9, 700, False),
                                                              (6, 140, 300, True)])
def test_budget_reliability_blocks_equal_the_level_by_level_programme(seed: int, m: int, levels: int,
                                                                      narrow: bool) -> None:
    """The blocked programme (earlier blocks by one correlation per state over its pmf's support, the block's own
    levels one by one) against the original level-by-level one: relative 1e-13 where the per-visit laws have narrow
    supports far from 0 (a support starting beyond a block: the correlation windows are clipped on both sides),
    mixed fixed and random costs, zero-cost states, a level count that is no multiple of the block, and a sparse
    chain (CSR mat-vec)."""
    rng = np.random.default_rng(seed)
    chain = _sparse_chain(seed, m) if m >= 128 else random_chain(seed, m, start=None)
    step = 0.05
    mean = rng.uniform(0.5, 3.0, m) * (8.0 if narrow else 1.0)  # up to 480 levels per visit when narrow
    var = mean * rng.uniform(0.1, 2.0, m) * (0.002 if narrow else 1.0)
    var[::3] = 0.0  # fixed costs: one or two levels of support
    mean[1::5] = 0.0  # free visits: I − D0 Q solved each level
    for rounding in ("up", "down", "mean"):
        pmf = nx.lattice_pmf(mean, var, step, levels, rounding)
        got = nx.budget_reliability(chain.Q, chain.R_success, chain.pi0, pmf, levels)
        ref = _budget_reliability_by_levels(chain.Q, chain.R_success, chain.pi0, pmf, levels)
        assert ref[-1] > 0.01  # the budgets reach well into the success mass: the comparison is not of zeros
        assert_allclose(got, ref, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("seed", [0, 3])
def test_budget_bracket_holds_against_monte_carlo(seed: int) -> None:
    """Gamma per-visit costs: the simulated P(S, C ≤ B) lies inside [lower, upper] up to 3 standard errors, and
    the bracket narrows as the lattice refines."""
    chain = random_chain(seed, 5)
    rng = np.random.default_rng(seed)
    c = rng.uniform(1.0, 4.0, 5)
    v = rng.uniform(0.1, 3.0, 5)
    K, B = 600, 60.0
    step = B / K
    lo = nx.budget_reliability(chain.Q, chain.R_success, chain.pi0, nx.lattice_pmf(c, v, step, K, "up"), K)
    hi = nx.budget_reliability(chain.Q, chain.R_success, chain.pi0, nx.lattice_pmf(c, v, step, K, "down"), K)
    assert (lo <= hi + 1e-12).all()
    assert (np.diff(lo) >= -1e-12).all() and (np.diff(hi) >= -1e-12).all()
    assert hi[-1] <= chain.r_inf + 1e-12
    totals, outcome = _simulated_costs(chain, c, v, 200_000, seed + 10)
    for b in (5.0, 10.0, 20.0, 40.0):
        k = round(b / step)
        p = np.mean((outcome == 0) & (totals <= b))
        se = np.sqrt(p * (1 - p) / totals.size)
        assert lo[k] - 3 * se <= p <= hi[k] + 3 * se, (b, lo[k], p, hi[k])
    K2 = 2 * K
    lo2 = nx.budget_reliability(chain.Q, chain.R_success, chain.pi0, nx.lattice_pmf(c, v, B / K2, K2, "up"), K2)
    hi2 = nx.budget_reliability(chain.Q, chain.R_success, chain.pi0, nx.lattice_pmf(c, v, B / K2, K2, "down"), K2)
    assert np.max(hi2 - lo2) < 0.6 * np.max(hi - lo)


def test_lattice_pmf_rounding_and_mass() -> None:
    pmf = nx.lattice_pmf(np.array([2.5, 0.0]), np.zeros(2), 1.0, 10, "up")
    assert pmf[0, 3] == 1.0 and pmf[1, 0] == 1.0
    pmf = nx.lattice_pmf(np.array([2.5]), np.zeros(1), 1.0, 10, "down")
    assert pmf[0, 2] == 1.0
    up = nx.lattice_pmf(np.array([3.0]), np.array([2.0]), 0.1, 500, "up")
    down = nx.lattice_pmf(np.array([3.0]), np.array([2.0]), 0.1, 500, "down")
    assert up.sum() == pytest.approx(1.0, abs=1e-9) and down.sum() == pytest.approx(1.0, abs=1e-12)
    levels_up = np.arange(up.shape[1]) * 0.1
    levels_dn = np.arange(down.shape[1]) * 0.1
    assert (up[0] @ levels_up) >= 3.0 >= (down[0] @ levels_dn)  # rounding up / down moves the mean that way
    with pytest.raises(ValueError, match="rounding"):
        nx.lattice_pmf(np.ones(1), np.zeros(1), 1.0, 5, "nearest")


# ------------------------------------------------------------------------------------------------ properties


@PROPERTY_SETTINGS
@given(chains(max_states=8))
def test_spend_decompositions(spec: Spec) -> None:
    chain = spec.chain()
    m = spec.Q.shape[0]
    c = np.linspace(0.5, 2.0, m)
    v = np.linspace(0.0, 1.0, m)
    r = chain.accumulated_cost(c, v)
    assert r.mean_success + r.mean_failure == pytest.approx(r.mean, rel=1e-9, abs=1e-12)
    assert r.per_state_spend.sum() == pytest.approx(r.mean, rel=1e-9, abs=1e-12)
    assert r.per_state_failed_spend.sum() == pytest.approx(r.mean_failure, rel=1e-9, abs=1e-12)
    assert_allclose(r.per_state_success_spend + r.per_state_failed_spend, r.per_state_spend, rtol=1e-9, atol=1e-12)
    assert r.second is not None and r.second_success is not None and r.second_failure is not None
    assert r.second_success + r.second_failure == pytest.approx(r.second, rel=1e-9, abs=1e-12)
    assert r.second >= r.mean**2 * (1 - 1e-9) - 1e-12
    # linear in the costs: doubling every cost doubles the mean and quadruples the second moment (with 4v)
    r2 = chain.accumulated_cost(2 * c, 4 * v)
    assert r2.mean == pytest.approx(2 * r.mean, rel=1e-9, abs=1e-12)
    assert r2.second == pytest.approx(4 * r.second, rel=1e-9, abs=1e-12)


def test_mean_preserving_rounding_lies_between_the_bounds_and_is_closer() -> None:
    """Rounding every cost to a neighbouring lattice point with the mean kept lies between the up and down bounds
    (pathwise between them) and, on a coarse lattice, nearer the fine-lattice curve than their midpoint."""
    chain = random_chain(8, 5)
    rng = np.random.default_rng(8)
    c = rng.uniform(1.0, 4.0, 5)
    v = rng.uniform(0.1, 3.0, 5)
    B = 60.0

    def curve(K: int, rounding: str) -> np.ndarray:
        return nx.budget_reliability(chain.Q, chain.R_success, chain.pi0, nx.lattice_pmf(c, v, B / K, K, rounding), K)

    fine = 0.5 * (curve(4000, "up") + curve(4000, "down"))[::40]
    lo, hi, mean = curve(100, "up"), curve(100, "down"), curve(100, "mean")
    assert (lo <= mean + 1e-12).all() and (mean <= hi + 1e-12).all()
    assert np.max(np.abs(mean - fine)) < np.max(np.abs(0.5 * (lo + hi) - fine))
    pmf = nx.lattice_pmf(c, v, 0.5, 400, "mean")
    assert np.allclose(pmf.sum(axis=1), 1.0, atol=1e-9)
    assert np.allclose(pmf @ (0.5 * np.arange(pmf.shape[1])), c, rtol=1e-6)  # the mean is kept


def test_lattice_gamma_law_is_scipy_stats_gamma_bit_for_bit() -> None:
    """lattice_pmf evaluates the gamma CDF and quantile with scipy.special (gammainc(a, x/scale), gammaincinv(a, q)
    scale) instead of scipy.stats.gamma: the same numbers exactly, on the shapes and scales cost data give (tiny
    means, huge variances, near-deterministic costs) and at the lattice edges, 0 included."""
    from scipy.special import gammainc, gammaincinv
    from scipy.stats import gamma

    rng = np.random.default_rng(7)
    mu = np.concatenate([rng.lognormal(-6, 3, 200), [1e-9, 1.0, 1e6]])
    sd2 = mu * mu * np.concatenate([rng.lognormal(0, 3, 200), [1e-6, 1.0, 1e4]])
    shape, scale = mu * mu / sd2, sd2 / mu
    top = gamma.ppf(1.0 - 1e-12, shape, scale=scale)
    assert np.array_equal(gammaincinv(shape, 1.0 - 1e-12) * scale, top)
    edges = np.linspace(0.0, 1.0, 257)[None, :] * top[:, None]
    assert np.array_equal(gammainc(shape[:, None], edges / scale[:, None]),
                          gamma.cdf(edges, shape[:, None], scale=scale[:, None]))
    assert np.array_equal(gammainc(shape[:, None] + 1.0, edges / scale[:, None]),
                          gamma.cdf(edges, shape[:, None] + 1.0, scale=scale[:, None]))
