"""Acceptance (issue 20): the in-memory and partitioned (``--engine``) paths give the same answer on the same input.

Hypothesis (derandomized: every run is the same) builds a small canonical corpus, applies one mutation of the kinds
the attack report used — a value that is NaN, ±Infinity, negative, text, null, a 5,000-digit integer, nested
100,000 deep, not UTF-8; a line dropped, duplicated, cut or blanked; a step renumbered (a gap, a late start, a
repeat); a byte-order mark, CRLF line ends, a UTF-16 file — writes it as JSONL (and the same rows as Parquet when
Arrow can type them), and reads it both ways:

* in memory: ``TraceTable.read(path, on_error=...)`` (the canonical reader, as ``fit`` uses it);
* partitioned: ``count_partitioned(path, on_error=..., ...)`` with partitions small enough that traces land in
  different ones (as ``fit --engine local`` uses it).

Asserted, for ``on_error="raise"``: both raise the same error class at the same line (JSONL) or row (Parquet), or
neither raises; for ``on_error="skip"``: the same records read and skipped, the same traces kept and dropped, the
same reasons and the same transition counts. Every exception must be tracetochain's own.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracetochain as tt
from tracetochain.exceptions import EmptyTraceSetError, TraceToChainError
from tracetochain.partitioned import count_partitioned

STATES = ("plan", "search", "read", "edit", "test")
OUTCOMES = ("success", "failure", "censored", "invalid")
FIELDS = ("trace_id", "step_idx", "state", "outcome", "reward", "t_start", "tokens_in", "cost_usd", "text")
BAD_VALUES: list[Any] = [
    float("nan"), float("inf"), float("-inf"), -5, "abc", None, "", True, 1.5, [1, 2], {"a": 1}, 10**30,
    "maybe", "  SUCCESS ",
]


@st.composite
def corpora(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A valid corpus: 4–12 traces of 1–6 steps, contiguous, steps in order."""
    records = []
    for t in range(draw(st.integers(4, 12))):
        outcome = draw(st.sampled_from(OUTCOMES))
        reward = draw(st.one_of(st.none(), st.floats(0, 1)))
        for i in range(draw(st.integers(1, 6))):
            rec: dict[str, Any] = {"trace_id": f"t{t}", "step_idx": i, "state": draw(st.sampled_from(STATES)),
                                   "outcome": outcome, "t_start": 1.7e9 + 10 * t + i, "tokens_in": 10 * i,
                                   "cost_usd": 0.01 * i}
            if reward is not None:
                rec["reward"] = reward
            records.append(rec)
    return records


def _dumps(rec: dict[str, Any]) -> str:
    return json.dumps(rec)  # NaN/Infinity are written as the tokens other tools write


