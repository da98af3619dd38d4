"""Intervals count the episodes that ended before any step: the posterior draws π0 and the start exits from one
Dirichlet, the bootstrap resamples zero-step episodes as units, and both intervals contain the pass rate."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import tracetochain as tt
from tracetochain.chain import per_trace_counts
from tracetochain.exceptions import ChainValidationError
from tracetochain.uncertainty import ChainEnsemble, DirichletPosterior, TraceBootstrap
from tracetochain.uncertainty._bootstrap import estimate_batch


def corpus(n: int = 400, seed: int = 0) -> tt.TraceTable:
    """Episodes from a chain where 12 % succeed and 8 % fail before any step (report.zero_step)."""
    base = tt.datasets.notation_chain()
    chain = base.with_changes(pi0=base.pi0 * 0.8, start_exits=(0.12, 0.08))
    return tt.datasets.simulate_traces(chain, n, seed=seed)


def pass_rate(t: tt.TraceTable) -> float:
    oc, zo = t.outcome_counts(), t.report.zero_step_outcomes()
    return (oc["success"] + zo["success"]) / (t.n_traces + t.report.n_zero_step)


def test_posterior_draws_the_start_distribution_jointly() -> None:
    t = corpus()
    chain = tt.ChainEstimator().fit(t).fetch_model()
    assert chain.start_exits.any()
    ens = DirichletPosterior(samples=3000, seed=1).fit(chain).fetch_model().ensemble
    assert_allclose(ens.pi0.sum(axis=1) + ens.start_exits.sum(axis=1), 1.0, atol=1e-12)
    counts = chain.metadata["counts"]
    n = sum(counts["initial"]) + sum(counts["start_exits"])
    # Dir(n_1 … n_m, n⊕, n⊖): the exit to success has mean n⊕ / n and variance p(1 − p)/(n + 1)
    p = counts["start_exits"][0] / n
    assert ens.start_exits[:, 0].mean() == pytest.approx(p, abs=4 * np.sqrt(p * (1 - p) / (n + 1) / 3000))
    assert ens.start_exits[:, 0].std() == pytest.approx(np.sqrt(p * (1 - p) / (n + 1)), rel=0.1)
    r = ens.stats("r_inf")
    assert r.lower < pass_rate(t) < r.upper
    s = ens.stats("start_exits")
    assert s.point.tolist() == chain.start_exits.tolist()
    fixed = DirichletPosterior(samples=50, initial="fixed").fit(chain).fetch_model().ensemble
    assert (fixed.start_exits == chain.start_exits).all()


def test_bootstrap_resamples_zero_step_episodes() -> None:
    t = corpus()
    ens = TraceBootstrap(samples=300, seed=2).fit(t).fetch_model()
    assert ens.reference.start_exits.tolist() == tt.ChainEstimator().fit(t).fetch_model().start_exits.tolist()
    assert ens.start_exits[:, 0].std() > 0  # the zero-step episodes are resampled
    assert_allclose(ens.pi0.sum(axis=1) + ens.start_exits.sum(axis=1), 1.0, atol=1e-12)
    r = ens.stats("r_inf")
    assert r.lower < pass_rate(t) < r.upper
    assert ens.info["n_traces"] == 400


def test_bootstrap_by_task_keeps_zero_step_episodes_with_their_task() -> None:
    t = corpus(200, seed=4)
    rows = t.to_arrow()
    tasks = {tid: f"task{int(tid[1:]) % 20}" for tid in t.trace_ids}
    task_col = [tasks[x] for x in rows.column("trace_id").to_pylist()]
    import pyarrow as pa

    t2 = tt.TraceTable.from_arrow(rows.append_column("task_id", pa.array(task_col)))
    t2.report.zero_step = [dict(z, task_id=f"task{int(z['trace_id'][1:]) % 20}") for z in t.report.zero_step]
    boot = TraceBootstrap(samples=20, seed=0).fit(t2)
    assert boot.fetch_model().info["by"] == "task" and boot.fetch_model().info["n_units"] == 20
    plan = boot.plan_
    assert plan is not None and plan.unit_of_trace.size == 200


def test_estimate_batch_reads_the_layout_with_start_exits() -> None:
    t = corpus(300, seed=3)
    codes, names = t.state_labels()
    m = len(names)
    P = np.asarray(per_trace_counts(codes, t.offsets, t.outcomes(), m).sum(axis=0), dtype=np.float64)
    zo = t.report.zero_step_outcomes()
    vec = np.concatenate([P[0], [zo["success"], zo["failure"]]])[None, :]
    from tracetochain.chain import ChainPrior

    arr = estimate_batch(vec, m, ChainPrior(), "prior", "empirical")
    chain = tt.ChainEstimator(states=names).fit(t).fetch_model()
    for key, value in (("Q", chain.Q), ("pi0", chain.pi0), ("start_exits", chain.start_exits)):
        assert_array_equal(arr[key][0], value)
    plain = estimate_batch(P, m, ChainPrior(), "prior", "empirical")
    assert "start_exits" not in plain
    with pytest.raises(ValueError, match="entries"):
        estimate_batch(np.zeros((1, m * m + 3 * m + 1)), m, ChainPrior(), "prior", "empirical")


def test_ensembles_carry_and_check_start_exits() -> None:
    c = tt.AbsorbingChain([[0.5]], [0.3], [0.2], pi0=0, start_exits=(0.1, 0.1))
    d = c.with_changes(pi0=[0.7], start_exits=(0.2, 0.1))
    ens = ChainEnsemble(c, [c, d])
    assert ens.start_exits.tolist() == [[0.1, 0.1], [0.2, 0.1]]
    assert ens.chain(1).start_exits.tolist() == [0.2, 0.1]
    assert_allclose(ens.stats("r_inf", return_samples=True).samples, [c.r_inf, d.r_inf], atol=1e-15)
    assert ens.stats("start_failure_share").point == pytest.approx(c.start_failure_share())
    stacked: dict[str, Any] = {"Q": [[[0.5]]], "R_success": [[0.3]], "R_failure": [[0.2]]}
    assert ChainEnsemble(c, stacked).start_exits.tolist() == [[0.1, 0.1]]  # the reference's start distribution
    with pytest.raises(ChainValidationError, match="together they must be 1"):
        ChainEnsemble(c, {**stacked, "pi0": [[0.8]], "start_exits": [0.1, 0.2]})
    doc = ens.to_dict(include_samples=True)
    assert doc["samples"]["start_exits"] == [[0.1, 0.1], [0.2, 0.1]]


@pytest.mark.slow
def test_intervals_cover_the_true_r_inf_with_zero_step_episodes() -> None:
    """80 corpora of 200 episodes from a chain where 20 % end before any step: both 95 % intervals of R∞ cover the
    true value about 95 % of the time (≥ 68 of 80 has probability > 0.999 at 95 % coverage)."""
    base = tt.datasets.random_chain(4, seed=8, rho=0.8)
    chain = base.with_changes(pi0=base.pi0 * 0.8, start_exits=(0.12, 0.08))
    hits = {"posterior": 0, "bootstrap": 0}
    for seed in range(80):
        t = tt.datasets.simulate_traces(chain, 200, seed=500 + seed)
        fit = tt.ChainEstimator().fit(t).fetch_model()
        post = DirichletPosterior(samples=400, seed=seed).fit(fit).fetch_model().ensemble.stats("r_inf")
        boot = TraceBootstrap(samples=200, seed=seed).fit(t).fetch_model().stats("r_inf")
        for name, s in (("posterior", post), ("bootstrap", boot)):
            hits[name] += int(s.lower <= chain.r_inf <= s.upper)
    assert hits["posterior"] >= 68 and hits["bootstrap"] >= 68, hits
