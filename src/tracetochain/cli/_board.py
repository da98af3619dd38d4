"""`board`: many configurations in one command — one row per group, rank intervals, Holm-adjusted differences.

The command reads its inputs into one corpus, keeps the episodes ``--where`` selects, splits them ``--by`` a field
and calls :func:`tracetochain.analysis._board.board`; it renders the result (``report/_board.py``) and computes
nothing itself. ``report --by``, ``fit --by`` and ``audit --by`` run the same board.
"""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from tracetochain.cli._commands import (
    EngineOpt,
    ForceOpt,
    JobsOpt,
    OnErrorChoice,
    SchedulerOpt,
    StatesOpt,
    VocabularyOpt,
    _parse_ks,
    check_output,
    samples_option,
    state_options,
)
from tracetochain.cli._input import ByOpt, ReaderOpt, ReaderOptionOpt, WhereOpt, load_traces

BOARD_EXAMPLE = ("Example: tracetochain board runs/ --by meta.model --where metadata.attack_type=none -o board.html "
                 "--cards cards/   (one JSONL file per configuration, each with a metadata header line)")


class BoardFormat(StrEnum):
    html = "html"
    md = "md"
    json = "json"
    csv = "csv"


def run_board(traces: list[Path], *, by: str, where: list[str] | None, reader: str | None,
              option: list[str] | None, on_error: str, engine: str | None, scheduler: str | None, states: str,
              vocabulary: str | None, audit: bool, samples: int, ci: float, level: float, k: str, width: float,
              seed: int, quiet: bool, audit_options: dict[str, Any] | None = None, jobs: int = -1) -> Any:
    """Read, select and group the traces, and build the board (library call; usage errors as such)."""
    from tracetochain.analysis.shared import board
    from tracetochain.exceptions import TraceToChainError

    table = load_traces(traces, reader, option, on_error=on_error, announce=not quiet, where=where)
    ks = tuple(sorted(set(_parse_ks(k)) | {1}))
    spec: Any = None if states == "label" and not vocabulary else states
    opts = state_options(states, "kind,tool,error", vocabulary, 2, 10, seed)

    def progress(stage: str) -> None:
        if not quiet:
            typer.echo(stage, err=True)

    kwargs: dict[str, Any] = {"by": by, "states": spec or "label", "state_options": opts, "audit": audit,
                              "samples": samples, "confidence": ci, "level": level, "ks": ks, "width": width,
                              "seed": seed, "on_error": on_error, "progress": progress, "n_jobs": jobs,
                              **(audit_options or {})}
    try:
        if engine is None:
            return board(table, **kwargs)
        from tracetochain.engines import get_engine

        with get_engine(engine, scheduler=scheduler) as eng:
            return board(table, engine=eng, **kwargs)
    except ValueError as exc:
        if isinstance(exc, TraceToChainError):
            raise
        raise typer.BadParameter(str(exc)) from None


def render_board(doc: dict[str, Any], fmt: str) -> str:
    from tracetochain.report.shared import board_csv, render_board_html, render_board_markdown

    return {"html": lambda: render_board_html(doc), "md": lambda: render_board_markdown(doc),
            "csv": lambda: board_csv(doc),
            "json": lambda: json.dumps(doc, indent=1, allow_nan=False, ensure_ascii=False) + "\n"}[fmt]()


def write_cards(result: Any, folder: Path, force: bool, inputs: list[Path]) -> list[Path]:
    """One reliability card per group, as JSON and Markdown, in ``folder``."""
    from tracetochain._files import write_output
    from tracetochain.report.shared import board_card_markdown

    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for i, group in enumerate(result.groups):
        card = result.card(group)
        stem = f"{i + 1:02d}-" + "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in group)[:80]
        for suffix, text in ((".json", json.dumps(card, indent=1, allow_nan=False, ensure_ascii=False) + "\n"),
                             (".md", board_card_markdown(card))):
            path = folder / f"{stem}{suffix}"
            write_output(path, text, overwrite=force, inputs=inputs, what="card")
            written.append(path)
    return written


