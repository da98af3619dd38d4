"""The HTTP side of ``tracetochain serve`` (Starlette, run by uvicorn).

Routes
------
* ``POST /v1/traces`` — OTLP/HTTP export (protobuf or JSON, gzip allowed). 200 only after the spans are committed
  to the store; 400 with the reason for a malformed body (counted), 401 without the ingest token, 413 over the
  size limit, 415 for another content type or encoding, 503 while shutting down (exporters retry).
* ``POST /v1/verdicts`` — outcomes decided after the fact: ``{"trace_id": "…", "outcome": "success"}`` (or
  ``episode_id`` / ``id``; ``outcome``/``label`` and/or ``reward``/``score``), a list of those, or
  ``{"verdicts": [...]}``. Ingest token.
* ``GET /`` — the dashboard; ``GET /api/live`` its document (every group together; ``?group=NAME`` one agent's
  chain); ``GET /api/alerts`` (every alert once, with its webhook delivery status; ``?group=``); ``GET /traces/{id}``
  (HTML) and ``GET /api/traces/{id}`` (JSON) for one episode; ``GET /report?window=K|all[&group=NAME]`` the full
  report of a window;
  ``GET /api/export.parquet`` the decided episodes' steps as canonical Parquet; ``GET /metrics`` (Prometheus).
  All need the read token (``Authorization: Bearer …``, or the cookie the dashboard sets from ``/?token=…``).
* ``GET /healthz`` — liveness (no data, no token).

Every page carries a Content-Security-Policy (no inline script, nothing from other origins) and all trace content
is escaped: HTML by jinja2's autoescape, JSON inside ``<script type="application/json">`` with ``<``, ``>``, ``&``
and the line separators written as ``\\u`` escapes, and the dashboard's script inserts text with ``textContent``
only.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import tempfile
import time
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from tracetochain.readers.shared import verdict_to_outcome
from tracetochain.serve._decode import (
    JSON,
    PROTOBUF,
    BadRequest,
    DecodeGate,
    check_span_times,
    decode_cost,
    decode_traces,
    decompress,
    encode_response,
    media_type,
)
from tracetochain.serve._ingest import normalise_id
from tracetochain.serve._metrics import CONTENT_TYPE as METRICS_TYPE
from tracetochain.serve._metrics import exposition
from tracetochain.serve._service import LiveService, is_loopback

log = logging.getLogger("tracetochain.serve")

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
_HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
            "X-Frame-Options": "DENY", "Cache-Control": "no-store"}
#: The report page's own policy (as in its <meta> tag): inline styles, no script at all (N17).
REPORT_CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'; "
              "frame-ancestors 'none'")
_READ_COOKIE = "tracetochain_read"
_VERDICT_ID_KEYS = ("episode_id", "trace_id", "traceId", "id", "span_id")
_VERDICT_OUTCOME_KEYS = ("outcome", "resolved", "success", "passed", "label")
_VERDICT_REWARD_KEYS = ("reward", "score", "value")


def script_json(value: Any) -> str:
    """JSON safe inside ``<script type="application/json">``: no ``</script>``, no HTML comment, no line separators.

    >>> script_json({"x": "</script><!--"})
    '{"x": "\\\\u003c/script\\\\u003e\\\\u003c!--"}'
    """
    text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _secure(response: Response) -> Response:
    for k, v in _HEADERS.items():
        response.headers.setdefault(k, v)
    return response


def _error(status: int, reason: str, message: str) -> Response:
    return _secure(JSONResponse({"code": status, "reason": reason, "message": message}, status_code=status))


def _token_ok(given: str | None, expected: str | None) -> bool:
    if expected is None:
        return True
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


def _bearer(request: Request) -> str | None:
    auth = request.headers.get("authorization", "")
    return auth[7:].strip() if auth[:7].lower() == "bearer " else None


def _asset(name: str) -> str:
    return resources.files("tracetochain.serve").joinpath("static", name).read_text(encoding="utf-8")


def host_name(value: str | None) -> str | None:
    """The host of a ``Host`` header or an ``Origin`` URL, lower-case, without port or brackets.

    >>> host_name("127.0.0.1:4318"), host_name("[::1]:4318"), host_name("http://Example.org:80"), host_name(None)
    ('127.0.0.1', '::1', 'example.org', None)
    """
    if not value:
        return None
    v = value.strip().lower()
    if "://" in v:
        v = v.split("://", 1)[1].split("/", 1)[0]
    if v.startswith("["):
        return v[1:v.find("]")] if "]" in v else None
    return v.rsplit(":", 1)[0] if v.count(":") == 1 else v


def _is_loopback_name(host: str) -> bool:
    return host in ("localhost", "localhost.") or host.endswith(".localhost") or is_loopback(host)


def create_app(service: LiveService, *, manage_service: bool = True) -> Starlette:
    """The Starlette app around ``service`` (started and stopped with the app when ``manage_service``)."""
    cfg = service.config
    allowed = {h.strip().lower().rstrip(".") for h in cfg.allowed_hosts}
    # Which Host headers are answered (DNS rebinding, N4): the names given with --allow-host, and loopback names
    # when serving on loopback. Beyond loopback without --allow-host any Host is answered: both tokens are required
    # there, and a rebound page never holds them (the read cookie belongs to the real host).
    check_host = bool(allowed) or is_loopback(cfg.host)

    def host_ok(host: str | None) -> bool:
        if not check_host:
            return True
        return host is not None and (host.rstrip(".") in allowed or _is_loopback_name(host))

    def foreign(request: Request) -> Response | None:
        """A refusal for a request from another site (DNS rebinding, or a page posting cross-site: CSRF)."""
        host = host_name(request.headers.get("host"))
        if not host_ok(host):
            return _error(421, "host", f"this server does not answer for the host {host!r}; open it as "
                                       "http://127.0.0.1:PORT, or start it with --allow-host NAME")
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            site = request.headers.get("sec-fetch-site")
            origin = request.headers.get("origin")
            if site in ("cross-site", "same-site") or (origin is not None and (
                    origin == "null" or host_name(origin) != host)):
                return _error(403, "cross_origin", "requests from web pages of other sites are refused (send the "
                                                   "request from a client, not a browser page)")
        return None

    def can_read(request: Request) -> bool:
        return _token_ok(_bearer(request) or request.cookies.get(_READ_COOKIE), cfg.read_token)

    def need_read(request: Request) -> Response | None:
        if can_read(request):
            return None
        return _error(401, "unauthorized", "this needs the read token: send 'Authorization: Bearer <token>' or open "
                                           "the dashboard as /?token=<token>")

    async def read_body(request: Request) -> bytes:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > cfg.max_request_bytes:
            raise BadRequest(413, "too_large", f"the body ({int(declared):,} bytes) exceeds the "
                                               f"{cfg.max_request_bytes:,}-byte limit")
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > cfg.max_request_bytes:
                raise BadRequest(413, "too_large", f"the body exceeds the {cfg.max_request_bytes:,}-byte limit")
            chunks.append(chunk)
        return b"".join(chunks)

    gate = DecodeGate(cfg.decode_memory_bytes)

    def gated_decode(body: bytes, kind: str) -> list[Any]:
        with gate.hold(decode_cost(body, kind)):
            spans = decode_traces(body, kind, service.options)
        check_span_times(spans, time.time())
        return spans

    def refuse(exc: BadRequest) -> Response:
        service.ingestor.record_rejection(exc.reason, exc.message)
        return _error(exc.status, exc.reason, exc.message)

    async def traces(request: Request) -> Response:
        if not _token_ok(_bearer(request), cfg.ingest_token):
            service.ingestor.record_rejection("unauthorized", "export without the ingest token")
            return _error(401, "unauthorized", "send the ingest token as 'Authorization: Bearer <token>' "
                                               "(OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer%20<token>)")
        if service.ingestor.failed is not None:
            return _error(503, "unavailable", f"the store cannot be written: {service.ingestor.failed}")
        kind = media_type(request.headers.get("content-type"))
        try:
            if kind not in (PROTOBUF, JSON):
                raise BadRequest(415, "content_type", f"unsupported Content-Type {kind or '(none)'!r}; OTLP/HTTP "
                                                      f"sends {PROTOBUF} or {JSON}")
            body = await read_body(request)
            body = decompress(body, request.headers.get("content-encoding"), cfg.max_decompressed_bytes)
            spans = await run_in_threadpool(gated_decode, body, kind)
        except BadRequest as exc:
            return refuse(exc)
        try:
            await asyncio.wrap_future(service.ingestor.submit_spans(spans))
        except Exception as exc:  # the commit failed: the client must retry, nothing was acknowledged
            return _error(503, "unavailable", f"the spans were not stored ({exc}); retry")
        payload, ctype = encode_response(kind)
        return Response(payload, media_type=ctype)

    async def verdicts(request: Request) -> Response:
        if not _token_ok(_bearer(request), cfg.ingest_token):
            service.ingestor.record_rejection("unauthorized", "verdicts without the ingest token")
            return _error(401, "unauthorized", "posting verdicts needs the ingest token")
        try:
            if media_type(request.headers.get("content-type")) != JSON:
                # A form or text/plain POST needs no CORS preflight: any web page could send one (CSRF, N4).
                raise BadRequest(415, "content_type", "send verdicts as Content-Type: application/json")
            body = await read_body(request)
            items = _parse_verdicts(body, service)
        except BadRequest as exc:
            return refuse(exc)
        n = await asyncio.wrap_future(service.ingestor.submit_verdicts(items))
        return _secure(JSONResponse({"accepted": n}))

    async def healthz(request: Request) -> Response:
        health = service.health()
        body = health if health["reasons"] else {"status": health["status"]}
        return _secure(JSONResponse(body, status_code=503 if health["status"] == "failing" else 200))

    async def dashboard(request: Request) -> Response:
        token = request.query_params.get("token")
        if token is not None:
            if not _token_ok(token, cfg.read_token):
                return _error(401, "unauthorized", "wrong read token")
            resp = RedirectResponse("/", status_code=303)
            if cfg.read_token is not None:
                resp.set_cookie(_READ_COOKIE, token, httponly=True, samesite="strict", path="/")
            return _secure(resp)
        denied = need_read(request)
        if denied is not None:
            return denied
        doc = await run_in_threadpool(service.snapshot)
        page = _asset("dashboard.html").replace("__INITIAL_JSON__", script_json(doc))
        return _secure(HTMLResponse(page))

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        types = {"dashboard.js": "text/javascript", "dashboard.css": "text/css"}
        if name not in types:
            return _error(404, "not_found", "no such file")
        return _secure(Response(_asset(name), media_type=types[name]))

    async def api_live(request: Request) -> Response:
        denied = need_read(request)
        if denied is not None:
            return denied
        group = request.query_params.get("group")
        try:
            doc = await run_in_threadpool(service.snapshot, group)
        except KeyError:
            return _error(404, "not_found", "no episodes of this group yet; the groups are listed in /api/live")
        status = await run_in_threadpool(service.status)
        return _secure(JSONResponse({**doc, "status": status}))

    async def api_alerts(request: Request) -> Response:
        """Every stored alert (newest first, at most 1,000), each once, with its webhook delivery status."""
        denied = need_read(request)
        if denied is not None:
            return denied
        try:
            limit = min(1000, max(1, int(request.query_params.get("limit", "1000"))))
        except ValueError:
            return _error(400, "limit", "limit must be a whole number of alerts (1 to 1000)")
        group = request.query_params.get("group")
        alerts = await run_in_threadpool(lambda: service.store.alerts(limit, group=group))
        return _secure(JSONResponse({"alerts": alerts}))

    async def api_trace(request: Request) -> Response:
        denied = need_read(request)
        if denied is not None:
            return denied
        ep = await run_in_threadpool(service.store.episode, normalise_id(request.path_params["episode_id"]))
        if ep is None:
            return _error(404, "not_found", "no decided episode with this id")
        return _secure(JSONResponse(ep))

    async def trace_page(request: Request) -> Response:
        denied = need_read(request)
        if denied is not None:
            return denied
        ep = await run_in_threadpool(service.store.episode, normalise_id(request.path_params["episode_id"]))
        if ep is None:
            return _error(404, "not_found", "no decided episode with this id")
        from tracetochain.serve._pages import trace_html

        return _secure(HTMLResponse(trace_html(ep)))

    async def report(request: Request) -> Response:
        denied = need_read(request)
        if denied is not None:
            return denied
        from tracetochain.serve._pages import ReportBusy, window_report_html

        window = request.query_params.get("window", "all")
        audit = request.query_params.get("audit", "1") not in ("0", "false", "no")
        group = request.query_params.get("group")
        try:
            page = await run_in_threadpool(window_report_html, service, window, audit, group)
        except ReportBusy as exc:
            return _error(503, "busy", str(exc))
        except ValueError as exc:
            return _error(400, "window", str(exc))
        return _secure(HTMLResponse(page, headers={"Content-Security-Policy": REPORT_CSP}))

    async def export(request: Request) -> Response:
        denied = need_read(request)
        if denied is not None:
            return denied
        fd, name = tempfile.mkstemp(suffix=".parquet")
        os.close(fd)
        tmp = Path(name)
        await run_in_threadpool(service.store.export_parquet, tmp)
        return _secure(FileResponse(tmp, media_type="application/vnd.apache.parquet", filename="episodes.parquet",
                                    background=BackgroundTask(tmp.unlink, missing_ok=True)))

    async def metrics(request: Request) -> Response:
        denied = need_read(request)
        if denied is not None:
            return denied
        body = await run_in_threadpool(exposition, service)
        return _secure(Response(body, media_type=METRICS_TYPE))

    @asynccontextmanager
    async def lifespan(app: Starlette) -> Any:
        if manage_service:
            await run_in_threadpool(service.start)
        try:
            yield
        finally:
            if manage_service:
                await run_in_threadpool(service.stop)

    def guarded(handler: Any) -> Any:
        async def run(request: Request) -> Response:
            refused = foreign(request)
            if refused is not None:
                return refused
            return _secure(await handler(request))

        return run

    routes = [
        Route("/v1/traces", guarded(traces), methods=["POST"]),
        Route("/v1/verdicts", guarded(verdicts), methods=["POST"]),
        Route("/healthz", healthz),
        Route("/", guarded(dashboard)),
        Route("/static/{name}", guarded(static)),
        Route("/api/live", guarded(api_live)),
        Route("/api/alerts", guarded(api_alerts)),
        Route("/api/traces/{episode_id:path}", guarded(api_trace)),
        Route("/traces/{episode_id:path}", guarded(trace_page)),
        Route("/report", guarded(report)),
        Route("/api/export.parquet", guarded(export)),
        Route("/metrics", guarded(metrics)),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


def _parse_verdicts(body: bytes, service: LiveService) -> list[tuple[str, Any]]:
    """Posted verdicts → ``[(normalised id, verdict value)]``; a verdict that cannot be mapped is refused now."""
    try:
        doc = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError, ValueError) as exc:
        raise BadRequest(400, "json", f"verdicts must be JSON ({exc})") from None
    if isinstance(doc, dict) and "verdicts" in doc:
        doc = doc["verdicts"]
    rows = doc if isinstance(doc, list) else [doc]
    if not rows or len(rows) > 100_000:
        raise BadRequest(400, "verdict", "send between 1 and 100,000 verdicts")
    opts = service.options
    out: list[tuple[str, Any]] = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise BadRequest(400, "verdict", f"verdict {i}: expected an object with trace_id and outcome")
        key = next((row[k] for k in _VERDICT_ID_KEYS if row.get(k) not in (None, "")), None)
        if not isinstance(key, str):
            raise BadRequest(400, "verdict", f"verdict {i}: no id; name the trace in one of "
                                             f"{', '.join(_VERDICT_ID_KEYS)}")
        outcome = next((row[k] for k in _VERDICT_OUTCOME_KEYS if row.get(k) not in (None, "")), None)
        reward = next((row[k] for k in _VERDICT_REWARD_KEYS if row.get(k) not in (None, "")), None)
        if outcome is None and reward is None:
            raise BadRequest(400, "verdict", f"verdict {i} ({key}): give one of "
                                             f"{', '.join(_VERDICT_OUTCOME_KEYS + _VERDICT_REWARD_KEYS)}")
        mapped = verdict_to_outcome(outcome if outcome is not None else reward, opts.success_values, opts.threshold)
        if isinstance(mapped, str):
            raise BadRequest(400, "verdict", f"verdict {i} ({key}): {mapped}")
        value: Any = outcome if reward is None else ["pair", outcome, reward]
        out.append((normalise_id(key), value))
    return out
