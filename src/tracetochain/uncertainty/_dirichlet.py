"""DirichletPosterior: the conjugate posterior of the chain given the transition counts (``paper-spec.md`` §5.1).

Each transient row i has m + 2 outcomes (m states, success, failure). Under a symmetric Dirichlet(α) prior the row's
posterior is Dir(c_{i,·} + α·1), whose mean is exactly the Laplace-smoothed MLE of :class:`~tracetochain.ChainEstimator`
with pseudocount α. Two things follow:

* **Closed-form marginals** — each entry X_ij (Q, R⊕ or R⊖ column) is Beta(c_ij + α, c_i + α(m+2) − c_ij − α), with
  c_i the row's total; equal-tailed intervals are Beta quantiles (:func:`beta_intervals`).
* **Joint draws** — rows are independent a posteriori, so a posterior chain is m independent Dirichlet rows; all rows
  of all draws are drawn at once by gamma normalisation (X = G / ΣG, G_k ~ Gamma(c_k + α)), then propagated to any
  derived quantity by :class:`ChainEnsemble` (§3.10).

Unvisited rows (no observed outgoing step) follow the estimator's policy: under ``"failure"`` they stay absorbing to
failure in every draw (Q_i = 0, R⊕_i = 0, R⊖_i = 1, interval [1, 1]); under ``"prior"`` they are drawn from the prior
Dir(α·1). With α = 0, outcomes never observed in a row are exactly 0 in every draw (deeptime's sparse-prior
convention, ``math.md`` §9 item 12).

π0 is kept fixed at the reference's point estimate by default (``initial="fixed"``: intervals are then conditional on
the start distribution); ``initial="sample"`` draws it from Dir(first-state counts + α) in every draw.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

import numpy as np
import scipy.stats
from numpy.typing import NDArray

from tracetochain.chain._counts import TransitionCounts
from tracetochain.chain._estimator import estimate_chain
from tracetochain.chain._model import AbsorbingChain
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
    return TransitionCounts(
        names,
        np.asarray(doc["transitions"], dtype=np.int64).reshape(len(names), len(names)),
        np.asarray(doc["exits_success"], dtype=np.int64),
        np.asarray(doc["exits_failure"], dtype=np.int64),
        np.asarray(doc["initial"], dtype=np.int64),
        {str(k): int(v) for k, v in doc["n_traces"].items()},
    )


def outcome_counts(counts: TransitionCounts) -> NDArray[np.float64]:
    """The m × (m + 2) matrix [C | c⊕ | c⊖] of every row's outcome counts."""
    return np.column_stack([counts.transitions, counts.exits_success, counts.exits_failure]).astype(np.float64)


def resolve_unvisited(unvisited: str, pseudocount: float) -> str:
    """``"auto"`` → ``"prior"`` when pseudocount > 0, else ``"failure"`` (the estimator's rule)."""
    if unvisited not in ("auto", "prior", "failure"):
        raise ValueError(f"unvisited must be 'auto', 'prior' or 'failure', got {unvisited!r}")
    if unvisited == "prior" and pseudocount == 0:
        raise ValueError("unvisited='prior' needs pseudocount > 0 (with no prior an unvisited row is undefined)")
    if unvisited == "auto":
        return "prior" if pseudocount > 0 else "failure"
    return unvisited


