"""Golden values: hand-checkable chains with exact or published answers.

Sources: the 3-state example of Tran-Truong & Le (2026) (docs/numerics.md §9), a 2-state PRISM model and a
five-state oracle chain with exact rational answers, a sanity walk x ← a ↔ b → y, and the SS5 artifact regression.
Exact values are rationals derived by hand / with ``fractions`` below; each is also checked to round to the
6-decimal figure printed in the spec table, so a typo in either place shows up.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction as Fr
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from tracetochain import AbsorbingChain

# --------------------------------------------------------------------------------------------- helpers


def exact_reliability(Q: list[list[Fr]], r_plus: list[Fr], s0: int, horizon: int) -> list[Fr]:
    """R(0..horizon) from state s0 in exact rational arithmetic: R(d) = e_{s0}ᵀ Σ_{t<d} Q^t r⊕."""
    m = len(Q)
    pi = [Fr(int(i == s0)) for i in range(m)]
    out = [Fr(0)]
    for _ in range(horizon):
        out.append(out[-1] + sum(p * r for p, r in zip(pi, r_plus, strict=True)))
        pi = [sum(pi[i] * Q[i][j] for i in range(m)) for j in range(m)]
    return out


def fr_matrix(rows: list[list[str]]) -> list[list[Fr]]:
    return [[Fr(x) for x in row] for row in rows]


# --------------------------------------------------------------------------------------------- 3-state

Q3 = [[0.5, 0.3, 0.0], [0.0, 0.4, 0.3], [0.0, 0.0, 0.6]]
RS3 = [0.1, 0.2, 0.3]
RF3 = [0.1, 0.1, 0.1]

# Exact forms of the golden table (docs/numerics.md §9) (upper-triangular Q, so N is easy to do by hand).
N3 = np.array([[2.0, 1.0, 3 / 4], [0.0, 5 / 3, 5 / 4], [0.0, 0.0, 5 / 2]])
R3_0_TO_7 = [0.0, 0.1, 0.21, 0.316, 0.4056, 0.47476, 0.524916, 0.5597236]
H3 = np.array([5 / 8, 17 / 24, 3 / 4])
G3 = np.array([3 / 8, 7 / 24, 1 / 4])
Z3 = np.array([2.0, 1.0, 3 / 4])
T3 = np.array([15 / 4, 35 / 12, 5 / 2])
VAR3 = np.array([325 / 48, 655 / 144, 15 / 4])
MEAN_SUCC3 = 121 / 30
MEAN_FAIL3 = 59 / 18
SHARES3 = np.array([8 / 15, 4 / 15, 1 / 5])


@pytest.fixture(scope="module")
def chain3() -> AbsorbingChain:
    return AbsorbingChain(Q3, RS3, RF3, pi0=0, state_names=["plan", "act", "verify"])


def test_exact_forms_match_the_printed_table() -> None:
    """The rationals above are the spec's 6-decimal table entries (docs/numerics.md §9)."""
    printed = {
        "N[1,1]": (N3[1, 1], 1.666667),
        "h1": (H3[1], 0.708333),
        "t1": (T3[1], 2.916667),
        "var0": (VAR3[0], 6.770833),
        "var1": (VAR3[1], 4.548611),
        "var2": (VAR3[2], 3.75),
        "E[T|succ]": (MEAN_SUCC3, 4.033333),
        "E[T|fail]": (MEAN_FAIL3, 3.277778),
        "share0": (SHARES3[0], 0.533333),
        "share1": (SHARES3[1], 0.266667),
        "share2": (SHARES3[2], 0.2),
    }
    for key, (exact, shown) in printed.items():
        assert round(float(exact), 6) == shown, key
    exact_r = exact_reliability(fr_matrix([["1/2", "3/10", "0"], ["0", "2/5", "3/10"], ["0", "0", "3/5"]]),
                                [Fr(1, 10), Fr(1, 5), Fr(3, 10)], 0, 7)
    assert [float(x) for x in exact_r] == R3_0_TO_7


def test_fundamental_matrix_rows_via_expected_visits(chain3: AbsorbingChain) -> None:
    for i in range(3):
        assert_allclose(chain3.with_changes(pi0=i).expected_visits(), N3[i], rtol=0, atol=1e-9)
    # Same start given by a basis vector instead of an index.
    for i in range(3):
        assert_allclose(chain3.with_changes(pi0=np.eye(3)[i]).expected_visits(), N3[i], rtol=0, atol=1e-9)


