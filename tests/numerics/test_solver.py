"""ChainSolver above SPARSE_THRESHOLD states: iterative solves (Jacobi-preconditioned BiCGSTAB), the sparse LU only
when the iteration does not finish — equal to a dense LU of the same subtraction-free matrix."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

from tracetochain.chain import AbsorbingChain
from tracetochain.numerics import absorbing
from tracetochain.numerics.absorbing import SPARSE_THRESHOLD, ChainSolver, chain_edges


def _sparse_chain(seed: int, m: int, retry: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A random sparse chain; with ``retry`` every state also loops on itself with probability up to 0.999 (the
    retry loops that make I − Q ill-conditioned)."""
    rng = np.random.default_rng(seed)
    Q = np.where(rng.random((m, m)) < 8 / m, rng.random((m, m)), 0.0)
    np.fill_diagonal(Q, 0.0)
    rs, rf = rng.random(m) * 0.05, rng.random(m) * 0.05
    tot = Q.sum(axis=1) + rs + rf
    Q, rs, rf = Q / tot[:, None], rs / tot, rf / tot
    if retry:
        loop = rng.random(m) * 0.999
        Q, rs, rf = Q * (1 - loop)[:, None], rs * (1 - loop), rf * (1 - loop)
        Q[np.arange(m), np.arange(m)] = loop
    return Q, rs, rf


def _dense_reference(Q: np.ndarray, rs: np.ndarray, rf: np.ndarray) -> np.ndarray:
    A = -Q.copy()
    np.fill_diagonal(A, Q.sum(axis=1) - np.diag(Q) + rs + rf)
    return A


@pytest.mark.parametrize("retry", [False, True])
def test_iterative_solves_agree_with_the_dense_lu(retry: bool) -> None:
    m = SPARSE_THRESHOLD + 200
    Q, rs, rf = _sparse_chain(3, m, retry)
    solver = ChainSolver.factor(Q, rs, rf)
    assert solver._dense is None
    A = _dense_reference(Q, rs, rf)
    rhs = np.column_stack([rs, rf, np.ones(m)])
    for transposed in (False, True):
        want = scipy.linalg.solve(A.T if transposed else A, rhs)
        got = solver.solve(rhs, transposed=transposed)
        assert np.max(np.abs(got - want) / np.abs(want).max(axis=0)) < 1e-11
        one = solver.solve(rhs[:, 0], transposed=transposed)
        assert one.shape == (m,) and np.allclose(one, want[:, 0], rtol=0, atol=1e-11 * np.abs(want[:, 0]).max())
    assert solver._lu == {}  # every solve converged: the LU was never factored


def test_a_solve_the_iteration_cannot_finish_falls_back_to_the_sparse_lu(monkeypatch: pytest.MonkeyPatch) -> None:
    m = SPARSE_THRESHOLD + 100
    Q, rs, rf = _sparse_chain(5, m, True)
    monkeypatch.setattr(absorbing, "ITERATIVE_MAXITER", 1)
    solver = ChainSolver.factor(Q, rs, rf, chain_edges(Q))
    got = solver.solve(rs)
    assert "lu" in solver._lu
    want = scipy.linalg.solve(_dense_reference(Q, rs, rf), rs)
    assert np.max(np.abs(got - want)) < 1e-12 * np.abs(want).max()


def test_a_large_chains_numbers_match_the_dense_path() -> None:
    """R∞, mean steps and expected visits of a chain above the threshold, against the same chain solved densely."""
    m = SPARSE_THRESHOLD + 150
    Q, rs, rf = _sparse_chain(11, m, True)
    pi0 = np.random.default_rng(2).random(m)
    chain = AbsorbingChain(Q, rs, rf, pi0 / pi0.sum())
    A = _dense_reference(chain.Q, chain.R_success, chain.R_failure)
    h = scipy.linalg.solve(A, chain.R_success)
    assert chain.r_inf == pytest.approx(float(chain.pi0 @ h), rel=1e-12)
    assert chain.mean_steps() == pytest.approx(float(chain.pi0 @ scipy.linalg.solve(A, np.ones(m))), rel=1e-12)
    z = scipy.linalg.solve(A.T, chain.pi0)
    assert np.allclose(chain.expected_visits(), z, rtol=1e-11, atol=0)


def test_growing_sweep_is_bit_for_bit_one_sweep_to_the_longest_horizon() -> None:
    """A chain swept to 10, then 300, then 40 steps gives exactly what single sweeps to those horizons give (the
    continued sweep repeats the same operations in the same order), and its results do not alias its buffers."""
    import tracetochain as tt
    from tracetochain.numerics import forward_sweep
    from tracetochain.numerics.horizon import GrowingSweep, sweep_operator

    rng = np.random.default_rng(8)
    m = 150
    Q = rng.dirichlet(np.full(m, 0.05), size=m) * 0.97
    r_s = np.full(m, 0.01)
    chain = tt.AbsorbingChain(Q, r_s, 1.0 - Q.sum(axis=1) - r_s, 0)
    h, op = chain.success_probabilities, sweep_operator(chain.Q)
    grow = GrowingSweep(op, chain.R_success, chain.R_failure, chain.pi0, h)
    for horizon in (10, 300, 40, 300, 301):
        got = grow.to(horizon)
        want = forward_sweep(chain.Q, chain.R_success, chain.R_failure, chain.pi0, horizon, h)
        for name in ("reliability", "success_pmf", "failure_pmf", "survival", "residual"):
            assert np.array_equal(getattr(got, name), getattr(want, name)), (horizon, name)
        got.success_pmf[:] = -1.0  # a caller's edit stays in its copy
    assert np.array_equal(chain.sweep(120).reliability, forward_sweep(chain.Q, chain.R_success, chain.R_failure,
                                                                      chain.pi0, 120, h).reliability)
    with pytest.raises(ValueError, match="horizon"):
        grow.to(-1)


def test_logsumexp_rows_agrees_with_scipy() -> None:
    """The EM loops' log-sum-exp: scipy's to rounding on wide ranges, −∞ rows and single columns, no warnings."""
    from scipy.special import logsumexp

    from tracetochain.numerics.shared import logsumexp_rows

    rng = np.random.default_rng(2)
    a = rng.normal(scale=300.0, size=(400, 4))
    a[::7, 1] = -np.inf
    a[5] = -np.inf
    with np.errstate(divide="raise", invalid="raise", over="raise"):  # underflow to 0 is expected
        got = logsumexp_rows(a)
    want = logsumexp(a, axis=1)
    assert np.array_equal(np.isinf(got), np.isinf(want)) and got[5] == -np.inf
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-14, atol=1e-12)
    np.testing.assert_allclose(logsumexp_rows(a[:, :1]), a[:, 0])
    assert logsumexp_rows(np.zeros((3, 0))).tolist() == [-np.inf] * 3
    with pytest.raises(ValueError, match="2-d"):
        logsumexp_rows(np.zeros(3))
