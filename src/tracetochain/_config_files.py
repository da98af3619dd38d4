"""Small declarative files users write by hand (milestone states, what-if edits): loading and locating lines.

TOML needs nothing extra; YAML needs PyYAML (``pip install 'tracetochain[yaml]'``). Parsers do not report the line
of a *valid but wrong* key, so :func:`locate_line` finds it in the text, which is enough for "file:line" errors.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tracetochain.exceptions import TraceToChainError

#: Largest milestone or edit file read (they are written by hand; anything bigger is a mistake or an attack).
MAX_DOCUMENT_BYTES = 16 << 20


def file_error(cls: type[TraceToChainError], message: str, path: str | None, line: int | None,
               hint: str | None = None) -> TraceToChainError:
    where = f"{path}:{line}: " if path and line else (f"{path}: " if path else "")
    return cls(where + message + (f" — {hint}" if hint else ""))


def load_document(path: str | Path, cls: type[TraceToChainError]) -> tuple[Any, str]:
    """Parse a .toml (or .yaml/.yml) file → (document, text); syntax errors name the file and line."""
    from tracetochain._files import input_problem

    p = Path(path)
    problem = input_problem(p)
    if problem is not None:
        raise file_error(cls, problem[0], str(p), None, problem[1])
    if p.stat().st_size > MAX_DOCUMENT_BYTES:
        raise file_error(cls, f"is larger than {MAX_DOCUMENT_BYTES:,} bytes, too large for a hand-written file",
                         str(p), None)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raw = p.read_bytes()
        raise file_error(cls, f"not UTF-8 text ({exc.reason})", str(p), raw.count(b"\n", 0, exc.start) + 1,
                         "save the file as UTF-8") from None
    except OSError as exc:
        raise file_error(cls, f"cannot read it ({exc.strerror or exc})", str(p), None) from None
    suffix = p.suffix.lower()
    if suffix == ".toml":
        import tomllib

        try:
            return tomllib.loads(text), text
        except tomllib.TOMLDecodeError as exc:
            line = re.search(r"line (\d+)", str(exc))
            raise file_error(cls, f"not valid TOML ({exc})", str(p), int(line.group(1)) if line else None) from None
        except RecursionError:
            raise file_error(cls, "nested too deeply to read", str(p), None,
                             "a hand-written file needs a few levels of tables at most") from None
    if suffix in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise file_error(cls, "reading YAML needs PyYAML", str(p), None,
                             "pip install 'tracetochain[yaml]', or write the file as TOML") from None
        try:
            return yaml.safe_load(text), text
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            raise file_error(cls, f"not valid YAML ({exc})", str(p), mark.line + 1 if mark else None) from None
        except RecursionError:
            raise file_error(cls, "nested too deeply to read", str(p), None,
                             "a hand-written file needs a few levels of mappings at most") from None
    raise file_error(cls, f"unknown file type {suffix!r}", str(p), None, "use .toml (or .yaml)")


def locate_line(text: str | None, block: int | None, key: str, table: str) -> int | None:
    """Line (1-based) of ``key`` inside the ``block``-th ``[[table]]`` entry (or YAML list item) of ``text``."""
    if text is None:
        return None
    lines = text.splitlines()
    start = 0
    if block is not None:
        header = re.compile(rf"^\s*(\[\[\s*{re.escape(table)}s?\s*\]\]|-\s)")
        seen = -1
        for i, line in enumerate(lines):
            if header.match(line):
                seen += 1
                if seen == block:
                    start = i
                    break
    key_re = re.compile(rf"^\s*(-\s*)?{re.escape(key)}\s*[=:]")
    for i in range(start, len(lines)):
        if key_re.match(lines[i]):
            return i + 1
    return start + 1 if block is not None else None
