"""SS15 — τ-bench, 2 models × 2 domains (Tran-Truong & Le 2026, Table VIII).

The artifact keeps only sufficient statistics (``tau_bench/stats.json``: transition counts C, exit counts Cs/Cf from
the last state, first-state counts π, success-length histogram) for the four corpora. We rebuild each chain from
them with :func:`tracetochain.estimate_chain` (:class:`tracetochain.TransitionCounts`; α = 1, an unvisited row sends
all mass to ⊖, π0 empirical), pool the counts, and run the success-conditional two-sample KS
(:func:`tracetochain.audit.ks_paper`: the histogram's lengths vs 20,000 model runs, d_max 300) — **in sample**, as
the paper did. With α = 0 the same counts give R∞ = the pass rate exactly (the identity noted under SS14).

Held out, as the paper claimed: on the one raw file we have (gpt-4o airline, 200 traces = 50 tasks × 4 trials) we
first check that our chat vocabulary regenerates the artifact's counts exactly, then run
:func:`tracetochain.audit.holdout_audit` split by task (trials of a task never straddle the halves) and by trace.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tracetochain as tt
from studies._common import REPO, Figure, StudyResult, artifact_json
from tracetochain.audit import TimingSettings, holdout_audit, ks_paper, r_inf_check, split_traces
from tracetochain.states import CategoricalStates

DOMAINS = ("sonnet-retail", "sonnet-airline", "gpt4o-retail", "gpt4o-airline")
STATE_NAMES = ("respond", "lookup", "write", "handoff", "think", "other")  # the artifact's r, l, w, h, t, o
D_MAX = 300
TAU_FILE = REPO.parent / "shared" / "data" / "tau-bench" / "historical_trajectories" / "gpt-4o-airline.json"


def counts_from_stats(d: dict[str, Any]) -> tt.TransitionCounts:
    """The artifact's per-domain sufficient statistics as TransitionCounts (no censored or invalid traces)."""
    ns, n = int(d["ns"]), int(d["n"])
    return tt.TransitionCounts(
        state_names=STATE_NAMES, transitions=np.asarray(d["C"], np.int64),
        exits_success=np.asarray(d["Cs"], np.int64), exits_failure=np.asarray(d["Cf"], np.int64),
        initial=np.asarray(d["pi"], np.int64),
        n_traces={"success": ns, "failure": n - ns, "censored": 0, "invalid": 0})


def pooled(counts: list[tt.TransitionCounts]) -> tt.TransitionCounts:
    return tt.TransitionCounts(
        state_names=STATE_NAMES, transitions=np.sum([c.transitions for c in counts], axis=0),
        exits_success=np.sum([c.exits_success for c in counts], axis=0),
        exits_failure=np.sum([c.exits_failure for c in counts], axis=0),
        initial=np.sum([c.initial for c in counts], axis=0),
        n_traces={k: sum(c.n_traces[k] for c in counts) for k in counts[0].n_traces})


def lengths_table(hist: dict[str, int]) -> tt.TraceTable:
    """Successful traces with the histogram's lengths (the states are irrelevant to the KS on lengths)."""
    records = []
    t = 0
    for length, count in sorted(((int(k), int(v)) for k, v in hist.items())):
        for _ in range(count):
            records += [{"trace_id": f"s{t}", "step_idx": j, "state": "respond", "outcome": "success"}
                        for j in range(length)]
            t += 1
    return tt.TraceTable.from_records(records)


def _median_success_length(chain: tt.AbsorbingChain) -> float:
    rel = chain.reliability(D_MAX)
    return float(np.searchsorted(rel / rel[-1], 0.5 - 1e-12))


def _hist_median(hist: dict[str, int]) -> float:
    return float(np.median(np.repeat([int(k) for k in hist], [int(v) for v in hist.values()])))


