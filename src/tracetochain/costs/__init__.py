"""What reliability costs: tokens, dollars and seconds as rewards on the absorbing chain.

* :class:`CostModel` — per state, what one visit costs (mean, variance, and the sufficient statistics n, Σx, Σx²
  that add up over partitions), estimated from the steps' ``tokens_in``, ``tokens_out``, ``cost_usd`` and
  ``t_start``/``t_end``, or — when a source reports only episode totals — by non-negative least squares of the
  totals on the visit counts. The fitted chain carries it in ``metadata["costs"]``.
* :func:`summarize_costs` — expected cost per attempt, given success and given failure, its spread, the spend per
  success under independent retries (E[C]/R∞), the share spent on attempts that fail and which states spend it.
* :func:`cost_budget_curve` — R(B), success before the accumulated cost exceeds B, by a cost-lattice dynamic
  programme with its discretisation error bracketed exactly; :func:`step_cap_costs` — the cheapest step budget that
  reaches a target R and what it costs.
* :func:`observed_costs` — what the traces themselves spent, for the side-by-side check.
* :func:`cost_report` — all of it with intervals (the chain's uncertainty and the cost means' together), as JSON.

>>> import tracetochain as tt
>>> from tracetochain.costs import cost_report
>>> traces = tt.read_traces("runs/")                                   # doctest: +SKIP
>>> fit = tt.fit_chain(traces)                                         # doctest: +SKIP
>>> cost_report(fit)["metrics"]["cost_usd"]["summary"]["per_success"]  # doctest: +SKIP
"""

from tracetochain._compat import moved_attribute
from tracetochain.chain.shared import CostModel
from tracetochain.costs._analysis import (
    BudgetCurve,
    CostSummary,
    ObservedCosts,
    StepCap,
    cost_budget_curve,
    observed_costs,
    step_cap_costs,
    summarize_costs,
)
from tracetochain.costs._report import cost_report

#: What users import; schema versions, metric tables and the draws behind the intervals are shared with the rest of
#: the library through ``tracetochain.costs.shared`` / ``tracetochain.chain.shared``.
__all__ = [
    "BudgetCurve",
    "CostModel",
    "CostSummary",
    "ObservedCosts",
    "StepCap",
    "cost_budget_curve",
    "cost_report",
    "observed_costs",
    "step_cap_costs",
    "summarize_costs",
]


#: Names this package exported before its ``__all__`` was trimmed to what users import → the module that defines
#: them (still importable from here, with a warning naming that module, for one release).
_MOVED: dict[str, str] = {
    "COSTS_SCHEMA_VERSION": "tracetochain.costs._report",
    "COST_LAYERS": "tracetochain.costs._analysis",
    "COST_MODEL_SCHEMA_VERSION": "tracetochain.chain.shared",
    "METRICS": "tracetochain.chain.shared",
    "MetricStats": "tracetochain.chain.shared",
    "PerVisitCost": "tracetochain.chain.shared",
    "StateCost": "tracetochain.costs._analysis",
    "cost_certification": "tracetochain.costs._report",
    "cost_per_success_draws": "tracetochain.costs._report",
    "fmt_amount": "tracetochain._display",
    "trace_totals": "tracetochain.chain.shared",
    "usage_arrays": "tracetochain.chain.shared",
}


def __getattr__(name: str) -> object:
    return moved_attribute(__name__, name, _MOVED)
