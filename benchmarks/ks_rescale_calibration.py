"""Calibration of the rescaled KS bootstrap: is the held-out timing test still a 5% test when its replicates are
simulated at a fraction of the data's size and rescaled?

``ks_calibrated(max_simulated_traces=M)`` simulates, above M traces, every replicate at the fraction r = M / n of
the corpora's sizes and multiplies its statistic by √(n_test,sim / n_test) (the law of √n·D does not depend on n
in the limit). That is what makes the audit of millions of traces affordable (``audit_partitioned``). Here the
held-out protocol of ``audit_calibration.py``'s ``ss7-holdout`` study (the SS7 ground truth, split 50/50, chain
on the fit half, calibrated KS of the test half with ``refit="train"``) runs on larger corpora twice on the same
corpora and seeds: with the full-size bootstrap and with replicates simulated at 1/8 or 1/40 of the size.

Usage::

    python benchmarks/ks_rescale_calibration.py              # 200 corpora of 4,000 traces (~6 min on 2 cores)
    python benchmarks/ks_rescale_calibration.py --corpora 40
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
from audit_calibration import LEVEL, run_corpus, wilson

from tracetochain._parallel import parallel_map


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpora", type=int, default=200)
    ap.add_argument("--traces", type=int, default=4000, help="traces per corpus (split 50/50)")
    ap.add_argument("--bootstrap", type=int, default=199)
    ap.add_argument("--seed", type=int, default=20261130)
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args(argv)
    half = args.traces // 2
    variants = [("full size", None), (f"1/8 ({half // 8} traces)", half // 8),
                (f"1/40 ({half // 40} traces)", half // 40)]
    spec = dict(chain="ss7", n_traces=args.traces, memory=0.0, holdout=True, max_steps=200, ks_only=True,
                B=args.bootstrap, entropy=[args.seed, 0])
    results: dict[str, Any] = {}
    t_all = time.perf_counter()
    for name, cap in variants:
        t0 = time.perf_counter()
        # The same corpora and seeds for every variant (same entropy and index): only the replicate size differs.
        jobs = [dict(spec, index=i, max_simulated=cap) for i in range(args.corpora)]
        rows = parallel_map(run_corpus, jobs, n_jobs=args.workers)
        p = np.array([r["p_ks"] for r in rows], dtype=float)
        k5, k10 = int(np.sum(p <= LEVEL)), int(np.sum(p <= 0.10))
        results[name] = {
            "max_simulated_traces": cap, "scale": rows[0]["scale"], "n_corpora": len(rows),
            "reject@0.05": {"count": k5, "rate": k5 / len(rows), "wilson95": list(wilson(k5, len(rows)))},
            "reject@0.10": {"count": k10, "rate": k10 / len(rows), "wilson95": list(wilson(k10, len(rows)))},
            "p_value_deciles": np.quantile(p, np.linspace(0.1, 0.9, 9)).round(3).tolist(),
            "median_ks_seconds": float(np.median([r["ks_s"] for r in rows])),
            "wall_s": time.perf_counter() - t0, "p_values": p.tolist(),
        }
        print(f"# {name}: {results[name]['reject@0.05']['rate']:.3f} rejected at 5% "
              f"({results[name]['wall_s']:.0f} s)", file=sys.stderr, flush=True)
    full = np.array(results[variants[0][0]]["p_values"])
    rows_md = []
    for name, res in results.items():
        r5, r10 = res["reject@0.05"], res["reject@0.10"]
        agree = float(np.mean((np.array(res["p_values"]) <= LEVEL) == (full <= LEVEL)))
        res["decision_agreement_with_full"] = agree
        rows_md.append([name, f"{res['scale']:.3f}", str(res["n_corpora"]),
                        f"{r5['rate']:.3f} [{r5['wilson95'][0]:.3f}, {r5['wilson95'][1]:.3f}]",
                        f"{r10['rate']:.3f} [{r10['wilson95'][0]:.3f}, {r10['wilson95'][1]:.3f}]",
                        f"{agree:.3f}", f"{res['median_ks_seconds']:.2f}"])
    print(f"\nHeld-out calibrated KS, SS7 truth, {args.traces} traces per corpus (split 50/50), B = {args.bootstrap}\n")
    print(markdown_table(["replicates simulated at", "D* scale", "corpora", "rejected at 5%", "rejected at 10%",
                          "same 5% decision as full", "median KS s"], rows_md))
    checks = {name: 0.02 <= res["reject@0.05"]["rate"] <= 0.09 for name, res in results.items()}
    print("\n" + "\n".join(f"size in [0.02, 0.09], {k}: {'met' if v else 'MISSED'}" for k, v in checks.items()))
    if not args.no_save:
        path = write_results("ks_rescale_calibration", {
            "benchmark": "ks_rescale_calibration", "description": __doc__.split("\n\n")[1],
            "traces": args.traces, "bootstrap": args.bootstrap, "seed": args.seed, "level": LEVEL,
            "checks": checks, "total_wall_s": time.perf_counter() - t_all, "machine": machine_info(),
            "results": results})
        print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
