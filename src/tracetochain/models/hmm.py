"""Hidden states: an absorbing hidden Markov model whose hidden states emit the observed states.

Model (K hidden states, m observed labels): the first hidden state z_1 ~ π; at every step the hidden state z_t
emits the observed label s_t ~ B[z_t, ·]; then it moves to z_{t+1} ~ A[z_t, ·] or exits to success or failure with
probabilities R⊕[z_t], R⊖[z_t] (each row of [A | R⊕ | R⊖] sums to 1). A trace s_1 … s_L ending in outcome o has

    p = Σ_{z_1 … z_L} π(z_1) Π_t B(z_t, s_t) Π_{t<L} A(z_t, z_{t+1}) · R_o(z_L)     (no exit factor if censored),

so the outcome is an absorbing transition of the hidden chain, and the fitted model *is* an absorbing chain on the
hidden states (Q = A, exits R⊕, R⊖, start π): every metric, interval and what-if applies to it, and the emissions
say what each hidden state looks like.

Fitting: Baum–Welch EM (Baum et al. 1970; Rabiner 1989 for the scaled forward–backward recursions used here),
vectorised across traces: traces are sorted by length so the traces still running at step t are a prefix, and each
step is one (n_t × K) @ (K × K) product. Rows get a small Dirichlet prior (one pseudo-observation per row, spread
uniformly over the next hidden states and the two exits, and over the labels in proportion to their frequency) so
that no probability is exactly zero on held-out data. Several random starts run a short while, in step (one
forward–backward pass serves all of them, each with its own numbers, bit for bit), and the best continues to
convergence. Hidden states are numbered by decreasing expected visits.

Why not an HMM library: hmmlearn's ``CategoricalHMM`` and pomegranate model sequences that simply stop; they have
no absorbing outcome (success vs failure as the final transition), no censored sequences (steps observed, no end),
and their per-sequence scores would have to be reassembled from internals. The recursions are short; writing them
keeps the outcome inside the likelihood.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from tracetochain._outcome import CENSORED, FAILURE, SUCCESS
from tracetochain.chain import AbsorbingChain
from tracetochain.models._base import CompiledModel, LastStep, TraceModel
from tracetochain.models._encoded import EncodedTraces, Grouping

#: EM iterations every start gets before only the best one continues.
SHORT_RUN = 30
#: Traces on which the random starts are compared when there are more (the best start is refined on all).
START_SUBSAMPLE = 2000
#: Pseudo-observations per row (transitions + exits, emissions, start).
PRIOR_MASS = 1.0


@dataclass(frozen=True, eq=False)
class HMMParams:
    """π (K,), A (K, K), exits (K, 2) [success, failure], B (K, m)."""

    pi: NDArray[np.float64]
    A: NDArray[np.float64]
    exits: NDArray[np.float64]
    B: NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class _Layout:
    """Traces sorted by decreasing length: at step t the running traces are the first n[t]."""

    order: NDArray[np.int64]
    n_active: NDArray[np.int64]
    symbols: list[NDArray[np.int64]]
    length: NDArray[np.int64]  # sorted
    outcome: NDArray[np.int64]  # sorted


def _layout(enc: EncodedTraces) -> _Layout:
    lengths = enc.lengths
    order = np.argsort(-lengths, kind="stable").astype(np.int64)
    L = lengths[order]
    T = int(L.max()) if L.size else 0
    n_active = np.array([int(np.count_nonzero(L > t)) for t in range(T)], dtype=np.int64) if T else \
        np.zeros(0, np.int64)
    starts = enc.starts[order]
    symbols = [enc.codes[starts[: n_active[t]] + t] for t in range(T)]
    return _Layout(order, n_active, symbols, L, enc.outcomes[order])


@dataclass(frozen=True, eq=False)
class _Posterior:
    loglik: NDArray[np.float64]  # per trace (sorted order)
    start: NDArray[np.float64]  # expected z_1 counts (K,)
    trans: NDArray[np.float64]  # (K, K)
    exits: NDArray[np.float64]  # (K, 2)
    emit: NDArray[np.float64]  # (K, m)


def _forward(ps: list[HMMParams], lay: _Layout, emissions: list[NDArray[np.float64]] | None = None
             ) -> tuple[list[NDArray[np.float64]], list[NDArray[np.float64]], NDArray[np.float64], NDArray[np.float64]]:
    """Scaled forward pass of S parameter sets at once: α̂_t (S × n_t × K), scales c_t (S × n_t), the exit factor e
    and the log-likelihood per trace (S × n_traces).

    Several sets (the random starts of EM) share each step's Python work; every product is taken per set, with the
    same operands in the same order as for one set alone, so each set's numbers are those of a run on its own (bit
    for bit; tests/models/test_hmm.py). ``emissions``, when given, is filled with B[·, s_t] of every running trace at
    every step (reused backwards)."""
    S = len(ps)
    n_tr = lay.length.size
    T = len(lay.symbols)
    pi = np.stack([p.pi for p in ps])  # (S, K)
    A = np.stack([p.A for p in ps])  # (S, K, K)
    BT = np.ascontiguousarray(np.stack([p.B for p in ps]).transpose(0, 2, 1))  # (S, m, K)
    alphas: list[NDArray[np.float64]] = []
    scales: list[NDArray[np.float64]] = []
    logp = np.zeros((S, n_tr))
    prev: NDArray[np.float64] | None = None
    for t, sym in enumerate(lay.symbols):
        n = lay.n_active[t]
        e_t = BT[:, sym]
        if emissions is not None:
            emissions.append(e_t)
        a = (pi[:, None, :] if prev is None else prev[:, :n] @ A) * e_t
        c = a.sum(axis=2)
        c = np.maximum(c, 1e-300)
        a = a / c[:, :, None]
        alphas.append(a)
        scales.append(c)
        logp[:, :n] += np.log(c)
        prev = a
    # Exit factor from the last step of each trace: the traces ending at step t are those running at t but not at
    # t + 1, a contiguous block (traces are sorted by decreasing length).
    # Matrix-vector products per set (a matrix product with one column may round differently).
    exit_factor = np.ones((S, n_tr))
    exit_columns = [np.column_stack([p.exits[:, 0], p.exits[:, 1]]) for p in ps]
    for t in range(T):
        n = lay.n_active[t]
        n_next = lay.n_active[t + 1] if t + 1 < T else 0
        if n_next == n:
            continue
        oc = lay.outcome[n_next:n]
        for s, ex in enumerate(exit_columns):
            a = alphas[t][s, n_next:n]
            val = np.where(oc == SUCCESS, a @ ex[:, 0], np.where(oc == FAILURE, a @ ex[:, 1], 1.0))
            exit_factor[s, n_next:n] = np.maximum(val, 1e-300)
    logp += np.log(exit_factor)
    return alphas, scales, exit_factor, logp


def _backward(ps: list[HMMParams], lay: _Layout, alphas: list[NDArray[np.float64]],
              scales: list[NDArray[np.float64]], exit_factor: NDArray[np.float64],
              emissions: list[NDArray[np.float64]] | None = None,
              counts: dict[str, NDArray[np.float64]] | None = None) -> list[NDArray[np.float64]]:
    """Scaled backward pass (S sets at once, as :func:`_forward`): the posteriors γ_t = α̂_t β̂_t (S × n_t × K).

    ``counts``, when given, receives the expected transition ("trans", S × K × K) and exit ("exits", S × K × 2)
    counts; ``emissions`` are :func:`_forward`'s (else recomputed)."""
    S = len(ps)
    K = ps[0].B.shape[0]
    T = len(lay.symbols)
    A = np.stack([p.A for p in ps])
    AT = A.transpose(0, 2, 1)  # a view, as p.A.T was: the same BLAS call (transposed operand), the same bits
    exits = np.stack([p.exits for p in ps])  # (S, K, 2)
    BT = None if emissions is not None else np.ascontiguousarray(np.stack([p.B for p in ps]).transpose(0, 2, 1))
    gammas: list[NDArray[np.float64]] = [np.empty((S, 0, K))] * T
    trans = np.zeros((S, K, K))
    ex_counts = np.zeros((S, K, 2))
    beta_next: NDArray[np.float64] | None = None
    for t in range(T - 1, -1, -1):
        n = lay.n_active[t]
        n_next = lay.n_active[t + 1] if t + 1 < T else 0
        beta = np.empty((S, n, K))
        if n_next:
            assert beta_next is not None
            e_next = emissions[t + 1] if emissions is not None else BT[:, lay.symbols[t + 1]]  # type: ignore[index]
            w = e_next * beta_next / scales[t + 1][:, :, None]  # (S, n_next, K)
            beta[:, :n_next] = w @ AT
            if counts is not None:
                trans += A * (alphas[t][:, :n_next].transpose(0, 2, 1) @ w)
        # Traces whose last step is t: β = R_o / e (1 for censored).
        if n_next < n:
            oc = lay.outcome[n_next:n]
            e = exit_factor[:, n_next:n][:, :, None]
            beta[:, n_next:n] = np.where((oc == SUCCESS)[None, :, None], exits[:, None, :, 0] / e,
                                         np.where((oc == FAILURE)[None, :, None], exits[:, None, :, 1] / e, 1.0))
            if counts is not None:
                gamma_end = alphas[t][:, n_next:n] * beta[:, n_next:n]
                ex_counts[:, :, 0] += gamma_end[:, oc == SUCCESS].sum(axis=1)
                ex_counts[:, :, 1] += gamma_end[:, oc == FAILURE].sum(axis=1)
        gammas[t] = alphas[t] * beta
        beta_next = beta
    if counts is not None:
        counts["trans"], counts["exits"] = trans, ex_counts
    return gammas


