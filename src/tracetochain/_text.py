"""Untrusted text (state names, tool names, file names, error text from traces) made safe for each output language.

Trace content is written by whoever produced the traces — in a pull-request workflow, possibly an attacker. Each
output language has its own way to turn text into markup or commands, so each gets its own function here, and every
renderer uses these instead of ad-hoc ``replace`` chains:

* :func:`terminal_text` — control characters (ESC sequences that retitle the terminal, clear the screen or forge
  hyperlinks; BEL; NUL) and bidirectional overrides become visible ``\\x1b``-style escapes;
* :func:`markdown_code` — a CommonMark code span that no content can close (the fence is longer than any backtick
  run inside), on one line (``\\r`` and ``\\n`` would end the line and start block elements), with ``|`` escaped
  for GitHub tables; :func:`markdown_text` for the little free text that is not in a code span;
* :func:`mermaid_label` — Mermaid entity codes (``#lt;`` …), because Mermaid renders labels as HTML;
* :func:`dot_label` — a DOT double-quoted string without control characters (Graphviz stops at a NUL);
* :func:`csv_cell` / :func:`csv_uncell` — spreadsheet formula neutralisation (OWASP "CSV injection"): a cell
  starting with ``=``, ``+``, ``-``, ``@``, tab or carriage return gets a leading ``'``; the canonical CSV reader
  removes it again, so tracetochain's own CSV round-trips exactly;
* :func:`shorten` — a length cap for names shown in reports and terminals (the full name stays in the data).
"""

from __future__ import annotations

import re

#: Longest state/tool name shown in a report, a table or a terminal line; longer names end in "…".
DISPLAY_NAME_LIMIT = 120

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
_CONTROL_ALL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]")
_LINE_BREAKS = re.compile(r"\r\n|[\r\n\u2028\u2029\x0b\x0c\x85]")
_BACKTICK_RUN = re.compile(r"`+")
_MD_PUNCT = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~&:])")
_CSV_TRIGGER = re.compile(r"^'*[=+\-@\t\r]")
_CSV_NEUTRALISED = re.compile(r"^'+[=+\-@\t\r]")


