"""Reader registry: how ``read_traces`` finds the module that understands a file.

A reader is any object with ``name``, ``description``, ``needs`` (what the user must supply besides the file,
e.g. a verdict file), ``sniff(path)`` (cheap: look at the extension and the first bytes only; True, or a falsy
:class:`~tracetochain.readers._common.Refusal` saying why not — a plain False works too) and
``read(path, *, on_error, **options) -> TraceTable``. Built-in readers are listed in :data:`BUILTIN_READERS`
and imported on first use; third parties register theirs with :func:`register_reader` or the entry-point group
``tracetochain.readers`` (the entry point names an object satisfying :class:`Reader`).
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from tracetochain.exceptions import TraceValidationError
from tracetochain.readers._common import Refusal
from tracetochain.traces import TraceTable

ENTRY_POINT_GROUP = "tracetochain.readers"


@runtime_checkable
class Reader(Protocol):
    name: str
    description: str
    needs: str

    def sniff(self, path: Path) -> bool | Refusal: ...

    def read(self, path: Path, *, on_error: str = "raise", **options: Any) -> TraceTable: ...


#: Built-in readers in sniffing order (most specific first; the canonical table last). "module:attribute".
BUILTIN_READERS: dict[str, str] = {
    "tau2-bench": "tracetochain.readers.tau_bench:TAU2_BENCH",
    "tau-bench": "tracetochain.readers.tau_bench:TAU_BENCH",
    "openai-messages": "tracetochain.readers.openai_messages:OPENAI_MESSAGES",
    "mini-swe-agent": "tracetochain.readers.swe_agent:MINI_SWE_AGENT",
    "swe-agent": "tracetochain.readers.swe_agent:SWE_AGENT",
    "inspect-ai": "tracetochain.readers.inspect_ai:INSPECT_AI",
    "otlp": "tracetochain.readers.otlp:OTLP",
    "langfuse": "tracetochain.readers.langfuse:LANGFUSE",
    "reflexion": "tracetochain.readers.reflexion:REFLEXION",
    "mast-csv": "tracetochain.readers.mast_csv:MAST_CSV",
    "swe-token-corpus": "tracetochain.readers.swe_agent:SWE_TOKEN_CORPUS",
    "canonical": "tracetochain.readers.canonical:CANONICAL",
}

_extra: dict[str, Reader] = {}
_loaded: dict[str, Reader] = {}


def register_reader(reader: Reader, *, replace: bool = False) -> None:
    """Register a third-party reader (checked before the built-in ones when sniffing)."""
    if not isinstance(reader, Reader):
        raise TypeError("a reader needs name, description, needs, sniff(path) and read(path, on_error=...)")
    if (reader.name in _extra or reader.name in BUILTIN_READERS) and not replace:
        raise ValueError(f"a reader named {reader.name!r} is already registered (pass replace=True)")
    _extra[reader.name] = reader


def _load_builtin(name: str) -> Reader | None:
    if name in _loaded:
        return _loaded[name]
    module_name, attr = BUILTIN_READERS[name].split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:  # not shipped in this build
            return None
        raise
    reader: Reader = getattr(module, attr)
    _loaded[name] = reader
    return reader


@functools.cache
def _entry_point_readers() -> dict[str, Reader]:
    # Scanning the installed distributions' metadata takes ~10 ms: once per process (installing a plugin takes a
    # new process anyway).
    found: dict[str, Reader] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        reader = ep.load()
        if isinstance(reader, Reader):
            found[reader.name] = reader
    return found


def available_readers() -> dict[str, Reader]:
    """All readers, in sniffing order: registered, entry points, built-in."""
    readers: dict[str, Reader] = dict(_extra)
    for name, reader in _entry_point_readers().items():
        readers.setdefault(name, reader)
    for name in BUILTIN_READERS:
        if name not in readers:
            loaded = _load_builtin(name)
            if loaded is not None:
                readers[name] = loaded
    return readers


def get_reader(name: str) -> Reader:
    readers = available_readers()
    if name not in readers:
        raise TraceValidationError(f"unknown format {name!r}", hint=f"use one of {', '.join(readers)}")
    return readers[name]


@dataclass(frozen=True)
class SniffAnswer:
    """One reader's answer to "is this file yours?": ``accepted``, or the ``reason`` it refused."""

    reader: str
    accepted: bool
    reason: str


