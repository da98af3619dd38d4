"""SS14 — order-k and phase-type lifts on the full SWE-bench corpus (Tran-Truong & Le 2026, Table VII).

All 479 traces, split with :func:`tracetochain.audit._holdout.split_indices` (seed 20260606: the first 239 of
``default_rng(20260606).permutation(479)`` are the fit half — the artifact's split), states = the 10 shell action
categories (the artifact's mapping, ``studies/_swe.py``), lifted to order k ∈ {1, 2, 3} (k-tuples, BEGIN-padded) or
to phase type (category, stage) with B = 16 stages of W ∈ {6, 8, 10} steps. Chain: :class:`tracetochain.ChainEstimator`
with α = 1 and the empirical π0; timing: :func:`tracetochain.audit.ks_paper` (success-conditional two-sample KS,
20,000 model runs, d_max 400); L∞ over d ∈ [0, 80] against the held-out RDC. Added: α = 0 (the R∞ = pass-rate
identity; our observation), exact model percentiles, and the use cases (pass@k, the fallback what-if).
"""

from __future__ import annotations

from typing import Any

from studies import _swe
from studies._common import Figure, StudyResult, artifact_json
from tracetochain import ChainEstimator
from tracetochain.audit import ks_paper, r_inf_check
from tracetochain.audit._holdout import empirical_rdc, l_inf_distance, split_indices
from tracetochain.whatif import Reroute, what_if

HORIZON = 80
D_MAX = 400
ORDERS = (1, 2, 3)
WINDOWS = (6, 8, 10)
N_STAGES = 16


