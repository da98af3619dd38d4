"""Held-out protocol (Tran-Truong & Le 2026, study SS9): split before featurization, fit on one half, audit the other.

* :func:`split_traces` — seeded split by trace or by task, done on the raw traces (before any state discovery).
  ``perm = default_rng(seed).permutation(n)``; the first ⌊n(1 − f)⌋ go to the fit half, the rest to the test half
  (this reproduces the artifact's SS14 split: seed 20260606 → 239 fit / 240 test, held-out pass rate 0.6833).
* :func:`empirical_rdc` — R̂(d) = #{test traces that succeeded within d steps} / #{all test traces}; failed and
  censored traces stay in the denominator (as in the paper's SS9; conservative).
* :func:`r_inf_check` — R∞ against the pass rate of the same traces with a Wilson or Clopper–Pearson interval.
* :func:`holdout_audit` — everything above plus the two certificate layers: the KS timing layer on the test half
  (p-value by a parametric bootstrap that re-simulates both halves and refits on the simulated fit half) and the
  Markov-order layer on the fit half.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pyarrow.compute as pc
from numpy.typing import NDArray

from tracetochain._display import Display, ResultDisplay, Table, fmt_number
from tracetochain._outcome import INVALID, SUCCESS
from tracetochain.audit._common import as_seed_sequence, json_dict, trace_lengths
from tracetochain.audit._order import OrderResult
from tracetochain.audit._settings import OrderSettings, TimingSettings
from tracetochain.audit._timing import TimingResult
from tracetochain.chain import AbsorbingChain
from tracetochain.exceptions import EmptyTraceSetError
from tracetochain.traces import TraceTable

SplitBy = Literal["trace", "task"]
IntervalMethod = Literal["wilson", "clopper-pearson"]


# ------------------------------------------------------------------------------------------------ split
def split_indices(traces: TraceTable, test_fraction: float = 0.5, *, by: SplitBy = "trace",
                  seed: int = 0) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Trace indices (table order) of the fit and test halves; see :func:`split_traces`."""
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction!r}")
    if by not in ("trace", "task"):
        raise ValueError(f"by must be 'trace' or 'task', got {by!r}")
    n = traces.n_traces
    if by == "trace":
        group = np.arange(n, dtype=np.int64)
    else:
        task = traces.trace_column("task_id")
        if n and task.null_count == n:
            raise ValueError("by='task' needs a task_id on the traces; use by='trace'")
        # Traces without a task are their own group (codes after the tasks, in table order).
        enc = pc.dictionary_encode(task)
        group = np.asarray(enc.indices.fill_null(-1), dtype=np.int64).copy()
        null = group < 0
        group[null] = len(enc.dictionary) + np.arange(int(null.sum()))
    n_groups = int(group.max()) + 1 if n else 0
    n_fit_groups = math.floor(n_groups * (1.0 - test_fraction) + 1e-9)
    if n_fit_groups < 1 or n_fit_groups >= n_groups:
        raise ValueError(f"cannot split {n_groups} {by}(s) with test_fraction={test_fraction}: one half would be "
                         "empty")
    perm = np.random.default_rng(seed).permutation(n_groups)
    fit_group = np.zeros(n_groups, dtype=bool)
    fit_group[perm[:n_fit_groups]] = True
    in_fit = fit_group[group]
    return np.flatnonzero(in_fit).astype(np.int64), np.flatnonzero(~in_fit).astype(np.int64)


def split_traces(traces: TraceTable, test_fraction: float = 0.5, *, by: SplitBy = "trace",
                 seed: int = 0) -> tuple[TraceTable, TraceTable]:
    """Split raw traces into (fit, test) halves **before** any featurization or state discovery.

    ``by="trace"`` permutes traces; ``by="task"`` permutes tasks (``task_id``) so all trials of a task land in the
    same half (traces without a task id are their own group). With n units and fraction f, the first ⌊n(1 − f)⌋
    units of ``default_rng(seed).permutation(n)`` form the fit half. Both halves keep the table order.

    >>> import tracetochain as tt
    >>> t = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 10, seed=1)
    >>> fit, test = split_traces(t, 0.3, seed=0)
    >>> fit.n_traces, test.n_traces
    (7, 3)
    """
    fit_idx, test_idx = split_indices(traces, test_fraction, by=by, seed=seed)
    return traces.select_traces(fit_idx), traces.select_traces(test_idx)


