"""ChainEstimator: the posterior mean of every row of the chain under a prior (``chain._prior``).

Row i of the chain is (x_i + a_i) / (c_i + Σ a_i), with x_i the m + 2 outcome counts of state i (transitions to each
state, exits to success and failure), c_i their total and a_i the prior's pseudo-counts. The default prior is one
pseudo-episode for the whole chain (½ success, ½ failure, spread over the states by their observations); a
``pseudocount`` α selects the Laplace prior of the TraceToChain paper (α on each of the m + 2 outcomes of every row;
α = 0 is the plain maximum-likelihood estimate, for which R∞ equals the pass rate exactly when π0 is empirical and
nothing is censored). π0 is the empirical first-state distribution; episodes that ended before any step are its direct
exits to success and failure (the start exits), so R∞ counts them and α = 0 still gives the pass rate exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tracetochain._display import EstimatorDisplay
from tracetochain.chain._costs import CostModel
from tracetochain.chain._counts import TransitionCounts, count_transitions
from tracetochain.chain._model import AbsorbingChain
from tracetochain.chain._prior import ChainPrior, estimate_rows, start_distribution
from tracetochain.exceptions import EmptyTraceSetError, NotFittedError
from tracetochain.traces import TraceTable

Unvisited = Literal["auto", "prior", "failure"]
Initial = Literal["empirical", "modal"]


@dataclass(frozen=True)
class _Params:
    prior: ChainPrior
    unvisited: str
    initial: Initial
    states: tuple[str, ...] | None


class ChainEstimator(EstimatorDisplay):
    """Fit an :class:`AbsorbingChain` to labelled traces.

    Parameters
    ----------
    pseudocount : float, optional
        α of the Laplace prior (α on each of the m + 2 outcomes of every row; the paper used 1; 0 is the plain MLE).
        Default (None): the episode prior (one pseudo-episode for the whole chain; ``chain._prior``), which does not
        invent failures in large state spaces.
    prior : {"episode", "laplace"}, optional
        Name the prior explicitly; ``pseudocount`` is then its strength.
    unvisited : {"auto", "prior", "failure"}, default "auto"
        Rows with no observed outgoing step. "prior" gives them the prior's row (the pooled outcome distribution of
        all states under the episode prior, the uniform row under Laplace), "failure" sends the row to FAILURE with
        probability 1 (conservative; the paper's SS15 convention). "auto" is "prior" when the prior has mass, else
        "failure". The affected states are always listed in the model's metadata.
    initial : {"empirical", "modal"}, default "empirical"
        π0 and the start exits as the empirical distribution of (first state, or outcome of an episode that ended
        before any step), or a point mass on the most frequent first state and no start exit (the artifact's s0, for
        reproducing SS10–SS12).
    states : sequence of str, optional
        Fixed state vocabulary (and order). Default: the labels seen, in order of first appearance.

    Examples
    --------
    >>> from tracetochain import TraceTable
    >>> traces = TraceTable.from_records([
    ...     {"trace_id": "a", "step_idx": 0, "state": "plan", "outcome": "success"},
    ...     {"trace_id": "b", "step_idx": 0, "state": "plan", "outcome": "failure"}])
    >>> ChainEstimator(pseudocount=0).fit(traces).fetch_model().r_inf
    0.5
    >>> ChainEstimator().fit(traces).fetch_model().r_inf   # (1 + ½) / (2 + 1): half a pseudo-episode each way
    0.5
    """

    def __init__(self, *, pseudocount: float | None = None, prior: str | None = None, unvisited: Unvisited = "auto",
                 initial: Initial = "empirical", states: list[str] | tuple[str, ...] | None = None) -> None:
        self.pseudocount = pseudocount
        self.prior = prior
        self.unvisited = unvisited
        self.initial = initial
        self.states = states
        self._model: AbsorbingChain | None = None
        self.counts_: TransitionCounts | None = None

    def _check_params(self) -> _Params:
        prior = ChainPrior.from_settings(self.pseudocount, self.prior)
        policy = prior.resolve_unvisited(self.unvisited)
        if self.initial not in ("empirical", "modal"):
            raise ValueError(f"initial must be 'empirical' or 'modal', got {self.initial!r}")
        return _Params(prior, policy, self.initial, tuple(self.states) if self.states is not None else None)

    def fit(self, data: TraceTable | TransitionCounts) -> ChainEstimator:
        """Count (if given traces) and estimate. Returns self; get the chain with :meth:`fetch_model`.

        From traces, the chain also carries their per-state cost model (``metadata["costs"]``,
        :class:`~tracetochain.costs.CostModel`; empty of metrics when the traces record no usage)."""
        p = self._check_params()
        if isinstance(data, TraceTable):
            counts = count_transitions(data, p.states)
            source = data.report.source
        elif isinstance(data, TransitionCounts):
            counts = data
            source = None
        else:
            raise TypeError(f"fit expects a TraceTable or TransitionCounts, got {type(data).__name__}")
        if counts.n_fitted_traces == 0 or counts.n_states == 0:
            n = counts.n_traces
            zero = (f"; {counts.n_start_exits} of them ended before any step, and a chain needs at least one episode "
                    "with a step") if counts.n_start_exits else ""
            raise EmptyTraceSetError(
                f"no traces to fit{f' in {source}' if source else ''}: {n['invalid']} invalid trace(s) excluded, "
                f"{sum(n.values()) - n['invalid']} usable{zero}. Check the input (and the skipped-record report)."
            )
        self.counts_ = counts
        model = estimate_chain(counts, prior=p.prior, unvisited=p.unvisited, initial=p.initial)
        if isinstance(data, TraceTable):
            # The per-state usage of the same steps (tokens, dollars, seconds), for the cost figures.
            model = model.with_metadata(costs=CostModel.from_traces(data, counts.state_names).to_dict())
        self._model = model
        return self

    def fetch_model(self) -> AbsorbingChain:
        if self._model is None:
            raise NotFittedError("call fit(traces) before fetch_model()")
        return self._model


def estimate_chain(counts: TransitionCounts, pseudocount: float | None = None, unvisited: str = "auto",
                   initial: str = "empirical", *, prior: ChainPrior | str | None = None) -> AbsorbingChain:
    """The posterior-mean chain of the counts under a prior (pure; see :class:`ChainEstimator` for the parameters).

    ``prior`` is a :class:`~tracetochain.chain.ChainPrior`, or a kind name with ``pseudocount`` as its strength;
    with neither, ``pseudocount`` selects Laplace and None the episode prior.
    """
    p = prior if isinstance(prior, ChainPrior) else ChainPrior.from_settings(pseudocount, prior)
    policy = p.resolve_unvisited(unvisited)
    if initial not in ("empirical", "modal"):
        raise ValueError(f"initial must be 'empirical' or 'modal', got {initial!r}")
    m = counts.n_states
    rows = estimate_rows(counts.outcome_matrix(censored_moves=True), p, policy)
    pi0, start_exits = start_distribution(counts.initial, counts.start_exits, initial)
    metadata = {
        "estimator": "ChainEstimator",
        "prior": p.to_dict(),
        "pseudocount": p.strength if p.kind == "laplace" else None,
        "unvisited_policy": policy,
        "unvisited_states": counts.unvisited_states(),
        "initial": initial,
        "n_traces": dict(counts.n_traces),
        "n_transitions": int(counts.transitions.sum()),
        "counts": counts.to_dict(),
    }
    return AbsorbingChain(rows[:, :m], rows[:, m], rows[:, m + 1], pi0, counts.state_names, metadata, start_exits)
