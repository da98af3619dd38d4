"""Our study CC (certified means covered): among corpora where an output is certified, does its 95 % interval cover
the truth? Not one of the paper's studies.

Run ``python -m studies.certified_coverage [--quick] [--jobs N] [--reps R]``: it writes
``studies/results/CC.json`` and ``studies/results/CC.md`` (quick runs: ``studies/results/quick/``).

The certificate's layers control the chance of withholding a sound output; this study measures the other side,
the chance that what is certified is wrong. For each cell and size n ∈ {100, 500, 1,000} traces it simulates
corpora, runs :func:`tracetochain.analysis.analyze` (posterior intervals, the default certificate with fewer
replicates — ``AUDIT`` below — to fit the study in about 20 minutes on two cores), and records, for R∞, R(10), pass^3
and mean steps, whether the output is certified and whether its 95 % interval covers the truth. Cells:

* ``difficulty`` — tasks of three difficulties (the SS7 chain with its success exits × 1.6, × 1, × 0.35), 5 trials
  per task; the truth is the population over tasks (mean of the per-task R∞, R(10), R∞³ and mean steps);
* ``speed`` — tasks that differ only in speed: half the tasks run the SS7 chain, half the same chain slowed by a
  self-loop of ½ on every state (same R∞, twice the steps), 5 trials per task;
* ``rare-failure``, ``two-starts`` — first-order chains from ``studies/rn_statistics.py`` (no tasks): the truth is
  the chain's, and every layer's null holds, so the rate of withholding anything there is the certificate's size.

Acceptance (issue 30): among certified corpora, coverage ≥ 90 % for every quantity in every cell, and the null rate
of withholding anything ≤ 5 %. Every rate comes with its Wilson 95 % interval (Monte Carlo error); at large n fewer
corpora are run, so the error is wider there.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from studies._common import rate_text
from studies.rn_statistics import _rate, rare_failure_chain, table_from, two_starts_chain
from tracetochain import AbsorbingChain, TraceTable
from tracetochain._parallel import parallel_map
from tracetochain.analysis import analyze
from tracetochain.datasets import ss7_chain

RESULTS = Path(__file__).resolve().parent / "results"
SIZES = (100, 500, 1000)
CELLS = ("difficulty", "speed", "rare-failure", "two-starts")
NULL_CELLS = ("rare-failure", "two-starts")
QUANTITIES = ("r_inf", "r10", "pass3", "mean_steps")
OUTPUT_OF = {"r_inf": "R_inf", "r10": "R(d)", "pass3": "pass^3", "mean_steps": "mean_steps"}
TRIALS = 5
#: The certificate's replicate counts in the study (the defaults are 199/199/999): fewer, to fit the time budget.
AUDIT = {"n_bootstrap": 99, "n_permutations": 99, "trials_permutations": 499}


def difficulty_chains() -> tuple[AbsorbingChain, ...]:
    base = ss7_chain()
    out = []
    for factor in (1.6, 1.0, 0.35):
        rs = base.R_success * factor
        Q = base.Q * ((1 - rs - base.R_failure) / base.Q.sum(axis=1))[:, None]
        out.append(AbsorbingChain(Q, rs, base.R_failure, base.pi0, base.state_names))
    return tuple(out)


def speed_chains() -> tuple[AbsorbingChain, ...]:
    base = ss7_chain()
    lam = 0.5
    m = base.n_states
    slow = AbsorbingChain(lam * np.eye(m) + (1 - lam) * base.Q, (1 - lam) * base.R_success,
                          (1 - lam) * base.R_failure, base.pi0, base.state_names)
    return base, slow


def _population(chains: tuple[AbsorbingChain, ...]) -> dict[str, float]:
    return {"r_inf": float(np.mean([c.r_inf for c in chains])),
            "r10": float(np.mean([c.reliability(10)[10] for c in chains])),
            "pass3": float(np.mean([c.r_inf ** 3 for c in chains])),
            "mean_steps": float(np.mean([c.mean_steps() for c in chains]))}


def truth(cell: str) -> dict[str, float]:
    if cell == "difficulty":
        return _population(difficulty_chains())
    if cell == "speed":
        return _population(speed_chains())
    chain = {"rare-failure": rare_failure_chain, "two-starts": two_starts_chain}[cell]()
    return _population((chain,))


def corpus(cell: str, n: int, rng: np.random.Generator) -> TraceTable:
    if cell in NULL_CELLS:
        chain = {"rare-failure": rare_failure_chain, "two-starts": two_starts_chain}[cell]()
        return TraceTable.from_arrow(table_from(chain, n, rng), source=f"{cell} n={n}")
    chains = difficulty_chains() if cell == "difficulty" else speed_chains()
    n_tasks = max(len(chains), n // TRIALS)
    kind = rng.integers(0, len(chains), n_tasks)  # each task draws its kind once
    parts = []
    for k, chain in enumerate(chains):
        tasks = np.flatnonzero(kind == k)
        if tasks.size:
            task_of_trace = np.repeat(tasks, TRIALS)
            parts.append(table_from(chain, task_of_trace.size, rng, prefix=f"{k}-", task=task_of_trace))
    return TraceTable.from_arrow(pa.concat_tables(parts), source=f"{cell} n={n}")


def _job(job: tuple[str, int, int, int]) -> dict[str, Any]:
    cell, n, rep, seed = job
    rng = np.random.default_rng(np.random.SeedSequence([seed, n, rep, CELLS.index(cell)]))
    traces = corpus(cell, n, rng)
    t = truth(cell)
    res = analyze(traces, intervals="posterior", samples=400, seed=rep, **AUDIT)
    cert = res.certificate
    assert cert is not None
    ens = res.ensemble
    stats = {"r_inf": ens.stats("r_inf"), "r10": ens.stats("reliability", horizon=10).element(10),
             "pass3": ens.stats("pass_hat_k", k=[3]).element(0), "mean_steps": ens.stats("mean_steps")}
    out: dict[str, Any] = {"cell": cell, "n": n, "withheld_any": bool(cert.withheld), "decision": cert.decision}
    for q, s in stats.items():
        status = cert.pass_k_status(3) if q == "pass3" else cert.status(OUTPUT_OF[q])
        out[q] = {"covers": bool(s.lower <= t[q] <= s.upper), "status": status}
    return out


def run(quick: bool = False, seed: int = 20261202, jobs: int = 2, reps: int | None = None,
        only: tuple[str, ...] = CELLS) -> dict[str, Any]:
    """Corpora per size: ``reps`` at 100 traces, half at 500, a quarter at 1,000 (the CPU goes where n is small).
    ``only``: the cells to run (the others are left to :func:`merge_archive`)."""
    base = reps if reps is not None else (6 if quick else 60)
    per_size = {100: base, 500: max(2, base // 2), 1000: max(2, base // 4)}
    t0 = time.perf_counter()
    work = [(cell, n, r, seed) for cell in only for n in SIZES for r in range(per_size[n])]
    rows = parallel_map(_job, work, n_jobs=jobs)
    cells: dict[str, Any] = {}
    for cell in only:
        for n in SIZES:
            sub = [r for r in rows if r["cell"] == cell and r["n"] == n]
            entry: dict[str, Any] = {"truth": truth(cell), "corpora": len(sub),
                                     "withholds_something": _rate([r["withheld_any"] for r in sub])}
            for q in QUANTITIES:
                cert = [r[q]["covers"] for r in sub if r[q]["status"] == "certified"]
                entry[q] = {"certified": _rate([r[q]["status"] == "certified" for r in sub]),
                            "coverage_if_certified": _rate(cert),
                            "coverage_all": _rate([r[q]["covers"] for r in sub])}
            cells[f"{cell}/{n}"] = entry
    return {"kind": "tracetochain.study", "study": "CC", "title": "Certified means covered", "quick": quick,
            "seed": seed, "corpora_per_size": {str(k): v for k, v in per_size.items()}, "sizes": list(SIZES),
            "audit": AUDIT, "cells": cells, "runtime_s": round(time.perf_counter() - t0, 1)}


def merge_archive(doc: dict[str, Any], archive: dict[str, Any]) -> dict[str, Any]:
    """``doc`` (some cells re-run) completed with the archive's other cells, which the code change did not touch
    (same seed and sizes required); the re-run cells and both runtimes are recorded."""
    for key in ("seed", "corpora_per_size", "sizes", "audit"):
        if doc[key] != archive[key]:
            raise ValueError(f"cannot merge: {key} differs from the archive ({doc[key]!r} vs {archive[key]!r})")
    rerun = sorted({k.split("/")[0] for k in doc["cells"]})
    cells = {k: (doc["cells"][k] if k in doc["cells"] else v) for k, v in archive["cells"].items()}
    return {**doc, "cells": cells, "rerun_cells": rerun,
            "runtime_s_kept_cells": archive.get("runtime_s_kept_cells", archive["runtime_s"])}


def render(doc: dict[str, Any]) -> str:
    def pct(e: dict[str, Any]) -> str:
        return rate_text(e, digits=0, count="n")

    lines = [f"# {doc['title']}", "",
             f"Corpora per size: {doc['corpora_per_size']}; audit replicates {doc['audit']}. For each output: the "
             "share of corpora where it is certified, and among those the coverage of its 95 % interval, in % with "
             f"the Wilson 95 % interval and the number of corpora. Runtime {doc['runtime_s']} s"
             + (f" (re-run cells: {', '.join(doc['rerun_cells'])}; the others are kept from the run before, "
                f"{doc['runtime_s_kept_cells']} s, which the change did not touch)" if doc.get("rerun_cells") else "")
             + ".", "",
             "| cell | n | withholds something | " + " | ".join(f"{q} certified | {q} covered if certified"
                                                        for q in QUANTITIES) + " |",
             "|---|---:|---:|" + "---:|" * (2 * len(QUANTITIES))]
    for key, e in doc["cells"].items():
        cell, n = key.split("/")
        row = [pct(e["withholds_something"])]
        for q in QUANTITIES:
            row += [pct(e[q]["certified"]), pct(e[q]["coverage_if_certified"])]
        lines.append(f"| {cell} | {n} | " + " | ".join(row) + " |")
    lines += ["", f"`{'`, `'.join(NULL_CELLS)}` are first-order truths: their 'withholds something' is the "
              "certificate's size (acceptance ≤ 5 %)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--reps", type=int, default=None, help="corpora at 100 traces (half at 500, a quarter at 1,000)")
    ap.add_argument("--seed", type=int, default=20261202)
    ap.add_argument("--cells", default=",".join(CELLS),
                    help="comma-separated cells to run; the others are kept from the archive (same seed and sizes)")
    args = ap.parse_args(argv)
    only = tuple(c for c in args.cells.split(",") if c)
    unknown = sorted(set(only) - set(CELLS))
    if unknown:
        ap.error(f"unknown cells {unknown}; choose from {', '.join(CELLS)}")
    doc = run(args.quick, args.seed, args.jobs, args.reps, only)
    out = RESULTS / "quick" if args.quick else RESULTS
    if set(only) != set(CELLS):
        doc = merge_archive(doc, json.loads((out / "CC.json").read_text()))
    out.mkdir(parents=True, exist_ok=True)
    (out / "CC.json").write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")
    (out / "CC.md").write_text(render(doc))
    print(render(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
