"""Calibration study of the audit layers (issue 4): size under an order-1 truth, power against memory.

Studies (each corpus is simulated from a known chain, then fitted and audited exactly as ``tracetochain.audit``
does; ``SeedSequence(seed).spawn`` gives every corpus its own stream):

* ``ss7-insample`` — the SS7 ground truth (study SS7 of Tran-Truong & Le 2026, m = 5, s0 = 0), 300 traces per corpus,
  chain fitted on the corpus (α = 1); calibrated KS (parametric bootstrap with refit, B), the within-context permutation
  G² test (B), the χ² reference, ΔAIC/ΔBIC > 0 rates, the paper's two KS modes, and the composite acceptance.
* ``random8-insample`` — a random 8-state chain (``datasets.random_chain(8, 11, rho=0.85)``), 200 traces: longer
  traces, a finer lattice, sparser order-2 tables.
* ``ss7-holdout`` — the held-out protocol: 600 traces split 50/50, chain on the fit half, calibrated KS on the test
  half (``refit="train"``), order test on the fit half.
* ``ss7-memory0.6`` — power: SS7(B)'s second-order generator with memory strength 0.6 (300 traces).

Rates are reported with 95% Wilson intervals. Targets (issue 4): KS and permutation-test rejection at 5% within
[2%, 9%] over ≥ 200 null corpora; power against memory 0.6 ≥ 95%.

Usage::

    python benchmarks/audit_calibration.py                 # full study (~10 min on 2 cores)
    python benchmarks/audit_calibration.py --quick         # 40 corpora per study, for a smoke run
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine_info, markdown_table, write_results

from tracetochain._parallel import parallel_map

LEVEL = 0.05
DEFAULT_MAX_SIMULATED_TRACES = 10_000  # tracetochain.audit's default (recorded here so jobs stay picklable)


def _chain(name: str) -> Any:
    import tracetochain as tt
    from tracetochain.datasets import ss7_chain

    if name == "ss7":
        return ss7_chain()
    if name == "random8":
        return tt.datasets.random_chain(8, 11, rho=0.85)
    raise ValueError(name)


def run_corpus(job: dict[str, Any]) -> dict[str, Any]:
    """Simulate one corpus and run every layer on it; returns p-values and statistics."""
    import tracetochain as tt
    from tracetochain.audit import ks_calibrated, ks_paper, order_test
    from tracetochain.audit._holdout import split_indices
    from tracetochain.datasets import simulate_memory_traces

    seed = np.random.SeedSequence(job["entropy"], spawn_key=(job["index"],))
    sim_seed, ks_seed, order_seed, paper_seed = seed.spawn(4)
    chain = _chain(job["chain"])
    traces = simulate_memory_traces(chain, job["n_traces"], memory=job["memory"], seed=sim_seed,
                                    max_steps=job["max_steps"])
    fit_set, test_set = traces, traces
    refit = "same"
    if job["holdout"]:
        fit_idx, test_idx = split_indices(traces, 0.5, seed=int(sim_seed.generate_state(1)[0]))
        fit_set, test_set = traces.select_traces(fit_idx), traces.select_traces(test_idx)
        refit = "train"
    model = tt.ChainEstimator(pseudocount=1.0, states=chain.state_names).fit(fit_set).fetch_model()
    t0 = time.perf_counter()
    ks = ks_calibrated(model, test_set, refit=refit, fit_traces=fit_set if refit == "train" else None,
                       n_bootstrap=job["B"],
                       seed=ks_seed, max_steps=job["max_steps"],
                       max_simulated_traces=job.get("max_simulated", DEFAULT_MAX_SIMULATED_TRACES))
    if job.get("ks_only"):
        return {"p_ks": ks.p_value, "D": ks.statistic, "ks_s": time.perf_counter() - t0,
                "scale": ks.settings["simulated_traces"]["d_star_scale"], "n_steps": traces.n_steps}
    t1 = time.perf_counter()
    order = order_test(fit_set, model, n_permutations=job["B"], seed=order_seed)
    t2 = time.perf_counter()
    paper_s = ks_paper(model, test_set, n_model=5000, seed=paper_seed)
    paper_a = ks_paper(model, test_set, n_model=5000, outcome="any", start="modal", pvalue="asymptotic",
                       seed=paper_seed)
    return {
        "p_ks": ks.p_value, "D": ks.statistic, "p_perm": order.p_permutation, "p_chi2": order.p_chi2,
        "delta_aic": order.delta_aic, "delta_bic": order.delta_bic, "g2": order.g2, "df": order.df,
        "p_paper_success": paper_s.p_value, "p_paper_any_asymptotic": paper_a.p_value,
        "n_steps": traces.n_steps, "ks_s": t1 - t0, "order_s": t2 - t1,
    }


def wilson(k: int, n: int) -> tuple[float, float]:
    from tracetochain.audit._holdout import wilson_interval

    return wilson_interval(k, n) if n else (float("nan"), float("nan"))


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)

    def rate(pred: Any) -> dict[str, Any]:
        k = sum(1 for r in rows if pred(r))
        lo, hi = wilson(k, n)
        return {"count": k, "rate": k / n, "wilson95": [lo, hi]}

    def p_le(key: str, level: float = LEVEL) -> Any:
        return lambda r: r[key] is not None and r[key] <= level

    out = {
        "n_corpora": n,
        "ks_calibrated@0.05": rate(p_le("p_ks")),
        "ks_calibrated@0.10": rate(p_le("p_ks", 0.10)),
        "order_permutation@0.05": rate(p_le("p_perm")),
        "order_permutation@0.10": rate(p_le("p_perm", 0.10)),
        "order_chi2@0.05": rate(p_le("p_chi2")),
        "delta_aic>0": rate(lambda r: r["delta_aic"] is not None and r["delta_aic"] > 0),
        "delta_bic>0": rate(lambda r: r["delta_bic"] is not None and r["delta_bic"] > 0),
        "ks_paper_success_scipy@0.05": rate(p_le("p_paper_success")),
        "ks_paper_any_asymptotic@0.05": rate(p_le("p_paper_any_asymptotic")),
        "composite_accept(ks & aic)": rate(lambda r: r["p_ks"] is not None and r["p_ks"] > LEVEL
                                           and r["delta_aic"] is not None and r["delta_aic"] <= 0),
        "composite_accept(ks & permutation)": rate(lambda r: r["p_ks"] is not None and r["p_ks"] > LEVEL
                                                   and r["p_perm"] is not None and r["p_perm"] > LEVEL),
        "mean_steps_per_corpus": float(np.mean([r["n_steps"] for r in rows])),
        "median_ks_seconds": float(np.median([r["ks_s"] for r in rows])),
        "median_order_seconds": float(np.median([r["order_s"] for r in rows])),
        "ks_p_value_deciles": np.quantile([r["p_ks"] for r in rows if r["p_ks"] is not None],
                                          np.linspace(0.1, 0.9, 9)).round(3).tolist(),
    }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpora", type=int, default=400, help="null corpora per in-sample study (>= 200)")
    ap.add_argument("--holdout-corpora", type=int, default=200)
    ap.add_argument("--power-corpora", type=int, default=200)
    ap.add_argument("--bootstrap", type=int, default=199, help="B for the KS bootstrap and the permutation test")
    ap.add_argument("--seed", type=int, default=20260424)
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--quick", action="store_true", help="40 corpora per study")
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.corpora = args.holdout_corpora = args.power_corpora = 40
    studies = [
        ("ss7-insample", dict(chain="ss7", n_traces=300, memory=0.0, holdout=False, max_steps=200), args.corpora),
        ("random8-insample", dict(chain="random8", n_traces=200, memory=0.0, holdout=False, max_steps=1000),
         args.corpora),
        ("ss7-holdout", dict(chain="ss7", n_traces=600, memory=0.0, holdout=True, max_steps=200),
         args.holdout_corpora),
        ("ss7-memory0.6", dict(chain="ss7", n_traces=300, memory=0.6, holdout=False, max_steps=200),
         args.power_corpora),
    ]
    results: dict[str, Any] = {}
    t_all = time.perf_counter()
    for k, (name, spec, n) in enumerate(studies):
        t0 = time.perf_counter()
        jobs = [dict(spec, B=args.bootstrap, entropy=[args.seed, k], index=i) for i in range(n)]
        rows = parallel_map(run_corpus, jobs, n_jobs=args.workers)
        results[name] = {"spec": spec, "summary": summarize(rows), "wall_s": time.perf_counter() - t0,
                         "p_values": {"ks": [r["p_ks"] for r in rows], "permutation": [r["p_perm"] for r in rows]}}
        s = results[name]["summary"]
        print(f"# {name}: {n} corpora in {results[name]['wall_s']:.0f} s — "
              f"KS {s['ks_calibrated@0.05']['rate']:.3f}, "
              f"permutation {s['order_permutation@0.05']['rate']:.3f}", file=sys.stderr, flush=True)

    header = ["study", "corpora", "KS calibrated", "order perm.", "order χ²", "ΔAIC>0", "ΔBIC>0", "KS paper (succ)",
              "KS paper (any, NR)", "accept (KS∧AIC)"]

    def cell(d: dict[str, Any]) -> str:
        return f"{d['rate']:.3f} [{d['wilson95'][0]:.3f}, {d['wilson95'][1]:.3f}]"

    rows_md = []
    for name, res in results.items():
        s = res["summary"]
        rows_md.append([name, str(s["n_corpora"]), cell(s["ks_calibrated@0.05"]), cell(s["order_permutation@0.05"]),
                        cell(s["order_chi2@0.05"]), cell(s["delta_aic>0"]), cell(s["delta_bic>0"]),
                        cell(s["ks_paper_success_scipy@0.05"]), cell(s["ks_paper_any_asymptotic@0.05"]),
                        cell(s["composite_accept(ks & aic)"])])
    print("Rejection rates at level 0.05 (ΔAIC/ΔBIC: share preferring order 2; last column: share accepted), "
          "95% Wilson intervals\n")
    print(markdown_table(header, rows_md))
    null = [results[n]["summary"] for n in ("ss7-insample", "random8-insample", "ss7-holdout")]
    power = results["ss7-memory0.6"]["summary"]
    checks = {
        "ks_size_in_[0.02,0.09]": all(0.02 <= s["ks_calibrated@0.05"]["rate"] <= 0.09 for s in null),
        "permutation_size_in_[0.02,0.09]": all(0.02 <= s["order_permutation@0.05"]["rate"] <= 0.09 for s in null),
        "power_memory0.6_>=0.95": power["order_permutation@0.05"]["rate"] >= 0.95,
    }
    print("\n" + "\n".join(f"{k}: {'met' if v else 'MISSED'}" for k, v in checks.items()))
    if not args.no_save:
        path = write_results("audit_calibration", {
            "benchmark": "audit_calibration",
            "description": __doc__.split("\n\n")[1] if __doc__ else "",
            "level": LEVEL, "bootstrap": args.bootstrap, "seed": args.seed, "targets": {
                "size": [0.02, 0.09], "power_memory0.6": 0.95, "min_null_corpora": 200},
            "checks": checks, "total_wall_s": time.perf_counter() - t_all,
            "machine": machine_info(), "results": results,
        })
        print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
