"""Kill -9 during ingest, restart: every span acknowledged with a 200 is in the store, none twice, and every trace
becomes exactly one episode once the sender has re-sent what was not acknowledged (as OTLP exporters do)."""

from __future__ import annotations

import random
import sqlite3
import threading
import time
from pathlib import Path

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1 import common_pb2

PROTOBUF = {"Content-Type": "application/x-protobuf"}


def _kv(key: str, value: str) -> common_pb2.KeyValue:
    return common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(string_value=value))


def make_batch(rng: random.Random, n_traces: int) -> tuple[bytes, list[tuple[str, str]]]:
    """One export request of ``n_traces`` complete traces (root + 3 tool steps + a verdict event)."""
    req = ExportTraceServiceRequest()
    spans = req.resource_spans.add().scope_spans.add().spans
    ids: list[tuple[str, str]] = []
    t0 = 1_767_000_000_000_000_000
    for _ in range(n_traces):
        tid, root = rng.randbytes(16), rng.randbytes(8)
        for j in range(3):
            sid = rng.randbytes(8)
            s = spans.add(trace_id=tid, span_id=sid, parent_span_id=root, name="execute_tool",
                          start_time_unix_nano=t0 + 10 * j, end_time_unix_nano=t0 + 10 * j + 5)
            s.attributes.extend([_kv("gen_ai.operation.name", "execute_tool"), _kv("gen_ai.tool.name", f"t{j}")])
            ids.append((tid.hex(), sid.hex()))
        s = spans.add(trace_id=tid, span_id=root, name="invoke_agent", start_time_unix_nano=t0,
                      end_time_unix_nano=t0 + 100)
        s.attributes.append(_kv("gen_ai.operation.name", "invoke_agent"))
        ev = s.events.add(name="gen_ai.evaluation.result")
        ev.attributes.append(_kv("gen_ai.evaluation.score.label", rng.choice(["pass", "fail"])))
        ids.append((tid.hex(), root.hex()))
    return req.SerializeToString(), ids


@pytest.mark.slow
def test_kill_9_loses_no_acknowledged_span(serve_process, tmp_path: Path) -> None:
    store = tmp_path / "live.db"
    proc = serve_process("--window", "100", "--settle", "0.1", "--no-stdout-alerts", store=store)
    rng = random.Random(3)
    batches = [make_batch(rng, 20) for _ in range(60)]
    acked: list[int] = []
    errors: list[int] = []

    def send(url: str, which: list[int]) -> None:
        with httpx.Client(timeout=10) as client:
            for i in which:
                try:
                    r = client.post(url + "/v1/traces", content=batches[i][0], headers=PROTOBUF)
                except httpx.HTTPError:
                    errors.append(i)
                    continue
                (acked if r.status_code == 200 else errors).append(i)

    sender = threading.Thread(target=send, args=(proc.url, list(range(len(batches)))))
    sender.start()
    while len(acked) < 15:
        time.sleep(0.01)
    proc.kill()  # SIGKILL in the middle of the stream
    sender.join(60)
    assert 15 <= len(acked) < len(batches), "the kill should land mid-stream"
    assert errors, "requests after the kill fail"

    # Every acknowledged span is on disk right after the kill (read the file directly, no server).
    con = sqlite3.connect(store)
    stored = set(con.execute("SELECT trace_id, span_id FROM spans"))
    con.close()
    for i in acked:
        missing = [s for s in batches[i][1] if s not in stored]
        assert not missing, f"batch {i} was acknowledged but {len(missing)} spans are missing"

    # Restart on the same store; the sender re-sends everything that was not acknowledged, plus one
    # acknowledged batch again (a retry whose 200 was lost): nothing is counted twice.
    again = serve_process("--window", "100", "--settle", "0.1", "--no-stdout-alerts", store=store,
                          port=proc.port)
    resend = [*sorted(set(range(len(batches))) - set(acked)), acked[0]]
    acked.clear()
    send(again.url, resend)
    assert len(acked) == len(resend)
    n_traces = 20 * len(batches)
    doc = again.wait_for(lambda d: d["n_episodes"] >= n_traces and d["status"]["open_traces"] == 0, timeout=60)
    assert doc["n_episodes"] == n_traces
    again.stop()
    con = sqlite3.connect(store)
    n_spans, n_distinct = con.execute(
        "SELECT COUNT(*), COUNT(DISTINCT trace_id || ':' || span_id) FROM spans").fetchone()
    n_eps, n_eps_distinct = con.execute("SELECT COUNT(*), COUNT(DISTINCT episode_id) FROM episodes").fetchone()
    con.close()
    assert n_spans == n_distinct == 4 * n_traces
    assert n_eps == n_eps_distinct == n_traces


@pytest.mark.slow
def test_sigterm_is_graceful(serve_process, tmp_path: Path) -> None:
    """SIGTERM while a sender streams: the server finishes the requests in flight, commits, and exits 0."""
    store = tmp_path / "live.db"
    proc = serve_process("--window", "100", "--settle", "0.1", "--no-stdout-alerts", store=store)
    rng = random.Random(5)
    batches = [make_batch(rng, 10) for _ in range(40)]
    acked: list[int] = []

    def send() -> None:
        with httpx.Client(timeout=10) as client:
            for i, (body, _) in enumerate(batches):
                try:
                    if client.post(proc.url + "/v1/traces", content=body, headers=PROTOBUF).status_code == 200:
                        acked.append(i)
                except httpx.HTTPError:
                    return

    sender = threading.Thread(target=send)
    sender.start()
    while len(acked) < 10:
        time.sleep(0.01)
    assert proc.stop() == 0
    sender.join(30)
    con = sqlite3.connect(store)
    stored = set(con.execute("SELECT trace_id, span_id FROM spans"))
    con.close()
    assert all(s in stored for i in acked for s in batches[i][1])
