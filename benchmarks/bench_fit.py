"""Benchmark: Parquet long table → TraceTable → fitted AbsorbingChain, at 10k / 100k / 1M traces.

Target (issue): 1,000,000 traces (~30M steps) from Parquet to a fitted chain in under 30 s and under 4 GB peak
RSS on 2 cores.

The synthetic data come from a seeded random 20-state absorbing chain whose exits give a mean trace length
of about 30 steps. Each size is generated once (vectorised numpy, written with pyarrow in row groups) and
cached under ``benchmarks/_data/``. Every measurement runs in a fresh subprocess so that its peak RSS
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``) is its own; the reported figures are medians over the repeats.
Data generation also runs in a subprocess: on Linux a child's ``ru_maxrss`` starts from the RSS high-water mark
of the process it was spawned from (it survives ``execve``), so the parent must stay small.

Usage::

    python benchmarks/bench_fit.py                       # sizes 10000,100000,1000000, 3 repeats
    python benchmarks/bench_fit.py --sizes 10000 --repeats 1
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DATA_DIR, machine_info, markdown_table, median, write_results

N_STATES = 20
MEAN_LENGTH = 30.0
MAX_STEPS = 250  # traces still running after this many steps are written as censored
OUTCOMES = ("success", "failure", "censored", "invalid")
INVALID_RATE = 0.005  # share of traces marked "invalid" (infrastructure errors; excluded by the fit)
CHUNK_TRACES = 1 << 17  # traces simulated (and written) per batch
ROW_GROUP_ROWS = 1 << 20
DATA_VERSION = 1  # bump when the generator changes, so stale cached files are not reused


# ------------------------------------------------------------------------------------------------ the chain
def make_chain(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A random 20-state absorbing chain (Q, r_success, r_failure, pi0) with mean absorption time MEAN_LENGTH.

    Rows of Q are sparse-ish Dirichlet(0.3) draws; per-state exit weights vary by a factor ~6 and are scaled
    (bisection on the fundamental matrix) so that π0 N 1 = MEAN_LENGTH steps.
    """
    rng = np.random.default_rng(seed)
    m = N_STATES
    base = rng.dirichlet(np.full(m, 0.3), size=m)
    exit_w = rng.uniform(0.5, 3.0, size=m)
    success_share = rng.uniform(0.2, 0.9, size=m)
    pi0 = rng.dirichlet(np.full(m, 0.5))

    def mean_steps(c: float) -> float:
        e = np.clip(c * exit_w, 0.0, 0.95)
        Q = base * (1.0 - e)[:, None]
        return float(pi0 @ np.linalg.solve(np.eye(m) - Q, np.ones(m)))

    lo, hi = 1e-6, 0.3  # mean_steps decreases in c
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if mean_steps(mid) > MEAN_LENGTH:
            lo = mid
        else:
            hi = mid
    e = np.clip(hi * exit_w, 0.0, 0.95)
    Q = base * (1.0 - e)[:, None]
    return Q, e * success_share, e * (1.0 - success_share), pi0


