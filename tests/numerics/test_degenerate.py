"""Degenerate and invalid chains: unreachable outcomes, closed loops, bad input, near-singular retry loops."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from tracetochain import AbsorbingChain
from tracetochain.chain._model import CHAIN_SCHEMA_VERSION
from tracetochain.exceptions import (
    ChainValidationError,
    NonAbsorbingError,
    SchemaVersionError,
    UndefinedMetricError,
)

NAMES = ("plan", "act", "verify")
Q3 = [[0.5, 0.3, 0.0], [0.0, 0.4, 0.3], [0.0, 0.0, 0.6]]
RS3 = [0.1, 0.2, 0.3]
RF3 = [0.1, 0.1, 0.1]


# --------------------------------------------------------------------------------- success unreachable


@pytest.fixture
def hopeless() -> AbsorbingChain:
    return AbsorbingChain([[0.5, 0.3], [0.2, 0.0]], [0.0, 0.0], [0.2, 0.8], pi0=0,
                          state_names=["try", "retry"])


def test_success_unreachable_gives_exact_zero(hopeless: AbsorbingChain) -> None:
    assert hopeless.r_inf == 0.0
    assert_array_equal(hopeless.success_probabilities, [0.0, 0.0])
    assert hopeless.failure_probability == pytest.approx(1.0, abs=1e-12)
    assert_array_equal(hopeless.reliability(20), np.zeros(21))
    assert_array_equal(hopeless.pass_hat_k([1, 3]), [0.0, 0.0])
    assert_array_equal(hopeless.pass_at_k([1, 3]), [0.0, 0.0])
    assert_allclose(hopeless.failure_attribution().sum(), 1.0, atol=1e-12)
    assert hopeless.mean_steps_given_failure() == pytest.approx(hopeless.mean_steps(), rel=1e-12)


def test_success_unreachable_conditional_metrics_raise(hopeless: AbsorbingChain) -> None:
    with pytest.raises(UndefinedMetricError, match="success"):
        hopeless.mean_steps_given_success()
    with pytest.raises(UndefinedMetricError, match="success"):
        hopeless.success_conditional_cdf(10)


def test_success_unreachable_from_start_only() -> None:
    """Success exists in the chain but not downstream of π0: R∞ must still be exactly 0, not ~1e-17."""
    Q = [[0.3, 0.0, 0.0], [0.1, 0.0, 0.6], [0.0, 0.0, 0.5]]
    rs = [0.0, 0.0, 0.5]
    rf = [0.7, 0.3, 0.0]
    c = AbsorbingChain(Q, rs, rf, pi0=0)
    assert c.r_inf == 0.0
    assert c.success_probabilities[0] == 0.0
    assert c.success_probabilities[1] == pytest.approx(0.6, abs=1e-12)
    with pytest.raises(UndefinedMetricError):
        c.mean_steps_given_success()
    # From state 1 it is defined.
    assert c.with_changes(pi0=1).mean_steps_given_success() > 0


def test_failure_unreachable() -> None:
    c = AbsorbingChain([[0.5, 0.5], [0.0, 0.0]], [0.0, 1.0], [0.0, 0.0], pi0=0)
    assert c.r_inf == pytest.approx(1.0, abs=1e-12)
    assert c.failure_probability == 0.0
    with pytest.raises(UndefinedMetricError, match="failure"):
        c.mean_steps_given_failure()
    assert_array_equal(c.failure_attribution(), [0.0, 0.0])
    assert_array_equal(c.pass_at_k([1, 2]), [1.0, 1.0])


# ---------------------------------------------------------------------------------------- closed loops


def test_closed_loop_names_exactly_the_stuck_states() -> None:
    # 'ping' and 'pong' swap forever; 'work' can enter the loop but can also exit, so it is not stuck.
    Q = [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.3, 0.0, 0.2]]
    rs = [0.0, 0.0, 0.3]
    rf = [0.0, 0.0, 0.2]
    with pytest.raises(NonAbsorbingError) as info:
        AbsorbingChain(Q, rs, rf, pi0=2, state_names=["ping", "pong", "work"])
    err = info.value
    assert isinstance(err, ChainValidationError)
    assert tuple(err.states) == ("ping", "pong")
    msg = str(err)
    assert "'ping'" in msg and "'pong'" in msg
    assert "'work'" not in msg


def test_single_absorbing_free_self_loop() -> None:
    with pytest.raises(NonAbsorbingError) as info:
        AbsorbingChain([[0.5, 0.5], [0.0, 1.0]], [0.0, 0.0], [0.0, 0.0], state_names=["a", "stuck"])
    assert tuple(info.value.states) == ("a", "stuck")  # 'a' can only lead into 'stuck'


def test_loop_with_default_names() -> None:
    with pytest.raises(NonAbsorbingError) as info:
        AbsorbingChain([[0.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0]], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0])
    assert tuple(info.value.states) == ("s1", "s2")


# ------------------------------------------------------------------------------------------ validation


def _bad(**changes: Any) -> dict[str, Any]:
    kw: dict[str, Any] = {"Q": [r[:] for r in Q3], "R_success": RS3[:], "R_failure": RF3[:], "pi0": 0,
                             "state_names": NAMES}
    kw.update(changes)
    return kw


def test_row_not_summing_to_one_names_the_state() -> None:
    rf = RF3[:]
    rf[1] = 0.2  # row 'act' sums to 1.1
    with pytest.raises(ChainValidationError, match="'act'") as info:
        AbsorbingChain(**_bad(R_failure=rf))
    assert "1.1" in str(info.value)
    assert "'plan'" not in str(info.value) and "'verify'" not in str(info.value)


def test_row_sum_tolerance() -> None:
    # Within 1e-9 is accepted, beyond it is not.
    rf = RF3[:]
    rf[2] += 5e-10
    AbsorbingChain(**_bad(R_failure=rf))
    rf[2] += 5e-9
    with pytest.raises(ChainValidationError, match="'verify'"):
        AbsorbingChain(**_bad(R_failure=rf))


@pytest.mark.parametrize(
    ("field", "state"),
    [("Q", "verify"), ("R_success", "act"), ("R_failure", "plan")],
)
def test_negative_entry_names_the_state(field: str, state: str) -> None:
    Q = [r[:] for r in Q3]
    rs, rf = RS3[:], RF3[:]
    i = NAMES.index(state)
    # Keep the row sum at 1 so the sign check (not the row-sum check) must catch it.
    if field == "Q":
        Q[i][0] = -0.1
        rf[i] += 0.1
    elif field == "R_success":
        rs[i] = -0.1
        rf[i] += 0.3
    else:
        rf[i] = -0.1
        rs[i] += 0.2
    with pytest.raises(ChainValidationError, match="negative") as info:
        AbsorbingChain(Q, rs, rf, pi0=0, state_names=NAMES)
    msg = str(info.value)
    assert f"'{state}'" in msg
    assert field in msg
    assert all(f"'{other}'" not in msg for other in NAMES if other != state)


@pytest.mark.parametrize(
    ("field", "state"),
    [("Q", "act"), ("R_success", "verify"), ("R_failure", "plan")],
)
def test_nan_entry_names_the_state(field: str, state: str) -> None:
    Q = [r[:] for r in Q3]
    rs, rf = RS3[:], RF3[:]
    i = NAMES.index(state)
    if field == "Q":
        Q[i][1] = float("nan")
    elif field == "R_success":
        rs[i] = float("nan")
    else:
        rf[i] = float("nan")
    with pytest.raises(ChainValidationError, match="NaN") as info:
        AbsorbingChain(Q, rs, rf, pi0=0, state_names=NAMES)
    assert f"'{state}'" in str(info.value), str(info.value)


def test_infinite_entry_rejected() -> None:
    Q = [r[:] for r in Q3]
    Q[0][2] = float("inf")
    with pytest.raises(ChainValidationError):
        AbsorbingChain(Q, RS3, RF3, pi0=0)


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        ({"Q": [[0.5, 0.3, 0.0], [0.0, 0.4, 0.3]]}, "square"),
        ({"Q": [0.5, 0.3, 0.2]}, "square"),
        ({"Q": np.zeros((3, 3, 1))}, "square"),
        ({"R_success": [0.1, 0.2]}, "length 3"),
        ({"R_failure": [0.1, 0.1, 0.1, 0.0]}, "length 3"),
        ({"Q": np.zeros((0, 0)), "R_success": [], "R_failure": []}, "no transient states"),
    ],
    ids=["non-square", "1d-Q", "3d-Q", "short-R+", "long-R-", "empty"],
)
def test_wrong_shapes(changes: dict[str, object], needle: str) -> None:
    with pytest.raises(ChainValidationError, match=needle):
        AbsorbingChain(**_bad(state_names=None, **changes))


@pytest.mark.parametrize(
    "names", [("plan", "act"), ("plan", "act", "verify", "extra"), ("plan", "act", "plan")],
    ids=["too-few", "too-many", "duplicate"],
)
def test_bad_state_names(names: tuple[str, ...]) -> None:
    with pytest.raises(ChainValidationError, match="names"):
        AbsorbingChain(Q3, RS3, RF3, state_names=names)


def test_wrong_Q_shape_with_names_reports_the_shape() -> None:
    """A 1-D Q together with state names must be reported as a shape problem of Q, not as "-1 states"."""
    with pytest.raises(ChainValidationError) as info:
        AbsorbingChain([0.5, 0.3, 0.2], RS3, RF3, state_names=NAMES)
    msg = str(info.value)
    assert "-1" not in msg, msg
    assert "Q" in msg, msg


@pytest.mark.parametrize(
    ("pi0", "needle"),
    [
        (3, "3"),  # index out of range
        (-1, "-1"),
        ([0.5, 0.5], "length"),  # wrong length
        ([0.5, 0.6, 0.0], "1.1"),  # does not sum to 1
        ([1.2, -0.2, 0.0], "negative"),  # negative entry
        ([float("nan"), 0.5, 0.5], "pi0"),  # NaN
        ([0.0, 0.0, 0.0], "sums to 0"),  # no mass
    ],
    ids=["index-high", "index-negative", "length", "sum", "negative", "nan", "zero"],
)
def test_bad_pi0(pi0: Any, needle: str) -> None:
    with pytest.raises(ChainValidationError) as info:
        AbsorbingChain(Q3, RS3, RF3, pi0=pi0)
    assert needle in str(info.value)


def test_validation_errors_are_value_errors() -> None:
    with pytest.raises(ValueError):
        AbsorbingChain(Q3, RS3, [0.0, 0.0, 0.0])


# ------------------------------------------------------------------------------------------- documents


def test_from_dict_wrong_schema_version() -> None:
    doc = AbsorbingChain(Q3, RS3, RF3, state_names=NAMES).to_dict()
    assert doc["schema_version"] == CHAIN_SCHEMA_VERSION
    for bad in (CHAIN_SCHEMA_VERSION + 1, 0, None, "1"):
        doc_bad = dict(doc, schema_version=bad)
        with pytest.raises(SchemaVersionError, match="schema_version"):
            AbsorbingChain.from_dict(doc_bad)
    missing = {k: v for k, v in doc.items() if k != "schema_version"}
    with pytest.raises(SchemaVersionError):
        AbsorbingChain.from_dict(missing)


def test_from_dict_wrong_kind_or_missing_field() -> None:
    doc = AbsorbingChain(Q3, RS3, RF3, state_names=NAMES).to_dict()
    with pytest.raises(SchemaVersionError):
        AbsorbingChain.from_dict(dict(doc, kind="something.else"))
    no_q = {k: v for k, v in doc.items() if k != "Q"}
    with pytest.raises(ChainValidationError, match="'Q'"):
        AbsorbingChain.from_dict(no_q)
    # A document whose matrices were tampered with is validated like any other input.
    doc_bad = dict(doc, R_failure=[0.1, 0.1, 0.2])
    with pytest.raises(ChainValidationError, match="'verify'"):
        AbsorbingChain.from_dict(doc_bad)


# --------------------------------------------------------------------------- near-singular retry loops


@pytest.mark.parametrize(("r_plus", "r_minus"), [(3e-10, 7e-10), (1e-10, 9e-10), (5e-10, 5e-10)])
def test_retry_self_loop_one_state(r_plus: float, r_minus: float) -> None:
    """Q_ii = 1 − 1e-9: the 1-state closed form is R∞ = r+/(r+ + r−), E[T] = 1/(r+ + r−).

    Computing 1 − Q_ii loses ~8 digits here; the subtraction-free (GTH) diagonal keeps full accuracy.
    """
    q = 1.0 - (r_plus + r_minus)
    c = AbsorbingChain([[q]], [r_plus], [r_minus], pi0=0)
    exact = r_plus / (r_plus + r_minus)
    assert c.r_inf == pytest.approx(exact, rel=1e-12, abs=0)
    assert c.failure_probability == pytest.approx(r_minus / (r_plus + r_minus), rel=1e-12, abs=0)
    assert c.mean_steps() == pytest.approx(1.0 / (r_plus + r_minus), rel=1e-12, abs=0)
    assert c.expected_visits()[0] == pytest.approx(1.0 / (r_plus + r_minus), rel=1e-12, abs=0)
    assert c.mean_steps_given_success() == pytest.approx(1.0 / (r_plus + r_minus), rel=1e-9)
    # The horizon residual is exact too: after d steps the remaining success mass is q^d · R∞.
    sw = c.sweep(1000)
    assert sw.residual[1000] == pytest.approx(q**1000 * exact, rel=1e-9)


def test_retry_self_loop_inside_larger_chain() -> None:
    """A plan state that hands over to a retry loop with Q_ii = 1 − 1e-9 (the loop's exits split 4:6)."""
    Q = [[0.0, 0.5, 0.0], [0.0, 1.0 - 1e-9, 0.0], [0.25, 0.25, 0.0]]
    rs = [0.0, 4e-10, 0.5]
    rf = [0.5, 6e-10, 0.0]
    c = AbsorbingChain(Q, rs, rf, pi0=0, state_names=["plan", "retry", "check"])
    assert c.success_probabilities[1] == pytest.approx(0.4, rel=1e-12)
    assert c.r_inf == pytest.approx(0.5 * 0.4, rel=1e-12)
    # check: 0.5 success now + 0.25 via plan (0.2) + 0.25 via retry (0.4).
    assert c.success_probabilities[2] == pytest.approx(0.5 + 0.25 * 0.2 + 0.25 * 0.4, rel=1e-12)
    assert c.failure_probability == pytest.approx(0.8, rel=1e-12)
    assert c.mean_steps() == pytest.approx(1.0 + 0.5 / 1e-9, rel=1e-12)
