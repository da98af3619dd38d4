"""Alerts are events with identity (stored once, sent once, never again after a restart; counters equal the list;
webhook attempts recorded), one chain per agent (service.name), unlabelled episodes against labelled ones."""

from __future__ import annotations

import http.server
import json
import re
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from starlette.testclient import TestClient

import tracetochain.instrument as tt
from tracetochain.serve import IngestSettings, LiveService, ServeConfig, WindowSpec, create_app
from tracetochain.serve._alerts import AlertHub, WebhookSink, alert_key
from tracetochain.serve._live import RunningCounts
from tracetochain.serve._store import Store

PB = {"Content-Type": "application/x-protobuf"}
RULES = """
min_traces = 5

[[rule]]
name = "sql failures"
when = "P(sql_exec -> failure) > 0.3"
severity = "critical"
"""


def spans_of(service_name: str, fails: list[bool], *, verdict: bool = True) -> list:
    """Finished SDK spans of one instrumented agent (its own provider and ``service.name`` resource)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service_name}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    for fail in fails:
        with tt.episode("agent", provider=provider) as ep:
            with tt.step("plan", kind="llm", provider=provider):
                pass
            with tt.step("sql_exec", provider=provider) as s:
                if fail:
                    s.fail("db_error")
            if verdict:
                ep.verdict(not fail)
    provider.shutdown()
    return list(exporter.get_finished_spans())


class Hook:
    """A local webhook receiver that fails its first ``fail_first`` requests (HTTP 503)."""

    def __init__(self, fail_first: int = 0) -> None:
        self.got: list[dict] = []
        self.calls = 0
        hook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                hook.calls += 1
                if hook.calls <= fail_first:
                    self.send_response(503)
                else:
                    hook.got.append(body)
                    self.send_response(204)
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def close(self) -> None:
        self.server.shutdown()


def make_service(tmp_path: Path, **kw) -> LiveService:
    (tmp_path / "rules.toml").write_text(RULES, encoding="utf-8")
    cfg = ServeConfig(store=tmp_path / "live.db", window=WindowSpec("count", 20), alerts_to_stdout=False,
                      ingest=IngestSettings(settle=0.0, verdict_timeout=kw.pop("verdict_timeout", 300.0), tick=0.02),
                      refresh=0.05, samples=200, min_traces=20, rules=tmp_path / "rules.toml", **kw)
    return LiveService(cfg)


def wait(predicate, timeout: float = 30.0) -> None:
    deadline = time.time() + timeout
    while not predicate():
        if time.time() > deadline:
            raise AssertionError("condition not met")
        time.sleep(0.05)


def alerts_total(metrics: str) -> int:
    return int(sum(float(v) for v in re.findall(r"^tracetochain_alerts_total\{[^}]*\} (\S+)$", metrics, re.M)))


# ------------------------------------------------------------------------------------------------ identity
def test_alert_key_and_hub_drop_a_repeated_alert() -> None:
    sent: list[dict] = []

    class Sink:
        def send(self, a: dict) -> None:
            sent.append(a)

        def close(self) -> None:
            pass

    hub = AlertHub([Sink()])
    event = {"kind": "rule", "rule": "r", "group": "g", "window": 3, "status": "firing", "message": "m"}
    assert hub.emit(dict(event)) is not None and hub.emit(dict(event)) is None
    assert hub.emit({**event, "status": "resolved"}) is not None  # another event: the rule resolved
    assert hub.emit({**event, "window": 4}) is not None  # the same rule in the next window
    assert [alert_key(a) for a in sent] == ["rule|r|g|3|firing", "rule|r|g|3|resolved", "rule|r|g|4|firing"]
    assert hub.suppressed == 1


@pytest.mark.slow
def test_restart_twice_after_alerts_fired_lists_and_sends_each_once(tmp_path: Path) -> None:
    hook = Hook(fail_first=1)  # the first delivery fails once: retried with back-off, both attempts recorded
    rng = np.random.default_rng(1)
    good = [bool(x) for x in rng.random(20) < 0.05]
    bad = [bool(x) for x in rng.random(20) < 0.7]
    first = make_service(tmp_path, webhook=hook.url)
    first_sink = next(s for s in first.hub.sinks if isinstance(s, WebhookSink))
    first_sink.backoff = 0.05
    with TestClient(create_app(first), base_url="http://127.0.0.1") as client:
        client.post("/v1/traces", content=encode_spans(spans_of("sql-agent", good)).SerializeToString(), headers=PB)
        wait(lambda: first.live.n_episodes == 20)
        client.post("/v1/traces", content=encode_spans(spans_of("sql-agent", bad)).SerializeToString(), headers=PB)
        wait(lambda: any(a["kind"] == "drift" for a in first.hub.recent)
             and any(a["kind"] == "rule" for a in first.hub.recent))
        wait(lambda: len(hook.got) == len(first.store.alert_keys()))
        # The attempts are recorded with the next commit of the ingest thread.
        wait(lambda: all((a.get("delivery") or {}).get("status") == "delivered"
                         for a in client.get("/api/alerts").json()["alerts"]))
        before = client.get("/api/alerts").json()["alerts"]
    kinds = Counter(a["kind"] for a in before)
    assert kinds["drift"] >= 1 and kinds["rule"] >= 1
    assert all(a["delivery"]["status"] == "delivered" for a in before)
    assert sorted(a["delivery"]["attempts"] for a in before)[-1] == 2  # the failed first attempt was retried
    for _ in range(2):  # restart twice on the same store: everything recounted, rules and drift re-evaluated
        again = make_service(tmp_path, webhook=hook.url)
        with TestClient(create_app(again), base_url="http://127.0.0.1") as client:
            # The drift tests of the recounted windows raise their alerts again: dropped as already raised. The
            # rules resume from their stored state (their old windows are evaluated silently).
            wait(lambda svc=again: svc.hub.suppressed >= kinds["drift"])
            time.sleep(0.5)
            after = client.get("/api/alerts").json()["alerts"]
            metrics = client.get("/metrics").text
    keys = [a["key"] for a in after]
    assert len(keys) == len(set(keys)) == len(before)  # each alert listed once
    assert Counter(alert_key(a) for a in hook.got) == Counter({k: 1 for k in keys})  # and sent once
    assert alerts_total(metrics) == len(after)  # the counters agree with the list
    drift = sum(1 for a in after if a["kind"] == "drift")
    assert f'tracetochain_drift_alerts_total{{group="sql-agent"}} {float(drift)}' in metrics
    hook.close()


def test_undelivered_alert_is_finished_after_restart_never_repeated(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    from tracetochain.serve._store import WriteBatch, apply_batch

    con = store.writer()
    batch = WriteBatch()
    alert = {"kind": "rule", "rule": "r", "group": "g", "window": 1, "status": "firing", "message": "m"}
    for window, ok in ((1, None), (2, 1), (3, -1)):  # pending; delivered; given up
        a = {**alert, "window": window, "key": alert_key({**alert, "window": window})}
        batch.alerts.append((0.0, json.dumps(a), a["key"], "rule", "g", "firing"))
        if ok is not None:
            batch.deliveries.append((a["key"], 1, 0.0, ok, None if ok == 1 else "HTTP 500"))
    apply_batch(con, batch)
    con.close()
    assert [a["key"] for a in store.undelivered(5)] == ["rule|r|g|1|firing"]
    status = {a["window"]: a.get("delivery", {}).get("status") for a in store.alerts()}
    assert status == {1: None, 2: "delivered", 3: "failed"}


# ------------------------------------------------------------------------------------------------ groups
@pytest.mark.slow
def test_two_agents_get_two_chains_and_two_sets_of_metrics(tmp_path: Path) -> None:
    svc = make_service(tmp_path)
    a = spans_of("billing-agent", [False] * 12 + [True] * 3)
    b = spans_of("search-agent", [True] * 9 + [False] * 6)
    with TestClient(create_app(svc), base_url="http://127.0.0.1") as client:
        # One export request holding both agents' resource spans, as a collector would forward them.
        client.post("/v1/traces", content=encode_spans(a + b).SerializeToString(), headers=PB)
        wait(lambda: svc.live.n_episodes == 30)
        svc.refresh()
        doc = client.get("/api/live").json()
        assert set(doc["groups"]) == {"billing-agent", "search-agent"} and doc["group_by"] == "service.name"
        billing = client.get("/api/live", params={"group": "billing-agent"}).json()
        search = client.get("/api/live", params={"group": "search-agent"}).json()
        assert client.get("/api/live", params={"group": "nobody"}).status_code == 404
        metrics = client.get("/metrics").text
        report = client.get("/report", params={"window": "all", "group": "search-agent", "audit": "0"})
    assert billing["total"]["outcomes"]["success"] == 12 and billing["total"]["outcomes"]["failure"] == 3
    assert search["total"]["outcomes"]["success"] == 6 and search["total"]["outcomes"]["failure"] == 9
    assert doc["total"]["n_traces"] == 30  # the all-groups view
    assert billing["total"]["r_inf"]["point"] > search["total"]["r_inf"]["point"]
    for group, part in (("billing-agent", billing), ("search-agent", search)):
        assert f'tracetochain_r_inf{{group="{group}",scope="total"}} {part["total"]["r_inf"]["point"]!r}' in metrics
        assert f'tracetochain_episodes{{group="{group}",outcome="success"}}' in metrics
        assert f'tracetochain_alert_firing{{group="{group}",rule="sql failures",severity="critical"}}' in metrics
    # The rule fires for the failing agent only.
    rules = {r["group"]: r["firing"] for r in doc["rules"]}
    assert rules == {"billing-agent": False, "search-agent": True}
    assert {a["group"] for a in svc.store.alerts() if a["kind"] == "rule"} == {"search-agent"}
    assert report.status_code == 200 and "search-agent" in report.text
    assert svc.store.groups() == {"billing-agent": 15, "search-agent": 15}


def test_group_by_another_attribute_and_group_cap(tmp_path: Path) -> None:
    cfg = ServeConfig(store=tmp_path / "live.db", window=WindowSpec("count", 20), alerts_to_stdout=False,
                      ingest=IngestSettings(settle=0.0, tick=0.02, group_by="deployment.environment", max_groups=1),
                      refresh=0.05, samples=100)
    svc = LiveService(cfg)

    def env_spans(env: str, n: int) -> list:
        exporter = InMemorySpanExporter()
        provider = TracerProvider(resource=Resource.create({"deployment.environment": env}))
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        for _ in range(n):
            with tt.episode("agent", provider=provider) as ep, tt.step("sql_exec", provider=provider):
                ep.verdict(True)
        provider.shutdown()
        return list(exporter.get_finished_spans())

    with TestClient(create_app(svc), base_url="http://127.0.0.1") as client:
        client.post("/v1/traces", content=encode_spans(env_spans("prod", 3)).SerializeToString(), headers=PB)
        wait(lambda: svc.live.n_episodes == 3)
        client.post("/v1/traces", content=encode_spans(env_spans("staging", 2)).SerializeToString(), headers=PB)
        wait(lambda: svc.live.n_episodes == 5)
    assert svc.store.groups() == {"prod": 3, "(other)": 2}  # one group allowed: the next goes to (other)


# ------------------------------------------------------------------------------------------------ unlabelled
def _counts(paths: list[tuple[tuple[str, ...], str]]) -> RunningCounts:
    c = RunningCounts()
    for i, (states, outcome) in enumerate(paths):
        c.add(states, outcome, f"e{i}")
    return c


def test_label_test_size_and_power() -> None:
    """Same path law for both kinds → p roughly uniform (few rejections at 5 %); unlabelled runs that loop more
    → rejected."""
    rng = np.random.default_rng(3)

    def path(p_loop: float) -> tuple[str, ...]:
        states = ["plan"]
        while rng.random() < p_loop and len(states) < 30:
            states.append("tool")
        states.append("answer")
        return tuple(states)

    rejections = 0
    for _ in range(60):
        c = _counts([(path(0.5), "success" if rng.random() < 0.7 else "failure") for _ in range(150)]
                    + [(path(0.5), "unlabelled") for _ in range(150)])
        test = c.label_test()
        assert test["tested"] and 0.0 <= test["p_value"] <= 1.0
        rejections += test["p_value"] <= 0.05
    assert rejections <= 8  # 60 × 5 % = 3 expected; binomial 99.7 % bound ≈ 8
    c = _counts([(path(0.3), "success") for _ in range(150)] + [(path(0.7), "unlabelled") for _ in range(150)])
    test = c.label_test()
    assert test["differ"] and test["p_value"] < 1e-6 and "tool" in test["differing_states"]
    usage = c.usage_summary()
    assert usage["unlabelled"]["mean_steps"] > usage["labelled"]["mean_steps"]


def test_unlabelled_episodes_keep_the_labelled_chain_unchanged() -> None:
    labelled = [(("plan", "tool", "answer"), "success"), (("plan", "answer"), "failure")] * 20
    only = _counts(labelled)
    both = _counts(labelled + [(("plan", "tool", "tool"), "unlabelled")] * 30)
    vocab = ["plan", "tool", "answer"]
    a, b = only.to_counts(vocab), both.to_counts(vocab)
    assert np.array_equal(a.transitions, b.transitions) and a.n_traces == b.n_traces
    assert both.n_unlabelled == 30 and both.n_total == 70 and both.n_fitted == 40
    assert both.u_transitions[("tool", "tool")] == 30 and both.u_ends["tool"] == 30
    assert both.label_test(min_each=20)["tested"]
    assert _counts(labelled).label_test()["reason"] == "no unlabelled episodes"


@pytest.mark.parametrize("n", [0, 3])
def test_label_test_needs_both_kinds(n: int) -> None:
    c = _counts([(("a", "b"), "success")] * 30 + [(("a",), "unlabelled")] * n)
    assert c.label_test()["tested"] is False and c.label_test()["p_value"] is None


# ------------------------------------------------------------------------------------------------ post_verdict
def test_post_verdict_goes_where_configure_sends_the_spans() -> None:
    seen: list[tuple[str, str | None, dict]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}") \
                if self.path == "/v1/verdicts" else {}
            seen.append((self.path, self.headers.get("Authorization"), body))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    token = "ingest-token-0123456789"
    try:
        provider = tt.configure(base + "/v1/traces", token=token, set_global=False)
        tt.post_verdict("0af7651916cd43dd8448eb211c80319c", True)  # no endpoint: the configured server
        provider.shutdown()
    finally:
        tt._CONFIGURED.clear()
        server.shutdown()
    (verdict,) = [s for s in seen if s[0] == "/v1/verdicts"]
    assert verdict[1] == f"Bearer {token}"
    assert verdict[2] == {"trace_id": "0af7651916cd43dd8448eb211c80319c", "outcome": "success"}


def test_root_only_traces_without_outcome_are_kept_as_zero_step_unlabelled_episodes(tmp_path: Path) -> None:
    """A trace with no step and no verdict is an unlabelled run that ended before any step: kept and counted, and
    a batch made only of such traces never stops ingest."""
    svc = make_service(tmp_path, verdict_timeout=0.2)
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: "bare-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    for _ in range(3):
        with tracer.start_as_current_span("agent", attributes={"gen_ai.operation.name": "invoke_agent"}):
            pass
    provider.shutdown()
    with TestClient(create_app(svc), base_url="http://127.0.0.1") as client:
        body = encode_spans(exporter.get_finished_spans()).SerializeToString()
        assert client.post("/v1/traces", content=body, headers=PB).status_code == 200
        wait(lambda: svc.live.n_episodes == 3)
        counters = client.get("/api/live").json()["status"]["counters"]
        assert svc.ingestor.failed is None
    assert counters["episodes_unlabelled"] == 3 and counters.get("episodes_dropped", 0) == 0
    assert {(e.outcome, e.states, e.group) for e in svc.store.episodes()} == {("unlabelled", (), "bare-agent")}
    assert svc.store.steps_of() == []  # no step row: the step table stays canonical
