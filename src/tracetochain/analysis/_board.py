"""A reliability board: one row per configuration, how sure the order is, and which differences are real.

:func:`board` reads a corpus (one or many files, :func:`~tracetochain.readers._many.read_corpus`), keeps the
episodes meeting ``where`` (:meth:`TraceTable.where`), splits them by the field ``by`` (:meth:`TraceTable.group_by`)
and runs :func:`~tracetochain.analysis.analyze` on each group — the same analysis, settings and engine as ``fit`` /
``report`` — so every number of a row is the one ``report`` would print for that group alone. Per row:

* **pass rate** — successes over usable episodes, with a Wilson interval on the Kish effective sample size N/deff
  (deff = 1 + (m̄ − 1)ρ̂, the design effect of task clustering; Kish 1965, Wilson 1927);
* **R∞** with the analysis's interval (posterior draws tempered by the design effect, or the task-cluster bootstrap
  when tasks repeat: intervals that respect clustering);
* **pass^k** — the per-task unbiased estimator C(c, k)/C(n, k) averaged over tasks with ≥ k trials, with a
  bootstrap over tasks (:func:`~tracetochain.models.passk.empirical_pass_k`) when tasks repeat; otherwise the chain's
  i.i.d. R∞^k with its interval, labelled so;
* mean steps to absorption (interval), observed cost per success (total episode cost over successes, when the
  traces carry costs), the certificate (decision and the R∞ output's status), the ICC, design effect and the
  tasks × trials planner (:mod:`tracetochain.models.planning`);
* a reliability **card** for a leaderboard submission: the sha256 of the group's canonical trace table, the
  settings, the numbers with intervals and the certificate.

**Pairwise differences.** For every pair of groups (g, h) the difference of R∞ with
t = (R̂_g − R̂_h)/√(s_g² + s_h²), s the standard deviation of each group's R∞ draws (groups are independent samples,
so the variances add), referred to Student's t with Welch–Satterthwaite degrees of freedom from each group's number
of tasks − 1 (each s rests on the design effect estimated from that many tasks; a normal reference made the board
report a difference between equal groups in 10 % of corpora in study BOARD), two-sided p-values, **Holm's
step-down** adjustment over all G(G − 1)/2 pairs (Holm 1979): the chance that any reported difference is not real is
at most ``level``. The intervals of the differences are Bonferroni-simultaneous (t at 1 − level/(2M), M pairs), so
they can be read together.

**Rank intervals.** From the same decisions, the simultaneous rank intervals of Klein, Wright & Wieczorek (2020):
group g's rank (1 = most reliable) lies in [1 + #{h shown better than g}, G − #{h shown worse than g}]. Whenever the
Holm family makes no false claim — probability ≥ 1 − ``level`` — every group's true rank lies in its interval, all
at once. (Klein et al. use Bonferroni intervals; Holm's step-down rejects at least as much with the same
family-wise guarantee, so the intervals are no wider.) ``studies/board_ranks.py`` checks the coverage and the
all-equal false-difference rate.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np

from tracetochain._compat import renamed_parameters
from tracetochain.traces import TraceTable

__all__ = ["BOARD_SCHEMA_VERSION", "Board", "BoardRow", "PairwiseDifference", "board", "pairwise_and_ranks",
           "trace_table_sha256"]

#: Version of the board's JSON document (fields are added, never changed).
BOARD_SCHEMA_VERSION = 1
MULTIPLICITY = ("Holm step-down over all {m} pairwise differences of R∞ (Welch t tests; family-wise error ≤ "
                "{level:g}); difference intervals Bonferroni-simultaneous; rank intervals simultaneous over the "
                "{g} groups (Klein, Wright & Wieczorek 2020, from the same Holm decisions)")


def trace_table_sha256(table: TraceTable) -> str:
    """sha256 of the table written as canonical JSON Lines (one row per step, columns in table order, zero-step
    episodes after): the same traces read from any source give the same hash."""
    digest = hashlib.sha256()

    class _Sink:
        def write(self, data: bytes) -> int:
            digest.update(data)
            return len(data)

    table.write_to(_Sink(), "jsonl")  # type: ignore[arg-type]
    for rec in sorted(table.report.zero_step, key=lambda r: str(r.get("trace_id"))):
        digest.update(repr(sorted(rec.items())).encode("utf-8"))
    return digest.hexdigest()


@dataclass(frozen=True)
class PairwiseDifference:
    """R∞ of ``a`` minus R∞ of ``b``, its simultaneous interval, raw and Holm-adjusted p-values."""

    a: str
    b: str
    difference: float
    interval: tuple[float, float]
    p_value: float
    p_adjusted: float
    significant: bool

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "difference": self.difference, "interval": list(self.interval),
                "p_value": self.p_value, "p_adjusted": self.p_adjusted, "significant": self.significant}


def pairwise_and_ranks(names: Sequence[str], points: Sequence[float], sds: Sequence[float], *,
                       dfs: Sequence[float] | None = None, level: float = 0.05
                       ) -> tuple[list[PairwiseDifference], list[tuple[int, int]]]:
    """Holm-adjusted pairwise differences and the simultaneous rank intervals they imply (module docstring).

    ``dfs``: degrees of freedom behind each group's standard deviation (its tasks − 1); the pair's statistic is then
    referred to Student's t with Welch–Satterthwaite df = (s_g² + s_h²)² / (s_g⁴/ν_g + s_h⁴/ν_h) (Welch 1947)
    instead of the normal law (None: normal).

    >>> diffs, ranks = pairwise_and_ranks(["a", "b", "c"], [0.9, 0.5, 0.48], [0.02, 0.03, 0.03])
    >>> ranks, [d.significant for d in diffs]
    ([(1, 1), (2, 3), (2, 3)], [True, True, False])
    """
    from tracetochain.audit.shared import holm_adjust

    G = len(names)
    if not (len(points) == len(sds) == G):
        raise ValueError("need one point and one standard deviation per group")
    pairs = [(i, j) for i in range(G) for j in range(i + 1, G)]
    M = len(pairs)
    nd = NormalDist()
    tail = level / (2 * max(M, 1))
    raw: list[float] = []
    stats: list[tuple[float, float, float]] = []
    for i, j in pairs:
        d = float(points[i]) - float(points[j])
        vi, vj = float(sds[i]) ** 2, float(sds[j]) ** 2
        se = math.sqrt(vi + vj)
        df = math.inf
        if dfs is not None and se > 0:
            den = (vi * vi / max(float(dfs[i]), 1.0)) + (vj * vj / max(float(dfs[j]), 1.0))
            df = (vi + vj) ** 2 / den if den > 0 else math.inf
        if se <= 0:
            p, crit = (1.0 if d == 0 else 0.0), 0.0
        elif math.isinf(df):
            p, crit = 2 * (1 - nd.cdf(abs(d) / se)), nd.inv_cdf(1 - tail)
        else:
            from scipy.stats import t as student_t  # lazily: not on the fit path

            p, crit = float(2 * student_t.sf(abs(d) / se, df)), float(student_t.isf(tail, df))
        raw.append(p)
        stats.append((d, se, crit))
    adjusted = holm_adjust(raw) if raw else np.zeros(0)
    diffs: list[PairwiseDifference] = []
    better = [0] * G
    worse = [0] * G
    for (i, j), p, q, (d, se, crit) in zip(pairs, raw, adjusted, stats, strict=True):
        sig = bool(q <= level)
        diffs.append(PairwiseDifference(names[i], names[j], d, (d - crit * se, d + crit * se), p, float(q), sig))
        if sig:
            hi, lo = (i, j) if d > 0 else (j, i)
            better[lo] += 1
            worse[hi] += 1
    ranks = [(1 + better[g], G - worse[g]) for g in range(G)]
    return diffs, ranks


@dataclass
class BoardRow:
    """One group's figures (module docstring); ``card`` is its reliability card."""

    group: str
    n_episodes: int
    n_tasks: int
    n_success: int
    mean_trials: float
    pass_rate: float
    pass_rate_interval: tuple[float, float]
    r_inf: float
    r_inf_interval: tuple[float | None, float | None]
    r_inf_sd: float
    pass_hat_k: dict[str, dict[str, Any]]
    mean_steps: dict[str, Any]
    cost_per_success: float | None
    certificate: dict[str, Any]
    design_effect: float
    planning: dict[str, Any]
    sha256: str
    run_metadata: dict[str, Any]
    rank: int = 0
    rank_interval: tuple[int, int] = (0, 0)
    analysis: Any = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.group, "rank": self.rank, "rank_interval": list(self.rank_interval),
                "n_episodes": self.n_episodes, "n_tasks": self.n_tasks, "n_success": self.n_success,
                "mean_trials": self.mean_trials, "pass_rate": self.pass_rate,
                "pass_rate_interval": list(self.pass_rate_interval), "r_inf": self.r_inf,
                "r_inf_interval": list(self.r_inf_interval), "r_inf_sd": self.r_inf_sd,
                "pass_hat_k": self.pass_hat_k, "mean_steps": self.mean_steps,
                "cost_per_success": self.cost_per_success, "certificate": self.certificate,
                "design_effect": self.design_effect, "planning": self.planning, "sha256": self.sha256,
                "run_metadata": self.run_metadata}