def test_reliability_curve(chain3: AbsorbingChain) -> None:
    rel = chain3.reliability(7)
    assert rel.shape == (8,)
    assert rel[0] == 0.0
    assert_allclose(rel, R3_0_TO_7, rtol=0, atol=1e-9)
    sw = chain3.sweep(7)
    assert_allclose(sw.reliability, R3_0_TO_7, rtol=0, atol=1e-9)
    assert_allclose(np.cumsum(sw.success_pmf), R3_0_TO_7, rtol=0, atol=1e-12)
    assert_allclose(sw.residual, 0.625 - np.array(R3_0_TO_7), rtol=0, atol=1e-9)
    assert_allclose(sw.survival[:3], [1.0, 0.8, 0.61], rtol=0, atol=1e-12)


def test_absorption_and_visits(chain3: AbsorbingChain) -> None:
    assert chain3.r_inf == pytest.approx(0.625, abs=1e-9)
    assert chain3.failure_probability == pytest.approx(0.375, abs=1e-9)
    assert_allclose(chain3.success_probabilities, H3, rtol=0, atol=1e-9)
    assert_allclose(chain3.failure_probabilities, G3, rtol=0, atol=1e-9)
    B = chain3.absorption_probabilities()
    assert B.shape == (3, 2)
    assert_allclose(B, np.column_stack([H3, G3]), rtol=0, atol=1e-9)
    assert_allclose(chain3.expected_visits(), Z3, rtol=0, atol=1e-9)
    assert chain3.spectral_radius() == pytest.approx(0.6, abs=1e-9)


def test_steps_moments(chain3: AbsorbingChain) -> None:
    assert chain3.mean_steps() == pytest.approx(3.75, abs=1e-9)
    for i in range(3):
        c = chain3.with_changes(pi0=np.eye(3)[i])
        assert c.mean_steps() == pytest.approx(T3[i], abs=1e-9), i
        assert c.steps_variance() == pytest.approx(VAR3[i], abs=1e-9), i
    assert chain3.mean_steps_given_success() == pytest.approx(MEAN_SUCC3, abs=1e-9)
    assert chain3.mean_steps_given_failure() == pytest.approx(MEAN_FAIL3, abs=1e-9)
    # The two conditional means average back to E[T].
    mixed = 0.625 * chain3.mean_steps_given_success() + 0.375 * chain3.mean_steps_given_failure()
    assert mixed == pytest.approx(chain3.mean_steps(), abs=1e-12)


def test_failure_attribution_and_sensitivities(chain3: AbsorbingChain) -> None:
    assert_allclose(chain3.failure_attribution(), SHARES3, rtol=0, atol=1e-9)
    assert_allclose(chain3.vulnerability(), RF3, rtol=0, atol=0)
    assert_allclose(chain3.sensitivity_R_success(), Z3, rtol=0, atol=1e-9)
    assert_allclose(chain3.sensitivity_Q(), np.outer(Z3, H3), rtol=0, atol=1e-9)


def test_pass_k(chain3: AbsorbingChain) -> None:
    assert_allclose(chain3.pass_hat_k([1, 2, 5]), [0.625, 0.625**2, 0.625**5], rtol=1e-12)
    assert_allclose(chain3.pass_at_k([1, 3]), [0.625, 1 - 0.375**3], rtol=1e-12)


def test_conditional_cdf(chain3: AbsorbingChain) -> None:
    assert_allclose(chain3.success_conditional_cdf(7), np.array(R3_0_TO_7) / 0.625, rtol=0, atol=1e-9)


@pytest.mark.parametrize("delta", [0.3, 0.1, 0.01, 1e-3, 1e-6])
def test_step_budget_exact_is_smallest_horizon(chain3: AbsorbingChain, delta: float) -> None:
    sb = chain3.step_budget(delta)
    assert sb.delta == delta
    assert sb.exact is not None
    d = sb.exact
    rel = chain3.reliability(d)
    assert chain3.r_inf - rel[d] <= delta
    if d > 0:
        assert chain3.r_inf - rel[d - 1] > delta
    # Independent exact check in rational arithmetic: R∞ = 5/8 exactly.
    exact_r = exact_reliability(fr_matrix([["1/2", "3/10", "0"], ["0", "2/5", "3/10"], ["0", "0", "3/5"]]),
                                [Fr(1, 10), Fr(1, 5), Fr(3, 10)], 0, d + 1)
    gaps = [Fr(5, 8) - r for r in exact_r]
    assert min(k for k, g in enumerate(gaps) if g <= Fr(delta)) == d


