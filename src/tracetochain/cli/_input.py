"""How every command that reads traces turns ``--reader``, ``-O KEY=VALUE`` and ``-`` (stdin) into one
:func:`~tracetochain.readers.read_traces` call, so the options mean the same thing on ``fit``, ``report``, ``audit``,
``compare``, ``monitor`` and ``convert``.

Naming convention of the command line: ``--reader`` chooses the *input* format on every command, ``--format`` is
only ever an *output* format, ``-O``/``--option`` passes a reader option, and ``--samples`` is the replicate count
of intervals. The old spellings (``--format`` for the reader on ``fit``/``convert``, ``--resamples`` and
``--bootstrap`` on ``audit``) still work as hidden aliases that print a deprecation warning on stderr.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from tracetochain.traces import TraceTable

#: The path that means "read the traces from standard input".
STDIN = "-"
#: How standard input is named in messages and in the ingest report.
STDIN_NAME = "<stdin>"

ReaderOpt = Annotated[str | None, typer.Option(
    "--reader", metavar="NAME",
    help="Input reader, e.g. openai-messages or tau2-bench (default: detect; list them with `tracetochain formats`).")]
ReaderOptionOpt = Annotated[list[str] | None, typer.Option(
    "--option", "-O", metavar="KEY=VALUE",
    help="Reader option, repeatable; keys may be dotted paths into nested records "
         "(e.g. -O outcome_key=metadata.success, -O verdicts=results.json); see `tracetochain formats`.")]
WhereOpt = Annotated[list[str] | None, typer.Option(
    "--where", metavar="FIELD=VALUE",
    help="Keep only episodes whose field has this value (FIELD!=VALUE: another value); repeatable, all must hold. "
         "Fields: trace fields such as task_id, the files' header metadata meta.KEY, source_file, an episode's "
         "metadata.KEY (e.g. --where metadata.attack_type=none).")]
ByOpt = Annotated[str | None, typer.Option(
    "--by", metavar="FIELD",
    help="One result per value of this field (e.g. --by meta.model or --by source_file): a reliability board "
         "with rank intervals and Holm-adjusted pairwise differences.")]
#: ``--format``/``-f`` as the reader, kept working on the commands that used to spell it so (fit, convert).
LegacyFormatOpt = Annotated[str | None, typer.Option(
    "--format", "-f", hidden=True, help="Deprecated spelling of --reader.")]


def deprecated(old: str, new: str) -> None:
    """One warning line on stderr for an old option spelling that still works."""
    typer.echo(f"warning: {old} is deprecated; use {new}", err=True)


def pick_alias(new_name: str, new_value: Any, new_default: Any, old_name: str, old_value: Any) -> Any:
    """The value of an option that has a hidden deprecated alias: the alias's value when only it was given (with a
    warning), the new option's otherwise; both given with different values is a usage error."""
    if old_value is None:
        return new_value
    deprecated(old_name, new_name)
    if new_value != new_default and new_value != old_value:
        raise typer.BadParameter(f"{old_name} is the old name of {new_name}; give only {new_name}")
    return old_value


def reader_name(reader: str | None, legacy_format: str | None) -> str | None:
    """``--reader``, or the deprecated ``--format``/``-f`` spelling of it."""
    chosen: str | None = pick_alias("--reader", reader, None, "--format (for the input reader)", legacy_format)
    return chosen


def parse_reader_options(items: list[str] | None) -> dict[str, Any]:
    """``KEY=VALUE`` pairs as reader options; a VALUE that parses as JSON (numbers, true/false, lists, objects) is
    taken as that value, anything else as text.

    >>> parse_reader_options(["verdicts=run/results.json", "success_threshold=0.5", "include_user=true"])
    {'verdicts': 'run/results.json', 'success_threshold': 0.5, 'include_user': True}
    """
    options: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise typer.BadParameter(f"expected KEY=VALUE (e.g. verdicts=results.json), got {item!r}",
                                     param_hint="'--option'")
        if key in options:
            raise typer.BadParameter(f"option {key!r} is given twice", param_hint="'--option'")
        try:
            value: Any = json.loads(raw)
        except ValueError:
            value = raw
        options[key] = value
    return options


def refuse_on_engine(paths: list[Path], reader: str | None, options: list[str] | None) -> None:
    """``--engine`` reads canonical Parquet/JSONL files by path: say so when a reader, options or stdin are given."""
    if reader is not None or options:
        raise typer.BadParameter("--engine reads canonical Parquet/JSONL; convert other formats first with "
                                 "`tracetochain convert` (that is where --reader and -O apply)")
    if any(str(p) == STDIN for p in paths):
        raise typer.BadParameter("--engine reads files or folders, not standard input; save the traces to a file")


