"""The live service in-process: decoding, safety (tokens, limits, bad input), verdicts, rules, counts, pages."""

from __future__ import annotations

import base64
import gzip
import http.server
import json
import threading
from pathlib import Path

import numpy as np
import pytest
from google.protobuf.json_format import MessageToDict
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from starlette.testclient import TestClient

import tracetochain.instrument as tt
from tracetochain.chain._counts import count_transitions
from tracetochain.readers.otlp import SpanTrace, emit_trace, parse_otlp_options
from tracetochain.serve import (
    IngestSettings,
    LiveService,
    RulesFileError,
    ServeConfig,
    WindowSpec,
    create_app,
    load_rules,
)
from tracetochain.serve._alerts import WebhookSink
from tracetochain.serve._app import script_json
from tracetochain.serve._decode import BadRequest, decode_traces, decompress
from tracetochain.serve._ingest import _Collector
from tracetochain.serve._live import LiveAnalysis, RunningCounts
from tracetochain.serve._pages import trace_html
from tracetochain.traces._table import TraceTable

PB = {"Content-Type": "application/x-protobuf"}
INGEST, READ = "ingest-token-0123456789", "read-token-0123456789ab"


# ------------------------------------------------------------------------------------------------ helpers
def record_spans(fn) -> list:
    """Run ``fn(provider)`` with an SDK provider that keeps its spans in memory; return the finished spans."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    fn(provider)
    provider.shutdown()
    return list(exporter.get_finished_spans())


def agent_episode(provider, *, fail_sql: bool = False, verdict: bool | None = True, verified: bool = True,
                  tool_name: str = "sql_exec") -> None:
    with tt.episode("agent", provider=provider) as ep:
        with tt.step("plan", kind="llm", provider=provider):
            pass
        with tt.milestone("sql_written", provider=provider) as m:
            m.verify(verified)
        with tt.step(tool_name, provider=provider) as s:
            if fail_sql:
                s.fail("db_error")
        if verdict is not None:
            ep.verdict(verdict)


def proto_body(spans) -> bytes:
    return encode_spans(spans).SerializeToString()


def json_body(spans) -> bytes:
    """The OTLP JSON encoding of the same spans (ids as hex, as OTLP/HTTP JSON requires)."""
    doc = MessageToDict(encode_spans(spans))
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for s in ss["spans"]:
                for k in ("traceId", "spanId", "parentSpanId"):
                    if k in s:
                        s[k] = base64.b64decode(s[k]).hex()
    return json.dumps(doc).encode()


def steps_of(pairs, **options) -> list[dict]:
    opts = parse_otlp_options(**options)
    by_trace: dict[str, SpanTrace] = {}
    for tid, span in pairs:
        by_trace.setdefault(tid, SpanTrace(tid, 0)).spans[span.sid] = span
    out: list[dict] = []
    for tr in by_trace.values():
        c = _Collector()
        emit_trace(tr, opts, c)
        out += c.records
    return out


@pytest.fixture
def service(tmp_path: Path):
    def make(**kw) -> LiveService:
        cfg = ServeConfig(store=tmp_path / "live.db", window=WindowSpec("count", 10), alerts_to_stdout=False,
                          ingest=IngestSettings(settle=0.0, verdict_timeout=kw.pop("verdict_timeout", 300.0),
                                                tick=0.02), refresh=0.05, samples=200, **kw)
        return LiveService(cfg)

    return make


# ------------------------------------------------------------------------------------------------ decoding
def test_protobuf_and_json_requests_give_the_same_steps() -> None:
    spans = record_spans(lambda p: [agent_episode(p, fail_sql=i % 2 == 1) for i in range(3)])
    opts = parse_otlp_options()
    a = steps_of(decode_traces(proto_body(spans), "application/x-protobuf", opts))
    b = steps_of(decode_traces(json_body(spans), "application/json; charset=utf-8", opts))
    assert a == b and len(a) == 9
    assert [r["state"] for r in a[:3]] == ["plan", "sql_written", "sql_exec"]
    assert a[0]["step_kind"] == "llm" and a[2]["tool_name"] == "sql_exec"
    assert {r["outcome"] for r in a} == {"success"}
    assert [r.get("error", False) for r in a[3:6]] == [False, False, True]


def test_instrument_milestone_and_errors() -> None:
    def run(p):
        agent_episode(p, verified=False, verdict=None)
        with tt.episode("agent", provider=p) as ep:
            ep.finish("max_steps")

            @tt.milestone("parsed", check=lambda r: r > 0, provider=p)
            def parse(x: int) -> int:
                return x

            parse(1)
            parse(-1)
            with pytest.raises(KeyError), tt.step("lookup", provider=p):
                raise KeyError("x")

    spans = record_spans(run)
    by_name = {}
    for s in spans:
        by_name.setdefault(s.name, []).append(s)
    assert by_name["execute_tool sql_written"][0].attributes["tracetochain.state"] == "sql_written:failed"
    assert by_name["execute_tool sql_written"][0].attributes["error.type"] == "verification_failed"
    states = [s.attributes["tracetochain.state"] for s in by_name["execute_tool parsed"]]
    assert states == ["parsed", "parsed:failed"]
    assert by_name["execute_tool lookup"][0].attributes["error.type"] == "KeyError"
    steps = steps_of(decode_traces(proto_body(spans), "application/x-protobuf", parse_otlp_options()))
    censored = [r for r in steps if r["outcome"] == "censored"]
    assert [r["state"] for r in censored] == ["parsed", "parsed:failed", "lookup"]
    assert censored[-1]["error"] is True and censored[-1]["error_type"] == "KeyError"


@pytest.mark.parametrize(("body", "ctype", "status", "reason"), [
    (b"\xff\xfe garbage", "application/x-protobuf", 400, "protobuf"),
    (b"{not json", "application/json", 400, "json"),
    (b'{"resourceSpans": 3}', "application/json", 400, "span"),
    (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"spanId": "00f067aa0ba902b7"}]}]}]}', "application/json",
     400, "span"),
    (b"{}", "text/plain", 415, "content_type"),
])
def test_malformed_requests_are_refused_with_a_reason(body, ctype, status, reason) -> None:
    with pytest.raises(BadRequest) as err:
        decode_traces(body, ctype, parse_otlp_options())
    assert (err.value.status, err.value.reason) == (status, reason)
    assert err.value.message


def test_decompression_is_bounded() -> None:
    bomb = gzip.compress(b"\0" * 5_000_000)
    with pytest.raises(BadRequest) as err:
        decompress(bomb, "gzip", 1_000_000)
    assert err.value.status == 413
    assert decompress(gzip.compress(b"abc"), "gzip", 10) == b"abc"
    with pytest.raises(BadRequest):
        decompress(b"not gzip", "gzip", 10)


# ------------------------------------------------------------------------------------------------ the HTTP app
def test_end_to_end_in_process_with_tokens(service) -> None:
    svc = service(ingest_token=INGEST, read_token=READ)
    spans = record_spans(lambda p: [agent_episode(p, fail_sql=i % 3 == 0) for i in range(12)])
    with TestClient(create_app(svc), base_url="http://127.0.0.1") as client:
        assert client.post("/v1/traces", content=proto_body(spans), headers=PB).status_code == 401
        r = client.post("/v1/traces", content=proto_body(spans), headers={**PB, "Authorization": f"Bearer {INGEST}"})
        assert r.status_code == 200 and r.headers["content-type"] == "application/x-protobuf"
        # Re-sent: acknowledged again, stored once.
        gz = gzip.compress(json_body(spans))
        r = client.post("/v1/traces", content=gz, headers={"Content-Type": "application/json",
                                                          "Content-Encoding": "gzip",
                                                          "Authorization": f"Bearer {INGEST}"})
        assert r.status_code == 200
        assert client.get("/api/live").status_code == 401
        assert client.get("/api/live", headers={"Authorization": f"Bearer {INGEST}"}).status_code == 401
        auth = {"Authorization": f"Bearer {READ}"}
        doc = _wait(client, auth, lambda d: d["n_episodes"] == 12 and (d["total"] or {}).get("n_traces") == 12)
        assert doc["status"]["counters"]["spans_duplicate"] == len(spans)
        assert doc["total"]["outcomes"] == {"success": 12, "failure": 0, "censored": 0, "invalid": 0,
                                            "unlabelled": 0}
        # The dashboard sets a cookie from ?token= and then loads without a header; CSP everywhere.
        r = client.get(f"/?token={READ}", follow_redirects=False)
        assert r.status_code == 303 and "tracetochain_read" in r.headers["set-cookie"]
        page = client.get("/")
        assert page.status_code == 200 and "script-src 'self'" in page.headers["content-security-policy"]
        assert "<script" not in page.text.split('id="initial-data"')[1].split("</script>")[0]
        # total and window, for the one agent and for the all-groups view
        assert client.get("/metrics").text.count("tracetochain_r_inf{") == 4
        bad = client.post("/v1/traces", content=b"{oops", headers={"Content-Type": "application/json",
                                                                   "Authorization": f"Bearer {INGEST}"})
        assert bad.status_code == 400 and bad.json()["reason"] == "json"
        big = client.post("/v1/traces", content=b"x" * (svc.config.max_request_bytes + 1),
                          headers={**PB, "Authorization": f"Bearer {INGEST}"})
        assert big.status_code == 413
        doc = _wait(client, auth, lambda d: d["status"]["counters"].get("rejected_too_large") == 1)
        assert doc["status"]["counters"]["rejected_json"] == 1
        assert client.get("/healthz").json() == {"status": "ok"}


def test_posted_verdicts_decide_held_episodes(service) -> None:
    svc = service(verdict_timeout=30.0)
    holder: dict = {}

    def run(p):
        for i in range(4):
            with tt.episode("agent", provider=p) as ep:
                holder.setdefault("ids", []).append(ep.trace_id)
                with tt.step("a", provider=p):
                    pass
                with tt.step("b" if i % 2 else "c", provider=p):
                    pass

    spans = record_spans(run)
    with TestClient(create_app(svc), base_url="http://127.0.0.1") as client:
        assert client.post("/v1/traces", content=proto_body(spans), headers=PB).status_code == 200
        doc = _wait(client, {}, lambda d: d["status"]["pending_verdicts"] == 4)
        assert doc["n_episodes"] == 0
        ids = holder["ids"]
        r = client.post("/v1/verdicts", json={"trace_id": ids[0], "outcome": "maybe"})
        assert r.status_code == 400 and "success_values" in r.json()["message"]
        r = client.post("/v1/verdicts", json={"verdicts": [
            {"trace_id": ids[0], "outcome": "success"}, {"trace_id": "0x" + ids[1].upper(), "outcome": "failed"},
            {"trace_id": ids[2], "reward": 0.2}, {"episode_id": ids[3], "resolved": True}]})
        assert r.status_code == 200 and r.json() == {"accepted": 4}
        doc = _wait(client, {}, lambda d: d["n_episodes"] == 4 and (d["total"] or {}).get("n_traces") == 4)
        assert doc["total"]["outcomes"]["success"] == 2 and doc["total"]["outcomes"]["failure"] == 2
        ep = client.get(f"/api/traces/{ids[1]}").json()
        assert ep["outcome"] == "failure" and ep["states"] == ["a", "b"]


@pytest.mark.slow
def test_episodes_without_outcome_are_kept_as_unlabelled_after_the_timeout(service) -> None:
    svc = service(verdict_timeout=0.2)
    spans = record_spans(lambda p: [agent_episode(p, verdict=None), agent_episode(p, verdict=True)])
    with TestClient(create_app(svc), base_url="http://127.0.0.1") as client:
        client.post("/v1/traces", content=proto_body(spans), headers=PB)
        doc = _wait(client, {}, lambda d: d["status"]["counters"].get("episodes_unlabelled") == 1
                    and (d["total"] or {}).get("n_traces") == 2)
        assert doc["status"]["open_traces"] == 0 and doc["status"]["counters"].get("episodes_dropped", 0) == 0
        total = doc["total"]
        assert total["outcomes"]["unlabelled"] == 1 and total["outcomes"]["success"] == 1
        assert total["n_labelled"] == 1 and total["n_unlabelled"] == 1
        # Its steps count (3 steps each), the chain rests on the one labelled episode.
        assert total["usage"]["unlabelled"]["steps"] == 3 and total["usage"]["labelled"]["steps"] == 3
        assert total["label_test"]["tested"] is False
        counters = doc["status"]["counters"]
        assert counters["outcome_unlabelled"] == 1 and counters["outcome_evaluation"] == 1
        metrics = client.get("/metrics").text
        assert 'tracetochain_episodes_unlabelled_total 1.0' in metrics
        assert 'tracetochain_episodes{group="(all)",outcome="unlabelled"} 1.0' in metrics
        assert 'tracetochain_outcome_sources_total{source="unlabelled"} 1.0' in metrics
    (row,) = [e for e in svc.store.episodes() if e.outcome == "unlabelled"]
    ep = svc.store.episode(row.episode_id)
    assert ep["states"] == ["plan", "sql_written", "sql_exec"]
    assert {s["outcome"] for s in ep["steps"]} == {"censored"}
    assert {s["termination_reason"] for s in ep["steps"]} == {"unlabelled"}


def _wait(client, headers, predicate, timeout: float = 20.0) -> dict:
    import time

    deadline = time.time() + timeout
    while True:
        doc = client.get("/api/live", headers=headers).json()
        if predicate(doc) or time.time() > deadline:
            assert predicate(doc), doc.get("status")
            return doc
        time.sleep(0.05)


# ------------------------------------------------------------------------------------------------ settings
def test_tokens_are_required_beyond_localhost(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs both an ingest token and a read token"):
        ServeConfig(store=tmp_path / "x.db", host="0.0.0.0").check()
    with pytest.raises(ValueError, match="too short"):
        ServeConfig(store=tmp_path / "x.db", host="0.0.0.0", ingest_token="short", read_token=READ).check()
    with pytest.raises(ValueError, match="must differ"):
        ServeConfig(store=tmp_path / "x.db", host="0.0.0.0", ingest_token=READ, read_token=READ).check()
    ServeConfig(store=tmp_path / "x.db", host="0.0.0.0", ingest_token=INGEST, read_token=READ).check()
    ServeConfig(store=tmp_path / "x.db", host="::1").check()


# ------------------------------------------------------------------------------------------------ rules
def test_rules_file_parses(tmp_path: Path) -> None:
    p = tmp_path / "rules.toml"
    p.write_text('min_traces = 5\n[[rule]]\nwhen = "P(tool:sql exec -> failure) > 0.1 over 1h"\n'
                 '[[rule]]\nname = "reliability"\nwhen = "R∞ < 0.8"\nseverity = "critical"\n'
                 '[[rule]]\nwhen = "attribution(\\"final answer\\") >= 0.5 over 3 windows"\n'
                 '[[rule]]\nwhen = "R(10) < 0.5 over all"\n', encoding="utf-8")
    rules = load_rules(p, WindowSpec("time", 300))
    assert [(r.metric, r.args, r.op, r.threshold, r.n_windows) for r in rules] == [
        ("transition", ("tool:sql exec", "failure"), ">", 0.1, 12), ("r_inf", (), "<", 0.8, 1),
        ("attribution", ("final answer",), ">=", 0.5, 3), ("reliability", (10,), "<", 0.5, None)]
    assert rules[1].name == "reliability" and rules[0].min_traces == 5


@pytest.mark.parametrize(("text", "line", "needle"), [
    ('[[rule]]\nwhen = "R∞ < 0.8"\nseverty = "x"\n', 3, "unknown field 'severty'"),
    ('[[rule]]\nname = "a"\n\nwhen = "Q(a) > 1"\n', 4, "unknown metric"),
    ('[[rule]]\nwhen = "R∞ < 0.8 over 7m"\n', 2, "not a whole number of windows"),
    ('[[rule]]\nwhen = "R∞ < 2"\n', 2, "outside [0, 1]"),
    ('[[rule]]\nwhen = "R∞ < 0.8 over 100 traces"\n', 2, "counts traces"),
    ('rule = "x"\n', 1, "two brackets"),
    ('[[rule]]\nwhen = "R∞ << 0.8"\n', 2, "unknown metric 'R∞ <'"),
    ('[[rule]]\nwhen = "R∞ less than 0.8"\n', 2, "cannot read"),
    ('[[rule]\nwhen = 1\n', 1, "not valid TOML"),
])
def test_rules_file_errors_name_the_line(tmp_path: Path, text: str, line: int, needle: str) -> None:
    p = tmp_path / "rules.toml"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(RulesFileError) as err:
        load_rules(p, WindowSpec("time", 300))
    assert f"rules.toml:{line}:" in str(err.value) and needle in str(err.value)


# ------------------------------------------------------------------------------------------------ counting
@st.composite
def traces_strategy(draw):
    n = draw(st.integers(1, 25))
    recs = []
    for i in range(n):
        length = draw(st.integers(1, 6))
        outcome = draw(st.sampled_from(["success", "failure", "censored", "invalid"]))
        for j in range(length):
            recs.append({"trace_id": f"t{i}", "step_idx": j, "state": draw(st.sampled_from("abcd")),
                         "outcome": outcome})
    return recs


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(traces_strategy(), st.integers(1, 7))
def test_running_counts_add_up_to_count_transitions(records, window) -> None:
    table = TraceTable.from_records(records)
    codes, names = table.state_labels()
    offsets, outcomes = table.offsets, table.outcomes()
    live = LiveAnalysis(WindowSpec("count", window))
    from tracetochain.serve._store import EpisodeRow

    rows = [EpisodeRow(i + 1, tid, tid, 0.0, None, ("success", "failure", "censored", "invalid")[outcomes[i]],
                       tuple(names[c] for c in codes[offsets[i]:offsets[i + 1]]))
            for i, tid in enumerate(table.trace_ids)]
    live.add_episodes(rows)
    expected = count_transitions(table)
    for got in (live.total, RunningCounts.total_of(w.counts for w in live.windows.values())):
        c = got.to_counts(list(expected.state_names))
        assert np.array_equal(c.transitions, expected.transitions)
        assert np.array_equal(c.exits_success, expected.exits_success)
        assert np.array_equal(c.exits_failure, expected.exits_failure)
        assert np.array_equal(c.initial, expected.initial)
        assert c.n_traces == expected.n_traces
    assert len(live.windows) == -(-len(rows) // window)


# ------------------------------------------------------------------------------------------------ output safety
def test_trace_page_and_script_json_escape_trace_content() -> None:
    evil = '<script>alert(1)</script><img src=x onerror=alert(2)>'
    page = trace_html({"episode_id": evil, "trace_id": "t", "outcome": "failure", "t_start": None,
                       "states": [evil], "steps": [{"step_kind": "tool", "tool_name": evil, "text": evil}]})
    assert "<script>" not in page and "<img" not in page and "&lt;script&gt;" in page
    text = script_json({"s": "</script><!-- \u2028"})
    assert "</" not in text and "<!--" not in text and "\u2028" not in text
    assert json.loads(text) == {"s": "</script><!-- \u2028"}


def test_webhook_sink_posts_alerts() -> None:
    got: list[dict] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            got.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sink = WebhookSink(f"http://127.0.0.1:{server.server_address[1]}/hook", backoff=0.01)
    sink.send({"kind": "rule", "message": "R∞ < 0.8"})
    sink.close()
    server.shutdown()
    assert got == [{"kind": "rule", "message": "R∞ < 0.8"}] and sink.sent == 1
    with pytest.raises(ValueError):
        WebhookSink("file:///etc/passwd")


def test_parquet_export_is_the_canonical_table(service, tmp_path: Path) -> None:
    svc = service()
    spans = record_spans(lambda p: [agent_episode(p, fail_sql=i % 2 == 0) for i in range(6)])
    with TestClient(create_app(svc), base_url="http://127.0.0.1") as client:
        client.post("/v1/traces", content=proto_body(spans), headers=PB)
        _wait(client, {}, lambda d: d["n_episodes"] == 6)
        r = client.get("/api/export.parquet")
        assert r.status_code == 200
    out = tmp_path / "steps.parquet"
    out.write_bytes(r.content)
    table = TraceTable.read(out)
    assert table.n_traces == 6 and table.n_steps == 18
    assert table.outcome_counts()["success"] == 6
    assert svc.store.export_parquet(tmp_path / "again.parquet") == 6


def test_time_windows_complete_and_drift_once() -> None:
    from tracetochain.serve._store import EpisodeRow

    now = [1000.0]
    live = LiveAnalysis(WindowSpec("time", 60), min_traces=20, clock=lambda: now[0])
    rng = np.random.default_rng(0)

    def episodes(t0: float, p_fail: float, n: int, start: int) -> list:
        out = []
        for i in range(n):
            fail = rng.random() < p_fail
            out.append(EpisodeRow(start + i, f"e{start + i}", f"e{start + i}", t0 + i * 0.5, t0 + i * 0.5,
                                  "failure" if fail else "success", ("plan", "act")))
        return out

    live.add_episodes(episodes(0.0, 0.1, 100, 0))      # window 0 (t in [0, 60))
    live.add_episodes(episodes(60.0, 0.1, 100, 100))   # window 1
    live.add_episodes(episodes(120.0, 0.7, 100, 200))  # window 2: the agent broke
    now[0] = 150.0
    doc = live.snapshot()
    assert [w["complete"] for w in doc["series"]] == [True, True, False]
    assert doc["series"][1]["drift"]["tested"] and not doc["series"][1]["drift"]["alert"]
    assert live.pop_drift_events() == []
    now[0] = 200.0
    doc = live.snapshot()
    assert doc["series"][2]["drift"]["alert"] and doc["series"][2]["label"] == "1970-01-01T00:02:00Z"
    (event,) = live.pop_drift_events()
    assert event["window"] == 2 and event["differing_states"] == ["act"]
    assert event["moved"][0]["from"] == "act" and event["examples"]
    assert live.snapshot() and live.pop_drift_events() == []  # tested once


def test_outcome_attribute_decides_when_named(service) -> None:
    svc = service(reader_options={"outcome_attribute": "task.passed", "task_attribute": "task.id"})

    def run(p) -> None:
        for i in range(4):
            with tt.episode("agent", provider=p, **{"task.passed": i != 1, "task.id": f"q{i % 2}"}):
                with tt.step("lookup", provider=p):
                    pass

    spans = record_spans(run)
    with TestClient(create_app(svc), base_url="http://127.0.0.1") as client:
        client.post("/v1/traces", content=proto_body(spans), headers=PB)
        doc = _wait(client, {}, lambda d: d["n_episodes"] == 4 and (d["total"] or {}).get("n_traces") == 4)
        decided = svc.store.episodes()[0].trace_id
        assert client.post("/v1/verdicts", json={"trace_id": decided, "outcome": "failure"}).status_code == 200
        late = _wait(client, {}, lambda d: d["status"]["counters"].get("late_verdicts") == 1)
        assert late["total"]["outcomes"] == doc["total"]["outcomes"]  # a decided episode is not re-decided
    assert doc["total"]["outcomes"]["success"] == 3 and doc["total"]["outcomes"]["failure"] == 1
    steps = svc.store.steps_of()
    assert sorted({s["task_id"] for s in steps}) == ["q0", "q1"]
