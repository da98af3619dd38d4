"""Instrument agent code that has no tracing yet: episodes, steps, milestones and the verdict as OpenTelemetry spans.

``pip install 'tracetochain[instrument]'``. The spans carry exactly the attributes the OTLP reader maps (GenAI
semantic conventions plus ``tracetochain.state``), so ``tracetochain serve`` and ``tracetochain fit`` on an exported
file read them the same way::

    import tracetochain.instrument as tt

    tt.configure("http://127.0.0.1:4318")            # OTLP/HTTP exporter + batch processor (optional)

    with tt.episode("sql-agent", task="q-17") as ep:
        with tt.step("parse_intent", kind="llm"):
            intent = llm(question)
        with tt.milestone("sql_validated") as m:      # a state with its verification condition
            sql = write_sql(intent)
            m.verify(sql_parses(sql))                 # not verified → state "sql_validated:failed"
        rows = run_sql(sql)                           # a decorated step, see below
        ep.verdict(answer_is_correct(rows))           # True/False, a label, or reward=0.7

    @tt.step("sql_exec")                              # a decorator too: one step per call
    def run_sql(sql): ...

Mapping (what the reader reads back): an episode is the trace's root span (``gen_ai.operation.name =
invoke_agent``); a step is a span with ``gen_ai.operation.name`` ``execute_tool`` (kind ``tool``, default, with
``gen_ai.tool.name``), ``chat`` (``llm``) or ``retrieval``, and ``tracetochain.state`` = its state name. An exception
escaping a step marks it failed (status ERROR, ``error.type`` = the exception class) and propagates; a handled
failure is marked with ``s.fail("timeout")``. The verdict is a ``gen_ai.evaluation.result`` event on the root span
(``gen_ai.evaluation.score.label`` / ``score.value``); a budget stop is ``ep.finish("max_steps")`` (the episode is
then censored). Verdicts decided later are posted with :func:`post_verdict` (by ``ep.trace_id``).

Milestones (states with an automatically checked verification condition, as they should be declared for a
reliability model): ``milestone(name, check=fn)`` calls ``fn`` on the block's result (decorator) or takes
``m.verify(condition)`` inside the block. A verified milestone is state ``name``; a failed or missing verification
is state ``name:failed`` with ``error.type = verification_failed`` — an unverified milestone is never counted as
reached.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

try:
    from opentelemetry import trace
    from opentelemetry.trace import Span, Status, StatusCode
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("tracetochain.instrument needs OpenTelemetry: pip install 'tracetochain[instrument]'") from exc

__all__ = ["Episode", "Step", "configure", "episode", "milestone", "post_verdict", "step"]

STATE_ATTRIBUTE = "tracetochain.state"  # the otlp reader's STATE_ATTRIBUTE
_OPERATION = {"tool": "execute_tool", "llm": "chat", "retrieval": "retrieval"}
_TRACER = "tracetochain.instrument"
F = TypeVar("F", bound=Callable[..., Any])
_DEFAULT_ENDPOINT = "http://127.0.0.1:4318"
#: What the last :func:`configure` was told (``endpoint``: the server's base URL, ``token``), for
#: :func:`post_verdict`.
_CONFIGURED: dict[str, str | None] = {}


def configure(endpoint: str = "http://127.0.0.1:4318", *, token: str | None = None, service_name: str = "agent",
              set_global: bool = True, extra_exporters: list[Any] | None = None, max_queue_size: int = 65_536,
              schedule_delay_millis: float = 1000) -> Any:
    """Create an SDK ``TracerProvider`` exporting to ``endpoint`` (OTLP/HTTP, protobuf) in batches.

    ``token`` is sent as ``Authorization: Bearer`` (serve's ingest token). ``extra_exporters`` get the same spans
    (e.g. a ``ConsoleSpanExporter`` writing a file). The batch queue is larger than the SDK's default (2,048), which
    drops spans silently when an agent produces them faster than they are sent. Returns the provider; call
    ``provider.shutdown()`` (or ``force_flush()``) before the process exits so the last batch is sent.
    """
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:  # pragma: no cover
        raise ImportError("configure() needs the OpenTelemetry SDK and OTLP exporter: "
                          "pip install 'tracetochain[instrument]'") from exc
    url = endpoint.rstrip("/")
    if not url.endswith("/v1/traces"):
        url += "/v1/traces"
    _CONFIGURED.update(endpoint=url.removesuffix("/v1/traces"), token=token)
    headers = {"Authorization": f"Bearer {token}"} if token else None
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    for exporter in [OTLPSpanExporter(endpoint=url, headers=headers), *(extra_exporters or ())]:
        provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=max_queue_size,
                                                       schedule_delay_millis=schedule_delay_millis))
    if set_global:
        trace.set_tracer_provider(provider)
    return provider


def _tracer(provider: Any = None) -> Any:
    return trace.get_tracer(_TRACER, tracer_provider=provider)


class Episode:
    """The root span of one attempt at one task; record its verdict with :meth:`verdict`."""

    def __init__(self, span: Span) -> None:
        self.span = span

    @property
    def trace_id(self) -> str:
        """The trace id as 32 lower-case hex digits (what :func:`post_verdict` and the dashboard use)."""
        return f"{self.span.get_span_context().trace_id:032x}"

    def verdict(self, outcome: bool | str | float | None = None, *, reward: float | None = None,
                name: str = "task") -> None:
        """The task's verdict: True/False, a label (``"success"``, ``"failed"``, …) or a number; ``reward`` adds a
        score (alone, it decides by the reader's success threshold)."""
        if outcome is None and reward is None:
            raise ValueError("give an outcome (True/False or a label) or a reward")
        attrs: dict[str, Any] = {"gen_ai.evaluation.name": name}
        if isinstance(outcome, bool):
            attrs["gen_ai.evaluation.score.label"] = "pass" if outcome else "fail"
        elif isinstance(outcome, (int, float)):
            attrs["gen_ai.evaluation.score.value"] = float(outcome)
        elif outcome is not None:
            attrs["gen_ai.evaluation.score.label"] = str(outcome)
        if reward is not None:
            attrs["gen_ai.evaluation.score.value"] = float(reward)
        self.span.add_event("gen_ai.evaluation.result", attrs)

    def finish(self, reason: str) -> None:
        """Why the episode stopped (``max_steps``, ``max_turns``, ``timeout``, … make it censored)."""
        self.span.set_attribute("gen_ai.agent.finish_reason", reason)


@contextmanager
def episode(name: str = "agent", *, provider: Any = None, **attributes: Any) -> Iterator[Episode]:
    """One episode (the trace's root span ``invoke_agent NAME``); extra keyword attributes are set on it."""
    attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name, **attributes}
    with _tracer(provider).start_as_current_span(f"invoke_agent {name}", attributes=attrs) as span:
        yield Episode(span)


class Step:
    """One step (a context manager, or a decorator giving one step per call). See :func:`step`."""

    def __init__(self, name: str, kind: str = "tool", *, state: str | None = None, provider: Any = None,
                 milestone: bool = False, check: Callable[[Any], bool] | None = None,
                 attributes: dict[str, Any] | None = None) -> None:
        if kind not in _OPERATION:
            raise ValueError(f"kind must be one of {', '.join(_OPERATION)}, got {kind!r}")
        self.name, self.kind, self.state = name, kind, state or name
        self.provider = provider
        self.milestone = milestone
        self.check = check
        self.attributes = dict(attributes or {})
        self.span: Span | None = None
        self._verified: bool | None = None
        self._failed: str | None = None

    # ---------------------------------------------------------------- inside the block
    def verify(self, condition: Any) -> bool:
        """Record the milestone's verification condition (truthy = reached)."""
        self._verified = bool(condition)
        return self._verified

    def fail(self, error_type: str = "error") -> None:
        """Mark the step failed without raising (a handled tool error)."""
        self._failed = error_type

    def usage(self, *, input_tokens: int | None = None, output_tokens: int | None = None,
              cost_usd: float | None = None) -> None:
        assert self.span is not None, "usage() is called inside the step"
        for key, value in (("gen_ai.usage.input_tokens", input_tokens), ("gen_ai.usage.output_tokens", output_tokens),
                           ("llm.cost.total", cost_usd)):
            if value is not None:
                self.span.set_attribute(key, value)

    # ---------------------------------------------------------------- context manager
    def __enter__(self) -> Step:
        attrs: dict[str, Any] = {"gen_ai.operation.name": _OPERATION[self.kind], **self.attributes}
        if self.kind == "tool":
            attrs["gen_ai.tool.name"] = self.name
        prefix = _OPERATION[self.kind]
        self._cm = _tracer(self.provider).start_as_current_span(f"{prefix} {self.name}", attributes=attrs,
                                                                record_exception=True, set_status_on_exception=True)
        self.span = self._cm.__enter__()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        assert self.span is not None
        state = self.state
        if self.milestone and not self._verified:
            state = f"{self.state}:failed"
            self._failed = self._failed or "verification_failed"
        self.span.set_attribute(STATE_ATTRIBUTE, state)
        if exc_type is not None:
            self.span.set_attribute("error.type", exc_type.__name__)
        elif self._failed is not None:
            self.span.set_attribute("error.type", self._failed)
            self.span.set_status(Status(StatusCode.ERROR, self._failed))
        return self._cm.__exit__(exc_type, exc, tb)

    def __call__(self, fn: F) -> F:
        """Decorate ``fn``: each call is one step, its span covering the call.

        An ``async def`` function gets an ``async`` wrapper, so the span covers the awaited work and sees its
        exception (a plain wrapper would return the coroutine at once: a 0 ms step that never fails). Generator
        functions are refused: their work happens while the caller iterates, outside any call the decorator sees.
        """
        if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
            raise TypeError(f"tracetochain.instrument.step cannot decorate the generator function "
                            f"{getattr(fn, '__qualname__', fn)!r}: its work runs while the caller iterates. Use "
                            "`with step(...):` around the loop that consumes it, or decorate a function that returns "
                            "a list")
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                with self._copy() as s:
                    result = await fn(*args, **kwargs)
                    if s.milestone and s.check is not None and s._verified is None:
                        s.verify(s.check(result))
                    return result

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self._copy() as s:
                result = fn(*args, **kwargs)
                if s.milestone and s.check is not None and s._verified is None:
                    s.verify(s.check(result))
                return result

        return wrapper  # type: ignore[return-value]

    def _copy(self) -> Step:
        """A fresh step with this one's settings (one per call: calls may overlap)."""
        return Step(self.name, self.kind, state=self.state, provider=self.provider, milestone=self.milestone,
                    check=self.check, attributes=self.attributes)


def step(name: str, kind: str = "tool", *, state: str | None = None, provider: Any = None,
         **attributes: Any) -> Step:
    """A step of kind ``tool`` (default; ``name`` is the tool), ``llm`` or ``retrieval``; its state is ``state``
    (default ``name``). Use as ``with step(...) as s:`` or as a decorator."""
    return Step(name, kind, state=state, provider=provider, attributes=attributes)


def milestone(name: str, *, check: Callable[[Any], bool] | None = None, kind: str = "tool", provider: Any = None,
              **attributes: Any) -> Step:
    """A milestone state: reached (state ``name``) only when verified — by ``check(result)`` when decorating a
    function, or by ``m.verify(condition)`` inside a ``with`` block; otherwise state ``name:failed``."""
    return Step(name, kind, provider=provider, milestone=True, check=check, attributes=attributes)


def post_verdict(trace_id: str, outcome: bool | str | None = None, *, reward: float | None = None,
                 endpoint: str | None = None, token: str | None = None, timeout: float = 10.0) -> None:
    """Post a verdict decided after the episode ended (``POST /v1/verdicts``) to ``tracetochain serve``.

    ``endpoint`` and ``token`` default to what :func:`configure` was given (the server the spans go to), else
    ``$OTEL_EXPORTER_OTLP_ENDPOINT``, else ``http://127.0.0.1:4318``. The server uses a posted verdict for an
    episode none of whose own sources (outcome attribute, evaluation events) says how it ended."""
    if endpoint is None:
        endpoint = (_CONFIGURED.get("endpoint") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
                    or _DEFAULT_ENDPOINT)
        if token is None:
            token = _CONFIGURED.get("token")
    endpoint = endpoint.rstrip("/").removesuffix("/v1/traces")
    body: dict[str, Any] = {"trace_id": trace_id}
    if outcome is not None:
        body["outcome"] = ("success" if outcome else "failure") if isinstance(outcome, bool) else outcome
    if reward is not None:
        body["reward"] = reward
    req = urllib.request.Request(endpoint.rstrip("/") + "/v1/verdicts", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json",
                                          **({"Authorization": f"Bearer {token}"} if token else {})})
    if not endpoint.startswith(("http://", "https://")):
        raise ValueError(f"endpoint must be an http(s) URL, got {endpoint!r}")
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        resp.read()
