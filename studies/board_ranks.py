"""Study BOARD (ours): does the reliability board's order deserve trust? Rank-interval coverage and false differences.

Run ``python -m studies.board_ranks [--quick] [--reps N]``: it writes ``studies/results/BOARD.json`` and
``studies/results/BOARD.md`` (quick runs: ``studies/results/quick/``); ``tests/test_study_board.py`` checks that the
archive meets the acceptance.

Corpora are built to look like a benchmark run: G = 10 configurations, each with T = 30 tasks of m = 3 trials. A
task's success probability is drawn from a Beta law with the configuration's mean μ_g and intraclass correlation
ρ = 0.2 (α + β = 1/ρ − 1 = 4), so trials of one task are correlated and intervals must respect task clustering. An
episode is a short agent run (1–4 ``act``/``tool`` steps, then its outcome). Every corpus goes through
:func:`tracetochain.analysis._board.board` exactly as ``tracetochain board --no-audit`` runs it (posterior intervals
tempered by the design effect, Holm over the 45 pairs, Klein–Wright–Wieczorek rank intervals from the Holm
decisions).

* **known differences** — μ_g = 0.30 + 0.06·g (g = 0…9; true rank of g is 10 − g; R∞ of the chain equals μ_g):
  how often every group's rank interval holds its true rank (simultaneous coverage; acceptance ≥ 90 %), the
  per-group coverage, the mean rank-interval length, and how many pairs are found different (power);
* **all equal** — μ_g = 0.6 for every group: how often the board reports at least one difference (acceptance ≤ 5 %).

Each rate is given with its Wilson 95 % interval.
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

RESULTS = Path(__file__).resolve().parent / "results"
G, TASKS, TRIALS, RHO = 10, 30, 3, 0.2


def wilson(k: int, n: int, z: float = 1.959964) -> list[float]:
    if n == 0:
        return [0.0, 1.0]
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return [max(0.0, c - h), min(1.0, c + h)]


def corpus(means: list[float], seed: int) -> Any:
    """One corpus: every configuration's tasks, trials and short episodes (columns built at once)."""
    import pyarrow as pa

    import tracetochain as tt

    rng = np.random.default_rng(seed)
    s = 1.0 / RHO - 1.0
    n_ep = G * TASKS * TRIALS
    g = np.repeat(np.arange(G), TASKS * TRIALS)
    task = np.tile(np.repeat(np.arange(TASKS), TRIALS), G)
    trial = np.tile(np.arange(TRIALS), G * TASKS)
    mu = np.asarray(means)[np.arange(G)]
    p_task = rng.beta(np.repeat(mu * s, TASKS), np.repeat((1 - mu) * s, TASKS))  # (G * TASKS,)
    ok = rng.random(n_ep) < p_task[g * TASKS + task]
    n_steps = rng.integers(1, 5, n_ep)
    ep = np.repeat(np.arange(n_ep), n_steps)
    step = np.arange(ep.size) - np.repeat(np.cumsum(n_steps) - n_steps, n_steps)
    tid = np.array([f"g{a}/t{b}/r{c}" for a, b, c in zip(g, task, trial, strict=True)])
    table = pa.table({"trace_id": tid[ep], "step_idx": step.astype(np.int64),
                      "state": np.where(step % 2 == 0, "act", "tool"),
                      "outcome": np.where(ok, "success", "failure")[ep],
                      "task_id": np.array([f"g{a}-t{b}" for a, b in zip(g, task, strict=True)])[ep],
                      "trial": trial[ep].astype(np.int64),
                      "config": np.array([f"cfg{a:02d}" for a in g])[ep]})
    return tt.TraceTable.from_arrow(table)


def run_board(table: Any, seed: int) -> Any:
    from tracetochain.analysis._board import board

    return board(table, by="config", audit=False, samples=400, n_bootstrap=50, ks=(1,), horizon=5, seed=seed)


