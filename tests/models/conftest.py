"""Shared fixtures and oracles for the model families."""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pytest

import tracetochain as tt
from tracetochain.models import CompiledModel
from tracetochain.models._encoded import EncodedTraces


def records(traces: list[tuple[list[str], str]], task: list[str] | None = None) -> tt.TraceTable:
    """A TraceTable from (states, outcome) pairs; ``task`` gives each trace's task id."""
    rows = []
    for i, (states, outcome) in enumerate(traces):
        for j, s in enumerate(states):
            rec = {"trace_id": f"t{i}", "step_idx": j, "state": s, "outcome": outcome}
            if task is not None:
                rec["task_id"] = task[i]
            rows.append(rec)
    return tt.TraceTable.from_records(rows)


def concat(*tables: tt.TraceTable) -> tt.TraceTable:
    """Tables with distinct trace ids per part."""
    parts = []
    for i, t in enumerate(tables):
        a = t.to_arrow()
        ids = pa.array([f"p{i}/{x}" for x in a.column("trace_id").to_pylist()])
        parts.append(a.set_column(a.column_names.index("trace_id"), "trace_id", ids))
    cols = [c for c in parts[0].column_names if all(c in p.column_names for p in parts)]
    return tt.TraceTable.from_arrow(pa.concat_tables([p.select(cols) for p in parts]))


def compiled_path_loglik(compiled: CompiledModel, expanded: np.ndarray, enc: EncodedTraces) -> np.ndarray:
    """log-likelihood of every trace along a given path of expanded states of the compiled chain (the oracle that
    checks a compiled observable expansion against the family's own likelihood)."""
    ch = compiled.chain
    out = np.zeros(enc.n_traces)
    for i in range(enc.n_traces):
        path = expanded[enc.offsets[i]:enc.offsets[i + 1]]
        lp = np.log(ch.pi0[path[0]])
        lp += sum(np.log(ch.Q[a, b]) for a, b in itertools.pairwise(path))
        if enc.outcomes[i] == 0:
            lp += np.log(ch.R_success[path[-1]])
        elif enc.outcomes[i] == 1:
            lp += np.log(ch.R_failure[path[-1]])
        out[i] = lp
    return out


@pytest.fixture(scope="session")
def two_class_chains() -> tuple[tt.AbsorbingChain, tt.AbsorbingChain]:
    """Two chains on the same three states with different dynamics and success (R∞ 0.63 vs 0.27)."""
    A = tt.AbsorbingChain([[0.1, 0.7, 0.0], [0.0, 0.1, 0.7], [0.0, 0.0, 0.2]], [0.05, 0.05, 0.7],
                          [0.15, 0.15, 0.1], 0, ["a", "b", "c"])
    B = tt.AbsorbingChain([[0.6, 0.1, 0.1], [0.5, 0.2, 0.0], [0.3, 0.3, 0.1]], [0.05, 0.1, 0.1],
                          [0.15, 0.2, 0.2], 0, ["a", "b", "c"])
    return A, B


@pytest.fixture(scope="session")
def hmm3() -> CompiledModel:
    """A 3-state absorbing HMM over four labels (the HMM recovery target)."""
    A = np.array([[0.6, 0.3, 0.0], [0.0, 0.6, 0.3], [0.1, 0.0, 0.6]])
    ex = np.array([[0.02, 0.08], [0.03, 0.07], [0.25, 0.05]])
    B = np.array([[0.7, 0.2, 0.1, 0.0], [0.1, 0.6, 0.2, 0.1], [0.05, 0.15, 0.2, 0.6]])
    ch = tt.AbsorbingChain(A, ex[:, 0], ex[:, 1], [1.0, 0.0, 0.0])
    return CompiledModel(ch, ("a", "b", "c", "d"), B, np.zeros(3, np.int64), np.ones(1), "iid", "hmm")
