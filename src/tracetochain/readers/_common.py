"""Shared plumbing for readers: JSON loading with located errors, outcome rules, and a record builder.

Every reader turns its source into canonical step records with :class:`TraceBuilder` and hands them to
:meth:`TraceTable.from_records`, so validation, skip-and-count and the ingest report work the same for all formats.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracetochain.exceptions import TraceValidationError
from tracetochain.traces._table import Problem, TraceTable

#: τ-bench's success rule: reward ≥ 1 − 1e−6 (``formats.md`` §3.1).
DEFAULT_SUCCESS_THRESHOLD = 1.0 - 1e-6


def outcome_from_reward(reward: float | None, threshold: float = DEFAULT_SUCCESS_THRESHOLD) -> str | None:
    """success when reward ≥ threshold, failure below it, None when there is no reward."""
    if reward is None:
        return None
    return "success" if float(reward) >= threshold else "failure"


def load_json(path: Path, *, max_bytes: int | None = None) -> Any:
    """Parse a whole JSON file; a syntax error names the file, line and column."""
    if max_bytes is not None and path.stat().st_size > max_bytes:
        raise TraceValidationError(f"file is larger than the {max_bytes:,}-byte limit for this format",
                                   source=str(path))
    try:
        with path.open("r", encoding="utf-8") as fh:
            return json.load(fh)
    except json.JSONDecodeError as exc:
        raise TraceValidationError(f"not valid JSON ({exc.msg} at column {exc.colno})", source=str(path),
                                   line=exc.lineno) from None
    except UnicodeDecodeError as exc:
        raise TraceValidationError(f"not UTF-8 text ({exc.reason})", source=str(path)) from None


def head_text(path: Path, n_bytes: int = 65_536) -> str:
    """The first bytes of a file as text, for cheap sniffing."""
    with path.open("rb") as fh:
        return fh.read(n_bytes).decode("utf-8", errors="replace")


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

    def add_step(self, record: dict[str, Any], location: int = 0) -> None:
        self.records.append({k: v for k, v in record.items() if v is not None})
        self.locations.append(location)

    def skip_trace(self, message: str, *, location: int | None = None, field: str | None = None,
                   hint: str | None = None) -> None:
        if self.on_error == "raise":
            is_line = self.location_kind == "line"
            raise TraceValidationError(message, source=self.source, line=location if is_line else None,
                                       row=None if is_line else location, field=field, hint=hint)
        self.problems.append(Problem(location, field, message, whole_trace=True))

    def build(self) -> TraceTable:
        return TraceTable.from_records(
            self.records, on_error=self.on_error,  # type: ignore[arg-type]
            source=self.source, format=self.format, problems=self.problems, locations=self.locations,
            location_kind=self.location_kind,
        )
