"""Command implementations: parse → library call → render. No metric is computed here."""

from __future__ import annotations

import json
import math
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from tracetochain.cli._input import (
    STDIN,
    ByOpt,
    LegacyFormatOpt,
    ReaderOpt,
    ReaderOptionOpt,
    WhereOpt,
    load_traces,
    reader_name,
)
from tracetochain.cli._output import echo_text
from tracetochain.families import first_order_family, is_first_order, model_choices, model_help

FIT_EXAMPLE = (
    "Example: tracetochain fit runs.jsonl -o chain.json --horizon 30   "
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


def _check_model(value: str) -> str:
    # Checked against the registry when the command line is parsed, so a family registered after this module was
    # imported is a choice too (the help lists those registered at import).
    if value not in model_choices():
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(model_choices())}")
    return value


class ModelChoice:
    """The default of ``--model`` (the first-order chain), named as the options name it."""

    markov = first_order_family().name


ModelOpt = Annotated[str, typer.Option("--model", callback=_check_model, help=model_help(),
                                        metavar="[" + "|".join(model_choices()) + "]")]


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


def samples_option(value: int | None) -> int | None:
    """``--samples``: at most ``TRACETOCHAIN_MAX_SAMPLES`` (checked while parsing, before any work)."""
    from tracetochain._limits import check_samples

    return None if value is None else check_samples(value)


HorizonOpt = Annotated[int, typer.Option("--horizon", min=0, callback=horizon_option,
                                         help="Largest step budget d for R(d).")]
KOpt = Annotated[str, typer.Option("--k", help="Values of k for pass@k and pass^k, comma-separated.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout instead of tables.")]
EngineOpt = Annotated[str | None, typer.Option(
    help="Run the same analysis partition by partition on an engine: local or dask. A canonical Parquet/JSONL "
         "file or folder is cut into partitions that workers read (only counts travel); any other input is read "
         "here and sent as one partition. The numbers are the same as without --engine.")]
SchedulerOpt = Annotated[str | None, typer.Option(
    help="Dask scheduler address, e.g. tcp://10.0.0.5:8786 (default: a 2-worker local cluster).")]
StatesOpt = Annotated[str, typer.Option(
    help="How steps become states: label (the traces' own labels), categorical (vocabulary categories), "
         "ward (cluster --features), informative (labels or --vocabulary categories refined by history "
         "features that predict what follows, e.g. 'submit after ≥2 failing tests in a row'), or milestones:FILE "
         "(declared states).")]
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
def jobs_option(value: int) -> int:
    """``--jobs``: a positive number of processes, or -1 for every CPU (checked while parsing)."""
    if value == 0 or value < -1:
        raise typer.BadParameter(f"expected a positive number of processes, or -1 for every CPU; got {value}")
    return value


JobsOpt = Annotated[int, typer.Option(
    "--jobs", "-j", envvar="TRACETOCHAIN_JOBS", callback=jobs_option,
    help="Processes for independent analyses — --model's candidates, held-out checks and refits; --by's groups: -1 "
         "(default) is every CPU, 1 keeps the work in this process. The output is the same for any value; small "
         "work never starts a process.")]
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

    return interval_summary(source, intervals=method, confidence=ci, samples=samples, seed=seed,  # type: ignore[arg-type]
                            horizon=horizon, ks=ks, states=states)


PseudocountOpt = Annotated[float | None, typer.Option(
    min=0.0, help="Laplace pseudocount α on each outcome of every row (the paper used 1; 0 = plain MLE). Default: "
                  "one pseudo-episode (½ success, ½ failure) spread over the states, which invents no failures.")]


def state_options(states: str, features: str, vocabulary: str | None, k_min: int, k_max: int,
                  seed: int = 0) -> dict[str, Any]:
    """The options of a state spec string (what `fit`, `report`, `audit` and `compare` share)."""
    if states == "ward":
        return {"features": features, "vocabulary": vocabulary, "k_min": k_min, "k_max": k_max, "seed": seed}
    if states == "informative":
        return {"vocabulary": vocabulary, "seed": seed}
    return {"vocabulary": vocabulary} if vocabulary else {}