def test_step_budget_kappa_is_computed(chain3: AbsorbingChain) -> None:
    sb = chain3.step_budget(0.01)
    assert sb.exact == 12
    assert sb.spectral_radius == pytest.approx(0.6, abs=1e-12)
    assert sb.diagonalizable
    assert sb.kappa is not None
    # Q is upper-triangular and not normal: κ∞(V) must be computed from the eigenvectors, not taken as 1.
    _, V = np.linalg.eig(np.array(Q3))
    kappa = np.linalg.norm(V, np.inf) * np.linalg.norm(np.linalg.inv(V), np.inf)
    assert kappa > 2.0
    assert sb.kappa == pytest.approx(kappa, rel=1e-9)
    # Prop. 8: d*(δ) = ⌈log(κ ‖N R⊕‖∞ / δ) / (−log ρ)⌉; it must be a valid (conservative) horizon.
    expected_bound = math.ceil(math.log(kappa * 0.75 / 0.01) / -math.log(0.6))
    assert sb.bound == expected_bound
    assert sb.bound >= sb.exact
    assert chain3.r_inf - chain3.reliability(sb.bound)[-1] <= 0.01
    # With κ = 1 (the artifact's shortcut) the horizon would be smaller; ours must not be that.
    assert sb.bound > math.ceil(math.log(0.75 / 0.01) / -math.log(0.6))


# --------------------------------------------------------------------------------------------- 2-state


@pytest.fixture(scope="module")
def chain2() -> AbsorbingChain:
    return AbsorbingChain([[0.2, 0.7], [0.3, 0.0]], [0.0, 0.6], [0.1, 0.1], pi0=0,
                          state_names=["plan", "act"])


def test_two_state_prism_model(chain2: AbsorbingChain) -> None:
    assert chain2.r_inf == pytest.approx(42 / 59, rel=1e-12, abs=0)
    assert chain2.failure_probability == pytest.approx(17 / 59, rel=1e-12, abs=0)
    assert chain2.mean_steps() == pytest.approx(170 / 59, rel=1e-12, abs=0)
    rel = chain2.reliability(10)
    assert rel[10] == pytest.approx(0.708181341, rel=1e-12, abs=0)
    exact = exact_reliability(fr_matrix([["1/5", "7/10"], ["3/10", "0"]]), [Fr(0), Fr(3, 5)], 0, 10)
    assert exact[10] == Fr(708181341, 10**9)
    assert_allclose(rel, [float(x) for x in exact], rtol=1e-12, atol=1e-15)


# --------------------------------------------------------------------------------------------- 5-state

Q5 = [[0.0, 0.6, 0.2], [0.1, 0.3, 0.4], [0.0, 0.3, 0.2]]
RS5 = [0.1, 0.1, 0.3]
RF5 = [0.1, 0.1, 0.2]


@pytest.fixture(scope="module")
def chain5() -> AbsorbingChain:
    return AbsorbingChain(Q5, RS5, RF5, pi0=0, state_names=["start", "work", "verify"])


