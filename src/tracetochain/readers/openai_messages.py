"""OpenAI-style chat logs: a JSON list or JSONL of episodes, each holding a list of chat messages.

Format
    Many harnesses log an agent episode as the chat it had with the model, in the OpenAI Chat Completions message
    shape: ``{"role": "system"|"user"|"assistant"|"tool", "content": ..., "tool_calls": [{"id", "type":
    "function", "function": {"name", "arguments": "<JSON string>"}}], "tool_call_id": ...}``. This reader takes a
    file of such episodes — a JSON array (``.json``) or one episode per line (``.jsonl``/``.ndjson``) — where each
    episode is an object with the message list (key ``messages``, or ``traj`` as τ-bench writes it) and
    per-episode fields for its id, task, trial and verdict. τ-bench's ``EnvRunResult`` lists
    are one instance of it; the dedicated :mod:`tracetochain.readers.tau_bench` readers reuse the message walk
    defined here (:func:`steps_from_messages`).

Options (keys may be dotted paths into nested objects, e.g. ``reward_key="reward_info.reward"`` or
``outcome_key="metadata.success"``; a key stored whole with dots in its name wins over the path)
    ``messages_key`` (default: ``messages``, else ``traj``), ``id_key`` (``id``), ``task_key`` (``task_id``),
    ``trial_key`` (``trial``), ``reward_key`` (``reward``), ``outcome_key`` (``outcome``), ``termination_key``
    (``termination_reason``), ``success_threshold`` (default 1 − 1e−6), ``success_values`` (text verdicts that
    mean success, e.g. ``"completed,done"``; any other text is then a failure), ``include_user`` (False),
    ``error_prefix`` (``"Error"``; ``None`` turns the content heuristic off).

Header lines
    In a JSONL file, lines before the first episode that only describe the run — ``{"metadata": {...}}``, or any
    object whose keys are header words such as ``metadata``/``header``/``config``/``version`` (see
    :func:`~tracetochain.readers._common.is_header_record`) — are not episodes: they are kept in
    ``table.report.run_metadata``.

Field mapping (one canonical record per agent step)
    * ``trace_id`` — the episode's ``id_key`` value; without one, ``"<file stem>/task<task>/trial<trial>"`` when
      the episode has a task and a trial, else ``"<file stem>/<line or index>"``. Duplicate ids are an error.
    * ``task_id`` / ``trial`` / ``termination_reason`` — the named fields (task as text, trial as an integer).
    * steps — see :func:`steps_from_messages`: each tool call of an assistant turn is one ``tool`` step
      (``tool_name`` = the function name, ``text`` = its arguments as JSON text), an assistant turn without tool
      calls is one ``llm`` step (``text`` = its content); tool results are not steps, they set ``error`` on the
      step whose call they answer (matched by ``tool_call_id``/``id``, else in call order); ``system`` messages are
      never steps; ``user`` turns become ``user`` steps only with ``include_user=True``. ``t_start`` comes from a
      message ``timestamp`` (ISO-8601 or epoch seconds), ``t_end`` of a tool step from its result's timestamp;
      ``usage`` (prompt/completion or input/output tokens) and ``cost`` of a turn go on its first step.
    * ``error`` of a tool step — the result's ``error`` (or ``is_error``) field when present: a boolean is the
      flag; text (the error message, e.g. ``"TimeoutError('upstream timed out')"``) or an object
      (``{"type", "message"}``) marks the step as an error and is kept — the message in the extra column
      ``error_message`` (cut at 4,000 characters) and the class in ``error_type`` when it can be read (an exception
      name at the start of the text, or the object's ``type``); empty text or null is no error. Without that field,
      whether the result's text starts with ``error_prefix`` (τ-bench's convention; the text is then the
      ``error_message``).
    * ``outcome`` — the ``outcome_key`` value when present, else the ``reward_key`` value. A verdict may be
      ``success``/``failure``/``censored``/``invalid``, a boolean, a number (a reward: success when ≥
      ``success_threshold``, so 1/0 read as success/failure) or a verdict word (``pass``/``passed``/``resolved``/
      ``correct``/``yes``/``true`` … and ``fail``/``failed``/``incorrect``/``no``/``false`` …, any case; numeric
      text is a number). Text that is none of these is an error unless ``success_values=`` says which texts mean
      success. An episode with neither key is an error (or skipped and counted with ``on_error="skip"``) whose
      message names the verdict-like fields the episode does have: success is never guessed.

Episodes that produce no step at all (e.g. only system/user messages, or an agent that answered nothing) are still
trials with an outcome: they are kept as zero-step episodes (``table.report.zero_step``) and reported, never
dropped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from tracetochain.exceptions import TraceValidationError
from tracetochain.readers._common import (
    DEFAULT_SUCCESS_THRESHOLD,
    FAILURE_WORDS,
    SUCCESS_WORDS,
    RecordHead,
    Refusal,
    Sniffed,
    TraceBuilder,
    finite_float,
    head_text,
    is_header_record,
    json_loads,
    jsonl_first_head,
    keys_text,
    load_json,
    merge_header,
    parse_success_values,
    read_record_head,
    verdict_candidates,
    verdict_option,
    verdict_to_outcome,
    wrong_suffix,
)
from tracetochain.readers._many import flatten_metadata
from tracetochain.traces import TraceTable
from tracetochain.traces.shared import OUTCOME_VALUES

__all__ = [
    "OPENAI_MESSAGES",
    "EpisodeFormatError",
    "OpenAIMessagesReader",
    "RecordHead",
    "ToolError",
    "ToolErrorRule",
    "error_flag",
    "read_record_head",
    "steps_from_messages",
    "tool_error_rule",
]

_JSON_SUFFIXES = (".json", ".jsonl", ".ndjson")
_LINE_SUFFIXES = (".jsonl", ".ndjson")


# ================================================================================================ errors
class EpisodeFormatError(ValueError):
    """Malformed content inside one episode. ``field`` is the path within the episode, e.g.
    ``messages[3].tool_calls[0].function.name``; the reader adds the file and the episode's location."""

    def __init__(self, message: str, field: str | None = None, hint: str | None = None) -> None:
        self.message = message
        self.field = field
        self.hint = hint
        super().__init__(message)


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


