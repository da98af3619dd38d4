"""Model choice by held-out likelihood over repeated splits, with the first-order chain as the baseline.

Every candidate (a family at a size: ``markov``, ``lifted(k=2)``, ``duration``, ``hmm(K=3)``, ``mixture(C=2)``, …)
is fitted on the fit part of each split and scores the held-out part by the log-likelihood of its traces — the
joint probability of their observed states and outcomes, the one quantity every family defines in the same way.
Splits are over *units* (tasks when task ids repeat, so a held-out task is a new task; else traces), and every
unit's score is averaged over the splits that held it out.

The rule (a paired comparison of units, then the one-standard-error rule of Breiman et al. 1984):

1. A candidate is *better than the baseline* when its total held-out gain over the first-order chain, summed over
   units, is at least ``z_threshold`` standard errors of that sum (the standard error of a sum of the units'
   paired differences). Otherwise the plain chain stays — extra structure has to earn its place.
2. Among the better candidates, the one with the largest gain is the best; the chosen model is the one with the
   fewest parameters whose gain is within one standard error (paired, against the best) of the best's.
3. When task ids repeat, task classes (:mod:`~tracetochain.models.tasks`) are put on the best structure of the
   first round and scored on the same splits: trials of one task may share their difficulty, which no within-trace
   structure can express, and which is what pass^k depends on.

The chosen model is then refitted on all traces.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tracetochain._display import Display, ResultDisplay, Table, fmt_number
from tracetochain.exceptions import TraceToChainError
from tracetochain.families import (
    Candidate,
    default_candidates,
    default_sizes,
    families,
    family_of,
    first_order_family,
    get_family,
    model_choices,
    parse_candidate,
)
from tracetochain.models._base import CompiledModel, TraceModel
from tracetochain.models._encoded import EncodedTraces, Grouping, encode_traces
from tracetochain.models.tasks import TaskClassModel
from tracetochain.traces import TraceTable

#: Fewer units (tasks or traces) than this and no family is compared: the first-order chain is kept.
MIN_UNITS = 20


def __getattr__(name: str) -> Any:
    # The family tables are views of the registry (:mod:`~tracetochain.families`), read when asked so that
    # a family registered after import is in them.
    if name in _REGISTRY_VIEWS:
        return _REGISTRY_VIEWS[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_REGISTRY_VIEWS: dict[str, Callable[[], Any]] = {
    "FAMILIES": lambda: tuple(families()),
    "DEFAULT_CANDIDATES": default_candidates,
    "DEFAULT_SIZES": default_sizes,
    #: What ``--model`` accepts: a family (its best size by held-out likelihood) or "auto" (the rule above).
    "MODEL_CHOICES": model_choices,
}


def _make(family: str, size: int, seed: int, group: Grouping) -> Candidate:
    return get_family(family).candidate_at(size, seed=seed, group=group)


def _with_task_classes(winner: Candidate, size: int, seed: int, group: Grouping) -> Candidate:
    make = winner.make
    return Candidate(f"{winner.name}+tasks(C={size})", "task-classes", size,
                     lambda: TaskClassModel(make(), size, seed=seed, group=group))


def _takes_task_classes(c: Candidate) -> bool:
    fam = family_of(c.family)
    return fam is None or fam.task_classes


def make_candidate(name: str, *, seed: int = 0, group: Grouping = "auto") -> Candidate:
    """The candidate a model-choice table names (``"lifted(k=3)"``, ``"hmm(K=4)"``, ``"duration+tasks(C=2)"`` …),
    built as :func:`choose_model` builds it (same seed and grouping), e.g. to refit it on the fit half of a split.

    >>> make_candidate("lifted(k=3)+tasks(C=2)").family
    'task-classes'
    """
    fam, size, tasks = parse_candidate(name)
    cand = fam.candidate_at(size, seed=seed, group=group)
    return _with_task_classes(cand, tasks, seed, group) if tasks else cand


@dataclass(frozen=True)
class CandidateScore:
    """One row of the model-choice table."""

    name: str
    family: str
    size: int | None
    heldout_loglik_per_trace: float | None
    gain_vs_baseline: float | None
    se_vs_baseline: float | None
    z_vs_baseline: float | None
    n_parameters: int | None
    fit_seconds: float | None
    verdict: str
    reason: str
    #: (splits where the check passed, splits where it applied) for each certificate layer (None: not checked).
    timing_passes: tuple[int, int] | None = None
    r_inf_holds: tuple[int, int] | None = None
    pass_k_agrees: tuple[int, int] | None = None
    #: The timing null used: "refit" (the family refitted on redrawn fit halves) or "fixed model".
    timing_null: str | None = None

    def to_dict(self) -> dict[str, Any]:
        from tracetochain.audit.shared import json_dict

        return json_dict(dict(self.__dict__))


@dataclass(frozen=True, eq=False, repr=False)
class ModelChoice(ResultDisplay):
    """The outcome of :func:`choose_model`: the table, the choice and why, and the chosen model refitted on all."""

    chosen: str
    reason: str
    baseline: str
    candidates: tuple[CandidateScore, ...]
    model: TraceModel | None
    n_splits: int
    test_fraction: float
    grouped_by: str
    n_units: int
    n_traces: int
    z_threshold: float
    seed: int
    notes: tuple[str, ...] = ()
    #: Per output layer ("timing", "r_inf", "pass_k"): the candidate with the largest held-out gain among those that
    #: passed that layer's held-out check in most splits (None if none did; empty without checks).
    chosen_for: dict[str, str | None] = field(default_factory=dict)
    #: Every candidate's held-out log-likelihood of each unit that was held out (averaged over the splits that
    #: held it out), in unit order: the data of the decision (:func:`decide` re-applies the rule to them).
    unit_loglik: dict[str, list[float]] = field(default_factory=dict, repr=False)
    #: Each candidate's share of the unit resamples in which the rule chooses it (:func:`choice_stability`).
    stability: dict[str, float] = field(default_factory=dict)

    def score(self, name: str) -> CandidateScore:
        for c in self.candidates:
            if c.name == name:
                return c
        raise KeyError(f"no candidate {name!r}; candidates are {[c.name for c in self.candidates]}")

    def to_dict(self) -> dict[str, Any]:
        from tracetochain.audit.shared import json_dict

        return json_dict({
            "kind": "tracetochain.model_choice", "chosen": self.chosen, "reason": self.reason,
            "baseline": self.baseline, "candidates": [c.to_dict() for c in self.candidates],
            "n_splits": self.n_splits, "test_fraction": self.test_fraction, "grouped_by": self.grouped_by,
            "n_units": self.n_units, "n_traces": self.n_traces, "z_threshold": self.z_threshold, "seed": self.seed,
            "notes": list(self.notes), "chosen_for": dict(self.chosen_for), "unit_loglik": self.unit_loglik,
            "stability": {"shares": dict(self.stability), "n_resamples": STABILITY_RESAMPLES,
                          "resampled": f"held-out {self.grouped_by}s, with replacement; fits not redone"},
            "rule": "held-out log-likelihood over repeated splits of units; better than the first-order chain when "
                    "the summed gain is >= z_threshold standard errors; among those, the fewest parameters within "
                    "one standard error of the best",
        })

    def table_rows(self) -> list[list[str]]:
        def share(x: tuple[int, int] | None) -> str:
            return "—" if x is None or x[1] == 0 else f"{x[0]}/{x[1]}"

        rows = []
        for c in self.candidates:
            rows.append([c.name, _fmt(c.heldout_loglik_per_trace, 4), _fmt(c.gain_vs_baseline, 1),
                         _fmt(c.z_vs_baseline, 1), "—" if c.n_parameters is None else str(c.n_parameters),
                         share(c.timing_passes), share(c.r_inf_holds), share(c.pass_k_agrees),
                         _fmt(c.fit_seconds, 2), c.verdict])
        return rows

    def describe(self) -> str:
        head = ["candidate", "held-out LL/trace", "gain vs markov (nats)", "z", "parameters", "timing ok", "R∞ ok",
                "pass^k ok", "fit s", "verdict"]
        rows = self.table_rows()
        if not rows:
            return f"Model choice: {self.chosen} — {self.reason}"
        width = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(head)]
        lines = [f"Model choice over {self.n_splits} held-out splits of {self.n_units} {self.grouped_by}s "
                 f"({self.test_fraction:.0%} held out each time): chose {self.chosen} — {self.reason}",
                 "  ".join(h.ljust(w) for h, w in zip(head, width, strict=True))]
        lines += ["  ".join(v.ljust(w) for v, w in zip(r, width, strict=True)) for r in rows]
        if self.stability:
            lines.append(f"choice stability ({STABILITY_RESAMPLES} resamples of the held-out {self.grouped_by}s): "
                         + ", ".join(f"{nm} {v:.0%}" for nm, v in self.stability.items()))
        if self.chosen_for:
            lines.append("best held-out model passing each check in most splits: " + "; ".join(
                f"{k}: {v or 'none'}" for k, v in self.chosen_for.items()))
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.describe()

    def _display(self) -> Display:
        cols = ("candidate", "heldout_loglik_per_trace", "gain_vs_baseline", "z_vs_baseline", "n_parameters",
                "timing_passes", "r_inf_holds", "pass_k_agrees", "fit_seconds", "verdict", "reason")
        rows = tuple((c.name, c.heldout_loglik_per_trace, c.gain_vs_baseline, c.z_vs_baseline, c.n_parameters,
                      *(None if x is None else f"{x[0]}/{x[1]}" for x in (c.timing_passes, c.r_inf_holds,
                                                                         c.pass_k_agrees)),
                      c.fit_seconds, c.verdict, c.reason) for c in self.candidates)
        return Display(f"{self.chosen} — {self.reason}", kind="Model choice", lines=self.notes,
                       tables=(Table("candidates", cols, rows, digits={"heldout_loglik_per_trace": 4,
                                                                      "gain_vs_baseline": 1, "z_vs_baseline": 1,
                                                                      "fit_seconds": 2}),))


def _fmt(x: float | None, digits: int) -> str:
    return fmt_number(x, digits)


def _expand(candidates: Iterable[str | Candidate], sizes: Mapping[str, Sequence[int]], seed: int,
            group: Grouping) -> list[Candidate]:
    out: list[Candidate] = []
    for c in candidates:
        if isinstance(c, Candidate):
            out.append(c)
            continue
        fam = get_family(str(c))
        for size in sizes.get(fam.name, fam.sizes):
            out.append(fam.candidate_at(int(size), seed=seed, group=group))
    names = [c.name for c in out]
    if len(set(names)) != len(names):
        raise ValueError("candidate names must be unique")
    return out


def unit_splits(n_units: int, n_splits: int, test_fraction: float, seed: int) -> list[NDArray[np.int64]]:
    """Held-out units of each split: repeated K-fold over units, K = round(1 / test_fraction).

    Split s holds out fold s mod K of the seeded permutation number s div K, so ``n_splits = K`` is one K-fold
    cross-validation (every unit held out exactly once) and more splits repeat it with new permutations.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction!r}")
    K = max(2, round(1.0 / test_fraction))
    if n_units < K:
        raise ValueError(f"cannot hold out {test_fraction:.0%} of {n_units} unit(s) and keep any to fit on")
    out: list[NDArray[np.int64]] = []
    for s in range(n_splits):
        perm = np.random.default_rng([seed, s // K]).permutation(n_units)
        folds = np.array_split(perm, K)
        out.append(np.sort(folds[s % K]).astype(np.int64))
    return out


def _traces_of(enc: EncodedTraces, units: NDArray[np.int64]) -> NDArray[np.int64]:
    mask = np.zeros(enc.n_units, bool)
    mask[units] = True
    return np.flatnonzero(mask[enc.unit]).astype(np.int64)


@dataclass
class _Scores:
    total: NDArray[np.float64]  # per unit, summed over the splits holding it out
    params: list[int]
    seconds: list[float]
    error: str | None = None
    timing_p: list[float | None] = field(default_factory=list)
    r_inf_holds: list[bool] = field(default_factory=list)
    pass_k_agrees: list[bool | None] = field(default_factory=list)
    timing_null: str | None = None


def _pass_k_agrees(compiled: CompiledModel, test: EncodedTraces, seed: int) -> bool | None:
    """Does the model's pass^k (k = 2 … the trials every held-out task has) fall inside the held-out tasks'
    per-task estimate's 95 % task-bootstrap interval at every k? None when no held-out task has two trials."""
    from tracetochain.models.passk import pass_k_check

    if test.grouped_by != "task":
        return None
    return pass_k_check(test, compiled, n_bootstrap=400, seed=seed).agrees


def _cheap_to_refit(model: TraceModel) -> bool:
    """Chains on contexts (and task classes on them) refit in a fraction of a second; EM families do not."""
    from tracetochain.models._context import ContextChainModel

    if isinstance(model, TaskClassModel):
        return isinstance(model.base, ContextChainModel)
    return isinstance(model, ContextChainModel)


def _evaluate(cand: Candidate, enc: EncodedTraces, splits: list[NDArray[np.int64]], *, checks: bool = False,
              n_timing: int = 49, seed: int = 0) -> _Scores:
    """Fit on every split's fit part and score its held-out units; with ``checks`` also run the held-out checks
    (timing with a refitting null where the family is cheap to refit, else against the fixed model with twice the
    replicates; R∞ against the held-out pass rate; pass^k against the held-out tasks)."""
    from tracetochain.audit.shared import r_inf_check_counts
    from tracetochain.models.evaluation import timing_check

    out = _Scores(np.zeros(enc.n_units), [], [])
    for i, test_units in enumerate(splits):
        test_mask = np.zeros(enc.n_units, bool)
        test_mask[test_units] = True
        fit = enc.select(_traces_of(enc, np.flatnonzero(~test_mask)))
        test = enc.select(_traces_of(enc, test_units))
        t0 = time.perf_counter()
        try:
            model = cand.make().fit(fit)
            ll = model.unit_loglik(test)
            out.params.append(model.n_parameters)
            out.seconds.append(time.perf_counter() - t0)
            if checks:
                compiled = model.to_chain()
                refit = _cheap_to_refit(model)
                tm = timing_check(compiled, test, n_bootstrap=n_timing if refit else 2 * n_timing + 1,
                                  seed=seed + i, refit=model.like if refit else None,
                                  fit_shape=fit if refit else None)
                out.timing_p.append(tm.p_value)
                out.timing_null = "refit" if refit else "fixed model"
                n_succ = int((test.outcomes == 0).sum())
                out.r_inf_holds.append(bool(r_inf_check_counts(compiled.chain.r_inf, n_succ, test.n_traces,
                                                               n_fit=fit.n_traces).holds))
                out.pass_k_agrees.append(_pass_k_agrees(compiled, test, seed + i))
        except (TraceToChainError, ValueError, ArithmeticError, np.linalg.LinAlgError) as exc:
            out.error = f"{type(exc).__name__}: {exc}"
            return out
        if not np.all(np.isfinite(ll)):
            out.error = "a held-out log-likelihood was not finite"
            return out
        out.total[test_units] += ll  # test units are numbered in order, as select() renumbers them
    return out


def _share(values: Sequence[bool | None]) -> tuple[int, int]:
    """(#True, #applicable)."""
    used = [v for v in values if v is not None]
    return sum(bool(v) for v in used), len(used)


def paired_gain(a: NDArray[np.float64], b: NDArray[np.float64]) -> tuple[float, float]:
    """Total held-out gain Σ_u (a_u − b_u) over units and the standard error of that sum, √U · sd(a − b)."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    se = float(np.std(d, ddof=1) * math.sqrt(d.size)) if d.size > 1 else 0.0
    return float(d.sum()), se


def bonferroni_z(n_compared: int, family_level: float = 0.05) -> float:
    """One-sided z for a family-wise ``family_level`` over ``n_compared`` comparisons with the baseline.

    >>> round(bonferroni_z(1), 3), round(bonferroni_z(12), 3)
    (1.645, 2.638)
    """
    from scipy.special import ndtri  # norm.ppf's own routine, bit for bit, without importing scipy.stats

    return float(ndtri(1.0 - family_level / max(n_compared, 1)))


@dataclass(frozen=True)
class Decision:
    """The rule's outcome: the choice, why, the candidates better than the baseline, the best of them."""

    chosen: str
    reason: str
    better: tuple[str, ...]
    best: str | None
    z_threshold: float


#: Smallest summed held-out gain (nats; a likelihood ratio of e over all held-out units) that counts as better.
MIN_GAIN = 1.0


def decide(unit_loglik: Mapping[str, NDArray[np.float64]], n_parameters: Mapping[str, int | None], *,
           baseline: str = "markov", z_threshold: float | None = None, min_gain: float = MIN_GAIN) -> Decision:
    """The choice from held-out per-unit log-likelihoods (module docstring, steps 1–2).

    A candidate is better than the baseline when its summed gain is at least ``min_gain`` nats and at least
    ``z_threshold`` standard errors (default :func:`bonferroni_z` over the candidates); the chosen one has the fewest
    parameters among the better ones whose gain is within one standard error (paired) of the best's. The floor in
    nats matters when a candidate collapses onto the baseline (a mixture whose classes coincide): it then differs
    from it by rounding only, a gain of hundredths of a nat whose standard error is smaller still, so z alone would
    call it better.
    """
    others = [nm for nm in unit_loglik if nm != baseline]
    z = bonferroni_z(len(others)) if z_threshold is None else float(z_threshold)
    base = unit_loglik[baseline]
    better = []
    for nm in others:
        g, se = paired_gain(unit_loglik[nm], base)
        if g >= min_gain and (se == 0 or g / se >= z):
            better.append(nm)
    if not better:
        return Decision(baseline, f"no candidate beats the first-order chain on held-out traces by {z:.2f} standard "
                                  f"errors and {min_gain:g} nat (extra structure is not supported by the data)", (),
                        None, z)
    best = max(better, key=lambda nm: paired_gain(unit_loglik[nm], base)[0])
    close = [nm for nm in better
             if paired_gain(unit_loglik[nm], unit_loglik[best])[0]
             >= -max(paired_gain(unit_loglik[nm], unit_loglik[best])[1], 1e-9)]

    def size(nm: str) -> int:
        n = n_parameters.get(nm)
        return n if n is not None else 10**9

    chosen = min(close, key=lambda nm: (size(nm), -paired_gain(unit_loglik[nm], base)[0]))
    g, se = paired_gain(unit_loglik[chosen], base)
    reason = (f"held-out gain over the first-order chain {g:.1f} nats ({g / se if se else math.inf:.1f} standard "
              f"errors; needed {z:.2f})")
    if chosen != best:
        reason += f"; {best} fits slightly better but not by more than one standard error, and has more parameters"
    return Decision(chosen, reason, tuple(better), best, z)


#: Bootstrap samples of the held-out units behind :func:`choice_stability`.
STABILITY_RESAMPLES = 200
#: A choice made in fewer resamples than this share is reported as not settled by the data.
SETTLED_SHARE = 0.9


def choice_stability(unit_loglik: Mapping[str, NDArray[np.float64]], n_parameters: Mapping[str, int | None], *,
                     z_threshold: float, baseline: str = "markov", n_resamples: int = STABILITY_RESAMPLES,
                     seed: int = 0) -> dict[str, float]:
    """How often the rule chooses each candidate when the held-out units are resampled.

    The units (tasks or traces) whose held-out log-likelihoods the decision rests on are drawn with replacement
    ``n_resamples`` times (Efron 1979) and :func:`decide` is applied to each sample with the same ``z_threshold``;
    the result is each candidate's share of the samples, most frequent first. The candidates are not refitted: this
    is the choice's sensitivity to which units happened to be scored, the selection frequencies of Buckland, Burnham
    & Augustin (1997) without their refits. A choice made in well under all samples is one the data do not pin down
    (on τ²-bench's 50 single-trial tasks the split seed alone changes it).

    >>> rng = np.random.default_rng(0)
    >>> base = rng.normal(-10.0, 1.0, 200)
    >>> shares = choice_stability({"markov": base, "better": base + 0.5, "same": base + rng.normal(0, 0.01, 200)},
    ...                           {"markov": 5, "better": 9, "same": 9}, z_threshold=2.0)
    >>> shares
    {'better': 1.0}
    """
    names = list(unit_loglik)
    values = {nm: np.asarray(unit_loglik[nm], dtype=np.float64) for nm in names}
    n_units = len(next(iter(values.values()))) if values else 0
    if n_units < 2 or n_resamples < 1:
        return {}
    rng = np.random.default_rng([seed, 0x5EED57AB])
    counts: dict[str, int] = {}
    for _ in range(n_resamples):
        idx = rng.integers(0, n_units, n_units)
        chosen = decide({nm: v[idx] for nm, v in values.items()}, n_parameters, baseline=baseline,
                        z_threshold=z_threshold).chosen
        counts[chosen] = counts.get(chosen, 0) + 1
    return {nm: c / n_resamples for nm, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))}


