"""The ensemble behind every interval, from a corpus summary: Dirichlet posterior or bootstrap replicates.

* ``"posterior"``: the Dirichlet posterior of the counts under the chain's prior, π0 drawn too, tempered by the design
  effect of repeated trials when tasks repeat (``uncertainty._dirichlet``); R∞, pass^k, R(d) and mean steps are then
  stretched to their own design effect (``uncertainty._design``: the task-clustered infinitesimal jackknife over the
  chain's variance), so tasks that differ in speed widen mean steps and R(d), and a quantity that barely clusters is
  not over-widened. Otherwise it assumes the chain: transitions independent given the state.
* ``"bootstrap"``: the summary's replicate count vectors — Poisson(1) weights per trace, or per task when tasks
  repeat, functions of the ids (``traces._hashing``) — each plus a draw of the prior's pseudo-counts, re-estimated
  (``uncertainty._bootstrap``). It resamples whole traces (or tasks), so it is robust to dependence inside a trace or
  a task.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from tracetochain.analysis._summary import CorpusSummary
from tracetochain.chain import AbsorbingChain, ChainPrior
from tracetochain.exceptions import EmptyTraceSetError
from tracetochain.uncertainty import ChainEnsemble, DirichletPosterior
from tracetochain.uncertainty.shared import estimate_batch, prior_draws_for, quantity_design

Method = Literal["posterior", "bootstrap"]


def design_effect(summary: CorpusSummary) -> float:
    """Kish's design effect of the pass rate from the per-task table (1 when no task repeats)."""
    return 1.0 if summary.tasks is None else summary.tasks.design_effect()


def summary_ensemble(summary: CorpusSummary, chain: AbsorbingChain, *, method: Method, prior: ChainPrior,
                     unvisited: str, initial: str, n_samples: int, seed: int, confidence: float) -> ChainEnsemble:
    """The ensemble of ``chain`` (fitted on the summary's counts) by ``method`` (module docstring)."""
    deff = design_effect(summary)
    if method == "posterior":
        post = DirichletPosterior(prior=prior.kind, pseudocount=prior.strength, confidence=confidence,
                                  samples=n_samples, seed=seed, unvisited=unvisited,  # type: ignore[arg-type]
                                  design_effect=deff).fit(chain).fetch_model()
        ens = post.ensemble
        ens.info["design_effect"] = deff
        design = quantity_design(chain, summary.counts.outcome_matrix(), summary.counts.initial, summary.units, deff)
        return ens if design is None else ens.with_design(design)
    if method != "bootstrap":
        raise ValueError(f"intervals must be 'posterior' or 'bootstrap', got {method!r}")
    B = summary.boot.shape[0]
    if B == 0:
        raise ValueError("the summary holds no bootstrap replicates (n_replicates = 0)")
    m = summary.n_states
    draws = prior_draws_for(summary.counts, prior, unvisited, seed, range(B))
    arr = estimate_batch(summary.boot, m, prior, unvisited, initial, prior_draws=draws)
    keep = summary.boot[:, m * m + 2 * m:].sum(axis=1) > 0
    if not keep.any():
        raise EmptyTraceSetError("every bootstrap replicate drew no traces; use more traces")
    info: dict[str, Any] = {
        "weights": f"poisson (by {summary.spec.resample_by} id)", "resample_by": summary.spec.resample_by,
        "n_resamples": B, "n_dropped": int((~keep).sum()), "n_traces": summary.n_usable, "prior": prior.to_dict(),
        "draw_prior": True, "unvisited_policy": unvisited, "initial": initial, "seed": seed, "design_effect": deff,
        "point_estimator": f"ChainEstimator({prior.describe()}) on all {summary.n_usable} usable traces"}
    return ChainEnsemble(chain, {k: np.asarray(v)[keep] for k, v in arr.items()}, method="bootstrap",
                         confidence=confidence, seed=seed, info=info)
