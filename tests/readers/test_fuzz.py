"""Robustness of every reader (issue 6 acceptance): truncated, mutated and random inputs never crash a reader.

Seeds are every fixture under ``tests/data/readers/`` (single files and the folder layouts the readers expect:
SWE-agent and mini-swe-agent runs, a Langfuse export folder, a τ²-bench results folder, a folder of inspect_ai
logs), the bundled demo table (as JSONL, CSV and Parquet) and small invented τ-bench, τ²-bench, Reflexion, token
corpus and inspect_ai ``.eval`` inputs. Hypothesis (derandomized, so every run is the same) applies one to three
mutations — structural JSON edits (a value replaced by random JSON, a key dropped or added, an element duplicated),
random lines or documents, CSV cell edits, zip member edits, truncation, byte flips and insertions, deep nesting,
over-long integers — and the result, written with the right extension and folder layout, is given to EVERY
registered reader (``reader.read`` with ``on_error`` "raise" and "skip", and ``reader.sniff``) and to
``read_traces`` with sniffing.

Asserted: the only exceptions that escape are tracetochain's own (:class:`TraceToChainError`; no options are
passed, so not even ``TypeError``); every message names an input file; a record-level problem names its line or
row (only the whole-file problems listed in ``FILE_LEVEL`` may omit it); a table that is returned is consistent
with its ingest report. ``test_found_by_fuzz`` pins each bug the fuzz found, so each stays fixed even if the
exploration changes. The bigger exploration is marked slow.
"""

from __future__ import annotations

import csv
import io
import json
import re
import tempfile
import traceback
import warnings
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracetochain as tt
from tracetochain.exceptions import TraceToChainError, TraceValidationError
from tracetochain.readers import Refusal, available_readers, read_traces

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "readers"
DEMO = tt.datasets.example_path("tau_airline")
_DATA_SUFFIXES = (".json", ".jsonl", ".ndjson", ".csv", ".traj", ".txt", ".eval", ".parquet")

#: Errors about the whole input, which rightly name no line or row (matched against the message).
FILE_LEVEL = [re.compile(p) for p in (
    r"could not tell which trace format",
    r"no reader recognised this file",
    r"no such file",
    r"unknown file extension",
    r"not (valid JSON|UTF-8 text|a readable zip archive)",  # when the position is unknown (a cut-off document)
    r"the file is empty",
    r"required (field|column) .* missing",
    r"neither 'state' nor 'step_kind'",
    r"records have neither",
    r"column .* appears twice",
    r"cannot (parse CSV|read Parquet)",
    r"expected (a JSON list|a JSON object|a τ-bench|a τ²-bench|an? (inspect_ai log|trace object)|a list of "
    r"simulations|a list of samples)",
    r"an inspect_ai log is a JSON object",
    r"a \.json trace file must hold a list",
    r"no (trajectory files|agent log found|simulations|Langfuse export files|inspect_ai log|verdict file)",
    r"folder (holds no|has no)",
    r"the otlp reader reads one file",
    r"zip archive holds no inspect_ai log",
    r"archive member .* (unsafe name|corrupt|compression method|cap)",
    r"cannot read archive member",
    r"the log holds no samples",
    r"the log has several scorers|no sample has a score from scorer",
    r"the traces carry several trace-level scores",
    r"two trajectories for instance|appears in \d+ run folders",
    r"the verdict file lists none",
    r"file is larger than",
    r"JSON nested too deeply",
    r"expected an? [\w-]+ trajectory, found",
)]


# ================================================================================================ seeds
@dataclass(frozen=True)
class Seed:
    """An input layout: files (relative path → bytes), the paths given to the readers, the files to mutate."""

    name: str
    files: tuple[tuple[str, bytes], ...]
    entries: tuple[str, ...]
    mutable: tuple[str, ...]


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, indent=1, ensure_ascii=False).encode("utf-8")


def _tau_episode(task: int, trial: int, reward: float) -> dict[str, Any]:
    return {"task_id": task, "trial": trial, "reward": reward, "info": {"reward_info": {"reward": reward}},
            "traj": [{"role": "system", "content": "policy"}, {"role": "user", "content": "hi"},
                     {"role": "assistant", "content": None, "tool_calls": [
                         {"id": "c1", "type": "function", "function": {"name": "get_user", "arguments": "{}"}},
                         {"id": "c2", "type": "function", "function": {"name": "find", "arguments": "{\"q\": 1}"}}]},
                     {"role": "tool", "tool_call_id": "c1", "name": "get_user", "content": "Error: no user"},
                     {"role": "tool", "tool_call_id": "c2", "name": "find", "content": "ok"},
                     {"role": "assistant", "content": "Done."}]}


def _tau2_simulation(sid: str, task: str, reason: str, reward: float) -> dict[str, Any]:
    return {"id": sid, "task_id": task, "trial": 0, "termination_reason": reason,
            "reward_info": {"reward": reward},
            "messages": [
                {"role": "assistant", "content": "Hi", "turn_idx": 0, "timestamp": "2025-06-01T10:00:00"},
                {"role": "user", "content": "cancel", "turn_idx": 1},
                {"role": "assistant", "content": None, "turn_idx": 2, "usage": {"prompt_tokens": 5}, "tool_calls": [
                    {"id": "a", "name": "get_reservation", "arguments": {"id": "R1"}, "requestor": "assistant"}]},
                {"role": "tool", "id": "a", "content": "not found", "requestor": "assistant", "error": True,
                 "turn_idx": 3},
                {"role": "assistant", "content": "Done.", "turn_idx": 4, "cost": 0.01}]}


_TAU2_INFO = {"num_trials": 1, "max_steps": 30, "user_info": {"llm": "u"}, "agent_info": {"llm": "a"}}

