"""Chains on contexts: the observable expansions shared by the first-order, order-k and duration-aware families.

The *context* of a step is a causal function of the trace so far — the current state (first order), the last k
states (order k, padded with a BEGIN mark), or the current state and the bucket of its step index (duration) — and
a model gives every context a row of m + 2 probabilities: the next observed state, or exit to success or failure.
The log-likelihood of a trace s_1 … s_L ending in outcome o is

    log π0(s_1) + Σ_{t<L} log P(s_{t+1} | ctx_t) + log P(o | ctx_L)      (no exit term for a censored trace).

Contexts form a tree (a context's parent is the coarser context it refines: the order-(k−1) suffix, or the state
without its step bucket; first-order contexts hang from the pooled root), and every row is shrunk toward its
parent's by :mod:`~tracetochain.models._shrinkage` with one empirical-Bayes concentration per level (or per parent).
Rows with no data equal their parent's, so a context never seen in the fit traces predicts exactly like the longest
context above it that was — which is what makes the compiled chain on contexts exact (a variable-length Markov
chain; Rissanen 1983, Bühlmann & Wyner 1999).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from tracetochain.chain import AbsorbingChain
from tracetochain.chain.shared import SparseChain
from tracetochain.models._base import CompiledModel, LastStep, TraceModel
from tracetochain.models._encoded import EncodedTraces, Grouping
from tracetochain.models._shrinkage import (
    dirichlet_multinomial_evidence,
    eb_concentration,
    root_row,
    shrink,
)

KappaBy = Literal["level", "parent"]


@dataclass(frozen=True, eq=False)
class Events:
    """One event per step with an observed successor: its context node, the outcome column and its trace."""

    node: NDArray[np.int64]
    col: NDArray[np.int64]
    trace: NDArray[np.int64]
    first_symbol: NDArray[np.int64]  # per trace
    n_traces: int


@dataclass(frozen=True, eq=False)
class CompiledArrays:
    """A chain on expanded states (before validation) and the observed state each expanded state shows.

    The transitions are kept as triples, ``weight[e]`` from ``source[e]`` to ``target[e]`` (duplicates add up): an
    order-3 chain on 43 observed states has 2,187 states but 43 successors each, and the timing null's refits need
    only its success-time law (:meth:`sparse_chain`), so the m × m array ``Q`` (:meth:`normalised`) and the state
    ``names`` are built only when asked for."""

    source: NDArray[np.int64]
    target: NDArray[np.int64]
    weight: NDArray[np.float64]
    R_success: NDArray[np.float64]
    R_failure: NDArray[np.float64]
    pi0: NDArray[np.float64]
    observed: NDArray[np.int64]
    name_states: Callable[[], tuple[str, ...]] = field(repr=False)

    @property
    def n_states(self) -> int:
        return int(self.R_success.size)

    def normalised(self) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """(Q, R⊕, R⊖) with every row renormalised to sum to 1 (they do up to rounding; this keeps the chain's 1e-9
        row check from tripping): Q as a fresh m × m array, built from the triples (duplicates add up, in order) and
        divided in place — one array of 38 MB at 2,187 states, not three."""
        n = self.n_states
        Q = np.bincount(self.source * n + self.target, self.weight, minlength=n * n).reshape(n, n).astype(
            np.float64, copy=False)  # float64 already (weighted counts): no copy
        total = Q.sum(axis=1) + self.R_success + self.R_failure
        Q /= total[:, None]
        return Q, self.R_success / total, self.R_failure / total

    @cached_property
    def names(self) -> tuple[str, ...]:
        return self.name_states()

    def sparse_chain(self) -> SparseChain:
        """The chain as its non-zeros (rows renormalised as :func:`compiled_model` does): R(d) and R∞ without Q."""
        return SparseChain.from_transitions(self.source, self.target, self.weight, self.R_success, self.R_failure,
                                            self.pi0)


def dense_transitions(Q: NDArray[np.float64]) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
    """(source, target, weight) of every entry of a small dense Q (the first-order blocks)."""
    m = Q.shape[0]
    return np.repeat(np.arange(m), m), np.tile(np.arange(m), m), np.asarray(Q, dtype=np.float64).ravel().copy()


class ContextScheme(ABC):
    """How contexts are computed from traces (causally) and how a chain on them is compiled.

    ``parent[i]`` is the parent node of node i (−1: the root); ``level[i]`` ≥ 1 its depth. Nodes 0 … m − 1 are the
    first-order contexts (the observed states themselves).
    """

    name: str = ""
    parent: NDArray[np.int64]
    level: NDArray[np.int64]

    @property
    def n_nodes(self) -> int:
        return int(self.parent.size)

    @abstractmethod
    def setup(self, enc: EncodedTraces) -> None:
        """Learn what the contexts are from the fit traces (observed tuples, bucket edges)."""

    @abstractmethod
    def contexts(self, enc: EncodedTraces) -> NDArray[np.int64]:
        """The context node of every step (known when the step happens)."""

    @abstractmethod
    def compile(self, rows: NDArray[np.float64], pi0: NDArray[np.float64], observed_names: tuple[str, ...]
                ) -> CompiledArrays:
        """The chain on expanded states given the fitted rows (n_nodes × (m + 2)) and π0 over observed states."""

    def settings(self) -> dict[str, Any]:
        return {"scheme": self.name}

    def expanded_index(self, enc: EncodedTraces, node: NDArray[np.int64]) -> NDArray[np.int64]:
        """The compiled chain's state of every step, given its context node (default: the node itself)."""
        return node


