"""Estimator/model layer for the absorbing chain: counts → smoothed MLE → frozen AbsorbingChain."""

from tracetochain.chain._counts import TransitionCounts, count_transitions, count_transitions_from_codes
from tracetochain.chain._estimator import ChainEstimator, estimate_chain
from tracetochain.chain._model import CHAIN_SCHEMA_VERSION, AbsorbingChain

__all__ = ["CHAIN_SCHEMA_VERSION", "AbsorbingChain", "ChainEstimator", "TransitionCounts", "count_transitions",
           "count_transitions_from_codes", "estimate_chain"]
