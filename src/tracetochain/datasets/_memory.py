"""Generators for the certificate's protocol checks (study SS7 of Tran-Truong & Le 2026).

* :func:`ss7_chain` — the 5-state order-1 ground truth of SS7 (s0 = state 0).
* :func:`simulate_memory_traces` — SS7(B)'s second-order generator: from (previous a, current b) the next symbol is
  drawn from (1 − w)·[Q_b, R⊕_b, R⊖_b] + w·δ_a ("memory strength" w; mass pulled back to the previous state). The
  first step of a trace has no previous state and uses the first-order row. w = 0 is the order-1 chain itself.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from tracetochain.chain import AbsorbingChain
from tracetochain.traces import TraceTable

_OUTCOME_NAMES = np.array(["success", "failure", "censored"])


def ss7_chain() -> AbsorbingChain:
    """SS7's ground-truth chain (Tran-Truong & Le 2026, study SS7): m = 5, s0 = 0."""
    Q = [[0.40, 0.30, 0.10, 0.00, 0.00],
         [0.00, 0.35, 0.30, 0.05, 0.00],
         [0.00, 0.00, 0.40, 0.25, 0.10],
         [0.00, 0.00, 0.00, 0.50, 0.20],
         [0.00, 0.00, 0.00, 0.00, 0.50]]
    return AbsorbingChain(Q, [0.10, 0.20, 0.20, 0.25, 0.40], [0.10, 0.10, 0.05, 0.05, 0.10], pi0=0,
                          state_names=[f"s{i}" for i in range(5)])


def simulate_memory_traces(chain: AbsorbingChain, n_traces: int, *, memory: float = 0.6,
                           seed: int | np.random.SeedSequence | None = 0, max_steps: int = 200) -> TraceTable:
    """Traces from the SS7(B) second-order generator (module docstring), vectorised over traces.

    Traces still running after ``max_steps`` steps are censored (SS7 uses d_max = 200). ``state`` holds the state
    names of ``chain``.
    """
    if not 0.0 <= memory <= 1.0:
        raise ValueError(f"memory must be in [0, 1], got {memory!r}")
    if n_traces < 1 or max_steps < 1:
        raise ValueError("n_traces and max_steps must be >= 1")
    rng = np.random.default_rng(seed)
    m = chain.n_states
    cum = np.cumsum(np.column_stack([chain.Q, chain.R_success, chain.R_failure]), axis=1)
    cum[:, -1] = 1.0
    cum_pi0 = np.cumsum(chain.pi0)
    cum_pi0[-1] = 1.0
    cur = np.searchsorted(cum_pi0, rng.random(n_traces), side="right").astype(np.int64)
    prev = np.full(n_traces, -1, np.int64)
    outcome = np.full(n_traces, 2, np.int64)
    length = np.zeros(n_traces, np.int64)
    active = np.arange(n_traces)
    steps_trace: list[np.ndarray] = []
    steps_state: list[np.ndarray] = []
    for _ in range(max_steps):
        if active.size == 0:
            break
        c, pv = cur[active], prev[active]
        steps_trace.append(active)
        steps_state.append(c)
        length[active] += 1
        nxt = (rng.random(active.size)[:, None] >= cum[c]).sum(axis=1)
        back = (rng.random(active.size) < memory) & (pv >= 0)
        nxt = np.where(back, pv, nxt)
        absorbed = nxt >= m
        outcome[active[absorbed]] = nxt[absorbed] - m
        keep = ~absorbed
        prev[active[keep]] = c[keep]
        cur[active[keep]] = nxt[keep]
        active = active[keep]
    tr = np.concatenate(steps_trace)
    st = np.concatenate(steps_state)
    order = np.argsort(tr, kind="stable")
    tr, st = tr[order], st[order]
    offsets = np.concatenate([[0], np.cumsum(length)])
    step = np.arange(tr.size) - np.repeat(offsets[:-1], length)
    names = np.array(chain.state_names, dtype=object)
    table = pa.table({
        "trace_id": pa.array([f"t{i}" for i in tr], pa.string()),
        "step_idx": pa.array(step, pa.int64()),
        "state": pa.array(names[st], pa.string()),
        "outcome": pa.array(_OUTCOME_NAMES[outcome][tr], pa.string()),
    })
    return TraceTable.from_dataframe(table, source=f"memory({memory}) simulation, {n_traces} traces")
