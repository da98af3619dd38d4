"""A board of ten configurations in a real browser (Debian's Chromium driven by playwright; skipped without them)."""

from __future__ import annotations

import http.server
import shutil
import threading
from pathlib import Path

import pytest
from board_data import configs

from tracetochain.analysis._board import board
from tracetochain.report._board import render_board_html

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.mark.slow
def test_ten_configuration_board_renders_with_intervals_ranks_and_the_statement(tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip("Chromium is not installed (apt-get install chromium); browser tests skipped")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")

    result = board(configs(10), by="config", ks=(1, 3), samples=200, n_bootstrap=50, audit=False)
    (tmp_path / "board.html").write_text(render_board_html(result.to_dict()), encoding="utf-8")
    handler = lambda *a: http.server.SimpleHTTPRequestHandler(*a, directory=str(tmp_path))  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"http://127.0.0.1:{server.server_address[1]}/board.html")
            assert page.locator("#board tr").count() == 11  # header + 10 groups
            assert page.locator("#pairs tr").count() == 46
            assert "Holm" in page.locator("#multiplicity").inner_text()
            cells = page.locator(".rank-interval").all_inner_texts()
            assert len(cells) == 10 and all("–" in c for c in cells)
            assert all("[" in c for c in page.locator(".r-inf").all_inner_texts())  # every R∞ has its interval
            svg = page.locator("figure svg")
            box = svg.bounding_box()
            assert box is not None and box["width"] > 500 and box["height"] > 200
            assert svg.locator("circle").count() == 10
            assert page.locator("b").count() == 0  # the group named <b>cfg00</b> is text, not markup
            shot = tmp_path / "board.png"
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 20_000 and errors == []
            browser.close()
    finally:
        server.shutdown()