def events(enc: EncodedTraces, scheme: ContextScheme) -> Events:
    """The events of the traces under a scheme (censored last steps have no successor and are left out)."""
    node = scheme.contexts(enc)
    col = enc.next_outcome()
    keep = col >= 0
    return Events(node[keep], col[keep], enc.trace_of_step[keep], enc.codes[enc.starts], enc.n_traces)


@dataclass(frozen=True, eq=False)
class ContextFit:
    """Fitted rows of every context node, π0, the concentrations and the support sizes.

    ``parts`` holds the three factors of every row (see :func:`fit_context_rows`): ``"exit"`` (n × 2: continue,
    exit), ``"success"`` (n × 2: success, failure given an exit) and ``"next"`` (n × m: the next state given that
    the run continues).
    """

    rows: NDArray[np.float64]
    pi0: NDArray[np.float64]
    kappas: dict[str, float]
    n_parameters: int
    counts: NDArray[np.float64] = field(repr=False)
    #: Penalised evidence gain of every refinement group over its parents (0: the group keeps its parents' rows).
    gains: dict[str, float] = field(default_factory=dict)
    parts: dict[str, NDArray[np.float64]] = field(default_factory=dict, repr=False)


def _part_counts(own: NDArray[np.float64], m: int) -> dict[str, NDArray[np.float64]]:
    """The three factors' counts of rows over m + 2 outcomes (next states …, success, failure)."""
    exits = own[:, m] + own[:, m + 1]
    return {"exit": np.column_stack([own[:, :m].sum(axis=1), exits]),
            "success": own[:, m:m + 2].copy(),
            "next": own[:, :m].copy()}


def _combine(parts: dict[str, NDArray[np.float64]]) -> NDArray[np.float64]:
    """Rows over m + 2 outcomes from the factors: [(1 − h) n(x) …, h q, h (1 − q)]."""
    h = parts["exit"][:, 1:2]
    q = parts["success"]
    out: NDArray[np.float64] = np.column_stack([(1.0 - h) * parts["next"], h * q])
    return out


