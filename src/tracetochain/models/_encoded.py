"""Traces as integer arrays, the common input of every model family.

A model family sees a trace as its sequence of observed states s_1 … s_L (codes into one alphabet) and how it
ended: success, failure, or censored (still running when the log stopped; it contributes its steps and no exit).
Invalid traces are left out and counted. Trials of one task are tied together through ``unit``: when a task id
repeats, the *likelihood unit* is the task (a mixture then gives all trials of a task the same latent class, and
held-out scores are compared task by task); otherwise every trace is its own unit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pyarrow.compute as pc
from numpy.typing import NDArray

from tracetochain._outcome import CENSORED, FAILURE, INVALID, SUCCESS
from tracetochain.chain.shared import state_codes
from tracetochain.exceptions import EmptyTraceSetError
from tracetochain.traces import TraceTable

Grouping = Literal["auto", "task", "trace"]


@dataclass(frozen=True, eq=False)
class EncodedTraces:
    """Integer-coded traces (see the module docstring).

    ``codes[offsets[i]:offsets[i + 1]]`` are the observed states of trace i (indices into ``state_names``);
    ``outcomes[i]`` is 0 success, 1 failure, 2 censored; ``unit[i]`` is the likelihood unit of trace i (its task
    when tasks repeat, else the trace itself), numbered 0 … n_units − 1 in order of first appearance.
    """

    codes: NDArray[np.int64]
    offsets: NDArray[np.int64]
    outcomes: NDArray[np.int64]
    state_names: tuple[str, ...]
    unit: NDArray[np.int64]
    grouped_by: Literal["task", "trace"]
    trace_ids: tuple[str, ...] = ()
    n_invalid: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)

    # ------------------------------------------------------------------ shape
    @property
    def n_traces(self) -> int:
        return int(self.offsets.size - 1)

    @property
    def n_steps(self) -> int:
        return int(self.codes.size)

    @property
    def n_symbols(self) -> int:
        """Size of the observed alphabet m."""
        return len(self.state_names)

    @property
    def n_units(self) -> int:
        return int(self.unit.max()) + 1 if self.unit.size else 0

    @property
    def lengths(self) -> NDArray[np.int64]:
        out: NDArray[np.int64] = np.diff(self.offsets)
        return out

    @property
    def starts(self) -> NDArray[np.int64]:
        out: NDArray[np.int64] = self.offsets[:-1]
        return out

    @property
    def trace_of_step(self) -> NDArray[np.int64]:
        return np.repeat(np.arange(self.n_traces, dtype=np.int64), self.lengths)

    @property
    def position(self) -> NDArray[np.int64]:
        """0-based position t of every step in its trace (known when the step happens: a causal feature)."""
        out: NDArray[np.int64] = np.arange(self.n_steps, dtype=np.int64) - np.repeat(self.starts, self.lengths)
        return out

    def next_outcome(self) -> NDArray[np.int64]:
        """What follows every step, as a column index into a row of m + 2 outcomes.

        ``s_{t+1}`` (0 … m − 1) inside a trace; m after the last step of a success, m + 1 after a failure, and −1
        after the last step of a censored trace (nothing observed).
        """
        m = self.n_symbols
        out = np.empty(self.n_steps, dtype=np.int64)
        if self.n_steps:
            out[:-1] = self.codes[1:]
            last = self.offsets[1:] - 1
            exit_col = np.where(self.outcomes == SUCCESS, m, np.where(self.outcomes == FAILURE, m + 1, -1))
            out[last] = exit_col
        return out

    def units_of(self, values: NDArray[np.float64]) -> NDArray[np.float64]:
        """Sum a per-trace array over the traces of each unit."""
        out: NDArray[np.float64] = np.bincount(self.unit, weights=values, minlength=self.n_units).astype(np.float64)
        return out

    def select(self, traces: NDArray[np.int64]) -> EncodedTraces:
        """The traces with the given indices (sorted), units renumbered, grouping kept."""
        sel = np.unique(np.asarray(traces, dtype=np.int64))
        lengths = self.lengths[sel]
        rows = np.repeat(self.starts[sel], lengths) + (
            np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths))
        _, unit = np.unique(self.unit[sel], return_inverse=True)
        ids = tuple(self.trace_ids[i] for i in sel) if self.trace_ids else ()
        return EncodedTraces(self.codes[rows], np.r_[0, np.cumsum(lengths)].astype(np.int64),
                             self.outcomes[sel], self.state_names, unit.astype(np.int64), self.grouped_by, ids,
                             0, self.notes)

    def outcome_counts(self) -> dict[str, int]:
        c = np.bincount(self.outcomes, minlength=3)
        return {"success": int(c[SUCCESS]), "failure": int(c[FAILURE]), "censored": int(c[CENSORED])}


def encode_traces(traces: TraceTable | EncodedTraces, state_names: tuple[str, ...] | list[str] | None = None, *,
                  group: Grouping = "auto") -> EncodedTraces:
    """Code labelled traces for the model families.

    Parameters
    ----------
    traces : TraceTable
        Labelled traces (the ``state`` column, or ``step_kind:tool_name`` where it is empty — label them with a
        state model first, e.g. :class:`~tracetochain.CategoricalStates`).
    state_names : sequence of str, optional
        The alphabet and its order. Default: the labels seen, in order of first appearance. A label outside a
        given alphabet is an error naming it.
    group : {"auto", "task", "trace"}
        The likelihood unit: ``"task"`` ties the trials of one ``task_id``; ``"trace"`` treats every trace alone;
        ``"auto"`` is ``"task"`` when some task has two or more usable traces.

    Invalid traces are left out and counted in ``n_invalid``.
    """
    if isinstance(traces, EncodedTraces):
        if state_names is not None and tuple(state_names) != traces.state_names:
            raise ValueError("these encoded traces use another alphabet; encode the TraceTable again")
        return traces
    if group not in ("auto", "task", "trace"):
        raise ValueError(f"group must be 'auto', 'task' or 'trace', got {group!r}")
    if state_names is not None:
        names = [str(s) for s in state_names]
        if len(set(names)) != len(names):
            raise ValueError("state names must be unique")
        codes = state_codes(traces, names, of="the model's alphabet",
                            hint="label these traces with the same state model as the fit traces, or refit on them")
    else:
        codes, names = traces.state_labels()
    outcome = traces.outcomes().astype(np.int64)
    valid = outcome != INVALID
    n_invalid = int((~valid).sum())
    lengths = np.diff(traces.offsets)
    keep = np.flatnonzero(valid)
    rows = np.repeat(traces.offsets[:-1][keep], lengths[keep]) + (
        np.arange(int(lengths[keep].sum())) - np.repeat(np.cumsum(lengths[keep]) - lengths[keep], lengths[keep]))
    kept_codes = np.asarray(codes, dtype=np.int64)[rows] if rows.size else np.zeros(0, np.int64)
    offsets = np.r_[0, np.cumsum(lengths[keep])].astype(np.int64)
    if keep.size == 0:
        raise EmptyTraceSetError(f"no usable traces in {traces.report.source}: {n_invalid} invalid trace(s) and "
                                 "nothing else")
    ids = traces.trace_ids
    trace_ids = tuple(ids[i] for i in keep)
    task = traces.trace_column("task_id")
    notes: list[str] = []
    grouped: Literal["task", "trace"] = "trace"
    unit = np.arange(keep.size, dtype=np.int64)
    if group != "trace" and task.null_count < traces.n_traces:
        enc = pc.dictionary_encode(task)
        tcode = np.asarray(enc.indices.fill_null(-1), dtype=np.int64)[keep]
        has = tcode >= 0
        repeats = bool(has.any() and np.bincount(tcode[has]).max() >= 2)
        if group == "task" or repeats:
            grouped = "task"
            # Traces without a task id are units of their own, numbered after the tasks.
            key = np.where(has, tcode, tcode.max(initial=0) + 1 + np.arange(keep.size))
            _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
            # Number units in order of first appearance (stable across selections of the same traces).
            order = np.argsort(first, kind="stable")
            rank = np.empty_like(order)
            rank[order] = np.arange(order.size)
            unit = rank[inverse].astype(np.int64)
            if (~has).any():
                notes.append(f"{int((~has).sum())} trace(s) without a task_id are units of their own")
    elif group == "task":
        raise ValueError("group='task' needs a task_id on the traces; use group='trace'")
    if n_invalid:
        notes.append(f"{n_invalid} invalid trace(s) left out")
    n_zero = len(getattr(traces.report, "zero_step", ()) or ())
    if n_zero:
        notes.append(f"{n_zero} episode(s) ended before any agent step: they have no path and are not modelled")
    return EncodedTraces(kept_codes, offsets, outcome[keep], tuple(str(n) for n in names), unit, grouped, trace_ids,
                         n_invalid, tuple(notes))