_REFLEXION = """BEGIN TRIAL 1
Trial summary: Correct: 1, Incorrect: 1, Halted: 1
------------- BEGIN CORRECT AGENTS -------------

Question: Which band released the album first?
Thought 1: I need to search both albums.
Action 1: Search[Album A]
Observation 1: Album A is the debut album of Band X.
Action 2: Finish[Band X]
Observation 2: Answer is CORRECT
Correct answer: Band X

------------- BEGIN INCORRECT AGENTS -----------

Question: How many stations does the line have?
Thought 1: Search the line.
Action 1: Serach[The Line]
Observation 1: Invalid Action. Valid Actions are Lookup[<topic>] Search[<topic>] and Finish[<answer>].
Action 2: Finish[7]
Observation 2: Answer is INCORRECT
Correct answer: 9

------------- BEGIN HALTED AGENTS --------------

Question: Who wrote the song?
Thought 1: Search the song.
Action 1: Search[The Song (song)]
Observation 1: Could not find [The Song (song)]. Similar: []
Correct answer: Somebody
"""


def _eval_archive(log: dict[str, Any], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    """An inspect_ai ``.eval`` zip built from a ``.json`` log: header.json plus one member per sample."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as zf:
        zf.writestr("header.json", json.dumps({k: v for k, v in log.items() if k != "samples"}))
        for s in log.get("samples") or []:
            zf.writestr(f"samples/{s['id']}_epoch_{s['epoch']}.json", json.dumps(s))
        zf.writestr("_journal/start.json", json.dumps({"version": 2}))
    return buf.getvalue()


def _folder(root: Path, prefix: str = "") -> tuple[tuple[str, bytes], ...]:
    return tuple((prefix + p.relative_to(root).as_posix(), p.read_bytes()) for p in sorted(root.rglob("*"))
                 if p.is_file() and p.name != "README.md")


def _is_data(name: str) -> bool:
    return name.endswith(_DATA_SUFFIXES)


def _build_seeds() -> list[Seed]:
    seeds: list[Seed] = []
    # every fixture file on its own
    for p in sorted(FIXTURES.rglob("*")):
        if p.is_file() and _is_data(p.name):
            seeds.append(Seed(p.relative_to(FIXTURES).as_posix(), ((p.name, p.read_bytes()),), (p.name,), (p.name,)))
    # the folder layouts
    for sub, entries in (("swe_agent/sweagent_run", (".", "demo__pkg-101/demo__pkg-101.traj")),
                         ("swe_agent/mini_run", (".", "trajs")),
                         ("langfuse/export", (".",))):
        files = _folder(FIXTURES / sub)
        seeds.append(Seed(sub + "/", files, entries, tuple(n for n, _ in files if _is_data(n))))
    toy = json.loads((FIXTURES / "inspect_ai" / "toy_refunds.json").read_text(encoding="utf-8"))
    small = {**toy, "samples": toy["samples"][:3]}
    seeds.append(Seed("invented/toy.eval", (("toy.eval", _eval_archive(small)),), ("toy.eval",), ("toy.eval",)))
    seeds.append(Seed("invented/inspect_logs/", (("a.json", _dumps(small)), ("b.eval", _eval_archive(small))),
                      (".",), ("a.json", "b.eval")))
    # invented inputs for formats without a fixture file
    tau = [_tau_episode(0, 0, 1.0), _tau_episode(0, 1, 0.0), _tau_episode(1, 0, 1.0)]
    seeds.append(Seed("invented/tau.json", (("tau.json", _dumps(tau)),), ("tau.json",), ("tau.json",)))
    sims = [_tau2_simulation("s1", "1", "user_stop", 1.0), _tau2_simulation("s2", "2", "max_steps", 0.0)]
    results = {"timestamp": "t", "info": _TAU2_INFO, "tasks": [], "simulations": sims}
    seeds.append(Seed("invented/tau2.json", (("tau2.json", _dumps(results)),), ("tau2.json",), ("tau2.json",)))
    tau2_dir = (("results.json", _dumps({"timestamp": "t", "info": _TAU2_INFO, "tasks": []})),
                ("simulations/s1.json", _dumps(sims[0])), ("simulations/s2.json", _dumps(sims[1])))
    seeds.append(Seed("invented/tau2_run/", tau2_dir, (".", "results.json"), tuple(n for n, _ in tau2_dir)))
    mini = {"info": {"exit_status": "Submitted", "mini_version": "2.0.0"}, "instance_id": "demo__tc-1",
            "trajectory_format": "mini-swe-agent-1.1",
            "messages": [
                {"role": "system", "content": "You can run shell commands."},
                {"role": "user", "content": "Fix the bug."},
                {"role": "assistant", "content": "Look first.", "extra": {"timestamp": 1700000000.0, "cost": 0.01},
                 "tool_calls": [{"id": "call_1", "type": "function",
                                 "function": {"name": "bash", "arguments": "{\"command\": \"ls -la\"}"}},
                                {"id": "call_2", "type": "function",
                                 "function": {"name": "bash", "arguments": "{\"command\": \"grep -rn x .\"}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "a b", "extra": {"returncode": 0}},
                {"role": "tool", "tool_call_id": "call_2", "content": "", "extra": {"returncode": 1}},
                {"role": "assistant", "content": "Submit.", "tool_calls": [
                    {"id": "call_3", "function": {"name": "bash", "arguments": {"command": "echo "
                                                                                "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}}}]},
                {"role": "tool", "tool_call_id": "call_3", "content": "diff"}]}
    mini_run = (("results_summary.json", _dumps({"instances": [{"instance_id": "demo__tc-1", "resolved": True}]})),
                ("demo__tc-1/demo__tc-1.traj.json", _dumps(mini)))
    seeds.append(Seed("invented/mini_tool_calls/", mini_run, (".", "demo__tc-1/demo__tc-1.traj.json"),
                      ("demo__tc-1/demo__tc-1.traj.json",)))
    seeds.append(Seed("invented/react.txt", (("react.txt", _REFLEXION.encode()),), ("react.txt",), ("react.txt",)))
    corpus = {"demo__a-1": {"toks": ["cat", "python", "submit"], "resolved": True, "label": "S"},
              "demo__a-2": {"toks": ["grep", "none"], "resolved": False, "label": "F"}}
    seeds.append(Seed("invented/corpus.json", (("corpus.json", _dumps(corpus)),), ("corpus.json",),
                      ("corpus.json",)))
    # the bundled demo, as the canonical JSONL, CSV and Parquet
    head = b"".join(DEMO.read_bytes().splitlines(keepends=True)[:40])
    seeds.append(Seed("demo.jsonl", (("demo.jsonl", head),), ("demo.jsonl",), ("demo.jsonl",)))
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "demo.jsonl"
        src.write_bytes(head)
        table = tt.TraceTable.read(src)
        for name in ("demo.csv", "demo.parquet"):
            table.write(Path(tmp) / name)
            seeds.append(Seed(name, ((name, (Path(tmp) / name).read_bytes()),), (name,), (name,)))
    return seeds


SEEDS = _build_seeds()


def _keys(obj: Any, out: set[str]) -> None:
    if isinstance(obj, dict):
        out.update(k for k in obj if isinstance(k, str))
        for v in obj.values():
            _keys(v, out)
    elif isinstance(obj, list):
        for v in obj:
            _keys(v, out)


def _known_keys() -> list[str]:
    out: set[str] = set()
    for seed in SEEDS:
        for name, data in seed.files:
            for text in ([data] if not name.endswith((".jsonl", ".ndjson")) else data.splitlines()):
                try:
                    _keys(json.loads(text), out)
                except (ValueError, UnicodeDecodeError):
                    continue
    return sorted(out)


KEYS = _known_keys()

# ================================================================================================ strategies
_STRINGS = [
    "", " ", "0", "1", "-1", "1.5", "NaN", "true", "false", "null", "success", "failure", "continue", "censored",
    "invalid", "solved", "C", "I", "P", "N", "yes", "assistant", "user", "tool", "system", "function", "GENERATION",
    "TOOL", "SPAN", "AGENT", "EVALUATOR", "ERROR", "STATUS_CODE_ERROR", "execute_tool", "chat", "invoke_agent",
    "LLM", "0x0", "0x5b8efff798038103d269b633813fc60c", "00000000000000000000000000000000",
    "AAAAAAAAAAAAAAAAAAAAAA==", "2026-01-01T00:00:00Z", "2026-13-45T99:00:00", "1767000000000000000",
    "1.767e18", "attachment://abc", "tc://x", "Error: boom", "LimitsExceeded", "submitted (exit_cost)", "RetryError",
    "max_steps", "user_stop", "infrastructure_error", "```bash\nls\n```", "<returncode>1</returncode>",
    "The last command timed out", "Search[x]", "\x00", "\ud800", "\ufeff", "é" * 3, "a" * 300,
    "../../etc/passwd", "samples/x_epoch_1.json",
]
_SPECIAL_NUMBERS = [0, -1, 1, 2**31, 2**53 + 1, 2**63, -(2**63) - 1, 2**64, 10**30, 10**400, 1e308, -0.0,
                    float("inf"), float("-inf"), float("nan"), 0.5, 1 - 1e-7, 1e-300]
SCALARS = (st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
           | st.sampled_from(_SPECIAL_NUMBERS) | st.floats(allow_nan=True, allow_infinity=True)
           | st.text(max_size=12) | st.sampled_from(_STRINGS))
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=6), inner, max_size=4),
    max_leaves=10,
)
_CELLS = ["", " ", "continue", "success", "failure", "solved", "timeout", "-1", "0", "1.5", "nan", "1e400",
          "99999999999999999999999", "true", "maybe", "2", "x,y", 'a"b', "line\nbreak", "\ufeff", "trace_id",
          "step_idx", "state", "outcome", "é"]
_BYTES = [b"\x00", b"\xff", b'"', b"{", b"}", b"[", b"]", b",", b"\n", b"\\", b":", b"0", b"\r", b" ", b"\x80"]
_INSERTS = [b'"', b"\n", b"\xef\xbb\xbf", b"\xff\xfe", b"}", b"{", b"]", b",", b"\\u", b"NaN", b"1e999", b"\x00",
            b"\r\n", b"\n\n", b'{"a": 1}\n', b"[1, 2]\n", b"null\n", b'"text"\n', b"-", b"\xc3"]
_ZIP_NAMES = ["../evil.json", "/abs.json", "samples/../x.json", "samples/a/b.json", "header.json", "C:x.json",
              "samples/", "start.json", "samples/x_epoch_1.json", "_journal/start.json"]


# ================================================================================================ mutations
def _paths(doc: Any, limit: int = 4000) -> list[tuple[Any, ...]]:
    """Paths of every node of a JSON document (the root is ``()``), breadth first, at most ``limit``."""
    out: list[tuple[Any, ...]] = [()]
    i = 0
    while i < len(out) and len(out) < limit:
        node = _get(doc, out[i])
        if isinstance(node, dict):
            out.extend(out[i] + (k,) for k in node)
        elif isinstance(node, list):
            out.extend(out[i] + (j,) for j in range(len(node)))
        i += 1
    return out[:limit]


def _json_safe(value: Any) -> bool:
    try:
        json.dumps(value)
    except ValueError:
        return False
    return True


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        doc = doc[p]
    return doc


def _mutate_doc(doc: Any, data: st.DataObject) -> Any:
    """One structural edit of a parsed JSON document."""
    paths = _paths(doc)
    op = data.draw(st.sampled_from(["replace", "replace", "every_key", "every_key", "delete", "add_key",
                                    "duplicate", "wrap", "stringify", "empty"]), label="doc op")
    if op == "every_key":  # one field, wherever it occurs, gets the same odd value (reaches deep fields often)
        names = sorted({p[-1] for p in paths if p and isinstance(p[-1], str)})
        if names:
            key = data.draw(st.sampled_from(names), label="field")
            value = data.draw(JSON_VALUES, label="value")
            for p in sorted(paths, key=len, reverse=True):  # deepest first: no path runs through a new value
                if p and p[-1] == key:
                    _get(doc, p[:-1])[key] = json.loads(json.dumps(value)) if _json_safe(value) else value
            return doc
        op = "replace"
    path = paths[data.draw(st.integers(0, len(paths) - 1), label="node")]
    node = _get(doc, path)
    if op == "replace" or (op in ("delete", "duplicate") and not path) or (op == "add_key"
                                                                          and not isinstance(node, dict)):
        new: Any = data.draw(JSON_VALUES, label="value")
    elif op == "delete":
        parent = _get(doc, path[:-1])
        del parent[path[-1]]
        return doc
    elif op == "add_key":
        node[data.draw(st.sampled_from(KEYS), label="key")] = data.draw(JSON_VALUES, label="value")
        return doc
    elif op == "duplicate":
        parent = _get(doc, path[:-1])
        if isinstance(parent, list):
            parent.insert(path[-1], json.loads(json.dumps(node)))
            return doc
        new = node
    elif op == "wrap":
        new = [node]
    elif op == "stringify":
        new = json.dumps(node)
    else:
        new = {} if isinstance(node, dict) else [] if isinstance(node, list) else None
    if not path:
        return new
    _get(doc, path[:-1])[path[-1]] = new
    return doc


def _json_bytes(doc: Any, data: st.DataObject, *, one_line: bool) -> bytes:
    indent = None if one_line else data.draw(st.sampled_from([None, 1, 2]), label="indent")
    try:
        return json.dumps(doc, indent=indent, ensure_ascii=data.draw(st.booleans(), label="ascii")).encode(
            "utf-8", errors="surrogatepass")
    except (ValueError, RecursionError):  # an integer too long to print, or nesting too deep to print
        return b"null"


def _lines_op(raw: bytes, data: st.DataObject, pool: list[bytes]) -> bytes:
    lines = raw.splitlines(keepends=True) or [b""]
    op = data.draw(st.sampled_from(["delete", "duplicate", "swap", "blank", "insert", "crlf", "bom", "reverse"]),
                   label="lines op")
    i = data.draw(st.integers(0, len(lines) - 1), label="line")
    if op == "delete":
        del lines[i]
    elif op == "duplicate":
        lines.insert(i, lines[i])
    elif op == "swap":
        j = data.draw(st.integers(0, len(lines) - 1), label="other line")
        lines[i], lines[j] = lines[j], lines[i]
    elif op == "blank":
        lines.insert(i, data.draw(st.sampled_from([b"\n", b"   \n", b"\r\n", b"\t\n"]), label="blank"))
    elif op == "insert":
        lines.insert(i, data.draw(st.sampled_from(pool), label="foreign line"))
    elif op == "crlf":
        return raw.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
    elif op == "bom":
        return b"\xef\xbb\xbf" + raw
    else:
        lines.reverse()
    return b"".join(lines)


def _bytes_op(raw: bytes, data: st.DataObject) -> bytes:
    op = data.draw(st.sampled_from(["truncate", "flip", "insert", "delete", "deep", "bigint"]), label="bytes op")
    n = len(raw)
    if op == "truncate":
        return raw[: data.draw(st.integers(0, max(0, n - 1)), label="cut")]
    if op == "flip" and n:
        out = bytearray(raw)
        for _ in range(data.draw(st.integers(1, 8), label="flips")):
            pos = data.draw(st.integers(0, n - 1), label="pos")
            out[pos] = data.draw(st.sampled_from(_BYTES) | st.binary(min_size=1, max_size=1), label="byte")[0]
        return bytes(out)
    if op == "delete" and n:
        a = data.draw(st.integers(0, n - 1), label="from")
        return raw[:a] + raw[a + data.draw(st.integers(1, 64), label="len"):]
    if op == "deep":
        depth = data.draw(st.sampled_from([200, 5_000, 100_000]), label="depth")
        nest = b"[" * depth + b"]" * depth
        if data.draw(st.booleans(), label="whole"):
            return nest + b"\n"
        pos = raw.find(b": ")
        return raw[: pos + 2] + nest + raw[pos + 3:] if pos >= 0 else nest + b"\n" + raw
    if op == "bigint":
        digits = [m.start() for m in re.finditer(rb"(?<![0-9.])[0-9]", raw)]
        big = b"9" * data.draw(st.sampled_from([25, 400, 5_000]), label="digits")
        if not digits:
            return big + b"\n" + raw
        pos = digits[data.draw(st.integers(0, len(digits) - 1), label="number")]
        return raw[:pos] + big + raw[pos:]
    pos = data.draw(st.integers(0, n), label="pos")
    return raw[:pos] + data.draw(st.sampled_from(_INSERTS), label="insert") + raw[pos:]


def _csv_op(raw: bytes, data: st.DataObject) -> bytes:
    try:
        rows = list(csv.reader(io.StringIO(raw.decode("utf-8"), newline="")))
    except (UnicodeDecodeError, csv.Error):
        return _bytes_op(raw, data)
    if not rows:
        rows = [[]]
    op = data.draw(st.sampled_from(["cell", "cell", "cell", "drop_column", "extra_cell", "drop_row", "dup_row",
                                    "header"]), label="csv op")
    r = data.draw(st.integers(0, len(rows) - 1), label="row")
    row = rows[r]
    if op in ("cell", "header") and row:
        if op == "header":
            r, row = 0, rows[0]
        c = data.draw(st.integers(0, len(row) - 1), label="column")
        row[c] = data.draw(st.sampled_from(_CELLS) | st.text(max_size=8), label="cell")
    elif op == "drop_column" and row:
        c = data.draw(st.integers(0, len(row) - 1), label="column")
        for each in rows if data.draw(st.booleans(), label="all rows") else [row]:
            if c < len(each):
                del each[c]
    elif op == "extra_cell":
        row.append(data.draw(st.sampled_from(_CELLS), label="cell"))
    elif op == "drop_row":
        del rows[r]
    else:
        rows.insert(r, list(row))
    out = io.StringIO(newline="")
    csv.writer(out, lineterminator=data.draw(st.sampled_from(["\n", "\r\n"]), label="eol")).writerows(rows)
    return out.getvalue().encode("utf-8", errors="surrogatepass")


def _zip_op(raw: bytes, data: st.DataObject) -> bytes:
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as zf:
            members = [(i.filename, zf.read(i)) for i in zf.infolist()]
    except Exception:  # an archive an earlier mutation broke (bad CRC, bad deflate data, …): mutate its bytes
        return _bytes_op(raw, data)
    op = data.draw(st.sampled_from(["member_json", "member_json", "member_bytes", "rename", "add", "remove",
                                    "archive_bytes"]), label="zip op")
    if op == "archive_bytes" or not members:
        return _bytes_op(raw, data)
    k = data.draw(st.integers(0, len(members) - 1), label="member")
    name, body = members[k]
    if op == "member_json":
        try:
            doc = json.loads(body)
        except (ValueError, RecursionError):
            members[k] = (name, _bytes_op(body, data))
        else:
            members[k] = (name, _json_bytes(_mutate_doc(doc, data), data, one_line=True))
    elif op == "member_bytes":
        members[k] = (name, _bytes_op(body, data))
    elif op == "rename":
        members[k] = (data.draw(st.sampled_from(_ZIP_NAMES), label="name"), body)
    elif op == "add":
        members.append((data.draw(st.sampled_from(_ZIP_NAMES), label="name"),
                        _json_bytes(data.draw(JSON_VALUES, label="doc"), data, one_line=True)))
    else:
        del members[k]
    method = data.draw(st.sampled_from([zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED, zipfile.ZIP_BZIP2,
                                        zipfile.ZIP_LZMA]), label="compression")
    buf = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buf, "w", method) as zf:
        warnings.simplefilter("ignore", UserWarning)  # a repeated member name is one of the mutations
        for n, b in members:
            zf.writestr(n, b)
    return buf.getvalue()


_LINE_POOL = [line + b"\n" for seed in SEEDS for _, d in seed.files[:1] for line in d.splitlines()[:3]] + [
    b"not json at all\n", b"{}\n", b"[]\n", b"42\n", b'"str"\n', b"{\n", b"}\n", b"Question: why?\n",
    b"Action 1: Finish[x]\n", b"BEGIN TRIAL 2\n", b"Observation 9: Answer is CORRECT\n", b"Correct answer: x\n",
    b"------------- BEGIN HALTED AGENTS -------------\n", b"trace_id,step_idx,state,outcome\n", b"a,0,s,continue\n"]


def mutate(name: str, raw: bytes, data: st.DataObject) -> bytes:
    """One mutation suited to the file's kind (by name): JSON / JSON Lines / CSV / text / zip / Parquet."""
    lower = name.lower()
    if lower.endswith(".eval"):
        return _zip_op(raw, data)
    if lower.endswith(".parquet"):
        return _bytes_op(raw, data)
    if lower.endswith(".csv"):
        kind = data.draw(st.sampled_from(["csv", "csv", "lines", "bytes"]), label="kind")
        return _csv_op(raw, data) if kind == "csv" else _lines_op(raw, data, _LINE_POOL) if kind == "lines" \
            else _bytes_op(raw, data)
    if lower.endswith((".txt", ".log")):
        kind = data.draw(st.sampled_from(["lines", "lines", "bytes"]), label="kind")
        return _lines_op(raw, data, _LINE_POOL) if kind == "lines" else _bytes_op(raw, data)
    line_based = lower.endswith((".jsonl", ".ndjson"))
    kind = data.draw(st.sampled_from(["doc", "doc", "doc", "random", "lines", "bytes"]), label="kind")
    if kind == "bytes":
        return _bytes_op(raw, data)
    if kind == "lines":
        return _lines_op(raw, data, _LINE_POOL)
    if line_based:
        lines = raw.splitlines(keepends=True) or [b"{}\n"]
        i = data.draw(st.integers(0, len(lines) - 1), label="line")
        if kind == "random":
            new = _json_bytes(data.draw(JSON_VALUES, label="doc"), data, one_line=True)
        else:
            try:
                doc = json.loads(lines[i])
            except (ValueError, RecursionError):
                return _bytes_op(raw, data)
            new = _json_bytes(_mutate_doc(doc, data), data, one_line=True)
        lines[i] = new + b"\n"
        return b"".join(lines)
    if kind == "random":
        return _json_bytes(data.draw(JSON_VALUES, label="doc"), data, one_line=False)
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        return _bytes_op(raw, data)
    return _json_bytes(_mutate_doc(doc, data), data, one_line=False)


# ================================================================================================ the check
def _calls(path: Path) -> Iterator[tuple[str, Callable[[], Any]]]:
    for name, reader in available_readers().items():
        yield f"{name}.sniff", lambda reader=reader: reader.sniff(path)
        for mode in ("raise", "skip"):
            yield f"{name}.read(on_error={mode!r})", lambda reader=reader, mode=mode: reader.read(path, on_error=mode)
    for mode in ("raise", "skip"):
        yield f"read_traces(on_error={mode!r})", lambda mode=mode: read_traces(path, on_error=mode)


def check_all_readers(root: Path, entry: Path, what: str) -> list[str]:
    """Every reader on ``entry``; returns what went wrong (empty: only typed errors escaped, each naming an input
    file and, if about one record, that record; every returned table agrees with its report)."""
    found: list[str] = []
    for label, call in _calls(entry):
        try:
            got = call()
        except TraceToChainError as exc:
            found.extend(f"{what}: {label}: {p}" for p in _error_problems(exc, root))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            if not label.endswith(".sniff"):  # detect_format skips a reader whose sniff raises these (only these)
                found.append(f"{what}: {label}: {type(exc).__name__} escaped: {exc!s:.300}\n{traceback.format_exc()}")
        except Exception as exc:
            found.append(f"{what}: {label}: {type(exc).__name__} escaped: {exc!s:.300}\n{traceback.format_exc()}")
        else:
            if label.endswith(".sniff"):
                if not isinstance(got, (bool, Refusal)):
                    found.append(f"{what}: {label} returned {got!r}")
            else:
                found.extend(f"{what}: {label}: {p}" for p in _table_problems(got))
    return found


def _is_record_file(source: str) -> bool:
    """Sources that are one record each: a trajectory file, a τ² simulation file, a member of a zipped log."""
    return "!" in source or source.endswith((".traj", ".traj.json")) or "/simulations/" in source


def _error_problems(exc: TraceToChainError, root: Path) -> list[str]:
    text = str(exc)
    if str(root) not in text:
        return [f"the error names no input file: {text[:300]}"]
    if isinstance(exc, TraceValidationError):
        if not exc.source or str(root) not in exc.source:
            return [f"error source {exc.source!r}"]
        if exc.line is None and exc.row is None and not _is_record_file(exc.source) \
                and not any(p.search(text) for p in FILE_LEVEL):
            return [f"a record-level error must name its line or row: {text[:400]}"]
    return []


def _table_problems(table: Any) -> list[str]:
    if not isinstance(table, tt.TraceTable):
        return [f"returned {type(table).__name__}, not a TraceTable"]
    r = table.report
    out = []
    if r.n_traces != table.n_traces or r.n_records_skipped < 0 or r.n_traces_skipped < 0:
        out.append(f"report disagrees with the table: {r.to_dict()}")
    if sum(table.outcome_counts().values()) != table.n_traces:
        out.append("outcome codes do not cover every trace")
    try:
        json.dumps(r.to_dict(), allow_nan=False)
    except (TypeError, ValueError) as exc:
        out.append(f"report is not JSON-safe: {exc}")
    return out


def write_case(root: Path, seed: Seed, changed: dict[str, bytes]) -> None:
    for name, raw in seed.files:
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(changed.get(name, raw))


def run_case(seed: Seed, data: st.DataObject) -> list[str]:
    changed: dict[str, bytes] = {}
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        name = data.draw(st.sampled_from(seed.mutable), label="file")
        changed[name] = mutate(name, changed.get(name, dict(seed.files)[name]), data)
    entry = data.draw(st.sampled_from(seed.entries), label="entry")
    with tempfile.TemporaryDirectory(prefix="ttc-fuzz-") as tmp:
        root = Path(tmp)
        write_case(root, seed, changed)
        return check_all_readers(root, root / entry if entry != "." else root, f"{seed.name} → {entry}")


_SETTINGS = {"derandomize": True, "database": None, "deadline": None, "print_blob": False,
             "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}
SEED_NAMES = [s.name for s in SEEDS]
_BY_NAME = {s.name: s for s in SEEDS}


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEED_NAMES)
@settings(max_examples=6, **_SETTINGS)  # type: ignore[arg-type]
@given(data=st.data())
def test_mutated_inputs_only_raise_typed_errors(seed: str, data: st.DataObject) -> None:
    problems = run_case(_BY_NAME[seed], data)
    assert not problems, "\n".join(problems)


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEED_NAMES)
@settings(max_examples=150, **_SETTINGS)  # type: ignore[arg-type]
@given(data=st.data())
def test_mutated_inputs_only_raise_typed_errors_slow(seed: str, data: st.DataObject) -> None:
    problems = run_case(_BY_NAME[seed], data)
    assert not problems, "\n".join(problems)


