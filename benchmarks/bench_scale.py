"""Benchmark: partitioned Parquet → fitted chain, and → fitted + audited chain with intervals, on the local engine
and on a 2-worker Dask local cluster, from 10,000 to 10,000,000 traces.

Acceptance (issue 10): 10,000,000 traces (~300M steps) on a 2-worker local cluster complete without exceeding
8 GB total memory (driver + scheduler + workers).

Data: the generator of ``bench_fit.py`` (a seeded random 20-state chain, mean trace length 30 steps, 0.5% invalid
traces), cached in ``benchmarks/_data/`` (git-ignored): one Parquet file per size, sorted by (trace, step), in row
groups of 2^20 rows, so traces cross row-group boundaries (the partitioned reader hands each to the partition that
holds its first row). The 10M file is ~280 MB and takes ~2–3 min to generate once.

Tasks:

* ``fit`` = ingest + fit: ``fit_partitioned(path, engine=...)``;
* ``audit`` = ingest + fit + audit + uncertainty: ``audit_partitioned(path, engine=..., n_bootstrap=199,
  n_permutations=199, samples=200)``: one pass over the partitions, then the held-out certificate (KS with 199
  parametric-bootstrap refits, the order test with 199 permutation tables, R∞ and L∞ checks) and 200 Poisson
  bootstrap replicates behind the intervals. ``pass s`` (read, label, count every partition), ``layers s`` (the
  certificate) and ``intervals s`` (the ensemble) split its ``total s``.

Engines (each run in a fresh subprocess, medians over ``--repeats``):

* ``in-memory``: the single-process path, for reference: ``ChainEstimator().fit(TraceTable.read(path))`` (fit)
  or ``audit(table)`` + ``TraceBootstrap(samples=200)`` (audit; default sizes ≤ 100k);
* ``local``: the partitioned functions on the local engine (partitions one after the other, in process);
* ``dask-2``: the same on ``DaskEngine(n_workers=2, threads_per_worker=1)``: a ``LocalCluster`` with two worker
  processes; ``start s`` is the cluster start-up, not included in the task time.

Memory: a sampler thread in the child sums the resident set size (RSS) of the child and all its descendant
processes (nannies, workers) every 20 ms with psutil (the process list is rescanned every 0.5 s). ``peak total``
is the largest sum seen (RSS double-counts shared pages, so it errs high), with the largest driver-only and
workers-only sums beside it. ``CPU s`` is the user + system CPU time of the driver and all workers from engine
start to the end of the task, the sampler's own CPU time left out; it is steadier than wall time on a shared
machine (the 1-minute load average before and after each run is in the JSON). Every chain is compared with the
first run's chain of the same task and size: ``identical`` means equal JSON documents (and, for the audit, equal
certificates).

Usage::

    python benchmarks/bench_scale.py                                  # the issue's grid (~10 min)
    python benchmarks/bench_scale.py --tasks fit --sizes 1000000 --repeats 1
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
#: The audit task's settings: B of the KS bootstrap, of the permutation test, and of the Poisson bootstrap.
AUDIT = {"n_bootstrap": 199, "n_permutations": 199, "n_resamples": 200}
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
def _audit_figures(res: Any) -> dict[str, Any]:
    """Decision, KS p, R∞ interval, stage timings and a digest of the certificate (engine and partition count left
    out, so that every engine's certificate can be compared with the in-memory one)."""
    assert res.ensemble is not None and res.certificate is not None
    s = res.ensemble.stats("r_inf")
    cert_doc = res.certificate.to_dict()
    for key in ("engine", "n_partitions"):
        cert_doc["settings"].pop(key, None)
    return {"decision": res.certificate.decision, "p_ks": res.certificate.p_ks, "r_inf_interval": [s.lower, s.upper],
            "timings": res.timings,
            "certificate_sha256": hashlib.sha256(json.dumps(cert_doc, sort_keys=True).encode()).hexdigest()}


def child(path: str, engine_name: str, task: str = "fit") -> None:
    """One measurement in a fresh process; prints one JSON line."""
    import resource

    t_import = time.perf_counter()
    import tracetochain
    from tracetochain.engines import DaskEngine, LocalEngine
    from tracetochain.partitioned import audit_partitioned, fit_partitioned, plan_partitions

    import_s = time.perf_counter() - t_import
    load_before = os.getloadavg()[0]
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    n_partitions = len(plan_partitions(path, rows_per_partition=ROWS_PER_PARTITION))
    extra: dict[str, Any] = {}
    with MemorySampler() as mem:
        t0 = time.perf_counter()
        engine: Any = None
        if engine_name == "dask-2":
            engine = DaskEngine(n_workers=2, threads_per_worker=1, processes=True)
            _ = engine.client  # start the cluster now, so that start-up is timed apart
        elif engine_name == "local":
            engine = LocalEngine()
        t1 = time.perf_counter()
        if engine is None and task == "fit":  # in-memory reference
            table = tracetochain.TraceTable.read(path)
            chain = tracetochain.ChainEstimator(pseudocount=1.0).fit(table).fetch_model()
            n_traces = table.n_traces
            del table
        elif engine is None:  # in-memory reference: the same analysis on the table read whole
            table = tracetochain.TraceTable.read(path)
            res = tracetochain.analyze(table, n_bootstrap=AUDIT["n_bootstrap"], n_permutations=AUDIT["n_permutations"],
                                       intervals="bootstrap", samples=AUDIT["n_resamples"], seed=0)
            chain, n_traces = res.chain, table.n_traces
            extra = _audit_figures(res)
            del table
        elif task == "fit":
            chain = fit_partitioned(path, engine=engine, pseudocount=1.0, rows_per_partition=ROWS_PER_PARTITION)
            n_traces = sum(chain.metadata["n_traces"].values())
        else:
            res = audit_partitioned(path, engine=engine, rows_per_partition=ROWS_PER_PARTITION, **AUDIT)
            chain, n_traces = res.chain, res.ingest.n_traces
            extra = _audit_figures(res)
        t2 = time.perf_counter()
        mem.sample()  # the workers' last CPU figures, before they go
        if engine is not None:
            engine.close()
        t3 = time.perf_counter()
    ru = resource.getrusage(resource.RUSAGE_SELF)
    driver_cpu = (ru.ru_utime - cpu0.ru_utime) + (ru.ru_stime - cpu0.ru_stime) - mem.own_cpu_s
    doc = json.dumps(chain.to_dict(), sort_keys=True)
    print(json.dumps({
        "task": task,
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
        **extra,
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
def _engine_specs(spec: str) -> list[tuple[str, int, int | None]]:
    """'name' or 'name:LO-HI' (either bound may be empty) → (name, lo, hi) trace-count ranges."""
    out: list[tuple[str, int, int | None]] = []
    for item in spec.split(","):
        name, _, bounds = item.strip().partition(":")
        if name not in ("in-memory", "local", "dask-2"):
            raise SystemExit(f"unknown engine {name!r}")
        lo, _, hi = bounds.partition("-")
        out.append((name, int(lo) if lo else 0, int(hi) if hi else None))
    return out


def _measure(task: str, name: str, n: int, meta: dict[str, Any], path: Path, repeats: int) -> dict[str, Any]:
    print(f"# {task}: {n:,} traces ({meta['n_steps']:,} steps, {meta['file_mb']} MB), {name}: {repeats} run(s) …",
          file=sys.stderr, flush=True)
    runs = [_run(["--child", str(path), name, task]) for _ in range(repeats)]
    if any(r["n_traces"] != n for r in runs):
        raise RuntimeError(f"trace count mismatch: {[r['n_traces'] for r in runs]} vs {n}")
    res: dict[str, Any] = {
        "task": task, "engine": name, "n_traces": n, "n_steps": meta["n_steps"], "file_mb": meta["file_mb"],
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
        "r_inf": runs[0]["r_inf"], "true_r_inf": meta["true_r_inf"],
        "runs": runs,
    }
    if task == "audit":
        res["decision"] = runs[0]["decision"]
        res["p_ks"] = runs[0]["p_ks"]
        res["r_inf_interval"] = runs[0]["r_inf_interval"]
        for key in ("partitions", "audit", "intervals"):
            vals = [r["timings"][key] for r in runs if key in r["timings"]]
            res[f"{key}_s"] = median(vals) if vals else None
    print(f"#   {task} {res['fit_s']:.2f} s (start {res['start_s']:.2f} s), peak total {res['peak_total_mb']:.0f} MB",
          file=sys.stderr, flush=True)
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,100000,1000000,10000000", help="comma-separated trace counts")
    ap.add_argument("--tasks", default="fit,audit", help="fit (ingest + fit), audit (+ audit + uncertainty)")
    ap.add_argument("--fit-engines", default="in-memory:-1000000,local:-1000000,dask-2:1000000-",
                    help="engines of the fit task: in-memory, local, dask-2, each with an optional trace-count "
                         "range name:LO-HI")
    ap.add_argument("--audit-engines", default="in-memory:-100000,local:-1000000,dask-2:10000000-",
                    help="engines of the audit task (as --fit-engines)")
    ap.add_argument("--repeats", type=int, default=3, help="repeats below 10M traces (10M and above: 1)")
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--no-save", action="store_true", help="do not write benchmarks/results/bench_scale.json")
    ap.add_argument("--child", nargs="+", metavar="ARG", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0

    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    if any(t not in ("fit", "audit") for t in tasks):
        raise SystemExit(f"unknown task in {args.tasks!r}")
    specs = {"fit": _engine_specs(args.fit_engines), "audit": _engine_specs(args.audit_engines)}

    results: list[dict[str, Any]] = []
    t_all = time.perf_counter()
    for n in sizes:
        meta = generate(n, args.seed)
        path = data_path(n, args.seed)
        repeats = args.repeats if n < 10_000_000 else 1
        for task in tasks:
            reference: dict[str, str] = {}
            for name, lo, hi in specs[task]:
                if n < lo or (hi is not None and n > hi):
                    continue
                res = _measure(task, name, n, meta, path, repeats)
                # Every engine and repeat must give the same chain (and, partitioned, the same certificate).
                ref = reference.setdefault("chain", res["runs"][0]["chain_sha256"])
                ok = all(r["chain_sha256"] == ref for r in res["runs"])
                if task == "audit":
                    cref = reference.setdefault("cert", res["runs"][0]["certificate_sha256"])
                    ok = ok and all(r["certificate_sha256"] == cref for r in res["runs"])
                res["identical"] = ok
                results.append(res)

    def base(task: str, n: int) -> dict[str, Any] | None:
        return next((r for r in results if r["task"] == task and r["n_traces"] == n and r["engine"] == "local"),
                    None)

    for task in tasks:
        rows = []
        for r in (r for r in results if r["task"] == task):
            b = base(task, r["n_traces"])
            row = [r["engine"], f"{r['n_traces']:,}", f"{r['n_steps']:,}", str(r["n_partitions"]),
                   f"{r['start_s']:.2f}", f"{r['fit_s']:.2f}"]
            if task == "audit":
                row += [f"{r['partitions_s']:.1f}" if r.get("partitions_s") is not None else "–",
                        f"{r['audit_s']:.1f}" if r.get("audit_s") is not None else "–",
                        f"{r['intervals_s']:.1f}" if r.get("intervals_s") is not None else "–",
                        r["decision"], f"[{r['r_inf_interval'][0]:.4f}, {r['r_inf_interval'][1]:.4f}]"]
            row += [f"{r['n_steps'] / r['fit_s'] / 1e6:.1f}", f"{b['fit_s'] / r['fit_s']:.2f}×" if b else "–",
                    f"{r['cpu_s']:.1f}", f"{r['peak_total_mb']:.0f}", f"{r['peak_driver_mb']:.0f}",
                    f"{r['peak_others_mb']:.0f}", "yes" if r["identical"] else "NO"]
            rows.append(row)
        header = ["engine", "traces", "steps", "partitions", "start s", "fit s" if task == "fit" else "total s"]
        if task == "audit":
            header += ["pass s", "layers s", "intervals s", "decision", "R∞ 95% interval"]
        header += ["Msteps/s", "vs local", "CPU s", "peak total MB", "driver MB", "workers MB", "identical"]
        title = "ingest + fit" if task == "fit" else "ingest + fit + audit + uncertainty"
        print(f"\n### {title}\n")
        print(markdown_table(header, rows))
    acceptance = []
    for r in results:
        if r["engine"] == "dask-2" and r["n_traces"] >= 10_000_000:
            met = r["max_peak_total_mb"] < LIMIT_MB
            acceptance.append({"task": r["task"], "n_traces": r["n_traces"], "engine": "dask-2", "limit_mb": LIMIT_MB,
                               "peak_total_mb": r["max_peak_total_mb"], "seconds": r["fit_s"], "met": met})
            print(f"\nacceptance, {r['task']} of {r['n_traces']:,} traces on 2 Dask workers: completed in "
                  f"{r['fit_s']:.1f} s, peak total {r['max_peak_total_mb']:.0f} MB < {LIMIT_MB:.0f} MB: "
                  f"{'met' if met else 'MISSED'}")
    busy = max((r["max_loadavg"] for r in results), default=0.0)
    if busy > (os.cpu_count() or 1) + 0.5:
        print(f"\nnote: the machine was busy (1-min load average up to {busy:.1f} on {os.cpu_count()} CPUs): wall "
              f"times are inflated; CPU s is the steadier figure")
    total_s = time.perf_counter() - t_all
    print(f"\n(benchmark wall time {total_s / 60:.1f} min, data generation included)")
    if not args.no_save:
        out = write_results("bench_scale", {
            "benchmark": "bench_scale",
            "description": "partitioned Parquet -> fit_partitioned(pseudocount=1) (task fit) or audit_partitioned "
                           "(task audit: held-out certificate + Poisson-bootstrap intervals) on each engine "
                           "(in-memory: TraceTable.read + ChainEstimator, or audit() + TraceBootstrap); fresh "
                           "subprocess per run; peak total = sampled sum of RSS of the run's process and all its "
                           "descendants (Dask nannies and workers)",
            "acceptance": acceptance,
            "audit_settings": AUDIT,
            "repeats": args.repeats,
            "seed": args.seed,
            "rows_per_partition": ROWS_PER_PARTITION,
            "generator": {"script": "bench_fit.py", "data_version": DATA_VERSION, "row_group_rows": ROW_GROUP_ROWS},
            "wall_time_s": total_s,
            "machine": machine_info(),
            "results": results,
        })
        print(f"wrote {out.relative_to(Path.cwd()) if out.is_relative_to(Path.cwd()) else out}")
    return 0


if __name__ == "__main__":  # the guard Dask's worker processes need (they are spawned)
    raise SystemExit(main())
