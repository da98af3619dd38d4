"""Counting transitions and exits from labelled steps (``paper-spec.md`` §2.4), vectorised.

One transient→transient count per consecutive pair of steps *inside* a trace (never across trace boundaries);
one exit count from the last step of each completed (success/failure) trace; censored traces add transitions and
no exit; invalid traces are excluded and counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tracetochain.exceptions import TraceValidationError
from tracetochain.traces._schema import Outcome
from tracetochain.traces._table import TraceTable

_SUCCESS, _FAILURE, _CENSORED, _INVALID = 0, 1, 2, 3


@dataclass(frozen=True, eq=False)
class TransitionCounts:
    """Sufficient statistics of a first-order absorbing chain.

    ``transitions[i, j]``: steps i → j inside traces; ``exits_success[i]`` / ``exits_failure[i]``: completed traces
    whose last step was in state i; ``initial[i]``: traces that started in i; ``n_traces``: traces per outcome
    (invalid ones were excluded from every count).
    """

    state_names: tuple[str, ...]
    transitions: NDArray[np.int64]
    exits_success: NDArray[np.int64]
    exits_failure: NDArray[np.int64]
    initial: NDArray[np.int64]
    n_traces: dict[str, int]

    @property
    def n_states(self) -> int:
        return len(self.state_names)

    @property
    def row_totals(self) -> NDArray[np.int64]:
        """c_i = Σ_j c_ij + c_i⊕ + c_i⊖: the observations leaving each state."""
        totals: NDArray[np.int64] = self.transitions.sum(axis=1) + self.exits_success + self.exits_failure
        return totals

    @property
    def n_fitted_traces(self) -> int:
        """Traces that contribute counts (success + failure + censored)."""
        return self.n_traces["success"] + self.n_traces["failure"] + self.n_traces["censored"]

    def unvisited_states(self) -> list[str]:
        """States with no observed outgoing step (e.g. seen only as the last step of censored traces)."""
        return [self.state_names[i] for i in np.flatnonzero(self.row_totals == 0)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "state_names": list(self.state_names),
            "transitions": self.transitions.tolist(),
            "exits_success": self.exits_success.tolist(),
            "exits_failure": self.exits_failure.tolist(),
            "initial": self.initial.tolist(),
            "n_traces": dict(self.n_traces),
        }


def count_transitions(traces: TraceTable, states: list[str] | tuple[str, ...] | None = None) -> TransitionCounts:
    """Count transitions, exits and first states of every non-invalid trace.

    ``states`` fixes the state vocabulary and its order (states never observed get empty rows); by default the
    states are the labels seen, in order of first appearance.
    """
    codes, names = traces.state_labels()
    if states is not None:
        vocab = [str(s) for s in states]
        if len(set(vocab)) != len(vocab):
            raise ValueError("states must be unique")
        pos = {s: i for i, s in enumerate(vocab)}
        missing = [s for s in names if s not in pos]
        if missing:
            raise TraceValidationError(
                f"state {missing[0]!r} occurs in the traces but is not in the given states",
                source=traces.report.source, field="state",
                hint=f"add it to the state list ({len(missing)} label(s) missing) or relabel those steps",
            )
        remap = np.array([pos[s] for s in names], dtype=np.int64)
        codes = remap[codes] if codes.size else codes
        names = vocab
    m = len(names)
    outcome = traces.outcomes().astype(np.int64)
    n_by_outcome = np.bincount(outcome, minlength=4)
    offsets = traces.offsets
    starts, ends = offsets[:-1], offsets[1:] - 1
    valid_trace = outcome != _INVALID

    # Transitions: consecutive rows of the same valid trace. Rows are sorted by (trace, step).
    trace_of_row = traces.trace_index
    same = trace_of_row[1:] == trace_of_row[:-1]
    same &= valid_trace[trace_of_row[:-1]]
    pair = codes[:-1][same] * m + codes[1:][same]
    transitions = np.bincount(pair, minlength=m * m).reshape(m, m) if m else np.zeros((0, 0), np.int64)

    last_state = codes[ends] if ends.size else np.zeros(0, np.int64)
    exits_success = np.bincount(last_state[outcome == _SUCCESS], minlength=m)
    exits_failure = np.bincount(last_state[outcome == _FAILURE], minlength=m)
    initial = np.bincount(codes[starts][valid_trace], minlength=m) if starts.size else np.zeros(m, np.int64)
    return TransitionCounts(
        tuple(names),
        transitions.astype(np.int64),
        exits_success.astype(np.int64),
        exits_failure.astype(np.int64),
        initial.astype(np.int64),
        {o.value: int(n_by_outcome[i]) for i, o in enumerate(Outcome)},
    )
