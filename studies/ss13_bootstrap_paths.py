"""SS13 — bootstrap path comparison: states fixed (fast) vs re-discovered per replicate (full) (Tran-Truong & Le 2026,
§XI).

Ground truth m = 4 (rows normalised), 250 traces (seed 20260606), one-hot step features (each step's tool one-hot is
its true state: :class:`tracetochain.featurize.RuleFeaturizer` with kind and error off), Ward with k ∈ [2, 6] (m̂ = 4),
B = 80 for both paths (seed + 1). Median 95% half-width over the entries of Q̂, with
:class:`tracetochain.uncertainty.TraceBootstrap` ``path="fast"`` and ``path="full"`` — the latter with our Hungarian
alignment on centroids and with the artifact's greedy R⊕ ("exit-profile") matching.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tracetochain as tt
from studies._common import PAPER_BOOTSTRAP, Figure, StudyResult, artifact_json
from tracetochain.featurize import RuleFeaturizer
from tracetochain.states import WardStates
from tracetochain.uncertainty import TraceBootstrap

N = 250
B = 80


def truth() -> tt.AbsorbingChain:
    Q = np.array([[.10, .65, .05, .05], [.05, .10, .65, .05], [.15, .10, .10, .35], [.20, .05, .10, .10]])
    rs = np.array([.10, .10, .20, .45])
    rf = np.full(4, .05)
    tot = Q.sum(axis=1) + rs + rf
    return tt.AbsorbingChain(Q / tot[:, None], rs / tot, rf / tot, pi0=0)


def one_hot_traces(seed: int) -> tt.TraceTable:
    """Simulated traces whose tool name is the true state (noise-free one-hot features)."""
    sim = tt.datasets.simulate_traces(truth(), N, seed=seed)
    return tt.TraceTable.from_records([
        {"trace_id": r["trace_id"], "step_idx": r["step_idx"], "state": r["state"], "outcome": r["outcome"],
         "kind": "tool_call", "tool_name": r["state"]} for r in sim.to_arrow().to_pylist()])


def median_half_width(ens: Any) -> float:
    e = ens.entry_intervals()
    return float(np.median((np.asarray(e.Q_upper) - np.asarray(e.Q_lower)) / 2))


def run(quick: bool, seed: int) -> dict[str, Any]:
    ref = artifact_json("swebench_real/SS13_bootstrap_paths.json") or {}
    traces = one_hot_traces(seed)
    states = WardStates(featurizer=RuleFeaturizer(kind=False, error=False), k_min=2, k_max=6)
    res: dict[str, dict[str, Any]] = {}
    boots = {"fast": TraceBootstrap(samples=B, path="fast", states=states, seed=seed + 1, **PAPER_BOOTSTRAP),
             "full": TraceBootstrap(samples=B, path="full", states=states, align="centroids", seed=seed + 1,
                                    **PAPER_BOOTSTRAP),
             "full_exit_profile": TraceBootstrap(samples=B, path="full", states=states, align="exit-profile",
                                                 seed=seed + 1, **PAPER_BOOTSTRAP)}
    for name, boot in boots.items():
        ens = boot.fit(traces).fetch_model()
        r_inf = ens.stats("r_inf")
        res[name] = {"median_half_width": median_half_width(ens), "m": len(ens.entry_intervals().state_names),
                     "r_inf_interval": [r_inf.lower, r_inf.upper]}
    fast, full, greedy = (res[k]["median_half_width"] for k in ("fast", "full", "full_exit_profile"))
    figures = [
        Figure("m", "m̂ (Ward, k ∈ [2, 6])", ref.get("m"), res["fast"]["m"]),
        Figure("fast", "fast path: median Q̂ half-width", ref.get("median_halfwidth_fast"), fast,
               "different draw of the 250 traces; same size", 4),
        Figure("full", "full path (Hungarian on centroids): median Q̂ half-width", ref.get("median_halfwidth_full"),
               full, "with noise-free one-hot features every replicate finds the same states: nothing to add", 4),
        Figure("ratio", "ratio full / fast (ours, correct alignment)", ref.get("ratio_full_over_fast"), full / fast,
               "the paper's 4.7× is not a property of re-discovering states here (see notes)", 3),
        Figure("full_exit_profile", "full path, artifact's greedy R⊕ matching: median half-width",
               ref.get("median_halfwidth_full"), greedy, "label switching by the greedy matcher inflates widths", 4),
        Figure("ratio_exit_profile", "ratio full / fast with the artifact's matching", ref.get("ratio_full_over_fast"),
               greedy / fast, "", 3),
    ]
    ok_fast = ref and abs(fast - ref["median_halfwidth_fast"]) < 0.005
    return StudyResult(
        study="SS13", title="bootstrap paths: fixed vs re-discovered states", quick=quick, seed=seed,
        paper_ref="§XI",
        params={"n_traces": N, "n_resamples": B, "k_range": [2, 6], "features": "tool one-hot = true state"},
        figures=figures, headline="ratio",
        verdict="differs, explained" if ok_fast else "partial",
        summary=(f"The fast path's median half-width is reproduced ({fast:.4f} vs 0.0339); the full path adds "
                 f"nothing when features identify the states ({full / fast:.2f}×) and {greedy / fast:.1f}× with the "
                 "artifact's greedy matching — not the paper's 4.7×."),
        notes=[
            "With one-hot features the Ward partition is the same on every replicate, so the full path with a "
            "correct (Hungarian, centroid) alignment gives exactly the fast path's intervals. The artifact's full "
            "path matches states greedily by their R⊕ profile, which swaps labels between replicates with similar "
            "exit rates and widens intervals without any clustering uncertainty behind it.",
            "The paper's 4.7× therefore mixes label switching with whatever noise its features carried (the "
            "artifact does not record the feature noise for SS13); we could not reproduce it and do not claim that "
            "fixed-clustering intervals understate uncertainty by that factor. They are a lower bound only when "
            "the clustering itself is unstable — which full-path replicates with correct alignment measure.",
        ],
        data={"paths": res},
    ).to_dict()
