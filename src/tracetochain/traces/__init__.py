"""Canonical traces: the contract between readers and everything downstream."""

from tracetochain.traces._schema import COLUMNS, TRACE_SCHEMA_VERSION, Outcome, StepKind
from tracetochain.traces._table import IngestReport, TraceTable, read_traces

__all__ = ["COLUMNS", "TRACE_SCHEMA_VERSION", "IngestReport", "Outcome", "StepKind", "TraceTable", "read_traces"]