_TRIAL_TEXT = re.compile(r"\s*-?[0-9]{1,18}\s*")


# ================================================================================================ sniffing
def _is_json_file(path: Path) -> bool:
    return path.is_file() and path.suffix.lower() in _JSON_SUFFIXES


# ================================================================================================ message walk
class ToolError(NamedTuple):
    """What a tool result says about its call: whether it failed, the error class and the error message."""

    failed: bool
    error_type: str | None = None
    message: str | None = None


#: A rule reading a tool result message: ``rule(reply, where) -> ToolError`` (a plain bool is accepted too).
ToolErrorRule = Callable[[Mapping[str, Any], str], ToolError | bool]

#: Longest error message kept per step (tool errors can carry whole stack traces).
MAX_ERROR_MESSAGE = 4000
#: An exception class at the start of an error text: ``TimeoutError('…')``, ``ValueError: …``,
#: ``requests.exceptions.HTTPError: …`` (the last dotted part is the class).
_EXCEPTION_AT_START = re.compile(
    r"^\s*(?:[A-Za-z_][\w]*\.)*([A-Za-z_]\w*(?:Error|Exception|Exceeded|Timeout|Failure|Fault|Interrupt|Denied))\b")


def error_type_from_text(text: str) -> str | None:
    """The exception class named at the start of an error message, if any.

    >>> error_type_from_text("TimeoutError('upstream timed out')"), error_type_from_text("Error: not found")
    ('TimeoutError', None)
    """
    m = _EXCEPTION_AT_START.match(text)
    return m.group(1) if m else None


def _kept_message(text: str) -> str:
    return text if len(text) <= MAX_ERROR_MESSAGE else text[: MAX_ERROR_MESSAGE - 1] + "…"


def error_flag(reply: Mapping[str, Any], where: str) -> ToolError | None:
    """The result's own ``error`` (τ²-bench) or ``is_error`` field, read as a :class:`ToolError`; None when absent.

    A boolean (or 0/1) is the flag; non-empty text is an error message; an object is an error with its ``type``
    and ``message``; empty text is no error.
    """
    for key in ("error", "is_error"):
        value = reply.get(key)
        if value is None:
            continue
        if isinstance(value, bool):
            return ToolError(value)
        if isinstance(value, int) and value in (0, 1):
            return ToolError(bool(value))
        if isinstance(value, str):
            text = value.strip()
            if not text or text.lower() in ("false", "none", "null"):
                return ToolError(False)
            if text.lower() == "true":
                return ToolError(True)
            return ToolError(True, error_type_from_text(text), _kept_message(text))
        if isinstance(value, dict):
            kind = next((value[k] for k in ("type", "error_type", "name", "code") if isinstance(value.get(k), str)
                         and value[k]), None)
            message = next((value[k] for k in ("message", "detail", "details", "description")
                            if isinstance(value.get(k), str) and value[k]), None)
            if message is None:
                message = json.dumps(value, ensure_ascii=False, default=str)
            return ToolError(True, kind, _kept_message(message))
        raise EpisodeFormatError(f"expected true/false or an error message, got {_short(value)}", f"{where}.{key}",
                                 "a tool result's error is a boolean, the error text, or {type, message}")
    return None


