"""Benchmark: the R(B) budget programme (``numerics.budget_reliability``), blocked against level by level.

On the 250 shared mini-swe-agent SWE-bench trajectories (``../shared/data/swebench-verified-mini-swe-agent-gemini-3-
pro``, the chain ``tracetochain fit`` builds from them: 43 states, about 7,800 lattice levels), for the primary
metrics and both roundings of the error bracket: CPU time (``time.process_time``, which load on a shared machine
barely moves) of the library's blocked programme and of the original level-by-level one (one einsum over all
earlier levels per level; kept here as the reference), interleaved run by run, and the largest absolute
difference between their curves (the same sums regrouped: a few units in the last place). Skipped when the corpus
is absent. Writes ``results/bench_budget.json``.

Usage::

    python benchmarks/bench_budget.py
    python benchmarks/bench_budget.py --repeats 1 --no-save
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.linalg

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_info, markdown_table, median, write_results

import tracetochain as tt
from tracetochain import numerics as nx
from tracetochain.costs import CostModel
from tracetochain.costs._analysis import default_levels, per_visit_for

SWE = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "swebench-verified-mini-swe-agent-gemini-3-pro"


def by_levels(Q: Any, r_success: Any, pi0: Any, p: Any, K: int) -> Any:
    """The programme as first written: Σ_{a≥1} p(a) ∘ v_{k−a} by one einsum over every earlier level, per level."""
    m, L, p0 = Q.shape[0], p.shape[1], p[:, 0]
    zero_cost = bool((p0 > 0).any())
    lu = scipy.linalg.lu_factor(np.eye(m) - p0[:, None] * Q) if zero_cost else None
    Vt, out = np.zeros((m, K + 1)), np.zeros(K + 1)
    for k in range(K + 1):
        hi, j = min(k, L - 1), K - k + 1
        rest = np.einsum("ia,ia->i", p[:, 1: hi + 1], Vt[:, j: j + hi]) if hi >= 1 else np.zeros(m)
        u = scipy.linalg.lu_solve(lu, p0 * r_success + rest, check_finite=False) if zero_cost else rest
        Vt[:, K - k] = r_success + Q @ u
        out[k] = float(pi0 @ u)
    return np.clip(out, 0.0, None)


def cpu(fn: Any) -> tuple[float, Any]:
    t0 = time.process_time()
    out = fn()
    return time.process_time() - t0, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    if not SWE.exists():
        print(f"skipped: {SWE} is absent")
        return
    chain = tt.fit_chain(tt.read_traces(SWE)).chain
    costs = CostModel.of_chain(chain)
    K = default_levels(chain)
    rows = []
    for metric in ("cost_usd", "tokens"):
        if costs is None or metric not in costs.metrics:
            continue
        pv = per_visit_for(chain, costs, metric)
        mom = chain.accumulated_cost(pv.mean, pv.variance)
        ms = mom.mean_success / chain.r_inf
        step = (ms + 6.0 * math.sqrt(max(0.0, mom.second_success / chain.r_inf - ms * ms))) / K
        for rounding in ("up", "down"):
            p = nx.lattice_pmf(pv.mean, pv.variance, step, K, rounding)
            t_new, t_old = [], []
            for _ in range(args.repeats):
                t, new = cpu(lambda: nx.budget_reliability(chain.Q, chain.R_success, chain.pi0, p, K))  # noqa: B023
                t_new.append(t)
                t, old = cpu(lambda: by_levels(chain.Q, chain.R_success, chain.pi0, p, K))  # noqa: B023
                t_old.append(t)
            rows.append({"metric": metric, "rounding": rounding, "states": chain.n_states, "levels": K,
                         "support": int(p.shape[1]), "level_by_level_cpu_s": median(t_old),
                         "blocked_cpu_s": median(t_new), "ratio": median(t_old) / median(t_new),
                         "max_abs_difference": float(np.max(np.abs(new - old)))})
    print(markdown_table(["metric", "rounding", "levels", "support", "level by level", "blocked", "ratio", "max |Δ|"],
                         [[r["metric"], r["rounding"], str(r["levels"]), str(r["support"]),
                           f"{r['level_by_level_cpu_s']:.2f} s", f"{r['blocked_cpu_s']:.2f} s",
                           f"{r['ratio']:.1f}×", f"{r['max_abs_difference']:.1e}"] for r in rows]))
    if not args.no_save:
        path = write_results("bench_budget", {"machine": machine_info(), "rows": rows,
                                              "note": "CPU time; run on a quiet machine for the published figures"})
        print(f"saved {path}")


if __name__ == "__main__":
    main()
