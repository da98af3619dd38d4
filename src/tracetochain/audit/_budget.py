"""What a step-budget curve R(d) means, and a check of it against runs made at a real step cap.

R(d) — from the chain or counted from the traces — is the probability that a run of *this corpus* succeeds within
d steps. It is not the success rate the agent would reach if it were capped at d steps: agents pace themselves to an
announced budget (a run told it has 15 turns plans for 15 turns), so thresholding a run made with a 100-step cap at d
= 15 can badly understate what a 15-step run achieves (a public re-run of an agent at real 15/30/100-turn caps found
27 passes at 15 turns where thresholding the 100-turn runs predicted 8). :data:`BUDGET_CAVEAT` is printed beside every
budget figure.

When runs at two or more caps exist (a trace-level field naming each run's cap), :func:`budget_cap_check` compares,
for every smaller cap c, the prediction from the runs at the largest cap C — R̂_C(c), the share of C-capped runs that
succeeded within c steps (censored and failed runs in the denominator, as everywhere) — with the pass rate of the runs
actually capped at c. The difference gets the MOVER interval of two independent proportions (Newcombe 1998, method
10: Wilson intervals of each side combined by square-and-add); an interval that excludes 0 says thresholding does not
predict the capped runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from tracetochain._display import Display, ResultDisplay, Table
from tracetochain._outcome import INVALID, SUCCESS
from tracetochain.audit._common import json_dict, trace_lengths
from tracetochain.audit._holdout import wilson_interval
from tracetochain.traces import TraceTable

BUDGET_CAVEAT = ("R(d) is the share of these runs that succeeded within d steps under the step cap they ran with, "
                 "not the success rate the agent would reach if capped at d steps (agents pace themselves to an "
                 "announced budget: a re-run at real 15/30/100-turn caps found 27 passes at 15 turns where "
                 "thresholding the 100-turn runs predicted 8). To know the success rate at a cap, run at that cap "
                 "(budget_cap_check compares the two).")


@dataclass(frozen=True)
class CapComparison:
    """Thresholded prediction from the largest cap against the runs made at a smaller cap."""

    cap: float
    reference_cap: float
    predicted: float
    predicted_successes: int
    n_reference: int
    observed: float
    observed_successes: int
    n_observed: int
    difference: float
    lower: float
    upper: float

    @property
    def consistent(self) -> bool:
        return self.lower <= 0.0 <= self.upper

    def to_dict(self) -> dict[str, Any]:
        return json_dict({**self.__dict__, "consistent": self.consistent})


@dataclass(frozen=True, repr=False)
class BudgetCapCheck(ResultDisplay):
    """The comparisons of :func:`budget_cap_check`, one per smaller cap."""

    field: str
    comparisons: tuple[CapComparison, ...]
    confidence: float

    def to_dict(self) -> dict[str, Any]:
        return {"field": self.field, "confidence": self.confidence,
                "comparisons": [c.to_dict() for c in self.comparisons], "caveat": BUDGET_CAVEAT,
                "interval": "MOVER (Newcombe 1998, method 10) of observed − predicted, Wilson on each side"}

    def _display(self) -> Display:
        cols = ("cap", "reference_cap", "predicted", "observed", "difference", "lower", "upper", "consistent")
        rows = tuple((c.cap, c.reference_cap, c.predicted, c.observed, c.difference, c.lower, c.upper, c.consistent)
                     for c in self.comparisons)
        bad = [c for c in self.comparisons if not c.consistent]
        lines = [f"cap {c.cap:g}: thresholding the {c.reference_cap:g}-step runs predicts {c.predicted:.2f} "
                 f"({c.predicted_successes}/{c.n_reference}), the runs capped at {c.cap:g} pass {c.observed:.2f} "
                 f"({c.observed_successes}/{c.n_observed}); difference {c.difference:+.2f} "
                 f"[{c.lower:+.2f}, {c.upper:+.2f}]" for c in self.comparisons]
        title = ("thresholding predicts every capped run set" if not bad else
                 f"thresholding mispredicts {len(bad)} of {len(self.comparisons)} cap(s)")
        return Display(title, kind="Step-cap check", lines=tuple(lines),
                       tables=(Table("caps", cols, rows),))


def budget_cap_check(traces: TraceTable, field: str, *, confidence: float = 0.95) -> BudgetCapCheck:
    """Compare R̂_C(c) of the runs at the largest cap C with the pass rate of the runs at each smaller cap c (module
    docstring). ``field`` is a trace-level column holding each run's step cap (a number); runs without it are an
    error (a run whose cap is unknown cannot be placed)."""
    if field not in traces.columns:
        raise ValueError(f"no field {field!r} on the traces (fields: {', '.join(traces.columns)}); name the field "
                         "that holds each run's step cap")
    import pyarrow as pa

    from tracetochain.traces.shared import TRACE_LEVEL

    if field in TRACE_LEVEL:
        col = traces.trace_column(field)
    else:  # an extra column: the value on each trace's first step (a run's cap is one number per run)
        col = traces.to_arrow().column(field).combine_chunks().take(pa.array(traces.offsets[:-1]))
    if col.null_count:
        missing = [tid for tid, v in zip(traces.trace_ids, col.to_pylist(), strict=True) if v is None][:5]
        raise ValueError(f"{col.null_count} trace(s) have no {field!r} (e.g. {', '.join(map(str, missing))}): give "
                         "every run its step cap")
    try:
        caps = np.asarray(col.to_pylist(), dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{field!r} must hold numbers (a step cap per run)") from None
    oc = traces.outcomes()
    ok = oc != INVALID
    lengths = trace_lengths(traces)
    levels = np.unique(caps[ok])
    if levels.size < 2:
        raise ValueError(f"runs at two or more caps are needed; {field!r} takes {levels.size} value(s)")
    C = float(levels[-1])
    ref = ok & (caps == C)
    n_ref = int(ref.sum())
    out = []
    for c in levels[:-1]:
        at = ok & (caps == c)
        n_obs = int(at.sum())
        k_pred = int((ref & (oc == SUCCESS) & (lengths <= c)).sum())
        k_obs = int((at & (oc == SUCCESS)).sum())
        p1, p2 = k_pred / n_ref, k_obs / n_obs
        l1, u1 = wilson_interval(k_pred, n_ref, confidence)
        l2, u2 = wilson_interval(k_obs, n_obs, confidence)
        d = p2 - p1
        lo = d - math.sqrt((p2 - l2) ** 2 + (u1 - p1) ** 2)
        hi = d + math.sqrt((u2 - p2) ** 2 + (p1 - l1) ** 2)
        out.append(CapComparison(float(c), C, p1, k_pred, n_ref, p2, k_obs, n_obs, d, lo, hi))
    return BudgetCapCheck(field, tuple(out), confidence)


__all__ = ["BUDGET_CAVEAT", "BudgetCapCheck", "CapComparison", "budget_cap_check"]
