"""inspect_ai evaluation logs (UK AISI): ``.json`` logs, zipped ``.eval`` logs, or a folder of them.

Format and provenance (docs/formats.md; field names read in ``UKGovernmentBEIS/inspect_ai``:
``log/_log.py``, ``event/_model.py``, ``event/_tool.py``, ``event/_base.py``, ``model/_model_output.py``,
``log/_condense.py`` and ``log/_recorders/eval.py``)
    A ``.json`` log is one ``EvalLog`` object: ``{"version": 2, "status", "eval": EvalSpec{eval_id, run_id, task,
    model, …}, "plan", "results", "stats", "error", "samples": [EvalSample, …], "reductions"}``. A ``.eval`` log
    is a zip archive holding the same content split up: ``header.json`` (the EvalLog without samples; while an
    eval is still running only ``_journal/start.json`` exists, and logs from 2024 have a top-level
    ``start.json``), one ``samples/<id>_epoch_<n>.json`` per EvalSample, plus ``summaries.json``,
    ``reductions.json`` and ``_journal/…`` which this reader does not need. An ``EvalSample`` carries ``id``,
    ``epoch`` (1-based), ``messages``, ``events``, ``scores: {scorer_name: Score{value, answer, explanation}}``,
    ``limit: {type, limit}`` (the budget that halted it), ``error: EvalError{message, traceback}``,
    ``invalidation`` and ``attachments`` (long strings in events are stored once as ``attachment://<hash>``;
    they are resolved here). Events are discriminated by ``event``: ``model`` (ModelEvent: ``timestamp``,
    ``completed``, ``output{choices[0].message, usage{input_tokens, output_tokens, total_cost}, time}``,
    ``error``), ``tool`` (ToolEvent: ``id``, ``function``, ``arguments``, ``error: ToolCallError{type,
    message}``, ``failed``, ``agent``, ``timestamp``, ``completed``), ``span_begin``/``span_end``, ``score``,
    ``sample_limit``, ``error`` and many more that are not agent steps.

Field mapping (one canonical record per agent step)
    * ``trace_id`` — ``"<sample id>/epoch<epoch>"``; when several logs are read (a folder) it is prefixed with the
      log's key, ``"<eval_id>:<sample id>/epoch<epoch>"`` (``run_id``, else the file stem, when ``eval_id`` is
      missing). A repeated (id, epoch) within the logs read is an error.
    * ``task_id`` — the sample ``id`` as text (prefixed ``"<task>/"`` when the logs read come from more than one
      task, so samples of different tasks that share an id are not merged); ``trial`` — ``epoch``. Logs of the
      same task read together keep their epoch numbers, so a repeated run yields repeated (task_id, trial) pairs.
    * steps — from ``events`` in timestamp order (file order breaks ties; file order throughout when an event
      has no timestamp): each ModelEvent is one ``llm`` step (``text`` = the completion text, ``tokens_in`` /
      ``tokens_out`` / ``cost_usd`` = ``output.usage.input_tokens`` / ``output_tokens`` / ``total_cost``,
      ``t_start`` = ``timestamp``, ``t_end`` = ``completed`` (else ``timestamp + output.time``), ``error`` = the
      call itself failed (``ModelEvent.error``, ``error_type`` "model_error")); each ToolEvent is one ``tool``
      step (``tool_name`` = ``function``, ``text`` = ``arguments`` as JSON, ``error`` = ``error`` present or
      ``failed`` true, ``error_type`` = ``ToolCallError.type`` or "failed"), or a ``handoff`` step when the
      event names an ``agent`` (an agent handoff). So an assistant turn with k tool calls gives one ``llm``
      step followed by k tool steps. Events inside the scoring spans (``span_begin`` of type ``scorers`` /
      ``scorer``, or the older ``step`` events of that type) are not agent steps: a model-graded scorer's calls
      are left out. Nested ``events`` of older logs (inside ``tool`` and ``subtask`` events) are flattened.
      With ``include_user=True`` each user message that first appears in a ModelEvent's ``input`` becomes a
      ``user`` step just before that call.
    * steps when a sample has no events (logged without events, or very old logs) — from ``messages``: each tool
      call of an assistant message is one ``tool`` step, an assistant message without tool calls is one ``llm``
      step, ``tool`` messages with an ``error`` set ``error`` on the step whose call they answer (matched by
      ``tool_call_id``, else the latest call of the same function); ``user`` messages become ``user`` steps only
      with ``include_user=True``; ``system`` messages never do. (This path has no ``llm`` step before tool calls,
      following the messages convention of the other readers.)
    * ``outcome`` / ``reward`` / ``termination_reason`` — a sample ``error`` → ``invalid`` ("error"); a sample
      marked invalid by a reviewer (``invalidation``) → ``invalid`` ("invalidated"); a ``limit`` → ``censored``
      (termination_reason = the limit type: message, token, time, working, context, cost, operator, custom, …),
      even when the sample was also scored; otherwise the chosen scorer's value: ``"C"`` → 1, ``"I"`` → 0,
      ``"P"`` (partial) → 0.5, ``"N"`` (no answer) → 0, ``"yes"/"true"`` → 1, ``"no"/"false"`` → 0, numeric
      strings and numbers as they are, booleans as 1/0 (inspect's own ``value_to_float`` rules); ``reward`` is
      that number and the outcome is success when it is ≥ ``success_threshold`` (default 1 − 1e−6), failure
      below. So partial credit counts as failure unless ``success_threshold`` ≤ 0.5. ``reward`` is also recorded
      on censored/invalid samples that have a score. A sample with neither error, limit nor the chosen score is
      an error (skipped and counted with ``on_error="skip"``): success is never guessed.
    * scorer choice — ``scorer=NAME``; by default the single scorer found in the samples. Several scorers and no
      choice, or a name no sample has, is an error whatever ``on_error`` says. Legacy samples with one
      ``score`` instead of ``scores`` are read as a scorer named ``score``.

Samples that yield no step at all (e.g. an error before the first model call) are still trials with an outcome:
they are kept as zero-step episodes (``table.report.zero_step``) and reported, never dropped.

Safety: ``.eval`` archives are untrusted. Nothing is extracted to disk; every member name is checked (absolute
paths, ``..`` components, drive letters and NUL bytes reject the archive); members are decompressed by streaming
with a running byte count that stops at the caps whatever the archive declares (``max_member_bytes`` per member,
which also caps the size of a ``.json`` log, parsed in one piece; ``max_decompressed_bytes`` for the whole log;
``max_compression_ratio`` for a member beyond 16 MiB, so a 1 MB archive cannot make the reader hold gigabytes).
The defaults fit a 2-core / 4 GB CI runner: parsing a JSON member takes about three times its size. Hitting a cap
raises :class:`TraceValidationError` naming the archive and member, whatever ``on_error`` says.

Sniffing: a ``.eval`` file whose zip directory lists ``header.json``, ``_journal/start.json``, ``start.json`` or
``samples/…``; a ``.json`` file whose first key is ``version`` (or ``status``/``eval``) and whose first 64 KB show
``"eval": {`` with ``task``, ``model`` and ``eval_id``/``run_id``/``created`` (so inspect's ``logs.json`` listing
and canonical tables are not claimed); a folder holding such files (not searched recursively).

Options: ``scorer`` (None), ``success_threshold`` (1 − 1e−6), ``include_user`` (False),
``max_decompressed_bytes`` (1 GiB), ``max_member_bytes`` (256 MiB), ``max_compression_ratio`` (100).
"""

