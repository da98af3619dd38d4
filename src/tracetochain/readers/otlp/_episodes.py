"""From a trace's spans to episodes and steps: the span tree, the episode roots (trace, agent or named span), the leaf
rule that makes steps, the wrapper spans' usage, and the emission of one canonical trace.
"""

from __future__ import annotations

import math
from typing import Any

from tracetochain.readers._common import TraceBuilder, add_float, add_int
from tracetochain.readers.otlp._conventions import _STEP_KINDS
from tracetochain.readers.otlp._outcomes import _NoOutcome, _outcome, _task_trial
from tracetochain.readers.otlp._spans import _Episode, _Options, _Span, _Trace
from tracetochain.traces import Problem


def emit_trace(trace: _Trace, opts: _Options, builder: TraceBuilder) -> None:
    """Assemble one trace's spans into episodes and step records on ``builder`` (``add_step`` per step,
    ``skip_trace`` / ``problems`` for an episode that cannot be used): the reader's rules, for one trace."""
    _emit_trace(trace, None, opts, builder)


def _tree(tr: _Trace) -> tuple[list[_Span], dict[str, list[_Span]], list[_Span]]:
    """Roots (true roots first, then orphans, by start), children lists, and all spans in BFS order."""
    spans = tr.spans
    children: dict[str, list[_Span]] = {}
    roots: list[_Span] = []
    for s in spans.values():
        if s.parent is None or s.parent not in spans or s.parent == s.sid:
            roots.append(s)
        else:
            children.setdefault(s.parent, []).append(s)
    roots.sort(key=lambda s: (s.parent is not None, _start_key(s), s.sid))
    order: list[_Span] = list(roots)
    i = 0
    while i < len(order):
        order.extend(children.get(order[i].sid, ()))
        i += 1
    return roots, children, order


def _start_key(s: _Span) -> float:
    return s.start if s.start is not None else math.inf


def _episodes(tr: _Trace, roots: list[_Span], children: dict[str, list[_Span]], order: list[_Span],
              opts: _Options) -> list[_Episode]:
    if opts.episode_kind == "trace":
        return [_Episode(tr.tid, roots[0] if roots else None, _bfs(roots, children))]
    tops: list[_Span] = []
    inside: dict[str, bool] = {}
    parent_of = tr.spans
    for s in order:
        p = parent_of.get(s.parent) if s.parent is not None and s.parent != s.sid else None
        above = p is not None and (inside.get(p.sid, False) or _is_episode_root(p, opts))
        inside[s.sid] = above
        if not above and _is_episode_root(s, opts):
            tops.append(s)
    tops.sort(key=lambda s: (_start_key(s), s.sid))
    return [_Episode(f"{tr.tid}:{s.sid}", s, _bfs([s], children), _ancestors(s, parent_of)) for s in tops]


def _ancestors(s: _Span, spans: dict[str, _Span]) -> list[_Span]:
    out: list[_Span] = []
    cur = s
    while cur.parent is not None and cur.parent != cur.sid and cur.parent in spans:
        cur = spans[cur.parent]
        out.append(cur)
    return out


def _is_episode_root(s: _Span, opts: _Options) -> bool:
    return s.agent_root if opts.episode_kind == "agent" else s.name == opts.episode_span


def _bfs(roots: list[_Span], children: dict[str, list[_Span]]) -> list[tuple[_Span, int]]:
    out = [(r, 0) for r in roots]
    i = 0
    while i < len(out):
        s, d = out[i]
        out.extend((c, d + 1) for c in children.get(s.sid, ()))
        i += 1
    return out


