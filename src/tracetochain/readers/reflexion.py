"""Reflexion / ReAct HotPotQA text logs: one trace per agent log, one step per ``Action n:`` line.

Format (docs/formats.md)
    The Reflexion repository (github.com/noahshinn/reflexion, MIT) logs its HotPotQA ReAct runs as plain text, e.g.
    ``hotpotqa_runs/root/ReAct/{base,reflexion}/100_questions_5_trials.txt``::

        BEGIN TRIAL 1
        Trial summary: Correct: 34, Incorrect: 56, Halted: 10
        ------------- BEGIN CORRECT AGENTS -------------
        Question: Which band released the album first?
        Reflections:                       (reflexion runs, trials ≥ 2: the plan written after a failed trial)
        - I searched the wrong page …
        Thought 1: I need to search both albums.
        Action 1: Search[Album A]
        Observation 1: Album A is the debut album of …   (may continue on the next lines)
        Action 2: Finish[Band X]
        Observation 2: Answer is INCORRECT
        Correct answer: Band Y

    Sections ``BEGIN CORRECT AGENTS`` / ``INCORRECT`` / ``HALTED`` list every agent of the trial block. Reflexion
    re-runs only the agents that are not yet correct, so a correct agent's log is repeated unchanged in every later
    block (its carried-forward copy), and each block is a snapshot of all agents after that trial.

Options
    ``include_thoughts`` (False) — also emit each ``Thought n:`` as an ``llm`` step before its action.
    ``carried`` (``"keep"``) — ``"drop"`` removes the carried-forward copies (a correct log identical to the same
    question's correct log in the previous block), counting them in the ingest report, so that every trace is an
    attempt that actually ran. With ``"keep"`` the per-block success counts equal the file's trial summaries.

Field mapping
    * ``task_id`` — the question text (whitespace collapsed; the "You have attempted to answer …" preface that
      Reflexion appends in later trials is cut off). ``trial`` — the trial block number as written
      (``BEGIN TRIAL 1`` → 1; 1 when the file has no trial blocks). ``trace_id`` —
      ``"<first 12 hex digits of sha1(question)>/trial<n>"``, stable across files, so the base and reflexion logs of
      one question share the prefix.
    * steps — each ``Action n: Tool[argument]`` line is one ``tool`` step: ``tool_name`` = ``Tool`` (``Search``,
      ``Lookup``, ``Finish``, or whatever the model wrote, e.g. ``Compare``), ``text`` = the argument. ``error`` is
      True (``error_type="invalid_action"``) when the observation is the environment's "Invalid Action" reply; a
      search that finds nothing is a normal observation, not an error. ``Thought`` lines are steps only with
      ``include_thoughts=True``; reflections are never steps.
    * ``outcome`` — from the log itself: an observation ``Answer is CORRECT`` → ``success``, ``Answer is INCORRECT``
      → ``failure`` (``termination_reason="finish"``); a log without an answer (the agent hit the step limit) →
      ``censored`` (``termination_reason="halted"``). The section heading must agree (a log under ``CORRECT`` must
      say CORRECT, …); the one tolerated exception is a log under ``HALTED`` that repeats, word for word, a log of
      the same question already read in that block: the base file lists 12 finished agents in both the INCORRECT and
      HALTED sections, and such a duplicate is dropped and counted in the report (it is one attempt, not two).

Counts on the real files: ``base`` — 512 logs, 12 duplicates dropped → 500 traces (100 per block), 34 successes in
every block; ``reflexion`` — 498 traces, successes 32 / 42 / 48 / 50 / 51 per block. A log with no action at all
cannot be represented and is dropped and counted without raising.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracetochain.exceptions import TraceValidationError
from tracetochain.readers._common import (
    Refusal,
    Sniffed,
    TraceBuilder,
    head_text,
    wrong_suffix,
)
from tracetochain.traces import Problem, TraceTable

__all__ = ["REFLEXION", "ReflexionReader", "question_key"]

_TRIAL = re.compile(r"^BEGIN TRIAL ([0-9]{1,18})\s*$")
_SUMMARY = re.compile(r"^Trial summary:")
_SECTION = re.compile(r"^-+\s*BEGIN (CORRECT|INCORRECT|HALTED) AGENTS\s*-*\s*$")
_QUESTION = re.compile(r"^Question:(.*)$")
_FIELD = re.compile(r"^(Thought|Action|Observation) ([0-9]{1,18}):\s?(.*)$")
_ANSWER = re.compile(r"^Correct answer:(.*)$")
_BANNER = re.compile(r"^#{5,}\s*$")
_VERDICT = re.compile(r"^Answer is (CORRECT|INCORRECT)\b")
_TOOL_CALL = re.compile(r"^\s*([A-Za-z_][\w ]*?)\s*\[(.*)\]\s*$", re.DOTALL)
_PREFACE = re.compile(r"\s*You have attempted to answer (the )?following question before", re.IGNORECASE)
_SECTION_OUTCOME = {"CORRECT": "success", "INCORRECT": "failure", "HALTED": "censored"}


def question_key(question_line: str) -> str:
    """The task id of a ``Question:`` line: the question without Reflexion's preface, whitespace collapsed."""
    text = _PREFACE.split(question_line, maxsplit=1)[0]
    return " ".join(text.split())


