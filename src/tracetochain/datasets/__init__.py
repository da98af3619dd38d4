"""Bundled examples and synthetic data (lifelines/deeptime style).

* :func:`load_example` — real traces shipped with the package (see ``data/README.md`` for origin and licence).
* :func:`notation_chain` — the 3-state worked example of Tran-Truong & Le (2026).
* :func:`random_chain` — random substochastic chains (the generator of study SS1 in the authors' artifact).
* :func:`simulate_traces` — canonical traces drawn from a chain, for tests and studies.
* :func:`ss7_chain`, :func:`simulate_memory_traces` — a 5-state ground truth and a second-order generator, for
  checking the audit's size and power.
* :func:`planted_history_traces` — a corpus whose outcome is decided by a history pattern (two failing tests in a
  row before submit) that the first-order chain cannot see, for the informative states and discrimination.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tracetochain.chain import AbsorbingChain
from tracetochain.traces import TraceTable

EXAMPLES = {
    "tau_airline": "tau_airline_sample.jsonl",
}


def example_path(name: str = "tau_airline") -> Path:
    """Path of a bundled example file."""
    if name not in EXAMPLES:
        raise KeyError(f"unknown example {name!r}; available: {sorted(EXAMPLES)}")
    return Path(str(resources.files("tracetochain.datasets") / "data" / EXAMPLES[name]))


def load_example(name: str = "tau_airline") -> TraceTable:
    """Load a bundled example as a :class:`TraceTable` (``tau_airline``: τ-bench gpt-4o airline trajectories)."""
    return TraceTable.read(example_path(name))


def notation_chain() -> AbsorbingChain:
    """The paper's 3-state example: R∞ = 0.625, MTTA = 3.75 (Tran-Truong & Le 2026; docs/numerics.md §9)."""
    return AbsorbingChain(
        Q=[[0.5, 0.3, 0.0], [0.0, 0.4, 0.3], [0.0, 0.0, 0.6]],
        R_success=[0.1, 0.2, 0.3],
        R_failure=[0.1, 0.1, 0.1],
        pi0=0,
        state_names=["plan", "act", "verify"],
    )


def random_chain(n_states: int, seed: int | np.random.Generator = 0, *, rho: float = 0.7, density: float = 0.5,
                 success_rate: float = 0.3) -> AbsorbingChain:
    """A random substochastic chain: each row has transient mass ``rho`` spread over a random support, and the
    remaining 1 − rho split into success (``success_rate``) and failure (the artifact's SS1 generator)."""
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    m = int(n_states)
    Q = rng.random((m, m)) * (rng.random((m, m)) < density)
    empty = Q.sum(axis=1) == 0
    Q[empty, rng.integers(0, m, size=int(empty.sum()))] = 1.0
    Q = Q / Q.sum(axis=1, keepdims=True) * rho
    rest = 1.0 - Q.sum(axis=1)
    return AbsorbingChain(Q, rest * success_rate, rest - rest * success_rate, pi0=0)


def simulate_traces(chain: AbsorbingChain, n_traces: int, seed: int | np.random.Generator = 0, *,
                    max_steps: int = 10_000,
                    costs: dict[str, tuple[Any, Any]] | None = None) -> TraceTable:
    """Draw ``n_traces`` traces from ``chain`` as a canonical :class:`TraceTable` (state = state name).

    Traces that reach ``max_steps`` steps without absorbing are ``censored``. Episodes that draw a start exit (the
    chain's ``start_exits``) end before any step: they are kept as zero-step episodes in ``report.zero_step``, as a
    reader keeps them. ``costs`` maps a usage column
    (``cost_usd``, ``tokens_in``, ``tokens_out``) to the per-visit (mean, variance) of every state: each step's value
    is drawn from a gamma law with that mean and variance (exactly the mean where the variance is 0; token counts
    rounded to integers), from a stream of its own, so the paths are the same with or without costs.

    >>> t = simulate_traces(notation_chain(), 50, seed=1, costs={"cost_usd": ([0.01, 0.02, 0.03], [0, 0, 0])})
    >>> sorted(set(t.to_arrow().column("cost_usd").to_pylist()))  # fixed per-visit costs of plan, act, verify
    [0.01, 0.02, 0.03]
    """
    sim = chain.simulate(n_traces, seed, max_steps=max_steps, record_paths=True)
    assert sim.states is not None and sim.offsets is not None
    lengths = sim.length
    trace = np.repeat(np.arange(n_traces), lengths)
    step = np.arange(trace.size) - np.repeat(sim.offsets[:-1], lengths) if trace.size else trace
    outcome_names = np.array(["success", "failure", "censored"])
    names = np.array(chain.state_names, dtype=object)
    table = pa.table({
        "trace_id": pa.array([f"t{i}" for i in trace], pa.string()),
        "step_idx": pa.array(step, pa.int64()),
        "state": pa.array(names[sim.states], pa.string()),
        "outcome": pa.array(outcome_names[sim.outcome][trace], pa.string()),
    })
    if costs:
        base = seed if isinstance(seed, (int, np.integer)) else int(np.random.default_rng(seed).integers(2**32))
        rng = np.random.default_rng(np.random.SeedSequence([int(base), 0xC057]))
        for column, (mean, var) in costs.items():
            if column not in ("cost_usd", "tokens_in", "tokens_out"):
                raise ValueError(f"costs can fill cost_usd, tokens_in or tokens_out, not {column!r}")
            mu = np.broadcast_to(np.asarray(mean, dtype=np.float64), (chain.n_states,))[sim.states]
            v = np.broadcast_to(np.asarray(var, dtype=np.float64), (chain.n_states,))[sim.states]
            random = (v > 0) & (mu > 0)
            x = mu.copy()
            if random.any():
                x[random] = rng.gamma(mu[random] ** 2 / v[random], v[random] / mu[random])
            if column == "cost_usd":
                table = table.append_column(column, pa.array(x, pa.float64()))
            else:
                table = table.append_column(column, pa.array(np.rint(x).astype(np.int64), pa.int64()))
    out = TraceTable.from_dataframe(table, source=f"simulated({n_traces} traces)")
    zero = np.flatnonzero(lengths == 0)
    if zero.size:
        out.report.zero_step = [{"trace_id": f"t{i}", "outcome": str(outcome_names[sim.outcome[i]])} for i in zero]
    return out


def __getattr__(name: str) -> object:
    if name in ("ss7_chain", "simulate_memory_traces"):
        from tracetochain.datasets import _memory

        return getattr(_memory, name)
    if name == "planted_history_traces":
        from tracetochain.datasets import _planted

        return _planted.planted_history_traces
    raise AttributeError(f"module 'tracetochain.datasets' has no attribute {name!r}")