def _emit_trace(tr: _Trace, poison: tuple[str, int, str | None] | None, opts: _Options,
                builder: TraceBuilder) -> None:
    if poison is not None:  # skip mode only: a bad line or span touched this trace
        message, line, fieldname = poison
        builder.skip_trace(f"{message} (trace {tr.tid})", location=line, field=fieldname)
        return
    roots, children, order = _tree(tr)
    if len(order) < len(tr.spans):
        seen = {s.sid for s in order}
        loop = sorted(sid for sid in tr.spans if sid not in seen)
        builder.skip_trace(f"parentSpanId links form a cycle (trace {tr.tid}, spans {', '.join(loop[:3])})",
                           location=tr.first_line, field="parentSpanId",
                           hint="every span's parent chain must end at a root span")
        return
    # Which spans have a step-kind descendant (children come after parents in BFS order).
    has_step_below: dict[str, bool] = {}
    for s in reversed(order):
        has_step_below[s.sid] = any(c.kind in _STEP_KINDS or has_step_below[c.sid] for c in children.get(s.sid, ()))
    episodes = _episodes(tr, roots, children, order, opts)
    if not episodes:
        what = "top-level invoke_agent span" if opts.episode_kind == "agent" else f"span named {opts.episode_span!r}"
        builder.problems.append(Problem(tr.first_line, None, f"trace has no {what} (trace {tr.tid})",
                                        whole_trace=True))
        return
    for ep in episodes:
        steps = [s for s, _ in ep.spans if s.kind in _STEP_KINDS and not has_step_below[s.sid]]
        untimed = next((s for s in steps if s.start is None), None)
        if untimed is not None:
            builder.skip_trace(f"step span has no start time, so the steps cannot be ordered "
                               f"(episode {ep.eid}, span {untimed.sid})", location=untimed.line,
                               field="startTimeUnixNano")
            continue
        try:
            outcome, reward, finish, source = _outcome(ep, tr.tid, len(episodes), opts)
            task, trial = _task_trial(ep, opts)
        except _NoOutcome as exc:
            builder.skip_trace(exc.message, location=ep.root.line if ep.root else tr.first_line, field=exc.field,
                               hint=exc.hint)
            continue
        builder.outcome_sources[source] = builder.outcome_sources.get(source, 0) + 1
        if not steps:  # an episode with a verdict but no tool, LLM or retrieval span: still a trial
            builder.add_zero_step({"trace_id": ep.eid, "outcome": outcome, "task_id": task, "trial": trial,
                                   "reward": reward, "termination_reason": finish},
                                  ep.spans[0][0].line if ep.spans else tr.first_line)
            continue
        steps.sort(key=lambda s: (s.start, s.sid))
        extra = _wrapper_usage(ep, steps, children)
        for idx, s in enumerate(steps):
            tin, tout, cost = s.tokens_in, s.tokens_out, s.cost
            if s.sid in extra:
                e = extra[s.sid]
                tin, tout, cost = add_int(tin, e[0]), add_int(tout, e[1]), add_float(cost, e[2])
            builder.add_step({
                "trace_id": ep.eid, "step_idx": idx, "outcome": outcome, "task_id": task, "trial": trial,
                "reward": reward, "termination_reason": finish, "step_kind": s.kind,
                "tool_name": s.tool if s.kind == "tool" else None, "error": s.error, "error_type": s.error_type,
                "state": s.state, "text": s.text, "t_start": s.start, "t_end": s.end, "tokens_in": tin,
                "tokens_out": tout, "cost_usd": cost,
            }, s.line)


def _wrapper_usage(ep: _Episode, steps: list[_Span], children: dict[str, list[_Span]]) -> dict[str, list[Any]]:
    """Usage of LLM spans that are no step (their tool calls are child spans), keyed by their first step below."""
    step_ids = {s.sid for s in steps}
    extra: dict[str, list[Any]] = {}
    for s, _ in ep.spans:
        if s.kind != "llm" or s.sid in step_ids or (s.tokens_in is None and s.tokens_out is None and s.cost is None):
            continue
        below: list[_Span] = []
        stack = list(children.get(s.sid, ()))
        while stack:
            c = stack.pop()
            if c.sid in step_ids:
                below.append(c)
            stack.extend(children.get(c.sid, ()))
        if below:
            first = min(below, key=lambda b: (_start_key(b), b.sid))
            acc = extra.setdefault(first.sid, [None, None, None])
            acc[0], acc[1], acc[2] = add_int(acc[0], s.tokens_in), add_int(acc[1], s.tokens_out), \
                add_float(acc[2], s.cost)
    return extra
