"""The HTML report in a real browser: Debian's Chromium driven by playwright (no browser download).

Skipped with a clear message when /usr/bin/chromium or playwright is missing; `.ci/run` installs both.
"""

from __future__ import annotations

import functools
import http.server
import re
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import tracetochain as tt
from tracetochain.report import build_report, render_html

#: Enough replicates for a page with every section, few enough for a quick test.
FAST = {"samples": 200, "n_bootstrap": 49, "n_permutations": 49}

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not Path(CHROMIUM).exists():
        pytest.skip("Chromium is not installed (apt-get install chromium); browser tests skipped")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[callable]:
    """Serve tmp_path on 127.0.0.1 (an ephemeral port), as a user opening the report from a local server would."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def url(name: str, html: str) -> str:
        (tmp_path / name).write_text(html, encoding="utf-8")
        return f"http://127.0.0.1:{server.server_address[1]}/{name}"

    yield url
    server.shutdown()


@pytest.mark.slow
def test_tau_bench_report_renders_plots_and_tables(browser, serve, shared_data: Path, tmp_path: Path) -> None:
    traces = tt.read_traces(shared_data / "tau-bench" / "historical_trajectories" / "gpt-4o-airline.json")
    result = tt.analyze(traces, states="ward", state_options={"vocabulary": "chat"}, **FAST)
    html = render_html(build_report(result, horizon=40))
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(serve("report.html", html))
    for selector in ("#rd-plot svg", "#fpt-plot svg", "#graph svg", "#state-table", "#verdict", "#r-inf"):
        assert page.locator(selector).first.is_visible(), selector
    assert page.locator("#state-table tr").count() > 3
    assert page.locator("#graph svg .node").count() >= 4
    box = page.locator("#rd-plot svg").bounding_box()
    assert box is not None and box["width"] > 300 and box["height"] > 150
    assert page.locator("#r-inf").inner_text().startswith("0.")
    shot = tmp_path / "report.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 20_000
    assert errors == []
    page.close()


@pytest.mark.slow
def test_malicious_trace_text_stays_inert(browser, serve) -> None:
    evil = '"><img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'
    recs = [{"trace_id": f"t{i}", "step_idx": j, "step_kind": "tool",
             "tool_name": evil if j else "<script>x()</script>", "outcome": "success" if i % 2 else "failure"}
            for i in range(20) for j in range(1 + i % 3)]
    traces = tt.TraceTable.from_records(recs, source=evil)
    html = render_html(build_report(tt.analyze(traces, **FAST), horizon=20))
    page = browser.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(serve("evil.html", html))
    assert page.evaluate("window.__xss === undefined")
    assert page.locator("img").count() == 0 and page.locator("body script").count() == 0
    assert evil in page.locator("body").inner_text()  # shown as text, not executed
    assert dialogs == []
    page.close()


def sixty_state_report() -> str:
    """A report of a 60-state chain with long state names (tool names as agents spell them)."""
    rng = np.random.default_rng(7)
    m = 60
    names = [f"tool:{verb}_{noun}_{i}" for i, (verb, noun) in enumerate(
        zip(rng.choice(["get", "search", "update", "cancel", "check", "list"], m),
            rng.choice(["reservation_details", "flight_status", "user_profile", "order_items", "payment"], m),
            strict=True))]
    Q = rng.dirichlet(np.full(m + 2, 0.3), size=m)
    Q[:, :m] *= 0.9 / Q[:, :m].sum(axis=1, keepdims=True)  # every state exits with probability 0.1
    exits = rng.uniform(0.2, 0.8, m)
    chain = tt.AbsorbingChain(Q[:, :m], 0.1 * exits, 0.1 * (1 - exits), pi0=rng.dirichlet(np.ones(m)),
                              state_names=names)
    traces = tt.datasets.simulate_traces(chain, 600, 3)
    return render_html(build_report(tt.analyze(traces, **FAST), horizon=40))


@pytest.mark.slow
def test_sixty_state_report_graph_is_legible_at_1400px(browser, serve, tmp_path: Path) -> None:
    """The chain graph of a 60-state corpus fits a 1400 px wide window, draws at most 14 states plus the two
    exits with at most 3 transitions each, its labels do not overlap, and every state and transition is still in the
    tables. The screenshot is kept in the test's folder (``report-60-states.png``) for a person to look at."""
    from tracetochain.report._graph import MAX_EDGES_PER_STATE, MAX_GRAPH_STATES

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(serve("report60.html", sixty_state_report()))
    graph = page.locator("#graph svg")
    box = graph.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 1400
    assert page.locator("#graph svg .node").count() == MAX_GRAPH_STATES + 2
    assert "13 most visited of the 60 states" in page.locator("#states").inner_text()
    edges = page.locator("#graph svg path[marker-end]").count()
    assert edges <= MAX_GRAPH_STATES * (MAX_EDGES_PER_STATE + 2)
    assert page.locator("#state-table tr").count() == 61  # every state in the table
    assert page.locator("#transitions tr").count() > 100
    labels = page.evaluate("""() => [...document.querySelectorAll('#graph svg .node text')].map(t => {
        const r = t.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; })""")
    for i, a in enumerate(labels):
        for b in labels[i + 1:]:
            overlap = min(a[2], b[2]) - max(a[0], b[0]) > 1 and min(a[3], b[3]) - max(a[1], b[1]) > 1
            assert not overlap, (a, b)
    graph.screenshot(path=str(tmp_path / "graph-60-states.png"))
    page.screenshot(path=str(tmp_path / "report-60-states.png"), full_page=True)
    assert (tmp_path / "graph-60-states.png").stat().st_size > 10_000
    page.close()


@pytest.mark.slow
def test_plots_say_when_there_is_nothing_to_show(browser, serve) -> None:
    recs = [{"trace_id": f"t{i}", "step_idx": j, "state": ["plan", "act"][j % 2], "outcome": "failure"}
            for i in range(30) for j in range(1 + i % 4)]
    html = render_html(build_report(tt.analyze(tt.TraceTable.from_records(recs), pseudocount=0.0, **FAST), horizon=20))
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(serve("none.html", html))
    assert "no trace succeeded" in page.locator("#fpt-plot").inner_text()
    ticks = page.evaluate("""() => [...document.querySelectorAll('#rd-plot svg text')].map(t => t.textContent)""")
    assert not any(re.fullmatch(r"\\d+\\.\\d*[1-9]", t.strip()) for t in ticks if t.strip()[:1].isdigit()
                   and "P(" not in t), ticks  # the step axis has whole-number ticks only
    page.close()
