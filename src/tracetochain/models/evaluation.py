"""Held-out checks of a fitted family, on its compiled chain: likelihood, R∞, timing (KS) and R(d) (L∞).

The family was fitted on one part of the traces; here it meets the other part.

* log-likelihood per held-out trace (the model-choice criterion);
* R∞ against the held-out pass rate (:func:`tracetochain.audit.r_inf_check`, Wilson interval);
* timing: the lattice Kolmogorov–Smirnov statistic D between the held-out success times and the compiled chain's
  success-time law F(d) = R(d)/R∞ (:func:`tracetochain.audit._timing.lattice_ks_statistic`), with a Monte Carlo p-value:
  held-out corpora of the same shape are drawn from the model — the same number of tasks with the same numbers of
  trials, a task drawing its class once when the model's trials share one — and p = (1 + #{D* ≥ D}) / (B + 1).
  Trials of one task are not independent when tasks differ (their lengths cluster), and a null that draws them
  independently is far too narrow: on τ-bench a held-out half of 25 tasks is often a "short" or a "long" half. The
  model is held fixed (it was fitted on other traces), so that null leaves out the fit half's noise and rejects more
  often than it should; given the fit traces, every replicate also redraws a fit corpus of their shape, refits the
  family (same size) and measures the held-out draw against the refit — the family's counterpart of the audit's
  ``refit="train"``, which carries both halves' noise;
* L∞ = max_d |R(d) − R̂(d)| against the held-out empirical reliability curve (failed and censored traces stay in the
  denominator).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from tracetochain._display import fmt_number
from tracetochain._outcome import SUCCESS
from tracetochain.audit import RInfCheck, TimingResult, r_inf_check
from tracetochain.audit.shared import (
    UNCAPPED_SIMULATION_STEPS,
    empirical_rdc,
    json_dict,
    l_inf_distance,
    lattice_ks_statistic,
    success_time_cdf,
)
from tracetochain.exceptions import UndefinedMetricError
from tracetochain.models._base import CompiledModel, TraceModel, simulate_runs
from tracetochain.models._encoded import EncodedTraces
from tracetochain.traces import TraceTable


@dataclass(frozen=True)
class HeldoutEvaluation:
    """How a fitted family does on held-out traces (module docstring)."""

    model: str
    n_test: int
    loglik_per_trace: float
    r_inf: float
    r_inf_check: RInfCheck
    timing: TimingResult
    l_inf: float
    horizon: int
    pass_hat_k: dict[int, float]

    def timing_passes(self, level: float = 0.05) -> bool | None:
        """True when the KS p-value exceeds ``level`` (None when the test is undefined)."""
        rej = self.timing.rejects(level)
        return None if rej is None else not rej

    def to_dict(self) -> dict[str, Any]:
        return json_dict({
            "model": self.model, "n_test": self.n_test, "loglik_per_trace": self.loglik_per_trace,
            "r_inf": self.r_inf, "r_inf_check": self.r_inf_check.to_dict(), "timing": self.timing.to_dict(),
            "l_inf": self.l_inf, "horizon": self.horizon,
            "pass_hat_k": {str(k): v for k, v in self.pass_hat_k.items()},
        })

    def describe(self) -> str:
        t = self.timing
        p = fmt_number(t.p_value)
        return (f"{self.model} on {self.n_test} held-out traces: log-likelihood {self.loglik_per_trace:.3f}/trace, "
                f"R∞ {self.r_inf:.3f} vs pass rate {self.r_inf_check.pass_rate:.3f}, KS p {p}, "
                f"L∞ {self.l_inf:.3f} over d ≤ {self.horizon}")


def simulate_encoded(compiled: CompiledModel, task_sizes: NDArray[np.int64], rng: np.random.Generator, *,
                     max_steps: int = UNCAPPED_SIMULATION_STEPS) -> EncodedTraces:
    """A corpus drawn from a compiled model, already encoded (observed states; tasks of the given sizes)."""
    sim = simulate_runs(compiled, task_sizes, rng, max_steps=max_steps, record_paths=True)
    assert sim.expanded is not None
    E = compiled.emission
    if np.all((E == 0) | (E == 1)):
        codes = np.argmax(E, axis=1)[sim.expanded]
    else:
        cum = np.cumsum(E[sim.expanded], axis=1)
        cum[:, -1] = 1.0
        codes = (rng.random(sim.expanded.size)[:, None] >= cum).sum(axis=1)
    grouped: Literal["task", "trace"] = "task" if (np.asarray(task_sizes) > 1).any() else "trace"
    unit = sim.task if grouped == "task" else np.arange(sim.length.size, dtype=np.int64)
    return EncodedTraces(codes.astype(np.int64), np.r_[0, np.cumsum(sim.length)].astype(np.int64),
                         sim.outcome.astype(np.int64), compiled.observed_names, unit.astype(np.int64), grouped)


def timing_check(compiled: CompiledModel, test: EncodedTraces, *, n_bootstrap: int = 199, seed: int = 0,
                 max_steps: int | None = None, refit: Callable[[], TraceModel] | None = None,
                 fit_shape: EncodedTraces | None = None, stop_after: int | None = None) -> TimingResult:
    """KS of the held-out success times against the compiled model's success-time law, with a Monte Carlo null of
    held-out corpora shaped like ``test`` (its units and their trial counts; module docstring).

    With ``refit`` (a factory of unfitted models of the same family and size) and ``fit_shape`` (the traces the
    model was fitted on, for their units' sizes), every replicate also redraws a fit corpus of that shape from the
    model, refits the family on it and measures the fresh held-out corpus against the refitted law — the null then
    carries the fit half's noise too (the family's counterpart of the audit's ``refit="train"``). It costs one fit
    per replicate.

    ``stop_after`` = h: the sequential Monte Carlo p-value of Besag & Clifford (1991, Biometrika 78:301–304): the
    replicates stop once h of them reach the observed statistic, and p = h / l after l replicates (else the usual
    (1 + #)/(B + 1) after all B). It is a valid p-value; a model the data reject draws all B replicates, so the test
    keeps its smallest attainable p and its power, while a model that fits stops after about h / p replicates.
    """
    if n_bootstrap < 1:
        raise ValueError(f"n_bootstrap must be >= 1, got {n_bootstrap}")
    if (refit is None) != (fit_shape is None):
        raise ValueError("give both refit and fit_shape, or neither")
    chain = compiled.chain
    times = test.lengths[test.outcomes == SUCCESS].astype(np.int64)
    sizes = np.bincount(test.unit, minlength=test.n_units)
    grouped = compiled.trials == "task" and compiled.n_components > 1
    settings: dict[str, Any] = {
        "n_bootstrap": n_bootstrap, "seed": seed, "max_steps": max_steps,
        "null": ("corpora drawn from the model with the held-out units' trial counts"
                 + (" (a task draws its class once)" if grouped else " (independent trials)")
                 + ("; each replicate refits the family on a redrawn fit corpus" if refit is not None
                    else "; the model held fixed")),
        "statistic": "lattice sup |F_n(k) - R(k)/R_inf|, k = 0..max time",
        "refit": refit is not None,
    }
    base = TimingResult("monte-carlo", None, None, "success", int(times.size), test.n_traces, settings)
    if times.size == 0:
        return TimingResult(base.mode, None, None, "success", 0, test.n_traces, settings,
                            undefined={"p_value": "no successful held-out trace: no success times to test"})
    cap = max_steps if max_steps is not None else UNCAPPED_SIMULATION_STEPS
    top = max(int(times.max()), 1)
    rng = np.random.default_rng(seed)
    sim = simulate_runs(compiled, np.tile(sizes, n_bootstrap), rng, max_steps=cap)
    done = sim.outcome == SUCCESS
    if done.any():
        top = max(top, int(sim.length[done].max()))
    try:
        cdf = success_time_cdf(chain, top, max_steps)
    except UndefinedMetricError as exc:
        return TimingResult(base.mode, None, None, "success", int(times.size), test.n_traces, settings,
                            undefined={"p_value": str(exc)})
    d_obs = lattice_ks_statistic(times, cdf)
    rep = sim.task // max(sizes.size, 1)
    d_star = np.full(n_bootstrap, np.inf)
    fit_sizes = np.bincount(fit_shape.unit, minlength=fit_shape.n_units) if fit_shape is not None else None
    tie = d_obs - 1e-12 * max(1.0, d_obs)
    reached = 0
    stopped: int | None = None
    for b in range(n_bootstrap):
        if stop_after is not None and reached >= stop_after:
            stopped = b
            break
        x = sim.length[(rep == b) & done]
        if not x.size:
            reached += 1  # counted as D* ≥ D below (d_star stays inf)
            continue
        law = cdf
        if refit is not None:
            assert fit_sizes is not None
            try:
                again = refit().fit(simulate_encoded(compiled, fit_sizes, rng, max_steps=cap)).success_law_chain()
                law = success_time_cdf(again, int(x.max()), max_steps)
            except (ValueError, ArithmeticError, UndefinedMetricError):
                reached += 1
                continue  # an unusable replicate counts as D* ≥ D (conservative)
        d_star[b] = lattice_ks_statistic(x, law)
        reached += int(d_star[b] >= tie)
    if stopped is not None:
        d_star = d_star[:stopped]
        p = reached / stopped
        settings["sequential"] = {"stop_after": stop_after, "replicates_drawn": stopped,
                                  "rule": "Besag & Clifford (1991): p = h / l, stopped at h exceedances"}
    else:
        p = (1 + int(np.count_nonzero(d_star >= tie))) / (n_bootstrap + 1)
    emp = np.cumsum(np.bincount(times, minlength=int(times.max()) + 1)) / times.size
    finite = d_star[np.isfinite(d_star)]
    boot = {"n_replicates": int(d_star.size), "n_undefined": int(d_star.size - finite.size),
            "d_star_quantiles": ({str(q): float(np.quantile(finite, q)) for q in (0.5, 0.9, 0.95, 0.99)}
                                 if finite.size else None), "min_p_value": 1.0 / (n_bootstrap + 1)}
    return TimingResult("monte-carlo", d_obs, p, "success", int(times.size), test.n_traces, settings, boot,
                        tuple(float(v) for v in emp), tuple(float(v) for v in cdf[: emp.size]))


def evaluate_heldout(model: TraceModel, test: TraceTable, *, horizon: int | None = None, n_bootstrap: int = 199,
                     seed: int = 0, max_steps: int | None = None, ks: tuple[int, ...] = (1, 2, 3, 4),
                     fit: TraceTable | None = None) -> HeldoutEvaluation:
    """Score a fitted model on held-out traces (module docstring).

    ``horizon``: the largest d of the L∞ comparison (default: the longest held-out trace). ``max_steps``: the step
    cap the traces were cut at, if any (the KS law then conditions on success within the cap). ``fit``: the traces
    the model was fitted on; given, the timing null refits the family (same size, :meth:`TraceModel.like`) on
    redrawn fit corpora of their shape (:func:`timing_check`) — the fit half's noise is then in the null.
    """
    enc = model.encode(test)
    ll = model.trace_loglik(enc)
    compiled = model.to_chain()
    chain = compiled.chain
    lengths = enc.lengths
    H = int(lengths.max()) if horizon is None else int(horizon)
    fit_shape = model.encode(fit) if fit is not None else None
    timing = timing_check(compiled, enc, n_bootstrap=n_bootstrap, seed=seed, max_steps=max_steps,
                          refit=model.like if fit is not None else None, fit_shape=fit_shape)
    l_inf = l_inf_distance(chain.reliability(H), empirical_rdc(test, H))
    check = r_inf_check(chain.r_inf, test, n_fit=model.n_fit_traces_ or None)
    passk = {k: float(v) for k, v in zip(ks, compiled.pass_hat_k(list(ks)), strict=True)}
    return HeldoutEvaluation(model.label, enc.n_traces, float(ll.mean()), chain.r_inf, check, timing, l_inf, H,
                             passk)
