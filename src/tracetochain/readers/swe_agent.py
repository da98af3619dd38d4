"""SWE-agent ``.traj`` and mini-swe-agent ``.traj.json`` trajectories, joined with SWE-bench verdicts.

Formats (docs/formats.md)
    * **SWE-agent** (``SWE-agent/SWE-agent``, maintenance-only): one JSON file per instance,
      ``trajectories/<user>/<run>/<instance_id>/<instance_id>.traj`` (older runs: ``<run>/<instance_id>.traj``),
      holding ``trajectory: [{action, observation, thought, response, state, execution_time, …}]``, ``history`` (the
      message list) and ``info{exit_status, submission, model_stats, …}``.
    * **mini-swe-agent** (``SWE-agent/mini-swe-agent``): ``<run>/<instance_id>/<instance_id>.traj.json`` holding
      ``{info{exit_status, submission, model_stats, mini_version, config}, messages: [system, user (task),
      (assistant, user)*], trajectory_format, instance_id}``. In ``mini-swe-agent-1`` files an assistant turn is
      free text (``THOUGHT: …``) plus exactly one fenced ```` ```bash ```` block, and the next user message is the
      observation (``<returncode>n</returncode>`` then ``<output>…</output>``). v2 files (``mini-swe-agent-1.1``)
      also carry the parsed actions in ``extra.actions`` and the exit code in the observation's
      ``extra.returncode``; tool-call models use OpenAI ``tool_calls`` answered by ``role: "tool"`` messages. All
      three variants are read.
    * **Verdicts** are *not* in the trajectory: they come from the SWE-bench harness, joined on ``instance_id``
      (:func:`load_verdicts`): a run-level ``results_summary.json`` (``instances[{instance_id, resolved}]``), a
      SWE-bench report or submission ``results.json`` with lists (``resolved`` / ``resolved_ids`` plus
      ``unresolved_ids``, ``empty_patch_ids``, ``error_ids``, ``no_generation``, …), per-instance ``report.json``
      files (``{instance_id: {resolved, …}}``) or a folder of them, or a plain ``{instance_id: bool}`` mapping.
      In a lists-style file every listed id other than the resolved ones counts as unresolved (``error_ids`` too, as
      SWE-bench's own resolve rate counts them). An instance named in no list has no verdict when the file
      enumerates what was evaluated (``submitted_ids`` / ``completed_ids`` / ``unresolved_ids``), and is unresolved
      in a SWE-bench ``experiments`` ``results.json`` (only ``resolved`` plus exclusion lists); such a file that
      names none of ten or more instances read is refused as belonging to another run.

    The real sample in ``../shared/data/swebench-verified-mini-swe-agent-gemini-3-pro/`` (mini-swe-agent v1.15.0,
    Gemini 3 Pro, SWE-bench Verified) reads as 250 traces, 183 success / 67 failure, 13–145 steps per trace
    (9,830 steps, of which 348 are rejected turns with zero or several bash blocks).

Options
    ``verdicts`` — a verdict file or folder (any shape above), or a ``{instance_id: bool}`` mapping. Without it the
    reader looks for ``results_summary.json``, ``results/results.json`` or ``results.json`` in each run folder and
    up to two folders above it (so ``<run>/results_summary.json`` beside ``<run>/trajs/`` is found whether you pass
    ``<run>``, ``<run>/trajs`` or one trajectory file). A file found there that is not a verdict file is ignored.

Field mapping (one canonical record per agent step)
    * ``trace_id`` / ``task_id`` — the ``instance_id`` (mini: the file's ``instance_id`` field; SWE-agent: the file
      name without ``.traj``). ``trial`` is 0. When a folder holds several *run folders* (the folder above the
      ``<instance_id>/`` folder, or the folder holding the file) with the same instance, each run is a trial of it:
      trial = the rank of the run folder among the sorted run folders holding that instance, and ``trace_id``
      becomes ``"<run folder relative to the path read>/<instance_id>"``.
    * steps — SWE-agent: each ``trajectory[]`` item is one step. mini-swe-agent: each assistant message is one step
      per action (v1 text has exactly one). ``step_kind`` is ``"tool"`` with ``tool_name`` from
      :func:`command_name` and ``text`` = the full command. A turn with no action (SWE-agent: empty ``action``,
      e.g. a requery or the autosubmission step; mini v1: zero or several bash blocks, which mini-swe-agent rejects
      without running anything) is one ``"llm"`` step whose ``text`` is the turn's text; a rejected mini v1 turn
      has ``error=True``, ``error_type="format_error"``.
    * ``error`` of a tool step — mini: the observation's exit code (``extra.returncode``, else the
      ``<returncode>n</returncode>`` tag) is non-zero → ``error_type="nonzero_exit"`` (note ``grep`` with no match
      exits 1); a killed command (mini's "timed out and has been killed" observation) → ``error_type="timeout"``.
      SWE-agent observations carry no exit code, so ``error`` is False unless the step has a ``returncode`` /
      ``exit_code`` field (top level or in ``extra_info``). No text heuristics.
    * ``t_start`` (mini) — the message's ``extra.timestamp`` (v2) or the API response's ``created`` time; ``t_end``
      — the observation's ``extra.timestamp`` (v2). ``tokens_in`` / ``tokens_out`` / ``cost_usd`` (mini) — the
      response ``usage`` (``prompt_tokens``, ``completion_tokens``, ``cost``) or ``extra.cost``, on the first step
      of the turn. Episode totals from ``info.model_stats`` (``instance_cost``, ``tokens_sent``,
      ``tokens_received``, ``api_calls``) go in the trace-level ``total_cost_usd``, ``total_tokens_in``,
      ``total_tokens_out`` and ``total_api_calls`` (SWE-agent steps carry no usage, so the totals are all there is;
      the cost model then estimates per-state costs from them).
    * ``termination_reason`` — ``info.exit_status`` as written (``Submitted``, ``LimitsExceeded``, ``submitted``,
      ``submitted (exit_cost)``, ``exit_context``, ``RetryError``, …).
    * ``outcome`` — from the verdict and the exit status, in this order:
        1. resolved → ``success`` (whatever the exit status: an autosubmitted patch that passes still passed);
        2. an infrastructure exit (SWE-agent ``exit_api`` / ``exit_environment_error`` / ``exit_error``; a mini
           status naming an exception class, e.g. ``RetryError``, other than the budget ones) → ``invalid``, with
           or without a verdict;
        3. no verdict for the instance → an error naming the instance and suggesting ``verdicts=`` (with
           ``on_error="skip"`` the trace is skipped and counted);
        4. a budget exit (mini ``LimitsExceeded``, SWE-agent ``exit_cost`` / ``exit_context`` /
           ``exit_total_execution_time`` / ``exit_command_timeout``, also as ``submitted (exit_…)``; any status
           naming a context-window, cost-limit or timeout error) → ``censored``;
        5. otherwise (``Submitted``, ``exit_format``, ``exit_forfeit``, unknown statuses) → ``failure``.

A trajectory with no step at all (e.g. a run that crashed before the first model call) is still a trial with an
outcome: it is kept as a zero-step episode (``table.report.zero_step``) and reported, never dropped.

:data:`SWE_TOKEN_CORPUS` reads the TraceToChain artifact's pre-tokenised SWE-bench corpus
(``tracetochain-artifact/swebench_real/corpus.json``: ``{instance_id: {toks: [token, …], resolved, label}}``, the
input of studies SS10/SS11/SS14 of Tran-Truong & Le 2026): one step per token, ``state`` = the token.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracetochain.exceptions import TraceValidationError
from tracetochain.readers._common import (
    Refusal,
    Sniffed,
    TraceBuilder,
    finite_float,
    head_text,
    json_loads,
    load_json,
    wrong_suffix,
)
from tracetochain.traces import Problem, TraceTable

__all__ = [
    "MINI_SWE_AGENT",
    "SWE_AGENT",
    "SWE_TOKEN_CORPUS",
    "MiniSweAgentReader",
    "SweAgentReader",
    "SweTokenCorpusReader",
    "Verdicts",
    "command_name",
    "exit_status_class",
    "find_verdicts",
    "load_verdicts",
]

# ================================================================================================ command words
#: Leading commands that only set up the shell; the tool name is the first command after them (``cd x && pytest``
#: → ``pytest``). When a command consists of nothing else, its own word is used (``cd x`` → ``cd``).
_SETUP_WORDS = frozenset({"cd", "pushd", "popd", "export", "source", ".", "set", "unset", "ulimit", "umask"})
#: Wrappers that run another command: skipped together with their options (``timeout 60 python x.py`` → ``python``).
_WRAPPERS = frozenset({"sudo", "time", "nohup", "env", "command", "exec", "nice", "stdbuf", "timeout"})
#: Wrapper options that take a separate argument.
_WRAPPER_ARG_OPTIONS = {"sudo": {"-u", "-g", "-h", "-p", "-C"}, "timeout": {"-s", "-k", "--signal", "--kill-after"},
                        "nice": {"-n"}, "env": {"-u", "-C", "-S"}, "stdbuf": {"-i", "-o", "-e"}}
_SEPARATORS = frozenset({"&&", "||", ";", "|", "&", "|&", ";;", "\n"})
_GROUPING = frozenset({"(", ")", "{", "}", "!", "((", "))"})
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
#: File-editor tools whose sub-command is part of the tool name (``str_replace_editor view …`` →
#: ``str_replace_editor:view``), as in the paper's SWE-agent tokeniser (``edit:view`` …).
_EDITOR_TOOLS = frozenset({"str_replace_editor", "str_replace_based_edit_tool"})
#: mini-swe-agent submits by printing this marker (v1.x ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git …``;
#: older releases ``MINI_SWE_AGENT_FINAL_OUTPUT``).
_SUBMIT_MARKERS = ("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "MINI_SWE_AGENT_FINAL_OUTPUT")


#: What makes shlex do more than split words and runs of punctuation: quotes, the escape, the comment character.
_SHLEX_SPECIAL = re.compile(r"""['"\\#]""")
#: shlex's posix tokens (whitespace_split, punctuation_chars) of a line without any of those: runs of its
#: punctuation characters ``();<>|&``, and runs of anything else but its whitespace `` \t\r\n``.
_PLAIN_WORDS = re.compile(r"[();<>|&]+|[^ \t\r\n();<>|&]+")
#: The same with quotes, escapes and comments, as shlex's posix rules have them: a word is a run of plain characters,
#: escaped characters (``\x`` is x), '…' parts (literal) and "…" parts (``\"`` and ``\\`` escaped, any other
#: backslash kept), each quoted part, whitespace and punctuation included, belonging to the word around it; ``#``
#: outside quotes, even inside a word, ends the word and drops the rest of its line. What remains alone (a quote
#: left open, a final backslash) fails the line as shlex does.
_SHELL_WORDS = re.compile(r"""[();<>|&]+"""
                          r"""|(?:[^ \t\r\n();<>|&'"\\#]+|\\[\s\S]|'[^']*'|"(?:[^"\\]|\\[\s\S])*")+"""
                          r"""|#[^\n]*|['"\\]""")
_WORD_PART = re.compile(r"""'([^']*)'|"((?:[^"\\]|\\[\s\S])*)"|\\([\s\S])""")
_DQUOTE_ESCAPE = re.compile(r'\\(["\\])')


def _word_part(part: re.Match[str]) -> str:
    single, double, escaped = part.groups()
    if single is not None:
        return single
    if double is not None:
        return _DQUOTE_ESCAPE.sub(r"\1", double)
    return escaped


def _shell_words(text: str) -> list[str]:
    """``list(shlex.shlex(text, posix=True, punctuation_chars=True))`` with ``whitespace_split``, by regular
    expressions instead of shlex's character-by-character Python loop (~100× faster on the long quoted commands
    agents write): the same tokens, and a ValueError where shlex raises one (an unclosed quote, a final escape), as
    tests/readers/test_swe_agent_words.py checks against shlex itself."""
    if _SHLEX_SPECIAL.search(text) is None:
        return _PLAIN_WORDS.findall(text)
    words: list[str] = []
    for w in _SHELL_WORDS.findall(text):
        head = w[0]
        if head == "#":
            continue
        if w in ("'", '"', "\\"):
            raise ValueError("No closing quotation" if head != "\\" else "No escaped character")
        words.append(_WORD_PART.sub(_word_part, w) if ("'" in w or '"' in w or "\\" in w) else w)
    return words


def _command_lines(command: str, max_lines: int = 200) -> Iterator[list[str]]:
    """Shell tokens of each logical line of a command, one list per line (a line break separates commands).

    A quoted argument may span lines; comment lines are dropped; a heredoc's body (the lines after the line holding
    ``<<``) is not read. If quotes never balance, the first line is split on whitespace and operators instead. A
    generator, so :func:`command_name` stops reading at the line that holds the command it names.
    """
    lines = command.splitlines()[:max_lines]
    pending = ""
    produced = False
    for line in lines:
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        text = pending + line
        if text.rstrip().endswith("\\"):
            pending = text.rstrip()[:-1] + " "
            continue
        try:
            line_tokens = _shell_words(text)
        except ValueError:  # a quote continues on the next line
            pending = text + "\n"
            continue
        pending = ""
        produced = produced or bool(line_tokens)
        yield line_tokens
        if any(t.startswith("<<") for t in line_tokens):
            return  # a heredoc body follows
    if pending and not produced:
        first = pending.splitlines()[0] if pending.strip() else ""
        yield re.findall(r"&&|\|\||[;|&()]|[^\s;|&()]+", first)


def _segment_word(tokens: list[str]) -> tuple[str, list[str]] | None:
    """The command word of one simple command (assignments and wrappers skipped) and the tokens after it."""
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if _ASSIGNMENT.match(tok):
            i += 1
            continue
        if tok in _WRAPPERS:
            wrapper = tok
            i += 1
            while i < len(tokens) and (tokens[i].startswith("-")
                                       or (wrapper == "env" and _ASSIGNMENT.match(tokens[i]))):
                i += 2 if tokens[i] in _WRAPPER_ARG_OPTIONS.get(wrapper, set()) else 1
            if wrapper == "timeout" and i < len(tokens):
                i += 1  # the duration
            if i >= len(tokens):
                return wrapper, []  # the wrapper alone
            continue
        return tok, tokens[i + 1:]
    return None


def command_name(command: str | None) -> str | None:
    """The tool name of a shell action: its first command word, following a documented rule.

    1. A command containing mini-swe-agent's submit marker (``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``) is
       ``"submit"``.
    2. The command is split into shell words (a quoted argument may span lines; ``\\`` continues a line; comment
       lines are dropped; the body of a heredoc, i.e. the lines after the one holding ``<<``, is not read).
    3. The words are split into simple commands at ``&&``, ``||``, ``;``, ``|``, ``&`` and line breaks (grouping
       ``( ) { }`` is ignored). Leading setup commands (``cd``, ``pushd``, ``popd``, ``export``, ``source``, ``.``,
       ``set``, ``unset``, ``ulimit``, ``umask``) are skipped, so ``cd /repo && python x.py`` gives ``python``; a
       command that is only setup keeps its own word (``cd /repo`` → ``cd``).
    4. In the chosen command, variable assignments (``PYTHONPATH=. pytest`` → ``pytest``) and wrappers with their
       options (``sudo``, ``time``, ``nohup``, ``env``, ``command``, ``exec``, ``nice``, ``stdbuf``,
       ``timeout DURATION``) are skipped.
    5. The word's directory is dropped (``./tests/runtests.py`` → ``runtests.py``, ``/usr/bin/python3`` →
       ``python3``). Shell keywords stay as they are (``for f in …; do …`` → ``for``).
    6. SWE-agent's file editor keeps its sub-command: ``str_replace_editor view /x`` → ``str_replace_editor:view``.

    Returns None for an empty action.

    >>> command_name("cd /testbed && PYTHONPATH=. timeout 60 python -m pytest -x")
    'python'
    >>> command_name("cat <<'EOF' > fix.py\\nprint(1)\\nEOF")
    'cat'
    >>> command_name("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached")
    'submit'
    """
    if command is None:
        return None
    if any(marker in command for marker in _SUBMIT_MARKERS):
        return "submit"
    words: list[tuple[str, list[str]]] = []
    for line_tokens in _command_lines(command):  # a line break ends a simple command, so lines split apart
        segments: list[list[str]] = [[]]
        for tok in line_tokens:
            if tok in _SEPARATORS:
                segments.append([])
            elif tok not in _GROUPING:
                segments[-1].append(tok)
        words += [w for w in (_segment_word(seg) for seg in segments if seg) if w is not None]
        if any(w[0] not in _SETUP_WORDS for w in words):
            break  # the first command that is not setup is the one named: later lines cannot change it
    if not words:
        return None
    chosen = next((w for w in words if w[0] not in _SETUP_WORDS), words[0])
    word, rest = chosen
    base = word.rstrip("/").rsplit("/", 1)[-1] or word
    if base in _EDITOR_TOOLS and rest and not rest[0].startswith("-"):
        return f"{base}:{rest[0]}"
    return base


# ================================================================================================ exit statuses
_BUDGET_STATUSES = frozenset({
    "limitsexceeded", "exit_cost", "exit_context", "exit_total_execution_time", "exit_command_timeout",
    "exit_step_limit", "exit_steps", "costlimitexceedederror", "contextwindowexceedederror",
})
_INFRA_STATUSES = frozenset({"exit_api", "exit_environment_error", "exit_error", "exit_env_error"})
_BUDGET_HINTS = ("contextwindow", "context_window", "contextlength", "context_length", "costlimit", "cost_limit",
                 "limitsexceeded", "timeout", "timedout")


def exit_status_class(status: str | None) -> str:
    """``"budget"``, ``"infra"`` or ``"normal"`` for an ``info.exit_status`` (see the module docstring, rules 2–5).

    ``submitted (exit_cost)`` (SWE-agent's autosubmission after an error) is classed by the reason in brackets.

    >>> [exit_status_class(s) for s in ("Submitted", "LimitsExceeded", "submitted (exit_context)", "RetryError")]
    ['normal', 'budget', 'budget', 'infra']
    """
    if not status:
        return "normal"
    s = status.strip().lower()
    m = re.fullmatch(r"submitted\s*\((.*)\)", s)
    if m:
        s = m.group(1).strip()
    if s in _BUDGET_STATUSES or any(h in s.replace(" ", "") for h in _BUDGET_HINTS):
        return "budget"
    if s in _INFRA_STATUSES:
        return "infra"
    if re.fullmatch(r"[a-z_.]*(error|exception)", s) or status.strip().endswith(("Error", "Exception")):
        return "infra"
    return "normal"


# ================================================================================================ verdicts
_VERDICT_FILE_NAMES = ("results_summary.json", "results/results.json", "results.json")
_RESOLVED_KEYS = ("resolved", "resolved_ids")
#: Lists whose presence means the report enumerates every instance it evaluated (SWE-bench harness reports), so an
#: instance in none of its lists has no verdict. Without them (a SWE-bench ``experiments`` ``results.json`` with
#: only ``resolved`` / ``no_generation`` / ``no_logs``) an unlisted instance counts as not resolved.
_UNIVERSE_KEYS = ("submitted_ids", "completed_ids", "unresolved_ids", "unresolved", "incomplete_ids")


@dataclass(frozen=True)
class Verdicts:
    """SWE-bench verdicts: ``known[instance_id]`` is True when resolved; ``unlisted`` is the verdict of an instance
    the file does not mention (None: it has no verdict)."""

    known: Mapping[str, bool]
    unlisted: bool | None = None
    source: str = "verdicts"

    def get(self, instance_id: str) -> bool | None:
        if instance_id in self.known:
            return self.known[instance_id]
        return self.unlisted

    def __len__(self) -> int:
        return len(self.known)


def _verdict_error(message: str, source: Path | str, *, field: str | None = None, row: int | None = None) -> \
        TraceValidationError:
    return TraceValidationError(
        message, source=str(source), field=field, row=row,
        hint="a verdict file is results_summary.json ({\"instances\": [{\"instance_id\", \"resolved\"}]}), a "
             "SWE-bench report with resolved/resolved_ids lists, per-instance report.json "
             "({instance_id: {\"resolved\": bool}}) or {instance_id: true/false}",
    )


def _string_list(value: Any) -> list[str] | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    return None


def parse_verdicts(data: Any, source: Path | str = "verdicts") -> Verdicts:
    """Verdicts from parsed JSON in any of the shapes listed in the module docstring."""
    known: dict[str, bool] = {}
    if isinstance(data, dict) and isinstance(data.get("instances"), list):
        data = data["instances"]
    if isinstance(data, list):
        for i, item in enumerate(data):
            if not isinstance(item, dict) or not isinstance(item.get("instance_id"), str):
                raise _verdict_error("expected an object with a text 'instance_id'", source, field="instance_id",
                                     row=i)
            if not isinstance(item.get("resolved"), bool):
                raise _verdict_error(f"'resolved' must be true or false, got {item.get('resolved')!r}", source,
                                     field="resolved", row=i)
            known[item["instance_id"]] = item["resolved"]
        return Verdicts(known, None, str(source))
    if not isinstance(data, dict):
        raise _verdict_error(f"expected a JSON object or list, got {type(data).__name__}", source)
    resolved_lists = [k for k in _RESOLVED_KEYS if k in data]
    if resolved_lists:
        for key in resolved_lists:
            if _string_list(data[key]) is None:
                raise _verdict_error(f"'{key}' must be a list of instance ids", source, field=key)
        for key, value in data.items():
            ids = _string_list(value)
            if key in _RESOLVED_KEYS or ids is None or not isinstance(value, list):
                continue
            for iid in ids:
                known.setdefault(iid, False)
        for key in resolved_lists:
            for iid in data[key]:
                known[iid] = True
        explicit = any(isinstance(data.get(k), list) for k in _UNIVERSE_KEYS)
        return Verdicts(known, None if explicit else False, str(source))
    for iid, value in data.items():
        if isinstance(value, bool):
            known[iid] = value
        elif isinstance(value, dict) and isinstance(value.get("resolved"), bool):
            known[iid] = value["resolved"]
        else:
            raise _verdict_error(f"no resolved true/false for instance {iid!r}", source, field=f"{iid}.resolved")
    return Verdicts(known, None, str(source))


def load_verdicts(path: str | Path) -> Verdicts:
    """Read SWE-bench verdicts from a file, or from a folder (a known verdict file in it, else every ``report.json``
    below it, merged)."""
    p = Path(path)
    if p.is_dir():
        for name in _VERDICT_FILE_NAMES:
            if (p / name).is_file():
                return load_verdicts(p / name)
        reports = sorted(p.rglob("report.json"))
        if not reports:
            raise TraceValidationError(
                "no verdict file in this folder", source=str(p),
                hint=f"expected one of {', '.join(_VERDICT_FILE_NAMES)} or per-instance report.json files",
            )
        merged: dict[str, bool] = {}
        for report in reports:
            merged.update(parse_verdicts(load_json(report), report).known)
        return Verdicts(merged, None, str(p))
    if not p.is_file():
        raise TraceValidationError("no such verdict file", source=str(p))
    return parse_verdicts(load_json(p), p)


def find_verdicts(start: Path, levels: int = 2) -> Path | None:
    """The first verdict file (``results_summary.json``, ``results/results.json``, ``results.json``) in ``start``
    or up to ``levels`` folders above it that parses as verdicts; None when there is none."""
    folder = start if start.is_dir() else start.parent
    for _ in range(levels + 1):
        for name in _VERDICT_FILE_NAMES:
            candidate = folder / name
            if candidate.is_file():
                try:
                    parse_verdicts(load_json(candidate), candidate)
                except TraceValidationError:
                    continue
                return candidate
        if folder.parent == folder:
            break
        folder = folder.parent
    return None


def _coerce_verdicts(verdicts: Any) -> Verdicts | None:
    if verdicts is None:
        return None
    if isinstance(verdicts, Verdicts):
        return verdicts
    if isinstance(verdicts, (str, os.PathLike)):
        return load_verdicts(Path(verdicts))
    if isinstance(verdicts, Mapping):
        bad = [k for k, v in verdicts.items() if not isinstance(k, str) or not isinstance(v, bool)]
        if bad:
            raise TypeError(f"verdicts must map instance ids to True/False; bad entry for {bad[0]!r}")
        return Verdicts(dict(verdicts), None, "verdicts mapping")
    raise TypeError(f"verdicts must be a path, a folder or a {{instance_id: bool}} mapping, got "
                    f"{type(verdicts).__name__}")


# ================================================================================================ files
_TRAJ_SUFFIXES = (".traj.json", ".traj")
_FIRST_KEY = re.compile(r'^\s*\{\s*"([^"\\]*)"\s*:')


def _is_trajectory_name(name: str) -> bool:
    return name.endswith(_TRAJ_SUFFIXES)


def _instance_from_name(path: Path) -> str:
    name = path.name
    for suffix in _TRAJ_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


def classify_head(head: str) -> str | None:
    """``"swe-agent"``, ``"mini-swe-agent"`` or None from the first bytes of a trajectory file.

    SWE-agent writes ``trajectory`` (v1) or ``environment`` (v0) first; mini-swe-agent writes ``info`` first (with
    ``exit_status`` or ``model_stats`` inside), or ``messages``/``trajectory_format``/``instance_id``.
    """
    m = _FIRST_KEY.match(head)
    if not m:
        return None
    first = m.group(1)
    if first == "trajectory" or (first == "environment" and re.search(r'"trajectory"\s*:\s*\[', head)):
        return "swe-agent"
    if first in ("messages", "trajectory_format", "instance_id"):
        return "mini-swe-agent"
    if first == "info" and re.match(r'^\s*\{\s*"info"\s*:\s*\{\s*"(exit_status|model_stats|submission|config|'
                                    r'mini_version)"', head):
        return "mini-swe-agent"
    return None


def _classify_data(data: Any) -> str | None:
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("trajectory"), list):
        return "swe-agent"
    if isinstance(data.get("messages"), list):
        return "mini-swe-agent"
    return None


