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

from tracetochain._compat import moved_attribute
from tracetochain.serve._ingest import IngestSettings
from tracetochain.serve._live import WindowSpec
from tracetochain.serve._rules import Rule, RulesFileError, load_rules
from tracetochain.serve._service import LiveService, ServeConfig
from tracetochain.serve._store import StoreError

#: What users import; the service's parts (store, ingestor, alert sinks, rule engine, running counts …) are shared
#: with the command line through ``tracetochain.serve.shared``.
__all__ = [
    "IngestSettings",
    "LiveService",
    "Rule",
    "RulesFileError",
    "ServeConfig",
    "StoreError",
    "WindowSpec",
    "create_app",
    "load_rules",
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


#: Names this package exported before its ``__all__`` was trimmed to what users import → the module that defines
#: them (still importable from here, with a warning naming that module, for one release).
_MOVED: dict[str, str] = {
    "AlertHub": "tracetochain.serve._alerts",
    "DEFAULT_PORT": "tracetochain.serve._service",
    "Ingestor": "tracetochain.serve._ingest",
    "LiveAnalysis": "tracetochain.serve._live",
    "RuleEngine": "tracetochain.serve._rules",
    "RunningCounts": "tracetochain.serve._live",
    "SpanAck": "tracetochain.serve._ingest",
    "StdoutSink": "tracetochain.serve._alerts",
    "Store": "tracetochain.serve._store",
    "WebhookSink": "tracetochain.serve._alerts",
    "alpha_spent": "tracetochain.serve._live",
    "is_loopback": "tracetochain.serve._service",
    "parse_duration": "tracetochain.serve._live",
}


def __getattr__(name: str) -> object:
    return moved_attribute(__name__, name, _MOVED)