def analysis_input(path: Path | list[Path], reader: str | None, option: list[str] | None, on_error: str,
                   engine: str | None, *, announce: bool = True, where: list[str] | None = None) -> Any:
    """What `analyze` reads: the canonical file or folder itself when an engine can cut it into partitions (one
    input, no reader, no reader options, no --where, not stdin), else the traces read here by any reader — several
    inputs into one corpus — (they then travel as one partition, so --engine accepts every format)."""
    from tracetochain.analysis.shared import _is_canonical_corpus

    paths = [path] if isinstance(path, (str, Path)) else list(path)
    if engine is not None and reader is None and not option and not where and len(paths) == 1 \
            and str(paths[0]) != STDIN and _is_canonical_corpus(paths[0], None):
        return paths[0]
    return load_traces(paths, reader, option, on_error=on_error, announce=announce, where=where)


def run_analysis(source: Any, *, on_error: str, engine: str | None, scheduler: str | None, states: str,
                 options: dict[str, Any], **kwargs: Any) -> Any:
    """Call :func:`tracetochain.analysis.analyze` once, whatever the engine; library ValueErrors become usage errors."""
    from tracetochain.analysis import analyze
    from tracetochain.exceptions import TraceToChainError

    spec: Any = None if states == "label" and not options else states
    try:
        if engine is None:
            return analyze(source, on_error=on_error, states=spec, state_options=options, **kwargs)
        from tracetochain.engines import get_engine

        with get_engine(engine, scheduler=scheduler) as eng:
            return analyze(source, on_error=on_error, engine=eng, states=spec, state_options=options, **kwargs)
    except ValueError as exc:
        if isinstance(exc, TraceToChainError):
            raise
        raise typer.BadParameter(str(exc)) from None


def _costs(source: Any, method: str | None, ci: float, samples: int, seed: int, *, traces: Any = None,
           ensemble: Any = None, certificate: Any = None, display: bool = False) -> dict[str, Any]:
    """The cost figures (library: :func:`tracetochain.costs.cost_report`) with the same intervals as the metrics;
    ``display``: only what the printed table shows (the JSON output keeps every figure)."""
    from tracetochain.costs import cost_report

    return cost_report(source, traces=traces, intervals=None if method in (None, "none") else method, confidence=ci,
                       samples=samples, seed=seed, ensemble=ensemble, certificate=certificate, display=display)


