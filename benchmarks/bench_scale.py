"""Benchmark: partitioned Parquet → fitted chain on the local engine and on a 2-worker Dask local cluster.

Acceptance (issue 10): 10,000,000 traces (~300M steps) on a 2-worker local cluster complete without exceeding
8 GB total memory (driver + scheduler + workers).

Data: the generator of ``bench_fit.py`` (a seeded random 20-state chain, mean trace length 30 steps, 0.5% invalid
traces), cached in ``benchmarks/_data/`` (git-ignored): one Parquet file per size, sorted by (trace, step), in row
groups of 2^20 rows, so traces cross row-group boundaries (the partitioned reader hands each to the partition that
holds its first row). The 10M file is ~280 MB and takes ~2–3 min to generate once.

Runs (each in a fresh subprocess, medians over ``--repeats``):

* ``in-memory``: ``ChainEstimator().fit(TraceTable.read(path))``, the single-process path, for reference (1M);
* ``local``: ``fit_partitioned(path)`` on the local engine (partitions one after the other, in process);
* ``dask-2``: ``fit_partitioned(path, engine=DaskEngine(n_workers=2, threads_per_worker=1))``: a ``LocalCluster``
  with two worker processes; ``start s`` is the cluster start-up, not included in ``fit s``.

Memory: a sampler thread in the child sums the resident set size (RSS) of the child and all its descendant
processes (nannies, workers) every 20 ms with psutil (the process list is rescanned every 0.5 s). ``peak total``
is the largest sum seen (RSS double-counts shared pages, so it errs high), with the largest driver-only and
workers-only sums beside it. ``CPU s`` is the user + system CPU time of the driver and all workers from engine
start to the end of the fit, the sampler's own CPU time left out; it is steadier than wall time on a shared machine
(the 1-minute load average before and after each run is in the JSON). Every chain is compared with the first run's
chain at the same size: ``identical`` means equal JSON documents.

Usage::

    python benchmarks/bench_scale.py                          # 1M and 10M traces, 3 repeats
    python benchmarks/bench_scale.py --sizes 1000000 --repeats 1
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_info, markdown_table, median, write_results
from bench_fit import DATA_VERSION, ROW_GROUP_ROWS, data_path

LIMIT_MB = 8192.0  # acceptance: total memory of the 10M-trace run on the 2-worker cluster
ROWS_PER_PARTITION = 1 << 20
SAMPLE_S = 0.02


# ---------------------------------------------------------------------------------------------------- memory
class MemorySampler:
    """Peak of the summed RSS of this process and its descendants (sampled), split driver / others.

    The list of descendants is refreshed every ``refresh`` seconds (scanning /proc is the costly part); their RSS
    is read every ``interval``. The sampler's own CPU time is measured so that it can be left out of the figures.
    """

    def __init__(self, interval: float = SAMPLE_S, refresh: float = 0.5) -> None:
        import psutil

        self._psutil = psutil
        self._me = psutil.Process()
        self.interval, self.refresh = interval, refresh
        self.peak_total = self.peak_driver = self.peak_others = 0
        self.n_processes = 1
        self.own_cpu_s = 0.0
        self._cpu: dict[int, float] = {}  # pid → latest user + system CPU seconds
        self._children: list[Any] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self, *, rescan: bool = True) -> None:
        if rescan:
            self._children = self._me.children(recursive=True)
            for child in self._children:
                try:
                    t = child.cpu_times()
                    self._cpu[child.pid] = t.user + t.system
                except (self._psutil.NoSuchProcess, self._psutil.AccessDenied):
                    pass
        driver = self._me.memory_info().rss
        others = 0
        for child in self._children:
            try:
                others += child.memory_info().rss
            except (self._psutil.NoSuchProcess, self._psutil.AccessDenied):
                pass
        self.peak_total = max(self.peak_total, driver + others)
        self.peak_driver = max(self.peak_driver, driver)
        self.peak_others = max(self.peak_others, others)
        self.n_processes = max(self.n_processes, 1 + len(self._children))

    @property
    def children_cpu_s(self) -> float:
        """CPU seconds used by the descendants (as last seen, at most ``refresh`` s before they ended)."""
        return sum(self._cpu.values())

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            rescan = now - last >= self.refresh
            if rescan:
                last = now
            self.sample(rescan=rescan)
            self._stop.wait(self.interval)
        self.own_cpu_s = time.thread_time()

    def __enter__(self) -> MemorySampler:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


# ---------------------------------------------------------------------------------------------------- child
def child(path: str, engine_name: str) -> None:
    """One measurement in a fresh process; prints one JSON line."""
    import resource

    t_import = time.perf_counter()
    import tracetochain
    from tracetochain.engines import DaskEngine, LocalEngine
    from tracetochain.partitioned import fit_partitioned, plan_partitions

    import_s = time.perf_counter() - t_import
    load_before = os.getloadavg()[0]
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    n_partitions = len(plan_partitions(path, rows_per_partition=ROWS_PER_PARTITION))
    with MemorySampler() as mem:
        t0 = time.perf_counter()
        engine: Any = None
        if engine_name == "dask-2":
            engine = DaskEngine(n_workers=2, threads_per_worker=1, processes=True)
            _ = engine.client  # start the cluster now, so that start-up is timed apart
        elif engine_name == "local":
            engine = LocalEngine()
        t1 = time.perf_counter()
        if engine is None:  # in-memory reference
            table = tracetochain.TraceTable.read(path)
            chain = tracetochain.ChainEstimator(pseudocount=1.0).fit(table).fetch_model()
            n_traces = table.n_traces
            del table
        else:
            chain = fit_partitioned(path, engine=engine, pseudocount=1.0, rows_per_partition=ROWS_PER_PARTITION)
            n_traces = sum(chain.metadata["n_traces"].values())
        t2 = time.perf_counter()
        mem.sample()  # the workers' last CPU figures, before they go
        if engine is not None:
            engine.close()
        t3 = time.perf_counter()
    ru = resource.getrusage(resource.RUSAGE_SELF)
    driver_cpu = (ru.ru_utime - cpu0.ru_utime) + (ru.ru_stime - cpu0.ru_stime) - mem.own_cpu_s
    doc = json.dumps(chain.to_dict(), sort_keys=True)
    print(json.dumps({
        "engine": engine_name,
        "import_s": import_s,
        "start_s": t1 - t0,
        "fit_s": t2 - t1,
        "close_s": t3 - t2,
        "n_partitions": n_partitions if engine is not None else 1,
        "n_traces": n_traces,
        "peak_total_mb": mem.peak_total / 2**20,
        "peak_driver_mb": mem.peak_driver / 2**20,
        "peak_others_mb": mem.peak_others / 2**20,
        "n_processes": mem.n_processes,
        "driver_ru_maxrss_mb": ru.ru_maxrss / 1024,
        "cpu_s": driver_cpu + mem.children_cpu_s,  # driver + workers, user + system, start to close
        "driver_cpu_s": driver_cpu,
        "loadavg_1min_before": load_before,
        "loadavg_1min_after": os.getloadavg()[0],
        "sampler_cpu_s": mem.own_cpu_s,
        "r_inf": chain.r_inf,
        "chain_sha256": hashlib.sha256(doc.encode()).hexdigest(),
    }))


def _run(args: list[str]) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"child {args} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def generate(n: int, seed: int) -> dict[str, Any]:
    """The cached bench_fit data set (generated in a subprocess, so this process stays small)."""
    bench_fit = Path(__file__).resolve().parent / "bench_fit.py"
    proc = subprocess.run([sys.executable, str(bench_fit), "--generate", str(n), "--seed", str(seed)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"data generation failed:\n{proc.stderr[-4000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


# ---------------------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000000,10000000", help="comma-separated trace counts")
    ap.add_argument("--engines", default="in-memory:1000000,local,dask-2",
                    help="engines to run: in-memory, local, dask-2; 'name:N' limits one to N traces at most")
    ap.add_argument("--repeats", type=int, default=3, help="repeats below 10M traces (10M and above: 1)")
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--no-save", action="store_true", help="do not write benchmarks/results/bench_scale.json")
    ap.add_argument("--child", nargs=2, metavar=("PARQUET", "ENGINE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0

    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    engines: list[tuple[str, int | None]] = []
    for spec in args.engines.split(","):
        name, _, cap = spec.strip().partition(":")
        if name not in ("in-memory", "local", "dask-2"):
            raise SystemExit(f"unknown engine {name!r}")
        engines.append((name, int(cap) if cap else None))

    results: list[dict[str, Any]] = []
    t_all = time.perf_counter()
    for n in sizes:
        meta = generate(n, args.seed)
        path = data_path(n, args.seed)
        repeats = args.repeats if n < 10_000_000 else 1
        reference: str | None = None
        for name, cap in engines:
            if cap is not None and n > cap:
                continue
            print(f"# {n:,} traces ({meta['n_steps']:,} steps, {meta['file_mb']} MB), {name}: {repeats} run(s) …",
                  file=sys.stderr, flush=True)
            runs = [_run(["--child", str(path), name]) for _ in range(repeats)]
            if any(r["n_traces"] != n for r in runs):
                raise RuntimeError(f"trace count mismatch: {[r['n_traces'] for r in runs]} vs {n}")
            reference = reference or runs[0]["chain_sha256"]
            res = {
                "engine": name, "n_traces": n, "n_steps": meta["n_steps"], "file_mb": meta["file_mb"],
                "n_partitions": runs[0]["n_partitions"],
                "start_s": median([r["start_s"] for r in runs]),
                "fit_s": median([r["fit_s"] for r in runs]),
                "close_s": median([r["close_s"] for r in runs]),
                "peak_total_mb": median([r["peak_total_mb"] for r in runs]),
                "peak_driver_mb": median([r["peak_driver_mb"] for r in runs]),
                "peak_others_mb": median([r["peak_others_mb"] for r in runs]),
                "max_peak_total_mb": max(r["peak_total_mb"] for r in runs),
                "cpu_s": median([r["cpu_s"] for r in runs]),
                "max_loadavg": max(max(r["loadavg_1min_before"], r["loadavg_1min_after"]) for r in runs),
                "n_processes": runs[0]["n_processes"],
                "identical_chain": all(r["chain_sha256"] == reference for r in runs),
                "r_inf": runs[0]["r_inf"], "true_r_inf": meta["true_r_inf"],
                "runs": runs,
            }
            results.append(res)
            print(f"#   fit {res['fit_s']:.2f} s (start {res['start_s']:.2f} s), peak total "
                  f"{res['peak_total_mb']:.0f} MB, identical chain: {res['identical_chain']}",
                  file=sys.stderr, flush=True)

    def base(n: int) -> dict[str, Any] | None:
        return next((r for r in results if r["n_traces"] == n and r["engine"] == "local"), None)

    header = ["engine", "traces", "steps", "partitions", "start s", "fit s", "Msteps/s", "vs local", "CPU s",
              "peak total MB", "driver MB", "workers MB", "identical"]
    rows = []
    for r in results:
        b = base(r["n_traces"])
        rows.append([r["engine"], f"{r['n_traces']:,}", f"{r['n_steps']:,}", str(r["n_partitions"]),
                     f"{r['start_s']:.2f}", f"{r['fit_s']:.2f}", f"{r['n_steps'] / r['fit_s'] / 1e6:.1f}",
                     f"{b['fit_s'] / r['fit_s']:.2f}×" if b else "–", f"{r['cpu_s']:.1f}", f"{r['peak_total_mb']:.0f}",
                     f"{r['peak_driver_mb']:.0f}", f"{r['peak_others_mb']:.0f}",
                     "yes" if r["identical_chain"] else "NO"])
    print(markdown_table(header, rows))
    acceptance = None
    big = [r for r in results if r["engine"] == "dask-2" and r["n_traces"] >= 10_000_000]
    for r in big:
        met = r["max_peak_total_mb"] < LIMIT_MB
        acceptance = {"n_traces": r["n_traces"], "engine": "dask-2", "limit_mb": LIMIT_MB,
                      "peak_total_mb": r["max_peak_total_mb"], "fit_s": r["fit_s"], "met": met}
        print(f"\nacceptance at {r['n_traces']:,} traces on 2 Dask workers: completed in {r['fit_s']:.1f} s, "
              f"peak total {r['max_peak_total_mb']:.0f} MB < {LIMIT_MB:.0f} MB: {'met' if met else 'MISSED'}")
    busy = max((r["max_loadavg"] for r in results), default=0.0)
    if busy > (os.cpu_count() or 1) + 0.5:
        print(f"\nnote: the machine was busy (1-min load average up to {busy:.1f} on {os.cpu_count()} CPUs): wall "
              f"times are inflated; CPU s is the steadier figure")
    total_s = time.perf_counter() - t_all
    print(f"\n(benchmark wall time {total_s / 60:.1f} min, data generation included)")
    if not args.no_save:
        path = write_results("bench_scale", {
            "benchmark": "bench_scale",
            "description": "partitioned Parquet -> fit_partitioned(pseudocount=1) on each engine (in-memory: "
                           "TraceTable.read + ChainEstimator); fresh subprocess per run; peak total = sampled sum of "
                           "RSS of the run's process and all its descendants (Dask nannies and workers)",
            "acceptance": acceptance,
            "repeats": args.repeats,
            "seed": args.seed,
            "rows_per_partition": ROWS_PER_PARTITION,
            "generator": {"script": "bench_fit.py", "data_version": DATA_VERSION, "row_group_rows": ROW_GROUP_ROWS},
            "wall_time_s": total_s,
            "machine": machine_info(),
            "results": results,
        })
        print(f"wrote {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}")
    return 0


if __name__ == "__main__":  # the guard Dask's worker processes need (they are spawned)
    raise SystemExit(main())