# ------------------------------------------------------------------------------------------------ RDC
def empirical_rdc(traces: TraceTable, horizon: int) -> NDArray[np.float64]:
    """R̂(d) for d = 0..horizon: successes within d steps over **all** (non-invalid) traces (as in the paper's SS9).

    Raises :class:`EmptyTraceSetError` when no trace is usable (:func:`tracetochain.metrics.empirical_rdc` gives
    zeros instead); both are :func:`tracetochain.numerics.empirical.empirical_rdc_from_counts`.
    """
    from tracetochain.numerics.empirical import empirical_rdc_from_counts

    if horizon < 0:
        raise ValueError(f"horizon must be >= 0, got {horizon}")
    oc = traces.outcomes()
    n = int(np.count_nonzero(oc != INVALID))
    if n == 0:
        raise EmptyTraceSetError("no usable traces for the empirical RDC")
    return empirical_rdc_from_counts(np.bincount(trace_lengths(traces)[oc == SUCCESS], minlength=1), n, horizon)


def l_inf_distance(model: NDArray[np.float64], empirical: NDArray[np.float64]) -> float:
    """L∞ = max_d |R(d; M̂) − R̂(d)| over the common horizon (the RDC distance of Tran-Truong & Le 2026, SS9)."""
    return float(np.max(np.abs(np.asarray(model) - np.asarray(empirical))))


