"""Model choice inside the one analysis: ``analyze(..., model="auto" | family)`` and what the report shows of it.

With ``model="markov"`` (the default) :func:`~tracetochain.analysis.analyze` fits the first-order chain and nothing
here runs. Otherwise, on the labelled traces in memory:

1. **Units and splits.** The likelihood unit is the task when task ids repeat (trials of one task may share their
   difficulty; a held-out task is then a new task), else the trace. The held-out halves are the analysis's own:
   split s holds a unit out iff u(hash of its id, seed, s) < ``test_fraction`` (``traces._hashing``), so the
   first-order certificate and every candidate are checked on the same halves.
2. **Choice** by held-out log-likelihood (:func:`~tracetochain.models.choose_model`: a candidate must beat the
   first-order chain by a Bonferroni z over the units' paired gains; among those that do, the fewest parameters within
   one standard error of the best). A family name (``"lifted"``, ``"hmm"`` …) keeps that family and picks its size
   the same way.
3. **Checks.** The first-order chain, the choice and the best candidate of every family meet the certificate's
   held-out layers on every split: R∞ against the held-out pass rate (censoring-aware), timing (the family's own KS
   test of the held-out success times with a null that refits it on redrawn fit halves where that is cheap, else
   holds it fixed) and, when tasks repeat, trials (:func:`~tracetochain.models.pass_k_test`: the model's pass^k law
   against the held-out tasks). Per layer the split p-values are combined (Cauchy) and the layers that test are
   tested at level / L — the certificate's own rule (``audit._certificate``).
4. **Certificate of the choice.** For a family other than the first-order chain, its certificate is built from its
   own checks; the order layer does not apply (the family models memory, a clock or hidden states, so "the next step
   depends on the current observed state only" is not its assumption): what-ifs and sensitivities on its expanded
   states are then untested, never silently certified.
5. **Intervals** of the compiled model: its family refitted (same size) on units resampled with Poisson(1) weights
   of their id hash (the analysis's bootstrap rule); per-state intervals do not exist (the expanded states differ
   between refits) and are marked unavailable.
"""

from __future__ import annotations

import copy
import functools
import math
import warnings
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from tracetochain._display import Display, ResultDisplay, Table
from tracetochain._display import fmt_number as fmt
from tracetochain._outcome import FAILURE as _FAILURE
from tracetochain._outcome import SUCCESS as _SUCCESS
from tracetochain._outcome import OutcomeCode
from tracetochain.analysis._audit import (
    MIN_HALF,
    MIN_TIMES,
    AuditSettings,
    _combine,
    _observable_success,
    _survival,
    _too_few_times,
)
from tracetochain.analysis._weigh import certified_outputs, weigh_certificate, would_certify
from tracetochain.audit import LAYERS, Certificate, LayerResult
from tracetochain.audit.shared import (
    MIN_REPEATED_TRACES,
    apply_family,
    build_certificate,
    json_dict,
    l_inf_distance,
    r_inf_check_counts,
)
from tracetochain.chain import AbsorbingChain
from tracetochain.exceptions import TraceToChainError, UndefinedMetricError
from tracetochain.families import family_of, first_order_family, is_first_order, model_choices
from tracetochain.quantities import first_within, reported, reported_scalars
from tracetochain.traces import TraceTable
from tracetochain.traces.shared import fnv1a_hashes, holdout_mask, replicate_weights, unit_hashes
from tracetochain.uncertainty.shared import equal_tailed


def __getattr__(name: str) -> Any:
    if name == "MODEL_CHOICES":  # what ``model=`` / ``--model`` accepts: a view of the family registry
        return model_choices()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: Refits behind a compiled model's intervals unless ``intervals="bootstrap"`` asks for another number.
DEFAULT_MODEL_REFITS = 200
#: Monte Carlo replicates of the timing check for the candidates that are not chosen (a screen beside the
#: certificate-grade check of the choice).
SCREEN_BOOTSTRAP = 49


#: Exceedances after which a screen's timing replicates stop (Besag & Clifford 1991's sequential p = h / l): a
#: screen the data reject still draws all of its replicates, one that fits stops after about h / p of them.
SCREEN_STOP_AFTER = 10


def certificate_stop_after(n_replicates: int) -> int:
    """Exceedances after which the *chosen* model's timing replicates stop: a tenth of the replicates, at least
    :data:`SCREEN_STOP_AFTER` (20 of the default 199).

    The sequential p-value (Besag & Clifford 1991) is valid at every level, and it equals the full test's
    (1 + g)/(B + 1) whenever fewer than h of all B replicates reach the observed statistic, and a stopped test has
    p = h / l ≥ h / B ≈ 0.1 — so every split p-value below 0.1 is exactly the full test's, one above it carries a
    Monte Carlo error of about 1/√h of itself (where the Cauchy combination gives it little weight), and a model
    that fits stops after about h / p replicates. Each replicate refits the
    family on a redrawn fit half, and a chosen model usually fits: on the bundled τ-bench corpus the chosen
    lifted(k=3)+tasks(C=3) drew 995 refits across its five splits and now draws 270 (23–121 a split). More
    replicates (``audit --ks-samples``) raise h with them, so the p-value of a model that fits keeps its relative
    precision (about 1/√h)."""
    return max(SCREEN_STOP_AFTER, math.ceil(n_replicates / 10))


def screen_replicates(level: float, n_layers: int = 3) -> int:
    """Timing replicates of the screen of a non-chosen candidate: enough that the smallest attainable p-value,
    1/(B + 1), lies below the family threshold level / L by half again (B + 1 ≥ 1.5 L / level; 89 at the 5 % level
    with the three layers a non-first-order candidate has), so the screen can reject — with 49 it could not (0.02
    against 0.0167), and "passes the timing screen" meant nothing. At least :data:`SCREEN_BOOTSTRAP`."""
    return max(SCREEN_BOOTSTRAP, math.ceil(1.5 * n_layers / level) - 1)
_FIT_ERRORS = (TraceToChainError, ValueError, ArithmeticError, np.linalg.LinAlgError)


# ---------------------------------------------------------------------------------------------------- records
@dataclass(frozen=True)
class CandidateResult:
    """One row of the model-choice table: the candidate's held-out fit and, when checked, its held-out layers."""

    name: str
    family: str
    size: int | None
    n_parameters: int | None
    heldout_loglik_per_trace: float | None
    heldout_loglik_se: float | None
    gain_vs_baseline: float | None
    se_vs_baseline: float | None
    z_vs_baseline: float | None
    chosen: bool
    verdict: str
    #: The certificate layers of this candidate's held-out checks (the certificate's family rule applied); empty when
    #: it was not checked.
    layers: dict[str, LayerResult] = field(default_factory=dict)
    #: Mean over the splits of max_d |R(d) − R̂(d)| against the held-out reliability curve (descriptive).
    l_inf: float | None = None
    timing_null: str | None = None
    timing_replicates: int | None = None
    note: str = ""

    @property
    def checked(self) -> bool:
        return bool(self.layers)

    def to_dict(self) -> dict[str, Any]:
        return json_dict({
            "name": self.name, "family": self.family, "size": self.size, "n_parameters": self.n_parameters,
            "heldout_loglik_per_trace": self.heldout_loglik_per_trace, "heldout_loglik_se": self.heldout_loglik_se,
            "gain_vs_baseline": self.gain_vs_baseline, "se_vs_baseline": self.se_vs_baseline,
            "z_vs_baseline": self.z_vs_baseline, "chosen": self.chosen, "verdict": self.verdict,
            "checked": self.checked, "l_inf": self.l_inf, "timing_null": self.timing_null,
            "timing_replicates": self.timing_replicates, "note": self.note,
            "layers": {name: {"status": layer.status, "p_value": layer.p_value, "p_adjusted": layer.p_adjusted,
                              "reason": layer.reason, "message": layer.message,
                              "split_p_values": list(layer.split_p_values)}
                       for name, layer in self.layers.items()},
        })