from __future__ import annotations

import copy
import json
import lzma
import math
import os
import re
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tracetochain.exceptions import TraceValidationError
from tracetochain.readers._common import (
    DEFAULT_SUCCESS_THRESHOLD,
    JSONLimitError,
    Refusal,
    Sniffed,
    TraceBuilder,
    finite_float,
    head_text,
    json_loads,
    load_json,
    wrong_suffix,
)
from tracetochain.traces import Problem, TraceTable

__all__ = ["DEFAULT_MAX_COMPRESSION_RATIO", "DEFAULT_MAX_DECOMPRESSED_BYTES", "DEFAULT_MAX_MEMBER_BYTES", "INSPECT_AI",
           "InspectAIReader"]

#: Default cap on the bytes decompressed from one ``.eval`` log (members are parsed one at a time).
DEFAULT_MAX_DECOMPRESSED_BYTES = 1024**3
#: Default cap on the decompressed size of one ``.eval`` member, and on the size of a ``.json`` log (each is parsed
#: in one piece, at about three times its size in memory).
DEFAULT_MAX_MEMBER_BYTES = 256 * 1024**2
#: Default cap on decompressed / compressed size of a member, checked once it has produced 16 MiB: JSON logs
#: compress 5–30×; a zip bomb compresses thousands of times.
DEFAULT_MAX_COMPRESSION_RATIO = 100
_RATIO_FLOOR = 16 * 1024**2

_CHUNK = 1 << 20
_NO_DECLARED_LIMIT = 1 << 62
_MAX_EVENT_DEPTH = 32
_MAX_SNIFF_ENTRIES = 500
_SCORER_SPAN_TYPES = frozenset({"scorers", "scorer"})
_HEADER_MEMBERS = ("header.json", "_journal/start.json", "start.json")
_ATTACHMENT = "attachment://"
_LEGACY_ATTACHMENT = "tc://"
_JSON_FIRST_KEYS = frozenset({"version", "status", "eval", "error"})
_FIRST_KEY = re.compile(r'\A\s*\{\s*"((?:[^"\\]|\\.)*)"\s*:')
_HEAD_MARKERS = (re.compile(r'"eval"\s*:\s*\{'), re.compile(r'"task"\s*:'), re.compile(r'"model"\s*:'))
_HEAD_ID = re.compile(r'"(?:eval_id|run_id|created)"\s*:')
_VALUE_WORDS = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}
_TRUE_WORDS = ("yes", "true")
_FALSE_WORDS = ("no", "false")
_NUMERIC = re.compile(r"\A[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\Z")
_RESOLVE_DEPTH = 64


