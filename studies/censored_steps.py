"""Our study CS (censoring between steps): R∞ coverage at 3,000 traces with about 30 % of traces cut at a random step,
and the size of ``compare`` on two samples of one agent under that censoring, for every interval method. Not one of
the paper's studies.

Run ``python -m studies.censored_steps [--quick] [--jobs N]``: it writes ``studies/results/CS.json`` and
``studies/results/CS.md`` (quick runs: ``studies/results/quick/``).

**The convention.** A trace cut after L steps was seen *not* to end at its L-th step: the simulator draws the L-th
state's move and stops only if it was not an exit, and the audit's censoring model says a trace absorbed at step T is
observed to end iff T ≤ C. The counting rule used to drop that last move, so the states where traces are cut had
their exits over-counted (R∞ 0.556 against a true 0.566 at 3,000 traces, coverage 86/100). The estimator now
allocates each censored trace's last move over its state's observed next states (``chain.outcome_matrix``); this
study measures the result and, on the same corpora, the old rule's point estimate, so the bias it removed is shown.

**Cells.** ``ss7`` — the SS7 chain (R∞ 0.673); ``ping-pong`` — two states that hand over to each other with exits
from both (R∞ 0.533; the old rule's bias is largest where a cut state exits often). Censoring: each trace, with
probability c gets a cap C ~ Geometric(p) and is cut after C steps if it has not ended, (c, p) = ``CENSORING`` per
cell (about 30 % of traces end censored in both).

**Coverage.** ``reps`` corpora of 3,000 traces per cell; R∞'s 95 % interval from the posterior (400 draws) and, on
fewer corpora, from the bootstrap (100 replicates); bias of the new and the old rule.

**Compare size.** ``pairs`` pairs of independent corpora of 500 traces from the same chain and censoring, compared
with ``method="posterior"`` and ``method="bootstrap"``: the rate at which ΔR∞'s interval excludes 0 ("better" or
"worse": the interval excludes 0 and the permutation test of ΔR∞ = 0 rejects; each of the two is recorded alone too),
at which some state is called changed, and at which either happens (acceptance: ≤ 5 % up to Monte Carlo error, for
every method).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from studies._common import rate_text
from studies.rn_statistics import _rate, table_from
from tracetochain import AbsorbingChain, TraceTable, count_transitions
from tracetochain.analysis import analyze
from tracetochain.analysis._compare import compare
from tracetochain.chain import ChainPrior, estimate_chain, estimate_rows
from tracetochain.datasets import ss7_chain

RESULTS = Path(__file__).resolve().parent / "results"
CELLS = ("ss7", "ping-pong")
N_TRACES = 3000
N_COMPARE = 500
#: Per cell: the probability a trace gets a cap, and the cap's Geometric parameter (≈ 30 % of traces end censored).
CENSORING = {"ss7": (0.9, 0.15), "ping-pong": (0.85, 0.5)}
METHODS = ("posterior", "bootstrap")
#: What each compare pair records: ΔR∞ called (interval excludes 0 and the permutation test rejects), each of those
#: two alone, a state called changed, either claim.
COMPARE_CLAIMS = ("delta", "interval", "permutation", "state", "any")


def ping_pong_chain() -> AbsorbingChain:
    Q = np.array([[0.0, 0.5], [0.5, 0.0]])
    return AbsorbingChain(Q, np.array([0.3, 0.2]), np.array([0.2, 0.3]), np.array([1.0, 0.0]), ("A", "B"))


def chain_of(cell: str) -> AbsorbingChain:
    return ss7_chain() if cell == "ss7" else ping_pong_chain()


def corpus(cell: str, n: int, rng: np.random.Generator, prefix: str = "t") -> TraceTable:
    cut, p_cut = CENSORING[cell]
    caps = np.where(rng.random(n) < cut, rng.geometric(p_cut, n), 10_000)
    return TraceTable.from_arrow(table_from(chain_of(cell), n, rng, caps=caps, prefix=prefix), source=f"{cell} n={n}")


def old_rule_r_inf(traces: TraceTable) -> float:
    """R∞ under the former counting rule (a censored trace's last move dropped), same prior and π0."""
    counts = count_transitions(traces)
    chain = estimate_chain(counts)
    prior = ChainPrior.from_settings(None)
    rows = estimate_rows(counts.outcome_matrix(), prior, prior.resolve_unvisited("auto"))
    m = counts.n_states
    old = AbsorbingChain(rows[:, :m], rows[:, m], rows[:, m + 1], chain.pi0, chain.state_names)
    return float(old.r_inf)


def _coverage_job(job: tuple[str, int, str, int]) -> dict[str, Any]:
    cell, rep, method, seed = job
    rng = np.random.default_rng(np.random.SeedSequence([seed, rep, CELLS.index(cell), 1]))
    traces = corpus(cell, N_TRACES, rng)
    truth = chain_of(cell).r_inf
    res = analyze(traces, audit=False, intervals=method, samples=400 if method == "posterior" else 100, seed=rep)
    s = res.ensemble.stats("r_inf")
    return {"cell": cell, "method": method, "covers": bool(s.lower <= truth <= s.upper), "point": float(s.point),
            "old_point": old_rule_r_inf(traces), "width": float(s.upper - s.lower),
            "censored": traces.outcome_counts()["censored"] / N_TRACES}


def _compare_job(job: tuple[str, int, int]) -> dict[str, Any]:
    cell, rep, seed = job
    rng = np.random.default_rng(np.random.SeedSequence([seed, rep, CELLS.index(cell), 2]))
    a, b = corpus(cell, N_COMPARE, rng, "a"), corpus(cell, N_COMPARE, rng, "b")
    out: dict[str, Any] = {"cell": cell}
    for method in METHODS:
        c = compare(a, b, intervals=method, samples=200, seed=rep)
        moved = c.direction in ("better", "worse")
        changed = bool(c.homogeneity.differing)
        assert c.delta_r_inf_test is not None
        out[method] = {"delta": moved, "interval": c.interval_direction != "same",
                       "permutation": c.delta_r_inf_test.p_value <= 0.05, "state": changed, "any": moved or changed}
    return out


def _job(job: tuple[Any, ...]) -> dict[str, Any]:
    return _coverage_job(job[1:]) if job[0] == "coverage" else _compare_job(job[1:])  # type: ignore[arg-type]


def run(quick: bool = False, seed: int = 20261203, jobs: int = 2, reps: dict[str, int] | None = None,
        pairs: int | None = None, deadline_s: float | None = None) -> dict[str, Any]:
    """Corpora per cell: ``reps`` per interval method (default 60 posterior, 20 bootstrap of 100 replicates — the
    bootstrap of 3,000 traces is several times dearer), ``pairs`` compare pairs (default 2,000: the archive's; its test
    needs ≥ 1,000 to read a size of 5 % to about ±1 point). Sized for a 2-core
    machine shared by several users; pass more for a tighter Monte Carlo error. The jobs are interleaved (replicate
    r of every part before r + 1), so ``deadline_s`` — stop after that many seconds and report what finished, with
    its own counts — still leaves every part measured."""
    reps = reps or ({"posterior": 10, "bootstrap": 3} if quick else {"posterior": 60, "bootstrap": 20})
    pairs = pairs or (10 if quick else 2000)
    t0 = time.perf_counter()
    work: list[tuple[Any, ...]] = []
    for r in range(max(max(reps.values()), pairs)):
        for cell in CELLS:
            for m in METHODS:
                if r < reps[m]:
                    work.append(("coverage", cell, r, m, seed))
            if r < pairs:
                work.append(("compare", cell, r, seed))
    cov: list[dict[str, Any]] = []
    cmp_rows: list[dict[str, Any]] = []
    stopped = False
    # Its own pool, not tracetochain._parallel.parallel_map: --deadline cancels the corpora not yet run and keeps
    # the ones done, which needs futures.
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(_job, w) for w in work]
        for w, f in zip(work, futures, strict=True):
            left = None if deadline_s is None else deadline_s - (time.perf_counter() - t0)
            try:
                row = f.result(timeout=None if left is None else max(left, 0.0))
            except TimeoutError:
                stopped = True
                for g in futures:
                    g.cancel()
                pool.shutdown(wait=False, cancel_futures=True)
                break
            (cov if w[0] == "coverage" else cmp_rows).append(row)
    cells: dict[str, Any] = {}
    for cell in CELLS:
        truth = chain_of(cell).r_inf
        entry: dict[str, Any] = {"truth_r_inf": truth}
        for m in METHODS:
            rows = [r for r in cov if r["cell"] == cell and r["method"] == m]
            pts = np.array([r["point"] for r in rows])
            old = np.array([r["old_point"] for r in rows])

            def mean_se(x: np.ndarray, truth: float = truth) -> tuple[float | None, float | None]:
                if x.size < 2:
                    return (float(x.mean() - truth) if x.size else None), None
                return float(x.mean() - truth), float(x.std(ddof=1) / np.sqrt(x.size))

            bias, bias_se = mean_se(pts)
            old_bias, old_se = mean_se(old)
            entry[m] = {"coverage": _rate([r["covers"] for r in rows]), "bias": bias, "bias_se": bias_se,
                        "old_rule_bias": old_bias, "old_rule_bias_se": old_se,
                        "median_width": float(np.median([r["width"] for r in rows])) if rows else None,
                        "censored_share": float(np.mean([r["censored"] for r in rows])) if rows else None}
        rows_c = [r for r in cmp_rows if r["cell"] == cell]
        entry["compare"] = {m: {k: _rate([r[m][k] for r in rows_c]) for k in COMPARE_CLAIMS} for m in METHODS}
        cells[cell] = entry
    return {"kind": "tracetochain.study", "study": "CS", "title": "Censoring between steps", "quick": quick,
            "stopped_at_deadline": stopped, "deadline_s": deadline_s,
            "seed": seed, "n_traces": N_TRACES, "n_compare": N_COMPARE, "reps": reps, "pairs": pairs,
            "censoring": {c: {"cut_probability": v[0], "cap": f"Geometric({v[1]})"} for c, v in CENSORING.items()},
            "cells": cells,
            "runtime_s": round(time.perf_counter() - t0, 1)}


