"""What every model family shares: the compiled absorbing chain and the small fitting interface.

Every family here is, once fitted, an absorbing Markov chain on an *expanded* state space — contexts of the last k
states, (state, step) pairs, hidden states, or the disjoint union of several classes' chains — together with a map
from each expanded state to the observed states it shows (a 0/1 row for the observable expansions, the emission
probabilities of a hidden state). :class:`CompiledModel` carries that chain, so every metric, interval and what-if
of :class:`~tracetochain.AbsorbingChain` applies unchanged; what needs the class structure (pass^k of trials of one
task) is computed here from the classes.

pass^k under task heterogeneity: if the trials of one task share a latent class c (with probability w_c) and are
independent given it, then (Jensen; Yao et al. 2024 for the estimator)

    pass^k = E_c[R_c^k] = Σ_c w_c R_c^k ≥ R∞^k,    pass@k = 1 − Σ_c w_c (1 − R_c)^k ≤ 1 − (1 − R∞)^k,

with R∞ = Σ_c w_c R_c. When classes are drawn per trace (or there is one class), trials are i.i.d. and
pass^k = R∞^k — the labelled special case.
"""

from __future__ import annotations

import html
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
import pyarrow as pa
from numpy.typing import ArrayLike, NDArray

from tracetochain._display import EstimatorDisplay
from tracetochain.chain import AbsorbingChain
from tracetochain.exceptions import NotFittedError
from tracetochain.models._encoded import EncodedTraces, Grouping, encode_traces
from tracetochain.numerics.passk import _check_k
from tracetochain.traces import TraceTable

if TYPE_CHECKING:
    from tracetochain.chain.shared import SparseChain

Trials = Literal["task", "iid"]


