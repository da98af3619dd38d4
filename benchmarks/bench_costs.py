"""Benchmark: the cost figures of a fitted chain (``tracetochain.costs``).

Timed, each as the median of ``--repeats`` runs, on random chains of 10, 50 and 200 states (gamma per-visit costs)
and, when ``../shared/data`` is present, on the mini-swe-agent SWE-bench runs (6 action-category states):

* ``summary``: :func:`summarize_costs` (one LU solve with three right-hand sides, second moments included);
* ``R(B)``: :func:`cost_budget_curve` with the default lattice (both roundings, so the error bracket);
* ``intervals``: :func:`cost_intervals` over 1,000 posterior draws paired with cost-mean draws (batched solves);
* ``report``: :func:`cost_report` end to end (posterior intervals, R(B) band, step cap, observed figures).

The machine is shared while these run: the numbers are noisy; the script records the date and machine.

Usage::

    python benchmarks/bench_costs.py
    python benchmarks/bench_costs.py --repeats 3 --no-save
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_info, markdown_table, median, write_results

import tracetochain as tt
from tracetochain.costs import CostModel, cost_budget_curve, cost_report, summarize_costs
from tracetochain.costs._intervals import cost_intervals, posterior_mean_draws
from tracetochain.uncertainty import DirichletPosterior

MINI = Path(__file__).resolve().parents[1].parent / "shared" / "data" / \
    "swebench-verified-mini-swe-agent-gemini-3-pro" / "swebench_results" / "20251118_gemini-3-pro-74pct"


def timed(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return median(times)


def synthetic_fit(m: int, seed: int) -> Any:
    chain = tt.datasets.random_chain(m, seed)
    rng = np.random.default_rng(seed)
    mean = rng.uniform(0.001, 0.05, m)
    traces = tt.datasets.simulate_traces(chain, 2000, seed=seed, costs={"cost_usd": (mean, (0.5 * mean) ** 2)})
    return tt.fit_chain(traces)


def measure(name: str, fit: Any, repeats: int) -> dict[str, Any]:
    chain = fit.chain
    costs = CostModel.of_chain(chain)
    assert costs is not None
    metric = costs.available[0]
    summary = summarize_costs(chain, costs, metric)
    ens = DirichletPosterior(samples=1000, seed=0).fit(chain).fetch_model().ensemble
    pv = costs.per_visit(metric, chain.state_names)
    draws = posterior_mean_draws(pv, ens.n_samples, 0)
    curve = cost_budget_curve(chain, costs, metric)
    row = {
        "name": name, "states": chain.n_states, "metric": metric,
        "summary_s": timed(lambda: summarize_costs(chain, costs, metric), repeats),
        "budget_s": timed(lambda: cost_budget_curve(chain, costs, metric), repeats),
        "budget_levels": curve.n_levels, "budget_error_bound": curve.error_bound,
        "intervals_s": timed(lambda: cost_intervals(ens, summary, draws, pv.variance), repeats),
        "report_s": timed(lambda: cost_report(fit, intervals="posterior", samples=1000, metrics=[metric]), 1),
    }
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sizes", default="10,50,200")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    rows = [measure(f"random {m}", synthetic_fit(m, m), args.repeats)
            for m in (int(x) for x in args.sizes.split(","))]
    if MINI.exists():
        fit = tt.fit_chain(tt.read_traces(MINI), states="categorical", vocabulary="shell")
        rows.append(measure("mini-swe-agent", fit, args.repeats))
    print(markdown_table(
        ["chain", "states", "summary", "R(B) (levels, error)", "intervals (1,000 draws)", "cost_report"],
        [[r["name"], str(r["states"]), f"{1e3 * r['summary_s']:.1f} ms",
          f"{r['budget_s']:.2f} s ({r['budget_levels']}, {r['budget_error_bound']:.1g})",
          f"{1e3 * r['intervals_s']:.0f} ms", f"{r['report_s']:.2f} s"] for r in rows]))
    if not args.no_save:
        path = write_results("bench_costs", {"machine": machine_info(), "rows": rows,
                                             "note": "shared machine (several agents at work): timings are noisy"})
        print(f"saved {path}")


if __name__ == "__main__":
    main()
