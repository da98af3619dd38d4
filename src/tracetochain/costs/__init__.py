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

from tracetochain._display import fmt_amount
from tracetochain.chain.shared import (
    COST_MODEL_SCHEMA_VERSION,
    METRICS,
    CostModel,
    MetricStats,
    PerVisitCost,
    trace_totals,
    usage_arrays,
)
from tracetochain.costs._analysis import (
    COST_LAYERS,
    BudgetCurve,
    CostSummary,
    ObservedCosts,
    StateCost,
    StepCap,
    cost_budget_curve,
    observed_costs,
    step_cap_costs,
    summarize_costs,
)
from tracetochain.costs._report import COSTS_SCHEMA_VERSION, cost_certification, cost_per_success_draws, cost_report

__all__ = [
    "COSTS_SCHEMA_VERSION",
    "COST_LAYERS",
    "COST_MODEL_SCHEMA_VERSION",
    "METRICS",
    "BudgetCurve",
    "CostModel",
    "CostSummary",
    "MetricStats",
    "ObservedCosts",
    "PerVisitCost",
    "StateCost",
    "StepCap",
    "cost_budget_curve",
    "cost_certification",
    "cost_per_success_draws",
    "cost_report",
    "fmt_amount",
    "observed_costs",
    "step_cap_costs",
    "summarize_costs",
    "trace_totals",
    "usage_arrays",
]
