"""The cost model: what one visit to each state costs (tokens, dollars, seconds), estimated from the steps.

Per state and metric it keeps sufficient statistics that add up over partitions of a corpus — the number of visits
with a value n, Σx and Σx² — so the per-visit mean is Σx/n and the variance (Σx² − (Σx)²/n)/(n − 1). When a source
reports only episode totals (e.g. SWE-agent's ``info.model_stats``) the per-visit means are the non-negative least
squares fit of the totals on the visit counts (Lawson & Hanson 1974, via ``scipy.optimize.nnls``), kept as the
normal equations XᵀX, Xᵀy (which also add up over partitions), and the per-visit variances the same fit of the
squared residuals (Var y = Σ_i n_i v_i under the model). The model says which route each metric took.

What a missing value means. Readers put the usage of a model call on the first step of its turn and leave the
turn's other steps (and tool steps) empty, so an empty token or dollar cell in an episode that has such values is a
step that cost nothing extra: it counts as 0. An episode with no value at all for a metric is unknown for it and is
left out of that metric (the coverage is recorded), and so is an episode whose values are all 0 (sources write 0
for "not tracked"; a run that really used a model has some non-zero usage). Wall seconds are ``t_end − t_start``,
or where ``t_end`` is missing the time until the next step of the episode starts; a step with neither is unknown,
and a negative duration (clock trouble) is left out and counted.

States with no value at all (e.g. seen only under the prior) get the pooled per-visit law of all states and are
listed as imputed: a guess, said as such, never a zero pretending to be a cost.

It lives with the chain because :class:`~tracetochain.chain.ChainEstimator` attaches it to every chain it fits from
traces (``metadata["costs"]``); the figures built on it (expected cost per attempt and per success, budgets,
intervals) are in :mod:`tracetochain.costs`, which exports :class:`CostModel`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tracetochain._outcome import INVALID as _INVALID
from tracetochain.chain._counts import state_codes
from tracetochain.exceptions import ChainValidationError, SchemaVersionError

COST_MODEL_KIND = "tracetochain.cost_model"
COST_MODEL_SCHEMA_VERSION = 1

#: Metrics in display order → (unit, what it is).
METRICS: dict[str, tuple[str, str]] = {
    "cost_usd": ("USD", "dollars"),
    "tokens": ("tokens", "input + output tokens"),
    "tokens_in": ("tokens", "input tokens"),
    "tokens_out": ("tokens", "output tokens"),
    "seconds": ("s", "wall-clock seconds"),
    "api_calls": ("calls", "model API calls"),
}
#: Step columns behind each metric (seconds and tokens are derived).
_STEP_COLUMNS = {"cost_usd": "cost_usd", "tokens_in": "tokens_in", "tokens_out": "tokens_out"}
#: Trace-level total columns behind each metric.
_TOTAL_COLUMNS = {"cost_usd": "total_cost_usd", "tokens_in": "total_tokens_in", "tokens_out": "total_tokens_out",
                  "api_calls": "total_api_calls"}
STEPS, TOTALS = "steps", "trace totals"

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


# ------------------------------------------------------------------------------------------------ step values
def _trace_rule(x: FloatArray, offsets: IntArray) -> tuple[FloatArray, int]:
    """Empty cells of an episode that has values elsewhere are 0 (usage sits on the first step of a turn); an
    episode whose values are all 0 did not track the metric (sources write 0 for "not recorded", e.g. τ²-bench runs
    of agents whose cost is not tracked): its values become unknown. Returns (values, such episodes)."""
    n_traces = offsets.size - 1
    if not n_traces or not x.size:
        return x, 0
    lengths = np.diff(offsets)
    trace_of_row = np.repeat(np.arange(n_traces), lengths)
    known = np.isfinite(x)
    has_value = np.bincount(trace_of_row[known], minlength=n_traces) > 0
    has_nonzero = np.bincount(trace_of_row[known & (x != 0)], minlength=n_traces) > 0
    zeros_only = has_value & ~has_nonzero
    out = x.copy()
    out[~known & has_value[trace_of_row]] = 0.0
    out[zeros_only[trace_of_row]] = np.nan
    return out, int(zeros_only.sum())


def _column(table: Any, name: str, n: int) -> FloatArray:
    if name not in table.column_names:
        return np.full(n, np.nan)
    col = table.column(name)
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.float64)


def step_durations(t_start: FloatArray, t_end: FloatArray, offsets: IntArray) -> tuple[FloatArray, int, int]:
    """Wall seconds of every step: t_end − t_start, else the gap to the next step's t_start in the same episode.

    Returns (seconds with NaN where unknown, how many came from gaps, how many negative durations were dropped).
    """
    n = t_start.size
    direct = t_end - t_start
    nxt = np.full(n, np.nan)
    if n > 1:
        nxt[:-1] = t_start[1:]
        last = offsets[1:] - 1
        nxt[last[last < n]] = np.nan  # the next row belongs to another episode
    gap = nxt - t_start
    use_gap = ~np.isfinite(direct) & np.isfinite(gap)
    seconds = np.where(np.isfinite(direct), direct, gap)
    negative = np.isfinite(seconds) & (seconds < 0)
    seconds[negative] = np.nan
    return seconds, int((use_gap & ~negative).sum()), int(negative.sum())


def usage_arrays(table: Any, offsets: IntArray) -> tuple[dict[str, FloatArray], dict[str, Any]]:
    """Per-step values of every metric (NaN = unknown) from a canonical Arrow table sorted by (trace, step)."""
    n = table.num_rows
    values: dict[str, FloatArray] = {}
    derivation: dict[str, Any] = {}
    for metric, col in _STEP_COLUMNS.items():
        values[metric], zeros_only = _trace_rule(_column(table, col, n), offsets)
        derivation[f"zeros_only_{metric}"] = zeros_only
    values["tokens"] = values["tokens_in"] + values["tokens_out"]
    seconds, from_gaps, negative = step_durations(_column(table, "t_start", n), _column(table, "t_end", n), offsets)
    values["seconds"] = seconds
    values["api_calls"] = np.full(n, np.nan)
    derivation.update(seconds_from_gaps=from_gaps, negative_durations=negative)
    return values, derivation


def trace_totals(table: Any, offsets: IntArray) -> dict[str, FloatArray]:
    """Reported episode totals per metric (NaN where the source gives none), one entry per trace."""
    starts = offsets[:-1]
    out: dict[str, FloatArray] = {}
    for metric, col in _TOTAL_COLUMNS.items():
        out[metric] = _column(table, col, table.num_rows)[starts] if starts.size else np.zeros(0)
    out["tokens"] = out["tokens_in"] + out["tokens_out"]
    out["seconds"] = np.full(starts.size, np.nan)
    return out


#: ``IngestReport.format`` values of the canonical long table (files, data frames, records): one source kind.
_CANONICAL_FORMATS = frozenset({"jsonl", "json", "csv", "parquet", "dataframe", "records", "arrow", "union",
                                "canonical"})


def reader_name(report_format: str | None) -> str | None:
    """The reader behind an ingest report's format (the canonical table under any of its file types)."""
    if report_format is None:
        return None
    return "canonical" if report_format in _CANONICAL_FORMATS else report_format


