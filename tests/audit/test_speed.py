"""The task-speed test (``audit._speed``): exact size under exchangeable lengths, power against tasks that differ
only in speed, and its place in the timing layer."""

from __future__ import annotations

import numpy as np
import pytest

from tracetochain.audit._speed import speed_heterogeneity_test


def _null(rng: np.random.Generator, n_tasks: int, trials: int) -> tuple[np.ndarray, np.ndarray]:
    unit = np.repeat(np.arange(n_tasks, dtype=np.uint64), trials)
    return unit, rng.geometric(0.2, unit.size)


def test_size_on_exchangeable_lengths() -> None:
    """Lengths that do not depend on the task (any law, ties included): rejection at 5 % stays within the binomial
    band of 5 % over 300 corpora."""
    rng = np.random.default_rng(0)
    rej = sum(speed_heterogeneity_test(*_null(rng, 30, 5), n_permutations=99, seed=i).p_value <= 0.05  # type: ignore[operator]
              for i in range(300))
    assert rej / 300 <= 0.05 + 2.6 * np.sqrt(0.05 * 0.95 / 300)


def test_power_when_half_the_tasks_take_twice_the_steps() -> None:
    rng = np.random.default_rng(1)
    hits = 0
    for i in range(40):
        unit, L = _null(rng, 40, 5)
        slow = (unit % 2 == 1)
        L = np.where(slow, L + rng.geometric(0.2, L.size), L)  # slow tasks: twice the expected steps
        hits += speed_heterogeneity_test(unit, L, n_permutations=199, seed=i).p_value <= 0.05  # type: ignore[operator]
    assert hits / 40 >= 0.9


def test_invariant_to_trace_order_and_singletons_drop_out() -> None:
    rng = np.random.default_rng(2)
    unit, L = _null(rng, 12, 4)
    a = speed_heterogeneity_test(unit, L, n_permutations=99, seed=3)
    o = rng.permutation(unit.size)
    b = speed_heterogeneity_test(unit[o], L[o], n_permutations=99, seed=3)
    assert a == b
    extra = speed_heterogeneity_test(np.concatenate([unit, [999]]).astype(np.uint64), np.concatenate([L, [500]]),
                                     n_permutations=99, seed=3)
    assert extra.p_value == a.p_value and extra.n_traces == a.n_traces


def test_too_few_repeated_traces() -> None:
    res = speed_heterogeneity_test(np.array([1, 1, 2, 2], np.uint64), np.array([1, 2, 3, 4]))
    assert res.p_value is None and res.n_traces == 4


@pytest.mark.parametrize("trials", [2, 5])
def test_p_value_is_a_permutation_p(trials: int) -> None:
    rng = np.random.default_rng(4)
    res = speed_heterogeneity_test(*_null(rng, 20, trials), n_permutations=49, seed=0)
    assert res.p_value is not None and (res.p_value * 50) == pytest.approx(round(res.p_value * 50))