# ================================================================================================ errors
class _Bad(Exception):
    """Malformed content inside one sample; ``field`` is the path within the sample."""

    def __init__(self, message: str, field: str | None = None, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.hint = hint


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ================================================================================================ zip access
def _unsafe_member_name(name: str) -> bool:
    if not name or "\x00" in name:
        return True
    norm = name.replace("\\", "/")
    if norm.startswith("/") or re.match(r"\A[A-Za-z]:", norm):
        return True
    return ".." in norm.split("/")


class _Archive:
    """Read JSON members of an untrusted zip: checked names, streamed decompression, per-member and total caps."""

    def __init__(self, path: Path, zf: zipfile.ZipFile, max_total: int, max_member: int,
                 max_ratio: float = DEFAULT_MAX_COMPRESSION_RATIO) -> None:
        self.path = path
        self.zf = zf
        self.max_total = max_total
        self.max_member = max_member
        self.max_ratio = max_ratio
        self.total = 0
        members: dict[str, zipfile.ZipInfo] = {}
        for info in zf.infolist():
            if _unsafe_member_name(info.filename):
                raise TraceValidationError(
                    f"archive member {info.filename!r} has an unsafe name (absolute path, '..' or NUL)",
                    source=str(path), hint="this is not a log written by inspect_ai; do not trust the archive")
            members[info.filename] = info  # a repeated name: the last entry wins, as zipfile.getinfo does
        self.members = members

    def where(self, name: str) -> str:
        return f"{self.path}!{name}"

    def _cap(self, name: str, what: str, limit: int, option: str) -> TraceValidationError:
        return TraceValidationError(
            f"archive member {name!r} {what} the {limit:,}-byte cap", source=self.where(name),
            hint=f"raise {option}= if this log is trusted and really that large")

    def read_bytes(self, name: str) -> bytes:
        info = self.members[name]
        remaining = self.max_total - self.total
        # Cheap early rejection on the declared size; the streamed count below is what actually enforces the caps.
        if info.file_size > self.max_member:
            raise self._cap(name, f"declares {info.file_size:,} bytes, over", self.max_member, "max_member_bytes")
        if info.file_size > remaining:
            raise self._cap(name, f"declares {info.file_size:,} bytes, which would take the log over",
                            self.max_total, "max_decompressed_bytes")
        limit = min(self.max_member, remaining)
        # Do not trust the declared size: zipfile would stop at it (and then fail the CRC check), so lift it out of
        # the way and count the bytes ourselves, asking for no more than one byte past the cap.
        probe = copy.copy(info)
        probe.file_size = _NO_DECLARED_LIMIT
        buf = bytearray()
        try:
            with self.zf.open(probe) as fh:
                while True:
                    chunk = fh.read(min(_CHUNK, limit + 1 - len(buf)))
                    if not chunk:
                        break
                    buf += chunk
                    if len(buf) > _RATIO_FLOOR and len(buf) > self.max_ratio * max(info.compress_size, 1):
                        raise TraceValidationError(
                            f"archive member {name!r} decompresses to more than {self.max_ratio:g} times its "
                            f"{info.compress_size:,} compressed bytes (a zip bomb?)", source=self.where(name),
                            hint="raise max_compression_ratio= if this log is trusted")
                    if len(buf) > limit:
                        if len(buf) > self.max_member:
                            raise self._cap(name, "decompresses to more than", self.max_member,
                                            "max_member_bytes")
                        raise self._cap(name, "takes the decompressed log over", self.max_total,
                                        "max_decompressed_bytes")
        except TraceValidationError:
            raise
        except NotImplementedError as exc:
            raise TraceValidationError(
                f"archive member {name!r} uses a compression method this Python cannot read "
                f"(method {info.compress_type}: {exc})", source=self.where(name),
                hint="newer inspect_ai may write zstd members (method 93), readable from Python 3.14; or convert "
                "the log with `inspect log convert --to json` and read the .json") from None
        except RuntimeError as exc:  # encrypted member
            raise TraceValidationError(f"cannot read archive member {name!r} ({exc})", source=self.where(name),
                                       hint="inspect_ai never encrypts logs; re-export the log") from None
        except (zipfile.BadZipFile, zlib.error, lzma.LZMAError, EOFError, OSError) as exc:
            raise TraceValidationError(f"archive member {name!r} is corrupt ({exc})", source=self.where(name),
                                       hint="the .eval file is damaged or truncated; re-copy or re-export it"
                                       ) from None
        self.total += len(buf)
        return bytes(buf)

    def read_json(self, name: str) -> Any:
        return _parse_json(self.read_bytes(name), self.where(name))


def _parse_json(data: bytes, where: str) -> Any:
    try:
        return json_loads(data)
    except JSONLimitError as exc:
        raise TraceValidationError(f"not valid JSON ({exc.msg})", source=where) from None
    except json.JSONDecodeError as exc:
        raise TraceValidationError(f"not valid JSON ({exc.msg} at column {exc.colno})", source=where,
                                   line=exc.lineno) from None
    except UnicodeDecodeError as exc:
        raise TraceValidationError(f"not UTF-8 text ({exc.reason})", source=where) from None


# ================================================================================================ small parsers
def _timestamp(value: Any, fieldname: str) -> float | None:
    """ISO-8601 (naive means UTC) or epoch seconds → epoch seconds."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise _Bad(f"expected a timestamp, got {value!r}", fieldname)
    if isinstance(value, (int, float)):
        seconds = finite_float(value)
        if seconds is None:
            raise _Bad(f"expected a timestamp, got {_short(value)}", fieldname)
        return seconds
    if isinstance(value, str):
        try:
            stamp = datetime.fromisoformat(value.strip())
        except ValueError:
            raise _Bad(f"not an ISO-8601 timestamp: {value[:60]!r}", fieldname,
                       "inspect_ai writes timestamps such as 2026-01-05T10:00:01.5+00:00") from None
        return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()
    raise _Bad(f"expected a timestamp, got {_type_name(value)}", fieldname)


def _number(value: Any, fieldname: str) -> float | None:
    if value is None:
        return None
    num = finite_float(value) if isinstance(value, (int, float)) else None
    if num is None:
        raise _Bad(f"expected a number, got {_short(value)}", fieldname)
    return num


def _count(value: Any, fieldname: str) -> int | None:
    num = _number(value, fieldname)
    if num is None:
        return None
    if num < 0 or num != int(num) or num >= 2**63:
        raise _Bad(f"expected a token count, got {_short(value)}", fieldname)
    return int(num)


def _dict_or_none(value: Any, fieldname: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _Bad(f"expected an object, got {_type_name(value)}", fieldname)
    return value


def _resolve(value: Any, attachments: dict[str, Any], depth: int = 0) -> Any:
    """Replace ``attachment://<hash>`` references (and the legacy ``tc://``) by the attachment text."""
    if isinstance(value, str):
        for prefix in (_ATTACHMENT, _LEGACY_ATTACHMENT):
            if value.startswith(prefix):
                got = attachments.get(value[len(prefix):])
                return got if isinstance(got, str) else value
        return value
    if depth >= _RESOLVE_DEPTH:
        return value
    if isinstance(value, list):
        return [_resolve(v, attachments, depth + 1) for v in value]
    if isinstance(value, dict):
        return {k: _resolve(v, attachments, depth + 1) for k, v in value.items()}
    return value


def _content_text(content: Any, attachments: dict[str, Any]) -> str | None:
    """Text of a message ``content``: a string, or the ``text`` parts of a content list."""
    if content is None:
        return None
    if isinstance(content, str):
        return str(_resolve(content, attachments))
    if isinstance(content, list):
        parts = [str(_resolve(p["text"], attachments)) for p in content
                 if isinstance(p, dict) and p.get("type", "text") == "text" and isinstance(p.get("text"), str)]
        return "\n".join(parts)
    return None


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def score_to_reward(value: Any) -> float:
    """A Score ``value`` as a number, by inspect_ai's ``value_to_float`` rules (C 1, I 0, P 0.5, N 0, …)."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        num = finite_float(value)
        if num is None:
            raise _Bad(f"score value {_short(value)} is not a finite number", "value")
        return num
    if isinstance(value, str):
        text = value.strip()
        if text in _VALUE_WORDS:
            return _VALUE_WORDS[text]
        if text.lower() in _TRUE_WORDS:
            return 1.0
        if text.lower() in _FALSE_WORDS:
            return 0.0
        if _NUMERIC.match(text) and finite_float(text) is not None:
            return float(text)
        raise _Bad(f"unrecognised score value {value[:40]!r}", "value",
                   'expected "C", "I", "P", "N", yes/no, true/false or a number')
    if value is None:
        raise _Bad("score has no value", "value")
    raise _Bad(f"score value is a {_type_name(value)}, not a single number or letter grade", "value",
               "scorers returning a dict or list of values are not supported: re-score the log with a scorer that "
               "returns one value, or convert the log to the canonical table yourself")


# ================================================================================================ samples
@dataclass
class _Sample:
    where: str  # file (".json") or "archive!member" (".eval")
    index: int  # position of the sample within its log
    field_prefix: str  # "samples[3]." for .json logs, "" for .eval members
    log_key: str
    task: str | None
    sample_id: str
    epoch: int
    steps: list[dict[str, Any]] = field(default_factory=list)
    scores: dict[str, Any] = field(default_factory=dict)
    limit: str | None = None
    errored: bool = False
    invalidated: bool = False


def _flatten_events(events: list[Any], prefix: str, depth: int = 0,
                    excluded: bool = False) -> Iterator[tuple[dict[str, Any], str, bool]]:
    """Yield (event, field path, inside a scoring span) in file order, nested ``events`` lists flattened."""
    if depth > _MAX_EVENT_DEPTH:
        raise _Bad("events are nested too deeply", prefix)
    span_type: dict[str, tuple[str | None, str | None]] = {}  # span id → (parent id, type)
    scoring_steps = 0

    def in_scoring(span_id: Any) -> bool:
        seen = 0
        while isinstance(span_id, str) and span_id in span_type and seen < 10_000:
            parent, kind = span_type[span_id]
            if kind in _SCORER_SPAN_TYPES:
                return True
            span_id, seen = parent, seen + 1
        return False

    for i, ev in enumerate(events):
        path = f"{prefix}[{i}]"
        if not isinstance(ev, dict):
            raise _Bad(f"expected an event object, got {_type_name(ev)}", path)
        kind = ev.get("event")
        if not isinstance(kind, str):
            raise _Bad("event has no 'event' type", f"{path}.event")
        if kind == "span_begin":
            sid = ev.get("id")
            if isinstance(sid, str):
                parent = ev.get("parent_id")
                stype = ev.get("type")
                span_type[sid] = (parent if isinstance(parent, str) else None,
                                  stype if isinstance(stype, str) else None)
        elif kind == "step" and ev.get("type") in _SCORER_SPAN_TYPES:  # pre-span logs mark scoring with steps
            if ev.get("action") == "begin":
                scoring_steps += 1
            elif ev.get("action") == "end":
                scoring_steps = max(0, scoring_steps - 1)
        inside = excluded or scoring_steps > 0 or in_scoring(ev.get("span_id"))
        yield ev, path, inside
        nested = ev.get("events") if kind in ("tool", "subtask") else None
        if nested:
            if not isinstance(nested, list):
                raise _Bad(f"expected a list of events, got {_type_name(nested)}", f"{path}.events")
            yield from _flatten_events(nested, f"{path}.events", depth + 1, inside)


def _model_step(ev: dict[str, Any], path: str, attachments: dict[str, Any]) -> dict[str, Any]:
    t_start = _timestamp(ev.get("timestamp"), f"{path}.timestamp")
    t_end = _timestamp(ev.get("completed"), f"{path}.completed")
    output = _dict_or_none(ev.get("output"), f"{path}.output") or {}
    usage = _dict_or_none(output.get("usage"), f"{path}.output.usage") or {}
    if t_end is None and t_start is not None:
        took = _number(output.get("time"), f"{path}.output.time")
        t_end = t_start + took if took is not None else None
    text = None
    choices = output.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        message = choices[0].get("message")
        if isinstance(message, dict):
            text = _content_text(message.get("content"), attachments)
    if not text and isinstance(output.get("completion"), str):
        text = str(_resolve(output["completion"], attachments))
    error = ev.get("error")
    if error is not None and not isinstance(error, str):
        raise _Bad(f"expected an error message, got {_type_name(error)}", f"{path}.error")
    return {
        "step_kind": "llm", "error": bool(error), "error_type": "model_error" if error else None,
        "text": text or None, "t_start": t_start, "t_end": t_end,
        "tokens_in": _count(usage.get("input_tokens"), f"{path}.output.usage.input_tokens"),
        "tokens_out": _count(usage.get("output_tokens"), f"{path}.output.usage.output_tokens"),
        "cost_usd": _number(usage.get("total_cost"), f"{path}.output.usage.total_cost"),
    }


def _tool_step(ev: dict[str, Any], path: str, attachments: dict[str, Any]) -> dict[str, Any]:
    function = ev.get("function")
    if not isinstance(function, str) or not function:
        raise _Bad(f"tool event needs a function name, got {function!r}", f"{path}.function")
    t_start = _timestamp(ev.get("timestamp"), f"{path}.timestamp")
    t_end = _timestamp(ev.get("completed"), f"{path}.completed")
    if t_end is None and t_start is not None:
        took = _number(ev.get("working_time"), f"{path}.working_time")
        t_end = t_start + took if took is not None else None
    error = ev.get("error")
    failed = ev.get("failed")
    if failed is not None and not isinstance(failed, bool):
        raise _Bad(f"expected true/false, got {failed!r}", f"{path}.failed")
    if error is not None and not isinstance(error, (dict, str)):
        raise _Bad(f"expected a ToolCallError object, got {_type_name(error)}", f"{path}.error")
    error_type = None
    if isinstance(error, dict):
        etype = error.get("type")
        error_type = etype if isinstance(etype, str) and etype else "error"
    elif isinstance(error, str):
        error_type = "error"
    elif failed:
        error_type = "failed"
    agent = ev.get("agent")
    arguments = ev.get("arguments")
    return {
        "step_kind": "handoff" if isinstance(agent, str) and agent else "tool", "tool_name": function,
        "error": error is not None or bool(failed), "error_type": error_type,
        "text": None if arguments is None else _json_text(_resolve(arguments, attachments)),
        "t_start": t_start, "t_end": t_end,
    }


def _user_message_key(message: dict[str, Any], attachments: dict[str, Any]) -> str:
    mid = message.get("id")
    if isinstance(mid, str) and mid:
        return "id:" + mid
    return "text:" + (_content_text(message.get("content"), attachments) or "")


def _steps_from_events(events: list[Any], attachments: dict[str, Any],
                       include_user: bool) -> list[dict[str, Any]]:
    picked: list[tuple[float | None, int, dict[str, Any], str]] = []
    for order, (ev, path, scoring) in enumerate(_flatten_events(events, "events")):
        if scoring or ev["event"] not in ("model", "tool"):
            continue
        picked.append((_timestamp(ev.get("timestamp"), f"{path}.timestamp"), order, ev, path))
    if all(ts is not None for ts, _, _, _ in picked):
        picked.sort(key=lambda item: (item[0] or 0.0, item[1]))
    steps: list[dict[str, Any]] = []
    seen_users: set[str] = set()
    for _, _, ev, path in picked:
        if ev["event"] == "tool":
            steps.append(_tool_step(ev, path, attachments))
            continue
        if include_user:
            inputs = ev.get("input")
            for msg in inputs if isinstance(inputs, list) else []:
                if isinstance(msg, dict) and msg.get("role") == "user":
                    key = _user_message_key(msg, attachments)
                    if key not in seen_users:
                        seen_users.add(key)
                        steps.append({"step_kind": "user", "error": False,
                                      "text": _content_text(msg.get("content"), attachments) or None})
        steps.append(_model_step(ev, path, attachments))
    return steps


def _steps_from_messages(messages: list[Any], attachments: dict[str, Any],
                         include_user: bool) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    by_call_id: dict[str, dict[str, Any]] = {}
    for i, msg in enumerate(messages):
        path = f"messages[{i}]"
        if not isinstance(msg, dict):
            raise _Bad(f"expected a message object, got {_type_name(msg)}", path)
        role = msg.get("role")
        if role == "assistant":
            calls = msg.get("tool_calls")
            if calls is not None and not isinstance(calls, list):
                raise _Bad(f"expected a list of tool calls, got {_type_name(calls)}", f"{path}.tool_calls")
            if calls:
                for j, call in enumerate(calls):
                    cpath = f"{path}.tool_calls[{j}]"
                    if not isinstance(call, dict):
                        raise _Bad(f"expected a tool call object, got {_type_name(call)}", cpath)
                    function = call.get("function")
                    if isinstance(function, dict):  # an OpenAI-shaped call slipped in
                        function = function.get("name")
                    if not isinstance(function, str) or not function:
                        raise _Bad(f"tool call needs a function name, got {function!r}", f"{cpath}.function")
                    arguments = call.get("arguments")
                    step: dict[str, Any] = {
                        "step_kind": "tool", "tool_name": function, "error": False,
                        "text": None if arguments is None else _json_text(_resolve(arguments, attachments)),
                    }
                    steps.append(step)
                    cid = call.get("id")
                    if isinstance(cid, str) and cid:
                        by_call_id[cid] = step
            else:
                steps.append({"step_kind": "llm", "error": False,
                              "text": _content_text(msg.get("content"), attachments) or None})
        elif role == "tool":
            error = msg.get("error")
            if error is None:
                continue
            if not isinstance(error, (dict, str)):
                raise _Bad(f"expected a ToolCallError object, got {_type_name(error)}", f"{path}.error")
            call_id = msg.get("tool_call_id")
            target = by_call_id.get(call_id) if isinstance(call_id, str) else None
            if target is None:
                function = msg.get("function")
                target = next((s for s in reversed(steps)
                               if s["step_kind"] == "tool" and s.get("tool_name") == function), None)
            if target is not None:
                target["error"] = True
                etype = error.get("type") if isinstance(error, dict) else None
                target["error_type"] = etype if isinstance(etype, str) and etype else "error"
        elif role == "user" and include_user:
            steps.append({"step_kind": "user", "error": False,
                          "text": _content_text(msg.get("content"), attachments) or None})
    return steps


def _parse_sample(raw: Any, *, where: str, index: int, field_prefix: str, log_key: str, task: str | None,
                  include_user: bool) -> _Sample:
    if not isinstance(raw, dict):
        raise _Bad(f"expected a sample object, got {_type_name(raw)}")
    sid = raw.get("id")
    if isinstance(sid, bool) or not isinstance(sid, (str, int)) or sid == "":
        raise _Bad(f"sample needs an id (text or integer), got {sid!r}", "id")
    epoch = raw.get("epoch")
    if isinstance(epoch, bool) or not isinstance(epoch, int):
        raise _Bad(f"sample needs an integer epoch, got {epoch!r}", "epoch")
    attachments = raw.get("attachments")
    if not isinstance(attachments, dict):
        attachments = {}
    events = raw.get("events")
    if events is None and isinstance(raw.get("transcript"), dict):  # older logs: transcript{events, content}
        events = raw["transcript"].get("events")
        content = raw["transcript"].get("content")
        attachments = content if isinstance(content, dict) else attachments
    if events is not None and not isinstance(events, list):
        raise _Bad(f"expected a list of events, got {_type_name(events)}", "events")
    sample = _Sample(where, index, field_prefix, log_key, task, str(sid), epoch)
    if events:
        sample.steps = _steps_from_events(events, attachments, include_user)
    else:
        messages = raw.get("messages")
        if messages is not None and not isinstance(messages, list):
            raise _Bad(f"expected a list of messages, got {_type_name(messages)}", "messages")
        sample.steps = _steps_from_messages(messages or [], attachments, include_user)

    scores = raw.get("scores")
    if scores is None and "score" in raw and raw["score"] is not None:
        scores = {"score": raw["score"]}  # legacy single-score samples
    if scores is not None and not isinstance(scores, dict):
        raise _Bad(f"expected an object of scores by scorer name, got {_type_name(scores)}", "scores")
    sample.scores = scores or {}

    limit = raw.get("limit")
    if isinstance(limit, dict):
        ltype = limit.get("type")
        sample.limit = ltype if isinstance(ltype, str) and ltype else "limit"
    elif isinstance(limit, str) and limit:  # EvalSampleSummary writes the type alone
        sample.limit = limit
    elif limit is not None:
        raise _Bad(f"expected a limit object {{type, limit}}, got {_type_name(limit)}", "limit")
    sample.errored = raw.get("error") is not None
    sample.invalidated = raw.get("invalidation") is not None
    return sample


# ================================================================================================ logs
@dataclass
class _Log:
    path: Path
    header: dict[str, Any]
    n_samples: int
    samples: Iterator[tuple[Any, str, int, str]]  # (raw sample, where, index, field prefix), read lazily


def _looks_like_json_log(path: Path) -> bool:
    head = head_text(path).lstrip("\ufeff")
    first = _FIRST_KEY.match(head)
    if first is None or first.group(1) not in _JSON_FIRST_KEYS:
        return False
    return all(rx.search(head) for rx in _HEAD_MARKERS) and bool(_HEAD_ID.search(head))


def _looks_like_eval_archive(path: Path) -> bool:
    with path.open("rb") as fh:
        if fh.read(4) != b"PK\x03\x04":
            return False
    try:
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return False
    return any(n in names for n in _HEADER_MEMBERS) or any(n.startswith("samples/") for n in names)


def _is_log_file(path: Path) -> bool:
    suffix = path.suffix.lower()
    if not path.is_file():
        return False
    if suffix == ".eval":
        return _looks_like_eval_archive(path)
    if suffix == ".json":
        return _looks_like_json_log(path)
    return False


def _folder_logs(path: Path, limit: int | None = None,
                 unreadable: list[tuple[Path, str]] | None = None) -> list[Path]:
    """The inspect_ai logs in a folder; a ``.eval``/``.json`` file that cannot be opened goes to ``unreadable``
    (with the reason) when the caller collects them, so a reader names it instead of leaving it out silently."""
    found: list[Path] = []
    with os.scandir(path) as it:
        entries = sorted(it, key=lambda e: e.name)
    for i, entry in enumerate(entries):
        if limit is not None and i >= limit:
            break
        p = Path(entry.path)
        if p.suffix.lower() in (".eval", ".json"):
            try:
                if _is_log_file(p):
                    found.append(p)
            except (OSError, UnicodeDecodeError) as exc:
                if unreadable is not None:
                    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
                    unreadable.append((p, reason))
                continue
    return found


@contextmanager
def _open_json_log(path: Path, max_total: int) -> Iterator[_Log]:
    try:
        data = load_json(path, max_bytes=max_total)
    except RecursionError:
        raise TraceValidationError("JSON nested too deeply to read", source=str(path)) from None
    if not isinstance(data, dict):
        raise TraceValidationError(f"an inspect_ai log is a JSON object, got {_type_name(data)}", source=str(path),
                                   hint="expected an EvalLog written by inspect_ai (keys version, eval, samples)")
    samples = data.get("samples")
    if samples is not None and not isinstance(samples, list):
        raise TraceValidationError(f"expected a list of samples, got {_type_name(samples)}", source=str(path),
                                   field="samples")
    header = {k: v for k, v in data.items() if k != "samples"}
    samples = samples or []
    yield _Log(path, header, len(samples),
               ((s, str(path), i, f"samples[{i}].") for i, s in enumerate(samples)))


@contextmanager
def _open_eval_log(path: Path, max_total: int, max_member: int,
                   max_ratio: float = DEFAULT_MAX_COMPRESSION_RATIO) -> Iterator[_Log]:
    """The archive stays open while its samples are read, one member at a time."""
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        raise TraceValidationError(f"not a readable zip archive ({exc})", source=str(path),
                                   hint="a .eval log is a zip written by inspect_ai; re-copy or re-export it"
                                   ) from None
    with zf:
        archive = _Archive(path, zf, max_total, max_member, max_ratio)
        header: dict[str, Any] = {}
        for name in _HEADER_MEMBERS:
            if name in archive.members:
                got = archive.read_json(name)
                if not isinstance(got, dict):
                    raise TraceValidationError(f"expected a JSON object, got {_type_name(got)}",
                                               source=archive.where(name))
                header = got
                break
        names = [n for n in archive.members
                 if n.startswith("samples/") and n.endswith(".json") and n.count("/") == 1]
        if not header and not names:
            raise TraceValidationError(
                "zip archive holds no inspect_ai log (no header.json, _journal/start.json or samples/)",
                source=str(path), hint="pass the right file, or the right format")
        yield _Log(path, header, len(names),
                   ((archive.read_json(n), archive.where(n), i, "") for i, n in enumerate(names)))


def _open_log(path: Path, max_total: int, max_member: int,
              max_ratio: float = DEFAULT_MAX_COMPRESSION_RATIO) -> AbstractContextManager[_Log]:
    if path.suffix.lower() == ".eval":
        return _open_eval_log(path, max_total, max_member, max_ratio)
    return _open_json_log(path, min(max_total, max_member))


def _log_key(log: _Log) -> str:
    spec = log.header.get("eval")
    if isinstance(spec, dict):
        for key in ("eval_id", "run_id"):
            if isinstance(spec.get(key), str) and spec[key]:
                return str(spec[key])
    return log.path.stem


def _log_task(log: _Log) -> str | None:
    spec = log.header.get("eval")
    task = spec.get("task") if isinstance(spec, dict) else None
    return task if isinstance(task, str) and task else None


# ================================================================================================ reader
class InspectAIReader:
    name = "inspect-ai"
    description = "inspect_ai eval logs (.eval zip or .json, or a folder of them): one trace per sample and epoch"
    needs = "nothing else (scorer=NAME when the log has several scorers)"

    def sniff(self, path: Path) -> Sniffed:
        path = Path(path)
        if path.is_dir():
            return bool(_folder_logs(path, limit=_MAX_SNIFF_ENTRIES)) or Refusal(
                "a folder without inspect_ai logs (.eval or .json) at its top level")
        if path.suffix.lower() not in (".eval", ".json"):
            return wrong_suffix(path, (".eval", ".json"))
        return _is_log_file(path) or Refusal(
            "not an inspect_ai log (a .eval zip with header.json or samples/, or a .json EvalLog with version, "
            "eval{task, model, eval_id} and samples)")

    def read(self, path: Path, *, on_error: str = "raise", scorer: str | None = None,
             success_threshold: float = DEFAULT_SUCCESS_THRESHOLD, include_user: bool = False,
             max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
             max_member_bytes: int = DEFAULT_MAX_MEMBER_BYTES,
             max_compression_ratio: float = DEFAULT_MAX_COMPRESSION_RATIO) -> TraceTable:
        """Read one inspect_ai log or a folder of them (options: see the module docstring)."""
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
        if scorer is not None and (not isinstance(scorer, str) or not scorer):
            raise TypeError(f"scorer must be a non-empty string or None, got {scorer!r}")
        if isinstance(success_threshold, bool) or not isinstance(success_threshold, (int, float)) \
                or not math.isfinite(success_threshold):
            raise TypeError(f"success_threshold must be a finite number, got {success_threshold!r}")
        for opt, val in (("max_decompressed_bytes", max_decompressed_bytes), ("max_member_bytes", max_member_bytes)):
            if isinstance(val, bool) or not isinstance(val, int) or val <= 0:
                raise TypeError(f"{opt} must be a positive integer, got {val!r}")
        if isinstance(max_compression_ratio, bool) or not isinstance(max_compression_ratio, (int, float)) \
                or not math.isfinite(max_compression_ratio) or max_compression_ratio < 1:
            raise TypeError(f"max_compression_ratio must be a number >= 1, got {max_compression_ratio!r}")
        path = Path(path)
        unreadable: list[tuple[Path, str]] = []
        if path.is_dir():
            files = _folder_logs(path, unreadable=unreadable)
            if not files and not unreadable:
                raise TraceValidationError("folder holds no inspect_ai log (.eval or .json)", source=str(path),
                                           hint="point at a log directory written by inspect eval, or one log file")
        elif path.is_file():
            files = [path]
        else:
            raise TraceValidationError("no such file or folder", source=str(path))

        builder = TraceBuilder(str(path), self.name, on_error, "row")
        for log, reason in unreadable:  # never a silent gap: name the log, or count it
            if on_error == "raise":
                raise TraceValidationError(f"cannot read this log ({reason})", source=str(log),
                                           hint="make it readable, or pass --on-error skip to count it and go on")
            builder.problems.append(Problem(None, None, f"log could not be read ({log.name}: {reason})"))
        samples, tasks = self._parse_all(files, builder, bool(include_user), max_decompressed_bytes,
                                         max_member_bytes, float(max_compression_ratio))
        chosen = self._choose_scorer(samples, scorer, path)
        self._emit(samples, builder, chosen, float(success_threshold), several_tasks=len(tasks) > 1,
                   several_logs=len(files) > 1)
        return builder.build()

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _fail(builder: TraceBuilder, where: str, index: int, location: int, message: str,
              fieldname: str | None, hint: str | None) -> None:
        if builder.on_error == "raise":
            raise TraceValidationError(message, source=where, row=index, field=fieldname, hint=hint)
        builder.problems.append(Problem(location, fieldname, f"{message} ({where}, sample {index})",
                                        whole_trace=True))

    def _parse_all(self, files: list[Path], builder: TraceBuilder, include_user: bool, max_total: int,
                   max_member: int, max_ratio: float = DEFAULT_MAX_COMPRESSION_RATIO
                   ) -> tuple[list[tuple[_Sample, int]], set[str | None]]:
        """Every sample of every log as steps plus what decides its outcome; also the set of task names seen."""
        keys: set[str] = set()
        tasks: set[str | None] = set()
        out: list[tuple[_Sample, int]] = []
        location = 0
        for f in files:
            with _open_log(f, max_total, max_member, max_ratio) as log:
                if not log.n_samples:
                    message = "the log holds no samples (was it written with log_samples=False?)"
                    if builder.on_error == "raise":
                        raise TraceValidationError(message, source=str(log.path), field="samples",
                                                   hint="re-run the eval with sample logging on, or pass another log")
                    builder.problems.append(Problem(None, "samples", f"{message} ({log.path})"))
                    continue
                key = _log_key(log)
                if key in keys:
                    key = f"{key}-{log.path.stem}"
                keys.add(key)
                task = _log_task(log)
                tasks.add(task)
                for raw, where, index, prefix in log.samples:
                    try:
                        sample = _parse_sample(raw, where=where, index=index, field_prefix=prefix, log_key=key,
                                               task=task, include_user=include_user)
                    except _Bad as exc:
                        fieldname = f"{prefix}{exc.field}" if exc.field else (prefix.rstrip(".") or None)
                        self._fail(builder, where, index, location, exc.message, fieldname, exc.hint)
                    else:
                        out.append((sample, location))
                    location += 1
        return out, tasks

    @staticmethod
    def _choose_scorer(samples: list[tuple[_Sample, int]], scorer: str | None, path: Path) -> str | None:
        names: dict[str, None] = {}
        for sample, _ in samples:
            for name in sample.scores:
                names.setdefault(str(name), None)
        if scorer is not None:
            if scorer not in names:
                raise TraceValidationError(
                    f"no sample has a score from scorer {scorer!r}", source=str(path), field="scores",
                    hint=f"scorers in this log: {', '.join(names) or 'none'}")
            return scorer
        if len(names) > 1:
            raise TraceValidationError(
                f"the log has several scorers ({', '.join(names)}) and none was chosen", source=str(path),
                field="scores", hint="choose the one that decides success with scorer=NAME")
        return next(iter(names), None)

    def _emit(self, samples: list[tuple[_Sample, int]], builder: TraceBuilder, scorer: str | None,
              threshold: float, *, several_tasks: bool, several_logs: bool) -> None:
        seen: set[str] = set()
        for sample, location in samples:
            trace_id = f"{sample.sample_id}/epoch{sample.epoch}"
            if several_logs:
                trace_id = f"{sample.log_key}:{trace_id}"
            prefix = sample.field_prefix
            if trace_id in seen:
                self._fail(builder, sample.where, sample.index, location,
                           f"sample {sample.sample_id!r} epoch {sample.epoch} appears twice", f"{prefix}id",
                           "each (id, epoch) pair of a log must be unique; remove the duplicate")
                continue
            seen.add(trace_id)
            try:
                trace = self._outcome(sample, scorer, threshold)
            except _Bad as exc:
                self._fail(builder, sample.where, sample.index, location, exc.message,
                           f"{prefix}{exc.field}" if exc.field else None, exc.hint)
                continue
            task_id = f"{sample.task}/{sample.sample_id}" if several_tasks and sample.task else sample.sample_id
            if not sample.steps:  # e.g. an error before the first model call: still a trial with its outcome
                builder.add_zero_step({"trace_id": trace_id, "task_id": task_id, "trial": sample.epoch, **trace},
                                      location)
                continue
            for idx, step in enumerate(sample.steps):
                builder.add_step({"trace_id": trace_id, "step_idx": idx, **step, "task_id": task_id,
                                  "trial": sample.epoch, **trace}, location)

    @staticmethod
    def _outcome(sample: _Sample, scorer: str | None, threshold: float) -> dict[str, Any]:
        reward = None
        if scorer is not None and scorer in sample.scores:
            score = sample.scores[scorer]
            if not isinstance(score, dict):
                raise _Bad(f"expected a Score object, got {_type_name(score)}", f"scores.{scorer}")
            if "value" not in score:
                raise _Bad("score has no value", f"scores.{scorer}.value")
            try:
                reward = score_to_reward(score["value"])
            except _Bad as exc:
                raise _Bad(exc.message, f"scores.{scorer}.value", exc.hint) from None
        if sample.errored:
            return {"outcome": "invalid", "termination_reason": "error", "reward": reward}
        if sample.invalidated:
            return {"outcome": "invalid", "termination_reason": "invalidated", "reward": reward}
        if sample.limit is not None:
            return {"outcome": "censored", "termination_reason": sample.limit, "reward": reward}
        if reward is None:
            raise _Bad(f"sample has no {'score' if scorer is None else repr(scorer) + ' score'}, no limit and "
                       "no error, so its outcome is unknown", "scores",
                       "score the log first (`inspect score LOG`), choose another scorer=, or pass "
                       "on_error='skip' to drop unscored samples")
        return {"outcome": "success" if reward >= threshold else "failure", "reward": reward}


INSPECT_AI = InspectAIReader()
