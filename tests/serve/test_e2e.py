"""End to end: an agent instrumented with the OpenTelemetry SDK exports 1,000 traces over OTLP/HTTP to a real
`tracetochain serve`; the served chain equals the offline fit of the same spans; an injected regression raises an
alert within one window; the dashboard shows both in Chromium."""

from __future__ import annotations

import json
import shutil
import urllib.request
from pathlib import Path

import pytest
from serve_helpers import ServeProcess, run_agent

import tracetochain as tt
from tracetochain.pipeline import fit_chain

RULES = """
min_traces = 50

[[rule]]
name = "sql failures"
when = "P(sql_exec -> failure) > 0.2"
severity = "critical"

[[rule]]
when = "R∞ < 0.3 over all"
"""

N, REGRESS_AT, WINDOW = 1000, 600, 200
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One serve process fed by the agent script (shared by the tests of this module)."""
    tmp = tmp_path_factory.mktemp("e2e")
    (tmp / "rules.toml").write_text(RULES, encoding="utf-8")
    proc = ServeProcess(tmp / "live.db", "--window", str(WINDOW), "--settle", "0.2", "--rules",
                        str(tmp / "rules.toml")).start()
    try:
        spans = tmp / "spans.json"
        run_agent(proc.url, N, spans, "--regress-after", str(REGRESS_AT), "--seed", "7")
        doc = proc.wait_for(lambda d: d["n_episodes"] >= N and d["status"]["open_traces"] == 0
                            and d["total"]["n_traces"] == N
                            and len(d["series"]) == N // WINDOW and all(w["complete"] for w in d["series"]),
                            timeout=60)
        yield {"proc": proc, "doc": doc, "spans": spans, "tmp": tmp}
    finally:
        proc.stop()


def _by_name(chain: tt.AbsorbingChain) -> dict[tuple[str, str], float]:
    out = {}
    for i, a in enumerate(chain.state_names):
        for j, b in enumerate(chain.state_names):
            out[(a, b)] = float(chain.Q[i, j])
        out[(a, "success")] = float(chain.R_success[i])
        out[(a, "failure")] = float(chain.R_failure[i])
        out[(a, "start")] = float(chain.pi0[i])
    return out


@pytest.mark.slow
def test_served_chain_equals_offline_fit(served: dict) -> None:
    doc = served["doc"]
    assert doc["n_episodes"] == N
    assert doc["status"]["counters"]["spans_received"] > 4 * N
    assert doc["status"]["counters"].get("episodes_dropped", 0) == 0
    served_chain = tt.AbsorbingChain.from_dict(doc["total"]["chain"])
    offline = fit_chain(tt.read_traces(served["spans"], "otlp")).chain
    assert set(served_chain.state_names) == set(offline.state_names)
    a, b = _by_name(served_chain), _by_name(offline)
    assert a.keys() == b.keys()
    assert max(abs(a[k] - b[k]) for k in a) < 1e-12
    assert served_chain.r_inf == pytest.approx(offline.r_inf, abs=1e-12)
    # The counts behind both are the same numbers, not just close probabilities.
    sc, oc = served_chain.metadata["counts"], offline.metadata["counts"]
    assert sc["n_traces"] == oc["n_traces"]
    assert sum(map(sum, sc["transitions"])) == sum(map(sum, oc["transitions"]))


@pytest.mark.slow
def test_regression_alert_within_one_window(served: dict) -> None:
    doc = served["proc"].get_json("/api/live")
    first_regressed = REGRESS_AT // WINDOW
    alerts = doc["alerts"]
    drift = [a for a in alerts if a["kind"] == "drift"]
    assert drift and min(a["window"] for a in drift) == first_regressed
    assert all(a["window"] >= first_regressed for a in drift)  # no false alarm before the regression
    first = next(a for a in drift if a["window"] == first_regressed)
    assert "sql_exec" in first["differing_states"]
    up = [m for m in first["moved"] if (m["from"], m["to"]) == ("sql_exec", "failure")]
    assert up and up[0]["change"] > 0.1 and up[0]["examples"]
    rule = [a for a in alerts if a["kind"] == "rule" and a["rule"] == "sql failures" and a["status"] == "firing"]
    assert rule and rule[-1]["window"] == first_regressed
    # Root-cause pointers lead to failing episodes that took sql_exec -> failure.
    example = rule[-1]["examples"][0]
    ep = served["proc"].get_json(f"/api/traces/{example}")
    assert ep["outcome"] == "failure" and ep["states"][-1] == "sql_exec"
    # The same alerts went to stdout as JSON lines.
    lines = [json.loads(x) for x in served["proc"].out.read_text().splitlines() if x.strip()]
    assert any(x["kind"] == "drift" and x["window"] == first_regressed for x in lines)
    # R∞ per window: the regressed windows are clearly lower.
    r = [w["r_inf"] for w in doc["series"]]
    assert max(r[first_regressed:]) < min(r[:first_regressed]) - 0.1


@pytest.mark.slow
def test_metrics_and_report(served: dict) -> None:
    proc = served["proc"]
    with urllib.request.urlopen(proc.url + "/metrics", timeout=30) as resp:
        text = resp.read().decode()
    for group in ("(all)", "sql-agent"):  # the all-groups view and the agent's own chain (its service.name)
        assert f'tracetochain_r_inf{{group="{group}",scope="total"}}' in text
        assert f'tracetochain_state_failure_probability{{group="{group}",scope="window",state="sql_exec"}}' in text
    assert 'tracetochain_alert_firing{group="sql-agent",rule="sql failures",severity="critical"} 1.0' in text
    with urllib.request.urlopen(proc.url + "/report?window=3&audit=0", timeout=120) as resp:
        page = resp.read().decode()
    assert 'id="r-inf"' in page and "Content-Security-Policy" in page


@pytest.mark.slow
@pytest.mark.browser
def test_dashboard_in_chromium(served: dict) -> None:
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(chromium).exists():
        pytest.skip("Chromium is not installed (apt-get install chromium); browser tests skipped")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    proc = served["proc"]
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=ARGS)
        page = browser.new_page(viewport={"width": 1200, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto(proc.url + "/")
        page.wait_for_function("document.body.getAttribute('data-episodes') === '1000'", timeout=20_000)
        r_inf = float(page.locator("#r-inf").inner_text())
        assert 0.0 < r_inf < 1.0
        assert float(page.locator("#r-inf-total").inner_text()) == pytest.approx(
            served["doc"]["total"]["r_inf"]["point"], abs=5e-4)
        assert page.locator("#series-svg .point").count() == N // WINDOW
        assert page.locator("#series-svg .point.drift").count() >= 1
        assert page.locator("#series-svg .band").count() == 1
        assert page.locator("#graph-svg .node").count() >= 5
        assert page.locator("#graph-svg .edge.moved-up").count() >= 1  # sql_exec -> failure went up
        assert page.locator("#n-labelled").inner_text() == "1000 / 1000"  # every episode labelled
        # One chain per agent: the agent's own view (its service.name) holds the same episodes.
        page.goto(proc.url + "/?group=sql-agent")
        page.wait_for_selector('body[data-episodes="1000"]', timeout=20_000)  # drawn from /api/live?group=
        assert page.locator("#groups a.group.current").inner_text().startswith("sql-agent · 1000")
        assert page.locator("#alerts li .delivery").count() == 0  # no webhook configured
        alert = page.locator("#alerts li", has_text="sql_exec").first
        assert alert.is_visible()
        alert.locator("a.example").first.click()
        page.wait_for_selector("#steps")
        assert page.locator("#episode-outcome").inner_text() == "failure"
        assert page.locator("#steps tbody tr").count() >= 3
        browser.close()
    assert errors == []
