"""Selecting and grouping traces by their fields: ``--where FIELD=VALUE`` and ``--by FIELD``.

A *field* is any column of the trace table that holds one value per trace: the canonical trace-level columns
(``task_id``, ``outcome``, ``trial``, …) and the extra columns readers keep — ``source_file`` and ``meta.*`` of a
multi-file corpus (:mod:`tracetochain.readers._many`), an episode's ``metadata.*`` fields. Names are matched
exactly (dotted names are column names, e.g. ``meta.defense`` or ``metadata.attack_type``).

Values compare as text: text as it is, integers in decimal, other numbers in their JSON spelling, booleans as
``true``/``false`` (any case on the command line). ``FIELD=`` (nothing after ``=``) selects the traces that have no
value for the field; ``FIELD!=`` those that have one. Several conditions must all hold. Episodes that ended before
any agent step (``report.zero_step``) are selected by the same rule, so a filtered table counts them too.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracetochain.exceptions import TraceValidationError

if TYPE_CHECKING:
    from tracetochain.traces._table import TraceTable

__all__ = ["MISSING_GROUP", "Condition", "group_by", "parse_condition", "text_value", "trace_values", "where"]

#: The group of traces with no value for the ``--by`` field.
MISSING_GROUP = "(missing)"


def text_value(value: Any) -> str | None:
    """A field value as the text conditions compare with (module docstring); None for a missing value.

    >>> text_value(True), text_value(3), text_value(0.5), text_value("none"), text_value(None)
    ('true', '3', '0.5', 'none', None)
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return json.dumps(float(value))
    return str(value)


class Condition:
    """One ``FIELD=VALUE`` or ``FIELD!=VALUE`` condition."""

    def __init__(self, field: str, value: str, negate: bool) -> None:
        self.field, self.value, self.negate = field, value, negate

    def matches(self, value: str | None) -> bool:
        if self.value == "":
            hit = value is None or value == ""
        elif value is None:
            hit = False
        elif self.value.lower() in ("true", "false") and value.lower() in ("true", "false"):
            hit = value.lower() == self.value.lower()
        else:
            hit = value == self.value
        return hit != self.negate

    def __str__(self) -> str:
        return f"{self.field}{'!=' if self.negate else '='}{self.value}"


def parse_condition(text: str) -> Condition:
    """``FIELD=VALUE`` or ``FIELD!=VALUE`` (spaces around the field name are ignored).

    >>> str(parse_condition("meta.defense != none")), parse_condition("outcome=success").negate
    ('meta.defense!=none', False)
    """
    if not isinstance(text, str):
        raise TypeError(f"a condition is text FIELD=VALUE, got {type(text).__name__}")
    negate = "!=" in text and text.index("!=") <= text.index("=") - 1
    field, sep, value = text.partition("!=" if negate else "=")
    field = field.strip()
    if not sep or not field:
        raise TraceValidationError(f"expected FIELD=VALUE or FIELD!=VALUE, got {text!r}", field=field or None,
                                   hint="e.g. --where meta.defense=none --where metadata.attack_type!=none")
    return Condition(field, value.strip(), negate)


def _fields(table: TraceTable) -> list[str]:
    return [c for c in table.columns if c not in ("step_idx",)]


def trace_values(table: TraceTable, name: str) -> list[str | None]:
    """The text value of field ``name`` for each trace (in table order).

    Raises :class:`TraceValidationError` naming the fields there are when ``name`` is not one, and when its value
    changes within a trace (a step field such as ``tool_name`` does not select episodes).
    """
    if name not in table.columns:
        if table.n_traces == 0:
            return []
        fields = ", ".join(sorted(_fields(table)))
        raise TraceValidationError(f"no field {name!r} in the traces", source=table.report.source, field=name,
                                   hint=f"fields: {fields}")
    col = table.to_arrow().column(name)
    arr = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    offsets = table.offsets
    starts = offsets[:-1]
    if table.n_steps:
        first = arr.take(pa.array(starts[table.trace_index], pa.int64()))
        same = np.asarray(pc.equal(arr, first).fill_null(True), dtype=bool)
        differ = ~same | (np.asarray(arr.is_null(), dtype=bool) != np.asarray(first.is_null(), dtype=bool))
        if differ.any():
            row = int(np.flatnonzero(differ)[0])
            trace = table.trace_ids[int(table.trace_index[row])]
            raise TraceValidationError(f"field {name!r} changes within trace {trace!r}: it is a step field, not a "
                                       "trace field", source=table.report.source, field=name,
                                       hint="--where and --by select episodes by fields with one value per episode")
    values = arr.take(pa.array(starts, pa.int64())).to_pylist()
    return [text_value(v) for v in values]


def _conditions(conditions: str | list[str] | tuple[str, ...] | list[Condition]) -> list[Condition]:
    items: list[str | Condition] = ([conditions] if isinstance(conditions, (str, Condition))
                                    else list(conditions))
    return [c if isinstance(c, Condition) else parse_condition(c) for c in items]


def where(table: TraceTable, conditions: str | list[str] | tuple[str, ...]) -> TraceTable:
    """The traces (and zero-step episodes) meeting every condition; the conditions are added to
    ``report.filters``. A field missing from every trace is an error (a typo should not select nothing)."""
    conds = _conditions(conditions)
    if not conds:
        return table
    keep = np.ones(table.n_traces, dtype=bool)
    for cond in conds:
        if cond.field not in table.columns and not any(cond.field in z for z in table.report.zero_step):
            trace_values(table, cond.field)  # raises, listing the fields there are
        values = trace_values(table, cond.field) if cond.field in table.columns else [None] * table.n_traces
        keep &= np.array([cond.matches(v) for v in values], dtype=bool)
    zero = [z for z in table.report.zero_step if all(c.matches(text_value(z.get(c.field))) for c in conds)]
    out = table.select_traces(keep)
    out.report = replace(table.report, zero_step=zero, filters=[*table.report.filters, *map(str, conds)])
    out.report.n_traces = out.n_traces
    return out


def group_by(table: TraceTable, name: str) -> dict[str, TraceTable]:
    """One table per value of field ``name``, in the values' sorted order (numbers numerically); traces with no
    value form the group :data:`MISSING_GROUP`. Each group's ``report.filters`` records ``name=value``."""
    values = trace_values(table, name) if (name in table.columns or table.n_traces) else []
    zero_values = [text_value(z.get(name)) for z in table.report.zero_step]
    keys = sorted({v for v in [*values, *zero_values] if v is not None}, key=_sort_key)
    if any(v is None for v in [*values, *zero_values]):
        keys.append(MISSING_GROUP)
    groups: dict[str, TraceTable] = {}
    arr = np.array([MISSING_GROUP if v is None else v for v in values], dtype=object)
    for key in keys:
        mask = arr == key if arr.size else np.zeros(0, dtype=bool)
        zero = [z for z, v in zip(table.report.zero_step, zero_values, strict=True)
                if (MISSING_GROUP if v is None else v) == key]
        sub = table.select_traces(mask)
        sub.report = replace(table.report, zero_step=zero, filters=[*table.report.filters, f"{name}={key}"])
        sub.report.n_traces = sub.n_traces
        groups[key] = sub
    return groups


def _sort_key(value: str) -> tuple[int, float, str]:
    try:
        return (0, float(value), value)
    except ValueError:
        return (1, 0.0, value)