@dataclass(frozen=True, eq=False)
class ModelSelection(ResultDisplay):
    """How the analysis's model was chosen and what it compiled to (module docstring).

    ``chosen`` names the model (``"markov"`` or e.g. ``"lifted(k=3)+tasks(C=2)"``) and ``reason`` says in one
    sentence why; ``candidates`` is the table. ``compiled`` is None when the first-order chain was chosen (the
    analysis's chain and certificate are then the usual ones); otherwise it is the chosen model as one absorbing
    chain on its expanded states, with the map back to the observed states (``compiled.emission``), and ``draws``
    the refits behind its intervals.
    """

    requested: str
    chosen: str
    family: str
    reason: str
    candidates: tuple[CandidateResult, ...]
    grouped_by: str
    n_units: int
    n_traces: int
    splits: dict[str, Any]
    choice: Any = field(repr=False)
    model: Any = field(default=None, repr=False)
    compiled: Any = field(default=None, repr=False)
    draws: tuple[Any, ...] = field(default=(), repr=False)
    interval_settings: dict[str, Any] = field(default_factory=dict)
    intervals_unavailable: str | None = None
    notes: tuple[str, ...] = ()
    #: Outputs the choice does not certify and the checked candidate that would, with why it was not chosen
    #: (:func:`~tracetochain.analysis._weigh.would_certify`).
    would_certify: tuple[dict[str, Any], ...] = ()
    #: (3, L + 1) modelled traces by outcome (success, failure, censored) and length.
    length_histogram: NDArray[np.int64] | None = field(default=None, repr=False)
    #: Processes for the refits' metrics when their intervals are first asked for (``analyze``'s ``n_jobs``).
    n_jobs: int | None = field(default=None, repr=False, compare=False)
    _interval_cache: dict[tuple[Any, ...], dict[str, Any]] = field(default_factory=dict, repr=False, compare=False)

    @property
    def first_order(self) -> bool:
        """The choice is the plain first-order chain (the analysis's own chain and certificate)."""
        return self.compiled is None

    @property
    def trials(self) -> str:
        """``"task"`` when the chosen model's trials of one task share a class (pass^k = Σ w_c R_c^k), else
        ``"iid"``."""
        return "iid" if self.compiled is None else str(self.compiled.trials)

    def candidate(self, name: str) -> CandidateResult:
        for c in self.candidates:
            if c.name == name:
                return c
        raise KeyError(f"no candidate {name!r}; candidates are {[c.name for c in self.candidates]}")

    def pass_k(self, ks: Sequence[int]) -> tuple[list[float], list[float]] | None:
        """(pass^k, pass@k) of the compiled model (None for the first-order chain: R∞^k)."""
        if self.compiled is None:
            return None
        return ([float(x) for x in self.compiled.pass_hat_k(list(ks))],
                [float(x) for x in self.compiled.pass_at_k(list(ks))])

    # ------------------------------------------------------------------ intervals
    def intervals(self, *, horizon: int = 50, ks: Sequence[int] = (1, 2, 3, 4, 5), delta: float = 0.01,
                  progress: Callable[..., Any] | None = None) -> dict[str, Any] | None:
        """Intervals of the compiled model's metrics from its refits (same keys as
        :func:`~tracetochain.uncertainty.interval_summary`; per-state intervals unavailable). None without refits.
        ``progress``: a callback told of every refit summarised (``progress(phase, done, total)``, or
        ``progress(phase)``), the first time a setting is asked for."""
        if self.compiled is None or not self.draws:
            return None
        key = (int(horizon), tuple(int(k) for k in ks), float(delta))
        if key not in self._interval_cache:  # every draw is a chain of its own size: computed once per setting
            hist = self.length_histogram
            outcomes = None if hist is None else (int(hist[_SUCCESS].sum()), int(hist[_FAILURE].sum()))
            self._interval_cache[key] = model_intervals(self.compiled, self.draws, horizon=horizon, ks=ks,
                                                        delta=delta, settings=self.interval_settings,
                                                        outcomes=outcomes, progress=progress, n_jobs=self.n_jobs)
        return copy.deepcopy(self._interval_cache[key])

    # ------------------------------------------------------------------ io
    def to_dict(self) -> dict[str, Any]:
        doc = {
            "kind": "tracetochain.model_choice", "requested": self.requested, "chosen": self.chosen,
            "family": self.family, "reason": self.reason, "first_order": self.first_order, "trials": self.trials,
            "grouped_by": self.grouped_by, "n_units": self.n_units, "n_traces": self.n_traces,
            "splits": self.splits, "candidates": [c.to_dict() for c in self.candidates],
            "z_threshold": getattr(self.choice, "z_threshold", None), "notes": list(self.notes),
            "stability": dict(getattr(self.choice, "stability", None) or {}),
            "intervals": {"settings": self.interval_settings, "unavailable": self.intervals_unavailable},
            "would_certify": list(self.would_certify),
            "rule": "held-out log-likelihood over the analysis's held-out splits of units; better than the "
                    "first-order chain when the summed gain is >= z_threshold standard errors (Bonferroni over the "
                    "candidates); among those, the fewest parameters within one standard error of the best; with auto, "
                    "a candidate within one standard error of that choice whose held-out layers certify more "
                    "outputs replaces it",
        }
        if self.compiled is not None:
            c = self.compiled
            doc["compiled"] = {"family": c.family, "n_expanded_states": c.n_states,
                               "n_observed_states": len(c.observed_names), "trials": c.trials,
                               "n_classes": c.n_components,
                               "class_weights": [float(w) for w in c.component_weights],
                               "class_r_inf": [float(r) for r in c.component_r_inf()],
                               "failure_attribution": c.failure_attribution()}
        return json_dict(doc)

    def describe(self) -> str:
        head = f"Model: {self.chosen} — {self.reason}"
        rows = []
        for c in self.candidates:
            lay = " ".join(f"{k}:{v.status}" for k, v in c.layers.items()) or "not checked"
            ll = "—" if c.heldout_loglik_per_trace is None else f"{c.heldout_loglik_per_trace:.3f}"
            se = "" if c.heldout_loglik_se is None else f" ± {c.heldout_loglik_se:.3f}"
            rows.append(f"  {'*' if c.chosen else ' '} {c.name:<26} LL/trace {ll}{se}  params "
                        f"{'—' if c.n_parameters is None else c.n_parameters:<5} {lay}")
        shares = getattr(self.choice, "stability", None) or {}
        if shares:
            rows.append("  choice stability (resampled held-out units): "
                        + ", ".join(f"{nm} {v:.0%}" for nm, v in shares.items()))
        return "\n".join([head, *rows, *(f"  note: {n}" for n in self.notes)])

    def __str__(self) -> str:
        return self.describe()

    def _display(self) -> Display:
        def layer(c: CandidateResult, name: str) -> tuple[str | None, float | None]:
            got = c.layers.get(name)
            return (None, None) if got is None else (got.status, got.p_value)

        cols = ("candidate", "family", "n_parameters", "heldout_loglik_per_trace", "heldout_loglik_se",
                "gain_vs_baseline", "z_vs_baseline", "r_inf", "p_r_inf", "timing", "p_timing", "trials",
                "p_trials", "order", "l_inf", "chosen", "verdict")
        rows = tuple((c.name, c.family, c.n_parameters, c.heldout_loglik_per_trace, c.heldout_loglik_se,
                      c.gain_vs_baseline, c.z_vs_baseline, *layer(c, "r_inf"), *layer(c, "timing"),
                      *layer(c, "trials"), layer(c, "order")[0], c.l_inf, c.chosen, c.verdict)
                     for c in self.candidates)
        return Display(f"{self.chosen} — {self.reason}", kind="Model", lines=self.notes,
                       tables=(Table("model_candidates", cols, rows,
                                     digits={"heldout_loglik_per_trace": 4, "heldout_loglik_se": 4,
                                             "gain_vs_baseline": 1, "z_vs_baseline": 1, "p_r_inf": 4,
                                             "p_timing": 4, "p_trials": 4}),))