@dataclass(frozen=True, eq=False)
class CompiledModel:
    """A fitted family as one absorbing chain on the expanded space, with the way back to observed states.

    Attributes
    ----------
    chain : AbsorbingChain
        The chain on the expanded states (every existing metric, interval and what-if works on it).
    observed_names : tuple of str
        The observed states (the alphabet the model was fitted on).
    emission : (n_expanded, m) array
        Row i: the probability that expanded state i shows each observed state (0/1 for observable expansions).
    component : (n_expanded,) int array
        The latent class of every expanded state (all 0 for a single-class model).
    component_weights : (C,) array
        Probability of each class (π0 mass of its block).
    trials : {"task", "iid"}
        ``"task"``: the trials of one task share a class (pass^k = Σ w_c R_c^k). ``"iid"``: trials are independent
        draws from the whole chain (pass^k = R∞^k).
    family : str
        The family's name (``"markov"``, ``"mixture"``, …).
    """

    chain: AbsorbingChain
    observed_names: tuple[str, ...]
    emission: NDArray[np.float64]
    component: NDArray[np.int64]
    component_weights: NDArray[np.float64]
    trials: Trials
    family: str

    @property
    def n_components(self) -> int:
        return int(self.component_weights.size)

    @property
    def n_states(self) -> int:
        return self.chain.n_states

    # ------------------------------------------------------------------ classes
    def component_chain(self, c: int) -> AbsorbingChain:
        """The chain of class ``c`` alone (its block of Q, its start distribution renormalised)."""
        idx = np.flatnonzero(self.component == c)
        if idx.size == 0:
            raise IndexError(f"class {c} out of range 0..{self.n_components - 1}")
        p0 = self.chain.pi0[idx]
        total = p0.sum()
        if total <= 0:
            raise ValueError(f"class {c} has no start probability")
        names = tuple(self.chain.state_names[i] for i in idx)
        return AbsorbingChain(self.chain.Q[np.ix_(idx, idx)], self.chain.R_success[idx], self.chain.R_failure[idx],
                              p0 / total, names, {"family": self.family, "component": c})

    def component_r_inf(self) -> NDArray[np.float64]:
        """R∞ of every class, R_c = π0|_c h / w_c (the blocks do not communicate)."""
        h = self.chain.success_probabilities
        mass = np.bincount(self.component, weights=self.chain.pi0, minlength=self.n_components)
        succ = np.bincount(self.component, weights=self.chain.pi0 * h, minlength=self.n_components)
        out: NDArray[np.float64] = np.where(mass > 0, succ / np.where(mass > 0, mass, 1.0), 0.0)
        return out

    # ------------------------------------------------------------------ pass^k
    def pass_hat_k(self, k: ArrayLike) -> NDArray[np.float64]:
        """pass^k = Σ_c w_c R_c^k when trials of a task share a class, else R∞^k (module docstring)."""
        ks = _check_k(k).astype(np.float64)
        if self.trials == "iid" or self.n_components == 1:
            return np.power(self.chain.r_inf, ks)
        r = self.component_r_inf()
        out: NDArray[np.float64] = self.component_weights @ np.power(r[:, None], ks[None, :])
        return out

    def pass_at_k(self, k: ArrayLike) -> NDArray[np.float64]:
        """pass@k = 1 − Σ_c w_c (1 − R_c)^k when trials of a task share a class, else 1 − (1 − R∞)^k."""
        ks = _check_k(k).astype(np.float64)
        if self.trials == "iid" or self.n_components == 1:
            return 1.0 - np.power(1.0 - self.chain.r_inf, ks)
        r = self.component_r_inf()
        out: NDArray[np.float64] = 1.0 - self.component_weights @ np.power(1.0 - r[:, None], ks[None, :])
        return out

    # ------------------------------------------------------------------ back to observed states
    def to_observed(self, per_state: ArrayLike) -> NDArray[np.float64]:
        """Sum a per-expanded-state quantity (visits, failure shares) onto the observed states: Eᵀ v."""
        v = np.asarray(per_state, dtype=np.float64)
        out: NDArray[np.float64] = self.emission.T @ v
        return out

    def failure_attribution(self) -> dict[str, Any]:
        """Share of all failures leaving from each observed state, overall and per class.

        For a hidden state the share is split over the observed states by its emission probabilities (the step on
        which the failure happens shows that label).
        """
        z = self.chain.expected_visits()
        flows = z * self.chain.R_failure
        total = flows.sum()
        out: dict[str, Any] = {"overall": dict(zip(self.observed_names,
                                                   (self.to_observed(flows) / total if total > 0 else
                                                    np.zeros(len(self.observed_names))).tolist(), strict=True))}
        if self.n_components > 1:
            per: list[dict[str, float]] = []
            for c in range(self.n_components):
                mask = (self.component == c).astype(np.float64)
                fc = flows * mask
                tc = fc.sum()
                shares = self.to_observed(fc) / tc if tc > 0 else np.zeros(len(self.observed_names))
                per.append(dict(zip(self.observed_names, shares.tolist(), strict=True)))
            out["per_class"] = per
        return out

    def summary(self, *, horizon: int = 50, ks: tuple[int, ...] = (1, 2, 3, 4, 5, 8)) -> dict[str, Any]:
        """R∞, R(d), mean steps, pass^k / pass@k, per class and overall, as a JSON-ready dict."""
        rel = self.chain.reliability(horizon)
        doc: dict[str, Any] = {
            "family": self.family, "n_expanded_states": self.n_states, "n_observed_states": len(self.observed_names),
            "trials": self.trials, "r_inf": self.chain.r_inf, "mean_steps": self.chain.mean_steps(),
            "reliability": {str(d): float(rel[d]) for d in range(horizon + 1)},
            "pass_hat_k": {str(k): float(v) for k, v in zip(ks, self.pass_hat_k(list(ks)), strict=True)},
            "pass_at_k": {str(k): float(v) for k, v in zip(ks, self.pass_at_k(list(ks)), strict=True)},
            "pass_hat_k_iid": {str(k): float(self.chain.r_inf ** k) for k in ks},
            "failure_attribution": self.failure_attribution(),
        }
        if self.n_components > 1:
            r = self.component_r_inf()
            doc["classes"] = [
                {"class": c, "weight": float(self.component_weights[c]), "r_inf": float(r[c]),
                 "mean_steps": self.component_chain(c).mean_steps(),
                 "reliability": {str(d): float(v) for d, v in
                                 enumerate(self.component_chain(c).reliability(horizon))}}
                for c in range(self.n_components)]
        return doc


# ---------------------------------------------------------------------------------------------------- sampling
@dataclass(frozen=True, eq=False)
class SimulatedRuns:
    """Runs drawn from a compiled model: per trace its task, length and outcome (0 success, 1 failure, 2 censored),
    and — when paths were recorded — the expanded states, trace after trace."""

    task: NDArray[np.int64]
    length: NDArray[np.int64]
    outcome: NDArray[np.int8]
    expanded: NDArray[np.int64] | None