def fit(
    traces: Annotated[list[Path], typer.Argument(
        help="Trace files, folders or quoted glob patterns in any supported format (see `formats`), read into one "
             "corpus; or - for standard input.")],
    reader: ReaderOpt = None,
    option: ReaderOptionOpt = None,
    where: WhereOpt = None,
    by: ByOpt = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write the fitted chain (JSON).")] = None,
    pseudocount: PseudocountOpt = None,
    unvisited: Annotated[UnvisitedChoice, typer.Option(help="Rows with no data: the prior's row or failure.")] = (
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
    seed: Annotated[int, typer.Option(help="Seed for every random choice (intervals, state learning).")] = 0,
    horizon: HorizonOpt = 30,
    k: KOpt = "1,3,5",
    ci: CiOpt = 0.95,
    uncertainty: UncertaintyOpt = "posterior",
    samples: SamplesOpt = 1000,
    engine: EngineOpt = None,
    scheduler: SchedulerOpt = None,
    model: ModelOpt = ModelChoice.markov,
    jobs: JobsOpt = -1,
    as_json: JsonOpt = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing but errors.")] = False,
    legacy_format: LegacyFormatOpt = None,
    force: ForceOpt = False,
) -> None:
    """Fit an absorbing Markov chain to agent traces and print its reliability summary with intervals.

    `fit` does not audit (see `audit` and `report`); pass^k is labelled with the trials check when tasks repeat."""

    ks = _parse_ks(k)
    reader = reader_name(reader, legacy_format)
    if uncertainty not in ("posterior", "bootstrap", "none"):
        raise typer.BadParameter(f"--uncertainty must be posterior, bootstrap or none, got {uncertainty!r} "
                                 "(bootstrap-full is a library option: TraceBootstrap(path='full'))")
    method = None if uncertainty == "none" else uncertainty
    if method is not None:  # the draws × horizon band must fit before any draw is made
        from tracetochain._limits import check_samples

        check_samples(samples, horizon)
    inputs = input_paths(*traces, states=states)
    if by is not None:
        if output is not None:
            raise typer.BadParameter("--by fits one chain per group: -o takes one chain; use `tracetochain board`")
        _fit_board(traces, by, where, reader, option, on_error.value, engine, scheduler, states, vocabulary, samples,
                   ci, k, seed, as_json, quiet, jobs)
        return
    if output is not None:
        check_output(output, force, inputs, "chain")
    # The terminal summary names a detected reader itself; JSON output names it on stderr.
    from tracetochain._progress import console_progress

    with console_progress(quiet) as progress:
        progress("reading")
        source = analysis_input(traces, reader, option, on_error.value, engine, announce=as_json and not quiet,
                                where=where)
        result = run_analysis(source, on_error=on_error.value, engine=engine, scheduler=scheduler, states=states,
                              options=state_options(states, features, vocabulary, k_min, k_max, seed),
                              pseudocount=pseudocount, unvisited=unvisited.value, initial=initial.value, audit=False,
                              intervals=method, samples=samples, confidence=ci, seed=seed, progress=progress,
                              **model_arguments(model, jobs))
        chain = result.chain
        if output is not None:
            _write_chain(chain, output, result.ingest.to_dict(), force, inputs)
        if quiet:
            return
        progress("metrics")
        summary = result.metrics(horizon=horizon, ks=ks)
        # The printed summary shows the step budget's interval, not its Prop. 8 bound's (--json keeps both).
        intervals = result.intervals(horizon=horizon, ks=ks, progress=progress, budget_bound=as_json)
        trials = _trials_label(result)
        expanded = result.model_choice is not None and not result.model_choice.first_order
        progress("cost section")
        costs = _model_costs(result) if expanded else _costs(chain, "posterior" if method else None, ci, samples,
                                                              seed, traces=result.traces, ensemble=result.ensemble,
                                                              display=not as_json)
    from tracetochain.analysis.shared import headline
    from tracetochain.audit.shared import uninformative_sentence

    disc = result.discrimination
    lead = headline(result)
    if as_json:
        doc = summary.to_dict()
        doc["intervals"] = intervals
        from tracetochain.quantities import quantity_rows

        doc["quantities"] = quantity_rows(doc, intervals)  # every reported number, its interval and status
        doc["costs"] = costs
        doc["ingest"] = result.ingest.to_dict()
        doc["pass_hat_k_status"] = {k: v for k, v in trials.items() if k != "per_task"}
        doc["design_effect"] = result.design_effect
        doc["chain_file"] = str(output) if output else None
        if result.model_choice is not None:
            doc["model_choice"] = result.model_choice.to_dict()
        doc["discrimination"] = None if disc is None else disc.to_dict()
        doc["headline"] = lead.to_dict()
        typer.echo(json.dumps(doc, indent=2, allow_nan=False))
        return
    from tracetochain.cli._render import render_costs, render_ingest, render_summary

    render_ingest(result.ingest, dict(result.summary.counts.n_traces), detected=reader is None)
    if result.state_model is not None and (result.state_model.method != "categorical" or vocabulary is not None):
        echo_text(result.state_model.describe())
    if result.model_choice is not None:
        echo_text(result.model_choice.describe())
    render_summary(summary, intervals, pass_k_note=trials["note"], headline=lead.sentence,
                   discrimination=None if disc is None else disc.describe(),
                   uninformative=uninformative_sentence(disc) if disc is not None and disc.informative is False
                   else None)
    render_costs(costs)
    if output is not None:
        typer.echo(f"chain written to {output}")
    else:
        typer.echo("(use -o chain.json to save the chain for `tracetochain metrics`)")


def _fit_board(traces: list[Path], by: str, where: list[str] | None, reader: str | None, option: list[str] | None,
               on_error: str, engine: str | None, scheduler: str | None, states: str, vocabulary: str | None,
               samples: int, ci: float, k: str, seed: int, as_json: bool, quiet: bool, jobs: int = -1) -> None:
    """`fit --by`: the board without the certificate (fit does not audit), as text or JSON."""
    from tracetochain.cli._board import run_board

    result = run_board(traces, by=by, where=where, reader=reader, option=option, on_error=on_error, engine=engine,
                       scheduler=scheduler, states=states, vocabulary=vocabulary, audit=False, samples=samples,
                       ci=ci, level=0.05, k=k, width=0.1, seed=seed, quiet=quiet or as_json, jobs=jobs)
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2, allow_nan=False))
    elif not quiet:
        echo_text(str(result))