def _walk_trajectories(root: Path, limit: int | None = None, max_entries: int | None = None,
                       unreadable: list[tuple[Path, str]] | None = None) -> list[Path]:
    """Trajectory files under ``root`` in sorted, depth-first order.

    Sniffing passes ``limit`` (stop after that many files) and ``max_entries`` (stop after that many directory
    entries, to stay cheap). Reading passes neither, so every entry is looked at, and ``unreadable``, which
    collects the folders that could not be listed (with the reason) so the reader can name them instead of
    leaving their trajectories out without a word.
    """
    found: list[Path] = []
    seen = 0
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            if unreadable is not None:
                unreadable.append((folder, exc.strerror or type(exc).__name__))
            continue
        subdirs: list[Path] = []
        for entry in entries:
            seen += 1
            if max_entries is not None and seen > max_entries:
                return found
            if entry.name.startswith("."):
                continue
            if entry.is_dir(follow_symlinks=False):
                subdirs.append(Path(entry.path))
            elif _is_trajectory_name(entry.name) and entry.is_file():
                found.append(Path(entry.path))
                if limit is not None and len(found) >= limit:
                    return found
        stack.extend(reversed(subdirs))
    return found


def _run_folder(path: Path, instance_id: str) -> Path:
    parent = path.parent
    if parent.name in (instance_id, _instance_from_name(path)):
        return parent.parent
    return parent