# ------------------------------------------------------------------------------------------------ statistics
@dataclass(frozen=True, eq=False)
class MetricStats:
    """Sufficient statistics of one metric over the states (see the module docstring for the two routes).

    Steps route: ``n``, ``total``, ``total_sq`` per state. Totals route: ``gram`` = XᵀX, ``xty`` = Xᵀy, ``yty``
    and ``n_traces`` (X: visits per state of each episode, y: its reported total), plus ``variance`` (per-visit
    variances from the squared residuals) and ``visits`` (visits per state of the episodes used). ``check_*`` compare
    the step values with reported totals where a source has both: Σ reported and Σ step values over the ``check_traces``
    episodes that have a total and complete step values.
    """

    source: str
    n: IntArray
    total: FloatArray
    total_sq: FloatArray
    gram: FloatArray | None = None
    xty: FloatArray | None = None
    yty: float = 0.0
    n_traces: int = 0
    variance: FloatArray | None = None
    check_traces: int = 0
    check_reported: float = 0.0
    check_steps: float = 0.0
    traces_with_values: int = 0
    traces_without_values: int = 0

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source, "n": self.n.tolist(), "sum": self.total.tolist(),
                               "sum_sq": self.total_sq.tolist(), "traces_with_values": self.traces_with_values,
                               "traces_without_values": self.traces_without_values}
        if self.source == TOTALS:
            assert self.gram is not None and self.xty is not None and self.variance is not None
            out.update({"gram": self.gram.tolist(), "xty": self.xty.tolist(), "yty": self.yty,
                        "n_traces": self.n_traces, "variance": self.variance.tolist()})
        if self.check_traces:
            out["check"] = {"traces": self.check_traces, "reported": self.check_reported, "steps": self.check_steps}
        return out

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> MetricStats:
        check = doc.get("check") or {}
        totals = doc.get("source") == TOTALS
        return cls(str(doc["source"]), np.asarray(doc["n"], dtype=np.int64), np.asarray(doc["sum"], dtype=np.float64),
                   np.asarray(doc["sum_sq"], dtype=np.float64),
                   np.asarray(doc["gram"], dtype=np.float64) if totals else None,
                   np.asarray(doc["xty"], dtype=np.float64) if totals else None, float(doc.get("yty", 0.0)),
                   int(doc.get("n_traces", 0)), np.asarray(doc["variance"], dtype=np.float64) if totals else None,
                   int(check.get("traces", 0)), float(check.get("reported", 0.0)), float(check.get("steps", 0.0)),
                   int(doc.get("traces_with_values", 0)), int(doc.get("traces_without_values", 0)))


