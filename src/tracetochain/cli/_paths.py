"""`paths`: which recurring paths, loops and error runs go with success or failure (library:
:func:`tracetochain.analysis.analyze_paths`). Parse → one library call → render."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from tracetochain.cli._commands import (
    EngineOpt,
    FeaturesOpt,
    KMaxOpt,
    KMinOpt,
    OnErrorChoice,
    SchedulerOpt,
    StatesOpt,
    VocabularyOpt,
    analysis_input,
    state_options,
)
from tracetochain.cli._input import ReaderOpt, ReaderOptionOpt

PATHS_EXAMPLE = ("Example: tracetochain paths runs.jsonl --top 10   (SWE-bench trajectories: tracetochain paths "
                 "trajectories/ --vocabulary shell --json > paths.json)")

MinTracesOpt = Annotated[int, typer.Option(
    "--min-traces", min=1, help="A pattern is tested only if at least this many traces contain it and this many do "
                                "not (with --min-share: the larger of the two).")]
MinShareOpt = Annotated[float, typer.Option(
    "--min-share", min=0.0, max=0.49, help="… or this share of the traces, whichever is larger.")]
MaxLengthOpt = Annotated[int, typer.Option("--max-length", min=1, max=8,
                                           help="Longest n-gram of consecutive states enumerated.")]


def candidate_options(min_traces: int, min_share: float, max_length: int) -> dict[str, Any]:
    return {"min_traces": min_traces, "min_share": min_share, "max_length": max_length}


def paths(
    traces: Annotated[Path, typer.Argument(
        help="Trace file or folder in any supported format (see `formats`), or - for standard input.")],
    reader: ReaderOpt = None,
    option: ReaderOptionOpt = None,
    on_error: Annotated[OnErrorChoice, typer.Option(
        "--on-error", help="Bad records: stop with an error, or skip their traces and report the count.")] = (
        OnErrorChoice.raise_),
    states: StatesOpt = "label",
    features: FeaturesOpt = "kind,tool,error",
    vocabulary: VocabularyOpt = None,
    k_min: KMinOpt = 2,
    k_max: KMaxOpt = 10,
    seed: Annotated[int, typer.Option(help="Seed for state learning.")] = 0,
    min_traces: MinTracesOpt = 5,
    min_share: MinShareOpt = 0.01,
    max_length: MaxLengthOpt = 4,
    ci: Annotated[float, typer.Option("--ci", min=0.5, max=0.999, help="Interval level.")] = 0.95,
    level: Annotated[float, typer.Option("--level", min=0.001, max=0.5,
                                         help="False discovery rate a pattern is reported as supported at.")] = 0.05,
    top: Annotated[int, typer.Option("--top", min=1, help="Rows shown in the table (--json lists every pattern).")
                   ] = 20,
    engine: EngineOpt = None,
    scheduler: SchedulerOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the versioned JSON document instead of tables.")
                       ] = False,
) -> None:
    """Find the paths that go with failure: common variants (whole paths, repeats collapsed) and motifs (runs of up to
    4 states, loops, states revisited, consecutive errors), each with its share of traces, the success rate with and
    without it, the difference with an interval (clustered by task when tasks repeat) and a q-value controlling the
    false discovery rate over every pattern tested (Benjamini–Yekutieli: valid however the patterns overlap)."""
    from tracetochain._progress import console_progress

    with console_progress() as progress:  # on stderr: a bar on a terminal, a line per phase of 2 s or more otherwise
        progress("reading")
        source = analysis_input(traces, reader, option, on_error.value, engine)
        progress("paths: states, candidates and tests")
        result = run_paths(source, on_error=on_error.value, engine=engine, scheduler=scheduler, states=states,
                           options=state_options(states, features, vocabulary, k_min, k_max, seed), seed=seed,
                           confidence=ci, **candidate_options(min_traces, min_share, max_length))
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2, allow_nan=False))
        return
    from tracetochain.cli._render import render_paths

    render_paths(result.to_dict(), top=top, level=level)


def run_paths(source: Any, *, on_error: str, engine: str | None, scheduler: str | None, states: str,
              options: dict[str, Any], seed: int, confidence: float, **candidates: Any) -> Any:
    """Call :func:`tracetochain.analysis.analyze_paths` once, whatever the engine; ValueErrors become usage errors."""
    from tracetochain.analysis import analyze_paths
    from tracetochain.exceptions import TraceToChainError

    spec: Any = None if states == "label" and not options else states
    try:
        if engine is None:
            return analyze_paths(source, on_error=on_error, states=spec, state_options=options, seed=seed,
                                 confidence=confidence, **candidates)
        from tracetochain.engines import get_engine

        with get_engine(engine, scheduler=scheduler) as eng:
            return analyze_paths(source, on_error=on_error, engine=eng, states=spec, state_options=options, seed=seed,
                                 confidence=confidence, **candidates)
    except ValueError as exc:
        if isinstance(exc, TraceToChainError):
            raise
        raise typer.BadParameter(str(exc)) from None


def report_paths(result: Any, source: Any, *, on_error: str, engine: str | None, scheduler: str | None, seed: int,
                 confidence: float) -> Any:
    """The path patterns of the traces an analysis read, under its states (the report's "Paths" section): from the
    traces in memory, or read again partition by partition on the same engine; None when no trace has an outcome."""
    from tracetochain.analysis import analyze_paths
    from tracetochain.exceptions import EmptyTraceSetError

    try:
        if result.traces is not None:
            return analyze_paths(result.traces, state_model=result.state_model, seed=seed, confidence=confidence)
        from tracetochain.engines import get_engine

        with get_engine(engine, scheduler=scheduler) as eng:
            return analyze_paths(source, on_error=on_error, engine=eng, state_model=result.state_model, seed=seed,
                                 confidence=confidence)
    except EmptyTraceSetError:
        return None


def run_compare_paths(a: Any, b: Any, *, labels: tuple[str, str], states: Any, state_options: dict[str, Any],
                      seed: int, confidence: float, engine: str | None, scheduler: str | None) -> dict[str, Any]:
    """`compare --paths`: :func:`tracetochain.analysis.compare_paths` on the two inputs."""
    from tracetochain.analysis import compare_paths

    kwargs: dict[str, Any] = {"labels": labels, "states": "label" if states is None else states,
                              "state_options": state_options, "seed": seed, "confidence": confidence}
    if engine is None:
        return compare_paths(a, b, **kwargs)
    from tracetochain.engines import get_engine

    with get_engine(engine, scheduler=scheduler) as eng:
        return compare_paths(a, b, engine=eng, **kwargs)
