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
    KMaxOpt,
    KMinOpt,
    SchedulerOpt,
    StatesOpt,
    VocabularyOpt,
    _parse_ks,
    check_output,
    horizon_option,
    input_paths,
    samples_option,
)
from tracetochain.cli._input import ReaderOpt, ReaderOptionOpt, load_traces, pick_alias, refuse_on_engine
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


def _state_options(states: str, features: str, vocabulary: str | None, k_min: int, k_max: int) -> dict[str, object]:
    if states == "ward":
        return {"features": features, "vocabulary": vocabulary, "k_min": k_min, "k_max": k_max}
    return {"vocabulary": vocabulary} if vocabulary else {}


def report(
    traces: Annotated[Path, typer.Argument(
        help="Trace file or folder in any supported format (see `formats`), or - for standard input.")],
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Where to write (default report.<format>).")
                      ] = None,
    format: Annotated[OutFormat | None, typer.Option(
        "--format", help="html (self-contained page), md (pull-request comment) or json (the document).")] = None,
    reader: ReaderOpt = None,
    option: ReaderOptionOpt = None,
    states: StatesOpt = "label",
    features: FeaturesOpt = "kind,tool,error",
    vocabulary: VocabularyOpt = None,
    k_min: KMinOpt = 2,
    k_max: KMaxOpt = 10,
    pseudocount: Annotated[float, typer.Option(min=0.0, help="Laplace pseudocount α per outcome.")] = 1.0,
    horizon: Annotated[int, typer.Option(min=1, callback=horizon_option, help="Largest step budget d shown.")] = 50,
    k: Annotated[str, typer.Option("--k", help="k for pass@k / pass^k, comma-separated.")] = "1,2,3,4,5",
    no_audit: Annotated[bool, typer.Option("--no-audit", help="Skip the goodness-of-fit audit.")] = False,
    in_sample: Annotated[bool, typer.Option("--in-sample", help="Audit on the fit data (no held-out split).")
                         ] = False,
    ci: Annotated[float, typer.Option("--ci", min=0.5, max=0.999, help="Interval level.")] = 0.95,
    uncertainty: Annotated[Uncertainty, typer.Option(help="How intervals are made.")] = Uncertainty.posterior,
    samples: Annotated[int, typer.Option(min=50, callback=samples_option,
                                         help="Posterior draws or bootstrap replicates.")] = 1000,
    seed: Annotated[int, typer.Option(help="Seed for the split, bootstrap and simulation.")] = 0,
    fail_under: Annotated[list[str] | None, typer.Option(
        "--fail-under", help='Gate such as "pass^3>=0.6", "R(20)>=0.5" or "cost_per_success(cost_usd)<=0.8" '
                             "(repeatable); exit 3 if one fails.")] = None,
    gate_on: Annotated[str, typer.Option(help="Compare gates with the point estimate or the interval's conservative "
                                              "end (lower bound of a probability, upper bound of a cost).")
                       ] = "point",
    fail_on_reject: Annotated[bool, typer.Option("--fail-on-reject", help="Exit 4 when the audit rejects.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress, only errors and gate results.")] = False,
    engine: EngineOpt = None,
    scheduler: SchedulerOpt = None,
    force: ForceOpt = False,
) -> None:
    """Read traces, discover states, fit and audit the chain, attach intervals, and write a report.

    With --engine a canonical Parquet/JSONL corpus of any size is read partition by partition (no trials check)."""
    from rich.console import Console

    from tracetochain.report import render_html
    from tracetochain.report._markdown import render_markdown
    from tracetochain.report._pipeline import make_report
    from tracetochain.report.gates import GATE_FAILED_EXIT_CODE, check_gate, evaluate_gate

    for expression in fail_under or []:
        check_gate(expression)  # a typo in a gate is reported before the work, not after it
    if gate_on not in ("point", "lower"):
        raise typer.BadParameter("--gate-on must be 'point' or 'lower'")
    ks = _parse_ks(k)
    fmt = format or (OutFormat(output.suffix.lstrip(".").lower().replace("markdown", "md"))
                     if output is not None and output.suffix.lstrip(".").lower() in ("html", "md", "json", "markdown")
                     else OutFormat.html)
    out = output or Path(f"report.{fmt.value}")
    inputs = input_paths(traces, states=states)
    check_output(out, force, inputs, "report")
    console = Console(stderr=True, quiet=quiet)
    state_options = _state_options(states, features, vocabulary, k_min, k_max)
    method = None if uncertainty == Uncertainty.none else uncertainty.value
    if engine is not None:
        refuse_on_engine([traces], reader, option)
        if no_audit:
            raise typer.BadParameter("with --engine the audit runs in the same pass over the data; drop --no-audit")
        if method == "bootstrap-full":
            raise typer.BadParameter("--uncertainty bootstrap-full refits the states on every replicate and needs "
                                     "the traces in memory; use posterior or bootstrap with --engine")
    with console.status("reading traces") as status:

        def progress(stage: str) -> None:
            status.update(stage)

        try:
            if engine is not None:
                from tracetochain.engines import get_engine
                from tracetochain.report._pipeline import make_partitioned_report

                with get_engine(engine, scheduler=scheduler) as eng:
                    doc = make_partitioned_report(
                        traces, engine=eng, states=None if states == "label" and not state_options else states,
                        state_options=state_options or None, pseudocount=pseudocount, horizon=horizon, ks=ks,
                        holdout=not in_sample, uncertainty=method,  # type: ignore[arg-type]
                        confidence=ci, samples=samples, seed=seed, progress=progress)
            else:
                table = load_traces(traces, reader, option, announce=not quiet)
                doc = make_report(table, states=states, state_options=state_options, pseudocount=pseudocount,
                                  horizon=horizon, ks=ks, audit=not no_audit, holdout=not in_sample,
                                  uncertainty=method,  # type: ignore[arg-type]
                                  confidence=ci, samples=samples, seed=seed, progress=progress)
        except ValueError as exc:
            from tracetochain.exceptions import TraceToChainError

            if isinstance(exc, TraceToChainError):
                raise
            raise typer.BadParameter(str(exc)) from None
        status.update("writing")
        text = {"html": lambda: render_html(doc), "md": lambda: render_markdown(doc),
                "json": lambda: json.dumps(doc, indent=1, allow_nan=False) + "\n"}[fmt.value]()
    from tracetochain._files import write_output

    write_output(out, text, overwrite=force, inputs=inputs, what="report")
    cert = doc.get("certificate") or {}
    if not quiet:
        typer.echo(f"{doc['source']['n_traces']} traces → R∞ = {doc['metrics']['r_inf']:.4f}; certificate: "
                   f"{str(cert.get('decision', 'not audited')).upper()}; wrote {out}")
        if doc.get("withheld"):
            typer.echo(f"withheld: {', '.join(doc['withheld'])}")
    code = 0
    for expression in fail_under or []:
        result = evaluate_gate(expression, doc, use="lower" if gate_on == "lower" else "point")
        typer.echo(result.message, err=not result.passed)
        if not result.passed:
            code = GATE_FAILED_EXIT_CODE
    if code == 0 and fail_on_reject and str(cert.get("decision")) == "reject":
        typer.echo("the audit rejected the chain (--fail-on-reject)", err=True)
        code = REJECT_EXIT_CODE
    if code:
        sys.exit(code)


