"""ρ(Q) by strongly connected components and ARPACK agrees with the dense eigenvalues, whatever the blocks."""

from __future__ import annotations

import numpy as np
import pytest

from tracetochain.numerics.horizon import DENSE_EIGVALS_STATES, spectral_radius


def _dense(Q: np.ndarray) -> float:
    return float(np.max(np.abs(np.linalg.eigvals(Q))))


def _block(rng: np.random.Generator, n: int, mass: float, density: float) -> np.ndarray:
    """A sparse substochastic block with row mass ``mass``, irreducible through a cycle 0 → 1 → … → n − 1 → 0."""
    B = rng.uniform(0, 1, (n, n)) * (rng.uniform(0, 1, (n, n)) < density)
    B[np.arange(n), (np.arange(n) + 1) % n] += 1.0
    return mass * B / B.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("seed", range(6))
def test_components_and_arpack_agree_with_the_dense_eigenvalues(seed: int) -> None:
    """Disjoint copies (as a model with task classes compiles), blocks joined one way (block-triangular), a pure
    cycle (every eigenvalue of modulus ρ) and transient single states: ρ to 1e-10 of the dense solve, and the same
    value on every call (ARPACK starts from the same vector)."""
    rng = np.random.default_rng(seed)
    sizes = [DENSE_EIGVALS_STATES + 1 + int(rng.integers(0, 150)), int(rng.integers(20, 120)),
             DENSE_EIGVALS_STATES + 40]
    masses = rng.uniform(0.5, 0.97, len(sizes))
    m = sum(sizes) + 30
    Q = np.zeros((m, m))
    start = 0
    for n, mass in zip(sizes, masses, strict=True):
        if seed % 3 == 2 and n == sizes[-1]:  # a pure cycle: periodic, all eigenvalues on the circle of radius ρ
            Q[start + np.arange(n), start + (np.arange(n) + 1) % n] = mass
        else:
            Q[start:start + n, start:start + n] = _block(rng, n, mass, 0.05)
        if seed % 2 and start:  # a path from the previous block into this one (block-triangular, not disjoint)
            Q[start - 1, start] = 0.01
            Q[start - 1] *= mass / Q[start - 1].sum()
        start += n
    # single states with self-loops, below every block's radius (each block's rows sum to its mass, so ρ = mass)
    Q[start + np.arange(30), start + np.arange(30)] = rng.uniform(0, 0.4, 30)
    got = spectral_radius(Q)
    assert got == pytest.approx(_dense(Q), rel=1e-10, abs=1e-12)
    assert spectral_radius(Q) == got
    rows, cols = np.nonzero(Q)
    assert spectral_radius(Q, (rows, cols)) == pytest.approx(got, rel=1e-12)


def test_a_small_chain_is_solved_densely() -> None:
    rng = np.random.default_rng(1)
    Q = _block(rng, DENSE_EIGVALS_STATES, 0.8, 0.1)
    assert spectral_radius(Q) == _dense(Q)
