"""Our study RN (right numbers): coverage of the intervals and size and power of the certificate on chains built to
break them. Not one of the paper's studies.

Run ``python -m studies.rn_statistics [--quick] [--jobs N]`` (or ``make study-statistics``): it writes
``studies/results/RN.json`` (the truth) and ``studies/results/RN.md`` (quick runs: ``studies/results/quick/``).

**Coverage.** For each cell — a chain and a way of observing it — and each size n ∈ {30, 100, 500} traces, the study
simulates ``reps`` corpora, runs :func:`tracetochain.analysis.analyze` with the default prior and intervals from the
Dirichlet posterior and from the bootstrap, and counts how often the 95 % intervals of R∞, R(10) and pass^3 contain
the truth (Wilson 95 % interval of each coverage rate beside it). Cells:

* ``rare-failure`` — 12 states, one rare failure exit (the prior must not invent failures elsewhere);
* ``detour`` — a rarely visited detour state that fails half the time;
* ``two-starts`` — two start states with very different prospects (π0's noise must count);
* ``capped`` — traces cut after 6 steps (censoring at a fixed budget);
* ``censored`` — about 30 % of traces cut at a random step (independent censoring);
* ``task-clusters`` — tasks of two difficulties, 4 trials each; the target is the population R∞ over tasks (pass^3
  and R(10) of the i.i.d. chain are not the per-task quantities there, so only R∞ is scored).

**Size and power.** The certificate on first-order data (n = 300: every layer should reject about 5 % at its own
level, and the certificate withhold something at most 5 %), on second-order memory (n = 1,000) and on
duration-dependent data (n = 1,000).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from studies._common import rate_text
from tracetochain import AbsorbingChain, TraceTable
from tracetochain._parallel import parallel_map
from tracetochain.analysis import analyze
from tracetochain.datasets import simulate_memory_traces, ss7_chain
from tracetochain.numerics import simulate_traces

RESULTS = Path(__file__).resolve().parent / "results"
SIZES = (30, 100, 500)
_OUTCOMES = np.array(["success", "failure", "censored"])


# ------------------------------------------------------------------------------------------------ chains
def rare_failure_chain() -> AbsorbingChain:
    """12 states on a ring (next, skip three, stay); success exits from the last four; one failure exit (state 5)."""
    m = 12
    Q = np.zeros((m, m))
    rs = np.zeros(m)
    rf = np.zeros(m)
    for i in range(m):
        Q[i, (i + 1) % m] += 0.55
        Q[i, (i + 3) % m] += 0.25
        Q[i, i] += 0.10
        rs[i] = 0.25 if i >= 8 else 0.0
        rf[i] = 0.015 if i == 5 else 0.0
        scale = (1.0 - rs[i] - rf[i]) / Q[i].sum()
        Q[i] *= scale
    return AbsorbingChain(Q, rs, rf, 0, [f"s{i}" for i in range(m)])


def detour_chain() -> AbsorbingChain:
    """A path of six states with a detour from state 2 (taken 4 % of the time) that fails half the time."""
    m = 7
    Q = np.zeros((m, m))
    rs = np.zeros(m)
    rf = np.zeros(m)
    for i in range(5):
        Q[i, i] = 0.2
        Q[i, i + 1] = 0.78
        rf[i] = 0.02
    Q[2, 6] = 0.04
    Q[2, 3] -= 0.04
    Q[5, 5] = 0.3
    rs[5] = 0.65
    rf[5] = 0.05
    Q[6, 3] = 0.5
    rf[6] = 0.5
    return AbsorbingChain(Q, rs, rf, 0, ["plan", "search", "read", "edit", "test", "submit", "detour"])


def two_starts_chain() -> AbsorbingChain:
    """Two start states with different prospects: ``easy`` (R∞ ≈ 0.9) and ``hard`` (R∞ ≈ 0.35), π0 = ½, ½."""
    Q = np.array([[0.3, 0.0, 0.5, 0.0], [0.0, 0.3, 0.0, 0.4], [0.1, 0.0, 0.2, 0.0], [0.0, 0.1, 0.0, 0.3]])
    rs = np.array([0.15, 0.05, 0.65, 0.2])
    rf = np.array([0.05, 0.25, 0.05, 0.4])
    return AbsorbingChain(Q, rs, rf, [0.5, 0.5, 0.0, 0.0], ["easy", "hard", "easy-work", "hard-work"])


def cluster_chains() -> tuple[AbsorbingChain, AbsorbingChain]:
    """Easy and hard tasks: the SS7 chain with its success exits strengthened or weakened."""
    base = ss7_chain()
    out = []
    for factor in (1.6, 0.35):
        rs = base.R_success * factor
        Q = base.Q * ((1 - rs - base.R_failure) / base.Q.sum(axis=1))[:, None]
        out.append(AbsorbingChain(Q, rs, base.R_failure, base.pi0, base.state_names))
    return out[0], out[1]


# ------------------------------------------------------------------------------------------------ simulation
def table_from(chain: AbsorbingChain, n: int, rng: np.random.Generator, *, caps: np.ndarray | None = None,
               max_steps: int = 10_000, prefix: str = "t", task: np.ndarray | None = None) -> pa.Table:
    sim = simulate_traces(chain.Q, chain.R_success, chain.R_failure, chain.pi0, n, rng, max_steps=max_steps,
                          record_paths=True, caps=caps)
    assert sim.states is not None
    L = sim.length
    tr = np.repeat(np.arange(n), L)
    step = np.arange(tr.size) - np.repeat(np.concatenate([[0], np.cumsum(L)[:-1]]), L)
    names = np.array(chain.state_names, dtype=object)
    cols: dict[str, Any] = {
        "trace_id": pa.array([f"{prefix}{i}" for i in tr], pa.string()),
        "step_idx": pa.array(step, pa.int64()),
        "state": pa.array(names[sim.states], pa.string()),
        "outcome": pa.array(_OUTCOMES[sim.outcome][tr], pa.string()),
    }
    if task is not None:
        cols["task_id"] = pa.array([str(x) for x in task[tr]], pa.string())
    return pa.table(cols)


def corpus(cell: str, n: int, rng: np.random.Generator) -> TraceTable:
    if cell == "rare-failure":
        table = table_from(rare_failure_chain(), n, rng)
    elif cell == "detour":
        table = table_from(detour_chain(), n, rng)
    elif cell == "two-starts":
        table = table_from(two_starts_chain(), n, rng)
    elif cell == "capped":
        table = table_from(ss7_chain(), n, rng, max_steps=6)
    elif cell == "censored":
        caps = np.where(rng.random(n) < 0.7, rng.geometric(0.15, n), 10_000)
        table = table_from(ss7_chain(), n, rng, caps=caps)
    elif cell == "task-clusters":
        easy, hard = cluster_chains()
        n_tasks = max(2, n // 4)
        hard_task = rng.random(n_tasks) < 0.5
        parts = []
        for kind, chain in ((False, easy), (True, hard)):
            tasks = np.flatnonzero(hard_task == kind)
            if tasks.size:
                task_of_trace = np.repeat(tasks, 4)
                parts.append(table_from(chain, task_of_trace.size, rng, prefix=f"{int(kind)}-",
                                        task=task_of_trace))
        table = pa.concat_tables(parts)
    else:
        raise ValueError(cell)
    return TraceTable.from_arrow(table, source=f"{cell} n={n}")


def truth(cell: str) -> dict[str, float | None]:
    """R∞, R(10) and pass^3 of the process (pass^3 = R∞³ for i.i.d. trials); the task-cluster target is E_task R∞."""
    if cell == "task-clusters":
        easy, hard = cluster_chains()
        return {"r_inf": 0.5 * (easy.r_inf + hard.r_inf), "r10": None, "pass3": None}
    chain = {"rare-failure": rare_failure_chain, "detour": detour_chain, "two-starts": two_starts_chain,
             "capped": ss7_chain, "censored": ss7_chain}[cell]()
    return {"r_inf": chain.r_inf, "r10": float(chain.reliability(10)[10]), "pass3": chain.r_inf ** 3}


COVERAGE_CELLS = ("rare-failure", "detour", "two-starts", "capped", "censored", "task-clusters")


def _coverage_job(job: tuple[str, int, int, int]) -> dict[str, Any]:
    cell, n, rep, seed = job
    rng = np.random.default_rng(np.random.SeedSequence([seed, n, rep, COVERAGE_CELLS.index(cell)]))
    traces = corpus(cell, n, rng)
    t = truth(cell)
    out: dict[str, Any] = {"cell": cell, "n": n}
    for method, draws in (("posterior", 1000), ("bootstrap", 200)):
        res = analyze(traces, audit=False, intervals=method, samples=draws, seed=rep)
        ens = res.ensemble
        hits: dict[str, bool | None] = {}
        s = ens.stats("r_inf")
        hits["r_inf"] = bool(s.lower <= t["r_inf"] <= s.upper)
        out[f"{method}_width_r_inf"] = float(s.upper - s.lower)
        if t["r10"] is not None:
            r = ens.stats("reliability", horizon=10).element(10)
            hits["r10"] = bool(r.lower <= t["r10"] <= r.upper)
            p = ens.stats("pass_hat_k", k=[3]).element(0)
            hits["pass3"] = bool(p.lower <= t["pass3"] <= p.upper)
        out[method] = hits
    return out


# ------------------------------------------------------------------------------------------------ size / power
def duration_traces(n: int, rng: np.random.Generator, strength: float) -> TraceTable:
    """First-order in the state, but the exits grow with the step index: at step j every exit is multiplied by
    (1 + strength·(j − 3)/3), clipped to [0.2, 3] (agents that wind down late)."""
    base = ss7_chain()
    m = base.n_states
    cur = np.zeros(n, np.int64)
    outcome = np.full(n, 2)
    length = np.zeros(n, np.int64)
    active = np.arange(n)
    steps_t, steps_s = [], []
    for j in range(200):
        if not active.size:
            break
        f = float(np.clip(1 + strength * (j - 3) / 3, 0.2, 3.0))
        rs = np.minimum(base.R_success * f, 0.9)
        rf = np.minimum(base.R_failure * f, 0.9 - rs)
        Q = base.Q * ((1 - rs - rf) / base.Q.sum(axis=1))[:, None]
        cum = np.cumsum(np.column_stack([Q, rs, rf]), axis=1)
        cum[:, -1] = 1.0
        c = cur[active]
        steps_t.append(active)
        steps_s.append(c)
        length[active] += 1
        nxt = (rng.random(active.size)[:, None] >= cum[c]).sum(axis=1)
        done = nxt >= m
        outcome[active[done]] = nxt[done] - m
        cur[active[~done]] = nxt[~done]
        active = active[~done]
    tr = np.concatenate(steps_t)
    st = np.concatenate(steps_s)
    order = np.argsort(tr, kind="stable")
    tr, st = tr[order], st[order]
    offsets = np.concatenate([[0], np.cumsum(length)])
    step = np.arange(tr.size) - np.repeat(offsets[:-1], length)
    names = np.array(base.state_names, dtype=object)
    return TraceTable.from_arrow(pa.table({
        "trace_id": pa.array([f"t{i}" for i in tr], pa.string()), "step_idx": pa.array(step, pa.int64()),
        "state": pa.array(names[st], pa.string()), "outcome": pa.array(_OUTCOMES[outcome][tr], pa.string())}),
        source="duration")


def tasks_null(n: int, rng: np.random.Generator) -> TraceTable:
    """First-order truth with repeated trials of identical tasks (4 per task): every layer's null holds, trials too."""
    task = np.repeat(np.arange(n // 4), 4)
    return TraceTable.from_arrow(table_from(ss7_chain(), task.size, rng, task=task), source="null with tasks")


AUDIT_SCENARIOS: dict[str, tuple[int, Callable[[int, np.random.Generator], TraceTable]]] = {
    "null": (300, lambda n, rng: TraceTable.from_arrow(table_from(ss7_chain(), n, rng), source="null")),
    "null-tasks": (300, tasks_null),
    "memory": (1000, lambda n, rng: simulate_memory_traces(ss7_chain(), n, memory=0.3,
                                                          seed=int(rng.integers(2**31)))),
    "duration": (1000, lambda n, rng: duration_traces(n, rng, 0.5)),
}


def _audit_job(job: tuple[str, int, int]) -> dict[str, Any]:
    scenario, rep, seed = job
    n, make = AUDIT_SCENARIOS[scenario]
    rng = np.random.default_rng(np.random.SeedSequence([seed, rep, list(AUDIT_SCENARIOS).index(scenario)]))
    traces = make(n, rng)
    cert = analyze(traces, intervals=None, seed=rep).certificate
    assert cert is not None
    return {"scenario": scenario, "decision": cert.decision,
            "raw_reject": {k: (v.p_value is not None and v.p_value <= 0.05) for k, v in cert.layers.items()},
            "applicable": {k: v.status in ("pass", "reject") for k, v in cert.layers.items()},
            "layer_reject": {k: v.status == "reject" for k, v in cert.layers.items()},
            "withheld_any": bool(cert.withheld), "split_dependent": any(v.split_dependent
                                                                        for v in cert.layers.values())}


# ------------------------------------------------------------------------------------------------ summary
def wilson(k: int, n: int) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    z = 1.959963984540054
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, c - h), min(1.0, c + h)


def _rate(hits: list[bool]) -> dict[str, Any]:
    k, n = int(sum(hits)), len(hits)
    if n == 0:
        return {"rate": None, "k": 0, "n": 0, "wilson": [None, None]}
    lo, hi = wilson(k, n)
    return {"rate": k / n if n else None, "k": k, "n": n, "wilson": [lo, hi]}


def run(quick: bool = False, seed: int = 20261201, jobs: int = 2, cells: tuple[str, ...] = COVERAGE_CELLS,
        scenarios: tuple[str, ...] = tuple(AUDIT_SCENARIOS), audit_reps: int | None = None) -> dict[str, Any]:
    """``cells`` and ``scenarios``: what to run (the rest is left to :func:`merge_archive`); ``audit_reps``: corpora
    per scenario (default 200; each scenario records its own number)."""
    reps = 40 if quick else 400
    audit_reps = audit_reps or (20 if quick else 200)
    t0 = time.perf_counter()
    cov_jobs = [(cell, n, r, seed) for cell in cells for n in SIZES for r in range(reps)]
    aud_jobs = [(s, r, seed) for s in scenarios for r in range(audit_reps)]
    cov = parallel_map(_coverage_job, cov_jobs, n_jobs=jobs)
    aud = parallel_map(_audit_job, aud_jobs, n_jobs=jobs)
    coverage: dict[str, Any] = {}
    for cell in cells:
        for n in SIZES:
            rows = [r for r in cov if r["cell"] == cell and r["n"] == n]
            entry: dict[str, Any] = {"truth": truth(cell)}
            for method in ("posterior", "bootstrap"):
                entry[method] = {q: _rate([r[method][q] for r in rows]) for q in rows[0][method]}
                entry[method]["median_width_r_inf"] = float(np.median([r[f"{method}_width_r_inf"] for r in rows]))
            coverage[f"{cell}/{n}"] = entry
    audit: dict[str, Any] = {}
    for scenario in scenarios:
        rows = [r for r in aud if r["scenario"] == scenario]
        audit[scenario] = {
            "n_traces": AUDIT_SCENARIOS[scenario][0], "corpora": len(rows),
            "raw_rejection": {k: _rate([r["raw_reject"][k] for r in rows if r["applicable"][k]])
                              for k in rows[0]["raw_reject"]},
            "layer_rejection": {k: _rate([r["layer_reject"][k] for r in rows]) for k in rows[0]["layer_reject"]},
            "withholds_something": _rate([r["withheld_any"] for r in rows]),
            "split_dependent": _rate([r["split_dependent"] for r in rows]),
            "decisions": {d: sum(r["decision"] == d for r in rows) for d in ("accept", "partial", "reject",
                                                                           "insufficient")},
        }
    return {"kind": "tracetochain.study", "study": "RN", "title": "Right numbers: coverage, size and power",
            "quick": quick, "seed": seed, "reps": reps, "audit_reps": audit_reps, "sizes": list(SIZES),
            "coverage": coverage, "audit": audit, "runtime_s": round(time.perf_counter() - t0, 1)}


def merge_archive(doc: dict[str, Any], archive: dict[str, Any]) -> dict[str, Any]:
    """``doc`` (some cells or scenarios re-run) completed with the archive's others, which the code change did not
    touch (same seed and replicate counts required); what was re-run and both runtimes are recorded."""
    for key in ("seed", "reps", "sizes") + (("audit_reps",) if doc["coverage"] else ()):
        if doc[key] != archive[key]:
            raise ValueError(f"cannot merge: {key} differs from the archive ({doc[key]!r} vs {archive[key]!r})")
    coverage = {k: doc["coverage"].get(k, v) for k, v in archive["coverage"].items()}
    audit = {k: doc["audit"].get(k, v) for k, v in archive["audit"].items()}
    rerun = sorted(set(archive.get("rerun", [])) | {k.split("/")[0] for k in doc["coverage"]} | set(doc["audit"]))
    return {**doc, "coverage": coverage, "audit": audit, "rerun": rerun, "audit_reps": archive["audit_reps"],
            "runtime_s_kept": archive.get("runtime_s_kept", archive["runtime_s"])}


def render(doc: dict[str, Any]) -> str:
    def pct(e: dict[str, Any]) -> str:
        return rate_text(e)

    lines = [f"# {doc['title']}", "",
             f"{doc['reps']} corpora per cell and size; 95 % intervals; coverage in % with its Wilson 95 % "
             f"interval (Monte Carlo error). Runtime {doc['runtime_s']} s"
             + (f" (re-run: {', '.join(doc['rerun'])}; the rest is kept from the run before, {doc['runtime_s_kept']} "
                "s, which the change did not touch)" if doc.get("rerun") else "") + ".", "",
             "| cell | n | R∞ posterior | R∞ bootstrap | R(10) posterior | R(10) bootstrap | pass^3 posterior | "
             "pass^3 bootstrap |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for key, e in doc["coverage"].items():
        cell, n = key.split("/")
        cells = []
        for q in ("r_inf", "r10", "pass3"):
            for m in ("posterior", "bootstrap"):
                cells.append(pct(e[m][q]) if q in e[m] else "—")
        lines.append(f"| {cell} | {n} | " + " | ".join(cells) + " |")
    lines += ["", f"Certificate: {doc['audit_reps']} corpora per scenario unless the table says otherwise; rejection "
              "rates in % (Wilson 95 %).", "",
              "| scenario | n | R∞ check | timing | order | trials | certificate withholds something |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for s, e in doc["audit"].items():
        row = [pct(e["raw_rejection"][k]) if e["raw_rejection"][k]["n"] else "— (not tested)"
               for k in ("r_inf", "timing", "order", "trials")]
        corpora = f" ({e['corpora']} corpora)" if "corpora" in e and e["corpora"] != doc["audit_reps"] else ""
        lines.append(f"| {s}{corpora} | {e['n_traces']} | " + " | ".join(row) + f" | {pct(e['withholds_something'])} |")
    lines += ["", "Layer rates are each layer's own test at 5 % (over the corpora where it could test); the "
              "certificate tests each output's own family — the layers it rests on, not-applicable layers left "
              "out — at level/L per layer (Bonferroni), so 'withholds something' is the rate of any output "
              "withheld. When tasks repeat the timing layer's p combines (Cauchy) the held-out KS test, the trials "
              "layer's dispersion test and the task-speed test of trace lengths. `null` has no task ids (the trials "
              "layer does not apply); `null-tasks` repeats every task 4 times with one chain for every task."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--cells", default=",".join(COVERAGE_CELLS), help="comma-separated coverage cells to run")
    ap.add_argument("--scenarios", default=",".join(AUDIT_SCENARIOS), help="comma-separated audit scenarios to run")
    ap.add_argument("--audit-reps", type=int, default=None, help="corpora per audit scenario (default 200)")
    args = ap.parse_args(argv)
    cells = tuple(c for c in args.cells.split(",") if c)
    scenarios = tuple(c for c in args.scenarios.split(",") if c)
    bad = sorted((set(cells) - set(COVERAGE_CELLS)) | (set(scenarios) - set(AUDIT_SCENARIOS)))
    if bad:
        ap.error(f"unknown cells or scenarios {bad}")
    doc = run(args.quick, args.seed, args.jobs, cells, scenarios, args.audit_reps)
    out = RESULTS / "quick" if args.quick else RESULTS
    if set(cells) != set(COVERAGE_CELLS) or set(scenarios) != set(AUDIT_SCENARIOS):
        doc = merge_archive(doc, json.loads((out / "RN.json").read_text()))
    out.mkdir(parents=True, exist_ok=True)
    (out / "RN.json").write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")
    (out / "RN.md").write_text(render(doc))
    print(render(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