def _escape_char(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shorten(text: str, limit: int = DISPLAY_NAME_LIMIT) -> str:
    """``text`` cut to at most ``limit`` characters, ending in "…" when cut.

    >>> shorten("a" * 10, 5)
    'aaaa…'
    """
    text = str(text)
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def terminal_text(text: str, limit: int | None = DISPLAY_NAME_LIMIT) -> str:
    """Text safe to print on a terminal: control and bidi-override characters as visible escapes (newline and
    tab kept), cut to ``limit`` characters (None: no cut).

    >>> terminal_text("plan\\x1b]0;PWNED\\x07")
    'plan\\\\x1b]0;PWNED\\\\x07'
    """
    out = _CONTROL.sub(_escape_char, str(text))
    return shorten(out, limit) if limit is not None else out


def terminal_block(text: str, line_limit: int = 2_000) -> str:
    """A multi-line text safe for a terminal: :func:`terminal_text` line by line, each line cut to ``line_limit``
    characters (a megabyte-long state name inside a result's text stays a readable line).

    >>> terminal_block("a\\x1b[2J\\nb") == "a\\\\x1b[2J\\nb"
    True
    """
    return "\n".join(terminal_text(line, line_limit) for line in str(text).split("\n"))


def one_line(text: str, limit: int | None = DISPLAY_NAME_LIMIT) -> str:
    """:func:`terminal_text` on one line: every control character escaped, newlines and tabs included."""
    out = _CONTROL_ALL.sub(_escape_char, str(text))
    return shorten(out, limit) if limit is not None else out


def _spaced_line(text: str, limit: int | None) -> str:
    """The common first step of the document escapes below: line breaks as spaces (in Markdown, Mermaid and DOT a
    break would end the span, label or line), every other control character a visible escape, cut to ``limit``."""
    body = _CONTROL_ALL.sub(_escape_char, _LINE_BREAKS.sub(" ", str(text)))
    return shorten(body, limit) if limit is not None else body


def markdown_code(text: str, *, limit: int | None = DISPLAY_NAME_LIMIT, in_table: bool = True) -> str:
    """``text`` as an inline code span that its content cannot break (CommonMark §6.1).

    Line endings become spaces (a ``\\r`` or ``\\n`` would start a new block: a heading, a task list), other
    control characters visible escapes; the fence is one backtick longer than the longest run inside, padded with
    a space when the content starts or ends with a backtick or a space; in a GitHub table ``|`` is written ``\\|``
    (which GitHub's table parser turns back into ``|`` inside the span).

    >>> markdown_code("x` ![t](https://evil.example/p.png) `y")
    '``x` ![t](https://evil.example/p.png) `y``'
    >>> markdown_code("`a")
    '`` `a ``'
    >>> markdown_code("a\\r# heading")
    '`a # heading`'
    """
    body = _spaced_line(text, limit)
    if in_table:
        body = body.replace("|", "\\|")
    longest = max((len(m.group()) for m in _BACKTICK_RUN.finditer(body)), default=0)
    fence = "`" * (longest + 1)
    if not body:
        return f"{fence} {fence}"
    if body[0] in "` " or body[-1] in "` ":
        body = f" {body} "
    return f"{fence}{body}{fence}"


def markdown_text(text: str, *, limit: int | None = 500) -> str:
    """Free text for Markdown outside a code span: one line, Markdown punctuation backslash-escaped (no links,
    images, emphasis, headings or raw HTML), and a zero-width space after ``@``, in ``://`` and after ``www`` (no
    ``@mentions``, no autolinks).

    >>> markdown_text("see [x](http://e) @octocat") == r"see \\[x\\]\\(http\\:\u200b//e\\) @\u200boctocat"
    True
    """
    body = _spaced_line(text, limit)
    body = _MD_PUNCT.sub(r"\\\1", body)
    return body.replace("@", "@\u200b").replace(":/", ":\u200b/").replace("www", "www\u200b")


def mermaid_label(text: str, limit: int | None = DISPLAY_NAME_LIMIT) -> str:
    """Text for a double-quoted Mermaid label: Mermaid renders labels as HTML (and backtick-quoted labels as
    Markdown), so ``"``, ``<``, ``>``, ``&``, ``#`` and backticks become entity codes; line breaks spaces.

    >>> mermaid_label('<img src=x> "q"')
    '#lt;img src=x#gt; #quot;q#quot;'
    """
    body = _spaced_line(text, limit)
    codes = {"#": "#35;", '"': "#quot;", "<": "#lt;", ">": "#gt;", "&": "#amp;", "`": "#96;"}
    return "".join(codes.get(c, c) for c in body)


def dot_label(text: str, limit: int | None = DISPLAY_NAME_LIMIT) -> str:
    r"""Text for a double-quoted Graphviz string: backslashes and quotes escaped, line breaks as spaces, other
    control characters (a NUL stops Graphviz's parser) as visible escapes.

    >>> dot_label('a"b\\c\x00')
    'a\\"b\\\\c\\\\x00'
    """
    body = _spaced_line(text, limit)
    return body.replace("\\", "\\\\").replace('"', '\\"')


def csv_cell(text: str) -> str:
    """A text cell a spreadsheet will not run as a formula: a leading ``'`` when the cell starts with
    ``=``, ``+``, ``-``, ``@``, tab or carriage return (after any ``'``, so :func:`csv_uncell` is exact).

    >>> csv_cell('=HYPERLINK("http://e")'), csv_cell("plan"), csv_uncell(csv_cell("'=x"))
    ('\\'=HYPERLINK("http://e")', 'plan', "'=x")
    """
    return "'" + text if _CSV_TRIGGER.match(text) else text


def csv_uncell(text: str) -> str:
    """The inverse of :func:`csv_cell` (used when reading a canonical CSV)."""
    return text[1:] if _CSV_NEUTRALISED.match(text) else text


#: Regular expressions for vectorised use (pyarrow.compute) on whole text columns.
CSV_TRIGGER_PATTERN = _CSV_TRIGGER.pattern
CSV_NEUTRALISED_PATTERN = _CSV_NEUTRALISED.pattern

__all__ = ["CSV_NEUTRALISED_PATTERN", "CSV_TRIGGER_PATTERN", "DISPLAY_NAME_LIMIT", "csv_cell", "csv_uncell",
           "dot_label", "markdown_code", "markdown_text", "mermaid_label", "one_line", "shorten", "terminal_block",
           "terminal_text"]
