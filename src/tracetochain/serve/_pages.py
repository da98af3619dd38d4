"""Server-rendered pages: one episode (the root-cause pointer an alert links to) and the report of a window.

Both are jinja2 templates with autoescaping: span names, tool names, error types and step text are untrusted.
"""

from __future__ import annotations

import datetime as _dt
import threading
from collections import OrderedDict
from typing import Any

from tracetochain._limits import time_problem
from tracetochain.readers.otlp import UNLABELLED
from tracetochain.traces import TraceTable

_TRACE_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Episode {{ ep.episode_id }} — tracetochain</title>
<link rel="icon" href="data:,"><link rel="stylesheet" href="/static/dashboard.css"></head>
<body><main class="page">
<p><a href="/">← dashboard</a></p>
<h1>Episode <code>{{ ep.episode_id }}</code></h1>
<p id="episode-outcome" class="outcome {{ ep.outcome }}">{{ ep.outcome }}</p>
<p>Trace <code>{{ ep.trace_id }}</code>{% if started %}, started {{ started }}{% endif %},
{{ ep.steps|length }} steps.</p>
<p class="path">{% for s in ep.states %}<span class="state">{{ s }}</span> → {% endfor %}
<span class="state {{ ep.outcome }}">{{ ep.outcome }}</span></p>
<table id="steps"><thead><tr><th>#</th><th>state</th><th>kind</th><th>tool</th><th>error</th><th>duration</th>
<th>text</th></tr></thead>
<tbody>{% for st in rows %}<tr class="{{ 'error' if st.error else '' }}"><td>{{ st.idx }}</td><td>{{ st.state }}</td>
<td>{{ st.kind }}</td><td>{{ st.tool }}</td><td>{{ st.error_type or ('yes' if st.error else '') }}</td>
<td>{{ st.duration }}</td><td class="text">{{ st.text }}</td></tr>{% endfor %}</tbody></table>
</main></body></html>
"""


def trace_html(ep: dict[str, Any]) -> str:
    """One decided episode: its state path and its steps (text cut at 2,000 characters)."""
    import jinja2

    rows = []
    for i, st in enumerate(ep["steps"]):
        kind, tool = st.get("step_kind", ""), st.get("tool_name", "")
        state = ep["states"][i] if i < len(ep["states"]) else ""
        t0, t1 = st.get("t_start"), st.get("t_end")
        text = str(st.get("text", ""))
        rows.append({"idx": i, "state": state, "kind": kind, "tool": tool, "error": bool(st.get("error")),
                     "error_type": st.get("error_type"),
                     "duration": f"{t1 - t0:.3f} s" if t0 is not None and t1 is not None else "",
                     "text": text[:2000] + ("…" if len(text) > 2000 else "")})
    started = None
    if ep.get("t_start") is not None and time_problem(ep["t_start"]) is None:
        started = _dt.datetime.fromtimestamp(ep["t_start"], _dt.UTC).isoformat(timespec="seconds")
    env = jinja2.Environment(autoescape=True)
    return env.from_string(_TRACE_TEMPLATE).render(ep=ep, rows=rows, started=started)


class ReportBusy(Exception):
    """Another report is being built and did not finish in time (503: retry)."""


#: One report at a time, and the last few kept until the store changes (N26): a report is a full audited analysis
#: of up to the whole store, so concurrent requests would each hold its memory.
_REPORT_LOCK = threading.Lock()
_REPORT_CACHE: OrderedDict[tuple[Any, ...], str] = OrderedDict()
_REPORT_CACHE_SIZE = 4


def window_report_html(service: Any, window: str, audit: bool, group: str | None = None, *,
                       wait: float = 120.0) -> str:
    """The full HTML report (``tracetochain report``) of one window's episodes, or of all of them; ``group``: of
    one agent (its windows are its own).

    Built one at a time (a request waits up to ``wait`` seconds, then :class:`ReportBusy`) and cached per store,
    group, window, audit flag and number of decided episodes."""
    key = (id(service), str(service.store.path), group, window, audit, service.live.n_episodes)
    if not _REPORT_LOCK.acquire(timeout=wait):
        raise ReportBusy("another report is being built; retry in a minute")
    try:
        page = _REPORT_CACHE.get(key)
        if page is None:
            page = _build_window_report(service, window, audit, group)
            _REPORT_CACHE[key] = page
            while len(_REPORT_CACHE) > _REPORT_CACHE_SIZE:
                _REPORT_CACHE.popitem(last=False)
        return page
    finally:
        _REPORT_LOCK.release()


def _build_window_report(service: Any, window: str, audit: bool, group: str | None = None) -> str:
    from tracetochain.analysis import analyze
    from tracetochain.report import build_report, render_html

    if group is not None and group not in service.groups:
        raise ValueError(f"no episodes of group {group!r}")
    live = service.live if group is None else service.groups[group]
    if window in ("all", ""):
        records = service.store.steps_of(group=group) if group is not None else service.store.steps_of()
        label = "all traces" if group is None else f"all traces of {group}"
    else:
        try:
            key = int(window) if len(window) <= 20 else None  # a longer number is no window (and overflows floats)
            if key is None:
                raise ValueError
        except ValueError:
            raise ValueError(f"window must be a window number from the dashboard or 'all', got "
                             f"{window[:40]!r}") from None
        if live.window.by == "count":
            known = 0 <= key <= live.n_episodes // int(live.window.size)
        else:
            known = time_problem(key * live.window.size) is None and time_problem((key + 1) * live.window.size) is None
        if not known:  # also keeps the store's query within SQLite's integers (N16)
            raise ValueError(f"there is no window {window[:40]}; use a window number from the dashboard or 'all'")
        bounds = live.window_bounds(key)
        if bounds["by"] == "count":
            records = service.store.steps_of(seq_range=(bounds["first"] + 1, bounds["last"] + 2), group=group)
        else:
            records = service.store.steps_of(time_range=(bounds["start"], bounds["end"]), group=group)
        label = f"window {live.window_label(key)}" + (f" of {group}" if group is not None else "")
    # The report is the offline analysis of the labelled episodes, as the live chain is: an unlabelled run's
    # canonical outcome is `censored`, and a censored trace's exit is dropped, which is wrong for a run that ended.
    records = [r for r in records if r.get("termination_reason") != UNLABELLED]
    if not records:
        raise ValueError(f"no decided (labelled) episodes in {label}")
    traces = TraceTable.from_records(records, source=f"live store {service.store.path} ({label})", format="otlp")
    try:
        result = analyze(traces, audit=audit, samples=500, seed=service.config.seed)
    except ValueError as exc:
        raise ValueError(f"cannot build the report of {label}: {exc}") from None
    return render_html(build_report(result, horizon=service.config.horizon))
