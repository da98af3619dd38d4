"""The per-quantity design effect (``uncertainty._design``): its closed-form influences against finite differences of
the estimator, and what it does to intervals when tasks differ in speed only."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from tracetochain import AbsorbingChain, TraceTable
from tracetochain.analysis._analyze import summarize_input
from tracetochain.analysis._summary import SummarySpec
from tracetochain.chain import estimate_chain
from tracetochain.datasets import ss7_chain
from tracetochain.numerics import simulate_traces
from tracetochain.uncertainty._design import quantity_design, stretch_draws

_OUT = np.array(["success", "failure", "censored"])


def _table(chain: AbsorbingChain, task: np.ndarray, rng: np.random.Generator, prefix: str) -> pa.Table:
    sim = simulate_traces(chain.Q, chain.R_success, chain.R_failure, chain.pi0, task.size, rng, record_paths=True)
    assert sim.states is not None
    L = sim.length
    tr = np.repeat(np.arange(task.size), L)
    step = np.arange(tr.size) - np.repeat(np.concatenate([[0], np.cumsum(L)[:-1]]), L)
    names = np.array(chain.state_names, dtype=object)
    return pa.table({"trace_id": pa.array([f"{prefix}{i}" for i in tr], pa.string()),
                     "step_idx": pa.array(step, pa.int64()), "state": pa.array(names[sim.states], pa.string()),
                     "outcome": pa.array(_OUT[sim.outcome][tr], pa.string()),
                     "task_id": pa.array([str(x) for x in task[tr]], pa.string())})


def _slow(base: AbsorbingChain, lam: float = 0.5) -> AbsorbingChain:
    m = base.n_states
    return AbsorbingChain(lam * np.eye(m) + (1 - lam) * base.Q, (1 - lam) * base.R_success,
                          (1 - lam) * base.R_failure, base.pi0, base.state_names)


def speed_corpus(n_tasks: int, trials: int, seed: int) -> TraceTable:
    rng = np.random.default_rng(seed)
    base = ss7_chain()
    slow = rng.random(n_tasks) < 0.5
    parts = [_table(chain, np.repeat(np.flatnonzero(slow == flag), trials), rng, f"{int(flag)}-")
             for flag, chain in ((False, base), (True, _slow(base)))]
    return TraceTable.from_arrow(pa.concat_tables(parts), source="speed")


def _design(traces: TraceTable):  # type: ignore[no-untyped-def]
    acc = summarize_input(traces, SummarySpec(n_splits=0)).summary
    chain = estimate_chain(acc.counts, pseudocount=0)
    design = quantity_design(chain, acc.counts.outcome_matrix(), acc.counts.initial, acc.units, 1.0)
    assert design is not None
    return acc, chain, design


def _numeric_ratio(acc, theta) -> float:  # type: ignore[no-untyped-def]
    """V_unit / V_model by finite differences of the estimator itself (``theta`` of an m × (m + 2) count matrix and
    first-state counts)."""
    counts = acc.counts
    X = counts.outcome_matrix()
    x0 = counts.initial.astype(float)
    m = X.shape[0]
    base = theta(X, x0)
    eps = 1e-6

    def deriv(dX: np.ndarray, dx0: np.ndarray) -> float:
        return (theta(X + eps * dX, x0 + eps * dx0) - base) / eps

    v_model = 0.0
    for s, c in zip(*np.nonzero(X), strict=True):
        e = np.zeros_like(X)
        e[s, c] = 1.0
        v_model += X[s, c] * deriv(e, np.zeros(m)) ** 2
    for s in np.flatnonzero(x0):
        e0 = np.zeros(m)
        e0[s] = 1.0
        v_model += x0[s] * deriv(np.zeros_like(X), e0) ** 2
    U = acc.units.counts.toarray()
    v_unit = 0.0
    for row in U:
        dX = np.column_stack([row[: m * m].reshape(m, m), row[m * m: m * m + m], row[m * m + m: m * m + 2 * m]])
        v_unit += deriv(dX, row[m * m + 2 * m:]) ** 2
    return max(1.0, v_unit / v_model)


def _chain_of(X: np.ndarray, x0: np.ndarray, names: tuple[str, ...]) -> AbsorbingChain:
    m = X.shape[0]
    P = X / X.sum(axis=1, keepdims=True)
    return AbsorbingChain(P[:, :m], P[:, m], P[:, m + 1], x0 / x0.sum(), names)


def test_closed_forms_match_finite_differences() -> None:
    acc, chain, design = _design(speed_corpus(12, 4, seed=1))
    names = chain.state_names
    assert design.r_inf() == pytest.approx(_numeric_ratio(acc, lambda X, x0: _chain_of(X, x0, names).r_inf),
                                           rel=1e-3)
    assert design.mean_steps() == pytest.approx(
        _numeric_ratio(acc, lambda X, x0: _chain_of(X, x0, names).mean_steps()), rel=1e-3)
    for d in (1, 3, 10):
        assert design.reliability(10)[d] == pytest.approx(
            _numeric_ratio(acc, lambda X, x0, d=d: float(_chain_of(X, x0, names).reliability(d)[d])), rel=1e-3)


def test_speed_clusters_mean_steps_not_success() -> None:
    """Tasks that differ only in speed: mean steps carries a large design effect, R∞ hardly any."""
    _, _, design = _design(speed_corpus(60, 5, seed=2))
    assert design.mean_steps() > 1.5
    assert design.r_inf() < design.mean_steps()


def test_long_horizons_interpolate_between_exact_points() -> None:
    _, _, design = _design(speed_corpus(20, 4, seed=3))
    d = design.reliability(40)
    assert d.shape == (41,) and d[0] == 1.0 and np.all(d >= 1.0) and np.all(np.isfinite(d))


def test_stretch_keeps_probabilities_in_range() -> None:
    rng = np.random.default_rng(0)
    draws = rng.beta(50, 2, size=(400, 3))
    wide = stretch_draws(draws, 3.0, "probability")
    assert wide.min() > 0.0 and wide.max() < 1.0
    assert np.all(np.std(np.log(wide / (1 - wide)), axis=0) > 2.9 * np.std(np.log(draws / (1 - draws)), axis=0))
    assert np.array_equal(stretch_draws(draws, 1.0, "probability"), draws)


def test_no_tasks_no_design() -> None:
    chain = ss7_chain()
    rng = np.random.default_rng(4)
    t = _table(chain, np.arange(80), rng, "t").drop(["task_id"])
    acc = summarize_input(TraceTable.from_arrow(t, source="x"), SummarySpec(n_splits=0)).summary
    assert acc.units is None


def test_saved_chain_redraws_the_analysis_intervals() -> None:
    """One implementation for every surface: a chain saved by the analysis and read back (``summarize CHAIN``,
    ``interval_summary(chain)``) gives the analysis's per-quantity intervals, not the pass rate's d alone."""
    from tracetochain import AbsorbingChain
    from tracetochain.analysis import analyze
    from tracetochain.uncertainty import interval_summary

    res = analyze(speed_corpus(40, 5, seed=2), audit=False, intervals="posterior", samples=500, seed=0)
    assert res.ensemble is not None and res.ensemble.design is not None
    s = res.ensemble.stats("mean_steps")
    chain = AbsorbingChain.from_dict(res.chain.to_dict())
    doc = dict(interval_summary(chain, samples=500, seed=0))
    ms = doc["metrics"]["mean_steps"]
    assert (ms["lower"], ms["upper"]) == pytest.approx((s.lower, s.upper), rel=1e-9)
    assert res.ensemble.info["design_effect_per_quantity"]["mean_steps"] > 1.5