def stability_note(chosen: str, stability: Mapping[str, float]) -> str | None:
    """A sentence for a choice made in fewer than :data:`SETTLED_SHARE` of the resamples (None when settled)."""
    share = stability.get(chosen)
    if not stability or share is None or share >= SETTLED_SHARE:
        return None
    others = ", ".join(f"{nm} {v:.0%}" for nm, v in stability.items() if nm != chosen)
    return (f"the choice is not settled by these data: {chosen} is chosen in {share:.0%} of "
            f"{STABILITY_RESAMPLES} resamples of the held-out units ({others}); read the family as one of these")


def choose_model(traces: TraceTable | EncodedTraces, candidates: Iterable[str | Candidate] | None = None, *,
                 sizes: Mapping[str, Sequence[int]] | None = None, n_splits: int = 5, test_fraction: float = 0.2,
                 z_threshold: float | None = None, group: Grouping = "auto", seed: int = 0, refit: bool = True,
                 state_names: Sequence[str] | None = None, with_task_classes: bool = True, checks: bool = True,
                 n_timing_bootstrap: int = 49, splits: Sequence[NDArray[np.int64]] | None = None,
                 stability: bool = True, n_jobs: int | None = None) -> ModelChoice:
    """Pick a model family (and its size) by held-out log-likelihood over repeated splits (module docstring).

    Parameters
    ----------
    traces : TraceTable or EncodedTraces
        Labelled traces (states already assigned).
    candidates : iterable of family names or :class:`Candidate`, optional
        Registered families (:mod:`~tracetochain.families`; each expanded over ``sizes``), or ready-made
        candidates; default: every registered candidate family. The first-order chain is always added as the
        baseline.
    sizes : mapping, optional
        Sizes per family (classes, hidden states, order); default: each family's registered sizes.
    n_splits, test_fraction, seed
        The repeated held-out splits of units (:func:`unit_splits`; the defaults are one 5-fold
        cross-validation).
    z_threshold : float, optional
        How many standard errors of held-out gain a candidate needs over the first-order chain. Default: the
        one-sided Bonferroni bound for a family-wise 5 % over the candidates compared with the baseline
        (:func:`decide`), so more candidates do not mean more false alarms.
    group : {"auto", "task", "trace"}
        The unit of splitting and of a mixture's classes.
    refit : bool
        Refit the chosen model on all traces (``ModelChoice.model``).
    checks : bool
        Then run the certificate's held-out checks, on every split, for the baseline, the choice and the best
        candidate of every family: timing (KS of the held-out success times,
        :func:`~tracetochain.models.evaluation.timing_check`; the null refits chains on contexts on redrawn fit parts
        with ``n_timing_bootstrap`` replicates, and holds hidden-state and mixture models fixed with twice as many),
        R∞ against the held-out pass rate, and pass^k against the held-out tasks' per-task estimate. They do not
        move the choice; they fill the table and :attr:`ModelChoice.chosen_for`.
    with_task_classes : bool
        When task ids repeat, also try task classes (:class:`~tracetochain.models.tasks.TaskClassModel`, sizes
        ``sizes["tasks"]``) on the best structure of the first round.
    state_names : sequence of str, optional
        The alphabet (default: the labels seen in all traces — labels are observations, not fitted quantities).
    splits : sequence of int arrays, optional
        The held-out units of every split, given instead of drawn (``n_splits`` is then their number): how
        :func:`~tracetochain.analysis.analyze` scores the candidates on the halves its certificate holds out (unit
        hashes of trace or task ids). Every split must hold out at least one unit and keep at least one.
    stability : bool
        Resample the held-out units and report how often the rule makes each choice
        (:attr:`ModelChoice.stability`, :func:`choice_stability`), with a note when the choice is not settled.
    n_jobs : int, optional
        Processes over which the candidates are scored (:mod:`tracetochain._parallel`: default 1, or the value of
        an enclosing ``using_jobs``; -1 every CPU). The choice does not depend on it.
    """
    from tracetochain._parallel import parallel_map

    if splits is not None:
        n_splits = len(splits)
    if n_splits < 1:
        raise ValueError(f"n_splits must be >= 1, got {n_splits}")
    enc = encode_traces(traces, tuple(state_names) if state_names is not None else None, group=group)
    size_map = {**default_sizes(), **({} if sizes is None else dict(sizes))}
    cands = _expand(default_candidates() if candidates is None else candidates, size_map, seed, group)
    base = first_order_family().candidate_at(0, seed=seed, group=group)
    if not any(c.name == base.name for c in cands):
        cands.insert(0, base)
    if enc.n_units < MIN_UNITS:
        # Too little data to compare families out of sample: keep the plain chain and say why (no table).
        model = base.make().fit(enc) if refit else None
        return ModelChoice(base.name, f"only {enc.n_units} {enc.grouped_by}(s): at least {MIN_UNITS} are needed to "
                           "compare families on held-out data, so the first-order chain is kept",
                           base.name, (), model, 0, test_fraction, enc.grouped_by, enc.n_units, enc.n_traces,
                           z_threshold if z_threshold is not None else math.nan, seed,
                           ("insufficient evidence to choose a family",))
    if splits is None:
        held_out = unit_splits(enc.n_units, n_splits, test_fraction, seed)
    else:
        held_out = [np.unique(np.asarray(s, dtype=np.int64)) for s in splits]
        for i, s in enumerate(held_out):
            if s.size == 0 or s.size >= enc.n_units or s.min() < 0 or s.max() >= enc.n_units:
                raise ValueError(f"split {i} must hold out between 1 and {enc.n_units - 1} of the {enc.n_units} "
                                 f"units (indices 0 … {enc.n_units - 1}); it holds out {s.size}")
    held = np.zeros(enc.n_units)
    for s in held_out:
        held[s] += 1
    evaluated = held > 0
    unit_traces = np.bincount(enc.unit, minlength=enc.n_units)
    n_eval_traces = int(unit_traces[evaluated].sum())
    def evaluate(batch: list[Candidate], **options: Any) -> list[_Scores]:
        return parallel_map(functools.partial(_evaluate, enc=enc, splits=held_out, seed=seed, **options), batch,
                            n_jobs=n_jobs)

    scores: dict[str, _Scores] = {c.name: sc for c, sc in zip(cands, evaluate(cands), strict=True)}
    by_name = {c.name: c for c in cands}

    def mean_units(name: str) -> NDArray[np.float64]:
        out: NDArray[np.float64] = scores[name].total[evaluated] / held[evaluated]
        return out

    def unit_scores() -> dict[str, NDArray[np.float64]]:
        return {nm: mean_units(nm) for nm, sc in scores.items() if sc.error is None}

    notes: list[str] = []
    if scores["markov"].error is not None:
        raise ValueError(f"the first-order baseline could not be fitted: {scores['markov'].error}")
    params = {nm: int(np.median(sc.params)) if sc.params else None for nm, sc in scores.items()}
    first = decide(unit_scores(), params, z_threshold=z_threshold)
    # Round 2: task classes on the structure that won round 1 (tasks repeat: trials may share their difficulty).
    winner = first.best or "markov"
    task_sizes = tuple(size_map.get("tasks", default_sizes()["tasks"]))
    if enc.grouped_by == "task" and task_sizes and _takes_task_classes(by_name[winner]) and with_task_classes:
        extra = [_with_task_classes(by_name[winner], int(k), seed, group) for k in task_sizes]
        for c, sc in zip(extra, evaluate(extra), strict=True):
            scores[c.name] = sc
            by_name[c.name] = c
            cands.append(c)
            params[c.name] = int(np.median(scores[c.name].params)) if scores[c.name].params else None
        notes.append(f"task classes were tried on {winner}, the best structure of the first round, because task "
                     "ids repeat")
    decision = decide(unit_scores(), params, z_threshold=z_threshold)
    chosen, reason, good = decision.chosen, decision.reason, decision.better
    shares = (choice_stability(unit_scores(), params, z_threshold=decision.z_threshold, seed=seed)
              if stability else {})
    unsettled = stability_note(chosen, shares)
    if unsettled:
        notes.append(unsettled)
    if checks:
        # The certificate's held-out checks for the baseline, the choice and the best candidate of every family
        # (a second pass over the same splits; the others keep "—").
        fine = [c for c in cands if scores[c.name].error is None]
        best_of: dict[str, tuple[float, str]] = {}
        for c in fine:
            mean = float(np.mean(mean_units(c.name)))
            if c.family not in best_of or mean > best_of[c.family][0]:
                best_of[c.family] = (mean, c.name)
        checked = {"markov", chosen, *(nm for _, nm in best_of.values())}
        to_check = [c for c in fine if c.name in checked]
        for c, again in zip(to_check, evaluate(to_check, checks=True, n_timing=n_timing_bootstrap), strict=True):
            if again.error is None:
                sc = scores[c.name]
                sc.timing_p, sc.r_inf_holds = again.timing_p, again.r_inf_holds
                sc.pass_k_agrees, sc.timing_null = again.pass_k_agrees, again.timing_null

    def gain(a: str, b: str) -> tuple[float, float]:
        return paired_gain(mean_units(a), mean_units(b))

    table: list[CandidateScore] = []
    for c in cands:
        sc = scores[c.name]
        if sc.error is not None:
            table.append(CandidateScore(c.name, c.family, c.size, None, None, None, None, None, None, "failed",
                                        sc.error))
            continue
        ll = float(mean_units(c.name).sum() / max(n_eval_traces, 1))
        if c.name == "markov":
            g_, se_, z_ = 0.0, 0.0, None
        else:
            g_, se_ = gain(c.name, "markov")
            z_ = g_ / se_ if se_ > 0 else (0.0 if g_ == 0 else math.copysign(math.inf, g_))
        if c.name == chosen:
            verdict = "chosen"
        elif c.name == "markov":
            verdict = "baseline"
        elif c.name in good:
            verdict = "better than the baseline, not chosen"
        else:
            verdict = "not better than the baseline"
        tested = checks and bool(sc.timing_p or sc.r_inf_holds)
        timing_ok = _share([None if p is None else p > 0.05 for p in sc.timing_p]) if tested else None
        table.append(CandidateScore(c.name, c.family, c.size, ll, g_, se_, z_, params[c.name],
                                    float(np.mean(sc.seconds)) if sc.seconds else None, verdict,
                                    reason if c.name == chosen else "", timing_passes=timing_ok,
                                    r_inf_holds=_share(sc.r_inf_holds) if tested else None,
                                    pass_k_agrees=_share(sc.pass_k_agrees) if tested else None,
                                    timing_null=sc.timing_null if tested else None))
    chosen_for: dict[str, str | None] = {}
    if checks:
        ok_names = [r.name for r in table if r.verdict != "failed"]
        for layer in ("timing", "r_inf", "pass_k"):
            def passes(r: CandidateScore, layer: str = layer) -> bool:
                got = {"timing": r.timing_passes, "r_inf": r.r_inf_holds, "pass_k": r.pass_k_agrees}[layer]
                return got is not None and got[1] > 0 and 2 * got[0] > got[1]
            passing = [r for r in table if r.name in ok_names and passes(r)]
            chosen_for[layer] = max(passing, key=lambda r: (r.gain_vs_baseline or 0.0,
                                                            -(r.n_parameters or 0))).name if passing else None
    model = by_name[chosen].make().fit(enc) if refit else None
    if int((~evaluated).sum()):
        notes.append(f"{int((~evaluated).sum())} unit(s) were never held out (more splits would use them)")
    return ModelChoice(chosen, reason, "markov", tuple(table), model, n_splits, test_fraction, enc.grouped_by,
                       enc.n_units, enc.n_traces, decision.z_threshold, seed, tuple(notes), chosen_for,
                       {nm: v.tolist() for nm, v in unit_scores().items()}, shares)


