"""History features of every step, computed from its trace's prefix: what the agent went through before this step.

Each feature is a small non-negative integer known the moment the step happens (causal: it reads the steps before
it, never the trace's end), so states refined by them label a running trace. For step i of a trace (0-based
position j), with the step's *base* state b_i (its label or vocabulary category):

* ``errors`` — steps before i with ``error`` true;
* ``failed_tests`` — test steps before i that failed; ``fail_streak`` — failed tests since the last passing test
  (a passing test resets it, other steps do not);
* ``retries`` — steps before i that repeated a failed step (same action as the step before it, which had an error);
* ``repeat`` — length of the run of identical actions ending at i (1: not a repeat). An action is the base state
  with the tool name and the step text, so ``lookup`` three times with the same query is ``repeat = 3``;
* ``since_edit`` — steps before i since the last edit (0: the step before was an edit; j when there was none);
* ``loop`` — a return: the number of lags k ∈ [2, ``LOOP_WINDOW``] with b_{i−k} = b_i when b_{i−1} ≠ b_i (the
  agent left the state and came back within the window), else 0;
* ``step`` — the step number j + 1.

What counts as a test, a failure and an edit is read from the step fields, with no configuration: a **test** is a
step whose base state or tool name contains "test", or an ``EXECUTE`` step (shell vocabulary) whose text does; a
step **failed** when its ``error`` is true or its base state names a failure ("fail", "error"); an **edit** is a
step whose base state names one ("edit", "write", "patch": the shell vocabulary's ``EDIT``). All of it is
vectorised over the table's columns (one pass per feature, no loop over steps).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from tracetochain.traces import TraceTable

#: The window of the loop detector (a return to a state within this many steps).
LOOP_WINDOW = 6
#: Every history feature, in the order they are tried (ties between equally good splits go to the earlier one).
HISTORY_FEATURES = ("failed_tests", "fail_streak", "errors", "retries", "repeat", "since_edit", "loop", "step")
#: The thresholds t tried for each feature (a split puts value < t on one side, ≥ t on the other): a fixed grid,
#: so that the number of candidate splits is known in advance (it sets the Bonferroni level) and names stay round.
THRESHOLDS: dict[str, tuple[int, ...]] = {
    "failed_tests": (1, 2, 3, 4, 5, 8, 12, 20),
    "fail_streak": (1, 2, 3, 4, 5, 8),
    "errors": (1, 2, 3, 4, 5, 8, 12, 20),
    "retries": (1, 2, 3, 5, 8),
    "repeat": (2, 3, 4, 5, 8),
    "since_edit": (1, 2, 3, 5, 8, 12, 20, 30),
    "loop": (1, 2, 3),
    "step": (5, 10, 15, 20, 30, 40, 60, 80, 120),
}
#: The smallest value of each feature (a lower bound equal to it is no condition).
MINIMUM = {"repeat": 1, "step": 1}

#: "≥1" in words.
_AT_LEAST_ONE = {"failed_tests": "after a failing test", "fail_streak": "last test failed",
                 "errors": "after an error", "retries": "after a retry", "since_edit": "not right after an edit",
                 "loop": f"back within {LOOP_WINDOW} steps"}
_TEST = "(?i)test"
_FAIL = "(?i)fail|error"
_EDIT = "(?i)edit|write|patch"


@dataclass(frozen=True, eq=False)
class HistoryFeatures:
    """The history features of every step (table order): ``values[name]`` is an int64 array of length n_steps."""

    values: dict[str, NDArray[np.int64]]

    def __getitem__(self, name: str) -> NDArray[np.int64]:
        return self.values[name]


def _column(traces: TraceTable, name: str, type_: pa.DataType) -> pa.Array:
    table = traces.to_arrow()
    if name in table.column_names:
        return table.column(name).combine_chunks()
    return pa.nulls(traces.n_steps, type_)


def _matches(arr: pa.Array, pattern: str) -> NDArray[np.bool_]:
    return np.asarray(pc.match_substring_regex(arr, pattern=pattern).fill_null(False), dtype=bool)


def _codes(arr: pa.Array) -> NDArray[np.int64]:
    """Equal integers for equal values (−1 for null)."""
    if len(arr) == 0:
        return np.zeros(0, np.int64)
    enc = pc.dictionary_encode(arr)
    return np.asarray(enc.indices.fill_null(-1), dtype=np.int64)


def _count_before(flag: NDArray[np.bool_], starts: NDArray[np.int64]) -> NDArray[np.int64]:
    """Per step: how many earlier steps of its trace have ``flag`` (``starts``: each step's trace's first row)."""
    c = np.cumsum(flag, dtype=np.int64)
    before_trace = c[starts] - flag[starts]
    out: NDArray[np.int64] = c - flag - before_trace
    return out


def _last_before(flag: NDArray[np.bool_], starts: NDArray[np.int64]) -> NDArray[np.int64]:
    """Per step: the row of the last earlier step of its trace with ``flag``, or −1."""
    idx = np.arange(flag.size, dtype=np.int64)
    last_incl = np.maximum.accumulate(np.where(flag, idx, -1)) if flag.size else idx
    last_excl = np.r_[-1, last_incl[:-1]] if flag.size else idx
    return np.where(last_excl >= starts, last_excl, -1).astype(np.int64)


def history_features(traces: TraceTable, base_codes: NDArray[np.int64],
                     base_names: tuple[str, ...] | list[str]) -> HistoryFeatures:
    """The history features (module docstring) of every step of ``traces``, given each step's base state.

    ``base_codes`` index ``base_names`` (one per step; −1 for a step whose base state is unknown: it takes part as a
    state of its own, equal only to itself within its trace).
    """
    n = traces.n_steps
    offsets = np.asarray(traces.offsets, dtype=np.int64)
    lengths = np.diff(offsets)
    starts = np.repeat(offsets[:-1], lengths)
    idx = np.arange(n, dtype=np.int64)
    j = idx - starts
    base = np.asarray(base_codes, dtype=np.int64)
    names = pa.array([str(x) for x in base_names], pa.string())
    name_test = _matches(names, _TEST) if len(names) else np.zeros(0, bool)
    name_fail = _matches(names, _FAIL) if len(names) else np.zeros(0, bool)
    name_edit = _matches(names, _EDIT) if len(names) else np.zeros(0, bool)
    name_exec = np.array([str(x).upper() == "EXECUTE" for x in base_names], bool)

    def by_name(flags: NDArray[np.bool_]) -> NDArray[np.bool_]:
        out = np.zeros(n, bool)
        known = base >= 0
        if flags.size:
            out[known] = flags[base[known]]
        return out

    tool = _column(traces, "tool_name", pa.string())
    text = _column(traces, "text", pa.string())
    error = np.asarray(_column(traces, "error", pa.bool_()).fill_null(False), dtype=bool) if n else np.zeros(0, bool)
    is_test = by_name(name_test) | _matches(tool, _TEST)
    executes = by_name(name_exec)
    if executes.any():
        is_test |= executes & _matches(text, _TEST)
    failed = error | by_name(name_fail)
    is_edit = by_name(name_edit)
    failed_test = is_test & failed
    passed_test = is_test & ~failed

    # An action: the base state with the tool name and the text (identical actions repeat). Each column is
    # dictionary-encoded on its own (no joined copy of long texts) and compared with the step before.
    same_prev = (j > 0) & np.r_[False, base[1:] == base[:-1]]
    for col in (tool, text):
        code = _codes(col)
        same_prev &= np.r_[False, code[1:] == code[:-1]]
    run_start = np.maximum.accumulate(np.where(same_prev, 0, idx)) if n else idx
    repeat = idx - run_start + 1
    retry = same_prev & np.r_[False, error[:-1]] if n else np.zeros(0, bool)

    failed_before = _count_before(failed_test, starts)
    last_pass = _last_before(passed_test, starts)
    c_fail = np.cumsum(failed_test, dtype=np.int64)
    at_reset = np.where(last_pass >= 0, c_fail[np.maximum(last_pass, 0)],
                        c_fail[starts] - failed_test[starts] if n else 0)
    fail_streak = (c_fail - failed_test) - at_reset if n else np.zeros(0, np.int64)

    last_edit = _last_before(is_edit, starts)
    since_edit = np.where(last_edit >= 0, idx - last_edit - 1, j)

    loop = np.zeros(n, np.int64)
    if n:
        left = np.r_[True, base[1:] != base[:-1]] & (j > 0)
        for k in range(2, LOOP_WINDOW + 1):
            back = np.zeros(n, bool)
            back[k:] = (base[k:] == base[:-k]) & (j[k:] >= k)
            loop += back & left

    values = {
        "failed_tests": failed_before,
        "fail_streak": np.asarray(fail_streak, np.int64),
        "errors": _count_before(error, starts),
        "retries": _count_before(retry, starts),
        "repeat": repeat.astype(np.int64),
        "since_edit": since_edit.astype(np.int64),
        "loop": loop,
        "step": (j + 1).astype(np.int64),
    }
    return HistoryFeatures(values)


def range_text(lo: int, hi: int | None, minimum: int = 0) -> str:
    """``[lo, hi)`` of an integer feature in words: ``≥2``, ``≤1``, ``3``, ``2–4`` ('' when it holds everything).

    >>> [range_text(2, None), range_text(0, 2), range_text(3, 4), range_text(2, 5), range_text(0, None)]
    ['≥2', '≤1', '3', '2–4', '']
    """
    if hi is None:
        return "" if lo <= minimum else f"≥{lo}"
    if hi - 1 == lo:
        return f"{lo}"
    if lo <= minimum:
        return f"≤{hi - 1}"
    return f"{lo}–{hi - 1}"


def describe_condition(feature: str, lo: int, hi: int | None) -> str:
    """A person's words for ``lo ≤ feature < hi``: "after ≥2 failing tests", "0 errors so far", "repeated ≥3×".

    >>> describe_condition("failed_tests", 2, None), describe_condition("errors", 0, 1)
    ('after ≥2 failing tests', '0 errors so far')
    >>> describe_condition("repeat", 3, None), describe_condition("repeat", 1, 2)
    ('repeated ≥3×', 'not repeated')
    >>> describe_condition("since_edit", 0, 1)
    'right after an edit'
    """
    r = range_text(lo, hi, MINIMUM.get(feature, 0))
    if not r:
        return ""
    zero = r == "0"
    one = r in ("1", "≤1")
    if r == "≥1" and feature in _AT_LEAST_ONE:
        return _AT_LEAST_ONE[feature]
    if feature == "failed_tests":
        return "no failing test yet" if zero else f"after {r} failing test{'' if one else 's'}"
    if feature == "fail_streak":
        return "no failing test since the last pass" if zero else \
            f"after {r} failing test{'' if one else 's'} in a row"
    if feature == "errors":
        return f"{r} error{'' if one else 's'} so far"
    if feature == "retries":
        return f"{r} retr{'y' if one else 'ies'} so far"
    if feature == "repeat":
        return "not repeated" if r == "1" else f"repeated {r}×"
    if feature == "since_edit":
        return "right after an edit" if zero else f"{r} step{'' if one else 's'} without an edit"
    if feature == "loop":
        return f"no return within {LOOP_WINDOW} steps" if zero else f"back {r}× within {LOOP_WINDOW} steps"
    if feature == "step":
        return f"at step {r}"
    raise ValueError(f"unknown history feature {feature!r}; use one of {', '.join(HISTORY_FEATURES)}")
