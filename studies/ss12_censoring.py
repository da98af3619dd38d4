"""SS12 — censoring sensitivity (Tran-Truong & Le 2026, §VIII).

Ground truth (m = 5, s0 = 0, rows normalised): true R∞ = 0.78432. 600 traces (d_max 200; a run still going is a
failure), then for c ∈ {0, 5, 10, 20, 30, 40, 50}%: round(c·600) traces chosen at random are cut at U{1..L−1} kept
steps and lose their label (non-informative censoring; censoring RNG ``default_rng(seed + 7)``). Refit (α = 1, the
true states as labels — the artifact's one-hot features with k_max = 8 recover them, m̂ = 5 at every c), R∞ from the
modal start. Our traces are our own draw from the chain (the artifact's simulator draw order is not recorded), so
R̂∞ differs by sampling noise; the claim compared is "censoring adds almost no bias". Added: the decomposition of
the baseline bias (empirical success fraction, α = 0 identity) and an **informative** censoring scenario (cutting
failures only) that the paper leaves as future work.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tracetochain as tt
from studies._common import Figure, StudyResult, artifact_json

LEVELS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5)
N = 600
D_MAX = 200


def truth() -> tt.AbsorbingChain:
    Q = np.array([[.05, .70, 0, .05, 0], [0, .05, .75, .05, 0], [.10, .10, .05, .40, .20], [.20, .05, .05, .05, .40],
                  [.05, .05, .05, .05, .10]])
    rs = np.array([.15, .10, .10, .20, .60])
    rf = np.full(5, .05)
    tot = Q.sum(axis=1) + rs + rf
    return tt.AbsorbingChain(Q / tot[:, None], rs / tot, rf / tot, pi0=0)


def _records(table: tt.TraceTable) -> tuple[list[str], list[list[str]], list[str]]:
    codes, names = table.state_labels()
    outcome_names = np.array(["success", "failure", "failure", "invalid"])  # still running at d_max → failure
    parts = np.split(codes, table.offsets[1:-1])
    return table.trace_ids, [[names[c] for c in p] for p in parts], list(outcome_names[table.outcomes()])


def censor(ids: list[str], states: list[list[str]], outcomes: list[str], chosen: np.ndarray,
           rng: np.random.Generator) -> tt.TraceTable:
    """Cut the traces ``chosen`` at U{1..L−1} kept steps (traces of one step cannot be cut) and drop their label."""
    cut = dict.fromkeys(range(len(ids)), 0)
    for i in chosen:
        if len(states[i]) > 1:
            cut[int(i)] = int(rng.integers(1, len(states[i])))
    records = []
    for i, (tid, st, oc) in enumerate(zip(ids, states, outcomes, strict=True)):
        keep = cut[i] or len(st)
        label = "censored" if cut[i] else oc
        records += [{"trace_id": tid, "step_idx": j, "state": s, "outcome": label} for j, s in enumerate(st[:keep])]
    return tt.TraceTable.from_records(records)


def run(quick: bool, seed: int) -> dict[str, Any]:
    ref = artifact_json("swebench_real/SS12_censoring.json") or {}
    paper = {r["censor"]: r for r in ref.get("rows", [])}
    chain = truth()
    true_r = chain.r_inf
    base = tt.datasets.simulate_traces(chain, N, seed=seed, max_steps=D_MAX)
    ids, states, outcomes = _records(base)
    emp_success = float(np.mean(np.asarray(outcomes) == "success"))
    rows: dict[str, dict[str, Any]] = {}
    for c in LEVELS:
        rng = np.random.default_rng(seed + 7)
        chosen = rng.choice(N, round(c * N), replace=False)
        t = censor(ids, states, outcomes, chosen, rng)
        est = tt.ChainEstimator(pseudocount=1.0, initial="modal").fit(t).fetch_model()
        est0 = tt.ChainEstimator(pseudocount=0.0, initial="modal").fit(t).fetch_model()
        rows[f"{c:g}"] = {"censor": c, "m": est.n_states, "R_inf": est.r_inf, "R_inf_alpha0": est0.r_inf,
                          "rel_bias_pct": 100 * (est.r_inf / true_r - 1),
                          "n_censored": int(np.count_nonzero(t.outcomes() == 2))}
    # Informative censoring: cut only failures (e.g. a budget that truncates failure-bound runs), 20% of traces.
    informative: dict[str, dict[str, Any]] = {}
    fail_idx = np.flatnonzero(np.asarray(outcomes) == "failure")
    for c in (0.1, 0.2):
        rng = np.random.default_rng(seed + 7)
        k = min(round(c * N), fail_idx.size)
        t = censor(ids, states, outcomes, rng.choice(fail_idx, k, replace=False), rng)
        est = tt.ChainEstimator(pseudocount=1.0, initial="modal").fit(t).fetch_model()
        informative[f"{c:g}"] = {"censor": c, "R_inf": est.r_inf, "rel_bias_pct": 100 * (est.r_inf / true_r - 1)}

    # Replicates: the bias proper (mean over re-drawn corpora and censoring patterns), per level.
    n_rep = 20 if quick else 200
    reps = np.empty((n_rep, len(LEVELS)))
    for rep in range(n_rep):
        rids, rstates, routs = _records(tt.datasets.simulate_traces(chain, N, seed=seed + 1000 * (rep + 1),
                                                                    max_steps=D_MAX))
        for j, c in enumerate(LEVELS):
            rng = np.random.default_rng(seed + 1000 * (rep + 1) + 7)
            t = censor(rids, rstates, routs, rng.choice(N, round(c * N), replace=False), rng)
            est = tt.ChainEstimator(pseudocount=1.0, initial="modal").fit(t).fetch_model()
            reps[rep, j] = 100 * (est.r_inf / true_r - 1)
    mean_bias, se_bias = reps.mean(axis=0), reps.std(axis=0, ddof=1) / np.sqrt(n_rep)

    figures = [Figure("true_R_inf", "true R∞", ref.get("true_Rinf"), true_r, "", 6)]
    for key, r in rows.items():
        p = paper.get(r["censor"], {})
        figures += [
            Figure(f"c={key}/m", f"c = {r['censor']:.0%}: m̂", p.get("m"), r["m"]),
            Figure(f"c={key}/R_inf", f"c = {r['censor']:.0%}: R̂∞", p.get("Rinf_hat"), r["R_inf"],
                   "our own draw of 600 traces: differs by sampling noise (s.e. ≈ 0.017)", 4),
            Figure(f"c={key}/rel_bias", f"c = {r['censor']:.0%}: relative bias (%)", p.get("rel_bias_pct"),
                   r["rel_bias_pct"], "", 3),
        ]
    for j, c in enumerate(LEVELS):
        figures.append(Figure(f"c={c:g}/mean_rel_bias", f"c = {c:.0%}: mean relative bias over {n_rep} corpora (%)",
                              paper.get(c, {}).get("rel_bias_pct"), float(mean_bias[j]),
                              f"ours: the bias proper, ± {se_bias[j]:.2f} (s.e.); the paper's is one draw", 3))
    biases = [r["rel_bias_pct"] for r in rows.values()]
    spread = max(biases) - min(biases)
    paper_spread = (max(p["rel_bias_pct"] for p in paper.values()) - min(p["rel_bias_pct"] for p in paper.values())
                    if paper else None)
    figures += [
        Figure("bias_spread", "spread of the relative bias over c (max − min, %)", paper_spread, spread,
               "the claim: censoring adds almost nothing on top of the uncensored bias", 3),
        Figure("max_abs_bias", "max |relative bias| over c (%)", max(abs(p["rel_bias_pct"]) for p in paper.values())
               if paper else None, max(abs(b) for b in biases), "issue 9's bar: within ±5%", 3),
        Figure("empirical_success", "uncensored sample: empirical success fraction", None, emp_success,
               "ours: the sampling part of the c = 0 bias", 4),
        Figure("c=0/R_inf_alpha0", "c = 0: R̂∞ with α = 0", None, rows["0"]["R_inf_alpha0"],
               "ours: equals the empirical success fraction exactly (identity); the rest of the bias is smoothing", 6),
    ]
    for key, r in informative.items():
        figures.append(Figure(f"informative/c={key}/rel_bias", f"informative censoring of failures, c = "
                              f"{r['censor']:.0%}: relative bias (%)", None, r["rel_bias_pct"],
                              "ours: cutting failures only removes failure exits — R̂∞ is biased upward", 3))
    figures.append(Figure("mean_bias_spread", f"spread of the mean relative bias over c ({n_rep} corpora, %)",
                          paper_spread, float(mean_bias.max() - mean_bias.min()),
                          "ours: censoring adds almost nothing once the draw-to-draw noise is averaged out", 3))
    biases_p = [p["rel_bias_pct"] for p in paper.values()] or [float("nan")]
    ok = float(np.max(np.abs(mean_bias))) <= 5.0 and all(r["m"] == 5 for r in rows.values())
    return StudyResult(
        study="SS12", title="censoring sensitivity", quick=quick, seed=seed, paper_ref="§VIII",
        params={"n_traces": N, "d_max": D_MAX, "levels": list(LEVELS), "pseudocount": 1.0,
                "censor_rng": "default_rng(seed + 7)", "states": "true labels"},
        figures=figures, headline="max_abs_bias",
        verdict="reproduced within tolerance" if ok else "differs, explained",
        summary=(f"Averaged over {n_rep} corpora, the relative bias of R̂∞ stays within "
                 f"[{mean_bias.min():.1f}%, {mean_bias.max():.1f}%] for 0–50% non-informative censoring (±5% bar "
                 f"met; paper's single draw {min(biases_p):.1f}% … {max(biases_p):.1f}%); one draw per level, as the "
                 f"paper did, scatters by ±{2 * se_bias.max() * np.sqrt(n_rep):.0f}% (ours max "
                 f"{max(abs(b) for b in biases):.1f}%). "
                 f"Informative censoring of failures biases R̂∞ upward by "
                 f"{informative['0.2']['rel_bias_pct']:+.0f}% at 20%."),
        notes=[
            "The c = 0 bias is sampling noise plus Laplace smoothing: with α = 0 R̂∞ equals the sample's success "
            f"fraction {emp_success:.4f} exactly (the paper's draw: 0.7633 vs true 0.7843).",
            "One corpus per level (the paper's design) cannot show a bias of this size: R̂∞ on 600 traces has a "
            "relative s.e. of ≈ 2–3%, so single draws scatter by several points (our 40% row: −6.5%). The replicate "
            "means are the bias; they are flat in c, which is the paper's claim, now with error bars.",
            "Random censoring is ignorable for the transition MLE: a cut trace still contributes its transitions, "
            "and only its exit is missing, independently of the outcome — hence the flat bias.",
            "Censoring that depends on the outcome is not ignorable: cutting failures removes failure exits from "
            "the counts, so R̂∞ rises. Nothing in the traces reveals this; it has to be ruled out by design.",
        ],
        data={"levels": rows, "replicates": {"n": n_rep, "mean_rel_bias_pct": mean_bias, "se": se_bias},
              "informative": informative, "empirical_success": emp_success},
    ).to_dict()
