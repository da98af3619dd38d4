"""Reader registry: how ``read_traces`` finds the module that understands a file.

A reader is any object with ``name``, ``description``, ``needs`` (what the user must supply besides the file,
e.g. a verdict file), ``sniff(path) -> bool`` (cheap: look at the extension and the first bytes only) and
``read(path, *, on_error, **options) -> TraceTable``. Built-in readers are listed in :data:`BUILTIN_READERS`
and imported on first use; third parties register theirs with :func:`register_reader` or the entry-point group
``tracetochain.readers`` (the entry point names an object satisfying :class:`Reader`).
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from tracetochain.exceptions import TraceValidationError
from tracetochain.traces._table import TraceTable

ENTRY_POINT_GROUP = "tracetochain.readers"


@runtime_checkable
class Reader(Protocol):
    name: str
    description: str
    needs: str

    def sniff(self, path: Path) -> bool: ...

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


def _entry_point_readers() -> dict[str, Reader]:
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


def detect_format(path: str | Path) -> str:
    """Name of the first reader whose ``sniff`` accepts the file."""
    p = Path(path)
    if not p.exists():
        raise TraceValidationError("no such file or folder", source=str(p))
    readers = available_readers()
    for name, reader in readers.items():
        try:
            if reader.sniff(p):
                return name
        except (OSError, UnicodeDecodeError, ValueError):
            continue
    if p.is_file() and p.suffix.lower() in (".jsonl", ".ndjson", ".csv", ".parquet", ".pq", ".json"):
        # Nothing recognised it: let the canonical reader say exactly what is missing or wrong.
        return "canonical"
    raise TraceValidationError(
        "could not tell which trace format this is", source=str(p),
        hint=f"pass the format explicitly (--format / format=): one of {', '.join(readers)}",
    )


def read_traces(path: str | Path, format: str | None = None, *, on_error: str = "raise",
                **options: Any) -> TraceTable:
    """Read any supported trace source into a :class:`TraceTable`.

    ``format=None`` sniffs the format; the chosen reader's name is in ``table.report.format``. Reader-specific
    options (e.g. ``verdicts=`` for SWE-agent trajectories, ``success_threshold=``) pass through ``options``.
    """
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    name = format or detect_format(path)
    return get_reader(name).read(Path(path), on_error=on_error, **options)