_RANDOM_NAMES = ["x.json", "x.jsonl", "x.ndjson", "x.traj", "x.traj.json", "x.csv", "x.txt", "x.eval", "x.log",
                 "results.json", "corpus.json"]


def random_case(name: str, data: st.DataObject) -> list[str]:
    """A file of random content with one of the names the readers look for."""
    if name.endswith(".eval"):
        buf = io.BytesIO()
        with warnings.catch_warnings(), zipfile.ZipFile(buf, "w") as zf:
            warnings.simplefilter("ignore", UserWarning)  # repeated member names are allowed here
            for _ in range(data.draw(st.integers(0, 3), label="members")):
                zf.writestr(data.draw(st.sampled_from(_ZIP_NAMES), label="name"),
                            _json_bytes(data.draw(JSON_VALUES, label="doc"), data, one_line=True))
        raw = buf.getvalue()
    elif name.endswith((".jsonl", ".ndjson")):
        docs = data.draw(st.lists(JSON_VALUES, max_size=4), label="lines")
        raw = b"".join(_json_bytes(d, data, one_line=True) + b"\n" for d in docs)
    elif name.endswith((".csv", ".txt", ".log")):
        raw = data.draw(st.text(alphabet=st.sampled_from(list(',\n"abc01 ')) | st.characters(), max_size=200),
                        label="text").encode("utf-8", errors="surrogatepass")
    else:
        raw = _json_bytes(data.draw(JSON_VALUES, label="doc"), data, one_line=False)
    with tempfile.TemporaryDirectory(prefix="ttc-fuzz-") as tmp:
        root = Path(tmp)
        (root / name).write_bytes(raw)
        return check_all_readers(root, root / name, f"random {name}")