def beta_intervals(counts: NDArray[np.float64], pseudocount: float, confidence: float,
                   absorbing_rows: NDArray[np.bool_] | None = None
                   ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    r"""Closed-form marginal posterior of every entry of a row-Dirichlet matrix (``paper-spec.md`` §5.1).

    For row i with outcome counts c_{i,·} (m + 2 of them) and prior Dir(α·1), entry X_ij ~ Beta(a, b) with
    a = c_ij + α and b = c_i + α(m+2) − c_ij − α (c_i = Σ_k c_ik). Returns (mean, lower, upper) of the same shape as
    ``counts``; mean = a/(a+b) is the Laplace MLE; [lower, upper] are the (1 ∓ confidence)/2 Beta quantiles.
    Degenerate marginals are exact: a = 0 gives the point 0, b = 0 the point 1. Rows in ``absorbing_rows`` (unvisited
    under the "failure" policy) are the fixed row (0, …, 0, 0, 1).
    """
    lo_q, hi_q = equal_tailed(confidence)
    c = np.asarray(counts, dtype=np.float64)
    a = c + pseudocount
    b = c.sum(axis=1, keepdims=True) + pseudocount * c.shape[1] - a
    total = a + b
    mean = np.divide(a, total, out=np.zeros_like(a), where=total > 0)
    lower = np.zeros_like(a)
    upper = np.zeros_like(a)
    proper = (a > 0) & (b > 0)
    lower[proper] = scipy.stats.beta.ppf(lo_q, a[proper], b[proper])
    upper[proper] = scipy.stats.beta.ppf(hi_q, a[proper], b[proper])
    ones = (a > 0) & (b <= 0)
    lower[ones] = upper[ones] = 1.0
    if absorbing_rows is not None and absorbing_rows.any():
        fixed = np.zeros(c.shape[1])
        fixed[-1] = 1.0
        mean[absorbing_rows] = lower[absorbing_rows] = upper[absorbing_rows] = fixed
    return mean, lower, upper


def sample_rows(counts: NDArray[np.float64], pseudocount: float, n_samples: int, rng: np.random.Generator,
                absorbing_rows: NDArray[np.bool_] | None = None) -> NDArray[np.float64]:
    """``n_samples`` joint posterior draws of the row-stochastic matrix [Q | R⊕ | R⊖]: shape (n, m, m + 2).

    Every row of every draw at once: G ~ Gamma(c + α) elementwise, X = G / Σ_row G (a Dirichlet draw per row).
    Entries with c + α = 0 are exactly 0. Rows in ``absorbing_rows`` are (0, …, 0, 0, 1) in every draw. A row whose
    gamma draws all underflow to 0 (possible only for a tiny α) is replaced by its posterior mean.
    """
    c = np.asarray(counts, dtype=np.float64)
    shape = c + pseudocount
    G = rng.standard_gamma(np.broadcast_to(shape, (n_samples, *shape.shape)))
    total = G.sum(axis=2, keepdims=True)
    empty = total[..., 0] <= 0
    X = np.divide(G, total, out=np.zeros_like(G), where=total > 0)
    if empty.any():
        row_total = shape.sum(axis=1, keepdims=True)
        mean = np.divide(shape, row_total, out=np.zeros_like(shape), where=row_total > 0)
        draws, rows = np.nonzero(empty)
        X[draws, rows] = mean[rows]
    if absorbing_rows is not None and absorbing_rows.any():
        X[:, absorbing_rows, :] = 0.0
        X[:, absorbing_rows, -1] = 1.0
    out: NDArray[np.float64] = X
    return out


# ------------------------------------------------------------------------------------------------------- model
@dataclass(frozen=True, eq=False)
class ChainPosterior:
    """The fitted Dirichlet posterior: closed-form per-entry intervals and a sampler of whole chains.

    ``intervals`` are the Beta-marginal intervals (§5.1); :meth:`sample` (or the cached :attr:`ensemble`) gives a
    :class:`ChainEnsemble` of joint draws for intervals of any derived quantity (§3.10). ``reference`` is the point
    estimate (the chain given to ``fit``, or the Laplace MLE of the counts).
    """

    reference: AbsorbingChain
    counts: TransitionCounts
    pseudocount: float
    unvisited_policy: str
    initial: str
    confidence: float
    n_samples: int
    seed: int | None
    intervals: EntryIntervals
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def state_names(self) -> tuple[str, ...]:
        return self.counts.state_names

    @property
    def absorbing_rows(self) -> NDArray[np.bool_]:
        """Rows with no data that the "failure" policy sends to failure with probability 1 in every draw."""
        empty: NDArray[np.bool_] = self.counts.row_totals == 0
        return empty if self.unvisited_policy == "failure" else np.zeros_like(empty)

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
        X = sample_rows(outcome_counts(self.counts), self.pseudocount, n, rng, self.absorbing_rows)
        Q, rs, rf = X[:, :, :m], X[:, :, m], X[:, :, m + 1]  # the ensemble makes contiguous copies
        if init == "sample":
            pi = sample_rows(self.counts.initial.astype(np.float64)[None, :], self.pseudocount, n, rng)[:, 0, :]
        else:
            pi = np.broadcast_to(self.reference.pi0, (n, m))
        info = {**self.info, "pseudocount": self.pseudocount, "unvisited_policy": self.unvisited_policy,
                "initial": init, "n_samples": n, "point_estimator": self.info.get("point_estimator")}
        return ChainEnsemble(self.reference, {"Q": Q, "R_success": rs, "R_failure": rf, "pi0": pi},
                             method="posterior", confidence=self.confidence,
                             seed=None if isinstance(seed_used, np.random.Generator) else seed_used, info=info)

    @cached_property
    def ensemble(self) -> ChainEnsemble:
        """:meth:`sample` with the estimator's ``n_samples`` and ``seed`` (computed once)."""
        return self.sample()

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "tracetochain.dirichlet_posterior", "pseudocount": self.pseudocount,
                "unvisited_policy": self.unvisited_policy, "initial": self.initial, "confidence": self.confidence,
                "n_samples": self.n_samples, "seed": self.seed, "intervals": self.intervals.to_dict(),
                "counts": self.counts.to_dict()}

    def __str__(self) -> str:
        return (f"Dirichlet posterior (pseudocount {self.pseudocount:g}, unvisited rows: {self.unvisited_policy}, "
                f"π0 {self.initial})\n{self.intervals}")

    def _repr_html_(self) -> str:
        head = html.escape(f"Dirichlet posterior (pseudocount {self.pseudocount:g}, unvisited rows: "
                           f"{self.unvisited_policy}, π0 {self.initial})")
        return f"<div><b>{head}</b>{self.intervals._repr_html_()}</div>"