def sniff_all(path: str | Path, *, stop_at_first: bool = False) -> list[SniffAnswer]:
    """Every reader's answer for ``path``, in detection order (with ``stop_at_first``, up to the first "yes")."""
    p = Path(path)
    answers: list[SniffAnswer] = []
    for name, reader in available_readers().items():
        try:
            verdict = reader.sniff(p)
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            answers.append(SniffAnswer(name, False, f"could not look inside ({type(exc).__name__}: {exc})"))
            continue
        if verdict:
            answers.append(SniffAnswer(name, True, "recognised"))
            if stop_at_first:
                break
        else:
            reason = verdict.reason if isinstance(verdict, Refusal) else "did not recognise it"
            answers.append(SniffAnswer(name, False, reason))
    return answers


def detect_format(path: str | Path) -> str:
    """Name of the first reader whose ``sniff`` accepts the file.

    A JSON/JSONL/CSV/Parquet file no reader claims goes to the canonical reader when it is empty or its first
    record has a ``trace_id`` or ``step_idx`` (so the canonical reader names exactly which field is missing or
    wrong). Otherwise the error lists every reader with the reason it refused, and suggests a reader and options
    when the file's first records can be read by one (the suggestion is tried before it is made).
    """
    p = Path(path)
    if not p.exists():
        raise TraceValidationError("no such file or folder", source=str(p))
    from tracetochain._files import check_input_file

    check_input_file(p, allow_folder=True)  # a FIFO or a device: refused before any reader opens it
    answers = sniff_all(p, stop_at_first=True)
    if answers and answers[-1].accepted:
        return answers[-1].reader
    if _near_canonical(p):
        return "canonical"
    raise no_reader_error(p, answers)


def _near_canonical(path: Path) -> bool:
    if not path.is_file() or path.suffix.lower() not in (".jsonl", ".ndjson", ".csv", ".parquet", ".pq", ".json"):
        return False
    from tracetochain.readers._common import head_text
    from tracetochain.readers.canonical import first_record_fields

    try:
        if not head_text(path, 4096).strip("\ufeff \t\r\n"):
            return True  # an empty file is an empty canonical table (no traces), not an unknown format
        fields = first_record_fields(path)
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return fields is not None and bool({"trace_id", "step_idx"} & fields)


def no_reader_error(path: Path, answers: list[SniffAnswer]) -> TraceValidationError:
    """The error for a file no reader recognises: each reader's reason, and a checked suggestion if there is one."""
    from tracetochain.readers._suggest import suggest

    lines = [f"{a.reader}: {a.reason}" for a in answers]
    try:
        found = suggest(path)
    except (OSError, UnicodeDecodeError, ValueError):
        found = None
    if found is not None:
        hint = (f"try {found.command_line()} (it reads the first {found.n_records} records; in Python: "
                f"{found.python()})")
    else:
        hint = ("choose a reader with --reader NAME (read_traces(path, NAME)) and name its fields with -O KEY=VALUE; "
                "`tracetochain formats` lists the readers and their options")
    message = "no reader recognised this file; readers tried:\n  " + "\n  ".join(lines) + "\n"
    return TraceValidationError(message, source=str(path), hint=hint)


def read_traces(path: str | Path, format: str | None = None, *, on_error: str = "raise",
                **options: Any) -> TraceTable:
    """Read any supported trace source into a :class:`TraceTable`.

    ``format=None`` sniffs the format (:func:`detect_format`); the chosen reader's name is in
    ``table.report.format``. Reader-specific options (e.g. ``verdicts=`` for SWE-agent trajectories,
    ``outcome_key="metadata.success"`` for chat logs, ``success_threshold=``) pass through ``options``; the
    command line passes the same options with ``-O KEY=VALUE``.
    """
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    name = format or detect_format(path)
    from tracetochain._files import check_input_file
    from tracetochain._limits import check_in_memory_read

    check_input_file(path, allow_folder=True)
    check_in_memory_read(path)  # a corpus larger than memory is pointed to the partitioned path, not OOM-killed
    try:
        return get_reader(name).read(Path(path), on_error=on_error, **options)
    except OSError as exc:  # a file inside a folder that cannot be read, a read error: one located line
        where = exc.filename if isinstance(exc.filename, str) else str(path)
        raise TraceValidationError(f"cannot read it ({exc.strerror or type(exc).__name__})", source=where,
                                   hint="make it readable, or leave it out of the input") from None