def board_command(
    traces: Annotated[list[Path], typer.Argument(
        help="Trace files, folders or quoted glob patterns (any supported format), read into one corpus.")],
    by: Annotated[str, typer.Option("--by", metavar="FIELD", help="The field whose values are the board's rows "
                                    "(e.g. meta.model, source_file, metadata.defense).")] = "source_file",
    where: WhereOpt = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Where to write (default: print).")] = None,
    format: Annotated[BoardFormat | None, typer.Option(
        "--format", help="html (self-contained page), md, json (one row per group) or csv.")] = None,
    cards: Annotated[Path | None, typer.Option(
        "--cards", metavar="FOLDER", help="Write one reliability card per group (JSON and Markdown) here.")] = None,
    reader: ReaderOpt = None,
    option: ReaderOptionOpt = None,
    states: StatesOpt = "label",
    vocabulary: VocabularyOpt = None,
    k: Annotated[str, typer.Option("--k", help="k for pass^k, comma-separated.")] = "1,3",
    no_audit: Annotated[bool, typer.Option("--no-audit", help="Skip the certificate (faster).")] = False,
    level: Annotated[float, typer.Option("--level", min=0.001, max=0.5, help="Family-wise level of the pairwise "
                                         "differences and rank intervals (Holm).")] = 0.05,
    ci: Annotated[float, typer.Option("--ci", min=0.5, max=0.999, help="Interval level.")] = 0.95,
    samples: Annotated[int, typer.Option(min=50, callback=samples_option, help="Posterior draws.")] = 1000,
    width: Annotated[float, typer.Option("--width", min=0.001, max=0.999, help="Target interval width of the "
                                         "tasks × trials planner.")] = 0.1,
    seed: Annotated[int, typer.Option(help="Seed for every random choice.")] = 0,
    on_error: Annotated[OnErrorChoice, typer.Option(
        "--on-error", help="Bad records: stop with an error, or skip their traces and report the count.")] = (
        OnErrorChoice.raise_),
    engine: EngineOpt = None,
    scheduler: SchedulerOpt = None,
    jobs: JobsOpt = -1,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing but errors.")] = False,
    force: ForceOpt = False,
) -> None:
    """A reliability board: one row per group (pass rate, R∞, pass^k, steps, cost, certificate, ICC, planner) with
    intervals clustered by task, rank intervals and Holm-adjusted pairwise differences."""
    fmt = (format.value if format is not None else
           (output.suffix.lstrip(".").lower().replace("markdown", "md") if output is not None
            and output.suffix.lstrip(".").lower() in ("html", "md", "markdown", "json", "csv") else
            ("html" if output is not None else "md")))
    inputs = [p for p in traces if Path(p).exists()]
    if output is not None:
        check_output(output, force, inputs, "board")
    result = run_board(traces, by=by, where=where, reader=reader, option=option, on_error=on_error.value,
                       engine=engine, scheduler=scheduler, states=states, vocabulary=vocabulary, audit=not no_audit,
                       samples=samples, ci=ci, level=level, k=k, width=width, seed=seed, quiet=quiet, jobs=jobs)
    text = render_board(result.to_dict(), fmt)
    if output is None:
        sys.stdout.write(text)
    else:
        from tracetochain._files import write_output

        write_output(output, text, overwrite=force, inputs=inputs, what="board")
        if not quiet:
            typer.echo(f"{len(result.rows)} groups by {by}; wrote {output}", err=True)
    if cards is not None:
        written = write_cards(result, cards, force, inputs)
        if not quiet:
            typer.echo(f"wrote {len(written) // 2} reliability cards to {cards}", err=True)


__all__ = ["BOARD_EXAMPLE", "ByOpt", "board_command", "render_board", "run_board", "write_cards"]