def fit_context_rows(scheme: ContextScheme, ev: Events, m: int, *, event_weight: NDArray[np.float64] | None = None,
                     trace_weight: NDArray[np.float64] | None = None, kappa_by: KappaBy = "level",
                     previous: ContextFit | None = None, pooled: ContextFit | None = None) -> ContextFit:
    """Shrunk rows of every node from (weighted) events — see the module docstring.

    A row is factorised into the probability of exiting h, the share of successes among exits q, and the next state
    given that the run goes on, n(·): P = [(1 − h) n(x) …, h q, h (1 − q)]. The likelihood splits the same way (a
    step contributes log(1 − h) + log n(x) or log h + log q), so each factor gets its own hierarchical shrinkage and
    its own concentrations: a context can change *when* runs end (duration, the last few steps) while the choice of
    the next state stays pooled, and the other way round.

    ``event_weight`` / ``trace_weight`` are the EM responsibilities of a mixture class (default 1); ``previous``
    (the same class's fit at the last EM iteration) warm-starts the concentration searches. With ``pooled`` (the
    fit on all traces) this is one class of a mixture that borrows strength: its first-order factors and π0 are
    shrunk toward the pooled ones (κ by empirical Bayes on the class's data), and its refined factors toward the
    class's own coarser ones with the pooled concentrations (refinements are learnt from all traces, the class
    tendencies from its own).
    """
    hint = previous.kappas if previous is not None else {}
    J = m + 2
    n_nodes = scheme.n_nodes
    w = np.ones(ev.node.size) if event_weight is None else np.asarray(event_weight, dtype=np.float64)
    own = np.bincount(ev.node * J + ev.col, weights=w, minlength=n_nodes * J).reshape(n_nodes, J).astype(np.float64)
    total = own.copy()
    depth = int(scheme.level.max()) if n_nodes else 1
    for lev in range(depth, 1, -1):
        idx = np.flatnonzero(scheme.level == lev)
        np.add.at(total, scheme.parent[idx], total[idx])
    first = np.flatnonzero(scheme.level == 1)
    kappas: dict[str, float] = {}
    gains: dict[str, float] = {}
    parts: dict[str, NDArray[np.float64]] = {}
    eff = 0.0
    for part, counts in _part_counts(total, m).items():
        width = counts.shape[1]
        rows = np.zeros((n_nodes, width))
        root = root_row(counts[first])
        for lev in range(1, depth + 1):
            idx = np.flatnonzero(scheme.level == lev)
            if idx.size == 0:
                continue
            if lev == 1:
                base1 = pooled.parts[part][idx] if pooled is not None else np.broadcast_to(root, (idx.size, width))
                key = f"{part}:level1"
                k = eb_concentration(counts[idx], base1, start=hint.get(key))
                rows[idx] = shrink(counts[idx], base1, k)
                kappas[key] = k
                n1 = counts[idx].sum(axis=1)
                support = np.count_nonzero(np.asarray(base1) > 1e-12, axis=1) - 1
                eff += float(np.sum(support * n1 / (n1 + k)))
                continue
            par = scheme.parent[idx]
            groups = [(f"{part}:level{lev}/node{int(p)}", idx[par == p]) for p in np.unique(par)] \
                if kappa_by == "parent" else [(f"{part}:level{lev}", idx)]
            for key, sel in groups:
                if pooled is not None:
                    k, gain = pooled.kappas.get(key, math.inf), 0.0
                else:
                    k, gain = _refinement_concentration(counts[sel], rows[scheme.parent[sel]], hint.get(key))
                rows[sel] = shrink(counts[sel], rows[scheme.parent[sel]], k)
                kappas[key] = k
                gains[key] = gain
                if math.isfinite(k):
                    ns = counts[sel].sum(axis=1)
                    support = np.count_nonzero(rows[scheme.parent[sel]] > 1e-12, axis=1) - 1
                    eff += float(np.sum(support * ns / (ns + k)))
        parts[part] = rows
    tw = np.ones(ev.n_traces) if trace_weight is None else np.asarray(trace_weight, dtype=np.float64)
    init = np.bincount(ev.first_symbol, weights=tw, minlength=m).astype(np.float64)
    if pooled is not None:
        sym = pooled.pi0
    else:
        nxt = parts["next"][first].mean(axis=0)
        sym = nxt / nxt.sum()
    k0 = eb_concentration(init[None, :], sym[None, :], start=hint.get("initial"))
    pi0 = shrink(init[None, :], sym[None, :], k0)[0]
    kappas["initial"] = k0
    eff += float((np.count_nonzero(sym > 1e-12) - 1) * init.sum() / (init.sum() + k0))
    # Effective number of parameters: Σ over estimated rows of (support − 1)·n/(n + κ), the trace of the shrinkage
    # smoother (rows equal to their parents' cost nothing), plus one per finite concentration.
    n_par = round(eff) + (0 if pooled is not None else sum(math.isfinite(k) for k in kappas.values()))
    return ContextFit(_combine(parts), pi0, kappas, n_par, own, gains, parts)


def _refinement_concentration(counts: NDArray[np.float64], parent_rows: NDArray[np.float64],
                              start: float | None = None) -> tuple[float, float]:
    """κ of a group of refined rows and the evidence they gain over their parents, after a BIC charge.

    The gain is log p(counts | κ̂ · parent) − Σ c log parent (the parents' own prediction, κ → ∞), minus ½ log n
    for the one estimated concentration (Schwarz 1978). A group whose penalised gain is not positive keeps its
    parents' rows exactly (κ = ∞, gain 0): a refinement is used only where the data pay for it.
    """
    n = float(counts.sum())
    if n <= 0:
        return math.inf, 0.0
    k = eb_concentration(counts, parent_rows, start=start if start is not None and math.isfinite(start) else None)
    nz = counts > 0
    plugin = float(np.sum(counts[nz] * np.log(parent_rows[nz])))
    gain = dirichlet_multinomial_evidence(counts, parent_rows, k) - plugin - 0.5 * math.log(max(n, 1.0))
    if gain <= 0:
        return math.inf, 0.0
    return k, gain


def context_loglik(fit: ContextFit, ev: Events) -> NDArray[np.float64]:
    """Log-likelihood of every trace under fitted rows (module docstring)."""
    lp = np.log(np.maximum(fit.rows[ev.node, ev.col], 1e-300))
    out: NDArray[np.float64] = np.bincount(ev.trace, weights=lp, minlength=ev.n_traces).astype(np.float64)
    out += np.log(np.maximum(fit.pi0[ev.first_symbol], 1e-300))
    return out