@dataclass
class Board:
    """The board: rows in rank order, pairwise differences, the settings and the multiplicity statement."""

    by: str
    rows: list[BoardRow]
    pairs: list[PairwiseDifference]
    settings: dict[str, Any]
    filters: list[str]
    source: str
    multiplicity: str
    run_metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def groups(self) -> list[str]:
        return [r.group for r in self.rows]

    def row(self, group: str) -> BoardRow:
        for r in self.rows:
            if r.group == group:
                return r
        raise KeyError(f"no group {group!r}; groups: {', '.join(self.groups)}")

    def card(self, group: str) -> dict[str, Any]:
        """The reliability card of one group: what a leaderboard submission can attach (versioned JSON)."""
        r = self.row(group)
        return {"kind": "tracetochain.reliability_card", "schema_version": BOARD_SCHEMA_VERSION,
                "tracetochain_version": _version(), "group": {"field": self.by, "value": group},
                "filters": list(self.filters), "source": self.source,
                "trajectories": {"sha256": r.sha256, "hash_of": "canonical trace table (JSON Lines)",
                                 "n_episodes": r.n_episodes, "n_tasks": r.n_tasks},
                "settings": dict(self.settings), "run_metadata": r.run_metadata,
                "numbers": {k: v for k, v in r.to_dict().items()
                            if k in ("pass_rate", "pass_rate_interval", "r_inf", "r_inf_interval", "pass_hat_k",
                                     "mean_steps", "cost_per_success", "design_effect", "rank", "rank_interval")},
                "certificate": r.certificate, "planning": r.planning, "multiplicity": self.multiplicity}

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "tracetochain.board", "schema_version": BOARD_SCHEMA_VERSION,
                "tracetochain_version": _version(), "by": self.by, "filters": list(self.filters),
                "source": self.source, "settings": dict(self.settings), "multiplicity": self.multiplicity,
                "rows": [r.to_dict() for r in self.rows], "pairs": [p.to_dict() for p in self.pairs],
                "run_metadata": self.run_metadata}

    def __str__(self) -> str:
        where = "; " + ", ".join(self.filters) if self.filters else ""
        lines = [f"board by {self.by} ({len(self.rows)} groups{where})"]
        for r in self.rows:
            lo, hi = r.r_inf_interval
            iv = f"[{lo:.3f}, {hi:.3f}]" if lo is not None and hi is not None else "[–]"
            lines.append(f"  {r.rank_interval[0]}–{r.rank_interval[1]:<3} {r.group}: R∞ {r.r_inf:.3f} {iv}, "
                         f"pass rate {r.pass_rate:.3f} (n = {r.n_episodes}), "
                         f"certificate {r.certificate.get('decision', 'not audited')}")
        n_sig = sum(p.significant for p in self.pairs)
        lines.append(f"{n_sig} of {len(self.pairs)} pairwise differences significant — {self.multiplicity}")
        return "\n".join(lines)


