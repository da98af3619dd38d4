"""Our study PATHS: does ``tracetochain paths`` find a failure cause the first-order chain cannot see, and does its
false discovery rate hold when there is nothing to find? Not one of the paper's studies.

Run ``python -m studies.insight_paths [--quick]``: it writes ``studies/results/PATHS.json`` (the truth) and
``studies/results/PATHS.md`` (quick runs: ``studies/results/quick/``). ``tests/test_study_paths.py`` checks that the
archive meets the acceptance of issue 25 (item 3).

**The agent.** Every trace is ``plan``, then 2–6 rounds of [``read``] [``search``] ``edit`` ``test``, then
``submit``; each ``test`` fails (its step carries ``error``) with probability 0.35, independently; ``read`` and
``search`` appear with probability 0.4 and 0.2 per round. The verdict comes after ``submit``, which every trace
reaches, so the first-order chain on these states gives every state the same eventual success: it cannot tell
failing runs from succeeding ones.

* **planted** — success probability 0.50 when the tests failed at least twice in a row (the planted cause: "test
  failing ≥ 2 times in a row"), 0.75 otherwise (about 28 % of the traces carry it). A moderate effect, 25 points,
  chosen so that power is not trivially 100 % at 500 traces (at 20 points it is about 75 %).
* **null** — success probability 0.7 for every trace: no pattern goes with the outcome, every q < 0.05 is false.
* **null-tasks** — 100 tasks × 5 trials; a task's success probability is drawn from Beta(2, 1) and, apart from it,
  its test-failure probability from Beta(1.5, 2.5): both the outcomes and the paths are correlated within a task,
  independently of each other. No pattern goes with the outcome, but trace-level tests that ignore the clustering
  see too much evidence (the variance of a difference is inflated by the two within-task correlations); the
  clustered procedure (Rao–Scott p, effective-size intervals) must hold the FDR here.

Measured: for the planted corpus at 500 traces, the planted pattern's rank and q-value (one showcase corpus); over
100 planted corpora, the share where the planted pattern has q < 0.05 (power) and is among the top 3; over 100 null
corpora of each kind, the false discovery proportion V / max(R, 1) averaged (the FDR; under a global null every
discovery is false, so it is also the chance of any discovery), with its Wilson 95 % interval, and the share of
rows whose 95 % interval of the difference contains the true difference, 0 (for null-tasks also with the tasks
ignored, for contrast).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from studies._common import write_archive
from tracetochain import TraceTable
from tracetochain.analysis import analyze_paths

RESULTS = Path(__file__).resolve().parent / "results"
PLANTED = "test failing ≥ 2 times in a row"
N_TRACES = 500
REPS = 100
P_FAIL_TEST = 0.35


def simulate(scenario: str, n: int, rng: np.random.Generator) -> TraceTable:
    """One corpus of ``n`` traces of ``scenario`` (module docstring)."""
    ids: list[str] = []
    idx: list[int] = []
    states: list[str] = []
    errors: list[bool] = []
    outcomes: list[str] = []
    tasks: list[str | None] = []
    n_tasks = 100
    task_p = rng.beta(2.0, 1.0, n_tasks)
    task_fail = rng.beta(1.5, 2.5, n_tasks)  # drawn apart from task_p: paths cluster by task, independently of success
    for t in range(n):
        p_fail = float(task_fail[t % n_tasks]) if scenario == "null-tasks" else P_FAIL_TEST
        path = ["plan"]
        err = [False]
        run = best = 0
        for _ in range(int(rng.integers(2, 7))):
            if rng.random() < 0.4:
                path.append("read")
                err.append(False)
            if rng.random() < 0.2:
                path.append("search")
                err.append(False)
            failed = bool(rng.random() < p_fail)
            path += ["edit", "test"]
            err += [False, failed]
            run = run + 1 if failed else 0
            best = max(best, run)
        path.append("submit")
        err.append(False)
        task: str | None = None
        if scenario == "planted":
            p = 0.50 if best >= 2 else 0.75
        elif scenario == "null":
            p = 0.7
        elif scenario == "null-tasks":
            k = t % n_tasks
            task = f"task-{k:03d}"
            p = float(task_p[k])
        else:
            raise ValueError(scenario)
        outcome = "success" if rng.random() < p else "failure"
        tid = f"trace-{t:05d}"
        for i, (s, e) in enumerate(zip(path, err, strict=True)):
            ids.append(tid)
            idx.append(i)
            states.append(s)
            errors.append(e)
            outcomes.append(outcome)
            tasks.append(task)
    table = pa.table({"trace_id": ids, "step_idx": pa.array(idx, pa.int64()), "outcome": outcomes, "state": states,
                      "error": pa.array(errors, pa.bool_()), "task_id": pa.array(tasks, pa.string())})
    return TraceTable.from_arrow(table, source=f"simulated {scenario}")


def planted_rank(rows: list[dict[str, Any]]) -> int | None:
    """1-based rank of the row naming the planted pattern (itself or as an alias), None if not tested."""
    for i, r in enumerate(rows):
        if r["pattern"] == PLANTED or PLANTED in r["aliases"]:
            return i + 1
    return None


def wilson(k: int, n: int) -> list[float]:
    if n == 0:
        return [0.0, 1.0]
    z = 1.959963984540054
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z / d * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return [max(0.0, c - h), min(1.0, c + h)]


def _one(scenario: str, seed: int, n: int) -> dict[str, Any]:
    traces = simulate(scenario, n, np.random.default_rng(seed))
    res = analyze_paths(traces)
    rows = list(res.rows)
    sup = [r for r in rows if r["q_value"] < 0.05]
    rank = planted_rank(rows)
    planted_row = rows[rank - 1] if rank is not None else None
    false = len(sup) if scenario != "planted" else None
    out = {"seed": seed, "n_candidates": res.n_candidates, "n_supported": len(sup), "false": false,
           "clustered": res.clustered, "planted_rank": rank,
           "planted_q": None if planted_row is None else planted_row["q_value"]}
    if scenario != "planted":  # every true difference is 0: how often do the intervals contain it?
        out["covered"] = sum(1 for r in rows if r["difference"]["lower"] <= 0.0 <= r["difference"]["upper"])
        out["n_rows"] = len(rows)
    if res.clustered:  # the contrast: the same corpus with the tasks dropped (trace-level Fisher, no clustering)
        flat = TraceTable.from_arrow(traces.to_arrow().drop_columns(["task_id"]), source="tasks dropped")
        flat_rows = analyze_paths(flat).rows
        out["false_unclustered"] = sum(1 for r in flat_rows if r["q_value"] < 0.05)
        out["covered_unclustered"] = sum(1 for r in flat_rows
                                         if r["difference"]["lower"] <= 0.0 <= r["difference"]["upper"])
    return out


def run(quick: bool = False, seed: int = 20261202) -> dict[str, Any]:
    reps = 20 if quick else REPS
    t0 = time.perf_counter()
    showcase_traces = simulate("planted", N_TRACES, np.random.default_rng(seed))
    show = analyze_paths(showcase_traces)
    rank = planted_rank(list(show.rows))
    showcase = {"n_traces": show.n_traces, "n_candidates": show.n_candidates, "planted_rank": rank,
                "planted_row": show.rows[rank - 1] if rank else None,
                "top": [{k: r[k] for k in ("pattern", "kind", "n_traces", "share", "success_with", "success_without",
                                           "difference", "p_value", "q_value", "aliases")} for r in show.rows[:5]]}
    scenarios: dict[str, Any] = {}
    for k, scenario in enumerate(("planted", "null", "null-tasks")):
        runs = [_one(scenario, seed + 1000 * (k + 1) + r, N_TRACES) for r in range(reps)]
        doc: dict[str, Any] = {"reps": reps, "n_traces": N_TRACES,
                               "mean_candidates": float(np.mean([x["n_candidates"] for x in runs])),
                               "clustered": all(x["clustered"] for x in runs),
                               "mean_supported": float(np.mean([x["n_supported"] for x in runs]))}
        if scenario == "planted":
            hits = sum(1 for x in runs if x["planted_q"] is not None and x["planted_q"] < 0.05)
            top3 = sum(1 for x in runs if x["planted_rank"] is not None and x["planted_rank"] <= 3
                       and x["planted_q"] is not None and x["planted_q"] < 0.05)
            doc["power"] = {"k": hits, "n": reps, "rate": hits / reps, "wilson": wilson(hits, reps)}
            doc["top3_and_supported"] = {"k": top3, "n": reps, "rate": top3 / reps, "wilson": wilson(top3, reps)}
            doc["median_planted_q"] = float(np.median([x["planted_q"] if x["planted_q"] is not None else 1.0
                                                       for x in runs]))
        else:
            fdp = [x["false"] / max(1, x["n_supported"]) for x in runs]
            any_false = sum(1 for x in runs if x["false"])
            doc["fdr"] = {"estimate": float(np.mean(fdp)), "k": any_false, "n": reps,
                          "wilson": wilson(any_false, reps),
                          "note": "global null: every discovery is false, so V/max(R,1) is 0 or 1 and its mean is "
                                  "a proportion (Wilson interval)"}
            doc["false_discoveries_total"] = int(sum(x["false"] for x in runs))
            n_rows = sum(x["n_rows"] for x in runs)
            doc["interval_coverage"] = {
                "rate": sum(x["covered"] for x in runs) / max(1, n_rows), "n_rows": n_rows,
                "per_corpus_min": min(x["covered"] / max(1, x["n_rows"]) for x in runs),
                "note": "share of all rows (patterns × corpora) whose 95 % interval of the difference contains the "
                        "true difference 0; rows of one corpus are dependent, so no binomial interval is given"}
            if doc["clustered"]:
                flat_any = sum(1 for x in runs if x["false_unclustered"])
                doc["fdr_if_clustering_ignored"] = {"estimate": flat_any / reps, "k": flat_any, "n": reps,
                                                    "wilson": wilson(flat_any, reps)}
                doc["interval_coverage_if_clustering_ignored"] = {
                    "rate": sum(x["covered_unclustered"] for x in runs) / max(1, n_rows), "n_rows": n_rows}
        doc["runs"] = runs
        scenarios[scenario] = doc
    return {"kind": "tracetochain.study", "study": "PATHS",
            "title": "Path patterns: planted cause found, FDR held on null corpora", "quick": quick, "seed": seed,
            "planted_pattern": PLANTED, "procedure": show.to_dict()["method"], "showcase": showcase,
            "scenarios": scenarios, "runtime_s": time.perf_counter() - t0}


def render(doc: dict[str, Any]) -> str:
    s = doc["scenarios"]
    sc = doc["showcase"]
    pr = sc["planted_row"] or {}

    def iv(x: list[float]) -> str:
        return f"[{100 * x[0]:.1f} %, {100 * x[1]:.1f} %]"

    lines = [f"# {doc['title']}", "", f"Planted pattern: `{doc['planted_pattern']}`; {N_TRACES} traces per corpus; "
             f"seed {doc['seed']}; runtime {doc['runtime_s']:.0f} s{' (quick)' if doc['quick'] else ''}.", "",
             "## Showcase corpus (planted)", "",
             f"{sc['n_candidates']} candidates tested; the planted pattern ranks **{sc['planted_rank']}** with "
             f"q = {pr.get('q_value', float('nan')):.2g} (success {100 * pr.get('success_with', 0):.0f} % with, "
             f"{100 * pr.get('success_without', 0):.0f} % without).", "",
             "| rank | pattern | share | success with / without | q |", "|---|---|---|---|---|"]
    for i, r in enumerate(sc["top"]):
        lines.append(f"| {i + 1} | `{r['pattern']}` | {100 * r['share']:.0f} % | {100 * r['success_with']:.0f} % / "
                     f"{100 * r['success_without']:.0f} % | {r['q_value']:.2g} |")
    p = s["planted"]
    lines += ["", "## Power and FDR", "", "| scenario | corpora | candidates (mean) | result |", "|---|---|---|---|",
              f"| planted | {p['reps']} | {p['mean_candidates']:.0f} | power {100 * p['power']['rate']:.0f} % "
              f"{iv(p['power']['wilson'])}; planted in top 3 with q < 0.05: "
              f"{100 * p['top3_and_supported']['rate']:.0f} % {iv(p['top3_and_supported']['wilson'])} |"]
    for name in ("null", "null-tasks"):
        d = s[name]
        lines.append(f"| {name}{' (clustered)' if d['clustered'] else ''} | {d['reps']} | {d['mean_candidates']:.0f} "
                     f"| FDR {100 * d['fdr']['estimate']:.1f} % {iv(d['fdr']['wilson'])} "
                     f"({d['false_discoveries_total']} false discoveries in all)"
                     + (f"; with the tasks ignored (trace-level Fisher): FDR "
                        f"{100 * d['fdr_if_clustering_ignored']['estimate']:.1f} % "
                        f"{iv(d['fdr_if_clustering_ignored']['wilson'])}" if "fdr_if_clustering_ignored" in d else "")
                     + f"; 95 % intervals of the difference contain the true 0 in "
                       f"{100 * d['interval_coverage']['rate']:.1f} % of {d['interval_coverage']['n_rows']} rows"
                     + (f" ({100 * d['interval_coverage_if_clustering_ignored']['rate']:.1f} % with the tasks ignored)"
                        if "interval_coverage_if_clustering_ignored" in d else "")
                     + " |")
    lines += ["", "Procedure: " + "; ".join(f"{k}: {v}" for k, v in doc["procedure"].items()), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seed", type=int, default=20261202)
    args = ap.parse_args(argv)
    doc = run(quick=args.quick, seed=args.seed)
    out = RESULTS / "quick" if args.quick else RESULTS
    write_archive(out, "PATHS", doc, render(doc))
    print(render(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
