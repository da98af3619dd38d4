"""The timing layer sees tasks that differ in difficulty: one chain fitted to easy and hard tasks reproduces their
pooled pass rate, not their success-time law, and R(d) was certified while its interval missed the truth."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import tracetochain as tt
from tracetochain.analysis import analyze
from tracetochain.audit._combine import cauchy_combination
from tracetochain.datasets import ss7_chain

QUICK = {"n_bootstrap": 49, "n_permutations": 49, "trials_permutations": 999}


def _tasks(factors: tuple[float, ...], n_tasks: int, trials: int, seed: int) -> tt.TraceTable:
    """Tasks drawing one of the SS7 variants with success exits × factor, ``trials`` runs each."""
    base = ss7_chain()
    rng = np.random.default_rng(seed)
    kind = rng.integers(0, len(factors), n_tasks)
    parts = []
    for k, f in enumerate(factors):
        rs = np.minimum(base.R_success * f, 0.95 - base.R_failure)
        Q = base.Q * ((1 - rs - base.R_failure) / base.Q.sum(axis=1))[:, None]
        chain = tt.AbsorbingChain(Q, rs, base.R_failure, base.pi0, base.state_names)
        tasks = np.flatnonzero(kind == k)
        if not tasks.size:
            continue
        sim = tt.datasets.simulate_traces(chain, tasks.size * trials, seed=int(rng.integers(2**31))).to_arrow()
        ids = sim.column("trace_id").to_pylist()
        order = {x: i for i, x in enumerate(dict.fromkeys(ids))}
        sim = sim.set_column(0, "trace_id", pa.array([f"{k}-{x}" for x in ids]))
        parts.append(sim.append_column("task_id", pa.array([f"task{tasks[order[x] // trials]}" for x in ids])))
    return tt.TraceTable.from_arrow(pa.concat_tables(parts), source="tasks")


def test_tasks_of_different_difficulty_withhold_r_d_but_not_r_inf() -> None:
    res = analyze(_tasks((3.0, 1.0, 0.1), 120, 5, seed=3), intervals=None, **QUICK)
    cert = res.certificate
    assert cert is not None
    timing = cert.layers["timing"]
    assert timing.statistics["p_task_heterogeneity"] == cert.layers["trials"].p_value
    assert timing.p_value == pytest.approx(cauchy_combination([timing.statistics["p_success_time"],
                                                               cert.layers["trials"].p_value,
                                                               timing.statistics["p_task_speed"]]))
    assert cert.layers["trials"].status == "reject" and timing.status == "reject"
    assert cert.status("R(d)") == "withheld" and cert.status("mean_steps") == "withheld"
    assert cert.status("R_inf") == "certified"


def test_identical_tasks_keep_the_timing_layer_calibrated() -> None:
    """Under one chain for every task both p-values are valid, and so is their combination: R(d) stays certified."""
    res = analyze(_tasks((1.0,), 80, 5, seed=4), intervals=None, **QUICK)
    cert = res.certificate
    assert cert is not None and "p_task_heterogeneity" in cert.layers["timing"].statistics
    assert "p_task_speed" in cert.layers["timing"].statistics
    assert cert.status("R(d)") == "certified"


def test_tasks_that_differ_only_in_speed_withhold_mean_steps() -> None:
    """Half the tasks take every step twice as often (a self-loop of ½ on every state: same R∞): the task-speed test
    sees it, the timing layer rejects, R(d) and mean steps are withheld, R∞ is not."""
    from tracetochain import AbsorbingChain
    from tracetochain.numerics import simulate_traces

    base = ss7_chain()
    m = base.n_states
    slow = AbsorbingChain(0.5 * np.eye(m) + 0.5 * base.Q, 0.5 * base.R_success, 0.5 * base.R_failure, base.pi0,
                          base.state_names)
    rng = np.random.default_rng(7)
    kind = rng.random(100) < 0.5
    parts = []
    for flag, chain in ((False, base), (True, slow)):
        task = np.repeat(np.flatnonzero(kind == flag), 5)
        sim = simulate_traces(chain.Q, chain.R_success, chain.R_failure, chain.pi0, task.size, rng,
                              record_paths=True)
        tr = np.repeat(np.arange(task.size), sim.length)
        step = np.arange(tr.size) - np.repeat(np.concatenate([[0], np.cumsum(sim.length)[:-1]]), sim.length)
        parts.append(pa.table({
            "trace_id": pa.array([f"{int(flag)}-{i}" for i in tr]), "step_idx": pa.array(step, pa.int64()),
            "state": pa.array(np.array(chain.state_names, dtype=object)[sim.states]),
            "outcome": pa.array(np.array(["success", "failure", "censored"])[sim.outcome][tr]),
            "task_id": pa.array([str(x) for x in task[tr]])}))
    res = analyze(tt.TraceTable.from_arrow(pa.concat_tables(parts), source="speed"), intervals=None, **QUICK)
    cert = res.certificate
    assert cert is not None
    timing = cert.layers["timing"]
    assert timing.statistics["p_task_speed"] <= 0.01
    assert timing.status == "reject"
    assert cert.status("mean_steps") == "withheld" and cert.status("R(d)") == "withheld"
    assert cert.status("R_inf") == "certified"