def scenario_known(reps: int, seed0: int) -> dict[str, Any]:
    means = [0.30 + 0.06 * g for g in range(G)]
    true_rank = {f"cfg{g:02d}": G - g for g in range(G)}
    all_cover = 0
    per_group = np.zeros(G, dtype=np.int64)
    lengths: list[float] = []
    found: list[int] = []
    for r in range(reps):
        b = run_board(corpus(means, seed0 + r), seed0 + r)
        print(f"known {r + 1}/{reps}", file=sys.stderr, flush=True)
        covered = [row.rank_interval[0] <= true_rank[row.group] <= row.rank_interval[1] for row in b.rows]
        all_cover += all(covered)
        for row, c in zip(b.rows, covered, strict=True):
            per_group[int(row.group[3:])] += c
        lengths.append(float(np.mean([row.rank_interval[1] - row.rank_interval[0] + 1 for row in b.rows])))
        found.append(sum(p.significant for p in b.pairs))
    return {"means": means, "reps": reps, "simultaneous_coverage": all_cover / reps,
            "wilson": wilson(all_cover, reps), "per_group_coverage": (per_group / reps).tolist(),
            "mean_rank_interval_length": float(np.mean(lengths)),
            "mean_pairs_found_different": float(np.mean(found)), "n_pairs": G * (G - 1) // 2}


def scenario_null(reps: int, seed0: int) -> dict[str, Any]:
    means = [0.6] * G
    any_diff = 0
    for r in range(reps):
        b = run_board(corpus(means, seed0 + r), seed0 + r)
        print(f"null {r + 1}/{reps}", file=sys.stderr, flush=True)
        any_diff += any(p.significant for p in b.pairs)
    return {"means": means, "reps": reps, "any_difference_rate": any_diff / reps, "wilson": wilson(any_diff, reps)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="20 corpora per scenario instead of --reps")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    reps = 20 if args.quick else args.reps
    t0 = time.perf_counter()
    known = scenario_known(reps, 10_000)
    null = scenario_null(reps, 20_000)
    doc = {"study": "BOARD", "quick": bool(args.quick), "reps": reps,
           "design": {"groups": G, "tasks": TASKS, "trials": TRIALS, "icc": RHO, "n_samples": 400, "level": 0.05,
                      "method": "tracetochain board --no-audit (posterior tempered by the design effect; Welch t "
                                "tests, Holm; Klein-Wright-Wieczorek rank intervals)"},
           "known_differences": known, "all_equal": null,
           "acceptance": {"simultaneous_rank_coverage_at_least": 0.90, "false_difference_rate_at_most": 0.05},
           "seconds": round(time.perf_counter() - t0, 1)}
    out = args.out or (RESULTS / "quick" if args.quick else RESULTS)
    out.mkdir(parents=True, exist_ok=True)
    (out / "BOARD.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    k, n = known, null
    md = ["# Study BOARD: rank intervals and false differences of the reliability board", "",
          f"{reps} corpora per scenario; {G} configurations × {TASKS} tasks × {TRIALS} trials, ICC {RHO}.", "",
          "| figure | value | Wilson 95 % | acceptance |", "|---|---|---|---|",
          f"| simultaneous rank-interval coverage (known differences) | {k['simultaneous_coverage']:.3f} | "
          f"[{k['wilson'][0]:.3f}, {k['wilson'][1]:.3f}] | ≥ 0.90 |",
          f"| corpora with a reported difference (all equal) | {n['any_difference_rate']:.3f} | "
          f"[{n['wilson'][0]:.3f}, {n['wilson'][1]:.3f}] | ≤ 0.05 |",
          f"| mean rank-interval length (known differences) | {k['mean_rank_interval_length']:.2f} | | |",
          f"| pairs found different of {k['n_pairs']} (known differences) | "
          f"{k['mean_pairs_found_different']:.1f} | | |",
          "", f"Per-group coverage: {', '.join(f'{c:.2f}' for c in k['per_group_coverage'])}.", ""]
    (out / "BOARD.md").write_text("\n".join(md), encoding="utf-8")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