def _version() -> str:
    from tracetochain._version import __version__

    return __version__


def _observed_cost(table: TraceTable) -> float | None:
    """Total cost of the episodes in USD (the episode totals the source reports, else the sum of step costs)."""
    cols = table.columns
    if "total_cost_usd" in cols:
        vals = [v for v in table.trace_column("total_cost_usd").to_pylist() if v is not None]
        if vals:
            return float(sum(vals))
    if "cost_usd" in cols:
        col = table.to_arrow().column("cost_usd").to_pylist()
        vals = [v for v in col if v is not None]
        if vals:
            return float(sum(vals))
    return None


def _task_counts(table: TraceTable) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    from tracetochain.models.passk import task_trials

    return task_trials(table)


def _group_row_of(group: tuple[str, TraceTable], **kwargs: Any) -> BoardRow:
    return _group_row(group[0], group[1], **kwargs)


def _group_row(name: str, table: TraceTable, *, analyze_kwargs: dict[str, Any], ks: tuple[int, ...],
               horizon: int, width: float, confidence: float, n_bootstrap: int, seed: int) -> BoardRow:
    from tracetochain.analysis._analyze import analyze
    from tracetochain.audit.shared import wilson_interval
    from tracetochain.models.passk import empirical_pass_k
    from tracetochain.models.planning import plan_trials

    result = analyze(table, confidence=confidence, seed=seed, **analyze_kwargs)
    summary = result.summary
    n = int(summary.n_usable)
    succ = int(summary.n_success)
    deff = float(result.design_effect)
    lo, hi = wilson_interval(succ / deff, n / deff, confidence) if n else (0.0, 1.0)
    ivs = result.intervals(horizon=horizon, ks=ks) or {}
    metrics = ivs.get("metrics", {})
    r_iv = metrics.get("r_inf", {})
    r_point = float(result.chain.r_inf)
    sd = r_iv.get("std")
    c, trials = _task_counts(table)
    repeated = bool(np.any(trials >= 2))
    passk: dict[str, dict[str, Any]] = {}
    if repeated:
        est = empirical_pass_k((c, trials), ks, n_bootstrap=n_bootstrap, confidence=confidence, seed=seed)
        for k, v, (plo, phi), used in zip(est.ks, est.pass_hat_k, est.pass_hat_k_interval, est.n_tasks_used,
                                           strict=True):
            passk[str(k)] = {"point": v, "lower": plo, "upper": phi, "n_tasks": used,
                             "estimator": "per-task unbiased C(c,k)/C(n,k), bootstrap over tasks"}
    else:
        chain_k = metrics.get("pass_hat_k", {})
        for k in ks:
            q = chain_k.get(str(k), {})
            passk[str(k)] = {"point": float(r_point ** k), "lower": q.get("lower"), "upper": q.get("upper"),
                             "n_tasks": int(c.size),
                             "estimator": "R∞^k of the chain (i.i.d. trials: no task was tried twice)"}
    steps_iv = metrics.get("mean_steps", {})
    steps = {"point": steps_iv.get("point", result.metrics(horizon=horizon, ks=ks).mean_steps),
             "lower": steps_iv.get("lower"), "upper": steps_iv.get("upper")}
    cost = _observed_cost(table)
    cert = result.certificate
    certificate: dict[str, Any] = ({"decision": "not audited", "r_inf": "untested"} if cert is None else
                                   {"decision": cert.decision, "r_inf": cert.status("r_inf"),
                                    "level": cert.level})
    plan = plan_trials(c, trials, width=width, ks=ks, confidence=confidence, n_bootstrap=n_bootstrap, seed=seed)
    return BoardRow(group=name, n_episodes=n, n_tasks=int(c.size), n_success=succ,
                    mean_trials=float(trials.mean()) if trials.size else 0.0, pass_rate=succ / max(1, n),
                    pass_rate_interval=(float(lo), float(hi)), r_inf=r_point,
                    r_inf_interval=(r_iv.get("lower"), r_iv.get("upper")),
                    r_inf_sd=float(sd) if sd is not None else 0.0, pass_hat_k=passk, mean_steps=steps,
                    cost_per_success=(cost / succ if cost is not None and succ else None), certificate=certificate,
                    design_effect=deff, planning=plan.to_dict(), sha256=trace_table_sha256(table),
                    run_metadata=_group_metadata(table), analysis=result)


