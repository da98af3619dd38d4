"""Action vocabularies: map raw actions (tool names, shell commands) to a small set of categories.

* ``shell`` — SWE-agent / mini-swe-agent commands → VIEW, EDIT, EXECUTE, SEARCH, INSPECT, VCS, SUBMIT, FILEOP,
  NONE, OTHER, by what the whole command does (:mod:`tracetochain.featurize._shell`: ``sed -i`` and heredoc writes
  are EDIT, ``cat``/``sed -n``/``nl`` VIEW, both agents' submit commands SUBMIT …).
* ``shell-paper`` — the same categories from the command word alone, with the TraceToChain artifact's map (Tran-Truong &
  Le 2026, study SS10): for reproducing the paper's SWE-bench numbers; it mislabels mini-swe-agent's heredoc writes,
  ``sed`` edits and submit command.
* ``chat`` — chat/tool agents such as τ-bench/τ²-bench → respond, lookup, write, handoff, think, other.

Both built-in vocabularies are checked against hand-labelled real actions (``tests/data/vocabulary``; the rules
and the accuracy table are in ``docs/vocabularies.md``). Register your own with :func:`register_vocabulary`. A
vocabulary sees a step's ``step_kind``, ``tool_name`` and ``text`` and returns one category name; it is applied to
whole columns at once (one Python call per *distinct* (kind, tool, text) combination).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from tracetochain.featurize._base import mixed_radix
from tracetochain.featurize._shell import shell_category

Categorizer = Callable[[str | None, str | None, str | None], str]


@dataclass(frozen=True)
class ActionVocabulary:
    """A named mapping from (step_kind, tool_name, text) to a category in ``categories``."""

    name: str
    categories: tuple[str, ...]
    categorize: Categorizer
    description: str = ""
    #: Whether the category depends on ``text`` (shell commands) — otherwise text is not read at all.
    uses_text: bool = False

    def apply(self, step_kind: pa.Array, tool_name: pa.Array, text: pa.Array | None) -> NDArray[np.int64]:
        """Category index of every step (vectorised over distinct inputs)."""
        n = len(step_kind)
        if n == 0:
            return np.zeros(0, np.int64)
        # Joins never match nulls, so nulls travel as a sentinel and come back as None.
        cols = [_as_text(step_kind).fill_null(_NULL), _as_text(tool_name).fill_null(_NULL)]
        if self.uses_text and text is not None:
            # The whole command counts (a heredoc write, then the script run; a comment line, then sed -i).
            cols.append(pc.utf8_trim(_as_text(text).fill_null(""), characters="\n\r\t "))
        # Distinct (kind, tool[, text]) keys: each column dictionary-encoded, the codes combined in mixed radix.
        codes: list[NDArray[np.int64]] = []
        values: list[list[str]] = []
        for col in cols:
            whole = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
            encoded = whole.dictionary_encode()
            codes.append(np.asarray(encoded.indices, dtype=np.int64))
            values.append(encoded.dictionary.to_pylist())
        key = mixed_radix([(c, len(v)) for c, v in zip(codes, values, strict=True)], n)
        if key is not None:
            distinct, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        else:  # too many combinations for one integer: unique rows of the code matrix
            distinct, first, inverse = np.unique(np.stack(codes, axis=1), axis=0, return_index=True,
                                                 return_inverse=True)
        index = {c: i for i, c in enumerate(self.categories)}
        cat_of_key = np.empty(distinct.size, np.int64)
        for j, row in enumerate(first):
            kind, tool = _none(values[0][codes[0][row]]), _none(values[1][codes[1][row]])
            txt = values[2][codes[2][row]] if len(cols) > 2 else None
            cat = self.categorize(kind, tool, txt)
            if cat not in index:
                raise ValueError(f"vocabulary {self.name!r} returned {cat!r}, not one of {self.categories}")
            cat_of_key[j] = index[cat]
        out: NDArray[np.int64] = cat_of_key[inverse.reshape(-1)]
        return out


_NULL = "\x00"


def _as_text(arr: pa.Array) -> pa.Array:
    return arr.cast(pa.string()) if not pa.types.is_string(arr.type) else arr


def _none(value: str | None) -> str | None:
    return None if value == _NULL else value


# ------------------------------------------------------------------------------------------------- shell
_CD_PREFIX = re.compile(r"^\s*(?:(?:cd\s+\S+|source\s+\S+|export\s+\S+)\s*(?:&&|;)\s*)+")
_SUDO = re.compile(r"^\s*sudo\s+")
SHELL_CATEGORIES = ("VIEW", "EDIT", "EXECUTE", "SEARCH", "INSPECT", "VCS", "SUBMIT", "FILEOP", "NONE", "OTHER")
_SHELL_MAP = {
    **dict.fromkeys(("python", "python3", "pytest", "py.test", "tox", "nosetests", "unittest", "make"), "EXECUTE"),
    **dict.fromkeys(("grep", "find", "rg", "locate", "ag", "ack", "fgrep", "egrep"), "SEARCH"),
    **dict.fromkeys(("cat", "head", "tail", "less", "more", "wc", "ls", "tree", "file", "diff", "nl"), "INSPECT"),
    "git": "VCS",
    "submit": "SUBMIT",
    **dict.fromkeys(("rm", "cp", "mv", "mkdir", "touch", "chmod", "chown", "ln", "rmdir"), "FILEOP"),
    "none": "NONE",
    "": "NONE",
}
_EDIT_SUBCOMMANDS = ("view", "create", "str_replace", "insert", "undo_edit")


def shell_token(command: str | None) -> str:
    """The command word of a shell action: first non-empty line, without ``cd x &&``/``source``/``sudo``.

    The SWE-agent file editor keeps its sub-command (``edit:view``, ``edit:str_replace`` …); an empty action is ``none``
    (the token rules of Tran-Truong & Le 2026, study SS10). Unlike the artifact we also strip leading ``VAR=value``
    assignments, so ``PYTHONPATH=/testbed python x.py`` counts as ``python``.
    """
    if not command:
        return "none"
    line = next((ln for ln in command.splitlines() if ln.strip()), "")
    line = _SUDO.sub("", _CD_PREFIX.sub("", line))
    words = line.split()
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words = words[1:]
    if not words:
        return "none"
    word = words[0].rsplit("/", 1)[-1]
    if word in ("str_replace_editor", "edit") and len(words) > 1 and words[1] in _EDIT_SUBCOMMANDS:
        return f"edit:{words[1]}"
    return word


def categorize_shell(step_kind: str | None, tool_name: str | None, text: str | None) -> str:
    """The ``shell`` vocabulary: what the step's command does (:func:`~tracetochain.featurize._shell.shell_category`).

    >>> categorize_shell("tool", "sed", "sed -i 's/a/b/' src/x.py"), categorize_shell("tool", "python", None)
    ('EDIT', 'EXECUTE')
    """
    return shell_category(step_kind, tool_name, text if text else None)


def categorize_shell_paper(step_kind: str | None, tool_name: str | None, text: str | None) -> str:
    """The ``shell-paper`` vocabulary: the artifact's token → category map (study SS10) on :func:`shell_token`.

    Like the artifact it reads the first word only; unlike the artifact, :func:`shell_token` strips a leading
    ``VAR=value``, so the artifact's ``PYTHONPATH=/testbed`` token is NONE here (the artifact files it under OTHER;
    the paper-reproduction studies map that token themselves).
    """
    token = tool_name if tool_name and tool_name.startswith("edit:") else shell_token(text or tool_name)
    if token.startswith("edit:"):
        return "VIEW" if token == "edit:view" else "EDIT"
    return _SHELL_MAP.get(token, "OTHER")


# ------------------------------------------------------------------------------------------------- chat
CHAT_CATEGORIES = ("respond", "lookup", "write", "handoff", "think", "other")
#: Leading verbs of tools that only read or measure state.
_READ_VERBS = frozenset({"get", "find", "list", "search", "show", "calculate", "compute", "check", "lookup", "look",
                         "read", "fetch", "query", "view", "describe", "count", "verify", "validate", "can", "is",
                         "has", "retrieve", "browse", "estimate", "inspect", "diagnose", "ping", "test"})
#: Leading verbs of tools that change state (bookings, orders, payments, accounts, device settings).
_WRITE_VERBS = frozenset({"cancel", "modify", "return", "exchange", "book", "update", "create", "delete", "place",
                          "refund", "reserve", "send", "set", "toggle", "enable", "disable", "grant", "revoke",
                          "reboot", "restart", "reset", "refuel", "reseat", "resume", "suspend", "disconnect",
                          "connect", "make", "add", "remove", "change", "edit", "apply", "pay", "assign", "approve",
                          "reject", "close", "write", "save", "upgrade", "downgrade", "activate", "deactivate",
                          "register", "unregister", "subscribe", "unsubscribe", "install", "uninstall", "turn"})
#: Older keyword rule (τ-bench, Tran-Truong & Le 2026, study SS15) for names whose first word is no known verb.
_LOOKUP = re.compile(r"get|find|list|search|show|calculate|check|lookup|read")
_WRITE = re.compile(r"cancel|modify|return|exchange|book|update|create|delete|place|refund|reserve|send|set_")
_NAME_WORDS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


def categorize_chat(step_kind: str | None, tool_name: str | None, text: str | None) -> str:
    """Chat/tool agents (τ-bench, τ²-bench): a plain agent reply → respond; a tool by what it does, read from the
    leading verb of its name (``get_user_details`` lookup, ``toggle_roaming`` write, ``can_send_mms`` lookup);
    diagnostics named ``…_test`` are lookups; ``transfer_to_…``/handoff steps → handoff; ``think`` → think. A name
    with no known leading verb falls back to keywords anywhere in it, else other. The labelling rule and the
    accuracy on τ/τ²-bench steps are in ``docs/vocabularies.md``.
    """
    if step_kind == "handoff":
        return "handoff"
    if not tool_name:
        return "respond" if step_kind in (None, "llm", "agent") else "other"
    name = tool_name.strip()
    low = name.lower()
    if low.startswith(("transfer_to", "transfer-to", "transferto")) or "handoff" in low or "hand_off" in low \
            or low.startswith("escalate"):
        return "handoff"
    if low == "think":
        return "think"
    words = [w.lower() for w in _NAME_WORDS.findall(name)]
    if words:
        if words[0] in _READ_VERBS or (words[0] == "run" and words[-1] in ("test", "check", "diagnostic")):
            return "lookup"
        if words[0] in _WRITE_VERBS:
            return "write"
    if _LOOKUP.search(low):
        return "lookup"
    if _WRITE.search(low):
        return "write"
    return "other"


VOCABULARIES: dict[str, ActionVocabulary] = {
    "shell": ActionVocabulary("shell", SHELL_CATEGORIES, categorize_shell,
                              "SWE-agent / mini-swe-agent shell commands, by what the whole command does",
                              uses_text=True),
    "shell-paper": ActionVocabulary("shell-paper", SHELL_CATEGORIES, categorize_shell_paper,
                                    "shell commands by their first word, the TraceToChain artifact's map (study SS10)",
                                    uses_text=True),
    "chat": ActionVocabulary("chat", CHAT_CATEGORIES, categorize_chat,
                             "chat/tool agents such as τ-bench (paper study SS15)"),
}


def register_vocabulary(vocabulary: ActionVocabulary, *, replace: bool = False) -> None:
    """Make a vocabulary available by name (e.g. to ``--vocabulary`` and ``CategoricalStates``)."""
    if vocabulary.name in VOCABULARIES and not replace:
        raise ValueError(f"a vocabulary named {vocabulary.name!r} exists (pass replace=True)")
    VOCABULARIES[vocabulary.name] = vocabulary


def get_vocabulary(vocabulary: str | ActionVocabulary) -> ActionVocabulary:
    if isinstance(vocabulary, ActionVocabulary):
        return vocabulary
    try:
        return VOCABULARIES[vocabulary]
    except KeyError:
        raise ValueError(f"unknown vocabulary {vocabulary!r}; available: {sorted(VOCABULARIES)}") from None
