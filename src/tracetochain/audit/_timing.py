"""Layer 1 of the certificate: Kolmogorov–Smirnov on success first-passage times (``paper-spec.md`` §4.1).

The first-passage time (FPT) of a completed trace is its number of steps (the step that enters ⊕ counts), so a
successful trace of L steps has τ⊕ = L. Two modes:

``"calibrated"`` (default; ``math.md`` §8.3–8.4)
    Statistic on the integer lattice, D = max_{k=0..kmax} |F_n(k) − F(k)|, with F(d) = R(d)/R∞ from the chain's
    forward sweep (F(d) = R(d)/R(cap) when the traces were cut at a step cap), kmax = the largest observed time.
    ``scipy.stats.ks_1samp`` is never used: on lattice data it evaluates F at the atom instead of its left limit and
    rejects a true null almost always (``math.md`` §8.2). The p-value is a parametric bootstrap: simulate corpora of
    the data's size from the chain (same π0, same cap), refit the chain by counting with the same estimator
    settings, recompute D against the refitted chain; p = (1 + #{D* ≥ D}) / (B + 1).
``"paper"``
    The authors' two-sample test: empirical FPTs against N seeded model FPTs (``scipy.stats.ks_2samp``, or the
    Numerical Recipes asymptotic series the artifact used in SS7/9/10/11), success-conditional or any-outcome,
    from π0 or from the modal start state, model runs capped at ``max_steps``.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from tracetochain.audit._common import (
    CENSORED,
    FAILURE,
    INVALID,
    REPLICATE_BLOCK,
    SUCCESS,
    Seed,
    as_seed_sequence,
    estimator_settings,
    fmt,
    html_table,
    json_dict,
    replicate_blocks,
    seed_record,
    trace_lengths,
)
from tracetochain.chain import AbsorbingChain, TransitionCounts, estimate_chain
from tracetochain.exceptions import ChainValidationError, UndefinedMetricError
from tracetochain.numerics import SimulatedTraces, simulate_traces
from tracetochain.traces import TraceTable

Refit = Literal["same", "train", "none"]
#: Step cap of simulated traces when the data were not capped (a trace still running after it counts as censored).
UNCAPPED_SIMULATION_STEPS = 10_000
#: Largest corpus one KS bootstrap replicate simulates; larger data are rescaled (see :func:`ks_calibrated`).
DEFAULT_MAX_SIMULATED_TRACES = 10_000


# ------------------------------------------------------------------------------------------------ formulas
def lattice_ks_statistic(times: NDArray[np.int64], cdf: NDArray[np.float64]) -> float:
    """D = max_{k=0..kmax} |F_n(k) − F(k)| for integer-valued data (``math.md`` §8.3, step 1).

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


def success_time_cdf(chain: AbsorbingChain, horizon: int, max_steps: int | None = None) -> NDArray[np.float64]:
    """F(d) for d = 0..horizon: the law of the success time among successful runs (``paper-spec.md`` §3.2).

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


def _reliability_at(chain: AbsorbingChain, d: int) -> float:
    """R(d) = R∞ − π0 Q^d h (``math.md`` §2: the tail is π_d · h), by repeated squaring for small chains."""
    if chain.n_states > _MATRIX_POWER_STATES:
        return float(chain.reliability(d)[d])
    tail = float(chain.pi0 @ np.linalg.matrix_power(chain.Q, d) @ chain.success_probabilities)
    return max(0.0, chain.r_inf - max(0.0, tail))


def kolmogorov_asymptotic_pvalue(statistic: float, n1: int, n2: int) -> float:
    """The Numerical Recipes two-sample KS p-value used by the artifact in SS7/9/10/11 (``paper-spec.md`` §4.1).

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
@dataclass(frozen=True)
class TimingResult:
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
        return (f"KS timing ({self.mode}) on {self.n_times} {what}: D = {fmt(self.statistic)}, "
                f"p = {fmt(self.p_value, 4)} ({how})")

    def __str__(self) -> str:
        return self.describe()

    def _repr_html_(self) -> str:
        rows = [("mode", self.mode), ("D", fmt(self.statistic)), ("p", fmt(self.p_value, 4)),
                ("times compared", str(self.n_times)), ("outcome", self.outcome)]
        rows += [(f"undefined: {k}", v) for k, v in self.undefined.items()]
        return html_table(rows, f"KS timing layer — {html.escape(self.mode)}")