def _group_metadata(table: TraceTable) -> dict[str, Any]:
    """The header metadata of the files a group's episodes came from."""
    meta = table.report.run_metadata
    if "files" not in meta or "source_file" not in table.columns:
        return dict(meta)
    files = set(table.trace_values("source_file"))
    return {name: doc for name, doc in meta["files"].items() if name in files}


@renamed_parameters(n_samples="samples")
def board(source: Any, *, by: str, where: Sequence[str] = (), reader: str | None = None,
          reader_options: dict[str, Any] | None = None, on_error: str = "raise", engine: Any = None,
          states: Any = "label", state_options: dict[str, Any] | None = None, audit: bool = True,
          intervals: str = "posterior", samples: int = 1000, confidence: float = 0.95, level: float = 0.05,
          ks: Sequence[int] = (1, 3), horizon: int = 10, width: float = 0.1, n_bootstrap: int = 1000, seed: int = 0,
          progress: Callable[[str], None] | None = None, n_jobs: int | None = None, **audit_options: Any) -> Board:
    """The reliability board of ``source`` grouped by the field ``by`` (module docstring).

    ``source`` is a :class:`TraceTable` or what :func:`~tracetochain.readers._many.read_corpus` reads (a file, a
    folder, a glob, or a list of them). ``where`` selects episodes first (``FIELD=VALUE`` / ``FIELD!=VALUE``).
    ``engine``, ``states``, ``audit``, ``intervals``, ``samples`` and ``audit_options`` are passed to
    :func:`~tracetochain.analysis.analyze` for each group; ``level`` is the family-wise level of the pairwise
    differences and rank intervals; ``width`` the target interval width of the planner; ``n_bootstrap`` the task
    bootstrap of pass^k and the ICC. ``n_jobs``: processes over which the groups are analysed (without an
    ``engine``; :mod:`tracetochain._parallel`: default 1, -1 every CPU) — each group's row is the same for any number.
    """
    from tracetochain._parallel import parallel_map

    if intervals not in ("posterior", "bootstrap"):
        raise ValueError("a board needs intervals: 'posterior' or 'bootstrap'")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    if isinstance(source, TraceTable):
        table = source
    else:
        from tracetochain.readers.shared import read_corpus

        table = read_corpus(source, reader, on_error=on_error, **(reader_options or {}))
    if where:
        table = table.where(list(where))
    groups = table.group_by(by)
    if not groups:
        raise ValueError(f"no episode to put on the board (field {by!r}; filters: {', '.join(where) or 'none'})")
    step = progress or (lambda stage: None)
    ks_t = tuple(sorted({int(k) for k in ks}))
    kwargs: dict[str, Any] = {"engine": engine, "states": states, "state_options": state_options, "audit": audit,
                              "intervals": intervals, "samples": samples, "on_error": on_error, **audit_options}
    row_of = functools.partial(_group_row_of, analyze_kwargs=kwargs, ks=ks_t, horizon=horizon, width=width,
                               confidence=confidence, n_bootstrap=n_bootstrap, seed=seed)
    G = len(groups)
    step(f"analysing {G} group{'s' if G != 1 else ''} by {by}")
    # An engine (a Dask cluster, the local engine's processes) is not sent to worker processes: it is parallel itself.
    rows: list[BoardRow] = parallel_map(row_of, list(groups.items()), n_jobs=1 if engine is not None else n_jobs,
                                        done=lambda i, n: step(f"group {i} of {n} done") if i else None)
    order = sorted(range(len(rows)), key=lambda i: (-rows[i].r_inf, rows[i].group))
    rows = [rows[i] for i in order]
    diffs, rank_iv = pairwise_and_ranks([r.group for r in rows], [r.r_inf for r in rows],
                                        [r.r_inf_sd for r in rows], dfs=[max(1, r.n_tasks - 1) for r in rows],
                                        level=level)
    for pos, (r, iv) in enumerate(zip(rows, rank_iv, strict=True)):
        r.rank, r.rank_interval = pos + 1, iv
    M = len(diffs)
    settings = {"by": by, "where": list(where), "states": str(states), "intervals": intervals,
                "n_samples": samples, "confidence": confidence, "level": level, "ks": list(ks_t),
                "horizon": horizon, "target_width": width, "audit": bool(audit), "seed": seed,
                "engine": None if engine is None else str(getattr(engine, "name", engine)),
                **{k: v for k, v in audit_options.items() if isinstance(v, (int, float, str, bool))}}
    src = table.report.source
    return Board(by=by, rows=rows, pairs=diffs, settings=settings, filters=list(table.report.filters),
                 source=str(Path(src)) if src else "", run_metadata=table.report.run_metadata,
                 multiplicity=MULTIPLICITY.format(m=M, level=level, g=len(rows)))