# ---------------------------------------------------------------------------------------------------- intervals
def refit_interval(draws: NDArray[np.float64], point: NDArray[np.float64], confidence: float
                   ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The interval of a quantity from refits ``draws`` (B, …) of a fit whose value is ``point`` (…), per column: the
    equal-tailed percentile interval, widened to the bias-corrected (BC) one where the refits sit to one side of
    the point.

    An expanded family refitted on resampled units can be biased against its fit on all units: on the mini-swe-agent
    runs more than 97.5 % of lifted(k=3)'s refits put R(10) below the full fit's 0.111, and the percentile interval
    [0.087, 0.110] missed its own point. BC (Efron 1981, "Nonparametric standard errors and confidence intervals";
    Efron & Tibshirani 1993, §14.3) takes the refits' Φ(2 z0 ± z) quantiles, z0 = Φ⁻¹(p0), p0 the share of refits
    below the point (ties half, kept within [1/(2B), 1 − 1/(2B)]); it equals the percentile interval when the
    refits are centred (z0 = 0). Under a strong bias BC alone collapses onto the refits' extreme tail (there
    [0.111, 0.115], a quarter of the refits' spread), so neither is trusted alone: the interval is their union,
    stretched to the point if it still lies outside (every refit on one side) — never narrower than the percentile
    interval, and never without its point.
    """
    from scipy.special import ndtr, ndtri

    lo_q, hi_q = equal_tailed(confidence)
    B = draws.shape[0]
    flat = draws.reshape(B, -1)
    p = np.broadcast_to(point, draws.shape[1:]).reshape(-1)
    lower, upper = np.empty(p.size), np.empty(p.size)
    for j in range(p.size):
        col = flat[:, j]
        p0 = (np.sum(col < p[j]) + 0.5 * np.sum(col == p[j])) / B
        z0 = ndtri(min(max(p0, 0.5 / B), 1.0 - 0.5 / B))
        bc_lo, bc_hi = ndtr(2.0 * z0 + ndtri(lo_q)), ndtr(2.0 * z0 + ndtri(hi_q))
        lower[j] = min(np.quantile(col, min(lo_q, bc_lo)), p[j])
        upper[j] = max(np.quantile(col, max(hi_q, bc_hi)), p[j])
    shape = draws.shape[1:]
    return lower.reshape(shape), upper.reshape(shape)


def _stats(point: Any, samples: list[Any], confidence: float, n_draws: int, undefined: str | None) -> dict[str, Any]:
    """The compact interval entry of one quantity (the keys of ``interval_summary``'s metrics)."""
    ok = [s for s in samples if s is not None]
    lo_q, hi_q = (1.0 - confidence) / 2.0, (1.0 + confidence) / 2.0

    def out(x: Any) -> Any:
        if x is None:
            return None
        a = np.asarray(x, dtype=np.float64)
        return float(a) if a.ndim == 0 else [float(v) for v in a]

    if ok:
        arr = np.asarray(ok, dtype=np.float64)
        if point is None:
            lower, upper = np.quantile(arr, lo_q, axis=0), np.quantile(arr, hi_q, axis=0)
        else:
            lower, upper = refit_interval(arr, np.asarray(point, dtype=np.float64), confidence)
        entry = {"point": out(point), "mean": out(arr.mean(axis=0)),
                 "std": out(arr.std(axis=0, ddof=1)) if len(ok) > 1 else None,
                 "lower": out(lower), "upper": out(upper)}
    else:
        entry = {"point": out(point), "mean": None, "std": None, "lower": None, "upper": None}
    entry.update({"n_samples": n_draws, "n_excluded": n_draws - len(ok),
                  "excluded": {"refit failed or quantity undefined": n_draws - len(ok)} if len(ok) < n_draws else {},
                  "point_undefined": undefined})
    return entry


def _quantities(compiled: Any, horizon: int, ks: list[int], delta: float) -> dict[str, Any]:
    chain: AbsorbingChain = compiled.chain

    def guarded(fn: Callable[[], Any]) -> Any:
        try:
            return float(fn())
        except (UndefinedMetricError, ArithmeticError, ValueError):
            return None

    rel = chain.reliability(horizon)
    out: dict[str, Any] = {"reliability": rel, "residual_at_horizon": float(chain.r_inf - rel[-1]),
                           "pass_hat_k": compiled.pass_hat_k(ks), "pass_at_k": compiled.pass_at_k(ks),
                           "step_budget": _exact_step_budget(chain, delta)}
    for q in reported_scalars():  # every reported scalar of the registry, on the compiled model's chain
        out[q.key] = None if q.unavailable(compiled) else q.point(chain)[0]
    return out


def _exact_step_budget(chain: AbsorbingChain, delta: float, max_horizon: int = 16_384) -> float | None:
    """Smallest d with R∞ − R(d) ≤ δ (:func:`~tracetochain.quantities.first_within`; the exact part of
    :meth:`AbsorbingChain.step_budget`, without its eigendecomposition-based bound, which refits do not need)."""
    d = first_within(chain, delta, max_horizon)
    return None if d is None else float(d)


def _draw_quantities(draw: Any, *, horizon: int, ks: list[int], delta: float) -> dict[str, Any]:
    """The quantities of one refit: a fitted model, compiled here and not kept (so that a few hundred dense refits
    never sit in memory together), or an already compiled one."""
    return _quantities(draw if hasattr(draw, "chain") else draw.to_chain(keep=False), horizon, ks, delta)


def model_intervals(compiled: Any, draws: Sequence[Any], *, horizon: int, ks: Sequence[int], delta: float,
                    settings: dict[str, Any], outcomes: tuple[int, int] | None = None,
                    progress: Callable[..., Any] | None = None, n_jobs: int | None = None) -> dict[str, Any]:
    """Percentile intervals of a compiled model's metrics over its refits (the structure of
    :func:`~tracetochain.uncertainty.interval_summary`; per-state entries are unavailable and say why).

    ``outcomes`` = (successes, failures) of the modelled traces that ended. When they all share one outcome (or none
    ended), the refits cannot see the other one and the expanded families' smoothing vanishes: 40 all-success traces
    gave R∞ [0.99998, 0.999995]. The intervals of the proportions are then widened to contain the Jeffreys interval
    of the observed outcomes (:func:`_binomial_floor`). ``progress``: told of every draw done (a compiled chain of
    thousands of expanded states takes a tenth of a second or more per draw). ``n_jobs``: processes for the draws
    (:mod:`tracetochain._parallel`; the result does not depend on it)."""
    from tracetochain._parallel import parallel_map
    from tracetochain._progress import phase_reporter
    from tracetochain._version import __version__
    from tracetochain.uncertainty import INTERVALS_SCHEMA_VERSION

    ks_list = [int(k) for k in ks]
    confidence = float(settings.get("confidence", 0.95))
    point = _quantities(compiled, horizon, ks_list, delta)
    phase = f"metrics of {len(draws)} refits"
    report = phase_reporter(progress)
    per_draw = parallel_map(functools.partial(_draw_quantities, horizon=horizon, ks=ks_list, delta=delta),
                            list(draws), n_jobs=n_jobs, done=lambda i, n: report(phase, i, n))
    n = int(settings.get("n_refits", len(draws)))

    def entry(key: str, index: int | None = None) -> dict[str, Any]:
        def pick(q: dict[str, Any]) -> Any:
            v = q[key]
            return None if v is None else (v if index is None else v[index])
        p = pick(point)
        return _stats(p, [pick(q) for q in per_draw], confidence, n, None if p is not None else "undefined")

    metrics: dict[str, Any] = {}
    for q in reported():  # the registry's reported quantities, in its order
        if q.kind == "scalar":
            metrics[q.key] = entry(q.key)
            why = q.unavailable(compiled)
            if why is not None:
                metrics[q.key]["point_undefined"] = why
        elif q.key == "reliability":
            metrics["reliability"] = entry("reliability")
            metrics["residual_at_horizon"] = entry("residual_at_horizon")
        elif q.kind == "per_k":
            metrics[q.key] = {str(k): entry(q.key, i) for i, k in enumerate(ks_list)}
    metrics["step_budget"] = {"exact": entry("step_budget")}
    metrics["states"] = []
    floor = None
    if outcomes is not None and (outcomes[0] == 0 or outcomes[1] == 0):
        floor = _binomial_floor(metrics, outcomes, ks_list, confidence)
    return {
        "kind": "tracetochain.intervals", "schema_version": INTERVALS_SCHEMA_VERSION,
        "tracetochain_version": __version__, "method": "bootstrap (model refits)", "confidence": confidence,
        "interval": "percentile of the refits, widened to the bias-corrected (BC) one", "samples": n,
        "n_draws": len(draws),
        "seed": settings.get("seed"), "point_estimator": f"{compiled.family} model fitted on all usable traces",
        "settings": dict(settings), "horizon": int(horizon), "ks": ks_list, "delta": float(delta),
        "metrics": metrics, "entries": None,
        "unavailable": {"states": "per-state intervals are not defined for this model: its expanded states are "
                                  "not the same from one refit to the next",
                        "entries": "per-entry intervals of Q are not defined for this model (same reason)"},
        **({"binomial_floor": floor} if floor is not None else {}),
    }


def _binomial_floor(metrics: dict[str, Any], outcomes: tuple[int, int], ks: list[int], confidence: float
                    ) -> dict[str, Any]:
    """Widen, in place, the intervals of R∞, the failure probability, pass^k, pass@k and R(d) to contain what the
    Jeffreys interval (l, u) of the observed outcomes (x successes of n ended traces) implies: R∞ ∈ [l, u], failure
    ∈ [1 − u, 1 − l], pass^k ∈ [l^k, u^k], pass@k ∈ [1 − (1 − l)^k, 1 − (1 − u)^k], R(d) ∈ [l, u] · R̂(d)/R̂∞ (the
    model's own law of the success time). An interval of a proportion is then never narrower than the binomial
    interval of the outcomes it was estimated from (Brown, Cai & DasGupta 2001). Returns what was done."""
    from tracetochain.audit.shared import jeffreys_interval

    x, f = outcomes
    lo, hi = jeffreys_interval(x, x + f, confidence)

    def widen(entry: dict[str, Any], a: float, b: float) -> None:
        if entry.get("point") is None:
            return
        entry["lower"] = a if entry.get("lower") is None else min(float(entry["lower"]), a)
        entry["upper"] = b if entry.get("upper") is None else max(float(entry["upper"]), b)
        entry["floor"] = "jeffreys"

    widen(metrics["r_inf"], lo, hi)
    widen(metrics["failure_probability"], 1.0 - hi, 1.0 - lo)
    for k in ks:
        widen(metrics["pass_hat_k"][str(k)], lo ** k, hi ** k)
        widen(metrics["pass_at_k"][str(k)], 1.0 - (1.0 - lo) ** k, 1.0 - (1.0 - hi) ** k)
    rel, r_inf = metrics["reliability"], metrics["r_inf"].get("point")
    if rel.get("point") is not None and rel.get("lower") is not None and r_inf:
        shape = np.asarray(rel["point"], dtype=np.float64) / float(r_inf)
        rel["lower"] = [float(v) for v in np.minimum(np.asarray(rel["lower"]), lo * shape)]
        rel["upper"] = [float(v) for v in np.minimum(1.0, np.maximum(np.asarray(rel["upper"]), hi * shape))]
        rel["floor"] = "jeffreys"
    return {"successes": x, "failures": f, "interval": [lo, hi], "rule": "jeffreys",
            "why": ("every ended trace " + ("succeeded" if f == 0 and x > 0 else "failed" if x == 0 and f > 0
                                            else "was censored (none ended)")
                    + ": refits cannot see the other outcome, so the intervals of proportions contain the Jeffreys "
                      "interval of the observed outcomes")}


# ---------------------------------------------------------------------------------------------------- helpers
def _length_histogram(enc: Any, top: int | None = None) -> NDArray[np.int64]:
    """(3, L + 1) counts of traces by outcome (success, failure, censored) and length."""
    L = int(enc.lengths.max()) if enc.n_traces else 0
    if top is not None:
        L = max(L, top)
    hist = np.zeros((3, L + 1), np.int64)
    np.add.at(hist, (enc.outcomes, enc.lengths), 1)
    return hist


def _empirical_rdc(hist: NDArray[np.int64], horizon: int) -> NDArray[np.float64]:
    from tracetochain.numerics.empirical import empirical_rdc_from_counts

    return empirical_rdc_from_counts(hist[_SUCCESS], int(hist.sum()), horizon)


def _seed(seed: int, name: str, what: str) -> np.random.SeedSequence:
    """A seed for one candidate and one check that does not depend on which other candidates are checked."""
    return np.random.SeedSequence([int(seed) & 0xFFFF_FFFF, zlib.crc32(name.encode()), zlib.crc32(what.encode())])


def _int_seed(ss: np.random.SeedSequence) -> int:
    return int(ss.generate_state(1)[0])


def split_hashes(usable: TraceTable, by: str) -> NDArray[np.uint64]:
    """The hash that decides every trace's half in ``analyze``'s splits: its task id's when splitting by task, else
    its own id's."""
    ids = usable.trace_id_array
    if by == "task" and "task_id" in usable.columns:
        return unit_hashes(ids, usable.trace_column("task_id"))
    return fnv1a_hashes(ids)


# ---------------------------------------------------------------------------------------------------- checks
@dataclass
class _Checks:
    layers: dict[str, LayerResult]
    l_inf: float | None
    timing_null: str | None
    replicates: int
    note: str = ""


@dataclass(frozen=True)
class _SplitJob:
    """One candidate's held-out checks on one split: all a worker process needs (:mod:`tracetochain._parallel`)."""

    name: str
    make: Callable[[], Any]
    enc: Any
    mask: NDArray[np.bool_]
    settings: AuditSettings
    horizon: int
    base: int
    stop_after: int | None
    tasks: bool
    timing_seed: int
    trials_seed: int
    index: int


@dataclass(frozen=True)
class _SplitCheck:
    """What :func:`_check_split` found on one split (``error`` set when the candidate could not be fitted there)."""

    n_test: int
    n_times: int
    error: str | None = None
    r_check: Any = None
    l_inf: float | None = None
    timing: Any = None
    trials: Any = None
    null: str | None = None
    replicates: int = 0


def split_jobs(name: str, make: Callable[[], Any], enc: Any, held_out: list[NDArray[np.bool_]],
               settings: AuditSettings, *, seed: int, horizon: int, n_timing: int | None = None,
               stop_after: int | None = None) -> list[_SplitJob]:
    """The jobs of :func:`heldout_checks` for one candidate, one per split (seeded per candidate, check and split, so
    a job's result does not depend on where or when it runs).

    ``held_out[s]`` marks the traces of ``enc`` held out in split s; the candidate (``make()``) is fitted on the rest.
    ``n_timing``: Monte Carlo replicates of the timing null (default: the audit's ``n_bootstrap``; twice as many,
    plus one, when the model is held fixed, as :func:`~tracetochain.models.choose_model` does). ``stop_after``: the
    sequential stop (:func:`~tracetochain.models.evaluation.timing_check`): :data:`SCREEN_STOP_AFTER` for a screen,
    :func:`certificate_stop_after` for the chosen model.
    """
    S = len(held_out)
    base = n_timing if n_timing is not None else settings.n_bootstrap
    tasks = enc.grouped_by == "task" and bool(np.any(np.bincount(enc.unit) >= 2))
    t_seed, k_seed = (_seed(seed, name, w).spawn(S) for w in ("timing", "trials"))
    return [_SplitJob(name, make, enc, mask, settings, horizon, base, stop_after, tasks, _int_seed(t_seed[s]),
                      _int_seed(k_seed[s]), s) for s, mask in enumerate(held_out)]


def _check_split(job: _SplitJob) -> _SplitCheck:
    """One split's held-out layers for one candidate: fit on the split's fit half, then the R∞ check, the L∞ distance,
    the timing null and the trials test on its held-out half."""
    from tracetochain.models.evaluation import timing_check
    from tracetochain.models.passk import pass_k_test
    from tracetochain.models.selection import _cheap_to_refit

    enc, settings = job.enc, job.settings
    fit = enc.select(np.flatnonzero(~job.mask))
    test = enc.select(np.flatnonzero(job.mask))
    hist = _length_histogram(test)
    n_times = int(hist[_SUCCESS].sum())
    try:
        model = job.make().fit(fit)
        compiled = model.to_chain()
    except _FIT_ERRORS as exc:
        return _SplitCheck(test.n_traces, n_times, f"split {job.index + 1}: {type(exc).__name__}: {exc}")
    chain = compiled.chain
    surv = _survival(hist, settings.max_steps)
    r_c = _observable_success(chain, surv)
    check = r_inf_check_counts(chain.r_inf, n_times, test.n_traces, method=settings.interval,
                               confidence=settings.confidence, n_fit=fit.n_traces,
                               r_observable=None if surv is None else r_c)
    l_inf = l_inf_distance(chain.reliability(job.horizon), _empirical_rdc(hist, job.horizon))
    refit = _cheap_to_refit(model)
    replicates = job.base if refit else 2 * job.base + 1
    tm = timing_check(compiled, test, n_bootstrap=replicates, seed=job.timing_seed, max_steps=settings.max_steps,
                      refit=model.like if refit else None, fit_shape=fit if refit else None,
                      stop_after=job.stop_after)
    pk = None
    if job.tasks:
        pk = pass_k_test(test, compiled, n_simulations=settings.trials_permutations,
                         min_traces=MIN_REPEATED_TRACES, seed=job.trials_seed)
    return _SplitCheck(test.n_traces, n_times, None, check, l_inf, tm, pk, "refit" if refit else "fixed model",
                       replicates)


def heldout_checks(name: str, make: Callable[[], Any], enc: Any, held_out: list[NDArray[np.bool_]],
                   settings: AuditSettings, *, seed: int, horizon: int, test_fraction: float,
                   n_timing: int | None = None, stop_after: int | None = None, n_jobs: int | None = None) -> _Checks:
    """The certificate's held-out layers for one candidate (module docstring, step 3), before Holm: the jobs of
    :func:`split_jobs`, run over ``n_jobs`` processes (:func:`~tracetochain._parallel.parallel_map`), combined by
    :func:`combine_splits`."""
    from tracetochain._parallel import parallel_map

    jobs = split_jobs(name, make, enc, held_out, settings, seed=seed, horizon=horizon, n_timing=n_timing,
                      stop_after=stop_after)
    return combine_splits(name, enc, parallel_map(_check_split, jobs, n_jobs=n_jobs), settings,
                          test_fraction=test_fraction, n_timing=n_timing)


def combine_splits(name: str, enc: Any, results: list[_SplitCheck], settings: AuditSettings, *,
                   test_fraction: float, n_timing: int | None = None) -> _Checks:
    """One candidate's layers from its splits' checks (:func:`_check_split`, in split order): the Cauchy combination
    of every layer's split p-values (``_combine``), or why a layer is insufficient or not applicable."""
    S = len(results)
    tasks = enc.grouped_by == "task" and bool(np.any(np.bincount(enc.unit) >= 2))
    ok = [r for r in results if r.error is None]
    errors = [r.error for r in results if r.error is not None]
    r_checks = [r.r_check for r in ok]
    r_ps: list[float | None] = [None if r.error else r.r_check.p_value for r in results]
    t_results = [r.timing for r in ok]
    t_ps: list[float | None] = [None if r.error else r.timing.p_value for r in results]
    k_results = [r.trials for r in ok if r.trials is not None]
    k_ps: list[float | None] = [None if r.error or r.trials is None else
                                (r.trials.p_value if r.trials.applicable else None) for r in results]
    l_infs = [r.l_inf for r in ok if r.l_inf is not None]
    n_test = np.array([r.n_test for r in results])
    n_fit = enc.n_traces - n_test
    times = [r.n_times for r in results]
    null = ok[-1].null if ok else None
    base = n_timing if n_timing is not None else settings.n_bootstrap
    replicates = ok[-1].replicates if ok else base
    level = settings.level
    what = f"the {name} model"
    # R∞ layer.
    if n_test.mean() < MIN_HALF or n_fit.mean() < MIN_HALF:
        need = math.ceil(MIN_HALF / min(test_fraction, 1.0 - test_fraction))
        r_layer = LayerResult("r_inf", "insufficient", None, "too_few_traces",
                              f"each half needs at least {MIN_HALF} usable traces (about {need} in all; "
                              f"{enc.n_traces} modelled)", traces_needed=need)
    else:
        first = r_checks[0] if r_checks else None
        vs = f" (split 1: {fmt(first.compared)} vs {fmt(first.pass_rate)})" if first is not None else ""
        r_layer = _combine("r_inf", r_ps, level, f"R∞ of {what} fitted on one half agrees with the held-out pass "
                           f"rate{vs}", f"R∞ of {what} fitted on one half disagrees with the held-out pass rate{vs}",
                           r_checks, {"model": name})
    # Timing layer.
    pass_rate = float(np.mean(enc.outcomes == _SUCCESS)) if enc.n_traces else 0.0
    if float(np.mean(times)) < MIN_TIMES:
        t_layer = _too_few_times(int(np.mean(times)), pass_rate, test_fraction)
    else:
        first_t = t_results[0] if t_results else None
        d = f" (split 1: D = {fmt(first_t.statistic)})" if first_t is not None and first_t.statistic is not None \
            else ""
        how = ("the null refits the family on redrawn fit halves" if null == "refit" else
               "the null holds the fitted model fixed, which rejects more easily")
        drawn = [int(r.timing.bootstrap["n_replicates"]) for r in ok if r.timing.bootstrap is not None]
        stops = [r.timing.settings["sequential"]["stop_after"] for r in ok if "sequential" in r.timing.settings]
        if stops:
            lo, hi = min(drawn), max(drawn)
            how += (f" ({lo if lo == hi else f'{lo}–{hi}'} of {replicates} replicates per split: they stop once "
                    f"{stops[0]} reach the observed D, Besag & Clifford's sequential p-value)")
        t_layer = _combine("timing", t_ps, level, f"the success-time law of {what} fits the held-out success times"
                           f"{d}; {how}", f"the held-out success times do not follow the law of {what}{d}; {how}",
                           t_results, {"model": name, "null": null, "n_replicates": replicates,
                                       "replicates_drawn": drawn, "stop_after": stops[0] if stops else None})
    # Trials layer.
    if not tasks:
        k_layer = LayerResult("trials", "not_applicable", None, "no_repeated_tasks",
                              "no task was tried twice, so the law of repeated trials cannot be tested; pass^k "
                              "(k ≥ 2) assumes the model's trials")
    elif not any(p is not None for p in k_ps):
        notes = sorted({n for r in k_results for n in r.notes}) or ["the test is undefined on every split"]
        k_layer = LayerResult("trials", "insufficient", None, "too_few_traces", "; ".join(notes),
                              traces_needed=math.ceil(MIN_REPEATED_TRACES / test_fraction), detail=k_results)
    else:
        first_k = next((r for r in k_results if r.p_value is not None), None)
        gap = ""
        if first_k is not None and first_k.ks:
            e0 = first_k.empirical[0]
            gap = (f" (split 1, k = {first_k.ks[0]}: model {fmt(first_k.model[0])} vs per-task "
                   f"{fmt(e0)})")
        k_layer = _combine("trials", k_ps, level, f"the pass^k of {what} agrees with the held-out tasks' "
                           f"per-task pass^k{gap}", f"the pass^k of {what} disagrees with the held-out tasks' "
                           f"per-task pass^k{gap}", k_results,
                           {"model": name, "model_trials": getattr(first_k, "trials", None),
                            "ks_tested": _ks_tested(k_results)})
    note = "; ".join(errors[:3]) + (f" (and {len(errors) - 3} more)" if len(errors) > 3 else "")
    return _Checks({"r_inf": r_layer, "timing": t_layer, "trials": k_layer},
                   float(np.mean(l_infs)) if l_infs else None, null, replicates,
                   f"the fit failed on {len(errors)} of {S} splits: {note}" if errors else "")


def _ks_tested(results: list[Any]) -> list[int]:
    """The k ≥ 2 whose pass^k every split with a p-value tested (the certificate certifies pass^k for these only)."""
    sets = [set(r.ks) for r in results if r.p_value is not None]
    return sorted(set.intersection(*sets)) if sets else []


def order_not_applicable(name: str, family: str) -> LayerResult:
    """The order layer of a family that models more than the current observed state."""
    fam = family_of(family)
    what = "task classes" if family == "task-classes" else fam.conditions_on if fam else "more than the state"
    return LayerResult("order", "not_applicable", None, "model_has_memory",
                       f"the {name} model conditions on {what}, so the first-order test does not apply; what-ifs and "
                       "sensitivities on its expanded states are not checked by any layer")


# ---------------------------------------------------------------------------------------------------- driver
def _loglik_se(unit_ll: list[float], n_traces: int) -> float | None:
    u = np.asarray(unit_ll, dtype=np.float64)
    if u.size < 2 or n_traces <= 0:
        return None
    return float(np.std(u, ddof=1) * math.sqrt(u.size) / n_traces)


def _reason(requested: str, choice: Any) -> str:
    chosen = choice.chosen
    if requested == "auto":
        if is_first_order(chosen):
            return f"the first-order chain is kept: {choice.reason}"
        return f"{chosen} is chosen: {choice.reason}"
    markov = next((c for c in choice.candidates if is_first_order(c.name)), None)
    own = next((c for c in choice.candidates if c.name == chosen), None)
    text = f"the {requested} family was asked for, and {chosen} is its size with the best held-out log-likelihood"
    if own is not None and markov is not None and own.gain_vs_baseline is not None and own.z_vs_baseline is not None:
        text += (f" ({own.gain_vs_baseline:+.1f} nats against the first-order chain, "
                 f"{own.z_vs_baseline:+.1f} standard errors)")
    return text


def _quiet(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``fn`` without numerical warnings reaching the user's terminal (N28): the families' fits meet empty
    k-means clusters and 0/0 in unused rows as a matter of course, and every figure is checked for finiteness."""
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=RuntimeWarning)
            warnings.filterwarnings("ignore", message="One of the clusters is empty")
            return fn(*args, **kwargs)

    return run


@_quiet
def select_model(traces: TraceTable, codes: NDArray[np.int64], names: tuple[str, ...], alphabet: tuple[str, ...], *,
                 requested: str, split_by: str, test_fraction: float, n_splits: int, seed: int,
                 audit: AuditSettings | None, first_order: Certificate | None,
                 first_order_split_chain: Callable[[int], AbsorbingChain | None] | None, horizon: int,
                 n_refits: int, confidence: float, progress: Callable[..., Any] | None = None,
                 options: dict[str, Any] | None = None, n_jobs: int | None = None
                 ) -> tuple[ModelSelection, dict[str, LayerResult] | None]:
    """Choose (or fit) the model, check the candidates and refit the choice for its intervals (module docstring).

    ``codes``/``names``: the analysis's state of every step of ``traces`` (the traces in memory); ``alphabet`` the
    chain's observed states. ``first_order``: the analysis's certificate of the first-order chain (the baseline
    row's layers); ``first_order_split_chain(s)``: that chain fitted on the fit half of split s (its held-out L∞).
    ``audit`` None: no checks (``fit``). ``options`` go to :func:`~tracetochain.models.choose_model` (``sizes``,
    ``candidates`` with ``"auto"``, ``z_threshold``, ``with_task_classes``). ``n_jobs``: processes for the
    candidates' scores, their checks and the refits (:mod:`tracetochain._parallel`; the output does not depend on
    it). Returns the selection and, for a chosen family other than the first-order chain, the raw layers of its
    certificate (before Holm; :func:`model_certificate` finishes it).
    """
    from tracetochain._parallel import parallel_map
    from tracetochain._progress import phase_reporter
    from tracetochain.models import choose_model, fit_model, make_candidate
    from tracetochain.models.selection import MIN_UNITS
    from tracetochain.models.shared import encode_traces

    step = phase_reporter(progress)
    if requested not in model_choices() or is_first_order(requested):
        raise ValueError(f"model must be one of {', '.join(model_choices())}, got {requested!r}")
    if n_splits < 1:
        raise ValueError(f"model={requested!r} chooses by held-out log-likelihood, so it needs held-out splits "
                         "(n_splits >= 1, and not --in-sample)")
    labelled = traces.with_states(codes, list(names))
    enc = encode_traces(labelled, alphabet, group="auto")  # units are tasks when task ids repeat
    group: Literal["task", "trace"] = enc.grouped_by
    usable = traces.select_traces(traces.outcomes() != OutcomeCode.INVALID)
    if tuple(usable.trace_ids) != tuple(enc.trace_ids):
        raise AssertionError("internal: the encoded traces are not the usable traces in table order")
    # The choice holds units out whole (a held-out task is a new task): split s holds out the units whose id hash
    # (the task's when units are tasks) falls below the test fraction — analyze's rule with split_by = the unit.
    hashes = split_hashes(usable, group)
    held_units = [np.unique(enc.unit[holdout_mask(hashes, test_fraction, seed, s)]) for s in range(n_splits)]
    # The checks use the certificate's own halves (split_by), so the first-order row and the others meet the same
    # held-out traces; a model of tasks is fitted on the tasks' fit-half trials and checked on their held-out trials.
    cert_hashes = split_hashes(usable, split_by)
    held_traces = [holdout_mask(cert_hashes, test_fraction, seed, s) for s in range(n_splits)]
    step(f"model choice ({requested})")
    extra = dict(options or {})
    unknown = set(extra) - {"sizes", "candidates", "z_threshold", "with_task_classes"}
    if unknown:
        raise TypeError(f"unknown model option(s) {sorted(unknown)}; use sizes, candidates, z_threshold or "
                        "with_task_classes")
    if "candidates" in extra and requested != "auto":
        raise TypeError(f"candidates are chosen among with model='auto' only (model={requested!r} is one family)")
    common: dict[str, Any] = {"seed": seed, "splits": held_units, "test_fraction": test_fraction,
                              "checks": False, "group": group, "n_jobs": n_jobs, **extra}
    if requested == "auto":
        choice = choose_model(enc, **common)
    else:
        if enc.n_units < MIN_UNITS:
            raise ValueError(f"model={requested!r} picks the family's size by held-out log-likelihood, which needs "
                             f"at least {MIN_UNITS} {enc.grouped_by}s ({enc.n_units} here); use model='markov', "
                             "or 'auto' (which keeps the first-order chain and says why)")
        fitted = fit_model(enc, requested, **common)
        assert fitted.choice is not None
        choice = fitted.choice
    chosen = choice.chosen
    table = list(choice.candidates)
    best_of: dict[str, tuple[float, str]] = {}
    for c in table:
        ll = c.heldout_loglik_per_trace
        if ll is not None and (c.family not in best_of or ll > best_of[c.family][0]):
            best_of[c.family] = (ll, c.name)
    to_check = {first_order_family().name, chosen, *(nm for _, nm in best_of.values())}
    checks: dict[str, _Checks] = {}
    if audit is not None:
        # Every (candidate, split) pair is one job, all run together, so that the processes stay busy across
        # candidates of unequal cost (tracetochain/_parallel.py); each is seeded by its candidate and split.
        checked = [c.name for c in table if c.verdict != "failed" and c.name in to_check
                   and not is_first_order(c.name)]
        n_timing = {nm: None if nm == chosen else screen_replicates(audit.level) for nm in checked}
        jobs = {nm: split_jobs(nm, make_candidate(nm, seed=seed, group=group).make, enc, held_traces, audit,
                               seed=seed, horizon=horizon, n_timing=n_timing[nm],
                               stop_after=certificate_stop_after(audit.n_bootstrap) if nm == chosen
                               else SCREEN_STOP_AFTER) for nm in checked}
        phase = f"checking {len(checked)} candidate{'s' if len(checked) != 1 else ''} on {n_splits} splits"
        found = iter(parallel_map(_check_split, [j for nm in checked for j in jobs[nm]], n_jobs=n_jobs,
                                  done=lambda i, n: step(phase, i, n)))
        for nm in checked:
            checks[nm] = combine_splits(nm, enc, [next(found) for _ in jobs[nm]], audit, test_fraction=test_fraction,
                                        n_timing=n_timing[nm])
    evaluated = np.unique(np.concatenate(held_units)) if held_units else np.zeros(0, np.int64)
    n_eval = int(np.bincount(enc.unit, minlength=enc.n_units)[evaluated].sum())

    def build_rows(chosen: str) -> list[CandidateResult]:
        rows: list[CandidateResult] = []
        for c in table:
            layers: dict[str, LayerResult] = {}
            l_inf: float | None = None
            null: str | None = None
            reps: int | None = None
            note = ""
            if is_first_order(c.name) and first_order is not None:
                layers = dict(first_order.layers)
                l_inf = _first_order_l_inf(enc, held_traces, first_order_split_chain, horizon)
                timing = first_order.layers.get("timing")
                null = "refit" if timing is not None and timing.status in ("pass", "reject") else None
                reps = audit.n_bootstrap if audit is not None else None
                note = "the analysis's first-order chain and its certificate"
            elif c.name in checks:
                ch = checks[c.name]
                held = apply_family({**ch.layers, "order": order_not_applicable(c.name, c.family)},
                                    audit.level if audit is not None else 0.05)
                layers = {n: held[n] for n in LAYERS if n in held}  # the certificate's order of layers
                l_inf, null, reps, note = ch.l_inf, ch.timing_null, ch.replicates, ch.note
            verdict = ("chosen" if c.name == chosen else "baseline" if is_first_order(c.name) else
                       "not chosen" if c.verdict == "chosen" else c.verdict)
            if c.name != chosen and c.name in checks and c.name not in full_checks:
                note = "; ".join(x for x in (note, f"screening check (at most {reps} timing replicates, stopped "
                                                   f"after {SCREEN_STOP_AFTER} reach the observed statistic)") if x)
            rows.append(CandidateResult(
                c.name, c.family, c.size, c.n_parameters, c.heldout_loglik_per_trace,
                _loglik_se(choice.unit_loglik.get(c.name, []), n_eval), c.gain_vs_baseline, c.se_vs_baseline,
                c.z_vs_baseline, c.name == chosen, verdict, layers, l_inf, null, reps, note))
        return rows

    full_checks = {chosen}
    rows = build_rows(chosen)
    better = [c.name for c in table if c.verdict in ("chosen", "better than the baseline, not chosen")]
    switched: str | None = None
    if requested == "auto" and audit is not None:
        # auto weighs the certificate (analysis/_weigh.py): a candidate as good on held-out likelihood (within one
        # standard error) that certifies more outputs replaces the choice, once re-checked with full replicates.
        alt = weigh_certificate(rows, chosen, choice.unit_loglik, better)
        if alt is not None and not is_first_order(alt):
            step(f"re-checking {alt} with the certificate's replicates")
            checks[alt] = heldout_checks(alt, make_candidate(alt, seed=seed, group=group).make, enc, held_traces,
                                         audit, seed=seed, horizon=horizon, test_fraction=test_fraction,
                                         stop_after=certificate_stop_after(audit.n_bootstrap), n_jobs=n_jobs)
            full_checks.add(alt)
            again = weigh_certificate(build_rows(chosen), chosen, choice.unit_loglik, better)
            if again == alt:
                switched, chosen = chosen, alt
        if switched is not None:
            rows = build_rows(chosen)
            choice = replace(choice, chosen=chosen, model=make_candidate(chosen, seed=seed, group=group).make()
                             .fit(enc))
        else:
            rows = build_rows(chosen)
    notes = list(choice.notes) + [n for n in enc.notes if n not in choice.notes]
    wc = would_certify(rows, chosen, choice.unit_loglik, better) if audit is not None else []
    if switched is not None:
        mine = next(r for r in rows if r.name == chosen)
        notes.append(f"{chosen} replaces {switched}, the likelihood's choice: its held-out log-likelihood is within "
                     f"one standard error of {switched}'s and its own held-out layers certify more outputs "
                     f"({', '.join(certified_outputs(mine.layers))})")
    notes += _forecast_hint(rows, chosen)
    if audit is not None and not is_first_order(chosen):
        # docs/statistics.md, "A chosen model's certificate has seen the choice": a nested choice would certify, on
        # most halves of the shared corpora, a model other than the one printed
        notes.append(f"{chosen} was chosen by its held-out likelihood on the same halves its certificate then "
                     "checks: the certificate is conditional on a choice that saw them")
    notes += [f"{w['candidate']} would certify {w['output']}; not chosen because {w['why_not_chosen']}"
              for w in wc if w["output"] in ("R(d)", "pass^k", "R_inf")]
    splits = {"n_splits": n_splits, "by": split_by, "test_fraction": test_fraction, "seed": seed,
              "rule": "held out iff u(id hash, seed, split) < test_fraction (SplitMix64); the choice holds out whole "
                      "units (tasks when task ids repeat, else traces), the checks the certificate's halves (by "
                      f"{split_by})",
              "choice_by": group, "n_units": enc.n_units, "n_test_traces": [int(m.sum()) for m in held_traces]}
    family = next((c.family for c in table if c.name == chosen), first_order_family().name)
    reason = _reason(requested, choice)
    if switched is not None:
        reason = (f"{chosen} is chosen: as good on held-out traces as {switched} (within one standard error) and "
                  "its held-out layers certify more outputs")
    selection = ModelSelection(requested, chosen, family, reason, tuple(rows), enc.grouped_by,
                               enc.n_units, enc.n_traces, splits, choice, notes=tuple(notes),
                               length_histogram=_length_histogram(enc), would_certify=tuple(wc))
    if is_first_order(chosen):
        return selection, None
    model = choice.model
    assert model is not None
    compiled = model.to_chain()
    raw = None
    if chosen in checks:
        raw = {**checks[chosen].layers, "order": order_not_applicable(chosen, family)}
    draws: list[Any] = []
    unavailable: str | None = None
    interval_settings: dict[str, Any] = {}
    if n_refits > 0:
        # The refits are kept fitted, not compiled: each is compiled when its quantities are computed and dropped
        # after (model_intervals), so n_refits dense m × m chains never sit in memory together.
        first = np.unique(enc.unit, return_index=True)[1]
        weights = replicate_weights(hashes[first], seed, range(n_refits), "poisson").astype(np.int64)
        proto = model.like()
        refits = [_RefitJob(proto, enc, weights[:, b]) for b in range(n_refits)]
        phase = f"intervals ({n_refits} refits of {chosen})"
        draws = [d for d in parallel_map(_refit, refits, n_jobs=n_jobs, done=lambda i, n: step(phase, i, n))
                 if d is not None]
        failed = n_refits - len(draws)
        interval_settings = {"n_refits": n_refits, "n_failed": failed, "seed": seed, "confidence": confidence,
                             "resample_by": enc.grouped_by, "weights": "Poisson(1) of the unit's id hash",
                             "refit": f"{chosen} (family and size fixed)"}
        if not draws:
            unavailable = f"none of the {n_refits} refits of {chosen} could be fitted"
    else:
        unavailable = "no intervals were asked for"
    if compiled.n_components > 1 and compiled.trials == "task":
        notes.append(f"trials of one task share a class of {chosen}: pass^k = Σ_c w_c R_c^k, not R∞^k")
    return replace(selection, model=model, compiled=compiled, draws=tuple(draws),
                   interval_settings=interval_settings, intervals_unavailable=unavailable,
                   notes=tuple(notes), n_jobs=n_jobs), raw


@dataclass(frozen=True)
class _RefitJob:
    """One refit behind a chosen model's intervals: the family at its fitted size, on units resampled by weight."""

    proto: Any
    enc: Any
    weights: NDArray[np.int64]


def _refit(job: _RefitJob) -> Any:
    """The refit of ``job`` (None when the family cannot be fitted on that resample)."""
    from tracetochain.models.passk import resample_units

    units = np.repeat(np.arange(job.enc.n_units, dtype=np.int64), job.weights)
    try:
        return copy.deepcopy(job.proto).fit(resample_units(job.enc, units))
    except _FIT_ERRORS:
        return None


def _refit_law(job: _RefitJob, *, horizon: int) -> tuple[float, NDArray[np.float64]] | None:
    """R∞ and R(0..horizon) of the refit of ``job`` (None when it cannot be fitted or compiled)."""
    refit = _refit(job)
    if refit is None:
        return None
    try:
        chain = refit.to_chain(keep=False).chain
        return float(chain.r_inf), chain.reliability(horizon)
    except _FIT_ERRORS:
        return None


def _forecast_hint(rows: list[CandidateResult], chosen: str) -> list[str]:
    """When the chosen model fails the held-out timing layer, name the best-scoring checked candidate that passes it
    (and the R∞ layer): the model to forecast R(d) with, at a cost in likelihood (the choice does not move)."""
    mine = next((r for r in rows if r.name == chosen), None)
    timing = None if mine is None else mine.layers.get("timing")
    if timing is None or timing.status != "reject":
        return []
    ok = [r for r in rows if r.name != chosen and r.layers.get("timing") is not None
          and r.layers["timing"].status == "pass" and r.layers["r_inf"].status == "pass"]
    if not ok:
        return ["no checked candidate passes the held-out timing layer either: R(d) and step budgets stay withheld"]
    best = max(ok, key=lambda r: r.heldout_loglik_per_trace or -math.inf)
    how = (f"run with --model {best.family}" if best.family in model_choices() else
           f"fit it with tracetochain.models.make_candidate({best.name!r})")
    return [f"{chosen} fails the held-out timing layer; {best.name} passes it (p {fmt(best.layers['timing'].p_value)}, "
            f"a screening check) at a held-out log-likelihood of {fmt(best.heldout_loglik_per_trace)} per trace "
            f"against {fmt(mine.heldout_loglik_per_trace if mine else None)}: to forecast R(d), {how}"]


def _first_order_l_inf(enc: Any, held: list[NDArray[np.bool_]], split_chain: Callable[[int], AbsorbingChain | None]
                       | None, horizon: int) -> float | None:
    if split_chain is None:
        return None
    out = []
    for s, mask in enumerate(held):
        chain = split_chain(s)
        if chain is not None:
            hist = _length_histogram(enc.select(np.flatnonzero(mask)))
            out.append(l_inf_distance(chain.reliability(horizon), _empirical_rdc(hist, horizon)))
    return float(np.mean(out)) if out else None


def model_certificate(selection: ModelSelection, layers: dict[str, LayerResult], audit: AuditSettings, *,
                      horizon: int, settings: dict[str, Any]) -> Certificate:
    """The certificate of the chosen model from its own held-out layers (Holm, per-output statuses and the decision
    of :func:`~tracetochain.audit._certificate.build_certificate`)."""
    compiled = selection.compiled
    assert compiled is not None
    D = int(horizon)
    model_rdc = compiled.chain.reliability(D)
    hist = selection.length_histogram
    emp = None if hist is None else _empirical_rdc(hist, D)
    doc = {"audit": audit.to_dict(), "model": selection.chosen, "model_family": selection.family,
           "prior": f"not used: the {selection.family} model has its own estimator (rows shrunk toward pooled rows)",
           **settings}
    return build_certificate(layers, level=audit.level, settings=doc, horizon=D,
                             l_inf=None if emp is None else l_inf_distance(model_rdc, emp),
                             model_rdc=tuple(float(x) for x in model_rdc),
                             empirical_rdc=() if emp is None else tuple(float(x) for x in emp),
                             splits={**selection.splits, "mean_test": round(float(np.mean(
                                 selection.splits["n_test_traces"]))), "n_usable": selection.n_traces},
                             chain=compiled.chain, state_model=selection.model)


def model_costs(chain: AbsorbingChain, certificate: Certificate | None, selection: ModelSelection) -> dict[str, Any]:
    """The cost document of a chosen model other than the first-order chain: not computed yet, and why (the cost
    model gives every observed state a per-visit cost; the expanded states would need their own)."""
    from tracetochain.costs import cost_report

    doc = cost_report(chain, intervals=None, certificate=certificate)
    doc["reason"] = (f"cost figures are computed for the first-order chain only; the chosen {selection.chosen} "
                     "model's expanded states have no per-visit costs of their own yet (run with --model markov for "
                     "the cost section)")
    return doc


# ---------------------------------------------------------------------------------------------------- compare
@dataclass(frozen=True, eq=False)
class ModelComparison:
    """The model side of ``compare(..., model=…)``: one family and size for both sets (chosen on A ∪ B by held-out
    log-likelihood, or asked for), fitted on each set, with refits over each set's units behind ΔR∞ and ΔR(d)."""

    chosen: str
    family: str
    reason: str
    choice: Any = field(repr=False)
    compiled: tuple[Any, Any] = field(repr=False)
    r_inf_draws: tuple[NDArray[np.float64], NDArray[np.float64]] = field(repr=False)
    reliability_draws: tuple[NDArray[np.float64], NDArray[np.float64]] = field(repr=False)
    n_failed: tuple[int, int] = (0, 0)
    grouped_by: str = "trace"

    def to_dict(self, ks: Sequence[int] = (1, 2, 3, 4, 5)) -> dict[str, Any]:
        a, b = self.compiled
        rows = [{"name": c.name, "family": c.family, "n_parameters": c.n_parameters,
                 "heldout_loglik_per_trace": c.heldout_loglik_per_trace, "gain_vs_baseline": c.gain_vs_baseline,
                 "z_vs_baseline": c.z_vs_baseline, "chosen": c.name == self.chosen}
                for c in getattr(self.choice, "candidates", ())]
        return json_dict({
            "chosen": self.chosen, "family": self.family, "reason": self.reason, "grouped_by": self.grouped_by,
            "candidates": rows, "r_inf": {"a": a.chain.r_inf, "b": b.chain.r_inf},
            "pass_hat_k": {"a": {str(k): float(v) for k, v in zip(ks, a.pass_hat_k(list(ks)), strict=True)},
                           "b": {str(k): float(v) for k, v in zip(ks, b.pass_hat_k(list(ks)), strict=True)}},
            "trials": {"a": a.trials, "b": b.trials}, "n_refits_failed": list(self.n_failed),
            "scope": "R∞, ΔR∞ and ΔR(d) are the model's; the per-state homogeneity test, the transitions that moved "
                     "and the costs are the first-order chains' on the observed states",
        })


@_quiet
def compare_models(labelled: tuple[TraceTable, TraceTable], alphabet: tuple[str, ...], *, requested: str,
                   seed: int, samples: int, horizon: int, test_fraction: float = 0.5, n_splits: int = 5,
                   options: dict[str, Any] | None = None, n_jobs: int | None = None) -> ModelComparison:
    """The model of :class:`ModelComparison`: the candidates are scored on A ∪ B (every trace and task id prefixed by
    its set, so units never straddle the sets) over held-out splits by id hash; the chosen family and size are fitted
    on A and on B; each side is refitted ``samples`` times on its units resampled with Poisson(1) weights of their id
    hash (seed for A, seed + 1 for B, as the first-order comparison). ``n_jobs``: processes for the candidates and
    the refits (:mod:`tracetochain._parallel`; the result does not depend on it)."""
    import pyarrow as pa

    from tracetochain._parallel import parallel_map
    from tracetochain.models import choose_model, fit_model, make_candidate
    from tracetochain.models.selection import MIN_UNITS
    from tracetochain.models.shared import encode_traces

    if requested not in model_choices() or is_first_order(requested):
        raise ValueError(f"model must be one of {', '.join(model_choices())}, got {requested!r}")
    sides = []
    for k, t in enumerate(labelled):
        arrow = t.to_arrow()
        for col in ("trace_id", "task_id"):
            if col in arrow.column_names:
                vals = arrow.column(col).to_pylist()
                arrow = arrow.set_column(arrow.column_names.index(col), col, pa.array(
                    [None if v is None else f"{'AB'[k]}/{v}" for v in vals], pa.string()))
        sides.append(TraceTable.from_arrow(arrow, source=t.report.source))
    cols = [c for c in sides[0].to_arrow().column_names if c in sides[1].to_arrow().column_names]
    union = TraceTable.from_arrow(pa.concat_tables([s.to_arrow().select(cols) for s in sides],
                                                   promote_options="permissive"), source="A ∪ B")
    repeats = "task_id" in union.columns and _repeats(union)
    group: Literal["task", "trace"] = "task" if repeats else "trace"
    enc = encode_traces(union, alphabet, group=group)
    usable = union.select_traces(union.outcomes() != OutcomeCode.INVALID)
    hashes = split_hashes(usable, group)
    held = [np.unique(enc.unit[holdout_mask(hashes, test_fraction, seed, s)]) for s in range(n_splits)]
    common: dict[str, Any] = {"seed": seed, "splits": held, "test_fraction": test_fraction, "checks": False,
                              "group": group, "refit": False, "n_jobs": n_jobs, **dict(options or {})}
    if requested == "auto":
        choice = choose_model(enc, **common)
    else:
        if enc.n_units < MIN_UNITS:
            raise ValueError(f"model={requested!r} picks the family's size by held-out log-likelihood, which needs "
                             f"at least {MIN_UNITS} {enc.grouped_by}s in A ∪ B ({enc.n_units} here)")
        common.pop("refit")
        fitted = fit_model(enc, requested, **common)
        assert fitted.choice is not None
        choice = fitted.choice
    chosen = choice.chosen
    family = next((c.family for c in choice.candidates if c.name == chosen), first_order_family().name)
    compiled = []
    r_draws: list[NDArray[np.float64]] = []
    rel_draws: list[NDArray[np.float64]] = []
    failed = []
    for k, side in enumerate(sides):
        side_enc = encode_traces(side, alphabet, group=group)
        model = make_candidate(chosen, seed=seed, group=group).make().fit(side_enc)
        compiled.append(model.to_chain())
        side_usable = side.select_traces(side.outcomes() != OutcomeCode.INVALID)
        h = split_hashes(side_usable, group)
        first = np.unique(side_enc.unit, return_index=True)[1]
        w = replicate_weights(h[first], seed + k, range(samples), "poisson").astype(np.int64)
        proto = model.like()
        laws = parallel_map(functools.partial(_refit_law, horizon=horizon),
                            [_RefitJob(proto, side_enc, w[:, b]) for b in range(samples)], n_jobs=n_jobs)
        r = [law[0] for law in laws if law is not None]
        rel = [law[1] for law in laws if law is not None]
        bad = samples - len(r)
        if not r:
            raise ValueError(f"none of the {samples} refits of {chosen} on set {'AB'[k]} could be fitted")
        r_draws.append(np.asarray(r))
        rel_draws.append(np.asarray(rel))
        failed.append(bad)
    reason = _reason(requested, choice) + " (scored on A ∪ B)"
    return ModelComparison(chosen, family, reason, choice, (compiled[0], compiled[1]), (r_draws[0], r_draws[1]),
                           (rel_draws[0], rel_draws[1]), (failed[0], failed[1]), group)


def _repeats(traces: TraceTable) -> bool:
    import pyarrow.compute as pc

    task = traces.select_traces(traces.outcomes() != OutcomeCode.INVALID).trace_column("task_id").drop_null()
    return len(task) > len(pc.unique(task))
