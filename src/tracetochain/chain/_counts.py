"""Counting transitions and exits from labelled steps (docs/formats.md, "From an episode to counts"), vectorised.

One transient→transient count per consecutive pair of steps *inside* a trace (never across trace boundaries);
one exit count from the last step of each completed (success/failure) trace; censored traces add transitions and
no exit; invalid traces are excluded and counted.

Episodes that ended before any agent step (``TraceTable.report.zero_step``) are trials too: a zero-step success or
failure is a direct exit from the start (``start_exits``), so the chain's start distribution sends that share of the
episodes straight to success or failure and R∞ and the pass rate count them. A zero-step censored episode carries no
information (it is counted as censored and adds nothing else); an invalid one is counted as invalid.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse
from numpy.typing import NDArray

from tracetochain._display import Display, ResultDisplay, Table
from tracetochain._limits import check_state_count
from tracetochain._outcome import FAILURE as _FAILURE
from tracetochain._outcome import INVALID as _INVALID
from tracetochain._outcome import SUCCESS as _SUCCESS
from tracetochain.chain._prior import outcome_matrix
from tracetochain.exceptions import TraceValidationError
from tracetochain.traces import Outcome, TraceTable
from tracetochain.traces.shared import OUTCOME_VALUES


@dataclass(frozen=True, eq=False, repr=False)
class TransitionCounts(ResultDisplay):
    """Sufficient statistics of a first-order absorbing chain.

    ``transitions[i, j]``: steps i → j inside traces; ``exits_success[i]`` / ``exits_failure[i]``: completed traces
    whose last step was in state i; ``initial[i]``: traces that started in i; ``start_exits``: episodes that ended
    before any step, (successes, failures); ``n_traces``: episodes per outcome, zero-step ones included (invalid ones
    were excluded from every count).
    """

    state_names: tuple[str, ...]
    transitions: NDArray[np.int64]
    exits_success: NDArray[np.int64]
    exits_failure: NDArray[np.int64]
    initial: NDArray[np.int64]
    n_traces: dict[str, int]
    start_exits: NDArray[np.int64] = field(default_factory=lambda: np.zeros(2, np.int64))

    def __post_init__(self) -> None:
        exits = np.asarray(self.start_exits, dtype=np.int64).reshape(-1)
        if exits.shape != (2,) or (exits < 0).any():
            raise ValueError(f"start_exits must be two counts >= 0 (zero-step successes, failures), got "
                             f"{self.start_exits!r}")
        object.__setattr__(self, "start_exits", exits)

    @property
    def n_states(self) -> int:
        return len(self.state_names)

    @property
    def row_totals(self) -> NDArray[np.int64]:
        """c_i = Σ_j c_ij + c_i⊕ + c_i⊖: the observations leaving each state."""
        totals: NDArray[np.int64] = self.transitions.sum(axis=1) + self.exits_success + self.exits_failure
        return totals

    def outcome_matrix(self, *, censored_moves: bool = False) -> NDArray[np.float64]:
        """[C | c⊕ | c⊖] as floats, shape (m, m + 2): each state's outcome counts, the table the homogeneity test
        compares; with ``censored_moves`` the censored traces' last moves are allocated over each state's observed
        next states — the table the estimator smooths (:func:`tracetochain.chain.outcome_matrix`)."""
        return outcome_matrix(self.transitions, self.exits_success, self.exits_failure,
                              self.initial if censored_moves else None)

    @property
    def n_fitted_traces(self) -> int:
        """Traces that contribute counts (success + failure + censored)."""
        return self.n_traces["success"] + self.n_traces["failure"] + self.n_traces["censored"]

    @property
    def n_start_exits(self) -> int:
        """Episodes that ended in success or failure before any step (the start distribution's direct exits)."""
        return int(self.start_exits.sum())

    def unvisited_states(self) -> list[str]:
        """States with no observed outgoing step (e.g. seen only as the last step of censored traces)."""
        return [self.state_names[i] for i in np.flatnonzero(self.row_totals == 0)]

    def _display(self) -> Display:
        n = self.n_traces
        names = self.state_names
        states = Table("states", ("state", "initial", "to_states", "to_success", "to_failure", "total"),
                       tuple((name, int(self.initial[i]), int(self.transitions[i].sum()), int(self.exits_success[i]),
                              int(self.exits_failure[i]), int(self.row_totals[i])) for i, name in enumerate(names)))
        rows, cols = np.nonzero(self.transitions)
        pairs = Table("transitions", ("from", "to", "count"),
                      tuple((names[i], names[j], int(self.transitions[i, j])) for i, j in zip(rows, cols, strict=True)),
                      shown=False)
        zero = (f"; {self.n_start_exits} ended before any step ({int(self.start_exits[0])} success, "
                f"{int(self.start_exits[1])} failure)" if self.n_start_exits else "")
        return Display(f"{self.n_states} states, {int(self.transitions.sum())} transitions from {self.n_fitted_traces} "
                       f"traces ({n.get('success', 0)} success, {n.get('failure', 0)} failure, "
                       f"{n.get('censored', 0)} censored){zero}", kind="Transition counts", tables=(states, pairs))

    def to_dict(self) -> dict[str, Any]:
        return {
            "state_names": list(self.state_names),
            "transitions": self.transitions.tolist(),
            "exits_success": self.exits_success.tolist(),
            "exits_failure": self.exits_failure.tolist(),
            "initial": self.initial.tolist(),
            "start_exits": self.start_exits.tolist(),
            "n_traces": dict(self.n_traces),
        }

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> TransitionCounts:
        """The counts of :meth:`to_dict` (documents written before zero-step episodes were counted: none)."""
        names = tuple(str(s) for s in doc["state_names"])
        m = len(names)
        return cls(names, np.asarray(doc["transitions"], dtype=np.int64).reshape(m, m),
                   np.asarray(doc["exits_success"], dtype=np.int64), np.asarray(doc["exits_failure"], dtype=np.int64),
                   np.asarray(doc["initial"], dtype=np.int64), {str(k): int(v) for k, v in doc["n_traces"].items()},
                   np.asarray(doc.get("start_exits", (0, 0)), dtype=np.int64))


def zero_step_outcome_codes(records: Iterable[Mapping[str, Any]]) -> NDArray[np.int64]:
    """Outcome codes (0 success, 1 failure, 2 censored, 3 invalid) of zero-step episodes given as their trace-level
    records (``TraceTable.report.zero_step``; the readers validated every outcome)."""
    code = {name: i for i, name in enumerate(OUTCOME_VALUES)}
    out = []
    for rec in records:
        value = str(rec.get("outcome"))
        if value not in code:
            raise ValueError(f"zero-step episode {rec.get('trace_id')!r} has outcome {value!r}; expected one of "
                             f"{', '.join(OUTCOME_VALUES)}")
        out.append(code[value])
    return np.asarray(out, dtype=np.int64)


def _start_exits(zero_outcomes: NDArray[np.int64]) -> NDArray[np.int64]:
    by = np.bincount(zero_outcomes, minlength=4)
    return np.array([by[_SUCCESS], by[_FAILURE]], dtype=np.int64)


_UNKNOWN_STATE_HINT = "add it to the state list or relabel those steps"


def check_known_states(labels: Iterable[str], states: Collection[str], source: str, *, of: str = "the given states",
                       hint: str = _UNKNOWN_STATE_HINT) -> None:
    """Refuse labels outside a fixed state vocabulary: a :class:`TraceValidationError` naming the first such label
    and how many there are (``of`` names the vocabulary, ``hint`` says how to fix it). One message for a table in
    memory and for a corpus counted partition by partition."""
    unknown = [s for s in labels if s not in states]
    if unknown:
        raise TraceValidationError(f"state {unknown[0]!r} occurs in the traces but is not in {of} ({len(unknown)} "
                                   "unknown label(s))", source=source, field="state", hint=hint)


def state_codes(traces: TraceTable, states: Sequence[str], *, of: str = "the given states",
                hint: str = _UNKNOWN_STATE_HINT) -> NDArray[np.int64]:
    """The index into ``states`` of every step's state label: :meth:`TraceTable.state_labels` recoded to a fixed
    vocabulary (a chain's, a state model's, or one the user gave); a label outside it is refused
    (:func:`check_known_states`).
    """
    codes, names = traces.state_labels()
    pos = {s: i for i, s in enumerate(states)}
    check_known_states(names, pos, traces.report.source, of=of, hint=hint)
    if not codes.size:
        return codes
    out: NDArray[np.int64] = np.array([pos[s] for s in names], dtype=np.int64)[codes]
    return out


def count_transitions(traces: TraceTable, states: list[str] | tuple[str, ...] | None = None) -> TransitionCounts:
    """Count transitions, exits and first states of every non-invalid trace, and the zero-step episodes the reader
    kept beside the table (``traces.report.zero_step``) as start exits.

    ``states`` fixes the state vocabulary and its order (states never observed get empty rows); by default the
    states are the labels seen, in order of first appearance.
    """
    if states is not None:
        names = [str(s) for s in states]
        if len(set(names)) != len(names):
            raise ValueError("states must be unique")
        codes = state_codes(traces, names)
    else:
        codes, names = traces.state_labels()
    return count_transitions_from_codes(codes, traces.offsets, traces.outcomes(), names,
                                        zero_step_outcomes=zero_step_outcome_codes(traces.report.zero_step))


def count_transitions_from_codes(codes: NDArray[np.integer], offsets: NDArray[np.integer],
                                 outcomes: NDArray[np.integer],
                                 state_names: list[str] | tuple[str, ...], *,
                                 zero_step_outcomes: NDArray[np.integer] | None = None) -> TransitionCounts:
    """The counts of :func:`count_transitions` from raw arrays, without a :class:`TraceTable`.

    Parameters
    ----------
    codes : (n_steps,) int array
        State of every step as an index into ``state_names``; rows sorted by (trace, step).
    offsets : (n_traces + 1,) int array
        Trace i occupies rows ``offsets[i]:offsets[i + 1]`` (every trace has at least one step).
    outcomes : (n_traces,) int array
        Outcome per trace: 0 success, 1 failure, 2 censored, 3 invalid (``TraceTable.outcomes()``).
    state_names : sequence of str
        The state vocabulary, in order.
    zero_step_outcomes : int array, optional
        Outcome codes of the episodes that ended before any step (:func:`zero_step_outcome_codes`): successes and
        failures become start exits, and all are counted in ``n_traces``.

    The rules are those of Tran-Truong & Le (2026) (docs/formats.md, "From an episode to counts"): c_ij counts
    consecutive steps i → j inside a valid trace, c_i⊕ / c_i⊖ the last state of each success / failure trace, the
    initial counts the first state of every valid trace; censored traces add transitions and no exit; invalid traces
    add nothing. The one counting of the package: :func:`count_transitions` calls it on a table's codes, and the
    summaries of a corpus in memory or partition by partition (``tracetochain.analysis``) on theirs.

    >>> import numpy as np
    >>> c = count_transitions_from_codes(np.array([0, 1, 1, 0]), np.array([0, 3, 4]), np.array([0, 1]), ["a", "b"])
    >>> c.transitions.tolist(), c.exits_success.tolist(), c.exits_failure.tolist(), c.initial.tolist()
    ([[0, 1], [0, 1]], [0, 1], [1, 0], [2, 0])
    """
    names = tuple(str(s) for s in state_names)
    m = len(names)
    check_state_count(m, "the traces")  # before the m × m count matrix is allocated
    codes = np.asarray(codes, dtype=np.int64)
    offsets = np.asarray(offsets, dtype=np.int64)
    outcome = np.asarray(outcomes, dtype=np.int64)
    n_traces = offsets.size - 1
    if codes.ndim != 1 or offsets.ndim != 1 or n_traces < 0:
        raise ValueError("codes and offsets must be 1-d arrays (offsets holds n_traces + 1 entries)")
    if outcome.shape != (n_traces,):
        raise ValueError(f"need one outcome per trace ({n_traces}), got shape {outcome.shape}")
    lengths = np.diff(offsets)
    if offsets[0] != 0 or offsets[-1] != codes.size or (lengths < 1).any():
        raise ValueError("offsets must start at 0, end at len(codes) and give every trace at least one step")
    if codes.size and (codes.min() < 0 or codes.max() >= m):
        raise ValueError(f"state codes must lie in 0..{m - 1}")
    if outcome.size and (outcome.min() < _SUCCESS or outcome.max() > _INVALID):
        raise ValueError("outcome codes must lie in 0..3 (success, failure, censored, invalid)")
    zero = np.zeros(0, np.int64) if zero_step_outcomes is None else np.asarray(zero_step_outcomes, dtype=np.int64)
    if zero.size and (zero.min() < _SUCCESS or zero.max() > _INVALID):
        raise ValueError("zero-step outcome codes must lie in 0..3 (success, failure, censored, invalid)")
    n_by_outcome = np.bincount(outcome, minlength=4) + np.bincount(zero, minlength=4)
    valid_trace = outcome != _INVALID
    # Transitions: consecutive rows of one valid trace (a pair crosses a boundary where the next row starts a trace).
    same = np.ones(max(codes.size - 1, 0), dtype=bool)
    same[offsets[1:-1] - 1] = False
    same &= np.repeat(valid_trace, lengths)[:-1]
    pair = codes[:-1][same] * m + codes[1:][same]
    transitions = np.bincount(pair, minlength=m * m).reshape(m, m) if m else np.zeros((0, 0), np.int64)
    last_state = codes[offsets[1:] - 1] if n_traces else np.zeros(0, np.int64)
    exits_success = np.bincount(last_state[outcome == _SUCCESS], minlength=m)
    exits_failure = np.bincount(last_state[outcome == _FAILURE], minlength=m)
    initial = np.bincount(codes[offsets[:-1]][valid_trace], minlength=m) if n_traces else np.zeros(m, np.int64)
    return TransitionCounts(
        names,
        transitions.astype(np.int64),
        exits_success.astype(np.int64),
        exits_failure.astype(np.int64),
        initial.astype(np.int64),
        {o.value: int(n_by_outcome[i]) for i, o in enumerate(Outcome)},
        _start_exits(zero),
    )


def per_trace_counts(codes: NDArray[np.int64], offsets: NDArray[np.int64], outcomes: NDArray[np.int8],
                     n_states: int) -> scipy.sparse.csr_matrix:
    """Each trace's count contribution as a sparse (n_traces × (m² + 3m)) matrix (the counting rules).

    Columns: [0, m²) transitions i → j at i·m + j (consecutive steps of the trace); [m², m² + m) the success exit from
    the last state; [m² + m, m² + 2m) the failure exit; [m² + 2m, m² + 3m) the first state. Censored traces add
    transitions and the first state, no exit. Summing the rows gives :func:`~tracetochain.count_transitions`'s counts
    (without the zero-step episodes, which have no row here: :func:`zero_step_counts` gives theirs).
    """
    m = int(n_states)
    n = offsets.size - 1
    lengths = np.diff(offsets)
    trace_of_row = np.repeat(np.arange(n), lengths)
    same = trace_of_row[1:] == trace_of_row[:-1]
    t_rows = trace_of_row[:-1][same]
    t_cols = codes[:-1][same] * m + codes[1:][same]
    last = codes[offsets[1:] - 1] if n else np.zeros(0, np.int64)
    first = codes[offsets[:-1]] if n else np.zeros(0, np.int64)
    succ = np.flatnonzero(outcomes == _SUCCESS)
    fail = np.flatnonzero(outcomes == _FAILURE)
    rows = np.concatenate([t_rows, succ, fail, np.arange(n)])
    cols = np.concatenate([t_cols, m * m + last[succ], m * m + m + last[fail], m * m + 2 * m + first])
    return scipy.sparse.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n, m * m + 3 * m))


def zero_step_counts(zero_outcomes: NDArray[np.integer]) -> scipy.sparse.csr_matrix:
    """The count contribution of each zero-step episode as a sparse (n × 2) matrix of start exits: column 0 a
    success, column 1 a failure (censored and invalid episodes contribute an empty row). Appended to the columns of
    :func:`per_trace_counts`, it gives the count-vector layout m² + 3m + 2 whose last two entries are the start
    exits."""
    oc = np.asarray(zero_outcomes, dtype=np.int64)
    rows = np.flatnonzero(oc <= _FAILURE)
    return scipy.sparse.csr_matrix((np.ones(rows.size), (rows, oc[rows])), shape=(oc.size, 2))
