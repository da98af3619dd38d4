"""SS9 — strict 50/50 held-out validation on seven MAST-style chains (Tran-Truong & Le 2026, Table IV).

Ground truth: the artifact's seven absorbing chains (states plan, tool_call, observe, reflect, answer[, retry];
R⊖ = 1 − row sum − R⊕), π0 = 0.7 on plan, 0.15 on tool_call, 0.15 spread over the rest; 400 traces each
(at most 499 steps); with probability 0.05 a trace is censored once it has U{2..9} steps. Split 50/50 **before**
anything is fitted (:func:`tracetochain.audit.split_traces`), chain on the fit half (α = 1, π0 empirical), then on the
held-out half: L∞ = sup over d ∈ [0, 50] of |R(d) − R̂_emp(d)| (censored and failed traces in the denominator), and
the artifact's KS (:func:`tracetochain.audit.ks_paper`, all absorption times, 8,000 model runs). Added: our
calibrated certificate (:func:`tracetochain.audit.holdout_audit`) on the same split.

States: the true states. The artifact emits noisy one-hot features (σ = 0.08) and recovers them by Ward with
k ∈ [3, 6] — its m equals the true m for all seven, i.e. the same partition — so the labels stand in for that step.
Seeds: ``default_rng(2026042217 + i)`` per framework for the traces and the censoring, split seed 2026042217 + i;
our draws are not the artifact's (its generator code is not in the artifact), so figures are compared statistically.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tracetochain as tt
from studies._common import Figure, StudyResult, artifact_json
from tracetochain.audit import OrderSettings, TimingSettings, holdout_audit, ks_paper, split_traces
from tracetochain.audit._holdout import empirical_rdc, l_inf_distance

NAMES5 = ("plan", "tool_call", "observe", "reflect", "answer")
NAMES6 = (*NAMES5, "retry")
D_MAX = 50
N_TRACES = 400
CENSOR_P = 0.05

#: (Q, R⊕) of the artifact's ground-truth chains (its SS9 script).
CHAINS: dict[str, tuple[list[list[float]], list[float]]] = {
    "react": ([[0, .75, 0, .05, .10], [0, .10, .72, 0, 0], [0, .25, 0, .30, .30], [.15, .30, 0, 0, .35],
               [0, 0, 0, .15, 0]], [0, 0, .05, .05, .65]),
    "reflexion": ([[0, .60, 0, .15, .15], [0, .15, .68, 0, 0], [0, .20, 0, .40, .25], [.05, .25, 0, .10, .45],
                   [0, 0, 0, .25, 0]], [0, 0, .05, .05, .60]),
    "cot_agent": ([[.20, .20, 0, .30, .20], [0, .20, .60, 0, 0], [0, .30, 0, .20, .35], [.25, .10, 0, .10, .40],
                   [0, 0, 0, .20, 0]], [0, 0, .05, .05, .55]),
    "toolformer": ([[0, .80, 0, .05, .05], [0, .05, .80, 0, 0], [0, .35, 0, .15, .35], [.10, .40, 0, .10, .30],
                    [0, 0, 0, .10, 0]], [0, 0, .05, .05, .70]),
    "babyagi": ([[0, .50, 0, .10, .10, .20], [0, .10, .65, 0, 0, .10], [0, .20, 0, .30, .20, .15],
                 [.10, .30, 0, .10, .25, .15], [0, 0, 0, .20, 0, .15], [.20, .30, 0, .20, .15, 0]],
                [0, 0, .05, .05, .50, 0]),
    "autogpt": ([[.10, .55, 0, .05, .05, .15], [0, .10, .70, 0, 0, .10], [0, .25, 0, .25, .25, .15],
                 [.10, .30, 0, .10, .30, .10], [0, 0, 0, .15, 0, .15], [.20, .35, 0, .15, .10, 0]],
                [0, 0, .05, .05, .55, 0]),
    "agentbench": ([[.05, .50, 0, .15, .15], [0, .15, .65, 0, 0], [0, .25, 0, .30, .30], [.10, .25, 0, .10, .40],
                    [0, 0, 0, .15, 0]], [0, 0, .05, .05, .60]),
}


def truth(name: str) -> tt.AbsorbingChain:
    Q, rs = (np.asarray(x, float) for x in CHAINS[name])
    m = Q.shape[0]
    pi0 = np.full(m, 0.15 / (m - 2))
    pi0[:2] = (0.7, 0.15)
    return tt.AbsorbingChain(Q, rs, 1.0 - Q.sum(axis=1) - rs, pi0=pi0, state_names=NAMES5 if m == 5 else NAMES6)


def simulate(chain: tt.AbsorbingChain, n: int, rng: np.random.Generator) -> tt.TraceTable:
    """n traces (≤ 499 steps); each censored with probability 0.05 once it has U{2..9} steps."""
    base = tt.datasets.simulate_traces(chain, n, seed=int(rng.integers(0, 2**32)), max_steps=499)
    cut = np.where(rng.random(base.n_traces) < CENSOR_P, rng.integers(2, 10, base.n_traces), 0)
    rows = base.to_arrow().select(["trace_id", "step_idx", "state", "outcome"]).to_pylist()
    index = {tid: i for i, tid in enumerate(base.trace_ids)}
    lengths = np.diff(base.offsets)
    records = []
    for r in rows:
        i = index[r["trace_id"]]
        c = int(cut[i])
        if c and lengths[i] > c:  # censored: the trace stops once it has c steps, no outcome
            if r["step_idx"] >= c:
                continue
            r["outcome"] = "censored"
        records.append(r)
    return tt.TraceTable.from_records(records)


def run(quick: bool, seed: int) -> dict[str, Any]:
    ref = artifact_json("mast_derived/SS9_heldout_summary.json") or {}
    paper = {f["framework"]: f for f in ref.get("frameworks", [])}
    n_model = 8_000  # the paper-KS model sample: quick too (2,000 left a borderline p, 0.045 vs 0.090, to Monte Carlo)
    n_boot = 99 if quick else 199
    rows: dict[str, dict[str, Any]] = {}
    for i, name in enumerate(CHAINS):
        s = seed + i
        traces = simulate(truth(name), N_TRACES, np.random.default_rng(s))
        fit, test = split_traces(traces, 0.5, seed=s)
        chain = tt.ChainEstimator(pseudocount=1.0).fit(fit).fetch_model()
        ks = ks_paper(chain, test, n_model=n_model, outcome="any", seed=s)
        l_inf = l_inf_distance(chain.reliability(D_MAX), empirical_rdc(test, D_MAX))
        res = holdout_audit(traces, seed=s, horizon=D_MAX, timing=TimingSettings(n_bootstrap=n_boot), pseudocount=1.0,
                            order=OrderSettings(n_permutations=n_boot, criterion="permutation"))
        rows[name] = {"m": chain.n_states, "n_fit": fit.n_traces, "n_test": test.n_traces,
                      "n_censored": int(np.count_nonzero(traces.outcomes() == 2)), "KS_D": ks.statistic,
                      "KS_p": ks.p_value, "L_inf": l_inf, "R50_model": float(chain.reliability(D_MAX)[-1]),
                      "R50_empirical": float(empirical_rdc(test, D_MAX)[-1]), "true_R_inf": truth(name).r_inf,
                      "R_inf": chain.r_inf, "cert_ks_p": res.timing.p_value,
                      "cert_order_keeps": res.order.keeps_order1, "cert_r_inf_check_holds": res.r_inf_check.holds,
                      "cert_L_inf": res.l_inf}

    # Replicates: the distribution of max/median L∞ over the seven frameworks when the whole study is re-drawn.
    n_rep = 5 if quick else 40
    rep_max, rep_med = [], []
    for rep in range(1, n_rep + 1):
        vals = []
        for i, name in enumerate(CHAINS):
            s = seed + 1000 * rep + i
            traces = simulate(truth(name), N_TRACES, np.random.default_rng(s))
            fit, test = split_traces(traces, 0.5, seed=s)
            chain = tt.ChainEstimator(pseudocount=1.0).fit(fit).fetch_model()
            vals.append(l_inf_distance(chain.reliability(D_MAX), empirical_rdc(test, D_MAX)))
        rep_max.append(float(np.max(vals)))
        rep_med.append(float(np.median(vals)))

    figures: list[Figure] = []
    for name, r in rows.items():
        p = paper.get(name, {})
        figures += [
            Figure(f"{name}/m", f"{name}: m", p.get("m"), r["m"]),
            Figure(f"{name}/KS_p", f"{name}: KS p (held out)", p.get("p_KS"), r["KS_p"],
                   "one draw of a conservative test: compare pass/fail, not the value", 3),
            Figure(f"{name}/L_inf", f"{name}: L∞ over d ∈ [0, 50]", p.get("L_inf_RDC"), r["L_inf"],
                   "sampling noise of 200 held-out traces (s.e. of R̂(d) ≈ 0.035)", 3),
        ]
    l_infs = [r["L_inf"] for r in rows.values()]
    ps = [r["KS_p"] for r in rows.values()]
    agg = ref.get("aggregate", {})
    n_pass = sum(p > 0.05 for p in ps)
    n_cert = sum(bool(r["cert_ks_p"] > 0.05 and r["cert_order_keeps"]) for r in rows.values())
    figures += [
        Figure("n_pass", "frameworks passing the KS at 0.05", agg.get("n_pass_KS_at_0p05"), n_pass),
        Figure("max_L_inf", "max L∞", agg.get("max_L_inf_RDC"), float(np.max(l_infs)),
               "issue 9's bar: ≲ 0.06", 3),
        Figure("median_L_inf", "median L∞", agg.get("median_L_inf_RDC"), float(np.median(l_infs)), "", 3),
        Figure("min_p", "min KS p", agg.get("min_p_KS"), float(np.min(ps)), "", 3),
        Figure("rep/median_max_L_inf", f"{n_rep} re-drawn studies: median of max L∞", agg.get("max_L_inf_RDC"),
               float(np.median(rep_max)), "ours: what a re-run of the whole study typically gives", 3),
        Figure("rep/frac_max_le_006", f"{n_rep} re-drawn studies: share with max L∞ ≤ 0.06", None,
               float(np.mean(np.asarray(rep_max) <= 0.06)), "ours", 3),
        Figure("rep/median_median_L_inf", f"{n_rep} re-drawn studies: median of median L∞",
               agg.get("median_L_inf_RDC"), float(np.median(rep_med)), "ours", 3),
        Figure("n_cert_pass", "our calibrated certificate: timing and order retained", 7, n_cert,
               "ours: lattice KS with parametric bootstrap + permutation order test on the same split", 0),
    ]
    typical = float(np.median(rep_max))
    ok = n_pass == 7 and typical <= 0.07 and all(r["m"] == paper.get(n, {}).get("m") for n, r
                                                                 in rows.items())
    return StudyResult(
        study="SS9", title="strict 50/50 held-out validation (MAST-style chains)", quick=quick, seed=seed,
        paper_ref="Table IV, §VII-C",
        params={"n_traces": N_TRACES, "split": "50/50 by trace", "d_max": D_MAX, "n_model": n_model,
                "censor_prob": CENSOR_P, "censor_at": "U{2..9}", "max_steps": 499, "pseudocount": 1.0,
                "states": "true labels", "n_bootstrap": n_boot},
        figures=figures, headline="max_L_inf",
        verdict="reproduced within tolerance" if ok else "differs, explained",
        summary=(f"{n_pass}/7 frameworks pass the held-out KS (paper 7/7), max L∞ {np.max(l_infs):.3f} (paper "
                 f"0.053), median {np.median(l_infs):.3f} (paper 0.048); our calibrated certificate retains "
                 f"{n_cert}/7; over {n_rep} re-drawn studies the max L∞ has median {typical:.3f} and is ≤ 0.06 in "
                 f"{np.mean(np.asarray(rep_max) <= 0.06):.0%} of them."),
        notes=[
            "Our traces are new draws from the artifact's chains (its generator code and draw order are not in the "
            "artifact), so per-framework L∞ and p differ by sampling noise; the aggregate claims are what is "
            "compared.",
            "The L∞ of a correct model on 200 held-out traces is pure sampling noise (fit half and test half); "
            "it does not shrink with a better model, only with more traces. Our median L∞ agrees with the paper's, "
            "but the max over seven frameworks is typically ≈ 0.09: the paper's 0.053 (all seven ≤ 0.054) is on the "
            "lucky side of the distribution, or its generator differs in a detail the artifact does not record. "
            "Issue 9's bar (max ≲ 0.06) is therefore not met by a fresh draw of the protocol.",
            "L∞ is dominated by the gap between the fit-half and test-half pass rates (the R∞ identity of SS14): "
            "e.g. a fit/test pass-rate difference of 2σ on 200 + 200 traces alone gives L∞ ≈ 0.1, which is what the "
            "largest per-framework value in our draw shows (see data: R50_model vs R50_empirical). The paper's "
            "max L∞ 0.053 is one draw of this distribution; the replicate figures give its spread.",
            "States are the true labels (the artifact's Ward on σ = 0.08 one-hot features recovers them: m equals "
            "the true m for all seven).",
        ],
        data={"frameworks": rows, "replicates": {"max_L_inf": rep_max, "median_L_inf": rep_med}},
    ).to_dict()