# ------------------------------------------------------------------------------------------------ intervals
def wilson_interval(successes: float, n: float, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion: (p̂ + z²/2n ± z√(p̂(1−p̂)/n + z²/4n²)) / (1 + z²/n).

    ``successes`` may be fractional (p̂ = successes / n of an estimate that behaves like a proportion of n trials).

    >>> [round(x, 4) for x in wilson_interval(84, 200)]
    [0.3537, 0.4893]
    """
    from scipy.special import ndtri  # norm.ppf's own routine, bit for bit, without importing scipy.stats (~1 s)

    if n <= 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n and n > 0, got {successes}/{n}")
    z = float(ndtri(0.5 + confidence / 2.0))
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def clopper_pearson_interval(successes: float, n: float, confidence: float = 0.95) -> tuple[float, float]:
    """Exact (Clopper–Pearson) interval from Beta quantiles: [B(α/2; x, n−x+1), B(1−α/2; x+1, n−x)]."""
    from scipy.special import betaincinv  # beta.ppf's own routine (Boost), bit for bit, without scipy.stats

    if n <= 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n and n > 0, got {successes}/{n}")
    a = 1.0 - confidence
    lo = 0.0 if successes == 0 else float(betaincinv(successes, n - successes + 1, a / 2))
    hi = 1.0 if successes == n else float(betaincinv(successes + 1, n - successes, 1 - a / 2))
    return lo, hi


def jeffreys_interval(successes: float, n: float, confidence: float = 0.95) -> tuple[float, float]:
    """Jeffreys interval for a binomial proportion: the equal-tailed quantiles of Beta(x + ½, n − x + ½), with the
    lower limit 0 at x = 0 and the upper limit 1 at x = n (Brown, Cai & DasGupta 2001, §4.1.2); n = 0 gives the
    prior's own interval.

    >>> [round(x, 4) for x in jeffreys_interval(40, 40)]
    [0.9395, 1.0]
    """
    from scipy.special import betaincinv  # beta.ppf's own routine (Boost), bit for bit, without scipy.stats

    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, got {successes}/{n}")
    a = 1.0 - confidence
    lo = 0.0 if successes == 0 and n > 0 else float(betaincinv(successes + 0.5, n - successes + 0.5, a / 2))
    hi = 1.0 if successes == n and n > 0 else float(betaincinv(successes + 0.5, n - successes + 0.5, 1 - a / 2))
    return lo, hi


@dataclass(frozen=True, repr=False)
class RInfCheck(ResultDisplay):
    """R∞ against the pass rate of the held-out (or, in-sample, the fit) traces, with an interval for the rate.

    Held out (``n_fit`` given), R∞ is itself an estimate from the fit half, as noisy as a pass rate of ``n_fit``
    traces (with π0 empirical it nearly is the fit half's pass rate). Asking only whether R∞ falls in the
    held-out rate's interval ignores that noise and fails for about one sound chain in five at a 50/50 split
    (measured: 20% on SS7 null corpora of 600 traces). So ``holds`` iff 0 lies in the interval of the difference
    R∞ − pass rate built from both sides' intervals (MOVER, the square-and-add construction of Newcombe 1998 /
    Zou & Donner 2008: L = δ − √((R∞ − l₁)² + (u₂ − p̂)²), U = δ + √((u₁ − R∞)² + (p̂ − l₂)²), with (l₁, u₁) the
    Wilson interval of R∞ at n_fit and (l₂, u₂) ``method``'s interval of the held-out rate). In-sample, or without
    ``n_fit`` (the paper's rule), ``holds`` iff R∞ lies in [lower, upper]; in-sample the check is weak evidence:
    with π0 empirical, no censoring and pseudocount 0 it is an identity.
    """

    r_inf: float
    pass_rate: float
    successes: int
    n: int
    lower: float
    upper: float
    method: str
    confidence: float
    in_sample: bool
    n_fit: int | None = None
    difference_lower: float | None = None
    difference_upper: float | None = None
    p_value: float | None = None
    r_observable: float | None = None
    #: Kish's design effect the difference interval was widened by (1: traces independent).
    design_effect: float = 1.0

    @property
    def compared(self) -> float:
        """The model value compared with the pass rate: R∞, or under censoring the probability of a success that
        the traces' censoring lets one observe (``_censoring``)."""
        return self.r_inf if self.r_observable is None else self.r_observable

    @property
    def holds(self) -> bool:
        if self.difference_lower is not None and self.difference_upper is not None:
            return self.difference_lower <= 0.0 <= self.difference_upper
        return self.lower <= self.r_inf <= self.upper

    @property
    def abs_error(self) -> float:
        return abs(self.r_inf - self.pass_rate)

    def to_dict(self) -> dict[str, Any]:
        return json_dict({"r_inf": self.r_inf, "r_observable": self.r_observable, "p_value": self.p_value,
                          "pass_rate": self.pass_rate, "successes": self.successes,
                          "n": self.n, "interval": [self.lower, self.upper], "method": self.method,
                          "confidence": self.confidence, "in_sample": self.in_sample, "holds": self.holds,
                          "abs_error": self.abs_error, "n_fit": self.n_fit, "design_effect": self.design_effect,
                          "difference_interval": ([self.difference_lower, self.difference_upper]
                                                  if self.difference_lower is not None else None),
                          "rule": ("0 in the MOVER interval of R_inf - pass rate" if self.difference_lower is not None
                                   else "R_inf in the pass rate's interval")})

    def describe(self) -> str:
        where = "in-sample" if self.in_sample else "held-out"
        model = (f"R∞ = {fmt_number(self.r_inf)}" if self.r_observable is None else
                 f"R∞ = {fmt_number(self.r_inf)} (observable under the censoring: {fmt_number(self.r_observable)})")
        text = (f"{model} vs {where} pass rate {fmt_number(self.pass_rate)} ({self.successes}/{self.n}; "
                f"{self.confidence:.0%} {self.method} [{fmt_number(self.lower)}, {fmt_number(self.upper)}])")
        if self.difference_lower is not None and self.difference_upper is not None:
            return (text + f"; difference {self.r_inf - self.pass_rate:+.3f}, {self.confidence:.0%} interval "
                    f"[{self.difference_lower:+.3f}, {self.difference_upper:+.3f}] with R∞ from {self.n_fit} fit "
                    "traces" + (f", widened by the design effect {self.design_effect:.2f}" if self.design_effect > 1
                                else "")
                    + (f", p = {fmt_number(self.p_value, 4)}" if self.p_value is not None else "") + ": "
                    + ("consistent" if self.holds else "INCONSISTENT"))
        return text + ": " + ("inside" if self.holds else "OUTSIDE")

    def __str__(self) -> str:
        return self.describe()

    def _display(self) -> Display:
        fields: tuple[tuple[str, Any], ...] = (
            ("R∞", self.r_inf), ("R∞ observable under the censoring", self.r_observable),
            ("pass rate", self.pass_rate), ("successes", self.successes), ("traces", self.n),
            ("pass rate lower", self.lower), ("pass rate upper", self.upper),
            ("difference lower", self.difference_lower), ("difference upper", self.difference_upper),
            ("design effect", self.design_effect), ("p-value", self.p_value), ("holds", self.holds))
        where = "in-sample" if self.in_sample else "held-out"
        return Display(f"{'consistent' if self.holds else 'inconsistent'} ({where}, {self.confidence:.0%} "
                       f"{self.method})", kind="R∞ check", lines=(self.describe(),), fields=fields)


def r_inf_check(r_inf: float, traces: TraceTable, *, method: IntervalMethod = "wilson", confidence: float = 0.95,
                in_sample: bool = False, n_fit: int | None = None) -> RInfCheck:
    """Compare R∞ with the pass rate of ``traces`` (successes over non-invalid traces); ``n_fit`` (the usable traces
    R∞ was fitted on, held-out use) makes the check account for R∞'s own noise (:class:`RInfCheck`)."""
    if method not in ("wilson", "clopper-pearson"):
        raise ValueError(f"interval must be 'wilson' or 'clopper-pearson', got {method!r}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    oc = traces.outcomes()
    n = int(np.count_nonzero(oc != INVALID))
    k = int(np.count_nonzero(oc == SUCCESS))
    return r_inf_check_counts(r_inf, k, n, method=method, confidence=confidence, in_sample=in_sample, n_fit=n_fit)


def r_inf_check_counts(r_inf: float, n_success: int, n_usable: int, *, method: IntervalMethod = "wilson",
                       confidence: float = 0.95, in_sample: bool = False, n_fit: int | None = None,
                       r_observable: float | None = None, design_effect: float = 1.0) -> RInfCheck:
    """:func:`r_inf_check` from the number of successful and of usable (non-invalid) traces.

    ``r_observable``: under censoring, the chain's probability of a success the traces' censoring lets one observe
    (``_censoring``); it replaces R∞ in the comparison. Held out (``n_fit`` given), the result carries the p-value of
    "R∞ and the held-out rate agree": the 1 − confidence at which 0 reaches the MOVER interval's edge
    (:func:`mover_p_value`).

    ``design_effect`` d ≥ 1 (Kish): when the halves are split by task and tasks differ, each half's pass rate varies
    d times more than a binomial one, so both sides enter the MOVER interval with their effective sizes n/d
    (successes k/d): without it the check rejects sound chains far above its level (measured: 28 % at 5 % with
    d ≈ 2.3).
    """
    if not math.isfinite(design_effect) or design_effect < 1.0:
        raise ValueError(f"design_effect must be a finite number >= 1, got {design_effect!r}")
    if method not in ("wilson", "clopper-pearson"):
        raise ValueError(f"interval must be 'wilson' or 'clopper-pearson', got {method!r}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    k, n = int(n_success), int(n_usable)
    if n == 0:
        raise EmptyTraceSetError("no usable traces to compare R∞ with")
    lo, hi = (wilson_interval if method == "wilson" else clopper_pearson_interval)(k, n, confidence)
    obs = None if r_observable is None else float(r_observable)
    compared = float(r_inf) if obs is None else obs
    if n_fit is None or in_sample:
        return RInfCheck(float(r_inf), k / n, k, n, lo, hi, method, confidence, in_sample, r_observable=obs)
    if n_fit < 1:
        raise ValueError(f"n_fit must be >= 1, got {n_fit}")
    d = float(design_effect)
    d_lo, d_hi = _mover(compared, int(n_fit) / d, k / d, n / d, method, confidence)
    return RInfCheck(float(r_inf), k / n, k, n, lo, hi, method, confidence, in_sample, int(n_fit), d_lo, d_hi,
                     mover_p_value(compared, int(n_fit) / d, k / d, n / d, method), obs, d)


def _mover(r_inf: float, n_fit: float, k: float, n: float, method: str, confidence: float) -> tuple[float, float]:
    """MOVER interval of R∞ − k/n (Newcombe 1998; Zou & Donner 2008), R∞ as a rate of ``n_fit`` traces (sizes may
    be effective ones, n / design effect)."""
    r = min(1.0, max(0.0, float(r_inf)))
    l1, u1 = wilson_interval(r * n_fit, n_fit, confidence)
    lo, hi = (wilson_interval if method == "wilson" else clopper_pearson_interval)(k, n, confidence)
    p = k / n
    d = r - p
    return d - math.sqrt((r - l1) ** 2 + (hi - p) ** 2), d + math.sqrt((u1 - r) ** 2 + (p - lo) ** 2)


def mover_p_value(r_inf: float, n_fit: float, k: float, n: float, method: IntervalMethod = "wilson") -> float:
    """The p-value of the held-out R∞ check: 1 − γ* for the level γ* at which 0 lies on the edge of the MOVER interval
    of R∞ − k/n (the interval widens with γ, so γ* is found by bisection). 1 when R∞ = k/n exactly.

    >>> round(mover_p_value(0.5, 100, 50, 100), 3), round(mover_p_value(0.55, 200, 40, 100), 4)
    (1.0, 0.0142)
    >>> mover_p_value(0.7, 200, 40, 100) < 1e-6   # a gap of 0.3 between two rates of 200 and 100 traces
    True
    """
    r = min(1.0, max(0.0, float(r_inf)))
    if abs(r - k / n) < 1e-15:
        return 1.0

    def excludes(gamma: float) -> bool:
        d_lo, d_hi = _mover(r, n_fit, k, n, method, gamma)
        return d_lo > 0.0 or d_hi < 0.0

    lo, hi = 1e-9, 1.0 - 1e-12
    if not excludes(lo):
        return 1.0
    if excludes(hi):
        return 1e-12
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if excludes(mid):
            lo = mid
        else:
            hi = mid
    return float(1.0 - 0.5 * (lo + hi))


# ------------------------------------------------------------------------------------------------ states
def fit_states_and_chain(train: TraceTable, states: Any = "label", *, pseudocount: float | None = None,
                         unvisited: str = "auto", initial: str = "empirical",
                         state_options: dict[str, Any] | None = None) -> tuple[AbsorbingChain, Any, TraceTable]:
    """Discover states on ``train`` and fit the chain: returns (chain, state model, labelled train).

    ``states``: a spec string for :func:`~tracetochain.states.states_from_spec` (``"label"``, ``"categorical"``,
    ``"ward"`` …, with ``state_options``), a state estimator (``fit(traces).fetch_model()``), an already fitted
    state model (``predict`` + ``state_names``), or a callable ``train -> state model``.
    """
    from tracetochain.pipeline import fit_chain, fit_chain_over_states

    opts = dict(state_options or {})
    if isinstance(states, str) or hasattr(states, "fit"):
        res = fit_chain(train, states=states, pseudocount=pseudocount, unvisited=unvisited, initial=initial,
                        **opts)
        return res.chain, res.states, res.labelled
    model = states if hasattr(states, "predict") and hasattr(states, "state_names") else None
    if model is None:
        if not callable(states):
            raise TypeError("states must be a spec string, a state estimator, a fitted state model or a callable "
                            f"returning one; got {type(states).__name__}")
        model = states(train)
    labelled, _ = label_traces(model, train)
    chain = fit_chain_over_states(model, labelled, pseudocount=pseudocount, unvisited=unvisited, initial=initial)
    return chain, model, labelled


def label_traces(state_model: Any, traces: TraceTable) -> tuple[TraceTable, NDArray[np.bool_]]:
    """Label ``traces`` with a fitted state model; traces with a step it cannot place are dropped.

    Returns the labelled kept traces and the kept-trace mask. A step cannot be placed when its category or label
    was never seen when the states were fitted (e.g. a held-out step in a category absent from the fit half).
    """
    names = tuple(state_model.state_names)
    try:
        codes = np.asarray(state_model.predict(traces), dtype=np.int64)
    except ValueError:
        if getattr(state_model, "method", None) != "categorical":
            raise
        # Label-based categorical states raise on unseen labels: place what is known, mark the rest.
        raw, raw_names = traces.state_labels()
        lookup = {n: i for i, n in enumerate(names)}
        codes = np.array([lookup.get(x, -1) for x in raw_names], np.int64)[raw] if raw.size else raw
    bad_step = (codes < 0) | (codes >= len(names))
    keep = np.ones(traces.n_traces, dtype=bool)
    if bad_step.any():
        keep[np.unique(traces.trace_index[bad_step])] = False
        kept = traces.select_traces(keep)
        return kept.with_states(codes[keep[traces.trace_index]], names), keep
    return traces.with_states(codes, names), keep


# ------------------------------------------------------------------------------------------------ result
@dataclass(frozen=True, eq=False, repr=False)
class HoldoutResult(ResultDisplay):
    """Everything the held-out protocol measured. ``chain``/``state_model`` were fitted on the fit half only."""

    chain: AbsorbingChain
    state_model: Any
    train: TraceTable
    test: TraceTable
    split: dict[str, Any]
    horizon: int
    model_rdc: tuple[float, ...]
    empirical_rdc: tuple[float, ...]
    l_inf: float
    r_inf_check: RInfCheck
    timing: TimingResult
    order: OrderResult
    settings: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return json_dict({
            "split": self.split, "horizon": self.horizon, "l_inf": self.l_inf,
            "model_rdc": list(self.model_rdc), "empirical_rdc": list(self.empirical_rdc),
            "r_inf_check": self.r_inf_check.to_dict(), "timing": self.timing.to_dict(),
            "order": self.order.to_dict(), "settings": self.settings,
            "chain": {"n_states": self.chain.n_states, "state_names": list(self.chain.state_names),
                      "r_inf": self.chain.r_inf},
        })

    def describe(self) -> str:
        s = self.split
        return "\n".join([
            f"held-out split by {s['by']} (seed {s['seed']}): {s['n_train']} fit / {s['n_test']} test traces"
            + (f" ({s['n_test_dropped']} test traces dropped: unseen states)" if s.get("n_test_dropped") else ""),
            f"L∞(R(d), held-out RDC) over d = 0..{self.horizon}: {fmt_number(self.l_inf)}",
            self.r_inf_check.describe(), self.timing.describe(), self.order.describe(),
        ])

    def __str__(self) -> str:
        return self.describe()

    def _display(self) -> Display:
        lines = self.describe().splitlines()
        rdc = tuple((d, m, e) for d, (m, e) in enumerate(zip(self.model_rdc, self.empirical_rdc, strict=False)))
        return Display(lines[0], kind="Held-out audit", lines=tuple(lines[1:]),
                       tables=(Table("rdc", ("d", "model", "empirical"), rdc, shown=False),))


def holdout_audit(traces: TraceTable, *, states: Any = "label", pseudocount: float | None = None,
                  unvisited: str = "auto", initial: str = "empirical", test_fraction: float = 0.5,
                  by: SplitBy = "trace", seed: int = 0, horizon: int | None = None,
                  interval: IntervalMethod = "wilson", confidence: float = 0.95,
                  timing: TimingSettings | None = None, order: OrderSettings | None = None,
                  state_options: dict[str, Any] | None = None) -> HoldoutResult:
    """Split, fit states and chain on the fit half, label the test half with the fitted state model, and audit.

    Parameters
    ----------
    traces : TraceTable
        Raw traces (the split happens before any featurization).
    states : str, state estimator, fitted state model or callable, default "label"
        See :func:`fit_states_and_chain`; ``state_options`` are passed to the spec (features, vocabulary, k range).
    pseudocount, unvisited, initial
        Chain-estimator settings (:class:`~tracetochain.ChainEstimator`).
    test_fraction, by, seed
        The split (:func:`split_traces`). ``seed`` also seeds the KS bootstrap and the permutation test (through
        ``SeedSequence(seed).spawn``).
    horizon : int, optional
        D of the L∞ comparison over d ∈ [0, D]; default: the longest held-out trace.
    interval, confidence
        The interval of the held-out pass rate for the R∞ check.
    timing, order : TimingSettings, OrderSettings, optional
        Layer settings. The timing layer runs on the test half (calibrated mode: refit on re-simulated fit halves);
        the order layer on the fit half.
    """
    timing = timing or TimingSettings()
    order = order or OrderSettings()
    fit_idx, test_idx = split_indices(traces, test_fraction, by=by, seed=seed)
    train_raw, test_raw = traces.select_traces(fit_idx), traces.select_traces(test_idx)
    chain, model, train = fit_states_and_chain(train_raw, states, pseudocount=pseudocount, unvisited=unvisited,
                                               initial=initial, state_options=state_options)
    test, kept = label_traces(model, test_raw)
    n_test_dropped = int(np.count_nonzero(~kept))
    if test.n_traces == 0 or not np.any(test.outcomes() != INVALID):
        raise EmptyTraceSetError("no held-out trace could be labelled with the fitted states")
    ks_seed, order_seed, _ = as_seed_sequence(seed).spawn(3)
    lengths = trace_lengths(test)[test.outcomes() != INVALID]
    D = int(lengths.max()) if horizon is None else int(horizon)
    model_rdc = chain.reliability(D)
    emp_rdc = empirical_rdc(test, D)
    n_fit_usable = int(np.count_nonzero(train.outcomes() != INVALID))
    timing_res = timing.run(chain, test, seed=ks_seed, refit="train", fit_traces=train)
    order_res = order.run(train, chain, seed=order_seed)
    split = {"by": by, "test_fraction": test_fraction, "seed": seed, "n_train": int(fit_idx.size),
             "n_test": int(test_idx.size), "n_test_dropped": n_test_dropped,
             "fit_indices": fit_idx.tolist(), "test_indices": test_idx.tolist()}
    settings = {"states": _describe_states(states), "pseudocount": pseudocount, "unvisited": unvisited,
                "initial": initial, "horizon": D, "interval": interval, "confidence": confidence,
                "timing": timing.to_dict(), "order": order.to_dict(),
                "seeds": {"split": seed, "timing": f"SeedSequence({seed}).spawn(3)[0]",
                          "order": f"SeedSequence({seed}).spawn(3)[1]"}}
    return HoldoutResult(chain, model, train, test, split, D, tuple(float(x) for x in model_rdc),
                         tuple(float(x) for x in emp_rdc), l_inf_distance(model_rdc, emp_rdc),
                         r_inf_check(chain.r_inf, test, method=interval, confidence=confidence, n_fit=n_fit_usable),
                         timing_res, order_res, settings)


def _describe_states(states: Any) -> str:
    if isinstance(states, str):
        return states
    if callable(states) and not hasattr(states, "fit") and not hasattr(states, "predict"):
        return f"callable {getattr(states, '__name__', type(states).__name__)}"
    return type(states).__name__