def chain_cdfs(seed: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The cumulative row distributions of ``make_chain(seed)`` over next state 0..m−1, m = success, m + 1 = failure,
    the cumulative π0, and m."""
    Q, rs, rf, pi0 = make_chain(seed)
    cum = np.cumsum(np.column_stack([Q, rs, rf]), axis=1)
    cum[:, -1] = 1.0
    cum_pi0 = np.cumsum(pi0)
    cum_pi0[-1] = 1.0
    return cum, cum_pi0, Q.shape[0]


def simulate_chunk(cum: np.ndarray, cum_pi0: np.ndarray, n: int,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n`` traces, all stepped together: (n × MAX_STEPS) int8 states (−1 after the end) and outcome codes
    (0 success, 1 failure, 2 censored: still running after MAX_STEPS steps)."""
    m = cum.shape[0]
    states = np.full((n, MAX_STEPS), -1, dtype=np.int8)
    cur = np.searchsorted(cum_pi0, rng.random(n), side="right").astype(np.int64)
    outcome = np.full(n, 2, dtype=np.int8)  # censored unless an exit is drawn
    active = np.arange(n)
    for t in range(MAX_STEPS):
        if active.size == 0:
            break
        states[active, t] = cur
        u = rng.random(active.size)
        nxt = (u[:, None] >= cum[cur]).sum(axis=1)
        outcome[active[nxt == m]] = 0
        outcome[active[nxt == m + 1]] = 1
        keep = nxt < m
        active, cur = active[keep], nxt[keep]
    return states, outcome


# ---------------------------------------------------------------------------------------------------- data
def data_path(n_traces: int, seed: int) -> Path:
    return DATA_DIR / f"traces_v{DATA_VERSION}_n{n_traces}_seed{seed}.parquet"


def generate(n_traces: int, seed: int) -> dict[str, Any]:
    """Write the cached Parquet file for ``n_traces`` (unless it exists) and return its description."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = data_path(n_traces, seed)
    meta_path = path.with_suffix(".json")
    if path.exists() and meta_path.exists():
        return dict(json.loads(meta_path.read_text()))

    DATA_DIR.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    Q, rs, _, pi0 = make_chain(seed)
    cum, cum_pi0, m = chain_cdfs(seed)
    state_names = pa.array([f"state_{i:02d}" for i in range(m)])
    outcome_names = pa.array(OUTCOMES)
    width = max(7, len(str(n_traces - 1)))

    children = np.random.SeedSequence([seed, n_traces]).spawn((n_traces + CHUNK_TRACES - 1) // CHUNK_TRACES)
    tmp = path.with_suffix(".parquet.tmp")
    schema = pa.schema([("trace_id", pa.string()), ("step_idx", pa.int64()), ("state", pa.string()),
                        ("outcome", pa.string())])
    n_steps = 0
    outcome_totals = np.zeros(4, np.int64)
    with pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
        for chunk_no, ss in enumerate(children):
            rng = np.random.default_rng(ss)
            first = chunk_no * CHUNK_TRACES
            n = min(CHUNK_TRACES, n_traces - first)
            states, outcome = simulate_chunk(cum, cum_pi0, n, rng)
            outcome[rng.random(n) < INVALID_RATE] = 3
            outcome_totals += np.bincount(outcome, minlength=4)

            rows, steps = np.nonzero(states >= 0)  # row-major: sorted by (trace, step)
            flat_states = states[rows, steps].astype(np.int32)
            ids = pa.array(np.char.add("t", np.char.zfill(np.arange(first, first + n).astype(str), width)))
            table = pa.table(
                {
                    "trace_id": ids.take(pa.array(rows, pa.int32())),
                    "step_idx": pa.array(steps.astype(np.int64)),
                    "state": state_names.take(pa.array(flat_states)),
                    "outcome": outcome_names.take(pa.array(outcome[rows].astype(np.int32))),
                },
                schema=schema,
            )
            writer.write_table(table, row_group_size=ROW_GROUP_ROWS)
            n_steps += int(rows.size)
    os.replace(tmp, path)
    meta = {
        "n_traces": n_traces,
        "n_steps": n_steps,
        "mean_length": n_steps / n_traces,
        "outcomes": dict(zip(OUTCOMES, outcome_totals.tolist(), strict=True)),
        "seed": seed,
        "n_states": m,
        "true_r_inf": float(pi0 @ np.linalg.solve(np.eye(m) - Q, rs)),
        "file_mb": round(path.stat().st_size / 1e6, 1),
        "generate_s": round(time.perf_counter() - t0, 2),
    }
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    return meta


# ---------------------------------------------------------------------------------------------------- child
def _vm_hwm_mb() -> float | None:
    """Peak RSS of this process image from /proc (not inherited across exec), as a cross-check of ru_maxrss."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def child(path: str, profile: str | None) -> None:
    """One measurement in a fresh process: read, fit, total; prints one JSON line."""
    import resource

    t_import = time.perf_counter()
    import tracetochain

    import_s = time.perf_counter() - t_import
    rss_base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    prof = None
    if profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    t0 = time.perf_counter()
    table = tracetochain.TraceTable.read(path)
    t1 = time.perf_counter()
    rss_read = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    chain = tracetochain.ChainEstimator(pseudocount=1.0).fit(table).fetch_model()
    t2 = time.perf_counter()
    if prof is not None:
        prof.disable()
        prof.dump_stats(profile)
    ru = resource.getrusage(resource.RUSAGE_SELF)
    rss_peak = ru.ru_maxrss  # KiB on Linux
    out = {
        "read_s": t1 - t0,
        "fit_s": t2 - t1,
        "total_s": t2 - t0,
        "import_s": import_s,
        "rss_base_mb": rss_base / 1024,
        "rss_after_read_mb": rss_read / 1024,
        "rss_peak_mb": rss_peak / 1024,
        "vm_hwm_mb": _vm_hwm_mb(),
        "cpu_user_s": ru.ru_utime,  # whole process, imports included
        "cpu_sys_s": ru.ru_stime,
        "minor_page_faults": ru.ru_minflt,
        "n_traces": table.n_traces,
        "n_steps": table.n_steps,
        "n_states": chain.n_states,
        "r_inf": chain.r_inf,
    }
    print(json.dumps(out))


def _run(args: list[str]) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"child {args} failed ({proc.returncode}):\n{proc.stderr}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def run_child(path: Path, profile: str | None = None) -> dict[str, Any]:
    return _run(["--child", str(path), *(["--profile", profile] if profile else [])])


# ---------------------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,100000,1000000", help="comma-separated trace counts")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--no-save", action="store_true", help="do not write benchmarks/results/bench_fit.json")
    ap.add_argument("--profile", metavar="FILE",
                    help="(with --child) write cProfile stats of read+fit to FILE")
    ap.add_argument("--child", metavar="PARQUET", help=argparse.SUPPRESS)
    ap.add_argument("--generate", metavar="N", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, args.profile)
        return 0
    if args.generate:
        print(json.dumps(generate(args.generate, args.seed)))
        return 0

    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    results = []
    for n in sizes:
        meta = _run(["--generate", str(n), "--seed", str(args.seed)])  # keeps this process small
        print(f"# {n:,} traces, {meta['n_steps']:,} steps ({meta['file_mb']} MB Parquet, "
              f"mean length {meta['mean_length']:.1f}); running {args.repeats} fresh processes …",
              file=sys.stderr, flush=True)
        runs = [run_child(data_path(n, args.seed)) for _ in range(args.repeats)]
        r0 = runs[0]
        if r0["n_steps"] != meta["n_steps"] or r0["n_traces"] != n:
            raise RuntimeError(f"size mismatch: read {r0['n_traces']} traces / {r0['n_steps']} steps, "
                               f"generated {n} / {meta['n_steps']}")
        res = {
            "n_traces": n,
            "n_steps": meta["n_steps"],
            "file_mb": meta["file_mb"],
            "outcomes": meta["outcomes"],
            "read_s": median([r["read_s"] for r in runs]),
            "fit_s": median([r["fit_s"] for r in runs]),
            "total_s": median([r["total_s"] for r in runs]),
            "import_s": median([r["import_s"] for r in runs]),
            "rss_base_mb": median([r["rss_base_mb"] for r in runs]),
            "rss_after_read_mb": median([r["rss_after_read_mb"] for r in runs]),
            "rss_peak_mb": median([r["rss_peak_mb"] for r in runs]),
            "vm_hwm_mb": median([r["vm_hwm_mb"] or 0.0 for r in runs]),
            "cpu_user_s": median([r["cpu_user_s"] for r in runs]),
            "cpu_sys_s": median([r["cpu_sys_s"] for r in runs]),
            "true_r_inf": meta["true_r_inf"],
            "fitted_r_inf": r0["r_inf"],
            "runs": runs,
        }
        results.append(res)
        print(f"#   read {res['read_s']:.2f} s, fit {res['fit_s']:.2f} s, total {res['total_s']:.2f} s, "
              f"peak {res['rss_peak_mb']:.0f} MB", file=sys.stderr, flush=True)

    header = ["traces", "steps", "read s", "fit s", "total s", "peak RSS MB"]
    rows = [[f"{r['n_traces']:,}", f"{r['n_steps']:,}", f"{r['read_s']:.3f}", f"{r['fit_s']:.3f}",
             f"{r['total_s']:.3f}", f"{r['rss_peak_mb']:.0f}"] for r in results]
    print(markdown_table(header, rows))
    big = [r for r in results if r["n_traces"] >= 1_000_000]
    for r in big:
        ok_t, ok_m = r["total_s"] < 30.0, r["rss_peak_mb"] < 4096.0
        print(f"\ntarget at {r['n_traces']:,} traces: total {r['total_s']:.1f} s < 30 s: "
              f"{'met' if ok_t else 'MISSED'}; peak {r['rss_peak_mb']:.0f} MB < 4096 MB: "
              f"{'met' if ok_m else 'MISSED'}")
    if not args.no_save:
        path = write_results("bench_fit", {
            "benchmark": "bench_fit",
            "description": "Parquet long table -> TraceTable.read -> ChainEstimator(pseudocount=1).fit; "
                           "medians over fresh subprocesses; peak RSS = ru_maxrss of the child (includes "
                           "imports)",
            "target": {"n_traces": 1_000_000, "total_s": 30.0, "rss_peak_mb": 4096},
            "repeats": args.repeats,
            "seed": args.seed,
            "generator": {"n_states": N_STATES, "mean_length": MEAN_LENGTH, "max_steps": MAX_STEPS,
                          "invalid_rate": INVALID_RATE, "row_group_rows": ROW_GROUP_ROWS,
                          "data_version": DATA_VERSION},
            "machine": machine_info(),
            "results": results,
        })
        print(f"\nwrote {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