@st.composite
def mutated_jsonl(draw: st.DrawFn) -> tuple[bytes, list[dict[str, Any]] | None]:
    """(the JSONL bytes, the records when they are still a list of objects Arrow may type — for Parquet)."""
    records = draw(corpora())
    i = draw(st.integers(0, len(records) - 1))
    kind = draw(st.sampled_from(["value", "drop_field", "drop_line", "duplicate_line", "renumber", "raw_line",
                                 "file_encoding", "none"]))
    lines = [_dumps(r) for r in records]
    keep_records: list[dict[str, Any]] | None = records
    if kind == "value":
        field = draw(st.sampled_from(FIELDS))
        records[i] = {**records[i], field: draw(st.sampled_from(BAD_VALUES))}
        lines[i] = _dumps(records[i])
    elif kind == "drop_field":
        field = draw(st.sampled_from(FIELDS))
        records[i] = {k: v for k, v in records[i].items() if k != field}
        lines[i] = _dumps(records[i])
    elif kind == "drop_line":
        del lines[i], records[i]
    elif kind == "duplicate_line":
        lines.insert(i, lines[i])
        records.insert(i, dict(records[i]))
    elif kind == "renumber":
        records[i] = {**records[i], "step_idx": records[i]["step_idx"] + draw(st.sampled_from([-1, 1, 2, 7]))}
        lines[i] = _dumps(records[i])
    elif kind == "raw_line":
        lines[i] = draw(st.sampled_from([
            '{"trace_id": "t0", "step_idx": 0, "state": "\udcff"}', "not json", "[1, 2]", "", "   ",
            lines[i][: len(lines[i]) // 2],
            '{"trace_id": "x", "step_idx": 0, "state": "a", "outcome": "success", "text": ' + "[" * 100_000
            + "]" * 100_000 + "}",
            '{"trace_id": "x", "step_idx": ' + "7" * 5000 + ', "state": "a", "outcome": "success"}',
        ]))
        keep_records = None
    text = "\n".join(lines) + "\n"
    if kind == "raw_line" and "\udcff" in text:
        return text.replace('"\udcff"', '"X"').encode().replace(b'"X"', b'"\xff"'), None
    if kind == "file_encoding":
        how = draw(st.sampled_from(["bom", "crlf", "utf16"]))
        if how == "bom":
            return b"\xef\xbb\xbf" + text.encode(), keep_records
        if how == "crlf":
            return text.replace("\n", "\r\n").encode(), keep_records
        return text.encode("utf-16"), None
    return text.encode(), keep_records


def _outcome(fn: Any) -> tuple[str, Any]:
    """("error", (class, line, row, field)) or ("ok", value); anything but our own errors fails the test."""
    try:
        return "ok", fn()
    except EmptyTraceSetError:
        return "empty", None
    except TraceToChainError as exc:
        return "error", (type(exc).__name__, getattr(exc, "line", None), getattr(exc, "row", None),
                         getattr(exc, "field", None))


def _summary(report: tt.IngestReport) -> tuple[Any, ...]:
    return (report.n_records, report.n_records_skipped, report.n_traces, report.n_traces_skipped,
            dict(report.skipped_by_reason))


def _assert_same(path: Path, partitions: dict[str, int]) -> None:
    for on_error in ("raise", "skip"):
        memory = _outcome(lambda: tt.TraceTable.read(path, on_error=on_error))  # noqa: B023
        engine = _outcome(lambda: count_partitioned(path, on_error=on_error, **partitions))  # noqa: B023
        # No trace at all is "empty" either way; a corpus of invalid traces only is counted on both paths.
        if memory[0] == "ok" and memory[1].n_traces == 0:
            memory = ("empty", None)
        if engine[0] == "ok" and engine[1].report.n_traces == 0:
            engine = ("empty", None)
        assert memory[0] == engine[0], (on_error, memory, engine)
        if memory[0] == "error":
            assert memory[1] == engine[1], (on_error, memory[1], engine[1])
        elif memory[0] == "ok":
            table, counted = memory[1], engine[1]
            assert _summary(table.report) == _summary(counted.report), on_error
            whole = tt.count_transitions(table)
            names = list(whole.state_names)
            got = counted.counts
            order = [got.state_names.index(s) for s in names]
            assert got.transitions[order][:, order].tolist() == whole.transitions.tolist()
            assert got.exits_success[order].tolist() == whole.exits_success.tolist()
            assert got.exits_failure[order].tolist() == whole.exits_failure.tolist()
            assert got.initial[order].tolist() == whole.initial.tolist()
            assert got.n_traces == whole.n_traces


def _arrow_table(records: list[dict[str, Any]]) -> pa.Table | None:
    """The records as an Arrow table of plain columns, or None when Arrow cannot type a column on its own."""
    names: dict[str, None] = {}
    for r in records:
        names.update(dict.fromkeys(r))
    try:
        return pa.table({n: pa.array([r.get(n) for r in records]) for n in names})
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return None


@pytest.mark.slow
@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=mutated_jsonl())
def test_jsonl_and_parquet_read_the_same_in_memory_and_in_partitions(tmp_path_factory: pytest.TempPathFactory,
                                                                     case: tuple[bytes, Any]) -> None:
    data, records = case
    folder = tmp_path_factory.mktemp("parity")
    path = folder / "traces.jsonl"
    path.write_bytes(data)
    _assert_same(path, {"bytes_per_partition": 150})
    if records is not None and records:
        table = _arrow_table(records)
        if table is not None:
            pq_path = folder / "traces.parquet"
            pq.write_table(table, pq_path, row_group_size=3)
            _assert_same(pq_path, {"rows_per_partition": 4})


def test_parity_covers_the_attack_report_cases(tmp_path: Path) -> None:
    """The F1/F2/F26 reproductions themselves, beside the random ones."""
    good = "".join(json.dumps({"trace_id": f"t{i}", "step_idx": 0, "state": "a",
                               "outcome": "success" if i % 2 else "failure"}) + "\n" for i in range(10)).encode()
    cases = {
        "not_utf8": good + b'{"trace_id":"x","step_idx":0,"state":"\xff","outcome":"success"}\n',
        "deep": good + b'{"trace_id":"x","step_idx":0,"state":"a","outcome":"success","text":' + b"[" * 100_000
        + b"]" * 100_000 + b"}\n",
        "digits": good + b'{"trace_id":"x","step_idx":' + b"7" * 5000 + b',"state":"a","outcome":"success"}\n',
        "utf16": good.decode().encode("utf-16"),
        "nan_reward": good + json.dumps({"trace_id": "x", "step_idx": 0, "state": "a", "outcome": "success",
                                         "reward": math.nan}).encode() + b"\n",
        "gap": good + b"".join(json.dumps({"trace_id": "y", "step_idx": s, "state": "a", "outcome": "success"})
                               .encode() + b"\n" for s in (0, 7, 1000)),
        "late_start": good + json.dumps({"trace_id": "z", "step_idx": 3, "state": "a", "outcome": "failure"})
        .encode() + b"\n",
        "bom": b"\xef\xbb\xbf" + good,
    }
    for name, data in cases.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(data)
        _assert_same(path, {"bytes_per_partition": 100})
