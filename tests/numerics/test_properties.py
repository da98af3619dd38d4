"""Property tests on random substochastic chains, and seeded Monte Carlo checks of the horizon convention.

Random chains are count-based (every entry c/total, as an unsmoothed MLE would give) with 1..12 states,
random sparsity and at least one exit count per row, so every state can absorb and ρ(Q) ≤ 1 − min exit < 1.
Hypothesis runs derandomized (fixed seed) so the suite is deterministic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal

import tracetochain as tt
from tracetochain import AbsorbingChain

PROPERTY_SETTINGS = settings(
    max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)


@dataclass(frozen=True)
class Spec:
    Q: np.ndarray
    rs: np.ndarray
    rf: np.ndarray
    pi0: np.ndarray | int

    def chain(self) -> AbsorbingChain:
        return AbsorbingChain(self.Q, self.rs, self.rf, self.pi0)

    @property
    def pi0_vector(self) -> np.ndarray:
        if isinstance(self.pi0, int):
            return np.eye(self.Q.shape[0])[self.pi0]
        return np.asarray(self.pi0)

    def converge_horizon(self, tol: float = 1e-15) -> int:
        """A horizon after which survival ≤ ‖Q‖∞^D ≤ tol (ρ ≤ ‖Q‖∞ = 1 − min exit)."""
        norm = float(self.Q.sum(axis=1).max())
        if norm == 0.0:
            return 2
        return math.ceil(math.log(tol) / math.log(norm)) + 1


@st.composite
def chains(draw: st.DrawFn, max_states: int = 12) -> Spec:
    m = draw(st.integers(1, max_states), label="m")
    sparsity = draw(st.integers(0, 4), label="sparsity")  # more negative lower bound → more zero entries
    entry = st.integers(-3 * sparsity, 9).map(lambda x: max(x, 0))
    counts = np.zeros((m, m + 2), dtype=np.int64)
    for i in range(m):
        row = draw(st.lists(entry, min_size=m + 2, max_size=m + 2))
        if row[m] + row[m + 1] == 0:  # guarantee an exit
            row[draw(st.sampled_from([m, m + 1]))] = draw(st.integers(1, 3))
        counts[i] = row
    P = counts / counts.sum(axis=1, keepdims=True)
    Q, rs, rf = P[:, :m], P[:, m], P[:, m + 1]
    if draw(st.booleans(), label="pi0 is a start index"):
        pi0: np.ndarray | int = draw(st.integers(0, m - 1))
    else:
        w = np.array(draw(st.lists(st.integers(0, 5), min_size=m, max_size=m)), dtype=float)
        if w.sum() == 0:
            w[0] = 1.0
        pi0 = w / w.sum()
    return Spec(Q, rs, rf, pi0)


def dense_reference(spec: Spec) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """h, g and z by plain dense solves (an independent code path)."""
    A = np.eye(spec.Q.shape[0]) - spec.Q
    h = np.linalg.solve(A, spec.rs)
    g = np.linalg.solve(A, spec.rf)
    z = np.linalg.solve(A.T, spec.pi0_vector)
    return h, g, z


# ---------------------------------------------------------------------------------- horizon properties


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(chains())
def test_reliability_monotone_and_converges(spec: Spec) -> None:
    c = spec.chain()
    D = spec.converge_horizon()
    sw = c.sweep(D)
    rel = sw.reliability
    assert rel.shape == (D + 1,)
    assert rel[0] == 0.0
    assert np.all(np.diff(rel) >= 0.0), "R(d) must be non-decreasing"
    assert np.all(rel <= c.r_inf + 1e-12)
    # Exact tail identity R(d) + (R∞ − R(d)) = R∞, with R∞ − R(d) computed as π_d·h.
    assert_allclose(rel + sw.residual, c.r_inf, rtol=0, atol=1e-12)
    assert sw.residual[-1] <= 1e-12
    assert abs(rel[-1] - c.r_inf) <= 1e-12
    # The tail bound: success still to come is at most the mass still transient.
    assert np.all(sw.residual <= sw.survival + 1e-15)
    assert np.all(np.diff(sw.survival) <= 1e-15)
    assert sw.survival[0] == pytest.approx(1.0, abs=1e-15)
    # Survival closes the books: S(d) = 1 − Σ_{k≤d} (f⊕(k) + f⊖(k)).
    assert_allclose(sw.survival, 1.0 - np.cumsum(sw.success_pmf + sw.failure_pmf), rtol=0, atol=1e-12)
    # success_pmf is a defective law summing to R∞; failure_pmf sums to 1 − R∞.
    assert sw.success_pmf[0] == 0.0 and sw.failure_pmf[0] == 0.0
    assert np.all(sw.success_pmf >= 0.0) and np.all(sw.failure_pmf >= 0.0)
    assert sw.success_pmf.sum() == pytest.approx(c.r_inf, abs=1e-12)
    assert sw.failure_pmf.sum() == pytest.approx(c.failure_probability, abs=1e-12)
    assert_array_equal(c.success_pmf(D), sw.success_pmf)
    assert_array_equal(c.reliability(D), rel)


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(chains())
def test_reliability_matches_matrix_powers(spec: Spec) -> None:
    """R(d) = π0 Σ_{t<d} Q^t r⊕ (Tran-Truong & Le 2026, Prop. 1) by explicit powers, for short horizons."""
    c = spec.chain()
    pi0 = spec.pi0_vector
    expected = [0.0]
    acc, row = 0.0, pi0.copy()
    for _ in range(12):
        acc += row @ spec.rs
        expected.append(acc)
        row = row @ spec.Q
    assert_allclose(c.reliability(12), expected, rtol=0, atol=1e-13)


# ------------------------------------------------------------------------------------------ absorption


@PROPERTY_SETTINGS
@given(chains())
def test_absorption_probabilities(spec: Spec) -> None:
    c = spec.chain()
    B = c.absorption_probabilities()
    assert B.shape == (spec.Q.shape[0], 2)
    assert np.all((B >= 0.0) & (B <= 1.0))
    assert_allclose(B.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    h, g, z = dense_reference(spec)
    assert_allclose(B[:, 0], h, rtol=1e-9, atol=1e-12)
    assert_allclose(B[:, 1], g, rtol=1e-9, atol=1e-12)
    assert_allclose(c.expected_visits(), z, rtol=1e-9, atol=1e-12)
    assert c.r_inf == pytest.approx(spec.pi0_vector @ h, rel=1e-9, abs=1e-12)
    assert c.r_inf + c.failure_probability == pytest.approx(1.0, abs=1e-12)


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(chains())
def test_failure_attribution_sums_to_one(spec: Spec) -> None:
    c = spec.chain()
    shares = c.failure_attribution()
    assert np.all(shares >= 0.0)
    z = c.expected_visits()
    # 1 − R∞ = Σ z_i r⊖_i exactly (docs/numerics.md §3).
    assert float(z @ spec.rf) == pytest.approx(c.failure_probability, abs=1e-12)
    if c.failure_probability > 1e-12:
        assert shares.sum() == pytest.approx(1.0, abs=1e-12)
        assert_allclose(shares, z * spec.rf / c.failure_probability, rtol=1e-9, atol=1e-12)
    else:
        assert_array_equal(shares, 0.0)


# --------------------------------------------------------------------------------------- sensitivities

EPS = 1e-6
T = TypeVar("T")


def _spread(items: list[T], k: int = 6) -> list[T]:
    """At most k items, evenly spread over the list (keeps each example cheap)."""
    if len(items) <= k:
        return items
    step = len(items) / k
    return [items[int(i * step)] for i in range(k)]


def _fd_tolerance(c: AbsorbingChain) -> float:
    # Rounding in R∞ is ~1e-16·‖N‖; divided by 2ε. Truncation is O(ε²‖N‖³).
    scale = float(np.max(c.expected_visits()) + c.mean_steps())
    return 1e-7 * scale + 1e-12 * scale**3


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(chains())
def test_sensitivity_Q_central_differences(spec: Spec) -> None:
    """Row-preserving move: Q_ij ± ε with R⊖_i ∓ ε; its derivative is ∂R∞/∂Q_ij = z_i h_j (Caswell 2013)."""
    c = spec.chain()
    S = c.sensitivity_Q()
    m = spec.Q.shape[0]
    assert S.shape == (m, m)
    pairs = [(i, j) for i in range(m) for j in range(m) if spec.Q[i, j] > 2 * EPS and spec.rf[i] > 2 * EPS]
    for i, j in _spread(pairs):
        vals = []
        for sign in (+1, -1):
            Qp = spec.Q.copy()
            rfp = spec.rf.copy()
            Qp[i, j] += sign * EPS
            rfp[i] -= sign * EPS
            vals.append(c.with_changes(Q=Qp, R_failure=rfp).r_inf)
        fd = (vals[0] - vals[1]) / (2 * EPS)
        assert fd == pytest.approx(S[i, j], abs=_fd_tolerance(c)), (i, j)


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(chains())
def test_sensitivity_R_success_central_differences(spec: Spec) -> None:
    c = spec.chain()
    S = c.sensitivity_R_success()
    m = spec.Q.shape[0]
    assert S.shape == (m,)
    states = [i for i in range(m) if spec.rs[i] > 2 * EPS and spec.rf[i] > 2 * EPS]
    for i in _spread(states):
        vals = []
        for sign in (+1, -1):
            rsp = spec.rs.copy()
            rfp = spec.rf.copy()
            rsp[i] += sign * EPS
            rfp[i] -= sign * EPS
            vals.append(c.with_changes(R_success=rsp, R_failure=rfp).r_inf)
        fd = (vals[0] - vals[1]) / (2 * EPS)
        assert fd == pytest.approx(S[i], abs=_fd_tolerance(c)), i


def test_sensitivity_fd_on_golden_chain_all_entries() -> None:
    """Deterministic companion: every eligible entry of the 3-state example, tighter tolerance."""
    Q = np.array([[0.5, 0.3, 0.0], [0.0, 0.4, 0.3], [0.0, 0.0, 0.6]])
    rs = np.array([0.1, 0.2, 0.3])
    rf = np.array([0.1, 0.1, 0.1])
    c = AbsorbingChain(Q, rs, rf, pi0=[0.5, 0.25, 0.25])
    S = c.sensitivity_Q()
    eps = 1e-5
    for i in range(3):
        for j in range(3):
            if Q[i, j] == 0.0:
                continue
            E = np.zeros((3, 3))
            E[i, j] = eps
            up = c.with_changes(Q=Q + E, R_failure=rf - E.sum(axis=1))
            dn = c.with_changes(Q=Q - E, R_failure=rf + E.sum(axis=1))
            assert (up.r_inf - dn.r_inf) / (2 * eps) == pytest.approx(S[i, j], abs=1e-8)
    Sr = c.sensitivity_R_success()
    for i in range(3):
        up = c.with_changes(R_success=rs + eps * np.eye(3)[i], R_failure=rf - eps * np.eye(3)[i])
        dn = c.with_changes(R_success=rs - eps * np.eye(3)[i], R_failure=rf + eps * np.eye(3)[i])
        assert (up.r_inf - dn.r_inf) / (2 * eps) == pytest.approx(Sr[i], abs=1e-8)


# --------------------------------------------------------------------------------------------- moments


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(chains())
def test_steps_moments(spec: Spec) -> None:
    c = spec.chain()
    var = c.steps_variance()
    assert var >= 0.0
    # Independent route: discrete phase-type factorial moment, Var T = 2 α Q N² 1 + E[T] − E[T]² (Neuts 1981).
    A = np.eye(spec.Q.shape[0]) - spec.Q
    t = np.linalg.solve(A, np.ones(spec.Q.shape[0]))
    N2_1 = np.linalg.solve(A, t)
    alpha = spec.pi0_vector
    mean = float(alpha @ t)
    dph_var = 2.0 * float(alpha @ spec.Q @ N2_1) + mean - mean**2
    assert c.mean_steps() == pytest.approx(mean, rel=1e-9)
    assert var == pytest.approx(max(dph_var, 0.0), rel=1e-7, abs=1e-9 * max(1.0, mean**2))
    # E[T] = Σ_{d≥0} Pr[T > d].
    sw = c.sweep(spec.converge_horizon())
    assert float(sw.survival.sum()) == pytest.approx(c.mean_steps(), rel=1e-9)
    # E[T | success] = Σ d f⊕(d) / R∞ when success is possible.
    if c.r_inf > 1e-9:
        d = np.arange(sw.success_pmf.size)
        assert c.mean_steps_given_success() == pytest.approx(float(d @ sw.success_pmf) / c.r_inf, rel=1e-8)


# --------------------------------------------------------------------------------------- serialisation


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(chains())
def test_json_round_trip_is_bit_identical(spec: Spec) -> None:
    c = spec.chain()
    back = AbsorbingChain.from_json(c.to_json())
    for name in ("Q", "R_success", "R_failure", "pi0"):
        a, b = getattr(c, name), getattr(back, name)
        assert a.dtype == b.dtype and a.shape == b.shape
        assert_array_equal(a, b)
        assert a.tobytes() == b.tobytes(), name
    assert back.state_names == c.state_names
    assert back.r_inf == c.r_inf
    assert_array_equal(back.reliability(10), c.reliability(10))
    again = AbsorbingChain.from_dict(back.to_dict())
    assert again.to_json() == c.to_json()


def test_json_round_trip_keeps_pi0_bits() -> None:
    """Deterministic instance of the property above: π0 = (1, 4, 1)/6 sums to 1 − 2⁻⁵³ in floating point."""
    pi0 = np.array([1.0, 4.0, 1.0]) / 6.0
    c = AbsorbingChain(np.zeros((3, 3)), [0.5, 0.5, 0.5], [0.5, 0.5, 0.5], pi0)
    back = AbsorbingChain.from_json(c.to_json())
    assert back.pi0.tobytes() == c.pi0.tobytes(), (c.pi0.tolist(), back.pi0.tolist())


# ----------------------------------------------------------------------------------------- Monte Carlo

N_MC = 200_000

MC_CHAINS = {
    "golden3": (
        [[0.5, 0.3, 0.0], [0.0, 0.4, 0.3], [0.0, 0.0, 0.6]], [0.1, 0.2, 0.3], [0.1, 0.1, 0.1], 0,
    ),
    "oracle5": (
        [[0.0, 0.6, 0.2], [0.1, 0.3, 0.4], [0.0, 0.3, 0.2]], [0.1, 0.1, 0.3], [0.1, 0.1, 0.2], 0,
    ),
    "prism2_pi0": (
        [[0.2, 0.7], [0.3, 0.0]], [0.0, 0.6], [0.1, 0.1], [0.3, 0.7],
    ),
    "retry_loop": (
        [[0.9, 0.05, 0.0, 0.0], [0.0, 0.0, 0.8, 0.0], [0.3, 0.0, 0.0, 0.5], [0.0, 0.0, 0.0, 0.0]],
        [0.02, 0.0, 0.1, 0.7], [0.03, 0.2, 0.1, 0.3], [0.25, 0.25, 0.25, 0.25],
    ),
}


def _within_5se(observed: float, p: float, n: int, what: str) -> None:
    se = math.sqrt(max(p * (1 - p), 1e-12) / n)
    assert abs(observed - p) <= 5 * se, f"{what}: observed {observed:.5f} vs {p:.5f} (5 SE = {5 * se:.5f})"


@pytest.mark.parametrize("name", sorted(MC_CHAINS))
def test_monte_carlo_matches_closed_forms(name: str) -> None:
    Q, rs, rf, pi0 = MC_CHAINS[name]
    c = AbsorbingChain(Q, rs, rf, pi0)
    sim = c.simulate(N_MC, seed=20240611)
    assert sim.length.shape == (N_MC,) and sim.outcome.shape == (N_MC,)
    assert set(np.unique(sim.outcome)) <= {0, 1}, "no trace should be censored at the default max_steps"
    assert sim.length.min() >= 1
    success = sim.outcome == 0
    _within_5se(float(success.mean()), c.r_inf, N_MC, "R∞")
    rel = c.reliability(25)
    for d in (1, 2, 3, 5, 8, 13, 25):
        _within_5se(float(np.mean(success & (sim.length <= d))), float(rel[d]), N_MC, f"R({d})")
    fail_cdf = np.cumsum(c.sweep(25).failure_pmf)
    for d in (1, 4, 25):
        _within_5se(float(np.mean(~success & (sim.length <= d))), float(fail_cdf[d]), N_MC, f"F({d})")
    _within_5se(float(np.mean(sim.length == 1)), float(c.pi0 @ (c.R_success + c.R_failure)), N_MC, "T = 1")
    # Mean length within 5 SE of E[T] (SE from Var T).
    se = math.sqrt(c.steps_variance() / N_MC)
    assert abs(sim.length.mean() - c.mean_steps()) <= 5 * se


@pytest.mark.parametrize(
    ("name", "D"), [("golden3", 1), ("golden3", 3), ("oracle5", 4), ("prism2_pi0", 3), ("retry_loop", 2)]
)
def test_monte_carlo_censoring_pins_horizon(name: str, D: int) -> None:
    """With max_steps = D: Pr[censored] = S(D) and Pr[success observed] = R(D) — not R(D ± 1)."""
    Q, rs, rf, pi0 = MC_CHAINS[name]
    c = AbsorbingChain(Q, rs, rf, pi0)
    sw = c.sweep(D + 1)
    sim = c.simulate(N_MC, seed=7 + D, max_steps=D)
    censored = sim.outcome == 2
    assert sim.length.max() <= D
    assert np.all(sim.length[censored] == D)
    _within_5se(float(censored.mean()), float(sw.survival[D]), N_MC, f"S({D})")
    _within_5se(float(np.mean(sim.outcome == 0)), float(sw.reliability[D]), N_MC, f"R({D})")
    _within_5se(float(np.mean(sim.outcome == 1)), float(np.cumsum(sw.failure_pmf)[D]), N_MC, f"F({D})")
    # The neighbours are many SE away, so an off-by-one in either direction would fail above.
    for other in (D - 1, D + 1):
        se = math.sqrt(sw.reliability[D] * (1 - sw.reliability[D]) / N_MC)
        assert abs(sw.reliability[other] - sw.reliability[D]) > 10 * se
    # Same seed, larger cap: identical draws, so the uncensored traces agree exactly.
    full = c.simulate(N_MC, seed=7 + D)
    done = ~censored
    assert_array_equal(full.outcome[done], sim.outcome[done])
    assert_array_equal(full.length[done], sim.length[done])
    assert np.all(full.length[censored] > D)


@pytest.mark.parametrize("name", sorted(MC_CHAINS))
def test_record_paths_consistent(name: str) -> None:
    Q, rs, rf, pi0 = MC_CHAINS[name]
    c = AbsorbingChain(Q, rs, rf, pi0)
    n = 20_000
    # A small cap: censored traces must have paths of exactly max_steps states.
    capped = c.simulate(n, seed=5, max_steps=4, record_paths=True)
    assert capped.states is not None and capped.offsets is not None
    assert_array_equal(np.diff(capped.offsets), capped.length)
    assert capped.states.size == int(capped.length.sum())
    assert np.all(capped.length[capped.outcome == 2] == 4)
    assert_array_equal(capped.length, c.simulate(n, seed=5, max_steps=4).length)

    sim = c.simulate(n, seed=3, record_paths=True)
    plain = c.simulate(n, seed=3)
    assert_array_equal(sim.length, plain.length)
    assert_array_equal(sim.outcome, plain.outcome)
    assert not np.any(sim.outcome == 2)
    assert sim.states is not None and sim.offsets is not None
    assert sim.offsets.shape == (n + 1,)
    assert sim.offsets[0] == 0
    assert_array_equal(np.diff(sim.offsets), sim.length)
    assert sim.states.shape == (int(sim.offsets[-1]),)
    m = c.n_states
    assert sim.states.min() >= 0 and sim.states.max() < m
    Qa = np.asarray(c.Q)
    starts = sim.states[sim.offsets[:-1]]
    ends = sim.states[sim.offsets[1:] - 1]
    # Start states follow π0.
    for s in range(m):
        _within_5se(float(np.mean(starts == s)), float(c.pi0[s]), n, f"π0[{s}]")
    # Every consecutive pair inside a trace is an edge of Q, and observed frequencies estimate Q's rows.
    same_trace = np.ones(sim.states.size - 1, dtype=bool)
    same_trace[sim.offsets[1:-1] - 1] = False
    src = sim.states[:-1][same_trace]
    dst = sim.states[1:][same_trace]
    assert np.all(Qa[src, dst] > 0)
    # Absorbed traces leave from a state with a positive exit to the observed outcome.
    assert np.all(np.asarray(c.R_success)[ends[sim.outcome == 0]] > 0)
    assert np.all(np.asarray(c.R_failure)[ends[sim.outcome == 1]] > 0)
    # Steps out of state s (absorbing or not) — estimate Q[s, :] from the recorded paths.
    for s in range(m):
        leaving = int(np.sum(src == s)) + int(np.sum(ends == s))
        if leaving < 2000:
            continue
        for j in range(m):
            observed = float(np.sum((src == s) & (dst == j))) / leaving
            _within_5se(observed, float(Qa[s, j]), leaving, f"Q[{s},{j}]")


def _simulate_by_counting(Q: np.ndarray, rs: np.ndarray, rf: np.ndarray, pi0: np.ndarray, n: int,
                          rng: np.random.Generator, max_steps: int) -> tuple[np.ndarray, np.ndarray]:
    """The reference inverse-CDF draw: count the cumulative entries ≤ u (the simulator's former inner step)."""
    m = Q.shape[0]
    cum = np.cumsum(np.column_stack([Q, rs, rf]), axis=1)
    cum[:, -1] = 1.0
    c0 = np.cumsum(pi0)
    c0[-1] = 1.0
    state = np.searchsorted(c0, rng.random(n), side="right")
    length, outcome, active = np.zeros(n, np.int64), np.full(n, 2, np.int8), np.arange(n)
    for _ in range(max_steps):
        if active.size == 0:
            break
        cur = state[active]
        length[active] += 1
        nxt = (rng.random(active.size)[:, None] >= cum[cur]).sum(axis=1)
        absorbed = nxt >= m
        outcome[active[absorbed]] = np.where(nxt[absorbed] == m, 0, 1)
        active = active[~absorbed]
        state[active] = nxt[~absorbed]
    return length, outcome


@pytest.mark.parametrize(("m", "seed"), [(1, 0), (3, 1), (7, 2), (30, 3), (130, 4)])
def test_simulator_binary_search_draws_exactly_what_counting_draws(m: int, seed: int) -> None:
    """The vectorised binary search makes the same comparisons as counting, so the same seed gives the same traces
    (zero-probability columns, i.e. repeated cumulative values, included)."""
    from tracetochain.numerics import simulate_traces

    chain = tt.datasets.random_chain(m, seed=seed, rho=0.9) if m > 1 else tt.datasets.notation_chain()
    Q = chain.Q.copy()
    if m > 3:  # structural zeros (ties in the cumulative rows) in every row that keeps some transient mass
        kept = Q.copy()
        kept[:, ::3] = 0.0
        ok = kept.sum(axis=1) > 0
        Q[ok] = kept[ok] * ((1.0 - chain.R_success - chain.R_failure)[ok] / kept[ok].sum(axis=1))[:, None]
    args = (Q, chain.R_success, chain.R_failure, chain.pi0)
    got = simulate_traces(*args, 20_000, np.random.default_rng(seed), max_steps=60)
    ref_len, ref_out = _simulate_by_counting(*args, 20_000, np.random.default_rng(seed), 60)
    assert np.array_equal(got.length, ref_len) and np.array_equal(got.outcome, ref_out)
