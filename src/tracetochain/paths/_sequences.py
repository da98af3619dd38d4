"""The state paths of a corpus as flat arrays: what path-pattern inference reads.

A :class:`PathSequences` holds, for the traces whose outcome is known (success or failure), the state code of every
step (one flat array cut by ``offsets``), whether the step itself failed (the canonical ``error`` column), the
outcome, the task and the trace id. Censored and invalid traces have no success/failure to compare and are counted,
not kept. Partitions of a corpus each give one; they concatenate (:func:`merge_sequences`) and are put in one
canonical order (traces by id, states by name: :meth:`PathSequences.canonical`), so a corpus read whole and read
partition by partition on any engine yield the same arrays and therefore the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow.compute as pc
from numpy.typing import NDArray

from tracetochain._outcome import CENSORED, FAILURE, INVALID, SUCCESS
from tracetochain.exceptions import TraceValidationError


@dataclass(frozen=True, eq=False)
class PathSequences:
    """Flat state paths of the success/failure traces (module docstring).

    ``codes[offsets[i]:offsets[i + 1]]`` are trace ``i``'s states (indices into ``state_names``), ``errors`` the same
    steps' error flags, ``success[i]`` its outcome, ``tasks[i]`` its task (``None`` when the traces carry no task),
    ``trace_ids[i]`` its id; ``left_out`` counts the censored and invalid traces not kept.
    """

    codes: NDArray[np.int64]
    errors: NDArray[np.bool_]
    offsets: NDArray[np.int64]
    success: NDArray[np.bool_]
    tasks: tuple[str | None, ...]
    trace_ids: tuple[str, ...]
    state_names: tuple[str, ...]
    left_out: dict[str, int]

    @property
    def n_traces(self) -> int:
        return int(self.offsets.size - 1)

    @property
    def lengths(self) -> NDArray[np.int64]:
        return np.diff(self.offsets)

    @classmethod
    def from_table(cls, traces: Any, codes: NDArray[np.int64], names: tuple[str, ...] | list[str]
                   ) -> PathSequences:
        """The success/failure traces of a :class:`~tracetochain.TraceTable` whose steps have state ``codes``."""
        outcome = traces.outcomes()
        keep = (outcome == SUCCESS) | (outcome == FAILURE)
        offsets = np.asarray(traces.offsets, np.int64)
        lengths = np.diff(offsets)
        step_keep = np.repeat(keep, lengths)
        codes = np.asarray(codes, np.int64)
        if "error" in traces.columns:
            err = pc.fill_null(traces.to_arrow().column("error"), False)
            errors = np.asarray(err.to_numpy(zero_copy_only=False), bool)
        else:
            errors = np.zeros(codes.size, bool)
        task_col = traces.trace_column("task_id")
        tasks_all = task_col.to_pylist() if task_col.null_count < len(task_col) else [None] * traces.n_traces
        ids_all = traces.trace_ids
        idx = np.flatnonzero(keep)
        new_off = np.concatenate([[0], np.cumsum(lengths[keep])]).astype(np.int64)
        return cls(codes=codes[step_keep], errors=errors[step_keep], offsets=new_off,
                   success=(outcome[keep] == SUCCESS), tasks=tuple(tasks_all[i] for i in idx),
                   trace_ids=tuple(ids_all[i] for i in idx), state_names=tuple(str(n) for n in names),
                   left_out={"censored": int((outcome == CENSORED).sum()), "invalid": int((outcome == INVALID).sum()),
                             "zero_step": int(traces.report.n_zero_step)})

    def canonical(self) -> PathSequences:
        """The same paths with traces ordered by id and states by name (the order every result is computed in)."""
        order_states = sorted(range(len(self.state_names)), key=lambda i: self.state_names[i])
        recode = np.empty(len(self.state_names), np.int64)
        recode[np.asarray(order_states, np.int64)] = np.arange(len(order_states))
        names = tuple(self.state_names[i] for i in order_states)
        codes = recode[self.codes] if self.codes.size else self.codes
        order = sorted(range(self.n_traces), key=lambda i: self.trace_ids[i])
        if len(set(self.trace_ids)) < self.n_traces:
            seen: set[str] = set()
            dup = next(t for t in self.trace_ids if t in seen or seen.add(t))  # type: ignore[func-returns-value]
            raise TraceValidationError(f"trace id {dup!r} appears twice (in two files or partitions)",
                                       field="trace_id", hint="give every trace a unique trace_id")
        idx = np.asarray(order, np.int64)
        new_lengths = self.lengths[idx]
        new_off = np.concatenate([[0], np.cumsum(new_lengths)]).astype(np.int64)
        take = np.repeat(self.offsets[:-1][idx] - new_off[:-1], new_lengths) + np.arange(int(new_off[-1]))
        return PathSequences(codes=codes[take], errors=self.errors[take],
                             offsets=new_off, success=self.success[idx],
                             tasks=tuple(self.tasks[i] for i in order),
                             trace_ids=tuple(self.trace_ids[i] for i in order),
                             state_names=names, left_out=dict(self.left_out))


def merge_sequences(a: PathSequences, b: PathSequences) -> PathSequences:
    """``a`` then ``b`` on one state vocabulary (``a``'s names, then ``b``'s new ones in order)."""
    names = list(a.state_names)
    index = {n: i for i, n in enumerate(names)}
    for n in b.state_names:
        if n not in index:
            index[n] = len(names)
            names.append(n)
    recode = np.asarray([index[n] for n in b.state_names], np.int64)
    b_codes = recode[b.codes] if b.codes.size else b.codes
    return PathSequences(codes=np.concatenate([a.codes, b_codes]), errors=np.concatenate([a.errors, b.errors]),
                         offsets=np.concatenate([a.offsets, a.offsets[-1] + b.offsets[1:]]),
                         success=np.concatenate([a.success, b.success]), tasks=a.tasks + b.tasks,
                         trace_ids=a.trace_ids + b.trace_ids, state_names=tuple(names),
                         left_out={k: a.left_out.get(k, 0) + b.left_out.get(k, 0)
                                   for k in {*a.left_out, *b.left_out}})


def sequences_from_lists(paths: list[list[str]], success: list[bool], *, errors: list[list[bool]] | None = None,
                         tasks: list[str | None] | None = None, trace_ids: list[str] | None = None) -> PathSequences:
    """Paths given as lists of state names (tests, studies, notebooks).

    >>> s = sequences_from_lists([["a", "b"], ["a"]], [True, False])
    >>> s.n_traces, s.state_names, s.codes.tolist()
    (2, ('a', 'b'), [0, 1, 0])
    """
    if len(paths) != len(success):
        raise ValueError(f"{len(paths)} paths but {len(success)} outcomes")
    names = sorted({s for p in paths for s in p})
    index = {n: i for i, n in enumerate(names)}
    codes = np.asarray([index[s] for p in paths for s in p], np.int64)
    errs = np.asarray([bool(e) for row in errors for e in row], bool) if errors is not None \
        else np.zeros(codes.size, bool)
    if errs.size != codes.size:
        raise ValueError("errors must have one flag per step")
    ids = tuple(trace_ids) if trace_ids is not None else tuple(f"t{i:06d}" for i in range(len(paths)))
    return PathSequences(codes=codes, errors=errs,
                         offsets=np.concatenate([[0], np.cumsum([len(p) for p in paths])]).astype(np.int64),
                         success=np.asarray(success, bool),
                         tasks=tuple(tasks) if tasks is not None else (None,) * len(paths),
                         trace_ids=ids, state_names=tuple(names), left_out={"censored": 0, "invalid": 0})