@dataclass(frozen=True, eq=False)
class PerVisitCost:
    """The per-visit law of one metric at every state, ready for the chain.

    ``mean`` / ``variance`` per visit; ``std_error`` of the mean (its sampling uncertainty); ``n`` values behind
    it; ``imputed`` marks states given the pooled law (no value of their own); ``covariance`` of the means when
    they were estimated jointly (totals route), else None (independent).
    """

    metric: str
    source: str
    mean: FloatArray
    variance: FloatArray
    std_error: FloatArray
    n: IntArray
    imputed: NDArray[np.bool_]
    covariance: FloatArray | None = None

    def draw_means(self, n_draws: int, rng: np.random.Generator) -> FloatArray:
        """``n_draws`` draws of the per-visit means from their sampling law: independent gammas with the mean and
        standard error of each state (positive, and normal for large n), or for jointly estimated means a normal
        with their covariance, cut at 0 (the means of a non-negative fit)."""
        m = self.mean.size
        if self.covariance is not None:
            cov = 0.5 * (self.covariance + self.covariance.T)
            draws = rng.multivariate_normal(self.mean, cov, size=n_draws, method="eigh")
            out: FloatArray = np.clip(draws, 0.0, None)
            return out
        out = np.tile(self.mean, (n_draws, 1))
        for i in range(m):
            mu, se = float(self.mean[i]), float(self.std_error[i])
            if mu > 0 and se > 0:
                shape = (mu / se) ** 2
                out[:, i] = rng.gamma(shape, mu / shape, size=n_draws)
        return out


