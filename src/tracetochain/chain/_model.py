"""The fitted object: an absorbing Markov chain over named transient states plus SUCCESS and FAILURE.

M = (S_T, Q, R⊕, R⊖, π0) as in the agent Markov chain of Tran-Truong & Le (2026) (π0 generalises the paper's s0), plus
the start exits (s, f): the probabilities that an episode ends in success or failure before any agent step. With them π0
is a sub-distribution (π0·1 + s + f = 1) and every quantity counts those episodes: R∞ = s + π0·h, R(0) = s, and they
take 0 steps. Without them (s = f = 0, the paper's chain) every number is the paper's, bit for bit. Frozen and
serialisable to a versioned JSON document (never pickle). Metric methods are one-line delegates to
:mod:`tracetochain.numerics`; the factorization of I − Q is computed once per chain and cached.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from tracetochain import numerics as nx
from tracetochain._display import Display, ResultDisplay, Table
from tracetochain._limits import check_state_count, max_states
from tracetochain._version import __version__
from tracetochain.exceptions import (
    ChainValidationError,
    NonAbsorbingError,
    SchemaVersionError,
    UndefinedMetricError,
)
from tracetochain.numerics.absorbing import chain_edges, success_absorption
from tracetochain.numerics.horizon import GrowingSweep
from tracetochain.numerics.shared import (
    as_initial_distribution,
    as_start_exits,
    clip_probabilities,
    ensure_chain_arrays,
)
from tracetochain.numerics.simulate import StepTable, step_table

#: Version of the JSON document written by :meth:`AbsorbingChain.to_dict`. Bump on incompatible change and add
#: a migration in :meth:`AbsorbingChain.from_dict`. Version 2 added ``start_exits`` (version 1 documents have none).
CHAIN_SCHEMA_VERSION = 2
CHAIN_DOCUMENT_KIND = "tracetochain.absorbing_chain"


def _frozen(a: NDArray[Any]) -> NDArray[Any]:
    a = np.array(a, copy=True)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class AbsorbingChain(ResultDisplay):
    """An absorbing chain with m named transient states.

    Parameters
    ----------
    Q : (m, m) array
        Transient → transient probabilities.
    R_success, R_failure : (m,) arrays
        One-step exit probabilities into SUCCESS (⊕) and FAILURE (⊖). Every row must satisfy
        Q·1 + R_success + R_failure = 1 (to 1e-9).
    pi0 : (m,) array or int
        Initial distribution over transient states, or the index of a single start state s0 (which then takes every
        episode that takes a step).
    state_names : sequence of str, optional
        Names of the transient states (default ``s0 … s{m-1}``); used in every message and report.
    metadata : dict, optional
        Provenance (estimator settings, data counts). Carried through JSON unchanged.
    start_exits : (s, f), optional
        Probabilities that an episode ends in success (s) or failure (f) before any step. Default (0, 0). π0 then
        holds the rest: π0·1 + s + f = 1.
    copy : bool, default True
        False hands float64 arrays over instead of copying them: the chain keeps them and makes them read-only (for
        code that builds a large Q only to make a chain of it, such as a compiled model's thousands of states).

    Raises
    ------
    ChainValidationError
        Bad shapes, NaN, negative entries, a row that does not sum to 1, or π0 and the start exits not summing to 1.
    NonAbsorbingError
        Some states can never reach SUCCESS or FAILURE (a closed loop); they are named in the message.

    Examples
    --------
    >>> chain = AbsorbingChain(Q=[[0.5, 0.3, 0], [0, 0.4, 0.3], [0, 0, 0.6]],
    ...                        R_success=[0.1, 0.2, 0.3], R_failure=[0.1, 0.1, 0.1], pi0=0)
    >>> round(chain.r_inf, 6), round(chain.mean_steps(), 6)
    (0.625, 3.75)
    """

    Q: NDArray[np.float64]
    R_success: NDArray[np.float64]
    R_failure: NDArray[np.float64]
    pi0: NDArray[np.float64]
    state_names: tuple[str, ...]
    metadata: dict[str, Any] = field(default_factory=dict)
    start_exits: NDArray[np.float64] = field(default_factory=lambda: np.zeros(2))

    def __init__(
        self,
        Q: ArrayLike,
        R_success: ArrayLike,
        R_failure: ArrayLike,
        pi0: ArrayLike | int = 0,
        state_names: tuple[str, ...] | list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        start_exits: ArrayLike | None = None,
        *,
        copy: bool = True,
    ) -> None:
        if np.ndim(Q) != 2 or np.shape(Q)[0] != np.shape(Q)[1]:
            raise ChainValidationError(f"Q must be a square matrix, got shape {np.shape(Q)}")
        m = np.shape(Q)[0]
        names = tuple(str(s) for s in state_names) if state_names is not None else tuple(f"s{i}" for i in range(m))
        if state_names is not None and len(names) != m:
            raise ChainValidationError(f"{len(names)} state names given for {m} states")
        if len(set(names)) != len(names):
            raise ChainValidationError("state names must be unique")
        Qa, rs, rf = ensure_chain_arrays(Q, R_success, R_failure, names, copy=copy)
        exits = as_start_exits(start_exits)
        p0 = as_initial_distribution(pi0, Qa.shape[0], exits)
        edges = chain_edges(Qa)
        reach = nx.absorbing_reachability(Qa, rs, rf, edges)
        can_absorb = reach[0]
        if not can_absorb.all():
            stuck = tuple(names[i] for i in np.flatnonzero(~can_absorb))
            shown = ", ".join(repr(s) for s in stuck[:10]) + (" …" if len(stuck) > 10 else "")
            raise NonAbsorbingError(
                f"absorption is impossible from {len(stuck)} state(s): {shown}. They form a closed loop with no "
                "path to success or failure, so I − Q is singular. Give them an exit (e.g. fit with a pseudocount "
                "> 0) or remove them.",
                stuck,
            )
        # ensure_chain_arrays returned private copies (or, with copy=False, the caller's own arrays, handed
        # over): frozen in place (a chain of 2,187 expanded states has a 38 MB Q, and compiled refits are built by
        # the thousand)
        for arr in (Qa, rs, rf):
            arr.setflags(write=False)
        object.__setattr__(self, "Q", Qa)
        object.__setattr__(self, "R_success", rs)
        object.__setattr__(self, "R_failure", rf)
        # the cached properties' slots: the graph search is not repeated, and the solver and the sweep operator
        # read the non-zeros it found instead of scanning Q again
        self.__dict__["_reach"] = reach
        self.__dict__["_edges"] = edges
        object.__setattr__(self, "pi0", _frozen(p0))
        object.__setattr__(self, "state_names", names)
        object.__setattr__(self, "metadata", dict(metadata or {}))
        object.__setattr__(self, "start_exits", _frozen(exits))

    # ------------------------------------------------------------------ basics
    @property
    def n_states(self) -> int:
        """Number of transient states m."""
        return int(self.Q.shape[0])

    @property
    def start_success(self) -> float:
        """s: probability that an episode succeeds before any step (a zero-step success)."""
        return float(self.start_exits[0])

    @property
    def start_failure(self) -> float:
        """f: probability that an episode fails before any step (a zero-step failure)."""
        return float(self.start_exits[1])

    @property
    def _has_start_exits(self) -> bool:
        return bool(self.start_exits.any())

    def state_index(self, state: str | int) -> int:
        """Index of a state given by name or index."""
        if isinstance(state, (int, np.integer)):
            if not 0 <= int(state) < self.n_states:
                raise KeyError(f"state index {state} out of range 0..{self.n_states - 1}")
            return int(state)
        try:
            return self.state_names.index(state)
        except ValueError:
            raise KeyError(f"unknown state {state!r}; states are {list(self.state_names)}") from None

    @cached_property
    def _solver(self) -> nx.ChainSolver:
        return nx.ChainSolver.factor(self.Q, self.R_success, self.R_failure, self._edges)

    @cached_property
    def _edges(self) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
        return chain_edges(self.Q)

    @cached_property
    def _step_table(self) -> StepTable:
        """The step law as inverse-CDF tables, built once: a parametric bootstrap simulates one chain many times."""
        return step_table(self.Q, self.R_success, self.R_failure)

    @cached_property
    def _reach(self) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
        return nx.absorbing_reachability(self.Q, self.R_success, self.R_failure, self._edges)

    # ------------------------------------------------------------------ absorption
    @cached_property
    def success_probabilities(self) -> NDArray[np.float64]:
        """h = N R⊕: probability of eventually succeeding from each state (exactly 0 where success is unreachable)."""
        return _frozen(success_absorption(self._solver, self.R_success, self._reach[1]))

    @cached_property
    def failure_probabilities(self) -> NDArray[np.float64]:
        """g = N R⊖, solved directly (not 1 − h, which loses accuracy when failures are rare)."""
        g = self._solver.solve(self.R_failure)
        return _frozen(clip_probabilities(g, "failure probability"))

    def absorption_probabilities(self) -> NDArray[np.float64]:
        """B = N [R⊕ R⊖]: (m, 2) array of success and failure probabilities from each state; rows sum to 1."""
        return np.column_stack([self.success_probabilities, self.failure_probabilities])

    @cached_property
    def r_inf(self) -> float:
        """R∞ = s + π0 N R⊕ (Tran-Truong & Le 2026, Prop. 1, plus the start exit s): probability of eventual success."""
        return self.start_success + float(self.pi0 @ self.success_probabilities)

    @property
    def failure_probability(self) -> float:
        """1 − R∞, computed directly as f + π0 N R⊖."""
        return self.start_failure + float(self.pi0 @ self.failure_probabilities)

    @cached_property
    def _visits(self) -> NDArray[np.float64]:
        return _frozen(self._solver.solve(self.pi0, transposed=True))

    def expected_visits(self) -> NDArray[np.float64]:
        """z = Nᵀ π0: expected number of visits to each state before absorption (per episode, zero-step ones
        included)."""
        return np.array(self._visits)

    # ------------------------------------------------------------------ horizon
    def sweep(self, horizon: int) -> nx.HorizonSweep:
        """Forward sweep d = 0..horizon: R(d), first-passage PMFs, survival and the exact tail R∞ − R(d)."""
        return self._growing_sweep.to(int(horizon))

    @cached_property
    def _growing_sweep(self) -> GrowingSweep:
        """One sweep per chain, continued when a longer horizon is asked for (step budget, median, curve)."""
        return GrowingSweep(self._sweep_op, self.R_success, self.R_failure, self.pi0, self.success_probabilities,
                            self.start_exits if self._has_start_exits else None)

    @cached_property
    def _sweep_op(self) -> Any:
        """Qᵀ for the forward sweeps, built once per chain."""
        from tracetochain.numerics.horizon import sweep_operator

        return sweep_operator(self.Q, self._edges)

    def reliability(self, horizon: int) -> NDArray[np.float64]:
        """R(d) = Pr[success within d steps] for d = 0..horizon (R(0) = s, the zero-step successes; 0 without)."""
        return self.sweep(horizon).reliability

    def success_pmf(self, horizon: int) -> NDArray[np.float64]:
        """Pr[τ⊕ = d] = π0 Q^{d−1} R⊕ for d = 1..horizon and s at d = 0 (a defective law: it sums to R∞)."""
        return self.sweep(horizon).success_pmf

    def success_conditional_cdf(self, horizon: int) -> NDArray[np.float64]:
        """F(d) = R(d) / R∞: the CDF of steps to success among successful runs (the KS layer's null)."""
        if self.r_inf <= 0.0:
            raise UndefinedMetricError(self._no_success_message("the success-conditional CDF"))
        return self.reliability(horizon) / self.r_inf

    def step_budget(self, delta: float = 0.01, max_horizon: int = 100_000) -> nx.horizon.StepBudget:
        """Smallest d with R∞ − R(d) ≤ δ, exact from the sweep, with Prop. 8's κ∞(V) bound beside it."""
        return nx.step_budget(
            self.Q, self.R_success, self.R_failure, self.pi0, self.success_probabilities, delta, max_horizon
        )

    def spectral_radius(self) -> float:
        """ρ(Q): survival decays like ρ^d; −1/ln ρ is the absorption timescale in steps."""
        return nx.spectral_radius(self.Q, self._edges)

    # ------------------------------------------------------------------ steps
    @cached_property
    def _t(self) -> NDArray[np.float64]:
        return _frozen(nx.mean_steps(self._solver))

    def mean_steps(self) -> float:
        """MTTA = π0 N 1: expected steps to absorption (either outcome; zero-step episodes take 0 steps)."""
        return float(self.pi0 @ self._t)

    def steps_variance(self) -> float:
        """Var[T] from π0: Σ π0_i (τ₂_i + t_i²) − (π0·t)², with τ₂ = (2N − I)t − t∘t (Kemeny–Snell); zero-step
        episodes (T = 0) add nothing to either moment, so the same formula holds with π0 a sub-distribution."""
        t = self._t
        second = nx.steps_variance(self._solver, t) + t * t
        return max(0.0, float(self.pi0 @ second) - float(self.pi0 @ t) ** 2)

    def mean_steps_given_success(self) -> float:
        """E[T | success] = π0 N² R⊕ / R∞ (first-step analysis, docs/numerics.md §3; R∞ includes the zero-step
        successes, which take 0 steps)."""
        if self.r_inf <= 0.0:
            raise UndefinedMetricError(self._no_success_message("E[steps | success]"))
        return nx.conditional_mean_steps(self._visits, self.success_probabilities, self.r_inf)

    def mean_steps_given_failure(self) -> float:
        """E[T | failure] = π0 N² R⊖ / (1 − R∞) (1 − R∞ includes the zero-step failures)."""
        if self.failure_probability <= 0.0:
            raise UndefinedMetricError("failure is unreachable from the initial distribution, so "
                                       "E[steps | failure] is undefined")
        return nx.conditional_mean_steps(self._visits, self.failure_probabilities, self.failure_probability)

    def accumulated_cost(self, per_visit_mean: ArrayLike, per_visit_variance: ArrayLike | None = None, *,
                         edge_spend: ArrayLike | None = None,
                         edge_spend_sq: ArrayLike | None = None) -> nx.RewardMoments:
        """Moments of the cost accumulated until absorption when a visit to state i costs a random amount with
        the given mean and variance (a Markov reward; :mod:`tracetochain.numerics.rewards`): E[C] = π0 N c, the
        outcome-joint means E[C; S] = π0 N diag(c) h and E[C; F], second moments, and the spend per state."""
        c = np.asarray(per_visit_mean, dtype=np.float64)
        if c.shape != (self.n_states,):
            raise ChainValidationError(f"need one per-visit cost per state ({self.n_states}), got shape {c.shape}")
        v = None if per_visit_variance is None else np.asarray(per_visit_variance, dtype=np.float64)
        M = None if edge_spend is None else np.asarray(edge_spend, dtype=np.float64)
        M2 = None if edge_spend_sq is None else np.asarray(edge_spend_sq, dtype=np.float64)
        return nx.accumulated_reward(self._solver, self._visits, self.success_probabilities,
                                     self.failure_probabilities, c, v, edge_spend=M, edge_spend_sq=M2)

    # ------------------------------------------------------------------ states
    def vulnerability(self) -> NDArray[np.float64]:
        """Per-state one-step exit probability to failure, R⊖_i."""
        return np.array(self.R_failure)

    def failure_attribution(self) -> NDArray[np.float64]:
        """Share of all failures that leave from each state: z_i R⊖_i / (1 − R∞) (docs/numerics.md §3). With zero-step
        failures the shares sum to 1 − :meth:`start_failure_share`."""
        return nx.failure_attribution(self._visits, self.R_failure, self.start_failure)

    def start_failure_share(self) -> float:
        """Share of all failures that happen before any step: f / (1 − R∞) (0 when failure is unreachable)."""
        total = self.failure_probability
        return self.start_failure / total if total > 0 else 0.0

    def sensitivity_Q(self) -> NDArray[np.float64]:
        """∂R∞/∂Q_ij = z_i h_j, the compensating mass taken from R⊖ (Caswell 2013; docs/numerics.md §5)."""
        return np.outer(self._visits, self.success_probabilities)

    def sensitivity_R_success(self) -> NDArray[np.float64]:
        """∂R∞/∂R⊕_i = z_i (compensating mass taken from R⊖)."""
        return np.array(self._visits)

    # ------------------------------------------------------------------ pass@k
    def pass_at_k(self, k: ArrayLike) -> NDArray[np.float64]:
        """pass@k = 1 − (1 − R∞)^k under i.i.d. trials (Thm 3)."""
        return nx.pass_at_k(self.r_inf, k)

    def pass_hat_k(self, k: ArrayLike) -> NDArray[np.float64]:
        """pass^k = R∞^k under i.i.d. trials (Thm 3)."""
        return nx.pass_hat_k(self.r_inf, k)

    # ------------------------------------------------------------------ simulation
    def simulate(
        self, n_traces: int, seed: int | np.random.Generator | None = 0, *, max_steps: int = 10_000,
        record_paths: bool = False,
    ) -> nx.SimulatedTraces:
        """Draw ``n_traces`` traces (seeded). Traces still running after ``max_steps`` steps are censored; episodes
        that draw a start exit end before any step (length 0)."""
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        return nx.simulate_traces(
            self.Q, self.R_success, self.R_failure, self.pi0, n_traces, rng,
            max_steps=max_steps, record_paths=record_paths,
            start_exits=self.start_exits if self._has_start_exits else None, table=self._step_table,
        )

    # ------------------------------------------------------------------ derived chains
    def with_changes(
        self,
        *,
        Q: ArrayLike | None = None,
        R_success: ArrayLike | None = None,
        R_failure: ArrayLike | None = None,
        pi0: ArrayLike | int | None = None,
        start_exits: ArrayLike | None = None,
    ) -> AbsorbingChain:
        """A new chain with some arrays replaced (validated again); names, metadata and — unless replaced — the start
        exits are kept (an int ``pi0`` puts the episodes that take a step in that state)."""
        return AbsorbingChain(
            self.Q if Q is None else Q,
            self.R_success if R_success is None else R_success,
            self.R_failure if R_failure is None else R_failure,
            self.pi0 if pi0 is None else pi0,
            self.state_names,
            self.metadata,
            self.start_exits if start_exits is None else start_exits,
        )

    def with_metadata(self, **entries: Any) -> AbsorbingChain:
        """The same chain with extra metadata entries (provenance: states, ingest report, settings)."""
        return AbsorbingChain(self.Q, self.R_success, self.R_failure, self.pi0, self.state_names,
                              {**self.metadata, **entries}, self.start_exits)

    # ------------------------------------------------------------------ io
    def to_dict(self) -> dict[str, Any]:
        """The versioned JSON document (floats written with full round-trip precision)."""
        return {
            "kind": CHAIN_DOCUMENT_KIND,
            "schema_version": CHAIN_SCHEMA_VERSION,
            "tracetochain_version": __version__,
            "state_names": list(self.state_names),
            "Q": self.Q.tolist(),
            "R_success": self.R_success.tolist(),
            "R_failure": self.R_failure.tolist(),
            "pi0": self.pi0.tolist(),
            "start_exits": self.start_exits.tolist(),
            "metadata": self.metadata,
        }

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> AbsorbingChain:
        """Rebuild a chain from :meth:`to_dict` output, checking the document kind and schema version (version 1
        documents, written before zero-step episodes were counted, have no start exits)."""
        if not isinstance(doc, dict) or doc.get("kind") != CHAIN_DOCUMENT_KIND:
            raise SchemaVersionError(
                f"not a tracetochain chain document (expected kind {CHAIN_DOCUMENT_KIND!r}); "
                "create one with `tracetochain fit TRACES -o chain.json`"
            )
        version = doc.get("schema_version")
        if isinstance(version, bool) or version not in (1, CHAIN_SCHEMA_VERSION):
            raise SchemaVersionError(
                f"chain document has schema_version {version!r}; this tracetochain ({__version__}) reads "
                f"versions 1 to {CHAIN_SCHEMA_VERSION}. Upgrade tracetochain or refit the chain."
            )
        names, metadata = _check_document(doc)
        if version >= 2 and "start_exits" not in doc:
            raise ChainValidationError("chain document is missing the field 'start_exits'")
        exits = _matrix(doc, "start_exits", 2) if version >= 2 else None
        return cls(_matrix(doc, "Q", len(names), len(names)), _matrix(doc, "R_success", len(names)),
                   _matrix(doc, "R_failure", len(names)),
                   doc["pi0"] if isinstance(doc.get("pi0"), int) and not isinstance(doc.get("pi0"), bool)
                   else _matrix(doc, "pi0", len(names)), names, metadata, exits)

    def to_json(self, path: str | Path | None = None, *, indent: int | None = 2, overwrite: bool = True) -> str:
        """Serialise to JSON; also write it to ``path`` when given (through the safe writer: complete or not at all,
        never through a symbolic link; ``overwrite=False`` refuses an existing file)."""
        text = json.dumps(self.to_dict(), indent=indent, allow_nan=False)
        if path is not None:
            from tracetochain._files import write_output

            write_output(path, text + "\n", overwrite=overwrite, what="chain")
        return text

    @classmethod
    def from_json(cls, source: str | Path) -> AbsorbingChain:
        """Load from a chain file (a ``Path``, or a ``str`` naming an existing file) or from JSON text.

        A file must be a regular file no larger than :func:`max_document_bytes` (a FIFO or ``/dev/zero`` is
        refused before it is read); the text must be UTF-8 JSON within the parser's limits. Every problem is a
        :class:`ChainValidationError` naming the file (and the line, for a syntax error).
        """
        import os

        from tracetochain._files import input_problem
        from tracetochain.traces.shared import JSONLimitError, json_loads

        is_text = isinstance(source, str) and source.lstrip().startswith("{") and not os.path.exists(source)
        where = "chain document" if is_text else str(source)
        if is_text:
            raw: str | bytes = str(source)
        else:
            p = Path(source)
            problem = input_problem(p)
            if problem is not None:
                raise ChainValidationError(f"{p}: {problem[0]}" + (f" — {problem[1]}" if problem[1] else ""))
            limit = max_document_bytes()
            if p.stat().st_size > limit:
                raise ChainValidationError(
                    f"{p}: the file is larger than {limit:,} bytes, more than a chain of {max_states():,} states "
                    "needs — raise the state limit with TRACETOCHAIN_MAX_STATES if it is genuine")
            try:
                raw = p.read_bytes()
            except OSError as exc:
                raise ChainValidationError(f"{p}: cannot read it ({exc.strerror or exc})") from None
        try:
            doc = json_loads(raw.decode("utf-8-sig") if isinstance(raw, bytes) else raw)
        except UnicodeDecodeError as exc:
            assert isinstance(raw, bytes)
            line = raw.count(b"\n", 0, exc.start) + 1
            raise ChainValidationError(f"{where}:{line}: not UTF-8 text ({exc.reason})") from None
        except JSONLimitError as exc:
            raise ChainValidationError(f"{where}: not valid JSON ({exc.msg})") from None
        except json.JSONDecodeError as exc:
            raise ChainValidationError(f"{where}:{exc.lineno}: not valid JSON ({exc.msg})") from None
        try:
            return cls.from_dict(doc)
        except ChainValidationError as exc:
            if is_text or str(exc).startswith(f"{where}:"):
                raise
            raise type(exc)(f"{where}: {exc}", *exc.args[1:]) from None

    # ------------------------------------------------------------------ display
    def _no_success_message(self, what: str) -> str:
        return f"success is unreachable from the initial distribution (R∞ = 0), so {what} is undefined"

    def __repr__(self) -> str:
        return f"AbsorbingChain(n_states={self.n_states}, r_inf={self.r_inf:.4f})"

    def _display(self) -> Display:
        z = self.expected_visits()
        h = self.success_probabilities
        states = Table("states", ("state", "pi0", "expected_visits", "r_success", "r_failure", "success_probability"),
                       tuple((name, float(self.pi0[i]), float(z[i]), float(self.R_success[i]), float(self.R_failure[i]),
                              float(h[i])) for i, name in enumerate(self.state_names)))
        rows, cols = np.nonzero(self.Q)
        q = Table("Q", ("from", "to", "probability"), tuple((self.state_names[i], self.state_names[j],
                                                              float(self.Q[i, j])) for i, j in zip(rows, cols,
                                                                                                     strict=True)),
                  shown=False)
        lines = ((f"{self.start_success:.3f} success and {self.start_failure:.3f} failure before any step",)
                 if self._has_start_exits else ())
        return Display(f"{self.n_states} states, R∞ = {self.r_inf:.4f}, mean steps {self.mean_steps():.2f}",
                       kind="AbsorbingChain", lines=lines, tables=(states, q))


# ---------------------------------------------------------------------------------------------------- documents
def max_document_bytes() -> int:
    """Largest chain file read: generous for a chain at the state limit (about 64 bytes per transition entry,
    counts and indentation included), so that ``/dev/zero``-like or hostile files are refused before parsing."""
    m = max_states()
    return 64 * m * m + (16 << 20)


def _check_document(doc: dict[str, Any]) -> tuple[tuple[str, ...], dict[str, Any]]:
    """State names and metadata of an untrusted chain document, checked field by field (ChainValidationError
    naming the field otherwise); the matrices are checked by :func:`_matrix` and the constructor."""
    for key in ("Q", "R_success", "R_failure", "pi0", "state_names"):
        if key not in doc:
            raise ChainValidationError(f"chain document is missing the field {key!r}")
    names_raw = doc["state_names"]
    if not isinstance(names_raw, list) or not all(isinstance(n, str) for n in names_raw):
        raise ChainValidationError("chain document field 'state_names' must be a list of text")
    check_state_count(len(names_raw), "the chain document")
    names = tuple(names_raw)
    metadata = doc.get("metadata", {})
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise ChainValidationError(f"chain document field 'metadata' must be an object, got {type(metadata).__name__}")
    if metadata.get("pseudocount") is not None:  # None: the episode prior (described under "prior")
        alpha = metadata["pseudocount"]
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not np.isfinite(alpha) or alpha < 0:
            raise ChainValidationError(f"chain document field 'metadata.pseudocount' must be a finite number >= 0, "
                                       f"got {alpha!r}")
    if metadata.get("design_effect") is not None:  # the corpus's design effect (analysis intervals are tempered by it)
        d = metadata["design_effect"]
        if isinstance(d, bool) or not isinstance(d, (int, float)) or not np.isfinite(d) or d < 1:
            raise ChainValidationError(f"chain document field 'metadata.design_effect' must be a finite number >= 1, "
                                       f"got {d!r}")
    for key in ("unvisited_states",):
        if key in metadata and (not isinstance(metadata[key], list)
                                or not all(isinstance(v, str) for v in metadata[key])):
            raise ChainValidationError(f"chain document field 'metadata.{key}' must be a list of state names")
    if "counts" in metadata:
        _check_counts(metadata["counts"], names)
    return names, metadata


_COUNT_MAX = 2**53  # beyond this a count is not an observation count (and float arithmetic would lose it)


def _check_counts(counts: Any, names: tuple[str, ...]) -> None:
    m = len(names)
    where = "chain document field 'metadata.counts'"
    if not isinstance(counts, dict):
        raise ChainValidationError(f"{where} must be an object")
    missing = [k for k in ("state_names", "transitions", "exits_success", "exits_failure", "initial", "n_traces")
               if k not in counts]
    if missing:
        raise ChainValidationError(f"{where} is missing {', '.join(repr(k) for k in missing)}")
    if counts["state_names"] != list(names):
        raise ChainValidationError("chain document field 'metadata.counts.state_names' differs from the chain's "
                                   "state names")

    def whole(values: Any, shape: tuple[int, ...], key: str) -> None:
        field = f"chain document field 'metadata.counts.{key}'"
        arr = _numbers(values, field, shape)
        if (arr < 0).any() or (arr > _COUNT_MAX).any() or (arr != np.floor(arr)).any():
            raise ChainValidationError(f"{field} must hold whole numbers between 0 and 2^53")

    whole(counts["transitions"], (m, m), "transitions")
    for key in ("exits_success", "exits_failure", "initial"):
        whole(counts[key], (m,), key)
    n_traces = counts["n_traces"]
    if not isinstance(n_traces, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= _COUNT_MAX for v in n_traces.values()):
        raise ChainValidationError("chain document field 'metadata.counts.n_traces' must map each outcome to a "
                                   "whole number >= 0")
    if not {"success", "failure", "censored"} <= set(n_traces):
        raise ChainValidationError("chain document field 'metadata.counts.n_traces' must give success, failure and "
                                   "censored counts")


def _numbers(values: Any, where: str, shape: tuple[int, ...]) -> NDArray[np.float64]:
    """``values`` as a float array of exactly ``shape`` (a ragged list, text, booleans or objects refused)."""
    def ok(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    if len(shape) == 1:
        good = isinstance(values, list) and len(values) == shape[0] and all(ok(v) for v in values)
    else:
        good = isinstance(values, list) and len(values) == shape[0] and all(
            isinstance(row, list) and len(row) == shape[1] and all(ok(v) for v in row) for row in values)
    if not good:
        dims = " × ".join(str(d) for d in shape)
        raise ChainValidationError(f"{where} must be {'a list' if len(shape) == 1 else 'a matrix'} of {dims} numbers")
    try:
        return np.asarray(values, dtype=np.float64)
    except OverflowError:
        raise ChainValidationError(f"{where} holds a number too large for a float") from None


def _matrix(doc: dict[str, Any], key: str, *shape: int) -> NDArray[np.float64]:
    return _numbers(doc[key], f"chain document field {key!r}", tuple(shape))
