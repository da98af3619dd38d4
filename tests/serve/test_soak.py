"""Soak (slow tier, localhost only): several senders post valid and hostile traffic to a real `tracetochain serve`
while it is killed (SIGKILL) and restarted twice. Nothing acknowledged is lost or stored twice, the server's RSS
stays under the bound the README states, the dashboard always answers, and no alert is sent twice.

Bounded: the server is killed at 1/3 and 2/3 of ``TRACETOCHAIN_SOAK_SECONDS`` (default 90); each sender posts
``TRACETOCHAIN_SOAK_REQUESTS`` (default 30) batches of five episodes, or stops at ``2 × SECONDS + 180`` s on a slow
machine; ``TRACETOCHAIN_SOAK_SECONDS=600 TRACETOCHAIN_SOAK_REQUESTS=400`` is the 10-minute run. Hostile shapes
used: an oversized body, a declared length over the limit, bad JSON, a protobuf that does not parse, a wrong
content type and encoding, a span without ids. Shapes of the second attack report that the receiver still
mishandled when this test was written (timestamps far out of range or in the future, hundreds of distinct state
labels, JSON bodies that expand enormously in memory, multi-member gzip bodies, floods of open traces, slow
senders) are fixed separately and left out of this run (see docs/live.md, "Soak test").
"""

from __future__ import annotations

import http.server
import json
import os
import random
import re
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from serve_helpers import ServeProcess, free_port

import tracetochain.instrument as tt

SECONDS = float(os.environ.get("TRACETOCHAIN_SOAK_SECONDS", "90"))
REQUESTS = int(os.environ.get("TRACETOCHAIN_SOAK_REQUESTS", "30"))
#: However slow the machine, the run stops sending after this many seconds.
HARD_CAP = 2 * SECONDS + 180
#: The README's stated bound on the server's resident memory under this load.
RSS_BOUND_MB = 600
MAX_REQUEST_MB = 1
RULES = """
min_traces = 20

[[rule]]
name = "sql failures"
when = "P(sql_exec -> failure) > 0.3"
severity = "critical"
"""
PB = "application/x-protobuf"


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class Sender(threading.Thread):
    """Posts batches of instrumented episodes of one agent; retries a request until it is acknowledged (as an
    exporter does) and records what was acknowledged."""

    def __init__(self, name: str, url: list[str], deadline: float, seed: int, p_fail: float) -> None:
        super().__init__(daemon=True)
        self.service, self.url, self.deadline, self.rng, self.p_fail = name, url, deadline, random.Random(seed), p_fail
        self.acked: set[tuple[str, str]] = set()
        self.pending: set[tuple[str, str]] = set()
        self.traces: set[str] = set()
        self.errors = 0

    def batch(self) -> bytes:
        exporter = InMemorySpanExporter()
        provider = TracerProvider(resource=Resource.create({SERVICE_NAME: self.service}))
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        for _ in range(5):
            with tt.episode("agent", provider=provider) as ep:
                with tt.step("plan", kind="llm", provider=provider):
                    pass
                fail = self.rng.random() < self.p_fail
                with tt.step("sql_exec", provider=provider) as s:
                    if fail:
                        s.fail("db_error")
                if self.rng.random() < 0.9:  # one in ten never gets a verdict: kept as unlabelled
                    ep.verdict(not fail)
        provider.shutdown()
        spans = exporter.get_finished_spans()
        self.pending = {(format(s.context.trace_id, "032x"), format(s.context.span_id, "016x")) for s in spans}
        return encode_spans(spans).SerializeToString()

    def run(self) -> None:
        for _ in range(REQUESTS):
            if time.time() > self.deadline:
                return
            body = self.batch()
            while time.time() < self.deadline:
                try:
                    req = urllib.request.Request(self.url[0] + "/v1/traces", data=body, method="POST",
                                                 headers={"Content-Type": PB})
                    with urllib.request.urlopen(req, timeout=30) as r:
                        if r.status == 200:
                            self.acked |= self.pending
                            self.traces |= {t for t, _ in self.pending}
                            break
                except (urllib.error.URLError, OSError):
                    self.errors += 1
                time.sleep(0.3)
            time.sleep(self.rng.uniform(0.05, 0.3))


class Hostile(threading.Thread):
    """Malformed and oversized requests; each must be refused with a 4xx (or hit a closed port while down)."""

    def __init__(self, url: list[str], done: threading.Event) -> None:
        super().__init__(daemon=True)
        self.url, self.done = url, done
        self.statuses: Counter[int] = Counter()

    def shapes(self) -> list[tuple[bytes, dict[str, str]]]:
        big = b"x" * (MAX_REQUEST_MB * 1024 * 1024 + 10)
        no_ids = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "s"}]}]}]}).encode()
        return [(big, {"Content-Type": PB}), (b"{not json", {"Content-Type": "application/json"}),
                (b"\xff\x00\x13garbage", {"Content-Type": PB}), (b"a", {"Content-Type": "text/plain"}),
                (b"abc", {"Content-Type": PB, "Content-Encoding": "br"}),
                (no_ids, {"Content-Type": "application/json"})]

    def run(self) -> None:
        shapes = self.shapes()
        i = 0
        while not self.done.is_set():
            body, headers = shapes[i % len(shapes)]
            i += 1
            try:
                req = urllib.request.Request(self.url[0] + "/v1/traces", data=body, method="POST", headers=headers)
                with urllib.request.urlopen(req, timeout=10) as r:
                    self.statuses[r.status] += 1
            except urllib.error.HTTPError as exc:
                self.statuses[exc.code] += 1
            except (urllib.error.URLError, OSError):
                self.statuses[0] += 1  # down (being restarted), or the socket closed on an oversized body
            time.sleep(0.2)


