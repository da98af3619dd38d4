"""Compare two trace sets (two agents, two versions, before/after a prompt change).

The implementation is :mod:`tracetochain.analysis._compare` (one pipeline for a corpus in memory and one read
partition by partition); this module keeps the public names where users import them from.
"""

from __future__ import annotations

import pyarrow as pa

from tracetochain.analysis.shared import MIN_TRACES_PER_SIDE, Comparison, compare
from tracetochain.traces import TraceTable


def concat_traces(a: TraceTable, b: TraceTable, prefixes: tuple[str, str] = ("A/", "B/")) -> TraceTable:
    """One table with the traces of ``a`` then ``b``; trace ids get ``prefixes`` so they cannot collide."""
    parts = []
    for t, prefix in zip((a, b), prefixes, strict=True):
        table = t.to_arrow()
        ids = pa.array([prefix + str(x) for x in table.column("trace_id").to_pylist()], pa.string())
        parts.append(table.set_column(table.column_names.index("trace_id"), "trace_id", ids))
    merged = pa.concat_tables(parts, promote_options="permissive")
    return TraceTable.from_arrow(merged, source=f"{a.report.source} + {b.report.source}", format="union")


__all__ = ["MIN_TRACES_PER_SIDE", "Comparison", "compare", "concat_traces"]
