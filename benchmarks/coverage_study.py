"""Study: do the uncertainty intervals mean what they say? (issue 5 acceptance, full size)

Sections (each writes its part of ``benchmarks/results/coverage.json``):

* ``coverage`` — for two known chains (the paper's 3-state notation example, and a random 6-state chain with
  heterogeneous exits and a spread π0, ``tests/uncertainty/_uq_generators.hetero_chain``) and n ∈ {50, 200, 1000}
  simulated traces, the share of replicates whose 95% interval covers the true R∞ and R(10), for the Dirichlet
  posterior (π0 fixed, and π0 drawn), and the fast trace bootstrap (B = 200). Acceptance: 90–98%. Reported with the
  binomial standard error, a Wilson 95% interval for the coverage, and the mean/median interval widths.
* ``ss8`` — per-entry 95% interval widths of Q on the paper's SS8 generator (study SS8 of Tran-Truong & Le 2026,
  reconstructed), posterior and bootstrap, next to the paper's Table III.
* ``ss13`` — fast vs full bootstrap path (study SS13): (a) the paper's synthetic m = 4 chain with one-hot features,
  250 traces, B = 80, full path aligned by Hungarian matching on centroids (ours) and by greedy R⊕ matching (the
  artifact's); (b) the real SWE-bench corpus (artifact ``corpus.json``; sub-samples of 100 and 160 traces) with
  ``WardStates(RuleFeaturizer(vocabulary="shell", depth="hindsight-fraction"))``, and the same with the depth
  weighted ×2
  (a clustering-sensitive configuration), on 100- and 160-trace sub-samples. Ratio of median Q half-widths (and of
  the R∞ and mean-steps interval widths) next to the paper's 4.65.

Usage::

    python benchmarks/coverage_study.py                      # everything (~10–20 min on 2 cores)
    python benchmarks/coverage_study.py --sections coverage --reps 300
    python benchmarks/coverage_study.py --quick --no-save    # a smoke run
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "uncertainty"))
from _common import RESULTS_DIR, machine_info, markdown_table, write_results
from _uq_generators import SS8_FRAMEWORKS, hetero_chain, ss8_traces, ss13_chain

import tracetochain as tt
from tracetochain.featurize import RuleFeaturizer
from tracetochain.states import WardStates
from tracetochain.uncertainty import ChainEnsemble, DirichletPosterior, TraceBootstrap

REPO = Path(__file__).resolve().parents[1]
SWE_CORPUS = REPO.parent / "shared" / "data" / "tracetochain-artifact" / "swebench_real" / "corpus.json"
PAPER_SS8 = {  # Table III: posterior min/median/max, bootstrap min/median/max (Tran-Truong & Le 2026, Table III)
    "react": (0.037, 0.110, 0.313, 0.017, 0.097, 0.287), "reflexion": (0.048, 0.109, 0.238, 0.040, 0.098, 0.253),
    "cot_agent": (0.029, 0.111, 0.337, 0.008, 0.084, 0.288), "toolformer": (0.041, 0.108, 0.241, 0.034, 0.101, 0.208),
    "babyagi": (0.040, 0.113, 0.286, 0.035, 0.100, 0.291), "autogpt": (0.044, 0.112, 0.283, 0.012, 0.100, 0.268),
    "agentbench": (0.034, 0.116, 0.265, 0.032, 0.103, 0.250),
}
PAPER_SS8_STEPS = {"react": 818, "reflexion": 805, "cot_agent": 894, "toolformer": 865, "babyagi": 861,
                   "autogpt": 777, "agentbench": 841}
PAPER_SS13 = {"median_halfwidth_fast": 0.0339, "median_halfwidth_full": 0.1575, "ratio_full_over_fast": 4.65}


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return centre - half, centre + half


# ----------------------------------------------------------------------------------------------------- coverage
def run_coverage(reps: int, sizes: list[int], draws: int, resamples: int) -> dict[str, Any]:
    chains = {"notation (3 states, s0)": tt.datasets.notation_chain(),
              "random 6 states (spread pi0)": hetero_chain(6, 7)}
    methods = ("posterior", "posterior, pi0 drawn", "bootstrap")
    cells = []
    for c_idx, (cname, chain) in enumerate(chains.items()):
        truth = {"r_inf": chain.r_inf, "R(10)": float(chain.reliability(10)[10])}
        for n in sizes:
            t0 = time.perf_counter()
            hits = {(m, q): 0 for m in methods for q in truth}
            widths: dict[tuple[str, str], list[float]] = {(m, q): [] for m in methods for q in truth}
            for r in range(reps):
                rng = np.random.default_rng(np.random.SeedSequence([20260606, c_idx, n, r]))
                traces = tt.datasets.simulate_traces(chain, n, seed=rng)
                fitted = tt.ChainEstimator(states=chain.state_names).fit(traces).fetch_model()
                ens: dict[str, ChainEnsemble] = {
                    "posterior": DirichletPosterior(samples=draws, seed=r).fit(fitted).fetch_model().ensemble,
                    "posterior, pi0 drawn": DirichletPosterior(samples=draws, seed=r, initial="sample").fit(
                        fitted).fetch_model().ensemble,
                    "bootstrap": TraceBootstrap(samples=resamples, seed=r, state_names=chain.state_names).fit(
                        traces).fetch_model(),
                }
                for m, e in ens.items():
                    stats = {"r_inf": e.stats("r_inf"), "R(10)": e.stats("reliability", horizon=10).element(10)}
                    for q, s in stats.items():
                        assert s.lower is not None and s.upper is not None
                        hits[(m, q)] += int(s.lower <= truth[q] <= s.upper)
                        widths[(m, q)].append(s.upper - s.lower)
            for m in methods:
                for q in truth:
                    k = hits[(m, q)]
                    lo, hi = wilson(k, reps)
                    cov = k / reps
                    cells.append({"chain": cname, "n_traces": n, "method": m, "quantity": q, "truth": truth[q],
                                  "replicates": reps, "coverage": cov, "binomial_se": math.sqrt(cov * (1 - cov) / reps),
                                  "wilson95": [lo, hi], "accepted_90_98": 0.90 <= cov <= 0.98,
                                  "mean_width": float(np.mean(widths[(m, q)])),
                                  "median_width": float(np.median(widths[(m, q)]))})
            print(f"# coverage {cname}, n={n}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    rows = [[c["chain"].split(" (")[0], str(c["n_traces"]), c["method"], c["quantity"], f"{c['coverage']:.3f}",
             f"[{c['wilson95'][0]:.3f}, {c['wilson95'][1]:.3f}]", f"{c['mean_width']:.3f}",
             "yes" if c["accepted_90_98"] else "NO"] for c in cells]
    print(markdown_table(["chain", "n", "method", "quantity", "coverage", "Wilson 95%", "mean width", "90–98%"], rows))
    return {"confidence": 0.95, "replicates": reps, "posterior_draws": draws, "bootstrap_resamples": resamples,
            "sizes": sizes, "acceptance": [0.90, 0.98], "cells": cells,
            "all_accepted": all(c["accepted_90_98"] for c in cells),
            "accepted_default_methods": all(c["accepted_90_98"] for c in cells
                                            if c["method"] in ("posterior", "bootstrap"))}


# ---------------------------------------------------------------------------------------------------------- SS8
def run_ss8(resamples: int) -> dict[str, Any]:
    rows_out = []
    for f, (name, _, _) in enumerate(SS8_FRAMEWORKS):
        traces = ss8_traces(f)
        chain = tt.ChainEstimator().fit(traces).fetch_model()
        post = DirichletPosterior().fit(chain).fetch_model().intervals.width_summary("Q")
        boot = TraceBootstrap(samples=resamples, seed=SS8_FRAMEWORKS.index(SS8_FRAMEWORKS[f]) + 1).fit(
            traces).fetch_model().entry_intervals().width_summary("Q")
        p = PAPER_SS8[name]
        rows_out.append({"framework": name, "n_steps": traces.n_steps, "paper_n_steps": PAPER_SS8_STEPS[name],
                         "m": chain.n_states, "posterior": post, "bootstrap": boot,
                         "paper_posterior": {"min": p[0], "median": p[1], "max": p[2]},
                         "paper_bootstrap": {"min": p[3], "median": p[4], "max": p[5]}})
    table = [[r["framework"], str(r["n_steps"]), f"{r['posterior']['min']:.3f} / {r['posterior']['median']:.3f} / "
              f"{r['posterior']['max']:.3f}", "{:.3f} / {:.3f} / {:.3f}".format(*PAPER_SS8[r["framework"]][:3]),
              f"{r['bootstrap']['min']:.3f} / {r['bootstrap']['median']:.3f} / {r['bootstrap']['max']:.3f}",
              "{:.3f} / {:.3f} / {:.3f}".format(*PAPER_SS8[r["framework"]][3:])] for r in rows_out]
    print(markdown_table(["framework", "steps", "posterior min/med/max", "paper", "bootstrap min/med/max", "paper"],
                         table))
    med = [r["posterior"]["median"] for r in rows_out]
    return {"generator": "SS8 generator of Tran-Truong & Le (2026) reconstructed; state = emitted feature "
                         "(the paper's Ward on noisy one-hot recovers exactly these 6 states)",
            "bootstrap_resamples": resamples, "frameworks": rows_out,
            "posterior_median_width_range": [min(med), max(med)],
            "posterior_median_width_median": float(np.median(med)),
            "bootstrap_median_width_range": [min(r["bootstrap"]["median"] for r in rows_out),
                                             max(r["bootstrap"]["median"] for r in rows_out)],
            "paper_posterior_median_range": [0.108, 0.116], "paper_bootstrap_median_range": [0.084, 0.103]}


# --------------------------------------------------------------------------------------------------------- SS13
def _one_hot(traces: tt.TraceTable) -> tt.TraceTable:
    a = traces.to_arrow()
    a = a.append_column("tool_name", a.column("state")).append_column("step_kind", pa.array(["tool"] * a.num_rows))
    return tt.TraceTable.from_dataframe(a.drop_columns(["state"]))


def _paths(traces: tt.TraceTable, est: Any, resamples: int, aligns: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    fast = TraceBootstrap(samples=resamples, states=est, seed=1).fit(traces).fetch_model()
    out["fast"] = _describe(fast, time.perf_counter() - t0)
    for align in aligns:
        t0 = time.perf_counter()
        full = TraceBootstrap(samples=resamples, states=est, path="full", align=align,  # type: ignore[arg-type]
                              seed=1).fit(traces).fetch_model()
        d = _describe(full, time.perf_counter() - t0)
        d["n_states_found"] = full.info.get("n_states_found")
        d["replicates_missing_states"] = full.info.get("replicates_missing_states")
        d["ratio_median_halfwidth_Q"] = d["median_halfwidth_Q"] / out["fast"]["median_halfwidth_Q"]
        d["ratio_width_r_inf"] = d["width_r_inf"] / out["fast"]["width_r_inf"]
        d["ratio_width_mean_steps"] = d["width_mean_steps"] / out["fast"]["width_mean_steps"]
        out[f"full ({align})"] = d
    out["reference_states"] = list(fast.state_names)
    return out


def _describe(ens: ChainEnsemble, seconds: float) -> dict[str, Any]:
    w = ens.entry_intervals().widths()["Q"]
    r, ms = ens.stats("r_inf"), ens.stats("mean_steps")
    return {"median_halfwidth_Q": float(np.median(w)) / 2, "width_r_inf": r.width, "r_inf": r.to_dict(),
            "width_mean_steps": ms.width, "seconds": seconds, "n_resamples": ens.n_samples}


def run_ss13(resamples: int, swe_sizes: list[int], seeds: int) -> dict[str, Any]:
    est_onehot = WardStates(featurizer=RuleFeaturizer(kind=False, error=False), k_min=2, k_max=6)
    synthetic = []
    for s in range(seeds):
        traces = _one_hot(tt.datasets.simulate_traces(ss13_chain(), 250, seed=s))
        synthetic.append(_paths(traces, est_onehot, resamples, ("centroids", "exit-profile")))
        print(f"# ss13 synthetic seed {s} done", file=sys.stderr, flush=True)
    out: dict[str, Any] = {"paper": PAPER_SS13, "resamples": resamples,
                           "synthetic": {"n_traces": 250, "features": "one-hot of the true state", "corpora": synthetic,
                                         "mean_ratio_centroids": float(np.mean(
                                             [c["full (centroids)"]["ratio_median_halfwidth_Q"] for c in synthetic])),
                                         "mean_ratio_exit_profile": float(np.mean(
                                             [c["full (exit-profile)"]["ratio_median_halfwidth_Q"] for c in
                                              synthetic])),
                                         "mean_fast_halfwidth": float(np.mean(
                                             [c["fast"]["median_halfwidth_Q"] for c in synthetic]))}}
    if SWE_CORPUS.exists():
        traces = tt.read_traces(SWE_CORPUS)
        configs = {"shell + depth fraction (as specified)": RuleFeaturizer(vocabulary="shell",
                                                                           depth="hindsight-fraction"),
                   "shell + depth fraction x2 (clustering-sensitive)": RuleFeaturizer(
                       vocabulary="shell", depth="hindsight-fraction", depth_weight=2.0)}
        swe = {}
        for n_swe in swe_sizes:
            sub = traces.select_traces(np.sort(np.random.default_rng(0).choice(traces.n_traces, n_swe,
                                                                               replace=False)))
            for name, feat in configs.items():
                res = _paths(sub, WardStates(featurizer=feat), resamples, ("centroids",))
                res.update({"n_traces": sub.n_traces, "n_steps": sub.n_steps})
                swe[f"{n_swe} traces, {name}"] = res
                print(f"# ss13 swe {n_swe} traces, {name} done", file=sys.stderr, flush=True)
        out["swebench"] = {"subsample_seed": 0, "sizes": swe_sizes, "configs": swe}
    rows = []
    for i, c in enumerate(synthetic):
        rows.append([f"synthetic seed {i}", f"{c['fast']['median_halfwidth_Q']:.4f}",
                     f"{c['full (centroids)']['median_halfwidth_Q']:.4f}",
                     f"{c['full (centroids)']['ratio_median_halfwidth_Q']:.2f}",
                     f"{c['full (exit-profile)']['ratio_median_halfwidth_Q']:.2f}", "4.65"])
    for name, c in out.get("swebench", {}).get("configs", {}).items():
        rows.append([f"SWE-bench {name}", f"{c['fast']['median_halfwidth_Q']:.4f}",
                     f"{c['full (centroids)']['median_halfwidth_Q']:.4f}",
                     f"{c['full (centroids)']['ratio_median_halfwidth_Q']:.2f}", "", "4.65"])
    print(markdown_table(["corpus", "fast half-width", "full half-width", "ratio (Hungarian)",
                          "ratio (greedy R⊕)", "paper"], rows))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sections", default="coverage,ss8,ss13")
    ap.add_argument("--reps", type=int, default=500, help="replicates per coverage cell (>= 200)")
    ap.add_argument("--sizes", default="50,200,1000")
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--resamples", type=int, default=200)
    ap.add_argument("--ss13-resamples", type=int, default=80)
    ap.add_argument("--ss13-seeds", type=int, default=5)
    ap.add_argument("--swe-traces", default="100,160", help="SWE-bench sub-sample sizes (160 = SS10's)")
    ap.add_argument("--quick", action="store_true", help="tiny sizes (smoke run)")
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.reps, args.sizes, args.ss13_resamples, args.ss13_seeds, args.swe_traces = 20, "50,200", 10, 1, "60"
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    path = RESULTS_DIR / "coverage.json"
    payload: dict[str, Any] = json.loads(path.read_text()) if path.exists() and not args.quick else {}
    t0 = time.perf_counter()
    if "coverage" in sections:
        payload["coverage"] = run_coverage(args.reps, [int(s) for s in args.sizes.split(",")], args.draws,
                                           args.resamples)
    if "ss8" in sections:
        payload["ss8"] = run_ss8(args.resamples)
    if "ss13" in sections:
        payload["ss13"] = run_ss13(args.ss13_resamples, [int(x) for x in args.swe_traces.split(",")],
                                   args.ss13_seeds)
    payload.update({"study": "coverage_study", "description": __doc__.split("Usage::")[0].strip(),
                    "machine": machine_info(), "last_run_sections": sections,
                    "last_run_seconds": time.perf_counter() - t0})
    if not args.no_save:
        print(f"\nwrote {write_results('coverage', payload)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