def render(doc: dict[str, Any]) -> str:
    def pct(e: dict[str, Any]) -> str:
        return rate_text(e, count="n")

    lines = [f"# {doc['title']}", "",
             f"{doc['n_traces']:,} traces per corpus; each trace cut, with a cell's probability, after a cap drawn "
             f"from its law, if it has not ended ({doc['censoring']}). Corpora: {doc['reps']}; compare: "
             f"{doc['pairs']} pairs of {doc['n_compare']} traces per cell. Rates in % with their Wilson 95 % interval "
             f"(number of corpora). Runtime {doc['runtime_s']} s"
             + (" (stopped at the deadline: the counts are what finished)" if doc.get("stopped_at_deadline") else "")
             + ".", "",
             "## R∞ at 3,000 traces", "",
             "| cell | method | censored | true R∞ | coverage | bias (± s.e.) | old rule's bias (± s.e.) "
             "| median width |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for cell, e in doc["cells"].items():
        for m in METHODS:
            x = e[m]
            def num(v: float | None, fmt: str) -> str:
                return "—" if v is None else format(v, fmt)

            lines.append(f"| {cell} | {m} | {num(x['censored_share'] and 100 * x['censored_share'], '.0f')} % | "
                         f"{e['truth_r_inf']:.4f} | {pct(x['coverage'])} | {num(x['bias'], '+.4f')} ± "
                         f"{num(x['bias_se'], '.4f')} | {num(x['old_rule_bias'], '+.4f')} ± "
                         f"{num(x['old_rule_bias_se'], '.4f')} | {num(x['median_width'], '.4f')} |")
    lines += ["", "## compare: size on two samples of one agent", "",
              "| cell | method | ΔR∞ called different | its interval excludes 0 | permutation p ≤ 0.05 "
              "| a state called changed | either (verdict not 'same') |",
              "|---|---|---:|---:|---:|---:|---:|"]
    for cell, e in doc["cells"].items():
        for m in METHODS:
            c = e["compare"][m]
            lines.append(f"| {cell} | {m} | {pct(c['delta'])} | {pct(c['interval'])} | {pct(c['permutation'])} "
                         f"| {pct(c['state'])} | {pct(c['any'])} |")
    lines += ["", "The old rule's bias is that of the same corpora's R∞ with each censored trace's last move dropped "
              "(the counting before this study); acceptance: coverage ≥ 90 % and compare's size ≤ 5 % (up to "
              "Monte Carlo error) for every method."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=20261203)
    ap.add_argument("--deadline", type=float, default=None, help="stop after this many seconds, report what finished")
    ap.add_argument("--pairs", type=int, default=None, help="compare pairs per cell (default 2,000; 10 with --quick)")
    args = ap.parse_args(argv)
    doc = run(args.quick, args.seed, args.jobs, pairs=args.pairs, deadline_s=args.deadline)
    out = RESULTS / "quick" if args.quick else RESULTS
    out.mkdir(parents=True, exist_ok=True)
    (out / "CS.json").write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")
    (out / "CS.md").write_text(render(doc))
    print(render(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
