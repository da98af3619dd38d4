"""`serve`: the live OTLP/HTTP receiver, dashboard, alerts and metrics (needs the `serve` extra)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from tracetochain.cli._commands import ForceOpt
from tracetochain.cli._input import ReaderOptionOpt, parse_reader_options, pick_alias

SERVE_EXAMPLE = ("Example: tracetochain serve --store live.db --window 5m --rules rules.toml   then point the agent's "
                 "exporter at it: OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318")
_INSTALL_HINT = "tracetochain serve needs the serve extra: pip install 'tracetochain[serve]'"


def serve(
    host: Annotated[str, typer.Option(help="Address to bind. Anything but localhost needs both tokens.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port (4318 is the OTLP/HTTP standard).")] = 4318,
    store: Annotated[Path, typer.Option(help="The SQLite store file (created if absent; resumed if present).")] = Path(
        "tracetochain-live.db"),
    window: Annotated[str, typer.Option(
        help="Tumbling windows: a duration of episode start time (5m, 1h) or a number of traces (500).")] = "5m",
    rules: Annotated[Path | None, typer.Option(help="Threshold rules (TOML [[rule]] tables with a 'when').")] = None,
    webhook: Annotated[str | None, typer.Option(help="POST every alert as JSON to this URL.")] = None,
    quiet_alerts: Annotated[bool, typer.Option("--no-stdout-alerts", help="Do not print alerts as JSON lines.")
                            ] = False,
    ingest_token: Annotated[str | None, typer.Option(
        help="Bearer token senders must present (default: $TRACETOCHAIN_INGEST_TOKEN).")] = None,
    read_token: Annotated[str | None, typer.Option(
        help="Bearer token for the dashboard, API and /metrics (default: $TRACETOCHAIN_READ_TOKEN).")] = None,
    max_request_mb: Annotated[float, typer.Option(
        min=0.01, max=1024.0, help="Largest request body accepted (MiB); a compressed body may expand to 4x this.")
                              ] = 16.0,
    outcome_attribute: Annotated[str | None, typer.Option(
        help="Span attribute holding the episode's verdict (else evaluation events, else posted verdicts).")] = None,
    evaluation_name: Annotated[str | None, typer.Option(help="Which gen_ai.evaluation to use as the verdict.")
                               ] = None,
    success_values: Annotated[str | None, typer.Option(help="Comma list of verdict labels meaning success.")] = None,
    episode: Annotated[str, typer.Option(help="Episode unit: trace, agent, or span:NAME (as the otlp reader).")
                       ] = "trace",
    option: ReaderOptionOpt = None,
    settle: Annotated[float, typer.Option(min=0.0, help="Seconds to wait after a trace's root span for stragglers.")
                      ] = 2.0,
    trace_timeout: Annotated[float, typer.Option(min=0.0, help="Seconds after which a trace without root is closed.")
                             ] = 120.0,
    verdict_timeout: Annotated[float, typer.Option(
        min=0.0, help="Seconds an episode without outcome waits for a posted verdict; then it is kept as unlabelled "
                      "(its steps, costs and times count; R∞ rests on the labelled episodes).")] = 300.0,
    group_by: Annotated[str, typer.Option(
        help="Resource (or span) attribute naming the agent: one chain, dashboard view, metrics label, rules and "
             "alerts per value.")] = "service.name",
    max_groups: Annotated[int, typer.Option(
        min=1, help="Distinct agents at most; further ones are counted together as '(other)'.")] = 50,
    level: Annotated[float, typer.Option(min=1e-6, max=0.5, help="False-alarm rate of drift alerts over the stream.")
                     ] = 0.05,
    legacy_alpha: Annotated[float | None, typer.Option(
        "--alpha", min=1e-6, max=0.5, hidden=True, help="Deprecated spelling of --level.")] = None,
    min_traces: Annotated[int, typer.Option(
        min=1, help="Usable traces a window needs before it is tested for drift (the χ² reference needs ~100).")
                          ] = 100,
    durability: Annotated[str, typer.Option(
        help="full: fsync every commit (survives power loss); normal: survives a killed process.")] = "full",
    export_parquet: Annotated[Path | None, typer.Option(
        help="Do not serve: write the store's decided episodes as canonical Parquet to this path and exit.")] = None,
    max_states: Annotated[int, typer.Option(
        min=2, help="Distinct states the live chain shows; the least visited beyond are merged into one "
                    "'(other states)' (a refresh costs ~ states³).")] = 60,
    max_open_traces: Annotated[int, typer.Option(
        min=1, help="Traces held in memory while assembling; beyond, the oldest is assembled at once (counted).")
                               ] = 50_000,
    max_verdicts: Annotated[int, typer.Option(
        min=1, help="Posted verdicts kept for traces not yet seen; beyond, the oldest is forgotten (counted).")
                            ] = 100_000,
    keep_spans: Annotated[str | None, typer.Option(
        help="Delete the raw spans of assembled traces after this long (e.g. 7d); episodes keep their steps. "
             "Default: keep them.")] = None,
    keep_unclaimed_verdicts: Annotated[str | None, typer.Option(
        help="Delete a posted verdict whose trace has not arrived after this long (e.g. 1d, 6h; 'forever' keeps "
             "them).")] = "1d",
    allow_host: Annotated[list[str] | None, typer.Option(
        "--allow-host", help="A host name the server answers for besides 127.0.0.1/localhost (repeatable; "
                             "e.g. behind a proxy).")] = None,
    max_connections: Annotated[int, typer.Option(
        min=1, help="Open connections served at once; beyond, new requests get 503.")] = 1000,
    header_timeout: Annotated[float, typer.Option(
        min=0.1, help="Seconds a client has to send a request's headers; then 408 and the connection is closed "
                      "(slow clients cannot hold connections).")] = 10.0,
    body_timeout: Annotated[float, typer.Option(
        min=0.1, help="Seconds a client has to send a whole request (headers and body); then the connection is "
                      "closed and nothing is acknowledged.")] = 120.0,
    force: ForceOpt = False,
    log_level: Annotated[str, typer.Option(help="Server log level (uvicorn).")] = "warning",
) -> None:
    """Receive OTLP spans from running agents and keep their chain, dashboard, alerts and metrics up to date."""
    try:
        from tracetochain import serve as live
        from tracetochain.serve.shared import parse_duration
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise typer.BadParameter(f"{_INSTALL_HINT} ({exc})") from None
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2  # noqa: F401
    except ImportError as exc:
        raise typer.BadParameter(f"{_INSTALL_HINT} (missing {exc.name})") from None
    if export_parquet is not None:
        from tracetochain.serve.shared import export_store

        n = export_store(store, export_parquet, overwrite=force)
        typer.echo(f"{n} episodes written to {export_parquet}")
        return
    reader_options: dict[str, object] = {"episode": episode, **parse_reader_options(option)}  # the otlp reader's
    for key, value in (("outcome_attribute", outcome_attribute), ("evaluation_name", evaluation_name),
                       ("success_values", success_values)):
        if value is not None:
            if key in reader_options:
                raise typer.BadParameter(f"--{key.replace('_', '-')} and -O {key}= both given; give one")
            reader_options[key] = value
    try:
        config = live.ServeConfig(
            store=store, host=host, port=port,
            ingest_token=ingest_token or os.environ.get("TRACETOCHAIN_INGEST_TOKEN") or None,
            read_token=read_token or os.environ.get("TRACETOCHAIN_READ_TOKEN") or None,
            max_request_bytes=int(max_request_mb * 1024 * 1024),
            max_decompressed_bytes=4 * int(max_request_mb * 1024 * 1024), window=live.WindowSpec.parse(window),
            level=pick_alias("--level", level, 0.05, "--alpha", legacy_alpha), min_traces=min_traces, rules=rules,
            webhook=webhook, alerts_to_stdout=not quiet_alerts,
            reader_options=reader_options,
            ingest=live.IngestSettings(settle=settle, trace_timeout=trace_timeout, verdict_timeout=verdict_timeout,
                                       max_open_traces=max_open_traces, max_verdicts=max_verdicts,
                                       span_retention=parse_duration(keep_spans) if keep_spans else None,
                                       group_by=group_by, max_groups=max_groups,
                                       verdict_retention=_retention(keep_unclaimed_verdicts)),
            durability=durability,  # type: ignore[arg-type]
            max_states=max_states, allowed_hosts=tuple(allow_host or ()), max_connections=max_connections,
            header_timeout=header_timeout, body_timeout=body_timeout,
        )
        config.check()
        if webhook is not None:
            from tracetochain.serve.shared import check_webhook_url

            check_webhook_url(webhook)
        if rules is not None:
            live.load_rules(rules, config.window)  # fail before binding the port
        from tracetochain.readers.otlp import parse_otlp_options

        parse_otlp_options(**reader_options)  # unknown or bad reader options fail here, naming the valid ones
    except (ValueError, TypeError) as exc:
        from tracetochain.exceptions import TraceToChainError

        if isinstance(exc, TraceToChainError):
            raise
        raise typer.BadParameter(str(exc)) from None
    live.run(config, log_level=log_level)


def _retention(text: str | None) -> float | None:
    """``--keep-unclaimed-verdicts``: a duration in seconds, or None for 'forever'."""
    if text is None or text.strip().lower() in ("forever", "never", "none"):
        return None
    from tracetochain.serve.shared import parse_duration

    return parse_duration(text)
