"""Intervals for the cost figures: the chain's uncertainty and the per-state cost means' sampling uncertainty together.

Each draw of a :class:`~tracetochain.uncertainty.ChainEnsemble` (posterior or bootstrap) is paired with one draw of
the per-visit cost means and every cost figure is computed on the pair, all draws at once (batched LU solves, the
formulas of :mod:`tracetochain.numerics.rewards`); intervals are equal-tailed percentiles of the results.

* With a Dirichlet posterior the cost means are drawn from their sampling law (:meth:`PerVisitCost.draw_means`:
  a gamma with each state's mean and standard error, or a normal with the joint covariance for means fitted to
  episode totals).
* With a trace bootstrap the cost means are recomputed on the *same* resampled episodes as the chain
  (:func:`bootstrap_mean_draws`), so the two uncertainties keep their correlation.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse
from numpy.typing import NDArray

from tracetochain import numerics as nx
from tracetochain._outcome import INVALID as _INVALID
from tracetochain.chain.shared import STEPS, CostModel, PerVisitCost, state_codes, trace_totals, usage_arrays
from tracetochain.numerics.rewards import reward_moments, reward_right_hand_sides

FloatArray = NDArray[np.float64]


#: Above this many states the spreads (second moments: one more batched solve per draw) are not given intervals by
#: default; the means, per-success figures and shares need no solve beyond the ensemble's own.
SPREAD_STATES_LIMIT = 100


def batched_cost_figures(ensemble: Any, c: FloatArray, v: FloatArray, *, spreads: bool = True
                         ) -> tuple[dict[str, FloatArray], NDArray[np.bool_]]:
    """Every cost figure for every draw: ``c`` (B, m) per-visit means, ``v`` (B, m) or (m,) variances.

    The means need only the ensemble's visits and absorption vectors (E[C] = z·c, E[C; S] = z·(c∘h), …); the
    spreads (``spreads=True``) one batched solve more, for w = N[c, c∘h, c∘g]. Returns (figures, used) where
    ``used`` marks the draws that are absorbing chains with sound solves; each figure is an array over the used
    draws (NaN where a figure is undefined on a draw, e.g. given success when R∞ = 0).
    """
    batch = ensemble.batch
    used = np.asarray(batch.valid, dtype=bool).copy()
    B, m = batch.size, batch.n_states
    v_full = np.broadcast_to(np.asarray(v, dtype=np.float64), (B, m))
    c = np.asarray(c, dtype=np.float64)
    rhs = reward_right_hand_sides(c, batch.h, batch.g)
    W: FloatArray | None = None
    if spreads:
        W, ok = batch.solve(rhs)
        used &= ok
    if not used.any():
        return {}, used
    keep = np.flatnonzero(used)
    z, h, g = batch.z[keep], batch.h[keep], batch.g[keep]
    mom = reward_moments(z, h, g, c[keep], v_full[keep] if spreads else None, rhs[keep],
                         W[keep] if W is not None else np.zeros_like(rhs[keep]))
    pi0 = batch.pi0[keep]
    r = np.einsum("bi,bi->b", pi0, h)
    f = np.einsum("bi,bi->b", pi0, g)
    mean = mom["mean"]
    with np.errstate(divide="ignore", invalid="ignore"):
        ms = np.where(r > 0, mom["mean_success"] / r, np.nan)
        mf = np.where(f > 0, mom["mean_failure"] / f, np.nan)
        total = mean[:, None]
        failed = mom["mean_failure"][:, None]
        figures = {
            "mean": mean,
            "mean_given_success": ms,
            "mean_given_failure": mf,
            "per_success": np.where(r > 0, mean / r, np.nan),
            "failed_share": np.where(mean > 0, mom["mean_failure"] / mean, np.nan),
            "state_spend": mom["per_state_spend"],
            "state_spend_share": np.where(total > 0, mom["per_state_spend"] / total, np.nan),
            "state_failed_spend": mom["per_state_failed_spend"],
            "state_failed_spend_share": np.where(failed > 0, mom["per_state_failed_spend"] / failed, np.nan),
            "per_visit_mean": c[keep],
        }
        if spreads:
            vs = np.clip(mom["second_success"] / r - ms * ms, 0.0, None)
            vf = np.clip(mom["second_failure"] / f - mf * mf, 0.0, None)
            q = 1.0 - r
            per_var = q / r * np.where(f > 0, vf, 0.0) + q / r**2 * np.where(f > 0, mf, 0.0) ** 2 + vs
            figures.update({
                "sd": np.sqrt(np.clip(mom["second"] - mean * mean, 0.0, None)),
                "sd_given_success": np.where(r > 0, np.sqrt(vs), np.nan),
                "sd_given_failure": np.where(f > 0, np.sqrt(vf), np.nan),
                "per_success_sd": np.where(r > 0, np.sqrt(np.clip(per_var, 0.0, None)), np.nan),
            })
    return figures, used


def _interval(values: FloatArray, point: Any, confidence: float) -> dict[str, Any]:
    """Percentile summary of one scalar (or per-state vector) figure over the draws where it is defined."""
    a = (1.0 - confidence) / 2.0
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim == 1:
        ok = np.isfinite(arr)
        used = arr[ok]
        if not used.size:
            return {"point": point, "mean": None, "std": None, "lower": None, "upper": None, "n_samples": 0,
                    "n_excluded": int(arr.size)}
        return {"point": point, "mean": float(used.mean()), "std": float(used.std(ddof=1)) if used.size > 1 else 0.0,
                "lower": float(np.quantile(used, a)), "upper": float(np.quantile(used, 1 - a)),
                "n_samples": int(used.size), "n_excluded": int(arr.size - used.size)}
    # Per-state columns where every draw is finite are summarised together: each column made contiguous, so the
    # sums and quantiles run over the same values in the same order as the one-column call (identical results).
    columns = np.ascontiguousarray(arr.T)
    whole = np.isfinite(columns).all(axis=1)
    rows: list[dict[str, Any] | None] = [None] * arr.shape[1]
    if whole.any() and arr.shape[0] > 1:
        block = columns[whole]
        means, stds = block.mean(axis=1), block.std(axis=1, ddof=1)
        lower, upper = np.quantile(block, a, axis=1), np.quantile(block, 1 - a, axis=1)
        for j, i in enumerate(np.flatnonzero(whole)):
            rows[i] = {"point": None if point is None else point[i], "mean": float(means[j]),
                       "std": float(stds[j]), "lower": float(lower[j]), "upper": float(upper[j]),
                       "n_samples": int(arr.shape[0]), "n_excluded": 0}
    return {"per_state": [row if row is not None else _interval(arr[:, i], None if point is None else point[i],
                                                                 confidence)
                          for i, row in enumerate(rows)]}


def cost_intervals(ensemble: Any, summary: Any, c_draws: FloatArray, v: FloatArray, *,
                   confidence: float | None = None, spreads: bool | None = None) -> dict[str, Any]:
    """Intervals of every figure of a :class:`~tracetochain.costs.CostSummary` over an ensemble and paired cost
    draws (see the module docstring). Keys mirror the summary's; per-state figures are lists in state order.
    ``spreads`` (default: chains of at most :data:`SPREAD_STATES_LIMIT` states) also gives the standard deviations
    intervals, at one more batched solve."""
    level = float(confidence if confidence is not None else ensemble.confidence)
    with_spreads = ensemble.n_states <= SPREAD_STATES_LIMIT if spreads is None else bool(spreads)
    figures, used = batched_cost_figures(ensemble, c_draws, v, spreads=with_spreads)
    out: dict[str, Any] = {"confidence": level, "method": ensemble.method, "n_draws": int(ensemble.n_samples),
                           "n_used": int(used.sum())}
    if not figures:
        out["note"] = "no draw is an absorbing chain with a sound solve"
        return out
    keys = ["mean", "mean_given_success", "mean_given_failure", "per_success", "failed_share"]
    if with_spreads:
        keys += ["sd", "sd_given_success", "sd_given_failure", "per_success_sd"]
    else:
        out["note"] = (f"no intervals for the standard deviations on chains over {SPREAD_STATES_LIMIT} states (one "
                       "more batched solve per draw); pass spreads=True to compute them")
    for key in keys:
        out[key] = _interval(figures[key], getattr(summary, key), level)
    states = summary.states
    per_state = {
        "per_visit_mean": np.array([s.per_visit_mean for s in states]),
        "state_spend": np.array([s.spend for s in states]),
        "state_spend_share": np.array([s.spend_share for s in states]),
        "state_failed_spend": np.array([s.failed_spend for s in states]),
        "state_failed_spend_share": np.array([s.failed_spend_share for s in states]),
    }
    out["states"] = {k: _interval(figures[k], list(map(float, p)), level)["per_state"] for k, p in per_state.items()}
    return out


def budget_band(ensemble: Any, c_draws: FloatArray, v: FloatArray, *, max_budget: float, n_levels: int = 400,
                n_draws: int | None = None, confidence: float | None = None) -> dict[str, Any]:
    """Percentile band of R(B) over the draws, each on a lattice of ``n_levels`` steps with mean-preserving
    rounding of the visit costs (one dynamic programme per draw; accurate to about 0.01 at 400 levels where the
    exact bracket would need thousands). ``n_draws`` (default: 100, fewer on large chains to bound the work) of the
    usable draws are used, the first ones."""
    level = float(confidence if confidence is not None else ensemble.confidence)
    batch = ensemble.batch
    m = batch.n_states
    if n_draws is None:
        n_draws = int(min(100, max(20, 2e9 // max(1, n_levels * (m * m + 10 * m)))))
    step = float(max_budget) / n_levels
    curves = []
    for i in np.flatnonzero(batch.valid)[:n_draws]:
        pmf = nx.lattice_pmf(c_draws[i], v, step, n_levels, "mean")
        curves.append(nx.budget_reliability(batch.Q[i], batch.r_success[i], batch.pi0[i], pmf, n_levels))
    a = (1 - level) / 2
    if not curves:
        return {"budgets": [], "lower": [], "upper": [], "n_draws": 0, "confidence": level}
    C = np.vstack(curves)
    return {"budgets": [float(k * step) for k in range(n_levels + 1)],
            "lower": [float(x) for x in np.quantile(C, a, axis=0)],
            "upper": [float(x) for x in np.quantile(C, 1 - a, axis=0)], "n_draws": len(curves),
            "confidence": level, "rounding": "mean-preserving"}


# ------------------------------------------------------------------------------------------------ cost draws
def posterior_mean_draws(per_visit: PerVisitCost, n_draws: int, seed: int) -> FloatArray:
    """Cost means drawn from their sampling law, on a stream of their own (the chain draws are not disturbed)."""
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x5EED_C057]))
    return per_visit.draw_means(int(n_draws), rng)


def bootstrap_mean_draws(plan: Any, traces: Any, costs: CostModel, metric: str,
                         state_names: tuple[str, ...]) -> tuple[FloatArray, FloatArray]:
    """Per-visit cost means and variances recomputed on each replicate of a trace bootstrap ``plan`` (the same
    episode weights as the chain's replicates; replicates that drew no episode are dropped, as the bootstrap drops
    them). ``traces``: the labelled traces the bootstrap was fitted on. Returns (means, variances), (B, m) each."""
    usable = traces.select_traces(traces.outcomes() != _INVALID)
    codes = state_codes(usable, state_names, of="the chain's states",
                        hint="pass the traces the chain was fitted on, labelled by its state model")
    m = len(state_names)
    offsets = usable.offsets
    n_tr = offsets.size - 1
    rows = np.repeat(np.arange(n_tr), np.diff(offsets))
    st = costs.metrics[metric]
    weights = [plan.trace_weights(s) for s in plan.seeds]
    weights = [w for w in weights if w.sum() > 0]
    W = np.stack(weights, axis=1) if weights else np.zeros((n_tr, 0))  # (n_traces, B)
    point = costs.per_visit(metric, state_names)
    if st.source == STEPS:
        values, _ = usage_arrays(usable.to_arrow(), offsets)
        x = values[metric]
        ok = np.isfinite(x)
        r, cidx, xv = rows[ok], codes[ok], x[ok]
        P = scipy.sparse.csr_matrix(
            (np.concatenate([np.ones(r.size), xv, xv * xv]),
             (np.concatenate([r, r, r]), np.concatenate([cidx, m + cidx, 2 * m + cidx]))), shape=(n_tr, 3 * m))
        S = np.asarray(P.T @ W).T  # (B, 3m)
        n, s1, s2 = S[:, :m], S[:, m: 2 * m], S[:, 2 * m:]
        with np.errstate(divide="ignore", invalid="ignore"):
            pooled = s1.sum(axis=1, keepdims=True) / np.maximum(n.sum(axis=1, keepdims=True), 1.0)
            means = np.where(n > 0, s1 / np.where(n > 0, n, 1.0), pooled)
            var = np.where(n >= 2, np.clip(s2 - s1 * s1 / np.where(n > 0, n, 1.0), 0.0, None)
                           / np.where(n >= 2, n - 1, 1.0), point.variance[None, :])
        return means, var
    y = trace_totals(usable.to_arrow(), offsets)[metric]
    has = np.isfinite(y)
    X = np.zeros((n_tr, m))
    np.add.at(X, (rows, codes), 1.0)
    X, y, Wh = X[has], y[has], W[has]
    from scipy.optimize import nnls  # imported here: only the cost intervals' refits need it
    out = np.tile(point.mean, (W.shape[1], 1))
    for b in range(W.shape[1]):
        sw = np.sqrt(Wh[:, b])
        seen = (Wh[:, b][:, None] * X).sum(axis=0) > 0
        if seen.any():
            c, _ = nnls(X[:, seen] * sw[:, None], y * sw, maxiter=50 * m + 100)
            out[b, seen] = c
    return out, np.tile(point.variance, (W.shape[1], 1))
