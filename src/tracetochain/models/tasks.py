"""Task classes on top of any family: tasks differ in how likely an ending is a success.

Repeated trials of one task succeed together more often than independent draws would (τ-bench airline: 14 of 50
tasks never pass in 4 trials, 10 always do). The dynamics — which steps follow which, and when a run ends — are
described well by a chain family (first order, order k, duration, hidden states), but that chain makes trials
i.i.d., so its pass^k = R∞^k is far too low. This layer keeps the family's dynamics and lets the latent class j of a
task (probability v_j) shift the log-odds of success at every exit:

    R⊕_j(s) = e(s) σ(λ(s) + δ_j),   R⊖_j(s) = e(s) − R⊕_j(s),   e = R⊕ + R⊖,   λ = logit(R⊕ / e),

for every expanded state s of the family's compiled chain (a discrete random-effects, or "frailty", model of the
outcome with a nonparametric mixing distribution; Laird 1978). A class changes only the exit factor of a trace, so
the class posterior of a task comes from its outcomes given its paths, and EM alternates those posteriors with
v_j = mean posterior and δ_j = the 1-d maximiser of the posterior-weighted exit log-likelihood.

For a chain on contexts (first order, order k, duration) the classes can do more (``tilt="all"``, the default for
those families): class j tilts *every* row by one vector β_j over the m + 2 outcomes,

    P_j(x | ctx) = P(x | ctx) e^{β_j[x]} / Σ_y P(y | ctx) e^{β_j[y]},

so a class of tasks can prefer some actions everywhere (a hand-off, a write) as well as success or failure — trials
of one task then share their paths' tendencies, which is what makes their outcomes agree when the path decides the
outcome. Each β_j is the maximiser of the class's posterior-weighted log-likelihood with a small ridge penalty
(a convex multinomial-logit problem with the base rows as offsets, solved by Newton's method on the (node, outcome)
counts). π0 is shared.

The result compiles to the disjoint union of C copies of the family's chain with tilted exits (block-diagonal Q,
π0 weighted by v_j): every metric applies, and pass^k = Σ_j v_j R_j^k, pass@k = 1 − Σ_j v_j (1 − R_j)^k, with R_j the
tilted chain's R∞ — the chain's own pass^k for a population of tasks that differ.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from scipy.special import expit, logit

from tracetochain._outcome import FAILURE, SUCCESS
from tracetochain.chain import AbsorbingChain
from tracetochain.models._base import CompiledModel, LastStep, TraceModel, Trials, predictive_terms
from tracetochain.models._context import ContextChainModel, Events, events
from tracetochain.models._encoded import EncodedTraces, Grouping
from tracetochain.numerics.shared import logsumexp_rows

#: Range of the class log-odds shifts δ_j (σ(±12) is within 6e−6 of 0 or 1).
DELTA_BOUND = 12.0
#: Ridge penalty on the row tilts β_j (keeps them finite when a class never shows some outcome).
TILT_RIDGE = 0.1
#: EM iterations every start gets before only the best one continues.
SHORT_RUN = 15
Tilt = Literal["auto", "outcome", "all"]


class TaskClassModel(TraceModel):
    """A family's dynamics with C latent task classes that shift the success log-odds of every exit.

    Parameters
    ----------
    base : TraceModel
        An unfitted model of any family but ``mixture`` (its classes already carry heterogeneity).
    n_classes : int
        C ≥ 1 task classes (C = 1 is the base model).
    tilt : {"auto", "outcome", "all"}
        What a class changes: the success share of every exit (``"outcome"``), or every row by a log-linear tilt
        (``"all"``, chains on contexts only). ``"auto"``: ``"all"`` for chains on contexts, else ``"outcome"``.
    n_init, max_iter, tol, seed
        EM starts, iteration cap, relative stopping change, seed.
    """

    family = "task-classes"

    def __init__(self, base: TraceModel, n_classes: int = 2, *, tilt: Tilt = "auto", n_init: int = 4,
                 max_iter: int = 500, tol: float = 1e-7, seed: int = 0, group: Grouping = "auto") -> None:
        super().__init__(group=group)
        if base.family == "mixture":
            raise ValueError("a mixture already has classes of its own; put task classes on a plain family")
        if n_classes < 1:
            raise ValueError(f"n_classes must be >= 1, got {n_classes}")
        if tilt not in ("auto", "outcome", "all"):
            raise ValueError(f"tilt must be 'auto', 'outcome' or 'all', got {tilt!r}")
        if tilt == "all" and not isinstance(base, ContextChainModel):
            raise ValueError("tilt='all' needs a chain on contexts (markov, lifted, duration)")
        self.base = base
        self.n_classes = n_classes
        self.tilt = tilt
        self.tilts_: NDArray[np.float64] | None = None
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.seed = seed
        self.weights_: NDArray[np.float64] | None = None
        self.shifts_: NDArray[np.float64] | None = None
        self.loglik_: float | None = None
        self._exit: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None

    # ------------------------------------------------------------------ exits
    def _class_exits(self, delta: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(R⊕_j, R⊖_j) of the base chain tilted by δ."""
        assert self._exit is not None
        e, lam = self._exit
        rs = e * expit(lam + delta)
        return rs, e - rs

    def _exit_loglik(self, last: LastStep, outcomes: NDArray[np.int64], delta: float) -> NDArray[np.float64]:
        """log of every trace's exit factor in a class with shift δ (0 for censored traces)."""
        rs, rf = self._class_exits(delta)
        out = np.zeros(outcomes.size)
        s, f = outcomes == SUCCESS, outcomes == FAILURE
        fs = last.exit_factor(rs)
        ff = last.exit_factor(rf)
        out[s] = np.log(np.maximum(fs[s], 1e-300))
        out[f] = np.log(np.maximum(ff[f], 1e-300))
        return out

    # ------------------------------------------------------------------ fit
    @property
    def _all(self) -> bool:
        return self.tilt == "all" or (self.tilt == "auto" and isinstance(self.base, ContextChainModel))

    def _fit(self, enc: EncodedTraces) -> None:
        if self._all:
            self._fit_tilts(enc)
            return
        self.base.fit(enc)
        chain = self.base.to_chain().chain
        e = chain.R_success + chain.R_failure
        share = np.where(e > 0, chain.R_success / np.where(e > 0, e, 1.0), 0.5)
        self._exit = (e, logit(np.clip(share, 1e-12, 1 - 1e-12)))
        last = self.base.last_step(enc)
        C = self.n_classes
        if C == 1:
            self.weights_, self.shifts_ = np.ones(1), np.zeros(1)
            self.loglik_ = float(np.sum(last.prefix + self._exit_loglik(last, enc.outcomes, 0.0)))
            return
        rng = np.random.default_rng(self.seed)
        starts = [np.linspace(-2.0, 2.0, C)] + [np.sort(rng.normal(0.0, 2.5, C)) for _ in range(self.n_init - 1)]
        best: tuple[float, NDArray[np.float64], NDArray[np.float64]] | None = None
        for d0 in starts:
            res = self._em(enc, last, np.full(C, 1.0 / C), d0)
            if best is None or res[0] > best[0]:
                best = res
        assert best is not None
        total, w, d = best
        order = np.argsort(d)  # classes from hardest to easiest
        self.weights_, self.shifts_ = w[order], d[order]
        self.loglik_ = total + float(last.prefix.sum())

    def _em(self, enc: EncodedTraces, last: LastStep, w: NDArray[np.float64], d: NDArray[np.float64]
            ) -> tuple[float, NDArray[np.float64], NDArray[np.float64]]:
        C = self.n_classes
        d = d.copy()
        prev = -math.inf
        total = -math.inf
        for _ in range(self.max_iter):
            ll = np.column_stack([self._exit_loglik(last, enc.outcomes, float(d[j])) for j in range(C)])
            unit = np.column_stack([enc.units_of(ll[:, j]) for j in range(C)]) + np.log(w)[None, :]
            norm = logsumexp_rows(unit)
            total = float(norm.sum())
            resp = np.exp(unit - norm[:, None])
            w = np.maximum(resp.mean(axis=0), 1e-12)
            w = w / w.sum()
            trace_r = resp[enc.unit]
            from scipy.optimize import minimize_scalar  # imported here: start-up of commands without this model
            for j in range(C):
                rj = trace_r[:, j]

                def negative(delta: float, rj: NDArray[np.float64] = rj) -> float:
                    return -float(rj @ self._exit_loglik(last, enc.outcomes, delta))

                d[j] = float(minimize_scalar(negative, bounds=(-DELTA_BOUND, DELTA_BOUND), method="bounded",
                                             options={"xatol": 1e-5}).x)
            if abs(total - prev) <= self.tol * max(1.0, abs(total)):
                break
            prev = total
        return total, w, d

    # ------------------------------------------------------------------ row tilts
    def _base_rows(self) -> NDArray[np.float64]:
        assert isinstance(self.base, ContextChainModel) and self.base.fit_ is not None
        return self.base.fit_.rows

    def _tilted_rows(self, beta: NDArray[np.float64]) -> NDArray[np.float64]:
        w = self._base_rows() * np.exp(beta - beta.max())[None, :]
        out: NDArray[np.float64] = w / w.sum(axis=1, keepdims=True)
        return out

    def _tilt_loglik(self, ev: Events, base_ll: NDArray[np.float64], beta: NDArray[np.float64]
                     ) -> NDArray[np.float64]:
        """Per-trace log-likelihood under a tilt: base + Σ_events (β[x] − log Z(ctx)); ``beta`` is one tilt (J,) or
        one per class (C × J, giving traces × C)."""
        b = np.atleast_2d(beta)
        logz = np.log(np.exp(b) @ self._base_rows().T)  # C × nodes
        C, T = b.shape[0], ev.n_traces
        # One bincount for every class: class j's events are counted at trace + j·T.
        terms = (b[:, ev.col] - logz[:, ev.node]).ravel()
        per = np.bincount((ev.trace[None, :] + T * np.arange(C)[:, None]).ravel(), weights=terms,
                          minlength=C * T).reshape(C, T)
        out: NDArray[np.float64] = base_ll[:, None] + per.T
        return out[:, 0] if beta.ndim == 1 else out

    def _tilt_objective(self, n: NDArray[np.float64], col: NDArray[np.float64], beta: NDArray[np.float64]
                        ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Σ_x col[x] β[x] − Σ_node n[node] log Z_β(node) − ½ λ|β|², one value per row of ``beta`` (a × J), and
        the normalisers Z_β(node) = Σ_x P[node, x] e^{β[x]} (a × nodes) it computed."""
        z = np.exp(beta) @ self._base_rows().T
        out: NDArray[np.float64] = (np.einsum("aj,aj->a", col, beta) - np.einsum("an,an->a", n, np.log(z))
                                    - 0.5 * TILT_RIDGE * np.einsum("aj,aj->a", beta, beta))
        return out, z

    def _newton_tilts(self, counts: NDArray[np.float64], beta: NDArray[np.float64]) -> NDArray[np.float64]:
        """argmax_β_j Σ_{node,x} A_j[node,x] (β_j[x] − log Z_β_j(node)) − ½ λ|β_j|² for every class j at once
        (``counts`` C × nodes × J, ``beta`` C × J starts): concave, so Newton's method with a halving line search,
        each class stopping on its own. The classes' problems are independent; solving them together is one set of
        array operations per Newton step instead of C — the M-step is most of a task-class fit, and the timing
        null refits it hundreds of times."""
        P = self._base_rows()
        n = counts.sum(axis=2)
        col = counts.sum(axis=1)
        beta = np.array(beta, dtype=np.float64)
        value, z = self._tilt_objective(n, col, beta)
        J = beta.shape[1]
        ridge = TILT_RIDGE * np.eye(J)
        diagonal = np.arange(J)
        active = np.arange(beta.shape[0])
        for _ in range(50):
            if not active.size:
                break
            b, na = beta[active], n[active]
            # The tilted rows p = P e^β / Z, with Z kept from the objective at β.
            pt = P[None, :, :] * np.exp(b)[:, None, :]
            pt /= z[active][:, :, None]
            npt = na[:, :, None] * pt
            mean = npt.sum(axis=1)  # n @ pt
            grad = col[active] - mean - TILT_RIDGE * b
            # −Hessian: diag(n @ pt) − Σ_node n p pᵀ + λI (positive definite).
            hess = ridge - np.matmul(npt.transpose(0, 2, 1), pt)
            hess[:, diagonal, diagonal] += mean
            step = np.linalg.solve(hess, grad[:, :, None])[:, :, 0]
            # Halve each class's step until its objective does not fall (at most down to t = 2^-19).
            cand, new, z_new = b + step, np.empty(active.size), np.empty((active.size, P.shape[0]))
            pending = np.arange(active.size)
            t = 1.0
            while t > 1e-6 and pending.size:
                cand[pending] = b[pending] + t * step[pending]
                new[pending], z_new[pending] = self._tilt_objective(na[pending], col[active[pending]],
                                                                    cand[pending])
                pending = pending[new[pending] < value[active[pending]] - 1e-12]
                t *= 0.5
            old = value[active]
            beta[active], value[active], z[active] = cand, new, z_new
            active = active[np.abs(new - old) >= 1e-10 * np.maximum(1.0, np.abs(new))]
        return beta

    def _fit_tilts(self, enc: EncodedTraces) -> None:
        base = self.base
        assert isinstance(base, ContextChainModel)
        base.fit(enc)
        assert base.scheme_ is not None and base.fit_ is not None
        ev = events(enc, base.scheme_)
        base_ll = base._trace_loglik(enc)
        C, J = self.n_classes, enc.n_symbols + 2
        n_nodes = base.scheme_.n_nodes
        if C == 1:
            self.weights_, self.tilts_ = np.ones(1), np.zeros((1, J))
            self.shifts_ = np.zeros(1)
            self.loglik_ = float(base_ll.sum())
            return
        rng = np.random.default_rng(self.seed)
        ok = np.zeros(J)
        ok[J - 2], ok[J - 1] = 1.0, -1.0  # "easy" tilts toward success, "hard" toward failure
        starts = [np.outer(np.linspace(-1.0, 1.0, C), ok)] + [rng.normal(0.0, 0.5, (C, J))
                                                               for _ in range(self.n_init - 1)]
        def run(w: NDArray[np.float64], beta: NDArray[np.float64], n_iter: int
                ) -> tuple[float, NDArray[np.float64], NDArray[np.float64], bool]:
            prev, total = -math.inf, -math.inf
            cell = (ev.node * J + ev.col)[None, :] + (n_nodes * J) * np.arange(C)[:, None]  # class j's (node, x)
            for _ in range(n_iter):
                ll = self._tilt_loglik(ev, base_ll, beta)
                unit = np.column_stack([enc.units_of(ll[:, j]) for j in range(C)]) + np.log(w)[None, :]
                norm = logsumexp_rows(unit)
                total = float(norm.sum())
                if abs(total - prev) <= self.tol * max(1.0, abs(total)):
                    return total, w, beta, True
                prev = total
                resp = np.exp(unit - norm[:, None])
                w = np.maximum(resp.mean(axis=0), 1e-12)
                w = w / w.sum()
                r_ev = resp[enc.unit][ev.trace]
                A = np.bincount(cell.ravel(), weights=r_ev.T.ravel(), minlength=C * n_nodes * J
                                ).reshape(C, n_nodes, J).astype(np.float64)
                beta = self._newton_tilts(A, beta)
            return total, w, beta, False

        # Every start runs a short while; the best one runs on to convergence.
        short = min(SHORT_RUN, self.max_iter)
        runs = [run(np.full(C, 1.0 / C), b0.copy(), short) for b0 in starts]
        top = max(runs, key=lambda r: r[0])
        if not top[3] and self.max_iter > short:
            top = run(top[1], top[2], self.max_iter - short)
        best: tuple[float, NDArray[np.float64], NDArray[np.float64]] | None = (top[0], top[1], top[2])
        assert best is not None
        total, w, beta = best
        # Classes from hardest to easiest (by the success tilt relative to failure).
        order = np.argsort(beta[:, J - 2] - beta[:, J - 1])
        self.weights_, self.tilts_ = w[order], beta[order]
        self.shifts_ = self.tilts_[:, J - 2] - self.tilts_[:, J - 1]
        self.loglik_ = total

    # ------------------------------------------------------------------ scoring
    def _trace_loglik(self, enc: EncodedTraces) -> NDArray[np.float64]:
        assert self.weights_ is not None and self.shifts_ is not None
        if self._all:
            assert isinstance(self.base, ContextChainModel) and self.base.scheme_ is not None
            assert self.tilts_ is not None
            ev = events(enc, self.base.scheme_)
            base_ll = self.base._trace_loglik(enc)
            ll_all = self._tilt_loglik(ev, base_ll, self.tilts_)
            if enc.grouped_by == "trace" or self.n_classes == 1:
                res: NDArray[np.float64] = logsumexp_rows(ll_all + np.log(self.weights_)[None, :])
                return res
            return predictive_terms(ll_all, np.log(self.weights_), enc)
        last = self.base.last_step(enc)
        ll = np.column_stack([last.prefix + self._exit_loglik(last, enc.outcomes, float(dj))
                              for dj in self.shifts_])
        if enc.grouped_by == "trace" or self.n_classes == 1:
            out: NDArray[np.float64] = logsumexp_rows(ll + np.log(self.weights_)[None, :])
            return out
        return predictive_terms(ll, np.log(self.weights_), enc)

    def fit(self, traces: Any, state_names: Any = None) -> TaskClassModel:
        super().fit(traces, state_names)
        return self

    @property
    def n_parameters(self) -> int:
        """The base model's, plus C − 1 weights and per class one shift (``"outcome"``) or m + 1 free tilts."""
        self._check_fitted()
        if self.n_classes == 1:
            return self.base.n_parameters
        per = len(self.state_names_ or ()) + 1 if self._all else 1
        return self.base.n_parameters + self.n_classes * per + self.n_classes - 1

    def like(self) -> TaskClassModel:
        return TaskClassModel(self.base.like(), self.n_classes, tilt=self.tilt, n_init=self.n_init,
                              max_iter=self.max_iter, tol=self.tol, seed=self.seed, group=self.group)

    @property
    def size(self) -> int | None:
        return self.n_classes

    @property
    def label(self) -> str:
        return f"{self.base.label}+tasks(C={self.n_classes})"

    def _compile(self) -> CompiledModel:
        assert self.weights_ is not None and self.shifts_ is not None and self.state_names_ is not None
        base = self.base.to_chain()
        ch = base.chain
        n, C = ch.n_states, self.n_classes
        Q = np.zeros((n * C, n * C))
        rs, rf, p0 = np.zeros(n * C), np.zeros(n * C), np.zeros(n * C)
        names: list[str] = []
        for j in range(C):
            sl = slice(j * n, (j + 1) * n)
            if self._all:
                assert isinstance(self.base, ContextChainModel) and self.base.scheme_ is not None
                assert self.base.fit_ is not None and self.tilts_ is not None
                arr = self.base.scheme_.compile(self._tilted_rows(self.tilts_[j]), self.base.fit_.pi0,
                                                self.state_names_)
                Q[sl, sl], rs[sl], rf[sl] = arr.normalised()
            else:
                Q[sl, sl] = ch.Q
                rs[sl], rf[sl] = self._class_exits(float(self.shifts_[j]))
            p0[sl] = self.weights_[j] * ch.pi0
            names += [f"t{j + 1}:{x}" for x in ch.state_names] if C > 1 else list(ch.state_names)
        trials: Trials = "task" if self.grouped_by_ == "task" and C > 1 else "iid"
        meta = {"family": self.family, "model": self.label, "base": self.base.label,
                "class_weights": self.weights_.tolist(), "success_log_odds_shifts": self.shifts_.tolist(),
                "tilt": "all" if self._all else "outcome",
                "row_tilts": None if self.tilts_ is None else self.tilts_.tolist(),
                "trials": trials, "base_metadata": ch.metadata}
        chain = AbsorbingChain(Q, rs, rf, p0 / p0.sum(), tuple(names), meta)
        return CompiledModel(chain, self.state_names_, np.tile(base.emission, (C, 1)), np.repeat(np.arange(C), n),
                             self.weights_.copy(), trials, f"{base.family}+task-classes")
