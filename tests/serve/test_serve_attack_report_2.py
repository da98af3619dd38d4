"""Hostile input to the live service: every request ends in a clear refusal (4xx/503 with a reason, counted) or a
right answer; nothing crashes, freezes the analysis, loses acknowledged spans or grows memory without bound.

One test (or a few) per finding of the second attack pass, named by its id (N1…N27); each reproduces the attack
in-process on 127.0.0.1 and is bounded in time.
"""

from __future__ import annotations

import gzip
import json
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from test_service import PB, agent_episode, json_body, proto_body, record_spans

from tracetochain.serve import (
    IngestSettings,
    LiveService,
    RulesFileError,
    ServeConfig,
    StoreError,
    WindowSpec,
    create_app,
    load_rules,
)
from tracetochain.serve._decode import BadRequest, DecodeGate, decode_cost, decompress
from tracetochain.serve._live import OTHER_STATE, LiveAnalysis
from tracetochain.serve._store import EpisodeRow, WriteBatch, apply_batch, export_store

J = {"Content-Type": "application/json"}
INGEST, READ = "ingest-token-0123456789", "read-token-0123456789ab"


def make_service(tmp_path: Path, **kw) -> LiveService:
    ingest = kw.pop("ingest", IngestSettings(settle=0.0, tick=0.02))
    cfg = ServeConfig(store=kw.pop("store", tmp_path / "live.db"), window=kw.pop("window", WindowSpec("count", 10)),
                      alerts_to_stdout=False, ingest=ingest, refresh=0.05, samples=200, **kw)
    return LiveService(cfg)


def otlp_episode(tid: int, start_ns: int | str, *, outcome: str = "success", states=("plan",)) -> list[dict]:
    """One episode as OTLP JSON spans: an agent root with an evaluation event and one child per state."""
    trace = f"{tid:032x}"
    root = {"traceId": trace, "spanId": f"{tid * 16 + 1:016x}", "name": "agent", "startTimeUnixNano": str(start_ns),
            "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}}],
            "events": [{"name": "gen_ai.evaluation.result", "attributes": [
                {"key": "gen_ai.evaluation.score.label", "value": {"stringValue": outcome}}]}]}
    out = [root]
    for i, s in enumerate(states):
        out.append({"traceId": trace, "spanId": f"{tid * 16 + 2 + i:016x}", "parentSpanId": root["spanId"],
                    "name": s, "startTimeUnixNano": str(start_ns if isinstance(start_ns, str) else start_ns + i + 1),
                    "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                                   {"key": "tracetochain.state", "value": {"stringValue": s}}]})
    return out


def doc_of(spans: list[dict]) -> bytes:
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}).encode()


def wait(client: TestClient, predicate, headers=None, timeout: float = 20.0) -> dict:
    deadline = time.time() + timeout
    while True:
        doc = client.get("/api/live", headers=headers or {}).json()
        if predicate(doc) or time.time() > deadline:
            assert predicate(doc), (doc.get("status"), doc.get("health"))
            return doc
        time.sleep(0.05)


# ----------------------------------------------------------------------------------------------------- N1, N3
def test_n1_span_time_1e30_is_refused_with_a_reason(tmp_path: Path) -> None:
    svc = make_service(tmp_path)
    with TestClient(create_app(svc), base_url="http://127.0.0.1") as client:
        r = client.post("/v1/traces", content=doc_of(otlp_episode(1, "1e30")), headers=J)
        assert r.status_code == 400 and r.json()["reason"] == "time"
        assert "2200" in r.json()["message"]
        now = time.time_ns()
        assert client.post("/v1/traces", content=doc_of(otlp_episode(2, now)), headers=J).status_code == 200
        doc = wait(client, lambda d: d["n_episodes"] == 1)
        assert doc["status"]["counters"]["rejected_time"] == 1
        assert client.get("/healthz").json() == {"status": "ok"}


def test_n1_a_stored_absurd_time_neither_freezes_the_analysis_nor_blocks_restart(tmp_path: Path) -> None:
    """A store written before span times were checked holds an episode dated 10^21 s: the server starts, the
    episode counts in the window of its decision time, and the analysis keeps refreshing."""
    svc = make_service(tmp_path, window=WindowSpec("time", 300.0))
    with TestClient(create_app(svc), base_url="http://127.0.0.1") as client:
        now = time.time_ns()
        for i in range(3):
            assert client.post("/v1/traces", content=doc_of(otlp_episode(10 + i, now)), headers=J).status_code == 200
        wait(client, lambda d: d["n_episodes"] == 3)
    with sqlite3.connect(tmp_path / "live.db") as con:
        con.execute("UPDATE episodes SET t_start = 1e21 WHERE seq = 1")
    svc2 = make_service(tmp_path, window=WindowSpec("time", 300.0))
    with TestClient(create_app(svc2), base_url="http://127.0.0.1") as client:
        doc = wait(client, lambda d: (d["total"] or {}).get("n_traces") == 3)
        assert all(w["label"].startswith("20") for w in doc["series"])
        assert svc2.analysis_error is None
        assert client.get("/traces/" + svc2.store.episodes(after_seq=0, limit=1)[0].episode_id).status_code == 200