def tool_error_rule(*, flag: bool = True, prefix: str | None = "Error") -> ToolErrorRule:
    """Build a :data:`ToolErrorRule`: the ``error`` field when ``flag`` and present, else the content prefix test.

    τ-bench marks a failed call only by a result text starting with ``"Error"``; τ²-bench
    sets ``ToolMessage.error``.
    """

    def rule(reply: Mapping[str, Any], where: str) -> ToolError:
        if flag:
            found = error_flag(reply, where)
            if found is not None:
                return found
        if prefix is None:
            return ToolError(False)
        text = _content_text(reply.get("content"), f"{where}.content")
        if text is not None and text.lstrip().startswith(prefix):
            body = text.strip()
            after = body[len(prefix):].lstrip(" :")
            return ToolError(True, error_type_from_text(body) or error_type_from_text(after), _kept_message(body))
        return ToolError(False)

    return rule


def _content_text(content: Any, where: str) -> str | None:
    """Message content as text: a string, the text parts of a list of content parts, or an object as JSON."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "\n".join(parts) if parts else None
    if isinstance(content, dict):  # structured content (e.g. a tool's JSON result) is kept as JSON text
        return json.dumps(content, ensure_ascii=False)
    raise EpisodeFormatError(f"expected text, content parts or an object, got {_type_name(content)}", where,
                             "write the message content as a string")


def _arguments_text(args: Any) -> str | None:
    if args is None or isinstance(args, str):
        return args
    try:
        return json.dumps(args, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(args)


def _call_id(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise EpisodeFormatError(f"expected a call id (text), got {_type_name(value)}", where)
    return str(value)


def _tool_calls(msg: Mapping[str, Any], where: str) -> list[tuple[str | None, str, str | None]]:
    """(call id, function name, arguments text) for every tool call of a message, in order."""
    raw = msg.get("tool_calls")
    calls: list[tuple[str | None, str, str | None]] = []
    if raw is not None:
        if not isinstance(raw, list):
            raise EpisodeFormatError(f"expected a list of tool calls, got {_type_name(raw)}", f"{where}.tool_calls")
        for k, call in enumerate(raw):
            cw = f"{where}.tool_calls[{k}]"
            if not isinstance(call, dict):
                raise EpisodeFormatError(f"expected a tool call object, got {_type_name(call)}", cw)
            fn = call.get("function")
            if fn is not None:  # OpenAI: {"id", "type": "function", "function": {"name", "arguments"}}
                if not isinstance(fn, dict):
                    raise EpisodeFormatError(f"expected an object, got {_type_name(fn)}", f"{cw}.function")
                name, args, name_field = fn.get("name"), fn.get("arguments"), f"{cw}.function.name"
            else:  # τ²-bench: {"id", "name", "arguments": {...}, "requestor"}
                name, args, name_field = call.get("name"), call.get("arguments"), f"{cw}.name"
            if not isinstance(name, str) or not name:
                raise EpisodeFormatError(f"tool call has no function name (got {_type_name(name)})", name_field,
                                         "each tool call needs the name of the function it calls")
            calls.append((_call_id(call.get("id"), f"{cw}.id"), name, _arguments_text(args)))
    legacy = msg.get("function_call")
    if not calls and legacy is not None:  # the pre-tools OpenAI API: one function_call per message
        if not isinstance(legacy, dict) or not isinstance(legacy.get("name"), str) or not legacy["name"]:
            raise EpisodeFormatError("expected {\"name\", \"arguments\"}", f"{where}.function_call")
        calls.append((None, legacy["name"], _arguments_text(legacy.get("arguments"))))
    return calls


_TIME_HINT = "write timestamps as ISO-8601 text (e.g. 2026-01-01T12:00:00Z) or epoch seconds, or leave them out"


def _seconds(value: Any, where: str) -> float | None:
    """Epoch seconds from a number or an ISO-8601 string (naive means UTC); None when absent. A timestamp that is
    present but unreadable (not a time, NaN, infinite, out of range) is an error naming it: dropping it silently
    would leave a step without its time and nobody told."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise EpisodeFormatError(f"expected a time, got {_short(value)}", where, _TIME_HINT)
    if isinstance(value, (int, float)):
        seconds = finite_float(value)
        if seconds is None:
            raise EpisodeFormatError(f"expected a finite time, got {_short(value)}", where, _TIME_HINT)
        return seconds
    try:
        stamp = datetime.fromisoformat(value.strip())
        return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()
    except (ValueError, OverflowError, OSError):
        raise EpisodeFormatError(f"expected an ISO-8601 time, got {_short(value)}", where, _TIME_HINT) from None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63 else None


