"""The SWE-bench artifact corpus end to end on the authors' protocols, timed so the ratio to their code can be stated.

Protocols (``paper-spec.md`` §6.10, §6.14): (a) the 160-trace sub-sample (``sort(default_rng(20260606).choice(479,
160))`` then ``default_rng(20260606).permutation(160)``), 80 fit / 80 test; (b) all 479 traces, 239 fit / 240 test
(``default_rng(20260606).permutation(479)``). Both: read the file, states = Ward on shell-vocabulary categories +
depth j/(L−1) with k ∈ [2, 10] fitted on the fit half (exact, every step), chain (α = 1, modal s0), artifact-mode
Δ_AIC, the paper's KS against 20,000 simulated absorption times, L∞ to the held-out RDC over d ∈ [0, 80].
The authors' code needs ≈ 14 s for (a) and ≈ 105 s and 1.9 GB for (b) on a 2-core machine (issue: scale-out).
Each case runs in a fresh subprocess; medians of ``--repeats``.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_info, markdown_table, median, write_results

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "tracetochain-artifact" / "swebench_real" / \
    "corpus.json"
AUTHORS = {"sub-sample 160 (80/80)": (14.0, None), "all 479 (239/240)": (105.0, 1900.0)}


def run_case(case: str) -> dict[str, float]:
    import numpy as np

    import tracetochain as tt
    from tracetochain.audit import empirical_rdc, ks_paper, l_inf_distance, order_test

    t0 = time.perf_counter()
    traces = tt.read_traces(CORPUS)
    if case.startswith("sub"):
        sub = np.sort(np.random.default_rng(20260606).choice(479, 160, replace=False))
        order = sub[np.random.default_rng(20260606).permutation(160)]
        fit_rows, test_rows = order[:80], order[80:]
    else:
        order = np.random.default_rng(20260606).permutation(479)
        fit_rows, test_rows = order[:239], order[239:]
    fit, test = traces.select_traces(fit_rows), traces.select_traces(test_rows)
    result = tt.fit_chain(fit, states="ward", vocabulary="shell", features="kind,tool,depth", k_min=2, k_max=10,
                          initial="modal")
    test_labelled = result.states.label(test)
    chain = result.chain
    aic = order_test(result.labelled, mode="artifact")
    ks = ks_paper(chain, test_labelled, n_model=20_000, outcome="any", start="modal", pvalue="asymptotic", seed=1)
    l_inf = l_inf_distance(chain.reliability(80), np.asarray(empirical_rdc(test_labelled, 80)))
    t1 = time.perf_counter()
    return {"seconds": t1 - t0, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "m": chain.n_states, "delta_aic": float(aic.delta_aic), "ks_D": float(ks.statistic),
            "l_inf": float(l_inf), "fit_steps": fit.n_steps}


CASES = {"sub-sample 160 (80/80)": "sub", "all 479 (239/240)": "all"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-save", action="store_true")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(run_case(args.child)))
        return 0
    if not CORPUS.exists():
        print(f"{CORPUS} not found: nothing to measure")
        return 0
    rows, results = [], {}
    for name, key in CASES.items():
        runs = []
        for _ in range(args.repeats):
            proc = subprocess.run([sys.executable, __file__, "--child", key], capture_output=True, text=True,
                                  check=True)
            runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        secs, peak = median([r["seconds"] for r in runs]), median([r["peak_mb"] for r in runs])
        theirs_s, theirs_mb = AUTHORS[name]
        results[name] = {"runs": runs, "median_s": secs, "median_peak_mb": peak, "authors_s": theirs_s,
                         "authors_mb": theirs_mb, "speedup": theirs_s / secs}
        r0 = runs[0]
        rows.append([name, f"{secs:.2f}", f"{peak:.0f}", f"{theirs_s:.0f}", f"{theirs_s / secs:.0f}×",
                     f"m={r0['m']}, ΔAIC={r0['delta_aic']:.1f}, D={r0['ks_D']:.3f}, L∞={r0['l_inf']:.3f}"])
    print(markdown_table(["protocol", "ours s", "ours peak MB", "authors s", "ratio", "result"], rows))
    if not args.no_save:
        print(f"wrote {write_results('bench_protocols', {'machine': machine_info(), 'cases': results})}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
