"""The one integer coding of a trace's outcome, shared by every array that holds outcomes.

``TraceTable.outcomes()`` returns these codes (their order is the order of :class:`~tracetochain.traces.Outcome`,
checked in ``traces._schema``); the estimators, the audit, the models and the simulators read and write them. The
names below equal the enum's members (as plain ints, below says why), so ``outcomes == SUCCESS`` and
``outcomes != INVALID`` read as they should and no module writes a bare 0 or 3.
"""

from __future__ import annotations

from enum import IntEnum


class OutcomeCode(IntEnum):
    """Integer code of a trace's outcome: 0 success, 1 failure, 2 censored, 3 invalid."""

    SUCCESS = 0
    FAILURE = 1
    CENSORED = 2  # stopped by a budget or a timeout: its transitions count, it has no exit
    INVALID = 3  # an infrastructure error: excluded from fitting, counted


# Plain ints equal to the members: numpy looks up several dunder attributes on an operand's type, and on an IntEnum
# each miss goes through EnumType.__getattr__ in Python (~5 µs an array operation; 3.3 million of them, 9 s, in one
# `--model auto` run on the mini-swe-agent corpus).
SUCCESS: int = int(OutcomeCode.SUCCESS)
FAILURE: int = int(OutcomeCode.FAILURE)
CENSORED: int = int(OutcomeCode.CENSORED)
INVALID: int = int(OutcomeCode.INVALID)

__all__ = ["CENSORED", "FAILURE", "INVALID", "SUCCESS", "OutcomeCode"]
