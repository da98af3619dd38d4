"""Every reported scalar of the quantity registry appears, with its interval and certification status, on every
surface: `fit` (text and --json), the report (JSON document, HTML, Markdown), the CI gates, the live rules, the live
document and dashboard, and /metrics. Nothing here names a quantity: a new registry entry is checked automatically."""

from __future__ import annotations

import html
import json
import time
from importlib import resources
from pathlib import Path

import pytest
from cli_runner import run_cli

import tracetochain as tt
from tracetochain.analysis import analyze
from tracetochain.audit import OUTPUTS
from tracetochain.quantities import QUANTITIES, format_row, reported_scalars
from tracetochain.report import build_report, render_html
from tracetochain.report._markdown import render_markdown
from tracetochain.report.gates import evaluate_gate
from tracetochain.serve import WindowSpec
from tracetochain.serve._rules import parse_rule_expression

SCALARS = [q.key for q in reported_scalars()]
FAST = {"n_bootstrap": 19, "n_permutations": 19, "trials_permutations": 99}


@pytest.fixture(scope="module")
def fit_text() -> str:
    r = run_cli("fit", str(tt.datasets.example_path()), "--samples", "200")
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.fixture(scope="module")
def fit_json() -> dict:
    r = run_cli("fit", str(tt.datasets.example_path()), "--samples", "200", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def report_doc() -> dict:
    traces = tt.datasets.simulate_traces(tt.datasets.notation_chain(), 400, seed=5)
    return json.loads(json.dumps(build_report(analyze(traces, samples=100, **FAST), horizon=30)))


def test_the_registry_has_reported_scalars() -> None:
    assert "r_inf" in SCALARS and "median_steps_to_success" in SCALARS


@pytest.mark.parametrize("key", SCALARS)
def test_fit_text_and_json(key: str, fit_text: str, fit_json: dict) -> None:
    q = QUANTITIES[key]
    line = next((x for x in fit_text.splitlines() if x.strip().startswith(q.title)), None)
    assert line is not None, f"{q.title} not printed by fit"
    entry = fit_json["intervals"]["metrics"][key]
    if entry["lower"] is not None:
        assert "[" in line  # its interval on the same line
    assert key in fit_json  # the metrics document
    rows = {r["key"]: r for r in fit_json["quantities"]}
    assert rows[key]["lower"] == entry["lower"] and rows[key]["status"] == "not audited"


@pytest.mark.slow
@pytest.mark.parametrize("key", SCALARS)
def test_report_json_html_markdown(key: str, report_doc: dict) -> None:
    q = QUANTITIES[key]
    rows = {r["key"]: r for r in report_doc["quantities"]}
    row = rows[key]
    assert row["status"] == report_doc["output_status"][q.output]  # the certificate's status of its output
    assert q.output in OUTPUTS and row["rests_on"] == list(OUTPUTS[q.output])
    assert row["lower"] == report_doc["intervals"]["metrics"][key]["lower"]
    page = render_html(report_doc)
    assert f'data-key="{key}"' in page and html.escape(q.title) in page
    block = page.split(f'data-key="{key}"')[1].split("</tr>")[0]
    assert row["status"] in block
    md = render_markdown(report_doc)
    section = md.split("Every reported number")[1].split("</details>")[0]
    value, interval = format_row(row)
    assert f" | {value} | {interval} | {row['status']} |" in section  # the label is Markdown-escaped


@pytest.mark.parametrize("key", [k for k in SCALARS if QUANTITIES[k].gateable])
def test_gates(key: str, report_doc: dict) -> None:
    result = evaluate_gate(f"{key} >= 0", report_doc)
    if report_doc["output_status"][QUANTITIES[key].output] == "withheld":
        assert not result.passed and "withheld" in result.message
    else:
        assert result.value is not None and result.passed
    q = QUANTITIES[key]
    entry = report_doc["intervals"]["metrics"][key]
    conservative = evaluate_gate(f"{key} >= 0", report_doc, use="lower")
    if result.value is not None and entry["lower"] is not None and q.better is not None:
        # The conservative end: the lower bound of what should be high, the upper bound of what should be low.
        assert conservative.value == entry["upper" if q.better == "lower" else "lower"]
    for alias in QUANTITIES[key].aliases:
        assert evaluate_gate(f"{alias} >= 0", report_doc).expression == f"{alias} >= 0"


@pytest.mark.parametrize("key", [k for k in SCALARS if QUANTITIES[k].alertable])
def test_live_rule_expressions(key: str) -> None:
    metric, *_ = parse_rule_expression(f"{key} < 0.5 over all", WindowSpec("count", 10))
    assert metric == key


def test_dashboard_renders_the_quantities_table() -> None:
    static = resources.files("tracetochain.serve").joinpath("static")
    assert 'id="quantities"' in static.joinpath("dashboard.html").read_text(encoding="utf-8")
    js = static.joinpath("dashboard.js").read_text(encoding="utf-8")
    assert "drawQuantities(doc)" in js and "tot.quantities" in js


def _spans(n: int) -> bytes:
    """n instrumented episodes (a third fail), as one OTLP protobuf request."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import tracetochain.instrument as ti

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    for i in range(n):
        with ti.episode("agent", provider=provider) as ep:
            for name in ("plan", "sql_exec", "plan", "answer")[: 1 + i % 4]:
                with ti.step(name, provider=provider):
                    pass
            ep.verdict(i % 3 != 0)
    provider.shutdown()
    return encode_spans(list(exporter.get_finished_spans())).SerializeToString()


def test_live_document_and_metrics(tmp_path: Path) -> None:
    pytest.importorskip("starlette")
    pytest.importorskip("opentelemetry.sdk")
    from starlette.testclient import TestClient

    from tracetochain.serve import IngestSettings, LiveService, ServeConfig, create_app

    cfg = ServeConfig(store=tmp_path / "live.db", window=WindowSpec("count", 10), alerts_to_stdout=False,
                      ingest=IngestSettings(settle=0.0, verdict_timeout=300.0, tick=0.02), refresh=0.05, samples=200)
    with TestClient(create_app(LiveService(cfg)), base_url="http://127.0.0.1") as client:
        r = client.post("/v1/traces", content=_spans(30), headers={"Content-Type": "application/x-protobuf"})
        assert r.status_code == 200
        deadline = time.time() + 30
        while True:
            doc = client.get("/api/live").json()
            if (doc.get("total") or {}).get("n_traces") == 30 or time.time() > deadline:
                break
            time.sleep(0.05)
        rows = {q["key"]: q for q in doc["total"]["quantities"]}
        assert set(SCALARS) <= set(rows)
        for key in SCALARS:
            assert {"point", "lower", "upper", "status", "label"} <= set(rows[key])
        assert rows["r_inf"]["point"] == pytest.approx(doc["total"]["r_inf"]["point"])
        assert rows["r_inf"]["lower"] == pytest.approx(doc["total"]["r_inf"]["lower"])
        metrics = client.get("/metrics").text
        for key in SCALARS:
            if rows[key]["point"] is not None:
                assert f'quantity="{key}"' in metrics, key