# ---------------------------------------------------------------------------------------------------- schemes
class FirstOrderScheme(ContextScheme):
    """Context = the current observed state (the plain first-order chain)."""

    name = "first-order"

    def __init__(self) -> None:
        self.m = 0

    def setup(self, enc: EncodedTraces) -> None:
        self.m = enc.n_symbols
        self.parent = np.full(self.m, -1, np.int64)
        self.level = np.ones(self.m, np.int64)

    def contexts(self, enc: EncodedTraces) -> NDArray[np.int64]:
        return enc.codes.copy()

    def compile(self, rows: NDArray[np.float64], pi0: NDArray[np.float64], observed_names: tuple[str, ...]
                ) -> CompiledArrays:
        m = self.m
        return CompiledArrays(*dense_transitions(rows[:m, :m]), rows[:m, m].copy(), rows[:m, m + 1].copy(),
                              pi0.copy(), np.arange(m, dtype=np.int64), lambda: observed_names)


# ---------------------------------------------------------------------------------------------------- model
def compiled_model(arrays: CompiledArrays, observed_names: tuple[str, ...], family: str,
                   metadata: dict[str, Any]) -> CompiledModel:
    """Validate compiled arrays as an :class:`AbsorbingChain` with a 0/1 emission map (one class)."""
    # The normalised Q is fresh, so the chain takes it without a copy (the refits behind the intervals compile one
    # apiece).
    Q, rs, rf = arrays.normalised()
    chain = AbsorbingChain(Q, rs, rf, arrays.pi0 / arrays.pi0.sum(), arrays.names, metadata, copy=False)
    n = len(arrays.names)
    emission = np.zeros((n, len(observed_names)))
    emission[np.arange(n), arrays.observed] = 1.0
    return CompiledModel(chain, observed_names, emission, np.zeros(n, np.int64), np.ones(1), "iid", family)


class ContextChainModel(TraceModel):
    """A family that is a chain on causal contexts of the observed states (module docstring)."""

    kappa_by: KappaBy = "level"

    def __init__(self, *, group: Grouping = "auto") -> None:
        super().__init__(group=group)
        self.scheme_: ContextScheme | None = None
        self.fit_: ContextFit | None = None

    @abstractmethod
    def _make_scheme(self) -> ContextScheme: ...

    def _fit(self, enc: EncodedTraces) -> None:
        scheme = self._make_scheme()
        scheme.setup(enc)
        self.scheme_ = scheme
        self.fit_ = fit_context_rows(scheme, events(enc, scheme), enc.n_symbols, kappa_by=self.kappa_by)

    def _trace_loglik(self, enc: EncodedTraces) -> NDArray[np.float64]:
        assert self.scheme_ is not None and self.fit_ is not None
        return context_loglik(self.fit_, events(enc, self.scheme_))

    @property
    def n_parameters(self) -> int:
        self._check_fitted()
        assert self.fit_ is not None
        return self.fit_.n_parameters

    def last_step(self, enc: EncodedTraces) -> LastStep:
        assert self.scheme_ is not None and self.fit_ is not None
        node = self.scheme_.contexts(enc)
        last = enc.offsets[1:] - 1
        total = context_loglik(self.fit_, events(enc, self.scheme_))
        col = enc.next_outcome()[last]
        done = col >= 0
        exit_lp = np.zeros(enc.n_traces)
        exit_lp[done] = np.log(np.maximum(self.fit_.rows[node[last][done], col[done]], 1e-300))
        return LastStep(total - exit_lp, self.scheme_.expanded_index(enc, node)[last])

    def success_law_chain(self) -> AbsorbingChain | SparseChain:
        """Above :data:`~tracetochain.numerics.absorbing.SPARSE_THRESHOLD` expanded states (where the chain's solves
        are sparse anyway) the compiled arrays' non-zeros, never the dense Q: a refit of the timing null on an
        order-3 chain of 2,187 states costs half as much. Smaller chains: the compiled chain."""
        from tracetochain.numerics.absorbing import SPARSE_THRESHOLD

        if self._compiled is None:
            self._check_fitted()
            arrays = self._arrays()
            if arrays.n_states > SPARSE_THRESHOLD:
                return arrays.sparse_chain()
            self._compiled = self._compile(arrays)  # compiled once, kept as to_chain() keeps it
        return self.to_chain().chain

    def _arrays(self) -> CompiledArrays:
        assert self.scheme_ is not None and self.fit_ is not None and self.state_names_ is not None
        return self.scheme_.compile(self.fit_.rows, self.fit_.pi0, self.state_names_)

    def _compile(self, arrays: CompiledArrays | None = None) -> CompiledModel:
        assert self.scheme_ is not None and self.fit_ is not None and self.state_names_ is not None
        arrays = arrays if arrays is not None else self._arrays()
        meta = {"family": self.family, "model": self.label, **self.scheme_.settings(),
                "concentrations": {k: (v if math.isfinite(v) else None) for k, v in self.fit_.kappas.items()}}
        return compiled_model(arrays, self.state_names_, self.family, meta)
