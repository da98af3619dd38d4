"""A finite mixture of absorbing chains: tasks (or traces) of C latent classes, each with a chain of its own.

Model: unit u (a task when task ids repeat, else a trace) has class c with probability w_c; given the class, its
traces are independent draws from class c's chain. The likelihood of a unit is

    p(u) = Σ_c w_c Π_{traces x of u} p_c(x),

fitted by expectation–maximisation (Dempster, Laird & Rubin 1977): the E-step gives every unit its responsibilities
r_uc ∝ w_c Π_x p_c(x); the M-step refits each class's chain on all events weighted by r_uc and sets w_c = mean_u r_uc.
Several starts (random partitions of the units, and one split by each unit's pass rate) run a short while; the best
continues to convergence. Classes are numbered by decreasing weight.

How classes share strength (``share``):

* ``"pooled"`` (default): the component family is first fitted on all traces. A class's first-order rows (and π0)
  are the pooled ones plus the class's own evidence, (c_c + κ_c p_pooled) / (n_c + κ_c), κ_c chosen by empirical
  Bayes in each M-step; its refined rows (longer contexts, step buckets) are shrunk toward the class's own coarser
  rows with the concentrations of the pooled fit. Classes then differ where their data disagree with the pool, and
  a rich component (an order-3 chain) does not have to learn its refinements C times from a C-th of the data.
* ``"none"``: every class is a full model of its own (its own hierarchical shrinkage); a mixture of one class is
  then exactly the component family.

A mixture of one class is the component family in both cases.

The fitted mixture compiles to ONE absorbing chain on the disjoint union of the classes' state spaces
(block-diagonal Q, π0 = the classes' π0 weighted by w_c), so every metric, interval and what-if applies. When trials
of a task share a class, pass^k = Σ_c w_c R_c^k (heterogeneity); when classes are drawn per trace, trials are i.i.d.
and pass^k = R∞^k.

Held-out scoring of a task-level mixture: a new task's joint log-likelihood log Σ_c w_c Π_x p_c(x), split over its
traces as predictive terms log p(x_j | x_1 … x_{j−1}) (in table order), which sum to it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from tracetochain._outcome import SUCCESS
from tracetochain.chain import AbsorbingChain
from tracetochain.models._base import CompiledModel, TraceModel, Trials, predictive_terms
from tracetochain.models._context import (
    ContextFit,
    ContextScheme,
    Events,
    FirstOrderScheme,
    context_loglik,
    events,
    fit_context_rows,
)
from tracetochain.models._encoded import EncodedTraces, Grouping
from tracetochain.models.duration import StepBucketScheme
from tracetochain.models.lifted import OrderKScheme
from tracetochain.numerics.shared import logsumexp_rows

Component = Literal["markov", "duration", "lifted"]
Share = Literal["pooled", "none"]
#: EM iterations every start gets before only the best one continues.
SHORT_RUN = 25


@dataclass(frozen=True, eq=False)
class _EMState:
    loglik: float
    fits: list[ContextFit]
    weights: NDArray[np.float64]
    resp: NDArray[np.float64]
    n_iter: int
    converged: bool


class MixtureModel(TraceModel):
    """Mixture of C absorbing chains fitted by EM (module docstring).

    Parameters
    ----------
    n_classes : int
        C ≥ 1.
    component : {"markov", "duration", "lifted"}
        The chain family of every class (first-order by default; "duration" uses the step buckets chosen on all
        traces, "lifted" the order ``order``).
    order : int
        Context length of a "lifted" component.
    share : {"pooled", "none"}
        How classes share strength (module docstring).
    group : {"auto", "task", "trace"}
        The unit that carries a class: the task when task ids repeat (``"auto"``), or each trace.
    n_init, max_iter, tol, seed
        Starts of EM, its iteration cap, the relative change of the log-likelihood that stops it, and the seed of
        the random starts.
    """

    family = "mixture"

    def __init__(self, n_classes: int = 2, *, component: Component = "markov", order: int = 2,
                 share: Share = "pooled", group: Grouping = "auto", n_init: int = 4, max_iter: int = 300,
                 tol: float = 1e-6, seed: int = 0) -> None:
        super().__init__(group=group)
        if n_classes < 1:
            raise ValueError(f"n_classes must be >= 1, got {n_classes}")
        if component not in ("markov", "duration", "lifted"):
            raise ValueError(f"component must be 'markov', 'duration' or 'lifted', got {component!r}")
        if n_init < 1 or max_iter < 1:
            raise ValueError("n_init and max_iter must be >= 1")
        if share not in ("pooled", "none"):
            raise ValueError(f"share must be 'pooled' or 'none', got {share!r}")
        self.n_classes = n_classes
        self.component = component
        self.order = order
        self.share = share
        self.pooled_: ContextFit | None = None
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.seed = seed
        self.scheme_: ContextScheme | None = None
        self.fits_: list[ContextFit] = []
        self.weights_: NDArray[np.float64] | None = None
        self.responsibilities_: NDArray[np.float64] | None = None
        self.loglik_: float | None = None
        self.n_iter_: int = 0
        self.converged_: bool = False

    # ------------------------------------------------------------------ scheme
    def _make_scheme(self) -> ContextScheme:
        if self.component == "duration":
            return StepBucketScheme("auto")
        if self.component == "lifted":
            return OrderKScheme(self.order)
        return FirstOrderScheme()

    @property
    def _kappa_by(self) -> Literal["level", "parent"]:
        return "parent" if self.component == "duration" else "level"

    # ------------------------------------------------------------------ EM
    def _class_loglik(self, ev: Events, fits: list[ContextFit]) -> NDArray[np.float64]:
        """(n_traces, C) log-likelihood of every trace under every class."""
        return np.column_stack([context_loglik(f, ev) for f in fits])

    def _m_step(self, ev: Events, enc: EncodedTraces, resp: NDArray[np.float64],
                previous: list[ContextFit]) -> list[ContextFit]:
        assert self.scheme_ is not None
        trace_w = resp[enc.unit]  # (n_traces, C)
        pooled = self.pooled_ if self.share == "pooled" and self.n_classes > 1 else None
        return [fit_context_rows(self.scheme_, ev, enc.n_symbols, event_weight=trace_w[ev.trace, c],
                                 trace_weight=trace_w[:, c], kappa_by=self._kappa_by,
                                 previous=previous[c] if previous else None, pooled=pooled)
                for c in range(self.n_classes)]

    def _starts(self, enc: EncodedTraces, ev: Events, rng: np.random.Generator) -> list[NDArray[np.float64]]:
        U, C = enc.n_units, self.n_classes
        starts: list[NDArray[np.float64]] = []
        # k-means++ on every unit's profile of (context, outcome) frequencies (square-rooted: the Hellinger
        # geometry of distributions), the usual start for mixtures of Markov chains; then a split by pass rate;
        # then random partitions.
        from scipy.cluster.vq import kmeans2

        J = enc.n_symbols + 2
        assert self.scheme_ is not None
        first_order = enc.codes[ev_step_index(enc, ev)]
        prof = np.zeros((U, enc.n_symbols * J))
        np.add.at(prof, (enc.unit[ev.trace], first_order * J + ev.col), 1.0)
        prof = np.sqrt(prof / np.maximum(prof.sum(axis=1, keepdims=True), 1.0))
        if U > C:
            _, labels = kmeans2(prof, C, minit="++", seed=int(rng.integers(2**31)))
            starts.append(np.eye(C)[labels] * 0.9 + 0.1 / C)
        # A split by each unit's pass rate (then mean length): classes that differ in outcome are the ones that
        # matter for pass^k, and EM from here rarely needs long.
        succ = enc.units_of((enc.outcomes == SUCCESS).astype(np.float64))
        n = enc.units_of(np.ones(enc.n_traces))
        length = enc.units_of(enc.lengths.astype(np.float64)) / n
        order = np.lexsort((length, succ / n))
        hard = np.empty(U, np.int64)
        hard[order] = np.minimum(np.arange(U) * C // max(U, 1), C - 1)
        starts.append(np.eye(C)[hard] * 0.9 + 0.1 / C)
        while len(starts) < self.n_init:
            hard = rng.integers(0, C, U)
            starts.append(np.eye(C)[hard] * 0.8 + 0.2 / C)
        return starts

    def _run(self, ev: Events, enc: EncodedTraces, resp: NDArray[np.float64], fits: list[ContextFit],
             n_iter: int) -> _EMState:
        prev = -math.inf
        w = resp.mean(axis=0)
        total = -math.inf
        it = 0
        converged = False
        for it in range(1, n_iter + 1):  # noqa: B007 (the count is reported)
            fits = self._m_step(ev, enc, resp, fits)
            w = np.maximum(resp.mean(axis=0), 1e-12)
            w = w / w.sum()
            ll_unit = np.column_stack([enc.units_of(col) for col in self._class_loglik(ev, fits).T])
            joint = ll_unit + np.log(w)[None, :]
            norm = logsumexp_rows(joint)
            resp = np.exp(joint - norm[:, None])
            total = float(norm.sum())
            if abs(total - prev) <= self.tol * max(1.0, abs(total)):
                converged = True
                break
            prev = total
        return _EMState(total, fits, w, resp, it, converged)

    def _fit(self, enc: EncodedTraces) -> None:
        scheme = self._make_scheme()
        scheme.setup(enc)
        self.scheme_ = scheme
        ev = events(enc, scheme)
        self.pooled_ = fit_context_rows(scheme, ev, enc.n_symbols, kappa_by=self._kappa_by)
        if self.n_classes == 1:  # one class is the component family itself
            self.fits_, self.weights_ = [self.pooled_], np.ones(1)
            self.responsibilities_ = np.ones((enc.n_units, 1))
            self.loglik_ = float(context_loglik(self.pooled_, ev).sum())
            self.n_iter_, self.converged_ = 0, True
            return
        rng = np.random.default_rng(self.seed)
        starts = self._starts(enc, ev, rng)
        # Every start runs a short while; the best one runs on to convergence (the others rarely catch up).
        short = min(SHORT_RUN, self.max_iter)
        runs = [self._run(ev, enc, start, [], short) for start in starts]
        best = max(runs, key=lambda r: r.loglik)
        if not best.converged and self.max_iter > short:
            more = self._run(ev, enc, best.resp, best.fits, self.max_iter - short)
            best = _EMState(more.loglik, more.fits, more.weights, more.resp, best.n_iter + more.n_iter,
                            more.converged)
        total, fits, w, resp, it, conv = (best.loglik, best.fits, best.weights, best.resp, best.n_iter,
                                          best.converged)
        order = np.argsort(-w, kind="stable")
        self.fits_ = [fits[i] for i in order]
        self.weights_ = w[order]
        self.responsibilities_ = resp[:, order]
        self.loglik_ = total
        self.n_iter_ = it
        self.converged_ = conv

    # ------------------------------------------------------------------ scoring
    def _trace_loglik(self, enc: EncodedTraces) -> NDArray[np.float64]:
        assert self.scheme_ is not None and self.weights_ is not None
        ev = events(enc, self.scheme_)
        ll = self._class_loglik(ev, self.fits_)  # (n_traces, C)
        logw = np.log(self.weights_)
        if enc.grouped_by == "trace" or self.n_classes == 1:
            out: NDArray[np.float64] = logsumexp_rows(ll + logw[None, :])
            return out
        return predictive_terms(ll, logw, enc)

    def predict_classes(self, traces: Any) -> NDArray[np.float64]:
        """Posterior class probabilities of every unit of ``traces`` (rows sum to 1)."""
        enc = self.encode(traces)
        assert self.scheme_ is not None and self.weights_ is not None
        ll = self._class_loglik(events(enc, self.scheme_), self.fits_)
        unit_ll = np.column_stack([enc.units_of(col) for col in ll.T]) + np.log(self.weights_)[None, :]
        out: NDArray[np.float64] = np.exp(unit_ll - logsumexp_rows(unit_ll)[:, None])
        return out

    # ------------------------------------------------------------------ structure
    @property
    def n_parameters(self) -> int:
        """Independent classes: the sum of the classes' parameters. Pooled sharing: the pooled model's plus the
        effective number of class deviations, Σ (support − 1)·n/(n + κ) over class rows (the trace of the
        shrinkage smoother); plus C − 1 weights."""
        self._check_fitted()
        if self.share == "pooled" and self.n_classes > 1:
            assert self.pooled_ is not None
            return round(self.pooled_.n_parameters + sum(f.n_parameters for f in self.fits_)) \
                + self.n_classes - 1
        return sum(f.n_parameters for f in self.fits_) + self.n_classes - 1

    def like(self) -> MixtureModel:
        return MixtureModel(self.n_classes, component=self.component, order=self.order, share=self.share,
                            group=self.group, n_init=self.n_init, max_iter=self.max_iter, tol=self.tol,
                            seed=self.seed)

    @property
    def size(self) -> int | None:
        return self.n_classes

    @property
    def label(self) -> str:
        comp = {"markov": "", "duration": ", duration", "lifted": f", lifted(k={self.order})"}[self.component]
        return f"mixture(C={self.n_classes}{comp})"

    def _compile(self) -> CompiledModel:
        assert self.scheme_ is not None and self.weights_ is not None and self.state_names_ is not None
        blocks = [self.scheme_.compile(f.rows, f.pi0, self.state_names_) for f in self.fits_]
        sizes = [b.n_states for b in blocks]
        n = sum(sizes)
        Q = np.zeros((n, n))
        rs, rf, p0 = np.zeros(n), np.zeros(n), np.zeros(n)
        names: list[str] = []
        component = np.zeros(n, np.int64)
        emission = np.zeros((n, len(self.state_names_)))
        at = 0
        for c, (b, size) in enumerate(zip(blocks, sizes, strict=True)):
            sl = slice(at, at + size)
            Q[sl, sl], rs[sl], rf[sl] = b.normalised()
            p0[sl] = self.weights_[c] * b.pi0 / b.pi0.sum()
            names += [f"c{c + 1}:{x}" for x in b.names]
            component[sl] = c
            emission[np.arange(at, at + size), b.observed] = 1.0
            at += size
        trials: Trials = "task" if self.grouped_by_ == "task" else "iid"
        meta = {"family": self.family, "model": self.label, "n_classes": self.n_classes, "share": self.share,
                "class_weights": self.weights_.tolist(), "trials": trials, "grouped_by": self.grouped_by_,
                "em": {"loglik": self.loglik_, "n_iter": self.n_iter_, "converged": self.converged_,
                       "n_init": self.n_init, "seed": self.seed}, **self.scheme_.settings()}
        chain = AbsorbingChain(Q, rs, rf, p0 / p0.sum(), tuple(names), meta)
        return CompiledModel(chain, self.state_names_, emission, component, self.weights_.copy(), trials,
                             self.family)



def ev_step_index(enc: EncodedTraces, ev: Events) -> NDArray[np.int64]:
    """The step row of every event (events are the steps with an observed successor, in step order)."""
    out: NDArray[np.int64] = np.flatnonzero(enc.next_outcome() >= 0)
    return out
