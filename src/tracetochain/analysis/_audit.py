"""The certificate of a corpus from its summary: every layer computed from sufficient statistics.

The held-out layers (R∞ check, timing) run on each of the summary's random splits — the chain is re-estimated from
the split's fit half and checked on its held-out half — and their p-values are combined across the splits (Cauchy
combination, ``audit._combine``); the order layer and the trials layer run once on all traces (they are calibrated
in-sample: a within-context permutation test and an exact dispersion test). Each layer first checks that it has the
data it needs; if not it reports **insufficient evidence** and how many usable traces it would need:

* R∞ check: ``MIN_HALF`` usable traces in each half (on average over the splits);
* timing: ``MIN_TIMES`` successful traces in the held-out half;
* order: ``MIN_ORDER_OBSERVATIONS`` observations (consecutive step pairs with a predecessor, outcomes included);
* trials: ``MIN_REPEATED_TRACES`` traces in tasks tried at least twice, and both outcomes among them.

These are the smallest samples at which the tests mean something, not power guarantees; the README's study
measures power.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from tracetochain._display import fmt_number
from tracetochain._outcome import CENSORED, SUCCESS
from tracetochain._progress import counted, phase_reporter
from tracetochain.analysis._intervals import design_effect
from tracetochain.analysis._summary import FIT, TEST, CorpusSummary
from tracetochain.audit import Certificate, LayerResult, RInfCheck, TimingResult
from tracetochain.audit.shared import (
    DEFAULT_MAX_SIMULATED_TRACES,
    MIN_REPEATED_TRACES,
    SpeedResult,
    build_certificate,
    cap_survival,
    cauchy_combination,
    censoring_survival,
    ks_calibrated_counts,
    l_inf_distance,
    observed_success_pmf,
    order_test_counts,
    r_inf_check_counts,
    speed_heterogeneity_test,
    trials_check_table,
)
from tracetochain.chain import AbsorbingChain, ChainPrior, estimate_chain
from tracetochain.exceptions import ChainValidationError

MIN_HALF = 20
MIN_TIMES = 20
MIN_ORDER_OBSERVATIONS = 100


@dataclass(frozen=True)
class AuditSettings:
    """How the certificate is computed.

    Parameters
    ----------
    level : float, default 0.05
        Family-wise level: the chance that a chain that fits loses any output.
    holdout : bool, default True
        Held-out layers (repeated random splits) or everything in-sample (the R∞ check is then close to an
        identity, weak evidence).
    n_bootstrap : int, default 199
        Parametric-bootstrap replicates of the KS timing test, per split.
    n_permutations : int, default 199
        Permutation tables of the order test.
    trials_permutations : int, default 999
        Draws of the trials layer's exact null.
    order_criterion : {"permutation", "chi2", "aic", "bic"}, default "permutation"
        What decides the order layer: the calibrated within-context permutation test (default), its χ² reference, or
        the paper's information criteria (ΔAIC/ΔBIC > 0 rejects; not a test, so outside the family-wise level).
    include_outcomes, parameter_count
        Order-test options (outcomes as next symbols; parameters counted on the observed support or in full).
    max_steps : int, optional
        A known step cap the traces were cut at (else the censoring is read off the traces).
    max_simulated_traces : int or None, default 10,000
        Largest corpus a KS replicate simulates (larger ones are simulated at that size and rescaled).
    interval, confidence
        The R∞ check's intervals (Wilson or Clopper–Pearson for the held-out rate; MOVER for the difference).
    """

    level: float = 0.05
    holdout: bool = True
    n_bootstrap: int = 199
    n_permutations: int = 199
    trials_permutations: int = 999
    order_criterion: Literal["permutation", "chi2", "aic", "bic"] = "permutation"
    include_outcomes: bool = True
    parameter_count: Literal["observed", "full"] = "observed"
    max_steps: int | None = None
    max_simulated_traces: int | None = DEFAULT_MAX_SIMULATED_TRACES
    interval: Literal["wilson", "clopper-pearson"] = "wilson"
    confidence: float = 0.95

    def __post_init__(self) -> None:
        if not 0.0 < self.level < 1.0:
            raise ValueError(f"level must be in (0, 1), got {self.level!r}")
        if self.n_bootstrap < 1 or self.n_permutations < 1 or self.trials_permutations < 1:
            raise ValueError("n_bootstrap, n_permutations and trials_permutations must be >= 1")
        if self.order_criterion not in ("permutation", "chi2", "aic", "bic"):
            raise ValueError(f"order_criterion must be permutation, chi2, aic or bic, got {self.order_criterion!r}")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _observable_success(chain: AbsorbingChain, survival: np.ndarray | None) -> float:
    """R_C = Σ_d f⊕(d) P(C ≥ d): the chance of a success the censoring lets one see (R∞ without censoring)."""
    if survival is None:
        return chain.r_inf
    pmf = observed_success_pmf(chain.success_pmf(survival.size - 1), survival)
    return float(min(1.0, pmf.sum()))


def _survival(hist: np.ndarray, max_steps: int | None) -> np.ndarray | None:
    return cap_survival(max_steps) if max_steps is not None else censoring_survival(hist)


def _combine(name: str, p_values: list[float | None], level: float, message_ok: str, message_bad: str,
             details: list[Any], statistics: dict[str, Any]) -> LayerResult:
    ps = [p for p in p_values if p is not None]
    if not ps:
        return LayerResult(name, "insufficient", None, "undefined", "the test is undefined on every split",
                           split_p_values=tuple(p_values), detail=details, statistics=statistics)
    p = cauchy_combination(ps)
    share = float(np.mean([q <= level for q in ps]))
    dependent = 0.0 < share < 1.0
    rej = p <= level
    return LayerResult(name, "reject" if rej else "pass", p, "rejected" if rej else "consistent",
                       message_bad if rej else message_ok, split_p_values=tuple(p_values), share_rejecting=share,
                       split_dependent=dependent, detail=details, statistics=statistics)


def _r_inf_layer(summary: CorpusSummary, chains: list[AbsorbingChain | None], full: AbsorbingChain,
                 settings: AuditSettings) -> LayerResult:
    S = summary.spec.n_splits
    if not settings.holdout or S == 0:
        hist = summary.all_lengths
        surv = _survival(hist, settings.max_steps)
        k, n = int(hist[SUCCESS].sum()), int(hist.sum())
        r_c = _observable_success(full, surv)
        check = r_inf_check_counts(full.r_inf, k, n, method=settings.interval, confidence=settings.confidence,
                                   in_sample=True, r_observable=None if surv is None else r_c)
        z_den = math.sqrt(max(n * r_c * (1 - r_c), 1e-300))
        p = float(math.erfc(abs(k - n * r_c) / z_den / math.sqrt(2))) if n else None
        msg = (f"R∞ = {fmt_number(full.r_inf)} against the pass rate {fmt_number(k / n if n else None)} of the same "
               "traces (in-sample: close to an identity, weak evidence)")
        return LayerResult("r_inf", "reject" if p is not None and p <= settings.level else "pass", p,
                           "consistent", msg, detail=[check], statistics={"in_sample": True})
    n_test = summary.lengths[:, TEST].sum(axis=(1, 2))
    n_fit = summary.lengths[:, FIT].sum(axis=(1, 2))
    f = summary.spec.test_fraction
    if n_test.mean() < MIN_HALF or n_fit.mean() < MIN_HALF:
        need = math.ceil(MIN_HALF / min(f, 1.0 - f))
        return LayerResult("r_inf", "insufficient", None, "too_few_traces",
                           f"each half needs at least {MIN_HALF} usable traces (about {need} in all; "
                           f"{summary.n_usable} usable)", traces_needed=need)
    # Halves split by task share no task: when tasks differ, each half's pass rate (and the R∞ fitted on the other)
    # varies by the design effect more than independent traces would. Split by trace, the halves share tasks and
    # the difference varies less: no correction, the check stays conservative.
    deff = design_effect(summary) if summary.spec.split_by == "task" else 1.0
    checks: list[RInfCheck] = []
    ps: list[float | None] = []
    for s in range(S):
        chain = chains[s]
        hist = summary.lengths[s, TEST]
        if chain is None or n_test[s] == 0:
            ps.append(None)
            continue
        surv = _survival(hist, settings.max_steps)
        r_c = _observable_success(chain, surv)
        check = r_inf_check_counts(chain.r_inf, int(hist[SUCCESS].sum()), int(n_test[s]), method=settings.interval,
                                   confidence=settings.confidence, n_fit=int(n_fit[s]),
                                   r_observable=None if surv is None else r_c, design_effect=deff)
        checks.append(check)
        ps.append(check.p_value)
    first = checks[0] if checks else None
    what = "R∞" if first is None or first.r_observable is None else "the observable success probability"
    ok = (f"{what} of the chain fitted on one half agrees with the held-out pass rate "
          + (f"(split 1: {fmt_number(first.compared)} vs {fmt_number(first.pass_rate)})" if first else ""))
    bad = (f"{what} of the chain fitted on one half disagrees with the held-out pass rate "
           + (f"(split 1: {fmt_number(first.compared)} vs {fmt_number(first.pass_rate)})" if first else ""))
    stats = {"n_censored_held_out": int(summary.lengths[:, TEST, CENSORED].sum())}
    return _combine("r_inf", ps, settings.level, ok, bad, checks, stats)


def _timing_layer(summary: CorpusSummary, chains: list[AbsorbingChain | None], full: AbsorbingChain,
                  settings: AuditSettings, seeds: list[np.random.SeedSequence]) -> LayerResult:
    S = summary.spec.n_splits
    f = summary.spec.test_fraction
    pass_rate = summary.n_success / max(1, summary.n_usable)
    common: dict[str, Any] = {"n_bootstrap": settings.n_bootstrap, "max_steps": settings.max_steps,
                              "max_simulated_traces": settings.max_simulated_traces}
    if not settings.holdout or S == 0:
        n_times = summary.n_success
        if n_times < MIN_TIMES:
            return _too_few_times(n_times, pass_rate, 1.0)
        res = ks_calibrated_counts(full, summary.all_lengths, refit="same", seed=seeds[0], **common)
        return _combine("timing", [res.p_value], settings.level, _timing_ok(res), _timing_bad(res), [res],
                        {"in_sample": True})
    times = summary.lengths[:, TEST, SUCCESS].sum(axis=1)
    if times.mean() < MIN_TIMES:
        return _too_few_times(int(times.mean()), pass_rate, f)
    results: list[TimingResult] = []
    ps: list[float | None] = []
    for s in range(S):
        chain = chains[s]
        if chain is None:
            ps.append(None)
            continue
        res = ks_calibrated_counts(chain, summary.lengths[s, TEST], refit="train",
                                   fit_histogram=summary.lengths[s, FIT], seed=seeds[s], **common)
        results.append(res)
        ps.append(res.p_value)
    first = results[0] if results else None
    return _combine("timing", ps, settings.level, _timing_ok(first), _timing_bad(first), results, {})


def _with_task_heterogeneity(timing: LayerResult, trials: LayerResult, level: float,
                             speed: SpeedResult | None = None) -> LayerResult:
    """The timing layer, made sensitive to tasks that differ in difficulty or in speed.

    One chain fitted to tasks of different difficulty reproduces their pooled pass rate, but not their success-time
    law: the population's R(d) = E_t R_t(d) is a mixture of the tasks' laws, which a single chain does not have (a
    20-state chain with easy, medium and hard tasks: R(10) 0.121 against a true 0.148, and the held-out KS test
    could not see it, so R(d) was certified while its interval covered the truth in 14–43 % of corpora). Tasks that
    differ only in speed do the same to R(d), budgets and mean steps, and the KS test sees that weakly too. When
    tasks repeat, the timing layer's p-value therefore combines (Cauchy) the held-out KS test with the trials layer's
    exact dispersion test of "tasks share one success probability" and the exact permutation test of "trace
    lengths do not depend on the task" (``audit._speed``): each is valid under the null (one chain for every task),
    so the combination is too, and R(d), budgets and mean steps are withheld when tasks differ."""
    from dataclasses import replace

    if timing.status not in ("pass", "reject") or timing.p_value is None:
        return timing
    parts = [timing.p_value]
    stats: dict[str, Any] = {**timing.statistics, "p_success_time": timing.p_value}
    use_trials = trials.p_value is not None and trials.status in ("pass", "reject")
    if use_trials:
        parts.append(float(trials.p_value))  # type: ignore[arg-type]
        stats["p_task_heterogeneity"] = trials.p_value
    use_speed = speed is not None and speed.p_value is not None
    if use_speed:
        assert speed is not None and speed.p_value is not None
        parts.append(speed.p_value)
        stats["p_task_speed"] = speed.p_value
        stats["task_speed"] = speed.to_dict()
    if len(parts) == 1:
        return timing
    p = cauchy_combination(parts)
    rej = p <= level
    stats["combination"] = ("Cauchy of the held-out KS p" + (", the trials layer's dispersion p" if use_trials else "")
                            + (" and the task-speed permutation p" if use_speed else ""))
    msg = timing.message
    if rej and timing.status != "reject":
        why = []
        if use_trials:
            why.append(f"difficulty: dispersion p = {fmt_number(trials.p_value, 4)}")
        if use_speed:
            assert speed is not None
            why.append(f"speed: trace lengths by task p = {fmt_number(speed.p_value, 4)}")
        msg = ("tasks differ (" + "; ".join(why) + "), so one chain's success-time law is not the population's; "
               "the held-out success times alone fit it")
    return replace(timing, status="reject" if rej else "pass", p_value=p, reason="rejected" if rej else "consistent",
                   message=msg, statistics=stats)


def _timing_ok(res: TimingResult | None) -> str:
    extra = f" (split 1: D = {fmt_number(res.statistic)})" if res is not None and res.statistic is not None else ""
    return "the chain's success-time law fits the held-out success times" + extra


def _timing_bad(res: TimingResult | None) -> str:
    extra = f" (split 1: D = {fmt_number(res.statistic)})" if res is not None and res.statistic is not None else ""
    return "the held-out success times do not follow the chain's law: timing depends on more than the state" + extra


def _too_few_times(n_times: int, pass_rate: float, fraction: float) -> LayerResult:
    if pass_rate <= 0:
        return LayerResult("timing", "insufficient", None, "too_few_traces",
                           "no trace succeeded, so there is no success time to test")
    need = math.ceil(MIN_TIMES / (fraction * pass_rate))
    return LayerResult("timing", "insufficient", None, "too_few_traces",
                       f"the held-out half has about {n_times} successful traces; the test needs at least "
                       f"{MIN_TIMES}", traces_needed=need)


def _order_layer(summary: CorpusSummary, settings: AuditSettings, seed: np.random.SeedSequence) -> LayerResult:
    n_obs = int(summary.triplets.sum())
    n = summary.n_usable
    if n_obs < MIN_ORDER_OBSERVATIONS:
        per = n_obs / n if n else 0.0
        need = math.ceil(MIN_ORDER_OBSERVATIONS / per) if per > 0 else None
        return LayerResult("order", "insufficient", None, "too_few_traces",
                           f"{n_obs} step-to-step observations; the order test needs at least "
                           f"{MIN_ORDER_OBSERVATIONS}", traces_needed=need)
    crit = settings.order_criterion
    res = order_test_counts(summary.triplets, summary.state_names, n_traces=n,
                            include_outcomes=settings.include_outcomes, parameter_count=settings.parameter_count,
                            criterion=crit, level=settings.level, n_permutations=settings.n_permutations, seed=seed)
    stats = {"criterion": crit, "delta_aic": res.delta_aic, "delta_bic": res.delta_bic, "g2": res.g2,
             "df": res.df, "p_permutation": res.p_permutation, "p_chi2": res.p_chi2}
    if crit in ("aic", "bic"):
        p: float | None = 0.0 if not res.keeps_order1 else 1.0  # a rule, not a test: outside the family's level
    elif crit == "chi2":
        p = res.p_chi2 if res.p_chi2 is not None else 1.0
    else:
        p = res.p_permutation if res.p_permutation is not None else 1.0
    rej = not res.keeps_order1 if crit in ("aic", "bic") else (p is not None and p <= settings.level)
    top = sorted(res.g2_by_state.items(), key=lambda kv: -kv[1])[:3]
    where = ", ".join(f"{k} (G² {v:.1f})" for k, v in top if v > 0)
    ok = "the next step depends on the current state only (no evidence of memory)"
    bad = "the next step also depends on the previous state" + (f"; memory is strongest at {where}" if where else "")
    return LayerResult("order", "reject" if rej else "pass", p, "rejected" if rej else "consistent",
                       bad if rej else ok, detail=res, statistics=stats)


def _trials_layer(summary: CorpusSummary, full: AbsorbingChain, settings: AuditSettings,
                  seed: np.random.SeedSequence) -> LayerResult:
    res = trials_check_table(summary.tasks, full.r_inf, level=settings.level,
                             n_permutations=settings.trials_permutations, seed=seed)
    if not res.applicable:
        return LayerResult("trials", "not_applicable", None, "no_repeated_tasks",
                           "no task was tried twice, so exchangeable trials cannot be tested; pass^k (k ≥ 2) assumes "
                           "them", detail=res)
    # pass^k is certified for the k the repeated tasks can show: 2 … the most trials that at least two tasks have.
    stats = {"design_effect": res.design_effect, "n_tasks": res.n_tasks, "n_repeated_traces": res.n_repeated_traces,
             "ks_tested": [k for k in res.ks if k >= 2] if res.p_value is not None else []}
    if res.p_value is None:
        need = MIN_REPEATED_TRACES if res.n_repeated_traces < MIN_REPEATED_TRACES else None
        return LayerResult("trials", "insufficient", None, "too_few_traces", "; ".join(res.notes),
                           traces_needed=need, detail=res, statistics=stats)
    rej = res.p_value <= settings.level
    ok = "repeated trials of a task look like independent draws with one success probability"
    bad = (f"tasks differ in difficulty (design effect {res.design_effect:.2f}): pass^k for k ≥ 2 is above R∞^k; "
           "use the per-task estimates")
    return LayerResult("trials", "reject" if rej else "pass", res.p_value, "rejected" if rej else "consistent",
                       bad if rej else ok, detail=res, statistics=stats)


def audit_summary(summary: CorpusSummary, full: AbsorbingChain, *, prior: ChainPrior, unvisited: str, initial: str,
                  settings: AuditSettings | None = None, seed: int = 0, horizon: int | None = None,
                  state_model: Any = None, extra_settings: dict[str, Any] | None = None,
                  progress: Callable[..., Any] | None = None) -> Certificate:
    """Every layer of the certificate from ``summary`` (module docstring); ``full`` is the chain of all traces.
    ``progress``: told each layer as it starts (:func:`tracetochain._progress.phase_reporter`)."""
    step = phase_reporter(progress)
    settings = settings or AuditSettings()
    S = summary.spec.n_splits if settings.holdout else 0
    root = np.random.SeedSequence(seed)
    ks_root, order_seed, trials_seed = root.spawn(3)
    ks_seeds = ks_root.spawn(max(S, 1))
    chains: list[AbsorbingChain | None] = []
    for s in counted(step, "audit: split chains", range(S)):
        counts = summary.split_fit_counts(s)
        if counts.n_fitted_traces == 0:
            chains.append(None)
            continue
        try:
            chains.append(estimate_chain(counts, prior=prior, unvisited=unvisited, initial=initial))
        except ChainValidationError:
            chains.append(None)
    # (the timing layer combines its KS test with the trials layer's heterogeneity test, so trials comes first)
    step("audit: R∞ layer", 0, 4)
    r_inf = _r_inf_layer(summary, chains, full, settings)
    step("audit: trials layer", 1, 4)
    trials = _trials_layer(summary, full, settings, trials_seed)
    step("audit: order layer", 2, 4)
    order = _order_layer(summary, settings, order_seed)
    step("audit: timing layer (KS)", 3, 4)
    speed = None
    if summary.units is not None and summary.units.repeated:
        speed = speed_heterogeneity_test(summary.units.trace_unit, summary.units.trace_length,
                                         n_permutations=settings.trials_permutations, seed=root.spawn(1)[0])
    timing = _with_task_heterogeneity(_timing_layer(summary, chains, full, settings, ks_seeds), trials, settings.level,
                                      speed)
    layers = {"r_inf": r_inf, "timing": timing, "order": order, "trials": trials}
    longest = int(np.flatnonzero(summary.all_lengths.sum(axis=0))[-1]) if summary.n_usable else 0
    D = longest if horizon is None else int(horizon)
    model_rdc = full.reliability(D)
    emp_rdc = summary.empirical_rdc(D)
    n_test = summary.lengths[:, TEST].sum(axis=(1, 2)) if S else np.zeros(0)
    splits = ({"n_splits": S, "by": summary.spec.split_by, "test_fraction": summary.spec.test_fraction,
               "seed": summary.spec.seed, "rule": "held out iff u(id hash, seed, split) < test_fraction (SplitMix64)",
               "n_usable": summary.n_usable, "n_test": [int(x) for x in n_test],
               "mean_test": round(float(n_test.mean())) if S else 0} if S else None)
    doc = {"audit": settings.to_dict(), "prior": prior.to_dict(), "unvisited": unvisited, "initial": initial,
           "seed": seed, **(extra_settings or {})}
    return build_certificate(layers, level=settings.level, settings=doc, horizon=D,
                             l_inf=l_inf_distance(model_rdc, emp_rdc),
                             model_rdc=tuple(float(x) for x in model_rdc),
                             empirical_rdc=tuple(float(x) for x in emp_rdc), splits=splits, chain=full,
                             state_model=state_model)
