"""The one integer coding of a trace's outcome, shared by every array that holds outcomes.

``TraceTable.outcomes()`` returns these codes (their order is the order of :class:`~tracetochain.traces.Outcome`,
checked in ``traces._schema``); the estimators, the audit, the models and the simulators read and write them. The
names below are the enum's members, so ``outcomes == SUCCESS`` and ``outcomes != INVALID`` read as they should and
no module writes a bare 0 or 3.
"""

from __future__ import annotations

from enum import IntEnum


class OutcomeCode(IntEnum):
    """Integer code of a trace's outcome: 0 success, 1 failure, 2 censored, 3 invalid."""

    SUCCESS = 0
    FAILURE = 1
    CENSORED = 2  # stopped by a budget or a timeout: its transitions count, it has no exit
    INVALID = 3  # an infrastructure error: excluded from fitting, counted


SUCCESS = OutcomeCode.SUCCESS
FAILURE = OutcomeCode.FAILURE
CENSORED = OutcomeCode.CENSORED
INVALID = OutcomeCode.INVALID

__all__ = ["CENSORED", "FAILURE", "INVALID", "SUCCESS", "OutcomeCode"]
