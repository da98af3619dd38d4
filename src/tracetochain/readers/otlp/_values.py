"""Decoding OTLP values: ids (hex or base64 → lower-case hex), times, typed attribute values, token usage, attribute
keys; and verdict files (one outcome per episode id).
"""

from __future__ import annotations

import base64
import binascii
import csv
import json
import math
from pathlib import Path
from typing import Any

from tracetochain.exceptions import TraceValidationError
from tracetochain.readers._common import MISSING as _MISSING
from tracetochain.readers._common import json_loads, load_json
from tracetochain.readers.otlp._conventions import (
    _HEX_RE,
    _VERDICT_ID_KEYS,
    _VERDICT_OUTCOME_KEYS,
    _VERDICT_REWARD_KEYS,
)

#: Normalised ids by raw id (ids repeat within a trace; cleared when it grows past 16,384 entries).
_id_cache: dict[str, str | None] = {}


def norm_id(raw: Any) -> str | None:
    """Lower-case hex of an OTLP/console id (hex, ``0x`` hex or base64); None for an empty or all-zero id.

    A string that is neither hex nor base64 of 8/16 bytes is kept as it is (stripped); a non-string raises
    ``ValueError``.
    """
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise ValueError(f"expected a hex string, got {type(raw).__name__}")
    hit = _id_cache.get(raw, _MISSING)
    if hit is not _MISSING:
        return hit  # type: ignore[return-value]
    s = raw.strip()
    if s[:2] in ("0x", "0X"):
        s = s[2:]
    out: str | None
    if not s:
        out = None
    elif _HEX_RE.match(s) and len(s) in (16, 32):
        out = s.lower()
    else:
        out = s
        if len(s) in (12, 24) and not _HEX_RE.match(s):
            try:
                b = base64.b64decode(s, validate=True)
            except (binascii.Error, ValueError):
                b = b""
            if len(b) in (8, 16):
                out = b.hex()
        elif _HEX_RE.match(s):
            out = s.lower()
    if out is not None and not out.strip("0"):
        out = None
    if len(_id_cache) > 16_384:  # ids repeat within a trace; a small cache is enough
        _id_cache.clear()
    _id_cache[raw] = out
    return out


def _ns_seconds(value: Any) -> float | None:
    """OTLP ``*UnixNano`` (decimal string or number) as epoch seconds; None when absent or zero."""
    if value is None or isinstance(value, bool):
        return None
    try:
        ns = int(value)
    except (TypeError, ValueError):
        ns = int(float(value))  # "1.767e18": ValueError/TypeError propagate to the caller's guard
    return ns / 1e9 if ns else None


def _any_value(v: Any) -> Any:
    """Decode an OTLP ``AnyValue`` (``{"stringValue": …}`` etc.); plain JSON values pass through."""
    if not isinstance(v, dict):
        return v
    for k, x in v.items():
        if k in ("stringValue", "string_value"):
            return x
        if k in ("intValue", "int_value"):
            try:
                return int(x)
            except (TypeError, ValueError):
                return x
        if k in ("doubleValue", "double_value"):
            try:
                return float(x)  # "NaN", "Infinity" are legal here
            except (TypeError, ValueError, OverflowError):
                return x
        if k in ("boolValue", "bool_value"):
            return x
        if k in ("arrayValue", "array_value"):
            vals = x.get("values") if isinstance(x, dict) else None
            return [_any_value(e) for e in vals] if isinstance(vals, list) else []
        if k in ("kvlistValue", "kvlist_value"):
            vals = x.get("values") if isinstance(x, dict) else None
            out: dict[str, Any] = {}
            for kv in vals if isinstance(vals, list) else ():
                if isinstance(kv, dict) and isinstance(kv.get("key"), str):
                    out[kv["key"]] = _any_value(kv.get("value"))
            return out
        if k in ("bytesValue", "bytes_value"):
            return x
    return None


def _as_int(v: Any) -> int | None:
    """An integral number (or numeric text) that fits in 64 bits; None for anything else."""
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError, OverflowError):
        return None
    return int(f) if math.isfinite(f) and f == int(f) and abs(f) < 2**63 else None


