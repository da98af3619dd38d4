"""``tracetochain.fit_chain``: :func:`~tracetochain.analysis.analyze` without the audit and without intervals.

One path: the states are learned where ``analyze`` (and so ``fit``, ``audit`` and ``report``) learns them — on the fit
half of split 0 (``SummarySpec.states_on_fit_half``) — and the chain is counted on every usable trace, so that the
library and every command name the same states and print the same numbers for the same corpus. The lower-level
:func:`tracetochain.pipeline.fit_chain` (states learned on all the traces it is given) stays what the held-out audit
calls on each training half.
"""

from __future__ import annotations

from typing import Any

from tracetochain._outcome import INVALID
from tracetochain.analysis._analyze import analyze
from tracetochain.exceptions import EmptyTraceSetError
from tracetochain.pipeline import FitResult
from tracetochain.states import states_from_spec
from tracetochain.traces import TraceTable


def fit_chain(traces: TraceTable, *, states: Any = "label", pseudocount: float | None = None, unvisited: str = "auto",
              initial: str = "empirical", seed: int = 0, **state_options: Any) -> FitResult:
    """Discover states and fit the chain, as :func:`~tracetochain.analysis.analyze` does without its audit.

    ``states`` is a state estimator (``WardStates(...)``, ``CategoricalStates(...)``, ``MilestoneStates(...)``) or a
    short spec (``"label"``, ``"categorical"``, ``"ward"``, ``"milestones:FILE"``) with ``state_options`` (features,
    vocabulary, k_min, k_max, seed); ``seed`` picks the held-out split whose fit half the states are learned on.
    The chain carries the per-state cost model of the traces' tokens, dollars and seconds in ``metadata["costs"]``
    and the corpus's design effect in ``metadata["design_effect"]``, as the chain ``tracetochain fit -o`` saves.

    >>> import tracetochain as tt
    >>> traces = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 300, seed=1)
    >>> fit = fit_chain(traces)
    >>> fit.chain.state_names == tt.analyze(traces, audit=False, intervals=None).chain.state_names
    True
    """
    if not isinstance(traces, TraceTable):
        raise TypeError(f"fit_chain takes a TraceTable (tracetochain.read_traces), got {type(traces).__name__}; "
                        "for files use tracetochain.analyze(path, audit=False)")
    usable = traces.select_traces(traces.outcomes() != INVALID)
    if usable.n_steps == 0:
        n = traces.outcome_counts()
        raise EmptyTraceSetError(f"no traces to fit in {traces.report.source}: {n['invalid']} invalid trace(s) "
                                 f"excluded, {traces.n_traces - n['invalid']} usable")
    result = analyze(traces, states=states, state_options=dict(state_options) or None, pseudocount=pseudocount,
                     unvisited=unvisited, initial=initial, audit=False, intervals=None, seed=seed,
                     discrimination=False)
    model = result.state_model
    chain = result.chain
    if model is None:  # the traces' own labels: the label model, as the pipeline's
        model = states_from_spec("label").fit(usable).fetch_model()
        if hasattr(model, "to_dict") and "states" not in chain.metadata:
            chain = chain.with_metadata(states=model.to_dict())
    labelled = model.label(traces) if traces.n_steps else traces
    return FitResult(chain, model, labelled)