def audit(
    traces: Annotated[Path, typer.Argument(
        help="Trace file or folder in any supported format (see `formats`), or - for standard input.")],
    reader: ReaderOpt = None,
    option: ReaderOptionOpt = None,
    states: StatesOpt = "label",
    features: FeaturesOpt = "kind,tool,error",
    vocabulary: VocabularyOpt = None,
    k_min: KMinOpt = 2,
    k_max: KMaxOpt = 10,
    pseudocount: Annotated[float, typer.Option(min=0.0, help="Laplace pseudocount α per outcome.")] = 1.0,
    in_sample: Annotated[bool, typer.Option("--in-sample", help="No held-out split.")] = False,
    ks_samples: Annotated[int, typer.Option(
        "--ks-samples", min=19, help="Parametric-bootstrap replicates behind the KS p-value.")] = 199,
    ks_mode: Annotated[str, typer.Option(help="calibrated (lattice KS, bootstrap p) or paper (two-sample KS).")
                       ] = "calibrated",
    seed: Annotated[int, typer.Option(help="Seed for the split and the bootstrap.")] = 0,
    engine: EngineOpt = None,
    scheduler: SchedulerOpt = None,
    samples: Annotated[int, typer.Option(
        min=0, help="With --engine: Poisson-bootstrap replicates (by trace id) behind the R∞ interval; 0 for none."
    )] = 200,
    as_json: Annotated[bool, typer.Option("--json", help="Print the certificate JSON.")] = False,
    fail_on_reject: Annotated[bool, typer.Option("--fail-on-reject", help="Exit 4 when the audit rejects.")] = False,
    legacy_bootstrap: Annotated[int | None, typer.Option(
        "--bootstrap", min=19, hidden=True, help="Deprecated spelling of --ks-samples.")] = None,
    legacy_resamples: Annotated[int | None, typer.Option(
        "--resamples", min=0, hidden=True, help="Deprecated spelling of --samples.")] = None,
) -> None:
    """Audit whether the chain fits the traces: timing (KS), Markov order, held-out R∞, i.i.d. trials.

    With --engine a corpus of any size is read partition by partition, with a Poisson-bootstrap R∞ interval."""
    from tracetochain.exceptions import TraceToChainError

    bootstrap = pick_alias("--ks-samples", ks_samples, 199, "--bootstrap", legacy_bootstrap)
    resamples = pick_alias("--samples", samples, 200, "--resamples", legacy_resamples)
    options = _state_options(states, features, vocabulary, k_min, k_max) or None
    try:
        if engine is not None:
            from tracetochain.engines import get_engine
            from tracetochain.partitioned import audit_partitioned

            refuse_on_engine([traces], reader, option)
            with get_engine(engine, scheduler=scheduler) as eng:
                result = audit_partitioned(
                    traces, engine=eng, states=None if states == "label" and not options else states,
                    state_options=options, pseudocount=pseudocount, holdout=not in_sample, seed=seed,
                    n_bootstrap=bootstrap, ks_mode=ks_mode, intervals="bootstrap" if resamples else "none",
                    n_resamples=max(resamples, 1))
            cert = result.certificate
            if not as_json:
                echo_text("\n".join(str(result).splitlines()[:2]))
        else:
            from tracetochain.audit import audit as run_audit

            table = load_traces(traces, reader, option)
            cert = run_audit(table, states=states, pseudocount=pseudocount, holdout=not in_sample, seed=seed,
                             state_options=options, n_bootstrap=bootstrap, ks_mode=ks_mode)
    except ValueError as exc:
        if isinstance(exc, TraceToChainError):
            raise
        raise typer.BadParameter(str(exc)) from None
    if as_json:
        typer.echo(cert.to_json())
    else:
        echo_text(str(cert))
    if fail_on_reject and cert.decision == "reject":
        sys.exit(REJECT_EXIT_CODE)