def _nnls_from_normal_equations(gram: FloatArray, xty: FloatArray) -> tuple[FloatArray, int]:
    """argmin_{c ≥ 0} ‖Xc − y‖² given only XᵀX and Xᵀy: with XᵀX = V Λ Vᵀ, the objective is ‖Lc − d‖² + const
    for L = Λ^{1/2} Vᵀ, d = Λ^{−1/2} Vᵀ Xᵀy on the directions with λ > 0. Returns (c, rank)."""
    import scipy.optimize

    lam, V = np.linalg.eigh(0.5 * (gram + gram.T))
    keep = lam > max(float(lam.max(initial=0.0)), 1e-300) * 1e-12
    if not keep.any():
        return np.zeros(gram.shape[0]), 0
    L = np.sqrt(lam[keep])[:, None] * V[:, keep].T
    d = (V[:, keep].T @ xty) / np.sqrt(lam[keep])
    c, _ = scipy.optimize.nnls(L, d, maxiter=50 * gram.shape[0] + 100)
    return np.asarray(c, dtype=np.float64), int(keep.sum())


def _totals_stats(X: FloatArray, y: FloatArray) -> MetricStats:
    """The totals route: normal equations of y on X, and per-visit variances from the squared residuals."""
    import scipy.optimize

    m = X.shape[1]
    gram = X.T @ X
    xty = X.T @ y
    c, _ = _nnls_from_normal_equations(gram, xty)
    resid2 = (y - X @ c) ** 2
    if X.shape[0] > 0 and np.any(X):
        v, _ = scipy.optimize.nnls(X, resid2, maxiter=50 * m + 100)
    else:
        v = np.zeros(m)
    visits = X.sum(axis=0)
    return MetricStats(TOTALS, visits.astype(np.int64), np.zeros(m), np.zeros(m), gram, xty, float(y @ y),
                       int(y.size), np.asarray(v, dtype=np.float64))


def _visit_matrix(codes: IntArray, offsets: IntArray, m: int) -> FloatArray:
    n_traces = offsets.size - 1
    rows = np.repeat(np.arange(n_traces), np.diff(offsets))
    X = np.zeros((n_traces, m))
    np.add.at(X, (rows, codes), 1.0)
    return X