def model_arguments(model: Any, jobs: int = -1) -> dict[str, Any]:
    """``--model`` and ``--jobs`` as :func:`~tracetochain.analysis.analyze` arguments (nothing for the default
    model, so that a plain run is the call it always was: only the model path runs jobs in processes)."""
    value = str(getattr(model, "value", model))
    return {} if is_first_order(value) else {"model": value, "n_jobs": jobs}


def _model_costs(result: Any) -> dict[str, Any]:
    from tracetochain.analysis.shared import model_costs

    return model_costs(result.chain, result.certificate, result.model_choice)


def _trials_label(result: Any) -> dict[str, Any]:
    """What can be said of the chain's i.i.d. pass^k without the full audit: the trials check (cheap: per-task
    counts) when tasks repeat, else that the assumption is untested."""
    from tracetochain.audit.shared import trials_check_table

    mc = result.model_choice
    if mc is not None and not mc.first_order:
        how = ("a task draws a class once and its trials share it: pass^k = Σ_c w_c R_c^k" if mc.trials == "task"
               else "i.i.d. trials of the model: pass^k = R∞^k")
        return {"status": "untested", "p_value": None,
                "note": f"pass^k of the chosen {mc.chosen} model ({how}); fit does not audit it — `tracetochain "
                        f"audit --model {mc.requested}` tests it on held-out tasks"}

    res = trials_check_table(result.summary.tasks, result.chain.r_inf, seed=0)
    if not res.applicable:
        return {"status": "untested", "p_value": None,
                "note": "pass^k assumes independent trials with one success probability (untested: no task was "
                        "tried twice)"}
    if res.p_value is None:
        return {"status": "untested", "p_value": None, "note": "pass^k: " + "; ".join(res.notes)}
    if res.flagged:
        emp = ", ".join(f"pass^{k} {v:.3f}" for k, v in zip(res.ks, res.pass_hat_k, strict=True) if v is not None)
        return {"status": "withheld", "p_value": res.p_value, "per_task": res.to_dict(),
                "note": f"tasks differ (trials check p = {res.p_value:.3g}, design effect {res.design_effect:.2f}): "
                        f"the i.i.d. pass^k above understates pass^k for k ≥ 2; per task: {emp}"}
    return {"status": "certified", "p_value": res.p_value,
            "note": f"repeated trials look exchangeable (trials check p = {res.p_value:.3g})"}


