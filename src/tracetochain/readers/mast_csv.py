"""MAST-style step-label CSV: the TraceToChain paper's native input (docs/formats.md).

Format
    One row per step, columns ``trace_id, step_idx, state, outcome``, where ``outcome`` labels the *step*:
    ``continue`` while the trace goes on, and the trace's terminal label (``success`` / ``failure``) on its last
    row. This is the long table the paper's artifact reads through its MAST CSV adapter (MAST: Cemri et al. 2025,
    "Why Do Multi-Agent LLM Systems Fail?"), with the usual synonyms (``solved``/``correct``/``pass``/``passed`` →
    success; ``failed``/``fail``/``error``/``timeout``/``incorrect`` → failure, following the paper's adapter — map
    ``timeout`` to ``censored`` with ``outcome_map`` if it means a budget stop for you). The canonical labels
    ``censored`` and ``invalid`` are accepted as terminal labels too. Optional columns: ``task_id``, ``trial``,
    ``tool_name`` (or ``tool``), ``error``, ``step_kind`` and any other canonical column (docs/formats.md); other
    columns travel along as text. Example (invented)::

        trace_id,task_id,trial,step_idx,state,tool_name,error,outcome
        t001,retail-17,0,0,plan,,false,continue
        t001,retail-17,0,1,tool_call,lookup_order,true,continue
        t001,retail-17,0,2,reflect,,false,failure

Options
    ``columns`` — a rename map ``{"your column": "canonical column"}`` (e.g. ``{"episode": "trace_id", "label":
    "outcome"}``), applied before anything else. ``outcome_map`` — extra or overriding labels
    ``{"your label": "success" | "failure" | "censored" | "invalid" | "continue"}`` (case-insensitive).

Field mapping
    * ``trace_id``, ``step_idx``, ``state`` (or ``step_kind``/``tool_name``, from which the default state is built)
      and the optional columns are copied; empty cells are missing values.
    * ``outcome`` (of the trace, on every step) — the label of the trace's last step (highest ``step_idx``). A trace
      whose last row is ``continue`` was cut off: ``censored``. Earlier rows must say ``continue`` (or repeat the
      terminal label); a terminal label before the last step is an error naming the line.

Errors name the file, line and column: an unknown label, a ``step_idx`` that is not a whole number ≥ 0, a row with
the wrong number of fields, a terminal label too early. With ``on_error="skip"`` the trace holding such a row is
dropped whole and counted (once) in the ingest report; a row without a ``trace_id`` is counted on its own.

Sniffing: a ``.csv`` whose header holds ``trace_id``, ``step_idx``, ``outcome`` and ``state`` (or ``step_kind``),
and whose first 64 KB use the label ``continue`` in the outcome column — plain canonical CSVs (trace outcome on
every row) go to the canonical reader.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tracetochain.exceptions import TraceValidationError
from tracetochain.readers._common import (
    Refusal,
    Sniffed,
    TraceBuilder,
    head_text,
    keys_text,
    wrong_suffix,
)
from tracetochain.traces import Problem, TraceTable
from tracetochain.traces.shared import OUTCOME_VALUES

__all__ = ["MAST_CSV", "OUTCOME_SYNONYMS", "MastCsvReader"]

#: Step labels understood by default (lower-case) and what they mean.
OUTCOME_SYNONYMS: dict[str, str] = {
    "continue": "continue",
    "success": "success", "solved": "success", "correct": "success", "pass": "success", "passed": "success",
    "failure": "failure", "failed": "failure", "fail": "failure", "error": "failure", "timeout": "failure",
    "incorrect": "failure",
    "censored": "censored", "invalid": "invalid",
}
_TARGETS = (*OUTCOME_VALUES, "continue")
_REQUIRED = ("trace_id", "step_idx", "outcome")


def _norm(name: str) -> str:
    return name.strip().lstrip("\ufeff").strip()


class MastCsvReader:
    name = "mast-csv"
    description = "MAST-style step-label CSV: trace_id, step_idx, state, outcome (continue … success|failure)"
    needs = "nothing else"

    def sniff(self, path: Path) -> Sniffed:
        path = Path(path)
        if not path.is_file() or path.suffix.lower() != ".csv":
            return wrong_suffix(path, (".csv",))
        head = head_text(path)
        lines = head.splitlines()
        if path.stat().st_size > 65_536 and len(lines) > 1:
            lines = lines[:-1]  # the last line may be cut
        try:
            rows = list(csv.reader(io.StringIO("\n".join(lines))))
        except csv.Error:
            return Refusal("not readable as CSV")
        if not rows:
            return Refusal("empty")
        header = [_norm(h) for h in rows[0]]
        if not set(_REQUIRED) <= set(header) or not ({"state", "step_kind"} & set(header)):
            return Refusal(f"the header lacks {', '.join(_REQUIRED)} and state; it has {keys_text(header)}")
        col = header.index("outcome")
        if any(len(r) > col and r[col].strip().lower() == "continue" for r in rows[1:]):
            return True
        return Refusal("no step is labelled 'continue' (a canonical CSV repeats the outcome on every step)")

    def read(self, path: Path, *, on_error: str = "raise", columns: Mapping[str, str] | None = None,
             outcome_map: Mapping[str, str] | None = None, **options: Any) -> TraceTable:
        """Read a step-label CSV (options: ``columns``, ``outcome_map``; see the module docstring)."""
        if options:
            raise TypeError(f"the mast-csv reader takes columns= and outcome_map=, got {sorted(options)}")
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
        rename = dict(columns or {})
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in rename.items()):
            raise TypeError("columns must map column names (text) to canonical column names (text)")
        labels = dict(OUTCOME_SYNONYMS)
        for label, target in (outcome_map or {}).items():
            if not isinstance(label, str) or target not in _TARGETS:
                raise ValueError(f"outcome_map must map labels to one of {', '.join(_TARGETS)}; got "
                                 f"{label!r}: {target!r}")
            labels[label.strip().lower()] = target
        path = Path(path)
        if not path.is_file():
            raise TraceValidationError("no such file", source=str(path))
        builder = TraceBuilder(source=str(path), format=self.name, on_error=on_error, location_kind="line")

        try:
            with path.open("r", encoding="utf-8", newline="") as fh:
                reader = csv.reader(fh)
                header_row = next(reader, None)
                if header_row is None:
                    raise TraceValidationError("the file is empty", source=str(path),
                                               hint="the first line must name the columns: "
                                                    "trace_id,step_idx,state,outcome")
                header = [rename.get(_norm(h), _norm(h)) for h in header_row]
                if "tool" in header and "tool_name" not in header:
                    header[header.index("tool")] = "tool_name"
                dupes = sorted({h for h in header if header.count(h) > 1})
                if dupes:
                    raise TraceValidationError(f"column {dupes[0]!r} appears twice", source=str(path), line=1,
                                               field=dupes[0], hint="give every column its own name")
                for name in _REQUIRED:
                    if name not in header:
                        raise TraceValidationError(
                            f"required column {name!r} is missing", source=str(path), line=1, field=name,
                            hint="the columns are trace_id,step_idx,state,outcome (rename yours with columns=)")
                if "state" not in header and "step_kind" not in header:
                    raise TraceValidationError(
                        "neither 'state' nor 'step_kind' is a column", source=str(path), line=1, field="state",
                        hint="add a state label per step (rename yours with columns=)")
                rows: list[tuple[int, dict[str, str | None], str | None]] = []
                tid_col = header.index("trace_id")
                last_line = reader.line_num
                for row in reader:
                    line, last_line = last_line + 1, reader.line_num  # a quoted field may span lines: its first
                    if not any(cell.strip() for cell in row):
                        continue
                    if len(row) != len(header):
                        # keep the row (as broken) so that its trace, if it can be told, is dropped whole
                        rows.append((line, {"trace_id": row[tid_col] if tid_col < len(row) else None},
                                     f"the row has {len(row)} fields but the header has {len(header)}"))
                        continue
                    rows.append((line, {h: (c if c.strip() != "" else None)
                                        for h, c in zip(header, row, strict=True)}, None))
        except UnicodeDecodeError as exc:
            raise TraceValidationError(f"not UTF-8 text ({exc.reason})", source=str(path)) from None
        except csv.Error as exc:
            raise TraceValidationError(f"cannot parse CSV ({exc})", source=str(path)) from None

        label_hint = (f"use continue, success or failure (or {', '.join(sorted(set(labels) - {'continue'}))}), "
                      "or map your labels with outcome_map=")
        # problems: (line, field, message, hint, trace id or None); in raise mode the first one in the file is raised
        problems: list[tuple[int, str | None, str, str, str | None]] = []
        traces: dict[str, list[tuple[int, int, str, dict[str, str | None]]]] = {}
        for line, rec, broken_row in rows:
            tid = (rec.get("trace_id") or "").strip()
            if broken_row is not None:
                problems.append((line, None, broken_row, "quote fields that contain commas", tid or None))
                continue
            if not tid:
                problems.append((line, "trace_id", "trace_id is empty", "every step needs the id of its trace", None))
                continue
            raw_step = (rec.get("step_idx") or "").strip()
            try:
                step = int(raw_step)
            except ValueError:
                step = -1
            if step < 0:
                problems.append((line, "step_idx", f"step_idx must be a whole number ≥ 0, got "
                                 f"{rec.get('step_idx')!r}", "number the steps of each trace 0, 1, 2, …", tid))
                continue
            mapped = labels.get((rec.get("outcome") or "").strip().lower())
            if mapped is None:
                problems.append((line, "outcome", f"unknown outcome label {rec.get('outcome')!r}", label_hint, tid))
                continue
            traces.setdefault(tid, []).append((line, step, mapped, rec))

        broken_traces = {p[4] for p in problems if p[4] is not None}
        outcomes: dict[str, str] = {}
        for tid, entries in traces.items():
            if tid in broken_traces:
                continue
            entries.sort(key=lambda e: e[1])
            terminal = entries[-1][2]
            early = next((e for e in entries[:-1] if e[2] not in ("continue", terminal)), None)
            if early is not None:
                problems.append((early[0], "outcome", f"terminal outcome {early[3].get('outcome')!r} on step "
                                 f"{early[1]}, before the last step {entries[-1][1]}",
                                 "label every step but the last 'continue'; the last step carries the trace's "
                                 "outcome", tid))
                continue
            outcomes[tid] = "censored" if terminal == "continue" else terminal

        if problems and on_error == "raise":
            first = min(problems, key=lambda p: p[0])
            raise TraceValidationError(first[2] + (f" (trace {first[4]!r})" if first[4] else ""), source=str(path),
                                       line=first[0], field=first[1], hint=first[3])
        counted: set[str] = set()
        for line_no, fld, message, _hint, bad_tid in sorted(problems, key=lambda p: p[0]):
            if bad_tid is None:
                builder.problems.append(Problem(line_no, fld, message))  # a row of no trace: nothing else to drop
            elif bad_tid not in counted:
                counted.add(bad_tid)
                builder.problems.append(Problem(line_no, fld, f"{message} (trace {bad_tid!r})", whole_trace=True))
        for tid, entries in traces.items():
            if tid not in outcomes:
                continue
            for line, step, _label, rec in entries:
                record: dict[str, Any] = {"trace_id": tid, "step_idx": step, "outcome": outcomes[tid]}
                record.update({k: v for k, v in rec.items() if k not in record})
                builder.add_step(record, line)
        return builder.build()


MAST_CSV = MastCsvReader()