# --------------------------------------------------------------------------------------------------- estimator
class DirichletPosterior:
    """Bayesian uncertainty of a fitted chain from its transition counts (``paper-spec.md`` §5.1, §3.10).

    Parameters
    ----------
    pseudocount : float, default 1.0
        Symmetric Dirichlet prior α on each row's m + 2 outcomes (≥ 0). α = 1 matches ``ChainEstimator``'s default,
        so the posterior mean of every entry is the fitted chain's entry.
    confidence : float, default 0.95
        Level of the equal-tailed intervals.
    n_samples : int, default 2000
        Joint draws in :attr:`ChainPosterior.ensemble`.
    seed : int, default 0
        Seed of the joint draws (``numpy.random.default_rng``).
    unvisited : {"auto", "prior", "failure"}, default "auto"
        Rows with no data. "auto" takes the fitted chain's policy (``metadata["unvisited_policy"]``) when given a
        chain, else "prior" for α > 0 and "failure" for α = 0 (as the estimator).
    initial : {"fixed", "sample"}, default "fixed"
        Keep π0 at the point estimate in every draw, or draw it from Dir(first-state counts + α).

    Examples
    --------
    >>> import tracetochain as tt
    >>> traces = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 300, seed=0)
    >>> chain = tt.ChainEstimator().fit(traces).fetch_model()
    >>> post = DirichletPosterior(n_samples=1000).fit(chain).fetch_model()
    >>> w = post.intervals.width_summary("Q")
    >>> 0 < w["min"] <= w["median"] <= w["max"] < 1
    True
    >>> post.ensemble.stats("r_inf").n_samples
    1000
    """

    def __init__(self, *, pseudocount: float = 1.0, confidence: float = 0.95, n_samples: int = 2000, seed: int = 0,
                 unvisited: Unvisited = "auto", initial: InitialDraw = "fixed") -> None:
        self.pseudocount = pseudocount
        self.confidence = confidence
        self.n_samples = n_samples
        self.seed = seed
        self.unvisited = unvisited
        self.initial = initial
        self._model: ChainPosterior | None = None

    def fit(self, data: AbsorbingChain | TransitionCounts) -> DirichletPosterior:
        """Take the counts (from a fitted chain's metadata, or given directly) and form the posterior."""
        a = float(self.pseudocount)
        if not np.isfinite(a) or a < 0:
            raise ValueError(f"pseudocount must be a finite number >= 0, got {self.pseudocount!r}")
        level = check_confidence(self.confidence)
        if isinstance(self.n_samples, bool) or not isinstance(self.n_samples, (int, np.integer)) \
                or self.n_samples < 1:
            raise ValueError(f"n_samples must be a positive integer, got {self.n_samples!r}")
        if self.initial not in ("fixed", "sample"):
            raise ValueError(f"initial must be 'fixed' or 'sample', got {self.initial!r}")
        if isinstance(data, AbsorbingChain):
            counts = counts_from_chain(data)
            unvisited = self.unvisited
            if unvisited == "auto" and data.metadata.get("unvisited_policy") in ("prior", "failure"):
                unvisited = data.metadata["unvisited_policy"]
                if unvisited == "prior" and a == 0:
                    unvisited = "failure"
            policy = resolve_unvisited(unvisited, a)
            reference = data
        elif isinstance(data, TransitionCounts):
            counts = data
            policy = resolve_unvisited(self.unvisited, a)
            if counts.n_states == 0 or counts.n_fitted_traces == 0:
                raise ValueError("the counts are empty: there is nothing to form a posterior from")
            reference = estimate_chain(counts, a, policy, "empirical")  # type: ignore[arg-type]
        else:
            raise TypeError(f"fit expects an AbsorbingChain (fitted by ChainEstimator) or TransitionCounts, got "
                            f"{type(data).__name__}")
        empty = counts.row_totals == 0
        absorbing = empty if policy == "failure" else np.zeros_like(empty)
        mean, lower, upper = beta_intervals(outcome_counts(counts), a, level, absorbing)
        m = counts.n_states
        intervals = EntryIntervals(counts.state_names, lower[:, :m], upper[:, :m], lower[:, m], upper[:, m],
                                   lower[:, m + 1], upper[:, m + 1], mean[:, :m], mean[:, m], mean[:, m + 1], level,
                                   "beta", "Dirichlet posterior")
        md = reference.metadata
        if "estimator" in md:
            est = (f"{md['estimator']}(pseudocount={md.get('pseudocount')!r}, unvisited="
                   f"{md.get('unvisited_policy')!r}, initial={md.get('initial')!r}) on all the data")
        else:
            est = "the chain as given"
        info = {"point_estimator": est, "n_traces": dict(counts.n_traces), "unvisited_states":
                [counts.state_names[i] for i in np.flatnonzero(empty)],
                "reference_pseudocount": md.get("pseudocount")}
        self._model = ChainPosterior(reference, counts, a, policy, self.initial, level, int(self.n_samples),
                                     self.seed, intervals, info)
        return self

    def fetch_model(self) -> ChainPosterior:
        if self._model is None:
            raise NotFittedError("call fit(chain_or_counts) before fetch_model()")
        return self._model
