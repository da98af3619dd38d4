"""Layer 1 of the certificate: Kolmogorov–Smirnov on success first-passage times (docs/statistics.md §5).

The first-passage time (FPT) of a completed trace is its number of steps (the step that enters ⊕ counts), so a
successful trace of L steps has τ⊕ = L, and an episode that succeeded before any step has τ⊕ = 0 (the chain's
f⊕(0) is its start exit s). Two modes:

``"calibrated"`` (default)
    Statistic on the integer lattice, D = max_{k=0..kmax} |F_n(k) − F(k)|, with F(d) = R(d)/R∞ from the chain's
    forward sweep (F(d) = R(d)/R(cap) when the traces were cut at a step cap), kmax = the largest observed time.
    ``scipy.stats.ks_1samp`` is never used: on lattice data it evaluates F at the atom instead of its left limit and
    rejects a true null almost always. The p-value is a parametric bootstrap: simulate corpora of
    the data's size from the chain (same π0, same cap), refit the chain by counting with the same estimator
    settings, recompute D against the refitted chain; p = (1 + #{D* ≥ D}) / (B + 1) (Stute, González-Manteiga &
    Presedo Quindimil 1993).
``"paper"``
    The two-sample test of Tran-Truong & Le (2026, Algorithm 2): empirical FPTs against N seeded model FPTs
    (``scipy.stats.ks_2samp``, or the Numerical Recipes asymptotic series the artifact used in SS7/9/10/11),
    success-conditional or any-outcome, from π0 or from the modal start state, model runs capped at ``max_steps``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from numpy.typing import NDArray

from tracetochain._display import Display, ResultDisplay, Table, fmt_number
from tracetochain._outcome import CENSORED, FAILURE, INVALID, SUCCESS
from tracetochain.audit._censoring import (
    cap_survival,
    censoring_survival,
    draw_caps,
    length_histograms,
    observed_success_pmf,
)
from tracetochain.audit._common import (
    REPLICATE_BLOCK,
    Seed,
    as_seed_sequence,
    estimator_settings,
    json_dict,
    replicate_blocks,
    seed_record,
    trace_lengths,
)
from tracetochain.chain import (
    AbsorbingChain,
    ChainPrior,
    estimate_rows,
    outcome_matrix,
    start_distribution,
    zero_step_outcome_codes,
)
from tracetochain.exceptions import UndefinedMetricError
from tracetochain.numerics import SimulatedTraces, simulate_traces
from tracetochain.numerics.batched import ChainBatch
from tracetochain.traces import TraceTable

if TYPE_CHECKING:
    from tracetochain.chain.shared import SparseChain

Refit = Literal["same", "train", "none"]
#: Step cap of simulated traces when the data were not capped (a trace still running after it counts as censored).
UNCAPPED_SIMULATION_STEPS = 10_000
#: Largest corpus one KS bootstrap replicate simulates; larger data are rescaled by √(size ratio) (see
#: :func:`ks_calibrated`). 2,000 keeps the test's level — on 400 null corpora of 4,000 traces, replicates at 1/8 and at
#: 1/40 of the size both rejected 5.5 % [3.7, 8.2] at 5 % (``benchmarks/ks_rescale_calibration.py``) — and bounds the
#: cost of the five held-out splits (each simulates a fit and a held-out half per replicate) on large corpora.
DEFAULT_MAX_SIMULATED_TRACES = 2_000


# ------------------------------------------------------------------------------------------------ formulas
def lattice_ks_statistic(times: NDArray[np.int64], cdf: NDArray[np.float64]) -> float:
    """D = max_{k=0..kmax} |F_n(k) − F(k)| for integer-valued data (the lattice KS distance; Conover 1972).

    ``cdf[k]`` is the model CDF at k = 0, 1, …, at least up to kmax = max(times). Both CDFs are right-continuous
    step functions on the integers, so the supremum over the real line is attained on the lattice, and beyond kmax
    (where F_n = 1 and F only grows) it cannot increase.

    >>> round(lattice_ks_statistic(np.array([1, 1, 2]), np.array([0.0, 0.5, 1.0])), 6)
    0.166667
    """
    x = np.asarray(times, dtype=np.int64)
    if x.size == 0:
        raise ValueError("the KS statistic needs at least one observation")
    kmax = int(x.max())
    if cdf.shape[0] <= kmax:
        raise ValueError(f"the model CDF must cover k = 0..{kmax}, got {cdf.shape[0]} values")
    emp = np.cumsum(np.bincount(x, minlength=kmax + 1)) / x.size
    return float(np.max(np.abs(emp - cdf[: kmax + 1])))


def success_time_cdf(chain: AbsorbingChain | SparseChain, horizon: int, max_steps: int | None = None
                     ) -> NDArray[np.float64]:
    """F(d) for d = 0..horizon: the law of the success time among successful runs, F(d) = R(d)/R∞.

    ``chain``: a validated chain, or a large one held as its non-zeros (:class:`~tracetochain.chain._sparse
    .SparseChain`, what the timing null's refits of an expanded family give).

    F(d) = R(d)/R∞ without a cap; with a step cap D the successes that can be observed are those with τ⊕ ≤ D, so
    F(d) = R(min(d, D))/R(D). Raises :class:`UndefinedMetricError` when success is unreachable (within the cap).
    """
    rel = chain.reliability(horizon if max_steps is None else min(horizon, max_steps))
    if max_steps is None:
        denom = chain.r_inf
    elif max_steps <= horizon:
        denom = float(rel[max_steps])
    else:
        denom = _reliability_at(chain, max_steps)
    if denom <= 0.0:
        raise UndefinedMetricError("success is unreachable from the initial distribution"
                                   + (f" within {max_steps} steps" if max_steps is not None else "")
                                   + ", so the success-time law is undefined")
    if rel.size < horizon + 1:  # beyond the cap the law is flat
        rel = np.concatenate([rel, np.full(horizon + 1 - rel.size, rel[-1])])
    out: NDArray[np.float64] = np.minimum(rel[: horizon + 1] / denom, 1.0)
    return out


#: Chains up to this many states get R(D) at a far cap from a matrix power instead of a D-step sweep.
_MATRIX_POWER_STATES = 64


def _reliability_at(chain: AbsorbingChain | SparseChain, d: int) -> float:
    """R(d) = R∞ − π0 Q^d h (the tail is π_d · h, docs/numerics.md §4), by repeated squaring for small chains."""
    if chain.n_states > _MATRIX_POWER_STATES or not isinstance(chain, AbsorbingChain):
        return float(chain.reliability(d)[d])
    tail = float(chain.pi0 @ np.linalg.matrix_power(chain.Q, d) @ chain.success_probabilities)
    return max(0.0, chain.r_inf - max(0.0, tail))


def kolmogorov_asymptotic_pvalue(statistic: float, n1: int, n2: int) -> float:
    """The Numerical Recipes two-sample KS p-value the authors' artifact uses in studies SS7/9/10/11.

    n_e = n1 n2 / (n1 + n2), λ = (√n_e + 0.12 + 0.11/√n_e)·D, p = 2 Σ_{j=1}^{100} (−1)^{j−1} e^{−2 j² λ²}, clipped
    to [0, 1]. The truncated series is the artifact's; it assumes continuous data, so with tied (integer) times it
    is conservative. For λ < 0.05 the 100-term alternating sum no longer converges (it even tends to 0 as λ → 0);
    there, as Numerical Recipes does on non-convergence, p = 1 (the series itself is > 1 − 1e−15 at λ = 0.05).

    >>> kolmogorov_asymptotic_pvalue(0.39295, 80, 20000)  # SS10: the artifact's p = 1.9729189348575157e-11
    1.9729189348575157e-11
    """
    if n1 < 1 or n2 < 1:
        raise ValueError("both samples need at least one observation")
    ne = n1 * n2 / (n1 + n2)
    sq = math.sqrt(ne)
    lam = (sq + 0.12 + 0.11 / sq) * float(statistic)
    if lam < 0.05:
        return 1.0
    j = np.arange(1, 101, dtype=np.float64)
    terms = np.where(j % 2 == 1, 1.0, -1.0) * np.exp(-2.0 * j * j * lam * lam)
    return float(min(1.0, max(0.0, 2.0 * float(terms.sum()))))


# ------------------------------------------------------------------------------------------------ result
@dataclass(frozen=True, repr=False)
class TimingResult(ResultDisplay):
    """Result of the KS timing layer.

    ``statistic`` is D; ``p_value`` is None (with the reason in ``undefined``) when the test is undefined, e.g. no
    successful trace. ``empirical_cdf``/``model_cdf`` are the two CDFs on k = 0..kmax (calibrated mode only).
    """

    mode: str
    statistic: float | None
    p_value: float | None
    outcome: str
    n_times: int
    n_traces: int
    settings: dict[str, Any]
    bootstrap: dict[str, Any] | None = None
    empirical_cdf: tuple[float, ...] = ()
    model_cdf: tuple[float, ...] = ()
    undefined: dict[str, str] = field(default_factory=dict)

    def rejects(self, level: float = 0.05) -> bool | None:
        """True when p ≤ level (the timing law is rejected); None when the test is undefined."""
        return None if self.p_value is None else self.p_value <= level

    def to_dict(self) -> dict[str, Any]:
        return json_dict({
            "mode": self.mode,
            "statistic": self.statistic,
            "p_value": self.p_value,
            "outcome": self.outcome,
            "n_times": self.n_times,
            "n_traces": self.n_traces,
            "settings": self.settings,
            "bootstrap": self.bootstrap,
            "empirical_cdf": list(self.empirical_cdf),
            "model_cdf": list(self.model_cdf),
            "undefined": dict(self.undefined),
        })

    def describe(self) -> str:
        what = "success times" if self.outcome == "success" else "absorption times (either outcome)"
        if self.p_value is None:
            return f"KS timing ({self.mode}): undefined — {'; '.join(self.undefined.values())}"
        if self.mode == "calibrated":
            how = (f"parametric bootstrap, B = {self.settings.get('n_bootstrap')}, refit "
                   f"{self.settings.get('refit')!r}")
        else:
            how = f"two-sample vs {self.settings.get('n_model')} model runs, p by {self.settings.get('pvalue')}"
        return (f"KS timing ({self.mode}) on {self.n_times} {what}: D = {fmt_number(self.statistic)}, "
                f"p = {fmt_number(self.p_value, 4)} ({how})")

    def __str__(self) -> str:
        return self.describe()

    def _display(self) -> Display:
        fields: tuple[tuple[str, Any], ...] = (
            ("mode", self.mode), ("D", self.statistic), ("p-value", self.p_value), ("times compared", self.n_times),
            ("traces", self.n_traces), ("outcome", self.outcome))
        cdf = tuple((k, e, m) for k, (e, m) in enumerate(zip(self.empirical_cdf, self.model_cdf, strict=False)))
        tables = (Table("cdf", ("k", "empirical", "model"), cdf, shown=False),) if cdf else ()
        return Display(f"D = {fmt_number(self.statistic)}, p = {fmt_number(self.p_value, 4)} ({self.mode})",
                       kind="KS timing layer", lines=tuple(f"undefined: {v}" for v in self.undefined.values()),
                       fields=fields, tables=tables)


# ------------------------------------------------------------------------------------------------ helpers
def _episodes(traces: TraceTable) -> tuple[NDArray[np.int64], NDArray[np.int8]]:
    """Length and outcome of every episode: the traces, then the zero-step episodes (length 0) of the report."""
    zero = zero_step_outcome_codes(traces.report.zero_step)
    if not zero.size:
        return trace_lengths(traces), traces.outcomes()
    return (np.concatenate([trace_lengths(traces), np.zeros(zero.size, np.int64)]),
            np.concatenate([traces.outcomes(), zero.astype(np.int8)]))


def _data_times(traces: TraceTable, outcome: str) -> tuple[NDArray[np.int64], NDArray[np.int8], int]:
    lengths, oc = _episodes(traces)
    n_usable = int(np.count_nonzero(oc != INVALID))
    if outcome == "success":
        return lengths[oc == SUCCESS], oc, n_usable
    return lengths[(oc == SUCCESS) | (oc == FAILURE)], oc, n_usable


def table_histogram(traces: TraceTable) -> NDArray[np.int64]:
    """Lengths of the usable traces by outcome, (3, L + 1) (success, failure, censored); the zero-step episodes of
    ``traces.report.zero_step`` at length 0."""
    return length_histograms(*_episodes(traces))


@dataclass(frozen=True)
class _ReplicateCounts:
    transitions: NDArray[np.int64]  # (R, m, m)
    exits_success: NDArray[np.int64]  # (R, m)
    exits_failure: NDArray[np.int64]
    initial: NDArray[np.int64]
    outcomes: NDArray[np.int64]  # (R, 3): success, failure, censored
    start_exits: NDArray[np.int64]  # (R, 2): episodes that succeeded / failed before any step


def replicate_counts(sim: SimulatedTraces, n_per_replicate: int, n_replicates: int, m: int) -> _ReplicateCounts:
    """Counting on simulated paths, for many replicates at once with ``np.bincount``.

    Traces ``r·n .. (r+1)·n − 1`` of ``sim`` form replicate r. Transitions are pairs of consecutive steps of one
    trace; a success/failure trace adds one exit from its last state; a censored one adds none. A trace of length 0
    (it drew a start exit, or was cut before its first step) has no state: a success or failure adds a start exit,
    a censored one nothing — as the zero-step episodes of real data are counted.
    """
    assert sim.states is not None and sim.offsets is not None
    S = sim.states.astype(np.int64)
    L = sim.length
    n_tr = L.size
    rep_of_trace = np.arange(n_tr, dtype=np.int64) // n_per_replicate
    trace_of_step = np.repeat(np.arange(n_tr, dtype=np.int64), L)
    same = trace_of_step[1:] == trace_of_step[:-1]
    rep_pair = rep_of_trace[trace_of_step[:-1][same]]
    idx = (rep_pair * m + S[:-1][same]) * m + S[1:][same]
    trans = np.bincount(idx, minlength=n_replicates * m * m).reshape(n_replicates, m, m)
    stepped = L > 0
    oc = sim.outcome.astype(np.int64)
    succ, fail = (oc == SUCCESS) & stepped, (oc == FAILURE) & stepped
    if stepped.all():
        starts = sim.offsets[:-1]
        last = S[sim.offsets[1:] - 1]
        first_rep = rep_of_trace
    else:
        starts = sim.offsets[:-1][stepped]
        last = np.zeros(n_tr, np.int64)
        last[stepped] = S[sim.offsets[1:][stepped] - 1]
        first_rep = rep_of_trace[stepped]
    es = np.bincount(rep_of_trace[succ] * m + last[succ], minlength=n_replicates * m).reshape(n_replicates, m)
    ef = np.bincount(rep_of_trace[fail] * m + last[fail], minlength=n_replicates * m).reshape(n_replicates, m)
    init = np.bincount(first_rep * m + S[starts], minlength=n_replicates * m).reshape(n_replicates, m)
    outc = np.bincount(rep_of_trace * 3 + oc, minlength=n_replicates * 3).reshape(n_replicates, 3)
    zero = ~stepped & (oc <= FAILURE)
    exits = np.bincount(rep_of_trace[zero] * 2 + oc[zero], minlength=n_replicates * 2).reshape(n_replicates, 2)
    return _ReplicateCounts(trans, es, ef, init, outc, exits)


def _refit_batch(rc: _ReplicateCounts, prior: ChainPrior, policy: str, initial: str) -> ChainBatch:
    """The chains re-estimated from replicate counts, all at once (the estimator's own row formula and start
    distribution)."""
    m = rc.transitions.shape[-1]
    rows = estimate_rows(outcome_matrix(rc.transitions, rc.exits_success, rc.exits_failure, rc.initial), prior,
                         policy)
    pi0, exits = start_distribution(rc.initial, rc.start_exits, initial)
    return ChainBatch(rows[..., :m], rows[..., m], rows[..., m + 1], pi0, exits)


def _observed_cdf(batch: ChainBatch, horizon: int,
                  survival: NDArray[np.float64] | list[NDArray[np.float64] | None] | None
                  ) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """CDF (B, horizon + 1) of the success time among observed successes, and where it is defined.

    Without censoring F(d) = R(d)/R∞; with censoring survival P(C ≥ d) the law of the observed success times,
    f⊕(d) P(C ≥ d) / Σ f⊕ P(C ≥ ·) (``_censoring``). ``survival`` is one array for every chain, or one per chain.
    """
    B = batch.size
    survs = survival if isinstance(survival, list) else [survival] * B
    censored = [s is not None for s in survs]
    cdf = np.zeros((B, horizon + 1))
    ok = np.zeros(B, dtype=bool)
    top = max([horizon] + [s.size - 2 for s in survs if s is not None])
    sweep = batch.sweep(top, residual=False)
    if not all(censored):
        rel = sweep["reliability"][:, : horizon + 1]
        if np.all(sweep["survival"][:, -1] == 0.0):
            # Every chain has absorbed all its mass within the sweep (short traces: Q is nilpotent), so R∞ = R(top)
            # exactly and the batched m × m solves — most of this test's cost at hundreds of states — are not needed.
            r_inf = sweep["reliability"][:, -1]
            good = r_inf > 0
        else:
            r_inf = batch.r_inf()
            good = batch.valid & (r_inf > 0)
        plain = ~np.asarray(censored)
        use = plain & good
        cdf[use] = np.minimum(rel[use] / r_inf[use, None], 1.0)
        ok |= use
    if any(censored):
        fs = sweep["success_pmf"]
        for i, s in enumerate(survs):
            if s is None:
                continue
            pmf = observed_success_pmf(fs[i], s)
            total = float(pmf.sum())
            if batch.absorbing[i] and total > 0:
                cdf[i] = np.minimum(np.cumsum(pmf)[: horizon + 1] / total, 1.0)
                ok[i] = True
    return cdf, ok


def _histogram_ks(success_hist: NDArray[np.int64], cdf: NDArray[np.float64]) -> float:
    """The lattice KS statistic of the success times given as a histogram."""
    n = int(success_hist.sum())
    emp = np.cumsum(success_hist) / n
    return float(np.max(np.abs(emp - cdf[: emp.size])))


def _survival_of(hist: NDArray[np.int64], max_steps: int | None) -> NDArray[np.float64] | None:
    return cap_survival(max_steps) if max_steps is not None else censoring_survival(hist)


# ------------------------------------------------------------------------------------------------ calibrated
def ks_calibrated(chain: AbsorbingChain, traces: TraceTable, *, refit: Refit = "same",
                  fit_traces: TraceTable | None = None, n_bootstrap: int = 199, seed: Seed = 0,
                  max_steps: int | None = None, pseudocount: float | None = None, unvisited: str | None = None,
                  initial: str | None = None,
                  max_simulated_traces: int | None = DEFAULT_MAX_SIMULATED_TRACES) -> TimingResult:
    """Lattice KS of the success times of ``traces`` against ``chain`` with a parametric-bootstrap p-value.

    The traces are summarised (lengths by outcome) and passed to :func:`ks_calibrated_counts`, which holds the test;
    ``fit_traces`` are the traces the chain was fitted on (``refit="train"``: their number and censoring).
    """
    if refit == "train" and fit_traces is None:
        raise ValueError("refit='train' needs fit_traces: the traces the chain was fitted on (their number and "
                         "censoring shape the simulated fit halves)")
    fit_hist = table_histogram(fit_traces) if fit_traces is not None else None
    return ks_calibrated_counts(chain, table_histogram(traces), refit=refit, fit_histogram=fit_hist,
                                n_bootstrap=n_bootstrap, seed=seed, max_steps=max_steps, pseudocount=pseudocount,
                                unvisited=unvisited, initial=initial, max_simulated_traces=max_simulated_traces)


def ks_calibrated_counts(chain: AbsorbingChain, histogram: NDArray[np.int64], *, refit: Refit = "same",
                         fit_histogram: NDArray[np.int64] | None = None, n_fit_traces: int | None = None,
                         n_bootstrap: int = 199, seed: Seed = 0, max_steps: int | None = None,
                         pseudocount: float | None = None, unvisited: str | None = None, initial: str | None = None,
                         max_simulated_traces: int | None = DEFAULT_MAX_SIMULATED_TRACES) -> TimingResult:
    """The calibrated KS timing test from the lengths of the tested traces by outcome.

    Parameters
    ----------
    chain : AbsorbingChain
        The fitted chain (its metadata supplies the refit settings unless given here).
    histogram : (3, L + 1) int array
        Lengths of the tested traces by outcome (success, failure, censored): :func:`~tracetochain.audit._censoring.
        length_histograms`. Success times are the lengths of the successful traces.
    refit : {"same", "train", "none"}, default "same"
        ``"same"``: the chain was fitted on the tested traces; each replicate simulates one corpus of the same size,
        refits on it and tests that corpus's successes against its own refit.
        ``"train"``: held-out use; each replicate simulates a fit corpus like the fit half (``fit_histogram``: its
        size and censoring; or ``n_fit_traces`` without censoring), refits on it, and tests a fresh corpus like the
        tested one against that refit (both sources of error of the real split).
        ``"none"``: the chain is fixed independently of the traces (Monte Carlo from the chain).
    n_bootstrap : int, default 199
        B (the smallest possible p is 1/(B + 1)).
    seed : int, default 0
        Replicates are simulated in blocks of 32 per ``SeedSequence(seed).spawn`` child (prefix-consistent in B).
    max_steps : int, optional
        A known step cap the traces were cut at. Default: the censoring is read off the traces (``_censoring``:
        reverse Kaplan–Meier); without censored traces, none.
    pseudocount, unvisited, initial : optional
        Estimator settings of the refit; default: those recorded in ``chain.metadata``.
    max_simulated_traces : int or None, default 10,000
        Largest corpus a replicate simulates. Above it every replicate simulates the corpora at the fraction
        r = max_simulated_traces / n of their sizes and its statistic is rescaled by √(n_test,sim / n_test): under the
        null √n·D has a non-degenerate limit law that does not depend on n, so the rescaled replicates estimate the
        law of D at the data's size. This makes the audit of millions of traces cost what 10,000 cost.

    Notes
    -----
    The statistic is D = max_k |F_n(k) − F(k)| on the integer lattice with F the chain's law of the *observed*
    success time: R(d)/R∞ without censoring; f⊕(d)·P(C ≥ d) normalised under the traces' censoring (``_censoring``).
    Replicates are censored the same way (each simulated trace gets a cut drawn from the estimated P(C ≥ d) of its
    half) and recompute their own censoring estimate, so the estimation of the censoring is part of the null law.
    A replicate without successes, or whose refit cannot succeed, has no D*; it counts as D* ≥ D (conservative) and
    is reported in ``bootstrap["n_undefined"]``.
    """
    if refit not in ("same", "train", "none"):
        raise ValueError(f"refit must be 'same', 'train' or 'none', got {refit!r}")
    if max_simulated_traces is not None and max_simulated_traces < 1:
        raise ValueError(f"max_simulated_traces must be >= 1 or None, got {max_simulated_traces}")
    if n_bootstrap < 1:
        raise ValueError(f"n_bootstrap must be >= 1, got {n_bootstrap}")
    if max_steps is not None and max_steps < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps}")
    prior, policy, init_policy = estimator_settings(chain, pseudocount, unvisited, initial)
    hist = np.asarray(histogram, dtype=np.int64)
    n_usable = int(hist.sum())
    longest = int(np.flatnonzero(hist.sum(axis=0))[-1]) if n_usable else 0
    if max_steps is not None and longest > max_steps:
        raise ValueError(f"a trace has {longest} steps, more than max_steps={max_steps}; pass the cap "
                         "the traces were actually cut at")
    fit_hist: NDArray[np.int64] | None = None
    if refit == "train":
        if fit_histogram is not None:
            fit_hist = np.asarray(fit_histogram, dtype=np.int64)
            n_fit = int(fit_hist.sum())
        elif n_fit_traces is not None:
            n_fit = int(n_fit_traces)
        else:
            raise ValueError("refit='train' needs the fit half's fit_histogram (or n_fit_traces)")
        if n_fit < 1:
            raise ValueError("refit='train' needs a fit half with at least one usable trace")
    else:
        n_fit = n_usable
    # Replicate sizes: the data's, or the same fraction r of both corpora when they exceed max_simulated_traces.
    n_test = n_usable
    largest = max(n_test, n_fit if refit == "train" else 0)
    if max_simulated_traces is not None and largest > max_simulated_traces:
        frac = max_simulated_traces / largest
        n_test_sim, n_fit_sim = max(1, round(n_test * frac)), max(1, round(n_fit * frac))
    else:
        n_test_sim, n_fit_sim = n_test, n_fit
    scale = math.sqrt(n_test_sim / n_test) if n_test else 1.0
    surv_test = _survival_of(hist, max_steps)
    surv_fit = (_survival_of(fit_hist, max_steps) if fit_hist is not None else
                (cap_survival(max_steps) if max_steps is not None else None))
    settings: dict[str, Any] = {
        "n_bootstrap": n_bootstrap, "seed": seed_record(seed), "refit": refit, "max_steps": max_steps,
        "n_fit_traces": n_fit if refit != "none" else None, "prior": prior.to_dict(), "unvisited": policy,
        "initial": init_policy, "replicate_block": REPLICATE_BLOCK,
        "statistic": "lattice sup |F_n(k) - F(k)| over the observed success times, F the chain's law of the observed "
                     "success time",
        "censoring": ("known cap" if max_steps is not None else
                      "reverse Kaplan-Meier of the tested traces" if surv_test is not None else "none"),
        "n_censored": int(hist[CENSORED].sum()) if hist.shape[0] > CENSORED else 0,
        "max_simulated_traces": max_simulated_traces,
        "simulated_traces": {"test": n_test_sim, "fit": n_fit_sim if refit == "train" else None,
                             "d_star_scale": scale},
    }
    success_hist = hist[SUCCESS] if n_usable else np.zeros(1, np.int64)
    n_times = int(success_hist.sum())
    base = TimingResult("calibrated", None, None, "success", n_times, n_usable, settings)
    if n_times == 0:
        return _with_undefined(base, "no successful trace: there are no success times to test")
    kmax = int(np.flatnonzero(success_hist)[-1])
    success_hist = success_hist[: kmax + 1]
    exits = chain.start_exits if chain.start_exits.any() else None
    ref = ChainBatch(chain.Q[None], chain.R_success[None], chain.R_failure[None], chain.pi0[None],
                     None if exits is None else exits[None])
    model_cdf, ok = _observed_cdf(ref, kmax, surv_test)
    if not ok[0]:
        return _with_undefined(base, "success is unreachable under the chain (or not observable under the "
                                     "traces' censoring), so the success-time law is undefined")
    model = model_cdf[0]
    d_obs = _histogram_ks(success_hist, model)
    emp = np.cumsum(success_hist) / n_times

    m = chain.n_states
    Q, rs, rf, pi0 = chain.Q, chain.R_success, chain.R_failure, chain.pi0
    d_star = np.empty(n_bootstrap)
    block = REPLICATE_BLOCK

    def simulate(n_per: int, surv: NDArray[np.float64] | None, rng: np.random.Generator,
                 paths: bool) -> SimulatedTraces:
        caps = draw_caps(surv, block * n_per, rng)
        return simulate_traces(Q, rs, rf, pi0, block * n_per, rng, max_steps=UNCAPPED_SIMULATION_STEPS,
                               record_paths=paths, caps=caps, start_exits=exits)

    for first, count, rng in replicate_blocks(as_seed_sequence(seed), n_bootstrap):
        refitted: ChainBatch | None = None
        if refit == "same":
            test_sim = simulate(n_test_sim, surv_test, rng, True)
            refitted = _refit_batch(replicate_counts(test_sim, n_test_sim, block, m), prior, policy, init_policy)
        elif refit == "train":
            fit_sim = simulate(n_fit_sim, surv_fit, rng, True)
            refitted = _refit_batch(replicate_counts(fit_sim, n_fit_sim, block, m), prior, policy, init_policy)
            test_sim = simulate(n_test_sim, surv_test, rng, False)
        else:
            test_sim = simulate(n_test_sim, surv_test, rng, False)
        lengths = test_sim.length.reshape(block, n_test_sim)
        outcomes = test_sim.outcome.reshape(block, n_test_sim)
        hists = [length_histograms(lengths[r], outcomes[r]) for r in range(count)]
        tops = [int(np.flatnonzero(h[SUCCESS])[-1]) if h[SUCCESS].any() else 0 for h in hists]
        survs = [surv_test if max_steps is not None or surv_test is None else censoring_survival(h) for h in hists]
        if refitted is None:
            stack = ChainBatch(np.broadcast_to(Q, (count, m, m)), np.broadcast_to(rs, (count, m)),
                               np.broadcast_to(rf, (count, m)), np.broadcast_to(pi0, (count, m)),
                               None if exits is None else np.broadcast_to(exits, (count, 2)))
        else:
            stack = ChainBatch(refitted.Q[:count], refitted.r_success[:count], refitted.r_failure[:count],
                               refitted.pi0[:count],
                               None if refitted.start_exits is None else refitted.start_exits[:count])
        cdfs, oks = _observed_cdf(stack, max(tops), survs)
        for r in range(count):
            s_hist = hists[r][SUCCESS]
            if not s_hist.any() or not oks[r]:
                d_star[first + r] = math.inf
                continue
            d_star[first + r] = _histogram_ks(s_hist[: tops[r] + 1], cdfs[r])
    if scale != 1.0:
        d_star *= scale
    tol = 1e-12 * max(1.0, d_obs)
    p = (1 + int(np.count_nonzero(d_star >= d_obs - tol))) / (n_bootstrap + 1)
    finite = d_star[np.isfinite(d_star)]
    boot = {
        "n_replicates": n_bootstrap,
        "n_undefined": int(n_bootstrap - finite.size),
        "d_star_quantiles": ({str(q): float(np.quantile(finite, q)) for q in (0.5, 0.9, 0.95, 0.99)}
                             if finite.size else None),
        "min_p_value": 1.0 / (n_bootstrap + 1),
    }
    return TimingResult("calibrated", d_obs, p, "success", n_times, n_usable, settings, boot,
                        tuple(float(v) for v in emp), tuple(float(v) for v in model[: emp.size]))


def _with_undefined(res: TimingResult, reason: str) -> TimingResult:
    return TimingResult(res.mode, None, None, res.outcome, res.n_times, res.n_traces, res.settings,
                        res.bootstrap, (), (), {"p_value": reason})


# ------------------------------------------------------------------------------------------------ paper
def ks_paper(chain: AbsorbingChain, traces: TraceTable, *, n_model: int = 20_000,
             outcome: Literal["success", "any"] = "success", start: Literal["pi0", "modal"] = "pi0",
             pvalue: Literal["scipy", "asymptotic"] = "scipy", max_steps: int = 500, seed: Seed = 0) -> TimingResult:
    """The paper's two-sample KS: empirical times of ``traces`` against ``n_model`` seeded runs of ``chain``.

    ``outcome="success"`` (the paper's Alg. 2, SS14/SS15): successful data traces vs model runs that end in ⊕.
    ``outcome="any"`` (the artifact's library GoF, SS7/SS9/SS10/SS11): lengths of every absorbed data trace
    (censored dropped) vs every model run, a run still transient at ``max_steps`` recorded as ``max_steps``.
    ``start="modal"`` starts every model run in the most likely initial state (the artifact's ``s0_cluster``).
    ``pvalue="scipy"`` uses ``scipy.stats.ks_2samp``; ``"asymptotic"`` the Numerical Recipes series
    (:func:`kolmogorov_asymptotic_pvalue`). With tied integer times both p-values are conservative
    (Noether 1963).
    """
    if outcome not in ("success", "any"):
        raise ValueError(f"outcome must be 'success' or 'any', got {outcome!r}")
    if start not in ("pi0", "modal"):
        raise ValueError(f"start must be 'pi0' or 'modal', got {start!r}")
    if pvalue not in ("scipy", "asymptotic"):
        raise ValueError(f"pvalue must be 'scipy' or 'asymptotic', got {pvalue!r}")
    if n_model < 1 or max_steps < 1:
        raise ValueError("n_model and max_steps must be >= 1")
    times, _, n_usable = _data_times(traces, outcome)
    settings: dict[str, Any] = {"n_model": n_model, "outcome": outcome, "start": start, "pvalue": pvalue,
                                "max_steps": max_steps, "seed": seed_record(seed)}
    base = TimingResult("paper", None, None, outcome, int(times.size), n_usable, settings)
    if times.size == 0:
        return _with_undefined(base, "no " + ("successful" if outcome == "success" else "absorbed")
                               + " trace: nothing to compare")
    model_chain = chain if start == "pi0" else chain.with_changes(pi0=int(np.argmax(chain.pi0)))
    rng = np.random.default_rng(as_seed_sequence(seed))
    sim = model_chain.simulate(n_model, rng, max_steps=max_steps)
    ref = sim.length[sim.outcome == SUCCESS] if outcome == "success" else sim.length
    settings["n_model_times"] = int(ref.size)
    if ref.size == 0:
        return _with_undefined(base, f"no model run out of {n_model} reached success within {max_steps} steps")
    if pvalue == "scipy":
        from scipy.stats import ks_2samp

        res = ks_2samp(times, ref)
        d, p = float(res.statistic), float(res.pvalue)
    else:  # the statistic alone needs no scipy.stats (~1 CPU-s of imports in a protocol that takes less)
        d = ks_two_sample_statistic(times, ref)
        p = kolmogorov_asymptotic_pvalue(d, int(times.size), int(ref.size))
    return TimingResult("paper", d, p, outcome, int(times.size), n_usable, settings)


def ks_two_sample_statistic(a: NDArray[Any], b: NDArray[Any]) -> float:
    """D = sup_x |F_a(x) − F_b(x)| of two samples (right-continuous empirical CDFs), computed as
    ``scipy.stats.ks_2samp`` computes its statistic (on the 1/lcm grid of its exact mode up to 10,000 points) —
    the same operations, so the same bits (tested) — for the
    asymptotic p-value, which needs nothing else from scipy.stats."""
    a, b = np.sort(a), np.sort(b)
    both = np.concatenate([a, b])
    diffs = np.searchsorted(a, both, side="right") / a.shape[0] - np.searchsorted(b, both, side="right") / b.shape[0]
    lower = np.clip(-diffs[np.argmin(diffs)], 0, 1)
    upper = diffs[np.argmax(diffs)]
    d = float(lower if lower > upper else upper)
    n1, n2 = int(a.shape[0]), int(b.shape[0])
    if max(n1, n2) <= 10_000:  # ks_2samp's exact mode puts D on the 1/lcm(n1, n2) grid first
        lcm = (n1 // math.gcd(n1, n2)) * n2
        d = int(np.round(d * lcm)) * 1.0 / lcm
    return d


def timing_test(chain: AbsorbingChain, traces: TraceTable, *, mode: Literal["calibrated", "paper"] = "calibrated",
                **options: Any) -> TimingResult:
    """Dispatch to :func:`ks_calibrated` (default) or :func:`ks_paper` with ``options``."""
    if mode == "calibrated":
        return ks_calibrated(chain, traces, **options)
    if mode == "paper":
        return ks_paper(chain, traces, **options)
    raise ValueError(f"mode must be 'calibrated' or 'paper', got {mode!r}")
