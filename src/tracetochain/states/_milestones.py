"""MilestoneStates: states the user declares by conditions on step fields.

A milestone file (TOML, or YAML when PyYAML is installed) lists named states in priority order; a step takes the
first state whose conditions all hold, and unmatched steps go to a named catch-all::

    catch_all = "other"          # optional, default "other"
    vocabulary = "chat"          # optional: enables `category` conditions

    [[state]]
    name = "lookup"
    tool_name = ["get_*", "search_*"]     # one value or a list; shell-style wildcards
    [[state]]
    name = "tool error"
    error = true
    [[state]]
    name = "final answer"
    step_kind = "llm"
    text = "(?i)final answer"             # regular expression searched in the step text

Conditions: ``step_kind``, ``tool_name``, ``error``, ``error_type``, ``text``, ``category``, ``state``. A typo in a
field name is reported with the file, the line and the valid fields.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from tracetochain._config_files import file_error, load_document, locate_line
from tracetochain._display import EstimatorDisplay
from tracetochain.exceptions import NotFittedError, TraceToChainError
from tracetochain.featurize.vocab import get_vocabulary
from tracetochain.states._model import StateModel, build_taxonomy, taxonomy_infos
from tracetochain.traces import TraceTable

CONDITION_FIELDS = ("step_kind", "tool_name", "error", "error_type", "text", "category", "state")
_TOP_LEVEL = ("catch_all", "vocabulary", "state", "states")


class MilestoneFileError(TraceToChainError, ValueError):
    """A milestone file is malformed; the message names the file, the line and the fix."""


@dataclass(frozen=True)
class Milestone:
    name: str
    conditions: dict[str, Any]


def _fail(message: str, path: str | None, line: int | None, hint: str | None = None) -> MilestoneFileError:
    err = file_error(MilestoneFileError, message, path, line, hint)
    assert isinstance(err, MilestoneFileError)
    return err


def _locate(text: str | None, block: int | None, key: str) -> int | None:
    return locate_line(text, block, key, "state")


def parse_milestones(spec: dict[str, Any], *, path: str | None = None,
                     text: str | None = None) -> tuple[list[Milestone], str, str | None]:
    """Validate a milestone document → (milestones in priority order, catch-all name, vocabulary)."""
    if not isinstance(spec, dict):
        raise _fail("a milestone file must be a table of settings with [[state]] entries", path, None)
    for key in spec:
        if key not in _TOP_LEVEL:
            raise _fail(f"unknown setting {key!r}", path, _locate(text, None, key),
                        f"valid top-level settings are {', '.join(_TOP_LEVEL)}")
    entries = spec.get("state", spec.get("states"))
    if not isinstance(entries, list) or not entries:
        raise _fail("no states declared", path, None, "add at least one [[state]] entry with a name and a condition")
    vocabulary = spec.get("vocabulary")
    if vocabulary is not None:
        try:
            get_vocabulary(vocabulary)
        except ValueError as exc:
            raise _fail(str(exc), path, _locate(text, None, "vocabulary")) from None
    catch_all = spec.get("catch_all", "other")
    if not isinstance(catch_all, str) or not catch_all:
        raise _fail("catch_all must be a non-empty name", path, _locate(text, None, "catch_all"))
    out: list[Milestone] = []
    names: set[str] = set()
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise _fail(f"state entry {i + 1} is not a table", path, _locate(text, i, "name"))
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise _fail(f"state entry {i + 1} has no name", path, _locate(text, i, "name"),
                        'give it name = "..."')
        if name in names or name == catch_all:
            raise _fail(f"state name {name!r} is used twice", path, _locate(text, i, "name"))
        names.add(name)
        conditions = {k: v for k, v in entry.items() if k != "name"}
        for key, value in conditions.items():
            if key not in CONDITION_FIELDS:
                raise _fail(f"state {name!r}: unknown field {key!r}", path, _locate(text, i, key),
                            f"valid fields are name, {', '.join(CONDITION_FIELDS)}")
            if key == "error" and not isinstance(value, bool):
                raise _fail(f"state {name!r}: error must be true or false", path, _locate(text, i, key))
            if key in ("text",) and not isinstance(value, str):
                raise _fail(f"state {name!r}: text must be a regular expression string", path,
                            _locate(text, i, key))
            if key == "text":
                try:
                    pc.match_substring_regex(pa.array(["probe"]), pattern=value)
                except pa.ArrowInvalid as exc:
                    raise _fail(f"state {name!r}: invalid regular expression ({exc})", path,
                                _locate(text, i, key)) from None
            if key not in ("error", "text"):
                values = value if isinstance(value, list) else [value]
                if not values or not all(isinstance(v, str) for v in values):
                    raise _fail(f"state {name!r}: {key} must be a string or a list of strings", path,
                                _locate(text, i, key))
            if key == "category" and vocabulary is None:
                raise _fail(f"state {name!r}: category conditions need vocabulary = \"shell\" or \"chat\"", path,
                            _locate(text, i, key))
        if not conditions:
            raise _fail(f"state {name!r} has no condition", path, _locate(text, i, "name"),
                        f"add one of {', '.join(CONDITION_FIELDS)}")
        out.append(Milestone(name, conditions))
    return out, catch_all, vocabulary


def load_milestones(path: str | Path) -> tuple[list[Milestone], str, str | None]:
    """Read and validate a milestone file (.toml, or .yaml/.yml with PyYAML installed)."""
    spec, text = load_document(path, MilestoneFileError)
    return parse_milestones(spec, path=str(path), text=text)


def _glob_to_re2(glob: str) -> str:
    """Shell wildcards (* and ?) to an anchored RE2 pattern (Arrow's regex engine has no \\Z)."""
    parts = [".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in glob]
    return "^" + "".join(parts) + "$"


def _match(milestone: Milestone, traces: TraceTable, category: NDArray[np.int64] | None,
           categories: tuple[str, ...]) -> NDArray[np.bool_]:
    table = traces.to_arrow()
    n = traces.n_steps
    mask = np.ones(n, dtype=bool)

    def col(name: str, type_: pa.DataType = pa.string()) -> pa.Array:
        return table.column(name).combine_chunks() if name in table.column_names else pa.nulls(n, type_)

    for key, value in milestone.conditions.items():
        if key == "error":
            m = np.asarray(col("error", pa.bool_()).fill_null(False), dtype=bool) == value
        elif key == "text":
            m = np.asarray(pc.match_substring_regex(col("text"), pattern=value).fill_null(False), dtype=bool)
        elif key == "category":
            wanted = [categories.index(v) for v in (value if isinstance(value, list) else [value])
                      if v in categories]
            assert category is not None
            m = np.isin(category, wanted)
        else:
            values = value if isinstance(value, list) else [value]
            source = col(key) if key != "state" else pa.array(traces.state_labels()[1], pa.string()).take(
                pa.array(traces.state_labels()[0]))
            pattern = "|".join(f"(?:{_glob_to_re2(v)})" for v in values)
            m = np.asarray(pc.match_substring_regex(source, pattern=pattern).fill_null(False), dtype=bool)
        mask &= m
    return mask


class MilestoneStates(EstimatorDisplay):
    """User-declared states from a milestone file (path) or a parsed spec (dict, as in the file)."""

    def __init__(self, milestones: str | Path | dict[str, Any]) -> None:
        self.milestones = milestones
        self._model: StateModel | None = None

    def fit(self, traces: TraceTable) -> MilestoneStates:
        if isinstance(self.milestones, dict):
            rules, catch_all, vocabulary = parse_milestones(self.milestones)
            source = "dict"
        else:
            rules, catch_all, vocabulary = load_milestones(self.milestones)
            source = str(self.milestones)
        names = (*(r.name for r in rules), catch_all)
        vocab = get_vocabulary(vocabulary) if vocabulary else None

        def assign(t: TraceTable) -> NDArray[np.int64]:
            category = None
            if vocab is not None:
                from tracetochain.states._categorical import _vocab_codes

                category = _vocab_codes(vocab, t)
            labels = np.full(t.n_steps, len(rules), np.int64)
            for i in range(len(rules) - 1, -1, -1):  # earlier rules win
                labels[_match(rules[i], t, category, vocab.categories if vocab else ())] = i
            return labels

        labels = assign(traces)
        rows = build_taxonomy(labels, len(names), labels, names)
        settings = {"milestones": source, "catch_all": catch_all, "vocabulary": vocabulary,
                    "rules": [{"name": r.name, **r.conditions} for r in rules], "k": len(names)}
        self._model = StateModel("milestones", names, taxonomy_infos(names, rows, traces.n_steps), settings,
                                 assign, labels)
        return self

    def fetch_model(self) -> StateModel:
        if self._model is None:
            raise NotFittedError("call fit(traces) before fetch_model()")
        return self._model
