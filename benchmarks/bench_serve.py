"""`tracetochain serve`: sustained OTLP/HTTP ingest rate and request latency, and the store choice.

Two measurements (see benchmarks/README.md):

* ``ingest`` — a real ``tracetochain serve`` process (store file on local disk) receives protobuf export requests
  from ``--senders`` concurrent clients (each like one agent's exporter: one request at a time, keep-alive), each
  request holding ``--traces-per-request`` traces of 5 spans (root + 4 steps, GenAI attributes and an evaluation
  event; ~500 spans, the SDK exporter's default batch is 512). Requests are encoded before the clock starts. The
  rate is acknowledged spans / wall time after a warm-up; latency is send → 200 per request (p50, p99); at the end
  the store must hold every span and every trace as an episode. Server CPU (user + system of the server process,
  from /proc) is reported twice: while the requests are sent ("server CPU s"), and until every trace is an
  episode ("to all assembled": decoding, commits, assembly and the live analysis — the cost of a span); the
  per-span figure ("server CPU µs/span", and its inverse "spans/s of server CPU") uses the latter.
* ``store`` — the embedded-store question alone: append batches of 500 span rows, one durable commit per batch,
  in SQLite (WAL, ``synchronous=FULL`` and ``NORMAL``) and, when installed, DuckDB (its default durability).

    python benchmarks/bench_serve.py [--durability full,normal] [--requests 200] [--senders 4] [--no-save]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DATA_DIR, machine_info, markdown_table, write_results

PB = {"Content-Type": "application/x-protobuf"}


def _kv(key: str, value: str) -> Any:
    from opentelemetry.proto.common.v1 import common_pb2

    return common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(string_value=value))


def make_request(rng: random.Random, n_traces: int) -> bytes:
    """One ExportTraceServiceRequest: ``n_traces`` traces of a root span and 4 steps (llm, 2 tools, llm)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.common.v1 import common_pb2

    req = ExportTraceServiceRequest()
    block = req.resource_spans.add()
    block.resource.attributes.append(_kv("service.name", "bench-agent"))
    spans = block.scope_spans.add().spans
    t0 = time.time_ns()
    for _ in range(n_traces):
        tid, root = rng.randbytes(16), rng.randbytes(8)
        for j, (op, tool) in enumerate((("chat", None), ("execute_tool", "search"), ("execute_tool", "sql_exec"),
                                        ("chat", None))):
            s = spans.add(trace_id=tid, span_id=rng.randbytes(8), parent_span_id=root, name=f"{op} {tool or 'gpt'}",
                          start_time_unix_nano=t0 + 1000 * j, end_time_unix_nano=t0 + 1000 * j + 900)
            s.attributes.append(_kv("gen_ai.operation.name", op))
            if tool:
                s.attributes.append(_kv("gen_ai.tool.name", tool))
                s.attributes.append(_kv("gen_ai.tool.call.arguments", '{"q": "select 1"}'))
                if rng.random() < 0.1:
                    s.attributes.append(_kv("error.type", "db_error"))
                    s.status.code = 2
            else:
                s.attributes.append(common_pb2.KeyValue(key="gen_ai.usage.input_tokens",
                                                        value=common_pb2.AnyValue(int_value=rng.randint(50, 900))))
        s = spans.add(trace_id=tid, span_id=root, name="invoke_agent bench", start_time_unix_nano=t0,
                      end_time_unix_nano=t0 + 5000)
        s.attributes.append(_kv("gen_ai.operation.name", "invoke_agent"))
        ev = s.events.add(name="gen_ai.evaluation.result", time_unix_nano=t0 + 5000)
        ev.attributes.append(_kv("gen_ai.evaluation.score.label", "pass" if rng.random() < 0.8 else "fail"))
    return req.SerializeToString()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bench_ingest(durability: str, n_requests: int, senders: int, traces_per_request: int, warmup: int,
                 seed: int, rate: float | None = None) -> dict[str, Any]:
    """Closed loop (``rate=None``: every sender sends its next request as soon as the last is acknowledged — the
    most the server sustains) or open loop (requests start on a fixed schedule of ``rate`` spans/s shared by the
    senders — the latency an agent fleet of that size sees)."""
    import httpx

    rng = random.Random(seed)
    bodies = [make_request(rng, traces_per_request) for _ in range(n_requests + warmup)]
    spans_per_request = traces_per_request * 5
    workdir = Path(tempfile.mkdtemp(prefix="serve-", dir=DATA_DIR))
    store = workdir / "live.db"
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tracetochain", "serve", "--store", str(store), "--port",
                             str(port), "--window", "1000", "--settle", "0.5", "--durability", durability,
                             "--no-stdout-alerts"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                with urllib.request.urlopen(url + "/healthz", timeout=1):
                    break
            except OSError:
                time.sleep(0.1)
        with httpx.Client(timeout=60) as c:  # warm-up: imports, first commits
            for body in bodies[:warmup]:
                c.post(url + "/v1/traces", content=body, headers=PB).raise_for_status()
        _wait_assembled(url, warmup * traces_per_request, 60)  # the warm-up's assembly is not measured
        latencies: list[float] = []
        lock = threading.Lock()
        todo = list(range(warmup, warmup + n_requests))
        interval = spans_per_request / rate if rate else 0.0  # seconds between request starts, all senders
        start_at = time.perf_counter() + 0.2

        def sender() -> None:
            with httpx.Client(timeout=60) as client:
                while True:
                    with lock:
                        if not todo:
                            return
                        i = todo.pop()
                    if rate:  # the i-th request's slot in the schedule; latency counts from the slot
                        slot = start_at + (i - warmup) * interval
                        pause = slot - time.perf_counter()
                        if pause > 0:
                            time.sleep(pause)
                    t = time.perf_counter()
                    r = client.post(url + "/v1/traces", content=bodies[i], headers=PB)
                    dt = time.perf_counter() - t
                    r.raise_for_status()
                    with lock:
                        latencies.append(dt)

        cpu0 = _proc_cpu(proc.pid)
        t0 = time.perf_counter()
        threads = [threading.Thread(target=sender) for _ in range(senders)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        wall = time.perf_counter() - t0
        server_cpu = _proc_cpu(proc.pid) - cpu0
        n_traces = (n_requests + warmup) * traces_per_request
        doc = _wait_assembled(url, n_traces, 120)
        assembled = time.perf_counter()
        # Everything the server spent on these spans: decoding, commits, assembly, the live analysis (the polls of
        # /api/live add a few ms each).
        server_cpu_total = _proc_cpu(proc.pid) - cpu0
        spans = n_requests * spans_per_request
        lat = sorted(latencies)
        return {
            "mode": f"open loop, {rate:,.0f} spans/s offered" if rate else "closed loop (as fast as acknowledged)",
            "offered_spans_per_s": rate, "durability": durability, "senders": senders, "requests": n_requests,
            "spans_per_request": spans_per_request, "spans": n_requests * spans_per_request,
            "wall_s": wall, "spans_per_s": n_requests * spans_per_request / wall,
            "latency_p50_ms": 1000 * statistics.median(lat), "latency_p99_ms": 1000 * lat[int(0.99 * (len(lat) - 1))],
            "latency_max_ms": 1000 * lat[-1], "server_cpu_s": server_cpu,
            "server_cpu_total_s": server_cpu_total, "server_cpu_us_per_span": 1e6 * server_cpu_total / spans,
            "spans_per_server_cpu_s": spans / server_cpu_total if server_cpu_total > 0 else None,
            "episodes": doc["n_episodes"], "expected_episodes": n_traces,
            "all_assembled": doc["n_episodes"] == n_traces, "assembly_lag_s": assembled - t0 - wall,
            "store_mb": sum(f.stat().st_size for f in workdir.iterdir()) / 2**20,
            "load_average_1m": os.getloadavg()[0],  # other work on the machine skews every figure
        }
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(workdir, ignore_errors=True)


def _wait_assembled(url: str, n_traces: int, timeout: float) -> dict[str, Any]:
    """Poll /api/live (every 0.25 s) until ``n_traces`` episodes are decided, or ``timeout`` seconds."""
    import json

    deadline = time.time() + timeout
    while True:
        with urllib.request.urlopen(url + "/api/live", timeout=30) as r:
            doc: dict[str, Any] = json.loads(r.read())
        if doc["n_episodes"] >= n_traces or time.time() > deadline:
            return doc
        time.sleep(0.25)


def _proc_cpu(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench_store(n_batches: int, rows: int, seed: int) -> list[dict[str, Any]]:
    """Durable appends of ``rows``-row batches: SQLite WAL (FULL / NORMAL) and DuckDB when installed."""
    rng = random.Random(seed)
    batches = [[(rng.randbytes(16).hex(), rng.randbytes(8).hex(), None, time.time(), "x" * 180) for _ in range(rows)]
               for _ in range(n_batches)]
    out = []
    for sync in ("FULL", "NORMAL"):
        with tempfile.TemporaryDirectory(dir=DATA_DIR) as d:
            con = sqlite3.connect(Path(d) / "s.db", isolation_level=None)
            con.execute("PRAGMA journal_mode=WAL")
            con.execute(f"PRAGMA synchronous={sync}")
            con.execute("CREATE TABLE spans (trace_id TEXT, span_id TEXT, parent_id TEXT, received REAL, facts TEXT, "
                        "PRIMARY KEY (trace_id, span_id)) WITHOUT ROWID")
            lat = []
            t0 = time.perf_counter()
            for b in batches:
                t = time.perf_counter()
                con.execute("BEGIN")
                con.executemany("INSERT OR IGNORE INTO spans VALUES (?, ?, ?, ?, ?)", b)
                con.execute("COMMIT")
                lat.append(time.perf_counter() - t)
            wall = time.perf_counter() - t0
            con.close()
        out.append({"store": f"SQLite WAL, synchronous={sync}", "rows_per_s": n_batches * rows / wall,
                    "commit_p50_ms": 1000 * statistics.median(lat), "commit_p99_ms": 1000 * sorted(lat)[
                        int(0.99 * (len(lat) - 1))]})
    try:
        import duckdb
    except ImportError:
        out.append({"store": "DuckDB", "skipped": "duckdb is not installed"})
        return out
    with tempfile.TemporaryDirectory(dir=DATA_DIR) as d:
        con = duckdb.connect(str(Path(d) / "s.duckdb"))
        con.execute("CREATE TABLE spans (trace_id VARCHAR, span_id VARCHAR, parent_id VARCHAR, received DOUBLE, "
                    "facts VARCHAR, PRIMARY KEY (trace_id, span_id))")
        import pyarrow as pa

        lat = []
        t0 = time.perf_counter()
        for b in batches:
            t = time.perf_counter()
            frame = pa.table({k: [r[i] for r in b] for i, k in enumerate(
                ("trace_id", "span_id", "parent_id", "received", "facts"))},
                schema=pa.schema([("trace_id", pa.string()), ("span_id", pa.string()), ("parent_id", pa.string()),
                                  ("received", pa.float64()), ("facts", pa.string())]))
            con.execute("BEGIN TRANSACTION")
            con.register("batch", frame)  # a bulk insert: DuckDB's executemany goes row by row
            con.execute("INSERT OR IGNORE INTO spans SELECT * FROM batch")
            con.unregister("batch")
            con.execute("COMMIT")
            lat.append(time.perf_counter() - t)
        wall = time.perf_counter() - t0
        con.close()
    out.append({"store": f"DuckDB {duckdb.__version__}", "rows_per_s": n_batches * rows / wall,
                "commit_p50_ms": 1000 * statistics.median(lat),
                "commit_p99_ms": 1000 * sorted(lat)[int(0.99 * (len(lat) - 1))]})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--durability", default="full,normal")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--senders", type=int, default=4)
    ap.add_argument("--rate", type=float, default=5000.0, help="offered spans/s of the open-loop run (0: skip it)")
    ap.add_argument("--traces-per-request", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--store-batches", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    ingest = []
    for d in (d.strip() for d in args.durability.split(",") if d.strip()):
        ingest.append(bench_ingest(d, args.requests, args.senders, args.traces_per_request, args.warmup, args.seed))
        if args.rate:
            ingest.append(bench_ingest(d, args.requests, args.senders, args.traces_per_request, args.warmup,
                                       args.seed, rate=args.rate))
    print(markdown_table(
        ["mode", "durability", "senders", "spans", "spans/s", "p50 ms", "p99 ms", "server CPU s",
         "server CPU s to all assembled", "server CPU µs/span", "spans/s of server CPU", "all assembled"],
        [[r["mode"], r["durability"], str(r["senders"]), f"{r['spans']:,}", f"{r['spans_per_s']:,.0f}",
          f"{r['latency_p50_ms']:.1f}", f"{r['latency_p99_ms']:.1f}", f"{r['server_cpu_s']:.1f}",
          f"{r['server_cpu_total_s']:.1f}",
          f"{r['server_cpu_us_per_span']:.0f}", f"{r['spans_per_server_cpu_s'] or 0:,.0f}",
          str(r["all_assembled"])] for r in ingest]))
    store = bench_store(args.store_batches, 500, args.seed)
    print()
    print(markdown_table(["store", "rows/s", "commit p50 ms", "commit p99 ms"],
                         [[r["store"], f"{r['rows_per_s']:,.0f}" if "rows_per_s" in r else r.get("skipped", ""),
                           f"{r['commit_p50_ms']:.1f}" if "commit_p50_ms" in r else "",
                           f"{r['commit_p99_ms']:.1f}" if "commit_p99_ms" in r else ""] for r in store]))
    if not args.no_save:
        path = write_results("serve", {"machine": machine_info(), "settings": vars(args), "ingest": ingest,
                                       "store": store})
        print(f"\nwritten to {path}")
    return 0 if all(r["all_assembled"] for r in ingest) else 1


if __name__ == "__main__":
    sys.exit(main())
