"""The SWE readers' shell-word splitter: its regular expressions give exactly shlex's tokens, and fail where it
fails."""

from __future__ import annotations

import shlex

from hypothesis import given, settings
from hypothesis import strategies as st

from tracetochain.readers.swe_agent import _shell_words, command_name


def _shlex_words(text: str) -> list[str]:
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return list(lexer)


# Lines without quotes, escapes or comments (the fast path), from the characters that matter to shlex: its
# punctuation, its whitespace, whitespace it does not treat as such (\v, \f, a non-breaking space), word characters.
PLAIN = st.text(alphabet=st.sampled_from([*"();<>|&", " ", "\t", "\r", "\n", "\v", "\f", "\u00a0",
                                          *"ab-./*?=~$`{}![]:,+%@^", "é", "∑"]), max_size=40)


@settings(max_examples=400, deadline=None)
@given(PLAIN)
def test_plain_lines_split_as_shlex_splits_them(text: str) -> None:
    assert _shell_words(text) == _shlex_words(text)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("();|& ab'\"\\#\n")), max_size=30))
def test_lines_with_quotes_escapes_or_comments_split_as_shlex_splits_them(text: str) -> None:
    try:
        expected = _shlex_words(text)
    except ValueError:
        try:
            _shell_words(text)
        except ValueError:
            return
        raise AssertionError("an unbalanced quote must still raise") from None
    assert _shell_words(text) == expected


# Lines with quotes, escapes and comments (quoted parts joined to their word, quotes removed, escapes resolved,
# comments dropped; an unclosed quote or a final escape a ValueError as shlex raises it).
QUOTED = st.text(alphabet=st.sampled_from([*"();<>|&", " ", "\t", "\r", "\n", "\v", "\u00a0", "'", '"', "'", '"',
                                           "\\", "#", *"ab-./*=~$", "é"]), max_size=40)


@settings(max_examples=600, deadline=None)
@given(QUOTED)
def test_quoted_lines_split_as_shlex_splits_them(text: str) -> None:
    try:
        expected = _shlex_words(text)
    except ValueError:
        try:
            _shell_words(text)
        except ValueError:
            return
        raise AssertionError(f"{text!r}: an unclosed quote must raise") from None
    assert _shell_words(text) == expected


def test_quoted_commands_split_as_shlex_splits_them() -> None:
    for text in ["sed -n '1,20p' a.py", "grep -rn \"def foo(\" src | head", "echo '' \"\" x''y",
                 "python -c 'print(1); x=\"a b\"'",
                 "find . -name '*.py' -exec grep -l 'a|b' {} ;", "cat <<'EOF' > f.py", "a='x y'z\"(w)\"&&b",
                 "python -c \"print('a\\\"b')\" # run it", "grep -n '#include' x.c", "echo a\\ b\\;c \"\\$HOME\\n\""]:
        assert _shell_words(text) == _shlex_words(text), text


def test_real_commands_keep_their_names() -> None:
    assert command_name("cd /testbed && grep -rn foo src|head -5") == "grep"
    assert command_name("cd /testbed;ls -la") == "ls"
    assert command_name("FOO=1 timeout 60 python -m pytest tests/x.py 2>&1 | tail") == "python"
    assert command_name("sed -n '1,20p' a.py && cat b.py") == "sed"


def _whole_command_name(command: str) -> str | None:
    """The rule of :func:`command_name` read over the whole command (every logical line tokenised first, then split
    into simple commands): the reference its line-by-line reading, which stops at the line holding the named command,
    must equal."""
    from tracetochain.readers import swe_agent as sa

    if any(marker in command for marker in sa._SUBMIT_MARKERS):
        return "submit"
    tokens: list[str] = []
    for line in sa._command_lines(command):
        if tokens:
            tokens.append("\n")
        tokens.extend(line)
    segments: list[list[str]] = [[]]
    for tok in tokens:
        if tok in sa._SEPARATORS:
            segments.append([])
        elif tok not in sa._GROUPING:
            segments[-1].append(tok)
    words = [w for w in (sa._segment_word(seg) for seg in segments if seg) if w is not None]
    if not words:
        return None
    word, rest = next((w for w in words if w[0] not in sa._SETUP_WORDS), words[0])
    base = word.rstrip("/").rsplit("/", 1)[-1] or word
    if base in sa._EDITOR_TOOLS and rest and not rest[0].startswith("-"):
        return f"{base}:{rest[0]}"
    return base


COMMAND_PARTS = st.sampled_from(["cd /repo", "export A=1", "source env.sh", "python x.py", "PYTHONPATH=. pytest",
                                 "sudo", "timeout 5", "str_replace_editor view /f", "ls -la", "# a comment", "",
                                 "&&", "||", ";", "|", "&", "(", ")", "\\", "'", '"', "<<EOF", "cat", "\n", "\n",
                                 "\n", " "])


@settings(max_examples=400, deadline=None)
@given(st.lists(COMMAND_PARTS, max_size=14).map(" ".join))
def test_reading_line_by_line_names_the_same_command_as_reading_it_whole(command: str) -> None:
    assert command_name(command) == _whole_command_name(command)
