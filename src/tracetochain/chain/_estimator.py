"""ChainEstimator: Laplace-smoothed maximum likelihood over the m + 2 outcomes of each row.

Q_ij = (c_ij + α) / (c_i + α(m+2)), R⊕_i = (c_i⊕ + α) / (c_i + α(m+2)), R⊖_i = (c_i⊖ + α) / (c_i + α(m+2))
(``paper-spec.md`` §2.1 step 5, Algorithm 1). α = ``pseudocount`` (default 1; 0 gives the unsmoothed MLE, for
which R∞ equals the fit set's pass rate exactly when π0 is empirical and nothing is censored, §6.14).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from tracetochain.chain._counts import TransitionCounts, count_transitions
from tracetochain.chain._model import AbsorbingChain
from tracetochain.exceptions import EmptyTraceSetError, NotFittedError
from tracetochain.traces._table import TraceTable

Unvisited = Literal["auto", "prior", "failure"]
Initial = Literal["empirical", "modal"]


@dataclass(frozen=True)
class _Params:
    pseudocount: float
    unvisited: Unvisited
    initial: Initial
    states: tuple[str, ...] | None


class ChainEstimator:
    """Fit an :class:`AbsorbingChain` to labelled traces.

    Parameters
    ----------
    pseudocount : float, default 1.0
        Laplace α added to each of the m + 2 outcomes of every row (≥ 0).
    unvisited : {"auto", "prior", "failure"}, default "auto"
        Rows with no observed outgoing step. "prior" keeps the smoothed prior row (every outcome 1/(m+2); needs
        pseudocount > 0), "failure" sends the row to FAILURE with probability 1 (conservative; the paper's SS15
        convention). "auto" is "prior" when pseudocount > 0, else "failure". The affected states are always
        listed in the model's metadata.
    initial : {"empirical", "modal"}, default "empirical"
        π0 as the empirical first-state distribution, or a point mass on the most frequent first state (the
        artifact's s0, for reproducing SS10–SS12).
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
    """

    def __init__(self, *, pseudocount: float = 1.0, unvisited: Unvisited = "auto", initial: Initial = "empirical",
                 states: list[str] | tuple[str, ...] | None = None) -> None:
        self.pseudocount = pseudocount
        self.unvisited = unvisited
        self.initial = initial
        self.states = states
        self._model: AbsorbingChain | None = None
        self.counts_: TransitionCounts | None = None

    def _check_params(self) -> _Params:
        a = float(self.pseudocount)
        if not np.isfinite(a) or a < 0:
            raise ValueError(f"pseudocount must be a finite number >= 0, got {self.pseudocount!r}")
        if self.unvisited not in ("auto", "prior", "failure"):
            raise ValueError(f"unvisited must be 'auto', 'prior' or 'failure', got {self.unvisited!r}")
        if self.unvisited == "prior" and a == 0:
            raise ValueError("unvisited='prior' needs pseudocount > 0 (with no prior an unvisited row is undefined)")
        if self.initial not in ("empirical", "modal"):
            raise ValueError(f"initial must be 'empirical' or 'modal', got {self.initial!r}")
        return _Params(a, self.unvisited, self.initial, tuple(self.states) if self.states is not None else None)

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
            raise EmptyTraceSetError(
                f"no traces to fit{f' in {source}' if source else ''}: {n['invalid']} invalid trace(s) excluded, "
                f"{sum(n.values()) - n['invalid']} usable. Check the input (and the skipped-record report)."
            )
        self.counts_ = counts
        model = estimate_chain(counts, p.pseudocount, p.unvisited, p.initial)
        if isinstance(data, TraceTable):
            # The per-state usage of the same steps (tokens, dollars, seconds), for the cost figures.
            from tracetochain.costs._model import CostModel

            model = model.with_metadata(costs=CostModel.from_traces(data, counts.state_names).to_dict())
        self._model = model
        return self

    def fetch_model(self) -> AbsorbingChain:
        if self._model is None:
            raise NotFittedError("call fit(traces) before fetch_model()")
        return self._model


def estimate_chain(counts: TransitionCounts, pseudocount: float = 1.0, unvisited: Unvisited = "auto",
                   initial: Initial = "empirical") -> AbsorbingChain:
    """The Laplace-smoothed MLE from counts (pure; see :class:`ChainEstimator` for the parameters)."""
    m = counts.n_states
    a = float(pseudocount)
    C = counts.transitions.astype(np.float64)
    cs = counts.exits_success.astype(np.float64)
    cf = counts.exits_failure.astype(np.float64)
    totals = counts.row_totals.astype(np.float64)
    empty = totals == 0
    policy = ("prior" if a > 0 else "failure") if unvisited == "auto" else unvisited
    denom = totals + a * (m + 2)
    safe = np.where(denom > 0, denom, 1.0)
    Q = (C + a) / safe[:, None]
    rs = (cs + a) / safe
    rf = (cf + a) / safe
    if policy == "failure" and empty.any():
        Q[empty] = 0.0
        rs[empty] = 0.0
        rf[empty] = 1.0
    init = counts.initial.astype(np.float64)
    if initial == "modal":
        pi0 = np.zeros(m)
        pi0[int(np.argmax(init))] = 1.0
    else:
        pi0 = init / init.sum()
    metadata = {
        "estimator": "ChainEstimator",
        "pseudocount": a,
        "unvisited_policy": policy,
        "unvisited_states": counts.unvisited_states(),
        "initial": initial,
        "n_traces": dict(counts.n_traces),
        "n_transitions": int(counts.transitions.sum()),
        "counts": counts.to_dict(),
    }
    return AbsorbingChain(Q, rs, rf, pi0, counts.state_names, metadata)