def metrics(
    chain_file: Annotated[Path, typer.Argument(help="A chain JSON written by `tracetochain fit -o`.")],
    horizon: HorizonOpt = 50,
    k: KOpt = "1,2,3,4,5",
    ci: Annotated[float | None, typer.Option(
        "--ci", min=0.5, max=0.999, help="Interval level (default: the one the chain was fitted with, else 0.95).")
    ] = None,
    uncertainty: Annotated[str, typer.Option(
        help="Intervals from the chain's counts: posterior (Dirichlet) or none. Bootstrap intervals need the "
             "traces: use `fit` or `report`.")] = "posterior",
    samples: Annotated[int | None, typer.Option(
        min=50, callback=samples_option,
        help="Posterior draws (default: as many as the fit drew, else 1000).")] = None,
    seed: Annotated[int | None, typer.Option(
        help="Seed for the posterior draws (default: the fit's seed, else 0).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Print the reliability metrics of a fitted chain: R∞, R(d), steps, pass@k / pass^k, bottleneck states.

    A chain saved by `fit -o` carries its corpus's design effect and its interval settings, so the intervals printed
    here are the ones `fit` printed (same draws, same seed, same tempering)."""
    from tracetochain.chain import AbsorbingChain
    from tracetochain.metrics import summarize

    ks = _parse_ks(k)
    if uncertainty not in ("posterior", "none"):
        raise typer.BadParameter("bootstrap intervals need the traces; run `tracetochain fit TRACES --uncertainty "
                                 f"{uncertainty}` or `tracetochain report` instead")
    chain = AbsorbingChain.from_json(chain_file)
    raw = chain.metadata.get("intervals")
    saved: dict[str, Any] = raw if isinstance(raw, dict) else {}
    ci = ci if ci is not None else _saved_number(saved, "confidence", 0.95, float)
    samples = samples if samples is not None else _saved_number(saved, "n_samples", 1000, int)
    seed = seed if seed is not None else _saved_number(saved, "seed", 0, int)
    summary = summarize(chain, horizon=horizon, ks=ks)
    intervals = _intervals(chain, uncertainty, ci, samples, seed, horizon, ks) if "counts" in chain.metadata \
        else None
    if intervals is not None and saved.get("method") == "bootstrap":
        intervals["note"] = ("posterior draws from the saved counts, tempered by the corpus's design effect "
                             f"{float(chain.metadata.get('design_effect', 1.0)):.2f}: the fit's trace-bootstrap "
                             "intervals need the traces (`tracetochain fit TRACES --uncertainty bootstrap`)")
    costs = _costs(chain, uncertainty if "counts" in chain.metadata else "none", ci, samples, seed, display=not as_json)
    if as_json:
        doc = summary.to_dict()
        doc["intervals"] = intervals
        from tracetochain.quantities import quantity_rows

        doc["quantities"] = quantity_rows(doc, intervals)  # every reported number, its interval and status
        doc["costs"] = costs
        typer.echo(json.dumps(doc, indent=2, allow_nan=False))
        return
    from tracetochain.cli._render import render_costs, render_summary

    render_summary(summary, intervals, pass_k_note="pass^k of a saved chain assumes independent trials (not "
                                                   "audited here: run `tracetochain audit` on the traces)")
    render_costs(costs)


def _saved_number(saved: dict[str, Any], key: str, default: Any, kind: type) -> Any:
    """A setting saved with the chain (an untrusted document: used only when it is a plain number in range)."""
    value = saved.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return default
    if kind is int:
        return int(value) if value == int(value) and 1 <= value <= 10**6 else default
    return float(value) if 0.5 <= value <= 0.999 else default


def _write_chain(chain: Any, output: Path, ingest: dict[str, Any], force: bool, inputs: list[Path]) -> None:
    from tracetochain._files import write_output

    doc = chain.to_dict()
    doc["metadata"] = {**doc["metadata"], "ingest": ingest}
    write_output(output, json.dumps(doc, indent=1, allow_nan=False) + "\n", overwrite=force, inputs=inputs,
                 what="chain")
