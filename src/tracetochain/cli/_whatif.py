"""`whatif` and `export`: questions to a saved chain, and the chain in other tools' languages."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from tracetochain.cli._commands import (
    EngineOpt,
    ForceOpt,
    JobsOpt,
    ModelChoice,
    ModelOpt,
    SchedulerOpt,
    check_output,
    horizon_option,
    input_paths,
    samples_option,
)
from tracetochain.cli._input import STDIN, ByOpt, ReaderOpt, ReaderOptionOpt, WhereOpt, load_traces, pick_alias
from tracetochain.cli._output import echo_text

WHATIF_EXAMPLE = ('Example: tracetochain whatif chain.json --reroute "*->success:0.1" --edge-cost "*->success=0.05" '
                  "  (a fallback that rescues 10% of every state's failures at $0.05 a use: ΔR∞ and the change in "
                  "dollars per success)")
EXPORT_EXAMPLE = "Example: tracetochain export chain.json --to mermaid -o chain.mmd"



def whatif(
    chain_file: Annotated[Path, typer.Argument(help="A chain JSON written by `tracetochain fit -o`.")],
    reroute: Annotated[list[str] | None, typer.Option(
        help='Move a fraction of a state\'s failure mass: "STATE->TARGET:FRACTION" (STATE may be *).')] = None,
    set_edge: Annotated[list[str] | None, typer.Option(
        "--set-edge", help='Set a transition: "STATE->TARGET=PROBABILITY" (rest of the row rescaled).')] = None,
    scale_edge: Annotated[list[str] | None, typer.Option(
        "--scale-edge", help='Scale a transition: "STATE->TARGET*FACTOR".')] = None,
    retry: Annotated[list[str] | None, typer.Option(help='Set a retry (self-loop) probability: "STATE=P".')] = None,
    remove: Annotated[list[str] | None, typer.Option(help="Remove a state (its visits bypassed).")] = None,
    edits: Annotated[Path | None, typer.Option(help="An edit file (TOML [[edit]] tables), applied first.")] = None,
    bottleneck_fraction: Annotated[float, typer.Option(
        "--bottleneck-fraction", min=0.0, max=1.0, help="Fallback share used to rank bottlenecks.")] = 0.1,
    edge_cost: Annotated[list[str] | None, typer.Option(
        "--edge-cost", help='Price of the mass the edits add to an edge, per use: "STATE->TARGET=COST" (in the '
                            "unit of --cost-metric; e.g. a fallback tool's price).")] = None,
    cost_metric: Annotated[str | None, typer.Option(
        "--cost-metric", help="Cost metric for the cost per success: cost_usd, tokens, tokens_in, tokens_out, "
                              "seconds or api_calls (default: the first the chain's cost model has).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")] = False,
) -> None:
    """Evaluate design changes on a fitted chain exactly (with the first-order term and Prop. 2 bound), and rank
    the bottleneck states."""
    from tracetochain.chain import AbsorbingChain
    from tracetochain.whatif import bottlenecks, load_edits, parse_edge_cost, what_if
    from tracetochain.whatif.shared import edits_from_options

    chain = AbsorbingChain.from_json(chain_file)
    todo = (load_edits(edits) if edits else []) + edits_from_options(
        reroute=reroute or [], set_edge=set_edge or [], scale_edge=scale_edge or [], retry=retry or [],
        remove=remove or [])
    ranking = bottlenecks(chain, fraction=bottleneck_fraction)
    ensemble = None
    if todo and "counts" in chain.metadata:
        from tracetochain.uncertainty import DirichletPosterior

        ensemble = DirichletPosterior(samples=500, seed=0).fit(chain).fetch_model().ensemble
    prices = [parse_edge_cost(spec) for spec in edge_cost or []]
    result = what_if(chain, todo, ensemble=ensemble, cost_metric=cost_metric, edge_costs=prices) if todo else None
    if as_json:
        typer.echo(json.dumps({"whatif": result.to_dict() if result else None, "bottlenecks": ranking.to_dict()},
                              indent=2, allow_nan=False))
        return
    if result is not None:
        echo_text(str(result))
    else:
        typer.echo("No edits given (see --help); bottlenecks only.")
    typer.echo("")
    echo_text(str(ranking))


class ExportFormat(StrEnum):
    dot = "dot"
    mermaid = "mermaid"
    prism = "prism"
    json = "json"


def export(
    chain_file: Annotated[Path, typer.Argument(help="A chain JSON written by `tracetochain fit -o`.")],
    to: Annotated[ExportFormat, typer.Option("--to", help="Target language.")] = ExportFormat.dot,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write here instead of stdout.")] = None,
    min_prob: Annotated[float, typer.Option("--min-prob", min=0.0, max=1.0,
                                            help="Leave out edges below this probability (dot, mermaid).")] = 0.0,
    force: ForceOpt = False,
) -> None:
    """Write the chain as Graphviz DOT, Mermaid, a PRISM model (check it with PRISM or Storm) or plain JSON."""
    from tracetochain._files import write_output
    from tracetochain.chain import AbsorbingChain
    from tracetochain.report import to_dot, to_mermaid, to_prism

    if output is not None:
        check_output(output, force, [chain_file], "export")
    doc = AbsorbingChain.from_json(chain_file).to_dict()
    text = {"dot": lambda: to_dot(doc, min_prob), "mermaid": lambda: to_mermaid(doc, min_prob),
            "prism": lambda: to_prism(doc), "json": lambda: json.dumps(doc, indent=1) + "\n"}[to.value]()
    if output is None:
        typer.echo(text, nl=False)
        return
    write_output(output, text, overwrite=force, inputs=[chain_file], what="export")
    typer.echo(f"wrote {output} ({to.value})")


COMPARE_EXAMPLE = ("Example: tracetochain compare last_week.jsonl this_week.jsonl --vocabulary chat --json   "
                   "(ΔR∞ with a bootstrap interval, which states changed, and a verdict); many at once: "
                   "tracetochain compare runs/*.jsonl --markdown")


def compare(
    inputs: Annotated[list[Path], typer.Argument(
        metavar="A B [C …]",
        help="Baseline traces A and the traces B to compare with it (any supported format, same reader and "
             "options; - for standard input). Three or more inputs, or --by, compare every input (file) or group "
             "at once on a reliability board (Holm-adjusted pairwise differences, rank intervals).")],
    reader: ReaderOpt = None,
    option: ReaderOptionOpt = None,
    where: WhereOpt = None,
    by: ByOpt = None,
    states: Annotated[str, typer.Option(
        help="label, categorical, ward, informative or milestones:FILE (fitted on A ∪ B).")] = "label",
    vocabulary: Annotated[str | None, typer.Option(help="shell or chat action categories as states.")] = None,
    features: Annotated[str, typer.Option(help="For --states ward: the features.")] = "kind,tool,error",
    pseudocount: Annotated[float | None, typer.Option(
        min=0.0, help="Laplace pseudocount α (default: the episode prior).")] = None,
    horizon: Annotated[int, typer.Option(min=1, callback=horizon_option, help="Largest step budget for ΔR(d).")
                       ] = 50,
    samples: Annotated[int, typer.Option(min=50, callback=samples_option, help="Bootstrap replicates per set.")
                       ] = 200,
    ci: Annotated[float, typer.Option("--ci", min=0.5, max=0.999, help="Interval level.")] = 0.95,
    seed: Annotated[int, typer.Option(
        help="Seed for the bootstrap replicates (intervals and the homogeneity test's Rao–Scott correction) and the "
             "permutation test's relabellings.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")] = False,
    markdown: Annotated[bool, typer.Option("--markdown", help="Print a Markdown pull-request comment.")] = False,
    fail_if_worse: Annotated[bool, typer.Option(
        "--fail-if-worse", help="Exit 3 when B is significantly less reliable than A: ΔR∞'s interval below 0 and "
                                "the permutation test of no difference rejecting at 1 − --ci (never on "
                                "insufficient evidence).")] = False,
    permutations: Annotated[int, typer.Option(
        min=19, help="Relabellings of the traces between A and B for the permutation test of ΔR∞ = 0 (its "
                     "smallest p-value is 1/(N + 1)).")] = 199,
    engine: EngineOpt = None,
    scheduler: SchedulerOpt = None,
    model: ModelOpt = ModelChoice.markov,
    jobs: JobsOpt = -1,
    paths: Annotated[bool, typer.Option(
        "--paths", help="Also list the path patterns that changed between A and B (prevalence and success with "
                        "them, Benjamini–Yekutieli q-values; JSON key `paths`).")] = False,
) -> None:
    """Compare two trace sets: is B more or less reliable than A, and where do they differ?

    A difference in R∞ is called when ΔR∞'s interval excludes 0 and a permutation test of no difference (the traces
    relabelled between A and B, a task's trials within the task) rejects too; its p-value is printed with the
    verdict. The same comparison in memory and, with --engine, partition by partition. With --model other than
    markov, one model (chosen on A ∪ B, or the family asked for) is fitted on each set, and R∞, ΔR∞ and ΔR(d) are
    its own (intervals from refits over each set's units; the permutation test stays the first-order chains')."""
    import sys

    from tracetochain.cli._commands import analysis_input, model_arguments
    from tracetochain.compare import compare as run_compare
    from tracetochain.exceptions import TraceToChainError

    if by is not None or len(inputs) > 2:
        from tracetochain.cli._board import run_board

        board = run_board(inputs, by=by or "source_file", where=where, reader=reader, option=option,
                          on_error="raise", engine=engine, scheduler=scheduler, states=states, vocabulary=vocabulary,
                          audit=False, samples=max(samples, 200), ci=ci, level=round(1 - ci, 6), k="1,3",
                          width=0.1, seed=seed, quiet=as_json)
        if as_json:
            typer.echo(json.dumps(board.to_dict(), indent=2, allow_nan=False))
        else:
            from tracetochain.report.shared import render_board_markdown

            echo_text(render_board_markdown(board.to_dict()) if markdown else str(board), nl=not markdown)
        return
    if len(inputs) != 2:
        raise typer.BadParameter("compare needs two inputs A B, three or more, or --by FIELD")
    a, b = inputs
    options: dict[str, object] = {"vocabulary": vocabulary} if vocabulary else {}
    if states == "ward":
        options["features"] = features
    if states == "informative":
        options["seed"] = seed
    if str(a) == STDIN and str(b) == STDIN:
        raise typer.BadParameter("only one of A and B can be read from standard input (-)")
    spec = None if states == "label" and not options else states
    from tracetochain._progress import console_progress

    with console_progress() as progress:
        progress("reading A")
        src_a = analysis_input(a, reader, option, "raise", engine, where=where)
        progress("reading B")
        src_b = analysis_input(b, reader, option, "raise", engine, where=where)
        common: dict[str, Any] = {"names": (a.name, b.name), "states": spec, "state_options": options,
                                  "pseudocount": pseudocount, "horizon": horizon, "samples": samples,
                                  "confidence": ci, "seed": seed, "permutations": permutations,
                                  **model_arguments(model, jobs)}
        progress("comparing (both analyses)")
        try:
            if engine is not None:
                from tracetochain.engines import get_engine

                with get_engine(engine, scheduler=scheduler) as eng:
                    result = run_compare(src_a, src_b, engine=eng, **common)
            else:
                result = run_compare(src_a, src_b, **common)
        except ValueError as exc:
            if isinstance(exc, TraceToChainError):
                raise
            raise typer.BadParameter(str(exc)) from None
        changed = None
        if paths:
            from tracetochain.cli._paths import run_compare_paths

            progress("paths")
            changed = run_compare_paths(src_a, src_b, labels=(a.name, b.name), states=spec, state_options=options,
                                        seed=seed, confidence=ci, engine=engine, scheduler=scheduler)
    if as_json:
        doc = result.to_dict()
        if changed is not None:
            doc["paths"] = changed
        typer.echo(json.dumps(doc, indent=2, allow_nan=False))
    else:
        echo_text(result.to_markdown() if markdown else str(result), nl=not markdown)
        if changed is not None:
            from tracetochain.cli._render import render_paths_compare

            render_paths_compare(changed)
    if fail_if_worse and result.direction == "worse":
        sys.exit(3)


MONITOR_EXAMPLE = ("Example: tracetochain monitor production.jsonl --window 500 --vocabulary chat --jsonl "
                   "> drift.jsonl || echo 'drift!'   (exit 3 when a window departs from the baseline)")


def monitor(
    traces: Annotated[Path, typer.Argument(
        help="Traces in time or file order (any supported format; - for standard input).")],
    reader: ReaderOpt = None,
    option: ReaderOptionOpt = None,
    window: Annotated[float, typer.Option(help="Traces per window (--by order) or seconds (--by time).")] = 100,
    by: Annotated[str, typer.Option(help="order (file order) or time (each trace's first t_start).")] = "order",
    baseline: Annotated[Path | None, typer.Option(
        help="Baseline traces, read with the same reader and options (default: the first window).")] = None,
    states: Annotated[str, typer.Option(
        help="label, categorical, ward, informative or milestones:FILE (fitted on the baseline).")] = "label",
    vocabulary: Annotated[str | None, typer.Option(help="shell or chat action categories as states.")] = None,
    level: Annotated[float, typer.Option(min=1e-6, max=0.5, help="Family-wise false-alarm rate over all windows.")
                     ] = 0.05,
    legacy_alpha: Annotated[float | None, typer.Option(
        "--alpha", min=1e-6, max=0.5, hidden=True, help="Deprecated spelling of --level.")] = None,
    seed: Annotated[int, typer.Option(
        help="Seed for the bootstrap replicates behind the homogeneity tests and the posterior draws.")] = 0,
    jsonl: Annotated[bool, typer.Option("--jsonl", help="One JSON line per window on stdout.")] = False,
    html_out: Annotated[Path | None, typer.Option("--html", help="Also write an HTML page with the time series.")
                        ] = None,
    force: ForceOpt = False,
) -> None:
    """Track R∞ over windows of traces and alert (exit 3) when a window's transitions depart from the baseline."""
    import sys

    from tracetochain.monitor import monitor as run_monitor

    level = pick_alias("--level", level, 0.05, "--alpha", legacy_alpha)
    if baseline is not None and str(baseline) == STDIN and str(traces) == STDIN:
        raise typer.BadParameter("only one of TRACES and --baseline can be read from standard input (-)")
    inputs = input_paths(traces, baseline, states=states)
    if html_out is not None:
        check_output(html_out, force, inputs, "monitor page")
    table = load_traces(traces, reader, option)
    base = load_traces(baseline, reader, option) if baseline is not None else None
    try:
        result = run_monitor(table, window=window, by=by, baseline=base, states=states,  # type: ignore[arg-type]
                             state_options={"vocabulary": vocabulary} if vocabulary else None, level=level,
                             seed=seed)
    except ValueError as exc:
        from tracetochain.exceptions import TraceToChainError

        if isinstance(exc, TraceToChainError):
            raise
        raise typer.BadParameter(str(exc)) from None
    if jsonl:
        typer.echo(result.json_lines(), nl=False)
    else:
        echo_text(str(result))
    if html_out is not None:
        from tracetochain._files import write_output
        from tracetochain.report.shared import render_monitor_html

        write_output(html_out, render_monitor_html(result.to_dict()), overwrite=force, inputs=inputs,
                     what="monitor page")
    if result.alerts:
        sys.exit(3)
