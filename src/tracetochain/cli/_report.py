"""`report` and `audit`: traces → audited chain → a page people read (or a CI verdict).

Exit codes: 0 success; 2 bad input or usage; 3 a --fail-under gate failed; 4 the audit rejected the chain and
--fail-on-reject was given.
"""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from tracetochain.cli._commands import (
    EngineOpt,
    FeaturesOpt,
    ForceOpt,
    JobsOpt,
    KMaxOpt,
    KMinOpt,
    ModelChoice,
    ModelOpt,
    OnErrorChoice,
    PseudocountOpt,
    SchedulerOpt,
    StatesOpt,
    VocabularyOpt,
    _parse_ks,
    analysis_input,
    check_output,
    horizon_option,
    input_paths,
    model_arguments,
    run_analysis,
    samples_option,
    state_options,
)
from tracetochain.cli._input import ByOpt, ReaderOpt, ReaderOptionOpt, WhereOpt, pick_alias
from tracetochain.cli._output import echo_text

REPORT_EXAMPLE = ('Example: tracetochain report runs.json -o report.html --fail-under "pass^3>=0.6"   '
                  "(τ-bench results; --format md prints a pull-request comment; a Parquet folder of any size: "
                  "--engine dask)")
AUDIT_EXAMPLE = ("Example: tracetochain audit corpus.json --vocabulary shell --json > certificate.json   "
                 "(millions of traces: tracetochain audit traces/ --engine dask)")
REJECT_EXIT_CODE = 4


class OutFormat(StrEnum):
    html = "html"
    md = "md"
    json = "json"


class Uncertainty(StrEnum):
    posterior = "posterior"
    bootstrap = "bootstrap"
    bootstrap_full = "bootstrap-full"
    none = "none"


SplitsOpt = Annotated[int, typer.Option("--splits", min=1, max=50,
                                        help="Held-out splits the R∞ and timing layers are repeated on.")]
LevelOpt = Annotated[float, typer.Option("--level", min=0.001, max=0.5,
                                         help="Family-wise level of the certificate (the chance that a sound chain "
                                              "loses an output).")]