def run(quick: bool, seed: int) -> dict[str, Any]:
    ref = artifact_json("swebench_real/SS14_higher_order.json")
    if ref is None or not _swe.available():
        return StudyResult(study="SS14", title="order-k and phase-type lifts (SWE-bench)", quick=quick, seed=seed,
                           params={}, figures=[], verdict="skipped",
                           summary="Artifact data absent: nothing to compare.").to_dict()
    n_model = 2_000 if quick else 20_000
    base = _swe.table()
    fit_idx, test_idx = split_indices(base, 0.5, seed=seed)
    test = base.select_traces(test_idx)
    emp = empirical_rdc(test, HORIZON)
    held = r_inf_check(0.0, test).pass_rate
    fit_pass = r_inf_check(0.0, base.select_traces(fit_idx)).pass_rate

    models: dict[str, dict[str, Any]] = {}
    chains = {}
    lifts = [(f"k={k}", _swe.order_lift(k)) for k in ORDERS] + [(f"W={w}", _swe.stage_lift(w, N_STAGES))
                                                                for w in WINDOWS]
    for i, (name, lift) in enumerate(lifts):
        fit = _swe.table(lift, fit_idx.tolist())
        chain = ChainEstimator(pseudocount=1.0).fit(fit).fetch_model()
        chain0 = ChainEstimator(pseudocount=0.0).fit(fit).fetch_model()
        ks = ks_paper(chain, test, n_model=n_model, max_steps=D_MAX, seed=seed + i)
        chains[name] = chain
        models[name] = {
            "n_states": chain.n_states, "R_inf": chain.r_inf, "R_inf_alpha0": chain0.r_inf,
            "abs_err_vs_heldout": abs(chain.r_inf - held), "L_inf": l_inf_distance(chain.reliability(HORIZON), emp),
            "KS_D": ks.statistic, "KS_p": ks.p_value, "timing_rejected": ks.rejects(0.05),
            "model_succ_pctiles": _swe.success_percentiles(chain, D_MAX),
        }

    k1 = chains["k=1"]
    fb = what_if(k1, [Reroute("*", 0.1)])
    uses = {"pass@1": float(k1.pass_at_k([1])[0]), "pass@5": float(k1.pass_at_k([5])[0]),
            "pass^5": float(k1.pass_hat_k([5])[0]),
            "R_inf_with_fallback": k1.r_inf + fb.delta_r_inf, "delta_R_inf": fb.delta_r_inf}

    ks_note = ("two-sample KS against seeded model runs: D is a Monte Carlo statistic (our runs ≠ the artifact's "
               "draws); p ≈ 0 in both, timing rejected")
    pct_note = ("ours: exact percentiles of the success time given success by d_max = 400; the artifact's come from "
                "20,000 sampled runs")
    figures: list[Figure] = [
        Figure("held_out_pass_rate", "held-out pass rate (240 traces)", ref["held_out_pass_rate"], held, "", 4),
    ]
    by_k = {f"k={o['k']}": o for o in ref["orders"]} | {f"W={s['stage_window']}": s for s in ref["staged"]}
    for name, _ in lifts:
        r, p = models[name], by_k[name]
        figures += [
            Figure(f"{name}/n_states", f"{name}: states", p["n_states"], r["n_states"],
                   "states seen in the fit half"),
            Figure(f"{name}/R_inf", f"{name}: R∞ (α = 1)", p["R_inf"], r["R_inf"], "", 4),
            Figure(f"{name}/KS_D", f"{name}: KS D (success-conditional)", p["KS_D"], r["KS_D"], ks_note, 3),
            Figure(f"{name}/KS_p", f"{name}: KS p", p["KS_p"], r["KS_p"], "", 3),
            Figure(f"{name}/model_p50", f"{name}: model success time p50", p["model_succ_pctiles"][1],
                   r["model_succ_pctiles"][1], pct_note),
            Figure(f"{name}/model_p90", f"{name}: model success time p90", p["model_succ_pctiles"][2],
                   r["model_succ_pctiles"][2], pct_note),
        ]
        if "L_inf" in p:
            figures.append(Figure(f"{name}/L_inf", f"{name}: L∞ over d ∈ [0, 80]", p["L_inf"], r["L_inf"], "", 4))
        else:
            figures.append(Figure(f"{name}/L_inf", f"{name}: L∞ over d ∈ [0, 80]", None, r["L_inf"],
                                  "ours; the artifact reports no L∞ for the phase-type lifts", 4))
        figures.append(Figure(f"{name}/R_inf_alpha0", f"{name}: R∞ with α = 0", None, r["R_inf_alpha0"],
                              f"ours: equals the fit-half pass rate 160/239 = {fit_pass:.6f} (identity)", 6))
    for k in ORDERS:
        figures.append(Figure(f"k={k}/abs_err", f"k={k}: |R∞ − held-out pass rate|",
                              ref["Rinf_abs_err_vs_pass"][str(k)], models[f"k={k}"]["abs_err_vs_heldout"], "", 4))
    mr = ref["use_cases_valid_on_real_data"]["metric_reconciliation"]
    fr = ref["use_cases_valid_on_real_data"]["fallback_perturbation"]
    figures += [
        Figure("pass@5", "k=1: pass@5 = 1 − (1 − R∞)^5", mr["pass@5"], uses["pass@5"], "", 4),
        Figure("pass^5", "k=1: pass^5 = R∞^5", mr["pass^5"], uses["pass^5"], "", 4),
        Figure("fallback/R_inf", "k=1: R∞ with a fallback rescuing 10% of failures", fr["R_inf_with_fallback"],
               uses["R_inf_with_fallback"], "ours: what_if(chain, [Reroute('*', 0.1)]), exact", 4),
        Figure("fallback/delta", "k=1: ΔR∞ of the fallback", fr["delta_R_inf"], uses["delta_R_inf"], "", 4),
    ]

    identity_dev = max(abs(r["R_inf_alpha0"] - fit_pass) for r in models.values())
    exact_keys = [f"{n}/R_inf" for n, _ in lifts] + [f"k={k}/L_inf" for k in ORDERS] + [
        f"{n}/n_states" for n, _ in lifts] + ["pass@5", "pass^5", "fallback/R_inf", "fallback/delta",
                                               "held_out_pass_rate"]
    fm = {f.key: f for f in figures}
    det_dev = max(abs(fm[k].diff or 0.0) for k in exact_keys)
    all_rejected = all(r["timing_rejected"] for r in models.values())
    ok = det_dev <= 5e-5 + 1e-12 and all_rejected and identity_dev < 1e-12
    return StudyResult(
        study="SS14", title="order-k and phase-type lifts (SWE-bench)", quick=quick, seed=seed,
        paper_ref="Table VII, §VIII",
        params={"n_traces": base.n_traces, "split_seed": seed, "n_fit": len(fit_idx), "n_test": len(test_idx),
                "orders": list(ORDERS), "windows": list(WINDOWS), "n_stages": N_STAGES, "pseudocount": 1.0,
                "n_model": n_model, "d_max": D_MAX, "horizon": HORIZON},
        figures=figures, headline="k=1/R_inf",
        verdict="reproduced within tolerance" if ok else "differs, explained",
        summary=(f"R∞, L∞, state counts and the use cases of every lift are reproduced to the artifact's rounding "
                 f"(max deviation {det_dev:.1e}); KS rejects timing at every order and stage window as in the paper "
                 f"(D differs by Monte Carlo only); with α = 0, R∞ = the fit pass rate exactly for every lift."),
        notes=[
            "R∞ ≈ pass rate is an identity, not evidence of fit (our observation): with α = 0 and π0 "
            f"empirical, R∞ equals the fit-half pass rate {fit_pass:.4f} for every order and stage window "
            f"(max deviation {identity_dev:.1e}). The α = 1 drop grows with the number of "
            "states (smoothing mass leaks to ⊖) — "
            "the real cause of \"higher orders overfit R∞\".",
            "The misfit is in duration, not order: KS D stays ≈ 0.29–0.42 for every lift (phase-type narrows it to "
            "≈ 0.29, not closed); R(d) stays withheld on this corpus.",
            "Model percentiles: ours are exact (R(d)/R(400)); the artifact's are sample percentiles of 20,000 runs, "
            "so they differ by a step or two.",
            "States: the artifact counts the lifted states seen in the fit half, as we do (all 479 traces would give "
            "more, e.g. 86 at k = 2, 380 at k = 3).",
        ],
        data={"models": models, "use_cases": uses, "fit_pass_rate": fit_pass, "held_out_pass_rate": held,
              "fit_indices": fit_idx.tolist()},
    ).to_dict()