class Watcher(threading.Thread):
    """Loads the dashboard and its document while the server is up; records the slowest answer and failures."""

    def __init__(self, url: list[str], up: threading.Event, done: threading.Event, pid: list[int]) -> None:
        super().__init__(daemon=True)
        self.url, self.up, self.done, self.pid = url, up, done, pid
        self.failures: list[str] = []
        self.slowest = 0.0
        self.rss: list[float] = []

    def run(self) -> None:
        while not self.done.is_set():
            if self.up.is_set():
                for path in ("/", "/api/live", "/metrics"):
                    t0 = time.time()
                    try:
                        with urllib.request.urlopen(self.url[0] + path, timeout=10) as r:
                            r.read()
                    except (urllib.error.URLError, OSError) as exc:
                        if self.up.is_set():  # not a restart in progress
                            self.failures.append(f"{path}: {exc}")
                    self.slowest = max(self.slowest, time.time() - t0) if self.up.is_set() else self.slowest
                try:
                    self.rss.append(rss_mb(self.pid[0]))
                except OSError:
                    pass
            time.sleep(1.0)


@pytest.mark.slow
def test_soak_kill_restart_twice(tmp_path: Path) -> None:
    got: list[dict] = []

    class Hook(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            got.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    hook = http.server.HTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    (tmp_path / "rules.toml").write_text(RULES, encoding="utf-8")
    port = free_port()
    store = tmp_path / "live.db"
    args = ("--window", "100", "--settle", "0.3", "--verdict-timeout", "3", "--min-traces", "50", "--rules",
            str(tmp_path / "rules.toml"), "--webhook", f"http://127.0.0.1:{hook.server_address[1]}/hook",
            "--max-request-mb", str(MAX_REQUEST_MB), "--durability", "normal")
    started = time.time()
    proc = ServeProcess(store, *args, port=port).start()
    url, pid, up, done = [proc.url], [proc.proc.pid], threading.Event(), threading.Event()
    up.set()
    senders = [Sender(f"agent-{i}", url, started + HARD_CAP, seed=i, p_fail=0.05 if i else 0.5) for i in range(3)]
    hostile = Hostile(url, done)
    watcher = Watcher(url, up, done, pid)
    for t in (*senders, hostile, watcher):
        t.start()
    for k in (1, 2):  # kill -9 and restart, twice
        time.sleep(max(0.0, started + k * SECONDS / 3 - time.time()))
        up.clear()
        proc.kill()
        proc = ServeProcess(store, *args, port=port).start()
        pid[0] = proc.proc.pid
        up.set()
    for s in senders:
        s.join(max(1.0, started + HARD_CAP - time.time()))
    done.set()
    hostile.join(30)
    watcher.join(30)
    acked = set().union(*(s.acked for s in senders))
    traces = set().union(*(s.traces for s in senders))
    doc = proc.wait_for(lambda d: d["status"]["open_traces"] == 0 and d["n_episodes"] >= len(traces)
                        and (d["total"] or {}).get("n_traces") == len(traces), timeout=120)
    time.sleep(2.0)  # a last refresh: alerts of the last windows
    alerts = proc.get_json("/api/alerts")["alerts"]
    with urllib.request.urlopen(proc.url + "/metrics", timeout=30) as r:
        metrics = r.read().decode()
    proc.stop()
    hook.shutdown()
    from tracetochain.serve._store import Store

    db = Store(store)
    stored = db.span_ids()
    episodes = db.episodes()
    # Nothing acknowledged lost, nothing stored twice.
    assert acked <= set(stored) and len(stored) == len(set(stored))
    assert len({e.episode_id for e in episodes}) == len(episodes) == len(traces)
    assert doc["status"]["counters"].get("episodes_dropped", 0) == 0
    assert doc["total"] is not None, proc.log.read_text()[-3000:]
    assert doc["total"]["outcomes"]["unlabelled"] > 0  # the episodes without a verdict were kept
    assert set(db.groups()) == {"agent-0", "agent-1", "agent-2"}
    # Hostile requests were refused with a 4xx (0: the server was down), never a 5xx or a 200.
    assert hostile.statuses and all(code == 0 or 400 <= code < 500 for code in hostile.statuses), hostile.statuses
    # Memory and responsiveness.
    assert watcher.rss and max(watcher.rss) < RSS_BOUND_MB, max(watcher.rss)
    assert not watcher.failures and watcher.slowest < 10.0, (watcher.failures, watcher.slowest)
    # No alert re-sent: each listed once, sent once to stdout and to the webhook, counted once.
    keys = [a["key"] for a in alerts]
    assert keys and len(keys) == len(set(keys))
    lines = [json.loads(x) for x in proc.out.read_text().splitlines() if x.strip().startswith("{")]
    # stdout: at most once (a kill between the commit and the write loses the line, never doubles it); the webhook:
    # exactly once (a delivery a kill interrupted is finished by the next start).
    printed = Counter(x["key"] for x in lines)
    assert set(printed) <= set(keys) and all(n == 1 for n in printed.values())
    assert Counter(x["key"] for x in got) == Counter(set(keys))
    total = sum(float(v) for v in re.findall(r"^tracetochain_alerts_total\{[^}]*\} (\S+)$", metrics, re.M))
    assert total == len(keys)
    print(f"\nsoak: {len(traces)} episodes, {len(acked)} spans acknowledged, hostile {dict(hostile.statuses)}, "
          f"max RSS {max(watcher.rss):.0f} MB, slowest dashboard answer {watcher.slowest:.2f} s, {len(keys)} alerts, "
          f"{time.time() - started:.0f} s")
    assert all(len(s.traces) == 5 * REQUESTS for s in senders)  # every batch was acknowledged in the end
    assert time.time() - started < HARD_CAP + 300  # bounded
