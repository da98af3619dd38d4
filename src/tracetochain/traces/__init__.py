"""Canonical traces: the contract between readers and everything downstream."""

from tracetochain._outcome import OutcomeCode
from tracetochain.traces._schema import COLUMNS, TRACE_SCHEMA_VERSION, Outcome, StepKind
from tracetochain.traces._table import IngestReport, Problem, TraceTable

__all__ = ["COLUMNS", "TRACE_SCHEMA_VERSION", "IngestReport", "Outcome", "OutcomeCode", "Problem", "StepKind",
           "TraceTable"]
