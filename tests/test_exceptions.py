"""Errors keep their fields when they are pickled (a Dask worker sends its partition's error to the client)."""

from __future__ import annotations

import pickle

import pytest

from tracetochain.exceptions import (
    ChainValidationError,
    EmptyTraceSetError,
    NonAbsorbingError,
    TraceToChainError,
    TraceValidationError,
)


def test_validation_error_round_trips_with_its_fields() -> None:
    err = TraceValidationError("missing value", source="runs.jsonl", line=12, field="state",
                               hint="give every step a state")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is TraceValidationError and str(back) == str(err)
    assert (back.source, back.line, back.row, back.field, back.hint) == ("runs.jsonl", 12, None, "state",
                                                                        "give every step a state")
    assert isinstance(back, ValueError) and isinstance(back, TraceToChainError)


def test_non_absorbing_error_round_trips_with_its_states() -> None:
    err = NonAbsorbingError("states loop forever: a, b", ("a", "b"))
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is NonAbsorbingError and back.states == ("a", "b") and str(back) == str(err)
    assert isinstance(back, ChainValidationError)


@pytest.mark.parametrize("cls", [EmptyTraceSetError, ChainValidationError])
def test_plain_errors_round_trip(cls: type[Exception]) -> None:
    back = pickle.loads(pickle.dumps(cls("nothing to fit")))
    assert type(back) is cls and str(back) == "nothing to fit"
