"""What a shell action does, read from its command text: the rule behind the ``shell`` vocabulary.

The rule (``docs/vocabularies.md`` has it with examples and the accuracy on 662 hand-labelled real commands):

* **NONE** — no action: a step without a command (an agent turn that ran nothing, an empty action, the token
  ``none``).
* **SUBMIT** — the step submits: ``submit`` (SWE-agent) or mini-swe-agent's submit marker
  (``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``, older ``MINI_SWE_AGENT_FINAL_OUTPUT``), whatever else it runs.
* Otherwise the command is read as the shell reads it: pipelines separated by ``&&``, ``||``, ``;``, ``&`` and
  line breaks; heredoc bodies are data; comments are ignored; set-up commands (``cd``, ``export``, ``source`` …)
  and variable assignments are skipped and wrappers (``timeout 60``, ``sudo``, ``env`` …) looked through. Each
  pipeline is classed by its first command (later commands filter its output: ``python x.py | tail`` runs code,
  ``grep -rn x . | head`` searches) — except that a pipeline feeding a code runner runs code. The step takes the
  highest class among its pipelines, in the order of :data:`PRIORITY` (``rm -rf build && sphinx-build …``
  builds; ``cat <<EOF > t.py`` then ``python t.py`` edits).

Classes of a command: EDIT writes file content (SWE-agent editor create/str_replace/insert/undo_edit, ``sed -i``,
``perl -i``, ``patch``, ``ed``, a heredoc, ``cat``, ``echo`` or ``printf`` written to a file with ``>``, ``>>`` or
``tee``); EXECUTE runs code (Python, test runners, build tools, a program given by a relative path such as
``./tests/runtests.py`` or ``bin/test``; an absolute path is read by its base name); VCS is ``git``; FILEOP moves
files around without writing content (``rm``, ``cp``, ``mv``, ``mkdir``, ``touch`` …); SEARCH looks for text or
files (``grep``, ``find`` …); VIEW prints a file (editor view, ``cat``, ``nl``, ``head``, ``tail``, ``sed -n``,
``awk``); INSPECT looks at the environment (``ls``, ``wc``, ``diff``, ``pwd``, ``which``, ``pip list`` …); OTHER
is anything else (terminal ``echo``, package installs, unknown programs, and bare tokens that hide the command
such as ``sed`` or ``timeout`` without arguments).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: Classes from the strongest to the weakest: a step takes the strongest class among its pipelines.
PRIORITY = ("SUBMIT", "EDIT", "EXECUTE", "VCS", "FILEOP", "SEARCH", "VIEW", "INSPECT", "OTHER", "NONE")
_RANK = {c: i for i, c in enumerate(PRIORITY)}

SUBMIT_MARKERS = ("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "MINI_SWE_AGENT_FINAL_OUTPUT")

_SETUP = frozenset({"cd", "pushd", "popd", "export", "source", ".", "set", "unset", "ulimit", "umask", "alias",
                    "true", ":", "shopt", "trap"})
_WRAPPERS = frozenset({"sudo", "time", "nohup", "env", "command", "exec", "nice", "stdbuf", "timeout", "xvfb-run"})
_WRAPPER_ARG_OPTIONS = {"sudo": {"-u", "-g", "-h", "-p", "-C"}, "timeout": {"-s", "-k", "--signal", "--kill-after"},
                        "nice": {"-n"}, "env": {"-u", "-C", "-S"}, "stdbuf": {"-i", "-o", "-e"}}
#: Shell keywords in front of a command (``if grep …; then …``); the loop header ``for x in …`` is no command.
_KEYWORDS = frozenset({"if", "then", "else", "elif", "do", "while", "until", "!", "{", "(", "fi", "done", "esac",
                       "}", ")"})
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
_PYTHON = re.compile(r"^(python|pypy)[0-9.]*$")

_EXECUTE = frozenset({"ipython", "pytest", "py.test", "tox", "nox", "nosetests", "unittest", "make", "cmake",
                      "sphinx-build", "sphinx-apidoc", "django-admin", "manage.py", "node", "npm", "npx", "yarn",
                      "go", "cargo", "mvn", "gradle", "java", "javac", "ruby", "rake", "Rscript", "bash", "sh", "zsh",
                      "coverage", "mypy", "flake8", "pylint", "ruff", "black", "gcc", "g++", "clang"})
_SEARCH = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack", "find", "locate", "fd", "search_file",
                     "search_dir", "find_file"})
_VIEW = frozenset({"cat", "nl", "head", "tail", "less", "more", "awk", "gawk", "bat", "open", "goto", "scroll_up",
                   "scroll_down", "xxd", "hexdump", "od"})
_INSPECT = frozenset({"ls", "tree", "wc", "file", "stat", "du", "df", "diff", "cmp", "pwd", "which", "whereis",
                      "type", "whoami", "hostname", "id", "uname", "env", "printenv", "test", "[", "[[", "realpath",
                      "readlink", "date", "ps", "lsof", "nproc", "free"})
_FILEOP = frozenset({"rm", "cp", "mv", "mkdir", "touch", "chmod", "chown", "ln", "rmdir", "install", "unlink"})
_VCS = frozenset({"git", "hg", "svn"})
_EDIT = frozenset({"patch", "ed", "ex", "create", "edit", "truncate"})
#: Commands whose output written to a file is an edit (``cat <<EOF > f``, ``echo x >> f``).
_WRITERS = frozenset({"cat", "echo", "printf", "tee"})
#: The SWE-agent file editor: its sub-command decides (``str_replace_editor view …``, the artifact's ``edit:view``).
_EDITORS = frozenset({"str_replace_editor", "str_replace_based_edit_tool", "edit"})
_EDITOR_SUBCOMMANDS = frozenset({"view", "create", "str_replace", "insert", "undo_edit"})
_PIP_INSPECT = frozenset({"list", "show", "freeze", "check", "--version", "-V"})
_OPERATORS = frozenset({"&&", "||", ";", "&", ";;", "|", "|&"})


@dataclass
class _Command:
    words: list[str] = field(default_factory=list)
    writes_file: bool = False  # output redirected to a file (not /dev/null, not a file descriptor)
    heredoc: bool = False


def shell_category(step_kind: str | None, tool_name: str | None, text: str | None) -> str:
    """The class of one shell action (see the module docstring). ``text`` is the command; without it the
    ``tool_name`` is read as a bare command word (the artifact's tokens, ``edit:view``, ``str_replace_editor:view``).

    >>> shell_category("tool", "cat", "cat <<'EOF' > fix.py\\nprint(1)\\nEOF\\npython fix.py")
    'EDIT'
    >>> shell_category("tool", "nl", "nl -ba src/x.py | sed -n '10,20p'")
    'VIEW'
    >>> shell_category("tool", "submit", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff")
    'SUBMIT'
    """
    command = text if isinstance(text, str) and text.strip() else None
    if command is not None and any(m in command for m in SUBMIT_MARKERS):
        return "SUBMIT"
    if step_kind not in (None, "tool", "agent", "other"):
        return "NONE"  # an assistant turn that ran nothing (llm), a user turn …
    tool = tool_name.strip() if isinstance(tool_name, str) else ""
    if tool in ("submit", "none", ""):
        if tool == "submit":
            return "SUBMIT"
        if command is None:
            return "NONE"
    editor = _editor_token(tool)
    if command is None:
        return editor or _bare_word(tool)
    found = _classify(command)
    if found == "NONE" and editor is not None:
        return editor
    return found


def _editor_token(tool: str) -> str | None:
    """``edit:view`` / ``str_replace_editor:view`` → VIEW, other editor sub-commands → EDIT; None otherwise."""
    name, sep, sub = tool.partition(":")
    if not sep or name not in _EDITORS:
        return None
    return "VIEW" if sub == "view" else "EDIT"


def _bare_word(word: str) -> str:
    """The class of a command word given without its arguments (what a tokeniser kept of the command)."""
    if not word or word == "none":
        return "NONE"
    if word == "sed":
        return "OTHER"  # cannot tell an in-place edit (-i) from a print (-n)
    if _ASSIGNMENT.match(word) or word in _WRAPPERS or word in _SETUP:
        return "OTHER"  # the command itself was cut off
    return _command_class([word], writes_file=False, heredoc=False)


def _classify(command: str) -> str:
    pipelines = _parse(command)
    best = "NONE"
    for pipeline in pipelines:
        cls = _pipeline_class(pipeline)
        if cls is not None and _RANK[cls] < _RANK[best]:
            best = cls
    if best == "NONE" and any(p for p in pipelines):
        best = "OTHER"  # only set-up commands (``cd repo``)
    return best


def _pipeline_class(pipeline: list[_Command]) -> str | None:
    """The class of one pipeline (None when it holds only set-up commands)."""
    stages = [s for s in (_effective(c) for c in pipeline) if s is not None]
    if not stages:
        return None
    first = stages[0]
    cls = _command_class(first.words, first.writes_file, first.heredoc)
    if cls in ("SUBMIT", "EDIT"):
        return cls
    later = stages[1:]
    if first.words[0] in _WRITERS and any(s.words[0] == "tee" and len(s.words) > 1 and
                                          not all(w.startswith("-") or w == "/dev/null" for w in s.words[1:])
                                          for s in later):
        return "EDIT"  # echo … | tee file
    if any(_runs_code(s.words) for s in later):
        return "EXECUTE"  # cat <<EOF | python
    return cls


def _effective(cmd: _Command) -> _Command | None:
    """The command with assignments, keywords and wrappers removed; None for set-up commands and loop headers."""
    words = list(cmd.words)
    i = 0
    while i < len(words):
        w = words[i]
        if _ASSIGNMENT.match(w) or w in _KEYWORDS:
            i += 1
            continue
        if w in ("for", "case", "select", "function"):
            return None  # a loop or case header: its body's commands come as their own simple commands
        if w in _WRAPPERS:
            wrapper = w
            i += 1
            while i < len(words) and (words[i].startswith("-") or (wrapper == "env" and _ASSIGNMENT.match(words[i]))):
                i += 2 if words[i] in _WRAPPER_ARG_OPTIONS.get(wrapper, set()) else 1
            if wrapper == "timeout" and i < len(words):
                i += 1  # the duration
            if i >= len(words):
                return _Command([wrapper], cmd.writes_file, cmd.heredoc)
            continue
        break
    words = words[i:]
    if not words or words[0] in _SETUP:
        return None
    return _Command(words, cmd.writes_file, cmd.heredoc)


def _runs_code(words: list[str]) -> bool:
    base = words[0].rsplit("/", 1)[-1]
    return bool(_PYTHON.match(base)) or base in ("bash", "sh", "zsh", "node", "ruby", "perl")


def _command_class(words: list[str], writes_file: bool, heredoc: bool) -> str:
    word = words[0]
    args = words[1:]
    base = word.rstrip("/").rsplit("/", 1)[-1] or word
    if base == "submit":
        return "SUBMIT"
    if base in _EDITORS and args and args[0] in _EDITOR_SUBCOMMANDS:
        return "VIEW" if args[0] == "view" else "EDIT"
    if base.startswith("edit:") or base.startswith("str_replace_editor:"):
        return "VIEW" if base.endswith(":view") else "EDIT"
    if base in _WRITERS:
        if writes_file or (base == "tee" and any(not a.startswith("-") and a != "/dev/null" for a in args)):
            return "EDIT"
        return "VIEW" if base == "cat" else "OTHER"
    if base in ("sed", "gsed"):
        if any(a == "-i" or a.startswith(("-i", "--in-place")) or (a.startswith("-") and not a.startswith("--")
                                                                    and "i" in a[1:]) for a in args):
            return "EDIT"
        return "VIEW" if args else "OTHER"
    if base == "perl":
        return "EDIT" if any(a.startswith("-") and "i" in a[1:] and not a.startswith("--") for a in args) \
            else "EXECUTE"
    if _PYTHON.match(base) or ("/" in word.rstrip("/") and not word.startswith("/")):
        return "EXECUTE"  # Python, or a project's own program by its relative path (./x.sh, bin/test)
    if base in ("pip", "pip3"):
        return "INSPECT" if args and args[0] in _PIP_INSPECT else "OTHER"
    for names, cls in ((_EDIT, "EDIT"), (_EXECUTE, "EXECUTE"), (_VCS, "VCS"), (_FILEOP, "FILEOP"),
                       (_SEARCH, "SEARCH"), (_VIEW, "VIEW"), (_INSPECT, "INSPECT")):
        if base in names:
            return cls
    if base.endswith((".py", ".sh")):
        return "EXECUTE"  # a script: /testbed/tests/runtests.py, run.sh
    return "OTHER"


# ---------------------------------------------------------------------------------------------------- parsing
_HEREDOC = re.compile(r"<<(-?)\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2")


def _parse(command: str, max_lines: int = 400) -> list[list[_Command]]:
    """Pipelines of simple commands, as the shell would run them (heredoc bodies skipped)."""
    pipelines: list[list[_Command]] = [[_Command()]]
    lines = command.splitlines()[:max_lines]
    pending = ""
    quote: str | None = None  # the quote left open at the end of ``pending``
    terminators: list[tuple[str, bool]] = []
    for line in lines:
        if terminators:  # inside a heredoc body: data, not commands
            word, strip_tabs = terminators[0]
            if (line.lstrip("\t") if strip_tabs else line).strip() == word:
                terminators.pop(0)
            continue
        text = pending + line
        if not pending and not text.strip():
            continue
        quote = _open_quote(line, quote)
        if quote is not None:  # a quoted argument continues on the next line
            pending = text + "\n"
            continue
        if text.rstrip().endswith("\\") and not text.rstrip().endswith("\\\\"):
            pending = text.rstrip()[:-1] + " "
            continue
        try:
            tokens = _tokens(text)
        except ValueError:  # quoting the scanner did not follow: read the line's words as they are
            tokens = re.findall(r"&&|\|\||[;|&]|[^\s;|&]+", text)
        pending = ""
        for m in _HEREDOC.finditer(text):
            terminators.append((m.group(3), m.group(1) == "-"))
        _add_tokens(pipelines, tokens)
        _new_pipeline(pipelines)  # a line break ends the pipeline
    if pending:  # unbalanced quotes to the end: read what the first line says
        _add_tokens(pipelines, re.findall(r"&&|\|\||[;|&]|[^\s;|&]+", pending.splitlines()[0]))
    return [[c for c in p if c.words] for p in pipelines if any(c.words for c in p)]


_BALANCED = re.compile(r"""(?:[^'"\\#]|\\.|'[^']*'|"(?:[^"\\]|\\.)*")*""", re.DOTALL)
_CLOSING = {"'": re.compile(r"[^']*'"), '"': re.compile(r'(?:[^"\\]|\\.)*"', re.DOTALL)}


def _open_quote(line: str, quote: str | None) -> str | None:
    """The quote character still open after ``line``, given the one open before it (so a long quoted
    ``python -c`` program is tokenised once, not once per line). A ``#`` outside quotes ends the scan (a comment)."""
    pos = 0
    if quote is not None:
        closed = _CLOSING[quote].match(line)
        if closed is None:
            return quote
        pos = closed.end()
    end = _BALANCED.match(line, pos).end()  # type: ignore[union-attr]  # the pattern matches the empty string
    if end < len(line) and line[end] in "'\"":
        return line[end]
    return None


#: Shell tokens: operators, comments, and words made of plain, escaped and quoted parts (what ``shlex`` with
#: ``punctuation_chars`` yields, at regular-expression speed — commands are tokenised once per step).
_TOKEN = re.compile(r"""
    (?P<op>&&|\|\||;;|\|&|&>>|&>|>>|>&|>\||<<<|<<-?|<>|[;&|()<>])
  | (?P<comment>\#.*)
  | (?P<word>(?:[^\s'"\\;&|<>()#]|\\.|'[^']*'|"(?:[^"\\]|\\.)*")
             (?:[^\s'"\\;&|<>()]|\\.|'[^']*'|"(?:[^"\\]|\\.)*")*)
  | (?P<space>\s+)
""", re.VERBOSE | re.DOTALL)
_DQ_ESCAPE = re.compile(r'\\([\\"$`])')  # the escapes a double-quoted string honours
_QUOTED = re.compile(r"\\(.)|'([^']*)'|\"((?:[^\"\\]|\\.)*)\"", re.DOTALL)


def _unquote(word: str) -> str:
    def part(m: re.Match[str]) -> str:
        if m.group(1) is not None:
            return m.group(1)
        if m.group(2) is not None:
            return m.group(2)
        return _DQ_ESCAPE.sub(r"\1", m.group(3))
    return _QUOTED.sub(part, word)


def _tokens(text: str) -> list[str]:
    """Shell tokens of one logical line; raises ``ValueError`` at a quote that never closes."""
    out: list[str] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ValueError(f"unbalanced quote at column {pos}")
        if m.lastgroup == "op":
            out.append(m.group())
        elif m.lastgroup == "word":
            out.append(_unquote(m.group()))
        elif m.lastgroup == "comment":
            break
        pos = m.end()
    return out


def _new_pipeline(pipelines: list[list[_Command]]) -> None:
    if any(c.words for c in pipelines[-1]):
        pipelines.append([_Command()])


def _add_tokens(pipelines: list[list[_Command]], tokens: list[str]) -> None:
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        current = pipelines[-1][-1]
        if tok in ("|", "|&"):
            pipelines[-1].append(_Command())
        elif tok in _OPERATORS:
            _new_pipeline(pipelines)
        elif tok.startswith("<<") and tok != "<<<":
            current.heredoc = True
            if tok in ("<<", "<<-"):
                i += 1  # the delimiter word
        elif tok in (">", ">>", ">|", "&>", "&>>", ">&", "<", "<>", "<<<"):
            target = tokens[i + 1] if i + 1 < len(tokens) else ""
            fd = None
            if tok in (">", ">>", ">|") and len(current.words) > 1 and current.words[-1].isdigit():
                fd = current.words.pop()  # ``2> err``: the descriptor is not an argument
            if tok in (">", ">>", ">|", "&>", "&>>") and target not in ("", "/dev/null") and fd in (None, "1"):
                current.writes_file = True  # standard output into a file
            i += 1
        elif tok in ("(", ")", "{", "}", "((", "))"):
            pass
        else:
            current.words.append(tok)
        i += 1