def _usage(v: Any) -> Any:
    """A usage value (tokens, dollars) as kept: a negative one is dropped like a non-numeric one, so one bad
    counter costs the step its usage, never the episode its outcome."""
    return None if v is None or v < 0 else v


def _as_text(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, str):
        return v
    try:
        return json.dumps(v, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(v)


def _key_prefixes(key: str) -> set[str]:
    parts = key.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts) + 1)}


# ============================================================================================ verdict values
def _norm_key(raw: Any) -> str:
    s = str(raw).strip()
    if ":" in s:
        return ":".join(_norm_key(p) for p in s.split(":"))
    try:
        n = norm_id(s)
    except ValueError:
        n = None
    return (n or s).lower()


def load_verdicts(path: Path) -> dict[str, Any]:
    """Read a verdict file into ``{normalised id: verdict}``; a verdict is a value or ``(outcome, reward)`` pair."""
    src = str(path)
    if not path.is_file():
        raise TraceValidationError("verdict file not found", source=src,
                                   hint="pass verdicts= a JSON, JSONL or CSV file")
    suffix = path.suffix.lower()
    rows: list[tuple[int, Any]] = []
    if suffix == ".csv":
        try:
            with path.open("r", encoding="utf-8", newline="") as fh:
                reader = csv.DictReader(fh)
                rows = [(i, dict(r)) for i, r in enumerate(reader, start=2)]
        except (csv.Error, UnicodeDecodeError) as exc:
            raise TraceValidationError(f"cannot parse CSV ({exc})", source=src) from None
    elif suffix in (".jsonl", ".ndjson"):
        with path.open("rb") as fh:
            for i, line in enumerate(fh, start=1):
                if line.strip():
                    try:
                        rows.append((i, json_loads(line.decode("utf-8"))))
                    except UnicodeDecodeError as exc:
                        raise TraceValidationError(f"not UTF-8 text ({exc.reason})", source=src, line=i) from None
                    except json.JSONDecodeError as exc:
                        raise TraceValidationError(f"not valid JSON ({exc.msg})", source=src, line=i) from None
    else:
        data = load_json(path)
        if isinstance(data, dict) and not any(k in data for k in _VERDICT_ID_KEYS):
            out: dict[str, Any] = {}
            for k, v in data.items():
                out[_norm_key(k)] = _verdict_value(v, src, None, str(k))
            return out
        if isinstance(data, dict):
            data = [data]
        if not isinstance(data, list):
            raise TraceValidationError("a verdict file must hold an object {id: verdict} or a list of rows",
                                       source=src)
        rows = list(enumerate(data))
    out = {}
    for loc, row in rows:
        if not isinstance(row, dict):
            raise TraceValidationError(f"expected an object, got {type(row).__name__}", source=src, row=loc)
        key = next((row[k] for k in _VERDICT_ID_KEYS if row.get(k) not in (None, "")), None)
        if key is None:
            raise TraceValidationError("row has no id", source=src, row=loc, field="episode_id",
                                       hint=f"name the episode in one of {', '.join(_VERDICT_ID_KEYS)}")
        nk = _norm_key(key)
        if nk in out:
            raise TraceValidationError(f"id {key!r} appears twice", source=src, row=loc, field="episode_id")
        out[nk] = _verdict_value({k: v for k, v in row.items() if k not in _VERDICT_ID_KEYS}, src, loc, str(key))
    return out


def _verdict_value(v: Any, src: str, loc: int | None, key: str) -> Any:
    if not isinstance(v, dict):
        return v
    out = next((v[k] for k in _VERDICT_OUTCOME_KEYS if v.get(k) not in (None, "")), None)
    rew = next((v[k] for k in _VERDICT_REWARD_KEYS if v.get(k) not in (None, "")), None)
    if out is None and rew is None:
        raise TraceValidationError(
            f"verdict for {key!r} has no outcome", source=src, row=loc, field="outcome",
            hint=f"give one of {', '.join(_VERDICT_OUTCOME_KEYS + _VERDICT_REWARD_KEYS)}",
        )
    return ("pair", out, rew)