def _posterior(ps: list[HMMParams], lay: _Layout) -> list[_Posterior]:
    """Forward–backward expected counts (Rabiner 1989, scaled) of S parameter sets at once, one per set."""
    emis: list[NDArray[np.float64]] = []
    alphas, scales, exit_factor, logp = _forward(ps, lay, emis)
    S = len(ps)
    K, m = ps[0].B.shape
    T = len(lay.symbols)
    counts: dict[str, NDArray[np.float64]] = {}
    gammas = _backward(ps, lay, alphas, scales, exit_factor, emis, counts)
    start = gammas[0].sum(axis=1) if T else np.zeros((S, K))
    emit = np.zeros((S, K, m))
    if T:
        sym_all = np.concatenate(lay.symbols)
        for s in range(S):
            g = np.concatenate([gm[s] for gm in gammas])
            for k in range(K):
                emit[s, k] = np.bincount(sym_all, weights=g[:, k], minlength=m)
    trans = counts.get("trans", np.zeros((S, K, K)))
    exits = counts.get("exits", np.zeros((S, K, 2)))
    return [_Posterior(logp[s], start[s], trans[s], exits[s], emit[s]) for s in range(S)]


def _m_step(post: _Posterior, symbol_freq: NDArray[np.float64]) -> HMMParams:
    K = post.start.size
    pi = post.start + PRIOR_MASS / K
    pi = pi / pi.sum()
    rows = np.column_stack([post.trans, post.exits]) + PRIOR_MASS / (K + 2)
    rows = rows / rows.sum(axis=1, keepdims=True)
    B = post.emit + PRIOR_MASS * symbol_freq[None, :]
    B = B / B.sum(axis=1, keepdims=True)
    return HMMParams(pi, rows[:, :K], rows[:, K:], B)