def test_n3_a_future_episode_does_not_become_the_current_window() -> None:
    t0 = 1_767_225_600.0
    clock = [t0 + 10]
    live = LiveAnalysis(WindowSpec("time", 300.0), clock=lambda: clock[0], min_traces=1)
    rows = [EpisodeRow(i + 1, f"e{i}", f"e{i}", t0 + 5, t0 + 1, "success", ("a",)) for i in range(30)]
    rows.append(EpisodeRow(31, "late", "late", t0 + 5, t0 + 20 * 3600, "failure", ("a",)))  # 20 h ahead: allowed skew
    rows += [EpisodeRow(32 + i, f"f{i}", f"f{i}", t0 + 5, t0 + 2, "success", ("a",)) for i in range(30)]
    live.add_episodes(rows)
    assert live.latest_key() == int(t0 // 300)
    assert live.counts_over(1).n_total == 60
    doc = live.snapshot()
    assert doc["current"]["n_traces"] == 60 and doc["current_key"] == int(t0 // 300)
    assert not next(w for w in doc["series"] if w["key"] == int(t0 // 300))["complete"]
    # Beyond a day ahead (or in 2501), a stored time is not trusted: the episode counts when it was decided.
    far = EpisodeRow(99, "far", "far", t0 + 5, t0 + 475 * 365 * 86400, "success", ("a",))
    assert live.window_key(far, 0) == int(t0 // 300)


def test_n3_a_span_dated_in_2501_is_refused(tmp_path: Path) -> None:
    svc = make_service(tmp_path)
    with TestClient(create_app(svc), base_url="http://127.0.0.1") as client:
        future = int((time.time() + 475 * 365 * 86400) * 1e9)
        r = client.post("/v1/traces", content=doc_of(otlp_episode(3, future)), headers=J)
        assert r.status_code == 400 and r.json()["reason"] == "time"
        week = int((time.time() + 7 * 86400) * 1e9)
        r = client.post("/v1/traces", content=doc_of(otlp_episode(6, week)), headers=J)
        assert r.status_code == 400 and r.json()["reason"] == "time" and "ahead" in r.json()["message"]
        r = client.post("/v1/traces", content=doc_of(otlp_episode(4, 5)), headers=J)  # 5 ns after 1970
        assert r.status_code == 200  # plausible epoch (tests and replays use small times)


# ----------------------------------------------------------------------------------------------------- N2
def test_n2_many_states_are_merged_and_the_refresh_stays_bounded() -> None:
    live = LiveAnalysis(WindowSpec("count", 10_000), max_states=20, samples=200, window_samples=100)
    rows = [EpisodeRow(i + 1, f"e{i}", f"e{i}", 1.0, None, "success" if i % 2 else "failure", ("plan", f"tool_{i}"))
            for i in range(1000)]
    live.add_episodes(rows)
    t = time.monotonic()
    doc = live.snapshot()
    assert time.monotonic() - t < 60
    names = [s["name"] for s in doc["current"]["states"]]
    assert len(names) == 20 and OTHER_STATE in names and "plan" in names
    assert doc["current"]["n_traces"] == 1000
    assert any("1,001 distinct states" in r for r in doc["degraded"])
    # The merged chain is the chain of the merged counts: all traffic is accounted for.
    edges_from_plan = sum(e["count"] for e in doc["current"]["edges"] if e["from"] == "plan")
    assert edges_from_plan == 1000


def test_n2_draws_are_scaled_to_the_budget(monkeypatch) -> None:
    monkeypatch.setenv("TRACETOCHAIN_MAX_MEMORY_MB", "100")
    live = LiveAnalysis(WindowSpec("count", 10), max_states=2000)
    assert live.draws_for(20, 1000) == 1000
    assert live.draws_for(100, 1000) == 216  # the work bound: 1,000 × (60 / 100)³
    assert live.draws_for(500, 1000) == 0
    assert live._notes


def test_n2_health_and_live_document_show_a_failing_refresh(tmp_path: Path, monkeypatch) -> None:
    svc = make_service(tmp_path)
    with TestClient(create_app(svc), base_url="http://127.0.0.1") as client:
        def broken() -> dict:
            raise MemoryError("Unable to allocate 2.99 GiB")

        monkeypatch.setattr(svc.live, "snapshot", broken)
        svc._refresh_guarded()
        health = client.get("/healthz").json()
        assert health["status"] == "degraded" and "MemoryError" in health["reasons"][0]
        assert client.get("/api/live").json()["health"]["status"] == "degraded"


# ----------------------------------------------------------------------------------------------------- N4
def test_n4_foreign_host_and_cross_site_posts_are_refused(tmp_path: Path) -> None:
    svc = make_service(tmp_path)
    with TestClient(create_app(svc), base_url="http://127.0.0.1") as client:
        r = client.get("/api/live", headers={"Host": "attacker.example:4318"})
        assert r.status_code == 421 and r.json()["reason"] == "host"
        assert client.get("/api/live", headers={"Host": "localhost:4318"}).status_code == 200
        assert client.get("/api/live", headers={"Host": "[::1]:4318"}).status_code == 200
        verdict = json.dumps({"trace_id": "0000000000000000000000000000abcd", "outcome": "failure"})
        r = client.post("/v1/verdicts", content=verdict, headers={"Content-Type": "text/plain"})
        assert r.status_code == 415
        r = client.post("/v1/verdicts", content="trace_id=x", headers={
            "Content-Type": "application/x-www-form-urlencoded"})
        assert r.status_code == 415
        r = client.post("/v1/verdicts", content=verdict, headers={**J, "Origin": "http://attacker.example"})
        assert r.status_code == 403 and r.json()["reason"] == "cross_origin"
        r = client.post("/v1/verdicts", content=verdict, headers={**J, "Sec-Fetch-Site": "cross-site"})
        assert r.status_code == 403
        r = client.post("/v1/traces", content=doc_of(otlp_episode(5, time.time_ns())),
                        headers={**J, "Origin": "null"})
        assert r.status_code == 403
        r = client.post("/v1/verdicts", content=verdict, headers=J)  # a client (no Origin): accepted
        assert r.status_code == 200 and r.json() == {"accepted": 1}
        assert client.get("/healthz", headers={"Host": "probe.internal"}).status_code == 200


def test_n4_allow_host_names_the_proxy(tmp_path: Path) -> None:
    svc = make_service(tmp_path, allowed_hosts=("tt.example.org",))
    with TestClient(create_app(svc), base_url="http://127.0.0.1") as client:
        assert client.get("/api/live", headers={"Host": "tt.example.org"}).status_code == 200
        assert client.get("/api/live", headers={"Host": "other.example.org"}).status_code == 421


# ----------------------------------------------------------------------------------------------------- N5
@pytest.mark.slow
def test_n5_json_amplification_is_refused_before_parsing(tmp_path: Path) -> None:
    n = (64 * 1024 * 1024 - 40) // 3
    bomb = gzip.compress(b'{"resourceSpans":[' + b"{}," * (n - 1) + b"{}]}", 9)
    assert len(bomb) < 200_000
    svc = make_service(tmp_path)
    with TestClient(create_app(svc), base_url="http://127.0.0.1") as client:
        t = time.monotonic()
        r = client.post("/v1/traces", content=bomb, headers={**J, "Content-Encoding": "gzip"})
        assert r.status_code == 413 and r.json()["reason"] == "too_costly"
        assert time.monotonic() - t < 20


def test_n5_decode_gate_bounds_concurrent_decodes() -> None:
    gate = DecodeGate(1000, wait=0.2)
    with pytest.raises(BadRequest) as err:
        with gate.hold(1001):
            pass
    assert err.value.status == 413
    with gate.hold(600):
        with pytest.raises(BadRequest) as err:
            with gate.hold(600):
                pass
        assert err.value.status == 503
    with gate.hold(600):  # released
        pass
    assert decode_cost(b"{}," * 1000, "application/json") > 100 * 1000


def test_n5_decompressed_limit_follows_max_request_mb(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tracetochain.cli import app

    seen = {}

    def fake_run(config, log_level="warning"):
        seen["config"] = config

    import tracetochain.serve as live

    orig = live.run
    live.run = fake_run
    try:
        result = CliRunner().invoke(app, ["serve", "--store", str(tmp_path / "s.db"), "--max-request-mb", "1"])
    finally:
        live.run = orig
    assert result.exit_code == 0, result.output
    assert seen["config"].max_decompressed_bytes == 4 * 1024 * 1024


# ----------------------------------------------------------------------------------------------------- N6
def test_n6_open_traces_are_bounded_and_evictions_counted(tmp_path: Path) -> None:
    svc = make_service(tmp_path, ingest=IngestSettings(settle=0.0, tick=0.02, max_open_traces=50,
                                                       verdict_timeout=300.0))
    now = time.time_ns()
    roots = [{"traceId": f"{i + 1:032x}", "spanId": f"{i + 1:016x}", "name": "agent",
              "startTimeUnixNano": str(now)} for i in range(400)]  # roots without outcome: held for a verdict
    with TestClient(create_app(svc), base_url="http://127.0.0.1") as client:
        assert client.post("/v1/traces", content=doc_of(roots), headers=J).status_code == 200
        doc = wait(client, lambda d: d["status"]["counters"].get("open_traces_evicted", 0) >= 350)
        assert svc.ingestor.open_traces <= 50
        assert doc["health"]["status"] == "degraded"
        assert any("open traces evicted" in r for r in doc["health"]["reasons"])
        metrics = client.get("/metrics").text
        assert "tracetochain_open_traces_evicted_total" in metrics and "tracetochain_degraded 1.0" in metrics


def test_n6_unclaimed_verdicts_are_bounded(tmp_path: Path) -> None:
    svc = make_service(tmp_path, ingest=IngestSettings(settle=0.0, tick=0.02, max_verdicts=100))
    verdicts = [{"trace_id": f"{i + 1:032x}", "outcome": "success"} for i in range(1000)]
    with TestClient(create_app(svc), base_url="http://127.0.0.1") as client:
        for k in range(10):  # ten requests, committed one after the other (the newest are kept at restart)
            assert client.post("/v1/verdicts", json=verdicts[k * 100:(k + 1) * 100]).json() == {"accepted": 100}
            time.sleep(0.03)
        wait(client, lambda d: d["status"]["counters"].get("verdicts_evicted") == 900)
        assert len(svc.ingestor._verdicts) == 100
        assert f"{1000:032x}" in svc.ingestor._verdicts  # the newest are kept
    svc2 = make_service(tmp_path, ingest=IngestSettings(settle=0.0, tick=0.02, max_verdicts=100))
    with TestClient(create_app(svc2), base_url="http://127.0.0.1"):
        assert len(svc2.ingestor._verdicts) == 100 and f"{1000:032x}" in svc2.ingestor._verdicts


def test_unclaimed_verdicts_expire_after_the_retention(tmp_path: Path) -> None:
    """A verdict whose trace never arrives is deleted after --keep-unclaimed-verdicts (memory and store) and
    counted (verdicts_expired on the status counters and /metrics); a verdict whose trace was assembled stays."""
    settings = IngestSettings(settle=0.0, tick=0.02, verdict_retention=0.2)
    svc = make_service(tmp_path, ingest=settings)
    now = time.time_ns()
    with TestClient(create_app(svc), base_url="http://127.0.0.1") as client:
        lost = [{"trace_id": f"{i + 100:032x}", "outcome": "failure"} for i in range(3)]
        assert client.post("/v1/verdicts", json=[*lost, {"trace_id": f"{7:032x}", "outcome": "success"}]).json() \
            == {"accepted": 4}
        assert client.post("/v1/traces", content=doc_of(otlp_episode(7, now)), headers=J).status_code == 200
        wait(client, lambda d: d["n_episodes"] == 1)
        assert len(svc.store.verdicts(unused_only=True)) == 3
        time.sleep(0.3)
        svc.ingestor._last_verdict_expiry = -1e18  # the next scan expires (it runs once a minute)
        assert client.post("/v1/traces", content=doc_of(otlp_episode(8, now)), headers=J).status_code == 200
        doc = wait(client, lambda d: d["status"]["counters"].get("verdicts_expired") == 3 and d["n_episodes"] == 2)
        assert "tracetochain_verdicts_expired_total 3.0" in client.get("/metrics").text
        assert doc["status"]["counters"]["verdicts_expired"] == 3
        assert not any(f"{i + 100:032x}" in svc.ingestor._verdicts for i in range(3))
    assert set(svc.store.verdicts()) == {f"{7:032x}"}  # the claimed one is the record of what decided trace 7
    svc2 = make_service(tmp_path, ingest=settings)
    with TestClient(create_app(svc2), base_url="http://127.0.0.1"):
        assert svc2.ingestor._verdicts == {}


def test_verdict_retention_setting_is_checked() -> None:
    with pytest.raises(ValueError, match="verdict_retention"):
        IngestSettings(verdict_retention=0)
    assert IngestSettings().verdict_retention == 86_400.0


# ----------------------------------------------------------------------------------------------------- N7
@pytest.mark.slow
def test_n7_unauthenticated_requests_are_counted_not_written(tmp_path: Path) -> None:
    svc = make_service(tmp_path, ingest_token=INGEST, read_token=READ)
    with TestClient(create_app(svc), base_url="http://127.0.0.1") as client:
        for _ in range(300):
            assert client.post("/v1/traces", content=b"x", headers=J).status_code == 401
        time.sleep(0.3)
        with sqlite3.connect(tmp_path / "live.db") as con:
            assert con.execute("SELECT count(*) FROM problems").fetchone()[0] == 0
        doc = client.get("/api/live", headers={"Authorization": f"Bearer {READ}"}).json()
        assert doc["status"]["counters"]["rejected_unauthorized"] == 300
    # At shutdown the count is written once, with one problem row.
    with sqlite3.connect(tmp_path / "live.db") as con:
        assert con.execute("SELECT count(*) FROM problems").fetchone()[0] == 1
        assert con.execute("SELECT value FROM counters WHERE name = 'rejected_unauthorized'").fetchone()[0] == 300


# ----------------------------------------------------------------------------------------------------- N8
def test_n8_every_gzip_member_is_decoded_and_trailing_garbage_refused(tmp_path: Path) -> None:
    assert decompress(gzip.compress(b"ab") + gzip.compress(b"cd"), "gzip", 10) == b"abcd"
    with pytest.raises(BadRequest) as err:
        decompress(gzip.compress(b"ab") + b"garbage", "gzip", 10)
    assert err.value.status == 400
    with pytest.raises(BadRequest) as err:
        decompress(gzip.compress(b"a" * 8) + gzip.compress(b"b" * 8), "gzip", 10)
    assert err.value.status == 413
    with pytest.raises(BadRequest):
        decompress(gzip.compress(b"abc")[:-4], "gzip", 10)
    svc = make_service(tmp_path)
    now = time.time_ns()
    first = record_spans(lambda p: agent_episode(p))
    second = record_spans(lambda p: agent_episode(p, fail_sql=True))
    # Two protobuf messages back to back are one message with both span lists (protobuf merges): both stored.
    body = gzip.compress(proto_body(first)) + gzip.compress(proto_body(second))
    with TestClient(create_app(svc), base_url="http://127.0.0.1") as client:
        r = client.post("/v1/traces", content=body, headers={**PB, "Content-Encoding": "gzip"})
        assert r.status_code == 200
        wait(client, lambda d: d["n_episodes"] == 2)
        # One JSON document split across two members is read whole; two documents are not one JSON value: 400.
        text = doc_of(otlp_episode(7, now))
        split = gzip.compress(text[:50]) + gzip.compress(text[50:])
        assert client.post("/v1/traces", content=split, headers={**J, "Content-Encoding": "gzip"}).status_code == 200
        two = gzip.compress(doc_of(otlp_episode(8, now))) + gzip.compress(doc_of(otlp_episode(9, now)))
        r = client.post("/v1/traces", content=two, headers={**J, "Content-Encoding": "gzip"})
        assert r.status_code == 400 and r.json()["reason"] == "json"
        wait(client, lambda d: d["n_episodes"] == 3)
    ids = {t for t, _ in svc.store.span_ids()}
    assert len(ids) == 3 and f"{7:032x}" in ids and f"{8:032x}" not in ids


# ----------------------------------------------------------------------------------------------------- N9
def test_n9_dashboard_layout_survives_prototype_state_names() -> None:
    node = __import__("shutil").which("node")
    if node is None:
        pytest.skip("node is not installed")
    script = Path(__file__).resolve().parents[2] / "src/tracetochain/serve/static/dashboard.js"
    harness = """
const fs = require("fs"); const vm = require("vm");
const ctx = {document: {addEventListener() {}, getElementById() { return null; }}, console};
vm.createContext(ctx);
vm.runInContext(fs.readFileSync(process.argv[1], "utf8") + ";this.layout = layout; this.target = target;", ctx);
const names = ["constructor", "__proto__", "toString", "hasOwnProperty", "success"];
const cur = JSON.parse(JSON.stringify({initial: Object.fromEntries(names.map((n, i) => [n, i ? 0 : 1])),
  edges: names.slice(1).map((n, i) => ({from: names[i], to: n})).concat([{from: "toString", to: "failure"}])}));
const pos = ctx.layout(cur);
const out = names.map(n => [n, !!pos.get(n)]);
out.push(["->failure", !!ctx.target(pos, "failure")]);
console.log(JSON.stringify(out));
"""
    r = subprocess.run([node, "-e", harness, str(script)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert all(ok for _, ok in json.loads(r.stdout)), r.stdout


# ----------------------------------------------------------------------------------------------------- N10
def test_n10_export_parquet_goes_through_the_safe_writer(tmp_path: Path) -> None:
    svc = make_service(tmp_path)
    svc.store.unlock()
    store = tmp_path / "live.db"
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    link = tmp_path / "out.parquet"
    link.symlink_to(victim)
    from tracetochain.exceptions import OutputFileError

    with pytest.raises(OutputFileError, match="symbolic link"):
        export_store(store, link)
    assert victim.read_text() == "precious"
    with pytest.raises(OutputFileError, match="input"):
        export_store(store, store, overwrite=True)
    with pytest.raises(OutputFileError, match="input"):
        export_store(store, tmp_path / "live.db-wal", overwrite=True)
    assert sqlite3.connect(store).execute("SELECT count(*) FROM episodes").fetchone()[0] == 0
    assert export_store(store, tmp_path / "a.parquet") == 0
    with pytest.raises(OutputFileError, match="already exists"):
        export_store(store, tmp_path / "a.parquet")
    assert export_store(store, tmp_path / "a.parquet", overwrite=True) == 0
    with pytest.raises(StoreError, match="no such store"):
        export_store(tmp_path / "typo" / "live.db", tmp_path / "b.parquet")
    assert not (tmp_path / "typo").exists()


# ----------------------------------------------------------------------------------------------------- N11
class _Receiver:
    """A local HTTP server answering every POST with ``reply`` (status line and headers, raw)."""

    def __init__(self, reply: bytes, body_size: int = 0) -> None:
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.reply, self.body_size = reply, body_size
        self.requests: list[bytes] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    data = conn.recv(65536)
                    self.requests.append(data)
                    conn.sendall(self.reply)
                    chunk = b"x" * 65536
                    sent = 0
                    while sent < self.body_size:
                        conn.sendall(chunk)
                        sent += len(chunk)
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()


def test_n11_webhook_does_not_follow_redirects_reads_bounded_and_survives(tmp_path: Path) -> None:
    from tracetochain.serve._alerts import WebhookSink

    target = _Receiver(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
    redirect = _Receiver(f"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:{target.port}/internal-admin\r\n"
                         "Content-Length: 0\r\n\r\n".encode())
    bad_status = _Receiver(b"HTTP/1.1 2OO OK\r\n\r\n")
    huge = _Receiver(b"HTTP/1.1 200 OK\r\nContent-Length: 100000000\r\n\r\n", body_size=4 * 1024 * 1024)
    try:
        for receiver, delivered in ((redirect, False), (bad_status, False), (huge, True)):
            sink = WebhookSink(f"http://127.0.0.1:{receiver.port}/hook", retries=1, backoff=0.0, timeout=5.0)
            sink.send({"kind": "rule", "message": "one"})
            sink.send({"kind": "rule", "message": "two"})
            sink.close(30)
            assert not sink._thread.is_alive()
            assert (sink.sent, sink.failed) == ((2, 0) if delivered else (0, 2)), receiver
        assert target.requests == []  # the redirect was not followed
    finally:
        for r in (target, redirect, bad_status, huge):
            r.close()


@pytest.mark.parametrize("url", ["ftp://x", "file:///etc/passwd", "http://exa mple.com/", "http://x/\r\nX-A: b",
                                 "http:///nohost", "http://u:p@example.com/"])
def test_n11_n23_bad_webhook_urls_are_usage_errors(tmp_path: Path, url: str) -> None:
    from typer.testing import CliRunner

    from tracetochain.cli import app

    result = CliRunner().invoke(app, ["serve", "--store", str(tmp_path / "s.db"), "--webhook", url])
    assert result.exit_code == 2, result.output
    assert "internal error" not in result.output and "webhook URL" in result.output


def test_n23_max_request_mb_inf_is_a_usage_error(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tracetochain.cli import app

    result = CliRunner().invoke(app, ["serve", "--store", str(tmp_path / "s.db"), "--max-request-mb", "inf"])
    assert result.exit_code == 2 and "internal error" not in result.output


# ----------------------------------------------------------------------------------------------------- N12
@pytest.mark.parametrize("text, needle", [
    ('min_traces = 1\n[[rule]]\nwhen = "R(100000000) < 0.5"\n', "at most 10,000"),
    ('min_traces = 1\n[[rule]]\nwhen = "R(99999999999999999999999) < 0.5"\n', "at most 10,000"),
    ('[[rule]]\nwhen = "R∞ < 0.5 over ' + "9" * 400 + 'h"\n', "too long"),
    ('[[rule]]\nwhen = "R∞ < 0.5 over ' + "9" * 400 + ' windows"\n', "at most 100,000 windows"),
    ("x = " + "[" * 100_000 + "]" * 100_000 + "\n", "nested too deeply"),
    ('[[rule]]\nwhen = "' + "a" * 30_000 + '"\n', "1,000"),
])
def test_n12_hostile_rules_files_are_refused_fast(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "rules.toml"
    path.write_text(text)
    t = time.monotonic()
    with pytest.raises(RulesFileError, match=needle):
        load_rules(path, WindowSpec("time", 300.0))
    assert time.monotonic() - t < 5


def test_n12_yaml_alias_tree_is_not_expanded_in_the_message(tmp_path: Path) -> None:
    pytest.importorskip("yaml")
    lines = ['min_traces:', '- &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    prev = "a"
    for name in "bcdefghi":
        lines.append(f"- &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
        prev = name
    lines += ["rule:", '- when: "R∞ < 0.5"']
    path = tmp_path / "rules.yaml"
    path.write_text("\n".join(lines) + "\n")
    t = time.monotonic()
    with pytest.raises(RulesFileError, match="got a list"):
        load_rules(path, WindowSpec("time", 300.0))
    assert time.monotonic() - t < 5


def test_n12_one_failing_rule_does_not_stop_the_live_view(tmp_path: Path, monkeypatch) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('min_traces = 1\n[[rule]]\nname = "bad"\nwhen = "R(30) < 0.5"\n'
                     '[[rule]]\nname = "count"\nwhen = "traces >= 2"\n')
    svc = make_service(tmp_path, rules=rules)
    from tracetochain.serve._rules import Rule

    def boom(self, live, counts):
        if self.name == "bad":
            raise MemoryError("Unable to allocate 763 MiB")
        return float(counts.n_total)

    monkeypatch.setattr(Rule, "value", boom)
    with TestClient(create_app(svc), base_url="http://127.0.0.1") as client:
        now = time.time_ns()
        for i in range(3):
            client.post("/v1/traces", content=doc_of(otlp_episode(30 + i, now)), headers=J)
        doc = wait(client, lambda d: d["n_episodes"] == 3 and any(r["firing"] for r in d["rules"]))
        assert {r["rule"]: r["state"] for r in doc["rules"]} == {"bad": "no data", "count": "firing"}


# -------------------------------------------------------------------------------- N16, N17, N26, N27
@pytest.mark.slow
def test_n16_n17_n26_n27_report_and_metrics(tmp_path: Path) -> None:
    svc = make_service(tmp_path)
    spans = record_spans(lambda p: [agent_episode(p, fail_sql=i % 3 == 0) for i in range(12)])
    with TestClient(create_app(svc), base_url="http://127.0.0.1") as client:
        assert client.post("/v1/traces", content=proto_body(spans), headers=PB).status_code == 200
        wait(client, lambda d: d["n_episodes"] == 12)
        r = client.get("/report", params={"window": "9" * 400})
        assert r.status_code == 400 and r.json()["reason"] == "window"
        svc.live.window = WindowSpec("time", 300.0)  # the same on time windows (the key times the size overflows)
        for window in ("9" * 400, "9" * 19, "-" + "9" * 19):
            r = client.get("/report", params={"window": window})
            assert r.status_code == 400 and r.json()["reason"] == "window", window
        svc.live.window = WindowSpec("count", 10)
        r = client.get("/report", params={"window": "0", "audit": "0"})
        assert r.status_code == 200
        csp = r.headers["content-security-policy"]
        assert "style-src 'unsafe-inline'" in csp and "script" not in csp
        import tracetochain.serve._pages as _pages

        calls = []
        orig = _pages._build_window_report
        _pages._build_window_report = lambda *a: calls.append(a) or orig(*a)
        try:
            assert client.get("/report", params={"window": "0", "audit": "0"}).status_code == 200
        finally:
            _pages._build_window_report = orig
        assert calls == []  # cached while the store is unchanged
        m = client.get("/metrics")
        assert m.headers["x-content-type-options"] == "nosniff" and "content-security-policy" in m.headers


# ----------------------------------------------------------------------------------------------------- N18
def test_n18_a_failed_commit_keeps_its_real_error() -> None:
    class FullDisk:
        in_transaction = False

        def execute(self, sql, *args):
            if sql == "COMMIT":
                raise sqlite3.OperationalError("database or disk is full")
            if sql == "ROLLBACK":
                raise sqlite3.OperationalError("cannot rollback - no transaction is active")
            return self

        def executemany(self, sql, rows):
            return self

    batch = WriteBatch()
    batch.count("spans_received")
    with pytest.raises(sqlite3.OperationalError, match="disk is full"):
        apply_batch(FullDisk(), batch)


def test_n18_healthz_fails_after_consecutive_failed_commits(tmp_path: Path) -> None:
    svc = make_service(tmp_path)
    with TestClient(create_app(svc), base_url="http://127.0.0.1") as client:
        svc.ingestor.commit_failures, svc.ingestor.commit_error = 3, "database or disk is full"
        r = client.get("/healthz")
        assert r.status_code == 503 and r.json()["status"] == "failing"
        assert "disk is full" in r.json()["reasons"][0]
        svc.ingestor.commit_failures, svc.ingestor.commit_error = 0, None


# ----------------------------------------------------------------------------------------------------- N19
def test_n19_a_second_server_on_the_same_store_is_refused(tmp_path: Path) -> None:
    first = make_service(tmp_path)
    try:
        with pytest.raises(StoreError, match="another tracetochain serve"):
            make_service(tmp_path)
        code = ("import sys; from tracetochain.serve import LiveService, ServeConfig\n"
                "try:\n LiveService(ServeConfig(store=sys.argv[1]))\nexcept Exception as e: print(e); sys.exit(2)")
        r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "live.db")], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 2 and "another tracetochain serve" in r.stdout
    finally:
        first.store.unlock()
    make_service(tmp_path).store.unlock()  # free again


# ----------------------------------------------------------------------------------------------------- N24
def test_n24_a_negative_usage_value_costs_the_step_its_usage_not_the_episode(tmp_path: Path) -> None:
    svc = make_service(tmp_path)
    spans = otlp_episode(40, time.time_ns(), outcome="failure")
    spans[1]["attributes"].append({"key": "gen_ai.usage.input_tokens", "value": {"intValue": "-5"}})
    with TestClient(create_app(svc), base_url="http://127.0.0.1") as client:
        assert client.post("/v1/traces", content=doc_of(spans), headers=J).status_code == 200
        doc = wait(client, lambda d: d["n_episodes"] == 1)
        assert doc["status"]["counters"].get("episodes_dropped", 0) == 0
        ep = client.get(f"/api/traces/{40:032x}").json()
        assert ep["outcome"] == "failure" and "tokens_in" not in ep["steps"][0]


# ----------------------------------------------------------------------------------------------------- N25
def test_n25_connections_are_bounded(tmp_path: Path) -> None:
    from tracetochain.serve import ServeConfig

    assert ServeConfig().max_connections == 1000
    import inspect

    import tracetochain.serve as live

    assert "limit_concurrency=config.max_connections" in inspect.getsource(live.run)


def _seconds_until_closed(sock, chunks: list[bytes], pause: float, limit: float) -> tuple[float, bytes]:
    """Send ``chunks`` one by one, ``pause`` s apart, until the server closes; the time it took and its reply."""

    t0 = time.monotonic()
    sock.settimeout(pause)
    reply = b""
    for chunk in chunks:
        try:
            sock.sendall(chunk)
        except OSError:  # the server has closed: a send may fail
            break
        try:
            data = sock.recv(4096)
        except TimeoutError:
            if time.monotonic() - t0 > limit:
                break
            continue
        except OSError:
            break
        reply += data
        if not data or reply:
            break
    sock.settimeout(max(0.1, limit - (time.monotonic() - t0)))
    try:
        while True:
            data = sock.recv(4096)
            if not data:
                break
            reply += data
    except OSError:
        pass
    return time.monotonic() - t0, reply


@pytest.mark.slow
def test_n25_slow_headers_and_slow_bodies_are_cut_off(tmp_path: Path) -> None:
    """A slow-loris client (headers byte by byte) gets 408 and is disconnected at --header-timeout; a body sent
    too slowly is cut off at --body-timeout (nothing acknowledged); an idle fresh connection is closed too; both
    are counted; ordinary requests are unaffected."""
    import socket

    from serve_helpers import ServeProcess

    srv = ServeProcess(tmp_path / "live.db", "--header-timeout", "1", "--body-timeout", "2.5",
                       "--no-stdout-alerts").start()
    try:
        head = (b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"X-Slow: " + b"a" * 200 + b"\r\n")
        with socket.create_connection(("127.0.0.1", srv.port)) as sock:
            took, reply = _seconds_until_closed(sock, [head[i:i + 1] for i in range(len(head))], 0.1, 6.0)
        assert 0.8 < took < 3.0, took  # the deadline (1 s), not the 20 s the client would have taken
        assert reply.startswith(b"HTTP/1.1 408"), reply[:80]
        body_head = (b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000\r\n\r\n")
        with socket.create_connection(("127.0.0.1", srv.port)) as sock:
            took, reply = _seconds_until_closed(sock, [body_head] + [b"{"] * 100, 0.1, 8.0)
        assert 2.0 < took < 5.0, took
        assert b" 200 " not in reply
        with socket.create_connection(("127.0.0.1", srv.port)) as sock:  # connects and sends nothing
            took, reply = _seconds_until_closed(sock, [], 0.1, 6.0)
        assert took < 3.0 and reply == b""
        assert srv.get_json("/healthz")["status"] == "ok"  # an ordinary request is served as before
        metrics = ""
        for _ in range(50):
            with urllib.request.urlopen(srv.url + "/metrics", timeout=10) as r:
                metrics = r.read().decode()
            if 'reason="header_timeout"' in metrics and 'reason="body_timeout"' in metrics:
                break
            time.sleep(0.2)
        assert 'tracetochain_requests_rejected_total{reason="header_timeout"}' in metrics
        assert 'tracetochain_requests_rejected_total{reason="body_timeout"}' in metrics
    finally:
        srv.stop()


def test_json_and_protobuf_paths_still_agree_after_the_guards(tmp_path: Path) -> None:
    """The guards add no refusal for ordinary traffic (SDK spans, both encodings, gzip)."""
    svc = make_service(tmp_path)
    spans = record_spans(lambda p: [agent_episode(p) for _ in range(5)])
    with TestClient(create_app(svc), base_url="http://127.0.0.1") as client:
        assert client.post("/v1/traces", content=proto_body(spans), headers=PB).status_code == 200
        r = client.post("/v1/traces", content=gzip.compress(json_body(spans)),
                        headers={**J, "Content-Encoding": "gzip"})
        assert r.status_code == 200
        doc = wait(client, lambda d: d["n_episodes"] == 5)
        assert doc["health"] == {"status": "ok", "reasons": []}


def test_n6_spans_of_assembled_traces_expire_with_keep_spans(tmp_path: Path) -> None:
    svc = make_service(tmp_path, ingest=IngestSettings(settle=0.0, tick=0.02, span_retention=0.05))
    with TestClient(create_app(svc), base_url="http://127.0.0.1") as client:
        now = time.time_ns()
        assert client.post("/v1/traces", content=doc_of(otlp_episode(50, now)), headers=J).status_code == 200
        wait(client, lambda d: d["n_episodes"] == 1)
        time.sleep(0.1)
        svc.ingestor._last_expiry = -1e18  # the next scan expires (it runs once a minute)
        assert client.post("/v1/traces", content=doc_of(otlp_episode(51, now)), headers=J).status_code == 200
        wait(client, lambda d: d["status"]["counters"].get("spans_expired", 0) >= 2 and d["n_episodes"] == 2)
    assert f"{50:032x}" not in {t for t, _ in svc.store.span_ids()}
    assert svc.store.episode(f"{50:032x}")["steps"]  # the episode keeps its steps