# ------------------------------------------------------------------------------------------------ the model
@dataclass(frozen=True, eq=False)
class CostModel:
    """Per-state cost of a visit, for every metric the traces carry. Build with :meth:`from_traces`.

    ``visits[i]`` counts the steps in state i (of every usable episode); ``metrics`` maps a metric name (see
    :data:`METRICS`) to its :class:`MetricStats`; ``absent`` lists the metrics the source does not carry;
    ``notes`` say what was derived, imputed or left out. A model with no metric means the traces carry no cost
    data at all (``available`` is False) — never zeros pretending to be costs.

    Examples
    --------
    >>> import tracetochain as tt
    >>> traces = tt.TraceTable.from_records([
    ...     {"trace_id": "a", "step_idx": 0, "state": "plan", "outcome": "success", "cost_usd": 0.02},
    ...     {"trace_id": "a", "step_idx": 1, "state": "act", "outcome": "success", "cost_usd": 0.05},
    ...     {"trace_id": "b", "step_idx": 0, "state": "plan", "outcome": "failure", "cost_usd": 0.04}])
    >>> model = CostModel.from_traces(traces)
    >>> model.per_visit("cost_usd").mean.round(3).tolist()
    [0.03, 0.05]
    """

    state_names: tuple[str, ...]
    visits: IntArray
    metrics: dict[str, MetricStats]
    absent: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    source_format: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_arrays(cls, codes: IntArray, offsets: IntArray, state_names: tuple[str, ...] | list[str],
                    values: dict[str, FloatArray], totals: dict[str, FloatArray], *,
                    source_format: str | None = None, derivation: dict[str, Any] | None = None) -> CostModel:
        """The model from raw arrays (pure; what partitions compute before :meth:`merge`).

        ``codes``: state of every step (sorted by trace, step); ``offsets``: trace i is rows
        ``offsets[i]:offsets[i+1]``; ``values[metric]``: per-step values (NaN unknown, see :func:`usage_arrays`);
        ``totals[metric]``: reported episode totals (NaN none, see :func:`trace_totals`).
        """
        names = tuple(str(s) for s in state_names)
        m = len(names)
        codes = np.asarray(codes, dtype=np.int64)
        offsets = np.asarray(offsets, dtype=np.int64)
        n_traces = offsets.size - 1
        visits = np.bincount(codes, minlength=m).astype(np.int64) if codes.size else np.zeros(m, np.int64)
        trace_of_row = np.repeat(np.arange(n_traces), np.diff(offsets))
        stats: dict[str, MetricStats] = {}
        absent: list[str] = []
        X: FloatArray | None = None
        for metric in METRICS:
            x = np.asarray(values.get(metric, np.full(codes.size, np.nan)), dtype=np.float64)
            y = np.asarray(totals.get(metric, np.full(n_traces, np.nan)), dtype=np.float64)
            ok = np.isfinite(x)
            if ok.any():
                n = np.bincount(codes[ok], minlength=m).astype(np.int64)
                s1 = np.bincount(codes[ok], weights=x[ok], minlength=m).astype(np.float64)
                s2 = np.bincount(codes[ok], weights=x[ok] ** 2, minlength=m).astype(np.float64)
                known = np.bincount(trace_of_row[ok], minlength=n_traces) > 0
                complete = np.bincount(trace_of_row[~ok], minlength=n_traces) == 0
                per_trace = np.bincount(trace_of_row[ok], weights=x[ok], minlength=n_traces)
                check = complete & np.isfinite(y)
                stats[metric] = MetricStats(STEPS, n, s1, s2, check_traces=int(check.sum()),
                                            check_reported=float(y[check].sum()),
                                            check_steps=float(per_trace[check].sum()),
                                            traces_with_values=int(known.sum()),
                                            traces_without_values=int(n_traces - known.sum()))
            elif np.isfinite(y).any():
                if X is None:
                    X = _visit_matrix(codes, offsets, m)
                has = np.isfinite(y)
                st = _totals_stats(X[has], y[has])
                stats[metric] = MetricStats(st.source, st.n, st.total, st.total_sq, st.gram, st.xty, st.yty,
                                            st.n_traces, st.variance, traces_with_values=int(has.sum()),
                                            traces_without_values=int(n_traces - has.sum()))
            else:
                absent.append(metric)
        return cls(names, visits, stats, tuple(absent), (), source_format, dict(derivation or {}))

    @classmethod
    def from_traces(cls, traces: Any, states: tuple[str, ...] | list[str] | None = None) -> CostModel:
        """The model of labelled traces (their ``state`` column, as ``ChainEstimator`` reads it); invalid episodes
        are left out, as from the counts. ``states`` fixes the vocabulary and order (e.g. ``chain.state_names``)."""
        usable = traces.select_traces(traces.outcomes() != _INVALID)
        if states is not None:
            names = [str(s) for s in states]
            codes = state_codes(usable, names)
        else:
            codes, names = usable.state_labels()
        table = usable.to_arrow()
        values, derivation = usage_arrays(table, usable.offsets)
        totals = trace_totals(table, usable.offsets)
        return cls.from_arrays(codes, usable.offsets, tuple(names), values, totals,
                               source_format=reader_name(traces.report.format), derivation=derivation)

    def merge(self, other: CostModel) -> CostModel:
        """The model of the union of two disjoint sets of episodes (partitions), over the union of their states.

        Steps-route statistics add exactly; totals-route normal equations add exactly and the per-visit variances
        are averaged with the episode counts as weights.
        """
        names = self.state_names + tuple(s for s in other.state_names if s not in set(self.state_names))
        a, b = self.reindexed(names), other.reindexed(names)
        stats: dict[str, MetricStats] = {}
        for metric in METRICS:
            sa, sb = a.metrics.get(metric), b.metrics.get(metric)
            if sa is None or sb is None:
                one = sa or sb
                if one is not None:
                    stats[metric] = one
                continue
            if sa.source != sb.source:
                # One partition has step values, the other only totals: keep the steps (the finer route).
                stats[metric] = sa if sa.source == STEPS else sb
                continue
            common: dict[str, Any] = {"check_traces": sa.check_traces + sb.check_traces,
                      "check_reported": sa.check_reported + sb.check_reported,
                      "check_steps": sa.check_steps + sb.check_steps,
                      "traces_with_values": sa.traces_with_values + sb.traces_with_values,
                      "traces_without_values": sa.traces_without_values + sb.traces_without_values}
            if sa.source == STEPS:
                stats[metric] = MetricStats(STEPS, sa.n + sb.n, sa.total + sb.total, sa.total_sq + sb.total_sq,
                                            **common)
            else:
                assert sa.gram is not None and sb.gram is not None and sa.xty is not None and sb.xty is not None
                assert sa.variance is not None and sb.variance is not None
                w = sa.n_traces + sb.n_traces
                var = (sa.variance * sa.n_traces + sb.variance * sb.n_traces) / max(1, w)
                stats[metric] = MetricStats(TOTALS, sa.n + sb.n, sa.total, sa.total_sq, sa.gram + sb.gram,
                                            sa.xty + sb.xty, sa.yty + sb.yty, w, var, **common)
        absent = tuple(mt for mt in METRICS if mt not in stats)
        derivation = {k: int(self.extra.get(k, 0)) + int(other.extra.get(k, 0))
                      for k in sorted({*self.extra, *other.extra})}
        fmt = self.source_format if self.source_format == other.source_format else None
        return CostModel(names, a.visits + b.visits, stats, absent, (), fmt, derivation)

    def reindexed(self, names: tuple[str, ...]) -> CostModel:
        """The same model over the vocabulary ``names`` (a superset of its states; new states have no data)."""
        if tuple(names) == self.state_names:
            return self
        pos = {s: i for i, s in enumerate(names)}
        missing = [s for s in self.state_names if s not in pos]
        if missing:
            raise ChainValidationError(f"state {missing[0]!r} of the cost model is not among {list(names)}")
        idx = np.array([pos[s] for s in self.state_names], dtype=np.int64)
        m = len(names)

        def vec(v: NDArray[Any]) -> NDArray[Any]:
            out = np.zeros(m, dtype=v.dtype)
            out[idx] = v
            return out

        stats: dict[str, MetricStats] = {}
        for metric, st in self.metrics.items():
            gram = xty = var = None
            if st.gram is not None and st.xty is not None and st.variance is not None:
                gram = np.zeros((m, m))
                gram[np.ix_(idx, idx)] = st.gram
                xty, var = vec(st.xty), vec(st.variance)
            stats[metric] = MetricStats(st.source, vec(st.n), vec(st.total).astype(np.float64),
                                        vec(st.total_sq).astype(np.float64), gram, xty, st.yty,
                                        st.n_traces, var, st.check_traces, st.check_reported, st.check_steps,
                                        st.traces_with_values, st.traces_without_values)
        return CostModel(tuple(names), vec(self.visits), stats, self.absent, self.notes, self.source_format,
                         dict(self.extra))

    # ------------------------------------------------------------------ queries
    @property
    def available(self) -> tuple[str, ...]:
        """Metrics with data, in display order."""
        return tuple(mt for mt in METRICS if mt in self.metrics)

    @property
    def n_states(self) -> int:
        return len(self.state_names)

    def per_visit(self, metric: str, state_names: tuple[str, ...] | None = None) -> PerVisitCost:
        """Mean, variance and standard error of one visit's cost at every state (``state_names``: the chain's
        states, in its order; states the model has not seen get the pooled law and are marked imputed)."""
        if metric not in METRICS:
            raise KeyError(f"unknown cost metric {metric!r}; metrics are {', '.join(METRICS)}")
        if metric not in self.metrics:
            raise KeyError(self.absence_reason(metric))
        model = self
        if state_names is not None and tuple(state_names) != self.state_names:
            extra = tuple(s for s in state_names if s not in set(self.state_names))
            model = self.reindexed(self.state_names + extra)
            order = np.array([model.state_names.index(s) for s in state_names], dtype=np.int64)
        else:
            order = np.arange(self.n_states)
        full = model._per_visit(metric)
        cov = full.covariance[np.ix_(order, order)] if full.covariance is not None else None
        return PerVisitCost(metric, full.source, full.mean[order], full.variance[order], full.std_error[order],
                            full.n[order], full.imputed[order], cov)

    def _per_visit(self, metric: str) -> PerVisitCost:
        st = self.metrics[metric]
        m = self.n_states
        if st.source == STEPS:
            n = st.n.astype(np.float64)
            has = n > 0
            mean = np.divide(st.total, n, out=np.zeros(m), where=has)
            ss = np.clip(st.total_sq - np.divide(st.total**2, n, out=np.zeros(m), where=has), 0.0, None)
            ss[ss <= 1e-12 * st.total_sq] = 0.0  # Σx² − (Σx)²/n cancels to rounding noise when every x is equal
            two = n >= 2
            var = np.divide(ss, n - 1, out=np.zeros(m), where=two)
            dof = float((n[two] - 1).sum())
            total_n = float(n.sum())
            pooled_mean = float(st.total.sum() / total_n) if total_n else 0.0
            if dof > 0:
                pooled_var = float(ss[two].sum() / dof)
            elif total_n > 1:
                pooled_var = max(0.0, float(st.total_sq.sum() - st.total.sum() ** 2 / total_n) / (total_n - 1))
            else:
                pooled_var = 0.0
            var = np.where(two, var, pooled_var)
            imputed = ~has
            mean = np.where(has, mean, pooled_mean)
            se = np.where(has, np.sqrt(var / np.maximum(n, 1.0)), np.sqrt(pooled_var))
            return PerVisitCost(metric, STEPS, mean, var, se, st.n.copy(), imputed)
        assert st.gram is not None and st.xty is not None and st.variance is not None
        seen = np.diag(st.gram) > 0
        c = np.zeros(m)
        cov = np.zeros((m, m))
        if seen.any():
            idx = np.flatnonzero(seen)
            G = st.gram[np.ix_(idx, idx)]
            cs, rank = _nnls_from_normal_equations(G, st.xty[idx])
            c[idx] = cs
            rss = max(0.0, st.yty - 2.0 * float(cs @ st.xty[idx]) + float(cs @ G @ cs))
            s2 = rss / max(1, st.n_traces - rank)
            cov[np.ix_(idx, idx)] = s2 * np.linalg.pinv(G)
        visits = st.n.astype(np.float64)
        pooled_mean = float((c * visits).sum() / visits.sum()) if visits.sum() else 0.0
        pooled_var = float((st.variance * visits).sum() / visits.sum()) if visits.sum() else 0.0
        mean = np.where(seen, c, pooled_mean)
        var = np.where(seen, st.variance, pooled_var)
        se = np.where(seen, np.sqrt(np.clip(np.diag(cov), 0.0, None)), np.sqrt(pooled_var))
        cov[~seen, ~seen] = pooled_var
        return PerVisitCost(metric, TOTALS, mean, var, se, st.n.copy(), ~seen, cov)

    def absence_reason(self, metric: str | None = None) -> str:
        """Why a metric (or every metric) has no cost data, naming the reader when it is known."""
        from tracetochain.chain._cost_sources import source_note

        what = f"no {METRICS[metric][1]}" if metric else "no cost data (tokens, dollars or timestamps)"
        note = source_note(self.source_format)
        return f"{what} in these traces" + (f": {note}" if note else "")

    def findings(self, metric: str) -> list[str]:
        """Plain sentences about how a metric was estimated (route, coverage, checks, imputations)."""
        st = self.metrics[metric]
        _, what = METRICS[metric]
        out: list[str] = []
        if st.source == TOTALS:
            out.append(f"The steps carry no {what}: per-state costs are estimated from the episode totals of "
                       f"{st.n_traces} episodes by non-negative least squares on the visit counts (the split "
                       "between states that are always visited together is not identified).")
        if st.traces_without_values:
            out.append(f"{st.traces_without_values} of {st.traces_with_values + st.traces_without_values} episodes "
                       f"have no {what}; they are left out of this metric.")
        if st.check_traces and st.check_reported > 0:
            ratio = st.check_steps / st.check_reported
            out.append(f"On the {st.check_traces} episodes with reported totals the step values add up to "
                       f"{ratio:.1%} of them.")
        zeros = sum(int(self.extra.get(f"zeros_only_{col}", 0)) for col in
                    (("tokens_in", "tokens_out") if metric == "tokens" else (metric,)))
        if zeros:
            out.append(f"{zeros} episode(s) record only zeros for {what}: taken as not tracked, not as free.")
        if metric == "seconds":
            gaps, negative = int(self.extra.get("seconds_from_gaps", 0)), int(self.extra.get("negative_durations", 0))
            if gaps:
                out.append(f"{gaps} step durations have no end time and are taken as the time until the next step "
                           "starts (the last step of such an episode has none).")
            if negative:
                out.append(f"{negative} negative step durations (end before start) are left out.")
        return out

    # ------------------------------------------------------------------ io
    def to_dict(self) -> dict[str, Any]:
        """The versioned JSON document (what ``fit`` writes into the chain file's ``metadata["costs"]``)."""
        return {"kind": COST_MODEL_KIND, "schema_version": COST_MODEL_SCHEMA_VERSION,
                "state_names": list(self.state_names), "visits": self.visits.tolist(),
                "metrics": {k: v.to_dict() for k, v in self.metrics.items()}, "absent": list(self.absent),
                "notes": list(self.notes), "source_format": self.source_format,
                "derivation": dict(sorted(self.extra.items()))}

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> CostModel:
        """Rebuild from :meth:`to_dict` output (checks the kind and schema version)."""
        if not isinstance(doc, dict) or doc.get("kind") != COST_MODEL_KIND:
            raise SchemaVersionError(f"not a tracetochain cost model document (expected kind {COST_MODEL_KIND!r})")
        version = doc.get("schema_version")
        if version != COST_MODEL_SCHEMA_VERSION:
            raise SchemaVersionError(f"cost model has schema_version {version!r}; this tracetochain reads version "
                                     f"{COST_MODEL_SCHEMA_VERSION}. Upgrade tracetochain or refit the chain.")
        return cls(tuple(str(s) for s in doc["state_names"]), np.asarray(doc["visits"], dtype=np.int64),
                   {k: MetricStats.from_dict(v) for k, v in doc["metrics"].items()},
                   tuple(doc.get("absent", ())), tuple(doc.get("notes", ())), doc.get("source_format"),
                   dict(doc.get("derivation") or {}))

    @classmethod
    def of_chain(cls, chain: Any) -> CostModel | None:
        """The cost model a fitted chain carries (``metadata["costs"]``), or None (fitted before costs were
        recorded, or built by hand)."""
        doc = getattr(chain, "metadata", {}).get("costs")
        return cls.from_dict(doc) if isinstance(doc, dict) else None

    def __repr__(self) -> str:
        return (f"CostModel({self.n_states} states, metrics: {', '.join(self.available) or 'none'}"
                f"{'; absent: ' + ', '.join(self.absent) if self.absent else ''})")
