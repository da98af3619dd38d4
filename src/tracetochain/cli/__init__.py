"""The ``tracetochain`` command line. Thin: parse options → call the public API → render.

Exit codes: 0 success; 2 bad input or usage (one line on stderr, no traceback); 3 a ``--fail-under`` gate
failed or ``monitor`` raised a drift alert; 4 the audit rejected the chain and ``--fail-on-reject`` was given;
1 unexpected internal error (the traceback is shown only with ``--debug`` or ``TRACETOCHAIN_DEBUG=1``).
"""

from __future__ import annotations

import os
import sys

# OpenBLAS's worker threads busy-wait for work for about 2^28 cycles (~0.1 s) after they start and after every call
# before they sleep: on a 2-core machine that spin cost `tracetochain fit` a quarter of its CPU (0.85 → 0.61 CPU-s on
# the demo, SWE-bench 1.52 → 1.14) with no gain in wall time, and `audit --model auto` none either (29.2 → 28.6 s).
# A 2^4-cycle wait keeps the threads for large solves. Set before anything loads numpy (its OpenBLAS reads it at
# load); the command line only — a library import never touches the environment — and never over the user's value.
if "numpy" not in sys.modules:
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import typer

from tracetochain.cli import _board, _commands, _formats, _paths, _report, _serve, _whatif

app = typer.Typer(
    name="tracetochain",
    help="Turn LLM-agent traces into an audited absorbing Markov chain and its reliability metrics.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain Click help: rich's help panels cost ~0.3 s per `--help` (importing and measuring them), the rest of
    # the command line starts in ~0.1 s.
    rich_markup_mode=None,
    epilog="Example: tracetochain fit runs.jsonl -o chain.json && tracetochain metrics chain.json --horizon 30",
)
app.command("fit", epilog=_commands.FIT_EXAMPLE)(_commands.fit)
app.command("metrics", epilog=_commands.METRICS_EXAMPLE)(_commands.metrics)
app.command("convert", epilog=_formats.CONVERT_EXAMPLE)(_formats.convert)
app.command("formats", epilog=_formats.FORMATS_EXAMPLE)(_formats.formats)
app.command("report", epilog=_report.REPORT_EXAMPLE)(_report.report)
app.command("audit", epilog=_report.AUDIT_EXAMPLE)(_report.audit)
app.command("whatif", epilog=_whatif.WHATIF_EXAMPLE)(_whatif.whatif)
app.command("export", epilog=_whatif.EXPORT_EXAMPLE)(_whatif.export)
app.command("board", epilog=_board.BOARD_EXAMPLE)(_board.board_command)
app.command("compare", epilog=_whatif.COMPARE_EXAMPLE)(_whatif.compare)
app.command("paths", epilog=_paths.PATHS_EXAMPLE)(_paths.paths)
app.command("monitor", epilog=_whatif.MONITOR_EXAMPLE)(_whatif.monitor)
app.command("serve", epilog=_serve.SERVE_EXAMPLE)(_serve.serve)


def _print_version(value: bool) -> None:
    if value:
        from tracetochain._version import __version__

        typer.echo(f"tracetochain {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show full tracebacks for errors."),
    version: bool = typer.Option(False, "--version", help="Print the version and exit.", is_eager=True,
                                 callback=_print_version),
) -> None:
    if debug:
        os.environ["TRACETOCHAIN_DEBUG"] = "1"


def main() -> None:
    """Console entry point: library errors become one clear line and exit code 2."""
    from tracetochain._text import terminal_block
    from tracetochain.exceptions import TraceToChainError

    try:
        app(standalone_mode=False)
    except TraceToChainError as exc:
        if os.environ.get("TRACETOCHAIN_DEBUG"):
            raise
        # Messages quote trace content (names, file names, parser excerpts): no escape sequence reaches the terminal.
        print(f"error: {terminal_block(str(exc))}", file=sys.stderr)
        sys.exit(2)
    except BrokenPipeError:  # the reader of our output went away (e.g. `| head`): stop quietly, as cat does
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(141)
    except OSError as exc:  # a file the operating system would not let us read or write
        if os.environ.get("TRACETOCHAIN_DEBUG"):
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"error: {terminal_block(where)}{exc.strerror or terminal_block(str(exc))}", file=sys.stderr)
        sys.exit(2)
    except MemoryError:
        if os.environ.get("TRACETOCHAIN_DEBUG"):
            raise
        print("error: ran out of memory — for a large corpus use --engine local (it reads partition by partition); "
              "with many distinct states group them with --states categorical or ward; see docs/safety.md",
              file=sys.stderr)
        sys.exit(2)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        print("aborted", file=sys.stderr)
        sys.exit(130)
    except Exception as exc:  # Click usage errors carry their own exit code and formatting
        show = getattr(exc, "show", None)
        code = getattr(exc, "exit_code", None)
        if callable(show) and isinstance(code, int):
            show()
            sys.exit(code)
        if os.environ.get("TRACETOCHAIN_DEBUG"):
            raise
        print(f"internal error: {type(exc).__name__}: {terminal_block(str(exc))} (rerun with --debug for the "
              "traceback, and please report it)", file=sys.stderr)
        sys.exit(1)


__all__ = ["app", "main"]
