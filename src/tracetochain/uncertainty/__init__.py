"""Uncertainty for every number: Dirichlet posterior, trace bootstrap, and one statistics API.

* :class:`DirichletPosterior` — conjugate posterior of the chain from its counts: closed-form Beta intervals per entry
  of Q, R⊕, R⊖ and joint draws of whole chains (docs/statistics.md §2).
* :class:`TraceBootstrap` — resample traces (or tasks) and refit, with states fixed (fast, vectorised) or
  re-discovered and aligned on every replicate (full).
* :class:`ChainEnsemble` — the draws of either; ``ensemble.stats(quantity, **kwargs)`` returns a :class:`QuantityStats`
  (mean, std, percentile interval, point value) for any chain quantity, propagated through whole chains.
* :func:`interval_summary` — intervals for every number of :func:`tracetochain.summarize`, as JSON.

Only what a user needs is public here; the building blocks (bootstrap plans, the batched estimate, state alignment,
Beta intervals, row sampling) live in the private modules (``._bootstrap``, ``._align``, ``._dirichlet``). Importing
one of them from ``tracetochain.uncertainty`` still works but warns and names its module.

>>> import tracetochain as tt
>>> from tracetochain.uncertainty import DirichletPosterior
>>> traces = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 500, seed=0)
>>> chain = tt.ChainEstimator().fit(traces).fetch_model()
>>> ens = DirichletPosterior(seed=0).fit(chain).fetch_model().ensemble
>>> print(ens.stats("r_inf"))  # doctest: +SKIP
0.612 [0.561, 0.662] (95%, posterior, 2000 draws)
"""

from typing import Any

from tracetochain._compat import moved_attribute
from tracetochain.uncertainty._bootstrap import TraceBootstrap
from tracetochain.uncertainty._dirichlet import ChainPosterior, DirichletPosterior
from tracetochain.uncertainty._ensemble import ChainEnsemble
from tracetochain.uncertainty._stats import EntryIntervals, QuantityStats
from tracetochain.uncertainty._summary import INTERVALS_SCHEMA_VERSION, IntervalSummary, interval_summary

__all__ = [
    "INTERVALS_SCHEMA_VERSION",
    "ChainEnsemble",
    "ChainPosterior",
    "DirichletPosterior",
    "EntryIntervals",
    "IntervalSummary",
    "QuantityStats",
    "TraceBootstrap",
    "interval_summary",
]

#: Names this package exported before its public API was trimmed → the private module that defines them (building
#: blocks of the bootstrap and the posterior that the analysis core and the tests use).
_MOVED: dict[str, str] = {
    **dict.fromkeys(("match_by_centroids", "match_by_exit_profile", "match_by_names"), "_align"),
    **dict.fromkeys(("FastBootstrapPlan", "FullBootstrapPlan", "combine_replicates", "estimate_batch", "take_traces"),
                    "_bootstrap"),
    **dict.fromkeys(("beta_intervals", "counts_from_chain", "sample_rows"), "_dirichlet"),
}


def __getattr__(name: str) -> Any:
    return moved_attribute(__name__, name, _MOVED)
