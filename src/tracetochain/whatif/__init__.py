"""What-if edits, bottleneck ranking (and, next, compare and drift): the engineering questions."""

from tracetochain.whatif._analysis import (
    Bottleneck,
    BottleneckReport,
    EdgeCost,
    WhatIfResult,
    bottlenecks,
    what_if,
)
from tracetochain.whatif._edits import (
    Edit,
    EditError,
    RemoveState,
    Reroute,
    ScaleEdge,
    SetEdge,
    SetRetry,
    apply_edits,
)
from tracetochain.whatif._parse import load_edits, parse_edge_cost, parse_edit

__all__ = ["Bottleneck", "BottleneckReport", "EdgeCost", "Edit", "EditError", "RemoveState", "Reroute",
           "ScaleEdge", "SetEdge", "SetRetry", "WhatIfResult", "apply_edits", "bottlenecks", "load_edits",
           "parse_edge_cost", "parse_edit", "what_if"]
