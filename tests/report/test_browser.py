"""The HTML report in a real browser: Debian's Chromium driven by playwright (no browser download).

Skipped with a clear message when /usr/bin/chromium or playwright is missing; `.ci/run` installs both.
"""

from __future__ import annotations

import functools
import http.server
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import tracetochain as tt
from tracetochain.pipeline import fit_chain
from tracetochain.report import build_report, render_html

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


def test_tau_bench_report_renders_plots_and_tables(browser, serve, shared_data: Path, tmp_path: Path) -> None:
    traces = tt.read_traces(shared_data / "tau-bench" / "historical_trajectories" / "gpt-4o-airline.json")
    html = render_html(build_report(fit_chain(traces, states="ward", vocabulary="chat"), horizon=40))
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


def test_malicious_trace_text_stays_inert(browser, serve) -> None:
    evil = '"><img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'
    recs = [{"trace_id": f"t{i}", "step_idx": j, "step_kind": "tool",
             "tool_name": evil if j else "<script>x()</script>", "outcome": "success" if i % 2 else "failure"}
            for i in range(20) for j in range(1 + i % 3)]
    traces = tt.TraceTable.from_records(recs, source=evil)
    html = render_html(build_report(fit_chain(traces), horizon=20))
    page = browser.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(serve("evil.html", html))
    assert page.evaluate("window.__xss === undefined")
    assert page.locator("img").count() == 0 and page.locator("body script").count() == 0
    assert evil in page.locator("body").inner_text()  # shown as text, not executed
    assert dialogs == []
    page.close()
