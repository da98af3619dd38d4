"""Estimator/model layer for the absorbing chain: counts → smoothed MLE → frozen AbsorbingChain."""

from tracetochain.chain._counts import (
           TransitionCounts,
           count_transitions,
           count_transitions_from_codes,
           per_trace_counts,
           zero_step_counts,
           zero_step_outcome_codes,
)
from tracetochain.chain._estimator import ChainEstimator, estimate_chain
from tracetochain.chain._model import CHAIN_SCHEMA_VERSION, AbsorbingChain
from tracetochain.chain._prior import (
           ChainPrior,
           estimate_rows,
           initial_distribution,
           outcome_matrix,
           start_distribution,
)

__all__ = [
           "CHAIN_SCHEMA_VERSION",
           "AbsorbingChain",
           "ChainEstimator",
           "ChainPrior",
           "TransitionCounts",
           "count_transitions",
           "count_transitions_from_codes",
           "estimate_chain",
           "estimate_rows",
           "initial_distribution",
           "outcome_matrix", "per_trace_counts",
           "start_distribution",
           "zero_step_counts",
           "zero_step_outcome_codes",
]
