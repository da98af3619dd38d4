"""Benchmark: fitting every model family on 10,000 traces of about 30 steps.

Target (issue 15): any family fits 10,000 traces of 30 steps in under 30 s on 2 cores.

Data: a seeded random 8-state absorbing chain whose exit probabilities are scaled so that the mean trace length is
30 steps, simulated to 10,000 traces in 2,500 tasks of 4 trials (so the task-level families have tasks to tie).
Measured in-process, wall time and CPU time (``time.process_time``) of ``Model(...).fit(traces)`` plus
``to_chain()`` (the compiled chain), median of ``--repeats``. The fits are single-threaded numpy, so on a shared
machine the CPU time is what one free core would take; the wall time includes waiting for the core. The JSON
records the machine, the date, every run, and each fit's in-sample
log-likelihood per trace and R∞ beside the generating chain's (a correctness check: every family should find
R∞ ≈ the truth on first-order data).

Usage::

    python benchmarks/bench_model_families.py                 # 10,000 traces, 1 repeat
    python benchmarks/bench_model_families.py --traces 2000 --repeats 3 --no-save
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_info, markdown_table, median, write_results

import tracetochain as tt
from tracetochain.models import (
    DurationModel,
    HiddenMarkovModel,
    LiftedModel,
    MarkovModel,
    MixtureModel,
    TaskClassModel,
    TraceModel,
)

N_STATES = 8
MEAN_LENGTH = 30.0
TRIALS_PER_TASK = 4

FAMILIES: dict[str, Callable[[], TraceModel]] = {
    "markov": MarkovModel,
    "lifted(k=2)": lambda: LiftedModel(2),
    "lifted(k=3)": lambda: LiftedModel(3),
    "duration": DurationModel,
    "mixture(C=2)": lambda: MixtureModel(2),
    "mixture(C=3)": lambda: MixtureModel(3),
    "hmm(K=3)": lambda: HiddenMarkovModel(3),
    "hmm(K=5)": lambda: HiddenMarkovModel(5),
    "lifted(k=2)+tasks(C=2)": lambda: TaskClassModel(LiftedModel(2), 2),
}


def make_chain(seed: int) -> tt.AbsorbingChain:
    """Random sparse-ish rows, exit mass scaled by bisection so that the mean absorption time is MEAN_LENGTH."""
    rng = np.random.default_rng(seed)
    W = rng.dirichlet(np.full(N_STATES, 0.4), size=N_STATES)
    succ_share = rng.uniform(0.2, 0.8, N_STATES)
    weight = rng.uniform(0.3, 1.0, N_STATES)
    lo, hi = 1e-4, 1.0
    for _ in range(60):
        scale = (lo + hi) / 2
        e = np.minimum(weight * scale, 0.99)
        chain = tt.AbsorbingChain(W * (1 - e)[:, None], e * succ_share, e * (1 - succ_share), 0)
        if chain.mean_steps() > MEAN_LENGTH:
            lo = scale
        else:
            hi = scale
    return chain


def make_traces(n: int, seed: int) -> tuple[tt.TraceTable, tt.AbsorbingChain]:
    chain = make_chain(seed)
    table = tt.datasets.simulate_traces(chain, n, seed=seed + 1).to_arrow()
    tid = np.array([int(x[1:]) for x in table.column("trace_id").to_pylist()]) // TRIALS_PER_TASK
    table = table.append_column("task_id", pa.array([f"task{i}" for i in tid]))
    return tt.TraceTable.from_arrow(table, source=f"bench({n} traces)"), chain


def run(n: int, repeats: int, seed: int) -> dict[str, Any]:
    import os

    print(f"load average before: {os.getloadavg()}", flush=True)
    t0 = time.perf_counter()
    traces, chain = make_traces(n, seed)
    gen_s = time.perf_counter() - t0
    lengths = np.diff(traces.offsets)
    rows: dict[str, Any] = {}
    for name, make in FAMILIES.items():
        runs, cpu = [], []
        for _ in range(repeats):
            t1, c1 = time.perf_counter(), time.process_time()
            model = make().fit(traces)
            compiled = model.to_chain()
            runs.append(time.perf_counter() - t1)
            cpu.append(time.process_time() - c1)
        rows[name] = {"seconds": runs, "median_s": median(runs), "cpu_seconds": cpu, "median_cpu_s": median(cpu),
                      "r_inf": compiled.chain.r_inf,
                      "expanded_states": compiled.n_states, "n_parameters": model.n_parameters,
                      "loglik_per_trace": model.loglik(traces) / n}
        print(f"{name:>24}: {median(runs):6.2f} s wall, {median(cpu):6.2f} s CPU  R∞ {compiled.chain.r_inf:.4f}  "
              f"({compiled.n_states} states)", flush=True)
    return {"n_traces": n, "n_steps": int(lengths.sum()), "mean_length": float(lengths.mean()),
            "true_r_inf": chain.r_inf, "generate_s": gen_s, "repeats": repeats, "seed": seed, "families": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--seed", type=int, default=20260415)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args(argv)
    result = run(args.traces, args.repeats, args.seed)
    table = markdown_table(
        ["family", "fit + compile, wall (s)", "CPU (s)", "expanded states",
         "R∞ (truth " + f"{result['true_r_inf']:.4f})"],
        [[k, f"{v['median_s']:.2f}", f"{v['median_cpu_s']:.2f}", str(v["expanded_states"]), f"{v['r_inf']:.4f}"]
         for k, v in result["families"].items()])
    print(f"\n{args.traces} traces, {result['n_steps']} steps (mean length {result['mean_length']:.1f})\n")
    print(table)
    if not args.no_save:
        import os

        path = write_results("bench_model_families", {"machine": machine_info(), "target_s": 30.0, **result,
                                                      "load_average_after": list(os.getloadavg()),
                                                      "note": "measured on a 2-core VM shared by several agents "
                                                              "(see the load average); compare ratios between runs"})
        print(f"→ {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
