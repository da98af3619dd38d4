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


#: Bytes of a webhook receiver's answer that are read (the rest is ignored): an alert needs no reply body (N11).
WEBHOOK_MAX_RESPONSE = 64 * 1024


def check_webhook_url(url: str) -> str:
    """``url`` if it is a usable webhook URL (http/https, a host, no spaces or control characters); else
    ``ValueError`` saying what is wrong (the CLI shows it as a usage error).

    >>> check_webhook_url("https://hooks.example.com/x")
    'https://hooks.example.com/x'
    """
    from urllib.parse import urlsplit

    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(f"the webhook URL must start with http:// or https://, got {str(url)[:200]!r}")
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in url):
        raise ValueError("the webhook URL contains spaces or control characters; percent-encode them")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError as exc:
        raise ValueError(f"the webhook URL is malformed ({exc})") from None
    if not parts.hostname:
        raise ValueError(f"the webhook URL has no host: {url[:200]!r}")
    if parts.username is not None or parts.password is not None:
        raise ValueError("the webhook URL must not carry a user name or password; use --webhook with a token in "
                         "the path or a header-less receiver")
    return url


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects are not followed: a receiver could otherwise send the server's requests to any address it can
    reach (blind SSRF, N11). A 3xx answer is a failed delivery."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> None:
        raise urllib.error.HTTPError(req.full_url, code, f"redirect to {newurl[:200]} not followed", headers, fp)


_OPENER = urllib.request.build_opener(_NoRedirect())


class WebhookSink:
    """POST each alert as JSON to ``url`` (from a background thread; ``retries`` attempts with backoff)."""

    def __init__(self, url: str, *, timeout: float = 5.0, retries: int = 3, backoff: float = 1.0,
                 headers: dict[str, str] | None = None) -> None:
        self.url = check_webhook_url(url)
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
                    with _OPENER.open(req, timeout=self.timeout) as resp:
                        resp.read(WEBHOOK_MAX_RESPONSE)  # bounded: the reply is not needed
                    self.sent += 1
                    break
                except Exception as exc:  # any failure (bad status line, odd URL, memory) is a counted failure;
                    # the thread must live on for the next alert
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
