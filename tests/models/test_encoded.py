"""Encoding traces for the families: alphabet, outcomes, units (task vs trace), selection."""

from __future__ import annotations

import numpy as np
import pytest

from tests.models.conftest import records
from tracetochain.exceptions import TraceValidationError
from tracetochain.models._encoded import encode_traces


def test_codes_offsets_outcomes_and_next_outcome() -> None:
    t = records([(["a", "b", "b"], "success"), (["b"], "failure"), (["a", "a"], "censored")])
    enc = encode_traces(t)
    assert enc.state_names == ("a", "b")
    assert enc.codes.tolist() == [0, 1, 1, 1, 0, 0]
    assert enc.offsets.tolist() == [0, 3, 4, 6]
    assert enc.outcomes.tolist() == [0, 1, 2]
    # next state inside a trace, m = 2 after a success, m + 1 after a failure, −1 after a censored end
    assert enc.next_outcome().tolist() == [1, 1, 2, 3, 0, -1]
    assert enc.position.tolist() == [0, 1, 2, 0, 0, 1]
    assert enc.grouped_by == "trace" and enc.unit.tolist() == [0, 1, 2]


def test_invalid_traces_are_left_out_and_counted() -> None:
    t = records([(["a"], "success"), (["b", "b"], "invalid"), (["a"], "failure")])
    enc = encode_traces(t)
    assert enc.n_traces == 2 and enc.n_invalid == 1
    assert any("invalid" in n for n in enc.notes)


def test_units_are_tasks_when_task_ids_repeat() -> None:
    t = records([(["a"], "success"), (["a"], "failure"), (["b"], "success"), (["a"], "success")],
                task=["x", "y", "x", "z"])
    enc = encode_traces(t)
    assert enc.grouped_by == "task"
    assert enc.unit.tolist() == [0, 1, 0, 2]
    assert encode_traces(t, group="trace").unit.tolist() == [0, 1, 2, 3]
    # no repeated task: every trace is its own unit, unless asked
    single = records([(["a"], "success"), (["b"], "failure")], task=["x", "y"])
    assert encode_traces(single).grouped_by == "trace"
    assert encode_traces(single, group="task").grouped_by == "task"


def test_given_alphabet_names_an_unknown_label() -> None:
    t = records([(["a", "zzz"], "success")])
    with pytest.raises(TraceValidationError, match="zzz"):
        encode_traces(t, ("a", "b"))
    enc = encode_traces(records([(["b"], "success")]), ("a", "b"))
    assert enc.codes.tolist() == [1] and enc.n_symbols == 2


def test_select_keeps_traces_and_renumbers_units() -> None:
    t = records([(["a", "b"], "success"), (["b"], "failure"), (["a"], "success"), (["a", "a", "b"], "failure")],
                task=["x", "y", "x", "y"])
    enc = encode_traces(t)
    sub = enc.select(np.array([3, 1]))
    assert sub.n_traces == 2 and sub.codes.tolist() == [1, 0, 0, 1]
    assert sub.unit.tolist() == [0, 0] and sub.trace_ids == ("t1", "t3")
