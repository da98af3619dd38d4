"""Command implementations: parse → library call → render. No metric is computed here."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from tracetochain.cli._input import (
    LegacyFormatOpt,
    ReaderOpt,
    ReaderOptionOpt,
    load_traces,
    reader_name,
    refuse_on_engine,
)
from tracetochain.cli._output import echo_text

FIT_EXAMPLE = (
    "Example: tracetochain fit runs.jsonl -o chain.json --pseudocount 1 --horizon 30   "
    "(input: one JSON object per step with trace_id, step_idx, state or step_kind, outcome)"
)
METRICS_EXAMPLE = "Example: tracetochain metrics chain.json --horizon 50 --k 1,3,5 --json > metrics.json"


class OnErrorChoice(StrEnum):
    raise_ = "raise"
    skip = "skip"


class UnvisitedChoice(StrEnum):
    auto = "auto"
    prior = "prior"
    failure = "failure"


class InitialChoice(StrEnum):
    empirical = "empirical"
    modal = "modal"


def _parse_ks(text: str) -> tuple[int, ...]:
    try:
        ks = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise typer.BadParameter(f"expected comma-separated positive integers, got {text!r}") from None
    if not ks or min(ks) < 1:
        raise typer.BadParameter(f"expected comma-separated positive integers, got {text!r}")
    return ks


def horizon_option(value: int) -> int:
    """``--horizon``: at most ``TRACETOCHAIN_MAX_HORIZON`` (checked while parsing, before any work)."""
    from tracetochain._limits import check_horizon

    return check_horizon(value)


def samples_option(value: int) -> int:
    """``--samples``: at most ``TRACETOCHAIN_MAX_SAMPLES`` (checked while parsing, before any work)."""
    from tracetochain._limits import check_samples

    return check_samples(value)


HorizonOpt = Annotated[int, typer.Option("--horizon", min=0, callback=horizon_option,
                                         help="Largest step budget d for R(d).")]
KOpt = Annotated[str, typer.Option("--k", help="Values of k for pass@k and pass^k, comma-separated.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout instead of tables.")]
EngineOpt = Annotated[str | None, typer.Option(
    help="Work partition by partition on an engine: local or dask (canonical Parquet/JSONL, a file or a folder; "
         "only counts travel). Default: read the whole file in memory.")]
SchedulerOpt = Annotated[str | None, typer.Option(
    help="Dask scheduler address, e.g. tcp://10.0.0.5:8786 (default: a 2-worker local cluster).")]
StatesOpt = Annotated[str, typer.Option(
    help="How steps become states: label (the traces' own labels), categorical (vocabulary categories), "
         "ward (cluster --features), or milestones:FILE (declared states).")]
FeaturesOpt = Annotated[str, typer.Option(
    help="For --states ward: comma list of kind, tool, error, retry, step-bucket (causal), hindsight-depth, "
         "hindsight-depth-bucket (need the final length: descriptive only), or text / tfidf.")]
VocabularyOpt = Annotated[str | None, typer.Option(
    help="Map actions to categories first: shell (what a shell command does: SWE-agent, mini-swe-agent), chat "
         "(tool agents) or shell-paper (the TraceToChain paper's first-word map). See docs/vocabularies.md.")]
KMinOpt = Annotated[int, typer.Option("--k-min", min=1, help="Smallest number of Ward states tried.")]
KMaxOpt = Annotated[int, typer.Option("--k-max", min=1, help="Largest number of Ward states tried.")]
CiOpt = Annotated[float, typer.Option("--ci", min=0.5, max=0.999, help="Interval level.")]
UncertaintyOpt = Annotated[str, typer.Option(
    help="Intervals: posterior (Dirichlet), bootstrap (traces resampled, states fixed), bootstrap-full "
         "(states re-discovered per replicate) or none.")]
SamplesOpt = Annotated[int, typer.Option(min=50, callback=samples_option,
                                         help="Posterior draws or bootstrap replicates.")]
ForceOpt = Annotated[bool, typer.Option(
    "--force", help="Replace the output file if it exists (an input is never replaced; a symbolic link at the "
                    "output is replaced, not followed).")]


def input_paths(*paths: Path | None, states: str | None = None) -> list[Path]:
    """The files a command reads, for the output writer's never-replace-an-input check (a milestone file in
    ``--states milestones:FILE`` included)."""
    found = [p for p in paths if p is not None]
    if states is not None and states.startswith("milestones:"):
        found.append(Path(states.split(":", 1)[1]))
    return found


def check_output(output: Path, force: bool, inputs: list[Path], what: str) -> None:
    """Refuse a bad output path before any work is done (the writer checks again when it writes)."""
    from tracetochain._files import check_output_path

    check_output_path(output, overwrite=force, inputs=inputs, what=what)


def _intervals(source: Any, method: str, ci: float, samples: int, seed: int, horizon: int,
               ks: tuple[int, ...], states: Any = None) -> dict[str, Any] | None:
    if method == "none":
        return None
    if method not in ("posterior", "bootstrap", "bootstrap-full"):
        raise typer.BadParameter(f"--uncertainty must be posterior, bootstrap, bootstrap-full or none, got {method!r}")
    from tracetochain.uncertainty import interval_summary

    return interval_summary(source, method=method, confidence=ci, samples=samples, seed=seed,  # type: ignore[arg-type]
                            horizon=horizon, ks=ks, states=states)


def _costs(source: Any, method: str, ci: float, samples: int, seed: int, *, traces: Any = None) -> dict[str, Any]:
    """The cost figures (library: :func:`tracetochain.costs.cost_report`) with the same intervals as the metrics."""
    from tracetochain.costs import cost_report

    return cost_report(source, traces=traces, method=None if method == "none" else method, confidence=ci,
                       samples=samples, seed=seed)


def fit(
    traces: Annotated[Path, typer.Argument(
        help="Trace file or folder in any supported format (see `formats`), or - for standard input.")],
    reader: ReaderOpt = None,
    option: ReaderOptionOpt = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write the fitted chain (JSON).")] = None,
    pseudocount: Annotated[float, typer.Option(min=0.0, help="Laplace pseudocount α per outcome (0 = MLE).")] = 1.0,
    unvisited: Annotated[UnvisitedChoice, typer.Option(help="Rows with no data: smoothed prior or failure.")] = (
        UnvisitedChoice.auto),
    initial: Annotated[InitialChoice, typer.Option(help="π0: empirical first states, or the modal one.")] = (
        InitialChoice.empirical),
    on_error: Annotated[OnErrorChoice, typer.Option(
        "--on-error", help="Bad records: stop with an error, or skip their traces and report the count.")] = (
        OnErrorChoice.raise_),
    states: StatesOpt = "label",
    features: FeaturesOpt = "kind,tool,error",
    vocabulary: VocabularyOpt = None,
    k_min: KMinOpt = 2,
    k_max: KMaxOpt = 10,
    seed: Annotated[int, typer.Option(help="Seed for every random choice (only scalable clustering uses one).")] = 0,
    horizon: HorizonOpt = 30,
    k: KOpt = "1,3,5",
    ci: CiOpt = 0.95,
    uncertainty: UncertaintyOpt = "posterior",
    samples: SamplesOpt = 1000,
    engine: EngineOpt = None,
    scheduler: SchedulerOpt = None,
    as_json: JsonOpt = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing but errors.")] = False,
    legacy_format: LegacyFormatOpt = None,
    force: ForceOpt = False,
) -> None:
    """Fit an absorbing Markov chain to agent traces and print its reliability summary with intervals."""
    from tracetochain import summarize
    from tracetochain.pipeline import fit_chain

    ks = _parse_ks(k)
    reader = reader_name(reader, legacy_format)
    inputs = input_paths(traces, states=states)
    if output is not None:
        check_output(output, force, inputs, "chain")
    if engine is not None:
        refuse_on_engine([traces], reader, option)
        _fit_on_engine(traces, engine, scheduler, output, pseudocount, unvisited.value, initial.value, on_error.value,
                       states, features, vocabulary, k_min, k_max, seed, horizon, ks, ci, uncertainty, samples,
                       as_json, quiet, force, inputs)
        return
    table = load_traces(traces, reader, option, on_error=on_error.value, announce=as_json and not quiet)
    try:
        result = fit_chain(table, states=states, pseudocount=pseudocount, unvisited=unvisited.value,
                           initial=initial.value, features=features, vocabulary=vocabulary, k_min=k_min,
                           k_max=k_max, seed=seed)
    except ValueError as exc:
        from tracetochain.exceptions import TraceToChainError

        if isinstance(exc, TraceToChainError):
            raise
        raise typer.BadParameter(str(exc)) from None
    chain = result.chain
    if output is not None:
        _write_chain(chain, output, table.report.to_dict(), force, inputs)
    if quiet:
        return
    summary = summarize(chain, horizon=horizon, ks=ks)
    full_states = None
    if uncertainty == "bootstrap-full":
        from tracetochain.states import states_from_spec

        full_states = states_from_spec(states, features=features, vocabulary=vocabulary, k_min=k_min, k_max=k_max,
                                       seed=seed)
    intervals = _intervals(result, uncertainty, ci, samples, seed, horizon, ks, full_states)
    costs = _costs(result, uncertainty, ci, samples, seed)
    if as_json:
        doc = summary.to_dict()
        doc["intervals"] = intervals
        doc["costs"] = costs
        doc["ingest"] = table.report.to_dict()
        doc["chain_file"] = str(output) if output else None
        typer.echo(json.dumps(doc, indent=2, allow_nan=False))
        return
    from tracetochain.cli._render import render_costs, render_ingest, render_summary

    render_ingest(table.report, table.outcome_counts(), detected=reader is None)
    if result.states.method != "categorical" or vocabulary is not None:
        echo_text(result.states.describe())
    render_summary(summary, intervals)
    render_costs(costs)
    if output is not None:
        typer.echo(f"chain written to {output}")
    else:
        typer.echo("(use -o chain.json to save the chain for `tracetochain metrics`)")


def _fit_on_engine(traces: Path, engine: str, scheduler: str | None, output: Path | None, pseudocount: float,
                   unvisited: str, initial: str, on_error: str, states: str, features: str, vocabulary: str | None,
                   k_min: int, k_max: int, seed: int, horizon: int, ks: tuple[int, ...], ci: float, uncertainty: str,
                   samples: int, as_json: bool, quiet: bool, force: bool, inputs: list[Path]) -> None:
    """`fit --engine`: partitioned counting (the library decides what, the engine where)."""
    from tracetochain import summarize
    from tracetochain.engines import get_engine
    from tracetochain.partitioned import fit_partitioned

    if uncertainty not in ("posterior", "bootstrap", "none"):
        raise typer.BadParameter("with --engine the states are fixed: use --uncertainty posterior (from the counts), "
                                 "bootstrap (Poisson, by trace id) or none")
    options: dict[str, Any] = {}
    if states == "ward":
        options = {"features": features, "vocabulary": vocabulary, "k_min": k_min, "k_max": k_max, "seed": seed}
    elif vocabulary:
        options = {"vocabulary": vocabulary}
    spec = None if states == "label" and not vocabulary else states
    ensemble = None
    with get_engine(engine, scheduler=scheduler) as eng:
        if uncertainty == "bootstrap":
            from tracetochain.partitioned import bootstrap_partitioned

            chain, ensemble = bootstrap_partitioned(traces, engine=eng, states=spec, state_options=options or None,
                                                    pseudocount=pseudocount, unvisited=unvisited, initial=initial,
                                                    n_resamples=samples, seed=seed, confidence=ci,
                                                    on_error=on_error)  # type: ignore[arg-type]
        else:
            chain = fit_partitioned(traces, engine=eng, pseudocount=pseudocount, unvisited=unvisited,
                                    initial=initial, states=spec, on_error=on_error,  # type: ignore[arg-type]
                                    **options)
    if output is not None:
        _write_chain(chain, output, {"source": str(traces), "engine": engine}, force, inputs)
    if quiet:
        return
    summary = summarize(chain, horizon=horizon, ks=ks)
    intervals: dict[str, Any] | None
    if ensemble is not None:
        from tracetochain.uncertainty import interval_summary

        intervals = interval_summary(ensemble, horizon=horizon, ks=ks)
    else:
        intervals = _intervals(chain, uncertainty, ci, samples, seed, horizon, ks)
    # The partition statistics give the cost model; cost intervals come from the posterior of the counts.
    costs = _costs(chain, "posterior" if uncertainty != "none" else "none", ci, samples, seed)
    if as_json:
        doc = summary.to_dict()
        doc["intervals"] = intervals
        doc["costs"] = costs
        doc["engine"] = engine
        typer.echo(json.dumps(doc, indent=2, allow_nan=False))
        return
    from tracetochain.cli._render import render_costs, render_summary

    typer.echo(f"{traces}: counted on the {engine} engine")
    render_summary(summary, intervals)
    render_costs(costs)


def metrics(
    chain_file: Annotated[Path, typer.Argument(help="A chain JSON written by `tracetochain fit -o`.")],
    horizon: HorizonOpt = 50,
    k: KOpt = "1,2,3,4,5",
    ci: CiOpt = 0.95,
    uncertainty: Annotated[str, typer.Option(
        help="Intervals from the chain's counts: posterior (Dirichlet) or none. Bootstrap intervals need the "
             "traces: use `fit` or `report`.")] = "posterior",
    samples: SamplesOpt = 1000,
    seed: Annotated[int, typer.Option(help="Seed for the posterior draws.")] = 0,
    as_json: JsonOpt = False,
) -> None:
    """Print the reliability metrics of a fitted chain: R∞, R(d), steps, pass@k / pass^k, bottleneck states."""
    from tracetochain import AbsorbingChain, summarize

    ks = _parse_ks(k)
    if uncertainty not in ("posterior", "none"):
        raise typer.BadParameter("bootstrap intervals need the traces; run `tracetochain fit TRACES --uncertainty "
                                 f"{uncertainty}` or `tracetochain report` instead")
    chain = AbsorbingChain.from_json(chain_file)
    summary = summarize(chain, horizon=horizon, ks=ks)
    intervals = _intervals(chain, uncertainty, ci, samples, seed, horizon, ks) if "counts" in chain.metadata \
        else None
    costs = _costs(chain, uncertainty if "counts" in chain.metadata else "none", ci, samples, seed)
    if as_json:
        doc = summary.to_dict()
        doc["intervals"] = intervals
        doc["costs"] = costs
        typer.echo(json.dumps(doc, indent=2, allow_nan=False))
        return
    from tracetochain.cli._render import render_costs, render_summary

    render_summary(summary, intervals)
    render_costs(costs)


def _write_chain(chain: Any, output: Path, ingest: dict[str, Any], force: bool, inputs: list[Path]) -> None:
    from tracetochain._files import write_output

    doc = chain.to_dict()
    doc["metadata"] = {**doc["metadata"], "ingest": ingest}
    write_output(output, json.dumps(doc, indent=1, allow_nan=False) + "\n", overwrite=force, inputs=inputs,
                 what="chain")
