"""Trace content on the live dashboard stays inert in a real browser (Chromium via playwright)."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest
import uvicorn
from serve_helpers import free_port
from test_service import PB, proto_body, record_spans

import tracetochain.instrument as tt
from tracetochain.serve import IngestSettings, LiveService, ServeConfig, WindowSpec, create_app

pytestmark = pytest.mark.browser
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
EVIL = '"><img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'


@pytest.mark.slow
def test_malicious_state_names_stay_inert(tmp_path: Path) -> None:
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(chromium).exists():
        pytest.skip("Chromium is not installed (apt-get install chromium); browser tests skipped")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    import httpx

    def run(p) -> None:
        for i in range(40):
            with tt.episode("agent", provider=p) as ep:
                with tt.step("plan", kind="llm", provider=p):
                    pass
                with tt.step(EVIL, provider=p) as s:
                    if i % 3 == 0:
                        s.fail("</script><script>window.__xss=3</script>")
                ep.verdict(i % 3 != 0)

    svc = LiveService(ServeConfig(store=tmp_path / "live.db", window=WindowSpec("count", 20), alerts_to_stdout=False,
                                  ingest=IngestSettings(settle=0.0, tick=0.02), refresh=0.1, samples=200))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(svc), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            if server.started:
                break
            time.sleep(0.1)
        httpx.post(url + "/v1/traces", content=proto_body(record_spans(run)), headers=PB).raise_for_status()
        for _ in range(200):
            if httpx.get(url + "/api/live").json()["n_episodes"] == 40:
                break
            time.sleep(0.1)
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=ARGS)
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(url + "/")
            page.wait_for_function("document.body.getAttribute('data-episodes') === '40'", timeout=20_000)
            assert page.locator("#states tbody tr", has_text="onerror").count() == 1  # shown as text
            assert page.evaluate("window.__xss") is None
            assert page.locator("img[src=x]").count() == 0 and page.locator("#states script").count() == 0
            browser.close()
        assert errors == []
    finally:
        server.should_exit = True
        thread.join(30)


@pytest.mark.slow
def test_prototype_state_names_render(tmp_path: Path) -> None:
    """States named like Object.prototype's members (N9 of the second attack pass) draw like any other."""
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(chromium).exists():
        pytest.skip("Chromium is not installed (apt-get install chromium); browser tests skipped")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    import httpx

    names = ["constructor", "__proto__", "toString"]

    def run(p) -> None:
        for i in range(30):
            with tt.episode("agent", provider=p) as ep:
                for name in names[: 1 + i % 3]:
                    with tt.step(name, provider=p):
                        pass
                ep.verdict(i % 4 != 0)

    svc = LiveService(ServeConfig(store=tmp_path / "live.db", window=WindowSpec("count", 100), alerts_to_stdout=False,
                                  ingest=IngestSettings(settle=0.0, tick=0.02), refresh=0.1, samples=200))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(svc), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            if server.started:
                break
            time.sleep(0.1)
        httpx.post(url + "/v1/traces", content=proto_body(record_spans(run)), headers=PB).raise_for_status()
        for _ in range(200):
            if (httpx.get(url + "/api/live").json().get("current") or {}).get("n_traces") == 30:
                break
            time.sleep(0.1)
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=ARGS)
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(url + "/")
            page.wait_for_function("document.body.getAttribute('data-episodes') === '30'", timeout=20_000)
            assert page.locator("#states tbody tr").count() == 3
            assert page.locator("#graph-svg g.node").count() == 5  # three states, success, failure
            assert "cannot" not in (page.locator("#status").text_content() or "")
            browser.close()
        assert errors == []
    finally:
        server.should_exit = True
        thread.join(30)