@dataclass
class _Log:
    line: int
    trial: int | None
    section: str | None
    question: str
    fields: list[tuple[str, int, int, list[str]]] = field(default_factory=list)  # (kind, n, line, text lines)
    answer_seen: bool = False

    def body(self) -> tuple[tuple[str, int, str], ...]:
        return tuple((kind, n, "\n".join(text)) for kind, n, _, text in self.fields)


def _parse_logs(path: Path) -> tuple[list[_Log], list[tuple[int, str]]]:
    """Split the file into agent logs; also return lines that belong to no log (line number, text)."""
    logs: list[_Log] = []
    stray: list[tuple[int, str]] = []
    trial: int | None = None
    section: str | None = None
    current: _Log | None = None
    in_reflections = False
    with path.open("r", encoding="utf-8-sig", errors="strict") as fh:  # a byte-order mark is not a line
        for lineno, raw in enumerate(fh, start=1):
            line = raw.rstrip("\n").rstrip("\r")
            m = _TRIAL.match(line)
            if m:
                trial, section, current = int(m.group(1)), None, None
                continue
            if _SUMMARY.match(line) or _BANNER.match(line):
                current = None
                continue
            m = _SECTION.match(line)
            if m:
                section, current = m.group(1), None
                continue
            m = _QUESTION.match(line)
            if m:
                current = _Log(lineno, trial, section, question_key(m.group(1)))
                logs.append(current)
                in_reflections = False
                continue
            if current is None:
                if line.strip():
                    stray.append((lineno, line))
                continue
            if current.answer_seen:
                if line.strip():
                    stray.append((lineno, line))
                continue
            m = _ANSWER.match(line)
            if m:
                current.answer_seen = True
                continue
            m = _FIELD.match(line)
            if m:
                in_reflections = False
                current.fields.append((m.group(1), int(m.group(2)), lineno, [m.group(3)]))
                continue
            if not current.fields and (line.startswith("Reflections:") or in_reflections):
                in_reflections = True  # the reflection plan between the question and Thought 1: not steps
                continue
            if current.fields:
                current.fields[-1][3].append(line)  # a field continuing on the next line
            elif line.strip():
                # text after the question line before any field: part of the question
                current.question = " ".join((current.question + " " + question_key(line)).split())
    return logs, stray