def pyarrow_without_pandas() -> None:
    """Tell pyarrow, once per process, that pandas is absent unless something already imported it.

    pyarrow probes for pandas on its first ``pa.array`` (to recognise Series/DataFrames) and, when pandas is merely
    installed, imports it: ~0.4 s of start-up, more than the whole analysis of a small corpus, for objects the command
    line never builds (its readers hand pyarrow lists and NumPy arrays). The probe sees ``import pandas`` fail once;
    pandas itself stays importable, and pyarrow's own pandas conversions (``to_pandas``) import it again on demand.
    """
    if "pandas" in sys.modules:
        return
    import pyarrow as pa

    sys.meta_path.insert(0, _NoPandas)
    try:
        pa.array([0])
    finally:
        sys.meta_path.remove(_NoPandas)


class _NoPandas:
    """A meta-path finder under which ``import pandas`` fails (pyarrow's probe then records "no pandas")."""

    @staticmethod
    def find_spec(name: str, path: object = None, target: object = None) -> None:
        if name == "pandas":
            raise ModuleNotFoundError("pandas is not used by the command line", name="pandas")


def load_traces(path: Path | str | list[Path] | list[str], reader: str | None = None,
                options: list[str] | dict[str, Any] | None = None, *, on_error: str = "raise",
                announce: bool = True, where: list[str] | None = None) -> TraceTable:
    """Read the trace sources of a command: ``-`` is standard input, ``options`` are ``-O`` items (or a dict).

    Several paths, a folder no reader reads whole, or a glob pattern are read into one corpus
    (:func:`~tracetochain.readers._many.read_corpus`: every episode carries ``source_file`` and its file's
    ``meta.*``). ``where`` keeps the episodes meeting every ``FIELD=VALUE`` condition (:meth:`TraceTable.where`).
    With ``announce`` and no ``reader`` the reader that detection chose is named on stderr (stdout may be JSON), and
    so is a verdict field the reader found by itself. Option errors a reader raises as ``TypeError``/``ValueError``
    become usage errors naming ``-O``.
    """
    pyarrow_without_pandas()
    paths: list[Path | str] = [path] if isinstance(path, (str, Path)) else list(path)
    if len(paths) > 1 or (str(paths[0]) != STDIN and _needs_corpus(paths[0], reader)):
        table = _load_corpus(paths, reader, options, on_error=on_error, announce=announce)
    else:
        table = _load_one(paths[0], reader, options, on_error=on_error, announce=announce)
    if announce and table.report.verdict_field:
        typer.echo(f"verdict: {table.report.verdict_field} (the only verdict field in the episodes; choose "
                   "another with -O outcome_key=PATH)", err=True)
    if where:
        table = table.where(list(where))
        if announce:
            typer.echo(f"selected {table.n_traces} traces where {' and '.join(table.report.filters)}", err=True)
    return table


def _needs_corpus(path: Path | str, reader: str | None) -> bool:
    """A glob pattern, or a folder that no reader (the chosen one) reads as a whole."""
    from tracetochain.readers.shared import _is_pattern, _read_whole

    text = str(path)
    if _is_pattern(text):
        return True
    p = Path(text)
    return p.is_dir() and not _read_whole(p, reader)


def _load_corpus(paths: list[Path | str], reader: str | None, options: list[str] | dict[str, Any] | None,
                 *, on_error: str, announce: bool) -> TraceTable:
    from tracetochain.exceptions import TraceToChainError
    from tracetochain.readers.shared import read_corpus

    if any(str(p) == STDIN for p in paths):
        raise typer.BadParameter("standard input (-) cannot be combined with other inputs")
    opts = options if isinstance(options, dict) else parse_reader_options(options)
    try:
        table = read_corpus([str(p) for p in paths], reader, on_error=on_error, **opts)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, TraceToChainError):
            raise
        raise typer.BadParameter(str(exc), param_hint="'--option'" if opts else None) from None
    if announce:
        n = table.report.run_metadata.get("n_files", 1)
        how = "detected per file; " if reader is None else ""
        typer.echo(f"read {n} files as {table.report.format} ({how}{table.n_traces} traces)", err=True)
    return table


