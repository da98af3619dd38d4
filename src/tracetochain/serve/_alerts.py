"""Where alerts go: stdout as JSON lines, a webhook (JSON POST), and the store (for the dashboard).

Every alert is one JSON object: ``{"kind": "rule" | "drift", "status", "message", "at", "examples": [episode ids],
"links": {...}, "key", ...}``. An alert is an *event with identity* (:func:`alert_key`: kind, rule, group, window,
status): it is stored once and sent once, and a restart never re-sends it. The webhook is posted from a background
thread with a timeout and bounded retries with exponential back-off, so a slow receiver never holds up ingest;
every attempt is recorded in the store, and an undeliverable alert is logged and shown as failed, never lost from
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
import urllib.parse
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
    """POST each alert as JSON to ``url`` from a background thread: at most ``retries`` attempts per alert, the k-th
    retry after ``backoff · 2^(k−1)`` seconds (capped at ``max_backoff``), every attempt reported to ``on_attempt``
    (the store's ``deliveries`` table: the dashboard and ``/api/alerts`` show each alert's delivery status).

    A slow or dead receiver never holds up ingest or the analysis. On shutdown the thread stops waiting; alerts not
    yet delivered stay *pending* in the store and the next start finishes them (:meth:`resume`) — a delivered alert
    is never posted again. Redirects are not followed and the reply is read to 64 KiB (N11).
    """

    def __init__(self, url: str, *, timeout: float = 5.0, retries: int = 5, backoff: float = 1.0,
                 max_backoff: float = 60.0, headers: dict[str, str] | None = None,
                 on_attempt: Callable[[str, int, int, str | None], None] | None = None) -> None:
        if retries < 1:
            raise ValueError(f"retries must be at least 1, got {retries}")
        self.url = check_webhook_url(url)
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.headers = dict(headers or {})
        self.on_attempt = on_attempt
        self.sent = 0
        self.failed = 0
        self.attempts = 0
        self._stop = threading.Event()
        self._queue: queue.Queue[tuple[dict[str, Any], int] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="tracetochain-webhook", daemon=True)
        self._thread.start()

    def send(self, alert: dict[str, Any]) -> None:
        self._queue.put((alert, 0))

    def resume(self, alert: dict[str, Any], attempts_done: int) -> None:
        """Finish the delivery of an alert a previous run stored but did not deliver (``attempts_done`` so far)."""
        self._queue.put((alert, attempts_done))

    def close(self, timeout: float = 10.0) -> None:
        self._queue.put(None)
        self._thread.join(timeout)
        self._stop.set()  # a delivery still backing off gives up waiting; it stays pending in the store
        self._thread.join(2.0)

    def delay(self, attempt: int) -> float:
        """Seconds to wait before attempt ``attempt`` (2, 3, …): ``backoff · 2^(attempt−2)``, at most
        ``max_backoff``."""
        return float(min(self.max_backoff, self.backoff * 2.0 ** (attempt - 2)))

    def _report(self, key: str | None, attempt: int, ok: int, detail: str | None) -> None:
        self.attempts += 1
        if key is not None and self.on_attempt is not None:
            try:
                self.on_attempt(key, attempt, ok, detail)
            except Exception:  # recording must never kill the delivery thread
                log.exception("cannot record a webhook delivery attempt")

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            alert, done = item
            key = alert.get("key")
            body = json.dumps({k: v for k, v in alert.items() if not k.startswith("_")}, ensure_ascii=False,
                              allow_nan=False).encode("utf-8")
            for attempt in range(done + 1, self.retries + 1):
                if attempt > 1 and self._stop.wait(self.delay(attempt)):
                    return
                req = urllib.request.Request(self.url, data=body, method="POST",
                                             headers={"Content-Type": "application/json", **self.headers})
                try:
                    with _OPENER.open(req, timeout=self.timeout) as resp:
                        resp.read(WEBHOOK_MAX_RESPONSE)  # bounded: the reply is not needed
                    self.sent += 1
                    self._report(key, attempt, 1, None)
                    break
                except Exception as exc:  # any failure (bad status line, odd URL, memory) is a counted failure;
                    # the thread must live on for the next alert
                    last = attempt == self.retries
                    self._report(key, attempt, -1 if last else 0, str(exc)[:500])
                    if last:
                        self.failed += 1
                        log.warning("webhook %s: alert not delivered after %d attempts (%s)", self.url,
                                    self.retries, exc)


def alert_key(alert: dict[str, Any]) -> str:
    """An alert's identity: kind, rule (or drift), group, window and status.

    The same condition in the same window of the same group is one event, whatever the process that noticed it:
    a restart that recomputes the windows' drift tests or re-evaluates the rules finds the key stored and sends
    nothing.

    >>> alert_key({"kind": "rule", "rule": "sql", "group": "billing", "window": 7, "status": "firing"})
    'rule|sql|billing|7|firing'
    """
    return "|".join(str(alert.get(k) if alert.get(k) is not None else "") for k in
                    ("kind", "rule", "group", "window", "status"))


class AlertHub:
    """Gives alerts their identity, stores each once, then fans it out to the sinks.

    :meth:`emit` drops an alert whose key (:func:`alert_key`) was raised before — by this process or by an earlier
    one (:meth:`load` reads the stored keys) — and counts it in ``suppressed``. A new alert is first committed to
    the store (``record`` returns a future), then sent: a crash between the two loses a send, never doubles one.
    """

    def __init__(self, sinks: list[Any], record: Callable[[dict[str, Any]], Any] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.sinks = sinks
        self.record = record
        self.clock = clock
        self.recent: list[dict[str, Any]] = []
        self.seen: set[str] = set()
        self.suppressed = 0
        self._lock = threading.Lock()

    def load(self, store: Any) -> None:
        """Resume from ``store``: the keys already raised, the latest alerts, and the webhook deliveries that a
        previous run left unfinished."""
        self.seen = store.alert_keys()
        self.recent = list(store.alerts(200))
        for sink in self.sinks:
            if isinstance(sink, WebhookSink):
                for alert in store.undelivered(sink.retries):
                    sink.resume({k: v for k, v in alert.items() if k != "_attempts_done"}, alert["_attempts_done"])

    def emit(self, alert: dict[str, Any]) -> dict[str, Any] | None:
        """Stamp, store and send ``alert``; None (and nothing sent) when an alert with its identity was raised."""
        alert = {**alert, "status": alert.get("status") or "firing"}
        key = alert_key(alert)
        with self._lock:
            if key in self.seen:
                self.suppressed += 1
                return None
            self.seen.add(key)
        alert = {"at": self.clock(), **alert}
        alert["key"] = key
        group = alert.get("group")
        report = f"/report?window={alert['window']}" if alert.get("window") is not None else None
        if report is not None and group:
            report += f"&group={urllib.parse.quote(str(group))}"
        alert["links"] = {"examples": [f"/traces/{e}" for e in alert.get("examples", [])], "report": report}
        if self.record is not None:
            try:
                fut = self.record(alert)
                if fut is not None:
                    fut.result(timeout=30)
            except Exception:  # not stored: still sent (an alert must not be lost), identity kept in memory
                log.exception("cannot store alert %s", key)
        self.recent.insert(0, alert)
        del self.recent[200:]
        for sink in self.sinks:
            try:
                sink.send(alert)
            except Exception:  # one broken sink must not silence the others
                log.exception("alert sink %s failed", type(sink).__name__)
        return alert

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()
