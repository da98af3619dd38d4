"""When no reader recognises a file: look at its first records and suggest a reader and options that read them.

Only suggestions that were tried are made: the candidate reader reads the file's first records (written to a
temporary file of the same kind) with the suggested options, and the suggestion is dropped if that fails.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracetochain.readers._common import (
    jsonl_head_records,
    load_json,
    verdict_candidates,
    verdict_option,
)

#: Largest JSON document parsed whole to look for a suggestion (the error path should stay cheap).
_MAX_JSON_BYTES = 64 * 1024 * 1024
_SAMPLE = 20


@dataclass(frozen=True)
class Suggestion:
    """A reader and options that read the first records of a file."""

    reader: str
    options: dict[str, Any]
    n_records: int

    def command_line(self) -> str:
        """``--reader NAME -O KEY=VALUE …`` for the command line."""
        parts = [f"--reader {self.reader}"] + [f"-O {k}={_cli_value(v)}" for k, v in self.options.items()]
        return " ".join(parts)

    def python(self) -> str:
        args = "".join(f", {k}={v!r}" for k, v in self.options.items())
        return f"read_traces(path, {self.reader!r}{args})"


def _cli_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def sample_records(path: Path) -> list[Any] | None:
    """The first records of a JSON list or JSONL file (header lines left out); None for other files."""
    suffix = path.suffix.lower()
    if not path.is_file():
        return None
    if suffix in (".jsonl", ".ndjson"):
        _, records, _ = jsonl_head_records(path, limit=_SAMPLE)
        return records
    if suffix == ".json" and path.stat().st_size <= _MAX_JSON_BYTES:
        try:
            data = load_json(path)
        except ValueError:
            return None
        return data[:_SAMPLE] if isinstance(data, list) else None
    return None


def _message_lists(record: Any, max_depth: int = 2) -> list[str]:
    """Dotted paths to lists of chat messages (objects with a ``role``) inside a record."""
    found: list[str] = []

    def walk(node: Any, prefix: str, depth: int) -> None:
        if not isinstance(node, dict) or depth > max_depth:
            return
        for key, value in node.items():
            if not isinstance(key, str):
                continue
            path = f"{prefix}{key}"
            if isinstance(value, list) and value and all(isinstance(m, dict) for m in value[:5]) \
                    and sum("role" in m for m in value[:5]) >= min(2, len(value)):
                found.append(path)
            walk(value, f"{path}.", depth + 1)

    walk(record, "", 1)
    return found


def suggest(path: Path) -> Suggestion | None:
    """A reader and options that read the first records of ``path``, checked by reading them; None if none."""
    records = sample_records(path)
    if not records:
        return None
    dicts = [r for r in records if isinstance(r, dict)]
    if not dicts:
        return None
    message_keys = Counter(k for r in dicts for k in _message_lists(r))
    if not message_keys:
        return None
    key = message_keys.most_common(1)[0][0]
    options: dict[str, Any] = {}
    if key not in ("messages", "traj"):
        options["messages_key"] = key
    verdicts = Counter(verdict_option(p, v) for r in dicts for p, v in verdict_candidates(r)[:1]
                       if p not in ("outcome", "reward"))
    if verdicts and not any("outcome" in r or "reward" in r for r in dicts):
        option, _ = verdicts.most_common(1)[0]
        name, _, value = option.partition("=")
        options[name] = value
    return _checked(path, records, "openai-messages", options)


def _checked(path: Path, records: list[Any], reader: str, options: dict[str, Any]) -> Suggestion | None:
    """The suggestion when ``reader`` reads ``records`` (written like ``path``) with ``options``."""
    from tracetochain.readers._registry import get_reader

    folder = Path(tempfile.mkdtemp(prefix="tracetochain-suggest-"))
    try:
        sample = folder / f"sample{path.suffix.lower()}"
        if path.suffix.lower() == ".json":
            sample.write_text(json.dumps(records), encoding="utf-8")
        else:
            sample.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        try:
            table = get_reader(reader).read(sample, on_error="skip", **options)
        except (ValueError, TypeError, OSError):
            return None
        if table.n_traces == 0:
            return None
        return Suggestion(reader, options, len(records))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