def _load_one(path: Path | str, reader: str | None = None, options: list[str] | dict[str, Any] | None = None,
              *, on_error: str = "raise", announce: bool = True) -> TraceTable:
    from tracetochain.exceptions import TraceToChainError, TraceValidationError
    from tracetochain.readers import detect_format, read_traces

    opts = options if isinstance(options, dict) else parse_reader_options(options)
    from_stdin = str(path) == STDIN
    spool = _spool_stdin() if from_stdin else None
    source = spool if spool is not None else Path(path)
    name = reader
    try:
        if name is None:
            name = detect_format(source)
        table = read_traces(source, name, on_error=on_error, **opts)
    except TraceValidationError as exc:
        detected = name if reader is None else None  # the error says which reader detection chose
        if spool is None and detected is None:
            raise
        raise _restated(exc, spool, detected) from None
    except (TypeError, ValueError) as exc:
        if isinstance(exc, TraceToChainError):
            raise
        raise typer.BadParameter(str(exc), param_hint="'--option'" if opts else None) from None
    finally:
        if spool is not None:
            shutil.rmtree(spool.parent, ignore_errors=True)
    if from_stdin:
        table.report.source = STDIN_NAME
    if announce and reader is None:
        typer.echo(detected_line(table.report.format, table.report.source), err=True)
    return table


def detected_line(reader: str, source: str) -> str:
    """The line naming the reader detection chose for ``source``."""
    return f"reader: {reader} (detected for {source}; choose another with --reader NAME)"


# ---------------------------------------------------------------------------------------------------- stdin
def _spool_stdin() -> Path:
    """Copy standard input to a private temporary file whose extension says what the bytes look like, because
    readers recognise their formats by extension and first bytes (see :func:`stdin_suffix`)."""
    folder = Path(tempfile.mkdtemp(prefix="tracetochain-stdin-"))
    stream = sys.stdin.buffer if hasattr(sys.stdin, "buffer") else None
    head = stream.read(65_536) if stream is not None else sys.stdin.read(65_536).encode("utf-8")
    target = folder / f"stdin{stdin_suffix(head)}"
    with target.open("wb") as fh:
        fh.write(head)
        if stream is not None:
            shutil.copyfileobj(stream, fh, 1 << 20)
        else:
            for chunk in iter(lambda: sys.stdin.read(1 << 20), ""):
                fh.write(chunk.encode("utf-8"))
    if target.stat().st_size == 0:
        shutil.rmtree(folder, ignore_errors=True)
        from tracetochain.exceptions import TraceValidationError

        raise TraceValidationError("standard input is empty", source=STDIN_NAME,
                                   hint="pipe the traces in, e.g. `cat runs.jsonl | tracetochain fit -`")
    os.chmod(target, 0o600)
    return target


def stdin_suffix(head: bytes) -> str:
    """The file extension the first bytes of a stream suggest.

    A zip archive is an inspect_ai ``.eval`` log, ``PAR1`` Parquet; text starting with ``[`` is a JSON document,
    text starting with ``{`` is JSON Lines when a second value follows the first one and a JSON document otherwise;
    other text with a comma on its first line is CSV, anything else plain text (``.txt``).

    >>> stdin_suffix(b'{"a": 1}\\n{"a": 2}\\n'), stdin_suffix(b'{\\n "a": [1, 2]\\n}'), stdin_suffix(b"a,b\\n1,2")
    ('.jsonl', '.json', '.csv')
    """
    if head.startswith(b"PK\x03\x04"):
        return ".eval"
    if head.startswith(b"PAR1"):
        return ".parquet"
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    if text.startswith("["):
        return ".json"
    if text.startswith("{"):
        try:
            _, end = json.JSONDecoder().raw_decode(text)
        except ValueError:  # cut off inside the first value: one big document
            return ".json"
        return ".jsonl" if text[end:].strip() else ".json"
    first = text.splitlines()[0] if text else ""
    return ".csv" if "," in first else ".txt"


def _restated(exc: Any, spool: Path | None, detected: str | None) -> Any:
    """The same validation error with a temporary file's name replaced by ``<stdin>`` and, when detection chose
    the reader, a note naming it (still one line)."""
    from tracetochain.exceptions import TraceValidationError

    source, message, hint = exc.source, exc._message, exc.hint
    if spool is not None:
        source = source.replace(str(spool), STDIN_NAME) if isinstance(source, str) else source
        message = message.replace(str(spool), STDIN_NAME)
        hint = hint.replace(str(spool), STDIN_NAME) if isinstance(hint, str) else hint
    if detected is not None:
        note = f"read as {detected} (detected; choose another with --reader NAME)"
        hint = f"{hint}; {note}" if hint else note
    return TraceValidationError(message, source=source, line=exc.line, row=exc.row, field=exc.field, hint=hint)
