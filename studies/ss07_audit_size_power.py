"""SS7 — size and power of the audit (Tran-Truong & Le 2026, §VII-B).

(A) Markov ground truth — :func:`tracetochain.datasets.ss7_chain` (m = 5, s0 = 0), 30 corpora × 300 traces
(d_max 200); (B) second-order ground truth — :func:`tracetochain.datasets.simulate_memory_traces` with memory 0.6,
15 corpora × 300 traces; (C) 500 traces from each of the seven SS6 chains. The traces are the true states
(the artifact's noise-free one-hot features with k fixed to the true m recover exactly these), so the states are
the labels. Per corpus, in sample as the artifact did:

* the artifact's layers: the two-sample KS on all absorption times (:func:`tracetochain.audit.ks_paper`,
  ``outcome="any"``, 5,000 model runs) and the concatenated-stream AIC (:func:`tracetochain.audit.order_test`,
  ``mode="artifact"``);
* our certificate (:func:`tracetochain.audit.audit`, ``holdout=False``): calibrated lattice KS (parametric
  bootstrap with refit) and the per-trace order test.

Corpus seeds: ``chain_seeds(master, ·)`` (the artifact does not record its per-corpus seeds), so p-values are
compared as distributions (retain/reject fractions, ranges), not draw for draw.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tracetochain as tt
from studies._common import Figure, StudyResult, artifact_json, chain_seeds
from studies.ss06_illustrative_ranking import FRAMEWORKS, artifact_chains
from tracetochain.audit import audit, ks_paper, order_test
from tracetochain.datasets import simulate_memory_traces, ss7_chain

N_TRACES = 300
MAX_STEPS = 200
MEMORY = 0.6
LEVEL = 0.05


def _one(traces: tt.TraceTable, seed: int, n_model: int, n_boot: int, permutation: bool = False) -> dict[str, Any]:
    chain = tt.ChainEstimator(pseudocount=1.0).fit(traces).fetch_model()
    ks = ks_paper(chain, traces, n_model=n_model, outcome="any", seed=seed)
    art = order_test(traces, mode="artifact")
    cert = audit(traces, holdout=False, seed=seed, n_bootstrap=n_boot, n_permutations=n_boot, pseudocount=1.0,
                 order_criterion="aic")
    out: dict[str, Any] = {}
    if permutation:  # the order layer with its calibrated criterion (within-context permutation p-value)
        perm = audit(traces, holdout=False, seed=seed, n_bootstrap=n_boot, n_permutations=n_boot, pseudocount=1.0,
                     order_criterion="permutation")
        out = {"decision_permutation": perm.decision, "order_keeps_order1_permutation": perm.order.keeps_order1}
    return out | {"paper_ks_D": ks.statistic, "paper_ks_p": ks.p_value, "artifact_delta_aic": art.delta_aic,
            "artifact_aic_keeps_order1": art.keeps_order1, "decision": cert.decision, "ks_p": cert.timing.p_value,
            "ks_D": cert.timing.statistic, "order_keeps_order1": cert.order.keeps_order1,
            "order_delta_aic": cert.order.delta_aic, "order_p": cert.order.p_permutation}


def run(quick: bool, seed: int) -> dict[str, Any]:
    ref = artifact_json("synthetic/SS7_summary.json") or {}
    n_a, n_b = (8, 5) if quick else (30, 15)
    n_model = 2_000 if quick else 5_000
    n_boot = 99 if quick else 199
    seeds = chain_seeds(seed, 30 + 15 + len(FRAMEWORKS))
    truth = ss7_chain()
    a_rows = [_one(tt.datasets.simulate_traces(truth, N_TRACES, seed=s, max_steps=MAX_STEPS), s, n_model, n_boot)
              for s in seeds[:n_a]]
    b_rows = [_one(simulate_memory_traces(truth, N_TRACES, memory=MEMORY, seed=s, max_steps=MAX_STEPS), s, n_model,
                   n_boot) for s in seeds[30:30 + n_b]]
    c_rows: dict[str, dict[str, Any]] = {}
    if not quick:
        for name, chain, s in zip(FRAMEWORKS, artifact_chains(2026042006).values(), seeds[45:], strict=True):
            c_rows[name] = _one(tt.datasets.simulate_traces(chain, 500, seed=s), s, n_model, n_boot, True)

    def frac(rows: list[dict[str, Any]], pred: Any) -> float:
        return float(np.mean([bool(pred(r)) for r in rows]))

    pa, sp = ref.get("power", {}), ref.get("specificity", {})
    a_p = [r["paper_ks_p"] for r in a_rows]
    b_p = [r["paper_ks_p"] for r in b_rows]
    b_daic = [r["artifact_delta_aic"] for r in b_rows]
    figures = [
        Figure("A/paper_ks_retain", f"(A) Markov truth, {n_a} corpora: paper KS retains (p > 0.05)",
               pa.get("fraction_retain_null_at_0.05"), frac(a_rows, lambda r: r["paper_ks_p"] > LEVEL),
               "the two-sample KS against a fitted model is conservative (tied integer times, in-sample fit)", 3),
        Figure("A/paper_ks_mean_p", "(A) paper KS: mean p", pa.get("mean_p"), float(np.mean(a_p)),
               "a calibrated test would have mean p ≈ 0.5; ≈ 0.96 shows how conservative it is", 3),
        Figure("A/paper_ks_min_p", "(A) paper KS: min p", min(pa["p_values"]) if pa else None, float(np.min(a_p)),
               "different corpora (seeds not recorded): compare as distributions", 3),
        Figure("A/artifact_aic_keeps", "(A) artifact stream AIC keeps first order", None,
               frac(a_rows, lambda r: r["artifact_aic_keeps_order1"]), "ours; the artifact records no AIC for (A)", 3),
        Figure("A/cert_ks_reject", "(A) our calibrated KS rejects (size, nominal 0.05)", None,
               frac(a_rows, lambda r: r["ks_p"] <= LEVEL),
               f"ours: parametric bootstrap with refit, B = {n_boot}; binomial s.e. at 0.05 on {n_a} corpora = "
               f"{np.sqrt(0.05 * 0.95 / n_a):.3f}", 3),
        Figure("A/cert_order_reject", "(A) our per-trace order test rejects first order", None,
               frac(a_rows, lambda r: not r["order_keeps_order1"]), "ours (AIC criterion on the same observations)",
               3),
        Figure("A/cert_accept", "(A) our certificate accepts", 1.0, frac(a_rows, lambda r: r["decision"] == "accept"),
               "paper column: the composite retained 30/30", 3),
        Figure("B/paper_ks_reject", f"(B) memory {MEMORY}, {n_b} corpora: paper KS rejects",
               sp.get("fraction_reject_ks_at_0.05"), frac(b_rows, lambda r: r["paper_ks_p"] <= LEVEL),
               "the success-time law of the memory chain is close to a first-order one: KS has no power here", 3),
        Figure("B/paper_ks_min_p", "(B) paper KS: min p", min(sp["p_values_ks"]) if sp else None,
               float(np.min(b_p)), "", 3),
        Figure("B/artifact_aic_reject", "(B) artifact stream AIC rejects first order",
               sp.get("fraction_reject_aic"), frac(b_rows, lambda r: not r["artifact_aic_keeps_order1"]), "", 3),
        Figure("B/artifact_daic_min", "(B) artifact ΔAIC: min", min(sp["delta_aic"]) if sp else None,
               float(np.min(b_daic)), "different corpora: same range", 4),
        Figure("B/artifact_daic_max", "(B) artifact ΔAIC: max", max(sp["delta_aic"]) if sp else None,
               float(np.max(b_daic)), "", 4),
        Figure("B/cert_order_reject", "(B) our per-trace order test rejects first order (power)",
               sp.get("fraction_reject_aic"), frac(b_rows, lambda r: not r["order_keeps_order1"]),
               "paper column: its AIC layer", 3),
        Figure("B/cert_not_accept", "(B) our certificate does not accept", sp.get("fraction_reject_composite"),
               frac(b_rows, lambda r: r["decision"] != "accept"), "paper column: its composite", 3),
    ]
    for name, r in c_rows.items():
        p = ref.get("applied_mast", {}).get(name, {})
        figures.append(Figure(f"C/{name}/paper_ks_p", f"(C) {name}: paper KS p (500 traces)", p.get("ks_pvalue"),
                              r["paper_ks_p"], "retained in both (p > 0.05); the value is one Monte Carlo draw", 3))
    if c_rows:
        c_list = list(c_rows.values())
        figures += [
            Figure("C/cert_accept", "(C) our certificate (default order criterion AIC) accepts (7 chains)", 1.0,
                   frac(c_list, lambda r: r["decision"] == "accept"),
                   "paper column: all 7 accepted. Ours: the per-trace AIC prefers order 2 on these dense 5–12-state "
                   "chains although they are first order (see notes) — a false rejection", 3),
            Figure("C/cert_accept_permutation", "(C) our certificate with order_criterion='permutation' accepts", 1.0,
                   frac(c_list, lambda r: r["decision_permutation"] == "accept"),
                   "ours: the calibrated permutation criterion keeps first order", 3),
            Figure("C/order_perm_keeps", "(C) permutation order test keeps first order", 1.0,
                   frac(c_list, lambda r: r["order_keeps_order1_permutation"]), "paper column: AIC kept all 7", 3),
        ]

    fm = {f.key: f for f in figures}
    ok = (fm["A/paper_ks_retain"].ours == 1.0 and fm["B/cert_order_reject"].ours == 1.0
          and fm["B/artifact_aic_reject"].ours == 1.0 and fm["B/cert_not_accept"].ours == 1.0
          and fm["A/cert_ks_reject"].ours is not None and float(fm["A/cert_ks_reject"].ours) <= 0.2)
    return StudyResult(
        study="SS7", title="audit size and power (Markov vs second-order truth)", quick=quick, seed=seed,
        paper_ref="§VII-B",
        params={"n_corpora_A": n_a, "n_corpora_B": n_b, "n_traces": N_TRACES, "max_steps": MAX_STEPS,
                "memory": MEMORY, "n_model": n_model, "n_bootstrap": n_boot, "level": LEVEL},
        figures=figures, headline="B/cert_order_reject",
        verdict="reproduced within tolerance" if ok and abs(fm["B/paper_ks_reject"].diff or 0.0) <= 0.2
        else "differs, explained",
        summary=(f"Markov truth: the paper's KS retains {fm['A/paper_ks_retain'].ours:.0%} (mean p "
                 f"{fm['A/paper_ks_mean_p'].ours:.2f}: conservative), our calibrated KS rejects "
                 f"{fm['A/cert_ks_reject'].ours:.0%} (nominal 5%); second-order truth: the order layer rejects "
                 f"{fm['B/cert_order_reject'].ours:.0%} (ours and the artifact's stream AIC), the paper's KS "
                 f"{fm['B/paper_ks_reject'].ours:.0%} (artifact 0%)."),
        notes=[
            "The paper's KS p-values under the null average ≈ 0.96, far from the uniform law of a calibrated test: "
            "tied integer times and the in-sample fit both make ks_2samp conservative (Noether 1963; "
            "docs/statistics.md §5). Our lattice KS with a refitting parametric bootstrap is calibrated: its rejection "
            "rate under (A) is near the nominal level, not 0.",
            "Under (B) the memory pulls mass back to the previous state, which changes the law of the absorption "
            "time only a little; the order layer is the one with power (100% in both). Our paper-mode KS rejects "
            "some (B) corpora where the artifact's rejected none (p ≥ 0.136) and its null p-values are lower "
            "(mean ≈ 0.8 vs 0.96): the artifact's per-corpus seeds and its KS model-run count for (A)/(B) are not "
            "recorded, and its fit went through Ward on one-hot features rather than the labels, so we cannot say "
            "which detail makes its KS more conservative; the conclusion (KS alone is not a test of order) holds.",
            "(C) shows a weakness of our default order criterion: on the seven dense SS6 chains (m = 5–12, 500 "
            "traces, truly first order) the per-trace AIC prefers order 2 every time (ΔAIC +8 … +509) while the "
            "within-context permutation test on the same observations keeps first order (p = 0.055–0.92). AIC is a "
            "selection rule, not a level-α test (the order layer's own docstring); with many sparse second-order "
            "contexts its penalty is too small. Use order_criterion='permutation' for a calibrated decision; "
            "reported to the audit author.",
            "(C) uses our labels as states (the artifact's Ward on noisy features over-split to m = 5–12); the "
            "conclusion — all seven self-consistent — is the same.",
        ],
        data={"A": a_rows, "B": b_rows, "C": c_rows},
    ).to_dict()