def simulate_runs(compiled: CompiledModel, task_sizes: ArrayLike, rng: np.random.Generator, *,
                  max_steps: int = 10_000, record_paths: bool = False) -> SimulatedRuns:
    """Draw ``task_sizes[t]`` trials of every task t. When the model's trials share a class, a task draws its class
    once (probabilities ``component_weights``) and all its trials start in that class's block; otherwise every
    trial is an independent run of the whole chain."""
    sizes = np.asarray(task_sizes, dtype=np.int64)
    if sizes.ndim != 1 or (sizes < 0).any():
        raise ValueError("task_sizes must be a 1-d array of non-negative trial counts")
    chain = compiled.chain
    n_traces = int(sizes.sum())
    task = np.repeat(np.arange(sizes.size, dtype=np.int64), sizes)
    shared = compiled.trials == "task" and compiled.n_components > 1
    cls = rng.choice(compiled.n_components, size=sizes.size, p=compiled.component_weights)[task] if shared \
        else np.zeros(n_traces, np.int64)
    length = np.zeros(n_traces, np.int64)
    outcome = np.zeros(n_traces, np.int8)
    runs: list[tuple[NDArray[np.int64], NDArray[np.int64]]] = []
    for c in np.unique(cls):
        who = np.flatnonzero(cls == c)
        source = chain
        if shared:
            p0 = chain.pi0 * (compiled.component == c)
            source = chain.with_changes(pi0=p0 / p0.sum())
        sim = source.simulate(who.size, rng, max_steps=max_steps, record_paths=record_paths)
        length[who] = sim.length
        outcome[who] = sim.outcome
        if record_paths:
            assert sim.states is not None
            runs.append((who, sim.states.astype(np.int64)))
    if not record_paths:
        return SimulatedRuns(task, length, outcome, None)
    starts = np.r_[0, np.cumsum(length)[:-1]]
    expanded = np.zeros(int(length.sum()), np.int64)
    for who, states in runs:
        lw = length[who]
        within = np.arange(states.size) - np.repeat(np.cumsum(lw) - lw, lw)
        expanded[np.repeat(starts[who], lw) + within] = states
    return SimulatedRuns(task, length, outcome, expanded)


