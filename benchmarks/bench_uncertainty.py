"""Benchmark: uncertainty layer — trace bootstrap (fast path) and Dirichlet posterior with an R(d) band.

Targets (issue 5), on 2 cores:

* B = 1000 bootstrap replicates on 10,000 traces, fast path: **< 5 s**
  (``TraceBootstrap(samples=1000).fit(traces)``: labels, per-trace sparse count matrix, 1000 weight vectors
  from spawned seeds, W @ P, vectorised Laplace estimate, ensemble construction);
* 2,000 posterior draws with the R(d) band to d = 200 on a 50-state chain: **< 2 s**
  (``DirichletPosterior(samples=2000).fit(chain).fetch_model().ensemble.stats("reliability", horizon=200)``:
  Beta marginals, gamma-normalised draws, the batched forward sweep; R(d) needs no solve).

Also timed: R∞ and the R(50) band over the 1000 bootstrap chains (on a freshly built ensemble, nothing cached),
the Poisson-weight bootstrap, and ``interval_summary`` (every reported number, 2000 posterior draws, 20 states).
The bootstrap corpus is simulated from the 20-state chain of ``bench_fit.py`` (mean length 30 steps, censored after
250). Medians over ``--repeats`` in-process runs after one warm-up. The machine is shared: the JSON records the load
average after the run.

Usage::

    python benchmarks/bench_uncertainty.py                 # 5 repeats
    python benchmarks/bench_uncertainty.py --repeats 3 --no-save
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_info, markdown_table, median, write_results
from bench_fit import make_chain

import tracetochain as tt
from tracetochain.uncertainty import ChainEnsemble, DirichletPosterior, TraceBootstrap, interval_summary


def timed(fn: Callable[[], Any], repeats: int) -> tuple[float, list[float], Any]:
    out = fn()  # warm-up (imports, caches)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return median(times), times, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--traces", type=int, default=10_000)
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--draws", type=int, default=2000)
    ap.add_argument("--states", type=int, default=50)
    ap.add_argument("--horizon", type=int, default=200)
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args(argv)
    rows: list[dict[str, Any]] = []

    # ------------------------------------------------------------------ bootstrap, fast path
    Q, rs, rf, pi0 = make_chain(args.seed)
    chain20 = tt.AbsorbingChain(Q, rs, rf, pi0, [f"state_{i:02d}" for i in range(Q.shape[0])])
    traces = tt.datasets.simulate_traces(chain20, args.traces, seed=args.seed, max_steps=250)
    print(f"# bootstrap corpus: {traces.n_traces:,} traces, {traces.n_steps:,} steps, {chain20.n_states} states",
          file=sys.stderr, flush=True)
    t_boot, runs, boot = timed(lambda: TraceBootstrap(samples=args.resamples, seed=1).fit(traces).fetch_model(),
                               args.repeats)
    rows.append({"what": f"bootstrap fast, B={args.resamples}, {args.traces:,} traces", "median_s": t_boot,
                 "runs_s": runs, "target_s": 5.0})
    def fresh_stats() -> Any:  # a new ensemble each time, so no solve or sweep is cached
        e = ChainEnsemble(boot.reference, {"Q": boot.Q, "R_success": boot.R_success, "R_failure": boot.R_failure,
                                           "pi0": boot.pi0}, method=boot.method)
        return e.stats("r_inf"), e.stats("reliability", horizon=50)

    t_stats, runs, s = timed(fresh_stats, args.repeats)
    rows.append({"what": f"  stats r_inf + R(50) band over {boot.n_samples} chains", "median_s": t_stats,
                 "runs_s": runs, "target_s": None})
    rows.append({"what": "  bootstrap fit + those stats", "median_s": t_boot + t_stats, "runs_s": [],
                 "target_s": None})
    boot_r = s[0]
    t_pois, runs, _ = timed(lambda: TraceBootstrap(samples=args.resamples, weights="poisson", seed=1).fit(
        traces).fetch_model(), args.repeats)
    rows.append({"what": f"bootstrap fast, Poisson weights, B={args.resamples}", "median_s": t_pois,
                 "runs_s": runs, "target_s": None})

    # ------------------------------------------------------------------ posterior, 50 states
    big = tt.datasets.random_chain(args.states, seed=3, rho=0.9)
    big_traces = tt.datasets.simulate_traces(big, 5000, seed=4)
    fitted = tt.ChainEstimator(states=big.state_names).fit(big_traces).fetch_model()

    def posterior_band() -> Any:
        ens = DirichletPosterior(samples=args.draws, seed=0).fit(fitted).fetch_model().ensemble
        return ens.stats("reliability", horizon=args.horizon)

    t_post, runs, band = timed(posterior_band, args.repeats)
    rows.append({"what": f"posterior {args.draws} draws + R(d) band d<={args.horizon}, {args.states} states",
                 "median_s": t_post, "runs_s": runs, "target_s": 2.0})

    chain20_fit = tt.ChainEstimator().fit(traces).fetch_model()
    t_sum, runs, doc = timed(lambda: interval_summary(chain20_fit, samples=args.draws, seed=0, horizon=50),
                             max(1, args.repeats // 2))
    rows.append({"what": f"interval_summary posterior, {args.draws} draws, 20 states", "median_s": t_sum,
                 "runs_s": runs, "target_s": None})

    header = ["what", "median s", "target"]
    table = [[r["what"], f"{r['median_s']:.3f}", "" if r["target_s"] is None else
              f"< {r['target_s']:g} s: {'met' if r['median_s'] < r['target_s'] else 'MISSED'}"] for r in rows]
    print(markdown_table(header, table))
    print(f"\nbootstrap R∞ {boot_r}; posterior R({args.horizon}) {band.element(args.horizon)}")
    if not args.no_save:
        path = write_results("bench_uncertainty", {
            "benchmark": "bench_uncertainty",
            "description": __doc__.split("Usage::")[0].strip(),
            "repeats": args.repeats,
            "seed": args.seed,
            "corpus": {"n_traces": traces.n_traces, "n_steps": traces.n_steps, "n_states": chain20.n_states},
            "posterior_chain": {"n_states": args.states, "n_traces": big_traces.n_traces},
            "results": rows,
            "bootstrap_r_inf": boot_r.to_dict(),
            "posterior_reliability_at_horizon": band.element(args.horizon).to_dict(),
            "interval_summary_r_inf": doc["metrics"]["r_inf"],
            "machine": machine_info(),
            "load_average_1_5_15min_after": list(os.getloadavg()),
        })
        print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
