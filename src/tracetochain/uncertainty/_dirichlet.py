"""DirichletPosterior: the conjugate posterior of the chain given the transition counts.

Each transient row i has m + 2 outcomes (m states, success, failure). Under the chain's prior (``chain._prior``: the
episode prior by default, or Laplace α) the row's posterior is Dir(x_i + a_i), with x_i the row's counts and a_i the
prior's pseudo-counts; its mean is exactly the row :class:`~tracetochain.ChainEstimator` fits. Two things follow:

* **Closed-form marginals** — each entry X_ij is Beta(x_ij + a_ij, c_i + A_i − x_ij − a_ij), with c_i and A_i the
  row's count and pseudo-count totals; equal-tailed intervals are Beta quantiles (:func:`beta_intervals`).
* **Joint draws** — rows are independent a posteriori, so a posterior chain is m independent Dirichlet rows; all rows
  of all draws are drawn at once by gamma normalisation (X = G / ΣG, G_k ~ Gamma(x_k + a_k)), then propagated to any
  derived quantity by :class:`ChainEnsemble`.

π0 is drawn too (``initial="sample"``, the default): Dir(first-state counts), so the intervals count the noise of the
start distribution (holding it fixed under-covers when start states differ in their prospects: 80 % instead of 95 %
in our study). Episodes that ended before any step are part of the start distribution: π0 and the two start exits
are drawn jointly from one Dirichlet of the first-state counts and the zero-step (success, failure) counts.
Unvisited rows (no observed outgoing step) follow the estimator's policy: under ``"failure"`` they stay absorbing
to failure in every draw; under ``"prior"`` they are drawn from the prior's row. Entries with neither counts nor
pseudo-counts are exactly 0 in every draw (deeptime's sparse-prior convention).

**Repeated trials of one task.** Traces of one task are not independent draws: their outcomes correlate. With a
design effect d ≥ 1 (Kish 1965; estimated from the per-task success counts, :func:`tracetochain.analysis.
design_effect`) the posterior is tempered — every count divided by d before the prior is added —, which widens every
interval by about √d, as an effective sample size of n/d traces would.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

import numpy as np
import scipy.special
from numpy.typing import NDArray

from tracetochain._compat import renamed_attribute, renamed_parameters
from tracetochain._display import Display, EstimatorDisplay, ResultDisplay
from tracetochain.chain import AbsorbingChain, ChainPrior, TransitionCounts, estimate_chain
from tracetochain.exceptions import NotFittedError
from tracetochain.uncertainty._ensemble import ChainEnsemble
from tracetochain.uncertainty._stats import EntryIntervals, check_confidence, equal_tailed

Unvisited = Literal["auto", "prior", "failure"]
InitialDraw = Literal["fixed", "sample"]


# ------------------------------------------------------------------------------------------------ pure functions
def counts_from_chain(chain: AbsorbingChain) -> TransitionCounts:
    """The raw counts a fitted chain carries in ``metadata["counts"]`` (``ChainEstimator`` always stores them)."""
    doc = chain.metadata.get("counts")
    if not isinstance(doc, dict):
        raise ValueError("this chain carries no transition counts (metadata['counts']); the posterior needs them. "
                         "Fit the chain with ChainEstimator / tracetochain fit, or pass the TransitionCounts")
    names = tuple(str(s) for s in doc["state_names"])
    if names != chain.state_names:
        raise ValueError(f"the counts in the chain's metadata are over states {list(names)}, the chain over "
                         f"{list(chain.state_names)}")
    return TransitionCounts.from_dict(doc)


def outcome_counts(counts: TransitionCounts) -> NDArray[np.float64]:
    """The m × (m + 2) matrix [C | c⊕ | c⊖] of every row's outcome counts (censored traces' last moves allocated:
    :func:`tracetochain.chain.outcome_matrix`)."""
    return counts.outcome_matrix(censored_moves=True)


def resolve_unvisited(unvisited: str, pseudocount: float | None) -> str:
    """``"auto"`` → ``"prior"`` when the prior has mass, else ``"failure"`` (the estimator's rule)."""
    return ChainPrior.from_settings(pseudocount).resolve_unvisited(unvisited)


def posterior_shape(counts: NDArray[np.float64], prior: ChainPrior, unvisited: str, design_effect: float = 1.0
                    ) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """The Dirichlet parameters of every row's posterior, (m, m + 2), and the rows fixed absorbing to failure.

    Row i: x_i / d + a_i (counts tempered by the design effect d, module docstring) with a_i the prior's
    pseudo-counts of the untempered counts (the prior does not depend on d); an unvisited row gets the prior's row
    (``"prior"``) or is marked absorbing (``"failure"``).
    """
    x = np.asarray(counts, dtype=np.float64)
    if not np.isfinite(design_effect) or design_effect < 1.0:
        raise ValueError(f"design_effect must be a finite number >= 1, got {design_effect!r}")
    shape = x / design_effect + prior.pseudo_counts(x)
    empty = x.sum(axis=1) == 0
    absorbing = np.zeros(x.shape[0], dtype=bool)
    if empty.any():
        if unvisited == "failure":
            absorbing = empty
        else:
            shape[empty] = prior.unvisited_concentration(x)
    return shape, absorbing


def beta_intervals(shape: NDArray[np.float64], confidence: float, absorbing_rows: NDArray[np.bool_] | None = None
                   ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    r"""Closed-form marginal posterior of every entry of a row-Dirichlet matrix with parameters ``shape``.

    For row i with Dirichlet parameters s_i (m + 2 of them), entry X_ij ~ Beta(a, b) with a = s_ij and
    b = Σ_k s_ik − s_ij. Returns (mean, lower, upper) of the same shape; mean = a/(a+b) is the fitted entry;
    [lower, upper] are the (1 ∓ confidence)/2 Beta quantiles. Degenerate marginals are exact: a = 0 gives the point
    0, b = 0 the point 1. Rows in ``absorbing_rows`` (unvisited under the "failure" policy) are the fixed row
    (0, …, 0, 0, 1).
    """
    lo_q, hi_q = equal_tailed(confidence)
    a = np.asarray(shape, dtype=np.float64)
    b = a.sum(axis=1, keepdims=True) - a
    total = a + b
    mean = np.divide(a, total, out=np.zeros_like(a), where=total > 0)
    lower = np.zeros_like(a)
    upper = np.zeros_like(a)
    proper = (a > 0) & (b > 0)
    # The Beta quantile is the inverse regularised incomplete beta function, the Boost routine scipy.stats.beta.ppf
    # calls too (equal bit for bit: tests/uncertainty/test_dirichlet.py), without the ~1 CPU-s import of
    # scipy.stats on every command.
    lower[proper] = scipy.special.betaincinv(a[proper], b[proper], lo_q)
    upper[proper] = scipy.special.betaincinv(a[proper], b[proper], hi_q)
    ones = (a > 0) & (b <= 0)
    lower[ones] = upper[ones] = 1.0
    if absorbing_rows is not None and absorbing_rows.any():
        fixed = np.zeros(a.shape[1])
        fixed[-1] = 1.0
        mean[absorbing_rows] = lower[absorbing_rows] = upper[absorbing_rows] = fixed
    return mean, lower, upper


def sample_rows(shape: NDArray[np.float64], n_samples: int, rng: np.random.Generator,
                absorbing_rows: NDArray[np.bool_] | None = None,
                continuations: NDArray[np.float64] | None = None) -> NDArray[np.float64]:
    """``n_samples`` joint draws of independent Dirichlet rows with parameters ``shape`` (m, k): shape (n, m, k).

    Every row of every draw at once: G ~ Gamma(shape) elementwise, X = G / Σ_row G. Entries with parameter 0 are
    exactly 0. Rows in ``absorbing_rows`` are (0, …, 0, 0, 1) in every draw. A row whose gamma draws all underflow to
    0 (possible only for tiny parameters) is replaced by its mean.

    ``continuations`` (m,): per row, the censored traces' last moves, seen to go on to *some* state of the first
    k − 2 columns (the transient ones) but not which. Their likelihood factor is (Σ_t P_st)^{k_s}, so the posterior
    of the row is exact and still easy to draw (Dirichlet aggregation): the transient total gets k_s more, the split
    among the transient states does not. With H_s ~ Gamma(k_s) independent of G, the transient block is scaled by
    (Σ_t G_st + H_s) / Σ_t G_st before normalising. Allocating the k_s moves over the observed next states as if
    they were seen (the point estimator's EM fixed point) makes the split a little too sure — little indeed: on the
    censored corpora of study CS it moved no interval measurably, but the draws are now those of the observation.
    """
    s = np.asarray(shape, dtype=np.float64)
    G = rng.standard_gamma(np.broadcast_to(s, (n_samples, *s.shape)))
    if continuations is not None and np.any(np.asarray(continuations) > 0):
        k = np.asarray(continuations, dtype=np.float64)
        moved = G[..., : s.shape[1] - 2].sum(axis=2)
        H = rng.standard_gamma(np.broadcast_to(k, (n_samples, k.size)))
        scale = np.divide(moved + H, moved, out=np.ones_like(moved), where=moved > 0)
        G[..., : s.shape[1] - 2] *= scale[..., None]
    total = G.sum(axis=2, keepdims=True)
    empty = total[..., 0] <= 0
    X = np.divide(G, total, out=np.zeros_like(G), where=total > 0)
    if empty.any():
        row_total = s.sum(axis=1, keepdims=True)
        mean = np.divide(s, row_total, out=np.zeros_like(s), where=row_total > 0)
        draws, rows = np.nonzero(empty)
        X[draws, rows] = mean[rows]
    if absorbing_rows is not None and absorbing_rows.any():
        X[:, absorbing_rows, :] = 0.0
        X[:, absorbing_rows, -1] = 1.0
    out: NDArray[np.float64] = X
    return out


# ------------------------------------------------------------------------------------------------------- model
@dataclass(frozen=True, eq=False, repr=False)
class ChainPosterior(ResultDisplay):
    """The fitted Dirichlet posterior: closed-form per-entry intervals and a sampler of whole chains.

    ``intervals`` are the Beta-marginal intervals; :meth:`sample` (or the cached :attr:`ensemble`) gives a
    :class:`ChainEnsemble` of joint draws for intervals of any derived quantity. ``reference`` is the point estimate
    (the chain given to ``fit``, or the posterior-mean chain of the counts).
    """

    reference: AbsorbingChain
    counts: TransitionCounts
    prior: ChainPrior
    unvisited_policy: str
    initial: str
    confidence: float
    n_samples: int
    seed: int | None
    intervals: EntryIntervals
    design_effect: float = 1.0
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def state_names(self) -> tuple[str, ...]:
        return self.counts.state_names

    @property
    def pseudocount(self) -> float | None:
        """α of a Laplace prior (None for the episode prior)."""
        return self.prior.strength if self.prior.kind == "laplace" else None

    @cached_property
    def _shape(self) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
        return posterior_shape(outcome_counts(self.counts), self.prior, self.unvisited_policy, self.design_effect)

    @cached_property
    def _draw_shape(self) -> tuple[NDArray[np.float64], NDArray[np.float64] | None]:
        """The joint draws' parameters: the rows' shape with the censored traces' last moves taken out of the split,
        and those moves per row (tempered like the counts) for :func:`sample_rows` — the exact posterior of the
        coarsened observation (the closed-form entry intervals keep the allocated shape, its Beta approximation)."""
        shape, _ = self._shape
        seen = self.counts.outcome_matrix()
        allocated = outcome_counts(self.counts)
        extra = allocated - seen
        if not extra.any():
            return shape, None
        k = extra.sum(axis=1) / self.design_effect
        return np.maximum(shape - extra / self.design_effect, 0.0), k

    @property
    def absorbing_rows(self) -> NDArray[np.bool_]:
        """Rows with no data that the "failure" policy sends to failure with probability 1 in every draw."""
        return self._shape[1]

    def sample(self, n_samples: int | None = None, seed: int | np.random.Generator | None = None, *,
               initial: InitialDraw | None = None) -> ChainEnsemble:
        """``n_samples`` joint posterior draws (default: the estimator's) as a :class:`ChainEnsemble`."""
        n = self.n_samples if n_samples is None else int(n_samples)
        if n < 1:
            raise ValueError(f"n_samples must be >= 1, got {n_samples!r}")
        init = self.initial if initial is None else initial
        if init not in ("fixed", "sample"):
            raise ValueError(f"initial must be 'fixed' or 'sample', got {init!r}")
        seed_used = self.seed if seed is None else seed
        rng = seed_used if isinstance(seed_used, np.random.Generator) else np.random.default_rng(seed_used)
        m = self.counts.n_states
        _, absorbing = self._shape
        shape, continuations = self._draw_shape
        X = sample_rows(shape, n, rng, absorbing, continuations)
        Q, rs, rf = X[:, :, :m], X[:, :, m], X[:, :, m + 1]  # the ensemble makes contiguous copies
        exits = None
        if init == "sample" and self.reference.metadata.get("initial", "empirical") == "empirical":
            start = self.counts.initial.astype(np.float64)
            if self.counts.start_exits.any():  # π0 and the start exits from one Dirichlet
                start = np.concatenate([start, self.counts.start_exits.astype(np.float64)])
            drawn = sample_rows(start[None, :] / self.design_effect, n, rng)[:, 0, :]
            pi = drawn[:, :m]
            if self.counts.start_exits.any():
                exits = drawn[:, m:]
        else:
            pi = np.broadcast_to(self.reference.pi0, (n, m))
            exits = np.broadcast_to(self.reference.start_exits, (n, 2))
        info = {**self.info, "prior": self.prior.to_dict(), "unvisited_policy": self.unvisited_policy,
                "initial": init, "n_samples": n, "design_effect": self.design_effect,
                "point_estimator": self.info.get("point_estimator")}
        arrays = {"Q": Q, "R_success": rs, "R_failure": rf, "pi0": pi}
        if exits is not None:
            arrays["start_exits"] = exits
        return ChainEnsemble(self.reference, arrays,
                             method="posterior", confidence=self.confidence,
                             seed=None if isinstance(seed_used, np.random.Generator) else seed_used, info=info)

    @cached_property
    def ensemble(self) -> ChainEnsemble:
        """:meth:`sample` with the estimator's ``n_samples`` and ``seed`` (computed once)."""
        return self.sample()

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "tracetochain.dirichlet_posterior", "prior": self.prior.to_dict(),
                "unvisited_policy": self.unvisited_policy, "initial": self.initial, "confidence": self.confidence,
                "n_samples": self.n_samples, "seed": self.seed, "design_effect": self.design_effect,
                "intervals": self.intervals.to_dict(), "counts": self.counts.to_dict()}

    def _title(self) -> str:
        deff = f", design effect {self.design_effect:.2f}" if self.design_effect != 1.0 else ""
        return (f"Dirichlet posterior ({self.prior.describe()}; unvisited rows: {self.unvisited_policy}; π0 "
                f"{self.initial}{deff})")

    def _display(self) -> Display:
        entries = self.intervals._display()
        return Display(self._title(), lines=(entries.title,), tables=entries.tables)


# --------------------------------------------------------------------------------------------------- estimator
class DirichletPosterior(EstimatorDisplay):
    """Bayesian uncertainty of a fitted chain from its transition counts.

    Parameters
    ----------
    pseudocount, prior : optional
        The prior (:class:`~tracetochain.chain.ChainPrior`; as in :class:`~tracetochain.ChainEstimator`). Default:
        the prior of the chain given to :meth:`fit` (so the posterior mean of every entry is the chain's entry), or
        the episode prior when given counts.
    confidence : float, default 0.95
        Level of the equal-tailed intervals.
    samples : int, default 2000
        Joint draws in :attr:`ChainPosterior.ensemble` (``n_samples=`` is its deprecated spelling, one release).
    seed : int, default 0
        Seed of the joint draws (``numpy.random.default_rng``).
    unvisited : {"auto", "prior", "failure"}, default "auto"
        Rows with no data. "auto" takes the fitted chain's policy (``metadata["unvisited_policy"]``) when given a
        chain, else the estimator's rule.
    initial : {"sample", "fixed"}, default "sample"
        Draw π0 (with the start exits of zero-step episodes) from Dir(first-state counts, zero-step success and
        failure counts) in every draw (its noise counted), or keep it at the point estimate (intervals conditional
        on the start distribution).
    design_effect : float, default 1.0
        Temper the counts by d ≥ 1 (repeated trials of one task; module docstring).

    Examples
    --------
    >>> import tracetochain as tt
    >>> traces = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 300, seed=0)
    >>> chain = tt.ChainEstimator().fit(traces).fetch_model()
    >>> post = DirichletPosterior(samples=1000).fit(chain).fetch_model()
    >>> w = post.intervals.width_summary("Q")
    >>> 0 <= w["min"] <= w["median"] <= w["max"] < 1
    True
    >>> post.ensemble.stats("r_inf").n_samples
    1000
    """

    n_samples = renamed_attribute("n_samples", "samples")

    @renamed_parameters(n_samples="samples")
    def __init__(self, *, pseudocount: float | None = None, prior: str | None = None, confidence: float = 0.95,
                 samples: int = 2000, seed: int = 0, unvisited: Unvisited = "auto",
                 initial: InitialDraw = "sample", design_effect: float = 1.0) -> None:
        self.pseudocount = pseudocount
        self.prior = prior
        self.confidence = confidence
        self.samples = samples
        self.seed = seed
        self.unvisited = unvisited
        self.initial = initial
        self.design_effect = design_effect
        self._model: ChainPosterior | None = None

    def fit(self, data: AbsorbingChain | TransitionCounts) -> DirichletPosterior:
        """Take the counts (from a fitted chain's metadata, or given directly) and form the posterior."""
        level = check_confidence(self.confidence)
        if isinstance(self.samples, bool) or not isinstance(self.samples, (int, np.integer)) or self.samples < 1:
            raise ValueError(f"samples must be a positive integer, got {self.samples!r}")
        if self.initial not in ("fixed", "sample"):
            raise ValueError(f"initial must be 'fixed' or 'sample', got {self.initial!r}")
        deff = float(self.design_effect)
        if not np.isfinite(deff) or deff < 1.0:
            raise ValueError(f"design_effect must be a finite number >= 1, got {self.design_effect!r}")
        explicit = self.pseudocount is not None or self.prior is not None
        if isinstance(data, AbsorbingChain):
            counts = counts_from_chain(data)
            prior = (ChainPrior.from_settings(self.pseudocount, self.prior) if explicit
                     else ChainPrior.from_metadata(data.metadata))
            unvisited = self.unvisited
            if unvisited == "auto" and data.metadata.get("unvisited_policy") in ("prior", "failure"):
                unvisited = data.metadata["unvisited_policy"]
                if unvisited == "prior" and not prior.has_mass:
                    unvisited = "failure"
            policy = prior.resolve_unvisited(unvisited)
            reference = data
        elif isinstance(data, TransitionCounts):
            counts = data
            prior = ChainPrior.from_settings(self.pseudocount, self.prior)
            policy = prior.resolve_unvisited(self.unvisited)
            if counts.n_states == 0 or counts.n_fitted_traces == 0:
                raise ValueError("the counts are empty: there is nothing to form a posterior from")
            reference = estimate_chain(counts, prior=prior, unvisited=policy)
        else:
            raise TypeError(f"fit expects an AbsorbingChain (fitted by ChainEstimator) or TransitionCounts, got "
                            f"{type(data).__name__}")
        empty = counts.row_totals == 0
        shape, absorbing = posterior_shape(outcome_counts(counts), prior, policy, deff)
        mean, lower, upper = beta_intervals(shape, level, absorbing)
        m = counts.n_states
        intervals = EntryIntervals(counts.state_names, lower[:, :m], upper[:, :m], lower[:, m], upper[:, m],
                                   lower[:, m + 1], upper[:, m + 1], mean[:, :m], mean[:, m], mean[:, m + 1], level,
                                   "beta", "Dirichlet posterior")
        md = reference.metadata
        if "estimator" in md:
            est = (f"{md['estimator']}({ChainPrior.from_metadata(md).describe()}, unvisited="
                   f"{md.get('unvisited_policy')!r}, initial={md.get('initial')!r}) on all the data")
        else:
            est = "the chain as given"
        info = {"point_estimator": est, "n_traces": dict(counts.n_traces), "unvisited_states":
                [counts.state_names[i] for i in np.flatnonzero(empty)]}
        self._model = ChainPosterior(reference, counts, prior, policy, self.initial, level, int(self.samples),
                                     self.seed, intervals, deff, info)
        return self

    def fetch_model(self) -> ChainPosterior:
        if self._model is None:
            raise NotFittedError("call fit(chain_or_counts) before fetch_model()")
        return self._model