@settings(max_examples=25, **_SETTINGS)  # type: ignore[arg-type]
@given(name=st.sampled_from(_RANDOM_NAMES), data=st.data())
def test_random_documents_only_raise_typed_errors(name: str, data: st.DataObject) -> None:
    problems = random_case(name, data)
    assert not problems, "\n".join(problems)


@pytest.mark.slow
@settings(max_examples=500, **_SETTINGS)  # type: ignore[arg-type]
@given(name=st.sampled_from(_RANDOM_NAMES), data=st.data())
def test_random_documents_only_raise_typed_errors_slow(name: str, data: st.DataObject) -> None:
    problems = random_case(name, data)
    assert not problems, "\n".join(problems)


# ================================================================================================ what the fuzz found
def _jl(*records: Any) -> bytes:
    return b"".join((r if isinstance(r, bytes) else json.dumps(r).encode()) + b"\n" for r in records)


def _step(tid: str, i: int = 0, **extra: Any) -> dict[str, Any]:
    return {"trace_id": tid, "step_idx": i, "state": "s", "outcome": "success", **extra}


def _otlp_line(tid: str, *, tool_attrs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    ev = {"name": "gen_ai.evaluation.result", "timeUnixNano": "1767000003000000000",
          "attributes": [{"key": "gen_ai.evaluation.score.label", "value": {"stringValue": "pass"}}]}
    spans = [{"traceId": tid, "spanId": "1111aaaa00000001", "name": "invoke_agent demo",
              "startTimeUnixNano": "1767000000000000000", "endTimeUnixNano": "1767000004000000000",
              "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}}],
              "events": [ev]},
             {"traceId": tid, "spanId": "1111aaaa00000002", "parentSpanId": "1111aaaa00000001",
              "name": "execute_tool lookup", "startTimeUnixNano": "1767000001000000000",
              "endTimeUnixNano": "1767000002000000000",
              "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                             *(tool_attrs or [])]}]
    return {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": spans}]}]}


def _chat_episode(eid: str, content: str = "ok", trial: Any = 0) -> dict[str, Any]:
    return {"id": eid, "trial": trial, "reward": 1.0,
            "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": content}]}


def _toy_log() -> dict[str, Any]:
    log = json.loads((FIXTURES / "inspect_ai" / "toy_refunds.json").read_text(encoding="utf-8"))
    log["samples"] = log["samples"][:2]
    return log


def _mini_run(tool_call_id: Any, returncode_text: str = "<returncode>0</returncode>") -> dict[str, bytes]:
    traj = {"info": {"exit_status": "Submitted"}, "instance_id": "i-1", "messages": [
        {"role": "system", "content": "s"}, {"role": "user", "content": "task"},
        {"role": "assistant", "content": "x", "tool_calls": [
            {"id": "c1", "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}]},
        {"role": "tool", "tool_call_id": tool_call_id, "content": "ok"},
        {"role": "assistant", "content": "THOUGHT: run\n\n```bash\npython x.py\n```"},
        {"role": "user", "content": returncode_text}]}
    return {"results_summary.json": json.dumps({"instances": [{"instance_id": "i-1", "resolved": True}]}).encode(),
            "i-1/i-1.traj.json": json.dumps(traj).encode()}


_HUGE = "1" + "0" * 400  # an integer JSON can hold but a float cannot
_DIGITS = "9" * 5000  # more digits than Python converts by default
_toy = _toy_log()
_toy_tokens = json.loads(json.dumps(_toy).replace('"input_tokens": 120', f'"input_tokens": {_HUGE}'))
_lf = json.loads((FIXTURES / "langfuse" / "trace_download.json").read_text(encoding="utf-8"))
_lf["scores"][0].update({"dataType": "NUMERIC", "value": "HUGE", "stringValue": None})
_lf_huge = json.dumps(_lf).replace('"HUGE"', _HUGE).encode()


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, body in members.items():
            zf.writestr(name, body)
    return buf.getvalue()


@dataclass(frozen=True)
class Found:
    """One bug the fuzz (or the review of its findings) turned up: the input, and what must happen now.

    ``error``: regex the ``on_error="raise"`` error must match (None: the source reads); ``where``: the
    ``(line, row)`` it must name; ``skip_traces``: traces kept with ``on_error="skip"`` (None: skip mode raises the
    same typed error, for whole-file problems).
    """

    reader: str
    files: dict[str, bytes]
    entry: str
    error: str | None = None
    where: tuple[int | None, int | None] = (None, None)
    skip_traces: int | None = None


_NESTED = b"[" * 100_000 + b"]" * 100_000
_BAD_UTF8 = b'{"trace_id": "\xff"}'
_TAU_HUGE = json.dumps([_tau_episode(0, 0, 1.0), _tau_episode(1, 0, 1.0)]).replace(
    '"reward": 1.0', f'"reward": {_HUGE}', 1).encode()
_EVAL_HUGE = _zip({"header.json": json.dumps({k: v for k, v in _toy.items() if k != "samples"}).encode(),
                   "samples/s1_epoch_1.json": b'{"id": "s1", "epoch": 1, "n": ' + _DIGITS.encode() + b"}"})
_MAST = b"trace_id,step_idx,state,error,outcome\n"

FOUND: dict[str, Found] = {
    # --- the canonical long table (decoded by traces/_canonical.py for TraceTable.read and the canonical reader alike)
    "canonical-line-not-utf8": Found(
        "canonical", {"t.jsonl": _jl(_step("a"), _BAD_UTF8, _step("b"))}, "t.jsonl", r"not UTF-8", (2, None), 2),
    "canonical-line-nested-too-deeply": Found(
        "canonical", {"t.jsonl": _jl(_step("a"), _NESTED, _step("b"))}, "t.jsonl", r"nested too deeply", (2, None), 2),
    "canonical-number-too-long": Found(
        "canonical", {"t.jsonl": _jl(_step("a"), b'{"step_idx": ' + _DIGITS.encode() + b"}", _step("b"))}, "t.jsonl",
        r"number is too long", (2, None), 2),
    "canonical-step-idx-beyond-64-bits": Found(
        "canonical", {"t.jsonl": _jl(_step("a"), _step("x", 2**64), _step("b"))}, "t.jsonl",
        r"field 'step_idx': expected an integer", (2, None), 2),
    "canonical-empty-trace-id-skip": Found(
        "canonical", {"t.jsonl": _jl(_step("a", 1), _step("a", 0), _step(""), _step("b"))}, "t.jsonl",
        r"trace_id is empty", (3, None), 2),
    "canonical-error-on-some-steps": Found(
        "canonical", {"t.jsonl": _jl(_step("a", 0, error="true"), _step("a", 1), _step("b", 0, error=1),
                                     _step("b", 1))}, "t.jsonl", skip_traces=2),
    "canonical-error-not-boolean": Found(
        "canonical", {"t.jsonl": _jl(_step("a", 0, error="true"), _step("a", 1), _step("b", 0, error="maybe"),
                                     _step("b", 1))}, "t.jsonl", r"expected true/false, got 'maybe'", (3, None), 1),
    "canonical-csv-header-not-utf8": Found(
        "canonical", {"t.csv": b"trace_id,step_idx,st\xffate,outcome\na,0,s,success\n"}, "t.csv",
        r"header is not UTF-8", (1, None)),
    "canonical-csv-repeated-column": Found(
        "canonical", {"t.csv": b"trace_id,trace_id,step_idx,state,outcome\na,a,0,s,success\n"}, "t.csv",
        r"column 'trace_id' appears twice", (1, None)),
    "mast-csv-empty-error-cell": Found(
        "mast-csv", {"s.csv": _MAST + b"t1,0,plan,true,continue\nt1,1,act,,success\n"}, "s.csv", skip_traces=1),
    "mast-csv-error-not-boolean": Found(
        "mast-csv", {"s.csv": _MAST + b"t1,0,plan,state,continue\nt1,1,act,,success\nt2,0,plan,false,success\n"},
        "s.csv", r"expected true/false, got 'state'", (2, None), 1),
    # --- float() / math.isfinite() of an integer beyond the float range raised OverflowError
    "tau-bench-reward-beyond-float": Found(
        "tau-bench", {"run.json": _TAU_HUGE}, "run.json", r"expected a finite number", (None, 0), 1),
    "inspect-ai-token-count-beyond-float": Found(
        "inspect-ai", {"log.json": json.dumps(_toy_tokens).encode()}, "log.json", r"expected a number", (None, 0), 1),
    "langfuse-score-beyond-float": Found(
        "langfuse", {"trace.json": _lf_huge}, "trace.json", r"not a finite number", (None, 0), 0),
    "otlp-double-beyond-float": Found(
        "otlp", {"t.jsonl": _jl(_otlp_line("a" * 32, tool_attrs=[
            {"key": "llm.cost.total", "value": {"doubleValue": 10**400}}]))}, "t.jsonl", skip_traces=1),
    "otlp-token-count-beyond-64-bits": Found(
        "otlp", {"t.jsonl": _jl(_otlp_line("a" * 32, tool_attrs=[
            {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "1e30"}}]))}, "t.jsonl", skip_traces=1),
    # --- JSON the parser gives up on (RecursionError / ValueError), per line and per document
    "otlp-line-nested-too-deeply": Found(
        "otlp", {"t.jsonl": _jl(_otlp_line("a" * 32), _NESTED)}, "t.jsonl", r"nested too deeply", (2, None), 1),
    "openai-messages-number-too-long": Found(
        "openai-messages", {"e.json": b'[{"id": "a", "reward": ' + _DIGITS.encode() + b"}]"}, "e.json",
        r"number is too long"),
    "inspect-ai-eval-member-number-too-long": Found(
        "inspect-ai", {"log.eval": _EVAL_HUGE}, "log.eval", r"log\.eval!samples/s1_epoch_1\.json.*number is too long"),
    # --- a line that is not UTF-8 no longer stops a whole JSONL file, and is named by its line
    "openai-messages-line-not-utf8": Found(
        "openai-messages", {"e.jsonl": _jl(_chat_episode("a"), _BAD_UTF8, _chat_episode("b"))}, "e.jsonl",
        r"not UTF-8", (2, None), 2),
    # --- text that isdigit() accepted and int() then refused
    "openai-messages-trial-superscript": Found(
        "openai-messages", {"e.jsonl": _jl(_chat_episode("a", trial="²"))}, "e.jsonl", r"expected an integer trial",
        (1, None), 0),
    # --- a lone surrogate (from a \ud800 escape) cannot be stored as UTF-8 text
    "openai-messages-lone-surrogate": Found(
        "openai-messages", {"e.jsonl": _jl(_chat_episode("a", "x\ud800y"))}, "e.jsonl", skip_traces=1),
    # --- an unhashable tool_call_id used as a dict key
    "mini-swe-agent-tool-call-id-object": Found("mini-swe-agent", _mini_run({"x": 1}), ".", skip_traces=1),
    # --- int() of a 5,000-digit number matched by \d+
    "mini-swe-agent-returncode-too-long": Found(
        "mini-swe-agent", _mini_run("c1", f"<returncode>{_DIGITS}</returncode>"), ".", skip_traces=1),
    "reflexion-trial-number-too-long": Found(
        "reflexion", {"log.txt": _REFLEXION.replace("BEGIN TRIAL 1", f"BEGIN TRIAL {_DIGITS}").encode()}, "log.txt",
        r"belongs to no agent log", (1, None), 3),
}


@pytest.mark.parametrize("case", list(FOUND))
def test_found_by_fuzz(case: str, tmp_path: Path) -> None:
    """Each bug the fuzz found stays fixed: a typed error naming file and record, or a clean read."""
    found = FOUND[case]
    write_case(tmp_path, Seed(case, tuple(found.files.items()), (found.entry,), ()), {})
    path = tmp_path / found.entry if found.entry != "." else tmp_path
    reader = available_readers()[found.reader]
    if found.error is None:
        table = reader.read(path, on_error="raise")
        assert not _table_problems(table)
    else:
        with pytest.raises(TraceToChainError, match=found.error) as err:
            reader.read(path, on_error="raise")
        assert str(tmp_path) in str(err.value)
        if isinstance(err.value, TraceValidationError) and found.where != (None, None):
            assert (err.value.line, err.value.row) == found.where, str(err.value)
    if found.skip_traces is None and found.error is not None:
        with pytest.raises(TraceToChainError, match=found.error):
            reader.read(path, on_error="skip")
    else:
        table = reader.read(path, on_error="skip")
        assert table.n_traces == found.skip_traces and not _table_problems(table)
    assert not check_all_readers(tmp_path, path, case)  # and every other reader copes with it too
