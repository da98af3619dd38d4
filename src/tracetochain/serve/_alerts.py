"""Where alerts go: stdout as JSON lines, a webhook (JSON POST), and the store (for the dashboard).

Every alert is one JSON object: ``{"kind": "rule" | "drift", "status", "message", "at", "examples": [episode ids],
"links": {...}, ...}``. The webhook is posted from a background thread with a timeout and a few retries with
backoff, so a slow receiver never holds up ingest; an undeliverable alert is logged and counted, never lost from
the store.
"""

from __future__ import annotations

import json
import logging
import queue
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any, TextIO

log = logging.getLogger("tracetochain.serve")


class StdoutSink:
    """One JSON line per alert on stdout (or any text stream), flushed at once."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream

    def send(self, alert: dict[str, Any]) -> None:
        out = self.stream or sys.stdout
        out.write(json.dumps(alert, ensure_ascii=False, allow_nan=False) + "\n")
        out.flush()

    def close(self) -> None:
        pass


class WebhookSink:
    """POST each alert as JSON to ``url`` (from a background thread; ``retries`` attempts with backoff)."""

    def __init__(self, url: str, *, timeout: float = 5.0, retries: int = 3, backoff: float = 1.0,
                 headers: dict[str, str] | None = None) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"the webhook URL must start with http:// or https://, got {url!r}")
        self.url = url
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.headers = dict(headers or {})
        self.sent = 0
        self.failed = 0
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="tracetochain-webhook", daemon=True)
        self._thread.start()

    def send(self, alert: dict[str, Any]) -> None:
        self._queue.put(alert)

    def close(self, timeout: float = 10.0) -> None:
        self._queue.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            alert = self._queue.get()
            if alert is None:
                return
            body = json.dumps(alert, ensure_ascii=False, allow_nan=False).encode("utf-8")
            for attempt in range(self.retries):
                req = urllib.request.Request(self.url, data=body, method="POST",
                                             headers={"Content-Type": "application/json", **self.headers})
                try:
                    with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                        resp.read()
                    self.sent += 1
                    break
                except (urllib.error.URLError, OSError, ValueError) as exc:
                    if attempt + 1 == self.retries:
                        self.failed += 1
                        log.warning("webhook %s: alert not delivered after %d attempts (%s)", self.url,
                                    self.retries, exc)
                    else:
                        time.sleep(self.backoff * 2 ** attempt)


class AlertHub:
    """Stamps alerts (time, links to example traces and the window's report) and fans them out to the sinks."""

    def __init__(self, sinks: list[Any], record: Callable[[dict[str, Any]], None] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.sinks = sinks
        self.record = record
        self.clock = clock
        self.recent: list[dict[str, Any]] = []

    def emit(self, alert: dict[str, Any]) -> dict[str, Any]:
        alert = {"at": self.clock(), **alert}
        alert.setdefault("status", "firing")
        alert["links"] = {"examples": [f"/traces/{e}" for e in alert.get("examples", [])],
                          "report": f"/report?window={alert['window']}" if alert.get("window") is not None else None}
        self.recent.insert(0, alert)
        del self.recent[200:]
        if self.record is not None:
            self.record(alert)
        for sink in self.sinks:
            try:
                sink.send(alert)
            except Exception:  # one broken sink must not silence the others
                log.exception("alert sink %s failed", type(sink).__name__)
        return alert

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()