class ReflexionReader:
    name = "reflexion"
    description = "Reflexion/ReAct HotPotQA text logs (BEGIN TRIAL n; Question / Thought n / Action n / Observation n)"
    needs = "nothing else"

    def sniff(self, path: Path) -> Sniffed:
        path = Path(path)
        if not path.is_file() or path.suffix.lower() not in (".txt", ".log", ""):
            return wrong_suffix(path, (".txt", ".log"))
        head = head_text(path)
        has_steps = bool(re.search(r"^Question:", head, re.MULTILINE)) and bool(
            re.search(r"^Action \d+: \w+\[", head, re.MULTILINE))
        if has_steps and re.search(r"^BEGIN TRIAL \d+\s*$|^Thought 1:", head, re.MULTILINE):
            return True
        return Refusal("no ReAct log lines (Question:, Thought 1:, Action 1: Search[…])")

    def read(self, path: Path, *, on_error: str = "raise", include_thoughts: bool = False, carried: str = "keep",
             **options: Any) -> TraceTable:
        """Read one log file (options: ``include_thoughts``, ``carried``; see the module docstring)."""
        if options:
            raise TypeError(f"the reflexion reader takes include_thoughts= and carried=, got {sorted(options)}")
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
        if carried not in ("keep", "drop"):
            raise ValueError(f"carried must be 'keep' or 'drop', got {carried!r}")
        if not isinstance(include_thoughts, bool):
            raise TypeError(f"include_thoughts must be True or False, got {include_thoughts!r}")
        path = Path(path)
        if not path.is_file():
            raise TraceValidationError("no such file", source=str(path))
        try:
            logs, stray = _parse_logs(path)
        except UnicodeDecodeError as exc:
            raise TraceValidationError(f"not UTF-8 text ({exc.reason})", source=str(path)) from None
        builder = TraceBuilder(source=str(path), format=self.name, on_error=on_error, location_kind="line")
        if stray and on_error == "raise":
            lineno, text = stray[0]
            raise TraceValidationError(
                f"line belongs to no agent log: {text[:60]!r}", source=str(path), line=lineno,
                hint="every agent log starts with 'Question:' and ends with 'Correct answer:'",
            )
        if not logs:
            raise TraceValidationError("no agent log found (no 'Question:' line)", source=str(path),
                                       hint="is this a Reflexion/ReAct text log?")

        seen: dict[tuple[int | None, str], _Log] = {}
        correct_body: dict[tuple[int | None, str], tuple[tuple[str, int, str], ...]] = {}
        for log in logs:
            key = (log.trial, log.question)
            outcome, verdict = self._outcome(log)
            if log.section is not None and _SECTION_OUTCOME[log.section] != outcome:
                earlier = seen.get(key)
                if log.section == "HALTED" and earlier is not None and earlier.body() == log.body():
                    builder.problems.append(Problem(
                        log.line, "question",
                        f"duplicate of an earlier log of the same question in this trial (line {earlier.line})",
                        whole_trace=True))
                    continue
                builder.skip_trace(
                    f"log is listed under {log.section} but its last observation says "
                    f"{'Answer is ' + verdict if verdict else 'no answer'}", location=log.line, field="outcome",
                    hint="fix the section or the log; only word-for-word duplicates under HALTED are tolerated")
                continue
            if key in seen:
                earlier = seen[key]
                if earlier.body() == log.body():
                    builder.problems.append(Problem(
                        log.line, "question",
                        f"duplicate of an earlier log of the same question in this trial (line {earlier.line})",
                        whole_trace=True))
                else:
                    builder.skip_trace(
                        f"a second, different log of the same question in trial {log.trial} (first at line "
                        f"{earlier.line})", location=log.line, field="question",
                        hint="keep one log per question and trial block")
                continue
            seen[key] = log
            if outcome == "success":
                correct_body[key] = log.body()
                prev = (log.trial - 1, log.question) if log.trial is not None else None
                if carried == "drop" and prev is not None and correct_body.get(prev) == log.body():
                    builder.problems.append(Problem(
                        log.line, "question", "carried forward unchanged from the previous trial (carried='drop')",
                        whole_trace=True))
                    continue
            self._emit(builder, log, outcome, include_thoughts)
        for lineno, _ in stray:
            builder.problems.append(Problem(lineno, None, "line belongs to no agent log"))
        return builder.build()

    @staticmethod
    def _outcome(log: _Log) -> tuple[str, str | None]:
        verdict: str | None = None
        for kind, _, _, text in log.fields:
            if kind == "Observation":
                m = _VERDICT.match(text[0].strip())
                if m:
                    verdict = m.group(1)
        if verdict is None:
            return "censored", None
        return ("success" if verdict == "CORRECT" else "failure"), verdict

    @staticmethod
    def _emit(builder: TraceBuilder, log: _Log, outcome: str, include_thoughts: bool) -> None:
        digest = hashlib.sha1(log.question.encode("utf-8")).hexdigest()[:12]
        trial = log.trial if log.trial is not None else 1
        trace: dict[str, Any] = {
            "trace_id": f"{digest}/trial{trial}", "task_id": log.question, "trial": trial,
            "outcome": outcome, "termination_reason": "halted" if outcome == "censored" else "finish",
        }
        steps: list[tuple[dict[str, Any], int]] = []
        fields = log.fields
        for idx, (kind, n, lineno, text) in enumerate(fields):
            body = "\n".join(text).strip()
            if kind == "Thought" and include_thoughts:
                steps.append(({"step_kind": "llm", "text": body}, lineno))
            elif kind == "Action":
                m = _TOOL_CALL.match(body)
                if m:
                    tool, arg = m.group(1).strip(), m.group(2)
                else:
                    parts = body.split(None, 1)
                    tool, arg = (parts[0] if parts else ""), (parts[1] if len(parts) > 1 else "")
                obs = next((t for k, num, _, t in fields[idx + 1:] if k == "Observation" and num == n), None)
                invalid = obs is not None and obs[0].strip().startswith("Invalid Action")
                steps.append(({"step_kind": "tool", "tool_name": tool or None, "text": arg, "error": invalid,
                               "error_type": "invalid_action" if invalid else None}, lineno))
        if not any(s["step_kind"] == "tool" for s, _ in steps):  # answered nothing: a trial without a step
            builder.add_zero_step(trace, log.line)
            return
        for step_idx, (step, lineno) in enumerate(steps):
            builder.add_step({**trace, "step_idx": step_idx, **step}, lineno)


REFLEXION = ReflexionReader()
