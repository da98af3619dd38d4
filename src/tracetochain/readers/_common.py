"""Shared plumbing for readers: JSON loading with located errors, sniffing, verdict and time parsing, a record builder.

Every reader turns its source into canonical step records with :class:`TraceBuilder` (or an Arrow table) and hands
them to :func:`build_table`, which validates through :meth:`TraceTable.from_arrow`, so validation, skip-and-count and
the ingest report work the same for all formats.
The small helpers here (verdict words, ISO times, dotted attribute lookup, usage sums, the cheap JSON head scan) are
shared by several readers; each one documents the rule it applies. Table building (:func:`build_table`,
:func:`records_to_arrow`, …) and JSON parsing with located errors (:func:`json_loads`, :func:`load_json`, header
lines) live with the table, in ``traces._build`` and ``traces._json``, because :meth:`TraceTable.read` needs them
too; they are re-exported here for the readers.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from tracetochain.exceptions import TraceValidationError
from tracetochain.traces import Problem, TraceTable
from tracetochain.traces.shared import HEADER_MARKERS as HEADER_MARKERS
from tracetochain.traces.shared import HEADER_WORDS as HEADER_WORDS
from tracetochain.traces.shared import STEP_FIELDS as STEP_FIELDS
from tracetochain.traces.shared import JSONLimitError as JSONLimitError
from tracetochain.traces.shared import arrow_column as arrow_column
from tracetochain.traces.shared import build_table as build_table
from tracetochain.traces.shared import clean_text as clean_text
from tracetochain.traces.shared import drop_traces as drop_traces
from tracetochain.traces.shared import is_header_record as is_header_record
from tracetochain.traces.shared import json_loads as json_loads
from tracetochain.traces.shared import json_raw_decode as json_raw_decode
from tracetochain.traces.shared import load_json as load_json
from tracetochain.traces.shared import merge_header as merge_header
from tracetochain.traces.shared import records_to_arrow as records_to_arrow
from tracetochain.traces.shared import split_zero_step as split_zero_step

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
    # Every reader sniffs the same head of the same file: scan it once (a copy each time, so no sniff sees another's
    # changes).
    head = _scan_record_head(text)
    if head is None:
        return None
    return RecordHead(head.container, dict(head.keys), {k: set(v) for k, v in head.nested.items()})


@functools.lru_cache(maxsize=8)
def _scan_record_head(text: str) -> RecordHead | None:
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
    #: The verdict field the reader found by itself (``report.verdict_field``).
    verdict_field: str | None = None
    #: Episodes added with :meth:`add_zero_step`.
    n_zero_step: int = 0
    #: How many episodes each outcome source labelled (readers that merge sources fill it: readers/otlp/_outcomes.py).
    outcome_sources: dict[str, int] = field(default_factory=dict)

    def add_step(self, record: dict[str, Any], location: int = 0) -> None:
        # A copy, not a filtered one: a None value and an absent key both become null, and a field that is None in
        # every record is left out when the table is built (records_to_arrow's drop_empty).
        self.records.append(dict(record))
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
        table = build_table(records_to_arrow(self.records, drop_empty=True), on_error=self.on_error, source=self.source,
                            format=self.format, problems=self.problems, locations=self.locations,
                            location_kind=self.location_kind, zero_step=self.n_zero_step > 0)
        table.report.run_metadata = dict(self.run_metadata)
        table.report.verdict_field = self.verdict_field
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