def _rel(path: Path, root: Path) -> str:
    try:
        rel = path.relative_to(root).as_posix()
    except ValueError:
        rel = path.as_posix()
    return rel if rel not in ("", ".") else path.name


# ================================================================================================ JSON helpers
def _get(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _int_or_none(value: Any) -> int | None:
    """An integer that fits in 64 bits (from an int, an integral float or decimal text); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**63 else None
    if isinstance(value, str) and re.fullmatch(r"\s*-?[0-9]{1,18}\s*", value):
        return int(value)
    return None


def _num_or_none(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return finite_float(value)


def model_stats_totals(data: Any) -> dict[str, Any]:
    """Episode totals from ``info.model_stats`` as trace-level columns (``total_cost_usd`` ← ``instance_cost``,
    ``total_tokens_in`` ← ``tokens_sent``, ``total_tokens_out`` ← ``tokens_received``, ``total_api_calls`` ←
    ``api_calls``). SWE-agent's ``total_cost`` is the running cost of the whole batch, not of the episode, and is
    not used. Values that are not non-negative numbers are left out (usage is optional metadata).

    >>> model_stats_totals({"info": {"model_stats": {"instance_cost": 0.25, "api_calls": 20}}})
    {'total_cost_usd': 0.25, 'total_api_calls': 20}
    """
    stats = _get(data, "info", "model_stats")
    out: dict[str, Any] = {}
    if not isinstance(stats, dict):
        return out
    cost = _num_or_none(stats.get("instance_cost"))
    if cost is not None and cost >= 0:
        out["total_cost_usd"] = cost
    for key, column in (("tokens_sent", "total_tokens_in"), ("tokens_received", "total_tokens_out"),
                        ("api_calls", "total_api_calls")):
        value = _int_or_none(stats.get(key))
        if value is not None and value >= 0:
            out[column] = value
    return out


def _text(content: Any) -> str:
    """Message content as text: a string, or the text parts of an OpenAI content list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") if isinstance(p, dict) else p for p in content]
        return "\n".join(p for p in parts if isinstance(p, str))
    return ""


# ================================================================================================ episodes
class _FileProblem(Exception):
    """A malformed trajectory file: message, field and hint for the error or the skip record."""

    def __init__(self, message: str, field: str | None = None, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.hint = hint


@dataclass
class _Episode:
    path: Path
    index: int
    instance_id: str
    exit_status: str | None
    steps: list[dict[str, Any]]
    locations: list[int]
    run: Path = field(default_factory=Path)
    trial: int = 0
    trace_id: str = ""
    totals: dict[str, Any] = field(default_factory=dict)


_RETURNCODE = re.compile(r"^\s*<returncode>\s*(-?[0-9]{1,18})\s*</returncode>")
_TIMEOUT = re.compile(r"^\s*The last command\b.*\btimed out\b", re.DOTALL)
_DEFAULT_ACTION_REGEX = r"```(?:bash|mswea_bash_command)\s*\n(.*?)\n```"


def _observation_error(message: Any) -> tuple[bool, str | None, float | None]:
    """(error, error_type, timestamp) of a mini-swe-agent observation message."""
    if not isinstance(message, dict):
        return False, None, None
    extra = message.get("extra")
    stamp = _num_or_none(_get(extra, "timestamp"))
    code = _int_or_none(_get(extra, "returncode"))
    content = _text(message.get("content"))
    if code is None:
        m = _RETURNCODE.match(content)
        code = int(m.group(1)) if m else None
    if code is not None:
        return (code != 0), ("nonzero_exit" if code != 0 else None), stamp
    if _TIMEOUT.match(content[:2000]):
        return True, "timeout", stamp
    return False, None, stamp


def _tool_call_command(call: Any) -> str | None:
    """The shell command of an OpenAI tool call (``function.arguments`` JSON with a ``command`` key)."""
    args = _get(call, "function", "arguments")
    if isinstance(args, str):
        try:
            parsed = json_loads(args)
        except ValueError:  # not JSON (or beyond the parser's limits): the text is the command
            return args
        args = parsed
    if isinstance(args, dict):
        cmd = args.get("command") or args.get("cmd")
        return cmd if isinstance(cmd, str) else None
    return None


def _mini_steps(data: dict[str, Any]) -> tuple[list[dict[str, Any]], list[int]]:
    messages = data.get("messages")
    if not isinstance(messages, list):
        raise _FileProblem("'messages' must be a list of chat messages", "messages")
    regex_text = _get(data, "info", "config", "agent", "action_regex")
    try:
        action_re = re.compile(regex_text if isinstance(regex_text, str) else _DEFAULT_ACTION_REGEX, re.DOTALL)
    except re.error:
        action_re = re.compile(_DEFAULT_ACTION_REGEX, re.DOTALL)
    steps: list[dict[str, Any]] = []
    locations: list[int] = []
    n_messages = len(messages)
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict):
            raise _FileProblem(f"messages[{i}] is not an object", f"messages[{i}]")
        if msg.get("role") != "assistant":
            continue
        content = _text(msg.get("content"))
        raw_extra = msg.get("extra")
        extra: dict[str, Any] = raw_extra if isinstance(raw_extra, dict) else {}
        # the observations answering this turn: the following non-assistant messages
        following: list[dict[str, Any]] = []
        j = i + 1
        while j < n_messages:
            nxt = messages[j]
            if not isinstance(nxt, dict) or nxt.get("role") == "assistant":
                break
            if nxt.get("role") in ("user", "tool"):
                following.append(nxt)
            j += 1
        commands: list[str] = []
        structured = False
        observations: list[dict[str, Any] | None] = []
        actions = extra.get("actions")
        tool_calls = msg.get("tool_calls")
        if isinstance(tool_calls, list) and tool_calls:
            structured = True
            commands = []
            tool_msgs = [m for m in following if m.get("role") == "tool"]
            # ids are matched only when they are text (an id of another JSON type cannot name a call)
            by_id = {m["tool_call_id"]: m for m in tool_msgs if isinstance(m.get("tool_call_id"), str)}
            for k, call in enumerate(tool_calls):
                commands.append(_tool_call_command(call) or "")
                cid = call.get("id") if isinstance(call, dict) else None
                observations.append(by_id[cid] if isinstance(cid, str) and cid in by_id
                                    else (tool_msgs[k] if k < len(tool_msgs) else None))
        elif isinstance(actions, list):
            structured = True
            commands = []
            for a in actions:
                cmd = a.get("command") if isinstance(a, dict) else a
                commands.append(cmd if isinstance(cmd, str) else "")
            observations = [following[k] if k < len(following) else None for k in range(len(commands))]
        else:
            found = action_re.findall(content)
            commands = [f if isinstance(f, str) else next((g for g in f if g), "") for f in found]
            observations = [following[0] if following else None] if len(commands) == 1 else []
        usage = _get(extra, "response", "usage")
        first: dict[str, Any] = {
            "t_start": _num_or_none(extra.get("timestamp")) or _num_or_none(_get(extra, "response", "created")),
            "tokens_in": _int_or_none(_get(usage, "prompt_tokens")),
            "tokens_out": _int_or_none(_get(usage, "completion_tokens")),
            "cost_usd": next((c for c in (_num_or_none(extra.get("cost")), _num_or_none(_get(usage, "cost")))
                              if c is not None), None),
        }
        if (structured and commands) or (not structured and len(commands) == 1):
            for k, cmd in enumerate(commands):
                error, error_type, t_end = _observation_error(observations[k] if k < len(observations) else None)
                step = {"step_kind": "tool", "tool_name": command_name(cmd), "text": cmd, "error": error,
                        "error_type": error_type, "t_end": t_end}
                if k == 0:
                    step.update(first)
                else:
                    step["t_start"] = first["t_start"]
                steps.append(step)
                locations.append(i)
        else:
            rejected = not structured  # mini v1 rejects a turn without exactly one bash block
            step = {"step_kind": "llm", "text": content, "error": rejected,
                    "error_type": "format_error" if rejected else None, **first}
            steps.append(step)
            locations.append(i)
    return steps, locations


def _swe_steps(data: dict[str, Any]) -> tuple[list[dict[str, Any]], list[int]]:
    trajectory = data.get("trajectory")
    if not isinstance(trajectory, list):
        raise _FileProblem("'trajectory' must be a list of steps", "trajectory")
    steps: list[dict[str, Any]] = []
    locations: list[int] = []
    for i, item in enumerate(trajectory):
        if not isinstance(item, dict):
            raise _FileProblem(f"trajectory[{i}] is not an object", f"trajectory[{i}]")
        action = item.get("action")
        if action is not None and not isinstance(action, str):
            raise _FileProblem(f"trajectory[{i}].action must be text, got {type(action).__name__}",
                               f"trajectory[{i}].action")
        code: int | None = None
        for source in (item, item.get("extra_info")):
            for key in ("returncode", "exit_code"):
                if code is None:
                    code = _int_or_none(_get(source, key))
        error = code is not None and code != 0
        if action is None or not action.strip():
            thought = item.get("thought") if isinstance(item.get("thought"), str) else None
            response = item.get("response") if isinstance(item.get("response"), str) else None
            steps.append({"step_kind": "llm", "text": thought or response or ""})
        else:
            steps.append({"step_kind": "tool", "tool_name": command_name(action), "text": action.strip(),
                          "error": error, "error_type": "nonzero_exit" if error else None})
        locations.append(i)
    return steps, locations


# ================================================================================================ readers
class _TrajectoryReader:
    name = ""
    description = ""
    needs = ("a SWE-bench verdict file via verdicts=PATH (results_summary.json, a report with resolved ids, or "
             "report.json files); found automatically when results_summary.json or results/results.json sits "
             "beside the trajectories")
    kind = ""

    # ------------------------------------------------------------------ sniffing
    def sniff(self, path: Path) -> Sniffed:
        path = Path(path)
        if path.is_dir():
            first = _walk_trajectories(path, limit=1, max_entries=20_000)
            if not first:
                return Refusal(f"a folder without {' or '.join(_TRAJ_SUFFIXES)} trajectory files")
            path = first[0]
        elif not (path.is_file() and _is_trajectory_name(path.name)):
            return Refusal(f"reads trajectory files named *{' or *'.join(_TRAJ_SUFFIXES)} (or a run folder)")
        kind = classify_head(head_text(path))
        if kind == self.kind:
            return True
        return Refusal(f"a {kind} trajectory" if kind else "not a trajectory this reader knows")

    # ------------------------------------------------------------------ reading
    def _parse(self, data: dict[str, Any], path: Path) -> tuple[str, list[dict[str, Any]], list[int]]:
        raise NotImplementedError

    def read(self, path: Path, *, on_error: str = "raise", verdicts: Any = None, **options: Any) -> TraceTable:
        """Read one trajectory file or a folder of them (searched recursively); options: ``verdicts``."""
        if options:
            raise TypeError(f"the {self.name} reader takes only verdicts=, got {sorted(options)}")
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
        path = Path(path)
        if not path.exists():
            raise TraceValidationError("no such file or folder", source=str(path))
        explicit = _coerce_verdicts(verdicts)
        builder = TraceBuilder(source=str(path), format=self.name, on_error=on_error, location_kind="row")
        root = path if path.is_dir() else path.parent
        unreadable: list[tuple[Path, str]] = []
        files = _walk_trajectories(path, unreadable=unreadable) if path.is_dir() else [path]
        for folder, reason in unreadable:  # never a silent gap: name the folder, or count it
            if on_error == "raise":
                raise TraceValidationError(f"cannot read this folder ({reason})", source=str(folder),
                                           hint="make it readable, or pass --on-error skip to count it and go on")
            builder.problems.append(Problem(None, None, f"folder could not be read ({_rel(folder, root)}: {reason})"))
        if not files and not unreadable:
            raise TraceValidationError(
                "no trajectory files (*.traj, *.traj.json) in this folder", source=str(path),
                hint="pass the run folder that holds <instance_id>/<instance_id>.traj(.json) files",
            )

        def problem(file: Path, index: int, message: str, fld: str | None = None, hint: str | None = None,
                    *, detail: str | None = None) -> None:
            """Raise naming the file, or count the dropped trace (the report groups skips by ``message``; the
            details and the file go in brackets)."""
            text = f"{message} ({detail})" if detail else message
            builder.skip_trace(text, location=None, field=fld, hint=hint, source=file)

        episodes: list[_Episode] = []
        for index, file in enumerate(files):
            try:
                data = load_json(file)
            except TraceValidationError as exc:
                if on_error == "raise":
                    raise
                what = "file could not be read" if str(exc).startswith(f"{file}: cannot read it") else \
                    "not a valid JSON file"
                builder.problems.append(Problem(index, None, f"{what} ({_rel(file, root)})", whole_trace=True))
                continue
            kind = _classify_data(data)
            if kind != self.kind:
                other = {"swe-agent": "a SWE-agent trajectory (format 'swe-agent')",
                         "mini-swe-agent": "a mini-swe-agent trajectory (format 'mini-swe-agent')"}.get(
                    kind or "", "not a trajectory")
                problem(file, index, f"expected a {self.name} trajectory, found {other}",
                        "trajectory" if self.kind == "swe-agent" else "messages",
                        "read SWE-agent and mini-swe-agent runs separately, each with its own format")
                continue
            try:
                instance_id, steps, locations = self._parse(data, file)
            except _FileProblem as exc:
                problem(file, index, exc.message, exc.field, exc.hint)
                continue
            status = _get(data, "info", "exit_status")
            if status is not None and not isinstance(status, str):
                problem(file, index, f"info.exit_status must be text, got {type(status).__name__}",
                        "info.exit_status")
                continue
            episodes.append(_Episode(file, index, instance_id, status, steps, locations,
                                     run=_run_folder(file, instance_id), totals=model_stats_totals(data)))

        self._assign_trials(episodes, root, explicit is not None)
        verdict_cache: dict[Path, Verdicts | None] = {}
        searched: dict[Path, Path | None] = {}
        for ep in episodes:
            found: Verdicts | None = explicit
            if found is None:
                if ep.run not in verdict_cache:
                    vpath = find_verdicts(ep.run)
                    searched[ep.run] = vpath
                    verdict_cache[ep.run] = load_verdicts(vpath) if vpath is not None else None
                found = verdict_cache[ep.run]
            resolved = found.get(ep.instance_id) if found is not None else None
            cls = exit_status_class(ep.exit_status)
            if resolved is True:
                outcome = "success"
            elif cls == "infra":
                outcome = "invalid"
            elif resolved is None:
                where = (f"no verdict file found beside the trajectories (looked for {', '.join(_VERDICT_FILE_NAMES)}"
                         " in the run folder and two folders above it)") if found is None else \
                    f"{found.source} has no verdict for it"
                problem(ep.path, ep.index, "no SWE-bench verdict for this instance", "instance_id",
                        "pass verdicts=PATH (results_summary.json, a SWE-bench report with resolved_ids, or a folder "
                        "of report.json files), or on_error='skip' to skip and count such traces",
                        detail=f"{ep.instance_id!r}: {where}")
                continue
            elif cls == "budget":
                outcome = "censored"
            else:
                outcome = "failure"
            trace = {"trace_id": ep.trace_id, "task_id": ep.instance_id, "trial": ep.trial, "outcome": outcome,
                     "termination_reason": ep.exit_status, **ep.totals}
            if not ep.steps:  # e.g. a run that crashed before the first model call: still a trial
                builder.add_zero_step(trace, ep.index)
            for idx, (step, loc) in enumerate(zip(ep.steps, ep.locations, strict=True)):
                builder.add_step({**trace, "step_idx": idx, **step}, loc)
        self._check_explicit_coverage(explicit, episodes)
        return builder.build()

    @staticmethod
    def _check_explicit_coverage(explicit: Verdicts | None, episodes: list[_Episode]) -> None:
        """A lists-style verdict file that names none of ≥ 10 instances is almost surely for another run."""
        if explicit is None or explicit.unlisted is None or len(episodes) < 10:
            return
        if not any(ep.instance_id in explicit.known for ep in episodes):
            raise TraceValidationError(
                f"the verdict file lists none of these {len(episodes)} instances, so every one would count as "
                "unresolved", source=explicit.source,
                hint="check that the verdict file belongs to this run, or pass verdicts={instance_id: bool}",
            )

    @staticmethod
    def _assign_trials(episodes: list[_Episode], root: Path, explicit_verdicts: bool) -> None:
        runs_of: dict[str, list[Path]] = {}
        for ep in episodes:
            runs = runs_of.setdefault(ep.instance_id, [])
            if ep.run in runs:
                raise TraceValidationError(
                    f"two trajectories for instance {ep.instance_id!r} in one run folder", source=str(ep.path),
                    field="instance_id", hint="keep one trajectory per instance in each run folder",
                )
            runs.append(ep.run)
        for ep in episodes:
            runs = sorted(runs_of[ep.instance_id], key=lambda p: p.as_posix())
            ep.trial = runs.index(ep.run)
            if len(runs) == 1:
                ep.trace_id = ep.instance_id
            else:
                if explicit_verdicts:
                    raise TraceValidationError(
                        f"instance {ep.instance_id!r} appears in {len(runs)} run folders, but one verdict file cannot "
                        "tell the runs apart", source=str(ep.path), field="verdicts",
                        hint="leave verdicts= unset so each run's own results_summary.json is used, or read each run "
                             "folder separately with its own verdicts=",
                    )
                ep.trace_id = f"{_rel(ep.run, root)}/{ep.instance_id}"


class SweAgentReader(_TrajectoryReader):
    name = "swe-agent"
    description = "SWE-agent .traj trajectories (trajectory[] of action/observation) joined with SWE-bench verdicts"
    kind = "swe-agent"

    def _parse(self, data: dict[str, Any], path: Path) -> tuple[str, list[dict[str, Any]], list[int]]:
        steps, locations = _swe_steps(data)
        instance_id = data.get("instance_id") if isinstance(data.get("instance_id"), str) else None
        return instance_id or _instance_from_name(path), steps, locations


class MiniSweAgentReader(_TrajectoryReader):
    name = "mini-swe-agent"
    description = "mini-swe-agent .traj.json trajectories (one bash action per assistant turn) + SWE-bench verdicts"
    kind = "mini-swe-agent"

    def _parse(self, data: dict[str, Any], path: Path) -> tuple[str, list[dict[str, Any]], list[int]]:
        iid = data.get("instance_id")
        if iid is not None and not isinstance(iid, str):
            raise _FileProblem(f"instance_id must be text, got {type(iid).__name__}", "instance_id")
        steps, locations = _mini_steps(data)
        return iid or _instance_from_name(path), steps, locations


SWE_AGENT = SweAgentReader()
MINI_SWE_AGENT = MiniSweAgentReader()


# ================================================================================================ token corpus
_CORPUS_HEAD = re.compile(r'^\s*\{\s*"(?:[^"\\]|\\.)*"\s*:\s*\{\s*"(toks|resolved|label)"\s*:')


class SweTokenCorpusReader:
    """The TraceToChain artifact's tokenised SWE-bench corpus: ``{instance_id: {toks, resolved, label}}``.

    Provenance: ``tracetochain-artifact/swebench_real/corpus.json`` (github.com/lexuanbach/TraceToChain,
    ``data/swebench_real/``): 479 SWE-agent + Claude-4-Sonnet SWE-bench Verified trajectories already reduced to one
    action token per step (first command word, editor sub-commands kept as ``edit:view`` …, empty action → ``none``).

    Mapping: ``trace_id`` = ``task_id`` = the key; one step per token with ``state`` = ``tool_name`` = the token
    and ``step_kind`` ``"tool"`` (so action vocabularies see the command word); ``outcome`` success when
    ``resolved`` is true, failure when false (``label`` ``"S"``/``"F"`` is used when ``resolved`` is absent, and
    must agree with it when both are present); ``trial`` 0. A trace with no token is dropped and counted.
    """

    name = "swe-token-corpus"
    description = "TraceToChain artifact corpus.json: {instance_id: {toks: [action tokens], resolved, label}}"
    needs = "nothing else"

    def sniff(self, path: Path) -> Sniffed:
        path = Path(path)
        if not path.is_file() or path.suffix.lower() != ".json":
            return wrong_suffix(path, (".json",))
        return bool(_CORPUS_HEAD.match(head_text(path, 4096))) or Refusal(
            "not the artifact's token corpus {instance_id: {toks, resolved}}")

    def read(self, path: Path, *, on_error: str = "raise", **options: Any) -> TraceTable:
        if options:
            raise TypeError(f"the {self.name} reader takes no options, got {sorted(options)}")
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
        path = Path(path)
        if not path.is_file():
            raise TraceValidationError("no such file", source=str(path))
        data = load_json(path)
        if not isinstance(data, dict):
            raise TraceValidationError(f"expected a JSON object keyed by instance id, got {type(data).__name__}",
                                       source=str(path), hint='write {"<instance_id>": {"toks": [...], '
                                                              '"resolved": true}, ...}')
        builder = TraceBuilder(source=str(path), format=self.name, on_error=on_error, location_kind="row")
        for index, (iid, entry) in enumerate(data.items()):
            toks = _get(entry, "toks")
            if not isinstance(toks, list) or not all(isinstance(t, str) and t for t in toks):
                builder.skip_trace(f"'toks' of {iid!r} must be a list of non-empty tokens", location=index,
                                   field=f"{iid}.toks", hint="each step is one action token such as 'python'")
                continue
            resolved = _get(entry, "resolved")
            label = _get(entry, "label")
            from_label = {"S": True, "F": False}.get(label) if isinstance(label, str) else None
            if resolved is None:
                resolved = from_label
            if not isinstance(resolved, bool) or (from_label is not None and from_label != resolved):
                builder.skip_trace(f"{iid!r} needs 'resolved' true/false (agreeing with 'label' S/F), got "
                                   f"resolved={_get(entry, 'resolved')!r}, label={label!r}", location=index,
                                   field=f"{iid}.resolved")
                continue
            if not toks:
                builder.problems.append(Problem(index, f"{iid}.toks", f"trace has no steps ({iid})",
                                                whole_trace=True))
                continue
            outcome = "success" if resolved else "failure"
            for k, tok in enumerate(toks):
                builder.add_step({"trace_id": iid, "task_id": iid, "trial": 0, "step_idx": k, "state": tok,
                                  "step_kind": "tool", "tool_name": tok, "outcome": outcome}, index)
        return builder.build()


SWE_TOKEN_CORPUS = SweTokenCorpusReader()
