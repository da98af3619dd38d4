"""Live reliability: an OTLP/HTTP receiver that keeps the chain of a running agent up to date.

``tracetochain serve`` (``pip install 'tracetochain[serve]'``) receives the spans agents export
(``POST /v1/traces``, the standard OTLP/HTTP port 4318), assembles them into episodes with the OTLP reader's
rules, stores them durably in an embedded SQLite file, keeps running count tables per window, and serves a live
dashboard, alerts (drift and threshold rules; stdout JSON lines and a webhook) and Prometheus metrics.

Layout
------
* :mod:`._decode` — request bodies → span facts (protobuf via ``opentelemetry-proto``, or JSON).
* :mod:`._ingest` — the ingest thread: group commit, trace assembly, outcomes, posted verdicts.
* :mod:`._store` — the SQLite store (WAL) and the Parquet export.
* :mod:`._live` — running counts per window, the chain and its intervals, drift with alpha spending.
* :mod:`._rules` — the rules file and its evaluation; :mod:`._alerts` — alert sinks.
* :mod:`._service` — all of the above without HTTP; :mod:`._app` — the Starlette routes; :mod:`._metrics` —
  Prometheus; :mod:`._pages` — episode page and window report; ``static/`` — the dashboard (no CDN).
"""

from __future__ import annotations

import signal
import sys
from typing import Any

from tracetochain.serve._alerts import AlertHub, StdoutSink, WebhookSink
from tracetochain.serve._ingest import Ingestor, IngestSettings, SpanAck
from tracetochain.serve._live import LiveAnalysis, RunningCounts, WindowSpec, alpha_spent, parse_duration
from tracetochain.serve._rules import Rule, RuleEngine, RulesFileError, load_rules
from tracetochain.serve._service import DEFAULT_PORT, LiveService, ServeConfig, is_loopback
from tracetochain.serve._store import Store, StoreError

__all__ = [
    "DEFAULT_PORT",
    "AlertHub",
    "IngestSettings",
    "Ingestor",
    "LiveAnalysis",
    "LiveService",
    "Rule",
    "RuleEngine",
    "RulesFileError",
    "RunningCounts",
    "ServeConfig",
    "SpanAck",
    "StdoutSink",
    "Store",
    "StoreError",
    "WebhookSink",
    "WindowSpec",
    "alpha_spent",
    "create_app",
    "is_loopback",
    "load_rules",
    "parse_duration",
    "run",
]


def create_app(service: LiveService, *, manage_service: bool = True) -> Any:
    """The Starlette app of ``service`` (see :mod:`tracetochain.serve._app`)."""
    from tracetochain.serve._app import create_app as _create

    return _create(service, manage_service=manage_service)


def run(config: ServeConfig, *, log_level: str = "warning") -> None:
    """Serve until SIGINT/SIGTERM; then stop accepting, finish the requests in flight, commit what is queued."""
    import uvicorn

    service = LiveService(config)
    app = create_app(service)
    host = config.host
    shown = f"[{host}]" if ":" in host else host
    print(f"tracetochain serve: OTLP/HTTP on http://{shown}:{config.port}/v1/traces, dashboard on "
          f"http://{shown}:{config.port}/ (store {config.store}; windows of {config.window.describe()})",
          file=sys.stderr, flush=True)
    class _GracefulServer(uvicorn.Server):  # type: ignore[misc]
        """uvicorn re-raises SIGTERM/SIGINT once it has shut down (exit status 143, or a KeyboardInterrupt
        traceback); after a completed graceful shutdown (requests finished, queue committed) the process exits 0
        instead, as service managers and a terminal user expect."""

        def handle_exit(self, sig: int, frame: Any) -> None:
            super().handle_exit(sig, frame)
            captured = getattr(self, "_captured_signals", None)
            if sig in (signal.SIGTERM, signal.SIGINT) and isinstance(captured, list) and captured \
                    and captured[-1] == sig:
                captured.pop()

    # Slow or idle clients (slowloris, N25): limit_concurrency bounds the connections served at once (beyond it
    # new requests are answered 503 at once); idle keep-alive connections close after timeout_keep_alive seconds;
    # uvicorn has no header-read timeout, so its h11 protocol is given read deadlines (serve._protocol): a request
    # head not complete in header_timeout seconds gets 408 and the connection is closed, a body not received in
    # body_timeout seconds is dropped (nothing acknowledged). The head's size is h11's 16 KiB limit.
    from tracetochain.serve._protocol import deadline_protocol

    def on_timeout(kind: str) -> None:
        limit = config.header_timeout if kind == "header_timeout" else config.body_timeout
        service.ingestor.record_rejection(kind, f"a client did not send its request within {limit:g} s")

    protocol = deadline_protocol(config.header_timeout, config.body_timeout, on_timeout)
    server = _GracefulServer(uvicorn.Config(app, host=host, port=config.port, log_level=log_level,
                                           timeout_graceful_shutdown=15, access_log=False,
                                           server_header=False, proxy_headers=False, http=protocol,
                                           limit_concurrency=config.max_connections, timeout_keep_alive=5))
    server.run()
