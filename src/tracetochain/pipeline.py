"""Traces → states → chain in one call (Algorithm 1 of the paper without the audit, which comes later).

This is what ``tracetochain fit`` runs. Steps of invalid traces are left out of state discovery, as they are out
of the counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tracetochain._outcome import INVALID as _INVALID
from tracetochain.chain import AbsorbingChain, ChainEstimator
from tracetochain.exceptions import EmptyTraceSetError
from tracetochain.states import StateModel, states_from_spec
from tracetochain.traces import TraceTable


@dataclass(frozen=True, eq=False)
class FitResult:
    """The fitted chain, the state model behind it and the labelled traces it was counted from."""

    chain: AbsorbingChain
    states: StateModel
    labelled: TraceTable


def fit_chain(traces: TraceTable, *, states: Any = "label", pseudocount: float | None = None, unvisited: str = "auto",
              initial: str = "empirical", **state_options: Any) -> FitResult:
    """Discover states and fit the chain; the chain carries the per-state cost model of the traces'
    tokens, dollars and seconds in ``metadata["costs"]`` (:class:`~tracetochain.costs.CostModel`).

    ``states`` is a state estimator (``WardStates(...)``, ``CategoricalStates(...)``, ``MilestoneStates(...)``) or a
    short spec for :func:`~tracetochain.states.states_from_spec` (``"label"``, ``"categorical"``, ``"ward"``,
    ``"milestones:FILE"``) with ``state_options`` (features, vocabulary, k_min, k_max, seed).
    """
    estimator = states_from_spec(states, **state_options) if isinstance(states, str) else states
    usable = traces.select_traces(traces.outcomes() != _INVALID)
    if usable.n_steps == 0:
        n = traces.outcome_counts()
        raise EmptyTraceSetError(f"no traces to fit in {traces.report.source}: {n['invalid']} invalid trace(s) "
                                 f"excluded, {traces.n_traces - n['invalid']} usable")
    state_model: StateModel = estimator.fit(usable).fetch_model()
    labelled = state_model.label(traces) if traces.n_steps else traces
    chain = fit_chain_over_states(state_model, labelled, pseudocount=pseudocount, unvisited=unvisited,
                                  initial=initial)
    return FitResult(chain, state_model, labelled)


def fit_chain_over_states(state_model: Any, labelled: TraceTable, *, pseudocount: float | None = None,
                          unvisited: str = "auto", initial: str = "empirical") -> AbsorbingChain:
    """The chain of traces labelled by a fitted state model, over the model's whole vocabulary (a state no trace
    visits keeps a row, filled by the ``unvisited`` policy), with the model's description in ``metadata["states"]``
    when it has one (``to_dict``).

    The second half of :func:`fit_chain`; the held-out audit calls it directly for a state model fitted elsewhere
    (:func:`tracetochain.audit._holdout.fit_states_and_chain`).
    """
    chain = ChainEstimator(pseudocount=pseudocount, unvisited=unvisited,  # type: ignore[arg-type]
                           initial=initial, states=state_model.state_names).fit(  # type: ignore[arg-type]
        labelled).fetch_model()
    if hasattr(state_model, "to_dict"):
        chain = chain.with_metadata(states=state_model.to_dict())
    return chain
