"""JSON with located failures, and the header lines a JSONL source may start with.

Reading canonical traces (:meth:`TraceTable.read`) and every reader in :mod:`tracetochain.readers` parse JSON
through :func:`json_loads` / :func:`load_json`, so a bad value is reported by its file and line rather than as a
``RecursionError`` or ``ValueError`` traceback.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from tracetochain.exceptions import TraceValidationError


class JSONLimitError(json.JSONDecodeError):
    """JSON that Python's parser gives up on without a syntax error: nesting deeper than the interpreter's recursion
    limit, or an integer with more digits than ``sys.get_int_max_str_digits()``. ``lineno``/``colno`` point at the
    start of the value, since the parser does not say where inside it the limit was hit."""


def json_loads(text: str | bytes) -> Any:
    """``json.loads`` whose only failures are ``json.JSONDecodeError`` (a :class:`JSONLimitError` for the limits
    above) and ``UnicodeDecodeError`` for bytes that are not UTF-8, so a reader can report any bad value by its
    line instead of crashing on ``RecursionError`` or ``ValueError``."""
    try:
        return json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise
    except RecursionError:
        raise JSONLimitError("nested too deeply to read", "", 0) from None
    except ValueError as exc:  # "Exceeds the limit (4300 digits) for integer string conversion"
        raise JSONLimitError(f"a number is too long to read ({exc})".split(";")[0], "", 0) from None


def json_raw_decode(decoder: json.JSONDecoder, text: str, idx: int) -> tuple[Any, int]:
    """``decoder.raw_decode(text, idx)`` with the failures of :func:`json_loads` (limits located at ``idx``)."""
    try:
        return decoder.raw_decode(text, idx)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise JSONLimitError("nested too deeply to read", text, idx) from None
    except ValueError as exc:
        raise JSONLimitError(f"a number is too long to read ({exc})".split(";")[0], text, idx) from None


def load_json(path: Path, *, max_bytes: int | None = None) -> Any:
    """Parse a whole JSON file; an error names the file and, for a syntax error or bad UTF-8, the line."""
    from tracetochain._files import input_problem

    problem = input_problem(path)
    if problem is not None:
        raise TraceValidationError(problem[0], source=str(path), hint=problem[1])
    if max_bytes is not None and path.stat().st_size > max_bytes:
        raise TraceValidationError(f"file is larger than the {max_bytes:,}-byte limit for this format",
                                   source=str(path))
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TraceValidationError(f"cannot read it ({exc.strerror or type(exc).__name__})", source=str(path),
                                   hint="make the file readable") from None
    try:
        text = raw.decode("utf-8-sig")  # a byte-order mark (Windows tools write one) is not part of the JSON
    except UnicodeDecodeError as exc:
        raise TraceValidationError(f"not UTF-8 text ({exc.reason})", source=str(path),
                                   line=raw.count(b"\n", 0, exc.start) + 1) from None
    del raw
    try:
        return json_loads(text)
    except JSONLimitError as exc:
        raise TraceValidationError(f"not valid JSON ({exc.msg})", source=str(path)) from None
    except json.JSONDecodeError as exc:
        raise TraceValidationError(f"not valid JSON ({exc.msg} at column {exc.colno})", source=str(path),
                                   line=exc.lineno) from None


#: Keys that mark a JSONL line as a header describing the run (kept as run metadata), not a record.
HEADER_MARKERS = frozenset({"metadata", "meta", "_meta", "header", "run_metadata", "run_info", "run"})
#: Keys a header line may carry besides a marker.
HEADER_WORDS = HEADER_MARKERS | frozenset({
    "type", "kind", "version", "schema", "schema_version", "format", "created", "created_at", "timestamp", "date",
    "name", "description", "run_id", "config", "info", "source", "generator", "model", "agent", "benchmark"})
_HEADER_TYPES = frozenset({"header", "metadata", "meta", "run", "run_metadata"})


def is_header_record(record: Any) -> bool:
    """Whether a leading JSONL record is a header line describing the run rather than an episode or a step.

    The rule: every key is a header word (:data:`HEADER_WORDS`) and at least one is a marker (:data:`HEADER_MARKERS`,
    e.g. ``{"metadata": {...}}``), or its ``type``/``kind`` says ``header``/``metadata``. Readers check this only
    for lines before the first record, so a record that happens to hold only such keys later is still an error.

    >>> is_header_record({"metadata": {"model": "gpt"}}), is_header_record({"type": "header", "n": 3})
    (True, True)
    >>> is_header_record({"messages": [], "metadata": {"success": True}})
    False
    """
    if not isinstance(record, dict) or not record:
        return False
    kind = record.get("type", record.get("kind"))
    if isinstance(kind, str) and kind.strip().lower() in _HEADER_TYPES:
        return True
    keys = set(record)
    return keys <= HEADER_WORDS and bool(keys & HEADER_MARKERS)


def merge_header(into: dict[str, Any], record: dict[str, Any]) -> None:
    """Keep a header record as run metadata (a later header line adds to, and overrides, earlier ones). Numbers
    JSON cannot write back (NaN, ±Infinity) are kept as their text, so the metadata stays valid JSON."""
    try:
        into.update(_json_safe(record))
    except RecursionError:
        into["header"] = "(a header line nested too deeply to keep)"


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value
