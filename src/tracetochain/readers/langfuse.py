"""Langfuse exports: trace JSON with nested observations and scores, or observation and score files.

Provenance (docs/formats.md)
----------------------------
Field names follow the ``langfuse/langfuse`` public API types: a **trace** (``id, timestamp, name, metadata,
sessionId, tags, …``; the "Download JSON" of one trace, ``TraceWithFullDetails``, adds ``observations[]`` and
``scores[]``), an **observation** (``id, traceId, type, name, startTime, endTime, parentObservationId, level,
statusMessage, input, output, usageDetails, costDetails, metadata, …``) and a **score** (``traceId,
observationId?, name, value, stringValue, dataType NUMERIC|BOOLEAN|CATEGORICAL, timestamp, …``). The snake_case
spellings of the blob-storage exports (``trace_id``, ``parent_observation_id``, ``start_time``, ``usage_details``, …)
are accepted too.

Accepted inputs
---------------
* one JSON file: a trace object with nested ``observations``/``scores``; a list of them; an API page
  ``{"data": [...]}``; or a bundle ``{"traces": [...], "observations": [...], "scores": [...]}``;
* one JSON Lines file of traces, observations or scores (each line says what it is: a trace has no ``traceId``,
  an observation has a ``type``, anything else with a ``traceId`` is a score);
* a folder holding ``traces.json(l)``, ``observations.json(l)`` (or ``observations_v2``) and ``scores.json(l)``,
  or sub-folders ``traces/``, ``observations/``, ``scores/`` of such files (the blob-storage export layout).
  A file's kind comes from its name (``trace``/``observation``/``score`` in it) or, failing that, from each record.

Field mapping onto the canonical record
---------------------------------------
* ``trace_id``: the Langfuse trace ``id`` (one episode per trace). Episodes follow file order of first appearance.
* **Steps**: observations of type ``GENERATION`` (→ ``llm``), ``TOOL`` (→ ``tool``), ``RETRIEVER``/``EMBEDDING``
  (→ ``retrieval``) none of whose descendants is itself of one of those types — so a generation with two TOOL
  children gives two tool steps — plus, with ``untyped_leaves=True`` (default), the *leaves* of the other types that
  are not inside such a step: ``SPAN``/``EVENT``/``CHAIN``/``GUARDRAIL`` leaves → ``other``, ``AGENT`` leaves →
  ``agent`` (older SDKs record tools as plain spans). Non-leaf SPAN/EVENT/AGENT/CHAIN observations are wrappers and
  never steps; ``EVALUATOR`` observations are never steps. The tree is ``parentObservationId``; order is
  ``startTime``, ties broken by observation id. A trace with no step (but a verdict) is kept as a zero-step episode
  (``table.report.zero_step``) and reported, never dropped.
* ``tool_name``: the observation ``name`` of tool steps and of ``other``/``agent`` leaves (so their default state is
  e.g. ``other:fetch_docs``); none for llm/retrieval steps.
* ``error``: the step observation's own ``level == "ERROR"`` (an ancestor's level never marks it, so a tool error the
  agent recovered from stays on the tool step). ``error_type`` is not recorded (``statusMessage`` is free text).
* ``text`` (``include_text=True``): ``output`` of generations, ``input`` of every other step (the tool arguments);
  non-strings as JSON.
* ``t_start``/``t_end``: ``startTime``/``endTime`` (ISO-8601, or epoch numbers) in epoch seconds;
  ``tokens_in``/``tokens_out``: ``usageDetails.input``/``output`` (else ``usage.input``/``output``, ``promptTokens``/
  ``completionTokens``, ``input_tokens``/``output_tokens``); ``cost_usd``: ``costDetails.total`` (else
  ``calculatedTotalCost``, ``totalCost``). The usage of a generation that is no step (its tool calls are its
  children) is added to its first step, so an episode's tokens and cost add up.
* ``task_id``/``trial``: only from paths the user names (``task_attribute=``, ``trial_attribute=``) into the trace
  object, e.g. ``"metadata.task_id"`` or ``"sessionId"`` (metadata given as a JSON string is parsed); when the file has
  no trace object, into the root observation.
* **Outcome**: a **trace-level** score (no ``observationId``) named ``score_name=``. Without ``score_name`` the name is
  taken when every trace-level score in the input has the same one; several names are an error asking for
  ``score_name=``. NUMERIC scores are the ``reward`` and succeed at ``≥ success_threshold`` (default 1 − 1e−6);
  BOOLEAN scores map 1/true → success, 0/false → failure; CATEGORICAL ``stringValue``s are matched case-insensitively
  against ``success_values=`` when given (anything else fails), else against pass/passed/success/correct/true/yes/…
  and fail/failed/failure/incorrect/false/no/… (``censored``/``invalid`` taken literally). Several scores of that
  name on one trace: the latest ``timestamp`` wins. A trace without one raises an error naming the trace (skipped and
  counted with ``on_error="skip"``). Observation ``level`` is never an outcome.

Bad input raises :class:`~tracetochain.exceptions.TraceValidationError` naming the file, the line (JSONL) or
element index (JSON), the field and the trace; with ``on_error="skip"`` the trace is dropped and counted (an
observation without a trace id drops the trace its parent or children belong to, and is counted itself). Dataset-run
items (``datasetItemId`` as task id) are not read: pass the task id through trace metadata.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracetochain.exceptions import TraceValidationError
from tracetochain.readers._common import (
    DEFAULT_SUCCESS_THRESHOLD,
    Refusal,
    Sniffed,
    TraceBuilder,
    add_float,
    add_int,
    finite_float,
    head_text,
    iso_seconds,
    json_loads,
    load_json,
    lookup,
    parse_success_values,
    verdict_to_outcome,
    wrong_suffix,
)
from tracetochain.readers._common import MISSING as _MISSING
from tracetochain.readers._common import finite_float as _float_or_none
from tracetochain.traces import Problem, TraceTable

__all__ = ["LANGFUSE", "LangfuseReader"]

_TYPED = {"GENERATION": "llm", "TOOL": "tool", "RETRIEVER": "retrieval", "EMBEDDING": "retrieval"}
_UNTYPED = {"SPAN": "other", "EVENT": "other", "CHAIN": "other", "GUARDRAIL": "other", "AGENT": "agent"}
_NEVER_STEPS = frozenset({"EVALUATOR"})
_KINDS = ("observations", "scores", "traces")
_JSON_EXT = (".json", ".jsonl", ".ndjson")
_SNIFF_MARKERS = ('"parentObservationId"', '"parent_observation_id"', '"completionStartTime"', '"usageDetails"',
                  '"htmlPath"', '"calculatedTotalCost"')


def _g(d: dict[str, Any], camel: str, snake: str | None = None) -> Any:
    v = d.get(camel)
    if v is None and snake is not None:
        v = d.get(snake)
    return v


@dataclass
class _Loc:
    file: str
    index: int
    is_line: bool

    def raise_(self, message: str, fieldname: str | None, hint: str | None = None) -> TraceValidationError:
        return TraceValidationError(message, source=self.file, line=self.index if self.is_line else None,
                                    row=None if self.is_line else self.index, field=fieldname, hint=hint)


@dataclass
class _Obs:
    oid: str
    parent: str | None
    otype: str
    name: str | None
    start: float | None
    end: float | None
    error: bool
    raw: dict[str, Any]
    loc: _Loc


@dataclass
class _TraceData:
    tid: str
    record: dict[str, Any] | None = None
    obs: dict[str, _Obs] = field(default_factory=dict)
    scores: list[tuple[dict[str, Any], _Loc]] = field(default_factory=list)
    poison: tuple[str, _Loc, str | None] | None = None
    first: _Loc | None = None


class _Collector:
    """Loads every record, grouped by trace, remembering where each came from."""

    def __init__(self, on_error: str) -> None:
        self.on_error = on_error
        self.traces: dict[str, _TraceData] = {}
        self.problems: list[Problem] = []
        self.n_obs_lines = 0
        self.n_obs = 0
        # Observations without a usable trace id (skip mode): (own id, parent id, problem), resolved by resolve().
        self.orphans: list[tuple[str | None, str | None, tuple[str, _Loc, str | None]]] = []

    def trace(self, tid: str, loc: _Loc) -> _TraceData:
        tr = self.traces.get(tid)
        if tr is None:
            tr = self.traces[tid] = _TraceData(tid, first=loc)
        return tr

    def bad(self, message: str, loc: _Loc, fieldname: str | None, hint: str | None = None,
            tid: str | None = None) -> None:
        if self.on_error == "raise":
            raise loc.raise_(message, fieldname, hint)
        if tid is None:
            self.problems.append(Problem(loc.index, fieldname, f"{message} ({Path(loc.file).name})"))
            return
        tr = self.trace(tid, loc)
        if tr.poison is None:
            tr.poison = (message, loc, fieldname)

    # ---------------------------------------------------------------- files
    def load_path(self, path: Path) -> None:
        if path.is_dir():
            files = _folder_files(path)
            if not files:
                raise TraceValidationError(
                    "no Langfuse export files in this folder", source=str(path),
                    hint="expected traces.json(l), observations.json(l) and/or scores.json(l)")
            for f, kind in files:
                self.load_file(f, kind)
        else:
            self.load_file(path, _kind_from_name(path))

    def load_file(self, path: Path, kind: str | None) -> None:
        src = str(path)
        if path.suffix.lower() in (".jsonl", ".ndjson"):
            with path.open("rb") as fh:
                for lineno, raw in enumerate(fh, start=1):
                    if raw.isspace():
                        continue
                    loc = _Loc(src, lineno, True)
                    try:
                        rec = json_loads(raw)
                    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                        msg = exc.msg if isinstance(exc, json.JSONDecodeError) else exc.reason
                        self.bad(f"not valid JSON ({msg})", loc, None,
                                 "each line must be one JSON object; fix or remove it, or pass on_error='skip'")
                        continue
                    self.record(rec, kind, loc)
            return
        data = load_json(path)
        if isinstance(data, dict) and isinstance(data.get("data"), list) and "id" not in data:
            data = data["data"]  # an API page
        if isinstance(data, dict) and "id" not in data and any(isinstance(data.get(k), list) for k in _KINDS):
            for k in ("traces", "observations", "scores"):  # a bundle: traces first so metadata comes first
                items = data.get(k)
                if isinstance(items, list):
                    for i, rec in enumerate(items):
                        self.record(rec, k, _Loc(src, i, False))
            return
        if isinstance(data, dict):
            data = [data]
        if not isinstance(data, list):
            raise TraceValidationError(f"expected a trace object or a list, got {type(data).__name__}", source=src,
                                       hint="export traces with their observations, or observations and scores")
        for i, rec in enumerate(data):
            self.record(rec, kind, _Loc(src, i, False))

    # ---------------------------------------------------------------- records
    def record(self, rec: Any, kind: str | None, loc: _Loc, parent_tid: str | None = None) -> None:
        if not isinstance(rec, dict):
            self.bad(f"expected an object, got {type(rec).__name__}", loc, None, tid=parent_tid)
            return
        k = kind or _kind_of(rec)
        if k == "traces":
            self.trace_record(rec, loc)
        elif k == "observations":
            self.observation(rec, loc, parent_tid)
        else:
            self.score(rec, loc, parent_tid)

    def trace_record(self, rec: dict[str, Any], loc: _Loc) -> None:
        tid = rec.get("id")
        if not isinstance(tid, str) or not tid.strip():
            self.bad("trace has no id", loc, "id", "every trace needs its Langfuse id")
            return
        tid = tid.strip()
        tr = self.trace(tid, loc)
        if tr.record is None:
            tr.record = {k: v for k, v in rec.items() if k not in ("observations", "scores")}
        for key, sub in (("observations", "observations"), ("scores", "scores")):
            items = rec.get(key)
            if items is None:
                continue
            if not isinstance(items, list):
                self.bad(f"{key} must be a list", loc, key, tid=tid)
                continue
            for item in items:
                self.record(item, sub, loc, parent_tid=tid)

    def observation(self, rec: dict[str, Any], loc: _Loc, parent_tid: str | None) -> None:
        tid = _g(rec, "traceId", "trace_id")
        if tid is None:
            tid = parent_tid
        if not isinstance(tid, str) or not tid.strip():
            self.bad("observation has no traceId", loc, "traceId", tid=parent_tid)
            if parent_tid is None:
                oid, par = rec.get("id"), _g(rec, "parentObservationId", "parent_observation_id")
                self.orphans.append((str(oid) if isinstance(oid, (str, int)) else None,
                                     str(par) if isinstance(par, (str, int)) else None,
                                     ("observation has no traceId", loc, "traceId")))
            return
        tid = tid.strip()
        if parent_tid is not None and tid != parent_tid:
            self.bad(f"observation belongs to trace {tid!r} but is nested in trace {parent_tid!r}", loc, "traceId",
                     tid=parent_tid)
            return
        oid = rec.get("id")
        if not isinstance(oid, (str, int)) or isinstance(oid, bool) or str(oid).strip() == "":
            self.bad(f"observation has no id (trace {tid})", loc, "id", tid=tid)
            return
        otype = rec.get("type")
        if not isinstance(otype, str) or not otype.strip():
            self.bad(f"observation {oid} has no type (trace {tid})", loc, "type",
                     "type is GENERATION, TOOL, SPAN, EVENT, AGENT, …", tid=tid)
            return
        parent = _g(rec, "parentObservationId", "parent_observation_id")
        if parent is not None and not isinstance(parent, (str, int)):
            self.bad(f"parentObservationId of {oid} is not an id (trace {tid})", loc, "parentObservationId", tid=tid)
            return
        try:
            start = iso_seconds(_g(rec, "startTime", "start_time"))
            end = iso_seconds(_g(rec, "endTime", "end_time"))
        except (TypeError, ValueError, OverflowError):
            self.bad(f"observation {oid} has a startTime/endTime that is not a time (trace {tid})", loc, "startTime",
                     "write ISO-8601 times such as 2026-01-01T10:00:00Z", tid=tid)
            return
        name = rec.get("name")
        level = rec.get("level")
        obs = _Obs(str(oid).strip(), str(parent).strip() if parent not in (None, "") else None,
                   otype.strip().upper(), name if isinstance(name, str) else None, start, end,
                   isinstance(level, str) and level.strip().upper() == "ERROR", rec, loc)
        tr = self.trace(tid, loc)
        tr.obs.setdefault(obs.oid, obs)  # an observation exported twice keeps its first copy
        self.n_obs += 1
        self.n_obs_lines += loc.is_line

    def score(self, rec: dict[str, Any], loc: _Loc, parent_tid: str | None) -> None:
        tid = _g(rec, "traceId", "trace_id")
        if tid is None:
            tid = parent_tid
        if not isinstance(tid, str) or not tid.strip():
            if _g(rec, "sessionId", "session_id") is not None:
                return  # a session score belongs to no single trace
            self.bad("score has no traceId", loc, "traceId", tid=parent_tid)
            return
        self.trace(tid.strip(), loc).scores.append((rec, loc))


    def resolve(self) -> None:
        """Drop the trace an unattributed observation belongs to, when its parent or a child names it."""
        if not self.orphans:
            return
        owner: dict[str, str] = {}
        child_of: dict[str, str] = {}
        for tid, tr in self.traces.items():
            for o in tr.obs.values():
                owner[o.oid] = tid
                if o.parent is not None:
                    child_of.setdefault(o.parent, tid)
        for oid, parent, problem in self.orphans:
            hit = owner.get(parent) if parent is not None else None
            if hit is None and oid is not None:
                hit = child_of.get(oid)
            if hit is not None and self.traces[hit].poison is None:
                self.traces[hit].poison = problem
        self.orphans.clear()


def _kind_from_name(path: Path) -> str | None:
    stem = path.name.lower()
    for word, kind in (("observation", "observations"), ("score", "scores"), ("trace", "traces")):
        if word in stem:
            return kind
    return None


def _kind_of(rec: dict[str, Any]) -> str:
    if "observations" in rec or ("traceId" not in rec and "trace_id" not in rec):
        return "traces"
    if "type" in rec:
        return "observations"
    return "scores"


def _folder_files(folder: Path) -> list[tuple[Path, str | None]]:
    """Export files of a folder, traces first (their metadata), then observations, then scores."""
    found: list[tuple[int, Path, str | None]] = []
    order = {"traces": 0, "observations": 1, "scores": 2}
    for p in sorted(folder.iterdir()):
        if p.is_file() and p.suffix.lower() in _JSON_EXT:
            kind = _kind_from_name(p)
            if kind is not None:
                found.append((order[kind], p, kind))
        elif p.is_dir():
            kind = _kind_from_name(p)
            if kind is not None:
                for q in sorted(p.rglob("*")):
                    if q.is_file() and q.suffix.lower() in _JSON_EXT:
                        found.append((order[kind], q, kind))
    found.sort(key=lambda t: (t[0], str(t[1])))
    return [(p, kind) for _, p, kind in found]


# ============================================================================================ outcome
def _trace_level(scores: list[tuple[dict[str, Any], _Loc]]) -> list[tuple[dict[str, Any], _Loc]]:
    return [(s, loc) for s, loc in scores if _g(s, "observationId", "observation_id") in (None, "")]


def _score_outcome(s: dict[str, Any], success_values: frozenset[str] | None,
                   threshold: float) -> tuple[str, float | None] | str:
    dtype = _g(s, "dataType", "data_type")
    dtype = dtype.strip().upper() if isinstance(dtype, str) else None
    value = s.get("value")
    text = _g(s, "stringValue", "string_value")
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    if dtype == "BOOLEAN":
        if isinstance(value, bool):
            return verdict_to_outcome(value, None, threshold)
        if numeric and value in (0, 1):
            return verdict_to_outcome(bool(value), None, threshold)
        if isinstance(text, str):
            return verdict_to_outcome(text, None, threshold)
        return f"BOOLEAN score value {value!r} is neither 0/1 nor true/false"
    if dtype == "CATEGORICAL" or (dtype is None and not numeric and isinstance(text, str)):
        label = text if isinstance(text, str) and text.strip() else value
        r = verdict_to_outcome(label, success_values, threshold)
        return r if isinstance(r, str) else (r[0], None)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return verdict_to_outcome(value, None, threshold)
    if isinstance(value, str):
        return verdict_to_outcome(value, success_values, threshold)
    return f"score value {value!r} is not a number"


def _score_time(s: dict[str, Any]) -> float:
    try:
        t = iso_seconds(s.get("timestamp"))
    except (TypeError, ValueError, OverflowError):
        t = None
    return t if t is not None else -math.inf


# ============================================================================================ the reader
class LangfuseReader:
    name = "langfuse"
    description = ("Langfuse exports: trace JSON with nested observations and scores, or observations JSON(L) + "
                   "scores, or a folder of them")
    needs = "a trace-level score holding the task verdict (score_name= picks it when traces carry several)"

    def sniff(self, path: Path) -> Sniffed:
        if path.is_dir():
            for p, _ in _folder_files(path)[:3]:
                if self._sniff_file(p, named=True):
                    return True
            return Refusal("a folder without Langfuse trace, observation or score files")
        if not path.is_file() or path.suffix.lower() not in _JSON_EXT:
            return wrong_suffix(path, _JSON_EXT)
        return self._sniff_file(path, named=False) or Refusal(
            "no Langfuse trace or observations (a trace with observations and scores, or observations with "
            "traceId)")

    @staticmethod
    def _sniff_file(path: Path, *, named: bool) -> bool:
        head = head_text(path)
        if not head.lstrip().startswith(("{", "[")) or '"resourceSpans"' in head or '"resource_spans"' in head:
            return False
        if any(m in head for m in _SNIFF_MARKERS):
            return True
        if '"observations"' in head and ('"sessionId"' in head or '"traceId"' in head):
            return True
        if named:  # a score file of an export folder
            return '"traceId"' in head and '"dataType"' in head
        return False

    def read(self, path: Path, *, on_error: str = "raise", **options: Any) -> TraceTable:
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
        o = dict(options)
        score_name = o.pop("score_name", None)
        if score_name is not None and (not isinstance(score_name, str) or not score_name.strip()):
            raise TypeError(f"score_name must be a non-empty string, got {score_name!r}")
        threshold = o.pop("success_threshold", DEFAULT_SUCCESS_THRESHOLD)
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not math.isfinite(threshold):
            raise TypeError(f"success_threshold must be a number, got {threshold!r}")
        success_values = parse_success_values(o.pop("success_values", None))
        task_attr = o.pop("task_attribute", None)
        trial_attr = o.pop("trial_attribute", None)
        for nm, v in (("task_attribute", task_attr), ("trial_attribute", trial_attr)):
            if v is not None and (not isinstance(v, str) or not v.strip()):
                raise TypeError(f"{nm} must be a path such as 'metadata.task_id', got {v!r}")
        include_text = bool(o.pop("include_text", True))
        untyped_leaves = bool(o.pop("untyped_leaves", True))
        if o:
            raise TypeError(f"the langfuse reader got unknown options {sorted(o)}; it takes score_name=, "
                            "success_threshold=, success_values=, task_attribute=, trial_attribute=, include_text=, "
                            "untyped_leaves=")
        path = Path(path)
        if not path.exists():
            raise TraceValidationError("no such file or folder", source=str(path))

        col = _Collector(on_error)
        col.load_path(path)
        col.resolve()
        kind = "line" if col.n_obs and col.n_obs_lines == col.n_obs else "row"
        builder = TraceBuilder(source=str(path), format=self.name, on_error=on_error, location_kind=kind)
        builder.problems.extend(col.problems)

        if score_name is None:
            names = sorted({str(s.get("name")) for tr in col.traces.values() for s, _ in _trace_level(tr.scores)
                            if s.get("name") is not None})
            if len(names) > 1:
                raise TraceValidationError(
                    f"the traces carry several trace-level scores ({', '.join(names)})", source=str(path),
                    field="score_name", hint="pass score_name= naming the score that is the task verdict")
            score_name = names[0] if names else None

        for tr in col.traces.values():
            self._emit(tr, builder, score_name=score_name, threshold=float(threshold),
                       success_values=success_values, task_attr=task_attr, trial_attr=trial_attr,
                       include_text=include_text, untyped_leaves=untyped_leaves)
        return builder.build()

    # ---------------------------------------------------------------- one trace
    def _emit(self, tr: _TraceData, builder: TraceBuilder, *, score_name: str | None, threshold: float,
              success_values: frozenset[str] | None, task_attr: str | None, trial_attr: str | None,
              include_text: bool, untyped_leaves: bool) -> None:
        first = tr.first.index if tr.first else None

        def skip(message: str, loc: _Loc | None, fieldname: str | None, hint: str | None = None) -> None:
            loc = loc or tr.first
            if builder.on_error == "raise" and loc is not None:
                raise loc.raise_(message, fieldname, hint)
            builder.skip_trace(message, location=loc.index if loc else first, field=fieldname, hint=hint)

        if tr.poison is not None:
            message, loc, fieldname = tr.poison
            skip(f"{message} (trace {tr.tid})", loc, fieldname)
            return
        obs = tr.obs
        children: dict[str, list[_Obs]] = {}
        roots: list[_Obs] = []
        for o in obs.values():
            if o.parent is None or o.parent not in obs or o.parent == o.oid:
                roots.append(o)
            else:
                children.setdefault(o.parent, []).append(o)
        order = list(roots)
        i = 0
        while i < len(order):
            order.extend(children.get(order[i].oid, ()))
            i += 1
        if len(order) < len(obs):
            loop = sorted(set(obs) - {o.oid for o in order})
            skip(f"parentObservationId links form a cycle (trace {tr.tid}, observations {', '.join(loop[:3])})",
                 obs[loop[0]].loc, "parentObservationId", "every observation's parent chain must end at a root")
            return
        typed_below: dict[str, bool] = {}
        for o in reversed(order):
            typed_below[o.oid] = any(c.otype in _TYPED or typed_below[c.oid] for c in children.get(o.oid, ()))
        in_typed: dict[str, bool] = {}
        for o in order:
            p = obs.get(o.parent) if o.parent is not None and o.parent != o.oid else None
            in_typed[o.oid] = p is not None and (p.otype in _TYPED or in_typed[p.oid])
        steps: list[tuple[_Obs, str]] = []
        for o in order:
            if o.otype in _TYPED:
                if not typed_below[o.oid]:
                    steps.append((o, _TYPED[o.otype]))
            elif (untyped_leaves and o.otype not in _NEVER_STEPS and not children.get(o.oid)
                  and not in_typed[o.oid]):
                steps.append((o, _UNTYPED.get(o.otype, "other")))
        untimed = next((o for o, _ in steps if o.start is None), None)
        if untimed is not None:
            skip(f"observation {untimed.oid} has no startTime, so the steps cannot be ordered (trace {tr.tid})",
                 untimed.loc, "startTime")
            return

        # Outcome: a trace-level score.
        level = _trace_level(tr.scores)
        chosen = [(s, loc) for s, loc in level if score_name is not None and s.get("name") == score_name]
        if not chosen:
            what = f"no trace-level score named {score_name!r}" if score_name else "no trace-level score"
            skip(f"trace has {what} (trace {tr.tid})", None, "scores",
                 "the task verdict must be a trace-level score; pass score_name= if it has another name")
            return
        idx = max(range(len(chosen)), key=lambda j: (_score_time(chosen[j][0]), j))
        s, sloc = chosen[idx]
        r = _score_outcome(s, success_values, threshold)
        if isinstance(r, str):
            skip(f"{r} (score {score_name!r} of trace {tr.tid})", sloc, "value",
                 "pass success_values= listing the labels that mean success, or success_threshold=")
            return
        outcome, reward = r

        task = trial = None
        holders = [tr.record] if tr.record is not None else [o.raw for o in roots]
        for attr, is_trial in ((task_attr, False), (trial_attr, True)):
            if attr is None:
                continue
            v = next((x for x in (lookup(h, attr) for h in holders) if x is not _MISSING and x is not None), None)
            if v is None:
                continue
            if is_trial:
                trial = _int_or_none(v)
                if trial is None:
                    skip(f"trial {v!r} is not an integer (trace {tr.tid})", tr.first, attr,
                         "the trial path must hold a repetition index such as 0, 1, 2")
                    return
            else:
                task = v if isinstance(v, str) else json.dumps(v)

        if not steps:  # a trace judged without any step observation: still a trial with its verdict
            builder.add_zero_step({"trace_id": tr.tid, "outcome": outcome, "reward": reward, "task_id": task,
                                   "trial": trial}, first if first is not None else 0)
            return
        steps.sort(key=lambda t: (t[0].start, t[0].oid))
        # A generation whose tool calls are its children is no step: its usage goes to its first step below.
        step_ids = {o.oid for o, _ in steps}
        extra: dict[str, list[Any]] = {}
        for o in order:
            if o.otype == "GENERATION" and o.oid not in step_ids:
                u = _usage(o.raw)
                if any(x is not None for x in u):
                    below = _subtree_steps(o, children, step_ids)
                    if below:
                        first_step = min(below, key=lambda b: (b.start if b.start is not None else math.inf, b.oid))
                        acc = extra.setdefault(first_step.oid, [None, None, None])
                        acc[0], acc[1], acc[2] = add_int(acc[0], u[0]), add_int(acc[1], u[1]), \
                            add_float(acc[2], u[2])
        for i, (o, kind) in enumerate(steps):
            raw = o.raw
            tin, tout, cst = _usage(raw)
            if o.oid in extra:
                e = extra[o.oid]
                tin, tout, cst = add_int(tin, e[0]), add_int(tout, e[1]), add_float(cst, e[2])
            text = None
            if include_text:
                tv = raw.get("output") if kind == "llm" else raw.get("input")
                text = tv if isinstance(tv, str) or tv is None else json.dumps(tv, ensure_ascii=False)
            builder.add_step({
                "trace_id": tr.tid, "step_idx": i, "outcome": outcome, "reward": reward, "task_id": task,
                "trial": trial, "step_kind": kind, "tool_name": o.name if kind in ("tool", "other", "agent") else None,
                "error": o.error, "text": text, "t_start": o.start, "t_end": o.end,
                "tokens_in": tin, "tokens_out": tout, "cost_usd": cst,
            }, o.loc.index)


def _usage(raw: dict[str, Any]) -> tuple[int | None, int | None, float | None]:
    usage = _first_dict(raw, ("usageDetails", "usage_details", "usage"))
    cost = _first_dict(raw, ("costDetails", "cost_details"))
    c = _pick(cost, ("total",))
    if c is None:
        c = _pick(raw, ("calculatedTotalCost", "calculated_total_cost", "totalCost"))
    return (_int_or_none(_pick(usage, ("input", "promptTokens", "prompt_tokens", "input_tokens"))),
            _int_or_none(_pick(usage, ("output", "completionTokens", "completion_tokens", "output_tokens"))),
            _float_or_none(c))


def _subtree_steps(o: _Obs, children: dict[str, list[_Obs]], step_ids: set[str]) -> list[_Obs]:
    out: list[_Obs] = []
    stack = list(children.get(o.oid, ()))
    while stack:
        c = stack.pop()
        if c.oid in step_ids:
            out.append(c)
        stack.extend(children.get(c.oid, ()))
    return out


def _first_dict(raw: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any] | None:
    for k in keys:
        v = raw.get(k)
        if isinstance(v, dict):
            return v
    return None


def _pick(d: dict[str, Any] | None, keys: tuple[str, ...]) -> Any:
    if not d:
        return None
    for k in keys:
        if d.get(k) is not None:
            return d[k]
    return None


def _int_or_none(v: Any) -> int | None:
    if v is None or isinstance(v, bool):
        return None
    f = finite_float(v.strip() if isinstance(v, str) else v)
    return int(f) if f is not None and f == int(f) and abs(f) < 2**63 else None


LANGFUSE = LangfuseReader()