def test_five_state_oracle_chain(chain5: AbsorbingChain) -> None:
    assert chain5.r_inf == pytest.approx(106 / 193, rel=1e-12, abs=0)
    assert chain5.failure_probability == pytest.approx(87 / 193, rel=1e-12, abs=0)
    assert chain5.mean_steps() == pytest.approx(680 / 193, rel=1e-12, abs=0)
    rel = chain5.reliability(20)
    exact = exact_reliability(
        fr_matrix([["0", "3/5", "1/5"], ["1/10", "3/10", "2/5"], ["0", "3/10", "1/5"]]),
        [Fr(1, 10), Fr(1, 10), Fr(3, 10)], 0, 20,
    )
    assert exact[1] == Fr(1, 10)
    assert exact[5] == Fr(45316, 100000)
    assert abs(float(exact[20]) - 0.5490039823850) < 1e-12
    assert rel[1] == pytest.approx(0.1, abs=1e-12)
    assert rel[5] == pytest.approx(0.45316, abs=1e-12)
    assert rel[20] == pytest.approx(0.5490039823850, abs=1e-12)
    assert_allclose(rel, [float(x) for x in exact], rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------------------- sanity walk


def test_sanity_walk() -> None:
    """x ← a ↔ b → y, every move 1/2, start a: P(x) = 2/3, E[T|x] = 5/3, E[T|y] = 8/3."""
    walk = AbsorbingChain([[0.0, 0.5], [0.5, 0.0]], R_success=[0.5, 0.0], R_failure=[0.0, 0.5], pi0=0,
                          state_names=["a", "b"])
    assert walk.r_inf == pytest.approx(2 / 3, abs=1e-12)
    assert walk.failure_probability == pytest.approx(1 / 3, abs=1e-12)
    assert walk.mean_steps_given_success() == pytest.approx(5 / 3, abs=1e-12)
    assert walk.mean_steps_given_failure() == pytest.approx(8 / 3, abs=1e-12)
    # E[T] = (2/3)(5/3) + (1/3)(8/3) = 2.
    assert walk.mean_steps() == pytest.approx(2.0, abs=1e-12)


# ---------------------------------------------------------------------------------------- SS5 artifact

SS5_R20 = [0.09708371, 0.18028716, 0.33577087, 0.28037973, 0.21881605]
_ARTIFACT_REL = Path("../shared/data/tracetochain-artifact/synthetic/prism_models")


def _prism_dir() -> Path:
    for base in (Path.cwd(), Path(__file__).resolve().parents[2]):
        d = base / _ARTIFACT_REL
        if d.is_dir():
            return d
    pytest.skip(f"artifact PRISM models not found at {_ARTIFACT_REL}")


_CMD = re.compile(r"^\s*\[\]\s*s\s*=\s*(\d+)\s*->\s*(.+);\s*$")
_UPD = re.compile(r"^\s*([0-9.eE+-]+)\s*:\s*\(\s*s'\s*=\s*(\d+)\s*\)\s*$")


def _int_group(pattern: str, text: str) -> int:
    match = re.search(pattern, text)
    assert match, f"pattern {pattern!r} not found in the PRISM model"
    return int(match.group(1))


def parse_prism_chain(text: str) -> tuple[AbsorbingChain, list[list[float]]]:
    """Parse the SS5 exporter's PRISM module (one variable ``s``, label "success", absorbing self-loops).

    The 8-decimal probabilities sum to 1 only within ~1e−8; R(d) depends on Q and R⊕ alone, so the rounding
    slack is put into the failure exit (which leaves R(d) exactly as written in the file).
    """
    n_states = _int_group(r"s\s*:\s*\[0\.\.(\d+)\]", text) + 1
    init = _int_group(r"init\s+(\d+)", text)
    success = _int_group(r'label\s+"success"\s*=\s*s\s*=\s*(\d+)', text)
    P = [[0.0] * n_states for _ in range(n_states)]
    for line in text.splitlines():
        mt = _CMD.match(line)
        if not mt:
            continue
        i = int(mt.group(1))
        for upd in mt.group(2).split("+"):
            mu = _UPD.match(upd)
            assert mu, f"cannot parse update {upd!r}"
            P[i][int(mu.group(2))] += float(mu.group(1))
    absorbing = [i for i in range(n_states) if P[i][i] == 1.0]
    assert success in absorbing and len(absorbing) == 2
    failure = next(i for i in absorbing if i != success)
    transient = [i for i in range(n_states) if i not in absorbing]
    Q = [[P[i][j] for j in transient] for i in transient]
    rs = [P[i][success] for i in transient]
    rf = [1.0 - sum(Q[k]) - rs[k] for k in range(len(transient))]
    assert_allclose(rf, [P[i][failure] for i in transient], atol=1e-7)
    return AbsorbingChain(Q, rs, rf, pi0=transient.index(init)), [P[i] for i in transient]


@pytest.mark.parametrize("idx", range(5))
def test_ss5_prism_models_r20(idx: int) -> None:
    d = _prism_dir()
    pm = d / f"chain_{idx:02d}.pm"
    if not pm.is_file():
        pytest.skip(f"{pm} absent")
    pctl = pm.with_suffix(".pctl")
    if pctl.is_file():
        assert re.search(r"F\s*<=\s*20\b", pctl.read_text())
    chain, raw_rows = parse_prism_chain(pm.read_text(encoding="utf-8"))
    assert chain.n_states == 5
    # The file's own rows are stochastic to its 8-decimal rounding (so the parse picked up every update).
    assert_allclose([sum(r) for r in raw_rows], 1.0, atol=1e-7)
    r20 = chain.reliability(20)[20]
    assert r20 == pytest.approx(SS5_R20[idx], abs=5e-8)
    # The same value by explicit matrix powers (independent of the sweep).
    Q, rs = np.array(chain.Q), np.array(chain.R_success)
    acc, Qt = np.zeros(5), np.eye(5)
    for _ in range(20):
        acc += Qt @ rs
        Qt = Qt @ Q
    assert r20 == pytest.approx(acc[int(np.argmax(chain.pi0))], abs=1e-13)
    assert_array_equal(chain.reliability(20)[:1], [0.0])