def run(quick: bool, seed: int) -> dict[str, Any]:
    stats = artifact_json("tau_bench/stats.json")
    ref = artifact_json("tau_bench/SS15_summary.json")
    if stats is None or ref is None:
        return StudyResult(study="SS15", title="τ-bench (2 models × 2 domains)", quick=quick, seed=seed, params={},
                           figures=[], verdict="skipped", summary="Artifact data absent: nothing to compare.").to_dict()
    n_model = 2_000 if quick else 20_000
    paper = {r["domain"]: r for r in ref["rows"]}
    counts = {d: counts_from_stats(stats["domains"][d]) for d in DOMAINS}
    counts["POOLED"] = pooled([counts[d] for d in DOMAINS])
    hists = {d: stats["domains"][d]["slh"] for d in DOMAINS}
    hists["POOLED"] = {}
    for d in DOMAINS:
        for k, v in hists[d].items():
            hists["POOLED"][k] = hists["POOLED"].get(k, 0) + v

    rows: dict[str, dict[str, Any]] = {}
    for i, d in enumerate((*DOMAINS, "POOLED")):
        c = counts[d]
        chain = tt.estimate_chain(c, pseudocount=1.0, unvisited="failure")
        chain0 = tt.estimate_chain(c, pseudocount=0.0, unvisited="failure")
        n, ns = c.n_fitted_traces, c.n_traces["success"]
        ks = ks_paper(chain, lengths_table(hists[d]), n_model=n_model, max_steps=D_MAX, seed=seed + i)
        rows[d] = {"n": n, "n_succ": ns, "pass_rate": ns / n, "R_inf": chain.r_inf, "R_inf_alpha0": chain0.r_inf,
                   "abs_err": abs(chain.r_inf - ns / n), "KS_D": ks.statistic, "KS_p": ks.p_value,
                   "timing_rejected": ks.rejects(0.05), "emp_succ_med": _hist_median(hists[d]),
                   "mod_succ_med": _median_success_length(chain)}
    mae = float(np.mean([rows[d]["abs_err"] for d in DOMAINS]))

    ks_note = "Monte Carlo statistic (our seeded runs ≠ the artifact's); rejects in both"
    figures: list[Figure] = []
    for d in (*DOMAINS, "POOLED"):
        r, p = rows[d], paper[d]
        figures += [
            Figure(f"{d}/n", f"{d}: n", p["n"], r["n"]),
            Figure(f"{d}/pass_rate", f"{d}: pass rate", p["pass_rate"], r["pass_rate"],
                   "paper rounds to 3 decimals", 3),
            Figure(f"{d}/R_inf", f"{d}: R∞ (α = 1, in sample)", p["R_inf"], r["R_inf"], "", 3),
            Figure(f"{d}/R_inf_alpha0", f"{d}: R∞ with α = 0 vs the pass rate (paper's successes/n)",
                   p["n_succ"] / p["n"], r["R_inf_alpha0"], "ours at α = 0: equal exactly (identity)", 6),
            Figure(f"{d}/KS_D", f"{d}: KS D (success-conditional)", p["KS_D"], r["KS_D"], ks_note, 3),
            Figure(f"{d}/KS_p", f"{d}: KS p", p["KS_p"], r["KS_p"], "", 2),
            Figure(f"{d}/mod_succ_med", f"{d}: model median success length", p["mod_succ_med"], r["mod_succ_med"],
                   "ours exact (R(d)/R(300)), the artifact's from 20,000 runs"),
        ]
    figures.append(Figure("mae", "mean |R∞ − pass rate| over the 4 runs", ref["Rinf_vs_pass_mae"], mae,
                          "in sample: the gap is Laplace smoothing only (0 at α = 0)", 4))

    # ---- held out, on the raw gpt-4o airline file
    held: dict[str, Any] = {}
    if TAU_FILE.is_file():
        traces = tt.read_traces(TAU_FILE)
        states = CategoricalStates(vocabulary="chat", keep_unobserved=True)
        model = states.fit(traces).fetch_model()
        mine = tt.count_transitions(model.label(traces), states=model.state_names)
        art = counts["gpt4o-airline"]
        count_dev = int(max(np.abs(mine.transitions - art.transitions).max(),
                            np.abs(mine.exits_success - art.exits_success).max(),
                            np.abs(mine.exits_failure - art.exits_failure).max(),
                            np.abs(mine.initial - art.initial).max()))
        held["count_max_abs_diff"] = count_dev
        held["names_match"] = tuple(model.state_names) == STATE_NAMES
        figures.append(Figure("file/count_dev", "gpt-4o airline file → counts, max |ours − stats.json|", None,
                              count_dev, "ours: the chat vocabulary regenerates the artifact's sufficient statistics"))
        timing = TimingSettings(mode="paper", n_model=n_model, paper_max_steps=D_MAX)
        for by in ("task", "trace"):
            res = holdout_audit(traces, states=states, unvisited="failure", seed=seed, by=by, timing=timing,
                                pseudocount=1.0)
            chk = res.r_inf_check
            fit_pass = r_inf_check(0.0, res.train).pass_rate
            held[by] = {"n_train": res.split["n_train"], "n_test": res.split["n_test"], "R_inf": res.chain.r_inf,
                        "held_out_pass_rate": chk.pass_rate, "abs_err": chk.abs_error,
                        "interval": [chk.lower, chk.upper],
                        "r_inf_in_interval": chk.lower <= chk.r_inf <= chk.upper,
                        "difference_interval": [chk.difference_lower, chk.difference_upper],
                        "r_inf_check_holds": chk.holds, "KS_D": res.timing.statistic, "KS_p": res.timing.p_value,
                        "L_inf": res.l_inf, "fit_pass_rate": fit_pass}
            figures += [
                Figure(f"heldout_{by}/R_inf", f"held out by {by}: R∞ on the fit half", None, res.chain.r_inf,
                       f"ours: {res.split['n_train']} fit / {res.split['n_test']} test traces", 4),
                Figure(f"heldout_{by}/abs_err", f"held out by {by}: |R∞ − held-out pass rate|", paper[
                    "gpt4o-airline"]["abs_err"], chk.abs_error,
                       f"paper value is in sample; held out, the gap is split noise: fit-half pass rate "
                       f"{fit_pass:.3f} vs held-out {chk.pass_rate:.3f} (95% Wilson [{chk.lower:.3f}, "
                       f"{chk.upper:.3f}], R∞ inside: {'yes' if chk.lower <= chk.r_inf <= chk.upper else 'no'}; "
                       f"consistent once the fit half's noise is counted: {'yes' if chk.holds else 'no'})", 4),
                Figure(f"heldout_{by}/KS_p", f"held out by {by}: KS p (success-conditional)", None, res.timing.p_value,
                       "ours", 2),
            ]

        # Many task splits: the expected held-out gap against the fit/test pass-rate noise it is made of.
        n_splits = 50 if quick else 400
        gaps, noise = [], []
        for sd in np.random.default_rng(seed).integers(0, 2**32, n_splits):
            fit, test = split_traces(traces, 0.5, by="task", seed=int(sd))
            labelled = model.label(fit)
            ch = tt.ChainEstimator(pseudocount=1.0, unvisited="failure", states=model.state_names).fit(
                labelled).fetch_model()
            test_pass = r_inf_check(0.0, test).pass_rate
            gaps.append(abs(ch.r_inf - test_pass))
            noise.append(abs(r_inf_check(0.0, fit).pass_rate - test_pass))
        held["splits"] = {"n_splits": n_splits, "mean_abs_gap": float(np.mean(gaps)),
                          "mean_abs_pass_rate_noise": float(np.mean(noise)), "gaps": gaps}
        figures += [
            Figure("splits/mean_abs_gap", f"{n_splits} task splits: mean |R∞ − held-out pass rate|",
                   paper["gpt4o-airline"]["abs_err"], float(np.mean(gaps)),
                   "the honest held-out error: ~the fit/test pass-rate noise below, not the paper's in-sample 0.010",
                   4),
            Figure("splits/mean_abs_noise", f"{n_splits} task splits: mean |fit − held-out pass rate|", None,
                   float(np.mean(noise)), "ours: the pass-rate noise between two halves of 25 tasks × 4 trials", 4),
        ]

    identity_dev = max(abs(r["R_inf_alpha0"] - r["pass_rate"]) for r in rows.values())
    fm = {f.key: f for f in figures}
    r_dev = max(abs(fm[f"{d}/R_inf"].diff or 0.0) for d in (*DOMAINS, "POOLED"))
    rejected = all(r["timing_rejected"] for r in rows.values())
    ok = r_dev <= 5e-4 + 1e-12 and identity_dev < 1e-12 and rejected
    notes = [
        "In sample, as the paper did: R∞ is fitted on all traces of a domain and compared with the pass rate of the "
        "same traces. With α = 0 this is an identity (R∞ = pass rate exactly, max deviation "
        f"{identity_dev:.1e}); at α = 1 the one-signed residuals (R∞ slightly below the pass rate everywhere) are "
        "Laplace smoothing leaking mass to ⊖ — not the censoring the paper names (these traces have none).",
        "Held out (the paper's claim): only the gpt-4o airline file is available raw; the other three domains exist "
        "as counts only, which cannot be split into traces.",
        "The paper's KS p = 0 means < 1e−4; all timing tests reject in both, so R(d) is withheld.",
    ]
    return StudyResult(
        study="SS15", title="τ-bench (2 models × 2 domains)", quick=quick, seed=seed,
        paper_ref="Table VIII, §VIII",
        params={"domains": list(DOMAINS), "pseudocount": 1.0, "unvisited": "failure", "n_model": n_model,
                "d_max": D_MAX, "ks": "success-conditional ks_2samp"},
        figures=figures, headline="POOLED/R_inf",
        verdict="reproduced within tolerance" if ok else "differs, explained",
        summary=(f"R∞ of all four domains and the pool are reproduced from the stored counts (max deviation "
                 f"{r_dev:.1e} at the paper's 3 decimals), α = 0 gives the pass rates exactly, and timing is "
                 "rejected everywhere; held out on the gpt-4o airline file the R∞ gap grows from 0.010 to the "
                 f"fit/test pass-rate noise ({held['splits']['mean_abs_gap']:.3f} on average over task splits)."
                 if "splits" in held else "; the raw gpt-4o airline file is absent (no held-out check)."),
        notes=notes, data={"in_sample": rows, "held_out": held, "mae": mae},
    ).to_dict()