class HiddenMarkovModel(TraceModel):
    """Absorbing HMM with K hidden states, fitted by Baum–Welch EM (module docstring).

    Parameters
    ----------
    n_states : int
        K ≥ 1 hidden states.
    n_init, max_iter, tol, seed
        Random starts, the iteration cap, the relative change of the log-likelihood that stops EM, and the seed.
    """

    family = "hmm"

    def __init__(self, n_states: int = 3, *, n_init: int = 5, max_iter: int = 500, tol: float = 1e-6,
                 seed: int = 0, group: Grouping = "auto") -> None:
        super().__init__(group=group)
        if n_states < 1:
            raise ValueError(f"n_states must be >= 1, got {n_states}")
        if n_init < 1 or max_iter < 1:
            raise ValueError("n_init and max_iter must be >= 1")
        self.n_states = n_states
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.seed = seed
        self.params_: HMMParams | None = None
        self.loglik_: float | None = None
        self.n_iter_ = 0
        self.converged_ = False

    def _random_start(self, rng: np.random.Generator, freq: NDArray[np.float64], exit_rate: float,
                      pass_rate: float) -> HMMParams:
        K, m = self.n_states, freq.size
        B = freq[None, :] * rng.gamma(1.0, size=(K, m)) + 1e-3
        B = B / B.sum(axis=1, keepdims=True)
        stay = rng.dirichlet(np.ones(K), size=K) * (1.0 - exit_rate)
        exits = np.column_stack([np.full(K, exit_rate * pass_rate), np.full(K, exit_rate * (1 - pass_rate))])
        exits = exits * rng.uniform(0.5, 1.5, size=(K, 1))
        rows = np.column_stack([stay, exits])
        rows = rows / rows.sum(axis=1, keepdims=True)
        pi = rng.dirichlet(np.ones(K))
        return HMMParams(pi, rows[:, :K], rows[:, K:], B)

    def _em(self, starts: list[HMMParams], lay: _Layout, freq: NDArray[np.float64], n_iter: int
            ) -> list[tuple[HMMParams, float, int, bool]]:
        """EM from each start, all in step (one forward–backward pass for the starts still running); each start
        stops on its own convergence, exactly as it would alone. Per start: (parameters, log-likelihood,
        iterations, converged)."""
        params = list(starts)
        prev = [-math.inf] * len(params)
        out: list[tuple[HMMParams, float, int, bool]] = [(p, -math.inf, 0, False) for p in params]
        running = list(range(len(params)))
        for it in range(1, n_iter + 1):
            if not running:
                break
            posts = _posterior([params[i] for i in running], lay)
            still = []
            for i, post in zip(running, posts, strict=True):
                total = float(post.loglik.sum())
                params[i] = _m_step(post, freq)
                converged = abs(total - prev[i]) <= self.tol * max(1.0, abs(total))
                out[i] = (params[i], total, it, converged)
                if not converged:
                    prev[i] = total
                    still.append(i)
            running = still
        return out

    def _fit(self, enc: EncodedTraces) -> None:
        lay = _layout(enc)
        m = enc.n_symbols
        freq: NDArray[np.float64] = ((np.bincount(enc.codes, minlength=m) + 0.5) / (enc.n_steps + 0.5 * m)
                                     ).astype(np.float64)
        done = enc.outcomes != CENSORED
        exit_rate = float(done.sum() / max(enc.n_steps, 1))
        pass_rate = float((enc.outcomes == SUCCESS).sum() / max(done.sum(), 1))
        pass_rate = min(max(pass_rate, 0.05), 0.95)
        rng = np.random.default_rng(self.seed)
        short = min(SHORT_RUN, self.max_iter)
        # The starts are compared on a subsample of the traces (a random start is only a guess; a few thousand
        # traces rank the guesses as well as all of them), and the best one is refined on all traces.
        probe = lay
        if enc.n_traces > START_SUBSAMPLE:
            pick = np.sort(rng.choice(enc.n_traces, START_SUBSAMPLE, replace=False))
            probe = _layout(enc.select(pick))
        starts = [self._random_start(rng, freq, exit_rate, pass_rate) for _ in range(self.n_init)]
        runs = self._em(starts, probe, freq, short)
        best = max(runs, key=lambda r: r[1])
        p, total, it, conv = best
        if probe is not lay:
            conv = False
        if not conv and self.max_iter > short:
            p, total, more, conv = self._em([p], lay, freq, self.max_iter - (short if probe is lay else 0))[0]
            it += more
        # Number hidden states by decreasing expected visits from the start.
        chain = AbsorbingChain(p.A, p.exits[:, 0], p.exits[:, 1], p.pi)
        perm = np.argsort(-chain.expected_visits(), kind="stable")
        self.params_ = HMMParams(p.pi[perm], p.A[np.ix_(perm, perm)], p.exits[perm], p.B[perm])
        self.loglik_ = total
        self.n_iter_ = it
        self.converged_ = conv

    def _trace_loglik(self, enc: EncodedTraces) -> NDArray[np.float64]:
        assert self.params_ is not None
        lay = _layout(enc)
        _, _, _, logp = _forward([self.params_], lay)
        out = np.empty(enc.n_traces)
        out[lay.order] = logp[0]
        return out

    def last_step(self, enc: EncodedTraces) -> LastStep:
        """Prefix log-likelihood Σ log c_t and the filtered hidden-state distribution α̂ at the last step."""
        assert self.params_ is not None
        lay = _layout(enc)
        alphas, _, exit_factor, logp = _forward([self.params_], lay)
        last = lay.length - 1
        weights = np.empty((enc.n_traces, self.n_states))
        for t in np.unique(last):
            who = np.flatnonzero(last == t)
            weights[lay.order[who]] = alphas[t][0, who]
        prefix = np.empty(enc.n_traces)
        prefix[lay.order] = logp[0] - np.log(exit_factor[0])
        return LastStep(prefix, None, weights)

    def posterior_states(self, traces: object) -> list[NDArray[np.float64]]:
        """Per trace, the (L × K) posterior probabilities of the hidden state at every step (smoothing)."""
        assert self.params_ is not None
        enc = self.encode(traces)  # type: ignore[arg-type]
        lay = _layout(enc)
        alphas, scales, exit_factor, _ = _forward([self.params_], lay)
        gammas = _backward([self.params_], lay, alphas, scales, exit_factor)
        K = self.params_.B.shape[0]
        out: list[NDArray[np.float64]] = [np.empty((0, K))] * enc.n_traces
        for rank, i in enumerate(lay.order):
            L = int(lay.length[rank])
            out[int(i)] = np.vstack([gammas[t][0, rank] for t in range(L)])
        return out

    def like(self) -> HiddenMarkovModel:
        return HiddenMarkovModel(self.n_states, n_init=self.n_init, max_iter=self.max_iter, tol=self.tol,
                                 seed=self.seed, group=self.group)

    @property
    def n_parameters(self) -> int:
        self._check_fitted()
        K, m = self.n_states, len(self.state_names_ or ())
        return (K - 1) + K * (K + 1) + K * (m - 1)

    @property
    def size(self) -> int | None:
        return self.n_states

    @property
    def label(self) -> str:
        return f"hmm(K={self.n_states})"

    def hidden_state_names(self, top: int = 2) -> tuple[str, ...]:
        """``h1 [lookup 62%, respond 30%]``: each hidden state by its most likely labels."""
        assert self.params_ is not None and self.state_names_ is not None
        names = []
        for k, row in enumerate(self.params_.B):
            best = np.argsort(-row, kind="stable")[:top]
            names.append(f"h{k + 1} [" + ", ".join(f"{self.state_names_[j]} {row[j]:.0%}" for j in best) + "]")
        return tuple(names)

    def _compile(self) -> CompiledModel:
        assert self.params_ is not None and self.state_names_ is not None
        p = self.params_
        meta = {"family": self.family, "model": self.label, "n_hidden": self.n_states,
                "emissions": p.B.tolist(), "observed_states": list(self.state_names_),
                "em": {"loglik": self.loglik_, "n_iter": self.n_iter_, "converged": self.converged_,
                       "n_init": self.n_init, "seed": self.seed}}
        chain = AbsorbingChain(p.A, p.exits[:, 0], p.exits[:, 1], p.pi, self.hidden_state_names(), meta)
        K = self.n_states
        return CompiledModel(chain, self.state_names_, p.B.copy(), np.zeros(K, np.int64), np.ones(1), "iid",
                             self.family)