def report(
    traces: Annotated[list[Path], typer.Argument(
        help="Trace files, folders or quoted glob patterns in any supported format (see `formats`), read into one "
             "corpus; or - for standard input.")],
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Where to write (default report.<format>).")
                      ] = None,
    format: Annotated[OutFormat | None, typer.Option(
        "--format", help="html (self-contained page), md (pull-request comment) or json (the document).")] = None,
    reader: ReaderOpt = None,
    option: ReaderOptionOpt = None,
    where: WhereOpt = None,
    by: ByOpt = None,
    states: StatesOpt = "label",
    features: FeaturesOpt = "kind,tool,error",
    vocabulary: VocabularyOpt = None,
    k_min: KMinOpt = 2,
    k_max: KMaxOpt = 10,
    pseudocount: PseudocountOpt = None,
    horizon: Annotated[int, typer.Option(min=1, callback=horizon_option, help="Largest step budget d shown.")] = 50,
    k: Annotated[str, typer.Option("--k", help="k for pass@k / pass^k, comma-separated.")] = "1,2,3,4,5",
    no_audit: Annotated[bool, typer.Option("--no-audit", help="Skip the goodness-of-fit audit.")] = False,
    in_sample: Annotated[bool, typer.Option("--in-sample", help="Audit on the fit data (no held-out splits).")
                         ] = False,
    splits: SplitsOpt = 5,
    level: LevelOpt = 0.05,
    ci: Annotated[float, typer.Option("--ci", min=0.5, max=0.999, help="Interval level.")] = 0.95,
    uncertainty: Annotated[Uncertainty, typer.Option(help="How intervals are made.")] = Uncertainty.posterior,
    samples: Annotated[int, typer.Option(min=50, callback=samples_option,
                                         help="Posterior draws or bootstrap replicates.")] = 1000,
    seed: Annotated[int, typer.Option(help="Seed for the splits, bootstrap and simulation.")] = 0,
    on_error: Annotated[OnErrorChoice, typer.Option(
        "--on-error", help="Bad records: stop with an error, or skip their traces and report the count.")] = (
        OnErrorChoice.raise_),
    fail_under: Annotated[list[str] | None, typer.Option(
        "--fail-under", help='Gate such as "pass^3>=0.6", "R(20)>=0.5", "mean_steps<=15" (any gateable quantity: '
                             'docs/quantities.md) or "cost_per_success(cost_usd)<=0.8" (repeatable); exit 3 if one '
                             "fails.")] = None,
    gate_on: Annotated[str, typer.Option(help="Compare gates with the point estimate or the interval's conservative "
                                              "end (lower bound of a probability, upper bound of a cost or of a "
                                              "step count).")
                       ] = "point",
    fail_on_reject: Annotated[bool, typer.Option("--fail-on-reject", help="Exit 4 when the audit rejects.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress, only errors and gate results.")] = False,
    engine: EngineOpt = None,
    scheduler: SchedulerOpt = None,
    model: ModelOpt = ModelChoice.markov,
    jobs: JobsOpt = -1,
    cap_field: Annotated[str | None, typer.Option(
        "--cap-field", help="Field holding each run's step cap, when runs were made at several caps: R(d) "
                            "thresholded from the largest cap is checked against the runs at each smaller one.")
    ] = None,
    force: ForceOpt = False,
) -> None:
    """Read traces, discover states, fit and audit the chain, attach intervals, and write a report.

    With --engine the same analysis runs partition by partition (a canonical Parquet/JSONL corpus of any size)."""
    from rich.console import Console

    from tracetochain._progress import console_progress
    from tracetochain.report import build_report, render_html
    from tracetochain.report.gates import GATE_FAILED_EXIT_CODE, check_gate, evaluate_gate
    from tracetochain.report.shared import render_markdown

    for expression in fail_under or []:
        check_gate(expression)  # a typo in a gate is reported before the work, not after it
    if gate_on not in ("point", "lower"):
        raise typer.BadParameter("--gate-on must be 'point' or 'lower'")
    ks = _parse_ks(k)
    fmt = format or (OutFormat(output.suffix.lstrip(".").lower().replace("markdown", "md"))
                     if output is not None and output.suffix.lstrip(".").lower() in ("html", "md", "json", "markdown")
                     else OutFormat.html)
    out = output or Path(f"report.{fmt.value}")
    inputs = input_paths(*traces, states=states)
    check_output(out, force, inputs, "report")
    if by is not None:  # one analysis per group: the reliability board in the same output format
        if fail_under:
            raise typer.BadParameter("--fail-under gates one corpus; with --by use `tracetochain board --format json`")
        _report_board(traces, by, where, reader, option, on_error.value, engine, scheduler, states, vocabulary,
                      not no_audit, samples, ci, level, k, seed, quiet, fmt.value, out, force, inputs,
                      {"holdout": not in_sample, "n_splits": splits}, jobs)
        return
    console = Console(stderr=True, quiet=quiet)
    if uncertainty == Uncertainty.bootstrap_full:
        raise typer.BadParameter("--uncertainty bootstrap-full is a library option (TraceBootstrap(path='full')); "
                                 "use posterior or bootstrap")
    method = None if uncertainty == Uncertainty.none else uncertainty.value
    if method is not None:  # the draws × horizon band must fit before any draw is made
        from tracetochain._limits import check_samples

        check_samples(samples, horizon)
    with console_progress(quiet, console=console) as progress:
        progress("reading")
        source = analysis_input(traces, reader, option, on_error.value, engine, announce=not quiet, where=where)
        result = run_analysis(source, on_error=on_error.value, engine=engine, scheduler=scheduler, states=states,
                              options=state_options(states, features, vocabulary, k_min, k_max, seed),
                              pseudocount=pseudocount, audit=not no_audit, holdout=not in_sample, n_splits=splits,
                              level=level, intervals=method, samples=samples, confidence=ci, seed=seed,
                              progress=progress, **model_arguments(model, jobs))
        progress("paths")
        from tracetochain.cli._paths import report_paths

        found = report_paths(result, source, on_error=on_error.value, engine=engine, scheduler=scheduler, seed=seed,
                             confidence=ci)
        try:
            doc = build_report(result, horizon=horizon, ks=ks, paths=found, cap_field=cap_field, progress=progress)
        except ValueError as exc:
            if cap_field is None:
                raise
            raise typer.BadParameter(str(exc), param_hint="--cap-field") from None
        progress(f"report: rendering {fmt.value}")
        text = {"html": lambda: render_html(doc), "md": lambda: render_markdown(doc),
                "json": lambda: json.dumps(doc, indent=1, allow_nan=False) + "\n"}[fmt.value]()
        progress("report: writing")
        from tracetochain._files import write_output

        write_output(out, text, overwrite=force, inputs=inputs, what="report")
    cert = doc.get("certificate") or {}
    if not quiet:
        mc = doc.get("model_choice")
        typer.echo(f"{doc['source']['n_traces']} traces → R∞ = {doc['metrics']['r_inf']:.4f}"
                   + (f" ({mc['chosen']})" if mc else "") + "; certificate: "
                   f"{str(cert.get('decision', 'not audited')).upper()}; wrote {out}")
        if doc.get("headline"):
            echo_text(doc["headline"]["sentence"])
        if mc:
            echo_text(f"model: {mc['why']}")
        if doc.get("uninformative"):
            typer.echo(f"uninformative: {', '.join(doc['uninformative'])}")
        if doc.get("withheld"):
            typer.echo(f"withheld: {', '.join(doc['withheld'])}")
        if doc.get("untested"):
            typer.echo(f"untested: {', '.join(doc['untested'])}")
    code = 0
    for expression in fail_under or []:
        gate = evaluate_gate(expression, doc, use="lower" if gate_on == "lower" else "point")
        typer.echo(gate.message, err=not gate.passed)
        if not gate.passed:
            code = GATE_FAILED_EXIT_CODE
    if code == 0 and fail_on_reject and str(cert.get("decision")) == "reject":
        typer.echo("the audit rejected the chain (--fail-on-reject)", err=True)
        code = REJECT_EXIT_CODE
    if code:
        sys.exit(code)