def sample_compiled(compiled: CompiledModel, n_traces: int, rng: np.random.Generator, *, trials_per_task: int = 1,
                    max_steps: int = 10_000) -> TraceTable:
    """Draw traces of observed states from a compiled model (canonical table with task ids and trials).

    Tasks are drawn first (``n_traces / trials_per_task`` of them, rounded up, the last one possibly shorter); when
    the model's trials share a class, a task draws its class once and all its trials start in that class's block.
    Hidden states emit their observed label by the emission probabilities.
    """
    if n_traces < 1 or trials_per_task < 1:
        raise ValueError("n_traces and trials_per_task must be >= 1")
    n_tasks = -(-n_traces // trials_per_task)
    sizes = np.full(n_tasks, trials_per_task, np.int64)
    sizes[-1] = n_traces - trials_per_task * (n_tasks - 1)
    sim = simulate_runs(compiled, sizes, rng, max_steps=max_steps, record_paths=True)
    assert sim.expanded is not None
    task, length, outcome, expanded = sim.task, sim.length, sim.outcome, sim.expanded
    trial = np.arange(n_traces) - np.repeat(np.r_[0, np.cumsum(sizes)[:-1]], sizes)
    starts = np.r_[0, np.cumsum(length)[:-1]]
    E = compiled.emission
    if np.all((E == 0) | (E == 1)):
        observed = np.argmax(E, axis=1)[expanded]
    else:
        cum = np.cumsum(E[expanded], axis=1)
        cum[:, -1] = 1.0
        observed = (rng.random(expanded.size)[:, None] >= cum).sum(axis=1)
    trace_of_step = np.repeat(np.arange(n_traces), length)
    step = np.arange(expanded.size) - np.repeat(starts, length)
    names = np.array(compiled.observed_names, dtype=object)
    outcome_names = np.array(["success", "failure", "censored"], dtype=object)
    table = pa.table({
        "trace_id": pa.array([f"t{i}" for i in trace_of_step], pa.string()),
        "step_idx": pa.array(step, pa.int64()),
        "state": pa.array(names[observed].tolist(), pa.string()),
        "outcome": pa.array(outcome_names[outcome[trace_of_step]].tolist(), pa.string()),
        "task_id": pa.array([f"task{task[i]}" for i in trace_of_step], pa.string()),
        "trial": pa.array(trial[trace_of_step], pa.int64()),
    })
    return TraceTable.from_arrow(table, source=f"sampled from {compiled.family} ({n_traces} traces)")


# ---------------------------------------------------------------------------------------------------- families
@dataclass(frozen=True, eq=False)
class LastStep:
    """Per trace: ``prefix`` = log-likelihood without the exit factor; the expanded state of the last step, either
    exactly (``state``, observable families) or as a distribution (``weights`` (n × n_expanded), hidden states)."""

    prefix: NDArray[np.float64]
    state: NDArray[np.int64] | None = None
    weights: NDArray[np.float64] | None = None

    def exit_factor(self, r_exit: NDArray[np.float64]) -> NDArray[np.float64]:
        """Σ_s P(last state = s) · r_exit[s] for every trace."""
        if self.state is not None:
            out: NDArray[np.float64] = r_exit[self.state]
            return out
        assert self.weights is not None
        return self.weights @ r_exit


def predictive_terms(ll: NDArray[np.float64], log_weights: NDArray[np.float64], enc: EncodedTraces
                     ) -> NDArray[np.float64]:
    """Per-trace log-likelihoods under a model whose units (tasks) share a latent class.

    ``ll`` is (n_traces, C): every trace's log-likelihood given each class. A unit's joint log-likelihood is
    log Σ_c w_c Π_x p_c(x); it is split over the unit's traces (in table order) as predictive terms
    log p(x_j | x_1 … x_{j−1}) = A_j − A_{j−1}, A_j = log Σ_c w_c Π_{l≤j} p_c(x_l), which sum to it. With one trace
    per unit this is the mixture likelihood of every trace.
    """
    from tracetochain.numerics.shared import logsumexp_rows

    order = np.lexsort((np.arange(enc.n_traces), enc.unit))
    u = enc.unit[order]
    lo = ll[order]
    cum = np.cumsum(lo, axis=0)
    first = np.r_[True, u[1:] != u[:-1]]
    start = np.maximum.accumulate(np.where(first, np.arange(u.size), 0))
    before_unit = np.where((start > 0)[:, None], cum[np.maximum(start - 1, 0)], 0.0)
    incl = cum - before_unit
    excl = incl - lo
    a = logsumexp_rows(incl + log_weights[None, :])
    b = np.where(first, 0.0, logsumexp_rows(excl + log_weights[None, :]))
    out = np.empty(enc.n_traces)
    out[order] = a - b
    return out


class TraceModel(EstimatorDisplay, ABC):
    """The interface every model family implements.

    ``fit(traces)`` → self; ``trace_loglik(traces)`` the log-likelihood of each (held-out) trace, the joint
    probability of its observed states and its outcome (censored traces: of their steps only); ``n_parameters``;
    ``to_chain()`` the :class:`CompiledModel`; ``pass_hat_k`` / ``pass_at_k``; ``sample``.
    """

    family: ClassVar[str] = ""

    def __init__(self, *, group: Grouping = "auto") -> None:
        self.group = group
        self.state_names_: tuple[str, ...] | None = None
        self.grouped_by_: str | None = None
        self.n_fit_traces_: int = 0
        self._compiled: CompiledModel | None = None

    # ------------------------------------------------------------------ to implement
    @abstractmethod
    def _fit(self, enc: EncodedTraces) -> None: ...

    @abstractmethod
    def _trace_loglik(self, enc: EncodedTraces) -> NDArray[np.float64]: ...

    @abstractmethod
    def _compile(self) -> CompiledModel: ...

    @property
    @abstractmethod
    def n_parameters(self) -> int:
        """Free parameters on the observed support (informational: model choice is by held-out likelihood)."""

    def last_step(self, enc: EncodedTraces) -> LastStep:
        """The log-likelihood of every trace without its exit factor, and where the trace stood at its last step on
        the compiled chain's expanded states (used to put task classes on top of any family). Families that cannot
        say raise NotImplementedError."""
        raise NotImplementedError(f"the {self.family} family does not expose its last step")

    @abstractmethod
    def like(self) -> TraceModel:
        """A fresh, unfitted model of the same family *and size* (buckets, classes, hidden states fixed at the fitted
        values), for refits on redrawn or resampled traces (timing nulls, bootstrap intervals)."""

    @property
    def size(self) -> int | None:
        """The family's size parameter (classes, hidden states, order, buckets) once fitted, if it has one."""
        return None

    @property
    def label(self) -> str:
        """A short name such as ``mixture(C=2)``."""
        return self.family

    # ------------------------------------------------------------------ shared
    def encode(self, traces: TraceTable | EncodedTraces) -> EncodedTraces:
        """Code traces with the fitted alphabet (and the fitted grouping)."""
        self._check_fitted()
        if isinstance(traces, EncodedTraces):
            if traces.state_names != self.state_names_:
                raise ValueError("these encoded traces use another alphabet than the fitted model")
            return traces
        group: Grouping = "task" if self.grouped_by_ == "task" and self._has_tasks(traces) else "trace"
        return encode_traces(traces, self.state_names_, group=group)

    @staticmethod
    def _has_tasks(traces: TraceTable) -> bool:
        return bool(traces.trace_column("task_id").null_count < traces.n_traces)

    def fit(self, traces: TraceTable | EncodedTraces,
            state_names: tuple[str, ...] | list[str] | None = None) -> TraceModel:
        """Fit on labelled traces (or already encoded ones). ``state_names`` fixes the alphabet."""
        enc = encode_traces(traces, state_names, group=self.group)
        self.state_names_ = enc.state_names
        self.grouped_by_ = enc.grouped_by
        self.n_fit_traces_ = enc.n_traces
        self._compiled = None
        self._fit(enc)
        return self

    def trace_loglik(self, traces: TraceTable | EncodedTraces) -> NDArray[np.float64]:
        """Log-likelihood of every trace (natural log). For a model whose trials of a task share a class the value
        of a trace is its predictive log-likelihood given the earlier trials of its task, so the sum over a task's
        traces is the task's joint log-likelihood."""
        return self._trace_loglik(self.encode(traces))

    def unit_loglik(self, traces: TraceTable | EncodedTraces) -> NDArray[np.float64]:
        """Log-likelihood of every likelihood unit (task when tasks repeat, else trace)."""
        enc = self.encode(traces)
        return enc.units_of(self._trace_loglik(enc))

    def loglik(self, traces: TraceTable | EncodedTraces) -> float:
        """Total log-likelihood of the traces."""
        return float(self.trace_loglik(traces).sum())

    def to_chain(self, *, keep: bool = True) -> CompiledModel:
        """The fitted model as one absorbing chain on its expanded states (cached; with ``keep=False`` compiled
        without keeping it, for ensembles of refits whose dense chains would not fit in memory together)."""
        self._check_fitted()
        if self._compiled is not None:
            return self._compiled
        compiled = self._compile()
        if keep:
            self._compiled = compiled
        return compiled

    def success_law_chain(self) -> AbsorbingChain | SparseChain:
        """The chain behind the model's success-time law, R(d) and R∞ (what the timing null asks of a refit): the
        compiled chain; families that compile large chains from their non-zeros override it to skip the dense
        matrix (:class:`~tracetochain.chain._sparse.SparseChain`)."""
        return self.to_chain().chain

    def pass_hat_k(self, k: ArrayLike) -> NDArray[np.float64]:
        return self.to_chain().pass_hat_k(k)

    def pass_at_k(self, k: ArrayLike) -> NDArray[np.float64]:
        return self.to_chain().pass_at_k(k)

    def sample(self, n_traces: int, seed: int | np.random.Generator = 0, *, trials_per_task: int = 1,
               max_steps: int = 10_000) -> TraceTable:
        """Draw traces from the fitted model (see :func:`sample_compiled`)."""
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        return sample_compiled(self.to_chain(), n_traces, rng, trials_per_task=trials_per_task,
                               max_steps=max_steps)

    def _check_fitted(self) -> None:
        if self.state_names_ is None:
            raise NotFittedError(f"fit the {self.family} model first: model.fit(traces)")

    def describe(self) -> str:
        self._check_fitted()
        c = self.to_chain()
        return (f"{self.label}: {c.n_states} expanded states over {len(c.observed_names)} observed, "
                f"{self.n_parameters} parameters, R∞ = {c.chain.r_inf:.4f}, trials {c.trials}")

    def _repr_html_(self) -> str:
        params = super()._repr_html_()
        if self.state_names_ is None:
            return params
        return params.replace("</b>", f"</b><p>{html.escape(self.describe())}</p>", 1)


def log_or_floor(p: NDArray[np.float64]) -> NDArray[np.float64]:
    """log p with exact zeros mapped to a very small finite number (a held-out score never becomes −∞ or NaN)."""
    out: NDArray[np.float64] = np.log(np.maximum(p, 1e-300))
    return out
