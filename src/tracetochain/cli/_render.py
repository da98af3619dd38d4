"""Terminal rendering of library results with rich. Formatting only: every number comes from the library."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tracetochain._display import fmt_number
from tracetochain._text import terminal_text
from tracetochain.metrics import ReliabilitySummary
from tracetochain.quantities import format_row, quantity_rows
from tracetochain.traces import IngestReport


def _safe(text: object) -> str:
    """Trace content for a rich console: control characters (ESC sequences, BEL) made visible, long text cut,
    rich markup escaped."""
    return escape(terminal_text(str(text), 300))


_console = Console(highlight=False, soft_wrap=True)


def render_ingest(report: IngestReport, outcomes: dict[str, int], *, detected: bool = False) -> None:
    """What was read and skipped; ``detected`` adds a line naming the reader that sniffing chose."""
    oc = ", ".join(f"{v} {k}" for k, v in outcomes.items() if v)
    if detected:
        _console.print(f"reader: {_safe(report.format)} (detected; choose another with --reader NAME)")
    _console.print(f"[bold]{_safe(report.source)}[/] ({_safe(report.format)}): {report.n_traces} traces ({oc})")
    if getattr(report, "verdict_field", None):
        _console.print(f"verdict: {_safe(report.verdict_field)} (the only verdict field in the episodes; choose "
                       "another with -O outcome_key=PATH)")
    if report.n_records_skipped:
        _console.print(f"[yellow]skipped {report.n_records_skipped} records "
                       f"({report.n_traces_skipped} traces dropped whole):[/]")
        for reason, n in sorted(report.skipped_by_reason.items(), key=lambda kv: -kv[1]):
            _console.print(f"  {n:>6}  {_safe(reason)}")
        for p in report.problems[:5]:
            where = f"{report.location_kind} {p.location}, " if p.location is not None else ""
            _console.print(f"         e.g. {where}field {_safe(p.field or '-')}: {_safe(p.message)}")
    if report.zero_step:
        zc = ", ".join(f"{v} {k}" for k, v in report.zero_step_outcomes().items() if v)
        _console.print(f"{report.n_zero_step} episodes ended before any agent step ({zc}): kept as trials, "
                       "not dropped")
    if outcomes.get("invalid"):
        _console.print(f"[yellow]{outcomes['invalid']} invalid traces excluded from the fit[/]")


def render_formats(rows: list[dict[str, Any]]) -> None:
    """The reader table of ``tracetochain formats`` (rows: name, description, needs, builtin)."""
    table = Table(title="Trace formats (readers in detection order)", title_justify="left", show_lines=True)
    table.add_column("format", no_wrap=True)
    table.add_column("reads")
    table.add_column("needs")
    for row in rows:
        name = _safe(row["name"]) + ("" if row["builtin"] else " [dim](plug-in)[/]")
        table.add_row(name, _safe(row["description"]), _safe(row["needs"]))
    _console.print(table)
    _console.print(FORMATS_FOOTER)


#: What ``tracetochain formats`` says under the table about choosing readers and passing options.
FORMATS_FOOTER = (
    "Choose a reader with --reader NAME (default: detected from the file; when no reader recognises it, the error "
    "lists why each refused and suggests one). Pass reader options with -O KEY=VALUE on fit, report, audit, compare, "
    "monitor and convert (read_traces(path, NAME, **options) in Python); a VALUE that is JSON (a number, true, a "
    "list) is read as such. Keys that name a field may be dotted paths into nested records: "
    "-O outcome_key=metadata.success, -O reward_key=reward_info.reward. A verdict may be true/false, 1/0, a reward "
    "(success at >= success_threshold) or a word such as pass/fail/resolved (success_values=a,b names other success "
    "texts). JSONL header lines such as {\"metadata\": {...}} before the first record are kept as run metadata. "
    "Read standard input with - (cat runs.jsonl | tracetochain fit -)."
)


def _fmt(x: float | None, digits: int = 4) -> str:
    return fmt_number(x, digits)


def _prior_text(md: dict[str, Any]) -> str:
    prior = md.get("prior")
    if isinstance(prior, dict):
        if prior.get("kind") == "laplace":
            return f", Laplace prior α = {prior.get('strength'):g}"
        return ", episode prior"
    return f", pseudocount {md['pseudocount']:g}" if md.get("pseudocount") is not None else ""


def render_summary(s: ReliabilitySummary, intervals: dict[str, Any] | None = None, *,
                   pass_k_note: str | None = None, headline: str | None = None, discrimination: str | None = None,
                   uninformative: str | None = None, statuses: dict[str, str] | None = None) -> None:
    """The reliability summary; ``headline`` (the analysis's lead finding) first, ``discrimination`` (its held-out
    AUC sentence) after the chain, ``uninformative`` (why the state advice says nothing) in place of the sentence
    naming where failures leave from."""
    md = s.chain_metadata
    if headline:
        _console.print(f"[bold]{_safe(headline)}[/]")
    _console.print(f"[bold]Absorbing chain[/]: {s.n_states} transient states{_prior_text(md)}")
    if md.get("unvisited_states"):
        names = ", ".join(md["unvisited_states"][:5])
        _console.print(f"[yellow]states with no outgoing data ({md.get('unvisited_policy')} row): "
                       f"{_safe(names)}[/]")
    if intervals:
        deff = (intervals.get("settings") or {}).get("design_effect")
        tempered = f", tempered by the design effect {deff:.2f}" if isinstance(deff, (int, float)) and deff > 1 else ""
        note = f"; {intervals['note']}" if intervals.get("note") else ""
        _console.print(f"  [dim]intervals: {intervals.get('confidence', 0.95):.0%} {intervals.get('method')}, "
                       f"{intervals.get('n_draws', intervals.get('samples'))} draws, seed {intervals.get('seed')}"
                       f"{tempered}{_safe(note)}[/]")
    # Every reported number of the quantity registry, with its interval (and its certification status when the
    # caller audited: ``statuses``).
    for row in quantity_rows(s.to_dict(), intervals, statuses):
        value, interval = format_row(row)
        value = f"[bold]{value}[/]" if row["key"] == "r_inf" else value
        tag = f"  [dim]{row['status']}[/]" if statuses is not None else ""
        _console.print(f"  {_safe(row['label']):<26} {value}{' ' + interval if interval else ''}{tag}")
    if statuses is None:
        _console.print("  [dim]not audited: `tracetochain audit` or `report` certifies each number[/]")
    budget = (f"{s.step_budget_exact}" if s.step_budget_exact is not None else "not reached")
    spread = ((intervals or {}).get("metrics") or {}).get("step_budget", {}).get("exact") or {}
    if s.step_budget_exact is not None and spread.get("lower") is not None and spread.get("upper") is not None:
        budget += f" [{spread['lower']:.0f}, {spread['upper']:.0f}]"  # the interval the summary computed
    bound = f", Prop. 8 bound {s.step_budget_bound} (κ∞ = {s.step_budget_kappa:.3g})" \
        if s.step_budget_bound is not None and s.step_budget_kappa is not None else ""
    _console.print(f"  steps to within {s.step_budget_delta:g} of R∞  {budget}{bound}")
    for name, reason in s.undefined.items():
        _console.print(f"  [dim]{name}: {_safe(reason)}[/]")
    if discrimination:
        _console.print(f"  path → outcome: {_safe(discrimination)}")

    curve = Table(title="R(d): success within d steps", title_justify="left")
    picks = sorted({d for d in (1, 2, 5, 10, 20, 30, 50, 100, s.horizon) if d <= s.horizon})
    for d in picks:
        curve.add_column(f"d={d}", justify="right")
    curve.add_row(*[f"{s.reliability[d]:.4f}" for d in picks])
    band = (intervals or {}).get("metrics", {}).get("reliability")
    if isinstance(band, dict) and band.get("lower") is not None:
        curve.add_row(*[f"[dim]{band['lower'][d]:.2f}–{band['upper'][d]:.2f}[/]" for d in picks])
    _console.print(curve)
    _console.print(f"  [dim]R∞ − R({s.horizon}) = {s.residual_at_horizon:.2e} (exact tail mass)[/]")
    from tracetochain.audit.shared import BUDGET_CAVEAT

    _console.print(f"  [dim]{escape(BUDGET_CAVEAT)}[/]")

    pk = Table(title="pass@k and pass^k of the chain (i.i.d. trials)", title_justify="left")
    pk.add_column("k", justify="right")
    pk.add_column("pass@k", justify="right")
    pk.add_column("pass^k", justify="right")
    metrics = (intervals or {}).get("metrics", {})

    def with_iv(name: str, k: int, value: float) -> str:
        q = metrics.get(name, {}).get(str(k)) if isinstance(metrics.get(name), dict) else None
        return f"{value:.4f}" + (f" [dim][{q['lower']:.3f}, {q['upper']:.3f}][/]" if isinstance(q, dict)
                                 and q.get("lower") is not None else "")

    for k, a, h in zip(s.ks, s.pass_at_k, s.pass_hat_k, strict=True):
        pk.add_row(str(k), with_iv("pass_at_k", k, a), with_iv("pass_hat_k", k, h))
    _console.print(pk)
    if pass_k_note:
        _console.print(f"  [dim]{escape(pass_k_note)}[/]")

    worst = Table(title="Where failures leave from" + (" (uninformative: see below)" if uninformative else ""),
                  title_justify="left")
    worst.add_column("state", justify="left", no_wrap=True, max_width=40)
    for col in ("failures", "P(→fail)", "P(→succ)", "visits"):
        worst.add_column(col, justify="right")
    counts = md.get("counts") or {}
    observed_failures = dict(zip(counts.get("state_names") or [], counts.get("exits_failure") or [], strict=False))
    prior_only = False
    for st in s.worst_states(5):
        # A state no trace failed from gets its failure share from the prior alone: say so, never name it a source.
        mark = st.failure_share > 0 and observed_failures.get(st.name, 1) == 0
        prior_only |= mark
        worst.add_row(_safe(st.name), f"{st.failure_share:.1%}" + (" *" if mark else ""), f"{st.r_failure:.3f}",
                      f"{st.r_success:.3f}", f"{st.expected_visits:.2f}")
    _console.print(worst)
    if prior_only:
        _console.print("  [dim]* no trace failed from this state: its share is the prior's pseudo-failure[/]")
    if uninformative:
        _console.print(f"[yellow]Uninformative:[/] {_safe(uninformative)}")
        return
    top = s.worst_states(1)
    if top and top[0].failure_share > 0:
        _console.print(f"Most failures leave from [bold]{_safe(top[0].name)}[/] ({top[0].failure_share:.0%}).")


def _amount(x: float | None) -> str:
    """A cost without its unit (the unit heads the row): 0.4376, 629,435, 258."""
    if x is None:
        return "—"
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.4g}"


def render_costs(doc: dict[str, Any] | None) -> None:
    """The cost section: per attempt, per success (with its interval, and the observed figure), share spent on
    failing attempts; the headline sentences; or why there is no cost data."""
    if not doc:
        return
    if not doc.get("available"):
        _console.print(f"[dim]costs: {_safe(str(doc.get('reason')))}[/]")
        return
    observed = any("observed" in e for e in doc["metrics"].values())
    table = Table(title="What reliability costs (per success: failed attempts retried)", title_justify="left")
    for col in ("cost", "attempt", "success", "interval", *(["observed"] if observed else []), "failed"):
        table.add_column(col, justify="left" if col == "cost" else "right", no_wrap=True)
    for metric, entry in doc["metrics"].items():
        s = entry["summary"]
        iv = (entry.get("intervals") or {}).get("per_success") or {}
        band = f"[dim]{_amount(iv['lower'])}–{_amount(iv['upper'])}[/]" if iv.get("lower") is not None else ""
        obs = [_amount((entry.get("observed") or {}).get("per_success"))] if observed else []
        share = s.get("failed_share")
        table.add_row(_safe(metric), _amount(s["mean"]), _amount(s["per_success"]), band, *obs,
                      f"{share:.0%}" if share is not None else "—")
    _console.print(table)
    primary = doc["metrics"][doc["primary"]]
    for sentence in primary["summary"].get("sentences", []):
        _console.print(_safe(sentence))
    budget = primary.get("budget")
    if budget:
        _console.print(f"  [dim]R within a {_safe(doc['primary'])} budget: lattice step {budget['step']:.3g} "
                       f"{_safe(budget['unit'])}, discretisation error ≤ {budget['error_bound']:.2g}[/]")
    cert = doc.get("certification") or {}
    if cert.get("status") == "withheld":
        _console.print(f"[yellow]cost figures withheld by the audit: {_safe(str(cert.get('reason')))}[/]")
    for metric, reason in (doc.get("absent") or {}).items():
        if metric in ("cost_usd", "tokens", "seconds"):
            _console.print(f"  [dim]{_safe(metric)}: {_safe(reason)}[/]")
    for note in doc.get("notes") or ():
        _console.print(f"  [dim]note: {_safe(str(note))}[/]")


def render_paths(doc: dict[str, Any], *, top: int = 20, level: float = 0.05) -> None:
    """The `paths` table: the ``top`` best-supported patterns of a paths document (``PathsResult.to_dict()``)."""
    left = doc["left_out"]
    extra = ", ".join(f"{v} {k}" for k, v in left.items() if v)
    _console.print(f"[bold]{doc['n_traces']} traces[/] with an outcome ({doc['n_success']} success"
                   f"{'; left out: ' + extra if extra else ''}); {doc['n_candidates']} patterns tested, each in ≥ "
                   f"{doc['min_support']} traces and absent from ≥ {doc['min_support']}"
                   + (f"; clustered by task ({doc['n_tasks']} tasks)" if doc["clustered_by_task"] else ""))
    rows = doc["patterns"]
    supported = [r for r in rows if r["q_value"] < level]
    conf = f"{100 * doc['confidence']:.0f} %"
    _console.print(f"[bold]Path patterns, best supported first[/] ({len(supported)} with q < {level:g}, "
                   "Benjamini-Yekutieli FDR)")
    # One block per pattern (not a table): pattern names are long and must stay whole at any terminal width.
    for i, r in enumerate(rows[:top]):
        d = r["difference"]
        mark = "bold" if r["q_value"] < level else ""
        _console.print(f"{i + 1:>3}. {_safe(r['pattern'])}  [dim]({r['kind']})[/]", style=mark or None)
        _console.print(f"     {r['n_traces']} traces ({100 * r['share']:.0f} %) · success "
                       f"{100 * r['success_with']:.0f} % with, {100 * r['success_without']:.0f} % without · "
                       f"difference {100 * d['point']:+.0f} pts [{100 * d['lower']:+.0f}, {100 * d['upper']:+.0f}] "
                       f"({conf}) · q {fmt_number(r['q_value'], 3)}")
        ex = r["examples"]
        _console.print(f"     e.g. failing: {_safe(', '.join(ex['failure']) or '—')} · succeeding: "
                       f"{_safe(', '.join(ex['success']) or '—')}", style="dim")
    if len(rows) > top:
        _console.print(f"({len(rows) - top} more patterns: --top N, or --json for all)")
    top_row = doc.get("top_finding")
    if top_row is not None:
        _console.print(_safe(top_row["sentence"]))
    else:
        _console.print(f"No pattern separates succeeding from failing runs at a false discovery rate of {level:g}.")
    _console.print(f"[dim]{_safe(doc['method']['difference'])}; p: {_safe(doc['method']['p_value'])}; q: "
                   f"{_safe(doc['method']['q_value'])}[/]")


def render_paths_compare(doc: dict[str, Any], *, top: int = 10, level: float = 0.05) -> None:
    """`compare --paths`: the patterns whose prevalence or success-with changed most credibly (a compare-paths
    document, :func:`tracetochain.paths.compare_patterns`), one line each."""
    a, b = doc["labels"]

    def change(c: dict[str, Any]) -> str:
        return (f"{fmt_number(c['point'], 2, signed=True)} [{fmt_number(c['lower'], 2, signed=True)}, "
                f"{fmt_number(c['upper'], 2, signed=True)}], q {fmt_number(c['q_value'], 3)}")

    _console.print(f"[bold]path patterns[/] from {_safe(a)} to {_safe(b)}: {doc['n_changed']} of "
                   f"{doc['n_candidates']} changed with q < {level:g} (Benjamini-Yekutieli over both tests)")
    for r in doc["patterns"][:top]:
        pc, sc = r["prevalence_change"], r["success_with_change"]
        sw = r["success_with"]
        line = (f"  {_safe(r['pattern'])}: share {fmt_number(r['share'][a], 2)} → {fmt_number(r['share'][b], 2)} "
                f"({change(pc)}); success with {fmt_number(sw[a], 2)} → {fmt_number(sw[b], 2)}"
                + ("" if sc is None else f" ({change(sc)})"))
        _console.print(line, style="bold" if min(pc["q_value"], (sc or {}).get("q_value", 1.0)) < level else None)
