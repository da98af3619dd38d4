"""The analysis's held-out discrimination: the predictions of the model each split fitted on its fit half, scored by
:func:`tracetochain.audit._discrimination.score_discrimination` (statistic, interval and rule documented there).

* First-order chain — from the corpus summary alone (each split's fit-half counts and the per-trace points), so a
  partitioned corpus on any engine gives the numbers of the in-memory one.
* A chosen expanded model — its family refitted (same size) on each split's fit half and filtered along each held-out
  path (:func:`~tracetochain.audit._discrimination.filtered_success`); needs the traces in memory, as the model
  choice does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tracetochain._outcome import FAILURE, SUCCESS, OutcomeCode
from tracetochain.analysis._summary import FIT, CorpusSummary
from tracetochain.audit.shared import (
    DEFAULT_DISCRIMINATION_BOOTSTRAP,
    Discrimination,
    filtered_success,
    not_available,
    prefix_steps,
    score_discrimination,
)
from tracetochain.chain import ChainPrior, estimate_chain
from tracetochain.exceptions import ChainValidationError
from tracetochain.traces import TraceTable


def _fit_base(acc: CorpusSummary, s: int) -> tuple[float, int]:
    """The fit half's share of successes among its non-censored traces, and their number."""
    h = acc.lengths[s, FIT]
    n_s, n_f = int(h[SUCCESS].sum()), int(h[FAILURE].sum())
    return (n_s / (n_s + n_f) if n_s + n_f else 0.5), n_s + n_f


def summary_discrimination(acc: CorpusSummary, *, prior: ChainPrior, unvisited: str, initial: str,
                           confidence: float = 0.95, seed: int = 0,
                           n_bootstrap: int = DEFAULT_DISCRIMINATION_BOOTSTRAP,
                           first_split_only: bool = False) -> Discrimination:
    """Held-out discrimination of the first-order chain: p = h[state] of split s's fit-half chain.

    ``first_split_only``: score split 1 alone — for states learned with the outcomes of split 1's fit half
    (``--states informative``), which the other splits partly hold out: their held-out traces would not be."""
    pts = acc.points
    n_zero = int(acc.all_lengths[:, 0].sum()) if acc.all_lengths.size else 0
    if pts is None:
        return not_available("the summary holds no per-trace points", n_without_steps=n_zero)
    S = min(acc.spec.n_splits, 1) if first_split_only else acc.spec.n_splits
    names = acc.state_names
    pred = np.zeros((S, pts.n, pts.codes.shape[1]))
    base = np.zeros(S)
    n_fit = np.zeros(S, np.int64)
    notes: list[str] = []
    for s in range(S):
        base[s], n_fit[s] = _fit_base(acc, s)
        success = np.full(len(names), base[s])
        try:
            chain = estimate_chain(acc.split_fit_counts(s), prior=prior, unvisited=unvisited, initial=initial)
        except (ChainValidationError, ValueError) as exc:
            notes.append(f"split {s + 1}: the fit-half chain could not be estimated ({exc}); base rate used")
        else:
            pos = {n: i for i, n in enumerate(names)}
            for name, h in zip(chain.state_names, chain.success_probabilities, strict=True):
                if name in pos:
                    success[pos[name]] = h
        pred[s] = success[pts.codes]
    tasks_repeat = acc.tasks is not None and acc.tasks.repeated
    if first_split_only:
        notes.append("the states were learned with the outcomes of split 1's fit half, which the other splits "
                     "partly hold out: split 1 alone is scored")
    return score_discrimination(pred, pts.test[:, :S], pts.outcome, pts.unit, base, n_fit, tasks_repeat=tasks_repeat,
                                n_without_steps=n_zero, n_bootstrap=n_bootstrap, confidence=confidence, seed=seed,
                                notes=tuple(notes))


def model_discrimination(traces: TraceTable, codes: Any, names: tuple[str, ...], selection: Any, *, split_by: str,
                         test_fraction: float, n_splits: int, seed: int, confidence: float = 0.95,
                         n_bootstrap: int = DEFAULT_DISCRIMINATION_BOOTSTRAP) -> Discrimination:
    """Held-out discrimination of a chosen expanded model (module docstring)."""
    from tracetochain.analysis._models import split_hashes
    from tracetochain.models.shared import encode_traces
    from tracetochain.traces.shared import holdout_mask

    name = selection.chosen
    model = getattr(selection, "model", None)
    if model is None or not hasattr(model, "like"):
        return not_available(f"the chosen model {name} exposes no refittable family to predict with", model=name)
    if n_splits < 1:
        return not_available("no held-out splits (the audit ran in-sample or was not run)", model=name)
    labelled = traces.with_states(codes, list(names))
    enc = encode_traces(labelled, tuple(selection.compiled.observed_names), group="auto")
    usable = traces.select_traces(traces.outcomes() != OutcomeCode.INVALID)
    held = np.stack([holdout_mask(split_hashes(usable, split_by), test_fraction, seed, s) for s in range(n_splits)],
                    axis=1)
    unit = split_hashes(usable, "task")
    steps = prefix_steps(enc.offsets)
    keep = steps[:, 0] >= 0
    pred = np.zeros((n_splits, enc.n_traces, steps.shape[1]))
    base = np.zeros(n_splits)
    n_fit = np.zeros(n_splits, np.int64)
    notes: list[str] = []
    for s in range(n_splits):
        fit_idx = np.flatnonzero(~held[:, s])
        oc = enc.outcomes[fit_idx]
        n_fit[s] = int(np.isin(oc, (SUCCESS, FAILURE)).sum())
        base[s] = float((oc == SUCCESS).sum() / n_fit[s]) if n_fit[s] else 0.5
        try:
            compiled = model.like().fit(enc.select(fit_idx)).to_chain()
        except Exception as exc:  # a family that cannot be fitted on this half: the split predicts the base rate
            notes.append(f"split {s + 1}: {name} could not be fitted on the fit half ({type(exc).__name__}); base "
                         "rate used")
            pred[s] = base[s]
            continue
        c = compiled.chain
        p, dead = filtered_success(c.Q, c.success_probabilities, c.pi0, compiled.emission, enc.codes, enc.offsets,
                                   steps, base[s])
        if dead:
            notes.append(f"split {s + 1}: {dead} held-out path(s) impossible under the fitted {name}; base rate "
                         "from there on")
        pred[s] = p
    tasks_repeat = enc.grouped_by == "task"  # group="auto": tasks when a task id repeats
    return score_discrimination(pred[:, keep], held[keep], enc.outcomes[keep], unit[keep], base, n_fit,
                                tasks_repeat=tasks_repeat, model=name, n_without_steps=int((~keep).sum()),
                                n_bootstrap=n_bootstrap, confidence=confidence, seed=seed, notes=tuple(notes))


__all__ = ["model_discrimination", "summary_discrimination"]