def _usage(msg: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Tokens and cost of one turn, when the message records them. A value that is present but not a count (a
    negative, fractional or infinite token count) or not a finite non-negative cost is an error naming it, not a
    value dropped in silence."""
    out: dict[str, Any] = {}
    usage = msg.get("usage")
    if isinstance(usage, dict):
        for key, column in (("prompt_tokens", "tokens_in"), ("input_tokens", "tokens_in"),
                            ("completion_tokens", "tokens_out"), ("output_tokens", "tokens_out")):
            if column in out or usage.get(key) is None:
                continue
            count = _count(usage[key])
            if count is None:
                raise EpisodeFormatError(f"expected a token count (a whole number >= 0), got {_short(usage[key])}",
                                         f"{where}.usage.{key}", "write token counts as whole numbers, or leave "
                                         "them out")
            out[column] = count
    cost = msg.get("cost")
    if cost is not None:
        cost_usd = finite_float(cost) if isinstance(cost, (int, float)) else None
        if cost_usd is None or cost_usd < 0:
            raise EpisodeFormatError(f"expected a cost in USD (a finite number >= 0), got {_short(cost)}",
                                     f"{where}.cost", "write the cost as a number, or leave it out")
        out["cost_usd"] = cost_usd
    return out


_USER_ROLES = ("user", "human")
_AGENT_ROLES = ("assistant", "ai", "model")
_TOOL_ROLES = ("tool", "function", "ipython")


def steps_from_messages(messages: Any, *, include_user: bool = False,
                        tool_error: ToolErrorRule | None = None, field: str = "messages") -> list[dict[str, Any]]:
    """Turn one episode's chat messages into canonical step dicts (without the trace-level fields).

    * an assistant message with k tool calls → k ``tool`` steps in order (``tool_name``; ``text`` = arguments as
      JSON text); an assistant message without tool calls → one ``llm`` step (``text`` = its content; text sent
      alongside tool calls is not kept);
    * a tool result (``role`` ``tool``/``function``, or τ²'s multi-tool wrapper with ``tool_messages``) is not a
      step: it sets ``error`` (by ``tool_error``; default: the boolean flag, else the ``"Error"`` prefix) and
      ``t_end`` on the step whose call it answers, matched by ``tool_call_id``/``id`` or else in call order;
    * user messages → ``user`` steps only when ``include_user`` (a user's own tool calls, as in τ² telecom,
      become ``user`` steps with ``tool_name``); ``system``/``developer`` messages are never steps.

    Raises :class:`EpisodeFormatError` naming the message (``messages[3].tool_calls[0]``) on malformed input.
    """
    rule = tool_error or tool_error_rule()
    if not isinstance(messages, list):
        raise EpisodeFormatError(f"expected a list of messages, got {_type_name(messages)}", field,
                                 "an episode holds its chat as a list of {\"role\", \"content\", …} messages")
    steps: list[dict[str, Any]] = []
    by_id: dict[str, int | None] = {}  # call id → index of its step (None: a call whose step is not kept)
    in_order: list[int | None] = []  # calls without an id, oldest first
    for i, msg in enumerate(messages):
        where = f"{field}[{i}]"
        if not isinstance(msg, dict):
            raise EpisodeFormatError(f"expected a message object, got {_type_name(msg)}", where)
        role = msg.get("role")
        if not isinstance(role, str):
            raise EpisodeFormatError(f"message has no role (got {_type_name(role)})", f"{where}.role",
                                     "every message needs a role such as 'assistant', 'user' or 'tool'")
        role = role.strip().lower()
        if role in _TOOL_ROLES:
            nested = msg.get("tool_messages")
            if nested is not None and not isinstance(nested, list):
                raise EpisodeFormatError(f"expected a list, got {_type_name(nested)}", f"{where}.tool_messages")
            replies = [(f"{where}.tool_messages[{j}]", r) for j, r in enumerate(nested)] if nested is not None \
                else [(where, msg)]
            for rwhere, reply in replies:
                if not isinstance(reply, dict):
                    raise EpisodeFormatError(f"expected a tool result object, got {_type_name(reply)}", rwhere)
                rid = _call_id(reply.get("tool_call_id", reply.get("id")), f"{rwhere}.tool_call_id")
                if rid is not None and rid in by_id:
                    target = by_id.pop(rid)
                elif in_order:
                    target = in_order.pop(0)
                else:
                    continue  # a result nobody asked for: not a step, nothing to flag
                if target is not None:
                    verdict = rule(reply, rwhere)
                    if isinstance(verdict, ToolError):
                        steps[target]["error"] = verdict.failed
                        if verdict.failed and verdict.error_type:
                            steps[target]["error_type"] = verdict.error_type
                        if verdict.failed and verdict.message:
                            steps[target]["error_message"] = verdict.message
                    else:
                        steps[target]["error"] = bool(verdict)
                    t_end = _seconds(reply.get("timestamp"), f"{rwhere}.timestamp")
                    if t_end is not None:
                        steps[target]["t_end"] = t_end
            continue
        if role in _AGENT_ROLES:
            keep, kind = True, "llm"
        elif role in _USER_ROLES:
            keep, kind = include_user, "user"
        else:  # system, developer and anything else: context, not a step
            continue
        calls = _tool_calls(msg, where)
        t_start = _seconds(msg.get("timestamp"), f"{where}.timestamp")
        usage = _usage(msg, where)
        if calls:
            for k, (call_id, name, args) in enumerate(calls):
                idx: int | None = None
                if keep:
                    step = {"step_kind": "tool" if kind == "llm" else "user", "tool_name": name, "text": args,
                            "error": False, "t_start": t_start}
                    if k == 0:
                        step.update(usage)
                    steps.append(step)
                    idx = len(steps) - 1
                if call_id is not None:
                    by_id[call_id] = idx
                else:
                    in_order.append(idx)
        elif keep:
            text = _content_text(msg.get("content"), f"{where}.content")
            steps.append({"step_kind": kind, "text": text, "error": False, "t_start": t_start, **usage})
    return steps


# ================================================================================================ episode fields
def lookup(record: Mapping[str, Any], key: str) -> tuple[bool, Any]:
    """(found, value) for ``key``, which may be a dotted path (an exact key wins over the path)."""
    if key in record:
        return True, record[key]
    node: Any = record
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


def parse_task_id(value: Any, field: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise EpisodeFormatError(f"expected a task id (text or integer), got {_type_name(value)}", field)
    return str(value)


def parse_trial(value: Any, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63:
        return value
    if isinstance(value, str) and _TRIAL_TEXT.fullmatch(value):
        return int(value)
    raise EpisodeFormatError(f"expected an integer trial, got {_short(value)}", field,
                             "the trial is the repetition index of the task: 0, 1, 2, …")


def parse_reward(value: Any, field: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise EpisodeFormatError(f"expected a number, got {_short(value)}", field, "write the reward as a number")
    reward = finite_float(value)
    if reward is None:
        raise EpisodeFormatError(f"expected a finite number, got {_short(value)}", field,
                                 "write the reward as a number")
    return reward


def parse_outcome(value: Any, field: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "success" if value else "failure"
    if isinstance(value, str) and value.strip().lower() in OUTCOME_VALUES:
        return value.strip().lower()
    raise EpisodeFormatError(f"unknown outcome {value!r}", field,
                             f"use one of {', '.join(OUTCOME_VALUES)} or true/false, or give a reward instead")


def parse_verdict(value: Any, field: str, threshold: float,
                  successes: frozenset[str] | None = None) -> tuple[str, float | None] | None:
    """``(outcome, reward)`` from a verdict value (see the module docstring); None when the value is null."""
    if value is None:
        return None
    if isinstance(value, str) and value.strip().lower() in OUTCOME_VALUES:
        return value.strip().lower(), None
    found = verdict_to_outcome(value, successes, threshold)
    if isinstance(found, str):
        raise EpisodeFormatError(found, field, "a verdict is true/false, a number (a reward), success/failure/"
                                 "censored/invalid or a word such as pass/fail; name which texts mean success with "
                                 "success_values=")
    if isinstance(value, bool):  # a boolean verdict is not a score: record no reward for it
        return found[0], None
    return found


def episode_verdict(ep: Mapping[str, Any], outcome_key: str, reward_key: str, threshold: float,
                    successes: frozenset[str] | None = None) -> tuple[str, float | None]:
    """The episode's ``(outcome, reward)``: the ``outcome_key`` verdict, else the ``reward_key`` one; an episode
    with neither raises an error naming the verdict-like fields it does have."""
    by_reward = parse_verdict(lookup(ep, reward_key)[1], reward_key, threshold, successes)
    by_outcome = parse_verdict(lookup(ep, outcome_key)[1], outcome_key, threshold, successes)
    reward = by_reward[1] if by_reward is not None else None
    if by_outcome is not None:
        return by_outcome[0], reward if reward is not None else by_outcome[1]
    if by_reward is not None:
        return by_reward
    candidates = verdict_candidates(ep)
    if candidates:
        options = " or ".join(f"{verdict_option(path, value)} ({path} = {_short(value, 30)})"
                              for path, value in candidates[:3])
        hint = f"this episode has {options}: pass it as a reader option (-O on the command line)"
    else:
        hint = ("add the episode's reward or outcome, or name its key with reward_key=/outcome_key= "
                "(success is never guessed)")
    raise EpisodeFormatError(f"episode has neither a {reward_key!r} nor an {outcome_key!r}", reward_key, hint)


def check_threshold(value: Any) -> float:
    threshold = finite_float(value) if isinstance(value, (int, float)) else None
    if threshold is None:
        raise TypeError(f"success_threshold must be a finite number, got {value!r}")
    return threshold


def add_trace(builder: TraceBuilder, steps: list[dict[str, Any]], trace: dict[str, Any], location: int,
              *, empty_field: str) -> None:
    """Add one episode's steps with its trace-level fields; an episode without steps is kept as a zero-step trial
    (:meth:`~tracetochain.readers._common.TraceBuilder.add_zero_step`), never dropped."""
    if not steps:
        builder.add_zero_step(trace, location)
        return
    for i, step in enumerate(steps):
        builder.add_step({"trace_id": trace["trace_id"], "step_idx": i, **step,
                          **{k: v for k, v in trace.items() if k != "trace_id"}}, location)


# ================================================================================================ the reader
class OpenAIMessagesReader:
    name = "openai-messages"
    description = ("OpenAI-style chat logs: a JSON list or JSONL of episodes, each with a messages list and a "
                   "reward or outcome")
    needs = ("nothing else when each episode carries a reward or outcome; name keys that differ with "
             "messages_key=, id_key=, task_key=, trial_key=, reward_key=, outcome_key= (dotted paths such as "
             "outcome_key=metadata.success reach into nested fields)")

    def sniff(self, path: Path) -> Sniffed:
        if not _is_json_file(path):
            return wrong_suffix(path, _JSON_SUFFIXES)
        n_headers = 0
        if path.suffix.lower() in _LINE_SUFFIXES:
            head, n_headers = jsonl_first_head(path)
        else:
            head = read_record_head(head_text(path))
        if head is None:
            return Refusal("does not start with a JSON object or list")
        if path.suffix.lower() == ".json" and head.container != "list":
            return Refusal("one JSON document, not a list of episodes")
        if {"trace_id", "step_idx"} <= set(head.keys):
            return Refusal("its records are steps of a canonical table (trace_id, step_idx), not episodes")
        if any(head.keys.get(k) == "[" for k in ("messages", "traj")):
            return True
        after = f" (after {n_headers} header line{'s' * (n_headers > 1)})" if n_headers else ""
        return Refusal(f"the first record{after} has no 'messages' or 'traj' list; its keys: {keys_text(head.keys)}")

    def read(self, path: Path, *, on_error: str = "raise", messages_key: str | None = None, id_key: str = "id",
             task_key: str = "task_id", trial_key: str = "trial", reward_key: str | None = None,
             outcome_key: str | None = None, termination_key: str = "termination_reason",
             success_threshold: float = DEFAULT_SUCCESS_THRESHOLD, success_values: Any = None,
             include_user: bool = False, error_prefix: str | None = "Error",
             keep_metadata: bool = True) -> TraceTable:
        """Read a JSON list or JSONL file of chat episodes (options: see the module docstring)."""
        path = Path(path)
        named_verdict = reward_key is not None or outcome_key is not None
        reward_key = "reward" if reward_key is None else reward_key
        outcome_key = "outcome" if outcome_key is None else outcome_key
        threshold = check_threshold(success_threshold)
        successes = parse_success_values(success_values)
        for opt, val in (("id_key", id_key), ("task_key", task_key), ("trial_key", trial_key),
                         ("reward_key", reward_key), ("outcome_key", outcome_key),
                         ("termination_key", termination_key)):
            if not isinstance(val, str) or not val:
                raise TypeError(f"{opt} must be a non-empty string, got {val!r}")
        if messages_key is not None and (not isinstance(messages_key, str) or not messages_key):
            raise TypeError(f"messages_key must be a non-empty string, got {messages_key!r}")
        if error_prefix is not None and not isinstance(error_prefix, str):
            raise TypeError(f"error_prefix must be a string or None, got {error_prefix!r}")
        if not path.is_file():
            raise TraceValidationError("no such file", source=str(path))
        line_based = path.suffix.lower() in _LINE_SUFFIXES
        builder = TraceBuilder(str(path), self.name, on_error, "line" if line_based else "row")
        rule = tool_error_rule(flag=True, prefix=error_prefix)
        seen: set[tuple[int, str]] = set()
        headers: list[dict[str, Any]] = []
        segment_of: list[int] = []  # the header segment of every record added (a stream of concatenated files)
        decided = named_verdict
        for loc, episode, segment in _episodes(path, builder, line_based, headers):
            if not decided:
                decided = True
                found = detect_verdict_field(episode, outcome_key, reward_key)
                if found is not None:
                    outcome_key = found
                    builder.verdict_field = found
            try:
                trace, steps = self._episode(episode, loc, path.stem, messages_key, id_key, task_key, trial_key,
                                             reward_key, outcome_key, termination_key, threshold, successes,
                                             bool(include_user), rule)
            except EpisodeFormatError as exc:
                builder.skip_trace(exc.message, location=loc, field=exc.field, hint=exc.hint)
                continue
            if (segment, trace["trace_id"]) in seen:
                builder.skip_trace(f"episode id {trace['trace_id']!r} repeats an earlier episode", location=loc,
                                   field=id_key, hint="give every episode its own id (or distinct task/trial)")
                continue
            seen.add((segment, trace["trace_id"]))
            if keep_metadata:
                trace.update(episode_metadata(episode))
            before = len(builder.records)
            add_trace(builder, steps, trace, loc, empty_field=messages_key or "messages")
            segment_of += [segment] * (len(builder.records) - before)
        if len(headers) > 1:
            _label_segments(builder, headers, segment_of, seen)
        elif headers:
            builder.run_metadata = headers[0]
        return builder.build()

    @staticmethod
    def _episode(ep: Mapping[str, Any], loc: int, stem: str, messages_key: str | None, id_key: str,
                 task_key: str, trial_key: str, reward_key: str, outcome_key: str, termination_key: str,
                 threshold: float, successes: frozenset[str] | None, include_user: bool,
                 rule: ToolErrorRule) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        if messages_key is None:
            key = next((k for k in ("messages", "traj") if k in ep), None)
            if key is None:
                raise EpisodeFormatError("episode has no 'messages' (or 'traj') list", "messages",
                                         "name the key that holds the chat with messages_key=")
        else:
            key = messages_key
        found, messages = lookup(ep, key)
        if not found:
            raise EpisodeFormatError(f"episode has no {key!r} list", key,
                                     "name the key that holds the chat with messages_key=")
        steps = steps_from_messages(messages, include_user=include_user, tool_error=rule, field=key)
        task_id = parse_task_id(lookup(ep, task_key)[1], task_key)
        trial = parse_trial(lookup(ep, trial_key)[1], trial_key)
        outcome, reward = episode_verdict(ep, outcome_key, reward_key, threshold, successes)
        termination = lookup(ep, termination_key)[1]
        if termination is not None and not isinstance(termination, str):
            raise EpisodeFormatError(f"expected text, got {_type_name(termination)}", termination_key)
        raw_id = lookup(ep, id_key)[1]
        if raw_id is not None:
            if isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)) or raw_id == "":
                raise EpisodeFormatError(f"expected an episode id (text), got {raw_id!r}", id_key)
            trace_id = str(raw_id)
        elif task_id is not None and trial is not None:
            trace_id = f"{stem}/task{task_id}/trial{trial}"
        else:
            trace_id = f"{stem}/{loc}"
        trace = {"trace_id": trace_id, "outcome": outcome, "task_id": task_id, "trial": trial, "reward": reward,
                 "termination_reason": termination}
        return trace, steps


def detect_verdict_field(episode: Mapping[str, Any], outcome_key: str, reward_key: str) -> str | None:
    """The verdict field to use when the user named none and the episode has neither ``outcome_key`` nor
    ``reward_key``: the one boolean or verdict-like field of the episode (a boolean, 0/1, or a verdict word such as
    ``pass``/``failed``, under a verdict name such as ``success``/``passed``/``resolved``; see
    :func:`~tracetochain.readers._common.verdict_candidates`). None when the episode has the default keys or no
    such field; several such fields stop the read with an error that lists them (which one is meant cannot be
    guessed)."""
    if lookup(episode, outcome_key)[0] or lookup(episode, reward_key)[0]:
        return None
    found = [path for path, value in verdict_candidates(episode, limit=50) if _verdict_like(value)]
    if len(found) == 1:
        return found[0]
    if len(found) > 1:
        raise TraceValidationError(
            f"episodes have several verdict-like fields: {', '.join(found)}", field=found[0],
            hint=f"choose the one that says whether the episode succeeded with -O outcome_key=PATH "
                 f"(e.g. -O outcome_key={found[0]}; in Python: outcome_key={found[0]!r})")
    return None


def _verdict_like(value: Any) -> bool:
    if isinstance(value, bool):
        return True
    if isinstance(value, int):
        return value in (0, 1)
    return isinstance(value, str) and value.strip().lower() in (SUCCESS_WORDS | FAILURE_WORDS)


def episode_metadata(episode: Mapping[str, Any], *, max_fields: int = 64) -> dict[str, str]:
    """The scalar fields of an episode's ``metadata`` object as text trace fields ``metadata.<key>`` (nested
    objects as dotted keys), so that ``--where metadata.attack_type=none`` and ``--by metadata.domain`` can select
    and group episodes. Values are text as :func:`~tracetochain.traces._select.text_value` writes them."""
    meta = episode.get("metadata")
    if not isinstance(meta, dict):
        return {}
    out = {f"metadata.{k}": v for k, v in flatten_metadata({"metadata": meta}).items()}
    return dict(list(out.items())[:max_fields])


def _label_segments(builder: TraceBuilder, headers: list[dict[str, Any]], segment_of: list[int],
                    seen: set[tuple[int, str]]) -> None:
    """A stream of several files (each with its header line): every episode gets its segment's header fields
    (``meta.*``, as a folder read gives them) and ``segment``; ids are prefixed with the segment when two segments
    use the same id."""
    flat = [flatten_metadata(h) for h in headers]
    ids = [tid for _, tid in seen]
    clash = len(set(ids)) < len(ids)
    for rec, seg in zip(builder.records, segment_of, strict=True):
        for key, value in flat[seg].items():
            rec.setdefault(f"meta.{key}", value)
        rec["segment"] = str(seg)
        if clash:
            rec["trace_id"] = f"segment{seg}/{rec['trace_id']}"
    builder.run_metadata = {"segments": headers}


def _episodes(path: Path, builder: TraceBuilder, line_based: bool, headers: list[dict[str, Any]]
              ) -> Iterator[tuple[int, Mapping[str, Any], int]]:
    """(location, episode object, header segment) triples; unreadable lines/elements are skipped (or raised) via
    ``builder``. Header records are collected in ``headers``: one before the first episode, and in JSONL one more
    each time a header line follows episodes (files concatenated into one stream: a new segment starts)."""
    if line_based:
        seen_episode = False
        with path.open("rb") as fh:
            for lineno, raw in enumerate(fh, start=1):
                if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                    raw = raw[3:]  # a byte-order mark is not part of the first episode
                if not raw.strip():
                    continue
                try:
                    rec = json_loads(raw.decode("utf-8"))
                except UnicodeDecodeError as exc:
                    builder.skip_trace(f"not UTF-8 text ({exc.reason})", location=lineno,
                                       hint="save the file as UTF-8")
                    continue
                except json.JSONDecodeError as exc:
                    builder.skip_trace(f"not valid JSON ({exc.msg} at column {exc.colno})", location=lineno,
                                       hint="each line must be one episode object")
                    continue
                if not isinstance(rec, dict):
                    builder.skip_trace(f"expected an episode object, got {_type_name(rec)}", location=lineno,
                                       hint="each line must be one episode object")
                    continue
                if is_header_record(rec) and not any(k in rec for k in ("messages", "traj")):
                    if seen_episode and not headers:
                        headers.append({})  # the episodes before this header form a segment without one
                    if seen_episode or not headers:
                        headers.append({})
                    merge_header(headers[-1], rec)
                    seen_episode = False
                    continue
                seen_episode = True
                yield lineno, rec, max(0, len(headers) - 1)
        return
    data = load_json(path)
    if not isinstance(data, list):
        raise TraceValidationError(
            f"expected a JSON list of episodes, got {_type_name(data)}", source=str(path),
            hint="write the episodes as a JSON array (or one per line in a .jsonl file)",
        )
    seen_episode = False
    for index, rec in enumerate(data):
        if not isinstance(rec, dict):
            builder.skip_trace(f"expected an episode object, got {_type_name(rec)}", location=index,
                               hint="each element of the list must be one episode object")
            continue
        if not seen_episode and is_header_record(rec):
            if not headers:
                headers.append({})
            merge_header(headers[0], rec)
            continue
        seen_episode = True
        yield index, rec, 0


OPENAI_MESSAGES = OpenAIMessagesReader()