# ------------------------------------------------------------------------------------------------ helpers
def _data_times(traces: TraceTable, outcome: str) -> tuple[NDArray[np.int64], NDArray[np.int8], int]:
    lengths = trace_lengths(traces)
    oc = traces.outcomes()
    n_usable = int(np.count_nonzero(oc != INVALID))
    if outcome == "success":
        return lengths[oc == SUCCESS], oc, n_usable
    return lengths[(oc == SUCCESS) | (oc == FAILURE)], oc, n_usable


@dataclass(frozen=True)
class _ReplicateCounts:
    transitions: NDArray[np.int64]  # (R, m, m)
    exits_success: NDArray[np.int64]  # (R, m)
    exits_failure: NDArray[np.int64]
    initial: NDArray[np.int64]
    outcomes: NDArray[np.int64]  # (R, 3): success, failure, censored


def replicate_counts(sim: SimulatedTraces, n_per_replicate: int, n_replicates: int, m: int) -> _ReplicateCounts:
    """Counting (``paper-spec.md`` §2.4) on simulated paths, for many replicates at once with ``np.bincount``.

    Traces ``r·n .. (r+1)·n − 1`` of ``sim`` form replicate r. Transitions are pairs of consecutive steps of one
    trace; a success/failure trace adds one exit from its last state; a censored one adds none.
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
    starts = sim.offsets[:-1]
    last = S[sim.offsets[1:] - 1]
    oc = sim.outcome.astype(np.int64)
    succ, fail = oc == SUCCESS, oc == FAILURE
    es = np.bincount(rep_of_trace[succ] * m + last[succ], minlength=n_replicates * m).reshape(n_replicates, m)
    ef = np.bincount(rep_of_trace[fail] * m + last[fail], minlength=n_replicates * m).reshape(n_replicates, m)
    init = np.bincount(rep_of_trace * m + S[starts], minlength=n_replicates * m).reshape(n_replicates, m)
    outc = np.bincount(rep_of_trace * 3 + oc, minlength=n_replicates * 3).reshape(n_replicates, 3)
    return _ReplicateCounts(trans, es, ef, init, outc)


def _refit(state_names: tuple[str, ...], rc: _ReplicateCounts, r: int, pseudocount: float, unvisited: str,
           initial: str) -> AbsorbingChain:
    counts = TransitionCounts(
        state_names, rc.transitions[r], rc.exits_success[r], rc.exits_failure[r], rc.initial[r],
        {"success": int(rc.outcomes[r, SUCCESS]), "failure": int(rc.outcomes[r, FAILURE]),
         "censored": int(rc.outcomes[r, CENSORED]), "invalid": 0})
    return estimate_chain(counts, pseudocount, unvisited, initial)  # type: ignore[arg-type]


def _stat_or_inf(times: NDArray[np.int64], chain: AbsorbingChain, cap: int | None) -> float:
    """D* of one replicate; +inf (counted as an exceedance, i.e. conservatively) when it is undefined."""
    if times.size == 0:
        return math.inf
    try:
        return lattice_ks_statistic(times, success_time_cdf(chain, int(times.max()), cap))
    except UndefinedMetricError:
        return math.inf


# ------------------------------------------------------------------------------------------------ calibrated
def ks_calibrated(chain: AbsorbingChain, traces: TraceTable, *, refit: Refit = "same",
                  n_fit_traces: int | None = None, n_bootstrap: int = 199, seed: Seed = 0,
                  max_steps: int | None = None, pseudocount: float | None = None, unvisited: str | None = None,
                  initial: str | None = None,
                  max_simulated_traces: int | None = DEFAULT_MAX_SIMULATED_TRACES) -> TimingResult:
    """Lattice KS of the success times of ``traces`` against ``chain`` with a parametric-bootstrap p-value.

    Parameters
    ----------
    chain : AbsorbingChain
        The fitted chain (its metadata supplies the refit settings unless given here).
    traces : TraceTable
        The traces whose success times are tested: the fit set itself (``refit="same"``) or held-out traces.
    refit : {"same", "train", "none"}, default "same"
        ``"same"``: the chain was fitted on ``traces``; each replicate simulates one corpus of the same size,
        refits on it and tests that corpus's successes against its own refit (``math.md`` §8.4).
        ``"train"``: held-out use; each replicate simulates a fit corpus of ``n_fit_traces`` traces, refits on it,
        and tests a fresh corpus of the test size against that refit (both sources of error of the real split).
        ``"none"``: the chain is fixed independently of the traces (Monte Carlo from the chain, ``math.md`` §8.3 4).
    n_fit_traces : int, optional
        Size of the fit set (required for ``refit="train"``).
    n_bootstrap : int, default 199
        B. 199 is enough for a 5% decision in CI; use 999 for reported p-values (the smallest possible p is
        1/(B + 1)).
    seed : int, default 0
        Replicates are simulated in blocks of 32 per ``SeedSequence(seed).spawn`` child (prefix-consistent in B).
    max_steps : int, optional
        The step cap the traces were cut at (traces still running are censored). Simulations apply the same cap and
        F becomes R(d)/R(cap). Default: no cap (simulations stop at 10,000 steps).
    pseudocount, unvisited, initial : optional
        Estimator settings of the refit; default: those recorded in ``chain.metadata``.
    max_simulated_traces : int or None, default 10,000
        Largest corpus a replicate simulates. Above it (n = max(test size, fit size) traces) every replicate
        simulates the corpora at the fraction r = max_simulated_traces / n of their sizes and its statistic is
        rescaled, D* · √(n_test,sim / n_test). Under the null √n·D has a non-degenerate limit law that does not depend
        on n (with estimated parameters, as in Lilliefors' test; the fit- and test-size errors both shrink as
        1/√size, and r keeps their ratio), so the rescaled replicates estimate the law of D at the data's size
        (``math.md`` §8.4). This makes the audit of millions of traces cost what 10,000 cost. None: never rescale.

    Notes
    -----
    Censored data traces are counted as censored (transitions, no exit) and are not success times. Without a cap
    the simulator produces no censoring, so heavy non-cap censoring in the data is not mimicked by the replicates.
    A replicate without successes, or whose refit has R∞ = 0 or no absorbing path, has no D*; it counts as D* ≥ D
    (conservative) and is reported in ``bootstrap["n_undefined"]``.
    """
    times, oc, n_usable = _data_times(traces, "success")
    lengths = trace_lengths(traces)[oc != INVALID]
    return ks_calibrated_times(chain, times, n_usable=n_usable, longest=int(lengths.max()) if lengths.size else 0,
                               refit=refit, n_fit_traces=n_fit_traces, n_bootstrap=n_bootstrap, seed=seed,
                               max_steps=max_steps, pseudocount=pseudocount, unvisited=unvisited, initial=initial,
                               max_simulated_traces=max_simulated_traces)


def ks_calibrated_times(chain: AbsorbingChain, times: NDArray[np.int64], *, n_usable: int, longest: int,
                        refit: Refit = "same", n_fit_traces: int | None = None, n_bootstrap: int = 199,
                        seed: Seed = 0, max_steps: int | None = None, pseudocount: float | None = None,
                        unvisited: str | None = None, initial: str | None = None,
                        max_simulated_traces: int | None = DEFAULT_MAX_SIMULATED_TRACES) -> TimingResult:
    """:func:`ks_calibrated` on the data's summary rather than its traces: the success times ``times`` (one per
    successful trace), the number of usable (non-invalid) traces ``n_usable`` and the longest usable trace
    ``longest`` (checked against ``max_steps``). This is what a partitioned corpus provides
    (:func:`tracetochain.partitioned.audit_partitioned`); the result is the same as on the traces themselves.
    """
    if refit not in ("same", "train", "none"):
        raise ValueError(f"refit must be 'same', 'train' or 'none', got {refit!r}")
    if max_simulated_traces is not None and max_simulated_traces < 1:
        raise ValueError(f"max_simulated_traces must be >= 1 or None, got {max_simulated_traces}")
    if n_bootstrap < 1:
        raise ValueError(f"n_bootstrap must be >= 1, got {n_bootstrap}")
    if max_steps is not None and max_steps < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps}")
    a, u, init_policy = estimator_settings(chain, pseudocount, unvisited, initial)
    times = np.asarray(times, dtype=np.int64)
    if max_steps is not None and longest > max_steps:
        raise ValueError(f"a trace has {longest} steps, more than max_steps={max_steps}; pass the cap "
                         "the traces were actually cut at")
    if refit == "train":
        if n_fit_traces is None or n_fit_traces < 1:
            raise ValueError("refit='train' needs n_fit_traces (the number of traces the chain was fitted on)")
    # Replicate sizes: the data's, or the same fraction r of both corpora when they exceed max_simulated_traces.
    n_test = n_usable
    n_fit = int(n_fit_traces) if refit == "train" and n_fit_traces is not None else n_test
    largest = max(n_test, n_fit if refit == "train" else 0)
    if max_simulated_traces is not None and largest > max_simulated_traces:
        frac = max_simulated_traces / largest
        n_test_sim, n_fit_sim = max(1, round(n_test * frac)), max(1, round(n_fit * frac))
    else:
        n_test_sim, n_fit_sim = n_test, n_fit
    scale = math.sqrt(n_test_sim / n_test) if n_test else 1.0
    settings: dict[str, Any] = {
        "n_bootstrap": n_bootstrap, "seed": seed_record(seed), "refit": refit, "max_steps": max_steps,
        "n_fit_traces": n_fit_traces if refit == "train" else (n_usable if refit == "same" else None),
        "pseudocount": a, "unvisited": u, "initial": init_policy, "replicate_block": REPLICATE_BLOCK,
        "statistic": "lattice sup |F_n(k) - R(k)/R_inf|, k = 0..max time",
        "max_simulated_traces": max_simulated_traces,
        "simulated_traces": {"test": n_test_sim, "fit": n_fit_sim if refit == "train" else None,
                             "d_star_scale": scale},
    }
    base = TimingResult("calibrated", None, None, "success", int(times.size), n_usable, settings)
    if times.size == 0:
        return _with_undefined(base, "no successful trace: there are no success times to test")
    try:
        model = success_time_cdf(chain, int(times.max()), max_steps)
    except UndefinedMetricError as exc:
        return _with_undefined(base, str(exc))
    d_obs = lattice_ks_statistic(times, model)
    emp = np.cumsum(np.bincount(times, minlength=int(times.max()) + 1)) / times.size

    cap = max_steps if max_steps is not None else UNCAPPED_SIMULATION_STEPS
    m = chain.n_states
    names = chain.state_names
    Q, rs, rf, pi0 = chain.Q, chain.R_success, chain.R_failure, chain.pi0
    n_rep = n_test_sim  # traces per simulated test corpus
    d_star = np.empty(n_bootstrap)
    for first, count, rng in replicate_blocks(as_seed_sequence(seed), n_bootstrap):
        if refit == "same":
            sim = simulate_traces(Q, rs, rf, pi0, REPLICATE_BLOCK * n_rep, rng, max_steps=cap, record_paths=True)
            rc = replicate_counts(sim, n_rep, REPLICATE_BLOCK, m)
            test_sim = sim
        elif refit == "train":
            fit_sim = simulate_traces(Q, rs, rf, pi0, REPLICATE_BLOCK * n_fit_sim, rng, max_steps=cap,
                                      record_paths=True)
            rc = replicate_counts(fit_sim, n_fit_sim, REPLICATE_BLOCK, m)
            test_sim = simulate_traces(Q, rs, rf, pi0, REPLICATE_BLOCK * n_rep, rng, max_steps=cap)
        else:
            test_sim = simulate_traces(Q, rs, rf, pi0, REPLICATE_BLOCK * n_rep, rng, max_steps=cap)
        if refit == "none":
            done = test_sim.outcome == SUCCESS
            top = int(test_sim.length[done].max()) if done.any() else 1
            fixed_cdf = success_time_cdf(chain, top, max_steps)
        for r in range(count):
            sl = slice(r * n_rep, (r + 1) * n_rep)
            x = test_sim.length[sl][test_sim.outcome[sl] == SUCCESS]
            if refit == "none":
                d_star[first + r] = lattice_ks_statistic(x, fixed_cdf) if x.size else math.inf
                continue
            try:
                refitted = _refit(names, rc, r, a, u, init_policy)
            except ChainValidationError:
                d_star[first + r] = math.inf
                continue
            d_star[first + r] = _stat_or_inf(x, refitted, max_steps)
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
    return TimingResult("calibrated", d_obs, p, "success", int(times.size), n_usable, settings, boot,
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
    (``math.md`` §8.2).
    """
    from scipy.stats import ks_2samp

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
    res = ks_2samp(times, ref)
    d = float(res.statistic)
    p = float(res.pvalue) if pvalue == "scipy" else kolmogorov_asymptotic_pvalue(d, int(times.size), int(ref.size))
    return TimingResult("paper", d, p, outcome, int(times.size), n_usable, settings)


def timing_test(chain: AbsorbingChain, traces: TraceTable, *, mode: Literal["calibrated", "paper"] = "calibrated",
                **options: Any) -> TimingResult:
    """Dispatch to :func:`ks_calibrated` (default) or :func:`ks_paper` with ``options``."""
    if mode == "calibrated":
        return ks_calibrated(chain, traces, **options)
    if mode == "paper":
        return ks_paper(chain, traces, **options)
    raise ValueError(f"mode must be 'calibrated' or 'paper', got {mode!r}")