# ---------------------------------------------------------------------------------------------------- one call


@dataclass(frozen=True, eq=False)
class ModelFit:
    """A fitted family ready for the certificate and the report: the model, its compiled chain, how it was chosen."""

    name: str
    model: TraceModel
    compiled: CompiledModel
    choice: ModelChoice | None

    def to_dict(self, *, horizon: int = 50, ks: tuple[int, ...] = (1, 2, 3, 4, 5, 8)) -> dict[str, Any]:
        """JSON-ready: the choice table (when there was a choice) and the compiled chain's summary."""
        from tracetochain.audit.shared import json_dict

        return json_dict({"kind": "tracetochain.model_fit", "model": self.name, "family": self.model.family,
                          "n_parameters": self.model.n_parameters,
                          "choice": self.choice.to_dict() if self.choice is not None else None,
                          "summary": self.compiled.summary(horizon=horizon, ks=ks)})


def fit_model(traces: TraceTable | EncodedTraces, model: str = "auto", *, seed: int = 0,
              state_names: Sequence[str] | None = None, **options: Any) -> ModelFit:
    """Fit the family ``model`` (``--model``): ``"auto"`` chooses among all families with :func:`choose_model`; a
    family name chooses that family's size by held-out likelihood (``"markov"`` needs no choice). ``options`` go to
    :func:`choose_model` (``n_splits``, ``sizes``, ``checks``, ``z_threshold``, …).

    >>> import tracetochain as tt
    >>> t = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 300, seed=2)
    >>> fit_model(t, "markov").name
    'markov'
    """
    if model not in model_choices():
        raise ValueError(f"unknown model {model!r}; use one of {', '.join(model_choices())}")
    names = tuple(state_names) if state_names is not None else None
    if model != "auto" and get_family(model).first_order:
        m = get_family(model).factory(0, seed=seed, group="auto").fit(traces, names)
        return ModelFit(model, m, m.to_chain(), None)
    if model == "auto":
        choice = choose_model(traces, seed=seed, state_names=names, **options)
    else:
        # One family: its best size by held-out likelihood (the first-order chain is scored beside it, for the
        # table, but the family asked for is kept even when it does not beat the baseline).
        choice = choose_model(traces, candidates=(first_order_family().name, model), seed=seed, state_names=names,
                              refit=False, with_task_classes=False, stability=False, **options)
        own = [c for c in choice.candidates if c.family == model and c.heldout_loglik_per_trace is not None]
        if not own:
            raise ValueError(f"no {model} model could be fitted: "
                             + "; ".join(c.reason for c in choice.candidates if c.family == model))
        best = max(own, key=lambda c: c.heldout_loglik_per_trace or -math.inf)
        size_map = {**default_sizes(), **dict(options.get("sizes") or {})}
        cand = _make(model, best.size if best.size is not None else 0, seed, options.get("group", "auto"))
        fitted = cand.make().fit(traces, names)
        choice = ModelChoice(best.name, f"the best {model} size by held-out log-likelihood ({size_map[model]})",
                             choice.baseline, choice.candidates, fitted, choice.n_splits, choice.test_fraction,
                             choice.grouped_by, choice.n_units, choice.n_traces, choice.z_threshold, choice.seed,
                             choice.notes, choice.chosen_for, choice.unit_loglik)
    assert choice.model is not None
    return ModelFit(choice.chosen, choice.model, choice.model.to_chain(), choice)
