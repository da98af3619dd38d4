"""Shared plumbing for readers: JSON loading with located errors, sniffing, verdict and time parsing, a record builder.

Every reader turns its source into canonical step records with :class:`TraceBuilder` (or an Arrow table) and hands
them to :func:`build_table`, which validates through :meth:`TraceTable.from_arrow`, so validation, skip-and-count and
the ingest report work the same for all formats.
The small helpers here (verdict words, ISO times, dotted attribute lookup, usage sums, the cheap JSON head scan) are
shared by several readers; each one documents the rule it applies.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from tracetochain.exceptions import TraceValidationError
from tracetochain.traces._schema import COLUMNS
from tracetochain.traces._table import Problem, TraceTable

#: τ-bench's success rule: reward ≥ 1 − 1e−6 (its own pass test, Yao et al. 2024).
DEFAULT_SUCCESS_THRESHOLD = 1.0 - 1e-6

#: "Not found" for :func:`lookup` and :func:`descend` (``None`` is a value an attribute may hold).
MISSING: Final[object] = object()

#: Verdict words read as success / failure when no ``success_values=`` is given (case-insensitive).
SUCCESS_WORDS = frozenset({"success", "succeeded", "successful", "pass", "passed", "correct", "true", "yes",
                           "resolved", "solved", "1"})
FAILURE_WORDS = frozenset({"failure", "fail", "failed", "incorrect", "false", "no", "unresolved", "unsolved",
                           "wrong", "0"})
_FRACTION_RE = re.compile(r"(\.\d{6})\d+")


def outcome_from_reward(reward: float | None, threshold: float = DEFAULT_SUCCESS_THRESHOLD) -> str | None:
    """success when reward ≥ threshold, failure below it, None when there is no reward."""
    if reward is None:
        return None
    return "success" if float(reward) >= threshold else "failure"


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


def head_text(path: Path, n_bytes: int = 65_536) -> str:
    """The first bytes of a file as text, for cheap sniffing (a UTF-8 byte-order mark removed: Windows tools write
    one, and it is not part of the content)."""
    with path.open("rb") as fh:
        return fh.read(n_bytes).decode("utf-8", errors="replace").removeprefix("\ufeff")


# ================================================================================================ sniffing
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*(?:"|$)|[{}\[\]:,]', re.DOTALL)


@dataclass
class RecordHead:
    """What the first bytes of a JSON/JSONL file say about its first record, for cheap sniffing.

    ``container`` is ``"list"`` when the file is a JSON array (the record is its first element) and ``"object"``
    when it starts with an object (a JSON document or the first JSONL line). ``keys`` maps each top-level key of
    the record seen so far to the first character of its value (``[``, ``{``, ``"`` or ``""`` for scalars);
    ``nested`` maps a top-level key whose value is an object to the keys seen inside it.
    """

    container: str
    keys: dict[str, str] = field(default_factory=dict)
    nested: dict[str, set[str]] = field(default_factory=dict)


def read_record_head(text: str) -> RecordHead | None:
    """Scan the start of a JSON text (possibly cut off) for the keys of its first record; None if not JSON-like.

    >>> head = read_record_head('[{"task_id": 3, "traj": [{"role": "user"')
    >>> head.container, head.keys
    ('list', {'task_id': '', 'traj': '['})
    """
    body = text.lstrip("\ufeff \t\r\n")
    if body.startswith("["):
        container = "list"
        body = body[1:].lstrip()
    elif body.startswith("{"):
        container = "object"
    else:
        return None
    if not body.startswith("{"):
        return None
    head = RecordHead(container)
    depth = 0  # nesting depth before the current token; the record's own keys sit at depth 1
    top: str | None = None  # the top-level key whose value is being scanned
    last_string: str | None = None
    awaiting: tuple[str, int] | None = None  # a key and its depth, just before its value
    for m in _TOKEN.finditer(body):
        tok = m.group()
        if awaiting is not None:
            key, level = awaiting
            awaiting = None
            first = tok[0] if tok[0] in '[{"' else ""
            if level == 1:
                head.keys[key] = first
                top = key
                if first == "{":
                    head.nested[key] = set()
            elif top is not None and top in head.nested:
                head.nested[top].add(key)
        if tok == ":":
            if last_string is not None and depth in (1, 2):
                awaiting = (last_string, depth)
            last_string = None
            continue
        last_string = None
        if tok in ("{", "["):
            depth += 1
        elif tok in ("}", "]"):
            depth -= 1
            if depth <= 0:
                break
        elif tok.startswith('"') and len(tok) > 1 and tok.endswith('"'):
            last_string = tok[1:-1]
    return head


class Refusal:
    """A sniff's "no" with the reason, so detection can say why each reader refused a file.

    It is false in a boolean context, so ``if reader.sniff(path):`` works whether a sniff returns a plain
    ``False`` or a :class:`Refusal`.

    >>> bool(Refusal("not a .json file")), str(Refusal("not a .json file"))
    (False, 'not a .json file')
    """

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __bool__(self) -> bool:
        return False

    def __str__(self) -> str:
        return self.reason

    def __repr__(self) -> str:
        return f"Refusal({self.reason!r})"


#: The answer of a reader's ``sniff``: True, or a (reasoned) refusal.
Sniffed = bool | Refusal


def keys_text(keys: Iterable[str], limit: int = 8) -> str:
    """Record keys for a message: ``a, b, c`` (``…`` after ``limit``)."""
    names = list(keys)
    text = ", ".join(names[:limit]) + (", …" if len(names) > limit else "")
    return text or "none"


def wrong_suffix(path: Path, wanted: Iterable[str]) -> Refusal:
    """The refusal of a reader that only reads files with the extensions ``wanted``."""
    if path.is_dir():
        return Refusal("reads files, not folders")
    suffix = path.suffix.lower() or "no extension"
    return Refusal(f"reads {'/'.join(wanted)} files, not {suffix}")


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


def jsonl_head_records(path: Path, n_bytes: int = 262_144, limit: int = 20) -> tuple[list[dict[str, Any]],
                                                                                     list[Any], str | None]:
    """The leading header records and the first data records of a JSONL file, parsed from its first bytes.

    Returns ``(headers, records, cut)``: ``records`` holds up to ``limit`` complete values after the headers (each
    JSON value of a line), and ``cut`` the text of the first line that the byte budget cut off (or that is not
    valid JSON), for a partial look with :func:`read_record_head`.
    """
    with path.open("rb") as fh:
        raw = fh.read(n_bytes)
    complete = len(raw) < n_bytes
    text = raw.decode("utf-8", errors="replace").lstrip("\ufeff")
    lines = text.split("\n")
    headers: list[dict[str, Any]] = []
    records: list[Any] = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        last = i == len(lines) - 1 and not complete
        try:
            value = json_loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return headers, records, line
        if last:  # the budget may have cut the line exactly at a value boundary; do not trust it
            return headers, records, line
        if not records and is_header_record(value):
            headers.append(value)
            continue
        records.append(value)
        if len(records) >= limit:
            break
    return headers, records, None


def jsonl_first_head(path: Path) -> tuple[RecordHead | None, int]:
    """The :class:`RecordHead` of the first record of a JSONL file after its header lines, and how many header
    lines there were (sniffing that looks past ``{"metadata": …}`` lines)."""
    headers, records, cut = jsonl_head_records(path, limit=1)
    if records:
        return read_record_head(json.dumps(records[0]) if isinstance(records[0], dict) else "[]"), len(headers)
    if cut is not None:
        return read_record_head(cut), len(headers)
    return None, len(headers)


# ================================================================================================ values
def finite_float(value: Any) -> float | None:
    """A finite number from a number or numeric text; None for anything else (booleans, NaN, ±inf included)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        f = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return f if math.isfinite(f) else None


def iso_seconds(value: Any) -> float | None:
    """ISO-8601 text (naive = UTC; nanosecond fractions allowed) or epoch s/ms/µs/ns number as epoch seconds.

    A number's unit is told by its size: ≥ 1e16 ns, ≥ 1e13 µs, ≥ 1e10 ms, else seconds. Raises ``ValueError``
    for text that is not ISO-8601 and for other types.

    >>> iso_seconds("1970-01-01T00:01:00Z"), iso_seconds(1_700_000_000_000), iso_seconds(None)
    (60.0, 1700000000.0, None)
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        x = float(value)
        if not math.isfinite(x):
            raise ValueError(f"expected a time, got {value!r}")
        for scale in (1e18, 1e15, 1e12):  # ns, µs, ms
            if abs(x) >= scale / 1e2:
                return x / (scale / 1e9)
        return x
    if not isinstance(value, str):
        raise ValueError(f"expected an ISO-8601 time, got {type(value).__name__}")
    text = _FRACTION_RE.sub(r"\1", value.strip())
    stamp = datetime.fromisoformat(text)
    return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()


def lookup(attrs: dict[str, Any] | None, key: str) -> Any:
    """``attrs[key]``, or a dotted key looked up inside a JSON-string / mapping attribute; :data:`MISSING` if absent.

    >>> lookup({"metadata": '{"task_id": "t7"}'}, "metadata.task_id"), lookup({}, "x") is MISSING
    ('t7', True)
    """
    if not attrs or not isinstance(attrs, dict):
        return MISSING
    if key in attrs:
        return attrs[key]
    parts = key.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        head = ".".join(parts[:cut])
        if head in attrs:
            found = descend(attrs[head], parts[cut:])
            if found is not MISSING:
                return found
    return MISSING


def descend(obj: Any, parts: list[str]) -> Any:
    """Walk ``parts`` into nested mappings (JSON strings are parsed); dotted keys may also be stored whole."""
    if isinstance(obj, str):
        s = obj.strip()
        if not s.startswith("{"):
            return MISSING
        try:
            obj = json.loads(s)
        except (json.JSONDecodeError, RecursionError):
            return MISSING
    if not isinstance(obj, dict):
        return MISSING
    whole = ".".join(parts)
    if whole in obj:
        return obj[whole]
    for cut in range(len(parts) - 1, 0, -1):
        head = ".".join(parts[:cut])
        if head in obj:
            found = descend(obj[head], parts[cut:])
            if found is not MISSING:
                return found
    return MISSING


def add_int(a: int | None, b: int | None) -> int | None:
    """a + b where a missing value counts as 0; None when both are missing."""
    return None if a is None and b is None else (a or 0) + (b or 0)


def add_float(a: float | None, b: float | None) -> float | None:
    """a + b where a missing value counts as 0; None when both are missing."""
    return None if a is None and b is None else (a or 0.0) + (b or 0.0)


# ================================================================================================ verdicts
def parse_success_values(values: Any) -> frozenset[str] | None:
    """``success_values=`` as a set of lower-case strings (a comma-separated string or an iterable)."""
    if values is None:
        return None
    if isinstance(values, str):
        items: Iterable[Any] = values.split(",")
    elif isinstance(values, Iterable):
        items = values
    else:
        raise TypeError(f"success_values must be a string or a list of strings, got {type(values).__name__}")
    out = frozenset(str(v).strip().lower() for v in items if str(v).strip())
    if not out:
        raise ValueError("success_values is empty")
    return out


def verdict_to_outcome(value: Any, success_values: frozenset[str] | None,
                       threshold: float) -> tuple[str, float | None] | str:
    """Map a verdict value to ``(outcome, reward)``; a string return is the reason it could not be mapped.

    Booleans map directly; numbers are the reward and succeed at ``≥ threshold``; text is matched
    case-insensitively against ``success_values`` when given (anything else fails), else against
    :data:`SUCCESS_WORDS` / :data:`FAILURE_WORDS` (``censored``/``invalid`` taken literally); numeric text is a
    reward (an outcome is never guessed; docs/formats.md, "Outcomes are never guessed").

    >>> verdict_to_outcome("PASSED", None, 1.0), verdict_to_outcome(0.5, None, 1.0), verdict_to_outcome("meh", None, 1)
    (('success', None), ('failure', 0.5), "cannot tell whether verdict 'meh' means success (pass success_values=)")
    """
    if isinstance(value, bool):
        return ("success" if value else "failure"), (1.0 if value else 0.0)
    if isinstance(value, (int, float)):
        f = finite_float(value)
        if f is None:
            return f"verdict {_short_repr(value)} is not a finite number"
        return ("success" if f >= threshold else "failure"), f
    if isinstance(value, str):
        s = value.strip().lower()
        if not s:
            return "verdict is an empty string"
        if s in ("censored", "invalid"):
            return s, None
        if success_values is not None:
            return ("success" if s in success_values else "failure"), None
        if s in SUCCESS_WORDS:
            return "success", None
        if s in FAILURE_WORDS:
            return "failure", None
        num = finite_float(s)
        if num is not None:
            return ("success" if num >= threshold else "failure"), num
        return f"cannot tell whether verdict {value[:80]!r} means success (pass success_values=)"
    return f"verdict {_short_repr(value)} is not a label, a number or true/false"


#: Field names that usually hold an episode's verdict (matched case-insensitively on the last part of a path).
VERDICT_NAMES = ("outcome", "success", "succeeded", "successful", "passed", "pass", "resolved", "solved",
                 "correct", "is_correct", "is_success", "verdict", "label", "result", "status", "reward", "score")


def verdict_candidates(record: Any, max_depth: int = 3, limit: int = 6) -> list[tuple[str, Any]]:
    """Dotted paths in a record whose name suggests a verdict and whose value could be one (a boolean, a number or
    short text), nearest first — for error messages that say which ``outcome_key=``/``reward_key=`` would work.

    >>> verdict_candidates({"messages": [], "metadata": {"success": True, "model": "m"}})
    [('metadata.success', True)]
    """
    found: list[tuple[int, str, Any]] = []

    def walk(node: Any, prefix: str, depth: int) -> None:
        if not isinstance(node, dict) or depth > max_depth:
            return
        for key, value in node.items():
            if not isinstance(key, str):
                continue
            path = f"{prefix}{key}"
            if key.lower() in VERDICT_NAMES and (isinstance(value, (bool, int, float))
                                                 or (isinstance(value, str) and 0 < len(value) <= 40)):
                found.append((depth, path, value))
            walk(value, f"{path}.", depth + 1)

    walk(record, "", 1)
    found.sort(key=lambda t: (t[0], VERDICT_NAMES.index(t[1].rsplit(".", 1)[-1].lower())))
    return [(path, value) for _, path, value in found[:limit]]


def verdict_option(path: str, value: Any) -> str:
    """The reader option that reads ``value`` at ``path`` as the verdict: ``reward_key`` for non-boolean numbers,
    ``outcome_key`` otherwise."""
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    return f"{'reward_key' if numeric else 'outcome_key'}={path}"


def _short_repr(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class TraceBuilder:
    """Collects canonical step records and reader-level problems, then builds the :class:`TraceTable`.

    ``skip_trace`` records that a whole episode was dropped (with its location and why); with ``on_error="raise"``
    it raises instead, naming the source, the location and the field.
    """

    source: str
    format: str
    on_error: str = "raise"
    location_kind: str = "row"
    records: list[dict[str, Any]] = field(default_factory=list)
    locations: list[int] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    #: Header lines of the source (kept in ``report.run_metadata``).
    run_metadata: dict[str, Any] = field(default_factory=dict)
    #: Episodes added with :meth:`add_zero_step`.
    n_zero_step: int = 0

    def add_step(self, record: dict[str, Any], location: int = 0) -> None:
        self.records.append({k: v for k, v in record.items() if v is not None})
        self.locations.append(location)

    def add_zero_step(self, trace: dict[str, Any], location: int = 0) -> None:
        """Add an episode that ended before any agent step: one record with its trace-level fields only (see
        :func:`split_zero_step`). It is kept as a trial and reported, never dropped."""
        self.n_zero_step += 1
        self.add_step({k: v for k, v in trace.items() if k not in STEP_FIELDS}, location)

    def skip_trace(self, message: str, *, location: int | None = None, field: str | None = None,
                   hint: str | None = None, source: str | Path | None = None) -> None:
        """Drop one episode (``on_error="skip"``: counted in the report) or raise (``on_error="raise"``).

        ``source`` names the file the episode came from when a reader reads several files (a folder): the raised
        error names it instead of the builder's source, and a skipped episode's problem message ends with it in
        brackets — relative to the builder's source when it lies inside it — so the report says which file was
        dropped while still grouping skips by ``message``.
        """
        if self.on_error == "raise":
            is_line = self.location_kind == "line"
            raise TraceValidationError(message, source=str(source) if source is not None else self.source,
                                       line=location if is_line else None, row=None if is_line else location,
                                       field=field, hint=hint)
        if source is not None and str(source) != self.source:
            message = f"{message} ({_relative_name(Path(source), Path(self.source))})"
        self.problems.append(Problem(location, field, message, whole_trace=True))

    def build(self) -> TraceTable:
        table = build_table(records_to_arrow(self.records), on_error=self.on_error, source=self.source,
                            format=self.format, problems=self.problems, locations=self.locations,
                            location_kind=self.location_kind, zero_step=self.n_zero_step > 0)
        table.report.run_metadata = dict(self.run_metadata)
        return table


def _relative_name(path: Path, root: Path) -> str:
    """``path`` relative to the folder ``root`` (or to ``root``'s folder when ``root`` is a file); else as given."""
    for base in (root, root.parent):
        try:
            rel = path.relative_to(base).as_posix()
        except ValueError:
            continue
        if rel not in ("", "."):
            return rel
    return path.as_posix()


# ================================================================================================ table building
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_ARROW_FAILURES = (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, UnicodeEncodeError)
_BOOL_COLUMNS = tuple(c.name for c in COLUMNS if c.type == pa.bool_())
_BOOL_TEXT = {"true": True, "1": True, "false": False, "0": False}


def clean_text(value: str) -> str:
    """``value`` with lone surrogates (from ``\\ud800``-style JSON escapes, which UTF-8 cannot hold) replaced by
    ``?``; other text is returned unchanged."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", errors="replace").decode("utf-8")
    return value


def _as_text_value(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, str):
        return clean_text(v)
    if isinstance(v, (dict, list)):
        try:
            return clean_text(json.dumps(v, ensure_ascii=False))
        except (TypeError, ValueError, RecursionError):
            return clean_text(repr(v))
    return clean_text(str(v))


def records_to_arrow(records: list[dict[str, Any]]) -> pa.Table:
    """Step dicts as an Arrow table, one column per field (in order of first appearance).

    A field Arrow cannot type as one column — mixed Python types (3 and "3"), an integer outside 64 bits, text
    with lone surrogates — is kept as text, so that :meth:`TraceTable.from_arrow` reports each bad value by its
    record (e.g. ``expected an integer, got '1e30'``) instead of failing the whole source. No records at all give
    the minimal canonical columns, so "nothing to fit" is reported downstream rather than a missing field (and
    records without any field each report their empty ``trace_id``).
    """
    names: dict[str, None] = {}
    for r in records:
        for k in r:
            names.setdefault(k, None)
    if not names:  # no records, or only empty ones (each then reports its empty trace_id)
        n = len(records)
        return pa.table({"trace_id": pa.nulls(n, pa.string()), "step_idx": pa.nulls(n, pa.int64()),
                         "state": pa.nulls(n, pa.string()), "outcome": pa.nulls(n, pa.string())})
    cols: dict[str, pa.Array] = {}
    for name in names:
        values = [r.get(name) for r in records]
        try:
            cols[name] = pa.array(values)
        except _ARROW_FAILURES:
            cols[name] = pa.array([_as_text_value(v) for v in values], pa.string())
    return pa.table(cols)


def arrow_column(values: list[Any], typ: pa.DataType) -> pa.Array:
    """``pa.array(values, type=typ)`` for reader-built columns, where a value that does not fit (an integer
    outside 64 bits, text with lone surrogates) becomes null / cleaned text instead of failing the source."""
    try:
        return pa.array(values, type=typ)
    except _ARROW_FAILURES:
        fixed: list[Any]
        if pa.types.is_integer(typ):
            fixed = [v if isinstance(v, int) and not isinstance(v, bool) and _INT64_MIN <= v <= _INT64_MAX
                     else None for v in values]
        elif pa.types.is_string(typ):
            fixed = [None if v is None else clean_text(str(v)) for v in values]
        else:
            raise
        return pa.array(fixed, type=typ)


def build_table(table: pa.Table, *, on_error: str, source: str, format: str, problems: list[Problem],
                locations: Any, location_kind: str, zero_step: bool = False,
                defer_step_gaps: bool = False) -> TraceTable:
    """Validate a reader's Arrow table into a :class:`TraceTable` (:meth:`TraceTable.from_arrow`).

    Two kinds of rows are settled here first, because the shared validation does not handle them yet (see
    :func:`_settle_rows`): with ``on_error="skip"`` rows without a trace id, and text or 0/1 values with gaps in a
    true/false column such as ``error``. Then the records of episodes that ended before any step are taken out
    (:func:`split_zero_step`; ``zero_step`` says the reader added some, so ``step_idx`` may be absent from every
    record) and kept, validated, in ``report.zero_step``.
    """
    names = table.column_names
    if len(set(names)) < len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise TraceValidationError(f"column {twice!r} appears twice", source=source, field=twice,
                                   hint="give every column its own name")
    locs = np.asarray(locations, dtype=np.int64) if locations is not None else np.arange(table.num_rows)
    table, locs, settled = _settle_rows(table, locs, on_error, source, location_kind)
    if zero_step and "step_idx" not in names and "trace_id" in names:
        table = table.append_column("step_idx", pa.nulls(table.num_rows, pa.int64()))
    table, locs, zero_rows, zero_locs = split_zero_step(table, locs)
    if zero_rows is not None and table.num_rows == 0 and not {"state", "step_kind"} & set(table.column_names):
        table = table.append_column("state", pa.nulls(0, pa.string()))  # only zero-step episodes: no steps at all
    result = TraceTable.from_arrow(table, on_error=on_error,  # type: ignore[arg-type]
                                   source=source, format=format, problems=[*problems, *settled], locations=locs,
                                   location_kind=location_kind, defer_step_gaps=defer_step_gaps)
    if zero_rows is not None:
        _add_zero_step(result, zero_rows, zero_locs, on_error, source, format, location_kind)
    return result


# ================================================================================================ zero-step episodes
#: Step fields: a record with none of them (and no ``step_idx``) is an episode that ended before any step.
STEP_FIELDS = ("step_idx", "state", "step_kind", "tool_name", "text")


def split_zero_step(table: pa.Table, locs: NDArray[np.int64]
                    ) -> tuple[pa.Table, NDArray[np.int64], pa.Table | None, NDArray[np.int64]]:
    """Take out the records of episodes that ended before any agent step.

    Such an episode is one trace whose single record has no step fields: ``step_idx`` null and no ``state``,
    ``step_kind``, ``tool_name`` or ``text``. It is still a trial with an outcome (a run that crashed or gave up
    before acting, or was judged on no action at all), so it must be counted, never dropped. The step table cannot
    hold it yet, so it travels beside the table in ``report.zero_step``. A stepless record whose trace also has
    other records stays in the table (where validation reports its empty ``step_idx``).

    Returns the step rows, their locations, and the zero-step rows with theirs (None when there are none).
    """
    names = table.column_names
    if table.num_rows == 0 or "trace_id" not in names or "step_idx" not in names:
        return table, locs, None, np.zeros(0, np.int64)
    stepless = np.asarray(_column(table, "step_idx").is_null(), dtype=bool)
    for name in STEP_FIELDS[1:]:
        if name in names and stepless.any():
            col = _column(table, name)
            empty = col.is_null()
            if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
                empty = pc.or_kleene(empty, pc.equal(col, "")).fill_null(True)
            stepless &= np.asarray(empty, dtype=bool)
    if not stepless.any():
        return table, locs, None, np.zeros(0, np.int64)
    tid = _column(table, "trace_id")
    keys = np.asarray(pc.dictionary_encode(tid.cast(pa.string()) if not pa.types.is_string(tid.type) else tid)
                      .indices.fill_null(-1), dtype=np.int64)
    rows_per_trace = np.bincount(keys[keys >= 0], minlength=int(keys.max(initial=-1)) + 1)
    alone = np.zeros(len(keys), dtype=bool)
    valid = keys >= 0
    alone[valid] = rows_per_trace[keys[valid]] == 1
    zero = stepless & alone
    if not zero.any():
        return table, locs, None, np.zeros(0, np.int64)
    return table.filter(pa.array(~zero)), locs[~zero], table.filter(pa.array(zero)), locs[zero]


def _add_zero_step(result: TraceTable, rows: pa.Table, locs: NDArray[np.int64], on_error: str, source: str,
                   format: str, location_kind: str) -> None:
    """Validate zero-step records like any other (outcome, task, trial, reward …) and keep them in the report."""
    probe = rows.drop_columns([c for c in STEP_FIELDS if c in rows.column_names])
    probe = probe.append_column("step_idx", pa.array(np.zeros(probe.num_rows, np.int64)))
    probe = probe.append_column("state", pa.array(["(no step)"] * probe.num_rows, pa.string()))
    checked = TraceTable.from_arrow(probe, on_error=on_error,  # type: ignore[arg-type]
                                    source=source, format=format, locations=locs, location_kind=location_kind)
    report, extra = result.report, checked.report
    report.n_records += extra.n_records
    report.n_records_skipped += extra.n_records_skipped
    report.n_traces_skipped += extra.n_traces_skipped
    for reason, n in extra.skipped_by_reason.items():
        report.skipped_by_reason[reason] = report.skipped_by_reason.get(reason, 0) + n
    report.problems = [*report.problems, *extra.problems][:50]
    kept = checked.to_arrow().drop_columns(["step_idx", "state"])
    report.zero_step = [{k: v for k, v in rec.items() if v is not None} for rec in kept.to_pylist()]


def _column(table: pa.Table, name: str) -> pa.Array:
    col = table.column(name)
    return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()


def _settle_rows(table: pa.Table, locs: NDArray[np.int64], on_error: str, source: str,
                 location_kind: str) -> tuple[pa.Table, NDArray[np.int64], list[Problem]]:
    """Settle rows that ``TraceTable`` validation mishandles, exactly as it means to treat them.

    * A true/false column (``error``) held as text or integers with empty cells: valid values (true/false/1/0, any
      case) become booleans here; any other value raises ``expected true/false`` naming its record, or with
      ``on_error="skip"`` drops its whole trace (counted). Left alone, an empty cell beside a valid one stopped
      the read with an untyped ``ValueError``.
    * With ``on_error="skip"``, rows with an empty or missing ``trace_id`` are dropped and counted ("trace_id is
      empty"); left in, they broke the step ordering of the rows that remained.
    """
    problems: list[Problem] = []
    if table.num_rows == 0 or "trace_id" not in table.column_names:
        return table, locs, problems
    for name in _BOOL_COLUMNS:
        if name not in table.column_names:
            continue
        col = _column(table, name)
        values: list[Any]
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            values = [None if v is None else _BOOL_TEXT.get(v.strip().lower(), v) for v in col.to_pylist()]
        elif pa.types.is_integer(col.type):
            values = [None if v is None else {1: True, 0: False}.get(v, v) for v in col.to_pylist()]
        else:
            continue  # booleans already, or a type the validation rejects as a whole (which it handles)
        bad = np.fromiter((v is not None and not isinstance(v, bool) for v in values), bool, len(values))
        if bad.any():
            first = int(np.flatnonzero(bad)[0])
            message = f"expected true/false, got {values[first]!r}"
            if on_error == "raise":
                loc = int(locs[first])
                raise TraceValidationError(message, source=source, line=loc if location_kind == "line" else None,
                                           row=None if location_kind == "line" else loc, field=name,
                                           hint=f"write {name} as true/false")
            keep, dropped = drop_traces(table, locs, bad, name, message)
            problems += dropped
            table, locs = table.filter(pa.array(keep)), locs[keep]
            values = [v for v, k in zip(values, keep, strict=True) if k]
        table = table.set_column(table.column_names.index(name), name, pa.array(values, pa.bool_()))
    if on_error == "skip" and table.num_rows:
        tid = _column(table, "trace_id")
        if pa.types.is_string(tid.type) or pa.types.is_large_string(tid.type):
            lost = np.asarray(pc.or_kleene(pc.is_null(tid), pc.equal(tid, "")).fill_null(True), dtype=bool)
        elif pa.types.is_integer(tid.type):
            lost = np.asarray(pc.is_null(tid), dtype=bool)
        else:
            lost = np.zeros(table.num_rows, bool)
        if lost.any():
            problems += [Problem(int(locs[i]), "trace_id", "trace_id is empty") for i in np.flatnonzero(lost)]
            table, locs = table.filter(pa.array(~lost)), locs[~lost]
    return table, locs, problems


def drop_traces(table: pa.Table, locs: NDArray[np.int64], bad: NDArray[np.bool_], fieldname: str,
                 message: str) -> tuple[NDArray[np.bool_], list[Problem]]:
    """Rows to keep once every trace holding a ``bad`` row is dropped, and one counted problem per dropped row
    (the trace's first bad row carries the whole-trace count; the others say they went with it)."""
    tid = _column(table, "trace_id")
    keys: list[Any] = tid.to_pylist() if (pa.types.is_string(tid.type) or pa.types.is_large_string(tid.type)
                                          or pa.types.is_integer(tid.type)) else [None] * len(tid)
    bad_ids = {keys[i] for i in np.flatnonzero(bad) if keys[i] not in (None, "")}
    drop = bad | np.fromiter((k in bad_ids for k in keys), bool, len(keys))
    problems: list[Problem] = []
    counted: set[Any] = set()
    for i in np.flatnonzero(drop):
        key = keys[i]
        if bad[i] and key not in counted:
            if key not in (None, ""):
                counted.add(key)
            problems.append(Problem(int(locs[i]), fieldname, message, whole_trace=key not in (None, "")))
        else:
            problems.append(Problem(int(locs[i]), fieldname, f"{message} (another step of its trace)"))
    return ~drop, problems