def _report_board(traces: list[Path], by: str, where: list[str] | None, reader: str | None,
                  option: list[str] | None, on_error: str, engine: str | None, scheduler: str | None, states: str,
                  vocabulary: str | None, audit: bool, samples: int, ci: float, level: float, k: str, seed: int,
                  quiet: bool, fmt: str, out: Path, force: bool, inputs: list[Path],
                  audit_options: dict[str, object], jobs: int = -1) -> None:
    """`report --by`: the reliability board (``tracetochain board``) written as the report."""
    from tracetochain._files import write_output
    from tracetochain.cli._board import render_board, run_board

    board = run_board(traces, by=by, where=where, reader=reader, option=option, on_error=on_error, engine=engine,
                      scheduler=scheduler, states=states, vocabulary=vocabulary, audit=audit, samples=samples, ci=ci,
                      level=level, k=k, width=0.1, seed=seed, quiet=quiet, audit_options=audit_options, jobs=jobs)
    write_output(out, render_board(board.to_dict(), fmt), overwrite=force, inputs=inputs, what="report")
    if not quiet:
        typer.echo(f"{len(board.rows)} groups by {by}; wrote {out}")


def audit(
    traces: Annotated[list[Path], typer.Argument(
        help="Trace files, folders or quoted glob patterns in any supported format (see `formats`), read into one "
             "corpus; or - for standard input.")],
    reader: ReaderOpt = None,
    option: ReaderOptionOpt = None,
    where: WhereOpt = None,
    by: ByOpt = None,
    states: StatesOpt = "label",
    features: FeaturesOpt = "kind,tool,error",
    vocabulary: VocabularyOpt = None,
    k_min: KMinOpt = 2,
    k_max: KMaxOpt = 10,
    pseudocount: PseudocountOpt = None,
    in_sample: Annotated[bool, typer.Option("--in-sample", help="No held-out splits.")] = False,
    splits: SplitsOpt = 5,
    level: LevelOpt = 0.05,
    ks_samples: Annotated[int, typer.Option(
        "--ks-samples", min=19, help="Parametric-bootstrap replicates behind the KS p-value, per split.")] = 199,
    order_criterion: Annotated[str, typer.Option(
        help="What decides the order layer: permutation (calibrated test), chi2, or the paper's aic/bic rules.")
    ] = "permutation",
    seed: Annotated[int, typer.Option(help="Seed for the splits and the bootstrap.")] = 0,
    on_error: Annotated[OnErrorChoice, typer.Option(
        "--on-error", help="Bad records: stop with an error, or skip their traces and report the count.")] = (
        OnErrorChoice.raise_),
    engine: EngineOpt = None,
    scheduler: SchedulerOpt = None,
    model: ModelOpt = ModelChoice.markov,
    jobs: JobsOpt = -1,
    uncertainty: Annotated[Uncertainty, typer.Option(
        help="How the R∞ interval printed with the certificate is made (the same default as `fit` and `report`, so "
             "the three print one interval).")] = Uncertainty.posterior,
    samples: Annotated[int, typer.Option(
        min=0, help="Posterior draws or bootstrap replicates behind that interval; 0 for none.")] = 1000,
    as_json: Annotated[bool, typer.Option("--json", help="Print the certificate JSON.")] = False,
    fail_on_reject: Annotated[bool, typer.Option("--fail-on-reject", help="Exit 4 when the audit rejects.")] = False,
    legacy_bootstrap: Annotated[int | None, typer.Option(
        "--bootstrap", min=19, hidden=True, help="Deprecated spelling of --ks-samples.")] = None,
    legacy_resamples: Annotated[int | None, typer.Option(
        "--resamples", min=0, hidden=True, help="Deprecated spelling of --samples.")] = None,
) -> None:
    """Audit which outputs the traces support: held-out R∞ check, timing (KS), Markov order, exchangeable trials.

    Each output is certified, withheld or untested, at a stated family-wise level; with --engine the same audit
    runs partition by partition."""
    bootstrap = pick_alias("--ks-samples", ks_samples, 199, "--bootstrap", legacy_bootstrap)
    if uncertainty == Uncertainty.bootstrap_full:
        raise typer.BadParameter("--uncertainty bootstrap-full is a library option (TraceBootstrap(path='full')); "
                                 "use posterior or bootstrap")
    method = None if uncertainty == Uncertainty.none else uncertainty.value
    if legacy_resamples is not None:  # the old spelling meant trace-bootstrap replicates
        method = "bootstrap"
    resamples = pick_alias("--samples", samples, 1000, "--resamples", legacy_resamples)
    if method is not None and resamples:
        from tracetochain._limits import check_samples

        check_samples(resamples)
    if by is not None:
        from tracetochain.cli._board import run_board

        board = run_board(traces, by=by, where=where, reader=reader, option=option, on_error=on_error.value,
                          engine=engine, scheduler=scheduler, states=states, vocabulary=vocabulary, audit=True,
                          samples=max(resamples, 50), ci=0.95, level=level, k="1,3", width=0.1, seed=seed,
                          quiet=as_json, jobs=jobs, audit_options={"holdout": not in_sample, "n_splits": splits,
                                                        "n_bootstrap": bootstrap, "order_criterion": order_criterion})
        if as_json:
            typer.echo(json.dumps(board.to_dict(), indent=2, allow_nan=False, ensure_ascii=False))
        else:
            echo_text(str(board))
        if fail_on_reject and any(r.certificate.get("decision") == "reject" for r in board.rows):
            sys.exit(REJECT_EXIT_CODE)
        return
    from tracetochain._progress import console_progress

    with console_progress() as progress:
        progress("reading")
        # a detected reader is named on stderr
        source = analysis_input(traces, reader, option, on_error.value, engine, where=where)
        result = run_analysis(source, on_error=on_error.value, engine=engine, scheduler=scheduler, states=states,
                              options=state_options(states, features, vocabulary, k_min, k_max, seed),
                              pseudocount=pseudocount, holdout=not in_sample, n_splits=splits, level=level,
                              n_bootstrap=bootstrap, order_criterion=order_criterion,
                              intervals=method if resamples else None, samples=max(resamples, 1), seed=seed,
                              progress=progress, **model_arguments(model, jobs))
        if not as_json and result.model_choice is not None and not result.model_choice.first_order:
            result.intervals(progress=progress)  # the chosen model's refits, summarised here in view, once
    cert = result.certificate
    if as_json:
        if result.model_choice is None:
            typer.echo(cert.to_json())
        else:  # the certificate of the chosen model, with the choice beside it
            doc = cert.to_dict()
            doc["model_choice"] = result.model_choice.to_dict()
            typer.echo(json.dumps(doc, indent=2, allow_nan=False, ensure_ascii=False))
    else:
        head = str(result).splitlines()
        echo_text("\n".join(head[:3] if result.model_choice is not None else head[:2]))
        if result.model_choice is not None:
            echo_text(result.model_choice.describe())
        echo_text(str(cert))
    if fail_on_reject and cert.decision == "reject":
        sys.exit(REJECT_EXIT_CODE)
